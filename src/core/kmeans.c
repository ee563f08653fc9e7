/*
 * kmeans.c
 *    k-means on the CPU: Lloyd's algorithm on Euclidean distance.
 *
 * The rules, which the GPU back end (cuda/kmeans.cu) follows as well:
 *
 *  - Initial centroids: the rows picked by k-means++ (D^2 sampling) or by
 *    'random' (k distinct rows), both driven by the seed through the shared
 *    code of kmeans_init.h, or the caller's k x d initial_centroids.
 *    Cluster j starts at the j-th initial centroid and keeps number j.
 *  - One iteration: every row goes to its nearest centroid (the lowest
 *    cluster number on a tie), then every centroid moves to the mean of its
 *    rows.  A cluster left empty is re-seeded with the row farthest from its
 *    centroid (kmeans_init.h, gc_kmeans_reseed_empty).
 *  - Stop after an iteration in which no row changed cluster, or in which
 *    the sum over clusters of the squared centroid move is at most
 *    tol * (mean per-feature variance of the data), or after max_iter
 *    iterations.  These are scikit-learn's rules for algorithm='lloyd'.
 *  - Unless it stopped because nothing changed, the rows are assigned once
 *    more to the final centroids, so that labels and centroids agree.
 *  - Output: label and Euclidean distance to the assigned centroid per row;
 *    per cluster the centroid, the size and the inertia (sum of squared
 *    distances); and the number of iterations run.
 *
 * Distances are accumulated in double.  Lloyd's iteration and its GPU
 * counterpart follow Li, Zhao and Chu, "Speeding up K-Means Algorithm by
 * GPUs" (../shared/seeds/001); k-means++ is Arthur and Vassilvitskii's.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kmeans_init.h"

/* Rows between two questions to the cancel callback, scaled by the work per row. */
static int64_t
cancel_stride(int32_t k, int32_t d)
{
	int64_t		work = (int64_t) k * d;
	int64_t		rows = work > 0 ? (INT64_C(1) << 22) / work : 4096;

	return rows < 16 ? 16 : rows;
}

/*
 * The sums of an iteration, gathered while the rows are assigned: per
 * cluster the sum of its rows (in row order) and their number, and how many
 * rows changed cluster.
 */
typedef struct KmAcc
{
	double	   *sums;			/* [k, d] */
	int64_t    *counts;			/* [k] */
	int64_t		changed;
} KmAcc;

/* Adds row i, now in cluster j (before: old), to the sums. */
static inline void
acc_add(KmAcc *acc, const float *row, int32_t d, int32_t j, int32_t old)
{
	double	   *s = acc->sums + (int64_t) j * d;

	for (int32_t t = 0; t < d; t++)
		s[t] += (double) row[t];
	acc->counts[j]++;
	acc->changed += j != old;
}

/*
 * Nearest centroid of rows [from, to): label and squared distance, and the
 * squared distance to the second nearest when second is not NULL.  The
 * centroids are transposed, cent[t * k + j], so that the inner loop runs
 * over centroids and vectorizes; each distance is still summed over the
 * features in order, as gc_dist2 and the GPU's exact pass do.  dist is
 * scratch of k doubles.
 */
static void
assign_rows(const float *x, int64_t from, int64_t to, int32_t d,
			const double *cent, int32_t k, int32_t *labels, double *d2, double *second,
			double *dist, KmAcc *acc)
{
	for (int64_t i = from; i < to; i++)
	{
		const float *row = x + i * d;
		double		best,
					next = HUGE_VAL;
		int32_t		bj = 0;

		for (int32_t j = 0; j < k; j++)
			dist[j] = 0.0;
		for (int32_t t = 0; t < d; t++)
		{
			const double xt = (double) row[t];
			const double *ct = cent + (int64_t) t * k;

			for (int32_t j = 0; j < k; j++)
			{
				double		diff = xt - ct[j];

				dist[j] += diff * diff;
			}
		}
		best = dist[0];
		for (int32_t j = 1; j < k; j++)
		{
			if (dist[j] < best)
			{
				next = best;
				best = dist[j];
				bj = j;
			}
			else if (dist[j] < next)
				next = dist[j];
		}
		if (acc)
			acc_add(acc, row, d, bj, labels[i]);
		labels[i] = bj;
		d2[i - from] = best;
		if (second)
			second[i - from] = next;
	}
}

/* Transposes the centroids [k, d] into cent [d, k]. */
static void
transpose_centroids(const double *cen, int32_t k, int32_t d, double *cent)
{
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cent[(int64_t) t * k + j] = cen[(int64_t) j * d + t];
}

/*
 * Assigns every row to the centroids cen [k, d], with the second nearest
 * distance when second is not NULL and the sums when acc is not NULL;
 * returns -1 when cancelled.
 */
static int
assign_all(const float *x, int64_t n, int32_t d, const double *cen, int32_t k,
		   int32_t *labels, double *d2, double *second, double *work /* [k * d + k] */ ,
		   KmAcc *acc, gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		stride = cancel_stride(k, d);
	double	   *cent = work;
	double	   *dist = work + (int64_t) k * d;

	transpose_centroids(cen, k, d, cent);
	for (int64_t from = 0; from < n; from += stride)
	{
		int64_t		to = from + stride < n ? from + stride : n;

		if (cancel && cancel(cancel_arg))
			return -1;
		assign_rows(x, from, to, d, cent, k, labels, d2 + from, second ? second + from : NULL, dist, acc);
	}
	return 0;
}

/* Squared distance of every row to its assigned centroid. */
static void
exact_d2(const float *x, int64_t n, int32_t d, const double *cen, const int32_t *labels, double *d2)
{
	for (int64_t i = 0; i < n; i++)
	{
		const float *row = x + i * d;
		const double *c = cen + (int64_t) labels[i] * d;
		double		s = 0.0;

		for (int32_t t = 0; t < d; t++)
		{
			double		diff = (double) row[t] - c[t];

			s += diff * diff;
		}
		d2[i] = s;
	}
}

/*
 * Hamerly's bounds ("Making k-means even faster", SDM 2010) skip most of the
 * distance work once the centroids settle: u[i] bounds from above the
 * distance of row i to its centroid, l[i] from below its distance to every
 * other centroid, half[j] is half the distance from centroid j to the
 * nearest other centroid.  A row whose u is below max(half, l) keeps its
 * cluster without any distance computed.  The skip asks for a margin of
 * BOUND_SLACK so that rounding never makes it differ from the full search,
 * and a row within that margin of a tie gets the full search, which picks
 * the lowest cluster number as Lloyd's does.  Used when k >= 3 and k * k <= n
 * (the centroid-to-centroid distances cost k * k * d per iteration).
 */
#define BOUND_SLACK 1e-9

typedef struct KmMoves
{
	const double *delta;		/* [k] how far each centroid moved */
	int32_t		jmax;			/* the centroid that moved most */
	double		second;			/* the largest move of the others */
} KmMoves;

static int
assign_bounded(const float *x, int64_t n, int32_t d, const double *cen, int32_t k,
			   int32_t *labels, double *u, double *l, double *half, double *work,
			   const KmMoves *moves, KmAcc *acc, gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		stride = cancel_stride(k, d) * 8;
	double	   *cent = work;
	double	   *dist = work + (int64_t) k * d;

	transpose_centroids(cen, k, d, cent);
	for (int32_t j = 0; j < k; j++)
		half[j] = HUGE_VAL;
	for (int32_t j = 0; j < k; j++)
		for (int32_t j2 = j + 1; j2 < k; j2++)
		{
			double		s = 0.0;

			for (int32_t t = 0; t < d; t++)
			{
				double		diff = cen[(int64_t) j * d + t] - cen[(int64_t) j2 * d + t];

				s += diff * diff;
			}
			s = 0.5 * sqrt(s);
			if (s < half[j])
				half[j] = s;
			if (s < half[j2])
				half[j2] = s;
		}

	for (int64_t from = 0; from < n; from += stride)
	{
		int64_t		to = from + stride < n ? from + stride : n;

		if (cancel && cancel(cancel_arg))
			return -1;
		for (int64_t i = from; i < to; i++)
		{
			int32_t		a = labels[i];
			const float *row = x + i * d;
			double		m,
						best,
						next;

			/* the bounds follow the last centroid moves */
			if (moves)
			{
				u[i] += moves->delta[a];
				l[i] -= a == moves->jmax ? moves->second : moves->delta[moves->jmax];
			}
			m = half[a] > l[i] ? half[a] : l[i];
			if (u[i] * (1.0 + BOUND_SLACK) >= m)
			{
				const double *c = cen + (int64_t) a * d;
				double		s = 0.0;

				for (int32_t t = 0; t < d; t++)
				{
					double		diff = (double) row[t] - c[t];

					s += diff * diff;
				}
				u[i] = sqrt(s);
			}
			if (u[i] * (1.0 + BOUND_SLACK) < m)
			{
				if (acc)
					acc_add(acc, row, d, a, a);
				continue;
			}
			assign_rows(x, i, i + 1, d, cent, k, labels, &best, &next, dist, acc);
			u[i] = sqrt(best);
			l[i] = sqrt(next);
		}
	}
	return 0;
}

/* Checks the parameters shared by both back ends; 0 when fine. */
static gc_status
check_params(int64_t n, int32_t d, const gc_kmeans_params *p, char *errbuf)
{
	if (p == NULL || p->struct_size < sizeof(gc_kmeans_params))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "k-means parameters of an unknown version");
	if (n < 1 || d < 1)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "k-means needs at least one row and one feature");
	if (p->k < 1 || p->k > n)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT,
					   "k must be between 1 and the number of rows (%lld), not %d",
					   (long long) n, p->k);
	if (p->max_iter < 1)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "max_iter must be at least 1");
	if (!(p->tol >= 0.0) || isinf(p->tol))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "tol must be a finite number >= 0");
	if (p->init != GC_KMEANS_INIT_PLUSPLUS && p->init != GC_KMEANS_INIT_RANDOM &&
		p->init != GC_KMEANS_INIT_GIVEN)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "unknown k-means init method %d", (int) p->init);
	if (p->init == GC_KMEANS_INIT_GIVEN)
	{
		if (p->initial_centroids == NULL)
			return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "initial centroids are missing");
		for (int64_t i = 0; i < (int64_t) p->k * d; i++)
			if (!isfinite(p->initial_centroids[i]))
				return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT,
							   "initial centroid %lld has a value that is not finite",
							   (long long) (i / d));
	}
	return GC_OK;
}

/*
 * The initial centroids [k, d] as the shared rules pick them.  mind2 is
 * scratch of n doubles.  Returns GC_OK, GC_ERR_CANCELLED or
 * GC_ERR_OUT_OF_MEMORY.
 */
static gc_status
initial_centroids(const float *x, int64_t n, int32_t d, const gc_kmeans_params *p,
				  double *cen, double *mind2, gc_cancel_fn cancel, void *cancel_arg,
				  char *errbuf)
{
	int64_t    *rows;
	int			rc;

	if (p->init == GC_KMEANS_INIT_GIVEN)
	{
		memcpy(cen, p->initial_centroids, sizeof(double) * (size_t) p->k * d);
		return GC_OK;
	}
	rows = malloc(sizeof(int64_t) * (size_t) p->k);
	if (!rows)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for k-means initialization");
	if (p->init == GC_KMEANS_INIT_RANDOM)
		rc = gc_kmeans_random_rows(n, p->k, p->seed, rows) == 0 ? 0 : 1;
	else
		rc = gc_kmeans_plusplus_rows(x, n, d, p->k, p->seed, rows, mind2, cancel, cancel_arg) == 0 ? 0 : 2;
	if (rc == 0)
		for (int32_t j = 0; j < p->k; j++)
			for (int32_t t = 0; t < d; t++)
				cen[(int64_t) j * d + t] = (double) x[rows[j] * d + t];
	free(rows);
	if (rc == 1)
		return gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for k-means initialization");
	if (rc == 2)
		return gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
	return GC_OK;
}

/* k-means on the CPU; see the rules at the top of this file. */
gc_status
gc_kmeans_cpu(const float *x, int64_t n, int32_t d, const gc_kmeans_params *params,
			  gc_kmeans_result *result, gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	gc_status	st = check_params(n, d, params, errbuf);
	int32_t		k;
	size_t		kd;
	double	   *cen = NULL,
			   *sums = NULL,
			   *d2 = NULL,
			   *scratch = NULL,
			   *work = NULL,
			   *bound_u = NULL,
			   *bound_l = NULL,
			   *half = NULL,
			   *delta = NULL;
	int			bounds;
	int64_t    *counts = NULL,
			   *taken = NULL;
	int32_t    *labels = NULL;
	KmAcc		acc;
	KmMoves		moves;
	double		mean_var,
				tol_abs;
	int32_t		it;
	int			strict = 0;

	if (st != GC_OK)
		return st;
	k = params->k;
	kd = (size_t) k * d;

	cen = malloc(sizeof(double) * kd);
	sums = malloc(sizeof(double) * kd);
	d2 = malloc(sizeof(double) * (size_t) n);
	scratch = malloc(sizeof(double) * (size_t) d * 4);
	work = malloc(sizeof(double) * (kd + (size_t) k));
	bounds = k >= 3 && (int64_t) k * k <= n;
	if (bounds)
	{
		bound_u = malloc(sizeof(double) * (size_t) n);
		bound_l = malloc(sizeof(double) * (size_t) n);
		half = malloc(sizeof(double) * (size_t) k);
		delta = malloc(sizeof(double) * (size_t) k);
	}
	counts = malloc(sizeof(int64_t) * (size_t) k);
	taken = malloc(sizeof(int64_t) * (size_t) k);
	labels = result->labels;
	if (!cen || !sums || !d2 || !scratch || !work || !counts || !taken ||
		(bounds && (!bound_u || !bound_l || !half || !delta)))
	{
		st = gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY,
					 "out of memory for k-means working arrays (%lld rows, k = %d)",
					 (long long) n, k);
		goto done;
	}

	if (gc_kmeans_stats(x, n, d, &mean_var, scratch, NULL, NULL, scratch + d, cancel, cancel_arg) != 0)
	{
		st = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
		goto done;
	}
	tol_abs = params->tol * mean_var;

	st = initial_centroids(x, n, d, params, cen, d2, cancel, cancel_arg, errbuf);
	if (st != GC_OK)
		goto done;

	/* no row has a cluster yet: the first iteration counts every row as changed */
	for (int64_t i = 0; i < n; i++)
		labels[i] = -1;
	acc.sums = sums;
	acc.counts = counts;
	moves.delta = delta;
	moves.jmax = 0;
	moves.second = 0.0;

	for (it = 0; it < params->max_iter; it++)
	{
		double		shift = 0.0;
		int			d2_valid = 1;
		int32_t		reseeded = 0;
		int			rc;

		memset(sums, 0, sizeof(double) * kd);
		memset(counts, 0, sizeof(int64_t) * (size_t) k);
		acc.changed = 0;
		if (bounds && it > 0)
		{
			rc = assign_bounded(x, n, d, cen, k, labels, bound_u, bound_l, half, work,
								&moves, &acc, cancel, cancel_arg);
			d2_valid = 0;
		}
		else
		{
			rc = assign_all(x, n, d, cen, k, labels, d2, bounds ? bound_l : NULL, work, &acc,
							cancel, cancel_arg);
			if (bounds)
				for (int64_t i = 0; i < n; i++)
				{
					bound_u[i] = sqrt(d2[i]);
					bound_l[i] = sqrt(bound_l[i]);
				}
		}
		if (rc != 0)
		{
			st = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
			goto done;
		}

		/* Re-seed empty clusters, then move every centroid to its mean. */
		for (int32_t j = 0; j < k && reseeded == 0; j++)
			if (counts[j] == 0)
			{
				if (!d2_valid)
					exact_d2(x, n, d, cen, labels, d2);
				reseeded = gc_kmeans_reseed_empty(x, n, d, k, labels, d2, NULL, sums, counts, taken);
			}
		for (int32_t j = 0; j < k; j++)
		{
			double		move = 0.0;

			for (int32_t t = 0; t < d; t++)
			{
				double		c = counts[j] > 0 ? sums[(int64_t) j * d + t] / (double) counts[j]
					: cen[(int64_t) j * d + t];
				double		diff = c - cen[(int64_t) j * d + t];

				move += diff * diff;
				cen[(int64_t) j * d + t] = c;
			}
			shift += move;
			if (bounds)
				delta[j] = sqrt(move);
		}
		if (bounds)
		{
			/* applied to the bounds, row by row, by the next bounded assignment */
			moves.jmax = 0;
			moves.second = 0.0;
			for (int32_t j = 1; j < k; j++)
				if (delta[j] > delta[moves.jmax])
					moves.jmax = j;
			for (int32_t j = 0; j < k; j++)
				if (j != moves.jmax && delta[j] > moves.second)
					moves.second = delta[j];
		}

		/* Nothing changed: the centroids did not move, labels hold. */
		if (acc.changed == 0 && reseeded == 0)
		{
			strict = 1;
			break;
		}
		if (shift <= tol_abs)
			break;
	}
	result->iterations = it < params->max_iter ? it + 1 : params->max_iter;

	/* Labels for the final centroids, and the distances. */
	if (!strict &&
		(bounds ? assign_bounded(x, n, d, cen, k, labels, bound_u, bound_l, half, work, &moves, NULL,
								 cancel, cancel_arg)
		 : assign_all(x, n, d, cen, k, labels, d2, NULL, work, NULL, cancel, cancel_arg)) != 0)
	{
		st = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
		goto done;
	}
	if (strict || bounds)
		exact_d2(x, n, d, cen, labels, d2);

	/* Output. */
	memcpy(result->centroids, cen, sizeof(double) * kd);
	for (int32_t j = 0; j < k; j++)
	{
		result->sizes[j] = 0;
		result->inertia[j] = 0.0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		result->distance[i] = sqrt(d2[i]);
		result->sizes[labels[i]]++;
		result->inertia[labels[i]] += d2[i];
	}
	st = GC_OK;

done:
	free(cen);
	free(sums);
	free(d2);
	free(scratch);
	free(work);
	free(bound_u);
	free(bound_l);
	free(half);
	free(delta);
	free(counts);
	free(taken);
	return st;
}
