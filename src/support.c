/*
 * support.c
 *    gpuclust_support(internal): the planner support function of the
 *    clustering functions, so that the planner (and EXPLAIN) sees the size
 *    of their result instead of the default 1000 rows.
 *
 * gpu_kmeans_centroids returns k rows: its estimate is k when k is a
 * constant.  The per-row functions return one row per row of their query:
 * when the query is a constant, it is planned (not run) and the estimate is
 * the row count of its plan.  Planning happens in a subtransaction that is
 * rolled back, so that the locks it takes do not stay; a query that does not
 * plan (a syntax error, a missing table) leaves the default estimate, and
 * the error comes when the function runs, as it would without this.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"

#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpuclust_support);

/*
 * The planner's row count for query, or -1 when it does not plan as one
 * SELECT.  A cancel during planning is raised, any other error forgotten.
 */
static double
PlannedRows(const char *query)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile double rows = -1;

#if PG_VERSION_NUM < 170000
	/* no subtransaction in parallel mode before PostgreSQL 17 */
	if (IsInParallelMode())
		return -1;
#endif
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		SPIPlanPtr	plan;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		plan = SPI_prepare_cursor(query, 0, NULL, CURSOR_OPT_PARALLEL_OK);
		if (plan != NULL)
			rows = GcPlannedRows(plan);
		SPI_finish();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		FreeErrorData(edata);
		return -1;
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return rows;
}

/* The value of a non-null constant argument, or NULL. */
static Const *
ConstArg(List *args, int argno, Oid type)
{
	Node	   *arg;

	if (list_length(args) <= argno)
		return NULL;
	arg = (Node *) list_nth(args, argno);
	if (!IsA(arg, Const) || ((Const *) arg)->constisnull ||
		((Const *) arg)->consttype != type)
		return NULL;
	return (Const *) arg;
}

/* gpuclust_support(internal): SupportRequestRows for the clustering functions. */
Datum
gpuclust_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestRows *req;
	FuncExpr   *fexpr;
	char	   *name;
	volatile double rows = -1;

	if (!IsA(rawreq, SupportRequestRows))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestRows *) rawreq;
	if (!IsA(req->node, FuncExpr))
		PG_RETURN_POINTER(NULL);
	fexpr = (FuncExpr *) req->node;
	name = get_func_name(fexpr->funcid);
	if (name == NULL)
		PG_RETURN_POINTER(NULL);

	if (strcmp(name, "gpu_kmeans_centroids") == 0)
	{
		Const	   *k = ConstArg(fexpr->args, 1, INT4OID);

		if (k != NULL && DatumGetInt32(k->constvalue) > 0)
			rows = DatumGetInt32(k->constvalue);
	}
	else
	{
		Const	   *query = ConstArg(fexpr->args, 0, TEXTOID);

		if (query != NULL)
			rows = PlannedRows(TextDatumGetCString(query->constvalue));
	}
	if (rows < 0)
		PG_RETURN_POINTER(NULL);
	req->rows = Max(rows, 1);
	PG_RETURN_POINTER(req);
}
