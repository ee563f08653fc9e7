/*
 * check_dbscan.c
 *    DBSCAN of the table under test (the GPU back end) against the CPU back
 *    end, part of gpu_vs_cpu (see gpu_vs_cpu.c).
 *
 * The answer is defined exactly (common/backend.h): cluster numbers, core
 * flags and the number of clusters must be equal, row for row.  For d <= 3
 * the GPU is run three times, with the grid it chooses and with each grid
 * forced through tuning.dbscan_grid: the fine grid (cells of side
 * eps/sqrt(d), the dense-box rule of Prokopenko, Lebrun-Grandie and Arndt,
 * "Fast tree-based algorithms for DBSCAN on GPUs") and the coarse one
 * (cells of side eps).
 *
 * Every case runs in the element type and metric it names: single
 * precision (the generated floats), double precision (the generated values
 * rounded in double to the case's decimals, as a numeric or double
 * precision column holds them, so that the rows are not floats), and the
 * cosine metric on rows scaled to unit length by gc_unit_rows (after a
 * shift that spreads the directions), in either precision.
 *
 * Then the error paths: a cancel callback that says yes after 1 to 6
 * questions (GC_ERR_CANCELLED), one that never does (asked, and the run
 * completes), a non-finite coordinate (an error after the upload), eps < 0,
 * and an input too large for the device (GC_ERR_OUT_OF_MEMORY with the bytes
 * needed, before any work), each followed by a check that the free device
 * memory is what it was; 200 cancels in a row at random questions on float
 * and on double rows (h_cancel_storm), and last a run that must still give
 * the CPU's answer.  The error paths run on 10M rows also with --quick: their
 * uploads (80 MB of floats, 160 MB of doubles) take the staged copies of
 * cuda/copy.cu on 4 and 8 threads, where issue 42's 2 MiB went.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "metric.h"

typedef struct db_answer
{
	int32_t    *cluster;
	uint8_t    *is_core;
	int64_t		n_clusters;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} db_answer;

static void
db_alloc(db_answer *a, int64_t n)
{
	memset(a, 0, sizeof(*a));
	a->cluster = (int32_t *) malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	a->is_core = (uint8_t *) malloc((size_t) (n > 0 ? n : 1));
	if (!a->cluster || !a->is_core)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
}

static void
db_free(db_answer *a)
{
	free(a->cluster);
	free(a->is_core);
}

/* One DBSCAN call on rows x of element type t with metric m. */
static void
db_run_t(const gc_backend_api *api, db_answer *a, const void *x, gc_dtype t, gc_metric m, int64_t n,
		 int32_t d, double eps, int min_pts, const gc_tuning *tuning, gc_h_cancel *cancel)
{
	gc_dbscan_params p;
	gc_dbscan_result r;
	gc_exec		e = gc_h_exec(tuning, cancel, &a->timing);
	double		t0;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.eps = eps;
	p.min_pts = min_pts;
	p.metric = m;
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.is_core = a->is_core;
	t0 = gc_h_now_ms();
	a->status = api->dbscan(&e, x, t, n, d, &p, &r);
	a->wall_ms = gc_h_now_ms() - t0;
	a->n_clusters = r.n_clusters;
	if (a->status == GC_OK)
		a->error[0] = '\0';
	else
		gc_h_error_text(api, a->error, sizeof(a->error));
}

/* The same for float rows and the Euclidean metric. */
static void
db_run(const gc_backend_api *api, db_answer *a, const float *x, int64_t n, int32_t d, double eps,
	   int min_pts, const gc_tuning *tuning, gc_h_cancel *cancel)
{
	db_run_t(api, a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, eps, min_pts, tuning, cancel);
}

/*
 * Compares an answer with the reference; returns 1 when they agree (equal,
 * or the same error) and writes "identical" or what differs into verdict.
 */
static int
db_compare(const db_answer *ref, const db_answer *t, int64_t n, char *verdict, size_t size)
{
	int64_t		diff_c = 0,
				diff_k = 0,
				first = -1;

	{
		int			same = 0;

		if (h_status_verdict(ref->status, ref->error, t->status, t->error, verdict, size, &same))
			return same;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			bad = 0;

		if (ref->cluster[i] != t->cluster[i])
			diff_c++, bad = 1;
		if (ref->is_core[i] != t->is_core[i])
			diff_k++, bad = 1;
		if (bad && first < 0)
			first = i;
	}
	if (diff_c == 0 && diff_k == 0 && ref->n_clusters == t->n_clusters)
	{
		snprintf(verdict, size, "identical");
		return 1;
	}
	snprintf(verdict, size,
			 "DIFFERENT: %lld cluster, %lld core differences, clusters %lld vs %lld, "
			 "first at row %lld (cpu %d/%d, %s %d/%d)",
			 (long long) diff_c, (long long) diff_k, (long long) ref->n_clusters,
			 (long long) t->n_clusters, (long long) first,
			 first >= 0 ? ref->cluster[first] : 0, first >= 0 ? ref->is_core[first] : 0, h_test_name(),
			 first >= 0 ? t->cluster[first] : 0, first >= 0 ? t->is_core[first] : 0);
	return 0;
}

/* ------------------------------------------------------------------ the differential cases */

typedef struct db_case
{
	const char *shape;			/* test/data/gc_testdata.h */
	int64_t		n;
	int32_t		d;
	double		eps;			/* in the units of the metric */
	int			min_pts;
	gc_dtype	dtype;			/* GC_F32 (default) or GC_F64 */
	gc_metric	metric;			/* Euclidean (default) or cosine */
	double		scale;			/* GC_F64: values rounded to multiples of 1/scale; 0: the floats as they are */
	double		shift;			/* added to every coordinate (in the element type) before the rest */
	double		offset;			/* GC_F64: added after the rounding (coordinates far from the origin) */
} db_case;

#define F64 GC_F64
#define F32 GC_F32
#define EUC GC_METRIC_EUCLIDEAN
#define COS GC_METRIC_COSINE

static const db_case db_cases[] = {
	/* 1-D */
	{"blobs", 100000, 1, 0.0005, 5},
	{"uniform", 100000, 1, 0.002, 4},
	/* 2-D */
	{"blobs", 10000, 2, 0.3, 5},
	{"blobs", 1000000, 2, 0.05, 5},
	{"blobs", 1000000, 2, 0.04, 20},
	{"blobs", 1000000, 2, 0.01, 1},
	{"blobs", 1000000, 2, 0.01, 2},
	{"blobs", 10000000, 2, 0.05, 5},
	{"uniform", 1000000, 2, 0.1, 4},
	{"uniform", 1000000, 2, 0.08, 2},
	{"dups", 1000000, 2, 0.5, 10},
	{"dups", 200000, 2, 1e-6, 300},
	{"blobs", 100000, 2, 500.0, 5},		/* large eps: one cluster */
	{"outliers", 20000, 2, 0.3, 5},		/* +-1e20 */
	/* 3-D */
	{"blobs", 1000000, 3, 0.15, 5},
	{"uniform", 1000000, 3, 1.0, 3},
	{"uniform", 1000000, 3, 0.6, 2},
	{"dups", 1000000, 3, 2.0, 8},
	{"gantao", 1000000, 3, 25.0, 2},
	{"gantao", 2000000, 3, 25.0, 2},
	{"gantao", 1000000, 3, 40.0, 10},
	{"blobs", 100000, 3, 1000.0, 3},
	/* 8-D */
	{"blobs", 100000, 8, 1.2, 5},
	{"uniform", 30000, 8, 25.0, 4},
	{"dups", 100000, 8, 1.0, 20},
	{"blobs", 10000, 8, 1000.0, 10},
	/* 64-D */
	{"blobs", 20000, 64, 9.0, 5},
	{"uniform", 8000, 64, 240.0, 3},
	{"dups", 10000, 64, 1.0, 5},

	/*
	 * Users' data: coordinates with two decimals and a round eps (neighbours
	 * exactly one or five steps apart, decided by the float values), five
	 * decimals of longitude / latitude, far outliers, many close clusters,
	 * wide embedding-like rows.
	 */
	{"round2", 1000000, 2, 0.05, 5},
	{"round2", 200000, 2, 0.01, 3},
	{"round2", 200000, 3, 0.1, 4},
	{"latlon", 1000000, 2, 0.0001, 5},
	{"latlon", 200000, 2, 0.0005, 10},
	{"far", 1000000, 2, 0.05, 5},
	/* in 3-D the outliers widen the grid cells until blobs share a cell: quadratic, on the CPU too */
	{"far", 100000, 3, 0.15, 5},
	{"far", 50000, 8, 1.2, 5},
	{"close", 1000000, 2, 0.3, 5},
	{"close", 1000000, 2, 0.45, 20},
	{"close", 500000, 3, 0.3, 5},
	{"wide", 5000, 256, 0.5, 5},
	{"wide", 3000, 768, 0.45, 4},
	/* skew: one far row (mapped cell numbers), spread only in later features (the grid's choice) */
	{"speck", 1000000, 2, 1e-5, 5},
	{"speck", 300000, 3, 2e-5, 4},
	{"speck", 100000, 1, 1e-8, 3},
	{"flat", 200000, 8, 1.2, 5},
	{"flat", 20000, 64, 9.0, 5},

	/*
	 * Double precision: few decimals and a round eps (where single
	 * precision decides pairs differently), 1M and 10M rows in 2-D,
	 * duplicates, far outliers, coordinates far from the origin (projected
	 * metres; 1e9 with a far outlier: mapped raw cells off by a fraction of
	 * a cell), many close clusters, wide rows.
	 */
	{"round2", 1000000, 2, 0.05, 5, F64, EUC, 100},
	{"round2", 10000000, 2, 0.05, 5, F64, EUC, 100},
	{"round2", 1000000, 2, 0.01, 2, F64, EUC, 100},
	{"round2", 200000, 3, 0.1, 4, F64, EUC, 100},
	{"latlon", 1000000, 2, 0.0001, 5, F64, EUC, 1e5},
	{"latlon", 10000000, 2, 0.0001, 10, F64, EUC, 1e5},
	{"latlon", 200000, 2, 0.0005, 10, F64, EUC, 1e5},
	{"latlon", 200000, 3, 0.0005, 4, F64, EUC, 1e5},
	{"round2", 1000000, 2, 0.05, 5, F64, EUC, 100, 0, 5e6},
	{"far", 1000000, 2, 0.05, 5, F64, EUC, 100},
	{"far", 1000000, 2, 0.05, 5, F64, EUC, 100, 0, 1e9},
	{"far", 100000, 3, 0.15, 5, F64, EUC, 1e6},
	{"far", 50000, 8, 1.2, 5, F64, EUC, 1e6},
	{"dups", 1000000, 2, 0.5, 10, F64, EUC, 1e6},
	{"dups", 200000, 2, 1e-6, 300, F64, EUC, 1e6},
	{"dups", 1000000, 3, 2.0, 8, F64, EUC, 1e6},
	{"close", 1000000, 2, 0.3, 5, F64, EUC, 1e4},
	{"speck", 1000000, 2, 1e-5, 5, F64, EUC, 0},
	{"blobs", 100000, 1, 0.0005, 5, F64, EUC, 1e6},
	{"blobs", 1000000, 3, 0.15, 5, F64, EUC, 1e6},
	{"blobs", 100000, 8, 1.2, 5, F64, EUC, 1e6},
	{"wide", 5000, 256, 0.5, 5, F64, EUC, 0},

	/*
	 * Cosine, single and double precision: embedding-like rows (clusters on
	 * the sphere) in 8, 64 and 768 dimensions, and blobs, duplicates, far
	 * outliers and two decimals moved to the origin, whose directions then
	 * form clusters on the circle and the sphere.
	 */
	{"wide", 60000, 8, 0.02, 5, F32, COS},
	{"wide", 60000, 8, 0.02, 5, F64, COS},
	{"wide", 40000, 8, 0.05, 20, F64, COS},
	{"wide", 20000, 64, 0.05, 5, F32, COS},
	{"wide", 20000, 64, 0.05, 5, F64, COS},
	{"wide", 3000, 768, 0.1, 4, F32, COS},
	{"blobs", 1000000, 2, 1e-4, 5, F32, COS, 0, -50},
	{"blobs", 1000000, 2, 1e-4, 5, F64, COS, 1e6, -50},
	{"blobs", 300000, 3, 2e-4, 5, F32, COS, 0, -50},
	{"blobs", 300000, 3, 2e-4, 5, F64, COS, 1e6, -50},
	{"round2", 300000, 2, 1e-4, 5, F64, COS, 100, -50},
	{"dups", 300000, 3, 1e-3, 10, F32, COS, 0, -50},
	{"dups", 300000, 3, 1e-3, 10, F64, COS, 1e6, -50},
	{"far", 300000, 2, 1e-4, 5, F64, COS, 100, -50},
	{"blobs", 100000, 8, 1e-3, 5, F64, COS, 1e6, -50},
	/* fewer than 4,096 rows: the CPU sorts and sweeps them instead of building its grid */
	{"blobs", 1000, 2, 0.8, 5},
	{"blobs", 4095, 2, 0.25, 4},
	{"uniform", 1500, 1, 0.05, 3},
	{"close", 3000, 2, 0.3, 5},
	{"speck", 2000, 2, 1e-5, 5},
	{"round2", 2000, 2, 0.5, 5, F64, EUC, 100},
	{"latlon", 3000, 2, 0.002, 4, F64, EUC, 1e5},
	{"blobs", 3000, 3, 0.8, 5, F64, EUC, 1e6},
	{"wide", 2000, 8, 0.05, 5, F32, COS},
	/*
	 * A tiny eps, down to the smallest subnormal: every distinct value a
	 * cell of its own (the maps' steps from differences, the side found by
	 * bisection), duplicates the only neighbours; below 1.5e-154 the
	 * squares underflow and the grid's radius widens (common/dbscan_grid.h)
	 */
	{"dups", 200000, 2, 1e-300, 2, F64, EUC, 0},
	{"dups", 200000, 2, 4.9406564584124654e-324, 2, F64, EUC, 0},
	{"dups", 1000000, 4, 1e-100, 2, F64, EUC, 0},
	{"dups", 1000000, 4, 1e-300, 3, F64, EUC, 0},
	{"uniform", 1000000, 2, 2.2250738585072014e-308, 2, F32},
	{"latlon", 200000, 2, 1e-155, 2, F64, EUC, 1e5},
};

/*
 * The rows of a case: the generated floats, or their double precision
 * version; shifted, moved and scaled to unit length as the case says.
 * Exits when out of memory or when a row has no direction.
 */
static void *
db_rows(const db_case *c)
{
	float	   *xf = h_generate(c->shape, c->n, c->d);
	size_t		count = (size_t) c->n * (size_t) c->d;
	void	   *x = xf;

	if (c->dtype == GC_F64)
	{
		double	   *xd = (double *) malloc(sizeof(double) * (count > 0 ? count : 1));

		if (!xd)
		{
			fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
			exit(2);
		}
		for (size_t i = 0; i < count; i++)
		{
			double		v = c->scale > 0 ? nearbyint((double) xf[i] * c->scale) / c->scale : (double) xf[i];

			xd[i] = v + c->shift + c->offset;
		}
		free(xf);
		x = xd;
	}
	else if (c->shift != 0)
		for (size_t i = 0; i < count; i++)
			xf[i] = (float) ((double) xf[i] + c->shift);
	if (c->metric == GC_METRIC_COSINE)
	{
		int64_t		zero = gc_unit_rows(x, c->dtype, c->n, c->d);

		if (zero >= 0)
		{
			fprintf(stderr, "gpu_vs_cpu: row %lld of %s has no direction\n", (long long) zero, c->shape);
			exit(2);
		}
	}
	return x;
}

/*
 * One data set: the reference once, the table under test with each grid it
 * can use; every answer must equal the reference.  Prints one table row.
 * Returns 1 when all agreed.
 */
static int
db_differential(const db_case *c0)
{
	static const char *grid_names[] = {"auto", "fine", "coarse"};
	static const gc_dbscan_grid grids[] = {GC_DBSCAN_GRID_AUTO, GC_DBSCAN_GRID_FINE, GC_DBSCAN_GRID_COARSE};
	db_case		c = *c0;
	void	   *x;
	db_answer	ref,
				t;
	int64_t		ncore = 0,
				nnoise = 0;
	char		name[64],
				verdict[2400] = "",
				times[128] = "";
	int			ngrids = c.d <= 3 ? 3 : 1;
	int			all_ok = 1;

	c.n = h_rows(c.n, c.d);
	x = db_rows(&c);
	db_alloc(&ref, c.n);
	db_alloc(&t, c.n);
	snprintf(name, sizeof(name), "%s-%dd%s%s%s", c.shape, c.d, c.dtype == GC_F64 ? "-f64" : "",
			 c.metric == GC_METRIC_COSINE ? "-cos" : "", c.offset != 0 ? "-far" : "");

	db_run_t(H.ref, &ref, x, c.dtype, c.metric, c.n, c.d, c.eps, c.min_pts, NULL, NULL);
	for (int64_t i = 0; ref.status == GC_OK && i < c.n; i++)
	{
		ncore += ref.is_core[i];
		nnoise += ref.cluster[i] < 0;
	}
	for (int m = 0; m < ngrids; m++)
	{
		gc_tuning	tuning = gc_tuning_defaults();
		char		one[2400],
					what[160];
		size_t		len = strlen(times);
		int			ok;

		tuning.dbscan_grid = grids[m];
		db_run_t(H.test, &t, x, c.dtype, c.metric, c.n, c.d, c.eps, c.min_pts, &tuning, NULL);
		ok = db_compare(&ref, &t, c.n, one, sizeof(one));
		snprintf(what, sizeof(what), "dbscan %s n=%lld eps=%g min_pts=%d grid %s", name,
				 (long long) c.n, c.eps, c.min_pts, grid_names[m]);
		h_check(ok, what, one);
		snprintf(times + len, sizeof(times) - len, "%s%.2f", m ? " / " : "",
				 H.cpu_only ? t.wall_ms : t.timing.compute_ms);
		if (!ok && all_ok)
		{
			all_ok = 0;
			snprintf(verdict, sizeof(verdict), "%s: %.2300s", grid_names[m], one);
		}
		else if (all_ok)
			snprintf(verdict, sizeof(verdict), "%s", one);
	}
	printf("| %-19s | %8lld | %3d | %9g | %4d | %8lld | %8lld | %8lld | %9.1f | %s | %s |\n",
		   name, (long long) c.n, c.d, c.eps, c.min_pts, (long long) ref.n_clusters,
		   (long long) ncore, (long long) nnoise, ref.wall_ms, times, verdict);
	fflush(stdout);
	db_free(&ref);
	db_free(&t);
	free(x);
	return all_ok;
}

/* The comparison notices a changed answer (one cluster number, one core flag, the count). */
static void
db_self_check(void)
{
	const int64_t n = 2000;
	float	   *x = h_generate("blobs", n, 2);
	db_answer	ref,
				t;
	char		verdict[2400];
	int			noticed = 1;

	db_alloc(&ref, n);
	db_alloc(&t, n);
	db_run(H.ref, &ref, x, n, 2, 1.0, 5, NULL, NULL);
	for (int what = 0; what < 3; what++)
	{
		db_run(H.test, &t, x, n, 2, 1.0, 5, NULL, NULL);
		if (what == 0)
			t.cluster[n / 2] += 1;
		else if (what == 1)
			t.is_core[n - 1] ^= 1;
		else
			t.n_clusters += 1;
		noticed &= !db_compare(&ref, &t, n, verdict, sizeof(verdict));
	}
	h_check(noticed && ref.status == GC_OK, "dbscan comparison notices a changed answer",
			noticed ? ref.error : "a changed cluster number, core flag or count was called identical");
	db_free(&ref);
	db_free(&t);
	free(x);
}

/* ------------------------------------------------------------------ error paths */

/* One call of the cancels in a row (h_cancel_storm): the rows, their type and the parameters. */
typedef struct db_storm
{
	const void *x;
	gc_dtype	t;
	int64_t		n;
	int32_t		d;
	double		eps;
	int			min_pts;
	db_answer  *a;
} db_storm;

static gc_status
db_storm_run(void *ctx, gc_h_cancel *cancel)
{
	db_storm   *s = (db_storm *) ctx;

	db_run_t(H.test, s->a, s->x, s->t, GC_METRIC_EUCLIDEAN, s->n, s->d, s->eps, s->min_pts, NULL, cancel);
	return s->a->status;
}

static void
db_memory_row(const char *check, gc_status got, gc_status want, const char *detail, int64_t before,
			  int64_t after)
{
	char		mem[64];

	printf("| %s | %s | %s | %s |\n", check, got == want ? gc_h_status_name(got) : "UNEXPECTED", detail,
		   h_memory_text(before, after, mem, sizeof(mem)));
	fflush(stdout);
}

/* The free device memory after a call is what it was before (only with a device). */
static void
db_memory_check(const char *what, int64_t before, const char *detail)
{
	int64_t		after;
	char		buf[1600];

	if (H.cpu_only)
		return;
	after = h_free_device_memory();
	snprintf(buf, sizeof(buf), "%s; free device memory %lld -> %lld", detail, (long long) before,
			 (long long) after);
	h_check(before >= 0 && after == before, what, buf);
}

/*
 * Out of device memory: float rows 1.1 times the device's size, or double
 * rows 0.6 times it (the points by row and in cell order are both on the
 * device at one time: 1.2 times its size, counted with 8-byte elements, and
 * only 0.6 times with 4-byte ones), mapped but never touched.
 */
static void
db_out_of_memory(int64_t before, gc_dtype t)
{
	const int32_t bd = 1024;
	const size_t es = gc_dtype_size(t);
	const int64_t bn = (int64_t) ((double) H.device.total_memory * (t == GC_F64 ? 0.6 : 1.1) /
								  (double) (es * bd)) + 1;
	size_t		bytes = es * (size_t) bn * bd;
	void	   *big = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
						   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char		detail[1400];

	if (big == MAP_FAILED)
	{
		printf("| out of memory | skipped | could not map %zu bytes of host memory | |\n", bytes);
		return;
	}
	{
		db_answer	b;
		int64_t		after;
		double		t0 = gc_h_now_ms();

		memset(&b, 0, sizeof(b));
		b.cluster = (int32_t *) mmap(NULL, sizeof(int32_t) * (size_t) bn, PROT_READ | PROT_WRITE,
									 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		b.is_core = (uint8_t *) mmap(NULL, (size_t) bn, PROT_READ | PROT_WRITE,
									 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (b.cluster == MAP_FAILED || b.is_core == MAP_FAILED)
		{
			printf("| out of memory | skipped | could not map the result arrays | |\n");
			munmap(big, bytes);
			return;
		}
		db_run_t(H.test, &b, big, t, GC_METRIC_EUCLIDEAN, bn, bd, 1.0, 5, NULL, NULL);
		after = h_free_device_memory();
		snprintf(detail, sizeof(detail),
				 "%lld x %d %s (%.1f GiB): status %s (%s), bytes_needed %lld, device total %lld, %.1f ms",
				 (long long) bn, bd, t == GC_F64 ? "doubles" : "floats", bytes / 1073741824.0,
				 gc_h_status_name(b.status), b.error, (long long) b.timing.bytes_needed,
				 (long long) H.device.total_memory, gc_h_now_ms() - t0);
		h_check(b.status == GC_ERR_OUT_OF_MEMORY, "dbscan out of device memory", detail);
		h_check(b.timing.bytes_needed > H.device.free_memory &&
				b.timing.bytes_needed >= 2 * (int64_t) bytes, "dbscan bytes needed reported", detail);
		db_memory_check("device memory after out of memory", before, detail);
		db_memory_row(t == GC_F64 ? "out of memory, double rows" : "out of memory", b.status,
					  GC_ERR_OUT_OF_MEMORY, detail, before, after);
		munmap(big, bytes);
		munmap(b.cluster, sizeof(int32_t) * (size_t) bn);
		munmap(b.is_core, (size_t) bn);
	}
}

static void
db_error_paths(void)
{
	/* On the GPU a large set, so that the work has many steps; the CPU asks every few thousand rows. */
	const int64_t n = H.cpu_only ? 200000 : 10000000;
	const int32_t d = 2;
	float	   *x = h_generate("blobs", n, d);
	db_answer	a;
	int64_t		before;
	char		detail[1400];

	db_alloc(&a, n);

	/* Warm-up: every kernel of this path loaded, so free memory is stable. */
	db_run(H.test, &a, x, n, d, 0.05, 5, NULL, NULL);
	h_check(a.status == GC_OK, "dbscan warm-up run", a.error);
	before = h_free_device_memory();

	printf("\n| DBSCAN error path (%lld rows) | status | detail | free device memory before -> after |\n"
		   "|---|---|---|---|\n", (long long) n);
	for (int yes_after = 1; yes_after <= 6; yes_after++)
	{
		gc_h_cancel c = {0, yes_after, 0, 0};
		double		t_end;
		char		what[64];

		db_run(H.test, &a, x, n, d, 0.05, 5, NULL, &c);
		t_end = gc_h_now_ms();
		/* the time from the first yes to the return is printed to be read, not checked */
		snprintf(detail, sizeof(detail),
				 "yes at question %d: status %s (%s), %.2f ms from yes to return, %.1f ms in all",
				 yes_after, gc_h_status_name(a.status), a.error, c.t_yes > 0 ? t_end - c.t_yes : -1.0,
				 a.wall_ms);
		snprintf(what, sizeof(what), "dbscan cancel at question %d", yes_after);
		h_check(a.status == GC_ERR_CANCELLED, what, detail);
		db_memory_check("device memory after cancel", before, detail);
		snprintf(what, sizeof(what), "cancel at question %d", yes_after);
		db_memory_row(what, a.status, GC_ERR_CANCELLED, detail, before, h_free_device_memory());
	}

	/*
	 * One crowded cell: uniform in [0, 1)^10 with eps 1, the side of the
	 * cells, so that many but not all pairs are neighbours and a launch
	 * holds minutes of work; the callback says yes after
	 * 300 ms and the launch must stop early (the time is printed, not checked).
	 */
	{
		const int64_t cn = 200000;	/* not capped: fewer rows would finish first */
		float	   *cx = h_generate("unit", cn, 10);
		db_answer	ca;
		gc_h_cancel c = {0, 0, 0, 0};
		double		t_end;

		db_alloc(&ca, cn);
		c.deadline_ms = gc_h_now_ms() + 300.0;
		db_run(H.test, &ca, cx, cn, 10, 1.0, 5, NULL, &c);
		t_end = gc_h_now_ms();
		snprintf(detail, sizeof(detail),
				 "%lld x 10-D, eps 1: status %s (%s), %.1f ms from yes to return, %.1f ms in all",
				 (long long) cn, gc_h_status_name(ca.status), ca.error,
				 c.t_yes > 0 ? t_end - c.t_yes : -1.0, ca.wall_ms);
		h_check(ca.status == GC_ERR_CANCELLED, "dbscan cancel in one crowded cell", detail);
		db_memory_check("device memory after cancel", before, detail);
		db_memory_row("cancel in a crowded cell", ca.status, GC_ERR_CANCELLED, detail, before,
					  h_free_device_memory());
		db_free(&ca);
		free(cx);
	}

	/* A callback that never says yes is asked, and the run completes. */
	{
		gc_h_cancel c = {0, 0, 0, 0};

		db_run(H.test, &a, x, n, d, 0.05, 5, NULL, &c);
		snprintf(detail, sizeof(detail), "status %s, asked %d times", gc_h_status_name(a.status), c.calls);
		h_check(a.status == GC_OK && c.calls >= 5, "dbscan cancel callback asked during a full run", detail);
		printf("| callback never says yes | %s | %s | |\n", a.status == GC_OK ? "GC_OK" : "UNEXPECTED", detail);
	}

	/* Bad parameters: both back ends check them at the entry. */
	{
		float		y[4] = {0, 0, 1, 1};
		db_answer	b;

		db_alloc(&b, 2);
		db_run(H.test, &b, y, 2, 2, -1.0, 5, NULL, NULL);
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(b.status), b.error);
		h_check(b.status == GC_ERR_INVALID_ARGUMENT, "dbscan negative eps", detail);
		db_memory_row("eps = -1", b.status, GC_ERR_INVALID_ARGUMENT, detail, before, h_free_device_memory());
		db_free(&b);
	}

	/* An error after the upload: a non-finite coordinate (the glue checks it for the CPU). */
	if (H.cpu_only)
		printf("| NaN coordinate | skipped | GPU only | |\n");
	else
	{
		float		saved = x[(n / 2) * d + 1];

		x[(n / 2) * d + 1] = NAN;
		db_run(H.test, &a, x, n, d, 0.05, 5, NULL, NULL);
		x[(n / 2) * d + 1] = saved;
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == GC_ERR_INVALID_ARGUMENT, "dbscan non-finite coordinate", detail);
		db_memory_check("device memory after an error", before, detail);
		db_memory_row("NaN coordinate", a.status, GC_ERR_INVALID_ARGUMENT, detail, before,
					  h_free_device_memory());
	}
	{
		db_storm	st = {x, GC_F32, n, d, 0.05, 5, &a};

		h_cancel_storm("dbscan", "float rows", n, db_storm_run, &st);
	}
	free(x);

	/* Double rows: a cancel, a non-finite coordinate (GPU only, as above). */
	{
		db_case		c = {"latlon", n, 2, 0.0001, 5, GC_F64, GC_METRIC_EUCLIDEAN, 1e5};
		double	   *xd = (double *) db_rows(&c);
		gc_h_cancel cc = {0, 2, 0, 0};

		db_run_t(H.test, &a, xd, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, 0.0001, 5, NULL, &cc);
		snprintf(detail, sizeof(detail), "yes at question 2: status %s (%s), %.1f ms in all",
				 gc_h_status_name(a.status), a.error, a.wall_ms);
		h_check(a.status == GC_ERR_CANCELLED, "dbscan cancel, double rows", detail);
		db_memory_check("device memory after cancel, double rows", before, detail);
		db_memory_row("cancel, double rows", a.status, GC_ERR_CANCELLED, detail, before,
					  h_free_device_memory());
		if (H.cpu_only)
			printf("| NaN coordinate, double rows | skipped | GPU only | |\n");
		else
		{
			double		saved = xd[(n / 3) * 2];

			xd[(n / 3) * 2] = NAN;
			db_run_t(H.test, &a, xd, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, 0.0001, 5, NULL, NULL);
			snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
			h_check(a.status == GC_ERR_INVALID_ARGUMENT, "dbscan non-finite coordinate, double rows", detail);
			db_memory_check("device memory after an error, double rows", before, detail);
			db_memory_row("NaN coordinate, double rows", a.status, GC_ERR_INVALID_ARGUMENT, detail, before,
						  h_free_device_memory());
			xd[(n / 3) * 2] = saved;
		}
		{
			db_storm	st = {xd, GC_F64, n, 2, 0.0001, 5, &a};

			h_cancel_storm("dbscan", "double rows", n, db_storm_run, &st);
		}
		free(xd);
	}
	db_free(&a);

	if (H.cpu_only)
		printf("| out of memory | skipped | GPU only | |\n");
	else
	{
		db_out_of_memory(before, GC_F32);
		db_out_of_memory(before, GC_F64);
	}

	/* The back end still works after all that, with the same answer as the CPU. */
	{
		db_case		c = {"blobs", 100000, 2, 0.3, 5};

		printf("\nafter the error paths:\n");
		db_differential(&c);
	}
}

void
dbscan_checks(void)
{
	printf("\n## DBSCAN: %s against cpu\n\n"
		   "| data | n | d | eps | min_pts | clusters | core | noise | cpu ms | %s %s (auto / fine / coarse grid) | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name(), H.cpu_only ? "wall ms" : "compute ms");
	fflush(stdout);
	for (size_t i = 0; i < sizeof(db_cases) / sizeof(db_cases[0]); i++)
		db_differential(&db_cases[i]);
	db_self_check();
	db_error_paths();
}
