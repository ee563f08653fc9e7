/*
 * kmeans_gemm_bench.c
 *    The checked nearest-centroid search through OpenBLAS (src/core/
 *    kmeans_gemm.c) against the exact loop of kmeans.c (the distances of a
 *    row to the transposed centroids, vectorized over the centroids), on one
 *    thread: the time of each, rows per second, the share of rows with more
 *    than one candidate, and whether every label and distance is the same,
 *    bit for bit.
 *
 *   .bench/kmeans_gemm_bench [--n N] [--d D] [--k K] [--iters I] [--double]
 *                            [--sweep] [--reps R]
 *
 *   default   100k x 128 overlapping blobs (threads_bench's kmeans128:
 *             256 blobs of sd 10 in [0, 100]^128, 5 % noise), k = 256,
 *             initial centroids k rows at a fixed stride, I = 5 iterations
 *             of Lloyd's algorithm: each assignment timed both ways
 *   --double  the same rows as double precision (DGEMM)
 *   --sweep   one assignment per (d, k) of d 2 .. 512, k 4 .. 1024, for
 *             the d and k where the product starts to pay
 *   --reps    the best of R timings of each assignment (default 1)
 *
 * Without OpenBLAS the product's column times its exact fallback.  Built by
 * bench/Makefile (make -C bench kmeans_gemm_bench).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "blas.h"
#include "gc_testdata.h"
#include "kmeans_gemm.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------- kmeans.c's exact loop */

#if defined(__GNUC__) && !defined(__clang__)
#define KM_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define KM_VECTORIZE
#endif

#define DIST_BODY(T) \
	for (int32_t j = 0; j < k; j++) \
		dist[j] = 0.0; \
	for (int32_t t = 0; t < d; t++) \
	{ \
		const double xt = (double) row[t]; \
		const double *ct = cent + (int64_t) t * k; \
\
		for (int32_t j = 0; j < k; j++) \
		{ \
			double		diff = xt - ct[j]; \
\
			dist[j] += diff * diff; \
		} \
	}

typedef void (*dist_fn) (const void *row, int32_t d, const double *cent, int32_t k, double *dist);

KM_VECTORIZE static void
dist_generic(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const float *__restrict__ row = r;

	DIST_BODY(float)
}

KM_VECTORIZE static void
dist_generic_f64(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const double *__restrict__ row = r;

	DIST_BODY(double)
}

#if defined(__GNUC__) && defined(__x86_64__)
KM_VECTORIZE __attribute__((target("avx2"))) static void
dist_avx2(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const float *__restrict__ row = r;

	DIST_BODY(float)
}

KM_VECTORIZE __attribute__((target("avx512f"))) static void
dist_avx512(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const float *__restrict__ row = r;

	DIST_BODY(float)
}

KM_VECTORIZE __attribute__((target("avx2"))) static void
dist_avx2_f64(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const double *__restrict__ row = r;

	DIST_BODY(double)
}

KM_VECTORIZE __attribute__((target("avx512f"))) static void
dist_avx512_f64(const void *r, int32_t d, const double *__restrict__ cent, int32_t k, double *__restrict__ dist)
{
	const double *__restrict__ row = r;

	DIST_BODY(double)
}
#endif

static dist_fn
pick_kernel(gc_dtype dt)
{
#if defined(__GNUC__) && defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return dt == GC_F64 ? dist_avx512_f64 : dist_avx512;
	if (__builtin_cpu_supports("avx2"))
		return dt == GC_F64 ? dist_avx2_f64 : dist_avx2;
#endif
	return dt == GC_F64 ? dist_generic_f64 : dist_generic;
}

/* The exact search of kmeans.c's assign_rows over every row. */
static void
exact_assign(const void *x, gc_dtype dt, int64_t n, int32_t d, const double *cen, int32_t k,
			 int32_t *label, double *best)
{
	double	   *cent = malloc(sizeof(double) * (size_t) k * d);
	double	   *dist = malloc(sizeof(double) * (size_t) k);
	dist_fn		fn = pick_kernel(dt);
	size_t		es = dt == GC_F64 ? sizeof(double) : sizeof(float);

	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cent[(int64_t) t * k + j] = cen[(int64_t) j * d + t];
	for (int64_t i = 0; i < n; i++)
	{
		double		b;
		int32_t		bj = 0;

		fn((const char *) x + (size_t) i * d * es, d, cent, k, dist);
		b = dist[0];
		for (int32_t j = 1; j < k; j++)
			if (dist[j] < b)
			{
				b = dist[j];
				bj = j;
			}
		label[i] = bj;
		best[i] = b;
	}
	free(cent);
	free(dist);
}

/* ---------------------------------------------------------------- the checked search */

/* The checked search over every row, batch by batch as a pool worker runs it; stats added to. */
static int
checked_assign(const void *x, gc_dtype dt, int64_t n, int32_t d, const double *cen, int32_t k,
			   const double *mu, int32_t *label, double *best, double *second, gc_kmg_stats *st)
{
	gc_kmg	   *p = gc_kmg_create(k, d, dt);
	gc_kmg_scratch *s;
	int32_t		b;
	int64_t		work = 0;

	if (!p)
		return -1;
	gc_kmg_prepare(p, cen, mu);
	s = gc_kmg_scratch_create(p, 0);
	if (!s)
		return -1;
	b = gc_kmg_batch(s);
	for (int64_t i = 0; i < n; i += b)
		work += gc_kmg_assign(p, s, x, NULL, i, (int32_t) (n - i < b ? n - i : b), label + i,
							  best + i, second + i, st);
	gc_kmg_scratch_free(s);
	gc_kmg_free(p);
	return work > 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- data */

/* threads_bench's kmeans128 rows (as dt) and its initial centroids. */
static void *
make_rows(int64_t n, int32_t d, int32_t k, gc_dtype dt, double *cen)
{
	float	   *x = gc_td_alloc(n, d);
	gc_td_blob_spec s = {k < 256 ? 256 : k, 100.0, 5.0, 10.0, 0.05};

	if (!x || gc_td_blobs(x, n, d, &s, gc_td_seed("wideblobs", n, d), NULL) != 0)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cen[(size_t) j * d + t] = x[((int64_t) j * (n / k) + 17) % n * d + t];
	if (dt == GC_F64)
	{
		double	   *y = malloc(sizeof(double) * (size_t) n * d);

		for (int64_t i = 0; i < n * d; i++)
			y[i] = x[i];
		free(x);
		return y;
	}
	return x;
}

static double
value(const void *x, gc_dtype dt, int64_t i)
{
	return dt == GC_F64 ? ((const double *) x)[i] : (double) ((const float *) x)[i];
}

/* The data mean, the centre of the product. */
static void
data_mean(const void *x, gc_dtype dt, int64_t n, int32_t d, double *mu)
{
	memset(mu, 0, sizeof(double) * (size_t) d);
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = 0; t < d; t++)
			mu[t] += value(x, dt, i * d + t);
	for (int32_t t = 0; t < d; t++)
		mu[t] /= (double) n;
}

/* Moves every centroid holding rows to their mean. */
static void
update(const void *x, gc_dtype dt, int64_t n, int32_t d, const int32_t *label, double *cen,
	   int32_t k)
{
	double	   *sum = calloc((size_t) k * d, sizeof(double));
	int64_t    *cnt = calloc(k, sizeof(int64_t));

	for (int64_t i = 0; i < n; i++)
	{
		for (int32_t t = 0; t < d; t++)
			sum[(int64_t) label[i] * d + t] += value(x, dt, i * d + t);
		cnt[label[i]]++;
	}
	for (int32_t j = 0; j < k; j++)
		if (cnt[j])
			for (int32_t t = 0; t < d; t++)
				cen[(int64_t) j * d + t] = sum[(int64_t) j * d + t] / cnt[j];
	free(sum);
	free(cnt);
}

/* ---------------------------------------------------------------- one comparison */

typedef struct result
{
	double		exact_ms;
	double		checked_ms;
	int64_t		mismatches;
	gc_kmg_stats st;
} result;

static result
compare(const void *x, gc_dtype dt, int64_t n, int32_t d, const double *cen, int32_t k,
		const double *mu, int reps, int32_t *label)
{
	result		r;
	int32_t    *l2 = malloc(sizeof(int32_t) * (size_t) n);
	double	   *b1 = malloc(sizeof(double) * (size_t) n);
	double	   *b2 = malloc(sizeof(double) * (size_t) n);
	double	   *s2 = malloc(sizeof(double) * (size_t) n);

	memset(&r, 0, sizeof(r));
	r.exact_ms = r.checked_ms = HUGE_VAL;
	for (int rep = 0; rep < reps; rep++)
	{
		double		t0 = now_ms(),
					t1;

		exact_assign(x, dt, n, d, cen, k, label, b1);
		t1 = now_ms();
		if (t1 - t0 < r.exact_ms)
			r.exact_ms = t1 - t0;
		memset(&r.st, 0, sizeof(r.st));
		t0 = now_ms();
		if (checked_assign(x, dt, n, d, cen, k, mu, l2, b2, s2, &r.st) != 0)
		{
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		t1 = now_ms();
		if (t1 - t0 < r.checked_ms)
			r.checked_ms = t1 - t0;
	}
	for (int64_t i = 0; i < n; i++)
		r.mismatches += label[i] != l2[i] || memcmp(&b1[i], &b2[i], sizeof(double)) != 0;
	free(l2);
	free(b1);
	free(b2);
	free(s2);
	return r;
}

static int
sweep(gc_dtype dt, int reps)
{
	const int32_t ds[] = {2, 4, 8, 16, 32, 64, 128, 512};
	const int32_t ks[] = {4, 16, 64, 256, 1024};
	int64_t		bad = 0;

	printf("speed-up of the checked search over the exact loop (exact ms / checked ms), one thread\n");
	printf("%6s", "d \\ k");
	for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
		printf(" %15d", ks[b]);
	printf("\n");
	for (size_t a = 0; a < sizeof(ds) / sizeof(ds[0]); a++)
	{
		printf("%6d", ds[a]);
		for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
		{
			int32_t		d = ds[a],
						k = ks[b];
			int64_t		n = ((int64_t) 1 << 26) / ((int64_t) k * d);
			double	   *cen,
					   *mu = malloc(sizeof(double) * (size_t) d);
			void	   *x;
			int32_t    *label;
			result		r;

			n = n < 4000 ? 4000 : n > 200000 ? 200000 : n;
			cen = malloc(sizeof(double) * (size_t) k * d);
			label = malloc(sizeof(int32_t) * (size_t) n);
			x = make_rows(n, d, k, dt, cen);
			data_mean(x, dt, n, d, mu);
			/* one Lloyd step first: centroids as in the middle of a run */
			{
				double	   *b = malloc(sizeof(double) * (size_t) n);

				exact_assign(x, dt, n, d, cen, k, label, b);
				free(b);
			}
			update(x, dt, n, d, label, cen, k);
			r = compare(x, dt, n, d, cen, k, mu, reps, label);
			bad += r.mismatches;
			printf(" %6.2fx (%4.1f%%)", r.exact_ms / r.checked_ms, 100.0 * r.st.multi / n);
			fflush(stdout);
			free(x);
			free(cen);
			free(mu);
			free(label);
		}
		printf("\n");
	}
	printf("(in brackets: rows with more than one candidate)\n");
	printf("answers equal: %s\n", bad ? "NO" : "yes, every label and distance bit for bit");
	return bad ? 1 : 0;
}

int
main(int argc, char **argv)
{
	int64_t		n = 100000;
	int32_t		d = 128,
				k = 256;
	int			iters = 5,
				reps = 1,
				do_sweep = 0;
	gc_dtype	dt = GC_F32;
	double	   *cen,
			   *mu;
	void	   *x;
	int32_t    *label;
	int64_t		bad = 0;
	double		te = 0,
				tc = 0;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
			n = atoll(argv[++i]);
		else if (strcmp(argv[i], "--d") == 0 && i + 1 < argc)
			d = atoi(argv[++i]);
		else if (strcmp(argv[i], "--k") == 0 && i + 1 < argc)
			k = atoi(argv[++i]);
		else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--double") == 0)
			dt = GC_F64;
		else if (strcmp(argv[i], "--sweep") == 0)
			do_sweep = 1;
		else
		{
			fprintf(stderr, "usage: %s [--n N] [--d D] [--k K] [--iters I] [--double] [--sweep] [--reps R]\n",
					argv[0]);
			return 2;
		}
	}
	if (n < k || d < 1 || k < 1 || reps < 1)
	{
		fprintf(stderr, "need n >= k >= 1, d >= 1, reps >= 1\n");
		return 2;
	}
	printf("%s\n", gc_blas_describe());
	printf("rows in %s precision; one thread; timings on this machine as it is loaded now\n",
		   dt == GC_F64 ? "double" : "single");
	if (do_sweep)
		return sweep(dt, reps);

	cen = malloc(sizeof(double) * (size_t) k * d);
	mu = malloc(sizeof(double) * (size_t) d);
	label = malloc(sizeof(int32_t) * (size_t) n);
	x = make_rows(n, d, k, dt, cen);
	data_mean(x, dt, n, d, mu);
	printf("%lld x %d, k = %d, %d iterations\n", (long long) n, d, k, iters);
	printf("%5s %10s %10s %12s %12s %8s %9s %6s\n", "iter", "exact ms", "gemm ms", "exact rows/s",
		   "gemm rows/s", "> 1 cand", "exact/row", "equal");
	for (int it = 0; it < iters; it++)
	{
		result		r = compare(x, dt, n, d, cen, k, mu, reps, label);

		te += r.exact_ms;
		tc += r.checked_ms;
		bad += r.mismatches;
		printf("%5d %10.1f %10.1f %12.0f %12.0f %7.2f%% %9.3f %6s\n", it + 1, r.exact_ms,
			   r.checked_ms, n / (r.exact_ms / 1e3), n / (r.checked_ms / 1e3),
			   100.0 * r.st.multi / n, (double) r.st.exact / n, r.mismatches ? "NO" : "yes");
		update(x, dt, n, d, label, cen, k);
	}
	printf("total: exact %.1f ms, checked %.1f ms, speed-up %.2fx; answers %s\n", te, tc, te / tc,
		   bad ? "DIFFER" : "equal bit for bit");
	free(x);
	free(cen);
	free(mu);
	free(label);
	return bad ? 1 : 0;
}
