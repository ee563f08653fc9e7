/*
 * dbscan_grid.h
 *    The plan of the DBSCAN grid index, the same on both back ends: the cell
 *    side, the extent of the grid, whether a cell is small enough that all
 *    its members are neighbours (dense cells), and the neighbour cells of a
 *    cell as rows along the last grid dimension.
 *
 * The grid covers the first min(d, 3) dimensions.  With d <= 3 a cell of
 * side eps/sqrt(d) has a diameter below eps (FDBSCAN-DenseBox of Prokopenko,
 * Lebrun-Grandie and Arndt, "Fast tree-based algorithms for DBSCAN on
 * GPUs"): a cell holding at least min_pts points is all core and one
 * cluster.  With more dimensions, or when the caller asks
 * for a coarse grid, the cells have side eps and only filter candidates.
 *
 * Cell coordinates are computed in double with a relative error below 1e-6
 * (extents are kept under 2^31 cells a dimension), so the cell side carries
 * a 1e-5 safety margin and the gap between cells a 4e-6 one: the grid never
 * changes the answer, it only skips distance computations that cannot
 * matter.  The side doubles until the grid fits the 64-bit cell keys.
 */
#ifndef GPUCLUST_DBSCAN_GRID_H
#define GPUCLUST_DBSCAN_GRID_H

#include <math.h>
#include <string.h>

#include "backend.h"
#include "checks.h"
#include "portable.h"

#define GC_GRID_MAX_DIMS	3
#define GC_GRID_MAX_REACH	2	/* side >= eps / sqrt(3): neighbours lie within 2 cells */
#define GC_GRID_MAX_ROWS	25	/* (2 * GC_GRID_MAX_REACH + 1)^(GC_GRID_MAX_DIMS - 1) */
#define GC_GRID_MAX_EXTENT	2147483648.0	/* cells per dimension */
#define GC_GRID_MAX_CELLS	4.0e18	/* cells in all, below 2^62 */

typedef struct gc_grid_plan
{
	int32_t		d;
	int32_t		g;				/* grid dimensions: min(d, 3) */
	int32_t		dense_ok;		/* cells small enough that all members are neighbours */
	int32_t		reach;			/* neighbour cells lie within +-reach a dimension */
	double		eps2;
	double		side;
	double		lo[GC_GRID_MAX_DIMS];
	int64_t		extent[GC_GRID_MAX_DIMS];

	/*
	 * The neighbour cells as rows along the last grid dimension: row t is
	 * offset row_off[t][0 .. g-2] in the other dimensions and -row_half[t] ..
	 * row_half[t] in the last.  Keys run fastest along the last dimension,
	 * so the existing cells of a row are consecutive in a sorted cell table.
	 */
	int32_t		nrows;
	int32_t		max_cells;		/* most neighbour cells a cell can have */
	int8_t		row_off[GC_GRID_MAX_ROWS][GC_GRID_MAX_DIMS - 1];
	int8_t		row_half[GC_GRID_MAX_ROWS];
} gc_grid_plan;

/* Separation of two cells |o| apart along a dimension, rounded down safely. */
static inline double
gc_grid_gap(double side, int64_t o)
{
	int64_t		a = o < 0 ? -o : o;

	return a > 1 ? (double) (a - 1) * side * (1.0 - 4e-6) : 0.0;
}

/*
 * Plans the grid for points whose first min(d, 3) coordinates lie in
 * [lo[k], hi[k]].  coarse: cells of side eps even when d <= 3.  Returns
 * GC_OK, or GC_ERR_INTERNAL when an invariant breaks.
 */
static inline gc_status
gc_grid_plan_make(gc_grid_plan *gp, int32_t d, double eps, const double *lo,
				  const double *hi, int coarse, gc_error *err)
{
	int			fine = d <= GC_GRID_MAX_DIMS && !coarse;
	double		side0 = fine ? eps / sqrt((double) d) * (1.0 - 1e-5) : eps * (1.0 + 1e-5);
	int32_t		width;
	int32_t		rows = 1;
	int			pre;

	memset(gp, 0, sizeof(*gp));
	gp->d = d;
	gp->g = d < GC_GRID_MAX_DIMS ? d : GC_GRID_MAX_DIMS;
	gp->eps2 = eps * eps;
	pre = gp->g - 1;
	for (int k = 0; k < gp->g; k++)
		gp->lo[k] = lo[k];

	gp->side = side0;
	for (;;)
	{
		double		cells = 1.0;
		int			fits = 1;

		for (int k = 0; k < gp->g; k++)
		{
			double		e = floor((hi[k] - lo[k]) / gp->side) + 1.0;

			if (e > GC_GRID_MAX_EXTENT)
				fits = 0;
			cells *= e;
		}
		if (fits && cells < GC_GRID_MAX_CELLS)
			break;
		gp->side *= 2.0;
	}
	for (int k = 0; k < gp->g; k++)
		gp->extent[k] = (int64_t) floor((hi[k] - lo[k]) / gp->side) + 1;
	gp->dense_ok = fine && gp->side == side0;
	gp->reach = (int32_t) floor(eps / gp->side * (1.0 + 4e-6)) + 1;
	if (gp->reach > GC_GRID_MAX_REACH)
		return gc_error_set(err, GC_ERR_INTERNAL,
							"DBSCAN grid reach %d is out of range; please report a bug", gp->reach);

	/* For each offset of the first g - 1 dimensions, the widest row within eps. */
	width = 2 * gp->reach + 1;
	for (int k = 0; k < pre; k++)
		rows *= width;
	for (int32_t t = 0; t < rows; t++)
	{
		int64_t		o[GC_GRID_MAX_DIMS - 1] = {0, 0};
		double		gap2 = 0.0;
		int32_t		r = t;
		int32_t		half = -1;

		for (int k = pre - 1; k >= 0; k--)
		{
			double		gap;

			o[k] = (r % width) - gp->reach;
			r /= width;
			gap = gc_grid_gap(gp->side, o[k]);
			gap2 += gap * gap;
		}
		for (int32_t a = 0; a <= gp->reach; a++)
		{
			double		gap = gc_grid_gap(gp->side, a);

			if (gap2 + gap * gap <= gp->eps2)
				half = a;
		}
		if (half < 0)
			continue;
		for (int k = 0; k < pre; k++)
			gp->row_off[gp->nrows][k] = (int8_t) o[k];
		gp->row_half[gp->nrows] = (int8_t) half;
		gp->max_cells += 2 * half + 1;
		gp->nrows++;
	}
	if (gp->nrows == 0)
		return gc_error_set(err, GC_ERR_INTERNAL,
							"DBSCAN grid without its own cell; please report a bug");
	return GC_OK;
}

/* The cell coordinate of value v along grid dimension k (the same on host and device). */
static GC_HD int64_t
gc_grid_cell_coord(const gc_grid_plan *gp, int k, float v)
{
	double		c = floor(((double) v - gp->lo[k]) / gp->side);

	if (c < 0)
		c = 0;
	if (c >= (double) gp->extent[k])
		c = (double) (gp->extent[k] - 1);
	return (int64_t) c;
}

#endif							/* GPUCLUST_DBSCAN_GRID_H */
