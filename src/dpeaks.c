/*
 * dpeaks.c
 *    gpu_density_peaks(query, n_clusters, dc, neighbor_rate, kernel, rho_min,
 *    delta_min, device, metric): density peaks clustering (Rodriguez & Laio 2014) of
 *    the query's rows, one output row per input row, in the query's order,
 *    with the decision-graph columns rho and delta.
 *
 * The exact rules are in common/dpeaks_common.h; the CPU back end is
 * src/core/dpeaks.c and the GPU back end cuda/dpeaks*.cu (after CUDA-DP of
 * Ge et al., "Efficient parallel implementation of a density peaks
 * clustering algorithm on GPU"), and both give the same centres and labels.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "gpuclust.h"
#include "output.h"
#include "dpeaks.h"
#include "dpeaks_common.h"

PG_FUNCTION_INFO_V1(gpu_density_peaks);

#define DP_ARG_QUERY		0
#define DP_ARG_N_CLUSTERS	1	/* then dc .. delta_min in GcDpeaksArgs order */
#define DP_ARG_DEVICE		7
#define DP_ARG_METRIC		8

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

const GcAlgorithm GcDpeaks = {"density_peaks", "density peaks", gc_dpeaks_phase_names};

/* Runs density peaks on a back end. */
gc_status
GcRunDpeaks(const gc_backend_api *api, const gc_exec *exec, const GcInput *in, void *arg)
{
	GcDpeaksJob *job = arg;

	return api->density_peaks(exec, in->x, in->dtype, in->n, in->d, &job->params, &job->result);
}

/*
 * The arguments into params, with the checks that are about which arguments
 * are NULL; the values are checked by gc_check_dpeaks.  Shared by
 * gpu_density_peaks and the window function gpu_cluster_density_peaks.
 */
void
GcDpeaksParams(const GcDpeaksArgs *a, gc_dpeaks_params *p)
{
	bool		have_nc = !a->isnull[GC_DP_N_CLUSTERS];
	bool		have_rho_min = !a->isnull[GC_DP_RHO_MIN];
	bool		have_delta_min = !a->isnull[GC_DP_DELTA_MIN];
	gc_error	err;

	gc_dpeaks_params_init(p);
	p->n_clusters = have_nc ? DatumGetInt32(a->value[GC_DP_N_CLUSTERS]) : 0;
	p->derive_dc = a->isnull[GC_DP_DC];
	p->dc = p->derive_dc ? 0.0 : DatumGetFloat8(a->value[GC_DP_DC]);
	if (!a->isnull[GC_DP_RATE])
		p->neighbor_rate = DatumGetFloat8(a->value[GC_DP_RATE]);
	if (!a->isnull[GC_DP_KERNEL])
		p->kernel = DpKernel(DatumGetTextPP(a->value[GC_DP_KERNEL]));
	p->rho_min = have_rho_min ? DatumGetFloat8(a->value[GC_DP_RHO_MIN]) : 0.0;
	p->delta_min = have_delta_min ? DatumGetFloat8(a->value[GC_DP_DELTA_MIN]) : 0.0;

	if (have_nc)
		GcReportCheck(gc_check_dpeaks_n_clusters(p->n_clusters, &err), &err);
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
	GcReportCheck(gc_check_dpeaks(p, -1, 0, &err), &err);
}

/* The arguments of gpu_density_peaks into job->params. */
static void
DpParams(FunctionCallInfo fcinfo, GcDpeaksJob *job)
{
	GcDpeaksArgs a;

	for (int i = 0; i < GC_DP_NARGS; i++)
	{
		a.isnull[i] = PG_ARGISNULL(DP_ARG_N_CLUSTERS + i);
		a.value[i] = a.isnull[i] ? (Datum) 0 : PG_GETARG_DATUM(DP_ARG_N_CLUSTERS + i);
	}
	memset(job, 0, sizeof(*job));
	GcDpeaksParams(&a, &job->params);
}

/* The timing NOTICE's own fields: dc, how it was found, centres (GcCallEnd adds the phases). */
static void
DpExtra(const GcCall *call, const gc_dpeaks_result *r, char *extra, size_t size)
{
	int			len;

	extra[0] = '\0';
	if (call->in.n == 0)
		return;
	len = snprintf(extra, size, "dc=%.9g", r->dc);
	if (r->dc_method == GC_DC_SAMPLE)
		len += snprintf(extra + len, size - len, " dc_method=sample sample=%lld",
						(long long) r->dc_sample);
	snprintf(extra + len, size - len, " centers=%lld", (long long) r->n_centers);
}

/* gpu_density_peaks(...): see the file header. */
Datum
gpu_density_peaks(PG_FUNCTION_ARGS)
{
	text	   *query = GcArgText(fcinfo, DP_ARG_QUERY, "query");
	GcDpeaksJob job;
	gc_dpeaks_result *r = &job.result;
	gc_error	err;
	GcCall		call;
	GcRows		rows;
	char		extra[256];

	DpParams(fcinfo, &job);
	job.params.metric = GcArgMetric(fcinfo, DP_ARG_METRIC, GcDpeaks.title);
	GcCallBegin(&call, fcinfo, &GcDpeaks, DP_ARG_DEVICE);
	GcCallGather(&call, query);
	GcCallMetric(&call, job.params.metric);
	GcReportCheck(gc_check_dpeaks(&job.params, call.in.n, call.in.d, &err), &err);

	r->cluster = GcAlloc(&call, sizeof(int32) * call.in.n, "cluster ids");
	r->rho = GcAlloc(&call, sizeof(double) * call.in.n, "densities");
	r->delta = GcAlloc(&call, sizeof(double) * call.in.n, "distances to denser points");
	r->is_center = GcAlloc(&call, sizeof(uint8) * call.in.n, "centre flags");
	GcCallCompute(&call, GcRunDpeaks, &job);

	GcRowsInit(&rows, &call);
	GcRowsAdd(&rows, GC_COL_INT32, r->cluster, false);
	GcRowsAdd(&rows, GC_COL_FLOAT8, r->rho, false);
	GcRowsAdd(&rows, GC_COL_FLOAT8, r->delta, false);
	GcRowsAdd(&rows, GC_COL_BOOL, r->is_center, false);
	DpExtra(&call, r, extra, sizeof(extra));
	GcCallOutputRows(&call, fcinfo, &rows, extra);
	return (Datum) 0;
}
