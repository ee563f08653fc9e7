/* kmeans.c: placeholder until the CPU k-means lands. */
#include "core.h"

gc_status
gc_kmeans_cpu(const float *x, int64_t n, int32_t d, const gc_kmeans_params *params,
			  gc_kmeans_result *result, gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	return gc_fail(errbuf, GC_ERR_INTERNAL, "k-means is not implemented yet");
}
