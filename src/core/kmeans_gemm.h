/*
 * kmeans_gemm.h
 *    The nearest centroid of rows through a checked matrix product
 *    (OpenBLAS, blas.h), giving exactly the answers of the exact search of
 *    kmeans.c: for each row the centroid of least squared distance in
 *    double, summed over the features in order with no multiply-add
 *    contracted, the lowest index on a tie, and that distance bit for bit.
 *
 * The product: with x' = x - mu and c' = c - mu (mu a centre, the data mean
 * say), ||x - c||^2 = ||x'||^2 - 2 x'.c' + ||c'||^2, the x'.c' of a batch
 * of rows and every centroid as one GEMM (SGEMM on float rows, DGEMM on
 * double rows), x' and c' scaled by a power of two so that the centroids'
 * largest coordinate is about 1.  A bound E_j on the distance between this
 * value A_j and the exact search's distance R_j (kmeans_gemm.c derives it)
 * leaves as candidates the centroids with A_j - E_j <= min_i (A_i + E_i);
 * the nearest is among them, and they alone get the exact distance, so the
 * answer is the exact search's.  A row that the product cannot decide (not
 * finite, too far for single precision, a distance that overflows) and
 * every row when the centroids cannot be prepared or OpenBLAS is missing
 * get the exact distance to every centroid.
 *
 * Use: one gc_kmg per call, gc_kmg_prepare once per iteration (on one
 * thread), then on every thread of the pool its own gc_kmg_scratch and
 * gc_kmg_assign over batches of at most gc_kmg_batch() rows, the caller
 * ticking its cancel counter with the work units each batch returns.
 * When gc_kmg_prepare answers 0, the caller's own exact loop is the faster
 * way (kmeans.c's runs over the centroids in vector registers; the one
 * here, one pair at a time, is there so that the answers never depend on
 * OpenBLAS); the same for d below about 32, where the product does not pay.
 */
#ifndef GPUCLUST_KMEANS_GEMM_H
#define GPUCLUST_KMEANS_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct gc_kmg gc_kmg;	/* the centroids of one iteration, prepared */
typedef struct gc_kmg_scratch gc_kmg_scratch;	/* one thread's buffers */

/* Counts of gc_kmg_assign, added to (for debug output). */
typedef struct gc_kmg_stats
{
	int64_t		rows;			/* rows assigned */
	int64_t		multi;			/* rows with more than one candidate */
	int64_t		exact;			/* exact distances computed */
	int64_t		full;			/* rows given the exact distance to every centroid */
} gc_kmg_stats;

/* A default batch of rows for k centroids: the B x k product stays near 256 KiB. */
int32_t		gc_kmg_default_batch(int32_t k);

/* Bytes of a gc_kmg for k x d and of a scratch of batch rows, for memory estimates. */
size_t		gc_kmg_bytes(int32_t k, int32_t d, gc_dtype dtype);
size_t		gc_kmg_scratch_bytes(int32_t k, int32_t d, gc_dtype dtype, int32_t batch);

/*
 * For k centroids of d features and rows of element type dtype.  NULL when
 * out of memory.  Works whether or not OpenBLAS is there (without it every
 * row gets the exact search).
 */
gc_kmg	   *gc_kmg_create(int32_t k, int32_t d, gc_dtype dtype);
void		gc_kmg_free(gc_kmg *p);

/*
 * Takes the centroids cen [k, d] (kept by reference until the next prepare:
 * the exact distances read them) and the centre mu [d] (copied; NULL: the
 * origin).  Returns 1 when the product will be used, 0 when every row will
 * get the exact search (OpenBLAS missing, a centroid or mu not finite).
 */
int			gc_kmg_prepare(gc_kmg *p, const double *cen, const double *mu);

/* A scratch for one thread, batches of up to batch rows (<= 0: the default).  NULL when out of memory. */
gc_kmg_scratch *gc_kmg_scratch_create(const gc_kmg *p, int32_t batch);
void		gc_kmg_scratch_free(gc_kmg_scratch *s);
int32_t		gc_kmg_batch(const gc_kmg_scratch *s);

/*
 * The nearest centroid of count rows of x [., d] (element type of create):
 * rows[q] for q < count when rows is not NULL, else from + q.  For each q:
 *   label[q]      the centroid of least exact distance, the lowest on a tie;
 *   best[q]       that distance, as kmeans.c's row_d2 computes it;
 *   second_lb[q]  (when not NULL) a value in [0, R_j] for every other
 *                 centroid j, R_j its exact distance (HUGE_VAL when k = 1).
 * count may exceed the batch (the rows are then done batch by batch), but
 * the caller polls for cancel only between calls.  stats (or NULL) is added
 * to.  Returns the work done in kmeans.c's units (a distance over d features
 * counts d): count * k * d for the product, d per exact distance.
 */
int64_t		gc_kmg_assign(const gc_kmg *p, gc_kmg_scratch *s, const void *x, /* [n, d] */
						  const int64_t *rows, int64_t from, int32_t count,
						  int32_t *label, double *best, double *second_lb,
						  gc_kmg_stats *stats);

#endif							/* GPUCLUST_KMEANS_GEMM_H */
