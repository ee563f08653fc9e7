/*
 * kmeans_lowd.cu
 *    k-means assignment for low dimension (d <= 32): one thread per point
 *    with the point in registers (PPT points per thread), the centroids
 *    staged through shared memory in tiles, distance and argmin fused, in
 *    FP32, after Li, Zhao and Chu, "Speeding up K-Means Algorithm by GPUs".
 *    For d <= 16 and a small k * d the same kernel also adds each point into
 *    per-block partial sums in shared memory, flushed with one atomic per
 *    block and value, after Minnaar, "A CUDA Implementation of the K-Means
 *    Clustering Algorithm"; the sums are fixed-point integers, so that their
 *    total does not depend on the order of the atomics.
 */
#include "kmeans.cuh"

namespace gc {
namespace km {
namespace {

/*
 * Threads one multiprocessor holds on the architecture this pass compiles
 * for.  The host pass has no architecture and does not use the value.
 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
constexpr int SM_THREADS = 1024;
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || __CUDA_ARCH__ == 890 || \
								   (__CUDA_ARCH__ >= 1200 && __CUDA_ARCH__ < 1300))
constexpr int SM_THREADS = 1536;
#else
constexpr int SM_THREADS = 2048;		/* sm_80, sm_90, sm_100, and the host pass */
#endif

/*
 * Blocks per SM the low-d kernel asks registers for: for d <= 4 all that one
 * SM holds, at most 8 (8 on sm_80 and sm_90, 6 on sm_86 and sm_89, 4 on
 * sm_75); 0, no demand, for larger d.  Asking for more than fit (8 everywhere)
 * made ptxas warn and fall back to about this.
 */
template <int MAXD>
constexpr int lowd_min_blocks()
{
	return MAXD <= 4 ? (SM_THREADS / BLOCK < 8 ? SM_THREADS / BLOCK : 8) : 0;
}

/*
 * Assignment for d <= MAXD (MAXD in 2, 4, 8, 16, 32; features beyond d are
 * zero in both the point and the centroid, so they add nothing).
 * Direct form sum (x - c)^2 for MAXD <= 16; for MAXD == 32 the expanded form
 * ||c'||^2 - 2 x'.c' on data and centroids centred on the data mean, one
 * FMA per feature.  UPDATE (MAXD <= 16, all centroids in shared memory) also
 * adds x - c into fixed-point per-block sums.
 * One function: split, the points would leave registers between the parts.
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
				   unsigned long long *__restrict__ changed,	/* [1] in/out */
				   unsigned long long *__restrict__ gsum,	/* [k, d] fixed point, in/out (UPDATE) */
				   unsigned long long *__restrict__ gcount, /* [k] in/out (UPDATE) */
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

/* Launches assign_lowd_kernel<MAXD, UPDATE> over the chunk's rows. */
template <int MAXD, bool UPDATE>
void launch_lowd(const Plan &plan, const float *x /* [rows, d] */, int64_t rows,
				 const Centroids &cen, Sums &sums, const Report &rep,
				 int32_t *labels, const int32_t *labels_old, float *d2)
{
	constexpr bool EXPAND = MAXD >= 32;
	const int	k = plan.k;
	const int	d = plan.d;
	int			tile_k;
	size_t		smem;
	unsigned int grid;

	if (UPDATE)
	{
		int			per_sm = 0;

		tile_k = k;
		smem = (size_t) k * MAXD * 4 + (size_t) k * d * 8 + (size_t) k * 4;
		/* one wave of blocks: each flushes its sums once, and no half-empty second wave */
		CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm,
															   assign_lowd_kernel<MAXD, UPDATE>,
															   BLOCK, smem));
		grid = grid_for(rows, BLOCK * PPT, (unsigned) plan.sms * std::max(per_sm, 1));
	}
	else
	{
		tile_k = (int) std::min<size_t>(k, TILE_SMEM_MAX / ((MAXD + (EXPAND ? 1 : 0)) * 4));
		smem = (size_t) tile_k * (MAXD + (EXPAND ? 1 : 0)) * 4;
		grid = grid_for(rows, BLOCK * PPT, (unsigned) plan.sms * 64);
	}
	assign_lowd_kernel<MAXD, UPDATE><<<grid, BLOCK, smem>>>(
		x, rows, d, cen.cen_pad.get(), EXPAND ? cen.cnorm.get() : nullptr,
		EXPAND ? cen.mean_f.get() : nullptr, k, tile_k, labels, labels_old, d2,
		rep.changed(), UPDATE ? sums.fx.get() : nullptr, UPDATE ? rep.counts() : nullptr, sums.fx_scale);
	CHECK_LAUNCH("assign_lowd_kernel");
}

} // namespace

void assign_lowd(const Plan &plan, bool fused, const float *x, int64_t rows,
				 const Centroids &cen, Sums &sums, const Report &rep,
				 int32_t *labels, const int32_t *labels_old, float *d2)
{
	switch (plan.maxd)
	{
		case 2:
			fused ? launch_lowd<2, true>(plan, x, rows, cen, sums, rep, labels, labels_old, d2)
				: launch_lowd<2, false>(plan, x, rows, cen, sums, rep, labels, labels_old, d2);
			return;
		case 4:
			fused ? launch_lowd<4, true>(plan, x, rows, cen, sums, rep, labels, labels_old, d2)
				: launch_lowd<4, false>(plan, x, rows, cen, sums, rep, labels, labels_old, d2);
			return;
		case 8:
			fused ? launch_lowd<8, true>(plan, x, rows, cen, sums, rep, labels, labels_old, d2)
				: launch_lowd<8, false>(plan, x, rows, cen, sums, rep, labels, labels_old, d2);
			return;
		case 16:
			fused ? launch_lowd<16, true>(plan, x, rows, cen, sums, rep, labels, labels_old, d2)
				: launch_lowd<16, false>(plan, x, rows, cen, sums, rep, labels, labels_old, d2);
			return;
		case 32:
			launch_lowd<32, false>(plan, x, rows, cen, sums, rep, labels, labels_old, d2);
			return;
		default:
			gc::fail(GC_ERR_INTERNAL, "low-d k-means assignment for d = %d, please report a bug", plan.d);
	}
}

} // namespace km
} // namespace gc
