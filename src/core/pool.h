/*
 * pool.h
 *    The CPU back end's threads: one small pool per call, shared by the
 *    three algorithms.
 *
 * A call of an algorithm owns a pool (ctx->pool) of ctx's thread count;
 * the worker threads are started on the first parallel loop and joined when
 * the call ends.  gc_pool_for() cuts [0, n) into blocks of grain items and
 * hands them out to the threads in any order: an algorithm's answer never
 * depends on which thread ran which block (each block writes its own
 * outputs, or the results are combined in block order afterwards).
 *
 * Only the backend's own thread (worker 0, which also runs blocks) asks the
 * cancel callback; the others read the pool's stop flag at every step
 * (gc_worker_tick) and stop at the next step boundary.  No thread but the
 * caller's ever calls back into the caller.  Worker threads run with every
 * signal blocked, so that the process's signals reach its own thread.
 */
#ifndef GPUCLUST_POOL_H
#define GPUCLUST_POOL_H

#include <stdint.h>

#include "backend.h"
#include "cpu_threads.h"


struct gc_core_ctx;
typedef struct gc_pool gc_pool;

/* One thread of a pool, as a block of a parallel loop sees it. */
typedef struct gc_worker
{
	gc_pool    *pool;
	int			id;				/* 0: the caller's thread */
	int64_t		work;			/* work since the last look at the stop flag */
	gc_error	err;			/* a failure of this thread's block, when it returns one */
} gc_worker;

/*
 * A block of a parallel loop: items [begin, end).  Returns GC_OK, or a
 * status (after filling w->err unless it is GC_ERR_CANCELLED) that stops
 * the loop.
 */
typedef gc_status (*gc_pool_fn) (void *arg, gc_worker *w, int64_t begin, int64_t end);

/* A pool of nthreads (clamped to 1 .. GC_POOL_MAX_THREADS) for one call; NULL when out of memory. */
gc_pool    *gc_pool_create(struct gc_core_ctx *ctx, int nthreads);

/* Joins the threads and frees the pool (NULL is fine). */
void		gc_pool_free(gc_pool *pool);

/* Threads of the pool. */
int			gc_pool_threads(const gc_pool *pool);

/* The threads started for the parallel loops so far, the caller's included (1 when none). */
int			gc_pool_threads_used(const gc_pool *pool);

/*
 * Runs fn over [0, n) in blocks of grain (>= 1) on the pool's threads, the
 * caller's included, and returns when every block is done or the loop
 * stopped: GC_OK, GC_ERR_CANCELLED (ctx->err set), or the first failure a
 * block returned (its error copied to ctx->err).  A pool of one thread, or
 * a loop of one block, runs the blocks in order on the caller's thread.
 */
gc_status	gc_pool_for(gc_pool *pool, int64_t n, int64_t grain, gc_pool_fn fn, void *arg);

/*
 * Counts units of work of a block; each time every units have been done,
 * worker 0 asks the cancel callback and the others look at the stop flag.
 * Returns 1 when the block must stop (and return GC_ERR_CANCELLED).
 */
int			gc_worker_poll(gc_worker *w);

static inline int
gc_worker_tick(gc_worker *w, int64_t units, int64_t every)
{
	w->work += units;
	if (w->work < every)
		return 0;
	w->work = 0;
	return gc_worker_poll(w);
}

/*
 * The per-block counts of a two-pass parallel loop made each block's first
 * place: counts [blocks] replaced by their running sum before each, from
 * start; returns the total.
 */
static inline int64_t
gc_block_offsets(int64_t *counts, int64_t blocks, int64_t start)
{
	for (int64_t b = 0; b < blocks; b++)
	{
		int64_t		c = counts[b];

		counts[b] = start;
		start += c;
	}
	return start;
}

/* Blocks of about grain items such that each thread gets several (load balance), at least min_grain. */
int64_t		gc_pool_grain(const gc_pool *pool, int64_t n, int64_t min_grain);

#endif							/* GPUCLUST_POOL_H */

/*
 * Sorts the n pairs (keys[i], vals[i]) by key, ascending and stable, with
 * tk and tv [n] as scratch, on the pool's threads: the radix sort of
 * common/sort.h (same digits, same result) with the histogram and scatter
 * of each pass cut into blocks of at least 16,384 rows, the blocks placed
 * in row order.
 * A few thousand pairs are sorted on the caller's thread by digits of 8
 * bits (the same result: a stable sort's is unique).
 * Returns GC_OK or GC_ERR_CANCELLED (ctx->err set; the arrays then hold
 * the pairs in some order), or GC_ERR_OUT_OF_MEMORY.
 */
gc_status	gc_pool_radix_sort(gc_pool *pool, uint64_t *keys, int64_t *vals,
							   uint64_t *tk, int64_t *tv, int64_t n);
