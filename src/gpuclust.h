/*
 * gpuclust.h
 *    The life of one call of a clustering function (gpuclust.c): private
 *    memory context, gather, running the chosen back end and the CPU when
 *    the GPU is out of memory under auto, status to ereport, timing NOTICE;
 *    the argument helpers; and the settings of the call, gpuclust.device,
 *    gpuclust.timing, gpuclust.device_id and gpuclust.gpu_min_rows.
 *
 * Each other module has its own header: gather.h (the gather: GcInput,
 * GcGather), receiver.h, feature.h, range.h, buffer.h, precision.h (the
 * parts of the gather), output.h (result rows, GcCallOutputStart),
 * tuning.h (gc_tuning from the settings), gpu.h (the GPU back end), and
 * dbscan.h, kmeans.h, dpeaks.h (one run of each algorithm).
 *
 * A SQL function in src/<algorithm>.c is its arguments, its params struct
 * and its output rows:
 *
 *     GcCallBegin(&call, fcinfo, &GcDbscan, DEVICE_ARGNO);
 *     GcReportCheck(gc_check_dbscan(&job.params, -1, 0, &err), &err);
 *     GcCallGather(&call, query);
 *     GcReportCheck(gc_check_dbscan(&job.params, call.in.n, call.in.d, &err), &err);
 *     ...allocate the result arrays with GcAlloc...
 *     GcCallCompute(&call, RunDbscan, &job);
 *     ts = GcCallOutputStart(&call, fcinfo, &tupdesc, call.in.n);
 *     ...tuplestore_putvalues for each row...
 *     GcCallEnd(&call, NULL);
 */
#ifndef GPUCLUST_H
#define GPUCLUST_H

#include "postgres.h"

#include "compat.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/tuplestore.h"

#include "backend.h"
#include "checks.h"
#include "gather.h"
#include "metric.h"
#include "phases.h"

/* gpuclust.device and the device argument */
typedef enum GcDevice
{
	GC_DEVICE_AUTO = 0,
	GC_DEVICE_GPU = 1,
	GC_DEVICE_CPU = 2
} GcDevice;

/* The call's settings (gpuclust.c) */
extern int	gc_device_guc;
extern bool gc_timing_guc;
extern int	gc_device_id_guc;
extern int	gc_gpu_min_rows_guc;

/* What the glue needs to know of an algorithm. */
typedef struct GcAlgorithm
{
	const char *name;			/* in the timing NOTICE: "dbscan", "kmeans", ... */
	const char *title;			/* in messages: "DBSCAN", "k-means", ... */
	const char *const *phases;	/* [GC_PHASES] names of timing.phase_ms (common/phases.h), NULL: none */
} GcAlgorithm;

/* One call of a clustering function. */
typedef struct GcCall
{
	const GcAlgorithm *algorithm;
	MemoryContext cxt;			/* private context, deleted by GcCallEnd */
	MemoryContext oldcxt;
	GcDevice	requested;		/* from the device argument or gpuclust.device */
	bool		used_gpu;
	bool		gathered;		/* GcCallGather ran: GcCallEnd reports timing */
	bool		keep_cxt;		/* GcCallEnd leaves cxt (the results) to its parent */
	GcInput		in;
	gc_metric	metric;			/* for the timing NOTICE */
	gc_exec		exec;			/* device, tuning, cancel and timing for the back end */
	gc_tuning	tuning;
	gc_timing	timing;			/* filled by the back end that ran */
	instr_time	t_start;
	instr_time	t_phase;
	double		gather_ms;
	double		compute_ms;
	double		output_ms;
} GcCall;

/*
 * Runs an algorithm on a back end: one line that picks the api entry and
 * passes the call's input and the algorithm's own params and result.
 */
typedef gc_status (*GcRunFn) (const gc_backend_api *api, const gc_exec *exec,
							  const GcInput *in, void *job);

/* Argument helpers: a NULL where a value is required is an ERROR naming it. */
extern text *GcArgText(FunctionCallInfo fcinfo, int argno, const char *name);
extern double GcArgFloat8(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 GcArgInt32(FunctionCallInfo fcinfo, int argno, const char *name);
extern gc_metric GcArgMetric(FunctionCallInfo fcinfo, int argno, const char *title);
extern gc_metric GcMetricFromText(text *arg, const char *title);

/* The value of a device argument (gpuclust.c). */
extern GcDevice GcDeviceFromText(text *arg);

/* Call life cycle (gpuclust.c). */
extern void GcCallBegin(GcCall *call, FunctionCallInfo fcinfo,
						const GcAlgorithm *algorithm, int device_argno);
extern void GcCallGather(GcCall *call, text *query);
extern void GcCallMetric(GcCall *call, gc_metric metric);
extern void GcCallCompute(GcCall *call, GcRunFn run, void *job);
extern void GcCallEnd(GcCall *call, const char *extra);

/* Raises the error a check of common/checks.h found, if any. */
extern void GcReportCheck(gc_status status, const gc_error *err);
extern void GcReportValueCheck(gc_status status, const gc_error *err, gc_value_verdict verdict);

/* Allocation in the call's context, huge when needed, with a clear error. */
extern void *GcAlloc(GcCall *call, Size size, const char *what);

/* The GPU back end with device device_id, or NULL with the reason in reason [len]. */
extern const gc_backend_api *GcUsableGpu(int32 device_id, char *reason, size_t len);

/* Answers "cancel requested?" for the back ends; never throws. */
extern int	GcCancelRequested(void *arg);

/*
 * A context of the CPU back end's core (src/core/core.h) for threads the
 * glue runs itself (gc_pool's, which call nothing of PostgreSQL): cancel
 * through GcCancelRequested, the settings' tuning, err and timing as its
 * error record and scratch timing, and a pool of nthreads.  Returns false
 * when the pool could not be made.  gc_pool_free(ctx->pool) ends it.
 */
struct gc_core_ctx;
extern bool GcCoreContext(struct gc_core_ctx *ctx, gc_error *err, gc_timing *timing, int nthreads);

#endif							/* GPUCLUST_H */
