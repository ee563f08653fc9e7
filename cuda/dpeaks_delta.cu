/*
 * dpeaks_delta.cu
 *    Phase delta of the GPU density peaks: the density order (a stable CUB
 *    radix sort of rho, densest first) and, for every point, its nearest
 *    denser point.  The densest points (rank < GC_DP_BRUTE_RANK) and the
 *    points that the ring search could not settle scan all denser points,
 *    one block each; the others search rings of grid cells outward
 *    (d <= 3, gc_dp_grid_nearest_denser of common/dpeaks_common.h).  The
 *    densest point takes the largest distance to any point.
 */
#include "dpeaks.cuh"

#include <algorithm>
#include <cmath>

namespace gc {
namespace dpeaks {
namespace {

/* ---------------------------------------------------------------- density order */

/* Density order keys: rho is never negative, so its bit pattern sorts like its value. */
__global__ void rho_key_kernel(const double *rho, /* [n] */ int64_t n, uint64_t *key /* [n] */)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		key[i] = gc_dp_key(rho[i]);
}

__global__ void rank_scatter_kernel(const int64_t *by_rank, /* [n] */ const double *rho, /* [n] */
									int64_t n, int64_t *rank_of, /* [n] out */
									double *rho_r /* [n] out */)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = by_rank[r];

		rank_of[i] = r;
		rho_r[r] = rho[i];
	}
}

__global__ void grid_rank_kernel(const int64_t *order, /* [n] */ const int64_t *rank_of, /* [n] */
								 int64_t n, int64_t *grank /* [n] out */)
{
	for (int64_t q = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; q < n;
		 q += (int64_t) gridDim.x * blockDim.x)
		grank[q] = rank_of[order[q]];
}

/* w.by_rank, w.rho_r, w.xr, and with the grid w.grid.rank. */
void density_order(Workspace &w)
{
	const int64_t n = w.n;

	if (w.use_grid)
		w.grid.rank.reset((size_t) n, "the density ranks in cell order");

	DeviceBuffer<uint64_t> ka((size_t) n, "density keys");
	DeviceBuffer<int64_t> rank_of((size_t) n, "the density ranks");

	rho_key_kernel<<<grid_for(n), kBlock>>>(w.rho.get(), n, ka.get());
	CHECK_LAUNCH("rho_key_kernel");
	sort_rows(w, ka.get(), n, 64, true, w.by_rank.get());
	rank_scatter_kernel<<<grid_for(n), kBlock>>>(w.by_rank.get(), w.rho.get(), n, rank_of.get(),
												 w.rho_r.get());
	CHECK_LAUNCH("rank_scatter_kernel");
	gather_soa(w.xs.get(), w.by_rank.get(), n, w.d, w.xr.get());
	if (w.use_grid)
	{
		grid_rank_kernel<<<grid_for(n), kBlock>>>(w.grid.order.get(), rank_of.get(), n,
												  w.grid.rank.get());
		CHECK_LAUNCH("grid_rank_kernel");
		w.grid.g.rank = w.grid.rank.get();
	}
}

/* ---------------------------------------------------------------- the densest point */

/* Largest dist2 from the densest point (rank 0 of xr) to any point. */
__global__ void farthest_kernel(const double *xr, /* [d][n] */ int64_t n, int d,
								unsigned long long *best /* [1] */)
{
	__shared__ unsigned long long sb[kBlock];
	unsigned long long mine = 0;

	for (int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; j < n;
		 j += (int64_t) gridDim.x * blockDim.x)
	{
		double		s = 0.0;

		for (int k = 0; k < d; k++)
		{
			double		t = xr[(int64_t) k * n] - xr[(int64_t) k * n + j];

			s += t * t;
		}
		mine = max(mine, (unsigned long long) gc_dp_key(s));
	}
	sb[threadIdx.x] = mine;
	__syncthreads();
	for (int wd = kBlock / 2; wd > 0; wd >>= 1)
	{
		if ((int) threadIdx.x < wd)
			sb[threadIdx.x] = max(sb[threadIdx.x], sb[threadIdx.x + wd]);
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicMax(best, sb[0]);
}

/* bd2_r[0]: the largest dist2 from the densest point; nbr_r[0] = -1. */
void densest(Workspace &w)
{
	DeviceBuffer<unsigned long long> far(1, "the largest distance");
	unsigned long long fk = 0;

	CUDA_TRY(cudaMemset(far.get(), 0, sizeof(unsigned long long)));
	farthest_kernel<<<std::min<unsigned>(grid_for(w.n), 1024), kBlock>>>(w.xr.get(), w.n, w.d,
																		 far.get());
	CHECK_LAUNCH("farthest_kernel");
	CUDA_TRY(cudaMemcpy(&fk, far.get(), sizeof(fk), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(w.bd2_r.get(), &fk, sizeof(double), cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemset(w.nbr_r.get(), 0xff, sizeof(int64_t)));
}

/* ---------------------------------------------------------------- nearest denser point */

/*
 * Nearest denser point by scanning every denser point: one block per query
 * rank (list[b], or r_begin + b), points in density order (xr [d][n]).
 */
__global__ void __launch_bounds__(kBlock)
scan_denser_kernel(const double *xr, /* [d][n] */ int64_t n, int d,
				   const int64_t *list, /* [count] or NULL */ int64_t r_begin, int64_t count,
				   double *bd2_r, /* [n] */ int64_t *nbr_r /* [n] */)
{
	__shared__ double sd[kBlock];
	__shared__ int64_t sr[kBlock];
	int			tid = threadIdx.x;

	for (int64_t b = blockIdx.x; b < count; b += gridDim.x)
	{
		int64_t		r = list ? list[b] : r_begin + b;
		double		best = INFINITY;
		int64_t		br = -1;

		for (int64_t s = tid; s < r; s += blockDim.x)
		{
			double		d2 = 0.0;

			for (int k = 0; k < d; k++)
			{
				double		t = xr[(int64_t) k * n + r] - xr[(int64_t) k * n + s];

				d2 += t * t;
			}
			/* s grows, so a strict test keeps the denser of equal distances */
			if (br < 0 || d2 < best)
			{
				best = d2;
				br = s;
			}
		}
		sd[tid] = best;
		sr[tid] = br;
		__syncthreads();
		for (int wd = kBlock / 2; wd > 0; wd >>= 1)
		{
			if (tid < wd)
			{
				int64_t		orr = sr[tid + wd];

				if (orr >= 0 && (sr[tid] < 0 || gc_dp_better(sd[tid + wd], orr, sd[tid], sr[tid])))
				{
					sd[tid] = sd[tid + wd];
					sr[tid] = orr;
				}
			}
			__syncthreads();
		}
		if (tid == 0)
		{
			bd2_r[r] = sd[0];
			nbr_r[r] = sr[0];
		}
		__syncthreads();
	}
}

/*
 * scan_denser_kernel for count query ranks (list[0 .. count), or first ..
 * first + count when list is NULL), at most 65,536 blocks a launch and about
 * pairs_per_launch pairs (each block scans up to n rows).
 */
void scan_denser(Workspace &w, const int64_t *list, /* [count] or NULL */ int64_t first,
				 int64_t count)
{
	const int64_t per_launch = std::max<int64_t>(1, std::min<int64_t>(65536, pairs_per_launch(w.d) / w.n));

	for (int64_t b = 0; b < count; b += per_launch)
	{
		int64_t		cnt = std::min<int64_t>(per_launch, count - b);

		cancel_point(w);
		scan_denser_kernel<<<(unsigned) cnt, kBlock>>>(w.xr.get(), w.n, w.d, list ? list + b : nullptr,
													   first + b, cnt, w.bd2_r.get(), w.nbr_r.get());
		CHECK_LAUNCH("scan_denser_kernel");
	}
}

/* Ring search on the grid for the points of rank >= min_rank: sorted positions [q0, q1). */
__global__ void ring_kernel(gc_dp_grid g, int64_t q0, int64_t q1, int64_t min_rank,
							int64_t max_rings, double *bd2_r, /* [n] */ int64_t *nbr_r, /* [n] */
							int64_t *unresolved, /* [n] out */
							unsigned long long *n_unresolved /* [1] */)
{
	int64_t		q = q0 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	double		p[GC_DP_GRID_MAX_DIM];
	double		bd2 = INFINITY;
	int64_t		br = -1,
				r;

	if (q >= q1)
		return;
	r = g.rank[q];
	if (r < min_rank)
		return;
	for (int k = 0; k < g.d; k++)
		p[k] = g.xs[k][q];
	if (gc_dp_grid_nearest_denser(&g, p, r, max_rings, &bd2, &br, nullptr))
	{
		bd2_r[r] = bd2;
		nbr_r[r] = br;
	}
	else
		unresolved[atomicAdd(n_unresolved, 1ULL)] = r;
}

/* The ring search for ranks >= GC_DP_BRUTE_RANK; what it cannot settle is scanned. */
void ring_search(Workspace &w)
{
	const int64_t n = w.n;
	DeviceBuffer<int64_t> unresolved((size_t) n, "the unresolved points");
	DeviceBuffer<unsigned long long> n_unres(1, "the unresolved points");
	unsigned long long nu = 0;

	CUDA_TRY(cudaMemset(n_unres.get(), 0, sizeof(unsigned long long)));
	for (int64_t q = 0; q < n; q += kPointsPerLaunch)
	{
		int64_t		qe = std::min(n, q + kPointsPerLaunch);

		cancel_point(w);
		ring_kernel<<<grid_for(qe - q), kBlock>>>(w.grid.g, q, qe, GC_DP_BRUTE_RANK,
												   gc_dp_max_rings(w.d), w.bd2_r.get(), w.nbr_r.get(),
												   unresolved.get(), n_unres.get());
		CHECK_LAUNCH("ring_kernel");
	}
	CUDA_TRY(cudaMemcpy(&nu, n_unres.get(), sizeof(nu), cudaMemcpyDeviceToHost));
	scan_denser(w, unresolved.get(), 0, (int64_t) nu);
}

} // namespace

/*
 * Phase delta: the density order (w.by_rank, w.rho_r, w.xr) and by rank
 * the squared distance to the nearest denser point (w.bd2_r) and its rank
 * (w.nbr_r).  The points by row (w.xs) are released.
 */
void delta_phase(Workspace &w)
{
	const int64_t n = w.n;

	cancel_point(w);
	w.by_rank.reset((size_t) n, "the density order");
	w.rho_r.reset((size_t) n, "the density order");
	w.xr.reset((size_t) n * w.d, "the points in density order");
	w.bd2_r.reset((size_t) n, "the distances to denser points");
	w.nbr_r.reset((size_t) n, "the nearest denser points");
	density_order(w);
	w.xs.release();
	densest(w);
	if (w.use_pairs)
	{
		delta_pairs_engine(w);
		CUDA_TRY(cudaDeviceSynchronize());
		return;
	}

	const int64_t scan_end = w.use_grid ? std::min<int64_t>(n, GC_DP_BRUTE_RANK) : n;

	scan_denser(w, nullptr, 1, scan_end - 1);
	if (w.use_grid && n > GC_DP_BRUTE_RANK)
		ring_search(w);
	CUDA_TRY(cudaDeviceSynchronize());
}

} // namespace dpeaks
} // namespace gc
