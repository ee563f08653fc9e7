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
 * the hierarchy's depth rounds, each a pass over the nodes.
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

/* Each child's step from its parent merge. */
__global__ void first_steps(const gc_hdb_merge *mg, const uint32_t *split_index, int64_t n,
							int64_t min_size, Step *step, uint32_t *anc)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i == 0)
	{
		Step		id = {kNone, kInherit, 0, 0, 0};

		step[2 * n - 2] = id;
		anc[2 * n - 2] = (uint32_t) (2 * n - 2);
	}
	if (i >= n - 1)
		return;

	gc_hdb_merge g = mg[i];
	bool		split = g.lsize >= min_size && g.rsize >= min_size;

	for (int side = 0; side < 2; side++)
	{
		uint32_t	x = side == 0 ? g.left : g.right;
		uint32_t	rows = side == 0 ? g.lsize : g.rsize;
		Step		s = {kNone, kInherit, 1, 0, side == 0 ? 1ULL : 2ULL * g.lsize};

		if (split)
			s.own = 1 + 2 * split_index[i] + (uint32_t) side;
		else if (rows < min_size)
			s.fell = (uint32_t) i;
		step[x] = s;
		anc[x] = (uint32_t) (n + i);
	}
}

/* One round of pointer jumping: each node composes its ancestor's path with its own. */
__global__ void jump(const Step *step, const uint32_t *anc, int64_t nodes, uint32_t root, Step *step2,
					 uint32_t *anc2, int *more)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= nodes)
		return;
	uint32_t	a = anc[x];

	if (a == root)
	{
		step2[x] = step[x];
		anc2[x] = a;
		return;
	}
	step2[x] = compose(step[a], step[x]);
	anc2[x] = anc[a];
	if (anc[a] != root)
		*more = 1;
}

/* The states from the composed paths, the root's state being (0, no fall, depth 0, preorder 0). */
__global__ void states(const Step *step, const gc_hdbscan_edge *edges, int64_t nodes,
					   gc_hdb_state *st)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= nodes)
		return;
	Step		s = step[x];
	gc_hdb_state out;

	out.own = s.own == kInherit ? 0 : s.own;
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
	DeviceBuffer<int> more(1, what);

	split_numbers(mg, m, min_size, index);
	first_steps<<<blocks_for(m, 256), 256>>>(mg, index.get(), n, min_size, step.get(), anc.get());
	CHECK_LAUNCH("first_steps");
	for (int round = 0;; round++)
	{
		int			h = 0;

		if (round > 64)
			fail(GC_ERR_INTERNAL, "HDBSCAN's hierarchy is deeper than 2^64");
		call.check_cancel();
		CUDA_TRY(cudaMemset(more.get(), 0, sizeof(int)));
		jump<<<blocks_for(nodes, 256), 256>>>(step.get(), anc.get(), nodes, (uint32_t) (2 * n - 2),
											  step2.get(), anc2.get(), more.get());
		CHECK_LAUNCH("jump");
		std::swap(step, step2);
		std::swap(anc, anc2);
		CUDA_TRY(cudaMemcpy(&h, more.get(), sizeof(int), cudaMemcpyDeviceToHost));
		if (!h)
			break;
	}
	st.reset(nodes, what);
	states<<<blocks_for(nodes, 256), 256>>>(step.get(), edges, nodes, st.get());
	CHECK_LAUNCH("states");
}

} // namespace hdbscan
} // namespace gc
