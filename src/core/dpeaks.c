/*
 * dpeaks.c
 *    Density peaks clustering on the CPU: Rodriguez and Laio, "Clustering by
 *    fast search and find of density peaks", in the formulation of Ge et
 *    al., "Efficient parallel implementation of a density peaks clustering
 *    algorithm on GPU" (CUDA-DP), which the GPU back end follows.
 *
 * The exact rules are in common/dpeaks_common.h, whose arithmetic this file
 * and cuda/dpeaks.cu share, so that both back ends give bit-identical
 * answers.  No N x N matrix is ever stored: memory is linear in n.  The
 * four phases over one workspace, each timed into timing.phase_ms:
 *
 *  dc      given, or an exact radix select over all unordered pairs
 *          (n <= 50,000), or the quantile of a seeded sample of 2^22
 *          ordered pairs;
 *  rho     gaussian: all pairs, each once (the sum is order-free);
 *          cutoff: a uniform grid for d <= 3 (whole cells inside the ball
 *          counted at once), all pairs otherwise;
 *  delta   the density order; points of rank below GC_DP_BRUTE_RANK scan
 *          all denser points, the others search rings of grid cells
 *          (d <= 3), falling back to the scan when the rings run out;
 *  assign  the centres, and a single pass in density order for the labels.
 *
 * The rows are read in their element type (float or double, each
 * coordinate converted exactly to double, dp_d2); the metric enters only
 * through common/dpeaks_common.h's thresholds and gc_metric_distance, all
 * comparisons are on dist2.
 *
 * Every long loop counts its work (dp_work: a distance over d features
 * counts d + 1, a grid cell GC_DP_CELL_WORK) and asks the cancel callback
 * every DP_CANCEL_WORK of it; the sorts are radix sorts that ask as well
 * (common/sort.h, pool.h).
 *
 * The loops over rows run on the call's threads (pool.h), each row's
 * outputs written by the block that holds it: the dc sample, the cell of
 * each row, the cutoff counts, the density order's keys and ranks, each
 * row's nearest denser point.  Sums over pairs are exact (integer counts,
 * the fixed-point gaussian accumulator), so with several threads each row
 * sums its own pairs and the answer is the same bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dpeaks_common.h"
#include "pair_engine.h"
#include "phases.h"
#include "sort.h"

/*
 * Work between two questions to the cancel callback, in coordinate
 * differences: a distance over d features counts d + 1, a grid cell looked
 * at counts 1.  About a few milliseconds whatever n and d.
 */
#define DP_CANCEL_WORK (INT64_C(1) << 22)
#define DP_COLLECT_MAX (1 << 20)
#define DP_HIST_BITS 20
#define DP_HIST_BITS_PAR 16		/* per thread: 512 KiB of counts */

/* Everything one density peaks call holds; freed by dpeaks_ws_free. */
typedef struct dpeaks_ws
{
	gc_core_ctx *ctx;
	const void *x;				/* [n, d] the rows, of element type dtype */
	gc_dtype	dtype;
	gc_metric	metric;			/* params->metric */
	int64_t		n;
	int32_t		d;
	const gc_dpeaks_params *params;
	gc_dpeaks_result *result;
	int64_t		work;			/* work since the last cancel question (dp_work) */
	int64_t		jstride;		/* pairs (i, j) of one row between two dp_work calls */
	double		dc;

	/* the grid index (d <= 3) */
	int			use_grid;
	gc_dp_grid	g;
	int64_t    *cell_start;		/* [ncells + 1] */
	double	   *xs;				/* [d, n] coordinates by sorted position */
	int64_t    *order;			/* [n] sorted position -> row */
	int64_t    *rank;			/* [n] sorted position -> density rank */

	/* the density order */
	int64_t    *by_rank;		/* [n] rank -> row */
	int64_t    *rank_of;		/* [n] row -> rank */
	int64_t    *nbr;			/* [n] row -> its nearest denser row, -1 for the densest */

	/* the pair engine (d >= 16, common/pairs.h): rho and delta over its tiles */
	int			use_pairs;
	gc_pe		pe;
} dpeaks_ws;

/*
 * The rows as the pair loops read them: copied into locals at the top of
 * each loop (dp_rows_of), so that the stores of the loop do not make the
 * compiler load them again for every pair.
 */
typedef struct dp_rows
{
	const void *x;
	gc_dtype	t;
	int32_t		d;
} dp_rows;

static inline dp_rows
dp_rows_of(const dpeaks_ws *ws)
{
	dp_rows		r = {ws->x, ws->dtype, ws->d};

	return r;
}

/*
 * The pair loop of the hot paths, once per element type so that the test
 * of the type is not made for every pair: for s in [from, to), d2 = dist2
 * of row a and row `row` (an expression of s), then the statement given.
 */
#define DP_PAIRS(R, a, from, to, s, row, d2, ...) \
	do { \
		if ((R).t == GC_F64) \
		{ \
			const double *dp_xa_ = (const double *) (R).x + (a) * (R).d; \
			for (int64_t s = (from); s < (to); s++) \
			{ \
				double		d2 = gc_dist2_f64(dp_xa_, (const double *) (R).x + (row) * (R).d, (R).d); \
				__VA_ARGS__ \
			} \
		} \
		else \
		{ \
			const float *dp_xa_ = (const float *) (R).x + (a) * (R).d; \
			for (int64_t s = (from); s < (to); s++) \
			{ \
				double		d2 = gc_dist2(dp_xa_, (const float *) (R).x + (row) * (R).d, (R).d); \
				__VA_ARGS__ \
			} \
		} \
	} while (0)

/* dist2 of rows i and j (gc_dist2 / gc_dist2_f64 by the element type). */
static inline double
dp_d2(dp_rows r, int64_t i, int64_t j)
{
	if (r.t == GC_F64)
		return gc_dist2_f64((const double *) r.x + i * r.d, (const double *) r.x + j * r.d, r.d);
	return gc_dist2((const float *) r.x + i * r.d, (const float *) r.x + j * r.d, r.d);
}

/* Element at of x as a double (exact for either element type). */
static inline double
dp_elem(const dpeaks_ws *ws, int64_t at)
{
	return ws->dtype == GC_F64 ? ((const double *) ws->x)[at] : (double) ((const float *) ws->x)[at];
}

/* Counts work; asks the cancel callback each time DP_CANCEL_WORK of it is done. */
static int
dp_work(dpeaks_ws *ws, int64_t units)
{
	return gc_core_work(ws->ctx, &ws->work, units, DP_CANCEL_WORK);
}

/* The same in a block of a parallel loop: worker 0 asks, the others look at the stop flag. */
static inline int
dp_wtick(gc_worker *w, int64_t units)
{
	return gc_worker_tick(w, units, DP_CANCEL_WORK);
}

/* Rows per block of the parallel loops over rows (the answer does not depend on it). */
#define DP_ROW_GRAIN 4096

/* The end of the block of j from jb: at most jstride pairs, no further than n. */
static inline int64_t
pair_block_end(const dpeaks_ws *ws, int64_t jb)
{
	return ws->n - jb > ws->jstride ? jb + ws->jstride : ws->n;
}

/* Fills the workspace with the input, no buffer yet. */
static void
dpeaks_ws_init(dpeaks_ws *ws, gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n,
			   int32_t d, const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	memset(ws, 0, sizeof(*ws));
	ws->ctx = ctx;
	ws->x = x;
	ws->dtype = dtype;
	ws->metric = params->metric;
	ws->n = n;
	ws->d = d;
	ws->params = params;
	ws->result = result;
	ws->use_pairs = gc_pair_engine_chosen(ctx->tuning, d);
	ws->use_grid = d <= GC_DP_GRID_MAX_DIM && !ws->use_pairs;
	ctx->timing->path = ws->use_pairs ? GC_PATH_PAIRS : GC_PATH_INDEX;
	ws->jstride = DP_CANCEL_WORK / ((int64_t) d + 1);
	if (ws->jstride < 1)
		ws->jstride = 1;
}

/* Frees every buffer of the workspace. */
static void
dpeaks_ws_free(dpeaks_ws *ws)
{
	free(ws->cell_start);
	free(ws->xs);
	free(ws->order);
	free(ws->rank);
	free(ws->by_rank);
	free(ws->rank_of);
	free(ws->nbr);
	if (ws->use_pairs)
		gc_pe_free(&ws->pe);
	memset(ws, 0, sizeof(*ws));
}

/* ---------------------------------------------------------------- dc */

/* k-th smallest (0-based) of v[0..m-1] by quickselect; reorders v. */
static uint64_t
select_u64(uint64_t *v, int64_t m, int64_t k)
{
	int64_t		lo = 0,
				hi = m - 1;

	while (hi > lo)
	{
		uint64_t	a = v[lo],
					b = v[lo + (hi - lo) / 2],
					c = v[hi];
		uint64_t	pivot = (a < b) ? ((b < c) ? b : (a < c ? c : a)) : ((a < c) ? a : (b < c ? c : b));
		int64_t		i = lo,
					j = hi;

		while (i <= j)
		{
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j)
			{
				uint64_t	t = v[i];

				v[i] = v[j];
				v[j] = t;
				i++;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* Histograms the next w bits (at shift) of the pair keys that share prefix. */
static gc_status
dc_histogram(dpeaks_ws *ws, int64_t *hist, uint64_t prefix, int prefix_bits, int shift,
			 int w)
{
	uint64_t	mask = (UINT64_C(1) << w) - 1;
	const dp_rows R = dp_rows_of(ws);

	memset(hist, 0, sizeof(int64_t) << w);
	for (int64_t i = 0; i < ws->n; i++)
	{
		for (int64_t jb = i + 1, je; jb < ws->n; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				uint64_t	key = gc_dp_key(d2);

				if (prefix_bits > 0 && (key >> (64 - prefix_bits)) != prefix)
					continue;
				hist[(key >> shift) & mask]++;
			});
			if (dp_work(ws, (je - jb) * (ws->d + 1)))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* The k-th smallest (1-based) of the m pair keys that share prefix, collected and selected. */
static gc_status
dc_collect(dpeaks_ws *ws, uint64_t prefix, int prefix_bits, int64_t m, int64_t k,
		   uint64_t *key_out)
{
	int64_t		got = 0;
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) (m > 0 ? m : 1));
	const dp_rows R = dp_rows_of(ws);

	if (!v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) m,
						   "out of memory for the dc candidates");
	for (int64_t i = 0; i < ws->n; i++)
	{
		for (int64_t jb = i + 1, je; jb < ws->n; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				uint64_t	key = gc_dp_key(d2);

				if ((key >> (64 - prefix_bits)) == prefix && got < m)
					v[got++] = key;
			});
			if (dp_work(ws, (je - jb) * (ws->d + 1)))
			{
				free(v);
				return GC_ERR_CANCELLED;
			}
		}
	}
	if (got != m)
	{
		free(v);
		return gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
							"dc candidates miscounted, please report a bug");
	}
	*key_out = select_u64(v, m, k - 1);
	free(v);
	return GC_OK;
}

/*
 * The same two sweeps over all pairs on several threads: a block of rows i
 * (each with its pairs j > i) counts into its thread's histogram, summed
 * afterwards (integer counts: the order does not matter); the collect
 * appends through an atomic cursor, and the k-th smallest value does not
 * depend on the order of the candidates.
 */
typedef struct dc_par_job
{
	dpeaks_ws  *ws;
	uint64_t	prefix;
	int			prefix_bits;
	int			shift;
	uint64_t	mask;
	int64_t    *hists;			/* [threads][mask + 1] (histogram) */
	uint64_t   *v;				/* [m] (collect) */
	int64_t		m;
	int64_t		got;			/* atomic (collect) */
} dc_par_job;

static gc_status
dc_par_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dc_par_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	int64_t    *hist = job->hists ? job->hists + (int64_t) w->id * (int64_t) (job->mask + 1) : NULL;
	const dp_rows R = dp_rows_of(ws);

	for (int64_t i = b; i < e; i++)
	{
		for (int64_t jb = i + 1, je; jb < ws->n; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				uint64_t	key = gc_dp_key(d2);

				if (job->prefix_bits > 0 && (key >> (64 - job->prefix_bits)) != job->prefix)
					continue;
				if (hist)
					hist[(key >> job->shift) & job->mask]++;
				else
				{
					int64_t		at = __atomic_fetch_add(&job->got, 1, __ATOMIC_RELAXED);

					if (at < job->m)
						job->v[at] = key;
				}
			});
			if (dp_wtick(w, (je - jb) * (ws->d + 1)))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* dc_histogram on the threads; hists: scratch [threads][2^w]. */
static gc_status
dc_histogram_par(dpeaks_ws *ws, int64_t *hist, int64_t *hists, uint64_t prefix, int prefix_bits,
				 int shift, int w)
{
	int			threads = gc_pool_threads(ws->ctx->pool);
	int64_t		size = (int64_t) 1 << w;
	dc_par_job	job;
	gc_status	st;

	memset(&job, 0, sizeof(job));
	job.ws = ws;
	job.prefix = prefix;
	job.prefix_bits = prefix_bits;
	job.shift = shift;
	job.mask = (UINT64_C(1) << w) - 1;
	job.hists = hists;
	memset(hists, 0, sizeof(int64_t) * (size_t) (size * threads));
	if ((st = gc_pool_for(ws->ctx->pool, ws->n, 16, dc_par_block, &job)) != GC_OK)
		return st;
	for (int64_t b = 0; b < size; b++)
	{
		int64_t		c = 0;

		for (int t = 0; t < threads; t++)
			c += hists[t * size + b];
		hist[b] = c;
	}
	return GC_OK;
}

/* dc_collect on the threads. */
static gc_status
dc_collect_par(dpeaks_ws *ws, uint64_t prefix, int prefix_bits, int64_t m, int64_t k,
			   uint64_t *key_out)
{
	dc_par_job	job;
	gc_status	st;

	memset(&job, 0, sizeof(job));
	job.ws = ws;
	job.prefix = prefix;
	job.prefix_bits = prefix_bits;
	job.m = m;
	job.v = malloc(sizeof(uint64_t) * (size_t) (m > 0 ? m : 1));
	if (!job.v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) m,
						   "out of memory for the dc candidates");
	st = gc_pool_for(ws->ctx->pool, ws->n, 16, dc_par_block, &job);
	if (st == GC_OK && job.got != m)
		st = gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
						  "dc candidates miscounted, please report a bug");
	if (st == GC_OK)
		*key_out = select_u64(job.v, m, k - 1);
	free(job.v);
	return st;
}

/* A growing list of keys, at most cap. */
typedef struct dp_u64_list
{
	uint64_t   *v;
	int64_t		len;
	int64_t		size;
} dp_u64_list;

/* Appends key; 0 once cap keys are held or memory runs out. */
static int
dp_u64_push(dp_u64_list *l, uint64_t key, int64_t cap)
{
	if (l->len == l->size)
	{
		int64_t		size = l->size ? 2 * l->size : 4096;
		uint64_t   *v;

		if (l->len >= cap || !(v = realloc(l->v, sizeof(uint64_t) * (size_t) size)))
			return 0;
		l->v = v;
		l->size = size;
	}
	l->v[l->len++] = key;
	return 1;
}

/*
 * The k-th smallest (1-based) dist2 over unordered pairs, by radix select on
 * the bit patterns: each pass histograms the next twenty bits of the keys
 * that share the prefix found so far (the binary search over pair counts
 * of CUDA-DP, 2^20-way); once at most 2^20 candidates remain they are
 * collected and selected directly.  The answer is exact, so the GPU's
 * narrower passes find the same one.
 */
static gc_status
dc_exact(dpeaks_ws *ws, int64_t k, uint64_t *key_out)
{
	static const int widths[] = {DP_HIST_BITS, DP_HIST_BITS, DP_HIST_BITS, 64 - 3 * DP_HIST_BITS};
	/* on several threads: narrower histograms, one per thread (the answer is the same) */
	static const int widths_par[] = {DP_HIST_BITS_PAR, DP_HIST_BITS_PAR, DP_HIST_BITS_PAR,
	64 - 3 * DP_HIST_BITS_PAR};
	int			threads = gc_pool_threads(ws->ctx->pool);
	const int  *ws_widths = threads > 1 ? widths_par : widths;
	uint64_t	prefix = 0;
	int			prefix_bits = 0;
	int64_t	   *hist = malloc(sizeof(int64_t) << DP_HIST_BITS);
	int64_t    *hists = threads > 1 ? malloc((sizeof(int64_t) << DP_HIST_BITS_PAR) * (size_t) threads) : NULL;
	gc_status	st = GC_OK;

	if (!hist || (threads > 1 && !hists))
	{
		free(hist);
		free(hists);
		return gc_core_oom(ws->ctx, (sizeof(int64_t) << DP_HIST_BITS) +
						   (sizeof(int64_t) << DP_HIST_BITS_PAR) * (size_t) threads,
						   "out of memory for the dc histogram");
	}
	for (int pass = 0; pass < 4; pass++)
	{
		int			w = ws_widths[pass];
		int64_t		cum = 0;
		int			b;

		st = threads > 1 ?
			dc_histogram_par(ws, hist, hists, prefix, prefix_bits, 64 - prefix_bits - w, w) :
			dc_histogram(ws, hist, prefix, prefix_bits, 64 - prefix_bits - w, w);
		if (st != GC_OK)
			break;
		for (b = 0; b < (1 << w); b++)
		{
			if (cum + hist[b] >= k)
				break;
			cum += hist[b];
		}
		if (b == (1 << w))
		{
			st = gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
							  "dc selection lost its target, please report a bug");
			break;
		}
		k -= cum;
		prefix = (prefix << w) | (uint64_t) b;
		prefix_bits += w;
		if (prefix_bits == 64)
		{
			/* the last pass completes the key: the loop always ends here or earlier */
			*key_out = prefix;
			break;
		}
		if (hist[b] <= DP_COLLECT_MAX)
		{
			int64_t		m = hist[b];

			free(hist);
			free(hists);
			return threads > 1 ? dc_collect_par(ws, prefix, prefix_bits, m, k, key_out) :
				dc_collect(ws, prefix, prefix_bits, m, k, key_out);
		}
	}
	free(hist);
	free(hists);
	return st;
}

/* A block of the dc sample: pair p is drawn from (seed, p) alone. */
typedef struct dc_sample_job
{
	dpeaks_ws  *ws;
	uint64_t	seed;
	uint64_t   *v;
} dc_sample_job;

static gc_status
dc_sample_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dc_sample_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	const dp_rows R = dp_rows_of(ws);

	for (int64_t p = b; p < e; p++)
	{
		int64_t		i,
					j;

		gc_dp_sample_pair(job->seed, p, ws->n, &i, &j);
		job->v[p] = gc_dp_key(dp_d2(R, i, j));
	}
	/* two rows read at random and the draw: weighed as 64 differences */
	return dp_wtick(w, (e - b) * (ws->d + 64)) ? GC_ERR_CANCELLED : GC_OK;
}

/* The quantile of a seeded sample of ordered pairs. */
static gc_status
dc_sample(dpeaks_ws *ws, double rate, uint64_t seed, uint64_t *key_out)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) m);
	dc_sample_job job = {ws, seed, v};
	gc_status	st;

	if (!v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) m,
						   "out of memory for the dc sample");
	if ((st = gc_pool_for(ws->ctx->pool, m, 16384, dc_sample_block, &job)) != GC_OK)
	{
		free(v);
		return st;
	}
	*key_out = select_u64(v, m, gc_dp_quantile_rank(rate, m) - 1);
	free(v);
	return GC_OK;
}

/*
 * The exact dc on the pair engine (d >= 16), as on the GPU
 * (cuda/dpeaks_pairs.cu): the seeded sample gives a window [lo, hi] around
 * the quantile, six standard deviations of the sample quantile's rank on
 * either side; one pass over the tiles counts the pairs certainly below lo
 * (by the screen's upper bound, or their canonical dist2) and keeps the
 * canonical dist2 of those in the window; the pair of the rank is selected
 * from those.  *found is 0 where the window missed it (dc_exact decides).
 */
typedef struct dc_window_job
{
	gc_pe	   *pe;
	double		lo,
				hi;
	int64_t    *below;			/* [threads] */
	dp_u64_list *kept;			/* [threads] */
	int64_t		cap;			/* keys a thread may keep */
	int			overflow;
} dc_window_job;

static gc_status
dc_window_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	dc_window_job *job = arg;
	double		lb[GC_PE_BJ],
				ub[GC_PE_BJ];
	int64_t		nb = 0;

	for (int64_t i = t->i0; i < t->i1; i++)
	{
		int64_t		j0 = i + 1 > t->j0 ? i + 1 : t->j0;

		if (j0 >= t->j1)
			continue;
		gc_pe_bounds(job->pe, t, i, lb, ub);
		for (int64_t j = j0; j < t->j1; j++)
		{
			double		d2;

			if (ub[j - t->j0] < job->lo)
			{
				nb++;
				continue;
			}
			if (lb[j - t->j0] > job->hi)
				continue;
			t->exact++;
			d2 = gc_pe_dist2(job->pe, i, j);
			if (d2 < job->lo)
				nb++;
			else if (d2 <= job->hi && !__atomic_load_n(&job->overflow, __ATOMIC_RELAXED) &&
					 !dp_u64_push(&job->kept[w->id], gc_dp_key(d2), job->cap))
				__atomic_store_n(&job->overflow, 1, __ATOMIC_RELAXED);
		}
	}
	job->below[w->id] += nb;
	return GC_OK;
}

static gc_status
dc_exact_pairs(dpeaks_ws *ws, int64_t m, uint64_t seed, uint64_t *key_out, int *found)
{
	const int64_t S = GC_DP_DC_SAMPLE_PAIRS;
	const double N = (double) ws->n * (double) (ws->n - 1) / 2.0;
	int			threads = gc_pool_threads(ws->ctx->pool);
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) S);
	dc_sample_job sj = {ws, seed, v};
	dc_window_job job;
	gc_pe		pe;
	gc_status	st;
	double		p = (double) m / N,
				delta = 6.0 * sqrt(p * (1.0 - p) / (double) S) + 2.0 / (double) S;
	int64_t		rlo = (int64_t) floor((p - delta) * (double) S),
				rhi = (int64_t) ceil((p + delta) * (double) S),
				below = 0,
				kept = 0;

	*found = 0;
	if (!v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) S, "out of memory for the dc sample");
	if (rhi >= S || (st = gc_pool_for(ws->ctx->pool, S, 16384, dc_sample_block, &sj)) != GC_OK)
	{
		free(v);
		return rhi >= S ? GC_OK : st;
	}
	memset(&job, 0, sizeof(job));
	job.pe = &pe;
	job.hi = gc_dp_unkey(select_u64(v, S, rhi));
	job.lo = rlo >= 0 ? gc_dp_unkey(select_u64(v, rhi, rlo)) : 0.0;
	free(v);
	if (!isfinite(job.hi))
		return GC_OK;
	/* room for eight times the pairs the window should hold, at least 2^20 */
	job.cap = (int64_t) fmin(fmax(16.0 * delta * N, (double) (1 << 20)), (double) (INT64_C(1) << 28)) / threads + 4096;
	job.below = calloc((size_t) threads, sizeof(int64_t));
	job.kept = calloc((size_t) threads, sizeof(dp_u64_list));
	if (!job.below || !job.kept)
		st = gc_core_oom(ws->ctx, 32 * (size_t) threads, "out of memory for the dc window");
	else if ((st = gc_pe_prepare(&pe, ws->ctx, ws->x, ws->dtype, ws->n, ws->d, job.hi)) == GC_OK)
	{
		st = gc_pe_run_upper(&pe, dc_window_tile, &job);
		gc_pe_free(&pe);
	}
	for (int q = 0; q < threads && job.kept && job.below; q++)
	{
		below += job.below[q];
		kept += job.kept[q].len;
	}
	if (st == GC_OK && !job.overflow && m > below && m <= below + kept)
	{
		uint64_t   *all = malloc(sizeof(uint64_t) * (size_t) (kept > 0 ? kept : 1));
		int64_t		at = 0;

		if (!all)
			st = gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) kept, "out of memory for the dc window");
		else
		{
			for (int q = 0; q < threads; q++)
			{
				memcpy(all + at, job.kept[q].v, sizeof(uint64_t) * (size_t) job.kept[q].len);
				at += job.kept[q].len;
			}
			*key_out = select_u64(all, kept, m - below - 1);
			*found = 1;
			free(all);
		}
	}
	gc_core_debug(ws->ctx, "density peaks: dc window [%g, %g] below=%lld kept=%lld rank=%lld %s", job.lo, job.hi,
				  (long long) below, (long long) kept, (long long) m, *found ? "found" : "missed");
	for (int q = 0; q < threads && job.kept; q++)
		free(job.kept[q].v);
	free(job.kept);
	free(job.below);
	return st;
}

/* Phase dc: the cutoff distance, given or derived from neighbor_rate. */
static gc_status
dpeaks_dc(dpeaks_ws *ws)
{
	const gc_dpeaks_params *p = ws->params;
	gc_dpeaks_result *result = ws->result;
	uint64_t	key = 0;
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	result->dc_sample = 0;
	if (!p->derive_dc)
	{
		ws->dc = result->dc = p->dc;
		result->dc_method = GC_DC_GIVEN;
		return GC_OK;
	}
	if (ws->n <= GC_DP_DC_EXACT_MAX_N)
	{
		int64_t		k = gc_dp_quantile_rank(p->neighbor_rate, gc_dp_ordered_pairs(ws->n));

		int			found = 0;

		st = ws->use_pairs && ws->n >= 2
			? dc_exact_pairs(ws, (k + 1) / 2, p->seed ? p->seed : GC_DP_DEFAULT_SEED, &key, &found) : GC_OK;
		if (st == GC_OK && !found)
			st = dc_exact(ws, (k + 1) / 2, &key);
		result->dc_method = GC_DC_EXACT;
	}
	else
	{
		st = dc_sample(ws, p->neighbor_rate, p->seed ? p->seed : GC_DP_DEFAULT_SEED, &key);
		result->dc_method = GC_DC_SAMPLE;
		result->dc_sample = GC_DP_DC_SAMPLE_PAIRS;
	}
	if (st != GC_OK)
		return st;
	ws->dc = gc_metric_distance(ws->metric, gc_dp_unkey(key));
	if (!(ws->dc > 0.0))
		return gc_error_dpeaks_zero_quantile(ws->ctx->err);
	result->dc = ws->dc;
	gc_core_debug(ws->ctx, "density peaks: dc %.9g (%s)", ws->dc,
				  result->dc_method == GC_DC_EXACT ? "exact" : "sample");
	return GC_OK;
}

/* ---------------------------------------------------------------- the grid */

/* The range of a block of rows, into its slot of lohi [blocks][2][d]. */
typedef struct dp_range_job
{
	dpeaks_ws  *ws;
	double	   *lohi;
} dp_range_job;

#define DP_RANGE_GRAIN 65536

static gc_status
dp_range_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	dp_range_job *job = arg;
	int32_t		d = job->ws->d;
	double	   *mn = job->lohi + (b / DP_RANGE_GRAIN) * 2 * d;
	double	   *mx = mn + d;

	for (int k = 0; k < d; k++)
	{
		mn[k] = INFINITY;
		mx[k] = -INFINITY;
	}
	for (int64_t i = b; i < e; i++)
		for (int k = 0; k < d; k++)
		{
			double		v = dp_elem(job->ws, i * d + k);

			if (v < mn[k])
				mn[k] = v;
			if (v > mx[k])
				mx[k] = v;
		}
	return dp_wtick(w, (e - b) * (d + 1)) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * Chooses the cells of the grid index from the range of the rows and the
 * box of a sample (gc_dp_grid_box, gc_dp_grid_shape); -1 when cancelled,
 * -2 when out of memory.
 */
static int64_t
grid_shape(dpeaks_ws *ws)
{
	double		mn[GC_DP_GRID_MAX_DIM],
				mx[GC_DP_GRID_MAX_DIM],
				lo[GC_DP_GRID_MAX_DIM],
				hi[GC_DP_GRID_MAX_DIM];
	int32_t		d = ws->d;
	int64_t		blocks = (ws->n + DP_RANGE_GRAIN - 1) / DP_RANGE_GRAIN;
	dp_range_job job = {ws, malloc(sizeof(double) * 2 * d * (size_t) blocks)};
	gc_status	st;

	if (!job.lohi)
		return -2;
	st = gc_pool_for(ws->ctx->pool, ws->n, DP_RANGE_GRAIN, dp_range_block, &job);
	for (int k = 0; k < d; k++)
	{
		mn[k] = INFINITY;
		mx[k] = -INFINITY;
		for (int64_t b = 0; st == GC_OK && b < blocks; b++)
		{
			if (job.lohi[b * 2 * d + k] < mn[k])
				mn[k] = job.lohi[b * 2 * d + k];
			if (job.lohi[b * 2 * d + d + k] > mx[k])
				mx[k] = job.lohi[b * 2 * d + d + k];
		}
	}
	free(job.lohi);
	if (st == GC_ERR_CANCELLED)
		return -1;
	if (st != GC_OK)
		return -2;
	if (gc_dp_grid_box(ws->x, ws->dtype, ws->n, d, mn, mx, lo, hi) != 0)
		return -2;
	return gc_dp_grid_shape(&ws->g, d, ws->n, mn, mx, lo, hi);
}

/* Cell of each row of a block (step 0), or the coordinates by sorted position (step 1). */
typedef struct grid_fill_job
{
	dpeaks_ws  *ws;
	int64_t    *cell;
	int			step;
} grid_fill_job;

static gc_status
grid_fill_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	grid_fill_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	int64_t		n = ws->n;
	int32_t		d = ws->d;

	for (int64_t i = b; i < e; i++)
	{
		if (job->step == 0)
		{
			int64_t		id = 0;

			for (int k = d - 1; k >= 0; k--)
				id = id * ws->g.dims[k] + gc_dp_cell_of(&ws->g, k, dp_elem(ws, i * d + k));
			job->cell[i] = id;
		}
		else
			for (int k = 0; k < d; k++)
				ws->xs[k * n + i] = dp_elem(ws, ws->order[i] * d + k);
	}
	return dp_wtick(w, (e - b) * GC_DP_CELL_WORK * (d + 1)) ? GC_ERR_CANCELLED : GC_OK;
}

/* Sorts the rows into the cells: order, coordinates by sorted position, cell starts. */
static gc_status
grid_fill(dpeaks_ws *ws, int64_t ncells, int64_t *cell, int64_t *fill)
{
	int64_t		n = ws->n;
	int32_t		d = ws->d;
	grid_fill_job job = {ws, cell, 0};
	gc_status	st;

	if ((st = gc_pool_for(ws->ctx->pool, n, DP_ROW_GRAIN * 4, grid_fill_block, &job)) != GC_OK)
		return st;
	for (int64_t i = 0; i < n; i++)
	{
		ws->cell_start[cell[i] + 1]++;
		if (dp_work(ws, GC_DP_CELL_WORK))
			return GC_ERR_CANCELLED;
	}
	for (int64_t q = 0; q < ncells; q++)
		ws->cell_start[q + 1] += ws->cell_start[q];
	memcpy(fill, ws->cell_start, sizeof(int64_t) * (size_t) ncells);
	for (int64_t i = 0; i < n; i++)
	{
		ws->order[fill[cell[i]]++] = i;
		if (dp_work(ws, GC_DP_CELL_WORK))
			return GC_ERR_CANCELLED;
	}
	(void) d;
	job.step = 1;
	return gc_pool_for(ws->ctx->pool, n, DP_ROW_GRAIN * 4, grid_fill_block, &job);
}

/* Builds the grid index over the rows. */
static gc_status
grid_build(dpeaks_ws *ws)
{
	int64_t		n = ws->n;
	int64_t		ncells = grid_shape(ws);
	int64_t    *cell;
	int64_t    *fill;
	gc_status	st;

	if (ncells == -2)
		return gc_core_oom(ws->ctx, sizeof(double) * GC_DP_BOX_SAMPLE,
						   "out of memory planning the density peaks grid");
	if (ncells < 0)
		return GC_ERR_CANCELLED;
	ws->cell_start = calloc((size_t) ncells + 1, sizeof(int64_t));
	ws->xs = malloc(sizeof(double) * (size_t) (n * ws->d));
	ws->order = malloc(sizeof(int64_t) * (size_t) n);
	ws->rank = malloc(sizeof(int64_t) * (size_t) n);
	cell = malloc(sizeof(int64_t) * (size_t) n);
	fill = malloc(sizeof(int64_t) * (size_t) ncells);
	if (!ws->cell_start || !ws->xs || !ws->order || !ws->rank || !cell || !fill)
	{
		free(cell);
		free(fill);
		return gc_core_oom(ws->ctx,
						   sizeof(int64_t) * (size_t) (2 * ncells + 1 + 3 * n) +
						   sizeof(double) * (size_t) (n * ws->d),
						   "out of memory for the grid index");
	}
	st = grid_fill(ws, ncells, cell, fill);
	free(cell);
	free(fill);
	if (st != GC_OK)
		return st;
	ws->g.cell_start = ws->cell_start;
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		ws->g.xs[k] = k < ws->d ? ws->xs + k * n : NULL;
	ws->g.rank = ws->rank;
	return GC_OK;
}

/* ---------------------------------------------------------------- rho */

/*
 * The densities of a block of rows, each row over all other rows: the
 * gaussian terms in the fixed-point accumulator, or the count of rows
 * within the cutoff.  Both sums are exact, so each row gets the value the
 * one-thread loop over each pair once gives.
 */
typedef struct rho_rows_job
{
	dpeaks_ws  *ws;
	double	   *rho;
	int			gaussian;
	double		inv;			/* gaussian: gc_dp_gauss_factor */
	double		T;				/* cutoff: the threshold on dist2 */
} rho_rows_job;

static gc_status
rho_rows_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	rho_rows_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	int64_t		n = ws->n;
	const dp_rows R = dp_rows_of(ws);

	for (int64_t i = b; i < e; i++)
	{
		uint64_t	hi = 0,
					lo = 0;
		int64_t		cnt = 0;

		for (int64_t jb = 0, je; jb < n; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				if (j == i)
					continue;
				if (job->gaussian)
				{
					uint64_t	t = gc_dp_gauss_fixed(gc_dp_gauss_u(ws->metric, d2, job->inv));

					if (t)
						gc_dp_acc_add(&hi, &lo, t);
				}
				else
					cnt += d2 < job->T;
			});
			if (dp_wtick(w, (je - jb) * (ws->d + 1)))
				return GC_ERR_CANCELLED;
		}
		job->rho[i] = job->gaussian ? gc_dp_acc_value(hi, lo) : (double) cnt;
	}
	return GC_OK;
}

/*
 * The all-pairs densities with three threads or more: each row over all
 * rows, twice the distances of the one-thread loop but on every thread.
 */
static gc_status
rho_all_pairs_rows(dpeaks_ws *ws, double *rho, int gaussian)
{
	rho_rows_job job = {ws, rho, gaussian, 0.0, 0.0};

	if (gaussian)
		job.inv = gc_dp_gauss_factor(ws->metric, ws->dc);
	else
		job.T = gc_dp_cutoff_threshold(ws->metric, ws->dc);
	return gc_pool_for(ws->ctx->pool, ws->n, 16, rho_rows_block, &job);
}

/* Gaussian densities over all pairs, each once, in fixed point. */
static gc_status
rho_gaussian(dpeaks_ws *ws, double *rho)
{
	int64_t		n = ws->n;
	gc_metric	m = ws->metric;
	double		inv = gc_dp_gauss_factor(m, ws->dc);
	uint64_t   *hi = calloc((size_t) n, sizeof(uint64_t));
	uint64_t   *lo = calloc((size_t) n, sizeof(uint64_t));
	gc_status	st = GC_OK;
	const dp_rows R = dp_rows_of(ws);

	if (gc_pool_threads(ws->ctx->pool) >= 3)
	{
		free(hi);
		free(lo);
		return rho_all_pairs_rows(ws, rho, 1);
	}
	if (!hi || !lo)
	{
		free(hi);
		free(lo);
		return gc_core_oom(ws->ctx, 2 * sizeof(uint64_t) * (size_t) n,
						   "out of memory for the densities");
	}
	for (int64_t i = 0; i < n && st == GC_OK; i++)
	{
		for (int64_t jb = i + 1, je; jb < n && st == GC_OK; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				uint64_t	t = gc_dp_gauss_fixed(gc_dp_gauss_u(m, d2, inv));

				if (t)
				{
					gc_dp_acc_add(&hi[i], &lo[i], t);
					gc_dp_acc_add(&hi[j], &lo[j], t);
				}
			});
			if (dp_work(ws, (je - jb) * (ws->d + 1)))
				st = GC_ERR_CANCELLED;
		}
	}
	for (int64_t i = 0; i < n && st == GC_OK; i++)
		rho[i] = gc_dp_acc_value(hi[i], lo[i]);
	free(hi);
	free(lo);
	return st;
}

/* Cutoff densities in the grid, a block of sorted positions. */
typedef struct rho_grid_job
{
	dpeaks_ws  *ws;
	double	   *rho;
	double		T;
} rho_grid_job;

static gc_status
rho_grid_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	rho_grid_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	int64_t		n = ws->n;

	for (int64_t q = b; q < e; q++)
	{
		double		p[GC_DP_GRID_MAX_DIM];
		int64_t		work = 1;

		for (int k = 0; k < ws->d; k++)
			p[k] = ws->xs[k * n + q];
		job->rho[ws->order[q]] = (double) (gc_dp_grid_count(&ws->g, p, job->T, &work) - 1);
		if (dp_wtick(w, work))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/* Cutoff densities: counted in the grid when there is one, else over all pairs. */
static gc_status
rho_cutoff(dpeaks_ws *ws, double *rho)
{
	int64_t		n = ws->n;
	double		T = gc_dp_cutoff_threshold(ws->metric, ws->dc);
	const dp_rows R = dp_rows_of(ws);

	if (ws->use_grid)
	{
		rho_grid_job job = {ws, rho, T};

		return gc_pool_for(ws->ctx->pool, n, DP_ROW_GRAIN / 4, rho_grid_block, &job);
	}
	if (gc_pool_threads(ws->ctx->pool) >= 3)
		return rho_all_pairs_rows(ws, rho, 0);
	for (int64_t i = 0; i < n; i++)
		rho[i] = 0.0;
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		cnt = 0;

		for (int64_t jb = i + 1, je; jb < n; jb = je)
		{
			je = pair_block_end(ws, jb);
			DP_PAIRS(R, i, jb, je, j, j, d2,
			{
				if (d2 < T)
				{
					cnt++;
					rho[j] += 1.0;
				}
			});
			if (dp_work(ws, (je - jb) * (ws->d + 1)))
				return GC_ERR_CANCELLED;
		}
		rho[i] += (double) cnt;
	}
	return GC_OK;
}

/* ---------------------------------------------------------------- the pair engine */

/*
 * rho and delta over the tiles of the pair engine (pair_engine.h), where
 * the grid prunes nothing (d >= 16).  A row block is one thread's, so each
 * row's sums and nearest point are its own, as in the row loops above.
 *
 *  rho     gaussian: a pair whose dist2 the screen puts above
 *          gc_dp_gauss_reach has a term of exactly zero; every other pair's
 *          term comes from its canonical dist2.  Cutoff: the pairs with
 *          dist2 < T, decided by the engine (dist2 <= the double below T);
 *  delta   row i looks at the rows of lower rank whose screened lower
 *          bound on dist2 is at most the best dist2 found so far (a row
 *          above it cannot be nearer, nor equal), and takes the canonical
 *          dist2 of those: the same nearest denser point as the scan.
 */
typedef struct dp_pairs_job
{
	dpeaks_ws  *ws;
	int			gaussian;
	double		inv;			/* gaussian: gc_dp_gauss_factor */
	uint64_t   *hi;				/* [n] gaussian sums, or cutoff counts in hi */
	uint64_t   *lo;				/* [n] */
	double	   *best_d2;		/* [n] delta */
	int64_t    *best_rank;		/* [n] */
} dp_pairs_job;

static gc_status
dp_pairs_rho_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	dp_pairs_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	gc_pe	   *pe = &ws->pe;

	for (int64_t i = t->i0; i < t->i1; i++)
		for (int64_t j = t->j0; j < t->j1; j++)
		{
			if (j == i)
				continue;
			if (job->gaussian)
			{
				uint64_t	term;

				if (gc_pe_screen(pe, t, i, j) == 0)
					continue;
				t->exact++;
				term = gc_dp_gauss_fixed(gc_dp_gauss_u(ws->metric, gc_pe_dist2(pe, i, j), job->inv));
				if (term)
					gc_dp_acc_add(&job->hi[i], &job->lo[i], term);
			}
			else
				job->hi[i] += (uint64_t) gc_pe_in(pe, t, i, j);
		}
	return GC_OK;
}

/* rho on the pair engine (prepared here; delta reuses it). */
static gc_status
dp_pairs_rho(dpeaks_ws *ws, double *rho)
{
	int64_t		n = ws->n;
	dp_pairs_job job;
	gc_status	st;
	double		t;

	memset(&job, 0, sizeof(job));
	job.ws = ws;
	job.gaussian = ws->params->kernel == GC_DP_KERNEL_GAUSSIAN;
	if (job.gaussian)
	{
		job.inv = gc_dp_gauss_factor(ws->metric, ws->dc);
		t = gc_dp_gauss_reach(ws->metric, job.inv);
	}
	else
		t = nextafter(gc_dp_cutoff_threshold(ws->metric, ws->dc), 0.0);
	if ((st = gc_pe_prepare(&ws->pe, ws->ctx, ws->x, ws->dtype, n, ws->d, t)) != GC_OK)
		return st;
	job.hi = calloc((size_t) n, sizeof(uint64_t));
	job.lo = calloc((size_t) n, sizeof(uint64_t));
	if (!job.hi || !job.lo)
		st = gc_core_oom(ws->ctx, 2 * sizeof(uint64_t) * (size_t) n, "out of memory for the densities");
	else
		st = gc_pe_run(&ws->pe, dp_pairs_rho_tile, &job);
	for (int64_t i = 0; i < n && st == GC_OK; i++)
		rho[i] = job.gaussian ? gc_dp_acc_value(job.hi[i], job.lo[i]) : (double) job.hi[i];
	free(job.hi);
	free(job.lo);
	return st;
}

static gc_status
dp_pairs_delta_tile(void *arg, gc_worker *w, gc_pe_tile *t, int *done)
{
	dp_pairs_job *job = arg;
	dpeaks_ws  *ws = job->ws;
	gc_pe	   *pe = &ws->pe;

	for (int64_t i = t->i0; i < t->i1; i++)
	{
		int64_t		r = ws->rank_of[i];
		double		bd2 = job->best_d2[i];
		int64_t		br = job->best_rank[i];

		if (r == 0)
			continue;
		for (int64_t j = t->j0; j < t->j1; j++)
		{
			int64_t		s = ws->rank_of[j];
			double		d2;

			if (s >= r || gc_pe_lower(pe, t, i, j) > bd2)
				continue;
			t->exact++;
			d2 = gc_pe_dist2(pe, i, j);
			if (br < 0 || gc_dp_better(d2, s, bd2, br))
			{
				bd2 = d2;
				br = s;
			}
		}
		job->best_d2[i] = bd2;
		job->best_rank[i] = br;
	}
	return GC_OK;
}

/* delta on the pair engine that rho prepared: every row but the densest. */
static gc_status
dp_pairs_delta(dpeaks_ws *ws)
{
	int64_t		n = ws->n;
	dp_pairs_job job;
	gc_status	st;

	memset(&job, 0, sizeof(job));
	job.ws = ws;
	job.best_d2 = malloc(sizeof(double) * (size_t) n);
	job.best_rank = malloc(sizeof(int64_t) * (size_t) n);
	if (!job.best_d2 || !job.best_rank)
	{
		free(job.best_d2);
		free(job.best_rank);
		return gc_core_oom(ws->ctx, 16 * (size_t) n, "out of memory for the nearest denser points");
	}
	for (int64_t i = 0; i < n; i++)
	{
		job.best_d2[i] = INFINITY;
		job.best_rank[i] = -1;
	}
	st = gc_pe_run(&ws->pe, dp_pairs_delta_tile, &job);
	for (int64_t i = 0; i < n && st == GC_OK; i++)
	{
		if (ws->rank_of[i] == 0)
			continue;
		ws->result->delta[i] = gc_metric_distance(ws->metric, job.best_d2[i]);
		ws->nbr[i] = ws->by_rank[job.best_rank[i]];
	}
	free(job.best_d2);
	free(job.best_rank);
	return st;
}

/* Phase rho: the grid index (d <= 3), then the densities. */
static gc_status
dpeaks_rho(dpeaks_ws *ws)
{
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if (ws->use_pairs)
		return dp_pairs_rho(ws, ws->result->rho);
	if (ws->use_grid && (st = grid_build(ws)) != GC_OK)
		return st;
	if (ws->params->kernel == GC_DP_KERNEL_GAUSSIAN)
		return rho_gaussian(ws, ws->result->rho);
	return rho_cutoff(ws, ws->result->rho);
}

/* ---------------------------------------------------------------- delta */

/*
 * Nearest denser point of row i (rank r) by scanning every denser point;
 * *best_d2 / *best_rank receive it.
 */
static gc_status
nearest_denser_scan(dpeaks_ws *ws, gc_worker *w, int64_t i, int64_t r,
					double *best_d2, int64_t *best_rank)
{
	double		bd2 = INFINITY;
	int64_t		br = -1;
	const dp_rows R = dp_rows_of(ws);

	for (int64_t sb = 0, se; sb < r; sb = se)
	{
		se = r - sb > ws->jstride ? sb + ws->jstride : r;
		DP_PAIRS(R, i, sb, se, s, ws->by_rank[s], d2,
		{
			if (br < 0 || gc_dp_better(d2, s, bd2, br))
			{
				bd2 = d2;
				br = s;
			}
		});
		if (dp_wtick(w, (se - sb) * (ws->d + 1)))
			return GC_ERR_CANCELLED;
	}
	*best_d2 = bd2;
	*best_rank = br;
	return GC_OK;
}

/* The density order's loops over rows: keys (step 0), rank_of (1), the grid's ranks (2). */
typedef struct order_job
{
	dpeaks_ws  *ws;
	uint64_t   *keys;
	int			step;
} order_job;

static gc_status
order_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	order_job  *job = arg;
	dpeaks_ws  *ws = job->ws;

	for (int64_t i = b; i < e; i++)
		switch (job->step)
		{
			case 0:
				job->keys[i] = gc_desc_key(ws->result->rho[i]);
				ws->by_rank[i] = i;
				break;
			case 1:
				ws->rank_of[ws->by_rank[i]] = i;
				break;
			default:
				ws->rank[i] = ws->rank_of[ws->order[i]];
				break;
		}
	return dp_wtick(w, e - b) ? GC_ERR_CANCELLED : GC_OK;
}

/* The density order (larger rho first, then smaller row): by_rank, rank_of, and the ranks in the grid. */
static gc_status
density_order(dpeaks_ws *ws)
{
	int64_t		n = ws->n;
	uint64_t   *keys = malloc(sizeof(uint64_t) * (size_t) n);
	uint64_t   *keys_tmp = malloc(sizeof(uint64_t) * (size_t) n);

	ws->by_rank = malloc(sizeof(int64_t) * (size_t) n);
	ws->rank_of = malloc(sizeof(int64_t) * (size_t) n);
	ws->nbr = malloc(sizeof(int64_t) * (size_t) n);
	if (!keys || !keys_tmp || !ws->by_rank || !ws->rank_of || !ws->nbr)
	{
		free(keys);
		free(keys_tmp);
		return gc_core_oom(ws->ctx, (2 * sizeof(uint64_t) + 3 * sizeof(int64_t)) * (size_t) n,
						   "out of memory for the density order");
	}
	{
		order_job	job = {ws, keys, 0};
		gc_status	st;

		st = gc_pool_for(ws->ctx->pool, n, DP_ROW_GRAIN * 4, order_block, &job);
		/* a radix sort, stable: equal rho keep row order; rank_of is its scratch */
		if (st == GC_OK)
			st = gc_pool_radix_sort(ws->ctx->pool, keys, ws->by_rank, keys_tmp, ws->rank_of, n);
		free(keys);
		free(keys_tmp);
		for (job.step = 1; job.step <= (ws->use_grid ? 2 : 1) && st == GC_OK; job.step++)
			st = gc_pool_for(ws->ctx->pool, n, DP_ROW_GRAIN * 4, order_block, &job);
		return st;
	}
}

/* The densest point's delta: the largest distance to any point. */
static gc_status
delta_densest(dpeaks_ws *ws)
{
	int64_t		top = ws->by_rank[0];
	double		far = 0.0;
	const dp_rows R = dp_rows_of(ws);

	for (int64_t jb = 0, je; jb < ws->n; jb = je)
	{
		je = pair_block_end(ws, jb);
		DP_PAIRS(R, top, jb, je, j, j, d2,
		{
			if (d2 > far)
				far = d2;
		});
		if (dp_work(ws, (je - jb) * (ws->d + 1)))
			return GC_ERR_CANCELLED;
	}
	ws->result->delta[top] = gc_metric_distance(ws->metric, far);
	ws->nbr[top] = -1;
	return GC_OK;
}

/* Each point's nearest denser point, a block of ranks. */
static gc_status
delta_block(void *arg, gc_worker *w, int64_t rb, int64_t re)
{
	dpeaks_ws  *ws = arg;
	int32_t		d = ws->d;
	int64_t		max_rings = gc_dp_max_rings(d);
	gc_status	st;

	for (int64_t r = rb > 1 ? rb : 1; r < re; r++)
	{
		int64_t		i = ws->by_rank[r];
		double		bd2 = INFINITY;
		int64_t		br = -1;
		int64_t		work = 1;
		int			ok = 0;

		if (ws->use_grid && r >= GC_DP_BRUTE_RANK)
		{
			double		p[GC_DP_GRID_MAX_DIM];

			for (int k = 0; k < d; k++)
				p[k] = dp_elem(ws, i * d + k);
			ok = gc_dp_grid_nearest_denser(&ws->g, p, r, max_rings, &bd2, &br, &work);
		}
		if (dp_wtick(w, work))
			return GC_ERR_CANCELLED;
		if (!ok && (st = nearest_denser_scan(ws, w, i, r, &bd2, &br)) != GC_OK)
			return st;
		ws->result->delta[i] = gc_metric_distance(ws->metric, bd2);
		ws->nbr[i] = ws->by_rank[br];
	}
	return GC_OK;
}

/* Phase delta: the density order, then each point's distance to its nearest denser point. */
static gc_status
dpeaks_delta(dpeaks_ws *ws)
{
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = density_order(ws)) != GC_OK || (st = delta_densest(ws)) != GC_OK)
		return st;
	if (ws->use_pairs)
		return dp_pairs_delta(ws);
	return gc_pool_for(ws->ctx->pool, ws->n, DP_ROW_GRAIN / 4, delta_block, ws);
}

/* ---------------------------------------------------------------- assign */

/*
 * Marks as centres the m points of rank 1 .. n - 1 with the largest gamma,
 * ties by rank (gc_select_largest; no sort).
 */
static gc_status
largest_gamma(dpeaks_ws *ws, int64_t m)
{
	gc_dpeaks_result *result = ws->result;
	int64_t		n = ws->n;
	double	   *gamma = malloc(sizeof(double) * (size_t) (n - 1));
	int64_t    *hist = malloc(sizeof(int64_t) * GC_SELECT_BUCKETS);
	uint64_t	thr;
	int64_t		need_eq;
	int			cancelled;

	if (!gamma || !hist)
	{
		free(gamma);
		free(hist);
		return gc_core_oom(ws->ctx, sizeof(double) * (size_t) n + sizeof(int64_t) * GC_SELECT_BUCKETS,
						   "out of memory for the choice of centres");
	}
	for (int64_t r = 1; r < n; r++)
	{
		int64_t		i = ws->by_rank[r];

		gamma[r - 1] = result->rho[i] * result->delta[i];
	}
	cancelled = gc_select_largest(gamma, n - 1, m, hist, &thr, &need_eq,
								  ws->ctx->cancel, ws->ctx->cancel_arg) != 0;
	for (int64_t r = 1; r < n && !cancelled; r++)
	{
		uint64_t	key = gc_desc_key(gamma[r - 1]);

		if (key < thr || (key == thr && need_eq > 0))
		{
			need_eq -= key == thr;
			result->is_center[ws->by_rank[r]] = 1;
		}
	}
	free(gamma);
	free(hist);
	return cancelled ? gc_core_cancel_status(ws->ctx) : GC_OK;
}

/* The centres: the densest point, and the n_clusters - 1 largest gamma or the thresholds. */
static gc_status
choose_centres(dpeaks_ws *ws)
{
	const gc_dpeaks_params *p = ws->params;
	gc_dpeaks_result *result = ws->result;
	int64_t		n = ws->n;

	for (int64_t i = 0; i < n; i++)
		result->is_center[i] = 0;
	result->is_center[ws->by_rank[0]] = 1;
	if (p->n_clusters > 1)
		return largest_gamma(ws, p->n_clusters - 1 < n - 1 ? p->n_clusters - 1 : n - 1);
	if (p->n_clusters <= 0)
	{
		for (int64_t i = 0; i < n; i++)
			if (result->rho[i] >= p->rho_min && result->delta[i] >= p->delta_min)
				result->is_center[i] = 1;
	}
	return GC_OK;
}

/* Phase assign: the centres, numbered by rank, and every other point's cluster. */
static gc_status
dpeaks_assign(dpeaks_ws *ws)
{
	gc_dpeaks_result *result = ws->result;
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = choose_centres(ws)) != GC_OK)
		return st;
	result->n_centers = 0;
	for (int64_t r = 0; r < ws->n; r++)
	{
		int64_t		i = ws->by_rank[r];

		if (result->is_center[i])
			result->cluster[i] = (int32_t) result->n_centers++;
		else
			result->cluster[i] = result->cluster[ws->nbr[i]];
	}
	return GC_OK;
}

/* Density peaks of n >= 1 rows: the four phases, each timed into timing.phase_ms. */
gc_status
gc_core_dpeaks(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			   const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	static gc_status (*const phases[GC_PHASES]) (dpeaks_ws *) = {
		[GC_DPEAKS_PHASE_DC] = dpeaks_dc,
		[GC_DPEAKS_PHASE_RHO] = dpeaks_rho,
		[GC_DPEAKS_PHASE_DELTA] = dpeaks_delta,
		[GC_DPEAKS_PHASE_ASSIGN] = dpeaks_assign
	};
	dpeaks_ws	ws;
	gc_status	st = GC_OK;

	dpeaks_ws_init(&ws, ctx, x, dtype, n, d, params, result);
	for (int p = 0; p < GC_PHASES && st == GC_OK; p++)
	{
		double		t0 = gc_core_now_ms();

		st = phases[p] (&ws);
		ctx->timing->phase_ms[p] = gc_core_now_ms() - t0;
	}
	dpeaks_ws_free(&ws);
	return st;
}
