/*
 * hdbscan_threads.h
 *    The threads that gc_hdbscan_finish (common/hdbscan_tree.h) may run
 *    its parallel loops on, as each back end lends them: the CPU back end
 *    its call's pool (src/core/pool.h), the GPU back end threads of the
 *    host (cuda/hdbscan.cu).  Included by hdbscan.h only.
 *
 * A loop is a number of tasks; a task is a function of its index.  Tasks
 * run in any order on any thread and never depend on each other's order:
 * every answer is the same on one thread as on many.  A task asks poll
 * every GC_HDB_CANCEL_EVERY items (gc_hdb_poll); on yes it returns 1 and
 * the loop stops.  Only the caller's thread ever calls the cancel callback.
 */
#ifndef GPUCLUST_HDBSCAN_THREADS_H
#define GPUCLUST_HDBSCAN_THREADS_H

#include <stdint.h>

#include "backend.h"

/* Items between two questions to the cancel callback. */
#define GC_HDB_CANCEL_EVERY ((int64_t) 1 << 16)
/* Items per task of the loops over rows and edges. */
#define GC_HDB_GRAIN ((int64_t) 1 << 15)

/* A task of a loop: 0 when done, 1 when it stopped (cancel, or a failure its loop records). */
typedef int (*gc_hdb_task_fn) (void *arg, int64_t task, void *worker);

typedef struct gc_hdb_threads
{
	int			threads;		/* how many may run at once; 1: the caller's thread only */
	/* runs fn for every task of [0, tasks); 0, or 1 when a task stopped the loop */
	int			(*run) (void *self, int64_t tasks, gc_hdb_task_fn fn, void *arg);
	/* 1 when the task running on worker must stop (the call is cancelled) */
	int			(*poll) (void *worker);
	void	   *self;
} gc_hdb_threads;

/* The loops of one gc_hdbscan_finish: the threads, or none, and the caller's cancel. */
typedef struct gc_hdb_loops
{
	const gc_hdb_threads *thr;	/* NULL: the caller's thread */
	gc_cancel_fn cancel;
	void	   *cancel_arg;
} gc_hdb_loops;

static inline int
gc_hdb_parallel(const gc_hdb_loops *l)
{
	return l->thr != NULL && l->thr->threads > 1;
}

/* Runs a loop: on the threads, or in order on the caller's thread (worker NULL). */
static inline int
gc_hdb_run(const gc_hdb_loops *l, int64_t tasks, gc_hdb_task_fn fn, void *arg)
{
	if (!gc_hdb_parallel(l) || tasks <= 1)
	{
		for (int64_t t = 0; t < tasks; t++)
			if (fn(arg, t, NULL))
				return 1;
		return 0;
	}
	return l->thr->run(l->thr->self, tasks, fn, arg);
}

/* After *count items of a task: 1 when it must stop; asks every GC_HDB_CANCEL_EVERY items. */
static inline int
gc_hdb_poll(const gc_hdb_loops *l, void *worker, int64_t *count)
{
	if (++*count < GC_HDB_CANCEL_EVERY)
		return 0;
	*count = 0;
	if (worker == NULL)
		return l->cancel != NULL && l->cancel(l->cancel_arg);
	return l->thr->poll(worker);
}

/* Tasks of about grain items over n items, at least one per thread where the items allow. */
static inline int64_t
gc_hdb_tasks(const gc_hdb_loops *l, int64_t n, int64_t grain)
{
	int64_t		tasks = (n + grain - 1) / grain;

	if (!gc_hdb_parallel(l))
		return n > 0 ? 1 : 0;
	return tasks < 1 ? 1 : tasks;
}

/* Items [*begin, *end) of task t of tasks over n. */
static inline void
gc_hdb_block(int64_t n, int64_t tasks, int64_t t, int64_t *begin, int64_t *end)
{
	/* n < 2^32 and tasks <= n: the products fit */
	*begin = n * t / tasks;
	*end = n * (t + 1) / tasks;
}

/* counts [tasks] replaced by their running sum before each; returns the total. */
static inline int64_t
gc_hdb_offsets(int64_t *counts, int64_t tasks)
{
	int64_t		start = 0;

	for (int64_t t = 0; t < tasks; t++)
	{
		int64_t		c = counts[t];

		counts[t] = start;
		start += c;
	}
	return start;
}

#endif							/* GPUCLUST_HDBSCAN_THREADS_H */
