/*
 * pgather.c
 *    The parallel gather: when the user's query is a plain scan of one table
 *    or materialized view, gpuclust reads the heap with its own parallel
 *    workers instead of running the plan on the backend's one thread, as
 *    PostgreSQL's parallel CREATE INDEX (nbtsort.c) and pgvector's parallel
 *    HNSW build do: a ParallelContext, a parallel table scan, and the rows
 *    written to shared memory.
 *
 * The plan taken is a SeqScan (with or without a filter) of a heap table or
 * materialized view whose output columns are column references or casts of
 * them, and nothing above it; or, for a query with an ORDER BY of columns of
 * the table whose first ones hold a unique key (UniquePrefix), such a plan of
 * the query without its ORDER BY (whatever the plan with it: a Sort or an
 * Index Scan), the rows then sorted on their keys.  Each participant (the workers and the leader)
 * evaluates the plan's filter and output columns on the tuples of its blocks
 * and hands each row to the serial gather's own DestReceiver
 * (GatherReceive), so the input contract is checked by the same code; it
 * keeps each row's TID beside it.  A worker writes its rows to a dynamic
 * shared memory area in chunks as it reads; the leader keeps its own.  The
 * parts, each in block order, are then merged by TID into the row buffers,
 * copied by threads: the rows of a serial scan that starts at block 0, in
 * its order.  With an ORDER BY each row also keeps its key as normalized
 * 64-bit words (OrderWords), and the rows in TID order are sorted on them
 * by a stable radix sort (OrderRows): the serial plan's order, which is
 * defined because the key is unique for the snapshot.  Where the key is the
 * row id itself (ORDER BY id of an integer primary key), the words are
 * computed from the ids instead of kept (IdWord).  Each participant notes
 * whether its rows came in key order; where every one did and each part's
 * rows follow the rows before them in the key order too, as in a table
 * filled in key order, nothing is sorted and no pass over the keys is made
 * (RunsAscending).  Where the key is one word whose values span at most a
 * few times as many as the rows (a serial or identity key, scattered in the
 * table), each row is copied straight to its place, its rank read from a
 * bitmap of the keys present, instead of sorted (DenseOrder).
 *
 * Errors: the first offending row must be the one the serial gather names
 * (in the scan's order, or the ORDER BY's), and a participant may meet a
 * later one first.  So an error of the kind a
 * row can raise (GcParallelGatherRetries) makes the caller roll back and
 * gather serially, which raises the serial error itself; cancel and any
 * other error is the caller's at once.  Parts that disagree on the length of
 * the feature arrays make the caller gather serially as well.
 *
 * Visibility is the caller's: the scan's snapshot is the active one,
 * serialized for the workers, which run as the caller's user.  The
 * executor's permission check runs in the leader before any worker starts
 * (where it fails, the serial gather raises the error), and a relation with row-level security for the caller is left to the
 * serial gather.
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "compat.h"

#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/xact.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "portability/instr_time.h"
#include "storage/bufmgr.h"
#include "storage/lwlock.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/dsa.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "buffer.h"
#include "core.h"
#include "gpuclust.h"
#include "metric.h"
#include "gather.h"
#include "pgather.h"
#include "receiver.h"
#include "sort.h"
#include "tuning.h"

bool		gc_parallel_gather_guc = true;

/* shm_toc keys of the parallel gather's segment */
#define PG_KEY_SHARED	UINT64CONST(0x6770670000000001)
#define PG_KEY_SCAN		UINT64CONST(0x6770670000000002)
#define PG_KEY_TLIST	UINT64CONST(0x6770670000000003)
#define PG_KEY_QUAL		UINT64CONST(0x6770670000000004)
#define PG_KEY_DSA		UINT64CONST(0x6770670000000005)

/*
 * A worker's rows go to the area in chunks of about CHUNK_BYTES as it reads
 * them, each in block order and after the one before: its local buffer stays
 * small and is written once more, into the chunk.
 */
#define CHUNK_BYTES ((Size) 8 << 20)

/* The planner's estimated row width (bytes) above which the gather stays serial. */
#define PGATHER_MAX_WIDTH 512

typedef struct GcChunk
{
	dsa_pointer next;			/* the worker's next chunk, or InvalidDsaPointer */
	int64		n;
	/* then ids [n], keys [n], x [n, d] */
} GcChunk;

/* What a worker gathered: n rows of d features in its chunks. */
typedef struct GcPart
{
	int64		n;
	int32		d;
	int32		dtype;
	bool		ascending;		/* its rows' ORDER BY keys never decrease (in scan order) */
	uint64		minw;			/* the least and greatest first word of its rows' keys */
	uint64		maxw;
	dsa_pointer first;			/* the first chunk, InvalidDsaPointer if none */
} GcPart;

/* How a column of the ORDER BY becomes a normalized key: its type's order as that of a uint64. */
typedef enum GcKeyKind
{
	KEY_INT2,
	KEY_INT4,					/* int4, date */
	KEY_INT8,					/* int8, timestamp, timestamptz */
	KEY_OID
} GcKeyKind;

/* A column of the ORDER BY that decides the order. */
typedef struct GcOrderKey
{
	AttrNumber	attnum;			/* of the table */
	int16		kind;			/* GcKeyKind */
	bool		desc;
	bool		nulls_first;
	bool		nullable;		/* a word for NULL before the value's word */
} GcOrderKey;

/*
 * The order of an ordered scan: its first nkeys columns of the ORDER BY,
 * which are unique for the snapshot, as nwords uint64 words a row (a
 * nullable column takes two).  nkeys = 0: the physical order.
 */
typedef struct GcOrder
{
	int			nkeys;
	int			nwords;
	int			stored;			/* words a row keeps beside it: nwords, or 0 where from_ids */
	bool		from_ids;		/* one NOT NULL integer key that is the row id: its word is the id's */
	GcOrderKey	keys[INDEX_MAX_KEYS];
} GcOrder;

typedef struct GcPGShared
{
	Oid			relid;
	int			nparts;
	GcOrder		order;
	GcPart		parts[FLEXIBLE_ARRAY_MEMBER];	/* [nparts] by ParallelWorkerNumber */
} GcPGShared;

/* One participant's scan: the plan's filter and output columns, and the serial gather's receiver. */
typedef struct PartScan
{
	Relation	rel;
	ExprContext *econtext;
	ProjectionInfo *proj;
	ExprState  *qual;
	bool		direct;			/* no filter, the output columns are the table's first: no projection */
	TupleTableSlot *scanslot;
	TupleTableSlot *rslot;
	GatherReceiver st;
	GcInput		in;
	uint64	   *keys;			/* [in.n] the TIDs as block << 16 | offset */
	int64		keycap;
	const GcOrder *order;		/* the ORDER BY's keys, nwords 0 for none */
	uint64	   *okeys;			/* [in.n, order->stored] their normalized words */
	bool		ascending;		/* every row's words so far >= the row's before (lastw) */
	bool		any;			/* a row was kept: lastw holds its words */
	uint64		minw;			/* the least and greatest first word so far (DenseOrder) */
	uint64		maxw;
	uint64		lastw[2 * INDEX_MAX_KEYS];
	/* a worker's: the area its chunks go to, the rows of a chunk, the last chunk */
	dsa_area   *area;
	int64		flush_rows;
	dsa_pointer last;
	GcPart	   *part;
} PartScan;

/* One part to merge: rows in block order. */
typedef struct PartRows
{
	int64		n;
	int32		d;
	const int64 *ids;
	const uint64 *keys;
	const uint64 *okeys;		/* [n, stored] the ORDER BY's words, or NULL (RowWord) */
	bool		ascending;		/* its rows' words never decrease from a row to the next */
	uint64		minw;			/* its participant's least and greatest first word */
	uint64		maxw;
	const char *x;
} PartRows;

PGDLLEXPORT void GcParallelGatherMain(dsm_segment *seg, shm_toc *toc);

/* Defines gpuclust.parallel_gather. */
void
GcParallelGatherDefineGucs(void)
{
	DefineCustomBoolVariable("gpuclust.parallel_gather",
							 "Reads a query that scans one table with gpuclust's own parallel workers.",
							 "Taken for a sequential scan of a table or materialized view, optionally "
							 "filtered, returning columns or casts of them, optionally ordered by a unique key, "
							 "when max_parallel_workers_per_gather and the table's size give workers; the rows "
							 "come in the order of the serial plan.",
							 &gc_parallel_gather_guc, true,
							 PGC_USERSET, 0, NULL, NULL, NULL);
}

/* Whether an error of the parallel gather could come out differently from the serial gather. */
bool
GcParallelGatherRetries(int sqlerrcode)
{
	int			category = ERRCODE_TO_CATEGORY(sqlerrcode);

	/* what a row can raise: the input contract, a cast, the filter */
	if (category == ERRCODE_DATA_EXCEPTION ||
		category == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION ||
		category == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION ||
		category == ERRCODE_FEATURE_NOT_SUPPORTED)
		return true;
	/* and what the parallel gather's larger footprint can (shared memory, the parts) */
	return sqlerrcode == ERRCODE_DATA_CORRUPTED || sqlerrcode == ERRCODE_OUT_OF_MEMORY ||
		sqlerrcode == ERRCODE_DISK_FULL;
}

/* A column reference of the scanned relation, or a cast of one: what the serial plan would compute. */
static bool
SimpleColumn(Node *e, Index scanrelid)
{
	if (e == NULL)
		return false;
	switch (nodeTag(e))
	{
		case T_Var:
			{
				Var		   *v = (Var *) e;

				return v->varno == scanrelid && v->varlevelsup == 0 && v->varattno > 0;
			}
		case T_RelabelType:
			return SimpleColumn((Node *) ((RelabelType *) e)->arg, scanrelid);
		case T_CoerceViaIO:
			return SimpleColumn((Node *) ((CoerceViaIO *) e)->arg, scanrelid);
		case T_ArrayCoerceExpr:
			return SimpleColumn((Node *) ((ArrayCoerceExpr *) e)->arg, scanrelid);
		case T_FuncExpr:
			{
				FuncExpr   *f = (FuncExpr *) e;
				ListCell   *lc;

				if ((f->funcformat != COERCE_EXPLICIT_CAST && f->funcformat != COERCE_IMPLICIT_CAST) ||
					f->args == NIL || f->funcretset)
					return false;
				if (!SimpleColumn((Node *) linitial(f->args), scanrelid))
					return false;
				/* a cast's other arguments are constants: the typmod, explicit or not */
				for_each_from(lc, f->args, 1)
					if (!IsA(lfirst(lc), Const))
					return false;
				return true;
			}
		default:
			return false;
	}
}

/*
 * Whether the checkAsUser of rte is subject to row-level security on its
 * relation.  Not where it bypasses the policies (RLS_NONE_ENV: the table's
 * owner, a role with BYPASSRLS): the plan, made just now, then has none.
 */
static bool
HasRls(PlannedStmt *stmt, RangeTblEntry *rte)
{
	Oid			checkAsUser;

#if PG_VERSION_NUM >= 160000
	checkAsUser = rte->perminfoindex != 0 ?
		getRTEPermissionInfo(stmt->permInfos, rte)->checkAsUser : InvalidOid;
#else
	checkAsUser = rte->checkAsUser;
#endif
	return check_enable_rls(rte->relid, checkAsUser, true) == RLS_ENABLED;
}

/*
 * The relation a plan scans when it is the shape the parallel gather takes:
 * a SeqScan alone, parallel safe (where check_safe: the caller checked the
 * query otherwise), without subplans or parameters, whose
 * natts output columns are columns of a table or materialized view or casts
 * of them, no relation of the statement under row-level security for the
 * caller.
 * InvalidOid otherwise.
 */
static Oid
ScanShape(PlannedStmt *stmt, int natts, bool check_safe)
{
	Plan	   *plan = stmt->planTree;
	Scan	   *scan;
	RangeTblEntry *rte;
	ListCell   *lc;

	if (stmt->commandType != CMD_SELECT || stmt->utilityStmt != NULL || plan == NULL ||
		!IsA(plan, SeqScan) || (check_safe && !plan->parallel_safe) ||
		plan->lefttree != NULL || plan->righttree != NULL || plan->initPlan != NIL ||
		stmt->subplans != NIL || stmt->paramExecTypes != NIL || stmt->rowMarks != NIL)
		return InvalidOid;
	scan = (Scan *) plan;
	if (list_length(plan->targetlist) != natts)
		return InvalidOid;
	foreach(lc, plan->targetlist)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		if (te->resjunk || !SimpleColumn((Node *) te->expr, scan->scanrelid))
			return InvalidOid;
	}
	if (scan->scanrelid < 1 || scan->scanrelid > list_length(stmt->rtable))
		return InvalidOid;
	rte = rt_fetch(scan->scanrelid, stmt->rtable);
	if (rte->rtekind != RTE_RELATION || rte->tablesample != NULL ||
		(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_MATVIEW))
		return InvalidOid;
	/* every relation the statement names (a view's too): none under row-level security */
	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *r = lfirst_node(RangeTblEntry, lc);

		if (r->rtekind == RTE_RELATION && HasRls(stmt, r))
			return InvalidOid;
	}
	return rte->relid;
}

/* A column of the ORDER BY, as the query gives it. */
typedef struct SortCol
{
	AttrNumber	attnum;
	int			kind;			/* GcKeyKind, -1 for a type without one */
	bool		desc;
	bool		nulls_first;
	Oid			opfamily;		/* of its btree order, InvalidOid where not its type's default */
} SortCol;

/* The normalized key of a type whose default btree order is that of an integer, -1 for another type. */
static int
KeyKind(Oid type)
{
	switch (type)
	{
		case INT2OID:
			return KEY_INT2;
		case INT4OID:
		case DATEOID:
			return KEY_INT4;
		case INT8OID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return KEY_INT8;
		case OIDOID:
			return KEY_OID;
		default:
			return -1;
	}
}

/*
 * For a query that reads one table with an ORDER BY of its columns: the
 * query, the ORDER BY's columns in cols [INDEX_MAX_KEYS] and their count in
 * *ncols, and the table's range table index in *varno.  NULL for any other
 * query: the ORDER BY is absent or holds anything but columns of the one
 * table of the FROM clause, or the query groups, aggregates, limits or
 * locks its rows.
 */
static Query *
OrderedQuery(CachedPlanSource *ps, SortCol *cols, int *ncols, Index *varno)
{
	Query	   *q;
	ListCell   *lc;
	int			n = 0;

	*varno = 0;
	if (list_length(ps->query_list) != 1)
		return NULL;
	q = linitial_node(Query, ps->query_list);
	if (q->commandType != CMD_SELECT || q->utilityStmt != NULL || q->sortClause == NIL ||
		list_length(q->sortClause) > INDEX_MAX_KEYS || q->setOperations != NULL ||
		q->groupClause != NIL || q->groupingSets != NIL || q->distinctClause != NIL ||
		q->windowClause != NIL || q->havingQual != NULL || q->hasAggs || q->hasWindowFuncs ||
		q->hasTargetSRFs || q->limitCount != NULL || q->limitOffset != NULL ||
		q->rowMarks != NIL || q->hasForUpdate || q->cteList != NIL ||
		q->jointree == NULL || list_length(q->jointree->fromlist) != 1 ||
		!IsA(linitial(q->jointree->fromlist), RangeTblRef))
		return NULL;
	foreach(lc, q->sortClause)
	{
		SortGroupClause *sc = lfirst_node(SortGroupClause, lc);
		TargetEntry *te = get_sortgroupclause_tle(sc, q->targetList);
		Var		   *v = (Var *) te->expr;
		Oid			opfamily;
		Oid			opcintype;
		Oid			opclass;
#if PG_VERSION_NUM >= 180000
		CompareType strategy;
#else
		int16		strategy;
#endif

		if (!IsA(v, Var) || v->varlevelsup != 0 || v->varattno <= 0 ||
			v->varno != ((RangeTblRef *) linitial(q->jointree->fromlist))->rtindex ||
			v->varno > list_length(q->rtable) ||
			rt_fetch(v->varno, q->rtable)->rtekind != RTE_RELATION)
			return NULL;
		*varno = v->varno;
		cols[n].attnum = v->varattno;
		cols[n].kind = KeyKind(v->vartype);
		cols[n].nulls_first = sc->nulls_first;
		cols[n].desc = false;
		cols[n].opfamily = InvalidOid;
		opclass = GetDefaultOpClass(v->vartype, BTREE_AM_OID);
		if (cols[n].kind >= 0 && OidIsValid(opclass) &&
			get_ordering_op_properties(sc->sortop, &opfamily, &opcintype, &strategy) &&
			opcintype == v->vartype && opfamily == get_opclass_family(opclass))
		{
			cols[n].opfamily = opfamily;
#if PG_VERSION_NUM >= 180000
			cols[n].desc = strategy == COMPARE_GT;
#else
			cols[n].desc = strategy == BTGreaterStrategyNumber;
#endif
		}
		n++;
	}
	*ncols = n;
	return q;
}

/*
 * The plan of q (of OrderedQuery) without its ORDER BY, planned now.  How
 * the planner sorts (an Index Scan or a Sort) does not matter: the plan
 * without the ORDER BY returns the same rows.  NULL where something in the
 * query is not parallel safe.
 */
static PlannedStmt *
UnorderedPlan(CachedPlanSource *ps, Query *q)
{
	List	   *tlist = NIL;
	ListCell   *lc;

	/* the query without its ORDER BY, nor the columns that only the ORDER BY reads */
	q = copyObject(q);
	q->sortClause = NIL;
	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		if (te->resjunk)
		{
			if (te->ressortgroupref == 0 || !IsA(te->expr, Var))
				return NULL;
			continue;
		}
		te->ressortgroupref = 0;
		tlist = lappend(tlist, te);
	}
	q->targetList = tlist;

	/*
	 * Planned serially, so that the plan is a scan and not a Gather; every
	 * function of the query parallel safe instead, as the planner finds
	 * where it may plan workers (max_parallel_hazard).
	 */
	if (max_parallel_hazard(q) != PROPARALLEL_SAFE)
		return NULL;
	return pg_plan_query(q, ps->query_string, 0, NULL);
}

/*
 * The number of leading columns of the ORDER BY (cols [ncols]) whose values
 * are unique among the rows of rel for the caller's snapshot: the first
 * that hold every key column of a unique btree index of the table that is
 * valid, immediate (not deferrable), not partial and on columns (no
 * expression), each sorted by the index's own operator family, and NOT
 * NULL or under NULLS NOT DISTINCT.  0 where there is none.
 */
static int
UniquePrefix(Relation rel, const SortCol *cols, int ncols)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	int			best = 0;

	foreach(lc, indexes)
	{
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index ix = irel->rd_index;
		bool		ok;
		int			need = 0;

		ok = ix->indisunique && ix->indimmediate && ix->indisvalid && ix->indislive &&
			irel->rd_rel->relam == BTREE_AM_OID &&
			heap_attisnull(irel->rd_indextuple, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(irel->rd_indextuple, Anum_pg_index_indexprs, NULL);
		for (int i = 0; ok && i < IndexRelationGetNumberOfKeyAttributes(irel); i++)
		{
			AttrNumber	a = ix->indkey.values[i];
			int			at = -1;
			bool		nulls_ok;

			if (a <= 0)
			{
				ok = false;		/* a system column or an expression */
				break;
			}
			nulls_ok = TupleDescAttr(RelationGetDescr(rel), a - 1)->attnotnull;
#if PG_VERSION_NUM >= 150000
			nulls_ok |= ix->indnullsnotdistinct;
#endif
			for (int j = 0; j < ncols && at < 0; j++)
				if (cols[j].attnum == a)
					at = j;
			/* the first place of the column in the ORDER BY is the one that sorts */
			ok = at >= 0 && cols[at].opfamily == irel->rd_opfamily[i] && nulls_ok;
			need = Max(need, at + 1);
		}
		index_close(irel, AccessShareLock);
		if (ok && (best == 0 || need < best))
			best = need;
	}
	list_free(indexes);
	/* each column up to there sorted by a normalized key */
	for (int j = 0; j < best; j++)
		if (cols[j].kind < 0 || !OidIsValid(cols[j].opfamily))
			return 0;
	return best;
}

/* The workers for a scan of rel: PostgreSQL's rule for a parallel scan of it (compute_parallel_worker). */
static int
WorkersFor(Relation rel)
{
	RelOptInfo	fake;

	memset(&fake, 0, sizeof(fake));
	fake.type = T_RelOptInfo;
	fake.reloptkind = RELOPT_BASEREL;
	fake.rel_parallel_workers = RelationGetParallelWorkers(rel, -1);
	return compute_parallel_worker(&fake, (double) RelationGetNumberOfBlocks(rel), -1,
								   max_parallel_workers_per_gather);
}

/* Sets up a participant's scan in cxt: the expressions and the serial gather's receiver. */
static void
PartBegin(PartScan *p, Relation rel, List *tlist, List *qual, const GcOrder *order, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	TupleDesc	rdesc;

	memset(p, 0, sizeof(*p));
	p->rel = rel;
	p->order = order;
	p->ascending = true;
	p->minw = PG_UINT64_MAX;
	p->maxw = 0;
	p->econtext = CreateStandaloneExprContext();
	rdesc = ExecTypeFromTL(tlist);
	p->rslot = MakeSingleTupleTableSlot(rdesc, &TTSOpsVirtual);
	p->scanslot = table_slot_create(rel, NULL);
	p->proj = ExecBuildProjectionInfo(tlist, p->econtext, p->rslot, NULL, RelationGetDescr(rel));
	p->qual = ExecInitQual(qual, NULL);
	p->direct = qual == NIL;
	for (int i = 0; p->direct && i < list_length(tlist); i++)
	{
		TargetEntry *te = list_nth_node(TargetEntry, tlist, i);

		p->direct = IsA(te->expr, Var) && ((Var *) te->expr)->varattno == i + 1;
	}

	p->st.pub.receiveSlot = GatherReceive;
	p->st.pub.rStartup = GatherStartup;
	p->st.pub.rShutdown = GatherShutdown;
	p->st.pub.rDestroy = GatherDestroy;
	p->st.pub.mydest = DestNone;
	p->st.in = &p->in;
	p->st.outcxt = cxt;
	p->st.tmpcxt = AllocSetContextCreate(cxt, "gpuclust parallel gather",
										 GATHER_TMP_BYTES, GATHER_TMP_BYTES, GATHER_TMP_BYTES);
	CheckColumns(&p->st, rdesc);
	MemoryContextSwitchTo(old);
}

/* A worker: its rows so far into a new chunk of the area, and its buffers empty again. */
static void
PartFlush(PartScan *p)
{
	Size		ibytes = (Size) p->in.n * sizeof(int64);
	Size		obytes = ibytes * p->order->stored;
	Size		xbytes = (Size) p->in.n * p->in.d * gc_dtype_size(p->in.dtype);
	dsa_pointer dp;
	GcChunk    *c;
	char	   *dst;

	if (p->in.n == 0)
		return;
	dp = dsa_allocate_extended(p->area, sizeof(GcChunk) + 2 * ibytes + obytes + xbytes, DSA_ALLOC_HUGE);
	c = dsa_get_address(p->area, dp);
	c->next = InvalidDsaPointer;
	c->n = p->in.n;
	dst = (char *) (c + 1);
	memcpy(dst, p->in.ids, ibytes);
	memcpy(dst + ibytes, p->keys, ibytes);
	if (obytes > 0)
		memcpy(dst + 2 * ibytes, p->okeys, obytes);
	memcpy(dst + 2 * ibytes + obytes, p->in.x, xbytes);
	if (DsaPointerIsValid(p->last))
		((GcChunk *) dsa_get_address(p->area, p->last))->next = dp;
	else
		p->part->first = dp;
	p->last = dp;
	p->part->n += p->in.n;
	/* the feature count stays (in.d): the rows that follow are checked against it */
	p->in.n = 0;
}

/* The order of two rows' normalized words (n each): < 0, 0 or > 0 as a sorts before, with or after b. */
static inline int
CompareWords(const uint64 *a, const uint64 *b, int n)
{
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* The word of an ORDER BY that is the row id (from_ids): OrderWords' for that id. */
static inline uint64
IdWord(const GcOrder *order, int64 id)
{
	uint64		word = (uint64) id ^ (UINT64CONST(1) << 63);

	return order->keys[0].desc ? ~word : word;
}

/* Word w of row r of a part: its stored word, or its id's (from_ids). */
static inline uint64
RowWord(const GcOrder *order, const PartRows *pr, int64 r, int w)
{
	if (order->from_ids)
		return IdWord(order, pr->ids[r]);
	return pr->okeys[r * order->stored + w];
}

/* The normalized words of a row's ORDER BY keys: their unsigned order is the btree order of the keys. */
static inline void
OrderWords(const GcOrder *order, TupleTableSlot *slot, uint64 *w)
{
	for (int k = 0; k < order->nkeys; k++)
	{
		const GcOrderKey *key = &order->keys[k];
		bool		isnull;
		Datum		v = slot_getattr(slot, key->attnum, &isnull);
		uint64		word = 0;

		if (key->nullable)
			*w++ = isnull == key->nulls_first ? 0 : 1;
		if (!isnull)
		{
			switch ((GcKeyKind) key->kind)
			{
				case KEY_INT2:
					word = (uint64) (int64) DatumGetInt16(v) ^ (UINT64CONST(1) << 63);
					break;
				case KEY_INT4:
					word = (uint64) (int64) DatumGetInt32(v) ^ (UINT64CONST(1) << 63);
					break;
				case KEY_INT8:
					word = (uint64) DatumGetInt64(v) ^ (UINT64CONST(1) << 63);
					break;
				case KEY_OID:
					word = (uint64) DatumGetObjectId(v);
					break;
			}
			if (key->desc)
				word = ~word;
		}
		*w++ = word;
	}
}

/* Reads the participant's blocks: each visible row that passes the filter, checked and kept with its TID. */
static void
PartRun(PartScan *p, ParallelTableScanDesc pscan)
{
	TableScanDesc scan = table_beginscan_parallel(p->rel, pscan);
	ExprContext *econtext = p->econtext;

	while (table_scan_getnextslot(scan, ForwardScanDirection, p->scanslot))
	{
		ItemPointer tid = &p->scanslot->tts_tid;

		/* on every tuple, as PostgreSQL's own scans: a row's filter may take long, or reject every row */
		CHECK_FOR_INTERRUPTS();
		if (!p->direct)
		{
			ResetExprContext(econtext);
			econtext->ecxt_scantuple = p->scanslot;
			if (p->qual != NULL && !ExecQual(p->qual, econtext))
				continue;
			ExecProject(p->proj);
		}
		if (p->in.n == p->keycap)
		{
			int64		cap = p->keycap == 0 ? 4096 : p->keycap * 2;

			p->keys = p->keys == NULL ?
				MemoryContextAllocHuge(p->st.outcxt, cap * sizeof(uint64)) :
				repalloc_huge(p->keys, cap * sizeof(uint64));
			if (p->order->stored > 0)
				p->okeys = p->okeys == NULL ?
					MemoryContextAllocHuge(p->st.outcxt, cap * p->order->stored * sizeof(uint64)) :
					repalloc_huge(p->okeys, cap * p->order->stored * sizeof(uint64));
			p->keycap = cap;
		}
		p->keys[p->in.n] = ((uint64) ItemPointerGetBlockNumber(tid) << 16) |
			ItemPointerGetOffsetNumber(tid);
		/* the table's own tuple where it is the query's row, as the serial scan hands it over */
		GatherReceive(p->direct ? p->scanslot : p->rslot, &p->st.pub);
		if (p->order->nwords > 0)
		{
			/*
			 * The row's keys, after GatherReceive (which appended the row):
			 * where the table's tuple is the row, its columns are deformed
			 * already.
			 */
			uint64		idword;
			uint64	   *w = &idword;

			if (p->order->from_ids)
				idword = IdWord(p->order, p->in.ids[p->in.n - 1]);
			else
			{
				w = p->okeys + (p->in.n - 1) * p->order->stored;
				OrderWords(p->order, p->scanslot, w);
			}
			/*
			 * Whether the participant's rows come in key order, checked here
			 * where the words are in cache: a table in key order then needs
			 * neither the sort nor a pass over every key (Merge).
			 */
			if (p->ascending && p->any && CompareWords(w, p->lastw, p->order->nwords) < 0)
				p->ascending = false;
			memcpy(p->lastw, w, sizeof(uint64) * p->order->nwords);
			/* the range of the first words, for the order by ranks (DenseOrder) */
			p->minw = Min(p->minw, w[0]);
			p->maxw = Max(p->maxw, w[0]);
			p->any = true;
		}
		if (p->area != NULL)
		{
			if (p->flush_rows == 0)
				p->flush_rows = Max(1024, CHUNK_BYTES / ((Size) p->in.d * gc_dtype_size(p->in.dtype) +
														 2 * sizeof(int64)));
			if (p->in.n >= p->flush_rows)
				PartFlush(p);
		}
	}
	table_endscan(scan);
	elog(DEBUG2, "gpuclust: parallel gather participant %d: " INT64_FORMAT " rows",
		 ParallelWorkerNumber, p->in.n + (p->part != NULL ? p->part->n : 0));
	ResetExprContext(econtext);
	ExecDropSingleTupleTableSlot(p->scanslot);
	p->scanslot = NULL;
	if (p->st.buffers != NULL)
		StopPrefault(&p->st.buffers->prefault);
}

/* The rows of a participant's scan as a part to merge. */
static void
PartRowsOf(PartScan *p, PartRows *out)
{
	out->n = p->in.n;
	out->d = p->in.d;
	out->ids = p->in.ids;
	out->keys = p->keys;
	out->okeys = p->okeys;
	out->ascending = p->ascending;
	out->minw = p->minw;
	out->maxw = p->maxw;
	out->x = p->in.x;
}

/* A worker: its part of the heap, then its rows into the area for the leader. */
void
GcParallelGatherMain(dsm_segment *seg, shm_toc *toc)
{
	GcPGShared *shared = shm_toc_lookup(toc, PG_KEY_SHARED, false);
	ParallelTableScanDesc pscan = shm_toc_lookup(toc, PG_KEY_SCAN, false);
	List	   *tlist = (List *) stringToNode(shm_toc_lookup(toc, PG_KEY_TLIST, false));
	List	   *qual = (List *) stringToNode(shm_toc_lookup(toc, PG_KEY_QUAL, false));
	dsa_area   *area = dsa_attach_in_place(shm_toc_lookup(toc, PG_KEY_DSA, false), seg);
	GcPart	   *part = &shared->parts[ParallelWorkerNumber];
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuclust parallel gather worker",
											  ALLOCSET_DEFAULT_SIZES);
	Relation	rel = table_open(shared->relid, AccessShareLock);
	PartScan	p;

	part->n = 0;
	part->first = InvalidDsaPointer;
	PartBegin(&p, rel, tlist, qual, &shared->order, cxt);
	p.area = area;
	p.part = part;
	p.last = InvalidDsaPointer;
	PartRun(&p, pscan);
	PartFlush(&p);
	part->d = p.in.d;
	part->dtype = (int32) p.in.dtype;
	part->ascending = p.ascending;
	part->minw = p.minw;
	part->maxw = p.maxw;
	pg_write_barrier();

	MemoryContextDelete(cxt);	/* the row buffers go with it */
	table_close(rel, AccessShareLock);
	dsa_detach(area);
}

/* A run of rows of one part that goes to the merged buffers as one piece. */
typedef struct MergeRun
{
	const int64 *ids;
	const char *x;
	int64		out;			/* its first row in the merged buffers */
	int64		n;
	int			part;			/* its part, and its first row there */
	int64		from;
} MergeRun;

/*
 * The runs [*from, *to) of share t of nt, each share about total / nt rows
 * of the merged buffers: the runs that start below share t's end, from
 * where share t - 1's ended (*r, 0 for the first share).
 */
static void
ShareOfRuns(const MergeRun *runs, int64 nruns, int64 total, int t, int nt, int64 *r,
			int64 *from, int64 *to)
{
	int64		upto = total * (t + 1) / nt;

	*from = *r;
	while (*r < nruns && runs[*r].out < upto)
		(*r)++;
	*to = t == nt - 1 ? nruns : *r;
}

/* The copies of runs [from, to) into the merged buffers: one thread's share. */
typedef struct MergeCopy
{
	const MergeRun *runs;
	int64		from;
	int64		to;
	int64	   *ids;
	char	   *x;
	Size		rowbytes;
} MergeCopy;

/* Copies a share of the runs; the threads of Merge run it (no PostgreSQL call). */
static void *
MergeCopyRuns(void *arg)
{
	MergeCopy  *m = (MergeCopy *) arg;

	/* this share's pages of the buffers faulted in by one call each, beside the other threads */
	if (m->to > m->from)
	{
		int64		first = m->runs[m->from].out;
		int64		end = m->runs[m->to - 1].out + m->runs[m->to - 1].n;

		(void) Populate(m->x + (Size) first * m->rowbytes, m->x + (Size) end * m->rowbytes);
		(void) Populate(m->ids + first, m->ids + end);
	}
	for (int64 r = m->from; r < m->to; r++)
	{
		const MergeRun *run = &m->runs[r];

		memcpy(m->ids + run->out, run->ids, (Size) run->n * sizeof(int64));
		memcpy(m->x + (Size) run->out * m->rowbytes, run->x, (Size) run->n * m->rowbytes);
	}
	return NULL;
}

/*
 * Runs fn on each of the nt shares (of size bytes each, from shares): the
 * first on the backend's thread, the others on threads that take no signal
 * (the backend's own thread answers them); a share whose thread does not
 * start runs on the backend's thread.  fn calls nothing of PostgreSQL.
 */
static void
RunShares(void *(*fn) (void *), char *shares, Size size, int nt)
{
	pthread_t  *threads = palloc0(sizeof(pthread_t) * nt);
	bool	   *started = palloc0(sizeof(bool) * nt);
	sigset_t	all;
	sigset_t	old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int t = 1; t < nt; t++)
		started[t] = pthread_create(&threads[t], NULL, fn, shares + t * size) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fn(shares);
	for (int t = 1; t < nt; t++)
	{
		if (started[t])
			pthread_join(threads[t], NULL);
		else
			fn(shares + t * size);
	}
	pfree(threads);
	pfree(started);
}

/* A row of a part, in the ordered merge: the part's index << REF_SHIFT | the row in it. */
#define REF_SHIFT	40
#define REF_ROW(ref) ((ref) & ((INT64CONST(1) << REF_SHIFT) - 1))

/* The copies of rows [from, to) of the buffers in ORDER BY order: one thread's share. */
typedef struct OrderCopy
{
	const PartRows *parts;
	const int64 *refs;			/* [total] the rows of the parts in order */
	int64		from;
	int64		to;
	int64	   *ids;
	char	   *x;
	Size		rowbytes;
} OrderCopy;

/* Copies a share of the rows in order; the threads of Merge run it (no PostgreSQL call). */
static void *
OrderCopyRows(void *arg)
{
	OrderCopy  *m = (OrderCopy *) arg;

	if (m->to > m->from)
	{
		(void) Populate(m->x + (Size) m->from * m->rowbytes, m->x + (Size) m->to * m->rowbytes);
		(void) Populate(m->ids + m->from, m->ids + m->to);
	}
	for (int64 i = m->from; i < m->to; i++)
	{
		const PartRows *pr = &m->parts[m->refs[i] >> REF_SHIFT];
		int64		r = REF_ROW(m->refs[i]);

		m->ids[i] = pr->ids[r];
		memcpy(m->x + (Size) i * m->rowbytes, pr->x + (Size) r * m->rowbytes, m->rowbytes);
	}
	return NULL;
}

/*
 * Sorts the n pairs (keys, vals) by key, stable, on nthreads threads: the
 * CPU back end's parallel radix sort (src/core/pool.c), whose result is
 * that of gc_radix_sort of common/sort.h.  The threads call nothing of
 * PostgreSQL; the backend's thread asks for cancel, which is raised here.
 * GC_OK, or GC_ERR_OUT_OF_MEMORY.
 */
static gc_status
SortKeys(uint64 *keys, int64 *vals, uint64 *tk, int64 *tv, int64 n, int nthreads)
{
	gc_error	err;
	gc_timing	timing;
	gc_core_ctx ctx;
	gc_status	st;

	if (!GcCoreContext(&ctx, &err, &timing, nthreads))
		return GC_ERR_OUT_OF_MEMORY;
	st = gc_pool_radix_sort(ctx.pool, (uint64_t *) keys, (int64_t *) vals, (uint64_t *) tk,
							(int64_t *) tv, n);
	gc_pool_free(ctx.pool);
	if (st == GC_ERR_CANCELLED)
	{
		CHECK_FOR_INTERRUPTS();
		elog(ERROR, "the sort of the parallel gather stopped for a cancel that did not come, please report a bug");
	}
	return st;
}

/*
 * The first pass of OrderRows over a share of the runs [from, to): each
 * row's ref and its word w, and whether the share's words never decrease
 * (sorted) or always decrease (reversed).  The threads of OrderRows run it
 * (no PostgreSQL call).
 */
typedef struct OrderFill
{
	const PartRows *parts;
	const MergeRun *runs;
	int64		from;
	int64		to;
	const GcOrder *order;
	int			w;
	int64	   *refs;
	uint64	   *keys;
	bool		sorted;
	bool		reversed;
} OrderFill;

static void *
OrderFillRuns(void *arg)
{
	OrderFill  *m = (OrderFill *) arg;
	bool		sorted = true;
	bool		reversed = true;
	bool		any = false;
	uint64		prev = 0;

	if (m->to > m->from)
	{
		int64		first = m->runs[m->from].out;
		int64		end = m->runs[m->to - 1].out + m->runs[m->to - 1].n;

		/* this share's pages faulted in by one call each, beside the other threads */
		(void) Populate(m->refs + first, m->refs + end);
		(void) Populate(m->keys + first, m->keys + end);
	}
	for (int64 r = m->from; r < m->to; r++)
	{
		const MergeRun *run = &m->runs[r];
		const PartRows *pr = &m->parts[run->part];
		int64	   *refs = m->refs + run->out;
		uint64	   *keys = m->keys + run->out;
		int64		ref = ((int64) run->part << REF_SHIFT) | run->from;

		for (int64 j = 0; j < run->n; j++)
		{
			uint64		k = RowWord(m->order, pr, run->from + j, m->w);

			refs[j] = ref + j;
			keys[j] = k;
			if (any)
			{
				sorted &= k >= prev;
				reversed &= k < prev;
			}
			prev = k;
			any = true;
		}
	}
	m->sorted = sorted;
	m->reversed = reversed;
	return NULL;
}

/*
 * The rows of the parts in ORDER BY order, as refs (part << REF_SHIFT | row):
 * starting from their physical order (the runs), a stable LSD radix sort on
 * each word of the keys, the last word first, so that rows with equal keys
 * keep their physical order (the keys are unique for the snapshot: none
 * should).  *out is NULL when the physical order is already the order.
 * False, with nothing allocated, where the sort's threads found no memory
 * (the caller then gathers serially).
 */
static bool
OrderRows(const PartRows *parts, const MergeRun *runs, int64 nruns, int64 total, const GcOrder *order,
		  int nthreads, int64 **out)
{
	int64	   *refs = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * total);
	uint64	   *keys = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(uint64) * total);
	uint64	   *tk = NULL;
	int64	   *tv = NULL;
	int64		i = 0;
	bool		moved = false;

	for (int w = order->nwords - 1; w >= 0; w--)
	{
		bool		sorted = true;
		bool		reversed = total > 1;

		if (w == order->nwords - 1)
		{
			/*
			 * The rows in physical order (the runs) with their last word: on
			 * threads for 4MB and more of refs, each with a share of about
			 * equal rows, which also fault in their pages of refs and keys.
			 */
			int			nt = (int) Min((int64) nthreads, Max((int64) 1, total >> 19));
			OrderFill  *shares = palloc0(sizeof(OrderFill) * nt);
			int64		r = 0;
			int64		last = -1;

			for (int t = 0; t < nt; t++)
			{
				shares[t].parts = parts;
				shares[t].runs = runs;
				shares[t].order = order;
				shares[t].w = w;
				shares[t].refs = refs;
				shares[t].keys = keys;
				ShareOfRuns(runs, nruns, total, t, nt, &r, &shares[t].from, &shares[t].to);
			}
			RunShares(OrderFillRuns, (char *) shares, sizeof(OrderFill), nt);
			CHECK_FOR_INTERRUPTS();
			/* the shares' own order, and that of each share's first row after the rows before */
			for (int t = 0; t < nt; t++)
			{
				int64		first;

				if (shares[t].to <= shares[t].from)
					continue;
				first = runs[shares[t].from].out;
				sorted &= shares[t].sorted;
				reversed &= shares[t].reversed;
				if (last >= 0)
				{
					sorted &= keys[first] >= keys[last];
					reversed &= keys[first] < keys[last];
				}
				last = runs[shares[t].to - 1].out + runs[shares[t].to - 1].n - 1;
			}
			pfree(shares);
		}
		else
		{
			/* the rows in the order of the words after w: each one's word w */
			for (i = 0; i < total; i++)
			{
				const PartRows *pr = &parts[refs[i] >> REF_SHIFT];

				keys[i] = RowWord(order, pr, REF_ROW(refs[i]), w);
				if (i > 0)
				{
					sorted &= keys[i] >= keys[i - 1];
					reversed &= keys[i] < keys[i - 1];
				}
				if ((i & ((1 << 20) - 1)) == 0)
					CHECK_FOR_INTERRUPTS();
			}
		}
		if (sorted)
			continue;			/* a stable sort would move nothing */
		if (reversed)
		{
			/* strictly descending (no two equal): the stable sort is the reverse */
			for (int64 a = 0, b = total - 1; a < b; a++, b--)
			{
				int64		t = refs[a];

				refs[a] = refs[b];
				refs[b] = t;
			}
			moved = true;
			continue;
		}
		if (tk == NULL)
		{
			tk = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(uint64) * total);
			tv = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * total);
		}
		if (SortKeys(keys, refs, tk, tv, total, nthreads) != GC_OK)
		{
			pfree(keys);
			pfree(tk);
			pfree(tv);
			pfree(refs);
			return false;		/* not enough memory for the threads' counts */
		}
		moved = true;
	}
	pfree(keys);
	if (tk != NULL)
	{
		pfree(tk);
		pfree(tv);
	}
	if (!moved)
	{
		pfree(refs);
		refs = NULL;
	}
	*out = refs;
	return true;
}

/*
 * Whether the rows of the runs (the physical order) are already in ORDER BY
 * order: each part's keys never decrease (its participant checked that as
 * it read them), nor do they from the last row of a run to the first row of
 * the next.  Then a stable sort moves nothing: a table in key order needs
 * no pass over its keys.
 */
static bool
RunsAscending(const PartRows *parts, int nparts, const MergeRun *runs, int64 nruns, const GcOrder *order)
{
	uint64		wa[2 * INDEX_MAX_KEYS];
	uint64		wb[2 * INDEX_MAX_KEYS];

	for (int i = 0; i < nparts; i++)
		if (parts[i].n > 0 && !parts[i].ascending)
			return false;
	for (int64 r = 1; r < nruns; r++)
	{
		const MergeRun *a = &runs[r - 1];
		const MergeRun *b = &runs[r];

		for (int w = 0; w < order->nwords; w++)
		{
			wa[w] = RowWord(order, &parts[a->part], a->from + a->n - 1, w);
			wb[w] = RowWord(order, &parts[b->part], b->from, w);
		}
		if (CompareWords(wb, wa, order->nwords) < 0)
			return false;
		if ((r & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * The order by ranks, for a key of one word (one NOT NULL column) whose
 * words span at most DENSE_SPAN times as many values as there are rows,
 * such as a serial or identity key: a row's place in the ORDER BY order is
 * the number of rows with a smaller word, read from a bitmap of the words
 * present beside a count of the bits set before each of its words.  Each
 * row is then copied once, straight from its part to its place, the parts
 * read in their order: no sort, and no array of the rows' order (OrderRows
 * sorts and keeps 32 bytes a row, and its copy reads the parts at random).
 * With unique words this is the order of the stable sort exactly; a word
 * met twice (which a unique key cannot give) leaves the order to the sort.
 */
#define DENSE_SPAN	4

/* Word b of the bitmap of the ranks, with the bits set in the words before it. */
typedef struct RankWord
{
	uint64		bits;			/* bit j: a row's word is minw + 64 b + j */
	int64		before;
} RankWord;

/* One thread's share of the runs [from, to), to mark in the bitmap or to copy to their places. */
typedef struct DenseShare
{
	const PartRows *parts;
	const MergeRun *runs;
	int64		from;
	int64		to;
	const GcOrder *order;
	uint64		minw;
	RankWord   *ranks;
	/* the copy: its slice [fault_from, fault_to) of the buffers to fault in first */
	int64		fault_from;
	int64		fault_to;
	int64	   *ids;
	char	   *x;
	Size		rowbytes;
} DenseShare;

/* Marks the words of a share's rows in the bitmap; the threads of DenseOrder run it (no PostgreSQL call). */
static void *
DenseMarkRuns(void *arg)
{
	DenseShare *m = (DenseShare *) arg;

	for (int64 r = m->from; r < m->to; r++)
	{
		const MergeRun *run = &m->runs[r];
		const PartRows *pr = &m->parts[run->part];

		for (int64 j = 0; j < run->n; j++)
		{
			uint64		b = RowWord(m->order, pr, run->from + j, 0) - m->minw;

			/* other threads set bits of the same words: an atomic or, whose result is not needed */
			(void) __atomic_fetch_or(&m->ranks[b >> 6].bits, UINT64CONST(1) << (b & 63), __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

/* The place of word b (less minw) among the rows: the bits set before it. */
static inline int64
DenseRank(const RankWord *ranks, uint64 b)
{
	const RankWord *rw = &ranks[b >> 6];

	return rw->before + pg_popcount64(rw->bits & ((UINT64CONST(1) << (b & 63)) - 1));
}

/* Copies a share's rows to their places in the buffers; the threads of Merge run it (no PostgreSQL call). */
static void *
DenseCopyRuns(void *arg)
{
	DenseShare *m = (DenseShare *) arg;

	/* the rows go anywhere: each thread faults in an equal slice of the buffers, beside the others */
	(void) Populate(m->x + (Size) m->fault_from * m->rowbytes, m->x + (Size) m->fault_to * m->rowbytes);
	(void) Populate(m->ids + m->fault_from, m->ids + m->fault_to);
	for (int64 r = m->from; r < m->to; r++)
	{
		const MergeRun *run = &m->runs[r];
		const PartRows *pr = &m->parts[run->part];

		for (int64 j = 0; j < run->n; j++)
		{
			int64		i = DenseRank(m->ranks, RowWord(m->order, pr, run->from + j, 0) - m->minw);

			m->ids[i] = run->ids[j];
			memcpy(m->x + (Size) i * m->rowbytes, run->x + (Size) j * m->rowbytes, m->rowbytes);
		}
	}
	return NULL;
}

/*
 * The bitmap of the ranks of the rows' words (the comment above RankWord), with
 * the least word in *minw, on nt threads; NULL where the key is not of one
 * word, its words span more than DENSE_SPAN times the rows, or a word comes
 * twice: then OrderRows sorts.
 */
static RankWord *
DenseOrder(const PartRows *parts, int nparts, const MergeRun *runs, int64 nruns, int64 total,
		   const GcOrder *order, int nt, uint64 *minw)
{
	uint64		lo = PG_UINT64_MAX;
	uint64		hi = 0;
	int64		nranks;
	int64		set = 0;
	RankWord   *ranks;
	DenseShare *shares;
	int64		r = 0;

	if (order->nwords != 1 || total < 2)
		return NULL;
	for (int i = 0; i < nparts; i++)
		if (parts[i].n > 0)
		{
			lo = Min(lo, parts[i].minw);
			hi = Max(hi, parts[i].maxw);
		}
	if (hi < lo || hi - lo >= (uint64) total * DENSE_SPAN)
		return NULL;
	nranks = (int64) ((hi - lo) >> 6) + 1;
	ranks = MemoryContextAllocExtended(CurrentMemoryContext, sizeof(RankWord) * nranks,
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	shares = palloc0(sizeof(DenseShare) * nt);
	for (int t = 0; t < nt; t++)
	{
		shares[t].parts = parts;
		shares[t].runs = runs;
		shares[t].order = order;
		shares[t].minw = lo;
		shares[t].ranks = ranks;
		ShareOfRuns(runs, nruns, total, t, nt, &r, &shares[t].from, &shares[t].to);
	}
	RunShares(DenseMarkRuns, (char *) shares, sizeof(DenseShare), nt);
	pfree(shares);
	CHECK_FOR_INTERRUPTS();
	for (int64 b = 0; b < nranks; b++)
	{
		ranks[b].before = set;
		set += pg_popcount64(ranks[b].bits);
	}
	if (set != total)
	{
		/* a word met twice: the keys are not unique after all, and the stable sort decides */
		pfree(ranks);
		return NULL;
	}
	*minw = lo;
	return ranks;
}

/*
 * Merges the parts, each in block order, into st's row buffers by TID.
 * False, with nothing allocated, when the parts disagree on the number of
 * features (a row with another length than the first: the serial gather
 * names it) or on their type, or where the sort of an ordered scan finds
 * no memory for its threads.
 *
 * The order is found first, as a list of runs (the rows of one part before
 * any other part's next row); the runs are then copied by up to nthreads
 * threads, each into its own rows of the buffers, so that the pages of the
 * buffers are faulted in and written in parallel.
 */
static bool
Merge(GatherReceiver *st, PartRows *parts, int nparts, int nthreads, const GcOrder *order)
{
	GcInput    *in = st->in;
	int64		total = 0;
	int32		d = -1;
	Size		rowbytes;
	int64	   *pos;
	int64		out = 0;
	MergeRun   *runs;
	int64		nruns = 0;
	int64		capruns = 1024;
	int64	   *refs;
	RankWord   *ranks = NULL;
	uint64		minw = 0;
	/* threads for the copy in key order: from 4MB of rows (rows read or written anywhere wait on memory) */
	int			ntord;

	for (int i = 0; i < nparts; i++)
	{
		if (parts[i].n == 0)
			continue;
		if (d >= 0 && parts[i].d != d)
			return false;
		d = parts[i].d;
		total += parts[i].n;
	}
	if (total == 0)
		return true;
	if (st->kind == FEATURES_SCALARS && d != in->d)
		return false;
	in->d = d;
	rowbytes = (Size) d * gc_dtype_size(in->dtype);
	ntord = (int) Min((int64) nthreads, Max((int64) 1, (int64) (total * (rowbytes + 8) >> 22)));

	pos = palloc0(sizeof(int64) * nparts);
	runs = palloc(sizeof(MergeRun) * capruns);
	for (;;)
	{
		int			best = -1;
		uint64		bestkey = 0;
		uint64		bound = PG_UINT64_MAX;
		int64		from;
		int64		to;
		const PartRows *b;

		for (int i = 0; i < nparts; i++)
		{
			uint64		k;

			if (pos[i] >= parts[i].n)
				continue;
			k = parts[i].keys[pos[i]];
			if (best < 0 || k < bestkey)
			{
				if (best >= 0)
					bound = Min(bound, bestkey);
				best = i;
				bestkey = k;
			}
			else
				bound = Min(bound, k);
		}
		if (best < 0)
			break;
		b = &parts[best];
		from = pos[best];
		to = from + 1;
		while (to < b->n && b->keys[to] < bound)
			to++;
		if (nruns == capruns)
		{
			capruns *= 2;
			runs = repalloc_huge(runs, sizeof(MergeRun) * capruns);
		}
		runs[nruns].ids = b->ids + from;
		runs[nruns].x = b->x + (Size) from * rowbytes;
		runs[nruns].out = out;
		runs[nruns].n = to - from;
		runs[nruns].part = best;
		runs[nruns].from = from;
		nruns++;
		out += to - from;
		pos[best] = to;
		CHECK_FOR_INTERRUPTS();
	}
	pfree(pos);
	Assert(out == total);

	/* the rows in ORDER BY order where the query has one and they are not in it already */
	refs = NULL;
	if (order->nwords > 0)
	{
		instr_time	t0;
		instr_time	t1;

		INSTR_TIME_SET_CURRENT(t0);
		if (RunsAscending(parts, nparts, runs, nruns, order))
			refs = NULL;
		else if ((ranks = DenseOrder(parts, nparts, runs, nruns, total, order, ntord, &minw)) != NULL)
			refs = NULL;
		else if (!OrderRows(parts, runs, nruns, total, order, nthreads, &refs))
		{
			pfree(runs);
			return false;
		}
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		elog(DEBUG2, "gpuclust: parallel gather: " INT64_FORMAT " rows put in ORDER BY order in %.1f ms%s",
			 total, INSTR_TIME_GET_MILLISEC(t1),
			 ranks != NULL ? " (by ranks)" : refs == NULL ? " (already in it)" : "");
	}

	AllocRows(st, total, false);
	{
		/* threads for 16MB and more of rows, each with a share of about equal rows */
		int			nt = (int) Min((int64) nthreads, Max((int64) 1, (int64) (total * (rowbytes + 8) >> 24)));
		int64		r = 0;

		if (ranks != NULL)
		{
			/* each row from its part, in the parts' order, to its place in key order */
			DenseShare *shares = palloc0(sizeof(DenseShare) * ntord);

			for (int t = 0; t < ntord; t++)
			{
				shares[t].parts = parts;
				shares[t].runs = runs;
				shares[t].order = order;
				shares[t].minw = minw;
				shares[t].ranks = ranks;
				shares[t].ids = in->ids;
				shares[t].x = (char *) in->x;
				shares[t].rowbytes = rowbytes;
				shares[t].fault_from = total * t / ntord;
				shares[t].fault_to = total * (t + 1) / ntord;
				ShareOfRuns(runs, nruns, total, t, ntord, &r, &shares[t].from, &shares[t].to);
			}
			RunShares(DenseCopyRuns, (char *) shares, sizeof(DenseShare), ntord);
			pfree(ranks);
		}
		else if (refs != NULL)
		{
			/*
			 * Rows read in key order from anywhere in the parts wait on
			 * memory rather than stream from it: threads from 4MB of rows on
			 * (at 2M rows of 2 features on 2 cores, 31 ms on one thread).
			 */
			OrderCopy  *shares;

			nt = ntord;
			shares = palloc0(sizeof(OrderCopy) * nt);
			for (int t = 0; t < nt; t++)
			{
				shares[t].parts = parts;
				shares[t].refs = refs;
				shares[t].ids = in->ids;
				shares[t].x = (char *) in->x;
				shares[t].rowbytes = rowbytes;
				shares[t].from = total * t / nt;
				shares[t].to = total * (t + 1) / nt;
			}
			RunShares(OrderCopyRows, (char *) shares, sizeof(OrderCopy), nt);
			pfree(refs);
		}
		else
		{
			MergeCopy  *shares = palloc0(sizeof(MergeCopy) * nt);

			for (int t = 0; t < nt; t++)
			{
				shares[t].runs = runs;
				shares[t].ids = in->ids;
				shares[t].x = (char *) in->x;
				shares[t].rowbytes = rowbytes;
				ShareOfRuns(runs, nruns, total, t, nt, &r, &shares[t].from, &shares[t].to);
			}
			RunShares(MergeCopyRuns, (char *) shares, sizeof(MergeCopy), nt);
		}
	}
	pfree(runs);
	in->n = total;
	return true;
}

/*
 * Gathers the rows of stmt into st with parallel workers when stmt is a scan
 * the parallel gather takes and the table is large enough for workers
 * (see the file's comment); false, with nothing gathered, when the serial
 * gather must run.  *started is set once the workers are launched: an
 * error from then on may be one the serial gather raises differently.
 */
bool
GcParallelGather(CachedPlanSource *ps, PlannedStmt *stmt, GatherReceiver *st, bool *started)
{
	Scan	   *scan = (Scan *) stmt->planTree;
	Snapshot	snapshot;
	Oid			relid;
	Relation	rel;
	int			nworkers;
	ParallelContext *pcxt;
	Size		shared_size;
	Size		pscan_size;
	GcPGShared *shared;
	ParallelTableScanDesc pscan;
	char	   *tlist_s;
	char	   *qual_s;
	char	   *space;
	dsa_area   *area;
	MemoryContext partcxt;
	PartScan	leader;
	PartRows   *parts;
	int			nparts = 0;
	bool		ok = true;
	instr_time	t_start,
				t_launch,
				t_scanned,
				t_merged,
				t_done;
	int			pcxt_launched;
	GcOrder		order;
	SortCol		cols[INDEX_MAX_KEYS];
	int			ncols = 0;
	Query	   *ordered = NULL;
	Index		varno = 0;

	*started = false;
	memset(&order, 0, sizeof(order));
	/* not inside a parallel operation (the statement around the call may be one) */
	if (!gc_parallel_gather_guc || max_parallel_workers_per_gather <= 0 || IsInParallelMode())
		return false;
	relid = ScanShape(stmt, st->natts, true);
	if (!OidIsValid(relid))
	{
		/* an ORDER BY of the table's columns: the scan of the query without it, then sorted */
		ordered = OrderedQuery(ps, cols, &ncols, &varno);
		if (ordered == NULL)
			return false;
		relid = rt_fetch(varno, ordered->rtable)->relid;
	}

	/*
	 * Wide rows stay serial: each feature byte is written three times here
	 * (the worker's buffer, shared memory, the row buffers) against once
	 * serially, and the shared memory is released after.  On the 16-core
	 * H100 host, 1M rows of real[]: 2.3x faster with 8 workers at 2
	 * features, 1.15x at 64, 1.24x slower at 256 (bench/results/parallel_gather.md).
	 */
	if (stmt->planTree->plan_width > PGATHER_MAX_WIDTH)
	{
		elog(DEBUG1, "gpuclust: serial gather: rows of about %d bytes are wider than the parallel gather's %d",
			 stmt->planTree->plan_width, PGATHER_MAX_WIDTH);
		return false;
	}

	/*
	 * The executor's check of the caller's privileges before anything is
	 * read; where it fails, the serial gather raises its error.
	 */
#if PG_VERSION_NUM >= 160000
	if (!ExecCheckPermissions(stmt->rtable, stmt->permInfos, false))
		return false;
#else
	if (!ExecCheckRTPerms(stmt->rtable, false))
		return false;
#endif
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID || RelationUsesLocalBuffers(rel) ||
		(nworkers = WorkersFor(rel)) <= 0 ||
		(ordered != NULL && (order.nkeys = UniquePrefix(rel, cols, ncols)) == 0))
	{
		table_close(rel, NoLock);
		return false;
	}
	if (ordered != NULL)
	{
		PlannedStmt *unordered = UnorderedPlan(ps, ordered);

		if (unordered == NULL || ScanShape(unordered, st->natts, false) != relid ||
			((Scan *) unordered->planTree)->scanrelid != varno)
		{
			table_close(rel, NoLock);
			return false;
		}
		scan = (Scan *) unordered->planTree;
	}
	for (int k = 0; k < order.nkeys; k++)
	{
		GcOrderKey *key = &order.keys[k];

		key->attnum = cols[k].attnum;
		key->kind = (int16) cols[k].kind;
		key->desc = cols[k].desc;
		key->nulls_first = cols[k].nulls_first;
		key->nullable = !TupleDescAttr(RelationGetDescr(rel), key->attnum - 1)->attnotnull;
		order.nwords += key->nullable ? 2 : 1;
	}

	/*
	 * ORDER BY the row id itself (a NOT NULL integer column, as a primary
	 * key is): each row's word is its id's, which the rows keep anyway.  No
	 * row then keeps words of its own, which would be written twice more
	 * (the worker's buffer, shared memory) and read back: at 2M rows of 2
	 * features on 2 cores that was as much as 20 ns a row.
	 */
	order.stored = order.nwords;
	if (order.nkeys == 1 && !order.keys[0].nullable && scan->plan.targetlist != NIL)
	{
		Expr	   *first = linitial_node(TargetEntry, scan->plan.targetlist)->expr;

		if (IsA(first, Var) && ((Var *) first)->varattno == order.keys[0].attnum &&
			(((Var *) first)->vartype == INT2OID || ((Var *) first)->vartype == INT4OID ||
			 ((Var *) first)->vartype == INT8OID))
		{
			order.from_ids = true;
			order.stored = 0;
		}
	}

	snapshot = GetActiveSnapshot();
	tlist_s = nodeToString(scan->plan.targetlist);
	qual_s = nodeToString(scan->plan.qual);

	INSTR_TIME_SET_CURRENT(t_start);
	EnterParallelMode();
	pcxt = CreateParallelContext("gpuclust", "GcParallelGatherMain", nworkers);
	shared_size = add_size(offsetof(GcPGShared, parts), mul_size(sizeof(GcPart), nworkers));
	pscan_size = table_parallelscan_estimate(rel, snapshot);
	shm_toc_estimate_chunk(&pcxt->estimator, shared_size);
	shm_toc_estimate_chunk(&pcxt->estimator, pscan_size);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(tlist_s) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, strlen(qual_s) + 1);
	shm_toc_estimate_chunk(&pcxt->estimator, dsa_minimum_size());
	shm_toc_estimate_keys(&pcxt->estimator, 5);
	InitializeParallelDSM(pcxt);
	if (pcxt->seg == NULL)
	{
		/* no dynamic shared memory: the serial gather */
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		table_close(rel, NoLock);
		return false;
	}

	shared = shm_toc_allocate(pcxt->toc, shared_size);
	memset(shared, 0, shared_size);
	shared->relid = relid;
	shared->nparts = nworkers;
	shared->order = order;
	for (int i = 0; i < nworkers; i++)
		shared->parts[i].first = InvalidDsaPointer;
	shm_toc_insert(pcxt->toc, PG_KEY_SHARED, shared);

	pscan = shm_toc_allocate(pcxt->toc, pscan_size);
	table_parallelscan_initialize(rel, pscan, snapshot);
	/* from block 0 on, as a serial scan of a table that is not large: the parts merge by TID */
	pscan->phs_syncscan = false;
	shm_toc_insert(pcxt->toc, PG_KEY_SCAN, pscan);

	space = shm_toc_allocate(pcxt->toc, strlen(tlist_s) + 1);
	strcpy(space, tlist_s);
	shm_toc_insert(pcxt->toc, PG_KEY_TLIST, space);
	space = shm_toc_allocate(pcxt->toc, strlen(qual_s) + 1);
	strcpy(space, qual_s);
	shm_toc_insert(pcxt->toc, PG_KEY_QUAL, space);

	space = shm_toc_allocate(pcxt->toc, dsa_minimum_size());
	shm_toc_insert(pcxt->toc, PG_KEY_DSA, space);
	area = dsa_create_in_place(space, dsa_minimum_size(), LWTRANCHE_PARALLEL_QUERY_DSA, pcxt->seg);

	/*
	 * The leader's part is set up before any worker starts, so that an error
	 * in the expressions is the leader's own; its rows and the merged ones
	 * live in the subtransaction's context, which an error takes away.
	 */
	partcxt = AllocSetContextCreate(CurTransactionContext, "gpuclust parallel gather leader",
									ALLOCSET_DEFAULT_SIZES);
	PartBegin(&leader, rel, scan->plan.targetlist, scan->plan.qual, &order, partcxt);

	INSTR_TIME_SET_CURRENT(t_launch);
	LaunchParallelWorkers(pcxt);
	*started = true;
	if (order.nkeys > 0)
		elog(DEBUG1, "gpuclust: parallel gather of \"%s\" with %d workers planned, sorted on %d key columns",
			 RelationGetRelationName(rel), nworkers, order.nkeys);
	else
		elog(DEBUG1, "gpuclust: parallel gather of \"%s\" with %d workers planned",
			 RelationGetRelationName(rel), nworkers);
	if (pcxt->nworkers_launched == 0 || parallel_leader_participation)
		PartRun(&leader, pscan);
	WaitForParallelWorkersToFinish(pcxt);
	INSTR_TIME_SET_CURRENT(t_scanned);

	/* the leader's part, and each chunk of each worker as a part of its own */
	{
		int			capparts = nworkers + 1;

		parts = palloc(sizeof(PartRows) * capparts);
		PartRowsOf(&leader, &parts[nparts++]);
		if (leader.in.n > 0 && leader.in.dtype != st->in->dtype)
			ok = false;
		pg_read_barrier();
		for (int i = 0; i < pcxt->nworkers_launched; i++)
		{
			GcPart	   *wp = &shared->parts[i];

			if (wp->n > 0 && (gc_dtype) wp->dtype != st->in->dtype)
				ok = false;
			for (dsa_pointer dp = wp->first; DsaPointerIsValid(dp);)
			{
				GcChunk    *c = dsa_get_address(area, dp);
				const char *base = (const char *) (c + 1);
				PartRows   *r;

				if (nparts == capparts)
				{
					capparts *= 2;
					parts = repalloc(parts, sizeof(PartRows) * capparts);
				}
				r = &parts[nparts++];
				r->n = c->n;
				r->d = wp->d;
				r->ids = (const int64 *) base;
				r->keys = (const uint64 *) (base + (Size) c->n * sizeof(int64));
				r->okeys = order.stored > 0 ? (const uint64 *) (base + 2 * (Size) c->n * sizeof(int64)) : NULL;
				r->ascending = wp->ascending;
				r->minw = wp->minw;
				r->maxw = wp->maxw;
				r->x = base + (2 + order.stored) * (Size) c->n * sizeof(int64);
				dp = c->next;
			}
		}
	}
	if (ok)
		ok = Merge(st, parts, nparts,
				   Min(Max(gc_tuning_gucs.cpu_threads, 1), pcxt->nworkers_launched + 1), &order);
	INSTR_TIME_SET_CURRENT(t_merged);
	pcxt_launched = pcxt->nworkers_launched;

	dsa_detach(area);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	MemoryContextDelete(partcxt);
	table_close(rel, NoLock);
	/* where the time went: what the parallel gather adds to the scan shows here */
	INSTR_TIME_SET_CURRENT(t_done);
	INSTR_TIME_SUBTRACT(t_done, t_merged);
	INSTR_TIME_SUBTRACT(t_merged, t_scanned);
	INSTR_TIME_SUBTRACT(t_scanned, t_launch);
	INSTR_TIME_SUBTRACT(t_launch, t_start);
	elog(DEBUG2, "gpuclust: parallel gather of %d workers: set-up %.1f ms, scan %.1f ms, merge and copy %.1f ms, shared memory released %.1f ms",
		 pcxt_launched, INSTR_TIME_GET_MILLISEC(t_launch), INSTR_TIME_GET_MILLISEC(t_scanned),
		 INSTR_TIME_GET_MILLISEC(t_merged), INSTR_TIME_GET_MILLISEC(t_done));
	return ok;
}
