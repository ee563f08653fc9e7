/*
 * dpeaks_assign.cu
 *    Phase assign of the GPU density peaks (Rodriguez and Laio,
 *    "Clustering by fast search and find of density peaks"): the centres,
 *    by a CUB sort of gamma = rho * delta or by the thresholds rho_min and
 *    delta_min, numbered by a scan in density order; every other point
 *    takes the cluster of its nearest denser point, by pointer jumping
 *    along those links.  The answer is written by row.
 */
#include "dpeaks.cuh"

#include <cub/cub.cuh>

#include <cmath>

namespace gc {
namespace dpeaks {
namespace {

/* ---------------------------------------------------------------- centres */

__global__ void gamma_key_kernel(const double *rho_r, /* [n] */ const double *bd2_r, /* [n] */
								 int64_t n, gc_metric metric, uint64_t *key, /* [n - 1] */
								 int64_t *val /* [n - 1] */)
{
	for (int64_t r = 1 + (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		key[r - 1] = gc_dp_key(rho_r[r] * gc_metric_distance(metric, bd2_r[r]));
		val[r - 1] = r;
	}
}

__global__ void mark_top_kernel(const int64_t *val, /* [m] */ int64_t m, int32_t *center_r /* [n] */)
{
	for (int64_t s = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; s < m;
		 s += (int64_t) gridDim.x * blockDim.x)
		center_r[val[s]] = 1;
}

__global__ void threshold_kernel(const double *rho_r, /* [n] */ const double *bd2_r, /* [n] */
								 int64_t n, gc_metric metric, double rho_min, double delta_min,
								 int32_t *center_r /* [n] */)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
		center_r[r] = (r == 0 || (rho_r[r] >= rho_min &&
								  gc_metric_distance(metric, bd2_r[r]) >= delta_min)) ? 1 : 0;
}

/* center_r: the densest point and the n_clusters - 1 others of largest gamma (ties by rank). */
void top_gamma_centers(Workspace &w, int32_t *center_r /* [n] */)
{
	const int64_t n = w.n;
	const int32_t nc = w.params.n_clusters;
	int32_t		one = 1;

	CUDA_TRY(cudaMemset(center_r, 0, sizeof(int32_t) * (size_t) n));
	CUDA_TRY(cudaMemcpy(center_r, &one, sizeof(one), cudaMemcpyHostToDevice));
	if (nc <= 1)
		return;

	const int64_t m = n - 1;
	DeviceBuffer<uint64_t> ka((size_t) m, "gamma keys"), kb((size_t) m, "gamma keys");
	DeviceBuffer<int64_t> va((size_t) m, "gamma order"), vb((size_t) m, "gamma order");
	size_t		bytes = 0;

	gamma_key_kernel<<<grid_for(m), kBlock>>>(w.rho_r.get(), w.bd2_r.get(), n, w.metric, ka.get(),
											  va.get());
	CHECK_LAUNCH("gamma_key_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, ka.get(), kb.get(), va.get(),
													   vb.get(), m));
	CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(w.temp.get(bytes), bytes, ka.get(), kb.get(),
													   va.get(), vb.get(), m));
	CHECK_LAUNCH("SortPairsDescending");
	mark_top_kernel<<<grid_for(nc - 1), kBlock>>>(vb.get(), nc - 1, center_r);
	CHECK_LAUNCH("mark_top_kernel");
}

/* cid_r: the number of each centre (an exclusive scan of center_r); w.n_centers. */
void number_centers(Workspace &w, const int32_t *center_r, /* [n] */ int32_t *cid_r /* [n] */)
{
	const int64_t n = w.n;
	size_t		bytes = 0;
	int32_t		last[2] = {0, 0};

	CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, center_r, cid_r, n));
	CUDA_TRY(cub::DeviceScan::ExclusiveSum(w.temp.get(bytes), bytes, center_r, cid_r, n));
	CHECK_LAUNCH("ExclusiveSum");
	CUDA_TRY(cudaMemcpy(&last[0], cid_r + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(&last[1], center_r + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));
	w.n_centers = (int64_t) last[0] + last[1];
}

/* ---------------------------------------------------------------- links */

__global__ void parent_init_kernel(const int32_t *center_r, /* [n] */ const int64_t *nbr_r, /* [n] */
								   int64_t n, int64_t *parent /* [n] */)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
		parent[r] = center_r[r] ? r : nbr_r[r];
}

/* One round of pointer jumping toward the centres. */
__global__ void jump_kernel(int64_t *parent, /* [n] */ int64_t n, int *changed /* [1] */)
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

/* parent: for every rank, the rank of its centre. */
void follow_links(Workspace &w, const int32_t *center_r, /* [n] */ int64_t *parent /* [n] */)
{
	const int64_t n = w.n;
	DeviceBuffer<int> changed(1, "the jump flag");

	parent_init_kernel<<<grid_for(n), kBlock>>>(center_r, w.nbr_r.get(), n, parent);
	CHECK_LAUNCH("parent_init_kernel");
	for (int round = 0; round < 80; round++)
	{
		int			h = 0;

		CUDA_TRY(cudaMemset(changed.get(), 0, sizeof(int)));
		jump_kernel<<<grid_for(n), kBlock>>>(parent, n, changed.get());
		CHECK_LAUNCH("jump_kernel");
		CUDA_TRY(cudaMemcpy(&h, changed.get(), sizeof(int), cudaMemcpyDeviceToHost));
		if (!h)
			break;
		if (round == 79)
			fail(GC_ERR_INTERNAL, "pointer jumping did not converge");
	}
}

/* ---------------------------------------------------------------- the answer by row */

__global__ void output_kernel(const int64_t *by_rank, /* [n] */ const int64_t *parent, /* [n] */
							  const int32_t *cid_r, /* [n] */ const int32_t *center_r, /* [n] */
							  const double *bd2_r, /* [n] */ int64_t n, gc_metric metric,
							  int32_t *cluster, /* [n] by row */ uint8_t *is_center, /* [n] by row */
							  double *delta /* [n] by row */)
{
	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < n;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = by_rank[r];

		cluster[i] = cid_r[parent[r]];
		is_center[i] = (uint8_t) center_r[r];
		if (r > 0)
			delta[i] = gc_metric_distance(metric, bd2_r[r]);
	}
}

/* w.cluster, w.is_center and w.delta by row. */
void write_answer(Workspace &w, const int64_t *parent, /* [n] */ const int32_t *cid_r, /* [n] */
				  const int32_t *center_r /* [n] */)
{
	const int64_t n = w.n;

	w.cluster.reset((size_t) n, "the labels");
	w.is_center.reset((size_t) n, "the centre flags");
	w.delta.reset((size_t) n, "the deltas");
	{
		double		d0 = 0.0;
		int64_t		top = 0;
		unsigned long long fk = 0;

		/* delta of the densest point, at its row */
		CUDA_TRY(cudaMemcpy(&top, w.by_rank.get(), sizeof(top), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(&fk, w.bd2_r.get(), sizeof(fk), cudaMemcpyDeviceToHost));
		d0 = gc_metric_distance(w.metric, gc_dp_unkey(fk));
		CUDA_TRY(cudaMemcpy(w.delta.get() + top, &d0, sizeof(double), cudaMemcpyHostToDevice));
	}
	output_kernel<<<grid_for(n), kBlock>>>(w.by_rank.get(), parent, cid_r, center_r, w.bd2_r.get(), n,
										   w.metric, w.cluster.get(), w.is_center.get(), w.delta.get());
	CHECK_LAUNCH("output_kernel");
}

} // namespace

/*
 * Phase assign: the centres, w.n_centers and the answer by row.  The grid
 * index and the points are released first.
 */
void assign_phase(Workspace &w)
{
	const int64_t n = w.n;

	cancel_point(w);
	w.grid.release();
	w.xr.release();

	DeviceBuffer<int32_t> center_r((size_t) n, "the centres");
	DeviceBuffer<int32_t> cid_r((size_t) n, "the centre numbers");
	DeviceBuffer<int64_t> parent((size_t) n, "the cluster links");

	if (w.params.n_clusters > 0)
		top_gamma_centers(w, center_r.get());
	else
	{
		threshold_kernel<<<grid_for(n), kBlock>>>(w.rho_r.get(), w.bd2_r.get(), n, w.metric, w.params.rho_min,
												  w.params.delta_min, center_r.get());
		CHECK_LAUNCH("threshold_kernel");
	}
	number_centers(w, center_r.get(), cid_r.get());
	follow_links(w, center_r.get(), parent.get());
	write_answer(w, parent.get(), cid_r.get(), center_r.get());
	CUDA_TRY(cudaDeviceSynchronize());
}

} // namespace dpeaks
} // namespace gc
