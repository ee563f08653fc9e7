/*
 * pool.c
 *    The CPU back end's thread pool (pool.h): POSIX threads started on the
 *    first parallel loop of a call and joined at its end, blocks handed out
 *    through one atomic counter, a stop flag the caller's thread sets when
 *    the cancel callback says so or a block fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "pool.h"
#include "sort.h"

/* How often the caller's thread asks the cancel callback while it waits for the others. */
#define POOL_WAIT_NS (10 * 1000 * 1000)

struct gc_pool
{
	gc_core_ctx *ctx;
	int			nthreads;		/* asked for */
	int			started;		/* worker threads running (nthreads - 1 once started) */
	int			tried;			/* the threads were started (or failed to) */
	int			used;			/* the most threads one loop ran on */
	pthread_t  *tids;

	pthread_mutex_t mu;
	pthread_cond_t work_cv;		/* a new loop, or quit */
	pthread_cond_t done_cv;		/* the last worker that joined the loop finished */
	uint64_t	gen;			/* loops dispatched */
	int			quit;
	int			joined;			/* workers in the current loop */
	int			closed;			/* the caller's thread ran out of blocks: no one joins any more */

	/* the current loop */
	gc_pool_fn	fn;
	void	   *arg;
	int64_t		n;
	int64_t		grain;
	int64_t		next;			/* atomic: the next block */
	int			stop;			/* atomic: the loop must stop */
	gc_status	fail;			/* under mu: the first failure */
	gc_error	fail_err;		/* under mu: its words */

	gc_worker  *workers;		/* [nthreads] */
};

/* The CPUs this process may run on (its affinity mask), capped at GC_POOL_DEFAULT_MAX. */
int
gc_pool_default_threads(void)
{
	long		n = 0;

#ifdef CPU_COUNT
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
#endif
	if (n < 1)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > GC_POOL_DEFAULT_MAX ? GC_POOL_DEFAULT_MAX : (int) n;
}

gc_pool *
gc_pool_create(gc_core_ctx *ctx, int nthreads)
{
	gc_pool    *pool;

	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > GC_POOL_MAX_THREADS)
		nthreads = GC_POOL_MAX_THREADS;
	pool = calloc(1, sizeof(gc_pool));
	if (!pool)
		return NULL;
	pool->workers = calloc((size_t) nthreads, sizeof(gc_worker));
	pool->tids = calloc((size_t) nthreads, sizeof(pthread_t));
	if (!pool->workers || !pool->tids)
	{
		free(pool->workers);
		free(pool->tids);
		free(pool);
		return NULL;
	}
	pool->ctx = ctx;
	pool->nthreads = nthreads;
	pool->used = 1;
	for (int i = 0; i < nthreads; i++)
	{
		pool->workers[i].pool = pool;
		pool->workers[i].id = i;
	}
	pthread_mutex_init(&pool->mu, NULL);
	pthread_cond_init(&pool->work_cv, NULL);
	pthread_cond_init(&pool->done_cv, NULL);
	return pool;
}

int
gc_pool_threads(const gc_pool *pool)
{
	return pool ? pool->nthreads : 1;
}

int
gc_pool_threads_used(const gc_pool *pool)
{
	return pool ? pool->used : 1;
}

int64_t
gc_pool_grain(const gc_pool *pool, int64_t n, int64_t min_grain)
{
	int64_t		g = n / (8 * (int64_t) gc_pool_threads(pool));

	if (g < min_grain)
		g = min_grain;
	return g < 1 ? 1 : g;
}

/* Records the first failure of the loop and raises the stop flag. */
static void
pool_fail(gc_pool *pool, gc_status st, const gc_error *err)
{
	pthread_mutex_lock(&pool->mu);
	if (pool->fail == GC_OK)
	{
		pool->fail = st;
		if (err)
			pool->fail_err = *err;
	}
	pthread_mutex_unlock(&pool->mu);
	__atomic_store_n(&pool->stop, 1, __ATOMIC_RELEASE);
}

/* The caller's thread asks the cancel callback; on yes the loop stops. */
static int
pool_ask_cancel(gc_pool *pool)
{
	if (__atomic_load_n(&pool->stop, __ATOMIC_ACQUIRE))
		return 1;
	if (pool->ctx->cancel == NULL || !pool->ctx->cancel(pool->ctx->cancel_arg))
		return 0;
	pool_fail(pool, GC_ERR_CANCELLED, NULL);
	return 1;
}

int
gc_worker_poll(gc_worker *w)
{
	if (w->id == 0)
		return pool_ask_cancel(w->pool);
	return __atomic_load_n(&w->pool->stop, __ATOMIC_ACQUIRE);
}

/* Runs blocks of the current loop until none is left or the loop stops. */
static void
pool_run_blocks(gc_pool *pool, gc_worker *w)
{
	w->work = 0;
	for (;;)
	{
		int64_t		b;
		int64_t		begin;
		int64_t		end;
		gc_status	st;

		if (__atomic_load_n(&pool->stop, __ATOMIC_ACQUIRE))
			return;
		b = __atomic_fetch_add(&pool->next, 1, __ATOMIC_RELAXED);
		if (b >= (pool->n + pool->grain - 1) / pool->grain)
			return;
		begin = b * pool->grain;
		end = pool->n - begin > pool->grain ? begin + pool->grain : pool->n;
		st = pool->fn(pool->arg, w, begin, end);
		if (st != GC_OK)
		{
			pool_fail(pool, st, st == GC_ERR_CANCELLED ? NULL : &w->err);
			return;
		}
	}
}

/*
 * A worker thread: waits for a loop, joins it unless the caller's thread
 * has already run out of blocks (a worker woken late is then not waited
 * for), runs its part, tells, until quit.
 */
static void *
pool_thread(void *arg)
{
	gc_worker  *w = arg;
	gc_pool    *pool = w->pool;
	uint64_t	seen = 0;

	pthread_mutex_lock(&pool->mu);
	for (;;)
	{
		while (!pool->quit && pool->gen == seen)
			pthread_cond_wait(&pool->work_cv, &pool->mu);
		if (pool->quit)
			break;
		seen = pool->gen;
		if (pool->closed)
			continue;
		pool->joined++;
		pthread_mutex_unlock(&pool->mu);
		pool_run_blocks(pool, w);
		pthread_mutex_lock(&pool->mu);
		if (--pool->joined == 0)
			pthread_cond_signal(&pool->done_cv);
	}
	pthread_mutex_unlock(&pool->mu);
	return NULL;
}

/*
 * Starts the worker threads with every signal blocked (they inherit the
 * mask), so that signals reach the caller's thread.  A thread that cannot
 * be started leaves the pool smaller.
 */
static void
pool_start(gc_pool *pool)
{
	sigset_t	all;
	sigset_t	old;

	pool->tried = 1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 1; i < pool->nthreads; i++)
	{
		if (pthread_create(&pool->tids[i], NULL, pool_thread, &pool->workers[i]) != 0)
			break;
		pool->started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void
gc_pool_free(gc_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->mu);
	pool->quit = 1;
	pthread_cond_broadcast(&pool->work_cv);
	pthread_mutex_unlock(&pool->mu);
	for (int i = 1; i <= pool->started; i++)
		pthread_join(pool->tids[i], NULL);
	pthread_mutex_destroy(&pool->mu);
	pthread_cond_destroy(&pool->work_cv);
	pthread_cond_destroy(&pool->done_cv);
	free(pool->workers);
	free(pool->tids);
	free(pool);
}

/* The blocks in order on the caller's thread. */
static gc_status
pool_for_serial(gc_core_ctx *ctx, gc_worker *w, int64_t n, int64_t grain, gc_pool_fn fn, void *arg)
{
	for (int64_t begin = 0; begin < n; begin += grain)
	{
		gc_status	st = fn(arg, w, begin, n - begin > grain ? begin + grain : n);

		if (st == GC_ERR_CANCELLED)
			return gc_core_cancel_status(ctx);
		if (st != GC_OK)
		{
			*ctx->err = w->err;
			return st;
		}
	}
	return GC_OK;
}

gc_status
gc_pool_for(gc_pool *pool, int64_t n, int64_t grain, gc_pool_fn fn, void *arg)
{
	gc_status	st;

	if (grain < 1)
		grain = 1;
	if (n <= 0)
		return GC_OK;
	if (pool->nthreads > 1 && n > grain && !pool->tried)
		pool_start(pool);
	if (pool->started == 0 || n <= grain)
	{
		pool->workers[0].work = 0;
		pool->stop = 0;
		pool->fail = GC_OK;
		return pool_for_serial(pool->ctx, &pool->workers[0], n, grain, fn, arg);
	}

	pthread_mutex_lock(&pool->mu);
	pool->fn = fn;
	pool->arg = arg;
	pool->n = n;
	pool->grain = grain;
	pool->next = 0;
	pool->stop = 0;
	pool->fail = GC_OK;
	pool->joined = 0;
	pool->closed = 0;
	pool->gen++;
	if (pool->started + 1 > pool->used)
		pool->used = pool->started + 1;
	pthread_cond_broadcast(&pool->work_cv);
	pthread_mutex_unlock(&pool->mu);

	pool_run_blocks(pool, &pool->workers[0]);

	/* waits for the workers that joined, asking the cancel callback meanwhile */
	pthread_mutex_lock(&pool->mu);
	pool->closed = 1;
	while (pool->joined > 0)
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += POOL_WAIT_NS;
		if (ts.tv_nsec >= 1000000000L)
		{
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&pool->done_cv, &pool->mu, &ts) == ETIMEDOUT &&
			pool->joined > 0)
		{
			pthread_mutex_unlock(&pool->mu);
			pool_ask_cancel(pool);
			pthread_mutex_lock(&pool->mu);
		}
	}
	st = pool->fail;
	if (st != GC_OK && st != GC_ERR_CANCELLED)
		*pool->ctx->err = pool->fail_err;
	pthread_mutex_unlock(&pool->mu);
	if (st == GC_ERR_CANCELLED)
		gc_core_cancel_status(pool->ctx);
	return st;
}

/* ---------------------------------------------------------------- the sort */

typedef struct psort_job
{
	int64_t		n;
	int64_t		chunk;			/* rows per block */
	int64_t    *hist;			/* [blocks][GC_SORT_PASSES][GC_SORT_BUCKETS]: counts, then offsets */
	int			pass;			/* -1: the histograms of every digit */
	int			count;			/* with pass >= 0: the histogram of that digit only */
	int			copy;			/* copy src into dst as they are */
	const uint64_t *src_k;
	const int64_t *src_v;
	uint64_t   *dst_k;
	int64_t    *dst_v;
} psort_job;

#define PSORT_HIST(job, b, p) ((job)->hist + ((size_t) (b) * GC_SORT_PASSES + (size_t) (p)) * GC_SORT_BUCKETS)

/* The largest block of rows between two looks at cancel. */
#define PSORT_MAX_CHUNK ((int64_t) 1 << 22)
/* Most pairs sorted by psort_small. */
#define PSORT_SMALL 4096
/* Fewest rows of a block (each counts its own histogram of every digit: 96 kB) */
#define PSORT_MIN_CHUNK 16384

static gc_status
psort_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	psort_job  *job = arg;
	int64_t		lo = b * job->chunk;
	int64_t		hi = job->n - lo > job->chunk ? lo + job->chunk : job->n;

	if (job->copy)
	{
		memcpy(job->dst_k + lo, job->src_k + lo, sizeof(uint64_t) * (size_t) (hi - lo));
		memcpy(job->dst_v + lo, job->src_v + lo, sizeof(int64_t) * (size_t) (hi - lo));
	}
	else if (job->pass < 0)
	{
		memset(PSORT_HIST(job, b, 0), 0, sizeof(int64_t) * GC_SORT_PASSES * GC_SORT_BUCKETS);
		for (int64_t i = lo; i < hi; i++)
			for (int p = 0; p < GC_SORT_PASSES; p++)
				PSORT_HIST(job, b, p)[(job->src_k[i] >> (p * GC_SORT_DIGIT_BITS)) & (GC_SORT_BUCKETS - 1)]++;
	}
	else if (job->count)
	{
		int64_t    *h = PSORT_HIST(job, b, job->pass);
		int			shift = job->pass * GC_SORT_DIGIT_BITS;

		memset(h, 0, sizeof(int64_t) * GC_SORT_BUCKETS);
		for (int64_t i = lo; i < hi; i++)
			h[(job->src_k[i] >> shift) & (GC_SORT_BUCKETS - 1)]++;
	}
	else
	{
		int64_t    *off = PSORT_HIST(job, b, job->pass);
		int			shift = job->pass * GC_SORT_DIGIT_BITS;

		for (int64_t i = lo; i < hi; i++)
		{
			int64_t		at = off[(job->src_k[i] >> shift) & (GC_SORT_BUCKETS - 1)]++;

			job->dst_k[at] = job->src_k[i];
			job->dst_v[at] = job->src_v[i];
		}
	}
	return gc_worker_tick(w, (hi - lo) * 4, 1) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * Few pairs (at most PSORT_SMALL): the same stable sort by digits of 8 bits,
 * only those below the highest bit set in any key, so that counting does
 * not cost more than the pairs (common/sort.h counts every 11-bit digit of
 * 64).  A stable sort's result is unique: the pairs end as gc_radix_sort
 * leaves them.  Takes microseconds, so it does not ask cancel.
 */
static void
psort_small(uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv, int64_t n)
{
	uint64_t	bits = 0;
	uint64_t   *src_k = keys,
			   *dst_k = tk;
	int64_t    *src_v = vals,
			   *dst_v = tv;

	for (int64_t i = 0; i < n; i++)
		bits |= keys[i];
	for (int shift = 0; shift < 64 && (bits >> shift) != 0; shift += 8)
	{
		int64_t		count[256];
		int64_t		sum = 0;
		int			trivial = 0;

		memset(count, 0, sizeof(count));
		for (int64_t i = 0; i < n; i++)
			count[(src_k[i] >> shift) & 255]++;
		for (int b = 0; b < 256; b++)
		{
			int64_t		c = count[b];

			trivial |= c == n;
			count[b] = sum;
			sum += c;
		}
		if (trivial)
			continue;			/* every key has the same digit: nothing moves */
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		at = count[(src_k[i] >> shift) & 255]++;

			dst_k[at] = src_k[i];
			dst_v[at] = src_v[i];
		}
		gc_sort_swap(&src_k, &src_v, &dst_k, &dst_v);
	}
	if (src_k != keys)
	{
		memcpy(keys, src_k, sizeof(uint64_t) * (size_t) n);
		memcpy(vals, src_v, sizeof(int64_t) * (size_t) n);
	}
}

gc_status
gc_pool_radix_sort(gc_pool *pool, uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv,
				   int64_t n)
{
	/* one thread: one block, the serial sort (more blocks only count their histograms again) */
	int64_t		blocks = gc_pool_threads(pool) > 1 ? (int64_t) gc_pool_threads(pool) * 4 : 1;
	psort_job	job;
	uint64_t   *src_k = keys,
			   *dst_k = tk;
	int64_t    *src_v = vals,
			   *dst_v = tv;
	gc_status	st = GC_OK;

	if (n <= 1)
		return GC_OK;
	if (n <= PSORT_SMALL)
	{
		psort_small(keys, vals, tk, tv, n);
		return GC_OK;
	}
	/*
	 * Blocks of at least PSORT_MIN_CHUNK rows and at most 2^22 (a block asks
	 * cancel when it ends); the sorted order does not depend on them.  One
	 * block is the serial sort of common/sort.h.
	 */
	if (blocks > n / PSORT_MIN_CHUNK)
		blocks = n / PSORT_MIN_CHUNK;
	if (blocks < n / PSORT_MAX_CHUNK)
		blocks = n / PSORT_MAX_CHUNK;
	if (blocks <= 1)
		return gc_radix_sort(keys, vals, tk, tv, n, pool->ctx->cancel, pool->ctx->cancel_arg) == 0 ?
			GC_OK : gc_core_cancel_status(pool->ctx);
	job.n = n;
	job.chunk = (n + blocks - 1) / blocks;
	blocks = (n + job.chunk - 1) / job.chunk;
	job.hist = malloc(sizeof(int64_t) * GC_SORT_PASSES * GC_SORT_BUCKETS * (size_t) blocks);
	if (!job.hist)
		return gc_core_oom(pool->ctx, sizeof(int64_t) * GC_SORT_PASSES * GC_SORT_BUCKETS * (size_t) blocks,
						   "out of memory sorting %lld rows", (long long) n);
	job.pass = -1;
	job.count = 0;
	job.copy = 0;
	job.src_k = keys;
	st = gc_pool_for(pool, blocks, 1, psort_block, &job);
	for (int p = 0, moved = 0; p < GC_SORT_PASSES && st == GC_OK; p++)
	{
		int64_t		sum = 0;
		int			trivial = 0;

		for (int d = 0; d < GC_SORT_BUCKETS && !trivial; d++)
		{
			int64_t		total = 0;

			for (int64_t b = 0; b < blocks; b++)
				total += PSORT_HIST(&job, b, p)[d];
			trivial = total == n;
		}
		if (trivial)
			continue;			/* every key has the same digit: nothing moves */
		job.pass = p;
		if (moved)
		{
			/* the blocks now hold other keys: their histograms of this digit again */
			job.count = 1;
			job.src_k = src_k;
			if ((st = gc_pool_for(pool, blocks, 1, psort_block, &job)) != GC_OK)
				break;
			job.count = 0;
		}
		moved = 1;
		/* offsets in (digit, block) order: the scatter is stable */
		for (int d = 0; d < GC_SORT_BUCKETS; d++)
			for (int64_t b = 0; b < blocks; b++)
			{
				int64_t		c = PSORT_HIST(&job, b, p)[d];

				PSORT_HIST(&job, b, p)[d] = sum;
				sum += c;
			}
		job.src_k = src_k;
		job.src_v = src_v;
		job.dst_k = dst_k;
		job.dst_v = dst_v;
		st = gc_pool_for(pool, blocks, 1, psort_block, &job);
		gc_sort_swap(&src_k, &src_v, &dst_k, &dst_v);
	}
	free(job.hist);
	if (st == GC_OK && src_k != keys)
	{
		job.copy = 1;
		job.src_k = src_k;
		job.src_v = src_v;
		job.dst_k = keys;
		job.dst_v = vals;
		st = gc_pool_for(pool, blocks, 1, psort_block, &job);
	}
	return st;
}
