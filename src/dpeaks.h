/*
 * dpeaks.h
 *    Density peaks in the glue: one run of it and its arguments (dpeaks.c).
 */
#ifndef GPUCLUST_DPEAKS_H
#define GPUCLUST_DPEAKS_H

#include "gpuclust.h"
#include "params.h"

typedef struct GcDpeaksJob
{
	gc_dpeaks_params params;
	gc_dpeaks_result result;
} GcDpeaksJob;

extern gc_status GcRunDpeaks(const gc_backend_api *api, const gc_exec *exec,
							 const GcInput *in, void *job);
extern const GcAlgorithm GcDpeaks;

/*
 * The arguments of density peaks after the feature, each with its NULL flag,
 * in the order of the SQL functions (dpeaks.c).
 */
#define GC_DP_N_CLUSTERS	0
#define GC_DP_DC			1
#define GC_DP_RATE			2
#define GC_DP_KERNEL		3
#define GC_DP_RHO_MIN		4
#define GC_DP_DELTA_MIN		5
#define GC_DP_NARGS			6
typedef struct GcDpeaksArgs
{
	bool		isnull[GC_DP_NARGS];
	Datum		value[GC_DP_NARGS];
} GcDpeaksArgs;
extern void GcDpeaksParams(const GcDpeaksArgs *args, gc_dpeaks_params *params);

#endif							/* GPUCLUST_DPEAKS_H */
