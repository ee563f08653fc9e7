/*
 * kmeans.c
 *    gpu_kmeans(query, k, max_iter, tol, seed, init, initial_centroids,
 *    device): k-means (Lloyd) of the query's rows, one output row per input
 *    row, in the query's order, with its cluster and its distance to the
 *    centroid; gpu_kmeans_centroids(<the same arguments>): one row per
 *    cluster with its centroid, size and inertia.
 *
 * The rules are at the top of src/core/kmeans.c; the CPU back end is
 * src/core/kmeans.c and the GPU back end cuda/kmeans.cu (after seeds 001
 * and 002), and both start from the same initial centroids
 * (src/core/kmeans_init.h).  gpuclust.kmeans_precision chooses the
 * arithmetic of the GPU's distance products.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpu_kmeans);
PG_FUNCTION_INFO_V1(gpu_kmeans_centroids);

#define KM_ARG_QUERY		0
#define KM_ARG_K			1
#define KM_ARG_MAX_ITER		2
#define KM_ARG_TOL			3
#define KM_ARG_SEED			4
#define KM_ARG_INIT			5
#define KM_ARG_CENTROIDS	6
#define KM_ARG_DEVICE		7

#define KM_DEFAULT_MAX_ITER 300
#define KM_DEFAULT_TOL		1e-4

/* Parses the init argument (NULL means 'k-means++'). */
static gc_kmeans_init
KmInit(FunctionCallInfo fcinfo)
{
	char	   *s;

	if (PG_ARGISNULL(KM_ARG_INIT))
		return GC_KMEANS_INIT_PLUSPLUS;
	s = text_to_cstring(PG_GETARG_TEXT_PP(KM_ARG_INIT));
	if (pg_strcasecmp(s, "k-means++") == 0)
		return GC_KMEANS_INIT_PLUSPLUS;
	if (pg_strcasecmp(s, "random") == 0)
		return GC_KMEANS_INIT_RANDOM;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown k-means init method \"%s\"", s),
			 errdetail("init chooses the initial centroids when initial_centroids is NULL."),
			 errhint("Use init => 'k-means++' (the default) or 'random', or pass initial_centroids.")));
	return GC_KMEANS_INIT_PLUSPLUS;
}

/*
 * Checks initial_centroids, a k x d two-dimensional float8 array without
 * NULLs or non-finite values, and returns its values row-major; *d_out gets
 * its second dimension.
 */
static double *
KmInitialCentroids(ArrayType *arr, int32 k, int32 *d_out)
{
	int			ndim = ARR_NDIM(arr);
	int		   *dims = ARR_DIMS(arr);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	double	   *out;

	if (ARR_ELEMTYPE(arr) != FLOAT8OID)
		elog(ERROR, "initial_centroids is not a float8 array, please report a bug");
	if (ndim != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids must be a two-dimensional array"),
				 errdetail("It has %d dimension%s; it needs one row of features per cluster.",
						   ndim, ndim == 1 ? "" : "s"),
				 errhint("Write it as ARRAY[[x1, y1], [x2, y2], ...], k rows of d values.")));
	if (dims[0] != k)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids has %d rows, but k is %d", dims[0], k),
				 errdetail("Each row of initial_centroids is the starting point of one cluster."),
				 errhint("Pass exactly k rows, or leave initial_centroids NULL to use init.")));
	deconstruct_array(arr, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &nelems);
	out = palloc(sizeof(double) * nelems);
	for (int i = 0; i < nelems; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("initial_centroids must not contain NULL"),
					 errdetail("Row %d, column %d is NULL.", i / dims[1] + 1, i % dims[1] + 1),
					 errhint("Give every feature of every initial centroid a value.")));
		out[i] = DatumGetFloat8(elems[i]);
		if (!isfinite(out[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("initial_centroids must contain finite numbers"),
					 errdetail("Row %d, column %d is %g.", i / dims[1] + 1, i % dims[1] + 1, out[i]),
					 errhint("Replace NaN and infinity with finite coordinates.")));
	}
	*d_out = dims[1];
	return out;
}

/* The work behind both SQL functions. */
static Datum
KmRun(FunctionCallInfo fcinfo, bool per_cluster)
{
	text	   *query = GcArgText(fcinfo, KM_ARG_QUERY, "query");
	int32		k = GcArgInt32(fcinfo, KM_ARG_K, "k");
	int32		max_iter = PG_ARGISNULL(KM_ARG_MAX_ITER) ? KM_DEFAULT_MAX_ITER : PG_GETARG_INT32(KM_ARG_MAX_ITER);
	double		tol = PG_ARGISNULL(KM_ARG_TOL) ? KM_DEFAULT_TOL : PG_GETARG_FLOAT8(KM_ARG_TOL);
	int32		seed = PG_ARGISNULL(KM_ARG_SEED) ? 0 : PG_GETARG_INT32(KM_ARG_SEED);
	gc_kmeans_init init = KmInit(fcinfo);
	ArrayType  *given = PG_ARGISNULL(KM_ARG_CENTROIDS) ? NULL : PG_GETARG_ARRAYTYPE_P(KM_ARG_CENTROIDS);
	double	   *given_values = NULL;
	int32		given_d = 0;
	gc_kmeans_params params;
	gc_kmeans_result result;
	const gc_cuda_api *api;
	GcCall		call;
	Tuplestorestate *ts;
	TupleDesc	desc;
	bool		done = false;
	char		extra[128];
	int64		n;
	int32		d;

	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1"),
				 errdetail("k is %d.", k),
				 errhint("k is the number of clusters to find.")));
	if (max_iter < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_iter must be at least 1"),
				 errdetail("max_iter is %d.", max_iter),
				 errhint("max_iter bounds the number of Lloyd iterations; the default is 300.")));
	if (!(tol >= 0) || isinf(tol))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a finite number >= 0"),
				 errdetail("tol is %g.", tol),
				 errhint("tol is relative to the mean variance of the features, as in scikit-learn; the default is 1e-4, and 0 iterates until no row changes cluster.")));
	if (given)
	{
		given_values = KmInitialCentroids(given, k, &given_d);
		init = GC_KMEANS_INIT_GIVEN;
	}

	GcCallBegin(&call, fcinfo, "kmeans", KM_ARG_DEVICE);
	GcCallGather(&call, query);
	n = call.in.n;
	d = call.in.d;

	if (k > n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k (%d) is greater than the number of rows (%lld)", k, (long long) n),
				 errdetail("Every cluster starts at a distinct row or at an initial centroid and needs a row."),
				 errhint("Use a smaller k, or a query that returns at least k rows.")));
	if (given && given_d != d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids has %d columns, but the query has %d features", given_d, d),
				 errdetail("Each initial centroid needs one value per feature of the query."),
				 errhint("Pass a k x %d array.", d)));

	memset(&params, 0, sizeof(params));
	params.struct_size = sizeof(params);
	params.k = k;
	params.max_iter = max_iter;
	params.tol = tol;
	params.seed = (uint64) (int64) seed;
	params.init = init;
	params.initial_centroids = given_values;
	params.precision = (gc_precision) gc_kmeans_precision_guc;

	result.labels = GcAlloc(&call, sizeof(int32) * n, "cluster ids");
	result.distance = GcAlloc(&call, sizeof(double) * n, "distances");
	result.centroids = GcAlloc(&call, sizeof(double) * k * d, "centroids");
	result.sizes = GcAlloc(&call, sizeof(int64) * k, "cluster sizes");
	result.inertia = GcAlloc(&call, sizeof(double) * k, "inertias");
	result.iterations = 0;

	if (GcCallChooseGpu(&call, &api))
		done = GcCallGpuDone(&call, api,
							 api->kmeans(call.device_id, call.in.x, n, d, &params, &result,
										 &call.gpu, GcCancelRequested, NULL),
							 "k-means");
	if (!done)
	{
		GcCallComputeStart(&call);
		GcCallCpuDone(&call, gc_kmeans_cpu(call.in.x, n, d, &params, &result,
										   GcCancelRequested, NULL, call.errbuf));
	}

	ts = GcCallOutputStart(&call, fcinfo, &desc);
	if (!per_cluster)
	{
		for (int64 i = 0; i < n; i++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = Int64GetDatum(call.in.ids[i]);
			values[1] = Int32GetDatum(result.labels[i]);
			values[2] = Float8GetDatum(result.distance[i]);
			tuplestore_putvalues(ts, desc, values, nulls);
			if ((i & 0xffff) == 0)
				CHECK_FOR_INTERRUPTS();
		}
	}
	else
	{
		Datum	   *elems = palloc(sizeof(Datum) * d);

		for (int32 j = 0; j < k; j++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			for (int32 t = 0; t < d; t++)
				elems[t] = Float8GetDatum(result.centroids[(int64) j * d + t]);
			values[0] = Int32GetDatum(j);
			values[1] = PointerGetDatum(construct_array(elems, d, FLOAT8OID, sizeof(float8),
														FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			values[2] = Int64GetDatum(result.sizes[j]);
			values[3] = Float8GetDatum(result.inertia[j]);
			tuplestore_putvalues(ts, desc, values, nulls);
		}
	}
	if (call.used_gpu && call.in.d > 32 && params.precision == GC_PRECISION_FP32)
		snprintf(extra, sizeof(extra), "iterations=%d decided_in_double=%lld to_fp32=%lld",
				 result.iterations, (long long) call.gpu.counts[0], (long long) call.gpu.counts[2]);
	else
		snprintf(extra, sizeof(extra), "iterations=%d", result.iterations);
	GcCallEnd(&call, extra);
	return (Datum) 0;
}

/* gpu_kmeans(query, k, max_iter, tol, seed, init, initial_centroids, device) */
Datum
gpu_kmeans(PG_FUNCTION_ARGS)
{
	return KmRun(fcinfo, false);
}

/* gpu_kmeans_centroids(<the same arguments>) */
Datum
gpu_kmeans_centroids(PG_FUNCTION_ARGS)
{
	return KmRun(fcinfo, true);
}
