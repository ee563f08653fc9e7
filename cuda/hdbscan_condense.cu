/*
 * hdbscan_condense.cu
 *    Where every node of the single-linkage hierarchy stands in the
 *    condensed tree, on the device (condense of cuda/hdbscan.cuh): per node
 *    its gc_hdb_state (common/hdbscan_tree.h), exactly what the host's walk
 *    from the root down (gc_hdb_condense_node) writes: the cluster it
 *    belongs to and, for a node that fell out, the merge where it fell and
 *    that merge's lambda, else its place in scikit-learn's breadth-first
 *    walk (depth << 32 | preorder).
 *
 * A node's state is its parent's passed through one step, which depends
 * only on the parent merge (a split: both children of min_cluster_size
 * rows or more; a child too small falls out there) and on the side.  The
 * steps compose: a fall freezes the state, a split names a new cluster,
 * depth and preorder add up.  So each node's state is the composition of
 * the steps on its path from the root, found by pointer jumping (each
 * round doubles the length of path each node has composed): about log2 of
 * the hierarchy's depth rounds.
 *
 * Only nodes of min_cluster_size rows or more (big) can be on a path above
 * a fall, and they never fall themselves.  So a node whose composed path
 * has fallen is done as soon as that path reaches a big node: nothing
 * above can fall, and its fall is final; its cluster is that of the merge
 * where it fell (the big node there), taken from that node's final state
 * at the end.  Small nodes, the rows among them, so stop within about
 * log2 (min_cluster_size) rounds.  A round's threads of nodes done return
 * after reading one byte (a pass in node order, so that the reads of the
 * nodes still going stay coalesced), and a node that finishes is written
 * to both buffers after the round, so that every later round reads its
 * final step.
 *
 * Cluster numbers (provisional, as the host's): the root 0, split j's left
 * child 1 + 2j and right child 2 + 2j, the splits numbered in merge order;
 * gc_hdb_number renumbers them.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>
#include <math_constants.h>

namespace gc {
namespace hdbscan {
namespace {

constexpr uint32_t kNone = 0xffffffffu;		/* GC_HDB_NONE */
constexpr uint32_t kInherit = 0xffffffffu;	/* the step keeps the cluster */

/* The steps of a path composed: what they do to a state that has not fallen. */
struct Step
{
	uint32_t	fell;			/* the merge of the first fall on the path, or kNone */
	uint32_t	own;			/* the cluster at the path's end (or at its fall), or kInherit */
	uint32_t	depth;			/* depth added */
	uint32_t	pad;
	unsigned long long pre;		/* preorder added */
};

/* upper, then lower */
__device__ inline Step compose(const Step &upper, const Step &lower)
{
	if (upper.fell != kNone)
		return upper;

	Step		s;

	s.fell = lower.fell;
	s.own = lower.own != kInherit ? lower.own : upper.own;
	s.depth = upper.depth + lower.depth;
	s.pad = 0;
	s.pre = upper.pre + lower.pre;
	return s;
}

__global__ void split_flags(const gc_hdb_merge *mg, int64_t m, int64_t min_size, uint32_t *flag)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
		flag[i] = mg[i].lsize >= min_size && mg[i].rsize >= min_size;
}

/* The rows of hierarchy node x (rows 0 .. n - 1, merges n ..). */
__device__ inline int64_t node_rows(const gc_hdb_merge *mg, int64_t n, uint32_t x)
{
	if (x < n)
		return 1;

	const gc_hdb_merge g = mg[x - n];

	return (int64_t) g.lsize + g.rsize;
}

/* Whether node x with composed step s up to its ancestor a is done. */
__device__ inline bool done(const gc_hdb_merge *mg, int64_t n, int64_t min_size, uint32_t root,
							const Step &s, uint32_t a)
{
	return a == root || (s.fell != kNone && node_rows(mg, n, a) >= min_size);
}

/*
 * Each child's step from its parent merge, into both buffers; going [x]: 1
 * where node x is not done after it (0 for the root).
 */
__global__ void first_steps(const gc_hdb_merge *mg, const uint32_t *split_index, int64_t n,
							int64_t min_size, Step *step, uint32_t *anc, Step *step2, uint32_t *anc2,
							uint8_t *going, int *more)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const uint32_t root = (uint32_t) (2 * n - 2);

	if (i == 0)
	{
		Step		id = {kNone, kInherit, 0, 0, 0};

		step[root] = id;
		anc[root] = root;
		step2[root] = id;
		anc2[root] = root;
		going[root] = 0;
	}
	if (i >= n - 1)
		return;

	gc_hdb_merge g = mg[i];
	bool		split = g.lsize >= min_size && g.rsize >= min_size;

	for (int side = 0; side < 2; side++)
	{
		uint32_t	x = side == 0 ? g.left : g.right;
		uint32_t	rows = side == 0 ? g.lsize : g.rsize;
		uint32_t	a = (uint32_t) (n + i);
		Step		s = {kNone, kInherit, 1, 0, side == 0 ? 1ULL : 2ULL * g.lsize};

		if (split)
			s.own = 1 + 2 * split_index[i] + (uint32_t) side;
		else if (rows < min_size)
			s.fell = (uint32_t) i;
		step[x] = s;
		anc[x] = a;
		step2[x] = s;
		anc2[x] = a;
		going[x] = !done(mg, n, min_size, root, s, a);
		if (going[x])
			*more = 1;
	}
}

/*
 * One round of pointer jumping over the nodes still going: each composes
 * its ancestor's path with its own, reading step / anc and writing step2 /
 * anc2; going [x] becomes 2 where x is done now (settle finishes it).
 */
__global__ void jump(const gc_hdb_merge *mg, int64_t n, int64_t min_size, int64_t nodes,
					 const Step *step, const uint32_t *anc, Step *step2, uint32_t *anc2,
					 uint8_t *going, int *more)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= nodes || going[x] != 1)
		return;

	const uint32_t root = (uint32_t) (2 * n - 2);
	const uint32_t up = anc[x];
	const Step	s = compose(step[up], step[x]);
	const uint32_t a = anc[up];

	step2[x] = s;
	anc2[x] = a;
	if (done(mg, n, min_size, root, s, a))
		going[x] = 2;
	else
		*more = 1;
}

/* The nodes done in the last round (going 2): their final step into the other buffer too. */
__global__ void settle(int64_t nodes, const Step *from, const uint32_t *afrom, Step *to, uint32_t *ato,
					   uint8_t *going)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= nodes || going[x] != 2)
		return;
	to[x] = from[x];
	ato[x] = afrom[x];
	going[x] = 0;
}

/*
 * The states from the composed paths, the root's state being (0, no fall,
 * depth 0, preorder 0); a node that fell takes the cluster of the merge
 * where it fell (a node that does not fall, whose path is whole).
 */
__global__ void states(const Step *step, const gc_hdbscan_edge *edges, int64_t n, int64_t nodes,
					   gc_hdb_state *st)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= nodes)
		return;
	Step		s = step[x];
	gc_hdb_state out;
	const uint32_t own = s.fell != kNone ? step[n + s.fell].own : s.own;

	out.own = own == kInherit ? 0 : own;
	out.fell = s.fell;
	if (s.fell != kNone)
	{
		double		w = edges[s.fell].w;

		out.at.lambda = w > 0.0 ? 1.0 / w : CUDART_INF;
	}
	else
		out.at.place = ((unsigned long long) s.depth << 32) | (s.pre & 0xffffffffULL);
	st[x] = out;
}

} // namespace

int64_t split_numbers(const gc_hdb_merge *mg, int64_t m, int64_t min_size, DeviceBuffer<uint32_t> &index)
{
	const char *what = "HDBSCAN's condensed tree";
	DeviceBuffer<uint32_t> flag(m, what);
	size_t		bytes = 0;
	uint32_t	last[2] = {0, 0};

	index.reset(m, what);
	split_flags<<<blocks_for(m, 256), 256>>>(mg, m, min_size, flag.get());
	CHECK_LAUNCH("split_flags");
	CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, flag.get(), index.get(), (int) m));
	{
		DeviceBuffer<unsigned char> tmp(bytes, what);

		CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.get(), bytes, flag.get(), index.get(), (int) m));
	}
	CUDA_TRY(cudaMemcpy(&last[0], index.get() + m - 1, sizeof(uint32_t), cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(&last[1], flag.get() + m - 1, sizeof(uint32_t), cudaMemcpyDeviceToHost));
	return (int64_t) last[0] + last[1];
}

void condense(const Call &call, const gc_hdbscan_edge *edges, const gc_hdb_merge *mg, int32_t n,
			  int64_t min_size, DeviceBuffer<gc_hdb_state> &st)
{
	const int64_t m = (int64_t) n - 1,
				nodes = 2 * (int64_t) n - 1;
	const char *what = "HDBSCAN's condensed tree";
	DeviceBuffer<uint32_t> index, anc(nodes, what), anc2(nodes, what);
	DeviceBuffer<Step> step(nodes, what), step2(nodes, what);
	DeviceBuffer<uint8_t> going(nodes, what);
	DeviceBuffer<int> more(1, what);
	Stopwatch	sw;
	int			round = 0;
	int			h = 0;

	split_numbers(mg, m, min_size, index);
	CUDA_TRY(cudaMemset(more.get(), 0, sizeof(int)));
	first_steps<<<blocks_for(m, 256), 256>>>(mg, index.get(), n, min_size, step.get(), anc.get(),
											 step2.get(), anc2.get(), going.get(), more.get());
	CHECK_LAUNCH("first_steps");
	CUDA_TRY(cudaMemcpy(&h, more.get(), sizeof(int), cudaMemcpyDeviceToHost));

	/* step / anc hold every node's path so far, the nodes done final in both buffers */
	for (; h; round++)
	{
		if (round >= 64)
			fail(GC_ERR_INTERNAL, "HDBSCAN's hierarchy is deeper than 2^64");
		call.check_cancel();
		CUDA_TRY(cudaMemset(more.get(), 0, sizeof(int)));
		jump<<<blocks_for(nodes, 256), 256>>>(mg, n, min_size, nodes, step.get(), anc.get(), step2.get(),
											  anc2.get(), going.get(), more.get());
		CHECK_LAUNCH("jump");
		settle<<<blocks_for(nodes, 256), 256>>>(nodes, step2.get(), anc2.get(), step.get(), anc.get(),
												going.get());
		CHECK_LAUNCH("settle");
		std::swap(step, step2);
		std::swap(anc, anc2);
		CUDA_TRY(cudaMemcpy(&h, more.get(), sizeof(int), cudaMemcpyDeviceToHost));
	}
	if (call.tuning.debug)
		fprintf(stderr, "gpuclust hdbscan: places by %d rounds of pointer jumping over %lld nodes, %.3f ms\n",
				round, (long long) nodes, sw.ms());
	st.reset(nodes, what);
	states<<<blocks_for(nodes, 256), 256>>>(step.get(), edges, n, nodes, st.get());
	CHECK_LAUNCH("states");
}

} // namespace hdbscan
} // namespace gc
