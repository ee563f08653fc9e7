/* dpeaks.c: placeholder until the CPU density peaks lands. */
#include "core.h"

gc_status
gc_dpeaks_cpu(const float *x, int64_t n, int32_t d, const gc_dpeaks_params *params,
			  gc_dpeaks_result *result, gc_timing *timing,
			  gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	return gc_fail(errbuf, GC_ERR_INTERNAL, "density peaks is not implemented yet");
}
