/* kmeans.cu: placeholder until the GPU k-means lands. */
#include "common.cuh"

extern "C" gc_status gcu_kmeans(int32_t device_id, const float *x, int64_t n, int32_t d,
					 const gc_kmeans_params *params, gc_kmeans_result *result,
					 gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	return gc::set_error(GC_ERR_NOT_BUILT, "k-means is not yet available on the GPU");
}
