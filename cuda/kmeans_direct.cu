/*
 * kmeans_direct.cu
 *    k-means assignment for rows of double precision: every distance of a
 *    row to a centroid is summed in double over the features in order,
 *    without fused multiply-add, as the CPU back end sums it, so the nearest
 *    centroid (the lowest number on a tie) is the CPU's for the same
 *    centroids, whatever d.
 *
 * One block takes a tile of TR rows and walks over the centroids in tiles
 * of TC; the features of both tiles pass through shared memory in slices
 * of KT, and each thread keeps the distances of RT rows to CT centroids in
 * registers (rows ty + 16 r, centroids tx + 16 c of the tile, so that the
 * shared loads of a warp fall on distinct banks or broadcast).  Each row's
 * best centroid is then chosen among the 16 threads of its row group, the
 * lowest number on a tie.
 */
#include <climits>

#include "kmeans.cuh"

namespace gc {
namespace km {

namespace {

constexpr int DT_THREADS = 256;			/* 16 x 16 */
constexpr int RT = 4;					/* rows per thread */
constexpr int CT = 4;					/* centroids per thread */
constexpr int TR = 16 * RT;				/* rows per tile */
constexpr int TC = 16 * CT;				/* centroids per tile */
constexpr int KT = 16;					/* features per slice */

__global__ void __launch_bounds__(DT_THREADS)
assign_direct_kernel(const double *__restrict__ x,	/* [rows, d] */
					 int64_t rows, int d,
					 const double *__restrict__ cen,	/* [k, d] */
					 int k,
					 int32_t *__restrict__ labels,	/* [rows] out */
					 const int32_t *__restrict__ labels_old,	/* [rows] or null */
					 float *__restrict__ d2out, /* [rows] out */
					 unsigned long long *__restrict__ changed /* [1] in/out */ )
{
	__shared__ double xs[KT][TR];
	__shared__ double cs[KT][TC];
	const int	tid = threadIdx.x;
	const int	tx = tid & 15;
	const int	ty = tid >> 4;
	unsigned int mine = 0;

	for (int64_t r0 = (int64_t) blockIdx.x * TR; r0 < rows; r0 += (int64_t) gridDim.x * TR)
	{
		double		best[RT];
		int			bj[RT];

#pragma unroll
		for (int r = 0; r < RT; r++)
		{
			best[r] = INFINITY;
			bj[r] = INT_MAX;
		}
		for (int c0 = 0; c0 < k; c0 += TC)
		{
			double		acc[RT][CT];

#pragma unroll
			for (int r = 0; r < RT; r++)
#pragma unroll
				for (int c = 0; c < CT; c++)
					acc[r][c] = 0.0;
			for (int f0 = 0; f0 < d; f0 += KT)
			{
				int			kt = min(KT, d - f0);

				__syncthreads();
				for (int i = tid; i < TR * kt; i += DT_THREADS)
				{
					int			r = i / kt,
								t = i % kt;
					int64_t		row = r0 + r;

					xs[t][r] = row < rows ? x[row * d + f0 + t] : 0.0;
				}
				for (int i = tid; i < TC * kt; i += DT_THREADS)
				{
					int			c = i / kt,
								t = i % kt;
					int			j = c0 + c;

					cs[t][c] = j < k ? cen[(size_t) j * d + f0 + t] : 0.0;
				}
				__syncthreads();
				for (int t = 0; t < kt; t++)
				{
					double		a[RT],
								b[CT];

#pragma unroll
					for (int r = 0; r < RT; r++)
						a[r] = xs[t][ty + 16 * r];
#pragma unroll
					for (int c = 0; c < CT; c++)
						b[c] = cs[t][tx + 16 * c];
#pragma unroll
					for (int r = 0; r < RT; r++)
#pragma unroll
						for (int c = 0; c < CT; c++)
						{
							double		u = __dsub_rn(a[r], b[c]);

							acc[r][c] = __dadd_rn(acc[r][c], __dmul_rn(u, u));
						}
				}
			}
			/* this thread's centroids in increasing number: the first of equals stays */
#pragma unroll
			for (int c = 0; c < CT; c++)
			{
				int			j = c0 + tx + 16 * c;

				if (j < k)
#pragma unroll
					for (int r = 0; r < RT; r++)
						if (acc[r][c] < best[r])
						{
							best[r] = acc[r][c];
							bj[r] = j;
						}
			}
		}
		/* the 16 threads of a row group are 16 neighbouring lanes of one warp */
#pragma unroll
		for (int r = 0; r < RT; r++)
		{
			for (int o = 8; o > 0; o >>= 1)
			{
				double		ov = __shfl_xor_sync(0xffffffffu, best[r], o);
				int			oj = __shfl_xor_sync(0xffffffffu, bj[r], o);

				if (ov < best[r] || (ov == best[r] && oj < bj[r]))
				{
					best[r] = ov;
					bj[r] = oj;
				}
			}
			int64_t		row = r0 + ty + 16 * r;

			if (tx == 0 && row < rows)
			{
				int			j = bj[r] == INT_MAX ? 0 : bj[r];	/* NaN distances only: not with finite data */

				labels[row] = j;
				d2out[row] = (float) best[r];
				if (labels_old && labels_old[row] != j)
					mine++;
			}
		}
	}
	block_add(changed, mine);
}

} // namespace

void assign_direct(const Plan &plan, const double *x, int64_t rows, const double *cen, const Report &rep,
				   int32_t *labels, const int32_t *labels_old, float *d2)
{
	unsigned int grid = grid_for(rows, TR, (unsigned) plan.sms * 16);

	assign_direct_kernel<<<grid, DT_THREADS>>>(x, rows, plan.d, cen, plan.k, labels, labels_old, d2,
											   rep.changed());
	CHECK_LAUNCH("assign_direct_kernel");
}

} // namespace km
} // namespace gc
