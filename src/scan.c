/*
 * scan.c
 *    The GPU Cluster Scan node: when a call of gpu_dbscan, gpu_kmeans,
 *    gpu_kmeans_assign, gpu_density_peaks or gpu_hdbscan is a whole FROM
 *    item, its rows go from the result arrays straight to the query above,
 *    one virtual tuple per row, without the tuplestore of the
 *    set-returning path; and gpuclust.custom_scan, which switches it off.
 *
 * A planner hook (set_rel_pathlist_hook, chained) adds a CustomPath for a
 * function RTE that holds exactly one call of one of those functions,
 * without WITH ORDINALITY, whose arguments refer to no other FROM item
 * (no LATERAL reference) and whose row is not needed as a whole.  Every
 * other shape keeps the Function Scan.
 *
 * On its first row the node calls the function itself, through fmgr, with
 * the evaluated arguments and a GcRowsSink as fcinfo->context: the
 * function runs exactly as it does as a set-returning function (the same
 * argument checks, the same read-only inner query with the caller's
 * rights, the same cancel) and, instead of filling a tuplestore, hands
 * over the description of its rows (GcRows of output.h) with the call's
 * memory, which stays in a context of the node's until a rescan with new
 * parameter values or the end of the scan.  The node reads forward and
 * backward (SCROLL cursors); a rescan without changed parameters rewinds.
 * Without quals, and with a target list of the row's own columns (none for
 * count(*)), each row's output columns are filled straight from the
 * arrays (NextRowDirect); otherwise ExecScan fills the whole scan tuple,
 * checks the quals and projects.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#endif
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"

#include "output.h"

#define GC_SCAN_NAME "GPU Cluster Scan"

/* The functions whose rows the node returns (dbscan.c, kmeans.c, dpeaks.c, hdbscan.c). */
extern Datum gpu_dbscan(PG_FUNCTION_ARGS);
extern Datum gpu_kmeans(PG_FUNCTION_ARGS);
extern Datum gpu_kmeans_assign(PG_FUNCTION_ARGS);
extern Datum gpu_density_peaks(PG_FUNCTION_ARGS);
extern Datum gpu_hdbscan(PG_FUNCTION_ARGS);

static bool gc_custom_scan_guc = true;
static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

typedef struct GcScanState
{
	CustomScanState css;
	FuncExpr   *funcexpr;
	FmgrInfo	flinfo;
	List	   *args;			/* ExprState of each argument */
	MemoryContext cxt;			/* the call's memory: the result arrays */
	GcRowsSink	sink;
	bool		computed;
	int64		pos;			/* 1-based row last returned; 0 before, nrows + 1 after */
	int64		computations;

	/*
	 * Without quals and with a target list of the row's columns only (count(*)
	 * has none), each output column is filled straight from the result
	 * arrays into the projection's slot: no scan tuple, no projection.
	 */
	bool		direct;
	int			ndirect;
	int		   *direct_col;		/* [ndirect] the row's column of each output column (0: id) */

	uint32		unread;			/* the row's columns no expression of the plan reads (GcRowsSink) */
} GcScanState;

static Plan *PlanScan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
					  List *tlist, List *clauses, List *custom_plans);
static Node *CreateScanState(CustomScan *cscan);
static void BeginScan(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *ExecScanNode(CustomScanState *node);
static void EndScan(CustomScanState *node);
static void ReScanNode(CustomScanState *node);
static void ExplainScan(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods path_methods = {
	.CustomName = GC_SCAN_NAME,
	.PlanCustomPath = PlanScan,
};

static const CustomScanMethods scan_methods = {
	.CustomName = GC_SCAN_NAME,
	.CreateCustomScanState = CreateScanState,
};

static const CustomExecMethods exec_methods = {
	.CustomName = GC_SCAN_NAME,
	.BeginCustomScan = BeginScan,
	.ExecCustomScan = ExecScanNode,
	.EndCustomScan = EndScan,
	.ReScanCustomScan = ReScanNode,
	.ExplainCustomScan = ExplainScan,
};

/* Whether funcid is one of the functions the node serves. */
static bool
ServedFunction(Oid funcid)
{
	FmgrInfo	f;

	/* a SECURITY DEFINER or SET function goes through fmgr_security_definer: not served */
	fmgr_info(funcid, &f);
	return f.fn_addr == gpu_dbscan || f.fn_addr == gpu_kmeans ||
		f.fn_addr == gpu_kmeans_assign || f.fn_addr == gpu_density_peaks ||
		f.fn_addr == gpu_hdbscan;
}

/* The call of a served function that is the whole of rte, or NULL. */
static FuncExpr *
ServedCall(RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fe;

	if (rte->rtekind != RTE_FUNCTION || rte->funcordinality ||
		list_length(rte->functions) != 1)
		return NULL;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return NULL;
	fe = (FuncExpr *) rtfunc->funcexpr;
	if (!fe->funcretset || rtfunc->funccolnames != NIL || !ServedFunction(fe->funcid))
		return NULL;
	return fe;
}

/* Whether exprs need the whole row of relation relid. */
static bool
NeedsWholeRow(List *exprs, Index relid)
{
	Bitmapset  *attrs = NULL;

	pull_varattnos((Node *) exprs, relid, &attrs);
	return bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
}

/* set_rel_pathlist_hook: adds the GPU Cluster Scan path where it serves. */
static void
SetRelPathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	FuncExpr   *fe;
	CustomPath *cp;
	Path	   *fpath = NULL;
	ListCell   *lc;
	List	   *quals = NIL;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);
	if (!gc_custom_scan_guc || rel->reloptkind != RELOPT_BASEREL ||
		rel->lateral_relids != NULL || (fe = ServedCall(rte)) == NULL)
		return;
	foreach(lc, rel->baserestrictinfo)
		quals = lappend(quals, lfirst_node(RestrictInfo, lc)->clause);
	if (NeedsWholeRow(rel->reltarget->exprs, rti) || NeedsWholeRow(quals, rti))
		return;
	foreach(lc, rel->pathlist)
	{
		Path	   *p = lfirst(lc);

		if (p->pathtype == T_FunctionScan && p->param_info == NULL)
			fpath = p;
	}
	if (fpath == NULL)
		return;

	cp = makeNode(CustomPath);
	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;	/* never in a parallel worker */
	cp->path.parallel_workers = 0;
	cp->path.rows = fpath->rows;
	/* the same work, less the tuplestore's write and read of each row */
	cp->path.startup_cost = fpath->startup_cost;
	cp->path.total_cost = Max(fpath->startup_cost,
							  fpath->total_cost - 0.5 * cpu_tuple_cost * fpath->rows);
	cp->path.pathkeys = NIL;
	cp->flags = CUSTOMPATH_SUPPORT_BACKWARD_SCAN;
	cp->methods = &path_methods;
	add_path(rel, &cp->path);
}

/*
 * The plan: the scan tuple is the function's whole row (custom_scan_tlist,
 * one Var per column), the target list and quals refer to it, and
 * custom_exprs holds the call.
 */
static Plan *
PlanScan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
		 List *tlist, List *clauses, List *custom_plans)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	RangeTblFunction *rtfunc = linitial_node(RangeTblFunction, rte->functions);
	CustomScan *cscan = makeNode(CustomScan);
	TupleDesc	desc;
	List	   *scan_tlist = NIL;

	if (get_expr_result_type(rtfunc->funcexpr, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Var		   *v = makeVar(rel->relid, i + 1, att->atttypid, att->atttypmod,
								att->attcollation, 0);

		scan_tlist = lappend(scan_tlist,
							 makeTargetEntry((Expr *) v, i + 1, pstrdup(NameStr(att->attname)), false));
	}
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = extract_actual_clauses(clauses, false);
	cscan->scan.scanrelid = 0;
	cscan->flags = best_path->flags;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = list_make1(copyObject(rtfunc->funcexpr));
	cscan->custom_private = NIL;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = bms_make_singleton(rel->relid);
	cscan->methods = &scan_methods;
	return &cscan->scan.plan;
}

static Node *
CreateScanState(CustomScan *cscan)
{
	GcScanState *s = (GcScanState *) newNode(sizeof(GcScanState), T_CustomScanState);

	s->css.methods = &exec_methods;
#if PG_VERSION_NUM >= 160000
	s->css.slotOps = &TTSOpsVirtual;
#endif
	return (Node *) s;
}

/*
 * The direct path (GcScanState.direct), where the plan allows it: no quals,
 * a projection whose every entry is a Var of the scan tuple (custom_scan_tlist,
 * INDEX_VAR after set_plan_references).
 */
static void
SetDirect(GcScanState *s)
{
	Plan	   *plan = s->css.ss.ps.plan;
	int			natts = s->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor->natts;
	int			i = 0;
	ListCell   *lc;

	s->direct = false;
	if (plan->qual != NIL || s->css.ss.ps.ps_ProjInfo == NULL)
		return;
	s->direct_col = palloc(sizeof(int) * Max(list_length(plan->targetlist), 1));
	foreach(lc, plan->targetlist)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) te->expr;

		if (!IsA(v, Var) || v->varno != INDEX_VAR || v->varattno < 1 || v->varattno > natts)
			return;
		s->direct_col[i++] = v->varattno - 1;
	}
	s->ndirect = i;
	s->direct = true;
}

/*
 * Clears bit c of *unread for each column c of the row that a Var of the
 * scan tuple reads; a whole-row Var, or a Var of this level that is not of
 * the scan tuple (which the node's plans do not have), reads them all.
 */
static bool
ReadColumns(Node *node, uint32 *unread)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varlevelsup != 0)
			return false;
		if (v->varno != INDEX_VAR || v->varattno < 1)
			*unread = 0;
		else if (v->varattno <= 32)
			*unread &= ~((uint32) 1 << (v->varattno - 1));
		return false;
	}
	return expression_tree_walker(node, ReadColumns, (void *) unread);
}

/*
 * The row's columns that neither the target list nor the quals read: the
 * function may leave them out (GcRowsColumnRead).
 */
static uint32
UnreadColumns(Plan *plan, int natts)
{
	uint32		unread = natts >= 32 ? ~(uint32) 0 : (((uint32) 1 << natts) - 1);

	ReadColumns((Node *) plan->targetlist, &unread);
	ReadColumns((Node *) plan->qual, &unread);
	return unread;
}

/* As ExecInitFunctionResultSet: EXECUTE privilege, the hook, fmgr and the arguments. */
static void
BeginScan(CustomScanState *node, EState *estate, int eflags)
{
	GcScanState *s = (GcScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	AclResult	aclresult;

	s->funcexpr = linitial_node(FuncExpr, cscan->custom_exprs);
#if PG_VERSION_NUM >= 160000
	aclresult = object_aclcheck(ProcedureRelationId, s->funcexpr->funcid, GetUserId(), ACL_EXECUTE);
#else
	aclresult = pg_proc_aclcheck(s->funcexpr->funcid, GetUserId(), ACL_EXECUTE);
#endif
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(s->funcexpr->funcid));
	InvokeFunctionExecuteHook(s->funcexpr->funcid);
	fmgr_info_cxt(s->funcexpr->funcid, &s->flinfo, estate->es_query_cxt);
	fmgr_info_set_expr((Node *) s->funcexpr, &s->flinfo);
	s->args = ExecInitExprList(s->funcexpr->args, &node->ss.ps);
	s->cxt = AllocSetContextCreate(estate->es_query_cxt, "gpuclust scan",
								   ALLOCSET_DEFAULT_SIZES);
	SetDirect(s);
	s->unread = UnreadColumns(node->ss.ps.plan, node->ss.ss_ScanTupleSlot->tts_tupleDescriptor->natts);
}

/* Runs the function into the sink: the result arrays, in s->cxt. */
static void
Compute(GcScanState *s)
{
	ExprContext *econtext = s->css.ss.ps.ps_ExprContext;
	int			nargs = list_length(s->args);
	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
	MemoryContext old;
	bool		anynull = false;
	int			i = 0;
	ListCell   *lc;

	MemoryContextReset(s->cxt);
	memset(&s->sink, 0, sizeof(s->sink));
	s->sink.unread = s->unread;
	s->sink.node.type = T_ExtensibleNode;
	s->sink.node.extnodename = GC_ROWS_SINK;
	old = MemoryContextSwitchTo(s->cxt);
	InitFunctionCallInfoData(*fcinfo, &s->flinfo, nargs, s->funcexpr->inputcollid,
							 (Node *) &s->sink, NULL);
	foreach(lc, s->args)
	{
		fcinfo->args[i].value = ExecEvalExpr(lfirst(lc), econtext, &fcinfo->args[i].isnull);
		anynull |= fcinfo->args[i].isnull;
		i++;
	}
	/* a strict function with a NULL argument returns no rows, as in a Function Scan */
	if (!(s->flinfo.fn_strict && anynull))
	{
		PgStat_FunctionCallUsage fcu;

		pgstat_init_function_usage(fcinfo, &fcu);
		(void) FunctionCallInvoke(fcinfo);
		pgstat_end_function_usage(&fcu, true);
		if (!s->sink.filled)
			elog(ERROR, "function %u returned no rows to the GPU Cluster Scan, please report a bug",
				 s->funcexpr->funcid);
	}
	MemoryContextSwitchTo(old);
	s->computed = true;
	s->computations++;
	s->pos = 0;
}

/* Moves s->pos one row in the executor's direction; false at either end (computes first). */
static bool
Advance(GcScanState *s)
{
	int64		nrows;

	if (!s->computed)
		Compute(s);
	nrows = s->sink.filled ? s->sink.rows.nrows : 0;
	if (ScanDirectionIsBackward(s->css.ss.ps.state->es_direction))
	{
		if (s->pos <= 1)
		{
			s->pos = 0;
			return false;
		}
		s->pos--;
	}
	else
	{
		if (s->pos >= nrows)
		{
			s->pos = nrows + 1;
			return false;
		}
		s->pos++;
	}
	return true;
}

/* The next row in the executor's direction, as a virtual tuple; an empty slot at either end. */
static TupleTableSlot *
NextRow(ScanState *ss)
{
	GcScanState *s = (GcScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	ExecClearTuple(slot);
	if (!Advance(s))
		return slot;
	GcRowsFill(&s->sink.rows, s->pos - 1, slot->tts_values, slot->tts_isnull);
	return ExecStoreVirtualTuple(slot);
}

/* The direct path: the next row's output columns into the projection's slot. */
static TupleTableSlot *
NextRowDirect(GcScanState *s)
{
	TupleTableSlot *slot = s->css.ss.ps.ps_ProjInfo->pi_state.resultslot;

	CHECK_FOR_INTERRUPTS();		/* as ExecScanFetch does for every row */
	ExecClearTuple(slot);
	if (!Advance(s))
		return slot;
	for (int c = 0; c < s->ndirect; c++)
		GcRowsFillColumn(&s->sink.rows, s->pos - 1, s->direct_col[c], &slot->tts_values[c],
						 &slot->tts_isnull[c]);
	return ExecStoreVirtualTuple(slot);
}

static bool
RecheckRow(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
ExecScanNode(CustomScanState *node)
{
	GcScanState *s = (GcScanState *) node;

	/* (an EvalPlanQual recheck, which the planner hook's shapes never need, takes ExecScan's way) */
	if (s->direct && node->ss.ps.state->es_epq_active == NULL)
		return NextRowDirect(s);
	return ExecScan(&node->ss, NextRow, RecheckRow);
}

static void
EndScan(CustomScanState *node)
{
	GcScanState *s = (GcScanState *) node;

	MemoryContextDelete(s->cxt);
	s->cxt = NULL;
}

/* New parameter values: computes again on the next row; else rewinds. */
static void
ReScanNode(CustomScanState *node)
{
	GcScanState *s = (GcScanState *) node;

	if (node->ss.ps.chgParam != NULL)
		s->computed = false;
	s->pos = 0;
	ExecScanReScan(&node->ss);
}

/*
 * EXPLAIN: the function; with VERBOSE the call; with ANALYZE the device,
 * the input and, with TIMING, the phases as gpuclust.timing reports them.
 */
static void
ExplainScan(CustomScanState *node, List *ancestors, ExplainState *es)
{
	GcScanState *s = (GcScanState *) node;
	const GcRowsSink *k = &s->sink;

	ExplainPropertyText("Function", get_func_name(s->funcexpr->funcid), es);
	if (es->verbose)
	{
		List	   *cxt = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan, ancestors);

		ExplainPropertyText("Call", deparse_expression((Node *) s->funcexpr, cxt, false, false), es);
	}
	if (!es->analyze || !k->filled)
		return;
	ExplainPropertyText("Device", k->used_gpu ? "gpu" : "cpu", es);
	ExplainPropertyInteger("Input Rows", NULL, k->rows.nrows, es);
	ExplainPropertyInteger("Features", NULL, k->d, es);
	ExplainPropertyInteger("Computations", NULL, s->computations, es);
	{
		/* the columns the function left out, as the query reads none of them */
		TupleDesc	desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
		StringInfoData out;

		initStringInfo(&out);
		for (int c = 0; c < k->rows.ncols && c + 1 < desc->natts; c++)
			if (k->rows.col[c].kind == GC_COL_UNREAD)
				appendStringInfo(&out, "%s%s", out.len > 0 ? ", " : "",
								 NameStr(TupleDescAttr(desc, c + 1)->attname));
		if (out.len > 0)
			ExplainPropertyText("Not Computed", out.data, es);
	}
	if (es->timing)
	{
		ExplainPropertyFloat("Gather Time", "ms", k->gather_ms, 3, es);
		ExplainPropertyFloat("Compute Time", "ms", k->compute_ms, 3, es);
		for (int i = 0; k->rows.nrows > 0 && k->algorithm->phases != NULL && i < GC_PHASES; i++)
			if (k->algorithm->phases[i] != NULL)
			{
				char		label[64];

				snprintf(label, sizeof(label), "Phase %s", k->algorithm->phases[i]);
				ExplainPropertyFloat(label, "ms", k->timing.phase_ms[i], 3, es);
			}
	}
}

/* Registers the node and the hook; defines gpuclust.custom_scan. */
void
GcScanInit(void)
{
	DefineCustomBoolVariable("gpuclust.custom_scan",
							 "Returns the rows of a clustering function that is a whole FROM item with the GPU Cluster Scan node.",
							 "The node reads the result arrays directly; off: the rows go through a tuplestore, as for any set-returning function.",
							 &gc_custom_scan_guc, true, PGC_USERSET, 0, NULL, NULL, NULL);
	RegisterCustomScanMethods(&scan_methods);
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = SetRelPathlist;
}
