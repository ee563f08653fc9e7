/*
 * hdbscan_tree.h
 *    gc_hdbscan_finish of common/hdbscan.h: single linkage, the condensed
 *    tree, selection, labels, probabilities and GLOSH.  Included by
 *    hdbscan.h only.
 */
#ifndef GPUCLUST_HDBSCAN_TREE_H
#define GPUCLUST_HDBSCAN_TREE_H

static inline gc_status
gc_hdbscan_finish(const gc_hdbscan_params *p, int64_t n, const double *core,
				  gc_hdbscan_edge *mst, gc_hdbscan_result *result,
				  gc_cancel_fn cancel, void *cancel_arg, gc_error *e)
{
	(void) p; (void) n; (void) core; (void) mst; (void) result; (void) cancel; (void) cancel_arg;
	return gc_error_set(e, GC_ERR_INTERNAL, "HDBSCAN's tree is not written yet");
}

#endif							/* GPUCLUST_HDBSCAN_TREE_H */
