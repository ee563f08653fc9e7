/*
 * test_kmeans_gemm.c
 *    Unit tests of the checked nearest-centroid search (src/core/kmeans_gemm.c)
 *    and of the OpenBLAS loader (src/core/blas.c): label and distance bit for
 *    bit those of a brute-force exact search (kmeans.c's arithmetic), the
 *    second-distance lower bound below every other centroid's distance, on
 *    ties, duplicates, data far from the origin, few-decimal coordinates,
 *    overlapping blobs in 128-D and rows the product cannot decide.
 *
 * Without OpenBLAS every comparison still runs (on the exact fallback) and
 * the product's checks are counted as skipped, visibly.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blas.h"
#include "kmeans_gemm.h"
#include "unit.h"

static int	have_blas = 0;
static int	skipped = 0;

/* ---------------------------------------------------------------- data */

static uint64_t rng_state = 1;

static double
unif(void)
{
	rng_state = rng_state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static double
normal(void)
{
	double		u1 = unif(),
				u2 = unif();

	return sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
}

/*
 * n rows around nb centres drawn at offset + N(0, spread) per feature, each
 * row its centre + N(0, sd); cen [k, d] gets the mean of the rows of each
 * of the first k centres (cycled), then jitter N(0, jit) per coordinate.
 */
static double *
blob_rows(int64_t n, int32_t d, int32_t nb, double offset, double spread, double sd,
		  double *cen, int32_t k, double jit)
{
	double	   *x = malloc(sizeof(double) * (size_t) n * d);
	double	   *c = malloc(sizeof(double) * (size_t) nb * d);
	int64_t    *cnt = calloc(k, sizeof(int64_t));

	for (int64_t i = 0; i < (int64_t) nb * d; i++)
		c[i] = offset + spread * normal();
	memset(cen, 0, sizeof(double) * (size_t) k * d);
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		b = (int32_t) (unif() * nb);

		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = c[(int64_t) b * d + t] + sd * normal();
		if (b < k)
		{
			for (int32_t t = 0; t < d; t++)
				cen[(int64_t) b * d + t] += x[i * d + t];
			cnt[b]++;
		}
	}
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
		{
			double	   *v = cen + (int64_t) j * d + t;

			*v = cnt[j] ? *v / cnt[j] : c[(int64_t) (j % nb) * d + t];
			if (jit > 0)
				*v += jit * normal();
		}
	free(c);
	free(cnt);
	return x;
}

/* ---------------------------------------------------------------- the reference */

/* kmeans.c's row_d2: in double, features in order, no multiply-add (GC_EXACT_CFLAGS). */
static double
ref_d2(const void *x, gc_dtype dt, int64_t i, int32_t d, const double *c)
{
	double		s = 0.0;

	for (int32_t t = 0; t < d; t++)
	{
		double		v = dt == GC_F64 ? ((const double *) x)[i * d + t]
			: (double) ((const float *) x)[i * d + t];
		double		diff = v - c[t];

		s += diff * diff;
	}
	return s;
}

typedef struct Outcome
{
	gc_kmg_stats st;
	int			prepared;
	double		lb_ratio;		/* mean of second_lb / exact second distance */
} Outcome;

/*
 * Runs the checked search over rows x0 [n, d] (converted to dt) against
 * centroids cen [k, d], centred on the data mean (or the origin when
 * origin), batch rows at a time (<= 0: default), through a shuffled list of
 * row indices with repeats when listed; checks every answer against the
 * brute force.
 */
static Outcome
run_case(const char *name, const double *x0, int64_t n, int32_t d, const double *cen, int32_t k,
		 gc_dtype dt, int32_t batch, int listed, int origin)
{
	Outcome		o;
	void	   *x = malloc((dt == GC_F64 ? sizeof(double) : sizeof(float)) * (size_t) n * d);
	double	   *mu = calloc(d, sizeof(double));
	int64_t    *rows = malloc(sizeof(int64_t) * (size_t) n);
	int32_t    *label = malloc(sizeof(int32_t) * (size_t) n);
	double	   *best = malloc(sizeof(double) * (size_t) n);
	double	   *lb = malloc(sizeof(double) * (size_t) n);
	double	   *r = malloc(sizeof(double) * (size_t) k);
	gc_kmg	   *p = gc_kmg_create(k, d, dt);
	gc_kmg_scratch *s;
	int64_t		bad_label = 0,
				bad_best = 0,
				bad_lb = 0,
				nratio = 0;
	double		ratio = 0.0;
	const char *dts = dt == GC_F64 ? "double" : "float";

	memset(&o, 0, sizeof(o));
	for (int64_t i = 0; i < n * d; i++)
	{
		if (dt == GC_F64)
			((double *) x)[i] = x0[i];
		else
			((float *) x)[i] = (float) x0[i];
	}
	if (!origin)
	{
		for (int64_t i = 0; i < n; i++)
			for (int32_t t = 0; t < d; t++)
				mu[t] += dt == GC_F64 ? ((double *) x)[i * d + t] : (double) ((float *) x)[i * d + t];
		for (int32_t t = 0; t < d; t++)
			mu[t] /= (double) n;
	}
	for (int64_t i = 0; i < n; i++)
		rows[i] = listed ? (int64_t) (unif() * n) : i;

	CHECK(p != NULL, "%s: create", name);
	if (!p)
		return o;
	o.prepared = gc_kmg_prepare(p, cen, origin ? NULL : mu);
	s = gc_kmg_scratch_create(p, batch);
	CHECK(s != NULL, "%s: scratch", name);
	if (!s)
		return o;

	/* batch by batch, as a pool worker calls it */
	for (int64_t q = 0; q < n; q += gc_kmg_batch(s))
	{
		int32_t		m = (int32_t) (n - q < gc_kmg_batch(s) ? n - q : gc_kmg_batch(s));
		int64_t		work = gc_kmg_assign(p, s, x, listed ? rows + q : NULL, q, m,
										 label + q, best + q, lb + q, &o.st);

		if (work < (int64_t) m * k * d)
			bad_label++;		/* the work units must count at least the product */
	}

	for (int64_t q = 0; q < n; q++)
	{
		int64_t		i = rows[q];
		int32_t		bj = 0;
		double		second = HUGE_VAL;

		for (int32_t j = 0; j < k; j++)
			r[j] = ref_d2(x, dt, i, d, cen + (int64_t) j * d);
		for (int32_t j = 1; j < k; j++)
			if (r[j] < r[bj])
				bj = j;
		if (label[q] != bj)
		{
			if (bad_label < 3)
				fprintf(stderr, "  %s %s row %lld: label %d, exact %d (%.17g vs %.17g)\n", name,
						dts, (long long) i, label[q], bj, label[q] >= 0 && label[q] < k ? r[label[q]] : NAN,
						r[bj]);
			bad_label++;
		}
		if (memcmp(&best[q], &r[bj], sizeof(double)) != 0)
			bad_best++;
		if (!(lb[q] >= 0.0))
			bad_lb++;
		for (int32_t j = 0; j < k; j++)
			if (j != bj)
			{
				if (lb[q] > r[j])
				{
					if (bad_lb < 3)
						fprintf(stderr, "  %s %s row %lld: second_lb %.17g > d2 %.17g of %d\n",
								name, dts, (long long) i, lb[q], r[j], j);
					bad_lb++;
				}
				if (r[j] < second)
					second = r[j];
			}
		if (k == 1 && lb[q] != HUGE_VAL)
			bad_lb++;
		if (k > 1 && second > 0 && isfinite(second))
		{
			ratio += lb[q] / second;
			nratio++;
		}
	}
	o.lb_ratio = nratio ? ratio / nratio : 1.0;
	CHECK(bad_label == 0, "%s (%s, d %d, k %d): %lld wrong labels", name, dts, d, k,
		  (long long) bad_label);
	CHECK(bad_best == 0, "%s (%s, d %d, k %d): %lld distances not bit for bit", name, dts, d, k,
		  (long long) bad_best);
	CHECK(bad_lb == 0, "%s (%s, d %d, k %d): %lld second_lb above another distance", name, dts,
		  d, k, (long long) bad_lb);
	CHECK(o.st.rows == n, "%s: %lld rows counted of %lld", name, (long long) o.st.rows,
		  (long long) n);
	printf("  %-28s %-6s d %4d k %4d: %s, %5.1f%% rows > 1 candidate, %.2f exact/row, %lld full, lb/second %.4f\n",
		   name, dts, d, k, o.prepared ? "product" : "exact", 100.0 * o.st.multi / (double) n,
		   (double) o.st.exact / n, (long long) o.st.full, o.lb_ratio);

	gc_kmg_scratch_free(s);
	gc_kmg_free(p);
	free(x);
	free(mu);
	free(rows);
	free(label);
	free(best);
	free(lb);
	free(r);
	return o;
}

/* The product was used when OpenBLAS is there; counts a skip when it is not. */
static void
expect_product(const Outcome *o, const char *name)
{
	if (!have_blas)
	{
		skipped++;
		return;
	}
	CHECK(o->prepared == 1, "%s: the product was not used", name);
}

/* Both precisions. */
static void
both(const char *name, const double *x0, int64_t n, int32_t d, const double *cen, int32_t k,
	 int32_t batch, int listed)
{
	Outcome		o;

	o = run_case(name, x0, n, d, cen, k, GC_F32, batch, listed, 0);
	expect_product(&o, name);
	o = run_case(name, x0, n, d, cen, k, GC_F64, batch, listed, 0);
	expect_product(&o, name);
}

/* ---------------------------------------------------------------- cases */

/* Rows equidistant to two centroids, duplicate centroids, rows on centroids. */
static void
test_ties(void)
{
	/* d = 2: centroids (0,0), (2,0), (0,0) again, (1,5), (2,0) again */
	double		c2[] = {0, 0, 2, 0, 0, 0, 1, 5, 2, 0};
	double		c1[] = {0, 1, 1, -1, 0.5};
	int64_t		n = 0;
	double	   *x = malloc(sizeof(double) * 2 * 400);

	for (int a = -10; a <= 10; a++)
	{
		x[2 * n] = 1.0;			/* on the bisector of centroids 0 and 1 */
		x[2 * n + 1] = a * 0.25;
		n++;
		x[2 * n] = 0.1 * a;		/* few decimals */
		x[2 * n + 1] = 2.5 + 0.1 * a;
		n++;
	}
	for (int j = 0; j < 5; j++)
	{
		x[2 * n] = c2[2 * j];
		x[2 * n + 1] = c2[2 * j + 1];
		n++;
	}
	both("ties 2-D", x, n, 2, c2, 5, 0, 0);
	both("ties 2-D, batch 3, listed", x, n, 2, c2, 5, 3, 1);
	{
		double		x1[] = {0.5, -0.5, 0, 1, 0.25, 0.75, 100, -100, 0.5, 0.5};

		both("ties 1-D", x1, 10, 1, c1, 5, 0, 0);
	}
	free(x);
}

/*
 * Centroids in pairs a hair apart (1e-9 and 1e-13 of their scale): the
 * product cannot tell the two apart, the exact distances must.
 */
static void
test_near_duplicates(void)
{
	int32_t		d = 7,
				k = 40;
	int64_t		n = 2000;
	double	   *cen = malloc(sizeof(double) * (size_t) k * d);
	double	   *x = blob_rows(n, d, 20, 3.0, 2.0, 0.3, cen, 20, 0.0);
	Outcome		o;

	for (int32_t j = 20; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cen[j * d + t] = cen[(j - 20) * d + t] * (1.0 + (j % 2 ? 1e-9 : 1e-13) * normal());
	for (int a = 0; a < 2; a++)
	{
		o = run_case("near-duplicate centroids", x, n, d, cen, k, a ? GC_F64 : GC_F32, 0, 0, 0);
		expect_product(&o, "near-duplicate centroids");
		if (have_blas)
			CHECK(o.st.multi > (a ? n / 4 : n / 2), "near-duplicate centroids: only %lld rows with two candidates",
				  (long long) o.st.multi);
	}
	free(x);
	free(cen);
}

/* Blobs far from the origin: 1e4 + small noise, 1e6 offsets. */
static void
test_far(void)
{
	double	   *cen = malloc(sizeof(double) * 64 * 128);
	double	   *x;

	x = blob_rows(3000, 7, 50, 1e4, 0.05, 0.01, cen, 50, 0.0);
	both("1e4 + noise 0.01", x, 3000, 7, cen, 50, 0, 0);
	free(x);
	x = blob_rows(2000, 128, 20, 1e6, 2.0, 0.5, cen, 20, 0.0);
	both("1e6 offset", x, 2000, 128, cen, 20, 0, 1);
	free(x);
	/* centroids far from the data mean too: no centring helps the product, the bound must still hold */
	x = blob_rows(1000, 16, 30, 1e6, 1e3, 1.0, cen, 30, 0.0);
	{
		Outcome		o = run_case("1e6, centred on origin", x, 1000, 16, cen, 30, GC_F32, 0, 0, 1);

		expect_product(&o, "1e6, centred on origin");
		o = run_case("1e6, centred on origin", x, 1000, 16, cen, 30, GC_F64, 0, 0, 1);
		expect_product(&o, "1e6, centred on origin");
	}
	free(x);
	free(cen);
}

/* Coordinates of one or two decimals: duplicates and exact ties everywhere. */
static void
test_decimals(void)
{
	int32_t		dims[] = {2, 7};

	for (int a = 0; a < 2; a++)
	{
		int32_t		d = dims[a],
					k = 40;
		int64_t		n = 3000;
		double	   *x = malloc(sizeof(double) * (size_t) n * d);
		double	   *cen = malloc(sizeof(double) * (size_t) k * d);

		for (int64_t i = 0; i < n * d; i++)
			x[i] = nearbyint(unif() * 30) / 10.0;	/* 0.0 .. 3.0 */
		for (int32_t j = 0; j < k; j++)
			for (int32_t t = 0; t < d; t++)
				cen[j * d + t] = j % 2 ? x[(int64_t) (j * 37) * d + t]	/* a row */
					: nearbyint(unif() * 60) / 20.0;	/* on the 0.05 grid: midpoints */
		both(d == 2 ? "decimals 2-D" : "decimals 7-D", x, n, d, cen, k, 0, 0);
		free(x);
		free(cen);
	}
}

/* Overlapping blobs in 128-D, k = 256: many centroids at nearly equal distance. */
static void
test_overlap(void)
{
	int32_t		d = 128,
				k = 256;
	int64_t		n = 3000;
	double	   *cen = malloc(sizeof(double) * (size_t) k * d);
	double	   *x = blob_rows(n, d, 300, 5.0, 0.3, 1.0, cen, k, 0.05);
	Outcome		o;

	o = run_case("overlapping blobs", x, n, d, cen, k, GC_F32, 0, 0, 0);
	expect_product(&o, "overlapping blobs");
	if (have_blas)
	{
		/* the bound is tight enough to matter: few exact distances, second_lb close */
		CHECK(o.st.exact < 3 * n, "overlapping blobs: %lld exact distances for %lld rows",
			  (long long) o.st.exact, (long long) n);
		CHECK(o.lb_ratio > 0.99, "overlapping blobs: second_lb / second %.4f", o.lb_ratio);
		CHECK(o.st.full == 0, "overlapping blobs: %lld rows fully searched", (long long) o.st.full);
	}
	o = run_case("overlapping blobs", x, n, d, cen, k, GC_F64, 0, 1, 0);
	expect_product(&o, "overlapping blobs");
	if (have_blas)
		CHECK(o.st.exact < 2 * n, "overlapping blobs (double): %lld exact distances",
			  (long long) o.st.exact);

	/* centroids the means of random halves of the rows: every distance nearly equal */
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
		{
			double		sum = 0;
			int			c = 0;

			for (int64_t i = j; i < n; i += k)
			{
				sum += (double) (float) x[i * d + t];
				c++;
			}
			cen[j * d + t] = sum / c;
		}
	both("means of random groups", x, n, d, cen, k, 0, 0);
	free(x);
	free(cen);
}

/* d = 1, 2, 7, 128, 1000 against k = 1, 2, 1000. */
static void
test_shapes(void)
{
	int32_t		ds[] = {1, 2, 7, 128, 1000};
	int32_t		ks[] = {1, 2, 1000};

	for (int a = 0; a < 5; a++)
		for (int b = 0; b < 3; b++)
		{
			int32_t		d = ds[a],
						k = ks[b];
			int64_t		n = d * k >= 128000 ? 300 : 1000;
			double	   *cen = malloc(sizeof(double) * (size_t) k * d);
			double	   *x = blob_rows(n, d, k > 20 ? k : 20, 0.0, 3.0, 1.0, cen, k, 0.1);
			char		name[64];

			snprintf(name, sizeof(name), "blobs d %d k %d", d, k);
			both(name, x, n, d, cen, k, b == 1 ? 17 : 0, a % 2);
			free(x);
			free(cen);
		}
}

/* Rows the product cannot decide, scales at the ends of the range. */
static void
test_extremes(void)
{
	int32_t		d = 5,
				k = 6;
	int64_t		n = 200;
	double	   *cen = malloc(sizeof(double) * (size_t) k * d);
	double	   *x = blob_rows(n, d, 6, 0.0, 2.0, 0.5, cen, k, 0.0);
	double	   *y = malloc(sizeof(double) * (size_t) n * d);
	double	   *cy = malloc(sizeof(double) * (size_t) k * d);
	Outcome		o;

	/* a NaN row, an infinite row, a row very far away */
	x[3 * d + 1] = NAN;
	x[7 * d + 2] = INFINITY;
	x[11 * d] = 1e30;
	x[12 * d] = -3e38;
	/* centred on the origin: the data mean of these rows is not finite */
	for (int a = 0; a < 2; a++)
	{
		o = run_case("NaN, inf and far rows", x, n, d, cen, k, a ? GC_F64 : GC_F32, a ? 7 : 0, 0, 1);
		expect_product(&o, "NaN, inf and far rows");
		CHECK(o.st.full == (have_blas ? 4 : n), "NaN, inf and far rows: %lld rows fully searched, 4 expected",
			  (long long) o.st.full);
	}
	/* a centre that is not finite: every row gets the exact search */
	o = run_case("NaN data mean", x, n, d, cen, k, GC_F32, 0, 0, 0);
	CHECK(o.prepared == 0, "NaN data mean: prepare must refuse the product");

	/* tiny and huge scales */
	for (int64_t i = 0; i < n * d; i++)
		y[i] = isfinite(x[i]) && fabs(x[i]) < 1e3 ? x[i] * 1e-30 : 0.0;
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		cy[i] = cen[i] * 1e-30;
	both("scale 1e-30", y, n, d, cy, k, 0, 0);
	for (int64_t i = 0; i < n * d; i++)
		y[i] = isfinite(x[i]) && fabs(x[i]) < 1e3 ? x[i] * 1e200 : 0.0;
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		cy[i] = cen[i] * 1e200;
	o = run_case("scale 1e200 (overflow)", y, n, d, cy, k, GC_F64, 0, 0, 0);
	expect_product(&o, "scale 1e200");
	for (int64_t i = 0; i < n * d; i++)
		y[i] = isfinite(x[i]) && fabs(x[i]) < 1e3 ? x[i] * 1e-300 : 0.0;
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		cy[i] = cen[i] * 1e-300;
	o = run_case("scale 1e-300 (subnormal)", y, n, d, cy, k, GC_F64, 0, 0, 0);
	expect_product(&o, "scale 1e-300");

	/* a centroid that is not finite: every row gets the exact search */
	cen[2 * d + 1] = NAN;
	o = run_case("NaN centroid", x, n, d, cen, k, GC_F32, 0, 0, 0);
	CHECK(o.prepared == 0, "NaN centroid: prepare must refuse the product");
	CHECK(o.st.full == n, "NaN centroid: %lld rows fully searched", (long long) o.st.full);
	free(x);
	free(y);
	free(cen);
	free(cy);
}

/* One thread's share of test_threads: rows [from, to) with its own scratch. */
typedef struct ThreadJob
{
	const gc_kmg *p;
	const float *x;
	int64_t		from,
				to;
	int32_t    *label;
	double	   *best;
	double	   *lb;
	int			failed;
} ThreadJob;

static void *
thread_main(void *arg)
{
	ThreadJob  *j = arg;
	gc_kmg_scratch *s = gc_kmg_scratch_create(j->p, 0);

	if (!s)
	{
		j->failed = 1;
		return NULL;
	}
	for (int64_t i = j->from; i < j->to; i += gc_kmg_batch(s))
	{
		int32_t		m = (int32_t) (j->to - i < gc_kmg_batch(s) ? j->to - i : gc_kmg_batch(s));

		gc_kmg_assign(j->p, s, j->x, NULL, i, m, j->label + i, j->best + i, j->lb + i, NULL);
	}
	gc_kmg_scratch_free(s);
	return NULL;
}

/*
 * Four threads calling the product at once on their own blocks of rows and
 * scratch, one gc_kmg shared, as the back end's pool runs it: the labels
 * and distances of one thread, bit for bit.
 */
static void
test_threads(void)
{
	int32_t		d = 64,
				k = 100;
	int64_t		n = 8000;
	double	   *cen = malloc(sizeof(double) * (size_t) k * d);
	double	   *x0 = blob_rows(n, d, 120, 0.0, 1.0, 1.0, cen, k, 0.1);
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	int32_t    *l1 = malloc(sizeof(int32_t) * n),
			   *l4 = malloc(sizeof(int32_t) * n);
	double	   *b1 = malloc(sizeof(double) * n),
			   *b4 = malloc(sizeof(double) * n),
			   *s1 = malloc(sizeof(double) * n),
			   *s4 = malloc(sizeof(double) * n);
	gc_kmg	   *p = gc_kmg_create(k, d, GC_F32);
	ThreadJob	jobs[4];
	pthread_t	tid[4];
	int			started = 0;

	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) x0[i];
	gc_kmg_prepare(p, cen, NULL);
	{
		ThreadJob	one = {p, x, 0, n, l1, b1, s1, 0};

		thread_main(&one);
		CHECK(!one.failed, "threads: one thread's scratch");
	}
	for (int t = 0; t < 4; t++)
	{
		jobs[t] = (ThreadJob) {p, x, n * t / 4, n * (t + 1) / 4, l4, b4, s4, 0};
		started += pthread_create(&tid[t], NULL, thread_main, &jobs[t]) == 0;
	}
	CHECK(started == 4, "threads: %d of 4 started", started);
	for (int t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	CHECK(memcmp(l1, l4, sizeof(int32_t) * n) == 0 && memcmp(b1, b4, sizeof(double) * n) == 0,
		  "threads: four threads differ from one");
	/*
	 * second_lb rests on the product, whose rounding may depend on where a
	 * row sits in its batch: not compared bit for bit, only checked to be a
	 * lower bound of every other centroid's distance
	 */
	{
		int64_t		bad = 0;

		for (int64_t i = 0; i < n; i++)
			for (int32_t j = 0; j < k; j++)
				if (j != l4[i] && !(s4[i] >= 0 && s4[i] <= ref_d2(x, GC_F32, i, d, cen + (int64_t) j * d)))
					bad++;
		CHECK(bad == 0, "threads: %lld second_lb above another distance", (long long) bad);
	}
	gc_kmg_free(p);
	free(cen);
	free(x0);
	free(x);
	free(l1);
	free(l4);
	free(b1);
	free(b4);
	free(s1);
	free(s4);
}

/*
 * tuning.cpu_blas = -1 (gpuclust.cpu_blas = off): k-means takes the exact
 * loops and never opens OpenBLAS, whatever is installed; with 0 it takes the
 * checked product where OpenBLAS is there.  What the call chose is read from
 * its debug line on stderr, in a child process (the loader's state is per
 * process; this one must not have opened the library before).
 */
static void
test_cpu_blas_setting(void)
{
	for (int off = 1; off >= 0; off--)
	{
		int			fds[2];
		pid_t		pid;
		int			status = 0;
		char		out[4096];
		ssize_t		len = 0,
					got;

		CHECK(pipe(fds) == 0, "pipe");
		pid = fork();
		if (pid == 0)
		{
			int64_t		n = 2000;
			int32_t		d = 64,
						k = 16;
			float	   *x = malloc(sizeof(float) * (size_t) (n * d));
			gc_kmeans_params p;
			gc_kmeans_result r;
			gc_exec		e;
			gc_status	st;

			dup2(fds[1], 2);
			close(fds[0]);
			for (int64_t i = 0; i < n * d; i++)
				x[i] = (float) ((i * 7919) % 1000) / 1000.0f;
			memset(&p, 0, sizeof(p));
			p.struct_size = sizeof(p);
			p.k = k;
			p.max_iter = 3;
			p.tol = 0.0;
			p.seed = 1;
			p.n_init = 1;
			memset(&r, 0, sizeof(r));
			r.labels = malloc(sizeof(int32_t) * (size_t) n);
			r.distance = malloc(sizeof(double) * (size_t) n);
			r.centroids = malloc(sizeof(double) * (size_t) (k * d));
			r.sizes = malloc(sizeof(int64_t) * (size_t) k);
			r.inertia = malloc(sizeof(double) * (size_t) k);
			unit_cpu_blas = off ? -1 : 0;
			e = unit_exec(NULL, NULL);
			unit_tuning.debug = 1;
			st = gc_cpu_api()->kmeans(&e, x, GC_F32, n, d, &p, &r);
			fflush(stderr);
			_exit(st != GC_OK ? 2 : 0);
		}
		close(fds[1]);
		while (len < (ssize_t) sizeof(out) - 1 && (got = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
			len += got;
		out[len > 0 ? len : 0] = '\0';
		close(fds[0]);
		CHECK(pid > 0, "fork");
		if (pid > 0)
			waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "cpu_blas = %d: the child failed (status %d): %s", off ? -1 : 0, status, out);
		if (off)
			CHECK(strstr(out, "full searches exact") != NULL,
				  "cpu_blas = -1: k-means did not take the exact loops: %s", out);
		else
			CHECK(strstr(out, gc_blas_available() ? "full searches through the checked product"
						 : "full searches exact") != NULL,
				  "cpu_blas = 0: k-means did not take OpenBLAS where it is installed: %s", out);
	}
}

int
main(void)
{
	test_cpu_blas_setting();

	have_blas = gc_blas_available();
	printf("%s\n", gc_blas_describe());
	if (!have_blas)
		printf("SKIPPING the product's checks: OpenBLAS not used (install libopenblas0-pthread); "
			   "every case below runs the exact fallback\n");
	CHECK(have_blas == (gc_blas_state_get() == GC_BLAS_READY), "state");

	test_ties();
	test_near_duplicates();
	test_far();
	test_decimals();
	test_overlap();
	test_shapes();
	test_extremes();
	test_threads();

	if (skipped)
		printf("%d product checks SKIPPED (no OpenBLAS)\n", skipped);
	UNIT_DONE();
}
