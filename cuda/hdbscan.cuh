/*
 * hdbscan.cuh
 *    The parts of the GPU HDBSCAN (cuda/hdbscan.cu, cuda/hdbscan_tree.cu,
 *    cuda/hdbscan_search.cu): the bounding volume hierarchy over the rows,
 *    its view for kernels, the workspace of one call, and the phases.
 *
 * The hierarchy is a linear BVH (Karras, "Maximizing parallelism in the
 * construction of BVHs, octrees, and k-d trees", HPG 2012): rows sorted by
 * the Morton code of their first min(d, 16) coordinates (the box
 * dimensions, in order of widest spread, each through a sample's quantiles
 * so that far outliers do not crush the rest into a few codes), ties broken
 * by the sorted position (so that every key is unique and the tree at most
 * 97 levels deep), a binary radix tree over them, and per internal node the
 * bounding box of its rows on the first min(d, 16) coordinates, the lowest
 * row index under it, the smallest core distance under it, and (per
 * Boruvka round) the component that all its rows belong to, or -1.
 *
 * Internal nodes are 0 .. n - 2 (0 is the root); a child c >= 0 is an
 * internal node, c < 0 the leaf at sorted position ~c.  Everything per row
 * is stored by sorted position (xs, core_s, comp, ...); perm maps a sorted
 * position to the row's index in query order, which is the index that the
 * order of edges (common/hdbscan.h) and the answer use.
 */
#ifndef GPUCLUST_HDBSCAN_CUH
#define GPUCLUST_HDBSCAN_CUH

#include "dbscan_device.cuh"
#include "entry.cuh"
#include "hdbscan.h"
#include "metric.h"

#include <functional>
#include <memory>
#include <initializer_list>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>

namespace gc {
namespace hdbscan {

using dbscan::AbortFlag;
using dbscan::by_type;
using dbscan::pick;

/*
 * Box dimensions at most (a box on a prefix of the coordinates bounds dist2
 * from below).  Above 8 the search prunes only with boxes in every
 * coordinate: on the H200, 200k x 12 blobs took 0.59 s with boxes in 16,
 * more than 12 s with boxes in 8 (BENCHMARKS.md, "HDBSCAN's GPU tree").
 */
constexpr int kMaxBoxDims = 16;

/* Traversal stack entries: the tree is at most 64 + 32 + 1 levels deep, one entry per level. */
constexpr int kStack = 112;

/* Nodes a thread visits between two reads of the abort flag. */
constexpr int32_t kAbortEvery = 4096;

/* k up to this is kept in a heap in registers / local memory; larger k in global memory. */
constexpr int kLocalK = 32;

/*
 * min_samples from 2 up to this keep their k nearest rows for the first
 * Boruvka round (Seed): 4 k + 8 bytes a row.
 */
constexpr int kSeedK = 16;

/* The k nearest rows of each row for the first Boruvka round (cuda/hdbscan_search.cu). */
struct Seed
{
	int32_t    *nbr;			/* [n, k] sorted positions, -1 for none */
	double	   *next;			/* [n] distance of the (k + 1)-th nearest, infinity for none */
};

/* The kernels' view of the hierarchy and the per-row arrays; passed by value. */
template <typename T>
struct Tree
{
	const T    *xs;				/* [n, d] rows by sorted position */
	const int32_t *perm;		/* [n] row index of each sorted position */
	const int32_t *left;		/* [n - 1] child of each internal node */
	const int32_t *right;		/* [n - 1] */
	const int32_t *span;		/* [n - 1] node i holds sorted positions min (i, span [i]) .. max */
	const T    *box;			/* [n - 1, 2 * B] lo [B] then hi [B] */
	const int32_t *minrow;		/* [n - 1] lowest row index under the node */
	const double *mincore;		/* [n - 1] smallest core distance under the node */
	const int32_t *ncomp;		/* [n - 1] component of all rows under the node, or -1 */
	const double *core_s;		/* [n] core distance by sorted position */
	const int32_t *comp;		/* [n] component (a root position) by sorted position */
	int32_t		n;
	int32_t		d;
	int32_t		B;				/* box dimensions: min(d, kMaxBoxDims) */
	gc_metric	metric;
	const volatile int32_t *abort;
};

/*
 * One HDBSCAN call on the device; the buffers are freed with it, whatever
 * the way out.
 */
struct Workspace
{
	Workspace(const Call &c, gc_dtype t, int32_t n_, int32_t d_, const gc_hdbscan_params &p)
		: call(c), dtype(t), n(n_), d(d_), B(std::min<int32_t>(d_, kMaxBoxDims)),
		  k(p.min_samples), min_cluster_size(p.min_cluster_size), metric(p.metric),
		  debug(c.tuning.debug != 0)
	{
	}

	const Call &call;
	const gc_dtype dtype;
	const int32_t n;
	const int32_t d;
	const int32_t B;
	const int32_t k;
	const int32_t min_cluster_size;
	const gc_metric metric;
	const bool	debug;
	AbortFlag	abort;
	const void *hx = nullptr;	/* the caller's rows [n, d] (host), for a sample */

	/* The rows of the caller (freed once sorted) and sorted (xs), of element type T. */
	DeviceBuffer<float> x_f, xs_f, box_f;
	DeviceBuffer<double> x_d, xs_d, box_d;
	template <typename T> DeviceBuffer<T> &x() { return pick<T>(x_f, x_d); }
	template <typename T> DeviceBuffer<T> &xs() { return pick<T>(xs_f, xs_d); }
	template <typename T> DeviceBuffer<T> &box() { return pick<T>(box_f, box_d); }

	DeviceBuffer<int32_t> perm;		/* [n] */
	DeviceBuffer<int32_t> inv;		/* [n] sorted position of each row */
	DeviceBuffer<int32_t> left, right;	/* [n - 1] */
	DeviceBuffer<int32_t> parent_int;	/* [n - 1] parent of each internal node, -1 at the root */
	DeviceBuffer<int32_t> parent_leaf;	/* [n] parent of each leaf */
	DeviceBuffer<int32_t> span;		/* [n - 1] the far end of each internal node's sorted positions */
	DeviceBuffer<int32_t> flag;		/* [n - 1] arrivals in the bottom-up passes */
	DeviceBuffer<int32_t> minrow;	/* [n - 1] */
	DeviceBuffer<double> mincore;	/* [n - 1] */
	DeviceBuffer<int32_t> ncomp;	/* [n - 1] */
	DeviceBuffer<double> core_s;	/* [n] */
	/* The k nearest of each row for the first Boruvka round, where seeds () */
	DeviceBuffer<int32_t> seed_nbr;	/* [n, k] */
	DeviceBuffer<double> seed_next;	/* [n] */
	DeviceBuffer<unsigned long long> evals;	/* [1] distance evaluations */

	/* The minimum spanning tree: n - 1 edges as weight bits and (lo << 32 | hi). */
	DeviceBuffer<unsigned long long> edge_w;	/* [n - 1] */
	DeviceBuffer<unsigned long long> edge_pair;	/* [n - 1] */
	int64_t		rounds = 0;
	int64_t		seeded = 0;		/* rows whose first Boruvka edge came from their k nearest */

	/* The pair engine's path (cuda/hdbscan_pairs.cu) */
	double		pair_t = 1.0;	/* the engines' threshold: it sets only the precision of the screen */
	int64_t		pair_exact = 0;	/* pairs computed in the canonical arithmetic, over all its engines */
	DeviceBuffer<unsigned long long> pair_prime;	/* [n] bits of a weight of an edge of each row */

	/* Whether the core search keeps each row's k nearest for the first round. */
	bool		seeds() const { return k >= 2 && k <= kSeedK; }

	template <typename T> Tree<T> tree()
	{
		Tree<T>		t;

		t.xs = xs<T>().get();
		t.perm = perm.get();
		t.left = left.get();
		t.right = right.get();
		t.span = span.get();
		t.box = box<T>().get();
		t.minrow = minrow.get();
		t.mincore = mincore.get();
		t.ncomp = ncomp.get();
		t.core_s = core_s.get();
		t.comp = nullptr;
		t.n = n;
		t.d = d;
		t.B = B;
		t.metric = metric;
		t.abort = abort.device();
		return t;
	}
};

/* Blocks of threads for count items. */
inline unsigned blocks_for(int64_t count, int threads)
{
	return (unsigned) ((count + threads - 1) / threads);
}

/*
 * Runs launch(begin, end) over [0, total) in chunks: waits after each,
 * asking the cancel callback about once a millisecond while it runs (on
 * yes the abort flag stops the kernels), and sizes the chunks to take
 * 10 to 50 ms, starting from chunk and leaving there the size reached
 * (for the next search of the same kind).  (cuda/hdbscan_search.cu)
 */
void run_chunked(Workspace &w, const char *what, int32_t total, int64_t &chunk,
				 const std::function<void(int32_t, int32_t)> &launch);

/* Sorts the rows by Morton code, builds the hierarchy and the boxes (cuda/hdbscan_tree.cu). */
void build_tree(Workspace &w);

/* The smallest core distance under each node, after the core distances (cuda/hdbscan_tree.cu). */
void fill_mincore(Workspace &w);

/* The component of each node, -1 where mixed, from comp [n] by position (cuda/hdbscan_tree.cu). */
void fill_ncomp(Workspace &w, const int32_t *comp);

/* Core distances into w.core_s by k-nearest-neighbour search (cuda/hdbscan_search.cu). */
void core_phase(Workspace &w);

/* The minimum spanning tree by Boruvka rounds into w.edge_w / w.edge_pair (cuda/hdbscan_search.cu). */
void mst_phase(Workspace &w);

/* a [i] = i for i < n (cuda/hdbscan_search.cu). */
void iota_rows(int32_t *a, /* [n] out */ int32_t n);

/*
 * The end of a Boruvka round (cuda/hdbscan_search.cu): each component's
 * least edge, its weight's bits in cw [root] and its lo << 32 | hi in cp
 * [root] (cw ~0: none), appended once to edge_w / edge_pair at *nedges and
 * joined in forest; then comp [pos] = the root of pos.  Components and the
 * forest are by sorted position, inv [n] the position of each row.
 */
void join_components(int32_t *comp, /* [n] in/out */ const int32_t *inv, /* [n] */ int32_t n,
					 const unsigned long long *cw, /* [n] */ const unsigned long long *cp, /* [n] */
					 int32_t *forest, /* [n] in/out */ unsigned long long *edge_w, /* [n - 1] out */
					 unsigned long long *edge_pair, /* [n - 1] out */ int32_t *nedges /* [1] in/out */);

/*
 * Whether the call runs on the pair engine (cuda/hdbscan_pairs.cu):
 * min_samples + 1 at most kPairsK, and the rule of common/pairs.h
 * (gc_hdbscan_gpu_pairs_chosen: HDBSCAN's number of features, or
 * tuning.pair_path) chooses it.
 */
constexpr int kPairsK = 64;
bool pairs_chosen(const Workspace &w);

/* Device bytes of a call on the pair engine (cuda/hdbscan_pairs.cu). */
int64_t pairs_bytes_estimate(int32_t n, int32_t d, size_t esize, int32_t k, size_t sort_tmp);

/*
 * Core distances on the pair engine into w.core_s (the rows keep their
 * order: w.perm and w.inv are the identity), from the rows w.x<T>() and
 * the host rows w.hx (cuda/hdbscan_pairs.cu).
 */
void pairs_core_phase(Workspace &w);

/* The minimum spanning tree on the pair engine into w.edge_w / w.edge_pair (cuda/hdbscan_pairs.cu). */
void pairs_mst_phase(Workspace &w);

/* The single-linkage hierarchy of the sorted edges [n - 1] into mg (cuda/hdbscan_link.cu). */
void linkage(const Call &call, const gc_hdbscan_edge *edges, int32_t n, DeviceBuffer<gc_hdb_merge> &mg);

/* Every hierarchy node's gc_hdb_state into st [2 n - 1] (cuda/hdbscan_condense.cu). */
void condense(const Call &call, const gc_hdbscan_edge *edges, const gc_hdb_merge *mg, int32_t n,
			  int64_t min_size, DeviceBuffer<gc_hdb_state> &st);

/*
 * Numbers the splits (merges whose children both have min_size rows or
 * more) in merge order into index [m]; returns how many (cuda/hdbscan_condense.cu).
 */
int64_t split_numbers(const gc_hdb_merge *mg, int64_t m, int64_t min_size, DeviceBuffer<uint32_t> &index);

/*
 * From the places st [2 n - 1] to the answer: result's cluster,
 * probability, outlier_score and n_clusters, all computed on the device but
 * the clusters' numbering and selection (cuda/hdbscan_finish.cu).
 */
/*
 * The host's memory of the finish: the clusters' arrays (gc_hdb_given_alloc)
 * and three more per cluster, for at most kmax clusters, allocated before
 * the device part so that they can be faulted in while it computes.
 */
struct FinishHost
{
	gc_hdb_work w;
	int64_t		kmax;
	std::unique_ptr<double[]> glosh;
	std::unique_ptr<int64_t[]> first;
	std::unique_ptr<int64_t[]> node_label;

	FinishHost(int64_t n, int64_t kmax_) : kmax(kmax_)
	{
		memset(&w, 0, sizeof(w));
		require(gc_hdb_given_alloc(&w, n, kmax, error_record()));
		glosh.reset(new double[(size_t) kmax]);
		first.reset(new int64_t[(size_t) kmax]);
		node_label.reset(new int64_t[(size_t) kmax]);
	}
	~FinishHost() { gc_hdb_free(&w); }
	FinishHost(const FinishHost &) = delete;
	FinishHost &operator=(const FinishHost &) = delete;

	/* The arrays the finish writes, for Prefault. */
	std::vector<std::pair<void *, size_t>> buffers() const
	{
		const size_t b = sizeof(int64_t) * (size_t) kmax;

		return {{w.k_parent, b}, {w.k_birth, b}, {w.k_size, b}, {w.k_child1, b}, {w.k_child2, b},
				{w.k_stab, b}, {w.k_death, b}, {w.k_selected, (size_t) kmax}, {w.sub, b},
				{glosh.get(), b}, {first.get(), b}, {node_label.get(), b}};
	}
};

void finish(const Call &call, const gc_hdbscan_params &p, const gc_hdbscan_edge *edges,
			const gc_hdb_merge *mg, const gc_hdb_state *st, int32_t n, gc_hdbscan_result *result,
			FinishHost &host);

/*
 * Faults in host buffers on a few threads, beside the caller, from its
 * construction to its destruction (none where they hold less than
 * min_bytes): the device copies its answer into
 * pageable memory at about 1 GB/s where the pages are new (643 ms for the
 * 640 MB of 10M rows on the H100 machine) and about ten times faster into
 * pages already touched, which these threads do while the device computes.
 * The copy may reach a page first: each page is touched by a
 * compare-and-swap of a byte with itself, a write that never changes what
 * is there.  The threads run with every signal blocked; one that cannot be
 * started is done without.
 */
class Prefault
{
  public:
	Prefault(const std::vector<std::pair<void *, size_t>> &bufs, int threads,
			 size_t min_bytes = (size_t) 64 << 20)
	{
		size_t		total = 0;

		for (const auto &b : bufs)
			total += b.second;
		if (threads < 1 || total < min_bytes)
			return;

		sigset_t	all,
					old;

		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		for (int t = 0; t < threads; t++)
		{
			size_t		from = total / threads * t,
						to = t + 1 == threads ? total : total / threads * (t + 1);
			std::vector<std::pair<void *, size_t>> list(bufs);

			try
			{
				threads_.emplace_back([list, from, to] {
					size_t		at = 0;

					for (const auto &b : list)
					{
						char	   *p = (char *) b.first;

						for (size_t i = 0; i < b.second; i += 4096)
							if (at + i >= from && at + i < to)
							{
								/* a write that keeps whatever is there, even a copy landing now */
								char		v = ((volatile char *) p)[i];

								__atomic_compare_exchange_n(p + i, &v, v, false, __ATOMIC_RELAXED,
															__ATOMIC_RELAXED);
							}
						at += b.second;
					}
				});
			}
			catch (...)
			{
				break;
			}
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	~Prefault()
	{
		for (auto &t : threads_)
			t.join();
	}

  private:
	std::vector<std::thread> threads_;
};


} // namespace hdbscan
} // namespace gc

#endif /* GPUCLUST_HDBSCAN_CUH */
