/*
 * gpuclust.h
 *    The PostgreSQL glue shared by every SQL function: the life of one call
 *    (private memory context, gather, back-end choice, status to ereport,
 *    output, timing NOTICE), the gather of the user's query and the GUCs.
 *
 * A SQL function in src/<algorithm>.c follows this shape:
 *
 *     GcCall      call;
 *     const gc_cuda_api *api;
 *
 *     ...check the arguments (GcArg* helpers)...
 *     GcCallBegin(&call, fcinfo, "dbscan", DEVICE_ARGNO);
 *     GcCallGather(&call, query);
 *     if (call.in.n > 0 && GcCallChooseGpu(&call, &api))
 *         done = GcCallGpuDone(&call, api->dbscan(call.device_id, ..., &call.gpu,
 *                                                 GcCancelRequested, NULL), "dbscan");
 *     if (call.in.n > 0 && !done)
 *     {
 *         GcCallComputeStart(&call);
 *         GcCallCpuDone(&call, gc_dbscan_cpu(..., GcCancelRequested, NULL, call.errbuf));
 *     }
 *     tupstore = GcCallOutputStart(&call, fcinfo, &tupdesc);
 *     ...tuplestore_putvalues for each row...
 *     GcCallEnd(&call, NULL);
 */
#ifndef GPUCLUST_H
#define GPUCLUST_H

#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/tuplestore.h"

#include "core.h"
#include "gpuclust_cuda.h"

/* gpuclust.device and the device argument */
typedef enum GcDevice
{
	GC_DEVICE_AUTO = 0,
	GC_DEVICE_GPU = 1,
	GC_DEVICE_CPU = 2
} GcDevice;

/* GUCs (gpuclust.c) */
extern int	gc_device_guc;
extern bool gc_timing_guc;
extern int	gc_device_id_guc;
extern int	gc_gpu_min_rows_guc;
extern int	gc_kmeans_precision_guc;	/* gc_precision */

/* The gathered input: n rows of d float features, in query order. */
typedef struct GcInput
{
	int64		n;
	int32		d;
	float	   *x;				/* [n, d] row-major */
	int64	   *ids;			/* [n] */
} GcInput;

/* One call of a clustering function. */
typedef struct GcCall
{
	const char *algorithm;		/* "dbscan", "kmeans", "density_peaks" */
	MemoryContext cxt;			/* private context, deleted by GcCallEnd */
	MemoryContext oldcxt;
	GcDevice	requested;		/* from the device argument or gpuclust.device */
	int32		device_id;		/* GPU to use */
	bool		used_gpu;
	bool		gathered;		/* GcCallGather ran: GcCallEnd reports timing */
	GcInput		in;
	gc_timing	gpu;			/* filled by the GPU back end */
	char		errbuf[GC_ERRBUF_SIZE]; /* filled by the CPU back end */
	instr_time	t_start;
	instr_time	t_phase;
	double		gather_ms;
	double		compute_ms;
	double		output_ms;
} GcCall;

/* Argument helpers: a NULL where a value is required is an ERROR naming it. */
extern text *GcArgText(FunctionCallInfo fcinfo, int argno, const char *name);
extern double GcArgFloat8(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 GcArgInt32(FunctionCallInfo fcinfo, int argno, const char *name);

/* Call life cycle (gpuclust.c). */
extern void GcCallBegin(GcCall *call, FunctionCallInfo fcinfo,
						const char *algorithm, int device_argno);
extern void GcCallGather(GcCall *call, text *query);
extern bool GcCallChooseGpu(GcCall *call, const gc_cuda_api **api);
extern bool GcCallGpuDone(GcCall *call, const gc_cuda_api *api,
						  gc_status status, const char *step);
extern void GcCallComputeStart(GcCall *call);
extern void GcCallCpuDone(GcCall *call, gc_status status);
extern Tuplestorestate *GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo,
										  TupleDesc *tupdesc);
extern void GcCallEnd(GcCall *call, const char *extra);

/* Allocation in the call's context, huge when needed, with a clear error. */
extern void *GcAlloc(GcCall *call, Size size, const char *what);

/* Answers "cancel requested?" for the back ends; never throws. */
extern int	GcCancelRequested(void *arg);

/* gather.c: runs the query read-only and packs its rows into in. */
extern void GcGather(const char *query, GcInput *in);

/* gpu.c: the lazily loaded GPU back end. */
extern const gc_cuda_api *GcGpuApi(char *reason, size_t reasonlen,
								   gc_status *why);
extern void GcGpuReleaseCallback(void *arg);

#endif							/* GPUCLUST_H */
