/*
 * kmeans_init.h
 *    The parts of k-means that the CPU back end (src/core/kmeans.c) and the
 *    GPU back end (cuda/kmeans.cu) must do identically, so that both start
 *    from the same centroids and stop by the same rule:
 *
 *      - the seeded random draws (common/rng.h);
 *      - the initial centroids: k-means++ (D^2 sampling) and 'random' rows;
 *      - the data statistics behind the stopping rule;
 *      - the re-seeding of empty clusters.
 *
 * Header only, plain C that also compiles as CUDA C++; the few functions the
 * GPU kernels call as well are marked GC_HD.
 *
 * k-means++ with exact, order-independent sampling.  Arthur and Vassilvitskii's
 * D^2 sampling picks the next centre with probability proportional to the
 * squared distance to the nearest centre chosen so far.  Summing those
 * distances in floating point gives a total that depends on the order of the
 * additions, which a GPU reduction does not keep.  So every step turns the
 * distances into integer weights w_i = trunc(D_i^2 * 2^s), with the power of
 * two s chosen from the largest D^2 so that the sum of n weights fits in 63
 * bits; integer sums do not depend on their order, so the CPU's running sum
 * and the GPU's blocked reduction give the same total and the same prefix
 * sums, and the same draw picks the same row.  D^2 itself is accumulated in
 * double in dimension order without fused multiply-add on both back ends
 * (gc_dist2), hence bit-identical.  Weights below 2^-(62 - log2 n) of the
 * largest become zero: those rows are already within a hair of a centre.
 */
#ifndef GPUCLUST_KMEANS_INIT_H
#define GPUCLUST_KMEANS_INIT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "portable.h"
#include "rng.h"

/* Rows per segment of the blocked k-means++ sums (the GPU uses one block per segment). */
#define GC_KMPP_SEGMENT 4096

/* ---------------------------------------------------------------- k-means++ weights */

/* ceil(log2(n)) for n >= 1. */
static GC_HD int
gc_ceil_log2(int64_t n)
{
	int			b = 0;

	while (b < 63 && (INT64_C(1) << b) < n)
		b++;
	return b;
}

/*
 * The factor 2^s that turns n values, each at most maxd2, into integers
 * whose sum stays below 2^62 (s at most 1000, so the factor stays finite
 * for tiny maxd2).  Returns 0 when maxd2 is not positive (every row
 * coincides with a centre).
 */
static GC_HD double
gc_kmpp_scale(double maxd2, int64_t n)
{
	int			e;
	int			s;

	if (!(maxd2 > 0.0) || isinf(maxd2))
		return 0.0;
	(void) frexp(maxd2, &e);	/* maxd2 < 2^e */
	s = 62 - e - gc_ceil_log2(n);
	return ldexp(1.0, s < 1000 ? s : 1000);
}

/* The integer weight of one row. */
static GC_HD uint64_t
gc_kmpp_weight(double d2, double scale)
{
	return (uint64_t) (d2 * scale);
}

/* ---------------------------------------------------------------- statistics */

/* One row into the running sums and extremes of the features (vectorizes). */
static inline void
gc_kmeans_stats_row1(const float *GC_RESTRICT row, int32_t d, double *GC_RESTRICT m,
					 double *GC_RESTRICT lo, double *GC_RESTRICT hi)
{
	for (int32_t j = 0; j < d; j++)
	{
		double		v = (double) row[j];

		m[j] += v;
		lo[j] = v < lo[j] ? v : lo[j];
		hi[j] = v > hi[j] ? v : hi[j];
	}
}

/* One row into the sums of squared deviations from the mean. */
static inline void
gc_kmeans_stats_row2(const float *GC_RESTRICT row, int32_t d, const double *GC_RESTRICT m,
					 double *GC_RESTRICT s)
{
	for (int32_t j = 0; j < d; j++)
	{
		double		t = (double) row[j] - m[j];

		s[j] += t * t;
	}
}

/*
 * Mean per-feature variance (population variance, as numpy.var) of the data,
 * the unit of tol as in scikit-learn; also the per-feature mean and, when
 * asked (lo, hi not NULL), the smallest and largest value of each feature.
 * Two passes over the rows; each feature's sums run in row order.
 * Returns 0, or -1 when cancelled.
 */
static inline int
gc_kmeans_stats(const float *x, int64_t n, int32_t d,
				double *mean_var,
				double *mean,	/* [d] out */
				double *lo,		/* [d] out or NULL */
				double *hi,		/* [d] out or NULL */
				double *scratch,	/* [3 d] work space */
				gc_cancel_fn cancel, void *cancel_arg)
{
	double	   *m = mean;
	double	   *l = lo ? lo : scratch + d;
	double	   *h = hi ? hi : scratch + 2 * (int64_t) d;
	double		total = 0.0;

	for (int32_t j = 0; j < d; j++)
	{
		m[j] = 0.0;
		l[j] = HUGE_VAL;
		h[j] = -HUGE_VAL;
	}
	for (int64_t i = 0; i < n; i++)
	{
		if ((i & 65535) == 0 && cancel && cancel(cancel_arg))
			return -1;
		gc_kmeans_stats_row1(x + i * d, d, m, l, h);
	}
	for (int32_t j = 0; j < d; j++)
	{
		m[j] /= (double) n;
		scratch[j] = 0.0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		if ((i & 65535) == 0 && cancel && cancel(cancel_arg))
			return -1;
		gc_kmeans_stats_row2(x + i * d, d, m, scratch);
	}
	for (int32_t j = 0; j < d; j++)
		total += scratch[j] / (double) n;
	*mean_var = total / (double) d;
	return 0;
}

/* ---------------------------------------------------------------- initial centroids */

/*
 * 'random': k distinct row numbers drawn uniformly by the seeded generator,
 * in draw order.  Returns 0, or -1 when out of memory.
 */
static inline int
gc_kmeans_random_rows(int64_t n, int32_t k, uint64_t seed, int64_t *rows /* [k] out */ )
{
	gc_rng		rng;

	gc_rng_seed(&rng, seed);
	if ((int64_t) k * 2 > n)
	{
		/* Many rows: a partial Fisher-Yates shuffle of 0..n-1 (n < 2k here). */
		int64_t    *perm = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);

		if (!perm)
			return -1;
		for (int64_t i = 0; i < n; i++)
			perm[i] = i;
		for (int32_t j = 0; j < k; j++)
		{
			int64_t		r = j + (int64_t) gc_rng_below(&rng, (uint64_t) (n - j));
			int64_t		t = perm[j];

			perm[j] = perm[r];
			perm[r] = t;
			rows[j] = perm[j];
		}
		free(perm);
	}
	else
	{
		/* Few rows: rejection of repeats, remembered in an open-addressing set. */
		size_t		cap = 16;
		int64_t    *set;

		while (cap < (size_t) k * 2)
			cap <<= 1;
		set = (int64_t *) malloc(sizeof(int64_t) * cap);
		if (!set)
			return -1;
		for (size_t i = 0; i < cap; i++)
			set[i] = -1;
		for (int32_t j = 0; j < k; j++)
		{
			for (;;)
			{
				int64_t		r = (int64_t) gc_rng_below(&rng, (uint64_t) n);
				size_t		h = (size_t) ((uint64_t) r * UINT64_C(0x9E3779B97F4A7C15) >> 20) & (cap - 1);

				while (set[h] >= 0 && set[h] != r)
					h = (h + 1) & (cap - 1);
				if (set[h] == r)
					continue;
				set[h] = r;
				rows[j] = r;
				break;
			}
		}
		free(set);
	}
	return 0;
}

/*
 * Picks the row of a k-means++ draw target r (0 <= r < sum of weights) in
 * rows [from, to): the first row whose running weight sum exceeds r, where
 * *acc holds the weight before row 'from'.  Returns the row, or -1 when the
 * target lies beyond 'to' (then *acc is the sum through to - 1).
 */
static inline int64_t
gc_kmpp_pick(const double *mind2, int64_t from, int64_t to, double scale,
			 uint64_t r, uint64_t *acc)
{
	for (int64_t i = from; i < to; i++)
	{
		*acc += gc_kmpp_weight(mind2[i - from], scale);
		if (*acc > r)
			return i;
	}
	return -1;
}

/*
 * The draws of k-means++ for one step: given the total weight (and the
 * generator), the target of the next pick; a total of zero means every row
 * sits on a centre already, and then a uniformly drawn row is taken
 * (returned as a negative number -1 - row).
 */
static inline int64_t
gc_kmpp_draw(gc_rng *rng, uint64_t total, int64_t n)
{
	if (total == 0)
		return -1 - (int64_t) gc_rng_below(rng, (uint64_t) n);
	return (int64_t) gc_rng_below(rng, total);
}

/*
 * k-means++ on the host: the row numbers of the k initial centres.
 * mind2 is scratch [n].  The GPU back end follows exactly these steps with
 * the distance and sum passes on the device.  Returns 0, or -1 when
 * cancelled.
 */
static inline int
gc_kmeans_plusplus_rows(const float *x, int64_t n, int32_t d, int32_t k, uint64_t seed,
						int64_t *rows,	/* [k] out */
						double *mind2,	/* [n] scratch */
						gc_cancel_fn cancel, void *cancel_arg)
{
	gc_rng		rng;
	double		maxd2 = 0.0;

	gc_rng_seed(&rng, seed);
	rows[0] = (int64_t) gc_rng_below(&rng, (uint64_t) n);
	for (int64_t i = 0; i < n; i++)
	{
		double		t = gc_dist2(x + i * d, x + rows[0] * d, d);

		mind2[i] = t;
		if (t > maxd2)
			maxd2 = t;
	}
	for (int32_t c = 1; c < k; c++)
	{
		double		scale = gc_kmpp_scale(maxd2, n);
		uint64_t	total = 0;
		int64_t		target;
		const float *cen;

		if (cancel && cancel(cancel_arg))
			return -1;
		for (int64_t i = 0; i < n; i++)
			total += gc_kmpp_weight(mind2[i], scale);
		target = gc_kmpp_draw(&rng, total, n);
		if (target < 0)
			rows[c] = -1 - target;
		else
		{
			uint64_t	acc = 0;

			rows[c] = gc_kmpp_pick(mind2, 0, n, scale, (uint64_t) target, &acc);
		}
		cen = x + rows[c] * d;
		maxd2 = 0.0;
		for (int64_t i = 0; i < n; i++)
		{
			double		t = gc_dist2(x + i * d, cen, d);

			if (t < mind2[i])
				mind2[i] = t;
			if (mind2[i] > maxd2)
				maxd2 = mind2[i];
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- empty clusters */

/*
 * Re-seeds every empty cluster, in cluster order, with the row farthest from
 * its centroid (largest d2, the lowest row number on a tie) among the rows
 * not taken yet whose cluster keeps at least one other row: the row leaves
 * its cluster's sum and count and becomes the new cluster's only member.
 * sums[j] holds the sum of (x - ref[j]) over the rows of cluster j, with ref
 * the centroids the deltas were taken from (NULL for plain sums).
 * Returns the number of clusters re-seeded.
 */
static inline int32_t
gc_kmeans_reseed_empty(const float *x, int64_t n, int32_t d, int32_t k,
					   const int32_t *labels,	/* [n] */
					   const double *d2,	/* [n] squared distance to the assigned centroid */
					   const double *ref,	/* [k, d] or NULL */
					   double *sums,	/* [k, d] in/out */
					   int64_t *counts, /* [k] in/out */
					   int64_t *taken	/* [k] scratch */ )
{
	int32_t		ntaken = 0;

	for (int32_t j = 0; j < k; j++)
	{
		int64_t		best = -1;
		int32_t		old;

		if (counts[j] != 0)
			continue;
		for (int64_t i = 0; i < n; i++)
		{
			int			seen = 0;

			if (counts[labels[i]] < 2 || (best >= 0 && !(d2[i] > d2[best])))
				continue;
			for (int32_t t = 0; t < ntaken && !seen; t++)
				seen = taken[t] == i;
			if (!seen)
				best = i;
		}
		if (best < 0)
			break;				/* cannot happen while n >= k */
		taken[ntaken++] = best;
		old = labels[best];
		counts[old]--;
		counts[j] = 1;
		for (int32_t c = 0; c < d; c++)
		{
			double		v = (double) x[best * d + c];

			sums[(int64_t) old * d + c] -= v - (ref ? ref[(int64_t) old * d + c] : 0.0);
			sums[(int64_t) j * d + c] = v - (ref ? ref[(int64_t) j * d + c] : 0.0);
		}
	}
	return ntaken;
}

#endif							/* GPUCLUST_KMEANS_INIT_H */
