/*
 * output.h
 *    The result rows of a clustering function (output.c).
 */
#ifndef GPUCLUST_OUTPUT_H
#define GPUCLUST_OUTPUT_H

#include "gpuclust.h"

#include "nodes/extensible.h"

extern int	gc_output_mem_guc;	/* kB */

/* Defines gpuclust.output_mem. */
extern void GcOutputDefineGucs(void);

extern Tuplestorestate *GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo,
										  TupleDesc *tupdesc, int64 nrows);

/*
 * The rows of a function that returns one row per input row: the id, then
 * up to GC_ROWS_MAXCOLS columns, each read from a result array.  The same
 * description feeds the tuplestore of the set-returning path and the GPU
 * Cluster Scan node (scan.c), which reads the arrays directly.
 */
#define GC_ROWS_MAXCOLS 4

typedef enum GcRowsKind
{
	GC_COL_INT32,				/* int32 array; NULL where negative if null_if_negative */
	GC_COL_FLOAT8,				/* double array */
	GC_COL_BOOL,				/* uint8 array */
	GC_COL_UNREAD				/* not computed: NULL (a column the plan never reads) */
} GcRowsKind;

typedef struct GcRows
{
	int64		nrows;
	const int64 *ids;
	int			ncols;			/* after the id */
	struct
	{
		GcRowsKind	kind;
		bool		null_if_negative;
		const void *values;
	}			col[GC_ROWS_MAXCOLS];
} GcRows;

/* Starts a GcRows of the call's input rows and ids. */
extern void GcRowsInit(GcRows *rows, const GcCall *call);
extern void GcRowsAdd(GcRows *rows, GcRowsKind kind, const void *values, bool null_if_negative);

/* Row i into values/nulls (1 + ncols entries). */
extern void GcRowsFill(const GcRows *rows, int64 i, Datum *values, bool *nulls);

/* Column c of row i (0: the id, c: col[c - 1]). */
static inline void
GcRowsFillColumn(const GcRows *rows, int64 i, int c, Datum *value, bool *isnull)
{
	*isnull = false;
	if (c == 0)
	{
		*value = Int64GetDatum(rows->ids[i]);
		return;
	}
	c--;
	switch (rows->col[c].kind)
	{
		case GC_COL_INT32:
			{
				int32		x = ((const int32 *) rows->col[c].values)[i];

				*isnull = rows->col[c].null_if_negative && x < 0;
				*value = *isnull ? (Datum) 0 : Int32GetDatum(x);
				return;
			}
		case GC_COL_FLOAT8:
			*value = Float8GetDatum(((const double *) rows->col[c].values)[i]);
			return;
		case GC_COL_BOOL:
			*value = BoolGetDatum(((const uint8 *) rows->col[c].values)[i] != 0);
			return;
		case GC_COL_UNREAD:
			*value = (Datum) 0;
			*isnull = true;
			return;
	}
}


/*
 * Returns the rows and ends the call (GcCallEnd with extra): into the
 * function's tuplestore, or, when the GPU Cluster Scan node called the
 * function (fcinfo->context is a GcRowsSink), to the node, with the call's
 * memory (the result arrays) kept in the node's context.
 */
extern void GcCallOutputRows(GcCall *call, FunctionCallInfo fcinfo,
							 const GcRows *rows, const char *extra);

/*
 * What the GPU Cluster Scan node gets from the call (fcinfo->context); the
 * node sets unread before the call: bit c for each column c of GcRowsFillColumn
 * that no expression of the plan reads.
 */
typedef struct GcRowsSink
{
	ExtensibleNode node;		/* T_ExtensibleNode, extnodename GC_ROWS_SINK */
	uint32		unread;
	bool		filled;
	GcRows		rows;
	const GcAlgorithm *algorithm;
	bool		used_gpu;
	int32		d;
	gc_timing	timing;
	double		gather_ms;
	double		compute_ms;
} GcRowsSink;

#define GC_ROWS_SINK "GcRowsSink"

extern GcRowsSink *GcRowsSinkOf(FunctionCallInfo fcinfo);

/*
 * Whether the query reads column c of the rows (GcRowsFillColumn's numbering):
 * false only where the GPU Cluster Scan node called the function and no
 * expression of its plan reads the column, which may then be left out
 * (GC_COL_UNREAD) and not computed.
 */
extern bool GcRowsColumnRead(FunctionCallInfo fcinfo, int c);

/* The GPU Cluster Scan node and gpuclust.custom_scan (scan.c), from _PG_init. */
extern void GcScanInit(void);

#endif							/* GPUCLUST_OUTPUT_H */
