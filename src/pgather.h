/*
 * pgather.h
 *    The parallel gather (pgather.c): when the user's query is a plain scan of
 *    one table or materialized view, optionally ordered by a unique key,
 *    gpuclust's own parallel workers read the heap into shared memory, and
 *    the rows are put back in the serial plan's order; and its setting
 *    gpuclust.parallel_gather.
 */
#ifndef GPUCLUST_PGATHER_H
#define GPUCLUST_PGATHER_H

#include "postgres.h"

#include "nodes/plannodes.h"
#include "utils/plancache.h"

struct GatherReceiver;

/* gpuclust.parallel_gather */
extern bool gc_parallel_gather_guc;

/* Defines gpuclust.parallel_gather. */
extern void GcParallelGatherDefineGucs(void);

/*
 * Gathers the rows of stmt with parallel workers into st->in when stmt is a
 * scan the parallel gather takes (see pgather.c) and workers pay; false,
 * with nothing gathered, when the serial gather must run instead.  *started
 * is set once workers are launched.
 */
extern bool GcParallelGather(CachedPlanSource *ps, PlannedStmt *stmt, struct GatherReceiver *st,
							 bool *started);

/*
 * Whether an error of the parallel gather is one the serial gather could
 * raise differently, or for another row: the caller then gathers serially.
 */
extern bool GcParallelGatherRetries(int sqlerrcode);

#endif							/* GPUCLUST_PGATHER_H */
