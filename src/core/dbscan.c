/*
 * dbscan.c
 *    DBSCAN on the CPU: exact, deterministic, with a uniform grid index.
 *
 * The answer is a function of the rows (in order), eps, min_pts and the
 * metric alone (see gc_dbscan_params in common/backend.h): a pair is within
 * eps when its dist2 is at most bound = gc_metric_dist2_le(metric, eps)
 * (common/metric.h; for the Euclidean metric that is sqrt(dist2) <= eps,
 * PostGIS's own test), core points within eps of each other share a
 * cluster, a border point joins the cluster of the lowest-index core point
 * within eps, clusters are numbered by their lowest-index member.  The
 * clusters, core points and border assignment are those of PostGIS
 * ST_ClusterDBSCAN evaluated OVER (ORDER BY id) on the same coordinates;
 * the cluster numbers are not (PostGIS numbers clusters by the roots of its
 * union-find, gpuclust by first appearance in query order).  The GPU back
 * end reproduces this answer exactly.
 *
 * Rows are single or double precision (gc_dtype): the points are copied
 * into cell order in their own element type and every distance is
 * gc_dist2 or gc_dist2_f64 of common/portable.h, the same arithmetic on the
 * caller's values.  Cosine: the caller passes unit rows (common/metric.h),
 * and the grid is sized by the Euclidean radius that covers bound
 * (gc_grid_radius of common/dbscan_grid.h).
 *
 * The algorithm follows FDBSCAN of Prokopenko, Lebrun-Grandié and Arndt,
 * "Fast tree-based algorithms for DBSCAN on GPUs", in five phases over one
 * workspace:
 *
 *  index   the grid of common/dbscan_grid.h on min(d, 3) dimensions,
 *          the points sorted by cell so that a cell is a contiguous run;
 *  core    the core points, counting neighbours only up to min_pts; a cell
 *          of the fine grid (FDBSCAN-DenseBox), or on another grid a cell
 *          whose points' bounding box is within eps (dbscan_dense), holding
 *          at least min_pts points is all core without a single distance
 *          computation;
 *  union   core points within eps joined in a disjoint-set forest, each
 *          pair of cells once;
 *  border  each other point takes the lowest-row core point within eps;
 *  number  clusters numbered by their lowest-row member.
 *
 * The grid never changes the answer (its margins are explained in
 * common/dbscan_grid.h), it only skips distance computations that cannot
 * matter.
 *
 * Every phase runs on the call's threads (pool.h), in blocks of cells or
 * rows: a block writes only its own cells' or rows' outputs, the union is a
 * concurrent disjoint-set forest (linking by compare-and-swap, as on the
 * GPU) whose sets, not its shape, are what the later phases read, and the
 * numbering counts clusters per block of rows in row order.  So the answer
 * is the same for any number of threads.  Work is counted in coordinates compared (distance evaluations
 * times d) and cancel is asked every DBSCAN_CANCEL_EVERY of them, so a
 * crowded cell answers cancel as fast as a sparse one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core.h"
#include "dbscan_grid.h"
#include "metric.h"
#include "pair_engine.h"
#include "phases.h"

/* Coordinates compared between two questions to the cancel callback (a few ms). */
#define DBSCAN_CANCEL_EVERY ((int64_t) 1 << 23)
/* Most neighbour cells of one cell: every row at its widest. */
#define DBSCAN_MAX_NBR (GC_GRID_MAX_ROWS * (2 * GC_GRID_MAX_REACH + 1))

/* Everything one DBSCAN call holds; freed by dbscan_ws_free. */
typedef struct dbscan_ws
{
	gc_core_ctx *ctx;
	const void *x;				/* [n, d] the rows, of element type dtype */
	gc_dtype	dtype;
	size_t		esize;			/* bytes per element */
	int64_t		n;
	int32_t		d;
	double		radius;			/* the grid's Euclidean radius (gc_grid_radius) */
	double		bound;			/* a neighbour when dist2 <= bound */
	int64_t		min_pts;

	/* index */
	gc_grid_plan plan;
	gc_grid_maps maps;			/* the tables of a mapped plan */
	void	   *xs;				/* [n, d] points in cell order, of element type dtype */
	int64_t    *perm;			/* [n] sorted position -> row */
	int64_t		ncells;
	int64_t    *cell_start;		/* [ncells + 1] */
	uint64_t   *cell_key;		/* [ncells + DBSCAN_KEY_PAD], ascending, then UINT64_MAX (no key is that high) */

	uint8_t    *dense;			/* [ncells] all members core and one cluster (dbscan_dense) */

	/* the neighbour cells of every cell, listed once (dbscan_nbr_table); NULL: listed per visit */
	int64_t    *nbr_tab;		/* [ncells][plan.max_cells] */
	int32_t    *nbr_count;		/* [ncells] */

	/* by sorted position */
	uint8_t    *core;			/* [n] */
	int64_t    *parent;			/* [n] forest; after border: root or -1 for non-core */
} dbscan_ws;

#define CELL_SIZE(ws, c) ((ws)->cell_start[(c) + 1] - (ws)->cell_start[(c)])

/*
 * The neighbour cells of one cell, as one thread visits a block of cells in
 * ascending order.  One forward cursor per neighbour row of the plan: a
 * row's first key only grows as the cells are visited in ascending order,
 * so after a binary search at the block's first cell the cursor finds the
 * row's cells without any lookup.
 */
typedef struct dbscan_nbrs
{
	int64_t		cursor[GC_GRID_MAX_ROWS];	/* -1: not placed yet */
	int64_t		nbr[DBSCAN_MAX_NBR];	/* neighbour cells of one cell */
} dbscan_nbrs;

/* Cells (or rows) per block of a parallel loop, whatever the thread count. */
#define DBSCAN_CELL_GRAIN 256
/* Keys of UINT64_MAX past the last cell: a neighbour row's widest span. */
#define DBSCAN_KEY_PAD (2 * GC_GRID_MAX_REACH + 1)
#define DBSCAN_ROW_GRAIN 65536
/* Most entries of the table of neighbour cells (dbscan_nbr_table): 16 MB. */
#ifndef DBSCAN_NBR_TABLE_MAX
#define DBSCAN_NBR_TABLE_MAX ((size_t) 1 << 21)
#endif

/*
 * malloc for the buffers of n rows, with transparent huge pages asked for
 * (MADV_HUGEPAGE) over their whole 2 MB extents: each call writes its
 * buffers once, and a PostgreSQL backend gets them as fresh memory, so
 * with 4 kB pages a 2M-row call spends about a fifth of its time in page
 * faults (100 ms of 480 on one thread), which two threads do not share
 * well.  Advice only: where the kernel does not follow it (THP "never"),
 * the pages are ordinary.
 */
static void *
dbscan_big_alloc(size_t bytes)
{
	void	   *p = malloc(bytes);

#ifdef MADV_HUGEPAGE
	if (p != NULL && bytes >= ((size_t) 4 << 20))
	{
		const uintptr_t huge = (uintptr_t) 2 << 20;
		uintptr_t	lo = ((uintptr_t) p + huge - 1) & ~(huge - 1);
		uintptr_t	hi = ((uintptr_t) p + bytes) & ~(huge - 1);

		if (hi > lo)
			(void) madvise((void *) lo, hi - lo, MADV_HUGEPAGE);
	}
#endif
	return p;
}

/* Fills the workspace with the input, no buffer yet. */
static void
dbscan_ws_init(dbscan_ws *ws, gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n,
			   int32_t d, const gc_dbscan_params *params)
{
	memset(ws, 0, sizeof(*ws));
	ws->ctx = ctx;
	ws->x = x;
	ws->dtype = dtype;
	ws->esize = gc_dtype_size(dtype);
	ws->n = n;
	ws->d = d;
	ws->bound = gc_metric_dist2_le(params->metric, params->eps);
	ws->radius = gc_grid_radius(params->metric, params->eps, ws->bound, d);
	ws->min_pts = params->min_pts;
}

/* The point at sorted position i. */
static inline const void *
ws_point(const dbscan_ws *ws, int64_t i)
{
	return (const char *) ws->xs + (size_t) i * (size_t) ws->d * ws->esize;
}

/* dist2 of two points of the workspace's element type (common/portable.h). */
static inline double
ws_dist2(const dbscan_ws *ws, const void *a, const void *b)
{
	return ws->dtype == GC_F64 ? gc_dist2_f64((const double *) a, (const double *) b, ws->d)
		: gc_dist2((const float *) a, (const float *) b, ws->d);
}

/* Frees every buffer of the workspace. */
static void
dbscan_ws_free(dbscan_ws *ws)
{
	free(ws->xs);
	free(ws->perm);
	free(ws->cell_start);
	free(ws->cell_key);
	free(ws->dense);
	free(ws->nbr_tab);
	free(ws->nbr_count);
	free(ws->core);
	free(ws->parent);
	gc_grid_maps_free(&ws->maps);
	memset(ws, 0, sizeof(*ws));
}

/*
 * Adds pairs distance evaluations (or as much other work) to the thread's
 * work done; every DBSCAN_CANCEL_EVERY coordinates the caller's thread asks
 * the cancel callback and the others look at the stop flag.
 */
static inline int
dbscan_tick(const dbscan_ws *ws, gc_worker *w, int64_t pairs)
{
	return gc_worker_tick(w, (pairs + 1) * ws->d, DBSCAN_CANCEL_EVERY);
}

/* ---------------------------------------------------------------- index */

/* The key of a cell: its coordinates, the last dimension varying fastest. */
static uint64_t
cell_key_of(const gc_grid_plan *plan, const int64_t *coord)
{
	uint64_t	key = 0;

	for (int k = 0; k < plan->g; k++)
		key = key * (uint64_t) plan->extent[k] + (uint64_t) coord[k];
	return key;
}

/* The range of the points in the chosen dimensions, one block of rows at a time. */
typedef struct dbscan_range_job
{
	const dbscan_ws *ws;
	int32_t		g;
	const int32_t *dims;
	double	   *lohi;			/* [blocks][2][g] */
} dbscan_range_job;

static gc_status
dbscan_range_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_range_job *job = arg;
	const dbscan_ws *ws = job->ws;
	double	   *lo = job->lohi + (b / DBSCAN_ROW_GRAIN) * 2 * job->g;
	double	   *hi = lo + job->g;

	for (int k = 0; k < job->g; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t i = b; i < e; i++)
		for (int k = 0; k < job->g; k++)
		{
			double		v = gc_grid_x(ws->x, ws->dtype, (size_t) (i * ws->d + job->dims[k]));

			if (v < lo[k])
				lo[k] = v;
			if (v > hi[k])
				hi[k] = v;
		}
	return dbscan_tick(ws, w, (e - b) * job->g / ws->d) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * Plans the grid: its dimensions, the range of the points there, and the
 * maps when the range does not fit the direct numbering.
 */
static gc_status
dbscan_plan(dbscan_ws *ws)
{
	gc_grid_plan *plan = &ws->plan;
	int32_t		g = ws->d < GC_GRID_MAX_DIMS ? ws->d : GC_GRID_MAX_DIMS;
	int32_t		dims[GC_GRID_MAX_DIMS];
	double		lo[GC_GRID_MAX_DIMS];
	double		hi[GC_GRID_MAX_DIMS];
	gc_status	st;

	int64_t		blocks = (ws->n + DBSCAN_ROW_GRAIN - 1) / DBSCAN_ROW_GRAIN;
	dbscan_range_job job;

	if (gc_grid_choose_dims(ws->x, ws->dtype, ws->n, ws->d, ws->radius, dims) != 0)
		return gc_core_oom(ws->ctx, sizeof(double) * GC_GRID_SAMPLE,
						   "out of memory planning the DBSCAN grid");
	job.ws = ws;
	job.g = g;
	job.dims = dims;
	job.lohi = malloc(sizeof(double) * 2 * g * (size_t) blocks);
	if (!job.lohi)
		return gc_core_oom(ws->ctx, sizeof(double) * 2 * g * (size_t) blocks,
						   "out of memory planning the DBSCAN grid");
	if ((st = gc_pool_for(ws->ctx->pool, ws->n, DBSCAN_ROW_GRAIN, dbscan_range_block, &job)) != GC_OK)
	{
		free(job.lohi);
		return st;
	}
	for (int k = 0; k < g; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
		for (int64_t b = 0; b < blocks; b++)
		{
			if (job.lohi[b * 2 * g + k] < lo[k])
				lo[k] = job.lohi[b * 2 * g + k];
			if (job.lohi[b * 2 * g + g + k] > hi[k])
				hi[k] = job.lohi[b * 2 * g + g + k];
		}
	}
	free(job.lohi);
	st = gc_grid_plan_make(plan, ws->d, ws->dtype, ws->radius, ws->bound, dims, lo, hi, 0,
						   ws->ctx->err);
	if (st == GC_OK && plan->mapped)
		st = gc_core_grid_maps(ws->ctx, plan, &ws->maps, ws->x, ws->dtype, ws->n, lo, hi);
	if (st == GC_ERR_CANCELLED)
		return gc_core_cancel_status(ws->ctx);
	if (st != GC_OK)
		return st;
	if (plan->max_cells > DBSCAN_MAX_NBR)
		return gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
							"DBSCAN grid with %d neighbour cells; please report a bug",
							plan->max_cells);
	gc_core_debug(ws->ctx, "DBSCAN grid: side %g, dimensions %d %d %d of %d, %s, dense cells %s, reach %d, %d rows",
				  plan->side, plan->dim[0], plan->g > 1 ? plan->dim[1] : -1,
				  plan->g > 2 ? plan->dim[2] : -1, plan->d, plan->mapped ? "mapped" : "direct",
				  plan->dense_ok ? "on" : "off", plan->reach, plan->nrows);
	return GC_OK;
}

/*
 * The cell table and the points in cell order, in two loops over blocks of
 * rows: the first copies the block's points into cell order and counts the
 * cells that start in it (a row whose key differs from the row before);
 * after a prefix sum of the counts in block order, the second writes the
 * starts and keys of those cells at their places.  So the table is the
 * serial walk's for any number of threads.
 */
typedef struct dbscan_cells_job
{
	dbscan_ws  *ws;
	const uint64_t *key;
	const int64_t *row;
	int64_t		grain;
	int64_t    *first;			/* [blocks] cells starting in the block; then the first one's index */
	int			step;
} dbscan_cells_job;

static gc_status
dbscan_cells_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_cells_job *job = arg;
	dbscan_ws  *ws = job->ws;
	const uint64_t *key = job->key;
	size_t		rowbytes = ws->esize * (size_t) ws->d;
	int64_t		blk = b / job->grain;

	if (job->step == 0)
	{
		int64_t		count = 0;

		for (int64_t i = b; i < e; i++)
		{
			ws->perm[i] = job->row[i];
			memcpy((char *) ws->xs + (size_t) i * rowbytes,
				   (const char *) ws->x + (size_t) job->row[i] * rowbytes, rowbytes);
			count += i == 0 || key[i] != key[i - 1];
		}
		job->first[blk] = count;
	}
	else
	{
		int64_t		c = job->first[blk];

		for (int64_t i = b; i < e; i++)
			if (i == 0 || key[i] != key[i - 1])
			{
				ws->cell_start[c] = i;
				ws->cell_key[c] = key[i];
				c++;
			}
	}
	return dbscan_tick(ws, w, e - b) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * The cell table and the points in cell order, from the keys and rows
 * sorted by key, on the threads (wide rows make the copy long, and a grid
 * of about one point per cell has as many cells as points).
 */
static gc_status
dbscan_cells(dbscan_ws *ws, const uint64_t *key, const int64_t *row)
{
	dbscan_cells_job job;
	gc_status	st = GC_OK;
	int64_t		n = ws->n;
	int32_t		d = ws->d;
	size_t		bytes = ws->esize * (size_t) n * d + sizeof(int64_t) * (size_t) n +
		sizeof(int64_t) * (size_t) (n + 1) + sizeof(uint64_t) * (size_t) (n + DBSCAN_KEY_PAD);
	int64_t		blocks;
	int64_t		ncells = 0;

	ws->xs = dbscan_big_alloc(ws->esize * (size_t) n * d);
	ws->perm = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	ws->cell_start = dbscan_big_alloc(sizeof(int64_t) * (size_t) (n + 1));
	ws->cell_key = dbscan_big_alloc(sizeof(uint64_t) * (size_t) (n + DBSCAN_KEY_PAD));
	job.ws = ws;
	job.key = key;
	job.row = row;
	/* at most 2^20 rows a block: each block answers cancel when it ends */
	job.grain = gc_pool_grain(ws->ctx->pool, n, 4096);
	if (job.grain > ((int64_t) 1 << 20))
		job.grain = (int64_t) 1 << 20;
	blocks = (n + job.grain - 1) / job.grain;
	job.first = malloc(sizeof(int64_t) * (size_t) blocks);
	if (!ws->xs || !ws->perm || !ws->cell_start || !ws->cell_key || !job.first)
	{
		free(job.first);
		return gc_core_oom(ws->ctx, bytes + sizeof(int64_t) * (size_t) blocks,
						   "out of memory for the grid of %lld points", (long long) n);
	}
	for (job.step = 0; job.step < 2 && st == GC_OK; job.step++)
	{
		if (job.step == 1)
			ncells = gc_block_offsets(job.first, blocks, ncells);
		st = gc_pool_for(ws->ctx->pool, n, job.grain, dbscan_cells_block, &job);
	}
	free(job.first);
	if (st != GC_OK)
		return st;
	ws->ncells = ncells;
	ws->cell_start[ws->ncells] = n;
	for (int k = 0; k < DBSCAN_KEY_PAD; k++)
		ws->cell_key[ws->ncells + k] = UINT64_MAX;
	return GC_OK;
}

/* The cell keys of a block of rows. */
typedef struct dbscan_key_job
{
	dbscan_ws  *ws;
	uint64_t   *key;
	int64_t    *row;
} dbscan_key_job;

static gc_status
dbscan_key_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_key_job *job = arg;
	dbscan_ws  *ws = job->ws;

	for (int64_t i = b; i < e; i++)
	{
		int64_t		coord[GC_GRID_MAX_DIMS];

		for (int k = 0; k < ws->plan.g; k++)
			coord[k] = ws->plan.mapped ? ws->maps.coord[k][i] :
				gc_grid_cell_of(&ws->plan,
								gc_grid_x(ws->x, ws->dtype, (size_t) (i * ws->d + ws->plan.dim[k])), k);
		job->key[i] = cell_key_of(&ws->plan, coord);
		job->row[i] = i;
	}
	return dbscan_tick(ws, w, (e - b) * ws->plan.g / ws->d) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * Phase index: plans the grid, sorts the points by cell (a stable radix
 * sort, so rows that share a cell stay in row order) and builds the cell
 * table.
 */
static gc_status
dbscan_index(dbscan_ws *ws)
{
	int64_t		n = ws->n;
	size_t		bytes = 2 * (sizeof(uint64_t) + sizeof(int64_t)) * (size_t) n;
	uint64_t   *key;
	int64_t    *row;
	uint64_t   *tkey;
	int64_t    *trow;
	gc_status	st = GC_OK;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = dbscan_plan(ws)) != GC_OK)
		return st;
	key = dbscan_big_alloc(sizeof(uint64_t) * (size_t) n);
	row = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	tkey = dbscan_big_alloc(sizeof(uint64_t) * (size_t) n);
	trow = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	if (!key || !row || !tkey || !trow)
		st = gc_core_oom(ws->ctx, bytes, "out of memory sorting %lld points", (long long) n);
	if (st == GC_OK)
	{
		dbscan_key_job job = {ws, key, row};

		st = gc_pool_for(ws->ctx->pool, n, DBSCAN_ROW_GRAIN, dbscan_key_block, &job);
	}
	if (st == GC_OK)
		st = gc_pool_radix_sort(ws->ctx->pool, key, row, tkey, trow, n);
	free(tkey);
	free(trow);
	if (st == GC_OK)
		st = dbscan_cells(ws, key, row);
	free(key);
	free(row);
	return st;
}

/* Rewinds the cursors for a new visit of cells in ascending order, from any cell. */
static void
grid_rewind(dbscan_nbrs *nb)
{
	for (int t = 0; t < GC_GRID_MAX_ROWS; t++)
		nb->cursor[t] = -1;
}

/* The first cell whose key is at least key. */
static int64_t
grid_lower_bound(const dbscan_ws *ws, uint64_t key)
{
	int64_t		lo = 0;
	int64_t		hi = ws->ncells;

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (ws->cell_key[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Lists the existing neighbour cells of cell c (c itself included) into
 * out[plan.max_cells], in ascending order of the rows of the plan, and
 * returns their number.  Calls between two rewinds must come in ascending c.
 */
static int32_t
grid_neighbours(const dbscan_ws *ws, dbscan_nbrs *nb, int64_t c, int64_t *out)
{
	const gc_grid_plan *plan = &ws->plan;
	int64_t		coord[GC_GRID_MAX_DIMS];
	uint64_t	key = ws->cell_key[c];
	int			pre = plan->g - 1;
	int64_t		last_extent = plan->extent[pre];
	int32_t		m = 0;

	/* the key's coordinates; the first is what is left (keys are below the extents' product) */
	for (int k = plan->g - 1; k > 0; k--)
	{
		coord[k] = (int64_t) (key % (uint64_t) plan->extent[k]);
		key /= (uint64_t) plan->extent[k];
	}
	coord[0] = (int64_t) key;
	for (int32_t t = 0; t < plan->nrows; t++)
	{
		int64_t		half = plan->row_half[t];
		uint64_t	base = 0;
		uint64_t	lo;
		uint64_t	hi;
		int			inside = 1;
		int64_t		j;

		for (int k = 0; k < pre; k++)
		{
			int64_t		p = coord[k] + plan->row_off[t][k];

			if (p < 0 || p >= plan->extent[k])
			{
				inside = 0;
				break;
			}
			base = base * (uint64_t) plan->extent[k] + (uint64_t) p;
		}
		if (!inside)
			continue;
		base *= (uint64_t) last_extent;
		lo = base + (uint64_t) (coord[pre] - half > 0 ? coord[pre] - half : 0);
		hi = base + (uint64_t) (coord[pre] + half < last_extent - 1 ? coord[pre] + half : last_extent - 1);
		j = nb->cursor[t];
		if (j < 0)
			j = grid_lower_bound(ws, lo);
		/* the key after the last stops the walk */
		while (ws->cell_key[j] < lo)
			j++;
		nb->cursor[t] = j;
		/*
		 * At most hi - lo + 1 cells lie in [lo, hi], the first ones from j
		 * (keys ascend): each is written, and counted when it is in.
		 */
		for (uint64_t q = 0; q <= hi - lo; q++)
		{
			out[m] = j + (int64_t) q;
			m += ws->cell_key[j + (int64_t) q] <= hi;
		}
	}
	return m;
}

/*
 * The neighbour cells of cell c: from the table when there is one, else
 * listed into nb->nbr (calls between two rewinds in ascending c).
 */
static inline int32_t
cell_nbrs(const dbscan_ws *ws, dbscan_nbrs *nb, int64_t c, const int64_t **list)
{
	if (ws->nbr_tab != NULL)
	{
		*list = ws->nbr_tab + (size_t) c * (size_t) ws->plan.max_cells;
		return ws->nbr_count[c];
	}
	*list = nb->nbr;
	return grid_neighbours(ws, nb, c, nb->nbr);
}

/* One block of cells of the neighbour table. */
static gc_status
dbscan_nbr_block(void *arg, gc_worker *w, int64_t cb, int64_t ce)
{
	dbscan_ws  *ws = arg;
	dbscan_nbrs nb;
	int64_t		listed = 0;

	grid_rewind(&nb);
	for (int64_t c = cb; c < ce; c++)
	{
		ws->nbr_count[c] = grid_neighbours(ws, &nb, c,
										   ws->nbr_tab + (size_t) c * (size_t) ws->plan.max_cells);
		listed += ws->nbr_count[c];
	}
	return dbscan_tick(ws, w, listed / ws->d) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * The neighbour cells of every cell, listed once for the three phases that
 * visit them (core, union, border) when the table is small
 * (DBSCAN_NBR_TABLE_MAX entries): a grid of few points per cell spends most
 * of its time finding neighbour cells.  Without memory for it, or larger,
 * each phase lists them as it goes; the lists are the same either way.
 */
static gc_status
dbscan_nbr_table(dbscan_ws *ws)
{
	size_t		entries = (size_t) ws->ncells * (size_t) ws->plan.max_cells;

	if (ws->ncells < 2 || entries > DBSCAN_NBR_TABLE_MAX)
		return GC_OK;
	ws->nbr_tab = malloc(sizeof(int64_t) * entries);
	ws->nbr_count = malloc(sizeof(int32_t) * (size_t) ws->ncells);
	if (!ws->nbr_tab || !ws->nbr_count)
	{
		free(ws->nbr_tab);
		free(ws->nbr_count);
		ws->nbr_tab = NULL;
		ws->nbr_count = NULL;
		return GC_OK;
	}
	return gc_pool_for(ws->ctx->pool, ws->ncells, DBSCAN_CELL_GRAIN, dbscan_nbr_block, ws);
}

/* ---------------------------------------------------------------- core */

/*
 * Whether the points [s, e) are all within eps of each other: the dist2 of
 * the corners of their bounding box, computed as gc_dist2_f64 computes a
 * distance (on the coordinates as doubles, exact for float rows), is at
 * most bound.  Every pair's computed dist2 is then at most the corners'
 * (each difference is at most the box's in that dimension, and rounding
 * keeps that order), so the test is exact.  lo, hi: scratch [d].
 */
static int
dbscan_clique(const dbscan_ws *ws, int64_t s, int64_t e, double *lo, double *hi)
{
	int32_t		d = ws->d;
	size_t		base = (size_t) s * d;

	for (int32_t k = 0; k < d; k++)
		lo[k] = hi[k] = gc_grid_x(ws->xs, ws->dtype, base + k);
	for (int64_t i = s + 1; i < e; i++)
	{
		base = (size_t) i * d;
		for (int32_t k = 0; k < d; k++)
		{
			double		v = gc_grid_x(ws->xs, ws->dtype, base + k);

			if (v < lo[k])
				lo[k] = v;
			if (v > hi[k])
				hi[k] = v;
		}
	}
	return gc_dist2_f64(lo, hi, d) <= ws->bound;
}

/*
 * One block of cells of phase core.  First ws->dense: the cells holding at
 * least min_pts points that are all within eps of each other, so that every
 * member is core and all are one cluster without a distance computation:
 * every such cell of the fine grid (FDBSCAN-DenseBox), and on other grids
 * the cells whose points' bounding box says so (duplicates, tight groups:
 * without this one cell of n equal points would cost n^2 / 2 steps in the
 * union).  Then the core points of the other cells, counting neighbours
 * only up to min_pts.
 */
static gc_status
dbscan_core_block(void *arg, gc_worker *w, int64_t cb, int64_t ce)
{
	dbscan_ws  *ws = arg;
	int32_t		d = ws->d;
	int			dense_ok = ws->plan.dense_ok;
	dbscan_nbrs nb;
	const int64_t *nbr;
	double	   *lo = NULL;
	double	   *hi = NULL;
	gc_status	st = GC_OK;

	if (!dense_ok)
	{
		lo = malloc(sizeof(double) * (size_t) d);
		hi = malloc(sizeof(double) * (size_t) d);
		if (!lo || !hi)
		{
			free(lo);
			free(hi);
			gc_error_set(&w->err, GC_ERR_OUT_OF_MEMORY, "out of memory for the dense cells");
			return GC_ERR_OUT_OF_MEMORY;
		}
	}
	grid_rewind(&nb);
	for (int64_t c = cb; c < ce && st == GC_OK; c++)
	{
		int64_t		s = ws->cell_start[c];
		int64_t		size = CELL_SIZE(ws, c);
		int32_t		m;

		if (size >= ws->min_pts)
		{
			ws->dense[c] = dense_ok || dbscan_clique(ws, s, s + size, lo, hi);
			if (!dense_ok && dbscan_tick(ws, w, size))
				st = GC_ERR_CANCELLED;
		}
		if (ws->dense[c])
		{
			memset(ws->core + s, 1, (size_t) size);
			continue;
		}
		m = cell_nbrs(ws, &nb, c, &nbr);
		for (int64_t i = s; i < s + size && st == GC_OK; i++)
		{
			const void *xi = ws_point(ws, i);
			int64_t		count = dense_ok ? size : 0;
			int64_t		evals = m;

			for (int32_t t = 0; t < m && count < ws->min_pts && st == GC_OK; t++)
			{
				int64_t		nc = nbr[t];

				if (dense_ok && nc == c)
					continue;
				for (int64_t j = ws->cell_start[nc]; j < ws->cell_start[nc + 1]; j++)
				{
					evals++;
					if (ws_dist2(ws, xi, ws_point(ws, j)) <= ws->bound &&
						++count >= ws->min_pts)
						break;
					if ((evals & 4095) == 0 && dbscan_tick(ws, w, 4096))
					{
						st = GC_ERR_CANCELLED;
						break;
					}
				}
			}
			ws->core[i] = count >= ws->min_pts;
			if (st == GC_OK && dbscan_tick(ws, w, evals & 4095))
				st = GC_ERR_CANCELLED;
		}
	}
	free(lo);
	free(hi);
	return st;
}

/* Phase core: the dense cells and the core points, in blocks of cells. */
static gc_status
dbscan_core(dbscan_ws *ws)
{
	int64_t		n = ws->n;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	ws->core = calloc((size_t) n, 1);
	ws->parent = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	ws->dense = calloc((size_t) ws->ncells, 1);
	if (!ws->core || !ws->parent || !ws->dense)
		return gc_core_oom(ws->ctx, (size_t) n + sizeof(int64_t) * (size_t) n + (size_t) ws->ncells,
						   "out of memory for DBSCAN of %lld points", (long long) n);
	return gc_pool_for(ws->ctx->pool, ws->ncells, DBSCAN_CELL_GRAIN, dbscan_core_block, ws);
}

/* ---------------------------------------------------------------- union */

/*
 * The disjoint-set forest is shared by the threads: a link is a
 * compare-and-swap of a root's parent from itself to the smaller root, path
 * halving stores an ancestor into a non-root's parent (always valid, as a
 * non-root's parent only ever moves up).  Its sets do not depend on the
 * order of the links, and every later phase reads only the sets.
 */
static inline int64_t
uf_load(const int64_t *parent, int64_t a)
{
	return __atomic_load_n(&parent[a], __ATOMIC_RELAXED);
}

/* Disjoint-set find with path halving. */
static inline int64_t
uf_find(int64_t *parent, int64_t a)
{
	for (;;)
	{
		int64_t		p = uf_load(parent, a);
		int64_t		gp;

		if (p == a)
			return a;
		gp = uf_load(parent, p);
		if (gp != p)
			__atomic_store_n(&parent[a], gp, __ATOMIC_RELAXED);
		a = gp;
	}
}

/* Union by smaller root index, so a root is its set's lowest sorted position. */
static inline void
uf_union(int64_t *parent, int64_t a, int64_t b)
{
	for (;;)
	{
		int64_t		lo;
		int64_t		hi;

		a = uf_find(parent, a);
		b = uf_find(parent, b);
		if (a == b)
			return;
		lo = a < b ? a : b;
		hi = a < b ? b : a;
		if (__atomic_compare_exchange_n(&parent[hi], &hi, lo, 0,
										__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
	}
}

/* Within eps: the points at sorted positions i and j. */
static inline int
dbscan_near(const dbscan_ws *ws, int64_t i, int64_t j)
{
	return ws_dist2(ws, ws_point(ws, i), ws_point(ws, j)) <= ws->bound;
}

/*
 * Joins the core points within eps of each other among [s, e) x [ns, ne),
 * i < j when same.  Returns 1 when cancelled.
 */
static int
union_plain(dbscan_ws *ws, gc_worker *w, int64_t s, int64_t e, int64_t ns, int64_t ne, int same)
{
	for (int64_t i = s; i < e; i++)
	{
		int64_t		j0 = same ? i + 1 : ns;

		if (!ws->core[i])
			continue;
		for (int64_t j = j0; j < ne; j++)
			if (ws->core[j] && uf_find(ws->parent, i) != uf_find(ws->parent, j) &&
				dbscan_near(ws, i, j))
				uf_union(ws->parent, i, j);
		if (dbscan_tick(ws, w, ne - j0))
			return 1;
	}
	return 0;
}

/*
 * Joins a dense cell [ds, de), a single connected set, with the core points
 * of the other cell [os, oe): each needs one neighbour in the dense cell,
 * and when both cells are dense one pair settles everything.  Returns 1
 * when cancelled.
 */
static int
union_dense(dbscan_ws *ws, gc_worker *w, int64_t ds, int64_t de, int64_t os, int64_t oe,
			int both_dense)
{
	for (int64_t j = os; j < oe; j++)
	{
		int			hit = 0;
		int64_t		i;

		if (!ws->core[j] || uf_find(ws->parent, j) == uf_find(ws->parent, ds))
			continue;
		for (i = ds; i < de && !hit; i++)
			if (dbscan_near(ws, i, j))
			{
				uf_union(ws->parent, i, j);
				hit = 1;
			}
		if (dbscan_tick(ws, w, i - ds))
			return 1;
		if (hit && both_dense)
			break;
	}
	return 0;
}

/* Joins the core points of cells c and nc (nc >= c) that lie within eps; 1 when cancelled. */
static int
union_cells(dbscan_ws *ws, gc_worker *w, int64_t c, int64_t nc)
{
	int64_t		s = ws->cell_start[c];
	int64_t		e = ws->cell_start[c + 1];
	int64_t		ns = ws->cell_start[nc];
	int64_t		ne = ws->cell_start[nc + 1];
	int			c_dense = ws->dense[c];
	int			n_dense = ws->dense[nc];

	if (nc == c && c_dense)
	{
		for (int64_t i = s + 1; i < e; i++)
			uf_union(ws->parent, s, i);
		return dbscan_tick(ws, w, e - s);
	}
	if (nc == c)
		return union_plain(ws, w, s, e, s, e, 1);
	if (c_dense)
		return union_dense(ws, w, s, e, ns, ne, n_dense);
	if (n_dense)
		return union_dense(ws, w, ns, ne, s, e, 0);
	return union_plain(ws, w, s, e, ns, ne, 0);
}

/* Whether cell c holds a core point. */
static inline int
cell_has_core(const dbscan_ws *ws, int64_t c)
{
	for (int64_t i = ws->cell_start[c]; i < ws->cell_start[c + 1]; i++)
		if (ws->core[i])
			return 1;
	return 0;
}

/*
 * One block of cells of phase union: each cell with its neighbours of
 * larger index.  A cell without a core point joins nothing (every union
 * takes a core point of each cell), so its neighbour cells are not listed:
 * on data that is mostly noise that is most cells.
 */
static gc_status
dbscan_union_block(void *arg, gc_worker *w, int64_t cb, int64_t ce)
{
	dbscan_ws  *ws = arg;
	dbscan_nbrs nb;
	const int64_t *nbr;

	grid_rewind(&nb);
	for (int64_t c = cb; c < ce; c++)
	{
		int32_t		m;

		if (!cell_has_core(ws, c))
		{
			if (dbscan_tick(ws, w, CELL_SIZE(ws, c)))
				return GC_ERR_CANCELLED;
			continue;
		}
		m = cell_nbrs(ws, &nb, c, &nbr);

		for (int32_t t = 0; t < m; t++)
		{
			int64_t		nc = nbr[t];

			if (nc < c)
				continue;
			if (union_cells(ws, w, c, nc))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* Parent of every point itself, in blocks of rows. */
static gc_status
dbscan_forest_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_ws  *ws = arg;

	for (int64_t i = b; i < e; i++)
		ws->parent[i] = i;
	return GC_OK;
}

/* Phase union: joins core points within eps, each pair of cells once. */
static gc_status
dbscan_union(dbscan_ws *ws)
{
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = gc_pool_for(ws->ctx->pool, ws->n, DBSCAN_ROW_GRAIN, dbscan_forest_block, ws)) != GC_OK)
		return st;
	return gc_pool_for(ws->ctx->pool, ws->ncells, DBSCAN_CELL_GRAIN, dbscan_union_block, ws);
}

/* ---------------------------------------------------------------- border */

/*
 * The sorted position of the lowest-row core point within eps of the
 * non-core point at position i, or -1, among the m neighbour cells listed.
 * Rows within a cell are in order, so the first hit in a cell is that
 * cell's best.  *evals: the points looked at.
 */
static int64_t
border_best(const dbscan_ws *ws, const int64_t *nbr, int64_t i, int32_t m, int64_t *evals)
{
	const void *xi = ws_point(ws, i);
	int64_t		best = -1;

	for (int32_t t = 0; t < m; t++)
	{
		int64_t		nc = nbr[t];

		for (int64_t j = ws->cell_start[nc]; j < ws->cell_start[nc + 1]; j++)
		{
			(*evals)++;
			if (best >= 0 && ws->perm[j] >= ws->perm[best])
				break;
			if (ws->core[j] && ws_dist2(ws, xi, ws_point(ws, j)) <= ws->bound)
			{
				best = j;
				break;
			}
		}
	}
	return best;
}

/*
 * One block of cells of phase border: a border point joins the cluster of
 * the lowest-row core point within eps.  parent[] of a non-core point
 * becomes the root of that core point, or -1 for noise.  The union is over,
 * so the roots are final; other threads' finds only walk core points.
 */
static gc_status
dbscan_border_block(void *arg, gc_worker *w, int64_t cb, int64_t ce)
{
	dbscan_ws  *ws = arg;
	dbscan_nbrs nb;
	const int64_t *nbr = NULL;

	grid_rewind(&nb);
	for (int64_t c = cb; c < ce; c++)
	{
		int32_t		m = -1;

		for (int64_t i = ws->cell_start[c]; i < ws->cell_start[c + 1]; i++)
		{
			int64_t		best;
			int64_t		evals = 0;

			if (ws->core[i])
				continue;
			if (m < 0)
				m = cell_nbrs(ws, &nb, c, &nbr);
			evals = m;
			best = border_best(ws, nbr, i, m, &evals);
			ws->parent[i] = best >= 0 ? uf_find(ws->parent, best) : -1;
			if (dbscan_tick(ws, w, evals))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* Phase border, in blocks of cells. */
static gc_status
dbscan_border(dbscan_ws *ws)
{
	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	return gc_pool_for(ws->ctx->pool, ws->ncells, DBSCAN_CELL_GRAIN, dbscan_border_block, ws);
}

/* ---------------------------------------------------------------- number */

/*
 * Numbering clusters by their lowest-row member, in four loops over blocks
 * of DBSCAN_ROW_GRAIN: each point's root (and pos, row -> sorted position);
 * first[root], the lowest row of each cluster; per block, the clusters
 * whose lowest row lies in it; then, after a prefix sum over the blocks in
 * order, the numbers and the result.
 */
typedef struct dbscan_number_job
{
	dbscan_ws  *ws;
	gc_dbscan_result *result;
	int64_t    *pos;			/* [n] row -> sorted position */
	int64_t    *first;			/* [n] by root position: lowest row; then its cluster id */
	int64_t    *block_count;	/* [blocks] clusters first met in the block; then its first id */
	int			step;
} dbscan_number_job;

static gc_status
dbscan_number_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_number_job *job = arg;
	dbscan_ws  *ws = job->ws;
	int64_t    *parent = ws->parent;
	int64_t		blk = b / DBSCAN_ROW_GRAIN;

	switch (job->step)
	{
		case 0:
			/* by sorted position: the root, or -1 for noise; pos */
			for (int64_t i = b; i < e; i++)
			{
				if (ws->core[i])
					__atomic_store_n(&parent[i], uf_find(parent, i), __ATOMIC_RELAXED);
				job->pos[ws->perm[i]] = i;
				job->first[i] = INT64_MAX;
			}
			break;
		case 1:
			/* by row: the lowest row of each cluster (an atomic minimum, written only when lower) */
			for (int64_t row = b; row < e; row++)
			{
				int64_t		root = parent[job->pos[row]];
				int64_t		cur;

				if (root < 0)
					continue;
				cur = __atomic_load_n(&job->first[root], __ATOMIC_RELAXED);
				while (row < cur &&
					   !__atomic_compare_exchange_n(&job->first[root], &cur, row, 0,
													__ATOMIC_RELAXED, __ATOMIC_RELAXED))
					;
			}
			break;
		case 2:
			/* by row: the clusters whose lowest row is in this block */
			{
				int64_t		count = 0;

				for (int64_t row = b; row < e; row++)
				{
					int64_t		root = parent[job->pos[row]];

					count += root >= 0 && job->first[root] == row;
				}
				job->block_count[blk] = count;
			}
			break;
		case 3:
			/* by row: a cluster's id at its lowest row, numbered in row order */
			{
				int64_t		id = job->block_count[blk];

				for (int64_t row = b; row < e; row++)
				{
					int64_t		root = parent[job->pos[row]];

					/* other blocks read first[root] meanwhile: only its lowest row writes it */
					if (root >= 0 && __atomic_load_n(&job->first[root], __ATOMIC_RELAXED) == row)
						__atomic_store_n(&job->first[root], -2 - id++, __ATOMIC_RELAXED);
				}
			}
			break;
		case 4:
			/* by row: the result */
			for (int64_t row = b; row < e; row++)
			{
				int64_t		i = job->pos[row];
				int64_t		root = parent[i];

				job->result->is_core[row] = ws->core[i];
				job->result->cluster[row] = root < 0 ? -1 : (int32_t) (-2 - job->first[root]);
			}
			break;
	}
	return dbscan_tick(ws, w, (e - b) / ws->d) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * The same numbering for one block of rows, in one walk over the rows in
 * order: a cluster's number is given at its first row met, its lowest
 * (the loops above spend more time starting and synchronizing than
 * numbering a small call's rows).
 */
static gc_status
dbscan_number_walk(dbscan_ws *ws, gc_dbscan_result *result)
{
	int64_t		n = ws->n;
	int64_t    *pos = malloc(sizeof(int64_t) * (size_t) n);	/* row -> sorted position */
	int64_t    *id = malloc(sizeof(int64_t) * (size_t) n);	/* root position -> cluster id */
	int64_t		nclusters = 0;

	if (!pos || !id)
	{
		free(pos);
		free(id);
		return gc_core_oom(ws->ctx, 2 * sizeof(int64_t) * (size_t) n, "out of memory numbering clusters");
	}
	for (int64_t i = 0; i < n; i++)
	{
		if (ws->core[i])
			ws->parent[i] = uf_find(ws->parent, i);
		pos[ws->perm[i]] = i;
		id[i] = -1;
	}
	for (int64_t row = 0; row < n; row++)
	{
		int64_t		i = pos[row];
		int64_t		root = ws->parent[i];

		if (root >= 0 && id[root] < 0)
			id[root] = nclusters++;
		result->cluster[row] = root < 0 ? -1 : (int32_t) id[root];
		result->is_core[row] = ws->core[i];
	}
	result->n_clusters = nclusters;
	free(pos);
	free(id);
	return GC_OK;
}

/* Phase number: numbers the clusters by their lowest-row member and writes the result. */
static gc_status
dbscan_number(dbscan_ws *ws, gc_dbscan_result *result)
{
	int64_t		n = ws->n;
	int64_t		blocks = (n + DBSCAN_ROW_GRAIN - 1) / DBSCAN_ROW_GRAIN;
	dbscan_number_job job;
	gc_status	st = GC_OK;
	int64_t		nclusters = 0;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if (blocks == 1)
		return dbscan_number_walk(ws, result);
	job.ws = ws;
	job.result = result;
	job.pos = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	job.first = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	job.block_count = malloc(sizeof(int64_t) * (size_t) blocks);
	if (!job.pos || !job.first || !job.block_count)
		st = gc_core_oom(ws->ctx, 2 * sizeof(int64_t) * (size_t) n + sizeof(int64_t) * (size_t) blocks,
						 "out of memory numbering clusters");
	for (job.step = 0; job.step < 5 && st == GC_OK; job.step++)
	{
		if (job.step == 3)
			nclusters = gc_block_offsets(job.block_count, blocks, nclusters);
		st = gc_pool_for(ws->ctx->pool, n, DBSCAN_ROW_GRAIN, dbscan_number_block, &job);
	}
	if (st == GC_OK)
		result->n_clusters = nclusters;
	free(job.pos);
	free(job.first);
	free(job.block_count);
	return st;
}

/* ---------------------------------------------------------------- sweep */

/*
 * Few rows (a partition of a window function, a small table) skip the
 * grid, whose fixed costs (its plan, the cell table, the neighbour cells of
 * every cell) are most of a small call.  The points are sorted along the
 * dimension of widest range, stably, and each point is compared with the
 * points after it whose difference along that dimension, squared as
 * gc_dist2 squares it, is at most bound.  A pair's dist2 is at least that
 * square (a sum of non-negative rounded terms only grows), so no neighbour
 * is skipped; and the difference only grows along the sorted points, so
 * the walk stops at the first point past it.  Two walks over those pairs:
 * the first counts every point's neighbours (each pair once, for both
 * points), the second joins core points and gives each other point its
 * lowest-row core neighbour; then phase number.  So the answer is the
 * grid's, by the same rules.  Where the sorted values leave more than
 * DBSCAN_SWEEP_PAIRS pairs per point to compare (values crowded along
 * every dimension, duplicates), the grid is used instead.
 */
#define DBSCAN_SWEEP_ROWS 4096		/* fewer rows: the sweep (one thread, CPU_ROWS_PER_THREAD_DBSCAN) */
#define DBSCAN_SWEEP_PAIRS 32		/* most pairs compared per point */

/* Whether b, after a along the sweep's dimension, is within reach of a. */
static inline int
sweep_within(const dbscan_ws *ws, double a, double b)
{
	double		t = b - a;

	return t * t <= ws->bound;
}

/* The sweep's dimension: the widest range (the lower feature on a tie). */
static int32_t
sweep_dimension(const dbscan_ws *ws)
{
	int32_t		best = 0;
	double		best_range = -1.0;

	for (int32_t k = 0; k < ws->d; k++)
	{
		double		lo = INFINITY;
		double		hi = -INFINITY;

		for (int64_t i = 0; i < ws->n; i++)
		{
			double		v = gc_grid_x(ws->x, ws->dtype, (size_t) (i * ws->d + k));

			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		if (hi - lo > best_range)
		{
			best = k;
			best_range = hi - lo;
		}
	}
	return best;
}

/*
 * The first walk: the neighbours after each point i within [i + 1, end[i])
 * into nbr from first[i] (first[n]: their number), and every point's count
 * of neighbours, itself included as dist2 counts it (nbr has room for
 * one more than the pairs: every candidate is written, and kept when
 * near, without a branch).  Inlined for each
 * element type and small d, so that the distance loop is unrolled.
 * Returns 1 when cancelled.
 */
static inline __attribute__((always_inline)) int
sweep_pairs(dbscan_ws *ws, gc_dtype dtype, int32_t d, const int32_t *end, int32_t *first,
			int32_t *nbr, int32_t *count)
{
	int64_t		work = 0;
	int32_t		m = 0;

	for (int64_t i = 0; i < ws->n; i++)
	{
		first[i] = m;
		if (dtype == GC_F64)
		{
			const double *xi = (const double *) ws->xs + (size_t) i * d;

			count[i] += gc_dist2_f64(xi, xi, d) <= ws->bound;
			for (int64_t j = i + 1; j < end[i]; j++)
			{
				nbr[m] = (int32_t) j;
				m += gc_dist2_f64(xi, (const double *) ws->xs + (size_t) j * d, d) <= ws->bound;
			}
		}
		else
		{
			const float *xi = (const float *) ws->xs + (size_t) i * d;

			count[i] += gc_dist2(xi, xi, d) <= ws->bound;
			for (int64_t j = i + 1; j < end[i]; j++)
			{
				nbr[m] = (int32_t) j;
				m += gc_dist2(xi, (const float *) ws->xs + (size_t) j * d, d) <= ws->bound;
			}
		}
		count[i] += m - first[i];
		for (int32_t t = first[i]; t < m; t++)
			count[nbr[t]]++;
		if (gc_core_work(ws->ctx, &work, (end[i] - i) * d, DBSCAN_CANCEL_EVERY))
			return 1;
	}
	first[ws->n] = m;
	return 0;
}

/* Adds the milliseconds since *t0 to the named phase and restarts *t0 (common/phases.h). */
static void
dbscan_phase_done(const dbscan_ws *ws, int phase, double *t0)
{
	double		now = gc_core_now_ms();

	ws->ctx->timing->phase_ms[phase] += now - *t0;
	*t0 = now;
}

/*
 * DBSCAN by the sweep above.  *taken: 0 when the sweep declined (too many
 * pairs, or no memory for it), and the grid should run; the workspace is
 * then as dbscan_ws_init left it.
 */
static gc_status
dbscan_sweep(dbscan_ws *ws, gc_dbscan_result *result, int *taken)
{
	int64_t		n = ws->n;
	int32_t		d = ws->d;
	size_t		rowbytes = ws->esize * (size_t) d;
	int32_t		dim = sweep_dimension(ws);
	uint64_t   *key = malloc(sizeof(uint64_t) * (size_t) n);
	uint64_t   *tkey = malloc(sizeof(uint64_t) * (size_t) n);
	int64_t    *tval = malloc(sizeof(int64_t) * (size_t) n);
	double	   *v = malloc(sizeof(double) * (size_t) n);
	int32_t    *end = malloc(sizeof(int32_t) * (size_t) n);
	int32_t    *first = malloc(sizeof(int32_t) * (size_t) (n + 1));
	int32_t    *count = calloc((size_t) n, sizeof(int32_t));
	int32_t    *nbr = malloc(sizeof(int32_t) * (size_t) (DBSCAN_SWEEP_PAIRS * n + 1));
	int64_t    *best = malloc(sizeof(int64_t) * (size_t) n);
	int64_t		pairs = 0;
	int			cancelled;
	gc_status	st = GC_OK;
	double		t0 = gc_core_now_ms();

	*taken = 0;
	ws->perm = malloc(sizeof(int64_t) * (size_t) n);
	ws->xs = malloc(rowbytes * (size_t) n);
	ws->core = malloc((size_t) n);
	ws->parent = malloc(sizeof(int64_t) * (size_t) n);
	if (!key || !tkey || !tval || !v || !end || !first || !count || !nbr || !best ||
		!ws->perm || !ws->xs || !ws->core || !ws->parent)
		goto out;

	/* sorted along dim, rows in order among equal values */
	for (int64_t i = 0; i < n; i++)
	{
		key[i] = gc_order_key(gc_grid_x(ws->x, ws->dtype, (size_t) (i * d + dim)));
		ws->perm[i] = i;
	}
	gc_pool_radix_sort(ws->ctx->pool, key, ws->perm, tkey, tval, n);
	for (int64_t i = 0; i < n; i++)
	{
		memcpy((char *) ws->xs + (size_t) i * rowbytes,
			   (const char *) ws->x + (size_t) ws->perm[i] * rowbytes, rowbytes);
		v[i] = gc_grid_x(ws->xs, ws->dtype, (size_t) (i * d + dim));
	}
	/* how far each point reaches; declined when that makes too many pairs */
	for (int64_t i = 0, e = 0; i < n; i++)
	{
		if (e <= i)
			e = i + 1;
		while (e < n && sweep_within(ws, v[i], v[e]))
			e++;
		end[i] = (int32_t) e;
		pairs += e - i - 1;
	}
	gc_core_debug(ws->ctx, "DBSCAN sweep along dimension %d: %lld pairs to compare, %s", dim,
				  (long long) pairs, pairs > DBSCAN_SWEEP_PAIRS * n ? "the grid instead" : "taken");
	if (pairs > DBSCAN_SWEEP_PAIRS * n)
		goto out;
	*taken = 1;
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_INDEX, &t0);

	if (ws->dtype == GC_F32 && d == 2)
		cancelled = sweep_pairs(ws, GC_F32, 2, end, first, nbr, count);
	else if (ws->dtype == GC_F32 && d == 3)
		cancelled = sweep_pairs(ws, GC_F32, 3, end, first, nbr, count);
	else if (ws->dtype == GC_F64 && d == 2)
		cancelled = sweep_pairs(ws, GC_F64, 2, end, first, nbr, count);
	else
		cancelled = sweep_pairs(ws, ws->dtype, d, end, first, nbr, count);
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_CORE, &t0);
	if (cancelled)
	{
		st = GC_ERR_CANCELLED;
		goto out;
	}

	/* core points joined; each other point's lowest-row core neighbour */
	for (int64_t i = 0; i < n; i++)
	{
		ws->core[i] = count[i] >= ws->min_pts;
		ws->parent[i] = i;
		best[i] = -1;
	}
	for (int64_t i = 0; i < n; i++)
		for (int32_t t = first[i]; t < first[i + 1]; t++)
		{
			int64_t		j = nbr[t];
			int64_t		b = ws->core[i] ? j : i;
			int64_t		c = ws->core[i] ? i : j;

			if (ws->core[i] && ws->core[j])
				uf_union(ws->parent, i, j);
			else if (ws->core[c] && (best[b] < 0 || ws->perm[c] < ws->perm[best[b]]))
				best[b] = c;
		}
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_UNION, &t0);
	for (int64_t i = 0; i < n; i++)
		if (!ws->core[i])
			ws->parent[i] = best[i] >= 0 ? uf_find(ws->parent, best[i]) : -1;
	st = dbscan_number(ws, result);
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_BORDER, &t0);

out:
	free(key);
	free(tkey);
	free(tval);
	free(v);
	free(end);
	free(first);
	free(count);
	free(nbr);
	free(best);
	if (!*taken)
	{
		free(ws->perm);
		free(ws->xs);
		free(ws->core);
		free(ws->parent);
		ws->perm = NULL;
		ws->xs = NULL;
		ws->core = NULL;
		ws->parent = NULL;
	}
	return st;
}

/* ---------------------------------------------------------------- pairs */

/*
 * DBSCAN on the pair engine (pair_engine.h), where the grid prunes little
 * (common/pairs.h, gc_pair_engine_chosen): the same phases with the rows in
 * the band's order (gc_pe_order: perm sorts them along a principal
 * direction and xs holds them in that order; without it, or for few rows,
 * the rows in their own order and perm the identity) and the tiles of the
 * upper triangle as the only index, each unordered pair of rows looked at
 * once, each row block stopping where the band proves every further pair
 * out (gc_pe_run_band).  Positions index count, core and parent; the
 * border's lowest core row is a row (perm of a position), as the grid's:
 *
 *  core    a pair within eps counts for both its rows (a tile adds its
 *          counts to its rows and, once per column, to its columns, which
 *          other threads' rows share: atomic adds); a row is core when its
 *          count, itself included, reaches min_pts;
 *  union   core rows within eps are joined in the forest; a non-core row
 *          takes the lowest core row within eps (an atomic minimum, from
 *          its own row or from a column).  The core pass keeps the pairs
 *          within eps it finds, up to 64 a row (at most 2^26 in all, or
 *          16 a row where that is more); then the union reads them
 *          and the tiles are not visited again.  Where more pairs are
 *          within eps (an eps that covers much of the data), the union
 *          looks at the tiles again, skipping the pairs that can no longer
 *          change anything;
 *  number  as for the grid.
 * The core flags must be known before any union, hence the kept pairs.
 */
typedef struct dbscan_pairs_list
{
	int64_t    *ij;				/* [2 * cap] the pairs within eps found by one thread */
	int64_t		len;
	int64_t		cap;
} dbscan_pairs_list;

typedef struct dbscan_pairs_job
{
	dbscan_ws  *ws;
	gc_pe	   *pe;
	int64_t    *count;			/* [n] by position: neighbours (core pass); lowest core row within eps, or n (union pass) */
	dbscan_pairs_list *lists;	/* [threads] the pairs within eps of the core pass, per thread */
	int64_t		list_cap;		/* pairs a thread may keep */
	int			overflow;		/* a thread found more: the union pass looks at the tiles again */
} dbscan_pairs_job;

/* Keeps the pair (i, j) within eps for the union; returns 0 once the thread's share is full. */
static int
dbscan_pairs_keep(dbscan_pairs_job *job, gc_worker *w, int64_t i, int64_t j)
{
	dbscan_pairs_list *l = &job->lists[w->id];

	if (l->len == l->cap)
	{
		int64_t		cap = l->cap ? 2 * l->cap : 4096;
		int64_t    *ij;

		if (cap > job->list_cap || !(ij = realloc(l->ij, sizeof(int64_t) * 2 * (size_t) cap)))
			return 0;
		l->ij = ij;
		l->cap = cap;
	}
	l->ij[2 * l->len] = i;
	l->ij[2 * l->len + 1] = j;
	l->len++;
	return 1;
}

/* Lowers *a to v (an atomic minimum). */
static inline void
atomic_min_i64(int64_t *a, int64_t v)
{
	int64_t		cur = __atomic_load_n(a, __ATOMIC_RELAXED);

	while (v < cur && !__atomic_compare_exchange_n(a, &cur, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Row i against column j of a tile, from its verdict x: decided exactly. */
static inline int
dbscan_pairs_in(dbscan_pairs_job *job, gc_pe_tile *t, int8_t x, int64_t i, int64_t j)
{
	if (x >= 0)
		return x;
	t->exact++;
	return gc_pe_dist2(job->pe, i, j) <= job->pe->t;
}

/* A tile of the core pass. */
static gc_status
dbscan_pairs_core_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	dbscan_pairs_job *job = arg;
	int8_t		v[GC_PE_BJ];
	int32_t		idx[GC_PE_BJ];	/* a row's columns the screen does not decide "out" */
	int32_t		col[GC_PE_BJ];	/* the tile's pairs within eps, by column */

	memset(col, 0, sizeof(int32_t) * (size_t) (t->j1 - t->j0));
	for (int64_t i = t->i0; i < t->i1; i++)
	{
		int64_t		j0 = i + 1 > t->j0 ? i + 1 : t->j0;
		int64_t		c = 0;
		int32_t		m;

		if (j0 >= t->j1)
			continue;
		m = gc_pe_maybe(job->pe, t, i, j0, idx, v);
		for (int32_t q = 0; q < m; q++)
		{
			int64_t		j = t->j0 + idx[q];

			if (dbscan_pairs_in(job, t, v[q], i, j))
			{
				c++;
				col[j - t->j0]++;
				if (!__atomic_load_n(&job->overflow, __ATOMIC_RELAXED) && !dbscan_pairs_keep(job, w, i, j))
					__atomic_store_n(&job->overflow, 1, __ATOMIC_RELAXED);
			}
		}
		if (c)
			__atomic_fetch_add(&job->count[i], c, __ATOMIC_RELAXED);
	}
	/* one atomic per column of the tile, whatever share of its pairs is within eps */
	for (int64_t j = t->j0; j < t->j1; j++)
		if (col[j - t->j0])
			__atomic_fetch_add(&job->count[j], (int64_t) col[j - t->j0], __ATOMIC_RELAXED);
	return GC_OK;
}

/* One pair within eps, for the union: joins two core rows, or lowers a non-core row's best. */
static inline void
dbscan_pairs_join(dbscan_pairs_job *job, int64_t i, int64_t j)
{
	dbscan_ws  *ws = job->ws;
	int			ci = ws->core[i],
				cj = ws->core[j];

	if (ci && cj)
		uf_union(ws->parent, i, j);
	else if (ci)
		atomic_min_i64(&job->count[j], ws->perm[i]);
	else if (cj)
		atomic_min_i64(&job->count[i], ws->perm[j]);
}

/* The union from the pairs the core pass kept: one thread's list per block. */
static gc_status
dbscan_pairs_union_lists(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_pairs_job *job = arg;

	for (int64_t t = b; t < e; t++)
	{
		const dbscan_pairs_list *l = &job->lists[t];

		for (int64_t q = 0; q < l->len; q++)
		{
			dbscan_pairs_join(job, l->ij[2 * q], l->ij[2 * q + 1]);
			if ((q & 65535) == 65535 && gc_worker_tick(w, 65536, DBSCAN_CANCEL_EVERY))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* A tile of the union pass. */
static gc_status
dbscan_pairs_union_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	dbscan_pairs_job *job = arg;
	dbscan_ws  *ws = job->ws;
	int8_t		v[GC_PE_BJ];

	for (int64_t i = t->i0; i < t->i1; i++)
	{
		int64_t		j0 = i + 1 > t->j0 ? i + 1 : t->j0;
		int			ci = ws->core[i];
		int			have = 0;

		for (int64_t j = j0; j < t->j1; j++)
		{
			int			cj = ws->core[j];
			int			need = ci ? (cj || __atomic_load_n(&job->count[j], __ATOMIC_RELAXED) > ws->perm[i])
				: (cj && __atomic_load_n(&job->count[i], __ATOMIC_RELAXED) > ws->perm[j]);

			if (!need)
				continue;
			if (!have)
			{
				gc_pe_verdicts(job->pe, t, i, v);
				have = 1;
			}
			if (v[j - t->j0] == 0 || !dbscan_pairs_in(job, t, v[j - t->j0], i, j))
				continue;
			dbscan_pairs_join(job, i, j);
		}
	}
	return GC_OK;
}

/* Rows [b, e) of the band's copy: position i holds row perm[i]. */
static gc_status
dbscan_pairs_copy_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dbscan_ws  *ws = arg;
	size_t		rowbytes = ws->esize * (size_t) ws->d;

	for (int64_t i = b; i < e; i++)
		memcpy((char *) ws->xs + (size_t) i * rowbytes, (const char *) ws->x + (size_t) ws->perm[i] * rowbytes,
			   rowbytes);
	return GC_OK;
}

/* DBSCAN of the workspace's rows on the pair engine. */
static gc_status
dbscan_pairs(dbscan_ws *ws, gc_dbscan_result *result)
{
	gc_pe		pe;
	dbscan_pairs_job job;
	gc_status	st;
	double		t0 = gc_core_now_ms();
	int64_t		n = ws->n;
	int			threads;
	double	   *key = NULL;
	double		key_err = 0.0;
	int			band = 0;
	gc_status	copied = GC_OK;

	memset(&pe, 0, sizeof(pe));

	ws->perm = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	ws->core = calloc((size_t) n, 1);
	ws->parent = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	job.count = dbscan_big_alloc(sizeof(int64_t) * (size_t) n);
	if (!ws->perm || !ws->core || !ws->parent || !job.count)
	{
		free(job.count);
		return gc_core_oom(ws->ctx, 25 * (size_t) n, "out of memory for DBSCAN on the pair engine");
	}
	for (int64_t i = 0; i < n; i++)
	{
		ws->perm[i] = i;
		ws->parent[i] = i;
		job.count[i] = 0;
	}
	/*
	 * the band: the rows in the order of their projection on a principal
	 * direction (gc_pe_order), copied in that order, so that each row block
	 * stops at the column blocks too far along it (gc_pe_run_band); without
	 * the memory for the keys and the copy, the rows in their own order
	 */
	if (n > 2 * GC_PE_BI && (key = dbscan_big_alloc(sizeof(double) * (size_t) n)) != NULL)
	{
		size_t		rowbytes = ws->esize * (size_t) ws->d;

		band = gc_pe_order(ws->ctx, ws->x, ws->dtype, n, ws->d, ws->perm, key, &key_err);
		if (band && (ws->xs = dbscan_big_alloc(rowbytes * (size_t) n)) != NULL)
			copied = gc_pool_for(ws->ctx->pool, n, 4096, dbscan_pairs_copy_block, ws);
		else
		{
			band = 0;
			for (int64_t i = 0; i < n; i++)
				ws->perm[i] = i;
		}
	}
	job.ws = ws;
	job.pe = &pe;
	job.overflow = 0;
	threads = gc_pool_threads(ws->ctx->pool);
	/*
	 * the pairs within eps kept for the union, over all threads: up to 64 a
	 * row (1 kB), at most 2^26 (1 GiB) in all unless 16 a row need more;
	 * the lists grow only as pairs are found
	 */
	{
		int64_t		want = 64 * n < (INT64_C(1) << 26) ? 64 * n : (INT64_C(1) << 26);

		if (want < 16 * n)
			want = 16 * n;
		job.list_cap = (want + threads - 1) / threads + 4096;
	}
	job.lists = calloc((size_t) threads, sizeof(dbscan_pairs_list));
	if (!job.lists)
	{
		free(job.count);
		free(key);
		return gc_core_oom(ws->ctx, sizeof(dbscan_pairs_list) * threads, "out of memory for DBSCAN on the pair engine");
	}
	/* without the band, the rows in their own order: xs is the caller's x, not a copy (not to be freed) */
	if (!band)
		ws->xs = (void *) ws->x;
	st = copied != GC_OK ? copied : gc_pe_prepare(&pe, ws->ctx, ws->xs, ws->dtype, n, ws->d, ws->bound);
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_INDEX, &t0);
	if (st == GC_OK)
		st = band ? gc_pe_run_band(&pe, key, key_err, dbscan_pairs_core_tile, &job)
			: gc_pe_run_upper(&pe, dbscan_pairs_core_tile, &job);
	if (st == GC_OK)
		for (int64_t i = 0; i < n; i++)
			ws->core[i] = job.count[i] + 1 >= ws->min_pts;
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_CORE, &t0);
	if (st == GC_OK)
	{
		for (int64_t i = 0; i < n; i++)
			job.count[i] = n;
		/* one pass over the tiles suffices where the core pass kept every pair within eps */
		if (!job.overflow)
			st = gc_pool_for(ws->ctx->pool, threads, 1, dbscan_pairs_union_lists, &job);
		else if (band)
			st = gc_pe_run_band(&pe, key, key_err, dbscan_pairs_union_tile, &job);
		else
			st = gc_pe_run_upper(&pe, dbscan_pairs_union_tile, &job);
		gc_core_debug(ws->ctx, "DBSCAN pairs: union from %s", job.overflow ? "a second pass" : "the kept pairs");
		dbscan_phase_done(ws, GC_DBSCAN_PHASE_UNION, &t0);
	}
	if (st == GC_OK)
	{
		/* a non-core row's best is a row: its position is where perm names it (key's memory, no longer read) */
		int64_t    *pos = (int64_t *) key;

		if (band)
			for (int64_t i = 0; i < n; i++)
				pos[ws->perm[i]] = i;
		for (int64_t i = 0; i < n; i++)
			if (!ws->core[i])
				ws->parent[i] = job.count[i] < n ? uf_find(ws->parent, band ? pos[job.count[i]] : job.count[i]) : -1;
		st = dbscan_number(ws, result);
	}
	dbscan_phase_done(ws, GC_DBSCAN_PHASE_BORDER, &t0);
	gc_core_debug(ws->ctx, "DBSCAN pairs: exact=%lld band=%s pairs skipped=%lld", (long long) pe.exact,
				  band ? "on" : "off", (long long) pe.band_skipped);
	gc_pe_free(&pe);
	if (!band)
		ws->xs = NULL;
	free(key);
	free(job.count);
	for (int q = 0; q < threads; q++)
		free(job.lists[q].ij);
	free(job.lists);
	return st;
}

/*
 * DBSCAN of n >= 1 points of dimension d: the five phases over one
 * workspace, timed as the GPU's are (the neighbour table with the index, the
 * numbering with the border points).
 */
gc_status
gc_core_dbscan(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			   const gc_dbscan_params *params, gc_dbscan_result *result)
{
	dbscan_ws	ws;
	gc_status	st;
	int			taken = 0;
	double		t0 = gc_core_now_ms();

	dbscan_ws_init(&ws, ctx, x, dtype, n, d, params);
	if (gc_pair_engine_chosen(ctx->tuning, d))
	{
		st = dbscan_pairs(&ws, result);
		dbscan_ws_free(&ws);
		return st;
	}
	ctx->timing->path = GC_PATH_INDEX;
	if (n < DBSCAN_SWEEP_ROWS && ctx->tuning->dbscan_sweep >= 0)
	{
		st = dbscan_sweep(&ws, result, &taken);
		if (taken)
		{
			dbscan_ws_free(&ws);
			return st;
		}
	}
	if ((st = dbscan_index(&ws)) == GC_OK &&
		(st = dbscan_nbr_table(&ws)) == GC_OK)
	{
		dbscan_phase_done(&ws, GC_DBSCAN_PHASE_INDEX, &t0);
		st = dbscan_core(&ws);
		dbscan_phase_done(&ws, GC_DBSCAN_PHASE_CORE, &t0);
	}
	if (st == GC_OK)
	{
		st = dbscan_union(&ws);
		dbscan_phase_done(&ws, GC_DBSCAN_PHASE_UNION, &t0);
	}
	if (st == GC_OK && (st = dbscan_border(&ws)) == GC_OK)
		st = dbscan_number(&ws, result);
	dbscan_phase_done(&ws, GC_DBSCAN_PHASE_BORDER, &t0);
	dbscan_ws_free(&ws);
	return st;
}
