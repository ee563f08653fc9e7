/*
 * dbscan.h
 *    DBSCAN in the glue: one run of it (dbscan.c), shared with the window
 *    functions.
 */
#ifndef GPUCLUST_DBSCAN_H
#define GPUCLUST_DBSCAN_H

#include "gpuclust.h"
#include "params.h"

typedef struct GcDbscanJob
{
	gc_dbscan_params params;
	gc_dbscan_result result;
} GcDbscanJob;

extern gc_status GcRunDbscan(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern const GcAlgorithm GcDbscan;

#endif							/* GPUCLUST_DBSCAN_H */
