/* dpeaks.cu: placeholder until the GPU density peaks lands. */
#include "common.cuh"

extern "C" gc_status gcu_density_peaks(int32_t device_id, const float *x, int64_t n, int32_t d,
							const gc_dpeaks_params *params, gc_dpeaks_result *result,
							gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	return gc::set_error(GC_ERR_NOT_BUILT, "density peaks is not yet available on the GPU");
}
