/*
 * dbscan.cu
 *    DBSCAN on the GPU, with exactly the answer of the CPU core
 *    (src/core/dbscan.c): same neighbours, same core points, same border
 *    rule, same cluster numbers.  This file is the driver: the memory
 *    estimate, the upload, the phases in order over one workspace, the
 *    entry point gcu_dbscan.  cuda/dbscan.cuh lists the other parts.
 *
 * The algorithm is the two-phase union-find DBSCAN of FDBSCAN and
 * FDBSCAN-DenseBox (Prokopenko, Lebrun-Grandié and Arndt, "Fast tree-based
 * algorithms for DBSCAN on GPUs"), with a uniform grid as the search index
 * instead of a bounding volume hierarchy, and with everything from the
 * first sort to the cluster numbers on the device (no transfer in between):
 *
 *   index    the cell of each point on the first min(d, 3) dimensions (the
 *            grid chosen from a sample), a stable CUB radix sort of the
 *            points by cell, cells as runs of the sorted order (a CUB scan),
 *            an open-addressing hash table from cell key to cell
 *            (cuda/dbscan_index.cu);
 *   core     a thread per point counts neighbours and stops at min_pts
 *            (skipped when min_pts <= 2: the union phase finds them);
 *   union    core-core pairs joined in a lock-free disjoint-set forest; each
 *            pair is looked at once;
 *   border   a thread per non-core point takes the lowest-row core point
 *            within eps (core, union and border: cuda/dbscan_search.cu);
 *   number   per root the lowest row among its members, a flag at that
 *            row, an inclusive CUB scan over rows: the cluster number of
 *            every point, numbered by first appearance
 *            (cuda/dbscan_number.cu).
 *
 * With d <= 3 the cells have side eps/sqrt(d) (less a 1e-5 margin), so every
 * two points of one cell are within eps: a cell holding at least min_pts
 * points is all core and one set without a single distance computation
 * (DenseBox).  Two dense cells are joined by a warp that first compares the
 * bounding boxes of their points and otherwise stops at the first pair within
 * eps.  Where a sample says that few points lie in dense cells (sparse data,
 * small min_pts) the 5^d neighbour cells of that grid cost more than they
 * save, and a grid of side eps (3^d neighbours, no dense cells) is used.
 * With d > 3 the grid on three dimensions is only a filter of side eps and
 * every candidate is checked with the full distance: for data that the first
 * dimensions do not separate this degrades to a blocked all-pairs scan, in
 * which the threads of a warp read the same candidate (a broadcast) as in the
 * intra-block parallelism of CUDA-DClust (Böhm et al., "Density-based
 * Clustering using Graphics Processors").  Cell side, extents, reach and the
 * pruned neighbour rows are planned once for both back ends, by
 * gc_grid_plan_make of common/dbscan_grid.h.  Neighbour cells are visited as
 * rows along the last grid dimension: one hash probe finds a cell of an
 * occupied row, and the rest of the row are its neighbours in the sorted
 * cell table.
 *
 * Rows of single or double precision (gc_dtype): every kernel that reads
 * points is templated on the element type T, so float rows are loaded as
 * floats and double rows as doubles.  Distances: squared Euclidean in
 * double, dimension by dimension in order, each coordinate widened exactly
 * to double before the subtraction, with explicitly rounded operations (no
 * fused multiply-add), compared with bound = gc_metric_dist2_le(metric,
 * eps) computed once on the host (common/metric.h).  That is gc_dist2 or
 * gc_dist2_f64 of common/portable.h, bit for bit.  Cosine: the caller
 * passes unit rows, and the grid is sized by the Euclidean radius that
 * covers bound (gc_grid_radius of common/dbscan_grid.h).
 *
 * Memory is linear in n: with e bytes an element (4 or 8), about
 * max(2*e*n*d + 16*n, e*n*d + 45*n) bytes at the peak (57 bytes a point in
 * three dimensions for float rows, 69 for double rows) plus CUB's temporary storage;
 * it is estimated before anything is allocated and compared with
 * cudaMemGetInfo.  Per-point kernels run in chunks sized to take a few tens
 * of milliseconds, and the cancel callback is asked between chunks.
 *
 * tuning.dbscan_grid forces the fine or the coarse grid; tuning.debug prints
 * the grid and the time of each chunked kernel to stderr.
 *
 * timing->phase_ms: [0] index, [1] core points, [2] unions, [3] border points
 * and cluster numbers.
 */
#include "dbscan.cuh"
#include "pairs.h"
#include "phases.h"

#include <cub/cub.cuh>

#include <algorithm>
#include <climits>

namespace gc {
namespace dbscan {
namespace {

size_t sort_temp_bytes(int32_t n, int end_bit)
{
	size_t		bytes = 0;
	cub::DoubleBuffer<unsigned long long> k(nullptr, nullptr);
	cub::DoubleBuffer<int32_t> v(nullptr, nullptr);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, end_bit));
	return bytes;
}

size_t scan_temp_bytes(int32_t n)
{
	size_t		bytes = 0;

	CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, (int32_t *) nullptr,
										   (int32_t *) nullptr, n));
	return bytes;
}

/* Device bytes at the peak of the phases (the workspace at each stage), esize bytes an element. */
int64_t bytes_estimate(int32_t n, int32_t d, size_t esize, size_t sort_tmp, size_t scan_tmp)
{
	const int64_t nn = n;
	const int64_t xb = nn * d * (int64_t) esize;
	/* x, two key and two row buffers, sort temp */
	int64_t		s1 = xb + nn * 24 + (int64_t) sort_tmp;
	/* x, keys, rows, xs, flags */
	int64_t		s2 = 2 * xb + nn * 16;
	/* xs, keys, rows, cellid, cell keys and starts, scan temp */
	int64_t		s3 = xb + nn * 28 + 8 + (int64_t) scan_tmp;
	/* xs, rows, cellid, cell keys and starts, hash, parent, core, best */
	int64_t		s4 = xb + nn * 45 + 72;
	/* rows, parent, core, root, minrow, flag, rank, cluster and is_core by row */
	int64_t		s5 = nn * 30 + (int64_t) scan_tmp;

	return std::max({s1, s2, s3, s4, s5}) + (4 << 20);
}

/* The phases in order, from the caller's points x (element type w.dtype) to its result. */
void run(Workspace &w, const void *x, /* [n, d] host */ gc_dbscan_result *result)
{
	gc_timing  *t = w.call.timing;
	Stopwatch	sw;

	if (gc_pair_engine_chosen(&w.call.tuning, w.d))
	{
		require_device_memory(w.call, pairs_bytes_estimate(w.n, w.d, gc_dtype_size(w.dtype)), "DBSCAN",
							  w.n, w.d);
		by_type(w.dtype, [&](auto tv) {
			using T = decltype(tv);

			w.x<T>() = upload_points(w.call, sw, (const T *) x, w.n, w.d);
		});
		w.hx = x;

		Stopwatch	compute;

		pairs_phases(w);
		t->compute_ms = compute.ms();
		copy_results(w.call, {{result->cluster, w.cluster.get(), w.cluster.bytes()},
							  {result->is_core, w.is_core.get(), w.is_core.bytes()}});
		result->n_clusters = w.n_clusters;
		return;
	}
	t->path = GC_PATH_INDEX;

	/* Memory first: say how much is needed before any work starts. */
	require_device_memory(w.call, bytes_estimate(w.n, w.d, gc_dtype_size(w.dtype),
												 sort_temp_bytes(w.n, 64), scan_temp_bytes(w.n)),
						  "DBSCAN", w.n, w.d);
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		w.x<T>() = upload_points(w.call, sw, (const T *) x, w.n, w.d);
	});
	w.hx = x;

	Stopwatch	compute;

	timed(t->phase_ms[GC_DBSCAN_PHASE_INDEX], [&] { index_phase(w); });
	timed(t->phase_ms[GC_DBSCAN_PHASE_CORE], [&] { core_phase(w); });
	timed(t->phase_ms[GC_DBSCAN_PHASE_UNION], [&] { union_phase(w); });
	timed(t->phase_ms[GC_DBSCAN_PHASE_BORDER], [&] { border_phase(w); });
	timed(t->phase_ms[GC_DBSCAN_PHASE_BORDER], [&] { number_phase(w); });
	t->compute_ms = compute.ms();

	copy_results(w.call, {{result->cluster, w.cluster.get(), w.cluster.bytes()},
						  {result->is_core, w.is_core.get(), w.is_core.bytes()}});
	result->n_clusters = w.n_clusters;
}

} // namespace
} // namespace dbscan
} // namespace gc

extern "C" gc_status gcu_dbscan(const gc_exec *exec,
								const void *xv, gc_dtype dtype, /* [n, d] row-major */
								int64_t n, int32_t d, const gc_dbscan_params *params,
								gc_dbscan_result *result)
{
	GC_ENTRY_BEGIN
	gc::require(gc_check_dbscan(params, n, d, gc::error_record()));
	gc::require(gc_check_input("DBSCAN", dtype, params->metric, gc::error_record()));

	const void *x = xv;

	gc::Call	call(exec);

	gc::require_buffers("DBSCAN", x, n,
						result && (n == 0 || (result->cluster && result->is_core)));
	if (n > INT32_MAX - 1)
		return gc::set_error(GC_ERR_INVALID_ARGUMENT,
							 "the GPU DBSCAN takes at most %d points, not %lld",
							 INT32_MAX - 1, (long long) n);
	result->n_clusters = 0;
	if (n == 0)
		return GC_OK;
	gc::run_on_device(call, [&] {
		gc::dbscan::Workspace w(call, dtype, (int32_t) n, d, *params);

		gc::dbscan::run(w, x, result);
	});
	GC_ENTRY_END
}
