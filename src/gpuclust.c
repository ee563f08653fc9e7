/*
 * gpuclust.c
 *    Module entry (each module defines its own settings), the settings of a
 *    call, gpuclust_devices(), and the life of one call of a clustering
 *    function: private memory context, gather, running the chosen back end
 *    (and the CPU when the GPU is out of memory under auto), status to
 *    ereport and the timing NOTICE.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "core.h"
#include "gpu.h"
#include "gpuclust.h"
#include "kmeans.h"
#include "output.h"
#include "pairs.h"
#include "pgather.h"
#include "precision.h"
#include "range.h"
#include "service.h"
#include "tuning.h"

PG_MODULE_MAGIC;

int			gc_device_guc = GC_DEVICE_AUTO;
bool		gc_timing_guc = false;
int			gc_device_id_guc = 0;
int			gc_gpu_min_rows_guc = 20000;

static const struct config_enum_entry device_options[] = {
	{"auto", GC_DEVICE_AUTO, false},
	{"gpu", GC_DEVICE_GPU, false},
	{"cpu", GC_DEVICE_CPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/* Defines the GUCs; touches no GPU (CUDA does not survive fork). */
void
_PG_init(void)
{
	DefineCustomEnumVariable("gpuclust.device",
							 "Where gpuclust computes: auto, gpu or cpu.",
							 "auto uses the GPU when one is usable and the input is large enough, "
							 "otherwise the CPU; gpu fails when no GPU is usable.",
							 &gc_device_guc, GC_DEVICE_AUTO, device_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("gpuclust.timing",
							 "Reports the time of each phase of a gpuclust call in a NOTICE.",
							 NULL, &gc_timing_guc, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.device_id",
							"The CUDA device gpuclust uses.",
							"See gpuclust_devices() for the devices.",
							&gc_device_id_guc, 0, 0, 1023,
							PGC_USERSET, 0, GcDeviceIdCheck, GcDeviceIdAssign, NULL);
	DefineCustomIntVariable("gpuclust.gpu_min_rows",
							"Inputs with fewer rows are computed on the CPU when gpuclust.device is auto.",
							NULL, &gc_gpu_min_rows_guc, 20000, 0, INT_MAX,
							PGC_USERSET, 0, NULL, NULL, NULL);
	GcKmeansDefineGucs();
	GcKmeansDistDefineGucs();
	GcPrecisionDefineGucs();
	GcParallelGatherDefineGucs();
	GcOutputDefineGucs();
	GcScanInit();
	GcTuningDefineGucs();
	GcServiceInit();
	MarkGUCPrefixReserved("gpuclust");
}

/* ----------------------------------------------------------------- arguments */

/* A required text argument. */
text *
GcArgText(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errdetail("%s is a required argument and has no default.", name),
				 errhint("Pass a value for %s.", name)));
	return PG_GETARG_TEXT_PP(argno);
}

/* A required double precision argument; NaN is refused here too. */
double
GcArgFloat8(FunctionCallInfo fcinfo, int argno, const char *name)
{
	double		v;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errdetail("%s is a required argument and has no default.", name),
				 errhint("Pass a value for %s.", name)));
	v = PG_GETARG_FLOAT8(argno);
	if (isnan(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be NaN", name),
				 errdetail("NaN is not a number, so no distance compares with it."),
				 errhint("Pass a finite number for %s.", name)));
	return v;
}

/* A required integer argument. */
int32
GcArgInt32(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errdetail("%s is a required argument and has no default.", name),
				 errhint("Pass a value for %s.", name)));
	return PG_GETARG_INT32(argno);
}

/*
 * The metric argument: 'euclidean' (also when NULL or not passed) or
 * 'cosine', case-insensitive.  title names the algorithm in the error.
 */
gc_metric
GcArgMetric(FunctionCallInfo fcinfo, int argno, const char *title)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return GC_METRIC_EUCLIDEAN;
	return GcMetricFromText(PG_GETARG_TEXT_PP(argno), title);
}

/* A metric argument's text: 'euclidean' or 'cosine', case-insensitive. */
gc_metric
GcMetricFromText(text *arg, const char *title)
{
	char	   *s = text_to_cstring(arg);

	if (pg_strcasecmp(s, "euclidean") == 0)
		return GC_METRIC_EUCLIDEAN;
	if (pg_strcasecmp(s, "cosine") == 0)
		return GC_METRIC_COSINE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown %s metric \"%s\"", title, s),
			 errdetail("The metrics are the Euclidean and the cosine metric."),
			 errhint("Use metric => 'euclidean' (the default) or 'cosine'.")));
	return GC_METRIC_EUCLIDEAN;	/* keep the compiler quiet */
}

/*
 * After the gather: the metric of the call, for the timing NOTICE, and for
 * the cosine metric the rows scaled to unit length (a zero row is an error).
 */
void
GcCallMetric(GcCall *call, gc_metric metric)
{
	call->metric = metric;
	if (metric == GC_METRIC_COSINE)
		GcUnitRows(&call->in, call->algorithm->title);
}

/* The device argument, or gpuclust.device when it is NULL. */
static GcDevice
ResolveDevice(FunctionCallInfo fcinfo, int argno)
{
	if (argno < 0 || argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return (GcDevice) gc_device_guc;
	return GcDeviceFromText(PG_GETARG_TEXT_PP(argno));
}

/* A device argument's value: 'auto', 'gpu' or 'cpu' in any case. */
GcDevice
GcDeviceFromText(text *arg)
{
	char	   *s = text_to_cstring(arg);

	for (const struct config_enum_entry *e = device_options; e->name; e++)
		if (pg_strcasecmp(s, e->name) == 0)
			return (GcDevice) e->val;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid device \"%s\"", s),
			 errdetail("device says where the call computes."),
			 errhint("Use 'auto', 'gpu' or 'cpu', or NULL for the setting of gpuclust.device.")));
	return GC_DEVICE_AUTO;		/* keep compiler quiet */
}

/* ----------------------------------------------------------------- call life */

static double
ElapsedMs(instr_time since)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, since);
	return INSTR_TIME_GET_MILLISEC(now);
}

/* Starts a call: resolves the device and enters a private memory context. */
void
GcCallBegin(GcCall *call, FunctionCallInfo fcinfo, const GcAlgorithm *algorithm,
			int device_argno)
{
	memset(call, 0, sizeof(*call));
	INSTR_TIME_SET_CURRENT(call->t_start);
	call->algorithm = algorithm;
	call->requested = ResolveDevice(fcinfo, device_argno);
	SyncTuning();
	call->tuning = gc_tuning_gucs;
	call->exec.struct_size = sizeof(gc_exec);
	call->exec.device_id = gc_device_id_guc;
	call->exec.tuning = &call->tuning;
	call->exec.cancel = GcCancelRequested;
	call->exec.cancel_arg = NULL;
	call->exec.timing = &call->timing;
	call->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuclust call",
									  ALLOCSET_DEFAULT_SIZES);
	call->oldcxt = MemoryContextSwitchTo(call->cxt);
}

const gc_backend_api *
GcUsableGpu(int32 device_id, char *reason, size_t len)
{
	gc_status	why = GC_OK;
	const gc_backend_api *a = GcGpuApi(reason, len, &why);
	int32		count = 0;

	if (a != NULL && (a->device_count(&count) != GC_OK || device_id >= count))
	{
		snprintf(reason, len, "gpuclust.device_id is %d but there are %d GPU(s)",
				 device_id, count);
		a = NULL;
	}
	return a;
}

/* device => 'gpu' and no usable GPU: an ERROR that says why. */
static void
ReportNoGpu(const char *reason)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("no usable GPU for gpuclust"),
			 errdetail("%s", reason),
			 errhint("Use device => 'cpu', or SET gpuclust.device = 'auto' to fall back to the CPU.")));
}

/*
 * Runs the user's query and packs its rows into call->in.  With device gpu
 * and no usable GPU, the ERROR comes first, before the query runs.
 */
void
GcCallGather(GcCall *call, text *query)
{
	char		reason[512];

	if (call->requested == GC_DEVICE_GPU && GcUsableGpu(call->exec.device_id, reason, sizeof(reason)) == NULL)
		ReportNoGpu(reason);
	INSTR_TIME_SET_CURRENT(call->t_phase);
	GcGather(text_to_cstring(query), &call->in);
	call->gather_ms = ElapsedMs(call->t_phase);
	call->gathered = true;
}

/*
 * The GPU back end when this call should compute there, else NULL.  With
 * device gpu and no usable GPU this is an ERROR that says why; with auto it
 * is a DEBUG message and the CPU.
 */
static const gc_backend_api *
ChooseGpu(GcCall *call)
{
	char		reason[512];
	const gc_backend_api *a;
	MemoryContextCallback *cb;

	if (call->requested == GC_DEVICE_CPU)
		return NULL;
	if (call->requested == GC_DEVICE_AUTO && call->in.n < gc_gpu_min_rows_guc)
		return NULL;
	a = GcUsableGpu(call->exec.device_id, reason, sizeof(reason));
	if (a == NULL)
	{
		if (call->requested == GC_DEVICE_GPU)
			ReportNoGpu(reason);
		elog(DEBUG1, "gpuclust: %s on the CPU: %s", call->algorithm->name, reason);
		return NULL;
	}

	/* Whatever happens next, the back end lets go of the device with the call. */
	cb = MemoryContextAlloc(call->cxt, sizeof(MemoryContextCallback));
	cb->func = GcGpuReleaseCallback;
	cb->arg = (void *) a;
	MemoryContextRegisterResetCallback(call->cxt, cb);
	return a;
}

/* Raises the cancel the back end noticed, as PostgreSQL itself would. */
static void
RaiseCancel(void)
{
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg("canceling statement due to user request")));
}

/* An error in the user's words: message, and detail and hint when there are. */
static void
ReportUserError(int sqlstate, const gc_error *err)
{
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0,
			 err->hint[0] ? errhint("%s", err->hint) : 0));
}

/* Raises the error a check of common/checks.h found, if any. */
void
GcReportCheck(gc_status status, const gc_error *err)
{
	if (status == GC_OK)
		return;
	if (status == GC_ERR_INVALID_ARGUMENT)
		ReportUserError(ERRCODE_INVALID_PARAMETER_VALUE, err);
	elog(ERROR, "gpuclust: %s, please report a bug", err->message);
}

/*
 * Raises the error a check of coordinates (gc_check_centroid_values) found,
 * if any, with the SQLSTATE the same value gets as a feature: data
 * exception for NaN and infinity, numeric value out of range beyond the
 * limit of the precision.
 */
void
GcReportValueCheck(gc_status status, const gc_error *err, gc_value_verdict verdict)
{
	if (status == GC_OK)
		return;
	if (status == GC_ERR_INVALID_ARGUMENT && verdict == GC_VALUE_OUT_OF_RANGE)
		ReportUserError(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, err);
	if (status == GC_ERR_INVALID_ARGUMENT && verdict != GC_VALUE_OK)
		ReportUserError(ERRCODE_DATA_EXCEPTION, err);
	GcReportCheck(status, err);
}

/* Turns a failed back end's status into an ERROR; never returns. */
static void
ReportFailure(GcCall *call, const gc_backend_api *api, gc_status status)
{
	const gc_error *err = api->last_error();
	bool		gpu = call->used_gpu;

	switch (status)
	{
		case GC_ERR_CANCELLED:
			RaiseCancel();
			break;
		case GC_ERR_INVALID_ARGUMENT:
			ReportUserError(ERRCODE_INVALID_PARAMETER_VALUE, err);
			break;
		case GC_ERR_OUT_OF_MEMORY:
			if (!gpu)
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory in %s of %lld rows", call->algorithm->name,
								(long long) call->in.n),
						 errdetail("%s.", err->message),
						 errhint("Use a smaller input, or fewer threads with gpuclust.cpu_threads.")));
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("not enough GPU memory for %s of %lld rows",
							call->algorithm->name, (long long) call->in.n),
					 call->timing.bytes_needed > 0 ?
					 errdetail("%s; %lld bytes of device memory are needed.", err->message,
							   (long long) call->timing.bytes_needed) :
					 errdetail("%s.", err->message),
					 errhint("Use device => 'cpu' or 'auto', or a smaller input.")));
			break;
		case GC_ERR_NOT_BUILT:
		case GC_ERR_NO_DRIVER:
		case GC_ERR_NO_DEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no usable GPU for gpuclust %s", call->algorithm->name),
					 errdetail("%s", err->message),
					 errhint("Use device => 'cpu'.")));
			break;
		case GC_ERR_QUEUE_TIMEOUT:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("%s of %lld rows waited too long for the GPU",
							call->algorithm->title, (long long) call->in.n),
					 errdetail("%s", err->detail[0] ? err->detail : err->message),
					 errhint("Raise gpuclust.gpu_queue_timeout (0 waits without limit), use device => 'auto' "
							 "to compute on the CPU past it, or see gpuclust_service_requests().")));
			break;
		case GC_ERR_UNAVAILABLE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s", err->message),
					 err->detail[0] ? errdetail("%s", err->detail) : 0,
					 errhint("Try again in a moment, or use device => 'auto' to compute on the CPU meanwhile.")));
			break;
		case GC_ERR_CUDA:
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("GPU %s failed", call->algorithm->title),
					 errdetail("%s", err->message),
					 errhint("Use device => 'cpu' to compute on the CPU.")));
			break;
		default:
			elog(ERROR, "gpuclust: %s on the %s: %s, please report a bug",
				 call->algorithm->title, api->name, err->message);
	}
	pg_unreachable();
}

/* Runs the job on one back end; the computation's milliseconds go to compute_ms. */
static gc_status
RunOn(GcCall *call, const gc_backend_api *api, GcRunFn run, void *job)
{
	gc_status	st;

	memset(&call->timing, 0, sizeof(call->timing));
	call->used_gpu = (api != gc_cpu_api());
	INSTR_TIME_SET_CURRENT(call->t_phase);
	st = run(api, &call->exec, &call->in, job);
	call->compute_ms = call->used_gpu ? call->timing.compute_ms : ElapsedMs(call->t_phase);
	if (call->used_gpu)
		GcGpuTakeInit(call->timing.init_ms);
	return st;
}

/*
 * Computes the job: on the GPU when chosen, then on the CPU when the GPU
 * ran out of memory under device auto (after a NOTICE), else on the CPU.
 * Any failure is an ERROR.  Nothing runs for an empty input.
 */
void
GcCallCompute(GcCall *call, GcRunFn run, void *job)
{
	const gc_backend_api *api;
	gc_status	st;

	if (call->in.n == 0)
		return;
	api = ChooseGpu(call);
	if (api != NULL)
	{
		st = RunOn(call, api, run, job);
		if (st == GC_OK)
			return;
		if ((st != GC_ERR_OUT_OF_MEMORY && st != GC_ERR_QUEUE_TIMEOUT && st != GC_ERR_UNAVAILABLE) ||
			call->requested != GC_DEVICE_AUTO)
			ReportFailure(call, api, st);
		if (st == GC_ERR_OUT_OF_MEMORY)
			ereport(NOTICE,
					(errmsg("gpuclust: not enough GPU memory for %s of %lld rows, computing on the CPU",
							call->algorithm->name, (long long) call->in.n),
					 errdetail("%s", api->last_error()->message)));
		else
			ereport(NOTICE,
					(errmsg("gpuclust: %s of %lld rows computes on the CPU: %s",
							call->algorithm->name, (long long) call->in.n,
							st == GC_ERR_QUEUE_TIMEOUT ? "gpuclust.gpu_queue_timeout passed in the GPU service's queue" :
							api->last_error()->message)));
	}
	api = gc_cpu_api();
	st = RunOn(call, api, run, job);
	if (st != GC_OK)
		ReportFailure(call, api, st);
}

/* Ends a call: the timing NOTICE when asked for, then the context goes. */
void
GcCallEnd(GcCall *call, const char *extra)
{
	if (!INSTR_TIME_IS_ZERO(call->t_phase))
		call->output_ms = ElapsedMs(call->t_phase);
	if (gc_timing_guc && call->gathered)
	{
		char		gpu[384] = "";
		char		cpu[32] = "";
		char		phases[384] = "";

		/* the algorithm's named phases, as both back ends fill them */
		for (int i = 0; call->in.n > 0 && call->algorithm->phases != NULL && i < GC_PHASES; i++)
			if (call->algorithm->phases[i] != NULL)
				snprintf(phases + strlen(phases), sizeof(phases) - strlen(phases), " %s_ms=%.3f",
						 call->algorithm->phases[i], call->timing.phase_ms[i]);

		if (call->used_gpu)
		{
			double		init = 0.0;

			snprintf(gpu, sizeof(gpu), " to_device=%.3f from_device=%.3f",
					 call->timing.to_device_ms, call->timing.from_device_ms);
			/* the GPU's start-up, when this call paid it (the backend's first GPU call) */
			for (int i = 0; i < GC_INIT_PARTS; i++)
				init += call->timing.init_ms[i];
			if (init > 0.0)
			{
				snprintf(gpu + strlen(gpu), sizeof(gpu) - strlen(gpu), " gpu_init=%.3f", init);
				for (int i = 0; i < GC_INIT_PARTS; i++)
					snprintf(gpu + strlen(gpu), sizeof(gpu) - strlen(gpu), " init_%s=%.3f",
							 gc_init_part_names[i], call->timing.init_ms[i]);
			}
		}
		else
			snprintf(cpu, sizeof(cpu), " threads=%d",
					 call->timing.threads > 0 ? (int) call->timing.threads : 1);
		/* DBSCAN and density peaks: the index or the pair engine, and its pairs decided exactly */
		if (call->in.n > 0 && call->timing.path == GC_PATH_PAIRS)
			snprintf(phases + strlen(phases), sizeof(phases) - strlen(phases),
					 " path=pairs screen=%s exact_pairs=%lld",
					 gc_pair_precision_names[call->timing.pair_screen % 3],
					 (long long) call->timing.pair_exact);
		else if (call->in.n > 0 && call->timing.path == GC_PATH_INDEX)
			snprintf(phases + strlen(phases), sizeof(phases) - strlen(phases), " path=index");
		ereport(NOTICE,
				(errmsg("gpuclust: %s n=%lld d=%d device=%s%s gather=%.3f%s compute=%.3f output=%.3f total=%.3f%s%s%s precision=%s%s",
						call->algorithm->name, (long long) call->in.n, call->in.d,
						call->used_gpu ? "gpu" : "cpu", cpu,
						call->gather_ms, gpu, call->compute_ms, call->output_ms,
						ElapsedMs(call->t_start),
						extra && extra[0] ? " " : "", extra ? extra : "", phases,
						call->in.dtype == GC_F64 ? "double" : "single",
						call->metric == GC_METRIC_COSINE ? " metric=cosine" : "")));
	}
	MemoryContextSwitchTo(call->oldcxt);
	if (!call->keep_cxt)
		MemoryContextDelete(call->cxt);
	call->cxt = NULL;
}

/* palloc in the call's context; huge allocations when needed. */
void *
GcAlloc(GcCall *call, Size size, const char *what)
{
	void	   *p;

	p = MemoryContextAllocExtended(call->cxt, size == 0 ? 1 : size,
								   MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (p == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed to allocate %zu bytes for %s of %lld rows.",
						   size, what, (long long) call->in.n),
				 errhint("Use a smaller input, or give the server more memory.")));
	return p;
}

/* Answers the back ends' "cancel requested?"; never throws. */
int
GcCancelRequested(void *arg)
{
	return InterruptPending && (QueryCancelPending || ProcDiePending);
}

bool
GcCoreContext(gc_core_ctx *ctx, gc_error *err, gc_timing *timing, int nthreads)
{
	memset(err, 0, sizeof(*err));
	memset(timing, 0, sizeof(*timing));
	memset(ctx, 0, sizeof(*ctx));
	ctx->cancel = GcCancelRequested;
	ctx->tuning = &gc_tuning_gucs;
	ctx->timing = timing;
	ctx->err = err;
	ctx->pool = gc_pool_create(ctx, nthreads);
	return ctx->pool != NULL;
}

/* ----------------------------------------------------------------- devices */

PG_FUNCTION_INFO_V1(gpuclust_devices);

/* gpuclust_devices(): the usable GPUs, none when there is no usable GPU. */
Datum
gpuclust_devices(PG_FUNCTION_ARGS)
{
	static const GcAlgorithm devices = {"devices", "devices"};
	GcCall		call;
	const gc_backend_api *api;
	char		reason[512];
	gc_status	why;
	Tuplestorestate *ts;
	TupleDesc	desc;
	int32		count = 0;

	GcCallBegin(&call, fcinfo, &devices, -1);
	api = GcGpuApi(reason, sizeof(reason), &why);
	if (api != NULL && api->device_count(&count) != GC_OK)
		count = 0;
	ts = GcCallOutputStart(&call, fcinfo, &desc, count);
	for (int32 i = 0; i < count; i++)
	{
		gc_device_info info;
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		char		cc[32];
		gc_status	st = api->device_info(i, &info);

		if (st != GC_OK)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not read the properties of GPU %d", i),
					 errdetail("%s", api->last_error()->message),
					 errhint("Check the GPU with nvidia-smi.")));
		snprintf(cc, sizeof(cc), "%d.%d", info.cc_major, info.cc_minor);
		values[0] = Int32GetDatum(info.device_id);
		values[1] = CStringGetTextDatum(info.name);
		values[2] = Int64GetDatum(info.total_memory);
		values[3] = CStringGetTextDatum(cc);
		values[4] = Int64GetDatum(info.free_memory);
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	GcCallEnd(&call, NULL);
	return (Datum) 0;
}
