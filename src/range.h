/*
 * range.h
 *    The range checks of the gathered features: what each element type can
 *    hold, and the store of one value that refuses the rest (range.c has the
 *    errors).
 */
#ifndef GPUCLUST_RANGE_H
#define GPUCLUST_RANGE_H

#include "postgres.h"

#include <math.h>

#include "receiver.h"

/*
 * In double precision a feature's magnitude is at most this, so that no
 * squared distance overflows: (2 * 1e150)^2 times any number of features
 * gpuclust accepts stays far below the largest double.
 */
#define F64_MAX_ABS 1e150
#define F64_OK(v) (fabs(v) <= F64_MAX_ABS)	/* false for NaN and infinities too */

extern void RangeError(const char *what, int64 id, const char *value, bool underflow, gc_dtype dtype);

/*
 * Stores one feature value as element i of row dst of the input's element
 * type, refusing NaN, infinities, and in single precision overflow of real
 * and nonzero values that would become zero as real (subnormal reals are
 * kept).
 */
static inline void
PutFeature(GatherReceiver *st, void *dst, int32 i, double v, int64 id, const char *what)
{
	float		f;

	if (unlikely(!isfinite(v)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s of the row with id " INT64_FORMAT " is %s", what, id,
						isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity")),
				 errdetail("Features must be finite numbers, so that every distance is one."),
				 isnan(v) ?
				 errhint("Filter such rows out of the query, for example with WHERE NOT (x = 'NaN').") :
				 errhint("Filter such rows out of the query, for example with WHERE x NOT IN ('Infinity', '-Infinity').")));
	if (st->in->dtype == GC_F64)
	{
		if (unlikely(!F64_OK(v)))
		{
			char		value[32];

			snprintf(value, sizeof(value), "%g", v);
			RangeError(what, id, value, false, GC_F64);
		}
		((double *) dst)[i] = v;
		return;
	}
	f = (float) v;
	if (unlikely(isinf(f) || (f == 0.0f && v != 0.0)))
	{
		char		value[32];

		snprintf(value, sizeof(value), "%g", v);
		RangeError(what, id, value, !isinf(f), GC_F32);
	}
	((float *) dst)[i] = f;
}

/* The error for a row without a direction under the cosine metric. */
extern void GcZeroRowError(const char *title, const GcRowRef *row);

/* Scales every gathered row to unit length for the cosine metric. */
extern void GcUnitRows(GcInput *in, const char *title);

#endif							/* GPUCLUST_RANGE_H */
