/* dbscan.cu: placeholder until the GPU DBSCAN lands. */
#include "common.cuh"

extern "C" gc_status gcu_dbscan(int32_t device_id, const float *x, int64_t n, int32_t d,
					 const gc_dbscan_params *params, gc_dbscan_result *result,
					 gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	return gc::set_error(GC_ERR_NOT_BUILT, "DBSCAN is not yet available on the GPU");
}
