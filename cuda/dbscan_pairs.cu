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
 *           for both its rows, and is kept for the union while they fit
 *           (16 pairs a row, or up to a thirty-second of the free device
 *           memory where that holds more);
 *   union   core rows within eps are joined in the disjoint-set forest of
 *           cuda/dbscan_device.cuh; a non-core row takes the lowest core
 *           row within eps (an atomicMin over the pairs that find one).
 *           The kept pairs serve where they are all the pairs within eps;
 *           otherwise (an eps that covers much of the data) every tile of
 *           the upper triangle is looked at again, skipping the pairs that
 *           can no longer change anything;
 *   number  cuda/dbscan_number.cu, unchanged.
 * The core flags must be complete before any union, hence the kept pairs;
 * no adjacency is stored.  The CPU core (src/core/dbscan.c, dbscan_pairs)
 * does the same.
 */
#include "dbscan_device.cuh"
#include "pairs.cuh"
#include "phases.h"

#include <algorithm>
#include <climits>

namespace gc {
namespace dbscan {
namespace {

constexpr int kRows = 128;		/* threads (rows) per block */
constexpr int kChunk = 256;		/* columns per thread */
constexpr int kKeptPerRow = 16;	/* pairs within eps kept for the union, a row on average, at least */
constexpr unsigned long long kKeptMax = 1ULL << 30;	/* and at most, in all (8 GiB) */

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

/*
 * The pairs within eps that the core pass keeps for the union: up to cap,
 * appended a warp at a time; *len counts past cap when they do not fit,
 * and the union then looks at the tiles again.
 */
struct Kept
{
	int2	   *ij;				/* [cap] */
	unsigned long long *len;	/* [1] */
	unsigned long long cap;
};

/*
 * Core pass: count[i] += rows within eps among the tile's pairs, and the
 * pairs themselves into kept while it has room.
 */
template <typename T>
__global__ void pairs_core_kernel(pairs::Tile tl, unsigned int *count, /* [n] */ Kept kept)
{
	const int32_t i = tl.i0 + blockIdx.x * kRows + threadIdx.x;
	const int32_t jb = tl.j0 + blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);
	const bool	valid = i < tl.i0 + tl.bi;
	const bool	diag = tl.diag;
	const unsigned lane = threadIdx.x & 31;
	/* once full, a warp stops keeping (one atomic past cap per warp at most) */
	bool		keep = __shfl_sync(0xffffffffu,
								   lane == 0 && *(volatile unsigned long long *) kept.len < kept.cap, 0);
	unsigned	exact = 0,
				c = 0;

	for (int32_t j = jb; j < je; j++)
	{
		bool		in = valid && (!diag || j > i) && pairs::pair_in<T>(tl, i, j, exact);
		unsigned	col = __ballot_sync(0xffffffffu, in);

		c += in;
		if (!col)
			continue;
		if (lane == 0)
			atomicAdd(count + j, (unsigned) __popc(col));
		if (keep)
		{
			unsigned long long base = 0;

			if (lane == 0)
				base = atomicAdd(kept.len, (unsigned long long) __popc(col));
			base = __shfl_sync(0xffffffffu, base, 0);
			if (base + __popc(col) > kept.cap)
				keep = false;
			else if (in)
				kept.ij[base + __popc(col & ((1u << lane) - 1))] = make_int2(i, j);
		}
	}
	if (valid && c)
		atomicAdd(count + i, c);
	pairs::warp_add(tl.exact, exact);
}

/* The union from the kept pairs: core rows joined, a non-core row's best lowered. */
__global__ void pairs_union_kept_kernel(const int2 *ij, /* [m] */ int64_t m, const uint8_t *core, /* [n] */
										int32_t *parent, /* [n] */ int32_t *best /* [n] */)
{
	for (int64_t q = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; q < m;
		 q += (int64_t) gridDim.x * blockDim.x)
	{
		int32_t		i = ij[q].x,
					j = ij[q].y;
		bool		ci = core[i],
					cj = core[j];

		if (ci && cj)
			uf_union(parent, i, j);
		else if (ci)
			atomicMin(best + j, i);
		else if (cj)
			atomicMin(best + i, j);
	}
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
	const bool	diag = tl.diag;
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
	/* the rows, row, parent, best, count, core, the kept pairs; then number_phase's 30 bytes a row */
	return (int64_t) n * d * (int64_t) esize + (int64_t) n * 17 + (int64_t) n * kKeptPerRow * 8 +
		pairs::Engine::bytes_estimate(n, d) + (int64_t) n * 30 + (4 << 20);
}

/* The phases on the pair engine: w.cluster, w.is_core, w.n_clusters from the device rows w.x<T>(). */
void pairs_phases(Workspace &w)
{
	gc_timing  *t = w.call.timing;
	const int32_t n = w.n;

	DeviceBuffer<unsigned int> count;
	DeviceBuffer<int2> kept_ij;
	DeviceBuffer<unsigned long long> kept_len;
	unsigned long long kept = 0;
	unsigned long long cap = (unsigned long long) n * kKeptPerRow;

	timed(t->phase_ms[GC_DBSCAN_PHASE_INDEX], [&] {
		w.row.reset(n, "row numbers");
		w.parent.reset(n, "the forest");
		w.best.reset(n, "border points");
		w.core.reset(n, "core flags");
		count.reset(n, "neighbour counts");
		{
			/*
			 * The kept pairs: 16 a row are in the memory estimate; where a
			 * thirty-second of the free memory holds more, up to that, so
			 * that an eps with many neighbours still needs no second pass.
			 */
			size_t		free_b = 0,
						total_b = 0;

			CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
			cap = std::max<unsigned long long>(cap, std::min<unsigned long long>(free_b / 32 / sizeof(int2),
																				 kKeptMax));
		}
		kept_ij.reset((size_t) cap, "the pairs within eps");
		kept_len.reset(1, "the pairs within eps");
		CUDA_TRY(cudaMemset(kept_len.get(), 0, sizeof(unsigned long long)));
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
				pairs_core_kernel<T><<<tile_grid(tl), kRows>>>(tl, count.get(),
															   Kept{kept_ij.get(), kept_len.get(), cap});
				CHECK_LAUNCH("pairs_core_kernel");
			});
			pairs_flag_kernel<<<grid_for(n), kBlock>>>(n, w.min_pts, count.get(), w.core.get());
			CHECK_LAUNCH("pairs_flag_kernel");
			CUDA_TRY(cudaMemcpy(&kept, kept_len.get(), sizeof(kept), cudaMemcpyDeviceToHost));
		});
		count.release();
		timed(t->phase_ms[GC_DBSCAN_PHASE_UNION], [&] {
			if (kept <= cap)
			{
				/* every pair within eps was kept: the tiles are not visited again */
				pairs_union_kept_kernel<<<grid_for((int64_t) std::max<unsigned long long>(kept, 1)), kBlock>>>(
					kept_ij.get(), (int64_t) kept, w.core.get(), w.parent.get(), w.best.get());
				CHECK_LAUNCH("pairs_union_kept_kernel");
			}
			else
				eng.run([&](const pairs::Tile &tl) {
					pairs_union_kernel<T><<<tile_grid(tl), kRows>>>(tl, w.core.get(), w.parent.get(),
																	w.best.get());
					CHECK_LAUNCH("pairs_union_kernel");
				});
			kept_ij.release();
			pairs_best_kernel<<<grid_for(n), kBlock>>>(n, w.best.get());
			CHECK_LAUNCH("pairs_best_kernel");
			CUDA_TRY(cudaDeviceSynchronize());
		});
		if (w.debug())
			fprintf(stderr, "gpuclust dbscan pairs: screen=%s exact=%lld union from %s\n",
					gc_pair_precision_names[eng.precision()], (long long) eng.exact(),
					kept <= cap ? "the kept pairs" : "a second pass");
	});
	timed(t->phase_ms[GC_DBSCAN_PHASE_BORDER], [&] { number_phase(w); });
}

} // namespace dbscan
} // namespace gc
