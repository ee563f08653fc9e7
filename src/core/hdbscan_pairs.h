/*
 * hdbscan_pairs.h
 *    The CPU HDBSCAN's core distances and minimum spanning tree on the pair
 *    engine (pair_engine.h), for many features, where the k-d tree of
 *    hdbscan.c prunes nothing.  hdbscan.c chooses between them
 *    (gc_pair_engine_chosen of common/pairs.h) and runs the shared rest.
 */
#ifndef GPUCLUST_HDBSCAN_PAIRS_H
#define GPUCLUST_HDBSCAN_PAIRS_H

#include "core.h"
#include "hdbscan.h"

/*
 * The core distances core [n] (by row) and the minimum spanning tree of
 * the mutual reachability graph mst [n - 1] (unsorted) of x [n, d] of
 * element type dtype: the same numbers, bit for bit, as the tree's search,
 * and the same edges (the unique tree under the order (w, lower row,
 * higher row)).  Sets timing's phases [0] and [1], counts, path and pair
 * fields.  Cosine: the caller passes unit rows.
 */
gc_status	gc_hdbscan_pairs(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
							 const gc_hdbscan_params *p, double *core, gc_hdbscan_edge *mst);

#endif							/* GPUCLUST_HDBSCAN_PAIRS_H */
