/*
 * hdbscan_link.cu
 *    The single-linkage hierarchy of the sorted spanning tree on the device
 *    (linkage of cuda/hdbscan.cuh): for every merge its two children (the
 *    left one holds the edge's lower row) and their rows, exactly those of
 *    Kruskal's walk in the order of the edges (gc_hdb_linkage of
 *    common/hdbscan_linkage.h), which the host part then takes as given.
 *
 * Boruvka rounds over the tree itself (Prokopenko, Sao and Lebrun-Grandie,
 * the dendrogram of ArborX): the edges are ranked by their sorted order,
 * so all distinct.  In each round every component takes its least
 * incident edge (its alpha edge) and the alpha edges join the components.
 * An edge e chosen in round r - 1 lies inside one component C of round r;
 * if e is below C's alpha edge a, such edges of C form a chain under a on
 * C's side (each one's parent is the next larger, the largest's is a);
 * otherwise e's place is found by following a upwards until an alpha edge
 * above e.  Each edge thus gets a key (a, side) or the root; a stable sort
 * by (level, key) of the edges in rank order gives the chains, each in
 * rank order, level by level (a chain's level is the round of its key's
 * edge: the own children of its edges are tops of chains of lower levels).
 * A row's parent is its own alpha edge of round 1.
 *
 * Every merge has two children: its own (the rows that chose it, or the
 * tops of the chains keyed by it) and, where it has only one, the edge
 * below it in its chain.  Sizes are sums along each chain: per level, each
 * edge's own child's rows, then a scan by key.  Each round and level is a
 * few kernels; the host asks cancel between them.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>

#include <vector>

namespace gc {
namespace hdbscan {
namespace {

constexpr uint32_t kNo = 0xffffffffu;
constexpr unsigned long long kFollow = 1ULL << 62;
/* The level sits above the key's 33 bits in the sort key. */
constexpr int kKeyBits = 33;
constexpr unsigned long long kKeyMask = (1ULL << kKeyBits) - 1;

__device__ uint32_t uf_find(uint32_t *uf, uint32_t x)
{
	for (;;)
	{
		uint32_t	p = uf[x];

		if (p == x)
			return x;
		uint32_t	g = uf[p];

		if (g == p)
			return p;
		/* path halving: rows that are no longer roots only move up */
		uf[x] = g;
		x = g;
	}
}

__global__ void link_init(uint32_t *uf, uint32_t *act, gc_hdb_merge *mg, int32_t n)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	uf[i] = (uint32_t) i;
	if (i < n - 1)
	{
		act[i] = (uint32_t) i;
		mg[i].left = kNo;
		mg[i].right = kNo;
	}
}

/* The components of each active edge's rows; their alpha edges reset. */
__global__ void link_comps(const gc_hdbscan_edge *e, const uint32_t *act, int64_t nact, int round,
						   uint32_t *uf, uint32_t *cl, uint32_t *ch, uint32_t *alpha)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nact)
		return;
	uint32_t	x = act[j];
	uint32_t	a = round == 1 ? (uint32_t) e[x].lo : uf_find(uf, (uint32_t) e[x].lo);
	uint32_t	c = round == 1 ? (uint32_t) e[x].hi : uf_find(uf, (uint32_t) e[x].hi);

	cl[j] = a;
	ch[j] = c;
	alpha[a] = kNo;
	alpha[c] = kNo;
}

__global__ void link_alpha(const uint32_t *act, int64_t nact, const uint32_t *cl, const uint32_t *ch,
						   uint32_t *alpha, int *bad)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nact)
		return;
	if (cl[j] == ch[j])
	{
		*bad = 1;
		return;
	}
	atomicMin(&alpha[cl[j]], act[j]);
	atomicMin(&alpha[ch[j]], act[j]);
}

/* Round 1: each row is a child of its least edge, on its side. */
__global__ void link_rows(const gc_hdbscan_edge *e, const uint32_t *alpha, int32_t n, gc_hdb_merge *mg)
{
	const int64_t v = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (v >= n)
		return;
	uint32_t	p = alpha[v];

	if (e[p].lo == v)
		mg[p].left = (uint32_t) v;
	else
		mg[p].right = (uint32_t) v;
}

/* Rounds 2, 3, ...: the key of each edge chosen in the round before. */
__global__ void link_keys(const gc_hdbscan_edge *e, const uint32_t *prev, int64_t nprev, uint32_t *uf,
						  const uint32_t *alpha, unsigned long long *key)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nprev)
		return;
	uint32_t	x = prev[j];
	uint32_t	c = uf_find(uf, (uint32_t) e[x].lo);
	uint32_t	a = alpha[c];

	if (x < a)
		key[x] = 2ULL * a + (uf_find(uf, (uint32_t) e[a].lo) == c ? 1 : 0);
	else
		key[x] = kFollow | a;
}

/* The alpha edges join their components (a pair that chose each other: the lower root stays). */
__global__ void link_join(const uint32_t *act, int64_t nact, const uint32_t *cl, const uint32_t *ch,
						  const uint32_t *alpha, int round, uint32_t *uf, uint8_t *rnd,
						  uint32_t *cur, unsigned long long *ncur)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nact)
		return;
	uint32_t	x = act[j],
				a = cl[j],
				c = ch[j];
	bool		fa = alpha[a] == x,
				fc = alpha[c] == x;

	if (!fa && !fc)
		return;
	rnd[x] = (uint8_t) round;
	cur[atomicAdd(ncur, 1ULL)] = x;
	if (fa && (!fc || a > c))
		uf[a] = c;
	if (fc && (!fa || c > a))
		uf[c] = a;
}

/* The edges still between two components, into next (any order). */
__global__ void link_keep(const gc_hdbscan_edge *e, const uint32_t *act, int64_t nact, uint32_t *uf,
						  uint32_t *next, unsigned long long *nnext)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nact)
		return;
	uint32_t	x = act[j];

	if (uf_find(uf, (uint32_t) e[x].lo) != uf_find(uf, (uint32_t) e[x].hi))
		next[atomicAdd(nnext, 1ULL)] = x;
}

__global__ void link_root(const uint32_t *prev, int64_t nprev, unsigned long long root,
						  unsigned long long *key)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j < nprev)
		key[prev[j]] = root;
}

/* Each key followed up to the first alpha edge above its edge; the sort key (level, key). */
__global__ void link_follow(const unsigned long long *key, const uint8_t *rnd, int64_t m,
							unsigned long long root, int root_level, unsigned long long *sk,
							uint32_t *sv)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= m)
		return;
	unsigned long long k = key[x];

	while (k & kFollow)
	{
		unsigned long long up = key[k & ~kFollow];

		if ((up & kFollow) || up == root || (unsigned long long) x < (up >> 1))
			k = up;
		else
			k = kFollow | (up >> 1);
	}
	sk[x] = ((unsigned long long) (k == root ? root_level : rnd[k >> 1]) << kKeyBits) | k;
	sv[x] = (uint32_t) x;
}

/* The first place of each level in the sorted keys. */
__global__ void link_levels(const unsigned long long *sk, int64_t m, int64_t *start)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= m)
		return;
	unsigned long long l = sk[i] >> kKeyBits;

	if (i == 0 || (sk[i - 1] >> kKeyBits) != l)
		start[l] = i;
}

__device__ inline uint32_t rows_under(const gc_hdb_merge *mg, uint32_t node, uint32_t n)
{
	return node < n ? 1u : mg[node - n].lsize + mg[node - n].rsize;
}

/* A level's edges: the edge below fills the missing child; own[i] the rows of the own child(ren). */
__global__ void link_fill(const unsigned long long *sk, const uint32_t *sv, int64_t from, int64_t to,
						  uint32_t n, gc_hdb_merge *mg, uint32_t *own, int *bad)
{
	const int64_t i = from + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= to)
		return;
	gc_hdb_merge g = mg[sv[i]];
	bool		first = i == from || sk[i - 1] != sk[i];

	if (first)
	{
		if (g.left == kNo || g.right == kNo)
		{
			*bad = 1;
			return;
		}
		own[i] = rows_under(mg, g.left, n) + rows_under(mg, g.right, n);
		return;
	}
	if ((g.left == kNo) == (g.right == kNo))
	{
		*bad = 1;
		return;
	}
	if (g.left == kNo)
	{
		own[i] = rows_under(mg, g.right, n);
		mg[sv[i]].left = n + sv[i - 1];
	}
	else
	{
		own[i] = rows_under(mg, g.left, n);
		mg[sv[i]].right = n + sv[i - 1];
	}
}

/* A level's sizes from the sums along the chains; each chain's top under its key's edge. */
__global__ void link_sizes(const unsigned long long *sk, const uint32_t *sv, int64_t from, int64_t to,
						   uint32_t n, unsigned long long root, const uint32_t *own,
						   const uint32_t *sum, gc_hdb_merge *mg, int *bad)
{
	const int64_t i = from + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= to)
		return;
	uint32_t	x = sv[i];
	gc_hdb_merge g = mg[x];
	bool		first = i == from || sk[i - 1] != sk[i];
	bool		last = i + 1 == to || sk[i + 1] != sk[i];
	unsigned long long k = sk[i] & kKeyMask;

	if (first)
	{
		g.lsize = rows_under(mg, g.left, n);
		g.rsize = rows_under(mg, g.right, n);
	}
	else if (g.left == n + sv[i - 1])
	{
		g.lsize = sum[i - 1];
		g.rsize = own[i];
	}
	else
	{
		g.lsize = own[i];
		g.rsize = sum[i - 1];
	}
	mg[x].lsize = g.lsize;
	mg[x].rsize = g.rsize;
	if (!last)
		return;
	if (k == root)
	{
		if (x != n - 2)
			*bad = 1;
		return;
	}
	uint32_t   *slot = (k & 1) ? &mg[k >> 1].left : &mg[k >> 1].right;

	if (*slot != kNo)
		*bad = 1;
	*slot = n + x;
}

unsigned long long read_count(const unsigned long long *d)
{
	unsigned long long h;

	CUDA_TRY(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
	return h;
}

} // namespace

void linkage(const Call &call, const gc_hdbscan_edge *edges, int32_t n, DeviceBuffer<gc_hdb_merge> &mg)
{
	const int64_t m = (int64_t) n - 1;
	const char *what = "HDBSCAN's hierarchy";
	DeviceBuffer<uint32_t> uf(n, what), alpha(n, what), act(m, what), act2(m, what), cl(m, what),
				ch(m, what), prev(m, what), cur(m, what), own(m, what), sum(m, what);
	DeviceBuffer<uint8_t> rnd(m, what);
	DeviceBuffer<unsigned long long> key(m, what), sk(m, what), sk2(m, what), counters(2, what);
	DeviceBuffer<int> bad(1, what);
	DeviceBuffer<int64_t> start(258, what);
	const unsigned long long root = 2ULL * (unsigned long long) m;
	int64_t		nact = m,
				nprev = 0;
	int			round = 1,
				hbad = 0;

	mg.reset(m, what);
	CUDA_TRY(cudaMemset(bad.get(), 0, sizeof(int)));
	link_init<<<blocks_for(n, 256), 256>>>(uf.get(), act.get(), mg.get(), n);
	CHECK_LAUNCH("link_init");
	for (; nact > 0; round++)
	{
		if (round > 255)
			fail(GC_ERR_INTERNAL, "HDBSCAN's hierarchy took more than 255 rounds");
		call.check_cancel();
		CUDA_TRY(cudaMemset(counters.get(), 0, 2 * sizeof(unsigned long long)));
		link_comps<<<blocks_for(nact, 256), 256>>>(edges, act.get(), nact, round, uf.get(), cl.get(),
												   ch.get(), alpha.get());
		CHECK_LAUNCH("link_comps");
		link_alpha<<<blocks_for(nact, 256), 256>>>(act.get(), nact, cl.get(), ch.get(), alpha.get(),
												   bad.get());
		CHECK_LAUNCH("link_alpha");
		if (round == 1)
			link_rows<<<blocks_for(n, 256), 256>>>(edges, alpha.get(), n, mg.get());
		else if (nprev > 0)
			link_keys<<<blocks_for(nprev, 256), 256>>>(edges, prev.get(), nprev, uf.get(), alpha.get(),
														key.get());
		CHECK_LAUNCH("link_keys");
		link_join<<<blocks_for(nact, 256), 256>>>(act.get(), nact, cl.get(), ch.get(), alpha.get(), round,
												  uf.get(), rnd.get(), cur.get(), counters.get());
		CHECK_LAUNCH("link_join");
		link_keep<<<blocks_for(nact, 256), 256>>>(edges, act.get(), nact, uf.get(), act2.get(),
												  counters.get() + 1);
		CHECK_LAUNCH("link_keep");
		nprev = (int64_t) read_count(counters.get());
		nact = (int64_t) read_count(counters.get() + 1);
		std::swap(act, act2);
		std::swap(prev, cur);
	}
	/* the last round's edges are the root's chain, one level above the last round */
	link_root<<<blocks_for(nprev, 256), 256>>>(prev.get(), nprev, root, key.get());
	CHECK_LAUNCH("link_root");
	link_follow<<<blocks_for(m, 256), 256>>>(key.get(), rnd.get(), m, root, round, sk.get(), act.get());
	CHECK_LAUNCH("link_follow");

	/* stable by (level, key): each chain in rank order */
	int			bits = kKeyBits + 9;
	size_t		tmp_bytes = 0,
				scan_bytes = 0;
	cub::DoubleBuffer<unsigned long long> kb(sk.get(), sk2.get());
	cub::DoubleBuffer<uint32_t> vb(act.get(), act2.get());

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, kb, vb, (int) m, 0, bits));
	CUDA_TRY(cub::DeviceScan::InclusiveSumByKey(nullptr, scan_bytes, sk.get(), own.get(), sum.get(),
												(int) m));
	DeviceBuffer<unsigned char> tmp(std::max(tmp_bytes, scan_bytes), what);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, kb, vb, (int) m, 0, bits));
	const unsigned long long *skeys = kb.Current();
	const uint32_t *svals = vb.Current();

	std::vector<int64_t> hstart(258, -1);

	CUDA_TRY(cudaMemcpy(start.get(), hstart.data(), 258 * sizeof(int64_t), cudaMemcpyHostToDevice));
	link_levels<<<blocks_for(m, 256), 256>>>(skeys, m, start.get());
	CHECK_LAUNCH("link_levels");
	CUDA_TRY(cudaMemcpy(hstart.data(), start.get(), 258 * sizeof(int64_t), cudaMemcpyDeviceToHost));

	/* the levels from the lowest: the chains' own children are done first */
	for (int l = 0; l <= round && l < 257; l++)
	{
		int64_t		from = hstart[l],
					to = m;

		if (from < 0)
			continue;
		for (int k = l + 1; k < 257; k++)
			if (hstart[k] >= 0)
			{
				to = hstart[k];
				break;
			}
		call.check_cancel();
		link_fill<<<blocks_for(to - from, 256), 256>>>(skeys, svals, from, to, (uint32_t) n, mg.get(),
													   own.get(), bad.get());
		CHECK_LAUNCH("link_fill");
		CUDA_TRY(cub::DeviceScan::InclusiveSumByKey(tmp.get(), scan_bytes, skeys + from, own.get() + from,
													sum.get() + from, (int) (to - from)));
		link_sizes<<<blocks_for(to - from, 256), 256>>>(skeys, svals, from, to, (uint32_t) n, root,
														own.get(), sum.get(), mg.get(), bad.get());
		CHECK_LAUNCH("link_sizes");
	}
	CUDA_TRY(cudaMemcpy(&hbad, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
	if (hbad)
		fail(GC_ERR_INTERNAL, "HDBSCAN's spanning tree is not a tree of its %lld rows",
					  (long long) n);
}

} // namespace hdbscan
} // namespace gc
