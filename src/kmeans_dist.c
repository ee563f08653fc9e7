/*
 * kmeans_dist.c
 *    k-means where the rows live: a Lloyd step as an aggregate whose partial
 *    states combine in any order (gpu_kmeans_step, gpu_kmeans_step_state and
 *    the type gpu_kmeans_state), the model applied row by row
 *    (gpu_kmeans_predict, gpu_kmeans_distance), and a fit that never gathers
 *    the rows (gpu_kmeans_fit_distributed): over SELECT id, f FROM t of a
 *    table Citus distributes, each pass is one call per shard, all at once
 *    (gpu_kmeans_shard_call, as one ordinary distributed query; the worker
 *    backend that serves a shard keeps its rows and Hamerly bounds for the
 *    fit, and searches the rows its bounds leave open on its GPU or its CPU
 *    as the coordinator's gpuclust.device says), whose partial states the
 *    coordinator combines;
 *    over any other query each pass is one aggregate query, which Citus
 *    splits into a partial aggregate on every shard and a combine on the
 *    coordinator, and PostgreSQL's parallel aggregation over its workers.
 *
 * The state holds, per cluster, the number of rows, the exact sum of their
 * features and the exact sum of their squared distances
 * (superaccumulators, common/kmeans_step.h), and the centroids it was made
 * for: whatever the number of shards or workers and whatever the order in
 * which the partial states are combined, the result is the same bit for bit.
 * A row goes to its nearest centroid by gpu_kmeans_assign's rule
 * (gc_kmeans_nearest); the features are read as gpu_kmeans reads them
 * (GcFeatureOpen and GcFeatureCopy of gather.c, in the element type
 * gpuclust.precision gives), and with the cosine metric scaled to unit
 * length before anything else, as are the centroids.
 *
 * The state's text form (its output and input functions) is the state
 * itself, exactly: Citus ships every shard's partial state to the
 * coordinator as that text.  It is "gkm1:" and the hex of a little-endian
 * image: k, d, metric, element type, mode, rows, NULL features, the
 * centroids (IEEE bits), the counts, then every accumulator normalized as a
 * sign, the index of its lowest nonzero 32-bit digit, the number of digits
 * and the digits; its size depends on k, d and the spread of the values,
 * not on the number of rows.
 *
 * The distributed fit seeds with k-means|| (Bahmani, Moseley, Vattani,
 * Kumar and Vassilvitskii, "Scalable K-Means++", VLDB 2012): a first centre
 * chosen by a hash of the row id and the seed, then rounds in which each row
 * is drawn with probability min(1, l d^2(x, C) / phi(C)) by comparing that
 * hash (of the row id, the seed and the round) with it, then the candidates
 * weighted by the rows nearest to them and reclustered into k by weighted
 * k-means++ and Lloyd on the coordinator.  The draws depend only on the row
 * ids, the features and the seed, not on where the rows are stored.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "core.h"
#include "feature.h"
#include "gpu.h"
#include "gpuclust.h"
#include "blas.h"
#include "kmeans.h"
#include "kmeans_gemm.h"
#include "kmeans_init.h"
#include "params.h"
#include "precision.h"
#include "range.h"
#include "kmeans_step.h"
#include "rng.h"
#include "tuning.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_state_in);
PG_FUNCTION_INFO_V1(gpu_kmeans_state_out);
PG_FUNCTION_INFO_V1(gpu_kmeans_step_trans_f4a);
PG_FUNCTION_INFO_V1(gpu_kmeans_step_trans_f8a);
PG_FUNCTION_INFO_V1(gpu_kmeans_step_trans_any);
PG_FUNCTION_INFO_V1(gpu_kmeans_step_combine);
PG_FUNCTION_INFO_V1(gpu_kmeans_step_final);
PG_FUNCTION_INFO_V1(gpu_kmeans_predict);
PG_FUNCTION_INFO_V1(gpu_kmeans_distance);
PG_FUNCTION_INFO_V1(gpu_kmeans_row_hash);
PG_FUNCTION_INFO_V1(gpu_kmeans_sample);
PG_FUNCTION_INFO_V1(gpu_kmeans_fit_distributed);
PG_FUNCTION_INFO_V1(gpu_kmeans_shard_step);
PG_FUNCTION_INFO_V1(gpu_kmeans_shard_rows);
PG_FUNCTION_INFO_V1(gpu_kmeans_shard_once);
PG_FUNCTION_INFO_V1(gpu_kmeans_shard_call);
PG_FUNCTION_INFO_V1(gpu_kmeans_shard_cache);

/*
 * The nearest-centroid search of common/kmeans_step.h, vectorized: built
 * generic, for AVX2 and for AVX-512, the widest the CPU has chosen at the
 * first call (every build gives the same bits: each distance is still summed
 * over the features in order, without multiply-add).
 */
typedef int32_t (*GkmNearestFn) (const double *row, int32_t d, const double *cent, int32_t k,
								 double *dist, double *d2);

#if defined(__GNUC__) && !defined(__clang__)
#define GKM_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define GKM_VECTORIZE
#endif

GKM_VECTORIZE static int32_t
GkmNearestGeneric(const double *row, int32_t d, const double *cent, int32_t k, double *dist, double *d2)
{
	return gc_kmeans_nearest(row, d, cent, k, dist, d2);
}

#if defined(__GNUC__) && defined(__x86_64__)
GKM_VECTORIZE __attribute__((target("avx2"))) static int32_t
GkmNearestAvx2(const double *row, int32_t d, const double *cent, int32_t k, double *dist, double *d2)
{
	return gc_kmeans_nearest(row, d, cent, k, dist, d2);
}

GKM_VECTORIZE __attribute__((target("avx512f"))) static int32_t
GkmNearestAvx512(const double *row, int32_t d, const double *cent, int32_t k, double *dist, double *d2)
{
	return gc_kmeans_nearest(row, d, cent, k, dist, d2);
}
#endif

static GkmNearestFn GkmNearestImpl = NULL;

/* Chooses GkmNearest's build for this processor, once (before any thread of a pass calls it). */
static void
GkmNearestChoose(void)
{
	if (GkmNearestImpl != NULL)
		return;
	GkmNearestImpl = GkmNearestGeneric;
#if defined(__GNUC__) && defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		GkmNearestImpl = GkmNearestAvx512;
	else if (__builtin_cpu_supports("avx2"))
		GkmNearestImpl = GkmNearestAvx2;
#endif
}

/* The nearest centroid of row [d] among cent [d, k] (gc_kmeans_nearest's rule). */
static inline int32_t
GkmNearest(const double *row, int32_t d, const double *cent, int32_t k, double *dist, double *d2)
{
	if (unlikely(GkmNearestImpl == NULL))
		GkmNearestChoose();
	return GkmNearestImpl(row, d, cent, k, dist, d2);
}

/* Features of this magnitude and beyond are refused in double precision (gather.c). */
#define GKM_MAX_ABS 1e150

/* The mode of a state (gpu_kmeans_step_state's fourth argument). */
#define GKM_SUMS	1			/* sum the features per cluster */
#define GKM_RAW		2			/* cosine: the centroids as given, not scaled to unit length */
#define GKM_MODES	3

#define GKM_MAGIC	0x314d4b47	/* "GKM1" */
#define GKM_TEXT_PREFIX "gkm1:"

/*
 * The state in memory: a varlena of this header and, at offsets fixed by k
 * and d, the centroids as given [k, d], the centroids the rows are assigned
 * to [d, k] (transposed; unit length for cosine), the counts [k], the sums
 * of squared distances [k], the sums [k, d] (mode GKM_SUMS), then what the
 * transition function works in: the rows read but not yet assigned [block,
 * d], their labels and distances [block], the 128-bit block sums (gc_wacc)
 * [k, d + 1] (column d: the squared distances) and their units [d + 1],
 * and scratch for one row.  The transition function changes it in place;
 * every reader first assigns the rows waiting and folds the block sums into
 * the superaccumulators (GkmFlush), so that what it reads, prints or
 * combines is the exact sum of every row.
 */
typedef struct GkmState
{
	int32		vl_len_;
	int32		magic;
	int32		k;
	int32		d;
	int16		metric;			/* gc_metric */
	int16		dtype;			/* gc_dtype of the features as read */
	int32		mode;			/* GKM_SUMS | GKM_RAW */
	int64		rows;			/* rows with a feature */
	int64		nulls;			/* rows with a NULL feature */
	int64		pending;		/* additions since the accumulators were normalized */
	Datum		seen;			/* the centroids datum last checked (in memory only) */
	Oid			ftype;			/* the feature's type (in memory only; 0: not known) */
	int32		nbuf;			/* rows waiting in the block */
	int32		wterms;			/* terms in the block sums since they were folded */
	int32		wused;			/* the block sums hold something */
} GkmState;

#define GKM_CEN(s)		((double *) ((char *) (s) + sizeof(GkmState)))
#define GKM_CENT(s)		(GKM_CEN(s) + (Size) (s)->k * (s)->d)
#define GKM_COUNTS(s)	((int64 *) (GKM_CENT(s) + (Size) (s)->k * (s)->d))
#define GKM_D2(s)		((gc_sacc *) (GKM_COUNTS(s) + (s)->k))
#define GKM_SUMSP(s)	(GKM_D2(s) + (s)->k)
#define GKM_NSUMS(s)	(((s)->mode & GKM_SUMS) ? (Size) (s)->k * (s)->d : 0)
#define GKM_BUF(s)		((double *) (GKM_SUMSP(s) + GKM_NSUMS(s)))	/* [block, d] */
#define GKM_BLABEL(s)	((int32 *) (GKM_BUF(s) + (Size) GkmBlock((s)->d) * (s)->d))	/* [block] */
#define GKM_BBEST(s)	((double *) (GKM_BLABEL(s) + GkmBlock((s)->d)))	/* [block] */
#define GKM_WACC(s)		((gc_wacc *) (GKM_BBEST(s) + GkmBlock((s)->d)))	/* [k, d + 1] */
#define GKM_WUNIT(s)	((int32 *) (GKM_WACC(s) + (Size) (s)->k * ((s)->d + 1)))	/* [d + 1] */
#define GKM_SCRATCH(s)	((double *) (GKM_WUNIT(s) + GkmWUnits((s)->d)))	/* [k + d]: distances, a row */

/*
 * Rows a state holds before it assigns them, a multiple of 4 that depends
 * only on d: about 128 KiB of rows.  The sums are exact, so the block size
 * changes nothing in the result.
 */
static inline int32
GkmBlock(int32 d)
{
	int32		b = (int32) Min((int64) 256, Max((int64) 4, (int64) 16384 / d));

	return b & ~3;
}

/* The int32 units of the block sums, rounded up to an even count (8-byte alignment). */
static inline int32
GkmWUnits(int32 d)
{
	return (d + 2) & ~1;
}

/* Bytes of a state of k clusters of d features in mode, or 0 when too large. */
static Size
GkmSize(int32 k, int32 d, int32 mode)
{
	double		kd = (double) k * d;
	double		block = GkmBlock(d);
	double		bytes = sizeof(GkmState) + 2 * kd * sizeof(double) + k * sizeof(int64) +
		(k + ((mode & GKM_SUMS) ? kd : 0)) * sizeof(gc_sacc) +
		block * d * sizeof(double) + block * (sizeof(int32) + sizeof(double)) +
		(double) k * (d + 1) * sizeof(gc_wacc) + GkmWUnits(d) * sizeof(int32) +
		(k + (double) d) * sizeof(double);

	return bytes > (double) MaxAllocSize ? 0 : (Size) bytes;
}

/* The error for a state that does not fit in memory. */
static void
GkmTooLarge(int32 k, int32 d)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("a k-means step of %d clusters of %d features is too large", k, d),
			 errdetail("Its state holds an exact sum of %zu bytes per cluster and feature, and must stay below 1 GB.",
					   sizeof(gc_sacc)),
			 errhint("Use fewer clusters or fewer features.")));
}

/* The centroids of a state [d, k] for the assignment, from its centroids as given. */
static void
GkmWorkingCentroids(GkmState *s)
{
	int32		k = s->k;
	int32		d = s->d;
	double	   *c = palloc(sizeof(double) * (Size) k * d);

	memcpy(c, GKM_CEN(s), sizeof(double) * (Size) k * d);
	if (s->metric == GC_METRIC_COSINE && !(s->mode & GKM_RAW))
		for (int32 j = 0; j < k; j++)
			if (!gc_unit_row_f64(c + (Size) j * d, d))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("row %d of centroids is all zero", j + 1),
						 errdetail("With the cosine metric every centroid is a direction, and a zero vector has none."),
						 errhint("Give every centroid a nonzero value, or use metric => 'euclidean'.")));
	gc_kmeans_transpose(c, k, d, GKM_CENT(s));
	pfree(c);
}

/* A new, empty state in cxt. */
static GkmState *
GkmNew(MemoryContext cxt, int32 k, int32 d, gc_metric metric, gc_dtype dtype, int32 mode)
{
	Size		size = GkmSize(k, d, mode);
	GkmState   *s;

	if (size == 0)
		GkmTooLarge(k, d);
	s = MemoryContextAllocZero(cxt, size);
	SET_VARSIZE(s, size);
	s->magic = GKM_MAGIC;
	s->k = k;
	s->d = d;
	s->metric = (int16) metric;
	s->dtype = (int16) dtype;
	s->mode = mode;
	for (int32 c = 0; c <= d; c++)
		GKM_WUNIT(s)[c] = -1;
	return s;
}

/* Propagates the carries of every accumulator of s. */
static void
GkmNormalize(GkmState *s)
{
	gc_sacc    *a = GKM_D2(s);
	Size		n = s->k + GKM_NSUMS(s);

	for (Size i = 0; i < n; i++)
		gc_sacc_normalize(&a[i]);
	s->pending = 0;
}

/*
 * Folds the block sums of every cluster of column c into the
 * superaccumulators (column d: the squared distances).
 */
static void
GkmFoldColumn(GkmState *s, int32 c)
{
	gc_wacc    *w = GKM_WACC(s);
	int32		p = GKM_WUNIT(s)[c];
	int32		d = s->d;

	if (p < 0)
		return;
	for (int32 j = 0; j < s->k; j++)
		gc_wacc_fold(c == d ? &GKM_D2(s)[j] : &GKM_SUMSP(s)[(Size) j * d + c],
					 &w[(Size) j * (d + 1) + c], p);
}

/* Folds every block sum into the superaccumulators (one more pending addition). */
static void
GkmFoldAll(GkmState *s)
{
	if (s->wused)
	{
		if (s->pending + 1 >= GC_SACC_MAX_PENDING)
			GkmNormalize(s);
		for (int32 c = 0; c <= s->d; c++)
			if (c == s->d || (s->mode & GKM_SUMS))
				GkmFoldColumn(s, c);
		s->pending++;
	}
	s->wused = 0;
	s->wterms = 0;
}

/*
 * Points column c's block sums at the unit for values of largest lsb top:
 * kept while it holds them and does not waste more than 32 binades, else
 * the column is folded and moved.
 */
static void
GkmFitColumn(GkmState *s, int32 c, int32 top)
{
	int32	   *unit = GKM_WUNIT(s);
	int32		want = gc_wacc_unit(top);

	if (unit[c] >= 0 && want <= unit[c] && want + 32 >= unit[c])
		return;
	if (unit[c] >= 0 && s->wused)
	{
		if (s->pending + 1 >= GC_SACC_MAX_PENDING)
			GkmNormalize(s);
		GkmFoldColumn(s, c);
		s->pending++;
	}
	unit[c] = want;
}

static inline double GkmBufVal(const GkmState *s, int32 i, int32 t);

/*
 * Sets the windows of the block sums for the n rows of the block and their
 * distances (top NULL), or widens them upwards for values whose largest lsb
 * per column is top [d + 1].
 */
static void
GkmFitWindows(GkmState *s, int32 n, const int32 *top)
{
	int32		d = s->d;

	for (int32 c = 0; c <= d; c++)
	{
		int32		tc = 0;

		if (top)
			tc = top[c];
		else if (c == d)
			for (int32 i = 0; i < n; i++)
				tc = Max(tc, gc_wacc_lsb(GKM_BBEST(s)[i]));
		else
			for (int32 i = 0; i < n; i++)
				tc = Max(tc, gc_wacc_lsb(GkmBufVal(s, i, c)));
		if (top == NULL || gc_wacc_unit(tc) > GKM_WUNIT(s)[c])
			GkmFitColumn(s, c, tc);
	}
}

/* Row i of s's block, in the element type of s (float or double). */
static inline void *
GkmBufRow(GkmState *s, int32 i)
{
	return (char *) GKM_BUF(s) + (Size) i * s->d * (s->dtype == GC_F64 ? sizeof(double) : sizeof(float));
}

/* Value t of row i of s's block, as a double. */
static inline double
GkmBufVal(const GkmState *s, int32 i, int32 t)
{
	Size		at = (Size) i * s->d + t;

	return s->dtype == GC_F64 ? GKM_BUF(s)[at] : (double) ((const float *) GKM_BUF(s))[at];
}

/*
 * The checked matrix product of kmeans_gemm.h for the blocks of the
 * aggregates of one aggregate context: prepared for one set of centroids,
 * again whenever they change.  It gives the exact search's answers bit for
 * bit (label and distance), so a block goes through it or through the exact
 * loop with the same result.  It is found through a static pointer, not the
 * transition function's fn_extra: Citus's worker_partial_agg calls the
 * transition function with a new FmgrInfo for every row.  It lives in the
 * aggregate context and is freed with it.
 */
typedef struct GkmGemm
{
	MemoryContext cxt;			/* the aggregate context it belongs to */
	int32		k;
	int32		d;
	gc_dtype	dtype;
	bool		ready;			/* gc_kmg_prepare answered 1 */
	double	   *cent;			/* [d, k] the working centroids it was prepared for */
	double	   *cen;			/* [k, d] the same, row-major (gc_kmg keeps a reference) */
	double	   *mu;				/* [d] their mean, the centre of the product */
	gc_kmg	   *kmg;
	gc_kmg_scratch *scratch;
	MemoryContextCallback cb;
} GkmGemm;

/* The product last used (NULL after its context went). */
static GkmGemm *GkmGemmCache = NULL;

/*
 * From this many features and centroids on a block goes through the
 * product when OpenBLAS is installed and gpuclust.cpu_blas is on (see
 * BENCHMARKS.md, the k-means step).
 */
#define GKM_GEMM_MIN_D 32
#define GKM_GEMM_MIN_K 16

/* Frees the product's buffers (malloc'd by the core) with its memory context. */
static void
GkmGemmRelease(void *arg)
{
	GkmGemm    *g = arg;

	if (g->scratch)
		gc_kmg_scratch_free(g->scratch);
	if (g->kmg)
		gc_kmg_free(g->kmg);
	g->scratch = NULL;
	g->kmg = NULL;
	if (GkmGemmCache == g)
		GkmGemmCache = NULL;
}

/*
 * The product for the blocks of state s (in aggregate context aggcxt),
 * prepared for its centroids, or NULL when the exact loop is to be used.
 */
static GkmGemm *
GkmGemmFor(MemoryContext aggcxt, GkmState *s)
{
	GkmGemm    *g = GkmGemmCache;
	int32		k = s->k;
	int32		d = s->d;
	Size		kd = (Size) k * d;

	if (d < GKM_GEMM_MIN_D || k < GKM_GEMM_MIN_K)
		return NULL;
	if (g != NULL && g->cxt == aggcxt && g->k == k && g->d == d &&
		g->dtype == (gc_dtype) s->dtype &&
		memcmp(g->cent, GKM_CENT(s), sizeof(double) * kd) == 0)
		return g->ready ? g : NULL;
	SyncTuning();
	if (gc_tuning_gucs.cpu_blas < 0 || !gc_blas_available())
		return NULL;
	if (g == NULL || g->cxt != aggcxt || g->k != k || g->d != d || g->dtype != (gc_dtype) s->dtype)
	{
		g = MemoryContextAllocZero(aggcxt, sizeof(GkmGemm));
		g->cxt = aggcxt;
		g->k = k;
		g->d = d;
		g->dtype = (gc_dtype) s->dtype;
		g->cent = MemoryContextAlloc(aggcxt, sizeof(double) * kd);
		g->cen = MemoryContextAlloc(aggcxt, sizeof(double) * kd);
		g->mu = MemoryContextAlloc(aggcxt, sizeof(double) * d);
		g->cb.func = GkmGemmRelease;
		g->cb.arg = g;
		MemoryContextRegisterResetCallback(aggcxt, &g->cb);
		g->kmg = gc_kmg_create(k, d, g->dtype);
		if (g->kmg)
			g->scratch = gc_kmg_scratch_create(g->kmg, GkmBlock(d));
		if (g->kmg == NULL || g->scratch == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("The k-means step's matrix product of %d centroids of %d features could not be allocated.", k, d),
					 errhint("Set gpuclust.cpu_blas to off to use the exact loop alone.")));
		GkmGemmCache = g;
	}
	memcpy(g->cent, GKM_CENT(s), sizeof(double) * kd);
	for (int32 t = 0; t < d; t++)
	{
		double		sum = 0.0;

		for (int32 j = 0; j < k; j++)
		{
			g->cen[(Size) j * d + t] = g->cent[(Size) t * k + j];
			sum += g->cent[(Size) t * k + j];
		}
		g->mu[t] = sum / k;
	}
	g->ready = gc_kmg_prepare(g->kmg, g->cen, g->mu) != 0;
	return g->ready ? g : NULL;
}

/*
 * Assigns the rows waiting in s's block to their nearest centroids
 * (gc_kmeans_nearest's rule: through the checked product g when not NULL,
 * else row by row) and adds them to the sums: counts, the 128-bit block
 * sums where the values fit their window, the superaccumulators where they
 * do not.  Exact, so the result is that of adding every row to the
 * superaccumulators one by one, in any order.  assigned: the labels and
 * distances of the block's rows are already in place (the shard cache).
 */
static void
GkmFlushRows(GkmState *s, GkmGemm *g, bool assigned)
{
	int32		n = s->nbuf;
	int32		k = s->k;
	int32		d = s->d;
	int32	   *label = GKM_BLABEL(s);
	double	   *best = GKM_BBEST(s);
	double	   *dist = GKM_SCRATCH(s);
	double	   *row = dist + k;
	gc_wacc    *w = GKM_WACC(s);
	const int32 *unit = GKM_WUNIT(s);
	int64	   *counts = GKM_COUNTS(s);
	bool		sums = (s->mode & GKM_SUMS) != 0;

	if (n == 0)
		return;
	if (assigned)
		;						/* labels and distances given (the shard cache) */
	else if (g != NULL)
		gc_kmg_assign(g->kmg, g->scratch, GKM_BUF(s), NULL, 0, n, label, best, NULL, NULL);
	else
		for (int32 i = 0; i < n; i++)
		{
			for (int32 t = 0; t < d; t++)
				row[t] = GkmBufVal(s, i, t);
			label[i] = GkmNearest(row, d, GKM_CENT(s), k, dist, &best[i]);
			if ((i & 63) == 63)
				CHECK_FOR_INTERRUPTS();
		}

	/*
	 * Room for this block's terms; the windows of the block sums are set by
	 * the first block (and moved after a block that did not fit them).
	 */
	if (s->wterms + n > GC_WACC_MAX_TERMS)
		GkmFoldAll(s);
	if (unit[d] < 0)
		GkmFitWindows(s, n, NULL);
	if (s->pending + n >= GC_SACC_MAX_PENDING)
		GkmNormalize(s);
	{
		int32	   *top = (int32 *) dist;	/* [d + 1] the largest lsb of each column */
		int32		slow = 0;

		for (int32 c = 0; c <= d; c++)
			top[c] = 0;
		for (int32 i = 0; i < n; i++)
		{
			int32		j = label[i];
			gc_wacc    *wj = w + (Size) j * (d + 1);
			int			fits = 1;

			counts[j]++;
			if (sums)
			{
				if (s->dtype == GC_F64)
				{
					const double *r = (const double *) GKM_BUF(s) + (Size) i * d;

					for (int32 t = 0; t < d; t++)
						fits &= gc_wacc_add(&wj[t], r[t], unit[t]);
				}
				else
				{
					const float *r = (const float *) GKM_BUF(s) + (Size) i * d;

					for (int32 t = 0; t < d; t++)
						fits &= gc_wacc_add(&wj[t], (double) r[t], unit[t]);
				}
			}
			fits &= gc_wacc_add(&wj[d], best[i], unit[d]);
			if (unlikely(!fits))
			{
				/* the values out of their window, straight into the superaccumulators */
				gc_wacc		scratch = {0, 0};

				slow++;
				if (sums)
					for (int32 t = 0; t < d; t++)
					{
						double		v = GkmBufVal(s, i, t);

						if (!gc_wacc_add(&scratch, v, unit[t]))
							gc_sacc_add(&GKM_SUMSP(s)[(Size) j * d + t], v);
						top[t] = Max(top[t], gc_wacc_lsb(v));
					}
				if (!gc_wacc_add(&scratch, best[i], unit[d]))
					gc_sacc_add(&GKM_D2(s)[j], best[i]);
				top[d] = Max(top[d], gc_wacc_lsb(best[i]));
			}
		}
		/* at most one direct addition per accumulator and row */
		s->pending += n;
		s->wterms += n;
		s->wused = 1;
		/* many rows out of their windows: set them again from this block */
		if (slow > n / 8)
			GkmFitWindows(s, n, NULL);
		else if (slow > 0)
			GkmFitWindows(s, n, top);
	}
	s->nbuf = 0;
}

/* Assigns the rows waiting and folds the block sums: s then holds only exact sums. */
static void
GkmFlush(GkmState *s)
{
	GkmFlushRows(s, NULL, false);
	GkmFoldAll(s);
}

/* True when s has rows waiting or block sums to fold. */
static inline bool
GkmUnflushed(const GkmState *s)
{
	return s->nbuf > 0 || s->wused;
}

/*
 * Checks a centroids array (k x d float8 without NULL, finite, at most 1e150
 * in magnitude, as features are) and returns its values row-major.
 */
static double *
GkmCentroidArray(ArrayType *arr, int32 *k_out, int32 *d_out)
{
	int			ndim = ARR_NDIM(arr);
	int		   *dims = ARR_DIMS(arr);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	double	   *out;

	if (ARR_ELEMTYPE(arr) != FLOAT8OID)
		elog(ERROR, "centroids is not a float8 array, please report a bug");
	if (ndim != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("centroids must be a two-dimensional array"),
				 errdetail("It has %d dimension%s; it needs one row of features per cluster.",
						   ndim, ndim == 1 ? "" : "s"),
				 errhint("Pass array_agg(centroid ORDER BY cluster_id) over gpu_kmeans_centroids, or ARRAY[[x1, y1], [x2, y2], ...], k rows of d values.")));
	deconstruct_array(arr, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &nelems);
	out = palloc(sizeof(double) * nelems);
	for (int i = 0; i < nelems; i++)
	{
		double		v;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("centroids must not contain NULL"),
					 errdetail("Row %d, column %d is NULL.", i / dims[1] + 1, i % dims[1] + 1),
					 errhint("Give every feature of every centroid a value.")));
		v = DatumGetFloat8(elems[i]);
		if (!isfinite(v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("centroids must contain finite numbers"),
					 errdetail("Row %d, column %d is %g.", i / dims[1] + 1, i % dims[1] + 1, v),
					 errhint("Replace NaN and infinity with finite coordinates.")));
		if (!(fabs(v) <= GKM_MAX_ABS))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("centroids are out of range"),
					 errdetail("Row %d, column %d is %g; features and centroids are at most 1e150 in magnitude, "
							   "so that squared distances do not overflow double precision.",
							   i / dims[1] + 1, i % dims[1] + 1, v),
					 errhint("Scale the features and the centroids, for example by dividing by a constant.")));
		out[i] = v;
	}
	pfree(elems);
	pfree(nulls);
	*k_out = dims[0];
	*d_out = dims[1];
	return out;
}

/* The centroids argument: not NULL. */
static Datum
GkmCentroidsArg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("centroids must not be NULL"),
				 errdetail("centroids is the k x d array of a fitted k-means model."),
				 errhint("Pass array_agg(centroid ORDER BY cluster_id) over gpu_kmeans_centroids.")));
	return PG_GETARG_DATUM(argno);
}

/* The error for a feature type no reader knows. */
static void
GkmNotFeatureType(Oid typid, const char *funcname)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("the feature argument of %s has type %s, which is not a feature type",
					funcname, format_type_be(typid)),
			 errdetail("A feature is a value of type %s, or one value of type smallint, "
					   "integer, bigint, real, double precision or numeric.",
					   GcFeatureTypeNames()),
			 errhint("Pass the features as one array, for example ARRAY[x, y]::real[].")));
}

/*
 * The type of the feature argument (argno) of an aggregate's transition
 * function.  Citus calls the transition function of a pushed-down aggregate
 * without the call's expression (worker_partial_agg); the argument types are
 * then those of the row expression it aggregates, ROW(feature, ...).
 */
static Oid
GkmAggFeatureType(FunctionCallInfo fcinfo, int argno)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Aggref	   *aggref;

	if (OidIsValid(typid))
		return typid;
	aggref = AggGetAggref(fcinfo);
	if (aggref != NULL && list_length(aggref->args) >= 2)
	{
		TargetEntry *te = lsecond_node(TargetEntry, aggref->args);

		if (IsA(te->expr, RowExpr) && ((RowExpr *) te->expr)->args != NIL)
			return exprType(linitial(((RowExpr *) te->expr)->args));
		if (list_length(aggref->args) == 2)
			return exprType((Node *) te->expr);
	}
	ereport(ERROR,
			(errcode(ERRCODE_INDETERMINATE_DATATYPE),
			 errmsg("could not determine the type of the feature of the k-means step"),
			 errdetail("The aggregate was called in a way that does not tell the types of its arguments."),
			 errhint("Cast the feature to real[] or double precision[].")));
	return InvalidOid;
}

/*
 * Reads one feature value of type typid into row [d] (double; *d_out its
 * dimension, at most maxd unless maxd < 0, then row is allocated), in the
 * element type dtype, scaled to unit length for the cosine metric.  Returns
 * the row.
 */
static double *
GkmReadFeature(Datum value, Oid typid, GcFeatureType kind, gc_dtype dtype, gc_metric metric,
			   int32 expect_d, double *row, double *rowx, const char *funcname)
{
	GcRowRef	ref = {0, -1, 0};
	GcFeature	f;

	GcFeatureOpen(kind, typid, value, &ref, CurrentMemoryContext, &f);
	if (expect_d >= 0 && f.d != expect_d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature has %d dimension%s, but the centroids have %d column%s",
						f.d, f.d == 1 ? "" : "s", expect_d, expect_d == 1 ? "" : "s"),
				 errdetail("Each centroid needs one value per feature, in the order of the features."),
				 errhint("Pass the features the model was fitted on, and %s's centroids as a k x %d array.",
						 funcname, f.d)));
	if (row == NULL)
	{
		row = palloc(sizeof(double) * f.d);
		rowx = palloc(sizeof(double) * f.d);
	}
	GcFeatureCopy(&f, rowx, dtype, &ref);
	if (dtype == GC_F64)
	{
		if (metric == GC_METRIC_COSINE && !gc_unit_row_f64(rowx, f.d))
			GcZeroRowError("k-means", &ref);
		memcpy(row, rowx, sizeof(double) * f.d);
	}
	else
	{
		float	   *r4 = (float *) rowx;

		if (metric == GC_METRIC_COSINE && !gc_unit_row_f32(r4, f.d))
			GcZeroRowError("k-means", &ref);
		for (int32 t = 0; t < f.d; t++)
			row[t] = (double) r4[t];
	}
	return row;
}

/* The feature kind of a type, or an error naming funcname. */
static GcFeatureType
GkmFeatureKind(Oid typid, const char *funcname)
{
	GcFeatureType kind = GcFeatureTypeOf(typid);

	if (kind == GC_FEATURE_NONE)
		GkmNotFeatureType(typid, funcname);
	return kind;
}

/* The metric of an optional argument, NULL or absent: Euclidean. */
static gc_metric
GkmMetricArg(FunctionCallInfo fcinfo, int argno)
{
	return GcArgMetric(fcinfo, argno, GcKmeans.title);
}

/*
 * Adds one row's feature (value, or NULL) to state s, whose matrix product
 * belongs to context cxt: read as gpu_kmeans reads it, kept in the block,
 * the block assigned and summed when full.
 */
static void
GkmAddRow(GkmState *s, Datum value, bool isnull, MemoryContext cxt, const char *funcname)
{
	if (isnull)
	{
		s->nulls++;
		return;
	}
	GkmReadFeature(value, s->ftype, GcFeatureTypeOf(s->ftype), s->dtype, s->metric,
				   s->d, GKM_SCRATCH(s) + s->k, GkmBufRow(s, s->nbuf), funcname);
	s->rows++;
	if (++s->nbuf == GkmBlock(s->d))
		GkmFlushRows(s, GkmGemmFor(cxt, s), false);
}

/*
 * The transition function: args (state, feature, centroids [, metric
 * [, mode]]); typid is the feature's type, or InvalidOid to find it.
 */
static Datum
GkmTrans(FunctionCallInfo fcinfo, Oid typid)
{
	MemoryContext aggcxt;
	GkmState   *s = PG_ARGISNULL(0) ? NULL : (GkmState *) PG_GETARG_POINTER(0);
	Datum		cdatum = GkmCentroidsArg(fcinfo, 2);
	gc_metric	metric = GkmMetricArg(fcinfo, 3);
	int32		mode = GKM_SUMS;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the k-means step's transition function can only be called by its aggregate"),
				 errdetail("It changes its state in place, which only an aggregate may hand it."),
				 errhint("Call gpu_kmeans_step(feature, centroids).")));
	if (PG_NARGS() > 4)
	{
		if (PG_ARGISNULL(4) || PG_GETARG_INT32(4) < 0 || PG_GETARG_INT32(4) > GKM_MODES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("mode of gpu_kmeans_step_state must be 0, 1, 2 or 3"),
					 errdetail("1 sums the features per cluster, 2 keeps cosine centroids as given."),
					 errhint("gpu_kmeans_fit_distributed calls it; use gpu_kmeans_step instead.")));
		mode = PG_GETARG_INT32(4);
	}

	if (s == NULL)
	{
		ArrayType  *arr = DatumGetArrayTypeP(cdatum);
		int32		k;
		int32		d;
		double	   *cen = GkmCentroidArray(arr, &k, &d);

		if (!OidIsValid(typid))
			typid = GkmAggFeatureType(fcinfo, 1);
		s = GkmNew(aggcxt, k, d, metric, GcFeatureDtype(GkmFeatureKind(typid, "gpu_kmeans_step"), typid), mode);
		s->ftype = typid;
		memcpy(GKM_CEN(s), cen, sizeof(double) * (Size) k * d);
		GkmWorkingCentroids(s);
		s->seen = cdatum;
	}
	else
	{
		if (s->magic != GKM_MAGIC)
			elog(ERROR, "k-means step state is corrupt, please report a bug");
		if (metric != s->metric || mode != s->mode)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the metric of a k-means step changed within a group"),
					 errdetail("The group's first row chose the %s metric.",
							   s->metric == GC_METRIC_COSINE ? "cosine" : "Euclidean"),
					 errhint("Pass the same metric for every row of a group.")));
		if (cdatum != s->seen)
		{
			ArrayType  *arr = DatumGetArrayTypeP(cdatum);

			if (ARR_NDIM(arr) != 2 || ARR_HASNULL(arr) || ARR_ELEMTYPE(arr) != FLOAT8OID ||
				ARR_DIMS(arr)[0] != s->k || ARR_DIMS(arr)[1] != s->d ||
				memcmp(ARR_DATA_PTR(arr), GKM_CEN(s), sizeof(double) * (Size) s->k * s->d) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("the centroids of a k-means step changed within a group"),
						 errdetail("A step sums the rows nearest to each of one set of centroids."),
						 errhint("Pass the same centroids for every row of a group, for example a constant or a parameter.")));
			s->seen = cdatum;
		}
	}

	GkmAddRow(s, PG_GETARG_DATUM(1), PG_ARGISNULL(1), aggcxt, "gpu_kmeans_step");
	PG_RETURN_POINTER(s);
}

/* gpu_kmeans_step's transition function for real[] features */
Datum
gpu_kmeans_step_trans_f4a(PG_FUNCTION_ARGS)
{
	return GkmTrans(fcinfo, FLOAT4ARRAYOID);
}

/* ... for double precision[] features */
Datum
gpu_kmeans_step_trans_f8a(PG_FUNCTION_ARGS)
{
	return GkmTrans(fcinfo, FLOAT8ARRAYOID);
}

/* ... for any other feature type (anyelement) */
Datum
gpu_kmeans_step_trans_any(PG_FUNCTION_ARGS)
{
	return GkmTrans(fcinfo, InvalidOid);
}

/*
 * A state argument, detoasted, checked for its magic, with only exact sums
 * (a flushed copy when it still had rows waiting or block sums).
 */
static GkmState *
GkmArg(FunctionCallInfo fcinfo, int argno)
{
	GkmState   *s = (GkmState *) PG_DETOAST_DATUM(PG_GETARG_DATUM(argno));

	if (VARSIZE(s) < sizeof(GkmState) || s->magic != GKM_MAGIC ||
		VARSIZE(s) != GkmSize(s->k, s->d, s->mode) ||
		s->nbuf < 0 || s->nbuf >= GkmBlock(s->d))
		elog(ERROR, "k-means step state is corrupt, please report a bug");
	if (GkmUnflushed(s))
	{
		GkmState   *c = palloc(VARSIZE(s));

		memcpy(c, s, VARSIZE(s));
		GkmFlush(c);
		s = c;
	}
	return s;
}

/*
 * The combine function: adds state b into a (changed in place when it
 * belongs to the aggregate, else a copy).  The accumulators are exact, so
 * the order of combination does not matter.
 */
Datum
gpu_kmeans_step_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	GkmState   *a;
	GkmState   *b;
	gc_sacc    *aa;
	gc_sacc    *ba;
	Size		nacc;

	if (PG_ARGISNULL(0) && PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(1))
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	if (PG_ARGISNULL(0))
	{
		b = GkmArg(fcinfo, 1);
		if (AggCheckCallContext(fcinfo, &aggcxt))
		{
			a = MemoryContextAlloc(aggcxt, VARSIZE(b));
			memcpy(a, b, VARSIZE(b));
			PG_RETURN_POINTER(a);
		}
		PG_RETURN_POINTER(b);
	}
	b = GkmArg(fcinfo, 1);
	if (AggCheckCallContext(fcinfo, &aggcxt))
	{
		a = (GkmState *) PG_GETARG_POINTER(0);
		GkmFlush(a);
	}
	else
	{
		GkmState   *a0 = GkmArg(fcinfo, 0);

		a = palloc(VARSIZE(a0));
		memcpy(a, a0, VARSIZE(a0));
	}
	if (a->k != b->k || a->d != b->d || a->metric != b->metric || a->mode != b->mode ||
		memcmp(GKM_CEN(a), GKM_CEN(b), sizeof(double) * (Size) a->k * a->d) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine k-means steps of different centroids or metrics"),
				 errdetail("One step has %d x %d centroids and the %s metric, the other %d x %d and the %s metric, "
						   "or their centroids differ.",
						   a->k, a->d, a->metric == GC_METRIC_COSINE ? "cosine" : "Euclidean",
						   b->k, b->d, b->metric == GC_METRIC_COSINE ? "cosine" : "Euclidean"),
				 errhint("Combine only the partial states of one step.")));
	if (a->dtype != b->dtype)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine k-means steps computed in different precisions"),
				 errdetail("One read the features in single precision, the other in double precision."),
				 errhint("Set gpuclust.precision alike on every node.")));
	if (a->pending + b->pending + 1 >= GC_SACC_MAX_PENDING)
		GkmNormalize(a);
	if (b->pending + 1 >= GC_SACC_MAX_PENDING)
		elog(ERROR, "k-means step state has too many pending additions, please report a bug");
	aa = GKM_D2(a);
	ba = GKM_D2(b);
	nacc = a->k + GKM_NSUMS(a);
	for (Size i = 0; i < nacc; i++)
		gc_sacc_merge(&aa[i], &ba[i]);
	a->pending += b->pending + 1;
	for (int32 j = 0; j < a->k; j++)
		GKM_COUNTS(a)[j] += GKM_COUNTS(b)[j];
	a->rows += b->rows;
	a->nulls += b->nulls;
	if (a->ftype != b->ftype)
		a->ftype = InvalidOid;
	PG_RETURN_POINTER(a);
}

/* The rounded value of accumulator a (a copy normalized). */
static double
GkmRound(const gc_sacc *a)
{
	gc_sacc		t = *a;

	gc_sacc_normalize(&t);
	return gc_sacc_round(&t);
}

/* Inertia of a sum of squared distances under metric (cosine: halved, exactly). */
static double
GkmInertia(gc_metric metric, double d2)
{
	return metric == GC_METRIC_COSINE ? d2 * 0.5 : d2;
}

/*
 * The centroids a state's step moves to [k, d]: the mean of each cluster's
 * rows (its exact sum rounded once, divided by the count), scaled to unit
 * length for cosine; a cluster without rows keeps its centroid.
 */
static void
GkmNewCentroids(const GkmState *s, double *out)
{
	int32		k = s->k;
	int32		d = s->d;
	const int64 *counts = GKM_COUNTS(s);
	const double *cent = GKM_CENT(s);

	for (int32 j = 0; j < k; j++)
	{
		double	   *c = out + (Size) j * d;

		if (counts[j] > 0 && (s->mode & GKM_SUMS))
		{
			for (int32 t = 0; t < d; t++)
				c[t] = GkmRound(&GKM_SUMSP(s)[(Size) j * d + t]) / (double) counts[j];
			if (s->metric == GC_METRIC_COSINE)
				gc_kmeans_unit_centroid(c, d);
		}
		else
			for (int32 t = 0; t < d; t++)
				c[t] = cent[(Size) t * k + j];
	}
}

/* A k x d float8 array of values [k, d]. */
static ArrayType *
GkmMatrix(const double *v, int32 k, int32 d)
{
	Datum	   *elems = palloc(sizeof(Datum) * (Size) k * d);
	int			dims[2] = {k, d};
	int			lbs[2] = {1, 1};

	for (Size i = 0; i < (Size) k * d; i++)
		elems[i] = Float8GetDatum(v[i]);
	return construct_md_array(elems, NULL, 2, dims, lbs, FLOAT8OID, sizeof(float8),
							  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

/*
 * The final function: (centroids, sizes, inertia), the centroids the step
 * moves to, and per cluster the rows assigned and the sum of their
 * distances (squared Euclidean, or cosine distances).
 */
Datum
gpu_kmeans_step_final(PG_FUNCTION_ARGS)
{
	GkmState   *s;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	double	   *c;
	Datum	   *sizes;
	Datum	   *inertia;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = GkmArg(fcinfo, 0);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "gpu_kmeans_step_final must return a composite type, please report a bug");
	desc = BlessTupleDesc(desc);
	c = palloc(sizeof(double) * (Size) s->k * s->d);
	GkmNewCentroids(s, c);
	sizes = palloc(sizeof(Datum) * s->k);
	inertia = palloc(sizeof(Datum) * s->k);
	for (int32 j = 0; j < s->k; j++)
	{
		sizes[j] = Int64GetDatum(GKM_COUNTS(s)[j]);
		inertia[j] = Float8GetDatum(GkmInertia(s->metric, GkmRound(&GKM_D2(s)[j])));
	}
	values[0] = PointerGetDatum(GkmMatrix(c, s->k, s->d));
	values[1] = PointerGetDatum(construct_array(sizes, s->k, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(inertia, s->k, FLOAT8OID, sizeof(float8),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/* ---------------------------------------------------------------- text form */

/* Appends the n low bytes of v, least significant first (the same text on every machine). */
static void
PutInt(StringInfo b, int64 v, int n)
{
	unsigned char buf[8];

	for (int i = 0; i < n; i++)
		buf[i] = (unsigned char) ((uint64) v >> (8 * i));
	appendBinaryStringInfo(b, (const char *) buf, n);
}

/* gpu_kmeans_state's output: its exact text form (see the top of this file). */
Datum
gpu_kmeans_state_out(PG_FUNCTION_ARGS)
{
	GkmState   *s = GkmArg(fcinfo, 0);
	StringInfoData b;
	Size		kd = (Size) s->k * s->d;
	Size		nacc = s->k + GKM_NSUMS(s);
	char	   *out;
	Size		prefix = strlen(GKM_TEXT_PREFIX);

	initStringInfo(&b);
	PutInt(&b, s->k, 4);
	PutInt(&b, s->d, 4);
	PutInt(&b, s->metric, 1);
	PutInt(&b, s->dtype, 1);
	PutInt(&b, s->mode, 1);
	PutInt(&b, s->rows, 8);
	PutInt(&b, s->nulls, 8);
	for (Size i = 0; i < kd; i++)
	{
		uint64		bits;

		memcpy(&bits, &GKM_CEN(s)[i], 8);
		PutInt(&b, (int64) bits, 8);
	}
	for (int32 j = 0; j < s->k; j++)
		PutInt(&b, GKM_COUNTS(s)[j], 8);
	for (Size i = 0; i < nacc; i++)
	{
		gc_sacc		t = GKM_D2(s)[i];
		uint32		u[GC_SACC_CHUNKS];
		int			negative;
		int32		lo = -1;
		int32		hi = -1;

		gc_sacc_normalize(&t);
		negative = t.c[GC_SACC_CHUNKS - 1] < 0;
		{
			uint64		carry = 1;

			for (int32 c = 0; c < GC_SACC_CHUNKS; c++)
			{
				if (negative)
				{
					uint64		x = (uint64) (uint32) ~(uint32) t.c[c] + carry;

					u[c] = (uint32) x;
					carry = x >> 32;
				}
				else
					u[c] = (uint32) t.c[c];
				if (u[c] != 0)
				{
					if (lo < 0)
						lo = c;
					hi = c;
				}
			}
		}
		if (lo < 0)
		{
			PutInt(&b, 0, 1);
			continue;
		}
		PutInt(&b, 1 + negative, 1);
		PutInt(&b, lo, 1);
		PutInt(&b, hi - lo + 1, 1);
		for (int32 c = lo; c <= hi; c++)
			PutInt(&b, u[c], 4);
	}
	out = palloc(prefix + 2 * (Size) b.len + 1);
	memcpy(out, GKM_TEXT_PREFIX, prefix);
	hex_encode(b.data, b.len, out + prefix);
	out[prefix + 2 * (Size) b.len] = '\0';
	PG_RETURN_CSTRING(out);
}

/* Reads n bytes at *p (before end), least significant first, or errors. */
static int64
GetInt(const unsigned char **p, const unsigned char *end, int n)
{
	uint64		v = 0;

	if (end - *p < n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid k-means step state: too short"),
				 errhint("Pass the text a k-means step state printed, unchanged.")));
	for (int i = 0; i < n; i++)
		v |= (uint64) (*p)[i] << (8 * i);
	*p += n;
	return (int64) v;
}

/* The error for a text that is not a state. */
static void
BadState(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid k-means step state: %s", what),
			 errhint("Pass the text a k-means step state printed, unchanged.")));
}

/* gpu_kmeans_state's input: the text form back into the state, checked. */
Datum
gpu_kmeans_state_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	Size		prefix = strlen(GKM_TEXT_PREFIX);
	Size		hexlen;
	unsigned char *bin;
	const unsigned char *p;
	const unsigned char *end;
	int32		k,
				d,
				metric,
				dtype,
				mode;
	int64		rows,
				nulls,
				total = 0;
	GkmState   *s;
	Size		nacc;

	if (strncmp(str, GKM_TEXT_PREFIX, prefix) != 0)
		BadState("it does not start with \"" GKM_TEXT_PREFIX "\"");
	hexlen = strlen(str + prefix);
	if (hexlen % 2 != 0)
		BadState("odd number of hex digits");
	bin = palloc(hexlen / 2 + 1);
	hex_decode(str + prefix, hexlen, (char *) bin);
	p = bin;
	end = bin + hexlen / 2;
	k = (int32) GetInt(&p, end, 4);
	d = (int32) GetInt(&p, end, 4);
	metric = (int32) GetInt(&p, end, 1);
	dtype = (int32) GetInt(&p, end, 1);
	mode = (int32) GetInt(&p, end, 1);
	rows = GetInt(&p, end, 8);
	nulls = GetInt(&p, end, 8);
	if (k < 1 || d < 1)
		BadState("k and d must be at least 1");
	if (metric != GC_METRIC_EUCLIDEAN && metric != GC_METRIC_COSINE)
		BadState("unknown metric");
	if (dtype != GC_F32 && dtype != GC_F64)
		BadState("unknown element type");
	if (mode < 0 || mode > GKM_MODES)
		BadState("unknown mode");
	if (rows < 0 || nulls < 0)
		BadState("negative row count");
	if (GkmSize(k, d, mode) == 0)
		GkmTooLarge(k, d);
	s = GkmNew(CurrentMemoryContext, k, d, (gc_metric) metric, (gc_dtype) dtype, mode);
	s->rows = rows;
	s->nulls = nulls;
	for (Size i = 0; i < (Size) k * d; i++)
	{
		uint64		bits = (uint64) GetInt(&p, end, 8);
		double		v;

		memcpy(&v, &bits, 8);
		if (!(fabs(v) <= GKM_MAX_ABS))
			BadState("a centroid is not finite or out of range");
		GKM_CEN(s)[i] = v;
	}
	for (int32 j = 0; j < k; j++)
	{
		int64		c = GetInt(&p, end, 8);

		if (c < 0 || c > rows - total)
			BadState("the counts do not add up to the rows");
		GKM_COUNTS(s)[j] = c;
		total += c;
	}
	if (total != rows)
		BadState("the counts do not add up to the rows");
	nacc = k + GKM_NSUMS(s);
	for (Size i = 0; i < nacc; i++)
	{
		gc_sacc    *a = &GKM_D2(s)[i];
		int32		sign = (int32) GetInt(&p, end, 1);
		int32		lo,
					n;

		if (sign == 0)
			continue;
		if (sign > 2)
			BadState("bad sign of an accumulator");
		lo = (int32) GetInt(&p, end, 1);
		n = (int32) GetInt(&p, end, 1);
		if (n < 1 || lo + n > GC_SACC_CHUNKS)
			BadState("an accumulator is out of range");
		for (int32 c = 0; c < n; c++)
		{
			int64		u = GetInt(&p, end, 4);

			a->c[lo + c] = sign == 2 ? -u : u;
		}
	}
	if (p != end)
		BadState("trailing bytes");
	s->pending = 1;
	/* a state's centroids are checked as the arguments are */
	GkmWorkingCentroids(s);
	pfree(bin);
	PG_RETURN_POINTER(s);
}

/* ---------------------------------------------------------------- predict */

/* What predict and distance keep between calls: the parsed centroids. */
typedef struct GkmModel
{
	Datum		seen;			/* the centroids datum parsed (stable arguments only) */
	bool		stable;
	ArrayType  *raw;			/* a copy of the array parsed */
	int32		k;
	int32		d;
	gc_metric	metric;
	double	   *cent;			/* [d, k] */
	double	   *dist;			/* [k] */
	double	   *row;			/* [d] */
	double	   *rowx;			/* [d] */
	Oid			typid;
	GcFeatureType kind;
} GkmModel;

/*
 * The model of a predict or distance call: parsed at the first call and
 * again only when the centroids or the metric change.
 */
static GkmModel *
GkmGetModel(FunctionCallInfo fcinfo, const char *funcname)
{
	GkmModel   *m = (GkmModel *) fcinfo->flinfo->fn_extra;
	Datum		cdatum = GkmCentroidsArg(fcinfo, 1);
	gc_metric	metric = GkmMetricArg(fcinfo, 2);
	MemoryContext old;
	ArrayType  *arr;
	double	   *cen;

	if (m != NULL && m->metric == metric)
	{
		if (m->stable && cdatum == m->seen)
			return m;
		arr = DatumGetArrayTypeP(cdatum);
		if (VARSIZE(arr) == VARSIZE(m->raw) && memcmp(arr, m->raw, VARSIZE(arr)) == 0)
			return m;
	}
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (m == NULL)
	{
		m = palloc0(sizeof(GkmModel));
		m->typid = get_fn_expr_argtype(fcinfo->flinfo, 0);
		if (!OidIsValid(m->typid))
			elog(ERROR, "could not determine the feature type of %s, please report a bug", funcname);
		m->kind = GkmFeatureKind(m->typid, funcname);
		m->stable = get_fn_expr_arg_stable(fcinfo->flinfo, 1);
	}
	else
	{
		pfree(m->raw);
		pfree(m->cent);
		pfree(m->dist);
		pfree(m->row);
		pfree(m->rowx);
	}
	arr = DatumGetArrayTypePCopy(cdatum);
	cen = GkmCentroidArray(arr, &m->k, &m->d);
	if (metric == GC_METRIC_COSINE)
		for (int32 j = 0; j < m->k; j++)
			if (!gc_unit_row_f64(cen + (Size) j * m->d, m->d))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("row %d of centroids is all zero", j + 1),
						 errdetail("With the cosine metric every centroid is a direction, and a zero vector has none."),
						 errhint("Give every centroid a nonzero value, or use metric => 'euclidean'.")));
	m->raw = arr;
	m->cent = palloc(sizeof(double) * (Size) m->k * m->d);
	gc_kmeans_transpose(cen, m->k, m->d, m->cent);
	pfree(cen);
	m->dist = palloc(sizeof(double) * m->k);
	m->row = palloc(sizeof(double) * m->d);
	m->rowx = palloc(sizeof(double) * m->d);
	m->metric = metric;
	m->seen = cdatum;
	fcinfo->flinfo->fn_extra = m;
	MemoryContextSwitchTo(old);
	return m;
}

/* The nearest centroid of the feature argument and its squared distance. */
static int32
GkmPredict(FunctionCallInfo fcinfo, const char *funcname, double *d2)
{
	GkmModel   *m = GkmGetModel(fcinfo, funcname);

	GkmReadFeature(PG_GETARG_DATUM(0), m->typid, m->kind, GcFeatureDtype(m->kind, m->typid),
				   m->metric, m->d, m->row, m->rowx, funcname);
	return GkmNearest(m->row, m->d, m->cent, m->k, m->dist, d2);
}

/*
 * gpu_kmeans_predict(feature, centroids, metric): the number (0-based) of
 * the nearest centroid, as gpu_kmeans_assign gives it; NULL for a NULL feature.
 */
Datum
gpu_kmeans_predict(PG_FUNCTION_ARGS)
{
	double		d2;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_INT32(GkmPredict(fcinfo, "gpu_kmeans_predict", &d2));
}

/*
 * gpu_kmeans_distance(feature, centroids, metric): the distance to the
 * nearest centroid, as gpu_kmeans_assign's distance column gives it.
 */
Datum
gpu_kmeans_distance(PG_FUNCTION_ARGS)
{
	double		d2;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	(void) GkmPredict(fcinfo, "gpu_kmeans_distance", &d2);
	PG_RETURN_FLOAT8(gc_metric_distance(GkmMetricArg(fcinfo, 2), d2));
}

/* gpu_kmeans_row_hash(id, seed, round): the draw of row id in a round of k-means||, in [0, 1). */
Datum
gpu_kmeans_row_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(gc_kmeans_row_draw((uint64) PG_GETARG_INT64(0), (uint64) PG_GETARG_INT64(1),
										(uint32) PG_GETARG_INT32(2)));
}

/*
 * gpu_kmeans_sample(feature, centroids, metric, id, seed, round, scale):
 * whether round round of k-means|| draws the row: its draw
 * (gpu_kmeans_row_hash) is below scale times its squared distance to the
 * nearest centroid.
 */
Datum
gpu_kmeans_sample(PG_FUNCTION_ARGS)
{
	double		d2;
	double		u;

	for (int i = 0; i < 7; i++)
		if (i != 2 && PG_ARGISNULL(i))
			PG_RETURN_BOOL(false);
	(void) GkmPredict(fcinfo, "gpu_kmeans_sample", &d2);
	u = gc_kmeans_row_draw((uint64) PG_GETARG_INT64(3), (uint64) PG_GETARG_INT64(4),
						   (uint32) PG_GETARG_INT32(5));
	PG_RETURN_BOOL(u < PG_GETARG_FLOAT8(6) * d2);
}

/* ---------------------------------------------------------------- the search on the GPU */

/*
 * A shard's pass (gpu_kmeans_shard_call, gpu_kmeans_shard_step) can take
 * the nearest centroids of its rows from the GPU back end's k-means
 * assignment, the entry gpu_kmeans_assign uses, through the glue's call
 * (GcCallCompute: the GPU service when it runs, the device gpuclust.device_id
 * names, the CPU under auto when the GPU is out of memory or busy).  Only
 * the labels are taken: each row's squared distance to its centroid is
 * computed here as the exact search computes it, and the sums stay the
 * exact ones, so the state is the one of the same labels on the CPU.  The
 * labels are gpu_kmeans_assign's on that device (the lowest cluster number
 * on a tie): those of the CPU for rows in double precision and for rows of
 * more than 32 features, where the GPU decides between close centroids in
 * double precision (the checked product, whatever gpuclust.kmeans_precision
 * says); for rows in single precision of at most 32 features the GPU
 * compares distances in single precision, so a row within a rounding error
 * of a tie between two centroids may go to the other one.
 */
static const GcAlgorithm GkmAssignAlgorithm = {"kmeans_assign", "k-means assignment", NULL};

/* Rows a pass without the shard cache reads per GPU assignment, in bytes of features. */
#define GKM_GPU_CHUNK_BYTES ((Size) 256 * 1024 * 1024)

/*
 * Whether count rows of d features in element type dtype that need the
 * full search go to the GPU under device: always with gpu (no usable GPU is
 * then the call's error), never with cpu, and with auto only where the
 * GPU's labels are the CPU's (rows in double precision or of more than 32
 * features, where gpu_kmeans_assign decides between close centroids in
 * double precision; in single precision of at most 32 features it compares
 * in single precision, and a fit would then equal single-node Lloyd only up
 * to ties) and gpu_kmeans_assign of that many rows would run there: a
 * usable GPU and at least gpuclust.gpu_min_rows rows.
 */
static bool
GkmWantGpu(GcDevice device, int64 count, gc_dtype dtype, int32 d)
{
	char		reason[512];

	if (count <= 0 || device == GC_DEVICE_CPU)
		return false;
	if (device == GC_DEVICE_GPU)
		return true;
	if (count < gc_gpu_min_rows_guc || (dtype != GC_F64 && d <= 32))
		return false;
	return GcUsableGpu(gc_device_id_guc, reason, sizeof(reason)) != NULL;
}

/*
 * The nearest of the k centroids cw [k, d] (the working centroids: unit
 * rows for cosine, so that the Euclidean rule is the metric's) to each of
 * the count rows of x [count, d] of element type dtype, on the back end the
 * glue chooses for device: labels [count], and best [count] the squared
 * distance to it as the exact search computes it.  Returns whether the GPU
 * computed the labels.
 */
static bool
GkmAssignOn(FunctionCallInfo fcinfo, GcDevice device, const void *x, gc_dtype dtype, int64 count,
			int32 d, const double *cw, int32 k, int32 *label, double *best)
{
	GcCall		call;
	GcKmeansAssignJob job;
	bool		gpu;
	double	   *row;

	GcCallBegin(&call, fcinfo, &GkmAssignAlgorithm, -1);
	call.requested = device;
	call.in.n = count;
	call.in.d = d;
	call.in.dtype = dtype;
	call.in.x = (void *) x;
	memset(&job, 0, sizeof(job));
	job.params.struct_size = sizeof(job.params);
	job.params.k = k;
	job.params.centroids = cw;
	job.params.precision = GC_PRECISION_FP32;
	job.params.metric = GC_METRIC_EUCLIDEAN;
	job.result.labels = label;
	job.result.distance = GcAlloc(&call, sizeof(double) * Max(count, 1), "distances");
	GcCallCompute(&call, GcRunKmeansAssign, &job);
	gpu = call.used_gpu;
	GcCallEnd(&call, NULL);

	row = palloc(sizeof(double) * d);
	for (int64 i = 0; i < count; i++)
	{
		const double *r = row;

		if (label[i] < 0 || label[i] >= k)
			elog(ERROR, "the k-means assignment gave cluster %d of %d, please report a bug", label[i], k);
		if (dtype == GC_F64)
			r = (const double *) x + (Size) i * d;
		else
			for (int32 t = 0; t < d; t++)
				row[t] = (double) ((const float *) x)[(Size) i * d + t];
		best[i] = gc_dist2_f64(r, cw + (Size) label[i] * d, d);
		if ((i & 16383) == 16383)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(row);
	return gpu;
}

/*
 * Adds count rows of x [count, d] (in s's element type) to state s under
 * their labels and squared distances, block by block through the step's
 * own sums.
 */
static void
GkmAddAssigned(GkmState *s, const void *x, int64 count, const int32 *label, const double *best)
{
	int32		d = s->d;
	int32		B = GkmBlock(d);
	Size		esz = s->dtype == GC_F64 ? sizeof(double) : sizeof(float);

	for (int64 i0 = 0; i0 < count; i0 += B)
	{
		int32		nb = (int32) Min((int64) B, count - i0);

		memcpy(GKM_BUF(s), (const char *) x + (Size) i0 * d * esz, (Size) nb * d * esz);
		memcpy(GKM_BLABEL(s), label + i0, sizeof(int32) * nb);
		memcpy(GKM_BBEST(s), best + i0, sizeof(double) * nb);
		s->nbuf = nb;
		s->rows += nb;
		GkmFlushRows(s, NULL, true);
		if ((i0 / B) % 64 == 63)
			CHECK_FOR_INTERRUPTS();
	}
}

/* ---------------------------------------------------------------- one call per shard */

/*
 * The stateless work on one shard, which gpu_kmeans_shard_call (below) runs
 * on every shard of a distributed table, one call per shard and request,
 * when the worker backend keeps no rows for the fit: each reads its shard
 * with an ordinary query, as
 * the caller (SECURITY INVOKER: the caller's privileges and row security),
 * takes the centroids once, and returns one value, a partial state (its
 * exact text form) or the rows a step of k-means|| picks (GKR_TEXT_PREFIX
 * and hex: the count, d, the element type, then per row its key, its id
 * and its features as the step reads them, all little-endian).
 */
#define GKR_TEXT_PREFIX "gkr1:"

/* Rows read per fetch of a shard's cursor. */
#define GKM_SHARD_FETCH 1000

/* The schema-qualified, quoted name of relation relid (an error when there is none). */
static char *
GkmRelName(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

/* A NULL argument of a shard function is an error naming it. */
static void
GkmShardArgsNotNull(FunctionCallInfo fcinfo, const char *funcname, int nargs)
{
	for (int i = 0; i < nargs; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of %s must not be NULL", i + 1, funcname),
					 errhint("gpu_kmeans_fit_distributed calls it on every shard.")));
}

/*
 * A read of the rows of a query over one relation through SPI: a read-only
 * cursor fetched GKM_SHARD_FETCH rows at a time, a cancel looked at between
 * fetches (GkmScanOpen, GkmScanNext, GkmScanClose).
 */
typedef struct GkmScan
{
	Portal		portal;
	SPITupleTable *tab;			/* the rows fetched, or NULL */
	uint64		count;			/* how many */
	uint64		next;			/* the next of them */
	Oid			type[2];		/* the types of columns 1 and 2 (InvalidOid: no column 2) */
} GkmScan;

/* Connects to SPI and opens the cursor of sql. */
static void
GkmScanOpen(GkmScan *sc, const char *sql)
{
	SPIPlanPtr	plan;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if ((plan = SPI_prepare(sql, 0, NULL)) == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	sc->portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	sc->type[0] = SPI_gettypeid(sc->portal->tupDesc, 1);
	sc->type[1] = sc->portal->tupDesc->natts > 1 ? SPI_gettypeid(sc->portal->tupDesc, 2) : InvalidOid;
	sc->tab = NULL;
	sc->next = 0;
}

/* The next row's column 1, and column 2 when v2 is not NULL; false after the last row. */
static bool
GkmScanNext(GkmScan *sc, Datum *v1, bool *null1, Datum *v2, bool *null2)
{
	HeapTuple	tup;

	if (sc->tab == NULL || sc->next == sc->count)
	{
		if (sc->tab != NULL)
		{
			SPI_freetuptable(sc->tab);
			sc->tab = NULL;
			CHECK_FOR_INTERRUPTS();
		}
		SPI_cursor_fetch(sc->portal, true, GKM_SHARD_FETCH);
		if (SPI_processed == 0)
			return false;
		sc->tab = SPI_tuptable;
		sc->count = SPI_processed;
		sc->next = 0;
	}
	tup = sc->tab->vals[sc->next++];
	*v1 = SPI_getbinval(tup, sc->tab->tupdesc, 1, null1);
	if (v2 != NULL)
		*v2 = SPI_getbinval(tup, sc->tab->tupdesc, 2, null2);
	return true;
}

/* Ends the read and the SPI connection. */
static void
GkmScanClose(GkmScan *sc)
{
	if (sc->tab != NULL)
		SPI_freetuptable(sc->tab);
	SPI_cursor_close(sc->portal);
	SPI_finish();
}

/*
 * The state of a step over one relation's feature column read by one scan:
 * centroids cen [k, d], metric, mode; in cxt.  An empty relation gives an
 * empty state.  With device gpu, or auto where GkmWantGpu takes the GPU,
 * the rows are read in chunks of GKM_GPU_CHUNK_BYTES whose nearest centroids come from
 * GkmAssignOn (a chunk of fewer than gpuclust.gpu_min_rows rows under auto:
 * from the CPU back end); *gpu_rows counts the rows the GPU assigned.
 */
static GkmState *
GkmShardStepScan(Oid relid, const char *feature, const double *cen, int32 k, int32 d,
				 gc_metric metric, int32 mode, MemoryContext cxt,
				 FunctionCallInfo fcinfo, GcDevice device, int64 *gpu_rows)
{
	MemoryContext rowcxt;
	GkmScan		sc;
	Oid			ftype;
	GkmState   *s;
	bool		chunked = false;
	Datum		v;
	bool		isnull;
	void	   *x = NULL;		/* [chunk, d] the rows of the chunk, in s's element type */
	int32	   *label = NULL;
	double	   *best = NULL;
	double	   *cw = NULL;		/* [k, d] the working centroids */
	int64		chunk = 0;
	int64		nx = 0;
	Size		esz = 0;

	GkmScanOpen(&sc, psprintf("SELECT %s FROM %s", quote_identifier(feature), GkmRelName(relid)));
	ftype = sc.type[0];
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		GcFeatureType kind = GkmFeatureKind(ftype, "gpu_kmeans_shard_step");

		s = GkmNew(cxt, k, d, metric, GcFeatureDtype(kind, ftype), mode);
		s->ftype = ftype;
		memcpy(GKM_CEN(s), cen, sizeof(double) * (Size) k * d);
		GkmWorkingCentroids(s);
		chunked = device == GC_DEVICE_GPU || GkmWantGpu(device, PG_INT64_MAX, s->dtype, d);
		if (chunked)
		{
			esz = s->dtype == GC_F64 ? sizeof(double) : sizeof(float);
			chunk = Max((int64) (GKM_GPU_CHUNK_BYTES / ((Size) d * esz)), (int64) GkmBlock(d));
			x = MemoryContextAllocExtended(cxt, (Size) chunk * d * esz, MCXT_ALLOC_HUGE);
			label = MemoryContextAllocExtended(cxt, sizeof(int32) * chunk, MCXT_ALLOC_HUGE);
			best = MemoryContextAllocExtended(cxt, sizeof(double) * chunk, MCXT_ALLOC_HUGE);
			cw = palloc(sizeof(double) * (Size) k * d);
			gc_kmeans_transpose(GKM_CENT(s), d, k, cw);	/* [d, k] -> [k, d] */
		}
		MemoryContextSwitchTo(old);
	}
	rowcxt = AllocSetContextCreate(cxt, "gpu_kmeans_shard_step rows", ALLOCSET_DEFAULT_SIZES);
	while (GkmScanNext(&sc, &v, &isnull, NULL, NULL))
	{
		MemoryContext old = MemoryContextSwitchTo(rowcxt);

		if (!chunked)
			GkmAddRow(s, v, isnull, cxt, "gpu_kmeans_shard_step");
		else if (isnull)
			s->nulls++;
		else
		{
			GkmReadFeature(v, s->ftype, GcFeatureTypeOf(s->ftype), s->dtype, s->metric, d,
						   GKM_SCRATCH(s) + s->k, (double *) ((char *) x + (Size) nx * d * esz),
						   "gpu_kmeans_shard_step");
			nx++;
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
		if (nx == chunk && chunked)
		{
			if (GkmAssignOn(fcinfo, device, x, s->dtype, nx, d, cw, k, label, best))
				*gpu_rows += nx;
			GkmAddAssigned(s, x, nx, label, best);
			nx = 0;
		}
	}
	GkmScanClose(&sc);
	MemoryContextDelete(rowcxt);
	if (nx > 0)
	{
		if (GkmAssignOn(fcinfo, device, x, s->dtype, nx, d, cw, k, label, best))
			*gpu_rows += nx;
		GkmAddAssigned(s, x, nx, label, best);
	}
	if (chunked)
	{
		pfree(x);
		pfree(label);
		pfree(best);
		pfree(cw);
	}
	GkmFlush(s);
	return s;
}

/* Checks the mode argument of a shard function. */
static void
GkmShardMode(int32 mode)
{
	if (mode < 0 || mode > GKM_MODES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mode of gpu_kmeans_shard_step must be 0, 1, 2 or 3"),
				 errdetail("1 sums the features per cluster, 2 keeps cosine centroids as given."),
				 errhint("gpu_kmeans_fit_distributed calls it on every shard; use gpu_kmeans_step for one step by hand.")));
}

/*
 * gpu_kmeans_shard_step(shard, feature, centroids, metric, mode): the
 * partial state of a k-means step over one relation's feature column, as
 * gpu_kmeans_step_state over the same rows gives it (the nearest centroids
 * on the device gpuclust.device chooses, see GkmAssignOn); an empty
 * relation gives an empty state, not NULL.
 */
Datum
gpu_kmeans_shard_step(PG_FUNCTION_ARGS)
{
	int32		k;
	int32		d;
	double	   *cen;
	gc_metric	metric;
	int32		mode;
	int64		gpu_rows = 0;

	GkmShardArgsNotNull(fcinfo, "gpu_kmeans_shard_step", 5);
	cen = GkmCentroidArray(PG_GETARG_ARRAYTYPE_P(2), &k, &d);
	metric = GkmMetricArg(fcinfo, 3);
	mode = PG_GETARG_INT32(4);
	GkmShardMode(mode);
	PG_RETURN_POINTER(GkmShardStepScan(PG_GETARG_OID(0), NameStr(*PG_GETARG_NAME(1)), cen, k, d,
									   metric, mode, CurrentMemoryContext,
									   fcinfo, (GcDevice) gc_device_guc, &gpu_rows));
}

/* A row a k-means|| request picks: its key, its id and its features [d]. */
typedef struct GkrRow
{
	double		key;
	int64		id;
	double	   *x;
} GkrRow;

/* The order of picked rows: key ascending (descending when far), then id. */
static int
GkrCompare(const GkrRow *a, const GkrRow *b, bool far)
{
	if (a->key != b->key)
		return (a->key < b->key) != far ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id ? 1 : 0;
}

static int
GkrCompareNear(const void *a, const void *b)
{
	return GkrCompare(a, b, false);
}

static int
GkrCompareFar(const void *a, const void *b)
{
	return GkrCompare(a, b, true);
}

/* The kinds of k-means|| requests of gpu_kmeans_shard_rows. */
typedef enum GkrJob
{
	GKR_FIRST,					/* the first count rows by their draw of round 0 */
	GKR_SAMPLE,					/* the rows a round draws */
	GKR_FAR						/* the count rows farthest from their centroid */
} GkrJob;

/* The id column's value as int64 (smallint, integer or bigint). */
static int64
GkrId(Datum v, Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(v);
		case INT4OID:
			return DatumGetInt32(v);
		case INT8OID:
			return DatumGetInt64(v);
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("the row id must be of type smallint, integer or bigint"),
			 errdetail("It has type %s.", format_type_be(typid)),
			 errhint("Pass the name of the table's key column as id.")));
	return 0;
}

/* What one k-means|| request of gpu_kmeans_shard_rows keeps while it reads the rows. */
typedef struct GkrPick
{
	GkrJob		job;
	MemoryContext cxt;			/* of the rows kept */
	gc_metric	metric;
	int64		seed;
	int32		round;
	double		scale;
	int64		count;
	int32		k;
	int32		d;
	const double *cent;			/* [d, k] */
	double	   *dist;			/* [k] */
	GkrRow	   *rows;
	int64		m;
	int64		cap;
} GkrPick;

/* Offers row r (its id and features; r.x is copied when kept) to the request. */
static void
GkrConsider(GkrPick *pk, GkrRow r)
{
	int64		pos;

	if (pk->job == GKR_FIRST)
		r.key = gc_kmeans_row_draw((uint64) r.id, (uint64) pk->seed, 0);
	else
	{
		double		d2;

		(void) GkmNearest(r.x, pk->d, pk->cent, pk->k, pk->dist, &d2);
		if (pk->job == GKR_SAMPLE)
		{
			r.key = gc_kmeans_row_draw((uint64) r.id, (uint64) pk->seed, (uint32) pk->round);
			if (!(r.key < pk->scale * d2))
				return;
		}
		else
			r.key = gc_metric_distance(pk->metric, d2);
	}
	/* keep it: all of a sample, the count best of the others */
	if (pk->job != GKR_SAMPLE && pk->m == pk->count)
	{
		if (pk->count == 0 || GkrCompare(&r, &pk->rows[pk->m - 1], pk->job == GKR_FAR) >= 0)
			return;
		pfree(pk->rows[--pk->m].x);
	}
	if (pk->m == pk->cap)
	{
		pk->cap = pk->cap * 2 + 16;
		pk->rows = pk->rows ? repalloc_huge(pk->rows, sizeof(GkrRow) * pk->cap)
			: MemoryContextAllocHuge(pk->cxt, sizeof(GkrRow) * pk->cap);
	}
	pos = pk->m;
	if (pk->job != GKR_SAMPLE)
		while (pos > 0 && GkrCompare(&r, &pk->rows[pos - 1], pk->job == GKR_FAR) < 0)
		{
			pk->rows[pos] = pk->rows[pos - 1];
			pos--;
		}
	pk->rows[pos] = r;
	pk->rows[pos].x = MemoryContextAlloc(pk->cxt, sizeof(double) * Max(pk->d, 1));
	memcpy(pk->rows[pos].x, r.x, sizeof(double) * pk->d);
	pk->m++;
}

typedef struct GkcEntry GkcEntry;
static void GkrFromCacheRows(GkrPick *pk, GkcEntry *e, gc_dtype *dtype);

/* The cached rows gpu_kmeans_shard_call hands gpu_kmeans_shard_rows (NULL: read the relation). */
static GkcEntry *GkrFromCache = NULL;

/*
 * gpu_kmeans_shard_rows(shard, id, feature, job, centroids, metric, seed,
 * round, scale, count): the rows of one relation that a step of
 * gpu_kmeans_fit_distributed's k-means|| picks, in its text form.  job
 * 'first': the count rows of least gpu_kmeans_row_hash(id, seed, 0); 'sample':
 * the rows gpu_kmeans_sample draws in round round; 'far': the count rows of
 * greatest gpu_kmeans_distance (ties: the lower id first).
 */
Datum
gpu_kmeans_shard_rows(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext rowcxt;
	Oid			relid;
	char	   *job_s;
	GkrJob		job;
	gc_metric	metric;
	int64		seed;
	int32		round;
	double		scale;
	int64		count;
	int32		k = 0;
	int32		d = -1;
	double	   *cent = NULL;
	double	   *dist = NULL;
	GkmScan		sc;
	Oid			ftype;
	Oid			idtype;
	GcFeatureType kind;
	gc_dtype	dtype;
	GkrPick		pk;
	GkrRow	   *rows;
	int64		m;
	StringInfoData b;
	StringInfoData hex;

	GkmShardArgsNotNull(fcinfo, "gpu_kmeans_shard_rows", 4);
	relid = PG_GETARG_OID(0);
	job_s = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(job_s, "first") == 0)
		job = GKR_FIRST;
	else if (strcmp(job_s, "sample") == 0)
		job = GKR_SAMPLE;
	else if (strcmp(job_s, "far") == 0)
		job = GKR_FAR;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("job of gpu_kmeans_shard_rows must be 'first', 'sample' or 'far'"),
				 errhint("gpu_kmeans_fit_distributed calls it on every shard for k-means|| seeding.")));
	metric = GkmMetricArg(fcinfo, 5);
	seed = PG_ARGISNULL(6) ? 0 : PG_GETARG_INT64(6);
	round = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7);
	scale = PG_ARGISNULL(8) ? 0.0 : PG_GETARG_FLOAT8(8);
	count = PG_ARGISNULL(9) ? 0 : PG_GETARG_INT64(9);
	if (job != GKR_SAMPLE && (count < 0 || count > INT32_MAX / 2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("count of gpu_kmeans_shard_rows must be between 0 and %d", INT32_MAX / 2),
				 errhint("count is the number of rows the request picks.")));
	if (job != GKR_FIRST)
	{
		double	   *cen = GkmCentroidArray(DatumGetArrayTypeP(GkmCentroidsArg(fcinfo, 4)), &k, &d);

		/* as gpu_kmeans_sample and gpu_kmeans_distance read them (GkmGetModel) */
		if (metric == GC_METRIC_COSINE)
			for (int32 j = 0; j < k; j++)
				if (!gc_unit_row_f64(cen + (Size) j * d, d))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("row %d of centroids is all zero", j + 1),
							 errhint("With the cosine metric every centroid needs a nonzero value.")));
		cent = palloc(sizeof(double) * (Size) k * d);
		gc_kmeans_transpose(cen, k, d, cent);
		dist = palloc(sizeof(double) * k);
	}

	memset(&pk, 0, sizeof(pk));
	pk.job = job;
	pk.cxt = cxt;
	pk.metric = metric;
	pk.seed = seed;
	pk.round = round;
	pk.scale = scale;
	pk.count = count;
	pk.k = k;
	pk.d = d;
	pk.cent = cent;
	pk.dist = dist;
	if (GkrFromCache)
		GkrFromCacheRows(&pk, GkrFromCache, &dtype);
	else
	{
		Datum		v;
		Datum		idv;
		bool		isnull;
		bool		idnull;

		{
			const char *f = quote_identifier(NameStr(*PG_GETARG_NAME(2)));

			GkmScanOpen(&sc, psprintf("SELECT %s, %s FROM %s WHERE %s IS NOT NULL", f,
									  quote_identifier(NameStr(*PG_GETARG_NAME(1))), GkmRelName(relid), f));
		}
		ftype = sc.type[0];
		idtype = sc.type[1];
		kind = GkmFeatureKind(ftype, "gpu_kmeans_shard_rows");
		dtype = GcFeatureDtype(kind, ftype);
		rowcxt = AllocSetContextCreate(cxt, "gpu_kmeans_shard_rows rows", ALLOCSET_DEFAULT_SIZES);
		while (GkmScanNext(&sc, &v, &isnull, &idv, &idnull))
		{
			GkrRow		r;
			MemoryContext old;

			if (idnull)
				continue;	/* gpu_kmeans_sample draws no row without an id */
			r.id = GkrId(idv, idtype);
			old = MemoryContextSwitchTo(rowcxt);
			if (pk.d < 0)
			{
				/* 'first' has no centroids: the first row's dimension */
				GcRowRef	ref = {0, -1, 0};
				GcFeature	feat;

				GcFeatureOpen(kind, ftype, v, &ref, rowcxt, &feat);
				pk.d = feat.d;
			}
			r.x = GkmReadFeature(v, ftype, kind, dtype, metric, pk.d, NULL, NULL, "gpu_kmeans_shard_rows");
			MemoryContextSwitchTo(old);
			GkrConsider(&pk, r);
			MemoryContextReset(rowcxt);
		}
		GkmScanClose(&sc);
		MemoryContextDelete(rowcxt);
	}
	rows = pk.rows;
	m = pk.m;
	d = pk.d;
	if (job == GKR_SAMPLE && m > 1)
		qsort(rows, m, sizeof(GkrRow), GkrCompareNear);

	initStringInfo(&b);
	PutInt(&b, m, 8);
	PutInt(&b, Max(d, 0), 4);
	PutInt(&b, dtype, 1);
	for (int64 i = 0; i < m; i++)
	{
		uint64		bits;

		memcpy(&bits, &rows[i].key, 8);
		PutInt(&b, (int64) bits, 8);
		PutInt(&b, rows[i].id, 8);
		for (int32 t = 0; t < d; t++)
		{
			memcpy(&bits, &rows[i].x[t], 8);
			PutInt(&b, (int64) bits, 8);
		}
	}
	initStringInfo(&hex);
	appendStringInfoString(&hex, GKR_TEXT_PREFIX);
	enlargeStringInfo(&hex, b.len * 2 + 1);
	hex_encode(b.data, b.len, hex.data + hex.len);
	hex.len += 2 * b.len;
	hex.data[hex.len] = '\0';
	PG_RETURN_TEXT_P(cstring_to_text_with_len(hex.data, hex.len));
}

/* ---------------------------------------------------------------- the shard calls of a fit, on the workers */

/*
 * gpu_kmeans_fit_distributed runs each pass over a Citus table as one
 * ordinary distributed query that Citus sends to every shard on the
 * connections it keeps for the coordinator's transaction:
 *
 *   SELECT gpu_kmeans_shard_call(tableoid, ctid, fit, pass, ...) FROM t
 *   WHERE [ctid = ANY(probes) AND] gpu_kmeans_shard_once(tableoid, fit, pass)
 *
 * gpu_kmeans_shard_once lets one row per shard and pass through (the first
 * the shard's scan or its TID probes meet), and gpu_kmeans_shard_call then
 * does the shard's work once: a step's partial state or a k-means|| pick.
 * The fit first takes LOCK TABLE t IN ACCESS SHARE MODE, which makes Citus
 * run the rest of its transaction in a transaction block on every worker,
 * one connection per shard placement for the whole transaction: the same
 * worker backend serves a shard in every pass of one fit.
 *
 * That backend keeps, per fit and shard, the shard's rows as the step reads
 * them (one scan per fit), each row's cluster and a Hamerly lower bound on
 * its distance to every other centroid (Hamerly, "Making k-means even
 * faster", SDM 2010), the last pass's centroids and the exact sums of the
 * rows per cluster.  A later pass computes every row's exact distance to
 * its own cluster's centroid; the row keeps its cluster without any other
 * distance when that distance, with a margin of GKC_SLACK, is below both
 * half the distance from its centroid to the nearest other centroid and its
 * lower bound (moved by the centroids' moves), else it gets the full search
 * (the checked matrix product or the exact loop, the lowest cluster number
 * on a tie).  The sums then change only by the rows that changed cluster
 * (the accumulators are exact, so subtracting a row and adding it elsewhere
 * gives the same sums as adding every row again), and the squared distances
 * are summed again from every row.  So the partial state is the stateless
 * step's bit for bit.
 *
 * The cache lives in the worker backend's memory, at most
 * gpuclust.kmeans_shard_cache megabytes per backend (the coordinator's
 * setting, passed with every call; 0: off); it is built only inside a
 * transaction block and dropped at the block's end (commit, abort, or a
 * subtransaction's abort), when a call of another fit arrives, when the
 * fit's last call asks for it, or when the shard's relation cache entry is
 * invalidated (its rows are then read again).  The rows are those of the
 * shard's first pass in the fit: the shard's lock, held to the end of the
 * worker's transaction, keeps TRUNCATE, DROP and ALTER out meanwhile.
 */

/* Bytes per cached row besides its features and id: its label, bound and distance. */
#define GKC_ROW_BYTES (sizeof(int32) + 2 * sizeof(double))

/* The margin of the bounds' test, as src/core/kmeans.c's BOUND_SLACK. */
#define GKC_SLACK 1e-9

/* One shard of one fit in this backend. */
struct GkcEntry
{
	struct GkcEntry *next;
	MemoryContext cxt;			/* the entry's memory, a child of GkcCxt */
	int64		fit;
	Oid			shard;
	int32		gate_pass;		/* the pass gpu_kmeans_shard_once let a row through for */
	bool		stale;			/* the relation cache entry was invalidated */
	bool		refused;		/* over the cap: this fit reads the shard every pass */
	/* the rows, once read */
	bool		have_rows;
	Oid			ftype;
	int32		d;
	int16		metric;
	int16		dtype;
	int64		n;				/* rows with a feature */
	int64		nulls;			/* rows with a NULL feature */
	void	   *x;				/* [n, d] the rows as the step reads them, of element type dtype */
	int64	   *ids;			/* [n] their ids, or NULL (a NULL id or none asked for) */
	/* what the last pass left */
	int32		k;				/* 0: no labels */
	int32	   *label;			/* [n] */
	double	   *lower;			/* [n] a lower bound on the distance to every other centroid */
	double	   *best;			/* [n] the squared distance to its centroid (this pass) */
	double	   *cen;			/* [k, d] the last pass's working centroids */
	bool		have_sums;
	gc_sacc    *sums;			/* [k, d] the exact sums of the rows per label */
	int64	   *counts;			/* [k] */
	int64		pending;		/* additions to sums since they were normalized */
};

static MemoryContext GkcCxt = NULL;
static GkcEntry *GkcEntries = NULL;
static bool GkcCallbacks = false;

/* Drops every entry of this backend. */
static void
GkcDropAll(void)
{
	GkcEntries = NULL;
	if (GkcCxt)
		MemoryContextDelete(GkcCxt);
	GkcCxt = NULL;
}

/* Frees what entry e holds but keeps the entry (its gate). */
static void
GkcDropRows(GkcEntry *e)
{
	MemoryContextReset(e->cxt);
	e->have_rows = false;
	e->x = NULL;
	e->ids = NULL;
	e->k = 0;
	e->label = NULL;
	e->lower = NULL;
	e->best = NULL;
	e->cen = NULL;
	e->have_sums = false;
	e->sums = NULL;
	e->counts = NULL;
	e->n = 0;
	e->nulls = 0;
	e->stale = false;
}

static void
GkcXact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			GkcDropAll();
			break;
		default:
			break;
	}
}

static void
GkcSubXact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		GkcDropAll();
}

/* Marks the entries of relid (every entry when InvalidOid) stale; frees nothing here. */
static void
GkcRelcache(Datum arg, Oid relid)
{
	for (GkcEntry *e = GkcEntries; e; e = e->next)
		if (!OidIsValid(relid) || e->shard == relid)
			e->stale = true;
}

/* Bytes the cache of this backend holds. */
static Size
GkcBytes(void)
{
	return GkcCxt ? MemoryContextMemAllocated(GkcCxt, true) : 0;
}

/* The entry of fit and shard, made when missing; entries of other fits are dropped. */
static GkcEntry *
GkcEntryFor(int64 fit, Oid shard)
{
	GkcEntry   *e;

	if (!GkcCallbacks)
	{
		RegisterXactCallback(GkcXact, NULL);
		RegisterSubXactCallback(GkcSubXact, NULL);
		CacheRegisterRelcacheCallback(GkcRelcache, (Datum) 0);
		GkcCallbacks = true;
	}
	if (GkcEntries && GkcEntries->fit != fit)
		GkcDropAll();
	for (e = GkcEntries; e; e = e->next)
		if (e->shard == shard)
			return e;
	if (GkcCxt == NULL)
		GkcCxt = AllocSetContextCreate(TopMemoryContext, "gpuclust k-means shard cache", ALLOCSET_DEFAULT_SIZES);
	e = MemoryContextAllocZero(GkcCxt, sizeof(GkcEntry));
	e->cxt = AllocSetContextCreate(GkcCxt, "gpuclust k-means shard", ALLOCSET_DEFAULT_SIZES);
	e->fit = fit;
	e->shard = shard;
	e->gate_pass = -1;
	e->next = GkcEntries;
	GkcEntries = e;
	return e;
}

/*
 * gpu_kmeans_shard_once(shard, fit, pass): true for the first row it is
 * asked about per shard, fit and pass in this backend, false after.
 */
Datum
gpu_kmeans_shard_once(PG_FUNCTION_ARGS)
{
	GkcEntry   *e;

	GkmShardArgsNotNull(fcinfo, "gpu_kmeans_shard_once", 3);
	e = GkcEntryFor(PG_GETARG_INT64(1), PG_GETARG_OID(0));
	if (e->gate_pass == PG_GETARG_INT32(2))
		PG_RETURN_BOOL(false);
	e->gate_pass = PG_GETARG_INT32(2);
	PG_RETURN_BOOL(true);
}

/*
 * Reads the shard's rows into e (the step's reading: NULL features counted,
 * the others checked and copied in the element type, unit length for
 * cosine), at most cap bytes in the cache in all; false (and nothing kept)
 * when they do not fit.
 */
static bool
GkcRead(GkcEntry *e, const char *feature, const char *id, int32 d, gc_metric metric, Size cap)
{
	MemoryContext rowcxt;
	GkmScan		sc;
	Datum		v;
	Datum		idv;
	bool		isnull;
	bool		idnull;
	Oid			ftype;
	GcFeatureType kind;
	gc_dtype	dtype;
	Size		esz;
	int64		cap_rows = 0;
	double	   *scratch;
	bool		fits = true;
	Oid			idtype;
	bool		keep_ids;

	GkcDropRows(e);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kmeans_shard_call rows", ALLOCSET_DEFAULT_SIZES);
	GkmScanOpen(&sc, psprintf("SELECT %s, %s FROM %s", quote_identifier(feature),
							  id ? quote_identifier(id) : "NULL::bigint", GkmRelName(e->shard)));
	ftype = sc.type[0];
	idtype = sc.type[1];
	keep_ids = id != NULL && (idtype == INT2OID || idtype == INT4OID || idtype == INT8OID);
	kind = GkmFeatureKind(ftype, "gpu_kmeans_shard_call");
	dtype = GcFeatureDtype(kind, ftype);
	esz = dtype == GC_F64 ? sizeof(double) : sizeof(float);
	e->ftype = ftype;
	e->d = d;
	e->metric = (int16) metric;
	e->dtype = (int16) dtype;
	scratch = MemoryContextAlloc(e->cxt, sizeof(double) * Max(d, 1));
	{
		/* room for the rows the statistics expect, so that the cap is not spent on doublings */
		Relation	rel = RelationIdGetRelation(e->shard);

		if (RelationIsValid(rel))
		{
			if (rel->rd_rel->reltuples > 0 && rel->rd_rel->reltuples < 1e12)
				cap_rows = (int64) (rel->rd_rel->reltuples * 1.01) + 1024;
			RelationClose(rel);
		}
		if (cap_rows > 0)
		{
			if (GkcBytes() + (Size) cap_rows * (d * esz + (keep_ids ? sizeof(int64) : 0) + GKC_ROW_BYTES) > cap)
				cap_rows = 0;	/* perhaps fewer rows than the statistics say: grow as they come */
			else
			{
				e->x = MemoryContextAllocExtended(e->cxt, (Size) cap_rows * d * esz, MCXT_ALLOC_HUGE);
				if (keep_ids)
					e->ids = MemoryContextAllocExtended(e->cxt, sizeof(int64) * cap_rows, MCXT_ALLOC_HUGE);
			}
		}
	}
	while (fits && GkmScanNext(&sc, &v, &isnull, &idv, &idnull))
	{
		MemoryContext old;

		if (isnull)
		{
			e->nulls++;
			continue;
		}
		if (e->n == cap_rows)
		{
			int64		want = Max(cap_rows + cap_rows / 2, 1024);

			if (GkcBytes() + (Size) (want - cap_rows) * (d * esz + (keep_ids ? sizeof(int64) : 0)) > cap)
			{
				fits = false;
				break;
			}
			e->x = e->x ? repalloc_huge(e->x, (Size) want * d * esz)
				: MemoryContextAllocExtended(e->cxt, (Size) want * d * esz, MCXT_ALLOC_HUGE);
			if (keep_ids)
				e->ids = e->ids ? repalloc_huge(e->ids, sizeof(int64) * want)
					: MemoryContextAllocExtended(e->cxt, sizeof(int64) * want, MCXT_ALLOC_HUGE);
			cap_rows = want;
		}
		if (keep_ids)
		{
			if (idnull)
			{
				/* k-means|| draws no row without an id: its picks read the relation */
				keep_ids = false;
				if (e->ids)
					pfree(e->ids);
				e->ids = NULL;
			}
			else
				e->ids[e->n] = GkrId(idv, idtype);
		}
		old = MemoryContextSwitchTo(rowcxt);
		GkmReadFeature(v, ftype, kind, dtype, metric, d, scratch,
					   (double *) ((char *) e->x + (Size) e->n * d * esz), "gpu_kmeans_shard_call");
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
		e->n++;
	}
	GkmScanClose(&sc);
	MemoryContextDelete(rowcxt);
	if (fits && e->n < cap_rows && e->n > 0)
	{
		/* give back the room not used */
		e->x = repalloc_huge(e->x, (Size) e->n * d * esz);
		if (e->ids)
			e->ids = repalloc_huge(e->ids, sizeof(int64) * e->n);
	}
	if (fits && (Size) GKC_ROW_BYTES * e->n + GkcBytes() > cap)
		fits = false;			/* no room for the labels and bounds */
	if (!fits)
	{
		GkcDropRows(e);
		return false;
	}
	e->have_rows = true;
	e->label = MemoryContextAllocExtended(e->cxt, sizeof(int32) * Max(e->n, 1), MCXT_ALLOC_HUGE);
	e->lower = MemoryContextAllocExtended(e->cxt, sizeof(double) * Max(e->n, 1), MCXT_ALLOC_HUGE);
	e->best = MemoryContextAllocExtended(e->cxt, sizeof(double) * Max(e->n, 1), MCXT_ALLOC_HUGE);
	return true;
}

/* Row i of the cached rows as doubles, into row [d]. */
static inline void
GkcRow(const GkcEntry *e, int64 i, double *row)
{
	if (e->dtype == GC_F64)
		memcpy(row, (const double *) e->x + (Size) i * e->d, sizeof(double) * e->d);
	else
	{
		const float *r = (const float *) e->x + (Size) i * e->d;

		for (int32 t = 0; t < e->d; t++)
			row[t] = (double) r[t];
	}
}

/*
 * Offers every cached row of e with its id to the k-means|| request pk
 * (the rows gpu_kmeans_shard_rows would read from the relation, read as it
 * reads them); the element type in *dtype.
 */
static void
GkrFromCacheRows(GkrPick *pk, GkcEntry *e, gc_dtype *dtype)
{
	double	   *row = palloc(sizeof(double) * Max(e->d, 1));

	if (pk->d >= 0 && pk->d != e->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature has %d dimension%s, but the centroids have %d column%s",
						e->d, e->d == 1 ? "" : "s", pk->d, pk->d == 1 ? "" : "s")));
	pk->d = e->d;
	*dtype = (gc_dtype) e->dtype;
	for (int64 i = 0; i < e->n; i++)
	{
		GkrRow		r;

		r.id = e->ids[i];
		r.key = 0.0;
		GkcRow(e, i, row);
		r.x = row;
		GkrConsider(pk, r);
		if ((i & 16383) == 16383)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(row);
}

/* Work (distances times features) a thread of a pass does between two looks at cancel. */
#define GKC_CANCEL_WORK ((int64) 1 << 24)

/* Rows of a block of a pass's parallel parts (the search's rounded up to whole batches). */
#define GKC_GRAIN 2048

/*
 * Work (distances times features, in millions) from which a part of a pass
 * runs on more than one thread (the developer setting
 * gpuclust.kmeans_shard_thread_work, the worker's): the workers' backends
 * serve their shards at the same time, each with gpuclust.cpu_threads
 * threads, and a part waits for its slowest thread.  On the 2-core machine
 * (1M rows x 32, k = 100, 8 shards on 2 workers of 2 threads each) every
 * part on 2 threads took the fit from 159 to 230 ms per iteration; from 64
 * million only the search of a shard's first pass and the larger searches
 * after it are threaded.
 */
static int	kmeans_shard_thread_work_guc = 64;

/*
 * What the threads of one parallel part of a cached pass read and write
 * (GkcParallel): the search of rows[] (or from, from + 1, ...) or the
 * bounds of every row.  Each thread has its own scratch (by worker id) and
 * writes only its rows' entries, so that nothing depends on which thread
 * ran which block; the threads call nothing of PostgreSQL.
 */
typedef struct GkcPar
{
	GkcEntry   *e;
	int32		k;
	int32		d;
	int32		B;				/* rows of a search batch */
	const double *cent;			/* [d, k] the centroids (GKM_CENT) */
	const double *cw;			/* [k, d] the same, row-major */
	GkmGemm    *g;				/* the checked product, or NULL: the exact loop */
	gc_kmg_scratch **scratch;	/* [threads] the product's scratch of each thread */
	double	   *row;			/* [threads, d] */
	double	   *dist;			/* [threads, k] */
	int32	   *lab;			/* [threads, B] */
	double	   *bst;			/* [threads, B] */
	double	   *sec;			/* [threads, B] */
	const int64 *rows;			/* the search's rows, or NULL: from, from + 1, ... */
	int64		from;
	const double *delta;		/* [k] how far each centroid moved */
	const double *half;			/* [k] half the distance to its nearest other */
	int32		jmax;			/* the centroid that moved most */
	double		second;			/* the second largest move */
	bool	   *open;			/* [n] out: the bounds do not settle the row */
} GkcPar;

/*
 * The threads of a part of a pass over n items of work units each:
 * gpuclust.cpu_threads, at most one per grain of the items; one below
 * gpuclust.kmeans_shard_thread_work.
 */
static int
GkcThreads(int64 n, int64 grain, int64 units)
{
	if ((double) n * units < (double) kmeans_shard_thread_work_guc * 1e6)
		return 1;
	SyncTuning();
	return (int) Max(1, Min((int64) gc_tuning_gucs.cpu_threads, (n + grain - 1) / grain));
}

/* The most threads a part of the current shard call ran on (its DEBUG1 line). */
static int	GkcCallThreads = 1;

/*
 * Runs fn over [0, n) in blocks of grain on threads threads (the backend's
 * own among them); a cancel is raised here once they have all stopped.
 */
static void
GkcParallel(int threads, int64 n, int64 grain, gc_pool_fn fn, void *arg)
{
	gc_error	err;
	gc_timing	timing;
	gc_core_ctx ctx;
	gc_status	st;

	if (!GcCoreContext(&ctx, &err, &timing, threads))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("The threads of a k-means pass over a shard could not be started."),
				 errhint("Lower gpuclust.cpu_threads.")));
	st = gc_pool_for(ctx.pool, n, grain, fn, arg);
	GkcCallThreads = Max(GkcCallThreads, gc_pool_threads_used(ctx.pool));
	gc_pool_free(ctx.pool);
	if (st == GC_ERR_CANCELLED)
	{
		CHECK_FOR_INTERRUPTS();
		elog(ERROR, "a k-means pass over a shard stopped for a cancel that did not come, please report a bug");
	}
	if (st != GC_OK)
		elog(ERROR, "a k-means pass over a shard failed: %s", err.message);
}

/* The full search of the items [begin, end) of p's rows, in batches of p->B from a multiple of it. */
static gc_status
GkcSearchBlock(void *arg, gc_worker *w, int64_t begin, int64_t end)
{
	GkcPar	   *p = arg;
	GkcEntry   *e = p->e;
	int32		k = p->k;
	int32		d = p->d;
	double	   *row = p->row + (Size) w->id * d;
	double	   *dist = p->dist + (Size) w->id * k;
	int32	   *lab = p->lab + (Size) w->id * p->B;
	double	   *bst = p->bst + (Size) w->id * p->B;
	double	   *sec = p->sec + (Size) w->id * p->B;

	for (int64 q0 = begin; q0 < end; q0 += p->B)
	{
		int32		nb = (int32) Min((int64) p->B, end - q0);
		int64		work = (int64) nb * k * d;

		if (p->g != NULL)
			work = gc_kmg_assign(p->g->kmg, p->scratch[w->id], e->x, p->rows ? p->rows + q0 : NULL,
								 p->from + q0, nb, lab, bst, sec, NULL);
		else
			for (int32 q = 0; q < nb; q++)
			{
				int64		i = p->rows ? p->rows[q0 + q] : p->from + q0 + q;
				double		second = HUGE_VAL;

				GkcRow(e, i, row);
				lab[q] = GkmNearest(row, d, p->cent, k, dist, &bst[q]);
				for (int32 j = 0; j < k; j++)
					if (j != lab[q] && dist[j] < second)
						second = dist[j];
				sec[q] = second;
			}
		for (int32 q = 0; q < nb; q++)
		{
			int64		i = p->rows ? p->rows[q0 + q] : p->from + q0 + q;

			e->label[i] = lab[q];
			e->best[i] = bst[q];
			e->lower[i] = sqrt(sec[q]);
		}
		if (gc_worker_tick(w, work, GKC_CANCEL_WORK))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/*
 * Hamerly's test of the rows [begin, end): each row's lower bound moved by
 * the centroids' moves, its distance to its centroid anew, and whether the
 * bounds leave it open (p->open).
 */
static gc_status
GkcBoundBlock(void *arg, gc_worker *w, int64_t begin, int64_t end)
{
	GkcPar	   *p = arg;
	GkcEntry   *e = p->e;
	int32		d = p->d;
	double	   *row = p->row + (Size) w->id * d;

	for (int64 i = begin; i < end; i++)
	{
		int32		a = e->label[i];
		double		u;
		double		m;

		e->lower[i] -= a == p->jmax ? p->second : p->delta[p->jmax];
		GkcRow(e, i, row);
		e->best[i] = gc_dist2_f64(row, p->cw + (Size) a * d, d);
		u = sqrt(e->best[i]);
		m = p->half[a] > e->lower[i] ? p->half[a] : e->lower[i];
		p->open[i] = !(u * (1.0 + GKC_SLACK) < m);
		if (gc_worker_tick(w, d, GKC_CANCEL_WORK))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/*
 * The full search for the count rows rows[] (or from, from + 1, ...): their
 * labels, squared distances (e->best) and lower bounds (e->lower), through
 * the checked product g when not NULL, else the exact loop; or, when
 * GkmWantGpu says so for device, through GkmAssignOn with the working
 * centroids cw [k, d] (a lower bound of 0 then, the back end giving no
 * second distance).  Returns whether the GPU searched them.
 */
static bool
GkcSearch(GkcEntry *e, GkmState *s, GkmGemm *g, const int64 *rows, int64 from, int64 count,
		  FunctionCallInfo fcinfo, GcDevice device, const double *cw)
{
	int32		k = s->k;
	int32		d = s->d;
	int32		B = GkmBlock(d);
	int32	   *lab;
	double	   *bst;

	if (GkmWantGpu(device, count, e->dtype, d))
	{
		Size		esz = e->dtype == GC_F64 ? sizeof(double) : sizeof(float);
		const void *x = (const char *) e->x + (Size) from * d * esz;
		void	   *gathered = NULL;
		bool		gpu;

		lab = palloc_extended(sizeof(int32) * count, MCXT_ALLOC_HUGE);
		bst = palloc_extended(sizeof(double) * count, MCXT_ALLOC_HUGE);
		if (rows)
		{
			gathered = palloc_extended((Size) count * d * esz, MCXT_ALLOC_HUGE);
			for (int64 q = 0; q < count; q++)
				memcpy((char *) gathered + (Size) q * d * esz, (const char *) e->x + (Size) rows[q] * d * esz,
					   (Size) d * esz);
			x = gathered;
		}
		gpu = GkmAssignOn(fcinfo, device, x, (gc_dtype) e->dtype, count, d, cw, k, lab, bst);
		for (int64 q = 0; q < count; q++)
		{
			int64		i = rows ? rows[q] : from + q;

			e->label[i] = lab[q];
			e->best[i] = bst[q];
			e->lower[i] = 0.0;
		}
		if (gathered)
			pfree(gathered);
		pfree(lab);
		pfree(bst);
		return gpu;
	}

	if (count <= 0)
		return false;
	{
		/* batches of B rows from multiples of B, as one thread would take them, on the pass's threads */
		int64		grain = (int64) B * (((int64) GKC_GRAIN + B - 1) / B);
		int			threads = GkcThreads(count, grain, (int64) k * d);
		GkcPar		p;

		memset(&p, 0, sizeof(p));
		p.e = e;
		p.k = k;
		p.d = d;
		p.B = B;
		p.cent = GKM_CENT(s);
		p.g = g;
		p.rows = rows;
		p.from = from;
		p.row = palloc(sizeof(double) * threads * d);
		p.dist = palloc(sizeof(double) * threads * k);
		p.lab = palloc(sizeof(int32) * threads * B);
		p.bst = palloc(sizeof(double) * threads * B);
		p.sec = palloc(sizeof(double) * threads * B);
		if (g != NULL)
		{
			p.scratch = palloc0(sizeof(gc_kmg_scratch *) * threads);
			p.scratch[0] = g->scratch;
			for (int t = 1; t < threads; t++)
				if ((p.scratch[t] = gc_kmg_scratch_create(g->kmg, B)) == NULL)
				{
					for (int u = 1; u < t; u++)
						gc_kmg_scratch_free(p.scratch[u]);
					ereport(ERROR,
							(errcode(ERRCODE_OUT_OF_MEMORY),
							 errmsg("out of memory"),
							 errdetail("The scratch of a k-means pass's thread could not be allocated."),
							 errhint("Lower gpuclust.cpu_threads, or set gpuclust.cpu_blas to off.")));
				}
		}
		GkmNearestChoose();
		PG_TRY();
		{
			GkcParallel(threads, count, grain, GkcSearchBlock, &p);
		}
		PG_FINALLY();
		{
			for (int t = 1; g != NULL && t < threads; t++)
				gc_kmg_scratch_free(p.scratch[t]);
		}
		PG_END_TRY();
		if (p.scratch)
			pfree(p.scratch);
		pfree(p.row);
		pfree(p.dist);
		pfree(p.lab);
		pfree(p.bst);
		pfree(p.sec);
	}
	return false;
}

/*
 * Adds every cached row to s under its label and distance (e->label,
 * e->best), block by block through the step's own sums.
 */
static void
GkcAddAll(GkcEntry *e, GkmState *s)
{
	GkmAddAssigned(s, e->x, e->n, e->label, e->best);
	GkmFoldAll(s);
}

/*
 * The step of state s (empty, its centroids set) over e's cached rows:
 * Hamerly's bounds when the last pass had as many centroids, else the full
 * search (GkcSearch: on the GPU when GkmWantGpu says so for device, the
 * rows it searched counted in *gpu_rows); the same state as the scan's, bit
 * for bit.  Returns the rows that took the full search.
 */
static int64
GkcStep(GkcEntry *e, GkmState *s, MemoryContext cxt, FunctionCallInfo fcinfo, GcDevice device,
		int64 *gpu_rows)
{
	int32		k = s->k;
	int32		d = s->d;
	int64		n = e->n;
	double	   *cw = palloc(sizeof(double) * (Size) k * d);	/* [k, d] working centroids */
	double	   *row = palloc(sizeof(double) * d);
	GkmGemm    *g = GkmGemmFor(cxt, s);
	bool		bounded = e->k == k && e->cen != NULL;
	int32	   *old = NULL;
	int64		full = 0;

	gc_kmeans_transpose(GKM_CENT(s), d, k, cw);	/* [d, k] -> [k, d] */
	s->nulls = e->nulls;

	if (!bounded)
	{
		if (GkcSearch(e, s, g, NULL, 0, n, fcinfo, device, cw))
			*gpu_rows += n;
		full = n;
	}
	else
	{
		double	   *delta = palloc(sizeof(double) * k);
		double	   *half = palloc(sizeof(double) * k);
		int64	   *redo = palloc_extended(sizeof(int64) * Max(n, 1), MCXT_ALLOC_HUGE);
		int32		jmax = 0;
		double		second = 0.0;

		for (int32 j = 0; j < k; j++)
		{
			delta[j] = sqrt(gc_dist2_f64(cw + (Size) j * d, e->cen + (Size) j * d, d));
			if (delta[j] > delta[jmax])
				jmax = j;
		}
		for (int32 j = 0; j < k; j++)
			if (j != jmax && delta[j] > second)
				second = delta[j];
		for (int32 j = 0; j < k; j++)
		{
			double		h = HUGE_VAL;

			for (int32 j2 = 0; j2 < k; j2++)
				if (j2 != j)
				{
					double		v = 0.5 * sqrt(gc_dist2_f64(cw + (Size) j * d, cw + (Size) j2 * d, d));

					if (v < h)
						h = v;
				}
			half[j] = h;
		}
		if (e->have_sums)
		{
			old = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
			memcpy(old, e->label, sizeof(int32) * n);
		}
		if (n > 0)
		{
			/* Hamerly's test of every row on the pass's threads, then the open rows in row order */
			int64		grain = GKC_GRAIN;
			int			threads = GkcThreads(n, grain, d);
			GkcPar		p;

			memset(&p, 0, sizeof(p));
			p.e = e;
			p.d = d;
			p.cw = cw;
			p.delta = delta;
			p.half = half;
			p.jmax = jmax;
			p.second = second;
			p.row = palloc(sizeof(double) * threads * d);
			p.open = palloc_extended(sizeof(bool) * n, MCXT_ALLOC_HUGE);
			GkcParallel(threads, n, grain, GkcBoundBlock, &p);
			for (int64 i = 0; i < n; i++)
				if (p.open[i])
					redo[full++] = i;
			pfree(p.open);
			pfree(p.row);
		}
		if (GkcSearch(e, s, g, redo, 0, full, fcinfo, device, cw))
			*gpu_rows += full;
		pfree(redo);
		pfree(delta);
		pfree(half);
	}

	if ((s->mode & GKM_SUMS) && old != NULL)
	{
		/* the sums move by the rows that changed cluster; the squared distances again */
		gc_sacc    *d2 = GKM_D2(s);

		for (int64 i = 0; i < n; i++)
		{
			int32		a = old[i];
			int32		b = e->label[i];

			if (a != b)
			{
				GkcRow(e, i, row);
				if (e->pending + 2 >= GC_SACC_MAX_PENDING)
				{
					for (Size c = 0; c < (Size) k * d; c++)
						gc_sacc_normalize(&e->sums[c]);
					e->pending = 0;
				}
				for (int32 t = 0; t < d; t++)
				{
					gc_sacc_add(&e->sums[(Size) b * d + t], row[t]);
					gc_sacc_add(&e->sums[(Size) a * d + t], -row[t]);
				}
				e->pending += 2;
				e->counts[a]--;
				e->counts[b]++;
			}
			gc_sacc_add(&d2[b], e->best[i]);
			if ((i & 16383) == 16383)
				CHECK_FOR_INTERRUPTS();
		}
		memcpy(GKM_COUNTS(s), e->counts, sizeof(int64) * k);
		memcpy(GKM_SUMSP(s), e->sums, sizeof(gc_sacc) * (Size) k * d);
		s->rows = n;
		s->pending = Max(n, e->pending);
		GkmNormalize(s);
	}
	else
	{
		GkcAddAll(e, s);
		GkmNormalize(s);
		e->have_sums = false;
		if (s->mode & GKM_SUMS)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(e->cxt);

			if (e->sums == NULL || e->k != k)
			{
				if (e->sums)
					pfree(e->sums);
				if (e->counts)
					pfree(e->counts);
				e->sums = palloc(sizeof(gc_sacc) * (Size) k * d);
				e->counts = palloc(sizeof(int64) * k);
			}
			MemoryContextSwitchTo(oldcxt);
			memcpy(e->sums, GKM_SUMSP(s), sizeof(gc_sacc) * (Size) k * d);
			memcpy(e->counts, GKM_COUNTS(s), sizeof(int64) * k);
			e->pending = 0;
			e->have_sums = true;
		}
	}
	if (old)
		pfree(old);
	if (e->cen == NULL || e->k != k)
	{
		if (e->cen)
			pfree(e->cen);
		e->cen = MemoryContextAlloc(e->cxt, sizeof(double) * (Size) k * d);
	}
	memcpy(e->cen, cw, sizeof(double) * (Size) k * d);
	e->k = k;
	pfree(cw);
	pfree(row);
	return full;
}

/* The shard id at the end of a Citus shard's name (name_<shardid>), or -1. */
static pg_noinline int64
GkcShardId(Oid relid)
{
	char	   *name = get_rel_name(relid);
	char	   *us = name ? strrchr(name, '_') : NULL;
	char	   *end;
	long long	v;

	if (us == NULL || us[1] == '\0')
		return -1;
	errno = 0;
	v = strtoll(us + 1, &end, 10);
	return *end == '\0' && errno == 0 ? (int64) v : -1;
}

/* Arguments of gpu_kmeans_shard_call. */
#define GKC_ARG_SHARD		0
#define GKC_ARG_PROBE		1
#define GKC_ARG_FIT			2
#define GKC_ARG_PASS		3
#define GKC_ARG_JOB			4
#define GKC_ARG_ID			5
#define GKC_ARG_FEATURE		6
#define GKC_ARG_CENTROIDS	7
#define GKC_ARG_METRIC		8
#define GKC_ARG_MODE		9
#define GKC_ARG_SEED		10
#define GKC_ARG_ROUND		11
#define GKC_ARG_SCALE		12
#define GKC_ARG_COUNT		13
#define GKC_ARG_CACHE		14
#define GKC_NARGS			15

#define GKC_TEXT_PREFIX "gks1:"

/* What a call did with the cache (the answer's third field). */
#define GKC_OFF		0			/* no cache: one scan */
#define GKC_FILLED	1			/* read the rows into the cache, then the step on them */
#define GKC_HIT		2			/* the step on the cached rows */

/*
 * The device of a step job: "step:auto", "step:gpu" or "step:cpu" (the
 * coordinator's gpuclust.device, which the fit sends with every pass), or
 * "step" (this session's gpuclust.device).  *is_step: whether job is one.
 */
static GcDevice
GkcStepDevice(const char *job, bool *is_step)
{
	*is_step = strncmp(job, "step", 4) == 0 && (job[4] == '\0' || job[4] == ':');
	if (!*is_step || job[4] == '\0')
		return (GcDevice) gc_device_guc;
	return GcDeviceFromText(cstring_to_text(job + 5));
}

/*
 * The fit this backend runs as the coordinator, while it runs (-1: none; an
 * error leaves a stale id, which no later call carries): its shard calls
 * that Citus executes in this same backend keep their rows too.
 */
static int64 KfRunningFit = -1;

/*
 * The row cache of a node for one fit, in megabytes (0: off): each of its
 * shards' backends keeps the node's share (see gpu_kmeans_fit_distributed).
 */
static int	kmeans_shard_cache_guc = 1024;

/*
 * gpu_kmeans_shard_call(shard, probe, fit, pass, job, id, feature,
 * centroids, metric, mode, seed, round, scale, count, cache_mb): the work of
 * one pass of gpu_kmeans_fit_distributed on one shard, as text:
 * "gks1:<shard id>:<cache use>:<full searches>:<rows searched on the
 * GPU>:<probe>:" and the step's state (job 'step', or 'step:<device>' to
 * compute on that device, see GkcStepDevice) or gpu_kmeans_shard_rows's rows
 * (job 'first', 'sample', 'far'); job 'drop' drops the fit's cache of the
 * shard.  An error names the shard.
 */
Datum
gpu_kmeans_shard_call(PG_FUNCTION_ARGS)
{
	Oid			shard;
	int64		fit;
	char	   *job;
	int32		cache_mb;
	int64		shardid;
	MemoryContext cxt = CurrentMemoryContext;
	StringInfoData out;
	volatile int use = GKC_OFF;
	volatile int64 full = -1;
	volatile int64 gpu_rows = 0;
	char	   *volatile payload = "";
	GcDevice	device;
	bool		is_step;

	for (int i = 0; i < GKC_NARGS; i++)
		if (PG_ARGISNULL(i) && i != GKC_ARG_CENTROIDS && i != GKC_ARG_ID)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of gpu_kmeans_shard_call must not be NULL", i + 1),
					 errhint("gpu_kmeans_fit_distributed calls it on every shard.")));
	shard = PG_GETARG_OID(GKC_ARG_SHARD);
	fit = PG_GETARG_INT64(GKC_ARG_FIT);
	job = text_to_cstring(PG_GETARG_TEXT_PP(GKC_ARG_JOB));
	cache_mb = PG_GETARG_INT32(GKC_ARG_CACHE);
	shardid = GkcShardId(shard);
	device = GkcStepDevice(job, &is_step);

	PG_TRY();
	{
		if (is_step)
		{
			int32		k;
			int32		d;
			double	   *cen = GkmCentroidArray(DatumGetArrayTypeP(GkmCentroidsArg(fcinfo, GKC_ARG_CENTROIDS)), &k, &d);
			gc_metric	metric = GkmMetricArg(fcinfo, GKC_ARG_METRIC);
			int32		mode = PG_GETARG_INT32(GKC_ARG_MODE);
			const char *feature = NameStr(*PG_GETARG_NAME(GKC_ARG_FEATURE));
			GkcEntry   *e = GkcEntryFor(fit, shard);
			GkmState   *s;
			int64		on_gpu = 0;

			GkmShardMode(mode);
			if (e->stale || (e->have_rows && (e->d != d || e->metric != (int16) metric)))
				GkcDropRows(e);
			/*
			 * A worker's backend keeps the rows inside the coordinator's
			 * transaction block; a shard that the coordinator itself holds
			 * is called in the fit's own backend (Citus's local execution),
			 * where the fit's transaction is the statement's.
			 */
			if (fit == KfRunningFit && cache_mb > 0)
				cache_mb = kmeans_shard_cache_guc;	/* this node's shards, all in this backend */
			if (!e->have_rows && !e->refused && cache_mb > 0 && (IsTransactionBlock() || fit == KfRunningFit))
			{
				if (GkcRead(e, feature, PG_ARGISNULL(GKC_ARG_ID) ? NULL : NameStr(*PG_GETARG_NAME(GKC_ARG_ID)),
							d, metric, (Size) cache_mb * 1024 * 1024))
					use = GKC_FILLED;
				else
					e->refused = true;
			}
			else if (e->have_rows)
				use = GKC_HIT;
			GkcCallThreads = 1;
			if (e->have_rows)
			{
				s = GkmNew(cxt, k, d, metric, (gc_dtype) e->dtype, mode);
				s->ftype = e->ftype;
				memcpy(GKM_CEN(s), cen, sizeof(double) * (Size) k * d);
				GkmWorkingCentroids(s);
				full = GkcStep(e, s, cxt, fcinfo, device, &on_gpu);
			}
			else
				s = GkmShardStepScan(shard, feature, cen, k, d, metric, mode, cxt, fcinfo, device, &on_gpu);
			gpu_rows = on_gpu;
			elog(DEBUG1, "gpuclust: kmeans_shard_step shard=" INT64_FORMAT " rows=" INT64_FORMAT
				 " cache=%s searched=" INT64_FORMAT " device=%s gpu_searched=" INT64_FORMAT " threads=%d",
				 shardid, s->rows, use == GKC_HIT ? "hit" : use == GKC_FILLED ? "filled" : "off",
				 full >= 0 ? full : s->rows, on_gpu > 0 ? "gpu" : "cpu", on_gpu, GkcCallThreads);
			payload = DatumGetCString(DirectFunctionCall1(gpu_kmeans_state_out, PointerGetDatum(s)));
		}
		else if (strcmp(job, "drop") == 0)
		{
			GkcEntry   *e = GkcEntryFor(fit, shard);

			GkcDropRows(e);
		}
		else
		{
			LOCAL_FCINFO(rf, 10);
			GkcEntry   *e = GkcEntryFor(fit, shard);

			if (e->stale)
				GkcDropRows(e);
			if (e->have_rows && e->ids != NULL)
			{
				GkrFromCache = e;
				use = GKC_HIT;
			}

			InitFunctionCallInfoData(*rf, NULL, 10, InvalidOid, NULL, NULL);
			rf->args[0].value = ObjectIdGetDatum(shard);
			rf->args[1].value = PG_GETARG_DATUM(GKC_ARG_ID);
			rf->args[2].value = PG_GETARG_DATUM(GKC_ARG_FEATURE);
			rf->args[3].value = PG_GETARG_DATUM(GKC_ARG_JOB);
			rf->args[4].value = PG_ARGISNULL(GKC_ARG_CENTROIDS) ? (Datum) 0 : PG_GETARG_DATUM(GKC_ARG_CENTROIDS);
			rf->args[5].value = PG_GETARG_DATUM(GKC_ARG_METRIC);
			rf->args[6].value = PG_GETARG_DATUM(GKC_ARG_SEED);
			rf->args[7].value = PG_GETARG_DATUM(GKC_ARG_ROUND);
			rf->args[8].value = PG_GETARG_DATUM(GKC_ARG_SCALE);
			rf->args[9].value = PG_GETARG_DATUM(GKC_ARG_COUNT);
			for (int i = 0; i < 10; i++)
				rf->args[i].isnull = false;
			rf->args[1].isnull = PG_ARGISNULL(GKC_ARG_ID);
			rf->args[4].isnull = PG_ARGISNULL(GKC_ARG_CENTROIDS);
			payload = text_to_cstring(DatumGetTextPP(gpu_kmeans_shard_rows(rf)));
			GkrFromCache = NULL;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *name;

		GkrFromCache = NULL;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED || edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE)
			PG_RE_THROW();
		FlushErrorState();
		name = get_rel_name(shard);
		if (name && shardid >= 0)
		{
			char	   *us = strrchr(name, '_');

			if (us)
				*us = '\0';		/* the distributed table's name */
		}
		if (name == NULL)
			name = psprintf("the relation of OID %u", shard);
		if (shardid >= 0)
			edata->message = psprintf("k-means on shard " INT64_FORMAT " of %s failed: %s", shardid,
									  name, edata->message ? edata->message : "");
		else
			edata->message = psprintf("k-means on %s failed: %s", name,
									  edata->message ? edata->message : "");
		ReThrowError(edata);
	}
	PG_END_TRY();

	initStringInfo(&out);
	appendStringInfo(&out, GKC_TEXT_PREFIX INT64_FORMAT ":%d:" INT64_FORMAT ":" INT64_FORMAT ":%s:%s", shardid, use,
					 full, gpu_rows, DatumGetCString(DirectFunctionCall1(tidout, PG_GETARG_DATUM(GKC_ARG_PROBE))),
					 payload);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
}

/*
 * gpu_kmeans_shard_cache(): what this backend's cache holds: per fit and
 * shard its rows, whether it has their labels, and the bytes of the whole
 * cache.
 */
Datum
gpu_kmeans_shard_cache(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (GkcEntry *e = GkcEntries; e; e = e->next)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = Int64GetDatum(e->fit);
		values[1] = ObjectIdGetDatum(e->shard);
		values[2] = Int64GetDatum(e->have_rows ? e->n : 0);
		values[3] = Int32GetDatum(e->k);
		values[4] = Int64GetDatum((int64) GkcBytes());
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ---------------------------------------------------------------- the distributed fit */

#define KF_ARG_QUERY		0
#define KF_ARG_K			1
#define KF_ARG_MAX_ITER		2
#define KF_ARG_TOL			3
#define KF_ARG_SEED			4
#define KF_ARG_CENTROIDS	5
#define KF_ARG_N_INIT		6
#define KF_ARG_METRIC		7
#define KF_ARG_OVERSAMPLING	8
#define KF_ARG_ROUNDS		9

/* Weighted Lloyd iterations on the k-means|| candidates, at most. */
#define KF_RECLUSTER_ITER 100

/* One distributed fit: the queries it runs and what it knows of the rows. */
typedef struct GkmFit
{
	MemoryContext cxt;			/* the call's, outlives each query */
	char	   *sql_state;		/* the step's state over the query */
	char	   *sql_first;		/* rows in the order of their draws of a round */
	char	   *sql_sample;		/* the rows a k-means|| round draws */
	char	   *sql_far;		/* rows farthest from their centroid */
	Oid			ftype;
	GcFeatureType kind;
	gc_dtype	dtype;
	gc_metric	metric;
	int32		d;
	int64		n;
	int64		seed;			/* of the current run */
	int64		queries;		/* aggregate queries (or rounds of shard calls) run */
	const char *schema;			/* gpuclust's, quoted */
	bool		sharded;		/* one call per shard of rel (KfShardable) */
	Oid			rel;
	char	   *id_col;
	char	   *f_col;
	int64		nshards;
	int64		shard_calls;	/* calls run on shards */
	/* the passes as distributed queries (KfRunPass) */
	char	   *relname;		/* the table, qualified and quoted */
	int64	   *shardids;		/* [nshards] ascending */
	bool	   *live;			/* [nshards] the shard had rows at the first pass */
	char	  **probe;			/* [nshards] the TID of the row its last answer came from */
	int64		fit_id;			/* the fit's key in the workers' caches */
	int32		pass;
	int32		cache_mb;		/* a shard's share of gpuclust.kmeans_shard_cache */
	int64		node_shards;	/* the most placements of the table on one node */
	int64		cache_hits;		/* shard calls that found the shard's rows cached */
	int64		cache_fills;	/* shard calls that read the rows into the cache */
	int64		full_searches;	/* rows of cached shards that took the full search */
	int64		gpu_steps;		/* shard calls of steps whose search ran on the GPU */
	int64		gpu_searches;	/* rows those searched on the GPU */
	int64		rescans;		/* passes sent again without the probes */
} GkmFit;

/* Defines gpuclust.kmeans_shard_cache. */
void
GcKmeansDistDefineGucs(void)
{
	DefineCustomIntVariable("gpuclust.kmeans_shard_cache",
							"Memory per node for the rows a distributed k-means fit keeps between passes (MB).",
							"gpu_kmeans_fit_distributed on a Citus table: each shard's backend keeps its rows, "
							"their clusters and Hamerly bounds for the fit, up to this divided by the table's shards "
							"on the node that holds the most, and reads a shard again every pass when it does not fit; "
							"0 turns the cache off.  Read on the coordinator.",
							&kmeans_shard_cache_guc, 1024, 0, INT_MAX / 2,
							PGC_USERSET, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.kmeans_shard_thread_work",
							"Developer setting: the work from which a part of a shard's k-means pass is threaded.",
							"In millions of distances times features; a part with less runs on the worker backend's "
							"own thread, one with more on gpuclust.cpu_threads threads.  Read on the worker.",
							&kmeans_shard_thread_work_guc, 64, 0, INT_MAX,
							PGC_USERSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------- the calls per shard */

/*
 * Whether the query is SELECT id, f FROM t of a table t (not partitioned)
 * that Citus distributes over shards (no WHERE, join, grouping, order,
 * limit or row security): then every pass over the rows is one call per shard
 * (f->sharded, with the table and the two columns), else an aggregate query.
 */
static void
KfShardable(GkmFit *f, const char *query)
{
	SPIPlanPtr	plan = SPI_prepare(query, 0, NULL);
	List	   *sources;
	CachedPlanSource *ps;
	Query	   *q;
	RangeTblEntry *rte;
	List	   *vars = NIL;
	ListCell   *lc;
	Oid			types[1] = {OIDOID};
	Datum		values[1];
	Oid			relid;
	AttrNumber	id_att;
	AttrNumber	f_att;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	sources = SPI_plan_get_plan_sources(plan);
	if (list_length(sources) != 1)
		return;
	ps = linitial(sources);
	if (list_length(ps->query_list) != 1)
		return;
	q = linitial_node(Query, ps->query_list);
	if (q->commandType != CMD_SELECT || q->utilityStmt || q->hasAggs || q->hasWindowFuncs ||
		q->hasTargetSRFs || q->hasSubLinks || q->hasDistinctOn || q->hasRecursive ||
		q->hasModifyingCTE || q->hasForUpdate || q->hasRowSecurity || q->cteList ||
		list_length(q->rtable) != 1 || list_length(q->jointree->fromlist) != 1 ||
		!IsA(linitial(q->jointree->fromlist), RangeTblRef) || q->jointree->quals ||
		q->groupClause || q->groupingSets || q->havingQual || q->windowClause ||
		q->distinctClause || q->sortClause || q->limitOffset || q->limitCount ||
		q->rowMarks || q->setOperations)
		return;
	rte = linitial_node(RangeTblEntry, q->rtable);
	/*
	 * Not a partitioned table: its rows' tableoid is a partition's shard,
	 * which the passes could not tell apart from the table's shards.  A heap
	 * table: the passes find a row of each shard by its TID, which Citus's
	 * columnar storage does not offer.
	 */
	if (rte->rtekind != RTE_RELATION || !rte->inh || rte->tablesample || rte->relkind != RELKIND_RELATION)
		return;
	{
		HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(rte->relid));
		Oid			relam = InvalidOid;

		if (HeapTupleIsValid(tp))
		{
			relam = ((Form_pg_class) GETSTRUCT(tp))->relam;
			ReleaseSysCache(tp);
		}
		if (relam != HEAP_TABLE_AM_OID)
			return;
	}
	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) te->expr;

		if (te->resjunk)
			continue;
		if (!IsA(v, Var) || v->varno != 1 || v->varlevelsup != 0 || v->varattno <= 0)
			return;
		vars = lappend(vars, v);
	}
	if (list_length(vars) != 2)
		return;
	/* what the rest needs, before the plan (and the query tree in it) is freed */
	relid = rte->relid;
	id_att = ((Var *) linitial(vars))->varattno;
	f_att = ((Var *) lsecond(vars))->varattno;
	list_free(vars);
	SPI_freeplan(plan);

	/* a table Citus distributes (hash, range or append), with its shards */
	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "the catalog could not be read, please report a bug");
	if (SPI_processed != 1)
		return;
	values[0] = ObjectIdGetDatum(relid);
	if (SPI_execute_with_args("SELECT count(*) FROM pg_catalog.pg_dist_partition p "
							  "JOIN pg_catalog.pg_dist_shard s USING (logicalrelid) "
							  "WHERE p.logicalrelid = $1 AND p.partmethod IN ('h', 'r', 'a')",
							  1, types, values, NULL, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "the Citus catalog could not be read, please report a bug");
	{
		bool		isnull;
		int64		shards = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		SPI_freetuptable(SPI_tuptable);
		if (shards < 1)
			return;
		f->nshards = shards;
	}
	if (SPI_execute_with_args("SELECT shardid FROM pg_catalog.pg_dist_shard WHERE logicalrelid = $1 ORDER BY shardid",
							  1, types, values, NULL, true, 0) != SPI_OK_SELECT ||
		SPI_processed != (uint64) f->nshards)
		elog(ERROR, "the Citus catalog could not be read, please report a bug");
	f->shardids = MemoryContextAlloc(f->cxt, sizeof(int64) * f->nshards);
	f->live = MemoryContextAllocZero(f->cxt, sizeof(bool) * f->nshards);
	f->probe = MemoryContextAllocZero(f->cxt, sizeof(char *) * f->nshards);
	for (int64 i = 0; i < f->nshards; i++)
	{
		bool		isnull;

		f->shardids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	/* the shards of the node that holds the most: they share gpuclust.kmeans_shard_cache there */
	if (SPI_execute_with_args("SELECT max(c) FROM (SELECT count(*) AS c FROM pg_catalog.pg_dist_placement p "
							  "JOIN pg_catalog.pg_dist_shard s USING (shardid) WHERE s.logicalrelid = $1 "
							  "GROUP BY p.groupid) q", 1, types, values, NULL, true, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "the Citus catalog could not be read, please report a bug");
	{
		bool		isnull;
		Datum		v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		f->node_shards = isnull ? 1 : Max(DatumGetInt64(v), 1);
		SPI_freetuptable(SPI_tuptable);
	}
	f->relname = MemoryContextStrdup(f->cxt, quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																		get_rel_name(relid)));
	f->sharded = true;
	f->rel = relid;
	f->id_col = MemoryContextStrdup(f->cxt, get_attname(relid, id_att, false));
	f->f_col = MemoryContextStrdup(f->cxt, get_attname(relid, f_att, false));
}

/* The index of shard id in f->shardids, or -1. */
static int64
KfShardIndex(const GkmFit *f, int64 shardid)
{
	int64		lo = 0;
	int64		hi = f->nshards - 1;

	while (lo <= hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (f->shardids[mid] == shardid)
			return mid;
		if (f->shardids[mid] < shardid)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/*
 * Runs sql through SPI (not read-only); an error is raised again, a lost or
 * unreachable worker as a connection failure that names the table.
 */
static int
KfExecute(GkmFit *f, const char *sql)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile int ret = 0;

	CHECK_FOR_INTERRUPTS();
	PG_TRY();
	{
		ret = SPI_execute(sql, false, 0);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION &&
			strstr(edata->message, "failure on connection") == NULL)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("k-means on the shards of %s failed: %s", get_rel_name(f->rel), edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("A worker node went away or could not be reached; the fit was stopped and nothing was written. Run it again when every node is up.")));
	}
	PG_END_TRY();
	return ret;
}

/*
 * Runs one query of the pass on the fit's table: gpu_kmeans_shard_call with
 * the arguments args (after shard, probe, fit and pass) on the rows
 * gpu_kmeans_shard_once lets through, only among the probes' TIDs when
 * probes.  Fills out [nshards] with the answers' payloads.  An error of the
 * query is raised again, a lost worker as a connection failure.
 */
static void
KfRunQuery(GkmFit *f, const char *args, bool probes, char **out)
{
	StringInfoData q;
	int			ret;

	initStringInfo(&q);
	appendStringInfo(&q, "SELECT %s.gpu_kmeans_shard_call(tableoid, ctid, " INT64_FORMAT ", %d, %s) FROM %s WHERE ",
					 f->schema, f->fit_id, f->pass, args, f->relname);
	if (probes)
	{
		bool		first = true;

		appendStringInfoString(&q, "ctid = ANY('{");
		for (int64 i = 0; i < f->nshards; i++)
			if (f->probe[i])
			{
				appendStringInfo(&q, "%s\"%s\"", first ? "" : ",", f->probe[i]);
				first = false;
			}
		appendStringInfoString(&q, "}'::pg_catalog.tid[]) AND ");
	}
	appendStringInfo(&q, "%s.gpu_kmeans_shard_once(tableoid, " INT64_FORMAT ", %d)", f->schema, f->fit_id, f->pass);
	ret = KfExecute(f, q.data);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "a k-means pass returned %d, please report a bug", ret);
	f->shard_calls += SPI_processed;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
		char	   *p = v;
		char	   *end;
		int64		shardid;
		int64		i;
		int			use;
		int64		full;
		int64		gpu;
		char	   *tid;

		if (v == NULL || strncmp(v, GKC_TEXT_PREFIX, strlen(GKC_TEXT_PREFIX)) != 0)
			elog(ERROR, "a shard gave no k-means answer, please report a bug");
		p += strlen(GKC_TEXT_PREFIX);
		shardid = strtoll(p, &end, 10);
		if (*end != ':')
			elog(ERROR, "a shard gave a malformed k-means answer, please report a bug");
		p = end + 1;
		use = (int) strtol(p, &end, 10);
		p = end + 1;
		full = strtoll(p, &end, 10);
		p = end + 1;
		gpu = strtoll(p, &end, 10);
		if (*end != ':')
			elog(ERROR, "a shard gave a malformed k-means answer, please report a bug");
		p = end + 1;
		tid = p;
		end = strchr(p, ':');
		if (end == NULL)
			elog(ERROR, "a shard gave a malformed k-means answer, please report a bug");
		*end = '\0';
		i = KfShardIndex(f, shardid);
		if (i < 0)
			elog(ERROR, "shard " INT64_FORMAT " is not a shard of %s, please report a bug", shardid, get_rel_name(f->rel));
		if (out[i])
			elog(ERROR, "shard " INT64_FORMAT " answered twice in one pass, please report a bug", shardid);
		out[i] = MemoryContextStrdup(f->cxt, end + 1);
		if (f->probe[i])
			pfree(f->probe[i]);
		f->probe[i] = MemoryContextStrdup(f->cxt, tid);
		f->cache_hits += use == GKC_HIT;
		f->cache_fills += use == GKC_FILLED;
		if (full > 0)
			f->full_searches += full;
		f->gpu_steps += gpu > 0;
		f->gpu_searches += gpu;
		pfree(v);
	}
	SPI_freetuptable(SPI_tuptable);
	pfree(q.data);
}

/*
 * One pass over the fit's table: gpu_kmeans_shard_call with args on every
 * shard, all at once, through Citus's executor (one task per shard, on the
 * connection Citus keeps for the shard's placement in this transaction).
 * The first pass scans for a row per shard and learns each shard's probe
 * TID; a later one looks only at the probes, and the shards those missed
 * (their row gone) are asked again with a scan in the same pass, which
 * gpu_kmeans_shard_once keeps from answering twice.  Returns the payloads
 * [nshards] (NULL for the shards that had no rows at the first pass).
 */
static char **
KfRunPass(GkmFit *f, const char *args)
{
	char	  **out = MemoryContextAllocZero(f->cxt, sizeof(char *) * f->nshards);
	bool		first = f->pass == 0;
	bool		missing = false;

	f->pass++;
	f->queries++;
	KfRunQuery(f, args, !first, out);
	for (int64 i = 0; i < f->nshards; i++)
	{
		if (first && out[i])
			f->live[i] = true;
		missing |= f->live[i] && out[i] == NULL;
	}
	if (missing)
	{
		f->rescans++;
		KfRunQuery(f, args, false, out);
		for (int64 i = 0; i < f->nshards; i++)
			if (f->live[i] && out[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("shard " INT64_FORMAT " of %s lost all its rows during the k-means fit",
								f->shardids[i], get_rel_name(f->rel)),
						 errhint("Run the fit again when the table is not being changed.")));
	}
	return out;
}

/* The call's arguments after the job: id, feature. */
static void
KfAppendCols(GkmFit *f, StringInfo b)
{
	appendStringInfo(b, "%s::name, %s::name, ", quote_literal_cstr(f->id_col), quote_literal_cstr(f->f_col));
}

/* Appends a float8[] literal of cen [k, d], every value exactly (17 digits). */
static void
KfAppendMatrix(StringInfo b, const double *cen, int32 k, int32 d)
{
	appendStringInfoString(b, "'{");
	for (int32 j = 0; j < k; j++)
	{
		appendStringInfoString(b, j ? ",{" : "{");
		for (int32 t = 0; t < d; t++)
			appendStringInfo(b, t ? ",%.17g" : "%.17g", cen[(Size) j * d + t]);
		appendStringInfoChar(b, '}');
	}
	appendStringInfoString(b, "}'::double precision[]");
}

/* Drops the fit's caches on the workers (the probes only: what they miss goes at transaction end). */
static void
KfDropCaches(GkmFit *f)
{
	char	  **out = MemoryContextAllocZero(f->cxt, sizeof(char *) * f->nshards);
	bool		any = false;

	for (int64 i = 0; i < f->nshards; i++)
		any |= f->probe[i] != NULL;
	if (!any)
		return;
	f->pass++;
	KfRunQuery(f, "'drop', NULL, 'f', NULL, 'euclidean', 0, 0, 0, 0, 0, 0", true, out);
	for (int64 i = 0; i < f->nshards; i++)
		f->shard_calls -= out[i] != NULL;	/* only the passes' calls are counted */
}

/*
 * The state of a step over the table, one gpu_kmeans_shard_call per shard,
 * combined in the order of the shard ids (exact sums: any order gives the
 * same bits).  NULL when the table has no rows.
 */
static GkmState *
KfShardState(GkmFit *f, const double *cen, int32 k, int32 mode)
{
	StringInfoData b;
	char	  **res;
	GkmState   *s = NULL;
	GkmState   *prev;

	initStringInfo(&b);
	/* the coordinator's gpuclust.device decides on every worker */
	appendStringInfo(&b, "'step:%s', ", gc_device_guc == GC_DEVICE_GPU ? "gpu" :
					 gc_device_guc == GC_DEVICE_CPU ? "cpu" : "auto");
	KfAppendCols(f, &b);
	KfAppendMatrix(&b, cen, k, f->d);
	appendStringInfo(&b, ", '%s', %d, 0, 0, 0, 0, %d", f->metric == GC_METRIC_COSINE ? "cosine" : "euclidean",
					 mode, f->cache_mb);
	res = KfRunPass(f, b.data);
	pfree(b.data);
	for (int64 i = 0; i < f->nshards; i++)
	{
		Datum		part;

		if (res[i] == NULL)
			continue;
		part = DirectFunctionCall1(gpu_kmeans_state_in, CStringGetDatum(res[i]));
		prev = s;
		s = s == NULL ? (GkmState *) DatumGetPointer(part)
			: (GkmState *) DatumGetPointer(DirectFunctionCall2(gpu_kmeans_step_combine,
															   PointerGetDatum(s), part));
		/* the combination is a new state: free what it was made of */
		if (prev != NULL && prev != s)
			pfree(prev);
		if ((Pointer) s != DatumGetPointer(part))
			pfree(DatumGetPointer(part));
		pfree(res[i]);
	}
	pfree(res);
	if (s == NULL)
		return NULL;
	if (s->dtype != f->dtype)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the shards read the features in another precision than the coordinator"),
				 errhint("Set gpuclust.precision alike on every node.")));
	if (s->rows == 0 && s->nulls == 0)
	{
		pfree(s);
		return NULL;
	}
	{
		GkmState   *copy = MemoryContextAlloc(f->cxt, VARSIZE(s));

		memcpy(copy, s, VARSIZE(s));
		pfree(s);
		return copy;
	}
}

/*
 * The rows a k-means|| request picks over the whole table (see
 * gpu_kmeans_shard_rows): every shard's picks merged in the order of the
 * request, the first count of them (all of a sample), appended to rows
 * [*m, d] of capacity *cap as in KfFeatures.
 */
static double *
KfShardRows(GkmFit *f, const char *job, const double *cen, int32 k, int32 round, double scale,
			int64 count, double *rows, int64 *m, int64 *cap)
{
	StringInfoData b;
	char	  **res;
	GkrRow	   *all = NULL;
	int64		n = 0;
	int64		ncap = 0;
	bool		far = strcmp(job, "far") == 0;
	Size		prefix = strlen(GKR_TEXT_PREFIX);

	initStringInfo(&b);
	appendStringInfo(&b, "'%s', ", job);
	KfAppendCols(f, &b);
	if (cen)
		KfAppendMatrix(&b, cen, k, f->d);
	else
		appendStringInfoString(&b, "NULL");
	appendStringInfo(&b, ", '%s', 0, " INT64_FORMAT ", %d, %.17g, " INT64_FORMAT ", %d",
					 f->metric == GC_METRIC_COSINE ? "cosine" : "euclidean", f->seed, round, scale, count,
					 f->cache_mb);
	res = KfRunPass(f, b.data);
	pfree(b.data);
	for (int64 i = 0; i < f->nshards; i++)
	{
		Size		len;
		Size		hexlen;
		unsigned char *bin;
		const unsigned char *p;
		const unsigned char *end;
		int64		rn;
		int32		rd;

		if (res[i] == NULL)
			continue;
		len = strlen(res[i]);

		if (len < prefix || strncmp(res[i], GKR_TEXT_PREFIX, prefix) != 0 || (len - prefix) % 2 != 0)
			elog(ERROR, "a shard returned no k-means|| rows, please report a bug");
		hexlen = len - prefix;
		bin = palloc(hexlen / 2 + 1);
		hex_decode(res[i] + prefix, hexlen, (char *) bin);
		p = bin;
		end = bin + hexlen / 2;
		rn = GetInt(&p, end, 8);
		rd = (int32) GetInt(&p, end, 4);
		if ((gc_dtype) GetInt(&p, end, 1) != f->dtype && rn > 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the shards read the features in another precision than the coordinator"),
					 errhint("Set gpuclust.precision alike on every node.")));
		if (rn > 0 && rd != f->d)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("a shard has features of %d dimensions, but the query's first row has %d", rd, f->d)));
		for (int64 r = 0; r < rn; r++)
		{
			uint64		bits;

			if (n == ncap)
			{
				ncap = ncap * 2 + 16;
				all = all ? repalloc_huge(all, sizeof(GkrRow) * ncap) : palloc_extended(sizeof(GkrRow) * ncap, MCXT_ALLOC_HUGE);
			}
			bits = (uint64) GetInt(&p, end, 8);
			memcpy(&all[n].key, &bits, 8);
			all[n].id = GetInt(&p, end, 8);
			all[n].x = palloc(sizeof(double) * f->d);
			for (int32 t = 0; t < f->d; t++)
			{
				bits = (uint64) GetInt(&p, end, 8);
				memcpy(&all[n].x[t], &bits, 8);
			}
			n++;
		}
		pfree(bin);
		pfree(res[i]);
	}
	pfree(res);
	if (n > 1)
		qsort(all, n, sizeof(GkrRow), far ? GkrCompareFar : GkrCompareNear);
	if (strcmp(job, "sample") != 0 && n > count)
		n = count;
	for (int64 i = 0; i < n; i++)
	{
		if (*m == *cap)
		{
			*cap = *cap * 2 + 16;
			if ((Size) *cap * f->d * sizeof(double) > MaxAllocSize)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("too many k-means|| candidates"),
						 errhint("Use a smaller oversampling or fewer rounds.")));
			rows = rows ? repalloc(rows, sizeof(double) * (Size) *cap * f->d)
				: MemoryContextAlloc(f->cxt, sizeof(double) * (Size) *cap * f->d);
		}
		memcpy(rows + (Size) *m * f->d, all[i].x, sizeof(double) * f->d);
		(*m)++;
	}
	return rows;
}

/* The metric's name, as the SQL functions take it. */
static Datum
KfMetricText(const GkmFit *f)
{
	return CStringGetTextDatum(f->metric == GC_METRIC_COSINE ? "cosine" : "euclidean");
}

/*
 * The state of a step over the query: centroids cen [k, d], mode; copied into
 * the fit's context.  NULL when the query has no rows.
 */
static GkmState *
KfState(GkmFit *f, const double *cen, int32 k, int32 mode)
{
	Oid			types[3] = {FLOAT8ARRAYOID, TEXTOID, INT4OID};
	Datum		values[3];
	bool		isnull;
	Datum		v;
	GkmState   *s;
	GkmState   *copy;
	int			ret;

	if (f->sharded)
		return KfShardState(f, cen, k, mode);
	CHECK_FOR_INTERRUPTS();
	values[0] = PointerGetDatum(GkmMatrix(cen, k, f->d));
	values[1] = KfMetricText(f);
	values[2] = Int32GetDatum(mode);
	ret = SPI_execute_with_args(f->sql_state, 3, types, values, NULL, true, 0);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "the k-means step query returned %d (" UINT64_FORMAT " rows), please report a bug",
			 ret, SPI_processed);
	f->queries++;
	v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
	{
		SPI_freetuptable(SPI_tuptable);
		return NULL;
	}
	s = (GkmState *) PG_DETOAST_DATUM(v);
	copy = MemoryContextAlloc(f->cxt, VARSIZE(s));
	memcpy(copy, s, VARSIZE(s));
	GkmFlush(copy);
	SPI_freetuptable(SPI_tuptable);
	pfree(DatumGetPointer(values[0]));
	return copy;
}

/*
 * Runs a query whose rows are one feature each and appends them, read as
 * the step reads them (unit length for cosine), to rows [*m, d] of capacity
 * *cap; returns the rows.
 */
static double *
KfFeatures(GkmFit *f, const char *sql, int nargs, Oid *types, Datum *values,
		   double *rows, int64 *m, int64 *cap)
{
	int			ret;

	CHECK_FOR_INTERRUPTS();
	ret = SPI_execute_with_args(sql, nargs, types, values, NULL, true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "a k-means|| query returned %d, please report a bug", ret);
	f->queries++;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			continue;
		if (*m == *cap)
		{
			*cap = *cap * 2 + 16;
			if ((Size) *cap * f->d * sizeof(double) > MaxAllocSize)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("too many k-means|| candidates"),
						 errhint("Use a smaller oversampling or fewer rounds.")));
			rows = rows ? repalloc(rows, sizeof(double) * (Size) *cap * f->d)
				: MemoryContextAlloc(f->cxt, sizeof(double) * (Size) *cap * f->d);
		}
		GkmReadFeature(v, f->ftype, f->kind, f->dtype, f->metric, f->d,
					   rows + (Size) *m * f->d, palloc(sizeof(double) * f->d), "gpu_kmeans_fit_distributed");
		(*m)++;
	}
	SPI_freetuptable(SPI_tuptable);
	return rows;
}

/* The first count rows in the order of their draws of round 0 (the seed's). */
static double *
KfFirstRows(GkmFit *f, int64 count, double *rows, int64 *m, int64 *cap)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(f->seed), Int64GetDatum(count)};

	if (f->sharded)
		return KfShardRows(f, "first", NULL, 0, 0, 0.0, count, rows, m, cap);
	return KfFeatures(f, f->sql_first, 2, types, values, rows, m, cap);
}

/* The total of the squared distances of a state (exact, rounded once). */
static double
KfPotential(const GkmState *s)
{
	gc_sacc		t;

	memset(&t, 0, sizeof(t));
	for (int32 j = 0; j < s->k; j++)
	{
		gc_sacc		a = GKM_D2(s)[j];

		gc_sacc_normalize(&a);
		gc_sacc_merge(&t, &a);
		gc_sacc_normalize(&t);
	}
	return gc_sacc_round(&t);
}

/*
 * Weighted k-means++ (D^2 sampling, each candidate's chance times its
 * weight) of m candidates x [m, d] with weights w into k centroids cen
 * [k, d], then weighted Lloyd iterations on the candidates: the
 * reclustering step of k-means||.
 */
static void
KfRecluster(GkmFit *f, const double *x, const int64 *w, int64 m, int32 k, double *cen)
{
	int32		d = f->d;
	gc_rng		rng;
	double	   *mind2 = palloc(sizeof(double) * m);
	bool	   *chosen = palloc0(sizeof(bool) * m);
	int32	   *label = palloc(sizeof(int32) * m);
	double	   *cent = palloc(sizeof(double) * (Size) k * d);
	double	   *dist = palloc(sizeof(double) * k);
	double	   *sums = palloc(sizeof(double) * (Size) k * d);
	double	   *wsum = palloc(sizeof(double) * k);
	double		total = 0.0;
	int64		pick = 0;

	gc_rng_seed(&rng, (uint64) f->seed ^ UINT64_C(0x6b6d65616e737c7c));
	/* the first: by weight alone (a candidate nobody is nearest to has none) */
	for (int64 i = 0; i < m; i++)
		total += (double) w[i];
	if (total > 0)
	{
		double		r = gc_rng_uniform(&rng) * total;

		for (pick = 0; pick < m - 1; pick++)
		{
			r -= (double) w[pick];
			if (r < 0)
				break;
		}
	}
	for (int32 c = 0; c < k; c++)
	{
		memcpy(cen + (Size) c * d, x + (Size) pick * d, sizeof(double) * d);
		chosen[pick] = true;
		if (c == k - 1)
			break;
		total = 0.0;
		for (int64 i = 0; i < m; i++)
		{
			double		d2 = gc_dist2_f64(x + (Size) i * d, cen + (Size) c * d, d);

			if (c == 0 || d2 < mind2[i])
				mind2[i] = d2;
			if (!chosen[i])
				total += mind2[i] * (double) w[i];
		}
		if (total > 0)
		{
			double		r = gc_rng_uniform(&rng) * total;

			pick = -1;
			for (int64 i = 0; i < m; i++)
			{
				if (chosen[i])
					continue;
				pick = i;
				r -= mind2[i] * (double) w[i];
				if (r < 0)
					break;
			}
		}
		else
		{
			/* every candidate left is a centre already: the first not chosen */
			pick = 0;
			while (pick < m && chosen[pick])
				pick++;
		}
		if (pick < 0 || pick >= m)
			elog(ERROR, "k-means|| ran out of candidates, please report a bug");
	}

	/* weighted Lloyd on the candidates */
	for (int it = 0; it < KF_RECLUSTER_ITER; it++)
	{
		bool		changed = it == 0;

		CHECK_FOR_INTERRUPTS();
		gc_kmeans_transpose(cen, k, d, cent);
		memset(sums, 0, sizeof(double) * (Size) k * d);
		memset(wsum, 0, sizeof(double) * k);
		for (int64 i = 0; i < m; i++)
		{
			double		d2;
			int32		j = GkmNearest(x + (Size) i * d, d, cent, k, dist, &d2);

			if (it > 0 && j != label[i])
				changed = true;
			label[i] = j;
			wsum[j] += (double) w[i];
			for (int32 t = 0; t < d; t++)
				sums[(Size) j * d + t] += (double) w[i] * x[(Size) i * d + t];
		}
		if (!changed)
			break;
		for (int32 j = 0; j < k; j++)
			if (wsum[j] > 0)
			{
				for (int32 t = 0; t < d; t++)
					cen[(Size) j * d + t] = sums[(Size) j * d + t] / wsum[j];
				if (f->metric == GC_METRIC_COSINE)
					gc_kmeans_unit_centroid(cen + (Size) j * d, d);
			}
	}
	pfree(mind2);
	pfree(chosen);
	pfree(label);
	pfree(cent);
	pfree(dist);
	pfree(sums);
	pfree(wsum);
}

/*
 * k-means|| (Bahmani et al., "Scalable K-Means++"): k initial centroids
 * cen [k, d] from rounds of sampling passes over the query.
 */
static void
KfInitParallel(GkmFit *f, int32 k, double oversampling, int32 rounds, double *cen)
{
	double	   *cand = NULL;
	int64		m = 0;
	int64		cap = 0;
	double		l = oversampling * k;
	GkmState   *s;

	cand = KfFirstRows(f, 1, cand, &m, &cap);
	if (m != 1)
		elog(ERROR, "k-means|| found no first row, please report a bug");
	for (int32 r = 1; r <= rounds; r++)
	{
		double		phi;
		Oid			types[5] = {FLOAT8ARRAYOID, TEXTOID, INT8OID, INT4OID, FLOAT8OID};
		Datum		values[5];

		if (m > INT32_MAX / 2)
			break;
		s = KfState(f, cand, (int32) m, GKM_RAW);
		phi = KfPotential(s);
		pfree(s);
		if (!(phi > 0))
			break;				/* every row is a candidate already */
		if (f->sharded)
		{
			cand = KfShardRows(f, "sample", cand, (int32) m, r, l / phi, 0, cand, &m, &cap);
			continue;
		}
		values[0] = PointerGetDatum(GkmMatrix(cand, (int32) m, f->d));
		values[1] = KfMetricText(f);
		values[2] = Int64GetDatum(f->seed);
		values[3] = Int32GetDatum(r);
		values[4] = Float8GetDatum(l / phi);
		cand = KfFeatures(f, f->sql_sample, 5, types, values, cand, &m, &cap);
	}
	if (m < k)
	{
		/* too few candidates (few rows or few distinct rows): the first k rows too */
		cand = KfFirstRows(f, k, cand, &m, &cap);
	}
	if (m > INT32_MAX / 2)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many k-means|| candidates"),
				 errhint("Use a smaller oversampling or fewer rounds.")));
	s = KfState(f, cand, (int32) m, GKM_RAW);
	KfRecluster(f, cand, GKM_COUNTS(s), m, k, cen);
	pfree(s);
	pfree(cand);
}

/* The result of one run: centroids [k, d], sizes and inertia [k]. */
typedef struct KfRun
{
	double	   *cen;
	int64	   *sizes;
	double	   *inertia;
	int32		iterations;
	double		total;
} KfRun;

/* Lloyd's iterations from cen [k, d] (changed), as gpu_kmeans runs them. */
static void
KfLloyd(GkmFit *f, int32 k, int32 max_iter, double tol_abs, double *cen, KfRun *run)
{
	int32		d = f->d;
	double	   *next = MemoryContextAlloc(f->cxt, sizeof(double) * (Size) k * d);
	GkmState   *s = NULL;
	bool		strict = false;

	run->iterations = 0;
	for (int32 it = 1; it <= max_iter; it++)
	{
		double		shift = 0.0;
		int32		empty = 0;

		if (s)
			pfree(s);
		s = KfState(f, cen, k, GKM_SUMS);
		GkmNewCentroids(s, next);
		for (int32 j = 0; j < k; j++)
			empty += GKM_COUNTS(s)[j] == 0;
		if (empty > 0)
		{
			/* an empty cluster moves to the row farthest from its centroid */
			Oid			types[3] = {FLOAT8ARRAYOID, TEXTOID, INT8OID};
			Datum		values[3];
			double	   *far = NULL;
			int64		m = 0;
			int64		cap = 0;
			int64		used = 0;

			values[0] = PointerGetDatum(GkmMatrix(cen, k, d));
			values[1] = KfMetricText(f);
			values[2] = Int64GetDatum(empty);
			if (f->sharded)
				far = KfShardRows(f, "far", cen, k, 0, 0.0, empty, far, &m, &cap);
			else
				far = KfFeatures(f, f->sql_far, 3, types, values, far, &m, &cap);
			for (int32 j = 0; j < k && used < m; j++)
				if (GKM_COUNTS(s)[j] == 0)
					memcpy(next + (Size) j * d, far + (Size) used++ * d, sizeof(double) * d);
			if (far)
				pfree(far);
		}
		for (Size i = 0; i < (Size) k * d; i++)
		{
			double		diff = next[i] - cen[i];

			shift += diff * diff;
		}
		run->iterations = it;
		if (shift == 0.0)
		{
			/* nothing moved: the step's sizes and inertia are those of cen */
			strict = true;
			break;
		}
		memcpy(cen, next, sizeof(double) * (Size) k * d);
		if (shift <= tol_abs)
			break;
	}
	if (!strict)
	{
		pfree(s);
		s = KfState(f, cen, k, 0);
	}
	run->cen = cen;
	run->sizes = MemoryContextAlloc(f->cxt, sizeof(int64) * k);
	run->inertia = MemoryContextAlloc(f->cxt, sizeof(double) * k);
	run->total = 0.0;
	for (int32 j = 0; j < k; j++)
	{
		run->sizes[j] = GKM_COUNTS(s)[j];
		run->inertia[j] = GkmInertia(f->metric, GkmRound(&GKM_D2(s)[j]));
		run->total += run->inertia[j];
	}
	pfree(s);
	pfree(next);
}

/* The query's two columns: an integer id and a feature; sets f->ftype. */
static void
KfCheckQuery(GkmFit *f, const char *query)
{
	char	   *sql = psprintf("SELECT * FROM (%s) AS q LIMIT 0", query);
	SPIPlanPtr	plan = SPI_prepare(sql, 0, NULL);
	TupleDesc	desc;
	Oid			idtype;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "the query could not be read, please report a bug");
	desc = SPI_tuptable->tupdesc;
	if (desc->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the query of gpu_kmeans_fit_distributed must return two columns, not %d", desc->natts),
				 errdetail("The first is the row id, the second the feature."),
				 errhint("Write it as SELECT id, f FROM t, with the features in one column, for example ARRAY[x, y]::real[].")));
	idtype = TupleDescAttr(desc, 0)->atttypid;
	if (idtype != INT2OID && idtype != INT4OID && idtype != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the first column of the query must be the row id, of type smallint, integer or bigint"),
				 errdetail("It has type %s.", format_type_be(idtype)),
				 errhint("Select the table's key first: SELECT id, f FROM t.")));
	f->ftype = TupleDescAttr(desc, 1)->atttypid;
	f->kind = GkmFeatureKind(f->ftype, "gpu_kmeans_fit_distributed");
	f->dtype = GcFeatureDtype(f->kind, f->ftype);
	SPI_freetuptable(SPI_tuptable);
	SPI_freeplan(plan);
	pfree(sql);
	KfShardable(f, query);
}

/*
 * gpu_kmeans_fit_distributed(query, k, max_iter, tol, seed,
 * initial_centroids, n_init, metric, oversampling, rounds): k-means of the
 * query's rows without gathering them; one row per cluster with its
 * centroid, size and inertia, as gpu_kmeans_centroids.
 */
Datum
gpu_kmeans_fit_distributed(PG_FUNCTION_ARGS)
{
	text	   *query_t = GcArgText(fcinfo, KF_ARG_QUERY, "query");
	char	   *query = text_to_cstring(query_t);
	ArrayType  *given = PG_ARGISNULL(KF_ARG_CENTROIDS) ? NULL : PG_GETARG_ARRAYTYPE_P(KF_ARG_CENTROIDS);
	gc_kmeans_params p;
	gc_error	err;
	GkmFit		f;
	double		oversampling;
	int32		rounds;
	double	   *init = NULL;
	int32		given_d = 0;
	int32		given_k = 0;
	const char *schema;
	double	   *e1;
	double	   *mean;
	GkmState   *s;
	double		tol_abs = 0.0;
	int			guc_nest = -1;	/* the GUC nest level of the call's Citus setting, or -1 */
	KfRun		best = {0};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;

	memset(&p, 0, sizeof(p));
	memset(&f, 0, sizeof(f));
	memset(&best, 0, sizeof(best));
	p.struct_size = sizeof(p);
	p.k = GcArgInt32(fcinfo, KF_ARG_K, "k");
	p.max_iter = PG_ARGISNULL(KF_ARG_MAX_ITER) ? GC_KMEANS_DEFAULT_MAX_ITER : PG_GETARG_INT32(KF_ARG_MAX_ITER);
	p.tol = PG_ARGISNULL(KF_ARG_TOL) ? GC_KMEANS_DEFAULT_TOL : PG_GETARG_FLOAT8(KF_ARG_TOL);
	p.seed = (uint64) (int64) (PG_ARGISNULL(KF_ARG_SEED) ? 0 : PG_GETARG_INT32(KF_ARG_SEED));
	p.init = GC_KMEANS_INIT_PLUSPLUS;
	p.n_init = PG_ARGISNULL(KF_ARG_N_INIT) ? 1 : PG_GETARG_INT32(KF_ARG_N_INIT);
	p.precision = (gc_precision) gc_kmeans_precision_guc;
	p.metric = GkmMetricArg(fcinfo, KF_ARG_METRIC);
	oversampling = PG_ARGISNULL(KF_ARG_OVERSAMPLING) ? 2.0 : PG_GETARG_FLOAT8(KF_ARG_OVERSAMPLING);
	rounds = PG_ARGISNULL(KF_ARG_ROUNDS) ? 5 : PG_GETARG_INT32(KF_ARG_ROUNDS);
	GcReportCheck(gc_check_kmeans(&p, -1, 0, &err), &err);
	if (!(oversampling > 0) || isinf(oversampling) || oversampling > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("oversampling must be above 0 and at most 1000"),
				 errdetail("oversampling is %g.", oversampling),
				 errhint("Each round of k-means|| draws about oversampling * k rows; the default is 2.")));
	if (rounds < 1 || rounds > 100)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rounds must be between 1 and 100"),
				 errdetail("rounds is %d.", rounds),
				 errhint("k-means|| needs a few rounds of sampling; the default is 5.")));
	if (given)
	{
		init = GkmCentroidArray(given, &given_k, &given_d);
		if (given_k != p.k)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("initial_centroids has %d rows, but k is %d", given_k, p.k),
					 errdetail("Each row of initial_centroids is the starting point of one cluster."),
					 errhint("Pass exactly k rows, or leave initial_centroids NULL to use k-means||.")));
		p.init = GC_KMEANS_INIT_GIVEN;
		p.initial_centroids = init;
		GcReportCheck(gc_check_kmeans(&p, -1, given_d, &err), &err);
		if (p.metric == GC_METRIC_COSINE)
			for (int32 j = 0; j < p.k; j++)
				if (!gc_unit_row_f64(init + (Size) j * given_d, given_d))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("row %d of initial_centroids is all zero", j + 1),
							 errdetail("With the cosine metric every centroid is a direction, and a zero vector has none."),
							 errhint("Give every centroid a nonzero value, or use metric => 'euclidean'.")));
	}
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpu_kmeans_fit_distributed must be called in the FROM clause")));

	f.cxt = CurrentMemoryContext;
	f.metric = p.metric;
	schema = quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid)));
	f.schema = schema;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	KfCheckQuery(&f, query);
	if (f.sharded)
	{
		/*
		 * The table's lock on every node makes Citus run the rest of the
		 * transaction in a transaction block on the workers, each shard on
		 * one connection throughout: the workers' caches live that long.
		 * Without citus.force_max_query_parallelization, for this call only,
		 * Citus serves every shard of a worker on the one connection that
		 * took the lock there, one shard after another; with it, each shard
		 * gets a connection of its own at the first pass, so that a worker
		 * runs its shards at once (10M x 32 on the H200 machine, 4 shards a
		 * worker: 3.9 s a pass on one connection).
		 */
		uint64		id = 0;

		guc_nest = NewGUCNestLevel();
		if (GetConfigOption("citus.force_max_query_parallelization", true, false) != NULL)
			(void) set_config_option("citus.force_max_query_parallelization", "on", PGC_USERSET,
									 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

		if (!pg_strong_random(&id, sizeof(id)))
			id = (uint64) MyProcPid << 32 ^ (uint64) GetCurrentTimestamp();
		f.fit_id = (int64) (id & ~(UINT64_C(1) << 63));
		KfRunningFit = f.fit_id;
		/*
		 * Each shard's backend keeps its rows: the shards of a node share
		 * the setting (the calls that Citus runs in this backend take the
		 * whole of it, see gpu_kmeans_shard_call).
		 */
		f.cache_mb = kmeans_shard_cache_guc > 0 ? (int32) Max(kmeans_shard_cache_guc / f.node_shards, 1) : 0;
		/* a read first: it replaces a cached connection to a restarted worker, the LOCK would fail on it */
		if (KfExecute(&f, psprintf("SELECT 1 FROM %s WHERE ctid = '(0,0)'", f.relname)) != SPI_OK_SELECT ||
			KfExecute(&f, psprintf("LOCK TABLE %s IN ACCESS SHARE MODE", f.relname)) != SPI_OK_UTILITY)
			elog(ERROR, "LOCK TABLE failed, please report a bug");
	}
	/*
	 * Citus pushes down only a step over real[] or double precision[]
	 * (worker_partial_agg refuses polymorphic aggregates): scalar features
	 * become one-element arrays, pgvector's types real[], each exactly.
	 */
	{
		const char *feature = "q.f";

		if (f.kind == GC_FEATURE_SCALAR)
			feature = f.ftype == FLOAT4OID ? "ARRAY[q.f]::real[]" : "ARRAY[q.f::double precision]";
		else if (f.kind == GC_FEATURE_VECTOR || f.kind == GC_FEATURE_HALFVEC)
			feature = "q.f::real[]";
		f.sql_state = MemoryContextStrdup(f.cxt, psprintf(
			"SELECT %s.gpu_kmeans_step_state(%s, $1, $2, $3) FROM (%s) AS q(id, f)", schema, feature, query));
	}
	f.sql_first = MemoryContextStrdup(f.cxt, psprintf(
		"SELECT q.f FROM (%s) AS q(id, f) WHERE q.f IS NOT NULL "
		"ORDER BY %s.gpu_kmeans_row_hash(q.id, $1, 0), q.id LIMIT $2", query, schema));
	f.sql_sample = MemoryContextStrdup(f.cxt, psprintf(
		"SELECT q.f FROM (%s) AS q(id, f) WHERE %s.gpu_kmeans_sample(q.f, $1, $2, q.id, $3, $4, $5) "
		"ORDER BY %s.gpu_kmeans_row_hash(q.id, $3, $4), q.id", query, schema, schema));
	f.sql_far = MemoryContextStrdup(f.cxt, psprintf(
		"SELECT q.f FROM (%s) AS q(id, f) WHERE q.f IS NOT NULL "
		"ORDER BY %s.gpu_kmeans_distance(q.f, $1, $2) DESC, q.id LIMIT $3", query, schema));

	/* the dimension, from the first row */
	{
		char	   *sql = psprintf("SELECT q.f FROM (%s) AS q(id, f) WHERE q.f IS NOT NULL LIMIT 1", query);

		if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "the query could not be read, please report a bug");
		if (SPI_processed == 1)
		{
			bool		isnull;
			Datum		v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
			GcRowRef	ref = {0, -1, 0};
			GcFeature	feat;

			GcFeatureOpen(f.kind, f.ftype, v, &ref, CurrentMemoryContext, &feat);
			f.d = feat.d;
		}
		SPI_freetuptable(SPI_tuptable);
	}

	/* the rows: their number, the NULL features, the statistics for tol */
	f.n = 0;
	if (f.d > 0)
	{
		e1 = palloc0(sizeof(double) * f.d);
		e1[0] = 1.0;
		s = KfState(&f, e1, 1, GKM_SUMS | GKM_RAW);
		if (s != NULL)
		{
			f.n = s->rows;
			if (s->nulls > 0)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("the feature is NULL in " INT64_FORMAT " row%s of the query",
								s->nulls, s->nulls == 1 ? "" : "s"),
						 errdetail("gpu_kmeans_fit_distributed clusters every row of the query, as gpu_kmeans does."),
						 errhint("Filter such rows out of the query, for example with WHERE f IS NOT NULL.")));
			if (f.n > 0 && p.tol > 0)
			{
				mean = palloc(sizeof(double) * f.d);
				for (int32 t = 0; t < f.d; t++)
					mean[t] = GkmRound(&GKM_SUMSP(s)[t]) / (double) f.n;
				pfree(s);
				s = KfState(&f, mean, 1, GKM_RAW);
				tol_abs = p.tol * (GkmRound(&GKM_D2(s)[0]) / ((double) f.n * f.d));
			}
			pfree(s);
		}
	}
	GcReportCheck(gc_check_kmeans(&p, f.n, given ? given_d : f.d, &err), &err);
	if (given && given_d != f.d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("initial_centroids has %d columns, but the query has %d features", given_d, f.d),
				 errdetail("Each initial centroid needs one value per feature of the query."),
				 errhint("Pass a k x %d array.", f.d)));

	/* an empty query gives no model rows, as gpu_kmeans_centroids does */
	for (int32 r = 0; r < p.n_init && f.n > 0; r++)
	{
		double	   *cen = MemoryContextAlloc(f.cxt, sizeof(double) * (Size) p.k * f.d);
		KfRun		run;

		f.seed = (int64) gc_kmeans_run_seed(p.seed, r);
		if (given)
			memcpy(cen, init, sizeof(double) * (Size) p.k * f.d);
		else
			KfInitParallel(&f, p.k, oversampling, rounds, cen);
		KfLloyd(&f, p.k, p.max_iter, tol_abs, cen, &run);
		if (r == 0 || gc_kmeans_run_better(run.total, best.total))
			best = run;
	}
	if (f.sharded)
		KfDropCaches(&f);
	if (guc_nest >= 0)
		AtEOXact_GUC(true, guc_nest);
	KfRunningFit = -1;
	SPI_finish();

	/* the model, as gpu_kmeans_centroids gives it */
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	{
		TupleDesc	desc;
		Tuplestorestate *ts;

		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "gpu_kmeans_fit_distributed must return a row type, please report a bug");
		desc = CreateTupleDescCopy(desc);
		ts = tuplestore_begin_heap(true, false, work_mem);
		for (int32 j = 0; j < p.k && f.n > 0; j++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};
			Datum	   *elems = palloc(sizeof(Datum) * f.d);

			for (int32 t = 0; t < f.d; t++)
				elems[t] = Float8GetDatum(best.cen[(Size) j * f.d + t]);
			values[0] = Int32GetDatum(j);
			values[1] = PointerGetDatum(construct_array(elems, f.d, FLOAT8OID, sizeof(float8),
														FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			values[2] = Int64GetDatum(best.sizes[j]);
			values[3] = Float8GetDatum(best.inertia[j]);
			tuplestore_putvalues(ts, desc, values, nulls);
		}
		rsinfo->returnMode = SFRM_Materialize;
		rsinfo->setResult = ts;
		rsinfo->setDesc = desc;
	}
	MemoryContextSwitchTo(oldcxt);
	if (gc_timing_guc)
		ereport(NOTICE,
				(errmsg("gpuclust: kmeans_distributed rows=" INT64_FORMAT " d=%d k=%d iterations=%d queries=" INT64_FORMAT
						" shards=" INT64_FORMAT " shard_calls=" INT64_FORMAT " cache_fills=" INT64_FORMAT
						" cache_hits=" INT64_FORMAT " full_searches=" INT64_FORMAT " gpu_steps=" INT64_FORMAT
						" gpu_searches=" INT64_FORMAT " rescans=" INT64_FORMAT,
						f.n, f.d, p.k, best.iterations, f.queries, f.nshards, f.shard_calls, f.cache_fills,
						f.cache_hits, f.full_searches, f.gpu_steps, f.gpu_searches, f.rescans)));
	return (Datum) 0;
}
