/*
 * kmeans_gemm.c
 *    The nearest centroid through a checked matrix product (kmeans_gemm.h).
 *
 * Notation, for one row x and one centroid c (both as given, c in double):
 *   R    the exact search's distance: sum over t in order of
 *        (x_t - c_t)^2, each step rounded to double (kmeans.c, row_d2);
 *   D    ||x - c||^2 in exact arithmetic;
 *   xf   fl((x - mu) s), cf = fl((c - mu) s): the operands of the product,
 *        rounded to float (SGEMM, float rows) or double (DGEMM, double
 *        rows), s a power of two;
 *   nx   ||xf||, nc = ||cf||, S = nx + nc (as computed, in double);
 *   p    the product's xf.cf;  A = (||xf||^2 + ||cf||^2) - 2 p in double.
 * A, E and the comparisons between them are in the scaled units (times
 * s^2); R is not scaled (only R is compared with R).
 *
 * The bound, in the scaled units: |A - s^2 R| <= E with
 *   E = 2 (fa nx nc + fb S^2 + fc S + fd),
 *   fa = 2 g_d                                   the product
 *   fb = G_d + 8 u + e2 (2 + e2) + 2 G_{d+2} (1 + e2)^2
 *   fc = 3 t2,   fd = t2^2 (1 + 2 G_{d+2}) + the underflow terms
 * where u = 2^-53, G_n = n u / (1 - n u); g_d is G_d for the product's
 * unit roundoff (2^-24 for SGEMM, 2^-53 for DGEMM): the bound on a dot
 * product of d terms (Higham, "Accuracy and Stability of Numerical
 * Algorithms", section 3.1), |p - xf.cf| <= g_d sum |xf_t| |cf_t|
 * <= g_d nx nc, holds whatever the order of the sums and with or without
 * fused multiply-adds, so for any kernel OpenBLAS picks.
 *   - G_d S^2 covers the two norms (sums of d squares in double), 8 u S^2
 *     the roundings of A and of A -/+ E;
 *   - e = the relative error of one coordinate of xf or cf (2^-24 + 2^-53
 *     (1 + 2^-24) for float, 2^-53 for double), e2 = e / (1 - e), t2 the
 *     absolute part of that error (underflow) over d coordinates of both:
 *     ||xf - (x - mu) s|| + ||cf - (c - mu) s|| <= e2 S + t2 =: delta, and
 *     | ||xf - cf||^2 - s^2 D | <= delta (2 S + delta);
 *   - the exact search's own rounding, |R - D| <= G_{d+2} D (each of its d
 *     positive terms carries at most d + 2 roundings: the difference, which
 *     counts twice once squared, the square and up to d - 1 sums), with
 *     s^2 D <= (S + delta)^2;
 *   - the factor 2 covers the rounding of nx, nc and of E itself.
 * Every centroid j with A_j - E_j <= min_i (A_i + E_i) is a candidate; the
 * nearest ones (least R) are all candidates, so the least R among the
 * candidates, the lowest j on a tie, is the exact search's answer.  A row
 * whose winner's R is not finite (overflow), or whose nx is not finite or
 * above 2^50, gets the exact distance to every centroid instead.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "kmeans_gemm.h"

#define GC_KMG_RESTRICT __restrict__

/*
 * GCC vectorizes the loops over centroids below only when told (as kmeans.c's
 * kernels); on x86-64 they are also built for AVX2 and AVX-512 and the
 * loader picks the clone the CPU runs (no multiply-add is contracted in any
 * of them: -ffp-contract=off).
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KMG_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"), \
									 target_clones("avx512f", "avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define KMG_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define KMG_VECTORIZE
#endif

/* Rows whose scaled norm exceeds this get the exact search (the float product would overflow). */
#define KMG_ROW_LIMIT 0x1p50
/* Above this d the single-precision bound is not worth using (g_d nears 1). */
#define KMG_MAX_D (1 << 22)

struct gc_kmg
{
	int32_t		k;
	int32_t		d;
	gc_dtype	dtype;
	int			usable;			/* the product is used (else every row: exact search) */
	const double *cen;			/* [k, d] the caller's centroids */
	double	   *mu;				/* [d] */
	void	   *cs;				/* [k, d] fl((c - mu) s), float or double as the rows */
	double	   *cn2;			/* [k] ||cs||^2 */
	double	   *cn;				/* [k] ||cs|| */
	double		scale;			/* s */
	double		mu_scale;		/* s, applied to x - mu */
	double		inv_s2;			/* 1 / s^2 */
	double		fa,
				fb,
				fc,
				fd;				/* the bound's coefficients */
	/* E_j = e0 nx^2 + e1[j] nx + e2[j], the same bound expanded in nx */
	double		e0;
	double	   *e1;				/* [k] */
	double	   *e2;				/* [k] */
};

struct gc_kmg_scratch
{
	int32_t		batch;
	int32_t		k;
	int32_t		d;
	void	   *xs;				/* [batch, d] the batch's rows, centred and scaled */
	void	   *prod;			/* [batch, k] xs . cs */
	double	   *xn2;			/* [batch] ||xs||^2 */
	const void **rowp;			/* [batch] the rows as given */
	int32_t    *cstart;			/* [batch + 1] candidates of each row in cand_j */
	int32_t    *cand_q;			/* [batch k] */
	int32_t    *cand_j;			/* [batch k] */
	double	   *cand_d;			/* [batch k] their exact distances */
	double	   *lo;				/* [k] A - E of one row */
	double	   *hi;				/* [k] A + E of one row */
	double	   *nclo;			/* [batch] least A - E of a row's other centroids */
	unsigned char *full;		/* [batch] the row gets the exact search */
	double	   *dist;			/* [k] the exact search of one row */
};

static size_t
elem_size(gc_dtype dtype)
{
	return dtype == GC_F64 ? sizeof(double) : sizeof(float);
}

int32_t
gc_kmg_default_batch(int32_t k)
{
	int32_t		b = k > 0 ? (int32_t) (65536 / k) : 512;

	if (b < 64)
		b = 64;
	if (b > 512)
		b = 512;
	return b;
}

size_t
gc_kmg_bytes(int32_t k, int32_t d, gc_dtype dtype)
{
	return sizeof(gc_kmg) + sizeof(double) * (size_t) d
		+ (size_t) k * d * elem_size(dtype) + 4 * sizeof(double) * (size_t) k;
}

size_t
gc_kmg_scratch_bytes(int32_t k, int32_t d, gc_dtype dtype, int32_t batch)
{
	size_t		b = (size_t) (batch > 0 ? batch : gc_kmg_default_batch(k));

	return sizeof(gc_kmg_scratch) + b * (size_t) d * elem_size(dtype)
		+ b * (size_t) k * (elem_size(dtype) + 2 * sizeof(int32_t) + sizeof(double))
		+ b * (2 * sizeof(double) + sizeof(void *) + sizeof(int32_t) + 1)
		+ sizeof(int32_t) + 3 * sizeof(double) * (size_t) k;
}

gc_kmg *
gc_kmg_create(int32_t k, int32_t d, gc_dtype dtype)
{
	gc_kmg	   *p;

	if (k < 1 || d < 1)
		return NULL;
	p = calloc(1, sizeof(gc_kmg));
	if (!p)
		return NULL;
	p->k = k;
	p->d = d;
	p->dtype = dtype;
	p->mu = malloc(sizeof(double) * (size_t) d);
	p->cs = malloc((size_t) k * d * elem_size(dtype));
	p->cn2 = malloc(sizeof(double) * (size_t) k);
	p->cn = malloc(sizeof(double) * (size_t) k);
	p->e1 = malloc(sizeof(double) * (size_t) k);
	p->e2 = malloc(sizeof(double) * (size_t) k);
	if (!p->mu || !p->cs || !p->cn2 || !p->cn || !p->e1 || !p->e2)
	{
		gc_kmg_free(p);
		return NULL;
	}
	return p;
}

void
gc_kmg_free(gc_kmg *p)
{
	if (!p)
		return;
	free(p->mu);
	free(p->cs);
	free(p->cn2);
	free(p->cn);
	free(p->e1);
	free(p->e2);
	free(p);
}

/* n u / (1 - n u), Higham's gamma_n. */
static double
gamma_n(double n, double u)
{
	return n * u / (1.0 - n * u);
}

int
gc_kmg_prepare(gc_kmg *p, const double *cen, const double *mu)
{
	const int32_t k = p->k,
				d = p->d;
	const int	f32 = p->dtype != GC_F64;
	double		maxabs = 0.0;
	int			e = 0;

	p->cen = cen;
	p->usable = 0;
	for (int32_t t = 0; t < d; t++)
		p->mu[t] = mu ? mu[t] : 0.0;
	if (!gc_blas_available() || d > KMG_MAX_D)
		return 0;
	for (int32_t t = 0; t < d; t++)
		if (!isfinite(p->mu[t]))
			return 0;
	for (int64_t i = 0; i < (int64_t) k * d; i++)
	{
		double		v = fabs(cen[i] - p->mu[i % d]);

		if (!(v <= DBL_MAX))
			return 0;			/* not finite */
		if (v > maxabs)
			maxabs = v;
	}

	/* s: the centroids' largest coordinate in [0.5, 1), within 2^-500 .. 2^500 */
	if (maxabs > 0.0)
		frexp(maxabs, &e);
	if (e > 500)
		e = 500;
	if (e < -500)
		e = -500;
	p->scale = ldexp(1.0, -e);
	p->mu_scale = p->scale;
	p->inv_s2 = ldexp(1.0, 2 * e);

	for (int32_t j = 0; j < k; j++)
	{
		const double *c = cen + (int64_t) j * d;
		double		s2 = 0.0;

		if (f32)
		{
			float	   *o = (float *) p->cs + (int64_t) j * d;

			for (int32_t t = 0; t < d; t++)
			{
				o[t] = (float) ((c[t] - p->mu[t]) * p->scale);
				s2 += (double) o[t] * (double) o[t];
			}
		}
		else
		{
			double	   *o = (double *) p->cs + (int64_t) j * d;

			for (int32_t t = 0; t < d; t++)
			{
				o[t] = (c[t] - p->mu[t]) * p->scale;
				s2 += o[t] * o[t];
			}
		}
		p->cn2[j] = s2;
		p->cn[j] = sqrt(s2);
	}

	/* the bound's coefficients (see the top of the file) */
	{
		const double u = 0x1p-53;
		const double ug = f32 ? 0x1p-24 : u;
		const double umin = f32 ? 0x1p-150 : 0x1p-1074; /* an underflow's error in the operands */
		const double eta = f32 ? ug + u * (1.0 + ug) : u;
		const double e2 = eta / (1.0 - eta);
		const double tau = 2.0 * (umin + 0x1p-1074 * (p->scale + 1.0));
		const double t2 = 2.0 * sqrt((double) d) * tau / (1.0 - eta);
		const double gd = gamma_n(d, ug);
		const double Gd = gamma_n(d, u);
		const double GR = gamma_n((double) d + 2.0, u);
		const double s2 = p->scale * p->scale;

		p->fa = 2.0 * gd;
		p->fb = Gd + 8.0 * u + e2 * (2.0 + e2) + 2.0 * GR * (1.0 + e2) * (1.0 + e2);
		p->fc = 3.0 * t2;
		p->fd = t2 * t2 * (1.0 + 2.0 * GR)
			+ 2.0 * d * umin * (1.0 + gd)	/* underflow in the product */
			+ 2.0 * d * 0x1p-1074	/* in the norms */
			+ 4.0 * ((double) d + 2.0) * 0x1p-1074 * s2;	/* in the exact search */
	}

	/*
	 * 2 (fa nx nc + fb (nx + nc)^2 + fc (nx + nc) + fd) as a polynomial in nx
	 * (every term is positive: the order of the roundings changes E by a few
	 * units in the last place, well inside its factor 2)
	 */
	p->e0 = 2.0 * p->fb;
	for (int32_t j = 0; j < k; j++)
	{
		double		c = p->cn[j];

		p->e1[j] = 2.0 * (p->fa * c + 2.0 * p->fb * c + p->fc);
		p->e2[j] = 2.0 * (p->fb * c * c + p->fc * c + p->fd);
	}
	p->usable = 1;
	return 1;
}

gc_kmg_scratch *
gc_kmg_scratch_create(const gc_kmg *p, int32_t batch)
{
	gc_kmg_scratch *s = calloc(1, sizeof(gc_kmg_scratch));
	size_t		b,
				es = elem_size(p->dtype);

	if (!s)
		return NULL;
	if (batch <= 0)
		batch = gc_kmg_default_batch(p->k);
	b = (size_t) batch;
	s->batch = batch;
	s->k = p->k;
	s->d = p->d;
	s->xs = malloc(b * p->d * es);
	s->prod = malloc(b * p->k * es);
	s->xn2 = malloc(b * sizeof(double));
	s->rowp = malloc(b * sizeof(void *));
	s->cstart = malloc((b + 1) * sizeof(int32_t));
	s->cand_q = malloc(b * p->k * sizeof(int32_t));
	s->cand_j = malloc(b * p->k * sizeof(int32_t));
	s->cand_d = malloc(b * p->k * sizeof(double));
	s->lo = malloc((size_t) p->k * sizeof(double));
	s->hi = malloc((size_t) p->k * sizeof(double));
	s->nclo = malloc(b * sizeof(double));
	s->full = malloc(b);
	s->dist = malloc((size_t) p->k * sizeof(double));
	if (!s->xs || !s->prod || !s->xn2 || !s->rowp || !s->cstart || !s->cand_q || !s->cand_j ||
		!s->cand_d || !s->lo || !s->hi || !s->nclo || !s->full || !s->dist)
	{
		gc_kmg_scratch_free(s);
		return NULL;
	}
	return s;
}

void
gc_kmg_scratch_free(gc_kmg_scratch *s)
{
	if (!s)
		return;
	free(s->xs);
	free(s->prod);
	free(s->xn2);
	free(s->rowp);
	free(s->cstart);
	free(s->cand_q);
	free(s->cand_j);
	free(s->cand_d);
	free(s->lo);
	free(s->hi);
	free(s->nclo);
	free(s->full);
	free(s->dist);
	free(s);
}

int32_t
gc_kmg_batch(const gc_kmg_scratch *s)
{
	return s->batch;
}

/*
 * Exact distances of m pairs (row rowp[q[i]], centroid cen + j[i] d), as
 * row_d2 of kmeans.c: each summed over the features in order, no
 * multiply-add contracted.  Four pairs at a time, for the four independent
 * sums to overlap in the pipeline; each sum is still the same sequence of
 * roundings.
 */
#define EXACT_PAIRS(NAME, T) \
static void \
NAME(const void *const *rowp, const int32_t *q, const int32_t *j, int64_t m, \
	 const double *cen, int32_t d, double *out) \
{ \
	int64_t		i = 0; \
\
	for (; i + 4 <= m; i += 4) \
	{ \
		const T	   *r0 = (const T *) rowp[q[i]], \
				   *r1 = (const T *) rowp[q[i + 1]], \
				   *r2 = (const T *) rowp[q[i + 2]], \
				   *r3 = (const T *) rowp[q[i + 3]]; \
		const double *c0 = cen + (int64_t) j[i] * d, \
				   *c1 = cen + (int64_t) j[i + 1] * d, \
				   *c2 = cen + (int64_t) j[i + 2] * d, \
				   *c3 = cen + (int64_t) j[i + 3] * d; \
		double		s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0; \
\
		for (int32_t t = 0; t < d; t++) \
		{ \
			double		e0 = (double) r0[t] - c0[t], \
						e1 = (double) r1[t] - c1[t], \
						e2 = (double) r2[t] - c2[t], \
						e3 = (double) r3[t] - c3[t]; \
\
			s0 += e0 * e0; \
			s1 += e1 * e1; \
			s2 += e2 * e2; \
			s3 += e3 * e3; \
		} \
		out[i] = s0; \
		out[i + 1] = s1; \
		out[i + 2] = s2; \
		out[i + 3] = s3; \
	} \
	for (; i < m; i++) \
	{ \
		const T	   *r = (const T *) rowp[q[i]]; \
		const double *c = cen + (int64_t) j[i] * d; \
		double		s = 0.0; \
\
		for (int32_t t = 0; t < d; t++) \
		{ \
			double		e = (double) r[t] - c[t]; \
\
			s += e * e; \
		} \
		out[i] = s; \
	} \
}

EXACT_PAIRS(exact_pairs_f32, float)
EXACT_PAIRS(exact_pairs_f64, double)

static void
exact_pairs(const gc_kmg *p, const void *const *rowp, const int32_t *q, const int32_t *j,
			int64_t m, double *out)
{
	if (p->dtype == GC_F64)
		exact_pairs_f64(rowp, q, j, m, p->cen, p->d, out);
	else
		exact_pairs_f32(rowp, q, j, m, p->cen, p->d, out);
}

/*
 * The exact search of row q of the batch: its distance to every centroid,
 * the least (the first on a tie), and the second least, as kmeans.c's
 * assign_rows picks them.
 */
static void
full_search(const gc_kmg *p, gc_kmg_scratch *s, int32_t q, int32_t *label, double *best,
			double *second)
{
	const int32_t k = p->k;
	int32_t    *qq = s->cand_q,
			   *jj = s->cand_j;
	double		b,
				next = HUGE_VAL;
	int32_t		bj = 0;

	/* cand_q/cand_j are free once the batch's candidates are done */
	for (int32_t j = 0; j < k; j++)
	{
		qq[j] = q;
		jj[j] = j;
	}
	exact_pairs(p, s->rowp, qq, jj, k, s->dist);
	b = s->dist[0];
	for (int32_t j = 1; j < k; j++)
	{
		if (s->dist[j] < b)
		{
			next = b;
			b = s->dist[j];
			bj = j;
		}
		else if (s->dist[j] < next)
			next = s->dist[j];
	}
	*label = bj;
	*best = b;
	if (second)
		*second = next;
}

/* Centres, scales and rounds the batch's rows into s->xs with their squared norms; flags the unusable ones. */
static void
gather(const gc_kmg *p, gc_kmg_scratch *s, int32_t m)
{
	const int32_t d = p->d;
	const double sc = p->mu_scale;

	for (int32_t q = 0; q < m; q++)
	{
		/* four partial sums: the bound on ||xf||^2 holds for any order of the sum */
		double		n4[4] = {0.0, 0.0, 0.0, 0.0};
		double		n2;

		if (p->dtype == GC_F64)
		{
			const double *r = (const double *) s->rowp[q];
			double	   *o = (double *) s->xs + (int64_t) q * d;

			for (int32_t t = 0; t < d; t++)
			{
				o[t] = (r[t] - p->mu[t]) * sc;
				n4[t & 3] += o[t] * o[t];
			}
		}
		else
		{
			const float *r = (const float *) s->rowp[q];
			float	   *o = (float *) s->xs + (int64_t) q * d;

			for (int32_t t = 0; t < d; t++)
			{
				o[t] = (float) (((double) r[t] - p->mu[t]) * sc);
				n4[t & 3] += (double) o[t] * (double) o[t];
			}
		}
		n2 = (n4[0] + n4[1]) + (n4[2] + n4[3]);
		s->xn2[q] = n2;
		s->full[q] = !(n2 <= KMG_ROW_LIMIT * KMG_ROW_LIMIT);	/* also NaN */
		if (s->full[q])
		{
			/* the product must not see infinities: zero the row, its answer comes from full_search */
			if (p->dtype == GC_F64)
				memset((double *) s->xs + (int64_t) q * d, 0, sizeof(double) * (size_t) d);
			else
				memset((float *) s->xs + (int64_t) q * d, 0, sizeof(float) * (size_t) d);
		}
	}
}

/* lo = A - E and hi = A + E of one row against every centroid, from its products pr [k]. */
#define LOHI_BODY(T) \
	for (int32_t j = 0; j < k; j++) \
	{ \
		double		a = (xn2 + cn2[j]) - 2.0 * (double) pr[j]; \
		double		e = (e0 + e1[j] * nx) + e2[j]; \
\
		lo[j] = a - e; \
		hi[j] = a + e; \
	}

KMG_VECTORIZE static void
lohi_f32(const float *GC_KMG_RESTRICT pr, int32_t k, double xn2, double nx, double e0,
		 const double *GC_KMG_RESTRICT cn2, const double *GC_KMG_RESTRICT e1,
		 const double *GC_KMG_RESTRICT e2, double *GC_KMG_RESTRICT lo, double *GC_KMG_RESTRICT hi)
{
	LOHI_BODY(float)
}

KMG_VECTORIZE static void
lohi_f64(const double *GC_KMG_RESTRICT pr, int32_t k, double xn2, double nx, double e0,
		 const double *GC_KMG_RESTRICT cn2, const double *GC_KMG_RESTRICT e1,
		 const double *GC_KMG_RESTRICT e2, double *GC_KMG_RESTRICT lo, double *GC_KMG_RESTRICT hi)
{
	LOHI_BODY(double)
}

/*
 * The least of v [k], leaving out the values <= *skip when skip is not NULL
 * (none: none_value); in eight independent runs, not one chain.
 */
KMG_VECTORIZE static double
least(const double *GC_KMG_RESTRICT v, int32_t k, const double *skip, double none_value)
{
	double		m[8] = {HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL};
	const double lim = skip ? *skip : -HUGE_VAL;
	int32_t		j = 0;
	double		r;

	for (; j + 8 <= k; j += 8)
		for (int u = 0; u < 8; u++)
		{
			double		x = v[j + u] > lim ? v[j + u] : HUGE_VAL;

			m[u] = x < m[u] ? x : m[u];
		}
	for (; j < k; j++)
	{
		double		x = v[j] > lim ? v[j] : HUGE_VAL;

		m[0] = x < m[0] ? x : m[0];
	}
	r = m[0];
	for (int u = 1; u < 8; u++)
		r = m[u] < r ? m[u] : r;
	return r < HUGE_VAL ? r : none_value;
}

/*
 * The j with lo[j] <= lim, in order, into cj (and q into cq); returns their
 * number.  Few are: blocks of eight are tested at once and only a block
 * holding one is looked at value by value.
 */
KMG_VECTORIZE static int32_t
below(const double *GC_KMG_RESTRICT lo, int32_t k, double lim, int32_t q,
	  int32_t *GC_KMG_RESTRICT cq, int32_t *GC_KMG_RESTRICT cj)
{
	int32_t		c = 0;
	int32_t		j = 0;

	for (; j + 8 <= k; j += 8)
	{
		int			any = 0;

		for (int u = 0; u < 8; u++)
			any |= lo[j + u] <= lim;
		if (any)
			for (int u = 0; u < 8; u++)
				if (lo[j + u] <= lim)
				{
					cq[c] = q;
					cj[c] = j + u;
					c++;
				}
	}
	for (; j < k; j++)
		if (lo[j] <= lim)
		{
			cq[c] = q;
			cj[c] = j;
			c++;
		}
	return c;
}

/* Candidates of row q from its products: appends them to cand_q/cand_j; returns their number. */
static int32_t
candidates(const gc_kmg *p, gc_kmg_scratch *s, int32_t q, int32_t at)
{
	const int32_t k = p->k;
	const double xn2 = s->xn2[q];
	const double nx = sqrt(xn2);
	const double e0 = p->e0 * xn2;
	double		minhi = HUGE_VAL,
				nclo = HUGE_VAL;
	int32_t		c = 0;

	if (p->dtype == GC_F64)
		lohi_f64((const double *) s->prod + (int64_t) q * k, k, xn2, nx, e0, p->cn2, p->e1, p->e2,
				 s->lo, s->hi);
	else
		lohi_f32((const float *) s->prod + (int64_t) q * k, k, xn2, nx, e0, p->cn2, p->e1, p->e2,
				 s->lo, s->hi);
	minhi = least(s->hi, k, NULL, HUGE_VAL);
	c = below(s->lo, k, minhi, q, s->cand_q + at, s->cand_j + at);
	nclo = least(s->lo, k, &minhi, HUGE_VAL);
	s->nclo[q] = nclo;
	return c;
}

/* A lower bound in the caller's units from one in the scaled units, rounded down. */
static double
unscaled_lb(const gc_kmg *p, double lo)
{
	double		v;

	if (!(lo > 0.0))
		return 0.0;
	if (lo == HUGE_VAL)
		return HUGE_VAL;
	v = lo * p->inv_s2;
	/* below the normal range the product may have rounded up */
	return v >= 0x1p-1000 ? v * (1.0 - 0x1p-50) : 0.0;
}

/* One batch of m <= s->batch rows whose pointers are in s->rowp. */
static int64_t
assign_batch(const gc_kmg *p, gc_kmg_scratch *s, int32_t m, int32_t *label, double *best,
			 double *second_lb, gc_kmg_stats *st)
{
	const int32_t k = p->k,
				d = p->d;
	int64_t		exact = 0,
				multi = 0,
				full = 0;
	int32_t		ncand = 0;

	if (!p->usable)
	{
		for (int32_t q = 0; q < m; q++)
			full_search(p, s, q, label + q, best + q, second_lb ? second_lb + q : NULL);
		if (st)
		{
			st->rows += m;
			st->full += m;
			st->exact += (int64_t) m * k;
		}
		return (int64_t) m * k * d;
	}

	gather(p, s, m);
	if (p->dtype == GC_F64)
		gc_blas_dgemm_nt(m, k, d, (const double *) s->xs, (const double *) p->cs,
						 (double *) s->prod);
	else
		gc_blas_sgemm_nt(m, k, d, (const float *) s->xs, (const float *) p->cs, (float *) s->prod);

	for (int32_t q = 0; q < m; q++)
	{
		s->cstart[q] = ncand;
		if (!s->full[q])
			ncand += candidates(p, s, q, ncand);
	}
	s->cstart[m] = ncand;
	exact_pairs(p, s->rowp, s->cand_q, s->cand_j, ncand, s->cand_d);
	exact += ncand;

	for (int32_t q = 0; q < m; q++)
	{
		int32_t		c0 = s->cstart[q],
					c1 = s->cstart[q + 1];
		int32_t		bi;
		double		b,
					next;

		if (s->full[q])
			continue;
		multi += c1 - c0 > 1;
		bi = c0;
		b = s->cand_d[c0];
		for (int32_t c = c0 + 1; c < c1; c++)
			if (s->cand_d[c] < b)
			{
				b = s->cand_d[c];
				bi = c;
			}
		if (!isfinite(b))
		{
			s->full[q] = 1;		/* overflow: the bound does not hold */
			continue;
		}
		label[q] = s->cand_j[bi];
		best[q] = b;
		if (second_lb)
		{
			next = unscaled_lb(p, s->nclo[q]);
			for (int32_t c = c0; c < c1; c++)
				if (c != bi && s->cand_d[c] < next)
					next = s->cand_d[c];
			second_lb[q] = next;
		}
	}

	/* rows the product could not decide (cand_q/cand_j are reused from here) */
	for (int32_t q = 0; q < m; q++)
		if (s->full[q])
		{
			full_search(p, s, q, label + q, best + q, second_lb ? second_lb + q : NULL);
			full++;
			exact += k;
		}

	if (st)
	{
		st->rows += m;
		st->multi += multi;
		st->exact += exact;
		st->full += full;
	}
	return (int64_t) m * k * d + exact * d;
}

int64_t
gc_kmg_assign(const gc_kmg *p, gc_kmg_scratch *s, const void *x,
			  const int64_t *rows, int64_t from, int32_t count,
			  int32_t *label, double *best, double *second_lb, gc_kmg_stats *stats)
{
	const size_t row_bytes = (size_t) p->d * elem_size(p->dtype);
	int64_t		work = 0;

	for (int32_t q0 = 0; q0 < count; q0 += s->batch)
	{
		int32_t		m = count - q0 < s->batch ? count - q0 : s->batch;

		for (int32_t q = 0; q < m; q++)
		{
			int64_t		i = rows ? rows[q0 + q] : from + q0 + q;

			s->rowp[q] = (const char *) x + (size_t) i * row_bytes;
		}
		work += assign_batch(p, s, m, label + q0, best + q0,
							 second_lb ? second_lb + q0 : NULL, stats);
	}
	return work;
}
