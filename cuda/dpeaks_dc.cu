/*
 * dpeaks_dc.cu
 *    Phase dc of the GPU density peaks: the cutoff distance, given or
 *    derived from neighbor_rate as the quantile of the pairwise distances
 *    that common/dpeaks_common.h defines.
 *
 *    n <= GC_DP_DC_EXACT_MAX_N: radix select over all ordered pairs, twelve
 *    bits of the distance's bit pattern per pass (a 4096-way version of the
 *    binary search over pair counts of CUDA-DP, Ge et al., "Efficient
 *    parallel implementation of a density peaks clustering algorithm on
 *    GPU"), histograms in shared memory; once few pairs carry the prefix
 *    found so far, they are collected and the rest is selected on the host.
 *    On the pair engine (d >= 16) the exact selection is one pass over the
 *    tiles instead (dc_exact_pairs, cuda/dpeaks_pairs.cu), the radix
 *    select its fallback.
 *    Larger n: GC_DP_DC_SAMPLE_PAIRS seeded sample pairs, a CUB sort.
 */
#include "dpeaks_tiles.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gc {
namespace dpeaks {
namespace {

constexpr int kHistBins = 4096;
constexpr int64_t kCollectMax = 1 << 17;

/*
 * One pass of the exact dc selection: histogram of the next bits of the
 * dist2 bit patterns that share the prefix found so far, over ordered pairs.
 */
template <int D>
__global__ void __launch_bounds__(kBlock)
dc_hist_kernel(const double *xs, /* [d][n] */ int64_t n, int d, int64_t jb, int64_t je, int64_t slice,
			   uint64_t prefix, int prefix_bits, int shift, uint32_t mask, bool direct,
			   unsigned long long *hist /* [kHistBins] */)
{
	extern __shared__ double tile[];
	uint32_t   *shist = reinterpret_cast<uint32_t *>(tile + (direct ? 0 : (size_t) d * kTile));
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = jb + (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(je, j0 + slice);
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
dc_collect_kernel(const double *xs, /* [d][n] */ int64_t n, int d, int64_t jb, int64_t je,
				  int64_t slice, uint64_t prefix, int prefix_bits, bool direct,
				  unsigned long long *count, /* [1] */ uint64_t *out, /* [cap] */ int64_t cap)
{
	extern __shared__ double tile[];
	int64_t		i = (int64_t) blockIdx.x * kBlock + threadIdx.x;
	int64_t		j0 = jb + (int64_t) blockIdx.y * slice;
	int64_t		j1 = min(je, j0 + slice);
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

/*
 * How the all-pairs kernels of the selection are launched: columns j in
 * blocks of cols (about pairs_per_launch pairs a launch), each block cut
 * into slices, one per blockIdx.y.
 */
struct PairLaunch
{
	dim3		blocks;			/* points i by slices of j */
	int64_t		cols;			/* columns j per launch, a multiple of kTile * blocks.y */
	int64_t		slice;			/* columns j per slice, cols / blocks.y */
	size_t		tile_bytes;		/* shared memory of the tile, 0 when direct */
	bool		direct;			/* d too large for a tile: j from global memory */
};

/* Runs launch(jb, je) for every block of columns, asking cancel before each. */
template <typename Launch>
void over_columns(const Workspace &w, const PairLaunch &pl, Launch launch)
{
	for (int64_t jb = 0; jb < w.n; jb += pl.cols)
	{
		cancel_point(w);
		launch(jb, std::min<int64_t>(w.n, jb + pl.cols));
	}
}

/*
 * The k-th smallest (1-based) of the m ordered pairs whose dist2 carries
 * the prefix: collected on the device, selected on the host.
 */
uint64_t dc_collect(Workspace &w, const double *xs, /* [d][n] */ const PairLaunch &pl,
					uint64_t prefix, int prefix_bits, int64_t m, int64_t k)
{
	DeviceBuffer<uint64_t> out((size_t) std::max<int64_t>(m, 1), "the dc candidates");
	DeviceBuffer<unsigned long long> cnt(1, "the dc candidates");
	unsigned long long got = 0;
	std::vector<uint64_t> v((size_t) std::max<int64_t>(m, 1));

	CUDA_TRY(cudaMemset(cnt.get(), 0, sizeof(unsigned long long)));
	over_columns(w, pl, [&](int64_t jb, int64_t je) {
		by_dim(w.d, [&](auto D) {
			dc_collect_kernel<decltype(D)::value><<<pl.blocks, kBlock, pl.tile_bytes>>>(
				xs, w.n, w.d, jb, je, pl.slice, prefix, prefix_bits, pl.direct, cnt.get(), out.get(), m);
			CHECK_LAUNCH("dc_collect_kernel");
		});
	});
	CUDA_TRY(cudaMemcpy(&got, cnt.get(), sizeof(got), cudaMemcpyDeviceToHost));
	if ((int64_t) got != m)
		fail(GC_ERR_INTERNAL, "dc candidates miscounted (%llu of %lld)", got, (long long) m);
	CUDA_TRY(cudaMemcpy(v.data(), out.get(), sizeof(uint64_t) * (size_t) m, cudaMemcpyDeviceToHost));
	std::nth_element(v.begin(), v.begin() + (k - 1), v.begin() + m);
	return v[(size_t) (k - 1)];
}

/* The exact k-th smallest dist2 (1-based) over ordered pairs, as its bit pattern. */
uint64_t dc_exact(Workspace &w, const double *xs, /* [d][n] */ int64_t k)
{
	static const int widths[] = {12, 12, 12, 12, 12, 4};
	const int64_t n = w.n;
	const int	S = slices_for(w);
	PairLaunch	pl;
	uint64_t	prefix = 0;
	int			prefix_bits = 0;
	DeviceBuffer<unsigned long long> hist(kHistBins, "the dc histogram");
	std::vector<unsigned long long> h(kHistBins);

	pl.blocks = dim3(grid_for(n), (unsigned) S);
	pl.cols = std::max<int64_t>(1, pairs_per_launch(w.d) / n);
	pl.cols = std::min<int64_t>(pl.cols, n);
	pl.cols = (pl.cols + (int64_t) kTile * S - 1) / ((int64_t) kTile * S) * ((int64_t) kTile * S);
	pl.slice = pl.cols / S;
	pl.tile_bytes = sizeof(double) * (size_t) w.d * kTile;
	pl.direct = pl.tile_bytes + kHistBins * 4 > 48 * 1024;	/* d > 32: no tile */
	if (pl.direct)
		pl.tile_bytes = 0;
	for (int pass = 0; pass < 6; pass++)
	{
		int			wd = widths[pass];
		int			shift = 64 - prefix_bits - wd;
		uint32_t	mask = (1u << wd) - 1;
		int64_t		cum = 0;
		int			b;

		CUDA_TRY(cudaMemset(hist.get(), 0, hist.bytes()));
		over_columns(w, pl, [&](int64_t jb, int64_t je) {
			by_dim(w.d, [&](auto D) {
				dc_hist_kernel<decltype(D)::value><<<pl.blocks, kBlock, pl.tile_bytes + kHistBins * 4>>>(
					xs, n, w.d, jb, je, pl.slice, prefix, prefix_bits, shift, mask, pl.direct, hist.get());
				CHECK_LAUNCH("dc_hist_kernel");
			});
		});
		CUDA_TRY(cudaMemcpy(h.data(), hist.get(), hist.bytes(), cudaMemcpyDeviceToHost));
		for (b = 0; b < (1 << wd); b++)
		{
			if (cum + (int64_t) h[b] >= k)
				break;
			cum += (int64_t) h[b];
		}
		if (b == (1 << wd))
			fail(GC_ERR_INTERNAL, "dc selection lost its target");
		k -= cum;
		prefix = (prefix << wd) | (uint64_t) b;
		prefix_bits += wd;
		if (prefix_bits == 64)
			return prefix;
		if ((int64_t) h[b] <= kCollectMax)
			return dc_collect(w, xs, pl, prefix, prefix_bits, (int64_t) h[b], k);
	}
	fail(GC_ERR_INTERNAL, "dc selection did not finish");
}

/* dist2 bit patterns of the seeded sample pairs. */
__global__ void dc_sample_kernel(const double *xs, /* [d][n] */ int64_t n, int d, uint64_t seed,
								 int64_t m, uint64_t *keys /* [m] */)
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

} // namespace

/* The dist2 bit patterns of GC_DP_DC_SAMPLE_PAIRS seeded sample pairs, sorted, into sorted. */
void dc_sample_sorted(Workspace &w, const double *xs, /* [d][n] */ uint64_t seed,
					  DeviceBuffer<uint64_t> &sorted /* [GC_DP_DC_SAMPLE_PAIRS] out */)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	DeviceBuffer<uint64_t> a((size_t) m, "the dc sample");
	size_t		bytes = 0;

	sorted.reset((size_t) m, "the dc sample");
	dc_sample_kernel<<<grid_for(m), kBlock>>>(xs, w.n, w.d, seed, m, a.get());
	CHECK_LAUNCH("dc_sample_kernel");
	CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, a.get(), sorted.get(), m));
	CUDA_TRY(cub::DeviceRadixSort::SortKeys(w.temp.get(bytes), bytes, a.get(), sorted.get(), m));
	CHECK_LAUNCH("SortKeys");
}

namespace {

/* The neighbor_rate quantile of the seeded sample pairs, as its bit pattern. */
uint64_t dc_sample(Workspace &w, const double *xs, /* [d][n] */ double rate, uint64_t seed)
{
	DeviceBuffer<uint64_t> b;
	uint64_t	key = 0;

	dc_sample_sorted(w, xs, seed, b);
	CUDA_TRY(cudaMemcpy(&key, b.get() + (gc_dp_quantile_rank(rate, GC_DP_DC_SAMPLE_PAIRS) - 1), sizeof(key),
						cudaMemcpyDeviceToHost));
	return key;
}

} // namespace

void dc_phase(Workspace &w)
{
	const gc_dpeaks_params &p = w.params;

	cancel_point(w);
	w.dc_sample = 0;
	if (!p.derive_dc)
	{
		w.dc = p.dc;
		w.dc_method = GC_DC_GIVEN;
	}
	else
	{
		uint64_t	key;

		if (w.n <= GC_DP_DC_EXACT_MAX_N)
		{
			int64_t		k = gc_dp_quantile_rank(p.neighbor_rate, gc_dp_ordered_pairs(w.n));

			if (!w.use_pairs || !dc_exact_pairs(w, k, p.seed ? p.seed : GC_DP_DEFAULT_SEED, &key))
				key = dc_exact(w, w.xs.get(), k);
			w.dc_method = GC_DC_EXACT;
		}
		else
		{
			key = dc_sample(w, w.xs.get(), p.neighbor_rate, p.seed ? p.seed : GC_DP_DEFAULT_SEED);
			w.dc_method = GC_DC_SAMPLE;
			w.dc_sample = GC_DP_DC_SAMPLE_PAIRS;
		}
		w.dc = gc_metric_distance(w.metric, gc_dp_unkey(key));
		if (!(w.dc > 0.0))
			require(gc_error_dpeaks_zero_quantile(error_record()));
	}
	CUDA_TRY(cudaDeviceSynchronize());
}

} // namespace dpeaks
} // namespace gc
