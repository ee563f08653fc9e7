/*
 * range.c
 *    The errors of the range checks (range.h): a value beyond what its
 *    element type holds, and a row without a direction under cosine.
 */
#include "postgres.h"

#include "metric.h"
#include "range.h"

/*
 * Refuses a finite value that the element type cannot hold: beyond its range
 * (overflow) or not zero but rounding to zero (underflow); in double
 * precision, beyond F64_MAX_ABS.  value is its text.
 */
void
RangeError(const char *what, int64 id, const char *value, bool underflow, gc_dtype dtype)
{
	if (dtype == GC_F64)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s of the row with id " INT64_FORMAT " is out of range", what, id),
				 underflow ?
				 errdetail("The value is %s, which is not zero but rounds to zero in double precision.", value) :
				 errdetail("The value is %s; features are at most 1e150 in magnitude, "
						   "so that squared distances do not overflow double precision.", value),
				 underflow ?
				 errhint("Scale the features, for example by multiplying by a constant.") :
				 errhint("Scale the features, for example by dividing by a constant.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s of the row with id " INT64_FORMAT " is out of range for type real", what, id),
			 underflow ?
			 errdetail("The value is %s, which is not zero but rounds to zero as a real; "
					   "these features are computed in single precision.", value) :
			 errdetail("The value is %s; these features are computed in single precision.", value),
			 errhint("Compute in double precision with SET gpuclust.precision = double, or scale the features.")));
}

/* The error for a row without a direction under the cosine metric. */
void
GcZeroRowError(const char *title, const GcRowRef *row)
{
	char		name[96];

	GcRowName(row, name, sizeof(name));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the features of %s are all zero", name),
			 errdetail("With the cosine metric %s needs a direction for every row, and a zero vector has none.",
					   title),
			 errhint("Filter such rows out of the query, or use metric => 'euclidean'.")));
}

/*
 * Scales every gathered row to unit length for the cosine metric
 * (gc_unit_rows of common/metric.h); a zero row is an error naming its id.
 */
void
GcUnitRows(GcInput *in, const char *title)
{
	int64		bad = gc_unit_rows(in->x, in->dtype, in->n, in->d);

	if (bad >= 0)
	{
		GcRowRef	row = {in->ids[bad], 0, 0};

		GcZeroRowError(title, &row);
	}
}
