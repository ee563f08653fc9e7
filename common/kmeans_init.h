/*
 * kmeans_init.h
 *    The parts of k-means that the CPU back end (src/core/kmeans.c) and the
 *    GPU back end (cuda/kmeans.cu) must do identically, so that both start
 *    from the same centroids and stop by the same rule:
 *
 *      - the seeded random draws (common/rng.h);
 *      - the initial centroids: greedy and plain k-means++ (D^2 sampling)
 *        and 'random' rows;
 *      - the seeds of the n_init runs;
 *      - the data statistics behind the stopping rule;
 *      - the re-seeding of empty clusters (its sorts: common/sort.h);
 *      - the unit centroids of spherical k-means (metric cosine).
 *
 * The rows x are of either element type (gc_dtype): float or double, each
 * coordinate converted exactly to double wherever it is used.
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
#include "metric.h"
#include "portable.h"
#include "rng.h"
#include "sort.h"

/* Rows per segment of the blocked k-means++ sums (the GPU uses one block per segment). */
#define GC_KMPP_SEGMENT 4096

/*
 * Work between two questions to the cancel callback in the host loops
 * here, counted in coordinates read (a row of d features counts d).
 */
#define GC_KMEANS_CANCEL_WORK	(INT64_C(1) << 22)

/* Rows between two questions to the cancel callback when each row costs d. */
static inline int64_t
gc_kmeans_cancel_rows(int32_t d)
{
	int64_t		rows = GC_KMEANS_CANCEL_WORK / (d > 0 ? d : 1);

	return rows < 1 ? 1 : rows;
}

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

/*
 * gc_dist2(a, b, d), or a partial sum of it that is already >= cap: the
 * sum runs in dimension order as gc_dist2's and stops early (checked every
 * 8 features) once it reaches cap.  Adding squares never decreases a sum in
 * round-to-nearest, so min(cap, result) is min(cap, gc_dist2(a, b, d))
 * exactly; the host passes of k-means++ use it to skip most of the work for
 * rows far from a new centre.
 */
static inline double
gc_kmpp_dist2_capped(const float *a, const float *b, int32_t d, double cap)
{
	double		s = 0.0;
	int32_t		j = 0;

	while (j < d)
	{
		int32_t		end = j + 8 < d ? j + 8 : d;

		for (; j < end; j++)
		{
			double		t = (double) a[j] - (double) b[j];

			s += t * t;
		}
		if (s >= cap)
			break;
	}
	return s;
}

/* The same for rows of double precision. */
static inline double
gc_kmpp_dist2_capped_f64(const double *a, const double *b, int32_t d, double cap)
{
	double		s = 0.0;
	int32_t		j = 0;

	while (j < d)
	{
		int32_t		end = j + 8 < d ? j + 8 : d;

		for (; j < end; j++)
		{
			double		t = a[j] - b[j];

			s += t * t;
		}
		if (s >= cap)
			break;
	}
	return s;
}

/*
 * The rows x [n, d] of either element type (t): element idx as a double
 * (exact either way), and the squared distance of rows i and j, gc_dist2 or
 * (capped) gc_kmpp_dist2_capped.
 */
static inline double
gc_kmeans_x_at(const void *x, gc_dtype t, int64_t idx)
{
	return t == GC_F64 ? ((const double *) x)[idx] : (double) ((const float *) x)[idx];
}

static inline double
gc_kmeans_x_dist2(const void *x, gc_dtype t, int32_t d, int64_t i, int64_t j, int capped, double cap)
{
	if (t == GC_F64)
	{
		const double *a = (const double *) x + i * d;
		const double *b = (const double *) x + j * d;

		return capped ? gc_kmpp_dist2_capped_f64(a, b, d, cap) : gc_dist2_f64(a, b, d);
	}
	else
	{
		const float *a = (const float *) x + i * d;
		const float *b = (const float *) x + j * d;

		return capped ? gc_kmpp_dist2_capped(a, b, d, cap) : gc_dist2(a, b, d);
	}
}

/* ---------------------------------------------------------------- spherical k-means */

/*
 * Spherical k-means (metric cosine): after every update each centroid that
 * holds rows, the mean of its rows, is scaled to unit length in double: s =
 * the sum of squares over the features in order, without fused multiply-add,
 * and each coordinate c / sqrt(s), correctly rounded (gc_unit_row_f64 of
 * common/metric.h, the rows' own scaling).
 * A mean of zero (rows that cancel out) has no direction and stays zero.
 * Both back ends call this one function, so their centroids agree as their
 * means do.
 */
static GC_HD void
gc_kmeans_unit_centroid(double *c, int32_t d)
{
	(void) gc_unit_row_f64(c, d);
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

/* The same two for rows of double precision. */
static inline void
gc_kmeans_stats_row1_f64(const double *GC_RESTRICT row, int32_t d, double *GC_RESTRICT m,
						 double *GC_RESTRICT lo, double *GC_RESTRICT hi)
{
	for (int32_t j = 0; j < d; j++)
	{
		double		v = row[j];

		m[j] += v;
		lo[j] = v < lo[j] ? v : lo[j];
		hi[j] = v > hi[j] ? v : hi[j];
	}
}

static inline void
gc_kmeans_stats_row2_f64(const double *GC_RESTRICT row, int32_t d, const double *GC_RESTRICT m,
						 double *GC_RESTRICT s)
{
	for (int32_t j = 0; j < d; j++)
	{
		double		t = row[j] - m[j];

		s[j] += t * t;
	}
}

/*
 * Rows [from, to) into the sums of the first pass (pass 1: m, lo, hi) or of
 * the second (pass 2: s, around the mean m), each feature's sum in row
 * order.  Inlined with a constant d for narrow rows, so that the sums stay
 * in registers (the same additions in the same order).
 */
static inline __attribute__((always_inline)) void
gc_kmeans_stats_rows(const void *x, gc_dtype dtype, int64_t from, int64_t to, int32_t d, int pass,
					 double *GC_RESTRICT m, double *GC_RESTRICT lo, double *GC_RESTRICT hi,
					 double *GC_RESTRICT s)
{
	if (pass == 1)
	{
		if (dtype == GC_F64)
			for (int64_t i = from; i < to; i++)
				gc_kmeans_stats_row1_f64((const double *) x + i * d, d, m, lo, hi);
		else
			for (int64_t i = from; i < to; i++)
				gc_kmeans_stats_row1((const float *) x + i * d, d, m, lo, hi);
	}
	else
	{
		if (dtype == GC_F64)
			for (int64_t i = from; i < to; i++)
				gc_kmeans_stats_row2_f64((const double *) x + i * d, d, m, s);
		else
			for (int64_t i = from; i < to; i++)
				gc_kmeans_stats_row2((const float *) x + i * d, d, m, s);
	}
}

/* The same for any d, with d of one to four in registers (pass 1 reads and writes m, lo, hi; pass 2 reads m and s, writes s). */
static inline void
gc_kmeans_stats_chunk(const void *x, gc_dtype dtype, int64_t from, int64_t to, int32_t d, int pass,
					  double *m, double *lo, double *hi, double *s)
{
	double		mm[4], ll[4], hh[4], ss[4];

	if (d > 4)
	{
		gc_kmeans_stats_rows(x, dtype, from, to, d, pass, m, lo, hi, s);
		return;
	}
	for (int32_t j = 0; j < d; j++)
	{
		mm[j] = m[j];
		ll[j] = pass == 1 ? lo[j] : 0.0;
		hh[j] = pass == 1 ? hi[j] : 0.0;
		ss[j] = pass == 1 ? 0.0 : s[j];
	}
	switch (d)
	{
		case 1:
			gc_kmeans_stats_rows(x, dtype, from, to, 1, pass, mm, ll, hh, ss);
			break;
		case 2:
			gc_kmeans_stats_rows(x, dtype, from, to, 2, pass, mm, ll, hh, ss);
			break;
		case 3:
			gc_kmeans_stats_rows(x, dtype, from, to, 3, pass, mm, ll, hh, ss);
			break;
		default:
			gc_kmeans_stats_rows(x, dtype, from, to, 4, pass, mm, ll, hh, ss);
			break;
	}
	for (int32_t j = 0; j < d; j++)
	{
		if (pass == 1)
		{
			m[j] = mm[j];
			lo[j] = ll[j];
			hi[j] = hh[j];
		}
		else
			s[j] = ss[j];
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
gc_kmeans_stats(const void *x, gc_dtype dtype,	/* [n, d] */
				int64_t n, int32_t d,
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
	int64_t		every = gc_kmeans_cancel_rows(d);

	for (int32_t j = 0; j < d; j++)
	{
		m[j] = 0.0;
		l[j] = HUGE_VAL;
		h[j] = -HUGE_VAL;
		scratch[j] = 0.0;
	}
	for (int64_t from = 0; from < n; from += every)
	{
		if (cancel && cancel(cancel_arg))
			return -1;
		gc_kmeans_stats_chunk(x, dtype, from, n - from > every ? from + every : n, d, 1, m, l, h, scratch);
	}
	for (int32_t j = 0; j < d; j++)
		m[j] /= (double) n;
	for (int64_t from = 0; from < n; from += every)
	{
		if (cancel && cancel(cancel_arg))
			return -1;
		gc_kmeans_stats_chunk(x, dtype, from, n - from > every ? from + every : n, d, 2, m, l, h, scratch);
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
 * One row of a k-means++ distance pass: m, the row's squared distance to
 * the nearest centre so far, after the row cen of x becomes a centre too
 * (first: there was none, m is ignored).  A row on a centre (m = 0) stays.
 */
static inline double
gc_kmpp_update_row(const void *x, gc_dtype dtype, int32_t d, int64_t i, int64_t cen, int first, double m)
{
	double		t;

	if (!first && m == 0.0)
		return m;
	t = gc_kmeans_x_dist2(x, dtype, d, i, cen, !first, first ? 0.0 : m);
	return first || t < m ? t : m;
}

/*
 * The k-means++ distances to a new centre, row cen of x: mind2 =
 * min(mind2, dist2) (first: mind2 = dist2), and their largest value.
 * Returns 0, or -1 when cancelled (asked every gc_kmeans_cancel_rows(d) rows).
 */
static inline int
gc_kmpp_update(const void *x, gc_dtype dtype, int64_t n, int32_t d, int64_t cen, int first,
			   double *mind2, double *maxd2, gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		every = gc_kmeans_cancel_rows(d);
	double		mx = 0.0;

	for (int64_t i = 0; i < n; i++)
	{
		if (i % every == 0 && cancel && cancel(cancel_arg))
			return -1;
		mind2[i] = gc_kmpp_update_row(x, dtype, d, i, cen, first, mind2[i]);
		if (mind2[i] > mx)
			mx = mind2[i];
	}
	*maxd2 = mx;
	return 0;
}

/*
 * Greedy k-means++ (the variant of scikit-learn's KMeans, after Arthur and
 * Vassilvitskii's remark on local trials): every step draws
 * gc_kmpp_trials(k) = 2 + floor(ln k) candidates by D^2 sampling with the
 * same weights and generator, and keeps the candidate c that leaves the
 * smallest potential
 *
 *     P(c) = sum over rows i of trunc(min(D_i^2, dist2(x_i, c)) * 2^s),
 *
 * the first drawn on a tie.  The potential is a sum of the integer weights of
 * the draws (the same factor 2^s, which fits since min(...) <= D_i^2), so it
 * does not depend on the order of the additions and the CPU and the GPU keep
 * the same candidate.  One trial is plain k-means++ (the generator is read
 * the same way).
 */
#define GC_KMPP_MAX_TRIALS 24

/* The number of candidates per step of greedy k-means++ for k clusters. */
static inline int32_t
gc_kmpp_trials(int32_t k)
{
	int32_t		t = 2 + (int32_t) floor(log((double) (k > 1 ? k : 1)));

	return t < GC_KMPP_MAX_TRIALS ? t : GC_KMPP_MAX_TRIALS;
}

/* The integer weight of one row after a candidate at squared distance t is added. */
static GC_HD uint64_t
gc_kmpp_trial_weight(double mind2, double t, double scale)
{
	return gc_kmpp_weight(t < mind2 ? t : mind2, scale);
}

/*
 * The candidates of one step: ntrials rows drawn by D^2 sampling from the
 * weights of mind2 under scale (total their sum), in draw order, into cand.
 */
static inline void
gc_kmpp_draw_candidates(gc_rng *rng, const double *mind2, int64_t n, double scale,
						uint64_t total, int32_t ntrials, int64_t *cand /* [ntrials] out */ )
{
	for (int32_t l = 0; l < ntrials; l++)
	{
		int64_t		target = gc_kmpp_draw(rng, total, n);
		uint64_t	acc = 0;

		cand[l] = target < 0 ? -1 - target :
			gc_kmpp_pick(mind2, 0, n, scale, (uint64_t) target, &acc);
	}
}

/* The candidate of smallest potential, the first on a tie. */
static inline int32_t
gc_kmpp_best_trial(const uint64_t *pot, int32_t ntrials)
{
	int32_t		best = 0;

	for (int32_t l = 1; l < ntrials; l++)
		if (pot[l] < pot[best])
			best = l;
	return best;
}

/*
 * Row i's part of the potentials of the candidates cand[0 .. ntrials), m
 * its squared distance to the nearest centre so far, added to pot.  A row
 * on a centre (m = 0) adds nothing to any.
 */
static inline void
gc_kmpp_potential_row(const void *x, gc_dtype dtype, int32_t d, int64_t i, double m, double scale,
					  const int64_t *cand, int32_t ntrials, uint64_t *pot /* [ntrials] in/out */ )
{
	if (m == 0.0)
		return;
	for (int32_t l = 0; l < ntrials; l++)
		pot[l] += gc_kmpp_trial_weight(m, gc_kmeans_x_dist2(x, dtype, d, i, cand[l], 1, m), scale);
}

/*
 * The potentials pot[l] of the candidates rows cand[0 .. ntrials) under the
 * step's scale, on the host.  Returns 0, or -1 when cancelled.
 */
static inline int
gc_kmpp_potentials(const void *x, gc_dtype dtype, int64_t n, int32_t d, const double *mind2, double scale,
				   const int64_t *cand, int32_t ntrials, uint64_t *pot /* [ntrials] out */ ,
				   gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		every = gc_kmeans_cancel_rows(d * ntrials);

	for (int32_t l = 0; l < ntrials; l++)
		pot[l] = 0;
	for (int64_t i = 0; i < n; i++)
	{
		if (i % every == 0 && cancel && cancel(cancel_arg))
			return -1;
		gc_kmpp_potential_row(x, dtype, d, i, mind2[i], scale, cand, ntrials, pot);
	}
	return 0;
}

/*
 * k-means++ on the host: the row numbers of the k initial centres, with
 * ntrials candidates per step (gc_kmpp_trials(k) for greedy k-means++, 1
 * for plain k-means++).  mind2 is scratch [n].  The GPU back end follows
 * exactly these steps with the distance, sum and potential passes on the
 * device, the CPU back end on its threads (src/core/kmeans_seed.c, whose
 * tests compare its rows with these).  Returns 0, or -1 when cancelled.
 */
static inline int
gc_kmeans_plusplus_rows(const void *x, gc_dtype dtype,	/* [n, d] */
						int64_t n, int32_t d, int32_t k, uint64_t seed,
						int32_t ntrials,
						int64_t *rows,	/* [k] out */
						double *mind2,	/* [n] scratch */
						gc_cancel_fn cancel, void *cancel_arg)
{
	gc_rng		rng;
	double		maxd2 = 0.0;
	int64_t		cand[GC_KMPP_MAX_TRIALS];
	uint64_t	pot[GC_KMPP_MAX_TRIALS];

	if (ntrials < 1)
		ntrials = 1;
	if (ntrials > GC_KMPP_MAX_TRIALS)
		ntrials = GC_KMPP_MAX_TRIALS;
	gc_rng_seed(&rng, seed);
	rows[0] = (int64_t) gc_rng_below(&rng, (uint64_t) n);
	if (gc_kmpp_update(x, dtype, n, d, rows[0], 1, mind2, &maxd2, cancel, cancel_arg) != 0)
		return -1;
	for (int32_t c = 1; c < k; c++)
	{
		double		scale = gc_kmpp_scale(maxd2, n);
		uint64_t	total = 0;
		int32_t		best = 0;

		if (cancel && cancel(cancel_arg))
			return -1;
		for (int64_t i = 0; i < n; i++)
			total += gc_kmpp_weight(mind2[i], scale);
		gc_kmpp_draw_candidates(&rng, mind2, n, scale, total, ntrials, cand);
		if (ntrials > 1)
		{
			if (gc_kmpp_potentials(x, dtype, n, d, mind2, scale, cand, ntrials, pot,
								   cancel, cancel_arg) != 0)
				return -1;
			best = gc_kmpp_best_trial(pot, ntrials);
		}
		rows[c] = cand[best];
		if (gc_kmpp_update(x, dtype, n, d, rows[c], 0, mind2, &maxd2, cancel, cancel_arg) != 0)
			return -1;
	}
	return 0;
}

/*
 * n_init: whether a run of total inertia v beats the best so far, best: it
 * must be lower by more than GC_KMEANS_RUN_TIE of best.  Closer totals are
 * a tie and the earlier run is kept: two runs that end in the same
 * clustering, numbered differently, differ by rounding alone, and the CPU
 * and the GPU sum the inertia in different orders.
 */
#define GC_KMEANS_RUN_TIE 1e-12

static inline int
gc_kmeans_run_better(double v, double best)
{
	return v < best - GC_KMEANS_RUN_TIE * fabs(best);
}

/*
 * The total inertia of a run, the number the n_init runs are compared by:
 * the clusters' inertia [k] summed in cluster order.
 */
static inline double
gc_kmeans_total_inertia(const double *inertia, int32_t k)
{
	double		s = 0.0;

	for (int32_t j = 0; j < k; j++)
		s += inertia[j];
	return s;
}

/*
 * The rule that picks the returned run of n_init, for both back ends: run 0
 * starts as the best (*best = gc_kmeans_total_inertia of its inertia); each
 * later run, in order, replaces it when gc_kmeans_run_better says its total
 * inertia beats *best, and then *best becomes that total.  Returns 1 when
 * the run of inertia [k] is the new best (the caller keeps its outputs and
 * sets best_run), 0 when the earlier one stays.
 */
static inline int
gc_kmeans_keep_run(const double *inertia, int32_t k, double *best)
{
	double		total = gc_kmeans_total_inertia(inertia, k);

	if (!gc_kmeans_run_better(total, *best))
		return 0;
	*best = total;
	return 1;
}

/*
 * The seed of run r (0-based) of n_init runs: the seed itself for the first
 * run, so that n_init = 1 is one run with the seed; for the others
 * splitmix64's finaliser of seed + r * 0xD1B54A32D192ED03.
 */
static inline uint64_t
gc_kmeans_run_seed(uint64_t seed, int32_t r)
{
	return r == 0 ? seed : gc_mix64(seed + (uint64_t) r * UINT64_C(0xD1B54A32D192ED03));
}

/* The number of candidates per k-means++ step for an init method (0: no k-means++). */
static inline int32_t
gc_kmeans_init_trials(gc_kmeans_init init, int32_t k)
{
	if (init == GC_KMEANS_INIT_PLUSPLUS)
		return gc_kmpp_trials(k);
	if (init == GC_KMEANS_INIT_PLUSPLUS_PLAIN)
		return 1;
	return 0;
}

/* ---------------------------------------------------------------- empty clusters
 *
 * The rule: every empty cluster, in cluster order, is re-seeded with the row
 * farthest from its centroid (largest d2, the lowest row number on a tie)
 * among the rows not taken yet whose cluster keeps at least one other row;
 * the row leaves its cluster's sum and count and becomes the new cluster's
 * only member.
 *
 * One walk over the rows in the order (d2 descending, row ascending) does
 * it: a cluster's count only decreases, so a row passed over once (taken,
 * or the last row of its cluster) stays out of reach.  Each cluster holding
 * rows has at most one row passed over without being taken (its last one),
 * so the walk visits at most k rows when the counts agree with the labels:
 * only the first min(k, n) rows of the order are found (a radix select,
 * O(n)) and sorted (a stable radix sort); should the walk still run out of
 * them, it starts again over all n rows.  Every pass asks the cancel
 * callback every GC_RESEED_CANCEL_ROWS rows.
 */

/* Rows between two questions to the cancel callback. */
#define GC_RESEED_CANCEL_ROWS	GC_SORT_CANCEL_ITEMS

/* The walk's order as an unsigned key: larger d2 first; ties keep row order (stable sorts). */
static inline uint64_t
gc_reseed_key(double d2)
{
	return gc_desc_key(d2);
}

/* The buffers of one walk over the first m rows of the order. */
typedef struct gc_reseed_work
{
	int64_t		m;
	uint64_t   *keys;			/* [m] the candidates' keys, then sorted */
	int64_t    *rows;			/* [m] the candidates' rows, then sorted */
	uint64_t   *tk;				/* [m] sort scratch, then the clusters re-seeded */
	int64_t    *tv;				/* [m] sort scratch, then the rows they took */
	int64_t    *hist;			/* [GC_SELECT_BUCKETS] of the select, NULL when m == n */
} gc_reseed_work;

/* Bytes that gc_kmeans_reseed_empty allocates (min(k, n) candidates), for an out-of-memory report. */
static inline size_t
gc_kmeans_reseed_bytes(int64_t n, int32_t k)
{
	size_t		m = (size_t) (k < n ? k : n);

	return m * 2 * (sizeof(uint64_t) + sizeof(int64_t)) +
		(sizeof(int64_t) * GC_SELECT_BUCKETS);
}

/* Frees the buffers of a walk. */
static inline void
gc_reseed_work_free(gc_reseed_work *w)
{
	free(w->keys);
	free(w->rows);
	free(w->tk);
	free(w->tv);
	free(w->hist);
	memset(w, 0, sizeof(*w));
}

/* Allocates the buffers of a walk over m of n rows. */
static inline gc_status
gc_reseed_work_alloc(gc_reseed_work *w, int64_t m, int64_t n)
{
	size_t		mm = (size_t) (m > 0 ? m : 1);

	memset(w, 0, sizeof(*w));
	w->m = m;
	w->keys = (uint64_t *) malloc(sizeof(uint64_t) * mm);
	w->rows = (int64_t *) malloc(sizeof(int64_t) * mm);
	w->tk = (uint64_t *) malloc(sizeof(uint64_t) * mm);
	w->tv = (int64_t *) malloc(sizeof(int64_t) * mm);
	if (m < n)
		w->hist = (int64_t *) malloc(sizeof(int64_t) * GC_SELECT_BUCKETS);
	if (!w->keys || !w->rows || !w->tk || !w->tv || (m < n && !w->hist))
	{
		gc_reseed_work_free(w);
		return GC_ERR_OUT_OF_MEMORY;
	}
	return GC_OK;
}

/* The first w->m rows of the walk's order, in that order, into w->keys and w->rows. */
static inline gc_status
gc_reseed_candidates(const double *d2, int64_t n, gc_reseed_work *w,
					 gc_cancel_fn cancel, void *cancel_arg)
{
	uint64_t	thr = UINT64_MAX;
	int64_t		need_eq = n,
				got = 0;

	if (w->m < n &&
		gc_select_largest(d2, n, w->m, w->hist, &thr, &need_eq, cancel, cancel_arg) != 0)
		return GC_ERR_CANCELLED;
	for (int64_t i = 0; i < n && got < w->m; i++)
	{
		uint64_t	key = gc_reseed_key(d2[i]);

		if ((i & (GC_RESEED_CANCEL_ROWS - 1)) == 0 && cancel && cancel(cancel_arg))
			return GC_ERR_CANCELLED;
		if (key < thr || (key == thr && need_eq > 0))
		{
			need_eq -= key == thr;
			w->keys[got] = key;
			w->rows[got] = i;
			got++;
		}
	}
	if (got != w->m)
		return GC_ERR_INTERNAL;
	if (gc_radix_sort(w->keys, w->rows, w->tk, w->tv, w->m, cancel, cancel_arg) != 0)
		return GC_ERR_CANCELLED;
	return GC_OK;
}

/*
 * The walk over the candidates: takes a row for each empty cluster in
 * cluster order and updates the counts; the clusters and rows taken go to
 * w->tk and w->tv.  Returns the number taken; *ran_out is set when the
 * candidates ran out before the last empty cluster.
 */
static inline int32_t
gc_reseed_walk(int32_t k, const int32_t *labels, int64_t *counts, gc_reseed_work *w,
			   int *ran_out)
{
	int64_t		at = 0;
	int32_t		ntaken = 0;

	*ran_out = 0;
	for (int32_t j = 0; j < k; j++)
	{
		int64_t		best;

		if (counts[j] != 0)
			continue;
		while (at < w->m && counts[labels[w->rows[at]]] < 2)
			at++;
		if (at == w->m)
		{
			*ran_out = 1;
			break;
		}
		best = w->rows[at++];
		counts[labels[best]]--;
		counts[j] = 1;
		w->tk[ntaken] = (uint64_t) j;
		w->tv[ntaken] = best;
		ntaken++;
	}
	return ntaken;
}

/* Moves the rows taken by the walk out of their clusters' sums into the new ones', in cluster order. */
static inline gc_status
gc_reseed_apply(const void *x, gc_dtype dtype, int32_t d, const int32_t *labels, const double *ref,
				double *sums, const gc_reseed_work *w, int32_t ntaken,
				gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		work = 0;

	for (int32_t t = 0; t < ntaken; t++)
	{
		int64_t		j = (int64_t) w->tk[t];
		int64_t		best = w->tv[t];
		int64_t		old = labels[best];

		if ((work += d) >= GC_RESEED_CANCEL_ROWS)
		{
			work = 0;
			if (cancel && cancel(cancel_arg))
				return GC_ERR_CANCELLED;
		}
		for (int32_t c = 0; c < d; c++)
		{
			double		v = gc_kmeans_x_at(x, dtype, best * d + c);

			sums[old * d + c] -= v - (ref ? ref[old * d + c] : 0.0);
			sums[j * d + c] = v - (ref ? ref[j * d + c] : 0.0);
		}
	}
	return GC_OK;
}

/*
 * Re-seeds every empty cluster by the rule above.  sums[j] holds the sum of
 * (x - ref[j]) over the rows of cluster j, with ref the centroids the deltas
 * were taken from (NULL for plain sums); sums and counts are updated.
 * *reseeded: the number of clusters re-seeded.  Returns GC_OK,
 * GC_ERR_CANCELLED when the cancel callback answered yes, or
 * GC_ERR_OUT_OF_MEMORY (gc_kmeans_reseed_bytes); the caller words the
 * error.  O(n) time and O(min(k, n)) memory while the counts agree with
 * the labels.
 */
static inline gc_status
gc_kmeans_reseed_empty(const void *x, gc_dtype dtype,	/* [n, d] */
					   int64_t n, int32_t d, int32_t k,
					   const int32_t *labels,	/* [n] */
					   const double *d2,	/* [n] squared distance to the assigned centroid */
					   const double *ref,	/* [k, d] or NULL */
					   double *sums,	/* [k, d] in/out */
					   int64_t *counts, /* [k] in/out */
					   int32_t *reseeded,	/* out */
					   gc_cancel_fn cancel, void *cancel_arg)
{
	gc_reseed_work w;
	int64_t		m = k < n ? k : n;
	int32_t		ntaken = 0;
	gc_status	st;

	*reseeded = 0;
	for (;;)
	{
		int			ran_out;

		if ((st = gc_reseed_work_alloc(&w, m, n)) != GC_OK)
			return st;
		if ((st = gc_reseed_candidates(d2, n, &w, cancel, cancel_arg)) != GC_OK)
		{
			gc_reseed_work_free(&w);
			return st;
		}
		ntaken = gc_reseed_walk(k, labels, counts, &w, &ran_out);
		if (!ran_out || m == n)
			break;
		/* the counts disagree with the labels: undo, and walk over every row */
		for (int32_t t = ntaken - 1; t >= 0; t--)
		{
			counts[labels[w.tv[t]]]++;
			counts[w.tk[t]] = 0;
		}
		gc_reseed_work_free(&w);
		m = n;
	}
	st = gc_reseed_apply(x, dtype, d, labels, ref, sums, &w, ntaken, cancel, cancel_arg);
	gc_reseed_work_free(&w);
	if (st == GC_OK)
		*reseeded = ntaken;
	return st;
}

#endif							/* GPUCLUST_KMEANS_INIT_H */
