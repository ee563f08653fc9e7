/*
 * feature.h
 *    The feature types gpuclust reads (feature.c): the gather's readers of
 *    arrays, numerics and extension types, and the readers of single values
 *    that the window functions use.
 */
#ifndef GPUCLUST_FEATURE_H
#define GPUCLUST_FEATURE_H

#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/palloc.h"

#include "backend.h"

/*
 * A feature value of one column: the types gather.c and the window functions
 * read.  Extension types (pgvector, PostGIS) are recognized by name and
 * extension at call time; nothing links against them.
 */
typedef enum GcFeatureType
{
	GC_FEATURE_NONE = 0,		/* not a feature type */
	GC_FEATURE_SCALAR,			/* smallint .. numeric: one feature */
	GC_FEATURE_FLOAT4_ARRAY,	/* real[] */
	GC_FEATURE_FLOAT8_ARRAY,	/* double precision[] */
	GC_FEATURE_VECTOR,			/* pgvector vector */
	GC_FEATURE_HALFVEC,			/* pgvector halfvec */
	GC_FEATURE_GEOMETRY			/* PostGIS geometry point */
} GcFeatureType;

/* Names a row in messages: by its id, or by its place in a window partition. */
typedef struct GcRowRef
{
	int64		id;				/* when partition == 0 */
	int64		partition;		/* 1-based partition of a window, 0, or -1: "this row" */
	int64		row;			/* 1-based row within the partition */
} GcRowRef;

/* One value opened by GcFeatureOpen: d features stored as fmt at data. */
typedef struct GcFeature
{
	int32		d;
	int32		fmt;			/* gather.c's FeatureFormat */
	int32		stride;			/* doubles per geometry point (M skipped) */
	const char *data;
	double		scalar;			/* GC_FEATURE_SCALAR */
} GcFeature;

extern GcFeatureType GcFeatureTypeOf(Oid typid);
extern const char *GcFeatureTypeNames(void);
extern void GcRowName(const GcRowRef *row, char *buf, size_t len);
extern void GcFeatureOpen(GcFeatureType kind, Oid typid, Datum value,
						  const GcRowRef *row, MemoryContext tmpcxt, GcFeature *out);
extern void GcFeatureCopy(const GcFeature *f, void *dst, gc_dtype dtype, const GcRowRef *row);

static inline bool
IsScalarFeatureType(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID ||
		t == FLOAT4OID || t == FLOAT8OID || t == NUMERICOID;
}

/* The value of a scalar feature column of an integer or float type as double. */
static inline double
ScalarValue(Datum v, Oid t)
{
	switch (t)
	{
		case INT2OID:
			return (double) DatumGetInt16(v);
		case INT4OID:
			return (double) DatumGetInt32(v);
		case INT8OID:
			return (double) DatumGetInt64(v);
		case FLOAT4OID:
			return (double) DatumGetFloat4(v);
		case FLOAT8OID:
			return DatumGetFloat8(v);
		default:
			elog(ERROR, "unexpected feature type %u, please report a bug", t);
			return 0.0;			/* keep the compiler quiet */
	}
}

struct GatherReceiver;

/* The gather's readers (feature.c): a numeric column, an array, a native value. */
extern double NumericValue(struct GatherReceiver *st, Datum datum, int64 id, int col);
extern void PutArray(struct GatherReceiver *st, Datum datum, int64 id);
extern void PutNative(struct GatherReceiver *st, Datum datum, int64 id);

#endif							/* GPUCLUST_FEATURE_H */
