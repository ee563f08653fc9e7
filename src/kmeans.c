/*
 * kmeans.c
 *    gpu_kmeans(query, k, max_iter, tol, seed, init, initial_centroids,
 *    device, n_init, metric): k-means (Lloyd) of the query's rows, one
 *    output row per input row, in the query's order, with its cluster and
 *    its distance to the centroid; gpu_kmeans_centroids(<the same
 *    arguments>): one row per cluster with its centroid, size and inertia;
 *    gpu_kmeans_assign(query, centroids, metric, device): the rows of the
 *    query assigned to the centroids of a fitted model, as gpu_kmeans's
 *    final assignment would assign them.
 *
 * The rules are at the top of src/core/kmeans.c; the CPU back end is
 * src/core/kmeans.c and the GPU back end cuda/kmeans*.cu (after Li, Zhao
 * and Chu, "Speeding up K-Means Algorithm by GPUs", and Minnaar, "A CUDA
 * Implementation of the K-Means Clustering Algorithm"), and both start from
 * the same initial centroids (common/kmeans_init.h).
 * gpuclust.kmeans_precision chooses the arithmetic of the GPU's distance
 * products.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "gpuclust.h"
#include "output.h"
#include "kmeans.h"

int			gc_kmeans_precision_guc = GC_PRECISION_FP32;

static const struct config_enum_entry precision_options[] = {
	{"fp32", GC_PRECISION_FP32, false},
	{"tf32", GC_PRECISION_TF32, false},
	{NULL, 0, false}
};

PG_FUNCTION_INFO_V1(gpu_kmeans);
PG_FUNCTION_INFO_V1(gpu_kmeans_centroids);
PG_FUNCTION_INFO_V1(gpu_kmeans_assign);

const GcAlgorithm GcKmeans = {"kmeans", "k-means", gc_kmeans_phase_names};
const GcAlgorithm GcKmeansAssign = {"kmeans_assign", "k-means assignment", gc_kmeans_assign_phase_names};

/* Runs k-means on a back end. */
gc_status
GcRunKmeans(const gc_backend_api *api, const gc_exec *exec, const GcInput *in, void *arg)
{
	GcKmeansJob *job = arg;

	return api->kmeans(exec, in->x, in->dtype, in->n, in->d, &job->params, &job->result);
}

#define KM_ARG_QUERY		0
#define KM_ARG_K			1
#define KM_ARG_MAX_ITER		2
#define KM_ARG_TOL			3
#define KM_ARG_SEED			4
#define KM_ARG_INIT			5
#define KM_ARG_CENTROIDS	6
#define KM_ARG_DEVICE		7
#define KM_ARG_N_INIT		8
#define KM_ARG_METRIC		9

#define KA_ARG_QUERY		0
#define KA_ARG_CENTROIDS	1
#define KA_ARG_METRIC		2
#define KA_ARG_DEVICE		3

/* Parses the init argument (NULL: the default of common/params.h, greedy 'k-means++'). */
static gc_kmeans_init
KmInit(FunctionCallInfo fcinfo)
{
	gc_kmeans_params defaults;

	gc_kmeans_params_init(&defaults);
	if (PG_ARGISNULL(KM_ARG_INIT))
		return defaults.init;
	return GcKmeansInitFromText(PG_GETARG_TEXT_PP(KM_ARG_INIT));
}

/* The value of an init argument: 'k-means++' or 'random' in any case. */
gc_kmeans_init
GcKmeansInitFromText(text *arg)
{
	char	   *s = text_to_cstring(arg);

	if (pg_strcasecmp(s, "k-means++") == 0)
		return GC_KMEANS_INIT_PLUSPLUS;
	if (pg_strcasecmp(s, "plain-k-means++") == 0)
		return GC_KMEANS_INIT_PLUSPLUS_PLAIN;
	if (pg_strcasecmp(s, "random") == 0)
		return GC_KMEANS_INIT_RANDOM;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown k-means init method \"%s\"", s),
			 errdetail("init chooses the initial centroids when initial_centroids is NULL."),
			 errhint("Use init => 'k-means++' (the default), 'plain-k-means++' or 'random', or pass initial_centroids.")));
	return GC_KMEANS_INIT_PLUSPLUS;
}

/*
 * For the cosine metric, scales the k x d centroids (initial_centroids or
 * centroids, named by what) to unit length as the rows are; an all-zero
 * centroid has no direction and is an error.
 */
static void
KmUnitCentroids(double *c, int32 k, int32 d, const char *what)
{
	for (int32 j = 0; j < k; j++)
		if (!gc_unit_row_f64(c + (Size) j * d, d))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("row %d of %s is all zero", j + 1, what),
					 errdetail("With the cosine metric every centroid is a direction, and a zero vector has none."),
					 errhint("Give every centroid a nonzero value, or use metric => 'euclidean'.")));
}

/*
 * Checks a k x d two-dimensional float8 array without NULLs (initial_centroids
 * or centroids, named by what) and returns its values row-major; *k_out and
 * *d_out get its dimensions.  Their values are checked with the other
 * parameters.
 */
static double *
KmCentroidArray(ArrayType *arr, const char *what, int32 *k_out, int32 *d_out)
{
	int			ndim = ARR_NDIM(arr);
	int		   *dims = ARR_DIMS(arr);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	double	   *out;

	if (ARR_ELEMTYPE(arr) != FLOAT8OID)
		elog(ERROR, "%s is not a float8 array, please report a bug", what);
	if (ndim != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a two-dimensional array", what),
				 errdetail("It has %d dimension%s; it needs one row of features per cluster.",
						   ndim, ndim == 1 ? "" : "s"),
				 strcmp(what, "centroids") == 0 ?
				 errhint("Pass array_agg(centroid ORDER BY cluster_id) over gpu_kmeans_centroids, or ARRAY[[x1, y1], [x2, y2], ...], k rows of d values.") :
				 errhint("Write it as ARRAY[[x1, y1], [x2, y2], ...], k rows of d values.")));
	deconstruct_array(arr, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &nelems);
	out = palloc(sizeof(double) * nelems);
	for (int i = 0; i < nelems; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", what),
					 errdetail("Row %d, column %d is NULL.", i / dims[1] + 1, i % dims[1] + 1),
					 strcmp(what, "centroids") == 0 ?
					 errhint("Give every feature of every centroid a value.") :
					 errhint("Give every feature of every initial centroid a value.")));
		out[i] = DatumGetFloat8(elems[i]);
	}
	*k_out = dims[0];
	*d_out = dims[1];
	return out;
}

/*
 * Checks the values of the k x d centroids c (initial_centroids or
 * centroids, named by what) by the rules of features of precision dtype
 * (GC_F64 before the rows are gathered), with the features' SQLSTATEs.
 */
static void
KmCheckCentroidValues(const char *what, const double *c, int32 k, int32 d, gc_dtype dtype)
{
	gc_error	err;
	gc_value_verdict verdict;
	gc_status	st = gc_check_centroid_values(what, c, k, d, dtype, &err, &verdict);

	GcReportValueCheck(st, &err, verdict);
}

/*
 * Checks initial_centroids, a k x d two-dimensional float8 array without
 * NULLs, and returns its values row-major; *d_out gets its second
 * dimension.
 */
static double *
KmInitialCentroids(ArrayType *arr, int32 k, int32 *d_out)
{
	int32		rows;
	double	   *out = KmCentroidArray(arr, "initial_centroids", &rows, d_out);

	if (rows != k)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids has %d rows, but k is %d", rows, k),
				 errdetail("Each row of initial_centroids is the starting point of one cluster."),
				 errhint("Pass exactly k rows, or leave initial_centroids NULL to use init.")));
	return out;
}

/* Returns one row per input row: its id, cluster and distance; ends the call. */
static void
KmRowOutput(GcCall *call, FunctionCallInfo fcinfo, const int32 *labels, const double *distance,
			const char *extra)
{
	GcRows		rows;

	GcRowsInit(&rows, call);
	GcRowsAdd(&rows, GC_COL_INT32, labels, false);
	GcRowsAdd(&rows, GC_COL_FLOAT8, distance, false);
	GcCallOutputRows(call, fcinfo, &rows, extra);
}

/* Returns the output rows, one per input row or one per cluster; ends the call. */
static void
KmOutput(GcCall *call, GcKmeansJob *job, FunctionCallInfo fcinfo, bool per_cluster,
		 const char *extra)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	const gc_kmeans_result *r = &job->result;
	int32		d = call->in.d;
	Datum	   *elems;

	if (!per_cluster)
	{
		KmRowOutput(call, fcinfo, r->labels, r->distance, extra);
		return;
	}
	/* an empty input has no clusters */
	ts = GcCallOutputStart(call, fcinfo, &desc, call->in.n > 0 ? job->params.k : 0);
	elems = palloc(sizeof(Datum) * d);
	for (int32 j = 0; call->in.n > 0 && j < job->params.k; j++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		for (int32 t = 0; t < d; t++)
			elems[t] = Float8GetDatum(r->centroids[(int64) j * d + t]);
		values[0] = Int32GetDatum(j);
		values[1] = PointerGetDatum(construct_array(elems, d, FLOAT8OID, sizeof(float8),
													FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[2] = Int64GetDatum(r->sizes[j]);
		values[3] = Float8GetDatum(r->inertia[j]);
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	GcCallEnd(call, extra);
}

/*
 * Appends to the timing NOTICE's extra what the GPU's checked product did
 * (d > 32 in single precision): the distances decided in double, and the
 * blocks converted to single precision.
 */
static void
KmProductCounts(const GcCall *call, gc_precision precision, char *extra, size_t size)
{
	if (call->used_gpu && call->in.d > 32 && precision == GC_PRECISION_FP32)
		snprintf(extra + strlen(extra), size - strlen(extra),
				 " decided_in_double=%lld to_fp32=%lld",
				 (long long) call->timing.counts[0], (long long) call->timing.counts[2]);
}

/* The work behind both SQL functions. */
static Datum
KmRun(FunctionCallInfo fcinfo, bool per_cluster)
{
	text	   *query = GcArgText(fcinfo, KM_ARG_QUERY, "query");
	ArrayType  *given = PG_ARGISNULL(KM_ARG_CENTROIDS) ? NULL : PG_GETARG_ARRAYTYPE_P(KM_ARG_CENTROIDS);
	int32		given_d = 0;
	GcKmeansJob job;
	gc_kmeans_params *p = &job.params;
	gc_error	err;
	GcCall		call;
	char		extra[128];
	int64		n;
	int32		d;

	memset(&job, 0, sizeof(job));
	gc_kmeans_params_init(p);
	p->k = GcArgInt32(fcinfo, KM_ARG_K, "k");
	if (!PG_ARGISNULL(KM_ARG_MAX_ITER))
		p->max_iter = PG_GETARG_INT32(KM_ARG_MAX_ITER);
	if (!PG_ARGISNULL(KM_ARG_TOL))
		p->tol = PG_GETARG_FLOAT8(KM_ARG_TOL);
	if (!PG_ARGISNULL(KM_ARG_SEED))
		p->seed = (uint64) (int64) PG_GETARG_INT32(KM_ARG_SEED);
	p->init = KmInit(fcinfo);
	if (PG_NARGS() > KM_ARG_N_INIT && !PG_ARGISNULL(KM_ARG_N_INIT))
		p->n_init = PG_GETARG_INT32(KM_ARG_N_INIT);
	p->precision = (gc_precision) gc_kmeans_precision_guc;
	p->metric = GcArgMetric(fcinfo, KM_ARG_METRIC, GcKmeans.title);
	GcReportCheck(gc_check_kmeans(p, -1, 0, &err), &err);
	if (given)
	{
		double	   *c = KmInitialCentroids(given, p->k, &given_d);

		p->initial_centroids = c;
		p->init = GC_KMEANS_INIT_GIVEN;
		KmCheckCentroidValues("initial_centroids", c, p->k, given_d, GC_F64);
		GcReportCheck(gc_check_kmeans(p, -1, given_d, &err), &err);
		if (p->metric == GC_METRIC_COSINE)
			KmUnitCentroids(c, p->k, given_d, "initial_centroids");
	}

	GcCallBegin(&call, fcinfo, &GcKmeans, KM_ARG_DEVICE);
	GcCallGather(&call, query);
	GcCallMetric(&call, p->metric);
	n = call.in.n;
	d = call.in.d;
	GcReportCheck(gc_check_kmeans(p, n, given ? given_d : d, &err), &err);
	if (given && n > 0 && given_d != d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids has %d columns, but the query has %d features", given_d, d),
				 errdetail("Each initial centroid needs one value per feature of the query."),
				 errhint("Pass a k x %d array.", d)));
	if (given)
		KmCheckCentroidValues("initial_centroids", p->initial_centroids, p->k, d, call.in.dtype);

	job.result.labels = GcAlloc(&call, sizeof(int32) * n, "cluster ids");
	job.result.distance = GcAlloc(&call, sizeof(double) * n, "distances");
	job.result.centroids = GcAlloc(&call, sizeof(double) * p->k * d, "centroids");
	job.result.sizes = GcAlloc(&call, sizeof(int64) * p->k, "cluster sizes");
	job.result.inertia = GcAlloc(&call, sizeof(double) * p->k, "inertias");
	GcCallCompute(&call, GcRunKmeans, &job);

	if (p->n_init > 1)
		snprintf(extra, sizeof(extra), "iterations=%d best_run=%d of %d",
				 job.result.iterations, job.result.best_run + 1, p->n_init);
	else
		snprintf(extra, sizeof(extra), "iterations=%d", job.result.iterations);
	KmProductCounts(&call, p->precision, extra, sizeof(extra));
	KmOutput(&call, &job, fcinfo, per_cluster, extra);
	return (Datum) 0;
}

/* gpu_kmeans(query, k, max_iter, tol, seed, init, initial_centroids, device, n_init, metric) */
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

/* Runs a k-means assignment (a GcKmeansAssignJob) on a back end. */
gc_status
GcRunKmeansAssign(const gc_backend_api *api, const gc_exec *exec, const GcInput *in, void *arg)
{
	GcKmeansAssignJob *job = arg;

	return api->kmeans_assign(exec, in->x, in->dtype, in->n, in->d, &job->params, &job->result);
}

/*
 * gpu_kmeans_assign(query, centroids, metric, device): each row of the query
 * with the nearest of the k x d centroids (the lowest cluster number on a
 * tie) and its distance, as gpu_kmeans's final assignment gives them.
 */
Datum
gpu_kmeans_assign(PG_FUNCTION_ARGS)
{
	text	   *query = GcArgText(fcinfo, KA_ARG_QUERY, "query");
	GcKmeansAssignJob job;
	gc_kmeans_assign_params *p = &job.params;
	gc_error	err;
	GcCall		call;
	char		extra[128];
	int32		cd;
	int64		n;
	int32		d;

	if (PG_ARGISNULL(KA_ARG_CENTROIDS))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("centroids must not be NULL"),
				 errdetail("centroids is the k x d array of a fitted k-means model."),
				 errhint("Pass array_agg(centroid ORDER BY cluster_id) over gpu_kmeans_centroids.")));
	memset(&job, 0, sizeof(job));
	p->struct_size = sizeof(*p);
	p->precision = (gc_precision) gc_kmeans_precision_guc;
	p->centroids = KmCentroidArray(PG_GETARG_ARRAYTYPE_P(KA_ARG_CENTROIDS), "centroids", &p->k, &cd);
	p->metric = GcArgMetric(fcinfo, KA_ARG_METRIC, GcKmeans.title);
	KmCheckCentroidValues("centroids", p->centroids, p->k, cd, GC_F64);
	GcReportCheck(gc_check_kmeans_assign(p, -1, cd, &err), &err);
	if (p->metric == GC_METRIC_COSINE)
		KmUnitCentroids((double *) p->centroids, p->k, cd, "centroids");

	GcCallBegin(&call, fcinfo, &GcKmeansAssign, KA_ARG_DEVICE);
	GcCallGather(&call, query);
	GcCallMetric(&call, p->metric);
	n = call.in.n;
	d = call.in.d;
	if (n > 0 && cd != d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("centroids have %d column%s, but the query has %d feature%s",
						cd, cd == 1 ? "" : "s", d, d == 1 ? "" : "s"),
				 errdetail("Each centroid needs one value per feature of the query."),
				 errhint("Assign rows with the features the model was fitted on, in the same order.")));
	if (n > 0)
		KmCheckCentroidValues("centroids", p->centroids, p->k, d, call.in.dtype);
	GcReportCheck(gc_check_kmeans_assign(p, n, d, &err), &err);

	job.result.labels = GcAlloc(&call, sizeof(int32) * n, "cluster ids");
	job.result.distance = GcAlloc(&call, sizeof(double) * n, "distances");
	GcCallCompute(&call, GcRunKmeansAssign, &job);

	snprintf(extra, sizeof(extra), "k=%d", p->k);
	KmProductCounts(&call, p->precision, extra, sizeof(extra));
	KmRowOutput(&call, fcinfo, job.result.labels, job.result.distance, extra);
	return (Datum) 0;
}

/* Defines gpuclust.kmeans_precision. */
void
GcKmeansDefineGucs(void)
{
	DefineCustomEnumVariable("gpuclust.kmeans_precision",
							 "Arithmetic of the k-means distance products on the GPU: fp32 or tf32.",
							 "fp32 checks the TF32 products of tensor-core GPUs and decides close centroids in double precision; "
							 "tf32 takes the TF32 products unchecked: a little faster, with about 1e-3 relative error in distances.",
							 &gc_kmeans_precision_guc, GC_PRECISION_FP32, precision_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}
