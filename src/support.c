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
 * plan (a syntax error, a missing table), or that the caller could not run
 * (no privilege on a table, a column or a function), leaves the declared
 * estimate, and the error comes when the function runs, as it would
 * without this.  The estimate never reveals statistics the caller could
 * not see through EXPLAIN of the query itself.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "jit/jit.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "gpuclust.h"

PG_FUNCTION_INFO_V1(gpuclust_support);

/*
 * Raises 42501 where the caller could not run the planned query ps.  The
 * plan is started as EXPLAIN starts it, without running it: the executor's
 * start checks the privileges of every relation and column of the range
 * table (a view's tables as its owner), calls ExecutorCheckPerms_hook, and
 * checks EXECUTE on every function the plan calls.  ExecutorStart_hook is
 * left out: this is no execution for an extension to count.
 */
static void
CheckCallerMayRun(PlannedStmt *ps, const char *query)
{
	QueryDesc  *qd;
	bool		pushed = false;

	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pushed = true;
	}
	qd = CreateQueryDesc(ps, query, GetActiveSnapshot(), InvalidSnapshot,
						 None_Receiver, NULL, NULL, 0);
	standard_ExecutorStart(qd, EXEC_FLAG_EXPLAIN_ONLY);
	standard_ExecutorEnd(qd);
	FreeQueryDesc(qd);
	if (pushed)
		PopActiveSnapshot();
}

/*
 * The planner's row count for query, or -1 when it does not plan as one
 * SELECT or when the caller could not run it.
 *
 * The estimate comes from the statistics of the query's tables, so it goes
 * only to a caller who may read them, under the rules of EXPLAIN of the
 * query itself: row-level security is applied as the query is rewritten for
 * the current user, and CheckCallerMayRun() applies the executor's
 * permission checks.  Anyone else gets -1, and the planner the function's
 * declared estimate, which depends on no data.
 *
 * The outer plan (root) records what the estimate depended on, as a plan
 * over a view does: the role it was made for (dependsOnRole: a cached plan
 * is made again before another role uses it) and the inner query's
 * relations and user-defined functions and types (relationOids, invalItems:
 * GRANT, REVOKE, a policy's change or ANALYZE on them invalidates it).
 *
 * Planning happens in a subtransaction that is rolled back, so that the
 * locks it takes do not stay.  A cancel is raised, any other error forgotten.
 */
static double
PlannedRows(PlannerInfo *root, const char *query)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile double rows = -1;
	List	   *volatile relids = NIL;
	List	   *volatile invals = NIL;
	volatile bool failed = false;

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
		CachedPlan *cplan;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		plan = SPI_prepare_cursor(query, 0, NULL, CURSOR_OPT_PARALLEL_OK);
		cplan = plan != NULL ? SPI_plan_get_cached_plan(plan) : NULL;
		if (cplan != NULL && list_length(cplan->stmt_list) == 1)
		{
			PlannedStmt *ps = linitial_node(PlannedStmt, cplan->stmt_list);

			if (ps->commandType == CMD_SELECT && ps->utilityStmt == NULL &&
				ps->planTree != NULL)
			{
				MemoryContext old = MemoryContextSwitchTo(cxt);

				relids = list_copy(ps->relationOids);
				invals = copyObject(ps->invalItems);
				MemoryContextSwitchTo(old);
				/* the plan is thrown away with the subtransaction: no JIT code for it */
				ps->jitFlags = PGJIT_NONE;
				CheckCallerMayRun(ps, query);
				rows = ps->planTree->plan_rows;
			}
		}
		if (cplan != NULL)
			ReleaseCachedPlan(cplan, NULL);
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
		failed = true;
	}
	PG_END_TRY();
	if (!failed)
	{
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	else
		rows = -1;

	if (root != NULL && root->glob != NULL)
	{
		root->glob->dependsOnRole = true;
		root->glob->relationOids = list_concat(root->glob->relationOids, relids);
		root->glob->invalItems = list_concat(root->glob->invalItems, invals);
	}
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
			rows = PlannedRows(req->root, TextDatumGetCString(query->constvalue));
	}
	if (rows < 0)
		PG_RETURN_POINTER(NULL);
	req->rows = Max(rows, 1);
	PG_RETURN_POINTER(req);
}
