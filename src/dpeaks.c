/*
 * dpeaks.c
 *    gpu_density_peaks(query, n_clusters, dc, neighbor_rate, kernel, rho_min,
 *    delta_min, device): density peaks clustering (Rodriguez & Laio 2014) of
 *    the query's rows, one output row per input row, in the query's order,
 *    with the decision-graph columns rho and delta.
 *
 * The exact rules are in src/core/dpeaks_common.h; the CPU back end is
 * src/core/dpeaks.c and the GPU back end cuda/dpeaks.cu (after seed 004,
 * CUDA-DP), and both give the same centres and labels.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"

#include "gpuclust.h"
#include "dpeaks_common.h"

PG_FUNCTION_INFO_V1(gpu_density_peaks);

#define DP_ARG_QUERY		0
#define DP_ARG_N_CLUSTERS	1
#define DP_ARG_DC			2
#define DP_ARG_RATE			3
#define DP_ARG_KERNEL		4
#define DP_ARG_RHO_MIN		5
#define DP_ARG_DELTA_MIN	6
#define DP_ARG_DEVICE		7

/* Parses the kernel argument. */
static gc_dp_kernel
DpKernel(text *arg)
{
	char	   *s = text_to_cstring(arg);

	if (pg_strcasecmp(s, "gaussian") == 0)
		return GC_DP_KERNEL_GAUSSIAN;
	if (pg_strcasecmp(s, "cutoff") == 0)
		return GC_DP_KERNEL_CUTOFF;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown density kernel \"%s\"", s),
			 errdetail("The kernel decides how rho counts the neighbours."),
			 errhint("Use kernel => 'gaussian' (smooth, the default) or 'cutoff' (neighbours within dc).")));
	return GC_DP_KERNEL_GAUSSIAN;
}

/*
 * A back end rejected the data after the arguments passed: in practice a
 * zero neighbor_rate quantile, when too many rows are duplicates.
 */
static void
DpDataError(const char *msg)
{
	if (strncmp(msg, "the neighbor_rate quantile", 26) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", msg)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", msg),
			 errdetail("dc is derived from the distances between pairs of rows, and too many of them are zero."),
			 errhint("Give dc explicitly, or raise neighbor_rate above the fraction of duplicate pairs.")));
}

/* gpu_density_peaks(...): see the file header. */
Datum
gpu_density_peaks(PG_FUNCTION_ARGS)
{
	text	   *query = GcArgText(fcinfo, DP_ARG_QUERY, "query");
	bool		have_nc = !PG_ARGISNULL(DP_ARG_N_CLUSTERS);
	bool		have_dc = !PG_ARGISNULL(DP_ARG_DC);
	bool		have_rho_min = !PG_ARGISNULL(DP_ARG_RHO_MIN);
	bool		have_delta_min = !PG_ARGISNULL(DP_ARG_DELTA_MIN);
	int32		n_clusters = have_nc ? PG_GETARG_INT32(DP_ARG_N_CLUSTERS) : 0;
	double		dc = have_dc ? PG_GETARG_FLOAT8(DP_ARG_DC) : 0.0;
	double		rate = PG_ARGISNULL(DP_ARG_RATE) ? 0.02 : PG_GETARG_FLOAT8(DP_ARG_RATE);
	gc_dp_kernel kernel = PG_ARGISNULL(DP_ARG_KERNEL) ? GC_DP_KERNEL_GAUSSIAN :
		DpKernel(PG_GETARG_TEXT_PP(DP_ARG_KERNEL));
	double		rho_min = have_rho_min ? PG_GETARG_FLOAT8(DP_ARG_RHO_MIN) : 0.0;
	double		delta_min = have_delta_min ? PG_GETARG_FLOAT8(DP_ARG_DELTA_MIN) : 0.0;
	gc_dpeaks_params params;
	gc_dpeaks_result result;
	gc_timing	cpu_timing;
	gc_timing  *timing;
	const gc_cuda_api *api;
	GcCall		call;
	Tuplestorestate *ts;
	TupleDesc	desc;
	bool		done = false;
	char		extra[256];

	/* ---- arguments */
	if (have_nc && n_clusters < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_clusters must be at least 1"),
				 errdetail("n_clusters is %d.", n_clusters),
				 errhint("Leave n_clusters NULL to choose the centres with rho_min and delta_min.")));
	if (have_dc && (!(dc > 0.0) || isinf(dc)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dc must be positive and finite"),
				 errdetail("dc is %g.", dc),
				 errhint("dc is the cutoff distance in the units of the features; leave it NULL to derive it from neighbor_rate.")));
	if (!(rate > 0.0 && rate < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("neighbor_rate must be between 0 and 1 exclusive"),
				 errdetail("neighbor_rate is %g.", rate),
				 errhint("dc is chosen so that about this fraction of all pairs lies within it; 0.01 to 0.02 is usual.")));
	if (!have_nc && !(have_rho_min && have_delta_min))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("density peaks needs n_clusters or both rho_min and delta_min"),
				 errdetail("%s",
						   have_rho_min ? "delta_min is NULL." :
						   have_delta_min ? "rho_min is NULL." :
						   "n_clusters, rho_min and delta_min are all NULL."),
				 errhint("Give n_clusters => k, or read the decision graph (rho against delta) and give rho_min and delta_min.")));
	if (have_nc && (have_rho_min || have_delta_min))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_clusters cannot be combined with rho_min or delta_min"),
				 errdetail("With n_clusters the centres are the points of largest rho * delta; the thresholds would be ignored."),
				 errhint("Give either n_clusters or both thresholds.")));
	if (isnan(rho_min) || isnan(delta_min))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rho_min and delta_min must be numbers"),
				 errhint("Read the thresholds off the decision graph (rho against delta).")));

	GcCallBegin(&call, fcinfo, "density_peaks", DP_ARG_DEVICE);
	GcCallGather(&call, query);

	if (have_nc && call.in.n > 0 && n_clusters > call.in.n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_clusters must not exceed the number of rows"),
				 errdetail("n_clusters is %d but the query returned %lld rows.",
						   n_clusters, (long long) call.in.n),
				 errhint("Ask for fewer clusters.")));

	if (!have_dc && call.in.n == 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dc cannot be estimated from a single row"),
				 errdetail("dc is a quantile of the distances between pairs of rows."),
				 errhint("Give dc explicitly.")));

	memset(&params, 0, sizeof(params));
	params.struct_size = sizeof(params);
	params.n_clusters = n_clusters;
	params.dc = dc;
	params.neighbor_rate = rate;
	params.kernel = kernel;
	params.rho_min = rho_min;
	params.delta_min = delta_min;
	params.seed = GC_DP_DEFAULT_SEED;

	memset(&result, 0, sizeof(result));
	result.cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
	result.rho = GcAlloc(&call, sizeof(double) * call.in.n, "densities");
	result.delta = GcAlloc(&call, sizeof(double) * call.in.n, "distances to denser points");
	result.is_center = GcAlloc(&call, sizeof(uint8) * call.in.n, "centre flags");

	if (call.in.n > 0 && GcCallChooseGpu(&call, &api))
	{
		gc_status	st = api->density_peaks(call.device_id, call.in.x, call.in.n, call.in.d,
											&params, &result, &call.gpu,
											GcCancelRequested, NULL);

		if (st == GC_ERR_INVALID_ARGUMENT)
			DpDataError(api->last_error());
		done = GcCallGpuDone(&call, api, st, "density peaks");
	}
	timing = &call.gpu;
	if (call.in.n > 0 && !done)
	{
		gc_status	st;

		memset(&cpu_timing, 0, sizeof(cpu_timing));
		timing = &cpu_timing;
		GcCallComputeStart(&call);
		st = gc_dpeaks_cpu(call.in.x, call.in.n, call.in.d, &params, &result,
						   &cpu_timing, GcCancelRequested, NULL, call.errbuf);
		if (st == GC_ERR_INVALID_ARGUMENT)
			DpDataError(call.errbuf);
		GcCallCpuDone(&call, st);
	}

	ts = GcCallOutputStart(&call, fcinfo, &desc);
	for (int64 i = 0; i < call.in.n; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = Int64GetDatum(call.in.ids[i]);
		values[1] = Int32GetDatum(result.cluster[i]);
		values[2] = Float8GetDatum(result.rho[i]);
		values[3] = Float8GetDatum(result.delta[i]);
		values[4] = BoolGetDatum(result.is_center[i] != 0);
		tuplestore_putvalues(ts, desc, values, nulls);
		if ((i & 0xffff) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	extra[0] = '\0';
	if (call.in.n > 0)
	{
		int			len = snprintf(extra, sizeof(extra), "dc=%.9g", result.dc);

		if (result.dc_method == GC_DC_SAMPLE)
			len += snprintf(extra + len, sizeof(extra) - len, " dc_method=sample sample=%lld",
							(long long) result.dc_sample);
		snprintf(extra + len, sizeof(extra) - len,
				 " centers=%lld dc_ms=%.3f rho_ms=%.3f delta_ms=%.3f assignment_ms=%.3f",
				 (long long) result.n_centers, timing->phase_ms[0], timing->phase_ms[1],
				 timing->phase_ms[2], timing->phase_ms[3]);
	}
	GcCallEnd(&call, extra);
	return (Datum) 0;
}
