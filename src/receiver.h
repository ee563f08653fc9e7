/*
 * receiver.h
 *    The gather's DestReceiver: the state of one gather (GatherReceiver) and
 *    the callbacks that append each row of the user's query to the matrix
 *    (receiver.c).  The feature readers (feature.h), the range checks
 *    (range.h) and the row buffers (buffer.h) work on this state.
 */
#ifndef GPUCLUST_RECEIVER_H
#define GPUCLUST_RECEIVER_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "tcop/dest.h"
#include "utils/builtins.h"

#include "feature.h"
#include "gather.h"

#define GATHER_RESET_EVERY 1024
/* the block detoasted values go to, kept over resets: they are not faulted in anew */
#define GATHER_TMP_BYTES ((Size) 4 << 20)

typedef enum FeatureKind
{
	FEATURES_FLOAT4_ARRAY,
	FEATURES_FLOAT8_ARRAY,
	FEATURES_SCALARS,
	FEATURES_NATIVE				/* vector, halfvec or geometry: ftype */
} FeatureKind;

typedef struct GatherReceiver
{
	DestReceiver pub;			/* must be first */
	GcInput    *in;
	MemoryContext outcxt;		/* in->x and in->ids go with it */
	MemoryContext tmpcxt;		/* detoasting and numeric conversion */
	TupleDesc	desc;
	bool	   *plain;			/* [natts] a column of that name WHERE can test (ColRef), or NULL */
	FeatureKind kind;
	GcFeatureType ftype;		/* FEATURES_NATIVE */
	int			natts;
	Oid		   *types;			/* [natts] */
	int64		cap;			/* rows allocated */
	double		est_rows;		/* the planner's estimate of the rows, 0 if none */
	int64		populated;		/* rows of the buffers faulted in ahead */
	bool		no_populate;	/* the kernel cannot fault in ahead */
	int64		since_reset;
	Size		tmp_used;		/* bytes detoasted into tmpcxt since its reset, at most */
	struct GatherBuffers *buffers;	/* in->x and in->ids, malloc'd */
} GatherReceiver;

/* The name of column i (0-based) for messages. */
static inline const char *
ColName(GatherReceiver *st, int i)
{
	return NameStr(TupleDescAttr(st->desc, i)->attname);
}

/*
 * Column i (0-based) as a hint's WHERE clause can name it: its name when it
 * is a plain column of the query's FROM (st->plain), else its position, since
 * an expression's output name (int4, ?column?) is no name WHERE knows.
 */
static inline const char *
ColRef(GatherReceiver *st, int i)
{
	if (st->plain != NULL && st->plain[i])
		return quote_identifier(ColName(st, i));
	return psprintf("<the expression of column %d>", i + 1);
}

/* Checks the result columns of the query against the input contract. */
extern void CheckColumns(GatherReceiver *st, TupleDesc desc);

/* DestReceiver callbacks of the gather (GcGather sets them). */
extern bool GatherReceive(TupleTableSlot *slot, DestReceiver *self);
extern void GatherStartup(DestReceiver *self, int operation, TupleDesc typeinfo);
extern void GatherShutdown(DestReceiver *self);
extern void GatherDestroy(DestReceiver *self);

#endif							/* GPUCLUST_RECEIVER_H */
