/*
 * hdbscan.c
 *    HDBSCAN on the CPU: core distances by exact k-nearest-neighbour search
 *    on a k-d tree, the minimum spanning tree of the mutual reachability
 *    graph by Boruvka rounds on the same tree, and the rest by
 *    gc_hdbscan_finish of common/hdbscan.h, which the GPU back end shares.
 *
 * The tree: Bentley, "Multidimensional binary search trees used for
 * associative searching" (CACM 1975), split at the median position along
 * the widest side of each node's box, so that it is balanced whatever the
 * data (duplicates included).  The spanning tree: Boruvka's rounds with a
 * single-tree nearest-other-component query per row, as in March, Ram &
 * Gray, "Fast Euclidean minimum spanning tree" (KDD 2010) and Wang, Yu,
 * Gu & Shun, "Fast parallel algorithms for Euclidean minimum spanning tree
 * and hierarchical spatial clustering" (SIGMOD 2021).
 *
 * Exactness: the bound of a box is the squared distance to the box summed
 * over every dimension in order, each term no larger than the same term of
 * any row in the box (rounding is monotone), so it never exceeds the dist2
 * of gc_dist2 for any row in it: pruning is exact, and both the core
 * distances and the tree are the exact ones.  Ties: the query keeps the
 * least edge under (w, lower row, higher row), and a node whose bound key
 * is not below the best key found is skipped, with the node's lowest row
 * in the key's bound, so that many equal weights (duplicate rows, lattices)
 * do not make every node a candidate.
 *
 * What makes it fast at 4 to 20 dimensions, all without changing a bit of
 * the answer: the core search keeps min_samples + 1 rows, and the first
 * Boruvka round (which joins almost every row) takes each row's least edge
 * from them wherever it weighs the row's core distance and they are every
 * row within it; each later round starts a component's bound at the least
 * edge of the round before that still leaves it, and skips a row whose
 * lower bound (its core distance, raised by what its last search proved)
 * is above its component's bound; the rows of a leaf that lie in one
 * component are searched together (hdb_leaf_search); leaves are stored by
 * coordinate and scanned four rows to a vector, each lane summing in
 * feature order (hdb_leaf_dist2), on AVX2 where the machine has it; an
 * inner node keeps its children's boxes side by side, so that the bounds
 * of both come from one vector loop without a branch (hdb_kids_gap2),
 * which is most of a search's work at 5 to 16 dimensions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "hdbscan.h"
#include "metric.h"
#include "hdbscan_pairs.h"
#include "pairs.h"

/* Rows per leaf of the tree. */
#define HDB_LEAF 16
/* Rows a thread takes at once; cancel is asked every HDB_CANCEL_EVERY coordinates of work. */
#define HDB_GRAIN 1024
#define HDB_CANCEL_EVERY ((int64_t) 1 << 22)
/* The largest min_samples + 1 whose neighbours are kept for the first Boruvka round. */
#define HDB_NBR_MAX 33
/* Depth bound of a traversal's stack: the tree is balanced, depth <= log2(n / HDB_LEAF) + 1. */
#define HDB_STACK 128

typedef struct hdb_tree
{
	int64_t		n;
	int32_t		d;
	gc_dtype	dtype;
	const void *xs;				/* [n, d] the rows in tree order */
	const double *xb;			/* per leaf [d, HDB_LEAF]: its rows by coordinate, in double (64-byte aligned) */
	int64_t    *leafoff;		/* [nodes] a leaf's block in xb, in elements */
	int64_t    *leaves;			/* [nleaves] the leaves in position order */
	int64_t		nleaves;
	int32_t    *row;			/* [n] tree position -> row index */
	int64_t		nodes;
	int64_t    *start;			/* [nodes] first position */
	int64_t    *end;			/* [nodes] one past the last */
	int64_t    *kid;			/* [nodes] left child (right = kid + 1), -1 for a leaf */
	double	   *lo;				/* [nodes, d] box */
	double	   *hi;
	double	   *kbox;			/* [nodes, d, 4] an inner node's children's boxes: per coordinate lo of kid, kid + 1, then hi */
	double	   *min_core;		/* [nodes] least core distance in the node */
	int32_t    *min_row;		/* [nodes] least row index in the node */
	int32_t    *comp;			/* [nodes] component of all its rows, or -1 */
} hdb_tree;

typedef struct hdb_ws
{
	gc_core_ctx *ctx;
	const gc_hdbscan_params *p;
	hdb_tree	t;
	void	   *xs_buf;
	double	   *xb_buf;
	void	   *keys_buf;		/* the tree's build: scratch of its selections */
	double	   *lb;				/* [n] per position: a lower bound of the weight of its edges to other components */
	double	   *core;			/* [n] by tree position */
	int32_t    *pcomp;			/* [n] component of each position */
	double	   *best_w;			/* [n] per position: its least edge to another component */
	int32_t    *best_lo;		/* row indices */
	int32_t    *best_hi;
	int32_t    *best_q;			/* the other end's position, -1: none better than its component's */
	uint64_t   *comp_bound;		/* [n] per component: bits of the least weight found this round */
	int64_t		dist_evals;
	int64_t    *evals;			/* [threads] */
	int64_t    *stat;			/* [threads, 4] per round: rows searched, nodes visited, distances, - */
	int32_t		kk;				/* rows the core search keeps: min_samples + 1, or n */
	int32_t    *nbr;			/* [n, kk] their positions, for the first round; NULL: not kept */
	uint8_t    *ball;			/* [n] 1: nbr holds every row within the core distance */
} hdb_ws;

/* Coordinate k of position i, in double. */
static inline double
hdb_coord(const hdb_tree *t, int64_t i, int32_t k)
{
	if (t->dtype == GC_F64)
		return ((const double *) t->xs)[i * t->d + k];
	return (double) ((const float *) t->xs)[i * t->d + k];
}

/* dist2 of positions a and b, as gc_dist2 and gc_dist2_f64 compute it. */
static inline double
hdb_dist2(const hdb_tree *t, int64_t a, int64_t b)
{
	if (t->dtype == GC_F64)
		return gc_dist2_f64((const double *) t->xs + a * t->d, (const double *) t->xs + b * t->d, t->d);
	return gc_dist2((const float *) t->xs + a * t->d, (const float *) t->xs + b * t->d, t->d);
}

/*
 * dist2 from the query qv [d] to each row of leaf, into out [HDB_LEAF]
 * (the lanes past the leaf's rows give values to ignore): four rows to a
 * vector, each lane summing its row's terms over the features in order,
 * without contraction (common/flags.mk), exactly as gc_dist2 and
 * gc_dist2_f64 do (each coordinate converted exactly to double, float rows
 * once when the tree is built; (a - b)^2 and (b - a)^2 are the same
 * number).
 */
typedef double hdb_v4 __attribute__((vector_size(32)));

/*
 * The searches are compiled twice on x86-64, for AVX2 and for the baseline,
 * and the loader picks one for the machine: four doubles to an instruction
 * rather than two.  The same answer from either: elementwise IEEE
 * arithmetic, no contraction into FMA (-ffp-contract=off; AVX2 alone does
 * not bring FMA instructions either).
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HDB_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HDB_CLONES
#endif

static inline void
hdb_leaf_dist2(const hdb_tree *t, const double *qv, int64_t leaf, double *out)
{
	const double *x = t->xb + t->leafoff[leaf];
	hdb_v4		a0 = {0.0, 0.0, 0.0, 0.0},
				a1 = a0,
				a2 = a0,
				a3 = a0;

	for (int32_t k = 0; k < t->d; k++, x += HDB_LEAF)
	{
		double		qk = qv[k];
		hdb_v4		q = {qk, qk, qk, qk},
					v0,
					v1,
					v2,
					v3;

		memcpy(&v0, x, sizeof(v0));
		memcpy(&v1, x + 4, sizeof(v1));
		memcpy(&v2, x + 8, sizeof(v2));
		memcpy(&v3, x + 12, sizeof(v3));
		v0 = q - v0;
		v1 = q - v1;
		v2 = q - v2;
		v3 = q - v3;
		a0 += v0 * v0;
		a1 += v1 * v1;
		a2 += v2 * v2;
		a3 += v3 * v3;
	}
	memcpy(out, &a0, sizeof(a0));
	memcpy(out + 4, &a1, sizeof(a1));
	memcpy(out + 8, &a2, sizeof(a2));
	memcpy(out + 12, &a3, sizeof(a3));
}

/*
 * A lower bound of dist2 from the query qv [d] (its coordinates in double)
 * to any row of node: never above their dist2 (see the file header).
 */
static inline double
hdb_box2v(const hdb_tree *t, const double *qv, int64_t node)
{
	const double *lo = t->lo + node * t->d,
			   *hi = t->hi + node * t->d;
	double		s = 0.0;

	for (int32_t k = 0; k < t->d; k++)
	{
		double		x = qv[k],
					gl = lo[k] - x,
					gh = x - hi[k];

		/* at most one of the gaps is positive: the sum is exactly its square (no branch) */
		gl = gl > 0.0 ? gl : 0.0;
		gh = gh > 0.0 ? gh : 0.0;
		s += gl * gl + gh * gh;
	}
	return s;
}

/*
 * Lower bounds of dist2 from any point of the box [alo, ahi] to any row of
 * each child of the inner node, into b2[0] (kid) and b2[1] (kid + 1), the
 * two children in the lanes of one vector and without a branch.  For a
 * query row (alo = ahi = its coordinates) they are the numbers of
 * hdb_box2v.  For a box (a leaf's rows searched together): along each
 * coordinate the gap between the boxes is no larger than the rounded
 * difference of any two coordinates on either side (rounding is monotone),
 * and the squares are summed in the same order as gc_dist2.
 */
typedef double hdb_v2 __attribute__((vector_size(16)));
typedef long long hdb_v2i __attribute__((vector_size(16)));

static inline void
hdb_kids_gap2(const hdb_tree *t, const double *alo, const double *ahi, int64_t node, double *b2)
{
	const double *kb = t->kbox + node * 4 * (int64_t) t->d;
	hdb_v2		s = {0.0, 0.0},
				z = {0.0, 0.0};

	for (int32_t k = 0; k < t->d; k++, kb += 4)
	{
		hdb_v2		l = {alo[k], alo[k]},
					h = {ahi[k], ahi[k]},
					lo,
					hi,
					gl,
					gh;

		memcpy(&lo, kb, sizeof(lo));
		memcpy(&hi, kb + 2, sizeof(hi));
		gl = lo - h;
		gh = l - hi;
		/* at most one of the gaps is positive: the sum is exactly its square */
		gl = (hdb_v2) ((hdb_v2i) gl & (gl > z));
		gh = (hdb_v2) ((hdb_v2i) gh & (gh > z));
		s += gl * gl + gh * gh;
	}
	memcpy(b2, &s, sizeof(s));
}

/* ---------------------------------------------------------------- the tree */

/* Box of positions [b, e) of the original rows order[b..e). */
static void
hdb_box(const void *x, gc_dtype dtype, int32_t d, const int32_t *order, int64_t b, int64_t e,
		double *lo, double *hi)
{
	for (int32_t k = 0; k < d; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t i = b; i < e; i++)
	{
		int64_t		r = order[i];

		for (int32_t k = 0; k < d; k++)
		{
			double		v = dtype == GC_F64 ? ((const double *) x)[r * d + k]
				: (double) ((const float *) x)[r * d + k];

			lo[k] = v < lo[k] ? v : lo[k];
			hi[k] = v > hi[k] ? v : hi[k];
		}
	}
}

/* Value of original row r along dimension k. */
static inline double
hdb_val(const void *x, gc_dtype dtype, int32_t d, int64_t r, int32_t k)
{
	return dtype == GC_F64 ? ((const double *) x)[r * d + k] : (double) ((const float *) x)[r * d + k];
}

/* A row's value along the split coordinate, and the row. */
typedef struct hdb_key
{
	double		v;
	int32_t		r;
} hdb_key;

/*
 * Puts the order[m] that a sort of order[b..e) by (value along k, row)
 * would put there, the smaller before it and the larger after it
 * (quickselect with a median-of-three pivot; the row breaks ties, so the
 * split is unique and no input is a worst case by duplicates).  The values
 * are read once into keys [e - b], so that the passes of the selection run
 * over one contiguous array rather than over rows scattered in x.
 */
static void
hdb_select(const void *x, gc_dtype dtype, int32_t d, int32_t *order, int64_t b, int64_t e,
		   int64_t m, int32_t k, hdb_key *keys)
{
	int64_t		base = b,
				len = e - b;

#define HDB_LESS(ka, kb) ((ka).v < (kb).v || ((ka).v == (kb).v && (ka).r < (kb).r))
	for (int64_t i = b; i < e; i++)
	{
		keys[i - base].v = hdb_val(x, dtype, d, order[i], k);
		keys[i - base].r = order[i];
	}
	m -= base;
	b = 0;
	e -= base;
	while (e - b > 1)
	{
		int64_t		mid = b + (e - b) / 2,
					i,
					j;
		hdb_key		a = keys[b],
					c = keys[mid],
					z = keys[e - 1],
					pivot,
					tmp;

		/* median of three */
		if (HDB_LESS(c, a))
		{
			tmp = a;
			a = c;
			c = tmp;
		}
		if (HDB_LESS(z, c))
		{
			c = z;
			if (HDB_LESS(c, a))
				c = a;
		}
		pivot = c;
		i = b;
		j = e - 1;
		while (i <= j)
		{
			while (HDB_LESS(keys[i], pivot))
				i++;
			while (HDB_LESS(pivot, keys[j]))
				j--;
			if (i <= j)
			{
				tmp = keys[i];
				keys[i] = keys[j];
				keys[j] = tmp;
				i++;
				j--;
			}
		}
		if (m <= j)
			e = j + 1;
		else if (m >= i)
			b = i;
		else
			break;
	}
#undef HDB_LESS
	for (int64_t i = 0; i < len; i++)
		order[base + i] = keys[i].r;
}

/* Node ids a subtree of m rows may use: leaves hold more than HDB_LEAF / 2 rows, or all m. */
static inline int64_t
hdb_node_cap(int64_t m)
{
	return 2 * (m / (HDB_LEAF / 2) + 1) + 1;
}

/*
 * Makes node (rows [start, end) of t->row) a leaf or splits it at the
 * median position along the widest side of its box into two children with
 * the ids *next and *next + 1 (keys [n]: scratch, its positions' part
 * used; boxed: its box is already there).  Returns 1 when it split.
 */
static int
hdb_split(hdb_tree *t, const void *x, int64_t node, int64_t *next, hdb_key *keys, int boxed)
{
	int32_t		d = t->d,
				k = 0;
	int64_t		b = t->start[node],
				e = t->end[node],
				m;
	double	   *lo = t->lo + node * d,
			   *hi = t->hi + node * d,
				wide = -1.0;

	if (!boxed)
		hdb_box(x, t->dtype, d, t->row, b, e, lo, hi);
	t->kid[node] = -1;
	if (e - b <= HDB_LEAF)
		return 0;
	for (int32_t j = 0; j < d; j++)
	{
		if (hi[j] - lo[j] > wide)
		{
			wide = hi[j] - lo[j];
			k = j;
		}
	}
	m = b + (e - b) / 2;
	hdb_select(x, t->dtype, d, t->row, b, e, m, k, keys + b);
	t->kid[node] = *next;
	t->start[*next] = b;
	t->end[*next] = m;
	t->start[*next + 1] = m;
	t->end[*next + 1] = e;
	*next += 2;
	return 1;
}

/* Rows per block of a top node's box, which the threads share. */
#define HDB_BOX_ROWS 32768

/* The box of one large node in blocks of HDB_BOX_ROWS positions, each into its part. */
typedef struct hdb_box_job
{
	const hdb_tree *t;
	const void *x;
	int64_t		b;				/* the node's positions [b, e) */
	int64_t		e;
	double	   *part;			/* [blocks, 2, d] each block's lo, then hi */
} hdb_box_job;

static gc_status
hdb_box_block(void *arg, gc_worker *w, int64_t cb, int64_t ce)
{
	hdb_box_job *job = (hdb_box_job *) arg;
	int32_t		d = job->t->d;

	for (int64_t c = cb; c < ce; c++)
	{
		int64_t		rb = job->b + c * HDB_BOX_ROWS,
					re = rb + HDB_BOX_ROWS < job->e ? rb + HDB_BOX_ROWS : job->e;

		hdb_box(job->x, job->t->dtype, d, job->t->row, rb, re, job->part + c * 2 * d,
				job->part + c * 2 * d + d);
		if (gc_worker_tick(w, (re - rb) * d, HDB_CANCEL_EVERY))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/*
 * The box of node on the pool's threads, combined in block order with the
 * rule of hdb_box (the first of equal values stays), so that it is the box
 * hdb_box gives.
 */
static gc_status
hdb_box_par(hdb_ws *ws, const void *x, int64_t node, double *part)
{
	hdb_tree   *t = &ws->t;
	int32_t		d = t->d;
	hdb_box_job job = {t, x, t->start[node], t->end[node], part};
	int64_t		blocks = (job.e - job.b + HDB_BOX_ROWS - 1) / HDB_BOX_ROWS;
	double	   *lo = t->lo + node * d,
			   *hi = t->hi + node * d;
	gc_status	st = gc_pool_for(ws->ctx->pool, blocks, 1, hdb_box_block, &job);

	if (st != GC_OK)
		return st;
	for (int32_t k = 0; k < d; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t c = 0; c < blocks; c++)
		for (int32_t k = 0; k < d; k++)
		{
			double		l = part[c * 2 * d + k],
						h = part[c * 2 * d + d + k];

			lo[k] = l < lo[k] ? l : lo[k];
			hi[k] = h > hi[k] ? h : hi[k];
		}
	return GC_OK;
}

/* The subtrees below the top levels, one per item, each in its own range of node ids. */
typedef struct hdb_build_job
{
	hdb_ws	   *ws;
	const void *x;
	const int64_t *roots;		/* [count] subtree roots */
	const int64_t *first_id;	/* [count] the first id of each subtree's range */
	hdb_key    *keys;			/* [n] scratch of the selections, by position */
} hdb_build_job;

static gc_status
hdb_build_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	hdb_build_job *job = (hdb_build_job *) arg;
	hdb_tree   *t = &job->ws->t;

	for (int64_t s = b; s < e; s++)
	{
		int64_t		root = job->roots[s],
					next = job->first_id[s],
					stack[HDB_STACK];
		int			sn = 0;

		stack[sn++] = root;
		while (sn > 0)
		{
			int64_t		node = stack[--sn];

			if (gc_worker_tick(w, (t->end[node] - t->start[node]) * t->d, HDB_CANCEL_EVERY))
				return GC_ERR_CANCELLED;
			if (hdb_split(t, job->x, node, &next, job->keys, 0))
			{
				stack[sn++] = t->kid[node];
				stack[sn++] = t->kid[node] + 1;
			}
		}
	}
	return GC_OK;
}

/*
 * The rows of leaves [b, e) of t->leaves in tree order into ws->xs_buf, and
 * by coordinate into their blocks of ws->xb_buf (lanes past a leaf's rows
 * are 0).
 */
static gc_status
hdb_fill_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	hdb_build_job *job = (hdb_build_job *) arg;
	hdb_ws	   *ws = job->ws;
	hdb_tree   *t = &ws->t;
	int32_t		d = t->d;
	size_t		esize = gc_dtype_size(t->dtype);

	for (int64_t l = b; l < e; l++)
	{
		int64_t		node = t->leaves[l],
					s0 = t->start[node];
		double	   *xb = ws->xb_buf + t->leafoff[node];

		memset(xb, 0, sizeof(double) * (size_t) d * HDB_LEAF);
		for (int64_t i = s0; i < t->end[node]; i++)
		{
			memcpy((char *) ws->xs_buf + (size_t) i * d * esize,
				   (const char *) job->x + (size_t) t->row[i] * d * esize, (size_t) d * esize);
			for (int32_t k = 0; k < d; k++)
				xb[k * HDB_LEAF + (i - s0)] = t->dtype == GC_F64
					? ((const double *) ws->xs_buf)[i * d + k]
					: (double) ((const float *) ws->xs_buf)[i * d + k];
		}
		if (gc_worker_tick(w, (t->end[node] - s0) * d, HDB_CANCEL_EVERY))
			return GC_ERR_CANCELLED;
	}
	return GC_OK;
}

/*
 * Builds the tree over x [n, d]: positions, boxes, rows in tree order.  The
 * top levels are split on the caller's thread until there are a few
 * subtrees per thread; the subtrees are built in parallel, each in a range
 * of ids reserved for its size, so that children always have larger ids
 * than their parents (ids of a range left unused are empty leaves that no
 * node points to).
 */
static gc_status
hdb_build(hdb_ws *ws, const void *x, gc_dtype dtype, int64_t n, int32_t d)
{
	hdb_tree   *t = &ws->t;
	int			threads = gc_pool_threads(ws->ctx->pool);
	int64_t		want = threads > 1 ? 8 * (int64_t) threads : 1,
				cap = hdb_node_cap(n) + 2 * want + 2,
				top_next = 1,
				head = 0,
				tail = 0,
				count = 0,
				total,
				work = 0;
	size_t		esize = gc_dtype_size(dtype);
	int64_t    *queue = NULL,
			   *roots = NULL,
			   *first = NULL;
	hdb_key    *keys = NULL;
	double	   *part = NULL;	/* [blocks, 2, d] of hdb_box_par */
	hdb_build_job job;
	gc_status	st;

	t->n = n;
	t->d = d;
	t->dtype = dtype;
	t->row = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	t->start = (int64_t *) malloc(sizeof(int64_t) * (size_t) cap);
	t->end = (int64_t *) malloc(sizeof(int64_t) * (size_t) cap);
	t->kid = (int64_t *) malloc(sizeof(int64_t) * (size_t) cap);
	queue = (int64_t *) malloc(sizeof(int64_t) * (size_t) cap);
	keys = (hdb_key *) malloc(sizeof(hdb_key) * (size_t) (n > 0 ? n : 1));
	ws->keys_buf = keys;
	if (!t->row || !t->start || !t->end || !t->kid || !queue || !keys)
	{
		free(queue);
		return gc_core_oom(ws->ctx, sizeof(int64_t) * 4 * (size_t) cap + sizeof(hdb_key) * (size_t) n,
						   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
	}
	/* boxes of the top levels go to a scratch area first: the final count is known below */
	t->lo = (double *) malloc(sizeof(double) * (size_t) (4 * want + 4) * (size_t) d);
	t->hi = (double *) malloc(sizeof(double) * (size_t) (4 * want + 4) * (size_t) d);
	part = (double *) malloc(sizeof(double) * 2 * (size_t) (n / HDB_BOX_ROWS + 1) * (size_t) d);
	if (!t->lo || !t->hi || !part)
	{
		free(queue);
		free(part);
		return gc_core_oom(ws->ctx, sizeof(double) * 8 * (size_t) want * (size_t) d,
						   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
	}
	for (int64_t i = 0; i < n; i++)
		t->row[i] = (int32_t) i;

	/* the top levels, breadth first, until want subtrees are pending */
	t->start[0] = 0;
	t->end[0] = n;
	queue[tail++] = 0;
	while (head < tail && tail - head < want)
	{
		int64_t		node = queue[head++];
		int			boxed = 0;

		if (gc_core_work(ws->ctx, &work, (t->end[node] - t->start[node]) * d, HDB_CANCEL_EVERY))
		{
			free(queue);
			free(part);
			return GC_ERR_CANCELLED;
		}
		if (threads > 1 && t->end[node] - t->start[node] >= 2 * HDB_BOX_ROWS)
		{
			if ((st = hdb_box_par(ws, x, node, part)) != GC_OK)
			{
				free(queue);
				free(part);
				return st;
			}
			boxed = 1;
		}
		if (hdb_split(t, x, node, &top_next, keys, boxed))
		{
			queue[tail++] = t->kid[node];
			queue[tail++] = t->kid[node] + 1;
		}
	}
	free(part);
	/* the pending subtrees' ranges of ids, after the top ids */
	count = tail - head;
	roots = (int64_t *) malloc(sizeof(int64_t) * (size_t) (count + 1));
	first = (int64_t *) malloc(sizeof(int64_t) * (size_t) (count + 1));
	if (!roots || !first)
	{
		free(queue);
		free(roots);
		free(first);
		return gc_core_oom(ws->ctx, sizeof(int64_t) * 2 * (size_t) count,
						   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
	}
	total = top_next;
	for (int64_t s = 0; s < count; s++)
	{
		roots[s] = queue[head + s];
		first[s] = total;
		total += hdb_node_cap(t->end[roots[s]] - t->start[roots[s]]);
	}
	free(queue);
	{
		/* the final arrays, with the top levels' boxes moved over */
		double	   *lo = (double *) malloc(sizeof(double) * (size_t) total * (size_t) d),
				   *hi = (double *) malloc(sizeof(double) * (size_t) total * (size_t) d);
		int64_t    *st_ = (int64_t *) realloc(t->start, sizeof(int64_t) * (size_t) total),
				   *en_ = NULL,
				   *kd_ = NULL;

		if (st_)
			t->start = st_;
		en_ = (int64_t *) realloc(t->end, sizeof(int64_t) * (size_t) total);
		if (en_)
			t->end = en_;
		kd_ = (int64_t *) realloc(t->kid, sizeof(int64_t) * (size_t) total);
		if (kd_)
			t->kid = kd_;
		if (!lo || !hi || !st_ || !en_ || !kd_)
		{
			free(lo);
			free(hi);
			free(roots);
			free(first);
			return gc_core_oom(ws->ctx, sizeof(double) * 2 * (size_t) total * (size_t) d,
							   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
		}
		memcpy(lo, t->lo, sizeof(double) * (size_t) top_next * (size_t) d);
		memcpy(hi, t->hi, sizeof(double) * (size_t) top_next * (size_t) d);
		free(t->lo);
		free(t->hi);
		t->lo = lo;
		t->hi = hi;
	}
	for (int64_t id = top_next; id < total; id++)
	{
		t->start[id] = 0;
		t->end[id] = 0;
		t->kid[id] = -1;
	}
	t->nodes = total;
	t->min_core = (double *) malloc(sizeof(double) * (size_t) total);
	t->min_row = (int32_t *) malloc(sizeof(int32_t) * (size_t) total);
	t->comp = (int32_t *) malloc(sizeof(int32_t) * (size_t) total);
	t->leafoff = (int64_t *) malloc(sizeof(int64_t) * (size_t) total);
	ws->xs_buf = malloc(esize * (size_t) n * (size_t) d);
	if (!t->min_core || !t->min_row || !t->comp || !t->leafoff || !ws->xs_buf)
	{
		free(roots);
		free(first);
		return gc_core_oom(ws->ctx, esize * (size_t) n * (size_t) d + 24 * (size_t) total,
						   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
	}
	job.ws = ws;
	job.x = x;
	job.roots = roots;
	job.first_id = first;
	job.keys = keys;
	st = gc_pool_for(ws->ctx->pool, count, 1, hdb_build_block, &job);
	free(roots);
	free(first);
	free(ws->keys_buf);
	ws->keys_buf = NULL;
	if (st != GC_OK)
		return st;

	/* each leaf's block of HDB_LEAF lanes per coordinate, and the leaves in position order */
	{
		int64_t		leaves = 0;
		size_t		bytes;

		for (int64_t node = 0; node < t->nodes; node++)
			if (t->kid[node] < 0 && t->end[node] > t->start[node])
				t->leafoff[node] = (leaves++) * (int64_t) d * HDB_LEAF;
			else
				t->leafoff[node] = 0;
		bytes = sizeof(double) * (size_t) (leaves > 0 ? leaves : 1) * (size_t) d * HDB_LEAF;
		bytes = (bytes + 63) / 64 * 64;
		ws->xb_buf = aligned_alloc(64, bytes);
		t->leaves = (int64_t *) malloc(sizeof(int64_t) * (size_t) (n > 0 ? n : 1));
		if (ws->xb_buf == NULL || t->leaves == NULL)
			return gc_core_oom(ws->ctx, bytes + sizeof(int64_t) * (size_t) n,
							   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
		for (int64_t i = 0; i < n; i++)
			t->leaves[i] = -1;
		for (int64_t node = 0; node < t->nodes; node++)
			if (t->kid[node] < 0 && t->end[node] > t->start[node])
				t->leaves[t->start[node]] = node;
		t->nleaves = 0;
		for (int64_t i = 0; i < n; i++)
			if (t->leaves[i] >= 0)
				t->leaves[t->nleaves++] = t->leaves[i];
	}
	/* the rows in tree order, and each leaf's rows by coordinate (hdb_fill_block) */
	job.x = x;
	if ((st = gc_pool_for(ws->ctx->pool, t->nleaves, HDB_GRAIN / HDB_LEAF, hdb_fill_block, &job)) != GC_OK)
		return st;
	t->xs = ws->xs_buf;
	t->xb = ws->xb_buf;
	for (int64_t node = t->nodes - 1; node >= 0; node--)
	{
		if (t->kid[node] < 0)
		{
			int32_t		mr = INT32_MAX;

			for (int64_t i = t->start[node]; i < t->end[node]; i++)
				mr = t->row[i] < mr ? t->row[i] : mr;
			t->min_row[node] = mr;
		}
		else
		{
			int32_t		a = t->min_row[t->kid[node]],
						c = t->min_row[t->kid[node] + 1];

			t->min_row[node] = a < c ? a : c;
		}
	}
	/* the children's boxes of each inner node side by side, for hdb_kids_gap2 */
	t->kbox = (double *) malloc(sizeof(double) * 4 * (size_t) t->nodes * (size_t) d);
	if (t->kbox == NULL)
		return gc_core_oom(ws->ctx, sizeof(double) * 4 * (size_t) t->nodes * (size_t) d,
						   "out of memory for HDBSCAN's tree of %lld rows", (long long) n);
	for (int64_t node = 0; node < t->nodes; node++)
	{
		double	   *kb = t->kbox + node * 4 * (int64_t) d;
		int64_t		a = t->kid[node];

		if (a < 0)
			continue;
		for (int32_t k = 0; k < d; k++, kb += 4)
		{
			kb[0] = t->lo[a * d + k];
			kb[1] = t->lo[(a + 1) * d + k];
			kb[2] = t->hi[a * d + k];
			kb[3] = t->hi[(a + 1) * d + k];
		}
	}
	return GC_OK;
}

static void
hdb_free(hdb_ws *ws)
{
	hdb_tree   *t = &ws->t;

	free(t->row);
	free(t->start);
	free(t->end);
	free(t->kid);
	free(t->lo);
	free(t->hi);
	free(t->kbox);
	free(t->min_core);
	free(t->min_row);
	free(t->comp);
	free(ws->xs_buf);
	free(ws->xb_buf);
	free(ws->keys_buf);
	free(t->leafoff);
	free(t->leaves);
	free(ws->lb);
	free(ws->core);
	free(ws->pcomp);
	free(ws->best_w);
	free(ws->best_lo);
	free(ws->best_hi);
	free(ws->best_q);
	free(ws->comp_bound);
	free(ws->evals);
	free(ws->stat);
	free(ws->nbr);
	free(ws->ball);
}

/* ---------------------------------------------------------------- core distances */

/* Sifts a max-heap of dist2 values (with their positions) down from its top. */
static inline void
hdb_heap_down(double *h, int32_t *hp, int32_t k)
{
	int32_t		i = 0;

	for (;;)
	{
		int32_t		l = 2 * i + 1,
					r = l + 1,
					m = i,
					tp;
		double		tmp;

		if (l < k && h[l] > h[m])
			m = l;
		if (r < k && h[r] > h[m])
			m = r;
		if (m == i)
			return;
		tmp = h[i];
		h[i] = h[m];
		h[m] = tmp;
		tp = hp[i];
		hp[i] = hp[m];
		hp[m] = tp;
		i = m;
	}
}

/*
 * Core distances of positions [b, e): the k-th smallest dist2 to any row,
 * itself included.  The search keeps the kk = k + 1 nearest (k when k is
 * every row): the values of the kk smallest dist2 are exact whatever the
 * ties, and where the (k + 1)-th is above the k-th, the k kept are exactly
 * the rows within the core distance.  With ws->nbr, those kk positions are
 * kept for the first Boruvka round (hdb_first_round).
 */
HDB_CLONES static gc_status
hdb_core_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	hdb_ws	   *ws = (hdb_ws *) arg;
	const hdb_tree *t = &ws->t;
	int32_t		k = ws->p->min_samples,
				kk = ws->kk;
	double	   *heap = (double *) malloc(sizeof(double) * ((size_t) kk + (size_t) t->d));
	int32_t    *hpos = (int32_t *) malloc(sizeof(int32_t) * (size_t) kk);
	double	   *qv = heap + kk;
	double		ld2[HDB_LEAF];
	int64_t		evals = 0;

	if (heap == NULL || hpos == NULL)
	{
		free(heap);
		free(hpos);
		return gc_error_set(&w->err, GC_ERR_OUT_OF_MEMORY,
							"out of memory for HDBSCAN's neighbour search");
	}
	for (int64_t q = b; q < e; q++)
	{
		int64_t		stack[HDB_STACK];
		double		sbound[HDB_STACK];
		int			sn = 0;
		int32_t		filled = 0;
		int64_t		before = evals;

		for (int32_t j = 0; j < t->d; j++)
			qv[j] = hdb_coord(t, q, j);
		stack[sn] = 0;
		sbound[sn++] = 0.0;
		while (sn > 0)
		{
			int64_t		node = stack[--sn];
			double		bound = sbound[sn];

			if (filled == kk && bound >= heap[0])
				continue;
			if (t->kid[node] < 0)
			{
				int64_t		s0 = t->start[node],
							m = t->end[node] - s0;

				hdb_leaf_dist2(t, qv, node, ld2);
				evals += m;
				for (int64_t i = 0; i < m; i++)
				{
					double		d2 = ld2[i];

					if (filled < kk)
					{
						/* push, then restore the heap upwards */
						int32_t		c = filled++;

						heap[c] = d2;
						hpos[c] = (int32_t) (s0 + i);
						while (c > 0 && heap[(c - 1) / 2] < heap[c])
						{
							int32_t		up = (c - 1) / 2,
										tp = hpos[c];
							double		tmp = heap[c];

							heap[c] = heap[up];
							heap[up] = tmp;
							hpos[c] = hpos[up];
							hpos[up] = tp;
							c = up;
						}
					}
					else if (d2 < heap[0])
					{
						heap[0] = d2;
						hpos[0] = (int32_t) (s0 + i);
						hdb_heap_down(heap, hpos, kk);
					}
				}
			}
			else
			{
				int64_t		a = t->kid[node],
							c = a + 1;
				double		b2[2],
							ba,
							bc;

				hdb_kids_gap2(t, qv, qv, node, b2);
				ba = b2[0];
				bc = b2[1];

				/* the nearer child on top */
				if (ba <= bc)
				{
					stack[sn] = c;
					sbound[sn++] = bc;
					stack[sn] = a;
					sbound[sn++] = ba;
				}
				else
				{
					stack[sn] = a;
					sbound[sn++] = ba;
					stack[sn] = c;
					sbound[sn++] = bc;
				}
			}
		}
		{
			double		core2,
						next2 = INFINITY;

			if (kk > k)
			{
				/* the root is the (k + 1)-th; the k-th is the larger of its children */
				next2 = heap[0];
				core2 = kk == 2 || heap[1] >= heap[2] ? heap[1] : heap[2];
			}
			else
				core2 = heap[0];
			ws->core[q] = gc_metric_distance(ws->p->metric, core2);
			if (ws->nbr != NULL)
			{
				/* the ball of the core distance is known exactly when the next row lies outside it */
				ws->ball[q] = next2 > core2;
				memcpy(ws->nbr + q * kk, hpos, sizeof(int32_t) * (size_t) kk);
			}
		}
		if (gc_worker_tick(w, (evals - before + 1) * t->d, HDB_CANCEL_EVERY))
		{
			free(heap);
			free(hpos);
			return GC_ERR_CANCELLED;
		}
	}
	ws->evals[w->id] += evals;
	free(heap);
	free(hpos);
	return GC_OK;
}

/* ---------------------------------------------------------------- Boruvka */

/* Each node's component when all its rows share one, else -1 (children after parents). */
static void
hdb_node_comp(hdb_ws *ws)
{
	hdb_tree   *t = &ws->t;

	for (int64_t node = t->nodes - 1; node >= 0; node--)
	{
		if (t->kid[node] < 0 && t->start[node] == t->end[node])
			t->comp[node] = -2;	/* an unused id */
		else if (t->kid[node] < 0)
		{
			int32_t		c = ws->pcomp[t->start[node]];

			for (int64_t i = t->start[node] + 1; i < t->end[node] && c >= 0; i++)
				if (ws->pcomp[i] != c)
					c = -1;
			t->comp[node] = c;
		}
		else
		{
			int32_t		a = t->comp[t->kid[node]],
						c = t->comp[t->kid[node] + 1];

			t->comp[node] = a == c ? a : -1;
		}
	}
}

/* Can an edge (w, lo, hi) of node's rows with bound key (bw, blo, bhi) beat the best? */
static inline int
hdb_may_beat(double bw, int32_t blo, int32_t bhi, double w, int32_t lo, int32_t hi)
{
	return gc_hdbscan_edge_less(bw, blo, bhi, w, lo, hi);
}

/*
 * Pushes the pushed (at most 2) children order[] of a node onto stack at sn,
 * the child of the lesser bound key (kw, klo, khi) on top: the nearer one,
 * and on equal weights the one holding the lower row, so that ties
 * (duplicates, lattices) lead straight to the least edge.  Returns the new sn.
 */
static inline int
hdb_push_children(int64_t *stack, int sn, const int64_t *order, const double *kw, const int32_t *klo,
				  const int32_t *khi, int pushed)
{
	if (pushed == 2 && gc_hdbscan_edge_less(kw[0], klo[0], khi[0], kw[1], klo[1], khi[1]))
	{
		stack[sn++] = order[1];
		stack[sn++] = order[0];
	}
	else
		for (int j = 0; j < pushed; j++)
			stack[sn++] = order[j];
	return sn;
}

/* The best edge the rows searched before in a block found for their component. */
typedef struct hdb_carry
{
	int32_t		c;				/* the component, -1: none */
	int32_t		lo;
	int32_t		hi;
	double		w;
} hdb_carry;

/*
 * The rows of leaf, all of one component, searched together: one walk of
 * the tree, pruned by the least key an edge from the leaf's rows into each
 * node can have (the distance between the boxes, the least core distance
 * on either side, the least row on either side), with one best edge for
 * them all, as the rows of a block share theirs (hdb_nearest_block).  In a
 * leaf reached, each row is pruned and searched as there.  Every edge of a
 * row with a key below the best and a weight within the component's bound
 * is found, so each row's lower bound is proved as there.
 */
HDB_CLONES static void
hdb_leaf_search(hdb_ws *ws, int64_t leaf, hdb_carry *cy, int64_t *stat, int64_t *evals, double *qvs,
				double *ld2)
{
	const hdb_tree *t = &ws->t;
	gc_metric	metric = ws->p->metric;
	int32_t		d = t->d,
				cq = t->comp[leaf],
				blo = INT32_MAX,
				bhi = INT32_MAX,
				bq = -1,
				bown = -1,
				minrow = INT32_MAX,
				na = 0;
	int64_t		s0 = t->start[leaf],
				m = t->end[leaf] - s0,
				stack[HDB_STACK];
	double		bw = INFINITY,
				gw = gc_hdb_wval(__atomic_load_n(&ws->comp_bound[cq], __ATOMIC_RELAXED)),
				minc = INFINITY,
				t2;
	int			act[HDB_LEAF],
				sn = 0;

	if (cy->c == cq)
	{
		bw = cy->w;
		blo = cy->lo;
		bhi = cy->hi;
	}
	for (int64_t i = 0; i < m; i++)
	{
		int64_t		q = s0 + i;
		double		lbq = ws->lb[q];

		ws->best_q[q] = -1;
		if (lbq > bw || lbq > gw)
			continue;
		act[na++] = (int) i;
		minc = ws->core[q] < minc ? ws->core[q] : minc;
		minrow = t->row[q] < minrow ? t->row[q] : minrow;
		for (int32_t k = 0; k < d; k++)
			qvs[i * d + k] = hdb_coord(t, q, k);
	}
	if (na == 0)
		return;
	stat[0] += na;
	t2 = gc_metric_dist2_le(metric, bw < gw ? bw : gw);
	stack[sn++] = 0;
	while (sn > 0)
	{
		int64_t		node = stack[--sn];

		stat[1]++;
		if (t->comp[node] == cq)
			continue;
		if (t->kid[node] < 0)
		{
			int64_t		r0 = t->start[node],
						r1 = t->end[node],
						live = 0;
			double		cmax = bw < gw ? bw : gw;
			int32_t		mr = t->min_row[node];

			stat[3]++;
			for (int64_t r = r0; r < r1; r++)
				live += ws->pcomp[r] != cq && ws->core[r] <= cmax;
			if (live == 0)
				continue;
			for (int a = 0; a < na; a++)
			{
				int64_t		q = s0 + act[a];
				const double *qv = qvs + act[a] * d;
				int32_t		rq = t->row[q];
				double		cqc = ws->core[q],
							b2,
							kw;

				if (cqc > bw || cqc > gw)
					continue;
				b2 = hdb_box2v(t, qv, node);
				if (b2 > t2)
					continue;
				kw = gc_hdbscan_mrd(cqc, t->min_core[node], gc_metric_distance(metric, b2));
				if (kw > gw || !hdb_may_beat(kw, mr < rq ? mr : rq, mr < rq ? rq : mr, bw, blo, bhi))
					continue;
				if (live >= 4)
					hdb_leaf_dist2(t, qv, node, ld2);
				*evals += live;
				stat[2] += live;
				for (int64_t r = r0; r < r1; r++)
				{
					double		wt,
								d2,
								ci = ws->core[r];
					int32_t		ri,
								lo,
								hi;

					if (ws->pcomp[r] == cq || ci > bw || ci > gw)
						continue;
					d2 = live >= 4 ? ld2[r - r0] : hdb_dist2(t, q, r);
					if (d2 > t2)
						continue;
					ri = t->row[r];
					lo = ri < rq ? ri : rq;
					hi = ri < rq ? rq : ri;
					wt = gc_hdbscan_mrd(cqc, ci, gc_metric_distance(metric, d2));
					if (wt <= gw && gc_hdbscan_edge_less(wt, lo, hi, bw, blo, bhi))
					{
						bw = wt;
						blo = lo;
						bhi = hi;
						bq = (int32_t) r;
						bown = act[a];
						t2 = gc_metric_dist2_le(metric, bw < gw ? bw : gw);
					}
				}
			}
		}
		else
		{
			int64_t		kids[2] = {t->kid[node], t->kid[node] + 1},
						order[2];
			double		kw[2];
			int32_t		klo[2],
						khi[2];
			int			pushed = 0;
			double		kb2[2];

			hdb_kids_gap2(t, t->lo + leaf * d, t->hi + leaf * d, node, kb2);
			for (int j = 0; j < 2; j++)
			{
				int64_t		c = kids[j];
				int32_t		mr = t->min_row[c];
				double		b2;

				if (t->comp[c] == cq)
					continue;
				b2 = kb2[j];
				if (b2 > t2)
					continue;
				kw[pushed] = gc_hdbscan_mrd(minc, t->min_core[c], gc_metric_distance(metric, b2));
				klo[pushed] = mr < minrow ? mr : minrow;
				khi[pushed] = mr < minrow ? minrow : mr;
				if (kw[pushed] > gw ||
					!hdb_may_beat(kw[pushed], klo[pushed], khi[pushed], bw, blo, bhi))
					continue;
				order[pushed++] = c;
			}
			sn = hdb_push_children(stack, sn, order, kw, klo, khi, pushed);
		}
	}
	{
		double		proved = bw < gw ? bw : gw;

		for (int a = 0; a < na; a++)
			if (proved > ws->lb[s0 + act[a]])
				ws->lb[s0 + act[a]] = proved;
	}
	if (bq >= 0)
	{
		int64_t		q = s0 + bown;

		ws->best_w[q] = bw;
		ws->best_lo[q] = blo;
		ws->best_hi[q] = bhi;
		ws->best_q[q] = bq;
		cy->c = cq;
		cy->w = bw;
		cy->lo = blo;
		cy->hi = bhi;
		gc_hdb_bound_lower(&ws->comp_bound[cq], bw);
	}
}

/*
 * For positions [b, e): each row's least edge to a row of another
 * component, where it can beat what its component already has.  Only each
 * component's least edge is wanted, so a row's search starts from the best
 * edge found for its component by the rows before it in the block (rows
 * next to each other in the tree are mostly of one component), and skips
 * what weighs more than the least weight any row of its component found so
 * far (comp_bound, shared by the threads).  A row that finds nothing better
 * answers -1.  The least edge of each component is still found: the row
 * that has it cannot be pruned by a bound above or at it.
 */
HDB_CLONES static gc_status
hdb_nearest_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	hdb_ws	   *ws = (hdb_ws *) arg;
	const hdb_tree *t = &ws->t;
	gc_metric	metric = ws->p->metric;
	int64_t		evals = 0;
	double	   *qv = (double *) malloc(sizeof(double) * (size_t) t->d);
	double	   *qvs = (double *) malloc(sizeof(double) * HDB_LEAF * (size_t) t->d);
	hdb_carry	cy = {-1, INT32_MAX, INT32_MAX, INFINITY};
	double		ld2[HDB_LEAF];
	int64_t    *stat = ws->stat + 4 * w->id;

	if (qv == NULL || qvs == NULL)
	{
		free(qv);
		free(qvs);
		return gc_error_set(&w->err, GC_ERR_OUT_OF_MEMORY,
							"out of memory for HDBSCAN's neighbour search");
	}
	for (int64_t l = b; l < e; l++)
	{
	int64_t		leaf = t->leaves[l];

	if (ws->nbr == NULL && t->comp[leaf] >= 0)
	{
		int64_t		before = evals;

		hdb_leaf_search(ws, leaf, &cy, stat, &evals, qvs, ld2);
		if (gc_worker_tick(w, (evals - before + 1) * t->d, HDB_CANCEL_EVERY))
		{
			free(qv);
			free(qvs);
			return GC_ERR_CANCELLED;
		}
		continue;
	}
	for (int64_t q = t->start[leaf]; q < t->end[leaf]; q++)
	{
		int64_t		stack[HDB_STACK];
		int			sn = 0;
		int32_t		cq = ws->pcomp[q],
					rq = t->row[q],
					blo = INT32_MAX,
					bhi = INT32_MAX,
					bq = -1;
		double		bw = INFINITY,
					gw,
					t2,			/* dist2 at most this: distance at most min(bw, gw) */
					cq_core = ws->core[q],
					lbq;
		int64_t		before = evals;

		if (cq == cy.c)
		{
			bw = cy.w;
			blo = cy.lo;
			bhi = cy.hi;
		}
		gw = gc_hdb_wval(__atomic_load_n(&ws->comp_bound[cq], __ATOMIC_RELAXED));
		ws->best_q[q] = -1;
		/*
		 * every edge of q weighs at least lb[q] (its core distance, or what
		 * an earlier round's search proved): nothing here can beat the bounds
		 */
		lbq = ws->lb[q];
		if (lbq > bw || lbq > gw)
			continue;
		if (ws->nbr != NULL)
		{
			/*
			 * The first round: the rows kept by the core search are edges of
			 * q.  Where one weighs the core distance of q and they are every
			 * row within it, the least of them is the least edge of q (an
			 * edge of that weight is to a row within the core distance).
			 * Otherwise the least of them starts the search.
			 */
			const int32_t *nb = ws->nbr + q * ws->kk;

			for (int32_t j = 0; j < ws->kk; j++)
			{
				int64_t		i = nb[j];
				int32_t		ri = t->row[i],
							lo = ri < rq ? ri : rq,
							hi = ri < rq ? rq : ri;
				double		wt;

				if (ws->pcomp[i] == cq)
					continue;
				wt = gc_hdbscan_mrd(cq_core, ws->core[i], gc_metric_distance(metric, hdb_dist2(t, q, i)));
				evals++;
				if (wt <= gw && gc_hdbscan_edge_less(wt, lo, hi, bw, blo, bhi))
				{
					bw = wt;
					blo = lo;
					bhi = hi;
					bq = (int32_t) i;
				}
			}
			if (bq >= 0 && bw == cq_core && ws->ball[q])
				goto found;
		}
		t2 = gc_metric_dist2_le(metric, bw < gw ? bw : gw);
		for (int32_t k = 0; k < t->d; k++)
			qv[k] = hdb_coord(t, q, k);
		stat[0]++;
		stack[sn++] = 0;
		while (sn > 0)
		{
			int64_t		node = stack[--sn];

			stat[1]++;
			if (t->comp[node] == cq)
				continue;
			if (t->kid[node] < 0)
			{
				int64_t		s0 = t->start[node],
							e0 = t->end[node],
							live = 0;
				double		cmax = bw < gw ? bw : gw;

				/* the rows that may give an edge: of another component, core distance within the bounds */
				for (int64_t i = s0; i < e0; i++)
					live += ws->pcomp[i] != cq && ws->core[i] <= cmax;
				stat[3]++;
				if (live == 0)
					continue;
				stat[2] += live;
				if (live >= 4)
					hdb_leaf_dist2(t, qv, node, ld2);
				evals += live;
				for (int64_t i = s0; i < e0; i++)
				{
					double		wt,
								d2,
								ci = ws->core[i];
					int32_t		ri,
								lo,
								hi;

					if (ws->pcomp[i] == cq || ci > bw || ci > gw)
						continue;
					d2 = live >= 4 ? ld2[i - s0] : hdb_dist2(t, q, i);
					if (d2 > t2)
						continue;	/* its distance alone is above the bound */
					ri = t->row[i];
					lo = ri < rq ? ri : rq;
					hi = ri < rq ? rq : ri;
					wt = gc_hdbscan_mrd(cq_core, ci, gc_metric_distance(metric, d2));
					if (wt <= gw && gc_hdbscan_edge_less(wt, lo, hi, bw, blo, bhi))
					{
						bw = wt;
						blo = lo;
						bhi = hi;
						bq = (int32_t) i;
						t2 = gc_metric_dist2_le(metric, bw < gw ? bw : gw);
					}
				}
			}
			else
			{
				int64_t		kids[2] = {t->kid[node], t->kid[node] + 1};
				double		kw[2];
				int32_t		klo[2],
							khi[2];
				int			pushed = 0;
				int64_t		order[2];
				double		kb2[2];

				hdb_kids_gap2(t, qv, qv, node, kb2);
				for (int j = 0; j < 2; j++)
				{
					int64_t		c = kids[j];
					int32_t		mr = t->min_row[c];
					double		b2;

					if (t->comp[c] == cq)
						continue;
					b2 = kb2[j];
					if (b2 > t2)
						continue;	/* farther than the bound */
					/* the least key an edge from q into c can have */
					kw[pushed] = gc_hdbscan_mrd(cq_core, t->min_core[c], gc_metric_distance(metric, b2));
					klo[pushed] = mr < rq ? mr : rq;
					khi[pushed] = mr < rq ? rq : mr;
					if (kw[pushed] > gw ||
						!hdb_may_beat(kw[pushed], klo[pushed], khi[pushed], bw, blo, bhi))
						continue;
					order[pushed++] = c;
				}
				sn = hdb_push_children(stack, sn, order, kw, klo, khi, pushed);
			}
		}
found:
		/* no edge of q weighs less than the least of the bounds it ended with (see above) */
		{
			double		proved = bw < gw ? bw : gw;

			if (proved > lbq)
				ws->lb[q] = proved;
		}
		if (bq >= 0)
		{
			ws->best_w[q] = bw;
			ws->best_lo[q] = blo;
			ws->best_hi[q] = bhi;
			ws->best_q[q] = bq;
			cy.c = cq;
			cy.w = bw;
			cy.lo = blo;
			cy.hi = bhi;
			gc_hdb_bound_lower(&ws->comp_bound[cq], bw);
		}
		if (gc_worker_tick(w, (evals - before + 1) * t->d, HDB_CANCEL_EVERY))
		{
			free(qv);
			free(qvs);
			return GC_ERR_CANCELLED;
		}
	}
	}
	ws->evals[w->id] += evals;
	free(qv);
	free(qvs);
	return GC_OK;
}

/* The minimum spanning tree into mst [n - 1]; counts[0] gets the rounds. */
static gc_status
hdb_boruvka(hdb_ws *ws, gc_hdbscan_edge *mst)
{
	hdb_tree   *t = &ws->t;
	int64_t		n = t->n,
				edges = 0,
				rounds = 0;
	int64_t    *uf = (int64_t *) malloc(sizeof(int64_t) * (size_t) n);
	int32_t    *cbest = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	gc_status	st = GC_OK;

	if (uf == NULL || cbest == NULL)
	{
		free(uf);
		free(cbest);
		return gc_core_oom(ws->ctx, (sizeof(int64_t) + sizeof(int32_t)) * (size_t) n,
						   "out of memory for HDBSCAN's spanning tree of %lld rows", (long long) n);
	}
	for (int64_t i = 0; i < n; i++)
	{
		uf[i] = i;
		ws->pcomp[i] = (int32_t) i;
		ws->lb[i] = ws->core[i];
		ws->best_q[i] = -1;
	}
	/* each node's least core distance */
	for (int64_t node = t->nodes - 1; node >= 0; node--)
	{
		double		m = INFINITY;

		if (t->kid[node] < 0)
			for (int64_t i = t->start[node]; i < t->end[node]; i++)
				m = ws->core[i] < m ? ws->core[i] : m;
		else
		{
			double		a = t->min_core[t->kid[node]],
						c = t->min_core[t->kid[node] + 1];

			m = a < c ? a : c;
		}
		t->min_core[node] = m;
	}
	while (edges < n - 1)
	{
		int64_t		added = 0;
		double		tr = gc_core_now_ms();

		rounds++;
		hdb_node_comp(ws);
		for (int64_t i = 0; i < n; i++)
			ws->comp_bound[i] = gc_hdb_wbits(INFINITY);
		/*
		 * Each component's bound starts at the least edge of the round before
		 * that still leaves it: rows deep inside a large component prune at
		 * once.
		 */
		if (rounds > 1)
			for (int64_t i = 0; i < n; i++)
			{
				int32_t		j = ws->best_q[i];

				if (j >= 0 && ws->pcomp[j] != ws->pcomp[i])
					gc_hdb_bound_lower(&ws->comp_bound[ws->pcomp[i]], ws->best_w[i]);
			}
		st = gc_pool_for(ws->ctx->pool, t->nleaves, HDB_GRAIN / HDB_LEAF, hdb_nearest_block, ws);
		if (st != GC_OK)
			break;
		/* the lists of the core search serve the first round only */
		free(ws->nbr);
		free(ws->ball);
		ws->nbr = NULL;
		ws->ball = NULL;
		/* each component's least edge, positions indexed by the component's root */
		added += gc_hdb_join_least(n, ws->pcomp, ws->best_w, ws->best_lo, ws->best_hi, ws->best_q, cbest, uf,
								   mst, &edges);
		if (added == 0)
		{
			st = gc_error_set(ws->ctx->err, GC_ERR_INTERNAL,
							  "HDBSCAN's spanning tree stopped at %lld of %lld edges, please report a bug",
							  (long long) edges, (long long) (n - 1));
			break;
		}
		for (int64_t i = 0; i < n; i++)
			ws->pcomp[i] = (int32_t) gc_hdb_find(uf, i);
		if (ws->ctx->tuning->debug)
		{
			int64_t		sum[4] = {0, 0, 0, 0};

			for (int i = 0; i < gc_pool_threads(ws->ctx->pool); i++)
				for (int j = 0; j < 4; j++)
				{
					sum[j] += ws->stat[4 * i + j];
					ws->stat[4 * i + j] = 0;
				}
			gc_core_debug(ws->ctx, "hdbscan: round %lld: %lld edges added, %lld rows searched, "
						  "%lld nodes visited (%lld leaves), %lld distances, %.1f ms", (long long) rounds,
						  (long long) added, (long long) sum[0], (long long) sum[1], (long long) sum[3],
						  (long long) sum[2], gc_core_now_ms() - tr);
		}
		if (gc_core_cancelled(ws->ctx))
		{
			st = GC_ERR_CANCELLED;
			break;
		}
	}
	ws->ctx->timing->counts[0] = rounds;
	free(uf);
	free(cbest);
	return st;
}

/* gc_hdb_sort_fn on the call's threads (arg: the call's context). */
static int
hdb_pool_sort(uint64_t *keys, int64_t *vals, uint64_t *tk, int64_t *tv, int64_t m, void *arg)
{
	gc_core_ctx *ctx = (gc_core_ctx *) arg;
	gc_status	st = gc_pool_radix_sort(ctx->pool, keys, vals, tk, tv, m);

	return st == GC_OK ? 0 : st == GC_ERR_OUT_OF_MEMORY ? -2 : -1;
}

/* The loops of gc_hdbscan_finish on the call's threads, one task per block. */
typedef struct hdb_loop
{
	gc_hdb_task_fn fn;
	void	   *arg;
} hdb_loop;

static gc_status
hdb_loop_block(void *arg, gc_worker *w, int64_t begin, int64_t end)
{
	hdb_loop   *l = (hdb_loop *) arg;

	for (int64_t t = begin; t < end; t++)
		if (l->fn(l->arg, t, w) != 0)
			return GC_ERR_CANCELLED;
	return GC_OK;
}

static int
hdb_loop_run(void *self, int64_t tasks, gc_hdb_task_fn fn, void *arg)
{
	hdb_loop	l = {fn, arg};

	return gc_pool_for(((gc_core_ctx *) self)->pool, tasks, 1, hdb_loop_block, &l) == GC_OK ? 0 : 1;
}

static int
hdb_loop_poll(void *worker)
{
	return gc_worker_poll((gc_worker *) worker);
}

gc_status
gc_core_hdbscan(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				const gc_hdbscan_params *params, gc_hdbscan_result *result)
{
	hdb_ws		ws;
	gc_hdbscan_edge *mst = NULL;
	double	   *core_rows = NULL;
	gc_status	st;
	double		t0 = gc_core_now_ms();
	int			threads = gc_pool_threads(ctx->pool);

	memset(&ws, 0, sizeof(ws));
	ws.ctx = ctx;
	ws.p = params;
	ws.core = (double *) malloc(sizeof(double) * (size_t) n);
	ws.pcomp = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.best_w = (double *) malloc(sizeof(double) * (size_t) n);
	ws.best_lo = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.best_hi = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.best_q = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	ws.comp_bound = (uint64_t *) malloc(sizeof(uint64_t) * (size_t) n);
	ws.lb = (double *) malloc(sizeof(double) * (size_t) n);
	ws.evals = (int64_t *) calloc((size_t) threads, sizeof(int64_t));
	ws.stat = (int64_t *) calloc((size_t) threads * 4, sizeof(int64_t));
	mst = (gc_hdbscan_edge *) malloc(sizeof(gc_hdbscan_edge) * (size_t) (n > 1 ? n - 1 : 1));
	core_rows = (double *) malloc(sizeof(double) * (size_t) n);
	if (!ws.core || !ws.pcomp || !ws.best_w || !ws.best_lo || !ws.best_hi || !ws.best_q || !ws.comp_bound || !ws.lb ||
		!ws.evals || !ws.stat || !mst || !core_rows)
	{
		st = gc_core_oom(ctx, (size_t) n * 64, "out of memory for HDBSCAN of %lld rows",
						 (long long) n);
		goto done;
	}
	if (gc_hdbscan_pairs_chosen(ctx->tuning, d))
	{
		/* many features: the pair engine (hdbscan_pairs.c) instead of the tree */
		if ((st = gc_hdbscan_pairs(ctx, x, dtype, n, d, params, core_rows, mst)) != GC_OK)
			goto done;
		t0 = gc_core_now_ms();
		if ((st = gc_hdbscan_sort_edges(mst, n - 1, hdb_pool_sort, ctx, ctx->err)) != GC_OK)
			goto done;
		goto shared;
	}
	ctx->timing->path = GC_PATH_INDEX;
	if ((st = hdb_build(&ws, x, dtype, n, d)) != GC_OK)
		goto done;
	gc_core_debug(ctx, "hdbscan: tree of %lld nodes built in %.1f ms", (long long) ws.t.nodes,
				  gc_core_now_ms() - t0);
	/*
	 * The core search keeps min_samples + 1 rows; for a small min_samples
	 * their positions are kept for the first Boruvka round (memory linear in
	 * the rows: at most HDB_NBR_MAX ints a row).
	 */
	ws.kk = params->min_samples < n ? params->min_samples + 1 : params->min_samples;
	if (ws.kk <= HDB_NBR_MAX)
	{
		ws.nbr = (int32_t *) malloc(sizeof(int32_t) * (size_t) n * (size_t) ws.kk);
		ws.ball = (uint8_t *) malloc((size_t) n);
		if (!ws.nbr || !ws.ball)
		{
			free(ws.nbr);
			free(ws.ball);
			ws.nbr = NULL;
			ws.ball = NULL;
		}
	}
	if ((st = gc_pool_for(ctx->pool, n, HDB_GRAIN, hdb_core_block, &ws)) != GC_OK)
		goto done;
	ctx->timing->phase_ms[0] = gc_core_now_ms() - t0;
	{
		int64_t		ev = 0;

		for (int i = 0; i < threads; i++)
			ev += ws.evals[i];
		gc_core_debug(ctx, "hdbscan: core distances: %lld distances, %.1f ms", (long long) ev,
					  ctx->timing->phase_ms[0]);
	}

	t0 = gc_core_now_ms();
	if ((st = hdb_boruvka(&ws, mst)) != GC_OK)
		goto done;
	ctx->timing->phase_ms[1] = gc_core_now_ms() - t0;
	for (int i = 0; i < threads; i++)
		ctx->timing->counts[1] += ws.evals[i];

	t0 = gc_core_now_ms();
	/* sorted on the call's threads, so that the shared tail finds them in order */
	if ((st = gc_hdbscan_sort_edges(mst, n - 1, hdb_pool_sort, ctx, ctx->err)) != GC_OK)
		goto done;
	for (int64_t i = 0; i < n; i++)
		core_rows[ws.t.row[i]] = ws.core[i];
shared:
	if (result->core_distance != NULL)
		memcpy(result->core_distance, core_rows, sizeof(double) * (size_t) n);
	{
		gc_hdb_threads thr = {threads, hdb_loop_run, hdb_loop_poll, ctx};

		st = gc_hdbscan_finish(params, n, core_rows, mst, NULL, NULL, result, &thr, ctx->cancel,
							   ctx->cancel_arg, ctx->err);
	}
	ctx->timing->phase_ms[2] = gc_core_now_ms() - t0;
done:
	if (st == GC_ERR_CANCELLED)
		st = gc_core_cancel_status(ctx);
	hdb_free(&ws);
	free(mst);
	free(core_rows);
	return st;
}
