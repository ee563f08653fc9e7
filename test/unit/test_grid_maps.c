/*
 * test_grid_maps.c
 *    Unit tests of the mapped DBSCAN grid built on the call's threads
 *    (gc_core_grid_maps, src/core/grid_maps.c) against the serial build of
 *    common/dbscan_grid.h (gc_grid_maps_build): the side, extents, dense
 *    cells and neighbour rows of the plan, the sorted distinct values and
 *    their grid coordinates, and every point's coordinates, bit for bit, for
 *    1 to 16 threads, on data with duplicates and ties (both zeros among
 *    them), extreme values (the largest and smallest doubles, subnormals),
 *    tight clusters far from the origin, float and double rows, 1 to 5
 *    features, tiny and ordinary eps, and row counts around the blocks'
 *    sizes.  Cancel: a cancelled build answers GC_ERR_CANCELLED and frees
 *    what it took.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dbscan_grid.h"
#include "metric.h"
#include "unit.h"

static uint64_t rng_state = 7;

/* Uniform in [0, 1). */
static double
unif(void)
{
	rng_state = rng_state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (rng_state >> 11) * (1.0 / 9007199254740992.0);
}

enum
{
	SHAPE_TIGHT,				/* 1 + 1e-6 u: one tight cluster far from the origin in cells */
	SHAPE_TIES,					/* few distinct values, both zeros, many equal rows */
	SHAPE_EXTREME,				/* the largest and smallest doubles, subnormals, infinities excluded */
	SHAPE_OUTLIER,				/* uniform in the unit square and one point at 1e200 */
	SHAPE_INTEGERS,				/* integers with ties, negative and positive */
	NSHAPES
};

static double
value(int shape, int64_t i)
{
	static const double extremes[] = {DBL_MAX, -DBL_MAX, DBL_MIN, -DBL_MIN, 4.9406564584124654e-324,
		-4.9406564584124654e-324, 1e300, -1e300, 1e-300, 0.0, -0.0, 1.0, -1.0, 0x1p52, 0x1p52 + 1.0,
	2.2250738585072009e-308};
	static const double ties[] = {0.0, -0.0, 1.0, 1.0, 2.5, -3.0, 1e-9};

	switch (shape)
	{
		case SHAPE_TIGHT:
			return 1.0 + 1e-6 * unif();
		case SHAPE_TIES:
			return ties[(int) (unif() * 7)];
		case SHAPE_EXTREME:
			return unif() < 0.7 ? extremes[(int) (unif() * 16)] : (unif() - 0.5) * pow(10.0, (int) (unif() * 600) - 300);
		case SHAPE_OUTLIER:
			return i == 3 ? 1e200 : unif();
		default:
			return (double) ((int64_t) (unif() * 200) - 100);
	}
}

static gc_tuning maps_tuning;
static gc_timing maps_timing;
static gc_error maps_err;
static int	cancel_calls;
static int	cancel_after;

static int
cancel_cb(void *arg)
{
	(void) arg;
	return ++cancel_calls > cancel_after;
}

/* A context without its pool: the pool keeps the context's address, so the caller makes it (gc_pool_create). */
static gc_core_ctx
make_ctx(gc_cancel_fn cancel)
{
	gc_core_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	maps_tuning = gc_tuning_defaults();
	ctx.cancel = cancel;
	ctx.tuning = &maps_tuning;
	ctx.timing = &maps_timing;
	ctx.err = &maps_err;
	gc_error_clear(&maps_err);
	return ctx;
}

/* The plan of the rows x [n, d] as the CPU DBSCAN makes it, before its maps; 1 when it is mapped. */
static int
plan_of(gc_grid_plan *gp, const void *x, gc_dtype t, int64_t n, int32_t d, double eps, double *lo,
		double *hi)
{
	double		bound = gc_metric_dist2_le(GC_METRIC_EUCLIDEAN, eps);
	double		radius = gc_grid_radius(GC_METRIC_EUCLIDEAN, eps, bound, d);
	int32_t		dims[GC_GRID_MAX_DIMS];
	int32_t		g = d < GC_GRID_MAX_DIMS ? d : GC_GRID_MAX_DIMS;
	gc_error	err;

	CHECK(gc_grid_choose_dims(x, t, n, d, radius, dims) == 0, "choose dims");
	for (int k = 0; k < g; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
		for (int64_t i = 0; i < n; i++)
		{
			double		v = gc_grid_x(x, t, (size_t) (i * d + dims[k]));

			lo[k] = v < lo[k] ? v : lo[k];
			hi[k] = v > hi[k] ? v : hi[k];
		}
	}
	gc_error_clear(&err);
	CHECK(gc_grid_plan_make(gp, d, t, radius, bound, dims, lo, hi, 0, &err) == GC_OK, "plan: %s", err.message);
	return gp->mapped;
}

/* The first difference between two finished mapped plans and their maps, or NULL. */
static const char *
compare(const gc_grid_plan *a, const gc_grid_maps *ma, const gc_grid_plan *b, const gc_grid_maps *mb,
		int64_t n)
{
	if (memcmp(&a->side, &b->side, sizeof(double)) != 0)
		return "side";
	if (a->dense_ok != b->dense_ok || a->raw_inexact != b->raw_inexact || a->reach != b->reach ||
		a->nrows != b->nrows || a->max_cells != b->max_cells)
		return "dense cells, reach or rows";
	if (memcmp(a->row_off, b->row_off, sizeof(a->row_off)) != 0 ||
		memcmp(a->row_half, b->row_half, sizeof(a->row_half)) != 0)
		return "neighbour rows";
	for (int k = 0; k < a->g; k++)
	{
		if (a->nmap[k] != b->nmap[k] || a->extent[k] != b->extent[k])
			return "distinct values or extent";
		if (memcmp(a->map_val[k], b->map_val[k], sizeof(double) * (size_t) a->nmap[k]) != 0)
			return "distinct values";
		if (memcmp(a->map_cell[k], b->map_cell[k], sizeof(int64_t) * (size_t) a->nmap[k]) != 0)
			return "grid coordinates of the values";
		if (memcmp(ma->coord[k], mb->coord[k], sizeof(int64_t) * (size_t) n) != 0)
			return "grid coordinates of the points";
	}
	return NULL;
}

static void
test_against_serial(void)
{
	static const int64_t sizes[] = {1, 2, 5, 4095, 4097, 8193, 20000, 100003};
	static const int32_t dims[] = {1, 2, 3, 5};
	static const double eps[] = {4.9e-324, 1e-300, 1e-100, 1e-8, 0.01};
	int64_t		mapped = 0;

	for (int si = 0; si < (int) (sizeof(sizes) / sizeof(sizes[0])); si++)
		for (int di = 0; di < (int) (sizeof(dims) / sizeof(dims[0])); di++)
			for (int shape = 0; shape < NSHAPES; shape++)
				for (int f32 = 0; f32 <= 1; f32++)
				{
					int64_t		n = sizes[si];
					int32_t		d = dims[di];
					gc_dtype	t = f32 ? GC_F32 : GC_F64;
					double	   *x = malloc(sizeof(double) * (size_t) (n * d));
					float	   *xf = malloc(sizeof(float) * (size_t) (n * d));
					const void *rows = f32 ? (const void *) xf : (const void *) x;

					/* big sizes: a few cases only, the rest is covered by the small ones */
					if (n > 20000 && (d > 2 || f32))
					{
						free(x);
						free(xf);
						continue;
					}
					for (int64_t i = 0; i < n * d; i++)
					{
						x[i] = value(shape, i / d);
						xf[i] = (float) (fabs(x[i]) < FLT_MAX ? x[i] : copysign(FLT_MAX, x[i]));
					}
					for (int ei = 0; ei < (int) (sizeof(eps) / sizeof(eps[0])); ei++)
					{
						gc_grid_plan ref;
						gc_grid_maps rmaps;
						double		lo[GC_GRID_MAX_DIMS],
									hi[GC_GRID_MAX_DIMS];
						gc_error	err;
						gc_status	st;

						if (!plan_of(&ref, rows, t, n, d, eps[ei], lo, hi))
							continue;
						gc_error_clear(&err);
						st = gc_grid_maps_build(&ref, &rmaps, rows, t, n, lo, hi, NULL, NULL, NULL, NULL, &err);
						CHECK(st == GC_OK, "serial maps: %s", err.message);
						mapped++;
						for (int th = 0; th < UNIT_THREAD_COUNTS && st == GC_OK; th++)
						{
							gc_core_ctx ctx = make_ctx(NULL);
							gc_grid_plan gp;
							gc_grid_maps maps;
							const char *diff;
							gc_status	pst;

							ctx.pool = gc_pool_create(&ctx, unit_thread_counts[th]);
							plan_of(&gp, rows, t, n, d, eps[ei], lo, hi);
							pst = gc_core_grid_maps(&ctx, &gp, &maps, rows, t, n, lo, hi);
							diff = pst == GC_OK ? compare(&gp, &maps, &ref, &rmaps, n) : "status";
							CHECK(diff == NULL,
								  "n %lld d %d shape %d %s eps %g threads %d: %s differs (status %d)",
								  (long long) n, d, shape, f32 ? "float" : "double", eps[ei],
								  unit_thread_counts[th], diff, (int) pst);
							gc_grid_maps_free(&maps);
							gc_pool_free(ctx.pool);
						}
						gc_grid_maps_free(&rmaps);
					}
					free(x);
					free(xf);
				}
	CHECK(mapped > 300, "only %lld mapped plans were compared", (long long) mapped);
}

/* A cancel at any of the first questions: GC_ERR_CANCELLED, nothing left behind but what gc_grid_maps_free frees. */
static void
test_cancel(void)
{
	int64_t		n = 60000;
	double	   *x = malloc(sizeof(double) * (size_t) (2 * n));
	int			answered = 0;

	for (int64_t i = 0; i < 2 * n; i++)
		x[i] = value(SHAPE_TIGHT, i);
	for (cancel_after = 0; cancel_after < 40; cancel_after += 3)
	{
		gc_core_ctx ctx = make_ctx(cancel_cb);
		gc_grid_plan gp;
		gc_grid_maps maps;
		double		lo[GC_GRID_MAX_DIMS],
					hi[GC_GRID_MAX_DIMS];
		gc_status	st;

		ctx.pool = gc_pool_create(&ctx, 3);
		cancel_calls = 0;
		CHECK(plan_of(&gp, x, GC_F64, n, 2, 1e-100, lo, hi), "mapped");
		st = gc_core_grid_maps(&ctx, &gp, &maps, x, GC_F64, n, lo, hi);
		CHECK(st == GC_ERR_CANCELLED || st == GC_OK, "cancel after %d: status %d", cancel_after, (int) st);
		if (st == GC_ERR_CANCELLED)
		{
			answered++;
			CHECK(strcmp(maps_err.message, "canceled") == 0, "cancel message: %s", maps_err.message);
		}
		gc_grid_maps_free(&maps);
		gc_pool_free(ctx.pool);
	}
	CHECK(answered > 0, "no build was cancelled");
	free(x);
}

int
main(void)
{
	test_against_serial();
	test_cancel();
	UNIT_DONE();
}
