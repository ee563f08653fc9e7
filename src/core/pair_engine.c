/*
 * pair_engine.c
 *    The CPU pair engine (pair_engine.h): operands, the screen's precision,
 *    and the tiles handed to the algorithms' epilogues, products through
 *    OpenBLAS (blas.h).
 *
 * The operands are the rows centred on each feature's median and scaled by
 * a power of two (gc_pair_centre of common/pairs.h): centring makes the
 * norms, and with them the error bound, as small as the data's spread
 * allows, and a far outlier moves neither.  A tile's products
 * are one SGEMM or DGEMM of GC_PE_BI rows against GC_PE_BJ columns on the
 * thread that owns the row block, so the threads never share a product
 * buffer.  The answers do not depend on the operands, the precision, the
 * tile sizes or the thread count: every verdict is exact.  Two prunings
 * with their own proofs: the float pre-screen (gc_pe_maybe) skips the
 * verdicts of pairs the screen decides out, and the band (gc_pe_order,
 * gc_pe_run_band) skips the products of column blocks that a projection
 * proves out of reach.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "pair_engine.h"

/* Coordinates of products between two looks at cancel (GEMM work is cheaper than the loops'). */
#define PE_CANCEL_EVERY ((int64_t) 1 << 27)

typedef struct pe_prep_job
{
	gc_pe	   *pe;
	const double *mu;			/* [d] */
	double		s;
} pe_prep_job;

/*
 * The float pre-screen (gc_pe_maybe, FP32 screen): a pair (i, q) whose
 * float product p has
 *
 *   2 p < fl(fc[i] + fg[q])
 *
 * is one the screen decides "out" (A - E > hi in pe_verdicts_f32's double
 * arithmetic), so that its verdict need not be computed.  The margin E(S),
 * S = a + b the two norms, is increasing in S and (a + b)^2 <= 2 a^2 + 2 b^2,
 * so E(S) <= e(a) + e'(b) with e(a) = 2 cS a^2 + cL a + c0 and
 * e'(b) = 2 cS b^2 + cL b.  The terms, rounded down to float, are
 *
 *   fg[q] = n2[q] - e'(b) - 2^-22 (n2[q] + e'(b)),
 *   fc[i] = n2[i] - e(a) - hi - 2^-22 (n2[i] + e(a) + |hi|);
 *
 * with X = n2[i] + n2[q] + e(a) + e'(b) + |hi|, the float sum of the two
 * is at most their exact sum plus 2^-24 (1 + 2^-22) X, so 2 p below it
 * gives A > E + hi + 2^-23 X exactly, a margin far wider than the double
 * roundings of A, S, E and A - E (a few units of 2^-52 X).  A non-finite
 * term is -infinity or NaN: the comparison is false and the pair is kept;
 * so is a pair whose product is NaN or whose 2 p overflows.  The float
 * arithmetic has no multiply-add to contract (an add, a doubling, a
 * comparison).
 */
static inline float
pe_float_below(double v)
{
	float		f = (float) v;

	if (v == v && (double) f > v)
		f = nextafterf(f, -INFINITY);
	return v == v ? f : -INFINITY;
}

static void
pe_prescreen_terms(gc_pe *pe, int64_t i)
{
	const gc_pair_bound *b = &pe->bound;
	double		a = pe->nx[i],
				a2 = pe->n2[i];
	double		ec = 2.0 * b->cS * (a * a) + b->cL * a;
	double		er = ec + b->c0;

	pe->fg[i] = pe_float_below(a2 - ec - 0x1p-22 * (a2 + ec));
	pe->fc[i] = pe_float_below(a2 - er - b->hi - 0x1p-22 * (a2 + er + fabs(b->hi)));
}

/* The operands and norms of rows [b, e). */
static gc_status
pe_prep_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	pe_prep_job *job = arg;
	gc_pe	   *pe = job->pe;
	int32_t		d = pe->d;

	for (int64_t i = b; i < e; i++)
	{
		double		s2 = 0.0;

		for (int32_t k = 0; k < d; k++)
		{
			double		y = (gc_pair_elem(pe->x, pe->dtype, d, i, k) - job->mu[k]) * job->s;

			if (pe->prec == GC_PAIR_FP64)
			{
				((double *) pe->op)[(size_t) i * d + k] = y;
				s2 += y * y;
			}
			else
			{
				float		f = (float) y;

				((float *) pe->op)[(size_t) i * d + k] = f;
				s2 += (double) f * (double) f;
			}
		}
		/* a row whose operands overflowed takes the canonical path for all its pairs */
		pe->n2[i] = isfinite(s2) ? s2 : INFINITY;
		pe->nx[i] = sqrt(pe->n2[i]);
		if (pe->fg)
			pe_prescreen_terms(pe, i);
	}
	return gc_worker_tick(w, (e - b) * d, PE_CANCEL_EVERY) ? GC_ERR_CANCELLED : GC_OK;
}

gc_status
gc_pe_prepare(gc_pe *pe, gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			  double t)
{
	const gc_tuning *tu = ctx->tuning;
	double	   *mu = NULL;
	double		s;
	double		s_typ;
	size_t		esize;
	pe_prep_job job;
	gc_status	st;
	double	   *col;

	memset(pe, 0, sizeof(*pe));
	pe->ctx = ctx;
	pe->x = x;
	pe->dtype = dtype;
	pe->n = n;
	pe->d = d;
	pe->t = t;
	pe->products = tu->cpu_blas >= 0 && gc_blas_available();
	pe->threads = gc_pool_threads(ctx->pool);

	mu = calloc((size_t) d, sizeof(double));
	col = malloc(sizeof(double) * GC_PAIR_SAMPLE);
	pe->n2 = malloc(sizeof(double) * (size_t) n);
	pe->nx = malloc(sizeof(double) * (size_t) n);
	if (!mu || !col || !pe->n2 || !pe->nx)
	{
		free(mu);
		free(col);
		return gc_core_oom(ctx, sizeof(double) * ((size_t) d + GC_PAIR_SAMPLE + 2 * (size_t) n),
						   "out of memory preparing the pair engine");
	}
	gc_pair_centre(x, dtype, n, d, mu, &s, &s_typ, col);
	free(col);
	esize = sizeof(float);
	if (tu->pair_screen > 0)
		pe->prec = (gc_pair_precision) (tu->pair_screen - 1);
	else
		pe->prec = gc_pair_choose(GC_PAIR_FP32, d, s, t, s_typ);
	if (pe->prec == GC_PAIR_TF32)
		pe->prec = GC_PAIR_FP32;	/* no tensor cores here: the IEEE product, a tighter bound */
	if (pe->prec == GC_PAIR_FP64)
		esize = sizeof(double);
	pe->bound = gc_pair_bound_make(pe->prec, d, s, t, tu->pair_margin);
	pe->s2inv = 1.0 / (s * s);

	if (pe->products)
	{
		pe->op = malloc(esize * (size_t) n * (size_t) d);
		pe->prod = calloc((size_t) pe->threads, sizeof(void *));
		if (!pe->op || !pe->prod)
		{
			free(mu);
			return gc_core_oom(ctx, esize * (size_t) n * (size_t) d,
							   "out of memory for the pair engine's operands");
		}
		if (pe->prec == GC_PAIR_FP32 && pe->bound.screen)
		{
			pe->fg = malloc(sizeof(float) * (size_t) n);
			pe->fc = malloc(sizeof(float) * (size_t) n);
			if (!pe->fg || !pe->fc)
			{
				free(mu);
				return gc_core_oom(ctx, 2 * sizeof(float) * (size_t) n,
								   "out of memory for the pair engine's pre-screen");
			}
		}
		for (int i = 0; i < pe->threads; i++)
			if (!(pe->prod[i] = malloc(esize * GC_PE_BI * GC_PE_BJ)))
			{
				free(mu);
				return gc_core_oom(ctx, esize * GC_PE_BI * GC_PE_BJ,
								   "out of memory for the pair engine's tiles");
			}
		job.pe = pe;
		job.mu = mu;
		job.s = s;
		st = gc_pool_for(ctx->pool, n, 1024, pe_prep_block, &job);
		if (st != GC_OK)
		{
			free(mu);
			return st;
		}
	}
	free(mu);
	ctx->timing->path = GC_PATH_PAIRS;
	ctx->timing->pair_screen = pe->prec;
	gc_core_debug(ctx, "pair engine: n=%lld d=%d screen=%s products=%s scale=%g s_typ=%g band(s_typ)=%g t=%g",
				  (long long) n, d, gc_pair_precision_names[pe->prec], pe->products ? "openblas" : "none",
				  s, s_typ, gc_pair_margin(&pe->bound, s_typ), t * s * s);
	return GC_OK;
}

/*
 * GCC vectorises the verdict loops only when told (as kmeans_gemm.c's); on
 * x86-64 they are also built for AVX2 and AVX-512 and the loader picks the
 * clone the CPU runs.  No multiply-add is contracted (-ffp-contract=off):
 * the margins are those of common/pairs.h, operation by operation.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define PE_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"), \
									target_clones("avx512f", "avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define PE_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define PE_VECTORIZE
#endif

PE_VECTORIZE
static void
pe_verdicts_f32(const double *restrict n2, const double *restrict nx, const float *restrict p,
				int64_t m, double n2i, double nxi, gc_pair_bound b, int8_t *restrict v)
{
	for (int64_t q = 0; q < m; q++)
	{
		double		A = n2i + n2[q] - 2.0 * (double) p[q];
		double		S = nxi + nx[q];
		double		E = (b.cS * S + b.cL) * S + b.c0;
		int8_t		in = (int8_t) (A + E < b.lo);
		int8_t		out = (int8_t) (A - E > b.hi);

		v[q] = (int8_t) (in - (1 - in) * (1 - out));
	}
}

PE_VECTORIZE
static void
pe_verdicts_f64(const double *restrict n2, const double *restrict nx, const double *restrict p,
				int64_t m, double n2i, double nxi, gc_pair_bound b, int8_t *restrict v)
{
	for (int64_t q = 0; q < m; q++)
	{
		double		A = n2i + n2[q] - 2.0 * p[q];
		double		S = nxi + nx[q];
		double		E = (b.cS * S + b.cL) * S + b.c0;
		int8_t		in = (int8_t) (A + E < b.lo);
		int8_t		out = (int8_t) (A - E > b.hi);

		v[q] = (int8_t) (in - (1 - in) * (1 - out));
	}
}

void
gc_pe_verdicts(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int8_t *v)
{
	int64_t		m = t->j1 - t->j0;
	size_t		off = (size_t) (i - t->i0) * (size_t) m;

	if (!pe->products || !pe->bound.screen)
	{
		memset(v, -1, (size_t) m);
		return;
	}
	if (pe->prec == GC_PAIR_FP64)
		pe_verdicts_f64(pe->n2 + t->j0, pe->nx + t->j0, (const double *) t->prod + off, m, pe->n2[i], pe->nx[i],
						pe->bound, v);
	else
		pe_verdicts_f32(pe->n2 + t->j0, pe->nx + t->j0, (const float *) t->prod + off, m, pe->n2[i], pe->nx[i],
						pe->bound, v);
}

/* The pre-screen's keep flags: 0 where 2 p < fl(c + g[q]) (the screen's verdict is 0), else 1. */
PE_VECTORIZE
static void
pe_keep_f32(const float *restrict g, const float *restrict p, int64_t m, float c, uint8_t *restrict k)
{
	for (int64_t q = 0; q < m; q++)
		k[q] = (uint8_t) !(2.0f * p[q] < c + g[q]);
}

/* pe_verdicts_f32's verdict for one pair, the same operations in the same order. */
static inline int8_t
pe_verdict_f32(double n2q, double nxq, float p, double n2i, double nxi, const gc_pair_bound *b)
{
	double		A = n2i + n2q - 2.0 * (double) p;
	double		S = nxi + nxq;
	double		E = (b->cS * S + b->cL) * S + b->c0;
	int8_t		in = (int8_t) (A + E < b->lo);
	int8_t		out = (int8_t) (A - E > b->hi);

	return (int8_t) (in - (1 - in) * (1 - out));
}

int32_t
gc_pe_maybe(const gc_pe *pe, const gc_pe_tile *t, int64_t i, int64_t j0, int32_t *idx, int8_t *v)
{
	int64_t		m = t->j1 - j0;
	int32_t		q0 = (int32_t) (j0 - t->j0);
	int32_t		c = 0;

	if (m <= 0)
		return 0;
	if (pe->products && pe->bound.screen && pe->prec == GC_PAIR_FP32 && pe->fg)
	{
		uint8_t		keep[GC_PE_BJ];
		const float *p = (const float *) t->prod + (size_t) (i - t->i0) * (size_t) (t->j1 - t->j0) + q0;
		const double *n2 = pe->n2 + j0,
				   *nx = pe->nx + j0;
		double		n2i = pe->n2[i],
					nxi = pe->nx[i];
		int64_t		q = 0;

		pe_keep_f32(pe->fg + j0, p, m, pe->fc[i], keep);
		/* eight flags at a time: most words are zero */
		for (; q + 8 <= m; q += 8)
		{
			uint64_t	w;

			memcpy(&w, keep + q, 8);
			while (w)
			{
				int64_t		r = q + (__builtin_ctzll(w) >> 3);
				int8_t		x = pe_verdict_f32(n2[r], nx[r], p[r], n2i, nxi, &pe->bound);

				w &= w - 1;
				if (x != 0)
				{
					idx[c] = q0 + (int32_t) r;
					v[c++] = x;
				}
			}
		}
		for (; q < m; q++)
			if (keep[q])
			{
				int8_t		x = pe_verdict_f32(n2[q], nx[q], p[q], n2i, nxi, &pe->bound);

				if (x != 0)
				{
					idx[c] = q0 + (int32_t) q;
					v[c++] = x;
				}
			}
		return c;
	}
	else
	{
		int8_t		all[GC_PE_BJ];

		gc_pe_verdicts(pe, t, i, all);
		for (int32_t q = q0; q < (int32_t) (t->j1 - t->j0); q++)
			if (all[q] != 0)
			{
				idx[c] = q;
				v[c++] = all[q];
			}
		return c;
	}
}

typedef struct pe_run_job
{
	gc_pe	   *pe;
	gc_pe_fn	fn;
	void	   *arg;
	int			upper;			/* column blocks from the row block's first row on */
	gc_pe_want_fn want;			/* NULL, or which tiles to compute (gc_pe_run_where) */
	const double *key;			/* NULL, or the band's sorted keys [n] (gc_pe_run_band) */
	double		key_err;
} pe_run_job;

/*
 * Whether every pair of rows i' <= i and columns j' >= j (positions in
 * gc_pe_order's order, keys ascending) is out: their canonical dist2 R > t.
 * With w the direction (not quite of unit length) and P the exact
 * projections w . x, |P_j - P_i| <= |w| |x_j - x_i| (Cauchy-Schwarz), and
 * key[j] - key[i] <= key[j'] - key[i'].  The difference of two keys is that
 * of the P within err (their sums' rounding, gamma_{d+2} sum |w_k x_k| each
 * over the largest such sum, gc_pe_order); the
 * difference's own rounding is covered by 2^-40 of the keys' magnitude, the
 * division by |w| (given 2^-40 above its computed value) and the square's
 * by the factors 1 -/+ 2^-40.  So h below is at most the exact distance
 * |x_j' - x_i'|, and the canonical R >= D (1 - gamma_{d+2}) (common/pairs.h)
 * exceeds h^2 (1 - 2^-30) for d <= 2^20: R > t when that is above t.
 */
static inline int
pe_band_past(const pe_run_job *job, int64_t i, int64_t j)
{
	const double *key = job->key;
	double		g = (key[j] - key[i]) - (job->key_err + 0x1p-40 * (fabs(key[j]) + fabs(key[i])));
	double		h;

	if (!(g > 0))
		return 0;
	h = g * (1 - 0x1p-40) / (1 + 0x1p-40);	/* |w| <= 1 + 2^-40, gc_pe_order */
	return h * h * (1 - 0x1p-30) > job->pe->t;
}

/* One row block against every column block, in ascending order. */
static gc_status
pe_run_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	pe_run_job *job = arg;
	gc_pe	   *pe = job->pe;

	for (int64_t blk = b; blk < e; blk++)
	{
		int64_t		i0 = blk * GC_PE_BI;
		int64_t		i1 = i0 + GC_PE_BI < pe->n ? i0 + GC_PE_BI : pe->n;
		int			done = 0;
		int64_t		jend = pe->n;

		if (job->key)
		{
			/* the band: the first column past the block's last row (pe_band_past grows with j) */
			int64_t		lo = i1,
						hi = pe->n;

			while (lo < hi)
			{
				int64_t		mid = lo + (hi - lo) / 2;

				if (pe_band_past(job, i1 - 1, mid))
					hi = mid;
				else
					lo = mid + 1;
			}
			jend = lo;
			__atomic_fetch_add(&pe->band_skipped, (pe->n - jend) * (i1 - i0), __ATOMIC_RELAXED);
		}
		for (int64_t j0 = job->upper ? i0 : 0; j0 < jend && !done; j0 += GC_PE_BJ)
		{
			gc_pe_tile	tile;
			gc_status	st;

			tile.i0 = i0;
			tile.i1 = i1;
			tile.j0 = j0;
			tile.j1 = j0 + GC_PE_BJ < jend ? j0 + GC_PE_BJ : jend;
			tile.exact = 0;
			tile.prod = NULL;
			if (job->want && !job->want(job->arg, i0, i1, j0, tile.j1))
			{
				if (gc_worker_tick(w, i1 - i0, PE_CANCEL_EVERY))
					return GC_ERR_CANCELLED;
				continue;
			}
			if (pe->products)
			{
				void	   *c = pe->prod[w->id];
				int			m = (int) (i1 - i0);
				int			nn = (int) (tile.j1 - j0);

				if (pe->prec == GC_PAIR_FP64)
					gc_blas_dgemm_nt(m, nn, pe->d, (const double *) pe->op + (size_t) i0 * pe->d,
									 (const double *) pe->op + (size_t) j0 * pe->d, (double *) c);
				else
					gc_blas_sgemm_nt(m, nn, pe->d, (const float *) pe->op + (size_t) i0 * pe->d,
									 (const float *) pe->op + (size_t) j0 * pe->d, (float *) c);
				tile.prod = c;
			}
			st = job->fn(job->arg, w, &tile, &done);
			if (tile.exact)
				__atomic_fetch_add(&pe->exact, tile.exact, __ATOMIC_RELAXED);
			if (st != GC_OK)
				return st;
			if (gc_worker_tick(w, (i1 - i0) * (tile.j1 - j0) * pe->d + tile.exact * pe->d * 8,
							   PE_CANCEL_EVERY))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

static gc_status
pe_run_keyed(gc_pe *pe, gc_pe_want_fn want, gc_pe_fn fn, void *arg, int upper, const double *key,
			 double key_err)
{
	pe_run_job	job;
	int64_t		blocks = (pe->n + GC_PE_BI - 1) / GC_PE_BI;
	gc_status	st;

	if (gc_core_cancelled(pe->ctx))
		return GC_ERR_CANCELLED;
	job.pe = pe;
	job.fn = fn;
	job.arg = arg;
	job.upper = upper;
	job.want = want;
	job.key = key;
	job.key_err = key_err;
	st = gc_pool_for(pe->ctx->pool, blocks, 1, pe_run_block, &job);
	pe->ctx->timing->pair_exact = pe->exact;
	return st;
}

static gc_status
pe_run(gc_pe *pe, gc_pe_want_fn want, gc_pe_fn fn, void *arg, int upper)
{
	return pe_run_keyed(pe, want, fn, arg, upper, NULL, 0.0);
}

gc_status
gc_pe_run_band(gc_pe *pe, const double *key, double err, gc_pe_fn fn, void *arg)
{
	return pe_run_keyed(pe, NULL, fn, arg, 1, key, err);
}

gc_status
gc_pe_run(gc_pe *pe, gc_pe_fn fn, void *arg)
{
	return pe_run(pe, NULL, fn, arg, 0);
}

gc_status
gc_pe_run_upper(gc_pe *pe, gc_pe_fn fn, void *arg)
{
	return pe_run(pe, NULL, fn, arg, 1);
}

void
gc_pe_free(gc_pe *pe)
{
	if (pe->prod)
		for (int i = 0; i < pe->threads; i++)
			free(pe->prod[i]);
	free(pe->prod);
	free(pe->op);
	free(pe->n2);
	free(pe->nx);
	free(pe->fg);
	free(pe->fc);
	memset(pe, 0, sizeof(*pe));
}

/* ---------------------------------------------------------------- bounds and chosen tiles */

PE_VECTORIZE
static void
pe_bounds_f32(const double *restrict n2, const double *restrict nx, const float *restrict p, int64_t m,
			  double n2i, double nxi, gc_pair_bound b, double s2inv, double *restrict lo, double *restrict hi)
{
	for (int64_t q = 0; q < m; q++)
	{
		double		A = n2i + n2[q] - 2.0 * (double) p[q];
		double		S = nxi + nx[q];
		double		E = (b.cS * S + b.cL) * S + b.c0;
		double		l = A - E,
					h = A + E;

		lo[q] = l == l ? l * (1 - 0x1p-50) * s2inv : -INFINITY;
		hi[q] = h == h ? h * (1 + 0x1p-50) * s2inv + 0x1p-1000 : INFINITY;
	}
}

PE_VECTORIZE
static void
pe_bounds_f64(const double *restrict n2, const double *restrict nx, const double *restrict p, int64_t m,
			  double n2i, double nxi, gc_pair_bound b, double s2inv, double *restrict lo, double *restrict hi)
{
	for (int64_t q = 0; q < m; q++)
	{
		double		A = n2i + n2[q] - 2.0 * p[q];
		double		S = nxi + nx[q];
		double		E = (b.cS * S + b.cL) * S + b.c0;
		double		l = A - E,
					h = A + E;

		lo[q] = l == l ? l * (1 - 0x1p-50) * s2inv : -INFINITY;
		hi[q] = h == h ? h * (1 + 0x1p-50) * s2inv + 0x1p-1000 : INFINITY;
	}
}

void
gc_pe_bounds(const gc_pe *pe, const gc_pe_tile *t, int64_t i, double *lo, double *hi)
{
	int64_t		m = t->j1 - t->j0;
	size_t		off = (size_t) (i - t->i0) * (size_t) m;

	if (!pe->products || !pe->bound.screen)
	{
		for (int64_t q = 0; q < m; q++)
		{
			lo[q] = -INFINITY;
			hi[q] = INFINITY;
		}
		return;
	}
	if (pe->prec == GC_PAIR_FP64)
		pe_bounds_f64(pe->n2 + t->j0, pe->nx + t->j0, (const double *) t->prod + off, m, pe->n2[i], pe->nx[i],
					  pe->bound, pe->s2inv, lo, hi);
	else
		pe_bounds_f32(pe->n2 + t->j0, pe->nx + t->j0, (const float *) t->prod + off, m, pe->n2[i], pe->nx[i],
					  pe->bound, pe->s2inv, lo, hi);
}

gc_status
gc_pe_run_where(gc_pe *pe, gc_pe_want_fn want, gc_pe_fn fn, void *arg)
{
	return pe_run(pe, want, fn, arg, 0);
}

/* ---------------------------------------------------------------- the band's order */

/* Rows of the sample and steps of the power iteration of gc_pe_order. */
#define PE_ORDER_SAMPLE 1024
#define PE_ORDER_STEPS 12

typedef struct pe_order_job
{
	const void *x;
	gc_dtype	dtype;
	int32_t		d;
	const double *w;			/* [d] the direction */
	uint64_t   *skey;			/* [n] the keys as unsigned integers in the keys' order */
	double	   *amax;			/* [threads] the largest sum |w_k x_k| a thread met */
	int			bad;			/* a key or a sum was not finite */
} pe_order_job;

/* The keys of rows [b, e): each row's projection in double, and the largest sum |w_k x_k|. */
static gc_status
pe_order_block(void *arg, gc_worker *wk, int64_t b, int64_t e)
{
	pe_order_job *job = arg;
	double		amax = job->amax[wk->id];

	for (int64_t i = b; i < e; i++)
	{
		double		v = 0.0,
					a = 0.0;
		uint64_t	u;

		for (int32_t k = 0; k < job->d; k++)
		{
			double		el = gc_pair_elem(job->x, job->dtype, job->d, i, k);

			v += job->w[k] * el;
			a += fabs(job->w[k] * el);
		}
		if (!isfinite(v) || !isfinite(a))
			__atomic_store_n(&job->bad, 1, __ATOMIC_RELAXED);
		amax = a > amax ? a : amax;
		/* the order of doubles as the order of unsigned integers (-0 before +0: any order of ties will do) */
		memcpy(&u, &v, sizeof(u));
		job->skey[i] = (u >> 63) ? ~u : u | ((uint64_t) 1 << 63);
	}
	job->amax[wk->id] = amax;
	return GC_OK;
}

int
gc_pe_order(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d, int64_t *perm, double *key,
			double *err)
{
	int64_t		m = n < PE_ORDER_SAMPLE ? n : PE_ORDER_SAMPLE;
	int			threads = gc_pool_threads(ctx->pool);
	double	   *w = malloc(sizeof(double) * (size_t) d);
	double	   *mu = calloc((size_t) d, sizeof(double));
	double	   *y = malloc(sizeof(double) * (size_t) m);
	double	   *acc = malloc(sizeof(double) * (size_t) d);
	double	   *amax = calloc((size_t) threads, sizeof(double));
	uint64_t   *skey = malloc(sizeof(uint64_t) * (size_t) n);
	uint64_t   *skey2 = malloc(sizeof(uint64_t) * (size_t) n);
	int64_t    *perm2 = malloc(sizeof(int64_t) * (size_t) n);
	uint32_t   *count = malloc(sizeof(uint32_t) * 65536);
	double		wn = 0.0,
				am = 0.0;
	int			ok = w && mu && y && acc && amax && skey && skey2 && perm2 && count &&
		d <= (1 << 20) && n >= 2 && n < ((int64_t) 1 << 32);
	pe_order_job job;

	for (int64_t i = 0; i < n; i++)
		perm[i] = i;
	/*
	 * the direction: power iteration on the sample's covariance (rows at a
	 * fixed stride, centred on their mean) from a fixed start; only the
	 * pruning depends on it, never an answer
	 */
	for (int64_t s = 0; ok && s < m; s++)
		for (int32_t k = 0; k < d; k++)
			mu[k] += gc_pair_elem(x, dtype, d, s * (n / m), k) / (double) m;
	for (int32_t k = 0; ok && k < d; k++)
		w[k] = 1.0 + (double) ((k * 7919) % 13) / 13.0;
	for (int step = 0; ok && step < PE_ORDER_STEPS; step++)
	{
		double		nn = 0.0;

		memset(acc, 0, sizeof(double) * (size_t) d);
		for (int64_t s = 0; s < m; s++)
		{
			double		v = 0.0;

			for (int32_t k = 0; k < d; k++)
				v += (gc_pair_elem(x, dtype, d, s * (n / m), k) - mu[k]) * w[k];
			y[s] = v;
		}
		for (int64_t s = 0; s < m; s++)
			for (int32_t k = 0; k < d; k++)
				acc[k] += (gc_pair_elem(x, dtype, d, s * (n / m), k) - mu[k]) * y[s];
		for (int32_t k = 0; k < d; k++)
			nn += acc[k] * acc[k];
		nn = sqrt(nn);
		if (!(nn > 0) || !isfinite(nn))
			break;				/* the sample has no spread: keep the last direction */
		for (int32_t k = 0; k < d; k++)
			w[k] = acc[k] / nn;
	}
	/*
	 * the band's test divides by 1 + 2^-40, which must bound |w|: w, of unit
	 * length up to its rounding, shrunk by 2^-30 and checked (|w|^2 <= wn
	 * (1 + gamma_{d+2}) for the rounded sum wn, d <= 2^20)
	 */
	for (int32_t k = 0; ok && k < d; k++)
	{
		w[k] *= 1 - 0x1p-30;
		wn += w[k] * w[k];
	}
	ok = ok && isfinite(wn) && wn > 0.25 && sqrt(wn) * (1 + 4 * gc_pair_gamma((double) d + 2, 0x1p-53)) <= 1.0;
	if (ok)
	{
		job.x = x;
		job.dtype = dtype;
		job.d = d;
		job.w = w;
		job.skey = skey;
		job.amax = amax;
		job.bad = 0;
		ok = gc_pool_for(ctx->pool, n, 4096, pe_order_block, &job) == GC_OK && !job.bad;
	}
	if (ok)
	{
		/* a stable radix sort of the keys, 16 bits a pass: ties stay in row order */
		uint64_t   *ks = skey,
				   *kd = skey2;
		int64_t    *ps = perm,
				   *pd = perm2;

		for (int pass = 0; pass < 4; pass++)
		{
			int			sh = 16 * pass;
			uint32_t	sum = 0;

			memset(count, 0, sizeof(uint32_t) * 65536);
			for (int64_t i = 0; i < n; i++)
				count[(ks[i] >> sh) & 0xffff]++;
			for (int c = 0; c < 65536; c++)
			{
				uint32_t	t = count[c];

				count[c] = sum;
				sum += t;
			}
			for (int64_t i = 0; i < n; i++)
			{
				uint32_t	at = count[(ks[i] >> sh) & 0xffff]++;

				kd[at] = ks[i];
				pd[at] = ps[i];
			}
			{
				uint64_t   *t = ks;

				ks = kd;
				kd = t;
			}
			{
				int64_t    *t = ps;

				ps = pd;
				pd = t;
			}
		}
		/* four passes: the sorted keys and rows are back in skey and perm */
		for (int64_t i = 0; i < n; i++)
		{
			uint64_t	u = ks[i];
			double		v;

			u = (u >> 63) ? u & ~((uint64_t) 1 << 63) : ~u;
			memcpy(&v, &u, sizeof(v));
			key[i] = v;
		}
		for (int t = 0; t < threads; t++)
			am = amax[t] > am ? amax[t] : am;

		/*
		 * gamma_{d+2} sum |w_k x_k| for each of the two keys, and twice that
		 * for amax's own rounding (amax >= the exact largest sum (1 - gamma_d))
		 */
		*err = 4.0 * gc_pair_gamma((double) d + 2, 0x1p-53) * am + 0x1p-1000;
		ok = isfinite(*err);
	}
	free(w);
	free(mu);
	free(y);
	free(acc);
	free(amax);
	free(skey);
	free(skey2);
	free(perm2);
	free(count);
	if (!ok)
		for (int64_t i = 0; i < n; i++)
			perm[i] = i;
	return ok;
}
