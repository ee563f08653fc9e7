/*
 * check_dpeaks.c
 *    Density peaks (Rodriguez and Laio, "Clustering by fast search and find
 *    of density peaks", Science 2014) of the table under test (the GPU back
 *    end) against the CPU back end, part of gpu_vs_cpu (see gpu_vs_cpu.c).
 *    These are the cases of the former `bench/dpeaks_bench.sh check`, on the
 *    shared data sets, plus users' shapes.
 *
 * The answer is defined bit for bit (common/dpeaks_common.h: distances in
 * double in dimension order, the gaussian sum in fixed point), so dc, its
 * method and sample size, rho, delta, the centres and the labels must be
 * exactly equal.  An input both back ends refuse (dc from a quantile of
 * zero distances) must give the same error on both.  Cases cover dc found
 * exactly (n <= 50,000) and from a sample, both kernels, the grid index
 * (d <= 3) and the scans (d > 3, with and without shared-memory tiles),
 * n_clusters and thresholds.  Then cancel and a bad parameter.
 *
 * Each case also names the element type of the rows and the metric.  Rows
 * in double precision are the shape's rows made truly double: two or five
 * decimals re-rounded in double (round2, latlon), else each value moved by
 * less than a float step by a function of the value itself (duplicates stay
 * duplicates).  Cosine rows are scaled to unit length by gc_unit_rows, as
 * the glue does; shape "sphere" is embeddings-like: clusters of directions
 * in d dimensions, magnitudes from 0.01 to 1000, exact duplicates and
 * rows pointing away from every cluster.  The gaussian kernel on a million
 * rows is checked on the GPU alone against a CPU reference of sampled rows
 * (dc from the sample, rho of 512 rows over all rows, their delta given
 * the densities), since the CPU's all-pairs run would take too long.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "dpeaks_common.h"
#include "harness.h"

typedef struct dp_answer
{
	int32_t    *cluster;
	double	   *rho;
	double	   *delta;
	uint8_t    *is_center;
	gc_dpeaks_result r;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} dp_answer;

static void
dp_alloc(dp_answer *a, int64_t n)
{
	memset(a, 0, sizeof(*a));
	a->cluster = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	a->rho = (double *) malloc(sizeof(double) * (size_t) n);
	a->delta = (double *) malloc(sizeof(double) * (size_t) n);
	a->is_center = (uint8_t *) malloc((size_t) n);
	if (!a->cluster || !a->rho || !a->delta || !a->is_center)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
}

static void
dp_free(dp_answer *a)
{
	free(a->cluster);
	free(a->rho);
	free(a->delta);
	free(a->is_center);
}

static void
dp_run_t(const gc_backend_api *api, dp_answer *a, const void *x, gc_dtype dtype, int64_t n, int32_t d,
		 const gc_dpeaks_params *p, gc_h_cancel *cancel)
{
	gc_exec		e = gc_h_exec(NULL, cancel, &a->timing);
	double		t0;

	memset(&a->r, 0, sizeof(a->r));
	a->r.cluster = a->cluster;
	a->r.rho = a->rho;
	a->r.delta = a->delta;
	a->r.is_center = a->is_center;
	t0 = gc_h_now_ms();
	a->status = api->density_peaks(&e, x, dtype, n, d, p, &a->r);
	a->wall_ms = gc_h_now_ms() - t0;
	if (a->status == GC_OK)
		a->error[0] = '\0';
	else
		gc_h_error_text(api, a->error, sizeof(a->error));
}

static void
dp_run(const gc_backend_api *api, dp_answer *a, const float *x, int64_t n, int32_t d,
	   const gc_dpeaks_params *p, gc_h_cancel *cancel)
{
	dp_run_t(api, a, x, GC_F32, n, d, p, cancel);
}

typedef struct dp_case
{
	const char *shape;			/* test/data/gc_testdata.h */
	int64_t		n;
	int32_t		d;
	gc_dp_kernel kernel;
	double		dc;				/* > 0: given; 0: derived from neighbor_rate */
	double		rate;
	int32_t		n_clusters;		/* 0: thresholds */
	double		rho_min;
	double		delta_min;
	gc_dtype	dtype;			/* GC_F32 unless given */
	gc_metric	metric;			/* Euclidean unless given */
} dp_case;

static gc_dpeaks_params
dp_params(const dp_case *c)
{
	gc_dpeaks_params p;

	gc_dpeaks_params_init(&p);
	p.n_clusters = c->n_clusters;
	p.dc = c->dc;
	p.derive_dc = c->dc == 0.0;
	p.neighbor_rate = c->rate;
	p.kernel = c->kernel;
	p.rho_min = c->rho_min;
	p.delta_min = c->delta_min;
	p.metric = c->metric;
	return p;
}

/* ---------------------------------------------------------------- rows of each type and metric */

/* Rows [n, d] of clusters of directions (see the top), in double; exits when out of memory. */
static double *
dp_sphere(int64_t n, int32_t d, uint64_t seed)
{
	const int	k = 24;
	const double mags[] = {0.01, 1.0, 7.5, 1000.0, 0.3};
	double	   *x = (double *) malloc(sizeof(double) * (size_t) n * (size_t) d);
	double	   *c = (double *) malloc(sizeof(double) * (size_t) k * (size_t) d);
	gc_rng		rng;

	if (!x || !c)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
	gc_rng_seed(&rng, seed);
	for (int a = 0; a < k; a++)
		gc_td_direction(&rng, c + (size_t) a * d, d);
	for (int64_t i = 0; i < n; i++)
	{
		double	   *row = x + (size_t) i * d;
		int			a = (int) gc_rng_below(&rng, (uint64_t) k);
		double		spread = 0.6 / sqrt((double) d) * (1.0 + (double) (a % 3));

		if (i % 97 == 5 && i > 100)
		{
			memcpy(row, x + (size_t) (i / 3) * d, sizeof(double) * (size_t) d);	/* duplicate */
			continue;
		}
		if (i % 1009 == 7)
		{
			for (int32_t j = 0; j < d; j++)	/* away from the clusters */
				row[j] = -c[(size_t) a * d + j] + 0.05 * gc_td_normal(&rng);
			continue;
		}
		for (int32_t j = 0; j < d; j++)
			row[j] = mags[i % 5] * (c[(size_t) a * d + j] + spread * gc_td_normal(&rng));
	}
	free(c);
	return x;
}

/*
 * The rows of case c (n rows) in its element type and metric: *bytes
 * allocated, the caller frees.
 */
static void *
dp_data(const dp_case *c, int64_t n)
{
	uint64_t	seed = gc_td_seed(c->shape, n, c->d);
	size_t		m = (size_t) n * (size_t) c->d;
	double	   *x64 = NULL;
	void	   *x;

	if (strcmp(c->shape, "sphere") == 0)
		x64 = dp_sphere(n, c->d, seed);
	else if (c->dtype == GC_F64)
	{
		float	   *f = h_generate(c->shape, n, c->d);

		x64 = (double *) malloc(sizeof(double) * m);
		if (!x64)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (size_t i = 0; i < m; i++)
			x64[i] = strcmp(c->shape, "latlon") == 0 ? nearbyint((double) f[i] * 1e5) / 1e5 :
				strcmp(c->shape, "round2") == 0 ? nearbyint((double) f[i] * 1e2) / 1e2 : gc_td_refine(f[i]);
		free(f);
	}
	if (x64 && c->dtype == GC_F32)
	{
		float	   *f = (float *) malloc(sizeof(float) * (m > 0 ? m : 1));

		if (!f)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (size_t i = 0; i < m; i++)
			f[i] = (float) x64[i];
		free(x64);
		x = f;
	}
	else if (x64)
		x = x64;
	else
		x = h_generate(c->shape, n, c->d);
	if (c->metric == GC_METRIC_COSINE)
	{
		int64_t		z;

		/* a zero row (the glue refuses it) becomes the first axis */
		while ((z = gc_unit_rows(x, c->dtype, n, c->d)) >= 0)
			for (int32_t j = 0; j < c->d; j++)
			{
				if (c->dtype == GC_F64)
					((double *) x)[(size_t) z * c->d + j] = j == 0;
				else
					((float *) x)[(size_t) z * c->d + j] = j == 0;
			}
	}
	return x;
}

static const char *
dp_type_name(const dp_case *c)
{
	return c->metric == GC_METRIC_COSINE ? (c->dtype == GC_F64 ? "f64 cos" : "f32 cos") :
		(c->dtype == GC_F64 ? "f64" : "f32");
}

static int
same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof(double)) == 0;
}

static int
dp_cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a,
				y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

/* Compares an answer with the reference; returns 1 when they agree (bit for bit, or the same error). */
static int
dp_compare(const dp_answer *ref, const dp_answer *t, int64_t n, char *verdict, size_t size)
{
	int64_t		bad_rho = 0,
				bad_delta = 0,
				bad_label = 0,
				bad_center = 0,
				first = -1;
	double		max_rel_rho = 0.0,
				max_rel_delta = 0.0;

	{
		int			same = 0;

		if (h_status_verdict(ref->status, ref->error, t->status, t->error, verdict, size, &same))
			return same;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			bad = 0;

		if (!same_bits(ref->rho[i], t->rho[i]))
		{
			bad_rho++, bad = 1;
			max_rel_rho = fmax(max_rel_rho, fabs(ref->rho[i] - t->rho[i]) / fmax(fabs(ref->rho[i]), 1e-300));
		}
		if (!same_bits(ref->delta[i], t->delta[i]))
		{
			bad_delta++, bad = 1;
			max_rel_delta = fmax(max_rel_delta,
								 fabs(ref->delta[i] - t->delta[i]) / fmax(fabs(ref->delta[i]), 1e-300));
		}
		if (ref->cluster[i] != t->cluster[i])
			bad_label++, bad = 1;
		if (ref->is_center[i] != t->is_center[i])
			bad_center++, bad = 1;
		if (bad && first < 0)
			first = i;
	}
	if (first < 0 && same_bits(ref->r.dc, t->r.dc) && ref->r.dc_method == t->r.dc_method &&
		ref->r.dc_sample == t->r.dc_sample && ref->r.n_centers == t->r.n_centers)
	{
		snprintf(verdict, size, "identical");
		return 1;
	}
	snprintf(verdict, size,
			 "DIFFERENT: dc %.17g vs %.17g (method %d vs %d, sample %lld vs %lld), centres %lld vs %lld; "
			 "rows differing in rho %lld (max rel %.2g), delta %lld (max rel %.2g), label %lld, centre %lld; "
			 "first at row %lld",
			 ref->r.dc, t->r.dc, (int) ref->r.dc_method, (int) t->r.dc_method, (long long) ref->r.dc_sample,
			 (long long) t->r.dc_sample, (long long) ref->r.n_centers, (long long) t->r.n_centers,
			 (long long) bad_rho, max_rel_rho, (long long) bad_delta, max_rel_delta, (long long) bad_label,
			 (long long) bad_center, (long long) first);
	return 0;
}

static const char *
dp_kernel_name(gc_dp_kernel k)
{
	return k == GC_DP_KERNEL_GAUSSIAN ? "gaussian" : "cutoff";
}

static const char *
dp_method_name(gc_status st, gc_dc_method m)
{
	if (st != GC_OK)
		return "-";
	return m == GC_DC_GIVEN ? "given" : m == GC_DC_EXACT ? "exact" : "sample";
}

#define G GC_DP_KERNEL_GAUSSIAN
#define C GC_DP_KERNEL_CUTOFF
#define F32 GC_F32
#define F64 GC_F64
#define COS GC_METRIC_COSINE

static const dp_case dp_cases[] = {
	/* exact dc, both kernels, the grid (d <= 3) and the scans (d > 3) */
	{"d31", 3000, 2, G, 0, 0.02, 31, 0, 0},
	{"d31", 3000, 2, C, 0, 0.02, 31, 0, 0},
	{"d31", 2500, 1, C, 0, 0.02, 31, 0, 0},
	{"d31", 4000, 3, G, 0, 0.02, 31, 0, 0},
	{"d31", 3000, 1, G, 0, 0.02, 31, 0, 0},
	{"d31", 20000, 2, G, 0, 0.005, 31, 0, 0},
	{"d31", 3000, 5, C, 0, 0.02, 31, 0, 0},
	{"d31", 3000, 5, G, 0, 0.02, 31, 0, 0},
	/* too many dimensions for shared-memory tiles: global memory */
	{"d31", 1500, 64, G, 0, 0.02, 31, 0, 0},
	{"d31", 1500, 40, C, 0, 0.02, 31, 0, 0},
	{"d31", 46000, 2, C, 0, 0.02, 31, 0, 0},
	{"d31", 46000, 2, G, 1.0, 0.02, 31, 0, 0},
	/* sampled dc, thresholds */
	{"d31", 200000, 2, C, 0, 0.02, 0, 50.0, 2.0},
	{"d31", 200000, 3, C, 0, 0.01, 31, 0, 0},
	{"d31", 1000000, 2, C, 0, 0.002, 31, 0, 0},

	/*
	 * Users' data: two decimals (with dc derived, and a round dc given: many
	 * distances within a rounding of it), longitude / latitude with five
	 * decimals, far outliers, many close clusters, exact duplicates (ties
	 * of rho and delta everywhere; and a neighbor_rate whose quantile is a
	 * zero distance, which both must refuse alike), wide rows.
	 */
	{"round2", 20000, 2, C, 0, 0.02, 20, 0, 0},
	{"round2", 20000, 2, C, 0.05, 0.02, 20, 0, 0},
	{"round2", 10000, 2, G, 0.1, 0.02, 20, 0, 0},
	{"latlon", 20000, 2, C, 0, 0.02, 30, 0, 0},
	{"latlon", 10000, 2, G, 0, 0.02, 30, 0, 0},
	{"far", 20000, 2, C, 0, 0.02, 20, 0, 0},
	{"far", 5000, 8, G, 0, 0.02, 20, 0, 0},
	{"close", 50000, 2, C, 0, 0.01, 250, 0, 0},
	{"dups", 5000, 2, C, 0, 0.02, 10, 0, 0},
	{"dups", 5000, 2, C, 0, 0.0005, 10, 0, 0},
	{"wide", 3000, 256, G, 0, 0.02, 16, 0, 0},
	{"wide", 2000, 768, C, 0, 0.02, 16, 0, 0},
	/* one far row: the grid spans a sample's box, the far row sits in an edge cell */
	{"speck", 1000000, 2, C, 0, 0.002, 5, 0, 0},
	{"speck", 200000, 3, C, 0, 0.005, 5, 0, 0},
	{"speck", 100000, 1, C, 0, 0.02, 5, 0, 0},
	{"speck", 20000, 2, G, 0, 0.02, 5, 0, 0},

	/*
	 * Double precision: the rows made truly double (see the top); five
	 * decimals with a round dc (many pairs at dc in decimal, on either side
	 * of it in double), the grid, the scans, sampled dc, a million rows.
	 */
	{"d31", 3000, 2, G, 0, 0.02, 31, 0, 0, F64},
	{"d31", 3000, 2, C, 0, 0.02, 31, 0, 0, F64},
	{"d31", 2500, 1, C, 0, 0.02, 31, 0, 0, F64},
	{"d31", 4000, 3, G, 0, 0.02, 31, 0, 0, F64},
	{"d31", 3000, 5, C, 0, 0.02, 31, 0, 0, F64},
	{"d31", 1500, 64, G, 0, 0.02, 31, 0, 0, F64},
	{"d31", 46000, 2, G, 1.0, 0.02, 31, 0, 0, F64},
	{"d31", 200000, 2, C, 0, 0.02, 0, 50.0, 2.0, F64},
	{"d31", 1000000, 2, C, 0, 0.002, 31, 0, 0, F64},
	{"d31", 1000000, 2, G, 0, 0.002, 31, 0, 0, F64},
	{"latlon", 20000, 2, C, 0, 0.02, 30, 0, 0, F64},
	{"latlon", 20000, 2, C, 0.001, 0.02, 30, 0, 0, F64},
	{"latlon", 10000, 2, G, 0.001, 0.02, 30, 0, 0, F64},
	{"round2", 20000, 2, C, 0.05, 0.02, 20, 0, 0, F64},
	{"far", 20000, 2, C, 0, 0.02, 20, 0, 0, F64},
	{"close", 50000, 2, C, 0, 0.01, 250, 0, 0, F64},
	{"dups", 5000, 2, C, 0, 0.02, 10, 0, 0, F64},
	{"dups", 5000, 2, C, 0, 0.0005, 10, 0, 0, F64},
	{"speck", 1000000, 2, C, 0, 0.002, 5, 0, 0, F64},
	{"wide", 2000, 768, C, 0, 0.02, 16, 0, 0, F64},

	/*
	 * Cosine, single and double precision: embeddings-like directions in 8
	 * to 64 dimensions (the scans, with and without tiles), unit rows in 2
	 * and 3 dimensions (the grid on the circle and the sphere), duplicates,
	 * far rows, sampled dc, a million rows.
	 */
	{"sphere", 3000, 8, G, 0, 0.02, 24, 0, 0, F32, COS},
	{"sphere", 3000, 8, C, 0, 0.02, 24, 0, 0, F64, COS},
	{"sphere", 20000, 16, C, 0, 0.02, 24, 0, 0, F32, COS},
	{"sphere", 10000, 32, G, 0, 0.02, 24, 0, 0, F64, COS},
	{"sphere", 5000, 64, G, 0, 0.02, 24, 0, 0, F32, COS},
	{"sphere", 5000, 64, C, 0.3, 0.02, 0, 20.0, 0.2, F64, COS},
	{"sphere", 60000, 8, C, 0, 0.02, 24, 0, 0, F64, COS},
	{"sphere", 20000, 3, G, 0, 0.02, 24, 0, 0, F64, COS},
	{"sphere", 200000, 3, C, 0, 0.01, 24, 0, 0, F32, COS},
	{"d31", 20000, 2, C, 0, 0.02, 31, 0, 0, F32, COS},
	{"d31", 20000, 2, G, 0, 0.02, 31, 0, 0, F64, COS},
	{"d31", 1000000, 2, C, 0, 0.002, 31, 0, 0, F64, COS},
	{"d31", 1000000, 2, G, 0, 0.002, 31, 0, 0, F32, COS},
	{"dups", 5000, 3, C, 0, 0.02, 10, 0, 0, F32, COS},
	{"far", 5000, 8, G, 0, 0.02, 20, 0, 0, F64, COS},
	{"wide", 3000, 256, G, 0, 0.02, 16, 0, 0, F32, COS},
};

#undef G
#undef C
#undef F32
#undef F64
#undef COS

/* Rows checked by dp_spot, and the n from which the gaussian kernel is checked that way. */
#define DP_SPOT_ROWS 512
#define DP_SPOT_MIN_N 200000

/* dist2 of rows i and j of x of element type t. */
static double
dp_dist2(const void *x, gc_dtype t, int32_t d, int64_t i, int64_t j)
{
	if (t == GC_F64)
		return gc_dist2_f64((const double *) x + (size_t) i * d, (const double *) x + (size_t) j * d, d);
	return gc_dist2((const float *) x + (size_t) i * d, (const float *) x + (size_t) j * d, d);
}

/*
 * The answer t of the table under test for a case too large for the CPU's
 * all-pairs run, against a reference of sampled rows written from the
 * rules of common/dpeaks_common.h: dc the quantile of the seeded sample
 * (in the metric's units), rho of DP_SPOT_ROWS rows over all rows (the
 * fixed-point sum is exact, so bit for bit), and their delta (the distance
 * to the nearest row denser by t's rho) and, where that row is not a
 * centre, its cluster.  Returns 1 when all agree.
 */
static int
dp_spot(const dp_case *c, const void *x, int64_t n, const gc_dpeaks_params *p, const dp_answer *t,
		char *verdict, size_t size)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS,
				bad_rho = 0,
				bad_delta = 0,
				bad_label = 0;
	double		dc = p->dc;

	if (t->status != GC_OK)
	{
		snprintf(verdict, size, "DIFFERENT: %s failed: %s", h_test_name(), t->error);
		return 0;
	}
	if (p->derive_dc)
	{
		uint64_t   *keys = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) m);

		if (!keys)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (int64_t q = 0; q < m; q++)
		{
			int64_t		i,
						j;

			gc_dp_sample_pair(p->seed, q, n, &i, &j);
			keys[q] = gc_dp_key(dp_dist2(x, c->dtype, c->d, i, j));
		}
		qsort(keys, (size_t) m, sizeof(uint64_t), dp_cmp_u64);
		dc = gc_metric_distance(c->metric, gc_dp_unkey(keys[gc_dp_quantile_rank(p->neighbor_rate, m) - 1]));
		free(keys);
	}
	if (!same_bits(dc, t->r.dc) || t->r.dc_method != (p->derive_dc ? GC_DC_SAMPLE : GC_DC_GIVEN))
	{
		snprintf(verdict, size, "DIFFERENT: dc %.17g (method %d), expected %.17g", t->r.dc,
				 (int) t->r.dc_method, dc);
		return 0;
	}
	{
		double		f = gc_dp_gauss_factor(c->metric, dc);
		double		T = gc_dp_cutoff_threshold(c->metric, dc);

		for (int64_t s = 0; s < DP_SPOT_ROWS; s++)
		{
			int64_t		i = (int64_t) (gc_mix64((uint64_t) s + 77) % (uint64_t) n);
			uint64_t	hi = 0,
						lo = 0;
			int64_t		cnt = 0,
						best = -1;
			double		bd2 = INFINITY,
						rho;

			for (int64_t j = 0; j < n; j++)
			{
				double		d2;

				if (j == i)
					continue;
				d2 = dp_dist2(x, c->dtype, c->d, i, j);
				if (c->kernel == GC_DP_KERNEL_GAUSSIAN)
					gc_dp_acc_add(&hi, &lo, gc_dp_gauss_fixed(gc_dp_gauss_u(c->metric, d2, f)));
				else
					cnt += d2 < T;
			}
			rho = c->kernel == GC_DP_KERNEL_GAUSSIAN ? gc_dp_acc_value(hi, lo) : (double) cnt;
			bad_rho += !same_bits(rho, t->rho[i]);
			/* the nearest denser row by the tested densities: larger rho, or equal and earlier */
			for (int64_t j = 0; j < n; j++)
			{
				double		d2;

				if (!(t->rho[j] > t->rho[i] || (t->rho[j] == t->rho[i] && j < i)))
					continue;
				d2 = dp_dist2(x, c->dtype, c->d, i, j);
				if (d2 < bd2)
				{
					bd2 = d2;
					best = j;
				}
			}
			if (best >= 0)
			{
				bad_delta += !same_bits(gc_metric_distance(c->metric, bd2), t->delta[i]);
				bad_label += !t->is_center[i] && t->cluster[i] != t->cluster[best];
			}
		}
	}
	if (bad_rho == 0 && bad_delta == 0 && bad_label == 0)
	{
		snprintf(verdict, size, "identical (dc, and %d sampled rows against the CPU's rules)", DP_SPOT_ROWS);
		return 1;
	}
	snprintf(verdict, size, "DIFFERENT: of %d sampled rows rho %lld, delta %lld, label %lld",
			 DP_SPOT_ROWS, (long long) bad_rho, (long long) bad_delta, (long long) bad_label);
	return 0;
}

static void
dp_differential(const dp_case *c0)
{
	dp_case		c = *c0;
	gc_dpeaks_params p;
	void	   *x;
	dp_answer	ref,
				t;
	char		verdict[2400],
				what[160],
				clusters[64];
	int			ok;
	int			spot;

	c.n = h_rows(c.n, c.d);
	if (c.n_clusters > c.n)
		c.n_clusters = (int32_t) c.n;
	p = dp_params(&c);
	x = dp_data(&c, c.n);
	spot = c.kernel == GC_DP_KERNEL_GAUSSIAN && c.n >= DP_SPOT_MIN_N;
	dp_alloc(&ref, c.n);
	dp_alloc(&t, c.n);
	dp_run_t(H.test, &t, x, c.dtype, c.n, c.d, &p, NULL);
	if (spot)
	{
		double		t0 = gc_h_now_ms();

		ok = dp_spot(&c, x, c.n, &p, &t, verdict, sizeof(verdict));
		ref.status = t.status;
		ref.r = t.r;
		ref.wall_ms = gc_h_now_ms() - t0;
	}
	else
	{
		dp_run_t(H.ref, &ref, x, c.dtype, c.n, c.d, &p, NULL);
		ok = dp_compare(&ref, &t, c.n, verdict, sizeof(verdict));
	}
	snprintf(what, sizeof(what), "dpeaks %s-%dd %s n=%lld %s rate=%g dc=%g", c.shape, c.d, dp_type_name(&c),
			 (long long) c.n, dp_kernel_name(c.kernel), c.rate, c.dc);
	h_check(ok, what, verdict);
	if (c.n_clusters > 0)
		snprintf(clusters, sizeof(clusters), "%d", c.n_clusters);
	else
		snprintf(clusters, sizeof(clusters), "rho>=%g, delta>=%g", c.rho_min, c.delta_min);
	printf("| %-8s | %-7s | %8lld | %3d | %-8s | %-6s | %-6g | %-9s | %.9g | %lld | %9.1f | %8.1f | %s |\n",
		   c.shape, dp_type_name(&c), (long long) c.n, c.d, dp_kernel_name(c.kernel),
		   dp_method_name(ref.status, ref.r.dc_method),
		   c.rate, clusters, ref.r.dc, (long long) ref.r.n_centers, ref.wall_ms, t.wall_ms, verdict);
	fflush(stdout);
	dp_free(&ref);
	dp_free(&t);
	free(x);
}

/* The comparison notices a changed rho (in its last bit), delta, label or centre. */
static void
dp_self_check(void)
{
	const int64_t n = 1000;
	dp_case		c = {"d31", n, 2, GC_DP_KERNEL_CUTOFF, 0, 0.02, 31, 0, 0};
	gc_dpeaks_params p = dp_params(&c);
	float	   *x = h_generate("d31", n, 2);
	dp_answer	ref,
				t;
	char		verdict[2400];
	int			noticed = 1;

	dp_alloc(&ref, n);
	dp_alloc(&t, n);
	dp_run(H.ref, &ref, x, n, 2, &p, NULL);
	for (int what = 0; what < 4; what++)
	{
		dp_run(H.test, &t, x, n, 2, &p, NULL);
		if (what == 0)
			t.rho[n / 3] = nextafter(t.rho[n / 3], INFINITY);
		else if (what == 1)
			t.delta[n / 2] = 2.0 * t.delta[n / 2] + 1.0;
		else if (what == 2)
			t.cluster[n - 1] += 1;
		else
			t.is_center[0] ^= 1;
		noticed &= !dp_compare(&ref, &t, n, verdict, sizeof(verdict));
	}
	h_check(noticed && ref.status == GC_OK, "dpeaks comparison notices a changed answer",
			noticed ? ref.error : "a changed rho, delta, label or centre was called identical");
	dp_free(&ref);
	dp_free(&t);
	free(x);

	/*
	 * The sampled-row reference of the large gaussian cases: it agrees with
	 * the table under test on a smaller case (dc given), and notices a rho
	 * changed in its last bit and a changed delta.
	 */
	{
		dp_case		sc = {"d31", 20000, 2, GC_DP_KERNEL_GAUSSIAN, 0.5, 0.02, 31, 0, 0, GC_F64,
		GC_METRIC_EUCLIDEAN};
		void	   *xs;
		int			agree,
					caught = 1;

		sc.n = h_rows(sc.n, sc.d);
		p = dp_params(&sc);
		xs = dp_data(&sc, sc.n);
		dp_alloc(&t, sc.n);
		dp_run_t(H.test, &t, xs, sc.dtype, sc.n, sc.d, &p, NULL);
		agree = dp_spot(&sc, xs, sc.n, &p, &t, verdict, sizeof(verdict));
		h_check(agree, "dpeaks sampled-row reference agrees", verdict);
		for (int64_t i = 0; i < sc.n; i++)
			t.rho[i] = nextafter(t.rho[i], INFINITY);
		caught &= !dp_spot(&sc, xs, sc.n, &p, &t, verdict, sizeof(verdict));
		for (int64_t i = 0; i < sc.n; i++)
			t.rho[i] = nextafter(t.rho[i], 0.0);
		for (int64_t i = 0; i < sc.n; i++)
			t.delta[i] *= 1.5;
		caught &= !dp_spot(&sc, xs, sc.n, &p, &t, verdict, sizeof(verdict));
		h_check(caught, "dpeaks sampled-row reference notices a changed answer", verdict);
		dp_free(&t);
		free(xs);
	}
}

/* One call of the cancels in a row (h_cancel_storm). */
typedef struct dp_storm
{
	const void *x;
	gc_dtype	t;
	int64_t		n;
	int32_t		d;
	const gc_dpeaks_params *p;
	dp_answer  *a;
} dp_storm;

static gc_status
dp_storm_run(void *ctx, gc_h_cancel *cancel)
{
	dp_storm   *s = (dp_storm *) ctx;

	dp_run_t(H.test, s->a, s->x, s->t, s->n, s->d, s->p, cancel);
	return s->a->status;
}

/*
 * Cancel and a bad parameter, with the device memory before and after; 200
 * cancels in a row at random questions on float and on double rows
 * (h_cancel_storm).
 */
static void
dp_error_paths(void)
{
	const int64_t n = H.cpu_only ? 5000 : 46000;
	dp_case		c = {"d31", n, 2, GC_DP_KERNEL_GAUSSIAN, 0, 0.02, 31, 0, 0};
	gc_dpeaks_params p = dp_params(&c);
	float	   *x = h_generate("d31", n, 2);
	dp_answer	a;
	int64_t		before,
				after;
	char		detail[1400],
				mem[64];

	dp_alloc(&a, n);
	dp_run(H.test, &a, x, n, 2, &p, NULL);	/* warm-up */
	h_check(a.status == GC_OK, "dpeaks warm-up run", a.error);
	before = h_free_device_memory();
	printf("\n| density peaks error path (%lld rows) | status | detail | free device memory before -> after |\n"
		   "|---|---|---|---|\n", (long long) n);
	{
		gc_h_cancel cn = {0, 1, 0, 0};

		dp_run(H.test, &a, x, n, 2, &p, &cn);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s), %.1f ms", gc_h_status_name(a.status), a.error,
				 a.wall_ms);
		h_check(a.status == GC_ERR_CANCELLED, "dpeaks cancel at the first question", detail);
		if (!H.cpu_only)
			h_check(after == before, "dpeaks device memory after cancel", detail);
		printf("| cancel at the first question | %s | %s | %s |\n",
			   a.status == GC_ERR_CANCELLED ? "GC_ERR_CANCELLED" : "UNEXPECTED", detail,
			   h_memory_text(before, after, mem, sizeof(mem)));
	}
	{
		gc_h_cancel cn = {0, 0, 0, 0};

		dp_run(H.test, &a, x, n, 2, &p, &cn);
		snprintf(detail, sizeof(detail), "status %s, asked %d times", gc_h_status_name(a.status), cn.calls);
		h_check(a.status == GC_OK && cn.calls >= 1, "dpeaks cancel callback asked during a full run", detail);
		printf("| callback never says yes | %s | %s | |\n", a.status == GC_OK ? "GC_OK" : "UNEXPECTED", detail);
	}
	{
		gc_dpeaks_params bad = p;

		bad.neighbor_rate = 1.5;
		dp_run(H.test, &a, x, n, 2, &bad, NULL);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == GC_ERR_INVALID_ARGUMENT, "dpeaks neighbor_rate = 1.5", detail);
		printf("| neighbor_rate = 1.5 | %s | %s | %s |\n",
			   a.status == GC_ERR_INVALID_ARGUMENT ? "GC_ERR_INVALID_ARGUMENT" : "UNEXPECTED", detail,
			   h_memory_text(before, after, mem, sizeof(mem)));
	}
	{
		double	   *xd = (double *) malloc(sizeof(double) * (size_t) n * 2);
		dp_storm	sf = {x, GC_F32, n, 2, &p, &a};
		dp_storm	sd = {xd, GC_F64, n, 2, &p, &a};

		if (!xd)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (int64_t i = 0; i < n * 2; i++)
			xd[i] = gc_td_refine(x[i]);
		h_cancel_storm("dpeaks", "float rows", n, dp_storm_run, &sf);
		h_cancel_storm("dpeaks", "double rows", n, dp_storm_run, &sd);
		free(xd);
	}
	dp_free(&a);
	free(x);
}

void
dpeaks_checks(void)
{
	printf("\n## density peaks: %s against cpu\n\n"
		   "| data | rows | n | d | kernel | dc | neighbor_rate | clusters | dc (cpu) | centres | cpu ms | %s ms | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name());
	fflush(stdout);
	for (size_t i = 0; i < sizeof(dp_cases) / sizeof(dp_cases[0]); i++)
		dp_differential(&dp_cases[i]);
	dp_self_check();
	dp_error_paths();
}
