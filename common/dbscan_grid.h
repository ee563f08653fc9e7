/*
 * dbscan_grid.h
 *    The plan of the DBSCAN grid index, the same on both back ends: which
 *    dimensions the grid covers, the cell side, the extent of the grid,
 *    whether a cell is small enough that all its members are neighbours
 *    (dense cells), and the neighbour cells of a cell as rows along the last
 *    grid dimension.
 *
 * The grid covers min(d, 3) dimensions: all of them for d <= 3, else the
 * three along which an evenly spaced sample of the points falls into the
 * most distinct cells (gc_grid_choose_dims), so that data whose first
 * coordinates hardly vary still spread over many cells.  With d <= 3 a cell
 * of side eps/sqrt(d) has a diameter below eps (FDBSCAN-DenseBox of
 * Prokopenko, Lebrun-Grandie and Arndt, "Fast tree-based algorithms for
 * DBSCAN on GPUs"): a cell holding at least min_pts points is all core and
 * one cluster.  With more dimensions, or when the caller asks for a coarse
 * grid, the cells have side eps and only filter candidates.
 *
 * Two ways to number the cells:
 *
 *  direct  when the box of the points fits 2^31 cells a dimension and 4e18
 *          cells in all at that side: a cell coordinate is
 *          floor((v - lo) / side), computed in double with a relative error
 *          below 1e-6, so the cell side carries a 1e-5 safety margin and the
 *          gap between cells a 4e-6 one;
 *  mapped  otherwise (a few far points, data at very different scales, a
 *          tiny eps): the distinct values of every grid dimension, sorted
 *          once (gc_grid_maps_build), each numbered by the sum of the steps
 *          before it; the step between consecutive values a < b is the
 *          number of raw cells floor(v / side) between them, shortened to at
 *          most 2 * GC_GRID_MAX_REACH + 1 (gc_grid_value_step).  Two cells
 *          within reach of each other keep their distance, farther ones stay
 *          farther than reach, so the neighbour rows are unchanged and the
 *          side stays eps/sqrt(d) whatever the extent: one outlier no longer
 *          makes the grid coarse.  Where |v / side| reaches 2^51 (a far
 *          point, a tiny eps) the raw cells are not computed at all: the step
 *          is a lower bound of their difference taken from b - a, which
 *          cannot overflow, and dense cells are off.
 *
 * The grid never changes the answer, it only skips distance computations
 * that cannot matter.  In either way the side doubles while the grid would
 * exceed the 64-bit cell keys (dense cells then off); a mapped plan finds
 * the number of doublings by bisection over its sorted values, without
 * building the tables again (gc_grid_maps_side), so a tiny eps costs a few
 * scans of the values rather than one sort per doubling.
 *
 * A tiny eps: where bound is below DBL_MIN (eps below about 1.5e-154), the
 * squares that make dist2 underflow, and a pair whose computed dist2 is at
 * most bound can lie farther apart than eps (at bound 0, up to about
 * 2^-537 sqrt(d)).  The grid's radius then covers that distance
 * (gc_grid_radius), and dense cells are off, so that the grid keeps every
 * pair the rule of common/metric.h makes neighbours, as the sweep and the
 * brute force do.
 *
 * Rows of either element type (gc_dtype) and either metric: a neighbour is
 * a pair whose dist2 (common/metric.h) is at most bound, computed once on
 * the host by gc_metric_dist2_le; the grid is sized by radius, a Euclidean
 * distance that covers bound (gc_grid_radius).  Coordinates are read as
 * doubles (exact for float rows), so the arithmetic of the cells is the
 * same for both element types; what differs is how far apart two distinct
 * coordinate values can be:
 *
 *  direct  floor((v - lo) / side) has a relative error below 2^-52 of
 *          (v - lo) / side <= 2^31, under 5e-7 cells, for float and double
 *          coordinates alike: within the margins above;
 *  mapped  while |v / side| < GC_GRID_RAW_EXACT (2^51) the step between
 *          two consecutive distinct values is the distance of their raw
 *          cells floor(v / side).  Rounded once, a raw cell may be one too
 *          high where v / side lies within a few ulps below an integer.  For
 *          float coordinates that never matters: where that error reaches
 *          the margins (|v / side| beyond about 1e10), consecutive floats
 *          are more than 100 cells apart.  Distinct double coordinates can
 *          lie a few cells apart however far from the origin, so for double
 *          rows the raw cell is made exact (gc_grid_raw: the rounded
 *          quotient's floor checked against v with exact fused
 *          multiply-adds).  From 2^51 on, for both types, the step is the
 *          lower bound of gc_grid_value_step taken from b - a (cells only
 *          come closer, so no neighbour is lost), and dense cells are off.
 */
#ifndef GPUCLUST_DBSCAN_GRID_H
#define GPUCLUST_DBSCAN_GRID_H

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checks.h"
#include "portable.h"
#include "sort.h"

#define GC_GRID_MAX_DIMS	3
#define GC_GRID_MAX_REACH	2	/* side >= eps / sqrt(3): neighbours lie within 2 cells */
#define GC_GRID_MAX_ROWS	25	/* (2 * GC_GRID_MAX_REACH + 1)^(GC_GRID_MAX_DIMS - 1) */
#define GC_GRID_MAX_EXTENT	2147483648.0	/* cells per dimension */
#define GC_GRID_MAX_CELLS	4.0e18	/* cells in all, below 2^62 */
#define GC_GRID_RAW_LIMIT	1.0e300	/* raw cells are clamped to +-this */
#define GC_GRID_RAW_EXACT	0x1p51	/* raw cells are computed while |v / side| is below this */
#define GC_GRID_TINY_BOUND	DBL_MIN /* a bound below this: squares may underflow */
#define GC_GRID_MAX_DOUBLINGS 2200	/* more than the exponent range of double */
#define GC_GRID_SAMPLE	1024	/* rows of the sample that chooses the dimensions */

typedef struct gc_grid_plan
{
	int32_t		d;
	int32_t		g;				/* grid dimensions: min(d, 3) */
	int32_t		dim[GC_GRID_MAX_DIMS];	/* the feature each grid dimension reads */
	int32_t		fine;			/* side eps/sqrt(d) asked for (d <= 3, not coarse) */
	int32_t		dense_ok;		/* cells small enough that all members are neighbours */
	int32_t		reach;			/* neighbour cells lie within +-reach a dimension */
	double		radius;			/* a Euclidean distance covering bound (gc_grid_radius) */
	double		bound;			/* a neighbour when dist2 <= bound (gc_metric_dist2_le) */
	double		side;
	double		lo[GC_GRID_MAX_DIMS];
	int64_t		extent[GC_GRID_MAX_DIMS];

	/*
	 * Mapped numbering: per grid dimension, the ascending distinct values
	 * and their grid coordinates (host or device memory, as the back end
	 * put them there).
	 */
	int32_t		mapped;
	int32_t		tiny;			/* bound below GC_GRID_TINY_BOUND: no dense cells */
	int32_t		f64;			/* double rows: exact raw cells (gc_grid_raw) */
	int32_t		raw_inexact;	/* values GC_GRID_RAW_EXACT cells from the origin or more: no dense cells */
	int64_t		nmap[GC_GRID_MAX_DIMS];
	const double *map_val[GC_GRID_MAX_DIMS];	/* [nmap] the distinct values, ascending */
	const int64_t *map_cell[GC_GRID_MAX_DIMS];	/* [nmap] their grid coordinates */

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

/* Separation of two cells |o| apart along a dimension, in sides, rounded down safely. */
static inline double
gc_grid_gap(int64_t o)
{
	int64_t		a = o < 0 ? -o : o;

	return a > 1 ? (double) (a - 1) * (1.0 - 4e-6) : 0.0;
}

/* Element i of rows x of element type t, as a double (exact). */
static GC_HD double
gc_grid_x(const void *x, gc_dtype t, size_t i)
{
	return t == GC_F64 ? ((const double *) x)[i] : (double) ((const float *) x)[i];
}

/*
 * The Euclidean radius the grid is sized by: one that covers every pair
 * of d features with dist2 <= bound.  Euclidean: eps itself (sqrt(bound) <=
 * eps, as gc_metric_dist2_le makes it; the margins above cover the half ulp
 * by which the exact root may exceed it).  Cosine: sqrt(bound) rounded up.
 * A bound below GC_GRID_TINY_BOUND: each of the d squares of a computed
 * dist2 may have lost up to 2^-1075 to underflow, so a pair with dist2 <=
 * bound is within sqrt(bound + d 2^-1075) (the sum of subnormals is exact),
 * rounded up.
 */
static inline double
gc_grid_radius(gc_metric m, double eps, double bound, int32_t d)
{
	if (!(bound >= GC_GRID_TINY_BOUND))
	{
		double		r = nextafter(sqrt(bound + (double) d * 0x1p-1074), INFINITY);

		return m == GC_METRIC_COSINE || r > eps ? r : eps;
	}
	return m == GC_METRIC_COSINE ? nextafter(sqrt(bound), INFINITY) : eps;
}

/*
 * The raw cell of value v at this side: floor(v / side), -0 made 0,
 * clamped.  exact (double rows): the floor of the rounded quotient is
 * corrected to floor(v / side) where it may be off, that is where the
 * quotient lies within 2^-51 of its size from an integer, by the signs of
 * r * side - v and (r + 1) * side - v, which fma computes exactly; so the
 * raw cell is exact wherever |v / side| < 2^52.
 */
static GC_HD double
gc_grid_raw(double side, double v, int exact)
{
	double		q = v / side;
	double		r = floor(q);

	if (exact && fabs(q) < 0x1p52)
	{
		double		f = q - r;	/* exact */
		double		tol = fabs(q) * 0x1p-51;

		if (f <= tol || 1.0 - f <= tol)
		{
			if (fma(r, side, -v) > 0)
				r -= 1.0;
			else if (fma(r + 1.0, side, -v) <= 0)
				r += 1.0;
		}
	}
	r += 0.0;

	if (r > GC_GRID_RAW_LIMIT)
		r = GC_GRID_RAW_LIMIT;
	if (r < -GC_GRID_RAW_LIMIT)
		r = -GC_GRID_RAW_LIMIT;
	return r;
}

/*
 * The neighbour rows of a plan whose side is set: reach, and for each
 * offset of the first g - 1 dimensions the widest row within radius.
 */
static inline gc_status
gc_grid_plan_rows(gc_grid_plan *gp, gc_error *err)
{
	int			pre = gp->g - 1;
	int32_t		width;
	int32_t		rows = 1;

	/* the radius in sides, squared, for the gaps of gc_grid_gap */
	double		lim = gp->radius / gp->side;
	double		lim2 = lim * lim * (1.0 + 1e-12);

	gp->reach = (int32_t) floor(lim * (1.0 + 4e-6)) + 1;
	if (gp->reach > GC_GRID_MAX_REACH)
		return gc_error_set(err, GC_ERR_INTERNAL,
							"DBSCAN grid reach %d is out of range", gp->reach);
	width = 2 * gp->reach + 1;
	for (int k = 0; k < pre; k++)
		rows *= width;
	gp->nrows = 0;
	gp->max_cells = 0;
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
			gap = gc_grid_gap(o[k]);
			gap2 += gap * gap;
		}
		for (int32_t a = 0; a <= gp->reach; a++)
		{
			double		gap = gc_grid_gap(a);

			if (gap2 + gap * gap <= lim2)
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
							"DBSCAN grid without its own cell");
	return GC_OK;
}

/* The side the grid asks for: radius/sqrt(d) less a margin when fine, else radius plus one. */
static inline double
gc_grid_side0(int32_t d, double radius, int coarse)
{
	return d <= GC_GRID_MAX_DIMS && !coarse ? radius / sqrt((double) d) * (1.0 - 1e-5) :
		radius * (1.0 + 1e-5);
}

/*
 * The number of distinct raw cells of side `side` of feature f among the
 * sample rows (every n/s-th of s rows): an open-addressing set of the raw
 * cells' bits in slots [2 * GC_GRID_SAMPLE] (all ones: empty).
 */
static inline int64_t
gc_grid_distinct_cells(const void *x, gc_dtype t, int64_t n, int32_t d, int64_t s, int32_t f,
					   double side, uint64_t *slots)
{
	const uint64_t mask = 2 * GC_GRID_SAMPLE - 1;
	int64_t		distinct = 0;

	memset(slots, 0xff, sizeof(uint64_t) * 2 * GC_GRID_SAMPLE);
	for (int64_t j = 0; j < s; j++)
	{
		double		v = gc_grid_x(x, t, (size_t) ((j * n / s) * d + f));
		/* far from the origin in cells (a tiny radius) every distinct value is a cell of its own */
		double		r = fabs(v / side) < GC_GRID_RAW_EXACT ? gc_grid_raw(side, v, t == GC_F64) : v;
		uint64_t	u;
		uint64_t	h;

		memcpy(&u, &r, sizeof(u));
		for (h = (u * 0x9E3779B97F4A7C15ull) >> 53 & mask; slots[h] != ~(uint64_t) 0 && slots[h] != u;
			 h = (h + 1) & mask)
			;
		if (slots[h] != u)
		{
			slots[h] = u;
			distinct++;
		}
	}
	return distinct;
}

/*
 * The grid dimensions of d > 3 features (host side, both back ends): the
 * three along which an evenly spaced sample of at most GC_GRID_SAMPLE rows
 * of x (element type t) has the most distinct raw cells of side radius (the
 * lower feature on a tie),
 * in ascending order.  For d <= 3, every dimension.  Returns 0, or -1 when
 * out of memory.
 */
static inline int
gc_grid_choose_dims(const void *x, gc_dtype t, int64_t n, int32_t d, double radius, int32_t *dims)
{
	int64_t		s = n < GC_GRID_SAMPLE ? n : GC_GRID_SAMPLE;
	int64_t		best[GC_GRID_MAX_DIMS] = {-1, -1, -1};
	uint64_t   *slots;

	for (int k = 0; k < GC_GRID_MAX_DIMS; k++)
		dims[k] = k < d ? k : 0;
	if (d <= GC_GRID_MAX_DIMS || s == 0)
		return 0;
	slots = (uint64_t *) malloc(sizeof(uint64_t) * 2 * GC_GRID_SAMPLE);
	if (!slots)
		return -1;
	for (int32_t f = 0; f < d; f++)
	{
		int64_t		distinct = gc_grid_distinct_cells(x, t, n, d, s, f, radius, slots);

		/* insert into the top three, kept by count, ties to the lower feature */
		for (int k = 0; k < GC_GRID_MAX_DIMS; k++)
			if (distinct > best[k])
			{
				for (int m = GC_GRID_MAX_DIMS - 1; m > k; m--)
				{
					best[m] = best[m - 1];
					dims[m] = dims[m - 1];
				}
				best[k] = distinct;
				dims[k] = f;
				break;
			}
	}
	free(slots);
	for (int k = 1; k < GC_GRID_MAX_DIMS; k++)
		for (int m = k; m > 0 && dims[m] < dims[m - 1]; m--)
		{
			int32_t		t = dims[m];

			dims[m] = dims[m - 1];
			dims[m - 1] = t;
		}
	return 0;
}

/*
 * Plans the grid over the dimensions dims (gc_grid_choose_dims) of points
 * of element type t whose coordinates there lie in [lo[k], hi[k]], for
 * neighbours within bound (radius: gc_grid_radius).  coarse: cells of side
 * radius even when d <= 3.  When the box does not fit the direct numbering, the
 * plan comes back with mapped set and no extents: the caller builds the
 * maps (gc_grid_maps_build), which finish it.  Returns GC_OK, or
 * GC_ERR_INTERNAL when an invariant breaks.
 */
static inline gc_status
gc_grid_plan_make(gc_grid_plan *gp, int32_t d, gc_dtype t, double radius, double bound,
				  const int32_t *dims, const double *lo, const double *hi, int coarse, gc_error *err)
{
	double		side0 = gc_grid_side0(d, radius, coarse);

	memset(gp, 0, sizeof(*gp));
	gp->d = d;
	gp->g = d < GC_GRID_MAX_DIMS ? d : GC_GRID_MAX_DIMS;
	gp->fine = d <= GC_GRID_MAX_DIMS && !coarse;
	gp->radius = radius;
	gp->bound = bound;
	gp->tiny = !(bound >= GC_GRID_TINY_BOUND);
	gp->f64 = t == GC_F64;
	for (int k = 0; k < gp->g; k++)
	{
		gp->dim[k] = dims[k];
		gp->lo[k] = lo[k];
	}
	gp->side = side0;
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
		if (!fits || !(cells < GC_GRID_MAX_CELLS))
		{
			gp->mapped = 1;
			return GC_OK;
		}
	}
	for (int k = 0; k < gp->g; k++)
		gp->extent[k] = (int64_t) floor((hi[k] - lo[k]) / gp->side) + 1;
	gp->dense_ok = gp->fine && !gp->tiny;
	return gc_grid_plan_rows(gp, err);
}

/* The grid coordinate along grid dimension k of a point whose feature dim[k] is v, host and device. */
static GC_HD int64_t
gc_grid_cell_of(const gc_grid_plan *gp, double v, int k)
{
	if (gp->mapped)
	{
		const double *t = gp->map_val[k];
		int64_t		a = 0;
		int64_t		b = gp->nmap[k] - 1;

		while (a < b)
		{
			int64_t		m = a + (b - a) / 2;

			if (t[m] < v)
				a = m + 1;
			else
				b = m;
		}
		return gp->map_cell[k][a];
	}
	else
	{
		double		c = floor((v - gp->lo[k]) / gp->side);

		if (c < 0)
			c = 0;
		if (c >= (double) gp->extent[k])
			c = (double) (gp->extent[k] - 1);
		return (int64_t) c;
	}
}

/* ---------------------------------------------------------------- maps */

/* E(r) of the top: how far the exact raw cell of a double row may be from r. */
static GC_HD double
gc_grid_raw_error(double r)
{
	return fabs(r) < 0x1p52 ? 0.0 : (fabs(r) + 2.0) * 0x1p-52;
}

/*
 * The step of the grid coordinate between consecutive distinct raw cells
 * a < b: their distance, at most 2 * GC_GRID_MAX_REACH + 1 (more than any
 * reach); for double rows (f64) less ceil(E(a) + E(b)) (see the top), at
 * least 0.
 */
static GC_HD int64_t
gc_grid_map_step(double a, double b, int f64)
{
	double		gap = b - a;
	double		e = f64 ? gc_grid_raw_error(a) + gc_grid_raw_error(b) : 0.0;

	if (e > 0)
		gap = fmax(gap - ceil(e), 0.0);
	return gap < (double) (2 * GC_GRID_MAX_REACH + 1) ? (int64_t) gap : 2 * GC_GRID_MAX_REACH + 1;
}

/*
 * The step of the grid coordinate between consecutive distinct values
 * a < b of a grid dimension at this side, host and device.  Near the origin
 * (|v / side| below GC_GRID_RAW_EXACT) the distance of their raw cells
 * (gc_grid_map_step).  Farther, a lower bound of it that cannot overflow:
 * floor(b / side) - floor(a / side) >= floor((b - a) / side), and the
 * computed (b - a) / side, two roundings, is within 2^-51 of its size of
 * the exact quotient, so less 2^-49 of it is below.  A shorter step only
 * brings cells closer, which the neighbour rows allow.
 */
static GC_HD int64_t
gc_grid_value_step(double a, double b, double side, int f64)
{
	const double cap = (double) (2 * GC_GRID_MAX_REACH + 1);
	double		q;

	if (fabs(a / side) < GC_GRID_RAW_EXACT && fabs(b / side) < GC_GRID_RAW_EXACT)
		return gc_grid_map_step(gc_grid_raw(side, a, f64), gc_grid_raw(side, b, f64), f64);
	q = (b - a) / side;
	q = floor(q * (1.0 - 0x1p-49));
	return q < cap ? (q > 0 ? (int64_t) q : 0) : (int64_t) cap;
}

/*
 * The extent of a grid dimension whose m distinct values vals are
 * ascending, at this side: one more than the sum of the steps.
 */
static inline int64_t
gc_grid_values_extent(const double *vals, int64_t m, double side, int f64)
{
	int64_t		e = 1;

	for (int64_t j = 1; j < m; j++)
		e += gc_grid_value_step(vals[j - 1], vals[j], side, f64);
	return e;
}

/*
 * The extent of grid dimension k at this side, as gc_grid_values_extent
 * gives it, or -1 when cancelled.  The host's scan of the sorted values
 * (gc_grid_host_extent), or the same sum of steps on the CPU core's
 * threads or on the device: the steps are integers, so every order of
 * summing gives the same extent.
 */
typedef int64_t (*gc_grid_extent_fn) (void *arg, int k, double side);

/* The argument of gc_grid_host_extent: the sorted distinct values of each grid dimension. */
typedef struct gc_grid_host_values
{
	const double *const *vals;	/* [g][m[k]] */
	const int64_t *m;
	int			f64;
} gc_grid_host_values;

static inline int64_t
gc_grid_host_extent(void *arg, int k, double side)
{
	const gc_grid_host_values *h = (const gc_grid_host_values *) arg;

	return gc_grid_values_extent(h->vals[k], h->m[k], side, h->f64);
}

/*
 * Whether the g dimensions at this side fit the cell keys: 1, 0, or -1
 * when cancelled.  The product only grows, so it stops at the first
 * dimension that makes it too large.
 */
static inline int
gc_grid_values_fit(const gc_grid_plan *gp, gc_grid_extent_fn extent, void *arg, double side)
{
	double		cells = 1.0;

	for (int k = 0; k < gp->g && cells < GC_GRID_MAX_CELLS; k++)
	{
		int64_t		e = extent(arg, k, side);

		if (e < 0)
			return -1;
		cells *= (double) e;
	}
	return cells < GC_GRID_MAX_CELLS;
}

/*
 * The side of a mapped plan (host side, both back ends), from the extents
 * of its grid dimensions at a side (extent, see gc_grid_extent_fn):
 * gp->side doubled the fewest times that makes the cells fit the keys, the
 * number of doublings found by doubling it and then bisecting (the extents
 * shrink as the side grows), each try one sum of steps over the sorted
 * distinct values; so a tiny eps, whose side is doubled hundreds of times,
 * costs a few dozen sums.  Returns the side, or 0 when cancelled.
 */
static inline double
gc_grid_maps_side(const gc_grid_plan *gp, gc_grid_extent_fn extent, void *arg,
				  gc_cancel_fn cancel, void *cancel_arg)
{
	int			lo = 0;			/* does not fit (after the first try) */
	int			hi = 1;			/* fits, once found */
	int			fit = gc_grid_values_fit(gp, extent, arg, gp->side);

	if (fit != 0)
		return fit > 0 ? gp->side : 0.0;
	for (;;)
	{
		if (cancel && cancel(cancel_arg))
			return 0.0;
		if (hi >= GC_GRID_MAX_DOUBLINGS)
			break;
		fit = gc_grid_values_fit(gp, extent, arg, ldexp(gp->side, hi));
		if (fit < 0)
			return 0.0;
		if (fit)
			break;
		lo = hi;
		hi *= 2;
	}
	while (hi - lo > 1)
	{
		int			mid = lo + (hi - lo) / 2;

		if (cancel && cancel(cancel_arg))
			return 0.0;
		fit = gc_grid_values_fit(gp, extent, arg, ldexp(gp->side, mid));
		if (fit < 0)
			return 0.0;
		if (fit)
			hi = mid;
		else
			lo = mid;
	}
	return ldexp(gp->side, hi);
}

/*
 * Finishes a mapped plan whose tables and extents are in place and whose
 * side is final: dense cells, the neighbour rows.
 */
static inline gc_status
gc_grid_maps_done(gc_grid_plan *gp, double side0, const double *lo, const double *hi, gc_error *err)
{
	gp->raw_inexact = 0;
	for (int k = 0; k < gp->g; k++)
		gp->raw_inexact |= !(fmax(fabs(lo[k]), fabs(hi[k])) / gp->side < GC_GRID_RAW_EXACT);
	gp->dense_ok = gp->fine && gp->side == side0 && !gp->raw_inexact && !gp->tiny;
	return gc_grid_plan_rows(gp, err);
}

/*
 * The tables of a mapped plan, in host memory, and the grid coordinates of
 * every point (the CPU core reads them instead of searching the tables).
 */
typedef struct gc_grid_maps
{
	double	   *val[GC_GRID_MAX_DIMS];	/* [nmap[k]] */
	int64_t    *cell[GC_GRID_MAX_DIMS]; /* [nmap[k]] */
	int64_t    *coord[GC_GRID_MAX_DIMS];	/* [n] */
} gc_grid_maps;

static inline void
gc_grid_maps_free(gc_grid_maps *maps)
{
	for (int k = 0; k < GC_GRID_MAX_DIMS; k++)
	{
		free(maps->val[k]);
		free(maps->cell[k]);
		free(maps->coord[k]);
	}
	memset(maps, 0, sizeof(*maps));
}

/*
 * The distinct values of grid dimension k of the points x [n, d] of element
 * type t, ascending, into maps->val[k], and each point's index among them
 * into maps->coord[k] (made grid coordinates by gc_grid_map_cells).  One
 * radix sort of the values' order keys.  Returns the number of distinct
 * values, -1 when cancelled, -2 when out of memory.
 */
static inline int64_t
gc_grid_map_values(const gc_grid_plan *gp, gc_grid_maps *maps, int k, const void *x, gc_dtype t,
				   int64_t n, gc_cancel_fn cancel, void *cancel_arg)
{
	uint64_t   *key = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) n);
	int64_t    *row = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	uint64_t   *tkey = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) n);
	int64_t    *trow = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	int64_t		m = 0;
	int			rc = 0;

	maps->val[k] = (double *) malloc(sizeof(double) * (size_t) n);
	maps->coord[k] = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	if (!key || !row || !tkey || !trow || !maps->val[k] || !maps->coord[k])
		rc = -2;
	for (int64_t i = 0; rc == 0 && i < n; i++)
	{
		/* +0 for -0, so that the two zeros are one value */
		key[i] = gc_order_key(gc_grid_x(x, t, (size_t) (i * gp->d + gp->dim[k])) + 0.0);
		row[i] = i;
	}
	if (rc == 0)
		rc = gc_radix_sort(key, row, tkey, trow, n, cancel, cancel_arg);
	free(tkey);
	free(trow);
	for (int64_t i = 0; rc == 0 && i < n; i++)
	{
		if (i == 0 || key[i] != key[i - 1])
			maps->val[k][m++] = gc_order_value(key[i]);
		maps->coord[k][row[i]] = m - 1;
	}
	free(key);
	free(row);
	return rc != 0 ? rc : m;
}

/*
 * The grid coordinates of the m distinct values of grid dimension k at the
 * plan's side into maps->cell[k], and each point's (its index among the
 * values, in maps->coord[k]) in place; the plan points at the tables.
 * Returns the extent, or -2 when out of memory.
 */
static inline int64_t
gc_grid_map_cells(gc_grid_plan *gp, gc_grid_maps *maps, int k, int64_t n, int64_t m)
{
	const double *v = maps->val[k];
	int64_t    *c = (int64_t *) malloc(sizeof(int64_t) * (size_t) (m > 0 ? m : 1));

	if (!c)
		return -2;
	for (int64_t j = 0; j < m; j++)
		c[j] = j == 0 ? 0 : c[j - 1] + gc_grid_value_step(v[j - 1], v[j], gp->side, gp->f64);
	for (int64_t i = 0; i < n; i++)
		maps->coord[k][i] = c[maps->coord[k][i]];
	maps->cell[k] = c;
	gp->nmap[k] = m;
	gp->map_val[k] = maps->val[k];
	gp->map_cell[k] = c;
	return m > 0 ? c[m - 1] + 1 : 1;
}

/*
 * Finishes a mapped plan from the points x [n, d] of element type t, whose
 * grid dimensions span [lo, hi], on the caller's thread: the reference the
 * CPU back end's build on its threads (gc_core_grid_maps,
 * src/core/grid_maps.c) is tested against, bit for bit; the GPU back end
 * builds the same tables on the device.  The sorted distinct values of
 * each grid dimension, the side (gc_grid_maps_side: doubled while the
 * cells would exceed the keys), the tables, the extents, dense cells, the
 * neighbour rows.  maps receives the tables and the points' coordinates, and the
 * plan points at the tables.  extent (with extent_arg) sums the steps for
 * the side's search; NULL: gc_grid_host_extent on the caller's thread.
 * Asks cancel between steps.
 */
static inline gc_status
gc_grid_maps_build(gc_grid_plan *gp, gc_grid_maps *maps, const void *x, gc_dtype t, int64_t n,
				   const double *lo, const double *hi, gc_grid_extent_fn extent, void *extent_arg,
				   gc_cancel_fn cancel, void *cancel_arg, gc_error *err)
{
	double		side0 = gp->side;
	int64_t		m[GC_GRID_MAX_DIMS] = {0, 0, 0};
	const double *vals[GC_GRID_MAX_DIMS] = {NULL, NULL, NULL};
	gc_grid_host_values hv;

	memset(maps, 0, sizeof(*maps));
	for (int k = 0; k < gp->g; k++)
	{
		m[k] = gc_grid_map_values(gp, maps, k, x, t, n, cancel, cancel_arg);
		if (m[k] == -1)
			return GC_ERR_CANCELLED;
		if (m[k] == -2)
			return gc_error_set(err, GC_ERR_OUT_OF_MEMORY,
								"out of memory planning the grid of %lld points", (long long) n);
		vals[k] = maps->val[k];
		gp->nmap[k] = m[k];
	}
	hv.vals = vals;
	hv.m = m;
	hv.f64 = gp->f64;
	if (extent == NULL)
	{
		extent = gc_grid_host_extent;
		extent_arg = &hv;
	}
	gp->side = gc_grid_maps_side(gp, extent, extent_arg, cancel, cancel_arg);
	if (gp->side == 0.0)
		return GC_ERR_CANCELLED;
	for (int k = 0; k < gp->g; k++)
	{
		int64_t		e = gc_grid_map_cells(gp, maps, k, n, m[k]);

		if (e == -2)
			return gc_error_set(err, GC_ERR_OUT_OF_MEMORY,
								"out of memory planning the grid of %lld points", (long long) n);
		gp->extent[k] = e;
	}
	return gc_grid_maps_done(gp, side0, lo, hi, err);
}

#endif							/* GPUCLUST_DBSCAN_GRID_H */
