/*
 * dbscan_number.cu
 *    Phase number of the GPU DBSCAN: the answer by row.  Each cluster takes
 *    the lowest row among its members (atomicMin per root of the forest), a
 *    flag marks that row, and an inclusive CUB scan over rows numbers the
 *    clusters 0, 1, ... by first appearance, as the CPU core does; noise is
 *    -1.
 */
#include "dbscan_device.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <climits>

namespace gc {
namespace dbscan {
namespace {

/* root[j]: the set of core j, of border j's core point, or -1; minrow[root] = lowest member row. */
__global__ void root_kernel(int32_t n, const uint8_t *core, /* [n] */ int32_t *parent, /* [n] */
							int32_t *best_root, /* [n] in: best, out: root */
							const int32_t *row, /* [n] */ int32_t *minrow /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r;

	if (core[j])
		r = uf_find(parent, j);
	else
		r = best_root[j] >= 0 ? uf_find(parent, best_root[j]) : -1;
	best_root[j] = r;
	if (r >= 0)
		atomicMin(minrow + r, row[j]);
}

__global__ void fill_kernel(int32_t n, int32_t *a, /* [n] */ int32_t v)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < n)
		a[j] = v;
}

/* flag[row] = 1 where a row is the first member of its cluster. */
__global__ void first_kernel(int32_t n, const int32_t *root, /* [n] */ const int32_t *row, /* [n] */
							 const int32_t *minrow, /* [n] */ int32_t *flag /* [n] by row */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r = root[j];

	flag[row[j]] = (r >= 0 && minrow[r] == row[j]) ? 1 : 0;
}

/* The answer by row: cluster number (inclusive rank - 1) and core flag. */
__global__ void label_kernel(int32_t n, const int32_t *root, /* [n] */ const int32_t *row, /* [n] */
							 const int32_t *minrow, /* [n] */ const int32_t *rank, /* [n] by row */
							 const uint8_t *core, /* [n] */
							 int32_t *cluster, /* [n] by row */ uint8_t *is_core /* [n] by row */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r = root[j];
	int32_t		i = row[j];

	cluster[i] = r >= 0 ? rank[minrow[r]] - 1 : -1;
	is_core[i] = core[j];
}

} // namespace

/*
 * Phase number: w.cluster, w.is_core and w.n_clusters.  The index is
 * released first; w.best becomes the root of each point.
 */
void number_phase(Workspace &w)
{
	const int32_t n = w.n;

	w.call.check_cancel();
	w.xs_f32.release();
	w.xs_f64.release();
	w.table.release();
	w.ckey.release();
	w.start.release();
	w.cellid.release();

	DeviceBuffer<int32_t> minrow(n, "cluster numbers");

	w.cluster.reset(n, "cluster numbers");	/* first the flags of first members */
	DeviceBuffer<int32_t> rank(n, "cluster numbers");

	w.is_core.reset(n, "core flags");
	fill_kernel<<<grid_for(n), kBlock>>>(n, minrow.get(), INT_MAX);
	CHECK_LAUNCH("fill_kernel");
	root_kernel<<<grid_for(n), kBlock>>>(n, w.core.get(), w.parent.get(), w.best.get(),
										 w.row.get(), minrow.get());
	CHECK_LAUNCH("root_kernel");
	first_kernel<<<grid_for(n), kBlock>>>(n, w.best.get(), w.row.get(), minrow.get(),
										  w.cluster.get());
	CHECK_LAUNCH("first_kernel");
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, w.cluster.get(), rank.get(), n));
		DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the cluster scan");
		CUDA_TRY(cub::DeviceScan::InclusiveSum(tmp.get(), bytes, w.cluster.get(), rank.get(), n));
		CHECK_LAUNCH("DeviceScan");
	}
	/* The flags are read: their buffer takes the cluster numbers by row. */
	label_kernel<<<grid_for(n), kBlock>>>(n, w.best.get(), w.row.get(), minrow.get(), rank.get(),
										  w.core.get(), w.cluster.get(), w.is_core.get());
	CHECK_LAUNCH("label_kernel");
	CUDA_TRY(cudaMemcpy(&w.n_clusters, rank.get() + (n - 1), sizeof(int32_t),
						cudaMemcpyDeviceToHost));
}

} // namespace dbscan
} // namespace gc
