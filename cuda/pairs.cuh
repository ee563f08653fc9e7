/*
 * pairs.cuh
 *    The GPU pair engine: the distances between blocks of rows as cuBLAS
 *    products (TF32 tensor cores, or FP64 where the TF32 band would be
 *    wide), one tile of at most kTile x kTile products at a time, never an
 *    n x n matrix; each pair decided exactly by the screen of
 *    common/pairs.h or, inside its error band, by the canonical arithmetic
 *    (gc_dist2 or gc_dist2_f64, bit for bit).  DBSCAN (cuda/dbscan_pairs.cu)
 *    launches its epilogues over the tiles; src/core/pair_engine.c is the
 *    same engine on the CPU, with the same operands, bound and answers.
 *
 * A tile's products are column-major: the product of rows i and j of tile
 * (i0, j0) is at (i - i0) + (j - j0) * ld, so that the threads of a warp,
 * which take consecutive rows i, read consecutive words.
 */
#ifndef GPUCLUST_PAIRS_CUH
#define GPUCLUST_PAIRS_CUH

#include "common.cuh"
#include "entry.cuh"
#include "metric.h"
#include "pairs.h"

namespace gc {
namespace pairs {

/* What an epilogue kernel reads of the engine and of one tile; passed by value. */
struct Tile
{
	const void *x;				/* [n, d] the rows as given (element type of the call) */
	const double *n2;			/* [n] squared norms of the operands */
	const double *nx;			/* [n] their norms */
	const float *pf;			/* the tile's products (FP32 and TF32 screens), or NULL */
	const double *pd;			/* the same for the FP64 screen, or NULL */
	gc_pair_bound bound;
	double		t;				/* a pair is in when its dist2 <= t */
	double		s2inv;			/* 1 / s^2: scaled units back to dist2 (exact, s a power of two) */
	int32_t		n;
	int32_t		d;
	int32_t		i0, bi;			/* rows [i0, i0 + bi) */
	int32_t		j0, bj;			/* columns [j0, j0 + bj) */
	int32_t		ld;				/* the products' leading dimension (the whole tile's bi) */
	bool		diag;			/* a slice of a diagonal tile: its columns are among its rows, so only j > i */
	unsigned long long *exact;	/* [1] pairs sent to the canonical path */
};

/* gc_dist2 (T = float) or gc_dist2_f64 (T = double): double, in order, no contraction. */
template <typename T>
__device__ __forceinline__ double canonical_dist2(const T *a, /* [d] */ const T *b, /* [d] */ int d)
{
	double		s = 0.0;

	for (int k = 0; k < d; k++)
	{
		double		u = __dsub_rn((double) a[k], (double) b[k]);

		s = __dadd_rn(s, __dmul_rn(u, u));
	}
	return s;
}

/* The screened value A of rows i and j of the tile (scaled units). */
__device__ __forceinline__ double screened(const Tile &tl, int32_t i, int32_t j)
{
	size_t		k = (size_t) (i - tl.i0) + (size_t) (j - tl.j0) * (size_t) tl.ld;
	double		p = tl.pd ? tl.pd[k] : (double) tl.pf[k];

	return __dsub_rn(__dadd_rn(tl.n2[i], tl.n2[j]), __dmul_rn(2.0, p));
}

/*
 * A lower bound on the canonical dist2 of rows i and j (common/pairs.h:
 * s^2 R >= A - E), or -infinity where the screen cannot say; the CPU's
 * gc_pe_lower.
 */
__device__ __forceinline__ double lower(const Tile &tl, int32_t i, int32_t j)
{
	if (!tl.bound.screen)
		return -INFINITY;

	double		v = __dsub_rn(screened(tl, i, j), gc_pair_margin(&tl.bound, __dadd_rn(tl.nx[i], tl.nx[j])));

	if (!(v == v))
		return -INFINITY;
	return __dmul_rn(__dmul_rn(v, 1 - 0x1p-50), tl.s2inv);
}

/* An upper bound on the canonical dist2 of rows i and j (s^2 R <= A + E), or +infinity. */
__device__ __forceinline__ double upper(const Tile &tl, int32_t i, int32_t j)
{
	if (!tl.bound.screen)
		return INFINITY;

	double		v = __dadd_rn(screened(tl, i, j), gc_pair_margin(&tl.bound, __dadd_rn(tl.nx[i], tl.nx[j])));

	if (!(v == v))
		return INFINITY;
	return __dadd_rn(__dmul_rn(__dmul_rn(v, 1 + 0x1p-50), tl.s2inv), 0x1p-1000);
}

/* Whether rows i and j of the tile are within t, decided exactly; *exact counts the canonical ones. */
template <typename T>
__device__ __forceinline__ bool pair_in(const Tile &tl, int32_t i, int32_t j, unsigned &exact)
{
	int			v = gc_pair_decide(&tl.bound, screened(tl, i, j), __dadd_rn(tl.nx[i], tl.nx[j]));

	if (v >= 0)
		return v != 0;
	exact++;
	return canonical_dist2((const T *) tl.x + (size_t) i * tl.d, (const T *) tl.x + (size_t) j * tl.d,
						   tl.d) <= tl.t;
}

/* Adds every thread's count to *total, one atomic per warp. */
__device__ __forceinline__ void warp_add(unsigned long long *total, unsigned mine)
{
	for (int o = 16; o > 0; o >>= 1)
		mine += __shfl_down_sync(0xffffffffu, mine, o);
	if ((threadIdx.x & 31) == 0 && mine)
		atomicAdd(total, (unsigned long long) mine);
}

/*
 * One call of the engine: the operands of the rows on the device, the
 * screen's precision and bound, the tile buffer; run() visits the tiles.
 */
class Engine
{
  public:
	/*
	 * hx: the rows on the host (for the centre and scale, common/pairs.h),
	 * dx: the same on the device; t: a pair is in when dist2 <= t.
	 */
	Engine(const Call &call, const void *hx, const void *dx, gc_dtype dtype, int32_t n, int32_t d, double t);

	/* Device bytes the engine takes for n rows of d features beside the rows themselves. */
	static int64_t bytes_estimate(int32_t n, int32_t d);

	/* How run() cuts a tile for the epilogue: into slices of its columns or of its rows. */
	enum class Slices
	{
		columns,
		rows
	};

	/*
	 * Calls epilogue(slice) for every tile of the upper triangle (column
	 * block >= row block: each unordered pair of rows once, the diagonal
	 * tiles whole), row blocks in ascending order and in each the column
	 * blocks in ascending order, after the tile's product.  The epilogue
	 * sees a tile in slices of its columns (or of its rows, by: Tile.i0,
	 * bi or j0, bj narrowed, Tile.ld the tile's; Tile.diag says whether
	 * the tile is on the diagonal) of at most kSlicePairFeatures pair
	 * features, at most two of them queued on the device, and the
	 * caller's cancel is asked about every 10 ms, so an epilogue that takes
	 * every pair on the canonical path (duplicates, a tight clump, the
	 * Gaussian rho) still answers within a fraction of a second at any
	 * width.  A kernel that gives a warp to each column wants row slices,
	 * so as to keep every column of the tile.  epilogue launches kernels
	 * on the default stream.
	 */
	template <typename F>
	void run(F &&epilogue, Slices by = Slices::columns)
	{
		run_where([](int32_t, int32_t, int32_t, int32_t) { return true; }, epilogue, by);
	}

	/*
	 * run(), but only over the tiles for which want(i0, i1, j0, j1) says
	 * yes (rows [i0, i1), columns [j0, j1), asked on the host before the
	 * tile's product): the others get neither a product nor an epilogue.
	 */
	template <typename P, typename F>
	void run_where(P &&want, F &&epilogue, Slices by = Slices::columns)
	{
		Stopwatch	since;

		for (int32_t i0 = 0; i0 < n_; i0 += tile_)
			for (int32_t j0 = i0; j0 < n_; j0 += tile_)
			{
				Tile		tl = tile(i0, j0);

				if (!want(tl.i0, tl.i0 + tl.bi, tl.j0, tl.j0 + tl.bj))
					continue;
				product(tl);

				const int32_t len = by == Slices::columns ? tl.bj : tl.bi;
				const int32_t w = slice_width(len, by == Slices::columns ? tl.bi : tl.bj);

				for (int32_t o = 0, s = 0; o < len; o += w, s++)
				{
					/* the slice before the last one has finished: the host keeps pace with the device */
					if (s >= 2)
						CUDA_TRY(cudaEventSynchronize(ev_[s & 1]));
					epilogue(slice(tl, by, o, w));
					CUDA_TRY(cudaEventRecord(ev_[s & 1], 0));
					if (since.ms() > 10.0)
					{
						check_cancel_synced(call_.exec);
						since.restart();
					}
				}
				CUDA_TRY(cudaStreamSynchronize(0));
			}
		CUDA_TRY(cudaMemcpy(&exact_host_, exact_.get(), sizeof(exact_host_), cudaMemcpyDeviceToHost));
		call_.timing->pair_exact = (int64_t) exact_host_;
	}

	gc_pair_precision precision() const { return prec_; }
	int64_t exact() const { return (int64_t) exact_host_; }

	~Engine();
	Engine(const Engine &) = delete;
	Engine &operator=(const Engine &) = delete;

	/*
	 * Pair features (rows x columns x d) of an epilogue's slice at most:
	 * about 0.2 s on an H200 when every pair of the slice is canonical
	 * (float rows), so a tile of 16384 rows a side is cut only above 64
	 * features, where the product is no longer most of the time.  The
	 * environment variable GPUCLUST_TEST_SLICE_PAIR_FEATURES, when set to a
	 * smaller positive number, cuts finer: the device suite's check that
	 * the answers do not depend on the slices (test/gpu/run-device-suite,
	 * SLICE_CHECK=1).
	 */
	static constexpr double kSlicePairFeatures = 0x1p34;

  private:
	Tile		tile(int32_t i0, int32_t j0) const;
	void		product(const Tile &tl);

	/* The width of a slice of len rows or columns across `across`: a multiple of 32, at least 32. */
	int32_t		slice_width(int32_t len, int32_t across) const
	{
		double		w = slice_budget_ / ((double) across * (double) d_);

		return w >= (double) len ? len : std::max<int32_t>(32, (int32_t) w / 32 * 32);
	}

	/* Columns (or rows) [o, o + w) of tl, counted from the tile's first, its products narrowed to them. */
	static Tile slice(const Tile &tl, Slices by, int32_t o, int32_t w)
	{
		Tile		sub = tl;
		size_t		off;

		if (by == Slices::columns)
		{
			sub.j0 = tl.j0 + o;
			sub.bj = std::min(w, tl.bj - o);
			off = (size_t) o * (size_t) tl.ld;
		}
		else
		{
			sub.i0 = tl.i0 + o;
			sub.bi = std::min(w, tl.bi - o);
			off = (size_t) o;
		}
		if (sub.pf)
			sub.pf += off;
		if (sub.pd)
			sub.pd += off;
		return sub;
	}

	const Call &call_;
	const void *dx_;
	gc_dtype	dtype_;
	int32_t		n_,
				d_;
	double		t_;
	double		s2inv_ = 1.0;
	int32_t		tile_ = 0;
	gc_pair_precision prec_ = GC_PAIR_TF32;
	gc_pair_bound bound_;
	DeviceBuffer<float> opf_;	/* [n, d] operands (FP32, TF32) */
	DeviceBuffer<double> opd_;	/* [n, d] operands (FP64) */
	DeviceBuffer<double> n2_;	/* [n] */
	DeviceBuffer<double> nx_;	/* [n] */
	DeviceBuffer<float> pf_;	/* [tile, tile] products */
	DeviceBuffer<double> pd_;
	DeviceBuffer<unsigned long long> exact_;
	unsigned long long exact_host_ = 0;
	void	   *blas_ = nullptr;	/* the cuBLAS handle */
	cudaEvent_t ev_[2] = {nullptr, nullptr};	/* the last two slices queued */
	double		slice_budget_ = kSlicePairFeatures;	/* GPUCLUST_TEST_SLICE_PAIR_FEATURES lowers it */
};

} // namespace pairs
} // namespace gc

#endif /* GPUCLUST_PAIRS_CUH */
