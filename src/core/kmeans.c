/*
 * kmeans.c
 *    k-means on the CPU: Lloyd's algorithm on Euclidean distance.
 *
 * The rules, which the GPU back end (cuda/kmeans.cu) follows as well:
 *
 *  - Initial centroids: the rows picked by k-means++ (D^2 sampling) or by
 *    'random' (k distinct rows), both driven by the seed through the shared
 *    code of common/kmeans_init.h, or the caller's k x d initial_centroids.
 *    Cluster j starts at the j-th initial centroid and keeps number j.
 *  - One iteration: every row goes to its nearest centroid (the lowest
 *    cluster number on a tie), then every centroid moves to the mean of its
 *    rows.  A cluster left empty is re-seeded with the row farthest from its
 *    centroid (common/kmeans_init.h, gc_kmeans_reseed_empty).
 *  - Stop after an iteration in which no row changed cluster, or in which
 *    the sum over clusters of the squared centroid move is at most
 *    tol * (mean per-feature variance of the data), or after max_iter
 *    iterations.  These are scikit-learn's rules for algorithm='lloyd'.
 *  - Unless it stopped because nothing changed, the rows are assigned once
 *    more to the final centroids, so that labels and centroids agree.
 *  - Output: label and distance to the assigned centroid per row
 *    (gc_metric_distance of its dist2: the Euclidean distance, or the
 *    cosine distance dist2 / 2); per cluster the centroid, the size and the
 *    inertia (the sum of the rows' dist2, or of their cosine distances);
 *    and the number of iterations run.
 *  - Precision: the rows are float or double (gc_dtype) and are read as
 *    they are, each coordinate converted exactly to double; every distance,
 *    sum and centroid is in double either way, so the rules above are the
 *    same in both precisions and only the input values differ.
 *  - Metric cosine, spherical k-means (as FAISS's 'spherical'): the rows
 *    arrive scaled to unit length (and given centroids too); a row goes to
 *    the centroid of least dist2, which for unit rows is the one of largest
 *    cosine similarity; after every update each centroid holding rows is
 *    scaled to unit length (gc_kmeans_unit_centroid of common/kmeans_init.h)
 *    before its move is measured, so the stopping rule reads unit rows and
 *    unit centroids.  Seeding and re-seeding as for Euclidean, on dist2.
 *
 * The phases over one workspace: init (statistics, initial centroids), then
 * per iteration assign, update and converge, then final (the last
 * assignment and the output).  Distances are accumulated in double.
 *
 * With several threads (pool.h) the rows are assigned in blocks on every
 * thread.  When k * d is small and n large the sums are taken per block of
 * KM_SUM_BLOCK rows as each block is assigned and added in block order (on
 * one thread too); otherwise the sums of a cluster are taken over its rows
 * in row order: a stable counting sort of the labels groups the rows (narrow ones)
 * or their numbers (wide ones) by cluster, and each cluster's rows are
 * summed in that order on some thread; on few threads wide rows are summed
 * in slices of features, each thread reading its slice of every row in
 * order.
 * The centroids, labels and inertia are therefore those of one thread, bit
 * for bit, whatever the number of threads.
 * Lloyd's iteration and its GPU counterpart follow Li, Zhao and Chu,
 * "Speeding up K-Means Algorithm by GPUs"; k-means++ is Arthur and
 * Vassilvitskii's, "k-means++: The Advantages of Careful Seeding".
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "core.h"
#include "kmeans_gemm.h"
#include "kmeans_init.h"
#include "kmeans_step.h"
#include "metric.h"
#include "phases.h"

/*
 * Hamerly's bounds ("Making k-means even faster", SDM 2010) skip most of the
 * distance work once the centroids settle: u[i] bounds from above the
 * distance of row i to its centroid, l[i] from below its distance to every
 * other centroid, half[j] is half the distance from centroid j to the
 * nearest other centroid.  A row whose u is below max(half, l) keeps its
 * cluster without any distance computed.  The skip asks for a margin of
 * BOUND_SLACK so that rounding never makes it differ from the full search,
 * and a row within that margin of a tie gets the full search, which picks
 * the lowest cluster number as Lloyd's does.  Used when k >= 3 and k * k <= n
 * (the centroid-to-centroid distances cost k * k * d per iteration).
 */
#define BOUND_SLACK 1e-9

/*
 * The full searches go through the checked matrix product (kmeans_gemm.h)
 * from this many features and centroids on, when OpenBLAS is installed.
 */
#define KM_GEMM_MIN_D 64
#define KM_GEMM_MIN_K 16

/*
 * Sums in blocks: when k * d is at most KM_BLOCKED_KD, the sums of each
 * block of KM_SUM_BLOCK rows are taken while the block is assigned (each
 * cluster's rows of the block in row order), and a cluster's sum is the sum
 * of its blocks' sums in block order.  The blocks are fixed by n, so the
 * sums are the same whatever the threads; inputs of at most KM_SUM_BLOCK
 * rows are one block, summed in row order.
 */
#define KM_SUM_BLOCK 16384
#define KM_BLOCKED_KD 4096

/*
 * Work between two questions to the cancel callback, counted in products of
 * coordinates (a distance over d features counts d), about a few
 * milliseconds whatever n, k and d.
 */
#define CANCEL_WORK (INT64_C(1) << 22)

/*
 * The sums of an iteration, gathered while the rows are assigned: per
 * cluster the sum of its rows (in row order) and their number, and how many
 * rows changed cluster.
 */
typedef struct km_acc
{
	double	   *sums;			/* [k, d] */
	int64_t    *counts;			/* [k] */
	int64_t		changed;
} km_acc;

/* How far the centroids moved in the last update, for the bounds. */
typedef struct km_moves
{
	const double *delta;		/* [k] how far each centroid moved */
	int32_t		jmax;			/* the centroid that moved most */
	double		second;			/* the largest move of the others */
} km_moves;

/*
 * What group_rows places in order: the rows themselves (narrow rows: the
 * sums then read memory in order) or the rows' d2 (the inertia).
 */
typedef enum
{
	GROUP_INDEX,
	GROUP_ROWS,
	GROUP_D2
} group_what;

/*
 * Rows of at most this many features are grouped by value rather than by number.
 */
#define KM_NARROW 8

/* Everything one k-means call holds; freed by kmeans_ws_free. */
typedef struct kmeans_ws
{
	gc_core_ctx *ctx;
	const void *x;				/* [n, d] the rows, of element type dtype */
	gc_dtype	dtype;
	gc_metric	metric;			/* COSINE: unit rows, centroids scaled to unit length */
	int64_t		n;
	int32_t		d;
	int32_t		k;
	size_t		kd;
	const gc_kmeans_params *params;
	gc_kmeans_result *result;
	int32_t    *labels;			/* [n] the caller's result->labels */

	double	   *cen;			/* [k, d] the centroids */
	double	   *sums;			/* [k, d] */
	int64_t    *counts;			/* [k] */
	double	   *d2;				/* [n] squared distance to the assigned centroid */
	double	   *scratch;		/* [4 d] of the statistics */
	double	   *work;			/* [k d + k] transposed centroids and distances of one row */

	int			bounds;			/* Hamerly's bounds in use */
	double	   *bound_u;		/* [n] */
	double	   *bound_l;		/* [n] */
	double	   *half;			/* [k] */
	double	   *delta;			/* [k] */

	km_acc		acc;
	km_moves	moves;
	double		tol_abs;		/* tol in the units of the squared moves */

	/* the last iteration */
	int			d2_valid;		/* d2 holds the distances of the last assignment */
	int32_t		reseeded;		/* clusters re-seeded by the last update */
	double		shift;			/* sum of the squared centroid moves of the last update */
	int			strict;			/* stopped because nothing changed */
	int64_t		work_done;		/* work units since the last cancel question */

	/*
	 * The checked product (kmeans_gemm.h) for the full searches, when
	 * OpenBLAS is there and d and k are large enough: prepared per
	 * assignment; each thread its scratch and a batch of rows.
	 */
	int			use_gemm;		/* the call may use it */
	int			gemm;			/* this assignment uses it */
	gc_kmg	   *kmg;
	gc_kmg_scratch **kscratch;	/* [threads] */
	int32_t		batch;			/* rows per product */
	int64_t    *brows;			/* [threads, batch] rows waiting for the product */
	int32_t    *blabel;			/* [threads, batch] its answers */
	double	   *bbest;
	double	   *bsecond;
	double	   *mean;			/* [d] the data mean, the centre of the product */

	/* several threads */
	int			threads;		/* of the pool */
	int			par;			/* the blocked (parallel) assignment and sums: threads > 1, gemm or blocked */
	int			blocked;		/* sums in blocks of KM_SUM_BLOCK rows (bpart) */
	double	   *bpart;			/* [group_blocks, k, d] each block's sums */
	double	   *tdist;			/* [threads, tdist_stride] distances of one row, per thread */
	int64_t		tdist_stride;	/* k rounded up to a cache line of doubles */
	char	   *gbuf;			/* [n] what group_rows placed: row numbers, narrow rows or d2 */
	group_what	group;
	int64_t    *cluster_start;	/* [k + 1] cluster j's rows in order */
	int64_t    *block_hist;		/* [blocks, k] rows per cluster of each block, then its offsets */
	int64_t		group_blocks;
	int64_t		group_chunk;	/* rows per block of the count */
} kmeans_ws;

/* Rows between two questions to the cancel callback when each costs work units. */
static int64_t
cancel_stride(int64_t work)
{
	int64_t		rows = work > 0 ? CANCEL_WORK / work : CANCEL_WORK;

	return rows < 1 ? 1 : rows;
}

/* Counts work units; asks the cancel callback each time CANCEL_WORK of them are done. */
static int
work_cancelled(kmeans_ws *ws, int64_t units)
{
	return gc_core_work(ws->ctx, &ws->work_done, units, CANCEL_WORK);
}

/* Adds row i of x (element type dt) to the sums s [d], feature by feature. */
static inline void
row_add(double *GC_RESTRICT s, const void *x, gc_dtype dt, int64_t i, int32_t d)
{
	if (dt == GC_F64)
	{
		const double *row = (const double *) x + i * d;

		for (int32_t t = 0; t < d; t++)
			s[t] += row[t];
	}
	else
	{
		const float *row = (const float *) x + i * d;

		for (int32_t t = 0; t < d; t++)
			s[t] += (double) row[t];
	}
}

/* Squared distance of row i of x (element type dt) to the centroid c [d], in feature order. */
static inline double
row_d2(const void *x, gc_dtype dt, int64_t i, int32_t d, const double *c)
{
	double		s = 0.0;

	if (dt == GC_F64)
	{
		const double *row = (const double *) x + i * d;

		for (int32_t t = 0; t < d; t++)
		{
			double		diff = row[t] - c[t];

			s += diff * diff;
		}
	}
	else
	{
		const float *row = (const float *) x + i * d;

		for (int32_t t = 0; t < d; t++)
		{
			double		diff = (double) row[t] - c[t];

			s += diff * diff;
		}
	}
	return s;
}

/* Adds row i, now in cluster j (before: old), to the sums. */
static inline void
acc_add(km_acc *acc, const void *x, gc_dtype dt, int64_t i, int32_t d, int32_t j, int32_t old)
{
	row_add(acc->sums + (int64_t) j * d, x, dt, i, d);
	acc->counts[j]++;
	acc->changed += j != old;
}

/*
 * The squared distances of one row to the k centroids, transposed
 * (cent[t * k + j]; gc_kmeans_dist_f32/_f64 of common/kmeans_step.h, the
 * loop the k-means step shares): the loop over centroids vectorizes, each distance still
 * summed over the features in order (no sum is reordered, no multiply-add
 * contracted), so the vector code gives the scalar code's bits.  GCC
 * vectorizes it only when told.  On x86-64 it is also built for AVX2 and
 * AVX-512, and km_pick_kernel() chooses by what the CPU has (a plain
 * function pointer, set on the caller's thread before any worker starts).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define KM_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define KM_VECTORIZE
#endif

typedef void (*km_dist_fn) (const float *row, int32_t d, const double *cent, int32_t k,
							double *dist);
typedef void (*km_dist_f64_fn) (const double *row, int32_t d, const double *cent, int32_t k,
								double *dist);

KM_VECTORIZE static void
dist_generic(const float *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f32(row, d, cent, k, dist);
}

KM_VECTORIZE static void
dist_generic_f64(const double *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f64(row, d, cent, k, dist);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define KM_X86_KERNELS 1
KM_VECTORIZE __attribute__((target("avx2"))) static void
dist_avx2(const float *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f32(row, d, cent, k, dist);
}

KM_VECTORIZE __attribute__((target("avx512f"))) static void
dist_avx512(const float *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f32(row, d, cent, k, dist);
}

KM_VECTORIZE __attribute__((target("avx2"))) static void
dist_avx2_f64(const double *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f64(row, d, cent, k, dist);
}

KM_VECTORIZE __attribute__((target("avx512f"))) static void
dist_avx512_f64(const double *row, int32_t d, const double *cent, int32_t k, double *dist)
{
	gc_kmeans_dist_f64(row, d, cent, k, dist);
}
#endif

static km_dist_fn dist_to_centroids = dist_generic;
static km_dist_f64_fn dist_to_centroids_f64 = dist_generic_f64;

/* Chooses the distance kernel for this CPU (all give the same bits). */
static void
km_pick_kernel(void)
{
#ifdef KM_X86_KERNELS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
	{
		dist_to_centroids = dist_avx512;
		dist_to_centroids_f64 = dist_avx512_f64;
	}
	else if (__builtin_cpu_supports("avx2"))
	{
		dist_to_centroids = dist_avx2;
		dist_to_centroids_f64 = dist_avx2_f64;
	}
	else
	{
		dist_to_centroids = dist_generic;
		dist_to_centroids_f64 = dist_generic_f64;
	}
#endif
}

/*
 * Nearest centroid of rows [from, to): label and squared distance, and the
 * squared distance to the second nearest when second is not NULL.  The
 * centroids are transposed, cent[t * k + j], so that the inner loop runs
 * over centroids and vectorizes; each distance is still summed over the
 * features in order, as gc_dist2 and the GPU's exact pass do.  dist is
 * scratch of k doubles.
 */
static void
assign_rows(const void *x, gc_dtype dt, int64_t from, int64_t to, int32_t d,
			const double *cent, int32_t k, int32_t *labels, double *d2, double *second,
			double *dist, km_acc *acc)
{
	for (int64_t i = from; i < to; i++)
	{
		double		best,
					next = HUGE_VAL;
		int32_t		bj = 0;

		if (dt == GC_F64)
			dist_to_centroids_f64((const double *) x + i * d, d, cent, k, dist);
		else
			dist_to_centroids((const float *) x + i * d, d, cent, k, dist);
		best = dist[0];
		for (int32_t j = 1; j < k; j++)
		{
			if (dist[j] < best)
			{
				next = best;
				best = dist[j];
				bj = j;
			}
			else if (dist[j] < next)
				next = dist[j];
		}
		if (acc)
			acc_add(acc, x, dt, i, d, bj, labels[i]);
		labels[i] = bj;
		d2[i - from] = best;
		if (second)
			second[i - from] = next;
	}
}

static gc_status assign_parallel(kmeans_ws *ws, double *second, const km_moves *moves,
								 int bounded, km_acc *acc);
static gc_status exact_d2_parallel(kmeans_ws *ws);
static gc_status bounds_half_parallel(kmeans_ws *ws);

/* Transposes the centroids [k, d] into cent [d, k]. */
static void
transpose_centroids(const double *cen, int32_t k, int32_t d, double *cent)
{
	for (int32_t j = 0; j < k; j++)
		for (int32_t t = 0; t < d; t++)
			cent[(int64_t) t * k + j] = cen[(int64_t) j * d + t];
}

/*
 * Assigns every row to the centroids, with the second nearest distance when
 * second is not NULL and the sums when acc is not NULL.
 */
static gc_status
assign_all(kmeans_ws *ws, double *second, km_acc *acc)
{
	int64_t		stride = cancel_stride((int64_t) ws->k * ws->d);
	double	   *cent = ws->work;
	double	   *dist = ws->work + (int64_t) ws->k * ws->d;

	transpose_centroids(ws->cen, ws->k, ws->d, cent);
	ws->gemm = ws->use_gemm && gc_kmg_prepare(ws->kmg, ws->cen, ws->mean);
	if (ws->par)
		return assign_parallel(ws, second, NULL, 0, acc);
	for (int64_t from = 0; from < ws->n; from += stride)
	{
		int64_t		to = from + stride < ws->n ? from + stride : ws->n;

		if (gc_core_cancelled(ws->ctx))
			return GC_ERR_CANCELLED;
		assign_rows(ws->x, ws->dtype, from, to, ws->d, cent, ws->k, ws->labels, ws->d2 + from,
					second ? second + from : NULL, dist, acc);
	}
	return GC_OK;
}

/* Squared distance of every row to its assigned centroid. */
static gc_status
exact_d2(kmeans_ws *ws)
{
	int32_t		d = ws->d;
	int64_t		stride = cancel_stride(d);

	if (ws->threads > 1)
		return exact_d2_parallel(ws);
	for (int64_t i = 0; i < ws->n; i++)
	{
		ws->d2[i] = row_d2(ws->x, ws->dtype, i, d, ws->cen + (int64_t) ws->labels[i] * d);
		if ((i + 1) % stride == 0 && gc_core_cancelled(ws->ctx))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/*
 * half[j] for centroids [jb, je): the distances of centroid j to all
 * centroids by the row kernel over the transposed centroids (ws->work), so
 * each pair's dist2 is summed over the features in order; (a - b)^2 and
 * (b - a)^2 are the same number, so the value of a pair is the same from
 * either end, and half[j] the same whatever the blocks.  dist: k doubles.
 */
static int64_t
half_rows(kmeans_ws *ws, int64_t jb, int64_t je, double *dist)
{
	for (int64_t j = jb; j < je; j++)
	{
		double		h = HUGE_VAL;

		dist_to_centroids_f64(ws->cen + j * ws->d, ws->d, ws->work, ws->k, dist);
		for (int32_t j2 = 0; j2 < ws->k; j2++)
		{
			double		v = 0.5 * sqrt(dist[j2]);

			if (j2 != j && v < h)
				h = v;
		}
		ws->half[j] = h;
	}
	return (je - jb) * (int64_t) ws->k * ws->d;
}

/* half[j]: half the distance from centroid j to the nearest other centroid (ws->work transposed). */
static gc_status
bounds_half(kmeans_ws *ws)
{
	if (ws->threads > 1)
		return bounds_half_parallel(ws);
	for (int32_t j = 0; j < ws->k; j++)
		if (work_cancelled(ws, half_rows(ws, j, j + 1, ws->work + ws->kd)))
			return GC_ERR_CANCELLED;
	return GC_OK;
}

/*
 * Row i under Hamerly's bounds: moves its bounds by the last centroid moves
 * (when moves is not NULL) and tells whether the bounds keep its cluster
 * (1), after computing its distance to it when they need it, or whether it
 * needs the full search (0).  Adds the work done (work_cancelled's units).
 */
static int
bounded_keep(kmeans_ws *ws, int64_t i, const km_moves *moves, int64_t *work)
{
	int32_t		a = ws->labels[i];
	double	   *u = ws->bound_u;
	double	   *l = ws->bound_l;
	double		m;

	*work += 1;
	if (moves)
	{
		u[i] += moves->delta[a];
		l[i] -= a == moves->jmax ? moves->second : moves->delta[moves->jmax];
	}
	m = ws->half[a] > l[i] ? ws->half[a] : l[i];
	if (u[i] * (1.0 + BOUND_SLACK) >= m)
	{
		u[i] = sqrt(row_d2(ws->x, ws->dtype, i, ws->d, ws->cen + (int64_t) a * ws->d));
		*work += ws->d;
	}
	return u[i] * (1.0 + BOUND_SLACK) < m;
}

/*
 * Row i under Hamerly's bounds: keeps its cluster when the bounds allow,
 * else gets the full search.  Returns the work done.
 */
static int64_t
bounded_row_in(kmeans_ws *ws, int64_t i, const km_moves *moves, km_acc *acc, double *dist)
{
	int32_t		d = ws->d;
	double		best,
				next;
	int64_t		work = 0;

	if (bounded_keep(ws, i, moves, &work))
	{
		if (acc)
			acc_add(acc, ws->x, ws->dtype, i, d, ws->labels[i], ws->labels[i]);
		return work;
	}
	assign_rows(ws->x, ws->dtype, i, i + 1, d, ws->work, ws->k, ws->labels, &best, &next, dist, acc);
	ws->bound_u[i] = sqrt(best);
	ws->bound_l[i] = sqrt(next);
	return work + (int64_t) ws->k * d;
}

/* The same with the one-thread scratch. */
static int64_t
bounded_row(kmeans_ws *ws, int64_t i, const km_moves *moves, km_acc *acc)
{
	return bounded_row_in(ws, i, moves, acc, ws->work + (int64_t) ws->k * ws->d);
}

/* Assigns every row under Hamerly's bounds, with the sums when acc is not NULL. */
static gc_status
assign_bounded(kmeans_ws *ws, const km_moves *moves, km_acc *acc)
{
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	transpose_centroids(ws->cen, ws->k, ws->d, ws->work);
	if ((st = bounds_half(ws)) != GC_OK)
		return st;
	ws->gemm = ws->use_gemm && gc_kmg_prepare(ws->kmg, ws->cen, ws->mean);
	if (ws->par)
		return assign_parallel(ws, NULL, moves, 1, acc);
	for (int64_t i = 0; i < ws->n; i++)
		if (work_cancelled(ws, bounded_row(ws, i, moves, acc)))
			return GC_ERR_CANCELLED;
	return GC_OK;
}

/* ---------------------------------------------------------------- several threads */

/* The distance scratch of a thread: k doubles. */
static inline double *
thread_dist(const kmeans_ws *ws, const gc_worker *w)
{
	return ws->tdist + (int64_t) w->id * ws->tdist_stride;
}

/* What a parallel assignment does to each block of rows. */
typedef struct assign_job
{
	kmeans_ws  *ws;
	double	   *second;			/* assign_all: squared distance to the second nearest, or NULL */
	const km_moves *moves;		/* assign_bounded */
	int			bounded;
	int			count;			/* the rows per cluster of each block into block_hist */
	int64_t		changed;		/* atomic: rows that changed cluster */
} assign_job;

/*
 * Rows brows[0 .. nb) of worker w through the checked product: labels, and
 * the bounds (bounded) or d2 and second.  Returns the rows that changed
 * cluster, or -1 when the loop must stop.
 */
static int64_t
gemm_flush(kmeans_ws *ws, gc_worker *w, const assign_job *job, const int64_t *rows, int64_t from,
		   int32_t nb)
{
	int32_t    *lab = ws->blabel + (int64_t) w->id * ws->batch;
	double	   *best = ws->bbest + (int64_t) w->id * ws->batch;
	double	   *second = ws->bsecond + (int64_t) w->id * ws->batch;
	int64_t		changed = 0;
	int64_t		work;

	if (job->bounded)
	{
		work = gc_kmg_assign(ws->kmg, ws->kscratch[w->id], ws->x, rows, 0, nb, lab, best, second, NULL);
		for (int32_t q = 0; q < nb; q++)
		{
			int64_t		i = rows[q];

			changed += ws->labels[i] != lab[q];
			ws->labels[i] = lab[q];
			ws->bound_u[i] = sqrt(best[q]);
			ws->bound_l[i] = sqrt(second[q]);
		}
	}
	else
	{
		work = gc_kmg_assign(ws->kmg, ws->kscratch[w->id], ws->x, NULL, from, nb, lab, ws->d2 + from,
							 job->second ? job->second + from : NULL, NULL);
		for (int32_t q = 0; q < nb; q++)
		{
			changed += ws->labels[from + q] != lab[q];
			ws->labels[from + q] = lab[q];
		}
	}
	return gc_worker_tick(w, work, CANCEL_WORK) ? -1 : changed;
}

/*
 * Rows [b, e) through the checked product, in batches: every row
 * (assign_all), or under the bounds those the bounds do not keep.  Returns
 * the rows that changed cluster, or -1 when the loop must stop.
 */
static int64_t
gemm_block(kmeans_ws *ws, gc_worker *w, const assign_job *job, int64_t b, int64_t e)
{
	int64_t    *rows = ws->brows + (int64_t) w->id * ws->batch;
	int64_t		changed = 0;
	int64_t		c;
	int32_t		nb = 0;

	if (!job->bounded)
	{
		for (int64_t from = b; from < e; from += ws->batch)
		{
			if ((c = gemm_flush(ws, w, job, NULL, from, (int32_t) (e - from < ws->batch ? e - from : ws->batch))) < 0)
				return -1;
			changed += c;
		}
		return changed;
	}
	for (int64_t i = b; i < e; i++)
	{
		int64_t		work = 0;

		if (!bounded_keep(ws, i, job->moves, &work))
			rows[nb++] = i;
		if (gc_worker_tick(w, work, CANCEL_WORK))
			return -1;
		if (nb == ws->batch || (i + 1 == e && nb > 0))
		{
			if ((c = gemm_flush(ws, w, job, rows, 0, nb)) < 0)
				return -1;
			changed += c;
			nb = 0;
		}
	}
	return changed;
}

/*
 * Group block gb of the rows (group_chunk rows; see group_rows): labels and
 * d2 or bounds, and with job->count the block's rows per cluster into its
 * row of block_hist.
 */
static gc_status
assign_block(void *arg, gc_worker *w, int64_t gb, int64_t ge)
{
	assign_job *job = arg;
	kmeans_ws  *ws = job->ws;
	int64_t		changed = 0;
	int64_t		b = gb * ws->group_chunk;
	int64_t		e = ws->n - b > ws->group_chunk ? b + ws->group_chunk : ws->n;
	int64_t    *h = ws->block_hist + gb * ws->k;

	if (ws->gemm)
	{
		if ((changed = gemm_block(ws, w, job, b, e)) < 0)
			return GC_ERR_CANCELLED;
	}
	else if (!job->bounded)
	{
		int64_t		stride = cancel_stride((int64_t) ws->k * ws->d);

		for (int64_t from = b; from < e; from += stride)
		{
			int64_t		to = from + stride < e ? from + stride : e;

			for (int64_t i = from; i < to; i++)
			{
				int32_t		old = ws->labels[i];

				assign_rows(ws->x, ws->dtype, i, i + 1, ws->d, ws->work, ws->k, ws->labels, ws->d2 + i,
							job->second ? job->second + i : NULL, thread_dist(ws, w), NULL);
				changed += ws->labels[i] != old;
			}
			if (gc_worker_tick(w, (to - from) * (int64_t) ws->k * ws->d, CANCEL_WORK))
				return GC_ERR_CANCELLED;
		}
	}
	else
		for (int64_t i = b; i < e; i++)
		{
			int32_t		old = ws->labels[i];
			int64_t		work = bounded_row_in(ws, i, job->moves, NULL, thread_dist(ws, w));

			changed += ws->labels[i] != old;
			if (gc_worker_tick(w, work, CANCEL_WORK))
				return GC_ERR_CANCELLED;
		}
	if (job->count)
	{
		memset(h, 0, sizeof(int64_t) * (size_t) ws->k);
		for (int64_t i = b; i < e; i++)
			h[ws->labels[i]]++;
		if (ws->blocked)
		{
			double	   *part = ws->bpart + gb * (int64_t) ws->kd;

			memset(part, 0, sizeof(double) * ws->kd);
			for (int64_t i = b; i < e; i++)
				row_add(part + (int64_t) ws->labels[i] * ws->d, ws->x, ws->dtype, i, ws->d);
		}
	}
	__atomic_fetch_add(&job->changed, changed, __ATOMIC_RELAXED);
	return GC_OK;
}

/* The rows per cluster of a block of rows, into its row of block_hist. */
static gc_status
count_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	kmeans_ws  *ws = arg;
	int64_t    *h = ws->block_hist + b * ws->k;
	int64_t		lo = b * ws->group_chunk;
	int64_t		hi = ws->n - lo > ws->group_chunk ? lo + ws->group_chunk : ws->n;

	memset(h, 0, sizeof(int64_t) * (size_t) ws->k);
	for (int64_t i = lo; i < hi; i++)
		h[ws->labels[i]]++;
	return gc_worker_tick(w, hi - lo, CANCEL_WORK) ? GC_ERR_CANCELLED : GC_OK;
}

/* The rows of a block to their places in order, each block's offsets in its row of block_hist. */
static gc_status
scatter_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	kmeans_ws  *ws = arg;
	int64_t    *off = ws->block_hist + b * ws->k;
	int64_t		lo = b * ws->group_chunk;
	int64_t		hi = ws->n - lo > ws->group_chunk ? lo + ws->group_chunk : ws->n;
	size_t		rb = gc_dtype_size(ws->dtype) * (size_t) ws->d;

	switch (ws->group)
	{
		case GROUP_INDEX:
			for (int64_t i = lo; i < hi; i++)
				((int64_t *) ws->gbuf)[off[ws->labels[i]]++] = i;
			break;
		case GROUP_D2:
			for (int64_t i = lo; i < hi; i++)
				((double *) ws->gbuf)[off[ws->labels[i]]++] = ws->d2[i];
			break;
		case GROUP_ROWS:
			if (rb == 8)
				for (int64_t i = lo; i < hi; i++)
					memcpy(ws->gbuf + 8 * off[ws->labels[i]]++, (const char *) ws->x + 8 * i, 8);
			else
				for (int64_t i = lo; i < hi; i++)
					memcpy(ws->gbuf + rb * off[ws->labels[i]]++, (const char *) ws->x + rb * i, rb);
			break;
	}
	return gc_worker_tick(w, (hi - lo) * (ws->group == GROUP_ROWS ? ws->d : 1), CANCEL_WORK) ?
		GC_ERR_CANCELLED : GC_OK;
}

/*
 * The rows grouped by cluster, a stable counting sort of the labels: the
 * counts of the clusters, and in gbuf from cluster_start[j] to
 * cluster_start[j + 1] what is placed (group_what) of cluster j's rows, in
 * row order: each block's rows land after those of the blocks before it,
 * so the order does not depend on the blocks or the threads.
 */
static gc_status
group_rows(kmeans_ws *ws, group_what what, int counted)
{
	int64_t		start = 0;
	gc_status	st;

	ws->group = what;
	if (!counted && (st = gc_pool_for(ws->ctx->pool, ws->group_blocks, 1, count_block, ws)) != GC_OK)
		return st;
	for (int32_t j = 0; j < ws->k; j++)
	{
		int64_t		c = 0;

		ws->cluster_start[j] = start;
		for (int64_t b = 0; b < ws->group_blocks; b++)
		{
			int64_t    *h = ws->block_hist + b * ws->k + j;
			int64_t		rows = *h;

			*h = start + c;
			c += rows;
		}
		ws->counts[j] = c;
		start += c;
	}
	ws->cluster_start[ws->k] = start;
	return gc_pool_for(ws->ctx->pool, ws->group_blocks, 1, scatter_block, ws);
}

/*
 * s [d] += rows [from, to) of x, each feature summed in row order: for one
 * to four features in registers (the same additions in the same order as
 * row_add, without the round trip through memory).
 */
#define NARROW_SUM(T, D) \
	do { \
		const T *GC_RESTRICT r_ = (const T *) x + from * (D); \
		double		a_[4] = {0}; \
		for (int32_t t_ = 0; t_ < (D); t_++) \
			a_[t_] = s[t_]; \
		for (int64_t i_ = 0; i_ < to - from; i_++) \
			for (int32_t t_ = 0; t_ < (D); t_++) \
				a_[t_] += (double) r_[i_ * (D) + t_]; \
		for (int32_t t_ = 0; t_ < (D); t_++) \
			s[t_] = a_[t_]; \
	} while (0)

static void
narrow_sum(double *GC_RESTRICT s, const void *x, gc_dtype dt, int64_t from, int64_t to, int32_t d)
{
	if (dt == GC_F32)
		switch (d)
		{
			case 1: NARROW_SUM(float, 1); return;
			case 2: NARROW_SUM(float, 2); return;
			case 3: NARROW_SUM(float, 3); return;
			case 4: NARROW_SUM(float, 4); return;
		}
	else
		switch (d)
		{
			case 1: NARROW_SUM(double, 1); return;
			case 2: NARROW_SUM(double, 2); return;
			case 3: NARROW_SUM(double, 3); return;
			case 4: NARROW_SUM(double, 4); return;
		}
	for (int64_t i = from; i < to; i++)
		row_add(s, x, dt, i, d);
}

/* Per cluster, in row order: the sums of the rows (sums != NULL) or of d2 (inertia != NULL). */
typedef struct sum_job
{
	kmeans_ws  *ws;
	double	   *sums;
	double	   *inertia;
} sum_job;

/* Clusters [jb, je): each sums its rows in row order (as group_rows placed them). */
static gc_status
sum_block(void *arg, gc_worker *w, int64_t jb, int64_t je)
{
	sum_job    *job = arg;
	kmeans_ws  *ws = job->ws;
	int32_t		d = ws->d;

	for (int64_t j = jb; j < je; j++)
	{
		int64_t		first = ws->cluster_start[j];
		int64_t		m = ws->cluster_start[j + 1] - first;
		int64_t		stride = cancel_stride(d + 1);

		if (job->sums)
		{
			double	   *s = job->sums + j * d;

			memset(s, 0, sizeof(double) * (size_t) d);
			for (int64_t from = 0; from < m; from += stride)
			{
				int64_t		to = from + stride < m ? from + stride : m;

				if (ws->group == GROUP_ROWS)
					narrow_sum(s, ws->gbuf, ws->dtype, first + from, first + to, d);
				else
					for (int64_t r = from; r < to; r++)
						row_add(s, ws->x, ws->dtype, ((const int64_t *) ws->gbuf)[first + r], d);
				if (gc_worker_tick(w, (to - from) * (int64_t) d, CANCEL_WORK))
					return GC_ERR_CANCELLED;
			}
		}
		else
		{
			const double *v = (const double *) ws->gbuf + first;
			double		s = 0.0;

			for (int64_t r = 0; r < m; r++)
				s += v[r];
			job->inertia[j] = s;
			if (gc_worker_tick(w, m, CANCEL_WORK))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/*
 * Wide rows on few threads: the features cut into one slice per thread (of
 * at least KM_SLICE_MIN features, so that each thread reads runs of whole
 * cache lines), each thread reading every row in order and summing its
 * slice of the row into the row's cluster.  Each feature's sums are thus in
 * row order, and the rows are read from memory once in all.  On more
 * threads the rows are grouped by number instead.
 */
#define KM_SLICE_MIN 64

typedef struct slice_job
{
	kmeans_ws  *ws;
	double	   *sums;
	int32_t		width;			/* features per slice */
} slice_job;

static gc_status
slice_block(void *arg, gc_worker *w, int64_t sb, int64_t se)
{
	slice_job  *job = arg;
	kmeans_ws  *ws = job->ws;
	int32_t		d = ws->d;
	int64_t		stride = cancel_stride(job->width + 1);

	for (int64_t sl = sb; sl < se; sl++)
	{
		int32_t		f0 = (int32_t) sl * job->width;
		int32_t		f1 = f0 + job->width < d ? f0 + job->width : d;

		for (int32_t j = 0; j < ws->k; j++)
			memset(job->sums + (int64_t) j * d + f0, 0, sizeof(double) * (size_t) (f1 - f0));
		for (int64_t from = 0; from < ws->n; from += stride)
		{
			int64_t		to = from + stride < ws->n ? from + stride : ws->n;

			for (int64_t i = from; i < to; i++)
			{
				double	   *GC_RESTRICT acc = job->sums + (int64_t) ws->labels[i] * d;

				if (ws->dtype == GC_F64)
				{
					const double *row = (const double *) ws->x + i * d;

					for (int32_t t = f0; t < f1; t++)
						acc[t] += row[t];
				}
				else
				{
					const float *row = (const float *) ws->x + i * d;

					for (int32_t t = f0; t < f1; t++)
						acc[t] += (double) row[t];
				}
			}
			if (gc_worker_tick(w, (to - from) * (f1 - f0 + 1), CANCEL_WORK))
				return GC_ERR_CANCELLED;
		}
	}
	return GC_OK;
}

/* The slices of wide rows on this many threads, or 0 when they would be too narrow. */
static int32_t
slice_width(const kmeans_ws *ws)
{
	int32_t		w = (ws->d + ws->threads - 1) / ws->threads;

	return w >= KM_SLICE_MIN || ws->threads == 1 ? w : 0;
}

/* The counts of the clusters from block_hist (the blocks' counts). */
static void
counts_from_blocks(kmeans_ws *ws)
{
	for (int32_t j = 0; j < ws->k; j++)
	{
		int64_t		c = 0;

		for (int64_t b = 0; b < ws->group_blocks; b++)
			c += ws->block_hist[b * ws->k + j];
		ws->counts[j] = c;
	}
}

/* Sums [b, e) of the clusters from the blocks' sums, in block order. */
static gc_status
combine_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	sum_job    *job = arg;
	kmeans_ws  *ws = job->ws;

	for (int64_t q = b; q < e; q++)
	{
		double		v = 0.0;

		for (int64_t g = 0; g < ws->group_blocks; g++)
			v += ws->bpart[g * (int64_t) ws->kd + q];
		job->sums[q] = v;
	}
	return gc_worker_tick(w, (e - b) * ws->group_blocks, CANCEL_WORK) ? GC_ERR_CANCELLED : GC_OK;
}

/*
 * The sums (or inertia) and counts of the clusters from the labels, each
 * cluster in row order; counted: block_hist holds the blocks' counts already.
 */
static gc_status
sums_by_cluster(kmeans_ws *ws, double *sums, double *inertia, int counted)
{
	sum_job		job = {ws, sums, inertia};
	gc_status	st;

	if (sums && ws->blocked && counted)
	{
		counts_from_blocks(ws);
		return gc_pool_for(ws->ctx->pool, (int64_t) ws->kd, gc_pool_grain(ws->ctx->pool, (int64_t) ws->kd, 256),
						   combine_block, &job);
	}
	if (sums && ws->d > KM_NARROW && slice_width(ws) > 0)
	{
		slice_job	sj = {ws, sums, slice_width(ws)};

		if (!counted && (st = gc_pool_for(ws->ctx->pool, ws->group_blocks, 1, count_block, ws)) != GC_OK)
			return st;
		counts_from_blocks(ws);
		return gc_pool_for(ws->ctx->pool, (ws->d + sj.width - 1) / sj.width, 1, slice_block, &sj);
	}
	if ((st = group_rows(ws, !sums ? GROUP_D2 : ws->d <= KM_NARROW && !ws->blocked ? GROUP_ROWS : GROUP_INDEX,
						 counted)) != GC_OK)
		return st;
	return gc_pool_for(ws->ctx->pool, ws->k, gc_pool_grain(ws->ctx->pool, ws->k, 1), sum_block, &job);
}

/* Squared distance of each row of a block to its assigned centroid. */
static gc_status
exact_d2_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	kmeans_ws  *ws = arg;
	int32_t		d = ws->d;

	for (int64_t i = b; i < e; i++)
		ws->d2[i] = row_d2(ws->x, ws->dtype, i, d, ws->cen + (int64_t) ws->labels[i] * d);
	return gc_worker_tick(w, (e - b) * d, CANCEL_WORK) ? GC_ERR_CANCELLED : GC_OK;
}

static gc_status
exact_d2_parallel(kmeans_ws *ws)
{
	return gc_pool_for(ws->ctx->pool, ws->n, gc_pool_grain(ws->ctx->pool, ws->n, 4096),
					   exact_d2_block, ws);
}

/* half[j] of a block of centroids. */
static gc_status
half_block(void *arg, gc_worker *w, int64_t jb, int64_t je)
{
	kmeans_ws  *ws = arg;

	for (int64_t j = jb; j < je; j++)
		if (gc_worker_tick(w, half_rows(ws, j, j + 1, thread_dist(ws, w)), CANCEL_WORK))
			return GC_ERR_CANCELLED;
	return GC_OK;
}

static gc_status
bounds_half_parallel(kmeans_ws *ws)
{
	return gc_pool_for(ws->ctx->pool, ws->k, 8, half_block, ws);
}

/*
 * The parallel assignment: labels (and d2 or the bounds) of every row, then
 * with acc the sums and counts of each cluster in row order.
 */
static gc_status
assign_parallel(kmeans_ws *ws, double *second, const km_moves *moves, int bounded, km_acc *acc)
{
	assign_job	job = {ws, second, moves, bounded, acc != NULL, 0};
	gc_status	st;

	st = gc_pool_for(ws->ctx->pool, ws->group_blocks, 1, assign_block, &job);
	if (st == GC_OK && acc)
	{
		acc->changed = job.changed;
		st = sums_by_cluster(ws, acc->sums, NULL, 1);
	}
	return st;
}

/* A loop over the rows in blocks on every thread. */
static gc_status
per_row(kmeans_ws *ws, gc_pool_fn fn)
{
	return gc_pool_for(ws->ctx->pool, ws->n, gc_pool_grain(ws->ctx->pool, ws->n, 4096), fn, ws);
}

/* The first bounds of a block of rows: the distances to the nearest and second nearest centroid. */
static gc_status
bounds_from_d2_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	kmeans_ws  *ws = arg;

	for (int64_t i = b; i < e; i++)
	{
		ws->bound_u[i] = sqrt(ws->d2[i]);
		ws->bound_l[i] = sqrt(ws->bound_l[i]);
	}
	return gc_worker_tick(w, e - b, CANCEL_WORK) ? GC_ERR_CANCELLED : GC_OK;
}

/* The output distances of a block of rows. */
static gc_status
distance_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	kmeans_ws  *ws = arg;

	for (int64_t i = b; i < e; i++)
		ws->result->distance[i] = gc_metric_distance(ws->metric, ws->d2[i]);
	return gc_worker_tick(w, e - b, CANCEL_WORK) ? GC_ERR_CANCELLED : GC_OK;
}

/* ---------------------------------------------------------------- workspace */

/* Fills the workspace with the input, no buffer yet. */
static void
kmeans_ws_init(kmeans_ws *ws, gc_core_ctx *ctx, const void *x, gc_dtype dtype, gc_metric metric,
			   int64_t n, int32_t d, const gc_kmeans_params *params, gc_kmeans_result *result)
{
	memset(ws, 0, sizeof(*ws));
	ws->ctx = ctx;
	ws->x = x;
	ws->dtype = dtype;
	ws->metric = metric;
	ws->n = n;
	ws->d = d;
	ws->k = params->k;
	ws->kd = (size_t) params->k * d;
	ws->params = params;
	ws->result = result;
	ws->labels = result->labels;
	ws->bounds = ws->k >= 3 && (int64_t) ws->k * ws->k <= n;
	/* a small input is done sooner on one thread than the threads are started */
	ws->threads = n >= 4096 ? gc_pool_threads(ctx->pool) : 1;
	/*
	 * the checked product pays from a few dozen products per row (OpenBLAS
	 * opened here, on the caller's thread, unless tuning.cpu_blas says never)
	 */
	ws->use_gemm = d >= KM_GEMM_MIN_D && ws->k >= KM_GEMM_MIN_K && ctx->tuning->cpu_blas >= 0 &&
		gc_blas_available();
	ws->blocked = (int64_t) ws->k * d <= KM_BLOCKED_KD && n > KM_SUM_BLOCK;
	ws->par = ws->threads > 1 || ws->use_gemm || ws->blocked;
}

/* Allocates the working arrays. */
static gc_status
kmeans_ws_alloc(kmeans_ws *ws)
{
	size_t		n = (size_t) ws->n;
	size_t		k = (size_t) ws->k;
	size_t		bytes = sizeof(double) * (2 * ws->kd + n + 4 * (size_t) ws->d + ws->kd + k) +
		sizeof(int64_t) * k + (ws->bounds ? sizeof(double) * (2 * n + 2 * k) : 0);

	ws->cen = malloc(sizeof(double) * ws->kd);
	ws->sums = malloc(sizeof(double) * ws->kd);
	ws->d2 = malloc(sizeof(double) * n);
	ws->scratch = malloc(sizeof(double) * (size_t) ws->d * 4);
	ws->work = malloc(sizeof(double) * (ws->kd + k));
	if (ws->bounds)
	{
		ws->bound_u = malloc(sizeof(double) * n);
		ws->bound_l = malloc(sizeof(double) * n);
		ws->half = malloc(sizeof(double) * k);
		ws->delta = malloc(sizeof(double) * k);
	}
	ws->counts = malloc(sizeof(int64_t) * k);
	if (!ws->cen || !ws->sums || !ws->d2 || !ws->scratch || !ws->work || !ws->counts ||
		(ws->bounds && (!ws->bound_u || !ws->bound_l || !ws->half || !ws->delta)))
		return gc_core_oom(ws->ctx, bytes,
						   "out of memory for k-means working arrays (%lld rows, k = %d)",
						   (long long) ws->n, ws->k);
	if (ws->par)
	{
		/* blocks of the assignment and count: several per thread, at most 2^22 counters in all */
		int64_t		blocks = (int64_t) ws->threads * 8;
		size_t		gbytes;

		if (blocks > ws->n / 4096)
			blocks = ws->n / 4096;
		if (blocks > (INT64_C(1) << 22) / (int64_t) k)
			blocks = (INT64_C(1) << 22) / (int64_t) k;
		if (blocks < 1)
			blocks = 1;
		ws->group_chunk = ws->blocked ? KM_SUM_BLOCK : (ws->n + blocks - 1) / blocks;
		ws->group_blocks = (ws->n + ws->group_chunk - 1) / ws->group_chunk;
		/* each thread's distances on cache lines of their own: they are written for every row */
		ws->tdist_stride = (int64_t) (k + 7) / 8 * 8;
		ws->tdist = aligned_alloc(64, sizeof(double) * (size_t) ws->tdist_stride * (size_t) ws->threads);
		/* narrow rows are grouped by value only where the sums are not taken in blocks */
		gbytes = !ws->blocked && ws->d <= KM_NARROW && gc_dtype_size(ws->dtype) * ws->d > 8 ?
			gc_dtype_size(ws->dtype) * ws->d * n : 8 * n;
		ws->gbuf = malloc(gbytes);
		ws->cluster_start = malloc(sizeof(int64_t) * (k + 1));
		ws->block_hist = malloc(sizeof(int64_t) * k * (size_t) ws->group_blocks);
		if (ws->blocked)
		{
			ws->bpart = malloc(sizeof(double) * ws->kd * (size_t) ws->group_blocks);
			if (!ws->bpart)
				return gc_core_oom(ws->ctx, sizeof(double) * ws->kd * (size_t) ws->group_blocks,
								   "out of memory for the k-means sums (%lld rows, k = %d)",
								   (long long) ws->n, ws->k);
		}
		if (!ws->tdist || !ws->gbuf || !ws->cluster_start || !ws->block_hist)
			return gc_core_oom(ws->ctx, sizeof(double) * (size_t) ws->tdist_stride * (size_t) ws->threads +
							   gbytes + sizeof(int64_t) * (k + 1) +
							   sizeof(int64_t) * k * (size_t) ws->group_blocks,
							   "out of memory for k-means on %d threads (%lld rows, k = %d)",
							   ws->threads, (long long) ws->n, ws->k);
	}
	if (ws->use_gemm)
	{
		size_t		t = (size_t) ws->threads;
		int			ok;

		ws->kmg = gc_kmg_create(ws->k, ws->d, ws->dtype);
		ws->batch = gc_kmg_default_batch(ws->k);
		ws->kscratch = calloc(t, sizeof(gc_kmg_scratch *));
		ws->brows = malloc(sizeof(int64_t) * t * (size_t) ws->batch);
		ws->blabel = malloc(sizeof(int32_t) * t * (size_t) ws->batch);
		ws->bbest = malloc(sizeof(double) * t * (size_t) ws->batch);
		ws->bsecond = malloc(sizeof(double) * t * (size_t) ws->batch);
		ws->mean = calloc((size_t) ws->d, sizeof(double));
		ok = ws->kmg && ws->kscratch && ws->brows && ws->blabel && ws->bbest && ws->bsecond && ws->mean;
		for (size_t i = 0; ok && i < t; i++)
			ok = (ws->kscratch[i] = gc_kmg_scratch_create(ws->kmg, ws->batch)) != NULL;
		if (!ok)
			return gc_core_oom(ws->ctx, gc_kmg_bytes(ws->k, ws->d, ws->dtype) +
							   t * (gc_kmg_scratch_bytes(ws->k, ws->d, ws->dtype, ws->batch) +
									(size_t) ws->batch * 28),
							   "out of memory for the k-means matrix product (k = %d, d = %d, %d threads)",
							   ws->k, ws->d, ws->threads);
	}
	return GC_OK;
}

/* Frees every buffer of the workspace. */
static void
kmeans_ws_free(kmeans_ws *ws)
{
	free(ws->cen);
	free(ws->sums);
	free(ws->d2);
	free(ws->scratch);
	free(ws->work);
	free(ws->bound_u);
	free(ws->bound_l);
	free(ws->half);
	free(ws->delta);
	free(ws->counts);
	free(ws->tdist);
	free(ws->gbuf);
	free(ws->cluster_start);
	free(ws->block_hist);
	free(ws->bpart);
	if (ws->kscratch)
		for (int i = 0; i < ws->threads; i++)
			gc_kmg_scratch_free(ws->kscratch[i]);
	free(ws->kscratch);
	gc_kmg_free(ws->kmg);
	free(ws->brows);
	free(ws->blabel);
	free(ws->bbest);
	free(ws->bsecond);
	free(ws->mean);
	memset(ws, 0, sizeof(*ws));
}

/* ---------------------------------------------------------------- statistics */

/*
 * The data statistics (common/kmeans_init.h's rules: per-feature mean,
 * population variance, their mean as the unit of tol) in fixed blocks of
 * KM_STATS_BLOCK rows: each block's sums in row order, the blocks' sums
 * added in block order, so the values depend on n alone, not on the
 * threads.
 */
#define KM_STATS_BLOCK 16384

typedef struct stats_job
{
	kmeans_ws  *ws;
	int			pass;			/* 1: sums, 2: squared deviations from mean */
	double	   *part;			/* [blocks, d] */
	double	   *lo;				/* [blocks, d] pass 1 */
	double	   *hi;
	const double *mean;			/* pass 2 */
} stats_job;

static gc_status
stats_block(void *arg, gc_worker *w, int64_t bb, int64_t be)
{
	stats_job  *job = arg;
	kmeans_ws  *ws = job->ws;
	int32_t		d = ws->d;

	for (int64_t b = bb; b < be; b++)
	{
		int64_t		from = b * KM_STATS_BLOCK;
		int64_t		to = ws->n - from > KM_STATS_BLOCK ? from + KM_STATS_BLOCK : ws->n;
		double	   *part = job->part + b * d;

		for (int32_t t = 0; t < d; t++)
			part[t] = 0.0;
		if (job->pass == 1)
		{
			double	   *lo = job->lo + b * d;
			double	   *hi = job->hi + b * d;

			for (int32_t t = 0; t < d; t++)
			{
				lo[t] = HUGE_VAL;
				hi[t] = -HUGE_VAL;
			}
			gc_kmeans_stats_chunk(ws->x, ws->dtype, from, to, d, 1, part, lo, hi, NULL);
		}
		else
			gc_kmeans_stats_chunk(ws->x, ws->dtype, from, to, d, 2, (double *) job->mean, NULL, NULL, part);
		if (gc_worker_tick(w, (to - from) * d, CANCEL_WORK))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/* The mean [d] of the rows and, when mean_var is not NULL, the mean per-feature variance. */
static gc_status
km_stats(kmeans_ws *ws, double *mean, double *mean_var)
{
	int32_t		d = ws->d;
	int64_t		blocks = (ws->n + KM_STATS_BLOCK - 1) / KM_STATS_BLOCK;
	size_t		bytes = sizeof(double) * (size_t) blocks * d * 3;
	stats_job	job;
	gc_status	st;

	memset(&job, 0, sizeof(job));
	job.ws = ws;
	job.part = malloc(bytes);
	if (!job.part)
		return gc_core_oom(ws->ctx, bytes, "out of memory for the k-means data statistics");
	job.lo = job.part + blocks * d;
	job.hi = job.lo + blocks * d;
	job.pass = 1;
	st = gc_pool_for(ws->ctx->pool, blocks, 1, stats_block, &job);
	if (st == GC_OK)
	{
		for (int32_t t = 0; t < d; t++)
		{
			double		m = 0.0;

			for (int64_t b = 0; b < blocks; b++)
				m += job.part[b * d + t];
			mean[t] = m / (double) ws->n;
		}
		if (mean_var)
		{
			double		total = 0.0;

			job.pass = 2;
			job.mean = mean;
			st = gc_pool_for(ws->ctx->pool, blocks, 1, stats_block, &job);
			for (int32_t t = 0; st == GC_OK && t < d; t++)
			{
				double		v = 0.0;

				for (int64_t b = 0; b < blocks; b++)
					v += job.part[b * d + t];
				total += v / (double) ws->n;
			}
			*mean_var = total / (double) d;
		}
	}
	free(job.part);
	return st;
}

/* ---------------------------------------------------------------- init */

/* The initial centroids [k, d] as the shared rules pick them (d2 as scratch). */
static gc_status
initial_centroids(kmeans_ws *ws)
{
	const gc_kmeans_params *p = ws->params;
	int64_t    *rows;
	int			rc;

	if (p->init == GC_KMEANS_INIT_GIVEN)
	{
		memcpy(ws->cen, p->initial_centroids, sizeof(double) * ws->kd);
		return GC_OK;
	}
	rows = malloc(sizeof(int64_t) * (size_t) p->k);
	if (!rows)
		return gc_core_oom(ws->ctx, sizeof(int64_t) * (size_t) p->k,
						   "out of memory for k-means initialization");
	if (p->init == GC_KMEANS_INIT_RANDOM)
		rc = gc_kmeans_random_rows(ws->n, p->k, p->seed, rows) == 0 ? 0 : 1;
	else
	{
		/* the seeding's own status, its error already in ctx */
		gc_status	st = gc_core_kmeans_plusplus_rows(ws->ctx, ws->x, ws->dtype, ws->n, ws->d, p->k, p->seed,
													  gc_kmeans_init_trials(p->init, p->k), rows, ws->d2);

		if (st != GC_OK)
		{
			free(rows);
			return st;
		}
		rc = 0;
	}
	if (rc == 0)
		for (int32_t j = 0; j < p->k; j++)
			for (int32_t t = 0; t < ws->d; t++)
				ws->cen[(int64_t) j * ws->d + t] = gc_kmeans_x_at(ws->x, ws->dtype, rows[j] * ws->d + t);
	free(rows);
	if (rc == 1)
		return gc_core_oom(ws->ctx, sizeof(int64_t) * (size_t) ws->n,
						   "out of memory for k-means initialization");
	if (rc == 2)
		return gc_core_cancel_status(ws->ctx);
	return GC_OK;
}

/* Phase init: the working arrays, the unit of tol, the initial centroids. */
static gc_status
kmeans_init(kmeans_ws *ws)
{
	double		mean_var;
	gc_status	st;

	if (gc_core_cancelled(ws->ctx))
		return GC_ERR_CANCELLED;
	if ((st = kmeans_ws_alloc(ws)) != GC_OK)
		return st;
	gc_core_debug(ws->ctx, "k-means: %lld rows, d = %d, k = %d, Hamerly's bounds %s, full searches %s%s",
				  (long long) ws->n, ws->d, ws->k, ws->bounds ? "on" : "off",
				  ws->use_gemm ? "through the checked product of " : "exact",
				  ws->use_gemm ? gc_blas_describe() : "");
	if ((st = km_stats(ws, ws->scratch, &mean_var)) != GC_OK)
		return st;
	ws->tol_abs = ws->params->tol * mean_var;
	if (ws->use_gemm)
		memcpy(ws->mean, ws->scratch, sizeof(double) * (size_t) ws->d);
	if ((st = initial_centroids(ws)) != GC_OK)
		return st;

	/* no row has a cluster yet: the first iteration counts every row as changed */
	for (int64_t i = 0; i < ws->n; i++)
		ws->labels[i] = -1;
	ws->acc.sums = ws->sums;
	ws->acc.counts = ws->counts;
	ws->moves.delta = ws->delta;
	ws->moves.jmax = 0;
	ws->moves.second = 0.0;
	return GC_OK;
}

/* ---------------------------------------------------------------- iterations */

/* Phase assign: every row to its nearest centroid, gathering the sums (iteration it). */
static gc_status
kmeans_assign(kmeans_ws *ws, int32_t it)
{
	gc_status	st;

	memset(ws->sums, 0, sizeof(double) * ws->kd);
	memset(ws->counts, 0, sizeof(int64_t) * (size_t) ws->k);
	ws->acc.changed = 0;
	if (ws->bounds && it > 0)
	{
		ws->d2_valid = 0;
		return assign_bounded(ws, &ws->moves, &ws->acc);
	}
	ws->d2_valid = 1;
	st = assign_all(ws, ws->bounds ? ws->bound_l : NULL, &ws->acc);
	if (st == GC_OK && ws->bounds)
		st = per_row(ws, bounds_from_d2_block);
	return st;
}

/* The largest centroid move and the largest of the others, for the next bounded assignment. */
static void
kmeans_note_moves(kmeans_ws *ws)
{
	km_moves   *mv = &ws->moves;

	mv->jmax = 0;
	mv->second = 0.0;
	for (int32_t j = 1; j < ws->k; j++)
		if (ws->delta[j] > ws->delta[mv->jmax])
			mv->jmax = j;
	for (int32_t j = 0; j < ws->k; j++)
		if (j != mv->jmax && ws->delta[j] > mv->second)
			mv->second = ws->delta[j];
}

/* Phase update: re-seeds empty clusters, then moves every centroid to its mean. */
static gc_status
kmeans_update(kmeans_ws *ws)
{
	int32_t		d = ws->d;

	ws->shift = 0.0;
	ws->reseeded = 0;
	for (int32_t j = 0; j < ws->k; j++)
		if (ws->counts[j] == 0)
		{
			gc_status	st;

			if (!ws->d2_valid && (st = exact_d2(ws)) != GC_OK)
				return st;
			st = gc_kmeans_reseed_empty(ws->x, ws->dtype, ws->n, d, ws->k, ws->labels, ws->d2, NULL,
										ws->sums, ws->counts, &ws->reseeded,
										ws->ctx->cancel, ws->ctx->cancel_arg);
			if (st == GC_ERR_CANCELLED)
				return gc_core_cancel_status(ws->ctx);
			if (st == GC_ERR_OUT_OF_MEMORY)
				return gc_core_oom(ws->ctx, gc_kmeans_reseed_bytes(ws->n, ws->k),
								   "out of memory for re-seeding empty k-means clusters");
			if (st != GC_OK)
				return gc_error_set(ws->ctx->err, st,
									"k-means re-seeding failed, please report a bug");
			break;
		}
	for (int32_t j = 0; j < ws->k; j++)
	{
		double	   *c = ws->cen + (int64_t) j * d;
		double	   *v = ws->scratch;	/* [d]: the statistics are done with it */
		double		move = 0.0;

		for (int32_t t = 0; t < d; t++)
			v[t] = ws->counts[j] > 0 ? ws->sums[(int64_t) j * d + t] / (double) ws->counts[j] : c[t];
		if (ws->metric == GC_METRIC_COSINE && ws->counts[j] > 0)
			gc_kmeans_unit_centroid(v, d);
		for (int32_t t = 0; t < d; t++)
		{
			double		diff = v[t] - c[t];

			move += diff * diff;
			c[t] = v[t];
		}
		ws->shift += move;
		if (ws->bounds)
			ws->delta[j] = sqrt(move);
	}
	if (ws->bounds)
		kmeans_note_moves(ws);
	return GC_OK;
}

/* Phase converge: 1 when the iterations stop (nothing changed, or the moves within tol). */
static int
kmeans_converged(kmeans_ws *ws)
{
	/* Nothing changed: the centroids did not move, labels hold. */
	if (ws->acc.changed == 0 && ws->reseeded == 0)
	{
		ws->strict = 1;
		return 1;
	}
	return ws->shift <= ws->tol_abs;
}

/* Lloyd's iterations: assign, update, converge, at most max_iter times. */
static gc_status
kmeans_iterate(kmeans_ws *ws)
{
	int32_t		max_iter = ws->params->max_iter;
	int32_t		it;
	gc_status	st;

	for (it = 0; it < max_iter; it++)
	{
		if ((st = kmeans_assign(ws, it)) != GC_OK ||
			(st = kmeans_update(ws)) != GC_OK)
			return st;
		if (kmeans_converged(ws))
			break;
	}
	ws->result->iterations = it < max_iter ? it + 1 : max_iter;
	return GC_OK;
}

/* ---------------------------------------------------------------- final */

/*
 * The inertia of a cluster from the sum of its rows' dist2 in row order:
 * that sum (Euclidean), or the sum of the cosine distances dist2 / 2, which
 * is the sum halved exactly.
 */
static double
km_inertia(gc_metric metric, double sum_d2)
{
	return metric == GC_METRIC_COSINE ? sum_d2 * 0.5 : sum_d2;
}

/* Phase final: labels for the final centroids, the distances, and the output. */
static gc_status
kmeans_final(kmeans_ws *ws)
{
	gc_kmeans_result *result = ws->result;
	gc_status	st = GC_OK;

	if (!ws->strict)
		st = ws->bounds ? assign_bounded(ws, &ws->moves, NULL) : assign_all(ws, NULL, NULL);
	if (st != GC_OK)
		return st;
	if ((ws->strict || ws->bounds) && (st = exact_d2(ws)) != GC_OK)
		return st;

	memcpy(result->centroids, ws->cen, sizeof(double) * ws->kd);
	if (ws->par)
	{
		/* the inertia of each cluster over its rows in row order, as below */
		if ((st = sums_by_cluster(ws, NULL, result->inertia, 0)) != GC_OK)
			return st;
		for (int32_t j = 0; j < ws->k; j++)
		{
			result->sizes[j] = ws->counts[j];
			result->inertia[j] = km_inertia(ws->metric, result->inertia[j]);
		}
		return per_row(ws, distance_block);
	}
	for (int32_t j = 0; j < ws->k; j++)
	{
		result->sizes[j] = 0;
		result->inertia[j] = 0.0;
	}
	for (int64_t i = 0; i < ws->n; i++)
	{
		result->distance[i] = gc_metric_distance(ws->metric, ws->d2[i]);
		result->sizes[ws->labels[i]]++;
		result->inertia[ws->labels[i]] += ws->d2[i];
	}
	for (int32_t j = 0; j < ws->k; j++)
		result->inertia[j] = km_inertia(ws->metric, result->inertia[j]);
	return GC_OK;
}

/* One k-means run of n >= 1 rows with the seed in params; phase times add up in ctx->timing. */
static gc_status
kmeans_run(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
		   const gc_kmeans_params *params, gc_kmeans_result *result)
{
	gc_timing  *timing = ctx->timing;
	kmeans_ws	ws;
	gc_status	st;
	double		t0 = gc_core_now_ms();

	km_pick_kernel();
	kmeans_ws_init(&ws, ctx, x, dtype, params->metric, n, d, params, result);
	st = kmeans_init(&ws);
	timing->phase_ms[GC_KMEANS_PHASE_INIT] += gc_core_now_ms() - t0;
	if (st == GC_OK)
	{
		t0 = gc_core_now_ms();
		st = kmeans_iterate(&ws);
		timing->phase_ms[GC_KMEANS_PHASE_ITERATIONS] += gc_core_now_ms() - t0;
	}
	if (st == GC_OK)
	{
		t0 = gc_core_now_ms();
		st = kmeans_final(&ws);
		timing->phase_ms[GC_KMEANS_PHASE_FINAL] += gc_core_now_ms() - t0;
	}
	kmeans_ws_free(&ws);
	return st;
}

/* Copies the outputs of run src into dst. */
static void
copy_result(gc_kmeans_result *dst, const gc_kmeans_result *src, int64_t n, int32_t d, int32_t k)
{
	memcpy(dst->labels, src->labels, sizeof(int32_t) * (size_t) n);
	memcpy(dst->distance, src->distance, sizeof(double) * (size_t) n);
	memcpy(dst->centroids, src->centroids, sizeof(double) * (size_t) k * d);
	memcpy(dst->sizes, src->sizes, sizeof(int64_t) * (size_t) k);
	memcpy(dst->inertia, src->inertia, sizeof(double) * (size_t) k);
	dst->iterations = src->iterations;
}

/*
 * k-means of n >= 1 rows; see the rules at the top of this file.  With
 * n_init > 1, run r starts from the seed gc_kmeans_run_seed(seed, r) and the
 * run that gc_kmeans_keep_run picks is returned (common/kmeans_init.h).
 */
gc_status
gc_core_kmeans(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			   const gc_kmeans_params *params, gc_kmeans_result *result)
{
	gc_kmeans_params p = *params;
	gc_kmeans_result tmp;
	double		best;
	int64_t		iters;
	int32_t		k = params->k;
	gc_status	st;

	result->best_run = 0;
	st = kmeans_run(ctx, x, dtype, n, d, &p, result);
	iters = result->iterations;
	if (st != GC_OK || params->n_init <= 1)
	{
		if (st == GC_OK && iters > 0)
			ctx->timing->phase_ms[GC_KMEANS_PHASE_PER_ITERATION] =
			ctx->timing->phase_ms[GC_KMEANS_PHASE_ITERATIONS] / (double) iters;
		return st;
	}
	memset(&tmp, 0, sizeof(tmp));
	tmp.labels = malloc(sizeof(int32_t) * (size_t) n);
	tmp.distance = malloc(sizeof(double) * (size_t) n);
	tmp.centroids = malloc(sizeof(double) * (size_t) k * d);
	tmp.sizes = malloc(sizeof(int64_t) * (size_t) k);
	tmp.inertia = malloc(sizeof(double) * (size_t) k);
	if (!tmp.labels || !tmp.distance || !tmp.centroids || !tmp.sizes || !tmp.inertia)
		st = gc_core_oom(ctx, (sizeof(int32_t) + sizeof(double)) * (size_t) n +
						 (sizeof(double) * (size_t) d + 16) * (size_t) k,
						 "out of memory for the results of k-means runs (%lld rows, k = %d)",
						 (long long) n, k);
	best = gc_kmeans_total_inertia(result->inertia, k);
	for (int32_t r = 1; st == GC_OK && r < params->n_init; r++)
	{
		p.seed = gc_kmeans_run_seed(params->seed, r);
		st = kmeans_run(ctx, x, dtype, n, d, &p, &tmp);
		if (st != GC_OK)
			break;
		iters += tmp.iterations;
		if (gc_kmeans_keep_run(tmp.inertia, k, &best))
		{
			copy_result(result, &tmp, n, d, k);
			result->best_run = r;
		}
		gc_core_debug(ctx, "k-means: run %d of %d, inertia %.17g", r + 1, params->n_init,
					  gc_kmeans_total_inertia(tmp.inertia, k));
	}
	free(tmp.labels);
	free(tmp.distance);
	free(tmp.centroids);
	free(tmp.sizes);
	free(tmp.inertia);
	if (st == GC_OK && iters > 0)
		ctx->timing->phase_ms[GC_KMEANS_PHASE_PER_ITERATION] =
			ctx->timing->phase_ms[GC_KMEANS_PHASE_ITERATIONS] / (double) iters;
	return st;
}

/*
 * k-means assignment of n >= 1 rows to the given centroids: the full search
 * of the final assignment (assign_all), the lowest cluster number on a tie,
 * and the distance in double.
 */
gc_status
gc_core_kmeans_assign(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
					  const gc_kmeans_assign_params *params, gc_kmeans_assign_result *result)
{
	gc_kmeans_params kp;
	gc_kmeans_result kr;
	kmeans_ws	ws;
	gc_status	st = GC_OK;
	double		t0 = gc_core_now_ms();

	memset(&kp, 0, sizeof(kp));
	memset(&kr, 0, sizeof(kr));
	kp.k = params->k;
	kr.labels = result->labels;
	kr.distance = result->distance;
	km_pick_kernel();
	kmeans_ws_init(&ws, ctx, x, dtype, params->metric, n, d, &kp, &kr);
	ws.bounds = 0;
	st = kmeans_ws_alloc(&ws);
	if (st == GC_OK && ws.use_gemm)
		st = km_stats(&ws, ws.mean, NULL);
	if (st == GC_OK)
	{
		memcpy(ws.cen, params->centroids, sizeof(double) * ws.kd);
		ctx->timing->phase_ms[GC_KMEANS_ASSIGN_PHASE_PREPARE] = gc_core_now_ms() - t0;
		t0 = gc_core_now_ms();
		st = assign_all(&ws, NULL, NULL);
		ctx->timing->phase_ms[GC_KMEANS_ASSIGN_PHASE_ASSIGN] = gc_core_now_ms() - t0;
	}
	if (st == GC_OK)
	{
		t0 = gc_core_now_ms();
		st = per_row(&ws, distance_block);
		ctx->timing->phase_ms[GC_KMEANS_ASSIGN_PHASE_DISTANCES] = gc_core_now_ms() - t0;
	}
	kmeans_ws_free(&ws);
	return st;
}
