/*
 * feature.c
 *    The feature types: scalar and numeric columns, real[] and double
 *    precision[] arrays (read in place), and the extension types pgvector's
 *    vector and halfvec and PostGIS's geometry points, read from their
 *    binary layouts.  The readers of single values (GcFeatureTypeOf,
 *    GcFeatureOpen, GcFeatureCopy) serve the window functions of window.c
 *    as well.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/tupdesc.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "feature.h"
#include "metric.h"
#include "range.h"
#include "receiver.h"
#include "buffer.h"

/*
 * The value of the numeric feature in column col as double (NaN and
 * infinities as such, for PutFeature to refuse).  A finite value beyond the
 * range of double precision is refused here, naming the row id, instead of by
 * numeric_float8, which would not name it.  Allocates in the current memory
 * context.
 */
double
NumericValue(GatherReceiver *st, Datum datum, int64 id, int col)
{
	Numeric		num = DatumGetNumeric(datum);
	char	   *text;
	char	   *end;
	double		v;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(num)));

	/* numeric_float8 does the same, but raises an error without the id */
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	v = strtod(text, &end);
	if (unlikely(*end != '\0'))
		elog(ERROR, "numeric value \"%s\" does not read as double precision, please report a bug", text);
	if (unlikely(isinf(v) || (v == 0.0 && strpbrk(text, "123456789") != NULL)))
	{
		char	   *sci = numeric_out_sci(num, 5);
		char	   *e = strchr(sci, 'e');
		char		what[NAMEDATALEN + 16];

		/* %g style: 1.50000e+400 as 1.5e+400 */
		if (e != NULL && strchr(sci, '.') != NULL)
		{
			char	   *keep = e;

			while (keep[-1] == '0')
				keep--;
			if (keep[-1] == '.')
				keep--;
			memmove(keep, e, strlen(e) + 1);
		}
		snprintf(what, sizeof(what), "feature \"%s\"", ColName(st, col));
		RangeError(what, id, sci, !isinf(v), st->in->dtype);
	}
	return v;
}

/*
 * Copies n reals from src (any alignment) to dst and says whether every one
 * is finite, in one pass: a real is NaN or infinite when its exponent bits
 * are all ones.  The values are copied whatever they are; the caller looks
 * for the first bad one only when there is one.  On x86-64 the copy runs 32
 * values a step in AVX2 registers where the processor has them, else 8 in
 * SSE2; elsewhere one value at a time, without a branch per value (adding 1
 * to an exponent of all ones carries into the sign bit, which no other
 * exponent does).
 */
static bool
CopyFinite4Plain(float *dst, const char *src, int32 n)
{
	uint32		acc = 0;

	for (int32 k = 0; k < n; k++)
	{
		uint32		u;

		memcpy(&u, src + sizeof(float) * k, sizeof(u));
		memcpy(dst + k, &u, sizeof(u));
		acc |= (u & 0x7f800000) + 0x00800000;
	}
	return (acc & 0x80000000) == 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GC_GATHER_X86
#endif

#ifdef GC_GATHER_X86
static bool
CopyFinite4Sse2(float *dst, const char *src, int32 n)
{
	const __m128i exp = _mm_set1_epi32(0x7f800000);
	__m128i		bad0 = _mm_setzero_si128();
	__m128i		bad1 = _mm_setzero_si128();
	int32		k = 0;

	for (; k + 8 <= n; k += 8)
	{
		__m128i		a = _mm_loadu_si128((const __m128i *) (src + sizeof(float) * k));
		__m128i		b = _mm_loadu_si128((const __m128i *) (src + sizeof(float) * (k + 4)));

		_mm_storeu_si128((__m128i *) (dst + k), a);
		_mm_storeu_si128((__m128i *) (dst + k + 4), b);
		bad0 = _mm_or_si128(bad0, _mm_cmpeq_epi32(_mm_and_si128(a, exp), exp));
		bad1 = _mm_or_si128(bad1, _mm_cmpeq_epi32(_mm_and_si128(b, exp), exp));
	}
	/* the rest, copied whatever the steps found */
	if (!CopyFinite4Plain(dst + k, src + sizeof(float) * k, n - k))
		return false;
	return _mm_movemask_epi8(_mm_or_si128(bad0, bad1)) == 0;
}

__attribute__((target("avx2")))
static bool
CopyFinite4Avx2(float *dst, const char *src, int32 n)
{
	const __m256i exp = _mm256_set1_epi32(0x7f800000);
	__m256i		bad0 = _mm256_setzero_si256();
	__m256i		bad1 = _mm256_setzero_si256();
	int32		k = 0;

	for (; k + 32 <= n; k += 32)
	{
		const char *s = src + sizeof(float) * k;
		__m256i		a = _mm256_loadu_si256((const __m256i *) s);
		__m256i		b = _mm256_loadu_si256((const __m256i *) (s + 32));
		__m256i		c = _mm256_loadu_si256((const __m256i *) (s + 64));
		__m256i		d = _mm256_loadu_si256((const __m256i *) (s + 96));

		_mm256_storeu_si256((__m256i *) (dst + k), a);
		_mm256_storeu_si256((__m256i *) (dst + k + 8), b);
		_mm256_storeu_si256((__m256i *) (dst + k + 16), c);
		_mm256_storeu_si256((__m256i *) (dst + k + 24), d);
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(a, exp), exp));
		bad1 = _mm256_or_si256(bad1, _mm256_cmpeq_epi32(_mm256_and_si256(b, exp), exp));
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(c, exp), exp));
		bad1 = _mm256_or_si256(bad1, _mm256_cmpeq_epi32(_mm256_and_si256(d, exp), exp));
	}
	for (; k + 8 <= n; k += 8)
	{
		__m256i		a = _mm256_loadu_si256((const __m256i *) (src + sizeof(float) * k));

		_mm256_storeu_si256((__m256i *) (dst + k), a);
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(a, exp), exp));
	}
	bad0 = _mm256_or_si256(bad0, bad1);
	/* the rest, copied whatever the steps found */
	if (!CopyFinite4Plain(dst + k, src + sizeof(float) * k, n - k))
		return false;
	return _mm256_testz_si256(bad0, bad0) != 0;
}
#endif

typedef bool (*CopyFinite4Fn) (float *dst, const char *src, int32 n);

static bool CopyFinite4First(float *dst, const char *src, int32 n);

static CopyFinite4Fn copy_finite4 = CopyFinite4First;

/* The first call picks the version for this processor. */
static bool
CopyFinite4First(float *dst, const char *src, int32 n)
{
#ifdef GC_GATHER_X86
	__builtin_cpu_init();
	copy_finite4 = __builtin_cpu_supports("avx2") ? CopyFinite4Avx2 : CopyFinite4Sse2;
#else
	copy_finite4 = CopyFinite4Plain;
#endif
	return copy_finite4(dst, src, n);
}

static inline bool
CopyFinite4(float *dst, const char *src, int32 n)
{
	return copy_finite4(dst, src, n);
}

/*
 * Appends the elements of a one-dimensional float array to dst.  In-line
 * arrays are read in place: the ArrayType fields follow the varlena header,
 * whether it is 4 bytes or 1, and offsets count from a 4-byte header.
 */
void
PutArray(GatherReceiver *st, Datum datum, int64 id)
{
	GcInput    *in = st->in;
	struct varlena *v = (struct varlena *) DatumGetPointer(datum);
	const char *body;
	int32		ndim;
	int32		dataoffset;
	int32		len;
	const char *data;
	float	   *dst;
	bool		f8 = st->kind == FEATURES_FLOAT8_ARRAY;
	const char *what = "an element of the feature array";

	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
	{
		MemoryContext old = MemoryContextSwitchTo(st->tmpcxt);

		v = PG_DETOAST_DATUM(datum);
		MemoryContextSwitchTo(old);
	}
	body = VARDATA_ANY(v);
	memcpy(&ndim, body, sizeof(int32));
	memcpy(&dataoffset, body + sizeof(int32), sizeof(int32));
	if (ndim != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 ndim == 0 ?
				 errmsg("the feature array of the row with id " INT64_FORMAT " is empty", id) :
				 errmsg("the feature array of the row with id " INT64_FORMAT " has %d dimensions", id, ndim),
				 errdetail("Feature arrays must be one-dimensional and not empty."),
				 errhint("Filter with WHERE cardinality(%s) > 0, or flatten the array.", ColRef(st, 1))));
	if (dataoffset != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the feature array of the row with id " INT64_FORMAT " contains NULL", id),
				 errdetail("Every feature of a row needs a value."),
				 errhint("Filter with WHERE array_position(%s, NULL) IS NULL.", ColRef(st, 1))));
	memcpy(&len, body + sizeof(ArrayType) - VARHDRSZ, sizeof(int32));

	if (in->n == 0 && in->d == 0)
		in->d = len;
	else if (len != in->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature array of the row with id " INT64_FORMAT " has %d elements, but the first row's has %d",
						id, len, in->d),
				 errhint("Every feature array must have the same length.")));
	if (unlikely(in->n >= st->populated))
		MakeRoom(st);

	data = body + ARR_OVERHEAD_NONULLS(1) - VARHDRSZ;
	if (in->dtype == GC_F64)
	{
		double	   *dst8 = (double *) in->x + (Size) in->n * in->d;
		bool		bad = false;

		if (f8)
			memcpy(dst8, data, sizeof(double) * len);
		else
			for (int32 k = 0; k < len; k++)
			{
				float		e;

				memcpy(&e, data + sizeof(float) * k, sizeof(float));
				dst8[k] = e;
			}
		for (int32 k = 0; k < len; k++)
			bad |= (bool) (!F64_OK(dst8[k]));
		if (unlikely(bad))
			for (int32 k = 0; k < len; k++)
				PutFeature(st, dst8, k, dst8[k], id, what);
		return;
	}
	dst = (float *) in->x + (Size) in->n * in->d;
	if (!f8)
	{
		if (unlikely(!CopyFinite4(dst, data, len)))
			for (int32 k = 0; k < len; k++)
				if (!isfinite(dst[k]))
					PutFeature(st, dst, k, dst[k], id, what);
	}
	else
	{
		bool		bad = false;

		for (int32 k = 0; k < len; k++)
		{
			double		e;
			float		f;

			memcpy(&e, data + sizeof(double) * k, sizeof(double));
			f = (float) e;
			dst[k] = f;
			bad |= (bool) ((isfinite(f) == 0) | ((f == 0.0f) & (e != 0.0)));
		}
		/* again, value by value, for the message about the first bad one */
		if (unlikely(bad))
			for (int32 k = 0; k < len; k++)
			{
				double		e;

				memcpy(&e, data + sizeof(double) * k, sizeof(double));
				PutFeature(st, dst, k, e, id, what);
			}
	}
}

/* ------------------------------------------------------------ native types */

/*
 * pgvector's vector and halfvec and PostGIS's geometry are read from their
 * documented binary layouts, without a build or link dependency on either
 * extension: their type OIDs are looked up at call time (the type of that
 * name in the schema of the extension that owns it) and cached until a
 * pg_type change invalidates them (CREATE/DROP EXTENSION, ALTER EXTENSION
 * ... SET SCHEMA).
 *
 *   vector   varlena header, int16 dim, int16 unused, float4 x[dim]
 *   halfvec  varlena header, int16 dim, int16 unused, IEEE binary16 x[dim]
 *   geometry GSERIALIZED: varlena header, uint8 srid[3], uint8 gflags,
 *            [v2 with the extended flag: uint64 xflags], [bbox: float4 pairs
 *            per dimension, 3 pairs when geodetic], then the geometry:
 *            uint32 type, uint32 npoints, float8 coordinates (x, y, [z], [m])
 */
typedef enum FeatureFormat
{
	FORMAT_FLOAT4,
	FORMAT_FLOAT8,
	FORMAT_HALF,
	FORMAT_SCALAR
} FeatureFormat;

/* gflags bits shared by gserialized v1 and v2 */
#define GS_FLAG_Z			0x01
#define GS_FLAG_M			0x02
#define GS_FLAG_BBOX		0x04
#define GS_FLAG_GEODETIC	0x08
#define GS2_FLAG_EXTENDED	0x10	/* v2 only */
#define GS_FLAG_VERSION1	0x40	/* set: v2 (PostGIS 3), clear: v1 */
#define GS_FLAG_VERSION2	0x80	/* a later serialization */
#define GS_POINTTYPE		1

static bool ext_types_valid = false;
static bool ext_callback_registered = false;
static Oid	vector_oid = InvalidOid;
static Oid	halfvec_oid = InvalidOid;
static Oid	geometry_oid = InvalidOid;

/* Any change to pg_type may move or drop an extension type. */
static void
ExtTypesInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	ext_types_valid = false;
}

/* The type typname in the schema of extension extname, or InvalidOid. */
static Oid
ExtensionType(const char *extname, const char *typname)
{
	Oid			ext = get_extension_oid(extname, true);
	Oid			nsp = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(ext))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		return InvalidOid;
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(typname), ObjectIdGetDatum(nsp));
}

/* Looks up the extension types once, and again after a pg_type change. */
static void
LookupExtensionTypes(void)
{
	if (ext_types_valid)
		return;
	if (!ext_callback_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, ExtTypesInvalidate, (Datum) 0);
		ext_callback_registered = true;
	}
	vector_oid = ExtensionType("vector", "vector");
	halfvec_oid = ExtensionType("vector", "halfvec");
	geometry_oid = ExtensionType("postgis", "geometry");
	ext_types_valid = true;
}

/* The feature type of a column of type typid, or GC_FEATURE_NONE. */
GcFeatureType
GcFeatureTypeOf(Oid typid)
{
	if (IsScalarFeatureType(typid))
		return GC_FEATURE_SCALAR;
	if (typid == FLOAT4ARRAYOID)
		return GC_FEATURE_FLOAT4_ARRAY;
	if (typid == FLOAT8ARRAYOID)
		return GC_FEATURE_FLOAT8_ARRAY;
	if (typid < FirstNormalObjectId)
		return GC_FEATURE_NONE;
	LookupExtensionTypes();
	if (typid == vector_oid)
		return GC_FEATURE_VECTOR;
	if (typid == halfvec_oid)
		return GC_FEATURE_HALFVEC;
	if (typid == geometry_oid)
		return GC_FEATURE_GEOMETRY;
	return GC_FEATURE_NONE;
}

/* The accepted feature types, for messages. */
const char *
GcFeatureTypeNames(void)
{
	return "real[], double precision[], pgvector's vector or halfvec, or PostGIS's geometry (points)";
}

/* "the row with id 42", "row 3 of partition 2", or "this row" (partition < 0: one value, no id). */
void
GcRowName(const GcRowRef *row, char *buf, size_t len)
{
	if (row->partition < 0)
		snprintf(buf, len, "this row");
	else if (row->partition == 0)
		snprintf(buf, len, "the row with id " INT64_FORMAT, row->id);
	else
		snprintf(buf, len, "row " INT64_FORMAT " of partition " INT64_FORMAT,
				 row->row, row->partition);
}

/* The row's name for a message (a static buffer, for the error being raised). */
static const char *
RowStr(const GcRowRef *row)
{
	static char buf[96];

	GcRowName(row, buf, sizeof(buf));
	return buf;
}

/* The name of a PostGIS geometry type number, for messages. */
static const char *
GeometryTypeName(uint32 type)
{
	static const char *const names[] = {
		"unknown", "point", "linestring", "polygon", "multipoint", "multilinestring",
		"multipolygon", "geometrycollection", "circularstring", "compoundcurve",
		"curvepolygon", "multicurve", "multisurface", "polyhedralsurface",
		"triangle", "tin"
	};

	return type < lengthof(names) ? names[type] : "unknown";
}

/* A geometry that cannot be read: a broken invariant of PostGIS's format. */
static void
MalformedGeometry(const GcRowRef *row, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the geometry of %s is malformed", RowStr(row)),
			 errdetail("It is %s.", what),
			 errhint("Filter the row out of the query; the stored value may be damaged.")));
}

/*
 * Opens a PostGIS geometry (body: after the varlena header, len bytes): a
 * 2-D or 3-D point.  M is skipped; SRID is ignored.
 */
static void
OpenGeometry(const char *body, Size len, const GcRowRef *row, GcFeature *out)
{
	uint8		gflags;
	Size		off = 4;		/* srid[3], gflags */
	int			ndims;
	uint32		type;
	uint32		npoints;

	if (len < 4)
		MalformedGeometry(row, "shorter than its header");
	gflags = (uint8) body[3];
	if (gflags & GS_FLAG_VERSION2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the geometry of %s has a serialization gpuclust cannot read", RowStr(row)),
				 errdetail("Its flags are 0x%02x; gpuclust reads the formats of PostGIS 2 and 3.", gflags),
				 errhint("Pass the coordinates as numbers instead: SELECT id, ST_X(geom), ST_Y(geom) FROM ....")));
	ndims = 2 + ((gflags & GS_FLAG_Z) ? 1 : 0) + ((gflags & GS_FLAG_M) ? 1 : 0);
	if ((gflags & GS_FLAG_VERSION1) && (gflags & GS2_FLAG_EXTENDED))
		off += 8;
	if (gflags & GS_FLAG_BBOX)
		off += (gflags & GS_FLAG_GEODETIC) ? 6 * sizeof(float) : 2 * ndims * sizeof(float);
	if (len < off + 8)
		MalformedGeometry(row, "shorter than its type and size");
	memcpy(&type, body + off, sizeof(uint32));
	memcpy(&npoints, body + off + 4, sizeof(uint32));
	if (type != GS_POINTTYPE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the geometry of %s is a %s, not a point", RowStr(row), GeometryTypeName(type)),
				 errdetail("gpuclust clusters points: each row's geometry gives its coordinates as features."),
				 errhint("Pass a point per row, for example ST_Centroid(geom) or ST_PointOnSurface(geom).")));
	if (npoints == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the geometry of %s is an empty point", RowStr(row)),
				 errdetail("An empty point has no coordinates to cluster."),
				 errhint("Filter with WHERE NOT ST_IsEmpty(geom); in a window function, pass a NULL feature instead (its cluster is NULL).")));
	if (npoints != 1 || len < off + 8 + (Size) ndims * sizeof(double))
		MalformedGeometry(row, "a point of a wrong size");
	/* x, y and z come first; m, if any, last */
	out->fmt = FORMAT_FLOAT8;
	out->d = (gflags & GS_FLAG_Z) ? 3 : 2;
	out->data = body + off + 8;
}

/* Converts an IEEE binary16 value to float, exactly. */
static inline float
HalfToFloat(uint16 h)
{
	uint32		sign = (uint32) (h & 0x8000) << 16;
	uint32		exp = (h >> 10) & 0x1f;
	uint32		man = h & 0x3ff;
	uint32		bits;
	float		f;

	if (exp == 0x1f)
		bits = sign | 0x7f800000 | (man << 13);
	else if (exp != 0)
		bits = sign | ((exp + 112) << 23) | (man << 13);
	else
	{
		/* zero or subnormal: man * 2^-24, exact in float */
		f = (float) man * (1.0f / 16777216.0f);
		memcpy(&bits, &f, sizeof(bits));
		bits |= sign;
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

#ifdef GC_GATHER_X86
/*
 * Converts n halves at src (any alignment) to reals at dst, exactly (as
 * HalfToFloat; the conversion instruction is exact for every half, subnormal
 * ones included), 8 a step, and says whether every one is finite.
 */
__attribute__((target("avx2,f16c")))
static bool
HalfToFloatFiniteF16c(float *dst, const char *src, int32 n)
{
	const __m128i exp = _mm_set1_epi16(0x7c00);
	__m128i		bad = _mm_setzero_si128();
	uint32		tail = 0;
	int32		k = 0;

	for (; k + 8 <= n; k += 8)
	{
		__m128i		h = _mm_loadu_si128((const __m128i *) (src + 2 * k));

		bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp));
		_mm256_storeu_ps(dst + k, _mm256_cvtph_ps(h));
	}
	for (; k < n; k++)
	{
		uint16		h;

		memcpy(&h, src + 2 * k, sizeof(h));
		dst[k] = HalfToFloat(h);
		tail |= (uint32) ((h & 0x7c00) == 0x7c00);
	}
	return _mm_movemask_epi8(bad) == 0 && tail == 0;
}
#endif

/*
 * Converts n halves at src to reals at dst where the processor has an
 * instruction for it, saying whether every one is finite; false, having done
 * nothing or part, where it has not (the caller then goes value by value).
 */
static bool
HalfToFloatFinite(float *dst, const char *src, int32 n)
{
#ifdef GC_GATHER_X86
	static int	have_f16c = -1;

	if (unlikely(have_f16c < 0))
	{
		unsigned int a,
					b,
					c,
					d;

		/* F16C from CPUID (not every compiler's __builtin_cpu_supports knows it) */
		__builtin_cpu_init();
		have_f16c = __builtin_cpu_supports("avx2") &&
			__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
	}
	if (have_f16c)
		return HalfToFloatFiniteF16c(dst, src, n);
#endif
	return false;
}

/*
 * Refuses a value that is not finite or that real cannot hold (beyond its
 * range, or not zero but zero as a real), naming the row.  finite_source: a
 * numeric beyond the range of double precision.
 */
static void
BadFeatureValue(const GcRowRef *row, double v, float f, bool finite_source)
{
	if (!isfinite(v) && !finite_source)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("a feature of %s is %s", RowStr(row),
						isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity")),
				 errdetail("Features must be finite numbers, so that every distance is one."),
				 errhint("Filter such rows out, or pass a NULL feature for them (its cluster is NULL).")));
	if (finite_source)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("a feature of %s is out of range", RowStr(row)),
				 isinf(v) ?
				 errdetail("The value is beyond the range of double precision.") :
				 v == DBL_MIN ?
				 errdetail("The value is not zero but rounds to zero in double precision.") :
				 errdetail("The value is %g; features are at most 1e150 in magnitude, "
						   "so that squared distances do not overflow double precision.", v),
				 v == DBL_MIN ?
				 errhint("Scale the features, for example by multiplying by a constant.") :
				 errhint("Scale the features, for example by dividing by a constant.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("a feature of %s is out of range for type real", RowStr(row)),
			 isinf(f) ?
			 errdetail("The value is %g; these features are computed in single precision.", v) :
			 errdetail("The value is not zero but rounds to zero as a real; "
					   "these features are computed in single precision."),
			 errhint("Compute in double precision with SET gpuclust.precision = double, or scale the features.")));
}

/*
 * Stores one double as feature k of dst of element type dtype, refusing
 * what is not finite and, in single precision, what real cannot hold.
 */
static inline void
PutDouble(void *dst, int32 k, gc_dtype dtype, double v, const GcRowRef *row)
{
	float		f;

	if (dtype == GC_F64)
	{
		if (unlikely(!F64_OK(v)))
			BadFeatureValue(row, v, (float) v, isfinite(v));
		((double *) dst)[k] = v;
		return;
	}
	f = (float) v;
	if (unlikely(!isfinite(v) || isinf(f) || (f == 0.0f && v != 0.0)))
		BadFeatureValue(row, v, f, false);
	((float *) dst)[k] = f;
}

/*
 * Opens one non-NULL feature value of type kind for GcFeatureCopy: its
 * number of features and where they lie.  Toasted values are detoasted in
 * tmpcxt; in-line ones are read where they lie.
 */
void
GcFeatureOpen(GcFeatureType kind, Oid typid, Datum value, const GcRowRef *row,
			  MemoryContext tmpcxt, GcFeature *out)
{
	struct varlena *v;
	const char *body;
	Size		len;

	memset(out, 0, sizeof(*out));
	if (kind == GC_FEATURE_SCALAR)
	{
		out->fmt = FORMAT_SCALAR;
		out->d = 1;
		if (typid == NUMERICOID)
		{
			Numeric		num = DatumGetNumeric(value);

			if (numeric_is_nan(num) || numeric_is_inf(num))
				out->scalar = DatumGetFloat8(DirectFunctionCall1(numeric_float8, value));
			else
			{
				/* numeric_float8 would refuse values beyond double without the row */
				char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, value));

				out->scalar = strtod(text, NULL);
				if (isinf(out->scalar))
					BadFeatureValue(row, out->scalar, (float) out->scalar, true);
				if (out->scalar == 0.0 && strpbrk(text, "123456789") != NULL)
					BadFeatureValue(row, DBL_MIN, 0.0f, true);
				pfree(text);
			}
		}
		else
			out->scalar = ScalarValue(value, typid);
		return;
	}

	v = (struct varlena *) DatumGetPointer(value);
	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
	{
		MemoryContext old = MemoryContextSwitchTo(tmpcxt);

		v = PG_DETOAST_DATUM(value);
		MemoryContextSwitchTo(old);
	}
	body = VARDATA_ANY(v);
	len = VARSIZE_ANY_EXHDR(v);

	switch (kind)
	{
		case GC_FEATURE_VECTOR:
		case GC_FEATURE_HALFVEC:
			{
				int16		dim;

				memcpy(&dim, body, sizeof(int16));
				if (dim < 1 || len < 4 + (Size) dim * (kind == GC_FEATURE_VECTOR ? 4 : 2))
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("the %s of %s is malformed",
									kind == GC_FEATURE_VECTOR ? "vector" : "halfvec", RowStr(row)),
							 errdetail("It has %d dimensions in %zu bytes.", dim, len),
							 errhint("Filter the row out of the query; the stored value may be damaged.")));
				out->d = dim;
				out->fmt = kind == GC_FEATURE_VECTOR ? FORMAT_FLOAT4 : FORMAT_HALF;
				out->data = body + 4;
				return;
			}
		case GC_FEATURE_GEOMETRY:
			OpenGeometry(body, len, row, out);
			return;
		case GC_FEATURE_FLOAT4_ARRAY:
		case GC_FEATURE_FLOAT8_ARRAY:
			{
				int32		ndim;
				int32		dataoffset;
				int32		n;

				memcpy(&ndim, body, sizeof(int32));
				memcpy(&dataoffset, body + sizeof(int32), sizeof(int32));
				if (ndim != 1)
					ereport(ERROR,
							(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
							 ndim == 0 ?
							 errmsg("the feature array of %s is empty", RowStr(row)) :
							 errmsg("the feature array of %s has %d dimensions", RowStr(row), ndim),
							 errdetail("Feature arrays must be one-dimensional and not empty."),
							 errhint("Filter such rows out with WHERE cardinality(...) > 0, or flatten the array.")));
				if (dataoffset != 0)
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("the feature array of %s contains NULL", RowStr(row)),
							 errdetail("Every feature of a row needs a value."),
							 errhint("Filter such rows out, or pass a NULL feature for them (its cluster is NULL).")));
				memcpy(&n, body + sizeof(ArrayType) - VARHDRSZ, sizeof(int32));
				out->d = n;
				out->fmt = kind == GC_FEATURE_FLOAT4_ARRAY ? FORMAT_FLOAT4 : FORMAT_FLOAT8;
				out->data = body + ARR_OVERHEAD_NONULLS(1) - VARHDRSZ;
				return;
			}
		default:
			elog(ERROR, "unexpected feature type %d, please report a bug", (int) kind);
	}
}

/*
 * Writes the f->d features of an opened value to dst, elements of type
 * dtype, checking each.
 */
void
GcFeatureCopy(const GcFeature *f, void *dst, gc_dtype dtype, const GcRowRef *row)
{
	int32		d = f->d;
	float	   *dst4 = (float *) dst;

	switch ((FeatureFormat) f->fmt)
	{
		case FORMAT_FLOAT4:
			if (dtype == GC_F64)
			{
				for (int32 k = 0; k < d; k++)
				{
					float		e;

					memcpy(&e, f->data + sizeof(float) * k, sizeof(float));
					PutDouble(dst, k, dtype, e, row);
				}
				break;
			}
			if (unlikely(!CopyFinite4(dst4, f->data, d)))
				for (int32 k = 0; k < d; k++)
					if (!isfinite(dst4[k]))
						BadFeatureValue(row, dst4[k], dst4[k], false);
			break;
		case FORMAT_HALF:
			/* at once where the processor converts halves; value by value for the message */
			if (dtype == GC_F32 && HalfToFloatFinite(dst4, f->data, d))
				break;
			for (int32 k = 0; k < d; k++)
			{
				uint16		h;
				float		e;

				memcpy(&h, f->data + 2 * k, sizeof(uint16));
				e = HalfToFloat(h);
				if (unlikely((h & 0x7c00) == 0x7c00))
					BadFeatureValue(row, e, e, false);
				if (dtype == GC_F64)
					((double *) dst)[k] = e;
				else
					dst4[k] = e;
			}
			break;
		case FORMAT_FLOAT8:
			for (int32 k = 0; k < d; k++)
			{
				double		e;

				memcpy(&e, f->data + sizeof(double) * k, sizeof(double));
				PutDouble(dst, k, dtype, e, row);
			}
			break;
		case FORMAT_SCALAR:
			PutDouble(dst, 0, dtype, f->scalar, row);
			break;
	}
}

/* Appends one row's vector, halfvec or geometry feature. */
void
PutNative(GatherReceiver *st, Datum datum, int64 id)
{
	GcInput    *in = st->in;
	GcRowRef	row = {id, 0, 0};
	GcFeature	f;

	GcFeatureOpen(st->ftype, st->types[1], datum, &row, st->tmpcxt, &f);
	if (in->n == 0 && in->d == 0)
		in->d = f.d;
	else if (f.d != in->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature of the row with id " INT64_FORMAT " has %d dimensions, but the first row's has %d",
						id, f.d, in->d),
				 errdetail("The rows are clustered together, so they share one number of features."),
				 errhint("Every row must have the same number of features.")));
	if (unlikely(in->n >= st->populated))
		MakeRoom(st);
	GcFeatureCopy(&f, (char *) in->x + (Size) in->n * in->d * gc_dtype_size(in->dtype), in->dtype, &row);
}
