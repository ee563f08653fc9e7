/*
 * hdbscan_pairs.cu
 *    The GPU HDBSCAN's core distances and minimum spanning tree on the pair
 *    engine (cuda/pairs.cuh), for many features (gc_pair_engine_chosen of
 *    common/pairs.h), where the hierarchy of cuda/hdbscan_tree.cu prunes
 *    nothing: the distances between blocks of rows as cuBLAS products, and
 *    every distance that can enter the answer recomputed in the canonical
 *    arithmetic (pairs::canonical_dist2: gc_dist2 / gc_dist2_f64 bit for
 *    bit), so the core distances and the tree are those of the CPU back end
 *    (src/core/hdbscan_pairs.c and the k-d tree of src/core/hdbscan.c).
 *    The rest (the sort of the edges, the hierarchy, the condensed tree and
 *    the finish) is the tree path's, unchanged (cuda/hdbscan.cu).
 *
 * Core distances: each row keeps, in global memory, the kk least exact
 * dist2 seen so far in ascending order with their rows (kk = min_samples +
 * 1, or min_samples when that is every row; +infinity and -1 while empty).
 * The engine visits each unordered pair of rows once (the upper triangle),
 * so a tile has two kernels: one thread per row of the tile walks all the
 * tile's columns for the row's list, and, off the diagonal, one warp per
 * column walks the tile's rows (its lanes over 32 rows at a time) for the
 * column's list; a diagonal tile's rows see every column of the tile,
 * themselves included (dist2 0), in the first kernel.  A pair is computed
 * exactly only where the screen's lower bound (pairs::lower) is below the
 * list's kk-th value; any other pair is farther than kk rows already seen.
 * The min_samples-th value is the core dist2, whatever the order of the
 * tiles and the ties.
 *
 * The spanning tree: Boruvka rounds, each component's least edge under
 * mutual reachability max(core_i, core_j, d_ij) and the order of edges of
 * common/hdbscan.h (weight, lower row, higher row), whose minimum spanning
 * tree is unique, so it is the CPU's.  Each round the rows are put in the
 * order of their components (a stable radix sort by component), the engine
 * is prepared on that order, and the tiles whose rows and columns all lie
 * in one component are skipped (Engine::run_where).  Per tile one kernel
 * (a thread per row, a block per 256 columns) looks at each pair of
 * different components for both of them: it is computed exactly where its
 * cores and the screen's lower bound leave its weight at most the
 * component's bound, the least weight found so far of an edge out of the
 * component (the bits of the weight, shared through atomicMin; in the
 * first round primed with each row's least edge over its kk nearest).
 * Every edge computed at a weight not above the bound of one of its
 * components is kept (a candidate); the least weight of each component is
 * then exact, and its least (lower row, higher row) among its candidates
 * at that weight (an atomicMin of lo << 32 | hi) is its least edge.  Where
 * the candidates overflow their buffer (4 a row: ties everywhere, as with
 * duplicate rows), a second pass over the tiles finds the edges at each
 * component's least weight instead.  The components' edges are joined as
 * in the tree path (join_components of cuda/hdbscan_search.cu).
 *
 * Memory is linear in the rows: the rows and their copy in the round's
 * order, the engine's operands and tile, 12 kk bytes a row of lists during
 * the core pass, about 130 bytes a row during the rounds.  Each tile's
 * kernels are short; the engine asks the cancel callback about every 10 ms.
 * min_samples + 1 above kPairsK keeps the tree path (cuda/hdbscan.cuh);
 * otherwise the GPU takes this path where the CPU does (the rule of
 * common/pairs.h, or gpuclust.pair_path).
 */
#include "hdbscan.cuh"
#include "pairs.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <climits>
#include <vector>

namespace gc {
namespace hdbscan {
namespace {

constexpr int kRows = 128;		/* threads (rows) per block of a round's kernel */
constexpr int kChunk = 256;		/* columns per block of a round's kernel */
constexpr int kCoreRows = 64;	/* threads (rows) per block of the core pass's row kernel */
constexpr int kCoreWarps = 4;	/* warps (columns) per block of the core pass's column kernel */
constexpr int kSample = 256;	/* rows of the sample that sets the screen's precision */
constexpr int64_t kCandPerRow = 4;	/* candidate edges a round keeps, per row */
constexpr unsigned long long kNone = ~0ULL;

/* Values kept per row: min_samples + 1, or min_samples when that is every row. */
inline int32_t list_len(int32_t k, int32_t n)
{
	return k < n ? k + 1 : k;
}

/* The rows' lists of the core pass: [kk, n], value s of row r at s * n + r. */
struct Lists
{
	double	   *val;			/* ascending exact dist2, +infinity while empty */
	int32_t    *nbr;			/* their rows, -1 while empty */
	int32_t		kk;
	int32_t		n;
};

/* Inserts d2 (row q) into row r's list (d2 below its last value); returns the new last value. */
__device__ double list_insert(Lists L, int32_t r, double d2, int32_t q)
{
	int32_t		s = L.kk - 1;

	while (s > 0)
	{
		const double v = L.val[(size_t) (s - 1) * L.n + r];

		if (v <= d2)
			break;
		L.val[(size_t) s * L.n + r] = v;
		L.nbr[(size_t) s * L.n + r] = L.nbr[(size_t) (s - 1) * L.n + r];
		s--;
	}
	L.val[(size_t) s * L.n + r] = d2;
	L.nbr[(size_t) s * L.n + r] = q;
	return L.val[(size_t) (L.kk - 1) * L.n + r];
}

/* A row of the tile against every column of the tile, for the row's list. */
template <typename T>
__global__ void __launch_bounds__(kCoreRows) knn_rows_kernel(pairs::Tile tl, Lists L)
{
	const int32_t i = tl.i0 + (int32_t) (blockIdx.x * blockDim.x + threadIdx.x);
	unsigned	exact = 0;

	if (i < tl.i0 + tl.bi)
	{
		const T    *xi = (const T *) tl.x + (size_t) i * tl.d;
		double		tau = L.val[(size_t) (L.kk - 1) * L.n + i];

		for (int32_t j = tl.j0; j < tl.j0 + tl.bj; j++)
		{
			/* at least tau: not below the kk values kept */
			if (!(pairs::lower(tl, i, j) < tau))
				continue;
			exact++;

			const double d2 = pairs::canonical_dist2<T>(xi, (const T *) tl.x + (size_t) j * tl.d, tl.d);

			if (d2 < tau)
				tau = list_insert(L, i, d2, j);
		}
	}
	pairs::warp_add(tl.exact, exact);
}

/* A column of an off-diagonal tile against every row of the tile, for the column's list: a warp a column. */
template <typename T>
__global__ void __launch_bounds__(kCoreWarps * 32) knn_cols_kernel(pairs::Tile tl, Lists L)
{
	const int32_t j = tl.j0 + (int32_t) (blockIdx.x * kCoreWarps + threadIdx.x / 32);
	const int	lane = threadIdx.x & 31;
	unsigned	exact = 0;

	if (j >= tl.j0 + tl.bj)
		return;					/* the whole warp */

	const T    *xj = (const T *) tl.x + (size_t) j * tl.d;
	double		tau = L.val[(size_t) (L.kk - 1) * L.n + j];

	for (int32_t base = tl.i0; base < tl.i0 + tl.bi; base += 32)
	{
		const int32_t i = base + lane;
		double		d2 = INFINITY;
		bool		cand = i < tl.i0 + tl.bi && pairs::lower(tl, i, j) < tau;

		if (cand)
		{
			exact++;
			d2 = pairs::canonical_dist2<T>((const T *) tl.x + (size_t) i * tl.d, xj, tl.d);
		}

		unsigned	m = __ballot_sync(0xffffffffu, cand && d2 < tau);

		while (m)
		{
			const int	src = __ffs(m) - 1;
			const double v = __shfl_sync(0xffffffffu, d2, src);
			double		last = tau;

			m &= m - 1;
			if (v < tau)
			{
				if (lane == 0)
					last = list_insert(L, j, v, base + src);
				tau = __shfl_sync(0xffffffffu, last, 0);
			}
		}
	}
	pairs::warp_add(tl.exact, exact);
}

/* The core distance of each row: the min_samples-th value of its list. */
__global__ void core_finish_kernel(Lists L, int32_t k, gc_metric metric, double *core /* [n] out */)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < L.n)
		core[i] = gc_metric_distance(metric, L.val[(size_t) (k - 1) * L.n + i]);
}

/*
 * The first round's bound of each row (its own component then): the bits
 * of the weight of its least edge over its list, ~0 where the list has no
 * other row.  An edge's weight, so never below the row's least edge.
 */
__global__ void prime_kernel(Lists L, const double *core, /* [n] */ gc_metric metric,
							 unsigned long long *prime /* [n] out */)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= L.n)
		return;

	double		bw = INFINITY;
	bool		any = false;

	for (int32_t s = 0; s < L.kk; s++)
	{
		const int32_t q = L.nbr[(size_t) s * L.n + i];

		if (q < 0 || q == i)
			continue;

		const double w = gc_hdbscan_mrd(core[i], core[q],
										gc_metric_distance(metric, L.val[(size_t) s * L.n + i]));

		if (!any || w < bw)
			bw = w;
		any = true;
	}
	prime[i] = any ? (unsigned long long) __double_as_longlong(bw) : kNone;
}

/* The weight of bound bits b (~0: none, +infinity). */
__device__ __forceinline__ double bound_w(unsigned long long b)
{
	return b == kNone ? INFINITY : __longlong_as_double((long long) b);
}

/*
 * A dist2 above this has a distance above w (w >= 0): twice w (cosine) or
 * w squared (Euclidean), raised so that no rounding of sqrt or of the
 * halving can bring a larger dist2 back to w.
 */
__device__ __forceinline__ double prune_t2(gc_metric metric, double w)
{
	double		t = metric == GC_METRIC_COSINE ? __dmul_rn(w, 2.0) : __dmul_rn(__dmul_rn(w, w), 1.0 + 0x1p-48);

	return nextafter(nextafter(t, (double) INFINITY), (double) INFINITY);
}

/* What a round's kernel reads and writes; passed by value. */
struct Round
{
	const int32_t *pcomp;		/* [n] component (a root row) by position */
	const double *pcore;		/* [n] core distance by position */
	const int32_t *prow;		/* [n] row of each position */
	unsigned long long *cw;		/* [n] by component: bits of the least weight found, ~0 none */
	unsigned long long *cp;		/* [n] by component: lo << 32 | hi of its least edge, ~0 none */
	ulonglong2 *cand;			/* [cap] candidate edges: (weight bits, lo << 32 | hi) */
	unsigned long long *ncand;	/* [1] candidates found (past cap: some not kept) */
	unsigned long long cap;
	gc_metric	metric;
};

/*
 * One tile of a round: every pair of positions i < j of different
 * components, for both.  TIES false: the components' least weights (cw) and
 * the candidates; TIES true (cw final): each component's least pair among
 * its edges at its least weight (cp).
 */
template <typename T, bool TIES>
__global__ void __launch_bounds__(kRows) round_kernel(pairs::Tile tl, Round v)
{
	__shared__ int32_t scomp[kChunk];
	__shared__ double score[kChunk];
	__shared__ unsigned long long sbound[kChunk];
	const int32_t jb = tl.j0 + (int32_t) blockIdx.y * kChunk;
	const int32_t je = min(jb + kChunk, tl.j0 + tl.bj);

	for (int32_t t = threadIdx.x; t < je - jb; t += blockDim.x)
	{
		const int32_t c = v.pcomp[jb + t];

		scomp[t] = c;
		score[t] = v.pcore[jb + t];
		sbound[t] = *(volatile unsigned long long *) (v.cw + c);
	}
	__syncthreads();

	const int32_t i = tl.i0 + (int32_t) (blockIdx.x * kRows + threadIdx.x);
	unsigned	exact = 0;

	if (i < tl.i0 + tl.bi)
	{
		const int32_t ci = v.pcomp[i],
					ri = v.prow[i];
		const double corei = v.pcore[i];
		const T    *xi = (const T *) tl.x + (size_t) i * tl.d;
		unsigned long long bb = *(volatile unsigned long long *) (v.cw + ci);
		double		bw = bound_w(bb),
					t2 = prune_t2(v.metric, bw);

		for (int32_t j = tl.diag ? max(jb, i + 1) : jb; j < je; j++)
		{
			const int32_t q = j - jb;

			if (!TIES && (q & 31) == 0)
			{
				/* what the component's other rows found meanwhile */
				const unsigned long long g = *(volatile unsigned long long *) (v.cw + ci);

				if (g < bb)
				{
					bb = g;
					bw = bound_w(bb);
					t2 = prune_t2(v.metric, bw);
				}
			}

			const int32_t cj = scomp[q];

			if (cj == ci)
				continue;

			const double corej = score[q];
			const double cmax = corei > corej ? corei : corej;
			const unsigned long long bbj = sbound[q];
			const double bwj = bound_w(bbj);
			const bool	side_i = cmax <= bw,
						side_j = cmax <= bwj;

			if (!side_i && !side_j)
				continue;

			const double lo = pairs::lower(tl, i, j);

			if (!(side_i && lo <= t2) && !(side_j && lo <= prune_t2(v.metric, bwj)))
				continue;
			exact++;

			const double d2 = pairs::canonical_dist2<T>(xi, (const T *) tl.x + (size_t) j * tl.d, tl.d);
			const double w = gc_hdbscan_mrd(corei, corej, gc_metric_distance(v.metric, d2));
			const unsigned long long wb = (unsigned long long) __double_as_longlong(w);
			const int32_t rj = v.prow[j];
			const unsigned long long pair = ((unsigned long long) (uint32_t) min(ri, rj) << 32) |
				(uint32_t) max(ri, rj);

			if (TIES)
			{
				if (wb == bb)
					atomicMin(v.cp + ci, pair);
				if (wb == bbj)
					atomicMin(v.cp + cj, pair);
				continue;
			}

			bool		keep = false;

			if (wb <= bb)
			{
				keep = true;
				if (wb < bb)
				{
					bb = wb;
					bw = w;
					t2 = prune_t2(v.metric, bw);
					atomicMin(v.cw + ci, wb);
				}
			}
			if (wb <= bbj)
			{
				keep = true;
				if (wb < bbj)
				{
					atomicMin(sbound + q, wb);
					atomicMin(v.cw + cj, wb);
				}
			}
			if (keep)
			{
				const unsigned long long at = atomicAdd(v.ncand, 1ULL);

				if (at < v.cap)
					v.cand[at] = make_ulonglong2(wb, pair);
			}
		}
	}
	pairs::warp_add(tl.exact, exact);
}

/* Each candidate at its component's least weight (either end's) offers its pair. */
__global__ void resolve_kernel(const ulonglong2 *cand, /* [m] */ int64_t m, const int32_t *comp, /* [n] by row */
							   const unsigned long long *cw, /* [n] */ unsigned long long *cp /* [n] in/out */)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e >= m)
		return;

	const ulonglong2 c = cand[e];
	const int32_t a = comp[(int32_t) (c.y >> 32)],
				b = comp[(int32_t) (c.y & 0xffffffffULL)];

	if (cw[a] == c.x)
		atomicMin(cp + a, c.y);
	if (cw[b] == c.x)
		atomicMin(cp + b, c.y);
}

/* The rows and core distances in the round's order: xs [p] = x [prow [p]]. */
template <typename T>
__global__ void gather_kernel(const T *x, /* [n, d] */ const int32_t *prow, /* [n] */
							  const double *core, /* [n] by row */ int32_t n, int32_t d,
							  T *xs, /* [n, d] out */ double *pcore /* [n] out */)
{
	const int64_t total = (int64_t) n * d;

	for (int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; e < total;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		const int64_t p = e / d,
					k = e - p * d;
		const int32_t r = prow[p];

		xs[e] = x[(size_t) r * d + k];
		if (k == 0)
			pcore[p] = core[r];
	}
}

__global__ void fill_kernel(double *a, /* [m] out */ int64_t m, double v)
{
	for (int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; e < m;
		 e += (int64_t) gridDim.x * blockDim.x)
		a[e] = v;
}

/* Blocks of 256 threads for count items of a grid-stride loop, at most cap. */
inline unsigned capped_blocks(int64_t count, int64_t cap)
{
	return (unsigned) std::max<int64_t>(1, std::min<int64_t>((count + 255) / 256, cap));
}

inline dim3 tile_grid(const pairs::Tile &tl)
{
	return dim3((unsigned) ((tl.bi + kRows - 1) / kRows), (unsigned) ((tl.bj + kChunk - 1) / kChunk));
}

/*
 * The engine's threshold, which sets only the precision of its screen
 * (gc_pair_choose of common/pairs.h): the median, over a sample of the host
 * rows, of the least positive dist2 to the others of the sample, the scale
 * of the distances the searches decide (as src/core/hdbscan_pairs.c); 1
 * when there is none.  The answers never depend on it.
 */
double screen_t(const Workspace &w)
{
	const int64_t m = std::min<int64_t>(w.n, kSample),
				step = w.n / m;
	std::vector<double> near;

	near.reserve((size_t) m);
	for (int64_t a = 0; a < m; a++)
	{
		double		best = INFINITY;

		for (int64_t b = 0; b < m; b++)
		{
			const size_t ra = (size_t) (a * step) * (size_t) w.d,
						rb = (size_t) (b * step) * (size_t) w.d;
			double		d2;

			if (b == a)
				continue;
			d2 = w.dtype == GC_F64 ? gc_dist2_f64((const double *) w.hx + ra, (const double *) w.hx + rb, w.d)
				: gc_dist2((const float *) w.hx + ra, (const float *) w.hx + rb, w.d);
			if (d2 > 0 && d2 < best)
				best = d2;
		}
		if (std::isfinite(best))
			near.push_back(best);
	}
	return near.empty() ? 1.0 : gc_pair_select(near.data(), (int64_t) near.size(), (int64_t) near.size() / 2);
}

size_t sort_temp_bytes(int32_t n)
{
	size_t		bytes = 0;

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const int32_t *) nullptr, (int32_t *) nullptr,
											 (const int32_t *) nullptr, (int32_t *) nullptr, n));
	return bytes;
}

} // namespace

bool pairs_chosen(const Workspace &w)
{
	return w.n >= 2 && gc_hdbscan_gpu_pairs_chosen(&w.call.tuning, w.d) && list_len(w.k, w.n) <= kPairsK;
}

int64_t pairs_bytes_estimate(int32_t n, int32_t d, size_t esize, int32_t k, size_t sort_tmp)
{
	const int64_t nn = n;
	const int64_t kk = list_len(k, n);

	/*
	 * the rows and their copy in the round's order, the engine; the lists
	 * of the core pass (12 kk bytes a row) or a round's arrays and
	 * candidates (about 130); the edges, the hierarchy and the places in
	 * the condensed tree after (as the tree path: 300 covers them)
	 */
	return nn * (2 * d * (int64_t) esize + std::max<int64_t>(12 * kk, 140) + 300) +
		pairs::Engine::bytes_estimate(n, d) + (int64_t) std::max(sort_tmp, sort_temp_bytes(n)) + (16 << 20);
}

void pairs_core_phase(Workspace &w)
{
	const int32_t n = w.n;
	const int32_t kk = list_len(w.k, n);
	DeviceBuffer<double> val((size_t) kk * n, "the nearest rows");
	DeviceBuffer<int32_t> nbr((size_t) kk * n, "the nearest rows");
	Lists		L = {val.get(), nbr.get(), kk, n};

	w.pair_t = screen_t(w);
	w.perm.reset(n, "the row order");
	w.inv.reset(n, "the row order");
	iota_rows(w.perm.get(), n);
	iota_rows(w.inv.get(), n);
	w.core_s.reset(n, "the core distances");
	fill_kernel<<<capped_blocks((int64_t) kk * n, 4096), 256>>>(val.get(), (int64_t) kk * n, INFINITY);
	CHECK_LAUNCH("fill_kernel");
	CUDA_TRY(cudaMemset(nbr.get(), 0xff, nbr.bytes()));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		pairs::Engine eng(w.call, w.hx, w.x<T>().get(), w.dtype, n, w.d, w.pair_t);

		eng.run([&](const pairs::Tile &tl) {
			knn_rows_kernel<T><<<blocks_for(tl.bi, kCoreRows), kCoreRows>>>(tl, L);
			CHECK_LAUNCH("knn_rows_kernel");
			if (!tl.diag)
			{
				knn_cols_kernel<T><<<blocks_for(tl.bj, kCoreWarps), kCoreWarps * 32>>>(tl, L);
				CHECK_LAUNCH("knn_cols_kernel");
			}
		});
		w.pair_exact += eng.exact();
		if (w.debug)
			fprintf(stderr, "gpuclust hdbscan pairs: core distances, screen %s, %lld pairs exact\n",
					gc_pair_precision_names[eng.precision()], (long long) eng.exact());
	});
	core_finish_kernel<<<blocks_for(n, 256), 256>>>(L, w.k, w.metric, w.core_s.get());
	CHECK_LAUNCH("core_finish_kernel");
	w.pair_prime.reset(n, "the first round's bounds");
	prime_kernel<<<blocks_for(n, 256), 256>>>(L, w.core_s.get(), w.metric, w.pair_prime.get());
	CHECK_LAUNCH("prime_kernel");
	CUDA_TRY(cudaDeviceSynchronize());
}

void pairs_mst_phase(Workspace &w)
{
	const int32_t n = w.n;
	const char *what = "the Boruvka rounds";
	DeviceBuffer<int32_t> comp(n, what), forest(n, what), rows(n, what), pcomp(n, what), prow(n, what),
				nedges(1, what);
	DeviceBuffer<double> pcore(n, what);
	DeviceBuffer<unsigned long long> cw(n, what), cp(n, what), ncand(1, what);
	const unsigned long long cap = (unsigned long long) n * kCandPerRow;
	DeviceBuffer<ulonglong2> cand((size_t) cap, what);
	size_t		tmp_bytes = sort_temp_bytes(n);
	DeviceBuffer<unsigned char> tmp(tmp_bytes, what);
	std::vector<int32_t> hcomp((size_t) n);
	int32_t		have = 0;

	w.edge_w.reset(n - 1, "the minimum spanning tree");
	w.edge_pair.reset(n - 1, "the minimum spanning tree");
	iota_rows(comp.get(), n);
	iota_rows(forest.get(), n);
	iota_rows(rows.get(), n);
	CUDA_TRY(cudaMemset(nedges.get(), 0, sizeof(int32_t)));

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		DeviceBuffer<T> xs((size_t) n * w.d, "the rows in the round's order");

		while (have < n - 1)
		{
			Stopwatch	sw;
			unsigned long long found = 0;
			int64_t		tiles = 0,
						skipped = 0;

			/* each component's bound: the first round's from the rows' nearest, later none */
			if (w.rounds == 0)
				CUDA_TRY(cudaMemcpy(cw.get(), w.pair_prime.get(), cw.bytes(), cudaMemcpyDeviceToDevice));
			else
				CUDA_TRY(cudaMemset(cw.get(), 0xff, cw.bytes()));
			CUDA_TRY(cudaMemset(cp.get(), 0xff, cp.bytes()));
			CUDA_TRY(cudaMemset(ncand.get(), 0, sizeof(unsigned long long)));

			/* the rows in the order of their components (stable: by row within one) */
			CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, comp.get(), pcomp.get(), rows.get(),
													 prow.get(), n));
			gather_kernel<T><<<capped_blocks((int64_t) n * w.d, 65535), 256>>>(
				w.x<T>().get(), prow.get(), w.core_s.get(), n, w.d, xs.get(), pcore.get());
			CHECK_LAUNCH("gather_kernel");
			CUDA_TRY(cudaMemcpy(hcomp.data(), pcomp.get(), sizeof(int32_t) * (size_t) n, cudaMemcpyDeviceToHost));

			const Round	v = {pcomp.get(), pcore.get(), prow.get(), cw.get(), cp.get(), cand.get(), ncand.get(),
							 cap, w.metric};
			/* a tile whose rows and columns all lie in one component has no edge of the round */
			auto		want = [&](int32_t i0, int32_t i1, int32_t j0, int32_t j1) {
				const bool	one = hcomp[i0] == hcomp[i1 - 1] && hcomp[j0] == hcomp[j1 - 1] &&
					hcomp[i0] == hcomp[j0];

				(one ? skipped : tiles)++;
				return !one;
			};

			{
				pairs::Engine eng(w.call, w.hx, xs.get(), w.dtype, n, w.d, w.pair_t);

				eng.run_where(want, [&](const pairs::Tile &tl) {
					round_kernel<T, false><<<tile_grid(tl), kRows>>>(tl, v);
					CHECK_LAUNCH("round_kernel");
				});
				CUDA_TRY(cudaMemcpy(&found, ncand.get(), sizeof(found), cudaMemcpyDeviceToHost));
				if (found <= cap)
				{
					if (found > 0)
					{
						resolve_kernel<<<blocks_for((int64_t) found, 256), 256>>>(cand.get(), (int64_t) found,
																				   comp.get(), cw.get(), cp.get());
						CHECK_LAUNCH("resolve_kernel");
					}
				}
				else
					eng.run_where(want, [&](const pairs::Tile &tl) {
						round_kernel<T, true><<<tile_grid(tl), kRows>>>(tl, v);
						CHECK_LAUNCH("round_kernel");
					});
				w.pair_exact += eng.exact();
			}
			join_components(comp.get(), w.inv.get(), n, cw.get(), cp.get(), forest.get(), w.edge_w.get(),
							w.edge_pair.get(), nedges.get());

			int32_t		now = 0;

			CUDA_TRY(cudaMemcpy(&now, nedges.get(), sizeof(now), cudaMemcpyDeviceToHost));
			w.rounds++;
			if (w.debug)
				fprintf(stderr, "gpuclust hdbscan pairs: round %lld: %d edges (+%d), %lld tiles, %lld skipped, "
						"%llu candidates%s, %.3f ms\n", (long long) w.rounds, now, now - have, (long long) tiles,
						(long long) skipped, found, found > cap ? " (overflow: a second pass)" : "", sw.ms());
			if (now <= have || now > n - 1)
				fail(GC_ERR_INTERNAL, "HDBSCAN's Boruvka round %lld went from %d to %d edges of %d",
					 (long long) w.rounds, have, now, n - 1);
			have = now;
			w.call.check_cancel();
		}
	});
	w.pair_prime.release();
}

} // namespace hdbscan
} // namespace gc
