/*
 * dpeaks.cu
 *    Density peaks clustering on the GPU (Rodriguez & Laio 2014; the CUDA-DP
 *    formulation of seed 004: shared-memory tiles over a structure-of-arrays
 *    copy of the points, dc by binary search over pair counts or by
 *    sampling), without the seed's N x N distance matrix: memory is linear
 *    in n.
 *
 * The exact rules, and the arithmetic that makes the answers bit-identical
 * to the CPU back end (src/core/dpeaks.c), are in src/core/dpeaks_common.h.
 *
 *  dc          n <= 50,000: radix select over all ordered pairs, twelve bits
 *              of the distance's bit pattern per pass (a 4096-way version of
 *              the seed's binary search over pair counts), shared-memory
 *              histograms; larger n: 2^22 seeded sample pairs, CUB sort.
 *  rho         gaussian: every pair in tiles of 128 points in shared memory,
 *              fixed-point terms summed in 128-bit integers, cut into launches
 *              (the cancel callback is asked between them) and, for small n,
 *              into slices of j so that the device is full; for d <= 3 the
 *              points go in Morton order of their grid cells and a tile whose
 *              box is so far from the block's that every term is exactly zero
 *              (u >= 40) is skipped;
 *              cutoff: the grid index (d <= 3; whole cells inside the ball
 *              counted at once) or all pairs in tiles.
 *  delta       density order by a stable CUB radix sort; the densest points
 *              (rank < 2048) and the points that the ring search could not
 *              settle scan all denser points, one block each; the others
 *              search rings of grid cells outward (d <= 3).
 *  assignment  centres by a CUB sort of rho * delta or by thresholds,
 *              numbered by a scan in density order; labels by pointer
 *              jumping along the nearest-denser links.
 *
 * timing->phase_ms: [0] dc, [1] rho, [2] delta, [3] assignment.
 */
#include "common.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "dpeaks_common.h"

namespace {

constexpr int kBlock = 256;			/* threads per block */
constexpr int kTile = 128;			/* points per shared-memory tile (128 terms of 2^56 fit in 64 bits) */
constexpr int kHistBins = 4096;
constexpr int64_t kCollectMax = 1 << 17;
constexpr int64_t kPairsPerLaunch = INT64_C(1) << 33;	/* pair evaluations per launch, about 10 ms */
constexpr int64_t kPointsPerLaunch = INT64_C(1) << 20;	/* grid queries per launch */

inline unsigned grid_for(int64_t work, int block = kBlock)
{
	int64_t		b = (work + block - 1) / block;

	return (unsigned) std::max<int64_t>(1, std::min<int64_t>(b, 1 << 30));
}

/* Two-phase CUB temporary storage, owned. */
struct Temp
{
	gc::DeviceBuffer<char> buf;
	void *get(size_t bytes)
	{
		if (bytes > buf.size())
			buf.reset(std::max<size_t>(bytes, 1), "CUB temporary storage");
		return buf.get();
	}
};

/* ---------------------------------------------------------------- kernels */

/* x [n, d] float row-major -> xs [d][n] double (structure of arrays, seed 004). */
__global__ void to_soa_kernel(const float *x, int64_t n, int d, double *xs)
{
	int64_t		total = n * d;

	for (int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; t < total;
		 t += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = t / d;
		int			k = (int) (t - i * d);

		xs[(int64_t) k * n + i] = (double) x[t];
	}
}

/* dst[k][r] = src[k][perm[r]] */
__global__ void gather_soa_kernel(const double *src, const int64_t *perm, int64_t n, int d, double *dst)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		s = perm[r];

		for (int k = 0; k < d; k++)
			dst[(int64_t) k * n + r] = src[(int64_t) k * n + s];
	}
}

__global__ void iota_kernel(int64_t *v, int64_t n)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		v[i] = i;
}

/* Loads points [j0, j0 + m) of xs into tile [d][kTile]. */
__device__ __forceinline__ void load_tile(double *tile, const double *xs, int64_t n, int d,
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
__device__ __forceinline__ double tile_dist2(const double *own, const double *xs, int64_t n,
											 int64_t i, int d, const double *tile, int jj)
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
__device__ __forceinline__ double direct_dist2(const double *xs, int64_t n, int d, int64_t i, int64_t j)
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
__device__ __forceinline__ double pair_dist2(const double *own, const double *xs, int64_t n, int64_t i,
											 int d, const double *tile, int64_t jt, int jj, bool direct)
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
__device__ __forceinline__ void for_each_tile(const double *xs, int64_t n, int d, int64_t i,
											  bool active, int64_t j0, int64_t j1, bool direct,
											  double *tile, double *own, Visit &&visit)
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
 * rho over all pairs: thread i, j in its slice of [j_begin, j_end), tiles
 * in shared memory.  GAUSS: fixed-point terms into acc_hi/acc_lo [S][n];
 * else counts of dist2 < T into acc_lo.
 */
template <int D, bool GAUSS>
__global__ void __launch_bounds__(kBlock)
pairs_rho_kernel(const double *xs, int64_t n, int d, int64_t j_begin, int64_t j_end,
				 int64_t slice, double inv_dc2, double T, bool direct, uint64_t *acc_hi, uint64_t *acc_lo)
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
				part += other ? gc_dp_gauss_fixed(d2 * inv_dc2) : 0;
			else
				part += (other && d2 < T) ? 1 : 0;
		}
		gc_dp_acc_add(&hi, &lo, part);
	});
	if (active && j0 < j1)
	{
		size_t		o = (size_t) blockIdx.y * (size_t) n + (size_t) i;
		uint64_t	l = acc_lo[o] + lo;

		acc_hi[o] += hi + (l < lo ? 1 : 0);
		acc_lo[o] = l;
	}
}

/*
 * Bounding box of each tile of kTile consecutive points of xs [d][n]:
 * box [2][d][ntiles], lows then highs.
 */
__global__ void tile_box_kernel(const double *xs, int64_t n, int d, int64_t ntiles, double *box)
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
template <int D>
__global__ void __launch_bounds__(kBlock)
gauss_skip_kernel(const double *xs, int64_t n, int64_t j_begin, int64_t j_end, int64_t slice,
				  double inv_dc2, const double *box, int64_t ntiles, uint64_t *acc_hi, uint64_t *acc_lo)
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
		if (gap2 * inv_dc2 > far)
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

			part += other ? gc_dp_gauss_fixed(d2 * inv_dc2) : 0;
		}
		gc_dp_acc_add(&hi, &lo, part);
	}
	if (active && j0 < j1)
	{
		size_t		o = (size_t) blockIdx.y * (size_t) n + (size_t) i;
		uint64_t	l = acc_lo[o] + lo;

		acc_hi[o] += hi + (l < lo ? 1 : 0);
		acc_lo[o] = l;
	}
}

/* Morton code of each point's grid cell (bits per dimension: 64 / d, top bits kept). */
__global__ void morton_kernel(gc_dp_grid g, const double *xs, int64_t n, int shift, int bits,
							  uint64_t *key)
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
__global__ void rho_combine_kernel(const uint64_t *acc_hi, const uint64_t *acc_lo, int64_t n,
								   int slices, bool gauss, const int64_t *perm, double *rho)
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

/*
 * One pass of the exact dc selection: histogram of the next bits of the
 * dist2 bit patterns that share the prefix found so far, over ordered pairs.
 */
template <int D>
__global__ void __launch_bounds__(kBlock)
dc_hist_kernel(const double *xs, int64_t n, int d, int64_t slice, uint64_t prefix, int prefix_bits,
			   int shift, uint32_t mask, bool direct, unsigned long long *hist)
{
	extern __shared__ double tile[];
	uint32_t   *shist = reinterpret_cast<uint32_t *>(tile + (direct ? 0 : (size_t) d * kTile));
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(n, j0 + slice);
	bool		active = i < n;
	double		own[D > 0 ? D : 1];

	for (int b = threadIdx.x; b < kHistBins; b += blockDim.x)
		shist[b] = 0;
	for_each_tile<D>(xs, n, d, i, active, j0, j1, direct, tile, own, [&](int64_t jt, int m) {
		for (int jj = 0; jj < m; jj++)
		{
			uint64_t	key;

			if (jt + jj == i)
				continue;
			key = gc_dp_key(pair_dist2<D>(own, xs, n, i, d, tile, jt, jj, direct));
			if (prefix_bits > 0 && (key >> (64 - prefix_bits)) != prefix)
				continue;
			atomicAdd(&shist[(key >> shift) & mask], 1u);
		}
	});
	__syncthreads();
	for (int b = threadIdx.x; b < kHistBins; b += blockDim.x)
		if (shist[b])
			atomicAdd(&hist[b], (unsigned long long) shist[b]);
}

/* The keys of the ordered pairs that carry the whole prefix. */
template <int D>
__global__ void __launch_bounds__(kBlock)
dc_collect_kernel(const double *xs, int64_t n, int d, int64_t slice, uint64_t prefix, int prefix_bits,
				  bool direct, unsigned long long *count, uint64_t *out, int64_t cap)
{
	extern __shared__ double tile[];
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(n, j0 + slice);
	bool		active = i < n;
	double		own[D > 0 ? D : 1];

	for_each_tile<D>(xs, n, d, i, active, j0, j1, direct, tile, own, [&](int64_t jt, int m) {
		for (int jj = 0; jj < m; jj++)
		{
			uint64_t	key;

			if (jt + jj == i)
				continue;
			key = gc_dp_key(pair_dist2<D>(own, xs, n, i, d, tile, jt, jj, direct));
			if ((key >> (64 - prefix_bits)) == prefix)
			{
				unsigned long long pos = atomicAdd(count, 1ULL);

				if ((int64_t) pos < cap)
					out[pos] = key;
			}
		}
	});
}

/* dist2 bit patterns of the seeded sample pairs. */
__global__ void dc_sample_kernel(const double *xs, int64_t n, int d, uint64_t seed, int64_t m,
								 uint64_t *keys)
{
	for (int64_t p = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; p < m;
		 p += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i,
					j;
		double		s = 0.0;

		gc_dp_sample_pair(seed, p, n, &i, &j);
		for (int k = 0; k < d; k++)
		{
			double		t = xs[(int64_t) k * n + i] - xs[(int64_t) k * n + j];

			s += t * t;
		}
		keys[p] = gc_dp_key(s);
	}
}

/* Linear grid cell of each point, and the number of points per cell. */
__global__ void cell_kernel(gc_dp_grid g, const double *xs, int64_t n, uint64_t *cell,
							unsigned long long *counts)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		id = 0;

		for (int k = g.d - 1; k >= 0; k--)
			id = id * g.dims[k] + gc_dp_cell_of(&g, k, xs[(int64_t) k * n + i]);
		cell[i] = (uint64_t) id;
		atomicAdd(&counts[id], 1ULL);
	}
}

/* Cutoff rho through the grid: sorted positions [q0, q1). */
__global__ void grid_count_kernel(gc_dp_grid g, const int64_t *order, int64_t q0, int64_t q1,
								  double T, double *rho)
{
	int64_t		q = q0 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	double		p[GC_DP_GRID_MAX_DIM];

	if (q >= q1)
		return;
	for (int k = 0; k < g.d; k++)
		p[k] = g.xs[k][q];
	rho[order[q]] = (double) (gc_dp_grid_count(&g, p, T) - 1);
}

/* Density order keys: rho is never negative, so its bit pattern sorts like its value. */
__global__ void rho_key_kernel(const double *rho, int64_t n, uint64_t *key)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		key[i] = gc_dp_key(rho[i]);
}

__global__ void rank_scatter_kernel(const int64_t *by_rank, const double *rho, int64_t n,
									int64_t *rank_of, double *rho_r)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = by_rank[r];

		rank_of[i] = r;
		rho_r[r] = rho[i];
	}
}

__global__ void grid_rank_kernel(const int64_t *order, const int64_t *rank_of, int64_t n,
								 int64_t *grank)
{
	for (int64_t q = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; q < n;
		 q += (int64_t) gridDim.x * blockDim.x)
		grank[q] = rank_of[order[q]];
}

/* Largest dist2 from the densest point (rank 0 of xr) to any point. */
__global__ void farthest_kernel(const double *xr, int64_t n, int d, unsigned long long *best)
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
	for (int w = kBlock / 2; w > 0; w >>= 1)
	{
		if ((int) threadIdx.x < w)
			sb[threadIdx.x] = max(sb[threadIdx.x], sb[threadIdx.x + w]);
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicMax(best, sb[0]);
}

/*
 * Nearest denser point by scanning every denser point: one block per query
 * rank (list[b], or r_begin + b), points in density order (xr [d][n]).
 */
__global__ void __launch_bounds__(kBlock)
scan_denser_kernel(const double *xr, int64_t n, int d, const int64_t *list, int64_t r_begin,
				   int64_t count, double *bd2_r, int64_t *nbr_r)
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
		for (int w = kBlock / 2; w > 0; w >>= 1)
		{
			if (tid < w)
			{
				int64_t		orr = sr[tid + w];

				if (orr >= 0 && (sr[tid] < 0 || gc_dp_better(sd[tid + w], orr, sd[tid], sr[tid])))
				{
					sd[tid] = sd[tid + w];
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

/* Ring search on the grid for the points of rank >= min_rank: sorted positions [q0, q1). */
__global__ void ring_kernel(gc_dp_grid g, int64_t q0, int64_t q1, int64_t min_rank,
							int64_t max_rings, double *bd2_r, int64_t *nbr_r,
							int64_t *unresolved, unsigned long long *n_unresolved)
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
	if (gc_dp_grid_nearest_denser(&g, p, r, max_rings, &bd2, &br))
	{
		bd2_r[r] = bd2;
		nbr_r[r] = br;
	}
	else
		unresolved[atomicAdd(n_unresolved, 1ULL)] = r;
}

__global__ void gamma_key_kernel(const double *rho_r, const double *bd2_r, int64_t n, uint64_t *key,
								 int64_t *val)
{
	for (int64_t r = 1 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		key[r - 1] = gc_dp_key(rho_r[r] * sqrt(bd2_r[r]));
		val[r - 1] = r;
	}
}

__global__ void mark_top_kernel(const int64_t *val, int64_t m, int32_t *center_r)
{
	for (int64_t s = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; s < m;
		 s += (int64_t) gridDim.x * blockDim.x)
		center_r[val[s]] = 1;
}

__global__ void threshold_kernel(const double *rho_r, const double *bd2_r, int64_t n,
								 double rho_min, double delta_min, int32_t *center_r)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
		center_r[r] = (r == 0 || (rho_r[r] >= rho_min && sqrt(bd2_r[r]) >= delta_min)) ? 1 : 0;
}

__global__ void parent_init_kernel(const int32_t *center_r, const int64_t *nbr_r, int64_t n,
								   int64_t *parent)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
		parent[r] = center_r[r] ? r : nbr_r[r];
}

/* One round of pointer jumping toward the centres. */
__global__ void jump_kernel(int64_t *parent, int64_t n, int *changed)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		p = parent[r];
		int64_t		pp = parent[p];

		if (pp != p)
		{
			parent[r] = pp;
			*changed = 1;
		}
	}
}

__global__ void output_kernel(const int64_t *by_rank, const int64_t *parent, const int32_t *cid_r,
							  const int32_t *center_r, const double *bd2_r, int64_t n,
							  int32_t *cluster, uint8_t *is_center, double *delta)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = by_rank[r];

		cluster[i] = cid_r[parent[r]];
		is_center[i] = (uint8_t) center_r[r];
		if (r > 0)
			delta[i] = sqrt(bd2_r[r]);
	}
}

/* ---------------------------------------------------------------- host */

/* Calls f with the compile-time dimension for d <= 3, 0 (generic) otherwise. */
template <typename F>
void by_dim(int d, F f)
{
	switch (d)
	{
		case 1:
			f(std::integral_constant<int, 1>());
			break;
		case 2:
			f(std::integral_constant<int, 2>());
			break;
		case 3:
			f(std::integral_constant<int, 3>());
			break;
		default:
			f(std::integral_constant<int, 0>());
			break;
	}
}

struct Ctx
{
	int64_t		n;
	int			d;
	int			sms;
	gc_cancel_fn cancel;
	void	   *cancel_arg;
	Temp		temp;
};

/* Slices of j so that about four resident waves of threads run. */
int slices_for(const Ctx &c)
{
	int64_t		want = (int64_t) c.sms * 2048 * 4;
	int64_t		s = (want + c.n - 1) / c.n;

	return (int) std::max<int64_t>(1, std::min<int64_t>(64, s));
}

/* The exact k-th smallest dist2 (1-based) over ordered pairs. */
uint64_t dc_exact(Ctx &c, const double *xs, int64_t k)
{
	static const int widths[] = {12, 12, 12, 12, 12, 4};
	int64_t		n = c.n;
	int			S = slices_for(c);
	int64_t		slice = ((n + S - 1) / S + kTile - 1) / kTile * kTile;
	dim3		grid(grid_for(n), (unsigned) S);
	size_t		tile_bytes = sizeof(double) * (size_t) c.d * kTile;
	uint64_t	prefix = 0;
	int			prefix_bits = 0;
	gc::DeviceBuffer<unsigned long long> hist(kHistBins, "the dc histogram");
	std::vector<unsigned long long> h(kHistBins);

	bool		direct = tile_bytes + kHistBins * 4 > 48 * 1024;	/* d > 32: no tile */

	if (direct)
		tile_bytes = 0;
	for (int pass = 0; pass < 6; pass++)
	{
		int			w = widths[pass];
		int			shift = 64 - prefix_bits - w;
		uint32_t	mask = (1u << w) - 1;
		int64_t		cum = 0;
		int			b;

		gc::check_cancel(c.cancel, c.cancel_arg);
		CUDA_TRY(cudaMemset(hist.get(), 0, hist.bytes()));
		by_dim(c.d, [&](auto D) {
			dc_hist_kernel<decltype(D)::value><<<grid, kBlock, tile_bytes + kHistBins * 4>>>(
				xs, n, c.d, slice, prefix, prefix_bits, shift, mask, direct, hist.get());
			CHECK_LAUNCH("dc_hist_kernel");
		});
		CUDA_TRY(cudaMemcpy(h.data(), hist.get(), hist.bytes(), cudaMemcpyDeviceToHost));
		for (b = 0; b < (1 << w); b++)
		{
			if (cum + (int64_t) h[b] >= k)
				break;
			cum += (int64_t) h[b];
		}
		if (b == (1 << w))
			gc::fail(GC_ERR_INTERNAL, "dc selection lost its target");
		k -= cum;
		prefix = (prefix << w) | (uint64_t) b;
		prefix_bits += w;
		if (prefix_bits == 64)
			return prefix;
		if ((int64_t) h[b] <= kCollectMax)
		{
			int64_t		m = (int64_t) h[b];
			gc::DeviceBuffer<uint64_t> out((size_t) std::max<int64_t>(m, 1), "the dc candidates");
			gc::DeviceBuffer<unsigned long long> cnt(1, "the dc candidates");
			unsigned long long got = 0;
			std::vector<uint64_t> v((size_t) std::max<int64_t>(m, 1));

			gc::check_cancel(c.cancel, c.cancel_arg);
			CUDA_TRY(cudaMemset(cnt.get(), 0, sizeof(unsigned long long)));
			by_dim(c.d, [&](auto D) {
				dc_collect_kernel<decltype(D)::value><<<grid, kBlock, tile_bytes>>>(
					xs, n, c.d, slice, prefix, prefix_bits, direct, cnt.get(), out.get(), m);
				CHECK_LAUNCH("dc_collect_kernel");
			});
			CUDA_TRY(cudaMemcpy(&got, cnt.get(), sizeof(got), cudaMemcpyDeviceToHost));
			if ((int64_t) got != m)
				gc::fail(GC_ERR_INTERNAL, "dc candidates miscounted (%llu of %lld)", got, (long long) m);
			CUDA_TRY(cudaMemcpy(v.data(), out.get(), sizeof(uint64_t) * (size_t) m, cudaMemcpyDeviceToHost));
			std::nth_element(v.begin(), v.begin() + (k - 1), v.begin() + m);
			return v[(size_t) (k - 1)];
		}
	}
	gc::fail(GC_ERR_INTERNAL, "dc selection did not finish");
}

/* The quantile of the seeded sample pairs. */
uint64_t dc_sample(Ctx &c, const double *xs, double rate, uint64_t seed)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	gc::DeviceBuffer<uint64_t> a((size_t) m, "the dc sample");
	gc::DeviceBuffer<uint64_t> b((size_t) m, "the dc sample");
	size_t		bytes = 0;
	uint64_t	key = 0;

	dc_sample_kernel<<<grid_for(m), kBlock>>>(xs, c.n, c.d, seed, m, a.get());
	CHECK_LAUNCH("dc_sample_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, a.get(), b.get(), m));
	CUDA_TRY(cub::DeviceRadixSort::SortKeys(c.temp.get(bytes), bytes, a.get(), b.get(), m));
	CHECK_LAUNCH("SortKeys");
	CUDA_TRY(cudaMemcpy(&key, b.get() + (gc_dp_quantile_rank(rate, m) - 1), sizeof(key),
						cudaMemcpyDeviceToHost));
	return key;
}

/*
 * rho over all pairs, in launches of about kPairsPerLaunch pairs.  With a
 * grid (gaussian, d <= 3) the points are first put in Morton order of their
 * cells, so that tiles are compact and far tiles can be skipped.
 */
void rho_pairs(Ctx &c, const double *xs, bool gauss, double dc, double T, const gc_dp_grid *grid,
			   double *rho)
{
	int64_t		n = c.n;
	int			S = slices_for(c);
	int64_t		chunk = std::max<int64_t>(kTile * S, kPairsPerLaunch / n);
	int64_t		slice;
	size_t		tile_bytes = sizeof(double) * (size_t) c.d * kTile;
	double		inv = 1.0 / (dc * dc);
	bool		skip = gauss && grid != nullptr;
	int64_t		ntiles = (n + kTile - 1) / kTile;
	gc::DeviceBuffer<double> xm;
	gc::DeviceBuffer<int64_t> perm;
	gc::DeviceBuffer<double> box;

	chunk = (chunk + kTile - 1) / kTile * kTile;
	chunk = std::min<int64_t>(chunk, (n + kTile - 1) / kTile * kTile);
	if (skip)
	{
		int			bits = 64 / grid->d;
		int			shift = 0;
		int64_t		dmax = 1;
		size_t		bytes = 0;

		if (bits > 31)
			bits = 31;
		for (int k = 0; k < grid->d; k++)
			dmax = std::max<int64_t>(dmax, grid->dims[k]);
		while (shift < 62 && (dmax - 1) >> shift >= (INT64_C(1) << bits))
			shift++;
		xm.reset((size_t) n * c.d, "the points in Morton order");
		perm.reset((size_t) n, "the Morton order");
		box.reset((size_t) 2 * c.d * ntiles, "the tile boxes");
		{
			gc::DeviceBuffer<uint64_t> ka((size_t) n, "Morton keys"), kb((size_t) n, "Morton keys");
			gc::DeviceBuffer<int64_t> va((size_t) n, "Morton order");

			morton_kernel<<<grid_for(n), kBlock>>>(*grid, xs, n, shift, bits, ka.get());
			CHECK_LAUNCH("morton_kernel");
			iota_kernel<<<grid_for(n), kBlock>>>(va.get(), n);
			CHECK_LAUNCH("iota_kernel");
			CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, ka.get(), kb.get(), va.get(),
													 perm.get(), n, 0, bits * grid->d));
			CUDA_TRY(cub::DeviceRadixSort::SortPairs(c.temp.get(bytes), bytes, ka.get(), kb.get(), va.get(),
													 perm.get(), n, 0, bits * grid->d));
			CHECK_LAUNCH("SortPairs");
		}
		gather_soa_kernel<<<grid_for(n), kBlock>>>(xs, perm.get(), n, c.d, xm.get());
		CHECK_LAUNCH("gather_soa_kernel");
		tile_box_kernel<<<grid_for(ntiles), kBlock>>>(xm.get(), n, c.d, ntiles, box.get());
		CHECK_LAUNCH("tile_box_kernel");
		xs = xm.get();
	}
	slice = ((chunk + S - 1) / S + kTile - 1) / kTile * kTile;
	bool		direct = tile_bytes > 48 * 1024;	/* d > 48: no tile */

	if (direct)
		tile_bytes = 0;

	gc::DeviceBuffer<uint64_t> hi((size_t) S * n, "the density accumulators");
	gc::DeviceBuffer<uint64_t> lo((size_t) S * n, "the density accumulators");

	CUDA_TRY(cudaMemset(hi.get(), 0, hi.bytes()));
	CUDA_TRY(cudaMemset(lo.get(), 0, lo.bytes()));
	for (int64_t j = 0; j < n; j += chunk)
	{
		int64_t		je = std::min(n, j + chunk);
		dim3		grid(grid_for(n), (unsigned) S);

		gc::check_cancel(c.cancel, c.cancel_arg);
		by_dim(c.d, [&](auto D) {
			constexpr int DV = decltype(D)::value;

			if constexpr (DV > 0)
			{
				if (skip)
				{
					gauss_skip_kernel<DV><<<grid, kBlock, tile_bytes>>>(xs, n, j, je, slice, inv, box.get(),
																		 ntiles, hi.get(), lo.get());
					CHECK_LAUNCH("gauss_skip_kernel");
					return;
				}
			}
			if (gauss)
				pairs_rho_kernel<DV, true><<<grid, kBlock, tile_bytes>>>(
					xs, n, c.d, j, je, slice, inv, T, direct, hi.get(), lo.get());
			else
				pairs_rho_kernel<DV, false><<<grid, kBlock, tile_bytes>>>(
					xs, n, c.d, j, je, slice, inv, T, direct, hi.get(), lo.get());
			CHECK_LAUNCH("pairs_rho_kernel");
		});
	}
	rho_combine_kernel<<<grid_for(n), kBlock>>>(hi.get(), lo.get(), n, S, gauss,
												skip ? perm.get() : nullptr, rho);
	CHECK_LAUNCH("rho_combine_kernel");
}

/* The grid index on the device: cells, points sorted by cell. */
struct DevGrid
{
	gc_dp_grid	g;
	int64_t		ncells = 0;
	gc::DeviceBuffer<int64_t> cell_start;
	gc::DeviceBuffer<double> xg;		/* [d][n] in cell order */
	gc::DeviceBuffer<int64_t> order;	/* sorted position -> row */
	gc::DeviceBuffer<int64_t> rank;		/* sorted position -> density rank */
};

void grid_build(Ctx &c, const double *xs, DevGrid &G)
{
	int64_t		n = c.n;
	int			d = c.d;
	double		mn[GC_DP_GRID_MAX_DIM],
				mx[GC_DP_GRID_MAX_DIM];
	gc::DeviceBuffer<double> red(2, "the bounding box");

	for (int k = 0; k < d; k++)
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceReduce::Min(nullptr, bytes, xs + (int64_t) k * n, red.get(), n));
		CUDA_TRY(cub::DeviceReduce::Min(c.temp.get(bytes), bytes, xs + (int64_t) k * n, red.get(), n));
		bytes = 0;
		CUDA_TRY(cub::DeviceReduce::Max(nullptr, bytes, xs + (int64_t) k * n, red.get() + 1, n));
		CUDA_TRY(cub::DeviceReduce::Max(c.temp.get(bytes), bytes, xs + (int64_t) k * n, red.get() + 1, n));
		double		h2[2];

		CUDA_TRY(cudaMemcpy(h2, red.get(), sizeof(h2), cudaMemcpyDeviceToHost));
		mn[k] = h2[0];
		mx[k] = h2[1];
	}
	memset(&G.g, 0, sizeof(G.g));
	G.ncells = gc_dp_grid_shape(&G.g, d, n, mn, mx);

	G.cell_start.reset((size_t) G.ncells + 1, "the grid cells");
	G.xg.reset((size_t) n * d, "the points in cell order");
	G.order.reset((size_t) n, "the cell order");
	{
		gc::DeviceBuffer<uint64_t> ka((size_t) n, "cell keys"), kb((size_t) n, "cell keys");
		gc::DeviceBuffer<int64_t> va((size_t) n, "cell order");
		gc::DeviceBuffer<unsigned long long> counts((size_t) G.ncells + 1, "the grid cells");
		size_t		bytes = 0;
		int			bits = 1;

		while (bits < 63 && (INT64_C(1) << bits) <= G.ncells)
			bits++;
		CUDA_TRY(cudaMemset(counts.get(), 0, counts.bytes()));
		cell_kernel<<<grid_for(n), kBlock>>>(G.g, xs, n, ka.get(), counts.get());
		CHECK_LAUNCH("cell_kernel");
		iota_kernel<<<grid_for(n), kBlock>>>(va.get(), n);
		CHECK_LAUNCH("iota_kernel");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, ka.get(), kb.get(), va.get(),
												 G.order.get(), n, 0, bits));
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(c.temp.get(bytes), bytes, ka.get(), kb.get(), va.get(),
												 G.order.get(), n, 0, bits));
		CHECK_LAUNCH("SortPairs");
		bytes = 0;
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts.get(),
											   (unsigned long long *) G.cell_start.get(), G.ncells + 1));
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(c.temp.get(bytes), bytes, counts.get(),
											   (unsigned long long *) G.cell_start.get(), G.ncells + 1));
		CHECK_LAUNCH("ExclusiveSum");
	}
	gather_soa_kernel<<<grid_for(n), kBlock>>>(xs, G.order.get(), n, d, G.xg.get());
	CHECK_LAUNCH("gather_soa_kernel");
	G.g.cell_start = G.cell_start.get();
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		G.g.xs[k] = k < d ? G.xg.get() + (int64_t) k * n : nullptr;
	G.g.rank = nullptr;
}

void validate(int64_t n, int32_t d, const gc_dpeaks_params *p, const gc_dpeaks_result *r, const float *x)
{
	if (!p || p->struct_size != sizeof(gc_dpeaks_params))
		gc::fail(GC_ERR_INVALID_ARGUMENT, "density peaks parameters of the wrong version");
	if (n < 1 || d < 1 || !x || !r || !r->cluster || !r->rho || !r->delta || !r->is_center)
		gc::fail(GC_ERR_INVALID_ARGUMENT, "density peaks needs at least one row and one dimension");
	if (p->n_clusters < 0 || p->n_clusters > n)
		gc::fail(GC_ERR_INVALID_ARGUMENT, "n_clusters must be between 1 and the number of rows (%lld)",
				 (long long) n);
	if (!(p->dc >= 0.0) || std::isinf(p->dc))
		gc::fail(GC_ERR_INVALID_ARGUMENT, "dc must be positive and finite");
	if (p->dc == 0.0 && !(p->neighbor_rate > 0.0 && p->neighbor_rate < 1.0))
		gc::fail(GC_ERR_INVALID_ARGUMENT, "neighbor_rate must be between 0 and 1 exclusive");
	if (p->kernel != GC_DP_KERNEL_GAUSSIAN && p->kernel != GC_DP_KERNEL_CUTOFF)
		gc::fail(GC_ERR_INVALID_ARGUMENT, "unknown density kernel %d", (int) p->kernel);
	if (p->n_clusters == 0 && (std::isnan(p->rho_min) || std::isnan(p->delta_min)))
		gc::fail(GC_ERR_INVALID_ARGUMENT, "rho_min and delta_min must be numbers");
	if (p->dc == 0.0 && n < 2)
		gc::fail(GC_ERR_INVALID_ARGUMENT, "dc cannot be estimated from a single row");
}

void run_dpeaks(int32_t device_id, const float *x_host, int64_t n, int32_t d,
				const gc_dpeaks_params *params, gc_dpeaks_result *result, gc_timing *timing,
				gc_cancel_fn cancel, void *cancel_arg)
{
	Ctx			c;
	bool		use_grid = d <= GC_DP_GRID_MAX_DIM;
	bool		gauss = params->kernel == GC_DP_KERNEL_GAUSSIAN;
	gc::Stopwatch sw;
	double		dc,
				T = 0.0;

	c.n = n;
	c.d = d;
	c.cancel = cancel;
	c.cancel_arg = cancel_arg;
	gc::use_device(device_id);
	CUDA_TRY(cudaDeviceGetAttribute(&c.sms, cudaDevAttrMultiProcessorCount, device_id));

	/* Memory first: the largest moment is the delta phase. */
	{
		int			S = slices_for(c);
		int64_t		per_point = (int64_t) d * 8 * (gauss ? 4 : 3) + 8 * 12 + 16;
		int64_t		need = n * per_point + (use_grid ? (2 * n + 17) * 16 : 0) +
			(gauss || !use_grid ? (int64_t) S * n * 16 : 0) +
			(params->dc > 0.0 || n <= GC_DP_DC_EXACT_MAX_N ? 0 : GC_DP_DC_SAMPLE_PAIRS * 16) +
			(INT64_C(64) << 20);
		size_t		free_b = 0,
					total_b = 0;

		timing->bytes_needed = need;
		CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
		if ((uint64_t) need > free_b)
		{
			gc::oom_bytes_needed = need;
			gc::fail(GC_ERR_OUT_OF_MEMORY,
					 "density peaks of %lld points of dimension %d needs about %lld bytes of device memory, "
					 "%zu bytes are free of %zu", (long long) n, d, (long long) need, free_b, total_b);
		}
	}

	gc::DeviceBuffer<double> xs((size_t) n * d, "the points");
	{
		gc::DeviceBuffer<float> x((size_t) n * d, "the points");

		gc::check_cancel(cancel, cancel_arg);
		CUDA_TRY(cudaMemcpy(x.get(), x_host, x.bytes(), cudaMemcpyHostToDevice));
		timing->to_device_ms = sw.ms();
		sw.restart();
		to_soa_kernel<<<grid_for(n * d), kBlock>>>(x.get(), n, d, xs.get());
		CHECK_LAUNCH("to_soa_kernel");
	}
	gc::Stopwatch compute;

	/* ---- phase 0: dc */
	result->dc_sample = 0;
	if (params->dc > 0.0)
	{
		dc = params->dc;
		result->dc_method = GC_DC_GIVEN;
	}
	else
	{
		uint64_t	key;

		if (n <= GC_DP_DC_EXACT_MAX_N)
		{
			key = dc_exact(c, xs.get(), gc_dp_quantile_rank(params->neighbor_rate, gc_dp_ordered_pairs(n)));
			result->dc_method = GC_DC_EXACT;
		}
		else
		{
			key = dc_sample(c, xs.get(), params->neighbor_rate,
							params->seed ? params->seed : GC_DP_DEFAULT_SEED);
			result->dc_method = GC_DC_SAMPLE;
			result->dc_sample = GC_DP_DC_SAMPLE_PAIRS;
		}
		dc = sqrt(gc_dp_unkey(key));
		if (!(dc > 0.0))
			gc::fail(GC_ERR_INVALID_ARGUMENT, "the neighbor_rate quantile of the pairwise distances is zero");
	}
	result->dc = dc;
	CUDA_TRY(cudaDeviceSynchronize());
	timing->phase_ms[0] = sw.ms();
	sw.restart();

	/* ---- phase 1: rho */
	DevGrid		G;
	gc::DeviceBuffer<double> rho((size_t) n, "the densities");

	gc::check_cancel(cancel, cancel_arg);
	if (use_grid)
		grid_build(c, xs.get(), G);
	if (!gauss)
		T = gc_dp_cutoff_threshold(dc);
	if (!gauss && use_grid)
	{
		for (int64_t q = 0; q < n; q += kPointsPerLaunch)
		{
			int64_t		qe = std::min(n, q + kPointsPerLaunch);

			gc::check_cancel(cancel, cancel_arg);
			grid_count_kernel<<<grid_for(qe - q), kBlock>>>(G.g, G.order.get(), q, qe, T, rho.get());
			CHECK_LAUNCH("grid_count_kernel");
		}
	}
	else
		rho_pairs(c, xs.get(), gauss, dc, T, use_grid ? &G.g : nullptr, rho.get());
	CUDA_TRY(cudaDeviceSynchronize());
	timing->phase_ms[1] = sw.ms();
	sw.restart();

	/* ---- phase 2: density order and delta */
	gc::check_cancel(cancel, cancel_arg);
	gc::DeviceBuffer<int64_t> by_rank((size_t) n, "the density order");
	gc::DeviceBuffer<double> rho_r((size_t) n, "the density order");
	gc::DeviceBuffer<double> xr((size_t) n * d, "the points in density order");
	gc::DeviceBuffer<double> bd2_r((size_t) n, "the distances to denser points");
	gc::DeviceBuffer<int64_t> nbr_r((size_t) n, "the nearest denser points");
	{
		gc::DeviceBuffer<uint64_t> ka((size_t) n, "density keys"), kb((size_t) n, "density keys");
		gc::DeviceBuffer<int64_t> va((size_t) n, "density order");
		gc::DeviceBuffer<int64_t> rank_of((size_t) n, "the density ranks");
		size_t		bytes = 0;

		rho_key_kernel<<<grid_for(n), kBlock>>>(rho.get(), n, ka.get());
		CHECK_LAUNCH("rho_key_kernel");
		iota_kernel<<<grid_for(n), kBlock>>>(va.get(), n);
		CHECK_LAUNCH("iota_kernel");
		CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, ka.get(), kb.get(), va.get(),
														   by_rank.get(), n));
		CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(c.temp.get(bytes), bytes, ka.get(), kb.get(),
														   va.get(), by_rank.get(), n));
		CHECK_LAUNCH("SortPairsDescending");
		rank_scatter_kernel<<<grid_for(n), kBlock>>>(by_rank.get(), rho.get(), n, rank_of.get(), rho_r.get());
		CHECK_LAUNCH("rank_scatter_kernel");
		gather_soa_kernel<<<grid_for(n), kBlock>>>(xs.get(), by_rank.get(), n, d, xr.get());
		CHECK_LAUNCH("gather_soa_kernel");
		if (use_grid)
		{
			G.rank.reset((size_t) n, "the density ranks in cell order");
			grid_rank_kernel<<<grid_for(n), kBlock>>>(G.order.get(), rank_of.get(), n, G.rank.get());
			CHECK_LAUNCH("grid_rank_kernel");
			G.g.rank = G.rank.get();
		}
	}
	xs.release();
	{
		/* the densest point: the largest distance to any point */
		gc::DeviceBuffer<unsigned long long> far(1, "the largest distance");
		unsigned long long fk = 0;

		CUDA_TRY(cudaMemset(far.get(), 0, sizeof(unsigned long long)));
		farthest_kernel<<<std::min<unsigned>(grid_for(n), 1024), kBlock>>>(xr.get(), n, d, far.get());
		CHECK_LAUNCH("farthest_kernel");
		CUDA_TRY(cudaMemcpy(&fk, far.get(), sizeof(fk), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(bd2_r.get(), &fk, sizeof(double), cudaMemcpyHostToDevice));
		CUDA_TRY(cudaMemset(nbr_r.get(), 0xff, sizeof(int64_t)));
	}
	{
		int64_t		scan_end = use_grid ? std::min<int64_t>(n, GC_DP_BRUTE_RANK) : n;
		const int64_t kScanBlocksPerLaunch = 65536;

		for (int64_t r = 1; r < scan_end; r += kScanBlocksPerLaunch)
		{
			int64_t		cnt = std::min<int64_t>(kScanBlocksPerLaunch, scan_end - r);

			gc::check_cancel(cancel, cancel_arg);
			scan_denser_kernel<<<(unsigned) cnt, kBlock>>>(xr.get(), n, d, nullptr, r, cnt,
														   bd2_r.get(), nbr_r.get());
			CHECK_LAUNCH("scan_denser_kernel");
		}
		if (use_grid && n > GC_DP_BRUTE_RANK)
		{
			gc::DeviceBuffer<int64_t> unresolved((size_t) n, "the unresolved points");
			gc::DeviceBuffer<unsigned long long> n_unres(1, "the unresolved points");
			unsigned long long nu = 0;

			CUDA_TRY(cudaMemset(n_unres.get(), 0, sizeof(unsigned long long)));
			for (int64_t q = 0; q < n; q += kPointsPerLaunch)
			{
				int64_t		qe = std::min(n, q + kPointsPerLaunch);

				gc::check_cancel(cancel, cancel_arg);
				ring_kernel<<<grid_for(qe - q), kBlock>>>(G.g, q, qe, GC_DP_BRUTE_RANK,
														   gc_dp_max_rings(d), bd2_r.get(), nbr_r.get(),
														   unresolved.get(), n_unres.get());
				CHECK_LAUNCH("ring_kernel");
			}
			CUDA_TRY(cudaMemcpy(&nu, n_unres.get(), sizeof(nu), cudaMemcpyDeviceToHost));
			for (int64_t b = 0; b < (int64_t) nu; b += kScanBlocksPerLaunch)
			{
				int64_t		cnt = std::min<int64_t>(kScanBlocksPerLaunch, (int64_t) nu - b);

				gc::check_cancel(cancel, cancel_arg);
				scan_denser_kernel<<<(unsigned) cnt, kBlock>>>(xr.get(), n, d, unresolved.get() + b, 0, cnt,
															   bd2_r.get(), nbr_r.get());
				CHECK_LAUNCH("scan_denser_kernel");
			}
		}
	}
	CUDA_TRY(cudaDeviceSynchronize());
	timing->phase_ms[2] = sw.ms();
	sw.restart();

	/* ---- phase 3: centres and assignment */
	gc::check_cancel(cancel, cancel_arg);
	G.cell_start.release();
	G.xg.release();
	G.order.release();
	G.rank.release();
	xr.release();
	gc::DeviceBuffer<int32_t> center_r((size_t) n, "the centres");
	gc::DeviceBuffer<int32_t> cid_r((size_t) n, "the centre numbers");
	gc::DeviceBuffer<int64_t> parent((size_t) n, "the cluster links");
	if (params->n_clusters > 0)
	{
		CUDA_TRY(cudaMemset(center_r.get(), 0, center_r.bytes()));
		{
			int32_t		one = 1;

			CUDA_TRY(cudaMemcpy(center_r.get(), &one, sizeof(one), cudaMemcpyHostToDevice));
		}
		if (params->n_clusters > 1)
		{
			int64_t		m = n - 1;
			gc::DeviceBuffer<uint64_t> ka((size_t) m, "gamma keys"), kb((size_t) m, "gamma keys");
			gc::DeviceBuffer<int64_t> va((size_t) m, "gamma order"), vb((size_t) m, "gamma order");
			size_t		bytes = 0;

			gamma_key_kernel<<<grid_for(m), kBlock>>>(rho_r.get(), bd2_r.get(), n, ka.get(), va.get());
			CHECK_LAUNCH("gamma_key_kernel");
			CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, ka.get(), kb.get(), va.get(),
															   vb.get(), m));
			CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(c.temp.get(bytes), bytes, ka.get(), kb.get(),
															   va.get(), vb.get(), m));
			CHECK_LAUNCH("SortPairsDescending");
			mark_top_kernel<<<grid_for(params->n_clusters - 1), kBlock>>>(vb.get(), params->n_clusters - 1,
																		  center_r.get());
			CHECK_LAUNCH("mark_top_kernel");
		}
	}
	else
	{
		threshold_kernel<<<grid_for(n), kBlock>>>(rho_r.get(), bd2_r.get(), n, params->rho_min,
												  params->delta_min, center_r.get());
		CHECK_LAUNCH("threshold_kernel");
	}
	{
		size_t		bytes = 0;
		int32_t		last[2] = {0, 0};

		CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, center_r.get(), cid_r.get(), n));
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(c.temp.get(bytes), bytes, center_r.get(), cid_r.get(), n));
		CHECK_LAUNCH("ExclusiveSum");
		CUDA_TRY(cudaMemcpy(&last[0], cid_r.get() + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(&last[1], center_r.get() + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));
		result->n_centers = (int64_t) last[0] + last[1];
	}
	parent_init_kernel<<<grid_for(n), kBlock>>>(center_r.get(), nbr_r.get(), n, parent.get());
	CHECK_LAUNCH("parent_init_kernel");
	{
		gc::DeviceBuffer<int> changed(1, "the jump flag");

		for (int round = 0; round < 80; round++)
		{
			int			h = 0;

			CUDA_TRY(cudaMemset(changed.get(), 0, sizeof(int)));
			jump_kernel<<<grid_for(n), kBlock>>>(parent.get(), n, changed.get());
			CHECK_LAUNCH("jump_kernel");
			CUDA_TRY(cudaMemcpy(&h, changed.get(), sizeof(int), cudaMemcpyDeviceToHost));
			if (!h)
				break;
			if (round == 79)
				gc::fail(GC_ERR_INTERNAL, "pointer jumping did not converge");
		}
	}
	gc::DeviceBuffer<int32_t> cluster((size_t) n, "the labels");
	gc::DeviceBuffer<uint8_t> is_center((size_t) n, "the centre flags");
	gc::DeviceBuffer<double> delta((size_t) n, "the deltas");
	{
		double		d0 = 0.0;
		int64_t		top = 0;
		unsigned long long fk = 0;

		/* delta of the densest point, at its row */
		CUDA_TRY(cudaMemcpy(&top, by_rank.get(), sizeof(top), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(&fk, bd2_r.get(), sizeof(fk), cudaMemcpyDeviceToHost));
		d0 = sqrt(gc_dp_unkey(fk));
		CUDA_TRY(cudaMemcpy(delta.get() + top, &d0, sizeof(double), cudaMemcpyHostToDevice));
	}
	output_kernel<<<grid_for(n), kBlock>>>(by_rank.get(), parent.get(), cid_r.get(), center_r.get(),
										   bd2_r.get(), n, cluster.get(), is_center.get(), delta.get());
	CHECK_LAUNCH("output_kernel");
	CUDA_TRY(cudaDeviceSynchronize());
	timing->phase_ms[3] = sw.ms();
	timing->compute_ms = compute.ms();

	sw.restart();
	CUDA_TRY(cudaMemcpy(result->cluster, cluster.get(), cluster.bytes(), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(result->is_center, is_center.get(), is_center.bytes(), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(result->rho, rho.get(), rho.bytes(), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(result->delta, delta.get(), delta.bytes(), cudaMemcpyDeviceToHost));
	timing->from_device_ms = sw.ms();
}

} // namespace

extern "C" gc_status gcu_density_peaks(int32_t device_id, const float *x, int64_t n, int32_t d,
									   const gc_dpeaks_params *params, gc_dpeaks_result *result,
									   gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	GC_ENTRY_BEGIN
	gc_timing	local;
	gc_timing  *t = timing ? timing : &local;

	memset(t, 0, sizeof(*t));
	validate(n, d, params, result, x);
	run_dpeaks(device_id, x, n, d, params, result, t, cancel, cancel_arg);
	GC_ENTRY_END
}
