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
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dpeaks_common.h"

#define DP_CANCEL_EVERY 1024
#define DP_COLLECT_MAX (1 << 20)
#define DP_HIST_BITS 20

/* A value and its index, sorted larger value first, then smaller index. */
typedef struct rank_item
{
	double		v;
	int64_t		i;
} rank_item;

/* Everything one density peaks call holds; freed by dpeaks_ws_free. */
typedef struct dpeaks_ws
{
	gc_core_ctx *ctx;
	const float *x;				/* [n, d] the rows */
	int64_t		n;
	int32_t		d;
	const gc_dpeaks_params *params;
	gc_dpeaks_result *result;
	int64_t		tick;			/* calls of dp_cancelled */
	double		dc;

	/* the grid index (d <= 3) */
	int			use_grid;
	gc_dp_grid	g;
	int64_t    *cell_start;		/* [ncells + 1] */
	double	   *xs;				/* [d, n] coordinates by sorted position */
	int64_t    *order;			/* [n] sorted position -> row */
	int64_t    *rank;			/* [n] sorted position -> density rank */

	/* the density order */
	rank_item  *items;			/* [n] */
	int64_t    *by_rank;		/* [n] rank -> row */
	int64_t    *rank_of;		/* [n] row -> rank */
	int64_t    *nbr;			/* [n] row -> its nearest denser row, -1 for the densest */
} dpeaks_ws;

/* Asks the cancel callback every DP_CANCEL_EVERY calls. */
static int
dp_cancelled(dpeaks_ws *ws)
{
	if (++ws->tick % DP_CANCEL_EVERY != 0)
		return 0;
	return gc_core_cancelled(ws->ctx);
}

/* Fills the workspace with the input, no buffer yet. */
static void
dpeaks_ws_init(dpeaks_ws *ws, gc_core_ctx *ctx, const float *x, int64_t n, int32_t d,
			   const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	memset(ws, 0, sizeof(*ws));
	ws->ctx = ctx;
	ws->x = x;
	ws->n = n;
	ws->d = d;
	ws->params = params;
	ws->result = result;
	ws->use_grid = d <= GC_DP_GRID_MAX_DIM;
}

/* Frees every buffer of the workspace. */
static void
dpeaks_ws_free(dpeaks_ws *ws)
{
	free(ws->cell_start);
	free(ws->xs);
	free(ws->order);
	free(ws->rank);
	free(ws->items);
	free(ws->by_rank);
	free(ws->rank_of);
	free(ws->nbr);
	memset(ws, 0, sizeof(*ws));
}

/* ---------------------------------------------------------------- dc */

/* Orders uint64_t values for qsort. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

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

	memset(hist, 0, sizeof(int64_t) << w);
	for (int64_t i = 0; i < ws->n; i++)
	{
		const float *xi = ws->x + i * ws->d;

		if (dp_cancelled(ws))
			return GC_ERR_CANCELLED;
		for (int64_t j = i + 1; j < ws->n; j++)
		{
			uint64_t	key = gc_dp_key(gc_dist2(xi, ws->x + j * ws->d, ws->d));

			if (prefix_bits > 0 && (key >> (64 - prefix_bits)) != prefix)
				continue;
			hist[(key >> shift) & mask]++;
		}
	}
	return GC_OK;
}

/* The k-th smallest (1-based) of the m pair keys that share prefix, collected and sorted. */
static gc_status
dc_collect(dpeaks_ws *ws, uint64_t prefix, int prefix_bits, int64_t m, int64_t k,
		   uint64_t *key_out)
{
	int64_t		got = 0;
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) (m > 0 ? m : 1));

	if (!v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) m,
						   "out of memory for the dc candidates");
	for (int64_t i = 0; i < ws->n; i++)
	{
		const float *xi = ws->x + i * ws->d;

		if (dp_cancelled(ws))
		{
			free(v);
			return GC_ERR_CANCELLED;
		}
		for (int64_t j = i + 1; j < ws->n; j++)
		{
			uint64_t	key = gc_dp_key(gc_dist2(xi, ws->x + j * ws->d, ws->d));

			if ((key >> (64 - prefix_bits)) == prefix && got < m)
				v[got++] = key;
		}
	}
	if (got != m)
	{
		free(v);
		return gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
							"dc candidates miscounted, please report a bug");
	}
	qsort(v, (size_t) m, sizeof(uint64_t), cmp_u64);
	*key_out = v[k - 1];
	free(v);
	return GC_OK;
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
	uint64_t	prefix = 0;
	int			prefix_bits = 0;
	int64_t	   *hist = malloc(sizeof(int64_t) << DP_HIST_BITS);
	gc_status	st = GC_OK;

	if (!hist)
		return gc_core_oom(ws->ctx, sizeof(int64_t) << DP_HIST_BITS,
						   "out of memory for the dc histogram");
	for (int pass = 0; pass < 4; pass++)
	{
		int			w = widths[pass];
		int64_t		cum = 0;
		int			b;

		if ((st = dc_histogram(ws, hist, prefix, prefix_bits, 64 - prefix_bits - w, w)) != GC_OK)
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
			return dc_collect(ws, prefix, prefix_bits, m, k, key_out);
		}
	}
	free(hist);
	return st;
}

/* The quantile of a seeded sample of ordered pairs. */
static gc_status
dc_sample(dpeaks_ws *ws, double rate, uint64_t seed, uint64_t *key_out)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) m);

	if (!v)
		return gc_core_oom(ws->ctx, sizeof(uint64_t) * (size_t) m,
						   "out of memory for the dc sample");
	for (int64_t p = 0; p < m; p++)
	{
		int64_t		i,
					j;

		if ((p & 0xffff) == 0 && gc_core_cancelled(ws->ctx))
		{
			free(v);
			return GC_ERR_CANCELLED;
		}
		gc_dp_sample_pair(seed, p, ws->n, &i, &j);
		v[p] = gc_dp_key(gc_dist2(ws->x + i * ws->d, ws->x + j * ws->d, ws->d));
	}
	*key_out = select_u64(v, m, gc_dp_quantile_rank(rate, m) - 1);
	free(v);
	return GC_OK;
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
	ws->dc = sqrt(gc_dp_unkey(key));
	if (!(ws->dc > 0.0))
		return gc_error_dpeaks_zero_quantile(ws->ctx->err);
	result->dc = ws->dc;
	gc_core_debug(ws->ctx, "density peaks: dc %.9g (%s)", ws->dc,
				  result->dc_method == GC_DC_EXACT ? "exact" : "sample");
	return GC_OK;
}

/* ---------------------------------------------------------------- the grid */

/* Chooses the cells of the grid index from the range of the rows (gc_dp_grid_shape). */
static int64_t
grid_shape(dpeaks_ws *ws)
{
	double		mn[GC_DP_GRID_MAX_DIM],
				mx[GC_DP_GRID_MAX_DIM];
	int32_t		d = ws->d;

	for (int k = 0; k < d; k++)
	{
		mn[k] = INFINITY;
		mx[k] = -INFINITY;
	}
	for (int64_t i = 0; i < ws->n; i++)
		for (int k = 0; k < d; k++)
		{
			double		v = ws->x[i * d + k];

			if (v < mn[k])
				mn[k] = v;
			if (v > mx[k])
				mx[k] = v;
		}
	return gc_dp_grid_shape(&ws->g, d, ws->n, mn, mx);
}

/* Sorts the rows into the cells: order, coordinates by sorted position, cell starts. */
static void
grid_fill(dpeaks_ws *ws, int64_t ncells, int64_t *cell, int64_t *fill)
{
	int64_t		n = ws->n;
	int32_t		d = ws->d;

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		id = 0;

		for (int k = d - 1; k >= 0; k--)
			id = id * ws->g.dims[k] + gc_dp_cell_of(&ws->g, k, (double) ws->x[i * d + k]);
		cell[i] = id;
		ws->cell_start[id + 1]++;
	}
	for (int64_t q = 0; q < ncells; q++)
		ws->cell_start[q + 1] += ws->cell_start[q];
	memcpy(fill, ws->cell_start, sizeof(int64_t) * (size_t) ncells);
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		q = fill[cell[i]]++;

		ws->order[q] = i;
		for (int k = 0; k < d; k++)
			ws->xs[k * n + q] = (double) ws->x[i * d + k];
	}
}

/* Builds the grid index over the rows. */
static gc_status
grid_build(dpeaks_ws *ws)
{
	int64_t		n = ws->n;
	int64_t		ncells = grid_shape(ws);
	int64_t    *cell;
	int64_t    *fill;

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
	grid_fill(ws, ncells, cell, fill);
	free(cell);
	free(fill);
	ws->g.cell_start = ws->cell_start;
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		ws->g.xs[k] = k < ws->d ? ws->xs + k * n : NULL;
	ws->g.rank = ws->rank;
	return GC_OK;
}

/* ---------------------------------------------------------------- rho */

/* Gaussian densities over all pairs, each once, in fixed point. */
static gc_status
rho_gaussian(dpeaks_ws *ws, double *rho)
{
	int64_t		n = ws->n;
	double		inv = 1.0 / (ws->dc * ws->dc);
	uint64_t   *hi = calloc((size_t) n, sizeof(uint64_t));
	uint64_t   *lo = calloc((size_t) n, sizeof(uint64_t));
	gc_status	st = GC_OK;

	if (!hi || !lo)
	{
		free(hi);
		free(lo);
		return gc_core_oom(ws->ctx, 2 * sizeof(uint64_t) * (size_t) n,
						   "out of memory for the densities");
	}
	for (int64_t i = 0; i < n && st == GC_OK; i++)
	{
		const float *xi = ws->x + i * ws->d;

		if (dp_cancelled(ws))
			st = GC_ERR_CANCELLED;
		for (int64_t j = i + 1; j < n && st == GC_OK; j++)
		{
			uint64_t	t = gc_dp_gauss_fixed(gc_dist2(xi, ws->x + j * ws->d, ws->d) * inv);

			if (t)
			{
				gc_dp_acc_add(&hi[i], &lo[i], t);
				gc_dp_acc_add(&hi[j], &lo[j], t);
			}
		}
	}
	for (int64_t i = 0; i < n && st == GC_OK; i++)
		rho[i] = gc_dp_acc_value(hi[i], lo[i]);
	free(hi);
	free(lo);
	return st;
}

/* Cutoff densities: counted in the grid when there is one, else over all pairs. */
static gc_status
rho_cutoff(dpeaks_ws *ws, double *rho)
{
	int64_t		n = ws->n;
	double		T = gc_dp_cutoff_threshold(ws->dc);

	if (ws->use_grid)
	{
		for (int64_t q = 0; q < n; q++)
		{
			double		p[GC_DP_GRID_MAX_DIM];

			if (dp_cancelled(ws))
				return GC_ERR_CANCELLED;
			for (int k = 0; k < ws->d; k++)
				p[k] = ws->xs[k * n + q];
			rho[ws->order[q]] = (double) (gc_dp_grid_count(&ws->g, p, T) - 1);
		}
		return GC_OK;
	}
	for (int64_t i = 0; i < n; i++)
		rho[i] = 0.0;
	for (int64_t i = 0; i < n; i++)
	{
		const float *xi = ws->x + i * ws->d;
		int64_t		cnt = 0;

		if (dp_cancelled(ws))
			return GC_ERR_CANCELLED;
		for (int64_t j = i + 1; j < n; j++)
			if (gc_dist2(xi, ws->x + j * ws->d, ws->d) < T)
			{
				cnt++;
				rho[j] += 1.0;
			}
		rho[i] += (double) cnt;
	}
	return GC_OK;
}

/* Phase rho: the grid index (d <= 3), then the densities. */
static gc_status
dpeaks_rho(dpeaks_ws *ws)
{
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if (ws->use_grid && (st = grid_build(ws)) != GC_OK)
		return st;
	if (ws->params->kernel == GC_DP_KERNEL_GAUSSIAN)
		return rho_gaussian(ws, ws->result->rho);
	return rho_cutoff(ws, ws->result->rho);
}

/* ---------------------------------------------------------------- delta */

/* Larger v first, then smaller i. */
static int
cmp_rank_item(const void *a, const void *b)
{
	const rank_item *x = a,
			   *y = b;

	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Nearest denser point of row i (rank r) by scanning every denser point. */
static void
nearest_denser_scan(const dpeaks_ws *ws, int64_t i, int64_t r,
					double *best_d2, int64_t *best_rank)
{
	const float *xi = ws->x + i * ws->d;
	double		bd2 = INFINITY;
	int64_t		br = -1;

	for (int64_t s = 0; s < r; s++)
	{
		double		d2 = gc_dist2(xi, ws->x + ws->by_rank[s] * ws->d, ws->d);

		if (br < 0 || gc_dp_better(d2, s, bd2, br))
		{
			bd2 = d2;
			br = s;
		}
	}
	*best_d2 = bd2;
	*best_rank = br;
}

/* The density order: by_rank, rank_of, and the ranks in the grid. */
static gc_status
density_order(dpeaks_ws *ws)
{
	int64_t		n = ws->n;

	ws->items = malloc(sizeof(rank_item) * (size_t) n);
	ws->by_rank = malloc(sizeof(int64_t) * (size_t) n);
	ws->rank_of = malloc(sizeof(int64_t) * (size_t) n);
	ws->nbr = malloc(sizeof(int64_t) * (size_t) n);
	if (!ws->items || !ws->by_rank || !ws->rank_of || !ws->nbr)
		return gc_core_oom(ws->ctx, (sizeof(rank_item) + 3 * sizeof(int64_t)) * (size_t) n,
						   "out of memory for the density order");
	for (int64_t i = 0; i < n; i++)
	{
		ws->items[i].v = ws->result->rho[i];
		ws->items[i].i = i;
	}
	qsort(ws->items, (size_t) n, sizeof(rank_item), cmp_rank_item);
	for (int64_t r = 0; r < n; r++)
	{
		ws->by_rank[r] = ws->items[r].i;
		ws->rank_of[ws->items[r].i] = r;
	}
	if (ws->use_grid)
		for (int64_t q = 0; q < n; q++)
			ws->rank[q] = ws->rank_of[ws->order[q]];
	return GC_OK;
}

/* Phase delta: the density order, then each point's distance to its nearest denser point. */
static gc_status
dpeaks_delta(dpeaks_ws *ws)
{
	const float *x = ws->x;
	int32_t		d = ws->d;
	int64_t		top;
	double		far = 0.0;
	int64_t		max_rings = gc_dp_max_rings(d);
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = density_order(ws)) != GC_OK)
		return st;

	/* the densest point: the largest distance to any point */
	top = ws->by_rank[0];
	for (int64_t j = 0; j < ws->n; j++)
	{
		double		d2 = gc_dist2(x + top * d, x + j * d, d);

		if (d2 > far)
			far = d2;
	}
	ws->result->delta[top] = sqrt(far);
	ws->nbr[top] = -1;

	for (int64_t r = 1; r < ws->n; r++)
	{
		int64_t		i = ws->by_rank[r];
		double		bd2 = INFINITY;
		int64_t		br = -1;
		int			ok = 0;

		if (dp_cancelled(ws))
			return GC_ERR_CANCELLED;
		if (ws->use_grid && r >= GC_DP_BRUTE_RANK)
		{
			double		p[GC_DP_GRID_MAX_DIM];

			for (int k = 0; k < d; k++)
				p[k] = (double) x[i * d + k];
			ok = gc_dp_grid_nearest_denser(&ws->g, p, r, max_rings, &bd2, &br);
		}
		if (!ok)
			nearest_denser_scan(ws, i, r, &bd2, &br);
		ws->result->delta[i] = sqrt(bd2);
		ws->nbr[i] = ws->by_rank[br];
	}
	return GC_OK;
}

/* ---------------------------------------------------------------- assign */

/* The centres: the densest point, and the n_clusters - 1 largest gamma or the thresholds. */
static void
choose_centres(dpeaks_ws *ws)
{
	const gc_dpeaks_params *p = ws->params;
	gc_dpeaks_result *result = ws->result;
	int64_t		n = ws->n;

	for (int64_t i = 0; i < n; i++)
		result->is_center[i] = 0;
	result->is_center[ws->by_rank[0]] = 1;
	if (p->n_clusters > 0)
	{
		/* the n_clusters - 1 largest gamma among the others, ties by rank */
		int64_t		m = 0;

		for (int64_t r = 1; r < n; r++)
		{
			int64_t		i = ws->by_rank[r];

			ws->items[m].v = result->rho[i] * result->delta[i];
			ws->items[m].i = r;
			m++;
		}
		qsort(ws->items, (size_t) m, sizeof(rank_item), cmp_rank_item);
		for (int64_t s = 0; s < p->n_clusters - 1; s++)
			result->is_center[ws->by_rank[ws->items[s].i]] = 1;
	}
	else
	{
		for (int64_t i = 0; i < n; i++)
			if (result->rho[i] >= p->rho_min && result->delta[i] >= p->delta_min)
				result->is_center[i] = 1;
	}
}

/* Phase assign: the centres, numbered by rank, and every other point's cluster. */
static gc_status
dpeaks_assign(dpeaks_ws *ws)
{
	gc_dpeaks_result *result = ws->result;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	choose_centres(ws);
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
gc_core_dpeaks(gc_core_ctx *ctx, const float *x, int64_t n, int32_t d,
			   const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	static gc_status (*const phases[4]) (dpeaks_ws *) = {
		dpeaks_dc, dpeaks_rho, dpeaks_delta, dpeaks_assign
	};
	dpeaks_ws	ws;
	gc_status	st = GC_OK;

	dpeaks_ws_init(&ws, ctx, x, n, d, params, result);
	for (int p = 0; p < 4 && st == GC_OK; p++)
	{
		double		t0 = gc_core_now_ms();

		st = phases[p] (&ws);
		ctx->timing->phase_ms[p] = gc_core_now_ms() - t0;
	}
	dpeaks_ws_free(&ws);
	return st;
}
