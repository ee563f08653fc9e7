/*
 * kmeans_init.cu
 *    What the GPU k-means does before its first assignment: the statistics
 *    of the data (the unit of tol, the mean the product form centres on, the
 *    range that bounds the fixed-point sums) and the initial centroids, by
 *    the rules both back ends share (common/kmeans_init.h).
 *
 * Statistics run on the device when the data are resident, else on the
 * host.  k-means++ runs on the device when the data are resident and n is
 * large: the D^2 pass, the blocked integer weight sums, the rows the draws
 * fall on (one thread per draw, within the segment the host found) and
 * (greedy k-means++) the potentials of all the step's candidates in one
 * pass on the device; the draws and the choice on the host with the shared
 * generator and rules (common/kmeans_init.h explains why the picks are the
 * same rows as on the CPU).
 */
#include <cub/cub.cuh>

#include <cstring>

#include "kmeans.cuh"

namespace gc {
namespace km {

namespace {

/*
 * Statistics of resident data, pass 1: per slice of GC_STAT_ROWS rows and
 * feature, the sum in row order, the smallest and the largest value.  With
 * mean set, pass 2: the sum of squared deviations from mean instead.
 */
constexpr int GC_STAT_ROWS = 2048;

template <typename T>
__global__ void stats_slice_kernel(const T *__restrict__ x,	/* [n, d] */
								   int64_t n, int d,
								   const double *__restrict__ mean,	/* [d] (pass 2) or null */
								   double *__restrict__ psum,	/* [slices, d] out */
								   T *__restrict__ pmin,	/* [slices, d] out (pass 1) */
								   T *__restrict__ pmax /* [slices, d] out (pass 1) */ )
{
	int64_t		r0 = (int64_t) blockIdx.x * GC_STAT_ROWS;
	int64_t		r1 = min(r0 + GC_STAT_ROWS, n);

	for (int f = threadIdx.x; f < d; f += blockDim.x)
	{
		double		s = 0.0;
		T			lo = INFINITY,
					hi = -INFINITY;

		for (int64_t i = r0; i < r1; i++)
		{
			T			v = x[i * d + f];

			if (mean)
			{
				double		t = __dsub_rn((double) v, mean[f]);

				s = __dadd_rn(s, __dmul_rn(t, t));
			}
			else
			{
				s = __dadd_rn(s, (double) v);
				lo = v < lo ? v : lo;
				hi = v > hi ? v : hi;
			}
		}
		psum[(size_t) blockIdx.x * d + f] = s;
		if (!mean)
		{
			pmin[(size_t) blockIdx.x * d + f] = lo;
			pmax[(size_t) blockIdx.x * d + f] = hi;
		}
	}
}

/* Statistics: each feature's slices, in order. */
template <typename T>
__global__ void stats_combine_kernel(const double *__restrict__ psum,	/* [slices, d] */
									 const T *__restrict__ pmin,	/* [slices, d] or null */
									 const T *__restrict__ pmax,	/* [slices, d] or null */
									 int slices, int d,
									 double *__restrict__ out /* [3, d]: sum, min, max */ )
{
	int			f = blockIdx.x * blockDim.x + threadIdx.x;

	if (f >= d)
		return;
	double		s = 0.0;
	T			lo = INFINITY,
				hi = -INFINITY;

	for (int b = 0; b < slices; b++)
	{
		s = __dadd_rn(s, psum[(size_t) b * d + f]);
		if (pmin)
		{
			T			a = pmin[(size_t) b * d + f],
						c = pmax[(size_t) b * d + f];

			lo = a < lo ? a : lo;
			hi = c > hi ? c : hi;
		}
	}
	out[f] = s;
	out[d + f] = lo;
	out[2 * d + f] = hi;
}

} // namespace

/*
 * On the host for chunked data (the shared gc_kmeans_stats, row order); on
 * the device for resident data (stats_device), in slices of GC_STAT_ROWS
 * rows: the same sums up to the rounding of the order, so the stopping
 * threshold may differ from the CPU's in the last bits.
 */
void stats_host(const Plan &plan, const void *hx, DataStats &st, const gc_exec &exec)
{
	std::vector<double> scratch(3 * (size_t) plan.d);

	if (gc_kmeans_stats(hx, plan.dtype, plan.n, plan.d, &st.mean_var, st.mean.data(), st.lo.data(), st.hi.data(),
						scratch.data(), exec.cancel, exec.cancel_arg) != 0)
		gc::fail(GC_ERR_CANCELLED, "canceled");
}

namespace {

template <typename T>
void stats_device_t(const Plan &plan, const T *x, DataStats &st, double *mean_d, bool mean_only)
{
	const int64_t n = plan.n;
	const int	d = plan.d;
	int			slices = (int) ((n + GC_STAT_ROWS - 1) / GC_STAT_ROWS);
	int			threads = (int) std::min<int64_t>(BLOCK, (d + 31) / 32 * 32);
	DeviceBuffer<double> psum((size_t) slices * d, "statistics");
	DeviceBuffer<T> pmin((size_t) slices * d, "statistics"),
				pmax((size_t) slices * d, "statistics");
	DeviceBuffer<double> out(3 * (size_t) d, "statistics");
	std::vector<double> h(3 * (size_t) d);
	double		total = 0.0;

	stats_slice_kernel<T><<<slices, threads>>>(x, n, d, nullptr, psum.get(), pmin.get(), pmax.get());
	CHECK_LAUNCH("stats_slice_kernel");
	stats_combine_kernel<T><<<grid_for(d, 128, 1u << 30), 128>>>(psum.get(), pmin.get(), pmax.get(), slices, d,
																 out.get());
	CHECK_LAUNCH("stats_combine_kernel");
	CUDA_TRY(cudaMemcpy(h.data(), out.get(), sizeof(double) * h.size(), cudaMemcpyDeviceToHost));
	for (int t = 0; t < d; t++)
	{
		st.mean[t] = h[t] / (double) n;
		st.lo[t] = h[d + t];
		st.hi[t] = h[2 * (size_t) d + t];
	}
	CUDA_TRY(cudaMemcpy(mean_d, st.mean.data(), sizeof(double) * d, cudaMemcpyHostToDevice));
	if (mean_only)
		return;
	stats_slice_kernel<T><<<slices, threads>>>(x, n, d, mean_d, psum.get(), nullptr, nullptr);
	CHECK_LAUNCH("stats_slice_kernel");
	stats_combine_kernel<T><<<grid_for(d, 128, 1u << 30), 128>>>(psum.get(), nullptr, nullptr, slices, d,
																 out.get());
	CHECK_LAUNCH("stats_combine_kernel");
	CUDA_TRY(cudaMemcpy(h.data(), out.get(), sizeof(double) * d, cudaMemcpyDeviceToHost));
	for (int t = 0; t < d; t++)
		total += h[t] / (double) n;
	st.mean_var = total / (double) d;
}

} // namespace

namespace {

/* The largest |x| of count values: their bit patterns without the sign compare as the values. */
__global__ void max_abs_kernel(const float *__restrict__ x, size_t count, unsigned int *__restrict__ out)
{
	unsigned int m = 0;

	for (size_t i = (size_t) blockIdx.x * BLOCK + threadIdx.x; i < count; i += (size_t) gridDim.x * BLOCK)
		m = max(m, __float_as_uint(x[i]) & 0x7fffffffu);
	for (int o = 16; o > 0; o >>= 1)
		m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
	if ((threadIdx.x & 31) == 0)
		atomicMax(out, m);
}

} // namespace

float max_abs_device(const float *x, size_t count)
{
	DeviceBuffer<unsigned int> out(1, "statistics");
	unsigned int h = 0;
	float		m;

	CUDA_TRY(cudaMemset(out.get(), 0, sizeof(unsigned int)));
	max_abs_kernel<<<grid_for((int64_t) count, BLOCK, 1u << 16), BLOCK>>>(x, count, out.get());
	CHECK_LAUNCH("max_abs_kernel");
	CUDA_TRY(cudaMemcpy(&h, out.get(), sizeof(h), cudaMemcpyDeviceToHost));
	memcpy(&m, &h, sizeof(m));
	return m;
}

void stats_device(const Plan &plan, const float *x, DataStats &st, double *mean_d, bool mean_only)
{
	stats_device_t(plan, x, st, mean_d, mean_only);
}

void stats_device(const Plan &plan, const double *x, DataStats &st, double *mean_d, bool mean_only)
{
	stats_device_t(plan, x, st, mean_d, mean_only);
}

namespace {

struct MaxOp
{
	__device__ double operator()(double a, double b) const { return fmax(a, b); }
};

/* k-means++: D^2 to the newest centre, kept as the minimum, and each segment's maximum. */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
kmpp_dist_kernel(const T *__restrict__ x,	/* [n, d] */
				 int64_t n, int d,
				 const T *__restrict__ c,	/* [d] a row of x */
				 int first,
				 double *__restrict__ mind2,	/* [n] in/out */
				 double *__restrict__ segmax /* [nseg] out */ )
{
	using Reduce = cub::BlockReduce<double, BLOCK>;
	__shared__ typename Reduce::TempStorage tmp;
	int64_t		from = (int64_t) blockIdx.x * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);
	double		mx = 0.0;

	for (int64_t i = from + threadIdx.x; i < to; i += BLOCK)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = __dsub_rn((double) x[i * d + j], (double) c[j]);

			s = __dadd_rn(s, __dmul_rn(t, t));
		}
		if (!first && mind2[i] < s)
			s = mind2[i];
		mind2[i] = s;
		mx = fmax(mx, s);
	}
	mx = Reduce(tmp).Reduce(mx, MaxOp());
	if (threadIdx.x == 0)
		segmax[blockIdx.x] = mx;
}

/* k-means++: the largest D^2, stored after the segment sums. */
__global__ void kmpp_max_kernel(const double *__restrict__ segmax,	/* [nseg] */
								int nseg,
								unsigned long long *__restrict__ packed /* [nseg + 1] */ )
{
	using Reduce = cub::BlockReduce<double, 1024>;
	__shared__ typename Reduce::TempStorage tmp;
	double		mx = 0.0;

	for (int i = threadIdx.x; i < nseg; i += 1024)
		mx = fmax(mx, segmax[i]);
	mx = Reduce(tmp).Reduce(mx, MaxOp());
	if (threadIdx.x == 0)
		packed[nseg] = (unsigned long long) __double_as_longlong(mx);
}

/* k-means++: each segment's sum of integer weights. */
__global__ void __launch_bounds__(BLOCK)
kmpp_weight_kernel(const double *__restrict__ mind2,	/* [n] */
				   int64_t n,
				   unsigned long long *__restrict__ packed /* [nseg + 1] */ , int nseg)
{
	using Reduce = cub::BlockReduce<unsigned long long, BLOCK>;
	__shared__ typename Reduce::TempStorage tmp;
	double		scale = gc_kmpp_scale(__longlong_as_double((long long) packed[nseg]), n);
	int64_t		from = (int64_t) blockIdx.x * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);
	unsigned long long s = 0;

	for (int64_t i = from + threadIdx.x; i < to; i += BLOCK)
		s += gc_kmpp_weight(mind2[i], scale);
	s = Reduce(tmp).Sum(s);
	if (threadIdx.x == 0)
		packed[blockIdx.x] = s;
}

/* Candidates of greedy k-means++ per group of the trial kernel (registers per thread). */
constexpr int TRIAL_GROUP = 8;

/*
 * Greedy k-means++: for each candidate l (rows cand[l] of x), each segment's
 * sum of the integer weights of min(D^2, dist2(x_i, candidate l)) under the
 * step's scale (from the largest D^2 in packed[nseg]).  One pass over the
 * rows per group of TRIAL_GROUP candidates; each distance is summed over
 * the features in order without FMA, as gc_dist2 on the host.
 */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
kmpp_trial_kernel(const T *__restrict__ x,	/* [n, d] */
				  int64_t n, int d,
				  const double *__restrict__ mind2,	/* [n] */
				  const int64_t *__restrict__ cand,	/* [ntrials] rows of x */
				  int ntrials,
				  const unsigned long long *__restrict__ packed,	/* [nseg + 1] */
				  int nseg,
				  unsigned long long *__restrict__ pot /* [nseg, ntrials] out */ )
{
	using Reduce = cub::BlockReduce<unsigned long long, BLOCK>;
	__shared__ typename Reduce::TempStorage tmp;
	double		scale = gc_kmpp_scale(__longlong_as_double((long long) packed[nseg]), n);
	int64_t		from = (int64_t) blockIdx.x * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);

	for (int g = 0; g < ntrials; g += TRIAL_GROUP)
	{
		unsigned long long acc[TRIAL_GROUP];
		const T    *c[TRIAL_GROUP];

#pragma unroll
		for (int u = 0; u < TRIAL_GROUP; u++)
		{
			acc[u] = 0;
			c[u] = x + cand[g + u < ntrials ? g + u : g] * (int64_t) d;
		}
		for (int64_t i = from + threadIdx.x; i < to; i += BLOCK)
		{
			double		s[TRIAL_GROUP];

#pragma unroll
			for (int u = 0; u < TRIAL_GROUP; u++)
				s[u] = 0.0;
			for (int j = 0; j < d; j++)
			{
				double		v = (double) x[i * d + j];

#pragma unroll
				for (int u = 0; u < TRIAL_GROUP; u++)
				{
					double		t = __dsub_rn(v, (double) c[u][j]);

					s[u] = __dadd_rn(s[u], __dmul_rn(t, t));
				}
			}
#pragma unroll
			for (int u = 0; u < TRIAL_GROUP; u++)
				acc[u] += gc_kmpp_trial_weight(mind2[i], s[u], scale);
		}
#pragma unroll
		for (int u = 0; u < TRIAL_GROUP; u++)
		{
			unsigned long long tot = Reduce(tmp).Sum(acc[u]);

			if (threadIdx.x == 0 && g + u < ntrials)
				pot[(size_t) blockIdx.x * ntrials + g + u] = tot;
			__syncthreads();
		}
	}
}

/*
 * The picks of one step's draws, gc_kmpp_pick on the device: for draw l,
 * the first row of segment seg[l] whose running weight sum, from acc[l]
 * (the weight before the segment), exceeds target[l].  One thread per
 * draw, in row order as on the host; rows[l] = -1 when the target lies
 * beyond the segment (a bug).
 */
__global__ void kmpp_pick_kernel(const double *__restrict__ mind2,	/* [n] */
								 int64_t n,
								 const unsigned long long *__restrict__ packed,	/* [nseg + 1] */
								 const int64_t *__restrict__ seg,	/* [ndraws] */
								 const unsigned long long *__restrict__ acc,	/* [ndraws] */
								 const unsigned long long *__restrict__ target,	/* [ndraws] */
								 int ndraws, int nseg,
								 int64_t *__restrict__ rows /* [ndraws] out */ )
{
	int			l = threadIdx.x;

	if (l >= ndraws)
		return;

	double		scale = gc_kmpp_scale(__longlong_as_double((long long) packed[nseg]), n);
	int64_t		from = seg[l] * GC_KMPP_SEGMENT;
	int64_t		to = min(from + GC_KMPP_SEGMENT, n);
	unsigned long long a = acc[l];

	rows[l] = -1;
	for (int64_t i = from; i < to; i++)
	{
		a += gc_kmpp_weight(mind2[i], scale);
		if (a > target[l])
		{
			rows[l] = i;
			return;
		}
	}
}

/*
 * k-means++ with the distance, weight and potential passes on the device:
 * the k initial rows, ntrials candidates per step (greedy when > 1), the
 * steps of gc_kmeans_plusplus_rows.
 */
template <typename T>
void kmeans_plusplus_device(const Plan &plan, const T *x /* [n, d] device */, uint64_t seed,
							int ntrials, const gc_exec &exec, std::vector<int64_t> &rows /* [k] out */)
{
	const int64_t n = plan.n;
	const int	d = plan.d;
	int			nseg = (int) ((n + GC_KMPP_SEGMENT - 1) / GC_KMPP_SEGMENT);
	DeviceBuffer<double> mind2(n, "k-means++ distances");
	DeviceBuffer<double> segmax(nseg, "k-means++ segment maxima");
	DeviceBuffer<unsigned long long> packed(nseg + 1, "k-means++ segment sums");
	DeviceBuffer<int64_t> d_cand(GC_KMPP_MAX_TRIALS, "k-means++ candidates");
	DeviceBuffer<unsigned long long> d_draw(3 * GC_KMPP_MAX_TRIALS, "k-means++ draws");	/* seg, acc, target */
	DeviceBuffer<unsigned long long> d_pot((size_t) nseg * GC_KMPP_MAX_TRIALS, "k-means++ potentials");
	std::vector<unsigned long long> h_packed(nseg + 1);
	std::vector<unsigned long long> h_pot((size_t) nseg * GC_KMPP_MAX_TRIALS);
	unsigned long long h_draw[3 * GC_KMPP_MAX_TRIALS];
	int64_t		cand[GC_KMPP_MAX_TRIALS];
	uint64_t	pot[GC_KMPP_MAX_TRIALS];
	gc_rng		rng;

	ntrials = std::max(1, std::min(ntrials, GC_KMPP_MAX_TRIALS));
	gc_rng_seed(&rng, seed);
	rows[0] = (int64_t) gc_rng_below(&rng, (uint64_t) n);
	for (int c = 1; c < plan.k; c++)
	{
		kmpp_dist_kernel<T><<<nseg, BLOCK>>>(x, n, d, x + rows[c - 1] * d, c == 1, mind2.get(), segmax.get());
		CHECK_LAUNCH("kmpp_dist_kernel");
		kmpp_max_kernel<<<1, 1024>>>(segmax.get(), nseg, packed.get());
		CHECK_LAUNCH("kmpp_max_kernel");
		kmpp_weight_kernel<<<nseg, BLOCK>>>(mind2.get(), n, packed.get(), nseg);
		CHECK_LAUNCH("kmpp_weight_kernel");
		CUDA_TRY(cudaMemcpy(h_packed.data(), packed.get(), sizeof(unsigned long long) * (nseg + 1),
							cudaMemcpyDeviceToHost));
		gc::check_cancel(exec);

		uint64_t	total = 0;

		for (int s = 0; s < nseg; s++)
			total += h_packed[s];

		/*
		 * The draws of gc_kmpp_draw_candidates: the targets and their
		 * segments here, the rows within the segments on the device.
		 */
		if (total == 0)
		{
			/* every row on a centre: uniform rows */
			for (int l = 0; l < ntrials; l++)
				cand[l] = -1 - gc_kmpp_draw(&rng, total, n);
			CUDA_TRY(cudaMemcpy(d_cand.get(), cand, sizeof(int64_t) * ntrials, cudaMemcpyHostToDevice));
		}
		else
		{
			for (int l = 0; l < ntrials; l++)
			{
				uint64_t	target = (uint64_t) gc_kmpp_draw(&rng, total, n);
				uint64_t	acc = 0;
				int			sg = 0;

				while (sg < nseg - 1 && acc + h_packed[sg] <= target)
					acc += h_packed[sg++];
				h_draw[l] = (unsigned long long) sg;
				h_draw[GC_KMPP_MAX_TRIALS + l] = acc;
				h_draw[2 * GC_KMPP_MAX_TRIALS + l] = target;
			}
			CUDA_TRY(cudaMemcpy(d_draw.get(), h_draw, sizeof(h_draw), cudaMemcpyHostToDevice));
			kmpp_pick_kernel<<<1, 32>>>(mind2.get(), n, packed.get(),
										reinterpret_cast<const int64_t *>(d_draw.get()),
										d_draw.get() + GC_KMPP_MAX_TRIALS, d_draw.get() + 2 * GC_KMPP_MAX_TRIALS,
										ntrials, nseg, d_cand.get());
			CHECK_LAUNCH("kmpp_pick_kernel");
			CUDA_TRY(cudaMemcpy(cand, d_cand.get(), sizeof(int64_t) * ntrials, cudaMemcpyDeviceToHost));
		}
		for (int l = 0; l < ntrials; l++)
			if (cand[l] < 0 || cand[l] >= n)
				gc::fail(GC_ERR_INTERNAL, "k-means++ draw fell outside the data, please report a bug");
		if (ntrials == 1)
		{
			rows[c] = cand[0];
			continue;
		}
		kmpp_trial_kernel<T><<<nseg, BLOCK>>>(x, n, d, mind2.get(), d_cand.get(), ntrials, packed.get(), nseg,
										   d_pot.get());
		CHECK_LAUNCH("kmpp_trial_kernel");
		CUDA_TRY(cudaMemcpy(h_pot.data(), d_pot.get(), sizeof(unsigned long long) * (size_t) nseg * ntrials,
							cudaMemcpyDeviceToHost));
		for (int l = 0; l < ntrials; l++)
		{
			pot[l] = 0;
			for (int s = 0; s < nseg; s++)
				pot[l] += h_pot[(size_t) s * ntrials + l];
		}
		rows[c] = cand[gc_kmpp_best_trial(pot, ntrials)];
	}
}

/* The k initial rows of 'random' or k-means++. */
void initial_rows(const Plan &plan, const gc_kmeans_params &p, const void *hx, const void *x,
				  const gc_exec &exec, std::vector<int64_t> &rows /* [k] out */)
{
	if (p.init == GC_KMEANS_INIT_RANDOM)
	{
		if (gc_kmeans_random_rows(plan.n, plan.k, p.seed, rows.data()) != 0)
			throw std::bad_alloc();
	}
	else if (plan.resident && plan.n >= 65536 && plan.dtype == GC_F64)
		kmeans_plusplus_device(plan, (const double *) x, p.seed, gc_kmeans_init_trials(p.init, plan.k), exec, rows);
	else if (plan.resident && plan.n >= 65536)
		kmeans_plusplus_device(plan, (const float *) x, p.seed, gc_kmeans_init_trials(p.init, plan.k), exec, rows);
	else
	{
		std::vector<double> mind2(plan.n);

		if (gc_kmeans_plusplus_rows(hx, plan.dtype, plan.n, plan.d, plan.k, p.seed, gc_kmeans_init_trials(p.init, plan.k),
									rows.data(), mind2.data(), exec.cancel, exec.cancel_arg) != 0)
			gc::fail(GC_ERR_CANCELLED, "canceled");
	}
}

/* Offsets x - c_f are bounded by the box around the data and the initial centroids. */
double fixed_point_scale(const Plan &plan, const DataStats &st, const std::vector<double> &h_cen)
{
	const int	d = plan.d;
	double		extent = 0.0;

	for (int t = 0; t < d; t++)
	{
		double		a = st.lo[t],
					b = st.hi[t];

		for (int j = 0; j < plan.k; j++)
		{
			a = std::min(a, h_cen[(size_t) j * d + t]);
			b = std::max(b, h_cen[(size_t) j * d + t]);
		}
		extent = std::max(extent, b - a);
	}
	/* spherical: a unit centroid may leave the box of the rows, but no coordinate differs by more than 2 */
	if (plan.metric == GC_METRIC_COSINE)
		extent = std::max(extent, 2.0);
	return gc_kmpp_scale(extent * (1.0 + 1e-6) + 1e-300, plan.n);
}

} // namespace

void initial_centroids(const Plan &plan, const gc_kmeans_params &p, const void *hx, const void *x,
					   const DataStats &st, const gc_exec &exec, std::vector<double> &h_cen, double &fx_scale)
{
	const int	d = plan.d;

	h_cen.assign((size_t) plan.k * d, 0.0);
	if (p.init == GC_KMEANS_INIT_GIVEN)
		std::copy(p.initial_centroids, p.initial_centroids + (size_t) plan.k * d, h_cen.begin());
	else
	{
		std::vector<int64_t> rows(plan.k);

		initial_rows(plan, p, hx, x, exec, rows);
		for (int j = 0; j < plan.k; j++)
			for (int t = 0; t < d; t++)
				h_cen[(size_t) j * d + t] = gc_kmeans_x_at(hx, plan.dtype, rows[j] * d + t);
	}
	fx_scale = fixed_point_scale(plan, st, h_cen);
}

} // namespace km
} // namespace gc
