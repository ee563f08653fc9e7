/* kmeans.c: placeholder SQL functions until k-means lands. */
#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpu_kmeans);
PG_FUNCTION_INFO_V1(gpu_kmeans_centroids);

Datum
gpu_kmeans(PG_FUNCTION_ARGS)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("gpu_kmeans is not implemented yet")));
	PG_RETURN_NULL();
}

Datum
gpu_kmeans_centroids(PG_FUNCTION_ARGS)
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("gpu_kmeans_centroids is not implemented yet")));
	PG_RETURN_NULL();
}
