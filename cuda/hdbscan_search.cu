/*
 * hdbscan_search.cu
 *    The two searches of the GPU HDBSCAN over the hierarchy of
 *    cuda/hdbscan_tree.cu, one thread per row (in sorted order, so that the
 *    threads of a warp walk nearby paths), each with its own stack:
 *
 *   core  the min_samples smallest dist2 of the row in a max-heap (in
 *         local memory for min_samples <= 32, else in global memory, one
 *         column per row of the chunk); a subtree is skipped when the heap
 *         is full and its box distance is at least the heap's largest: it
 *         cannot change the min_samples-th value, so that identical rows do
 *         not make the search quadratic.  For d <= 3 a node of at most
 *         kBucket rows (a range of sorted positions, Tree.span) has its rows
 *         read one after the other, which costs more distances and saves
 *         the walk through its small subtrees.
 *         For 2 <= min_samples <= kSeedK the heap holds one more row, and
 *         the rows of the min_samples nearest and the distance of the next
 *         are kept for the first Boruvka round (seed_kernel).
 *   MST   Boruvka rounds of the single-tree EMST of ArborX (Prokopenko,
 *         Sao and Lebrun-Grandie, ICPP 2022): every row finds its least edge
 *         to another component under the order (w, lo, hi) of
 *         common/hdbscan.h; a subtree is skipped when all its rows are in
 *         the row's component, or when the key (max(core of the row, least
 *         core under the node, box distance), min(row, m), max(row, m)),
 *         with m the lowest row under the node, is not below the best key:
 *         that key is below every edge into the subtree, so ties of weight
 *         (duplicates, lattices) are pruned by row index as well; or when its
 *         weight bound is above the least weight that any row of the
 *         component has found so far (shared through an atomicMin, and
 *         primed before the searches with the rows' edges of the round
 *         before that still leave the component; the rows that hold the
 *         component's least edge never prune it).  A row
 *         whose search was complete (nothing pruned by that shared bound
 *         alone) keeps its edge in the next round without a search while
 *         the edge's other end is still in another component: the rows of
 *         other components only become fewer and the weights stay, so the
 *         least edge over them is the same.  In the first round a row whose
 *         least edge over its kept nearest rows weighs less than the
 *         distance of the next row needs no search (ArborX takes its first
 *         round from the k-nearest-neighbour lists as well): every other row
 *         is at least that far, and its mutual reachability no less.  Each
 *         component then takes the least edge of its rows (atomicMin on the
 *         weight's bits, then on lo << 32 | hi among the rows at that
 *         weight), the components' edges are added (an edge chosen from both
 *         sides once) and joined in the disjoint-set forest of DBSCAN, and
 *         the component of every node is refreshed bottom up.
 *
 * The box bound never exceeds the computed dist2 of any row in the box,
 * rounding included, so it needs no margin: it is accumulated over a prefix
 * of the coordinates (the first min(d, 16)), in the same order and with the
 * same correctly rounded operations as dist2, and each of its terms is
 * round(round(lo - x)^2) (or 0) where dist2 has round(round(p - x)^2) with
 * |p - x| >= |lo - x| (rounding is monotone and symmetric), and the rest of
 * dist2 adds terms >= 0.  The distance of the metric is non-decreasing in
 * dist2 (a correctly rounded sqrt, or an exact halving), so the bound's
 * distance never exceeds a row's either.  This exactness matters: with a
 * bound shrunk by a margin, a subtree at exactly the best weight (duplicate
 * rows at one distance, where the weight is the distance) could never be
 * pruned by the row tie breaker, and the search would become quadratic.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>

#include <cfloat>
#include <climits>

namespace gc {
namespace hdbscan {


void run_chunked(Workspace &w, const char *what, int32_t total, int64_t &chunk,
				 const std::function<void(int32_t, int32_t)> &launch)
{
	int			launches = 0;
	Stopwatch	all;

	chunk = std::max<int64_t>(chunk, 1);

	for (int64_t begin = 0; begin < total;)
	{
		int64_t		end = std::min<int64_t>(begin + chunk, total);
		Stopwatch	sw;

		w.call.check_cancel();
		launch((int32_t) begin, (int32_t) end);
		dbscan::wait_or_cancel(w.call.exec, w.abort);

		const double ms = sw.ms();
		const bool	full = end - begin == chunk;	/* a short last chunk says little */

		if (full && ms < 10.0 && chunk < (1 << 26))
			chunk *= 2;
		else if (ms > 50.0 && chunk > 256)
			chunk /= 2;
		begin = end;
		launches++;
	}
	if (w.debug)
		fprintf(stderr, "gpuclust hdbscan: %s: %d rows in %d launches, %.3f ms\n", what, total,
				launches, all.ms());
}

namespace {

constexpr int kThreads = 128;

/*
 * The core search of d <= 3 reads the rows of a node of at most this many
 * rows one after the other instead of walking down to them.  On the H100
 * machine, 1M 2-D rows, min_samples 10: tree and search 8.4 ms without,
 * 7.9 with 4, 6.8 with 8, 5.7 with 16 (the call's distances 1.9 times).  Only
 * for d <= 3, where the Morton code covers every coordinate and a small
 * node's rows are near in all of them: in 8-D they may lie far apart in
 * the others, where the boxes prune them (1M 8-D blobs: 13.0 s without,
 * 38.8 s with 4).
 */
constexpr int32_t kBucket = 16;

/*
 * dist2 of query q [d] and the box lo [B] / hi [B] on the first B
 * coordinates: a lower bound of dist2 (q, p) for every row p in the box.
 */
template <int D, typename T>
__device__ __forceinline__ double box_dist2(const T *q, /* [d] */ const T *box, /* [2 B] */ int B)
{
	double		s = 0.0;
	const int	bb = D > 0 ? D : B;

#pragma unroll
	for (int k = 0; k < bb; k++)
	{
		const double x = (double) q[k];
		const double lo = (double) __ldg(box + k);
		const double hi = (double) __ldg(box + bb + k);
		double		t = 0.0;

		if (x < lo)
			t = __dsub_rn(lo, x);
		else if (x > hi)
			t = __dsub_rn(x, hi);
		s = __dadd_rn(s, __dmul_rn(t, t));
	}
	return s;
}

/* Adds v to the per-call counter: one atomic per warp (every lane of the warp must call). */
__device__ __forceinline__ void add_count(unsigned long long *counter, unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0 && v)
		atomicAdd(counter, v);
}

/* A max-heap of doubles: in local memory (KCAP > 0) or a column of global memory. */
template <int KCAP>
struct Heap
{
	double		local[KCAP > 0 ? KCAP : 1];
	double	   *global;			/* element i at global [i * stride] */
	int64_t		stride;

	__device__ __forceinline__ double &at(int i)
	{
		if (KCAP > 0)
			return local[i];
		return global[(size_t) i * stride];
	}
};

/*
 * The core distance of the rows at sorted positions [first, end): the k-th
 * smallest dist2 over all rows (itself included), as a distance of the
 * metric.  KCAP: the local heap's capacity (k <= KCAP), 0 for the global
 * heap heap_g [k, end - first].
 *
 * SEED (k + 1 <= KCAP): the heap keeps the k + 1 smallest with their rows,
 * and the k smallest go to seed.nbr [pos * k ..] (sorted positions, -1
 * where fewer rows exist), the (k + 1)-th as a distance to seed.next [pos]
 * (infinity where none).  Every row nearer than the (k + 1)-th is in the
 * list: a subtree is pruned only at a bound not below the heap's largest,
 * which only falls, and a row leaves the heap only as its largest.
 */
template <int D, typename T, int KCAP, bool SEED>
__global__ void __launch_bounds__(kThreads)
core_kernel(Tree<T> t, int32_t first, int32_t end, int32_t k,
			double *heap_g, /* [k, end - first] (KCAP == 0) */
			double *core_s, /* [n] out */
			Seed seed, /* (SEED) out */
			unsigned long long *evals /* [1] in/out */)
{
	const int64_t pos = first + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const bool	active = pos < end;
	unsigned long long count = 0;

	if (active)
	{
		const int	d = D > 0 ? D : t.d;
		const int	hk = SEED ? k + 1 : k;	/* the heap's size when full */
		dbscan::Query<D, T> q;
		Heap<KCAP>	h;
		int32_t		hrow[SEED ? KCAP : 1];	/* the heap's rows (SEED) */
		int32_t		stack[kStack];
		double		sbound[kStack];
		int			sp = 0;
		int			cnt = 0;
		double		top = INFINITY;	/* the heap's largest once it holds hk */
		int32_t		tick = 0;
		bool		aborted = false;

		h.global = heap_g + (pos - first);
		h.stride = end - first;
		q.load(t.xs, (int32_t) pos, d);

		/* The row at sorted position p into the heap of the hk smallest. */
		auto		offer = [&](int32_t p) {
			const double d2 = dbscan::dist2<D, T>(q.p, dbscan::point<D, T>(t.xs, p, d), d);

			count++;
			if (cnt < hk)
			{
				int			i = cnt++;

				while (i > 0)
				{
					int			par = (i - 1) / 2;

					if (h.at(par) >= d2)
						break;
					h.at(i) = h.at(par);
					if (SEED)
						hrow[i] = hrow[par];
					i = par;
				}
				h.at(i) = d2;
				if (SEED)
					hrow[i] = p;
			}
			else if (d2 < h.at(0))
			{
				int			i = 0;

				for (;;)
				{
					int			l = 2 * i + 1;

					if (l >= hk)
						break;

					int			m = (l + 1 < hk && h.at(l + 1) > h.at(l)) ? l + 1 : l;

					if (h.at(m) <= d2)
						break;
					h.at(i) = h.at(m);
					if (SEED)
						hrow[i] = hrow[m];
					i = m;
				}
				h.at(i) = d2;
				if (SEED)
					hrow[i] = p;
			}
			top = cnt == hk ? h.at(0) : INFINITY;
		};

		stack[sp] = 0;
		sbound[sp] = 0.0;
		sp++;
		while (sp > 0 && !aborted)
		{
			sp--;
			if (++tick >= kAbortEvery)
			{
				tick = 0;
				aborted = *t.abort != 0;
			}

			const int32_t v = stack[sp];

			if (cnt == hk && sbound[sp] >= top)
				continue;

			/* d <= 3, a node of a few rows: its rows in sorted order, without walking down */
			if (D > 0)
			{
				const int32_t far = __ldg(t.span + v);

				if (abs(far - v) < kBucket)
				{
					for (int32_t p = min(v, far); p <= max(v, far); p++)
						offer(p);
					continue;
				}
			}

			const int32_t c[2] = {__ldg(t.left + v), __ldg(t.right + v)};
			double		b[2];

			for (int s = 0; s < 2; s++)
			{
				b[s] = -1.0;
				if (c[s] < 0)
					offer(~c[s]);
				else
					b[s] = box_dist2<D, T>(q.p, t.box + (size_t) c[s] * 2 * t.B, t.B);
			}
			/* The farther child first on the stack, so the nearer one is searched first. */
			const int	nearer = (b[1] >= 0 && (b[0] < 0 || b[1] < b[0])) ? 1 : 0;

			for (int o = 0; o < 2; o++)
			{
				const int	s = o == 0 ? 1 - nearer : nearer;

				if (b[s] < 0 || (cnt == hk && b[s] >= top))
					continue;
				stack[sp] = c[s];
				sbound[sp] = b[s];
				sp++;
			}
		}

		double		kth = INFINITY;	/* the k-th smallest dist2 */

		if (!SEED)
			kth = cnt == k ? h.at(0) : INFINITY;
		else
		{
			/* full: the k-th is the larger child of the root; else every row is in the heap */
			const bool	full = cnt == hk;
			int			out = 0;

			if (full)
				kth = hk >= 3 ? fmax(h.at(1), h.at(2)) : h.at(1);
			else if (cnt == k)
				kth = h.at(0);
			for (int i = full ? 1 : 0; i < cnt; i++)
				seed.nbr[pos * k + out++] = hrow[i];
			while (out < k)
				seed.nbr[pos * k + out++] = -1;
			seed.next[pos] = full ? gc_metric_distance(t.metric, h.at(0)) : INFINITY;
		}
		core_s[pos] = gc_metric_distance(t.metric, kth);
	}
	add_count(evals, count);
}

/* (wa, la, ha) < (wb, lb, hb) in the order of common/hdbscan.h. */
__device__ __forceinline__ bool key_less(double wa, int32_t la, int32_t ha,
										 double wb, int32_t lb, int32_t hb)
{
	return gc_hdbscan_edge_less(wa, la, ha, wb, lb, hb) != 0;
}

/*
 * The first Boruvka round's edge of each row from its k nearest (core_phase
 * with a Seed): the least key (w, lo, hi) over the listed rows, taken as the
 * row's least edge to any other row (exact [pos] = 1) where its weight is
 * below next [pos]: a row outside the list is at a distance of at least
 * next, and its mutual reachability is no less.  The rest search as usual
 * (exact [pos] = 0).
 */
template <int D, typename T>
__global__ void seed_kernel(Tree<T> t, int32_t k, Seed seed,
							double *best_w, /* [n] out */
							unsigned long long *best_pair, /* [n] out */
							uint8_t *exact, /* [n] out */
							unsigned long long *nseeded /* [1] in/out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long got = 0;

	if (pos < t.n)
	{
		const int	d = D > 0 ? D : t.d;
		const int32_t row = __ldg(t.perm + pos);
		const double coreq = __ldg(t.core_s + pos);
		dbscan::Query<D, T> q;
		double		bw = INFINITY;
		int32_t		blo = INT_MAX,
					bhi = INT_MAX;

		q.load(t.xs, (int32_t) pos, d);
		for (int i = 0; i < k; i++)
		{
			const int32_t p = seed.nbr[pos * k + i];

			if (p < 0 || p == pos)
				continue;

			const double d2 = dbscan::dist2<D, T>(q.p, dbscan::point<D, T>(t.xs, p, d), d);
			const double w = gc_hdbscan_mrd(coreq, __ldg(t.core_s + p), gc_metric_distance(t.metric, d2));
			const int32_t rp = __ldg(t.perm + p);
			const int32_t lo = min(row, rp),
						hi = max(row, rp);

			if (key_less(w, lo, hi, bw, blo, bhi))
			{
				bw = w;
				blo = lo;
				bhi = hi;
			}
		}
		if (blo != INT_MAX && bw < seed.next[pos])
		{
			best_w[pos] = bw;
			best_pair[pos] = ((unsigned long long) (uint32_t) blo << 32) | (uint32_t) bhi;
			exact[pos] = 1;
			got = 1;
		}
		else
			exact[pos] = 0;
	}
	add_count(nseeded, got);
}

/*
 * One Boruvka round for the rows at sorted positions [first, end): the
 * least edge (w, lo, hi) from the row to a row of another component, into
 * best_w / best_pair by position (pair ~0 when none), for every row whose
 * least edge is its component's least weight; the other rows may stop
 * early, with a heavier edge or none.  cbound [c] is the least weight of an
 * edge out of component c found so far by any of its rows (the bits of the
 * weight, ~0 for none), shared while the rows search: a subtree whose bound
 * is above it holds no edge of the component's least weight.
 */
template <int D, typename T>
__global__ void __launch_bounds__(kThreads)
boruvka_kernel(Tree<T> t, int32_t first, int32_t end,
			   const int32_t *inv, /* [n] sorted position of each row */
			   double *best_w, /* [n] in/out */
			   unsigned long long *best_pair, /* [n] in/out: lo << 32 | hi */
			   uint8_t *exact, /* [n] in/out: best_w / best_pair is the row's least edge */
			   unsigned long long *cbound, /* [n] by root, in/out */
			   unsigned long long *evals /* [1] in/out */)
{
	const int64_t pos = first + (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const bool	active = pos < end;
	unsigned long long count = 0;

	if (active && exact[pos])
	{
		/*
		 * The row's least edge of the round before, if its other end is
		 * still in another component, is its least edge now: the rows of
		 * other components are fewer, the weights the same.
		 */
		const unsigned long long pr = best_pair[pos];
		const int32_t row = __ldg(t.perm + pos);
		const int32_t lo = (int32_t) (pr >> 32),
					hi = (int32_t) (pr & 0xffffffffULL);

		if (pr != ~0ULL && __ldg(t.comp + __ldg(inv + (lo == row ? hi : lo))) != __ldg(t.comp + pos))
			return;				/* its weight is in cbound already (prime_bounds) */
	}
	if (active)
	{
		const int	d = D > 0 ? D : t.d;
		const int32_t row = __ldg(t.perm + pos);
		const int32_t cq = __ldg(t.comp + pos);
		const double coreq = __ldg(t.core_s + pos);
		bool		complete = true;	/* nothing pruned by the component's bound alone */
		dbscan::Query<D, T> q;
		int32_t		stack[kStack];
		double		sbound[kStack];
		int			sp = 0;
		double		bw = INFINITY;	/* none yet: (inf, INT_MAX, INT_MAX) is above every edge */
		double		cbw = INFINITY;	/* cbound [cq], read every 8 nodes */
		int32_t		blo = INT_MAX,
					bhi = INT_MAX;
		int32_t		tick = 0;
		bool		aborted = false;

		q.load(t.xs, (int32_t) pos, d);
		if (__ldg(t.ncomp) != cq)
		{
			stack[sp] = 0;
			sbound[sp] = coreq;
			sp++;
		}
		while (sp > 0 && !aborted)
		{
			sp--;
			if (++tick >= kAbortEvery)
			{
				tick = 0;
				aborted = *t.abort != 0;
			}

			if ((tick & 7) == 0)
			{
				const unsigned long long cb = *(volatile unsigned long long *) (cbound + cq);

				if (cb != ~0ULL)
					cbw = fmin(cbw, __longlong_as_double((long long) cb));
			}

			const int32_t v = stack[sp];

			{
				const double lw = sbound[sp];
				const int32_t m = __ldg(t.minrow + v);

				if (!key_less(lw, min(row, m), max(row, m), bw, blo, bhi))
					continue;
				if (lw > cbw)
				{
					complete = false;
					continue;
				}
			}

			const int32_t c[2] = {__ldg(t.left + v), __ldg(t.right + v)};
			double		b[2];
			int32_t		bm[2] = {0, 0};

			for (int s = 0; s < 2; s++)
			{
				b[s] = -1.0;
				if (c[s] < 0)
				{
					const int32_t p = ~c[s];

					if (__ldg(t.comp + p) == cq)
						continue;

					const double d2 = dbscan::dist2<D, T>(q.p, dbscan::point<D, T>(t.xs, p, d), d);
					const double w = gc_hdbscan_mrd(coreq, __ldg(t.core_s + p),
													gc_metric_distance(t.metric, d2));
					const int32_t rp = __ldg(t.perm + p);
					const int32_t lo = min(row, rp),
								hi = max(row, rp);

					count++;
					if (key_less(w, lo, hi, bw, blo, bhi))
					{
						bw = w;
						blo = lo;
						bhi = hi;
						if (w < cbw)
						{
							cbw = w;
							atomicMin(cbound + cq, (unsigned long long) __double_as_longlong(w));
						}
					}
				}
				else
				{
					if (__ldg(t.ncomp + c[s]) == cq)
						continue;

					const double bd2 = box_dist2<D, T>(q.p, t.box + (size_t) c[s] * 2 * t.B, t.B);
					const double lw = gc_hdbscan_mrd(coreq, __ldg(t.mincore + c[s]),
													 gc_metric_distance(t.metric, bd2));
					const int32_t m = __ldg(t.minrow + c[s]);

					if (!key_less(lw, min(row, m), max(row, m), bw, blo, bhi))
						continue;
					if (lw > cbw)
					{
						complete = false;
						continue;
					}
					b[s] = lw;
					bm[s] = m;
				}
			}

			/* The child of the lower key nearer the top of the stack. */
			int			nearer = 0;

			if (b[0] < 0)
				nearer = 1;
			else if (b[1] >= 0)
			{
				const int32_t m0 = bm[0],
							m1 = bm[1];

				nearer = key_less(b[1], min(row, m1), max(row, m1), b[0], min(row, m0), max(row, m0)) ? 1 : 0;
			}
			for (int o = 0; o < 2; o++)
			{
				const int	s = o == 0 ? 1 - nearer : nearer;

				if (b[s] < 0)
					continue;
				stack[sp] = c[s];
				sbound[sp] = b[s];
				sp++;
			}
		}
		best_w[pos] = bw;
		best_pair[pos] = blo != INT_MAX ? (((unsigned long long) (uint32_t) blo << 32) | (uint32_t) bhi)
			: ~0ULL;
		exact[pos] = complete && !aborted;
	}
	add_count(evals, count);
}

/*
 * Before a round's searches: every row's edge of the round before whose
 * other end is still in another component is an edge out of the row's
 * component, so its weight bounds the component's least edge from above
 * (cbound).  With it from the start, the rows deep inside a large
 * component prune at once instead of searching with no bound until a row
 * nearer the border has found an edge.
 */
__global__ void prime_bounds(const unsigned long long *best_pair, /* [n] */
							 const double *best_w, /* [n] */
							 const int32_t *comp, /* [n] */ const int32_t *inv, /* [n] */
							 const int32_t *perm, /* [n] */ int32_t n,
							 unsigned long long *cbound /* [n] by root, in/out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;

	const unsigned long long pr = best_pair[pos];

	if (pr == ~0ULL)
		return;

	const int32_t row = perm[pos];
	const int32_t lo = (int32_t) (pr >> 32),
				hi = (int32_t) (pr & 0xffffffffULL);
	const int32_t c = comp[pos];

	if (comp[inv[lo == row ? hi : lo]] != c)
	{
		const unsigned long long wb = (unsigned long long) __double_as_longlong(best_w[pos]);

		if (wb < cbound[c])
			atomicMin(cbound + c, wb);
	}
}

/* The least weight per component (the bits of w >= 0 order as w). */
__global__ void comp_min_w(const double *best_w, /* [n] */
						   const unsigned long long *best_pair, /* [n] */
						   const int32_t *comp, /* [n] */
						   int32_t n, unsigned long long *cw /* [n] by root, in/out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n || best_pair[pos] == ~0ULL)
		return;
	atomicMin(cw + comp[pos], (unsigned long long) __double_as_longlong(best_w[pos]));
}

/* The least (lo, hi) per component among its rows at the least weight. */
__global__ void comp_min_pair(const double *best_w, /* [n] */
							  const unsigned long long *best_pair, /* [n] */
							  const int32_t *comp, /* [n] */ int32_t n,
							  const unsigned long long *cw, /* [n] */
							  unsigned long long *cp /* [n] by root, in/out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n || best_pair[pos] == ~0ULL)
		return;

	const int32_t c = comp[pos];

	if ((unsigned long long) __double_as_longlong(best_w[pos]) == cw[c])
		atomicMin(cp + c, best_pair[pos]);
}

/*
 * Per component (at its root position): its least edge, added once (when
 * both components chose the same edge, by the one of the lower root) and
 * joined in the forest parent.
 */
__global__ void comp_join(const int32_t *comp, /* [n] */ const int32_t *inv, /* [n] */
						  int32_t n, const unsigned long long *cw, /* [n] */
						  const unsigned long long *cp, /* [n] */
						  int32_t *parent, /* [n] forest by position, in/out */
						  unsigned long long *edge_w, /* [n - 1] out */
						  unsigned long long *edge_pair, /* [n - 1] out */
						  int32_t *nedges /* [1] in/out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n || comp[pos] != pos || cw[pos] == ~0ULL)
		return;

	const unsigned long long pair = cp[pos];
	const int32_t lo = (int32_t) (pair >> 32),
				hi = (int32_t) (pair & 0xffffffffULL);
	const int32_t plo = inv[lo],
				phi = inv[hi];
	const int32_t clo = comp[plo],
				chi = comp[phi];
	const int32_t other = clo == pos ? chi : clo;

	if (other < pos && cw[other] == cw[pos] && cp[other] == pair)
		return;					/* the same edge, added by the other side */

	const int32_t e = atomicAdd(nedges, 1);

	if (e < n - 1)
	{
		edge_w[e] = cw[pos];
		edge_pair[e] = pair;
	}
	dbscan::uf_union(parent, plo, phi);
}

/* comp [pos] = the root of pos in the forest. */
__global__ void comp_flatten(int32_t *parent, /* [n] */ int32_t n, int32_t *comp /* [n] out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;
	comp[pos] = dbscan::uf_find(parent, (int32_t) pos);
}

__global__ void iota_kernel(int32_t *a, /* [n] out */ int32_t n)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = (int32_t) i;
}

template <int D, typename T>
void launch_core(Workspace &w, int32_t first, int32_t end, double *heap_g)
{
	const unsigned blocks = blocks_for(end - first, kThreads);
	Tree<T>		t = w.tree<T>();
	Seed		seed = {w.seed_nbr.get(), w.seed_next.get()};

	if (w.seeds())
		core_kernel<D, T, kSeedK + 1, true><<<blocks, kThreads>>>(t, first, end, w.k, nullptr,
																   w.core_s.get(), seed, w.evals.get());
	else if (w.k <= kLocalK)
		core_kernel<D, T, kLocalK, false><<<blocks, kThreads>>>(t, first, end, w.k, nullptr,
																 w.core_s.get(), seed, w.evals.get());
	else
		core_kernel<D, T, 0, false><<<blocks, kThreads>>>(t, first, end, w.k, heap_g,
														   w.core_s.get(), seed, w.evals.get());
	CHECK_LAUNCH("core_kernel");
}

/*
 * The first round's edges from the k nearest of each row into best_w,
 * best_pair and exact; frees the lists.
 */
void seed_round(Workspace &w, double *best_w, unsigned long long *best_pair, uint8_t *exact)
{
	DeviceBuffer<unsigned long long> nseeded(1, "a counter");
	Seed		seed = {w.seed_nbr.get(), w.seed_next.get()};
	unsigned long long h = 0;

	CUDA_TRY(cudaMemset(nseeded.get(), 0, sizeof(unsigned long long)));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		by_dim(w.d, [&](auto dv) {
			seed_kernel<decltype(dv)::value, T><<<blocks_for(w.n, kThreads), kThreads>>>(
				w.tree<T>(), w.k, seed, best_w, best_pair, exact, nseeded.get());
			CHECK_LAUNCH("seed_kernel");
		});
	});
	CUDA_TRY(cudaMemcpy(&h, nseeded.get(), sizeof(h), cudaMemcpyDeviceToHost));
	w.seeded = (int64_t) h;
	w.seed_nbr.release();
	w.seed_next.release();
}

} // namespace

void iota_rows(int32_t *a, int32_t n)
{
	iota_kernel<<<blocks_for(n, 256), 256>>>(a, n);
	CHECK_LAUNCH("iota_kernel");
}

void join_components(int32_t *comp, const int32_t *inv, int32_t n, const unsigned long long *cw,
					 const unsigned long long *cp, int32_t *forest, unsigned long long *edge_w,
					 unsigned long long *edge_pair, int32_t *nedges)
{
	comp_join<<<blocks_for(n, 256), 256>>>(comp, inv, n, cw, cp, forest, edge_w, edge_pair, nedges);
	CHECK_LAUNCH("comp_join");
	comp_flatten<<<blocks_for(n, 256), 256>>>(forest, n, comp);
	CHECK_LAUNCH("comp_flatten");
}

void core_phase(Workspace &w)
{
	/* The global heaps of k > kLocalK: at most 256 MiB, one column per row of a chunk. */
	int32_t		max_chunk = w.n;
	DeviceBuffer<double> heap;

	if (w.k > kLocalK)
	{
		int64_t		rows = std::max<int64_t>(kThreads, ((int64_t) 256 << 20) / 8 / w.k);

		max_chunk = (int32_t) std::min<int64_t>(w.n, rows);
		heap.reset((size_t) max_chunk * w.k, "the neighbour heaps");
	}
	int64_t		chunk = std::min<int32_t>(max_chunk, 1 << 14);

	w.core_s.reset(w.n, "the core distances");
	if (w.seeds())
	{
		w.seed_nbr.reset((size_t) w.n * w.k, "the nearest rows");
		w.seed_next.reset(w.n, "the nearest rows");
	}
	run_chunked(w, "core distances", w.n, chunk, [&](int32_t first, int32_t end) {
		for (int32_t b = first; b < end; b += max_chunk)
		{
			const int32_t e = (int32_t) std::min<int64_t>((int64_t) b + max_chunk, end);

			by_type(w.dtype, [&](auto tv) {
				using T = decltype(tv);

				by_dim(w.d, [&](auto dv) {
					launch_core<decltype(dv)::value, T>(w, b, e, heap.get());
				});
			});
		}
	});
	fill_mincore(w);
}

void mst_phase(Workspace &w)
{
	const int32_t n = w.n;
	DeviceBuffer<int32_t> comp(n, "the components");
	DeviceBuffer<int32_t> forest(n, "the components");
	DeviceBuffer<double> best_w(n, "the Boruvka edges");
	DeviceBuffer<unsigned long long> best_pair(n, "the Boruvka edges");
	DeviceBuffer<uint8_t> exact(n, "the Boruvka edges");
	DeviceBuffer<unsigned long long> cw(n, "the Boruvka edges");
	DeviceBuffer<unsigned long long> cp(n, "the Boruvka edges");
	DeviceBuffer<int32_t> nedges(1, "the Boruvka edges");
	int32_t		have = 0;
	int64_t		chunk = 1 << 14;	/* kept from round to round (later rounds are no slower a row) */

	w.edge_w.reset(n - 1, "the minimum spanning tree");
	w.edge_pair.reset(n - 1, "the minimum spanning tree");
	iota_kernel<<<blocks_for(n, 256), 256>>>(comp.get(), n);
	CHECK_LAUNCH("iota_kernel");
	iota_kernel<<<blocks_for(n, 256), 256>>>(forest.get(), n);
	CHECK_LAUNCH("iota_kernel");
	CUDA_TRY(cudaMemset(nedges.get(), 0, sizeof(int32_t)));
	CUDA_TRY(cudaMemset(exact.get(), 0, exact.bytes()));
	CUDA_TRY(cudaMemset(best_pair.get(), 0xff, best_pair.bytes()));	/* no edge yet */
	if (w.seeds())
	{
		Stopwatch	sw;

		seed_round(w, best_w.get(), best_pair.get(), exact.get());
		if (w.debug)
			fprintf(stderr, "gpuclust hdbscan: first round's edges of %lld of %d rows from their %d nearest, %.3f ms\n",
					(long long) w.seeded, n, w.k, sw.ms());
	}

	while (have < n - 1)
	{
		Stopwatch	sw;

		fill_ncomp(w, comp.get());
		/* cw: the shared bound of each component while its rows search, then its least weight */
		CUDA_TRY(cudaMemset(cw.get(), 0xff, cw.bytes()));
		prime_bounds<<<blocks_for(n, 256), 256>>>(best_pair.get(), best_w.get(), comp.get(), w.inv.get(),
												  w.perm.get(), n, cw.get());
		CHECK_LAUNCH("prime_bounds");
		run_chunked(w, "Boruvka round", n, chunk, [&](int32_t first, int32_t end) {
			by_type(w.dtype, [&](auto tv) {
				using T = decltype(tv);

				by_dim(w.d, [&](auto dv) {
					constexpr int D = decltype(dv)::value;
					Tree<T>		t = w.tree<T>();

					t.comp = comp.get();
					boruvka_kernel<D, T><<<blocks_for(end - first, kThreads), kThreads>>>(
						t, first, end, w.inv.get(), best_w.get(), best_pair.get(), exact.get(), cw.get(),
						w.evals.get());
					CHECK_LAUNCH("boruvka_kernel");
				});
			});
		});
		CUDA_TRY(cudaMemset(cp.get(), 0xff, cp.bytes()));
		comp_min_w<<<blocks_for(n, 256), 256>>>(best_w.get(), best_pair.get(), comp.get(), n, cw.get());
		CHECK_LAUNCH("comp_min_w");
		comp_min_pair<<<blocks_for(n, 256), 256>>>(best_w.get(), best_pair.get(), comp.get(), n,
												   cw.get(), cp.get());
		CHECK_LAUNCH("comp_min_pair");
		comp_join<<<blocks_for(n, 256), 256>>>(comp.get(), w.inv.get(), n, cw.get(), cp.get(),
											   forest.get(), w.edge_w.get(), w.edge_pair.get(),
											   nedges.get());
		CHECK_LAUNCH("comp_join");
		comp_flatten<<<blocks_for(n, 256), 256>>>(forest.get(), n, comp.get());
		CHECK_LAUNCH("comp_flatten");

		int32_t		now = 0;

		CUDA_TRY(cudaMemcpy(&now, nedges.get(), sizeof(now), cudaMemcpyDeviceToHost));
		w.rounds++;
		if (w.debug)
			fprintf(stderr, "gpuclust hdbscan: round %lld: %d edges (+%d), %.3f ms\n",
					(long long) w.rounds, now, now - have, sw.ms());
		if (now <= have || now > n - 1)
			fail(GC_ERR_INTERNAL, "HDBSCAN's Boruvka round %lld went from %d to %d edges of %d",
				 (long long) w.rounds, have, now, n - 1);
		have = now;
		w.call.check_cancel();
	}
}

} // namespace hdbscan
} // namespace gc
