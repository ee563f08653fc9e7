/*
 * metric.h
 *    The arithmetic of the two metrics (gc_metric of common/backend.h), once
 *    for the glue, both back ends and the harnesses.
 *
 * Every algorithm computes one quantity per pair of rows a, b: dist2, the
 * squared Euclidean distance accumulated in double over the features in
 * order, without fused multiply-add (gc_dist2 of common/portable.h; each
 * coordinate converted exactly to double first, whatever the element type).
 * The distance of the metric is a function of dist2 alone:
 *
 *   euclidean   sqrt(dist2), correctly rounded (as PostGIS's point distance
 *               sqrt(dx * dx + dy * dy) in two dimensions);
 *   cosine      dist2 / 2 on rows of unit length (gc_unit_rows), which is
 *               1 - cos(a, b) up to rounding; exact, as halving is.
 *
 * Both are non-decreasing in dist2, so "distance <= r" is "dist2 <= t" for
 * one bound t computed once on the host (gc_metric_dist2_le) and the kernels
 * compare dist2 alone, on the CPU and the GPU alike.
 */
#ifndef GPUCLUST_METRIC_H
#define GPUCLUST_METRIC_H

#include <math.h>
#include <stdint.h>

#include "backend.h"
#include "portable.h"

/* Bytes per element of x. */
static GC_HD size_t
gc_dtype_size(gc_dtype t)
{
	return t == GC_F64 ? sizeof(double) : sizeof(float);
}

/* The distance of the metric for a squared Euclidean distance dist2. */
static GC_HD double
gc_metric_distance(gc_metric m, double dist2)
{
	return m == GC_METRIC_COSINE ? dist2 * 0.5 : sqrt(dist2);
}

/*
 * The largest dist2 whose distance is at most r (r >= 0, finite): a pair is
 * within r exactly when its dist2 is at most this.  For the Euclidean
 * metric the square of r rounded is moved by ulps until sqrt agrees; for
 * the cosine metric it is 2r (halving is exact).
 */
static inline double
gc_metric_dist2_le(gc_metric m, double r)
{
	double		t;

	if (m == GC_METRIC_COSINE)
		return r * 2.0;
	t = r * r;
	if (isinf(t))
		return t;
	while (t > 0 && sqrt(t) > r)
		t = nextafter(t, 0.0);
	while (sqrt(nextafter(t, INFINITY)) <= r)
		t = nextafter(t, INFINITY);
	return t;
}

/*
 * The largest dist2 whose distance is below r (r > 0, finite), or -1 when
 * none is (only dist2 < 0, which does not happen): a pair is closer than r
 * exactly when its dist2 is at most this.
 */
static inline double
gc_metric_dist2_lt(gc_metric m, double r)
{
	double		t = gc_metric_dist2_le(m, r);

	while (t >= 0 && gc_metric_distance(m, t) >= r)
		t = t > 0 ? nextafter(t, 0.0) : -1.0;
	return t;
}

/*
 * Scales row [d] of x to unit length: s = the sum of squares in double over
 * the features in order, without fused multiply-add; each coordinate
 * becomes (double) x / sqrt(s), rounded to the element type.  Returns 0,
 * leaving the row as it is, when s is 0 (a zero row has no direction).
 */
static GC_HD int
gc_unit_row_f64(double *row, int32_t d)
{
	double		s = 0.0;
	double		norm;
	int32_t		j;

	for (j = 0; j < d; j++)
		s += row[j] * row[j];
	if (!(s > 0))
		return 0;
	norm = sqrt(s);
	for (j = 0; j < d; j++)
		row[j] = row[j] / norm;
	return 1;
}

static inline int
gc_unit_row_f32(float *row, int32_t d)
{
	double		s = 0.0;
	double		norm;
	int32_t		j;

	for (j = 0; j < d; j++)
		s += (double) row[j] * (double) row[j];
	if (!(s > 0))
		return 0;
	norm = sqrt(s);
	for (j = 0; j < d; j++)
		row[j] = (float) ((double) row[j] / norm);
	return 1;
}

/*
 * Scales every row of x [n, d] of element type t to unit length
 * (gc_unit_row_*).  Returns -1 when all were, else the index of the first
 * zero row (the rows before it scaled, the rest untouched).
 */
static inline int64_t
gc_unit_rows(void *x, gc_dtype t, int64_t n, int32_t d)
{
	int64_t		i;

	for (i = 0; i < n; i++)
	{
		int			ok = t == GC_F64 ? gc_unit_row_f64((double *) x + (size_t) i * d, d)
			: gc_unit_row_f32((float *) x + (size_t) i * d, d);

		if (!ok)
			return i;
	}
	return -1;
}

#endif							/* GPUCLUST_METRIC_H */
