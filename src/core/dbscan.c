/*
 * dbscan.c
 *    DBSCAN on the CPU: exact, deterministic, with a uniform grid index.
 *
 * The answer is a function of the rows (in order), eps and min_pts alone
 * (see gc_dbscan_params in gpuclust_cuda.h): core points within eps of each
 * other share a cluster, a border point joins the cluster of the
 * lowest-index core point within eps, clusters are numbered by their
 * lowest-index member.  This matches PostGIS ST_ClusterDBSCAN evaluated
 * OVER (ORDER BY id) and is what the GPU back end reproduces exactly.
 *
 * The algorithm follows the two phases of FDBSCAN (Prokopenko et al., seed
 * 003): first the core points, counting neighbours only up to min_pts; then
 * the union of core-core pairs in a disjoint-set forest; then the border
 * points.  The index is a grid of cells on the first min(d, 3) dimensions,
 * points sorted by cell so that a cell is a contiguous run.  When d <= 3
 * the cells have side eps/sqrt(d) (FDBSCAN-DenseBox): every two points of
 * one cell are within eps, so a cell holding at least min_pts points is all
 * core and one cluster without a single distance computation.  For d > 3
 * the grid on three dimensions only filters candidates; every candidate is
 * checked with the full distance.
 *
 * Cell coordinates are computed in double with a relative error below 1e-6
 * (extents are kept under 2^31 cells a dimension), so the cell side carries
 * a 1e-5 safety margin: the grid never changes the answer, it only skips
 * distance computations that cannot matter.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define GC_GRID_MAX_DIMS 3
#define GC_CANCEL_EVERY 4096
#define GC_MAX_EXTENT ((double) (1u << 31))

typedef struct Grid
{
	int64_t		n;
	int32_t		d;
	int32_t		g;				/* grid dimensions: min(d, 3) */
	int32_t		reach;			/* neighbour cells lie within +-reach a dimension */
	int			dense_ok;		/* cells small enough that all members are neighbours */
	double		side;
	double		lo[GC_GRID_MAX_DIMS];
	int64_t		extent[GC_GRID_MAX_DIMS];

	float	   *xs;				/* [n, d] points in cell order */
	int64_t    *perm;			/* [n] sorted position -> row */
	int64_t		ncells;
	int64_t    *cell_start;		/* [ncells + 1] */
	uint64_t   *cell_key;		/* [ncells], ascending */

	/*
	 * Neighbour cells come as rows along the last grid dimension: for each
	 * offset of the other dimensions, the cells whose last coordinate is
	 * within +-row_half of the cell's own.  Those cells have consecutive
	 * keys, hence consecutive indexes, and a row's first key only grows as
	 * the cells are visited in order, so one forward cursor a row finds
	 * them without any lookup.
	 */
	int32_t		nrows;
	int32_t		max_cells;		/* most neighbour cells a cell can have */
	int64_t    *row_offset;		/* [nrows, g - 1] */
	int64_t    *row_half;		/* [nrows] */
} Grid;

/* The forward cursors of one visit of the cells in ascending order. */
typedef struct GridCursor
{
	int64_t    *ptr;			/* [nrows] */
} GridCursor;

typedef struct KeyIndex
{
	uint64_t	key;
	int64_t		row;
} KeyIndex;

/*
 * Sorts by key with a stable least-significant-digit radix sort, so rows
 * that share a cell stay in row order.  Asks cancel between passes.
 */
static gc_status
sort_by_key(KeyIndex *keys, int64_t n, uint64_t max_key, gc_cancel_fn cancel,
			void *cancel_arg, char *errbuf)
{
	KeyIndex   *scratch = malloc(sizeof(KeyIndex) * (size_t) n);
	KeyIndex   *from = keys;
	KeyIndex   *to = scratch;
	int64_t		count[2048];

	if (!scratch)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY,
					   "out of memory sorting %lld points", (long long) n);
	for (int shift = 0; shift < 64 && (max_key >> shift) != 0; shift += 11)
	{
		int64_t		sum = 0;
		KeyIndex   *t;

		memset(count, 0, sizeof(count));
		for (int64_t i = 0; i < n; i++)
			count[(from[i].key >> shift) & 2047]++;
		for (int b = 0; b < 2048; b++)
		{
			int64_t		c = count[b];

			count[b] = sum;
			sum += c;
		}
		for (int64_t i = 0; i < n; i++)
			to[count[(from[i].key >> shift) & 2047]++] = from[i];
		t = from;
		from = to;
		to = t;
		if (cancel && cancel(cancel_arg))
		{
			free(scratch);
			return gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
		}
	}
	if (from != keys)
		memcpy(keys, from, sizeof(KeyIndex) * (size_t) n);
	free(scratch);
	return GC_OK;
}

/* The cell coordinate of value v along grid dimension k. */
static inline int64_t
cell_coord(const Grid *grid, int k, float v)
{
	double		c = floor(((double) v - grid->lo[k]) / grid->side);

	if (c < 0)
		c = 0;
	if (c >= (double) grid->extent[k])
		c = (double) (grid->extent[k] - 1);
	return (int64_t) c;
}

static uint64_t
cell_key_of(const Grid *grid, const int64_t *coord)
{
	uint64_t	key = 0;

	for (int k = 0; k < grid->g; k++)
		key = key * (uint64_t) grid->extent[k] + (uint64_t) coord[k];
	return key;
}

static void
grid_free(Grid *grid)
{
	free(grid->xs);
	free(grid->perm);
	free(grid->cell_start);
	free(grid->cell_key);
	free(grid->row_offset);
	free(grid->row_half);
}

/* Separation of two cells |o| apart along a dimension, rounded down safely. */
static inline double
cell_gap(const Grid *grid, int64_t o)
{
	int64_t		a = o < 0 ? -o : o;

	return a > 1 ? (double) (a - 1) * grid->side * (1.0 - 4e-6) : 0.0;
}

/*
 * Lists the rows of neighbour cells: every offset of the first g - 1
 * dimensions whose cells can hold a point within eps, with the half width
 * of the row along the last dimension.
 */
static gc_status
grid_rows(Grid *grid, double eps, char *errbuf)
{
	int32_t		width = 2 * grid->reach + 1;
	int32_t		total = 1;
	double		lim = eps * eps;
	int			pre = grid->g - 1;

	for (int k = 0; k < pre; k++)
		total *= width;
	grid->row_offset = malloc(sizeof(int64_t) * (size_t) total * (pre > 0 ? pre : 1));
	grid->row_half = malloc(sizeof(int64_t) * (size_t) total);
	if (!grid->row_offset || !grid->row_half)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the grid");
	grid->nrows = 0;
	grid->max_cells = 0;
	for (int32_t t = 0; t < total; t++)
	{
		int64_t		o[GC_GRID_MAX_DIMS];
		double		gap2 = 0.0;
		int32_t		r = t;
		int64_t		half = -1;

		for (int k = pre - 1; k >= 0; k--)
		{
			double		gap;

			o[k] = (r % width) - grid->reach;
			r /= width;
			gap = cell_gap(grid, o[k]);
			gap2 += gap * gap;
		}
		for (int64_t a = 0; a <= grid->reach; a++)
		{
			double		gap = cell_gap(grid, a);

			if (gap2 + gap * gap <= lim)
				half = a;
		}
		if (half < 0)
			continue;
		memcpy(grid->row_offset + (size_t) grid->nrows * pre, o, sizeof(int64_t) * pre);
		grid->row_half[grid->nrows] = half;
		grid->max_cells += (int32_t) (2 * half + 1);
		grid->nrows++;
	}
	return GC_OK;
}

/* Chooses the cell side, sorts the points by cell and builds the cell table. */
static gc_status
grid_build(Grid *grid, const float *x, int64_t n, int32_t d, double eps,
		   gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	double		hi[GC_GRID_MAX_DIMS];
	double		side0;
	KeyIndex   *ki;
	uint64_t	max_key = 0;
	int64_t		c;
	gc_status	status;

	memset(grid, 0, sizeof(*grid));
	grid->n = n;
	grid->d = d;
	grid->g = d < GC_GRID_MAX_DIMS ? d : GC_GRID_MAX_DIMS;

	for (int k = 0; k < grid->g; k++)
	{
		grid->lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t i = 0; i < n; i++)
		for (int k = 0; k < grid->g; k++)
		{
			double		v = x[i * d + k];

			if (v < grid->lo[k])
				grid->lo[k] = v;
			if (v > hi[k])
				hi[k] = v;
		}

	/*
	 * With d <= 3 a cell of side eps/sqrt(d) has diameter below eps; with
	 * more dimensions the three-dimensional grid is a filter of side eps.
	 * Both sides keep a margin far above the rounding of cell coordinates.
	 */
	if (d <= GC_GRID_MAX_DIMS)
		side0 = eps / sqrt((double) d) * (1.0 - 1e-5);
	else
		side0 = eps * (1.0 + 1e-5);
	grid->side = side0;
	for (;;)
	{
		double		cells = 1.0;
		int			fits = 1;

		for (int k = 0; k < grid->g; k++)
		{
			double		e = floor((hi[k] - grid->lo[k]) / grid->side) + 1.0;

			if (e > GC_MAX_EXTENT)
				fits = 0;
			cells *= e;
		}
		if (fits && cells < 4.0e18)
			break;
		grid->side *= 2.0;
	}
	for (int k = 0; k < grid->g; k++)
		grid->extent[k] = (int64_t) floor((hi[k] - grid->lo[k]) / grid->side) + 1;
	grid->dense_ok = (d <= GC_GRID_MAX_DIMS && grid->side == side0);
	grid->reach = (int32_t) floor(eps / grid->side * (1.0 + 4e-6)) + 1;

	status = grid_rows(grid, eps, errbuf);
	if (status != GC_OK)
		return status;

	/* Sort rows by cell. */
	ki = malloc(sizeof(KeyIndex) * (size_t) n);
	if (!ki)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY,
					   "out of memory sorting %lld points", (long long) n);
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		coord[GC_GRID_MAX_DIMS];

		for (int k = 0; k < grid->g; k++)
			coord[k] = cell_coord(grid, k, x[i * d + k]);
		ki[i].key = cell_key_of(grid, coord);
		ki[i].row = i;
		if (ki[i].key > max_key)
			max_key = ki[i].key;
	}
	if (cancel && cancel(cancel_arg))
	{
		free(ki);
		return gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
	}
	status = sort_by_key(ki, n, max_key, cancel, cancel_arg, errbuf);
	if (status != GC_OK)
	{
		free(ki);
		return status;
	}

	grid->xs = malloc(sizeof(float) * (size_t) n * d);
	grid->perm = malloc(sizeof(int64_t) * (size_t) n);
	grid->cell_start = malloc(sizeof(int64_t) * (size_t) (n + 1));
	grid->cell_key = malloc(sizeof(uint64_t) * (size_t) n);
	if (!grid->xs || !grid->perm || !grid->cell_start || !grid->cell_key)
	{
		free(ki);
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY,
					   "out of memory for the grid of %lld points", (long long) n);
	}
	c = -1;
	for (int64_t i = 0; i < n; i++)
	{
		if (i == 0 || ki[i].key != ki[i - 1].key)
		{
			c++;
			grid->cell_start[c] = i;
			grid->cell_key[c] = ki[i].key;
		}
		grid->perm[i] = ki[i].row;
		memcpy(grid->xs + (size_t) i * d, x + (size_t) ki[i].row * d, sizeof(float) * d);
	}
	free(ki);
	grid->ncells = c + 1;
	grid->cell_start[grid->ncells] = n;
	return GC_OK;
}

/* Starts a visit of the cells in ascending order. */
static gc_status
cursor_init(const Grid *grid, GridCursor *cur, char *errbuf)
{
	cur->ptr = calloc((size_t) grid->nrows, sizeof(int64_t));
	if (!cur->ptr)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the grid");
	return GC_OK;
}

/*
 * Lists the existing neighbour cells of cell c (c itself included) into
 * out[grid->max_cells].  Calls for one cursor must come in ascending c.
 */
static int32_t
grid_neighbours(const Grid *grid, GridCursor *cur, int64_t c, int64_t *out)
{
	int64_t		coord[GC_GRID_MAX_DIMS];
	uint64_t	key = grid->cell_key[c];
	int			pre = grid->g - 1;
	int64_t		last_extent = grid->extent[pre];
	int32_t		m = 0;

	for (int k = grid->g - 1; k >= 0; k--)
	{
		coord[k] = (int64_t) (key % (uint64_t) grid->extent[k]);
		key /= (uint64_t) grid->extent[k];
	}
	for (int32_t t = 0; t < grid->nrows; t++)
	{
		const int64_t *o = grid->row_offset + (size_t) t * pre;
		int64_t		half = grid->row_half[t];
		uint64_t	base = 0;
		uint64_t	lo;
		uint64_t	hi;
		int			inside = 1;
		int64_t		j;

		for (int k = 0; k < pre; k++)
		{
			int64_t		p = coord[k] + o[k];

			if (p < 0 || p >= grid->extent[k])
			{
				inside = 0;
				break;
			}
			base = base * (uint64_t) grid->extent[k] + (uint64_t) p;
		}
		if (!inside)
			continue;
		base *= (uint64_t) last_extent;
		lo = base + (uint64_t) (coord[pre] - half > 0 ? coord[pre] - half : 0);
		hi = base + (uint64_t) (coord[pre] + half < last_extent - 1 ? coord[pre] + half : last_extent - 1);
		j = cur->ptr[t];
		while (j < grid->ncells && grid->cell_key[j] < lo)
			j++;
		cur->ptr[t] = j;
		for (; j < grid->ncells && grid->cell_key[j] <= hi; j++)
			out[m++] = j;
	}
	return m;
}

/* Disjoint-set find with path halving. */
static inline int64_t
uf_find(int64_t *parent, int64_t a)
{
	while (parent[a] != a)
	{
		parent[a] = parent[parent[a]];
		a = parent[a];
	}
	return a;
}

/* Union by smaller root index, so a root is its set's lowest sorted position. */
static inline void
uf_union(int64_t *parent, int64_t a, int64_t b)
{
	a = uf_find(parent, a);
	b = uf_find(parent, b);
	if (a < b)
		parent[b] = a;
	else if (b < a)
		parent[a] = b;
}

#define CELL_SIZE(g, c) ((g)->cell_start[(c) + 1] - (g)->cell_start[(c)])

/* Asks the cancel callback every GC_CANCEL_EVERY steps of work. */
static inline int
cancelled(gc_cancel_fn cancel, void *arg, int64_t *work, int64_t step)
{
	*work += step;
	if (*work < GC_CANCEL_EVERY)
		return 0;
	*work = 0;
	return cancel && cancel(arg);
}

/*
 * DBSCAN of n points of dimension d (see the file header for the rules).
 * Writes result->cluster, result->is_core and result->n_clusters.
 */
gc_status
gc_dbscan_cpu(const float *x, int64_t n, int32_t d,
			  const gc_dbscan_params *params, gc_dbscan_result *result,
			  gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	Grid		grid;
	GridCursor	cur = {NULL};
	double		eps = params->eps;
	double		eps2 = eps * eps;
	int64_t		min_pts = params->min_pts;
	uint8_t    *core = NULL;	/* [n] by sorted position */
	int64_t    *parent = NULL;	/* [n] by sorted position */
	int64_t    *nbr = NULL;		/* neighbour cells of one cell */
	int64_t    *root_id = NULL; /* [n] cluster id by root position */
	int64_t		work = 0;
	int64_t		nclusters = 0;
	gc_status	status = GC_OK;

	if (params->struct_size < sizeof(gc_dbscan_params))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "gc_dbscan_params is too small");
	if (!(eps > 0.0) || !isfinite(eps) || params->min_pts < 1 || d < 1 || n < 0)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT,
					   "invalid DBSCAN parameters (eps %g, min_pts %d, d %d)",
					   eps, params->min_pts, d);
	result->n_clusters = 0;
	if (n == 0)
		return GC_OK;

	status = grid_build(&grid, x, n, d, eps, cancel, cancel_arg, errbuf);
	if (status != GC_OK)
		goto done;

	core = calloc((size_t) n, 1);
	parent = malloc(sizeof(int64_t) * (size_t) n);
	nbr = malloc(sizeof(int64_t) * (size_t) (grid.max_cells + 1));
	root_id = malloc(sizeof(int64_t) * (size_t) n);
	if (!core || !parent || !nbr || !root_id)
	{
		status = gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY,
						 "out of memory for DBSCAN of %lld points", (long long) n);
		goto done;
	}

	/* Phase 1: core points, counting neighbours only up to min_pts. */
	if ((status = cursor_init(&grid, &cur, errbuf)) != GC_OK)
		goto done;
	for (int64_t c = 0; c < grid.ncells; c++)
	{
		int64_t		s = grid.cell_start[c];
		int64_t		size = CELL_SIZE(&grid, c);
		int32_t		m;

		if (grid.dense_ok && size >= min_pts)
		{
			memset(core + s, 1, (size_t) size);
			continue;
		}
		m = grid_neighbours(&grid, &cur, c, nbr);
		for (int64_t i = s; i < s + size; i++)
		{
			const float *xi = grid.xs + (size_t) i * d;
			int64_t		count = 0;

			if (grid.dense_ok)
				count = size;
			for (int32_t t = 0; t < m && count < min_pts; t++)
			{
				int64_t		nc = nbr[t];

				if (grid.dense_ok && nc == c)
					continue;
				for (int64_t j = grid.cell_start[nc]; j < grid.cell_start[nc + 1]; j++)
				{
					if (gc_dist2(xi, grid.xs + (size_t) j * d, d) <= eps2 &&
						++count >= min_pts)
						break;
				}
			}
			core[i] = count >= min_pts;
			if (cancelled(cancel, cancel_arg, &work, m))
			{
				status = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
				goto done;
			}
		}
	}

	/* Phase 2: union core points within eps, each pair of cells once. */
	for (int64_t i = 0; i < n; i++)
		parent[i] = i;
	memset(cur.ptr, 0, sizeof(int64_t) * (size_t) grid.nrows);
	for (int64_t c = 0; c < grid.ncells; c++)
	{
		int64_t		s = grid.cell_start[c];
		int64_t		e = grid.cell_start[c + 1];
		int			c_dense = grid.dense_ok && CELL_SIZE(&grid, c) >= min_pts;
		int32_t		m;

		m = grid_neighbours(&grid, &cur, c, nbr);
		for (int32_t t = 0; t < m; t++)
		{
			int64_t		nc = nbr[t];
			int64_t		ns = grid.cell_start[nc];
			int64_t		ne = grid.cell_start[nc + 1];
			int			n_dense = grid.dense_ok && ne - ns >= min_pts;

			if (nc < c)
				continue;
			if (nc == c)
			{
				if (c_dense)
				{
					for (int64_t i = s + 1; i < e; i++)
						uf_union(parent, s, i);
					continue;
				}
				for (int64_t i = s; i < e; i++)
				{
					if (!core[i])
						continue;
					for (int64_t j = i + 1; j < e; j++)
						if (core[j] && uf_find(parent, i) != uf_find(parent, j) &&
							gc_dist2(grid.xs + (size_t) i * d, grid.xs + (size_t) j * d, d) <= eps2)
							uf_union(parent, i, j);
				}
			}
			else if (c_dense || n_dense)
			{
				/*
				 * One side is a single connected set: each core point of the
				 * other side needs one neighbour in it, and when both sides
				 * are dense one pair settles everything.
				 */
				int64_t		ds = c_dense ? s : ns;
				int64_t		de = c_dense ? e : ne;
				int64_t		os = c_dense ? ns : s;
				int64_t		oe = c_dense ? ne : e;

				for (int64_t j = os; j < oe; j++)
				{
					int			hit = 0;

					if (!core[j] || uf_find(parent, j) == uf_find(parent, ds))
						continue;
					for (int64_t i = ds; i < de && !hit; i++)
						if (gc_dist2(grid.xs + (size_t) i * d, grid.xs + (size_t) j * d, d) <= eps2)
						{
							uf_union(parent, i, j);
							hit = 1;
						}
					if (hit && c_dense && n_dense)
						break;
				}
			}
			else
			{
				for (int64_t i = s; i < e; i++)
				{
					if (!core[i])
						continue;
					for (int64_t j = ns; j < ne; j++)
						if (core[j] && uf_find(parent, i) != uf_find(parent, j) &&
							gc_dist2(grid.xs + (size_t) i * d, grid.xs + (size_t) j * d, d) <= eps2)
							uf_union(parent, i, j);
				}
			}
			if (cancelled(cancel, cancel_arg, &work, (e - s) + (ne - ns)))
			{
				status = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
				goto done;
			}
		}
	}

	/*
	 * Phase 3: a border point joins the cluster of the lowest-row core point
	 * within eps.  Rows within a cell are in order, so the first hit in a
	 * cell is that cell's best.  parent[] of a border point becomes the
	 * sorted position of that core point, or -1 for noise.
	 */
	memset(cur.ptr, 0, sizeof(int64_t) * (size_t) grid.nrows);
	for (int64_t c = 0; c < grid.ncells; c++)
	{
		int64_t		s = grid.cell_start[c];
		int64_t		e = grid.cell_start[c + 1];
		int32_t		m = -1;

		for (int64_t i = s; i < e; i++)
		{
			const float *xi = grid.xs + (size_t) i * d;
			int64_t		best = -1;

			if (core[i])
				continue;
			if (m < 0)
				m = grid_neighbours(&grid, &cur, c, nbr);
			for (int32_t t = 0; t < m; t++)
			{
				int64_t		nc = nbr[t];

				for (int64_t j = grid.cell_start[nc]; j < grid.cell_start[nc + 1]; j++)
				{
					if (best >= 0 && grid.perm[j] >= grid.perm[best])
						break;
					if (core[j] && gc_dist2(xi, grid.xs + (size_t) j * d, d) <= eps2)
					{
						best = j;
						break;
					}
				}
			}
			parent[i] = best >= 0 ? uf_find(parent, best) : -1;
			if (cancelled(cancel, cancel_arg, &work, m))
			{
				status = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
				goto done;
			}
		}
	}

	/* Number clusters by their lowest-row member, in row order. */
	{
		int64_t    *pos;			/* row -> sorted position */

		for (int64_t i = 0; i < n; i++)
			root_id[i] = -1;
		pos = malloc(sizeof(int64_t) * (size_t) n);
		if (!pos)
		{
			status = gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory numbering clusters");
			goto done;
		}
		for (int64_t i = 0; i < n; i++)
			pos[grid.perm[i]] = i;
		for (int64_t row = 0; row < n; row++)
		{
			int64_t		i = pos[row];
			int64_t		root = core[i] ? uf_find(parent, i) : parent[i];

			result->is_core[row] = core[i];
			if (root < 0)
			{
				result->cluster[row] = -1;
				continue;
			}
			if (root_id[root] < 0)
				root_id[root] = nclusters++;
			result->cluster[row] = (int32_t) root_id[root];
		}
		free(pos);
	}
	result->n_clusters = nclusters;

done:
	free(cur.ptr);
	free(core);
	free(parent);
	free(nbr);
	free(root_id);
	grid_free(&grid);
	return status;
}
