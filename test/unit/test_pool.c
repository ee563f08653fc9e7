/*
 * test_pool.c
 *    The CPU back end's thread pool (src/core/pool.c) on its own: its radix
 *    sort gives the order of common/sort.h's for every thread count, key
 *    shape and size around its block boundaries; a parallel loop covers
 *    every item once; a block's failure and the cancel callback stop a loop
 *    with the right status and words, and the pool runs loops again after.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "pool.h"
#include "sort.h"
#include "unit.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The key shapes: what the DBSCAN cell keys and the density peaks keys look like, and the edges. */
enum
{
	KEYS_EQUAL,					/* every digit trivial: nothing moves */
	KEYS_FEW,					/* heavy duplicates: a handful of cells */
	KEYS_LOW,					/* one 11-bit digit only */
	KEYS_HIGH,					/* only the top digit differs */
	KEYS_WIDE,					/* every digit */
	KEYS_OUTLIER,				/* small keys and one far outlier */
	KEYS_DESC,					/* descending, many ties */
	KEYS_NSHAPES
};

static void
fill_keys(uint64_t *k, int64_t n, int shape)
{
	for (int64_t i = 0; i < n; i++)
	{
		uint64_t	r = rng_next();

		switch (shape)
		{
			case KEYS_EQUAL:
				k[i] = 0x123456789abcdefULL;
				break;
			case KEYS_FEW:
				k[i] = (r % 5) * 1000003ULL;
				break;
			case KEYS_LOW:
				k[i] = r & (GC_SORT_BUCKETS - 1);
				break;
			case KEYS_HIGH:
				k[i] = (r >> 60) << 60 | 7;
				break;
			case KEYS_WIDE:
				k[i] = r;
				break;
			case KEYS_OUTLIER:
				k[i] = i == n / 2 ? UINT64_MAX - 3 : r % 300;
				break;
			default:
				k[i] = (uint64_t) (n - i) / 3;
				break;
		}
	}
}

static int	cancel_after = -1;	/* the cancel callback says yes from this call on (-1: never) */
static int	cancel_calls = 0;

static int
cancel_cb(void *arg)
{
	(void) arg;
	cancel_calls++;
	return cancel_after >= 0 && cancel_calls > cancel_after;
}

static gc_error pool_err;
static gc_timing pool_timing;
static gc_tuning pool_tuning;

static gc_core_ctx
make_ctx(gc_cancel_fn cancel)
{
	gc_core_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	pool_tuning = gc_tuning_defaults();
	ctx.cancel = cancel;
	ctx.tuning = &pool_tuning;
	ctx.timing = &pool_timing;
	ctx.err = &pool_err;
	gc_error_clear(&pool_err);
	return ctx;
}

/* gc_pool_radix_sort against gc_radix_sort: keys and (stable) values, bit for bit. */
static void
test_sort(void)
{
	static const int64_t sizes[] = {0, 1, 2, 3, 1000, 4095, 4096, 4097, 65535, 65536, 65537, 131072, 200003, 600001};
	int64_t		maxn = 600001;
	uint64_t   *k0 = malloc(sizeof(uint64_t) * maxn);
	uint64_t   *k1 = malloc(sizeof(uint64_t) * maxn);
	uint64_t   *k2 = malloc(sizeof(uint64_t) * maxn);
	uint64_t   *tk = malloc(sizeof(uint64_t) * maxn);
	int64_t    *v1 = malloc(sizeof(int64_t) * maxn);
	int64_t    *v2 = malloc(sizeof(int64_t) * maxn);
	int64_t    *tv = malloc(sizeof(int64_t) * maxn);

	for (int s = 0; s < (int) (sizeof(sizes) / sizeof(sizes[0])); s++)
		for (int shape = 0; shape < KEYS_NSHAPES; shape++)
		{
			int64_t		n = sizes[s];

			fill_keys(k0, n, shape);
			memcpy(k1, k0, sizeof(uint64_t) * n);
			for (int64_t i = 0; i < n; i++)
				v1[i] = i;
			CHECK(gc_radix_sort(k1, v1, tk, tv, n, NULL, NULL) == 0, "reference sort n %lld", (long long) n);
			for (int t = 0; t < UNIT_THREAD_COUNTS; t++)
			{
				gc_core_ctx ctx = make_ctx(NULL);
				int64_t		bad = -1;
				gc_status	st;

				ctx.pool = gc_pool_create(&ctx, unit_thread_counts[t]);
				memcpy(k2, k0, sizeof(uint64_t) * n);
				for (int64_t i = 0; i < n; i++)
					v2[i] = i;
				st = gc_pool_radix_sort(ctx.pool, k2, v2, tk, tv, n);
				for (int64_t i = 0; i < n && bad < 0; i++)
					if (k2[i] != k1[i] || v2[i] != v1[i] ||
						(i > 0 && (k2[i] < k2[i - 1] || (k2[i] == k2[i - 1] && v2[i] <= v2[i - 1]))))
						bad = i;
				CHECK(st == GC_OK && bad < 0,
					  "pool sort n %lld shape %d threads %d: status %d, first difference at %lld",
					  (long long) n, shape, unit_thread_counts[t], (int) st, (long long) bad);
				gc_pool_free(ctx.pool);
			}
		}
	free(k0);
	free(k1);
	free(k2);
	free(tk);
	free(v1);
	free(v2);
	free(tv);
}

/* A loop's blocks: each marks its items; one item may fail, or every block polls cancel. */
typedef struct mark_job
{
	uint8_t    *seen;
	int64_t		fail_at;		/* -1: none */
	int			poll;
	int			spin;			/* each block polls until the loop stops */
} mark_job;

static gc_status
mark_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	mark_job   *job = arg;

	if (job->spin)
	{
		/* no block ends before the stop: worker 0 must ask cancel, the others must see the flag */
		while (!gc_worker_tick(w, 1, 1))
			;
		return GC_ERR_CANCELLED;
	}
	for (int64_t i = b; i < e; i++)
	{
		if (i == job->fail_at)
		{
			gc_error_set(&w->err, GC_ERR_INTERNAL, "block failed at %lld", (long long) i);
			return GC_ERR_INTERNAL;
		}
		__atomic_fetch_add(&job->seen[i], 1, __ATOMIC_RELAXED);
	}
	if (job->poll && gc_worker_tick(w, e - b, 1))
		return GC_ERR_CANCELLED;
	return GC_OK;
}

static void
test_for(void)
{
	int64_t		n = 100003;
	uint8_t    *seen = malloc((size_t) n);

	for (int t = 0; t < UNIT_THREAD_COUNTS; t++)
	{
		int			threads = unit_thread_counts[t];
		gc_core_ctx ctx = make_ctx(cancel_cb);
		mark_job	job = {seen, -1, 1, 0};
		int64_t		wrong = 0;
		gc_status	st;

		ctx.pool = gc_pool_create(&ctx, threads);
		CHECK(ctx.pool != NULL && gc_pool_threads(ctx.pool) == threads, "pool of %d", threads);

		/* every item exactly once, for a few grains */
		cancel_after = -1;
		for (int64_t grain = 1; grain <= n * 2; grain = grain * 7 + 3)
		{
			memset(seen, 0, (size_t) n);
			st = gc_pool_for(ctx.pool, n, grain, mark_block, &job);
			wrong = 0;
			for (int64_t i = 0; i < n; i++)
				wrong += seen[i] != 1;
			CHECK(st == GC_OK && wrong == 0, "threads %d grain %lld: status %d, %lld items not seen once",
				  threads, (long long) grain, (int) st, (long long) wrong);
		}
		CHECK(gc_pool_threads_used(ctx.pool) >= 1 && gc_pool_threads_used(ctx.pool) <= threads,
			  "threads used %d of %d", gc_pool_threads_used(ctx.pool), threads);

		/* a block's failure: its status and words reach the caller */
		job.fail_at = n / 3;
		st = gc_pool_for(ctx.pool, n, 97, mark_block, &job);
		CHECK(st == GC_ERR_INTERNAL && strstr(pool_err.message, "block failed at") != NULL,
			  "threads %d failure: status %d, \"%s\"", threads, (int) st, pool_err.message);
		job.fail_at = -1;

		/*
		 * cancel: the loop stops with the canceled error, also when the
		 * other threads hold blocks that end only at the stop
		 */
		cancel_calls = 0;
		cancel_after = 3;
		job.spin = 1;
		st = gc_pool_for(ctx.pool, n, 97, mark_block, &job);
		job.spin = 0;
		CHECK(st == GC_ERR_CANCELLED && strcmp(pool_err.message, "canceled") == 0,
			  "threads %d cancel: status %d, \"%s\"", threads, (int) st, pool_err.message);

		/* and the sort stops too */
		{
			int64_t		m = 400000;
			uint64_t   *k = malloc(sizeof(uint64_t) * m);
			uint64_t   *tk = malloc(sizeof(uint64_t) * m);
			int64_t    *v = malloc(sizeof(int64_t) * m);
			int64_t    *tv = malloc(sizeof(int64_t) * m);

			fill_keys(k, m, KEYS_WIDE);
			for (int64_t i = 0; i < m; i++)
				v[i] = i;
			cancel_calls = 0;
			cancel_after = 0;
			st = gc_pool_radix_sort(ctx.pool, k, v, tk, tv, m);

			/*
			 * One thread asks at every block.  With more, worker 0 may run
			 * no block of a short loop (the others took them all), so the
			 * sort may then end: sorted, or stopped with the canceled error.
			 */
			if (threads == 1 || st != GC_OK)
				CHECK(st == GC_ERR_CANCELLED && strcmp(pool_err.message, "canceled") == 0,
					  "threads %d sort cancel: status %d, \"%s\"", threads, (int) st, pool_err.message);
			else
			{
				int64_t		unsorted = 0;

				for (int64_t i = 1; i < m; i++)
					unsorted += k[i] < k[i - 1];
				CHECK(unsorted == 0, "threads %d sort not cancelled but unsorted", threads);
			}
			free(k);
			free(tk);
			free(v);
			free(tv);
		}

		/* the pool runs loops again after a stop */
		cancel_after = -1;
		memset(seen, 0, (size_t) n);
		st = gc_pool_for(ctx.pool, n, 1000, mark_block, &job);
		wrong = 0;
		for (int64_t i = 0; i < n; i++)
			wrong += seen[i] != 1;
		CHECK(st == GC_OK && wrong == 0, "threads %d after a stop: status %d, %lld wrong",
			  threads, (int) st, (long long) wrong);
		gc_pool_free(ctx.pool);
	}
	free(seen);
}

int
main(void)
{
	test_sort();
	test_for();
	UNIT_DONE();
}
