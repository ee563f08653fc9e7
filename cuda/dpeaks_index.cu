/*
 * dpeaks_index.cu
 *    The layouts of the points for the GPU density peaks: the structure of
 *    arrays [d][n] in double of CUDA-DP (Ge et al., "Efficient parallel
 *    implementation of a density peaks clustering algorithm on GPU"), its
 *    gathers into another order, rows ordered by a key (a stable CUB radix
 *    sort), and the grid index of common/dpeaks_common.h (d <= 3): cells of
 *    gc_dp_grid_shape, points sorted by cell, cell starts by a CUB scan.
 */
#include "dpeaks.cuh"

#include <cub/cub.cuh>

namespace gc {
namespace dpeaks {
namespace {

/* x [n, d] float or double row-major -> xs [d][n] double (structure of arrays), exactly. */
template <typename T>
__global__ void to_soa_kernel(const T *x, /* [n, d] */ int64_t n, int d, double *xs /* [d][n] */)
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
__global__ void gather_soa_kernel(const double *src, /* [d][n] */ const int64_t *perm, /* [n] */
								  int64_t n, int d, double *dst /* [d][n] */)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		s = perm[r];

		for (int k = 0; k < d; k++)
			dst[(int64_t) k * n + r] = src[(int64_t) k * n + s];
	}
}

__global__ void iota_kernel(int64_t *v, /* [n] */ int64_t n)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		v[i] = i;
}

} // namespace

template <typename T>
void to_soa(const T *x, /* [n, d] */ int64_t n, int d, double *xs /* [d][n] */)
{
	to_soa_kernel<T><<<grid_for(n * d), kBlock>>>(x, n, d, xs);
	CHECK_LAUNCH("to_soa_kernel");
}

template void to_soa<float>(const float *, int64_t, int, double *);
template void to_soa<double>(const double *, int64_t, int, double *);

void gather_soa(const double *src, /* [d][n] */ const int64_t *perm, /* [n] */ int64_t n, int d,
				double *dst /* [d][n] */)
{
	gather_soa_kernel<<<grid_for(n), kBlock>>>(src, perm, n, d, dst);
	CHECK_LAUNCH("gather_soa_kernel");
}

/*
 * order: the rows 0 .. n-1 sorted by keys[0, end_bit) (stable), descending
 * or ascending.
 */
void sort_rows(Workspace &w, const uint64_t *keys, /* [n] */ int64_t n, int end_bit, bool descending,
			   int64_t *order /* [n] out */)
{
	DeviceBuffer<uint64_t> kb((size_t) n, "sort keys");
	DeviceBuffer<int64_t> va((size_t) n, "row numbers");
	size_t		bytes = 0;

	iota_kernel<<<grid_for(n), kBlock>>>(va.get(), n);
	CHECK_LAUNCH("iota_kernel");
	if (descending)
	{
		CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, keys, kb.get(), va.get(),
														   order, n, 0, end_bit));
		CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(w.temp.get(bytes), bytes, keys, kb.get(),
														   va.get(), order, n, 0, end_bit));
		CHECK_LAUNCH("SortPairsDescending");
	}
	else
	{
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, kb.get(), va.get(), order, n,
												 0, end_bit));
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(w.temp.get(bytes), bytes, keys, kb.get(), va.get(),
												 order, n, 0, end_bit));
		CHECK_LAUNCH("SortPairs");
	}
}

namespace {

/* ---------------------------------------------------------------- the grid index */

/* Linear grid cell of each point, and the number of points per cell. */
__global__ void cell_kernel(gc_dp_grid g, const double *xs, /* [d][n] */ int64_t n,
							uint64_t *cell, /* [n] */ unsigned long long *counts /* [ncells + 1] */)
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

/* The range [mn[k], mx[k]] of each dimension (CUB reductions). */
void grid_box(Workspace &w, const double *xs, /* [d][n] */
			  double *mn, /* [d] out */ double *mx /* [d] out */)
{
	const int64_t n = w.n;
	DeviceBuffer<double> red(2, "the bounding box");

	for (int k = 0; k < w.d; k++)
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceReduce::Min(nullptr, bytes, xs + (int64_t) k * n, red.get(), n));
		CUDA_TRY(cub::DeviceReduce::Min(w.temp.get(bytes), bytes, xs + (int64_t) k * n, red.get(), n));
		bytes = 0;
		CUDA_TRY(cub::DeviceReduce::Max(nullptr, bytes, xs + (int64_t) k * n, red.get() + 1, n));
		CUDA_TRY(cub::DeviceReduce::Max(w.temp.get(bytes), bytes, xs + (int64_t) k * n, red.get() + 1, n));
		double		h2[2];

		CUDA_TRY(cudaMemcpy(h2, red.get(), sizeof(h2), cudaMemcpyDeviceToHost));
		mn[k] = h2[0];
		mx[k] = h2[1];
	}
}

} // namespace

/*
 * w.grid: the cells of gc_dp_grid_shape over the box of gc_dp_grid_box (a
 * sample of the host rows), the points sorted by cell (ranks not yet known).
 */
void build_grid(Workspace &w, const double *xs /* [d][n] */)
{
	const int64_t n = w.n;
	const int	d = w.d;
	DevGrid    &G = w.grid;
	double		mn[GC_DP_GRID_MAX_DIM],
				mx[GC_DP_GRID_MAX_DIM];

	double		lo[GC_DP_GRID_MAX_DIM],
				hi[GC_DP_GRID_MAX_DIM];

	grid_box(w, xs, mn, mx);
	if (gc_dp_grid_box(w.hx, w.dtype, n, d, mn, mx, lo, hi) != 0)
		fail(GC_ERR_OUT_OF_MEMORY, "out of host memory planning the density peaks grid");
	memset(&G.g, 0, sizeof(G.g));
	G.ncells = gc_dp_grid_shape(&G.g, d, n, mn, mx, lo, hi);

	G.cell_start.reset((size_t) G.ncells + 1, "the grid cells");
	G.xg.reset((size_t) n * d, "the points in cell order");
	G.order.reset((size_t) n, "the cell order");
	{
		DeviceBuffer<uint64_t> ka((size_t) n, "cell keys");
		DeviceBuffer<unsigned long long> counts((size_t) G.ncells + 1, "the grid cells");
		size_t		bytes = 0;
		int			bits = 1;

		while (bits < 63 && (INT64_C(1) << bits) <= G.ncells)
			bits++;
		CUDA_TRY(cudaMemset(counts.get(), 0, counts.bytes()));
		cell_kernel<<<grid_for(n), kBlock>>>(G.g, xs, n, ka.get(), counts.get());
		CHECK_LAUNCH("cell_kernel");
		sort_rows(w, ka.get(), n, bits, false, G.order.get());
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts.get(),
											   (unsigned long long *) G.cell_start.get(), G.ncells + 1));
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(w.temp.get(bytes), bytes, counts.get(),
											   (unsigned long long *) G.cell_start.get(), G.ncells + 1));
		CHECK_LAUNCH("ExclusiveSum");
	}
	gather_soa(xs, G.order.get(), n, d, G.xg.get());
	G.g.cell_start = G.cell_start.get();
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		G.g.xs[k] = k < d ? G.xg.get() + (int64_t) k * n : nullptr;
	G.g.rank = nullptr;
}

} // namespace dpeaks
} // namespace gc
