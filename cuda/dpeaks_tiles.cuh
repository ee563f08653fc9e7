/*
 * dpeaks_tiles.cuh
 *    Device helpers of the all-pairs kernels of the GPU density peaks (the
 *    dc selection and rho): a thread per point i, every point j in tiles of
 *    kTile points loaded into shared memory from the structure-of-arrays
 *    copy, as in CUDA-DP (Ge et al., "Efficient parallel implementation of
 *    a density peaks clustering algorithm on GPU"); for large d the tile
 *    does not fit and j is read from global memory (direct).
 *
 * Distances are those of common/dpeaks_common.h: double, in dimension
 * order, no contraction (-fmad=false).
 */
#ifndef GPUCLUST_DPEAKS_TILES_CUH
#define GPUCLUST_DPEAKS_TILES_CUH

#include "dpeaks.cuh"

namespace gc {
namespace dpeaks {

/* Loads points [j0, j0 + m) of xs into tile [d][kTile]. */
__device__ __forceinline__ void load_tile(double *tile, /* [d][kTile] shared */
										  const double *xs, /* [d][n] */ int64_t n, int d,
										  int64_t j0, int m)
{
	for (int t = threadIdx.x; t < m * d; t += blockDim.x)
	{
		int			k = t / m;
		int			jj = t - k * m;

		tile[k * kTile + jj] = xs[(int64_t) k * n + j0 + jj];
	}
}

/* Squared distance of own point (registers for D > 0, else xs column i) to tile entry jj. */
template <int D>
__device__ __forceinline__ double tile_dist2(const double *own, /* [D] */
											 const double *xs, /* [d][n] */ int64_t n,
											 int64_t i, int d,
											 const double *tile, /* [d][kTile] */ int jj)
{
	double		s = 0.0;

	if constexpr (D > 0)
	{
#pragma unroll
		for (int k = 0; k < D; k++)
		{
			double		t = own[k] - tile[k * kTile + jj];

			s += t * t;
		}
	}
	else
	{
		for (int k = 0; k < d; k++)
		{
			double		t = xs[(int64_t) k * n + i] - tile[k * kTile + jj];

			s += t * t;
		}
	}
	return s;
}

/* Squared distance of columns i and j of xs [d][n], read from global memory (large d). */
__device__ __forceinline__ double direct_dist2(const double *xs, /* [d][n] */ int64_t n, int d,
											   int64_t i, int64_t j)
{
	double		s = 0.0;

	for (int k = 0; k < d; k++)
	{
		double		t = xs[(int64_t) k * n + i] - xs[(int64_t) k * n + j];

		s += t * t;
	}
	return s;
}

/* Distance for the tiled kernels: the tile, or global memory when d is too large for one. */
template <int D>
__device__ __forceinline__ double pair_dist2(const double *own, /* [D] */
											 const double *xs, /* [d][n] */ int64_t n, int64_t i,
											 int d, const double *tile, /* [d][kTile] */
											 int64_t jt, int jj, bool direct)
{
	if constexpr (D == 0)
	{
		if (direct)
			return direct_dist2(xs, n, d, i, jt + jj);
	}
	return tile_dist2<D>(own, xs, n, i, d, tile, jj);
}

/*
 * The pair loop shared by the all-pairs kernels: thread i of the block takes
 * its own column into own[], then every column j of [j0, j1) tile by tile
 * (shared memory, or global memory when direct), calling
 * visit(jt, m) with the tile's first column jt and its width m.  Every
 * thread of the block must call it; inactive threads only help load.
 */
template <int D, typename Visit>
__device__ __forceinline__ void for_each_tile(const double *xs, /* [d][n] */ int64_t n, int d,
											  int64_t i, bool active, int64_t j0, int64_t j1,
											  bool direct, double *tile, /* [d][kTile] shared */
											  double *own, /* [D] */ Visit &&visit)
{
	if constexpr (D > 0)
	{
#pragma unroll
		for (int k = 0; k < D; k++)
			own[k] = active ? xs[(int64_t) k * n + i] : 0.0;
	}
	for (int64_t jt = j0; jt < j1; jt += kTile)
	{
		int			m = (int) min((int64_t) kTile, j1 - jt);

		__syncthreads();
		if (!direct)
		{
			load_tile(tile, xs, n, d, jt, m);
			__syncthreads();
		}
		if (active)
			visit(jt, m);
	}
}

/*
 * Adds a thread's 128-bit sum (hi, lo) over its slice of j to the slice's
 * accumulators acc_hi/acc_lo [slices][n] at (blockIdx.y, i).
 */
__device__ __forceinline__ void acc_flush(uint64_t *acc_hi, /* [slices][n] */
										  uint64_t *acc_lo, /* [slices][n] */
										  int64_t n, int64_t i, uint64_t hi, uint64_t lo)
{
	size_t		o = (size_t) blockIdx.y * (size_t) n + (size_t) i;
	uint64_t	l = acc_lo[o] + lo;

	acc_hi[o] += hi + (l < lo ? 1 : 0);
	acc_lo[o] = l;
}

} // namespace dpeaks
} // namespace gc

#endif /* GPUCLUST_DPEAKS_TILES_CUH */
