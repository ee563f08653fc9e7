/*
 * test_kmeans_seed.c
 *    k-means++ seeding on the CPU back end's threads (src/core/kmeans_seed.c)
 *    against the one-thread reference gc_kmeans_plusplus_rows of
 *    common/kmeans_init.h: the same rows for every thread count, greedy and
 *    plain, float and double rows, on data shaped like real inputs (blobs,
 *    duplicates, few decimals, exact ties on a grid, far outliers, values
 *    near the top of the double range, wide rows, tiny inputs, k = n); and
 *    the cancel callback stops it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kmeans_init.h"
#include "pool.h"
#include "unit.h"

static gc_error seed_err;
static gc_timing seed_timing;
static gc_tuning seed_tuning;

static int	cancel_after = -1;	/* the cancel callback says yes from this call on (-1: never) */
static int	cancel_calls = 0;

static int
cancel_cb(void *arg)
{
	(void) arg;
	cancel_calls++;
	return cancel_after >= 0 && cancel_calls > cancel_after;
}

/* A core context with a pool of the given threads (free with gc_pool_free(ctx->pool)). */
static void
make_ctx(gc_core_ctx *ctx, int threads, gc_cancel_fn cancel)
{
	memset(ctx, 0, sizeof(*ctx));
	seed_tuning = gc_tuning_defaults();
	ctx->cancel = cancel;
	ctx->tuning = &seed_tuning;
	ctx->timing = &seed_timing;
	ctx->err = &seed_err;
	gc_error_clear(&seed_err);
	ctx->pool = gc_pool_create(ctx, threads);
}

/* Uniform in [0, 1) from a small LCG, so the data do not depend on libc. */
static double
unif(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (*s >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * The data shapes.  All but tiny and k = n (one block) have enough rows times
 * features that the passes run on the pool's threads.
 */
enum
{
	SHAPE_BLOBS,				/* many close clusters, n not a multiple of the block */
	SHAPE_SAME,					/* every row identical */
	SHAPE_HALF_SAME,			/* half the rows identical, the rest blobs */
	SHAPE_DECIMALS,				/* one decimal in [0, 10): many duplicates and ties */
	SHAPE_OUTLIERS,				/* blobs and a few rows very far away */
	SHAPE_TINY,					/* fewer rows than a block */
	SHAPE_K_EQ_N,				/* k = n, with duplicate rows */
	SHAPE_WIDE,					/* d = 128 */
	SHAPE_BOUNDARY,				/* one row past a block boundary */
	SHAPE_GRID,					/* integer grid: exact ties of distances, many rows midway between two */
	SHAPE_LARGE,				/* double rows near 1e150: squared distances near the top of the range */
	NSHAPES
};

static const char *const shape_name[NSHAPES] = {
	"blobs", "same", "half same", "decimals", "outliers", "tiny", "k = n", "wide", "boundary", "grid", "large"
};

/* The rows [n, d] (double) and k of a shape. */
static double *
make_shape(int shape, int64_t *n_out, int32_t *d_out, int32_t *k_out)
{
	int64_t		n;
	int32_t		d,
				k;
	uint64_t	s = 12345 + (uint64_t) shape;
	double	   *x;

	switch (shape)
	{
		case SHAPE_BLOBS:
			n = 20000, d = 4, k = 40;
			break;
		case SHAPE_SAME:
			n = 5000, d = 3, k = 30;
			break;
		case SHAPE_HALF_SAME:
			n = 12000, d = 3, k = 25;
			break;
		case SHAPE_DECIMALS:
			n = 30000, d = 2, k = 50;
			break;
		case SHAPE_OUTLIERS:
			n = 9000, d = 5, k = 20;
			break;
		case SHAPE_TINY:
			n = 700, d = 5, k = 12;
			break;
		case SHAPE_K_EQ_N:
			n = 60, d = 2, k = 60;
			break;
		case SHAPE_WIDE:
			n = 3000, d = 128, k = 16;
			break;
		case SHAPE_GRID:
			n = 20000, d = 2, k = 60;
			break;
		case SHAPE_LARGE:
			n = 12000, d = 3, k = 30;
			break;
		default:
			n = 2049, d = 16, k = 10;
			break;
	}
	x = malloc(sizeof(double) * (size_t) n * d);
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = 0; t < d; t++)
		{
			double	   *v = &x[i * d + t];
			double		centre = 10.0 * (double) ((i * 7 + t * 3) % 25);

			switch (shape)
			{
				case SHAPE_SAME:
					*v = 1.25 + t;
					break;
				case SHAPE_HALF_SAME:
					*v = i % 2 == 0 ? -3.5 : centre + unif(&s) - 0.5;
					break;
				case SHAPE_DECIMALS:
					*v = floor(unif(&s) * 100.0) / 10.0;
					break;
				case SHAPE_OUTLIERS:
					*v = i % 1500 == 7 ? 1e6 * (1 + (i % 3)) : centre + unif(&s) - 0.5;
					break;
				case SHAPE_K_EQ_N:
					*v = (double) ((i % 23) + t);
					break;
				case SHAPE_GRID:
					*v = (double) ((int) (unif(&s) * 12.0) * 2);
					break;
				case SHAPE_LARGE:
					*v = (centre + unif(&s) - 0.5) * 1e148;
					break;
				default:
					*v = centre + unif(&s) - 0.5;
					break;
			}
		}
	*n_out = n;
	*d_out = d;
	*k_out = k;
	return x;
}

/* Every shape, element type, plain and greedy, seed: the parallel rows are the reference's for every thread count. */
static void
test_same_rows(void)
{
	for (int shape = 0; shape < NSHAPES; shape++)
	{
		int64_t		n;
		int32_t		d,
					k;
		double	   *x64 = make_shape(shape, &n, &d, &k);
		float	   *x32 = malloc(sizeof(float) * (size_t) n * d);
		double	   *mind2 = malloc(sizeof(double) * (size_t) n);
		int64_t    *ref = malloc(sizeof(int64_t) * (size_t) k);
		int64_t    *got = malloc(sizeof(int64_t) * (size_t) k);

		for (int64_t i = 0; i < n * d; i++)
			x32[i] = (float) x64[i];
		for (int dt = 0; dt < 2; dt++)
			for (int greedy = 0; greedy < 2; greedy++)
				for (uint64_t seed = 0; seed < 2; seed++)
				{
					gc_dtype	dtype = dt ? GC_F64 : GC_F32;
					const void *x = dt ? (const void *) x64 : (const void *) x32;
					int32_t		ntrials = greedy ? gc_kmpp_trials(k) : 1;
					int64_t		distinct = 0;

					if (shape == SHAPE_LARGE && dtype == GC_F32)
						continue;	/* beyond float */
					CHECK(gc_kmeans_plusplus_rows(x, dtype, n, d, k, seed, ntrials, ref, mind2, NULL, NULL) == 0,
						  "%s reference", shape_name[shape]);
					/* the reference picks distinct rows while some row is off every centre */
					for (int32_t j = 0; j < k; j++)
					{
						int			seen = 0;

						for (int32_t l = 0; l < j; l++)
							seen |= ref[l] == ref[j];
						distinct += !seen;
					}
					CHECK(shape == SHAPE_SAME ? distinct >= 1 : distinct >= (shape == SHAPE_K_EQ_N ? 23 : k),
						  "%s: %lld distinct rows of %d", shape_name[shape], (long long) distinct, k);
					for (int t = 0; t < UNIT_THREAD_COUNTS; t++)
					{
						gc_core_ctx ctx;
						gc_status	st;
						int32_t		bad = -1;

						make_ctx(&ctx, unit_thread_counts[t], NULL);
						for (int32_t j = 0; j < k; j++)
							got[j] = -7;
						st = gc_core_kmeans_plusplus_rows(&ctx, x, dtype, n, d, k, seed, ntrials, got, mind2);
						for (int32_t j = 0; j < k && bad < 0; j++)
							if (got[j] != ref[j])
								bad = j;
						CHECK(st == GC_OK && bad < 0,
							  "%s %s %s seed %d threads %d: status %d, first difference at centre %d (%lld, reference %lld)",
							  shape_name[shape], dt ? "double" : "float", greedy ? "greedy" : "plain", (int) seed,
							  unit_thread_counts[t], (int) st, bad, bad < 0 ? -1LL : (long long) got[bad],
							  bad < 0 ? -1LL : (long long) ref[bad]);
						/* the passes ran on several threads (one block, or no pass at all, runs on one) */
						if (unit_thread_counts[t] > 1 && shape != SHAPE_TINY && shape != SHAPE_K_EQ_N &&
							shape != SHAPE_SAME)
							CHECK(gc_pool_threads_used(ctx.pool) > 1, "%s threads %d: ran on %d",
								  shape_name[shape], unit_thread_counts[t], gc_pool_threads_used(ctx.pool));
						gc_pool_free(ctx.pool);
					}
				}
		free(x64);
		free(x32);
		free(mind2);
		free(ref);
		free(got);
	}
}

/* k = 1 and k = 2, and one row: the first draw alone, or one step. */
static void
test_small_k(void)
{
	int64_t		n = 5000;
	int32_t		d = 3;
	double	   *x = malloc(sizeof(double) * (size_t) n * d);
	double	   *mind2 = malloc(sizeof(double) * (size_t) n);
	uint64_t	s = 99;

	for (int64_t i = 0; i < n * d; i++)
		x[i] = unif(&s) * 100.0;
	for (int32_t k = 1; k <= 2; k++)
		for (int64_t m = 1; m <= n; m += n - 1)
		{
			int64_t		ref[2] = {-1, -1},
						got[2] = {-1, -1};

			if (k > m)
				continue;
			CHECK(gc_kmeans_plusplus_rows(x, GC_F64, m, d, k, 5, gc_kmpp_trials(k), ref, mind2, NULL, NULL) == 0,
				  "small k reference");
			for (int t = 0; t < UNIT_THREAD_COUNTS; t++)
			{
				gc_core_ctx ctx;
				gc_status	st;

				make_ctx(&ctx, unit_thread_counts[t], NULL);
				st = gc_core_kmeans_plusplus_rows(&ctx, x, GC_F64, m, d, k, 5, gc_kmpp_trials(k), got, mind2);

				CHECK(st == GC_OK && got[0] == ref[0] && (k < 2 || got[1] == ref[1]),
					  "k %d n %lld threads %d: status %d, rows %lld %lld, reference %lld %lld", k, (long long) m,
					  unit_thread_counts[t], (int) st, (long long) got[0], (long long) got[1],
					  (long long) ref[0], (long long) ref[1]);
				gc_pool_free(ctx.pool);
			}
		}
	free(x);
	free(mind2);
}

/*
 * Cancel: the callback saying yes stops the seeding with the canceled
 * error, between steps and inside one long pass over the rows (k = 2: one
 * update pass of 16M coordinates asks several times).
 */
static void
test_cancel(void)
{
	int64_t		n = 1000000;
	int32_t		d = 16;
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	double	   *mind2 = malloc(sizeof(double) * (size_t) n);
	int64_t		rows[100];
	uint64_t	s = 7;

	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) (unif(&s) * 10.0);
	for (int t = 0; t < UNIT_THREAD_COUNTS; t++)
	{
		int			threads = unit_thread_counts[t];
		static const int after[] = {0, 2, 40};

		for (int a = 0; a < 3; a++)
		{
			/* after 2: inside the first pass, on one thread, where the asks come at fixed points of the work */
			int32_t		k = after[a] == 2 ? 2 : 100;
			gc_core_ctx ctx;
			gc_status	st;

			if (after[a] == 2 && threads != 1)
				continue;
			make_ctx(&ctx, threads, cancel_cb);
			cancel_calls = 0;
			cancel_after = after[a];
			st = gc_core_kmeans_plusplus_rows(&ctx, x, GC_F32, n, d, k, 1, gc_kmpp_trials(k), rows, mind2);
			/* once it said yes the callback is not asked again */
			CHECK(st == GC_ERR_CANCELLED && strcmp(seed_err.message, "canceled") == 0 &&
				  cancel_calls == after[a] + 1,
				  "threads %d cancel after %d: status %d \"%s\", %d calls", threads, after[a], (int) st,
				  seed_err.message, cancel_calls);
			gc_pool_free(ctx.pool);
		}
		/* and a cancel callback that never says yes changes nothing */
		{
			int64_t		ref[8],
						got[8];
			gc_core_ctx ctx;
			gc_status	st;

			make_ctx(&ctx, threads, cancel_cb);
			cancel_calls = 0;
			cancel_after = -1;
			CHECK(gc_kmeans_plusplus_rows(x, GC_F32, n / 10, d, 8, 3, gc_kmpp_trials(8), ref, mind2, NULL, NULL) == 0,
				  "cancel reference");
			st = gc_core_kmeans_plusplus_rows(&ctx, x, GC_F32, n / 10, d, 8, 3, gc_kmpp_trials(8), got, mind2);
			CHECK(st == GC_OK && memcmp(ref, got, sizeof(ref)) == 0 && cancel_calls > 0,
				  "threads %d never cancelled: status %d, %d calls", threads, (int) st, cancel_calls);
			gc_pool_free(ctx.pool);
		}
	}
	free(x);
	free(mind2);
}

int
main(void)
{
	test_same_rows();
	test_small_k();
	test_cancel();
	UNIT_DONE();
}
