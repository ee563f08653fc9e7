/*
 * hdbscan_tree.h
 *    gc_hdbscan_finish of common/hdbscan.h: from the minimum spanning tree to
 *    the answer, on the host, the same code for both back ends.  Included by
 *    hdbscan.h only.
 *
 * Every step gives scikit-learn's result (sklearn/cluster/_hdbscan/
 * _linkage.pyx make_single_linkage, _tree.pyx _condense_tree,
 * _compute_stability, _get_clusters, _do_labelling, get_probabilities) in
 * the same floating-point order, so that the answer is the one
 * tree_to_labels gives for the same sorted tree; GLOSH is the hdbscan
 * library's outlier_scores.  The two places where scikit-learn's result
 * depends on Python's set order or fails (see gc_hdb_epsilon_search and the
 * single-cluster rule) are decided as the comments there say.
 *
 * scikit-learn condenses the hierarchy breadth first and writes one row per
 * row of the input and per cluster; the labels need none of those rows.
 * gc_hdb_condense walks the hierarchy once, parents before children, in
 * the order of the merges (sequential in memory), and keeps per node only
 * its cluster and where it fell out; it numbers the clusters as the
 * breadth-first walk would (gc_hdb_number).  The rows themselves are made
 * only for gpu_hdbscan_tree, by scikit-learn's walk (gc_hdb_condense_rows),
 * and checked against the first.
 *
 * Nodes of the single-linkage hierarchy: rows 0 .. n-1, merges n .. 2n-2
 * (merge m is node n + m, the root 2n-2); n < 2^31, so a node fits a
 * uint32_t.  Cluster nodes of the condensed tree: 0 (the root) .. K-1, in
 * scikit-learn's order (breadth first; each split's left child first).
 */
#ifndef GPUCLUST_HDBSCAN_TREE_H
#define GPUCLUST_HDBSCAN_TREE_H

#include "sort.h"
#include "hdbscan_threads.h"

/* Edges ahead whose rows the single linkage prefetches. */
#define GC_HDB_PREFETCH 16

/* Per row, during the single linkage: union-find over the rows. */
typedef struct gc_hdb_set
{
	uint32_t	parent;			/* the row's parent; itself at a representative */
	uint32_t	node;			/* at a representative: the set's hierarchy node */
	uint32_t	size;			/* at a representative: the set's rows */
} gc_hdb_set;


/* The working arrays of one gc_hdbscan_finish. */
typedef struct gc_hdb_work
{
	int64_t		n;
	const gc_hdbscan_edge *mst;	/* sorted: merge m at mst[m].w */
	gc_hdb_merge *mg;			/* [n - 1] the single linkage */
	int			mg_given;		/* mg is the caller's (computed on the device) */
	int			st_given;		/* so is st */
	gc_hdb_set *set;			/* [n] */
	gc_hdb_state *st;			/* [2n - 1] */
	/* per cluster node */
	int64_t		nodes;
	int64_t    *k_parent;		/* parent cluster node, -1 for the root */
	double	   *k_birth;		/* lambda at which it was made (0 for the root) */
	int64_t    *k_size;			/* its cluster_size */
	int64_t    *k_child1;		/* first and second child cluster, -1 when none */
	int64_t    *k_child2;
	double	   *k_stab;
	double	   *k_death;		/* the largest lambda of its rows */
	uint8_t    *k_selected;
	int64_t    *k_top;			/* scratch */
	uint64_t   *k_key;			/* per split: where it lies in the breadth-first walk */
	int64_t    *k_order;
	int64_t    *k_num;			/* provisional number -> scikit-learn's */
	int64_t    *sub;			/* [n] a subtree of the cluster tree */
	gc_hdb_loops loops;			/* the threads of the parallel loops, and cancel */
	/* cancel inside the walks that do not return a status */
	gc_cancel_fn cancel;
	void	   *cancel_arg;
	int64_t		work;			/* nodes walked since the last question */
	int			stop;			/* the cancel callback answered yes */
} gc_hdb_work;

static inline int
gc_hdb_cancelled(gc_cancel_fn cancel, void *arg, int64_t i)
{
	return (i & (GC_HDB_CANCEL_EVERY - 1)) == 0 && cancel != NULL && cancel(arg);
}

static inline gc_status
gc_hdb_cancel_error(gc_error *e)
{
	return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
}

static inline void
gc_hdb_free(gc_hdb_work *w)
{
	if (!w->mg_given)
		free(w->mg);
	free(w->set);
	if (!w->st_given)
		free(w->st);
	free(w->k_parent);
	free(w->k_birth);
	free(w->k_size);
	free(w->k_child1);
	free(w->k_child2);
	free(w->k_stab);
	free(w->k_death);
	free(w->k_selected);
	free(w->k_top);
	free(w->k_key);
	free(w->k_order);
	free(w->k_num);
	free(w->sub);
}

/*
 * A stable sort of m (key, value) pairs with scratch tk, tv [m]: 0, or -1
 * when cancelled.  gc_radix_sort of common/sort.h, or the CPU back end's
 * sort on its threads.
 */
typedef int (*gc_hdb_sort_fn) (uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv,
							   int64_t m, void *arg);

/* The caller's thread: gc_radix_sort, asking cancel (arg: the gc_hdb_cancel_arg). */
typedef struct gc_hdb_cancel_arg
{
	gc_cancel_fn cancel;
	void	   *arg;
} gc_hdb_cancel_arg;

static inline int
gc_hdb_radix_sort(uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv, int64_t m, void *arg)
{
	gc_hdb_cancel_arg *c = (gc_hdb_cancel_arg *) arg;

	return gc_radix_sort(keys, vals, tk, tv, m, c->cancel, c->arg);
}

/*
 * Puts the m edges in the order (w, lo, hi) unless they are so already
 * (the GPU sorts them): two stable sorts, by (lo, hi) and then by the
 * weight, with sort.  Returns GC_OK, GC_ERR_CANCELLED or
 * GC_ERR_OUT_OF_MEMORY with e filled.
 */
static inline gc_status
gc_hdbscan_sort_edges(gc_hdbscan_edge *mst, int64_t m, gc_hdb_sort_fn sort, void *sort_arg,
					  gc_error *e)
{
	uint64_t   *keys,
			   *tk;
	int64_t    *vals,
			   *tv;
	gc_hdbscan_edge *copy;
	int64_t		i;
	int			sorted = 1,
				rc;

	for (i = 1; i < m && sorted; i++)
		sorted = gc_hdbscan_edge_less(mst[i - 1].w, mst[i - 1].lo, mst[i - 1].hi,
									  mst[i].w, mst[i].lo, mst[i].hi);
	if (sorted)
		return GC_OK;
	keys = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) m);
	tk = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) m);
	vals = (int64_t *) malloc(sizeof(int64_t) * (size_t) m);
	tv = (int64_t *) malloc(sizeof(int64_t) * (size_t) m);
	copy = (gc_hdbscan_edge *) malloc(sizeof(gc_hdbscan_edge) * (size_t) m);
	rc = (!keys || !tk || !vals || !tv || !copy) ? -2 : 0;
	if (rc == 0)
	{
		for (i = 0; i < m; i++)
		{
			keys[i] = ((uint64_t) (uint32_t) mst[i].lo << 32) | (uint32_t) mst[i].hi;
			vals[i] = i;
		}
		rc = sort(keys, vals, tk, tv, m, sort_arg);
	}
	if (rc == 0)
	{
		for (i = 0; i < m; i++)
			keys[i] = gc_order_key(mst[vals[i]].w);
		rc = sort(keys, vals, tk, tv, m, sort_arg);
	}
	if (rc == 0)
	{
		memcpy(copy, mst, sizeof(gc_hdbscan_edge) * (size_t) m);
		for (i = 0; i < m; i++)
			mst[i] = copy[vals[i]];
	}
	free(keys);
	free(tk);
	free(vals);
	free(tv);
	free(copy);
	if (rc == -2)
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's %lld tree edges",
							(long long) m);
	if (rc != 0)
		return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
	return GC_OK;
}

/* The representative of x in the union-find uf (path halving); also the CPU Boruvka's. */
static inline int64_t
gc_hdb_find(int64_t *uf, int64_t x)
{
	while (uf[x] != x)
	{
		uf[x] = uf[uf[x]];
		x = uf[x];
	}
	return x;
}

/*
 * The bits of a weight w >= 0, whose unsigned order is the order of the
 * weights, and back: the CPU Borůvka searches' shared component bounds.
 */
static inline uint64_t
gc_hdb_wbits(double w)
{
	uint64_t	b;

	memcpy(&b, &w, sizeof(b));
	return b;
}

static inline double
gc_hdb_wval(uint64_t b)
{
	double		w;

	memcpy(&w, &b, sizeof(w));
	return w;
}

/* Lowers a component's weight bound to w (atomically, from any thread). */
static inline void
gc_hdb_bound_lower(uint64_t *bound, double w)
{
	uint64_t	nb = gc_hdb_wbits(w),
				cur = __atomic_load_n(bound, __ATOMIC_RELAXED);

	while (nb < cur &&
		   !__atomic_compare_exchange_n(bound, &cur, nb, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/*
 * The joins of one CPU Borůvka round: each component (comp[i] of place i,
 * a place index) takes the least (gc_hdbscan_edge_less) of its places'
 * best edges (best_q[i] >= 0: to place best_q[i]); every chosen edge that
 * joins two sets of uf is appended to mst at *edges.  cbest [n] is
 * scratch.  Returns the edges added.
 */
static inline int64_t
gc_hdb_join_least(int64_t n, const int32_t *comp, const double *best_w, const int32_t *best_lo,
				  const int32_t *best_hi, const int32_t *best_q, int32_t *cbest, int64_t *uf,
				  gc_hdbscan_edge *mst, int64_t *edges)
{
	int64_t		added = 0;

	for (int64_t i = 0; i < n; i++)
		cbest[i] = -1;
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		c = comp[i],
					j = cbest[c];

		if (best_q[i] < 0)
			continue;
		if (j < 0 || gc_hdbscan_edge_less(best_w[i], best_lo[i], best_hi[i], best_w[j], best_lo[j], best_hi[j]))
			cbest[c] = (int32_t) i;
	}
	for (int64_t c = 0; c < n; c++)
	{
		int32_t		i = cbest[c];
		int64_t		a,
					b;

		if (i < 0)
			continue;
		a = gc_hdb_find(uf, i);
		b = gc_hdb_find(uf, best_q[i]);
		if (a == b)
			continue;			/* the same edge, chosen by both its components */
		uf[a < b ? b : a] = a < b ? a : b;
		mst[*edges].w = best_w[i];
		mst[*edges].lo = best_lo[i];
		mst[*edges].hi = best_hi[i];
		(*edges)++;
		added++;
	}
	return added;
}

#include "hdbscan_linkage.h"

/* Rows under merge m. */
static inline int64_t
gc_hdb_size(const gc_hdb_work *w, int64_t m)
{
	return (int64_t) w->mg[m].lsize + (int64_t) w->mg[m].rsize;
}

/* Rows under hierarchy node x. */
static inline int64_t
gc_hdb_count(const gc_hdb_work *w, uint32_t x)
{
	return x < (uint64_t) w->n ? 1 : gc_hdb_size(w, x - w->n);
}

/*
 * The terms one merge of a cluster adds to its stability, at v = lambda -
 * the cluster's birth, with children of lc and rc rows (_compute_stability's
 * terms, in its order): a split adds v once per row of each child, v * lc
 * then v * rc; otherwise each row of a child smaller than min_size falls
 * out and adds v * 1.0 on its own.  Returns how many terms: *first, then
 * *rest each time after.  The device sums with these functions too
 * (cuda/hdbscan_finish.cu).
 */
static GC_HD int64_t
gc_hdb_stab_terms(double v, int64_t lc, int64_t rc, int64_t min_size, double *first,
				  double *rest)
{
	if (lc >= min_size && rc >= min_size)
	{
		*first = v * (double) lc;
		*rest = v * (double) rc;
		return 2;
	}
	*first = v * 1.0;
	*rest = *first;
	return (lc < min_size ? lc : 0) + (rc < min_size ? rc : 0);
}

/* A cluster's stability s after one of its merges (gc_hdb_stab_terms). */
static GC_HD double
gc_hdb_stab_add(double s, double v, int64_t lc, int64_t rc, int64_t min_size)
{
	double		first,
				rest;
	int64_t		count = gc_hdb_stab_terms(v, lc, rc, min_size, &first, &rest);

	if (count > 0)
		s += first;
	for (int64_t j = 1; j < count; j++)
		s += rest;
	return s;
}

/* lambda of merge m: 1 / its distance, infinite at distance 0. */
static inline double
gc_hdb_lambda(const gc_hdb_work *w, uint32_t m)
{
	return w->mst[m].w > 0.0 ? 1.0 / w->mst[m].w : INFINITY;
}

/*
 * Merge m of cluster k, with children of lc and rc rows, into k's death and
 * stability (in the order the merges come); returns the merge's lambda.
 */
static inline double
gc_hdb_merge_into(gc_hdb_work *w, uint32_t m, int64_t k, int64_t lc, int64_t rc, int64_t min_size)
{
	double		lambda = gc_hdb_lambda(w, m);

	if (lambda > w->k_death[k])
		w->k_death[k] = lambda;
	w->k_stab[k] = gc_hdb_stab_add(w->k_stab[k], lambda - w->k_birth[k], lc, rc, min_size);
	return lambda;
}

/* Cluster k (provisional number) made from a child of cluster parent at lambda. */
static inline void
gc_hdb_init_cluster(gc_hdb_work *w, int64_t k, int64_t parent, double lambda, int64_t size)
{
	w->k_parent[k] = parent;
	w->k_birth[k] = lambda;
	w->k_size[k] = size;
	w->k_child1[k] = -1;
	w->k_child2[k] = -1;
	w->k_stab[k] = 0.0;
	w->k_death[k] = 0.0;
}

/*
 * A split of cluster parent at lambda into children of lc and rc rows: the
 * next two provisional numbers, k and k + 1 (split (k - 1) / 2, at place).
 */
static inline int64_t
gc_hdb_new_split(gc_hdb_work *w, int64_t parent, double lambda, int64_t lc, int64_t rc,
				 uint64_t place)
{
	int64_t		k = w->nodes;

	w->nodes += 2;

	w->k_key[(k - 1) / 2] = place;
	gc_hdb_init_cluster(w, k, parent, lambda, lc);
	gc_hdb_init_cluster(w, k + 1, parent, lambda, rc);
	w->k_child1[parent] = k;
	w->k_child2[parent] = k + 1;
	return k;
}

/*
 * The condensed tree without its rows (_condense_tree and
 * _compute_stability), one merge at a time, each after its parent: merge
 * m, whose state is known, gives its children theirs.  A node that did not
 * fall out belongs to a cluster; at each such node scikit-learn writes rows
 * (two new clusters, or the rows of the children that are too small, which
 * fall out there), all at the node's lambda.  The nodes of one cluster form
 * a chain from its birth down, which this walk and scikit-learn's meet in
 * the same order, so each
 * cluster's stability is summed in scikit-learn's order: one term per row,
 * each row that falls out adding (lambda - birth) once.  The clusters get
 * provisional numbers in the order made here; gc_hdb_number renumbers them.
 */
static inline void
gc_hdb_condense_node(gc_hdb_work *w, int64_t m, int64_t min_size)
{
	int64_t		n = w->n;
	gc_hdb_state *st = w->st;
	gc_hdb_state s = st[n + m];
	gc_hdb_merge g = w->mg[m];
	uint32_t	l = g.left,
				r = g.right;
	int64_t		lc = g.lsize,
				rc = g.rsize,
				k = s.own;
	double		lambda;
	uint64_t	depth = (s.at.place >> 32) + 1,
				pre = s.at.place & UINT32_MAX;
	gc_hdb_state down;

	if (s.fell != GC_HDB_NONE)
	{
		st[l] = s;
		st[r] = s;
		return;
	}
	lambda = gc_hdb_merge_into(w, (uint32_t) m, k, lc, rc, min_size);
	if (lc >= min_size && rc >= min_size)
	{
		int64_t		c;

		c = gc_hdb_new_split(w, k, lambda, lc, rc, s.at.place);
		down.fell = GC_HDB_NONE;
		down.own = (uint32_t) c;
		down.at.place = depth << 32 | (pre + 1);
		st[l] = down;
		down.own = (uint32_t) (c + 1);
		down.at.place = depth << 32 | (pre + 2 * (uint64_t) lc);
		st[r] = down;
		return;
	}
	/* the rows of the small children fell out (their terms above) */
	down.own = (uint32_t) k;
	down.fell = GC_HDB_NONE;
	down.at.place = depth << 32 | (lc < min_size ? pre + 2 * (uint64_t) lc : pre + 1);
	if (lc >= min_size)
		st[l] = down;
	if (rc >= min_size)
		st[r] = down;
	down.fell = (uint32_t) m;
	down.at.lambda = lambda;
	if (lc < min_size)
		st[l] = down;
	if (rc < min_size)
		st[r] = down;
}

/*
 * The clusters from states given for every node (the GPU's, with its own
 * provisional numbers: split j's children 1 + 2j and 2 + 2j): the merges
 * from the root down, in the order of gc_hdb_condense, each that did not
 * fall adding to its cluster's stability and death as there (so in the
 * same order), each split making its two clusters.
 */
static inline gc_status
gc_hdb_condense_given(gc_hdb_work *w, int64_t min_size, gc_error *e)
{
	int64_t		n = w->n,
				count = 0;
	const gc_hdb_state *st = w->st;

	w->nodes = 1;
	gc_hdb_init_cluster(w, 0, -1, 0.0, n);
	for (int64_t m = n - 2; m >= 0; m--)
	{
		gc_hdb_state s = st[n + m];
		gc_hdb_merge g = w->mg[m];
		int64_t		k = s.own,
					lc = g.lsize,
					rc = g.rsize;
		double		lambda;

		if (gc_hdb_poll(&w->loops, NULL, &count))
			return gc_hdb_cancel_error(e);
		if (s.fell != GC_HDB_NONE)
			continue;
		if (k >= w->nodes)
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN's merge %lld belongs to cluster %lld of %lld made",
								(long long) m, (long long) k, (long long) w->nodes);
		lambda = gc_hdb_merge_into(w, (uint32_t) m, k, lc, rc, min_size);
		if (lc >= min_size && rc >= min_size)
		{
			int64_t		c = st[g.left].own;

			if (c < 1 || c % 2 != 1 || st[g.right].own != c + 1)
				return gc_error_set(e, GC_ERR_INTERNAL,
									"HDBSCAN's split at merge %lld makes clusters %lld and %lld",
									(long long) m, (long long) c, (long long) st[g.right].own);
			w->k_key[(c - 1) / 2] = s.at.place;
			gc_hdb_init_cluster(w, c, k, lambda, lc);
			gc_hdb_init_cluster(w, c + 1, k, lambda, rc);
			w->k_child1[k] = c;
			w->k_child2[k] = c + 1;
			if (c + 2 > w->nodes)
				w->nodes = c + 2;
			continue;
		}
	}
	return GC_OK;
}

/*
 * The condensation: the root's cluster, then every merge after its parent,
 * on the caller's thread in the order of the merges (the children's states
 * fetched ahead).  Each subtree under the top of the hierarchy walked from
 * its root down by a thread of its own gave the same answer but was no
 * faster on the 16 cores of the GPU machine: 45 to 48 ms against 36 to 54
 * ms at 1M rows, 604 against 427 ms at 10M (bench/hdbscan_bench.sh
 * blobs); each node of such a walk waits for the memory of the one before.
 */
static inline gc_status
gc_hdb_condense(gc_hdb_work *w, int64_t min_size, gc_error *e)
{
	int64_t		n = w->n,
				count = 0;
	gc_hdb_state *st = w->st;

	w->nodes = 1;
	gc_hdb_init_cluster(w, 0, -1, 0.0, n);
	st[2 * n - 2].own = 0;
	st[2 * n - 2].fell = GC_HDB_NONE;
	st[2 * n - 2].at.place = 0;
	for (int64_t m = n - 2; m >= 0; m--)
	{
		if (gc_hdb_poll(&w->loops, NULL, &count))
			return gc_hdb_cancel_error(e);
		if (m >= GC_HDB_PREFETCH)
		{
			/* the states written to the children of a merge ahead */
			GC_PREFETCH(&st[w->mg[m - GC_HDB_PREFETCH].left]);
			GC_PREFETCH(&st[w->mg[m - GC_HDB_PREFETCH].right]);
		}
		gc_hdb_condense_node(w, m, min_size);
	}
	return GC_OK;
}

/*
 * scikit-learn's numbers of the clusters: its breadth-first walk meets the
 * hierarchy level by level, each level from left to right, and numbers the
 * two children of each split as it meets the split.  Within a level, left
 * to right is preorder, so the splits in the order (depth, preorder) give
 * the numbers.  Renumbers the per-cluster arrays in place (scratch sub and
 * k_top).
 */
static inline gc_status
gc_hdb_number(gc_hdb_work *w, gc_cancel_fn cancel, void *carg, gc_error *e)
{
	int64_t		K = w->nodes,
				splits = (K - 1) / 2;
	int64_t    *num = w->k_num;
	uint64_t   *tk;
	int64_t    *tv;
	int			rc = 0;

	num[0] = 0;
	if (splits > 0)
	{
		/* split j made provisional clusters 1 + 2j and 2 + 2j */
		tk = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) splits);
		tv = (int64_t *) malloc(sizeof(int64_t) * (size_t) splits);
		if (tk == NULL || tv == NULL)
		{
			free(tk);
			free(tv);
			return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's cluster tree");
		}
		for (int64_t j = 0; j < splits; j++)
			w->k_order[j] = j;
		rc = gc_radix_sort(w->k_key, w->k_order, tk, tv, splits, cancel, carg);
		free(tk);
		free(tv);
		if (rc != 0)
			return gc_hdb_cancel_error(e);
		for (int64_t t = 0; t < splits; t++)
		{
			num[1 + 2 * w->k_order[t]] = 1 + 2 * t;
			num[2 + 2 * w->k_order[t]] = 2 + 2 * t;
		}
	}
	/* per-cluster arrays into the new order, one array at a time through k_top */
#define GC_HDB_PERMUTE(arr, type, map) \
	do { \
		type	   *tmp_ = (type *) w->k_top; \
		for (int64_t k_ = 0; k_ < K; k_++) \
			tmp_[num[k_]] = map(w->arr[k_]); \
		memcpy(w->arr, tmp_, sizeof(type) * (size_t) K); \
	} while (0)
#define GC_HDB_SAME(x) (x)
#define GC_HDB_NODE(x) ((x) < 0 ? (x) : num[x])
	GC_HDB_PERMUTE(k_parent, int64_t, GC_HDB_NODE);
	GC_HDB_PERMUTE(k_child1, int64_t, GC_HDB_NODE);
	GC_HDB_PERMUTE(k_child2, int64_t, GC_HDB_NODE);
	GC_HDB_PERMUTE(k_size, int64_t, GC_HDB_SAME);
	GC_HDB_PERMUTE(k_birth, double, GC_HDB_SAME);
	GC_HDB_PERMUTE(k_stab, double, GC_HDB_SAME);
	GC_HDB_PERMUTE(k_death, double, GC_HDB_SAME);
#undef GC_HDB_PERMUTE
#undef GC_HDB_SAME
#undef GC_HDB_NODE
	return GC_OK;
}

/* Cluster node k and its descendants, breadth first, into w->sub; returns how many. */
static inline int64_t
gc_hdb_subtree(gc_hdb_work *w, int64_t k)
{
	int64_t		head = 0,
				tail = 0;

	w->sub[tail++] = k;
	while (head < tail)
	{
		int64_t		x = w->sub[head++];

		if (w->k_child1[x] >= 0)
			w->sub[tail++] = w->k_child1[x];
		if (w->k_child2[x] >= 0)
			w->sub[tail++] = w->k_child2[x];
	}
	return tail;
}

/*
 * The lowest ancestor of a leaf born at a distance above epsilon
 * (traverse_upwards); a child of the root stays itself unless a single
 * cluster is allowed.
 */
static inline int64_t
gc_hdb_upwards(const gc_hdb_work *w, double eps, int64_t leaf, int allow_single)
{
	for (;;)
	{
		int64_t		parent = w->k_parent[leaf];

		if (parent == 0)
			return allow_single ? parent : leaf;
		if (1.0 / w->k_birth[parent] > eps)
			return parent;
		leaf = parent;
	}
}

/*
 * epsilon_search: selection limited by cluster_selection_epsilon.  The
 * candidates (in_set) are taken in increasing node order; scikit-learn
 * takes them in the order of a Python set of node ids, which is the same
 * order whenever the two can differ in their answer only for nested
 * selections that scikit-learn itself leaves ambiguous.
 */
static inline void
gc_hdb_epsilon_search(gc_hdb_work *w, uint8_t *in_set, double eps, int allow_single,
					  uint8_t *selected, uint8_t *processed)
{
	for (int64_t k = 0; k < w->nodes; k++)
		selected[k] = 0;
	for (int64_t k = 0; k < w->nodes; k++)
		processed[k] = 0;
	for (int64_t leaf = 0; leaf < w->nodes; leaf++)
	{
		if (!in_set[leaf])
			continue;
		if (1.0 / w->k_birth[leaf] < eps)
		{
			if (!processed[leaf])
			{
				int64_t		up = gc_hdb_upwards(w, eps, leaf, allow_single),
							cnt = gc_hdb_subtree(w, up);

				selected[up] = 1;
				for (int64_t i = 1; i < cnt; i++)
					processed[w->sub[i]] = 1;
			}
		}
		else
			selected[leaf] = 1;
	}
}

/*
 * Chooses the clusters (_get_clusters) into k_selected.  in_list marks the
 * nodes scikit-learn considers (node_list: all but the root unless a
 * single cluster is allowed).
 */
static inline gc_status
gc_hdb_select(gc_hdb_work *w, const gc_hdbscan_params *p, gc_error *e)
{
	int64_t		K = w->nodes,
				n = w->n;
	int			allow_single = p->allow_single_cluster != 0;
	double		eps = p->cluster_selection_epsilon;
	int64_t		max_size = p->max_cluster_size > 0 ? p->max_cluster_size : n + 1;
	uint8_t    *in_list = (uint8_t *) calloc((size_t) K, 2),
			   *scratch;
	uint8_t    *is_cluster = w->k_selected;
	int			has_cluster_rows = K > 1;

	if (in_list == NULL)
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's cluster tree");
	scratch = in_list + K;
	for (int64_t k = 0; k < K; k++)
		in_list[k] = (k > 0 || allow_single);
	/* the root's cluster_size when it is considered: the sum of its cluster children's */
	if (allow_single)
		w->k_size[0] = (w->k_child1[0] >= 0 ? w->k_size[w->k_child1[0]] : 0) +
			(w->k_child2[0] >= 0 ? w->k_size[w->k_child2[0]] : 0);

	if (p->method == GC_HDBSCAN_EOM)
	{
		/*
		 * Children before parents (node ids grow downwards).  A node chosen
		 * here deselects its whole subtree, which is the same as: selected
		 * at the end when chosen and no ancestor was chosen.
		 */
		for (int64_t k = K - 1; k >= 0; k--)
		{
			double		sub = 0.0;

			is_cluster[k] = 0;
			if (!in_list[k])
				continue;
			if (w->k_child1[k] >= 0)
				sub = w->k_stab[w->k_child1[k]] + w->k_stab[w->k_child2[k]];
			if (sub > w->k_stab[k] || w->k_size[k] > max_size)
				w->k_stab[k] = sub;
			else
				is_cluster[k] = 1;
		}
		for (int64_t k = 0; k < K; k++)
		{
			int64_t		a = w->k_parent[k];

			/* scratch[k]: an ancestor of k was chosen */
			scratch[k] = a >= 0 && (scratch[a] || is_cluster[a]);
		}
		for (int64_t k = 0; k < K; k++)
			if (scratch[k])
				is_cluster[k] = 0;

		if (eps != 0.0 && has_cluster_rows)
		{
			int64_t		chosen = 0;

			for (int64_t k = 0; k < K; k++)
				chosen += is_cluster[k];
			if (chosen == 1 && is_cluster[0])
			{
				if (!allow_single)
					is_cluster[0] = 0;
			}
			else
			{
				uint8_t    *cand = (uint8_t *) malloc((size_t) K * 2);

				if (cand == NULL)
				{
					free(in_list);
					return gc_error_set(e, GC_ERR_OUT_OF_MEMORY,
										"out of memory for HDBSCAN's cluster tree");
				}
				memcpy(cand, is_cluster, (size_t) K);
				gc_hdb_epsilon_search(w, cand, eps, allow_single, is_cluster, cand + K);
				/* is_cluster holds the selection; only nodes of node_list count */
				for (int64_t k = 0; k < K; k++)
					is_cluster[k] = is_cluster[k] && in_list[k];
				free(cand);
			}
		}
	}
	else
	{
		/* the leaves of the cluster tree; none when the root never splits */
		uint8_t    *leaves = scratch;

		for (int64_t k = 0; k < K; k++)
			leaves[k] = has_cluster_rows && w->k_child1[k] < 0;
		if (eps != 0.0)
		{
			uint8_t    *tmp = (uint8_t *) malloc((size_t) K);

			if (tmp == NULL)
			{
				free(in_list);
				return gc_error_set(e, GC_ERR_OUT_OF_MEMORY,
									"out of memory for HDBSCAN's cluster tree");
			}
			gc_hdb_epsilon_search(w, leaves, eps, allow_single, is_cluster, tmp);
			free(tmp);
		}
		else
			memcpy(is_cluster, leaves, (size_t) K);
		for (int64_t k = 0; k < K; k++)
			is_cluster[k] = is_cluster[k] && in_list[k];
	}
	free(in_list);
	return GC_OK;
}

/*
 * Labels, probabilities and GLOSH scores from the selection
 * (_do_labelling, get_probabilities, and the hdbscan library's
 * outlier_scores).  Each row falls out of one cluster (gc_hdb_condense),
 * at the lambda of the merge where it fell.  Clusters are numbered by their
 * lowest row.
 *
 * scikit-learn's deaths (max_lambdas) are the largest lambda of the last
 * run of consecutive rows of each cluster in its row order.  The last rows
 * of a cluster are those of the end of its chain, whose lambda is the
 * largest of the chain (lambda grows downwards), so the death is the
 * largest lambda of all its rows, k_death; the hdbscan library's adds the
 * largest of each subtree.
 *
 * Four loops over the rows: each row's chosen cluster (in res->cluster
 * for now) and each cluster's lowest row; the rows that are their
 * cluster's lowest, counted per task; those rows number their clusters in
 * row order; the answers.
 */
typedef struct gc_hdb_lab
{
	gc_hdb_work *w;
	const gc_hdbscan_params *p;
	gc_hdbscan_result *res;
	const double *death_glosh;
	const int64_t *top;			/* per node: the top of its component */
	int64_t    *first;			/* per node: its lowest row, n when none */
	int64_t    *node_label;		/* per node: its cluster number */
	int64_t    *counts;			/* per task */
	int64_t		tasks;
	int			single;
	double		threshold;
	int			bad;			/* a row labelled by an unselected cluster */
} gc_hdb_lab;

/*
 * A row's chosen cluster node, from top, the top of the component of the
 * cluster it fell out of (gc_hdb_label_prepare), and the lambda at which it
 * fell: top, or -1 for noise, or -2 where top is neither the root nor
 * selected, which cannot happen (an internal error).
 */
static GC_HD int64_t
gc_hdb_row_choice(int64_t top, int top_selected, double lambda, int single, double threshold)
{
	if (top == 0 && !(single && lambda >= threshold))
		return -1;
	if (top != 0 && !top_selected)
		return -2;
	return top;
}

/* A labelled row's probability, from its lambda and its cluster's death. */
static GC_HD double
gc_hdb_row_probability(double lambda, double death)
{
	if (death == 0.0 || isinf(lambda))
		return 1.0;
	return (lambda < death ? lambda : death) / death;
}

/*
 * A row's GLOSH score from its lambda and the largest lambda of the
 * subtree of the cluster it fell out of; where the library divides
 * infinity by infinity, the limit 1.
 */
static GC_HD double
gc_hdb_row_glosh(double lambda, double mx)
{
	if (mx == 0.0 || !isfinite(lambda))
		return 0.0;
	if (isinf(mx))
		return 1.0;
	return (mx - lambda) / mx;
}

/* The chosen cluster of each row (-1: noise) and each cluster's lowest row. */
static inline int
gc_hdb_lab_choose(void *arg, int64_t t, void *worker)
{
	gc_hdb_lab *L = (gc_hdb_lab *) arg;
	gc_hdb_work *w = L->w;
	int64_t		b,
				e,
				count = 0;

	gc_hdb_block(w->n, L->tasks, t, &b, &e);
	for (int64_t i = b; i < e; i++)
	{
		int64_t		top = L->top[w->k_num[w->st[i].own]],
					k = gc_hdb_row_choice(top, w->k_selected[top], w->st[i].at.lambda,
										  L->single, L->threshold),
					seen;

		if (gc_hdb_poll(&w->loops, worker, &count))
			return 1;
		if (k == -2)
		{
			__atomic_store_n(&L->bad, 1, __ATOMIC_RELAXED);
			return 1;
		}
		L->res->cluster[i] = (int32_t) k;
		if (k < 0)
			continue;
		seen = __atomic_load_n(&L->first[k], __ATOMIC_RELAXED);
		while (i < seen &&
			   !__atomic_compare_exchange_n(&L->first[k], &seen, i, 1, __ATOMIC_RELAXED,
											__ATOMIC_RELAXED))
			;
	}
	return 0;
}

/* Rows of the task that are their cluster's lowest. */
static inline int
gc_hdb_lab_count(void *arg, int64_t t, void *worker)
{
	gc_hdb_lab *L = (gc_hdb_lab *) arg;
	int64_t		b,
				e,
				k = 0;

	(void) worker;
	gc_hdb_block(L->w->n, L->tasks, t, &b, &e);
	for (int64_t i = b; i < e; i++)
		k += L->res->cluster[i] >= 0 && L->first[L->res->cluster[i]] == i;
	L->counts[t] = k;
	return 0;
}

/* Cluster numbers in the order of the clusters' lowest rows. */
static inline int
gc_hdb_lab_number(void *arg, int64_t t, void *worker)
{
	gc_hdb_lab *L = (gc_hdb_lab *) arg;
	int64_t		b,
				e,
				next = L->counts[t];

	(void) worker;
	gc_hdb_block(L->w->n, L->tasks, t, &b, &e);
	for (int64_t i = b; i < e; i++)
		if (L->res->cluster[i] >= 0 && L->first[L->res->cluster[i]] == i)
			L->node_label[L->res->cluster[i]] = next++;
	return 0;
}

/* Each row's cluster number, probability and GLOSH score. */
static inline int
gc_hdb_lab_answer(void *arg, int64_t t, void *worker)
{
	gc_hdb_lab *L = (gc_hdb_lab *) arg;
	gc_hdb_work *w = L->w;
	gc_hdbscan_result *res = L->res;
	int64_t		b,
				e;

	(void) worker;
	gc_hdb_block(w->n, L->tasks, t, &b, &e);
	for (int64_t i = b; i < e; i++)
	{
		int64_t		pk = w->k_num[w->st[i].own],
					k = res->cluster[i];
		double		lam = w->st[i].at.lambda;

		if (k >= 0)
			res->cluster[i] = (int32_t) L->node_label[k];
		if (res->probability == NULL)
			continue;			/* not wanted (nor the outlier scores) */
		res->probability[i] = k < 0 ? 0.0 : gc_hdb_row_probability(lam, w->k_death[k]);
		res->outlier_score[i] = gc_hdb_row_glosh(lam, L->death_glosh[pk]);
	}
	return 0;
}

/*
 * What each row's answer needs from the selection, per cluster node: top
 * [K], the top of its component (itself when chosen, else its parent's),
 * and death_glosh [K], the hdbscan library's death (the largest lambda of
 * the subtree); and whether the root is the single cluster, whose rows
 * from threshold on are labelled.
 */
static inline void
gc_hdb_label_prepare(const gc_hdb_work *w, const gc_hdbscan_params *p, int64_t *top,
					 double *death_glosh, int *single, double *threshold)
{
	int64_t		K = w->nodes,
				chosen = 0;

	for (int64_t k = 0; k < K; k++)
		chosen += w->k_selected[k];
	for (int64_t k = 0; k < K; k++)
		top[k] = (k == 0 || w->k_selected[k]) ? k : top[w->k_parent[k]];
	memcpy(death_glosh, w->k_death, sizeof(double) * (size_t) K);
	for (int64_t k = K - 1; k > 0; k--)
	{
		int64_t		pk = w->k_parent[k];

		if (death_glosh[k] > death_glosh[pk])
			death_glosh[pk] = death_glosh[k];
	}
	*single = chosen == 1 && w->k_selected[0] && p->allow_single_cluster;
	*threshold = p->cluster_selection_epsilon != 0.0 ?
		1.0 / p->cluster_selection_epsilon : w->k_death[0];
}

static inline gc_status
gc_hdb_label(gc_hdb_work *w, const gc_hdbscan_params *p, gc_hdbscan_result *res, gc_error *e)
{
	int64_t		K = w->nodes,
				n = w->n;
	gc_hdb_lab	L;
	double	   *death_glosh = (double *) malloc(sizeof(double) * (size_t) K);
	int64_t    *top = w->sub;	/* per node: the top of its component */
	int64_t    *first = (int64_t *) malloc(sizeof(int64_t) * (size_t) K);
	int64_t    *counts;
	gc_status	st = GC_OK;

	memset(&L, 0, sizeof(L));
	L.tasks = gc_hdb_tasks(&w->loops, n, GC_HDB_GRAIN);
	counts = (int64_t *) malloc(sizeof(int64_t) * (size_t) L.tasks);
	if (death_glosh == NULL || first == NULL || counts == NULL)
	{
		free(death_glosh);
		free(first);
		free(counts);
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's cluster tree");
	}
	gc_hdb_label_prepare(w, p, top, death_glosh, &L.single, &L.threshold);
	for (int64_t k = 0; k < K; k++)
		first[k] = n;

	L.w = w;
	L.p = p;
	L.res = res;
	L.death_glosh = death_glosh;
	L.top = top;
	L.first = first;
	L.node_label = w->k_top;
	L.counts = counts;
	if (gc_hdb_run(&w->loops, L.tasks, gc_hdb_lab_choose, &L) != 0)
		st = L.bad ? gc_error_set(e, GC_ERR_INTERNAL,
								  "HDBSCAN labelled a row by an unselected cluster") :
			gc_hdb_cancel_error(e);
	if (st == GC_OK)
	{
		gc_hdb_run(&w->loops, L.tasks, gc_hdb_lab_count, &L);
		res->n_clusters = gc_hdb_offsets(counts, L.tasks);
		gc_hdb_run(&w->loops, L.tasks, gc_hdb_lab_number, &L);
		gc_hdb_run(&w->loops, L.tasks, gc_hdb_lab_answer, &L);
	}
	free(death_glosh);
	free(first);
	free(counts);
	return st;
}

/*
 * The GPU's path without the rows (cuda/hdbscan_finish.cu): the device
 * computes the K clusters with their stabilities and deaths, numbers them
 * as gc_hdb_number does and gives every row its answer; the host selects
 * the clusters between, with the code of gc_hdbscan_finish.
 *
 * gc_hdb_given_alloc sets up w for n rows and K clusters; the caller fills
 * k_parent, k_birth, k_size, k_child1, k_child2, k_stab and k_death [K]
 * (numbered), then calls gc_hdb_given_select, and frees w with
 * gc_hdb_free.
 */
static inline gc_status
gc_hdb_given_alloc(gc_hdb_work *w, int64_t n, int64_t K, gc_error *e)
{
	size_t		k = (size_t) (K > 0 ? K : 1);

	memset(w, 0, sizeof(*w));
	w->n = n;
	w->nodes = K;
	w->mg_given = 1;
	w->st_given = 1;
	w->k_parent = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_birth = (double *) malloc(sizeof(double) * k);
	w->k_size = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_child1 = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_child2 = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_stab = (double *) malloc(sizeof(double) * k);
	w->k_death = (double *) malloc(sizeof(double) * k);
	w->k_selected = (uint8_t *) malloc(k);
	w->k_top = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_key = (uint64_t *) malloc(sizeof(uint64_t) * k);
	w->k_order = (int64_t *) malloc(sizeof(int64_t) * k);
	w->k_num = (int64_t *) malloc(sizeof(int64_t) * k);
	w->sub = (int64_t *) malloc(sizeof(int64_t) * k);
	if (!w->k_parent || !w->k_birth || !w->k_size || !w->k_child1 || !w->k_child2 ||
		!w->k_stab || !w->k_death || !w->k_selected || !w->k_top || !w->k_key ||
		!w->k_order || !w->k_num || !w->sub)
	{
		gc_hdb_free(w);
		memset(w, 0, sizeof(*w));
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY,
							"out of memory for HDBSCAN's %lld clusters", (long long) K);
	}
	return GC_OK;
}

/*
 * Selects the given clusters (numbered); then per node, top [K] is the
 * node whose number its rows take (gc_hdb_row_choice's top, in w->sub)
 * and glosh [K] its GLOSH death; *single and *threshold are
 * gc_hdb_label_prepare's.  w->k_selected holds the selection.
 */
static inline gc_status
gc_hdb_given_select(gc_hdb_work *w, const gc_hdbscan_params *p, double *glosh, int *single,
					double *threshold, gc_error *e)
{
	gc_status	st;

	*single = 0;
	*threshold = 0.0;
	if ((st = gc_hdb_select(w, p, e)) == GC_OK)
		gc_hdb_label_prepare(w, p, w->sub, glosh, single, threshold);
	return st;
}

/*
 * The clusters' numbers in the order of their lowest rows: first [K] is
 * each node's lowest labelled row, n when none; node_label [K] gets the
 * numbers (-1 where none) and *count how many.
 */
static inline gc_status
gc_hdb_given_number(const int64_t *first, int64_t K, int64_t n, int64_t *node_label,
					int64_t *count, gc_cancel_fn cancel, void *carg, gc_error *e)
{
	int64_t		m = 0;
	uint64_t   *keys = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) (2 * K + 1));
	int64_t    *vals = (int64_t *) malloc(sizeof(int64_t) * (size_t) (2 * K + 1));
	int			rc = 0;

	if (keys == NULL || vals == NULL)
	{
		free(keys);
		free(vals);
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's %lld clusters",
							(long long) K);
	}
	for (int64_t k = 0; k < K; k++)
	{
		node_label[k] = -1;
		if (first[k] < n)
		{
			keys[m] = (uint64_t) first[k];
			vals[m] = k;
			m++;
		}
	}
	if (m > 1)
		rc = gc_radix_sort(keys, vals, keys + K, vals + K, m, cancel, carg);
	if (rc == 0)
		for (int64_t t = 0; t < m; t++)
			node_label[vals[t]] = t;
	free(keys);
	free(vals);
	if (rc != 0)
		return gc_hdb_cancel_error(e);
	*count = m;
	return GC_OK;
}

/* Scratch of gc_hdb_condense_rows, of hierarchy size. */
typedef struct gc_hdb_walk
{
	uint32_t   *queue;
	uint32_t   *relabel;
	uint32_t   *sub;
	uint8_t    *ignore;
	int			bad;			/* a row differs from gc_hdb_condense's */
} gc_hdb_walk;

/* Appends a row of the condensed tree. */
static inline void
gc_hdb_row(gc_hdbscan_tree *t, int64_t parent, int64_t child, int64_t row, double lambda,
		   int64_t size)
{
	int64_t		r = t->rows++;

	t->parent[r] = parent;
	t->child[r] = child;
	t->child_row[r] = row;
	t->lambda_val[r] = lambda;
	t->child_size[r] = size;
}

/*
 * The rows under hierarchy node top fall out of cluster node parent at
 * merge m, in the breadth-first order of the subtree (bfs_from_hierarchy),
 * and every node of it is ignored from now on; each must be where
 * gc_hdb_condense let it fall.
 */
static inline void
gc_hdb_fall_out(gc_hdb_work *w, gc_hdb_walk *g, gc_hdbscan_tree *t, uint32_t top,
				int64_t parent, uint32_t m)
{
	int64_t		head = 0,
				tail = 0,
				n = w->n;
	double		lambda = gc_hdb_lambda(w, m);

	g->sub[tail++] = top;
	while (head < tail)
	{
		uint32_t	x = g->sub[head++];

		if (++w->work >= GC_HDB_CANCEL_EVERY)
		{
			w->work = 0;
			if (w->cancel != NULL && w->cancel(w->cancel_arg))
				w->stop = 1;
		}
		g->ignore[x] = 1;
		if (x < n)
		{
			if (w->st[x].fell != m || w->k_num[w->st[x].own] != parent ||
				memcmp(&w->st[x].at.lambda, &lambda, sizeof(double)) != 0)
				g->bad = 1;
			gc_hdb_row(t, parent, -1, x, lambda, 1);
		}
		else
		{
			g->sub[tail++] = w->mg[x - n].left;
			g->sub[tail++] = w->mg[x - n].right;
		}
	}
}

/* A new cluster node from hierarchy node x: the next number, which must be gc_hdb_condense's. */
static inline void
gc_hdb_new_row(gc_hdb_work *w, gc_hdb_walk *g, gc_hdbscan_tree *t, uint32_t x, int64_t parent,
			   double lambda, int64_t size)
{
	int64_t		k = t->nodes++;

	g->relabel[x] = (uint32_t) k;
	if (k >= w->nodes || w->k_parent[k] != parent || w->k_size[k] != size ||
		memcmp(&w->k_birth[k], &lambda, sizeof(double)) != 0)
		g->bad = 1;
	gc_hdb_row(t, parent, k, -1, lambda, size);
}

/*
 * The rows of the condensed tree for gpu_hdbscan_tree: scikit-learn's
 * _condense_tree, breadth first from the root, into t.  Every cluster and
 * every row must come out as gc_hdb_condense placed it; a difference is an
 * internal error.
 */
static inline gc_status
gc_hdb_condense_rows(gc_hdb_work *w, int64_t min_size, gc_hdbscan_tree *t, gc_error *e)
{
	int64_t		n = w->n,
				root = 2 * n - 2,
				head = 0,
				tail = 0;
	gc_hdb_walk g;
	gc_status	st = GC_OK;

	memset(&g, 0, sizeof(g));
	g.queue = (uint32_t *) malloc(sizeof(uint32_t) * (size_t) (2 * n));
	g.relabel = (uint32_t *) malloc(sizeof(uint32_t) * (size_t) (2 * n));
	g.sub = (uint32_t *) malloc(sizeof(uint32_t) * (size_t) (2 * n));
	g.ignore = (uint8_t *) calloc((size_t) (2 * n), 1);
	if (!g.queue || !g.relabel || !g.sub || !g.ignore)
		st = gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's condensed tree");
	t->rows = 0;
	t->nodes = 1;
	if (st == GC_OK)
	{
		g.relabel[root] = 0;
		g.queue[tail++] = (uint32_t) root;
	}
	while (st == GC_OK && head < tail)
	{
		uint32_t	x = g.queue[head++],
					l,
					r;
		int64_t		lc,
					rc,
					k;
		double		lambda;

		if (gc_hdb_cancelled(w->cancel, w->cancel_arg, head))
		{
			st = gc_hdb_cancel_error(e);
			break;
		}
		if (x < n)
			continue;
		l = w->mg[x - n].left;
		r = w->mg[x - n].right;
		g.queue[tail++] = l;
		g.queue[tail++] = r;
		if (g.ignore[x])
			continue;
		lambda = gc_hdb_lambda(w, (uint32_t) (x - n));
		lc = gc_hdb_count(w, l);
		rc = gc_hdb_count(w, r);
		k = g.relabel[x];
		if (lc >= min_size && rc >= min_size)
		{
			gc_hdb_new_row(w, &g, t, l, k, lambda, lc);
			gc_hdb_new_row(w, &g, t, r, k, lambda, rc);
		}
		else if (lc < min_size && rc < min_size)
		{
			gc_hdb_fall_out(w, &g, t, l, k, (uint32_t) (x - n));
			gc_hdb_fall_out(w, &g, t, r, k, (uint32_t) (x - n));
		}
		else if (lc < min_size)
		{
			g.relabel[r] = (uint32_t) k;
			gc_hdb_fall_out(w, &g, t, l, k, (uint32_t) (x - n));
		}
		else
		{
			g.relabel[l] = (uint32_t) k;
			gc_hdb_fall_out(w, &g, t, r, k, (uint32_t) (x - n));
		}
		if (w->stop)
			st = gc_hdb_cancel_error(e);
	}
	if (st == GC_OK && (g.bad || t->nodes != w->nodes || t->rows != n + w->nodes - 1))
		st = gc_error_set(e, GC_ERR_INTERNAL,
						  "HDBSCAN's condensed tree differs from its clusters");
	free(g.queue);
	free(g.relabel);
	free(g.sub);
	free(g.ignore);
	return st;
}

/* Whether the m edges are in the order (w, lo, hi) already (the GPU sorts them). */
typedef struct gc_hdb_order
{
	const gc_hdbscan_edge *mst;
	int64_t		m;
	int64_t		tasks;
	int			unsorted;
} gc_hdb_order;

static inline int
gc_hdb_order_check(void *arg, int64_t t, void *worker)
{
	gc_hdb_order *o = (gc_hdb_order *) arg;
	const gc_hdbscan_edge *a = o->mst;
	int64_t		b,
				e;

	(void) worker;
	gc_hdb_block(o->m, o->tasks, t, &b, &e);
	for (int64_t i = b > 0 ? b : 1; i < e; i++)
		if (!gc_hdbscan_edge_less(a[i - 1].w, a[i - 1].lo, a[i - 1].hi, a[i].w, a[i].lo, a[i].hi))
		{
			o->unsorted = 1;
			break;
		}
	return 0;
}

static inline int
gc_hdb_edges_sorted(const gc_hdb_loops *l, const gc_hdbscan_edge *mst, int64_t m)
{
	gc_hdb_order o;

	o.mst = mst;
	o.m = m;
	o.tasks = gc_hdb_tasks(l, m, 8 * GC_HDB_GRAIN);
	o.unsorted = 0;
	gc_hdb_run(l, o.tasks, gc_hdb_order_check, &o);
	return !o.unsorted;
}

static inline gc_status
gc_hdbscan_finish(const gc_hdbscan_params *p, int64_t n, const double *core,
				  gc_hdbscan_edge *mst, const gc_hdb_merge *merges, const gc_hdb_state *states,
				  gc_hdbscan_result *result,
				  const gc_hdb_threads *thr, gc_cancel_fn cancel, void *cancel_arg, gc_error *e)
{
	gc_hdb_work w;
	gc_status	st;
	size_t		kmax;

	(void) core;
	memset(&w, 0, sizeof(w));
	w.n = n;
	w.mst = mst;
	w.cancel = cancel;
	w.cancel_arg = cancel_arg;
	w.loops.thr = thr;
	w.loops.cancel = cancel;
	w.loops.cancel_arg = cancel_arg;
	result->n_clusters = 0;
	if (result->tree != NULL)
	{
		result->tree->rows = 0;
		result->tree->nodes = 0;
		if (result->tree->capacity < 2 * n)
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN's tree arrays hold %lld rows, %lld needed",
								(long long) result->tree->capacity, (long long) (2 * n));
	}
	if (n <= 0)
		return GC_OK;
	if (n == 1)
	{
		result->cluster[0] = -1;
		if (result->probability != NULL)
		{
			result->probability[0] = 0.0;
			result->outlier_score[0] = 0.0;
		}
		if (result->tree != NULL)
		{
			result->tree->nodes = 1;
			result->tree->node_selected[0] = 0;
			result->tree->node_cluster[0] = -1;
		}
		return GC_OK;
	}
	if (merges == NULL && !gc_hdb_edges_sorted(&w.loops, mst, n - 1))
	{
		gc_hdb_cancel_arg ca = {cancel, cancel_arg};

		if ((st = gc_hdbscan_sort_edges(mst, n - 1, gc_hdb_radix_sort, &ca, e)) != GC_OK)
			return st;
	}

	/*
	 * Clusters: the leaves of the cluster tree hold disjoint sets of at
	 * least min_cluster_size rows and every other cluster splits in two.
	 */
	kmax = (size_t) (p->min_cluster_size >= 2 ? 2 * (n / p->min_cluster_size) + 1 : n);
	w.mg_given = merges != NULL;
	w.mg = w.mg_given ? (gc_hdb_merge *) merges :
		(gc_hdb_merge *) malloc(sizeof(gc_hdb_merge) * (size_t) n);
	w.set = w.mg_given ? NULL : (gc_hdb_set *) malloc(sizeof(gc_hdb_set) * (size_t) n);
	w.st_given = merges != NULL && states != NULL;
	w.st = w.st_given ? (gc_hdb_state *) states :
		(gc_hdb_state *) malloc(sizeof(gc_hdb_state) * (size_t) (2 * n));
	w.k_parent = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_birth = (double *) malloc(sizeof(double) * kmax);
	w.k_size = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_child1 = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_child2 = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_stab = (double *) malloc(sizeof(double) * kmax);
	w.k_death = (double *) malloc(sizeof(double) * kmax);
	w.k_selected = (uint8_t *) malloc(kmax);
	w.k_top = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_key = (uint64_t *) malloc(sizeof(uint64_t) * kmax);
	w.k_order = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.k_num = (int64_t *) malloc(sizeof(int64_t) * kmax);
	w.sub = (int64_t *) malloc(sizeof(int64_t) * kmax);
	if (!w.mg || (!w.mg_given && !w.set) || !w.st || !w.k_parent || !w.k_birth ||
		!w.k_size || !w.k_child1 || !w.k_child2 || !w.k_stab || !w.k_death || !w.k_selected ||
		!w.k_top || !w.k_key || !w.k_order || !w.k_num || !w.sub)
	{
		gc_hdb_free(&w);
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY,
							"out of memory for HDBSCAN's hierarchy of %lld rows (about %lld MB)",
							(long long) n,
							(long long) ((n * 56 + (int64_t) kmax * 97) / 1000000 + 1));
	}
	if ((!w.mg_given && (st = gc_hdb_linkage(&w, e)) != GC_OK) ||
		(st = (w.st_given ? gc_hdb_condense_given(&w, p->min_cluster_size, e) :
			   gc_hdb_condense(&w, p->min_cluster_size, e))) != GC_OK ||
		(st = gc_hdb_number(&w, cancel, cancel_arg, e)) != GC_OK ||
		(st = gc_hdb_select(&w, p, e)) != GC_OK ||
		(st = gc_hdb_label(&w, p, result, e)) != GC_OK)
	{
		gc_hdb_free(&w);
		return st;
	}
	if (result->tree != NULL)
	{
		gc_hdbscan_tree *t = result->tree;

		if ((st = gc_hdb_condense_rows(&w, p->min_cluster_size, t, e)) != GC_OK)
		{
			gc_hdb_free(&w);
			return st;
		}
		for (int64_t k = 0; k < w.nodes; k++)
		{
			t->node_selected[k] = w.k_selected[k];
			t->node_cluster[k] = -1;
		}
		/* a selected node's number is that of its rows */
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		top_node = w.sub[w.k_num[w.st[i].own]];

			if (result->cluster[i] >= 0 && w.k_selected[top_node])
				t->node_cluster[top_node] = result->cluster[i];
		}
	}
	gc_hdb_free(&w);
	return GC_OK;
}

#endif							/* GPUCLUST_HDBSCAN_TREE_H */
