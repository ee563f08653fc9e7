/*
 * precision.h
 *    The element type the features are kept and computed in, and its
 *    setting gpuclust.precision (precision.c).
 */
#ifndef GPUCLUST_PRECISION_H
#define GPUCLUST_PRECISION_H

#include "postgres.h"

#include "backend.h"
#include "feature.h"

/* gpuclust.precision: the element type of the features */
typedef enum GcPrecision
{
	GC_PRECISION_AUTO = 0,		/* follow the input's types */
	GC_PRECISION_SINGLE = 1,
	GC_PRECISION_DOUBLE = 2
} GcPrecision;

extern int	gc_precision_guc;	/* GcPrecision */

/* Defines gpuclust.precision. */
extern void GcPrecisionDefineGucs(void);

extern gc_dtype GcFeatureDtype(GcFeatureType ft, Oid typid);

#endif							/* GPUCLUST_PRECISION_H */
