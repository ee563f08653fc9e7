/*
 * core.h
 *    The CPU back end inside: the clustering algorithms on a plain float
 *    matrix, and the few helpers they share.
 *
 * Only the C standard library and the headers of common/ are used here, so
 * the core builds and is unit tested without PostgreSQL (test/unit).  The
 * outside world reaches the core through one table, gc_cpu_api()
 * (backend.c, declared in common/backend.h), which checks the parameters
 * (common/checks.h), answers an empty input at once, and times the call;
 * the functions below are what that table calls.
 *
 * Memory comes from malloc and is always freed before returning; a failure
 * is returned as a gc_status with its words in ctx->err; a long loop asks
 * the cancel callback now and then and returns GC_ERR_CANCELLED when told
 * to stop.  The long loops run on the call's threads (ctx->pool, pool.h):
 * only the caller's thread asks the cancel callback or writes ctx->err, and
 * no answer depends on the number of threads.
 */
#ifndef GPUCLUST_CORE_H
#define GPUCLUST_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "checks.h"
#include "portable.h"
#include "pool.h"

/* What one call of an algorithm gets from its entry point in backend.c. */
typedef struct gc_core_ctx
{
	gc_cancel_fn cancel;		/* NULL: never cancelled */
	void	   *cancel_arg;
	const gc_tuning *tuning;	/* never NULL */
	gc_timing  *timing;			/* never NULL: scratch when the caller wants none */
	gc_error   *err;			/* the CPU back end's error record of this thread */
	gc_pool    *pool;			/* never NULL: the call's threads (pool.h) */
} gc_core_ctx;

/* ---------------------------------------------------------------- error.c */

/* Asks the cancel callback; on yes sets the "canceled" error and returns 1. */
int			gc_core_cancelled(gc_core_ctx *ctx);

/*
 * Adds units of work to *done and asks the cancel callback each time every
 * units have been done: long loops count their work (distance evaluations
 * times d), not rows or cells.  Returns 1 when told to stop.
 */
static inline int
gc_core_work(gc_core_ctx *ctx, int64_t *done, int64_t units, int64_t every)
{
	*done += units;
	if (*done < every)
		return 0;
	*done = 0;
	return gc_core_cancelled(ctx);
}

/* Sets the "canceled" error and returns GC_ERR_CANCELLED. */
gc_status	gc_core_cancel_status(gc_core_ctx *ctx);

/* Sets an out-of-memory error (bytes: what was asked for) and returns GC_ERR_OUT_OF_MEMORY. */
gc_status	gc_core_oom(gc_core_ctx *ctx, size_t bytes, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 3, 4)))
#endif
			;

/* Prints a line to stderr when the caller's tuning asks for debug output. */
void		gc_core_debug(const gc_core_ctx *ctx, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 2, 3)))
#endif
			;

/* Milliseconds of wall clock, for the timing record. */
double		gc_core_now_ms(void);

/* ---------------------------------------------------------------- the algorithms
 * Each takes parameters that passed gc_check_<algorithm>() and n >= 1 rows
 * of x [n, d], row-major, and fills result as common/backend.h describes.
 */

/*
 * The tables of a mapped DBSCAN grid plan gp (one that gc_grid_plan_make of
 * common/dbscan_grid.h left with mapped set) from the rows x [n, gp->d] of
 * element type t, whose grid dimensions span [lo, hi], on the call's
 * threads (grid_maps.c): the same tables, side, extents, neighbour rows and
 * point coordinates (maps->coord) as gc_grid_maps_build, bit for bit, for
 * any number of threads.  maps receives the tables (gc_grid_maps_free frees
 * them, also after a failure) and the plan points at them.  Returns GC_OK,
 * GC_ERR_CANCELLED, GC_ERR_OUT_OF_MEMORY or GC_ERR_INTERNAL (ctx->err set).
 */
struct gc_grid_plan;
struct gc_grid_maps;
gc_status	gc_core_grid_maps(gc_core_ctx *ctx, struct gc_grid_plan *gp, struct gc_grid_maps *maps,
							  const void *x, gc_dtype t, int64_t n, const double *lo, const double *hi);

/* DBSCAN (dbscan.c). */
gc_status	gc_core_dbscan(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
						   const gc_dbscan_params *params, gc_dbscan_result *result);

/* k-means (kmeans.c); timing phase_ms as for gc_kmeans_params. */
gc_status	gc_core_kmeans(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
						   const gc_kmeans_params *params, gc_kmeans_result *result);

/* k-means assignment to given centroids (kmeans.c); timing as for gc_kmeans_assign_params. */
gc_status	gc_core_kmeans_assign(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
								  const gc_kmeans_assign_params *params,
								  gc_kmeans_assign_result *result);

/*
 * k-means++ seeding on the call's threads (kmeans_seed.c): into rows [k] the
 * rows gc_kmeans_plusplus_rows of common/kmeans_init.h picks with ntrials
 * candidates per step, the same for every thread count; mind2 [n] is
 * scratch.  Returns GC_OK, GC_ERR_CANCELLED or GC_ERR_OUT_OF_MEMORY
 * (ctx->err set).
 */
gc_status	gc_core_kmeans_plusplus_rows(gc_core_ctx *ctx, const void *x, /* [n, d] of element type dtype */
										 gc_dtype dtype, int64_t n, int32_t d, int32_t k, uint64_t seed,
										 int32_t ntrials, int64_t *rows /* [k] out */ ,
										 double *mind2 /* [n] scratch */ );

/* Density peaks (dpeaks.c); timing phase_ms as for gc_dpeaks_params. */
gc_status	gc_core_dpeaks(gc_core_ctx *ctx, const void *x, /* [n, d] of element type dtype */
						   gc_dtype dtype, int64_t n, int32_t d,
						   const gc_dpeaks_params *params, gc_dpeaks_result *result);

/* HDBSCAN (hdbscan.c); timing phase_ms and counts as for gc_hdbscan_params. */
gc_status	gc_core_hdbscan(gc_core_ctx *ctx, const void *x, /* [n, d] of element type dtype */
							gc_dtype dtype, int64_t n, int32_t d,
							const gc_hdbscan_params *params, gc_hdbscan_result *result);

#endif							/* GPUCLUST_CORE_H */
