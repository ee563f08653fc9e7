/*
 * hdbscan_sql.h
 *    The HDBSCAN module of the glue (hdbscan.c): the arguments shared by
 *    gpu_hdbscan, gpu_hdbscan_tree and the window function
 *    gpu_cluster_hdbscan (window.c), and the run on a back end.
 */
#ifndef GPUCLUST_HDBSCAN_SQL_H
#define GPUCLUST_HDBSCAN_SQL_H

#include "gpuclust.h"
#include "hdbscan.h"

/* The arguments after the query or feature, in the order of the SQL functions. */
#define GC_HDB_MIN_CLUSTER_SIZE	0
#define GC_HDB_MIN_SAMPLES		1
#define GC_HDB_EPSILON			2
#define GC_HDB_METHOD			3
#define GC_HDB_ALLOW_SINGLE		4
#define GC_HDB_MAX_CLUSTER_SIZE	5
#define GC_HDB_METRIC			6
#define GC_HDB_DEVICE			7
#define GC_HDB_NARGS			8

typedef struct GcHdbscanArgs
{
	bool		isnull[GC_HDB_NARGS];
	Datum		value[GC_HDB_NARGS];
} GcHdbscanArgs;

typedef struct GcHdbscanJob
{
	gc_hdbscan_params params;
	gc_hdbscan_result result;
	bool		min_samples_given;	/* false: min_samples follows min_cluster_size */
} GcHdbscanJob;

extern const GcAlgorithm GcHdbscan;

/* The parameters from the arguments (checked but for the number of rows). */
extern void GcHdbscanParams(const GcHdbscanArgs *args, GcHdbscanJob *job);

/* Runs HDBSCAN on a back end (a GcRunFn). */
extern gc_status GcRunHdbscan(const gc_backend_api *api, const gc_exec *exec,
							  const GcInput *in, void *job);

/* The timing NOTICE's own fields. */
extern void GcHdbscanExtra(const GcCall *call, const GcHdbscanJob *job, char *extra, size_t size);

#endif							/* GPUCLUST_HDBSCAN_SQL_H */
