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
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
dp_run(const gc_backend_api *api, dp_answer *a, const float *x, int64_t n, int32_t d,
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
	a->status = api->density_peaks(&e, x, GC_F32, n, d, p, &a->r);
	a->wall_ms = gc_h_now_ms() - t0;
	if (a->status == GC_OK)
		a->error[0] = '\0';
	else
		gc_h_error_text(api, a->error, sizeof(a->error));
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
} dp_case;

static gc_dpeaks_params
dp_params(const dp_case *c)
{
	gc_dpeaks_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.n_clusters = c->n_clusters;
	p.dc = c->dc;
	p.derive_dc = c->dc == 0.0;
	p.neighbor_rate = c->rate;
	p.kernel = c->kernel;
	p.rho_min = c->rho_min;
	p.delta_min = c->delta_min;
	p.seed = GC_DP_DEFAULT_SEED;
	return p;
}

static int
same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof(double)) == 0;
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
};

#undef G
#undef C

static void
dp_differential(const dp_case *c0)
{
	dp_case		c = *c0;
	gc_dpeaks_params p;
	float	   *x;
	dp_answer	ref,
				t;
	char		verdict[2400],
				what[160],
				clusters[64];
	int			ok;

	c.n = h_rows(c.n, c.d);
	if (c.n_clusters > c.n)
		c.n_clusters = (int32_t) c.n;
	p = dp_params(&c);
	x = h_generate(c.shape, c.n, c.d);
	dp_alloc(&ref, c.n);
	dp_alloc(&t, c.n);
	dp_run(H.ref, &ref, x, c.n, c.d, &p, NULL);
	dp_run(H.test, &t, x, c.n, c.d, &p, NULL);
	ok = dp_compare(&ref, &t, c.n, verdict, sizeof(verdict));
	snprintf(what, sizeof(what), "dpeaks %s-%dd n=%lld %s rate=%g dc=%g", c.shape, c.d, (long long) c.n,
			 dp_kernel_name(c.kernel), c.rate, c.dc);
	h_check(ok, what, verdict);
	if (c.n_clusters > 0)
		snprintf(clusters, sizeof(clusters), "%d", c.n_clusters);
	else
		snprintf(clusters, sizeof(clusters), "rho>=%g, delta>=%g", c.rho_min, c.delta_min);
	printf("| %-8s | %8lld | %3d | %-8s | %-6s | %-6g | %-9s | %.9g | %lld | %9.1f | %8.1f | %s |\n",
		   c.shape, (long long) c.n, c.d, dp_kernel_name(c.kernel), dp_method_name(ref.status, ref.r.dc_method),
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
}

/* Cancel and a bad parameter, with the device memory before and after. */
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
	dp_free(&a);
	free(x);
}

void
dpeaks_checks(void)
{
	printf("\n## density peaks: %s against cpu\n\n"
		   "| data | n | d | kernel | dc | neighbor_rate | clusters | dc (cpu) | centres | cpu ms | %s ms | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name());
	fflush(stdout);
	for (size_t i = 0; i < sizeof(dp_cases) / sizeof(dp_cases[0]); i++)
		dp_differential(&dp_cases[i]);
	dp_self_check();
	dp_error_paths();
}
