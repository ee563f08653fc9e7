/*
 * dbscan_index.cu
 *    Phase index of the GPU DBSCAN: the uniform grid that stands in for the
 *    bounding volume hierarchy of FDBSCAN (Prokopenko, Lebrun-Grandié and
 *    Arndt, "Fast tree-based algorithms for DBSCAN on GPUs"), built on the
 *    device from the uploaded points:
 *
 *    bounding box   min and max of the grid dimensions (for d > 3 chosen
 *                   on the host from a sample, gc_grid_choose_dims), and
 *                   the check that every coordinate is finite;
 *    grid           planned by gc_grid_plan_make (common/dbscan_grid.h, the
 *                   same choices as the CPU core), fine or coarse as an
 *                   estimate from a sample says, or as tuning.dbscan_grid
 *                   forces; a box too wide for the direct numbering (far
 *                   outliers) gets its maps, built here as the CPU core's
 *                   gc_grid_maps_build builds them (values sorted with
 *                   CUB, made unique, the side chosen by
 *                   gc_grid_maps_side with each try's steps summed on
 *                   the device, the shortened steps summed);
 *    sort           the cell key of each point, a stable CUB radix sort of
 *                   the points by key;
 *    cells          the points gathered in cell order, cells as runs of the
 *                   sorted order (a CUB scan), their starts and keys;
 *    hash table     open addressing from cell key to cell;
 *    forest         the disjoint-set forest, the points of dense cells
 *                   already core and joined.
 */
#include "dbscan_device.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gc {
namespace dbscan {
namespace {

constexpr int kBboxBlocks = 512;

/* ------------------------------------------------------------------ bounding box */

/* The grid dimensions, by value. */
struct Dims
{
	int32_t		f[kMaxGridDims];
};

/* Per-block min/max over the grid dimensions (as doubles, exact), and a count of non-finite values. */
template <typename T>
__global__ void bbox_kernel(const T *x, /* [n, d] */ int64_t n, int d, int g, Dims dims,
							double *part_lo, /* [blocks, g] */ double *part_hi, /* [blocks, g] */
							unsigned long long *nonfinite /* [1] */)
{
	double		lo[kMaxGridDims], hi[kMaxGridDims];
	unsigned long long bad = 0;

	for (int k = 0; k < kMaxGridDims; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		const T    *p = x + (size_t) i * d;

		for (int k = 0; k < d; k++)
		{
			T			v = p[k];

			if (!isfinite(v))
				bad++;
		}
		for (int k = 0; k < g; k++)
		{
			double		v = (double) p[dims.f[k]];

			lo[k] = fmin(lo[k], v);
			hi[k] = fmax(hi[k], v);
		}
	}

	typedef cub::BlockReduce<double, kBlock> Reduce;
	__shared__ typename Reduce::TempStorage tmp;

	for (int k = 0; k < g; k++)
	{
		double		a = Reduce(tmp).Reduce(lo[k], cuda::minimum<double>());

		__syncthreads();
		double		b = Reduce(tmp).Reduce(hi[k], cuda::maximum<double>());

		__syncthreads();
		if (threadIdx.x == 0)
		{
			part_lo[blockIdx.x * g + k] = a;
			part_hi[blockIdx.x * g + k] = b;
		}
	}
	if (bad)
		atomicAdd(nonfinite, bad);
}

/*
 * The grid dimensions (w.dims, from a sample of the host rows) and their
 * box, in one pass that also rejects NaN and infinite coordinates (a
 * non-finite value in the sample can only spoil the choice of dimensions of
 * a call that this pass then refuses).
 */
void bounding_box(Workspace &w, double *lo, /* [g] out */ double *hi /* [g] out */)
{
	const int32_t g = w.d < kMaxGridDims ? w.d : kMaxGridDims;
	DeviceBuffer<double> part((size_t) kBboxBlocks * g * 2, "the bounding box");
	DeviceBuffer<unsigned long long> bad(1, "the bounding box");
	double		hpart[kBboxBlocks * kMaxGridDims * 2];
	unsigned long long hbad = 0;
	Dims		dims;

	if (gc_grid_choose_dims(w.hx, w.dtype, w.n, w.d, w.radius, w.dims) != 0)
		fail(GC_ERR_OUT_OF_MEMORY, "out of host memory planning the DBSCAN grid");
	for (int k = 0; k < kMaxGridDims; k++)
		dims.f[k] = w.dims[k];
	CUDA_TRY(cudaMemset(bad.get(), 0, sizeof(unsigned long long)));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		bbox_kernel<T><<<kBboxBlocks, kBlock>>>(w.x<T>().get(), w.n, w.d, g, dims, part.get(),
												 part.get() + kBboxBlocks * g, bad.get());
	});
	CHECK_LAUNCH("bbox_kernel");
	CUDA_TRY(cudaMemcpy(hpart, part.get(), part.bytes(), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(&hbad, bad.get(), sizeof(hbad), cudaMemcpyDeviceToHost));
	if (hbad)
		fail(GC_ERR_INVALID_ARGUMENT,
			 "the points hold %llu non-finite coordinates (NaN or infinity)", hbad);
	for (int k = 0; k < g; k++)
	{
		double		l = INFINITY, h = -INFINITY;

		for (int b = 0; b < kBboxBlocks; b++)
		{
			l = std::min(l, hpart[b * g + k]);
			h = std::max(h, hpart[kBboxBlocks * g + b * g + k]);
		}
		lo[k] = l;
		hi[k] = h;
	}
}

/* ------------------------------------------------------------------ grid choice */

/*
 * Estimating the share of points in dense cells before sorting: the cells of
 * an evenly spaced sample of points go into a small hash table, every point
 * adds one to its cell's count when the cell is there (counts stop at
 * min_pts), and the share of sample points whose cell reached min_pts is the
 * estimate.
 */
constexpr double kDenseShare = 0.5;	/* see choose_grid */
constexpr int kSample = 1 << 16;
constexpr unsigned long long kSampleSlots = 1ULL << 17;
constexpr unsigned long long kEmptyKey = ~0ULL;

__device__ __forceinline__ unsigned long long sample_slot(const unsigned long long *skey, /* [kSampleSlots] */
														  unsigned long long key)
{
	unsigned long long h = hash_key(key) & (kSampleSlots - 1);

	while (skey[h] != key && skey[h] != kEmptyKey)
		h = (h + 1) & (kSampleSlots - 1);
	return h;
}

template <typename T>
__global__ void sample_insert_kernel(GridParams gp, const T *x, /* [n, d] */ int64_t stride,
									 int32_t s, unsigned long long *skey /* [kSampleSlots] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= s)
		return;
	unsigned long long key = point_key(gp, x, (int64_t) i * stride);
	unsigned long long h = hash_key(key) & (kSampleSlots - 1);

	for (;;)
	{
		unsigned long long old = atomicCAS(skey + h, kEmptyKey, key);

		if (old == kEmptyKey || old == key)
			return;
		h = (h + 1) & (kSampleSlots - 1);
	}
}

template <typename T>
__global__ void sample_count_kernel(GridParams gp, const T *x, /* [n, d] */
									const unsigned long long *skey, /* [kSampleSlots] */
									int32_t *scount /* [kSampleSlots] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= gp.n)
		return;
	unsigned long long key = point_key(gp, x, i);
	unsigned long long h = sample_slot(skey, key);

	if (skey[h] == key && *((volatile int32_t *) scount + h) < gp.min_pts)
		atomicAdd(scount + h, 1);
}

template <typename T>
__global__ void sample_tally_kernel(GridParams gp, const T *x, /* [n, d] */ int64_t stride,
									int32_t s, const unsigned long long *skey, /* [kSampleSlots] */
									const int32_t *scount, /* [kSampleSlots] */
									unsigned long long *dense /* [1] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= s)
		return;
	unsigned long long h = sample_slot(skey, point_key(gp, x, (int64_t) i * stride));

	if (scount[h] >= gp.min_pts)
		atomicAdd(dense, 1ULL);
}

/* The estimated share of points in dense cells of the grid planned in w.gp. */
double dense_share_estimate(Workspace &w)
{
	const int32_t n = w.n;
	const int32_t s = std::min<int32_t>(n, kSample);
	const int64_t stride = n / s;
	DeviceBuffer<unsigned long long> skey(kSampleSlots + 1, "the density sample");
	DeviceBuffer<int32_t> scount(kSampleSlots, "the density sample");
	unsigned long long dense = 0;

	CUDA_TRY(cudaMemset(skey.get(), 0xff, sizeof(unsigned long long) * kSampleSlots));
	CUDA_TRY(cudaMemset(skey.get() + kSampleSlots, 0, sizeof(unsigned long long)));
	CUDA_TRY(cudaMemset(scount.get(), 0, scount.bytes()));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		const T    *x = w.x<T>().get();

		sample_insert_kernel<T><<<grid_for(s), kBlock>>>(w.gp, x, stride, s, skey.get());
		CHECK_LAUNCH("sample_insert_kernel");
		sample_count_kernel<T><<<grid_for(n), kBlock>>>(w.gp, x, skey.get(), scount.get());
		CHECK_LAUNCH("sample_count_kernel");
		sample_tally_kernel<T><<<grid_for(s), kBlock>>>(w.gp, x, stride, s, skey.get(),
														scount.get(), skey.get() + kSampleSlots);
		CHECK_LAUNCH("sample_tally_kernel");
	});
	CUDA_TRY(cudaMemcpy(&dense, skey.get() + kSampleSlots, sizeof(dense), cudaMemcpyDeviceToHost));
	return (double) dense / s;
}

/* ------------------------------------------------------------------ maps */

/* The order keys of the values of feature f (-0 as +0). */
template <typename T>
__global__ void value_key_kernel(const T *x, /* [n, d] */ int32_t n, int d, int f,
								 unsigned long long *key /* [n] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		key[i] = gc_order_key((double) x[(size_t) i * d + f] + 0.0);
}

/* The distinct values from their sorted order keys. */
__global__ void map_value_kernel(const unsigned long long *uniq, /* [m] */ int32_t m, double *val /* [m] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < m)
		val[j] = gc_order_value(uniq[j]);
}

/* The steps between consecutive distinct values at this side (gc_grid_value_step). */
__global__ void map_step_kernel(const double *val, /* [m] */ int32_t m, double side, int f64,
								int64_t *step /* [m] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < m)
		step[j] = j == 0 ? 0 : gc_grid_value_step(val[j - 1], val[j], side, f64);
}

/*
 * The sorted distinct values of grid dimension k into w.map_val[k] (one
 * CUB radix sort, then unique), as gc_grid_map_values; returns their
 * number.
 */
int32_t map_values(Workspace &w, const gc_grid_plan &plan, int k)
{
	const int32_t n = w.n;
	DeviceBuffer<unsigned long long> a(n, "the grid maps");
	DeviceBuffer<unsigned long long> b(n, "the grid maps");
	DeviceBuffer<int32_t> count(1, "the grid maps");
	size_t		sort_bytes = 0,
				unique_bytes = 0;
	int32_t		m = 0;

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		value_key_kernel<T><<<grid_for(n), kBlock>>>(w.x<T>().get(), n, w.d, plan.dim[k], a.get());
	});
	CHECK_LAUNCH("value_key_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, a.get(), b.get(), n));
	CUDA_TRY(cub::DeviceSelect::Unique(nullptr, unique_bytes, b.get(), a.get(), count.get(), n));
	{
		DeviceBuffer<char> tmp(std::max<size_t>(std::max(sort_bytes, unique_bytes), 1), "the grid maps");

		CUDA_TRY(cub::DeviceRadixSort::SortKeys(tmp.get(), sort_bytes, a.get(), b.get(), n));
		CUDA_TRY(cub::DeviceSelect::Unique(tmp.get(), unique_bytes, b.get(), a.get(), count.get(), n));
		CHECK_LAUNCH("the grid maps");
	}
	CUDA_TRY(cudaMemcpy(&m, count.get(), sizeof(m), cudaMemcpyDeviceToHost));
	w.map_val[k].reset(m, "the grid maps");
	map_value_kernel<<<grid_for(m), kBlock>>>(a.get(), m, w.map_val[k].get());
	CHECK_LAUNCH("map_value_kernel");
	return m;
}

/*
 * The grid coordinates of the m distinct values of grid dimension k at the
 * plan's side into w.map_cell[k] (the steps summed with CUB), as
 * gc_grid_map_cells; returns the extent.
 */
int64_t map_cells(Workspace &w, gc_grid_plan &plan, int k, int32_t m)
{
	size_t		scan_bytes = 0;
	int64_t		last = 0;
	DeviceBuffer<int64_t> step(m, "the grid maps");

	w.map_cell[k].reset(m, "the grid maps");
	map_step_kernel<<<grid_for(m), kBlock>>>(w.map_val[k].get(), m, plan.side, plan.f64, step.get());
	CHECK_LAUNCH("map_step_kernel");
	CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, step.get(), w.map_cell[k].get(), m));
	{
		DeviceBuffer<char> tmp(std::max<size_t>(scan_bytes, 1), "the grid maps");

		CUDA_TRY(cub::DeviceScan::InclusiveSum(tmp.get(), scan_bytes, step.get(), w.map_cell[k].get(), m));
		CHECK_LAUNCH("the grid maps");
	}
	CUDA_TRY(cudaMemcpy(&last, w.map_cell[k].get() + m - 1, sizeof(last), cudaMemcpyDeviceToHost));
	plan.nmap[k] = m;
	plan.map_val[k] = w.map_val[k].get();
	plan.map_cell[k] = w.map_cell[k].get();
	return last + 1;
}

/*
 * The sum of the steps between consecutive distinct values at this side
 * (gc_grid_values_extent less one), added to *sum by one 64-bit atomic
 * per block: integers, so the same sum as the host's in any order.
 */
__global__ void map_extent_kernel(const double *val, /* [m] */ int32_t m, double side, int f64,
								  unsigned long long *sum /* [1] */)
{
	using BlockReduce = cub::BlockReduce<long long, kBlock>;
	__shared__ typename BlockReduce::TempStorage tmp;
	long long	s = 0;

	for (int64_t j = blockIdx.x * (int64_t) blockDim.x + threadIdx.x + 1; j < m;
		 j += (int64_t) gridDim.x * blockDim.x)
		s += gc_grid_value_step(val[j - 1], val[j], side, f64);
	s = BlockReduce(tmp).Sum(s);
	if (threadIdx.x == 0 && s != 0)
		atomicAdd(sum, (unsigned long long) s);
}

/* gc_grid_extent_fn on the device: the extent of grid dimension k from w.map_val[k]. */
struct DeviceExtent
{
	Workspace  *w;
	const gc_grid_plan *plan;
	const int32_t *m;
	unsigned long long *sum;	/* [1] on the device */
};

int64_t device_extent(void *arg, int k, double side)
{
	const DeviceExtent *a = static_cast<const DeviceExtent *>(arg);
	unsigned long long s = 0;
	const int32_t m = a->m[k];

	CUDA_TRY(cudaMemset(a->sum, 0, sizeof(s)));
	map_extent_kernel<<<std::max(1u, std::min(grid_for(m), 1024u)), kBlock>>>(
		a->w->map_val[k].get(), m, side, a->plan->f64, a->sum);
	CHECK_LAUNCH("map_extent_kernel");
	CUDA_TRY(cudaMemcpy(&s, a->sum, sizeof(s), cudaMemcpyDeviceToHost));
	return 1 + (int64_t) s;
}

/*
 * Finishes a mapped plan as gc_grid_maps_build does: the distinct values of
 * each grid dimension on the device, the side (gc_grid_maps_side, shared
 * with the CPU, each of its tries summed on the device), then the tables at
 * that side on the device.
 */
void build_maps(Workspace &w, gc_grid_plan &plan, const double *lo, const double *hi)
{
	const double side0 = plan.side;
	int32_t		m[kMaxGridDims] = {0, 0, 0};
	DeviceBuffer<unsigned long long> sum(1, "the grid maps");

	for (int k = 0; k < plan.g; k++)
	{
		w.call.check_cancel();
		m[k] = map_values(w, plan, k);
	}

	DeviceExtent ext = {&w, &plan, m, sum.get()};

	plan.side = gc_grid_maps_side(&plan, device_extent, &ext, w.call.exec.cancel, w.call.exec.cancel_arg);
	if (plan.side == 0.0)
		fail(GC_ERR_CANCELLED, "cancelled while planning the grid");
	for (int k = 0; k < plan.g; k++)
		plan.extent[k] = map_cells(w, plan, k, m[k]);
	require(gc_grid_maps_done(&plan, side0, lo, hi, error_record()));
}

/* w.gp: the grid of common/dbscan_grid.h over the box [lo, hi]. */
void make_grid(Workspace &w, const double *lo, /* [g] */ const double *hi, /* [g] */ bool coarse)
{
	gc_grid_plan plan;

	require(gc_grid_plan_make(&plan, w.d, w.dtype, w.radius, w.bound, w.dims, lo, hi, coarse ? 1 : 0,
							  error_record()));
	if (plan.mapped)
		build_maps(w, plan, lo, hi);
	w.gp = grid_params(plan, w.n, w.min_pts);
	w.gp.abort = w.abort.device();
}

/*
 * With d <= 3 the fine DenseBox grid is used unless an estimate from a
 * sample says that less than kDenseShare of the points lie in dense cells:
 * then its 125-cell neighbourhood costs more than the dense cells save, and
 * a grid of side eps (27 cells, no dense cells) is used.  tuning.dbscan_grid
 * forces one of the two (for benchmarks and tests; the answer is the same).
 */
void choose_grid(Workspace &w, const double *lo, /* [g] */ const double *hi /* [g] */)
{
	const gc_dbscan_grid forced = w.call.tuning.dbscan_grid;

	make_grid(w, lo, hi, forced == GC_DBSCAN_GRID_COARSE);
	if (w.gp.plan.dense_ok && forced != GC_DBSCAN_GRID_FINE)
	{
		w.dense_share = dense_share_estimate(w);
		if (w.dense_share < kDenseShare)
			make_grid(w, lo, hi, true);
	}
}

/* ------------------------------------------------------------------ sort by cell */

template <typename T>
__global__ void key_kernel(GridParams gp, const T *x, /* [n, d] */
						   unsigned long long *key, /* [n] */ int32_t *row /* [n] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= gp.n)
		return;
	key[i] = point_key(gp, x, i);
	row[i] = i;
}

/* Bits of the largest cell key. */
int key_bits(const GridParams &gp)
{
	unsigned long long cells = 1;

	for (int k = 0; k < gp.plan.g; k++)
		cells *= (unsigned long long) gp.plan.extent[k];
	int			bits = 1;

	while (bits < 64 && (cells - 1) >> bits)
		bits++;
	return bits;
}

/* w.keys and w.row: the cell keys, and the rows sorted by them (stable). */
void sort_by_cell(Workspace &w)
{
	const int32_t n = w.n;
	DeviceBuffer<unsigned long long> keys_b(n, "cell keys");
	DeviceBuffer<int32_t> rows_b(n, "row numbers");

	w.keys.reset(n, "cell keys");
	w.row.reset(n, "row numbers");
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		key_kernel<T><<<grid_for(n), kBlock>>>(w.gp, w.x<T>().get(), w.keys.get(), w.row.get());
	});
	CHECK_LAUNCH("key_kernel");
	w.call.check_cancel();

	cub::DoubleBuffer<unsigned long long> k(w.keys.get(), keys_b.get());
	cub::DoubleBuffer<int32_t> v(w.row.get(), rows_b.get());
	int			bits = key_bits(w.gp);
	size_t		bytes = 0;

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, bits));
	DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the sort");
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, k, v, n, 0, bits));
	CHECK_LAUNCH("DeviceRadixSort");
	if (k.Current() != w.keys.get())
		std::swap(w.keys, keys_b);
	if (v.Current() != w.row.get())
		std::swap(w.row, rows_b);
}

/* ------------------------------------------------------------------ cell table */

/* xs[j] = x[row[j]]: the points in cell order; flag[j] = 1 where a cell starts. */
template <typename T>
__global__ void gather_kernel(int32_t n, int d, const T *x, /* [n, d] */
							  const int32_t *row, /* [n] */ const unsigned long long *key, /* [n] */
							  T *xs, /* [n, d] */ int32_t *flag /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	const T    *src = x + (size_t) row[j] * d;
	T		   *dst = xs + (size_t) j * d;

	for (int k = 0; k < d; k++)
		dst[k] = src[k];
	flag[j] = (j == 0 || key[j] != key[j - 1]) ? 1 : 0;
}

/* After the inclusive scan cellid[j] - 1 is the cell of j: record cell starts and keys. */
__global__ void cell_kernel(int32_t n, const unsigned long long *key, /* [n] */
							int32_t *cellid, /* [n] in: inclusive scan, out: cell */
							int32_t *start, /* [ncells + 1] */ unsigned long long *ckey /* [ncells] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		c = cellid[j] - 1;

	cellid[j] = c;
	if (j == 0 || key[j] != key[j - 1])
	{
		start[c] = j;
		ckey[c] = key[j];
	}
	if (j == n - 1)
		start[c + 1] = n;
}

/* w.xs, w.cellid, w.start, w.ckey; the points by row and the point keys are released. */
void build_cells(Workspace &w)
{
	const int32_t n = w.n;

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		w.xs<T>().reset((size_t) n * w.d, "the sorted points");
		w.cellid.reset(n, "cell numbers");
		gather_kernel<T><<<grid_for(n), kBlock>>>(n, w.d, w.x<T>().get(), w.row.get(), w.keys.get(),
												  w.xs<T>().get(), w.cellid.get());
		CHECK_LAUNCH("gather_kernel");
		w.x<T>().release();
	});
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, w.cellid.get(), w.cellid.get(), n));
		DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the cell scan");
		CUDA_TRY(cub::DeviceScan::InclusiveSum(tmp.get(), bytes, w.cellid.get(), w.cellid.get(), n));
		CHECK_LAUNCH("DeviceScan");
	}
	CUDA_TRY(cudaMemcpy(&w.ncells, w.cellid.get() + (n - 1), sizeof(int32_t),
						cudaMemcpyDeviceToHost));

	w.start.reset((size_t) w.ncells + 1, "cell starts");
	w.ckey.reset(w.ncells, "cell keys");
	cell_kernel<<<grid_for(n), kBlock>>>(n, w.keys.get(), w.cellid.get(), w.start.get(),
										 w.ckey.get());
	CHECK_LAUNCH("cell_kernel");
	w.keys.release();
}

/* ------------------------------------------------------------------ hash table */

__global__ void hash_kernel(GridParams gp, int32_t ncells, const int32_t *start, /* [ncells + 1] */
							const unsigned long long *ckey, /* [ncells] */
							int32_t *table, /* [mask + 1] */ unsigned long long mask,
							unsigned long long *dense_points /* [1] */)
{
	int32_t		c = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long dense = 0;

	if (c < ncells)
	{
		unsigned long long h = hash_key(ckey[c]) & mask;
		int32_t		size = start[c + 1] - start[c];

		while (atomicCAS(table + h, -1, c) != -1)
			h = (h + 1) & mask;
		if (cell_dense(gp, size))
			dense = (unsigned long long) size;
	}
	for (int o = 16; o > 0; o >>= 1)
		dense += __shfl_xor_sync(0xffffffffu, dense, o);
	if ((threadIdx.x & 31) == 0 && dense)
		atomicAdd(dense_points, dense);
}

/* w.table: cell key to cell; with tuning.debug the grid is printed to stderr. */
void build_hash(Workspace &w)
{
	const GridParams &gp = w.gp;

	w.slots = 16;
	while (w.slots < 2 * (unsigned long long) w.ncells)
		w.slots <<= 1;
	w.table.reset(w.slots, "the cell hash table");
	DeviceBuffer<unsigned long long> dense_points(1, "the dense cell count");

	CUDA_TRY(cudaMemset(w.table.get(), 0xff, w.table.bytes()));
	CUDA_TRY(cudaMemset(dense_points.get(), 0, sizeof(unsigned long long)));
	hash_kernel<<<grid_for(w.ncells), kBlock>>>(gp, w.ncells, w.start.get(), w.ckey.get(),
												w.table.get(), w.slots - 1, dense_points.get());
	CHECK_LAUNCH("hash_kernel");
	if (w.debug())
	{
		unsigned long long in_dense = 0;

		CUDA_TRY(cudaMemcpy(&in_dense, dense_points.get(), sizeof(in_dense),
							cudaMemcpyDeviceToHost));
		fprintf(stderr, "gpuclust dbscan grid: n=%d d=%d dims=%d,%d,%d %s side=%g extent=%lld,%lld,%lld "
				"cells=%d dense_ok=%d points_in_dense_cells=%llu estimated_share=%.4f "
				"offsets=%d rows=%d\n",
				w.n, w.d, gp.plan.dim[0], gp.plan.g > 1 ? gp.plan.dim[1] : -1,
				gp.plan.g > 2 ? gp.plan.dim[2] : -1, gp.plan.mapped ? "mapped" : "direct",
				gp.plan.side, (long long) gp.plan.extent[0],
				gp.plan.g > 1 ? (long long) gp.plan.extent[1] : 1LL,
				gp.plan.g > 2 ? (long long) gp.plan.extent[2] : 1LL, w.ncells, gp.plan.dense_ok,
				in_dense, w.dense_share, gp.plan.max_cells, gp.plan.nrows);
	}
}

/* ------------------------------------------------------------------ forest */

/* Points of dense cells are core and hang under their cell's first point. */
__global__ void init_kernel(GridParams gp, const int32_t *cellid, /* [n] */
							const int32_t *start, /* [ncells + 1] */
							int32_t *parent, /* [n] */ uint8_t *core /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= gp.n)
		return;
	int32_t		c = cellid[j];
	int32_t		s = start[c];

	if (cell_dense(gp, start[c + 1] - s))
	{
		parent[j] = s;
		core[j] = 1;
	}
	else
	{
		parent[j] = j;
		core[j] = gp.min_pts <= 1;
	}
}

/* w.parent, w.core (dense cells and min_pts <= 1 known), w.best. */
void init_forest(Workspace &w)
{
	const int32_t n = w.n;

	w.parent.reset(n, "the disjoint-set forest");
	w.core.reset(n, "core flags");
	w.best.reset(n, "border points");
	init_kernel<<<grid_for(n), kBlock>>>(w.gp, w.cellid.get(), w.start.get(), w.parent.get(),
										 w.core.get());
	CHECK_LAUNCH("init_kernel");
	CUDA_TRY(cudaDeviceSynchronize());
}

} // namespace

/* Phase index: from the points by row in w.x to the grid, the cell table and the forest. */
void index_phase(Workspace &w)
{
	double		lo[kMaxGridDims], hi[kMaxGridDims];

	w.call.check_cancel();
	bounding_box(w, lo, hi);
	choose_grid(w, lo, hi);
	sort_by_cell(w);
	build_cells(w);
	build_hash(w);
	init_forest(w);
}

} // namespace dbscan
} // namespace gc
