/*
 * window.c
 *    Clustering per window partition: gpu_cluster_dbscan(feature, eps,
 *    min_pts, device) and gpu_cluster_kmeans(feature, k, max_iter, tol,
 *    seed, init, device) OVER (PARTITION BY ... ORDER BY ...), drop-ins for
 *    PostGIS's ST_ClusterDBSCAN and ST_ClusterKMeans.
 *
 * The feature argument is any feature type gpuclust reads (gather.c): a
 * real[] or double precision[] array, pgvector's vector or halfvec, a
 * PostGIS geometry point, or a single numeric value.  At the first row of a
 * partition, its non-NULL features are read in window order, the algorithm
 * runs once through the same back-end table as the set-returning functions
 * (GcCallCompute: the device chosen per partition, so that under auto a
 * partition with fewer than gpuclust.gpu_min_rows rows stays on the CPU), and
 * the answers are kept in partition-local memory and handed out row by row.
 * A NULL feature gives a NULL cluster; the other arguments are read at the
 * partition's first row, as PostGIS does.  An error in any partition is an
 * error of the statement; its message names the row by its place in the
 * partition, and the context line names the partition.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/memutils.h"
#include "windowapi.h"

#include "feature.h"
#include "dbscan.h"
#include "dpeaks.h"
#include "gpuclust.h"
#include "kmeans.h"
#include "precision.h"
#include "range.h"
#include "hdbscan_sql.h"

PG_FUNCTION_INFO_V1(gpu_cluster_dbscan);
PG_FUNCTION_INFO_V1(gpu_cluster_hdbscan);
PG_FUNCTION_INFO_V1(gpu_cluster_kmeans);
PG_FUNCTION_INFO_V1(gpu_cluster_density_peaks);

/* Rows read between two resets of the detoasting context and interrupt checks. */
#define WIN_RESET_EVERY 1024

/* What lasts from partition to partition of one window function call site. */
typedef struct WinState
{
	GcFeatureType ftype;
	Oid			typid;
	int64		partitions;		/* partitions begun so far */
	int64		rows;			/* rows of the current partition */
	const char *funcname;
	MemoryContext tmpcxt;		/* detoasting, reset every WIN_RESET_EVERY rows */
} WinState;

/* The answers of one partition, in partition-local memory. */
typedef struct WinPartition
{
	bool		done;
	int32		cluster[FLEXIBLE_ARRAY_MEMBER];	/* [rows], -1: NULL */
} WinPartition;

/* The state of this call site, made at its first call: the feature's type. */
static WinState *
GetWinState(FunctionCallInfo fcinfo, const char *funcname)
{
	WinState   *ws = (WinState *) fcinfo->flinfo->fn_extra;
	Oid			typid;

	if (ws != NULL)
		return ws;
	typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the feature type of %s, please report a bug", funcname);
	ws = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(WinState));
	ws->typid = typid;
	ws->ftype = GcFeatureTypeOf(typid);
	ws->funcname = funcname;
	if (ws->ftype == GC_FEATURE_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the feature argument of %s has type %s, which is not a feature type",
						funcname, format_type_be(typid)),
				 errdetail("A feature is a value of type %s, or one value of type smallint, "
						   "integer, bigint, real, double precision or numeric.",
						   GcFeatureTypeNames()),
				 errhint("Pass the features as one array, for example ARRAY[x, y]::real[].")));
	ws->tmpcxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gpuclust window",
									   ALLOCSET_DEFAULT_SIZES);
	fcinfo->flinfo->fn_extra = ws;
	return ws;
}

/* Error context: which partition of the window was being clustered. */
static void
WinErrorContext(void *arg)
{
	WinState   *ws = (WinState *) arg;

	errcontext("%s, partition " INT64_FORMAT " of the window (" INT64_FORMAT " row%s)",
			   ws->funcname, ws->partitions, ws->rows, ws->rows == 1 ? "" : "s");
}

/*
 * Reads the partition's features, in window order, into call->in (NULL
 * features left out); rowof[i] is row i's index in call->in, or -1.
 */
static void
WinGather(WindowObject winobj, WinState *ws, GcCall *call, int32 *rowof)
{
	bool		unit = call->metric == GC_METRIC_COSINE;
	int64		n = ws->rows;
	int64		m = 0;
	int32		d = 0;
	GcRowRef	ref = {0, ws->partitions, 0};

	call->in.n = n;				/* for the messages of GcAlloc */
	for (int64 i = 0; i < n; i++)
	{
		bool		isnull;
		bool		isout;
		Datum		v;
		GcFeature	f;
		MemoryContext old;

		/* what the argument's expression allocates goes with the batch */
		old = MemoryContextSwitchTo(ws->tmpcxt);
		v = WinGetFuncArgInPartition(winobj, 0, i, WINDOW_SEEK_HEAD, false, &isnull, &isout);
		MemoryContextSwitchTo(old);
		if (isout)
			elog(ERROR, "row " INT64_FORMAT " is outside its partition, please report a bug", i);
		rowof[i] = -1;
		if (!isnull)
		{
			ref.row = i + 1;
			GcFeatureOpen(ws->ftype, ws->typid, v, &ref, ws->tmpcxt, &f);
			if (m == 0)
			{
				d = f.d;
				call->in.dtype = GcFeatureDtype(ws->ftype, ws->typid);
				call->in.x = GcAlloc(call, gc_dtype_size(call->in.dtype) * (Size) (n - i) * d, "features");
			}
			else if (f.d != d)
				ereport(ERROR,
						(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						 errmsg("the feature of row " INT64_FORMAT " of partition " INT64_FORMAT
								" has %d dimensions, but the partition's first has %d",
								i + 1, ws->partitions, f.d, d),
						 errdetail("The features of a partition are clustered together, so they share one dimension."),
						 errhint("Every row of a partition must have the same number of features.")));
			GcFeatureCopy(&f, (char *) call->in.x + (Size) m * d * gc_dtype_size(call->in.dtype),
						  call->in.dtype, &ref);
			/* the cosine metric: the row to unit length, a zero row named */
			if (unit &&
				!(call->in.dtype == GC_F64 ?
				  gc_unit_row_f64((double *) call->in.x + (Size) m * d, d) :
				  gc_unit_row_f32((float *) call->in.x + (Size) m * d, d)))
				GcZeroRowError(call->algorithm->title, &ref);
			rowof[i] = (int32) m;
			m++;
		}
		if ((i + 1) % WIN_RESET_EVERY == 0)
		{
			MemoryContextReset(ws->tmpcxt);
			CHECK_FOR_INTERRUPTS();
		}
	}
	MemoryContextReset(ws->tmpcxt);
	call->in.n = m;
	call->in.d = d;
}

/*
 * The partition-local answers of the current partition, computed at its
 * first row by compute (which fills cluster[], -1 for NULL).
 */
typedef void (*WinComputeFn) (FunctionCallInfo fcinfo, WindowObject winobj,
							  WinState *ws, int32 *cluster);

static Datum
WinResult(FunctionCallInfo fcinfo, const char *funcname, WinComputeFn compute)
{
	WindowObject winobj = PG_WINDOW_OBJECT();
	WinState   *ws = GetWinState(fcinfo, funcname);
	int64		n = WinGetPartitionRowCount(winobj);
	WinPartition *part;
	int64		pos;

	if ((Size) n > (MaxAllocSize - offsetof(WinPartition, cluster)) / sizeof(int32))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a window partition of " INT64_FORMAT " rows is too large for %s", n, funcname),
				 errdetail("The answers of a partition are kept in one allocation of at most 1 GB."),
				 errhint("Partition into groups of fewer than %zu rows.",
						 (MaxAllocSize - offsetof(WinPartition, cluster)) / sizeof(int32))));
	part = WinGetPartitionLocalMemory(winobj, offsetof(WinPartition, cluster) + sizeof(int32) * n);
	if (!part->done)
	{
		ErrorContextCallback errcb;

		ws->partitions++;
		ws->rows = n;
		errcb.callback = WinErrorContext;
		errcb.arg = ws;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		compute(fcinfo, winobj, ws, part->cluster);
		error_context_stack = errcb.previous;
		part->done = true;
	}
	pos = WinGetCurrentPosition(winobj);
	if (part->cluster[pos] < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(part->cluster[pos]);
}

/* A required argument of the partition's first row. */
static Datum
WinArg(WindowObject winobj, int argno, const char *name)
{
	bool		isnull;
	Datum		v = WinGetFuncArgCurrent(winobj, argno, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errdetail("%s is a required argument and has no default; the partition's first row gives it.", name),
				 errhint("Pass a value for %s.", name)));
	return v;
}

/* An optional argument of the partition's first row; NULL or absent: *isnull. */
static Datum
WinArgOpt(FunctionCallInfo fcinfo, WindowObject winobj, int argno, bool *isnull)
{
	if (argno >= PG_NARGS())
	{
		*isnull = true;
		return (Datum) 0;
	}
	return WinGetFuncArgCurrent(winobj, argno, isnull);
}

/* The metric argument (after device) of the partition's first row; NULL: Euclidean. */
static gc_metric
WinMetric(FunctionCallInfo fcinfo, WindowObject winobj, int argno, const GcAlgorithm *algorithm)
{
	bool		isnull;
	Datum		v = WinArgOpt(fcinfo, winobj, argno, &isnull);

	return isnull ? GC_METRIC_EUCLIDEAN : GcMetricFromText(DatumGetTextPP(v), algorithm->title);
}

/*
 * Starts the partition's call: the device from the argument or the setting,
 * the metric (for the gather and the NOTICE).
 */
static void
WinCallBegin(FunctionCallInfo fcinfo, WindowObject winobj, GcCall *call,
			 const GcAlgorithm *algorithm, int device_argno, gc_metric metric)
{
	bool		isnull;
	Datum		device = WinArgOpt(fcinfo, winobj, device_argno, &isnull);

	GcCallBegin(call, fcinfo, algorithm, -1);
	call->metric = metric;
	if (!isnull)
		call->requested = GcDeviceFromText(DatumGetTextPP(device));
}

/* Reads the partition and times it as the call's gather. */
static void
WinCallGather(WindowObject winobj, WinState *ws, GcCall *call, int32 *rowof)
{
	instr_time	start;
	instr_time	now;

	INSTR_TIME_SET_CURRENT(start);
	WinGather(winobj, ws, call, rowof);
	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	call->gather_ms = INSTR_TIME_GET_MILLISEC(now);
	call->gathered = true;
}

#define DB_ARG_EPS		1
#define DB_ARG_MIN_PTS	2
#define DB_ARG_DEVICE	3
#define DB_ARG_METRIC	4

/* DBSCAN of one partition. */
static void
WinDbscanPartition(FunctionCallInfo fcinfo, WindowObject winobj, WinState *ws, int32 *cluster)
{
	GcDbscanJob job;
	gc_error	err;
	GcCall		call;
	int32	   *rowof;

	memset(&job, 0, sizeof(job));
	gc_dbscan_params_init(&job.params);
	job.params.eps = DatumGetFloat8(WinArg(winobj, DB_ARG_EPS, "eps"));
	job.params.min_pts = DatumGetInt32(WinArg(winobj, DB_ARG_MIN_PTS, "min_pts"));
	job.params.metric = WinMetric(fcinfo, winobj, DB_ARG_METRIC, &GcDbscan);
	if (isnan(job.params.eps))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("eps must not be NaN"),
				 errdetail("NaN is not a number, so no distance compares with it."),
				 errhint("Pass a finite number for eps.")));
	GcReportCheck(gc_check_dbscan(&job.params, -1, 0, &err), &err);

	WinCallBegin(fcinfo, winobj, &call, &GcDbscan, DB_ARG_DEVICE, job.params.metric);
	rowof = GcAlloc(&call, sizeof(int32) * ws->rows, "row map");
	WinCallGather(winobj, ws, &call, rowof);
	if (call.in.n > 0)
	{
		GcReportCheck(gc_check_dbscan(&job.params, call.in.n, call.in.d, &err), &err);
		job.result.cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
		job.result.is_core = GcAlloc(&call, sizeof(uint8) * call.in.n, "core flags");
		GcCallCompute(&call, GcRunDbscan, &job);
	}
	INSTR_TIME_SET_CURRENT(call.t_phase);
	for (int64 i = 0; i < ws->rows; i++)
		cluster[i] = rowof[i] < 0 ? -1 : job.result.cluster[rowof[i]];
	GcCallEnd(&call, NULL);
}

/* gpu_cluster_dbscan(feature anyelement, eps float8, min_pts int, device text, metric text) */
Datum
gpu_cluster_dbscan(PG_FUNCTION_ARGS)
{
	return WinResult(fcinfo, "gpu_cluster_dbscan", WinDbscanPartition);
}

/* HDBSCAN of one partition: the arguments after the feature as gpu_hdbscan's after the query. */
static void
WinHdbscanPartition(FunctionCallInfo fcinfo, WindowObject winobj, WinState *ws, int32 *cluster)
{
	GcHdbscanJob job;
	GcHdbscanArgs a;
	gc_error	err;
	GcCall		call;
	int32	   *rowof;
	char		extra[256];

	for (int i = 0; i < GC_HDB_NARGS; i++)
		a.value[i] = WinArgOpt(fcinfo, winobj, i + 1, &a.isnull[i]);
	memset(&job, 0, sizeof(job));
	GcHdbscanParams(&a, &job);

	WinCallBegin(fcinfo, winobj, &call, &GcHdbscan, 1 + GC_HDB_DEVICE, job.params.metric);
	rowof = GcAlloc(&call, sizeof(int32) * ws->rows, "row map");
	WinCallGather(winobj, ws, &call, rowof);
	if (call.in.n > 0)
	{
		GcReportCheck(gc_check_hdbscan(&job.params, call.in.n, call.in.d, &err), &err);
		/* the window returns the cluster only: no probabilities or outlier scores */
		job.result.cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
		GcCallCompute(&call, GcRunHdbscan, &job);
	}
	INSTR_TIME_SET_CURRENT(call.t_phase);
	for (int64 i = 0; i < ws->rows; i++)
		cluster[i] = rowof[i] < 0 ? -1 : job.result.cluster[rowof[i]];
	GcHdbscanExtra(&call, &job, extra, sizeof(extra));
	GcCallEnd(&call, extra);
}

/* gpu_cluster_hdbscan(feature anyelement, min_cluster_size, ...): as gpu_hdbscan's arguments */
Datum
gpu_cluster_hdbscan(PG_FUNCTION_ARGS)
{
	return WinResult(fcinfo, "gpu_cluster_hdbscan", WinHdbscanPartition);
}

#define KW_ARG_K		1
#define KW_ARG_MAX_ITER	2
#define KW_ARG_TOL		3
#define KW_ARG_SEED		4
#define KW_ARG_INIT		5
#define KW_ARG_DEVICE	6
#define KW_ARG_METRIC	7

/* k-means of one partition. */
static void
WinKmeansPartition(FunctionCallInfo fcinfo, WindowObject winobj, WinState *ws, int32 *cluster)
{
	GcKmeansJob job;
	gc_kmeans_params *p = &job.params;
	gc_error	err;
	GcCall		call;
	int32	   *rowof;
	bool		isnull;
	Datum		v;
	char		extra[64];

	memset(&job, 0, sizeof(job));
	gc_kmeans_params_init(p);
	p->k = DatumGetInt32(WinArg(winobj, KW_ARG_K, "k"));
	v = WinArgOpt(fcinfo, winobj, KW_ARG_MAX_ITER, &isnull);
	if (!isnull)
		p->max_iter = DatumGetInt32(v);
	v = WinArgOpt(fcinfo, winobj, KW_ARG_TOL, &isnull);
	if (!isnull)
		p->tol = DatumGetFloat8(v);
	v = WinArgOpt(fcinfo, winobj, KW_ARG_SEED, &isnull);
	if (!isnull)
		p->seed = (uint64) (int64) DatumGetInt32(v);
	v = WinArgOpt(fcinfo, winobj, KW_ARG_INIT, &isnull);
	if (!isnull)
		p->init = GcKmeansInitFromText(DatumGetTextPP(v));
	p->precision = (gc_precision) gc_kmeans_precision_guc;
	p->metric = WinMetric(fcinfo, winobj, KW_ARG_METRIC, &GcKmeans);
	GcReportCheck(gc_check_kmeans(p, -1, 0, &err), &err);

	WinCallBegin(fcinfo, winobj, &call, &GcKmeans, KW_ARG_DEVICE, p->metric);
	rowof = GcAlloc(&call, sizeof(int32) * ws->rows, "row map");
	WinCallGather(winobj, ws, &call, rowof);
	if (call.in.n > 0)
	{
		int64		n = call.in.n;
		int32		d = call.in.d;

		if (p->k > n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("k (%d) is greater than the number of features (" INT64_FORMAT ") of partition " INT64_FORMAT,
							p->k, n, ws->partitions),
					 errdetail("The partition has " INT64_FORMAT " rows, " INT64_FORMAT " of them with a NULL feature; "
							   "every cluster needs a row.", ws->rows, ws->rows - n),
					 errhint("Pass a NULL feature for the rows of partitions with fewer than k rows; "
							 "their clusters are then NULL.")));
		GcReportCheck(gc_check_kmeans(p, n, d, &err), &err);
		job.result.labels = GcAlloc(&call, sizeof(int32) * n, "cluster ids");
		job.result.distance = GcAlloc(&call, sizeof(double) * n, "distances");
		job.result.centroids = GcAlloc(&call, sizeof(double) * p->k * d, "centroids");
		job.result.sizes = GcAlloc(&call, sizeof(int64) * p->k, "cluster sizes");
		job.result.inertia = GcAlloc(&call, sizeof(double) * p->k, "inertias");
		GcCallCompute(&call, GcRunKmeans, &job);
	}
	INSTR_TIME_SET_CURRENT(call.t_phase);
	for (int64 i = 0; i < ws->rows; i++)
		cluster[i] = rowof[i] < 0 ? -1 : job.result.labels[rowof[i]];
	snprintf(extra, sizeof(extra), "iterations=%d", job.result.iterations);
	GcCallEnd(&call, extra);
}

/* gpu_cluster_kmeans(feature anyelement, k int, max_iter, tol, seed, init, device, metric) */
Datum
gpu_cluster_kmeans(PG_FUNCTION_ARGS)
{
	return WinResult(fcinfo, "gpu_cluster_kmeans", WinKmeansPartition);
}

#define DW_ARG_DEVICE	7
#define DW_ARG_METRIC	8

/* Density peaks of one partition. */
static void
WinDpeaksPartition(FunctionCallInfo fcinfo, WindowObject winobj, WinState *ws, int32 *cluster)
{
	GcDpeaksJob job;
	GcDpeaksArgs args;
	gc_dpeaks_result *r = &job.result;
	gc_error	err;
	GcCall		call;
	int32	   *rowof;

	memset(&job, 0, sizeof(job));
	for (int i = 0; i < GC_DP_NARGS; i++)
		args.value[i] = WinArgOpt(fcinfo, winobj, 1 + i, &args.isnull[i]);
	GcDpeaksParams(&args, &job.params);
	job.params.metric = WinMetric(fcinfo, winobj, DW_ARG_METRIC, &GcDpeaks);

	WinCallBegin(fcinfo, winobj, &call, &GcDpeaks, DW_ARG_DEVICE, job.params.metric);
	rowof = GcAlloc(&call, sizeof(int32) * ws->rows, "row map");
	WinCallGather(winobj, ws, &call, rowof);
	if (call.in.n > 0)
	{
		GcReportCheck(gc_check_dpeaks(&job.params, call.in.n, call.in.d, &err), &err);
		r->cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
		r->rho = GcAlloc(&call, sizeof(double) * call.in.n, "densities");
		r->delta = GcAlloc(&call, sizeof(double) * call.in.n, "distances to denser points");
		r->is_center = GcAlloc(&call, sizeof(uint8) * call.in.n, "centre flags");
		GcCallCompute(&call, GcRunDpeaks, &job);
	}
	INSTR_TIME_SET_CURRENT(call.t_phase);
	for (int64 i = 0; i < ws->rows; i++)
		cluster[i] = rowof[i] < 0 ? -1 : r->cluster[rowof[i]];
	GcCallEnd(&call, NULL);
}

/* gpu_cluster_density_peaks(feature anyelement, n_clusters, dc, neighbor_rate, kernel,
 * rho_min, delta_min, device, metric) */
Datum
gpu_cluster_density_peaks(PG_FUNCTION_ARGS)
{
	return WinResult(fcinfo, "gpu_cluster_density_peaks", WinDpeaksPartition);
}
