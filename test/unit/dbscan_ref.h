/*
 * dbscan_ref.h
 *    The brute-force DBSCAN reference of the unit tests (test_dbscan.c,
 *    test_pairs.c): the rules of gc_dbscan_params applied literally to
 *    every pair of rows, with the distance of the metric compared with eps.
 */
#ifndef GPUCLUST_DBSCAN_REF_H
#define GPUCLUST_DBSCAN_REF_H

#include <stdlib.h>

#include "metric.h"

/* dist2 of rows i and j of x (element type t), as common/portable.h computes it. */
static double
ref_dist2(const void *x, gc_dtype t, int32_t d, int64_t i, int64_t j)
{
	if (t == GC_F64)
		return gc_dist2_f64((const double *) x + i * d, (const double *) x + j * d, d);
	return gc_dist2((const float *) x + i * d, (const float *) x + j * d, d);
}

/*
 * Within eps, by the definition: the distance of the metric (sqrt(dist2),
 * PostGIS's sqrt(dx * dx + dy * dy) in two dimensions, or dist2 / 2 on unit
 * rows) at most eps.
 */
static int
ref_near(const void *x, gc_dtype t, gc_metric m, int32_t d, int64_t i, int64_t j, double eps)
{
	return gc_metric_distance(m, ref_dist2(x, t, d, i, j)) <= eps;
}

/* The rules of gc_dbscan_params, applied to all pairs of rows x of element type t. */
static void
reference_t(const void *x, gc_dtype t, gc_metric m, int64_t n, int32_t d, double eps,
			int min_pts, int32_t *cluster, uint8_t *is_core)
{
	int64_t    *comp = malloc(sizeof(int64_t) * n);
	int64_t    *id = malloc(sizeof(int64_t) * n);
	int64_t    *stack = malloc(sizeof(int64_t) * n);
	int32_t		next = 0;

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		cnt = 0;

		for (int64_t j = 0; j < n; j++)
			cnt += ref_near(x, t, m, d, i, j, eps);
		is_core[i] = cnt >= min_pts;
		comp[i] = -1;
		id[i] = -1;
	}
	/* connected components of core points, labelled by lowest member */
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		top = 0;

		if (!is_core[i] || comp[i] >= 0)
			continue;
		comp[i] = i;
		stack[top++] = i;
		while (top > 0)
		{
			int64_t		a = stack[--top];

			for (int64_t j = 0; j < n; j++)
				if (is_core[j] && comp[j] < 0 && ref_near(x, t, m, d, a, j, eps))
				{
					comp[j] = i;
					stack[top++] = j;
				}
		}
	}
	for (int64_t i = 0; i < n; i++)
		if (!is_core[i])
			for (int64_t j = 0; j < n; j++)
				if (is_core[j] && ref_near(x, t, m, d, i, j, eps))
				{
					comp[i] = comp[j];
					break;
				}
	for (int64_t i = 0; i < n; i++)
	{
		if (comp[i] < 0)
			cluster[i] = -1;
		else
		{
			if (id[comp[i]] < 0)
				id[comp[i]] = next++;
			cluster[i] = (int32_t) id[comp[i]];
		}
	}
	free(comp);
	free(id);
	free(stack);
}

#endif							/* GPUCLUST_DBSCAN_REF_H */
