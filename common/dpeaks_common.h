/*
 * dpeaks_common.h
 *    Density peaks arithmetic shared word for word by the CPU core
 *    (src/core/dpeaks.c) and the GPU back end (cuda/dpeaks.cu), so that both
 *    produce bit-identical dc, rho, delta, centres and labels.
 *
 * Exact rules (Rodriguez and Laio, "Clustering by fast search and find of
 * density peaks", 2014, as parallelised in CUDA-DP by Ge et al., "Efficient
 * parallel implementation of a density peaks clustering algorithm on GPU"):
 *
 *  - d_ij = gc_metric_distance(metric, dist2_ij) of common/metric.h:
 *    sqrt(dist2_ij) (Euclidean) or dist2_ij / 2 (cosine, on the unit rows
 *    the caller passes), dist2 accumulated in double from the input
 *    elements (float or double, each converted exactly to double) over
 *    dimensions 0..d-1 in order, without FMA (gc_dist2, gc_dist2_f64).
 *    dc, rho_min, delta_min and the output delta are in the metric's units.
 *  - dc when not given: the k-th smallest d_ij over ordered pairs i != j,
 *    k = ceil(neighbor_rate * n * (n - 1)).  Found exactly (a radix select
 *    on the bit patterns of dist2: CUDA-DP's binary search over pair counts,
 *    several bits per pass) when n <= GC_DP_DC_EXACT_MAX_N, otherwise the
 *    ceil(neighbor_rate * S)-th smallest of S = GC_DP_DC_SAMPLE_PAIRS ordered
 *    pairs drawn by gc_dp_sample_pair from the seed (CUDA-DP's sampling).
 *    The distance is non-decreasing in dist2, so the selection runs on dist2
 *    and dc is the distance of the dist2 selected.
 *  - cutoff kernel: rho_i = #{j != i : d_ij < dc}, evaluated as
 *    dist2_ij < T with T = gc_dp_cutoff_threshold(metric, dc), which is
 *    equivalent.
 *  - gaussian kernel: rho_i = sum_{j != i} exp(-u_ij), u_ij = (d_ij / dc)^2
 *    as gc_dp_gauss_u computes it: dist2_ij * f (Euclidean) or (dist2_ij *
 *    f)^2 (cosine) with f = gc_dp_gauss_factor(metric, dc), which is 1 /
 *    (dc * dc) (Euclidean) or 0.5 / dc (cosine) unless that overflows (dc
 *    below about 7e-155, resp. 2.8e-309; then the largest double, so that
 *    duplicates still give u = 0 and every other pair u > 40); each term
 *    from gc_dp_gauss_fixed (relative error below 2e-7) as a fixed-point
 *    number with 56 fraction bits, summed in 128-bit integers, so the sum
 *    is the same in any order and on any back end; terms below 2^-56
 *    vanish, hence an absolute error below n * 2^-56 (1.4e-10 for ten
 *    million rows) on top of the relative one.
 *  - density order: rank 0 is the densest; i before j when rho_i > rho_j, or
 *    equal and i < j.
 *  - delta_i = d to the nearest denser point (nearest by dist2; equal dist2:
 *    the denser of them, smaller rank).  Densest point: the largest d to any
 *    point.
 *  - gamma_i = rho_i * delta_i.  Centres: the densest point and, with
 *    n_clusters, the n_clusters - 1 others with the largest gamma (ties by
 *    rank); otherwise every point with rho >= rho_min and delta >= delta_min.
 *    Centres are numbered 0, 1, ... by rank; each other point takes the
 *    cluster of its nearest denser point.
 *
 * The grid index (dimensions 1 to 3) only decides which pairs must be
 * looked at; its cell tests are conservative, so the answers above do not
 * depend on the cell size and both back ends may size it differently.  It
 * works in Euclidean units on the rows as given (unit rows for cosine) and
 * compares dist2 alone, so it serves both metrics unchanged.
 */
#ifndef GPUCLUST_DPEAKS_COMMON_H
#define GPUCLUST_DPEAKS_COMMON_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metric.h"
#include "portable.h"
#include "rng.h"

/* Largest n for which dc is found exactly over all pairs. */
#define GC_DP_DC_EXACT_MAX_N	50000
/* Ordered pairs drawn when dc is estimated from a sample. */
#define GC_DP_DC_SAMPLE_PAIRS	(INT64_C(1) << 22)
/* Points this dense (rank below) find their nearest denser point by scanning all denser points. */
#define GC_DP_BRUTE_RANK		2048
/* The grid index is used up to this many dimensions. */
#define GC_DP_GRID_MAX_DIM		3
/* Work of one grid cell looked at (bounds, cell starts), in coordinate differences, for the CPU's cancel checks. */
#define GC_DP_CELL_WORK			8
/* Seed of the dc sample when the caller passes none. */
#define GC_DP_DEFAULT_SEED		UINT64_C(0x6770756373656564)

/* Bit pattern of a non-negative double; the order of the patterns is the order of the values. */
static GC_HD uint64_t
gc_dp_key(double v)
{
#ifdef __CUDA_ARCH__
	return (uint64_t) __double_as_longlong(v);
#else
	uint64_t	k;

	memcpy(&k, &v, sizeof(k));
	return k;
#endif
}

static GC_HD double
gc_dp_unkey(uint64_t k)
{
#ifdef __CUDA_ARCH__
	return __longlong_as_double((long long) k);
#else
	double		v;

	memcpy(&v, &k, sizeof(v));
	return v;
#endif
}

/* The p-th sampled ordered pair (i != j) for the dc estimate; n >= 2. */
static GC_HD void
gc_dp_sample_pair(uint64_t seed, int64_t p, int64_t n, int64_t *i, int64_t *j)
{
	uint64_t	a = gc_mix64(seed ^ gc_mix64((uint64_t) (2 * p)));
	uint64_t	b = gc_mix64(seed ^ gc_mix64((uint64_t) (2 * p + 1)));
	int64_t		ii = (int64_t) (a % (uint64_t) n);
	int64_t		jj = (int64_t) (b % (uint64_t) (n - 1));

	if (jj >= ii)
		jj++;
	*i = ii;
	*j = jj;
}

/* 1-based rank of the neighbor_rate quantile among `pairs` values. */
static GC_HD int64_t
gc_dp_quantile_rank(double rate, int64_t pairs)
{
	double		k = ceil(rate * (double) pairs);

	if (k < 1.0)
		return 1;
	if (k > (double) pairs)
		return pairs;
	return (int64_t) k;
}

/* Number of ordered pairs i != j. */
static GC_HD int64_t
gc_dp_ordered_pairs(int64_t n)
{
	return n * (n - 1);
}

/*
 * The smallest dist2 T whose distance in metric m is at least dc (dc > 0):
 * then d_ij < dc exactly when dist2_ij < T, so the cutoff kernel compares
 * squared distances.  The successor of gc_metric_dist2_lt's bound (for the
 * Euclidean metric the smallest T with sqrt(T) >= dc, as always).
 */
static inline double
gc_dp_cutoff_threshold(gc_metric m, double dc)
{
	return nextafter(gc_metric_dist2_lt(m, dc), INFINITY);
}

/*
 * The factor of dist2 in the gaussian kernel's u: 1 / (dc * dc), or the
 * largest double when that is infinite (dc * dc underflows below about
 * 1.5e-162 and its reciprocal overflows below about 7e-155).  An infinite
 * factor would make u = 0 * inf = NaN for duplicates, whose term must be
 * exactly 1; with the largest double a duplicate gives u = 0, and any other
 * pair of float rows, whose dist2 is at least the square of the smallest
 * float step (about 2e-90), gives u far above 40, a term of exactly zero,
 * as it should.  (Double rows may be closer: a pair whose dist2 is below
 * about 2.2e-307, a distance below about 4.7e-154, gets u below 40 there,
 * a term above zero; both back ends alike.)  For every other dc the factor
 * is 1 / (dc * dc) unchanged.
 */
static GC_HD double
gc_dp_inv_dc2(double dc)
{
	double		inv = 1.0 / (dc * dc);

	return inv <= DBL_MAX ? inv : DBL_MAX;
}

/*
 * The factor f of gc_dp_gauss_u for dc in metric m: gc_dp_inv_dc2(dc)
 * (Euclidean), or 0.5 / dc (cosine), the largest double when that is
 * infinite (dc below about 2.8e-309), for the same reason as above: a
 * duplicate gives u = 0, any other pair u far above 40.
 */
static inline double
gc_dp_gauss_factor(gc_metric m, double dc)
{
	double		f;

	if (m != GC_METRIC_COSINE)
		return gc_dp_inv_dc2(dc);
	f = 0.5 / dc;
	return f <= DBL_MAX ? f : DBL_MAX;
}

/*
 * u = (d / dc)^2 of the gaussian kernel for a pair's dist2, with f of
 * gc_dp_gauss_factor: dist2 * f (Euclidean: dist2 / dc^2), or the square of
 * dist2 * f (cosine: ((dist2 / 2) / dc)^2).  Non-decreasing in dist2, the
 * same arithmetic on both back ends.
 */
static GC_HD double
gc_dp_gauss_u(gc_metric m, double dist2, double f)
{
	double		q = dist2 * f;

	return m == GC_METRIC_COSINE ? q * q : q;
}

/* Fraction bits of the fixed-point gaussian terms. */
#define GC_DP_FIXED_BITS 56

/*
 * exp(-u) for u >= 0 as a fixed-point number with 56 fraction bits
 * (truncated).  u = k ln2 + r with |r| <= ln2 / 2 (k by round to nearest
 * even with the 1.5 * 2^52 trick, in double); exp(-r) from its degree-7
 * Taylor polynomial in float (relative error below 2e-7); the scaling by
 * 2^-k is an integer shift of the float's significand.  Written once for
 * both back ends; a term never exceeds 2^56, so 128 of them fit in 64 bits.
 */
static GC_HD uint64_t
gc_dp_gauss_fixed(double u)
{
	const double magic = 6755399441055744.0;	/* 1.5 * 2^52 */
	double		t,
				kd;
	int			k,
				e,
				sh;
	float		x,
				p;
	uint32_t	bits,
				m;

	if (!(u < 40.0))			/* exp(-40) < 2^-56: also catches NaN */
		return 0;
	t = u * 1.4426950408889634;
	t = t + magic;
	kd = t - magic;
#ifdef __CUDA_ARCH__
	k = __double2loint(t);
#else
	{
		uint64_t	tb;

		memcpy(&tb, &t, sizeof(tb));
		k = (int) (uint32_t) tb;
	}
#endif
	t = kd * 0.6931471805599453;
	x = (float) (t - u);		/* -r */
	p = 1.0f + x * (1.0f + x * (0.5f + x * (0.16666667f + x * (0.041666668f +
			x * (0.0083333333f + x * (0.0013888889f + x * 0.00019841270f))))));
#ifdef __CUDA_ARCH__
	bits = (uint32_t) __float_as_uint(p);
#else
	memcpy(&bits, &p, sizeof(bits));
#endif
	/* p in [0.70, 1.42]: p = m * 2^(e - 23) with a 24-bit m */
	m = (bits & 0x7fffffu) | 0x800000u;
	e = (int) ((bits >> 23) & 0xffu) - 127;
	sh = GC_DP_FIXED_BITS - 23 + e - k;
	if (sh >= 0)
		return (uint64_t) m << sh;
	if (sh <= -32)
		return 0;
	return (uint64_t) (m >> (-sh));
}

/*
 * The largest dist2 whose gaussian term can be above zero: u of
 * gc_dp_gauss_u is non-decreasing in dist2, and gc_dp_gauss_fixed is zero
 * from u = 40 on, so every pair whose dist2 is above this bound has a term
 * of exactly zero (the pair engine decides those by its screen alone).
 * -1 when no dist2 has a term (f so large that even 0 gives u >= 40 does
 * not happen: u(0) = 0).  A bisection over the bit patterns of dist2.
 */
static inline double
gc_dp_gauss_reach(gc_metric m, double f)
{
	uint64_t	lo = 0,
				hi = gc_dp_key(DBL_MAX);

	if (gc_dp_gauss_u(m, DBL_MAX, f) < 40.0)
		return DBL_MAX;
	/* invariant: u(lo) < 40 <= u(hi) */
	while (hi - lo > 1)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		if (gc_dp_gauss_u(m, gc_dp_unkey(mid), f) < 40.0)
			lo = mid;
		else
			hi = mid;
	}
	return gc_dp_unkey(lo);
}

/* 128-bit accumulator (two 64-bit words) for the gaussian sums. */
static GC_HD void
gc_dp_acc_add(uint64_t *hi, uint64_t *lo, uint64_t v)
{
	uint64_t	s = *lo + v;

	*hi += (s < v);
	*lo = s;
}

/* The value of a fixed-point sum: (hi * 2^64 + lo) * 2^-56. */
static GC_HD double
gc_dp_acc_value(uint64_t hi, uint64_t lo)
{
	return (double) hi * 256.0 + (double) lo * 1.3877787807814457e-17;
}

/* Rings of cells searched for the nearest denser point before scanning all denser points. */
static GC_HD int64_t
gc_dp_max_rings(int d)
{
	return d == 1 ? 8191 : d == 2 ? 63 : 12;
}

/* ---------------------------------------------------------------- the grid
 * A dense grid over dimensions 0..d-1 (d <= 3), dimension 0 varying fastest.
 * Points are stored in cell order; cell_start has ncells + 1 entries.
 * Cell c along dimension k covers [origin + c h - slack, origin + (c+1) h + slack];
 * the first and the last cell of a dimension reach on to the smallest and
 * the largest coordinate (edge_lo, edge_hi).  The cells span a box chosen
 * from a sample of the rows (gc_dp_grid_box), so that a few far rows do
 * not make the cells so wide that the dense rows share a handful of them:
 * the far rows land in the edge cells instead.  Every bound the searches
 * use comes from gc_dp_cell_lo / gc_dp_cell_hi, so the answer does not
 * depend on the box.
 */
typedef struct gc_dp_grid
{
	int32_t		d;
	double		origin[GC_DP_GRID_MAX_DIM];
	double		h;
	double		inv_h;
	double		slack;
	int64_t		dims[GC_DP_GRID_MAX_DIM];	/* unused dimensions: 1 */
	double		edge_lo[GC_DP_GRID_MAX_DIM];	/* the smallest coordinate */
	double		edge_hi[GC_DP_GRID_MAX_DIM];	/* the largest coordinate */
	const int64_t *cell_start;	/* [ncells + 1] */
	const double *xs[GC_DP_GRID_MAX_DIM];	/* [n] coordinate k of the point at each sorted position */
	const int64_t *rank;		/* [n] density rank of the point at each sorted position */
} gc_dp_grid;

/* Orders doubles for qsort. */
static inline int
gc_dp_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/*
 * The box the cells span (host side, both back ends), from the range mn /
 * mx of each dimension and an evenly spaced sample of at most
 * GC_DP_BOX_SAMPLE rows of x [n, d] of element type t: where the sample's quantiles 1/256 and
 * 255/256 span less than a quarter of the range but more than nothing (a
 * few far rows), the box is those quantiles; else the range (also when
 * most rows share one value: a box of width zero would put every row into
 * one cell).  Returns 0, -1 when out of memory.
 */
#define GC_DP_BOX_SAMPLE 4096

static inline int
gc_dp_grid_box(const void *x, gc_dtype t, int64_t n, int32_t d, const double *mn,
			   const double *mx, double *lo, double *hi)
{
	int64_t		s = n < GC_DP_BOX_SAMPLE ? n : GC_DP_BOX_SAMPLE;
	int64_t		tail = s / 256;
	double	   *v = (double *) malloc(sizeof(double) * (size_t) (s > 0 ? s : 1));

	if (!v)
		return -1;
	for (int k = 0; k < d; k++)
	{
		lo[k] = mn[k];
		hi[k] = mx[k];
		if (tail == 0)
			continue;
		for (int64_t j = 0; j < s; j++)
		{
			int64_t		at = (j * n / s) * d + k;

			v[j] = t == GC_F64 ? ((const double *) x)[at] : (double) ((const float *) x)[at];
		}
		qsort(v, (size_t) s, sizeof(double), gc_dp_cmp_double);
		if (v[s - 1 - tail] > v[tail] && v[s - 1 - tail] - v[tail] < 0.25 * (mx[k] - mn[k]))
		{
			lo[k] = v[tail];
			hi[k] = v[s - 1 - tail];
		}
	}
	free(v);
	return 0;
}

/*
 * Chooses the cells (host side, both back ends): side h with about as many
 * cells as points (at most 2n + 16) over the box [lo, hi] of
 * gc_dp_grid_box, close to one point a cell where the data are uniform.
 * mn / mx: the range of each dimension.  Returns the number of cells; the
 * pointers of g are left alone.
 */
static inline int64_t
gc_dp_grid_shape(gc_dp_grid *g, int32_t d, int64_t n, const double *mn, const double *mx,
				 const double *lo, const double *hi)
{
	double		emax = 0.0,
				amax = 0.0,
				h;
	double		limit = 2.0 * (double) n + 16.0;
	int64_t		ncells = 1;

	for (int k = 0; k < d; k++)
	{
		if (hi[k] - lo[k] > emax)
			emax = hi[k] - lo[k];
		if (fabs(lo[k]) > amax)
			amax = fabs(lo[k]);
		if (fabs(hi[k]) > amax)
			amax = fabs(hi[k]);
	}
	h = emax > 0.0 ? emax : 1.0;
	for (int it = 0; it < 400; it++)
	{
		double		h2 = h * 0.8,
					cells = 1.0;

		for (int k = 0; k < d; k++)
			cells *= floor((hi[k] - lo[k]) / h2) + 1.0;
		if (cells > limit || !(h2 > 0.0))
			break;
		h = h2;
	}
	g->d = d;
	g->h = h;
	g->inv_h = 1.0 / h;
	g->slack = 1e-9 * (h + amax + emax);
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
	{
		if (k < d)
		{
			g->origin[k] = lo[k];
			g->dims[k] = (int64_t) floor((hi[k] - lo[k]) / h) + 1;
			g->edge_lo[k] = mn[k];
			g->edge_hi[k] = mx[k];
		}
		else
		{
			g->origin[k] = 0.0;
			g->dims[k] = 1;
			g->edge_lo[k] = g->edge_hi[k] = 0.0;
		}
		ncells *= g->dims[k];
	}
	return ncells;
}

/* Cell index of coordinate v along dimension k (clamped). */
static GC_HD int64_t
gc_dp_cell_of(const gc_dp_grid *g, int k, double v)
{
	double		c = floor((v - g->origin[k]) * g->inv_h);

	if (!(c >= 0.0))
		return 0;
	if (c >= (double) (g->dims[k] - 1))
		return g->dims[k] - 1;
	return (int64_t) c;
}

static GC_HD double
gc_dp_cell_lo(const gc_dp_grid *g, int k, int64_t c)
{
	double		v = g->origin[k] + (double) c * g->h;

	if (c == 0 && g->edge_lo[k] < v)
		v = g->edge_lo[k];
	return v - g->slack;
}

static GC_HD double
gc_dp_cell_hi(const gc_dp_grid *g, int k, int64_t c)
{
	double		v = g->origin[k] + (double) (c + 1) * g->h;

	if (c == g->dims[k] - 1 && g->edge_hi[k] > v)
		v = g->edge_hi[k];
	return v + g->slack;
}

/* Squared distance bounds from v to the cell band c along dimension k. */
static GC_HD void
gc_dp_band(const gc_dp_grid *g, int k, int64_t c, double v, double *mind2, double *maxd2)
{
	double		lo = gc_dp_cell_lo(g, k, c);
	double		hi = gc_dp_cell_hi(g, k, c);
	double		a = v - lo;
	double		b = hi - v;
	double		mn = 0.0,
				mx;

	if (a < 0.0)
		mn = -a;
	else if (b < 0.0)
		mn = -b;
	mx = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
	*mind2 += mn * mn;
	*maxd2 += mx * mx;
}

#define GC_DP_SAFE_LOW	(1.0 - 1e-12)
#define GC_DP_SAFE_HIGH (1.0 + 1e-12)

/* Squared distance of the point at sorted position q to the query point p. */
static GC_HD double
gc_dp_grid_dist2(const gc_dp_grid *g, const double *p, int64_t q)
{
	double		s = 0.0;

	for (int k = 0; k < g->d; k++)
	{
		double		t = p[k] - g->xs[k][q];

		s += t * t;
	}
	return s;
}

/*
 * Number of points j with dist2(p, x_j) < T (p itself included when it is
 * in the data).  Rows of cells along dimension 0: the run of cells wholly
 * inside the ball is counted from cell_start, only the cells that the
 * sphere crosses are scanned point by point.  *work (when not NULL) gets
 * the work done, GC_DP_CELL_WORK per cell or search step plus d per point
 * scanned, for the CPU's cancel checks.
 */
static GC_HD int64_t
gc_dp_grid_count(const gc_dp_grid *g, const double *p, double T, int64_t *work)
{
	int64_t		done = 0;
	double		r = sqrt(T) * GC_DP_SAFE_HIGH + 2.0 * g->slack;
	int64_t		lo[GC_DP_GRID_MAX_DIM],
				hi[GC_DP_GRID_MAX_DIM];
	int64_t		count = 0;
	double		t_in = T * GC_DP_SAFE_LOW;
	double		t_out = T * GC_DP_SAFE_HIGH;

	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
	{
		if (k < g->d)
		{
			lo[k] = gc_dp_cell_of(g, k, p[k] - r);
			hi[k] = gc_dp_cell_of(g, k, p[k] + r);
		}
		else
			lo[k] = hi[k] = 0;
	}
	for (int64_t c2 = lo[2]; c2 <= hi[2]; c2++)
	{
		double		mn2 = 0.0,
					mx2 = 0.0;

		done += GC_DP_CELL_WORK;
		if (g->d > 2)
			gc_dp_band(g, 2, c2, p[2], &mn2, &mx2);
		if (mn2 > t_out)
			continue;
		for (int64_t c1 = lo[1]; c1 <= hi[1]; c1++)
		{
			double		mn1 = mn2,
						mx1 = mx2;
			int64_t		base,
						pc,
						ia,
						ib;

			done += GC_DP_CELL_WORK;
			if (g->d > 1)
				gc_dp_band(g, 1, c1, p[1], &mn1, &mx1);
			if (mn1 > t_out)
				continue;
			base = g->dims[0] * (c1 + g->dims[1] * c2);
			pc = gc_dp_cell_of(g, 0, p[0]);
			if (pc < lo[0])
				pc = lo[0];
			if (pc > hi[0])
				pc = hi[0];

			/*
			 * Interior run [ia, ib] around pc: the largest distance to a
			 * cell grows with the distance from pc, so binary search each
			 * side.  Empty when pc itself is not wholly inside.
			 */
			{
				double		mn = mn1,
							mx = mx1;

				gc_dp_band(g, 0, pc, p[0], &mn, &mx);
				if (mx < t_in)
				{
					int64_t		a = pc,
								b = lo[0];	/* largest-left search */

					/* leftmost interior cell in [lo0, pc] */
					while (b < a)
					{
						int64_t		m = b + (a - b) / 2;
						double		mnm = mn1,
									mxm = mx1;

						gc_dp_band(g, 0, m, p[0], &mnm, &mxm);
						done += GC_DP_CELL_WORK;
						if (mxm < t_in)
							a = m;
						else
							b = m + 1;
					}
					ia = a;
					a = pc;
					b = hi[0];
					/* rightmost interior cell in [pc, hi0] */
					while (a < b)
					{
						int64_t		m = a + (b - a + 1) / 2;
						double		mnm = mn1,
									mxm = mx1;

						gc_dp_band(g, 0, m, p[0], &mnm, &mxm);
						done += GC_DP_CELL_WORK;
						if (mxm < t_in)
							a = m;
						else
							b = m - 1;
					}
					ib = a;
					count += g->cell_start[base + ib + 1] - g->cell_start[base + ia];
				}
				else
				{
					ia = pc + 1;
					ib = pc;
				}
			}
			/* crossed cells left of the run, then right of it */
			for (int side = 0; side < 2; side++)
			{
				int64_t		c = side == 0 ? ia - 1 : ib + 1;
				int64_t		step = side == 0 ? -1 : 1;

				for (; c >= lo[0] && c <= hi[0]; c += step)
				{
					double		mn = mn1,
								mx = mx1;
					int64_t		s,
								e;

					gc_dp_band(g, 0, c, p[0], &mn, &mx);
					done += GC_DP_CELL_WORK;
					if (mn > t_out)
						break;	/* the rest of this side is farther */
					s = g->cell_start[base + c];
					e = g->cell_start[base + c + 1];
					if (mx < t_in)
					{
						count += e - s;
						continue;
					}
					for (int64_t q = s; q < e; q++)
						count += gc_dp_grid_dist2(g, p, q) < T;
					done += (e - s) * g->d;
				}
			}
		}
	}
	if (work)
		*work += done;
	return count;
}

/* Better candidate for the nearest denser point: closer, or as close and denser. */
static GC_HD int
gc_dp_better(double d2, int64_t rank, double best_d2, int64_t best_rank)
{
	return d2 < best_d2 || (d2 == best_d2 && rank < best_rank);
}

/*
 * Nearest point denser than the query (rank below my_rank), searching rings
 * of cells outward from the query's cell.  Returns 1 when the answer is
 * certain, 0 when max_rings rings were not enough (the caller then scans all
 * denser points).  *best_d2 / *best_rank carry the candidate in and out
 * (INFINITY / -1 when none yet).  *work (when not NULL) gets the work done,
 * GC_DP_CELL_WORK per cell plus d per point looked at, for the CPU's cancel
 * checks.
 */
static GC_HD int
gc_dp_grid_nearest_denser(const gc_dp_grid *g, const double *p, int64_t my_rank,
						  int64_t max_rings, double *best_d2, int64_t *best_rank,
						  int64_t *work)
{
	int64_t		pc[GC_DP_GRID_MAX_DIM];
	int64_t		done = 0;
	double		bd2 = *best_d2;
	int64_t		br = *best_rank;
	int			resolved = 0;

	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		pc[k] = k < g->d ? gc_dp_cell_of(g, k, p[k]) : 0;

	for (int64_t r = 0; r <= max_rings; r++)
	{
		int			covers = 1;
		int64_t		rr[GC_DP_GRID_MAX_DIM];

		if (r >= 1)
		{
			/* every point of ring r is at least (r - 1) h away */
			double		lb = (double) (r - 1) * g->h - 2.0 * g->slack;

			if (br >= 0 && lb > 0.0 && lb * lb > bd2 * GC_DP_SAFE_HIGH)
			{
				resolved = 1;
				break;
			}
		}
		for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		{
			rr[k] = k < g->d ? r : 0;
			if (k < g->d && (pc[k] - r > 0 || pc[k] + r < g->dims[k] - 1))
				covers = 0;
		}
		for (int64_t o2 = -rr[2]; o2 <= rr[2]; o2++)
		{
			int64_t		c2 = pc[2] + o2;
			double		mn2 = 0.0,
						mx2 = 0.0;

			if (c2 < 0 || c2 >= g->dims[2])
				continue;
			if (g->d > 2)
				gc_dp_band(g, 2, c2, p[2], &mn2, &mx2);
			for (int64_t o1 = -rr[1]; o1 <= rr[1]; o1++)
			{
				int64_t		c1 = pc[1] + o1;
				int			shell = (g->d > 2 && (o2 == -r || o2 == r)) ||
					(g->d > 1 && (o1 == -r || o1 == r));
				double		mn1 = mn2,
							mx1 = mx2;
				int64_t		step;

				if (c1 < 0 || c1 >= g->dims[1])
					continue;
				done += GC_DP_CELL_WORK;
				if (g->d > 1)
					gc_dp_band(g, 1, c1, p[1], &mn1, &mx1);
				if (br >= 0 && mn1 > bd2 * GC_DP_SAFE_HIGH)
					continue;
				/* on the shell of the outer dimensions: the whole row; else its two ends */
				step = (shell || r == 0) ? 1 : 2 * r;
				for (int64_t o0 = -r; o0 <= r; o0 += step)
				{
					int64_t		c0 = pc[0] + o0;
					double		mn = mn1,
								mx = mx1;
					int64_t		base,
								s,
								e;

					if (c0 < 0 || c0 >= g->dims[0])
						continue;
					done += GC_DP_CELL_WORK;
					gc_dp_band(g, 0, c0, p[0], &mn, &mx);
					if (br >= 0 && mn > bd2 * GC_DP_SAFE_HIGH)
						continue;
					base = c0 + g->dims[0] * (c1 + g->dims[1] * c2);
					s = g->cell_start[base];
					e = g->cell_start[base + 1];
					done += (e - s) * g->d;
					for (int64_t q = s; q < e; q++)
					{
						int64_t		rk = g->rank[q];
						double		d2;

						if (rk >= my_rank)
							continue;
						d2 = gc_dp_grid_dist2(g, p, q);
						if (br < 0 || gc_dp_better(d2, rk, bd2, br))
						{
							bd2 = d2;
							br = rk;
						}
					}
				}
			}
		}
		if (covers)
		{
			resolved = 1;
			break;
		}
	}
	*best_d2 = bd2;
	*best_rank = br;
	if (work)
		*work += done;
	return resolved;
}

#endif							/* GPUCLUST_DPEAKS_COMMON_H */
