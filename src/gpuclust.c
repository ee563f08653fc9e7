/*
 * gpuclust.c
 *    Module entry, GUCs, gpuclust_devices(), and the life of one call of a
 *    clustering function: private memory context, gather, back-end choice,
 *    back-end status to ereport, materialized output and the timing NOTICE.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "gpuclust.h"

PG_MODULE_MAGIC;

int			gc_device_guc = GC_DEVICE_AUTO;
bool		gc_timing_guc = false;
int			gc_device_id_guc = 0;
int			gc_gpu_min_rows_guc = 20000;
int			gc_kmeans_precision_guc = GC_PRECISION_FP32;

static const struct config_enum_entry device_options[] = {
	{"auto", GC_DEVICE_AUTO, false},
	{"gpu", GC_DEVICE_GPU, false},
	{"cpu", GC_DEVICE_CPU, false},
	{NULL, 0, false}
};

static const struct config_enum_entry precision_options[] = {
	{"fp32", GC_PRECISION_FP32, false},
	{"tf32", GC_PRECISION_TF32, false},
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
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.gpu_min_rows",
							"Inputs with fewer rows are computed on the CPU when gpuclust.device is auto.",
							NULL, &gc_gpu_min_rows_guc, 20000, 0, INT_MAX,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("gpuclust.kmeans_precision",
							 "Arithmetic of the k-means distance products on the GPU: fp32 or tf32.",
							 "fp32 checks the TF32 products of tensor-core GPUs and decides close centroids in double precision; "
							 "tf32 takes the TF32 products unchecked: a little faster, with about 1e-3 relative error in distances.",
							 &gc_kmeans_precision_guc, GC_PRECISION_FP32, precision_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("gpuclust");
#else
	EmitWarningsOnPlaceholders("gpuclust");
#endif
}

/* ----------------------------------------------------------------- arguments */

/* A required text argument. */
text *
GcArgText(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
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
				 errmsg("%s must not be null", name)));
	v = PG_GETARG_FLOAT8(argno);
	if (isnan(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be NaN", name)));
	return v;
}

/* A required integer argument. */
int32
GcArgInt32(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	return PG_GETARG_INT32(argno);
}

/* The device argument, or gpuclust.device when it is NULL. */
static GcDevice
ResolveDevice(FunctionCallInfo fcinfo, int argno)
{
	char	   *s;

	if (argno < 0 || argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return (GcDevice) gc_device_guc;
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	for (const struct config_enum_entry *e = device_options; e->name; e++)
		if (pg_strcasecmp(s, e->name) == 0)
			return (GcDevice) e->val;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid device \"%s\"", s),
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
GcCallBegin(GcCall *call, FunctionCallInfo fcinfo, const char *algorithm,
			int device_argno)
{
	memset(call, 0, sizeof(*call));
	INSTR_TIME_SET_CURRENT(call->t_start);
	call->algorithm = algorithm;
	call->requested = ResolveDevice(fcinfo, device_argno);
	call->device_id = gc_device_id_guc;
	call->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuclust call",
									  ALLOCSET_DEFAULT_SIZES);
	call->oldcxt = MemoryContextSwitchTo(call->cxt);
}

/* Runs the user's query and packs its rows into call->in. */
void
GcCallGather(GcCall *call, text *query)
{
	INSTR_TIME_SET_CURRENT(call->t_phase);
	GcGather(text_to_cstring(query), &call->in);
	call->gather_ms = ElapsedMs(call->t_phase);
	call->gathered = true;
}

/*
 * Decides whether this call computes on the GPU.  With device gpu and no
 * usable GPU this is an ERROR that says why; with auto it is a DEBUG
 * message and the CPU.
 */
bool
GcCallChooseGpu(GcCall *call, const gc_cuda_api **api)
{
	char		reason[512];
	gc_status	why = GC_OK;
	const gc_cuda_api *a;
	MemoryContextCallback *cb;

	*api = NULL;
	if (call->requested == GC_DEVICE_CPU)
		return false;
	if (call->requested == GC_DEVICE_AUTO && call->in.n < gc_gpu_min_rows_guc)
		return false;

	a = GcGpuApi(reason, sizeof(reason), &why);
	if (a != NULL)
	{
		int32		count = 0;

		if (a->device_count(&count) != GC_OK || call->device_id >= count)
		{
			snprintf(reason, sizeof(reason),
					 "gpuclust.device_id is %d but there are %d GPU(s)", call->device_id, count);
			a = NULL;
		}
	}
	if (a == NULL)
	{
		if (call->requested == GC_DEVICE_GPU)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no usable GPU for gpuclust"),
					 errdetail("%s", reason),
					 errhint("Use device => 'cpu', or SET gpuclust.device = 'auto' to fall back to the CPU.")));
		elog(DEBUG1, "gpuclust: %s on the CPU: %s", call->algorithm, reason);
		return false;
	}

	/* Whatever happens next, the back end lets go of the device with the call. */
	cb = MemoryContextAlloc(call->cxt, sizeof(MemoryContextCallback));
	cb->func = GcGpuReleaseCallback;
	cb->arg = (void *) a;
	MemoryContextRegisterResetCallback(call->cxt, cb);

	call->used_gpu = true;
	*api = a;
	return true;
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

/*
 * Handles the status of a GPU computation.  Returns true when it is done;
 * false when the GPU ran out of memory under device auto, after a NOTICE,
 * so that the caller computes on the CPU.  Anything else is an ERROR.
 */
bool
GcCallGpuDone(GcCall *call, const gc_cuda_api *api, gc_status status,
			  const char *step)
{
	call->compute_ms = call->gpu.compute_ms;
	switch (status)
	{
		case GC_OK:
			return true;
		case GC_ERR_CANCELLED:
			RaiseCancel();
			break;
		case GC_ERR_OUT_OF_MEMORY:
			if (call->requested == GC_DEVICE_AUTO)
			{
				ereport(NOTICE,
						(errmsg("gpuclust: not enough GPU memory for %s of %lld rows, computing on the CPU",
								call->algorithm, (long long) call->in.n),
						 errdetail("%s", api->last_error())));
				call->used_gpu = false;
				memset(&call->gpu, 0, sizeof(call->gpu));
				return false;
			}
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("not enough GPU memory for %s of %lld rows",
							call->algorithm, (long long) call->in.n),
					 call->gpu.bytes_needed > 0 ?
					 errdetail("%s; %lld bytes of device memory are needed.", api->last_error(),
							   (long long) call->gpu.bytes_needed) :
					 errdetail("%s.", api->last_error()),
					 errhint("Use device => 'cpu' or 'auto', or a smaller input.")));
			break;
		case GC_ERR_INVALID_ARGUMENT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s", api->last_error())));
			break;
		case GC_ERR_NOT_BUILT:
		case GC_ERR_NO_DRIVER:
		case GC_ERR_NO_DEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no usable GPU for gpuclust %s", call->algorithm),
					 errdetail("%s", api->last_error()),
					 errhint("Use device => 'cpu'.")));
			break;
		case GC_ERR_INTERNAL:
			elog(ERROR, "gpuclust: GPU %s: %s, please report a bug", step, api->last_error());
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("GPU %s failed", step),
					 errdetail("%s", api->last_error()),
					 errhint("Use device => 'cpu' to compute on the CPU.")));
	}
	return false;
}

/* Marks the start of a CPU computation. */
void
GcCallComputeStart(GcCall *call)
{
	call->used_gpu = false;
	memset(&call->gpu, 0, sizeof(call->gpu));
	INSTR_TIME_SET_CURRENT(call->t_phase);
}

/* Handles the status of a CPU computation: anything but GC_OK is an ERROR. */
void
GcCallCpuDone(GcCall *call, gc_status status)
{
	call->compute_ms = ElapsedMs(call->t_phase);
	switch (status)
	{
		case GC_OK:
			return;
		case GC_ERR_CANCELLED:
			RaiseCancel();
			break;
		case GC_ERR_OUT_OF_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory in %s of %lld rows", call->algorithm,
							(long long) call->in.n),
					 errdetail("%s.", call->errbuf)));
			break;
		case GC_ERR_INVALID_ARGUMENT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s", call->errbuf)));
			break;
		default:
			elog(ERROR, "gpuclust: %s on the CPU: %s, please report a bug",
				 call->algorithm, call->errbuf);
	}
}

/* Sets up materialize-mode output; rows go into the returned tuplestore. */
Tuplestorestate *
GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo, TupleDesc *tupdesc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	Tuplestorestate *ts;
	TupleDesc	desc;

	INSTR_TIME_SET_CURRENT(call->t_phase);
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = CreateTupleDescCopy(desc);
	ts = tuplestore_begin_heap(rsinfo->allowedModes & SFRM_Materialize_Random,
							   false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = desc;
	MemoryContextSwitchTo(oldcxt);

	*tupdesc = desc;
	return ts;
}

/* Ends a call: the timing NOTICE when asked for, then the context goes. */
void
GcCallEnd(GcCall *call, const char *extra)
{
	if (!INSTR_TIME_IS_ZERO(call->t_phase))
		call->output_ms = ElapsedMs(call->t_phase);
	if (gc_timing_guc && call->gathered)
	{
		char		gpu[128] = "";

		if (call->used_gpu)
			snprintf(gpu, sizeof(gpu), " to_device=%.3f from_device=%.3f",
					 call->gpu.to_device_ms, call->gpu.from_device_ms);
		ereport(NOTICE,
				(errmsg("gpuclust: %s n=%lld d=%d device=%s gather=%.3f%s compute=%.3f output=%.3f total=%.3f%s%s",
						call->algorithm, (long long) call->in.n, call->in.d,
						call->used_gpu ? "gpu" : "cpu",
						call->gather_ms, gpu, call->compute_ms, call->output_ms,
						ElapsedMs(call->t_start),
						extra && extra[0] ? " " : "", extra ? extra : "")));
	}
	MemoryContextSwitchTo(call->oldcxt);
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
						   size, what, (long long) call->in.n)));
	return p;
}

/* Answers the back ends' "cancel requested?"; never throws. */
int
GcCancelRequested(void *arg)
{
	return InterruptPending && (QueryCancelPending || ProcDiePending);
}

/* ----------------------------------------------------------------- devices */

PG_FUNCTION_INFO_V1(gpuclust_devices);

/* gpuclust_devices(): the usable GPUs, none when there is no usable GPU. */
Datum
gpuclust_devices(PG_FUNCTION_ARGS)
{
	GcCall		call;
	const gc_cuda_api *api;
	char		reason[512];
	gc_status	why;
	Tuplestorestate *ts;
	TupleDesc	desc;
	int32		count = 0;

	GcCallBegin(&call, fcinfo, "devices", -1);
	api = GcGpuApi(reason, sizeof(reason), &why);
	ts = GcCallOutputStart(&call, fcinfo, &desc);
	if (api != NULL && api->device_count(&count) == GC_OK)
	{
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
						 errdetail("%s", api->last_error())));
			snprintf(cc, sizeof(cc), "%d.%d", info.cc_major, info.cc_minor);
			values[0] = Int32GetDatum(info.device_id);
			values[1] = CStringGetTextDatum(info.name);
			values[2] = Int64GetDatum(info.total_memory);
			values[3] = CStringGetTextDatum(cc);
			values[4] = Int64GetDatum(info.free_memory);
			tuplestore_putvalues(ts, desc, values, nulls);
		}
	}
	GcCallEnd(&call, NULL);
	return (Datum) 0;
}
