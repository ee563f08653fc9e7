/*
 * output.c
 *    The result rows of a clustering function: materialize-mode output into
 *    a tuplestore sized from the result, and gpuclust.output_mem.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupmacs.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/guc.h"

#include "output.h"

int			gc_output_mem_guc = 1024 * 1024;	/* kB */

/*
 * The memory, in kB, that a tuplestore takes to hold nrows rows of desc in
 * memory, from above: each row is a MinimalTuple in its own palloc chunk
 * (rounded up to a power of two, with the chunk header) and a pointer in the
 * tuplestore's array, which grows by doubling, and starts at 1024 entries.
 * Variable-length columns are counted at varlena_bytes each.
 */
static double
OutputKb(TupleDesc desc, int64 nrows, Size varlena_bytes)
{
	Size		len = MAXALIGN(offsetof(MinimalTupleData, t_bits) + BITMAPLEN(desc->natts));
	Size		chunk;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attlen > 0)
			len = att_align_nominal(len, att->attalign) + att->attlen;
		else
			len = INTALIGN(len) + varlena_bytes;
	}
	for (chunk = 8; chunk < len; chunk *= 2)
		;
	return (double) nrows * (chunk + 16 + 2 * sizeof(void *)) / 1024.0 + 16.0;
}

/*
 * Sets up materialize-mode output of nrows rows (an estimate where the rows
 * vary in width); they go into the returned tuplestore.
 *
 * The tuplestore holds its rows in memory up to a limit and writes them all
 * to a temporary file past it, and the query above reads them back from
 * there.  PostgreSQL's limit is work_mem (4MB by default: 70000 DBSCAN
 * rows).  Knowing the size of the result, the call raises the limit to
 * gpuclust.output_mem when the whole result fits in that, so that it stays
 * in memory; a result that does not fit keeps work_mem and goes to the file
 * from the start instead of after filling output_mem first.
 */
Tuplestorestate *
GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo, TupleDesc *tupdesc, int64 nrows)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	Tuplestorestate *ts;
	TupleDesc	desc;
	int			max_kb = work_mem;
	double		need_kb;

	INSTR_TIME_SET_CURRENT(call->t_phase);
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = CreateTupleDescCopy(desc);
	/* the one variable-length column there is: a centroid, d double precision values */
	need_kb = OutputKb(desc, nrows, ARR_OVERHEAD_NONULLS(1) + (Size) call->in.d * sizeof(float8));
	if (need_kb > work_mem && need_kb <= gc_output_mem_guc)
		max_kb = gc_output_mem_guc;
	ts = tuplestore_begin_heap(rsinfo->allowedModes & SFRM_Materialize_Random,
							   false, max_kb);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = desc;
	MemoryContextSwitchTo(oldcxt);

	*tupdesc = desc;
	return ts;
}

void
GcRowsInit(GcRows *rows, const GcCall *call)
{
	memset(rows, 0, sizeof(*rows));
	rows->nrows = call->in.n;
	rows->ids = call->in.ids;
}

void
GcRowsAdd(GcRows *rows, GcRowsKind kind, const void *values, bool null_if_negative)
{
	Assert(rows->ncols < GC_ROWS_MAXCOLS);
	rows->col[rows->ncols].kind = kind;
	rows->col[rows->ncols].values = values;
	rows->col[rows->ncols].null_if_negative = null_if_negative;
	rows->ncols++;
}

void
GcRowsFill(const GcRows *rows, int64 i, Datum *values, bool *nulls)
{
	for (int c = 0; c <= rows->ncols; c++)
		GcRowsFillColumn(rows, i, c, &values[c], &nulls[c]);
}

/* The GPU Cluster Scan node's sink when it called the function, else NULL. */
GcRowsSink *
GcRowsSinkOf(FunctionCallInfo fcinfo)
{
	Node	   *ctx = fcinfo->context;

	if (ctx != NULL && IsA(ctx, ExtensibleNode) &&
		strcmp(((ExtensibleNode *) ctx)->extnodename, GC_ROWS_SINK) == 0)
		return (GcRowsSink *) ctx;
	return NULL;
}

bool
GcRowsColumnRead(FunctionCallInfo fcinfo, int c)
{
	GcRowsSink *sink = GcRowsSinkOf(fcinfo);

	return sink == NULL || c >= 32 || (sink->unread & ((uint32) 1 << c)) == 0;
}

void
GcCallOutputRows(GcCall *call, FunctionCallInfo fcinfo, const GcRows *rows, const char *extra)
{
	GcRowsSink *sink = GcRowsSinkOf(fcinfo);
	TupleDesc	desc;
	Tuplestorestate *ts;

	if (sink != NULL)
	{
		/* the arrays stay where they are, in the call's context, kept by the node */
		INSTR_TIME_SET_CURRENT(call->t_phase);
		sink->rows = *rows;
		sink->algorithm = call->algorithm;
		sink->used_gpu = call->used_gpu;
		sink->d = call->in.d;
		sink->timing = call->timing;
		sink->gather_ms = call->gather_ms;
		sink->compute_ms = call->compute_ms;
		sink->filled = true;
		call->keep_cxt = true;
		GcCallEnd(call, extra);
		return;
	}
	ts = GcCallOutputStart(call, fcinfo, &desc, rows->nrows);
	for (int64 i = 0; i < rows->nrows; i++)
	{
		Datum		values[1 + GC_ROWS_MAXCOLS];
		bool		nulls[1 + GC_ROWS_MAXCOLS];

		GcRowsFill(rows, i, values, nulls);
		tuplestore_putvalues(ts, desc, values, nulls);
		if ((i & 0xffff) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	GcCallEnd(call, extra);
}

/* Defines gpuclust.output_mem. */
void
GcOutputDefineGucs(void)
{
	DefineCustomIntVariable("gpuclust.output_mem",
							"Memory a call's result may hold before it goes to a temporary file.",
							"A result that fits stays in memory up to this size, above work_mem; "
							"a larger one is written to a temporary file past work_mem, as without this setting.",
							&gc_output_mem_guc, 1024 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
}
