/*
 * dbscan.c
 *    gpu_dbscan(query, eps, min_pts, device, metric): DBSCAN of the query's
 *    rows, one output row per input row, in the query's order.
 *
 * The rules (PostGIS ST_ClusterDBSCAN compatible up to the cluster numbers,
 * deterministic) are those
 * of gc_dbscan_params in common/backend.h; the CPU back end is
 * src/core/dbscan.c and the GPU back end cuda/dbscan.cu, and both give the
 * same answer.
 */
#include "postgres.h"

#include "gpuclust.h"
#include "output.h"
#include "dbscan.h"

PG_FUNCTION_INFO_V1(gpu_dbscan);

const GcAlgorithm GcDbscan = {"dbscan", "DBSCAN", gc_dbscan_phase_names};

/* Runs DBSCAN on a back end. */
gc_status
GcRunDbscan(const gc_backend_api *api, const gc_exec *exec, const GcInput *in, void *arg)
{
	GcDbscanJob *job = arg;

	return api->dbscan(exec, in->x, in->dtype, in->n, in->d, &job->params, &job->result);
}

/* gpu_dbscan(query text, eps float8, min_pts int, device text, metric text) */
Datum
gpu_dbscan(PG_FUNCTION_ARGS)
{
	text	   *query = GcArgText(fcinfo, 0, "query");
	GcDbscanJob job;
	gc_error	err;
	GcCall		call;
	GcRows		rows;

	memset(&job, 0, sizeof(job));
	gc_dbscan_params_init(&job.params);
	job.params.eps = GcArgFloat8(fcinfo, 1, "eps");
	job.params.min_pts = GcArgInt32(fcinfo, 2, "min_pts");
	job.params.metric = GcArgMetric(fcinfo, 4, GcDbscan.title);
	GcReportCheck(gc_check_dbscan(&job.params, -1, 0, &err), &err);

	GcCallBegin(&call, fcinfo, &GcDbscan, 3);
	GcCallGather(&call, query);
	GcCallMetric(&call, job.params.metric);
	GcReportCheck(gc_check_dbscan(&job.params, call.in.n, call.in.d, &err), &err);

	job.result.cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
	job.result.is_core = GcAlloc(&call, sizeof(uint8) * call.in.n, "core flags");
	GcCallCompute(&call, GcRunDbscan, &job);

	GcRowsInit(&rows, &call);
	GcRowsAdd(&rows, GC_COL_INT32, job.result.cluster, true);
	GcRowsAdd(&rows, GC_COL_BOOL, job.result.is_core, false);
	GcCallOutputRows(&call, fcinfo, &rows, NULL);
	return (Datum) 0;
}
