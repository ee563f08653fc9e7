/*
 * pairs_cpu_bench.c
 *    DBSCAN (and density peaks) on the CPU back end's pair engine, without a
 *    GPU: the rows and eps of bench/pairs_bench.cu (20 Gaussian blobs with
 *    10 % uniform noise, test/data/gc_testdata.h; eps the median distance to
 *    the K-th nearest row over 256 sampled rows, in float with no
 *    multiply-add contracted, as pairs_bench's kernel computes it), the CPU
 *    back end on T threads, best of R calls after a warm-up, per phase.
 *
 *   .bench/pairs_cpu_bench N D [--cosine] [--f64] [--threads T] [--reps R] [--k K]
 *                          [--min-pts M] [--eps E] [--algo dbscan|dpeaks|both]
 *                          [--dump FILE] [--save PREFIX] [--check PREFIX] [--debug] [--noise F]
 *
 *   --noise   the share of uniform rows (0.10; 1 for uniform rows alone, where no direction
 *             of spread stands out)
 *   --dump    the float rows (N x D, raw) for bench/pairs_sklearn.py
 *   --save    writes PREFIX.ALGO.ans: the answer (labels and flags, and rho
 *             and delta for density peaks) of the first call
 *   --check   compares every call's answer with PREFIX.ALGO.ans, bit for bit
 *             (an answer saved by another build: a change that must not
 *             change any answer)
 *
 * Prints one table row per algorithm: the best call's wall ms and the
 * process's CPU ms over it (user and system: a figure less disturbed by
 * other work on a shared machine), its phases,
 * the screen, the pairs sent to the exact path, clusters, and the check.
 * Built by bench/Makefile (make -C bench pairs_cpu_bench); bench/pairs_cpu_bench.sh
 * runs it beside scikit-learn on the same rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dpeaks_common.h"
#include "gc_backends.h"
#include "gc_testdata.h"
#include "metric.h"
#include "pairs_call.h"
#include "pairs.h"

typedef struct run
{
	double		ms;
	double		cpu_ms;			/* user and system time of the process over the call */
	gc_timing	t;
	int32_t    *a;				/* [n] labels */
	uint8_t    *b;				/* [n] core or centre flags */
	double	   *rho;			/* [n] density peaks only */
	double	   *delta;
	int			ok;
	char		err[512];
} run;

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return (x > y) - (x < y);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* eps as pairs_bench's choose_eps: the median over 256 rows of the k-th smallest float dist2. */
static double
choose_eps(const float *x, int n, int d, int k, int cosine)
{
	const int	nq = 256;
	float	   *r = malloc(sizeof(float) * (size_t) n);
	double		kd[256];

	for (int s = 0; s < nq; s++)
	{
		const float *a = x + (size_t) (((int64_t) s * 7919 + 13) % n) * d;

		for (int j = 0; j < n; j++)
		{
			const float *b = x + (size_t) j * d;
			float		acc = 0.f;

			for (int q = 0; q < d; q++)
			{
				float		u = a[q] - b[q];

				acc += u * u;
			}
			r[j] = acc;
		}
		qsort(r, (size_t) n, sizeof(float), cmp_float);
		kd[s] = cosine ? r[k] * 0.5 : sqrt((double) r[k]);
	}
	free(r);
	qsort(kd, nq, sizeof(double), cmp_double);
	return kd[nq / 2];
}

/* User and system time of the process so far, in ms. */
static double
cpu_now_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void
run_algo(const char *algo, const void *x, gc_dtype t, int n, int d, gc_metric m, double eps,
		 int min_pts, int threads, int debug, run *r)
{
	gc_tuning	tu = gc_tuning_defaults();
	gc_exec		e;
	double		t0,
				c0;
	gc_status	st;
	const gc_backend_api *api = gc_cpu_api();

	memset(&e, 0, sizeof(e));
	memset(&r->t, 0, sizeof(r->t));
	e.struct_size = sizeof(e);
	tu.cpu_threads = threads;
	tu.debug = debug;
	e.tuning = &tu;
	e.timing = &r->t;
	c0 = cpu_now_ms();
	t0 = gc_h_now_ms();
	st = pairs_call(api, &e, algo, x, t, n, d, m, eps, min_pts, r->a, r->b, r->rho, r->delta);
	r->ms = gc_h_now_ms() - t0;
	r->cpu_ms = cpu_now_ms() - c0;
	r->ok = st == GC_OK;
	if (!r->ok)
		gc_h_error_text(api, r->err, sizeof(r->err));
}

static void
run_alloc(run *r, int n)
{
	memset(r, 0, sizeof(*r));
	r->a = calloc((size_t) n, sizeof(int32_t));
	r->b = calloc((size_t) n, 1);
	r->rho = calloc((size_t) n, sizeof(double));
	r->delta = calloc((size_t) n, sizeof(double));
	if (!r->a || !r->b || !r->rho || !r->delta)
	{
		fprintf(stderr, "pairs_cpu_bench: out of memory\n");
		exit(2);
	}
}

/* Writes (save) or compares (!save) the answer with PREFIX.ALGO.ans; 1 when equal or written. */
static int
answer_file(const char *prefix, const char *algo, const run *r, int n, int save)
{
	char		path[1024];
	size_t		sz = (sizeof(int32_t) + 1 + 2 * sizeof(double)) * (size_t) n;
	char	   *buf = malloc(sz),
			   *p = buf;
	FILE	   *f;
	int			ok = 1;

	snprintf(path, sizeof(path), "%s.%s.ans", prefix, algo);
	memcpy(p, r->a, sizeof(int32_t) * (size_t) n);
	p += sizeof(int32_t) * (size_t) n;
	memcpy(p, r->b, (size_t) n);
	p += n;
	memcpy(p, r->rho, sizeof(double) * (size_t) n);
	p += sizeof(double) * (size_t) n;
	memcpy(p, r->delta, sizeof(double) * (size_t) n);
	if (save)
	{
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, sz, f) != sz)
		{
			fprintf(stderr, "cannot write %s\n", path);
			exit(1);
		}
		fclose(f);
	}
	else
	{
		char	   *ref = malloc(sz);

		f = fopen(path, "rb");
		if (!f || fread(ref, 1, sz, f) != sz)
		{
			fprintf(stderr, "cannot read %s\n", path);
			exit(1);
		}
		fclose(f);
		ok = memcmp(ref, buf, sz) == 0;
		free(ref);
	}
	free(buf);
	return ok;
}

int
main(int argc, char **argv)
{
	pairs_opts o;
	int			n,
				d,
				k,
				min_pts,
				reps,
				threads,
				cosine,
				f64,
				debug = 0;
	double		eps,
				noise = 0.10;
	const char *algo,
			   *dump,
			   *save = NULL,
			   *check = NULL;
	int			all_ok = 1;

	if (argc < 3)
	{
		fprintf(stderr, "usage: pairs_cpu_bench N D [--cosine] [--f64] [--threads T] [--reps R] [--k K] "
				"[--min-pts M] [--eps E] [--algo dbscan|dpeaks|both] [--dump FILE] [--save PREFIX] "
				"[--check PREFIX] [--debug] [--noise F]\n");
		return 2;
	}
	pairs_opts_init(&o, argv);
	for (int i = 3; i < argc; i++)
	{
		if (pairs_common_arg(&o, argc, argv, &i))
			continue;
		else if (!strcmp(argv[i], "--debug"))
			debug = 1;
		else if (!strcmp(argv[i], "--noise") && i + 1 < argc)
			noise = atof(argv[++i]);
		else if (!strcmp(argv[i], "--save") && i + 1 < argc)
			save = argv[++i];
		else if (!strcmp(argv[i], "--check") && i + 1 < argc)
			check = argv[++i];
		else
		{
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	n = o.n;
	d = o.d;
	k = o.k;
	min_pts = o.min_pts;
	reps = o.reps;
	threads = o.threads;
	cosine = o.cosine;
	f64 = o.f64;
	eps = o.eps;
	algo = o.algo;
	dump = o.dump;

	float	   *xf = malloc(sizeof(float) * (size_t) n * d);
	double	   *xd = NULL;
	gc_td_blob_spec spec = gc_td_blobs_default();

	spec.noise = noise;
	gc_td_blobs(xf, n, d, &spec, gc_td_seed("pairs", n, d), NULL);
	if (cosine)
	{
		for (size_t q = 0; q < (size_t) n * d; q++)
			xf[q] -= (float) (spec.box / 2);
		gc_unit_rows(xf, GC_F32, n, d);
	}
	if (f64)
	{
		xd = malloc(sizeof(double) * (size_t) n * d);
		for (size_t q = 0; q < (size_t) n * d; q++)
			xd[q] = xf[q];
	}
	if (eps <= 0)
		eps = choose_eps(xf, n, d, k, cosine);
	if (dump)
	{
		FILE	   *f = fopen(dump, "wb");

		if (!f || fwrite(xf, sizeof(float), (size_t) n * d, f) != (size_t) n * d)
		{
			fprintf(stderr, "cannot write %s\n", dump);
			return 1;
		}
		fclose(f);
	}

	const void *x = f64 ? (const void *) xd : (const void *) xf;
	gc_dtype	t = f64 ? GC_F64 : GC_F32;
	gc_metric	m = cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;

	printf("# CPU back end, threads=%d; n=%d d=%d %s %s eps=%.17g min_pts=%d\n", threads, n, d,
		   cosine ? "cosine" : "euclidean", f64 ? "double" : "float", eps, min_pts);
	printf("%-7s %9s %9s %9s %9s %9s %9s %6s %12s %9s %s\n", "algo", "wall_ms", "cpu_ms", "ph0", "ph1", "ph2", "ph3",
		   "screen", "exact_pairs", "clusters", "check");
	for (int a = 0; a < 2; a++)
	{
		const char *name = a == 0 ? "dbscan" : "dpeaks";
		run			best,
					c;
		int			same = 1;
		int			clusters = 0;

		if (strcmp(algo, "both") && strcmp(algo, name))
			continue;
		run_alloc(&c, n);
		memset(&best, 0, sizeof(best));
		best.ms = 1e300;
		/* a warm-up (OpenBLAS's threads and the pages), then R timed calls */
		for (int r = -1; r < reps; r++)
		{
			run_algo(name, x, t, n, d, m, eps, min_pts, threads, debug && r < 0, &c);
			if (!c.ok)
			{
				printf("%s: CPU failed: %s\n", name, c.err);
				return 1;
			}
			if (r < 0 && save)
				answer_file(save, name, &c, n, 1);
			if (check && !answer_file(check, name, &c, n, 0))
				same = 0;
			if (r >= 0 && c.ms < best.ms)
			{
				best.ms = c.ms;
				best.cpu_ms = c.cpu_ms;
				best.t = c.t;
			}
		}
		for (int q = 0; q < n; q++)
			clusters = c.a[q] + 1 > clusters ? c.a[q] + 1 : clusters;
		printf("%-7s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6s %12lld %9d %s\n", name, best.ms, best.cpu_ms,
			   best.t.phase_ms[0],
			   best.t.phase_ms[1], best.t.phase_ms[2], best.t.phase_ms[3],
			   best.t.path == GC_PATH_PAIRS ? gc_pair_precision_names[best.t.pair_screen % 3] : "-",
			   (long long) best.t.pair_exact, clusters, check ? (same ? "same" : "DIFFERENT") : "-");
		if (!same)
			all_ok = 0;
		free(c.a);
		free(c.b);
		free(c.rho);
		free(c.delta);
	}
	free(xf);
	free(xd);
	return all_ok ? 0 : 1;
}
