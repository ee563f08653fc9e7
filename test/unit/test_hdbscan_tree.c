/*
 * test_hdbscan_tree.c
 *    Unit tests of gc_hdbscan_finish on threads (common/hdbscan_tree.h):
 *    the answer on 2, 3, 8 and 16 threads of the host
 *    (common/hdbscan_host.h) must be the caller's thread's bit for bit
 *    (labels, probabilities, outlier scores, the condensed tree), on
 *    spanning trees of many shapes: a random tree, weights with many ties and zeros (duplicate rows), a
 *    path (one long chain: each merge adds one row), a star, and groups
 *    joined by long edges (a tree of clusters), with every selection
 *    method and option; the same answer from a hierarchy and condensed
 *    places given as the GPU back end gives them (built here by a walk of
 *    the test's own, its clusters numbered by split in merge order), and
 *    from those the answer computed the GPU back end's way without the
 *    host's walk (cuda/hdbscan_finish.cu, each kernel a loop here); the
 *    CPU back end's pool gives the same answer on blobs of 200,000 rows;
 *    cancel stops a call on threads at any point.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "hdbscan.h"
#include "hdbscan_host.h"
#include "unit.h"

static uint64_t rng_state = 11;

static double
urand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (rng_state >> 11) / 9007199254740992.0;
}

static int64_t
irand(int64_t k)
{
	return (int64_t) (urand() * (double) k);
}

typedef enum shape
{
	RANDOM_TREE, TIES, PATH, STAR, GROUPS
} shape;

static const char *const shape_name[] = {"random tree", "ties and zeros", "path", "star", "groups"};

/* A spanning tree of n rows, in no particular order (gc_hdbscan_finish sorts it). */
static gc_hdbscan_edge *
make_tree(shape s, int64_t n)
{
	gc_hdbscan_edge *e = malloc(sizeof(gc_hdbscan_edge) * (size_t) n);
	int64_t		group = 1 + n / 400;

	for (int64_t i = 1; i < n; i++)
	{
		int64_t		p;
		double		w;

		switch (s)
		{
			case RANDOM_TREE:
				p = irand(i);
				w = urand();
				break;
			case TIES:
				p = irand(i);
				w = 0.5 * (double) irand(5);
				break;
			case PATH:
				p = i - 1;
				w = urand() < 0.5 ? urand() : 1.0 + 0.001 * (double) i;
				break;
			case STAR:
				p = 0;
				w = 0.25 * (double) irand(9);
				break;
			default:
				/* rows of a group hang from earlier rows of it; each group's first from anywhere */
				if (i % group == 0)
				{
					p = irand(i);
					w = 10.0 + urand();
				}
				else
				{
					p = i - 1 - irand(i % group);
					w = urand() * (1.0 + (double) ((i / group) % 7));
				}
				break;
		}
		e[i - 1].w = w;
		e[i - 1].lo = (int32_t) (p < i ? p : i);
		e[i - 1].hi = (int32_t) (p < i ? i : p);
	}
	/* shuffled: the order of the sort's input must not matter */
	for (int64_t i = n - 2; i > 0; i--)
	{
		int64_t		j = irand(i + 1);
		gc_hdbscan_edge t = e[i];

		e[i] = e[j];
		e[j] = t;
	}
	return e;
}

typedef struct answer
{
	int32_t    *cluster;
	double	   *prob;
	double	   *score;
	gc_hdbscan_tree tree;
	int64_t		n_clusters;
} answer;

static void
answer_alloc(answer *a, int64_t n)
{
	int64_t		cap = 2 * n;

	memset(a, 0, sizeof(*a));
	a->cluster = malloc(sizeof(int32_t) * (size_t) n);
	a->prob = malloc(sizeof(double) * (size_t) n);
	a->score = malloc(sizeof(double) * (size_t) n);
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
	free(a->tree.parent);
	free(a->tree.child);
	free(a->tree.child_row);
	free(a->tree.lambda_val);
	free(a->tree.child_size);
	free(a->tree.node_selected);
	free(a->tree.node_cluster);
}

static int	cancel_after = 0;

static int
cancel_cb(void *arg)
{
	return --cancel_after <= 0;
}

/* gc_hdbscan_finish on threads host threads (1: the caller's thread, no runner). */
static gc_status
finish(const gc_hdbscan_params *p, int64_t n, const gc_hdbscan_edge *tree, answer *a,
	   int threads, int with_tree, gc_cancel_fn cancel, gc_error *err)
{
	gc_hdbscan_edge *mst = malloc(sizeof(gc_hdbscan_edge) * (size_t) n);
	double	   *core = calloc((size_t) n, sizeof(double));
	gc_hdbscan_result r;
	gc_hdb_host host;
	gc_status	st;

	memcpy(mst, tree, sizeof(gc_hdbscan_edge) * (size_t) (n - 1));
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->prob;
	r.outlier_score = a->score;
	r.tree = with_tree ? &a->tree : NULL;
	gc_hdb_host_begin(&host, threads, cancel, NULL);
	st = gc_hdbscan_finish(p, n, core, mst, NULL, NULL, &r, threads > 1 ? &host.thr : NULL, cancel, NULL,
						   err);
	gc_hdb_host_end(&host);
	a->n_clusters = r.n_clusters;
	free(mst);
	free(core);
	return st;
}

static int
edge_cmp(const void *pa, const void *pb)
{
	const gc_hdbscan_edge *a = pa,
			   *b = pb;

	if (gc_hdbscan_edge_less(a->w, a->lo, a->hi, b->w, b->lo, b->hi))
		return -1;
	return gc_hdbscan_edge_less(b->w, b->lo, b->hi, a->w, a->lo, a->hi) ? 1 : 0;
}

static int64_t
ref_find(int64_t *uf, int64_t x)
{
	while (uf[x] != x)
		x = uf[x] = uf[uf[x]];
	return x;
}

/*
 * The hierarchy and every node's state as the GPU back end hands them to
 * gc_hdbscan_finish, from the sorted tree: Kruskal's merges, then the
 * states from the root down, the clusters numbered 0 (the root) and, for
 * the j-th split in merge order, 1 + 2j (left) and 2 + 2j (right).
 */
static void
given_answer(int64_t n, const gc_hdbscan_edge *e, int64_t mcs, gc_hdb_merge *mg, gc_hdb_state *st)
{
	int64_t    *uf = malloc(sizeof(int64_t) * (size_t) n),
			   *node = malloc(sizeof(int64_t) * (size_t) n),
			   *size = malloc(sizeof(int64_t) * (size_t) n),
			   *split = malloc(sizeof(int64_t) * (size_t) n),
				splits = 0;

	for (int64_t i = 0; i < n; i++)
	{
		uf[i] = i;
		node[i] = i;
		size[i] = 1;
	}
	for (int64_t m = 0; m < n - 1; m++)
	{
		int64_t		a = ref_find(uf, e[m].lo),
					b = ref_find(uf, e[m].hi);

		mg[m].left = (uint32_t) node[a];
		mg[m].right = (uint32_t) node[b];
		mg[m].lsize = (uint32_t) size[a];
		mg[m].rsize = (uint32_t) size[b];
		uf[b] = a;
		node[a] = n + m;
		size[a] += size[b];
		split[m] = mg[m].lsize >= mcs && mg[m].rsize >= mcs ? splits++ : -1;
	}
	st[2 * n - 2].own = 0;
	st[2 * n - 2].fell = GC_HDB_NONE;
	st[2 * n - 2].at.place = 0;
	for (int64_t m = n - 2; m >= 0; m--)
	{
		gc_hdb_state s = st[n + m];
		uint64_t	depth = (s.at.place >> 32) + 1,
					pre = s.at.place & UINT32_MAX;

		for (int side = 0; side < 2; side++)
		{
			uint32_t	x = side == 0 ? mg[m].left : mg[m].right;
			int64_t		rows = side == 0 ? mg[m].lsize : mg[m].rsize;
			gc_hdb_state c = s;

			if (s.fell == GC_HDB_NONE)
			{
				c.at.place = depth << 32 | (side == 0 ? pre + 1 : pre + 2 * (uint64_t) mg[m].lsize);
				if (split[m] >= 0)
					c.own = (uint32_t) (1 + 2 * split[m] + side);
				else if (rows < mcs)
				{
					c.fell = (uint32_t) m;
					c.at.lambda = e[m].w > 0.0 ? 1.0 / e[m].w : INFINITY;
				}
			}
			st[x] = c;
		}
	}
	free(uf);
	free(node);
	free(size);
	free(split);
}

static void compare(const char *what, int64_t n, const answer *a, const answer *b, int with_tree);

/*
 * The answer as cuda/hdbscan_finish.cu computes it from the same
 * hierarchy and states, each kernel a loop here: the clusters of each
 * split, each cluster's merges in the order n - 2 down summed with
 * gc_hdb_stab_add, gc_hdb_given_select, each row's choice and each
 * cluster's lowest row, gc_hdb_given_number, each row's answer.
 */
static gc_status
rows_given_answer(const gc_hdbscan_params *p, int64_t n, const gc_hdbscan_edge *e,
				  const gc_hdb_merge *mg, const gc_hdb_state *st, answer *a, gc_error *err)
{
	int64_t		min_size = p->min_cluster_size,
				splits = 0,
				K;
	int64_t    *split = malloc(sizeof(int64_t) * (size_t) n);
	gc_hdb_work w;
	gc_status	rc;

	for (int64_t m = 0; m < n - 1; m++)
		split[m] = mg[m].lsize >= min_size && mg[m].rsize >= min_size ? splits++ : -1;
	K = 1 + 2 * splits;
	if ((rc = gc_hdb_given_alloc(&w, n, K, err)) != GC_OK)
	{
		free(split);
		return rc;
	}
	for (int64_t k = 0; k < K; k++)
	{
		w.k_child1[k] = w.k_child2[k] = -1;
		w.k_stab[k] = w.k_death[k] = 0.0;
	}
	w.k_parent[0] = -1;
	w.k_birth[0] = 0.0;
	w.k_size[0] = n;
	for (int64_t m = 0; m < n - 1; m++)
	{
		gc_hdb_state s = st[n + m];
		int64_t		c = 1 + 2 * split[m];
		double		lam = e[m].w > 0.0 ? 1.0 / e[m].w : INFINITY;

		if (split[m] < 0)
			continue;
		w.k_parent[c] = w.k_parent[c + 1] = s.own;
		w.k_birth[c] = w.k_birth[c + 1] = lam;
		w.k_size[c] = mg[m].lsize;
		w.k_size[c + 1] = mg[m].rsize;
		w.k_child1[s.own] = c;
		w.k_child2[s.own] = c + 1;
		w.k_key[split[m]] = s.at.place;
	}
	/* the device sorts the merges by cluster; summing in merge order n - 2 down is that order */
	for (int64_t m = n - 2; m >= 0; m--)
	{
		gc_hdb_state s = st[n + m];
		double		lam = e[m].w > 0.0 ? 1.0 / e[m].w : INFINITY;

		if (s.fell != GC_HDB_NONE)
			continue;
		if (lam > w.k_death[s.own])
			w.k_death[s.own] = lam;
		w.k_stab[s.own] = gc_hdb_stab_add(w.k_stab[s.own], lam - w.k_birth[s.own], mg[m].lsize,
										  mg[m].rsize, min_size);
	}
	{
		int64_t    *top = malloc(sizeof(int64_t) * (size_t) K),
				   *first = malloc(sizeof(int64_t) * (size_t) K),
				   *label = malloc(sizeof(int64_t) * (size_t) K),
					count = 0;
		double	   *glosh = malloc(sizeof(double) * (size_t) K),
					threshold = 0.0;
		int			single = 0;

		/* the device numbers the clusters as gc_hdb_number does */
		if ((rc = gc_hdb_number(&w, NULL, NULL, err)) == GC_OK)
			rc = gc_hdb_given_select(&w, p, glosh, &single, &threshold, err);
		for (int64_t k = 0; k < K && rc == GC_OK; k++)
			top[k] = w.sub[w.k_num[k]];
		for (int64_t k = 0; k < K; k++)
			first[k] = n;
		for (int64_t i = 0; i < n && rc == GC_OK; i++)
		{
			int64_t		t = top[st[i].own],
						k = gc_hdb_row_choice(t, w.k_selected[t], st[i].at.lambda, single, threshold);

			if (k == -2)
				rc = gc_error_set(err, GC_ERR_INTERNAL, "row %lld: an unselected cluster", (long long) i);
			a->cluster[i] = (int32_t) k;
			if (k >= 0 && i < first[k])
				first[k] = i;
		}
		if (rc == GC_OK)
			rc = gc_hdb_given_number(first, K, n, label, &count, NULL, NULL, err);
		for (int64_t i = 0; i < n && rc == GC_OK; i++)
		{
			int32_t		k = a->cluster[i];

			a->prob[i] = k < 0 ? 0.0 : gc_hdb_row_probability(st[i].at.lambda, w.k_death[k]);
			if (k >= 0)
				a->cluster[i] = (int32_t) label[k];
			a->score[i] = gc_hdb_row_glosh(st[i].at.lambda, glosh[w.k_num[st[i].own]]);
		}
		a->n_clusters = count;
		free(top);
		free(first);
		free(label);
		free(glosh);
	}
	gc_hdb_free(&w);
	free(split);
	return rc;
}

/* gc_hdbscan_finish on the caller's thread, with and without the hierarchy and states given. */
static void
case_given(shape s, int64_t n, const gc_hdbscan_edge *tree, const gc_hdbscan_params *p,
		   const char *label)
{
	gc_hdbscan_edge *e = malloc(sizeof(gc_hdbscan_edge) * (size_t) n);
	gc_hdb_merge *mg = malloc(sizeof(gc_hdb_merge) * (size_t) n);
	gc_hdb_state *st = malloc(sizeof(gc_hdb_state) * (size_t) (2 * n));
	double	   *core = calloc((size_t) n, sizeof(double));
	answer		a,
				b;
	gc_hdbscan_result r;
	gc_error	err;
	char		what[256];

	memcpy(e, tree, sizeof(gc_hdbscan_edge) * (size_t) (n - 1));
	qsort(e, (size_t) (n - 1), sizeof(gc_hdbscan_edge), edge_cmp);
	given_answer(n, e, p->min_cluster_size, mg, st);
	answer_alloc(&a, n);
	answer_alloc(&b, n);
	CHECK(finish(p, n, e, &a, 1, 1, NULL, &err) == GC_OK, "%s: %s", label, err.message);
	memset(&r, 0, sizeof(r));
	r.cluster = b.cluster;
	r.probability = b.prob;
	r.outlier_score = b.score;
	r.tree = &b.tree;
	snprintf(what, sizeof(what), "%s of %lld rows, %s, hierarchy and states given", shape_name[s],
			 (long long) n, label);
	CHECK(gc_hdbscan_finish(p, n, core, e, mg, st, &r, NULL, NULL, NULL, &err) == GC_OK, "%s: %s",
		  what, err.message);
	b.n_clusters = r.n_clusters;
	compare(what, n, &b, &a, 1);
	snprintf(what, sizeof(what), "%s of %lld rows, %s, answered as on the device", shape_name[s],
			 (long long) n, label);
	CHECK(rows_given_answer(p, n, e, mg, st, &b, &err) == GC_OK, "%s: %s", what, err.message);
	compare(what, n, &b, &a, 0);
	answer_free(&a);
	answer_free(&b);
	free(e);
	free(mg);
	free(st);
	free(core);
}

static int
same_doubles(const double *a, const double *b, int64_t n)
{
	return memcmp(a, b, sizeof(double) * (size_t) n) == 0;
}

static void
compare(const char *what, int64_t n, const answer *a, const answer *b, int with_tree)
{
	CHECK(a->n_clusters == b->n_clusters, "%s: %lld clusters against %lld", what,
		  (long long) a->n_clusters, (long long) b->n_clusters);
	CHECK(memcmp(a->cluster, b->cluster, sizeof(int32_t) * (size_t) n) == 0, "%s: labels differ", what);
	CHECK(same_doubles(a->prob, b->prob, n), "%s: probabilities differ", what);
	CHECK(same_doubles(a->score, b->score, n), "%s: outlier scores differ", what);
	if (!with_tree)
		return;
	CHECK(a->tree.rows == b->tree.rows && a->tree.nodes == b->tree.nodes,
		  "%s: the condensed trees have %lld/%lld and %lld/%lld rows/nodes", what,
		  (long long) a->tree.rows, (long long) a->tree.nodes, (long long) b->tree.rows,
		  (long long) b->tree.nodes);
	if (a->tree.rows != b->tree.rows || a->tree.nodes != b->tree.nodes)
		return;
	CHECK(memcmp(a->tree.parent, b->tree.parent, sizeof(int64_t) * (size_t) a->tree.rows) == 0 &&
		  memcmp(a->tree.child, b->tree.child, sizeof(int64_t) * (size_t) a->tree.rows) == 0 &&
		  memcmp(a->tree.child_row, b->tree.child_row, sizeof(int64_t) * (size_t) a->tree.rows) == 0 &&
		  memcmp(a->tree.child_size, b->tree.child_size, sizeof(int64_t) * (size_t) a->tree.rows) == 0 &&
		  same_doubles(a->tree.lambda_val, b->tree.lambda_val, a->tree.rows),
		  "%s: the condensed trees' rows differ", what);
	CHECK(memcmp(a->tree.node_selected, b->tree.node_selected, (size_t) a->tree.nodes) == 0 &&
		  memcmp(a->tree.node_cluster, b->tree.node_cluster, sizeof(int32_t) * (size_t) a->tree.nodes) == 0,
		  "%s: the selected nodes differ", what);
}

static gc_hdbscan_params
params(int32_t mcs)
{
	return unit_hdbscan_params(mcs, mcs);
}

/* Every thread count against the caller's thread, for one tree and parameters. */
static void
case_threads(shape s, int64_t n, const gc_hdbscan_edge *tree, const gc_hdbscan_params *p,
			 const char *label)
{
	static const int counts[] = {2, 3, 8, 16};
	answer		one,
				many;
	gc_error	err;
	char		what[256];
	int			with_tree = n <= 200000;

	answer_alloc(&one, n);
	answer_alloc(&many, n);
	CHECK(finish(p, n, tree, &one, 1, with_tree, NULL, &err) == GC_OK, "%s, %s: %s",
		  shape_name[s], label, err.message);
	for (int c = 0; c < 4; c++)
	{
		snprintf(what, sizeof(what), "%s of %lld rows, %s, %d threads", shape_name[s],
				 (long long) n, label, counts[c]);
		memset(many.cluster, 0x5a, sizeof(int32_t) * (size_t) n);
		CHECK(finish(p, n, tree, &many, counts[c], with_tree, NULL, &err) == GC_OK, "%s: %s",
			  what, err.message);
		compare(what, n, &many, &one, with_tree);
	}
	answer_free(&one);
	answer_free(&many);
	case_given(s, n, tree, p, label);
}

/* The CPU back end on 1 and 8 threads of its pool: blobs with noise. */
static void
case_pool(void)
{
	int64_t		n = 200000;
	float	   *x = malloc(sizeof(float) * (size_t) (2 * n));
	int32_t    *c1 = malloc(sizeof(int32_t) * (size_t) n),
			   *c8 = malloc(sizeof(int32_t) * (size_t) n);
	double	   *p1 = malloc(sizeof(double) * (size_t) n),
			   *p8 = malloc(sizeof(double) * (size_t) n),
			   *s1 = malloc(sizeof(double) * (size_t) n),
			   *s8 = malloc(sizeof(double) * (size_t) n);
	gc_hdbscan_params p = params(10);
	gc_hdbscan_result r;
	gc_exec		e;
	int64_t		k1 = 0;

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		b = irand(300);

		if (urand() < 0.05)
		{
			x[2 * i] = (float) (urand() * 100.0);
			x[2 * i + 1] = (float) (urand() * 100.0);
		}
		else
		{
			/* blobs of different spreads on a lattice; coordinates of few decimals */
			x[2 * i] = (float) (round(((double) (b % 20) * 5.0 + urand() * (0.5 + (double) (b % 3))) * 100.0) / 100.0);
			x[2 * i + 1] = (float) (round(((double) (b / 20) * 6.0 + urand() * (0.5 + (double) (b % 3))) * 100.0) / 100.0);
		}
	}
	for (int t = 0; t < 2; t++)
	{
		unit_threads = t == 0 ? 1 : 8;
		e = unit_exec(NULL, NULL);
		memset(&r, 0, sizeof(r));
		r.cluster = t == 0 ? c1 : c8;
		r.probability = t == 0 ? p1 : p8;
		r.outlier_score = t == 0 ? s1 : s8;
		CHECK(gc_cpu_api()->hdbscan(&e, x, GC_F32, n, 2, &p, &r) == GC_OK, "blobs: %s", unit_error());
		if (t == 0)
			k1 = r.n_clusters;
		else
			CHECK(r.n_clusters == k1, "blobs: %lld clusters on 8 threads, %lld on 1",
				  (long long) r.n_clusters, (long long) k1);
	}
	CHECK(k1 > 50, "blobs: only %lld clusters", (long long) k1);
	CHECK(memcmp(c1, c8, sizeof(int32_t) * (size_t) n) == 0, "blobs: labels differ on 8 threads");
	CHECK(same_doubles(p1, p8, n) && same_doubles(s1, s8, n),
		  "blobs: probabilities or scores differ on 8 threads");
	free(x);
	free(c1);
	free(c8);
	free(p1);
	free(p8);
	free(s1);
	free(s8);
}

/* Cancel after k questions, on 8 threads: cancelled, or done with the answer of one thread. */
static void
case_cancel(const gc_hdbscan_edge *tree, int64_t n)
{
	gc_hdbscan_params p = params(10);
	answer		one,
				a;
	gc_error	err;
	int			cancelled = 0;

	answer_alloc(&one, n);
	answer_alloc(&a, n);
	CHECK(finish(&p, n, tree, &one, 1, 0, NULL, &err) == GC_OK, "cancel reference: %s", err.message);
	for (int k = 1; k <= 64; k *= 2)
	{
		gc_status	st;

		cancel_after = k;
		st = finish(&p, n, tree, &a, 8, 0, cancel_cb, &err);
		if (st == GC_ERR_CANCELLED)
			cancelled++;
		else
		{
			CHECK(st == GC_OK, "cancel after %d: %s", k, err.message);
			compare("after cancel was asked", n, &a, &one, 0);
		}
	}
	CHECK(cancelled > 0, "no call on threads was cancelled");
	answer_free(&one);
	answer_free(&a);
}

int
main(void)
{
	for (int s = RANDOM_TREE; s <= GROUPS; s++)
	{
		int64_t		n = s == PATH ? 150000 : 120000;
		gc_hdbscan_edge *tree = make_tree((shape) s, n);
		gc_hdbscan_params p = params(5);

		case_threads((shape) s, n, tree, &p, "eom, min_cluster_size 5");
		p = params(50);
		case_threads((shape) s, n, tree, &p, "eom, min_cluster_size 50");
		p = params(2);
		p.method = GC_HDBSCAN_LEAF;
		case_threads((shape) s, n, tree, &p, "leaf, min_cluster_size 2");
		p = params(10);
		p.cluster_selection_epsilon = 0.8;
		p.allow_single_cluster = 1;
		case_threads((shape) s, n, tree, &p, "eom, epsilon 0.8, single cluster");
		p = params(10);
		p.max_cluster_size = 500;
		case_threads((shape) s, n, tree, &p, "eom, max_cluster_size 500");
		free(tree);
	}
	{
		/* more rows: many tasks per loop */
		int64_t		n = 600000;
		gc_hdbscan_edge *tree = make_tree(GROUPS, n);
		gc_hdbscan_params p = params(10);

		case_threads(GROUPS, n, tree, &p, "eom, min_cluster_size 10");
		case_cancel(tree, n);
		free(tree);
	}
	case_pool();
	UNIT_DONE();
}
