/*
 * hdbscan.h
 *    HDBSCAN's rules, once for both back ends and the harnesses: the check of
 *    the parameters, the mutual reachability distance, the order of the
 *    minimum spanning tree's edges, and everything after the tree (single
 *    linkage, the condensed tree, stability, EOM or leaf selection, labels,
 *    probabilities and GLOSH outlier scores), which both back ends run on the
 *    host from the tree they computed.
 *
 * Campello, Moulavi & Sander, "Density-based clustering based on
 * hierarchical density estimates" (PAKDD 2013); Campello, Moulavi, Zimek &
 * Sander, "Hierarchical density estimates for data clustering,
 * visualization, and outlier detection" (TKDD 2015) for GLOSH.  The
 * semantics are scikit-learn's HDBSCAN (sklearn.cluster._hdbscan) with one
 * rule scikit-learn leaves to its sort: tied edges are ordered by (weight,
 * lower row, higher row), which makes the minimum spanning tree unique and
 * the answer independent of the machine.
 *
 * Plain C compiled by gcc and nvcc (host code only).
 */
#ifndef GPUCLUST_HDBSCAN_H
#define GPUCLUST_HDBSCAN_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checks.h"
#include "metric.h"
#include "portable.h"

/* One edge of the minimum spanning tree: rows lo < hi, weight w. */
typedef struct gc_hdbscan_edge
{
	double		w;				/* mutual reachability distance */
	int32_t		lo;				/* lower row index */
	int32_t		hi;				/* higher row index */
} gc_hdbscan_edge;

/* The largest input HDBSCAN takes: row indices are int32. */
#define GC_HDBSCAN_MAX_ROWS ((int64_t) INT32_MAX)

/* The mutual reachability distance of rows with core distances ca, cb at distance dist. */
static GC_HD double
gc_hdbscan_mrd(double ca, double cb, double dist)
{
	double		m = ca > cb ? ca : cb;

	return dist > m ? dist : m;
}

/* The total order of edges: weight, then lower row, then higher row. */
static GC_HD int
gc_hdbscan_edge_less(double wa, int32_t loa, int32_t hia, double wb, int32_t lob, int32_t hib)
{
	if (wa != wb)
		return wa < wb;
	if (loa != lob)
		return loa < lob;
	return hia < hib;
}

/* The parameters against the input; GC_OK or an error in the SQL user's words. */
static inline gc_status
gc_check_hdbscan(const gc_hdbscan_params *p, int64_t n, int32_t d, gc_error *e)
{
	gc_status	st;

	if ((st = gc_check_version("gc_hdbscan_params", p->struct_size, sizeof(*p), e)) != GC_OK)
		return st;
	if ((st = gc_check_shape("HDBSCAN", n, d, e)) != GC_OK)
		return st;
	if (p->min_cluster_size < 2)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "min_cluster_size must be at least 2");
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "min_cluster_size is %d.", (int) p->min_cluster_size);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "A cluster of HDBSCAN has at least two rows; use 2 or more.");
	}
	if (p->min_samples < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "min_samples must be at least 1");
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "min_samples is %d.", (int) p->min_samples);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "min_samples counts the row itself; pass NULL to use min_cluster_size.");
	}
	if (n > 0 && p->min_samples > n)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT,
					 "min_samples must not exceed the number of rows");
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "min_samples is %d and the query returned %lld rows.",
						(int) p->min_samples, (long long) n);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Pass a smaller min_samples (NULL means min_cluster_size).");
	}
	if (!(p->cluster_selection_epsilon >= 0.0) || isinf(p->cluster_selection_epsilon))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT,
					 "cluster_selection_epsilon must be a finite number of at least 0");
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "cluster_selection_epsilon is %g.", p->cluster_selection_epsilon);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Pass 0 to select clusters by stability alone.");
	}
	if (p->method != GC_HDBSCAN_EOM && p->method != GC_HDBSCAN_LEAF)
		return gc_error_set(e, GC_ERR_INTERNAL, "HDBSCAN called with selection method %d",
							(int) p->method);
	if (p->max_cluster_size < 0)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "max_cluster_size must be at least 1");
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "max_cluster_size is %lld.", (long long) p->max_cluster_size);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, "Pass NULL for no limit.");
	}
	if (n > GC_HDBSCAN_MAX_ROWS)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "HDBSCAN takes at most %lld rows",
					 (long long) GC_HDBSCAN_MAX_ROWS);
		gc_error_detail(e, GC_ERR_INVALID_ARGUMENT, "The query returned %lld rows.", (long long) n);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, "Cluster a sample or each partition.");
	}
	return gc_check_input("HDBSCAN", GC_F32, p->metric, e);
}

/*
 * Everything after the minimum spanning tree, on the host: sorts mst [n - 1]
 * by gc_hdbscan_edge_less (in place), builds the single-linkage hierarchy,
 * condenses it by min_cluster_size, selects clusters and fills result
 * (cluster, probability, outlier_score, n_clusters, and tree when asked).
 * core [n] are the core distances.  merges, when given, is the hierarchy
 * of mst already sorted (the GPU builds it); NULL: built here, from mst
 * sorted here.  states, when given with merges, is every hierarchy node's
 * place in the condensed tree (the GPU's; gc_hdb_condense's otherwise).  Runs its loops on thr (NULL: the
 * caller's thread; the answer is the same either way) and asks cancel
 * between steps of bounded work.  Returns GC_OK, GC_ERR_CANCELLED,
 * GC_ERR_OUT_OF_MEMORY or GC_ERR_INTERNAL with e filled.
 */
#include "hdbscan_threads.h"

/*
 * Merge m of the single linkage: the hierarchy nodes it joins (rows 0 ..
 * n - 1, merges n .. 2n - 2; left holds the edge's lower row) and their
 * rows, together, so that a walk of the hierarchy finds them in one place.
 */
typedef struct gc_hdb_merge
{
	uint32_t	left;
	uint32_t	right;
	uint32_t	lsize;
	uint32_t	rsize;
} gc_hdb_merge;

/*
 * Per hierarchy node, from the condensation: its cluster (provisional
 * number, see gc_hdb_number) and, for a node that fell out of it, the merge
 * at which it fell and that merge's lambda; for a node that did not fall,
 * its place in scikit-learn's breadth-first walk: depth << 32 | preorder.
 */
typedef struct gc_hdb_state
{
	uint32_t	own;
	uint32_t	fell;			/* merge index, GC_HDB_NONE */
	union
	{
		uint64_t	place;		/* fell == GC_HDB_NONE */
		double		lambda;		/* otherwise */
	}			at;
} gc_hdb_state;

/* Not fallen out (gc_hdb_state.fell). */
#define GC_HDB_NONE UINT32_MAX

static inline gc_status gc_hdbscan_finish(const gc_hdbscan_params *p, int64_t n,
								   const double *core, /* [n] */
								   gc_hdbscan_edge *mst, /* [n - 1] */
								   const gc_hdb_merge *merges, /* [n - 1] or NULL */
								   const gc_hdb_state *states, /* [2 n - 1] or NULL */
								   gc_hdbscan_result *result,
								   const gc_hdb_threads *thr,
								   gc_cancel_fn cancel, void *cancel_arg, gc_error *e);

#include "hdbscan_tree.h"

#endif							/* GPUCLUST_HDBSCAN_H */
