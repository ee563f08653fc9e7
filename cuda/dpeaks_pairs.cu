/*
 * dpeaks_pairs.cu
 *    Density peaks' rho and delta on the GPU pair engine (cuda/pairs.cuh),
 *    where the grid prunes nothing (common/pairs.h, gc_pair_engine_chosen):
 *    the answers of the CPU core's dp_pairs_rho and dp_pairs_delta
 *    (src/core/dpeaks.c), which are the scans', bit for bit.
 *
 *  dc      exact (n <= GC_DP_DC_EXACT_MAX_N): the seeded sample of
 *          phase dc gives a window around the quantile; one pass over the
 *          tiles counts the pairs below it (by the screen's upper bound
 *          where it suffices) and keeps the canonical dist2 of those in it,
 *          and a sort of those picks the pair of the rank; the radix select
 *          of cuda/dpeaks_dc.cu where the window missed;
 *  rho     the tiles of the upper triangle over the rows in their own
 *          order, each unordered pair once, adding to both rows.
 *          Gaussian: a pair whose dist2 the screen puts above
 *          gc_dp_gauss_reach has a term of exactly zero; every other
 *          pair's term comes from its canonical dist2, into 128-bit
 *          fixed-point sums (order-free).  Cutoff: the pairs with
 *          dist2 < T, decided by the engine (dist2 <= the double below T);
 *  delta   a second engine over the rows in density order, so that a row's
 *          candidates are the rows before it: the tiles of the upper
 *          triangle, one warp per column (the query), its lanes over the
 *          tile's rows (the denser candidates).  A candidate whose screened
 *          lower bound on dist2 exceeds the warp's best so far cannot be
 *          nearer, nor equal; the others take the canonical dist2 and the
 *          tie rule gc_dp_better.
 */
#include "dpeaks.cuh"
#include "pairs.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>

namespace gc {
namespace dpeaks {
namespace {

constexpr int kRows = 128;		/* rho: threads (rows) per block */
constexpr int kChunk = 256;		/* rho: columns per thread */
constexpr int kWarps = 8;		/* delta: warps (columns) per block */

/* f(float{}) or f(double{}) for the element type of the call. */
template <typename F>
void by_dtype(gc_dtype t, F &&f)
{
	if (t == GC_F64)
		f(0.0);
	else
		f(0.0f);
}

/* Adds v to the 128-bit fixed-point sum (hi, lo) with atomics: exact and order-free. */
__device__ __forceinline__ void acc_atomic(unsigned long long *hi, unsigned long long *lo, uint64_t v)
{
	unsigned long long old = atomicAdd(lo, (unsigned long long) v);

	if (old + v < old)
		atomicAdd(hi, 1ULL);
}

/*
 * rho over one tile: rows i (a lane each) against a chunk of columns j;
 * the row's sum stays in registers, a column's terms are summed over the
 * warp (at most 32 terms of at most 2^56) and added once.  (Holding row
 * i in registers for d <= 64 made the gaussian pass slower on the H200,
 * 213 against 172 ms at 100k x 64.)
 */
template <typename T, bool GAUSS>
__global__ void rho_tile_kernel(pairs::Tile tl, gc_metric metric, double inv,
								unsigned long long *hi, /* [n] */ unsigned long long *lo /* [n] */)
{
	const int32_t i = tl.i0 + blockIdx.x * kRows + threadIdx.x;
	const int32_t jb = tl.j0 + blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);
	const bool	valid = i < tl.i0 + tl.bi;
	const bool	diag = tl.diag;
	uint64_t	rhi = 0,
				rlo = 0;
	unsigned	exact = 0;
	for (int32_t j = jb; j < je; j++)
	{
		uint64_t	term = 0;

		if (valid && (!diag || j > i))
		{
			if (GAUSS)
			{
				if (gc_pair_decide(&tl.bound, pairs::screened(tl, i, j), __dadd_rn(tl.nx[i], tl.nx[j])) != 0)
				{
					double		d2 = pairs::canonical_dist2((const T *) tl.x + (size_t) i * tl.d,
														(const T *) tl.x + (size_t) j * tl.d, tl.d);

					exact++;
					term = gc_dp_gauss_fixed(gc_dp_gauss_u(metric, d2, inv));
				}
			}
			else
				term = pairs::pair_in<T>(tl, i, j, exact) ? 1 : 0;
		}
		gc_dp_acc_add(&rhi, &rlo, term);

		uint64_t	col = term;

		for (int o = 16; o > 0; o >>= 1)
			col += __shfl_down_sync(0xffffffffu, col, o);
		if ((threadIdx.x & 31) == 0 && col)
			acc_atomic(hi + j, lo + j, col);
	}
	if (valid && (rhi || rlo))
	{
		if (rhi)
			atomicAdd(hi + i, (unsigned long long) rhi);
		acc_atomic(hi + i, lo + i, rlo);
	}
	pairs::warp_add(tl.exact, exact);
}

/*
 * The exact dc's pass: pairs certainly below lo (by the screen's upper
 * bound, or their canonical dist2) are counted; the canonical dist2 of
 * those in [lo, hi] is kept (as its bit pattern) while there is room.
 */
template <typename T>
__global__ void dc_window_kernel(pairs::Tile tl, double lo, double hi, unsigned long long *below, /* [1] */
								 uint64_t *keys, /* [cap] */ unsigned long long *len, /* [1] */
								 unsigned long long cap)
{
	const int32_t i = tl.i0 + blockIdx.x * kRows + threadIdx.x;
	const int32_t jb = tl.j0 + blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);
	const bool	diag = tl.diag;
	unsigned	nb = 0,
				exact = 0;

	if (i < tl.i0 + tl.bi)
		for (int32_t j = diag ? max(jb, i + 1) : jb; j < je; j++)
		{
			if (pairs::upper(tl, i, j) < lo)
			{
				nb++;
				continue;
			}
			if (pairs::lower(tl, i, j) > hi)
				continue;

			double		d2 = pairs::canonical_dist2((const T *) tl.x + (size_t) i * tl.d,
													(const T *) tl.x + (size_t) j * tl.d, tl.d);

			exact++;
			if (d2 < lo)
				nb++;
			else if (d2 <= hi)
			{
				unsigned long long q = atomicAdd(len, 1ULL);

				if (q < cap)
					keys[q] = gc_dp_key(d2);
			}
		}
	pairs::warp_add(below, nb);
	pairs::warp_add(tl.exact, exact);
}

__global__ void rho_value_kernel(int64_t n, const unsigned long long *hi, const unsigned long long *lo,
								 bool gauss, double *rho)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		rho[i] = gauss ? gc_dp_acc_value(hi[i], lo[i]) : (double) lo[i];
}

/*
 * delta over one tile of the rows in density order: the warp of column j
 * (rank j) looks at the tile's rows i < j (denser), each lane at every
 * 32nd; best_d2 / best_r carry the answer across the tiles of the column.
 */
template <typename T>
__global__ void delta_tile_kernel(pairs::Tile tl, double *best_d2, /* [n] by rank */
								  int64_t *best_r /* [n] by rank */)
{
	const unsigned lane = threadIdx.x & 31;
	const int32_t j = tl.j0 + blockIdx.x * kWarps + (int32_t) (threadIdx.x >> 5);

	if (j >= tl.j0 + tl.bj || j == 0)
		return;					/* the whole warp: j is the warp's */

	const int32_t ie = min(tl.i0 + tl.bi, j);
	const T    *xj = (const T *) tl.x + (size_t) j * tl.d;
	double		bd2 = best_d2[j];
	int64_t		br = best_r[j];
	double		thr = bd2;		/* the warp's best dist2 so far: nothing farther can win */
	unsigned	exact = 0;
	int			step = 0;

	for (int32_t i0 = tl.i0; i0 < ie; i0 += 32)
	{
		int32_t		i = i0 + (int32_t) lane;

		if (i < ie && !(pairs::lower(tl, i, j) > thr))
		{
			double		d2 = pairs::canonical_dist2((const T *) tl.x + (size_t) i * tl.d, xj, tl.d);

			exact++;
			if (br < 0 || gc_dp_better(d2, i, bd2, br))
			{
				bd2 = d2;
				br = i;
			}
		}
		if ((++step & 3) == 0)
		{
			double		m = bd2;

			for (int o = 16; o > 0; o >>= 1)
				m = fmin(m, __shfl_xor_sync(0xffffffffu, m, o));
			thr = fmin(thr, m);
		}
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		double		od2 = __shfl_xor_sync(0xffffffffu, bd2, o);
		int64_t		orr = __shfl_xor_sync(0xffffffffu, br, o);

		if (orr >= 0 && (br < 0 || gc_dp_better(od2, orr, bd2, br)))
		{
			bd2 = od2;
			br = orr;
		}
	}
	if (lane == 0)
	{
		best_d2[j] = bd2;
		best_r[j] = br;
	}
	pairs::warp_add(tl.exact, exact);
}

/* rows[r, :] = x[by_rank[r], :]: the rows in density order. */
template <typename T>
__global__ void gather_rows_kernel(const T *x, /* [n, d] */ const int64_t *by_rank, /* [n] */ int64_t n,
								   int d, T *rows /* [n, d] */)
{
	for (int64_t q = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; q < n * d;
		 q += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		r = q / d;

		rows[q] = x[by_rank[r] * d + (q - r * d)];
	}
}

__global__ void delta_init_kernel(int64_t n, double *best_d2, int64_t *best_r)
{
	for (int64_t r = 1 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		best_d2[r] = INFINITY;
		best_r[r] = -1;
	}
}

} // namespace

int64_t pairs_bytes_estimate(const Workspace &w, int64_t esize)
{
	/* the rows twice (by row, then in density order), the sums, the engine */
	return 2 * w.n * w.d * esize + 16 * w.n + pairs::Engine::bytes_estimate((int32_t) w.n, w.d);
}

bool dc_exact_pairs(Workspace &w, int64_t k, uint64_t seed, uint64_t *key)
{
	const int64_t n = w.n;
	const double N = (double) n * (double) (n - 1) / 2.0;
	/* the rank among unordered pairs: every value appears twice among the ordered ones */
	const int64_t m = (k + 1) / 2;
	const int64_t S = GC_DP_DC_SAMPLE_PAIRS;
	DeviceBuffer<uint64_t> sample;
	uint64_t	klo = 0,
				khi = 0;
	bool		found = false;

	if (n < 2 || n >= INT32_MAX)
		return false;

	/*
	 * A window [lo, hi] around the quantile from the seeded sample: six
	 * standard deviations of the sample quantile's rank on either side,
	 * so that the selection rarely falls outside it (and is still exact
	 * when it does, through the radix select).
	 */
	dc_sample_sorted(w, w.xs.get(), seed, sample);

	const double p = (double) m / N;
	const double delta = 6.0 * std::sqrt(p * (1.0 - p) / (double) S) + 2.0 / (double) S;
	const int64_t rlo = (int64_t) std::floor((p - delta) * (double) S);
	const int64_t rhi = (int64_t) std::ceil((p + delta) * (double) S);
	double		lo = 0.0,
				hi = INFINITY;

	if (rlo >= 0)
	{
		CUDA_TRY(cudaMemcpy(&klo, sample.get() + rlo, sizeof(klo), cudaMemcpyDeviceToHost));
		lo = gc_dp_unkey(klo);
	}
	if (rhi < S)
	{
		CUDA_TRY(cudaMemcpy(&khi, sample.get() + rhi, sizeof(khi), cudaMemcpyDeviceToHost));
		hi = gc_dp_unkey(khi);
	}
	sample.release();
	if (!std::isfinite(hi))
		return false;

	/* room for eight times the pairs the window should hold, at least 2^20, at most a sixteenth of the free memory */
	size_t		free_b = 0,
				total_b = 0;

	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));

	const unsigned long long cap = (unsigned long long) std::min<double>(
		std::max<double>(8.0 * 2.0 * delta * N, 1 << 20), (double) (free_b / 16 / sizeof(uint64_t)));
	DeviceBuffer<uint64_t> keys((size_t) cap, "the dc window");
	DeviceBuffer<unsigned long long> counts(2, "the dc window");
	unsigned long long c[2] = {0, 0};

	CUDA_TRY(cudaMemset(counts.get(), 0, 2 * sizeof(unsigned long long)));
	by_dtype(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		pairs::Engine eng(w.call, w.hx, w.rows<T>(), w.dtype, (int32_t) n, w.d, hi);

		eng.run([&](const pairs::Tile &tl) {
			dim3		grid((unsigned) ((tl.bi + kRows - 1) / kRows), (unsigned) ((tl.bj + kChunk - 1) / kChunk));

			dc_window_kernel<T><<<grid, kRows>>>(tl, lo, hi, counts.get(), keys.get(), counts.get() + 1, cap);
			CHECK_LAUNCH("dc_window_kernel");
		});
	});
	CUDA_TRY(cudaMemcpy(c, counts.get(), sizeof(c), cudaMemcpyDeviceToHost));

	const unsigned long long below = c[0],
				kept = c[1];

	if (kept <= cap && (unsigned long long) m > below && (unsigned long long) m <= below + kept)
	{
		DeviceBuffer<uint64_t> sorted((size_t) std::max<unsigned long long>(kept, 1), "the dc window");
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys.get(), sorted.get(), (int64_t) kept));
		CUDA_TRY(cub::DeviceRadixSort::SortKeys(w.temp.get(bytes), bytes, keys.get(), sorted.get(),
												(int64_t) kept));
		CHECK_LAUNCH("SortKeys");
		CUDA_TRY(cudaMemcpy(key, sorted.get() + (m - (int64_t) below - 1), sizeof(*key), cudaMemcpyDeviceToHost));
		found = true;
	}
	if (w.call.tuning.debug)
		fprintf(stderr, "gpuclust dpeaks dc: window [%g, %g] below=%llu kept=%llu cap=%llu rank=%lld %s\n", lo, hi,
				below, kept, cap, (long long) m, found ? "found" : "missed: radix select");
	return found;
}

void rho_pairs_engine(Workspace &w)
{
	const int64_t n = w.n;
	DeviceBuffer<unsigned long long> hi((size_t) n, "the densities' sums");
	DeviceBuffer<unsigned long long> lo((size_t) n, "the densities' sums");
	double		inv = 0.0,
				t;

	CUDA_TRY(cudaMemset(hi.get(), 0, hi.bytes()));
	CUDA_TRY(cudaMemset(lo.get(), 0, lo.bytes()));
	if (w.gauss)
	{
		inv = gc_dp_gauss_factor(w.metric, w.dc);
		t = gc_dp_gauss_reach(w.metric, inv);
	}
	else
		t = std::nextafter(gc_dp_cutoff_threshold(w.metric, w.dc), 0.0);
	by_dtype(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		const T    *dx = w.rows<T>();
		pairs::Engine eng(w.call, w.hx, dx, w.dtype, (int32_t) n, w.d, t);

		eng.run([&](const pairs::Tile &tl) {
			dim3		grid((unsigned) ((tl.bi + kRows - 1) / kRows), (unsigned) ((tl.bj + kChunk - 1) / kChunk));

			if (w.gauss)
				rho_tile_kernel<T, true><<<grid, kRows>>>(tl, w.metric, inv, hi.get(), lo.get());
			else
				rho_tile_kernel<T, false><<<grid, kRows>>>(tl, w.metric, inv, hi.get(), lo.get());
			CHECK_LAUNCH("rho_tile_kernel");
		});
		w.pair_exact = eng.exact();
	});
	rho_value_kernel<<<grid_for(n), kBlock>>>(n, hi.get(), lo.get(), w.gauss, w.rho.get());
	CHECK_LAUNCH("rho_value_kernel");
}

void delta_pairs_engine(Workspace &w)
{
	const int64_t n = w.n;

	delta_init_kernel<<<grid_for(n), kBlock>>>(n, w.bd2_r.get(), w.nbr_r.get());
	CHECK_LAUNCH("delta_init_kernel");
	by_dtype(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		DeviceBuffer<T> rows((size_t) n * w.d, "the rows in density order");

		gather_rows_kernel<T><<<grid_for(n * w.d), kBlock>>>(w.rows<T>(), w.by_rank.get(), n, w.d, rows.get());
		CHECK_LAUNCH("gather_rows_kernel");
		w.xrow_f.release();
		w.xrow_d.release();

		/* the scale of the decisions: the densities' radius */
		pairs::Engine eng(w.call, w.hx, rows.get(), w.dtype, (int32_t) n, w.d,
						  gc_dp_cutoff_threshold(w.metric, w.dc));

		eng.run([&](const pairs::Tile &tl) {
			delta_tile_kernel<T><<<(unsigned) ((tl.bj + kWarps - 1) / kWarps), kWarps * 32>>>(
				tl, w.bd2_r.get(), w.nbr_r.get());
			CHECK_LAUNCH("delta_tile_kernel");
		}, pairs::Engine::Slices::rows);
		w.call.timing->pair_exact = w.pair_exact + eng.exact();
	});
}

} // namespace dpeaks
} // namespace gc
