/*
 * kmeans_step.h
 *    One Lloyd step of k-means as sums that can be split and combined in any
 *    order: the nearest-centroid rule of one row and exact, order-independent
 *    sums of doubles (a superaccumulator).  Plain C for gcc and nvcc, so that
 *    a GPU partial and the CPU partial of gpu_kmeans_step (src/kmeans_dist.c)
 *    add the same numbers into the same accumulators.
 *
 * The nearest centroid of a row is the rule of gpu_kmeans's assignment
 * (src/core/kmeans.c): the squared Euclidean distance to every centroid,
 * accumulated in double over the features in order without fused
 * multiply-add, the smallest winning, the lowest cluster number on a tie.
 * The centroids are held transposed (cent[t * k + j]) so that the loop over
 * centroids vectorizes; each distance is still summed in feature order, so
 * the bits are those of gc_dist2_f64.
 *
 * The superaccumulator is Neal's "small superaccumulator" ("Fast exact
 * summation using small and large superaccumulators", 2015): a double
 * m * 2^(L - 1074) (m < 2^53, 0 <= L <= 2045) is split into 32-bit digits
 * at bit L of a fixed-point number with 2^-1074 as its unit, and each digit
 * is added into a signed 64-bit chunk.  Chunk i holds digits of weight
 * 2^(32 i - 1074); a chunk absorbs 2^31 additions of a digit before it can
 * overflow, so the carries are propagated (gc_sacc_normalize) at the latest
 * after GC_SACC_MAX_PENDING additions.  Every double (not NaN or infinite)
 * is added exactly, so the sum is exact and does not depend on the order of
 * the additions or on how they were split into partial sums and combined.
 * After normalization the representation is unique (chunks 0 .. N-2 in
 * [0, 2^32), the last signed), and gc_sacc_round rounds it once, to
 * nearest with ties to even.
 */
#ifndef GPUCLUST_KMEANS_STEP_H
#define GPUCLUST_KMEANS_STEP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "portable.h"
#include "rng.h"

/*
 * Chunks of one accumulator: bits 0 .. 2045 + 84 of the addends, and 64 more
 * for carries (2^63 additions of the largest double).
 */
#define GC_SACC_CHUNKS 70

/* Additions (of one digit per chunk) allowed before the carries must be propagated. */
#define GC_SACC_MAX_PENDING (INT64_C(1) << 30)

typedef struct gc_sacc
{
	int64_t		c[GC_SACC_CHUNKS];
} gc_sacc;

/*
 * Adds the finite double v to a (NaN and infinities are the caller's to
 * refuse).  Each addition counts as one pending addition of the caller.
 */
static GC_HD void
gc_sacc_add(gc_sacc *a, double v)
{
	uint64_t	bits;
	uint64_t	m;
	uint64_t	rest;
	int32_t		e;
	int32_t		lsb;
	int32_t		ci;
	int32_t		s;
	int64_t		lo,
				mid,
				hi;

	if (v == 0.0)
		return;
	memcpy(&bits, &v, sizeof(bits));
	e = (int32_t) ((bits >> 52) & 0x7ff);
	m = bits & UINT64_C(0xfffffffffffff);
	if (e != 0)
		m |= UINT64_C(1) << 52;
	lsb = e > 0 ? e - 1 : 0;
	ci = lsb >> 5;
	s = lsb & 31;
	lo = (int64_t) ((m << s) & UINT64_C(0xffffffff));
	rest = s == 0 ? m >> 32 : m >> (32 - s);
	mid = (int64_t) (rest & UINT64_C(0xffffffff));
	hi = (int64_t) (rest >> 32);
	if (bits >> 63)
	{
		a->c[ci] -= lo;
		a->c[ci + 1] -= mid;
		a->c[ci + 2] -= hi;
	}
	else
	{
		a->c[ci] += lo;
		a->c[ci + 1] += mid;
		a->c[ci + 2] += hi;
	}
}

/* Propagates the carries: chunks 0 .. N-2 into [0, 2^32), the sign in the last. */
static GC_HD void
gc_sacc_normalize(gc_sacc *a)
{
	for (int32_t i = 0; i < GC_SACC_CHUNKS - 1; i++)
	{
		int64_t		carry = a->c[i] >> 32;	/* arithmetic: floor(c / 2^32) */

		a->c[i] -= (int64_t) ((uint64_t) carry << 32);
		a->c[i + 1] += carry;
	}
}

/* Adds b to a, chunk by chunk (as many pending additions as b's, plus one). */
static GC_HD void
gc_sacc_merge(gc_sacc *a, const gc_sacc *b)
{
	for (int32_t i = 0; i < GC_SACC_CHUNKS; i++)
		a->c[i] += b->c[i];
}

/*
 * Bits from .. from + count - 1 (count <= 64; bit 0 is the 2^-1074 bit) of
 * the magnitude u [GC_SACC_CHUNKS] of 32-bit digits, the highest first.
 */
static inline uint64_t
gc_sacc_bits(const uint32_t *u, int32_t from, int32_t count)
{
	uint64_t	r = 0;

	for (int32_t b = count - 1; b >= 0; b--)
	{
		int32_t		p = from + b;
		uint64_t	bit = 0;

		if (p >= 0)
			bit = (u[p >> 5] >> (p & 31)) & 1u;
		r = (r << 1) | bit;
	}
	return r;
}

/*
 * The value of the normalized accumulator a, rounded once to the nearest
 * double, ties to even; +-infinity beyond the range of double.
 */
static inline double
gc_sacc_round(const gc_sacc *a)
{
	uint32_t	u[GC_SACC_CHUNKS];
	int			negative = a->c[GC_SACC_CHUNKS - 1] < 0;
	int32_t		top = -1;
	int32_t		lead;
	uint64_t	mant;
	uint64_t	guard;
	int			sticky = 0;
	double		r;

	/* the magnitude, two's complement negated when negative */
	if (negative)
	{
		uint64_t	borrow = 1;

		for (int32_t i = 0; i < GC_SACC_CHUNKS; i++)
		{
			uint64_t	x = (uint64_t) (uint32_t) ~(uint32_t) a->c[i] + borrow;

			u[i] = (uint32_t) x;
			borrow = x >> 32;
		}
	}
	else
		for (int32_t i = 0; i < GC_SACC_CHUNKS; i++)
			u[i] = (uint32_t) a->c[i];
	for (int32_t i = GC_SACC_CHUNKS - 1; i >= 0; i--)
		if (u[i] != 0)
		{
			top = i;
			break;
		}
	if (top < 0)
		return 0.0;
	lead = top * 32 + 31;
	while (((u[lead >> 5] >> (lead & 31)) & 1u) == 0)
		lead--;
	if (lead < 53)
	{
		/* fewer than 54 bits: exact (a multiple of 2^-1074 below 2^53 of them) */
		r = ldexp((double) gc_sacc_bits(u, 0, lead + 1), -1074);
		return negative ? -r : r;
	}
	mant = gc_sacc_bits(u, lead - 52, 53);
	guard = gc_sacc_bits(u, lead - 53, 1);
	/* sticky: any bit below the guard bit */
	for (int32_t i = 0; i < ((lead - 53) >> 5); i++)
		sticky |= u[i] != 0;
	if ((lead - 53) & 31)
		sticky |= (u[(lead - 53) >> 5] & ((1u << ((lead - 53) & 31)) - 1u)) != 0;
	if (guard && (sticky || (mant & 1)))
		mant++;
	r = ldexp((double) mant, lead - 52 - 1074);
	return negative ? -r : r;
}

/* ---------------------------------------------------------------- block sums */

/*
 * A cheaper exact form for many additions: a 128-bit two's complement
 * fixed-point number whose unit is bit p of the superaccumulator (2^(p -
 * 1074)).  A double whose lowest mantissa bit (gc_wacc_lsb) lies at bits
 * p .. p + 54 is its 53-bit mantissa shifted by at most 54 bits, below 2^107
 * in magnitude, so 2^20 of them (GC_WACC_MAX_TERMS) add exactly in 128 bits
 * with two machine additions each; gc_wacc_fold then adds the whole sum into
 * a superaccumulator as one addition of five 32-bit digits.  A double
 * outside the window (more than 2^52 times smaller than the largest the
 * window was set for, or larger) goes to the superaccumulator directly.
 * Every value is added exactly either way, so the sums are those of
 * gc_sacc_add alone, bit for bit, whatever the windows and whenever the
 * folds happen.
 */
#define GC_WACC_SPAN 54
#define GC_WACC_MAX_TERMS (1 << 20)

typedef struct gc_wacc
{
	uint64_t	lo;
	uint64_t	hi;				/* two's complement: the sign in the top bit of hi */
} gc_wacc;

/* The superaccumulator bit of the lowest mantissa bit of the finite double v (0 .. 2045). */
static GC_HD int32_t
gc_wacc_lsb(double v)
{
	uint64_t	bits;
	int32_t		e;

	memcpy(&bits, &v, sizeof(bits));
	e = (int32_t) ((bits >> 52) & 0x7ff);
	return e > 0 ? e - 1 : 0;
}

/*
 * The window unit for values whose largest gc_wacc_lsb is top: every value
 * of lsb at most top fits, with room for two more binades.
 */
static GC_HD int32_t
gc_wacc_unit(int32_t top)
{
	int32_t		p = top - GC_WACC_SPAN + 2;

	return p < 0 ? 0 : p;
}

/*
 * Adds the finite double v to w of unit p when its mantissa lies in the
 * window (returns 1); returns 0 and adds nothing otherwise.  Zero always
 * fits.  Without branches, so that the loops over features vectorize.
 */
static GC_HD int
gc_wacc_add(gc_wacc *w, double v, int32_t p)
{
	uint64_t	bits;
	uint64_t	m;
	uint64_t	e;
	uint64_t	sh;
	uint64_t	ok;
	uint64_t	neg;
	uint64_t	tlo,
				thi,
				lo;

	memcpy(&bits, &v, sizeof(bits));
	e = (bits >> 52) & 0x7ff;
	m = (bits & UINT64_C(0xfffffffffffff)) | ((uint64_t) (e != 0) << 52);
	/* sh = lsb - p, as unsigned: out of the window when above the span */
	sh = (e - (e != 0)) - (uint64_t) (int64_t) p;
	ok = (uint64_t) 0 - (uint64_t) (sh <= GC_WACC_SPAN);
	m &= ok;
	sh &= ok;
	tlo = m << (sh & 63);
	thi = (m >> ((64 - sh) & 63)) & ((uint64_t) 0 - (uint64_t) (sh != 0));
	/* two's complement of the term when v is negative */
	neg = (uint64_t) 0 - (bits >> 63);
	tlo ^= neg;
	thi ^= neg;
	lo = tlo + (neg & 1);
	thi += (uint64_t) (lo < tlo);
	tlo = lo;
	lo = w->lo + tlo;
	w->hi += thi + (uint64_t) (lo < tlo);
	w->lo = lo;
	return (int) (ok & 1) | ((bits << 1) == 0);
}

/*
 * Adds w (unit p, p + 4 * 32 < 32 * GC_SACC_CHUNKS) into a as one addition
 * of a digit per chunk, and clears w.
 */
static GC_HD void
gc_wacc_fold(gc_sacc *a, gc_wacc *w, int32_t p)
{
	uint64_t	lo = w->lo;
	uint64_t	hi = w->hi;
	int			negative = (int) (hi >> 63);
	int32_t		ci = p >> 5;
	int32_t		s = p & 31;
	uint64_t	w0,
				w1,
				w2;
	int64_t		dg[5];

	if ((lo | hi) == 0)
		return;
	if (negative)
	{
		/* the magnitude, below 2^127 */
		lo = ~lo + 1;
		hi = ~hi + (lo == 0);
	}
	w0 = lo << s;
	w1 = s == 0 ? hi : (hi << s) | (lo >> (64 - s));
	w2 = s == 0 ? 0 : hi >> (64 - s);
	dg[0] = (int64_t) (w0 & UINT64_C(0xffffffff));
	dg[1] = (int64_t) (w0 >> 32);
	dg[2] = (int64_t) (w1 & UINT64_C(0xffffffff));
	dg[3] = (int64_t) (w1 >> 32);
	dg[4] = (int64_t) w2;
	for (int32_t i = 0; i < 5; i++)
	{
		if (negative)
			a->c[ci + i] -= dg[i];
		else
			a->c[ci + i] += dg[i];
	}
	w->lo = 0;
	w->hi = 0;
}

/* ---------------------------------------------------------------- the nearest centroid */

/* Transposes the centroids [k, d] into cent [d, k]. */
static inline void
gc_kmeans_transpose(const double *cen, int32_t k, int32_t d, double *cent)
{
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cent[(int64_t) t * k + j] = cen[(int64_t) j * d + t];
}

/*
 * Always inlined on the host, so that a caller built for a wider vector unit
 * (a target attribute, chosen at run time) vectorizes the loop over centroids;
 * the bits are the same in every build, as no sum is reordered.
 */
#if defined(__GNUC__) && !defined(__CUDACC__)
#define GC_KMS_INLINE static inline __attribute__((always_inline))
#else
#define GC_KMS_INLINE static GC_HD
#endif

/*
 * The squared distances dist [k] of row [d] (double, or float converted
 * exactly) to k centroids (transposed, cent [d, k]): each summed over the
 * features in order, without fused multiply-add, as gc_dist2_f64 sums it.
 * The one loop of the CPU's exact search (src/core/kmeans.c, the k-means
 * step of src/kmeans_dist.c).
 */
GC_KMS_INLINE void
gc_kmeans_dist_f64(const double *GC_RESTRICT row, int32_t d, const double *GC_RESTRICT cent,
				   int32_t k, double *GC_RESTRICT dist)
{
	for (int32_t j = 0; j < k; j++)
		dist[j] = 0.0;
	for (int32_t t = 0; t < d; t++)
	{
		const double xt = row[t];
		const double *ct = cent + (int64_t) t * k;

		for (int32_t j = 0; j < k; j++)
		{
			double		diff = xt - ct[j];

			dist[j] += diff * diff;
		}
	}
}

/* The same for a row of single precision. */
GC_KMS_INLINE void
gc_kmeans_dist_f32(const float *GC_RESTRICT row, int32_t d, const double *GC_RESTRICT cent,
				   int32_t k, double *GC_RESTRICT dist)
{
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
}

/*
 * The nearest of k centroids (transposed, cent [d, k]) to row [d]: its
 * number, and its squared distance in *d2.  dist is scratch of k doubles.
 */
GC_KMS_INLINE int32_t
gc_kmeans_nearest(const double *GC_RESTRICT row, int32_t d, const double *GC_RESTRICT cent,
				  int32_t k, double *GC_RESTRICT dist, double *d2)
{
	int32_t		bj = 0;
	double		best;

	gc_kmeans_dist_f64(row, d, cent, k, dist);
	best = dist[0];
	for (int32_t j = 1; j < k; j++)
		if (dist[j] < best)
		{
			best = dist[j];
			bj = j;
		}
	*d2 = best;
	return bj;
}

/*
 * A Lloyd step's sums of one row, nearest to centroid j at squared distance
 * d2: row [d] into the cluster's sums [k, d] (when sums is not NULL), its
 * count and its sum of squared distances d2sum [k].
 */
static GC_HD void
gc_kmeans_step_add(const double *GC_RESTRICT row, int32_t d, int32_t j, double d2,
				   gc_sacc *sums, int64_t *counts, gc_sacc *d2sum)
{
	if (sums)
		for (int32_t t = 0; t < d; t++)
			gc_sacc_add(&sums[(int64_t) j * d + t], row[t]);
	counts[j]++;
	gc_sacc_add(&d2sum[j], d2);
}

/*
 * The draw of the row with id in round of a k-means|| seeding from seed: a
 * uniform double in [0, 1) that depends on nothing else, so that the same
 * rows draw the same numbers wherever they are stored and in whatever order
 * they are read.
 */
static GC_HD double
gc_kmeans_row_draw(uint64_t id, uint64_t seed, uint32_t round)
{
	uint64_t	h = gc_mix64(id ^ gc_mix64(seed ^ gc_mix64((uint64_t) round)));

	return (double) (h >> 11) * (1.0 / 9007199254740992.0);
}

#endif							/* GPUCLUST_KMEANS_STEP_H */
