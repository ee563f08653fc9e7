/*
 * hdbscan_tree.h
 *    gc_hdbscan_finish of common/hdbscan.h: from the minimum spanning tree to
 *    the answer, on the host, the same code for both back ends.  Included by
 *    hdbscan.h only.
 *
 * Every step is scikit-learn's (sklearn/cluster/_hdbscan/_linkage.pyx
 * make_single_linkage, _tree.pyx _condense_tree, _compute_stability,
 * _get_clusters, _do_labelling, get_probabilities), in the same order of
 * rows and of floating-point operations, so that the answer is the one
 * tree_to_labels gives for the same sorted tree; GLOSH is the hdbscan
 * library's outlier_scores.  Where scikit-learn walks Python sets or
 * repeats a breadth-first search per node, the walk here is linear and
 * gives the same result; the two places where scikit-learn's result
 * depends on Python's set order or fails (see gc_hdb_epsilon_search and the
 * single-cluster rule) are decided as the comments there say.
 *
 * Nodes of the single-linkage hierarchy: rows 0 .. n-1, merges n .. 2n-2
 * (merge i is node n + i, the root 2n-2).  Cluster nodes of the condensed
 * tree: 0 (the root) .. K-1, in the order the condensation makes them.
 */
#ifndef GPUCLUST_HDBSCAN_TREE_H
#define GPUCLUST_HDBSCAN_TREE_H

#include "sort.h"

/* Items between two questions to the cancel callback. */
#define GC_HDB_CANCEL_EVERY ((int64_t) 1 << 16)

/* The working arrays of one gc_hdbscan_finish. */
typedef struct gc_hdb_work
{
	int64_t		n;
	/* single linkage: merge i joins left[i] and right[i] at dist[i], size[i] rows */
	int64_t    *left;
	int64_t    *right;
	double	   *dist;
	int64_t    *size;
	int64_t    *uf;				/* [2n - 1] union-find parents, -1 at a top */
	/* condensed tree rows */
	int64_t    *c_parent;		/* cluster node */
	int64_t    *c_child;		/* cluster node (>= 0) or -1 - row */
	double	   *c_lambda;
	int64_t    *c_size;
	int64_t		rows;
	/* per cluster node */
	int64_t		nodes;
	int64_t    *k_parent;		/* parent cluster node, -1 for the root */
	double	   *k_birth;		/* lambda at which it was made (0 for the root) */
	int64_t    *k_size;			/* its cluster_size */
	int64_t    *k_child1;		/* first and second child cluster, -1 when none */
	int64_t    *k_child2;
	double	   *k_stab;
	uint8_t    *k_selected;
	int64_t    *k_top;			/* scratch */
	/* scratch of hierarchy size */
	int64_t    *queue;
	int64_t    *relabel;
	uint8_t    *ignore;
	int64_t    *sub;			/* breadth-first search of one subtree */
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

static inline void
gc_hdb_free(gc_hdb_work *w)
{
	free(w->left);
	free(w->right);
	free(w->dist);
	free(w->size);
	free(w->uf);
	free(w->c_parent);
	free(w->c_child);
	free(w->c_lambda);
	free(w->c_size);
	free(w->k_parent);
	free(w->k_birth);
	free(w->k_size);
	free(w->k_child1);
	free(w->k_child2);
	free(w->k_stab);
	free(w->k_selected);
	free(w->k_top);
	free(w->queue);
	free(w->relabel);
	free(w->ignore);
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

/* The representative of row x among the rows merged so far (union-find with path halving). */
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
 * Single linkage over the sorted tree (make_single_linkage): merge i is
 * node n + i, joining the hierarchy nodes that hold its two rows.  The
 * union-find runs over the rows (union by size, path halving), with the
 * hierarchy node of each set at its representative (w->uf[n + r]); the
 * nodes are those of scikit-learn's UnionFind.fast_find.
 */
static inline gc_status
gc_hdb_linkage(gc_hdb_work *w, const gc_hdbscan_edge *mst, gc_cancel_fn cancel, void *carg,
			   gc_error *e)
{
	int64_t		n = w->n;
	int64_t    *uf = w->uf,		/* [n] rows' parents */
			   *node = w->uf + n;	/* [n] per representative: its hierarchy node */

	for (int64_t i = 0; i < n; i++)
	{
		uf[i] = i;
		node[i] = i;
	}
	for (int64_t i = 0; i < n - 1; i++)
	{
		int64_t		ra,
					rb,
					a,
					b,
					sa,
					sb;

		if (gc_hdb_cancelled(cancel, carg, i))
			return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
		ra = gc_hdb_find(uf, mst[i].lo);
		rb = gc_hdb_find(uf, mst[i].hi);
		if (ra == rb)
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN's spanning tree has a cycle at edge %lld, please report a bug",
								(long long) i);
		a = node[ra];
		b = node[rb];
		sa = a < n ? 1 : w->size[a - n];
		sb = b < n ? 1 : w->size[b - n];
		w->left[i] = a;
		w->right[i] = b;
		w->dist[i] = mst[i].w;
		w->size[i] = sa + sb;
		/* the smaller set under the larger */
		if (sa < sb)
		{
			uf[ra] = rb;
			node[rb] = n + i;
		}
		else
		{
			uf[rb] = ra;
			node[ra] = n + i;
		}
	}
	return GC_OK;
}

/* Rows under hierarchy node x. */
static inline int64_t
gc_hdb_count(const gc_hdb_work *w, int64_t x)
{
	return x < w->n ? 1 : w->size[x - w->n];
}

/* Appends a row of the condensed tree. */
static inline void
gc_hdb_row(gc_hdb_work *w, int64_t parent, int64_t child, double lambda, int64_t size)
{
	int64_t		r = w->rows++;

	w->c_parent[r] = parent;
	w->c_child[r] = child;
	w->c_lambda[r] = lambda;
	w->c_size[r] = size;
}

/*
 * The rows under hierarchy node top fall out of cluster node parent at
 * lambda, in the breadth-first order of the subtree (bfs_from_hierarchy),
 * and every node of it is ignored from now on.
 */
static inline void
gc_hdb_fall_out(gc_hdb_work *w, int64_t top, int64_t parent, double lambda)
{
	int64_t		head = 0,
				tail = 0,
				n = w->n;

	w->sub[tail++] = top;
	while (head < tail)
	{
		int64_t		x = w->sub[head++];

		if (++w->work >= GC_HDB_CANCEL_EVERY)
		{
			w->work = 0;
			if (w->cancel != NULL && w->cancel(w->cancel_arg))
				w->stop = 1;
		}
		w->ignore[x] = 1;
		if (x < n)
			gc_hdb_row(w, parent, -1 - x, lambda, 1);
		else
		{
			w->sub[tail++] = w->left[x - n];
			w->sub[tail++] = w->right[x - n];
		}
	}
}

/* A new cluster node made from hierarchy node x, child of parent at lambda. */
static inline int64_t
gc_hdb_new_node(gc_hdb_work *w, int64_t x, int64_t parent, double lambda, int64_t size)
{
	int64_t		k = w->nodes++;

	w->relabel[x] = k;
	w->k_parent[k] = parent;
	w->k_birth[k] = lambda;
	w->k_size[k] = size;
	w->k_child1[k] = -1;
	w->k_child2[k] = -1;
	if (w->k_child1[parent] < 0)
		w->k_child1[parent] = k;
	else
		w->k_child2[parent] = k;
	gc_hdb_row(w, parent, k, lambda, size);
	return k;
}

/* The condensed tree (_condense_tree), breadth first from the root. */
static inline gc_status
gc_hdb_condense(gc_hdb_work *w, int64_t min_size, gc_cancel_fn cancel, void *carg, gc_error *e)
{
	int64_t		n = w->n,
				root = 2 * n - 2,
				head = 0,
				tail = 0;

	memset(w->ignore, 0, (size_t) (2 * n - 1));
	w->rows = 0;
	w->nodes = 1;
	w->relabel[root] = 0;
	w->k_parent[0] = -1;
	w->k_birth[0] = 0.0;
	w->k_size[0] = n;
	w->k_child1[0] = -1;
	w->k_child2[0] = -1;
	w->queue[tail++] = root;
	while (head < tail)
	{
		int64_t		x = w->queue[head++],
					l,
					r,
					lc,
					rc,
					k;
		double		lambda;

		if (gc_hdb_cancelled(cancel, carg, head))
			return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
		if (x < n)
			continue;
		l = w->left[x - n];
		r = w->right[x - n];
		w->queue[tail++] = l;
		w->queue[tail++] = r;
		if (w->ignore[x])
			continue;
		lambda = w->dist[x - n] > 0.0 ? 1.0 / w->dist[x - n] : INFINITY;
		lc = gc_hdb_count(w, l);
		rc = gc_hdb_count(w, r);
		k = w->relabel[x];
		if (lc >= min_size && rc >= min_size)
		{
			gc_hdb_new_node(w, l, k, lambda, lc);
			gc_hdb_new_node(w, r, k, lambda, rc);
		}
		else if (lc < min_size && rc < min_size)
		{
			gc_hdb_fall_out(w, l, k, lambda);
			gc_hdb_fall_out(w, r, k, lambda);
		}
		else if (lc < min_size)
		{
			w->relabel[r] = k;
			gc_hdb_fall_out(w, l, k, lambda);
		}
		else
		{
			w->relabel[l] = k;
			gc_hdb_fall_out(w, r, k, lambda);
		}
		if (w->stop)
			return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
	}
	return GC_OK;
}

/* Stability of each cluster node (_compute_stability), summed in row order. */
static inline void
gc_hdb_stability(gc_hdb_work *w)
{
	for (int64_t k = 0; k < w->nodes; k++)
		w->k_stab[k] = 0.0;
	for (int64_t r = 0; r < w->rows; r++)
	{
		int64_t		pk = w->c_parent[r];

		w->k_stab[pk] += (w->c_lambda[r] - w->k_birth[pk]) * (double) w->c_size[r];
	}
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
 * outlier_scores).  Clusters are numbered by their lowest row.
 */
static inline gc_status
gc_hdb_label(gc_hdb_work *w, const gc_hdbscan_params *p, gc_hdbscan_result *res, gc_error *e)
{
	int64_t		K = w->nodes,
				n = w->n,
				chosen = 0,
				next_id = 0;
	double	   *death_sk = (double *) malloc(sizeof(double) * (size_t) K * 2),
			   *death_glosh;
	double		root_max = -INFINITY;
	int64_t    *node_label = w->k_top;	/* per node: its cluster number, -1 */
	int64_t    *row_top = w->relabel;	/* per row: the top of its component */
	int64_t    *top = w->queue;	/* per node: the top of its component */
	int			single;

	if (death_sk == NULL)
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY, "out of memory for HDBSCAN's cluster tree");
	death_glosh = death_sk + K;

	for (int64_t k = 0; k < K; k++)
		chosen += w->k_selected[k];
	single = chosen == 1 && w->k_selected[0] && p->allow_single_cluster;

	/* the top of each node's component: itself when chosen, else its parent's */
	for (int64_t k = 0; k < K; k++)
		top[k] = (k == 0 || w->k_selected[k]) ? k : top[w->k_parent[k]];
	for (int64_t r = 0; r < w->rows; r++)
	{
		if (w->c_parent[r] == 0)
			root_max = w->c_lambda[r] > root_max ? w->c_lambda[r] : root_max;
		if (w->c_child[r] < 0)
			row_top[-1 - w->c_child[r]] = r;	/* the row of each point */
	}

	/* cluster numbers by the lowest row of each cluster */
	for (int64_t k = 0; k < K; k++)
		node_label[k] = -1;
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		r = row_top[i],
					t = top[w->c_parent[r]];
		int			lab = 0;

		if (gc_hdb_cancelled(w->cancel, w->cancel_arg, i))
		{
			free(death_sk);
			return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
		}

		if (t != 0)
			lab = 1;
		else if (single)
		{
			double		threshold = p->cluster_selection_epsilon != 0.0 ?
				1.0 / p->cluster_selection_epsilon : root_max;

			lab = w->c_lambda[r] >= threshold;
		}
		if (lab && t != 0 && !w->k_selected[t])
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN labelled a row by an unselected cluster, please report a bug");
		if (!lab)
			res->cluster[i] = -1;
		else
		{
			if (node_label[t] < 0)
				node_label[t] = next_id++;
			res->cluster[i] = (int32_t) node_label[t];
		}
	}
	res->n_clusters = next_id;

	/*
	 * scikit-learn's deaths (max_lambdas): the largest lambda of the last
	 * run of consecutive rows of each parent.
	 */
	for (int64_t k = 0; k < K; k++)
		death_sk[k] = 0.0;
	{
		int64_t		cur = w->c_parent[0];
		double		mx = w->c_lambda[0];

		for (int64_t r = 1; r < w->rows; r++)
		{
			if (w->c_parent[r] == cur)
				mx = mx > w->c_lambda[r] ? mx : w->c_lambda[r];
			else
			{
				death_sk[cur] = mx;
				cur = w->c_parent[r];
				mx = w->c_lambda[r];
			}
		}
		death_sk[cur] = mx;
	}
	/* the hdbscan library's: the largest lambda of each parent, then of each subtree */
	for (int64_t k = 0; k < K; k++)
		death_glosh[k] = 0.0;
	for (int64_t r = 0; r < w->rows; r++)
	{
		int64_t		pk = w->c_parent[r];

		if (w->c_lambda[r] > death_glosh[pk])
			death_glosh[pk] = w->c_lambda[r];
	}
	for (int64_t r = w->rows - 1; r >= 0; r--)
	{
		int64_t		c = w->c_child[r],
					pk = w->c_parent[r];

		if (c >= 0 && death_glosh[c] > death_glosh[pk])
			death_glosh[pk] = death_glosh[c];
	}

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		r = row_top[i],
					pk = w->c_parent[r];
		double		lam = w->c_lambda[r],
					mx;

		if (gc_hdb_cancelled(w->cancel, w->cancel_arg, i))
		{
			free(death_sk);
			return gc_error_set(e, GC_ERR_CANCELLED, "canceling statement due to user request");
		}

		/* probability */
		if (res->cluster[i] < 0)
			res->probability[i] = 0.0;
		else
		{
			mx = death_sk[top[pk]];
			if (mx == 0.0 || isinf(lam))
				res->probability[i] = 1.0;
			else
				res->probability[i] = (lam < mx ? lam : mx) / mx;
		}
		/* GLOSH; where the library divides infinity by infinity, the limit 1 */
		mx = death_glosh[pk];
		if (mx == 0.0 || !isfinite(lam))
			res->outlier_score[i] = 0.0;
		else if (isinf(mx))
			res->outlier_score[i] = 1.0;
		else
			res->outlier_score[i] = (mx - lam) / mx;
	}

	free(death_sk);
	return GC_OK;
}

static inline gc_status
gc_hdbscan_finish(const gc_hdbscan_params *p, int64_t n, const double *core,
				  gc_hdbscan_edge *mst, gc_hdbscan_result *result,
				  gc_cancel_fn cancel, void *cancel_arg, gc_error *e)
{
	gc_hdb_work w;
	gc_status	st;
	size_t		h;

	(void) core;
	memset(&w, 0, sizeof(w));
	w.n = n;
	w.cancel = cancel;
	w.cancel_arg = cancel_arg;
	result->n_clusters = 0;
	if (result->tree != NULL)
	{
		result->tree->rows = 0;
		result->tree->nodes = 0;
		if (result->tree->capacity < 2 * n)
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN's tree arrays hold %lld rows, %lld needed, please report a bug",
								(long long) result->tree->capacity, (long long) (2 * n));
	}
	if (n <= 0)
		return GC_OK;
	if (n == 1)
	{
		result->cluster[0] = -1;
		result->probability[0] = 0.0;
		result->outlier_score[0] = 0.0;
		if (result->tree != NULL)
		{
			result->tree->nodes = 1;
			result->tree->node_selected[0] = 0;
			result->tree->node_cluster[0] = -1;
		}
		return GC_OK;
	}
	{
		gc_hdb_cancel_arg ca = {cancel, cancel_arg};

		if ((st = gc_hdbscan_sort_edges(mst, n - 1, gc_hdb_radix_sort, &ca, e)) != GC_OK)
			return st;
	}

	h = (size_t) (2 * n);
	w.left = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.right = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.dist = (double *) malloc(sizeof(double) * (size_t) n);
	w.size = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.uf = (int64_t *) malloc(sizeof(int64_t) * h);
	w.c_parent = (int64_t *) malloc(sizeof(int64_t) * h);
	w.c_child = (int64_t *) malloc(sizeof(int64_t) * h);
	w.c_lambda = (double *) malloc(sizeof(double) * h);
	w.c_size = (int64_t *) malloc(sizeof(int64_t) * h);
	w.k_parent = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.k_birth = (double *) malloc(sizeof(double) * (size_t) n);
	w.k_size = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.k_child1 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.k_child2 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.k_stab = (double *) malloc(sizeof(double) * (size_t) n);
	w.k_selected = (uint8_t *) malloc((size_t) n);
	w.k_top = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	w.queue = (int64_t *) malloc(sizeof(int64_t) * h);
	w.relabel = (int64_t *) malloc(sizeof(int64_t) * h);
	w.ignore = (uint8_t *) malloc(h);
	w.sub = (int64_t *) malloc(sizeof(int64_t) * h);
	if (!w.left || !w.right || !w.dist || !w.size || !w.uf || !w.c_parent || !w.c_child ||
		!w.c_lambda || !w.c_size || !w.k_parent || !w.k_birth || !w.k_size || !w.k_child1 ||
		!w.k_child2 || !w.k_stab || !w.k_selected || !w.k_top || !w.queue || !w.relabel ||
		!w.ignore || !w.sub)
	{
		gc_hdb_free(&w);
		return gc_error_set(e, GC_ERR_OUT_OF_MEMORY,
							"out of memory for HDBSCAN's hierarchy of %lld rows (about %lld MB)",
							(long long) n, (long long) (n * 180 / 1000000 + 1));
	}
	if ((st = gc_hdb_linkage(&w, mst, cancel, cancel_arg, e)) != GC_OK ||
		(st = gc_hdb_condense(&w, p->min_cluster_size, cancel, cancel_arg, e)) != GC_OK)
	{
		gc_hdb_free(&w);
		return st;
	}
	gc_hdb_stability(&w);
	if ((st = gc_hdb_select(&w, p, e)) != GC_OK ||
		(st = gc_hdb_label(&w, p, result, e)) != GC_OK)
	{
		gc_hdb_free(&w);
		return st;
	}
	if (result->tree != NULL)
	{
		gc_hdbscan_tree *t = result->tree;

		for (int64_t r = 0; r < w.rows; r++)
		{
			t->parent[r] = w.c_parent[r];
			t->child[r] = w.c_child[r] >= 0 ? w.c_child[r] : -1;
			t->child_row[r] = w.c_child[r] >= 0 ? -1 : -1 - w.c_child[r];
			t->lambda_val[r] = w.c_lambda[r];
			t->child_size[r] = w.c_size[r];
		}
		t->rows = w.rows;
		t->nodes = w.nodes;
		for (int64_t k = 0; k < w.nodes; k++)
		{
			t->node_selected[k] = w.k_selected[k];
			t->node_cluster[k] = -1;
		}
		/* a selected node's number is that of its rows */
		for (int64_t r = 0; r < w.rows; r++)
		{
			int64_t		c = w.c_child[r];

			if (c < 0)
			{
				int64_t		i = -1 - c;
				int64_t		t_node = w.queue[w.c_parent[r]];

				if (result->cluster[i] >= 0 && w.k_selected[t_node])
					t->node_cluster[t_node] = result->cluster[i];
			}
		}
	}
	gc_hdb_free(&w);
	return GC_OK;
}

#endif							/* GPUCLUST_HDBSCAN_TREE_H */
