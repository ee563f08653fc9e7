/*
 * test_kmeans.c
 *    Unit tests of the CPU k-means (src/core/kmeans.c), called through the
 *    CPU back end's table (gc_cpu_api), of the shared initialization code
 *    (common/kmeans_init.h) and of the generator (common/rng.h).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kmeans_init.h"
#include "metric.h"
#include "unit.h"

typedef struct Run
{
	int32_t    *labels;
	double	   *distance;
	double	   *centroids;
	int64_t    *sizes;
	double	   *inertia;
	gc_kmeans_result res;
	gc_status	st;
	char		message[GC_ERROR_TEXT];	/* the back end's message after the run */
	gc_timing	timing;
} Run;

/* k-means of rows of element type dt through the CPU back end's table into fresh result arrays. */
static void
run_kmeans_dt(Run *r, const void *x, gc_dtype dt, int64_t n, int32_t d, const gc_kmeans_params *p)
{
	int32_t		k = p->k > 0 ? p->k : 1;

	r->labels = calloc(n, sizeof(int32_t));
	r->distance = calloc(n, sizeof(double));
	r->centroids = calloc((size_t) k * d, sizeof(double));
	r->sizes = calloc(k, sizeof(int64_t));
	r->inertia = calloc(k, sizeof(double));
	r->res.labels = r->labels;
	r->res.distance = r->distance;
	r->res.centroids = r->centroids;
	r->res.sizes = r->sizes;
	r->res.inertia = r->inertia;
	r->res.iterations = 0;
	{
		gc_exec		e = unit_exec(NULL, &r->timing);

		r->st = gc_cpu_api()->kmeans(&e, x, dt, n, d, p, &r->res);
	}
	snprintf(r->message, sizeof(r->message), "%s", unit_error());
}

/* k-means of float rows. */
static void
run_kmeans(Run *r, const float *x, int64_t n, int32_t d, const gc_kmeans_params *p)
{
	run_kmeans_dt(r, x, GC_F32, n, d, p);
}

/* Frees the result arrays of a run. */
static void
free_run(Run *r)
{
	free(r->labels);
	free(r->distance);
	free(r->centroids);
	free(r->sizes);
	free(r->inertia);
}

/* k-means parameters with the SQL defaults. */
static gc_kmeans_params
params(int32_t k, gc_kmeans_init init, const double *given)
{
	gc_kmeans_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.k = k;
	p.max_iter = 300;
	p.tol = 1e-4;
	p.seed = 0;
	p.init = init;
	p.initial_centroids = given;
	p.precision = GC_PRECISION_FP32;
	p.n_init = 1;
	return p;
}

/* Uniform in [0, 1) from a small LCG, so the data do not depend on libc. */
static double
unif(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (*s >> 11) * (1.0 / 9007199254740992.0);
}

/* n points around each of the centres [nc, d], spread +-0.5 per feature. */
static float *
blobs(int nc, int per, int32_t d, const double *centres, uint64_t seed)
{
	float	   *x = malloc(sizeof(float) * (size_t) nc * per * d);
	uint64_t	s = seed;

	for (int i = 0; i < nc * per; i++)
		for (int t = 0; t < d; t++)
			x[(size_t) i * d + t] = (float) (centres[(i % nc) * d + t] + unif(&s) - 0.5);
	return x;
}

/* The final state is a fixed point: labels are nearest, distances and inertia agree. */
static void
check_consistent(const Run *r, const float *x, int64_t n, int32_t d, int32_t k, const char *what)
{
	int			bad_label = 0,
				bad_dist = 0;
	int64_t    *sizes = calloc(k, sizeof(int64_t));
	double	   *inertia = calloc(k, sizeof(double));
	int			bad_size = 0,
				bad_inertia = 0;

	for (int64_t i = 0; i < n; i++)
	{
		double		best = HUGE_VAL;

		for (int32_t j = 0; j < k; j++)
		{
			double		s = 0.0;

			for (int32_t t = 0; t < d; t++)
			{
				double		diff = x[i * d + t] - r->centroids[j * d + t];

				s += diff * diff;
			}
			if (s < best)
				best = s;
		}
		{
			int32_t		l = r->labels[i];
			double		s = 0.0;

			for (int32_t t = 0; t < d; t++)
			{
				double		diff = x[i * d + t] - r->centroids[l * d + t];

				s += diff * diff;
			}
			if (s > best * (1 + 1e-12) + 1e-300)
				bad_label++;
			if (fabs(sqrt(s) - r->distance[i]) > 1e-9 * (1 + sqrt(s)))
				bad_dist++;
			sizes[l]++;
			inertia[l] += s;
		}
	}
	for (int32_t j = 0; j < k; j++)
	{
		if (sizes[j] != r->sizes[j])
			bad_size++;
		if (fabs(inertia[j] - r->inertia[j]) > 1e-9 * (1 + inertia[j]))
			bad_inertia++;
	}
	CHECK(bad_label == 0, "%s: %d rows not at their nearest centroid", what, bad_label);
	CHECK(bad_dist == 0, "%s: %d wrong distances", what, bad_dist);
	CHECK(bad_size == 0, "%s: %d wrong cluster sizes", what, bad_size);
	CHECK(bad_inertia == 0, "%s: %d wrong inertias", what, bad_inertia);
	free(sizes);
	free(inertia);
}

/* Three separated blobs with given initial centroids: the known answer. */
static void
test_known_answer(void)
{
	const double centres[] = {0, 0, 10, 0, 0, 10};
	const double init[] = {1, 1, 9, 1, 1, 9};
	float	   *x = blobs(3, 100, 2, centres, 1);
	gc_kmeans_params p = params(3, GC_KMEANS_INIT_GIVEN, init);
	Run			r;
	int			wrong = 0;

	run_kmeans(&r, x, 300, 2, &p);
	CHECK(r.st == GC_OK, "known answer: status %d (%s)", r.st, r.message);
	for (int i = 0; i < 300; i++)
		wrong += r.labels[i] != i % 3;
	CHECK(wrong == 0, "known answer: %d rows in the wrong cluster", wrong);
	for (int j = 0; j < 3; j++)
	{
		double		m[2] = {0, 0};

		for (int i = j; i < 300; i += 3)
			for (int t = 0; t < 2; t++)
				m[t] += x[i * 2 + t];
		for (int t = 0; t < 2; t++)
		{
			m[t] /= 100;
			CHECK(fabs(r.centroids[j * 2 + t] - m[t]) < 1e-12,
				  "known answer: centroid %d[%d] = %g, mean %g", j, t, r.centroids[j * 2 + t], m[t]);
		}
		CHECK(r.sizes[j] == 100, "known answer: size %d = %lld", j, (long long) r.sizes[j]);
	}
	CHECK(r.res.iterations == 2, "known answer: %d iterations (one to move, one to see nothing change)",
		  r.res.iterations);
	check_consistent(&r, x, 300, 2, 3, "known answer");
	free_run(&r);
	free(x);
}

/* The same seed gives the same result; k-means++ and random pick distinct rows. */
static void
test_seeded(void)
{
	const double centres[] = {0, 0, 0, 20, 0, 0, 0, 20, 0, 20, 20, 0, 5, 5, 5, 40, 40, 40};
	float	   *x = blobs(6, 200, 3, centres, 7);
	int64_t		n = 1200;

	for (int m = 0; m < 2; m++)
	{
		gc_kmeans_init init = m == 0 ? GC_KMEANS_INIT_PLUSPLUS : GC_KMEANS_INIT_RANDOM;
		const char *name = m == 0 ? "k-means++" : "random";
		gc_kmeans_params p = params(6, init, NULL);
		Run			a,
					b;

		p.seed = 42;
		run_kmeans(&a, x, n, 3, &p);
		run_kmeans(&b, x, n, 3, &p);
		CHECK(a.st == GC_OK && b.st == GC_OK, "%s: status %d %d", name, a.st, b.st);
		CHECK(memcmp(a.labels, b.labels, sizeof(int32_t) * n) == 0, "%s: labels differ between runs", name);
		CHECK(memcmp(a.centroids, b.centroids, sizeof(double) * 18) == 0, "%s: centroids differ", name);
		CHECK(a.res.iterations == b.res.iterations, "%s: iterations differ", name);
		check_consistent(&a, x, n, 3, 6, name);
		free_run(&a);
		free_run(&b);
	}

	/* k-means++ on separated blobs puts one centre in each blob. */
	for (uint64_t seed = 0; seed < 20; seed++)
	{
		int64_t		rows[6];
		double	   *mind2 = malloc(sizeof(double) * n);
		int			seen[6] = {0};
		int			blobs_hit = 0;

		CHECK(gc_kmeans_plusplus_rows(x, GC_F32, n, 3, 6, seed, gc_kmpp_trials(6), rows, mind2, NULL, NULL) == 0, "k-means++ rows");
		for (int j = 0; j < 6; j++)
			seen[rows[j] % 6] = 1;
		for (int j = 0; j < 6; j++)
			blobs_hit += seen[j];
		CHECK(blobs_hit == 6, "k-means++ seed %llu: only %d of 6 blobs seeded",
			  (unsigned long long) seed, blobs_hit);
		free(mind2);
	}
	free(x);

	/* random rows: distinct, in range, reproducible, on both code paths. */
	for (int c = 0; c < 2; c++)
	{
		int64_t		n2 = c == 0 ? 1000 : 12;
		int32_t		k = 10;
		int64_t		a[10],
					b[10];
		int			dup = 0,
					out = 0;

		CHECK(gc_kmeans_random_rows(n2, k, 5, a) == 0, "random rows");
		CHECK(gc_kmeans_random_rows(n2, k, 5, b) == 0, "random rows");
		CHECK(memcmp(a, b, sizeof(a)) == 0, "random rows differ for the same seed (n = %lld)", (long long) n2);
		for (int i = 0; i < k; i++)
		{
			out += a[i] < 0 || a[i] >= n2;
			for (int j = 0; j < i; j++)
				dup += a[i] == a[j];
		}
		CHECK(dup == 0 && out == 0, "random rows (n = %lld): %d repeated, %d out of range",
			  (long long) n2, dup, out);
	}
}

/* The generator is xoshiro256** seeded by splitmix64: pinned values. */
static void
test_rng(void)
{
	gc_rng		rng;
	uint64_t	first = gc_mix64(0);	/* splitmix64's first output from state 0 */
	int			hist[5] = {0};

	CHECK(first == UINT64_C(0xE220A8397B1DCDAF), "splitmix64(0) = %016llx", (unsigned long long) first);
	gc_rng_seed(&rng, 1);
	for (int i = 0; i < 50000; i++)
		hist[gc_rng_below(&rng, 5)]++;
	for (int i = 0; i < 5; i++)
		CHECK(abs(hist[i] - 10000) < 500, "rng_below(5) bucket %d holds %d of 50000", i, hist[i]);

	/* The integer weights of k-means++ never overflow. */
	{
		int64_t		n = 10000000;
		double		maxd2 = 123456.789;
		double		scale = gc_kmpp_scale(maxd2, n);
		double		total = (double) gc_kmpp_weight(maxd2, scale) * (double) n;

		CHECK(total < 4611686018427387904.0 && total > 1e18, "k-means++ weight total %g", total);
		CHECK(gc_kmpp_scale(0.0, n) == 0.0, "k-means++ scale of zero");
		/* tiny (subnormal) values: a finite factor, weights that do not overflow */
		scale = gc_kmpp_scale(1e-310, n);
		CHECK(isfinite(scale) && gc_kmpp_weight(1e-310, scale) == 0, "k-means++ scale of 1e-310: %g", scale);
		scale = gc_kmpp_scale(1e-300, 2);
		CHECK(isfinite(scale) && (double) gc_kmpp_weight(1e-300, scale) * 2 < 4611686018427387904.0,
			  "k-means++ scale of 1e-300: %g", scale);
	}
}

/* An initial centroid far from every row gets re-seeded, and nothing stays empty. */
static void
test_empty_cluster(void)
{
	const float x[] = {0, 1, 2, 3, 10, 11, 12, 13};
	const double init[] = {0, 1000, 11};
	gc_kmeans_params p = params(3, GC_KMEANS_INIT_GIVEN, init);
	Run			r;

	run_kmeans(&r, x, 8, 1, &p);
	CHECK(r.st == GC_OK, "empty cluster: status %d (%s)", r.st, r.message);
	for (int j = 0; j < 3; j++)
		CHECK(r.sizes[j] > 0, "empty cluster: cluster %d is empty", j);
	CHECK(r.centroids[1] < 100, "empty cluster: centroid 1 still at %g", r.centroids[1]);
	check_consistent(&r, x, 8, 1, 3, "empty cluster");
	free_run(&r);

	/* Duplicated initial centroids: the second copy gets re-seeded. */
	{
		const double twice[] = {0, 0, 11};

		p = params(3, GC_KMEANS_INIT_GIVEN, twice);
		run_kmeans(&r, x, 8, 1, &p);
		CHECK(r.st == GC_OK, "duplicate centroid: status %d", r.st);
		for (int j = 0; j < 3; j++)
			CHECK(r.sizes[j] > 0, "duplicate centroid: cluster %d is empty", j);
		free_run(&r);
	}

	/* k = n: every row its own cluster, inertia zero. */
	{
		double		tot = 0;

		p = params(8, GC_KMEANS_INIT_PLUSPLUS, NULL);
		run_kmeans(&r, x, 8, 1, &p);
		CHECK(r.st == GC_OK, "k = n: status %d", r.st);
		for (int j = 0; j < 8; j++)
			tot += r.inertia[j];
		CHECK(tot == 0.0, "k = n: inertia %g", tot);
		free_run(&r);
	}

	/*
	 * Identical rows, and more clusters than distinct rows: once every row
	 * sits on a centre, greedy and plain k-means++ draw uniform rows; the
	 * answer is every distinct row its own cluster at distance zero, the
	 * other clusters empty.
	 */
	{
		const float same[] = {3, 3, 3, 3, 3, 3};
		float		few[40 * 2];
		gc_kmeans_init inits[] = {GC_KMEANS_INIT_PLUSPLUS, GC_KMEANS_INIT_PLUSPLUS_PLAIN};

		for (int i = 0; i < 40; i++)
		{
			few[2 * i] = (float) (i % 4);
			few[2 * i + 1] = -0.5f * (float) (i % 4);
		}
		for (int m = 0; m < 2; m++)
		{
			const char *what = m == 0 ? "greedy" : "plain";
			double		tot = 0.0;
			int			nonempty = 0;

			p = params(3, inits[m], NULL);
			run_kmeans(&r, same, 3, 2, &p);
			CHECK(r.st == GC_OK, "identical rows, %s: status %d", what, r.st);
			if (r.st == GC_OK)
			{
				check_consistent(&r, same, 3, 2, 3, "identical rows");
				for (int j = 0; j < 3; j++)
					tot += r.inertia[j];
				CHECK(tot == 0.0 && r.distance[0] == 0.0, "identical rows, %s: inertia %g", what, tot);
			}
			free_run(&r);

			tot = 0.0;
			p = params(7, inits[m], NULL);
			p.seed = 11;
			run_kmeans(&r, few, 40, 2, &p);
			CHECK(r.st == GC_OK, "k = 7 over 4 distinct rows, %s: status %d", what, r.st);
			if (r.st == GC_OK)
			{
				check_consistent(&r, few, 40, 2, 7, "k = 7 over 4 distinct rows");
				for (int j = 0; j < 7; j++)
				{
					tot += r.inertia[j];
					nonempty += r.sizes[j] > 0;
				}
				CHECK(tot == 0.0 && nonempty == 4, "k = 7 over 4 distinct rows, %s: inertia %g, %d clusters not empty",
					  what, tot, nonempty);
			}
			free_run(&r);
		}
	}
}

/* max_iter and tol stop the iteration; bad parameters are refused. */
static void
test_stopping_and_errors(void)
{
	const double centres[] = {0, 0, 3, 0, 0, 3, 3, 3};
	float	   *x = blobs(4, 250, 2, centres, 3);
	gc_kmeans_params p = params(4, GC_KMEANS_INIT_RANDOM, NULL);
	Run			r;
	int32_t		full;

	p.tol = 0;
	run_kmeans(&r, x, 1000, 2, &p);
	CHECK(r.st == GC_OK, "tol 0: status %d", r.st);
	full = r.res.iterations;
	check_consistent(&r, x, 1000, 2, 4, "tol 0");
	free_run(&r);

	p.max_iter = 1;
	run_kmeans(&r, x, 1000, 2, &p);
	CHECK(r.res.iterations == 1, "max_iter 1: %d iterations", r.res.iterations);
	check_consistent(&r, x, 1000, 2, 4, "max_iter 1");
	free_run(&r);

	p.max_iter = 300;
	p.tol = 1e6;
	run_kmeans(&r, x, 1000, 2, &p);
	CHECK(r.res.iterations == 1 && full >= 1, "huge tol: %d iterations", r.res.iterations);
	free_run(&r);

	{
		/*
		 * What the SQL user can get wrong is GC_ERR_INVALID_ARGUMENT; an
		 * unknown init method or missing initial centroids can only come
		 * from a bug of the caller: GC_ERR_INTERNAL (common/checks.h).
		 */
		struct
		{
			int32_t		k;
			int32_t		max_iter;
			double		tol;
			int			init;
			int			nan;
			gc_status	expected;
		}			bad[] = {
			{0, 300, 1e-4, 0, 0, GC_ERR_INVALID_ARGUMENT},
			{1001, 300, 1e-4, 0, 0, GC_ERR_INVALID_ARGUMENT},
			{4, 0, 1e-4, 0, 0, GC_ERR_INVALID_ARGUMENT},
			{4, 300, -1, 0, 0, GC_ERR_INVALID_ARGUMENT},
			{4, 300, NAN, 0, 0, GC_ERR_INVALID_ARGUMENT},
			{4, 300, 1e-4, 7, 0, GC_ERR_INTERNAL},
			{4, 300, 1e-4, 2, 1, GC_ERR_INVALID_ARGUMENT},
			{4, 300, 1e-4, 2, 2, GC_ERR_INTERNAL}
		};

		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
		{
			double		init[8] = {0, 0, 1, 1, 2, 2, 3, 3};

			p = params(bad[b].k, (gc_kmeans_init) bad[b].init, NULL);
			p.max_iter = bad[b].max_iter;
			p.tol = bad[b].tol;
			if (bad[b].nan == 1)
			{
				init[5] = NAN;
				p.initial_centroids = init;
			}
			run_kmeans(&r, x, 1000, 2, &p);
			CHECK(r.st == bad[b].expected && r.message[0] != '\0',
				  "bad parameters %zu: status %d, expected %d", b, r.st, bad[b].expected);
			free_run(&r);
		}
	}
	free(x);
}

/*
 * The re-seeding rule of common/kmeans_init.h as it was first written, the
 * reference for gc_kmeans_reseed_empty: for each empty cluster in order, a
 * scan of every row for the farthest eligible one, O(n k^2).
 */
static int32_t
reseed_reference(const float *x, int64_t n, int32_t d, int32_t k, const int32_t *labels,
				 const double *d2, const double *ref, double *sums, int64_t *counts,
				 int64_t *taken /* [k] scratch */ )
{
	int32_t		ntaken = 0;

	for (int32_t j = 0; j < k; j++)
	{
		int64_t		best = -1;
		int32_t		old;

		if (counts[j] != 0)
			continue;
		for (int64_t i = 0; i < n; i++)
		{
			int			seen = 0;

			if (counts[labels[i]] < 2 || (best >= 0 && !(d2[i] > d2[best])))
				continue;
			for (int32_t t = 0; t < ntaken && !seen; t++)
				seen = taken[t] == i;
			if (!seen)
				best = i;
		}
		if (best < 0)
			break;
		taken[ntaken++] = best;
		old = labels[best];
		counts[old]--;
		counts[j] = 1;
		for (int32_t c = 0; c < d; c++)
		{
			double		v = (double) x[best * d + c];

			sums[(int64_t) old * d + c] -= v - (ref ? ref[(int64_t) old * d + c] : 0.0);
			sums[(int64_t) j * d + c] = v - (ref ? ref[(int64_t) j * d + c] : 0.0);
		}
	}
	return ntaken;
}

/*
 * The plainest Lloyd with the same rules (initial centroids given), as a
 * reference for the bounded assignment of the core: every row against every
 * centroid in every iteration.
 */
static int32_t
reference_lloyd(const float *x, int64_t n, int32_t d, int32_t k, const double *init,
				int32_t max_iter, double tol_abs, int32_t *labels, double *cen)
{
	int32_t    *old = malloc(sizeof(int32_t) * n);
	double	   *d2 = malloc(sizeof(double) * n);
	double	   *sums = malloc(sizeof(double) * k * d);
	int64_t    *counts = malloc(sizeof(int64_t) * k);
	int64_t    *taken = malloc(sizeof(int64_t) * k);
	int32_t		it;

	memcpy(cen, init, sizeof(double) * k * d);
	for (int64_t i = 0; i < n; i++)
		old[i] = -1;
	for (it = 0; it < max_iter; it++)
	{
		double		shift = 0;
		int			same = 1;
		int32_t		re;

		for (int64_t i = 0; i < n; i++)
		{
			double		best = HUGE_VAL;

			for (int32_t j = 0; j < k; j++)
			{
				double		s = 0;

				for (int32_t t = 0; t < d; t++)
				{
					double		diff = (double) x[i * d + t] - cen[j * d + t];

					s += diff * diff;
				}
				if (s < best)
				{
					best = s;
					labels[i] = j;
				}
			}
			d2[i] = best;
		}
		memset(sums, 0, sizeof(double) * k * d);
		memset(counts, 0, sizeof(int64_t) * k);
		for (int64_t i = 0; i < n; i++)
		{
			counts[labels[i]]++;
			for (int32_t t = 0; t < d; t++)
				sums[labels[i] * d + t] += x[i * d + t];
		}
		re = reseed_reference(x, n, d, k, labels, d2, NULL, sums, counts, taken);
		for (int32_t j = 0; j < k * d; j++)
		{
			double		c = counts[j / d] > 0 ? sums[j] / counts[j / d] : cen[j];

			shift += (c - cen[j]) * (c - cen[j]);
			cen[j] = c;
		}
		for (int64_t i = 0; i < n && same; i++)
			same = labels[i] == old[i];
		if (same && re == 0)
			break;
		if (shift <= tol_abs)
		{
			same = 0;
			break;
		}
		memcpy(old, labels, sizeof(int32_t) * n);
	}
	free(old);
	free(d2);
	free(sums);
	free(counts);
	free(taken);
	return it < max_iter ? it + 1 : max_iter;
}

/* The core (with Hamerly's bounds when k * k <= n) follows the plain Lloyd step by step. */
static void
test_against_reference(void)
{
	struct
	{
		int64_t		n;
		int32_t		d,
					k,
					max_iter;
	}			cases[] = {{5000, 3, 12, 40}, {20000, 2, 20, 100}, {3000, 7, 30, 25}, {400, 1, 5, 300}};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		int64_t		n = cases[c].n;
		int32_t		d = cases[c].d,
					k = cases[c].k;
		float	   *x = malloc(sizeof(float) * n * d);
		double	   *init = malloc(sizeof(double) * k * d);
		int32_t    *labels = malloc(sizeof(int32_t) * n);
		double	   *cen = malloc(sizeof(double) * k * d);
		uint64_t	s = 100 + c;
		gc_kmeans_params p = params(k, GC_KMEANS_INIT_GIVEN, init);
		Run			r;
		int32_t		iters;
		int64_t		diff = 0;
		double		cdiff = 0;

		for (int64_t i = 0; i < n * d; i++)
			x[i] = (float) (unif(&s) * 100);
		for (int32_t j = 0; j < k * d; j++)
			init[j] = x[j];		/* the first k rows */
		p.max_iter = cases[c].max_iter;
		p.tol = 0;
		run_kmeans(&r, x, n, d, &p);
		iters = reference_lloyd(x, n, d, k, init, p.max_iter, 0, labels, cen);
		/* the core's final labels are an assignment to its final centroids */
		for (int64_t i = 0; i < n; i++)
			diff += r.labels[i] != labels[i];
		for (int32_t j = 0; j < k * d; j++)
			cdiff = fmax(cdiff, fabs(r.centroids[j] - cen[j]));
		CHECK(r.st == GC_OK && r.res.iterations == iters,
			  "reference case %zu: status %d, %d iterations, reference %d", c, r.st, r.res.iterations, iters);
		CHECK(cdiff < 1e-9, "reference case %zu: centroids differ by %g", c, cdiff);
		/* a reference stopped by max_iter has labels of the previous centroids; compare centroids only */
		if (r.res.iterations < p.max_iter)
			CHECK(diff == 0, "reference case %zu: %lld labels differ", c, (long long) diff);
		check_consistent(&r, x, n, d, k, "reference case");
		free_run(&r);
		free(x);
		free(init);
		free(labels);
		free(cen);
	}
}

static int	cancel_calls = 0;

/* A cancel callback that answers yes from its fourth call on. */
static int
cancel_after_three(void *arg)
{
	return ++cancel_calls > 3;
}

/* A cancel callback that answers yes at once. */
static int
cancel_at_once(void *arg)
{
	return 1;
}

/*
 * One case of the re-seeding: gc_kmeans_reseed_empty against
 * reseed_reference on copies of the same counts and sums, which must come
 * out identical (the same operations in the same order).
 */
static void
reseed_case(const char *what, const float *x, int64_t n, int32_t d, int32_t k,
			const int32_t *labels, const double *d2, const double *ref,
			const int64_t *counts0, const double *sums0)
{
	int64_t    *c1 = malloc(sizeof(int64_t) * k),
			   *c2 = malloc(sizeof(int64_t) * k),
			   *taken = malloc(sizeof(int64_t) * k);
	double	   *s1 = malloc(sizeof(double) * k * d),
			   *s2 = malloc(sizeof(double) * k * d);
	int32_t		r1,
				r2 = -7;
	gc_status	st;

	memcpy(c1, counts0, sizeof(int64_t) * k);
	memcpy(c2, counts0, sizeof(int64_t) * k);
	memcpy(s1, sums0, sizeof(double) * k * d);
	memcpy(s2, sums0, sizeof(double) * k * d);
	r1 = reseed_reference(x, n, d, k, labels, d2, ref, s1, c1, taken);
	st = gc_kmeans_reseed_empty(x, GC_F32, n, d, k, labels, d2, ref, s2, c2, &r2, NULL, NULL);
	CHECK(st == GC_OK && r1 == r2, "reseed %s: status %d, %d re-seeded, reference %d",
		  what, st, r2, r1);
	CHECK(memcmp(c1, c2, sizeof(int64_t) * k) == 0, "reseed %s: counts differ", what);
	CHECK(memcmp(s1, s2, sizeof(double) * k * d) == 0, "reseed %s: sums differ", what);
	free(c1);
	free(c2);
	free(taken);
	free(s1);
	free(s2);
}

/*
 * Data for the re-seeding: n rows labelled among the first `used` of k
 * clusters (each of them holding at least one row), d2 drawn from `levels`
 * values (ties; with `negative` some negative and some -0.0, as the GPU's
 * float products may give), sums and counts from the labels; then the case.
 */
static void
reseed_data(const char *what, int64_t n, int32_t d, int32_t k, int32_t used, int levels,
			int negative, const double *ref, uint64_t seed)
{
	float	   *x = malloc(sizeof(float) * n * d);
	int32_t    *labels = malloc(sizeof(int32_t) * n);
	double	   *d2 = malloc(sizeof(double) * n);
	int64_t    *counts = calloc(k, sizeof(int64_t));
	double	   *sums = calloc((size_t) k * d, sizeof(double));

	for (int64_t i = 0; i < n; i++)
	{
		int32_t		l;

		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = (float) (unif(&seed) * 10.0 - 5.0);
		l = labels[i] = i < used ? (int32_t) i : (int32_t) (unif(&seed) * used);
		d2[i] = floor(unif(&seed) * levels) * 0.25;
		if (negative && i % 7 == 3)
			d2[i] = i % 2 ? -d2[i] : -0.0;
		counts[l]++;
		for (int32_t t = 0; t < d; t++)
			sums[(int64_t) l * d + t] += x[i * d + t] - (ref ? ref[(int64_t) l * d + t] : 0.0);
	}
	reseed_case(what, x, n, d, k, labels, d2, ref, counts, sums);
	free(x);
	free(labels);
	free(d2);
	free(counts);
	free(sums);
}

/* The O(n) re-seeding gives exactly the answer of the old O(n k^2) rule. */
static void
test_reseed(void)
{
	double	   *ref = malloc(sizeof(double) * 64 * 3);
	uint64_t	seed = 77;

	for (int j = 0; j < 64 * 3; j++)
		ref[j] = unif(&seed) - 0.5;
	reseed_data("random", 1000, 3, 50, 20, 1000000, 0, NULL, 1);
	reseed_data("ties", 1000, 3, 50, 20, 3, 0, NULL, 2);
	reseed_data("one level", 500, 2, 64, 10, 1, 0, NULL, 3);
	reseed_data("with ref", 800, 3, 64, 30, 5, 0, ref, 4);
	reseed_data("negative and -0", 700, 1, 40, 25, 4, 1, NULL, 5);
	reseed_data("mostly empty", 300, 2, 64, 2, 2, 0, NULL, 6);
	reseed_data("k = n", 64, 2, 64, 40, 3, 0, NULL, 7);
	reseed_data("k = n, one cluster", 40, 1, 40, 1, 2, 0, NULL, 8);
	reseed_data("none empty", 200, 2, 10, 10, 4, 0, NULL, 9);
	reseed_data("many rows", 200000, 1, 300, 100, 50, 0, NULL, 10);
	for (uint64_t s = 11; s < 61; s++)
	{
		int32_t		k = 1 + (int32_t) (s % 10);

		reseed_data("small", k + (int64_t) (s % 13), 1 + (int32_t) (s % 2), k,
					1 + (int32_t) (s % (uint64_t) k), 1 + (int) (s % 4), (int) (s & 1), NULL, s);
	}

	/*
	 * Counts that disagree with the labels (the walk over the first k rows
	 * runs out and starts again over all rows): the old rule still holds.
	 */
	{
		float		x[100];
		int32_t		labels[100];
		double		d2[100],
					sums[4] = {0, 0, 0, 0};
		int64_t		counts[4] = {2, 98, 0, 0};

		for (int i = 0; i < 100; i++)
		{
			x[i] = (float) i;
			labels[i] = i < 98 ? 0 : 1;
			d2[i] = i < 98 ? 100.0 - i : 1.0;
		}
		reseed_case("counts off", x, 100, 1, 4, labels, d2, NULL, counts, sums);
	}

	/* cancel */
	{
		float		x[4] = {0, 1, 2, 3};
		int32_t		labels[4] = {0, 0, 0, 0};
		double		d2[4] = {1, 2, 3, 4},
					sums[2] = {6, 0};
		int64_t		counts[2] = {4, 0};
		int32_t		re = -1;
		gc_status	st;

		st = gc_kmeans_reseed_empty(x, GC_F32, 4, 1, 2, labels, d2, NULL, sums, counts, &re,
									cancel_at_once, NULL);
		CHECK(st == GC_ERR_CANCELLED && re == 0, "reseed cancel: status %d, %d", st, re);
	}
	free(ref);
}

/*
 * The case of the "hostile inputs" issue, smaller: sorted 1-D rows and 1000
 * identical initial centroids leave 999 clusters empty after the first
 * assignment (where the old re-seeding took O(n k^2)).
 */
static void
test_reseed_many_empty(void)
{
	int64_t		n = 200000;
	int32_t		k = 1000;
	float	   *x = malloc(sizeof(float) * n);
	double	   *init = calloc(k, sizeof(double));
	gc_kmeans_params p = params(k, GC_KMEANS_INIT_GIVEN, init);
	Run			r;
	int			empty = 0;

	for (int64_t i = 0; i < n; i++)
		x[i] = (float) i;
	p.max_iter = 3;
	run_kmeans(&r, x, n, 1, &p);
	CHECK(r.st == GC_OK, "many empty: status %d (%s)", r.st, r.message);
	for (int32_t j = 0; j < k; j++)
		empty += r.sizes[j] == 0;
	CHECK(empty == 0, "many empty: %d clusters empty", empty);
	check_consistent(&r, x, n, 1, k, "many empty");
	free_run(&r);
	free(x);
	free(init);
}

/*
 * Cancel stops the work and reports it: uniform rows, which Lloyd's
 * iterations take many steps to settle, each step asking at least once.
 */
static void
test_cancel(void)
{
	float	   *x = malloc(sizeof(float) * 1000000 * 2);
	gc_kmeans_params p = params(20, GC_KMEANS_INIT_RANDOM, NULL);
	gc_kmeans_result res;
	int32_t    *labels = malloc(sizeof(int32_t) * 1000000);
	double	   *dist = malloc(sizeof(double) * 1000000);
	double		cen[40],
				inertia[20];
	int64_t		sizes[20];
	gc_exec		e = unit_exec(cancel_after_three, NULL);
	gc_status	st;
	uint64_t	s = 12;

	for (int64_t i = 0; i < 2000000; i++)
		x[i] = (float) unif(&s);
	res.labels = labels;
	res.distance = dist;
	res.centroids = cen;
	res.sizes = sizes;
	res.inertia = inertia;
	p.tol = 0;
	st = gc_cpu_api()->kmeans(&e, x, GC_F32, 1000000, 2, &p, &res);
	CHECK(st == GC_ERR_CANCELLED, "cancel: status %d", st);
	CHECK(strcmp(unit_error(), "canceled") == 0, "cancel: message %s", unit_error());
	free(labels);
	free(dist);
	free(x);
}

/*
 * Through the table: the words of a check, the timing phases of a run, and
 * out of memory with the bytes that were needed.
 */
static void
test_table(void)
{
	const gc_backend_api *api = gc_cpu_api();
	const double centres[] = {0, 0, 3, 0};
	float	   *x = blobs(2, 100, 2, centres, 5);
	gc_kmeans_params p = params(3, GC_KMEANS_INIT_PLUSPLUS, NULL);
	Run			r;

	p.k = 300;
	run_kmeans(&r, x, 200, 2, &p);
	CHECK(r.st == GC_ERR_INVALID_ARGUMENT &&
		  strcmp(r.message, "k (300) is greater than the number of rows (200)") == 0 &&
		  api->last_error()->detail[0] != '\0' && api->last_error()->hint[0] != '\0',
		  "k > n: %s", r.message);
	free_run(&r);

	p.k = 3;
	run_kmeans(&r, x, 200, 2, &p);
	CHECK(r.st == GC_OK && r.message[0] == '\0', "timing run: status %d", r.st);
	CHECK(r.timing.compute_ms >= r.timing.phase_ms[1] && r.timing.phase_ms[0] >= 0 &&
		  r.timing.phase_ms[2] >= 0 && r.timing.phase_ms[3] >= 0 &&
		  r.timing.phase_ms[3] <= r.timing.phase_ms[1] && r.timing.bytes_needed == 0,
		  "timing: compute %g, phases %g %g %g %g", r.timing.compute_ms, r.timing.phase_ms[0],
		  r.timing.phase_ms[1], r.timing.phase_ms[2], r.timing.phase_ms[3]);
	free_run(&r);

	/* 2^50 rows: the working arrays cannot be had (the rows are never read) */
	{
		const double given[] = {0};
		gc_kmeans_params q = params(1, GC_KMEANS_INIT_GIVEN, given);
		gc_kmeans_result res;
		gc_timing	t;
		gc_exec		e = unit_exec(NULL, &t);
		int64_t		huge = INT64_C(1) << 50;
		gc_status	st;
		int32_t		label;
		double		one[3];
		int64_t		size;

		/* arrays far too small, but nothing is written before the allocation fails */
		res.labels = &label;
		res.distance = &one[0];
		res.centroids = &one[1];
		res.sizes = &size;
		res.inertia = &one[2];
		res.iterations = 0;
		st = api->kmeans(&e, x, GC_F32, huge, 1, &q, &res);
		CHECK(st == GC_ERR_OUT_OF_MEMORY && t.bytes_needed >= huge * 8 &&
			  strstr(unit_error(), "out of memory") != NULL,
			  "out of memory: status %d, %lld bytes, %s", st, (long long) t.bytes_needed, unit_error());
	}
	free(x);
}

/*
 * Greedy k-means++: the number of candidates is scikit-learn's 2 + floor(ln k);
 * the capped distance gives min(cap, gc_dist2) exactly; one candidate is
 * plain k-means++; the greedy step keeps the candidate of least potential,
 * recomputed here the plain way; n_init keeps the run of least inertia.
 */
static void
test_greedy(void)
{
	int32_t		ks[] = {1, 2, 3, 7, 8, 20, 40, 81, 1000, 20000};
	int32_t		want[] = {2, 2, 3, 3, 4, 4, 5, 6, 8, 11};
	int64_t		n = 3000;
	int32_t		d = 11;
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	double	   *mind2 = malloc(sizeof(double) * (size_t) n);
	int64_t		rows[40],
				rows1[40];
	gc_rng		rng;

	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
		CHECK(gc_kmpp_trials(ks[i]) == want[i], "greedy: %d trials for k = %d, want %d",
			  gc_kmpp_trials(ks[i]), ks[i], want[i]);

	/* clustered rows with one decimal: duplicates and ties */
	gc_rng_seed(&rng, 5);
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = (float) (round(((double) (i % 13) * 4.0 + gc_rng_uniform(&rng)) * 10.0) / 10.0);
	{
		int			bad = 0;

		for (int64_t i = 1; i < n; i++)
		{
			double		full = gc_dist2(x + i * d, x, d);
			double		cap = (double) (i % 50);
			double		c = gc_kmpp_dist2_capped(x + i * d, x, d, cap);

			bad += (c < cap ? c : cap) != (full < cap ? full : cap) || (full < cap && c != full);
		}
		CHECK(bad == 0, "greedy: capped distance differs from min(cap, dist2) for %d rows", bad);
	}

	/* one candidate per step reads the generator as plain k-means++ always did */
	for (uint64_t seed = 0; seed < 3; seed++)
	{
		gc_rng		r;
		double		maxd2 = 0.0;

		CHECK(gc_kmeans_plusplus_rows(x, GC_F32, n, d, 20, seed, 1, rows, mind2, NULL, NULL) == 0, "plain rows");
		gc_rng_seed(&r, seed);
		rows1[0] = (int64_t) gc_rng_below(&r, (uint64_t) n);
		for (int64_t i = 0; i < n; i++)
			mind2[i] = gc_dist2(x + i * d, x + rows1[0] * d, d);
		for (int32_t c = 1; c < 20; c++)
		{
			uint64_t	total = 0,
						acc = 0;
			double		scale;
			int64_t		target;

			maxd2 = 0.0;
			for (int64_t i = 0; i < n; i++)
				maxd2 = mind2[i] > maxd2 ? mind2[i] : maxd2;
			scale = gc_kmpp_scale(maxd2, n);
			for (int64_t i = 0; i < n; i++)
				total += gc_kmpp_weight(mind2[i], scale);
			target = gc_kmpp_draw(&r, total, n);
			rows1[c] = target < 0 ? -1 - target : gc_kmpp_pick(mind2, 0, n, scale, (uint64_t) target, &acc);
			for (int64_t i = 0; i < n; i++)
			{
				double		t = gc_dist2(x + i * d, x + rows1[c] * d, d);

				mind2[i] = t < mind2[i] ? t : mind2[i];
			}
		}
		CHECK(memcmp(rows, rows1, sizeof(int64_t) * 20) == 0, "plain k-means++ seed %llu: other rows",
			  (unsigned long long) seed);
	}

	/* greedy: each step's pick has the least potential among its candidates (recomputed plainly) */
	for (uint64_t seed = 0; seed < 3; seed++)
	{
		gc_rng		r;
		int32_t		L = gc_kmpp_trials(20);
		int			bad = 0;

		CHECK(gc_kmeans_plusplus_rows(x, GC_F32, n, d, 20, seed, L, rows, mind2, NULL, NULL) == 0, "greedy rows");
		gc_rng_seed(&r, seed);
		rows1[0] = (int64_t) gc_rng_below(&r, (uint64_t) n);
		for (int64_t i = 0; i < n; i++)
			mind2[i] = gc_dist2(x + i * d, x + rows1[0] * d, d);
		for (int32_t c = 1; c < 20; c++)
		{
			uint64_t	total = 0,
						best_pot = UINT64_MAX;
			double		scale,
						maxd2 = 0.0;
			int64_t		cand[GC_KMPP_MAX_TRIALS];

			for (int64_t i = 0; i < n; i++)
				maxd2 = mind2[i] > maxd2 ? mind2[i] : maxd2;
			scale = gc_kmpp_scale(maxd2, n);
			for (int64_t i = 0; i < n; i++)
				total += gc_kmpp_weight(mind2[i], scale);
			gc_kmpp_draw_candidates(&r, mind2, n, scale, total, L, cand);
			for (int32_t l = 0; l < L; l++)
			{
				uint64_t	pot = 0;

				for (int64_t i = 0; i < n; i++)
				{
					double		t = gc_dist2(x + i * d, x + cand[l] * d, d);

					pot += gc_kmpp_weight(t < mind2[i] ? t : mind2[i], scale);
				}
				if (pot < best_pot)
				{
					best_pot = pot;
					rows1[c] = cand[l];
				}
			}
			bad += rows1[c] != rows[c];
			for (int64_t i = 0; i < n; i++)
			{
				double		t = gc_dist2(x + i * d, x + rows1[c] * d, d);

				mind2[i] = t < mind2[i] ? t : mind2[i];
			}
		}
		CHECK(bad == 0, "greedy k-means++ seed %llu: %d steps kept another candidate",
			  (unsigned long long) seed, bad);
	}

	/*
	 * n_init: the kept run is the least inertia of the runs with the derived
	 * seeds.  k = 8 for the 13 groups, so that the runs end in different
	 * local minima and the least is not the first run (with k = 13 every
	 * run finds the groups, and a call that ran the first seed alone would
	 * pass).
	 */
	{
		gc_kmeans_params p = params(8, GC_KMEANS_INIT_PLUSPLUS, NULL);
		int			distinct = 0;
		Run			r,
					one;
		double		best = HUGE_VAL,
					got = 0.0;
		int32_t		best_run = -1;

		for (int32_t k = 0; k < 4; k++)
		{
			double		tot = 0.0;

			p.seed = gc_kmeans_run_seed(9, k);
			run_kmeans(&one, x, n, d, &p);
			for (int32_t j = 0; j < 8; j++)
				tot += one.res.inertia[j];
			distinct += k > 0 && tot != best;
			if (tot < best)
			{
				best = tot;
				best_run = k;
			}
			free_run(&one);
		}
		CHECK(gc_kmeans_run_seed(9, 0) == 9, "n_init: run 0 does not use the seed itself");
		CHECK(best_run > 0 && distinct > 0, "n_init: the case does not tell the runs apart (best run %d)",
			  best_run);
		p.seed = 9;
		p.n_init = 4;
		run_kmeans(&r, x, n, d, &p);
		for (int32_t j = 0; j < 8; j++)
			got += r.res.inertia[j];
		CHECK(r.st == GC_OK && got == best && r.res.best_run == best_run,
			  "n_init: kept run %d with inertia %.17g, want run %d with %.17g", r.res.best_run, got, best_run, best);
		free_run(&r);
	}
	free(x);
	free(mind2);
}

/*
 * The answer of 2, 3, 8 and 16 threads is the one thread's bit for bit:
 * labels, distances, centroids, sizes, inertia and iterations; and the
 * timing record says that the threads ran.
 */
static void
threads_case_dt(const char *what, const void *x, gc_dtype dt, int64_t n, int32_t d,
				const gc_kmeans_params *p)
{
	Run			a,
				b;

	unit_threads = 1;
	run_kmeans_dt(&a, x, dt, n, d, p);
	CHECK(a.st == GC_OK && a.timing.threads == 1 && a.res.iterations > 1,
		  "%s, 1 thread: status %d %s, %d iterations", what, a.st, a.message, a.res.iterations);
	for (int i = 1; i < UNIT_THREAD_COUNTS; i++)
	{
		unit_threads = unit_thread_counts[i];
		run_kmeans_dt(&b, x, dt, n, d, p);
		CHECK(b.st == GC_OK && b.timing.threads == unit_threads &&
			  b.res.iterations == a.res.iterations &&
			  memcmp(a.labels, b.labels, sizeof(int32_t) * n) == 0 &&
			  memcmp(a.distance, b.distance, sizeof(double) * n) == 0 &&
			  memcmp(a.centroids, b.centroids, sizeof(double) * p->k * d) == 0 &&
			  memcmp(a.sizes, b.sizes, sizeof(int64_t) * p->k) == 0 &&
			  memcmp(a.inertia, b.inertia, sizeof(double) * p->k) == 0,
			  "%s, %d threads (%d ran): status %d %s, %d iterations against %d", what,
			  unit_threads, b.timing.threads, b.st, b.message, b.res.iterations, a.res.iterations);
		free_run(&b);
	}
	free_run(&a);
	unit_threads = 0;
}

static void
threads_case(const char *what, const float *x, int64_t n, int32_t d, const gc_kmeans_params *p)
{
	threads_case_dt(what, x, GC_F32, n, d, p);
}

static void
test_threads(void)
{
	uint64_t	s = 99;
	int64_t		n = 200000;
	int32_t		d = 2;
	double	   *centres = malloc(sizeof(double) * 64 * 128);
	float	   *x;
	gc_kmeans_params p;

	for (int i = 0; i < 64 * 128; i++)
		centres[i] = 20.0 * unif(&s);
	/* 2-D, 20 blobs, k-means++, Hamerly's bounds (k^2 <= n), to convergence */
	x = blobs(20, (int) (n / 20), d, centres, 5);
	p = params(20, GC_KMEANS_INIT_PLUSPLUS, NULL);
	p.seed = 7;
	threads_case("2-D k = 20, k-means++", x, n, d, &p);
	/* the same on a 0.1 lattice (ties between centroids), tol 0, k = 2 (no bounds) */
	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) (round(x[i] * 10.0) / 10.0);
	x[0] = 1e6f;
	p.tol = 0.0;
	p.max_iter = 20;
	threads_case("2-D lattice and a far row, k = 20, tol 0", x, n, d, &p);
	p.k = 2;
	threads_case("2-D lattice, k = 2", x, n, d, &p);
	free(x);
	/* wide rows: 128-D, 64 blobs, k = 64 random, 10 iterations */
	n = 40000;
	d = 128;
	x = blobs(64, (int) (n / 64), d, centres, 6);
	p = params(64, GC_KMEANS_INIT_RANDOM, NULL);
	p.seed = 3;
	p.max_iter = 10;
	threads_case("128-D k = 64, random", x, n, d, &p);
	free(x);
	/* given centroids with a duplicate: an empty cluster is re-seeded */
	n = 30000;
	d = 5;
	x = blobs(6, (int) (n / 6), d, centres, 8);
	{
		double		given[8 * 5];

		for (int j = 0; j < 8; j++)
			for (int t = 0; t < d; t++)
				given[j * d + t] = x[(j == 7 ? 0 : j) * d + t];
		p = params(8, GC_KMEANS_INIT_GIVEN, given);
		threads_case("5-D given centroids with a duplicate", x, n, d, &p);
	}
	free(x);
	/* one, three and four features (the sums of narrow rows in registers), float and double */
	for (d = 1; d <= 4; d += (d == 1 ? 2 : 1))
	{
		double	   *y;
		char		what[64];

		n = 48000;
		x = blobs(12, (int) (n / 12), d, centres, 9);
		y = malloc(sizeof(double) * n * d);
		for (int64_t i = 0; i < n * d; i++)
			y[i] = (double) x[i] + 1e-9 * (double) (i % 7);
		p = params(12, GC_KMEANS_INIT_RANDOM, NULL);
		p.seed = 11;
		p.tol = 0.0;
		snprintf(what, sizeof(what), "%d-D k = 12 random, float", d);
		threads_case(what, x, n, d, &p);
		snprintf(what, sizeof(what), "%d-D k = 12 random, double", d);
		threads_case_dt(what, y, GC_F64, n, d, &p);
		free(y);
		free(x);
	}
	free(centres);
}

/* ---------------------------------------------------------------- precision and metric */

/*
 * The reference of Lloyd's algorithm, written here from the rules of
 * src/core/kmeans.c in the plainest way: the rows as doubles (float rows
 * converted exactly), dist2 summed over the features in order, the nearest
 * centroid the lowest number on a tie, sums in row order (in blocks of
 * 16384 rows added in block order when k d <= 4096 and n > 16384), with metric
 * cosine every centroid holding rows scaled to unit length, the stopping
 * rules, the final assignment, and the outputs.  Cases that leave a cluster
 * empty are not for this reference (empty is set).
 */
typedef struct RefOut
{
	int32_t    *labels;
	double	   *distance;
	double	   *centroids;
	int64_t    *sizes;
	double	   *inertia;
	int32_t		iterations;
	int			empty;
} RefOut;

static double
ref_d2(const double *a, const double *b, int32_t d)
{
	double		s = 0.0;

	for (int32_t t = 0; t < d; t++)
	{
		double		u = a[t] - b[t];

		s += u * u;
	}
	return s;
}

static int32_t
ref_nearest(const double *row, const double *cen, int32_t k, int32_t d, double *best)
{
	int32_t		bj = 0;
	double		b = ref_d2(row, cen, d);

	for (int32_t j = 1; j < k; j++)
	{
		double		v = ref_d2(row, cen + (int64_t) j * d, d);

		if (v < b)
		{
			b = v;
			bj = j;
		}
	}
	*best = b;
	return bj;
}

/* A centroid to unit length, as spherical k-means asks: c / ||c||, the norm from the sum of squares in order. */
static void
ref_unit(double *c, int32_t d)
{
	double		s = 0.0;

	for (int32_t t = 0; t < d; t++)
		s += c[t] * c[t];
	if (s > 0)
	{
		double		nrm = sqrt(s);

		for (int32_t t = 0; t < d; t++)
			c[t] /= nrm;
	}
}

static void
ref_lloyd(const double *x, int64_t n, int32_t d, int32_t k, const double *init, int32_t max_iter,
		  double tol, gc_metric metric, RefOut *o)
{
	double	   *cen = malloc(sizeof(double) * k * d);
	double	   *sums = malloc(sizeof(double) * k * d);
	double	   *bsum = malloc(sizeof(double) * k * d);
	int			blocked = (int64_t) k * d <= 4096 && n > 16384;
	double	   *v = malloc(sizeof(double) * d);
	double	   *m = calloc(d, sizeof(double));
	double	   *var = calloc(d, sizeof(double));
	int64_t    *cnt = malloc(sizeof(int64_t) * k);
	double		mean_var = 0.0,
				best;
	int			strict = 0;
	int32_t		it;

	memset(o, 0, sizeof(*o));
	o->labels = malloc(sizeof(int32_t) * n);
	o->distance = malloc(sizeof(double) * n);
	o->centroids = cen;
	o->sizes = calloc(k, sizeof(int64_t));
	o->inertia = calloc(k, sizeof(double));
	/* the unit of tol: the mean population variance of the features */
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = 0; t < d; t++)
			m[t] += x[i * d + t];
	for (int32_t t = 0; t < d; t++)
		m[t] /= (double) n;
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = 0; t < d; t++)
			var[t] += (x[i * d + t] - m[t]) * (x[i * d + t] - m[t]);
	for (int32_t t = 0; t < d; t++)
		mean_var += var[t] / (double) n;
	mean_var /= (double) d;

	memcpy(cen, init, sizeof(double) * k * d);
	for (int64_t i = 0; i < n; i++)
		o->labels[i] = -1;
	for (it = 0; it < max_iter; it++)
	{
		int64_t		changed = 0;
		double		shift = 0.0;

		memset(sums, 0, sizeof(double) * k * d);
		memset(bsum, 0, sizeof(double) * k * d);
		memset(cnt, 0, sizeof(int64_t) * k);
		for (int64_t i = 0; i < n; i++)
		{
			int32_t		j = ref_nearest(x + i * d, cen, k, d, &best);

			changed += j != o->labels[i];
			o->labels[i] = j;
			cnt[j]++;
			for (int32_t t = 0; t < d; t++)
				(blocked ? bsum : sums)[j * d + t] += x[i * d + t];
			/* sums in blocks of 16384 rows, added in block order, when k d <= 4096 and n > 16384 */
			if (blocked && ((i + 1) % 16384 == 0 || i + 1 == n))
				for (int64_t q = 0; q < (int64_t) k * d; q++)
				{
					sums[q] += bsum[q];
					bsum[q] = 0.0;
				}
		}
		for (int32_t j = 0; j < k; j++)
		{
			if (cnt[j] == 0)
				o->empty = 1;
			for (int32_t t = 0; t < d; t++)
				v[t] = cnt[j] > 0 ? sums[j * d + t] / (double) cnt[j] : cen[j * d + t];
			if (metric == GC_METRIC_COSINE && cnt[j] > 0)
				ref_unit(v, d);
			shift += ref_d2(v, cen + j * d, d);
			memcpy(cen + j * d, v, sizeof(double) * d);
		}
		if (changed == 0)
		{
			strict = 1;
			break;
		}
		if (shift <= tol * mean_var)
			break;
	}
	o->iterations = it < max_iter ? it + 1 : max_iter;
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		j = strict ? o->labels[i] : ref_nearest(x + i * d, cen, k, d, &best);
		double		s = ref_d2(x + i * d, cen + j * d, d);

		o->labels[i] = j;
		o->distance[i] = metric == GC_METRIC_COSINE ? s / 2 : sqrt(s);
		o->sizes[j]++;
		o->inertia[j] += s;
	}
	if (metric == GC_METRIC_COSINE)
		for (int32_t j = 0; j < k; j++)
			o->inertia[j] /= 2;
	free(sums);
	free(bsum);
	free(v);
	free(m);
	free(var);
	free(cnt);
}

static void
ref_free(RefOut *o)
{
	free(o->labels);
	free(o->distance);
	free(o->centroids);
	free(o->sizes);
	free(o->inertia);
}

/* The back end's run r equals the reference o bit for bit. */
static void
check_against_ref(const char *what, const Run *r, const RefOut *o, int64_t n, int32_t d, int32_t k)
{
	int64_t		lab = 0,
				dist = 0;

	CHECK(r->st == GC_OK, "%s: status %d (%s)", what, r->st, r->message);
	if (r->st != GC_OK)
		return;
	CHECK(!o->empty, "%s: the reference met an empty cluster (a case for the re-seeding tests)", what);
	for (int64_t i = 0; i < n; i++)
	{
		lab += r->labels[i] != o->labels[i];
		dist += memcmp(&r->distance[i], &o->distance[i], sizeof(double)) != 0;
	}
	CHECK(lab == 0, "%s: %lld labels differ from the reference", what, (long long) lab);
	CHECK(dist == 0, "%s: %lld distances differ from the reference", what, (long long) dist);
	CHECK(memcmp(r->centroids, o->centroids, sizeof(double) * k * d) == 0,
		  "%s: centroids differ from the reference (first %.17g against %.17g)", what,
		  r->centroids[0], o->centroids[0]);
	CHECK(memcmp(r->sizes, o->sizes, sizeof(int64_t) * k) == 0, "%s: sizes differ", what);
	CHECK(memcmp(r->inertia, o->inertia, sizeof(double) * k) == 0,
		  "%s: inertia differs from the reference (%.17g against %.17g)", what, r->inertia[0], o->inertia[0]);
	CHECK(r->res.iterations == o->iterations, "%s: %d iterations, the reference %d", what,
		  r->res.iterations, o->iterations);
}

/* Rounds to 5 decimals, as coordinates in a table often are. */
static double
dec5(double v)
{
	return round(v * 1e5) / 1e5;
}

/*
 * Longitude / latitude rows with 5 decimals in overlapping blobs, as
 * doubles (x64) and rounded to float (x32).
 */
static void
lonlat_rows(int64_t n, int nc, uint64_t seed, double **x64, float **x32, double *init /* [nc, 2] */ )
{
	uint64_t	s = seed;
	double		cx[16],
				cy[16];

	*x64 = malloc(sizeof(double) * n * 2);
	*x32 = malloc(sizeof(float) * n * 2);
	for (int c = 0; c < nc; c++)
	{
		cx[c] = 55.15 + 0.03 * unif(&s);
		cy[c] = 37.60 + 0.03 * unif(&s);
		init[c * 2] = dec5(cx[c]);
		init[c * 2 + 1] = dec5(cy[c]);
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (i % nc);

		(*x64)[i * 2] = dec5(cx[c] + 0.01 * (unif(&s) + unif(&s) - 1.0));
		(*x64)[i * 2 + 1] = dec5(cy[c] + 0.01 * (unif(&s) + unif(&s) - 1.0));
	}
	for (int64_t i = 0; i < n * 2; i++)
		(*x32)[i] = (float) (*x64)[i];
}

/* Float rows as doubles, exactly. */
static double *
widen(const float *x, int64_t m)
{
	double	   *y = malloc(sizeof(double) * m);

	for (int64_t i = 0; i < m; i++)
		y[i] = x[i];
	return y;
}

/*
 * Double precision against the reference, and the answers of the two
 * precisions apart: lon/lat with 5 decimals in overlapping blobs, where the
 * rounding to float moves rows across the boundaries.
 */
static void
test_precision_reference(void)
{
	int64_t		n = 20000;
	int			nc = 6;
	double		init[12];
	double	   *x64;
	float	   *x32;
	double	   *w32;

	lonlat_rows(n, nc, 11, &x64, &x32, init);
	w32 = widen(x32, n * 2);
	for (int c = 0; c < 2; c++)
	{
		double		tol = c == 0 ? 0.0 : 1e-4;
		gc_kmeans_params p = params(nc, GC_KMEANS_INIT_GIVEN, init);
		RefOut		o64,
					o32;
		Run			r64,
					r32;
		int64_t		apart = 0;
		char		what[128];

		p.tol = tol;
		ref_lloyd(x64, n, 2, nc, init, 300, tol, GC_METRIC_EUCLIDEAN, &o64);
		ref_lloyd(w32, n, 2, nc, init, 300, tol, GC_METRIC_EUCLIDEAN, &o32);
		for (int64_t i = 0; i < n; i++)
			apart += o64.labels[i] != o32.labels[i];
		CHECK(apart > 0, "lon/lat tol %g: the rounding to float moves no row (the case tests nothing)", tol);
		for (int th = 0; th < 2; th++)
		{
			unit_threads = th == 0 ? 1 : 3;
			run_kmeans_dt(&r64, x64, GC_F64, n, 2, &p);
			run_kmeans_dt(&r32, x32, GC_F32, n, 2, &p);
			snprintf(what, sizeof(what), "lon/lat double, tol %g, %d threads", tol, unit_threads);
			check_against_ref(what, &r64, &o64, n, 2, nc);
			snprintf(what, sizeof(what), "lon/lat float, tol %g, %d threads", tol, unit_threads);
			check_against_ref(what, &r32, &o32, n, 2, nc);
			free_run(&r64);
			free_run(&r32);
		}
		unit_threads = 0;
		ref_free(&o64);
		ref_free(&o32);
	}
	/* wide rows with Hamerly's bounds (k^2 <= n) and without (k = 2), 3 decimals */
	{
		int32_t		d = 24;
		int64_t		m = 4000;
		double	   *y = malloc(sizeof(double) * m * d);
		double		g[8 * 24];
		uint64_t	s = 5;

		for (int64_t i = 0; i < m * d; i++)
			y[i] = round((1000.0 + (double) (i / d % 8) + 3.0 * unif(&s)) * 1000.0) / 1000.0;
		for (int kk = 2; kk <= 8; kk += 6)
		{
			gc_kmeans_params p = params(kk, GC_KMEANS_INIT_GIVEN, g);
			RefOut		o;
			Run			r;
			char		what[128];

			memcpy(g, y, sizeof(double) * kk * d);
			ref_lloyd(y, m, d, kk, g, 300, 1e-4, GC_METRIC_EUCLIDEAN, &o);
			run_kmeans_dt(&r, y, GC_F64, m, d, &p);
			snprintf(what, sizeof(what), "24-D double, k = %d", kk);
			check_against_ref(what, &r, &o, m, d, kk);
			free_run(&r);
			ref_free(&o);
		}
		free(y);
	}
	free(x64);
	free(x32);
	free(w32);
}

/*
 * Rows built so that the nearest centroid flips with the rounding to
 * float: 55.15 lies nearer 55.1 than 55.2 in double (as binary fractions
 * of the decimals), 55.15f nearer 55.2.  k-means and the assignment.
 */
static void
test_precision_flip(void)
{
	double		x64[101];
	float		x32[101];
	double		init[2] = {55.1, 55.2};
	double		w32[101];

	for (int i = 0; i < 101; i++)
	{
		x64[i] = i < 50 ? 55.1 : i < 100 ? 55.2 : 55.15;
		x32[i] = (float) x64[i];
		w32[i] = x32[i];
	}
	{
		gc_kmeans_params p = params(2, GC_KMEANS_INIT_GIVEN, init);
		RefOut		o64,
					o32;
		Run			r64,
					r32;

		ref_lloyd(x64, 101, 1, 2, init, 300, 1e-4, GC_METRIC_EUCLIDEAN, &o64);
		ref_lloyd(w32, 101, 1, 2, init, 300, 1e-4, GC_METRIC_EUCLIDEAN, &o32);
		CHECK(o64.labels[100] == 0 && o32.labels[100] == 1,
			  "flip: the reference labels 55.15 as %d in double and %d in float, expected 0 and 1",
			  o64.labels[100], o32.labels[100]);
		run_kmeans_dt(&r64, x64, GC_F64, 101, 1, &p);
		run_kmeans_dt(&r32, x32, GC_F32, 101, 1, &p);
		check_against_ref("flip, k-means in double", &r64, &o64, 101, 1, 2);
		check_against_ref("flip, k-means in float", &r32, &o32, 101, 1, 2);
		CHECK(r64.st == GC_OK && r32.st == GC_OK && r64.labels[100] == 0 && r32.labels[100] == 1 &&
			  r64.sizes[0] == 51 && r32.sizes[0] == 50,
			  "flip: k-means puts 55.15 in cluster %d (double) and %d (float)", r64.labels[100], r32.labels[100]);
		free_run(&r64);
		free_run(&r32);
		ref_free(&o64);
		ref_free(&o32);
	}
	{
		gc_kmeans_assign_params ap;
		gc_kmeans_assign_result ar;
		int32_t		l64[101],
					l32[101];
		double		d64[101],
					d32[101];
		gc_exec		e = unit_exec(NULL, NULL);
		gc_status	s1,
					s2;

		memset(&ap, 0, sizeof(ap));
		ap.struct_size = sizeof(ap);
		ap.k = 2;
		ap.centroids = init;
		ar.labels = l64;
		ar.distance = d64;
		s1 = gc_cpu_api()->kmeans_assign(&e, x64, GC_F64, 101, 1, &ap, &ar);
		ar.labels = l32;
		ar.distance = d32;
		s2 = gc_cpu_api()->kmeans_assign(&e, x32, GC_F32, 101, 1, &ap, &ar);
		CHECK(s1 == GC_OK && s2 == GC_OK && l64[100] == 0 && l32[100] == 1,
			  "flip: the assignment puts 55.15 in cluster %d (double) and %d (float)", l64[100], l32[100]);
		CHECK(s1 == GC_OK && d64[100] == fabs(55.15 - 55.1) && d32[100] == fabs((double) 55.15f - 55.2),
			  "flip: distances %.17g and %.17g", d64[100], d32[100]);
	}
}

/*
 * Float rows given as doubles hold the same values, so every answer is the
 * same bit for bit (the element type changes the values, not the rules):
 * k-means++, random and given starts (with a duplicate centroid, so that
 * an empty cluster is re-seeded from the rows of either type), both
 * metrics, one and several threads.
 */
static void
test_same_values(void)
{
	const double centres[] = {0, 0, 0, 20, 0, 0, 0, 20, 0, 20, 20, 0, 5, 5, 5, 40, 40, 40};
	int64_t		n = 6000;
	float	   *x = blobs(6, 1000, 3, centres, 17);
	double	   *y;

	for (int unit = 0; unit < 2; unit++)
	{
		if (unit)
			CHECK(gc_unit_rows(x, GC_F32, n, 3) < 0, "same values: a zero row");
		y = widen(x, n * 3);
		for (int m = 0; m < 3; m++)
		{
			double		given[18];
			gc_kmeans_params p = params(6, m == 0 ? GC_KMEANS_INIT_PLUSPLUS :
										m == 1 ? GC_KMEANS_INIT_RANDOM : GC_KMEANS_INIT_GIVEN, given);
			Run			a,
						b;

			/* given: rows of the data (unit rows for cosine), the last a duplicate of the first: re-seeded */
			for (int j = 0; j < 6; j++)
				for (int t = 0; t < 3; t++)
					given[j * 3 + t] = y[(j == 5 ? 0 : j * 997) * 3 + t];
			p.seed = 5;
			p.metric = unit ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
			unit_threads = 1 + 2 * m;
			run_kmeans_dt(&a, x, GC_F32, n, 3, &p);
			run_kmeans_dt(&b, y, GC_F64, n, 3, &p);
			CHECK(a.st == GC_OK && b.st == GC_OK &&
				  memcmp(a.labels, b.labels, sizeof(int32_t) * n) == 0 &&
				  memcmp(a.distance, b.distance, sizeof(double) * n) == 0 &&
				  memcmp(a.centroids, b.centroids, sizeof(double) * 18) == 0 &&
				  memcmp(a.inertia, b.inertia, sizeof(double) * 6) == 0 &&
				  a.res.iterations == b.res.iterations,
				  "same values, %s, init %d: float and double rows answer differently (%d %d)",
				  unit ? "cosine" : "euclidean", m, a.st, b.st);
			if (m == 2)
				CHECK(a.st == GC_OK && a.sizes[5] > 0, "same values, %s: the duplicate centroid was not re-seeded",
					  unit ? "cosine" : "euclidean");
			free_run(&a);
			free_run(&b);
		}
		{
			int64_t		r32[6],
						r64[6];
			double	   *mind2 = malloc(sizeof(double) * n);

			CHECK(gc_kmeans_plusplus_rows(x, GC_F32, n, 3, 6, 9, gc_kmpp_trials(6), r32, mind2, NULL, NULL) == 0 &&
				  gc_kmeans_plusplus_rows(y, GC_F64, n, 3, 6, 9, gc_kmpp_trials(6), r64, mind2, NULL, NULL) == 0 &&
				  memcmp(r32, r64, sizeof(r32)) == 0, "same values: k-means++ picks other rows");
			free(mind2);
		}
		free(y);
	}
	unit_threads = 0;
	free(x);
}

/*
 * Spherical k-means, known answer: 2-D rays at 10, 20, 30 degrees and at
 * 100, 110, 120 degrees, each at magnitudes 1, 5 and 100.  The unit rows
 * fall into the two bundles; each centroid is the unit vector of the
 * bundle's middle ray, and each row's distance is 1 - cos of its angle to
 * it.  Euclidean k-means of the raw rows groups by magnitude instead.
 */
static void
test_cosine_known(void)
{
	const double deg = M_PI / 180.0;
	const double ang[6] = {10, 20, 30, 100, 110, 120};
	const double mag[3] = {1, 5, 100};
	double		x64[36],
				raw[36];
	float		x32[36];
	double		init[4] = {1, 0, 0, 1};	/* unit */

	for (int a = 0; a < 6; a++)
		for (int m = 0; m < 3; m++)
		{
			int			i = a * 3 + m;

			raw[i * 2] = mag[m] * cos(ang[a] * deg);
			raw[i * 2 + 1] = mag[m] * sin(ang[a] * deg);
		}
	memcpy(x64, raw, sizeof(raw));
	for (int i = 0; i < 36; i++)
		x32[i] = (float) raw[i];
	CHECK(gc_unit_rows(x64, GC_F64, 18, 2) < 0 && gc_unit_rows(x32, GC_F32, 18, 2) < 0, "rays: a zero row");
	for (int prec = 0; prec < 2; prec++)
	{
		gc_kmeans_params p = params(2, GC_KMEANS_INIT_GIVEN, init);
		Run			r;
		int			wrong = 0,
					bad = 0;
		double		tolv = prec == 0 ? 1e-14 : 1e-6;

		p.metric = GC_METRIC_COSINE;
		run_kmeans_dt(&r, prec == 0 ? (const void *) x64 : (const void *) x32, prec == 0 ? GC_F64 : GC_F32,
					  18, 2, &p);
		CHECK(r.st == GC_OK, "rays: status %d (%s)", r.st, r.message);
		if (r.st != GC_OK)
			continue;
		for (int i = 0; i < 18; i++)
		{
			int			a = i / 3;
			double		mid = a < 3 ? 20 : 110;

			wrong += r.labels[i] != (a < 3 ? 0 : 1);
			if (fabs(r.distance[i] - (1.0 - cos((ang[a] - mid) * deg))) > tolv)
				bad++;
		}
		CHECK(wrong == 0, "rays (%s): %d rows in the wrong bundle", prec ? "float" : "double", wrong);
		CHECK(bad == 0, "rays (%s): %d distances are not 1 - cos", prec ? "float" : "double", bad);
		CHECK(fabs(r.centroids[0] - cos(20 * deg)) < tolv && fabs(r.centroids[1] - sin(20 * deg)) < tolv &&
			  fabs(r.centroids[2] - cos(110 * deg)) < tolv && fabs(r.centroids[3] - sin(110 * deg)) < tolv,
			  "rays (%s): centroids (%g, %g), (%g, %g)", prec ? "float" : "double", r.centroids[0],
			  r.centroids[1], r.centroids[2], r.centroids[3]);
		CHECK(fabs(r.centroids[0] * r.centroids[0] + r.centroids[1] * r.centroids[1] - 1.0) < 1e-15,
			  "rays: centroid 0 is not of unit length");
		{
			double		s = 0.0;

			for (int i = 0; i < 18; i++)
				if (r.labels[i] == 0)
					s += r.distance[i];
			CHECK(fabs(r.inertia[0] - s) <= 1e-15 && r.sizes[0] == 9 && r.sizes[1] == 9,
				  "rays: inertia %.17g, the sum of the cosine distances %.17g, sizes %lld %lld",
				  r.inertia[0], s, (long long) r.sizes[0], (long long) r.sizes[1]);
		}
		free_run(&r);
	}
	{
		/* Euclidean on the raw rows: the magnitude 100 rows form a cluster of their own */
		double		g[4] = {2, 2, 30, 70};
		gc_kmeans_params p = params(2, GC_KMEANS_INIT_GIVEN, g);
		Run			r;

		run_kmeans_dt(&r, raw, GC_F64, 18, 2, &p);
		CHECK(r.st == GC_OK && r.labels[2] == r.labels[17] && r.labels[0] != r.labels[2],
			  "rays: Euclidean k-means of the raw rows did not group by magnitude");
		free_run(&r);
	}
}

/*
 * Spherical k-means against the reference: embedding-like rows (16-D,
 * directions around 8 centres, magnitudes 0.5 to 50, 4 decimals), made unit
 * by gc_unit_rows in each precision, unit centroids given; tol 1e-4 and 0,
 * one and several threads; and with Hamerly's bounds off (k = 2).
 */
static void
test_cosine_reference(void)
{
	int64_t		n = 8000;
	int32_t		d = 16;
	double	   *x64 = malloc(sizeof(double) * n * d);
	float	   *x32 = malloc(sizeof(float) * n * d);
	double	   *w32;
	double		dir[8 * 16],
				init[8 * 16];
	uint64_t	s = 21;

	for (int i = 0; i < 8 * 16; i++)
		dir[i] = unif(&s) - 0.5;
	for (int64_t i = 0; i < n; i++)
	{
		double		mg = 0.5 + 49.5 * unif(&s);

		for (int32_t t = 0; t < d; t++)
			x64[i * d + t] = round(mg * (dir[(i % 8) * d + t] + 0.25 * (unif(&s) - 0.5)) * 1e4) / 1e4;
	}
	for (int64_t i = 0; i < n * d; i++)
		x32[i] = (float) x64[i];
	CHECK(gc_unit_rows(x64, GC_F64, n, d) < 0 && gc_unit_rows(x32, GC_F32, n, d) < 0, "cosine rows: a zero row");
	w32 = widen(x32, n * d);
	memcpy(init, dir, sizeof(init));
	for (int j = 0; j < 8; j++)
		gc_unit_row_f64(init + j * d, d);
	for (int c = 0; c < 3; c++)
	{
		int32_t		k = c == 2 ? 2 : 8;
		double		tol = c == 1 ? 0.0 : 1e-4;

		for (int prec = 0; prec < 2; prec++)
		{
			gc_kmeans_params p = params(k, GC_KMEANS_INIT_GIVEN, init);
			RefOut		o;
			Run			r;
			char		what[128];

			p.metric = GC_METRIC_COSINE;
			p.tol = tol;
			ref_lloyd(prec ? w32 : x64, n, d, k, init, 300, tol, GC_METRIC_COSINE, &o);
			for (int th = 0; th < 2; th++)
			{
				unit_threads = th ? 8 : 1;
				run_kmeans_dt(&r, prec ? (const void *) x32 : (const void *) x64, prec ? GC_F32 : GC_F64,
							  n, d, &p);
				snprintf(what, sizeof(what), "spherical %s, k = %d, tol %g, %d threads",
						 prec ? "float" : "double", k, tol, unit_threads);
				check_against_ref(what, &r, &o, n, d, k);
				if (r.st == GC_OK)
				{
					int			unit_bad = 0;

					for (int j = 0; j < k; j++)
					{
						double		q = 0.0;

						for (int t = 0; t < d; t++)
							q += r.centroids[j * d + t] * r.centroids[j * d + t];
						unit_bad += fabs(q - 1.0) > 1e-14;
					}
					CHECK(unit_bad == 0, "%s: %d centroids not of unit length", what, unit_bad);
				}
				free_run(&r);
			}
			ref_free(&o);
		}
	}
	unit_threads = 0;
	free(x64);
	free(x32);
	free(w32);
}

/*
 * Rows of many features (64) and many centroids, whose full searches go through
 * the checked matrix product when OpenBLAS is installed: the reference's
 * answer bit for bit on one and three threads, float and double rows, far
 * from the origin with two decimals (many near ties), Euclidean and cosine,
 * with Hamerly's bounds (k^2 <= n) and without.
 */
static void
test_product_reference(void)
{
	int32_t		d = 64;
	int64_t		n = 6000;
	double	   *x64 = malloc(sizeof(double) * n * d);
	float	   *x32 = malloc(sizeof(float) * n * d);
	double	   *w32;
	double	   *init = malloc(sizeof(double) * 90 * d);
	uint64_t	s = 77;

	for (int64_t i = 0; i < n; i++)
	{
		int			blob = (int) (unif(&s) * 30);

		for (int32_t t = 0; t < d; t++)
			x64[i * d + t] = round((1000.0 + 0.3 * blob + (t % 3) * 0.1 * blob + 2.0 * unif(&s)) * 100.0) / 100.0;
	}
	for (int m = 0; m < 2; m++)
	{
		gc_metric	metric = m ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;

		if (m)
		{
			for (int64_t i = 0; i < n * d; i++)
				x64[i] -= 1001.0;
			gc_unit_rows(x64, GC_F64, n, d);
		}
		for (int64_t i = 0; i < n * d; i++)
			x32[i] = (float) x64[i];
		if (m)
			gc_unit_rows(x32, GC_F32, n, d);
		w32 = widen(x32, n * d);
		for (int kk = 20; kk <= 90; kk += 70)
			for (int prec = 0; prec < 2; prec++)
			{
				const double *y = prec ? w32 : x64;
				gc_kmeans_params p = params(kk, GC_KMEANS_INIT_GIVEN, init);
				RefOut		o;

				for (int32_t j = 0; j < kk; j++)
					memcpy(init + (int64_t) j * d, y + (int64_t) (j * 61) * d, sizeof(double) * d);
				p.metric = metric;
				p.max_iter = 30;
				ref_lloyd(y, n, d, kk, init, 30, 1e-4, metric, &o);
				for (int th = 1; th <= 3; th += 2)
				{
					Run			r;
					char		what[128];

					unit_threads = th;
					run_kmeans_dt(&r, prec ? (const void *) x32 : (const void *) x64, prec ? GC_F32 : GC_F64,
								  n, d, &p);
					snprintf(what, sizeof(what), "%d-D %s %s, k = %d, %d threads", d,
							 prec ? "float" : "double", m ? "cosine" : "euclidean", kk, th);
					check_against_ref(what, &r, &o, n, d, kk);
					free_run(&r);
				}
				unit_threads = 0;
				ref_free(&o);
			}
		free(w32);
	}
	free(x64);
	free(x32);
	free(init);
}

/* The assignment in both precisions and metrics against a brute-force search, bit for bit. */
static void
test_assign_both(void)
{
	int64_t		n = 5000;
	int32_t		d = 7,
				k = 40;
	double	   *x64 = malloc(sizeof(double) * n * d);
	float	   *x32 = malloc(sizeof(float) * n * d);
	double	   *cen = malloc(sizeof(double) * k * d);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	double	   *dist = malloc(sizeof(double) * n);
	uint64_t	s = 31;

	for (int64_t i = 0; i < n * d; i++)
		x64[i] = round((unif(&s) * 4.0 - 2.0) * 100.0) / 100.0;	/* two decimals: ties */
	for (int m = 0; m < 2; m++)
	{
		gc_metric	metric = m ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;

		if (m)
		{
			for (int64_t i = 0; i < n; i++)
				if (x64[i * d] == 0)
					x64[i * d] = 1.0;
			gc_unit_rows(x64, GC_F64, n, d);
		}
		for (int64_t i = 0; i < n * d; i++)
			x32[i] = (float) x64[i];
		if (m)
			gc_unit_rows(x32, GC_F32, n, d);
		for (int32_t j = 0; j < k; j++)
			memcpy(cen + j * d, x64 + (j * 97) * d, sizeof(double) * d);
		memcpy(cen + 39 * d, cen + 5 * d, sizeof(double) * d);	/* a duplicate: ties to the lower */
		for (int prec = 0; prec < 2; prec++)
		{
			gc_kmeans_assign_params ap;
			gc_kmeans_assign_result ar;
			gc_exec		e = unit_exec(NULL, NULL);
			gc_status	st;
			int64_t		bad_l = 0,
						bad_d = 0;
			double	   *xr = prec ? widen(x32, n * d) : x64;

			memset(&ap, 0, sizeof(ap));
			ap.struct_size = sizeof(ap);
			ap.k = k;
			ap.centroids = cen;
			ap.metric = metric;
			ar.labels = lab;
			ar.distance = dist;
			st = gc_cpu_api()->kmeans_assign(&e, prec ? (const void *) x32 : (const void *) x64,
											 prec ? GC_F32 : GC_F64, n, d, &ap, &ar);
			CHECK(st == GC_OK, "assign: status %d (%s)", st, unit_error());
			for (int64_t i = 0; i < n && st == GC_OK; i++)
			{
				double		b;
				int32_t		j = ref_nearest(xr + i * d, cen, k, d, &b);
				double		want = gc_metric_distance(metric, b);

				bad_l += lab[i] != j;
				bad_d += memcmp(&dist[i], &want, sizeof(double)) != 0;
			}
			CHECK(bad_l == 0 && bad_d == 0, "assign %s %s: %lld labels and %lld distances differ from brute force",
				  prec ? "float" : "double", m ? "cosine" : "euclidean", (long long) bad_l, (long long) bad_d);
			if (prec)
				free(xr);
		}
	}
	free(x64);
	free(x32);
	free(cen);
	free(lab);
	free(dist);
}

/* n_init in double and with cosine: the run of least total inertia among the single runs of the seeds. */
static void
test_n_init_both(void)
{
	int64_t		n = 3000;
	int			nc = 13;
	double		init[26];
	double	   *x64;
	float	   *x32;

	lonlat_rows(n, nc, 41, &x64, &x32, init);
	for (int m = 0; m < 2; m++)
	{
		gc_kmeans_params p = params(8, GC_KMEANS_INIT_PLUSPLUS, NULL);
		Run			all,
					one[4];
		int			best = 0;
		double		bi = 0.0;

		if (m)
		{
			/* directions around a point of the sphere */
			for (int64_t i = 0; i < n * 2; i++)
				x64[i] -= i % 2 ? 37.6 : 55.15;
			CHECK(gc_unit_rows(x64, GC_F64, n, 2) < 0, "n_init: a zero row");
			p.metric = GC_METRIC_COSINE;
		}
		p.seed = 3;
		p.n_init = 4;
		run_kmeans_dt(&all, x64, GC_F64, n, 2, &p);
		for (int r = 0; r < 4; r++)
		{
			gc_kmeans_params q = p;
			double		t = 0.0;

			q.n_init = 1;
			q.seed = gc_kmeans_run_seed(3, r);
			run_kmeans_dt(&one[r], x64, GC_F64, n, 2, &q);
			for (int j = 0; j < 8; j++)
				t += one[r].inertia[j];
			if (r == 0 || t < bi)
			{
				bi = t;
				best = r;
			}
		}
		CHECK(all.st == GC_OK && all.res.best_run == best &&
			  memcmp(all.labels, one[best].labels, sizeof(int32_t) * n) == 0 &&
			  memcmp(all.centroids, one[best].centroids, sizeof(double) * 16) == 0,
			  "n_init (%s): kept run %d, the least inertia is run %d", m ? "cosine" : "double",
			  all.res.best_run, best);
		free_run(&all);
		for (int r = 0; r < 4; r++)
			free_run(&one[r]);
	}
	free(x64);
	free(x32);
}

/* The same answer on 1, 2, 3, 8 and 16 threads in double precision and with cosine. */
static void
test_threads_both(void)
{
	uint64_t	s = 77;
	int64_t		n = 200000;
	double	   *x = malloc(sizeof(double) * n * 2);
	double	   *w;
	gc_kmeans_params p = params(20, GC_KMEANS_INIT_PLUSPLUS, NULL);

	for (int64_t i = 0; i < n; i++)
	{
		x[i * 2] = dec5(-73.9 + 0.2 * unif(&s) + 0.01 * (double) (i % 20));
		x[i * 2 + 1] = dec5(40.7 + 0.2 * unif(&s));
	}
	p.seed = 7;
	threads_case_dt("double 2-D lon/lat, k = 20", x, GC_F64, n, 2, &p);
	p.k = 2;
	p.tol = 0.0;
	p.max_iter = 30;
	threads_case_dt("double 2-D lon/lat, k = 2, tol 0", x, GC_F64, n, 2, &p);
	free(x);

	n = 40000;
	w = malloc(sizeof(double) * n * 64);
	for (int64_t i = 0; i < n * 64; i++)
		w[i] = (double) (i / 64 % 32) * 0.01 + unif(&s) - 0.5;
	CHECK(gc_unit_rows(w, GC_F64, n, 64) < 0, "threads: a zero row");
	p = params(32, GC_KMEANS_INIT_RANDOM, NULL);
	p.seed = 3;
	p.max_iter = 10;
	p.metric = GC_METRIC_COSINE;
	threads_case_dt("cosine double 64-D, k = 32, random", w, GC_F64, n, 64, &p);
	{
		float	   *f = malloc(sizeof(float) * n * 64);

		for (int64_t i = 0; i < n * 64; i++)
			f[i] = (float) w[i];
		gc_unit_rows(f, GC_F32, n, 64);
		threads_case_dt("cosine float 64-D, k = 32, random", f, GC_F32, n, 64, &p);
		free(f);
	}
	free(w);
}

/*
 * Centroids follow the features' rules (common/checks.h): finite, at most
 * GC_F64_MAX_ABS in double precision and within real in single precision,
 * with the features' sentences, at the back end's entry as in the glue.
 * The case of the report: centroids beyond 1e150 whose squared distances
 * overflowed sent a row to the farther centroid without an error.
 */
static void
test_centroid_checks(void)
{
	gc_error	err;
	gc_value_verdict v;
	double		big[2] = {3e154, 2e154};
	double		ok[2] = {3e14, 2e14};
	double		nan2[2] = {1.0, NAN};
	double		inf2[2] = {-INFINITY, 1.0};
	double		real_big[2] = {1.0, 1e39};
	double		real_ok[2] = {1.0, 1e30};
	double		x64[3] = {0.0, 1.0, 2.0};
	float		x32[3] = {0.0f, 1.0f, 2.0f};
	int32_t		labels[3];
	double		dist[3];

	/* the rule of one coordinate, at its edges */
	CHECK(gc_coordinate_verdict(GC_F64_MAX_ABS, GC_F64) == GC_VALUE_OK, "1e150 is a double feature");
	CHECK(gc_coordinate_verdict(-GC_F64_MAX_ABS, GC_F64) == GC_VALUE_OK, "-1e150 is a double feature");
	CHECK(gc_coordinate_verdict(nextafter(GC_F64_MAX_ABS, INFINITY), GC_F64) == GC_VALUE_OUT_OF_RANGE,
		  "just past 1e150");
	CHECK(gc_coordinate_verdict(FLT_MAX, GC_F32) == GC_VALUE_OK, "FLT_MAX is a real");
	CHECK(gc_coordinate_verdict(nextafter((double) FLT_MAX, INFINITY), GC_F32) == GC_VALUE_OUT_OF_RANGE,
		  "just past FLT_MAX");
	CHECK(gc_coordinate_verdict(1e-300, GC_F32) == GC_VALUE_OK, "a tiny centroid coordinate is kept");
	CHECK(gc_coordinate_verdict(NAN, GC_F64) == GC_VALUE_NAN, "NaN");
	CHECK(gc_coordinate_verdict(-INFINITY, GC_F32) == GC_VALUE_INFINITE, "-Infinity");

	/* the check of an array names the row and column, with the features' sentences */
	CHECK(gc_check_centroid_values("centroids", big, 2, 1, GC_F64, &err, &v) == GC_ERR_INVALID_ARGUMENT &&
		  v == GC_VALUE_OUT_OF_RANGE &&
		  strcmp(err.message, "row 1, column 1 of centroids is out of range") == 0 &&
		  strcmp(err.detail, "The value is 3e+154; " GC_F64_RANGE_DETAIL) == 0 &&
		  strcmp(err.hint, GC_F64_RANGE_HINT) == 0,
		  "3e154: %s / %s / %s", err.message, err.detail, err.hint);
	CHECK(gc_check_centroid_values("initial_centroids", nan2, 1, 2, GC_F64, &err, &v) == GC_ERR_INVALID_ARGUMENT &&
		  v == GC_VALUE_NAN && strcmp(err.message, "row 1, column 2 of initial_centroids is NaN") == 0,
		  "NaN: %s", err.message);
	CHECK(gc_check_centroid_values("centroids", inf2, 2, 1, GC_F64, &err, &v) == GC_ERR_INVALID_ARGUMENT &&
		  v == GC_VALUE_INFINITE && strcmp(err.message, "row 1, column 1 of centroids is -Infinity") == 0,
		  "-Infinity: %s", err.message);
	CHECK(gc_check_centroid_values("centroids", real_big, 1, 2, GC_F32, &err, &v) == GC_ERR_INVALID_ARGUMENT &&
		  v == GC_VALUE_OUT_OF_RANGE &&
		  strcmp(err.message, "row 1, column 2 of centroids is out of range for type real") == 0 &&
		  strcmp(err.hint, GC_F32_RANGE_HINT) == 0,
		  "1e39 in single precision: %s / %s", err.message, err.hint);
	CHECK(gc_check_centroid_values("centroids", real_big, 1, 2, GC_F64, &err, &v) == GC_OK && v == GC_VALUE_OK,
		  "1e39 in double precision");
	CHECK(gc_check_centroid_values("centroids", real_ok, 1, 2, GC_F32, &err, &v) == GC_OK,
		  "1e30 in single precision");

	/* the CPU back end refuses them at its entry, for both functions and both precisions */
	{
		gc_kmeans_assign_params ap;
		gc_kmeans_assign_result ar;
		gc_exec		e = unit_exec(NULL, NULL);
		gc_status	st;

		memset(&ap, 0, sizeof(ap));
		ap.struct_size = sizeof(ap);
		ap.k = 2;
		ap.centroids = big;
		ar.labels = labels;
		ar.distance = dist;
		st = gc_cpu_api()->kmeans_assign(&e, x64, GC_F64, 3, 1, &ap, &ar);
		CHECK(st == GC_ERR_INVALID_ARGUMENT &&
			  strcmp(unit_error(), "row 1, column 1 of centroids is out of range") == 0,
			  "assign 3e154: status %d, %s", (int) st, unit_error());
		ap.centroids = real_big;
		ap.k = 2;
		st = gc_cpu_api()->kmeans_assign(&e, x32, GC_F32, 3, 1, &ap, &ar);
		CHECK(st == GC_ERR_INVALID_ARGUMENT, "assign 1e39 to reals: status %d", (int) st);
		st = gc_cpu_api()->kmeans_assign(&e, x64, GC_F64, 3, 1, &ap, &ar);
		CHECK(st == GC_OK && labels[2] == 0, "assign 1e39 to doubles: status %d", (int) st);
		ap.centroids = ok;
		st = gc_cpu_api()->kmeans_assign(&e, x64, GC_F64, 3, 1, &ap, &ar);
		CHECK(st == GC_OK && labels[0] == 1 && dist[0] == 2e14,
			  "assign within range: the nearer centroid (%d, %g)", labels[0], dist[0]);
	}
	{
		Run			r;
		gc_kmeans_params p = params(2, GC_KMEANS_INIT_GIVEN, big);

		run_kmeans_dt(&r, x64, GC_F64, 3, 1, &p);
		CHECK(r.st == GC_ERR_INVALID_ARGUMENT &&
			  strcmp(r.message, "row 1, column 1 of initial_centroids is out of range") == 0,
			  "k-means from 3e154: status %d, %s", (int) r.st, r.message);
		free_run(&r);
		p = params(2, GC_KMEANS_INIT_GIVEN, real_big);
		run_kmeans_dt(&r, x32, GC_F32, 3, 1, &p);
		CHECK(r.st == GC_ERR_INVALID_ARGUMENT &&
			  strcmp(r.message, "row 2, column 1 of initial_centroids is out of range for type real") == 0,
			  "k-means of reals from 1e39: status %d, %s", (int) r.st, r.message);
		free_run(&r);
		p = params(2, GC_KMEANS_INIT_GIVEN, nan2);
		run_kmeans_dt(&r, x64, GC_F64, 3, 1, &p);
		CHECK(r.st == GC_ERR_INVALID_ARGUMENT && strstr(r.message, "is NaN") != NULL,
			  "k-means from NaN: status %d, %s", (int) r.st, r.message);
		free_run(&r);
	}
}

/*
 * Runs every test; the exit status says whether all checks passed.  With
 * --no-blas every call has tuning.cpu_blas = -1: the exact loops alone.
 */
int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--no-blas") == 0)
		unit_cpu_blas = -1;
	else if (argc > 1)
	{
		fprintf(stderr, "usage: %s [--no-blas]\n", argv[0]);
		return 2;
	}
	test_rng();
	test_table();
	test_known_answer();
	test_seeded();
	test_empty_cluster();
	test_stopping_and_errors();
	test_against_reference();
	test_reseed();
	test_reseed_many_empty();
	test_cancel();
	test_greedy();
	test_threads();
	test_precision_reference();
	test_precision_flip();
	test_same_values();
	test_cosine_known();
	test_cosine_reference();
	test_assign_both();
	test_product_reference();
	test_n_init_both();
	test_threads_both();
	test_centroid_checks();
	UNIT_DONE();
}
