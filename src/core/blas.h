/*
 * blas.h
 *    OpenBLAS, opened at run time: the matrix products of the CPU back end
 *    when the library is installed, and a plain "not available" answer when
 *    it is not (no build or link dependency; the callers then use their own
 *    exact loops).
 *
 * The library is looked for once per process ("libopenblas.so.0", then
 * "libopenblas.so") on the first call of any function below, under
 * pthread_once.  It is told to run every product on the calling thread
 * (one OpenBLAS thread): the back end's own pool threads call it at the
 * same time, each on its own block of rows.  The first call should come
 * from the caller's thread before the pool's threads start (the look-up
 * sets OPENBLAS_NUM_THREADS=1 around dlopen when it is unset, so that
 * OpenBLAS starts no threads of its own, and puts it back).
 *
 * Whether a call uses it is the caller's choice, tuning.cpu_blas (the
 * setting gpuclust.cpu_blas): with -1 k-means never asks, and the library
 * stays closed unless an earlier call opened it.
 */
#ifndef GPUCLUST_BLAS_H
#define GPUCLUST_BLAS_H

typedef enum gc_blas_state
{
	GC_BLAS_READY = 0,			/* the products below run OpenBLAS */
	GC_BLAS_MISSING				/* no library, or one without the functions needed */
} gc_blas_state;

/* Opens the library on the first call; its state from then on. */
gc_blas_state gc_blas_state_get(void);

/* 1 when the products can be used. */
int			gc_blas_available(void);

/*
 * One line for a debug message or NOTICE: the library's file and its
 * configuration (openblas_get_config), or why there is none.  Static text.
 */
const char *gc_blas_describe(void);

/*
 * c [m, n] = a [m, kk] times b [n, kk] transposed, all row-major with
 * leading dimensions kk, kk and n, in single and in double precision.
 * Only when gc_blas_available().
 */
void		gc_blas_sgemm_nt(int m, int n, int kk, const float *a, const float *b, float *c);
void		gc_blas_dgemm_nt(int m, int n, int kk, const double *a, const double *b, double *c);

#endif							/* GPUCLUST_BLAS_H */
