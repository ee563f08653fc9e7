/*
 * hdbscan_finish.cu
 *    From the places in the condensed tree to the answer, on the device
 *    (finish of cuda/hdbscan.cuh), with exactly the answer of the host's
 *    gc_hdbscan_finish (common/hdbscan_tree.h):
 *
 *   clusters  per split, its two clusters: parent, birth, size, and the
 *             split's place in scikit-learn's breadth-first walk;
 *   stability each cluster's stability and death.  The merges that did
 *             not fall out are put in cluster order by a stable CUB radix
 *             sort (each cluster's in the order of gc_hdb_condense, merge
 *             n - 2 down), and their terms (gc_hdb_stab_terms, the host's
 *             rule) written out in that order at offsets from a CUB scan.
 *             A cluster's sum is sequential by nature, so that it rounds as
 *             the host's: one warp sums each cluster of at most
 *             kDeviceTerms terms, in one launch; the host sums the longer
 *             ones (rows leaving a cluster one at a time), a chunk of
 *             kHostChunk terms at a time, asking cancel between chunks
 *             (timing counts[2]: how many clusters);
 *   select    the clusters are numbered on the device as gc_hdb_number
 *             numbers them (a CUB sort of the splits by their place in the
 *             breadth-first walk) and copied to the host, which selects
 *             them (gc_hdb_given_select: gc_hdb_select, the CPU back end's
 *             code);
 *   rows      each row's cluster and each cluster's lowest row on the
 *             device; the host numbers the clusters by their lowest row;
 *             each row's number, probability and GLOSH score on the device,
 *             by the host's rules (gc_hdb_row_choice, _probability, _glosh).
 *
 * Only the answer comes back: 20 bytes a row, and about 70 bytes a cluster
 * each way for the selection.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>
#include <math_constants.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace gc {
namespace hdbscan {
namespace {

constexpr uint32_t kNone = 0xffffffffu;	/* GC_HDB_NONE */

/*
 * Clusters of more terms than this are summed on the host (each warp of
 * the device's one launch sums at most this many: about 1 ms), in chunks
 * of kHostChunk terms with cancel asked between them.
 */
constexpr int64_t kDeviceTerms = (int64_t) 1 << 16;
constexpr int64_t kHostChunk = (int64_t) 1 << 20;

__device__ inline double lambda_of(const gc_hdbscan_edge *edges, int64_t m)
{
	const double w = edges[m].w;

	return w > 0.0 ? 1.0 / w : CUDART_INF;
}

/* What the host needs of split j, which makes clusters 1 + 2j and 2 + 2j. */
struct Split
{
	uint64_t	key;			/* its place in scikit-learn's breadth-first walk */
	double		birth;			/* its lambda: its clusters' birth */
	int64_t		parent;			/* the cluster it splits */
	uint32_t	lsize;			/* its clusters' rows */
	uint32_t	rsize;
};

/* Per split: its record, and its clusters' birth (for the stabilities' terms). */
__global__ void clusters(const gc_hdb_merge *mg, const gc_hdb_state *st, const gc_hdbscan_edge *edges,
						 const uint32_t *split_index, int64_t n, int64_t K, int64_t min_size,
						 Split *split, double *birth, int *bad)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n - 1)
		return;
	const gc_hdb_merge g = mg[i];

	if (!(g.lsize >= min_size && g.rsize >= min_size))
		return;

	const gc_hdb_state s = st[n + i];
	const int64_t j = split_index[i],
				c = 1 + 2 * j;

	if (s.fell != kNone || s.own >= K || c + 1 >= K)
	{
		*bad = 1;
		return;
	}
	Split		x;

	x.key = s.at.place;
	x.birth = lambda_of(edges, i);
	x.parent = s.own;
	x.lsize = g.lsize;
	x.rsize = g.rsize;
	split[j] = x;
	birth[c] = x.birth;
	birth[c + 1] = x.birth;
}

/* The merges in the order n - 2 down, keyed by their cluster (K where they fell out). */
__global__ void term_keys(const gc_hdb_state *st, int64_t n, uint32_t K, uint32_t *key, uint32_t *val,
						  int *bad)
{
	const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= n - 1)
		return;
	const int64_t i = n - 2 - t;
	const gc_hdb_state s = st[n + i];

	if (s.fell == kNone && s.own >= K)
		*bad = 1;
	key[t] = s.fell == kNone && s.own < K ? s.own : K;
	val[t] = (uint32_t) i;
}

/* The terms of merge val [t] of cluster key [t] (gc_hdb_stab_terms); count: how many. */
__device__ inline int64_t merge_terms(const uint32_t *key, const uint32_t *val, int64_t t,
									  const gc_hdbscan_edge *edges, const gc_hdb_merge *mg,
									  const double *birth, int64_t min_size, double *first,
									  double *rest)
{
	const uint32_t i = val[t];

	return gc_hdb_stab_terms(lambda_of(edges, i) - birth[key[t]], mg[i].lsize, mg[i].rsize,
							 min_size, first, rest);
}

/*
 * Each cluster's run [start, end) of the sorted merges (both preset to 0),
 * each merge's count of terms (0 where it fell out), and each cluster's
 * death (preset to 0): the largest lambda of its merges, which is its last
 * merge's, since the edges are sorted by weight and a cluster's merges come
 * in the order n - 2 down.
 */
__global__ void segments(const uint32_t *key, const uint32_t *val, int64_t m, uint32_t K,
						 const gc_hdbscan_edge *edges, const gc_hdb_merge *mg, const double *birth,
						 int64_t min_size, int64_t *start, int64_t *end, double *death,
						 unsigned long long *count)
{
	const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= m)
		return;
	const uint32_t k = key[t];

	if (k >= K)
	{
		count[t] = 0;
		return;
	}
	double		first,
				rest;

	count[t] = (unsigned long long) merge_terms(key, val, t, edges, mg, birth, min_size, &first, &rest);
	if (t == 0 || key[t - 1] != k)
		start[k] = t;
	if (t == m - 1 || key[t + 1] != k)
	{
		end[k] = t + 1;
		death[k] = lambda_of(edges, val[t]);
	}
}

/* Every merge's terms, in order, at its offset (the exclusive sum of the counts). */
__global__ void expand(const uint32_t *key, const uint32_t *val, int64_t m, uint32_t K,
					   const gc_hdbscan_edge *edges, const gc_hdb_merge *mg, const double *birth,
					   int64_t min_size, const unsigned long long *offset, double *terms)
{
	const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= m || key[t] >= K)
		return;
	double		first,
				rest;
	const int64_t count = merge_terms(key, val, t, edges, mg, birth, min_size, &first, &rest);
	double	   *out = terms + offset[t];

	if (count > 0)
		out[0] = first;
	for (int64_t j = 1; j < count; j++)
		out[j] = rest;
}

/* A cluster whose terms the host sums: its number and its terms [from, to). */
struct LongSum
{
	int64_t		k;
	int64_t		from;
	int64_t		to;
};

/*
 * Each cluster's terms as [from, to) of the expanded terms, into start and
 * end; a cluster of more than kDeviceTerms goes on the host's list.
 */
__global__ void bounds(int64_t K, const unsigned long long *offset, const unsigned long long *count,
					   int64_t *start, int64_t *end, LongSum *longs, unsigned int *nlong)
{
	const int64_t k = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (k >= K)
		return;
	const int64_t s = start[k],
				e = end[k];
	int64_t		from = 0,
				to = 0;

	if (e > s)
	{
		from = (int64_t) offset[s];
		to = (int64_t) (offset[e - 1] + count[e - 1]);
	}
	start[k] = from;
	end[k] = to;
	if (to - from > kDeviceTerms)
	{
		LongSum		x = {k, from, to};

		longs[atomicAdd(nlong, 1u)] = x;
	}
}

/*
 * One warp per cluster of at most kDeviceTerms terms: their sum in order
 * into stab.  The warp loads 32 terms at a time and every lane does the
 * same sum.
 */
__global__ void sums(const double *terms, const int64_t *from, const int64_t *to, int64_t K,
					 double *stab)
{
	const int64_t k = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) / 32;
	const int	lane = threadIdx.x & 31;

	if (k >= K)
		return;
	const int64_t e = to[k];
	int64_t		p = from[k];

	if (e - p > kDeviceTerms || p >= e)
		return;
	double		s = 0.0,
				next = p + lane < e ? terms[p + lane] : 0.0;

	while (p < e)
	{
		const double cur = next;

		next = p + 32 + lane < e ? terms[p + 32 + lane] : 0.0;
		if (e - p >= 32)
		{
#pragma unroll
			for (int j = 0; j < 32; j++)
				s += __shfl_sync(0xffffffffu, cur, j);
			p += 32;
		}
		else
		{
			for (int j = 0; j < e - p; j++)
				s += __shfl_sync(0xffffffffu, cur, j);
			p = e;
		}
	}
	if (lane == 0)
		stab[k] = s;
}

/* The splits' places, to be sorted (gc_hdb_number's order). */
__global__ void split_keys(const Split *split, int64_t splits, unsigned long long *key, uint32_t *val)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j < splits)
	{
		key[j] = split[j].key;
		val[j] = (uint32_t) j;
	}
}

/* num [c]: the number of provisional cluster c, from the splits in order (num [0] preset to 0). */
__global__ void number(const uint32_t *order, int64_t splits, int64_t *num)
{
	const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (t < splits)
	{
		const int64_t j = order[t];

		num[1 + 2 * j] = 1 + 2 * t;
		num[2 + 2 * j] = 2 + 2 * t;
	}
}

/* The clusters as the host's arrays, numbered (child1 and child2 preset to -1). */
struct Numbered
{
	int64_t    *parent;
	double	   *birth;
	int64_t    *size;
	int64_t    *child1;
	int64_t    *child2;
	double	   *stab;
	double	   *death;
};

__global__ void permute(const Split *split, const int64_t *num, const double *stab, const double *death,
						int64_t K, int64_t n, Numbered out)
{
	const int64_t c = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= K)
		return;
	const int64_t k = num[c];

	out.stab[k] = stab[c];
	out.death[k] = death[c];
	if (c == 0)
	{
		out.parent[k] = -1;
		out.birth[k] = 0.0;
		out.size[k] = n;
		return;
	}
	const Split x = split[(c - 1) / 2];
	const int64_t p = num[x.parent];

	out.parent[k] = p;
	out.birth[k] = x.birth;
	out.size[k] = c % 2 == 1 ? x.lsize : x.rsize;
	if (c % 2 == 1)
		out.child1[p] = k;
	else
		out.child2[p] = k;
}

/*
 * Each row's chosen cluster node (-1: noise) into cluster, and each node's
 * lowest row.  The lanes of a warp that chose the same node send only the
 * lowest of their rows, and only while it is below what first holds: with
 * few clusters, millions of rows would otherwise wait on a few addresses.
 * Every lane of a block runs to the end (the warp-wide match).
 */
__global__ void choose(const gc_hdb_state *st, int64_t n, int64_t K, const int64_t *num,
					   const int64_t *node_top, const uint8_t *selected, int single, double threshold,
					   int32_t *cluster, unsigned long long *first, int *bad)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int64_t		k = -1;

	if (i < n)
	{
		const gc_hdb_state s = st[i];

		if (s.fell == kNone || s.own >= K)
			*bad = 1;
		else
		{
			const int64_t top = node_top[num[s.own]];

			k = gc_hdb_row_choice(top, selected[top], s.at.lambda, single, threshold);
			if (k == -2)
			{
				*bad = 1;
				k = -1;
			}
		}
		cluster[i] = (int32_t) k;
	}

	/* the lanes of the same node: the lowest lane holds the lowest row */
	const unsigned same = __match_any_sync(0xffffffffu, (unsigned long long) k);

	if (k >= 0 && (threadIdx.x & 31) == __ffs(same) - 1 &&
		(unsigned long long) i < *(volatile unsigned long long *) &first[k])
		atomicMin(&first[k], (unsigned long long) i);
}

/* Each row's number, and its probability and GLOSH score where wanted (not null). */
__global__ void answer(const gc_hdb_state *st, int64_t n, const int64_t *num, const int64_t *node_label,
					   const double *death, const double *glosh, int32_t *cluster,
					   double *probability, double *score)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	const int32_t k = cluster[i];

	if (k >= 0)
		cluster[i] = (int32_t) node_label[k];
	if (!probability)
		return;

	const gc_hdb_state s = st[i];

	probability[i] = k < 0 ? 0.0 : gc_hdb_row_probability(s.at.lambda, death[k]);
	score[i] = gc_hdb_row_glosh(s.at.lambda, glosh[num[s.own]]);
}

/* Copies count elements from device src to host dst. */
template <typename T>
void to_host(T *dst, const T *src, int64_t count)
{
	if (count > 0)
		CUDA_TRY(cudaMemcpy(dst, src, sizeof(T) * (size_t) count, cudaMemcpyDeviceToHost));
}

template <typename T>
void to_device(T *dst, const T *src, int64_t count)
{
	if (count > 0)
		CUDA_TRY(cudaMemcpy(dst, src, sizeof(T) * (size_t) count, cudaMemcpyHostToDevice));
}

void check_bad(const DeviceBuffer<int> &bad, const char *what)
{
	int			h = 0;

	CUDA_TRY(cudaMemcpy(&h, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
	if (h)
		fail(GC_ERR_INTERNAL, "HDBSCAN's %s on the device are inconsistent", what);
}

} // namespace

void finish(const Call &call, const gc_hdbscan_params &p, const gc_hdbscan_edge *edges,
			const gc_hdb_merge *mg, const gc_hdb_state *st, int32_t n, gc_hdbscan_result *result,
			FinishHost &host)
{
	const int64_t m = (int64_t) n - 1,
				min_size = p.min_cluster_size;
	const char *what = "HDBSCAN's clusters";
	const bool	debug = tuning_of(call.exec).debug != 0;
	Stopwatch	lap;
	auto		step = [&](const char *done) {
		if (debug)
		{
			CUDA_TRY(cudaDeviceSynchronize());
			fprintf(stderr, "gpuclust hdbscan: finish: %s, %.3f ms\n", done, lap.ms());
			lap.restart();
		}
	};
	DeviceBuffer<uint32_t> split_index;
	const int64_t splits = split_numbers(mg, m, min_size, split_index);
	const int64_t K = 1 + 2 * splits;
	DeviceBuffer<Split> split(splits > 0 ? splits : 1, what);
	DeviceBuffer<double> birth(K, what), stab(K, what), death(K, what);
	DeviceBuffer<int> bad(1, what);

	if (K > host.kmax)
		fail(GC_ERR_INTERNAL, "HDBSCAN made %lld clusters, more than the %lld possible",
			 (long long) K, (long long) host.kmax);

	gc_hdb_work &w = host.w;
	double	   *glosh = host.glosh.get();
	int64_t    *first = host.first.get(),
			   *node_label = host.node_label.get();

	w.nodes = K;
	CUDA_TRY(cudaMemset(bad.get(), 0, sizeof(int)));
	CUDA_TRY(cudaMemset(birth.get(), 0, birth.bytes()));	/* the root's: its terms are lambda - 0 */
	CUDA_TRY(cudaMemset(stab.get(), 0, stab.bytes()));
	CUDA_TRY(cudaMemset(death.get(), 0, death.bytes()));
	clusters<<<blocks_for(m, 256), 256>>>(mg, st, edges, split_index.get(), n, K, min_size,
										  split.get(), birth.get(), bad.get());
	CHECK_LAUNCH("clusters");
	split_index.release();
	step("splits");

	/*
	 * The stabilities: the merges in cluster order, their terms expanded
	 * in order, each cluster's sum on the device or, when long, the host.
	 */
	DeviceBuffer<double> terms;
	std::vector<LongSum> longs;

	{
		DeviceBuffer<uint32_t> k1(m, what), k2(m, what), v1(m, what), v2(m, what);
		DeviceBuffer<int64_t> start(K, what), end(K, what);
		DeviceBuffer<unsigned long long> count(m, what), offset(m, what);
		DeviceBuffer<LongSum> dlongs;
		DeviceBuffer<unsigned int> nlong(1, what);
		cub::DoubleBuffer<uint32_t> kbuf(k1.get(), k2.get()), vbuf(v1.get(), v2.get());
		int			bits = 1;
		size_t		bytes = 0;
		unsigned long long last[2] = {0, 0};
		unsigned int hlong = 0;

		while (bits < 32 && ((uint64_t) 1 << bits) <= (uint64_t) K)
			bits++;
		term_keys<<<blocks_for(m, 256), 256>>>(st, n, (uint32_t) K, k1.get(), v1.get(), bad.get());
		CHECK_LAUNCH("term_keys");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kbuf, vbuf, (int) m, 0, bits));
		{
			DeviceBuffer<unsigned char> tmp(bytes, what);

			CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, kbuf, vbuf, (int) m, 0, bits));
		}
		CUDA_TRY(cudaMemset(start.get(), 0, start.bytes()));
		CUDA_TRY(cudaMemset(end.get(), 0, end.bytes()));
		segments<<<blocks_for(m, 256), 256>>>(kbuf.Current(), vbuf.Current(), m, (uint32_t) K, edges, mg,
											  birth.get(), min_size, start.get(), end.get(),
											  death.get(), count.get());
		CHECK_LAUNCH("segments");
		bytes = 0;
		CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, count.get(), offset.get(), (int) m));
		{
			DeviceBuffer<unsigned char> tmp(bytes, what);

			CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.get(), bytes, count.get(), offset.get(), (int) m));
		}
		CUDA_TRY(cudaMemcpy(&last[0], offset.get() + m - 1, sizeof(last[0]), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(&last[1], count.get() + m - 1, sizeof(last[1]), cudaMemcpyDeviceToHost));
		step("merges in cluster order");
		terms.reset(last[0] + last[1] > 0 ? last[0] + last[1] : 1, what);
		dlongs.reset((last[0] + last[1]) / kDeviceTerms + 1, what);
		call.check_cancel();
		expand<<<blocks_for(m, 256), 256>>>(kbuf.Current(), vbuf.Current(), m, (uint32_t) K, edges, mg,
											birth.get(), min_size, offset.get(), terms.get());
		CHECK_LAUNCH("expand");
		CUDA_TRY(cudaMemset(nlong.get(), 0, sizeof(unsigned int)));
		bounds<<<blocks_for(K, 256), 256>>>(K, offset.get(), count.get(), start.get(), end.get(),
											dlongs.get(), nlong.get());
		CHECK_LAUNCH("bounds");
		step("terms");
		sums<<<blocks_for(32 * K, 256), 256>>>(terms.get(), start.get(), end.get(), K, stab.get());
		CHECK_LAUNCH("sums");
		CUDA_TRY(cudaMemcpy(&hlong, nlong.get(), sizeof(hlong), cudaMemcpyDeviceToHost));
		longs.resize(hlong);
		to_host(longs.data(), dlongs.get(), (int64_t) hlong);
		call.timing->counts[2] = (int64_t) hlong;
		step("device sums");
	}
	check_bad(bad, "clusters");
	{
		/* the long sums, in order, a chunk at a time, into stab */
		std::vector<double> chunk;

		for (const LongSum &x : longs)
		{
			double		sum = 0.0;

			chunk.resize((size_t) std::min(kHostChunk, x.to - x.from));
			for (int64_t at = x.from; at < x.to; at += kHostChunk)
			{
				const int64_t c = std::min(kHostChunk, x.to - at);

				call.check_cancel();
				to_host(chunk.data(), terms.get() + at, c);
				for (int64_t j = 0; j < c; j++)
					sum += chunk[(size_t) j];
			}
			to_device(stab.get() + x.k, &sum, 1);
		}
		terms.release();
	}
	step("host sums");

	/* The numbers (gc_hdb_number's: the splits by their place) and the numbered clusters. */
	DeviceBuffer<int64_t> num(K, what), n_parent(K, what), n_size(K, what), n_child1(K, what),
				n_child2(K, what);
	DeviceBuffer<double> n_birth(K, what), n_stab(K, what), n_death(K, what);

	CUDA_TRY(cudaMemset(num.get(), 0, sizeof(int64_t)));
	if (splits > 0)
	{
		DeviceBuffer<unsigned long long> k1(splits, what), k2(splits, what);
		DeviceBuffer<uint32_t> v1(splits, what), v2(splits, what);
		cub::DoubleBuffer<unsigned long long> kbuf(k1.get(), k2.get());
		cub::DoubleBuffer<uint32_t> vbuf(v1.get(), v2.get());
		size_t		bytes = 0;

		split_keys<<<blocks_for(splits, 256), 256>>>(split.get(), splits, k1.get(), v1.get());
		CHECK_LAUNCH("split_keys");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kbuf, vbuf, (int) splits, 0, 64));
		{
			DeviceBuffer<unsigned char> tmp(bytes, what);

			CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, kbuf, vbuf, (int) splits, 0, 64));
		}
		number<<<blocks_for(splits, 256), 256>>>(vbuf.Current(), splits, num.get());
		CHECK_LAUNCH("number");
	}
	{
		Numbered	out = {n_parent.get(), n_birth.get(), n_size.get(), n_child1.get(), n_child2.get(),
						   n_stab.get(), n_death.get()};

		CUDA_TRY(cudaMemset(n_child1.get(), 0xff, n_child1.bytes()));
		CUDA_TRY(cudaMemset(n_child2.get(), 0xff, n_child2.bytes()));
		permute<<<blocks_for(K, 256), 256>>>(split.get(), num.get(), stab.get(), death.get(), K, n, out);
		CHECK_LAUNCH("permute");
	}
	split.release();
	birth.release();
	stab.release();
	death.release();
	step("numbered");

	/* The clusters on the host. */
	to_host(w.k_parent, n_parent.get(), K);
	to_host(w.k_birth, n_birth.get(), K);
	to_host(w.k_size, n_size.get(), K);
	to_host(w.k_child1, n_child1.get(), K);
	to_host(w.k_child2, n_child2.get(), K);
	to_host(w.k_stab, n_stab.get(), K);
	to_host(w.k_death, n_death.get(), K);
	step("clusters copied");

	/* The selection on the host. */
	int			single = 0;
	double		threshold = 0.0;

	require(gc_hdb_given_select(&w, &p, glosh, &single, &threshold, error_record()));
	step("selection");

	/* The rows. */
	DeviceBuffer<int64_t> d_top(K, what), d_label(K, what);
	DeviceBuffer<double> d_glosh(K, what);
	DeviceBuffer<uint8_t> d_selected(K, what);
	DeviceBuffer<unsigned long long> d_first(K, what);
	DeviceBuffer<int32_t> cluster(n, "HDBSCAN's labels");
	/* the probabilities and scores only where wanted */
	const size_t scored = result->probability ? (size_t) n : 0;
	DeviceBuffer<double> probability(scored, "HDBSCAN's probabilities"), score(scored, "HDBSCAN's scores");

	to_device(d_top.get(), w.sub, K);
	to_device(d_glosh.get(), glosh, K);
	to_device(d_selected.get(), w.k_selected, K);
	CUDA_TRY(cudaMemset(d_first.get(), 0xff, d_first.bytes()));
	call.check_cancel();
	choose<<<blocks_for(n, 256), 256>>>(st, n, K, num.get(), d_top.get(), d_selected.get(), single,
										threshold, cluster.get(), d_first.get(), bad.get());
	CHECK_LAUNCH("choose");
	check_bad(bad, "labels");
	to_host((unsigned long long *) first, d_first.get(), K);
	for (int64_t k = 0; k < K; k++)
		if (first[k] < 0)
			first[k] = n;		/* none: the preset all-ones */
	step("choice");

	int64_t		clusters_found = 0;

	require(gc_hdb_given_number(first, K, n, node_label, &clusters_found,
								call.exec.cancel, call.exec.cancel_arg, error_record()));
	to_device(d_label.get(), node_label, K);
	answer<<<blocks_for(n, 256), 256>>>(st, n, num.get(), d_label.get(), n_death.get(), d_glosh.get(),
										cluster.get(), probability.get(), score.get());
	CHECK_LAUNCH("answer");
	CUDA_TRY(cudaDeviceSynchronize());
	step("answers");
	if (scored)
		copy_results(call, {{result->cluster, cluster.get(), cluster.bytes()},
							{result->probability, probability.get(), probability.bytes()},
							{result->outlier_score, score.get(), score.bytes()}});
	else
		copy_results(call, {{result->cluster, cluster.get(), cluster.bytes()}});
	result->n_clusters = clusters_found;
	step("answers copied");
}

} // namespace hdbscan
} // namespace gc
