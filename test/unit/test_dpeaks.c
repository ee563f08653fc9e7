/*
 * test_dpeaks.c
 *    Unit tests of the CPU density peaks (src/core/dpeaks.c), called
 *    through the CPU back end's table (gc_cpu_api), against a plain O(n^2)
 *    reference written here from the definitions: dc as the k-th smallest
 *    of all sorted pair distances, rho with libm exp, delta and labels by
 *    scanning, centres by sorting gamma.  The reference reads rows of either
 *    element type and takes the distance of the metric from common/metric.h
 *    (sqrt(dist2), or dist2 / 2 on unit rows for cosine).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dpeaks_common.h"
#include "params.h"
#include "unit.h"

/* Density peaks of rows of element type t through the CPU back end's table. */
static gc_status
run_dpeaks_t(const void *x, gc_dtype t, int64_t n, int32_t d, const gc_dpeaks_params *p,
			 gc_dpeaks_result *r, gc_timing *timing, gc_cancel_fn cancel)
{
	gc_exec		e = unit_exec(cancel, timing);

	return gc_cpu_api()->density_peaks(&e, x, t, n, d, p, r);
}

/* The same for float rows, with optional timing and cancel callback. */
static gc_status
run_dpeaks(const float *x, int64_t n, int32_t d, const gc_dpeaks_params *p,
		   gc_dpeaks_result *r, gc_timing *timing, gc_cancel_fn cancel)
{
	return run_dpeaks_t(x, GC_F32, n, d, p, r, timing, cancel);
}

typedef struct Res
{
	int32_t    *cluster;
	double	   *rho;
	double	   *delta;
	uint8_t    *is_center;
	gc_dpeaks_result r;
} Res;

/* Allocates the result arrays of n rows. */
static void
res_alloc(Res *s, int64_t n)
{
	s->cluster = calloc(n, sizeof(int32_t));
	s->rho = calloc(n, sizeof(double));
	s->delta = calloc(n, sizeof(double));
	s->is_center = calloc(n, 1);
	memset(&s->r, 0, sizeof(s->r));
	s->r.cluster = s->cluster;
	s->r.rho = s->rho;
	s->r.delta = s->delta;
	s->r.is_center = s->is_center;
}

/* Frees the result arrays. */
static void
res_free(Res *s)
{
	free(s->cluster);
	free(s->rho);
	free(s->delta);
	free(s->is_center);
}

static uint64_t rng_state = 12345;

/* Uniform in [0, 1) from a small LCG, so the data do not depend on libc. */
static double
urand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (rng_state >> 11) / 9007199254740992.0;
}

/* Standard normal by Box-Muller. */
static double
nrand(void)
{
	double		u = urand(),
				v = urand();

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* k <= 64 Gaussian blobs in d <= 8 dimensions (extra dimensions zero when pad > d). */
static float *
blobs(int64_t n, int d, int pad, int k, double spread)
{
	float	   *x = calloc(n * pad, sizeof(float));
	double		centres[64][8];

	for (int c = 0; c < k; c++)
		for (int j = 0; j < d; j++)
			centres[c][j] = urand() * 20.0;
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (urand() * k);

		for (int j = 0; j < d; j++)
			x[i * pad + j] = (float) (centres[c][j] + spread * nrand());
	}
	return x;
}

/* Euclidean distance of rows i and j. */
static double
dist(const float *x, int d, int64_t i, int64_t j)
{
	return sqrt(gc_dist2(x + i * d, x + j * d, d));
}

/* dist2 of rows i and j of x of element type t. */
static double
dist2_t(const void *x, gc_dtype t, int d, int64_t i, int64_t j)
{
	if (t == GC_F64)
		return gc_dist2_f64((const double *) x + i * d, (const double *) x + j * d, d);
	return gc_dist2((const float *) x + i * d, (const float *) x + j * d, d);
}

/* The distance of metric m between rows i and j (cosine: the rows are unit rows). */
static double
mdist(const void *x, gc_dtype t, gc_metric m, int d, int64_t i, int64_t j)
{
	return gc_metric_distance(m, dist2_t(x, t, d, i, j));
}

/*
 * The gaussian term of a pair written from the definition exp(-(d / dc)^2):
 * Euclidean u = dist2 / dc^2 (as dist2 * (1 / (dc * dc))), cosine
 * u = ((dist2 / 2) / dc)^2 (as the square of dist2 * (0.5 / dc)).
 */
static uint64_t
ref_term(gc_metric m, double dist2, double dc)
{
	double		q;

	if (m == GC_METRIC_COSINE)
	{
		q = dist2 * (0.5 / dc);
		return gc_dp_gauss_fixed(q * q);
	}
	return gc_dp_gauss_fixed(dist2 * (1.0 / (dc * dc)));
}

/* A copy of x [n, d] float as double (exactly). */
static double *
to_f64(const float *x, int64_t n, int d)
{
	double	   *y = malloc(sizeof(double) * n * d);

	for (int64_t i = 0; i < n * d; i++)
		y[i] = (double) x[i];
	return y;
}

/* A copy of x [n, d] double rounded to float. */
static float *
to_f32(const double *x, int64_t n, int d)
{
	float	   *y = malloc(sizeof(float) * n * d);

	for (int64_t i = 0; i < n * d; i++)
		y[i] = (float) x[i];
	return y;
}

/* Orders doubles for qsort. */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Reference density peaks, straight from the definitions. */
static void
reference(const void *x, gc_dtype t, int64_t n, int d, const gc_dpeaks_params *p, double dc,
		  double *exact_rho, double *rho, double *delta, int32_t *cluster, uint8_t *center)
{
	gc_metric	m = p->metric;

	int64_t    *order = malloc(n * sizeof(int64_t));
	int64_t    *nbr = malloc(n * sizeof(int64_t));
	int32_t		next = 0;

	/*
	 * rho: the gaussian terms from the shared term function summed as
	 * integers (so the order of the reference's sum cannot decide ties);
	 * *exact_rho also gets the plain libm sum to hold the tolerance against.
	 */
	for (int64_t i = 0; i < n; i++)
	{
		double		s = 0.0;
		uint64_t	hi = 0,
					lo = 0;

		for (int64_t j = 0; j < n; j++)
		{
			double		dij;

			if (j == i)
				continue;
			dij = mdist(x, t, m, d, i, j);
			if (p->kernel == GC_DP_KERNEL_GAUSSIAN)
			{
				s += exp(-(dij / dc) * (dij / dc));
				gc_dp_acc_add(&hi, &lo, ref_term(m, dist2_t(x, t, d, i, j), dc));
			}
			else
				s += dij < dc;
		}
		exact_rho[i] = s;
		rho[i] = p->kernel == GC_DP_KERNEL_GAUSSIAN ? gc_dp_acc_value(hi, lo) : s;
	}
	/* order by insertion (n is small) */
	for (int64_t i = 0; i < n; i++)
		order[i] = i;
	for (int64_t a = 1; a < n; a++)
	{
		int64_t		v = order[a],
					b = a;

		while (b > 0 && (rho[order[b - 1]] < rho[v] || (rho[order[b - 1]] == rho[v] && order[b - 1] > v)))
		{
			order[b] = order[b - 1];
			b--;
		}
		order[b] = v;
	}
	for (int64_t r = 0; r < n; r++)
	{
		int64_t		i = order[r];
		double		best = -1.0;
		int64_t		bj = -1;

		if (r == 0)
		{
			for (int64_t j = 0; j < n; j++)
				if (mdist(x, t, m, d, i, j) > best)
					best = mdist(x, t, m, d, i, j);
		}
		else
			for (int64_t s = 0; s < r; s++)
			{
				double		dd = mdist(x, t, m, d, i, order[s]);

				if (bj < 0 || dd < best)
				{
					best = dd;
					bj = order[s];
				}
			}
		delta[i] = best;
		nbr[i] = bj;
	}
	memset(center, 0, n);
	center[order[0]] = 1;
	if (p->n_clusters > 0)
	{
		for (int c = 1; c < p->n_clusters; c++)
		{
			int64_t		bi = -1;

			for (int64_t r = 1; r < n; r++)
			{
				int64_t		i = order[r];

				if (center[i])
					continue;
				if (bi < 0 || rho[i] * delta[i] > rho[bi] * delta[bi])
					bi = i;
			}
			center[bi] = 1;
		}
	}
	else
		for (int64_t i = 0; i < n; i++)
			if (rho[i] >= p->rho_min && delta[i] >= p->delta_min)
				center[i] = 1;
	for (int64_t r = 0; r < n; r++)
	{
		int64_t		i = order[r];

		cluster[i] = center[i] ? next++ : cluster[nbr[i]];
	}
	free(order);
	free(nbr);
}

/* Density peaks parameters; dc 0 means derived from rate. */
static gc_dpeaks_params
params_of(int nc, double dc, double rate, gc_dp_kernel kernel)
{
	gc_dpeaks_params p;

	gc_dpeaks_params_init(&p);
	p.n_clusters = nc;
	p.dc = dc;
	p.derive_dc = dc == 0.0;	/* dc 0: derived from neighbor_rate */
	p.neighbor_rate = rate;
	p.kernel = kernel;
	return p;
}

/* Runs the core and the reference on rows of element type t and compares everything. */
static void
check_against_reference_t(const char *what, const void *x, gc_dtype t, int64_t n, int d,
						  gc_dpeaks_params p)
{
	Res			s;
	gc_timing	tm;
	gc_status	st;
	double	   *rho = malloc(n * sizeof(double));
	double	   *exact_rho = malloc(n * sizeof(double));
	double	   *delta = malloc(n * sizeof(double));
	int32_t    *cl = malloc(n * sizeof(int32_t));
	uint8_t    *ce = malloc(n);
	int64_t		bad_rho = 0,
				bad_delta = 0,
				bad_label = 0,
				bad_center = 0;
	double		tol = p.kernel == GC_DP_KERNEL_GAUSSIAN ? 1e-6 : 1e-12;

	res_alloc(&s, n);
	memset(&tm, 0, sizeof(tm));
	st = run_dpeaks_t(x, t, n, d, &p, &s.r, &tm, NULL);
	CHECK(st == GC_OK, "%s: status %d: %s", what, (int) st, unit_error());
	if (st != GC_OK)
		goto out;
	if (p.derive_dc)
	{
		/* dc: the k-th smallest over all ordered pairs */
		int64_t		m = n * (n - 1),
					q = 0;
		double	   *all = malloc(m * sizeof(double));
		int64_t		k = (int64_t) ceil(p.neighbor_rate * (double) m);

		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
				if (i != j)
					all[q++] = mdist(x, t, p.metric, d, i, j);
		qsort(all, m, sizeof(double), cmp_double);
		CHECK(s.r.dc == all[k - 1], "%s: dc %.17g, expected %.17g", what, s.r.dc, all[k - 1]);
		CHECK(s.r.dc_method == GC_DC_EXACT, "%s: dc method %d", what, (int) s.r.dc_method);
		free(all);
	}
	reference(x, t, n, d, &p, s.r.dc, exact_rho, rho, delta, cl, ce);
	for (int64_t i = 0; i < n; i++)
	{
		if (s.rho[i] != rho[i] || fabs(s.rho[i] - exact_rho[i]) > tol * fabs(exact_rho[i]) + 1e-15)
			bad_rho++;
		if (fabs(s.delta[i] - delta[i]) > 1e-12 * delta[i])
			bad_delta++;
		if (s.cluster[i] != cl[i])
			bad_label++;
		if (s.is_center[i] != ce[i])
			bad_center++;
	}
	CHECK(bad_rho == 0, "%s: %lld rho differ", what, (long long) bad_rho);
	CHECK(bad_delta == 0, "%s: %lld delta differ", what, (long long) bad_delta);
	CHECK(bad_center == 0, "%s: %lld centres differ", what, (long long) bad_center);
	CHECK(bad_label == 0, "%s: %lld labels differ", what, (long long) bad_label);
out:
	res_free(&s);
	free(rho);
	free(exact_rho);
	free(delta);
	free(cl);
	free(ce);
}

/* The same for float rows. */
static void
check_against_reference(const char *what, const float *x, int64_t n, int d, gc_dpeaks_params p)
{
	check_against_reference_t(what, x, GC_F32, n, d, p);
}

/* The same points with the grid (d <= 3) and without it (zero-padded to d = 5): identical output. */
static void
check_grid_vs_scan(const char *what, int64_t n, int d, gc_dp_kernel kernel, double dc, int nc)
{
	float	   *x = blobs(n, d, d, 12, 0.6);
	float	   *xp = calloc(n * 5, sizeof(float));
	Res			a,
				b;
	gc_dpeaks_params p = params_of(nc, dc, 0.02, kernel);
	gc_status	s1,
				s2;
	int64_t		diff = 0;

	for (int64_t i = 0; i < n; i++)
		for (int k = 0; k < d; k++)
			xp[i * 5 + k] = x[i * d + k];
	res_alloc(&a, n);
	res_alloc(&b, n);
	s1 = run_dpeaks(x, n, d, &p, &a.r, NULL, NULL);
	s2 = run_dpeaks(xp, n, 5, &p, &b.r, NULL, NULL);
	CHECK(s1 == GC_OK && s2 == GC_OK, "%s: status %d %d: %s", what, (int) s1, (int) s2, unit_error());
	for (int64_t i = 0; i < n; i++)
		if (a.rho[i] != b.rho[i] || a.delta[i] != b.delta[i] ||
			a.cluster[i] != b.cluster[i] || a.is_center[i] != b.is_center[i])
			diff++;
	CHECK(diff == 0, "%s: %lld points differ between the grid and the scan", what, (long long) diff);
	CHECK(a.r.n_centers == nc, "%s: %lld centres", what, (long long) a.r.n_centers);
	res_free(&a);
	res_free(&b);
	free(x);
	free(xp);
}

static int	cancel_calls = 0;

/* A cancel callback that always answers yes, counting its calls. */
static int
cancel_now(void *arg)
{
	cancel_calls++;
	return 1;
}

/* The cutoff threshold as computed before the metrics: the smallest T with sqrt(T) >= dc. */
static double
threshold_before(double dc)
{
	double		t = dc * dc;

	while (sqrt(t) < dc)
		t = nextafter(t, INFINITY);
	while (t > 0.0 && sqrt(nextafter(t, 0.0)) >= dc)
		t = nextafter(t, 0.0);
	return t;
}

/* The arithmetic of common/dpeaks_common.h: gaussian terms, the cutoff threshold, the fixed-point sum. */
static void
test_arithmetic(void)
{
	{
		double		worst = 0.0;

		for (double u = 0.0; u < 39.0; u += 0.0137)
		{
			uint64_t	f = gc_dp_gauss_fixed(u);
			double		v = (double) f * 1.3877787807814457e-17;
			double		e = exp(-u);
			/* relative error, less the absolute truncation to 2^-56 */
			double		rel = (fabs(v - e) - 1.3877787807814457e-17) / e;

			if (rel > worst)
				worst = rel;
		}
		CHECK(worst < 2e-7, "gaussian term relative error %g", worst);
		CHECK(gc_dp_gauss_fixed(0.0) == (UINT64_C(1) << 56), "exp(0) is one");
		CHECK(gc_dp_gauss_fixed(40.0) == 0 && gc_dp_gauss_fixed(39.99) == 0 && gc_dp_gauss_fixed(1e300) == 0,
			  "far terms vanish");
		CHECK(gc_dp_gauss_fixed(30.0) > 0, "near terms do not");
	}
	{
		double		dcs[] = {0.1, 1.0, 0.3, 1e-3, 12345.678, 2.0000000000000004, 0.05, 1e-160,
		5e-324, 1e200};
		int64_t		bad = 0;

		for (int i = 0; i < 10; i++)
		{
			double		T = gc_dp_cutoff_threshold(GC_METRIC_EUCLIDEAN, dcs[i]);

			CHECK(T == threshold_before(dcs[i]) && sqrt(T) >= dcs[i] &&
				  sqrt(nextafter(T, 0.0)) < dcs[i], "threshold of %g", dcs[i]);
		}
		/* the Euclidean threshold is the one of before, for any dc */
		for (int i = 0; i < 20000; i++)
		{
			double		dc = urand() * pow(10.0, (double) (i % 40) - 20.0);

			if (dc > 0 && gc_dp_cutoff_threshold(GC_METRIC_EUCLIDEAN, dc) != threshold_before(dc))
				bad++;
		}
		CHECK(bad == 0, "%lld Euclidean thresholds changed", (long long) bad);
		/* cosine: the smallest dist2 whose half is at least dc */
		for (int i = 0; i < 8; i++)
		{
			double		c[] = {0.05, 0.3, 1e-3, 1.5, 2.0, 0.1, 3e-310, 1e-5};
			double		T = gc_dp_cutoff_threshold(GC_METRIC_COSINE, c[i]);

			CHECK(T * 0.5 >= c[i] && nextafter(T, 0.0) * 0.5 < c[i] &&
				  (c[i] < 1e-300 || T == 2.0 * c[i]), "cosine threshold of %g: %.17g", c[i], T);
		}
	}
	{
		/* the gaussian factor and u of each metric */
		CHECK(gc_dp_gauss_factor(GC_METRIC_EUCLIDEAN, 0.3) == gc_dp_inv_dc2(0.3) &&
			  gc_dp_gauss_factor(GC_METRIC_EUCLIDEAN, 1e-170) == DBL_MAX &&
			  gc_dp_gauss_factor(GC_METRIC_COSINE, 0.3) == 0.5 / 0.3 &&
			  gc_dp_gauss_factor(GC_METRIC_COSINE, 1e-310) == DBL_MAX &&
			  gc_dp_gauss_factor(GC_METRIC_COSINE, 1e-300) == 0.5 / 1e-300, "gc_dp_gauss_factor");
		CHECK(gc_dp_gauss_u(GC_METRIC_EUCLIDEAN, 0.18, 0.5) == 0.09 &&
			  gc_dp_gauss_u(GC_METRIC_COSINE, 0.5, 3.0) == 2.25 &&
			  gc_dp_gauss_u(GC_METRIC_COSINE, 0.0, DBL_MAX) == 0.0 &&
			  isinf(gc_dp_gauss_u(GC_METRIC_COSINE, 1e-3, DBL_MAX)), "gc_dp_gauss_u");
		/* cosine u is ((dist2 / 2) / dc)^2 within rounding */
		for (double d2 = 0.001; d2 < 4.0; d2 *= 1.37)
		{
			double		dc = 0.07;
			double		u = gc_dp_gauss_u(GC_METRIC_COSINE, d2, gc_dp_gauss_factor(GC_METRIC_COSINE, dc));
			double		e = (d2 / 2 / dc) * (d2 / 2 / dc);

			CHECK(fabs(u - e) <= 1e-15 * e, "cosine u of %g: %.17g against %.17g", d2, u, e);
		}
	}
	{
		uint64_t	hi = 0,
					lo = 0;

		for (int i = 0; i < 5; i++)
			gc_dp_acc_add(&hi, &lo, UINT64_C(1) << 63);
		CHECK(hi == 2 && lo == (UINT64_C(1) << 63) && gc_dp_acc_value(hi, lo) == 640.0, "fixed-point sum");
	}
}

/* A tiny set with known centres: two groups, densest points at the middles. */
static void
test_tiny(void)
{
	float		x[] = {0, 0, 0.1f, 0, -0.1f, 0, 0, 0.1f, 0, -0.1f,
	5, 5, 5.1f, 5, 4.9f, 5, 5, 5.1f,
	2.5f, 2.4f};
	int64_t		n = 10;
	Res			s;
	gc_dpeaks_params p = params_of(2, 0.25, 0.02, GC_DP_KERNEL_CUTOFF);
	gc_status	st;

	res_alloc(&s, n);
	st = run_dpeaks(x, n, 2, &p, &s.r, NULL, NULL);
	CHECK(st == GC_OK, "tiny: %s", unit_error());
	CHECK(s.is_center[0] && s.is_center[5] && s.r.n_centers == 2, "tiny: centres 0 and 5");
	CHECK(s.rho[0] == 4 && s.rho[5] == 3 && s.rho[9] == 0, "tiny: rho %g %g %g", s.rho[0], s.rho[5], s.rho[9]);
	CHECK(s.cluster[0] == 0 && s.cluster[4] == 0 && s.cluster[5] == 1 && s.cluster[8] == 1,
		  "tiny: labels");
	/* all of the first group have rho 4; the nearest of them to (5, 5) is (0.1, 0) or (0, 0.1) */
	CHECK(s.delta[5] == dist(x, 2, 5, 1), "tiny: delta of the second centre %g", s.delta[5]);
	CHECK(s.delta[0] == dist(x, 2, 0, 6), "tiny: delta of the densest (farthest point) %g", s.delta[0]);
	CHECK(s.r.dc == 0.25 && s.r.dc_method == GC_DC_GIVEN, "tiny: dc given");
	res_free(&s);
}

/*
 * Gaussian rho for a dc so small that dc * dc underflows (or its reciprocal
 * overflows): exact duplicates still contribute exactly 1, other pairs 0;
 * for a dc so large that dc * dc overflows every pair contributes 1.
 */
static void
test_tiny_dc(void)
{
	/* rows 0-2 equal, 3-4 equal, 5 at the origin, 6 the smallest float step (1.4e-45) from it */
	const float step = 1.40129846e-45f;
	const double dcs[] = {1e-170, 1e-160, 1e-155, 1e-300, 4.9406564584124654e-324};
	const double want[] = {2, 2, 2, 1, 1, 0, 0};
	int			dims[] = {1, 2, 4};

	CHECK(gc_dp_inv_dc2(1e-170) == DBL_MAX && gc_dp_inv_dc2(1.0) == 1.0 &&
		  gc_dp_inv_dc2(1e-150) == 1.0 / (1e-150 * 1e-150) &&
		  gc_dp_inv_dc2(3e150) == 1.0 / (3e150 * 3e150) && gc_dp_inv_dc2(1e200) == 0.0,
		  "gc_dp_inv_dc2");
	for (int a = 0; a < 3; a++)
	{
		int			d = dims[a];
		float		x[7 * 4];

		for (int i = 0; i < 7; i++)
			for (int k = 0; k < d; k++)
				x[i * d + k] = i < 3 ? 1.5f : -2.0f;
		for (int k = 0; k < d; k++)
		{
			x[5 * d + k] = 0.0f;
			x[6 * d + k] = k == 0 ? step : 0.0f;
		}
		for (int c = 0; c < 5; c++)
		{
			gc_dpeaks_params p = params_of(2, dcs[c], 0.02, GC_DP_KERNEL_GAUSSIAN);
			Res			s;
			gc_status	st;
			int			ok = 1;

			res_alloc(&s, 7);
			st = run_dpeaks(x, 7, d, &p, &s.r, NULL, NULL);
			for (int i = 0; i < 7; i++)
				ok &= s.rho[i] == want[i];
			CHECK(st == GC_OK && ok, "tiny dc %g, d = %d: status %d, rho %g %g %g %g %g %g %g",
				  dcs[c], d, st, s.rho[0], s.rho[1], s.rho[2], s.rho[3], s.rho[4], s.rho[5], s.rho[6]);
			res_free(&s);
		}
		{
			gc_dpeaks_params p = params_of(2, 1e200, 0.02, GC_DP_KERNEL_GAUSSIAN);
			Res			s;
			gc_status	st;
			int			ok = 1;

			res_alloc(&s, 7);
			st = run_dpeaks(x, 7, d, &p, &s.r, NULL, NULL);
			for (int i = 0; i < 7; i++)
				ok &= s.rho[i] == 6.0;
			CHECK(st == GC_OK && ok, "huge dc, d = %d: status %d, rho %g", d, st, s.rho[0]);
			res_free(&s);
		}
	}
}

/* Against the reference: both kernels, both selection modes, grids of 1 to 3 dimensions, the scan, duplicates. */
static void
test_reference_sets(void)
{
	{
		float	   *x = blobs(600, 2, 2, 15, 0.5);
		float	   *y = blobs(400, 4, 4, 5, 0.7);
		gc_dpeaks_params p;

		check_against_reference("gaussian 2-D", x, 600, 2, params_of(15, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
		check_against_reference("cutoff 2-D", x, 600, 2, params_of(15, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
		check_against_reference("cutoff 2-D dc given", x, 600, 2, params_of(7, 0.4, 0.02, GC_DP_KERNEL_CUTOFF));
		check_against_reference("gaussian 4-D", y, 400, 4, params_of(5, 0.0, 0.015, GC_DP_KERNEL_GAUSSIAN));
		p = params_of(0, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
		p.rho_min = 5.0;
		p.delta_min = 2.0;
		check_against_reference("thresholds", x, 600, 2, p);
		free(x);
		free(y);
	}

	/* duplicates: equal rho broken by row order, zero distances */
	{
		float	   *x = blobs(300, 2, 2, 4, 0.3);

		for (int i = 100; i < 200; i++)
		{
			x[i * 2] = x[(i - 100) * 2];
			x[i * 2 + 1] = x[(i - 100) * 2 + 1];
		}
		check_against_reference("duplicates gaussian", x, 300, 2, params_of(4, 0.0, 0.05, GC_DP_KERNEL_GAUSSIAN));
		check_against_reference("duplicates cutoff", x, 300, 2, params_of(4, 0.0, 0.05, GC_DP_KERNEL_CUTOFF));
		free(x);
	}

	/* 1-D and 3-D grids against the reference */
	{
		float	   *x1 = blobs(500, 1, 1, 6, 0.5);
		float	   *x3 = blobs(500, 3, 3, 6, 0.5);

		check_against_reference("cutoff 1-D", x1, 500, 1, params_of(6, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
		check_against_reference("cutoff 3-D", x3, 500, 3, params_of(6, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
		free(x1);
		free(x3);
	}
}

/*
 * A few far rows: the grid spans the box of a sample and the far rows sit
 * in the edge cells, which reach on to them; the answer must not change.
 * Dense blobs in [0, 2e-2]^d with rows at +-1e6 and one at 3e3, 1-D to 3-D.
 */
static void
test_far_rows(void)
{
	for (int d = 1; d <= 3; d++)
	{
		int64_t		n = 2500;
		float	   *x = blobs(n, d, d, 5, 0.3);
		char		what[64];

		for (int64_t i = 0; i < n * d; i++)
			x[i] *= 1e-3f;
		for (int j = 0; j < d; j++)
		{
			x[7 * d + j] = 1e6f;
			x[8 * d + j] = -1e6f;
			x[9 * d + j] = 1e6f;		/* with row 7: a far pair */
			x[1000 * d + j] = 3e3f;
		}
		snprintf(what, sizeof(what), "far rows, cutoff %d-D", d);
		check_against_reference(what, x, n, d, params_of(5, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
		snprintf(what, sizeof(what), "far rows, cutoff %d-D, dc given", d);
		check_against_reference(what, x, n, d, params_of(4, 2e-4, 0.02, GC_DP_KERNEL_CUTOFF));
		snprintf(what, sizeof(what), "far rows, gaussian %d-D", d);
		check_against_reference(what, x, n, d, params_of(5, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
		free(x);
	}
	/*
	 * Most rows on one point, a few spread: the sample's box would have width
	 * zero (dc given: derived, it would be zero, the data error).
	 */
	{
		int64_t		n = 3000;
		float	   *x = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n * 2; i++)
			x[i] = i < 2 * 40 ? (float) urand() : 0.5f;
		check_against_reference("one point holds most rows, cutoff, dc given", x, n, 2,
								params_of(3, 0.05, 0.02, GC_DP_KERNEL_CUTOFF));
		free(x);
	}
}

/* ---------------------------------------------------------------- double precision and cosine */

/* Rounds v to 5 decimals. */
static double
dec5(double v)
{
	return round(v * 1e5) / 1e5;
}

/*
 * Double precision: coordinates with 5 decimals (longitude / latitude like)
 * and a round dc of 0.05.  Pairs at exactly 0.05 in decimal fall on either
 * side of dc depending on the precision: 55.17545 and 55.22545 are
 * 0.05000000000000426 apart in double (not within dc) but 0.049999237 in
 * float (within); 55.22545 and 55.27545 the other way round.
 */
static void
test_f64_decimals(void)
{
	/* two hand-made pairs: their rho in each precision */
	{
		double		x[] = {55.17545, 37.61733, 55.22545, 37.61733,
		55.22545, 40.0, 55.27545, 40.0};
		float	   *xf = to_f32(x, 4, 2);
		gc_dpeaks_params p = params_of(2, 0.05, 0.02, GC_DP_KERNEL_CUTOFF);
		Res			a,
					b;
		gc_status	s1,
					s2;

		res_alloc(&a, 4);
		res_alloc(&b, 4);
		s1 = run_dpeaks_t(x, GC_F64, 4, 2, &p, &a.r, NULL, NULL);
		s2 = run_dpeaks_t(xf, GC_F32, 4, 2, &p, &b.r, NULL, NULL);
		CHECK(s1 == GC_OK && s2 == GC_OK, "5 decimals pairs: %s", unit_error());
		CHECK(a.rho[0] == 0 && a.rho[1] == 0 && a.rho[2] == 1 && a.rho[3] == 1,
			  "5 decimals pairs, double: rho %g %g %g %g", a.rho[0], a.rho[1], a.rho[2], a.rho[3]);
		CHECK(b.rho[0] == 1 && b.rho[1] == 1 && b.rho[2] == 0 && b.rho[3] == 0,
			  "5 decimals pairs, float: rho %g %g %g %g", b.rho[0], b.rho[1], b.rho[2], b.rho[3]);
		/* delta in double is the double distance: row 0's nearest denser point is row 2 or 3 */
		CHECK(a.delta[1] == sqrt(gc_dist2_f64(x + 2, x, 2)) || a.delta[1] == fabs(55.22545 - 55.17545),
			  "5 decimals pairs, double: delta %.17g", a.delta[1]);
		res_free(&a);
		res_free(&b);
		free(xf);
	}
	/* a lattice of 0.01 with 5-decimal offsets, duplicates and a far row */
	{
		int			nx = 24,
					ny = 20;
		int64_t		n = (int64_t) nx * ny + 30 + 1,
					q = 0,
					diff = 0;
		double	   *x = malloc(sizeof(double) * n * 2);
		float	   *xf;
		Res			a,
					b;
		gc_dpeaks_params p = params_of(4, 0.05, 0.02, GC_DP_KERNEL_CUTOFF);

		for (int i = 0; i < nx; i++)
			for (int j = 0; j < ny; j++)
			{
				/* two dense spots: the lattice is finer near them */
				x[q * 2] = dec5(55.15545 + 0.01 * i + (i > nx / 2 ? 0.3 : 0.0));
				x[q * 2 + 1] = dec5(37.61733 + 0.01 * j);
				q++;
			}
		for (int i = 0; i < 30; i++, q++)
		{
			x[q * 2] = x[(i * 7) * 2];
			x[q * 2 + 1] = x[(i * 7) * 2 + 1];
		}
		x[q * 2] = 175.00001;
		x[q * 2 + 1] = -45.12345;
		q++;
		xf = to_f32(x, n, 2);
		check_against_reference_t("5 decimals, double, cutoff", x, GC_F64, n, 2, p);
		check_against_reference_t("5 decimals, float, cutoff", xf, GC_F32, n, 2, p);
		check_against_reference_t("5 decimals, double, gaussian", x, GC_F64, n, 2,
								  params_of(4, 0.05, 0.02, GC_DP_KERNEL_GAUSSIAN));
		check_against_reference_t("5 decimals, double, derived dc", x, GC_F64, n, 2,
								  params_of(4, 0.0, 0.03, GC_DP_KERNEL_CUTOFF));
		p.n_clusters = 0;
		p.rho_min = 8;
		p.delta_min = 0.05;
		check_against_reference_t("5 decimals, double, thresholds", x, GC_F64, n, 2, p);
		p = params_of(4, 0.05, 0.02, GC_DP_KERNEL_CUTOFF);
		res_alloc(&a, n);
		res_alloc(&b, n);
		CHECK(run_dpeaks_t(x, GC_F64, n, 2, &p, &a.r, NULL, NULL) == GC_OK &&
			  run_dpeaks_t(xf, GC_F32, n, 2, &p, &b.r, NULL, NULL) == GC_OK, "5 decimals: %s",
			  unit_error());
		for (int64_t i = 0; i < n; i++)
			diff += a.rho[i] != b.rho[i];
		CHECK(diff > 0, "5 decimals: double and float give the same rho everywhere");
		res_free(&a);
		res_free(&b);
		free(x);
		free(xf);
	}
	/* float rows given as double: the same answer bit for bit */
	{
		int64_t		n = 3000;
		float	   *x = blobs(n, 3, 3, 8, 0.4);
		double	   *y = to_f64(x, n, 3);
		gc_dp_kernel kernels[] = {GC_DP_KERNEL_CUTOFF, GC_DP_KERNEL_GAUSSIAN};

		for (int m = 0; m < 2; m++)
			for (int kk = 0; kk < 2; kk++)
			{
				gc_dpeaks_params p = params_of(8, 0.0, 0.02, kernels[kk]);
				Res			a,
							b;

				p.metric = m ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
				if (m)
				{
					gc_unit_rows(x, GC_F32, n, 3);
					free(y);
					y = to_f64(x, n, 3);
				}
				res_alloc(&a, n);
				res_alloc(&b, n);
				CHECK(run_dpeaks_t(x, GC_F32, n, 3, &p, &a.r, NULL, NULL) == GC_OK &&
					  run_dpeaks_t(y, GC_F64, n, 3, &p, &b.r, NULL, NULL) == GC_OK &&
					  memcmp(&a.r.dc, &b.r.dc, sizeof(double)) == 0 &&
					  memcmp(a.rho, b.rho, sizeof(double) * n) == 0 &&
					  memcmp(a.delta, b.delta, sizeof(double) * n) == 0 &&
					  memcmp(a.cluster, b.cluster, sizeof(int32_t) * n) == 0 &&
					  memcmp(a.is_center, b.is_center, n) == 0,
					  "float rows as double, metric %d, kernel %d: %s", m, (int) kernels[kk], unit_error());
				res_free(&a);
				res_free(&b);
			}
		free(x);
		free(y);
	}
	/* double precision against the reference: 1-D to 4-D, the scan, far rows */
	for (int d = 1; d <= 4; d++)
	{
		int64_t		n = 700;
		float	   *xb = blobs(n, d, d, 7, 0.4);
		double	   *x = malloc(sizeof(double) * n * d);
		char		what[80];

		for (int64_t i = 0; i < n * d; i++)
			x[i] = dec5(1000.0 + (double) xb[i] + 1e-7 * urand());
		for (int k = 0; k < d; k++)
			x[5 * d + k] = 1e7 + k;
		snprintf(what, sizeof(what), "double %d-D cutoff, derived dc", d);
		check_against_reference_t(what, x, GC_F64, n, d, params_of(7, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
		snprintf(what, sizeof(what), "double %d-D gaussian, derived dc", d);
		check_against_reference_t(what, x, GC_F64, n, d, params_of(7, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
		snprintf(what, sizeof(what), "double %d-D cutoff, dc 0.25", d);
		check_against_reference_t(what, x, GC_F64, n, d, params_of(7, 0.25, 0.02, GC_DP_KERNEL_CUTOFF));
		free(x);
		free(xb);
	}
}

/*
 * Rows for the cosine metric: k directions (unit vectors with a seeded
 * angular spread) in d dimensions, each row a direction times a magnitude
 * from 0.01 to 1000, as the caller passes them before gc_unit_rows.
 */
static double *
directions(int64_t n, int d, int k, double spread)
{
	double	   *x = malloc(sizeof(double) * n * d);
	double	   *c = malloc(sizeof(double) * k * d);
	const double mags[] = {0.01, 1.0, 3.0, 1000.0, 0.5};

	for (int a = 0; a < k; a++)
	{
		for (int j = 0; j < d; j++)
			c[a * d + j] = nrand();
		gc_unit_row_f64(c + a * d, d);
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			a = (int) (urand() * k);
		double		m = mags[i % 5];

		for (int j = 0; j < d; j++)
			x[i * d + j] = m * (c[a * d + j] + spread * nrand());
	}
	free(c);
	return x;
}

/* The cosine metric: known answers on rays, then the reference on directions, both precisions. */
static void
test_cosine(void)
{
	/*
	 * Rays along +x (4 rows of magnitudes 1, 2, 5, 0.1), +y (3 rows) and -x
	 * (2 rows): distances 0 on a ray, 1 at 90 degrees, 2 at 180 degrees.
	 */
	{
		double		x[] = {1, 0, 2, 0, 5, 0, 0.1, 0,
			0, 1, 0, 7, 0, 0.3,
		-4, 0, -0.25, 0};
		int64_t		n = 9;
		gc_dpeaks_params p = params_of(3, 0.5, 0.02, GC_DP_KERNEL_CUTOFF);
		Res			s;

		p.metric = GC_METRIC_COSINE;
		CHECK(gc_unit_rows(x, GC_F64, n, 2) == -1, "rays: unit rows");
		res_alloc(&s, n);
		CHECK(run_dpeaks_t(x, GC_F64, n, 2, &p, &s.r, NULL, NULL) == GC_OK, "rays: %s", unit_error());
		CHECK(s.rho[0] == 3 && s.rho[4] == 2 && s.rho[7] == 1 && s.rho[8] == 1, "rays: rho %g %g %g",
			  s.rho[0], s.rho[4], s.rho[7]);
		CHECK(s.delta[0] == 2.0 && s.delta[4] == 1.0 && s.delta[7] == 1.0 && s.delta[1] == 0.0 &&
			  s.delta[8] == 0.0, "rays: delta %g %g %g %g", s.delta[0], s.delta[4], s.delta[7], s.delta[1]);
		CHECK(s.r.n_centers == 3 && s.is_center[0] && s.is_center[4] && s.is_center[7] &&
			  s.cluster[3] == 0 && s.cluster[6] == 1 && s.cluster[8] == 2, "rays: clusters");
		/* the same in single precision, and with the gaussian kernel: u = (d / 0.5)^2 */
		{
			float	   *xf = to_f32(x, n, 2);
			Res			g;

			res_alloc(&g, n);
			CHECK(run_dpeaks_t(xf, GC_F32, n, 2, &p, &g.r, NULL, NULL) == GC_OK &&
				  memcmp(g.rho, s.rho, sizeof(double) * n) == 0 &&
				  memcmp(g.delta, s.delta, sizeof(double) * n) == 0 &&
				  memcmp(g.cluster, s.cluster, sizeof(int32_t) * n) == 0, "rays, float");
			p.kernel = GC_DP_KERNEL_GAUSSIAN;
			CHECK(run_dpeaks_t(x, GC_F64, n, 2, &p, &g.r, NULL, NULL) == GC_OK &&
				  fabs(g.rho[0] - (3.0 + 3.0 * exp(-4.0) + 2.0 * exp(-16.0))) < 1e-6 &&
				  fabs(g.rho[4] - (2.0 + 6.0 * exp(-4.0))) < 1e-6, "rays, gaussian: rho %.9g %.9g",
				  g.rho[0], g.rho[4]);
			res_free(&g);
			free(xf);
		}
		res_free(&s);
	}
	/* directions against the reference: 2-D and 3-D (the grid on unit rows), 8-D, 32-D */
	{
		int			dims[] = {2, 3, 8, 32};

		for (int a = 0; a < 4; a++)
		{
			int			d = dims[a];
			int64_t		n = 600;
			double	   *x = directions(n, d, 6, d <= 3 ? 0.08 : 0.25);
			float	   *xf;
			char		what[80];
			gc_dpeaks_params p;

			for (int i = 0; i < 20; i++)	/* duplicates of direction (other magnitudes) */
				for (int j = 0; j < d; j++)
					x[(300 + i) * d + j] = 2.5 * x[i * d + j];
			for (int j = 0; j < d; j++)	/* a far row: a direction of its own */
				x[17 * d + j] = j == 0 ? -1.0 : 1e-3;
			CHECK(gc_unit_rows(x, GC_F64, n, d) == -1, "directions: unit rows");
			xf = to_f32(x, n, d);
			for (int t = 0; t < 2; t++)
			{
				const void *rows = t ? (const void *) xf : (const void *) x;
				gc_dtype	ty = t ? GC_F32 : GC_F64;
				const char *pr = t ? "float" : "double";

				p = params_of(6, 0.0, 0.02, GC_DP_KERNEL_CUTOFF);
				p.metric = GC_METRIC_COSINE;
				snprintf(what, sizeof(what), "cosine %d-D %s cutoff, derived dc", d, pr);
				check_against_reference_t(what, rows, ty, n, d, p);
				p.kernel = GC_DP_KERNEL_GAUSSIAN;
				snprintf(what, sizeof(what), "cosine %d-D %s gaussian, derived dc", d, pr);
				check_against_reference_t(what, rows, ty, n, d, p);
				p = params_of(0, 0.01, 0.02, GC_DP_KERNEL_CUTOFF);
				p.metric = GC_METRIC_COSINE;
				p.rho_min = 10;
				p.delta_min = 0.05;
				snprintf(what, sizeof(what), "cosine %d-D %s cutoff, dc 0.01, thresholds", d, pr);
				check_against_reference_t(what, rows, ty, n, d, p);
			}
			free(x);
			free(xf);
		}
	}
	/* the grid and the scan agree on unit rows (3-D, and padded to 5-D) */
	{
		int64_t		n = 8000;
		double	   *x = directions(n, 3, 10, 0.05);
		double	   *xp = calloc(n * 5, sizeof(double));
		gc_dp_kernel kernels[] = {GC_DP_KERNEL_CUTOFF, GC_DP_KERNEL_GAUSSIAN};

		gc_unit_rows(x, GC_F64, n, 3);
		for (int64_t i = 0; i < n; i++)
			for (int k = 0; k < 3; k++)
				xp[i * 5 + k] = x[i * 3 + k];
		for (int kk = 0; kk < 2; kk++)
		{
			gc_dpeaks_params p = params_of(10, 0.004, 0.02, kernels[kk]);
			Res			a,
						b;
			int64_t		diff = 0;

			p.metric = GC_METRIC_COSINE;
			res_alloc(&a, n);
			res_alloc(&b, n);
			CHECK(run_dpeaks_t(x, GC_F64, n, 3, &p, &a.r, NULL, NULL) == GC_OK &&
				  run_dpeaks_t(xp, GC_F64, n, 5, &p, &b.r, NULL, NULL) == GC_OK, "cosine grid: %s",
				  unit_error());
			for (int64_t i = 0; i < n; i++)
				if (a.rho[i] != b.rho[i] || a.delta[i] != b.delta[i] ||
					a.cluster[i] != b.cluster[i] || a.is_center[i] != b.is_center[i])
					diff++;
			CHECK(diff == 0 && a.r.n_centers == 10, "cosine grid, kernel %d: %lld points differ",
				  (int) kernels[kk], (long long) diff);
			res_free(&a);
			res_free(&b);
		}
		free(x);
		free(xp);
	}
}

/* dc from the seeded sample in the metric's units (cosine, double precision). */
static void
test_sample_cosine(void)
{
	int64_t		n = GC_DP_DC_EXACT_MAX_N + 1;
	int			d = 16;
	double	   *x = directions(n, d, 12, 0.3);
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	double	   *v = malloc(m * sizeof(double));
	gc_dpeaks_params p = params_of(12, 0.0, 0.02, GC_DP_KERNEL_CUTOFF);
	Res			a;
	int64_t		bad = 0;

	gc_unit_rows(x, GC_F64, n, d);
	p.metric = GC_METRIC_COSINE;
	res_alloc(&a, n);
	CHECK(run_dpeaks_t(x, GC_F64, n, d, &p, &a.r, NULL, NULL) == GC_OK &&
		  a.r.dc_method == GC_DC_SAMPLE, "cosine sample: %s", unit_error());
	for (int64_t q = 0; q < m; q++)
	{
		int64_t		i,
					j;

		gc_dp_sample_pair(GC_DP_DEFAULT_SEED, q, n, &i, &j);
		v[q] = mdist(x, GC_F64, GC_METRIC_COSINE, d, i, j);
	}
	qsort(v, m, sizeof(double), cmp_double);
	CHECK(a.r.dc == v[(int64_t) ceil(0.02 * m) - 1] && a.r.dc > 0 && a.r.dc < 2,
		  "cosine sample: dc %.17g vs %.17g", a.r.dc, v[(int64_t) ceil(0.02 * m) - 1]);
	for (int64_t i = 0; i < n; i += 4999)
	{
		int64_t		cnt = 0;

		for (int64_t j = 0; j < n; j++)
			if (j != i && mdist(x, GC_F64, GC_METRIC_COSINE, d, i, j) < a.r.dc)
				cnt++;
		bad += cnt != (int64_t) a.rho[i];
	}
	CHECK(bad == 0, "cosine sample: %lld rho spot checks failed", (long long) bad);
	res_free(&a);
	free(x);
	free(v);
}

/* Above the exact limit: dc from the seeded sample, deterministic. */
static void
test_sample(void)
{
	int64_t		n = GC_DP_DC_EXACT_MAX_N + 1;
	float	   *x = blobs(n, 2, 2, 10, 0.5);
	Res			a,
				b;
	gc_dpeaks_params p = params_of(10, 0.0, 0.02, GC_DP_KERNEL_CUTOFF);
	gc_status	s1,
				s2;
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS,
				bad = 0;
	double	   *v = malloc(m * sizeof(double));

	res_alloc(&a, n);
	res_alloc(&b, n);
	s1 = run_dpeaks(x, n, 2, &p, &a.r, NULL, NULL);
	s2 = run_dpeaks(x, n, 2, &p, &b.r, NULL, NULL);
	CHECK(s1 == GC_OK && s2 == GC_OK, "sample: %s", unit_error());
	CHECK(a.r.dc_method == GC_DC_SAMPLE && a.r.dc_sample == m, "sample: method %d", (int) a.r.dc_method);
	for (int64_t q = 0; q < m; q++)
	{
		int64_t		i,
					j;

		gc_dp_sample_pair(GC_DP_DEFAULT_SEED, q, n, &i, &j);
		if (i == j || i < 0 || j < 0 || i >= n || j >= n)
			bad++;
		v[q] = dist(x, 2, i, j);
	}
	qsort(v, m, sizeof(double), cmp_double);
	CHECK(a.r.dc == v[(int64_t) ceil(0.02 * m) - 1], "sample: dc %.17g vs %.17g", a.r.dc, v[(int64_t) ceil(0.02 * m) - 1]);
	CHECK(a.r.dc == b.r.dc && memcmp(a.cluster, b.cluster, n * sizeof(int32_t)) == 0, "sample: deterministic");
	/* spot checks of rho and delta by brute force */
	for (int64_t i = 0; i < n; i += 997)
	{
		int64_t		cnt = 0;
		double		best = INFINITY;

		for (int64_t j = 0; j < n; j++)
			if (j != i && dist(x, 2, i, j) < a.r.dc)
				cnt++;
		if (cnt != (int64_t) a.rho[i])
			bad++;
		for (int64_t j = 0; j < n; j++)
			if (a.rho[j] > a.rho[i] || (a.rho[j] == a.rho[i] && j < i))
				if (dist(x, 2, i, j) < best)
					best = dist(x, 2, i, j);
		if (isfinite(best) && best != a.delta[i])
			bad++;
	}
	CHECK(bad == 0, "sample: %lld spot checks failed", (long long) bad);
	res_free(&a);
	res_free(&b);
	free(x);
	free(v);
}

/* Bad parameters and data are refused: the statuses of the checks and the zero-quantile data error. */
static void
test_errors(void)
{
	{
		float		x[] = {0, 0, 1, 1, 2, 2};
		Res			s;
		gc_dpeaks_params p;

		res_alloc(&s, 3);
		p = params_of(4, 0.5, 0.02, GC_DP_KERNEL_GAUSSIAN);
		CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT, "n_clusters > n");
		p = params_of(1, 0.0, 1.5, GC_DP_KERNEL_GAUSSIAN);
		CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT, "rate > 1");
		p = params_of(1, -1.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
		CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT, "dc < 0");
		/* an unknown kernel can only come from a bug of the caller (common/checks.h) */
		p = params_of(1, 0.5, 0.02, (gc_dp_kernel) 7);
		CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INTERNAL, "kernel");
		p = params_of(1, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
		CHECK(run_dpeaks(x, 1, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT, "one row, no dc");
		p = params_of(1, 0.5, 0.02, GC_DP_KERNEL_GAUSSIAN);
		CHECK(run_dpeaks(x, 1, 2, &p, &s.r, NULL, NULL) == GC_OK &&
			  s.cluster[0] == 0 && s.is_center[0] && s.rho[0] == 0.0 && s.delta[0] == 0.0, "one row, dc given");
		res_free(&s);
	}
	{
		float		dup[] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2};
		Res			s;
		gc_dpeaks_params p = params_of(1, 0.0, 0.1, GC_DP_KERNEL_GAUSSIAN);
		const char *err;

		res_alloc(&s, 5);
		CHECK(run_dpeaks(dup, 5, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT,
			  "zero dc from duplicates: %s", unit_error());
		err = unit_error();
		CHECK(strcmp(err, "the neighbor_rate quantile of the pairwise distances is zero") == 0 &&
			  gc_cpu_api()->last_error()->detail[0] != '\0' &&
			  gc_cpu_api()->last_error()->hint[0] != '\0', "zero dc message: %s", err);
		res_free(&s);
	}
}

/* The checks through the table: status and words; empty input; timing. */
static void
test_checks(void)
{
	float		x[] = {0, 0, 1, 1, 2, 2};
	Res			s;
	gc_dpeaks_params p;
	gc_timing	t;
	struct
	{
		int			nc;
		double		dc;
		double		rate;
		gc_status	expected;
		const char *message;
	}			bad[] = {
		{-1, 0.5, 0.02, GC_ERR_INVALID_ARGUMENT, "n_clusters must be at least 1"},
		{4, 0.5, 0.02, GC_ERR_INVALID_ARGUMENT, "n_clusters must not exceed the number of rows"},
		{1, -2.0, 0.02, GC_ERR_INVALID_ARGUMENT, "dc must be positive and finite"},
		{1, INFINITY, 0.02, GC_ERR_INVALID_ARGUMENT, "dc must be positive and finite"},
		{1, 0.0, 0.0, GC_ERR_INVALID_ARGUMENT, "neighbor_rate must be between 0 and 1 exclusive"},
		{1, 0.0, NAN, GC_ERR_INVALID_ARGUMENT, "neighbor_rate must be between 0 and 1 exclusive"},
	};

	res_alloc(&s, 3);
	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
	{
		gc_status	st;

		p = params_of(bad[b].nc, bad[b].dc, bad[b].rate, GC_DP_KERNEL_CUTOFF);
		st = run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL);
		CHECK(st == bad[b].expected && strcmp(unit_error(), bad[b].message) == 0,
			  "bad parameters %zu: status %d, %s", b, (int) st, unit_error());
	}
	p = params_of(0, 0.0, 0.02, GC_DP_KERNEL_CUTOFF);
	p.rho_min = NAN;
	CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INVALID_ARGUMENT &&
		  strcmp(unit_error(), "rho_min and delta_min must be numbers") == 0, "rho_min NaN: %s",
		  unit_error());
	p = params_of(1, 0.5, 0.02, GC_DP_KERNEL_CUTOFF);
	p.derive_dc = 1;
	CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INTERNAL, "dc both given and derived");
	p = params_of(1, 0.5, 0.02, GC_DP_KERNEL_CUTOFF);
	p.struct_size = 8;
	CHECK(run_dpeaks(x, 3, 2, &p, &s.r, NULL, NULL) == GC_ERR_INTERNAL, "params struct_size");

	p = params_of(0, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
	s.r.n_centers = 5;
	CHECK(run_dpeaks(NULL, 0, 2, &p, &s.r, NULL, NULL) == GC_OK && s.r.n_centers == 0 &&
		  unit_error()[0] == '\0', "n = 0: %s", unit_error());

	p = params_of(2, 0.0, 0.3, GC_DP_KERNEL_GAUSSIAN);
	memset(&t, 0xff, sizeof(t));
	CHECK(run_dpeaks(x, 3, 2, &p, &s.r, &t, NULL) == GC_OK && s.r.n_centers == 2 &&
		  t.bytes_needed == 0 && t.phase_ms[0] >= 0 && t.phase_ms[1] >= 0 && t.phase_ms[2] >= 0 &&
		  t.phase_ms[3] >= 0 &&
		  t.compute_ms >= t.phase_ms[0] + t.phase_ms[1] + t.phase_ms[2] + t.phase_ms[3] - 1e-6,
		  "timing: compute %g, phases %g %g %g %g", t.compute_ms, t.phase_ms[0], t.phase_ms[1],
		  t.phase_ms[2], t.phase_ms[3]);
	res_free(&s);
}

/* Cancel stops the work at the first question. */
static void
test_cancel(void)
{
	int64_t		n = 20000;
	float	   *x = blobs(n, 2, 2, 3, 1.0);
	Res			s;
	gc_dpeaks_params p = params_of(3, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);

	res_alloc(&s, n);
	CHECK(run_dpeaks(x, n, 2, &p, &s.r, NULL, cancel_now) == GC_ERR_CANCELLED && cancel_calls == 1,
		  "cancel");
	res_free(&s);
	free(x);
}

/*
 * The answer of 2, 3, 8 and 16 threads is the one thread's bit for bit
 * (clusters, rho, delta, centres, dc), and the timing record says that the
 * threads ran.
 */
static void
threads_case_t(const char *what, const void *x, gc_dtype ty, int64_t n, int d, gc_dpeaks_params p)
{
	Res			a,
				b;
	gc_timing	t;
	gc_status	st;

	res_alloc(&a, n);
	res_alloc(&b, n);
	unit_threads = 1;
	st = run_dpeaks_t(x, ty, n, d, &p, &a.r, &t, NULL);
	CHECK(st == GC_OK && t.threads == 1 && a.r.n_centers > 1,
		  "%s, 1 thread: status %d %s, %d threads ran, %lld centres", what, st, unit_error(),
		  t.threads, (long long) a.r.n_centers);
	for (int i = 1; i < UNIT_THREAD_COUNTS; i++)
	{
		unit_threads = unit_thread_counts[i];
		memset(b.rho, 0x55, sizeof(double) * n);
		memset(b.delta, 0x55, sizeof(double) * n);
		st = run_dpeaks_t(x, ty, n, d, &p, &b.r, &t, NULL);
		CHECK(st == GC_OK && t.threads == unit_threads && b.r.n_centers == a.r.n_centers &&
			  memcmp(&b.r.dc, &a.r.dc, sizeof(double)) == 0 &&
			  memcmp(a.cluster, b.cluster, sizeof(int32_t) * n) == 0 &&
			  memcmp(a.rho, b.rho, sizeof(double) * n) == 0 &&
			  memcmp(a.delta, b.delta, sizeof(double) * n) == 0 &&
			  memcmp(a.is_center, b.is_center, n) == 0,
			  "%s, %d threads (%d ran): status %d, dc %.17g against %.17g", what, unit_threads,
			  t.threads, st, b.r.dc, a.r.dc);
	}
	unit_threads = 0;
	res_free(&a);
	res_free(&b);
}

static void
threads_case(const char *what, const float *x, int64_t n, int d, gc_dpeaks_params p)
{
	threads_case_t(what, x, GC_F32, n, d, p);
}

static void
test_threads(void)
{
	int64_t		n = 120000;
	float	   *x = blobs(n, 2, 2, 31, 0.6);

	/* 2-D cutoff on the grid, dc from the sample; then on a 0.01 lattice with duplicates, a far row */
	threads_case("2-D cutoff, sampled dc", x, n, 2, params_of(31, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
	for (int64_t i = 0; i < n * 2; i++)
		x[i] = (float) (round(x[i] * 100.0) / 100.0);
	x[0] = 1e6f;
	threads_case("2-D cutoff, lattice and far row, dc 0.5", x, n, 2,
				 params_of(0, 0.5, 0.02, GC_DP_KERNEL_CUTOFF));
	free(x);
	/* 3-D cutoff, 2-D gaussian with the exact dc */
	n = 60000;
	x = blobs(n, 3, 3, 20, 0.8);
	threads_case("3-D cutoff", x, n, 3, params_of(20, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
	free(x);
	n = 12000;
	x = blobs(n, 2, 2, 15, 0.5);
	threads_case("2-D gaussian, exact dc", x, n, 2, params_of(15, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
	free(x);
	/* 6-D: no grid, all pairs, both kernels */
	n = 8000;
	x = blobs(n, 6, 6, 12, 0.7);
	threads_case("6-D cutoff, all pairs", x, n, 6, params_of(12, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
	threads_case("6-D gaussian, all pairs", x, n, 6, params_of(12, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
	free(x);
}

/* The same over thread counts in double precision and with the cosine metric. */
static void
test_threads_f64_cosine(void)
{
	int64_t		n = 120000;
	double	   *x;
	float	   *xf;
	gc_dpeaks_params p;

	/* double, 2-D cutoff on the grid with the sampled dc; 5 decimals, dc 0.05 */
	{
		float	   *b = blobs(n, 2, 2, 31, 0.6);

		x = malloc(sizeof(double) * n * 2);
		for (int64_t i = 0; i < n * 2; i++)
			x[i] = dec5(50.0 + 0.1 * (double) b[i]);
		x[0] = 1e6;
		free(b);
	}
	threads_case_t("double 2-D cutoff, sampled dc", x, GC_F64, n, 2,
				   params_of(31, 0.0, 0.02, GC_DP_KERNEL_CUTOFF));
	threads_case_t("double 2-D cutoff, 5 decimals, dc 0.05", x, GC_F64, n, 2,
				   params_of(0, 0.05, 0.02, GC_DP_KERNEL_CUTOFF));
	free(x);
	n = 12000;
	x = directions(n, 2, 15, 0.05);
	gc_unit_rows(x, GC_F64, n, 2);
	threads_case_t("double 2-D gaussian, exact dc", x, GC_F64, n, 2,
				   params_of(15, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN));
	p = params_of(15, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
	p.metric = GC_METRIC_COSINE;
	threads_case_t("cosine double 2-D gaussian, exact dc", x, GC_F64, n, 2, p);
	free(x);
	/* cosine: 3-D cutoff on the grid (float), 8-D gaussian and cutoff over all pairs (double) */
	n = 60000;
	x = directions(n, 3, 20, 0.1);
	gc_unit_rows(x, GC_F64, n, 3);
	xf = to_f32(x, n, 3);
	p = params_of(20, 0.0, 0.02, GC_DP_KERNEL_CUTOFF);
	p.metric = GC_METRIC_COSINE;
	threads_case_t("cosine float 3-D cutoff, sampled dc", xf, GC_F32, n, 3, p);
	free(x);
	free(xf);
	n = 8000;
	x = directions(n, 8, 12, 0.3);
	gc_unit_rows(x, GC_F64, n, 8);
	p = params_of(12, 0.0, 0.02, GC_DP_KERNEL_GAUSSIAN);
	p.metric = GC_METRIC_COSINE;
	threads_case_t("cosine double 8-D gaussian, all pairs", x, GC_F64, n, 8, p);
	p.kernel = GC_DP_KERNEL_CUTOFF;
	threads_case_t("cosine double 8-D cutoff, all pairs", x, GC_F64, n, 8, p);
	free(x);
}

/* Runs every test; the exit status says whether all checks passed. */
/*
 * A tiny dc with the cutoff kernel, down to the smallest subnormal, against
 * the reference (the grid's neighbour counts): rows
 * 1e-170 apart, whose squared differences underflow to 0 (neighbours by the
 * rule at any dc below about 1.5e-162), rows 1e-160 apart (a subnormal
 * square), and uniform rows with repeats.  The grid must count the same
 * neighbours as the definitions.
 */
static void
test_tiny_dc_cutoff(void)
{
	const double dcs[] = {1e-155, 1e-300, 4.9406564584124654e-324};
	const double spacing[] = {1e-170, 1e-160};
	int64_t		n = 2000;
	double	   *x = malloc(sizeof(double) * n * 2);

	for (int sp = 0; sp < 2; sp++)
	{
		for (int64_t i = 0; i < n; i++)
		{
			x[i * 2] = (double) (i % 500) * spacing[sp] + (double) (i / 500);
			x[i * 2 + 1] = 0.25;
		}
		for (int e = 0; e < 3; e++)
			check_against_reference_t(sp == 0 ? "tiny dc, underflowing squares" : "tiny dc, subnormal squares",
									  x, GC_F64, n, 2, params_of(3, dcs[e], 0.02, GC_DP_KERNEL_CUTOFF));
	}
	for (int64_t i = 0; i < n * 2; i++)
		x[i] = i / 2 % 7 == 6 ? x[i - 2] : urand();
	for (int e = 0; e < 3; e++)
		check_against_reference_t("tiny dc, uniform with repeats", x, GC_F64, n, 2,
								  params_of(3, dcs[e], 0.02, GC_DP_KERNEL_CUTOFF));
	free(x);
}

int
main(void)
{
	test_arithmetic();
	test_tiny();
	test_tiny_dc();
	test_reference_sets();
	test_far_rows();
	/* large enough that most points use the ring search of the grid */
	check_grid_vs_scan("grid 2-D cutoff", 9000, 2, GC_DP_KERNEL_CUTOFF, 0.3, 12);
	check_grid_vs_scan("grid 2-D gaussian", 7000, 2, GC_DP_KERNEL_GAUSSIAN, 0.3, 12);
	check_grid_vs_scan("grid 3-D cutoff", 7000, 3, GC_DP_KERNEL_CUTOFF, 0.8, 12);
	test_sample();
	test_f64_decimals();
	test_cosine();
	test_sample_cosine();
	test_errors();
	test_checks();
	test_cancel();
	test_threads();
	test_threads_f64_cosine();
	test_tiny_dc_cutoff();
	UNIT_DONE();
}
