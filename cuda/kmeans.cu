/*
 * kmeans.cu
 *    k-means on the GPU: Lloyd's algorithm with the rules of the CPU back end
 *    (src/core/kmeans.c), the same initial centroids (src/core/kmeans_init.h)
 *    and the same stopping rule.
 *
 * Li, Zhao and Chu, "Speeding up K-Means Algorithm by GPUs"
 * (../shared/seeds/001) and Minnaar's CUDA k-means (seed 002) give the two
 * assignment kernels:
 *
 *  - low dimension (d <= 32): one thread per point with the point in
 *    registers (two points per thread), centroids staged through
 *    shared memory in tiles, distance and argmin fused, in FP32.  For d <= 16
 *    and a small k * d the same kernel also adds each point into per-block
 *    partial sums in shared memory (seed 002), flushed with one atomic per
 *    block and value.
 *  - high dimension (d > 32): ||x'||^2 - 2 x'.c' + ||c'||^2 on data and
 *    centroids centred on the data mean, the x'.c' part as a cuBLAS GEMM
 *    over tiles of points so that the n x k matrix is never whole, then a
 *    warp-per-row argmin.  By default (gpuclust.kmeans_precision = 'fp32')
 *    the product runs in TF32 on tensor cores (compute capability 8.0 and
 *    up) and is checked: a bound on its error leaves a few candidate
 *    centroids per row, which are compared by their distance in double,
 *    exactly as the CPU computes it.  Rows with too many candidates go to an
 *    FP32 product, checked the same way (and after an iteration where that
 *    was most rows, every row does).  So the labels are those of the double
 *    distances to the current centroids, at the cost of one TF32 GEMM.
 *    Elsewhere the one product is FP32, checked.  'tf32' runs the TF32
 *    product unchecked: about 1e-3 relative error in x'.c'.
 *
 * Centroid update on the GPU, deterministic, with no copy of the data to the
 * host: the partial sums of the fused kernel are fixed-point integers (an
 * integer sum does not depend on the order of the atomics); otherwise the
 * chunk's points are sorted by cluster (CUB radix sort) and each cluster's
 * rows are summed in double in a fixed order, in slices of GC_SLICE rows.
 * Both sum x - c_old, the offset from the float centroid the assignment used.
 *
 * k-means++ on the GPU when the data are resident and n is large: the D^2
 * pass and the blocked integer weight sums run on the device, the draws on
 * the host with the shared generator (kmeans_init.h explains why the picks
 * are the same rows as on the CPU).
 *
 * Data larger than the device memory are processed in chunks of rows that
 * are copied in for every pass; only labels and distances stay resident.
 * The statistics behind tol and the centring (mean, per-feature variance,
 * range) are computed on the device when the data are resident, else on the
 * host.
 *
 * timing.phase_ms: [0] statistics and initial centroids, [1] the Lloyd
 * iterations, [2] the final assignment and distances, [3] milliseconds per
 * iteration.  timing.counts (GEMM form, over the call): [0] rows decided
 * among several candidates in double, [1] candidates compared, [2] rows
 * sent from the TF32 to the FP32 product.
 */
#include <cublas_v2.h>
#include <cub/cub.cuh>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <vector>

#include "common.cuh"
#include "kmeans_init.h"

namespace {

using gc::DeviceBuffer;

constexpr int BLOCK = 256;
constexpr int PPT = 2;					/* points per thread in the low-d kernel */

/* blocks per SM the low-d kernel asks registers for: all 8 for d <= 4 (0: no demand) */
template <int MAXD>
constexpr int lowd_min_blocks() { return MAXD <= 4 ? 8 : 0; }
constexpr int GC_SLICE = 2048;			/* rows per slice of the sorted update */
constexpr size_t FUSED_SMEM_MAX = 40 * 1024;
constexpr size_t TILE_SMEM_MAX = 32 * 1024;

#define CUBLAS_TRY(call) \
	do { \
		cublasStatus_t gc_cb_ = (call); \
		if (gc_cb_ != CUBLAS_STATUS_SUCCESS) \
			::gc::fail(gc_cb_ == CUBLAS_STATUS_ALLOC_FAILED ? GC_ERR_OUT_OF_MEMORY : GC_ERR_CUDA, \
					   "%s failed: cuBLAS status %d at %s:%d", #call, (int) gc_cb_, __FILE__, __LINE__); \
	} while (0)

/* Owns a cuBLAS handle. */
struct Cublas
{
	cublasHandle_t h = nullptr;
	~Cublas()
	{
		if (h)
			cublasDestroy(h);
	}
};

struct MaxOp
{
	__device__ double operator()(double a, double b) const { return fmax(a, b); }
};

/* Adds every thread's count to *total, one atomic per block. */
__device__ inline void block_add(unsigned long long *total, unsigned int mine)
{
	__shared__ unsigned int blk;

	if (threadIdx.x == 0)
		blk = 0;
	__syncthreads();
	if (mine)
		atomicAdd(&blk, mine);
	__syncthreads();
	if (threadIdx.x == 0 && blk)
		atomicAdd(total, (unsigned long long) blk);
}

/*
 * Assignment for d <= MAXD (MAXD in 2, 4, 8, 16, 32; features beyond d are
 * zero in both the point and the centroid, so they add nothing).
 * Direct form sum (x - c)^2 for MAXD <= 16; for MAXD == 32 the expanded form
 * ||c'||^2 - 2 x'.c' on data and centroids centred on the data mean, one
 * FMA per feature.  UPDATE (MAXD <= 16, all centroids in shared memory) also
 * adds x - c into fixed-point per-block sums.
 */
template <int MAXD, bool UPDATE>
__global__ void __launch_bounds__(BLOCK, lowd_min_blocks<MAXD>())
assign_lowd_kernel(const float *__restrict__ x,	/* [rows, d] */
				   int64_t rows, int d,
				   const float *__restrict__ cen,	/* [k, MAXD] zero-padded (centred when MAXD == 32) */
				   const float *__restrict__ cnorm,	/* [k] ||c'||^2 when MAXD == 32 */
				   const float *__restrict__ mean,	/* [MAXD] data mean when MAXD == 32 */
				   int k, int tile_k,
				   int32_t *__restrict__ labels,	/* [rows] out */
				   const int32_t *__restrict__ labels_old,	/* [rows] or null */
				   float *__restrict__ d2out,	/* [rows] out */
				   unsigned long long *__restrict__ changed,
				   unsigned long long *__restrict__ gsum,	/* [k, d] fixed point (UPDATE) */
				   unsigned long long *__restrict__ gcount, /* [k] (UPDATE) */
				   double fx_scale)
{
	constexpr bool EXPAND = MAXD >= 32;
	constexpr int VW = MAXD >= 4 ? 4 : 2;	/* centroid features per shared-memory load */
	extern __shared__ __align__(16) unsigned char smem[];
	float	   *sc = reinterpret_cast<float *>(smem);	/* [tile_k, MAXD] */
	float	   *sn = sc + (size_t) tile_k * MAXD;	/* [tile_k] (EXPAND) */
	unsigned long long *ssum = reinterpret_cast<unsigned long long *>(sc + (size_t) tile_k * MAXD);
	unsigned int *scnt = reinterpret_cast<unsigned int *>(ssum + (size_t) k * d);
	const bool	all_in = tile_k >= k;
	unsigned int my_changed = 0;
	float		mu[MAXD];

#pragma unroll
	for (int j = 0; j < MAXD; j++)
		mu[j] = (EXPAND && j < d) ? mean[j] : 0.0f;

	if (UPDATE)
	{
		for (int i = threadIdx.x; i < k * d; i += BLOCK)
			ssum[i] = 0;
		for (int i = threadIdx.x; i < k; i += BLOCK)
			scnt[i] = 0;
	}
	if (all_in)
	{
		for (int i = threadIdx.x; i < k * MAXD; i += BLOCK)
			sc[i] = cen[i];
		if (EXPAND)
			for (int i = threadIdx.x; i < k; i += BLOCK)
				sn[i] = cnorm[i];
		__syncthreads();
	}

	for (int64_t base = (int64_t) blockIdx.x * BLOCK * PPT; base < rows;
		 base += (int64_t) gridDim.x * BLOCK * PPT)
	{
		float		p[PPT][MAXD];
		float		best[PPT];
		int			bj[PPT];

#pragma unroll
		for (int q = 0; q < PPT; q++)
		{
			int64_t		i = base + q * BLOCK + threadIdx.x;

			best[q] = INFINITY;
			bj[q] = 0;
#pragma unroll
			for (int j = 0; j < MAXD; j++)
				p[q][j] = (i < rows && j < d) ? x[i * d + j] - mu[j] : 0.0f;
		}

		for (int t0 = 0; t0 < k; t0 += tile_k)
		{
			int			tk = min(tile_k, k - t0);

			if (!all_in)
			{
				__syncthreads();
				for (int i = threadIdx.x; i < tk * MAXD; i += BLOCK)
					sc[i] = cen[(size_t) t0 * MAXD + i];
				if (EXPAND)
					for (int i = threadIdx.x; i < tk; i += BLOCK)
						sn[i] = cnorm[t0 + i];
				__syncthreads();
			}
			for (int j = 0; j < tk; j++)
			{
				const float *cj = sc + (size_t) j * MAXD;
				float		s[PPT];

#pragma unroll
				for (int q = 0; q < PPT; q++)
					s[q] = 0.0f;
#pragma unroll
				for (int v = 0; v < MAXD / VW; v++)
				{
					float		c[VW];

					if constexpr (VW == 4)
					{
						float4		c4 = reinterpret_cast<const float4 *>(cj)[v];

						c[0] = c4.x;
						c[1] = c4.y;
						c[2] = c4.z;
						c[3] = c4.w;
					}
					else
					{
						float2		c2 = reinterpret_cast<const float2 *>(cj)[v];

						c[0] = c2.x;
						c[1] = c2.y;
					}
#pragma unroll
					for (int q = 0; q < PPT; q++)
#pragma unroll
						for (int u = 0; u < VW; u++)
						{
							if (EXPAND)
								s[q] = __fmaf_rn(p[q][VW * v + u], c[u], s[q]);
							else
							{
								float		t = p[q][VW * v + u] - c[u];

								s[q] = __fmaf_rn(t, t, s[q]);
							}
						}
				}
#pragma unroll
				for (int q = 0; q < PPT; q++)
				{
					float		val = EXPAND ? __fmaf_rn(-2.0f, s[q], sn[j]) : s[q];

					if (val < best[q])
					{
						best[q] = val;
						bj[q] = t0 + j;
					}
				}
			}
		}

#pragma unroll
		for (int q = 0; q < PPT; q++)
		{
			int64_t		i = base + q * BLOCK + threadIdx.x;	/* not kept through the loop: registers */

			if (i >= rows)
				continue;
			if (EXPAND)
			{
				float		xn = 0.0f;

#pragma unroll
				for (int j = 0; j < MAXD; j++)
					xn = __fmaf_rn(p[q][j], p[q][j], xn);
				best[q] = fmaxf(best[q] + xn, 0.0f);
			}
			labels[i] = bj[q];
			d2out[i] = best[q];
			if (labels_old && labels_old[i] != bj[q])
				my_changed++;
			if (UPDATE)
			{
				atomicAdd(&scnt[bj[q]], 1u);
#pragma unroll
				for (int j = 0; j < MAXD; j++)
					if (j < d)
					{
						double		delta = (double) p[q][j] - (double) sc[(size_t) bj[q] * MAXD + j];

						atomicAdd(&ssum[(size_t) bj[q] * d + j],
								  (unsigned long long) __double2ll_rn(delta * fx_scale));
					}
			}
		}
	}

	block_add(changed, my_changed);
	if (UPDATE)
	{
		/* block_add synchronized the block */
		for (int i = threadIdx.x; i < k * d; i += BLOCK)
			if (ssum[i])
				atomicAdd(&gsum[i], ssum[i]);
		for (int i = threadIdx.x; i < k; i += BLOCK)
			if (scnt[i])
				atomicAdd(&gcount[i], (unsigned long long) scnt[i]);
	}
}

/*
 * Statistics of resident data, pass 1: per slice of GC_STAT_ROWS rows and
 * feature, the sum in row order, the smallest and the largest value.  With
 * dev set, pass 2: the sum of squared deviations from mean instead.
 */
constexpr int GC_STAT_ROWS = 2048;

__global__ void stats_slice_kernel(const float *__restrict__ x, int64_t n, int d,
								   const double *__restrict__ mean,	/* [d] (pass 2) or null */
								   double *__restrict__ psum,	/* [slices, d] out */
								   float *__restrict__ pmin,	/* [slices, d] out (pass 1) */
								   float *__restrict__ pmax /* [slices, d] out (pass 1) */ )
{
	int64_t		r0 = (int64_t) blockIdx.x * GC_STAT_ROWS;
	int64_t		r1 = min(r0 + GC_STAT_ROWS, n);

	for (int f = threadIdx.x; f < d; f += blockDim.x)
	{
		double		s = 0.0;
		float		lo = INFINITY,
					hi = -INFINITY;

		for (int64_t i = r0; i < r1; i++)
		{
			float		v = x[i * d + f];

			if (mean)
			{
				double		t = __dsub_rn((double) v, mean[f]);

				s = __dadd_rn(s, __dmul_rn(t, t));
			}
			else
			{
				s = __dadd_rn(s, (double) v);
				lo = fminf(lo, v);
				hi = fmaxf(hi, v);
			}
		}
		psum[(size_t) blockIdx.x * d + f] = s;
		if (!mean)
		{
			pmin[(size_t) blockIdx.x * d + f] = lo;
			pmax[(size_t) blockIdx.x * d + f] = hi;
		}
	}
}

/* Statistics: each feature's slices, in order. */
__global__ void stats_combine_kernel(const double *__restrict__ psum, const float *__restrict__ pmin,
									 const float *__restrict__ pmax, int slices, int d,
									 double *__restrict__ out /* [3, d]: sum, min, max */ )
{
	int			f = blockIdx.x * blockDim.x + threadIdx.x;

	if (f >= d)
		return;
	double		s = 0.0;
	float		lo = INFINITY,
				hi = -INFINITY;

	for (int b = 0; b < slices; b++)
	{
		s = __dadd_rn(s, psum[(size_t) b * d + f]);
		if (pmin)
		{
			lo = fminf(lo, pmin[(size_t) b * d + f]);
			hi = fmaxf(hi, pmax[(size_t) b * d + f]);
		}
	}
	out[f] = s;
	out[d + f] = lo;
	out[2 * d + f] = hi;
}

/* The GEMM form's operand: x' = x - mean in float, and ||x'||^2. */
__global__ void center_rows_kernel(const float *__restrict__ x, int64_t rows, int d,
								   const double *__restrict__ mean,	/* [d] */
								   float *__restrict__ xc,	/* [rows, d] out */
								   float *__restrict__ xnorm /* [rows] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < rows;
		 i += (int64_t) gridDim.x * BLOCK)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			float		t = (float) ((double) x[i * d + j] - mean[j]);

			xc[i * d + j] = t;
			s += (double) t * (double) t;
		}
		xnorm[i] = (float) s;
	}
}

/* Rows [list[0], list[m - 1]] of src side by side in dst, for the second product. */
__global__ void gather_rows_kernel(const float *__restrict__ src, int d,
								   const int32_t *__restrict__ list, int m,
								   float *__restrict__ dst)
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < (int64_t) m * d;
		 i += (int64_t) gridDim.x * BLOCK)
		dst[i] = src[(int64_t) list[i / d] * d + i % d];
}

/*
 * Squared distance of a row to a centroid in double, as the CPU sums it but
 * across the lanes of a warp in a fixed order; every lane gets the value.
 */
__device__ inline double warp_exact_d2(const float *__restrict__ xr, const double *__restrict__ c,
									   int d, int lane)
{
	double		s = 0.0;

#pragma unroll 4
	for (int t = lane; t < d; t += 32)
	{
		double		u = __dsub_rn((double) xr[t], c[t]);

		s = __dadd_rn(s, __dmul_rn(u, u));
	}
	for (int o = 16; o > 0; o >>= 1)
		s = __dadd_rn(s, __shfl_down_sync(0xffffffffu, s, o));
	return __shfl_sync(0xffffffffu, s, 0);
}

constexpr int CAND_CAP = 4;				/* candidates a lane keeps before it gives up */
constexpr int SCAN_BATCH = 8;			/* columns per lane loaded at once by the argmin */

/*
 * Adds candidate (v, j) to a lane's list of at most CAND_CAP; when full,
 * the largest value goes (it may lie outside the window by now), and
 * dropped remembers the smallest value that went.
 */
__device__ inline void keep_candidate(float (&cv)[CAND_CAP], int (&cj)[CAND_CAP], int &nc, float &dropped,
									  float v, int j)
{
	if (nc < CAND_CAP)
	{
#pragma unroll
		for (int t = 0; t < CAND_CAP; t++)
			if (t == nc)
			{
				cv[t] = v;
				cj[t] = j;
			}
		nc++;
		return;
	}

	int			mx = 0;
	float		mv = cv[0];

#pragma unroll
	for (int t = 1; t < CAND_CAP; t++)
		if (cv[t] > mv)
		{
			mv = cv[t];
			mx = t;
		}
	if (v < mv)
	{
#pragma unroll
		for (int t = 0; t < CAND_CAP; t++)
			if (t == mx)
			{
				cv[t] = v;
				cj[t] = j;
			}
		dropped = fminf(dropped, mv);
	}
	else
		dropped = fminf(dropped, v);
}

/*
 * Argmin over a tile of the GEMM, one warp per row: dots[q, j] = x'_r . c'_j
 * with x' = x - mean and c' = c - mean, so ||x_r - c_j||^2 is
 * ||x'_r||^2 + v_j with v_j = ||c'_j||^2 - 2 dots[q, j].  Without REFINE
 * the smallest v wins (lowest j on a tie).
 *
 * With REFINE the product's error is bounded: |v_j + ||x'_r||^2 - D_j| <= E
 * where D_j is the distance the CPU computes (double, from x and c) and
 * E = 2 delta ||x'_r|| max_j ||c'_j|| + 2^-20 (||x'_r|| + max_j ||c'_j||)^2,
 * delta the relative error of the product (rounding of the operands and the
 * accumulation over d terms) and the second term every float rounding of
 * the centring, the norms and v.  The nearest centroid is then among the
 * candidates with v_j <= min v + 2E (W below, with a 25% margin), and those
 * are compared by D_j in double.  Each lane keeps the candidates of its own
 * columns, at most CAND_CAP smallest; a row where a lane had to let go of
 * one inside the final window goes to the list unres for the next, more
 * exact product, or, at the last level, is scanned again with every
 * candidate compared in double.
 *
 * rowmap (or null) gives the chunk row of tile row q.  stats[0] counts the
 * rows decided in double, stats[1] the candidates compared.
 */
template <bool REFINE>
__global__ void __launch_bounds__(BLOCK)
argmin_rows_kernel(const float *__restrict__ dots,	/* [tr, k] */
				   int64_t tr, int k,
				   const float *__restrict__ cval,	/* [k] ||c'||^2 */
				   const float *__restrict__ xnorm, /* [rows] ||x'||^2 */
				   const int32_t *__restrict__ rowmap,	/* [tr] or null */
				   const float *__restrict__ cmax2, /* max ||c'||^2 (REFINE) */
				   float delta, float wfac, bool last_level,
				   const float *__restrict__ x, int d,	/* [rows, d] raw rows (REFINE) */
				   const double *__restrict__ cen,	/* [k, d] (REFINE) */
				   int32_t *__restrict__ labels,	/* [rows] out */
				   const int32_t *__restrict__ labels_old,	/* [rows] or null */
				   float *__restrict__ d2out,	/* [rows] out */
				   unsigned long long *__restrict__ changed,
				   unsigned long long *__restrict__ stats,	/* [2] (REFINE) */
				   int32_t *__restrict__ unres, /* out (REFINE, not last level): unres_base + row */
				   unsigned int *__restrict__ unres_n, int64_t unres_base)
{
	const unsigned int full = 0xffffffffu;
	int64_t		q = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;
	unsigned int mine = 0,
				decided = 0,
				compared = 0;

	if (q < tr)
	{
		int64_t		row = rowmap ? rowmap[q] : q;
		const float *dr = dots + q * k;
		float		w = 0.0f;
		float		m = INFINITY;
		int			mj = 0x7fffffff;
		float		cv[CAND_CAP];
		int			cj[CAND_CAP];
		int			nc = 0;
		float		dropped = INFINITY;	/* the smallest value let go for want of room */
		float		mw = INFINITY;	/* the warp's minimum at the last look */
		bool		over;

		if (REFINE)
		{
			float		r = sqrtf(xnorm[row]),
						c = sqrtf(*cmax2);

			w = wfac * (2.0f * delta * r * c + ldexpf((r + c) * (r + c), -20));
		}
		for (int j0 = 0; j0 < k; j0 += 32 * SCAN_BATCH)
		{
			float		v[SCAN_BATCH];

			/* the loads of a batch first, so that they are in flight together */
#pragma unroll
			for (int u = 0; u < SCAN_BATCH; u++)
			{
				int			j = j0 + 32 * u + lane;

				v[u] = j < k ? __fmaf_rn(-2.0f, dr[j], cval[j]) : INFINITY;
			}
#pragma unroll
			for (int u = 0; u < SCAN_BATCH; u++)
				if (v[u] < m)
				{
					m = v[u];
					mj = j0 + 32 * u + lane;
				}
			if (REFINE)
			{
				/* the window from the lowest value seen by this lane or, at the last look, the warp */
				float		lim_now = fminf(m, mw) + w;

#pragma unroll
				for (int u = 0; u < SCAN_BATCH; u++)
					if (v[u] <= lim_now)
						keep_candidate(cv, cj, nc, dropped, v[u], j0 + 32 * u + lane);

				float		wm = m;

				for (int o = 16; o > 0; o >>= 1)
					wm = fminf(wm, __shfl_xor_sync(full, wm, o));
				mw = wm;
			}
		}
		for (int o = 16; o > 0; o >>= 1)
		{
			float		om = __shfl_xor_sync(full, m, o);
			int			oj = __shfl_xor_sync(full, mj, o);

			if (om < m || (om == m && oj < mj))
			{
				m = om;
				mj = oj;
			}
		}
		if (mj == 0x7fffffff)
			mj = 0;				/* every value NaN: cannot happen with finite data */

		int			bj = mj;
		float		bd2 = fmaxf(xnorm[row] + m, 0.0f);
		bool		resolved = true;

		if (REFINE)
		{
			float		lim = m + w;
			unsigned int pend = 0;
			int			total;

#pragma unroll
			for (int s = 0; s < CAND_CAP; s++)
				if (s < nc && cv[s] <= lim)
					pend |= 1u << s;
			total = __popc(pend);
			for (int o = 16; o > 0; o >>= 1)
				total += __shfl_xor_sync(full, total, o);
			/* a value let go inside the final window: this lane's list is short of a candidate */
			over = __any_sync(full, dropped <= lim);
			if (over && !last_level)
				resolved = false;
			else if (over || total > 1)
			{
				const float *xr = x + row * d;
				double		best = INFINITY;
				int			bjj = 0x7fffffff;
				int			seen = 0;

				if (!over)
				{
					/* the lanes' candidates, one after the other */
					for (;;)
					{
						unsigned int bal = __ballot_sync(full, pend != 0);

						if (!bal)
							break;
						int			src = __ffs(bal) - 1;
						int			myj = 0;

						if (lane == src)
						{
							int			s = __ffs(pend) - 1;

#pragma unroll
							for (int t = 0; t < CAND_CAP; t++)
								if (t == s)
									myj = cj[t];
							pend &= pend - 1;
						}
						int			jj = __shfl_sync(full, myj, src);
						double		dd = warp_exact_d2(xr, cen + (size_t) jj * d, d, lane);

						if (dd < best || (dd == best && jj < bjj))
						{
							best = dd;
							bjj = jj;
						}
						seen++;
					}
				}
				else
				{
					/* a lane ran out of room: every column again */
					for (int j0 = 0; j0 < k; j0 += 32)
					{
						int			j = j0 + lane;
						bool		cand = j < k && __fmaf_rn(-2.0f, dr[j], cval[j]) <= lim;
						unsigned int bal = __ballot_sync(full, cand);

						while (bal)
						{
							int			jj = j0 + __ffs(bal) - 1;
							double		dd = warp_exact_d2(xr, cen + (size_t) jj * d, d, lane);

							bal &= bal - 1;
							if (dd < best || (dd == best && jj < bjj))
							{
								best = dd;
								bjj = jj;
							}
							seen++;
						}
					}
				}
				bj = bjj;
				bd2 = (float) best;
				decided = lane == 0;
				compared = lane == 0 ? seen : 0;
			}
		}
		if (lane == 0)
		{
			if (!resolved)
				unres[atomicAdd(unres_n, 1u)] = (int32_t) (unres_base + row);
			else
			{
				labels[row] = bj;
				d2out[row] = bd2;
				mine = labels_old && labels_old[row] != bj;
			}
		}
	}
	block_add(changed, mine);
	if (REFINE)
	{
		block_add(stats, decided);
		block_add(stats + 1, compared);
	}
}

/* Per iteration: the float forms of the double centroids. */
__global__ void prep_centroids_kernel(const double *__restrict__ cen,	/* [k, d] */
									  int k, int d,
									  const double *__restrict__ mean,	/* [d] */
									  float *__restrict__ cen_f,	/* [k, d] raw, out */
									  float *__restrict__ cen_cf,	/* [k, d] centred, out or null */
									  float *__restrict__ cen_pad,	/* [k, maxd] out or null */
									  int maxd, int pad_centred,
									  float *__restrict__ cnorm,	/* [k] ||c'||^2 out or null */
									  float *__restrict__ cmax2 /* max ||c'||^2, in/out, or null */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	double		nn = 0.0;

	for (int t = 0; t < d; t++)
	{
		double		c = cen[(size_t) j * d + t];
		float		cf = (float) c;
		float		ccf = (float) (c - mean[t]);

		cen_f[(size_t) j * d + t] = cf;
		if (cen_cf)
			cen_cf[(size_t) j * d + t] = ccf;
		if (cen_pad)
			cen_pad[(size_t) j * maxd + t] = pad_centred ? ccf : cf;
		nn += (double) ccf * (double) ccf;
	}
	if (cen_pad)
		for (int t = d; t < maxd; t++)
			cen_pad[(size_t) j * maxd + t] = 0.0f;
	if (cnorm)
		cnorm[j] = (float) nn;
	if (cmax2)
	{
		/* non-negative floats order as their bit patterns */
		atomicMax(reinterpret_cast<unsigned int *>(cmax2), __float_as_uint((float) nn));
	}
}

/* Sorted update, step 1: each cluster's run in the sorted labels. */
__global__ void segments_kernel(const int32_t *__restrict__ keys,	/* [rows] sorted labels */
								int64_t rows, int k,
								int64_t *__restrict__ seg_start,	/* [k] out */
								int64_t *__restrict__ seg_count,	/* [k] out */
								int *__restrict__ nslices,	/* [k] out */
								unsigned long long *__restrict__ counts /* [k] in/out */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	int64_t		lo = 0,
				hi = rows;

	while (lo < hi)
	{
		int64_t		mid = (lo + hi) / 2;

		if (keys[mid] < j)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t		start = lo;

	hi = rows;
	while (lo < hi)
	{
		int64_t		mid = (lo + hi) / 2;

		if (keys[mid] <= j)
			lo = mid + 1;
		else
			hi = mid;
	}
	seg_start[j] = start;
	seg_count[j] = lo - start;
	nslices[j] = (int) ((lo - start + GC_SLICE - 1) / GC_SLICE);
	counts[j] += (unsigned long long) (lo - start);
}

/*
 * Sorted update, step 2: block b sums one slice of one cluster's rows,
 * x - c_f, in double, in row order within each thread and in thread order
 * across the block.
 */
__global__ void __launch_bounds__(BLOCK)
slice_sum_kernel(const float *__restrict__ x,	/* [rows, d] */
				 int d, int k,
				 const int32_t *__restrict__ perm,	/* [rows] rows sorted by label */
				 const int64_t *__restrict__ seg_start,	/* [k] */
				 const int64_t *__restrict__ seg_count,	/* [k] */
				 const int *__restrict__ nslices,	/* [k] */
				 const int *__restrict__ slice_off, /* [k] exclusive scan of nslices */
				 const float *__restrict__ cen_f,	/* [k, d] */
				 double *__restrict__ partial /* [items, d] out */ )
{
	__shared__ double red[BLOCK];
	int			b = blockIdx.x;
	int			lo = 0,
				hi = k;

	/* the last cluster whose first slice is <= b */
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (slice_off[mid] <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	int			j = lo - 1;

	if (j < 0 || b >= slice_off[j] + nslices[j])
		return;
	int			s = b - slice_off[j];
	int64_t		r0 = seg_start[j] + (int64_t) s * GC_SLICE;
	int64_t		r1 = min(r0 + GC_SLICE, seg_start[j] + seg_count[j]);
	int			dt = 1;

	while (dt < d && dt < BLOCK)
		dt <<= 1;
	int			groups = BLOCK / dt;
	int			g = threadIdx.x / dt;
	int			t = threadIdx.x % dt;

	for (int base = 0; base < d; base += dt)
	{
		int			c = base + t;
		double		acc = 0.0;

		if (c < d)
		{
			double		ref = (double) cen_f[(size_t) j * d + c];

			for (int64_t r = r0 + g; r < r1; r += groups)
				acc += (double) x[(int64_t) perm[r] * d + c] - ref;
		}
		red[threadIdx.x] = acc;
		__syncthreads();
		if (g == 0 && c < d)
		{
			double		tot = 0.0;

			for (int q = 0; q < groups; q++)
				tot += red[q * dt + t];
			partial[(size_t) b * d + c] = tot;
		}
		__syncthreads();
	}
}

/* Sorted update, step 3: the slices of each cluster, in order, into the sums. */
__global__ void slice_reduce_kernel(const double *__restrict__ partial,	/* [items, d] */
									int k, int d,
									const int *__restrict__ nslices,
									const int *__restrict__ slice_off,
									double *__restrict__ sums /* [k, d] in/out */ )
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (int64_t) k * d)
		return;
	int			j = (int) (i / d);
	int			c = (int) (i % d);
	double		tot = 0.0;

	for (int s = 0; s < nslices[j]; s++)
		tot += partial[(size_t) (slice_off[j] + s) * d + c];
	sums[i] += tot;
}

/* Fused update: fixed-point sums to double. */
__global__ void unfix_kernel(const unsigned long long *__restrict__ fx, int64_t m, double inv_scale,
							 double *__restrict__ sums)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
		sums[i] = (double) (long long) fx[i] * inv_scale;
}

/* New centroids c_f + sum / count, and each cluster's squared move. */
__global__ void finalize_kernel(const double *__restrict__ sums,	/* [k, d] of x - c_f */
								const unsigned long long *__restrict__ counts,	/* [k] */
								const float *__restrict__ cen_f,	/* [k, d] */
								const double *__restrict__ cen_old, /* [k, d] */
								int k, int d,
								double *__restrict__ cen_new,	/* [k, d] out */
								double *__restrict__ shift /* [k] out */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	double		move = 0.0;

	for (int c = 0; c < d; c++)
	{
		size_t		i = (size_t) j * d + c;
		double		v = counts[j] > 0 ? (double) cen_f[i] + sums[i] / (double) counts[j] : cen_old[i];
		double		diff = v - cen_old[i];

		move += diff * diff;
		cen_new[i] = v;
	}
	shift[j] = move;
}

/* Squared distance of every row to its centroid, in double as on the CPU. */
__global__ void exact_d2_kernel(const float *__restrict__ x, int64_t rows, int d,
								const int32_t *__restrict__ labels,
								const double *__restrict__ cen,
								double *__restrict__ d2 /* [rows] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < rows;
		 i += (int64_t) gridDim.x * BLOCK)
	{
		const double *c = cen + (size_t) labels[i] * d;
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = __dsub_rn((double) x[i * d + j], c[j]);

			s = __dadd_rn(s, __dmul_rn(t, t));
		}
		d2[i] = s;
	}
}

/* k-means++: D^2 to the newest centre, kept as the minimum, and each segment's maximum. */
__global__ void __launch_bounds__(BLOCK)
kmpp_dist_kernel(const float *__restrict__ x, int64_t n, int d,
				 const float *__restrict__ c,	/* [d] a row of x */
				 int first,
				 double *__restrict__ mind2,	/* [n] in/out */
				 double *__restrict__ segmax /* [nseg] out */ )
{
	using Reduce = cub::BlockReduce<double, BLOCK>;
	__shared__ typename Reduce::TempStorage tmp;
	int64_t		from = (int64_t) blockIdx.x * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);
	double		mx = 0.0;

	for (int64_t i = from + threadIdx.x; i < to; i += BLOCK)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = __dsub_rn((double) x[i * d + j], (double) c[j]);

			s = __dadd_rn(s, __dmul_rn(t, t));
		}
		if (!first && mind2[i] < s)
			s = mind2[i];
		mind2[i] = s;
		mx = fmax(mx, s);
	}
	mx = Reduce(tmp).Reduce(mx, MaxOp());
	if (threadIdx.x == 0)
		segmax[blockIdx.x] = mx;
}

/* k-means++: the largest D^2, stored after the segment sums. */
__global__ void kmpp_max_kernel(const double *__restrict__ segmax, int nseg,
								unsigned long long *__restrict__ packed /* [nseg + 1] */ )
{
	using Reduce = cub::BlockReduce<double, 1024>;
	__shared__ typename Reduce::TempStorage tmp;
	double		mx = 0.0;

	for (int i = threadIdx.x; i < nseg; i += 1024)
		mx = fmax(mx, segmax[i]);
	mx = Reduce(tmp).Reduce(mx, MaxOp());
	if (threadIdx.x == 0)
		packed[nseg] = (unsigned long long) __double_as_longlong(mx);
}

/* k-means++: each segment's sum of integer weights. */
__global__ void __launch_bounds__(BLOCK)
kmpp_weight_kernel(const double *__restrict__ mind2, int64_t n,
				   unsigned long long *__restrict__ packed /* [nseg + 1] */ , int nseg)
{
	using Reduce = cub::BlockReduce<unsigned long long, BLOCK>;
	__shared__ typename Reduce::TempStorage tmp;
	double		scale = gc_kmpp_scale(__longlong_as_double((long long) packed[nseg]), n);
	int64_t		from = (int64_t) blockIdx.x * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);
	unsigned long long s = 0;

	for (int64_t i = from + threadIdx.x; i < to; i += BLOCK)
		s += gc_kmpp_weight(mind2[i], scale);
	s = Reduce(tmp).Sum(s);
	if (threadIdx.x == 0)
		packed[blockIdx.x] = s;
}

inline unsigned int grid_for(int64_t work, int64_t per_block, unsigned int cap)
{
	int64_t		g = (work + per_block - 1) / per_block;

	return (unsigned int) std::max<int64_t>(1, std::min<int64_t>(g, cap));
}

/* One k-means call on the device. */
class KMeans
{
  public:
	KMeans(const float *x, int64_t n, int d, const gc_kmeans_params *p, gc_timing *timing,
		   gc_cancel_fn cancel, void *cancel_arg)
		: hx_(x), n_(n), d_(d), k_(p->k), p_(p), timing_(timing), cancel_(cancel), cancel_arg_(cancel_arg)
	{
	}

	void run(gc_kmeans_result *result);

  private:
	void plan();
	void load_chunk(int64_t c);
	void copy_chunk(int64_t c);
	void prepare_chunk(int64_t rows);
	void host_stats();
	void device_stats();
	void init_centroids();
	void kmeans_plusplus_device(std::vector<int64_t> &rows);
	void prep_centroids();
	void pass(bool update, int32_t *labels, const int32_t *labels_old);
	void assign_chunk(int64_t off, int64_t rows, bool update, int32_t *labels, const int32_t *labels_old);
	void sorted_update_chunk(int64_t rows, const int32_t *labels);
	void gemm(bool tf32, const float *xrows, int rows);
	void argmin_tile(bool tf32, int64_t tr, const int32_t *rowmap, int64_t off, int32_t *labels,
					 const int32_t *labels_old, float *d2, bool last);
	void cancel_point() { gc::check_cancel(cancel_, cancel_arg_); }

	template <int MAXD, bool UPDATE>
	void launch_lowd(int64_t rows, int32_t *labels, const int32_t *labels_old, float *d2);

	const float *hx_;
	int64_t		n_;
	int			d_;
	int			k_;
	const gc_kmeans_params *p_;
	gc_timing  *timing_;
	gc_cancel_fn cancel_;
	void	   *cancel_arg_;

	int			sms_ = 1;
	int			maxd_ = 0;				/* 2, 4, 8, 16, 32, or 0 for the GEMM form */
	bool		fused_ = false;			/* fixed-point update inside the assignment */
	bool		resident_ = true;
	int64_t		chunk_rows_ = 0;
	int64_t		loaded_chunk_ = -1;
	int64_t		gemm_tile_ = 0;
	/* the GEMM form: the first product, the check, and the FP32 product behind a TF32 one */
	bool		tf32_first_ = false;
	bool		refine_ = true;
	bool		two_level_ = false;
	float		wfac_ = 2.5f;			/* the candidate window, 2.5 E (1.25 of 2 E) */
	int64_t		escalated_ = 0;			/* rows of this pass sent to the FP32 product */
	double		mean_var_ = 0.0;
	double		fx_scale_ = 0.0;
	std::vector<double> mean_, lo_, hi_;
	std::vector<double> h_cen_;			/* [k, d] initial centroids */
	Cublas		blas_;

	/* device */
	DeviceBuffer<float> x_;				/* [chunk_rows, d] */
	DeviceBuffer<int32_t> lab_a_, lab_b_;	/* [n] */
	DeviceBuffer<float> d2_;			/* [n] */
	DeviceBuffer<double> cen_, cen_new_;	/* [k, d] */
	DeviceBuffer<float> cen_f_, cen_cf_, cen_pad_, cnorm_, cval_, cmax_;
	DeviceBuffer<double> mean_d_;		/* [d] */
	DeviceBuffer<float> mean_f_;		/* [maxd] */
	DeviceBuffer<double> sums_;
	DeviceBuffer<unsigned long long> fx_;
	/*
	 * per-iteration results, one copy to the host: counts [k], moves [k]
	 * (double), changed [1]; then the check's counts over the call [2]
	 */
	DeviceBuffer<unsigned long long> stat_;
	unsigned long long *counts() const { return stat_.get(); }
	double	   *shifts() const { return reinterpret_cast<double *>(stat_.get() + k_); }
	unsigned long long *changed() const { return stat_.get() + 2 * (size_t) k_; }
	unsigned long long *checked() const { return stat_.get() + 2 * (size_t) k_ + 1; }
	size_t		stat_len() const { return 2 * (size_t) k_ + 3; }
	DeviceBuffer<float> xc_, xnorm_, dots_;	/* the GEMM form */
	DeviceBuffer<float> xg_;			/* rows for the FP32 product */
	DeviceBuffer<int32_t> unres_;
	DeviceBuffer<unsigned int> unres_n_;
	/* sorted update */
	DeviceBuffer<int32_t> keys_, iota_, perm_;
	DeviceBuffer<int64_t> seg_start_, seg_count_;
	DeviceBuffer<int> nslices_, slice_off_;
	DeviceBuffer<double> partial_;
	DeviceBuffer<unsigned char> sort_tmp_, scan_tmp_;
	size_t		sort_tmp_bytes_ = 0, scan_tmp_bytes_ = 0;
};

template <int MAXD, bool UPDATE>
void KMeans::launch_lowd(int64_t rows, int32_t *labels, const int32_t *labels_old, float *d2)
{
	constexpr bool EXPAND = MAXD >= 32;
	int			tile_k;
	size_t		smem;
	unsigned int grid;

	if (UPDATE)
	{
		int			per_sm = 0;

		tile_k = k_;
		smem = (size_t) k_ * MAXD * 4 + (size_t) k_ * d_ * 8 + (size_t) k_ * 4;
		/* one wave of blocks: each flushes its sums once, and no half-empty second wave */
		CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm,
															   assign_lowd_kernel<MAXD, UPDATE>,
															   BLOCK, smem));
		grid = grid_for(rows, BLOCK * PPT, (unsigned) sms_ * std::max(per_sm, 1));
	}
	else
	{
		tile_k = (int) std::min<size_t>(k_, TILE_SMEM_MAX / ((MAXD + (EXPAND ? 1 : 0)) * 4));
		smem = (size_t) tile_k * (MAXD + (EXPAND ? 1 : 0)) * 4;
		grid = grid_for(rows, BLOCK * PPT, (unsigned) sms_ * 64);
	}
	assign_lowd_kernel<MAXD, UPDATE><<<grid, BLOCK, smem>>>(
		x_.get(), rows, d_, cen_pad_.get(), EXPAND ? cnorm_.get() : nullptr,
		EXPAND ? mean_f_.get() : nullptr, k_, tile_k, labels, labels_old, d2,
		changed(), UPDATE ? fx_.get() : nullptr, UPDATE ? counts() : nullptr, fx_scale_);
	CHECK_LAUNCH("assign_lowd_kernel");
}

/* Chooses the kernels and how much of the data stays on the device. */
void KMeans::plan()
{
	int			dev = 0;
	size_t		free_b = 0,
				total_b = 0;

	CUDA_TRY(cudaGetDevice(&dev));
	CUDA_TRY(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));

	maxd_ = d_ <= 2 ? 2 : d_ <= 4 ? 4 : d_ <= 8 ? 8 : d_ <= 16 ? 16 : d_ <= 32 ? 32 : 0;

	/*
	 * 'fp32': a TF32 product where the device has tensor cores for it
	 * (compute capability 8.0 and up), checked, with an FP32 product for the
	 * rows the check leaves open; else one FP32 product, checked.  'tf32':
	 * one TF32 product, unchecked.  GPUCLUST_KMEANS_GEMM = sgemm forces the
	 * FP32 product and GPUCLUST_KMEANS_WINDOW scales the candidate window
	 * (tests and benchmarks).
	 */
	{
		int			major = 0;
		const char *g = getenv("GPUCLUST_KMEANS_GEMM");
		const char *w = getenv("GPUCLUST_KMEANS_WINDOW");

		CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
		refine_ = p_->precision != GC_PRECISION_TF32;
		tf32_first_ = !refine_ || (major >= 8 && !(g && strcmp(g, "sgemm") == 0));
		two_level_ = refine_ && tf32_first_;
		if (w && atof(w) >= 1.0)
			wfac_ = (float) (2.5 * atof(w));
	}
	fused_ = maxd_ > 0 && maxd_ <= 16 &&
		(size_t) k_ * maxd_ * 4 + (size_t) k_ * d_ * 8 + (size_t) k_ * 4 <= FUSED_SMEM_MAX;

	/* bytes that do not depend on the chunk */
	size_t		kd = (size_t) k_ * d_;
	size_t		fixed = kd * (8 * 5 + 4 * 3) + (size_t) k_ * (4 * 8 + 64) + (size_t) d_ * 16 + (64u << 20);
	size_t		per_row = 4 + 4 + 4 + 8;	/* two label arrays, d2, mind2 / exact d2 */
	size_t		per_chunk_row = (size_t) d_ * 4 + (fused_ ? 0 : 4 * 3 + 16 + 8) +
		(maxd_ == 0 ? (size_t) d_ * 4 + 8 : 0);
	size_t		budget = (size_t) (free_b * 0.9);

	if (maxd_ == 0)
	{
		/* GEMM tiles: at most 1 GiB or an eighth of the free memory */
		size_t		dots_bytes = std::min<size_t>(size_t(1) << 30, free_b / 8);

		gemm_tile_ = std::max<int64_t>(1024, (int64_t) (dots_bytes / ((size_t) k_ * 4)));
		/* GPUCLUST_KMEANS_TILE_ROWS sets the rows per product (benchmarks) */
		if (getenv("GPUCLUST_KMEANS_TILE_ROWS") && atoll(getenv("GPUCLUST_KMEANS_TILE_ROWS")) >= 32)
			gemm_tile_ = atoll(getenv("GPUCLUST_KMEANS_TILE_ROWS"));
		fixed += (size_t) gemm_tile_ * k_ * 4 + (size_t) gemm_tile_ * d_ * 4;
	}
	if (!fused_)
		fixed += (size_t) (k_ + 1) * d_ * 8;	/* partial sums, beyond the per-slice rows */

	size_t		need_resident = fixed + (size_t) n_ * (per_row + per_chunk_row) +
		(fused_ ? 0 : (size_t) n_ / GC_SLICE * d_ * 8);

	/* GPUCLUST_KMEANS_CHUNK_ROWS caps the rows per chunk: tests use it to run the chunked path. */
	int64_t		cap = int64_t(1) << 30;
	const char *env = getenv("GPUCLUST_KMEANS_CHUNK_ROWS");

	if (env && atoll(env) >= 1024)
		cap = std::min<int64_t>(cap, atoll(env));

	if (need_resident <= budget && n_ <= cap)
	{
		resident_ = true;
		chunk_rows_ = n_;
	}
	else
	{
		size_t		base = fixed + (size_t) n_ * per_row;
		int64_t		rows = base < budget ?
			(int64_t) ((budget - base) / (per_chunk_row + (fused_ ? 0 : (size_t) d_ * 8 / GC_SLICE + 1))) : 0;

		rows = std::min<int64_t>(rows, cap);
		rows = rows / 1024 * 1024;
		if (rows < std::min<int64_t>(65536, cap))
		{
			gc::oom_bytes_needed = (int64_t) (base + 65536 * per_chunk_row);
			gc::fail(GC_ERR_OUT_OF_MEMORY,
					 "k-means of %lld rows needs at least %lld bytes of device memory (%zu free)",
					 (long long) n_, (long long) gc::oom_bytes_needed, free_b);
		}
		resident_ = false;
		chunk_rows_ = rows;
	}
	if (maxd_ == 0)
		gemm_tile_ = std::min<int64_t>(gemm_tile_, chunk_rows_);
}

/* Makes chunk c the content of x_ (a no-op when the data are resident). */
void KMeans::load_chunk(int64_t c)
{
	if (loaded_chunk_ == c)
		return;
	copy_chunk(c);
	prepare_chunk(std::min<int64_t>(chunk_rows_, n_ - c * chunk_rows_));
	loaded_chunk_ = c;
}

/* Copies the rows of chunk c into x_. */
void KMeans::copy_chunk(int64_t c)
{
	int64_t		off = c * chunk_rows_;
	int64_t		rows = std::min<int64_t>(chunk_rows_, n_ - off);
	gc::Stopwatch sw;

	CUDA_TRY(cudaMemcpy(x_.get(), hx_ + off * d_, sizeof(float) * (size_t) rows * d_,
						cudaMemcpyHostToDevice));
	if (timing_)
		timing_->to_device_ms += sw.ms();
}

/* The centred rows and their norms of the GEMM form, from x_ and the mean. */
void KMeans::prepare_chunk(int64_t rows)
{
	if (maxd_ == 0)
	{
		center_rows_kernel<<<grid_for(rows, BLOCK, (unsigned) sms_ * 32), BLOCK>>>(
			x_.get(), rows, d_, mean_d_.get(), xc_.get(), xnorm_.get());
		CHECK_LAUNCH("center_rows_kernel");
	}
}

/*
 * Mean per-feature variance (the unit of tol), mean, smallest and largest
 * value of each feature.  On the host for chunked data (the shared
 * gc_kmeans_stats, row order); on the device for resident data, in slices
 * of GC_STAT_ROWS rows: the same sums up to the rounding of the order, so
 * the stopping threshold may differ from the CPU's in the last bits.
 */
void KMeans::host_stats()
{
	std::vector<double> scratch(3 * (size_t) d_);

	if (gc_kmeans_stats(hx_, n_, d_, &mean_var_, mean_.data(), lo_.data(), hi_.data(), scratch.data(),
						cancel_, cancel_arg_) != 0)
		gc::fail(GC_ERR_CANCELLED, "canceled");
}

void KMeans::device_stats()
{
	int			slices = (int) ((n_ + GC_STAT_ROWS - 1) / GC_STAT_ROWS);
	int			threads = (int) std::min<int64_t>(BLOCK, (d_ + 31) / 32 * 32);
	DeviceBuffer<double> psum((size_t) slices * d_, "statistics");
	DeviceBuffer<float> pmin((size_t) slices * d_, "statistics"),
				pmax((size_t) slices * d_, "statistics");
	DeviceBuffer<double> out(3 * (size_t) d_, "statistics");
	std::vector<double> h(3 * (size_t) d_);
	double		total = 0.0;

	stats_slice_kernel<<<slices, threads>>>(x_.get(), n_, d_, nullptr, psum.get(), pmin.get(), pmax.get());
	CHECK_LAUNCH("stats_slice_kernel");
	stats_combine_kernel<<<grid_for(d_, 128, 1u << 30), 128>>>(psum.get(), pmin.get(), pmax.get(), slices, d_,
															   out.get());
	CHECK_LAUNCH("stats_combine_kernel");
	CUDA_TRY(cudaMemcpy(h.data(), out.get(), sizeof(double) * h.size(), cudaMemcpyDeviceToHost));
	for (int t = 0; t < d_; t++)
	{
		mean_[t] = h[t] / (double) n_;
		lo_[t] = h[d_ + t];
		hi_[t] = h[2 * (size_t) d_ + t];
	}
	CUDA_TRY(cudaMemcpy(mean_d_.get(), mean_.data(), sizeof(double) * d_, cudaMemcpyHostToDevice));
	stats_slice_kernel<<<slices, threads>>>(x_.get(), n_, d_, mean_d_.get(), psum.get(), nullptr, nullptr);
	CHECK_LAUNCH("stats_slice_kernel");
	stats_combine_kernel<<<grid_for(d_, 128, 1u << 30), 128>>>(psum.get(), nullptr, nullptr, slices, d_,
															   out.get());
	CHECK_LAUNCH("stats_combine_kernel");
	CUDA_TRY(cudaMemcpy(h.data(), out.get(), sizeof(double) * d_, cudaMemcpyDeviceToHost));
	for (int t = 0; t < d_; t++)
		total += h[t] / (double) n_;
	mean_var_ = total / (double) d_;
}

/* k-means++ with the distance and weight passes on the device. */
void KMeans::kmeans_plusplus_device(std::vector<int64_t> &rows)
{
	int			nseg = (int) ((n_ + GC_KMPP_SEGMENT - 1) / GC_KMPP_SEGMENT);
	DeviceBuffer<double> mind2(n_, "k-means++ distances");
	DeviceBuffer<double> segmax(nseg, "k-means++ segment maxima");
	DeviceBuffer<unsigned long long> packed(nseg + 1, "k-means++ segment sums");
	std::vector<unsigned long long> h_packed(nseg + 1);
	std::vector<double> h_seg(GC_KMPP_SEGMENT);
	gc_rng		rng;

	gc_rng_seed(&rng, p_->seed);
	rows[0] = (int64_t) gc_rng_below(&rng, (uint64_t) n_);
	for (int c = 1; c < k_; c++)
	{
		kmpp_dist_kernel<<<nseg, BLOCK>>>(x_.get(), n_, d_, x_.get() + rows[c - 1] * d_, c == 1,
										   mind2.get(), segmax.get());
		CHECK_LAUNCH("kmpp_dist_kernel");
		kmpp_max_kernel<<<1, 1024>>>(segmax.get(), nseg, packed.get());
		CHECK_LAUNCH("kmpp_max_kernel");
		kmpp_weight_kernel<<<nseg, BLOCK>>>(mind2.get(), n_, packed.get(), nseg);
		CHECK_LAUNCH("kmpp_weight_kernel");
		CUDA_TRY(cudaMemcpy(h_packed.data(), packed.get(), sizeof(unsigned long long) * (nseg + 1),
							cudaMemcpyDeviceToHost));
		cancel_point();

		double		maxd2;
		uint64_t	total = 0;

		memcpy(&maxd2, &h_packed[nseg], sizeof(double));
		for (int s = 0; s < nseg; s++)
			total += h_packed[s];

		int64_t		target = gc_kmpp_draw(&rng, total, n_);

		if (target < 0)
		{
			rows[c] = -1 - target;
			continue;
		}

		double		scale = gc_kmpp_scale(maxd2, n_);
		uint64_t	acc = 0;

		rows[c] = -1;
		for (int s = 0; s < nseg; s++)
		{
			if (acc + h_packed[s] <= (uint64_t) target)
			{
				acc += h_packed[s];
				continue;
			}
			int64_t		from = (int64_t) s * GC_KMPP_SEGMENT;
			int64_t		to = std::min<int64_t>(from + GC_KMPP_SEGMENT, n_);

			CUDA_TRY(cudaMemcpy(h_seg.data(), mind2.get() + from, sizeof(double) * (size_t) (to - from),
								cudaMemcpyDeviceToHost));
			rows[c] = gc_kmpp_pick(h_seg.data(), from, to, scale, (uint64_t) target, &acc);
			break;
		}
		if (rows[c] < 0)
			gc::fail(GC_ERR_INTERNAL, "k-means++ draw fell outside the data, please report a bug");
	}
}

/* Statistics, initial centroids and the fixed-point scale. */
void KMeans::init_centroids()
{
	h_cen_.assign((size_t) k_ * d_, 0.0);
	if (p_->init == GC_KMEANS_INIT_GIVEN)
		std::copy(p_->initial_centroids, p_->initial_centroids + (size_t) k_ * d_, h_cen_.begin());
	else
	{
		std::vector<int64_t> rows(k_);

		if (p_->init == GC_KMEANS_INIT_RANDOM)
		{
			if (gc_kmeans_random_rows(n_, k_, p_->seed, rows.data()) != 0)
				throw std::bad_alloc();
		}
		else if (resident_ && n_ >= 65536)
			kmeans_plusplus_device(rows);
		else
		{
			std::vector<double> mind2(n_);

			if (gc_kmeans_plusplus_rows(hx_, n_, d_, k_, p_->seed, rows.data(), mind2.data(),
										cancel_, cancel_arg_) != 0)
				gc::fail(GC_ERR_CANCELLED, "canceled");
		}
		for (int j = 0; j < k_; j++)
			for (int t = 0; t < d_; t++)
				h_cen_[(size_t) j * d_ + t] = (double) hx_[rows[j] * d_ + t];
	}

	/* Offsets x - c_f are bounded by the box around the data and the initial centroids. */
	double		extent = 0.0;

	for (int t = 0; t < d_; t++)
	{
		double		a = lo_[t],
					b = hi_[t];

		for (int j = 0; j < k_; j++)
		{
			a = std::min(a, h_cen_[(size_t) j * d_ + t]);
			b = std::max(b, h_cen_[(size_t) j * d_ + t]);
		}
		extent = std::max(extent, b - a);
	}
	fx_scale_ = gc_kmpp_scale(extent * (1.0 + 1e-6) + 1e-300, n_);
}

void KMeans::prep_centroids()
{
	if (maxd_ == 0)
		CUDA_TRY(cudaMemsetAsync(cmax_.get(), 0, sizeof(float)));
	prep_centroids_kernel<<<grid_for(k_, 128, 1u << 30), 128>>>(
		cen_.get(), k_, d_, mean_d_.get(), cen_f_.get(),
		maxd_ == 0 ? cen_cf_.get() : nullptr,
		maxd_ > 0 ? cen_pad_.get() : nullptr, maxd_, maxd_ >= 32,
		maxd_ >= 32 ? cnorm_.get() : maxd_ == 0 ? cval_.get() : nullptr,
		maxd_ == 0 ? cmax_.get() : nullptr);
	CHECK_LAUNCH("prep_centroids_kernel");
}

/* Nearest centroid for rows [off, off + rows) of the loaded chunk. */
void KMeans::assign_chunk(int64_t off, int64_t rows, bool update, int32_t *labels,
						  const int32_t *labels_old)
{
	int32_t    *lab = labels + off;
	const int32_t *old = labels_old ? labels_old + off : nullptr;
	float	   *d2 = d2_.get() + off;
	bool		fused = update && fused_;

	switch (maxd_)
	{
		case 2:
			fused ? launch_lowd<2, true>(rows, lab, old, d2) : launch_lowd<2, false>(rows, lab, old, d2);
			return;
		case 4:
			fused ? launch_lowd<4, true>(rows, lab, old, d2) : launch_lowd<4, false>(rows, lab, old, d2);
			return;
		case 8:
			fused ? launch_lowd<8, true>(rows, lab, old, d2) : launch_lowd<8, false>(rows, lab, old, d2);
			return;
		case 16:
			fused ? launch_lowd<16, true>(rows, lab, old, d2) : launch_lowd<16, false>(rows, lab, old, d2);
			return;
		case 32:
			launch_lowd<32, false>(rows, lab, old, d2);
			return;
		default:
			break;
	}

	if (two_level_)
		CUDA_TRY(cudaMemsetAsync(unres_n_.get(), 0, sizeof(unsigned int)));
	for (int64_t t0 = 0; t0 < rows; t0 += gemm_tile_)
	{
		int			tr = (int) std::min<int64_t>(gemm_tile_, rows - t0);

		if (t0 > 0)
			cancel_point();
		gemm(tf32_first_, xc_.get() + t0 * d_, tr);
		argmin_tile(tf32_first_, tr, nullptr, t0, lab, old, d2, !two_level_);
	}
	if (two_level_)
	{
		/* the rows the TF32 check left open, through the FP32 product */
		unsigned int m = 0;

		CUDA_TRY(cudaMemcpy(&m, unres_n_.get(), sizeof(m), cudaMemcpyDeviceToHost));
		for (int64_t s0 = 0; s0 < (int64_t) m; s0 += gemm_tile_)
		{
			int			sm = (int) std::min<int64_t>(gemm_tile_, (int64_t) m - s0);

			cancel_point();
			gather_rows_kernel<<<grid_for((int64_t) sm * d_, BLOCK, (unsigned) sms_ * 32), BLOCK>>>(
				xc_.get(), d_, unres_.get() + s0, sm, xg_.get());
			CHECK_LAUNCH("gather_rows_kernel");
			gemm(false, xg_.get(), sm);
			argmin_tile(false, sm, unres_.get() + s0, 0, lab, old, d2, true);
		}
		escalated_ += m;
	}
}

/* dots [rows, k] = xrows [rows, d] . cen_cf_ [k, d]^T, in TF32 or FP32. */
void KMeans::gemm(bool tf32, const float *xrows, int rows)
{
	const float one = 1.0f,
				zero = 0.0f;

	CUBLAS_TRY(cublasGemmEx(blas_.h, CUBLAS_OP_T, CUBLAS_OP_N, k_, rows, d_, &one,
							cen_cf_.get(), CUDA_R_32F, d_, xrows, CUDA_R_32F, d_, &zero,
							dots_.get(), CUDA_R_32F, k_,
							tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/*
 * Argmin over the product in dots_ for tr rows (rows rowmap[q] of the tile
 * at chunk row off, or the tile's first tr rows).  The relative error of
 * x'.c' that the check assumes: TF32 operands keep 10 of 23 mantissa bits
 * (2^-10 each, whether rounded or truncated), and an accumulation over d
 * terms loses at most 2^-22 (two units of FP32 rounding) per term, tensor
 * cores included, of the sum of |x'_t c'_t| <= ||x'|| ||c'||.
 */
void KMeans::argmin_tile(bool tf32, int64_t tr, const int32_t *rowmap, int64_t off, int32_t *labels,
						 const int32_t *labels_old, float *d2, bool last)
{
	unsigned int grid = grid_for(tr * 32, BLOCK, 1u << 30);
	int32_t    *lab = labels + off;
	const int32_t *old = labels_old ? labels_old + off : nullptr;

	if (!refine_)
	{
		argmin_rows_kernel<false><<<grid, BLOCK>>>(
			dots_.get(), tr, k_, cval_.get(), xnorm_.get() + off, rowmap, nullptr, 0.0f, 0.0f, true,
			nullptr, d_, nullptr, lab, old, d2 + off, changed(), nullptr, nullptr, nullptr, 0);
		CHECK_LAUNCH("argmin_rows_kernel");
		return;
	}
	double		delta = std::ldexp((double) d_ + 2.0, -22) +
		(tf32 ? std::ldexp(1.0, -9) + std::ldexp(1.0, -20) : 0.0);

	argmin_rows_kernel<true><<<grid, BLOCK>>>(
		dots_.get(), tr, k_, cval_.get(), xnorm_.get() + off, rowmap, cmax_.get(), (float) delta, wfac_, last,
		x_.get() + off * d_, d_, cen_.get(), lab, old, d2 + off, changed(), checked(),
		unres_.get(), unres_n_.get(), off);
	CHECK_LAUNCH("argmin_rows_kernel");
}

/* Sorted update of the loaded chunk: sums of x - c_f per cluster, added to sums_. */
void KMeans::sorted_update_chunk(int64_t rows, const int32_t *labels)
{
	int			bits = std::max(1, gc_ceil_log2(k_));
	size_t		tb = sort_tmp_bytes_;
	int			items = k_ + (int) ((rows + GC_SLICE - 1) / GC_SLICE);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_tmp_.get(), tb, labels, keys_.get(), iota_.get(),
											 perm_.get(), (int) rows, 0, bits));
	segments_kernel<<<grid_for(k_, 128, 1u << 30), 128>>>(keys_.get(), rows, k_, seg_start_.get(),
														  seg_count_.get(), nslices_.get(), counts());
	CHECK_LAUNCH("segments_kernel");
	tb = scan_tmp_bytes_;
	CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp_.get(), tb, nslices_.get(), slice_off_.get(), k_));
	slice_sum_kernel<<<items, BLOCK>>>(x_.get(), d_, k_, perm_.get(), seg_start_.get(), seg_count_.get(),
									   nslices_.get(), slice_off_.get(), cen_f_.get(), partial_.get());
	CHECK_LAUNCH("slice_sum_kernel");
	slice_reduce_kernel<<<grid_for((int64_t) k_ * d_, 256, 1u << 30), 256>>>(
		partial_.get(), k_, d_, nslices_.get(), slice_off_.get(), sums_.get());
	CHECK_LAUNCH("slice_reduce_kernel");
}

/* One pass over every chunk: assignment, and the sums of the update when asked. */
void KMeans::pass(bool update, int32_t *labels, const int32_t *labels_old)
{
	int64_t		nchunks = (n_ + chunk_rows_ - 1) / chunk_rows_;

	CUDA_TRY(cudaMemset(changed(), 0, sizeof(unsigned long long)));
	if (update)
	{
		CUDA_TRY(cudaMemset(counts(), 0, sizeof(unsigned long long) * k_));
		CUDA_TRY(cudaMemset(sums_.get(), 0, sizeof(double) * (size_t) k_ * d_));
		if (fused_)
			CUDA_TRY(cudaMemset(fx_.get(), 0, sizeof(unsigned long long) * (size_t) k_ * d_));
	}
	for (int64_t c = 0; c < nchunks; c++)
	{
		int64_t		off = c * chunk_rows_;
		int64_t		rows = std::min<int64_t>(chunk_rows_, n_ - off);

		if (c > 0)
			cancel_point();
		load_chunk(c);
		assign_chunk(off, rows, update, labels, labels_old);
		if (update && !fused_)
			sorted_update_chunk(rows, labels + off);
	}
	if (update && fused_)
	{
		unfix_kernel<<<grid_for((int64_t) k_ * d_, 256, 1u << 30), 256>>>(
			fx_.get(), (int64_t) k_ * d_, fx_scale_ > 0 ? 1.0 / fx_scale_ : 0.0, sums_.get());
		CHECK_LAUNCH("unfix_kernel");
	}
}

void KMeans::run(gc_kmeans_result *result)
{
	gc::Stopwatch total;
	gc::Stopwatch sw;
	size_t		kd = (size_t) k_ * d_;

	plan();
	CUBLAS_TRY(cublasCreate(&blas_.h));

	/* device buffers */
	x_.reset((size_t) chunk_rows_ * d_, "k-means data");
	lab_a_.reset(n_, "k-means labels");
	lab_b_.reset(n_, "k-means labels");
	d2_.reset(n_, "k-means distances");
	cen_.reset(kd, "centroids");
	cen_new_.reset(kd, "centroids");
	cen_f_.reset(kd, "centroids");
	mean_d_.reset(d_, "data mean");
	sums_.reset(kd, "centroid sums");
	stat_.reset(stat_len(), "cluster sizes and moves");
	CUDA_TRY(cudaMemset(stat_.get(), 0, sizeof(unsigned long long) * stat_len()));
	if (maxd_ > 0)
		cen_pad_.reset((size_t) k_ * maxd_, "centroids");
	if (maxd_ >= 32)
	{
		cnorm_.reset(k_, "centroid norms");
		mean_f_.reset(maxd_, "data mean");
	}
	if (maxd_ == 0)
	{
		cen_cf_.reset(kd, "centroids");
		cval_.reset(k_, "centroid norms");
		cmax_.reset(1, "centroid norms");
		xc_.reset((size_t) chunk_rows_ * d_, "centred data");
		xnorm_.reset(chunk_rows_, "row norms");
		dots_.reset((size_t) gemm_tile_ * k_, "distance tile");
		xg_.reset((size_t) gemm_tile_ * d_, "rows for the FP32 product");
		unres_.reset(chunk_rows_, "rows for the FP32 product");
		unres_n_.reset(1, "rows for the FP32 product");
	}
	if (fused_)
		fx_.reset(kd, "fixed-point sums");
	else
	{
		int64_t		items = k_ + (chunk_rows_ + GC_SLICE - 1) / GC_SLICE;
		std::vector<int32_t> iota(chunk_rows_);

		keys_.reset(chunk_rows_, "sorted labels");
		iota_.reset(chunk_rows_, "row numbers");
		perm_.reset(chunk_rows_, "sorted rows");
		seg_start_.reset(k_, "cluster runs");
		seg_count_.reset(k_, "cluster runs");
		nslices_.reset(k_, "cluster slices");
		slice_off_.reset(k_, "cluster slices");
		partial_.reset((size_t) items * d_, "partial sums");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_tmp_bytes_, (const int32_t *) nullptr,
												 (int32_t *) nullptr, (const int32_t *) nullptr,
												 (int32_t *) nullptr, (int) chunk_rows_, 0,
												 std::max(1, gc_ceil_log2(k_))));
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, scan_tmp_bytes_, (const int *) nullptr,
											   (int *) nullptr, k_));
		sort_tmp_.reset(std::max<size_t>(sort_tmp_bytes_, 1), "sort workspace");
		scan_tmp_.reset(std::max<size_t>(scan_tmp_bytes_, 1), "scan workspace");
		for (int64_t i = 0; i < chunk_rows_; i++)
			iota[i] = (int32_t) i;
		CUDA_TRY(cudaMemcpy(iota_.get(), iota.data(), sizeof(int32_t) * chunk_rows_, cudaMemcpyHostToDevice));
	}

	/* data statistics first: the centred rows of the GEMM form need the mean */
	{
		std::vector<double> &m = mean_;

		mean_.assign(d_, 0.0);
		lo_.assign(d_, 0.0);
		hi_.assign(d_, 0.0);
		if (resident_)
		{
			copy_chunk(0);
			device_stats();
		}
		else
			host_stats();
		CUDA_TRY(cudaMemcpy(mean_d_.get(), m.data(), sizeof(double) * d_, cudaMemcpyHostToDevice));
		if (maxd_ >= 32)
		{
			std::vector<float> mf(maxd_, 0.0f);

			for (int t = 0; t < d_; t++)
				mf[t] = (float) m[t];
			CUDA_TRY(cudaMemcpy(mean_f_.get(), mf.data(), sizeof(float) * maxd_, cudaMemcpyHostToDevice));
		}
	}
	if (resident_)
	{
		prepare_chunk(n_);
		loaded_chunk_ = 0;
	}
	init_centroids();
	CUDA_TRY(cudaMemcpy(cen_.get(), h_cen_.data(), sizeof(double) * kd, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaDeviceSynchronize());
	if (timing_)
		timing_->phase_ms[0] = sw.ms();

	/* Lloyd iterations */
	sw.restart();
	double		tol_abs = p_->tol * mean_var_;
	int32_t    *labels = lab_a_.get();
	int32_t    *labels_old = lab_b_.get();
	std::vector<unsigned long long> h_stat(stat_len());
	int64_t		escalated_total = 0;
	std::vector<double> h_shift(k_);
	bool		strict = false;
	int			it;

	CUDA_TRY(cudaMemset(labels_old, 0xff, sizeof(int32_t) * (size_t) n_));
	for (it = 0; it < p_->max_iter; it++)
	{
		unsigned long long changed = 0;
		int32_t		reseeded = 0;

		cancel_point();
		prep_centroids();
		escalated_ = 0;
		pass(true, labels, labels_old);
		escalated_total += escalated_;
		if (two_level_ && escalated_ > n_ / 4)
		{
			/* most rows need the FP32 product: go straight to it from now on */
			two_level_ = false;
			tf32_first_ = false;
		}
		finalize_kernel<<<grid_for(k_, 128, 1u << 30), 128>>>(sums_.get(), counts(), cen_f_.get(),
															  cen_.get(), k_, d_, cen_new_.get(), shifts());
		CHECK_LAUNCH("finalize_kernel");
		CUDA_TRY(cudaMemcpy(h_stat.data(), stat_.get(), sizeof(unsigned long long) * h_stat.size(),
							cudaMemcpyDeviceToHost));
		changed = h_stat[2 * (size_t) k_];

		if (std::find(h_stat.begin(), h_stat.begin() + k_, 0ull) != h_stat.begin() + k_)
		{
			/* rare: re-seed empty clusters on the host with the shared rule, then move again */
			std::vector<int32_t> h_lab(n_);
			std::vector<float> h_d2f(n_);
			std::vector<double> h_d2(n_), h_sums(kd), h_ref(kd);
			std::vector<float> h_cf(kd);
			std::vector<int64_t> h_cnt(k_), taken(k_);

			CUDA_TRY(cudaMemcpy(h_lab.data(), labels, sizeof(int32_t) * n_, cudaMemcpyDeviceToHost));
			CUDA_TRY(cudaMemcpy(h_d2f.data(), d2_.get(), sizeof(float) * n_, cudaMemcpyDeviceToHost));
			CUDA_TRY(cudaMemcpy(h_sums.data(), sums_.get(), sizeof(double) * kd, cudaMemcpyDeviceToHost));
			CUDA_TRY(cudaMemcpy(h_cf.data(), cen_f_.get(), sizeof(float) * kd, cudaMemcpyDeviceToHost));
			for (int64_t i = 0; i < n_; i++)
				h_d2[i] = h_d2f[i];
			for (size_t i = 0; i < kd; i++)
				h_ref[i] = h_cf[i];
			for (int j = 0; j < k_; j++)
				h_cnt[j] = (int64_t) h_stat[j];
			reseeded = gc_kmeans_reseed_empty(hx_, n_, d_, k_, h_lab.data(), h_d2.data(), h_ref.data(),
											  h_sums.data(), h_cnt.data(), taken.data());
			for (int j = 0; j < k_; j++)
				h_stat[j] = (unsigned long long) h_cnt[j];
			CUDA_TRY(cudaMemcpy(sums_.get(), h_sums.data(), sizeof(double) * kd, cudaMemcpyHostToDevice));
			CUDA_TRY(cudaMemcpy(counts(), h_stat.data(), sizeof(unsigned long long) * k_,
								cudaMemcpyHostToDevice));
			finalize_kernel<<<grid_for(k_, 128, 1u << 30), 128>>>(sums_.get(), counts(), cen_f_.get(),
																  cen_.get(), k_, d_, cen_new_.get(), shifts());
			CHECK_LAUNCH("finalize_kernel");
			CUDA_TRY(cudaMemcpy(h_stat.data() + k_, shifts(), sizeof(double) * k_, cudaMemcpyDeviceToHost));
		}
		memcpy(h_shift.data(), h_stat.data() + k_, sizeof(double) * k_);
		std::swap(cen_, cen_new_);

		double		shift = 0.0;

		for (int j = 0; j < k_; j++)
			shift += h_shift[j];
		if (changed == 0 && reseeded == 0)
		{
			strict = true;
			break;
		}
		if (shift <= tol_abs)
			break;
		std::swap(labels, labels_old);
	}
	result->iterations = it < p_->max_iter ? it + 1 : p_->max_iter;
	CUDA_TRY(cudaDeviceSynchronize());
	if (timing_)
	{
		timing_->phase_ms[1] = sw.ms();
		timing_->phase_ms[3] = sw.ms() / result->iterations;
	}

	/* final assignment and exact distances */
	sw.restart();
	if (!strict)
	{
		prep_centroids();
		escalated_ = 0;
		pass(false, labels, nullptr);
		escalated_total += escalated_;
	}
	if (maxd_ == 0 && timing_)
	{
		CUDA_TRY(cudaMemcpy(h_stat.data(), stat_.get(), sizeof(unsigned long long) * h_stat.size(),
							cudaMemcpyDeviceToHost));
		timing_->counts[0] = (int64_t) h_stat[2 * (size_t) k_ + 1];
		timing_->counts[1] = (int64_t) h_stat[2 * (size_t) k_ + 2];
		timing_->counts[2] = escalated_total;
	}
	{
		DeviceBuffer<double> d2x(chunk_rows_, "distances");
		int64_t		nchunks = (n_ + chunk_rows_ - 1) / chunk_rows_;

		for (int64_t c = 0; c < nchunks; c++)
		{
			int64_t		off = c * chunk_rows_;
			int64_t		rows = std::min<int64_t>(chunk_rows_, n_ - off);

			load_chunk(c);
			exact_d2_kernel<<<grid_for(rows, BLOCK, (unsigned) sms_ * 32), BLOCK>>>(
				x_.get(), rows, d_, labels + off, cen_.get(), d2x.get());
			CHECK_LAUNCH("exact_d2_kernel");
			gc::Stopwatch cp;

			CUDA_TRY(cudaMemcpy(result->distance + off, d2x.get(), sizeof(double) * rows,
								cudaMemcpyDeviceToHost));
			if (timing_)
				timing_->from_device_ms += cp.ms();
		}
	}
	{
		gc::Stopwatch cp;

		CUDA_TRY(cudaMemcpy(result->labels, labels, sizeof(int32_t) * n_, cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(result->centroids, cen_.get(), sizeof(double) * kd, cudaMemcpyDeviceToHost));
		if (timing_)
			timing_->from_device_ms += cp.ms();
	}
	for (int j = 0; j < k_; j++)
	{
		result->sizes[j] = 0;
		result->inertia[j] = 0.0;
	}
	for (int64_t i = 0; i < n_; i++)
	{
		double		s = result->distance[i];

		result->sizes[result->labels[i]]++;
		result->inertia[result->labels[i]] += s;
		result->distance[i] = sqrt(s);
	}
	if (timing_)
	{
		timing_->phase_ms[2] = sw.ms();
		timing_->compute_ms = total.ms() - timing_->to_device_ms - timing_->from_device_ms;
	}
}

} // namespace

extern "C" gc_status gcu_kmeans(int32_t device_id, const float *x, int64_t n, int32_t d,
								const gc_kmeans_params *params, gc_kmeans_result *result,
								gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	GC_ENTRY_BEGIN
	if (timing)
		memset(timing, 0, sizeof(*timing));
	if (!params || params->struct_size < sizeof(gc_kmeans_params))
		return gc::set_error(GC_ERR_INVALID_ARGUMENT, "k-means parameters of an unknown version");
	if (n < 1 || d < 1 || params->k < 1 || params->k > n || params->max_iter < 1 ||
		!(params->tol >= 0.0) || std::isinf(params->tol) ||
		(params->init == GC_KMEANS_INIT_GIVEN && !params->initial_centroids))
		return gc::set_error(GC_ERR_INVALID_ARGUMENT,
							 "invalid k-means arguments (n = %lld, d = %d, k = %d, max_iter = %d)",
							 (long long) n, d, params->k, params->max_iter);
	if (params->init != GC_KMEANS_INIT_PLUSPLUS && params->init != GC_KMEANS_INIT_RANDOM &&
		params->init != GC_KMEANS_INIT_GIVEN)
		return gc::set_error(GC_ERR_INVALID_ARGUMENT, "unknown k-means init method %d", (int) params->init);
	gc::use_device(device_id);

	KMeans		km(x, n, d, params, timing, cancel, cancel_arg);

	km.run(result);
	GC_ENTRY_END
}
