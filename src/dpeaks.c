/* dpeaks.c: placeholder SQL function until density peaks lands. */
#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpu_density_peaks);

Datum
gpu_density_peaks(PG_FUNCTION_ARGS)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("gpu_density_peaks is not implemented yet")));
	PG_RETURN_NULL();
}
