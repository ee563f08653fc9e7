/*
 * sort.h
 *    A stable LSD radix sort of (key, value) pairs on the host, for the
 *    sorts that must answer a cancel request within milliseconds whatever
 *    their size: the re-seeding of empty k-means clusters
 *    (common/kmeans_init.h, both back ends), the density order of the CPU
 *    density peaks (and its choice of centres), the CPU DBSCAN's points by
 *    cell and its grid maps (common/dbscan_grid.h).  A comparison sort
 *    (qsort) cannot be interrupted; this one asks the cancel callback every
 *    GC_SORT_CANCEL_ITEMS items.
 *
 * Keys are uint64_t; gc_order_key maps a double to a key whose unsigned
 * order is the numeric order of the doubles, so that sorting ~key puts the
 * largest double first and, the sort being stable, equal doubles keep the
 * order of their values; gc_select_largest finds the m largest doubles
 * without sorting them.  Plain C that also compiles as C++; the keys also
 * on the device (the GPU DBSCAN sorts them with CUB).
 */
#ifndef GPUCLUST_SORT_H
#define GPUCLUST_SORT_H

#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "portable.h"

/* Bits of one digit of the radix sort: six passes cover 64 bits. */
#define GC_SORT_DIGIT_BITS		11
#define GC_SORT_PASSES			6
#define GC_SORT_BUCKETS			(1 << GC_SORT_DIGIT_BITS)
/* Items moved between two questions to the cancel callback. */
#define GC_SORT_CANCEL_ITEMS	(INT64_C(1) << 20)

/*
 * A key whose unsigned order is the order of the double v: -0.0 and +0.0
 * give the same key, negative numbers sort below positive ones.  (A NaN
 * with the sign bit clear sorts above +infinity, one with it set below
 * -infinity.)
 */
static GC_HD uint64_t
gc_order_key(double v)
{
	uint64_t	k;

	if (v == 0.0)
		v = 0.0;				/* -0.0 as +0.0 */
	memcpy(&k, &v, sizeof(k));
	return (k >> 63) ? ~k : k | (UINT64_C(1) << 63);
}

/* The double of a key of gc_order_key (+0.0 for either zero). */
static GC_HD double
gc_order_value(uint64_t k)
{
	uint64_t	u = (k >> 63) ? k & ~(UINT64_C(1) << 63) : ~k;
	double		v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

/* A key whose unsigned order puts the largest double first. */
static inline uint64_t
gc_desc_key(double v)
{
	return ~gc_order_key(v);
}

/* After a pass of a radix sort: the pass's output becomes the next pass's input. */
static inline void
gc_sort_swap(uint64_t **src_k, int64_t **src_v, uint64_t **dst_k, int64_t **dst_v)
{
	uint64_t   *k = *src_k;
	int64_t    *v = *src_v;

	*src_k = *dst_k;
	*src_v = *dst_v;
	*dst_k = k;
	*dst_v = v;
}

/* Bits a pass of the radix select, and its buckets. */
#define GC_SELECT_BITS			16
#define GC_SELECT_BUCKETS		(1 << GC_SELECT_BITS)

/*
 * The m largest of v[0..n-1], larger first and on a tie the lower index
 * (1 <= m <= n), by radix select over the keys gc_desc_key(v[i]), 16 bits a
 * pass: they are the i with gc_desc_key(v[i]) < *thr, and the first
 * *need_eq (in index order) with gc_desc_key(v[i]) == *thr.  hist is
 * scratch [GC_SELECT_BUCKETS].  Returns 0, or -1 when cancelled.
 */
static inline int
gc_select_largest(const double *v, int64_t n, int64_t m, int64_t *hist,
				  uint64_t *thr, int64_t *need_eq, gc_cancel_fn cancel, void *cancel_arg)
{
	uint64_t	prefix = 0;

	for (int pbits = 0; pbits < 64; pbits += GC_SELECT_BITS)
	{
		int			shift = 64 - pbits - GC_SELECT_BITS;
		int64_t		cum = 0,
					b;

		memset(hist, 0, sizeof(int64_t) * GC_SELECT_BUCKETS);
		for (int64_t i = 0; i < n; i++)
		{
			uint64_t	key = gc_desc_key(v[i]);

			if ((i & (GC_SORT_CANCEL_ITEMS - 1)) == 0 && cancel && cancel(cancel_arg))
				return -1;
			if (pbits > 0 && (key >> (64 - pbits)) != prefix)
				continue;
			hist[(key >> shift) & (GC_SELECT_BUCKETS - 1)]++;
		}
		for (b = 0; b < GC_SELECT_BUCKETS - 1; b++)
		{
			if (cum + hist[b] >= m)
				break;
			cum += hist[b];
		}
		m -= cum;
		prefix = (prefix << GC_SELECT_BITS) | (uint64_t) b;
	}
	*thr = prefix;
	*need_eq = m;
	return 0;
}

/*
 * Sorts the n pairs (keys[i], vals[i]) by key, ascending and stable, with
 * tk and tv [n] as scratch; the sorted pairs end in keys and vals.  One pass
 * counts every digit, then one pass per digit that is not the same in all
 * keys.  Returns 0, or -1 when the cancel callback answered yes (the
 * arrays then hold the pairs in some order).
 */
static inline int
gc_radix_sort(uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv, int64_t n,
			  gc_cancel_fn cancel, void *cancel_arg)
{
	int64_t		hist[GC_SORT_PASSES][GC_SORT_BUCKETS];
	uint64_t   *src_k = keys,
			   *dst_k = tk;
	int64_t    *src_v = vals,
			   *dst_v = tv;

	memset(hist, 0, sizeof(hist));
	for (int64_t i = 0; i < n; i++)
	{
		if ((i & (GC_SORT_CANCEL_ITEMS - 1)) == 0 && cancel && cancel(cancel_arg))
			return -1;
		for (int p = 0; p < GC_SORT_PASSES; p++)
			hist[p][(keys[i] >> (p * GC_SORT_DIGIT_BITS)) & (GC_SORT_BUCKETS - 1)]++;
	}
	for (int p = 0; p < GC_SORT_PASSES; p++)
	{
		int			shift = p * GC_SORT_DIGIT_BITS;
		int64_t		sum = 0;
		int			trivial = 0;

		for (int b = 0; b < GC_SORT_BUCKETS; b++)
		{
			int64_t		c = hist[p][b];

			trivial |= c == n;
			hist[p][b] = sum;
			sum += c;
		}
		if (trivial)
			continue;			/* every key has the same digit: nothing moves */
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		at;

			if ((i & (GC_SORT_CANCEL_ITEMS - 1)) == 0 && cancel && cancel(cancel_arg))
				return -1;
			at = hist[p][(src_k[i] >> shift) & (GC_SORT_BUCKETS - 1)]++;
			dst_k[at] = src_k[i];
			dst_v[at] = src_v[i];
		}
		gc_sort_swap(&src_k, &src_v, &dst_k, &dst_v);
	}
	if (src_k != keys && n > 0)
	{
		memcpy(keys, src_k, sizeof(uint64_t) * (size_t) n);
		memcpy(vals, src_v, sizeof(int64_t) * (size_t) n);
	}
	return 0;
}

#endif							/* GPUCLUST_SORT_H */
