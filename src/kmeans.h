/*
 * kmeans.h
 *    k-means in the glue: one run of it, its defaults, its init argument and
 *    its setting gpuclust.kmeans_precision (kmeans.c).
 */
#ifndef GPUCLUST_KMEANS_H
#define GPUCLUST_KMEANS_H

#include "gpuclust.h"
#include "params.h"

typedef struct GcKmeansJob
{
	gc_kmeans_params params;
	gc_kmeans_result result;
} GcKmeansJob;

extern gc_status GcRunKmeans(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern const GcAlgorithm GcKmeans;

/* One k-means assignment (gpu_kmeans_assign; the distributed fit's searches). */
typedef struct GcKmeansAssignJob
{
	gc_kmeans_assign_params params;
	gc_kmeans_assign_result result;
} GcKmeansAssignJob;

extern gc_status GcRunKmeansAssign(const gc_backend_api *api, const gc_exec *exec,
								   const GcInput *in, void *job);
extern const GcAlgorithm GcKmeansAssign;

/* The value of k-means' init argument (kmeans.c). */
extern gc_kmeans_init GcKmeansInitFromText(text *arg);

extern int	gc_kmeans_precision_guc;	/* gc_precision */

/* Defines gpuclust.kmeans_precision. */
extern void GcKmeansDefineGucs(void);
extern void GcKmeansDistDefineGucs(void);	/* kmeans_dist.c */

#endif							/* GPUCLUST_KMEANS_H */
