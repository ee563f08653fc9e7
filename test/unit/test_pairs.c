/*
 * test_pairs.c
 *    Unit tests of the CPU pair engine (src/core/pair_engine.c) through
 *    DBSCAN: on the pair engine and on the grid the answers must be equal,
 *    and equal to a brute-force reference that applies the rules to every
 *    pair, on data shaped like embeddings and like the cases users hit:
 *    blobs with noise at 16, 64 and 256 dimensions, cosine rows at 384,
 *    duplicate rows, a far outlier, coordinates of one decimal with a round
 *    eps (pairs at exactly eps), float and double rows, every screen
 *    precision, and the sets of the band (rows on a line at spacing eps,
 *    blobs far apart), where most tiles are skipped.  And the mutation
 *    check: a screen whose error margin is zero must give a wrong answer on
 *    the tie-heavy sets, so that the comparison is known to notice a screen
 *    without a bound.
 *
 *    test/unit/test_pairs [--gpu PATH]: with --gpu, the GPU back end at PATH
 *    (gpuclust_cuda.so) runs every set too, with each of its screens (TF32,
 *    FP32, FP64), and must give the reference's answer bit for bit; its
 *    margin-0 TF32 screen must fail on the tie sets as the CPU's does.  On
 *    the GPU machine: make test/unit/test_pairs && test/unit/test_pairs --gpu
 *    ./gpuclust_cuda.so
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dbscan_ref.h"
#include "metric.h"
#include "pairs.h"
#include "unit.h"
#include "../gpu/gc_backends.h"

/* The GPU back end under test (--gpu), or NULL. */
static const gc_backend_api *gpu_api = NULL;

static uint64_t rng_state = 7;
/* Rows the GPU's margin-0 screen got wrong, over all sets. */
static int64_t gpu_mutation = 0;

static double
urand(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double) (rng_state >> 11) / 9007199254740992.0;
}

static double
nrand(void)
{
	double		u = urand() + 1e-300;
	double		v = urand();

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/*
 * DBSCAN through the CPU back end with the given path (1 pairs, -1 index),
 * screen (0 chosen, else 1 + precision) and margin; returns the rows that
 * differ from the reference (ref_cluster, ref_core), or -1 on an error.
 */
static int64_t
run_path_on(const gc_backend_api *api, const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d,
			double eps, int min_pts, int path, int screen, double margin, const int32_t *ref_cluster,
			const uint8_t *ref_core, gc_timing *timing)
{
	gc_exec		e = unit_exec(NULL, timing);
	gc_dbscan_params p = {sizeof(p), eps, min_pts, m};
	gc_dbscan_result r;
	int64_t		diff = 0;
	gc_status	st;

	unit_tuning.pair_path = path;
	unit_tuning.pair_screen = screen;
	unit_tuning.pair_margin = margin;
	r.cluster = malloc(sizeof(int32_t) * n);
	r.is_core = malloc(n);
	st = api->dbscan(&e, x, t, n, d, &p, &r);
	if (st != GC_OK)
	{
		fprintf(stderr, "dbscan (%s) failed: %s\n", api->name, api->last_error()->message);
		diff = -1;
	}
	else
		for (int64_t i = 0; i < n; i++)
			diff += r.cluster[i] != ref_cluster[i] || r.is_core[i] != ref_core[i];
	free(r.cluster);
	free(r.is_core);
	return diff;
}

static int64_t
run_path(const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d, double eps, int min_pts,
		 int path, int screen, double margin, const int32_t *ref_cluster, const uint8_t *ref_core,
		 gc_timing *timing)
{
	return run_path_on(gc_cpu_api(), x, t, m, n, d, eps, min_pts, path, screen, margin, ref_cluster,
					   ref_core, timing);
}

/* Density peaks through api with the given path and screen; the answer into r's arrays. */
static gc_status
dp_run(const gc_backend_api *api, const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d,
	   gc_dp_kernel kernel, int path, int screen, gc_dpeaks_result *r, gc_timing *timing)
{
	gc_exec		e = unit_exec(NULL, timing);
	gc_dpeaks_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.n_clusters = 8;
	p.derive_dc = 1;
	p.neighbor_rate = 0.02;
	p.kernel = kernel;
	p.seed = 11;
	p.metric = m;
	unit_tuning.pair_path = path;
	unit_tuning.pair_screen = screen;
	unit_tuning.pair_margin = 1.0;
	return api->density_peaks(&e, x, t, n, d, &p, r);
}

static gc_dpeaks_result
dp_alloc(int64_t n)
{
	gc_dpeaks_result r;

	memset(&r, 0, sizeof(r));
	r.cluster = malloc(sizeof(int32_t) * n);
	r.rho = malloc(sizeof(double) * n);
	r.delta = malloc(sizeof(double) * n);
	r.is_center = malloc(n);
	return r;
}

static void
dp_free(gc_dpeaks_result *r)
{
	free(r->cluster);
	free(r->rho);
	free(r->delta);
	free(r->is_center);
}

/* Rows where two answers differ (bit for bit), or -1 when a run failed. */
static int64_t
dp_diff(const gc_dpeaks_result *a, const gc_dpeaks_result *b, int64_t n)
{
	int64_t		diff = 0;

	for (int64_t i = 0; i < n; i++)
		diff += a->cluster[i] != b->cluster[i] || memcmp(&a->rho[i], &b->rho[i], sizeof(double)) ||
			memcmp(&a->delta[i], &b->delta[i], sizeof(double)) || a->is_center[i] != b->is_center[i];
	return diff + (memcmp(&a->dc, &b->dc, sizeof(double)) != 0);
}

/* Density peaks, both kernels: the pair engine (every screen, and the GPU's) against the scans. */
static void
check_dpeaks(const char *name, const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d)
{
	for (int k = 0; k < 2; k++)
	{
		gc_dp_kernel kernel = k ? GC_DP_KERNEL_CUTOFF : GC_DP_KERNEL_GAUSSIAN;
		gc_dpeaks_result ref = dp_alloc(n);
		gc_timing	tm;
		gc_status	st = dp_run(gc_cpu_api(), x, t, m, n, d, kernel, -1, 0, &ref, NULL);

		CHECK(st == GC_OK, "%s: density peaks (scans) failed", name);
		for (int screen = 0; screen <= 3 && st == GC_OK; screen++)
		{
			gc_dpeaks_result r = dp_alloc(n);
			int64_t		diff;

			memset(&tm, 0, sizeof(tm));
			diff = dp_run(gc_cpu_api(), x, t, m, n, d, kernel, 1, screen, &r, &tm) == GC_OK
				? dp_diff(&ref, &r, n) : -1;
			CHECK(diff == 0, "%s: density peaks (%s) on the pair engine, screen %d: %lld rows differ", name,
				  k ? "cutoff" : "gaussian", screen, (long long) diff);
			if (screen == 0)
				printf("  %-28s dpeaks %-8s centers=%lld exact_pairs=%lld\n", name, k ? "cutoff" : "gaussian",
					   (long long) r.n_centers, (long long) tm.pair_exact);
			dp_free(&r);
			if (gpu_api && screen <= 3)
			{
				r = dp_alloc(n);
				diff = dp_run(gpu_api, x, t, m, n, d, kernel, screen == 0 ? 0 : 1, screen, &r, NULL) == GC_OK
					? dp_diff(&ref, &r, n) : -1;
				CHECK(diff == 0, "%s: GPU density peaks (%s), screen %d: %lld rows differ", name,
					  k ? "cutoff" : "gaussian", screen, (long long) diff);
				dp_free(&r);
			}
		}
		dp_free(&ref);
	}
}

/* Both paths and every screen against the reference; returns the mismatches of a margin-0 FP32 screen. */
static int64_t
check_set(const char *name, const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d,
		  double eps, int min_pts)
{
	int32_t    *rc = malloc(sizeof(int32_t) * n);
	uint8_t    *rk = malloc(n);
	gc_timing	tm;
	int64_t		diff;
	int			nclusters = -1;
	int64_t		ncore = 0;

	reference_t(x, t, m, n, d, eps, min_pts, rc, rk);
	check_dpeaks(name, x, t, m, n, d);
	for (int64_t i = 0; i < n; i++)
	{
		nclusters = rc[i] > nclusters ? rc[i] : nclusters;
		ncore += rk[i];
	}
	diff = run_path(x, t, m, n, d, eps, min_pts, -1, 0, 1.0, rc, rk, NULL);
	CHECK(diff == 0, "%s: the grid differs from the reference in %lld rows", name, (long long) diff);
	for (int screen = 0; screen <= 3; screen++)
	{
		memset(&tm, 0, sizeof(tm));
		diff = run_path(x, t, m, n, d, eps, min_pts, 1, screen, 1.0, rc, rk, &tm);
		CHECK(diff == 0, "%s: the pair engine (screen %d) differs from the reference in %lld rows",
			  name, screen, (long long) diff);
		CHECK(tm.path == GC_PATH_PAIRS, "%s: timing.path %d", name, tm.path);
		if (screen == 0)
			printf("  %-28s n=%lld d=%d clusters=%d core=%lld screen=%s exact_pairs=%lld\n", name,
				   (long long) n, d, nclusters + 1, (long long) ncore,
				   gc_pair_precision_names[tm.pair_screen], (long long) tm.pair_exact);
	}
	if (gpu_api)
	{
		for (int screen = 0; screen <= 3; screen++)
		{
			memset(&tm, 0, sizeof(tm));
			diff = run_path_on(gpu_api, x, t, m, n, d, eps, min_pts, screen == 0 ? 0 : 1, screen, 1.0, rc, rk,
							   &tm);
			CHECK(diff == 0, "%s: the GPU (screen %d) differs from the reference in %lld rows", name, screen,
				  (long long) diff);
			if (screen == 0)
				printf("  %-28s GPU: path=%s screen=%s exact_pairs=%lld\n", name,
					   tm.path == GC_PATH_PAIRS ? "pairs" : "index", gc_pair_precision_names[tm.pair_screen % 3],
					   (long long) tm.pair_exact);
		}
		gpu_mutation += run_path_on(gpu_api, x, t, m, n, d, eps, min_pts, 1, 1 + GC_PAIR_TF32, 0.0, rc, rk,
									NULL);
	}
	diff = run_path(x, t, m, n, d, eps, min_pts, 1, 1 + GC_PAIR_FP32, 0.0, rc, rk, NULL);
	free(rc);
	free(rk);
	return diff;
}

/* k blobs of sd 1 in a box of side box, and a share of uniform noise. */
static void *
blobs(gc_dtype t, int64_t n, int32_t d, int k, double box, double noise)
{
	double	   *c = malloc(sizeof(double) * k * d);
	void	   *x = malloc((t == GC_F64 ? 8 : 4) * (size_t) n * d);

	for (int64_t j = 0; j < (int64_t) k * d; j++)
		c[j] = urand() * box;
	for (int64_t i = 0; i < n; i++)
	{
		int			b = (int) (urand() * k);
		int			isnoise = urand() < noise;

		for (int32_t q = 0; q < d; q++)
		{
			double		v = isnoise ? urand() * box : c[b * d + q] + nrand();

			if (t == GC_F64)
				((double *) x)[i * d + q] = v;
			else
				((float *) x)[i * d + q] = (float) v;
		}
	}
	free(c);
	return x;
}

/* The median distance to the k-th nearest row (the eps users pick from a k-distance plot). */
static double
kth_median(const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d, int k)
{
	double	   *kd = malloc(sizeof(double) * n);
	double	   *row = malloc(sizeof(double) * n);
	double		med;

	for (int64_t i = 0; i < n; i++)
	{
		for (int64_t j = 0; j < n; j++)
			row[j] = ref_dist2(x, t, d, i, j);
		/* partial selection of the k-th smallest */
		for (int a = 0; a <= k; a++)
			for (int64_t j = a + 1; j < n; j++)
				if (row[j] < row[a])
				{
					double		tmp = row[a];

					row[a] = row[j];
					row[j] = tmp;
				}
		kd[i] = gc_metric_distance(m, row[k]);
	}
	for (int64_t i = 1; i < n; i++)
		for (int64_t j = i; j > 0 && kd[j] < kd[j - 1]; j--)
		{
			double		tmp = kd[j];

			kd[j] = kd[j - 1];
			kd[j - 1] = tmp;
		}
	med = kd[n / 2];
	free(kd);
	free(row);
	return med;
}

/* Rows of one decimal on a lattice in the first two features, far from the origin in all d. */
static void *
lattice(gc_dtype t, int64_t n, int32_t d)
{
	void	   *x = malloc((t == GC_F64 ? 8 : 4) * (size_t) n * d);
	int64_t		side = (int64_t) sqrt((double) n) + 1;

	for (int64_t i = 0; i < n; i++)
		for (int32_t q = 0; q < d; q++)
		{
			double		v = q == 0 ? 1000.0 + 0.1 * (double) (i % side)
				: q == 1 ? 2000.0 + 0.1 * (double) (i / side) : 0.1 * (double) ((q * 7) % 13);

			if (t == GC_F64)
				((double *) x)[i * d + q] = v;
			else
				((float *) x)[i * d + q] = (float) v;
		}
	return x;
}

/* Rows along a line at spacing 0.1 in the first feature, of one decimal, far from the origin. */
static void *
line(gc_dtype t, int64_t n, int32_t d)
{
	void	   *x = malloc((t == GC_F64 ? 8 : 4) * (size_t) n * d);

	for (int64_t i = 0; i < n; i++)
		for (int32_t q = 0; q < d; q++)
		{
			double		v = q == 0 ? 1000.0 + 0.1 * (double) i : q == 1 ? 2000.0 : 0.1 * (double) ((q * 7) % 13);

			if (t == GC_F64)
				((double *) x)[i * d + q] = v;
			else
				((float *) x)[i * d + q] = (float) v;
		}
	return x;
}

int
main(int argc, char **argv)
{
	int64_t		mut = 0;

	unit_threads = 2;
	if (argc == 3 && strcmp(argv[1], "--gpu") == 0)
	{
		gc_device_info info;
		char		why[1100];

		gpu_api = gc_h_open_gpu(argv[2], &info, why, sizeof(why));
		if (!gpu_api)
		{
			fprintf(stderr, "%s\n", why);
			return 1;
		}
		printf("GPU: %s\n", info.name);
		unit_threads = 0;
	}
	for (int f = 0; f < 2; f++)
	{
		gc_dtype	t = f ? GC_F64 : GC_F32;
		const char *tn = f ? "double" : "float";
		char		name[64];
		void	   *x;
		double		eps;

		/* blobs with 10 % noise at 8 (forced), 16, 64, 256 and 768 features, eps the median 10th-neighbour distance */
		for (int di = 0; di < 5; di++)
		{
			int32_t		d = di == 0 ? 8 : di == 1 ? 16 : di == 2 ? 64 : di == 3 ? 256 : 768;
			int64_t		n = d >= 768 ? 800 : 1500;

			x = blobs(t, n, d, 12, 20.0, 0.1);
			eps = kth_median(x, t, GC_METRIC_EUCLIDEAN, n, d, 10);
			snprintf(name, sizeof(name), "blobs %s d=%d", tn, d);
			check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, eps, 10);
			/* an eps that covers most pairs: more pairs within eps than the core pass keeps */
			if (d == 16)
			{
				snprintf(name, sizeof(name), "wide eps %s d=%d", tn, d);
				check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, eps * 8, 10);
			}
			/* a far outlier, and duplicates of the first rows */
			if (t == GC_F64)
			{
				((double *) x)[(n - 1) * d] = 1e12;
				memcpy((double *) x + 100 * d, x, sizeof(double) * 100 * d);
			}
			else
			{
				((float *) x)[(n - 1) * d] = 1e12f;
				memcpy((float *) x + 100 * d, x, sizeof(float) * 100 * d);
			}
			snprintf(name, sizeof(name), "outlier+dups %s d=%d", tn, d);
			check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, eps, 10);
			free(x);
		}

		/* cosine: unit rows at 384 features, topics as directions */
		{
			int64_t		n = 1200;
			int32_t		d = 384;

			x = blobs(t, n, d, 8, 3.0, 0.1);
			CHECK(gc_unit_rows(x, t, n, d) < 0, "a zero row");
			eps = kth_median(x, t, GC_METRIC_COSINE, n, d, 10);
			snprintf(name, sizeof(name), "cosine %s d=%d", tn, d);
			check_set(name, x, t, GC_METRIC_COSINE, n, d, eps, 10);
			free(x);
		}

		/* one decimal, eps 0.1 and 0.2: pairs at exactly eps; the mutation must fail here */
		for (int e = 1; e <= 2; e++)
		{
			int64_t		n = 1600;
			int32_t		d = 16;
			int64_t		m;

			x = lattice(t, n, d);
			snprintf(name, sizeof(name), "ties %s eps=0.%d", tn, e);
			m = check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, 0.1 * e, e == 1 ? 5 : 11);
			printf("  %-28s margin 0: %lld rows differ\n", name, (long long) m);
			mut += m > 0 ? m : 0;
			free(x);
		}

		/*
		 * the band (pair_engine.c, gc_pe_order and gc_pe_run_band: rows in
		 * the order of a principal direction, each row block stopping at the
		 * column blocks too far along it): rows on a line at spacing eps, so
		 * that pairs at about eps straddle every block's edge and most column
		 * blocks are skipped; and blobs far apart, 10 % noise
		 */
		{
			int64_t		n = 3000;
			int32_t		d = 16;
			int64_t		m;

			x = line(t, n, d);
			snprintf(name, sizeof(name), "band line %s", tn);
			m = check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, 0.1, 3);
			printf("  %-28s margin 0: %lld rows differ\n", name, (long long) m);
			mut += m > 0 ? m : 0;
			free(x);
			n = 4000;
			d = 64;
			x = blobs(t, n, d, 12, 100.0, 0.1);
			eps = kth_median(x, t, GC_METRIC_EUCLIDEAN, n, d, 10);
			snprintf(name, sizeof(name), "band blobs %s d=%d", tn, d);
			check_set(name, x, t, GC_METRIC_EUCLIDEAN, n, d, eps, 10);
			free(x);
		}
	}
	CHECK(mut > 0, "a screen without its error margin gave the right answer on every tie set: "
		  "the tests would not notice a missing bound");
	if (gpu_api)
	{
		printf("  GPU margin 0 (TF32): %lld rows differ\n", (long long) gpu_mutation);
		CHECK(gpu_mutation > 0, "the GPU's TF32 screen without its margin gave the right answer everywhere");
	}
	UNIT_DONE();
}
