/*
 * kmeans_product.cu
 *    k-means assignment for high dimension (d > 32): ||x'||^2 - 2 x'.c' +
 *    ||c'||^2 on data and centroids centred on the data mean, the x'.c' part
 *    as a cuBLAS GEMM over tiles of rows so that the n x k matrix is never
 *    whole, then a warp-per-row argmin.
 *
 * By default (gpuclust.kmeans_precision = 'fp32') the product runs in TF32
 * on tensor cores (compute capability 8.0 and up) and is checked: a bound
 * on its error leaves a few candidate centroids per row, which are compared
 * by their distance in double, exactly as the CPU computes it.  Rows with
 * too many candidates go to an FP32 product, checked the same way (and
 * after an iteration where that was most rows, every row does).  So the
 * labels are those of the double distances to the current centroids, at
 * the cost of one TF32 GEMM.  Elsewhere the one product is FP32, checked.
 * 'tf32' runs the TF32 product unchecked: about 1e-3 relative error in x'.c'.
 */
#include <cmath>

#include "kmeans.cuh"

namespace gc {
namespace km {

namespace {

/* The GEMM form's operand: x' = x - mean in float, and ||x'||^2. */
__global__ void center_rows_kernel(const float *__restrict__ x,	/* [rows, d] */
								   int64_t rows, int d,
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

} // namespace

void center_rows(const Plan &plan, const float *x, int64_t rows, const double *mean, Product &pr)
{
	center_rows_kernel<<<grid_for(rows, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(
		x, rows, plan.d, mean, pr.xc.get(), pr.xnorm.get());
	CHECK_LAUNCH("center_rows_kernel");
}

namespace {

/* Rows list[0], ..., list[m - 1] of src side by side in dst, for the second product. */
__global__ void gather_rows_kernel(const float *__restrict__ src, int d,	/* [rows, d] */
								   const int32_t *__restrict__ list, int m,	/* [m] rows of src */
								   float *__restrict__ dst /* [m, d] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < (int64_t) m * d;
		 i += (int64_t) gridDim.x * BLOCK)
		dst[i] = src[(int64_t) list[i / d] * d + i % d];
}

/*
 * Squared distance of a row to a centroid in double, as the CPU sums it but
 * across the lanes of a warp in a fixed order; every lane gets the value.
 */
__device__ inline double warp_exact_d2(const float *__restrict__ xr,	/* [d] */
									   const double *__restrict__ c,	/* [d] */
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
 * One function: split, the scan's candidates would leave registers.
 */
template <bool REFINE>
__global__ void __launch_bounds__(BLOCK)
argmin_rows_kernel(const float *__restrict__ dots,	/* [tr, k] */
				   int64_t tr, int k,
				   const float *__restrict__ cval,	/* [k] ||c'||^2 */
				   const float *__restrict__ xnorm, /* [rows] ||x'||^2 */
				   const int32_t *__restrict__ rowmap,	/* [tr] or null */
				   const float *__restrict__ cmax2, /* [1] max ||c'||^2 (REFINE) */
				   float delta, float wfac, bool last_level,
				   const float *__restrict__ x, int d,	/* [rows, d] raw rows (REFINE) */
				   const double *__restrict__ cen,	/* [k, d] (REFINE) */
				   int32_t *__restrict__ labels,	/* [rows] out */
				   const int32_t *__restrict__ labels_old,	/* [rows] or null */
				   float *__restrict__ d2out,	/* [rows] out */
				   unsigned long long *__restrict__ changed,	/* [1] in/out */
				   unsigned long long *__restrict__ stats,	/* [2] in/out (REFINE) */
				   int32_t *__restrict__ unres, /* [rows] out (REFINE, not last level): unres_base + row */
				   unsigned int *__restrict__ unres_n,	/* [1] in/out: entries of unres */
				   int64_t unres_base)
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

/* dots [rows, k] = xrows [rows, d] . cen_cf [k, d]^T, in TF32 or FP32. */
void gemm(const Plan &plan, Product &pr, const Centroids &cen, bool tf32,
		  const float *xrows /* [rows, d] */, int rows)
{
	const float one = 1.0f,
				zero = 0.0f;

	CUBLAS_TRY(cublasGemmEx(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, plan.k, rows, plan.d, &one,
							cen.cen_cf.get(), CUDA_R_32F, plan.d, xrows, CUDA_R_32F, plan.d, &zero,
							pr.dots.get(), CUDA_R_32F, plan.k,
							tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/*
 * Argmin over the product in pr.dots for tr rows (rows rowmap[q] of the
 * tile at chunk row off, or the tile's first tr rows).  The relative error
 * of x'.c' that the check assumes: TF32 operands keep 10 of 23 mantissa
 * bits (2^-10 each, whether rounded or truncated), and an accumulation over
 * d terms loses at most 2^-22 (two units of FP32 rounding) per term, tensor
 * cores included, of the sum of |x'_t c'_t| <= ||x'|| ||c'||.
 */
void argmin_tile(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
				 const float *x /* [chunk rows, d] */, bool tf32, int64_t tr,
				 const int32_t *rowmap /* [tr] or null */, int64_t off,
				 int32_t *labels, const int32_t *labels_old, float *d2, bool last)
{
	unsigned int grid = grid_for(tr * 32, BLOCK, 1u << 30);
	int32_t    *lab = labels + off;
	const int32_t *old = labels_old ? labels_old + off : nullptr;

	if (!pr.refine)
	{
		argmin_rows_kernel<false><<<grid, BLOCK>>>(
			pr.dots.get(), tr, plan.k, cen.cval.get(), pr.xnorm.get() + off, rowmap, nullptr, 0.0f, 0.0f, true,
			nullptr, plan.d, nullptr, lab, old, d2 + off, rep.changed(), nullptr, nullptr, nullptr, 0);
		CHECK_LAUNCH("argmin_rows_kernel");
		return;
	}
	double		delta = std::ldexp((double) plan.d + 2.0, -22) +
		(tf32 ? std::ldexp(1.0, -9) + std::ldexp(1.0, -20) : 0.0);

	argmin_rows_kernel<true><<<grid, BLOCK>>>(
		pr.dots.get(), tr, plan.k, cen.cval.get(), pr.xnorm.get() + off, rowmap, cen.cmax.get(), (float) delta,
		pr.wfac, last, x + off * plan.d, plan.d, cen.cen.get(), lab, old, d2 + off, rep.changed(),
		rep.checked(), pr.unres.get(), pr.unres_n.get(), off);
	CHECK_LAUNCH("argmin_rows_kernel");
}

} // namespace

/*
 * 'fp32': a TF32 product where the device has tensor cores for it (compute
 * capability 8.0 and up), checked, with an FP32 product for the rows the
 * check leaves open; else one FP32 product, checked.  'tf32': one TF32
 * product, unchecked.  The tuning's kmeans_gemm = SGEMM forces the FP32
 * product and kmeans_window >= 1 scales the candidate window (tests and
 * benchmarks).
 */
void product_choose(Product &pr, const gc_kmeans_params &p, const gc_tuning &tuning, int cc_major)
{
	pr.refine = p.precision != GC_PRECISION_TF32;
	pr.tf32_first = !pr.refine || (cc_major >= 8 && tuning.kmeans_gemm != GC_KMEANS_GEMM_SGEMM);
	pr.two_level = pr.refine && pr.tf32_first;
	if (tuning.kmeans_window >= 1.0)
		pr.wfac = (float) (2.5 * tuning.kmeans_window);
}

void product_settle(Product &pr, int64_t n)
{
	if (pr.two_level && pr.escalated > n / 4)
	{
		/* most rows need the FP32 product: go straight to it from now on */
		pr.two_level = false;
		pr.tf32_first = false;
	}
}

void assign_product(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					const float *x, int64_t rows,
					int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec)
{
	const int	d = plan.d;

	if (pr.two_level)
		CUDA_TRY(cudaMemsetAsync(pr.unres_n.get(), 0, sizeof(unsigned int)));
	for (int64_t t0 = 0; t0 < rows; t0 += plan.gemm_tile)
	{
		int			tr = (int) std::min<int64_t>(plan.gemm_tile, rows - t0);

		if (t0 > 0)
			gc::check_cancel_synced(exec);
		gemm(plan, pr, cen, pr.tf32_first, pr.xc.get() + t0 * d, tr);
		argmin_tile(plan, pr, cen, rep, x, pr.tf32_first, tr, nullptr, t0, labels, labels_old, d2,
					!pr.two_level);
	}
	if (pr.two_level)
	{
		/* the rows the TF32 check left open, through the FP32 product */
		unsigned int m = 0;

		CUDA_TRY(cudaMemcpy(&m, pr.unres_n.get(), sizeof(m), cudaMemcpyDeviceToHost));
		for (int64_t s0 = 0; s0 < (int64_t) m; s0 += plan.gemm_tile)
		{
			int			sm = (int) std::min<int64_t>(plan.gemm_tile, (int64_t) m - s0);

			gc::check_cancel_synced(exec);
			gather_rows_kernel<<<grid_for((int64_t) sm * d, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(
				pr.xc.get(), d, pr.unres.get() + s0, sm, pr.xg.get());
			CHECK_LAUNCH("gather_rows_kernel");
			gemm(plan, pr, cen, false, pr.xg.get(), sm);
			argmin_tile(plan, pr, cen, rep, x, false, sm, pr.unres.get() + s0, 0, labels, labels_old, d2, true);
		}
		pr.escalated += m;
	}
}

} // namespace km
} // namespace gc
