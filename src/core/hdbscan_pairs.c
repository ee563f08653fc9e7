/*
 * hdbscan_pairs.c
 *    HDBSCAN's core distances and minimum spanning tree on the CPU pair
 *    engine (pair_engine.h), for many features (gc_hdbscan_pairs_chosen of
 *    common/pairs.h), where the k-d tree of hdbscan.c prunes nothing: the
 *    distances between blocks of rows as matrix products, each distance
 *    that can enter the answer recomputed in the canonical arithmetic
 *    (gc_pe_dist2), so the answer is the tree's, bit for bit.
 *
 * Core distances: a k-nearest epilogue over the tiles.  Each row keeps the
 * kk = min_samples + 1 least exact dist2 seen so far (kk = min_samples when
 * that is every row).  In a tile, the kk-th least of those kept and of the
 * tile's upper bounds (gc_pe_upper) bounds the row's final kk-th dist2 from
 * above; only the columns whose lower bound (gc_pe_lower) is not above it
 * are computed exactly, and none of the others can be among the kk least.
 * The kk least values are exact whatever the ties, so the core distance is.
 *
 * The spanning tree: Boruvka's rounds, each a "least edge to another
 * component" epilogue under mutual reachability max(core_i, core_j, d_ij)
 * and the order of edges of common/hdbscan.h (weight, lower row, higher
 * row; gc_hdbscan_edge_less), whose minimum spanning tree is unique, so it
 * is the tree's.  As in hdbscan.c: the first round takes a row's least edge
 * from its kk nearest where it weighs the row's core distance and they are
 * every row within it; each component's bound starts at the least edge of
 * the round before that still leaves it, and every edge found lowers it
 * (shared by the threads); a row whose proved lower bound (its core
 * distance, raised by what its last full search proved) is above its
 * component's bound is not searched.  A full search also proves the least
 * max(core2_j, screened lower bound) over the other components' rows j,
 * which stays a bound while components only merge, and rows deep inside a
 * component stop being searched.  Each round the rows to search come
 * first, then the others, each part in the order of the components, and
 * the engine is prepared on that order: the row blocks past the rows to
 * search and the tiles whose rows and columns all lie in one component are
 * skipped whole (gc_pe_run_where), and a row skips its own component's
 * columns.
 *
 * Memory is linear in the rows: a copy of the rows in the round's order,
 * the engine's operands, and at most HP_NBR_MAX neighbours a row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hdbscan_pairs.h"
#include "metric.h"
#include "pair_engine.h"

/* The largest min_samples + 1 whose neighbours are kept for the first round. */
#define HP_NBR_MAX 33
/* Rows of the sample that sets the screen's precision (hp_screen_t). */
#define HP_SAMPLE 256

typedef struct hp_ws
{
	gc_core_ctx *ctx;
	const gc_hdbscan_params *p;
	gc_metric	metric;
	const void *x;				/* [n, d] the caller's rows */
	gc_dtype	dtype;
	int64_t		n;
	int32_t		d;
	int32_t		k;				/* min_samples */
	int32_t		kk;				/* values kept a row: k + 1, or k when that is every row */
	int			threads;
	gc_pe		pe;
	/* the core pass: per thread */
	double	   *heap;			/* [threads, GC_PE_BI, kk] max-heaps of exact dist2 */
	int32_t    *hpos;			/* [threads, GC_PE_BI, kk] their rows */
	int32_t    *hfill;			/* [threads, GC_PE_BI] */
	double	   *uh;				/* [threads, kk] the heap of upper bounds */
	double	   *blo;			/* [threads, GC_PE_BJ] a tile row's lower bounds */
	double	   *bhi;			/* [threads, GC_PE_BJ] and upper bounds */
	/* by row */
	double	   *core;			/* [n] core distances */
	double	   *core2;			/* [n] their dist2 */
	int32_t    *nbr;			/* [n, kk] the kk nearest, for the first round; NULL: not kept */
	uint8_t    *ball;			/* [n] 1: nbr holds every row within the core distance */
	double	   *lb;				/* [n] a lower bound of the weight of the row's edges to other components */
	double	   *best_w;			/* [n] the row's least edge to another component this round */
	int32_t    *best_lo;
	int32_t    *best_hi;
	int32_t    *best_q;			/* the other end (a row), -1: none */
	int32_t    *comp;			/* [n] the component (its least row) */
	uint64_t   *comp_bound;		/* [n] per component: bits of the least weight found this round */
	/* by position in the round's order */
	int32_t    *row;			/* [n] position -> row */
	int32_t    *pcomp;			/* [n] */
	double	   *pcore;			/* [n] */
	double	   *pc2;			/* [n] core dist2 */
	int64_t    *seg0;			/* [n] the first position of the run of the position's component */
	uint8_t    *act;			/* [n] 1: searched this round */
	double	   *gwmin;			/* [n] the least component bound the search saw; -1: cut short */
	double	   *kmin;			/* [n] the least max(core2_j, lower bound) over other components' j */
	int64_t		nact;			/* rows searched this round: positions [0, nact) */
	/* by component: its rows to search [sa0, sa1) and the others [sb0, sb1), in positions */
	int64_t    *sa0;
	int64_t    *sa1;
	int64_t    *sb0;
	int64_t    *sb1;
	void	   *xs;				/* [n, d] the rows in the round's order */
	uint8_t    *done;			/* [n] by row: the first round's least edge found from the lists */
	int64_t		evals;			/* distances of the first round's lists */
} hp_ws;

/* The canonical dist2 of rows a and b of the caller's rows. */
static inline double
hp_dist2(const hp_ws *ws, int64_t a, int64_t b)
{
	size_t		d = (size_t) ws->d;

	return ws->dtype == GC_F64
		? gc_dist2_f64((const double *) ws->x + (size_t) a * d, (const double *) ws->x + (size_t) b * d, ws->d)
		: gc_dist2((const float *) ws->x + (size_t) a * d, (const float *) ws->x + (size_t) b * d, ws->d);
}

/* Pushes v (and its row, when pos is given) onto the max-heap h of *f values. */
static inline void
hp_heap_push(double *h, int32_t *pos, int32_t *f, double v, int32_t r)
{
	int32_t		c = (*f)++;

	while (c > 0 && h[(c - 1) / 2] < v)
	{
		int32_t		up = (c - 1) / 2;

		h[c] = h[up];
		if (pos)
			pos[c] = pos[up];
		c = up;
	}
	h[c] = v;
	if (pos)
		pos[c] = r;
}

/* Replaces the top of the max-heap h of f values by v (and its row) and sifts it down. */
static inline void
hp_heap_top(double *h, int32_t *pos, int32_t f, double v, int32_t r)
{
	int32_t		i = 0;

	for (;;)
	{
		int32_t		l = 2 * i + 1,
					m = l;

		if (l >= f)
			break;
		if (l + 1 < f && h[l + 1] > h[l])
			m = l + 1;
		if (h[m] <= v)
			break;
		h[i] = h[m];
		if (pos)
			pos[i] = pos[m];
		i = m;
	}
	h[i] = v;
	if (pos)
		pos[i] = r;
}

/*
 * The threshold the engine is prepared with, which sets only the precision
 * of its screen (common/pairs.h, gc_pair_choose): the median, over a sample
 * of rows, of the least positive dist2 to the others of the sample, a
 * scale of the distances the searches decide; 1 when there is none.  The
 * answers never depend on it.
 */
static double
hp_screen_t(const hp_ws *ws)
{
	int64_t		m = ws->n < HP_SAMPLE ? ws->n : HP_SAMPLE,
				step = ws->n / m,
				got = 0;
	double		near[HP_SAMPLE];

	for (int64_t a = 0; a < m; a++)
	{
		double		best = INFINITY;

		for (int64_t b = 0; b < m; b++)
		{
			double		d2 = b == a ? 0.0 : hp_dist2(ws, a * step, b * step);

			if (d2 > 0 && d2 < best)
				best = d2;
		}
		if (isfinite(best))
			near[got++] = best;
	}
	return got > 0 ? gc_pair_select(near, got, got / 2) : 1.0;
}

/* ---------------------------------------------------------------- core distances */

/* The k-nearest epilogue of one tile (see the top); a row's last tile sets its core distance. */
static gc_status
hp_core_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	hp_ws	   *ws = (hp_ws *) arg;
	const gc_pe *pe = &ws->pe;
	int32_t		kk = ws->kk;
	int64_t		m = t->j1 - t->j0;
	double	   *lo = ws->blo + (size_t) w->id * GC_PE_BJ,
			   *hi = ws->bhi + (size_t) w->id * GC_PE_BJ,
			   *uh = ws->uh + (size_t) w->id * kk;

	(void) done;
	for (int64_t i = t->i0; i < t->i1; i++)
	{
		size_t		r = (size_t) w->id * GC_PE_BI + (size_t) (i - t->i0);
		double	   *h = ws->heap + r * kk;
		int32_t    *hp = ws->hpos + r * kk;
		int32_t		f = t->j0 == 0 ? 0 : ws->hfill[r],
					uf = f;
		double		tau;

		gc_pe_bounds(pe, t, i, lo, hi);
		/* the kk-th least of the kept values and the tile's upper bounds */
		memcpy(uh, h, sizeof(double) * (size_t) f);
		for (int64_t q = 0; q < m; q++)
		{
			if (uf < kk)
				hp_heap_push(uh, NULL, &uf, hi[q], 0);
			else if (hi[q] < uh[0])
				hp_heap_top(uh, NULL, uf, hi[q], 0);
		}
		tau = uf == kk ? uh[0] : INFINITY;
		for (int64_t q = 0; q < m; q++)
		{
			double		d2;

			if (lo[q] > tau)
				continue;
			t->exact++;
			d2 = gc_pe_dist2(pe, i, t->j0 + q);
			if (f < kk)
				hp_heap_push(h, hp, &f, d2, (int32_t) (t->j0 + q));
			else if (d2 < h[0])
				hp_heap_top(h, hp, f, d2, (int32_t) (t->j0 + q));
		}
		ws->hfill[r] = f;
		if (t->j1 == ws->n)
		{
			double		core2,
						next2 = INFINITY;

			if (kk > ws->k)
			{
				/* the root is the (k + 1)-th; the k-th is the larger of its children */
				next2 = h[0];
				core2 = kk == 2 || h[1] >= h[2] ? h[1] : h[2];
			}
			else
				core2 = h[0];
			ws->core[i] = gc_metric_distance(ws->metric, core2);
			ws->core2[i] = core2;
			if (ws->nbr != NULL)
			{
				/* every row within the core distance is kept when the next lies beyond it */
				ws->ball[i] = gc_metric_distance(ws->metric, next2) > ws->core[i];
				memcpy(ws->nbr + (size_t) i * kk, hp, sizeof(int32_t) * (size_t) kk);
			}
		}
	}
	return GC_OK;
}

static gc_status
hp_core(hp_ws *ws, double t_screen, int64_t *exact)
{
	gc_status	st;
	size_t		th = (size_t) ws->threads;

	ws->heap = (double *) malloc(sizeof(double) * th * GC_PE_BI * (size_t) ws->kk);
	ws->hpos = (int32_t *) malloc(sizeof(int32_t) * th * GC_PE_BI * (size_t) ws->kk);
	ws->hfill = (int32_t *) malloc(sizeof(int32_t) * th * GC_PE_BI);
	ws->uh = (double *) malloc(sizeof(double) * th * (size_t) ws->kk);
	if (!ws->heap || !ws->hpos || !ws->hfill || !ws->uh)
		return gc_core_oom(ws->ctx, (sizeof(double) + sizeof(int32_t)) * th * GC_PE_BI * (size_t) ws->kk,
						   "out of memory for HDBSCAN's neighbour search");
	if ((st = gc_pe_prepare(&ws->pe, ws->ctx, ws->x, ws->dtype, ws->n, ws->d, t_screen)) != GC_OK)
		return st;
	st = gc_pe_run(&ws->pe, hp_core_tile, ws);
	*exact += ws->pe.exact;
	gc_pe_free(&ws->pe);
	return st;
}

/* ---------------------------------------------------------------- Boruvka */

/* Whether a tile of the round is computed: some row to search, rows and columns not all of one component. */
static int
hp_want(void *arg, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
	hp_ws	   *ws = (hp_ws *) arg;

	if (i0 >= ws->nact)
		return 0;
	return !(ws->seg0[i1 - 1] == ws->seg0[i0] && ws->seg0[j1 - 1] == ws->seg0[j0] &&
			 ws->pcomp[i0] == ws->pcomp[j0]);
}

/* The least max(pc2[q], lo[q - j0]) over positions [a, b) (+infinity when empty). */
static inline double
hp_kmin(const double *pc2, const double *lo, int64_t j0, int64_t a, int64_t b)
{
	double		m[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
	int64_t		q = a;

	for (; q + 4 <= b; q += 4)
		for (int u = 0; u < 4; u++)
		{
			double		k = pc2[q + u] > lo[q + u - j0] ? pc2[q + u] : lo[q + u - j0];

			m[u] = k < m[u] ? k : m[u];
		}
	for (; q < b; q++)
	{
		double		k = pc2[q] > lo[q - j0] ? pc2[q] : lo[q - j0];

		m[0] = k < m[0] ? k : m[0];
	}
	m[0] = m[1] < m[0] ? m[1] : m[0];
	m[2] = m[3] < m[2] ? m[3] : m[2];
	return m[2] < m[0] ? m[2] : m[0];
}

/*
 * The least-edge epilogue of one tile: for each row to search, the columns
 * of other components whose edge can beat its best and its component's
 * bound, the distance exactly, the key by gc_hdbscan_edge_less.
 */
static gc_status
hp_round_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	hp_ws	   *ws = (hp_ws *) arg;
	const gc_pe *pe = &ws->pe;
	gc_metric	metric = ws->metric;
	double	   *lo = ws->blo + (size_t) w->id * GC_PE_BJ,
			   *hi = ws->bhi + (size_t) w->id * GC_PE_BJ;

	(void) done;
	for (int64_t p = t->i0; p < t->i1; p++)
	{
		int32_t		ri = ws->row[p],
					c = ws->pcomp[p],
					blo,
					bhi,
					bq;
		double		cp = ws->pcore[p],
					gw,
					bw,
					cmax,
					t2;
		int			found = 0;
		int64_t		ranges[3][2];
		double		km = INFINITY;

		if (!ws->act[p] || ws->gwmin[p] < 0)
			continue;
		gw = gc_hdb_wval(__atomic_load_n(&ws->comp_bound[c], __ATOMIC_RELAXED));
		if (ws->lb[ri] > gw || cp > gw)
		{
			/* nothing of this row can beat its component's bound now */
			ws->gwmin[p] = -1;
			continue;
		}
		if (gw < ws->gwmin[p])
			ws->gwmin[p] = gw;
		bw = ws->best_w[ri];
		blo = ws->best_lo[ri];
		bhi = ws->best_hi[ri];
		bq = ws->best_q[ri];
		cmax = bw < gw ? bw : gw;
		t2 = gc_metric_dist2_le(metric, cmax);
		gc_pe_bounds(pe, t, p, lo, hi);
		/* the tile's columns outside the row's own component (its two runs) */
		ranges[0][0] = t->j0;
		ranges[0][1] = ws->sa0[c];
		ranges[1][0] = ws->sa1[c];
		ranges[1][1] = ws->sb0[c];
		ranges[2][0] = ws->sb1[c];
		ranges[2][1] = t->j1;
		for (int g = 0; g < 3; g++)
		{
			ranges[g][0] = ranges[g][0] > t->j0 ? ranges[g][0] : t->j0;
			ranges[g][1] = ranges[g][1] < t->j1 ? ranges[g][1] : t->j1;
			if (ranges[g][0] < ranges[g][1])
			{
				double		k = hp_kmin(ws->pc2, lo, t->j0, ranges[g][0], ranges[g][1]);

				km = k < km ? k : km;
			}
		}
		if (km < ws->kmin[p])
			ws->kmin[p] = km;
		/* every column's dist2 or core dist2 is above t2: none can beat the bounds */
		if (km > t2)
			continue;
		for (int g = 0; g < 3; g++)
			for (int64_t q = ranges[g][0]; q < ranges[g][1]; q++)
			{
				double		d2,
							wt,
							cq = ws->pcore[q];
				int32_t		rj,
							elo,
							ehi;

				if (lo[q - t->j0] > t2 || cq > cmax)
					continue;
				t->exact++;
				d2 = gc_pe_dist2(pe, p, q);
				if (d2 > t2)
					continue;	/* its distance alone is above the bounds */
				rj = ws->row[q];
				elo = rj < ri ? rj : ri;
				ehi = rj < ri ? ri : rj;
				wt = gc_hdbscan_mrd(cp, cq, gc_metric_distance(metric, d2));
				if (wt <= gw && gc_hdbscan_edge_less(wt, elo, ehi, bw, blo, bhi))
				{
					bw = wt;
					blo = elo;
					bhi = ehi;
					bq = rj;
					found = 1;
					cmax = bw < gw ? bw : gw;
					t2 = gc_metric_dist2_le(metric, cmax);
				}
			}
		if (found)
		{
			ws->best_w[ri] = bw;
			ws->best_lo[ri] = blo;
			ws->best_hi[ri] = bhi;
			ws->best_q[ri] = bq;
			gc_hdb_bound_lower(&ws->comp_bound[c], bw);
		}
	}
	return GC_OK;
}

/*
 * The first round's least edges from the core search's lists, for rows
 * [b, e): a row is done (ws->done 1) where the least of them weighs its
 * core distance and they are every row within it; otherwise the least of
 * them starts its search.
 */
static gc_status
hp_first_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	hp_ws	   *ws = (hp_ws *) arg;
	int64_t		evals = 0;

	for (int64_t i = b; i < e; i++)
	{
		const int32_t *nb = ws->nbr + (size_t) i * ws->kk;
		double		bw = INFINITY;
		int32_t		blo = INT32_MAX,
					bhi = INT32_MAX,
					bq = -1;

		for (int32_t j = 0; j < ws->kk; j++)
		{
			int32_t		r = nb[j],
						elo = r < i ? r : (int32_t) i,
						ehi = r < i ? (int32_t) i : r;
			double		wt;

			if (r == i)
				continue;
			evals++;
			wt = gc_hdbscan_mrd(ws->core[i], ws->core[r], gc_metric_distance(ws->metric, hp_dist2(ws, i, r)));
			if (gc_hdbscan_edge_less(wt, elo, ehi, bw, blo, bhi))
			{
				bw = wt;
				blo = elo;
				bhi = ehi;
				bq = r;
			}
		}
		ws->done[i] = 0;
		if (bq >= 0)
		{
			ws->best_w[i] = bw;
			ws->best_lo[i] = blo;
			ws->best_hi[i] = bhi;
			ws->best_q[i] = bq;
			ws->comp_bound[i] = gc_hdb_wbits(bw);	/* the row's own component */
			if (bw == ws->core[i] && ws->ball[i])
			{
				ws->done[i] = 1;
				ws->lb[i] = bw; /* every edge of the row weighs at least its core distance */
			}
		}
	}
	__atomic_fetch_add(&ws->evals, evals, __ATOMIC_RELAXED);
	return gc_worker_tick(w, (e - b) * (int64_t) ws->kk * ws->d, (int64_t) 1 << 22) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * Puts the rows to search (act_row) first and the others after, each part
 * in the order of the components, fills the per-position and per-component
 * arrays and the copy of the rows in that order; cnt [n] is scratch.
 */
static void
hp_order(hp_ws *ws, const uint8_t *act_row, int64_t *cnt)
{
	int64_t		n = ws->n,
				sum = 0;
	size_t		es = gc_dtype_size(ws->dtype) * (size_t) ws->d;

	/* rows to search per component in sa1, the others in sb1, then the starts */
	memset(ws->sa1, 0, sizeof(int64_t) * (size_t) n);
	memset(ws->sb1, 0, sizeof(int64_t) * (size_t) n);
	for (int64_t i = 0; i < n; i++)
		(act_row[i] ? ws->sa1 : ws->sb1)[ws->comp[i]]++;
	for (int part = 0; part < 2; part++)
	{
		int64_t    *s0 = part ? ws->sb0 : ws->sa0,
				   *s1 = part ? ws->sb1 : ws->sa1;

		for (int64_t c = 0; c < n; c++)
		{
			s0[c] = sum;
			sum += s1[c];
			s1[c] = s0[c] + s1[c];
		}
		if (part == 0)
			ws->nact = sum;
	}
	for (int part = 0; part < 2; part++)
	{
		memcpy(cnt, part ? ws->sb0 : ws->sa0, sizeof(int64_t) * (size_t) n);
		for (int64_t i = 0; i < n; i++)
			if (act_row[i] == !part)
				ws->row[cnt[ws->comp[i]]++] = (int32_t) i;
	}
	for (int64_t p = 0; p < n; p++)
	{
		int32_t		i = ws->row[p];

		ws->pcomp[p] = ws->comp[i];
		ws->pcore[p] = ws->core[i];
		ws->pc2[p] = ws->core2[i];
		ws->act[p] = act_row[i];
		ws->gwmin[p] = INFINITY;
		ws->kmin[p] = INFINITY;
		ws->seg0[p] = p > 0 && ws->pcomp[p - 1] == ws->pcomp[p] ? ws->seg0[p - 1] : p;
		memcpy((char *) ws->xs + (size_t) p * es, (const char *) ws->x + (size_t) i * es, es);
	}
}

/* The minimum spanning tree into mst [n - 1]. */
static gc_status
hp_boruvka(hp_ws *ws, gc_hdbscan_edge *mst, double t_screen, int64_t *exact)
{
	gc_core_ctx *ctx = ws->ctx;
	int64_t		n = ws->n,
				edges = 0,
				rounds = 0;
	int64_t    *uf = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	int64_t    *cnt = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	int32_t    *cbest = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	uint8_t    *act_row = (uint8_t *) malloc((size_t) n);
	uint8_t    *done = (uint8_t *) malloc((size_t) n);
	gc_status	st = GC_OK;

	if (!uf || !cnt || !cbest || !act_row || !done)
	{
		st = gc_core_oom(ctx, 22 * (size_t) n, "out of memory for HDBSCAN's spanning tree of %lld rows",
						 (long long) n);
		goto out;
	}
	for (int64_t i = 0; i < n; i++)
	{
		uf[i] = i;
		ws->comp[i] = (int32_t) i;
		ws->lb[i] = ws->core[i];
		ws->best_q[i] = -1;
	}
	while (edges < n - 1)
	{
		int64_t		added = 0,
					searched = 0,
					ex0 = *exact;
		double		tr = gc_core_now_ms();

		rounds++;
		for (int64_t i = 0; i < n; i++)
			ws->comp_bound[i] = gc_hdb_wbits(INFINITY);
		/* each component's bound starts at the least edge of the round before that still leaves it */
		for (int64_t i = 0; i < n; i++)
		{
			int32_t		j = ws->best_q[i];

			if (j >= 0 && ws->comp[j] != ws->comp[i])
				gc_hdb_bound_lower(&ws->comp_bound[ws->comp[i]], ws->best_w[i]);
		}
		for (int64_t i = 0; i < n; i++)
		{
			ws->best_w[i] = INFINITY;
			ws->best_lo[i] = INT32_MAX;
			ws->best_hi[i] = INT32_MAX;
			ws->best_q[i] = -1;
			done[i] = 0;
		}
		if (rounds == 1 && ws->nbr != NULL)
		{
			ws->done = done;
			if ((st = gc_pool_for(ctx->pool, n, 1024, hp_first_block, ws)) != GC_OK)
				goto out;
			/* the lists serve the first round only */
			free(ws->nbr);
			free(ws->ball);
			ws->nbr = NULL;
			ws->ball = NULL;
		}
		for (int64_t i = 0; i < n; i++)
		{
			double		gw = gc_hdb_wval(ws->comp_bound[ws->comp[i]]);

			act_row[i] = !done[i] && ws->lb[i] <= gw && ws->core[i] <= gw;
			searched += act_row[i];
		}
		if (searched > 0)
		{
			hp_order(ws, act_row, cnt);
			if ((st = gc_pe_prepare(&ws->pe, ctx, ws->xs, ws->dtype, n, ws->d, t_screen)) != GC_OK)
				goto out;
			st = gc_pe_run_where(&ws->pe, hp_want, hp_round_tile, ws);
			*exact += ws->pe.exact;
			gc_pe_free(&ws->pe);
			if (st != GC_OK)
				goto out;
			/* no edge of a row searched to the end weighs less than the least of its bounds */
			for (int64_t p = 0; p < n; p++)
				if (ws->act[p] && ws->gwmin[p] >= 0)
				{
					int32_t		i = ws->row[p];
					double		proved = ws->best_w[i] < ws->gwmin[p] ? ws->best_w[i] : ws->gwmin[p],
								far = gc_metric_distance(ws->metric,
														 ws->pc2[p] > ws->kmin[p] ? ws->pc2[p] : ws->kmin[p]);

					/* and none less than its least lower bound to another component's row */
					proved = far > proved ? far : proved;
					if (proved > ws->lb[i])
						ws->lb[i] = proved;
				}
		}
		/* each component's least edge, by gc_hdbscan_edge_less */
		added += gc_hdb_join_least(n, ws->comp, ws->best_w, ws->best_lo, ws->best_hi, ws->best_q, cbest, uf,
								   mst, &edges);
		if (added == 0)
		{
			st = gc_error_set(ctx->err, GC_ERR_INTERNAL,
							  "HDBSCAN's spanning tree stopped at %lld of %lld edges, please report a bug",
							  (long long) edges, (long long) (n - 1));
			goto out;
		}
		for (int64_t i = 0; i < n; i++)
			ws->comp[i] = (int32_t) gc_hdb_find(uf, i);
		gc_core_debug(ctx, "hdbscan pairs: round %lld: %lld edges added, %lld rows searched, "
					  "%lld distances, %.1f ms", (long long) rounds, (long long) added,
					  (long long) searched, (long long) (*exact - ex0), gc_core_now_ms() - tr);
		if (gc_core_cancelled(ctx))
		{
			st = GC_ERR_CANCELLED;
			goto out;
		}
	}
out:
	ctx->timing->counts[0] = rounds;
	free(uf);
	free(cnt);
	free(cbest);
	free(act_row);
	free(done);
	return st;
}

static void
hp_free(hp_ws *ws)
{
	gc_pe_free(&ws->pe);
	free(ws->heap);
	free(ws->hpos);
	free(ws->hfill);
	free(ws->uh);
	free(ws->blo);
	free(ws->bhi);
	free(ws->nbr);
	free(ws->ball);
	free(ws->lb);
	free(ws->best_w);
	free(ws->best_lo);
	free(ws->best_hi);
	free(ws->best_q);
	free(ws->comp);
	free(ws->comp_bound);
	free(ws->row);
	free(ws->pcomp);
	free(ws->pcore);
	free(ws->core2);
	free(ws->pc2);
	free(ws->seg0);
	free(ws->act);
	free(ws->gwmin);
	free(ws->kmin);
	free(ws->sa0);
	free(ws->sa1);
	free(ws->sb0);
	free(ws->sb1);
	free(ws->xs);
}

gc_status
gc_hdbscan_pairs(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				 const gc_hdbscan_params *p, double *core, gc_hdbscan_edge *mst)
{
	hp_ws		ws;
	gc_status	st;
	double		t0 = gc_core_now_ms(),
				t_screen;
	int64_t		exact = 0;
	size_t		th;

	memset(&ws, 0, sizeof(ws));
	ws.ctx = ctx;
	ws.p = p;
	ws.metric = p->metric;
	ws.x = x;
	ws.dtype = dtype;
	ws.n = n;
	ws.d = d;
	ws.k = p->min_samples;
	ws.kk = p->min_samples < n ? p->min_samples + 1 : p->min_samples;
	ws.threads = gc_pool_threads(ctx->pool);
	ws.core = core;
	th = (size_t) ws.threads;
	ws.blo = (double *) malloc(sizeof(double) * th * GC_PE_BJ);
	ws.bhi = (double *) malloc(sizeof(double) * th * GC_PE_BJ);
	ws.lb = (double *) malloc(sizeof(double) * (size_t) n);
	ws.best_w = (double *) malloc(sizeof(double) * (size_t) n);
	ws.best_lo = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.best_hi = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.best_q = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.comp = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.comp_bound = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) n);
	ws.row = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.pcomp = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.pcore = (double *) malloc(sizeof(double) * (size_t) n);
	ws.core2 = (double *) malloc(sizeof(double) * (size_t) n);
	ws.pc2 = (double *) malloc(sizeof(double) * (size_t) n);
	ws.seg0 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	ws.act = (uint8_t *) malloc((size_t) n);
	ws.gwmin = (double *) malloc(sizeof(double) * (size_t) n);
	ws.kmin = (double *) malloc(sizeof(double) * (size_t) n);
	ws.sa0 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	ws.sa1 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	ws.sb0 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	ws.sb1 = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	ws.xs = malloc(gc_dtype_size(dtype) * (size_t) n * (size_t) d);
	if (!ws.blo || !ws.bhi || !ws.lb || !ws.best_w || !ws.best_lo || !ws.best_hi || !ws.best_q || !ws.comp ||
		!ws.comp_bound || !ws.row || !ws.pcomp || !ws.pcore || !ws.core2 || !ws.pc2 || !ws.seg0 || !ws.act ||
		!ws.gwmin || !ws.kmin || !ws.sa0 || !ws.sa1 || !ws.sb0 || !ws.sb1 || !ws.xs)
	{
		st = gc_core_oom(ctx, (size_t) n * (160 + gc_dtype_size(dtype) * (size_t) d),
						 "out of memory for HDBSCAN of %lld rows", (long long) n);
		goto done;
	}
	if (ws.kk <= HP_NBR_MAX)
	{
		ws.nbr = (int32_t *) malloc(sizeof(int32_t) * (size_t) n * (size_t) ws.kk);
		ws.ball = (uint8_t *) malloc((size_t) n);
		if (!ws.nbr || !ws.ball)
		{
			free(ws.nbr);
			free(ws.ball);
			ws.nbr = NULL;
			ws.ball = NULL;
		}
	}
	t_screen = hp_screen_t(&ws);
	if ((st = hp_core(&ws, t_screen, &exact)) != GC_OK)
		goto done;
	ctx->timing->phase_ms[0] = gc_core_now_ms() - t0;
	gc_core_debug(ctx, "hdbscan pairs: core distances: %lld distances, %.1f ms", (long long) exact,
				  ctx->timing->phase_ms[0]);
	t0 = gc_core_now_ms();
	if ((st = hp_boruvka(&ws, mst, t_screen, &exact)) != GC_OK)
		goto done;
	ctx->timing->phase_ms[1] = gc_core_now_ms() - t0;
done:
	ctx->timing->counts[1] = exact + ws.evals;
	ctx->timing->pair_exact = exact;
	ws.core = NULL;
	hp_free(&ws);
	return st;
}
