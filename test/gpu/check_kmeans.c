/*
 * check_kmeans.c
 *    k-means of the table under test (the GPU back end) against the CPU
 *    back end, part of gpu_vs_cpu (see gpu_vs_cpu.c).  These are the cases
 *    of the former `bench/kmeans_bench.sh check`, on the shared data sets,
 *    plus users' shapes.
 *
 * Both back ends start from the same centroids (common/kmeans_init.h) and
 * stop by the same rule, but sum the centroids in different orders, so the
 * centroids may differ in their last bits and a row at a tie between two
 * centroids may go either way, which may then move the centroids further.
 * Hence three rules, one per case:
 *
 *   exact       no label differs, and the inertia agrees within 1e-6
 *               (well-separated blobs: no row is near a tie);
 *   near ties   every row whose label differs is a near tie, and the
 *               inertia agrees within the case's limit.  A row is a near
 *               tie when its distances to the two centroids (the CPU's a,
 *               the other's b; the CPU's final centroids) differ by at most
 *               2 s + 2 f: s the largest distance between a CPU centroid
 *               and the other back end's same centroid, which bounds how far
 *               the other back end's distances lie from the CPU's, and f a
 *               bound on the FP32 rounding of the GPU's low-dimension kernel
 *               (2^-22 (sqrt(d) (|x|max + |c|max) + d dist): four times the
 *               rounding of a float centroid and of the sum of squares).
 *               Both back ends label each row by its nearest final
 *               centroid, so no other row can differ;
 *   report      only printed (TF32 products without the check).
 *
 * The tuning knobs of the GPU product are exercised through gc_tuning
 * (kmeans_gemm = SGEMM, and TF32_FP32 so that devices with fast FP64 also
 * run the FP32 second level; kmeans_window = 1e6 so that every centroid is a
 * candidate and both fallbacks run, kmeans_chunk_rows so that the chunked
 * path runs on small data); the CPU answer, which no knob changes, is
 * computed once per case.  Then: the table under test twice on the same
 * input must give the same answer, and cancel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kmeans_init.h"
#include "params.h"
#include "metric.h"

typedef enum km_rule
{
	KM_EXACT,
	KM_NEAR_TIES,
	KM_REPORT
} km_rule;

typedef struct km_answer
{
	int32_t    *labels;
	double	   *distance;
	double	   *centroids;
	int64_t    *sizes;
	double	   *inertia;
	int32_t		iterations;
	int32_t		best_run;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} km_answer;

static void
km_alloc(km_answer *a, int64_t n, int32_t k, int32_t d)
{
	memset(a, 0, sizeof(*a));
	a->labels = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	a->distance = (double *) malloc(sizeof(double) * (size_t) n);
	a->centroids = (double *) malloc(sizeof(double) * (size_t) k * (size_t) d);
	a->sizes = (int64_t *) malloc(sizeof(int64_t) * (size_t) k);
	a->inertia = (double *) malloc(sizeof(double) * (size_t) k);
	if (!a->labels || !a->distance || !a->centroids || !a->sizes || !a->inertia)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
}

static void
km_free(km_answer *a)
{
	free(a->labels);
	free(a->distance);
	free(a->centroids);
	free(a->sizes);
	free(a->inertia);
}

static gc_kmeans_params
km_params(int32_t k, gc_kmeans_init init, const double *given, int32_t max_iter, double tol,
		  gc_precision precision)
{
	gc_kmeans_params p;

	gc_kmeans_params_init(&p);
	p.k = k;
	p.max_iter = max_iter;
	p.tol = tol;
	p.seed = 7;
	p.init = init;
	p.initial_centroids = given;
	p.precision = precision;
	return p;
}

static void
km_run_dt(const gc_backend_api *api, km_answer *a, const void *x, gc_dtype dt, int64_t n, int32_t d,
		  const gc_kmeans_params *p, const gc_tuning *tuning, gc_h_cancel *cancel)
{
	gc_kmeans_result r;
	gc_exec		e = gc_h_exec(tuning, cancel, &a->timing);
	double		t0;

	memset(&r, 0, sizeof(r));
	r.labels = a->labels;
	r.distance = a->distance;
	r.centroids = a->centroids;
	r.sizes = a->sizes;
	r.inertia = a->inertia;
	t0 = gc_h_now_ms();
	a->status = api->kmeans(&e, x, dt, n, d, p, &r);
	a->wall_ms = gc_h_now_ms() - t0;
	a->iterations = r.iterations;
	a->best_run = r.best_run;
	if (a->status == GC_OK)
		a->error[0] = '\0';
	else
		gc_h_error_text(api, a->error, sizeof(a->error));
}

static void
km_run(const gc_backend_api *api, km_answer *a, const float *x, int64_t n, int32_t d,
	   const gc_kmeans_params *p, const gc_tuning *tuning, gc_h_cancel *cancel)
{
	km_run_dt(api, a, x, GC_F32, n, d, p, tuning, cancel);
}

/* Coordinate j of row i of x (element type dt) as a double. */
static double
km_at(const void *x, gc_dtype dt, int64_t i, int32_t d, int32_t j)
{
	return dt == GC_F64 ? ((const double *) x)[i * d + j] : (double) ((const float *) x)[i * d + j];
}

/* Squared distance of row i to a centroid, in double in dimension order (as the CPU computes it). */
static double
km_dist2(const void *x, gc_dtype dt, int64_t i, const double *c, int32_t d)
{
	double		s = 0.0;

	for (int32_t j = 0; j < d; j++)
	{
		double		t = km_at(x, dt, i, d, j) - c[j];

		s += t * t;
	}
	return s;
}

/* What a comparison found. */
typedef struct km_diff
{
	int64_t		mismatches;
	int64_t		near_ties;
	double		rel_inertia;
	double		max_centroid_diff;	/* largest coordinate difference */
	double		max_centroid_shift; /* largest distance between a pair of same centroids */
	double		max_distance_diff;	/* over rows with the same label */
} km_diff;

/*
 * Compares an answer with the reference under a rule; returns 1 when they
 * agree and writes the verdict.
 */
static int
km_compare(const void *x, gc_dtype dt, int64_t n, int32_t d, int32_t k, const km_answer *ref,
		   const km_answer *t, km_rule rule, double max_rel_inertia, km_diff *df, char *verdict, size_t size)
{
	double		max_abs_c = 0.0;
	double		ir,
				it;
	int			ok;

	memset(df, 0, sizeof(*df));
	{
		int			same = 0;

		if (h_status_verdict(ref->status, ref->error, t->status, t->error, verdict, size, &same))
			return same;
	}
	for (int32_t j = 0; j < k; j++)
	{
		double		s = 0.0;

		for (int32_t c = 0; c < d; c++)
		{
			double		u = ref->centroids[(int64_t) j * d + c] - t->centroids[(int64_t) j * d + c];

			df->max_centroid_diff = fmax(df->max_centroid_diff, fabs(u));
			max_abs_c = fmax(max_abs_c, fabs(ref->centroids[(int64_t) j * d + c]));
			s += u * u;
		}
		/* NaN-safe: a NaN centroid makes the shift infinite, so every later test fails loudly */
		df->max_centroid_shift = fmax(df->max_centroid_shift, isnan(s) ? INFINITY : sqrt(s));
	}
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		a = ref->labels[i],
					b = t->labels[i];

		if (a == b)
		{
			df->max_distance_diff = fmax(df->max_distance_diff, fabs(ref->distance[i] - t->distance[i]));
			continue;
		}
		df->mismatches++;
		if (a >= 0 && a < k && b >= 0 && b < k)
		{
			double		max_abs_x = 0.0,
						da,
						db,
						fp32;

			for (int32_t c = 0; c < d; c++)
				max_abs_x = fmax(max_abs_x, fabs(km_at(x, dt, i, d, c)));
			da = sqrt(km_dist2(x, dt, i, ref->centroids + (int64_t) a * d, d));
			db = sqrt(km_dist2(x, dt, i, ref->centroids + (int64_t) b * d, d));

			/*
			 * 2^-22: four times the rounding of a float centroid or
			 * difference; rows of double precision are assigned in double
			 * on the GPU, so only the centroids' own differences remain
			 */
			fp32 = dt == GC_F64 ? 0.0 :
				2.384185791015625e-7 * (sqrt((double) d) * (max_abs_x + max_abs_c) + d * db);
			if (db - da <= 2.0 * df->max_centroid_shift + 2.0 * fp32 + 1e-12 * (1.0 + db))
				df->near_ties++;
		}
	}
	ir = gc_kmeans_total_inertia(ref->inertia, k);
	it = gc_kmeans_total_inertia(t->inertia, k);
	df->rel_inertia = fabs(ir - it) / fmax(ir, 1e-300);
	if (isnan(it))
		df->rel_inertia = INFINITY;
	switch (rule)
	{
		case KM_EXACT:
			ok = df->mismatches == 0 && df->rel_inertia <= 1e-6;
			break;
		case KM_NEAR_TIES:
			ok = df->mismatches == df->near_ties && df->rel_inertia <= max_rel_inertia;
			break;
		default:
			ok = 1;
			break;
	}
	if (rule == KM_REPORT)
		snprintf(verdict, size, "report only");
	else if (ok)
		snprintf(verdict, size, df->mismatches ? "agree (near ties only)" : "identical labels");
	else
		snprintf(verdict, size, "DIFFERENT: %lld labels (%lld near ties), inertia rel diff %.2e (limit %.0e)",
				 (long long) df->mismatches, (long long) df->near_ties, df->rel_inertia,
				 rule == KM_EXACT ? 1e-6 : max_rel_inertia);
	return ok;
}

/* ------------------------------------------------------------------ cases */

typedef struct km_variant
{
	const char *name;
	gc_tuning	tuning;
} km_variant;

static km_variant
km_v_default(void)
{
	km_variant	v = {"default", gc_tuning_defaults()};

	return v;
}

static km_variant
km_v_sgemm(void)
{
	km_variant	v = {"gemm=sgemm", gc_tuning_defaults()};

	v.tuning.kmeans_gemm = GC_KMEANS_GEMM_SGEMM;
	return v;
}

/* The TF32 check's open rows through the FP32 product, as on devices without fast FP64. */
static km_variant
km_v_tf32_fp32(void)
{
	km_variant	v = {"gemm=tf32-fp32", gc_tuning_defaults()};

	v.tuning.kmeans_gemm = GC_KMEANS_GEMM_TF32_FP32;
	return v;
}

static km_variant
km_v_window(double w)
{
	km_variant	v = {"window x1e6", gc_tuning_defaults()};

	v.tuning.kmeans_window = w;
	return v;
}

static km_variant
km_v_chunks(int64_t rows)
{
	km_variant	v = {"chunk_rows=100000", gc_tuning_defaults()};

	v.tuning.kmeans_chunk_rows = rows;
	return v;
}

static const char *
km_init_name(gc_kmeans_init i)
{
	return i == GC_KMEANS_INIT_PLUSPLUS ? "k-means++" : i == GC_KMEANS_INIT_PLUSPLUS_PLAIN ? "plain k-means++" :
		i == GC_KMEANS_INIT_RANDOM ? "random" : "given";
}

static const char *
km_rule_name(km_rule r)
{
	return r == KM_EXACT ? "exact" : r == KM_NEAR_TIES ? "near ties" : "report";
}

/* A data set and, for the separated blobs, their centres. */
typedef struct km_data
{
	const char *shape;
	float	   *x;				/* [n, d] (GC_F32) */
	double	   *x64;			/* [n, d] (GC_F64) */
	gc_dtype	dtype;
	gc_metric	metric;			/* COSINE: the rows are of unit length */
	int64_t		n;
	int32_t		d;
	int32_t		kc;				/* centres of the separated blobs */
	double	   *centres;		/* [kc, d] */
} km_data;

static km_data
km_separated(int64_t n, int32_t d, int32_t kc, double offset)
{
	km_data		D;

	memset(&D, 0, sizeof(D));
	D.shape = "separated";
	D.n = h_rows(n, d);
	D.d = d;
	D.kc = kc;
	D.x = gc_td_alloc(D.n, d);
	D.centres = (double *) malloc(sizeof(double) * (size_t) kc * (size_t) d);
	if (!D.x || !D.centres ||
		gc_td_separated(D.x, D.n, d, kc, offset, gc_td_seed("separated", n, d) + (uint64_t) kc, D.centres,
						NULL) != 0)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
	return D;
}

static km_data
km_named(const char *shape, int64_t n, int32_t d)
{
	km_data		D;

	memset(&D, 0, sizeof(D));
	D.shape = shape;
	D.n = h_rows(n, d);
	D.d = d;
	D.kc = 0;
	D.centres = NULL;
	D.x = h_generate(shape, D.n, d);
	return D;
}

/* Rows around 997 centres on a line, spacing 1, noise 0.01 (gc_td_line): many close centroids. */
static km_data
km_line(int64_t n, int32_t d)
{
	km_data		D;

	memset(&D, 0, sizeof(D));
	D.shape = "line";
	D.n = h_rows(n, d);
	D.d = d;
	D.kc = 0;
	D.centres = NULL;
	D.x = gc_td_alloc(D.n, d);
	if (!D.x || gc_td_line(D.x, D.n, d, 997, 1.0, 0.01, gc_td_seed("line", n, d)) != 0)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
	return D;
}

/*
 * Embedding-like rows: blobs Gaussian blobs around directions of the unit
 * sphere, noise of total size 0.3, rows normalised (gc_td_wide); with k
 * well above blobs, many close centroids share a blob.
 */
static km_data
km_wide(int64_t n, int32_t d, int32_t blobs)
{
	km_data		D;

	memset(&D, 0, sizeof(D));
	D.shape = "wide";
	D.n = h_rows(n, d);
	D.d = d;
	D.x = gc_td_alloc(D.n, d);
	if (!D.x || gc_td_wide(D.x, D.n, d, blobs, 0.3, gc_td_seed("wide", n, d) + (uint64_t) blobs) != 0)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
	return D;
}

static void
km_data_free(km_data *D)
{
	free(D->x);
	free(D->x64);
	free(D->centres);
}

/* The rows of a data set, of its element type. */
static const void *
km_x(const km_data *D)
{
	return D->dtype == GC_F64 ? (const void *) D->x64 : (const void *) D->x;
}

static void
km_oom(void *p)
{
	if (!p)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
}

/*
 * The data set in double precision: each value rounded to `decimals`
 * decimals (as coordinates in a table), or with decimals < 0 moved by a
 * relative 1e-9 (values no float holds); the centres are kept.
 */
static km_data
km_f64(const km_data *D, int decimals)
{
	km_data		E = *D;
	double		sc = decimals >= 0 ? pow(10.0, decimals) : 0.0;

	E.x = NULL;
	E.dtype = GC_F64;
	E.x64 = (double *) malloc(sizeof(double) * (size_t) D->n * (size_t) D->d);
	km_oom(E.x64);
	for (int64_t i = 0; i < D->n * D->d; i++)
	{
		double		v = (double) D->x[i];

		E.x64[i] = decimals >= 0 ? round(v * sc) / sc : v * (1.0 + 1e-9 * (double) ((i * 7919) % 1000 - 500) / 500.0);
	}
	if (D->centres)
	{
		E.centres = (double *) malloc(sizeof(double) * (size_t) D->kc * (size_t) D->d);
		km_oom(E.centres);
		memcpy(E.centres, D->centres, sizeof(double) * (size_t) D->kc * (size_t) D->d);
	}
	return E;
}

/*
 * The data set made unit rows for the metric cosine (gc_unit_rows, as the
 * glue does), in element type dt: a float set scaled in float, a double one
 * from the float values scaled in double.  A zero row gets a first
 * coordinate of 1 first.
 */
static km_data
km_unit(const km_data *D, gc_dtype dt)
{
	km_data		E = *D;
	size_t		m = (size_t) D->n * (size_t) D->d;

	E.centres = NULL;
	E.kc = 0;
	E.metric = GC_METRIC_COSINE;
	E.dtype = dt;
	E.x = NULL;
	E.x64 = NULL;
	if (dt == GC_F64)
	{
		E.x64 = (double *) malloc(sizeof(double) * m);
		km_oom(E.x64);
		for (size_t i = 0; i < m; i++)
			E.x64[i] = (double) D->x[i];
	}
	else
	{
		E.x = (float *) malloc(sizeof(float) * m);
		km_oom(E.x);
		memcpy(E.x, D->x, sizeof(float) * m);
	}
	for (;;)
	{
		int64_t		z = gc_unit_rows(dt == GC_F64 ? (void *) E.x64 : (void *) E.x, dt, E.n, E.d);

		if (z < 0)
			break;
		if (dt == GC_F64)
			E.x64[z * E.d] = 1.0;
		else
			E.x[z * E.d] = 1.0f;
	}
	return E;
}

/* The first k centres of the blobs, each coordinate moved by shift (a start near the truth). */
static double *
km_near_truth(const km_data *D, int32_t k, double shift)
{
	double	   *c = (double *) malloc(sizeof(double) * (size_t) k * (size_t) D->d);

	for (int64_t i = 0; i < (int64_t) k * D->d; i++)
		c[i] = D->centres[i] + shift;
	return c;
}

/*
 * One case: the CPU once, the table under test once per variant; prints a
 * table row per variant and counts a check per variant.
 */
static void
km_case(const km_data *D, const char *label, const gc_kmeans_params *p, const km_variant *variants,
		int nvariants, km_rule rule, double max_rel_inertia)
{
	km_answer	ref,
				t;

	gc_kmeans_params pm = *p;
	const char *prec = D->dtype == GC_F64 ? "f64" : "f32";
	const char *met = D->metric == GC_METRIC_COSINE ? ", cosine" : "";

	pm.metric = D->metric;
	p = &pm;
	km_alloc(&ref, D->n, p->k, D->d);
	km_alloc(&t, D->n, p->k, D->d);
	km_run_dt(H.ref, &ref, km_x(D), D->dtype, D->n, D->d, p, NULL, NULL);
	for (int v = 0; v < nvariants; v++)
	{
		km_diff		df;
		char		verdict[2400],
					what[256],
					counts[96] = "";
		int			ok;

		km_run_dt(H.test, &t, km_x(D), D->dtype, D->n, D->d, p, &variants[v].tuning, NULL);
		ok = km_compare(km_x(D), D->dtype, D->n, D->d, p->k, &ref, &t, rule, max_rel_inertia, &df, verdict,
						sizeof(verdict));
		if (ok && rule == KM_EXACT && ref.best_run != t.best_run)
		{
			ok = 0;
			snprintf(verdict, sizeof(verdict), "DIFFERENT: run %d of %d kept, the CPU kept run %d",
					 t.best_run + 1, p->n_init, ref.best_run + 1);
		}
		snprintf(what, sizeof(what), "kmeans %s %lld x %d k=%d %s n_init=%d, %s, %s%s", label, (long long) D->n,
				 D->d, p->k, km_init_name(p->init), p->n_init, variants[v].name, prec, met);
		h_check(ok, what, verdict);
		if (D->d > 32 && D->dtype == GC_F32 && t.status == GC_OK)
			snprintf(counts, sizeof(counts), "%lld / %lld / %lld", (long long) t.timing.counts[0],
					 (long long) t.timing.counts[1], (long long) t.timing.counts[2]);
		printf("| %-24s %s%s | %8lld x %-3d | %4d | %-9s | %-17s | %-9s | %3d / %3d | %lld (%lld) | %.2e | %.2e | %.2e "
			   "| %8.0f | %8.0f | %s | %s |\n",
			   label, prec, met, (long long) D->n, D->d, p->k, km_init_name(p->init), variants[v].name,
			   km_rule_name(rule), ref.iterations, t.iterations, (long long) df.mismatches,
			   (long long) df.near_ties, df.rel_inertia, df.max_centroid_diff, df.max_distance_diff,
			   ref.wall_ms, t.wall_ms, counts, verdict);
		fflush(stdout);
	}
	km_free(&ref);
	km_free(&t);
}

/* Runs a k-means assignment to centroids [k, d] into a (labels, distance; sizes and inertia from them). */
static void
km_assign_run(const gc_backend_api *api, km_answer *a, const void *x, gc_dtype dt, gc_metric metric,
			  int64_t n, int32_t d, int32_t k, const double *centroids, const gc_tuning *tuning)
{
	gc_kmeans_assign_params p;
	gc_kmeans_assign_result r;
	gc_exec		e = gc_h_exec(tuning, NULL, &a->timing);
	double		t0;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.k = k;
	p.centroids = centroids;
	p.precision = GC_PRECISION_FP32;
	p.metric = metric;
	r.labels = a->labels;
	r.distance = a->distance;
	t0 = gc_h_now_ms();
	a->status = api->kmeans_assign(&e, x, dt, n, d, &p, &r);
	a->wall_ms = gc_h_now_ms() - t0;
	a->iterations = 0;
	a->best_run = 0;
	memcpy(a->centroids, centroids, sizeof(double) * (size_t) k * (size_t) d);
	for (int32_t j = 0; j < k; j++)
	{
		a->sizes[j] = 0;
		a->inertia[j] = 0.0;
	}
	if (a->status != GC_OK)
	{
		gc_h_error_text(api, a->error, sizeof(a->error));
		return;
	}
	a->error[0] = '\0';
	for (int64_t i = 0; i < n; i++)
	{
		a->sizes[a->labels[i]]++;
		a->inertia[a->labels[i]] += metric == GC_METRIC_COSINE ? a->distance[i] :
			a->distance[i] * a->distance[i];
	}
}

/*
 * gpu_kmeans_assign's promise, on one data set: (1) on the table under
 * test, the assignment to the centroids of its own k-means run gives that
 * run's labels and distances exactly; (2) the assignment to the same
 * centroids agrees with the CPU's: identical labels for d > 32 (decided in
 * double), near ties only for d <= 32 (FP32 kernel).
 */
static void
km_assign_case(const km_data *D, const char *label, const gc_kmeans_params *p)
{
	km_answer	fit,
				mine,
				ref;
	km_diff		df;
	char		verdict[2400],
				what[256];
	int			ok;
	int64_t		same_lab = 0,
				same_dist = 0;
	gc_kmeans_params pm = *p;
	const char *prec = D->dtype == GC_F64 ? "f64" : "f32";
	const char *met = D->metric == GC_METRIC_COSINE ? ", cosine" : "";

	pm.metric = D->metric;
	p = &pm;
	km_alloc(&fit, D->n, p->k, D->d);
	km_alloc(&mine, D->n, p->k, D->d);
	km_alloc(&ref, D->n, p->k, D->d);
	km_run_dt(H.test, &fit, km_x(D), D->dtype, D->n, D->d, p, NULL, NULL);
	km_assign_run(H.test, &mine, km_x(D), D->dtype, D->metric, D->n, D->d, p->k, fit.centroids, NULL);
	km_assign_run(H.ref, &ref, km_x(D), D->dtype, D->metric, D->n, D->d, p->k, fit.centroids, NULL);
	if (fit.status == GC_OK && mine.status == GC_OK)
		for (int64_t i = 0; i < D->n; i++)
		{
			same_lab += fit.labels[i] == mine.labels[i];
			same_dist += fit.distance[i] == mine.distance[i];
		}
	snprintf(what, sizeof(what), "kmeans_assign %s %lld x %d k=%d, %s%s: the fit's own labels and distances",
			 label, (long long) D->n, D->d, p->k, prec, met);
	snprintf(verdict, sizeof(verdict), "status %s / %s (%s%s), %lld of %lld labels and %lld distances the same",
			 gc_h_status_name(fit.status), gc_h_status_name(mine.status), fit.error, mine.error,
			 (long long) same_lab, (long long) D->n, (long long) same_dist);
	h_check(fit.status == GC_OK && mine.status == GC_OK && same_lab == D->n && same_dist == D->n, what, verdict);
	printf("| assign %-17s %s%s | %8lld x %-3d | %4d | %s's own fit | %lld / %lld labels, %lld distances equal "
		   "| fit %8.0f ms | assign %8.0f ms (compute %.1f ms, fit per iteration %.1f ms) |\n",
		   label, prec, met, (long long) D->n, D->d, p->k, h_test_name(), (long long) same_lab, (long long) D->n,
		   (long long) same_dist, fit.wall_ms, mine.wall_ms, mine.timing.compute_ms, fit.timing.phase_ms[3]);

	/* decided in double: the product form (d > 32) and every row of double precision */
	ok = km_compare(km_x(D), D->dtype, D->n, D->d, p->k, &ref, &mine,
					D->d > 32 || D->dtype == GC_F64 ? KM_EXACT : KM_NEAR_TIES, 1e-6, &df,
					verdict, sizeof(verdict));
	snprintf(what, sizeof(what), "kmeans_assign %s %lld x %d k=%d, %s%s: %s against cpu", label,
			 (long long) D->n, D->d, p->k, prec, met, h_test_name());
	h_check(ok, what, verdict);
	printf("| assign %-17s %s%s | %8lld x %-3d | %4d | against cpu | %lld (%lld near ties) | cpu %8.0f ms | %s |\n",
		   label, prec, met, (long long) D->n, D->d, p->k, (long long) df.mismatches, (long long) df.near_ties, ref.wall_ms,
		   verdict);
	fflush(stdout);
	km_free(&fit);
	km_free(&mine);
	km_free(&ref);
}

/*
 * gpu_kmeans_assign to given centroids against the CPU, labels identical
 * (rows of single precision, d > 32: every label decided in double).
 */
static void
km_assign_given(const km_data *D, const char *label, int32_t k, const double *centroids)
{
	km_answer	mine,
				ref;
	km_diff		df;
	char		verdict[2400],
				what[256];
	int			ok;

	km_alloc(&mine, D->n, k, D->d);
	km_alloc(&ref, D->n, k, D->d);
	km_assign_run(H.test, &mine, km_x(D), D->dtype, D->metric, D->n, D->d, k, centroids, NULL);
	km_assign_run(H.ref, &ref, km_x(D), D->dtype, D->metric, D->n, D->d, k, centroids, NULL);
	ok = km_compare(km_x(D), D->dtype, D->n, D->d, k, &ref, &mine, KM_EXACT, 1e-6, &df, verdict, sizeof(verdict));
	snprintf(what, sizeof(what), "kmeans_assign %s %lld x %d k=%d, given centroids: %s against cpu", label,
			 (long long) D->n, D->d, k, h_test_name());
	h_check(ok, what, verdict);
	printf("| assign %-17s f32 | %8lld x %-3d | %4d | against cpu | %lld (%lld near ties) | cpu %8.0f ms | %s |\n",
		   label, (long long) D->n, D->d, k, (long long) df.mismatches, (long long) df.near_ties, ref.wall_ms,
		   verdict);
	fflush(stdout);
	km_free(&mine);
	km_free(&ref);
}

/* The comparison notices a label moved to another cluster, also under the near-tie rule. */
static void
km_self_check(void)
{
	km_data		D = km_separated(4000, 2, 4, 0.0);
	gc_kmeans_params p = km_params(4, GC_KMEANS_INIT_PLUSPLUS, NULL, 100, 1e-4, GC_PRECISION_FP32);
	km_answer	ref,
				t;
	km_diff		df;
	char		verdict[2400];
	int			noticed;

	km_alloc(&ref, D.n, 4, 2);
	km_alloc(&t, D.n, 4, 2);
	km_run(H.ref, &ref, D.x, D.n, 2, &p, NULL, NULL);
	km_run(H.test, &t, D.x, D.n, 2, &p, NULL, NULL);
	noticed = km_compare(D.x, GC_F32, D.n, 2, 4, &ref, &t, KM_EXACT, 1e-6, &df, verdict, sizeof(verdict));
	t.labels[D.n / 2] = (t.labels[D.n / 2] + 1) % 4;
	noticed = noticed && !km_compare(D.x, GC_F32, D.n, 2, 4, &ref, &t, KM_EXACT, 1e-6, &df, verdict, sizeof(verdict));
	noticed = noticed && !km_compare(D.x, GC_F32, D.n, 2, 4, &ref, &t, KM_NEAR_TIES, 1.0, &df, verdict,
									 sizeof(verdict));
	h_check(noticed, "kmeans comparison notices a changed label",
			"an unchanged answer was called different, or a label moved across separated blobs "
			"was called identical or a near tie");
	km_free(&ref);
	km_free(&t);
	km_data_free(&D);

	/*
	 * The near-tie rule on a made-up answer: rows 0, 1, 2 at 0, 1, 2 and
	 * centroids at 0.5 and 1.5.  Row 1 is at an exact tie: the other label
	 * is a near tie (not allowed by the exact rule); row 0 is not.
	 */
	{
		float		x3[3] = {0.0f, 1.0f, 2.0f};
		int32_t		lr[3] = {0, 0, 1},
					lt[3] = {0, 1, 1};
		double		dist[3] = {0.5, 0.5, 0.5},
					cen[2] = {0.5, 1.5},
					inertia[2] = {0.5, 0.25};
		int64_t		sizes[2] = {2, 1};
		km_answer	r3,
					t3;
		int			ok;

		memset(&r3, 0, sizeof(r3));
		r3.labels = lr;
		r3.distance = dist;
		r3.centroids = cen;
		r3.sizes = sizes;
		r3.inertia = inertia;
		t3 = r3;
		t3.labels = lt;
		ok = km_compare(x3, GC_F32, 3, 1, 2, &r3, &t3, KM_NEAR_TIES, 1e-6, &df, verdict, sizeof(verdict)) &&
			df.near_ties == 1 &&
			!km_compare(x3, GC_F32, 3, 1, 2, &r3, &t3, KM_EXACT, 1e-6, &df, verdict, sizeof(verdict));
		lt[0] = 1;
		ok = ok && !km_compare(x3, GC_F32, 3, 1, 2, &r3, &t3, KM_NEAR_TIES, 1e-6, &df, verdict, sizeof(verdict)) &&
			df.near_ties == 1 && df.mismatches == 2;
		h_check(ok, "kmeans near-tie rule on a made-up answer",
				"a row at an exact tie was not called a near tie, or a row far from one was");
	}
}

/* The table under test twice on one input: the same labels and centroids. */
static void
km_twice(void)
{
	km_data		D = km_named("unit", 2000000, 5);
	gc_kmeans_params p = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 30, 1e-4, GC_PRECISION_FP32);
	km_answer	a,
				b;
	int			same;
	char		detail[256];

	km_alloc(&a, D.n, 64, 5);
	km_alloc(&b, D.n, 64, 5);
	km_run(H.test, &a, D.x, D.n, 5, &p, NULL, NULL);
	km_run(H.test, &b, D.x, D.n, 5, &p, NULL, NULL);
	same = a.status == GC_OK && b.status == GC_OK &&
		memcmp(a.labels, b.labels, sizeof(int32_t) * (size_t) D.n) == 0 &&
		memcmp(a.centroids, b.centroids, sizeof(double) * 64 * 5) == 0;
	snprintf(detail, sizeof(detail), "status %s / %s", gc_h_status_name(a.status), gc_h_status_name(b.status));
	h_check(same, "kmeans: the same call twice gives the same answer", detail);
	printf("\n%s twice on %lld x 5 uniform, k=64: %s\n", h_test_name(), (long long) D.n,
		   same ? "identical" : "DIFFERENT");
	km_free(&a);
	km_free(&b);
	km_data_free(&D);
}

/* One call of the cancels in a row (h_cancel_storm). */
typedef struct km_storm
{
	const km_data *D;
	const gc_kmeans_params *p;
	km_answer  *a;
} km_storm;

static gc_status
km_storm_run(void *ctx, gc_h_cancel *cancel)
{
	km_storm   *s = (km_storm *) ctx;

	km_run_dt(H.test, s->a, km_x(s->D), s->D->dtype, s->D->n, s->D->d, s->p, NULL, cancel);
	return s->a->status;
}

/*
 * Cancel and a bad parameter, with the device memory before and after; 200
 * cancels in a row at random questions on float and on double rows
 * (h_cancel_storm).
 */
static void
km_error_paths(void)
{
	km_data		D = km_separated(H.cpu_only ? 200000 : 10000000, 2, 8, 0.0);
	gc_kmeans_params p = km_params(8, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, GC_PRECISION_FP32);
	km_answer	a;
	int64_t		before,
				after;
	char		detail[1400],
				mem[64];

	km_alloc(&a, D.n, 8, 2);
	km_run(H.test, &a, D.x, D.n, 2, &p, NULL, NULL);	/* warm-up */
	h_check(a.status == GC_OK, "kmeans warm-up run", a.error);
	before = h_free_device_memory();
	printf("\n| k-means error path (%lld rows) | status | detail | free device memory before -> after |\n"
		   "|---|---|---|---|\n", (long long) D.n);
	{
		gc_h_cancel c = {0, 1, 0, 0};

		km_run(H.test, &a, D.x, D.n, 2, &p, NULL, &c);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s), %.1f ms", gc_h_status_name(a.status), a.error,
				 a.wall_ms);
		h_check(a.status == GC_ERR_CANCELLED, "kmeans cancel at the first question", detail);
		if (!H.cpu_only)
			h_check(after == before, "kmeans device memory after cancel", detail);
		printf("| cancel at the first question | %s | %s | %s |\n",
			   a.status == GC_ERR_CANCELLED ? "GC_ERR_CANCELLED" : "UNEXPECTED", detail,
			   h_memory_text(before, after, mem, sizeof(mem)));
	}
	{
		gc_h_cancel c = {0, 0, 0, 0};

		km_run(H.test, &a, D.x, D.n, 2, &p, NULL, &c);
		snprintf(detail, sizeof(detail), "status %s, asked %d times", gc_h_status_name(a.status), c.calls);
		h_check(a.status == GC_OK && c.calls >= 1, "kmeans cancel callback asked during a full run", detail);
		printf("| callback never says yes | %s | %s | |\n", a.status == GC_OK ? "GC_OK" : "UNEXPECTED", detail);
	}
	{
		gc_kmeans_params bad = km_params(0, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, GC_PRECISION_FP32);

		km_run(H.test, &a, D.x, D.n, 2, &bad, NULL, NULL);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == GC_ERR_INVALID_ARGUMENT, "kmeans k = 0", detail);
		printf("| k = 0 | %s | %s | %s |\n",
			   a.status == GC_ERR_INVALID_ARGUMENT ? "GC_ERR_INVALID_ARGUMENT" : "UNEXPECTED", detail,
			   h_memory_text(before, after, mem, sizeof(mem)));
	}
	{
		/*
		 * Rows whose squared norms pass the float limit (the rows times
		 * 2^62): the GPU's single-precision kernels refuse them, fit and
		 * assignment; the CPU computes them.
		 */
		float	   *big = (float *) malloc(sizeof(float) * (size_t) D.n * 2);
		double		cen[4] = {0.0, 0.0, ldexp(1.0, 62), ldexp(1.0, 62)};
		gc_kmeans_params p2 = km_params(2, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, GC_PRECISION_FP32);
		gc_status	want = H.cpu_only ? GC_OK : GC_ERR_INVALID_ARGUMENT;
		const char *want_name = H.cpu_only ? "GC_OK" : "GC_ERR_INVALID_ARGUMENT";

		if (!big)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (size_t i = 0; i < (size_t) D.n * 2; i++)
			big[i] = ldexpf(D.x[i], 62);
		km_run(H.test, &a, big, D.n, 2, &p2, NULL, NULL);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == want, "kmeans rows beyond single precision", detail);
		if (!H.cpu_only)
			h_check(after == before, "kmeans device memory after rows beyond single precision", detail);
		printf("| rows x 2^62 | %s | %s | %s |\n", a.status == want ? want_name : "UNEXPECTED", detail,
			   h_memory_text(before, after, mem, sizeof(mem)));
		km_assign_run(H.test, &a, big, GC_F32, GC_METRIC_EUCLIDEAN, D.n, 2, 2, cen, NULL);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == want, "kmeans assignment of rows beyond single precision", detail);
		printf("| assignment, rows x 2^62 | %s | %s | %s |\n", a.status == want ? want_name : "UNEXPECTED",
			   detail, h_memory_text(before, after, mem, sizeof(mem)));
		free(big);
	}
	{
		km_data		D64 = km_f64(&D, -1);
		km_storm	sf = {&D, &p, &a};
		km_storm	sd = {&D64, &p, &a};

		h_cancel_storm("kmeans", "float rows", D.n, km_storm_run, &sf);
		h_cancel_storm("kmeans", "double rows", D64.n, km_storm_run, &sd);
		km_data_free(&D64);
	}
	km_free(&a);
	km_data_free(&D);
}

/*
 * Double precision (GC_F64) and the metric cosine (spherical k-means, rows
 * of unit length), with the rules of the float cases: separated blobs
 * exact, users' shapes near ties.  The GPU labels rows of double precision
 * as double arithmetic does (kmeans_direct.cu: direct for d <= 32, a
 * checked DGEMM above), so their near ties come from the centroids' last
 * bits only, and the assignment to given centroids is exact.
 */
static void
km_precision_metric_checks(void)
{
	const gc_precision F = GC_PRECISION_FP32;
	km_variant	dflt[1] = {km_v_default()};

	printf("\n## k-means in double precision and with the metric cosine: %s against cpu\n\n"
		   "| case | n x d | k | init | tuning | rule | iterations cpu / %s | label mismatches (near ties) "
		   "| inertia rel diff | max centroid diff | max distance diff | cpu ms | %s ms "
		   "| decided in double / candidates / second product | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name(), h_test_name());
	fflush(stdout);
	{
		/* the benchmark's shape: 10M x 2, k = 100, in double */
		km_data		S = km_separated(10000000, 2, 100, 0.0);
		km_data		D = km_f64(&S, -1);
		gc_kmeans_params pp = km_params(100, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params ni = pp;

		km_data_free(&S);
		km_case(&D, "k=100", &pp, dflt, 1, KM_EXACT, 1e-6);
		ni.n_init = 2;
		km_case(&D, "k=100, n_init", &ni, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		/* fused-update shapes (d <= 16) and the given start, in double: the sorted update */
		km_data		S = km_separated(2000000, 8, 20, 0.0);
		km_data		D = km_f64(&S, -1);
		double	   *c0 = km_near_truth(&D, 20, 0.2);
		km_variant	both[2] = {km_v_default(), km_v_chunks(100000)};
		gc_kmeans_params g = km_params(20, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);
		gc_kmeans_params r = km_params(20, GC_KMEANS_INIT_RANDOM, NULL, 300, 1e-4, F);

		km_data_free(&S);
		km_case(&D, "d=8, chunks", &g, both, 2, KM_EXACT, 1e-6);
		km_case(&D, "d=8, random", &r, dflt, 1, KM_NEAR_TIES, 1e-5);
		free(c0);
		km_data_free(&D);
	}
	{
		/* wide rows in double: 1M x 256, k = 1000 (random rows: two may share a blob) */
		km_data		S = km_separated(1000000, 256, 1000, 0.0);
		km_data		D = km_f64(&S, -1);
		gc_kmeans_params r = km_params(1000, GC_KMEANS_INIT_RANDOM, NULL, 10, 1e-4, F);

		km_data_free(&S);
		km_case(&D, "wide, k=1000", &r, dflt, 1, KM_NEAR_TIES, 1e-5);
		km_data_free(&D);
	}
	{
		/* d = 32: the direct kernel over two slices of features; d = 100: the DGEMM form */
		km_data		S = km_separated(500000, 32, 50, 0.0);
		km_data		D = km_f64(&S, -1);
		km_data		S2 = km_separated(200000, 100, 64, 0.0);
		km_data		D2 = km_f64(&S2, -1);
		km_data		O = km_separated(300000, 64, 10, 1000.0);
		km_data		O2 = km_f64(&O, -1);
		double	   *c0 = km_near_truth(&O2, 10, 0.5);
		km_variant	both[2] = {km_v_default(), km_v_chunks(100000)};
		gc_kmeans_params p50 = km_params(50, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params pp = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params g = km_params(10, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);

		km_data_free(&S);
		km_data_free(&S2);
		km_data_free(&O);
		km_case(&D, "d=32", &p50, dflt, 1, KM_EXACT, 1e-6);
		km_case(&D2, "DGEMM, d=100", &pp, both, 2, KM_EXACT, 1e-6);
		km_case(&O2, "DGEMM, offset 1000", &g, dflt, 1, KM_EXACT, 1e-6);
		free(c0);
		km_data_free(&D);
		km_data_free(&D2);
		km_data_free(&O2);
	}
	{
		/* the hard case of a checked product: 997 clusters on a line, in double */
		km_data		S = km_line(10000, 256);
		km_data		D = km_f64(&S, -1);
		gc_kmeans_params r = km_params(1000, GC_KMEANS_INIT_RANDOM, NULL, 3, 1e-4, F);
		gc_kmeans_params pp = km_params(300, GC_KMEANS_INIT_PLUSPLUS, NULL, 5, 1e-4, F);

		km_data_free(&S);
		km_case(&D, "DGEMM, line, k=1000", &r, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_case(&D, "DGEMM, line, k=300", &pp, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_data_free(&D);
	}
	{
		/* four blobs, five centroids, the fifth empty after the first assignment */
		km_data		S = km_separated(100000, 2, 4, 0.0);
		km_data		D = km_f64(&S, -1);
		double		c0[10];
		gc_kmeans_params g = km_params(5, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);

		for (int i = 0; i < 8; i++)
			c0[i] = D.centres[i] + 0.1;
		c0[8] = 1e4;
		c0[9] = 1e4;
		km_data_free(&S);
		km_case(&D, "one empty at start", &g, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		/* lon/lat with 5 decimals, two decimals (ties), far outliers, close clusters: as doubles */
		km_data		L0 = km_named("latlon", 500000, 2);
		km_data		R0 = km_named("round2", 500000, 2);
		km_data		F0 = km_named("far", 200000, 8);
		km_data		C0 = km_named("close", 100000, 2);
		km_data		L = km_f64(&L0, 5);
		km_data		R = km_f64(&R0, 2);
		km_data		Fa = km_f64(&F0, 3);
		km_data		C = km_f64(&C0, 4);
		gc_kmeans_params p30 = km_params(30, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params p20 = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params p500 = km_params(500, GC_KMEANS_INIT_PLUSPLUS, NULL, 50, 1e-4, F);

		km_data_free(&L0);
		km_data_free(&R0);
		km_data_free(&F0);
		km_data_free(&C0);
		km_case(&L, "lon/lat, five decimals", &p30, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_case(&R, "two decimals", &p20, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_case(&Fa, "far outliers", &p20, dflt, 1, KM_NEAR_TIES, 1e-3);
		km_case(&C, "500 close clusters", &p500, dflt, 1, KM_NEAR_TIES, 1e-3);
		km_data_free(&L);
		km_data_free(&R);
		km_data_free(&Fa);
		km_data_free(&C);
	}

	/* Spherical k-means, in single and double precision. */
	for (int prec = 0; prec < 2; prec++)
	{
		gc_dtype	dt = prec ? GC_F64 : GC_F32;

		{
			/* embedding-like rows: the GEMM form in float */
			km_data		W0 = km_named("wide", 50000, 768);
			km_data		E0 = km_named("wide", 20000, 384);
			km_data		W = km_unit(&W0, dt);
			km_data		E = km_unit(&E0, dt);
			km_variant	both[2] = {km_v_default(), km_v_sgemm()};
			gc_kmeans_params pp = km_params(16, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
			gc_kmeans_params r = km_params(32, GC_KMEANS_INIT_RANDOM, NULL, 100, 1e-4, F);

			km_data_free(&W0);
			km_data_free(&E0);
			km_case(&W, "wide rows", &pp, both, prec ? 1 : 2, KM_NEAR_TIES, 1e-6);
			km_case(&E, "wide rows, k=32", &r, dflt, 1, KM_NEAR_TIES, 1e-4);
			km_data_free(&W);
			km_data_free(&E);
		}
		{
			/* directions of separated blobs: 3-D (fused update in float), 12-D (sorted), 100-D (GEMM) */
			km_data		A0 = km_separated(2000000, 3, 16, 0.0);
			km_data		B0 = km_separated(500000, 12, 300, 0.0);
			km_data		C0 = km_separated(200000, 100, 64, 0.0);
			km_data		A = km_unit(&A0, dt);
			km_data		B = km_unit(&B0, dt);
			km_data		C = km_unit(&C0, dt);
			km_variant	chunks[2] = {km_v_default(), km_v_chunks(100000)};
			gc_kmeans_params p16 = km_params(16, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
			gc_kmeans_params r300 = km_params(300, GC_KMEANS_INIT_RANDOM, NULL, 300, 1e-4, F);
			gc_kmeans_params p64 = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

			km_data_free(&A0);
			km_data_free(&B0);
			km_data_free(&C0);
			km_case(&A, "directions, d=3", &p16, chunks, 2, KM_NEAR_TIES, 1e-5);
			km_case(&B, "directions, d=12", &r300, dflt, 1, KM_NEAR_TIES, 1e-4);
			km_case(&C, "directions, d=100", &p64, dflt, 1, KM_NEAR_TIES, 1e-5);
			km_data_free(&A);
			km_data_free(&B);
			km_data_free(&C);
		}
	}

	printf("\n## k-means assignment in double precision and with the metric cosine: %s\n\n"
		   "| case | n x d | k | against | labels | time | result |\n|---|---|---|---|---|---|---|\n",
		   h_test_name());
	{
		km_data		S = km_separated(H.cpu_only ? 1000000 : 10000000, 2, 100, 0.0);
		km_data		D = km_f64(&S, -1);
		km_data		L0 = km_named("latlon", 500000, 2);
		km_data		L = km_f64(&L0, 5);
		km_data		W0 = km_named("wide", 50000, 768);
		km_data		W = km_unit(&W0, GC_F32);
		km_data		W64 = km_unit(&W0, GC_F64);
		km_data		U0 = km_separated(1000000, 3, 16, 0.0);
		km_data		U = km_unit(&U0, GC_F32);
		gc_kmeans_params p100 = km_params(100, GC_KMEANS_INIT_PLUSPLUS, NULL, 20, 1e-4, F);
		gc_kmeans_params p30 = km_params(30, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params p64 = km_params(64, GC_KMEANS_INIT_RANDOM, NULL, 30, 1e-4, F);
		gc_kmeans_params p16 = km_params(16, GC_KMEANS_INIT_PLUSPLUS, NULL, 100, 1e-4, F);

		km_data_free(&S);
		km_data_free(&L0);
		km_data_free(&W0);
		km_data_free(&U0);
		km_assign_case(&D, "k=100", &p100);
		km_assign_case(&L, "lon/lat", &p30);
		km_assign_case(&W, "wide rows", &p64);
		km_assign_case(&W64, "wide rows", &p64);
		km_assign_case(&U, "directions, d=3", &p16);
		{
			km_data		G0 = km_line(20000, 256);
			km_data		G = km_f64(&G0, -1);
			gc_kmeans_params p500 = km_params(500, GC_KMEANS_INIT_RANDOM, NULL, 3, 1e-4, F);

			km_data_free(&G0);
			km_assign_case(&G, "DGEMM, line, k=500", &p500);
			km_data_free(&G);
		}
		km_data_free(&D);
		km_data_free(&L);
		km_data_free(&W);
		km_data_free(&W64);
		km_data_free(&U);
	}
}

void
kmeans_checks(void)
{
	const gc_precision F = GC_PRECISION_FP32;
	km_variant	dflt[1] = {km_v_default()};

	printf("\n## k-means: %s against cpu\n\n"
		   "| case | n x d | k | init | tuning | rule | iterations cpu / %s | label mismatches (near ties) "
		   "| inertia rel diff | max centroid diff | max distance diff | cpu ms | %s ms "
		   "| decided in double / candidates / second product | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name(), h_test_name());
	fflush(stdout);
	{
		km_data		D = km_separated(10000000, 2, 8, 0.0);
		double	   *c0 = km_near_truth(&D, 8, 0.3);
		gc_kmeans_params g = km_params(8, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);
		gc_kmeans_params pp = km_params(8, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "fused update", &g, dflt, 1, KM_EXACT, 1e-6);
		km_case(&D, "k-means++ on the device", &pp, dflt, 1, KM_EXACT, 1e-6);
		free(c0);
		km_data_free(&D);
	}
	{
		/* greedy and plain k-means++ with many candidates, and n_init */
		km_data		D = km_separated(1000000, 2, 100, 0.0);
		gc_kmeans_params pp = km_params(100, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params pl = km_params(100, GC_KMEANS_INIT_PLUSPLUS_PLAIN, NULL, 300, 1e-4, F);
		gc_kmeans_params ni = pp;

		ni.n_init = 3;
		km_case(&D, "k=100", &pp, dflt, 1, KM_EXACT, 1e-6);
		km_case(&D, "k=100, plain k-means++", &pl, dflt, 1, KM_EXACT, 1e-6);
		km_case(&D, "k=100, n_init", &ni, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(500000, 12, 300, 0.0);
		gc_kmeans_params r = km_params(300, GC_KMEANS_INIT_RANDOM, NULL, 300, 1e-4, F);

		km_case(&D, "sorted update", &r, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(500000, 32, 50, 0.0);
		gc_kmeans_params pp = km_params(50, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "d=32", &pp, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(200000, 100, 64, 0.0);
		km_variant	both[2] = {km_v_default(), km_v_sgemm()};
		gc_kmeans_params pp = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params r = km_params(64, GC_KMEANS_INIT_RANDOM, NULL, 300, 1e-4, F);
		gc_kmeans_params tf = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, GC_PRECISION_TF32);

		km_case(&D, "GEMM, checked", &pp, both, 2, KM_EXACT, 1e-6);
		/* random rows may put two centres in one blob, whose split is then a near tie */
		km_case(&D, "GEMM, two in a blob", &r, dflt, 1, KM_NEAR_TIES, 1e-5);
		km_case(&D, "precision tf32", &tf, dflt, 1, KM_REPORT, 0);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(100000, 300, 500, 0.0);
		km_variant	both[2] = {km_v_default(), km_v_window(1e6)};
		gc_kmeans_params pp = km_params(500, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		/* a window a million times wider: every centroid a candidate, both fallbacks run */
		km_case(&D, "GEMM, k=500", &pp, both, 2, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(300000, 64, 10, 1000.0);
		double	   *c0 = km_near_truth(&D, 10, 0.5);
		km_variant	both[2] = {km_v_default(), km_v_sgemm()};
		gc_kmeans_params g = km_params(10, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);

		km_case(&D, "offset 1000", &g, both, 2, KM_EXACT, 1e-6);
		free(c0);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(1000000, 8, 20, 0.0);
		double	   *c0 = km_near_truth(&D, 20, 0.2);
		km_variant	both[2] = {km_v_default(), km_v_chunks(100000)};
		gc_kmeans_params g = km_params(20, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);
		gc_kmeans_params pp = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "chunks", &g, both, 2, KM_EXACT, 1e-6);
		km_case(&D, "chunks", &pp, both, 2, KM_EXACT, 1e-6);
		free(c0);
		km_data_free(&D);
	}
	{
		/* four blobs, five centroids: the fifth far away, empty after the first assignment */
		km_data		D = km_separated(100000, 2, 4, 0.0);
		double		c0[10];
		gc_kmeans_params g = km_params(5, GC_KMEANS_INIT_GIVEN, c0, 300, 1e-4, F);

		for (int i = 0; i < 8; i++)
			c0[i] = D.centres[i] + 0.1;
		c0[8] = 1e4;
		c0[9] = 1e4;
		km_case(&D, "one empty at start", &g, dflt, 1, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		/* no structure: ties and rounding may send the runs apart */
		km_data		D = km_named("unit", 1000000, 3);
		gc_kmeans_params pp = km_params(16, GC_KMEANS_INIT_PLUSPLUS, NULL, 10, 0.0, F);

		km_case(&D, "uniform, 10 iterations", &pp, dflt, 1, KM_NEAR_TIES, 1e-3);
		km_data_free(&D);
	}

	/* Users' data. */
	{
		/* two decimals: exact ties between centroids abound */
		km_data		D = km_named("round2", 500000, 2);
		gc_kmeans_params pp = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "two decimals", &pp, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_data_free(&D);
	}
	{
		/* longitude / latitude: large coordinates, small differences */
		km_data		D = km_named("latlon", 500000, 2);
		gc_kmeans_params pp = km_params(30, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "lon/lat, five decimals", &pp, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_data_free(&D);
	}
	{
		/* far outliers: k-means++ gives them centroids; the GEMM bound widens */
		km_data		D = km_named("far", 200000, 8);
		km_data		W = km_named("far", 100000, 64);
		km_variant	both[2] = {km_v_default(), km_v_sgemm()};
		gc_kmeans_params pp = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		km_case(&D, "far outliers", &pp, dflt, 1, KM_NEAR_TIES, 1e-3);
		km_case(&W, "far outliers, GEMM", &pp, both, 2, KM_NEAR_TIES, 1e-3);
		km_data_free(&D);
		km_data_free(&W);
	}
	{
		/* 500 small clusters side by side, as many centroids */
		km_data		D = km_named("close", 100000, 2);
		gc_kmeans_params pp = km_params(500, GC_KMEANS_INIT_PLUSPLUS, NULL, 50, 1e-4, F);

		km_case(&D, "500 close clusters", &pp, dflt, 1, KM_NEAR_TIES, 1e-3);
		km_data_free(&D);
	}
	{
		/* embedding-like rows on the unit sphere */
		km_data		D = km_named("wide", 50000, 768);
		km_data		E = km_named("wide", 20000, 384);
		km_variant	both[2] = {km_v_default(), km_v_sgemm()};
		gc_kmeans_params pp = km_params(16, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params r = km_params(32, GC_KMEANS_INIT_RANDOM, NULL, 100, 1e-4, F);

		km_case(&D, "wide rows", &pp, both, 2, KM_NEAR_TIES, 1e-6);
		km_case(&E, "wide rows, k=32", &r, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_data_free(&D);
		km_data_free(&E);
	}
	/* Greedy k-means++ with many candidates (k = 100 with n_init: above). */
	{
		/* k = 2000: 9 candidates per step, two groups of the device's potential pass */
		km_data		D = km_separated(100000, 4, 2000, 0.0);
		gc_kmeans_params pp = km_params(2000, GC_KMEANS_INIT_PLUSPLUS, NULL, 5, 1e-4, F);

		km_case(&D, "greedy, k=2000", &pp, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_data_free(&D);
	}
	{
		km_data		D = km_separated(200000, 100, 64, 0.0);
		km_variant	chunks[2] = {km_v_default(), km_v_chunks(100000)};
		gc_kmeans_params ni = km_params(64, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		ni.n_init = 3;
		km_case(&D, "GEMM, n_init", &ni, chunks, 2, KM_EXACT, 1e-6);
		km_data_free(&D);
	}
	{
		/* many close clusters on the device path of the seeding, duplicates (two decimals) */
		km_data		D = km_named("close", 200000, 2);
		km_data		R = km_named("round2", 200000, 2);
		gc_kmeans_params pp = km_params(300, GC_KMEANS_INIT_PLUSPLUS, NULL, 1, 1e-4, F);
		gc_kmeans_params ni = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);

		ni.n_init = 4;
		km_case(&D, "close, one iteration", &pp, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_case(&R, "two decimals, n_init", &ni, dflt, 1, KM_NEAR_TIES, 1e-4);
		km_data_free(&D);
		km_data_free(&R);
	}

	{
		/*
		 * All the initial centroids equal: every row goes to the first, and
		 * the first update re-seeds 499 empty clusters at once, from rows
		 * with many duplicates (small integers, so that every squared
		 * distance of the first pass is exact in float as in double and the
		 * rows' order by it is the CPU's): 2-D and 40-D (the product form).
		 */
		km_data		A = km_named("round2", 200000, 2);
		km_data		W = km_named("round2", 50000, 40);
		double	   *c0 = (double *) calloc((size_t) 500 * 40, sizeof(double));
		gc_kmeans_params g2 = km_params(500, GC_KMEANS_INIT_GIVEN, c0, 5, 1e-4, F);
		gc_kmeans_params g40 = km_params(500, GC_KMEANS_INIT_GIVEN, c0, 5, 1e-4, F);

		if (!c0)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (size_t i = 0; i < (size_t) A.n * A.d; i++)
			A.x[i] = (float) (((int64_t) i * 7919) % 13);
		for (size_t i = 0; i < (size_t) W.n * W.d; i++)
			W.x[i] = (float) (((int64_t) (i / W.d) * 7919 + (int64_t) (i % W.d) * 31) % 5);
		km_case(&A, "identical start, duplicates", &g2, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_case(&W, "identical start, duplicates", &g40, dflt, 1, KM_NEAR_TIES, 1e-6);
		free(c0);
		km_data_free(&A);
		km_data_free(&W);
	}
	{
		/* the hard case of the checked product: 997 clusters on a line, k above and near that */
		km_data		D = km_line(10000, 256);
		km_variant	both[2] = {km_v_default(), km_v_sgemm()};
		gc_kmeans_params r = km_params(1000, GC_KMEANS_INIT_RANDOM, NULL, 3, 1e-4, F);
		gc_kmeans_params pp = km_params(300, GC_KMEANS_INIT_PLUSPLUS, NULL, 5, 1e-4, F);

		km_case(&D, "line, k=1000", &r, both, 2, KM_NEAR_TIES, 1e-6);
		km_case(&D, "line, k=300", &pp, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_data_free(&D);
	}

	{
		/*
		 * Blobs with many close centroids (20 a blob): the TF32 check leaves
		 * most rows several candidates, which go to the second product (a
		 * DGEMM on devices with fast FP64, else FP32; both forms run here)
		 * and, for the few the DGEMM's bound cannot separate, to the
		 * comparison in double.  d = 256: 10 separated blobs (uniform
		 * noise); d = 768: 20 embedding-like Gaussian blobs.
		 */
		km_data		B = km_separated(20000, 256, 10, 0.0);
		km_data		W = km_wide(10000, 768, 20);
		km_variant	both[2] = {km_v_default(), km_v_tf32_fp32()};
		gc_kmeans_params r = km_params(200, GC_KMEANS_INIT_RANDOM, NULL, 10, 1e-4, F);
		gc_kmeans_params pp = km_params(400, GC_KMEANS_INIT_PLUSPLUS, NULL, 5, 1e-4, F);

		km_case(&B, "close centroids", &r, both, 2, KM_NEAR_TIES, 1e-6);
		km_case(&W, "close centroids", &r, both, 2, KM_NEAR_TIES, 1e-6);
		km_case(&W, "close centroids", &pp, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_data_free(&B);
		km_data_free(&W);
	}
	{
		/*
		 * Tile mode's DGEMM over each tile's candidates: 60 centroids a
		 * blob, more than the TF32 check decides in double, so the rows go
		 * to the DGEMM level in tile mode; a tile of 4,096 rows spans one or
		 * two blobs, so the union of its rows' windows is mostly within a
		 * quarter of k (the DGEMM over those columns) and sometimes beyond
		 * (the DGEMM of every centroid).
		 */
		km_data		B = km_separated(60000, 256, 10, 0.0);
		gc_kmeans_params r = km_params(600, GC_KMEANS_INIT_RANDOM, NULL, 5, 1e-4, F);

		km_case(&B, "tile candidates", &r, dflt, 1, KM_NEAR_TIES, 1e-6);
		km_data_free(&B);
	}

	/* gpu_kmeans_assign */
	printf("\n## k-means assignment: %s\n\n| case | n x d | k | against | labels | time | result |\n"
		   "|---|---|---|---|---|---|---|\n", h_test_name());
	{
		km_data		D = km_separated(H.cpu_only ? 1000000 : 10000000, 2, 100, 0.0);
		km_data		R = km_named("round2", 500000, 2);
		km_data		W = km_named("wide", 50000, 768);
		gc_kmeans_params p100 = km_params(100, GC_KMEANS_INIT_PLUSPLUS, NULL, 20, 1e-4, F);
		gc_kmeans_params p20 = km_params(20, GC_KMEANS_INIT_PLUSPLUS, NULL, 300, 1e-4, F);
		gc_kmeans_params p64 = km_params(64, GC_KMEANS_INIT_RANDOM, NULL, 30, 1e-4, F);

		km_assign_case(&D, "k=100", &p100);
		km_assign_case(&R, "two decimals", &p20);
		km_assign_case(&W, "wide rows", &p64);
		km_data_free(&D);
		km_data_free(&R);
		km_data_free(&W);
	}
	{
		km_data		D = km_separated(100000, 256, 200, 0.0);
		gc_kmeans_params p = km_params(200, GC_KMEANS_INIT_RANDOM, NULL, 10, 1e-4, F);

		km_assign_case(&D, "GEMM, k=200", &p);
		km_data_free(&D);
	}
	{
		km_data		D = km_line(20000, 256);
		gc_kmeans_params p = km_params(500, GC_KMEANS_INIT_RANDOM, NULL, 3, 1e-4, F);

		km_assign_case(&D, "line, k=500", &p);
		km_data_free(&D);
	}
	{
		km_data		B = km_separated(20000, 256, 10, 0.0);
		km_data		W = km_wide(10000, 768, 20);
		gc_kmeans_params r = km_params(200, GC_KMEANS_INIT_RANDOM, NULL, 5, 1e-4, F);

		km_assign_case(&B, "close centroids", &r);
		km_assign_case(&W, "close centroids", &r);
		km_data_free(&B);
		km_data_free(&W);
	}
	{
		/*
		 * Exact ties through the DGEMM over each tile's candidates: 200
		 * rows of 10 blobs as centroids, each twice (centroid j + 200 is
		 * centroid j), 40 candidates a row; every row is at the same
		 * distance from both copies and takes the lower number, as on the
		 * CPU.
		 */
		km_data		B = km_separated(60000, 256, 10, 0.0);
		double	   *c = (double *) malloc(sizeof(double) * 400 * 256);

		if (!c)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (int j = 0; j < 200; j++)
			for (int t = 0; t < 256; t++)
				c[(size_t) j * 256 + t] = c[(size_t) (j + 200) * 256 + t] =
					B.x[(size_t) (j * (B.n / 200)) * 256 + t];
		km_assign_given(&B, "duplicates", 400, c);
		free(c);
		km_data_free(&B);
	}

	km_precision_metric_checks();
	km_twice();
	km_self_check();
	km_error_paths();
}
