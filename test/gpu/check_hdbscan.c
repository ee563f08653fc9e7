/*
 * check_hdbscan.c
 *    HDBSCAN of the table under test (the GPU back end) against the CPU back
 *    end, part of gpu_vs_cpu (see gpu_vs_cpu.c).
 *
 * The answer is defined exactly (common/backend.h, common/hdbscan.h): the
 * core distances, the minimum spanning tree (unique under the order
 * (weight, lower row, higher row)) and, from them, everything else.  So
 * labels, the number of clusters, probabilities, GLOSH outlier scores and
 * core distances must be identical, bit for bit, and where a case asks for
 * it the condensed tree as well.
 *
 * The cases: blobs with noise, uniform rows, duplicates (every row equal;
 * rows drawn from 1,000 points), a far outlier, far outliers at 1e20, a
 * lattice with exactly equal distances (in a shuffled order, so that ties
 * are decided by the row order), 1-D, 3-D, 8-D, 64-D, rows spread only in
 * later features, float and double rows, the cosine metric, min_samples 1,
 * above 32 (the searches' heap in global memory) and equal to n, leaf and
 * EOM selection, cluster_selection_epsilon, allow_single_cluster and
 * max_cluster_size.  Then the error paths: cancel at the first questions,
 * a callback that never says yes, a deadline in the middle of the work, a
 * non-finite coordinate, bad parameters, no rows and an input too large for
 * the device, each followed by a
 * check that the free device memory is what it was; 200 cancels in a row at
 * random questions on float and on double rows (h_cancel_storm), on 1M
 * rows (200,000 with --quick).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "metric.h"
#include "pairs.h"

typedef struct hd_answer
{
	int64_t		n;
	int32_t    *cluster;
	double	   *probability;
	double	   *outlier;
	double	   *core;
	gc_hdbscan_tree tree;		/* arrays allocated when the case wants the tree */
	int			want_tree;
	int64_t		n_clusters;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} hd_answer;

static void *
hd_malloc(size_t bytes)
{
	void	   *p = malloc(bytes > 0 ? bytes : 1);

	if (!p)
	{
		fprintf(stderr, "gpu_vs_cpu: out of host memory\n");
		exit(2);
	}
	return p;
}

static void
hd_alloc(hd_answer *a, int64_t n, int want_tree)
{
	size_t		cap = (size_t) (2 * (n > 0 ? n : 1));

	memset(a, 0, sizeof(*a));
	a->n = n;
	a->cluster = (int32_t *) hd_malloc(sizeof(int32_t) * (size_t) n);
	a->probability = (double *) hd_malloc(sizeof(double) * (size_t) n);
	a->outlier = (double *) hd_malloc(sizeof(double) * (size_t) n);
	a->core = (double *) hd_malloc(sizeof(double) * (size_t) n);
	a->want_tree = want_tree;
	if (want_tree)
	{
		a->tree.capacity = (int64_t) cap;
		a->tree.parent = (int64_t *) hd_malloc(sizeof(int64_t) * cap);
		a->tree.child = (int64_t *) hd_malloc(sizeof(int64_t) * cap);
		a->tree.child_row = (int64_t *) hd_malloc(sizeof(int64_t) * cap);
		a->tree.lambda_val = (double *) hd_malloc(sizeof(double) * cap);
		a->tree.child_size = (int64_t *) hd_malloc(sizeof(int64_t) * cap);
		a->tree.node_selected = (uint8_t *) hd_malloc(cap);
		a->tree.node_cluster = (int32_t *) hd_malloc(sizeof(int32_t) * cap);
	}
}

static void
hd_free(hd_answer *a)
{
	free(a->cluster);
	free(a->probability);
	free(a->outlier);
	free(a->core);
	if (a->want_tree)
	{
		free(a->tree.parent);
		free(a->tree.child);
		free(a->tree.child_row);
		free(a->tree.lambda_val);
		free(a->tree.child_size);
		free(a->tree.node_selected);
		free(a->tree.node_cluster);
	}
}

/* The parameters of one run. */
typedef struct hd_params
{
	int			mcs;			/* min_cluster_size */
	int			ms;				/* min_samples; 0: min_cluster_size, -1: n */
	double		eps;			/* cluster_selection_epsilon */
	int			leaf;			/* leaf selection instead of EOM */
	int			single;			/* allow_single_cluster */
	int64_t		maxcs;			/* max_cluster_size, 0: none */
} hd_params;

static gc_hdbscan_params
hd_make_params(const hd_params *q, int64_t n, gc_metric m)
{
	gc_hdbscan_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.min_cluster_size = q->mcs;
	p.min_samples = q->ms > 0 ? q->ms : q->ms < 0 ? (int32_t) n : q->mcs;
	p.cluster_selection_epsilon = q->eps;
	p.method = q->leaf ? GC_HDBSCAN_LEAF : GC_HDBSCAN_EOM;
	p.allow_single_cluster = q->single;
	p.max_cluster_size = q->maxcs;
	p.metric = m;
	return p;
}

/* One HDBSCAN call on rows x of element type t. */
static void
hd_run(const gc_backend_api *api, hd_answer *a, const void *x, gc_dtype t, gc_metric m, int64_t n,
	   int32_t d, const gc_hdbscan_params *p, const gc_tuning *tuning, gc_h_cancel *cancel)
{
	gc_hdbscan_result r;
	gc_exec		e = gc_h_exec(tuning, cancel, &a->timing);
	double		t0;

	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->probability;
	r.outlier_score = a->outlier;
	r.core_distance = a->core;
	r.tree = a->want_tree ? &a->tree : NULL;
	if (!api->hdbscan)
	{
		a->status = GC_ERR_NOT_BUILT;
		snprintf(a->error, sizeof(a->error), "the %s back end has no HDBSCAN entry", api->name);
		return;
	}
	t0 = gc_h_now_ms();
	a->status = api->hdbscan(&e, x, t, n, d, p, &r);
	a->wall_ms = gc_h_now_ms() - t0;
	a->n_clusters = r.n_clusters;
	if (a->status == GC_OK)
		a->error[0] = '\0';
	else
		gc_h_error_text(api, a->error, sizeof(a->error));
}

/* The first i < n where the doubles a and b differ in their bits, or -1. */
static int64_t
hd_first_diff_f64(const double *a, const double *b, int64_t n, int64_t *count)
{
	int64_t		first = -1;

	*count = 0;
	for (int64_t i = 0; i < n; i++)
		if (memcmp(a + i, b + i, sizeof(double)) != 0)
		{
			if (first < 0)
				first = i;
			(*count)++;
		}
	return first;
}

/* The condensed trees are equal (rows and nodes); "" or what differs into buf. */
static int
hd_same_tree(const gc_hdbscan_tree *a, const gc_hdbscan_tree *b, char *buf, size_t size)
{
	if (a->rows != b->rows || a->nodes != b->nodes)
	{
		snprintf(buf, size, "tree of %lld rows / %lld nodes vs %lld / %lld", (long long) a->rows,
				 (long long) a->nodes, (long long) b->rows, (long long) b->nodes);
		return 0;
	}
	for (int64_t i = 0; i < a->rows; i++)
		if (a->parent[i] != b->parent[i] || a->child[i] != b->child[i] ||
			a->child_row[i] != b->child_row[i] || a->child_size[i] != b->child_size[i] ||
			memcmp(a->lambda_val + i, b->lambda_val + i, sizeof(double)) != 0)
		{
			snprintf(buf, size, "tree row %lld differs", (long long) i);
			return 0;
		}
	for (int64_t i = 0; i < a->nodes; i++)
		if (a->node_selected[i] != b->node_selected[i] || a->node_cluster[i] != b->node_cluster[i])
		{
			snprintf(buf, size, "tree node %lld differs", (long long) i);
			return 0;
		}
	buf[0] = '\0';
	return 1;
}

/*
 * Compares an answer with the reference; returns 1 when they agree (bit for
 * bit, or the same error) and writes "identical" or what differs into verdict.
 */
static int
hd_compare(const hd_answer *ref, const hd_answer *t, int64_t n, char *verdict, size_t size)
{
	int64_t		diff_c = 0,
				first_c = -1,
				diff_p,
				diff_o,
				diff_k;
	int64_t		first_p,
				first_o,
				first_k;
	char		tree[256] = "";
	int			tree_ok = 1;

	{
		int			same = 0;

		if (h_status_verdict(ref->status, ref->error, t->status, t->error, verdict, size, &same))
			return same;
	}
	for (int64_t i = 0; i < n; i++)
		if (ref->cluster[i] != t->cluster[i])
		{
			if (first_c < 0)
				first_c = i;
			diff_c++;
		}
	first_p = hd_first_diff_f64(ref->probability, t->probability, n, &diff_p);
	first_o = hd_first_diff_f64(ref->outlier, t->outlier, n, &diff_o);
	first_k = hd_first_diff_f64(ref->core, t->core, n, &diff_k);
	if (ref->want_tree && t->want_tree)
		tree_ok = hd_same_tree(&ref->tree, &t->tree, tree, sizeof(tree));
	if (diff_c == 0 && diff_p == 0 && diff_o == 0 && diff_k == 0 && tree_ok &&
		ref->n_clusters == t->n_clusters)
	{
		snprintf(verdict, size, "identical%s", ref->want_tree ? " (with the tree)" : "");
		return 1;
	}
	snprintf(verdict, size,
			 "DIFFERENT: clusters %lld vs %lld; %lld labels (first row %lld: %d vs %d), "
			 "%lld probabilities (first %lld), %lld outlier scores (first %lld), "
			 "%lld core distances (first row %lld: %.17g vs %.17g)%s%s",
			 (long long) ref->n_clusters, (long long) t->n_clusters, (long long) diff_c,
			 (long long) first_c, first_c >= 0 ? ref->cluster[first_c] : 0,
			 first_c >= 0 ? t->cluster[first_c] : 0, (long long) diff_p, (long long) first_p,
			 (long long) diff_o, (long long) first_o, (long long) diff_k, (long long) first_k,
			 first_k >= 0 ? ref->core[first_k] : 0.0, first_k >= 0 ? t->core[first_k] : 0.0,
			 tree[0] ? "; " : "", tree);
	return 0;
}

/* ------------------------------------------------------------------ data */

/* A deterministic shuffle of the rows x [n, d] (so that a lattice is not in lattice order). */
static void
hd_shuffle(float *x, int64_t n, int32_t d, uint64_t seed)
{
	float	   *tmp = (float *) hd_malloc(sizeof(float) * (size_t) d);
	uint64_t	s = seed * 6364136223846793005ULL + 1442695040888963407ULL;

	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j;

		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (int64_t) ((s >> 17) % (uint64_t) (i + 1));
		memcpy(tmp, x + i * d, sizeof(float) * (size_t) d);
		memcpy(x + i * d, x + j * d, sizeof(float) * (size_t) d);
		memcpy(x + j * d, tmp, sizeof(float) * (size_t) d);
	}
	free(tmp);
}

/*
 * The rows of a shape: those of test/data/gc_testdata.h, or one made here:
 *   same      every row (1.5, -2.25, 3, ...): all equal;
 *   lattice   the points of an integer lattice of side ceil(n^(1/d)) (the
 *             first n of them), shuffled: exactly equal distances;
 *   farone    blobs and one row 1e15 away from them (the last);
 *   dupblobs  blobs whose every row is repeated 8 times, shuffled.
 */
static float *
hd_shape(const char *shape, int64_t n, int32_t d)
{
	float	   *x;

	if (strcmp(shape, "same") == 0)
	{
		x = (float *) hd_malloc(sizeof(float) * (size_t) (n * d));
		for (int64_t i = 0; i < n; i++)
			for (int32_t k = 0; k < d; k++)
				x[i * d + k] = (float) (k == 0 ? 1.5 : k == 1 ? -2.25 : (double) k);
		return x;
	}
	if (strcmp(shape, "lattice") == 0)
	{
		int64_t		side = (int64_t) ceil(pow((double) n, 1.0 / d) - 1e-9);

		if (side < 2)
			side = 2;
		x = (float *) hd_malloc(sizeof(float) * (size_t) (n * d));
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		r = i;

			for (int32_t k = 0; k < d; k++)
			{
				x[i * d + k] = (float) (r % side);
				r /= side;
			}
		}
		hd_shuffle(x, n, d, (uint64_t) n * 31 + (uint64_t) d);
		return x;
	}
	if (strcmp(shape, "farone") == 0)
	{
		x = h_generate("blobs", n, d);
		for (int32_t k = 0; k < d; k++)
			x[(n - 1) * d + k] = (float) (k == 0 ? 1e15 : 50.0);
		return x;
	}
	if (strcmp(shape, "dupblobs") == 0)
	{
		int64_t		m = (n + 7) / 8;
		float	   *b = h_generate("blobs", m, d);

		x = (float *) hd_malloc(sizeof(float) * (size_t) (n * d));
		for (int64_t i = 0; i < n; i++)
			memcpy(x + i * d, b + (i % m) * d, sizeof(float) * (size_t) d);
		free(b);
		hd_shuffle(x, n, d, (uint64_t) n * 17 + (uint64_t) d);
		return x;
	}
	return h_generate(shape, n, d);
}

/* ------------------------------------------------------------------ the differential cases */

typedef struct hd_case
{
	const char *shape;
	int64_t		n;
	int32_t		d;
	hd_params	p;
	gc_dtype	dtype;			/* GC_F32 (default) or GC_F64 */
	gc_metric	metric;			/* Euclidean (default) or cosine */
	double		scale;			/* GC_F64: values rounded to multiples of 1/scale; 0: the floats */
	double		shift;			/* added to every coordinate before the rest (cosine: spreads directions) */
	int			tree;			/* compare the condensed tree too */
	int			host_sums;		/* on the GPU, the host must sum a cluster of more than 65,536 terms (counts[2]) */
	int			pair_path;		/* tuning.pair_path of both back ends: 0 the rules (gc_hdbscan_pairs_chosen, gc_hdbscan_gpu_pairs_chosen), 1 the engine, -1 the trees */
} hd_case;

#define F64 GC_F64
#define F32 GC_F32
#define EUC GC_METRIC_EUCLIDEAN
#define COS GC_METRIC_COSINE

/* {mcs, ms, eps, leaf, single, maxcs} */
static const hd_case hd_cases[] = {
	/* 2-D blobs with 5 % noise, the benchmark's parameters, and each selection rule */
	{"blobs", 10000, 2, {5, 0, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	{"blobs", 1000000, 2, {10, 10, 0, 0, 0, 0}},
	{"blobs", 200000, 2, {10, 10, 0, 1, 0, 0}},
	{"blobs", 200000, 2, {10, 10, 0.5, 0, 0, 0}},
	{"blobs", 200000, 2, {10, 10, 2.0, 1, 0, 0}},
	{"blobs", 100000, 2, {50, 5, 0, 0, 0, 2000}},
	{"blobs", 10000, 2, {5, 5, 0, 0, 1, 0}, F32, EUC, 0, 0, 1},
	{"blobs", 100000, 2, {100, 1, 0, 0, 0, 0}},		/* min_samples 1: core distances 0 */
	{"blobs", 50000, 2, {20, 40, 0, 0, 0, 0}},		/* min_samples > 32: heaps in global memory */
	{"blobs", 2000, 2, {10, -1, 0, 0, 0, 0}},		/* min_samples = n */
	{"blobs", 2000, 2, {10, -1, 0, 0, 1, 0}},
	{"uniform", 200000, 2, {5, 0, 0, 0, 0, 0}},
	/* duplicates */
	{"same", 5000, 2, {5, 0, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	{"same", 5000, 2, {5, 0, 0, 0, 1, 0}, F32, EUC, 0, 0, 1},
	/*
	 * identical rows: every edge weighs 0, the tree is the star of row 0 and
	 * each merge adds one row, so the root cluster has a term per row and
	 * its sum is the host's (more than 65,536 terms)
	 */
	{"same", 300000, 3, {10, 10, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 1},
	{"same", 100000, 2, {10, 1, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 1},
	{"dups", 500000, 2, {10, 10, 0, 0, 0, 0}},
	{"dups", 200000, 3, {50, 20, 0, 1, 0, 0}},
	{"dups", 100000, 8, {10, 5, 0, 0, 0, 0}},
	{"dupblobs", 400000, 2, {10, 5, 0, 0, 0, 0}},
	{"dupblobs", 100000, 3, {20, 20, 0, 0, 0, 0}, F64, EUC, 1e4},
	/* far outliers */
	{"farone", 100000, 2, {10, 10, 0, 0, 0, 0}},
	{"far", 200000, 2, {10, 5, 0, 0, 0, 0}},
	{"outliers", 100000, 2, {10, 5, 0, 0, 0, 0}},	/* +-1e20 */
	/* lattices: exactly equal distances everywhere */
	{"lattice", 90000, 2, {5, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	{"lattice", 250000, 2, {10, 1, 0, 0, 0, 0}},
	{"lattice", 64000, 3, {8, 7, 0, 0, 0, 0}},
	{"lattice", 90000, 2, {5, 3, 0, 1, 0, 0}, F64, EUC, 0},
	{"lattice", 6561, 8, {5, 5, 0, 0, 0, 0}},
	/* 1-D, 3-D, 8-D, 64-D, spread in later features only */
	{"blobs", 200000, 1, {10, 10, 0, 0, 0, 0}},
	{"uniform", 100000, 1, {5, 5, 0, 0, 0, 0}},
	{"blobs", 500000, 3, {20, 5, 0, 0, 0, 0}},
	{"gantao", 1000000, 3, {100, 2, 0, 0, 0, 0}},
	{"blobs", 100000, 8, {10, 10, 0, 0, 0, 0}},
	{"blobs", 20000, 64, {10, 5, 0, 0, 0, 0}},
	{"flat", 20000, 8, {10, 5, 0, 0, 0, 0}},
	/*
	 * 9 to 12 features, around the GPU's own rule (the engine from 10 on,
	 * gc_hdbscan_gpu_pairs_chosen, where the CPU keeps its k-d tree): the
	 * GPU's hierarchy at 9, its engine from 10, both against the CPU's
	 * tree; and the hierarchy forced at 12 (boxes in every coordinate)
	 */
	{"blobs", 50000, 9, {10, 10, 0, 0, 0, 0}},
	{"uniform", 30000, 10, {10, 5, 0, 0, 0, 0}},
	{"dups", 20000, 11, {10, 5, 0, 0, 0, 0}},
	{"farone", 20000, 12, {10, 10, 0, 0, 0, 0}, F64, EUC, 1e6},
	{"blobs", 20000, 12, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, -1},
	/*
	 * 16 features and more: the pair engine on both back ends
	 * (common/pairs.h; forced below 32 features, where the rule keeps the
	 * trees); ties
	 * (a 0/1 lattice, duplicates, every row equal: more tied candidates
	 * than the GPU keeps), far outliers, min_samples 1, 63 (the GPU's
	 * longest lists), 64 (the tree on the GPU) and n
	 */
	{"blobs", 25000, 16, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 20000, 16, {10, 10, 0, 0, 0, 0}, F64, EUC, 1e6, 0, 0, 0, 1},
	{"lattice", 6000, 16, {5, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"lattice", 4000, 16, {5, 3, 0, 1, 0, 0}, F32, EUC, 0, 0, 1, 0, 1},
	{"same", 2000, 16, {5, 0, 0, 0, 1, 0}, F32, EUC, 0, 0, 1, 0, 1},
	{"dupblobs", 20000, 16, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"dups", 20000, 16, {10, 10, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"farone", 20000, 16, {10, 10, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"outliers", 20000, 16, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 20000, 16, {10, 1, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 20000, 16, {20, 63, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 20000, 16, {20, 64, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 50, 16, {5, -1, 0, 0, 0, 0}, F32, EUC, 0, 0, 1, 0, 1},
	{"dups", 20000, 64, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 10000, 64, {10, 5, 0, 0, 0, 0}, F64, EUC, 1e6, 0, 0, 0, 1},
	{"blobs", 10000, 64, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 1, 0, 1},
	/* the pair engine forced below 16 features, and the trees forced above */
	{"blobs", 20000, 2, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"lattice", 10000, 2, {5, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, 1},
	{"blobs", 20000, 8, {10, 5, 0, 0, 0, 0}, F64, EUC, 1e6, 0, 0, 0, 1},
	{"blobs", 10000, 64, {10, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 0, 0, -1},
	{"wide", 5000, 16, {10, 5, 0, 0, 0, 0}, F32, COS, 0, 0, 0, 0, -1},
	{"close", 300000, 2, {20, 10, 0, 0, 0, 0}},
	{"chain", 1000000, 2, {10, 5, 0, 0, 0, 0}},	/* a deep hierarchy, rows added one or a few at a time */
	/* rows and answers of 64 MB and more: the copies through pinned memory on several threads */
	{"blobs", 10000000, 2, {10, 10, 0, 0, 0, 0}},
	{"gantao", 6000000, 3, {100, 2, 0, 0, 0, 0}},
	{"chain", 300000, 1, {2, 1, 0, 0, 0, 0}},
	/* double precision */
	{"round2", 1000000, 2, {10, 10, 0, 0, 0, 0}, F64, EUC, 100},
	{"latlon", 300000, 2, {10, 5, 0, 0, 0, 0}, F64, EUC, 1e5},
	{"blobs", 300000, 3, {10, 10, 0, 0, 0, 0}, F64, EUC, 1e6},
	{"blobs", 100000, 8, {10, 5, 0, 1, 0, 0}, F64, EUC, 1e6},
	{"far", 100000, 2, {10, 10, 0, 0, 0, 0}, F64, EUC, 0},
	/* cosine */
	{"wide", 60000, 8, {10, 5, 0, 0, 0, 0}, F32, COS},
	{"wide", 20000, 64, {10, 5, 0, 0, 0, 0}, F64, COS},
	{"blobs", 300000, 2, {10, 10, 0, 0, 0, 0}, F64, COS, 1e6, -50},
	{"blobs", 100000, 3, {10, 10, 0.001, 0, 0, 0}, F32, COS, 0, -50},
	{"wide", 20000, 16, {10, 5, 0, 0, 0, 0}, F32, COS, 0, 0, 0, 0, 1},
	{"wide", 5000, 384, {10, 5, 0, 0, 0, 0}, F32, COS, 0, 0, 0, 0, 1},
	{"wide", 5000, 384, {10, 10, 0, 0, 0, 0}, F64, COS, 0, 0, 0, 0, 1},
	{"blobs", 5000, 384, {10, 5, 0, 0, 0, 0}, F32, COS, 0, -50, 0, 0, 1},
	/* few rows */
	{"blobs", 2, 2, {2, 1, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	{"blobs", 3, 2, {2, 2, 0, 0, 1, 0}, F32, EUC, 0, 0, 1},
	{"blobs", 1, 2, {2, 1, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	{"blobs", 100, 2, {5, 5, 0, 0, 0, 0}, F32, EUC, 0, 0, 1},
	/* few rows without the tree: the answer computed on the device */
	{"blobs", 2, 2, {2, 1, 0, 0, 0, 0}},
	{"blobs", 3, 2, {2, 2, 0, 0, 1, 0}},
	{"same", 50, 2, {5, 0, 0, 0, 1, 0}},
	{"blobs", 100, 2, {5, 5, 0, 1, 0, 0}},
};

/* The rows of a case in its element type and metric; exits when out of memory or a row has no direction. */
static void *
hd_rows(const hd_case *c)
{
	float	   *xf = hd_shape(c->shape, c->n, c->d);
	size_t		count = (size_t) c->n * (size_t) c->d;
	void	   *x = xf;

	if (c->dtype == GC_F64)
	{
		double	   *xd = (double *) hd_malloc(sizeof(double) * count);

		for (size_t i = 0; i < count; i++)
			xd[i] = (c->scale > 0 ? nearbyint((double) xf[i] * c->scale) / c->scale : (double) xf[i]) +
				c->shift;
		free(xf);
		x = xd;
	}
	else if (c->shift != 0)
		for (size_t i = 0; i < count; i++)
			xf[i] = (float) ((double) xf[i] + c->shift);
	if (c->metric == GC_METRIC_COSINE)
	{
		int64_t		zero = gc_unit_rows(x, c->dtype, c->n, c->d);

		if (zero >= 0)
		{
			fprintf(stderr, "gpu_vs_cpu: row %lld of %s has no direction\n", (long long) zero, c->shape);
			exit(2);
		}
	}
	return x;
}

/*
 * The labels alone (probabilities, outlier scores and core distances not
 * wanted: NULL, as gpu_hdbscan asks when the query reads no score) from
 * back end api equal ref's labels and count; detail says where not.
 */
static int
hd_labels_only(const gc_backend_api *api, const hd_answer *ref, const void *x, const hd_case *c,
			   const gc_hdbscan_params *p, const gc_tuning *tuning, char *detail, size_t size)
{
	hd_answer	a;
	int64_t		first = -1;
	double	   *prob,
			   *outlier,
			   *core;

	hd_alloc(&a, c->n, 0);
	prob = a.probability;
	outlier = a.outlier;
	core = a.core;
	a.probability = a.outlier = a.core = NULL;
	hd_run(api, &a, x, c->dtype, c->metric, c->n, c->d, p, tuning, NULL);
	for (int64_t i = 0; a.status == GC_OK && i < c->n && first < 0; i++)
		if (a.cluster[i] != ref->cluster[i])
			first = i;
	if (a.status != GC_OK)
		snprintf(detail, size, "%s labels only: status %s (%s)", api->name, gc_h_status_name(a.status), a.error);
	else if (first >= 0 || a.n_clusters != ref->n_clusters)
		snprintf(detail, size, "%s labels only: %lld clusters against %lld, first different label at row %lld",
				 api->name, (long long) a.n_clusters, (long long) ref->n_clusters, (long long) first);
	else
		snprintf(detail, size, "%s labels only: identical", api->name);
	a.probability = prob;
	a.outlier = outlier;
	a.core = core;
	hd_free(&a);
	return a.status == GC_OK && first < 0 && a.n_clusters == ref->n_clusters;
}

/* One data set through both back ends; prints one table row.  Returns 1 when they agreed. */
static int
hd_differential(const hd_case *c0)
{
	hd_case		c = *c0;
	void	   *x;
	hd_answer	ref,
				t;
	gc_hdbscan_params p;
	gc_tuning	tun = gc_tuning_defaults();
	const gc_tuning *tp = NULL;
	int64_t		noise = 0;
	char		name[64],
				what[200],
				verdict[1400];
	int			ok;

	c.n = h_rows(c.n, c.d);
	/* --quick: above three features HDBSCAN is near quadratic on both back ends; the same shapes, smaller */
	if (H.quick && c.d > 3 && c.n > 400000 / c.d)
		c.n = 400000 / c.d;
	if (c.p.ms > c.n)
		c.p.ms = -1;
	x = hd_rows(&c);
	p = hd_make_params(&c.p, c.n, c.metric);
	hd_alloc(&ref, c.n, c.tree);
	hd_alloc(&t, c.n, c.tree);
	snprintf(name, sizeof(name), "%s-%dd%s%s%s", c.shape, c.d, c.dtype == GC_F64 ? "-f64" : "",
			 c.metric == GC_METRIC_COSINE ? "-cos" : "",
			 c.pair_path > 0 ? "-pairs" : c.pair_path < 0 ? "-index" : "");
	if (c.pair_path != 0)
	{
		tun.pair_path = c.pair_path;
		tp = &tun;
	}

	hd_run(H.ref, &ref, x, c.dtype, c.metric, c.n, c.d, &p, tp, NULL);
	hd_run(H.test, &t, x, c.dtype, c.metric, c.n, c.d, &p, tp, NULL);
	for (int64_t i = 0; ref.status == GC_OK && i < c.n; i++)
		noise += ref.cluster[i] < 0;
	ok = hd_compare(&ref, &t, c.n, verdict, sizeof(verdict));
	if (!H.cpu_only && t.status == GC_OK && c.n >= 2)
	{
		/*
		 * the GPU's path: the pair engine where the rule or pair_path
		 * chooses it and min_samples + 1 <= 64 (kPairsK, cuda/hdbscan.cuh),
		 * the tree otherwise
		 */
		int			kk = p.min_samples < c.n ? p.min_samples + 1 : p.min_samples;
		int			want = gc_hdbscan_gpu_pairs_chosen(tp, c.d) && kk <= 64 ? GC_PATH_PAIRS : GC_PATH_INDEX;
		char		detail[120];

		snprintf(detail, sizeof(detail), "timing.path %d, expected %d", (int) t.timing.path, want);
		snprintf(what, sizeof(what), "hdbscan %s n=%lld: gpu path", name, (long long) c.n);
		h_check(t.timing.path == want, what, detail);
	}
	snprintf(what, sizeof(what), "hdbscan %s n=%lld mcs=%d ms=%d eps=%g %s%s maxcs=%lld", name,
			 (long long) c.n, p.min_cluster_size, p.min_samples, p.cluster_selection_epsilon,
			 c.p.leaf ? "leaf" : "eom", c.p.single ? " single" : "", (long long) c.p.maxcs);
	h_check(ok, what, verdict);
	if (ok && ref.status == GC_OK && c.n <= 200000 && !c.tree)
	{
		char		detail[1200];

		/* both back ends without the scores (the CPU on the smaller cases): the same labels */
		if (c.n <= 20000)
		{
			snprintf(what, sizeof(what), "hdbscan %s n=%lld: cpu labels only", name, (long long) c.n);
			h_check(hd_labels_only(H.ref, &ref, x, &c, &p, tp, detail, sizeof(detail)), what, detail);
		}
		snprintf(what, sizeof(what), "hdbscan %s n=%lld: %s labels only", name, (long long) c.n,
				 h_test_name());
		h_check(hd_labels_only(H.test, &ref, x, &c, &p, tp, detail, sizeof(detail)), what, detail);
	}
	if (c.host_sums && !H.cpu_only && c.n >= 100000 && t.status == GC_OK)
	{
		char		detail[200];

		/* counts[2]: the clusters whose stability the host summed (cuda/hdbscan_finish.cu) */
		snprintf(detail, sizeof(detail), "%lld clusters summed on the host", (long long) t.timing.counts[2]);
		snprintf(what, sizeof(what), "hdbscan %s n=%lld: the longest cluster summed on the host", name,
				 (long long) c.n);
		h_check(t.timing.counts[2] > 0, what, detail);
	}
	printf("| %-16s | %8lld | %3d | %4d | %5d | %6g | %-4s | %d | %6lld | %6lld | %8lld | %9.1f | "
		   "%8.2f / %8.2f / %8.2f | %4lld | %12lld | %s |\n",
		   name, (long long) c.n, c.d, p.min_cluster_size, p.min_samples, p.cluster_selection_epsilon,
		   c.p.leaf ? "leaf" : "eom", c.p.single, (long long) c.p.maxcs, (long long) ref.n_clusters,
		   (long long) noise, ref.wall_ms, t.timing.phase_ms[0], t.timing.phase_ms[1],
		   t.timing.phase_ms[2], (long long) t.timing.counts[0], (long long) t.timing.counts[1],
		   verdict);
	fflush(stdout);
	hd_free(&ref);
	hd_free(&t);
	free(x);
	return ok;
}

/* The comparison notices a changed answer (a label, a probability's last bit, a core distance, the count). */
static void
hd_self_check(void)
{
	const int64_t n = 2000;
	float	   *x = h_generate("blobs", n, 2);
	hd_params	q = {10, 5, 0, 0, 0, 0};
	gc_hdbscan_params p = hd_make_params(&q, n, GC_METRIC_EUCLIDEAN);
	hd_answer	ref,
				t;
	char		verdict[1400];
	int			noticed = 1;

	hd_alloc(&ref, n, 0);
	hd_alloc(&t, n, 0);
	hd_run(H.ref, &ref, x, GC_F32, GC_METRIC_EUCLIDEAN, n, 2, &p, NULL, NULL);
	for (int what = 0; what < 5 && ref.status == GC_OK; what++)
	{
		hd_run(H.test, &t, x, GC_F32, GC_METRIC_EUCLIDEAN, n, 2, &p, NULL, NULL);
		if (what == 0)
			t.cluster[n / 2] += 1;
		else if (what == 1)
			t.probability[n - 1] = nextafter(t.probability[n - 1], 2.0);
		else if (what == 2)
			t.outlier[7] = nextafter(t.outlier[7], -1.0);
		else if (what == 3)
			t.core[n / 3] = nextafter(t.core[n / 3], INFINITY);
		else
			t.n_clusters += 1;
		noticed &= !hd_compare(&ref, &t, n, verdict, sizeof(verdict));
	}
	h_check(noticed && ref.status == GC_OK, "hdbscan comparison notices a changed answer",
			ref.status != GC_OK ? ref.error :
			noticed ? "" : "a changed label, probability, score, core distance or count was called identical");
	hd_free(&ref);
	hd_free(&t);
	free(x);
}

/* ------------------------------------------------------------------ error paths */

static void
hd_row(const char *check, gc_status got, gc_status want, const char *detail, int64_t before)
{
	char		mem[64];

	printf("| %s | %s | %s | %s |\n", check, got == want ? gc_h_status_name(got) : "UNEXPECTED", detail,
		   h_memory_text(before, h_free_device_memory(), mem, sizeof(mem)));
	fflush(stdout);
}

/* The free device memory after a call is what it was before (only with a device). */
static void
hd_memory_check(const char *what, int64_t before, const char *detail)
{
	int64_t		after;
	char		buf[1600];

	if (H.cpu_only)
		return;
	after = h_free_device_memory();
	snprintf(buf, sizeof(buf), "%s; free device memory %lld -> %lld", detail, (long long) before,
			 (long long) after);
	h_check(before >= 0 && after == before, what, buf);
}

/* One call of the cancels in a row (h_cancel_storm). */
typedef struct hd_storm
{
	const void *x;
	gc_dtype	t;
	int64_t		n;
	int32_t		d;
	const gc_hdbscan_params *p;
	hd_answer  *a;
} hd_storm;

static gc_status
hd_storm_run(void *ctx, gc_h_cancel *cancel)
{
	hd_storm   *s = (hd_storm *) ctx;

	hd_run(H.test, s->a, s->x, s->t, GC_METRIC_EUCLIDEAN, s->n, s->d, s->p, NULL, cancel);
	return s->a->status;
}

/*
 * The cancels in a row on the first rows of x [>= n, d], as floats and as
 * doubles (the same values, so that both kernels see the same work).
 */
static void
hd_cancels_in_a_row(const float *x, int64_t n, int32_t d, const gc_hdbscan_params *p)
{
	double	   *xd = (double *) hd_malloc(sizeof(double) * (size_t) (n * d));
	hd_answer	a;
	hd_storm	sf = {x, GC_F32, n, d, p, &a};
	hd_storm	sd = {xd, GC_F64, n, d, p, &a};

	for (int64_t i = 0; i < n * d; i++)
		xd[i] = (double) x[i];
	hd_alloc(&a, n, 0);
	h_cancel_storm("hdbscan", "float rows", n, hd_storm_run, &sf);
	h_cancel_storm("hdbscan", "double rows", n, hd_storm_run, &sd);
	hd_free(&a);
	free(xd);
}

/* Float rows 1.1 times the device's size, mapped but never touched: GC_ERR_OUT_OF_MEMORY before any work. */
static void
hd_out_of_memory(int64_t before)
{
	const int32_t bd = 1024;
	const int64_t bn = (int64_t) ((double) H.device.total_memory * 1.1 / (4.0 * bd)) + 1;
	size_t		bytes = 4 * (size_t) bn * bd;
	void	   *big = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
						   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	hd_answer	b;
	hd_params	q = {10, 10, 0, 0, 0, 0};
	gc_hdbscan_params p = hd_make_params(&q, bn, GC_METRIC_EUCLIDEAN);
	char		detail[1400];
	size_t		nb = (size_t) bn;

	if (big == MAP_FAILED)
	{
		printf("| out of memory | skipped | could not map %zu bytes of host memory | |\n", bytes);
		return;
	}
	memset(&b, 0, sizeof(b));
	b.n = bn;
	b.cluster = (int32_t *) mmap(NULL, 4 * nb, PROT_READ | PROT_WRITE,
								 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	b.probability = (double *) mmap(NULL, 8 * nb, PROT_READ | PROT_WRITE,
									MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	b.outlier = (double *) mmap(NULL, 8 * nb, PROT_READ | PROT_WRITE,
								MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	b.core = (double *) mmap(NULL, 8 * nb, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (b.cluster == MAP_FAILED || b.probability == MAP_FAILED || b.outlier == MAP_FAILED ||
		b.core == MAP_FAILED)
		printf("| out of memory | skipped | could not map the result arrays | |\n");
	else
	{
		double		t0 = gc_h_now_ms();

		hd_run(H.test, &b, big, GC_F32, GC_METRIC_EUCLIDEAN, bn, bd, &p, NULL, NULL);
		snprintf(detail, sizeof(detail),
				 "%lld x %d floats (%.1f GiB): status %s (%s), bytes_needed %lld, device total %lld, %.1f ms",
				 (long long) bn, bd, bytes / 1073741824.0, gc_h_status_name(b.status), b.error,
				 (long long) b.timing.bytes_needed, (long long) H.device.total_memory,
				 gc_h_now_ms() - t0);
		h_check(b.status == GC_ERR_OUT_OF_MEMORY, "hdbscan out of device memory", detail);
		h_check(b.timing.bytes_needed > H.device.free_memory && b.timing.bytes_needed >= (int64_t) bytes,
				"hdbscan bytes needed reported", detail);
		hd_memory_check("device memory after out of memory", before, detail);
		hd_row("out of memory", b.status, GC_ERR_OUT_OF_MEMORY, detail, before);
	}
	munmap(big, bytes);
	if (b.cluster != MAP_FAILED)
		munmap(b.cluster, 4 * nb);
	if (b.probability != MAP_FAILED)
		munmap(b.probability, 8 * nb);
	if (b.outlier != MAP_FAILED)
		munmap(b.outlier, 8 * nb);
	if (b.core != MAP_FAILED)
		munmap(b.core, 8 * nb);
}

static void
hd_error_paths(void)
{
	/* On the GPU a large set, so that the work has many steps; the CPU's on fewer rows. */
	/* 10M also with --quick: a few seconds of GPU, and answers of 80 MB, the staged copies back */
	const int64_t n = h_size(10000000, 10000000, 200000);
	const int32_t d = 2;
	float	   *x = h_generate("blobs", n, d);
	hd_params	q = {10, 10, 0, 0, 0, 0};
	gc_hdbscan_params p = hd_make_params(&q, n, GC_METRIC_EUCLIDEAN);
	hd_answer	a;
	int64_t		before;
	char		detail[1400];

	hd_alloc(&a, n, 0);

	/* Warm-up: every kernel of this path loaded, so that the free memory is stable. */
	hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, NULL);
	h_check(a.status == GC_OK, "hdbscan warm-up run", a.error);
	before = h_free_device_memory();

	printf("\n| HDBSCAN error path (%lld rows) | status | detail | free device memory before -> after |\n"
		   "|---|---|---|---|\n", (long long) n);
	for (int yes_after = 1; yes_after <= 6; yes_after++)
	{
		gc_h_cancel c = {0, yes_after, 0, 0};
		double		t_end;
		char		what[64];

		hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, &c);
		t_end = gc_h_now_ms();
		snprintf(detail, sizeof(detail),
				 "yes at question %d: status %s (%s), %.2f ms from yes to return, %.1f ms in all",
				 yes_after, gc_h_status_name(a.status), a.error, c.t_yes > 0 ? t_end - c.t_yes : -1.0,
				 a.wall_ms);
		snprintf(what, sizeof(what), "hdbscan cancel at question %d", yes_after);
		h_check(a.status == GC_ERR_CANCELLED, what, detail);
		hd_memory_check("device memory after cancel", before, detail);
		snprintf(what, sizeof(what), "cancel at question %d", yes_after);
		hd_row(what, a.status, GC_ERR_CANCELLED, detail, before);
	}

	/* A callback that says yes after a fifth of an uncancelled run: the launch in flight stops. */
	{
		gc_h_cancel c = {0, 0, 0, 0};
		double		full = a.wall_ms > 0 ? a.wall_ms : 100.0,
					t_end;

		hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, NULL);
		full = a.wall_ms;
		c.deadline_ms = gc_h_now_ms() + full / 5;
		hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, &c);
		t_end = gc_h_now_ms();
		snprintf(detail, sizeof(detail),
				 "yes after %.1f ms of a %.1f ms run: status %s (%s), %.2f ms from yes to return",
				 full / 5, full, gc_h_status_name(a.status), a.error,
				 c.t_yes > 0 ? t_end - c.t_yes : -1.0);
		h_check(a.status == GC_ERR_CANCELLED, "hdbscan cancel in the middle", detail);
		hd_memory_check("device memory after cancel", before, detail);
		hd_row("cancel in the middle", a.status, GC_ERR_CANCELLED, detail, before);
	}

	/* A callback that never says yes is asked, and the run completes. */
	{
		gc_h_cancel c = {0, 0, 0, 0};

		hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, &c);
		snprintf(detail, sizeof(detail), "status %s, asked %d times", gc_h_status_name(a.status), c.calls);
		h_check(a.status == GC_OK && c.calls >= 5, "hdbscan cancel callback asked during a full run", detail);
		hd_row("callback never says yes", a.status, GC_OK, detail, before);
	}
	/* An error after the upload: a non-finite coordinate (the glue checks it for the CPU). */
	if (H.cpu_only)
		printf("| NaN coordinate | skipped | GPU only | |\n");
	else
	{
		float		saved = x[(n / 2) * d + 1];

		x[(n / 2) * d + 1] = NAN;
		hd_run(H.test, &a, x, GC_F32, GC_METRIC_EUCLIDEAN, n, d, &p, NULL, NULL);
		x[(n / 2) * d + 1] = saved;
		snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(a.status), a.error);
		h_check(a.status == GC_ERR_INVALID_ARGUMENT, "hdbscan non-finite coordinate", detail);
		hd_memory_check("device memory after an error", before, detail);
		hd_row("NaN coordinate", a.status, GC_ERR_INVALID_ARGUMENT, detail, before);
	}
	hd_cancels_in_a_row(x, h_size(1000000, 200000, 50000), d, &p);
	free(x);
	hd_free(&a);

	/* Bad parameters: both back ends check them at the entry. */
	{
		float		y[8] = {0, 0, 1, 1, 2, 2, 3, 3};
		hd_params	bad[] = {{1, 1, 0, 0, 0, 0}, {5, 5, 0, 0, 0, 0}, {2, 2, -1.0, 0, 0, 0},
							 {2, 2, 0, 0, 0, -3}};
		const char *names[] = {"min_cluster_size = 1", "min_samples > n", "epsilon < 0",
							   "max_cluster_size < 0"};
		hd_answer	b;

		hd_alloc(&b, 4, 0);
		for (int i = 0; i < 4; i++)
		{
			gc_hdbscan_params bp = hd_make_params(&bad[i], 4, GC_METRIC_EUCLIDEAN);
			char		what[96];

			hd_run(H.test, &b, y, GC_F32, GC_METRIC_EUCLIDEAN, 4, 2, &bp, NULL, NULL);
			snprintf(detail, sizeof(detail), "status %s (%s)", gc_h_status_name(b.status), b.error);
			snprintf(what, sizeof(what), "hdbscan %s", names[i]);
			h_check(b.status == GC_ERR_INVALID_ARGUMENT, what, detail);
			hd_row(names[i], b.status, GC_ERR_INVALID_ARGUMENT, detail, before);
		}
		hd_free(&b);
	}

	/* No rows: GC_OK and no clusters. */
	{
		float		y[2] = {0, 0};
		hd_answer	b;

		hd_alloc(&b, 0, 1);
		p = hd_make_params(&q, 0, GC_METRIC_EUCLIDEAN);
		hd_run(H.test, &b, y, GC_F32, GC_METRIC_EUCLIDEAN, 0, 2, &p, NULL, NULL);
		snprintf(detail, sizeof(detail), "status %s (%s), %lld clusters, %lld tree rows",
				 gc_h_status_name(b.status), b.error, (long long) b.n_clusters, (long long) b.tree.rows);
		h_check(b.status == GC_OK && b.n_clusters == 0 && b.tree.rows == 0, "hdbscan no rows", detail);
		hd_row("no rows", b.status, GC_OK, detail, before);
		hd_free(&b);
	}

	if (H.cpu_only)
		printf("| out of memory | skipped | GPU only | |\n");
	else
		hd_out_of_memory(before);

	/* The back end still works after all that, with the same answer as the CPU. */
	{
		hd_case		c = {"blobs", 100000, 2, {10, 10, 0, 0, 0, 0}};

		printf("\nafter the error paths:\n");
		hd_differential(&c);
	}
}

void
hdbscan_checks(void)
{
	printf("\n## HDBSCAN: %s against cpu\n\n"
		   "| data | n | d | mcs | ms | eps | sel | single | maxcs | clusters | noise | cpu ms | "
		   "%s ms: core / MST / host | rounds | distances | result |\n"
		   "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		   h_test_name(), h_test_name());
	fflush(stdout);
	if (!H.ref->hdbscan)
	{
		h_check(0, "hdbscan", "the CPU back end has no HDBSCAN entry (gc_cpu_api()->hdbscan is NULL)");
		return;
	}
	for (size_t i = 0; i < sizeof(hd_cases) / sizeof(hd_cases[0]); i++)
		hd_differential(&hd_cases[i]);
	hd_self_check();
	hd_error_paths();
}
