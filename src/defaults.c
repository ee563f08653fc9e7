/*
 * defaults.c
 *    gpuclust_defaults(): the defaults of the algorithms' optional
 *    arguments as the C code has them (common/params.h), one row per
 *    argument, so that a test can hold the DEFAULT clauses of the SQL
 *    functions to them (sql/defaults.sql).
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "gpuclust.h"
#include "output.h"
#include "params.h"

/* The SQL spelling of a metric, an init method and a kernel. */
static const char *
MetricName(gc_metric m)
{
	return m == GC_METRIC_COSINE ? "cosine" : "euclidean";
}

static const char *
InitName(gc_kmeans_init init)
{
	switch (init)
	{
		case GC_KMEANS_INIT_PLUSPLUS:
			return "k-means++";
		case GC_KMEANS_INIT_PLUSPLUS_PLAIN:
			return "plain-k-means++";
		case GC_KMEANS_INIT_RANDOM:
			return "random";
		default:
			return "given";
	}
}

static const char *
KernelName(gc_dp_kernel kernel)
{
	return kernel == GC_DP_KERNEL_CUTOFF ? "cutoff" : "gaussian";
}

/* One row: algorithm, argument, value. */
static void
PutDefault(Tuplestorestate *ts, TupleDesc desc, const char *algorithm,
		   const char *argument, const char *value)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(algorithm);
	values[1] = CStringGetTextDatum(argument);
	values[2] = CStringGetTextDatum(value);
	tuplestore_putvalues(ts, desc, values, nulls);
}

PG_FUNCTION_INFO_V1(gpuclust_defaults);

/* gpuclust_defaults(): see the file header. */
Datum
gpuclust_defaults(PG_FUNCTION_ARGS)
{
	static const GcAlgorithm defaults = {"defaults", "defaults"};
	GcCall		call;
	Tuplestorestate *ts;
	TupleDesc	desc;
	gc_dbscan_params db;
	gc_kmeans_params km;
	gc_dpeaks_params dp;
	gc_hdbscan_params hd;
	char		buf[64];

	gc_dbscan_params_init(&db);
	gc_kmeans_params_init(&km);
	gc_dpeaks_params_init(&dp);
	gc_hdbscan_params_init(&hd);
	GcCallBegin(&call, fcinfo, &defaults, -1);
	ts = GcCallOutputStart(&call, fcinfo, &desc, 15);
	PutDefault(ts, desc, "dbscan", "metric", MetricName(db.metric));
	snprintf(buf, sizeof(buf), "%d", km.max_iter);
	PutDefault(ts, desc, "kmeans", "max_iter", buf);
	snprintf(buf, sizeof(buf), "%.17g", km.tol);
	PutDefault(ts, desc, "kmeans", "tol", buf);
	snprintf(buf, sizeof(buf), "%lld", (long long) km.seed);
	PutDefault(ts, desc, "kmeans", "seed", buf);
	PutDefault(ts, desc, "kmeans", "init", InitName(km.init));
	snprintf(buf, sizeof(buf), "%d", km.n_init);
	PutDefault(ts, desc, "kmeans", "n_init", buf);
	PutDefault(ts, desc, "kmeans", "metric", MetricName(km.metric));
	snprintf(buf, sizeof(buf), "%.17g", dp.neighbor_rate);
	PutDefault(ts, desc, "density_peaks", "neighbor_rate", buf);
	PutDefault(ts, desc, "density_peaks", "kernel", KernelName(dp.kernel));
	PutDefault(ts, desc, "density_peaks", "metric", MetricName(dp.metric));
	snprintf(buf, sizeof(buf), "%d", hd.min_cluster_size);
	PutDefault(ts, desc, "hdbscan", "min_cluster_size", buf);
	snprintf(buf, sizeof(buf), "%.17g", hd.cluster_selection_epsilon);
	PutDefault(ts, desc, "hdbscan", "cluster_selection_epsilon", buf);
	PutDefault(ts, desc, "hdbscan", "cluster_selection_method",
			   hd.method == GC_HDBSCAN_LEAF ? "leaf" : "eom");
	PutDefault(ts, desc, "hdbscan", "allow_single_cluster", hd.allow_single_cluster ? "true" : "false");
	PutDefault(ts, desc, "hdbscan", "metric", MetricName(hd.metric));
	GcCallEnd(&call, NULL);
	return (Datum) 0;
}
