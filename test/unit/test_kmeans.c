/*
 * test_kmeans.c
 *    Unit tests of the CPU k-means (src/core/kmeans.c), called through the
 *    CPU back end's table (gc_cpu_api), of the shared initialization code
 *    (common/kmeans_init.h) and of the generator (common/rng.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kmeans_init.h"
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

/* k-means through the CPU back end's table into freshly allocated result arrays. */
static void
run_kmeans(Run *r, const float *x, int64_t n, int32_t d, const gc_kmeans_params *p)
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

		r->st = gc_cpu_api()->kmeans(&e, x, GC_F32, n, d, p, &r->res);
	}
	snprintf(r->message, sizeof(r->message), "%s", unit_error());
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

/* Cancel stops the work and reports it. */
static void
test_cancel(void)
{
	const double centres[] = {0, 0, 3, 0};
	float	   *x = blobs(2, 50000, 2, centres, 9);
	gc_kmeans_params p = params(2, GC_KMEANS_INIT_PLUSPLUS, NULL);
	gc_kmeans_result res;
	int32_t    *labels = malloc(sizeof(int32_t) * 100000);
	double	   *dist = malloc(sizeof(double) * 100000);
	double		cen[4],
				inertia[2];
	int64_t		sizes[2];
	gc_exec		e = unit_exec(cancel_after_three, NULL);
	gc_status	st;

	res.labels = labels;
	res.distance = dist;
	res.centroids = cen;
	res.sizes = sizes;
	res.inertia = inertia;
	p.tol = 0;
	st = gc_cpu_api()->kmeans(&e, x, GC_F32, 100000, 2, &p, &res);
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
threads_case(const char *what, const float *x, int64_t n, int32_t d, const gc_kmeans_params *p)
{
	Run			a,
				b;

	unit_threads = 1;
	run_kmeans(&a, x, n, d, p);
	CHECK(a.st == GC_OK && a.timing.threads == 1 && a.res.iterations > 1,
		  "%s, 1 thread: status %d %s, %d iterations", what, a.st, a.message, a.res.iterations);
	for (int i = 1; i < UNIT_THREAD_COUNTS; i++)
	{
		unit_threads = unit_thread_counts[i];
		run_kmeans(&b, x, n, d, p);
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
	free(centres);
}

/* Runs every test; the exit status says whether all checks passed. */
int
main(void)
{
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
	UNIT_DONE();
}
