/*
 * test_dbscan.c
 *    Unit tests of the CPU DBSCAN, called through the CPU back end's table
 *    (gc_cpu_api), against a brute-force reference that applies the rules
 *    literally (all pairs), on hand-made and random sets, in single and
 *    double precision and with the Euclidean and cosine metrics; and of the
 *    table itself: devices, empty input, the parameter checks and their
 *    errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dbscan_grid.h"
#include "dbscan_ref.h"
#include "metric.h"
#include "unit.h"

/* DBSCAN through the CPU back end's table, rows of element type t, with an optional cancel callback. */
static gc_status
run_dbscan_t(const void *x, gc_dtype t, int64_t n, int32_t d, const gc_dbscan_params *p,
			 gc_dbscan_result *r, gc_cancel_fn cancel)
{
	gc_exec		e = unit_exec(cancel, NULL);

	return gc_cpu_api()->dbscan(&e, x, t, n, d, p, r);
}

/* The same for float rows. */
static gc_status
run_dbscan(const float *x, int64_t n, int32_t d, const gc_dbscan_params *p,
		   gc_dbscan_result *r, gc_cancel_fn cancel)
{
	return run_dbscan_t(x, GC_F32, n, d, p, r, cancel);
}

static uint64_t rng_state = 42;

/* Uniform in [0, 1) from a xorshift generator, so the data do not depend on libc. */
static double
urand(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double) (rng_state >> 11) / 9007199254740992.0;
}

/*
 * Runs both on rows x of element type t with metric m and compares; returns
 * 1 when identical.  ref_clusters (may be NULL) receives the reference's
 * number of clusters.
 */
static int
compare_t(const char *name, const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d,
		  double eps, int min_pts, int64_t *ref_clusters)
{
	int32_t    *c1 = malloc(sizeof(int32_t) * n), *c2 = malloc(sizeof(int32_t) * n);
	uint8_t    *k1 = malloc(n), *k2 = malloc(n);
	gc_dbscan_params p = {sizeof(gc_dbscan_params), eps, min_pts, m};
	gc_dbscan_result r = {c1, k1, 0};
	int			ok = 1;
	int32_t		nref = 0;

	reference_t(x, t, m, n, d, eps, min_pts, c2, k2);
	for (int64_t i = 0; i < n; i++)
		if (c2[i] + 1 > nref)
			nref = c2[i] + 1;
	if (ref_clusters)
		*ref_clusters = nref;
	/*
	 * the same answer whatever the number of threads, and with the grid
	 * where few rows would be swept (the first runs, the sweep's and the
	 * grid's, on one thread)
	 */
	for (int th = -1; th < UNIT_THREAD_COUNTS && ok; th++)
	{
		gc_status	st;
		int64_t		bad = -1;

		unit_threads = unit_thread_counts[th < 0 ? 0 : th];
		unit_dbscan_sweep = th < 0 ? -1 : 0;
		st = run_dbscan_t(x, t, n, d, &p, &r, NULL);
		ok = st == GC_OK && r.n_clusters == nref;
		for (int64_t i = 0; ok && i < n; i++)
			if (c1[i] != c2[i] || k1[i] != k2[i])
			{
				ok = 0;
				bad = i;
			}
		CHECK(ok, "%s (%s, %s, n=%lld d=%d eps=%g min_pts=%d, %d threads%s): status %d %s, "
			  "%lld clusters against %d, first difference at %lld",
			  name, t == GC_F64 ? "double" : "float", m == GC_METRIC_COSINE ? "cosine" : "euclidean",
			  (long long) n, d, eps, min_pts, unit_threads, th < 0 ? ", grid" : "", st, unit_error(),
			  (long long) r.n_clusters, nref, (long long) bad);
	}
	unit_threads = 0;
	unit_dbscan_sweep = 0;
	free(c1);
	free(c2);
	free(k1);
	free(k2);
	return ok;
}

/* compare_t for float rows, Euclidean. */
static int
compare(const char *name, const float *x, int64_t n, int32_t d, double eps, int min_pts)
{
	return compare_t(name, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, eps, min_pts, NULL);
}

/* n points: blobs of the given spread, 20% uniform noise, a fraction dup of repeated rows. */
static float *
random_set(int64_t n, int32_t d, int blobs, double spread, double dup)
{
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *centre = malloc(sizeof(float) * blobs * d);

	for (int b = 0; b < blobs * d; b++)
		centre[b] = (float) urand();
	for (int64_t i = 0; i < n; i++)
	{
		if (i > 0 && urand() < dup)
		{
			memcpy(x + i * d, x + (int64_t) (urand() * i) * d, sizeof(float) * d);
			continue;
		}
		if (blobs == 0 || urand() < 0.2)
			for (int k = 0; k < d; k++)
				x[i * d + k] = (float) urand();
		else
		{
			int			b = (int) (urand() * blobs);

			for (int k = 0; k < d; k++)
				x[i * d + k] = (float) (centre[b * d + k] + spread * (urand() - 0.5));
		}
	}
	free(centre);
	return x;
}

static int	cancel_calls = 0;

/* A cancel callback that answers yes from its third call on. */
static int
cancel_after_two(void *arg)
{
	return ++cancel_calls > 2;
}

/* The table itself: its identity, the one device, empty input, timing, a cleared error. */
static void
test_api(void)
{
	const gc_backend_api *api = gc_cpu_api();
	gc_device_info info;
	int32_t		count = -1;
	float		x[] = {0, 0.5f, 3};
	int32_t		c[3];
	uint8_t		k[3];
	gc_dbscan_params p = {sizeof(p), 1.0, 2};
	gc_dbscan_result r = {c, k, 7};
	gc_timing	t;
	gc_exec		e = unit_exec(NULL, &t);

	CHECK(api->abi_version == GC_ABI_VERSION && api->struct_size == sizeof(gc_backend_api) &&
		  strcmp(api->name, "cpu") == 0, "table identity: %s", api->name);
	CHECK(api->device_count(&count) == GC_OK && count == 1, "device count %d", count);
	CHECK(api->device_info(0, &info) == GC_OK && strcmp(info.name, "CPU") == 0 &&
		  info.device_id == 0 && info.total_memory >= 0, "device info: %s", info.name);
	CHECK(api->device_info(1, &info) == GC_ERR_NO_DEVICE && unit_error()[0] != '\0',
		  "device 1 does not exist");
	api->release();

	/* no rows: nothing to do, no error, no cluster */
	CHECK(api->dbscan(&e, NULL, GC_F32, 0, 2, &p, &r) == GC_OK && r.n_clusters == 0, "n = 0");
	CHECK(unit_error()[0] == '\0', "n = 0 leaves no error: %s", unit_error());

	/* a failure, then a success clears the error and fills the timing */
	p.eps = 0;
	CHECK(api->dbscan(&e, x, GC_F32, 3, 1, &p, &r) == GC_ERR_INVALID_ARGUMENT, "eps 0");
	p.eps = 1;
	memset(&t, 0xff, sizeof(t));
	CHECK(api->dbscan(&e, x, GC_F32, 3, 1, &p, &r) == GC_OK && r.n_clusters == 1 &&
		  c[0] == 0 && c[1] == 0 && c[2] == -1, "small set through the table");
	CHECK(unit_error()[0] == '\0' && api->last_error()->detail[0] == '\0' &&
		  api->last_error()->hint[0] == '\0', "success clears the error: %s", unit_error());
	CHECK(t.compute_ms >= 0 && t.bytes_needed == 0 && t.to_device_ms == 0,
		  "timing: compute %g ms, bytes %lld", t.compute_ms, (long long) t.bytes_needed);

	/* exec NULL: defaults, no timing, never cancelled */
	CHECK(api->dbscan(NULL, x, GC_F32, 3, 1, &p, &r) == GC_OK && r.n_clusters == 1, "exec NULL");
}

/* The checks of common/checks.h reject bad parameters with the expected status and words. */
static void
test_checks(void)
{
	const gc_backend_api *api = gc_cpu_api();
	float		x[] = {0, 1, 2, 3};
	int32_t		c[4];
	uint8_t		k[4];
	gc_dbscan_params p = {sizeof(p), -1.0, 2};
	gc_dbscan_result r = {c, k, 0};
	gc_exec		e = unit_exec(NULL, NULL);
	gc_tuning	tuning = gc_tuning_defaults();

	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INVALID_ARGUMENT &&
		  strcmp(unit_error(), "eps must be positive and finite") == 0 &&
		  strcmp(api->last_error()->detail, "eps is -1.") == 0 &&
		  api->last_error()->hint[0] != '\0', "eps -1: %s", unit_error());
	p.eps = INFINITY;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INVALID_ARGUMENT, "eps infinite");
	p.eps = 1.0;
	p.min_pts = -3;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INVALID_ARGUMENT &&
		  strcmp(unit_error(), "min_pts must be at least 1") == 0, "min_pts -3: %s", unit_error());
	p.min_pts = 2;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 0, &p, &r) == GC_ERR_INVALID_ARGUMENT &&
		  strcmp(unit_error(), "DBSCAN needs at least one feature per row") == 0,
		  "d 0: %s", unit_error());
	/* the bugs of a caller: other versions of the structs, missing buffers */
	p.struct_size = sizeof(p) - 4;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INTERNAL, "params struct_size");
	p.struct_size = sizeof(p);
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, NULL, &r) == GC_ERR_INTERNAL, "params NULL");
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, NULL) == GC_ERR_INTERNAL, "result NULL");
	CHECK(api->dbscan(&e, NULL, GC_F32, 4, 1, &p, &r) == GC_ERR_INTERNAL, "x NULL");
	e.struct_size = sizeof(e) + 8;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INTERNAL, "exec struct_size");
	e.struct_size = sizeof(e);
	tuning.struct_size = 4;
	e.tuning = &tuning;
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_ERR_INTERNAL, "tuning struct_size");
	tuning.struct_size = sizeof(tuning);
	CHECK(api->dbscan(&e, x, GC_F32, 4, 1, &p, &r) == GC_OK && r.n_clusters == 1, "tuning given");
	/* element types and metrics: the two of each are taken, anything else is a bug of the caller */
	{
		double		xd[] = {0, 1, 2, 3};

		CHECK(api->dbscan(&e, xd, GC_F64, 4, 1, &p, &r) == GC_OK && r.n_clusters == 1 &&
			  c[0] == 0 && c[3] == 0, "double rows: %s", unit_error());
		CHECK(api->dbscan(&e, xd, (gc_dtype) 7, 4, 1, &p, &r) == GC_ERR_INTERNAL, "element type 7");
		p.metric = (gc_metric) 5;
		CHECK(api->dbscan(&e, xd, GC_F64, 4, 1, &p, &r) == GC_ERR_INTERNAL, "metric 5");
		p.metric = GC_METRIC_COSINE;
		xd[0] = xd[1] = xd[2] = xd[3] = 1.0;	/* four unit rows of one feature */
		CHECK(api->dbscan(&e, xd, GC_F64, 4, 1, &p, &r) == GC_OK && r.n_clusters == 1,
			  "cosine: %s", unit_error());
	}
}

/* Hand-made sets: chains, border points, min_pts 1, bad parameters. */
static void
test_hand_made(void)
{
	/* Hand-made: two clusters sharing a border point at x = 2. */
	{
		float		x[] = {0, 1, 3, 4, 2, 10};
		int32_t		c[6];
		uint8_t		k[6];
		gc_dbscan_params p = {sizeof(p), 1.0, 2};
		gc_dbscan_result r = {c, k, 0};

		CHECK(run_dbscan(x, 6, 1, &p, &r, NULL) == GC_OK, "status");
		/* all of 0,1 core; 3,4 core; 2 is within 1 of 1 and 3 -> core with min_pts 2 */
		CHECK(c[0] == 0 && c[1] == 0 && c[4] == 0 && c[2] == 0 && c[3] == 0, "chain joins");
		CHECK(c[5] == -1 && k[5] == 0, "isolated point is noise");
		p.min_pts = 3;
		CHECK(run_dbscan(x, 6, 1, &p, &r, NULL) == GC_OK, "status");
		/* neighbours: 0:{0,1} 1:{0,1,2} 2:{1,2,3} 3:{2,3,4} 4:{3,4} */
		CHECK(k[0] == 0 && k[1] == 1 && k[4] == 1 && k[2] == 1 && k[3] == 0,
			  "core flags with min_pts 3");
		CHECK(r.n_clusters == 1 && c[0] == 0 && c[3] == 0, "border points join");
	}
	/* Border point reachable from two clusters takes the lowest-row core. */
	{
		float		x[] = {10, 10.5, 11, 12, 12.5, 13, 11.9};
		int32_t		c[7];
		uint8_t		k[7];
		gc_dbscan_params p = {sizeof(p), 1.0, 3};
		gc_dbscan_result r = {c, k, 0};

		CHECK(run_dbscan(x, 7, 1, &p, &r, NULL) == GC_OK, "status");
		compare("two-cluster border", x, 7, 1, 1.0, 3);
	}
	/* Every point alone with min_pts 1 is its own cluster, in row order. */
	{
		float		x[] = {5, 0, 10, 0, 5};
		int32_t		c[5];
		uint8_t		k[5];
		gc_dbscan_params p = {sizeof(p), 0.5, 1};
		gc_dbscan_result r = {c, k, 0};

		CHECK(run_dbscan(x, 5, 1, &p, &r, NULL) == GC_OK, "status");
		CHECK(c[0] == 0 && c[1] == 1 && c[2] == 2 && c[3] == 1 && c[4] == 0 && r.n_clusters == 3,
			  "min_pts 1 numbering: %d %d %d %d %d", c[0], c[1], c[2], c[3], c[4]);
	}
	/* Bad parameters. */
	{
		float		x[] = {0};
		int32_t		c[1];
		uint8_t		k[1];
		gc_dbscan_params p = {sizeof(p), -1.0, 2};
		gc_dbscan_result r = {c, k, 0};

		CHECK(run_dbscan(x, 1, 1, &p, &r, NULL) == GC_ERR_INVALID_ARGUMENT, "eps < 0");
		p.eps = NAN;
		CHECK(run_dbscan(x, 1, 1, &p, &r, NULL) == GC_ERR_INVALID_ARGUMENT, "eps NaN");
		p.eps = 1;
		p.min_pts = 0;
		CHECK(run_dbscan(x, 1, 1, &p, &r, NULL) == GC_ERR_INVALID_ARGUMENT, "min_pts 0");
	}
}

/* Random sets against the brute-force reference: many dimensions, sparse cells, huge ranges. */
static void
test_random_sets(void)
{
	/* Random sets against the brute-force reference. */
	{
		int32_t		dims[] = {1, 2, 3, 4, 8, 64};
		double		epss[] = {0.01, 0.05, 0.2, 2.0};
		int			mins[] = {1, 2, 5, 20};

		for (int a = 0; a < 6; a++)
			for (int b = 0; b < 4; b++)
				for (int m = 0; m < 4; m++)
				{
					int64_t		n = 600;
					double		scale = dims[a] > 3 ? sqrt(dims[a] / 2.0) : 1.0;
					float	   *x = random_set(n, dims[a], 5, 0.1, (m % 2) ? 0.3 : 0.0);

					compare("random", x, n, dims[a], epss[b] * scale, mins[m]);
					free(x);
				}
	}
	/* Larger sets with small eps: many sparse cells, long neighbour rows. */
	{
		int32_t		dims[] = {1, 2, 3};

		for (int a = 0; a < 3; a++)
		{
			int64_t		n = 4000;
			float	   *x = random_set(n, dims[a], 8, 0.05, 0.1);

			compare("larger, small eps", x, n, dims[a], 0.004, 3);
			compare("larger, medium eps", x, n, dims[a], 0.02, 6);
			free(x);
		}
	}
	/* Huge coordinates next to a tiny eps: the grid must not overflow. */
	{
		int64_t		n = 400;
		float	   *x = random_set(n, 2, 3, 0.001, 0.2);

		x[0] = 1e30f;
		x[1] = -1e30f;
		compare("huge range", x, n, 2, 1e-4, 3);
		compare("huge range, big eps", x, n, 2, 1e29, 3);
		free(x);
	}
}

/*
 * Sets of fewer rows than the sweep's limit (4,096) against the reference:
 * ties and both zeros along the sweep's dimension, a line along it and one
 * across it (the sweep declines: every pair would be compared), pairs at
 * exactly eps with round coordinates, double rows whose differences
 * overflow, one to seven dimensions, and the sizes on either side of the
 * limit.  compare_t also runs each with the grid alone.
 */
static void
test_sweep(void)
{
	/* two decimals: about two rows share each value of either coordinate */
	{
		int64_t		n = 2000;
		float	   *x = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n * 2; i++)
			x[i] = (float) (floor(urand() * 1000.0) / 100.0);
		compare("sweep, ties", x, n, 2, 0.03, 3);
		compare("sweep, ties, eps 0.05", x, n, 2, 0.05, 2);
		free(x);
	}
	/* -0 and +0 among the values of the sweep's dimension, rows 0.001 apart across it */
	{
		int64_t		n = 300;
		float	   *x = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n; i++)
		{
			x[2 * i] = i % 10 ? (float) i * 0.01f : (i % 20 ? 0.0f : -0.0f);
			x[2 * i + 1] = i % 10 ? 0.0f : (float) i * 0.001f;
		}
		compare("sweep, signed zeros", x, n, 2, 0.015, 2);
		compare("sweep, signed zeros, min_pts 3", x, n, 2, 0.015, 3);
		free(x);
	}
	/*
	 * a line along the sweep's dimension; the same line across it, two far
	 * rows making the other dimension the widest (the sweep declines: every
	 * pair would be compared)
	 */
	for (int k = 0; k < 2; k++)
	{
		int64_t		n = 1500;
		float	   *x = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n; i++)
		{
			x[2 * i + k] = (float) (i / 3) * 0.01f;
			x[2 * i + 1 - k] = (float) (i % 7 == 0) * 0.001f;
		}
		if (k)
		{
			x[0] = -100.0f;
			x[2] = 100.0f;
		}
		compare(k ? "sweep, line across" : "sweep, line along", x, n, 2, 0.01, 4);
		free(x);
	}
	/* a lattice of step 0.05 in float, 400 x 4, with eps 0.05: pairs at eps, decided by the rounding */
	{
		int64_t		n = 400 * 4;
		float	   *x = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n; i++)
		{
			x[2 * i] = (float) (i % 400) * 0.05f;
			x[2 * i + 1] = (float) (i / 400) * 0.05f;
		}
		compare("sweep, lattice at eps", x, n, 2, 0.05, 5);
		compare("sweep, lattice at eps, min_pts 4", x, n, 2, 0.05, 4);
		free(x);
	}
	/* double rows at +-1e308 beside small ones: differences along the sweep overflow */
	{
		int64_t		n = 500;
		double	   *x = malloc(sizeof(double) * n * 2);

		for (int64_t i = 0; i < n * 2; i++)
			x[i] = urand();
		for (int64_t i = 0; i < 20; i++)
		{
			x[2 * i] = i % 2 ? 1e308 : -1e308;
			x[2 * i + 1] = (double) (i / 4);
		}
		compare_t("sweep, double, +-1e308", x, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, 0.05, 3, NULL);
		free(x);
	}
	/* one to seven dimensions, and the sizes on either side of the limit */
	{
		int32_t		dims[] = {1, 2, 3, 5, 7};
		int64_t		sizes[] = {1, 2, 4095, 4096};

		for (int a = 0; a < 5; a++)
		{
			float	   *x = random_set(1200, dims[a], 6, 0.05, 0.1);

			compare("sweep, dimensions", x, 1200, dims[a], 0.004 * sqrt((double) dims[a]), 3);
			free(x);
		}
		for (int b = 0; b < 4; b++)
		{
			float	   *x = random_set(sizes[b], 2, 6, 0.05, 0.1);

			compare("sweep, size", x, sizes[b], 2, 0.002, 4);
			free(x);
		}
	}
}

/*
 * Skewed sets against the brute-force reference: far outliers (the grid
 * numbers its cells through maps), clusters at very different scales,
 * features of which the first ones hardly vary (the grid picks others),
 * duplicates and round coordinates.
 */
static void
test_skewed_sets(void)
{
	/* a dense square of side 1e-3 with one point at (1e6, 1e6), and one at -1e6 */
	{
		int64_t		n = 3000;
		float	   *x = random_set(n, 2, 6, 0.2, 0.1);

		for (int64_t i = 0; i < n * 2; i++)
			x[i] *= 1e-3f;
		x[0] = 1e6f;
		x[1] = 1e6f;
		x[2] = -1e6f;
		x[3] = 5.0f;
		compare("outlier, 2-D", x, n, 2, 1e-5, 4);
		compare("outlier, 2-D, larger eps", x, n, 2, 4e-5, 3);
		free(x);
	}
	/* 1-D and 3-D with outliers on both sides and duplicates */
	{
		int32_t		dims[] = {1, 3};

		for (int a = 0; a < 2; a++)
		{
			int64_t		n = 2500;
			int32_t		d = dims[a];
			float	   *x = random_set(n, d, 5, 0.1, 0.2);

			for (int64_t i = 0; i < n * d; i++)
				x[i] = 1e-2f * x[i];
			x[0] = 3e7f;
			x[d] = -2e9f;
			memcpy(x + 2 * d, x, sizeof(float) * d);	/* a duplicated outlier */
			compare("outliers and duplicates", x, n, d, 2e-4, 3);
			free(x);
		}
	}
	/* two clusters far apart, each at its own small scale */
	{
		int64_t		n = 3000;
		float	   *x = random_set(n, 2, 4, 0.1, 0.05);

		for (int64_t i = 0; i < n; i++)
		{
			float		off = (i % 2) ? 4.0e5f : -1.0e3f;

			x[i * 2] = off + 1e-3f * x[i * 2];
			x[i * 2 + 1] = off + 1e-3f * x[i * 2 + 1];
		}
		compare("two far scales", x, n, 2, 2e-5, 3);
		free(x);
	}
	/* 8-D whose first four coordinates are constant, and 5-D on a round lattice */
	{
		int64_t		n = 2000;
		float	   *x = random_set(n, 8, 6, 0.1, 0.1);

		for (int64_t i = 0; i < n; i++)
			for (int k = 0; k < 4; k++)
				x[i * 8 + k] = 7.0f;
		compare("constant first features", x, n, 8, 0.05, 4);
		free(x);
		x = random_set(n, 5, 0, 0.0, 0.1);
		for (int64_t i = 0; i < n * 5; i++)
			x[i] = (float) (floor(x[i] * 20.0) / 10.0);
		compare("round lattice, round eps", x, n, 5, 0.1, 5);
		compare("round lattice, eps on the lattice step", x, n, 5, 0.2, 5);
		free(x);
	}
	/*
	 * 8-D: most rows equal, a tight group and spread rows: cells whose
	 * points are all within eps of each other are taken whole (on the grid
	 * of side eps too), next to cells where they are not.
	 */
	{
		int64_t		n = 3000;
		float	   *x = random_set(n, 8, 0, 0.0, 0.0);

		for (int64_t i = 0; i < n; i++)
			for (int k = 0; k < 8; k++)
			{
				if (i % 3 != 2)
					x[i * 8 + k] = 0.25f;
				else if (i % 6 == 2)
					x[i * 8 + k] = 0.5f + 0.01f * x[i * 8 + k];
			}
		compare("equal rows and a tight group, 8-D", x, n, 8, 0.05, 5);
		compare("equal rows and a tight group, 8-D, eps inside the group", x, n, 8, 0.012, 4);
		compare("equal rows and a tight group, 8-D, large min_pts", x, n, 8, 0.05, 1500);
		free(x);
	}
}

/* ---------------------------------------------------------------- double precision */

/* The decimal text s as the nearest double, as PostgreSQL reads a float8 or numeric. */
static double
decimal(const char *s)
{
	return strtod(s, NULL);
}

/* n values of x as floats (a real column holding the same decimals). */
static float *
narrow(const double *x, int64_t n)
{
	float	   *f = malloc(sizeof(float) * n);

	for (int64_t i = 0; i < n; i++)
		f[i] = (float) x[i];
	return f;
}

/* Whether two runs' answers differ anywhere. */
static int
answers_differ(const int32_t *c1, const uint8_t *k1, const int32_t *c2, const uint8_t *k2, int64_t n)
{
	return memcmp(c1, c2, sizeof(int32_t) * n) != 0 || memcmp(k1, k2, n) != 0;
}

/*
 * Points on a line with five decimals, 0.05 apart as decimals: 55.15545,
 * 55.20545, 55.25545, ... (and a constant second coordinate), eps 0.05.
 * Whether a consecutive pair is within eps depends on the rounding of the
 * coordinates: as PostGIS computes in double, sqrt(dx * dx + dy * dy) is
 * 0.04999999999999716 for rows 0-1, 2-3, 3-4, 5-6, ... (neighbours) and
 * 0.05000000000000426 for rows 1-2, 4-5, 6-7, 9-10, 11-12 (not); in single
 * precision 4-5 and 9-10 are neighbours (0.049999237060546875), 1-2, 6-7,
 * 11-12 not (0.0500030517578125).  Both answers against the brute-force
 * reference, and the double one against those known pairs.
 */
static void
test_double_line(void)
{
	enum
	{
		N = 40
	};
	double		xd[N * 2];
	float	   *xf;
	int32_t		cd[N],
				cf[N];
	uint8_t		kd[N],
				kf[N];
	int			edge = 0;

	for (int i = 0; i < N; i++)
	{
		char		buf[32];

		snprintf(buf, sizeof(buf), "%.5f", 55.15545 + 0.05 * i);
		xd[2 * i] = decimal(buf);
		xd[2 * i + 1] = decimal("37.61715");
	}
	xf = narrow(xd, N * 2);
	/* the premise: single and double precision disagree on some consecutive pairs */
	for (int i = 0; i + 1 < N; i++)
		edge += ref_near(xd, GC_F64, GC_METRIC_EUCLIDEAN, 2, i, i + 1, 0.05) !=
			ref_near(xf, GC_F32, GC_METRIC_EUCLIDEAN, 2, i, i + 1, 0.05);
	CHECK(edge >= 2, "line of five decimals: %d pairs decided differently by float and double", edge);
	CHECK(ref_near(xd, GC_F64, GC_METRIC_EUCLIDEAN, 2, 0, 1, 0.05) &&
		  !ref_near(xd, GC_F64, GC_METRIC_EUCLIDEAN, 2, 1, 2, 0.05) &&
		  !ref_near(xd, GC_F64, GC_METRIC_EUCLIDEAN, 2, 4, 5, 0.05) &&
		  ref_near(xf, GC_F32, GC_METRIC_EUCLIDEAN, 2, 4, 5, 0.05), "line: the known pairs");
	for (int min_pts = 2; min_pts <= 3; min_pts++)
	{
		gc_dbscan_params p = {sizeof(p), 0.05, min_pts, GC_METRIC_EUCLIDEAN};
		gc_dbscan_result rd = {cd, kd, 0};
		gc_dbscan_result rf = {cf, kf, 0};

		compare_t("line of five decimals", xd, GC_F64, GC_METRIC_EUCLIDEAN, N, 2, 0.05, min_pts, NULL);
		compare_t("line of five decimals", xf, GC_F32, GC_METRIC_EUCLIDEAN, N, 2, 0.05, min_pts, NULL);
		CHECK(run_dbscan_t(xd, GC_F64, N, 2, &p, &rd, NULL) == GC_OK &&
			  run_dbscan_t(xf, GC_F32, N, 2, &p, &rf, NULL) == GC_OK, "line: %s", unit_error());
		CHECK(answers_differ(cd, kd, cf, kf, N), "line, min_pts %d: float and double answers differ",
			  min_pts);
		if (min_pts == 2)
			/* double: {0, 1} {2, 3, 4} {5, 6} ...; float: 4 and 5 together */
			CHECK(cd[0] == 0 && cd[1] == 0 && cd[2] == 1 && cd[3] == 1 && cd[4] == 1 && cd[5] == 2 &&
				  cd[6] == 2 && cd[7] == 3 && cf[4] == cf[5] && cf[1] != cf[2],
				  "line, min_pts 2: %d %d %d %d %d %d %d %d (float 4, 5: %d %d)", cd[0], cd[1], cd[2],
				  cd[3], cd[4], cd[5], cd[6], cd[7], cf[4], cf[5]);
		else
			/* double: 2, 3, 4 (3 has both) are the only run of three; 3 is core, 2 and 4 border */
			CHECK(kd[3] && !kd[2] && !kd[4] && !kd[0] && !kd[1] && cd[2] == cd[3] && cd[4] == cd[3] &&
				  cd[0] == -1 && cd[1] == -1, "line, min_pts 3: core %d %d %d, clusters %d %d %d",
				  kd[2], kd[3], kd[4], cd[2], cd[3], cd[4]);
	}
	free(xf);
}

/*
 * The neighbour rule is sqrt(dist2) <= eps, not dist2 <= eps * eps: a pair
 * whose dist2 lies one ulp above eps * eps rounded has sqrt(dist2) == eps
 * and is within eps (as PostGIS says).
 */
static void
test_rule_edge(void)
{
	double		x[] = {0.0, 0.0, 0.008, 0.006000000000000001};
	double		d2 = gc_dist2_f64(x, x + 2, 2);
	int32_t		c[2];
	uint8_t		k[2];
	gc_dbscan_params p = {sizeof(p), 0.01, 2, GC_METRIC_EUCLIDEAN};
	gc_dbscan_result r = {c, k, 0};

	CHECK(d2 > 0.01 * 0.01 && sqrt(d2) <= 0.01, "rule edge premise: dist2 %.17g", d2);
	CHECK(run_dbscan_t(x, GC_F64, 2, 2, &p, &r, NULL) == GC_OK && r.n_clusters == 1 &&
		  c[0] == 0 && c[1] == 0 && k[0] && k[1], "rule edge: %d %d", c[0], c[1]);
}

/*
 * Random rows with two or three decimals and a round eps, as users' data
 * come (blobs, noise, repeated rows), in both precisions against the
 * brute-force reference; then the same shifted far from the origin, with a
 * far outlier (the mapped grid), and at 1e12 (double coordinates a few
 * cells apart where the raw cells are off by a fraction of a cell).
 */
static void
test_double_random(void)
{
	int32_t		dims[] = {1, 2, 3, 8};
	int			differ = 0;

	for (int a = 0; a < 4; a++)
	{
		int32_t		d = dims[a];
		int64_t		n = d == 8 ? 2000 : 3000;
		float	   *x0 = random_set(n, d, 6, 0.1, 0.2);
		double	   *xd = malloc(sizeof(double) * n * d);
		float	   *xf;

		for (int decimals = 2; decimals <= 3; decimals++)
		{
			double		scale = decimals == 2 ? 100.0 : 1000.0;
			double		eps = decimals == 2 ? 0.05 : 0.01;
			int64_t		cf = 0,
						cd = 0;

			if (d == 8)
				eps *= 4;
			for (int64_t i = 0; i < n * d; i++)
				xd[i] = nearbyint((double) x0[i] * 10.0 * scale) / scale;
			xf = narrow(xd, n * d);
			compare_t("few decimals", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 4, &cd);
			compare_t("few decimals", xf, GC_F32, GC_METRIC_EUCLIDEAN, n, d, eps, 4, &cf);
			compare_t("few decimals, min_pts 2", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 2, NULL);
			CHECK(cd > 1, "few decimals, d %d: %lld clusters", d, (long long) cd);
			/* the precisions decide some pairs differently */
			for (int64_t i = 0; i + 1 < n && !differ; i++)
				for (int64_t j = i + 1; j < n && !differ; j++)
					differ = ref_near(xd, GC_F64, GC_METRIC_EUCLIDEAN, d, i, j, eps) !=
						ref_near(xf, GC_F32, GC_METRIC_EUCLIDEAN, d, i, j, eps);
			free(xf);
			/* far from the origin: projected coordinates in metres */
			for (int64_t i = 0; i < n * d; i++)
				xd[i] += 5.0e6;
			compare_t("few decimals at 5e6", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 4, NULL);
			xd[0] = -5.0e6;		/* and a far outlier: the mapped grid */
			compare_t("few decimals at 5e6, outlier", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 4, NULL);
		}
		/*
		 * At 1e10 and 1e13, on the doubles there (steps of one ulp u), eps
		 * 40 u and 2.5 u: the raw cells of the mapped grid (with a far
		 * outlier) lie near 3e14 (exact, dense cells) and 7e15 (beyond
		 * 2^52: off by up to 2 cells, steps shortened, no dense cells).
		 */
		for (int o = 0; o < 2; o++)
		{
			double		off = o ? 1.0e13 : 1.0e10;
			double		u = o ? 0.001953125 : 1.9073486328125e-06;
			double		eps = (o ? 2.5 : 40.0) * u * (d == 8 ? 3 : 1);
			char		what[64];

			for (int64_t i = 0; i < n * d; i++)
				xd[i] = off + nearbyint((double) x0[i] * (o ? 300.0 : 4800.0)) * u;
			snprintf(what, sizeof(what), "at %g", off);
			compare_t(what, xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 4, NULL);
			xd[d] = -off;
			snprintf(what, sizeof(what), "at %g, outlier", off);
			compare_t(what, xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 4, NULL);
			compare_t(what, xd, GC_F64, GC_METRIC_EUCLIDEAN, n, d, eps, 2, NULL);
		}
		free(x0);
		free(xd);
	}
	CHECK(differ, "few decimals: float and double decide some pair differently");
}

/* floor(v / side) exactly, in integers: v = mv 2^ev, side = ms 2^es with 53-bit mv, ms. */
static double
exact_floor_div(double v, double side)
{
	int			ev,
				es;
	double		fv = frexp(fabs(v), &ev);
	double		fs = frexp(side, &es);
	unsigned __int128 mv = (unsigned __int128) ldexp(fv, 53);
	unsigned __int128 ms = (unsigned __int128) ldexp(fs, 53);
	int			sh = ev - es;
	unsigned __int128 q,
				rem;

	if (sh >= 0)
	{
		mv <<= sh;
		q = mv / ms;
		rem = mv % ms;
	}
	else
	{
		ms <<= -sh;
		q = mv / ms;
		rem = mv % ms;
	}
	if (v >= 0)
		return (double) q;
	return -(double) q - (rem != 0 ? 1.0 : 0.0);
}

/*
 * The raw cells of double rows are exact (gc_grid_raw with exact set): on
 * values v = k * side rounded, whose quotient rounds to k whether it lies
 * above or below it, against floor(v / side) in integer arithmetic; the
 * rounded quotient alone is wrong on many of them (the premise).
 */
static void
test_grid_raw(void)
{
	int64_t		wrong_exact = 0,
				wrong_rounded = 0,
				tried = 0;

	for (int s = 0; s < 200; s++)
	{
		double		side = (0.001 + urand()) * pow(10.0, (int) (urand() * 12) - 8);

		for (int t = 0; t < 500; t++)
		{
			double		k = floor(urand() * pow(2.0, 2 + (int) (urand() * 48)));
			double		v = (urand() < 0.5 ? -k : k) * side;

			if (v == 0 || fabs(v / side) >= 0x1p52)
				continue;
			tried++;
			wrong_exact += gc_grid_raw(side, v, 1) != exact_floor_div(v, side) + 0.0;
			wrong_rounded += gc_grid_raw(side, v, 0) != exact_floor_div(v, side) + 0.0;
		}
	}
	CHECK(tried > 50000 && wrong_exact == 0 && wrong_rounded > 100,
		  "raw cells: %lld tried, %lld wrong with the correction, %lld without", (long long) tried,
		  (long long) wrong_exact, (long long) wrong_rounded);
}

/* ---------------------------------------------------------------- cosine */

/*
 * Rays from the origin at known angles, five magnitudes each (1e-3 to
 * 1e3), the rows interleaved: with eps = 1 - cos(12 degrees) the rays at 0,
 * 10, 20 degrees are one cluster (neighbours 10 degrees apart), 90 and 100
 * another, 180 a third (its rows all of one direction), 250 and 275 two
 * more (25 degrees apart); with eps = 1 - cos(5 degrees) each ray is its
 * own cluster; with eps 2 everything is one.  Both precisions.
 */
static void
test_cosine_rays(void)
{
	static const double angle[] = {0, 90, 180, 10, 250, 100, 20, 275};
	static const int want12[] = {0, 1, 2, 0, 3, 1, 0, 4};
	static const double mag[] = {1e-3, 0.5, 1, 7.25, 1e3};
	enum
	{
		R = 8, M = 5, N = R * M
	};
	double		xd[N * 2];
	int32_t		c[N];
	uint8_t		k[N];

	for (int m = 0; m < M; m++)
		for (int t = 0; t < R; t++)
		{
			double		rad = angle[t] * 3.14159265358979323846 / 180.0;

			xd[2 * (m * R + t)] = mag[m] * cos(rad);
			xd[2 * (m * R + t) + 1] = mag[m] * sin(rad);
		}
	for (int prec = 0; prec < 2; prec++)
	{
		gc_dtype	t = prec ? GC_F64 : GC_F32;
		float	   *xf = narrow(xd, N * 2);
		void	   *x = prec ? (void *) xd : (void *) xf;
		double		eps12 = 1.0 - cos(12.0 * 3.14159265358979323846 / 180.0);
		double		eps5 = 1.0 - cos(5.0 * 3.14159265358979323846 / 180.0);
		gc_dbscan_params p = {sizeof(p), eps12, 5, GC_METRIC_COSINE};
		gc_dbscan_result r = {c, k, 0};
		int			ok;

		CHECK(gc_unit_rows(x, t, N, 2) == -1, "rays: unit rows");
		ok = run_dbscan_t(x, t, N, 2, &p, &r, NULL) == GC_OK && r.n_clusters == 5;
		for (int i = 0; ok && i < N; i++)
			ok = c[i] == want12[i % R] && k[i];
		CHECK(ok, "rays, eps 1 - cos 12 degrees, %s: %lld clusters, %s", prec ? "double" : "float",
			  (long long) r.n_clusters, unit_error());
		p.eps = eps5;
		ok = run_dbscan_t(x, t, N, 2, &p, &r, NULL) == GC_OK && r.n_clusters == R;
		for (int i = 0; ok && i < N; i++)
			ok = c[i] == i % R;
		CHECK(ok, "rays, eps 1 - cos 5 degrees, %s: %lld clusters", prec ? "double" : "float",
			  (long long) r.n_clusters);
		/* min_pts 6: a ray alone has 5 rows, so only the joined rays are core */
		p.eps = eps12;
		p.min_pts = 6;
		ok = run_dbscan_t(x, t, N, 2, &p, &r, NULL) == GC_OK && r.n_clusters == 2;
		for (int i = 0; ok && i < N; i++)
			ok = (angle[i % R] == 180 || angle[i % R] >= 250) ? c[i] == -1 && !k[i] :
				c[i] == want12[i % R] && k[i];
		CHECK(ok, "rays, min_pts 6, %s: %lld clusters", prec ? "double" : "float",
			  (long long) r.n_clusters);
		p.eps = 2.0;
		p.min_pts = N;
		CHECK(run_dbscan_t(x, t, N, 2, &p, &r, NULL) == GC_OK && r.n_clusters == 1 && c[N - 1] == 0 &&
			  k[0], "rays, eps 2: one cluster");
		compare_t("rays", x, t, GC_METRIC_COSINE, N, 2, eps12, 5, NULL);
		compare_t("rays", x, t, GC_METRIC_COSINE, N, 2, eps5, 3, NULL);
		free(xf);
		if (prec == 0)
			for (int i = 0; i < N; i++)		/* back to the raw rows for the double pass */
			{
				int			m = i / R,
							tt = i % R;
				double		rad = angle[tt] * 3.14159265358979323846 / 180.0;

				xd[2 * i] = mag[m] * cos(rad);
				xd[2 * i + 1] = mag[m] * sin(rad);
			}
	}
}

/*
 * Random directions against the brute-force reference: blobs shifted to
 * the origin (so that the directions spread), duplicates, unit rows in
 * both precisions, d = 2, 3 (the fine grid on the sphere), 8 and 64.
 */
static void
test_cosine_random(void)
{
	int32_t		dims[] = {2, 3, 8, 64};
	double		epss[] = {0.001, 0.01, 0.05};

	for (int a = 0; a < 4; a++)
	{
		int32_t		d = dims[a];
		int64_t		n = d == 64 ? 800 : 2500;
		float	   *xf = random_set(n, d, 8, 0.1, 0.2);
		double	   *xd = malloc(sizeof(double) * n * d);

		for (int64_t i = 0; i < n * d; i++)
		{
			xf[i] -= 0.5f;
			xd[i] = (double) xf[i];
		}
		/* a zero row has no direction: keep them out */
		for (int64_t i = 0; i < n; i++)
			if (xf[i * d] == 0.0f)
				xf[i * d] = 0.25f, xd[i * d] = 0.25;
		CHECK(gc_unit_rows(xf, GC_F32, n, d) == -1 && gc_unit_rows(xd, GC_F64, n, d) == -1,
			  "cosine random: unit rows");
		for (int e = 0; e < 3; e++)
		{
			int64_t		nc = 0;

			compare_t("cosine random", xf, GC_F32, GC_METRIC_COSINE, n, d, epss[e], 4, &nc);
			compare_t("cosine random", xd, GC_F64, GC_METRIC_COSINE, n, d, epss[e], 4, NULL);
			if (e == 1 && d >= 3)	/* on the circle, noise rows join every direction */
				CHECK(nc > 1, "cosine random, d %d: %lld clusters", d, (long long) nc);
		}
		compare_t("cosine random, min_pts 2", xd, GC_F64, GC_METRIC_COSINE, n, d, 0.01, 2, NULL);
		free(xf);
		free(xd);
	}
}

/* Cancel stops the work and reports it. */
static void
test_cancel(void)
{
	int64_t		n = 200000;
	float	   *x = random_set(n, 2, 2, 0.5, 0.0);
	int32_t    *c = malloc(sizeof(int32_t) * n);
	uint8_t    *k = malloc(n);
	gc_dbscan_params p = {sizeof(p), 0.05, 5};
	gc_dbscan_result r = {c, k, 0};

	CHECK(run_dbscan(x, n, 2, &p, &r, cancel_after_two) == GC_ERR_CANCELLED,
		  "cancel");
	CHECK(strcmp(unit_error(), "canceled") == 0, "cancel message: %s", unit_error());
	free(x);
	free(c);
	free(k);
}

/*
 * Cancel is asked in proportion to the work: all points in one cell of a
 * 10-D grid (uniform in [0, 1)^10, eps 1: the cell's side), where many but
 * not all pairs are neighbours, so that the union compares every pair.  The callback counts its calls; it must be asked many times before
 * the call would have ended, not once a cell.
 */
static int	crowd_calls = 0;

static int
cancel_at_fifty(void *arg)
{
	return ++crowd_calls >= 50;
}

static void
test_cancel_crowded_cell(void)
{
	int64_t		n = 60000;
	float	   *x = random_set(n, 10, 0, 0.0, 0.0);
	int32_t    *c = malloc(sizeof(int32_t) * n);
	uint8_t    *k = malloc(n);
	gc_dbscan_params p = {sizeof(p), 1.0, 5};
	gc_dbscan_result r = {c, k, 0};

	crowd_calls = 0;
	CHECK(run_dbscan(x, n, 10, &p, &r, cancel_at_fifty) == GC_ERR_CANCELLED,
		  "cancel in one crowded cell (asked %d times)", crowd_calls);
	free(x);
	free(c);
	free(k);
}

/*
 * Large sets, where every phase runs in many blocks: the answer of 2, 3, 8
 * and 16 threads is the one thread's bit for bit, and the timing record
 * says that the threads ran.  (The small sets above compare every thread
 * count with the reference.)
 */
static void
threads_case_t(const char *name, const void *x, gc_dtype dt, gc_metric m, int64_t n, int32_t d,
			   double eps, int min_pts)
{
	int32_t    *c0 = malloc(sizeof(int32_t) * n), *c1 = malloc(sizeof(int32_t) * n);
	uint8_t    *k0 = malloc(n), *k1 = malloc(n);
	gc_dbscan_params p = {sizeof(p), eps, min_pts, m};
	gc_dbscan_result r0 = {c0, k0, 0};
	gc_dbscan_result r1 = {c1, k1, 0};
	gc_timing	t;
	gc_exec		e;
	gc_status	st;
	int64_t		cores = 0;

	unit_threads = 1;
	e = unit_exec(NULL, &t);
	st = gc_cpu_api()->dbscan(&e, x, dt, n, d, &p, &r0);
	for (int64_t i = 0; i < n; i++)
		cores += k0[i];
	CHECK(st == GC_OK && t.threads == 1 && r0.n_clusters > 1 && cores > 0 && cores < n,
		  "%s, 1 thread: status %d, %d threads ran, %lld clusters, %lld core", name, st,
		  t.threads, (long long) r0.n_clusters, (long long) cores);
	for (int i = 1; i < UNIT_THREAD_COUNTS; i++)
	{
		unit_threads = unit_thread_counts[i];
		e = unit_exec(NULL, &t);
		memset(c1, 0x55, sizeof(int32_t) * n);
		st = gc_cpu_api()->dbscan(&e, x, dt, n, d, &p, &r1);
		CHECK(st == GC_OK && t.threads == unit_threads && r1.n_clusters == r0.n_clusters &&
			  memcmp(c0, c1, sizeof(int32_t) * n) == 0 && memcmp(k0, k1, n) == 0,
			  "%s, %d threads (%d ran): status %d, %lld clusters against %lld", name, unit_threads,
			  t.threads, st, (long long) r1.n_clusters, (long long) r0.n_clusters);
	}
	unit_threads = 0;
	free(c0);
	free(c1);
	free(k0);
	free(k1);
}

static void
threads_case(const char *name, const float *x, int64_t n, int32_t d, double eps, int min_pts)
{
	threads_case_t(name, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, eps, min_pts);
}

static void
test_threads(void)
{
	int64_t		n = 400000;
	float	   *x = random_set(n, 2, 40, 0.02, 0.1);

	/* 2-D: blobs, noise and repeated rows on a 1e-4 lattice (round eps), far outliers */
	for (int64_t i = 0; i < n * 2; i++)
		x[i] = (float) (floor(x[i] * 1e4) / 1e4);
	x[0] = 1e6f;
	x[3] = -1e6f;
	threads_case("2-D lattice blobs", x, n, 2, 0.002, 5);
	threads_case("2-D lattice blobs, eps on the lattice", x, n, 2, 0.0005, 4);
	free(x);
	/* 3-D and 8-D (the grid of side eps on three dimensions) */
	n = 200000;
	x = random_set(n, 3, 30, 0.05, 0.05);
	threads_case("3-D blobs", x, n, 3, 0.01, 5);
	free(x);
	x = random_set(n, 8, 20, 0.1, 0.2);
	threads_case("8-D blobs with duplicates", x, n, 8, 0.04, 5);
	/* cosine on the same rows, about the origin, in both precisions */
	{
		double	   *xd = malloc(sizeof(double) * n * 8);

		for (int64_t i = 0; i < n * 8; i++)
		{
			x[i] -= 0.5f;
			xd[i] = (double) x[i];
		}
		gc_unit_rows(x, GC_F32, n, 8);
		gc_unit_rows(xd, GC_F64, n, 8);
		threads_case_t("8-D cosine, float", x, GC_F32, GC_METRIC_COSINE, n, 8, 0.005, 5);
		threads_case_t("8-D cosine, double", xd, GC_F64, GC_METRIC_COSINE, n, 8, 0.005, 5);
		free(xd);
	}
	free(x);
	/* double: 2-D with two decimals, round eps, far outliers (the mapped grid); 3-D cosine */
	n = 300000;
	x = random_set(n, 2, 40, 0.02, 0.1);
	{
		double	   *xd = malloc(sizeof(double) * n * 3);

		for (int64_t i = 0; i < n * 2; i++)
			xd[i] = nearbyint((double) x[i] * 1e4) / 100.0;
		xd[0] = 1e7;
		xd[3] = -3e6;
		threads_case_t("2-D two decimals, double", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, 0.05, 5);
		threads_case_t("2-D two decimals, double, min_pts 2", xd, GC_F64, GC_METRIC_EUCLIDEAN, n, 2,
					   0.02, 2);
		free(x);
		x = random_set(n, 3, 30, 0.05, 0.05);
		for (int64_t i = 0; i < n * 3; i++)
			xd[i] = (double) x[i] - 0.5;
		gc_unit_rows(xd, GC_F64, n, 3);
		threads_case_t("3-D cosine, double", xd, GC_F64, GC_METRIC_COSINE, n, 3, 1e-4, 5);
		free(xd);
	}
	free(x);
}

/* Runs every test; the exit status says whether all checks passed. */
/*
 * A tiny eps, down to the smallest subnormal (the grid once put every point
 * of such a call in one cell, or rebuilt its maps once per doubling of its
 * side): the grid and the sweep against the brute-force reference.  Below
 * eps 1.5e-154 the squares of dist2 underflow, so rows farther apart than
 * eps can be neighbours by the rule (dist2 <= bound); the grid must find
 * them too.
 */
static void
test_tiny_eps(void)
{
	const double eps[] = {1e-155, 1e-300, 2.2250738585072014e-308, 4.9406564584124654e-324};
	int64_t		n = 3000;
	double	   *x = malloc(sizeof(double) * n * 2);

	/* uniform in the unit square, one row in ten repeated */
	for (int64_t i = 0; i < n; i++)
	{
		x[i * 2] = i % 10 == 9 ? x[(i - 1) * 2] : urand();
		x[i * 2 + 1] = i % 10 == 9 ? x[(i - 1) * 2 + 1] : urand();
	}
	for (int e = 0; e < 4; e++)
		compare_t("tiny eps, uniform", x, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, eps[e], 2, NULL);
	/* within 1e-6 of (1, 1) */
	for (int64_t i = 0; i < n * 2; i++)
		x[i] = i / 2 % 10 == 9 ? x[i - 2] : 1.0 + 1e-6 * urand();
	for (int e = 0; e < 4; e++)
		compare_t("tiny eps, tight", x, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, eps[e], 2, NULL);
	/*
	 * rows 1e-170 apart along a line: their squared differences underflow
	 * to 0, so every eps below about 1.5e-162 chains them into one cluster;
	 * rows 1e-160 apart: 1e-320 is a subnormal square, within bound at eps
	 * 1e-155 and not at 1e-300
	 */
	{
		const double spacing[] = {1e-170, 1e-160};

		for (int sp = 0; sp < 2; sp++)
			for (int e = 0; e < 4; e++)
			{
				int64_t		clusters = -1;

				for (int64_t i = 0; i < n; i++)
				{
					x[i * 2] = (double) i * spacing[sp];
					x[i * 2 + 1] = 0.5;
				}
				compare_t(sp == 0 ? "tiny eps, underflowing squares" : "tiny eps, subnormal squares",
						  x, GC_F64, GC_METRIC_EUCLIDEAN, n, 2, eps[e], 3, &clusters);
				CHECK(clusters == (sp == 0 || e == 0 ? 1 : 0),
					  "tiny eps: spacing %g, eps %g: %lld clusters", spacing[sp], eps[e], (long long) clusters);
			}
	}
	free(x);

	/*
	 * 400,000 4-D rows with 1,000 rows repeated: the maps of the coarse grid
	 * exceed the cell keys until the side has been doubled hundreds of
	 * times.  The answer is known: each repeated row and its copy form a
	 * cluster, every other row is noise.
	 */
	{
		int64_t		big = 400000;
		double	   *y = malloc(sizeof(double) * big * 4);
		int32_t    *c = malloc(sizeof(int32_t) * big);
		uint8_t    *k = malloc(big);

		for (int64_t i = 0; i < big * 4; i++)
			y[i] = urand();
		for (int64_t i = 0; i < 1000; i++)
			memcpy(y + (i * 397 + 1) * 4, y + i * 397 * 4, sizeof(double) * 4);
		for (int e = 1; e < 4; e++)
		{
			gc_dbscan_params p = {sizeof(gc_dbscan_params), eps[e], 2, GC_METRIC_EUCLIDEAN};
			gc_dbscan_result r = {c, k, 0};
			gc_status	st = run_dbscan_t(y, GC_F64, big, 4, &p, &r, NULL);
			int			ok = st == GC_OK && r.n_clusters == 1000;

			for (int64_t i = 0; ok && i < big; i++)
			{
				int			pair = i % 397 <= 1 && i / 397 < 1000;

				ok = pair ? c[i] == (int32_t) (i / 397) && k[i] : c[i] == -1 && !k[i];
			}
			CHECK(ok, "tiny eps, 4-D %lld rows, eps %g: status %d %s, %lld clusters",
				  (long long) big, eps[e], st, unit_error(), (long long) r.n_clusters);
		}
		free(y);
		free(c);
		free(k);
	}
}

int
main(void)
{
	test_api();
	test_checks();
	test_hand_made();
	test_random_sets();
	test_sweep();
	test_skewed_sets();
	test_double_line();
	test_rule_edge();
	test_grid_raw();
	test_double_random();
	test_tiny_eps();
	test_cosine_rays();
	test_cosine_random();
	test_cancel();
	test_cancel_crowded_cell();
	test_threads();
	UNIT_DONE();
}
