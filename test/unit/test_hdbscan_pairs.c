/*
 * test_hdbscan_pairs.c
 *    Unit tests of the CPU HDBSCAN on the pair engine (src/core/
 *    hdbscan_pairs.c) against the k-d tree path: with tuning.pair_path
 *    forced to the pair engine and to the index, the same core distances,
 *    labels, probabilities, outlier scores and condensed tree, bit for bit,
 *    on blobs at 16, 64 and 256 features, cosine at 384, duplicate rows, a
 *    far outlier and one-decimal lattices with exact distance ties, float
 *    and double, on 1 and 3 threads; the engine's spanning tree edge for
 *    edge against a brute-force one (Prim's, under the order (w, lower row,
 *    higher row)); the path rule and its report in gc_timing; cancel.  And
 *    the mutation check: a screen without its error margin
 *    (tuning.pair_margin 0) must get some tie set wrong.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "core.h"
#include "hdbscan.h"
#include "hdbscan_pairs.h"
#include "metric.h"
#include "pairs.h"
#include "unit.h"

static uint64_t rng_state = 11;

static double
urand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (rng_state >> 11) / 9007199254740992.0;
}

static double
nrand(void)
{
	double		u = urand() + 1e-300,
				v = urand();

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* A data set: rows [n, d] as doubles v, given to the back end as dtype in x. */
typedef struct dataset
{
	char		name[64];
	int64_t		n;
	int32_t		d;
	gc_dtype	dtype;
	gc_metric	metric;
	int			ties;			/* exact distance ties: a set of the mutation check */
	double	   *v;
	void	   *x;
} dataset;

static dataset
ds_new(const char *name, int64_t n, int32_t d, gc_dtype dt)
{
	dataset		s;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "%s %s", name, dt == GC_F64 ? "f64" : "f32");
	s.n = n;
	s.d = d;
	s.dtype = dt;
	s.metric = GC_METRIC_EUCLIDEAN;
	s.v = malloc(sizeof(double) * (size_t) (n * d));
	return s;
}

/* Converts v to the element type (v then holds the rounded values); cosine: unit rows. */
static void
ds_finish(dataset *s)
{
	if (s->dtype == GC_F32)
	{
		float	   *f = malloc(sizeof(float) * (size_t) (s->n * s->d));

		for (int64_t i = 0; i < s->n * s->d; i++)
			f[i] = (float) s->v[i];
		s->x = f;
	}
	else
	{
		s->x = malloc(sizeof(double) * (size_t) (s->n * s->d));
		memcpy(s->x, s->v, sizeof(double) * (size_t) (s->n * s->d));
	}
	if (s->metric == GC_METRIC_COSINE)
		CHECK(gc_unit_rows(s->x, s->dtype, s->n, s->d) < 0, "%s: a zero row", s->name);
}

static void
ds_free(dataset *s)
{
	free(s->x);
	free(s->v);
}

/* Gaussian blobs (round_to > 0: values rounded to 1 / round_to, exact ties). */
static dataset
ds_blobs(const char *name, int64_t n, int32_t d, gc_dtype dt, int blobs, double spread, int round_to)
{
	dataset		s = ds_new(name, n, d, dt);

	for (int64_t i = 0; i < n; i++)
	{
		int			b = (int) (urand() * blobs);
		int			noise = urand() < 0.05;

		for (int32_t k = 0; k < d; k++)
		{
			double		c = noise ? urand() * 20.0 - 10.0 : (double) ((b * 7 + k * 3) % 11) - 5.0;
			double		val = noise ? c : c + spread * (b % 3 + 1) * nrand();

			if (round_to > 0)
				val = round(val * round_to) / round_to;
			s.v[i * d + k] = val;
		}
	}
	s.ties = round_to > 0;
	return s;
}

/* n rows copied from `distinct` rows of small integers: duplicates and ties. */
static dataset
ds_dups(const char *name, int64_t n, int32_t d, gc_dtype dt, int distinct)
{
	dataset		s = ds_new(name, n, d, dt);

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		src = (int64_t) (urand() * distinct);

		for (int32_t k = 0; k < d; k++)
			s.v[i * d + k] = (double) ((src * 37 + k * 11) % 17);
	}
	s.ties = 1;
	return s;
}

/* n rows on a lattice of d coordinates, each one of levels values 0.1 apart. */
static dataset
ds_lattice(const char *name, int64_t n, int32_t d, gc_dtype dt, int levels)
{
	dataset		s = ds_new(name, n, d, dt);

	for (int64_t i = 0; i < n * d; i++)
		s.v[i] = (double) (int) (urand() * levels) / 10.0;
	s.ties = 1;
	return s;
}

/* ---------------------------------------------------------------- answers */

typedef struct answer
{
	int32_t    *cluster;
	double	   *prob;
	double	   *score;
	double	   *core;
	gc_hdbscan_tree tree;
	int64_t		n_clusters;
	gc_timing	timing;
	gc_status	st;
} answer;

static void
answer_alloc(answer *a, int64_t n)
{
	int64_t		cap = 2 * n;

	memset(a, 0, sizeof(*a));
	a->cluster = malloc(sizeof(int32_t) * (size_t) n);
	a->prob = malloc(sizeof(double) * (size_t) n);
	a->score = malloc(sizeof(double) * (size_t) n);
	a->core = malloc(sizeof(double) * (size_t) n);
	a->tree.capacity = cap;
	a->tree.parent = malloc(sizeof(int64_t) * (size_t) cap);
	a->tree.child = malloc(sizeof(int64_t) * (size_t) cap);
	a->tree.child_row = malloc(sizeof(int64_t) * (size_t) cap);
	a->tree.lambda_val = malloc(sizeof(double) * (size_t) cap);
	a->tree.child_size = malloc(sizeof(int64_t) * (size_t) cap);
	a->tree.node_selected = malloc((size_t) cap);
	a->tree.node_cluster = malloc(sizeof(int32_t) * (size_t) cap);
}

static void
answer_free(answer *a)
{
	free(a->cluster);
	free(a->prob);
	free(a->score);
	free(a->core);
	free(a->tree.parent);
	free(a->tree.child);
	free(a->tree.child_row);
	free(a->tree.lambda_val);
	free(a->tree.child_size);
	free(a->tree.node_selected);
	free(a->tree.node_cluster);
}

static gc_hdbscan_params
params(const dataset *s, int32_t mcs, int32_t ms)
{
	gc_hdbscan_params p = unit_hdbscan_params(mcs, ms);

	p.metric = s->metric;
	return p;
}

/* The CPU back end on path (1 the pair engine, -1 the tree, 0 the rule), margin as given. */
static void
run_path(const dataset *s, const gc_hdbscan_params *p, answer *a, int threads, int path, double margin)
{
	gc_exec		e;
	gc_hdbscan_result r;

	unit_threads = threads;
	e = unit_exec(NULL, &a->timing);
	unit_tuning.pair_path = path;
	unit_tuning.pair_margin = margin;
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->prob;
	r.outlier_score = a->score;
	r.core_distance = a->core;
	r.tree = &a->tree;
	a->st = gc_cpu_api()->hdbscan(&e, s->x, s->dtype, s->n, s->d, p, &r);
	a->n_clusters = r.n_clusters;
	CHECK(a->st == GC_OK, "%s path %d: %s", s->name, path, unit_error());
}

static int
same_double(double a, double b)
{
	return memcmp(&a, &b, sizeof(double)) == 0;
}

/* Rows (and condensed tree rows) where b differs from a; 0 when identical. */
static int64_t
differ(const dataset *s, const answer *a, const answer *b)
{
	int64_t		bad = a->n_clusters != b->n_clusters;

	for (int64_t i = 0; i < s->n; i++)
		bad += !same_double(a->core[i], b->core[i]) || a->cluster[i] != b->cluster[i] ||
			!same_double(a->prob[i], b->prob[i]) || !same_double(a->score[i], b->score[i]);
	if (a->tree.rows != b->tree.rows || a->tree.nodes != b->tree.nodes)
		return bad + 1;
	for (int64_t i = 0; i < a->tree.rows; i++)
		bad += a->tree.parent[i] != b->tree.parent[i] || a->tree.child[i] != b->tree.child[i] ||
			a->tree.child_row[i] != b->tree.child_row[i] || a->tree.child_size[i] != b->tree.child_size[i] ||
			!same_double(a->tree.lambda_val[i], b->tree.lambda_val[i]);
	for (int64_t i = 0; i < a->tree.nodes; i++)
		bad += a->tree.node_selected[i] != b->tree.node_selected[i] ||
			a->tree.node_cluster[i] != b->tree.node_cluster[i];
	return bad;
}

/* ---------------------------------------------------------------- the spanning tree by brute force */

static double
ref_dist2(const dataset *s, int64_t a, int64_t b)
{
	if (s->dtype == GC_F64)
		return gc_dist2_f64((const double *) s->x + a * s->d, (const double *) s->x + b * s->d, s->d);
	return gc_dist2((const float *) s->x + a * s->d, (const float *) s->x + b * s->d, s->d);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static int
cmp_edge(const void *a, const void *b)
{
	const gc_hdbscan_edge *x = a,
			   *y = b;

	return gc_hdbscan_edge_less(x->w, x->lo, x->hi, y->w, y->lo, y->hi) ? -1
		: gc_hdbscan_edge_less(y->w, y->lo, y->hi, x->w, x->lo, x->hi);
}

/* Core distances and Prim's spanning tree under the order of edges, sorted. */
static void
ref_tree(const dataset *s, int32_t ms, double *core, gc_hdbscan_edge *mst)
{
	int64_t		n = s->n;
	double	   *row = malloc(sizeof(double) * (size_t) n),
			   *bw = malloc(sizeof(double) * (size_t) n);
	int32_t    *blo = malloc(sizeof(int32_t) * (size_t) n),
			   *bhi = malloc(sizeof(int32_t) * (size_t) n);
	uint8_t    *in = calloc((size_t) n, 1);
	int64_t		cur = 0;

	for (int64_t i = 0; i < n; i++)
	{
		for (int64_t j = 0; j < n; j++)
			row[j] = gc_metric_distance(s->metric, ref_dist2(s, i, j));
		qsort(row, (size_t) n, sizeof(double), cmp_double);
		core[i] = row[ms - 1];
		bw[i] = INFINITY;
		blo[i] = INT32_MAX;
		bhi[i] = INT32_MAX;
	}
	in[0] = 1;
	for (int64_t e = 0; e < n - 1; e++)
	{
		int64_t		next = -1;

		for (int64_t j = 0; j < n; j++)
		{
			double		w;
			int32_t		lo = (int32_t) (cur < j ? cur : j),
						hi = (int32_t) (cur < j ? j : cur);

			if (in[j])
				continue;
			w = gc_hdbscan_mrd(core[cur], core[j], gc_metric_distance(s->metric, ref_dist2(s, cur, j)));
			if (gc_hdbscan_edge_less(w, lo, hi, bw[j], blo[j], bhi[j]))
			{
				bw[j] = w;
				blo[j] = lo;
				bhi[j] = hi;
			}
			if (next < 0 || gc_hdbscan_edge_less(bw[j], blo[j], bhi[j], bw[next], blo[next], bhi[next]))
				next = j;
		}
		mst[e].w = bw[next];
		mst[e].lo = blo[next];
		mst[e].hi = bhi[next];
		in[next] = 1;
		cur = next;
	}
	qsort(mst, (size_t) (n - 1), sizeof(gc_hdbscan_edge), cmp_edge);
	free(row);
	free(bw);
	free(blo);
	free(bhi);
	free(in);
}

/*
 * The engine's core distances and spanning tree (gc_hdbscan_pairs, on
 * threads threads, margin as given) against the brute force's; returns the
 * core distances and edges that differ.
 */
static int64_t
mst_differ(const dataset *s, int32_t ms, int threads, double margin)
{
	int64_t		n = s->n,
				bad = 0;
	double	   *core = malloc(sizeof(double) * (size_t) n),
			   *rcore = malloc(sizeof(double) * (size_t) n);
	gc_hdbscan_edge *mst = malloc(sizeof(gc_hdbscan_edge) * (size_t) n),
			   *rmst = malloc(sizeof(gc_hdbscan_edge) * (size_t) n);
	gc_tuning	tu = gc_tuning_defaults();
	gc_timing	timing;
	gc_error	err;
	gc_core_ctx ctx;
	gc_hdbscan_params p = params(s, 5, ms);
	gc_status	st;

	memset(&timing, 0, sizeof(timing));
	memset(&err, 0, sizeof(err));
	tu.pair_margin = margin;
	ctx.cancel = NULL;
	ctx.cancel_arg = NULL;
	ctx.tuning = &tu;
	ctx.timing = &timing;
	ctx.err = &err;
	ctx.pool = gc_pool_create(&ctx, threads);
	st = gc_hdbscan_pairs(&ctx, s->x, s->dtype, n, s->d, &p, core, mst);
	gc_pool_free(ctx.pool);
	CHECK(st == GC_OK, "%s: gc_hdbscan_pairs: %s", s->name, err.message);
	ref_tree(s, ms, rcore, rmst);
	if (st == GC_OK)
	{
		qsort(mst, (size_t) (n - 1), sizeof(gc_hdbscan_edge), cmp_edge);
		for (int64_t i = 0; i < n; i++)
			bad += !same_double(core[i], rcore[i]);
		for (int64_t i = 0; i < n - 1; i++)
			bad += !same_double(mst[i].w, rmst[i].w) || mst[i].lo != rmst[i].lo || mst[i].hi != rmst[i].hi;
	}
	else
		bad = n;
	free(core);
	free(rcore);
	free(mst);
	free(rmst);
	return bad;
}

/* ---------------------------------------------------------------- cancel */

static int	cancel_after = 0;

static int
cancel_cb(void *arg)
{
	(void) arg;
	return --cancel_after <= 0;
}

/*
 * Both paths on s, several thread counts, bit for bit; the engine's tree
 * against the brute force; returns what margin 0 changes (tie sets).
 */
static int64_t
check_set(dataset *s, int32_t mcs, int32_t ms)
{
	gc_hdbscan_params p = params(s, mcs, ms);
	answer		idx,
				prs,
				mut;
	int64_t		m = 0,
				bad;

	ds_finish(s);
	answer_alloc(&idx, s->n);
	answer_alloc(&prs, s->n);
	answer_alloc(&mut, s->n);
	run_path(s, &p, &idx, 3, -1, 1.0);
	CHECK(idx.timing.path == GC_PATH_INDEX, "%s: the index path reported %d", s->name, idx.timing.path);
	for (int th = 1; th <= 3; th += 2)
	{
		run_path(s, &p, &prs, th, 1, 1.0);
		CHECK(prs.timing.path == GC_PATH_PAIRS, "%s: the pair path reported %d", s->name, prs.timing.path);
		bad = differ(s, &idx, &prs);
		CHECK(bad == 0, "%s (ms %d, %d threads): %lld rows differ between the pair engine and the tree",
			  s->name, ms, th, (long long) bad);
	}
	printf("  %-26s n=%-5lld d=%-3d ms=%-2d clusters=%-3lld exact pairs=%lld of %lld\n", s->name,
		   (long long) s->n, s->d, ms, (long long) prs.n_clusters, (long long) prs.timing.pair_exact,
		   (long long) (s->n * s->n));
	bad = mst_differ(s, ms, 2, 1.0);
	CHECK(bad == 0, "%s: %lld core distances or spanning tree edges differ from the brute force", s->name,
		  (long long) bad);
	if (s->ties)
	{
		m = mst_differ(s, ms, 2, 0.0);
		run_path(s, &p, &mut, 2, 1, 0.0);
		m += differ(s, &idx, &mut);
		printf("  %-26s margin 0: %lld differ\n", s->name, (long long) m);
	}
	answer_free(&idx);
	answer_free(&prs);
	answer_free(&mut);
	ds_free(s);
	return m;
}

int
main(void)
{
	int64_t		mut = 0;

	printf("test_hdbscan_pairs:\n");
	for (int f = 0; f < 2; f++)
	{
		gc_dtype	dt = f ? GC_F64 : GC_F32;
		dataset		s;

		s = ds_blobs("blobs 16", 2600, 16, dt, 6, 0.4, 0);
		mut += check_set(&s, 10, 5);
		s = ds_blobs("blobs 64", 1100, 64, dt, 5, 0.5, 0);
		mut += check_set(&s, 8, 4);
		s = ds_blobs("blobs 256", 500, 256, dt, 4, 0.5, 0);
		mut += check_set(&s, 8, 3);
		s = ds_blobs("cosine 384", 600, 384, dt, 5, 0.4, 0);
		s.metric = GC_METRIC_COSINE;
		mut += check_set(&s, 8, 5);
		s = ds_dups("duplicates 20", 1500, 20, dt, 40);
		mut += check_set(&s, 10, 5);
		s = ds_blobs("far outlier 64", 900, 64, dt, 4, 0.5, 0);
		for (int32_t k = 0; k < s.d; k++)
			s.v[17 * s.d + k] = 1e6 + k;
		mut += check_set(&s, 8, 5);
		s = ds_blobs("one decimal 16", 2300, 16, dt, 5, 0.3, 10);
		mut += check_set(&s, 10, 5);
		s = ds_blobs("one decimal 64", 900, 64, dt, 4, 0.3, 10);
		mut += check_set(&s, 8, 1);
		s = ds_lattice("lattice 16", 1500, 16, dt, 3);
		mut += check_set(&s, 10, 6);
		s = ds_lattice("lattice 32", 800, 32, dt, 2);
		mut += check_set(&s, 10, 40);	/* min_samples above the kept lists */
	}
	CHECK(mut > 0, "a screen without its error margin gave the right answer on every tie set: "
		  "the tie sets do not test the margin");

	/* the rule: the engine from GC_HDBSCAN_PAIR_MIN_DIMS features on, the tree below */
	{
		dataset		lo = ds_blobs("rule 31", 300, GC_HDBSCAN_PAIR_MIN_DIMS - 1, GC_F32, 3, 0.5, 0),
					hi = ds_blobs("rule 32", 300, GC_HDBSCAN_PAIR_MIN_DIMS, GC_F32, 3, 0.5, 0);
		gc_hdbscan_params p = params(&lo, 5, 5);
		answer		a;

		ds_finish(&lo);
		ds_finish(&hi);
		answer_alloc(&a, 300);
		run_path(&lo, &p, &a, 2, 0, 1.0);
		CHECK(a.timing.path == GC_PATH_INDEX, "31 features: path %d", a.timing.path);
		run_path(&hi, &p, &a, 2, 0, 1.0);
		CHECK(a.timing.path == GC_PATH_PAIRS, "32 features: path %d", a.timing.path);
		CHECK(a.timing.pair_exact > 0, "32 features: no exact pairs counted");
		answer_free(&a);
		ds_free(&lo);
		ds_free(&hi);
	}

	/* cancel on the pair engine */
	{
		dataset		s = ds_blobs("cancel", 20000, 32, GC_F32, 5, 0.5, 0);
		gc_hdbscan_params p = params(&s, 10, 5);
		answer		a;
		gc_exec		e;
		gc_hdbscan_result r;
		gc_status	st;

		ds_finish(&s);
		answer_alloc(&a, s.n);
		unit_threads = 2;
		cancel_after = 3;
		e = unit_exec(cancel_cb, NULL);
		unit_tuning.pair_path = 1;
		memset(&r, 0, sizeof(r));
		r.cluster = a.cluster;
		r.probability = a.prob;
		r.outlier_score = a.score;
		st = gc_cpu_api()->hdbscan(&e, s.x, s.dtype, s.n, s.d, &p, &r);
		CHECK(st == GC_ERR_CANCELLED, "cancel: status %d", (int) st);
		answer_free(&a);
		ds_free(&s);
	}
	UNIT_DONE();
}
