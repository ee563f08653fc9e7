/*
 * pairs.h
 *    The arithmetic of the pair engine, once for both back ends: the proven
 *    error bound of a screened squared distance, the decision it allows, the
 *    choice of the screen's precision and the rule that chooses between the
 *    pair engine and the grid.  The engines themselves are src/core/pairs.c
 *    (OpenBLAS) and cuda/pairs.cu (cuBLAS).
 *
 * The pair engine computes the distances between blocks of rows as matrix
 * products (GEMM tiles), never storing an n x n matrix, and decides every
 * pair exactly: a pair whose screened value lies farther from the threshold
 * than the bound below is decided by the screen, every other pair is
 * recomputed in the canonical arithmetic of common/metric.h (gc_dist2 or
 * gc_dist2_f64: double, in feature order, no fused multiply-add).  So the
 * answers are those of the exact loops, on the CPU and on the GPU alike.
 *
 * Notation, for two rows a and b as given (float or double):
 *   R    the canonical dist2 of a and b (common/metric.h);
 *   D    ||a - b||^2 in exact arithmetic;
 *   mu   the column means (double), s a power of two (gc_pair_scale);
 *   y    s (a - mu) in exact arithmetic;  yf = the operand: (a - mu) in
 *        double, times s (exact), rounded to the operand type (float or
 *        double); likewise for b;
 *   na   ||yf_a|| computed in double (gc_pair_norms), S = na + nb;
 *   p    the product's yf_a . yf_b (GEMM), A = na^2 + nb^2 - 2 p in double.
 *
 * Bound, in the scaled units (times s^2): |A - s^2 R| <= E(S) with
 *   E = 2 (cS S^2 + cL S + c0)   (gc_pair_bound_make, gc_pair_margin)
 *   - the product: |p - yf_a . yf_b| <= g sum |yf_a,k| |yf_b,k|
 *     <= g na nb <= g S^2 / 4, with g = (1 + e_in)^2 (1 + G_d(u_acc)) - 1,
 *     where e_in is the relative error of the product's own rounding of its
 *     inputs (TF32: the tensor cores keep 10 of the 23 fraction bits of a
 *     float and may truncate, so e_in = 2^-10; FP32 and FP64: 0) and u_acc
 *     the unit roundoff of its sums (Higham, "Accuracy and Stability of
 *     Numerical Algorithms", 3.1; the bound holds in any order of the sums,
 *     with or without fused multiply-adds).  Tensor cores do not round
 *     their sums to nearest: Fasi, Higham, Mikaitis and Pranesh, "Numerical
 *     behavior of NVIDIA tensor cores" (2021), found truncation and a few
 *     alignment bits; u_acc = 2^-20 for TF32 covers that with a factor of
 *     16 over FP32's 2^-24;
 *   - the two norms: G_d (na^2 + nb^2) <= G_d S^2 (sums of d squares in
 *     double), and 8 u S^2 the roundings of A and of A +/- E;
 *   - the operands: |yf - y| <= e |y| per coordinate plus an absolute t
 *     (subnormals and their flush to zero), e = 2^-24 + 2^-53 (float
 *     operands) or 2^-53 (double); e2 = e / (1 - e), t2 = 2 sqrt(d) t:
 *     ||(yf_a - yf_b) - (y_a - y_b)|| <= e2 S + t2 =: dl, so
 *     | ||yf_a - yf_b||^2 - s^2 D | <= dl (2 S + dl);
 *   - the canonical loop's own rounding: |R - D| <= G_{d+2} D, with
 *     s^2 D <= (S + dl)^2 <= 2 ((1 + e2)^2 S^2 + t2^2);
 *   - the factor 2 covers the rounding of S and of E itself.
 * So with ts = s^2 t for the threshold t (a pair is in when R <= t):
 *   A + E < ts (1 - 4u)   decides "in",
 *   A - E > ts (1 + 4u)   decides "out",
 * and anything else, a NaN or infinity included, takes the canonical path.
 * A margin factor of 0 (gc_pair_bound.margin; tests only) drops E: the
 * mutation check that must make a case fail.
 */
#ifndef GPUCLUST_PAIRS_H
#define GPUCLUST_PAIRS_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "portable.h"

/* The precision of the screen's product. */
typedef enum gc_pair_precision
{
	GC_PAIR_FP32 = 0,			/* float operands, IEEE single products (CPU SGEMM) */
	GC_PAIR_TF32 = 1,			/* float operands, tensor-core TF32 products (GPU) */
	GC_PAIR_FP64 = 2			/* double operands, IEEE double products (DGEMM, FP64 tensor cores) */
} gc_pair_precision;

static const char *const gc_pair_precision_names[3] = {"fp32", "tf32", "fp64"};

/* The decision constants of one call: E(S) = cS S^2 + cL S + c0, thresholds in scaled units. */
typedef struct gc_pair_bound
{
	double		cS;
	double		cL;
	double		c0;
	double		lo;				/* "in" when A + E < lo */
	double		hi;				/* "out" when A - E > hi */
	int			screen;			/* 0: every pair takes the canonical path */
} gc_pair_bound;

/* n u / (1 - n u), Higham's gamma_n, for unit roundoff u. */
static GC_HD double
gc_pair_gamma(double nn, double u)
{
	return nn * u / (1.0 - nn * u);
}

/*
 * The power of two s such that s * m is in [0.5, 1) for the largest
 * absolute centred coordinate m (1 when m is 0 or not finite).
 */
static inline double
gc_pair_scale(double m)
{
	int			ex;

	if (!(m > 0) || !isfinite(m))
		return 1.0;
	(void) frexp(m, &ex);
	return ldexp(1.0, -ex);
}

/*
 * The constants of the bound above for a product of precision prec over d
 * features, rows scaled by s, threshold t (a pair is in when R <= t);
 * margin 1 is the proven bound, 0 the mutation check's (no bound).
 */
static inline gc_pair_bound
gc_pair_bound_make(gc_pair_precision prec, int32_t d, double s, double t, double margin)
{
	const double u = 0x1p-53;
	double		e_in,
				u_acc,
				e,
				tiny,
				g,
				e2,
				t2,
				Gd,
				Gd2,
				ts;
	gc_pair_bound b;

	switch (prec)
	{
		case GC_PAIR_TF32:
			e_in = 0x1p-10;
			u_acc = 0x1p-20;
			e = 0x1p-24 + 0x1p-53 * (1 + 0x1p-24);
			tiny = 0x1p-126;
			break;
		case GC_PAIR_FP32:
			e_in = 0.0;
			u_acc = 0x1p-24;
			e = 0x1p-24 + 0x1p-53 * (1 + 0x1p-24);
			tiny = 0x1p-126;
			break;
		default:
			e_in = 0.0;
			u_acc = 0x1p-52;
			e = 0x1p-52;
			tiny = 0x1p-1020;
			break;
	}
	g = (1 + e_in) * (1 + e_in) * (1 + gc_pair_gamma(d, u_acc)) - 1;
	e2 = e / (1 - e);
	t2 = 2.0 * sqrt((double) d) * tiny * 4.0;
	Gd = gc_pair_gamma(d, u);
	Gd2 = gc_pair_gamma(d + 2, u);
	b.cS = margin * 2.0 * (g / 2.0 + Gd + 8 * u + e2 * (2 + e2) + 2 * Gd2 * (1 + e2) * (1 + e2));
	b.cL = margin * 2.0 * (2 * t2 * (1 + e2) + (double) d * tiny * 4.0);
	b.c0 = margin * 2.0 * (t2 * t2 * (1 + 4 * Gd2) + (double) d * tiny * 4.0);
	ts = t * s * s;
	b.lo = ts * (1 - 4 * u);
	b.hi = ts * (1 + 4 * u);
	/* a threshold near the bottom of the range, or not finite, leaves nothing to the screen */
	b.screen = isfinite(ts) && ts > 0x1p-900 && margin >= 0;
	return b;
}

/* E(S): the margin of a pair whose operands' norms sum to S. */
static GC_HD double
gc_pair_margin(const gc_pair_bound *b, double S)
{
	return (b->cS * S + b->cL) * S + b->c0;
}

/*
 * The screen's verdict for a pair: 1 in (R <= t), 0 out, -1 undecided (the
 * canonical path decides).  A is the screened value, S the operands' norms'
 * sum.
 */
static GC_HD int
gc_pair_decide(const gc_pair_bound *b, double A, double S)
{
	double		E;

	if (!b->screen)
		return -1;
	E = gc_pair_margin(b, S);
	if (A + E < b->lo)
		return 1;
	if (A - E > b->hi)
		return 0;
	return -1;
}

/*
 * The precision of the screen: fast_prec (TF32 on the GPU, FP32 on the
 * CPU) when its margin at a typical S (twice the 90th percentile of the
 * operands' norms, s_typ) is at most a sixteenth of the threshold, so that
 * few pairs land in its band; FP64 otherwise.
 */
static inline gc_pair_precision
gc_pair_choose(gc_pair_precision fast_prec, int32_t d, double s, double t, double s_typ)
{
	gc_pair_bound b = gc_pair_bound_make(fast_prec, d, s, t, 1.0);

	if (b.screen && gc_pair_margin(&b, s_typ) * 16.0 <= t * s * s)
		return fast_prec;
	return GC_PAIR_FP64;
}

/* Rows of the sample that gc_pair_centre reads. */
#define GC_PAIR_SAMPLE 2048

/* Coordinate k of row i of x [n, d] (element type t), in double. */
static inline double
gc_pair_elem(const void *x, gc_dtype t, int32_t d, int64_t i, int32_t k)
{
	return t == GC_F64 ? ((const double *) x)[(size_t) i * d + k]
		: (double) ((const float *) x)[(size_t) i * d + k];
}

/* The r-th smallest of v [m] (Hoare's selection; v is reordered). */
static inline double
gc_pair_select(double *v, int64_t m, int64_t r)
{
	int64_t		lo = 0,
				hi = m - 1;

	while (lo < hi)
	{
		double		pivot = v[lo + (hi - lo) / 2];
		int64_t		a = lo,
					b = hi;

		while (a <= b)
		{
			while (v[a] < pivot)
				a++;
			while (v[b] > pivot)
				b--;
			if (a <= b)
			{
				double		tmp = v[a];

				v[a++] = v[b];
				v[b--] = tmp;
			}
		}
		if (r <= b)
			hi = b;
		else if (r >= a)
			lo = a;
		else
			break;
	}
	return v[r];
}

/*
 * The operands' centre and scale from a sample of GC_PAIR_SAMPLE rows of x
 * [n, d] (n >= 1): mu [d] each feature's median, so that a far outlier moves
 * neither the centre nor the scale (its own pairs then have norms too large
 * for the screen and take the canonical path); *s the power of two of the
 * 99th percentile of the sample's absolute centred coordinates
 * (gc_pair_scale); *s_typ twice the 90th percentile of the sample's scaled
 * norms, the typical S of gc_pair_choose.  Needs col [GC_PAIR_SAMPLE] of
 * scratch.  Host code; the answers never depend on it, only the speed.
 */
static inline void
gc_pair_centre(const void *x, gc_dtype t, int64_t n, int32_t d, double *mu, double *s,
			   double *s_typ, double *col)
{
	int64_t		step = n > GC_PAIR_SAMPLE ? n / GC_PAIR_SAMPLE : 1;
	int64_t		ns = 0;

	for (int32_t k = 0; k < d; k++)
	{
		ns = 0;
		for (int64_t i = 0; i < n && ns < GC_PAIR_SAMPLE; i += step)
			col[ns++] = gc_pair_elem(x, t, d, i, k);
		mu[k] = gc_pair_select(col, ns, ns / 2);
	}
	for (int64_t q = 0; q < GC_PAIR_SAMPLE; q++)
	{
		int64_t		i = (q * step) % n;
		int32_t		k = (int32_t) ((q * 7919) % d);

		col[q] = fabs(gc_pair_elem(x, t, d, i, k) - mu[k]);
	}
	*s = gc_pair_scale(gc_pair_select(col, GC_PAIR_SAMPLE, (GC_PAIR_SAMPLE * 99) / 100));
	ns = 0;
	for (int64_t i = 0; i < n && ns < GC_PAIR_SAMPLE; i += step)
	{
		double		s2 = 0.0;

		for (int32_t k = 0; k < d; k++)
		{
			double		y = (gc_pair_elem(x, t, d, i, k) - mu[k]) * *s;

			s2 += y * y;
		}
		col[ns++] = sqrt(s2);
	}
	*s_typ = 2.0 * gc_pair_select(col, ns, (ns * 9) / 10);
}

/*
 * Whether DBSCAN and density peaks run on the pair engine: at d >= 16,
 * where the grid, which covers three of the features, prunes little
 * (measured in BENCHMARKS.md, "The pair engine").  tuning forces either.
 */
#define GC_PAIR_MIN_DIMS 16

/*
 * HDBSCAN's k-d tree splits on every feature and so prunes longer than
 * the grid: it goes to the engine at d >= 32 (BENCHMARKS.md, "The pair
 * engine", HDBSCAN: at 16 features the tree takes half the engine's time
 * or less, at 32 the engine is ahead, at 64 far ahead).
 */
#define GC_HDBSCAN_PAIR_MIN_DIMS 32

/*
 * The GPU back end's hierarchy prunes less than the CPU's k-d tree: it goes
 * to the engine at d >= 10 (BENCHMARKS.md, "HDBSCAN's GPU tree": on the
 * H200, 200k uniform rows took 1.3 s on the hierarchy and 3.0 s on the
 * engine at 9 features, more than 10 s and 2.5 s at 10; 200k blobs 0.36 s
 * and 2.7 s at 10, 100k x 16 blobs 7.5 s and 0.96 s).
 */
#define GC_HDBSCAN_GPU_PAIR_MIN_DIMS 10

static inline int
gc_pair_engine_chosen_at(const gc_tuning *tuning, int32_t d, int32_t min_dims)
{
	if (tuning && tuning->pair_path > 0)
		return 1;
	if (tuning && tuning->pair_path < 0)
		return 0;
	return d >= min_dims;
}

static inline int
gc_pair_engine_chosen(const gc_tuning *tuning, int32_t d)
{
	return gc_pair_engine_chosen_at(tuning, d, GC_PAIR_MIN_DIMS);
}

/* The same for HDBSCAN, on the CPU back end. */
static inline int
gc_hdbscan_pairs_chosen(const gc_tuning *tuning, int32_t d)
{
	return gc_pair_engine_chosen_at(tuning, d, GC_HDBSCAN_PAIR_MIN_DIMS);
}

/* The same for HDBSCAN, on the GPU back end. */
static inline int
gc_hdbscan_gpu_pairs_chosen(const gc_tuning *tuning, int32_t d)
{
	return gc_pair_engine_chosen_at(tuning, d, GC_HDBSCAN_GPU_PAIR_MIN_DIMS);
}

#endif							/* GPUCLUST_PAIRS_H */
