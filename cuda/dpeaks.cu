/*
 * dpeaks.cu
 *    Density peaks clustering on the GPU (Rodriguez and Laio, "Clustering
 *    by fast search and find of density peaks"), in the formulation of
 *    CUDA-DP (Ge et al., "Efficient parallel implementation of a density
 *    peaks clustering algorithm on GPU": shared-memory tiles over a
 *    structure-of-arrays copy of the points, dc by binary search over pair
 *    counts or by sampling), without its N x N distance matrix: memory is
 *    linear in n.  This file is the driver: the memory estimate, the
 *    upload, the phases in order over one workspace, the entry point
 *    gcu_density_peaks.  cuda/dpeaks.cuh lists the other parts.
 *
 * The exact rules, and the arithmetic that makes the answers bit-identical
 * to the CPU back end (src/core/dpeaks.c), are in common/dpeaks_common.h.
 * The rows are uploaded in their element type (float or double) and
 * converted exactly to the structure of arrays in double that every phase
 * reads, so both precisions run the same kernels; the metric enters through
 * the dist2 threshold of the cutoff kernel, the gaussian terms (a template
 * parameter of the rho kernels) and gc_metric_distance of dc and delta.
 *
 *  dc          n <= 50,000: radix select over all ordered pairs; larger n:
 *              2^22 seeded sample pairs (cuda/dpeaks_dc.cu).
 *  From 16 features on (gc_pair_engine_chosen), rho and delta run on the
 *  pair engine instead (cuda/dpeaks_pairs.cu); otherwise:
 *  rho         gaussian: every pair in shared-memory tiles, fixed-point
 *              terms summed in 128-bit integers, far tiles skipped in Morton
 *              order for d <= 3; cutoff: the grid index (d <= 3) or all
 *              pairs (cuda/dpeaks_rho.cu).
 *  delta       density order by a stable CUB radix sort; the densest points
 *              and those the ring search cannot settle scan all denser
 *              points, the others search rings of grid cells (d <= 3)
 *              (cuda/dpeaks_delta.cu).
 *  assign      centres by gamma or by thresholds, labels by pointer jumping
 *              along the nearest-denser links (cuda/dpeaks_assign.cu).
 *
 * timing->phase_ms: [0] dc, [1] rho, [2] delta, [3] assignment.
 */
#include "dpeaks.cuh"
#include "phases.h"

namespace gc {
namespace dpeaks {
namespace {

/* Device bytes at the largest moment, the delta phase. */
int64_t bytes_estimate(const Workspace &w, int64_t esize)
{
	const int64_t n = w.n;
	const int	S = slices_for(w);
	/* d doubles per copy of the points (xs, xr, the grid's and the Morton order's) */
	const int64_t per_point = (int64_t) w.d * 8 * (w.gauss ? 4 : 3) + 8 * 12 + 16;

	return n * per_point + (w.use_pairs ? pairs_bytes_estimate(w, esize) : 0) + (w.use_grid ? (2 * n + 17) * 16 : 0) +
		(w.gauss || !w.use_grid ? (int64_t) S * n * 16 : 0) +
		(!w.params.derive_dc || n <= GC_DP_DC_EXACT_MAX_N ? 0 : GC_DP_DC_SAMPLE_PAIRS * 16) +
		(INT64_C(64) << 20);
}

inline void keep_rows(Workspace &w, DeviceBuffer<float> &&xf)
{
	w.xrow_f = std::move(xf);
}

inline void keep_rows(Workspace &w, DeviceBuffer<double> &&xf)
{
	w.xrow_d = std::move(xf);
}

/* The phases in order, from the caller's points x to its result. */
template <typename T>
void run(Workspace &w, const T *x, /* [n, d] host */ gc_dpeaks_result *result)
{
	gc_timing  *t = w.call.timing;
	Stopwatch	sw;
	Stopwatch	dc_sw;

	/*
	 * Memory first: say how much is needed before any work starts (the
	 * upload, n d elements of T next to xs, stays below the estimate's
	 * copies of the points).
	 */
	require_device_memory(w.call, bytes_estimate(w, sizeof(T)), "density peaks", w.n, w.d);
	w.hx = x;
	w.dtype = sizeof(T) == sizeof(double) ? GC_F64 : GC_F32;
	w.xs.reset((size_t) w.n * w.d, "the points");
	{
		DeviceBuffer<T> xf = upload_points(w.call, sw, x, w.n, w.d);

		dc_sw.restart();		/* phase dc includes the conversion */
		to_soa(xf.get(), w.n, w.d, w.xs.get());
		/* the pair engine reads the rows as they came, until the density order */
		if (w.use_pairs)
			keep_rows(w, std::move(xf));
	}

	Stopwatch	compute;

	dc_phase(w);
	t->phase_ms[GC_DPEAKS_PHASE_DC] = dc_sw.ms();
	timed(t->phase_ms[GC_DPEAKS_PHASE_RHO], [&] { rho_phase(w); });
	timed(t->phase_ms[GC_DPEAKS_PHASE_DELTA], [&] { delta_phase(w); });
	timed(t->phase_ms[GC_DPEAKS_PHASE_ASSIGN], [&] { assign_phase(w); });
	t->compute_ms = compute.ms();

	copy_results(w.call, {{result->cluster, w.cluster.get(), w.cluster.bytes()},
						  {result->is_center, w.is_center.get(), w.is_center.bytes()},
						  {result->rho, w.rho.get(), w.rho.bytes()},
						  {result->delta, w.delta.get(), w.delta.bytes()}});
	result->dc = w.dc;
	result->dc_method = w.dc_method;
	result->dc_sample = w.dc_sample;
	result->n_centers = w.n_centers;
}

} // namespace
} // namespace dpeaks
} // namespace gc

extern "C" gc_status gcu_density_peaks(const gc_exec *exec,
									   const void *xv, gc_dtype dtype, /* [n, d] row-major */
									   int64_t n, int32_t d, const gc_dpeaks_params *params,
									   gc_dpeaks_result *result)
{
	GC_ENTRY_BEGIN
	gc::require(gc_check_dpeaks(params, n, d, gc::error_record()));
	gc::require(gc_check_input("density peaks", dtype, params->metric, gc::error_record()));

	gc::Call	call(exec);

	gc::require_buffers("density peaks", xv, n,
						result && (n == 0 || (result->cluster && result->rho && result->delta &&
											  result->is_center)));
	/* no rows: no dc is derived, the one given (or 0) is reported, as on the CPU */
	result->n_centers = 0;
	result->dc = params->dc;
	result->dc_method = params->derive_dc ? GC_DC_EXACT : GC_DC_GIVEN;
	result->dc_sample = 0;
	if (n == 0)
		return GC_OK;
	gc::run_on_device(call, [&] {
		int			sms = 0;

		CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, call.exec.device_id));

		gc::dpeaks::Workspace w(call, n, d, *params, sms);

		if (dtype == GC_F64)
			gc::dpeaks::run(w, (const double *) xv, result);
		else
			gc::dpeaks::run(w, (const float *) xv, result);
	});
	GC_ENTRY_END
}
