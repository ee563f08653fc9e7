/*
 * portable.h
 *    What the plain-C headers of common/ need to compile unchanged with gcc
 *    (the CPU core, the glue, harnesses) and nvcc (host and device code), and
 *    the distance arithmetic every back end uses.
 *
 * Bit-identical answers between the back ends rest on two rules: distances
 * are accumulated in double, dimension by dimension in order, and no
 * multiply-add is contracted into an FMA.  The second is a compile flag
 * (-ffp-contract=off for gcc, -fmad=false for nvcc), set once in
 * common/flags.mk for every Makefile and script.
 */
#ifndef GPUCLUST_PORTABLE_H
#define GPUCLUST_PORTABLE_H

#include <stdint.h>

/* A function callable from host and device code. */
#ifdef __CUDACC__
#define GC_HD __host__ __device__ __forceinline__
#else
#define GC_HD inline
#endif

#ifdef __cplusplus
#define GC_RESTRICT __restrict__
#else
#define GC_RESTRICT restrict
#endif

/* A hint to fetch the cache line at p for reading (host code; nothing elsewhere). */
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define GC_PREFETCH(p) __builtin_prefetch(p)
#else
#define GC_PREFETCH(p) ((void) 0)
#endif

/* Squared Euclidean distance, accumulated in double in dimension order. */
static GC_HD double
gc_dist2(const float *a, const float *b, int32_t d)
{
	double		s = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		double		t = (double) a[k] - (double) b[k];

		s += t * t;
	}
	return s;
}

/* The same for rows of double precision. */
static GC_HD double
gc_dist2_f64(const double *a, const double *b, int32_t d)
{
	double		s = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		double		t = a[k] - b[k];

		s += t * t;
	}
	return s;
}

#endif							/* GPUCLUST_PORTABLE_H */
