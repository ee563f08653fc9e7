/*
 * hdbscan.c
 *    gpu_hdbscan(query, min_cluster_size, min_samples,
 *    cluster_selection_epsilon, cluster_selection_method,
 *    allow_single_cluster, max_cluster_size, metric, device): HDBSCAN of
 *    the query's rows, one output row per input row in the query's order,
 *    with its cluster (NULL for noise), scikit-learn's membership
 *    probability and the GLOSH outlier score; and gpu_hdbscan_tree(the
 *    same arguments): the condensed tree, one row per cluster node and per
 *    input row.
 *
 * The rules are those of gc_hdbscan_params in common/backend.h and
 * common/hdbscan.h; the CPU back end is src/core/hdbscan.c and the GPU back
 * end cuda/hdbscan.cu, and both give the same answer.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "hdbscan_sql.h"
#include "output.h"
#include "params.h"

PG_FUNCTION_INFO_V1(gpu_hdbscan);
PG_FUNCTION_INFO_V1(gpu_hdbscan_tree);

const GcAlgorithm GcHdbscan = {"hdbscan", "HDBSCAN", gc_hdbscan_phase_names};

/* A required argument that is NULL. */
static void
NullArgument(const char *name, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s must not be null", name),
			 errdetail("HDBSCAN needs a value for %s.", name),
			 errhint("%s", hint)));
}

/* cluster_selection_method: 'eom' or 'leaf', case-insensitive. */
static gc_hdbscan_method
MethodFromText(text *arg)
{
	char	   *s = text_to_cstring(arg);

	if (pg_strcasecmp(s, "eom") == 0)
		return GC_HDBSCAN_EOM;
	if (pg_strcasecmp(s, "leaf") == 0)
		return GC_HDBSCAN_LEAF;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown cluster_selection_method \"%s\"", s),
			 errdetail("HDBSCAN selects clusters by excess of mass or takes the leaves of the condensed tree."),
			 errhint("Use cluster_selection_method => 'eom' (the default) or 'leaf'.")));
	return GC_HDBSCAN_EOM;		/* keep the compiler quiet */
}

void
GcHdbscanParams(const GcHdbscanArgs *a, GcHdbscanJob *job)
{
	gc_hdbscan_params *p = &job->params;
	gc_error	err;

	gc_hdbscan_params_init(p);
	if (a->isnull[GC_HDB_MIN_CLUSTER_SIZE])
		NullArgument("min_cluster_size", "Pass the smallest number of rows a cluster may have, for example 5 (the default).");
	p->min_cluster_size = DatumGetInt32(a->value[GC_HDB_MIN_CLUSTER_SIZE]);
	job->min_samples_given = !a->isnull[GC_HDB_MIN_SAMPLES];
	p->min_samples = job->min_samples_given ? DatumGetInt32(a->value[GC_HDB_MIN_SAMPLES])
		: p->min_cluster_size;
	if (a->isnull[GC_HDB_EPSILON])
		NullArgument("cluster_selection_epsilon", "Pass 0 (the default) to select clusters by stability alone.");
	p->cluster_selection_epsilon = DatumGetFloat8(a->value[GC_HDB_EPSILON]);
	if (a->isnull[GC_HDB_METHOD])
		NullArgument("cluster_selection_method", "Use cluster_selection_method => 'eom' (the default) or 'leaf'.");
	p->method = MethodFromText(DatumGetTextPP(a->value[GC_HDB_METHOD]));
	if (a->isnull[GC_HDB_ALLOW_SINGLE])
		NullArgument("allow_single_cluster", "Pass true or false (the default).");
	p->allow_single_cluster = DatumGetBool(a->value[GC_HDB_ALLOW_SINGLE]) ? 1 : 0;
	if (!a->isnull[GC_HDB_MAX_CLUSTER_SIZE])
	{
		int32		m = DatumGetInt32(a->value[GC_HDB_MAX_CLUSTER_SIZE]);

		if (m < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_cluster_size must be at least 1"),
					 errdetail("max_cluster_size is %d.", m),
					 errhint("Pass NULL (the default) for no limit.")));
		p->max_cluster_size = m;
	}
	p->metric = a->isnull[GC_HDB_METRIC] ? GC_METRIC_EUCLIDEAN
		: GcMetricFromText(DatumGetTextPP(a->value[GC_HDB_METRIC]), GcHdbscan.title);
	GcReportCheck(gc_check_hdbscan(p, -1, 0, &err), &err);
}

gc_status
GcRunHdbscan(const gc_backend_api *api, const gc_exec *exec, const GcInput *in, void *arg)
{
	GcHdbscanJob *job = arg;

	if (api->hdbscan == NULL)
		elog(ERROR, "the %s back end has no HDBSCAN, please report a bug", api->name);
	return api->hdbscan(exec, in->x, in->dtype, in->n, in->d, &job->params, &job->result);
}

void
GcHdbscanExtra(const GcCall *call, const GcHdbscanJob *job, char *extra, size_t size)
{
	const gc_timing *t = &call->timing;

	extra[0] = '\0';
	if (call->in.n == 0)
		return;
	snprintf(extra, size, "clusters=%lld min_samples=%d rounds=%lld distances=%lld",
			 (long long) job->result.n_clusters, job->params.min_samples,
			 (long long) t->counts[0], (long long) t->counts[1]);
}

/* The arguments after the query of the set-returning functions. */
static void
SrfArgs(FunctionCallInfo fcinfo, GcHdbscanJob *job)
{
	GcHdbscanArgs a;

	for (int i = 0; i < GC_HDB_NARGS; i++)
	{
		a.isnull[i] = PG_NARGS() <= i + 1 || PG_ARGISNULL(i + 1);
		a.value[i] = a.isnull[i] ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
	}
	memset(job, 0, sizeof(*job));
	GcHdbscanParams(&a, job);
}

/*
 * The common part of both functions: arguments, gather, checks against the
 * rows, and the run; tree: the condensed tree's arrays wanted; scores: the
 * probabilities and outlier scores wanted (else not computed).
 */
static void
HdbscanCompute(FunctionCallInfo fcinfo, GcCall *call, GcHdbscanJob *job, bool tree, bool scores)
{
	text	   *query = GcArgText(fcinfo, 0, "query");
	gc_error	err;
	int64		n;

	SrfArgs(fcinfo, job);
	GcCallBegin(call, fcinfo, &GcHdbscan, 1 + GC_HDB_DEVICE);
	GcCallGather(call, query);
	GcCallMetric(call, job->params.metric);
	n = call->in.n;
	GcReportCheck(gc_check_hdbscan(&job->params, n, call->in.d, &err), &err);

	job->result.cluster = GcAlloc(call, sizeof(int32) * n, "cluster ids");
	if (scores)
	{
		job->result.probability = GcAlloc(call, sizeof(double) * n, "probabilities");
		job->result.outlier_score = GcAlloc(call, sizeof(double) * n, "outlier scores");
	}
	if (tree)
	{
		gc_hdbscan_tree *t = GcAlloc(call, sizeof(gc_hdbscan_tree), "condensed tree");
		int64		cap = 2 * n;

		t->capacity = cap;
		t->parent = GcAlloc(call, sizeof(int64) * cap, "condensed tree");
		t->child = GcAlloc(call, sizeof(int64) * cap, "condensed tree");
		t->child_row = GcAlloc(call, sizeof(int64) * cap, "condensed tree");
		t->lambda_val = GcAlloc(call, sizeof(double) * cap, "condensed tree");
		t->child_size = GcAlloc(call, sizeof(int64) * cap, "condensed tree");
		t->node_selected = GcAlloc(call, sizeof(uint8) * cap, "condensed tree");
		t->node_cluster = GcAlloc(call, sizeof(int32) * cap, "condensed tree");
		job->result.tree = t;
	}
	GcCallCompute(call, GcRunHdbscan, job);
}

/* gpu_hdbscan's output columns, numbered as GcRowsFillColumn numbers them (0: id) */
enum
{
	HDB_COL_CLUSTER = 1,
	HDB_COL_PROBABILITY = 2,
	HDB_COL_OUTLIER_SCORE = 3
};

/* gpu_hdbscan(query, ...): see the file header. */
Datum
gpu_hdbscan(PG_FUNCTION_ARGS)
{
	GcHdbscanJob job;
	GcCall		call;
	GcRows		rows;
	char		extra[256];

	/* a query that reads neither probability nor outlier_score gets neither computed */
	bool		scores = GcRowsColumnRead(fcinfo, HDB_COL_PROBABILITY) ||
		GcRowsColumnRead(fcinfo, HDB_COL_OUTLIER_SCORE);

	HdbscanCompute(fcinfo, &call, &job, false, scores);
	GcRowsInit(&rows, &call);
	/* added in the order of the columns */
	GcRowsAdd(&rows, GC_COL_INT32, job.result.cluster, true);
	GcRowsAdd(&rows, scores ? GC_COL_FLOAT8 : GC_COL_UNREAD, job.result.probability, false);
	GcRowsAdd(&rows, scores ? GC_COL_FLOAT8 : GC_COL_UNREAD, job.result.outlier_score, false);
	Assert(rows.ncols == HDB_COL_OUTLIER_SCORE);
	GcHdbscanExtra(&call, &job, extra, sizeof(extra));
	GcCallOutputRows(&call, fcinfo, &rows, extra);
	return (Datum) 0;
}

/*
 * gpu_hdbscan_tree(query, ...): the condensed tree.  The first row is the
 * root (parent NULL, child 0); then one row per edge of the condensed tree
 * in the order scikit-learn's condensed_tree_ lists them: a cluster node
 * child (child set, child_id NULL) with its selection and cluster, or an
 * input row (child NULL, child_id its id) with the row's cluster.
 */
Datum
gpu_hdbscan_tree(PG_FUNCTION_ARGS)
{
	GcHdbscanJob job;
	GcCall		call;
	Tuplestorestate *ts;
	TupleDesc	desc;
	gc_hdbscan_tree *t;
	char		extra[256];

	HdbscanCompute(fcinfo, &call, &job, true, true);
	t = job.result.tree;
	ts = GcCallOutputStart(&call, fcinfo, &desc, t->rows + 1);
	if (t->nodes > 0)
	{
		Datum		values[7];
		bool		nulls[7] = {true, false, true, false, false, false, false};

		values[1] = Int32GetDatum(0);
		values[3] = Float8GetDatum(0.0);
		values[4] = Int64GetDatum(call.in.n);
		values[5] = BoolGetDatum(t->node_selected[0] != 0);
		nulls[6] = t->node_cluster[0] < 0;
		values[6] = Int32GetDatum(t->node_cluster[0]);
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	for (int64 r = 0; r < t->rows; r++)
	{
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};

		values[0] = Int32GetDatum((int32) t->parent[r]);
		values[3] = Float8GetDatum(t->lambda_val[r]);
		values[4] = Int64GetDatum(t->child_size[r]);
		if (t->child[r] >= 0)
		{
			int64		k = t->child[r];

			values[1] = Int32GetDatum((int32) k);
			nulls[2] = true;
			values[5] = BoolGetDatum(t->node_selected[k] != 0);
			nulls[6] = t->node_cluster[k] < 0;
			values[6] = Int32GetDatum(t->node_cluster[k]);
		}
		else
		{
			int64		i = t->child_row[r];

			nulls[1] = true;
			values[2] = Int64GetDatum(call.in.ids[i]);
			nulls[5] = true;
			nulls[6] = job.result.cluster[i] < 0;
			values[6] = Int32GetDatum(job.result.cluster[i]);
		}
		tuplestore_putvalues(ts, desc, values, nulls);
		if ((r & 0xffff) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	GcHdbscanExtra(&call, &job, extra, sizeof(extra));
	GcCallEnd(&call, extra);
	return (Datum) 0;
}
