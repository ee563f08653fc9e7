/*
 * precision.c
 *    The element type of the features: follows the input, as scikit-learn's
 *    does, unless gpuclust.precision says single or double.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/guc.h"

#include "precision.h"

int			gc_precision_guc = GC_PRECISION_AUTO;

static const struct config_enum_entry input_precision_options[] = {
	{"auto", GC_PRECISION_AUTO, false},
	{"single", GC_PRECISION_SINGLE, false},
	{"double", GC_PRECISION_DOUBLE, false},
	{NULL, 0, false}
};

/*
 * The element type the features of a value of type typid (feature type ft)
 * are kept and computed in: single precision for real, real[], vector and
 * halfvec, double precision for the others, unless gpuclust.precision says
 * single or double.
 */
gc_dtype
GcFeatureDtype(GcFeatureType ft, Oid typid)
{
	bool		single;

	if (gc_precision_guc == GC_PRECISION_SINGLE)
		return GC_F32;
	if (gc_precision_guc == GC_PRECISION_DOUBLE)
		return GC_F64;
	single = ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_VECTOR ||
		ft == GC_FEATURE_HALFVEC || (ft == GC_FEATURE_SCALAR && typid == FLOAT4OID);
	return single ? GC_F32 : GC_F64;
}

/* Defines gpuclust.precision. */
void
GcPrecisionDefineGucs(void)
{
	DefineCustomEnumVariable("gpuclust.precision",
							 "Precision the features are kept and computed in: auto, single or double.",
							 "auto follows the input: real, real[], vector and halfvec in single precision, "
							 "double precision, numeric, integer and geometry features in double precision.",
							 &gc_precision_guc, GC_PRECISION_AUTO, input_precision_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}
