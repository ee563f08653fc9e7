/*
 * gather.c
 *    Runs the user's query read-only through SPI and packs its rows into a
 *    matrix of single or double precision, checking the input contract
 *    shared by every algorithm.
 *
 * The query's first column is the row id (smallint, integer or bigint); the
 * rest are the features: exactly one one-dimensional real[] or double
 * precision[] column, or one pgvector vector or halfvec or PostGIS geometry
 * point column, or one or more numeric scalar columns.  Rows stream from the
 * executor into a DestReceiver that appends them to the matrix: nothing is
 * materialized in SPI_tuptable and no allocation is made per row (in-line
 * values are read where they lie, even with a short varlena header; only
 * toasted ones are detoasted, in a context reset in batches).
 *
 * The element type follows the input, as scikit-learn's does (GcDtypeFor):
 * real, real[], vector and halfvec features are kept in single precision,
 * every other type (double precision, numeric, integers, PostGIS's double
 * coordinates) in double precision; gpuclust.precision = single or double
 * overrides.
 *
 * The readers of single feature values (GcFeatureTypeOf, GcFeatureOpen,
 * GcFeatureCopy) serve the window functions of window.c as well.
 */
#include "postgres.h"

#include "compat.h"

#include "access/tupdesc.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/plancache.h"

#include "buffer.h"
#include "gather.h"
#include "pgather.h"
#include "receiver.h"

/*
 * The name of a statement's command for a message: its command tag, except
 * SELECT INTO, whose tag is SELECT but which creates a table.
 */
static const char *
CommandName(Query *q, CachedPlanSource *ps)
{
	if (q->utilityStmt != NULL && IsA(q->utilityStmt, CreateTableAsStmt) &&
		ps->commandTag == CMDTAG_SELECT)
		return "SELECT INTO";
	return GetCommandTagName(ps->commandTag);
}

/*
 * Whether a query inside node (a subquery, a WITH query, a sublink, a view's
 * query once the rules expanded it) locks rows: FOR UPDATE or FOR SHARE
 * anywhere, not only at the top.
 */
static bool
LocksRows(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		if (((Query *) node)->rowMarks != NIL)
			return true;
		return query_tree_walker((Query *) node, LocksRows, context, 0);
	}
	return expression_tree_walker(node, LocksRows, context);
}

/* Refuses anything but one read-only SELECT: nothing may change. */
static void
CheckReadOnly(SPIPlanPtr plan, const char *query)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *ps;
	ListCell   *lc;

	if (list_length(sources) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query must be a single SELECT statement"),
				 errdetail("It holds %d statements.", list_length(sources)),
				 errhint("Pass one SELECT that returns the row id and the features.")));
	ps = (CachedPlanSource *) linitial(sources);
	foreach(lc, ps->query_list)
	{
		Query	   *q = lfirst_node(Query, lc);

		if (q->commandType != CMD_SELECT || q->utilityStmt != NULL ||
			q->hasModifyingCTE || LocksRows((Node *) q, NULL))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the query must be read-only"),
					 errdetail(q->commandType == CMD_SELECT && q->utilityStmt == NULL ?
							   "It modifies or locks rows (a data-modifying WITH, or FOR UPDATE/SHARE)." :
							   "Its command is %s.", CommandName(q, ps)),
					 errhint("Pass a plain SELECT that returns the row id and the features; "
							 "gpuclust never changes data.")));
	}
	if (ps->resultDesc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the query must return rows"),
				 errdetail("It is a statement that returns no result set."),
				 errhint("Pass a SELECT that returns the row id and the features.")));
}

/*
 * Which of the natts result columns of q are plain columns of its FROM
 * under their own name, so that a hint's WHERE clause can name them
 * (ColRef).
 */
static bool *
PlainColumns(Query *q, int natts)
{
	bool	   *plain = palloc0(sizeof(bool) * natts);
	int			i = 0;
	ListCell   *lc;

	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) te->expr;
		RangeTblEntry *rte;

		if (te->resjunk || i >= natts)
			continue;
		if (IsA(v, Var) && v->varlevelsup == 0 && v->varattno > 0 && te->resname != NULL &&
			v->varno >= 1 && v->varno <= list_length(q->rtable))
		{
			rte = rt_fetch(v->varno, q->rtable);
			plain[i] = rte->eref != NULL && v->varattno <= list_length(rte->eref->colnames) &&
				strcmp(strVal(list_nth(rte->eref->colnames, v->varattno - 1)), te->resname) == 0;
		}
		i++;
	}
	return plain;
}

/* Runs the prepared query, streaming its rows into st. */
static void
ExecuteInto(SPIPlanPtr plan, GatherReceiver *st)
{
#ifdef GC_HAVE_SPI_EXECUTE_EXTENDED
	{
		SPIExecuteOptions options;
		int			rc;

		memset(&options, 0, sizeof(options));
		options.read_only = true;
		options.dest = &st->pub;
		rc = SPI_execute_plan_extended(plan, &options);
		if (rc < 0)
			elog(ERROR, "SPI_execute_plan_extended failed: %s", SPI_result_code_string(rc));
	}
#else
	{
		Portal		portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
		TupleTableSlot *slot = MakeSingleTupleTableSlot(portal->tupDesc, &TTSOpsHeapTuple);

		for (;;)
		{
			SPI_cursor_fetch(portal, true, 10000);
			if (SPI_processed == 0)
				break;
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				ExecStoreHeapTuple(SPI_tuptable->vals[i], slot, false);
				GatherReceive(slot, &st->pub);
			}
			SPI_freetuptable(SPI_tuptable);
		}
		ExecDropSingleTupleTableSlot(slot);
		SPI_cursor_close(portal);
	}
#endif
}

/*
 * The planner's estimate of the rows of the prepared query, -1 where it is
 * not one SELECT.  The plan is the one the query then runs with: a query
 * without parameters gets the generic plan, planned once.  Also the estimate
 * of the planner support function (support.c).
 */
double
GcPlannedRows(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	double		rows = -1;

	if (cplan == NULL)
		return -1;
	if (list_length(cplan->stmt_list) == 1)
	{
		PlannedStmt *ps = linitial_node(PlannedStmt, cplan->stmt_list);

		if (ps->commandType == CMD_SELECT && ps->utilityStmt == NULL && ps->planTree != NULL)
			rows = ps->planTree->plan_rows;
	}
#if PG_VERSION_NUM >= 140000
	ReleaseCachedPlan(cplan, NULL);
#else
	ReleaseCachedPlan(cplan, false);
#endif
	return rows;
}

/*
 * Gathers the rows of the prepared query with the parallel gather when its
 * plan is one that takes (pgather.c); false when the serial gather must run.
 */
static bool
RunParallel(SPIPlanPtr plan, GatherReceiver *st, bool *started)
{
	CachedPlanSource *ps = linitial(SPI_plan_get_plan_sources(plan));
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	bool		done = false;

	if (cplan == NULL)
		return false;
	if (list_length(cplan->stmt_list) == 1)
		done = GcParallelGather(ps, linitial_node(PlannedStmt, cplan->stmt_list), st, started);
#if PG_VERSION_NUM >= 140000
	ReleaseCachedPlan(cplan, NULL);
#else
	ReleaseCachedPlan(cplan, false);
#endif
	return done;
}

/*
 * Prepares and runs the query through SPI, streaming its rows into st, or
 * reads them with the parallel gather when allow_parallel and the plan is
 * one it takes (*parallel is then set once its workers are launched).  The
 * statement itself must be a SELECT; functions it calls could still write,
 * and running it as in a read-only transaction refuses most such writes with
 * a clear error (temporary tables, large objects and some others excepted,
 * as in any read-only transaction): the caller rolls back what is left.
 */
static void
RunQuery(const char *query, GatherReceiver *st, bool allow_parallel, bool *parallel)
{
	SPIPlanPtr	plan;
	int			rc;
	bool		save_read_only = XactReadOnly;

	if ((rc = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(rc));
	/*
	 * Parallel plans are allowed: the plan runs once, to completion, into
	 * the DestReceiver, which is what PostgreSQL asks of a parallel plan.
	 * The planner still keeps it serial when the query calls anything
	 * parallel unsafe or when workers would not pay (a plain scan of every
	 * row usually does not: each row would cross over from a worker).
	 */
	plan = SPI_prepare_cursor(query, 0, NULL, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare_cursor failed: %s", SPI_result_code_string(SPI_result));
	CheckReadOnly(plan, query);
	{
		CachedPlanSource *ps = linitial(SPI_plan_get_plan_sources(plan));
		MemoryContext old = MemoryContextSwitchTo(st->outcxt);

		CheckColumns(st, CreateTupleDescCopy(ps->resultDesc));
		st->plain = PlainColumns(linitial_node(Query, ps->query_list), st->natts);
		MemoryContextSwitchTo(old);
	}
	XactReadOnly = true;
	PG_TRY();
	{
		st->est_rows = Max(GcPlannedRows(plan), 0.0);
		if (!(allow_parallel && RunParallel(plan, st, parallel)))
			ExecuteInto(plan, st);
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();
	SPI_finish();
}

/*
 * Runs query read-only with the caller's privileges and fills in (in the
 * current memory context).  An empty result gives n = 0.
 *
 * The query runs in a subtransaction that is always rolled back once its
 * rows are copied out, so nothing it did stays: no row, large object,
 * temporary table, setting, notification or transaction-level lock.  What is
 * not transactional in PostgreSQL stays as it would after any rollback:
 * sequence values, session-level advisory locks, files written by server
 * functions, signals sent to other backends.
 *
 * Where the parallel gather read the rows and an error came that the serial
 * gather could raise differently or for another row (a row's error: the
 * first offending row of the serial order must be the one named), the
 * query is run again serially, which raises the serial gather's error.
 */
void
GcGather(const char *query, GcInput *in)
{
	MemoryContext outcxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	GatherReceiver st;
	volatile bool allow_parallel = true;

	for (;;)
	{
		bool		parallel = false;
		volatile bool again = false;

		memset(in, 0, sizeof(*in));
		memset(&st, 0, sizeof(st));
		st.pub.receiveSlot = GatherReceive;
		st.pub.rStartup = GatherStartup;
		st.pub.rShutdown = GatherShutdown;
		st.pub.rDestroy = GatherDestroy;
		st.pub.mydest = DestNone;
		st.in = in;
		st.outcxt = outcxt;
		st.tmpcxt = AllocSetContextCreate(outcxt, "gpuclust gather",
										  GATHER_TMP_BYTES, GATHER_TMP_BYTES, GATHER_TMP_BYTES);

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(outcxt);
		PG_TRY();
		{
			RunQuery(query, &st, allow_parallel, &parallel);
			if (st.buffers != NULL)
				StopPrefault(&st.buffers->prefault);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			if (st.buffers != NULL)
				StopPrefault(&st.buffers->prefault);

			/* Roll back our own subtransaction before the error goes up. */
			MemoryContextSwitchTo(outcxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(outcxt);
			CurrentResourceOwner = owner;
			if (!(parallel && GcParallelGatherRetries(edata->sqlerrcode)))
				ReThrowError(edata);
			FreeErrorData(edata);
			again = true;
		}
		PG_END_TRY();
		if (again)
		{
			/* the row buffers of the parallel attempt, if any, and its temporary context */
			if (st.buffers != NULL)
			{
				st.buffers->cb.func(st.buffers->cb.arg);
				st.buffers = NULL;
			}
			MemoryContextDelete(st.tmpcxt);
			allow_parallel = false;
			continue;
		}
		break;
	}
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(outcxt);
	CurrentResourceOwner = owner;

	MemoryContextDelete(st.tmpcxt);
	if (in->n == 0)
		in->d = st.kind == FEATURES_SCALARS ? st.natts - 1 : 0;
}
