/*
 * kmeans_update.cu
 *    The centroids of the GPU k-means between two assignments: their float
 *    forms for the assignment kernels, the update from the rows' labels,
 *    the re-seeding of empty clusters, and at the end each row's exact
 *    distance to its centroid.
 *
 * The update is deterministic and copies no data to the host.  The fused
 * low-d kernel (kmeans_lowd.cu) leaves fixed-point integer sums, whose total
 * does not depend on the order of its atomics; otherwise each chunk's rows
 * are sorted by cluster (CUB radix sort) and each cluster's rows are summed
 * in double in a fixed order, in slices of GC_SLICE rows.  Both sum x - c_f,
 * the offset from the float centroid the assignment used, and the new
 * centroid is c_f + sum / count.
 */
#include <cub/cub.cuh>

#include "kmeans.cuh"

namespace gc {
namespace km {

namespace {

/* Per iteration: the float forms of the double centroids. */
__global__ void prep_centroids_kernel(const double *__restrict__ cen,	/* [k, d] */
									  int k, int d,
									  const double *__restrict__ mean,	/* [d] */
									  float *__restrict__ cen_f,	/* [k, d] raw, out */
									  float *__restrict__ cen_cf,	/* [k, d] centred, out or null */
									  float *__restrict__ cen_pad,	/* [k, maxd] out or null */
									  int maxd, int pad_centred,
									  float *__restrict__ cnorm,	/* [k] ||c'||^2 out or null */
									  float *__restrict__ cnrm /* [k] ||c'|| out or null */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	double		nn = 0.0;

	for (int t = 0; t < d; t++)
	{
		double		c = cen[(size_t) j * d + t];
		float		cf = (float) c;
		float		ccf = (float) (c - mean[t]);

		cen_f[(size_t) j * d + t] = cf;
		if (cen_cf)
			cen_cf[(size_t) j * d + t] = ccf;
		if (cen_pad)
			cen_pad[(size_t) j * maxd + t] = pad_centred ? ccf : cf;
		nn += (double) ccf * (double) ccf;
	}
	if (cen_pad)
		for (int t = d; t < maxd; t++)
			cen_pad[(size_t) j * maxd + t] = 0.0f;
	if (cnorm)
		cnorm[j] = (float) nn;
	if (cnrm)
		cnrm[j] = (float) sqrt(nn);
}

} // namespace

void prep_centroids(const Plan &plan, Centroids &cen)
{
	const int	maxd = plan.maxd;

	prep_centroids_kernel<<<grid_for(plan.k, 128, 1u << 30), 128>>>(
		cen.cen.get(), plan.k, plan.d, cen.mean_d.get(), cen.cen_f.get(),
		maxd == 0 ? cen.cen_cf.get() : nullptr,
		maxd > 0 ? cen.cen_pad.get() : nullptr, maxd, maxd >= 32,
		maxd >= 32 ? cen.cnorm.get() : maxd == 0 ? cen.cval.get() : nullptr,
		maxd == 0 ? cen.cnrm.get() : nullptr);
	CHECK_LAUNCH("prep_centroids_kernel");
}

namespace {

/* Sorted update, step 1: each cluster's run in the sorted labels. */
__global__ void segments_kernel(const int32_t *__restrict__ keys,	/* [rows] sorted labels */
								int64_t rows, int k,
								int64_t *__restrict__ seg_start,	/* [k] out */
								int64_t *__restrict__ seg_count,	/* [k] out */
								int *__restrict__ nslices,	/* [k] out */
								unsigned long long *__restrict__ counts /* [k] in/out */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	int64_t		lo = 0,
				hi = rows;

	while (lo < hi)
	{
		int64_t		mid = (lo + hi) / 2;

		if (keys[mid] < j)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t		start = lo;

	hi = rows;
	while (lo < hi)
	{
		int64_t		mid = (lo + hi) / 2;

		if (keys[mid] <= j)
			lo = mid + 1;
		else
			hi = mid;
	}
	seg_start[j] = start;
	seg_count[j] = lo - start;
	nslices[j] = (int) ((lo - start + GC_SLICE - 1) / GC_SLICE);
	counts[j] += (unsigned long long) (lo - start);
}

/*
 * Sorted update, step 2: block b sums one slice of one cluster's rows,
 * x - c_f, in double, in row order within each thread and in thread order
 * across the block.
 */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
slice_sum_kernel(const T *__restrict__ x,	/* [rows, d] */
				 int d, int k,
				 const int32_t *__restrict__ perm,	/* [rows] rows sorted by label */
				 const int64_t *__restrict__ seg_start,	/* [k] */
				 const int64_t *__restrict__ seg_count,	/* [k] */
				 const int *__restrict__ nslices,	/* [k] */
				 const int *__restrict__ slice_off, /* [k] exclusive scan of nslices */
				 const float *__restrict__ cen_f,	/* [k, d] */
				 double *__restrict__ partial /* [items, d] out */ )
{
	__shared__ double red[BLOCK];
	int			b = blockIdx.x;
	int			lo = 0,
				hi = k;

	/* the last cluster whose first slice is <= b */
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (slice_off[mid] <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	int			j = lo - 1;

	if (j < 0 || b >= slice_off[j] + nslices[j])
		return;
	int			s = b - slice_off[j];
	int64_t		r0 = seg_start[j] + (int64_t) s * GC_SLICE;
	int64_t		r1 = min(r0 + GC_SLICE, seg_start[j] + seg_count[j]);
	int			dt = 1;

	while (dt < d && dt < BLOCK)
		dt <<= 1;
	int			groups = BLOCK / dt;
	int			g = threadIdx.x / dt;
	int			t = threadIdx.x % dt;

	for (int base = 0; base < d; base += dt)
	{
		int			c = base + t;
		double		acc = 0.0;

		if (c < d)
		{
			double		ref = (double) cen_f[(size_t) j * d + c];

			for (int64_t r = r0 + g; r < r1; r += groups)
				acc += (double) x[(int64_t) perm[r] * d + c] - ref;
		}
		red[threadIdx.x] = acc;
		__syncthreads();
		if (g == 0 && c < d)
		{
			double		tot = 0.0;

			for (int q = 0; q < groups; q++)
				tot += red[q * dt + t];
			partial[(size_t) b * d + c] = tot;
		}
		__syncthreads();
	}
}

/* Sorted update, step 3: the slices of each cluster, in order, into the sums. */
__global__ void slice_reduce_kernel(const double *__restrict__ partial,	/* [items, d] */
									int k, int d,
									const int *__restrict__ nslices,	/* [k] */
									const int *__restrict__ slice_off,	/* [k] */
									double *__restrict__ sums /* [k, d] in/out */ )
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (int64_t) k * d)
		return;
	int			j = (int) (i / d);
	int			c = (int) (i % d);
	double		tot = 0.0;

	for (int s = 0; s < nslices[j]; s++)
		tot += partial[(size_t) (slice_off[j] + s) * d + c];
	sums[i] += tot;
}

} // namespace

void sort_workspace(const Plan &plan, SortWork &sw)
{
	const int64_t rows = plan.chunk_rows;
	const int	k = plan.k;
	int64_t		items = k + (rows + GC_SLICE - 1) / GC_SLICE;
	std::vector<int32_t> iota(rows);

	sw.keys.reset(rows, "sorted labels");
	sw.iota.reset(rows, "row numbers");
	sw.perm.reset(rows, "sorted rows");
	sw.seg_start.reset(k, "cluster runs");
	sw.seg_count.reset(k, "cluster runs");
	sw.nslices.reset(k, "cluster slices");
	sw.slice_off.reset(k, "cluster slices");
	sw.partial.reset((size_t) items * plan.d, "partial sums");
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sw.sort_tmp_bytes, (const int32_t *) nullptr,
											 (int32_t *) nullptr, (const int32_t *) nullptr,
											 (int32_t *) nullptr, (int) rows, 0,
											 std::max(1, gc_ceil_log2(k))));
	CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, sw.scan_tmp_bytes, (const int *) nullptr,
										   (int *) nullptr, k));
	sw.sort_tmp.reset(std::max<size_t>(sw.sort_tmp_bytes, 1), "sort workspace");
	sw.scan_tmp.reset(std::max<size_t>(sw.scan_tmp_bytes, 1), "scan workspace");
	for (int64_t i = 0; i < rows; i++)
		iota[i] = (int32_t) i;
	CUDA_TRY(cudaMemcpy(sw.iota.get(), iota.data(), sizeof(int32_t) * rows, cudaMemcpyHostToDevice));
}

namespace {

template <typename T>
void sorted_update_t(const Plan &plan, SortWork &sw, const T *x, int64_t rows, const int32_t *labels,
					 const Centroids &cen, Sums &sums, const Report &rep)
{
	const int	k = plan.k;
	const int	d = plan.d;
	int			bits = std::max(1, gc_ceil_log2(k));
	size_t		tb = sw.sort_tmp_bytes;
	int			items = k + (int) ((rows + GC_SLICE - 1) / GC_SLICE);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(sw.sort_tmp.get(), tb, labels, sw.keys.get(), sw.iota.get(),
											 sw.perm.get(), (int) rows, 0, bits));
	segments_kernel<<<grid_for(k, 128, 1u << 30), 128>>>(sw.keys.get(), rows, k, sw.seg_start.get(),
														 sw.seg_count.get(), sw.nslices.get(), rep.counts());
	CHECK_LAUNCH("segments_kernel");
	tb = sw.scan_tmp_bytes;
	CUDA_TRY(cub::DeviceScan::ExclusiveSum(sw.scan_tmp.get(), tb, sw.nslices.get(), sw.slice_off.get(), k));
	slice_sum_kernel<T><<<items, BLOCK>>>(x, d, k, sw.perm.get(), sw.seg_start.get(), sw.seg_count.get(),
										  sw.nslices.get(), sw.slice_off.get(), cen.cen_f.get(), sw.partial.get());
	CHECK_LAUNCH("slice_sum_kernel");
	slice_reduce_kernel<<<grid_for((int64_t) k * d, 256, 1u << 30), 256>>>(
		sw.partial.get(), k, d, sw.nslices.get(), sw.slice_off.get(), sums.sums.get());
	CHECK_LAUNCH("slice_reduce_kernel");
}

} // namespace

void sorted_update(const Plan &plan, SortWork &sw, const float *x, int64_t rows, const int32_t *labels,
				   const Centroids &cen, Sums &sums, const Report &rep)
{
	sorted_update_t(plan, sw, x, rows, labels, cen, sums, rep);
}

void sorted_update(const Plan &plan, SortWork &sw, const double *x, int64_t rows, const int32_t *labels,
				   const Centroids &cen, Sums &sums, const Report &rep)
{
	sorted_update_t(plan, sw, x, rows, labels, cen, sums, rep);
}

namespace {

/* Fused update: fixed-point sums to double. */
__global__ void unfix_kernel(const unsigned long long *__restrict__ fx,	/* [m] */
							 int64_t m, double inv_scale,
							 double *__restrict__ sums /* [m] out */ )
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
		sums[i] = (double) (long long) fx[i] * inv_scale;
}

} // namespace

void unfix_sums(const Plan &plan, Sums &sums)
{
	unfix_kernel<<<grid_for((int64_t) plan.k * plan.d, 256, 1u << 30), 256>>>(
		sums.fx.get(), (int64_t) plan.k * plan.d, sums.fx_scale > 0 ? 1.0 / sums.fx_scale : 0.0,
		sums.sums.get());
	CHECK_LAUNCH("unfix_kernel");
}

namespace {

/*
 * New centroids c_f + sum / count (scaled to unit length with cosine when
 * the cluster holds rows), and each cluster's squared move.
 */
__global__ void finalize_kernel(const double *__restrict__ sums,	/* [k, d] of x - c_f */
								const unsigned long long *__restrict__ counts,	/* [k] */
								const float *__restrict__ cen_f,	/* [k, d] */
								const double *__restrict__ cen_old, /* [k, d] */
								int k, int d, int cosine,
								double *__restrict__ cen_new,	/* [k, d] out */
								double *__restrict__ shift /* [k] out */ )
{
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	double		move = 0.0;

	for (int c = 0; c < d; c++)
	{
		size_t		i = (size_t) j * d + c;

		cen_new[i] = counts[j] > 0 ? (double) cen_f[i] + sums[i] / (double) counts[j] : cen_old[i];
	}
	if (cosine && counts[j] > 0)
		gc_kmeans_unit_centroid(cen_new + (size_t) j * d, d);
	for (int c = 0; c < d; c++)
	{
		size_t		i = (size_t) j * d + c;
		double		diff = cen_new[i] - cen_old[i];

		move += diff * diff;
	}
	shift[j] = move;
}

} // namespace

void finalize_centroids(const Plan &plan, const Centroids &cen, const Sums &sums, const Report &rep)
{
	finalize_kernel<<<grid_for(plan.k, 128, 1u << 30), 128>>>(sums.sums.get(), rep.counts(), cen.cen_f.get(),
															  cen.cen.get(), plan.k, plan.d,
															  plan.metric == GC_METRIC_COSINE ? 1 : 0,
															  cen.cen_new.get(), rep.shifts());
	CHECK_LAUNCH("finalize_kernel");
}

namespace {

/* The walk's order of every row (gc_reseed_key of its d2 as a double) and the row numbers. */
__global__ void reseed_keys_kernel(const float *__restrict__ d2, int64_t n,
								   unsigned long long *__restrict__ keys, int32_t *__restrict__ rows)
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < n; i += (int64_t) gridDim.x * BLOCK)
	{
		keys[i] = ~gc_order_key((double) d2[i]);
		rows[i] = (int32_t) i;
	}
}

/* The labels of the first m rows of the order. */
__global__ void gather_labels_kernel(const int32_t *__restrict__ labels, const int32_t *__restrict__ rows,
									 int64_t m, int32_t *__restrict__ out)
{
	for (int64_t t = (int64_t) blockIdx.x * BLOCK + threadIdx.x; t < m; t += (int64_t) gridDim.x * BLOCK)
		out[t] = labels[rows[t]];
}

/*
 * gc_reseed_apply on the device: the rows taken leave their clusters' sums
 * and become the new clusters' sums, in the walk's order (one thread per
 * coordinate, so each sum sees the same operations in the same order as on
 * the host).
 */
__global__ void reseed_apply_kernel(const double *__restrict__ xt,	/* [taken, d] */
									const int32_t *__restrict__ from, const int32_t *__restrict__ to,
									int taken, int d, const float *__restrict__ ref,	/* [k, d] */
									double *__restrict__ sums /* [k, d] in/out */ )
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= d)
		return;
	for (int t = 0; t < taken; t++)
	{
		size_t		o = (size_t) from[t] * d + c;
		size_t		j = (size_t) to[t] * d + c;
		double		v = xt[(size_t) t * d + c];

		sums[o] -= v - (double) ref[o];
		sums[j] = v - (double) ref[j];
	}
}

/*
 * Re-seeding on the host (gc_kmeans_reseed_empty over copies of the labels,
 * distances, sums and float centroids): when the device has no room for the
 * sort of reseed_empty, or the rows do not fit its 32-bit row numbers.
 */
int32_t reseed_on_host(const Plan &plan, const void *hx, const int32_t *labels, const float *d2,
					   const Centroids &cen, Sums &sums, Report &rep, const gc_exec &exec)
{
	const int64_t n = plan.n;
	const int	k = plan.k;
	const size_t kd = (size_t) k * plan.d;
	std::vector<unsigned long long> &h_stat = rep.host;
	std::vector<int32_t> h_lab(n);
	std::vector<float> h_d2f(n);
	std::vector<double> h_d2(n), h_sums(kd), h_ref(kd);
	std::vector<float> h_cf(kd);
	std::vector<int64_t> h_cnt(k);
	int32_t		reseeded = 0;
	gc_status	st;

	CUDA_TRY(cudaMemcpy(h_lab.data(), labels, sizeof(int32_t) * n, cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(h_d2f.data(), d2, sizeof(float) * n, cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(h_sums.data(), sums.sums.get(), sizeof(double) * kd, cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(h_cf.data(), cen.cen_f.get(), sizeof(float) * kd, cudaMemcpyDeviceToHost));
	for (int64_t i = 0; i < n; i++)
		h_d2[i] = h_d2f[i];
	for (size_t i = 0; i < kd; i++)
		h_ref[i] = h_cf[i];
	for (int j = 0; j < k; j++)
		h_cnt[j] = (int64_t) h_stat[j];
	st = gc_kmeans_reseed_empty(hx, plan.dtype, n, plan.d, k, h_lab.data(), h_d2.data(), h_ref.data(),
								h_sums.data(), h_cnt.data(), &reseeded, exec.cancel, exec.cancel_arg);
	if (st == GC_ERR_CANCELLED)
		fail(GC_ERR_CANCELLED, "canceled");
	if (st == GC_ERR_OUT_OF_MEMORY)
		fail(GC_ERR_OUT_OF_MEMORY, "out of host memory for re-seeding empty k-means clusters");
	if (st != GC_OK)
		fail(st, "k-means re-seeding failed, please report a bug");
	for (int j = 0; j < k; j++)
		h_stat[j] = (unsigned long long) h_cnt[j];
	CUDA_TRY(cudaMemcpy(sums.sums.get(), h_sums.data(), sizeof(double) * kd, cudaMemcpyHostToDevice));
	return reseeded;
}

/*
 * The walk of gc_kmeans_reseed_empty over the rows sorted on the device:
 * the first m rows of the walk's order (d2 descending, row ascending: a
 * stable CUB radix sort of every row's key) and their labels come to the
 * host, the walk runs there on them (all n rows should it run out, as on
 * the host), and the few rows it takes are applied to the sums on the
 * device.  No copy of the size of the data crosses, and nothing O(n) runs
 * on the host.  Returns -1 when the device has no room for the sort.
 */
int32_t reseed_on_device(const Plan &plan, const void *hx, const int32_t *labels, const float *d2,
						 const Centroids &cen, Sums &sums, Report &rep)
{
	const int64_t n = plan.n;
	const int	k = plan.k;
	const int	d = plan.d;
	std::vector<unsigned long long> &h_stat = rep.host;
	size_t		tmp_bytes = 0;
	size_t		free_b = 0,
				total_b = 0;

	if (n > INT32_MAX)
		return -1;
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, (const unsigned long long *) nullptr,
											 (unsigned long long *) nullptr, (const int32_t *) nullptr,
											 (int32_t *) nullptr, (int) n));
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
	if ((size_t) n * 2 * (sizeof(unsigned long long) + sizeof(int32_t)) + tmp_bytes > free_b / 2)
		return -1;

	DeviceBuffer<unsigned long long> kin(n, "re-seeding order"), kout(n, "re-seeding order");
	DeviceBuffer<int32_t> rin(n, "re-seeding order"), rout(n, "re-seeding order");
	DeviceBuffer<char> tmp(tmp_bytes, "re-seeding order");
	DeviceBuffer<int32_t> lab_m;
	std::vector<int32_t> rows, lab;
	std::vector<int64_t> cnt(k), w_rows, w_tv;
	std::vector<uint64_t> w_tk;
	gc_reseed_work w;
	int64_t		m = k < n ? k : n;
	int32_t		taken = 0;

	reseed_keys_kernel<<<grid_for(n, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(d2, n, kin.get(), rin.get());
	CHECK_LAUNCH("reseed_keys_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, kin.get(), kout.get(), rin.get(), rout.get(),
											 (int) n));
	for (int j = 0; j < k; j++)
		cnt[j] = (int64_t) h_stat[j];
	for (;;)
	{
		int			ran_out = 0;

		/* the first m rows of the order and their labels; the walk's rows are their places in it */
		rows.resize(m);
		lab.resize(m);
		lab_m.reset(m, "re-seeding order");
		gather_labels_kernel<<<grid_for(m, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(labels, rout.get(), m,
																				  lab_m.get());
		CHECK_LAUNCH("gather_labels_kernel");
		CUDA_TRY(cudaMemcpy(rows.data(), rout.get(), sizeof(int32_t) * m, cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(lab.data(), lab_m.get(), sizeof(int32_t) * m, cudaMemcpyDeviceToHost));
		w_rows.resize(m);
		w_tk.resize(m);
		w_tv.resize(m);
		for (int64_t t = 0; t < m; t++)
			w_rows[t] = t;
		memset(&w, 0, sizeof(w));
		w.m = m;
		w.rows = w_rows.data();
		w.tk = w_tk.data();
		w.tv = w_tv.data();
		taken = gc_reseed_walk(k, lab.data(), cnt.data(), &w, &ran_out);
		if (!ran_out || m == n)
			break;
		/* the counts disagree with the labels: undo, and walk over every row */
		for (int32_t t = taken - 1; t >= 0; t--)
		{
			cnt[lab[w.tv[t]]]++;
			cnt[w.tk[t]] = 0;
		}
		m = n;
	}

	/* the rows taken, from the host rows, and where they go */
	std::vector<double> xt((size_t) taken * d);
	std::vector<int32_t> from(taken), to(taken);

	for (int32_t t = 0; t < taken; t++)
	{
		int64_t		at = w.tv[t];
		int64_t		row = rows[at];

		from[t] = lab[at];
		to[t] = (int32_t) w.tk[t];
		for (int c = 0; c < d; c++)
			xt[(size_t) t * d + c] = gc_kmeans_x_at(hx, plan.dtype, row * d + c);
	}
	if (taken > 0)
	{
		DeviceBuffer<double> xt_d(xt.size(), "re-seeding rows");
		DeviceBuffer<int32_t> from_d(taken, "re-seeding rows"), to_d(taken, "re-seeding rows");

		CUDA_TRY(cudaMemcpy(xt_d.get(), xt.data(), sizeof(double) * xt.size(), cudaMemcpyHostToDevice));
		CUDA_TRY(cudaMemcpy(from_d.get(), from.data(), sizeof(int32_t) * taken, cudaMemcpyHostToDevice));
		CUDA_TRY(cudaMemcpy(to_d.get(), to.data(), sizeof(int32_t) * taken, cudaMemcpyHostToDevice));
		reseed_apply_kernel<<<(d + 127) / 128, 128>>>(xt_d.get(), from_d.get(), to_d.get(), taken, d,
													  cen.cen_f.get(), sums.sums.get());
		CHECK_LAUNCH("reseed_apply_kernel");
		CUDA_TRY(cudaDeviceSynchronize());
	}
	for (int j = 0; j < k; j++)
		h_stat[j] = (unsigned long long) cnt[j];
	return taken;
}

} // namespace

/*
 * Every empty cluster re-seeded by the rule of gc_kmeans_reseed_empty
 * (common/kmeans_init.h), the same rows as on the CPU; then the new
 * centroids again from the sums.  Rare (an iteration that empties a
 * cluster).
 */
int32_t reseed_empty(const Plan &plan, const void *hx, const int32_t *labels, const float *d2,
					 const Centroids &cen, Sums &sums, Report &rep, const gc_exec &exec)
{
	const int	k = plan.k;
	std::vector<unsigned long long> &h_stat = rep.host;
	int32_t		reseeded;

	check_cancel(exec);
	reseeded = reseed_on_device(plan, hx, labels, d2, cen, sums, rep);
	if (reseeded < 0)
		reseeded = reseed_on_host(plan, hx, labels, d2, cen, sums, rep, exec);
	CUDA_TRY(cudaMemcpy(rep.counts(), h_stat.data(), sizeof(unsigned long long) * k, cudaMemcpyHostToDevice));
	finalize_centroids(plan, cen, sums, rep);
	CUDA_TRY(cudaMemcpy(h_stat.data() + k, rep.shifts(), sizeof(double) * k, cudaMemcpyDeviceToHost));
	return reseeded;
}

namespace {

/*
 * Squared distance of every row to its centroid, in double as on the CPU;
 * with as_metric the metric's distance of it instead.
 */
template <typename T>
__global__ void exact_d2_kernel(const T *__restrict__ x,	/* [rows, d] */
								int64_t rows, int d,
								const int32_t *__restrict__ labels,	/* [rows] */
								const double *__restrict__ cen,	/* [k, d] */
								bool as_metric, gc_metric metric,
								double *__restrict__ d2 /* [rows] out */ )
{
	for (int64_t i = (int64_t) blockIdx.x * BLOCK + threadIdx.x; i < rows;
		 i += (int64_t) gridDim.x * BLOCK)
	{
		const double *c = cen + (size_t) labels[i] * d;
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = __dsub_rn((double) x[i * d + j], c[j]);

			s = __dadd_rn(s, __dmul_rn(t, t));
		}
		d2[i] = as_metric ? gc_metric_distance(metric, s) : s;
	}
}

/*
 * The same for wide rows: a block's 128 rows pass through shared memory 32
 * features at a time (read by whole rows, so that the loads coalesce), and
 * each thread sums its row's features in order as above.
 */
constexpr int XD_ROWS = 128;

template <typename T>
__global__ void __launch_bounds__(XD_ROWS)
exact_d2_wide_kernel(const T *__restrict__ x,	/* [rows, d] */
					 int64_t rows, int d,
					 const int32_t *__restrict__ labels,	/* [rows] */
					 const double *__restrict__ cen,	/* [k, d] */
					 bool as_metric, gc_metric metric,
					 double *__restrict__ d2 /* [rows] out */ )
{
	__shared__ T sx[XD_ROWS][33];
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x / 32;

	for (int64_t base = (int64_t) blockIdx.x * XD_ROWS; base < rows; base += (int64_t) gridDim.x * XD_ROWS)
	{
		int64_t		i = base + threadIdx.x;
		const double *c = i < rows ? cen + (size_t) labels[i] * d : nullptr;
		double		s = 0.0;

		for (int j0 = 0; j0 < d; j0 += 32)
		{
			int			w = min(32, d - j0);

			__syncthreads();
			for (int r = warp; r < XD_ROWS; r += XD_ROWS / 32)
				if (base + r < rows && lane < w)
					sx[r][lane] = x[(base + r) * d + j0 + lane];
			__syncthreads();
			if (i < rows)
				for (int j = 0; j < w; j++)
				{
					double		t = __dsub_rn((double) sx[threadIdx.x][j], c[j0 + j]);

					s = __dadd_rn(s, __dmul_rn(t, t));
				}
		}
		if (i < rows)
			d2[i] = as_metric ? gc_metric_distance(metric, s) : s;
	}
}

template <typename T>
void exact_distances_t(const Plan &plan, const T *x, int64_t rows, const int32_t *labels,
					   const double *cen, double *d2, bool as_metric)
{
	if (plan.d > 16)
	{
		exact_d2_wide_kernel<T><<<grid_for(rows, XD_ROWS, (unsigned) plan.sms * 64), XD_ROWS>>>(
			x, rows, plan.d, labels, cen, as_metric, plan.metric, d2);
		CHECK_LAUNCH("exact_d2_wide_kernel");
		return;
	}
	exact_d2_kernel<T><<<grid_for(rows, BLOCK, (unsigned) plan.sms * 32), BLOCK>>>(x, rows, plan.d, labels,
																				cen, as_metric, plan.metric, d2);
	CHECK_LAUNCH("exact_d2_kernel");
}

} // namespace

void exact_distances(const Plan &plan, const float *x, int64_t rows, const int32_t *labels,
					 const double *cen, double *d2, bool as_metric)
{
	exact_distances_t(plan, x, rows, labels, cen, d2, as_metric);
}

void exact_distances(const Plan &plan, const double *x, int64_t rows, const int32_t *labels,
					 const double *cen, double *d2, bool as_metric)
{
	exact_distances_t(plan, x, rows, labels, cen, d2, as_metric);
}

} // namespace km
} // namespace gc
