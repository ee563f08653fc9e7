/*
 * receiver.c
 *    The gather's DestReceiver: checks the result columns of the user's query
 *    against the input contract, then appends each row it receives to the
 *    matrix (ids, scalar features here; arrays and extension types through
 *    feature.c), resetting the temporary context in batches.
 */
#include "postgres.h"

#include <math.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "buffer.h"
#include "feature.h"
#include "metric.h"
#include "precision.h"
#include "range.h"
#include "receiver.h"

static bool
IsIdType(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

/* Checks the result columns of the query against the input contract. */
void
CheckColumns(GatherReceiver *st, TupleDesc desc)
{
	const char *hint = "Write the query as SELECT id, f FROM ... with f a real[], double precision[], "
		"vector, halfvec or geometry column, or as SELECT id, x, y, ... FROM ... with numeric columns.";

	st->desc = desc;
	st->natts = desc->natts;
	if (st->natts < 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the query must return a row id column and at least one feature column"),
				 errdetail("It returns %d column(s).", st->natts),
				 errhint("%s", hint)));
	st->types = palloc(sizeof(Oid) * st->natts);
	for (int i = 0; i < st->natts; i++)
		st->types[i] = TupleDescAttr(desc, i)->atttypid;

	if (!IsIdType(st->types[0]))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the first column of the query must be the row id"),
				 errdetail("Column \"%s\" has type %s; a row id is smallint, integer or bigint.",
						   ColName(st, 0), format_type_be(st->types[0])),
				 errhint("%s", hint)));

	if (st->natts == 2)
	{
		GcFeatureType ft = GcFeatureTypeOf(st->types[1]);

		if (ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY)
		{
			st->kind = ft == GC_FEATURE_FLOAT4_ARRAY ? FEATURES_FLOAT4_ARRAY : FEATURES_FLOAT8_ARRAY;
			st->in->d = 0;		/* known from the first row */
			st->in->dtype = GcFeatureDtype(ft, st->types[1]);
			return;
		}
		if (ft >= GC_FEATURE_VECTOR)
		{
			st->kind = FEATURES_NATIVE;
			st->ftype = ft;
			st->in->d = 0;		/* known from the first row */
			st->in->dtype = GcFeatureDtype(ft, st->types[1]);
			return;
		}
	}
	for (int i = 1; i < st->natts; i++)
	{
		Oid			t = st->types[i];
		GcFeatureType ft;

		if (IsScalarFeatureType(t))
			continue;
		ft = GcFeatureTypeOf(t);
		if (ft != GC_FEATURE_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY ?
					 errmsg("a feature array must be the only feature column") :
					 errmsg("a feature of type %s must be the only feature column", format_type_be(t)),
					 errdetail("The query returns %d feature columns, and \"%s\" is %s.",
							   st->natts - 1, ColName(st, i),
							   ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY ?
							   "an array" : "a value of several features"),
					 errhint("%s", hint)));
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of the query has type %s, which is not a feature type",
						ColName(st, i), format_type_be(t)),
				 errdetail("Features are one column of type %s, or columns of "
						   "type smallint, integer, bigint, real, double precision or numeric.",
						   GcFeatureTypeNames()),
				 errhint("%s", hint)));
	}
	st->kind = FEATURES_SCALARS;
	st->in->d = st->natts - 1;
	/* single precision only when every feature column is real */
	st->in->dtype = GcFeatureDtype(GC_FEATURE_SCALAR, FLOAT4OID);
	for (int i = 1; i < st->natts; i++)
		if (GcFeatureDtype(GC_FEATURE_SCALAR, st->types[i]) == GC_F64)
			st->in->dtype = GC_F64;
}

/* DestReceiver: appends one row of the query. */
bool
GatherReceive(TupleTableSlot *slot, DestReceiver *self)
{
	GatherReceiver *st = (GatherReceiver *) self;
	GcInput    *in = st->in;
	bool		isnull;
	Datum		v;
	int64		id;

	slot_getallattrs(slot);
	v = slot->tts_values[0];
	isnull = slot->tts_isnull[0];
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the row id is NULL in row " INT64_FORMAT " of the query", in->n + 1),
				 errdetail("Every row needs an id: the result names the rows by it."),
				 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, 0))));
	switch (st->types[0])
	{
		case INT2OID:
			id = DatumGetInt16(v);
			break;
		case INT4OID:
			id = DatumGetInt32(v);
			break;
		default:
			id = DatumGetInt64(v);
	}

	if (st->kind == FEATURES_SCALARS)
	{
		void	   *row;
		float	   *dst;
		bool		f8 = in->dtype == GC_F64;

		if (unlikely(in->n >= st->populated))
			MakeRoom(st);
		row = (char *) in->x + (Size) in->n * in->d * gc_dtype_size(in->dtype);
		dst = (float *) row;
		for (int i = 1; i < st->natts; i++)
		{
			char		what[NAMEDATALEN + 16];
			double		e;

			if (slot->tts_isnull[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("feature \"%s\" is NULL in the row with id " INT64_FORMAT, ColName(st, i), id),
						 errdetail("Every feature of a row needs a value."),
						 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, i))));
			if (st->types[i] == NUMERICOID)
			{
				MemoryContext old = MemoryContextSwitchTo(st->tmpcxt);

				e = NumericValue(st, slot->tts_values[i], id, i);
				MemoryContextSwitchTo(old);
			}
			else
				e = ScalarValue(slot->tts_values[i], st->types[i]);
			if (f8)
			{
				((double *) row)[i - 1] = e;
				if (likely(F64_OK(e)))
					continue;
			}
			else
			{
				dst[i - 1] = (float) e;
				if (likely(isfinite(e) && !isinf(dst[i - 1]) && !(dst[i - 1] == 0.0f && e != 0.0)))
					continue;
			}
			snprintf(what, sizeof(what), "feature \"%s\"", ColName(st, i));
			PutFeature(st, row, i - 1, e, id, what);
		}
	}
	else
	{
		if (slot->tts_isnull[1])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 st->kind == FEATURES_NATIVE ?
					 errmsg("the feature is NULL in the row with id " INT64_FORMAT, id) :
					 errmsg("the feature array is NULL in the row with id " INT64_FORMAT, id),
					 errdetail("Every row needs its features."),
					 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, 1))));
		if (unlikely(VARATT_IS_EXTERNAL(DatumGetPointer(slot->tts_values[1])) ||
					 VARATT_IS_COMPRESSED(DatumGetPointer(slot->tts_values[1]))))
		{
			/*
			 * A toasted value is detoasted into tmpcxt: reset it before it
			 * outgrows its first block, which it keeps, so that the same
			 * pages take every batch (chunks are rounded up to a power of 2).
			 */
			Size		need = 2 * toast_raw_datum_size(slot->tts_values[1]) + 64;

			if (st->tmp_used > 0 && st->tmp_used + need > GATHER_TMP_BYTES)
			{
				MemoryContextReset(st->tmpcxt);
				st->tmp_used = 0;
			}
			st->tmp_used += need;
		}
		if (st->kind == FEATURES_NATIVE)
			PutNative(st, slot->tts_values[1], id);
		else
			PutArray(st, slot->tts_values[1], id);
	}
	in->ids[in->n] = id;
	in->n++;

	if (++st->since_reset >= GATHER_RESET_EVERY)
	{
		st->since_reset = 0;
		st->tmp_used = 0;
		MemoryContextReset(st->tmpcxt);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

void
GatherStartup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

void
GatherShutdown(DestReceiver *self)
{
}

void
GatherDestroy(DestReceiver *self)
{
}
