/*
 * hdbscan_linkage.h
 *    The single-linkage hierarchy of gc_hdbscan_finish (make_single_linkage
 *    of scikit-learn) from the sorted spanning tree.  Included by
 *    hdbscan_tree.h only.
 *
 * Kruskal's walk in the order of the edges, on the caller's thread.  Cut
 * into layers by rank and merged per connected component on threads, it
 * was slower on the 1M blobs of bench/hdbscan_bench.sh (35 to 64 ms on two
 * threads against 13 ms on one): one component holds most of the edges of
 * blobs that touch, and the threads share the cache lines of the
 * union-find.  Boruvka rounds over the tree (the method the GPU back end
 * runs on the device, cuda/hdbscan_link.cu, in about 3 ms at 1M rows) took
 * 66 to 103 ms on 4 to 16 host threads of the H100 machine at 1M rows,
 * against 45 ms for this walk.
 */
#ifndef GPUCLUST_HDBSCAN_LINKAGE_H
#define GPUCLUST_HDBSCAN_LINKAGE_H


/* The representative of row x among the rows merged so far (path halving). */
static inline uint32_t
gc_hdb_set_find(gc_hdb_set *s, uint32_t x)
{
	while (s[x].parent != x)
	{
		s[x].parent = s[s[x].parent].parent;
		x = s[x].parent;
	}
	return x;
}

/*
 * Merge m: joins the hierarchy nodes that hold its two rows (left: the
 * lower row's) into node n + m; the union-find runs over the rows (union
 * by size, path halving) and keeps each set's hierarchy node and size at
 * its representative, the nodes of scikit-learn's UnionFind.fast_find.
 * Returns -1 when both rows are in one set already (a cycle).
 */
static inline int
gc_hdb_link_edge(gc_hdb_work *w, int64_t m)
{
	gc_hdb_set *s = w->set;
	uint32_t	ra = gc_hdb_set_find(s, (uint32_t) w->mst[m].lo),
				rb = gc_hdb_set_find(s, (uint32_t) w->mst[m].hi),
				sa,
				sb;

	if (ra == rb)
		return -1;
	sa = s[ra].size;
	sb = s[rb].size;
	w->mg[m].left = s[ra].node;
	w->mg[m].right = s[rb].node;
	w->mg[m].lsize = sa;
	w->mg[m].rsize = sb;
	/* the smaller set under the larger */
	if (sa < sb)
	{
		s[ra].parent = rb;
		s[rb].node = (uint32_t) (w->n + m);
		s[rb].size = sa + sb;
	}
	else
	{
		s[rb].parent = ra;
		s[ra].node = (uint32_t) (w->n + m);
		s[ra].size = sa + sb;
	}
	return 0;
}

/*
 * The hierarchy: left, right and their rows for every merge, in the order
 * of the edges, on the caller's thread; the rows of the edges a few merges
 * ahead are fetched early (the walk is bound by memory latency).
 */
static inline gc_status
gc_hdb_linkage(gc_hdb_work *w, gc_error *e)
{
	int64_t		n = w->n,
				count = 0;

	for (int64_t i = 0; i < n; i++)
	{
		w->set[i].parent = (uint32_t) i;
		w->set[i].node = (uint32_t) i;
		w->set[i].size = 1;
	}
	for (int64_t m = 0; m < n - 1; m++)
	{
		if (gc_hdb_poll(&w->loops, NULL, &count))
			return gc_hdb_cancel_error(e);
		if (m + GC_HDB_PREFETCH < n - 1)
		{
			GC_PREFETCH(&w->set[w->mst[m + GC_HDB_PREFETCH].lo]);
			GC_PREFETCH(&w->set[w->mst[m + GC_HDB_PREFETCH].hi]);
		}
		if (gc_hdb_link_edge(w, m) != 0)
			return gc_error_set(e, GC_ERR_INTERNAL,
								"HDBSCAN's spanning tree has a cycle at edge %lld",
								(long long) m);
	}
	return GC_OK;
}

/*
 * For checks: the merges of the sorted mst [n - 1] against given ones, by
 * the walk above; the number that differ, or -1 when out of memory.
 */
static inline int64_t
gc_hdbscan_merges_differ(int64_t n, const gc_hdbscan_edge *mst, const gc_hdb_merge *merges)
{
	gc_hdb_work w;
	gc_error	e;
	int64_t		bad = 0;

	memset(&w, 0, sizeof(w));
	w.n = n;
	w.mst = mst;
	w.mg = (gc_hdb_merge *) malloc(sizeof(gc_hdb_merge) * (size_t) (n > 1 ? n - 1 : 1));
	w.set = (gc_hdb_set *) malloc(sizeof(gc_hdb_set) * (size_t) n);
	if (w.mg == NULL || w.set == NULL || gc_hdb_linkage(&w, &e) != GC_OK)
		bad = -1;
	for (int64_t m = 0; bad >= 0 && m < n - 1; m++)
		bad += memcmp(&w.mg[m], &merges[m], sizeof(gc_hdb_merge)) != 0;
	free(w.mg);
	free(w.set);
	return bad;
}

#endif							/* GPUCLUST_HDBSCAN_LINKAGE_H */
