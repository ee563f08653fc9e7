/*
 * dpeaks_rho.cu
 *    Phase rho of the GPU density peaks: the density of every point, as
 *    common/dpeaks_common.h defines it.
 *
 *    gaussian  every pair in tiles of kTile points in shared memory (as in
 *              CUDA-DP, Ge et al., "Efficient parallel implementation of a
 *              density peaks clustering algorithm on GPU", without its
 *              N x N distance matrix), fixed-point terms summed in 128-bit
 *              integers, cut into launches (the cancel callback is asked
 *              between them) and, for small n, into slices of j so that the
 *              device is full; for d <= 3 the points go in Morton order of
 *              their grid cells and a tile whose box is so far from the
 *              block's that every term is exactly zero (u >= 40) is skipped;
 *    cutoff    the grid index (d <= 3; whole cells inside the ball counted
 *              at once) or all pairs in tiles.
 */
#include "dpeaks_tiles.cuh"

#include <algorithm>
#include <cmath>

namespace gc {
namespace dpeaks {
namespace {


/* ---------------------------------------------------------------- all pairs */

/*
 * rho over all pairs: thread i, j in its slice of [j_begin, j_end), tiles
 * in shared memory.  GAUSS: fixed-point terms into acc_hi/acc_lo [S][n],
 * u = gc_dp_gauss_u of metric M with inv_dc2 = gc_dp_gauss_factor; else
 * counts of dist2 < T into acc_lo.
 */
template <int D, bool GAUSS, gc_metric M>
__global__ void __launch_bounds__(kBlock)
pairs_rho_kernel(const double *xs, /* [d][n] */ int64_t n, int d, int64_t j_begin, int64_t j_end,
				 int64_t slice, double inv_dc2, double T, bool direct,
				 uint64_t *acc_hi, /* [S][n] */ uint64_t *acc_lo /* [S][n] */)
{
	extern __shared__ double tile[];
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = j_begin + (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(j_end, j0 + slice);
	bool		active = i < n;
	double		own[D > 0 ? D : 1];
	uint64_t	hi = 0,
				lo = 0;

	for_each_tile<D>(xs, n, d, i, active, j0, j1, direct, tile, own, [&](int64_t jt, int m) {
		uint64_t	part = 0;

		for (int jj = 0; jj < m; jj++)
		{
			double		d2 = pair_dist2<D>(own, xs, n, i, d, tile, jt, jj, direct);
			bool		other = (jt + jj) != i;

			if constexpr (GAUSS)
				part += other ? gc_dp_gauss_fixed(gc_dp_gauss_u(M, d2, inv_dc2)) : 0;
			else
				part += (other && d2 < T) ? 1 : 0;
		}
		gc_dp_acc_add(&hi, &lo, part);
	});
	if (active && j0 < j1)
		acc_flush(acc_hi, acc_lo, n, i, hi, lo);
}

/*
 * Bounding box of each tile of kTile consecutive points of xs [d][n]:
 * box [2][d][ntiles], lows then highs.
 */
__global__ void tile_box_kernel(const double *xs, /* [d][n] */ int64_t n, int d, int64_t ntiles,
								double *box /* [2][d][ntiles] */)
{
	for (int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; t < ntiles;
		 t += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		a = t * kTile,
					b = min(n, a + kTile);

		for (int k = 0; k < d; k++)
		{
			double		lo = xs[(int64_t) k * n + a],
						hi = lo;

			for (int64_t q = a + 1; q < b; q++)
			{
				double		v = xs[(int64_t) k * n + q];

				lo = v < lo ? v : lo;
				hi = v > hi ? v : hi;
			}
			box[(int64_t) k * ntiles + t] = lo;
			box[((int64_t) d + k) * ntiles + t] = hi;
		}
	}
}

/*
 * The gaussian pairs kernel over points in Morton order (d <= 3): a tile of
 * j whose box lies so far from the block's box that every term has
 * u >= 40 (exactly zero, see gc_dp_gauss_fixed) is skipped whole, for the
 * whole block at once.  The sums are those of pairs_rho_kernel.
 */
template <int D, gc_metric M>
__global__ void __launch_bounds__(kBlock)
gauss_skip_kernel(const double *xs, /* [D][n] Morton order */ int64_t n, int64_t j_begin,
				  int64_t j_end, int64_t slice, double inv_dc2,
				  const double *box, /* [2][D][ntiles] */ int64_t ntiles,
				  uint64_t *acc_hi, /* [S][n] */ uint64_t *acc_lo /* [S][n] */)
{
	extern __shared__ double tile[];
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = j_begin + (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(j_end, j0 + slice);
	bool		active = i < n;
	double		own[D];
	double		blo[D],
				bhi[D];
	uint64_t	hi = 0,
				lo = 0;
	int64_t		t0 = (int64_t) blockIdx.x * (kBlock / kTile);
	int64_t		t1 = min(ntiles, t0 + kBlock / kTile);
	const double far = 40.0 * (1.0 + 1e-9);

#pragma unroll
	for (int k = 0; k < D; k++)
	{
		own[k] = active ? xs[(int64_t) k * n + i] : 0.0;
		blo[k] = box[(int64_t) k * ntiles + t0];
		bhi[k] = box[((int64_t) D + k) * ntiles + t0];
		for (int64_t t = t0 + 1; t < t1; t++)
		{
			blo[k] = min(blo[k], box[(int64_t) k * ntiles + t]);
			bhi[k] = max(bhi[k], box[((int64_t) D + k) * ntiles + t]);
		}
	}
	for (int64_t jt = j0; jt < j1; jt += kTile)
	{
		int			m = (int) min((int64_t) kTile, j1 - jt);
		int64_t		t = jt / kTile;
		double		gap2 = 0.0;
		uint64_t	part = 0;

#pragma unroll
		for (int k = 0; k < D; k++)
		{
			double		a = box[(int64_t) k * ntiles + t] - bhi[k];
			double		b = blo[k] - box[((int64_t) D + k) * ntiles + t];
			double		g = a > b ? a : b;

			if (g > 0.0)
				gap2 += g * g;
		}
		if (gc_dp_gauss_u(M, gap2, inv_dc2) > far)
			continue;			/* the same decision in every thread of the block */
		__syncthreads();
		load_tile(tile, xs, n, D, jt, m);
		__syncthreads();
		if (!active)
			continue;
		for (int jj = 0; jj < m; jj++)
		{
			double		d2 = tile_dist2<D>(own, xs, n, i, D, tile, jj);
			bool		other = (jt + jj) != i;

			part += other ? gc_dp_gauss_fixed(gc_dp_gauss_u(M, d2, inv_dc2)) : 0;
		}
		gc_dp_acc_add(&hi, &lo, part);
	}
	if (active && j0 < j1)
		acc_flush(acc_hi, acc_lo, n, i, hi, lo);
}

/* Morton code of each point's grid cell (bits per dimension: 64 / d, top bits kept). */
__global__ void morton_kernel(gc_dp_grid g, const double *xs, /* [d][n] */ int64_t n, int shift,
							  int bits, uint64_t *key /* [n] */)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		uint64_t	c[GC_DP_GRID_MAX_DIM],
					m = 0;

		for (int k = 0; k < g.d; k++)
			c[k] = (uint64_t) gc_dp_cell_of(&g, k, xs[(int64_t) k * n + i]) >> shift;
		for (int b = bits - 1; b >= 0; b--)
			for (int k = g.d - 1; k >= 0; k--)
				m = (m << 1) | ((c[k] >> b) & 1);
		key[i] = m;
	}
}

/* rho[i] (rho[perm[i]] when the points were permuted) from the slices' accumulators. */
__global__ void rho_combine_kernel(const uint64_t *acc_hi, /* [slices][n] */
								   const uint64_t *acc_lo, /* [slices][n] */ int64_t n,
								   int slices, bool gauss, const int64_t *perm, /* [n] or NULL */
								   double *rho /* [n] */)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		uint64_t	hi = 0,
					lo = 0;

		for (int s = 0; s < slices; s++)
		{
			size_t		o = (size_t) s * (size_t) n + (size_t) i;

			gc_dp_acc_add(&hi, &lo, acc_lo[o]);
			hi += acc_hi[o];
		}
		rho[perm ? perm[i] : i] = gauss ? gc_dp_acc_value(hi, lo) : (double) lo;
	}
}

/* The points in Morton order of their grid cells, and the box of each tile of them. */
struct MortonOrder
{
	DeviceBuffer<double> xm;	/* [d][n] */
	DeviceBuffer<int64_t> perm; /* [n] Morton position -> row */
	DeviceBuffer<double> box;	/* [2][d][ntiles] */
	int64_t		ntiles = 0;
};

void morton_order(Workspace &w, const double *xs, /* [d][n] */ const gc_dp_grid &grid,
				  MortonOrder &mo)
{
	const int64_t n = w.n;
	int			bits = 64 / grid.d;
	int			shift = 0;
	int64_t		dmax = 1;

	if (bits > 31)
		bits = 31;
	for (int k = 0; k < grid.d; k++)
		dmax = std::max<int64_t>(dmax, grid.dims[k]);
	while (shift < 62 && (dmax - 1) >> shift >= (INT64_C(1) << bits))
		shift++;
	mo.ntiles = (n + kTile - 1) / kTile;
	mo.xm.reset((size_t) n * w.d, "the points in Morton order");
	mo.perm.reset((size_t) n, "the Morton order");
	mo.box.reset((size_t) 2 * w.d * mo.ntiles, "the tile boxes");
	{
		DeviceBuffer<uint64_t> ka((size_t) n, "Morton keys");

		morton_kernel<<<grid_for(n), kBlock>>>(grid, xs, n, shift, bits, ka.get());
		CHECK_LAUNCH("morton_kernel");
		sort_rows(w, ka.get(), n, bits * grid.d, false, mo.perm.get());
	}
	gather_soa(xs, mo.perm.get(), n, w.d, mo.xm.get());
	tile_box_kernel<<<grid_for(mo.ntiles), kBlock>>>(mo.xm.get(), n, w.d, mo.ntiles, mo.box.get());
	CHECK_LAUNCH("tile_box_kernel");
}

/*
 * rho over all pairs, in launches of about kPairsPerLaunch pairs.  With a
 * grid (gaussian, d <= 3) the points are first put in Morton order of their
 * cells, so that tiles are compact and far tiles can be skipped.
 */
void rho_pairs(Workspace &w, const double *xs, /* [d][n] */ const gc_dp_grid *grid,
			   double *rho /* [n] */)
{
	const int64_t n = w.n;
	const bool	gauss = w.gauss;
	const int	S = slices_for(w);
	int64_t		chunk = std::max<int64_t>(kTile * S, pairs_per_launch(w.d) / n);
	size_t		tile_bytes = sizeof(double) * (size_t) w.d * kTile;
	const double inv = gc_dp_gauss_factor(w.metric, w.dc);
	const double T = w.T;
	const bool	skip = gauss && grid != nullptr;
	MortonOrder mo;

	chunk = (chunk + kTile - 1) / kTile * kTile;
	chunk = std::min<int64_t>(chunk, (n + kTile - 1) / kTile * kTile);
	if (skip)
	{
		morton_order(w, xs, *grid, mo);
		xs = mo.xm.get();
	}

	const int64_t slice = ((chunk + S - 1) / S + kTile - 1) / kTile * kTile;
	const bool	direct = tile_bytes > 48 * 1024;	/* d > 48: no tile */

	if (direct)
		tile_bytes = 0;

	DeviceBuffer<uint64_t> hi((size_t) S * n, "the density accumulators");
	DeviceBuffer<uint64_t> lo((size_t) S * n, "the density accumulators");

	CUDA_TRY(cudaMemset(hi.get(), 0, hi.bytes()));
	CUDA_TRY(cudaMemset(lo.get(), 0, lo.bytes()));
	for (int64_t j = 0; j < n; j += chunk)
	{
		const int64_t je = std::min(n, j + chunk);
		const dim3	blocks(grid_for(n), (unsigned) S);

		cancel_point(w);
		by_dim(w.d, [&](auto D) {
			constexpr int DV = decltype(D)::value;

			if constexpr (DV > 0)
			{
				if (skip)
				{
					if (w.metric == GC_METRIC_COSINE)
						gauss_skip_kernel<DV, GC_METRIC_COSINE><<<blocks, kBlock, tile_bytes>>>(
							xs, n, j, je, slice, inv, mo.box.get(), mo.ntiles, hi.get(), lo.get());
					else
						gauss_skip_kernel<DV, GC_METRIC_EUCLIDEAN><<<blocks, kBlock, tile_bytes>>>(
							xs, n, j, je, slice, inv, mo.box.get(), mo.ntiles, hi.get(), lo.get());
					CHECK_LAUNCH("gauss_skip_kernel");
					return;
				}
			}
			/* the metric matters to the gaussian terms alone (the cutoff compares dist2 < T) */
			if (gauss && w.metric == GC_METRIC_COSINE)
				pairs_rho_kernel<DV, true, GC_METRIC_COSINE><<<blocks, kBlock, tile_bytes>>>(
					xs, n, w.d, j, je, slice, inv, T, direct, hi.get(), lo.get());
			else if (gauss)
				pairs_rho_kernel<DV, true, GC_METRIC_EUCLIDEAN><<<blocks, kBlock, tile_bytes>>>(
					xs, n, w.d, j, je, slice, inv, T, direct, hi.get(), lo.get());
			else
				pairs_rho_kernel<DV, false, GC_METRIC_EUCLIDEAN><<<blocks, kBlock, tile_bytes>>>(
					xs, n, w.d, j, je, slice, inv, T, direct, hi.get(), lo.get());
			CHECK_LAUNCH("pairs_rho_kernel");
		});
	}
	rho_combine_kernel<<<grid_for(n), kBlock>>>(hi.get(), lo.get(), n, S, gauss,
												skip ? mo.perm.get() : nullptr, rho);
	CHECK_LAUNCH("rho_combine_kernel");
}

/* ---------------------------------------------------------------- cutoff on the grid */

/* Cutoff rho through the grid: sorted positions [q0, q1). */
__global__ void grid_count_kernel(gc_dp_grid g, const int64_t *order, /* [n] */ int64_t q0,
								  int64_t q1, double T, double *rho /* [n] by row */)
{
	int64_t		q = q0 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	double		p[GC_DP_GRID_MAX_DIM];

	if (q >= q1)
		return;
	for (int k = 0; k < g.d; k++)
		p[k] = g.xs[k][q];
	rho[order[q]] = (double) (gc_dp_grid_count(&g, p, T, nullptr) - 1);
}

/* rho with the cutoff kernel through the grid index, kPointsPerLaunch points a launch. */
void rho_grid_count(Workspace &w, double *rho /* [n] */)
{
	const int64_t n = w.n;

	for (int64_t q = 0; q < n; q += kPointsPerLaunch)
	{
		int64_t		qe = std::min(n, q + kPointsPerLaunch);

		cancel_point(w);
		grid_count_kernel<<<grid_for(qe - q), kBlock>>>(w.grid.g, w.grid.order.get(), q, qe, w.T, rho);
		CHECK_LAUNCH("grid_count_kernel");
	}
}

} // namespace

/* Phase rho: w.rho by row; with d <= 3 the grid index w.grid is built first. */
void rho_phase(Workspace &w)
{
	cancel_point(w);
	w.rho.reset((size_t) w.n, "the densities");
	if (w.use_pairs)
	{
		rho_pairs_engine(w);
		CUDA_TRY(cudaDeviceSynchronize());
		return;
	}
	if (w.use_grid)
		build_grid(w, w.xs.get());
	w.T = w.gauss ? 0.0 : gc_dp_cutoff_threshold(w.metric, w.dc);
	if (!w.gauss && w.use_grid)
		rho_grid_count(w, w.rho.get());
	else
		rho_pairs(w, w.xs.get(), w.use_grid ? &w.grid.g : nullptr, w.rho.get());
	CUDA_TRY(cudaDeviceSynchronize());
}

} // namespace dpeaks
} // namespace gc
