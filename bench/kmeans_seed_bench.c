/*
 * kmeans_seed_bench.c
 *    k-means++ seeding alone, without PostgreSQL: the one-thread reference
 *    (gc_kmeans_plusplus_rows of common/kmeans_init.h, what the CPU back end
 *    ran before it seeded on its threads) against the CPU back end's
 *    gc_core_kmeans_plusplus_rows on 1, 2, ... threads; the time of each
 *    (best of R calls) and whether the rows are the reference's.
 *
 *   .bench/kmeans_seed_bench [--threads 1,2] [--reps R] [--scale F]
 *
 *   blobs     1M x 8 rows around 100 centres (+-0.5 per feature), k = 100
 *   same      200k identical rows x 8, k = 50
 *   Both greedy (2 + ln k candidates per step) and plain (one).
 *   --scale   multiplies every n (0.1 for a quick run)
 *
 * Built by bench/Makefile (make -C bench kmeans_seed_bench).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "kmeans_init.h"
#include "pool.h"

#define MAX_COUNTS 16

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Uniform in [0, 1) from a small LCG. */
static double
unif(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (*s >> 11) * (1.0 / 9007199254740992.0);
}

static gc_error bench_err;
static gc_timing bench_timing;
static gc_tuning bench_tuning;

int
main(int argc, char **argv)
{
	int			counts[MAX_COUNTS] = {1, 2};
	int			ncounts = 2;
	int			reps = 1;
	double		scale = 1.0;

	for (int a = 1; a < argc; a++)
	{
		if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
		{
			char	   *p = argv[++a];

			ncounts = 0;
			while (*p && ncounts < MAX_COUNTS)
			{
				counts[ncounts++] = (int) strtol(p, &p, 10);
				if (*p == ',')
					p++;
			}
		}
		else if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc)
			reps = atoi(argv[++a]);
		else if (strcmp(argv[a], "--scale") == 0 && a + 1 < argc)
			scale = atof(argv[++a]);
		else
		{
			fprintf(stderr, "usage: %s [--threads 1,2] [--reps R] [--scale F]\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;

	printf("%-6s %8s %3s %4s %-6s %-10s %10s %s\n", "case", "n", "d", "k", "init", "run", "seconds", "rows");
	for (int c = 0; c < 2; c++)
	{
		int64_t		n = (int64_t) ((c == 0 ? 1000000 : 200000) * scale);
		int32_t		d = 8;
		int32_t		k = c == 0 ? 100 : 50;
		float	   *x = malloc(sizeof(float) * (size_t) n * d);
		double	   *mind2 = malloc(sizeof(double) * (size_t) n);
		int64_t    *ref = malloc(sizeof(int64_t) * (size_t) k);
		int64_t    *got = malloc(sizeof(int64_t) * (size_t) k);
		uint64_t	s = 42;

		if (n < k)
			n = k;
		for (int64_t i = 0; i < n; i++)
			for (int32_t t = 0; t < d; t++)
				x[i * d + t] = c == 0 ? (float) (20.0 * (double) ((i * 37 + t * 11) % 100) + unif(&s) - 0.5)
					: 1.5f;
		for (int greedy = 1; greedy >= 0; greedy--)
		{
			int32_t		ntrials = greedy ? gc_kmpp_trials(k) : 1;
			double		best = 1e300;

			for (int r = 0; r < reps; r++)
			{
				double		t0 = now_s();

				if (gc_kmeans_plusplus_rows(x, GC_F32, n, d, k, 7, ntrials, ref, mind2, NULL, NULL) != 0)
					return 1;
				t0 = now_s() - t0;
				best = t0 < best ? t0 : best;
			}
			printf("%-6s %8lld %3d %4d %-6s %-10s %10.3f %s\n", c == 0 ? "blobs" : "same", (long long) n, d, k,
				   greedy ? "greedy" : "plain", "reference", best, "-");
			for (int t = 0; t < ncounts; t++)
			{
				gc_core_ctx ctx;
				int			same = 1;

				memset(&ctx, 0, sizeof(ctx));
				bench_tuning = gc_tuning_defaults();
				ctx.tuning = &bench_tuning;
				ctx.timing = &bench_timing;
				ctx.err = &bench_err;
				best = 1e300;
				for (int r = 0; r < reps; r++)
				{
					double		t0;

					ctx.pool = gc_pool_create(&ctx, counts[t]);
					t0 = now_s();
					if (gc_core_kmeans_plusplus_rows(&ctx, x, GC_F32, n, d, k, 7, ntrials, got, mind2) != GC_OK)
						return 1;
					t0 = now_s() - t0;
					gc_pool_free(ctx.pool);
					best = t0 < best ? t0 : best;
					same &= memcmp(got, ref, sizeof(int64_t) * (size_t) k) == 0;
				}
				printf("%-6s %8lld %3d %4d %-6s threads %-2d %10.3f %s\n", c == 0 ? "blobs" : "same", (long long) n,
					   d, k, greedy ? "greedy" : "plain", counts[t], best, same ? "same" : "DIFFERENT");
			}
		}
		free(x);
		free(mind2);
		free(ref);
		free(got);
	}
	return 0;
}
