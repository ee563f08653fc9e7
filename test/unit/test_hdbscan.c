/*
 * test_hdbscan.c
 *    Unit tests of the CPU HDBSCAN: the back end's core distances and
 *    answer against a brute-force reference (every pair's distance, Prim's
 *    spanning tree under the order (w, lower row, higher row), then the same
 *    gc_hdbscan_finish), on data with ties, duplicates, far outliers and
 *    several dimensions; the same answer on 1 and 4 threads; cancel; the
 *    work on duplicate rows and lattices stays linear-logarithmic.
 *    scikit-learn's own answers are compared in test/test_hdbscan_sklearn.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"
#include "hdbscan.h"
#include "metric.h"
#include "unit.h"

static uint64_t rng_state = 7;

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

/* A data set: rows [n, d] as doubles, given to the back end as dtype. */
typedef struct dataset
{
	const char *name;
	int64_t		n;
	int32_t		d;
	gc_dtype	dtype;
	double	   *v;
	void	   *x;
} dataset;

static void
ds_finish(dataset *s)
{
	if (s->dtype == GC_F32)
	{
		float	   *f = malloc(sizeof(float) * (size_t) (s->n * s->d));

		for (int64_t i = 0; i < s->n * s->d; i++)
		{
			f[i] = (float) s->v[i];
			s->v[i] = f[i];
		}
		s->x = f;
	}
	else
		s->x = s->v;
}

static void
ds_free(dataset *s)
{
	if (s->x != s->v)
		free(s->x);
	free(s->v);
}

static dataset
ds_blobs(const char *name, int64_t n, int32_t d, gc_dtype dt, int blobs, double spread,
		 double noise_frac, int round_to)
{
	dataset		s = {name, n, d, dt, malloc(sizeof(double) * (size_t) (n * d)), NULL};

	for (int64_t i = 0; i < n; i++)
	{
		int			b = (int) (urand() * blobs);
		int			noise = urand() < noise_frac;

		for (int32_t k = 0; k < d; k++)
		{
			double		c = noise ? urand() * 20.0 - 10.0 : (double) ((b * 7 + k * 3) % 11) - 5.0;
			double		val = noise ? c : c + spread * (b % 3 + 1) * nrand();

			if (round_to > 0)
				val = round(val * round_to) / round_to;
			s.v[i * d + k] = val;
		}
	}
	ds_finish(&s);
	return s;
}

static dataset
ds_copy_rows(const char *name, int64_t n, int32_t d, gc_dtype dt, int distinct)
{
	dataset		s = {name, n, d, dt, malloc(sizeof(double) * (size_t) (n * d)), NULL};

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		src = (int64_t) (urand() * distinct);

		for (int32_t k = 0; k < d; k++)
			s.v[i * d + k] = (double) ((src * 37 + k * 11) % 17);
	}
	ds_finish(&s);
	return s;
}

static dataset
ds_lattice(const char *name, int side, gc_dtype dt, int shuffle)
{
	int64_t		n = (int64_t) side * side;
	dataset		s = {name, n, 2, dt, malloc(sizeof(double) * (size_t) (n * 2)), NULL};

	for (int64_t i = 0; i < n; i++)
	{
		s.v[2 * i] = (double) (i % side) * 0.5;
		s.v[2 * i + 1] = (double) (i / side) * 0.5;
	}
	if (shuffle)
		for (int64_t i = n - 1; i > 0; i--)
		{
			int64_t		j = (int64_t) (urand() * (double) (i + 1));
			double		a = s.v[2 * i],
						b = s.v[2 * i + 1];

			s.v[2 * i] = s.v[2 * j];
			s.v[2 * i + 1] = s.v[2 * j + 1];
			s.v[2 * j] = a;
			s.v[2 * j + 1] = b;
		}
	ds_finish(&s);
	return s;
}

/* n rows on a lattice of d coordinates, each one of levels values 0.5 apart: exact ties and duplicates. */
static dataset
ds_grid(const char *name, int64_t n, int32_t d, gc_dtype dt, int levels)
{
	dataset		s = {name, n, d, dt, malloc(sizeof(double) * (size_t) (n * d)), NULL};

	for (int64_t i = 0; i < n * d; i++)
		s.v[i] = (double) (int) (urand() * levels) * 0.5;
	ds_finish(&s);
	return s;
}

/* ---------------------------------------------------------------- the reference */

static double
ref_dist(const dataset *s, gc_metric m, int64_t a, int64_t b)
{
	double		d2;

	if (s->dtype == GC_F64)
		d2 = gc_dist2_f64((const double *) s->x + a * s->d, (const double *) s->x + b * s->d, s->d);
	else
		d2 = gc_dist2((const float *) s->x + a * s->d, (const float *) s->x + b * s->d, s->d);
	return gc_metric_distance(m, d2);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* Core distances and the spanning tree by brute force (Prim's algorithm under the edge order). */
static void
ref_tree(const dataset *s, gc_metric m, int32_t min_samples, double *core, gc_hdbscan_edge *mst)
{
	int64_t		n = s->n;
	double	   *row = malloc(sizeof(double) * (size_t) n);
	double	   *bw = malloc(sizeof(double) * (size_t) n);
	int32_t    *blo = malloc(sizeof(int32_t) * (size_t) n),
			   *bhi = malloc(sizeof(int32_t) * (size_t) n);
	uint8_t    *in = calloc((size_t) n, 1);
	int64_t		cur = 0;

	for (int64_t i = 0; i < n; i++)
	{
		for (int64_t j = 0; j < n; j++)
			row[j] = ref_dist(s, m, i, j);
		qsort(row, (size_t) n, sizeof(double), cmp_double);
		core[i] = row[min_samples - 1];
	}
	for (int64_t i = 0; i < n; i++)
	{
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
			if (in[j])
				continue;
			{
				double		w = gc_hdbscan_mrd(core[cur], core[j], ref_dist(s, m, cur, j));
				int32_t		lo = (int32_t) (cur < j ? cur : j),
							hi = (int32_t) (cur < j ? j : cur);

				if (gc_hdbscan_edge_less(w, lo, hi, bw[j], blo[j], bhi[j]))
				{
					bw[j] = w;
					blo[j] = lo;
					bhi[j] = hi;
				}
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
	free(row);
	free(bw);
	free(blo);
	free(bhi);
	free(in);
}

typedef struct answer
{
	int32_t    *cluster;
	double	   *prob;
	double	   *score;
	double	   *core;
	int64_t		n_clusters;
	gc_timing	timing;
} answer;

static void
answer_alloc(answer *a, int64_t n)
{
	a->cluster = malloc(sizeof(int32_t) * (size_t) n);
	a->prob = malloc(sizeof(double) * (size_t) n);
	a->score = malloc(sizeof(double) * (size_t) n);
	a->core = malloc(sizeof(double) * (size_t) n);
	a->n_clusters = -1;
	memset(&a->timing, 0, sizeof(a->timing));
}

static void
answer_free(answer *a)
{
	free(a->cluster);
	free(a->prob);
	free(a->score);
	free(a->core);
}

static gc_hdbscan_params
params(int32_t mcs, int32_t ms)
{
	return unit_hdbscan_params(mcs, ms);
}

static gc_status
run_cpu(const dataset *s, const gc_hdbscan_params *p, answer *a, int threads)
{
	gc_exec		e;
	gc_hdbscan_result r;

	unit_threads = threads;
	e = unit_exec(NULL, &a->timing);
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->prob;
	r.outlier_score = a->score;
	r.core_distance = a->core;
	{
		gc_status	st = gc_cpu_api()->hdbscan(&e, s->x, s->dtype, s->n, s->d, p, &r);

		a->n_clusters = r.n_clusters;
		return st;
	}
}

static void
run_ref(const dataset *s, const gc_hdbscan_params *p, answer *a)
{
	gc_hdbscan_edge *mst = malloc(sizeof(gc_hdbscan_edge) * (size_t) (s->n));
	gc_hdbscan_result r;
	gc_error	err;
	gc_status	st;

	ref_tree(s, p->metric, p->min_samples, a->core, mst);
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->prob;
	r.outlier_score = a->score;
	st = gc_hdbscan_finish(p, s->n, a->core, mst, NULL, NULL, &r, NULL, NULL, NULL, &err);
	CHECK(st == GC_OK, "%s: reference finish failed: %s", s->name, err.message);
	a->n_clusters = r.n_clusters;
	free(mst);
}

static int
same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(double)) == 0;
}

static void
compare(const char *what, const dataset *s, const answer *a, const answer *b)
{
	int64_t		bad_core = 0,
				bad_label = 0,
				bad_prob = 0,
				bad_score = 0;

	for (int64_t i = 0; i < s->n; i++)
	{
		bad_core += !same_double(a->core[i], b->core[i]);
		bad_label += a->cluster[i] != b->cluster[i];
		bad_prob += !same_double(a->prob[i], b->prob[i]);
		bad_score += !same_double(a->score[i], b->score[i]);
	}
	CHECK(a->n_clusters == b->n_clusters, "%s %s: %lld clusters against %lld", what, s->name,
		  (long long) a->n_clusters, (long long) b->n_clusters);
	CHECK(bad_core == 0, "%s %s: %lld core distances differ", what, s->name, (long long) bad_core);
	CHECK(bad_label == 0, "%s %s: %lld labels differ", what, s->name, (long long) bad_label);
	CHECK(bad_prob == 0, "%s %s: %lld probabilities differ", what, s->name, (long long) bad_prob);
	CHECK(bad_score == 0, "%s %s: %lld outlier scores differ", what, s->name, (long long) bad_score);
}

/* Invariants of any answer. */
static void
check_shape(const dataset *s, const answer *a)
{
	int64_t		bad = 0,
				first_seen = 0;

	for (int64_t i = 0; i < s->n; i++)
	{
		int32_t		c = a->cluster[i];

		if (c < -1 || c >= a->n_clusters)
			bad++;
		/* numbered by first appearance */
		if (c >= 0 && c > first_seen)
			bad++;
		if (c >= 0 && c == first_seen)
			first_seen++;
		if (!(a->prob[i] >= 0.0 && a->prob[i] <= 1.0) || (c < 0 && a->prob[i] != 0.0))
			bad++;
		if (!(a->score[i] >= 0.0 && a->score[i] <= 1.0))
			bad++;
	}
	CHECK(bad == 0, "%s: %lld rows break the answer's invariants", s->name, (long long) bad);
}

/*
 * The labels alone, as gpu_hdbscan asks when the query reads no score
 * (probability, outlier scores and core distances NULL), on 3 threads:
 * the same labels and count as the full answer a.  With one of the two
 * score arrays alone, the call is refused.
 */
static void
labels_only(const dataset *s, const gc_hdbscan_params *p, const answer *a)
{
	int32_t    *cluster = malloc(sizeof(int32_t) * (size_t) s->n);
	gc_timing	timing;
	gc_exec		e;
	gc_hdbscan_result r;
	gc_status	st;
	int64_t		bad = 0;

	unit_threads = 3;
	e = unit_exec(NULL, &timing);
	memset(&r, 0, sizeof(r));
	r.cluster = cluster;
	st = gc_cpu_api()->hdbscan(&e, s->x, s->dtype, s->n, s->d, p, &r);
	CHECK(st == GC_OK, "%s labels only: %s", s->name, gc_cpu_api()->last_error()->message);
	for (int64_t i = 0; st == GC_OK && i < s->n; i++)
		bad += cluster[i] != a->cluster[i];
	CHECK(st != GC_OK || r.n_clusters == a->n_clusters, "%s labels only: %lld clusters against %lld",
		  s->name, (long long) r.n_clusters, (long long) a->n_clusters);
	CHECK(bad == 0, "%s labels only: %lld labels differ", s->name, (long long) bad);

	r.probability = a->prob;	/* without the outlier scores */
	st = gc_cpu_api()->hdbscan(&e, s->x, s->dtype, s->n, s->d, p, &r);
	CHECK(st == GC_ERR_INTERNAL, "%s: probabilities without outlier scores: status %d", s->name, (int) st);
	free(cluster);
}

static void
case_against_reference(dataset *s, gc_hdbscan_params p)
{
	answer		a,
				b,
				c;
	gc_status	st;

	answer_alloc(&a, s->n);
	answer_alloc(&b, s->n);
	answer_alloc(&c, s->n);
	st = run_cpu(s, &p, &a, 1);
	CHECK(st == GC_OK, "%s: %s", s->name, gc_cpu_api()->last_error()->message);
	run_ref(s, &p, &b);
	compare("1 thread vs reference", s, &a, &b);
	check_shape(s, &a);
	labels_only(s, &p, &a);
	st = run_cpu(s, &p, &c, 4);
	CHECK(st == GC_OK, "%s: %s", s->name, gc_cpu_api()->last_error()->message);
	compare("4 threads vs 1", s, &c, &a);
	answer_free(&a);
	answer_free(&b);
	answer_free(&c);
}

static int	cancel_after = 0;

static int
cancel_cb(void *arg)
{
	return --cancel_after <= 0;
}

int
main(void)
{
	gc_hdbscan_params p;

	/* blobs with noise, floats rounded to two decimals (ties) */
	{
		dataset		s = ds_blobs("blobs 2-D f32 round", 1500, 2, GC_F32, 6, 0.3, 0.1, 100);

		p = params(10, 5);
		case_against_reference(&s, p);
		p.method = GC_HDBSCAN_LEAF;
		case_against_reference(&s, p);
		p = params(10, 5);
		p.cluster_selection_epsilon = 0.5;
		case_against_reference(&s, p);
		p.method = GC_HDBSCAN_LEAF;
		case_against_reference(&s, p);
		p = params(15, 1);
		case_against_reference(&s, p);
		p = params(5, 10);
		p.max_cluster_size = 100;
		case_against_reference(&s, p);
		p = params(10, 5);
		p.allow_single_cluster = 1;
		case_against_reference(&s, p);
		p.cluster_selection_epsilon = 3.0;
		case_against_reference(&s, p);
		p = params(2, 2);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	{
		dataset		s = ds_blobs("blobs 8-D f64", 800, 8, GC_F64, 4, 0.4, 0.05, 0);

		p = params(8, 4);
		case_against_reference(&s, p);
		p.metric = GC_METRIC_COSINE;
		/* unit rows for the cosine metric, as the glue makes them */
		for (int64_t i = 0; i < s.n; i++)
			gc_unit_row_f64((double *) s.x + i * s.d, s.d);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	{
		dataset		s = ds_blobs("1-D f64 far outlier", 600, 1, GC_F64, 3, 0.2, 0.02, 0);

		((double *) s.x)[17] = 1e12;
		p = params(5, 5);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	{
		dataset		s = ds_copy_rows("many duplicates 3-D", 1200, 3, GC_F32, 40);

		p = params(5, 3);
		case_against_reference(&s, p);
		p = params(30, 30);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	{
		dataset		s = ds_copy_rows("all rows equal", 300, 2, GC_F64, 1);

		p = params(5, 5);
		case_against_reference(&s, p);
		p.allow_single_cluster = 1;
		case_against_reference(&s, p);
		ds_free(&s);
	}
	{
		dataset		s = ds_lattice("lattice, exact ties", 30, GC_F64, 0);
		dataset		t = ds_lattice("lattice shuffled", 30, GC_F32, 1);

		p = params(10, 5);
		case_against_reference(&s, p);
		case_against_reference(&t, p);
		p = params(4, 1);
		case_against_reference(&t, p);
		ds_free(&s);
		ds_free(&t);
	}
	{
		dataset		s = ds_blobs("min_samples = n", 60, 2, GC_F64, 2, 0.3, 0.0, 0);

		p = params(5, 60);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	/*
	 * 4 to 16 dimensions (the tree splits on every coordinate): blobs with
	 * noise rounded to 0.1 (ties), a far outlier, a lattice with exact ties
	 * and duplicates, many copies of few rows, cosine; float and double.
	 */
	{
		const int32_t dims[4] = {4, 5, 8, 16};

		for (int di = 0; di < 4; di++)
		{
			int32_t		d = dims[di];
			char		name[6][64];

			snprintf(name[0], 64, "blobs %d-D f32 round", d);
			snprintf(name[1], 64, "blobs %d-D f64 far outlier", d);
			snprintf(name[2], 64, "lattice %d-D f64 ties", d);
			snprintf(name[3], 64, "duplicates %d-D f32", d);
			snprintf(name[4], 64, "cosine %d-D f64", d);
			snprintf(name[5], 64, "cosine %d-D f32", d);
			{
				dataset		s = ds_blobs(name[0], 1500, d, GC_F32, 6, 0.4, 0.1, 10);

				p = params(10, 10);
				case_against_reference(&s, p);
				p = params(5, 3);
				case_against_reference(&s, p);
				p = params(15, 1);
				case_against_reference(&s, p);
				ds_free(&s);
			}
			{
				dataset		s = ds_blobs(name[1], 1000, d, GC_F64, 4, 0.3, 0.05, 0);

				s.v[17 * d + d - 1] = 1e9;
				((double *) s.x)[17 * d + d - 1] = 1e9;
				p = params(10, 5);
				case_against_reference(&s, p);
				ds_free(&s);
			}
			{
				dataset		s = ds_grid(name[2], 1200, d, GC_F64, d <= 5 ? 4 : 2);

				p = params(10, 10);
				case_against_reference(&s, p);
				p = params(4, 1);
				case_against_reference(&s, p);
				ds_free(&s);
			}
			{
				dataset		s = ds_copy_rows(name[3], 1000, d, GC_F32, 30);

				p = params(5, 3);
				case_against_reference(&s, p);
				p = params(20, 40);
				case_against_reference(&s, p);
				ds_free(&s);
			}
			for (int f = 0; f < 2; f++)
			{
				dataset		s = ds_blobs(name[4 + f], 900, d, f ? GC_F64 : GC_F32, 5, 0.3, 0.05, 0);

				/* unit rows for the cosine metric, as the glue makes them */
				if (f)
					for (int64_t i = 0; i < s.n; i++)
						gc_unit_row_f64((double *) s.x + i * s.d, s.d);
				else
					for (int64_t i = 0; i < s.n; i++)
					{
						gc_unit_row_f32((float *) s.x + i * s.d, s.d);
						for (int32_t k = 0; k < d; k++)
							s.v[i * d + k] = ((float *) s.x)[i * d + k];
					}
				p = params(8, 4);
				p.metric = GC_METRIC_COSINE;
				case_against_reference(&s, p);
				ds_free(&s);
			}
		}
	}
	/* a deeper tree: 5-D blobs, several levels of leaves searched together */
	{
		dataset		s = ds_blobs("blobs 5-D f32 4000 rows", 4000, 5, GC_F32, 8, 0.5, 0.1, 0);

		p = params(10, 10);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	/*
	 * Coordinates of five values, signed zeros among them, at an odd
	 * dimension: boxes of zero width and queries on a face of a box, where
	 * the gap below or above the box is zero of either sign (the bounds of
	 * both children of a node are taken together, without a branch).
	 */
	for (int f = 0; f < 2; f++)
	{
		const double vals[5] = {-1.0, -0.0, 0.0, 0.5, 1.0};
		int64_t		n = 1500;
		int32_t		d = 7;
		dataset		s = {f ? "signed zeros 7-D f64" : "signed zeros 7-D f32", n, d, f ? GC_F64 : GC_F32,
		malloc(sizeof(double) * (size_t) (n * d)), NULL};

		for (int64_t i = 0; i < n * d; i++)
			s.v[i] = vals[(int) (urand() * 5)];
		ds_finish(&s);
		p = params(10, 10);
		case_against_reference(&s, p);
		p = params(5, 2);
		case_against_reference(&s, p);
		ds_free(&s);
	}
	/*
	 * Enough rows that the boxes of the top nodes are taken on several
	 * threads (blocks of rows combined in order): the same answer on 1 and
	 * 4 threads, with signed zeros and equal values at the blocks' edges.
	 */
	{
		dataset		s = ds_blobs("blobs 5-D f32 140000 rows, signed zeros", 140000, 5, GC_F32, 6, 0.5, 0.05, 0);
		answer		a,
					c;
		gc_status	st;

		for (int64_t i = 0; i < s.n; i += 3)
		{
			double		z = (i / 3) % 2 ? 0.0 : -0.0;

			s.v[i * s.d + 1] = z;
			((float *) s.x)[i * s.d + 1] = (float) z;
		}
		answer_alloc(&a, s.n);
		answer_alloc(&c, s.n);
		p = params(10, 10);
		st = run_cpu(&s, &p, &a, 1);
		CHECK(st == GC_OK, "%s: %s", s.name, gc_cpu_api()->last_error()->message);
		st = run_cpu(&s, &p, &c, 4);
		CHECK(st == GC_OK, "%s: %s", s.name, gc_cpu_api()->last_error()->message);
		compare("4 threads vs 1", &s, &c, &a);
		check_shape(&s, &c);
		answer_free(&a);
		answer_free(&c);
		ds_free(&s);
	}

	/* tiny inputs */
	for (int64_t n = 1; n <= 4; n++)
	{
		dataset		s = ds_blobs("tiny", n, 2, GC_F64, 1, 1.0, 0.0, 0);

		p = params(2, 1);
		case_against_reference(&s, p);
		ds_free(&s);
	}

	/*
	 * Duplicates and lattices: the work grows near-linearly.  Four times the
	 * rows must cost well under 16 times the distance evaluations (a
	 * quadratic search, which exact ties easily cause, would cost 16).
	 */
	{
		const char *names[2] = {"3 distinct rows", "shuffled lattice"};

		for (int kind = 0; kind < 2; kind++)
		{
			int64_t		evals[2];

			for (int size = 0; size < 2; size++)
			{
				dataset		s = kind == 0 ? ds_copy_rows(names[0], size ? 40000 : 10000, 2, GC_F32, 3)
					: ds_lattice(names[1], size ? 200 : 100, GC_F64, 1);
				answer		a;

				p = params(10, 10);
				answer_alloc(&a, s.n);
				CHECK(run_cpu(&s, &p, &a, 2) == GC_OK, "%s: %s", s.name,
					  gc_cpu_api()->last_error()->message);
				evals[size] = a.timing.counts[1];
				if (kind == 0)
					CHECK(a.n_clusters == 3, "%s: %lld clusters", s.name, (long long) a.n_clusters);
				answer_free(&a);
				ds_free(&s);
			}
			CHECK(evals[1] < 6 * evals[0], "%s: %lld distance evaluations for 4 times the rows of %lld",
				  names[kind], (long long) evals[1], (long long) evals[0]);
		}
	}

	/* cancel */
	{
		dataset		s = ds_blobs("cancel", 50000, 2, GC_F32, 5, 0.3, 0.1, 0);
		answer		a;
		gc_exec		e;
		gc_hdbscan_result r;
		gc_status	st;

		answer_alloc(&a, s.n);
		p = params(10, 10);
		unit_threads = 2;
		cancel_after = 3;
		e = unit_exec(cancel_cb, NULL);
		memset(&r, 0, sizeof(r));
		r.cluster = a.cluster;
		r.probability = a.prob;
		r.outlier_score = a.score;
		st = gc_cpu_api()->hdbscan(&e, s.x, s.dtype, s.n, s.d, &p, &r);
		CHECK(st == GC_ERR_CANCELLED, "cancel: status %d", (int) st);
		CHECK(cancel_after <= 0, "cancel: the callback was asked %d times too few", cancel_after);
		answer_free(&a);
		ds_free(&s);
	}

	/*
	 * Cancel inside the shared tail (gc_hdbscan_finish): a chain of 300,000
	 * rows; the callback says yes at its k-th question, for every k up to
	 * the number of questions a full run asks; each stops with
	 * GC_ERR_CANCELLED.
	 */
	{
		int64_t		n = 300000;
		gc_hdbscan_edge *mst = malloc(sizeof(gc_hdbscan_edge) * (size_t) n);
		double	   *core = calloc((size_t) n, sizeof(double));
		answer		a;
		gc_hdbscan_result r;
		gc_error	err;
		int			questions = 0,
					bad = 0;

		answer_alloc(&a, n);
		memset(&r, 0, sizeof(r));
		r.cluster = a.cluster;
		r.probability = a.prob;
		r.outlier_score = a.score;
		p = params(5, 5);
		for (int64_t i = 0; i + 1 < n; i++)
		{
			mst[i].lo = (int32_t) i;
			mst[i].hi = (int32_t) (i + 1);
			mst[i].w = 1.0 + (double) ((i * 7919) % 1000) / 1000.0;
		}
		/* the first run sorts the edges in place; count the questions of the next */
		CHECK(gc_hdbscan_finish(&p, n, core, mst, NULL, NULL, &r, NULL, NULL, NULL, &err) == GC_OK,
			  "tail without cancel: %s", err.message);
		cancel_after = 1 << 30;
		CHECK(gc_hdbscan_finish(&p, n, core, mst, NULL, NULL, &r, NULL, cancel_cb, NULL, &err) == GC_OK,
			  "tail without cancel: %s", err.message);
		questions = (1 << 30) - cancel_after;
		CHECK(questions >= 10, "the tail asked cancel %d times for %lld rows", questions, (long long) n);
		for (int k = 1; k <= questions; k++)
		{
			cancel_after = k;
			if (gc_hdbscan_finish(&p, n, core, mst, NULL, NULL, &r, NULL, cancel_cb, NULL, &err) != GC_ERR_CANCELLED)
				bad++;
		}
		CHECK(bad == 0, "%d of %d cancels in the tail did not stop it", bad, questions);
		answer_free(&a);
		free(mst);
		free(core);
	}

	/* parameter checks */
	{
		gc_error	err;

		p = params(1, 1);
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_ERR_INVALID_ARGUMENT, "min_cluster_size 1 accepted");
		p = params(5, 0);
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_ERR_INVALID_ARGUMENT, "min_samples 0 accepted");
		p = params(5, 11);
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_ERR_INVALID_ARGUMENT, "min_samples > n accepted");
		p = params(5, 5);
		p.cluster_selection_epsilon = -1.0;
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_ERR_INVALID_ARGUMENT, "negative epsilon accepted");
		p.cluster_selection_epsilon = NAN;
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_ERR_INVALID_ARGUMENT, "NaN epsilon accepted");
		p = params(5, 5);
		CHECK(gc_check_hdbscan(&p, 10, 2, &err) == GC_OK, "valid parameters refused: %s", err.message);
	}
	UNIT_DONE();
}
