/*
 * pair_engine.h
 *    The CPU back end's pair engine: the distances between blocks of rows
 *    as OpenBLAS products (GEMM tiles of a few megabytes, never an n x n
 *    matrix), each pair decided exactly by the screen of common/pairs.h or,
 *    inside its error band, by the canonical arithmetic (gc_dist2 or
 *    gc_dist2_f64).  DBSCAN and density peaks run their epilogues (counts,
 *    unions, nearest rows) over the tiles it hands out; cuda/pairs.cu is
 *    the same engine on the GPU.
 *
 * gc_pe_run cuts the rows into blocks of GC_PE_BI, hands each block to a
 * thread of the call's pool, and visits for it the column blocks of
 * GC_PE_BJ in ascending order: the product of the two blocks' operands,
 * then the caller's tile function, which reads each pair's verdict with
 * gc_pe_in.  Without OpenBLAS (or with gpuclust.cpu_blas off) no product
 * is computed and every pair takes the canonical path: the same answers,
 * more slowly.
 */
#ifndef GPUCLUST_PAIR_ENGINE_H
#define GPUCLUST_PAIR_ENGINE_H

#include <math.h>
#include <stdint.h>

#include "core.h"
#include "metric.h"
#include "pairs.h"

/*
 * Rows of a row block and columns of a column block (-D overrides them for
 * bench experiments; no answer depends on them).  A tile's float products
 * are 1.1 MB, about a core's L2; a taller block packs each column block for
 * OpenBLAS fewer times: on 60k x 64 rows (2 threads, bench/pairs_cpu_bench)
 * DBSCAN's CPU time is 22 % less than with 128 x 2048, and between 384 and
 * 1024 rows the shape matters within the noise.
 */
#ifndef GC_PE_BI
#define GC_PE_BI 384
#endif
#ifndef GC_PE_BJ
#define GC_PE_BJ 768
#endif

/* One prepared call of the engine; gc_pe_free frees it. */
typedef struct gc_pe
{
	gc_core_ctx *ctx;
	const void *x;				/* [n, d] the rows as given, of element type dtype */
	gc_dtype	dtype;
	int64_t		n;
	int32_t		d;
	double		t;				/* a pair is in when its dist2 <= t */
	gc_pair_precision prec;		/* of the operands and products */
	gc_pair_bound bound;
	int			products;		/* 0: no product, every pair exact */
	void	   *op;				/* [n, d] the operands (common/pairs.h), float or double */
	double	   *n2;				/* [n] squared norms of the operands */
	double	   *nx;				/* [n] their norms */
	void	  **prod;			/* [threads] a tile's products, [GC_PE_BI, GC_PE_BJ] each */
	int			threads;
	int64_t		exact;			/* pairs decided by the canonical path so far */
	double		s2inv;			/* 1 / s^2: scaled units back to dist2 (exact, s a power of two) */
	float	   *fg;				/* [n] the float pre-screen's column terms (FP32 screen), or NULL */
	float	   *fc;				/* [n] and its row terms (gc_pe_maybe) */
	int64_t		band_skipped;	/* pairs (of row blocks' rows and columns) gc_pe_run_band skipped */
} gc_pe;

/* One tile: rows [i0, i1) against columns [j0, j1), products row-major with leading dimension j1 - j0. */
typedef struct gc_pe_tile
{
	int64_t		i0,
				i1,
				j0,
				j1;
	const void *prod;
	int64_t		exact;			/* pairs of this tile sent to the canonical path */
} gc_pe_tile;

/*
 * A tile function: reads the tile's verdicts, writes only outputs of the
 * rows [i0, i1) or what is safe to share (atomics); sets *done when the row
 * block needs no further column block.
 */
typedef gc_status (*gc_pe_fn) (void *arg, gc_worker *w, gc_pe_tile *tile, int *done);

/*
 * Prepares the engine for the rows x [n, d] and the threshold t (a pair is
 * in when dist2 <= t): the operands, their norms, the precision of the
 * screen (common/pairs.h's choice between FP32 and FP64) and the bound.
 * margin scales the bound (1; 0 only for the mutation check).
 */
gc_status	gc_pe_prepare(gc_pe *pe, gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n,
						  int32_t d, double t);

/* Runs fn over every tile, row blocks in parallel, column blocks in ascending order. */
gc_status	gc_pe_run(gc_pe *pe, gc_pe_fn fn, void *arg);

/*
 * The same over the upper triangle: a row block's column blocks start at
 * its own first row (j0 = i0, i0 + GC_PE_BJ, ...), so that fn, looking at
 * the pairs j > i of each row, sees every unordered pair once.
 */
gc_status	gc_pe_run_upper(gc_pe *pe, gc_pe_fn fn, void *arg);

/*
 * An order of the rows x [n, d] in which the pairs within t lie near the
 * diagonal: perm [n] (position -> row) sorts the rows by their projection
 * onto a principal direction of a sample (power iteration), ties by row
 * (the projections on the call's threads, a radix sort);
 * key [n] gets the sorted projections and *err a bound on their error
 * (pair_engine.c, gc_pe_band_past).  Returns 0, with perm the identity and
 * no key, where a projection is not finite or d exceeds 2^20.
 */
int			gc_pe_order(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d, int64_t *perm,
						double *key, double *err);

/*
 * gc_pe_run_upper over rows in gc_pe_order's order: a row block stops at
 * the first column whose key is farther from the block's last row's than t
 * allows (every pair of the block with it and the columns after it is
 * provably out; the last tile ends there), so that fn sees every unordered
 * pair within t once.
 */
gc_status	gc_pe_run_band(gc_pe *pe, const double *key, double err, gc_pe_fn fn, void *arg);

/* Frees the engine's buffers. */
void		gc_pe_free(gc_pe *pe);

/* The canonical dist2 of rows i and j. */
static inline double
gc_pe_dist2(const gc_pe *pe, int64_t i, int64_t j)
{
	size_t		d = (size_t) pe->d;

	return pe->dtype == GC_F64
		? gc_dist2_f64((const double *) pe->x + (size_t) i * d, (const double *) pe->x + (size_t) j * d, pe->d)
		: gc_dist2((const float *) pe->x + (size_t) i * d, (const float *) pe->x + (size_t) j * d, pe->d);
}

/* The screened value A of rows i and j of a tile. */
static inline double
gc_pe_screened(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j)
{
	size_t		k = (size_t) (i - t->i0) * (size_t) (t->j1 - t->j0) + (size_t) (j - t->j0);
	double		p = pe->prec == GC_PAIR_FP64 ? ((const double *) t->prod)[k]
		: (double) ((const float *) t->prod)[k];

	return pe->n2[i] + pe->n2[j] - 2.0 * p;
}

/* The screen's verdict alone for rows i and j: 1 in, 0 out, -1 undecided (nothing computed exactly). */
static inline int
gc_pe_screen(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j)
{
	if (!pe->products)
		return -1;
	return gc_pair_decide(&pe->bound, gc_pe_screened(pe, t, i, j), pe->nx[i] + pe->nx[j]);
}

/*
 * A lower bound on the canonical dist2 of rows i and j (common/pairs.h:
 * s^2 R >= A - E), or -infinity where the screen cannot say.
 */
static inline double
gc_pe_lower(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j)
{
	double		v;

	if (!pe->products || !pe->bound.screen)
		return -INFINITY;
	v = gc_pe_screened(pe, t, i, j) - gc_pair_margin(&pe->bound, pe->nx[i] + pe->nx[j]);
	if (!(v == v))
		return -INFINITY;
	return v * (1 - 0x1p-50) * pe->s2inv;
}

/*
 * An upper bound on the canonical dist2 of rows i and j (common/pairs.h:
 * s^2 R <= A + E), or +infinity where the screen cannot say.
 */
static inline double
gc_pe_upper(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j)
{
	double		v;

	if (!pe->products || !pe->bound.screen)
		return INFINITY;
	v = gc_pe_screened(pe, t, i, j) + gc_pair_margin(&pe->bound, pe->nx[i] + pe->nx[j]);
	if (!(v == v))
		return INFINITY;
	return v * (1 + 0x1p-50) * pe->s2inv + 0x1p-1000;
}

/*
 * gc_pe_lower and gc_pe_upper for row i against every column of the tile,
 * into lo and hi [j1 - j0], in one vectorised loop; -infinity and
 * +infinity without products.
 */
void		gc_pe_bounds(const gc_pe *pe, const gc_pe_tile *t, int64_t i, double *lo, double *hi);

/*
 * Whether gc_pe_run_where computes the tile rows [i0, i1) x columns
 * [j0, j1): 0 skips it (neither its product nor the tile function).
 */
typedef int (*gc_pe_want_fn) (void *arg, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

/* gc_pe_run over the tiles that want accepts only. */
gc_status	gc_pe_run_where(gc_pe *pe, gc_pe_want_fn want, gc_pe_fn fn, void *arg);

/*
 * The screen's verdicts for row i against every column of the tile:
 * v [j1 - j0] gets 1 in, 0 out, -1 undecided (gc_pair_decide for each), in
 * one vectorised loop; all -1 without products.
 */
void		gc_pe_verdicts(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int8_t *v);

/*
 * The columns j in [j0, t->j1) of row i of a tile that the screen does not
 * decide "out", ascending: their offsets j - t->j0 into idx and their
 * verdicts (1 in, -1 undecided) into v, both [t->j1 - j0]; returns how
 * many.  The verdicts are gc_pe_verdicts' bit for bit; a pair left out is
 * one gc_pe_verdicts decides 0.  With the FP32 screen a float pre-screen
 * over the products (pair_engine.c, pe_keep_f32) drops most such pairs
 * before any verdict is computed: it drops only pairs whose verdict is
 * provably 0.
 */
int32_t		gc_pe_maybe(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j0, int32_t *idx,
						int8_t *v);

/* Whether rows i and j of a tile are within t (dist2 <= t), decided exactly. */
static inline int
gc_pe_in(const gc_pe *pe, gc_pe_tile *t, int64_t i, int64_t j)
{
	if (pe->products)
	{
		int			v = gc_pair_decide(&pe->bound, gc_pe_screened(pe, t, i, j), pe->nx[i] + pe->nx[j]);

		if (v >= 0)
			return v;
	}
	t->exact++;
	return gc_pe_dist2(pe, i, j) <= pe->t;
}

#endif							/* GPUCLUST_PAIR_ENGINE_H */
