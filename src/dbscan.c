/*
 * dbscan.c
 *    gpu_dbscan(query, eps, min_pts, device): DBSCAN of the query's rows,
 *    one output row per input row, in the query's order.
 *
 * The rules (PostGIS ST_ClusterDBSCAN compatible, deterministic) are those
 * of gc_dbscan_params in cuda/gpuclust_cuda.h; the CPU back end is
 * src/core/dbscan.c and the GPU back end cuda/dbscan.cu, and both give the
 * same answer.
 */
#include "postgres.h"

#include <math.h>

#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpu_dbscan);

/* gpu_dbscan(query text, eps float8, min_pts int, device text) */
Datum
gpu_dbscan(PG_FUNCTION_ARGS)
{
	text	   *query = GcArgText(fcinfo, 0, "query");
	double		eps = GcArgFloat8(fcinfo, 1, "eps");
	int32		min_pts = GcArgInt32(fcinfo, 2, "min_pts");
	gc_dbscan_params params;
	gc_dbscan_result result;
	const gc_cuda_api *api;
	GcCall		call;
	Tuplestorestate *ts;
	TupleDesc	desc;
	bool		done = false;

	if (!(eps > 0) || isinf(eps))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("eps must be positive and finite"),
				 errdetail("eps is %g.", eps),
				 errhint("eps is the neighbourhood radius, in the units of the features.")));
	if (min_pts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_pts must be at least 1"),
				 errdetail("min_pts is %d.", min_pts),
				 errhint("min_pts counts the point itself, as in ST_ClusterDBSCAN.")));

	GcCallBegin(&call, fcinfo, "dbscan", 3);
	GcCallGather(&call, query);

	memset(&params, 0, sizeof(params));
	params.struct_size = sizeof(params);
	params.eps = eps;
	params.min_pts = min_pts;
	result.cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
	result.is_core = GcAlloc(&call, sizeof(uint8) * call.in.n, "core flags");
	result.n_clusters = 0;

	if (call.in.n > 0 && GcCallChooseGpu(&call, &api))
		done = GcCallGpuDone(&call, api,
							 api->dbscan(call.device_id, call.in.x, call.in.n, call.in.d,
										 &params, &result, &call.gpu,
										 GcCancelRequested, NULL),
							 "DBSCAN");
	if (call.in.n > 0 && !done)
	{
		GcCallComputeStart(&call);
		GcCallCpuDone(&call, gc_dbscan_cpu(call.in.x, call.in.n, call.in.d, &params,
										   &result, GcCancelRequested, NULL, call.errbuf));
	}

	ts = GcCallOutputStart(&call, fcinfo, &desc);
	for (int64 i = 0; i < call.in.n; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = Int64GetDatum(call.in.ids[i]);
		if (result.cluster[i] < 0)
			nulls[1] = true;
		else
			values[1] = Int32GetDatum(result.cluster[i]);
		values[2] = BoolGetDatum(result.is_core[i] != 0);
		tuplestore_putvalues(ts, desc, values, nulls);
		if ((i & 0xffff) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	GcCallEnd(&call, NULL);
	return (Datum) 0;
}
