/*
 * gpuclust.h
 *    The PostgreSQL glue shared by every SQL function: the life of one call
 *    (private memory context, gather, running the chosen back end and the
 *    CPU when the GPU is out of memory under auto, status to ereport, output,
 *    timing NOTICE), the gather of the user's query and the GUCs.
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
#include "metric.h"

/* gpuclust.device and the device argument */
typedef enum GcDevice
{
	GC_DEVICE_AUTO = 0,
	GC_DEVICE_GPU = 1,
	GC_DEVICE_CPU = 2
} GcDevice;

/* gpuclust.precision: the element type of the features */
typedef enum GcPrecision
{
	GC_PRECISION_AUTO = 0,		/* follow the input's types */
	GC_PRECISION_SINGLE = 1,
	GC_PRECISION_DOUBLE = 2
} GcPrecision;

/* GUCs (gpuclust.c) */
extern int	gc_device_guc;
extern bool gc_timing_guc;
extern int	gc_device_id_guc;
extern int	gc_gpu_min_rows_guc;
extern int	gc_kmeans_precision_guc;	/* gc_precision */
extern int	gc_precision_guc;	/* GcPrecision */
extern int	gc_output_mem_guc;	/* kB */
extern bool gc_gather_huge_pages_guc;	/* developer setting of the gather */
extern bool gc_gather_prefault_guc; /* developer setting of the gather */
extern gc_tuning gc_tuning_gucs;	/* developer settings, see GcDefineTuningGucs */

/* The gathered input: n rows of d features, in query order. */
typedef struct GcInput
{
	int64		n;
	int32		d;
	gc_dtype	dtype;			/* the element type of x: float or double */
	void	   *x;				/* [n, d] row-major */
	int64	   *ids;			/* [n] */
} GcInput;

/* What the glue needs to know of an algorithm. */
typedef struct GcAlgorithm
{
	const char *name;			/* in the timing NOTICE: "dbscan", "kmeans", ... */
	const char *title;			/* in messages: "DBSCAN", "k-means", ... */
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

/*
 * The params and result of one run of each algorithm, and the GcRunFn that
 * runs it; shared by the set-returning functions and the window functions
 * (dbscan.c, kmeans.c, dpeaks.c).
 */
typedef struct GcDbscanJob
{
	gc_dbscan_params params;
	gc_dbscan_result result;
} GcDbscanJob;

typedef struct GcKmeansJob
{
	gc_kmeans_params params;
	gc_kmeans_result result;
} GcKmeansJob;

typedef struct GcDpeaksJob
{
	gc_dpeaks_params params;
	gc_dpeaks_result result;
} GcDpeaksJob;

extern gc_status GcRunDbscan(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern gc_status GcRunKmeans(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern gc_status GcRunDpeaks(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern const GcAlgorithm GcDbscan;
extern const GcAlgorithm GcKmeans;
extern const GcAlgorithm GcDpeaks;

/* k-means' defaults for a NULL max_iter or tol (kmeans.c, window.c). */
#define GC_KM_DEFAULT_MAX_ITER	300
#define GC_KM_DEFAULT_TOL		1e-4

/* Argument helpers: a NULL where a value is required is an ERROR naming it. */
extern text *GcArgText(FunctionCallInfo fcinfo, int argno, const char *name);
extern double GcArgFloat8(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 GcArgInt32(FunctionCallInfo fcinfo, int argno, const char *name);
extern gc_metric GcArgMetric(FunctionCallInfo fcinfo, int argno, const char *title);
extern gc_metric GcMetricFromText(text *arg, const char *title);

/* The value of a device argument (gpuclust.c). */
extern GcDevice GcDeviceFromText(text *arg);

/* The value of k-means' init argument (kmeans.c). */
extern gc_kmeans_init GcKmeansInitFromText(text *arg);

/*
 * The arguments of density peaks after the feature, each with its NULL flag,
 * in the order of the SQL functions (dpeaks.c).
 */
#define GC_DP_N_CLUSTERS	0
#define GC_DP_DC			1
#define GC_DP_RATE			2
#define GC_DP_KERNEL		3
#define GC_DP_RHO_MIN		4
#define GC_DP_DELTA_MIN		5
#define GC_DP_NARGS			6
typedef struct GcDpeaksArgs
{
	bool		isnull[GC_DP_NARGS];
	Datum		value[GC_DP_NARGS];
} GcDpeaksArgs;
extern void GcDpeaksParams(const GcDpeaksArgs *args, gc_dpeaks_params *params);

/* Call life cycle (gpuclust.c). */
extern void GcCallBegin(GcCall *call, FunctionCallInfo fcinfo,
						const GcAlgorithm *algorithm, int device_argno);
extern void GcCallGather(GcCall *call, text *query);
extern void GcCallMetric(GcCall *call, gc_metric metric);
extern void GcCallCompute(GcCall *call, GcRunFn run, void *job);
extern Tuplestorestate *GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo,
										  TupleDesc *tupdesc, int64 nrows);
extern void GcCallEnd(GcCall *call, const char *extra);

/* Raises the error a check of common/checks.h found, if any. */
extern void GcReportCheck(gc_status status, const gc_error *err);
extern void GcReportValueCheck(gc_status status, const gc_error *err, gc_value_verdict verdict);

/* Allocation in the call's context, huge when needed, with a clear error. */
extern void *GcAlloc(GcCall *call, Size size, const char *what);

/* Answers "cancel requested?" for the back ends; never throws. */
extern int	GcCancelRequested(void *arg);

/* gather.c: runs the query read-only and packs its rows into in. */
extern void GcGather(const char *query, GcInput *in);

struct _SPI_plan;
/* gather.c: the planner's row estimate of a prepared query, -1 if not one SELECT. */
extern double GcPlannedRows(struct _SPI_plan *plan);

/*
 * A feature value of one column: the types gather.c and the window functions
 * read.  Extension types (pgvector, PostGIS) are recognized by name and
 * extension at call time; nothing links against them.
 */
typedef enum GcFeatureType
{
	GC_FEATURE_NONE = 0,		/* not a feature type */
	GC_FEATURE_SCALAR,			/* smallint .. numeric: one feature */
	GC_FEATURE_FLOAT4_ARRAY,	/* real[] */
	GC_FEATURE_FLOAT8_ARRAY,	/* double precision[] */
	GC_FEATURE_VECTOR,			/* pgvector vector */
	GC_FEATURE_HALFVEC,			/* pgvector halfvec */
	GC_FEATURE_GEOMETRY			/* PostGIS geometry point */
} GcFeatureType;

/* Names a row in messages: by its id, or by its place in a window partition. */
typedef struct GcRowRef
{
	int64		id;				/* when partition == 0 */
	int64		partition;		/* 1-based partition of a window, 0, or -1: "this row" */
	int64		row;			/* 1-based row within the partition */
} GcRowRef;

/* One value opened by GcFeatureOpen: d features stored as fmt at data. */
typedef struct GcFeature
{
	int32		d;
	int32		fmt;			/* gather.c's FeatureFormat */
	int32		stride;			/* doubles per geometry point (M skipped) */
	const char *data;
	double		scalar;			/* GC_FEATURE_SCALAR */
} GcFeature;

extern GcFeatureType GcFeatureTypeOf(Oid typid);
extern const char *GcFeatureTypeNames(void);
extern void GcRowName(const GcRowRef *row, char *buf, size_t len);
extern void GcFeatureOpen(GcFeatureType kind, Oid typid, Datum value,
						  const GcRowRef *row, MemoryContext tmpcxt, GcFeature *out);
extern void GcFeatureCopy(const GcFeature *f, void *dst, gc_dtype dtype, const GcRowRef *row);
extern gc_dtype GcFeatureDtype(GcFeatureType ft, Oid typid);
extern void GcZeroRowError(const char *title, const GcRowRef *row);
extern void GcUnitRows(GcInput *in, const char *title);

/* gpu.c: the lazily loaded GPU back end. */
extern const gc_backend_api *GcGpuApi(char *reason, size_t reasonlen,
									  gc_status *why);
extern void GcGpuReleaseCallback(void *arg);

#endif							/* GPUCLUST_H */
