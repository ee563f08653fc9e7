/*
 * grid_maps.c
 *    The tables of a mapped DBSCAN grid (common/dbscan_grid.h) built on the
 *    call's threads: the same tables, side, extents and point coordinates as
 *    gc_grid_maps_build gives, bit for bit, with every step that touches all
 *    the rows or all the distinct values cut into blocks (pool.h).
 *
 * Per grid dimension: the values' order keys (gc_order_key) sorted with
 * their rows (gc_pool_radix_sort, stable); the distinct values and each
 * row's index among them in two loops over blocks of the sorted keys (the
 * distinct values starting in each block counted, then written after a
 * prefix sum of the counts in block order); the side's search
 * (gc_grid_maps_side) with each try's sum of steps taken in blocks; the
 * grid coordinates of the values as a prefix sum of the steps (per block,
 * then in block order) and of the rows through their index.  The steps are
 * integers and every block writes its own places, so the tables are the
 * serial walk's for any number of threads.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dbscan_grid.h"

/* Fewest rows (or values) of a block. */
#define MAPS_MIN_GRAIN 4096
/* Most rows (or values) of a block, and between two looks at cancel. */
#define MAPS_CANCEL_EVERY ((int64_t) 1 << 20)

/* What the loops over blocks of one grid dimension share. */
typedef struct maps_job
{
	gc_grid_plan *gp;
	gc_grid_maps *maps;
	int			k;				/* the grid dimension */
	const void *x;				/* [n, gp->d] of element type t */
	gc_dtype	t;
	int64_t		n;
	uint64_t   *key;			/* [n] order keys, sorted by the second step */
	int64_t    *row;			/* [n] their rows */
	const int64_t *cell;		/* [m] the values' grid coordinates (step MAPS_COORDS) */
	int64_t		grain;
	int64_t    *first;			/* [blocks] a count per block, then the block's first place */
	double		side;			/* the side whose steps are summed */
	int64_t		sum;			/* MAPS_EXTENT: added to atomically */
	int			step;
} maps_job;

enum
{
	MAPS_KEYS,					/* key[i], row[i] of rows [b, e) */
	MAPS_COUNT,					/* distinct sorted keys starting in the block */
	MAPS_VALUES,				/* the distinct values, each row's index among them */
	MAPS_EXTENT,				/* the sum of the steps at side */
	MAPS_STEPS,					/* the steps before the block's values, and their sum */
	MAPS_CELLS,					/* the values' grid coordinates: the steps summed */
	MAPS_COORDS					/* the rows' grid coordinates */
};

/* The step before value j (j >= 1) of grid dimension k at side. */
static inline int64_t
maps_step(const maps_job *job, const double *v, int64_t j, double side)
{
	return gc_grid_value_step(v[j - 1], v[j], side, job->gp->f64);
}

static gc_status
maps_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	maps_job   *job = arg;
	int			k = job->k;
	int64_t		blk = b / job->grain;
	const double *v = job->maps->val[k];

	switch (job->step)
	{
		case MAPS_KEYS:
			for (int64_t i = b; i < e; i++)
			{
				/* +0 for -0, so that the two zeros are one value */
				job->key[i] = gc_order_key(gc_grid_x(job->x, job->t,
													 (size_t) (i * job->gp->d + job->gp->dim[k])) + 0.0);
				job->row[i] = i;
			}
			break;
		case MAPS_COUNT:
			{
				int64_t		count = 0;

				for (int64_t i = b; i < e; i++)
					count += i == 0 || job->key[i] != job->key[i - 1];
				job->first[blk] = count;
			}
			break;
		case MAPS_VALUES:
			{
				int64_t		m = job->first[blk];

				for (int64_t i = b; i < e; i++)
				{
					if (i == 0 || job->key[i] != job->key[i - 1])
						job->maps->val[k][m++] = gc_order_value(job->key[i]);
					job->maps->coord[k][job->row[i]] = m - 1;
				}
			}
			break;
		case MAPS_EXTENT:
			{
				int64_t		s = 0;

				for (int64_t j = b > 0 ? b : 1; j < e; j++)
					s += maps_step(job, v, j, job->side);
				__atomic_fetch_add(&job->sum, s, __ATOMIC_RELAXED);
			}
			break;
		case MAPS_STEPS:
			{
				int64_t    *c = job->maps->cell[k];
				int64_t		s = 0;

				for (int64_t j = b; j < e; j++)
				{
					c[j] = j > 0 ? maps_step(job, v, j, job->gp->side) : 0;
					s += c[j];
				}
				job->first[blk] = s;
			}
			break;
		case MAPS_CELLS:
			{
				int64_t    *c = job->maps->cell[k];
				int64_t		s = job->first[blk];

				for (int64_t j = b; j < e; j++)
				{
					s += c[j];
					c[j] = s;
				}
			}
			break;
		case MAPS_COORDS:
			for (int64_t i = b; i < e; i++)
				job->maps->coord[k][i] = job->cell[job->maps->coord[k][i]];
			break;
	}
	return gc_worker_tick(w, e - b, MAPS_CANCEL_EVERY) ? GC_ERR_CANCELLED : GC_OK;
}

/* Runs one step over [0, count) in blocks of job->grain. */
static gc_status
maps_run(gc_core_ctx *ctx, maps_job *job, int step, int64_t count)
{
	job->step = step;
	return gc_pool_for(ctx->pool, count, job->grain, maps_block, job);
}

/*
 * The blocks of count items: at least MAPS_MIN_GRAIN each, and at most
 * MAPS_CANCEL_EVERY, so that a block looks at cancel when it ends (a few
 * milliseconds of work) whatever the input's size.
 */
static int64_t
maps_grain(gc_core_ctx *ctx, int64_t count)
{
	int64_t		g = gc_pool_grain(ctx->pool, count, MAPS_MIN_GRAIN);

	return g < MAPS_CANCEL_EVERY ? g : MAPS_CANCEL_EVERY;
}

/* The argument of maps_extent. */
typedef struct maps_extent_arg
{
	gc_core_ctx *ctx;
	maps_job   *job;
	const int64_t *m;			/* [g] distinct values */
} maps_extent_arg;

/* gc_grid_extent_fn on the call's threads: one more than the sum of the steps at side. */
static int64_t
maps_extent(void *arg, int k, double side)
{
	maps_extent_arg *a = arg;
	maps_job   *job = a->job;

	job->k = k;
	job->side = side;
	job->sum = 0;
	job->grain = maps_grain(a->ctx, a->m[k]);
	if (maps_run(a->ctx, job, MAPS_EXTENT, a->m[k]) != GC_OK)
		return -1;
	return 1 + job->sum;
}

/*
 * The distinct values of grid dimension k, ascending, into maps->val[k],
 * each row's index among them into maps->coord[k]; their number into *m.
 */
static gc_status
maps_values(gc_core_ctx *ctx, maps_job *job, int k, uint64_t *tkey, int64_t *trow, int64_t *m)
{
	int64_t		n = job->n;
	int64_t		blocks;
	gc_status	st;

	job->k = k;
	job->grain = maps_grain(ctx, n);
	blocks = (n + job->grain - 1) / job->grain;
	if ((st = maps_run(ctx, job, MAPS_KEYS, n)) != GC_OK ||
		(st = gc_pool_radix_sort(ctx->pool, job->key, job->row, tkey, trow, n)) != GC_OK ||
		(st = maps_run(ctx, job, MAPS_COUNT, n)) != GC_OK)
		return st;
	*m = gc_block_offsets(job->first, blocks, 0);
	return maps_run(ctx, job, MAPS_VALUES, n);
}

/*
 * The grid coordinates of the m distinct values of grid dimension k at the
 * plan's side into maps->cell[k], and the rows' in maps->coord[k]; the plan
 * points at the tables and gets the extent (gc_grid_map_cells).
 */
static gc_status
maps_cells(gc_core_ctx *ctx, maps_job *job, int k, int64_t m)
{
	gc_grid_plan *gp = job->gp;
	int64_t		blocks;
	gc_status	st;

	job->maps->cell[k] = malloc(sizeof(int64_t) * (size_t) (m > 0 ? m : 1));
	if (!job->maps->cell[k])
		return gc_core_oom(ctx, sizeof(int64_t) * (size_t) (m > 0 ? m : 1),
						   "out of memory planning the grid of %lld points", (long long) job->n);
	job->k = k;
	job->grain = maps_grain(ctx, m);
	blocks = (m + job->grain - 1) / job->grain;
	if ((st = maps_run(ctx, job, MAPS_STEPS, m)) != GC_OK)
		return st;
	gc_block_offsets(job->first, blocks, 0);
	if ((st = maps_run(ctx, job, MAPS_CELLS, m)) != GC_OK)
		return st;
	job->cell = job->maps->cell[k];
	job->grain = maps_grain(ctx, job->n);
	if ((st = maps_run(ctx, job, MAPS_COORDS, job->n)) != GC_OK)
		return st;
	gp->nmap[k] = m;
	gp->map_val[k] = job->maps->val[k];
	gp->map_cell[k] = job->maps->cell[k];
	gp->extent[k] = m > 0 ? job->maps->cell[k][m - 1] + 1 : 1;
	return GC_OK;
}

gc_status
gc_core_grid_maps(gc_core_ctx *ctx, gc_grid_plan *gp, gc_grid_maps *maps, const void *x,
				  gc_dtype t, int64_t n, const double *lo, const double *hi)
{
	double		side0 = gp->side;
	int64_t		m[GC_GRID_MAX_DIMS] = {0, 0, 0};
	int64_t		blocks = (n + MAPS_MIN_GRAIN - 1) / MAPS_MIN_GRAIN;
	size_t		bytes = (2 * sizeof(uint64_t) + 2 * sizeof(int64_t) + sizeof(double) + sizeof(int64_t)) *
		(size_t) n + sizeof(int64_t) * (size_t) blocks;
	uint64_t   *tkey;
	int64_t    *trow;
	maps_job	job;
	maps_extent_arg ext;
	gc_status	st = GC_OK;

	memset(maps, 0, sizeof(*maps));
	memset(&job, 0, sizeof(job));
	job.gp = gp;
	job.maps = maps;
	job.x = x;
	job.t = t;
	job.n = n;
	job.key = malloc(sizeof(uint64_t) * (size_t) n);
	job.row = malloc(sizeof(int64_t) * (size_t) n);
	job.first = malloc(sizeof(int64_t) * (size_t) blocks);
	tkey = malloc(sizeof(uint64_t) * (size_t) n);
	trow = malloc(sizeof(int64_t) * (size_t) n);
	for (int k = 0; k < gp->g; k++)
	{
		maps->val[k] = malloc(sizeof(double) * (size_t) n);
		maps->coord[k] = malloc(sizeof(int64_t) * (size_t) n);
		if (!maps->val[k] || !maps->coord[k])
			st = GC_ERR_OUT_OF_MEMORY;
	}
	if (st != GC_OK || !job.key || !job.row || !job.first || !tkey || !trow)
		st = gc_core_oom(ctx, bytes, "out of memory planning the grid of %lld points", (long long) n);
	for (int k = 0; k < gp->g && st == GC_OK; k++)
	{
		st = maps_values(ctx, &job, k, tkey, trow, &m[k]);
		gp->nmap[k] = m[k];
	}
	free(tkey);
	free(trow);
	free(job.key);
	free(job.row);
	job.key = NULL;
	job.row = NULL;
	if (st == GC_OK)
	{
		ext.ctx = ctx;
		ext.job = &job;
		ext.m = m;
		gp->side = gc_grid_maps_side(gp, maps_extent, &ext, ctx->cancel, ctx->cancel_arg);
		if (gp->side == 0.0)
			st = gc_core_cancel_status(ctx);
	}
	for (int k = 0; k < gp->g && st == GC_OK; k++)
		st = maps_cells(ctx, &job, k, m[k]);
	free(job.first);
	if (st != GC_OK)
		return st;
	return gc_grid_maps_done(gp, side0, lo, hi, ctx->err);
}
