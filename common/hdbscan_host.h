/*
 * hdbscan_host.h
 *    Threads of the host for gc_hdbscan_finish where no pool of the CPU
 *    back end is at hand: the GPU back end's host part, and the unit tests.
 *    POSIX threads, started at the first loop and kept, waiting, until
 *    gc_hdb_host_end; they run with every signal blocked, so that the
 *    process's signals reach the caller's thread.  Only the caller's thread
 *    asks the cancel callback: between its own tasks, and while it waits
 *    for the others.
 */
#ifndef GPUCLUST_HDBSCAN_HOST_H
#define GPUCLUST_HDBSCAN_HOST_H

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "hdbscan_threads.h"

#define GC_HDB_HOST_MAX 64

struct gc_hdb_host;

typedef struct gc_hdb_host_worker
{
	struct gc_hdb_host *h;
	int			id;				/* 0: the caller's thread */
} gc_hdb_host_worker;

typedef struct gc_hdb_host
{
	gc_hdb_threads thr;			/* what gc_hdbscan_finish is given; thr.self is this */
	gc_cancel_fn cancel;
	void	   *cancel_arg;
	pthread_mutex_t mu;
	pthread_cond_t go;			/* a new loop, or quit */
	pthread_cond_t done;		/* the last helper left the loop */
	int			started;		/* helper threads running */
	int			tried;			/* the helpers were started (or failed to be) */
	pthread_t	tid[GC_HDB_HOST_MAX];
	gc_hdb_host_worker wk[GC_HDB_HOST_MAX + 1];
	uint64_t	gen;			/* loops handed out */
	int			quit;
	int			busy;			/* helpers still in the current loop */
	/* the current loop */
	gc_hdb_task_fn fn;
	void	   *arg;
	int64_t		tasks;
	int64_t		next;			/* atomic: the next task */
	int			stop;			/* atomic: the loop must stop */
	int			failed;			/* atomic: a task stopped, or cancel came */
} gc_hdb_host;

static inline void
gc_hdb_host_tasks(gc_hdb_host_worker *wk)
{
	gc_hdb_host *h = wk->h;

	for (;;)
	{
		int64_t		t;

		if (__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE))
			return;
		t = __atomic_fetch_add(&h->next, 1, __ATOMIC_RELAXED);
		if (t >= h->tasks)
			return;
		if (h->fn(h->arg, t, wk) != 0)
		{
			__atomic_store_n(&h->failed, 1, __ATOMIC_RELEASE);
			__atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
			return;
		}
	}
}

static inline void *
gc_hdb_host_main(void *p)
{
	gc_hdb_host_worker *wk = (gc_hdb_host_worker *) p;
	gc_hdb_host *h = wk->h;
	uint64_t	seen = 0;

	pthread_mutex_lock(&h->mu);
	for (;;)
	{
		while (h->gen == seen && !h->quit)
			pthread_cond_wait(&h->go, &h->mu);
		if (h->quit)
			break;
		seen = h->gen;
		pthread_mutex_unlock(&h->mu);
		gc_hdb_host_tasks(wk);
		pthread_mutex_lock(&h->mu);
		if (--h->busy == 0)
			pthread_cond_signal(&h->done);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* The caller's thread asks cancel; on yes the loop stops. */
static inline int
gc_hdb_host_cancelled(gc_hdb_host *h)
{
	if (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE) && h->cancel != NULL &&
		h->cancel(h->cancel_arg))
	{
		__atomic_store_n(&h->failed, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&h->stop, __ATOMIC_ACQUIRE);
}

static inline int
gc_hdb_host_poll(void *worker)
{
	gc_hdb_host_worker *wk = (gc_hdb_host_worker *) worker;

	if (wk->id == 0)
		return gc_hdb_host_cancelled(wk->h);
	return __atomic_load_n(&wk->h->stop, __ATOMIC_ACQUIRE);
}

/* Starts the helpers, as many as the system gives of threads - 1 (fewer is fine). */
static inline void
gc_hdb_host_start(gc_hdb_host *h)
{
	sigset_t	all,
				old;

	h->tried = 1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 1; i < h->thr.threads && i <= GC_HDB_HOST_MAX; i++)
	{
		h->wk[i].h = h;
		h->wk[i].id = i;
		if (pthread_create(&h->tid[h->started], NULL, gc_hdb_host_main, &h->wk[i]) != 0)
			break;
		h->started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static inline int
gc_hdb_host_run(void *self, int64_t tasks, gc_hdb_task_fn fn, void *arg)
{
	gc_hdb_host *h = (gc_hdb_host *) self;

	if (!h->tried)
		gc_hdb_host_start(h);
	pthread_mutex_lock(&h->mu);
	h->fn = fn;
	h->arg = arg;
	h->tasks = tasks;
	h->next = 0;
	h->stop = 0;
	h->failed = 0;
	h->busy = h->started;
	h->gen++;
	pthread_cond_broadcast(&h->go);
	pthread_mutex_unlock(&h->mu);

	h->wk[0].h = h;
	h->wk[0].id = 0;
	gc_hdb_host_tasks(&h->wk[0]);

	/* the others, asking cancel every few milliseconds meanwhile */
	pthread_mutex_lock(&h->mu);
	while (h->busy > 0)
	{
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 5000000;
		if (until.tv_nsec >= 1000000000)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&h->done, &h->mu, &until) != 0 && h->busy > 0)
		{
			pthread_mutex_unlock(&h->mu);
			gc_hdb_host_cancelled(h);
			pthread_mutex_lock(&h->mu);
		}
	}
	pthread_mutex_unlock(&h->mu);
	return __atomic_load_n(&h->failed, __ATOMIC_ACQUIRE);
}

/* Threads for one call: threads (>= 1) at most, cancel asked on the caller's thread. */
static inline void
gc_hdb_host_begin(gc_hdb_host *h, int threads, gc_cancel_fn cancel, void *cancel_arg)
{
	memset(h, 0, sizeof(*h));
	h->thr.threads = threads < 1 ? 1 : threads > GC_HDB_HOST_MAX ? GC_HDB_HOST_MAX : threads;
	h->thr.run = gc_hdb_host_run;
	h->thr.poll = gc_hdb_host_poll;
	h->thr.self = h;
	h->cancel = cancel;
	h->cancel_arg = cancel_arg;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->go, NULL);
	pthread_cond_init(&h->done, NULL);
}

/* Joins the helpers. */
static inline void
gc_hdb_host_end(gc_hdb_host *h)
{
	pthread_mutex_lock(&h->mu);
	h->quit = 1;
	pthread_cond_broadcast(&h->go);
	pthread_mutex_unlock(&h->mu);
	for (int i = 0; i < h->started; i++)
		pthread_join(h->tid[i], NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->go);
	pthread_cond_destroy(&h->done);
}

#endif							/* GPUCLUST_HDBSCAN_HOST_H */
