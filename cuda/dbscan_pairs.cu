/*
 * dbscan_pairs.cu
 *    DBSCAN on the GPU pair engine (cuda/pairs.cuh), where the grid prunes
 *    little (common/pairs.h, gc_pair_engine_chosen): the answer of the CPU
 *    core's dbscan_pairs (src/core/dbscan.c), which is the grid's, bit for
 *    bit.  The rows keep their own order (row is the identity), and the
 *    phases are:
 *
 *   index   the engine's operands, norms, precision and tile;
 *   core    every tile of the upper triangle: each pair within eps counts
 *           for both its rows;
 *   union   every tile of the upper triangle: core rows within eps are
 *           joined in the disjoint-set forest of cuda/dbscan_device.cuh;
 *           a non-core row takes the lowest core row within eps (an
 *           atomicMin over the pairs that find one), and pairs that can
 *           no longer lower it are not looked at;
 *   number  cuda/dbscan_number.cu, unchanged.
 * The core flags must be complete before any union, so the tiles are
 * visited twice; no adjacency is stored.
 */
#include "dbscan_device.cuh"
#include "pairs.cuh"
#include "phases.h"

#include <climits>

namespace gc {
namespace dbscan {
namespace {

constexpr int kRows = 128;		/* threads (rows) per block */
constexpr int kChunk = 256;		/* columns per thread */

inline dim3 tile_grid(const pairs::Tile &tl)
{
	return dim3((unsigned) ((tl.bi + kRows - 1) / kRows), (unsigned) ((tl.bj + kChunk - 1) / kChunk));
}

/*
 * The tiles are those of the upper triangle (pairs.cuh), so every unordered
 * pair of rows is looked at once, by the warp whose lanes hold its row i:
 * the lane decides it for row i, and a ballot over the warp gives row j
 * (the column) what the warp found for it.  On a diagonal tile only pairs
 * j > i are looked at; a row's pair with itself is in, always (dist2 0).
 */

/* Core pass: count[i] += rows within eps among the tile's pairs. */
template <typename T>
__global__ void pairs_core_kernel(pairs::Tile tl, unsigned int *count /* [n] */)
{
	const int32_t i = tl.i0 + blockIdx.x * kRows + threadIdx.x;
	const int32_t jb = tl.j0 + blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);
	const bool	valid = i < tl.i0 + tl.bi;
	const bool	diag = tl.i0 == tl.j0;
	unsigned	exact = 0,
				c = 0;

	for (int32_t j = jb; j < je; j++)
	{
		bool		in = valid && (!diag || j > i) && pairs::pair_in<T>(tl, i, j, exact);
		unsigned	col = __ballot_sync(0xffffffffu, in);

		c += in;
		if ((threadIdx.x & 31) == 0 && col)
			atomicAdd(count + j, (unsigned) __popc(col));
	}
	if (valid && c)
		atomicAdd(count + i, c);
	pairs::warp_add(tl.exact, exact);
}

/*
 * Union pass: core rows within eps joined; a non-core row's best is the
 * lowest core row within eps (atomicMin, from its own lane and, as a
 * column, from the lowest lane of a warp that found one).
 */
template <typename T>
__global__ void pairs_union_kernel(pairs::Tile tl, const uint8_t *core, /* [n] */
								   int32_t *parent, /* [n] */ int32_t *best /* [n] */)
{
	const int32_t i = tl.i0 + blockIdx.x * kRows + threadIdx.x;
	const int32_t warp0 = i - (int32_t) (threadIdx.x & 31);
	const int32_t jb = tl.j0 + blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);
	const bool	valid = i < tl.i0 + tl.bi;
	const bool	diag = tl.i0 == tl.j0;
	const bool	ci = valid && core[i];
	unsigned	exact = 0;

	for (int32_t j = jb; j < je; j++)
	{
		const bool	cj = core[j];
		/* what the pair can change: a union, row i's best, or column j's best */
		bool		need = valid && (!diag || j > i) &&
			((ci && cj) || (!ci && cj && best[i] > j) || (ci && !cj && best[j] > warp0));
		bool		in = need && pairs::pair_in<T>(tl, i, j, exact);
		unsigned	col = __ballot_sync(0xffffffffu, in && ci && !cj);

		if (in && ci && cj)
			uf_union(parent, i, j);
		else if (in && !ci)
			atomicMin(best + i, j);
		if ((threadIdx.x & 31) == 0 && col)
			atomicMin(best + j, warp0 + __ffs(col) - 1);
	}
	pairs::warp_add(tl.exact, exact);
}

/* core[i]: the count of the core pass, plus the row itself, reaches min_pts. */
__global__ void pairs_flag_kernel(int32_t n, int32_t min_pts, const unsigned int *count, uint8_t *core)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		core[i] = count[i] + 1 >= (unsigned) min_pts;
}

__global__ void pairs_init_kernel(int32_t n, int32_t *row, int32_t *parent, int32_t *best,
								  unsigned int *count, uint8_t *core)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	row[i] = i;
	parent[i] = i;
	best[i] = INT_MAX;
	count[i] = 0;
	core[i] = 0;
}

/* best: the core row found, or -1 (number_phase's convention). */
__global__ void pairs_best_kernel(int32_t n, int32_t *best)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && best[i] == INT_MAX)
		best[i] = -1;
}

} // namespace

int64_t pairs_bytes_estimate(int32_t n, int32_t d, size_t esize)
{
	/* the rows, row, parent, best, count, core; then number_phase's 30 bytes a row */
	return (int64_t) n * d * (int64_t) esize + (int64_t) n * 17 + pairs::Engine::bytes_estimate(n, d) +
		(int64_t) n * 30 + (4 << 20);
}

/* The phases on the pair engine: w.cluster, w.is_core, w.n_clusters from the device rows w.x<T>(). */
void pairs_phases(Workspace &w)
{
	gc_timing  *t = w.call.timing;
	const int32_t n = w.n;

	DeviceBuffer<unsigned int> count;

	timed(t->phase_ms[GC_DBSCAN_PHASE_INDEX], [&] {
		w.row.reset(n, "row numbers");
		w.parent.reset(n, "the forest");
		w.best.reset(n, "border points");
		w.core.reset(n, "core flags");
		count.reset(n, "neighbour counts");
		pairs_init_kernel<<<grid_for(n), kBlock>>>(n, w.row.get(), w.parent.get(), w.best.get(),
												   count.get(), w.core.get());
		CHECK_LAUNCH("pairs_init_kernel");
	});

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		Stopwatch	sw;
		pairs::Engine eng(w.call, w.hx, w.x<T>().get(), w.dtype, n, w.d, w.bound);

		CUDA_TRY(cudaDeviceSynchronize());
		t->phase_ms[GC_DBSCAN_PHASE_INDEX] += sw.ms();
		timed(t->phase_ms[GC_DBSCAN_PHASE_CORE], [&] {
			eng.run([&](const pairs::Tile &tl) {
				pairs_core_kernel<T><<<tile_grid(tl), kRows>>>(tl, count.get());
				CHECK_LAUNCH("pairs_core_kernel");
			});
			pairs_flag_kernel<<<grid_for(n), kBlock>>>(n, w.min_pts, count.get(), w.core.get());
			CHECK_LAUNCH("pairs_flag_kernel");
			CUDA_TRY(cudaDeviceSynchronize());
		});
		count.release();
		timed(t->phase_ms[GC_DBSCAN_PHASE_UNION], [&] {
			eng.run([&](const pairs::Tile &tl) {
				pairs_union_kernel<T><<<tile_grid(tl), kRows>>>(tl, w.core.get(), w.parent.get(),
																w.best.get());
				CHECK_LAUNCH("pairs_union_kernel");
			});
			pairs_best_kernel<<<grid_for(n), kBlock>>>(n, w.best.get());
			CHECK_LAUNCH("pairs_best_kernel");
			CUDA_TRY(cudaDeviceSynchronize());
		});
		if (w.debug())
			fprintf(stderr, "gpuclust dbscan pairs: screen=%s exact=%lld\n",
					gc_pair_precision_names[eng.precision()], (long long) eng.exact());
	});
	timed(t->phase_ms[GC_DBSCAN_PHASE_BORDER], [&] { number_phase(w); });
}

} // namespace dbscan
} // namespace gc
