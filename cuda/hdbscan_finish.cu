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
 *             n - 2 down); one warp per cluster sums them in that order with
 *             gc_hdb_stab_add, the host's rule, so the sum rounds as the
 *             host's (timing counts[2]: the launches).  The sum of one cluster is sequential by nature: a
 *             launch sums at most kTermsPerLaunch terms of each cluster and
 *             the host asks cancel between launches, so a cluster of every
 *             row (rows leaving it one at a time) costs more launches, not
 *             a launch that cannot be stopped;
 *   select    the clusters are copied to the host, which numbers and
 *             selects them (gc_hdb_given_select: gc_hdb_number and
 *             gc_hdb_select, the CPU back end's code);
 *   rows      each row's cluster and each cluster's lowest row on the
 *             device; the host numbers the clusters by their lowest row;
 *             each row's number, probability and GLOSH score on the device,
 *             by the host's rules (gc_hdb_row_choice, _probability, _glosh).
 *
 * Only the answer comes back: 20 bytes a row, and 76 a cluster.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>
#include <math_constants.h>

#include <memory>

namespace gc {
namespace hdbscan {
namespace {

constexpr uint32_t kNone = 0xffffffffu;	/* GC_HDB_NONE */

/* Terms of one cluster a launch sums at most: about 2 ms of one warp. */
constexpr int64_t kTermsPerLaunch = (int64_t) 1 << 16;

/* One merge of a cluster, as its stability sums it: v = lambda - the cluster's birth. */
struct Term
{
	double		v;
	uint32_t	lc;
	uint32_t	rc;
};

__device__ inline double lambda_of(const gc_hdbscan_edge *edges, int64_t m)
{
	const double w = edges[m].w;

	return w > 0.0 ? 1.0 / w : CUDART_INF;
}

/* Per split: its clusters 1 + 2j and 2 + 2j and their parent's children (child arrays preset to -1). */
__global__ void clusters(const gc_hdb_merge *mg, const gc_hdb_state *st, const gc_hdbscan_edge *edges,
						 const uint32_t *split_index, int64_t n, int64_t K, int64_t min_size,
						 int64_t *parent, double *birth, int64_t *size, int64_t *child1,
						 int64_t *child2, uint64_t *key, int *bad)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n - 1)
		return;
	const gc_hdb_merge g = mg[i];

	if (!(g.lsize >= min_size && g.rsize >= min_size))
		return;

	const gc_hdb_state s = st[n + i];
	const int64_t c = 1 + 2 * (int64_t) split_index[i];

	if (s.fell != kNone || s.own >= K || c + 1 >= K)
	{
		*bad = 1;
		return;
	}
	const double lam = lambda_of(edges, i);

	parent[c] = s.own;
	parent[c + 1] = s.own;
	birth[c] = lam;
	birth[c + 1] = lam;
	size[c] = g.lsize;
	size[c + 1] = g.rsize;
	child1[s.own] = c;
	child2[s.own] = c + 1;
	key[split_index[i]] = s.at.place;
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

/*
 * Each cluster's run [start, end) of the sorted terms (both preset to 0),
 * the terms, and each cluster's death (preset to 0): the largest lambda of
 * its merges, which is its last merge's, since the edges are sorted by
 * weight and a cluster's merges come in the order n - 2 down.
 */
__global__ void segments(const uint32_t *key, const uint32_t *val, int64_t m, uint32_t K,
						 const gc_hdbscan_edge *edges, const gc_hdb_merge *mg, const double *birth,
						 int64_t *start, int64_t *end, double *death, Term *terms)
{
	const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= m)
		return;
	const uint32_t k = key[t];

	if (k >= K)
		return;
	const uint32_t i = val[t];
	const double lam = lambda_of(edges, i);
	Term		x;

	if (t == 0 || key[t - 1] != k)
		start[k] = t;
	if (t == m - 1 || key[t + 1] != k)
	{
		end[k] = t + 1;
		death[k] = lam;
	}
	x.v = lam - birth[k];
	x.lc = mg[i].lsize;
	x.rc = mg[i].rsize;
	terms[t] = x;
}

/*
 * One warp per cluster: up to limit more of its terms added in order to
 * stab (at pos, which moves on); *more set while any remain.  The warp
 * loads 32 terms at a time and every lane does the same sums.
 */
__global__ void sums(const Term *terms, const int64_t *end, int64_t K, int64_t min_size,
					 int64_t limit, int64_t *pos, double *stab, int *more)
{
	const int64_t k = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) / 32;
	const int	lane = threadIdx.x & 31;

	if (k >= K)
		return;
	int64_t		p = pos[k];
	const int64_t e = end[k];

	if (p >= e)
		return;
	const int64_t stop = min(e, p + limit);
	double		s = stab[k];
	Term		next = {0.0, 0, 0};

	if (p + lane < stop)
		next = terms[p + lane];
	while (p < stop)
	{
		const int	cnt = (int) min((int64_t) 32, stop - p);
		const Term	cur = next;

		if (p + 32 + lane < stop)
			next = terms[p + 32 + lane];
		for (int j = 0; j < cnt; j++)
		{
			const double v = __shfl_sync(0xffffffffu, cur.v, j);
			const uint32_t lc = __shfl_sync(0xffffffffu, cur.lc, j);
			const uint32_t rc = __shfl_sync(0xffffffffu, cur.rc, j);

			s = gc_hdb_stab_add(s, v, lc, rc, min_size);
		}
		p += cnt;
	}
	if (lane == 0)
	{
		pos[k] = p;
		stab[k] = s;
		if (p < e)
			*more = 1;
	}
}

/* Each row's chosen cluster node (-1: noise) into cluster, and each node's lowest row. */
__global__ void choose(const gc_hdb_state *st, int64_t n, int64_t K, const int64_t *row_top,
					   const uint8_t *selected, int single, double threshold, int32_t *cluster,
					   unsigned long long *first, int *bad)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	const gc_hdb_state s = st[i];

	if (s.fell == kNone || s.own >= K)
	{
		*bad = 1;
		cluster[i] = -1;
		return;
	}
	const int64_t top = row_top[s.own];
	int64_t		k = gc_hdb_row_choice(top, selected[top], s.at.lambda, single, threshold);

	if (k == -2)
	{
		*bad = 1;
		k = -1;
	}
	cluster[i] = (int32_t) k;
	if (k >= 0)
		atomicMin(&first[k], (unsigned long long) i);
}

/* Each row's number, probability and GLOSH score. */
__global__ void answer(const gc_hdb_state *st, int64_t n, const int64_t *node_label,
					   const double *death, const double *row_glosh, int32_t *cluster,
					   double *probability, double *score)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	const gc_hdb_state s = st[i];
	const int32_t k = cluster[i];

	if (k < 0)
		probability[i] = 0.0;
	else
	{
		cluster[i] = (int32_t) node_label[k];
		probability[i] = gc_hdb_row_probability(s.at.lambda, death[k]);
	}
	score[i] = gc_hdb_row_glosh(s.at.lambda, row_glosh[s.own]);
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

/* Owns a gc_hdb_work of the host. */
struct HostWork
{
	gc_hdb_work w;

	HostWork() { memset(&w, 0, sizeof(w)); }
	~HostWork() { gc_hdb_free(&w); }
};

} // namespace

void finish(const Call &call, const gc_hdbscan_params &p, const gc_hdbscan_edge *edges,
			const gc_hdb_merge *mg, const gc_hdb_state *st, int32_t n, gc_hdbscan_result *result)
{
	const int64_t m = (int64_t) n - 1,
				min_size = p.min_cluster_size;
	const char *what = "HDBSCAN's clusters";
	DeviceBuffer<uint32_t> split_index;
	const int64_t splits = split_numbers(mg, m, min_size, split_index);
	const int64_t K = 1 + 2 * splits;
	DeviceBuffer<int64_t> parent(K, what), size(K, what), child1(K, what), child2(K, what);
	DeviceBuffer<double> birth(K, what), stab(K, what), death(K, what);
	DeviceBuffer<uint64_t> key(splits > 0 ? splits : 1, what);
	DeviceBuffer<int> bad(1, what), more(1, what);

	CUDA_TRY(cudaMemset(bad.get(), 0, sizeof(int)));
	CUDA_TRY(cudaMemset(child1.get(), 0xff, child1.bytes()));
	CUDA_TRY(cudaMemset(child2.get(), 0xff, child2.bytes()));
	CUDA_TRY(cudaMemset(stab.get(), 0, stab.bytes()));
	CUDA_TRY(cudaMemset(death.get(), 0, death.bytes()));
	clusters<<<blocks_for(m, 256), 256>>>(mg, st, edges, split_index.get(), n, K, min_size,
										  parent.get(), birth.get(), size.get(), child1.get(),
										  child2.get(), key.get(), bad.get());
	CHECK_LAUNCH("clusters");
	/* birth [0] is 0: the root's stability terms are lambda - 0 */
	CUDA_TRY(cudaMemset(birth.get(), 0, sizeof(double)));
	split_index.release();

	/* The stabilities. */
	{
		DeviceBuffer<uint32_t> k1(m, what), k2(m, what), v1(m, what), v2(m, what);
		DeviceBuffer<int64_t> start(K, what), end(K, what), pos(K, what);
		DeviceBuffer<Term> terms(m, what);
		cub::DoubleBuffer<uint32_t> kb(k1.get(), k2.get()), vb(v1.get(), v2.get());
		int			bits = 1;
		size_t		bytes = 0;
		int64_t		launches = 0;

		while (bits < 32 && ((uint64_t) 1 << bits) <= (uint64_t) K)
			bits++;
		term_keys<<<blocks_for(m, 256), 256>>>(st, n, (uint32_t) K, k1.get(), v1.get(), bad.get());
		CHECK_LAUNCH("term_keys");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kb, vb, (int) m, 0, bits));
		{
			DeviceBuffer<unsigned char> tmp(bytes, what);

			CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, kb, vb, (int) m, 0, bits));
		}
		CUDA_TRY(cudaMemset(start.get(), 0, start.bytes()));
		CUDA_TRY(cudaMemset(end.get(), 0, end.bytes()));
		segments<<<blocks_for(m, 256), 256>>>(kb.Current(), vb.Current(), m, (uint32_t) K, edges, mg,
											  birth.get(), start.get(), end.get(), death.get(),
											  terms.get());
		CHECK_LAUNCH("segments");
		CUDA_TRY(cudaMemcpy(pos.get(), start.get(), pos.bytes(), cudaMemcpyDeviceToDevice));
		for (;;)
		{
			int			h = 0;

			call.check_cancel();
			CUDA_TRY(cudaMemset(more.get(), 0, sizeof(int)));
			sums<<<blocks_for(32 * K, 256), 256>>>(terms.get(), end.get(), K, min_size, kTermsPerLaunch,
												   pos.get(), stab.get(), more.get());
			launches++;
			CHECK_LAUNCH("sums");
			CUDA_TRY(cudaMemcpy(&h, more.get(), sizeof(int), cudaMemcpyDeviceToHost));
			if (!h)
				break;
		}
		call.timing->counts[2] = launches;
	}
	check_bad(bad, "clusters");

	/* The selection on the host. */
	HostWork	hw;
	gc_hdb_work &w = hw.w;
	std::unique_ptr<int64_t[]> row_top(new int64_t[(size_t) K]);
	std::unique_ptr<double[]> row_glosh(new double[(size_t) K]);
	std::unique_ptr<int64_t[]> first(new int64_t[(size_t) K]);
	std::unique_ptr<int64_t[]> node_label(new int64_t[(size_t) K]);
	int			single = 0;
	double		threshold = 0.0;

	require(gc_hdb_given_alloc(&w, n, K, error_record()));
	to_host(w.k_parent, parent.get(), K);
	to_host(w.k_birth, birth.get(), K);
	to_host(w.k_size, size.get(), K);
	to_host(w.k_child1, child1.get(), K);
	to_host(w.k_child2, child2.get(), K);
	to_host(w.k_stab, stab.get(), K);
	to_host(w.k_death, death.get(), K);
	to_host(w.k_key, key.get(), splits);
	w.k_parent[0] = -1;
	w.k_size[0] = n;
	require(gc_hdb_given_select(&w, &p, row_top.get(), row_glosh.get(), &single, &threshold,
								call.exec.cancel, call.exec.cancel_arg, error_record()));

	/* The rows. */
	DeviceBuffer<int64_t> d_top(K, what), d_label(K, what);
	DeviceBuffer<double> d_glosh(K, what);
	DeviceBuffer<uint8_t> d_selected(K, what);
	DeviceBuffer<unsigned long long> d_first(K, what);
	DeviceBuffer<int32_t> cluster(n, "HDBSCAN's labels");
	DeviceBuffer<double> probability(n, "HDBSCAN's probabilities"), score(n, "HDBSCAN's scores");

	for (int64_t k = 0; k < K; k++)
		first[k] = n;
	to_device(d_top.get(), row_top.get(), K);
	to_device(d_glosh.get(), row_glosh.get(), K);
	to_device(d_selected.get(), w.k_selected, K);
	to_device(death.get(), w.k_death, K);
	to_device(d_first.get(), (const unsigned long long *) first.get(), K);
	call.check_cancel();
	choose<<<blocks_for(n, 256), 256>>>(st, n, K, d_top.get(), d_selected.get(), single, threshold,
										cluster.get(), d_first.get(), bad.get());
	CHECK_LAUNCH("choose");
	check_bad(bad, "labels");
	to_host((unsigned long long *) first.get(), d_first.get(), K);

	int64_t		clusters_found = 0;

	require(gc_hdb_given_number(first.get(), K, n, node_label.get(), &clusters_found,
								call.exec.cancel, call.exec.cancel_arg, error_record()));
	to_device(d_label.get(), node_label.get(), K);
	answer<<<blocks_for(n, 256), 256>>>(st, n, d_label.get(), death.get(), d_glosh.get(), cluster.get(),
										probability.get(), score.get());
	CHECK_LAUNCH("answer");
	CUDA_TRY(cudaDeviceSynchronize());
	copy_results(call, {{result->cluster, cluster.get(), cluster.bytes()},
						{result->probability, probability.get(), probability.bytes()},
						{result->outlier_score, score.get(), score.bytes()}});
	result->n_clusters = clusters_found;
}

} // namespace hdbscan
} // namespace gc
