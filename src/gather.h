/*
 * gather.h
 *    The gather: runs the user's query read-only and packs its rows into a
 *    matrix (gather.c; the DestReceiver in receiver.c, the feature types in
 *    feature.c, the range checks in range.c, the row buffers in buffer.c,
 *    the element type in precision.c).
 */
#ifndef GPUCLUST_GATHER_H
#define GPUCLUST_GATHER_H

#include "postgres.h"

#include "compat.h"

#include "backend.h"

/* The gathered input: n rows of d features, in query order. */
typedef struct GcInput
{
	int64		n;
	int32		d;
	gc_dtype	dtype;			/* the element type of x: float or double */
	void	   *x;				/* [n, d] row-major */
	int64	   *ids;			/* [n] */
} GcInput;

/* gather.c: runs the query read-only and packs its rows into in. */
extern void GcGather(const char *query, GcInput *in);

struct _SPI_plan;
/* gather.c: the planner's row estimate of a prepared query, -1 if not one SELECT. */
extern double GcPlannedRows(struct _SPI_plan *plan);

#endif							/* GPUCLUST_GATHER_H */
