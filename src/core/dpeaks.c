/*
 * dpeaks.c
 *    Density peaks clustering on the CPU (Rodriguez & Laio 2014; the GPU
 *    formulation of seed 004, CUDA-DP, which the GPU back end follows).
 *
 * The exact rules are in dpeaks_common.h, whose arithmetic this file and
 * cuda/dpeaks.cu share, so that both back ends give bit-identical answers.
 * No N x N matrix is ever stored: memory is linear in n.
 *
 *  dc        exact radix select over all unordered pairs (n <= 50,000), or
 *            the quantile of a seeded sample of 2^22 ordered pairs;
 *  rho       gaussian: all pairs, each once (the sum is order-free);
 *            cutoff: a uniform grid for d <= 3 (whole cells inside the ball
 *            counted at once), all pairs otherwise;
 *  delta     points of rank below GC_DP_BRUTE_RANK scan all denser points,
 *            the others search rings of grid cells (d <= 3), falling back
 *            to the scan when the rings run out;
 *  centres   and a single pass in density order for the labels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "dpeaks_common.h"

#define DP_CANCEL_EVERY 1024
#define DP_COLLECT_MAX (1 << 20)
#define DP_HIST_BITS 20

/* Milliseconds of wall clock (C11 timespec_get). */
static double
dp_now_ms(void)
{
	struct timespec ts;

	timespec_get(&ts, TIME_UTC);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

typedef struct DpCtx
{
	const float *x;
	int64_t		n;
	int32_t		d;
	gc_cancel_fn cancel;
	void	   *cancel_arg;
	int64_t		tick;
	char	   *errbuf;
} DpCtx;

/* Asks the cancel callback every DP_CANCEL_EVERY calls. */
static int
dp_cancelled(DpCtx *c)
{
	if (++c->tick % DP_CANCEL_EVERY != 0)
		return 0;
	return c->cancel && c->cancel(c->cancel_arg);
}

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

/*
 * The k-th smallest (1-based) dist2 over unordered pairs, by radix select on
 * the bit patterns: each pass histograms the next twenty bits of the keys
 * that share the prefix found so far (the seed's binary search over pair
 * counts, 2^20-way); once at most 2^20 candidates remain they are collected
 * and selected directly.  The answer is exact, so the GPU's narrower passes
 * find the same one.
 */
static gc_status
dc_exact(DpCtx *c, int64_t k, uint64_t *key_out)
{
	static const int widths[] = {DP_HIST_BITS, DP_HIST_BITS, DP_HIST_BITS, 64 - 3 * DP_HIST_BITS};
	uint64_t	prefix = 0;
	int			prefix_bits = 0;
	int64_t	   *hist = malloc(sizeof(int64_t) << DP_HIST_BITS);

	if (!hist)
		return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the dc histogram");
	for (int pass = 0; pass < 4; pass++)
	{
		int			w = widths[pass];
		int			shift = 64 - prefix_bits - w;
		uint64_t	mask = (UINT64_C(1) << w) - 1;
		int64_t		cum = 0;
		int			b;

		memset(hist, 0, sizeof(int64_t) << w);
		for (int64_t i = 0; i < c->n; i++)
		{
			const float *xi = c->x + i * c->d;

			if (dp_cancelled(c))
			{
				free(hist);
				return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
			}
			for (int64_t j = i + 1; j < c->n; j++)
			{
				uint64_t	key = gc_dp_key(gc_dist2(xi, c->x + j * c->d, c->d));

				if (prefix_bits > 0 && (key >> (64 - prefix_bits)) != prefix)
					continue;
				hist[(key >> shift) & mask]++;
			}
		}
		for (b = 0; b < (1 << w); b++)
		{
			if (cum + hist[b] >= k)
				break;
			cum += hist[b];
		}
		if (b == (1 << w))
		{
			free(hist);
			return gc_fail(c->errbuf, GC_ERR_INTERNAL, "dc selection lost its target, please report a bug");
		}
		k -= cum;
		prefix = (prefix << w) | (uint64_t) b;
		prefix_bits += w;
		if (prefix_bits == 64)
		{
			*key_out = prefix;
			free(hist);
			return GC_OK;
		}
		if (hist[b] <= DP_COLLECT_MAX)
		{
			int64_t		m = hist[b],
						got = 0;
			uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) (m > 0 ? m : 1));

			free(hist);
			if (!v)
				return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the dc candidates");
			for (int64_t i = 0; i < c->n; i++)
			{
				const float *xi = c->x + i * c->d;

				if (dp_cancelled(c))
				{
					free(v);
					return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
				}
				for (int64_t j = i + 1; j < c->n; j++)
				{
					uint64_t	key = gc_dp_key(gc_dist2(xi, c->x + j * c->d, c->d));

					if ((key >> (64 - prefix_bits)) == prefix && got < m)
						v[got++] = key;
				}
			}
			if (got != m)
			{
				free(v);
				return gc_fail(c->errbuf, GC_ERR_INTERNAL, "dc candidates miscounted, please report a bug");
			}
			qsort(v, (size_t) m, sizeof(uint64_t), cmp_u64);
			*key_out = v[k - 1];
			free(v);
			return GC_OK;
		}
	}
	free(hist);
	return gc_fail(c->errbuf, GC_ERR_INTERNAL, "dc selection did not finish, please report a bug");
}

/* The quantile of a seeded sample of ordered pairs. */
static gc_status
dc_sample(DpCtx *c, double rate, uint64_t seed, uint64_t *key_out)
{
	int64_t		m = GC_DP_DC_SAMPLE_PAIRS;
	uint64_t   *v = malloc(sizeof(uint64_t) * (size_t) m);

	if (!v)
		return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the dc sample");
	for (int64_t p = 0; p < m; p++)
	{
		int64_t		i,
					j;

		if ((p & 0xffff) == 0 && c->cancel && c->cancel(c->cancel_arg))
		{
			free(v);
			return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
		}
		gc_dp_sample_pair(seed, p, c->n, &i, &j);
		v[p] = gc_dp_key(gc_dist2(c->x + i * c->d, c->x + j * c->d, c->d));
	}
	*key_out = select_u64(v, m, gc_dp_quantile_rank(rate, m) - 1);
	free(v);
	return GC_OK;
}

/* ---------------------------------------------------------------- the grid */
typedef struct DpGrid
{
	gc_dp_grid	g;
	int64_t    *cell_start;
	double	   *xs;				/* [d, n] */
	int64_t    *order;			/* sorted position -> row */
	int64_t    *rank;			/* sorted position -> density rank */
} DpGrid;

static void
grid_free(DpGrid *G)
{
	free(G->cell_start);
	free(G->xs);
	free(G->order);
	free(G->rank);
	memset(G, 0, sizeof(*G));
}

/* Builds the grid index over the rows (cell shape from gc_dp_grid_shape). */
static gc_status
grid_build(DpCtx *c, DpGrid *G)
{
	int64_t		n = c->n;
	int32_t		d = c->d;
	double		mn[GC_DP_GRID_MAX_DIM],
				mx[GC_DP_GRID_MAX_DIM];
	int64_t		ncells;
	int64_t    *cell;

	memset(G, 0, sizeof(*G));
	for (int k = 0; k < d; k++)
	{
		mn[k] = INFINITY;
		mx[k] = -INFINITY;
	}
	for (int64_t i = 0; i < n; i++)
		for (int k = 0; k < d; k++)
		{
			double		v = c->x[i * d + k];

			if (v < mn[k])
				mn[k] = v;
			if (v > mx[k])
				mx[k] = v;
		}
	ncells = gc_dp_grid_shape(&G->g, d, n, mn, mx);

	G->cell_start = calloc((size_t) ncells + 1, sizeof(int64_t));
	G->xs = malloc(sizeof(double) * (size_t) (n * d));
	G->order = malloc(sizeof(int64_t) * (size_t) n);
	G->rank = malloc(sizeof(int64_t) * (size_t) n);
	cell = malloc(sizeof(int64_t) * (size_t) n);
	if (!G->cell_start || !G->xs || !G->order || !G->rank || !cell)
	{
		free(cell);
		grid_free(G);
		return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the grid index");
	}
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		id = 0;

		for (int k = d - 1; k >= 0; k--)
			id = id * G->g.dims[k] + gc_dp_cell_of(&G->g, k, (double) c->x[i * d + k]);
		cell[i] = id;
		G->cell_start[id + 1]++;
	}
	for (int64_t q = 0; q < ncells; q++)
		G->cell_start[q + 1] += G->cell_start[q];
	{
		int64_t    *fill = malloc(sizeof(int64_t) * (size_t) ncells);

		if (!fill)
		{
			free(cell);
			grid_free(G);
			return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the grid index");
		}
		memcpy(fill, G->cell_start, sizeof(int64_t) * (size_t) ncells);
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		q = fill[cell[i]]++;

			G->order[q] = i;
			for (int k = 0; k < d; k++)
				G->xs[k * n + q] = (double) c->x[i * d + k];
		}
		free(fill);
	}
	free(cell);
	G->g.cell_start = G->cell_start;
	for (int k = 0; k < GC_DP_GRID_MAX_DIM; k++)
		G->g.xs[k] = k < d ? G->xs + k * n : NULL;
	G->g.rank = G->rank;
	return GC_OK;
}

/* ---------------------------------------------------------------- rho */
static gc_status
rho_gaussian(DpCtx *c, double dc, double *rho)
{
	int64_t		n = c->n;
	double		inv = 1.0 / (dc * dc);
	uint64_t   *hi = calloc((size_t) n, sizeof(uint64_t));
	uint64_t   *lo = calloc((size_t) n, sizeof(uint64_t));

	if (!hi || !lo)
	{
		free(hi);
		free(lo);
		return gc_fail(c->errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the densities");
	}
	for (int64_t i = 0; i < n; i++)
	{
		const float *xi = c->x + i * c->d;

		if (dp_cancelled(c))
		{
			free(hi);
			free(lo);
			return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
		}
		for (int64_t j = i + 1; j < n; j++)
		{
			uint64_t	t = gc_dp_gauss_fixed(gc_dist2(xi, c->x + j * c->d, c->d) * inv);

			if (t)
			{
				gc_dp_acc_add(&hi[i], &lo[i], t);
				gc_dp_acc_add(&hi[j], &lo[j], t);
			}
		}
	}
	for (int64_t i = 0; i < n; i++)
		rho[i] = gc_dp_acc_value(hi[i], lo[i]);
	free(hi);
	free(lo);
	return GC_OK;
}

static gc_status
rho_cutoff(DpCtx *c, double T, DpGrid *G, double *rho)
{
	int64_t		n = c->n;

	if (G->cell_start)
	{
		for (int64_t q = 0; q < n; q++)
		{
			double		p[GC_DP_GRID_MAX_DIM];

			if (dp_cancelled(c))
				return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
			for (int k = 0; k < c->d; k++)
				p[k] = G->xs[k * n + q];
			rho[G->order[q]] = (double) (gc_dp_grid_count(&G->g, p, T) - 1);
		}
		return GC_OK;
	}
	for (int64_t i = 0; i < n; i++)
		rho[i] = 0.0;
	for (int64_t i = 0; i < n; i++)
	{
		const float *xi = c->x + i * c->d;
		int64_t		cnt = 0;

		if (dp_cancelled(c))
			return gc_fail(c->errbuf, GC_ERR_CANCELLED, "canceled");
		for (int64_t j = i + 1; j < n; j++)
			if (gc_dist2(xi, c->x + j * c->d, c->d) < T)
			{
				cnt++;
				rho[j] += 1.0;
			}
		rho[i] += (double) cnt;
	}
	return GC_OK;
}

/* ---------------------------------------------------------------- ranks */
typedef struct RankItem
{
	double		v;
	int64_t		i;
} RankItem;

/* Larger v first, then smaller i. */
static int
cmp_rank_item(const void *a, const void *b)
{
	const RankItem *x = a,
			   *y = b;

	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Nearest denser point of row i (rank r) by scanning every denser point. */
static void
nearest_denser_scan(DpCtx *c, const int64_t *by_rank, int64_t i, int64_t r,
					double *best_d2, int64_t *best_rank)
{
	const float *xi = c->x + i * c->d;
	double		bd2 = INFINITY;
	int64_t		br = -1;

	for (int64_t s = 0; s < r; s++)
	{
		double		d2 = gc_dist2(xi, c->x + by_rank[s] * c->d, c->d);

		if (br < 0 || gc_dp_better(d2, s, bd2, br))
		{
			bd2 = d2;
			br = s;
		}
	}
	*best_d2 = bd2;
	*best_rank = br;
}

/* ---------------------------------------------------------------- entry */
gc_status
gc_dpeaks_cpu(const float *x, int64_t n, int32_t d, const gc_dpeaks_params *params,
			  gc_dpeaks_result *result, gc_timing *timing,
			  gc_cancel_fn cancel, void *cancel_arg, char *errbuf)
{
	DpCtx		c = {x, n, d, cancel, cancel_arg, 0, errbuf};
	DpGrid		G;
	gc_status	st = GC_OK;
	double		t0,
				dc,
				T = 0.0;
	int64_t    *by_rank = NULL,
			   *rank_of = NULL,
			   *nbr = NULL;
	RankItem   *items = NULL;
	int			use_grid = d <= GC_DP_GRID_MAX_DIM;

	memset(&G, 0, sizeof(G));
	if (errbuf)
		errbuf[0] = '\0';
	if (!params || params->struct_size != sizeof(gc_dpeaks_params))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "density peaks parameters of the wrong version");
	if (n < 1 || d < 1 || !x || !result)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "density peaks needs at least one row and one dimension");
	if (params->n_clusters < 0 || params->n_clusters > n)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "n_clusters must be between 1 and the number of rows (%lld)",
					   (long long) n);
	if (!(params->dc >= 0.0) || isinf(params->dc))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "dc must be positive and finite");
	if (params->dc == 0.0 && !(params->neighbor_rate > 0.0 && params->neighbor_rate < 1.0))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "neighbor_rate must be between 0 and 1 exclusive");
	if (params->kernel != GC_DP_KERNEL_GAUSSIAN && params->kernel != GC_DP_KERNEL_CUTOFF)
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "unknown density kernel %d", (int) params->kernel);
	if (params->n_clusters == 0 && (isnan(params->rho_min) || isnan(params->delta_min)))
		return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "rho_min and delta_min must be numbers");

	/* ---- phase 0: dc */
	t0 = dp_now_ms();
	result->dc_sample = 0;
	if (params->dc > 0.0)
	{
		dc = params->dc;
		result->dc_method = GC_DC_GIVEN;
	}
	else
	{
		uint64_t	key = 0;

		if (n < 2)
			return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT, "dc cannot be estimated from a single row");
		if (n <= GC_DP_DC_EXACT_MAX_N)
		{
			int64_t		k = gc_dp_quantile_rank(params->neighbor_rate, gc_dp_ordered_pairs(n));

			st = dc_exact(&c, (k + 1) / 2, &key);
			result->dc_method = GC_DC_EXACT;
		}
		else
		{
			st = dc_sample(&c, params->neighbor_rate,
						   params->seed ? params->seed : GC_DP_DEFAULT_SEED, &key);
			result->dc_method = GC_DC_SAMPLE;
			result->dc_sample = GC_DP_DC_SAMPLE_PAIRS;
		}
		if (st != GC_OK)
			return st;
		dc = sqrt(gc_dp_unkey(key));
		if (!(dc > 0.0))
			return gc_fail(errbuf, GC_ERR_INVALID_ARGUMENT,
						   "the neighbor_rate quantile of the pairwise distances is zero");
	}
	result->dc = dc;
	if (timing)
		timing->phase_ms[0] = dp_now_ms() - t0;

	/* ---- phase 1: rho */
	t0 = dp_now_ms();
	if (use_grid)
	{
		st = grid_build(&c, &G);
		if (st != GC_OK)
			return st;
	}
	if (params->kernel == GC_DP_KERNEL_GAUSSIAN)
		st = rho_gaussian(&c, dc, result->rho);
	else
	{
		T = gc_dp_cutoff_threshold(dc);
		st = rho_cutoff(&c, T, &G, result->rho);
	}
	if (st != GC_OK)
		goto done;
	if (timing)
		timing->phase_ms[1] = dp_now_ms() - t0;

	/* ---- phase 2: density order and delta */
	t0 = dp_now_ms();
	items = malloc(sizeof(RankItem) * (size_t) n);
	by_rank = malloc(sizeof(int64_t) * (size_t) n);
	rank_of = malloc(sizeof(int64_t) * (size_t) n);
	nbr = malloc(sizeof(int64_t) * (size_t) n);
	if (!items || !by_rank || !rank_of || !nbr)
	{
		st = gc_fail(errbuf, GC_ERR_OUT_OF_MEMORY, "out of memory for the density order");
		goto done;
	}
	for (int64_t i = 0; i < n; i++)
	{
		items[i].v = result->rho[i];
		items[i].i = i;
	}
	qsort(items, (size_t) n, sizeof(RankItem), cmp_rank_item);
	for (int64_t r = 0; r < n; r++)
	{
		by_rank[r] = items[r].i;
		rank_of[items[r].i] = r;
	}
	if (use_grid)
		for (int64_t q = 0; q < n; q++)
			G.rank[q] = rank_of[G.order[q]];
	{
		/* the densest point: the largest distance to any point */
		int64_t		top = by_rank[0];
		double		far = 0.0;

		for (int64_t j = 0; j < n; j++)
		{
			double		d2 = gc_dist2(x + top * d, x + j * d, d);

			if (d2 > far)
				far = d2;
		}
		result->delta[top] = sqrt(far);
		nbr[top] = -1;
	}
	{
		int64_t		max_rings = gc_dp_max_rings(d);

		for (int64_t r = 1; r < n; r++)
		{
			int64_t		i = by_rank[r];
			double		bd2 = INFINITY;
			int64_t		br = -1;
			int			ok = 0;

			if (dp_cancelled(&c))
			{
				st = gc_fail(errbuf, GC_ERR_CANCELLED, "canceled");
				goto done;
			}
			if (use_grid && r >= GC_DP_BRUTE_RANK)
			{
				double		p[GC_DP_GRID_MAX_DIM];

				for (int k = 0; k < d; k++)
					p[k] = (double) x[i * d + k];
				ok = gc_dp_grid_nearest_denser(&G.g, p, r, max_rings, &bd2, &br);
			}
			if (!ok)
				nearest_denser_scan(&c, by_rank, i, r, &bd2, &br);
			result->delta[i] = sqrt(bd2);
			nbr[i] = by_rank[br];
		}
	}
	if (timing)
		timing->phase_ms[2] = dp_now_ms() - t0;

	/* ---- phase 3: centres and assignment */
	t0 = dp_now_ms();
	for (int64_t i = 0; i < n; i++)
		result->is_center[i] = 0;
	result->is_center[by_rank[0]] = 1;
	if (params->n_clusters > 0)
	{
		/* the n_clusters - 1 largest gamma among the others, ties by rank */
		int64_t		m = 0;

		for (int64_t r = 1; r < n; r++)
		{
			int64_t		i = by_rank[r];

			items[m].v = result->rho[i] * result->delta[i];
			items[m].i = r;
			m++;
		}
		qsort(items, (size_t) m, sizeof(RankItem), cmp_rank_item);
		for (int64_t s = 0; s < params->n_clusters - 1; s++)
			result->is_center[by_rank[items[s].i]] = 1;
	}
	else
	{
		for (int64_t i = 0; i < n; i++)
			if (result->rho[i] >= params->rho_min && result->delta[i] >= params->delta_min)
				result->is_center[i] = 1;
	}
	result->n_centers = 0;
	for (int64_t r = 0; r < n; r++)
	{
		int64_t		i = by_rank[r];

		if (result->is_center[i])
			result->cluster[i] = (int32_t) result->n_centers++;
		else
			result->cluster[i] = result->cluster[nbr[i]];
	}
	if (timing)
		timing->phase_ms[3] = dp_now_ms() - t0;

done:
	free(items);
	free(by_rank);
	free(rank_of);
	free(nbr);
	grid_free(&G);
	return st;
}
