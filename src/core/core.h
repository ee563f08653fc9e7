/*
 * core.h
 *    The CPU back end: the clustering algorithms on a plain float matrix.
 *
 * Only the C standard library is used here, so the core builds and is unit
 * tested without PostgreSQL (test/unit).  Memory comes from malloc and is
 * always freed before returning; errors are returned as a gc_status with a
 * message written into the caller's errbuf; a long loop asks cancel(arg)
 * every few thousand points and returns GC_ERR_CANCELLED when told to stop.
 *
 * Parameters and results are the structs of the GPU boundary
 * (cuda/gpuclust_cuda.h), so both back ends take exactly the same input
 * and must produce the same output.
 */
#ifndef GPUCLUST_CORE_H
#define GPUCLUST_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "gpuclust_cuda.h"

#define GC_ERRBUF_SIZE 512

/* Squared Euclidean distance, accumulated in double in dimension order. */
static inline double
gc_dist2(const float *a, const float *b, int32_t d)
{
	double		s = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		double		t = (double) a[k] - (double) b[k];

		s += t * t;
	}
	return s;
}

/* Writes a printf-style message into errbuf and returns status. */
gc_status	gc_fail(char *errbuf, gc_status status, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 3, 4)))
#endif
			;

/* DBSCAN on the CPU (src/core/dbscan.c). */
gc_status	gc_dbscan_cpu(const float *x,	/* [n, d] row-major */
						  int64_t n, int32_t d,
						  const gc_dbscan_params *params,
						  gc_dbscan_result *result,
						  gc_cancel_fn cancel, void *cancel_arg,
						  char *errbuf /* [GC_ERRBUF_SIZE] */ );

/* k-means on the CPU (src/core/kmeans.c). */
gc_status	gc_kmeans_cpu(const float *x,	/* [n, d] row-major */
						  int64_t n, int32_t d,
						  const gc_kmeans_params *params,
						  gc_kmeans_result *result,
						  gc_cancel_fn cancel, void *cancel_arg,
						  char *errbuf /* [GC_ERRBUF_SIZE] */ );

/* Density peaks on the CPU (src/core/dpeaks.c). */
gc_status	gc_dpeaks_cpu(const float *x,	/* [n, d] row-major */
						  int64_t n, int32_t d,
						  const gc_dpeaks_params *params,
						  gc_dpeaks_result *result,
						  gc_timing *timing,
						  gc_cancel_fn cancel, void *cancel_arg,
						  char *errbuf /* [GC_ERRBUF_SIZE] */ );

#endif							/* GPUCLUST_CORE_H */
