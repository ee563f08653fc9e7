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
 * too many candidates go to a second product, checked the same way (and
 * after an iteration where that was most rows, every row does): on devices
 * with fast FP64 a DGEMM (assign_dgemm_rows, kmeans_direct.cu), whose bound
 * leaves almost every row one candidate, elsewhere an FP32 product.  So the
 * labels are those of the double distances to the current centroids, at
 * the cost of one TF32 GEMM.  Without TF32 the one product is FP32, checked.
 * 'tf32' runs the TF32 product unchecked: about 1e-3 relative error in x'.c'.
 *
 * The bound is per centroid and grows with the norms after centring; where
 * many rows lie far from the data mean next to close centroids (clustered
 * data), an iteration that sends many rows to FP32 switches the next ones
 * to tile mode: rows ordered by their labels' place in a spatial order of
 * the centroids, each tile of rows centred, with the centroids, on its own
 * centre (the mean of a sample of its rows), through one batched GEMM per
 * group of tiles.  There, on devices with fast FP64, the rows a tile leaves
 * open go to a DGEMM against the union of their candidate windows only
 * (dgemm_tiles, assign_dgemm_cols): a few hundred of k centroids, where
 * rows of one tile lie close together.
 */
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <cub/cub.cuh>

#include "kmeans.cuh"

/* Set by the Makefile from the toolkit it builds with. */
#ifndef GC_CUBLAS_SONAME
#define GC_CUBLAS_SONAME "libcublas.so"
#endif
#ifndef GC_CUBLAS_PATH
#define GC_CUBLAS_PATH GC_CUBLAS_SONAME
#endif

namespace gc {
namespace km {

namespace {

/*
 * A warp centres one row: dst = float(src - centre), feature by feature;
 * returns ||dst||^2, summed in double, on every lane.
 */
template <typename T>
__device__ inline double warp_center(const T *__restrict__ src, const double *__restrict__ centre, int d, int lane,
									 float *__restrict__ dst)
{
	double		s = 0.0;

	for (int t = lane; t < d; t += 32)
	{
		float		v = (float) ((double) src[t] - centre[t]);

		dst[t] = v;
		s += (double) v * (double) v;
	}
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	return s;
}

/* The GEMM form's operand: x' = x - mean in float, and ||x'||^2; a warp per row. */
__global__ void center_rows_kernel(const float *__restrict__ x,	/* [rows, d] */
								   int64_t rows, int d,
								   const double *__restrict__ mean,	/* [d] */
								   float *__restrict__ xc,	/* [rows, d] out */
								   float *__restrict__ xnorm /* [rows] out */ )
{
	for (int64_t i = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32; i < rows;
		 i += (int64_t) gridDim.x * (BLOCK / 32))
	{
		double		s = warp_center(x + i * d, mean, d, threadIdx.x & 31, xc + i * d);

		if ((threadIdx.x & 31) == 0)
			xnorm[i] = (float) s;
	}
}

} // namespace

void center_rows(const Plan &plan, const float *x, int64_t rows, const double *mean, Product &pr)
{
	center_rows_kernel<<<grid_for(rows * 32, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(
		x, rows, plan.d, mean, pr.xc.get(), pr.xnorm.get());
	CHECK_LAUNCH("center_rows_kernel");
}

namespace {

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
 * with x' = x - m and c' = c - m for a centre m (the data mean, or in tile
 * mode the tile's own), so ||x_r - c_j||^2 is ||x'_r||^2 + v_j with
 * v_j = ||c'_j||^2 - 2 dots[q, j].  Without REFINE the smallest v wins
 * (lowest j on a tie).
 *
 * With REFINE the product's error is bounded for each centroid:
 * |v_j + ||x'_r||^2 - D_j| <= E_j, where D_j is the distance the CPU
 * computes (double, from x and c) and
 * E_j = 2 delta ||x'_r|| ||c'_j|| + 2^-20 (||x'_r|| + ||c'_j||)^2,
 * delta the relative error of the product (rounding of the operands and the
 * accumulation over d terms) and the second term every float rounding of
 * the centring, the norms and v.  The nearest centroid is then among the
 * candidates with v_j - E_j <= min_i (v_i + E_i) (each E with a 25% margin),
 * and those are compared by D_j in double.  Each lane keeps the candidates
 * of its own columns, at most CAND_CAP of the lowest v_j - E_j; a row where a
 * lane had to let go of one inside the final window, or (below the last
 * level) with more than decide_cap candidates, goes to the list unres for
 * the next, more exact product, or, at the last level, is scanned again
 * with every candidate compared in double.
 *
 * rowmap (or null) gives the chunk row of tile row q; xnorm is indexed by q
 * when xnorm_by_q, else by the chunk row.  stats[0] counts the rows decided
 * in double, stats[1] the candidates compared.
 *
 * mark (TILED, below the last level, or null): a row left open goes to no
 * list; instead its window, every j with v_j - E_j <= min_i (v_i + E_i)
 * (the test of the last level's scan of every column, so the CPU's nearest
 * centroid and every centroid at the same distance), is marked in its
 * tile's row of mark [tiles, k], and qopen[q] is set: the DGEMM over each
 * tile's marked columns decides those rows (dgemm_tiles).
 * One function: split, the scan's candidates would leave registers.
 */
template <bool REFINE, bool TILED>
__global__ void __launch_bounds__(BLOCK)
argmin_rows_kernel(const float *__restrict__ dots,	/* [tr, k] */
				   int64_t tr, int k,
				   const float *__restrict__ cval,	/* [k] ||c'||^2, or [tr / tile_rows, k] */
				   const float *__restrict__ xnorm, /* [tr] or [rows] ||x'||^2 */
				   bool xnorm_by_q,
				   int64_t tile_rows,	/* TILED: cval and cnrm per tile of that many rows */
				   const int32_t *__restrict__ rowmap,	/* [tr] or null */
				   const float *__restrict__ cnrm,	/* [k] ||c'|| (REFINE), or per tile */
				   float delta, float wfac, bool last_level,
				   int decide_cap,	/* not last level: rows with more candidates go to unres */
				   const float *__restrict__ x, int d,	/* [rows, d] raw rows (REFINE) */
				   const double *__restrict__ cen,	/* [k, d] (REFINE) */
				   int32_t *__restrict__ labels,	/* [rows] out */
				   const int32_t *__restrict__ labels_old,	/* [rows] or null */
				   float *__restrict__ d2out,	/* [rows] out */
				   unsigned long long *__restrict__ changed,	/* [1] in/out */
				   unsigned long long *__restrict__ stats,	/* [2] in/out (REFINE) */
				   int32_t *__restrict__ unres, /* [rows] out (REFINE, not last level): unres_base + row */
				   unsigned int *__restrict__ unres_n,	/* [1] in/out: entries of unres */
				   int64_t unres_base,
				   unsigned char *__restrict__ mark,	/* [tr / tile_rows, k] in/out, or null */
				   unsigned char *__restrict__ qopen /* [tr] out (with mark) */ )
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
		float		xn = xnorm[xnorm_by_q ? q : row];

		if (TILED)
		{
			cval += (q / tile_rows) * k;
			if (REFINE)
				cnrm += (q / tile_rows) * k;
		}
		float		r = 0.0f,
					ea = 0.0f,
					eb = 0.0f;
		float		m = INFINITY;
		int			mj = 0x7fffffff;
		float		cv[CAND_CAP];
		int			cj[CAND_CAP];
		int			nc = 0;
		float		dropped = INFINITY;	/* the smallest value let go for want of room */
		float		mh = INFINITY;	/* this lane's smallest v + E */
		float		mwh = INFINITY; /* the warp's, at the last look */
		bool		over;

		if (REFINE)
		{
			/* E_j with its margin: ea ||c'_j|| + eb (r + ||c'_j||)^2 */
			r = sqrtf(xn);
			ea = 0.5f * wfac * 2.0f * delta * r;
			eb = 0.5f * wfac * ldexpf(1.0f, -20);
		}
		for (int j0 = 0; j0 < k; j0 += 32 * SCAN_BATCH)
		{
			float		v[SCAN_BATCH];
			float		e[SCAN_BATCH];

			/* the loads of a batch first, so that they are in flight together */
#pragma unroll
			for (int u = 0; u < SCAN_BATCH; u++)
			{
				int			j = j0 + 32 * u + lane;

				v[u] = j < k ? __fmaf_rn(-2.0f, dr[j], cval[j]) : INFINITY;
				if (REFINE)
				{
					float		c = j < k ? cnrm[j] : 0.0f;
					float		t = r + c;

					e[u] = j < k ? ea * c + eb * t * t : 0.0f;
				}
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
#pragma unroll
				for (int u = 0; u < SCAN_BATCH; u++)
					mh = fminf(mh, v[u] + e[u]);

				/* the window from the lowest v + E seen by this lane or, at the last look, the warp */
				float		lim_now = fminf(mh, mwh);

#pragma unroll
				for (int u = 0; u < SCAN_BATCH; u++)
					if (v[u] - e[u] <= lim_now)
						keep_candidate(cv, cj, nc, dropped, v[u] - e[u], j0 + 32 * u + lane);

				float		wm = mh;

				for (int o = 16; o > 0; o >>= 1)
					wm = fminf(wm, __shfl_xor_sync(full, wm, o));
				mwh = wm;
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
		float		bd2 = fmaxf(xn + m, 0.0f);
		bool		resolved = true;

		if (REFINE)
		{
			/* mwh: the warp's smallest v + E over every column (the last look came after the last batch) */
			float		lim = mwh;
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
			if ((over || total > decide_cap) && !last_level)
			{
				resolved = false;
				if (TILED && mark)
				{
					/* the window, marked for the DGEMM over the tile's candidates */
					unsigned char *mk = mark + (q / tile_rows) * k;

#pragma unroll 4
					for (int j = lane; j < k; j += 32)
					{
						float		c = cnrm[j];
						float		t = r + c;

						if (__fmaf_rn(-2.0f, dr[j], cval[j]) - (ea * c + eb * t * t) <= lim)
							mk[j] = 1;
					}
				}
			}
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
						bool		cand = false;

						if (j < k)
						{
							float		c = cnrm[j];
							float		t = r + c;

							cand = __fmaf_rn(-2.0f, dr[j], cval[j]) - (ea * c + eb * t * t) <= lim;
						}
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
			{
				/* the label of the product, for the order of tile mode should it start in this pass */
				if (TILED && mark)
					qopen[q] = 1;
				else
					unres[atomicAdd(unres_n, 1u)] = (int32_t) (unres_base + row);
				labels[row] = bj;
			}
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

/*
 * Tile mode.  Each tile's centre: the mean of (at most) 64 of its rows
 * spread evenly over it, in double, summed in a fixed order; any centre
 * gives the same labels (the check's bound holds for any), a near one a
 * narrow window.  Block (32 features, 8 groups of samples) per tile and 32
 * features.
 */
constexpr int TILE_SAMPLE = 64;

__global__ void tile_centres_kernel(const float *__restrict__ x, int d,	/* [rows, d] */
									const int32_t *__restrict__ perm, int64_t rows,	/* [rows] */
									int64_t step,	/* rows per tile */
									double *__restrict__ centre /* [tiles, d] out */ )
{
	__shared__ double part[8][32];
	int			t = blockIdx.y * 32 + threadIdx.x;
	int64_t		t0 = (int64_t) blockIdx.x * step;
	int64_t		tr = rows - t0 < step ? rows - t0 : step;
	int			s = tr < TILE_SAMPLE ? (int) tr : TILE_SAMPLE;
	double		sum = 0.0;

	if (t < d)
		for (int i = threadIdx.y; i < s; i += 8)
			sum += (double) x[(int64_t) perm[t0 + (int64_t) i * tr / s] * d + t];
	part[threadIdx.y][threadIdx.x] = sum;
	__syncthreads();
	if (threadIdx.y == 0 && t < d)
	{
		double		total = 0.0;

		for (int g = 0; g < 8; g++)
			total += part[g][threadIdx.x];
		centre[(int64_t) blockIdx.x * d + t] = total / s;
	}
}

/*
 * A warp per row: xt = float(x - its tile's centre) of the rows in perm
 * order, xtn = ||xt||^2.  With step = rows, one centre for all: the rows
 * the TF32 check left open, gathered for the FP32 product (the same values
 * as center_rows_kernel gives).
 */
__global__ void center_tile_rows_kernel(const float *__restrict__ x, int d,	/* [rows, d] */
										const int32_t *__restrict__ perm, int64_t rows,	/* [rows] */
										int64_t step,
										const double *__restrict__ centre,	/* [tiles, d] */
										float *__restrict__ xt, /* [rows, d] out */
										float *__restrict__ xtn /* [rows] out */ )
{
	int64_t		q = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;

	if (q >= rows)
		return;
	double		s = warp_center(x + (int64_t) perm[q] * d, centre + (q / step) * d, d, lane, xt + q * d);

	if (lane == 0)
		xtn[q] = (float) s;
}

/*
 * A warp per (tile, centroid) of a group of tiles: ct = float(c - the
 * tile's centre), cval = ||ct||^2, cnrm = ||ct||.
 */
__global__ void center_tile_centroids_kernel(const double *__restrict__ cen, int k, int d,	/* [k, d] */
											 const double *__restrict__ centre, int tiles,	/* [tiles, d] */
											 float *__restrict__ ct,	/* [tiles, k, d] out */
											 float *__restrict__ cval,	/* [tiles, k] out */
											 float *__restrict__ cnrm /* [tiles, k] out */ )
{
	int64_t		w = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;

	if (w >= (int64_t) tiles * k)
		return;
	double		s = warp_center(cen + (w % k) * d, centre + (w / k) * d, d, lane, ct + w * d);

	if (lane == 0)
	{
		cval[w] = (float) s;
		cnrm[w] = (float) sqrt(s);
	}
}

/* Tile mode's sort keys: each row's label's rank (rows without a label last), and 0, 1, ... */
__global__ void rank_keys_kernel(const int32_t *__restrict__ hint, int64_t n,	/* [n] labels */
								 const int32_t *__restrict__ rank, int k,	/* [k] */
								 uint32_t *__restrict__ keys,	/* [n] out */
								 int32_t *__restrict__ iota /* [n] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < n; i += (int64_t) gridDim.x * BLOCK)
	{
		int32_t		h = hint[i];

		keys[i] = h >= 0 && h < k ? (uint32_t) rank[h] : 0xffffffffu;
		iota[i] = (int32_t) i;
	}
}

/*
 * Sums over d terms in eight interleaved single-precision partial sums (the
 * host compiler vectorizes them): the order only guides tile mode, so its
 * arithmetic need not be the CPU's, only the same from one run to the next.
 */
static float host_d2f(const float *a, const float *b, int d)
{
	float		acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int			t = 0;

	for (; t + 8 <= d; t += 8)
		for (int u = 0; u < 8; u++)
		{
			float		v = a[t + u] - b[t + u];

			acc[u] += v * v;
		}
	for (; t < d; t++)
	{
		float		v = a[t] - b[t];

		acc[0] += v * v;
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static float host_dotf(const float *a, const float *b, int d)
{
	float		acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	int			t = 0;

	for (; t + 8 <= d; t += 8)
		for (int u = 0; u < 8; u++)
			acc[u] += a[t + u] * b[t + u];
	for (; t < d; t++)
		acc[0] += a[t] * b[t];
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/*
 * Tile mode: a spatial order of the k centroids c [k, d] (rank[j] = place
 * of centroid j): each part is halved at the median of its projection on
 * the line through two far-apart centroids of it (the farthest from its
 * first one, and the farthest from that), down to parts of 16, so that
 * centroids of consecutive ranks lie close together.  Only the speed of
 * tile mode depends on it; it works on single-precision copies.
 */
void centroid_ranks(const std::vector<double> &c, int k, int d, std::vector<int32_t> &rank, const gc_exec &exec)
{
	int64_t		work = 0;			/* coordinates read since the last look at cancel */

	std::vector<float> cf(c.begin(), c.end());
	std::vector<float> dir(d);
	std::vector<int32_t> idx(k);
	std::vector<float> proj(k);
	std::vector<std::pair<int, int>> parts;
	auto		row = [&](int j) { return cf.data() + (size_t) j * d; };

	for (int j = 0; j < k; j++)
		idx[j] = j;
	parts.push_back({0, k});
	while (!parts.empty())
	{
		auto [lo, hi] = parts.back();

		parts.pop_back();
		if (hi - lo <= 16)
			continue;
		work += (int64_t) 3 * (hi - lo) * d;
		if (work >= (int64_t) 1 << 26)
		{
			gc::check_cancel(exec);
			work = 0;
		}

		int			a = idx[lo],
					b = a;
		float		far = -1.0f;

		for (int p = lo; p < hi; p++)
		{
			float		v = host_d2f(row(a), row(idx[p]), d);

			if (v > far)
			{
				far = v;
				b = idx[p];
			}
		}
		a = b;
		far = -1.0f;
		for (int p = lo; p < hi; p++)
		{
			float		v = host_d2f(row(b), row(idx[p]), d);

			if (v > far)
			{
				far = v;
				a = idx[p];
			}
		}
		for (int t = 0; t < d; t++)
			dir[t] = row(a)[t] - row(b)[t];
		for (int p = lo; p < hi; p++)
		{
			float		v = host_dotf(row(idx[p]), dir.data(), d);

			/* coordinates near the float limit overflow: a NaN sorts last, so the order stays strict */
			proj[idx[p]] = std::isnan(v) ? INFINITY : v;
		}

		int			mid = lo + (hi - lo) / 2;

		std::nth_element(idx.begin() + lo, idx.begin() + mid, idx.begin() + hi, [&](int32_t u, int32_t v) {
			return proj[u] < proj[v] || (proj[u] == proj[v] && u < v);
		});
		parts.push_back({lo, mid});
		parts.push_back({mid, hi});
	}
	rank.assign(k, 0);
	for (int p = 0; p < k; p++)
		rank[idx[p]] = p;
}

/* dots [rows, k] = xrows [rows, d] . cen [k, d]^T, in TF32 or FP32. */
void gemm(const Plan &plan, Product &pr, const float *cen /* [k, d] */, bool tf32,
		  const float *xrows /* [rows, d] */, int rows)
{
	const float one = 1.0f,
				zero = 0.0f;

	CUBLAS_TRY(cublas.gemm_ex(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, plan.k, rows, plan.d, &one,
							cen, CUDA_R_32F, plan.d, xrows, CUDA_R_32F, plan.d, &zero,
							pr.dots.get(), CUDA_R_32F, plan.k,
							tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/*
 * dots [tiles, step, k] = xrows [tiles, step, d] . cen [tiles, k, d]^T, tile
 * by tile, in TF32 or FP32 (tile mode).
 */
void gemm_tiles(const Plan &plan, Product &pr, const float *cen, bool tf32, const float *xrows, int step,
				int tiles)
{
	const float one = 1.0f,
				zero = 0.0f;

	CUBLAS_TRY(cublas.gemm_strided_batched_ex(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, plan.k, step, plan.d, &one,
										  cen, CUDA_R_32F, plan.d, (long long) plan.k * plan.d,
										  xrows, CUDA_R_32F, plan.d, (long long) step * plan.d, &zero,
										  pr.dots.get(), CUDA_R_32F, plan.k, (long long) step * plan.k, tiles,
										  tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
										  CUBLAS_GEMM_DEFAULT));
}

/* The operands' norms of one product: ||c'||^2 and ||c'|| of the centroids, ||x'||^2 of the rows. */
struct Norms
{
	const float *cval;					/* [k] */
	const float *cnrm;					/* [k] */
	const float *xnorm;					/* [tr] when by_q, else [chunk rows] */
	bool		by_q;
	int64_t		tile_rows;				/* > 0: cval and cnrm per tile of that many rows */
};

/*
 * Argmin over the product in pr.dots for tr rows (rows rowmap[q] of the
 * tile at chunk row off, or the tile's first tr rows).  The relative error
 * of x'.c' that the check assumes: TF32 operands keep 10 of 23 mantissa
 * bits (2^-10 each, whether rounded or truncated), and an accumulation over
 * d terms loses at most 2^-22 (two units of FP32 rounding) per term, tensor
 * cores included, of the sum of |x'_t c'_t| <= ||x'|| ||c'||.
 */
void argmin_tile(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep, const Norms &nm,
				 const float *x /* [chunk rows, d] */, bool tf32, int64_t tr,
				 const int32_t *rowmap /* [tr] or null */, int64_t off,
				 int32_t *labels, const int32_t *labels_old, float *d2, bool last, bool mark = false)
{
	unsigned int grid = grid_for(tr * 32, BLOCK, 1u << 30);
	int32_t    *lab = labels + off;
	const int32_t *old = labels_old ? labels_old + off : nullptr;
	const float *xn = nm.by_q ? nm.xnorm : nm.xnorm + off;

	/* the kernel without tiles stays as lean as it was: the scan is bound by its loads */
	auto		kern_plain = nm.tile_rows > 0 ? argmin_rows_kernel<false, true> : argmin_rows_kernel<false, false>;
	auto		kern_refine = nm.tile_rows > 0 ? argmin_rows_kernel<true, true> : argmin_rows_kernel<true, false>;

	if (!pr.refine)
	{
		kern_plain<<<grid, BLOCK>>>(
			pr.dots.get(), tr, plan.k, nm.cval, xn, nm.by_q, nm.tile_rows, rowmap, nullptr, 0.0f, 0.0f, true,
			0x7fffffff, nullptr, plan.d, nullptr, lab, old, d2 + off, rep.changed(), nullptr, nullptr, nullptr, 0,
			nullptr, nullptr);
		CHECK_LAUNCH("argmin_rows_kernel");
		return;
	}
	double		delta = std::ldexp((double) plan.d + 2.0, -22) +
		(tf32 ? std::ldexp(1.0, -9) + std::ldexp(1.0, -20) : 0.0);

	kern_refine<<<grid, BLOCK>>>(
		pr.dots.get(), tr, plan.k, nm.cval, xn, nm.by_q, nm.tile_rows, rowmap, nm.cnrm, (float) delta,
		pr.wfac, last, pr.decide_cap, x + off * plan.d, plan.d, cen.cen.get(), lab, old, d2 + off, rep.changed(),
		rep.checked(), pr.unres.get(), pr.unres_n.get(), off, mark ? pr.cmark.get() : nullptr,
		mark ? pr.qopen.get() : nullptr);
	CHECK_LAUNCH("argmin_rows_kernel");
}

constexpr int CT_THREADS = 512;			/* threads of compact_tiles_kernel */
constexpr int CT_ITEMS = 8;				/* flags per thread and step */

/*
 * Block-wide compaction of the flags f[0 .. len) in increasing index: the
 * flagged indices i go to out[0 ..) as val(i), the flags are cleared;
 * returns the count (every thread).
 */
template <typename Val>
__device__ int compact_flags(unsigned char *__restrict__ f, int64_t len, int32_t *__restrict__ out, Val val)
{
	using Scan = cub::BlockScan<int, CT_THREADS>;
	__shared__ typename Scan::TempStorage tmp;
	int			base = 0;

	for (int64_t i0 = 0; i0 < len; i0 += CT_THREADS * CT_ITEMS)
	{
		int64_t		ib = i0 + (int64_t) threadIdx.x * CT_ITEMS;
		unsigned char fl[CT_ITEMS];
		int			c = 0,
					pos = 0,
					all = 0;

#pragma unroll
		for (int u = 0; u < CT_ITEMS; u++)
		{
			fl[u] = ib + u < len ? f[ib + u] : 0;
			c += fl[u] != 0;
		}
		Scan(tmp).ExclusiveSum(c, pos, all);
#pragma unroll
		for (int u = 0; u < CT_ITEMS; u++)
			if (fl[u])
			{
				f[ib + u] = 0;
				out[base + pos++] = val(ib + u);
			}
		base += all;
		__syncthreads();		/* tmp again */
	}
	return base;
}

/*
 * The DGEMM level of tile mode, after the group's argmin: a block per tile
 * of the group lists its marked candidates (increasing centroid numbers,
 * cols [tiles, k]) and its open rows (chunk rows, in the tile's order, at
 * orows + t * step), clears both sets of flags for the next group, and
 * writes their counts, count[t] and count[tiles + t].
 */
__global__ void __launch_bounds__(CT_THREADS)
compact_tiles_kernel(unsigned char *__restrict__ mark, int k,	/* [tiles, k] */
					 unsigned char *__restrict__ qopen,	/* [rows] */
					 const int32_t *__restrict__ perm, int64_t rows, int64_t step,	/* [rows] */
					 int32_t *__restrict__ cols,	/* [tiles, k] out */
					 int32_t *__restrict__ orows,	/* [rows] out */
					 int32_t *__restrict__ count,	/* [2, tiles] out */
					 int tiles)
{
	const int	t = blockIdx.x;
	const int64_t q0 = (int64_t) t * step;
	const int64_t len = rows - q0 < step ? rows - q0 : step;
	int			u,
				o;

	u = compact_flags(mark + (size_t) t * k, k, cols + (size_t) t * k, [](int64_t j) { return (int32_t) j; });
	o = compact_flags(qopen + q0, len, orows + q0, [=](int64_t q) { return perm[q0 + q]; });
	if (threadIdx.x == 0)
	{
		count[t] = u;
		count[tiles + t] = o;
	}
}

/*
 * Tile mode: pr.perm = the chunk's rows ordered by the rank of their label
 * in hint (stable: by row within a label); the ranks of the run's
 * centroids are taken at the first pass in tile mode.
 */
void order_rows(const Plan &plan, Product &pr, const Centroids &cen, const int32_t *hint, int64_t rows,
				const gc_exec &exec)
{
	size_t		bytes = pr.psort_bytes;

	if (!pr.ranked)
	{
		std::vector<double> c((size_t) plan.k * plan.d);
		std::vector<int32_t> rank;

		CUDA_TRY(cudaMemcpy(c.data(), cen.cen.get(), sizeof(double) * c.size(), cudaMemcpyDeviceToHost));
		centroid_ranks(c, plan.k, plan.d, rank, exec);
		CUDA_TRY(cudaMemcpy(pr.rank.get(), rank.data(), sizeof(int32_t) * plan.k, cudaMemcpyHostToDevice));
		pr.ranked = true;
	}
	rank_keys_kernel<<<grid_for(rows, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(
		hint, rows, pr.rank.get(), plan.k, reinterpret_cast<uint32_t *>(pr.pkin.get()), pr.piota.get());
	CHECK_LAUNCH("rank_keys_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(pr.psort_tmp.get(), bytes,
											 reinterpret_cast<const uint32_t *>(pr.pkin.get()),
											 reinterpret_cast<uint32_t *>(pr.pkeys.get()),
											 pr.piota.get(), pr.perm.get(), (int) rows));
}

/*
 * The DGEMM level of tile mode for the group of ntiles tiles at perm (gr
 * rows), after its argmin marked the open rows and their windows: per tile,
 * a DGEMM of its open rows against its marked centroids only
 * (assign_dgemm_cols).  Rows of one tile lie close together (ordered by
 * their labels in a spatial order of the centroids), so the union of their
 * windows is a small part of k; a centroid outside it is outside every
 * window of the tile's rows, so farther from each of them than its nearest
 * (the TF32 check's bound), and the labels are those of the DGEMM of every
 * centroid.  A tile whose union holds more than k / 4 centroids takes that
 * DGEMM instead (assign_dgemm_rows).  The counts come to the host (the
 * group loop waits for the device anyway, at its look at cancel).
 */
void dgemm_tiles(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep, const float *x,
				 const int32_t *perm, int64_t gr, int ntiles, int32_t *labels, const int32_t *labels_old,
				 float *d2, const gc_exec &exec)
{
	const int	k = plan.k;
	const int64_t step = pr.tile_step;

	compact_tiles_kernel<<<ntiles, CT_THREADS>>>(pr.cmark.get(), k, pr.qopen.get(), perm, gr, step,
												 pr.tcols.get(), pr.trows.get(), pr.tcount.get(), ntiles);
	CHECK_LAUNCH("compact_tiles_kernel");
	CUDA_TRY(cudaMemcpy(pr.tcount_h.data(), pr.tcount.get(), sizeof(int32_t) * 2 * ntiles,
						cudaMemcpyDeviceToHost));
	for (int t = 0; t < ntiles; t++)
	{
		const int	u = pr.tcount_h[t];
		const int64_t open = pr.tcount_h[ntiles + t];
		const int32_t *rws = pr.trows.get() + t * step;

		if (open == 0)
			continue;
		if (u == 0 || u > k / 4)
		{
			/* a wide union (or NaN products: none marked) */
			assign_dgemm_rows(plan, pr, cen, rep, x, rws, open, labels, labels_old, d2, exec);
			pr.escalated_full += open;
		}
		else
			assign_dgemm_cols(plan, pr, cen, rep, x, rws, open, pr.tcols.get() + (size_t) t * k, u, labels,
							  labels_old, d2);
		pr.escalated += open;
	}
}

} // namespace

/*
 * 'fp32': a TF32 product where the device has tensor cores for it (compute
 * capability 8.0 and up), checked, with a second product for the rows the
 * check leaves open: a DGEMM where the device has fast FP64 (FP64 tensor
 * cores), else an FP32 product; without TF32, one FP32 product, checked.
 * 'tf32': one TF32 product, unchecked.  The tuning's kmeans_gemm = SGEMM
 * forces the FP32 product, TF32_FP32 the FP32 second level, and
 * kmeans_window >= 1 scales the candidate window (tests and benchmarks).
 *
 * With the DGEMM level, the TF32 check decides in double only the rows with
 * at most decide_cap candidates and sends the others to the DGEMM: a
 * candidate compared in double costs a warp a read of the centroid and d
 * multiply-adds, the DGEMM 2 k d flops a row on the FP64 tensor cores and
 * a read of its k products, so the break-even grows with k.  Measured on an
 * H100 (bench/kmeans_bench.sh gemm): 1M x 256 blobs at k = 20000, about 100
 * candidates a row, 3.6 ns a candidate against 0.19 us a row of the DGEMM
 * (about 50 candidates); 1M x 768 embedding-like blobs at k = 1024, about
 * 10 candidates a row, 1.5 ns a candidate against 28 ns a row of the full
 * DGEMM (about 18 by the flops), yet k / 48 (21) sent 1 % of the rows to the
 * DGEMM and cost 18.0 ms an iteration against 16.5 with none (the DGEMM of
 * a few open rows costs more than its flops): k / 16, 4 to 64.  (In tile
 * mode the DGEMM level takes only each tile's candidates and costs a row
 * about one more read of its TF32 products; the cap is the same.)
 */
void product_choose(Product &pr, const gc_kmeans_params &p, const gc_tuning &tuning, int cc_major, bool fast_fp64,
					int k)
{
	pr.refine = p.precision != GC_PRECISION_TF32;
	pr.tf32_first = !pr.refine || (cc_major >= 8 && tuning.kmeans_gemm != GC_KMEANS_GEMM_SGEMM);
	pr.two_level = pr.refine && pr.tf32_first;
	pr.dgemm = pr.two_level && fast_fp64 && tuning.kmeans_gemm == GC_KMEANS_GEMM_AUTO;
	pr.dgemm_all = false;
	pr.decide_cap = pr.dgemm ? std::min(64, std::max(4, k / 16)) : 0x7fffffff;
	if (tuning.kmeans_window >= 1.0)
		pr.wfac = (float) (2.5 * tuning.kmeans_window);
}

CublasApi	cublas;

#define GC_STR_(x) #x
#define GC_STR(x) GC_STR_(x)	/* the name after cublas_v2.h's macros (cublasCreate_v2, ...) */

/* The pointers' types are those of the header's declarations (unevaluated: nothing is linked). */
static_assert(sizeof(static_cast<decltype(CublasApi::gemm_ex)>(&cublasGemmEx)) > 0, "cublasGemmEx");
static_assert(sizeof(static_cast<decltype(CublasApi::gemm_strided_batched_ex)>(&cublasGemmStridedBatchedEx)) > 0,
			  "cublasGemmStridedBatchedEx");

/* Loads cuBLAS once per process: the library of the build's toolkit, else the one the loader finds. */
static void cublas_load()
{
	static bool	loaded = false;
	void	   *lib;

	if (loaded)
		return;
	gc::Stopwatch sw;

	lib = dlopen(GC_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		lib = dlopen(GC_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		gc::fail(GC_ERR_CUDA, "cuBLAS could not be loaded (%s, then %s): %s", GC_CUBLAS_PATH,
				 GC_CUBLAS_SONAME, dlerror());
	cublas.create = (decltype(cublas.create)) dlsym(lib, GC_STR(cublasCreate));
	cublas.gemm_ex = (decltype(cublas.gemm_ex)) dlsym(lib, GC_STR(cublasGemmEx));
	cublas.gemm_strided_batched_ex =
		(decltype(cublas.gemm_strided_batched_ex)) dlsym(lib, GC_STR(cublasGemmStridedBatchedEx));
	cublas.dgemm = (decltype(cublas.dgemm)) dlsym(lib, GC_STR(cublasDgemm));
	if (!cublas.create || !cublas.gemm_ex || !cublas.gemm_strided_batched_ex || !cublas.dgemm)
		gc::fail(GC_ERR_CUDA, "cuBLAS (%s) lacks an entry point gpuclust calls: %s", GC_CUBLAS_SONAME,
				 dlerror());
	loaded = true;
	gc::note_init(GC_INIT_CUBLAS, sw.ms());
}

void Cublas::open()
{
	static cublasHandle_t handles[64];
	int			dev = 0;

	cublas_load();
	CUDA_TRY(cudaGetDevice(&dev));
	if (dev < 0 || dev >= 64)
		gc::fail(GC_ERR_INTERNAL, "device %d: gpuclust keeps cuBLAS handles for devices 0 to 63", dev);
	if (!handles[dev])
	{
		gc::Stopwatch sw;

		CUBLAS_TRY(cublas.create(&handles[dev]));
		gc::note_init(GC_INIT_CUBLAS, sw.ms());
	}
	h = handles[dev];
}

void product_settle(Product &pr, int64_t n)
{
	if (!pr.two_level)
		return;
	if (!pr.tile_mode && pr.escalated > n / 32)
	{
		/* rows far from the data mean next to close centroids: centre each tile on its own */
		pr.tile_mode = true;
	}
	else if (pr.dgemm && pr.escalated_full > n / 4 * 3)
	{
		/*
		 * most rows need the DGEMM of every centroid: every row straight to
		 * it from now on (below three quarters, the TF32 product and the
		 * DGEMM of the open rows cost less than the DGEMM of all; rows that
		 * tile mode sends to the DGEMM of their tile's candidates do not
		 * count, that one costs a small part of it)
		 */
		pr.two_level = false;
		pr.dgemm_all = true;
	}
	else if (!pr.dgemm && pr.escalated > n / 4)
	{
		/* most rows need the FP32 product: go straight to it from now on */
		pr.two_level = false;
		pr.tf32_first = false;
	}
}

/* The tile mode's buffers for chunks of plan.chunk_rows rows, when it starts. */
static void product_tile_buffers(const Plan &plan, Product &pr)
{
	const int64_t chunk = plan.chunk_rows;
	size_t		bytes = 0;

	pr.tile_step = std::min<int64_t>(plan.gemm_tile, std::max<int64_t>(4096, 4 * plan.n / plan.k));
	pr.group_tiles = (int) std::max<int64_t>(1, plan.gemm_tile / pr.tile_step);
	pr.perm.reset(chunk, "rows by label");
	pr.pkin.reset(chunk, "rows by label");
	pr.pkeys.reset(chunk, "rows by label");
	pr.piota.reset(chunk, "rows by label");
	pr.rank.reset(plan.k, "centroid order");
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint32_t *) nullptr, (uint32_t *) nullptr,
											 (const int32_t *) nullptr, (int32_t *) nullptr, (int) chunk));
	pr.psort_bytes = bytes;
	pr.psort_tmp.reset(bytes, "rows by label");
	pr.tmean.reset((size_t) pr.group_tiles * plan.d, "tile centres");
	pr.xtn.reset(chunk, "row norms");
	pr.cen_t.reset((size_t) pr.group_tiles * plan.k * plan.d, "centroids");
	pr.cval_t.reset((size_t) pr.group_tiles * plan.k, "centroid norms");
	pr.cnrm_t.reset((size_t) pr.group_tiles * plan.k, "centroid norms");
	if (pr.dgemm)
	{
		const int64_t grows = pr.tile_step * pr.group_tiles;
		const int	ucap = std::max(1, plan.k / 4);

		pr.cmark.reset((size_t) pr.group_tiles * plan.k, "candidate marks");
		pr.qopen.reset(grows, "candidate marks");
		CUDA_TRY(cudaMemset(pr.cmark.get(), 0, (size_t) pr.group_tiles * plan.k));
		CUDA_TRY(cudaMemset(pr.qopen.get(), 0, (size_t) grows));
		pr.tcols.reset((size_t) pr.group_tiles * plan.k, "tile candidates");
		pr.trows.reset(grows, "tile candidates");
		pr.tcount.reset(2 * (size_t) pr.group_tiles, "tile candidates");
		pr.tcount_h.assign(2 * (size_t) pr.group_tiles, 0);
		pr.cen_g.reset((size_t) ucap * plan.d, "tile candidates");
		pr.cval_g.reset(ucap, "tile candidates");
	}
}

void assign_product(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					const float *x, int64_t rows,
					int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec,
					const int32_t *hint)
{
	const int	d = plan.d;
	const int	k = plan.k;
	const bool	tiles = pr.tile_mode;

	if (pr.dgemm_all)
	{
		/* most rows were left open by the TF32 check: every row through the DGEMM */
		assign_dgemm_rows(plan, pr, cen, rep, x, nullptr, rows, labels, labels_old, d2, exec);
		pr.escalated += rows;
		pr.escalated_full += rows;
		return;
	}
	if (pr.two_level)
		CUDA_TRY(cudaMemsetAsync(pr.unres_n.get(), 0, sizeof(unsigned int)));
	if (pr.two_level && !tiles)
	{
		/* the pass's counts before this chunk, should tile mode start in it (below) */
		if (!pr.counts_before.get())
			pr.counts_before.reset(3, "k-means counts");
		CUDA_TRY(cudaMemcpyAsync(pr.counts_before.get(), rep.changed(), 3 * sizeof(unsigned long long),
								 cudaMemcpyDeviceToDevice));
	}
	if (tiles)
	{
		/*
		 * Tile mode: the rows by their labels' spatial order, in tiles of
		 * about 4 clusters' rows (at least 4,096), each tile's rows and
		 * centroids centred on the tile; the tiles of a group of
		 * pr.group_tiles go through one batched GEMM.
		 */
		if (!pr.perm.get())
			product_tile_buffers(plan, pr);

		/* the rows left open through the DGEMM over each tile's candidates (dgemm_tiles) */
		const bool	narrow = pr.two_level && pr.dgemm;
		const int64_t step = pr.tile_step;
		const int64_t group_rows = step * pr.group_tiles;
		const int32_t *perm = pr.perm.get();

		order_rows(plan, pr, cen, hint, rows, exec);
		for (int64_t g0 = 0; g0 < rows; g0 += group_rows)
		{
			int64_t		gr = std::min<int64_t>(group_rows, rows - g0);
			int			ntiles = (int) ((gr + step - 1) / step);
			int			full = (int) (gr / step);
			dim3		cb(32, 8);

			if (g0 > 0)
				gc::check_cancel_synced(exec);
			tile_centres_kernel<<<dim3(ntiles, (d + 31) / 32), cb>>>(x, d, perm + g0, gr, step, pr.tmean.get());
			CHECK_LAUNCH("tile_centres_kernel");
			center_tile_rows_kernel<<<grid_for(gr * 32, BLOCK, 1u << 30), BLOCK>>>(
				x, d, perm + g0, gr, step, pr.tmean.get(), pr.xc.get() + g0 * d, pr.xtn.get() + g0);
			CHECK_LAUNCH("center_tile_rows_kernel");
			center_tile_centroids_kernel<<<grid_for((int64_t) ntiles * k * 32, BLOCK, 1u << 30), BLOCK>>>(
				cen.cen.get(), k, d, pr.tmean.get(), ntiles, pr.cen_t.get(), pr.cval_t.get(), pr.cnrm_t.get());
			CHECK_LAUNCH("center_tile_centroids_kernel");
			if (full > 0)
				gemm_tiles(plan, pr, pr.cen_t.get(), pr.tf32_first, pr.xc.get() + g0 * d, (int) step, full);
			if (full < ntiles)
			{
				/* the chunk's last tile, shorter */
				const float one = 1.0f,
							zero = 0.0f;

				CUBLAS_TRY(cublas.gemm_ex(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, k, (int) (gr - full * step), d, &one,
										pr.cen_t.get() + (size_t) full * k * d, CUDA_R_32F, d,
										pr.xc.get() + (g0 + full * step) * d, CUDA_R_32F, d, &zero,
										pr.dots.get() + (size_t) full * step * k, CUDA_R_32F, k,
										pr.tf32_first ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
										CUBLAS_GEMM_DEFAULT));
			}

			const Norms local = {pr.cval_t.get(), pr.cnrm_t.get(), pr.xtn.get() + g0, true, step};

			argmin_tile(plan, pr, cen, rep, local, x, pr.tf32_first, gr, perm + g0, 0, labels, labels_old, d2,
						!pr.two_level, narrow);
			if (narrow)
				dgemm_tiles(plan, pr, cen, rep, x, perm + g0, gr, ntiles, labels, labels_old, d2, exec);
		}
	}
	else
	{
		const Norms global = {cen.cval.get(), cen.cnrm.get(), pr.xnorm.get(), false, 0};

		for (int64_t t0 = 0; t0 < rows; t0 += plan.gemm_tile)
		{
			int			tr = (int) std::min<int64_t>(plan.gemm_tile, rows - t0);

			if (t0 > 0)
				gc::check_cancel_synced(exec);
			gemm(plan, pr, cen.cen_cf.get(), pr.tf32_first, pr.xc.get() + t0 * d, tr);
			argmin_tile(plan, pr, cen, rep, global, x, pr.tf32_first, tr, nullptr, t0, labels, labels_old, d2,
						!pr.two_level);
		}
	}
	if (pr.two_level)
	{
		/* the rows the TF32 check left open, through the second product, centred on the data mean */
		unsigned int m = 0;

		CUDA_TRY(cudaMemcpy(&m, pr.unres_n.get(), sizeof(m), cudaMemcpyDeviceToHost));
		if (!tiles && plan.resident && (int64_t) m > rows / 4)
		{
			/*
			 * Most rows left open (rows far from the data mean next to close
			 * centroids, typically the first pass on clustered data): tile
			 * mode from this pass on, ordered by the labels of the product
			 * just taken (every row has one), costs less than the FP32
			 * product for those rows.  The pass's counts go back to what
			 * they were before the chunk, and the chunk runs again.
			 */
			CUDA_TRY(cudaMemcpyAsync(rep.changed(), pr.counts_before.get(), 3 * sizeof(unsigned long long),
									 cudaMemcpyDeviceToDevice));
			pr.tile_mode = true;
			assign_product(plan, pr, cen, rep, x, rows, labels, labels_old, d2, exec, labels);
			return;
		}
		if (pr.dgemm && m > 0)
		{
			assign_dgemm_rows(plan, pr, cen, rep, x, pr.unres.get(), m, labels, labels_old, d2, exec);
			pr.escalated_full += m;
		}
		for (int64_t s0 = 0; !pr.dgemm && s0 < (int64_t) m; s0 += plan.gemm_tile)
		{
			int			sm = (int) std::min<int64_t>(plan.gemm_tile, (int64_t) m - s0);
			const Norms global = {cen.cval.get(), cen.cnrm.get(), pr.xg_norm.get(), true, 0};

			gc::check_cancel_synced(exec);
			center_tile_rows_kernel<<<grid_for((int64_t) sm * 32, BLOCK, 1u << 30), BLOCK>>>(
				x, d, pr.unres.get() + s0, sm, sm, cen.mean_d.get(), pr.xg.get(), pr.xg_norm.get());
			CHECK_LAUNCH("center_tile_rows_kernel");
			gemm(plan, pr, cen.cen_cf.get(), false, pr.xg.get(), sm);
			argmin_tile(plan, pr, cen, rep, global, x, false, sm, pr.unres.get() + s0, 0, labels, labels_old, d2,
						true);
		}
		pr.escalated += m;
	}
}

} // namespace km
} // namespace gc
