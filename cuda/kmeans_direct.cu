/*
 * kmeans_direct.cu
 *    k-means assignment for rows of double precision, in two forms: for
 *    d <= 32 the direct one below, for d > 32 a checked DGEMM product (at
 *    the end of the file), which gives the same labels.  The same DGEMM,
 *    on rows of single precision made double, is the exact level of the
 *    single-precision product on devices with fast FP64 (assign_dgemm_rows;
 *    in tile mode over each tile's candidates only, assign_dgemm_cols).
 *
 * The direct form: every distance of a
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

/* ---------------------------------------------------------------- the DGEMM form, d > 32 */

namespace {

/* x' = x - mean in double, and ||x'||^2 summed in order. */
__global__ void center_rows64_kernel(const double *__restrict__ x,	/* [rows, d] */
									 int64_t rows, int d,
									 const double *__restrict__ mean,	/* [d] */
									 double *__restrict__ xc,	/* [rows, d] out */
									 double *__restrict__ xnorm /* [rows] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < rows;
		 i += (int64_t) gridDim.x * BLOCK)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = __dsub_rn(x[i * d + j], mean[j]);

			xc[i * d + j] = t;
			s = __dadd_rn(s, __dmul_rn(t, t));
		}
		xnorm[i] = s;
	}
}

/* c' = c - mean, ||c'||^2, and the largest into cmax (non-negative doubles order as their bits). */
__global__ void prep_centroids64_kernel(const double *__restrict__ cen,	/* [k, d] */
										int k, int d,
										const double *__restrict__ mean,	/* [d] */
										double *__restrict__ cen_cd,	/* [k, d] out */
										double *__restrict__ cval,	/* [k] out */
										unsigned long long *__restrict__ cmax /* [1] in/out */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	double		nn = 0.0;

	for (int t = 0; t < d; t++)
	{
		double		c = __dsub_rn(cen[(size_t) j * d + t], mean[t]);

		cen_cd[(size_t) j * d + t] = c;
		nn = __dadd_rn(nn, __dmul_rn(c, c));
	}
	cval[j] = nn;
	atomicMax(cmax, (unsigned long long) __double_as_longlong(nn));
}

/*
 * Argmin over a tile of the DGEMM, one warp per row: dots[q, j] = x'_q . c'_j,
 * so ||x_q - c_j||^2 = ||x'_q||^2 + v_j with v_j = ||c'_j||^2 - 2 dots[q, j].
 *
 * The bound.  Let u = 2^-53 (the unit roundoff of double), X = x - m and
 * C = c_j - m exactly (x the row, exact in double whether it came as float
 * or double; m the centre; c_j the centroid), R = ||X|| + ||C||.  The
 * quantities and their errors (Higham, Accuracy and Stability of Numerical
 * Algorithms, 3.1 and 3.5: a sum of d products in any order, with or
 * without fused multiply-add, is within gamma_d = d u / (1 - d u) of the
 * sum of their absolute values):
 *   x' = fl(x - m), c' = fl(c - m): each coordinate within u of X_t, C_t,
 *     so |x'.c' - X.C| <= (2u + u^2) ||X|| ||C||;
 *   dots = the DGEMM's x'.c': within gamma_d ||x'|| ||c'|| of x'.c' whatever
 *     the order of its sums (FP64 units or FP64 tensor cores, whose
 *     products and sums are IEEE double);
 *   ||c'||^2 as summed: within (gamma_d + 2u) ||C||^2 of ||C||^2;
 *   v_j = fl(||c'||^2 - 2 dots): one more rounding, u (||C||^2 + 2 ||X|| ||C||);
 *   and the CPU's own distance D_j = fl(sum fl(fl(x_t - c_t)^2)), whose
 *     label is the promise, within (gamma_d + 2u) R^2 of ||X - C||^2.
 * With ||X|| ||C|| <= R^2 / 4 and ||C||^2 <= R^2 the sum is below
 * (2.3 d + 7) u R^2 for d u < 2^-20, so |v_j + ||X||^2 - D_j| <= E_j with
 * E = 8 (d + 16) u (||x'|| + max_j ||c'_j||)^2 = (d + 16) 2^-50 (...)^2, at
 * least three times as much (the computed norms are within d u of the
 * exact ones, which the margin covers).  The CPU's nearest centroid j* then
 * has v_j* <= D_j* - ||X||^2 + E <= D_i - ||X||^2 + E <= v_i + 2E for the
 * i of the smallest v: the candidates are the j with v_j <= min v + 2E, and
 * when there are several they are compared by their distance in double,
 * each summed by one lane over the features in order as the CPU sums it
 * (the lowest number on a tie): the labels are the CPU's.  Against the TF32
 * check's window (about 2^-9 ||x'|| ||c'_j||), this one is 2E = (d + 16)
 * 2^-49 (||x'|| + max ||c'||)^2: on clustered rows of single precision a
 * few rows in a thousand keep several candidates.  A row in doubt is
 * compared in double, never decided by the product alone.  The bound is that of IEEE double
 * arithmetic, which cuBLAS's DGEMM keeps in its default math mode (the
 * emulated FP64 modes are opt-in, and this handle does not set them).
 *
 * One read of the row's products: each lane keeps its two smallest v; a
 * row whose second-smallest (over the warp) is outside the window has one
 * candidate, and only the others read the products again.
 * rowmap (or null) gives the row of tile row q in x, labels, labels_old and
 * d2out; xnorm is by q.  stats[0] counts the rows with more than one
 * candidate, stats[1] the candidates compared there.
 *
 * colmap (or null): column j of the product is centroid colmap[j] (the
 * DGEMM over a tile's candidates, assign_dgemm_cols), k the number of
 * columns.  The bound above holds for any set of columns that holds the
 * CPU's nearest centroid and every centroid at its distance (the argument
 * takes i and j* from the set, and cmax of all k centroids is at least
 * that of the set's); the labels are centroid numbers, and ties go to the
 * lowest centroid number as without it.
 */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
argmin64_kernel(const double *__restrict__ dots,	/* [tr, k] */
				int64_t tr, int k, int d,
				const double *__restrict__ cval,	/* [k] */
				const double *__restrict__ xnorm,	/* [tr] ||x'||^2 of the tile's rows */
				const unsigned long long *__restrict__ cmax,	/* [1] */
				const T *__restrict__ x,	/* [rows, d] */
				const int32_t *__restrict__ rowmap,	/* [tr] or null */
				const int32_t *__restrict__ colmap,	/* [k] or null */
				const double *__restrict__ cen, /* [centroids, d] */
				int32_t *__restrict__ labels,	/* [rows] out */
				const int32_t *__restrict__ labels_old, /* [rows] or null */
				float *__restrict__ d2out,	/* [rows] out */
				unsigned long long *__restrict__ changed,	/* [1] in/out */
				unsigned long long *__restrict__ stats /* [2] in/out */ )
{
	const unsigned int full = 0xffffffffu;
	int64_t		q = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;
	unsigned int mine = 0,
				decided = 0,
				compared = 0;

	if (q < tr)
	{
		const int64_t row = rowmap ? (int64_t) rowmap[q] : q;
		const double *dr = dots + q * k;
		const T    *xr = x + row * d;
		double		r = sqrt(xnorm[q]),
					c = sqrt(__longlong_as_double((long long) *cmax));
		double		e = ldexp((double) d + 16.0, -50) * (r + c) * (r + c);
		double		m1 = INFINITY,
					m2 = INFINITY;	/* this lane's two smallest v */
		int			j1 = INT_MAX;

#pragma unroll 4
		for (int j = lane; j < k; j += 32)
		{
			double		v = cval[j] - 2.0 * dr[j];

			if (v < m1)
			{
				m2 = m1;
				m1 = v;
				j1 = j;
			}
			else
				m2 = fmin(m2, v);
		}

		/* the warp's smallest (lowest number among equals), and the smallest of the rest */
		double		m = m1;
		int			mj = j1;

		for (int o = 16; o > 0; o >>= 1)
		{
			double		om = __shfl_xor_sync(full, m, o);
			int			oj = __shfl_xor_sync(full, mj, o);

			if (om < m || (om == m && oj < mj))
			{
				m = om;
				mj = oj;
			}
		}

		double		rest = j1 == mj ? m2 : m1;

		for (int o = 16; o > 0; o >>= 1)
			rest = fmin(rest, __shfl_xor_sync(full, rest, o));

		double		lim = m + 2.0 * e;
		double		best = INFINITY;
		int			bj = INT_MAX;
		int			seen = 0;

		if (!(rest <= lim) && mj != INT_MAX)
		{
			/* one candidate: its distance in double, one lane, in order as the CPU */
			if (colmap)
				mj = colmap[mj];
			if (lane == 0)
			{
				const double *cj = cen + (size_t) mj * d;
				double		s = 0.0;

				for (int t = 0; t < d; t++)
				{
					double		u = __dsub_rn((double) xr[t], cj[t]);

					s = __dadd_rn(s, __dmul_rn(u, u));
				}
				best = s;
			}
			bj = mj;
			seen = 1;
		}
		else
			for (int j0 = 0; j0 < k; j0 += 32)
			{
				int			j = j0 + lane;
				bool		cand = j < k && cval[j] - 2.0 * dr[j] <= lim;
				unsigned int bal = __ballot_sync(full, cand);
				double		dj = INFINITY;
				int			jj = INT_MAX;

				if (!bal)
					continue;
				seen += __popc(bal);
				if (cand)
				{
					const int	id = colmap ? colmap[j] : j;
					const double *cj = cen + (size_t) id * d;
					double		s = 0.0;

					for (int t = 0; t < d; t++)
					{
						double		u = __dsub_rn((double) xr[t], cj[t]);

						s = __dadd_rn(s, __dmul_rn(u, u));
					}
					dj = s;
					jj = id;
				}
				for (int o = 16; o > 0; o >>= 1)
				{
					double		od = __shfl_xor_sync(full, dj, o);
					int			oj = __shfl_xor_sync(full, jj, o);

					if (od < dj || (od == dj && oj < jj))
					{
						dj = od;
						jj = oj;
					}
				}
				if (dj < best || (dj == best && jj < bj))
				{
					best = dj;
					bj = jj;
				}
			}
		if (bj == INT_MAX)
			bj = 0;				/* NaN only: not with finite data */
		if (lane == 0)
		{
			labels[row] = bj;
			d2out[row] = (float) best;
			mine = labels_old && labels_old[row] != bj;
			decided = seen > 1;
			compared = seen > 1 ? seen : 0;
		}
	}
	block_add(changed, mine);
	block_add(stats, decided);
	block_add(stats + 1, compared);
}

/*
 * The DGEMM form of rows of single precision: a warp per row, row
 * rowmap[q] (or q) of x; xc = x - mean in double, xn = ||xc||^2 (summed
 * across the lanes: it only sizes the bound).
 */
__global__ void center_gather64_kernel(const float *__restrict__ x, int d,	/* [rows, d] */
									   const int32_t *__restrict__ rowmap, int64_t tr,	/* [tr] or null */
									   const double *__restrict__ mean,	/* [d] */
									   double *__restrict__ xc,	/* [tr, d] out */
									   double *__restrict__ xn /* [tr] out */ )
{
	int64_t		q = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;

	if (q >= tr)
		return;
	const float *xr = x + (rowmap ? (int64_t) rowmap[q] : q) * d;
	double		s = 0.0;

	for (int t = lane; t < d; t += 32)
	{
		double		v = __dsub_rn((double) xr[t], mean[t]);

		xc[q * d + t] = v;
		s = __dadd_rn(s, __dmul_rn(v, v));
	}
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		xn[q] = s;
}

/*
 * The DGEMM over a tile's candidates: a warp per column u, the centred
 * centroid cols[u] and its squared norm, gathered from the DGEMM form.
 */
__global__ void gather_centroids64_kernel(const double *__restrict__ cen_cd,	/* [k, d] */
										  const double *__restrict__ cval,	/* [k] */
										  int d,
										  const int32_t *__restrict__ cols, int u,	/* [u] */
										  double *__restrict__ cg,	/* [u, d] out */
										  double *__restrict__ cvg /* [u] out */ )
{
	int64_t		w = ((int64_t) blockIdx.x * BLOCK + threadIdx.x) / 32;
	int			lane = threadIdx.x & 31;

	if (w >= u)
		return;
	const int64_t j = cols[w];

	for (int t = lane; t < d; t += 32)
		cg[w * d + t] = cen_cd[j * d + t];
	if (lane == 0)
		cvg[w] = cval[j];
}

} // namespace

void center_rows64(const Plan &plan, const double *x, int64_t rows, const double *mean, Product &pr)
{
	center_rows64_kernel<<<grid_for(rows, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(
		x, rows, plan.d, mean, pr.xc64.get(), pr.xnorm64.get());
	CHECK_LAUNCH("center_rows64_kernel");
}

void prep_centroids64(const Plan &plan, Centroids &cen)
{
	CUDA_TRY(cudaMemsetAsync(cen.cmax64.get(), 0, sizeof(unsigned long long)));
	prep_centroids64_kernel<<<grid_for(plan.k, 128, 1u << 30), 128>>>(
		cen.cen.get(), plan.k, plan.d, cen.mean_d.get(), cen.cen_cd.get(), cen.cval64.get(), cen.cmax64.get());
	CHECK_LAUNCH("prep_centroids64_kernel");
}

void assign_dgemm(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
				  const double *x, int64_t rows,
				  int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec)
{
	const int	d = plan.d;
	const int	k = plan.k;
	const double one = 1.0,
				zero = 0.0;

	for (int64_t t0 = 0; t0 < rows; t0 += plan.gemm_tile)
	{
		int			tr = (int) std::min<int64_t>(plan.gemm_tile, rows - t0);

		if (t0 > 0)
			gc::check_cancel_synced(exec);
		/* dots [tr, k] = xc [tr, d] . cen_cd [k, d]^T */
		CUBLAS_TRY(cublas.dgemm(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, k, tr, d, &one, cen.cen_cd.get(), d,
							   pr.xc64.get() + t0 * d, d, &zero, pr.dots64.get(), k));
		argmin64_kernel<double><<<grid_for((int64_t) tr * 32, BLOCK, 1u << 30), BLOCK>>>(
			pr.dots64.get(), tr, k, d, cen.cval64.get(), pr.xnorm64.get() + t0, cen.cmax64.get(),
			x + t0 * d, nullptr, nullptr, cen.cen.get(), labels + t0, labels_old ? labels_old + t0 : nullptr,
			d2 + t0, rep.changed(), rep.checked());
		CHECK_LAUNCH("argmin64_kernel");
	}
}

/*
 * The exact level of rows of single precision on devices with fast FP64
 * (kmeans.cuh): for the tr rows rowmap[q] (or 0 .. tr - 1) of the chunk
 * x, in tiles of rows, the centred rows in double, one DGEMM against the
 * centred centroids, and the argmin with its bound (argmin64_kernel).  The
 * buffers are those of the FP32 level, read as doubles: pr.xg (as xc64 of
 * half as many rows), pr.xg_norm and pr.dots (plan.gemm_tile / 2 rows).
 */
void assign_dgemm_rows(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					   const float *x, const int32_t *rowmap, int64_t tr,
					   int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec)
{
	const int	d = plan.d;
	const int	k = plan.k;
	const int64_t step = std::max<int64_t>(1, plan.gemm_tile / 2);
	const double one = 1.0,
				zero = 0.0;
	double	   *xc = reinterpret_cast<double *>(pr.xg.get());
	double	   *xn = reinterpret_cast<double *>(pr.xg_norm.get());
	double	   *dots = reinterpret_cast<double *>(pr.dots.get());

	int64_t		since = 0;			/* rows since the last look at cancel */

	for (int64_t t0 = 0; t0 < tr; t0 += step)
	{
		int			n = (int) std::min<int64_t>(step, tr - t0);
		const int32_t *map = rowmap ? rowmap + t0 : nullptr;
		const float *xs = rowmap ? x : x + t0 * d;
		int32_t    *lab = rowmap ? labels : labels + t0;
		const int32_t *old = labels_old ? (rowmap ? labels_old : labels_old + t0) : nullptr;
		float	   *dd = rowmap ? d2 : d2 + t0;

		/* a look at cancel every 65,536 rows or so: each waits for the device */
		if (t0 == 0 || (since += n) >= 65536)
		{
			gc::check_cancel_synced(exec);
			since = 0;
		}
		center_gather64_kernel<<<grid_for((int64_t) n * 32, BLOCK, 1u << 30), BLOCK>>>(
			xs, d, map, n, cen.mean_d.get(), xc, xn);
		CHECK_LAUNCH("center_gather64_kernel");
		/* dots [n, k] = xc [n, d] . cen_cd [k, d]^T */
		CUBLAS_TRY(cublas.dgemm(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, k, n, d, &one, cen.cen_cd.get(), d,
							   xc, d, &zero, dots, k));
		argmin64_kernel<float><<<grid_for((int64_t) n * 32, BLOCK, 1u << 30), BLOCK>>>(
			dots, n, k, d, cen.cval64.get(), xn, cen.cmax64.get(), xs, map, nullptr, cen.cen.get(), lab, old, dd,
			rep.changed(), rep.checked());
		CHECK_LAUNCH("argmin64_kernel");
	}
}

/*
 * The DGEMM level over one tile's candidates (tile mode, kmeans.cuh): the
 * u centroids cols[0 .. u) (increasing numbers), gathered in the DGEMM form
 * (centred on the data mean, as the bound assumes), against the tile's tr
 * open rows rowmap[q] of the chunk x, in parts of plan.gemm_tile / 2 rows
 * (the buffers of assign_dgemm_rows), each checked by argmin64_kernel over
 * those columns.  The caller looks at cancel.
 */
void assign_dgemm_cols(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					   const float *x, const int32_t *rowmap, int64_t tr, const int32_t *cols, int u,
					   int32_t *labels, const int32_t *labels_old, float *d2)
{
	const int	d = plan.d;
	const int64_t step = std::max<int64_t>(1, plan.gemm_tile / 2);
	const double one = 1.0,
				zero = 0.0;
	double	   *xc = reinterpret_cast<double *>(pr.xg.get());
	double	   *xn = reinterpret_cast<double *>(pr.xg_norm.get());
	double	   *dots = reinterpret_cast<double *>(pr.dots.get());

	gather_centroids64_kernel<<<grid_for((int64_t) u * 32, BLOCK, 1u << 30), BLOCK>>>(
		cen.cen_cd.get(), cen.cval64.get(), d, cols, u, pr.cen_g.get(), pr.cval_g.get());
	CHECK_LAUNCH("gather_centroids64_kernel");
	for (int64_t t0 = 0; t0 < tr; t0 += step)
	{
		int			n = (int) std::min<int64_t>(step, tr - t0);
		const int32_t *map = rowmap + t0;

		center_gather64_kernel<<<grid_for((int64_t) n * 32, BLOCK, 1u << 30), BLOCK>>>(
			x, d, map, n, cen.mean_d.get(), xc, xn);
		CHECK_LAUNCH("center_gather64_kernel");
		/* dots [n, u] = xc [n, d] . cen_g [u, d]^T */
		CUBLAS_TRY(cublas.dgemm(pr.blas.h, CUBLAS_OP_T, CUBLAS_OP_N, u, n, d, &one, pr.cen_g.get(), d,
							   xc, d, &zero, dots, u));
		argmin64_kernel<float><<<grid_for((int64_t) n * 32, BLOCK, 1u << 30), BLOCK>>>(
			dots, n, u, d, pr.cval_g.get(), xn, cen.cmax64.get(), x, map, cols, cen.cen.get(), labels,
			labels_old, d2, rep.changed(), rep.checked());
		CHECK_LAUNCH("argmin64_kernel");
	}
}

} // namespace km
} // namespace gc
