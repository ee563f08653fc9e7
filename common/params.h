/*
 * params.h
 *    The defaults of every algorithm's parameters, in one place: each
 *    gc_<algorithm>_params_init() fills a params struct with the values the
 *    SQL functions give an argument that is left out or NULL, as cuVS's
 *    cuvsKMeansParamsCreate does.  The glue starts from them and overrides
 *    what the caller passed; the harnesses and tests start from them too.
 *    The pg_regress test "defaults" compares the DEFAULT clauses of the SQL
 *    functions with them (through gpuclust_defaults()).
 *
 * Plain C, for gcc and nvcc.
 */
#ifndef GPUCLUST_PARAMS_H
#define GPUCLUST_PARAMS_H

#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "dpeaks_common.h"

/* k-means: max_iter, tol (relative to the mean feature variance), seed, n_init */
#define GC_KMEANS_DEFAULT_MAX_ITER	300
#define GC_KMEANS_DEFAULT_TOL		1e-4
#define GC_KMEANS_DEFAULT_SEED		0
#define GC_KMEANS_DEFAULT_N_INIT	1
/* density peaks: the fraction of pairs within dc when dc is derived */
#define GC_DPEAKS_DEFAULT_NEIGHBOR_RATE 0.02

/* HDBSCAN: min_cluster_size; min_samples NULL means min_cluster_size */
#define GC_HDBSCAN_DEFAULT_MIN_CLUSTER_SIZE 5

/* DBSCAN: eps and min_pts have no default; the Euclidean metric. */
static inline void
gc_dbscan_params_init(gc_dbscan_params *p)
{
	memset(p, 0, sizeof(*p));
	p->struct_size = sizeof(*p);
	p->metric = GC_METRIC_EUCLIDEAN;
}

/* k-means: k has no default; greedy k-means++, FP32 products, Euclidean. */
static inline void
gc_kmeans_params_init(gc_kmeans_params *p)
{
	memset(p, 0, sizeof(*p));
	p->struct_size = sizeof(*p);
	p->max_iter = GC_KMEANS_DEFAULT_MAX_ITER;
	p->tol = GC_KMEANS_DEFAULT_TOL;
	p->seed = GC_KMEANS_DEFAULT_SEED;
	p->init = GC_KMEANS_INIT_PLUSPLUS;
	p->initial_centroids = NULL;
	p->precision = GC_PRECISION_FP32;
	p->n_init = GC_KMEANS_DEFAULT_N_INIT;
	p->metric = GC_METRIC_EUCLIDEAN;
}

/*
 * Density peaks: dc derived from neighbor_rate, the Gaussian kernel, the
 * dc sample's fixed seed, Euclidean; n_clusters or the thresholds have no
 * default (one of them must be given).
 */
static inline void
gc_dpeaks_params_init(gc_dpeaks_params *p)
{
	memset(p, 0, sizeof(*p));
	p->struct_size = sizeof(*p);
	p->derive_dc = 1;
	p->neighbor_rate = GC_DPEAKS_DEFAULT_NEIGHBOR_RATE;
	p->kernel = GC_DP_KERNEL_GAUSSIAN;
	p->seed = GC_DP_DEFAULT_SEED;
	p->metric = GC_METRIC_EUCLIDEAN;
}

/*
 * HDBSCAN: min_cluster_size 5 and min_samples the same, no selection
 * epsilon, excess of mass, no single cluster, no size limit, Euclidean.
 */
static inline void
gc_hdbscan_params_init(gc_hdbscan_params *p)
{
	memset(p, 0, sizeof(*p));
	p->struct_size = sizeof(*p);
	p->min_cluster_size = GC_HDBSCAN_DEFAULT_MIN_CLUSTER_SIZE;
	p->min_samples = GC_HDBSCAN_DEFAULT_MIN_CLUSTER_SIZE;
	p->cluster_selection_epsilon = 0.0;
	p->method = GC_HDBSCAN_EOM;
	p->allow_single_cluster = 0;
	p->max_cluster_size = 0;
	p->metric = GC_METRIC_EUCLIDEAN;
}

#endif							/* GPUCLUST_PARAMS_H */
