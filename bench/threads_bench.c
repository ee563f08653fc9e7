/*
 * threads_bench.c
 *    The CPU back end on 1, 2, 4, ... threads, without PostgreSQL: the time
 *    of each case per thread count (best of R calls after a warm-up), the
 *    speed-up over one thread, and whether every thread count gave the one
 *    thread's answer bit for bit.
 *
 *   .bench/threads_bench [--threads 1,2,4,8,16] [--reps R] [--scale F]
 *                        [--cases dbscan,sparse,dpeaks,kmeans2,kmeans128]
 *                        [--json FILE] [--dump DIR] [--phases] [--double] [--cold]
 *
 *   dbscan     DBSCAN of 10M 2-D blobs (gc_testdata.h "blobs"), eps 0.05, min_pts 5
 *   sparse     DBSCAN of 2M 2-D rows, about two per eps-cell and mostly noise:
 *              row g = 1 .. n at ((g % 1000) * 0.01 + u * 0.004,
 *              (g % 997) * 0.01 + u' * 0.004), u, u' uniform in [0, 1),
 *              eps 0.002, min_pts 5 (the SQL of issue 26)
 *   dpeaks     density peaks of 1M 2-D D31-like blobs, cutoff kernel,
 *              dc from neighbor_rate 0.02 (sampled), 31 clusters
 *   kmeans2    k-means of 1M x 2 blobs, k = 20
 *   kmeans128  k-means of 100k x 128 overlapping blobs, k = 256
 *              (both: the initial centroids are k rows at a fixed stride,
 *              10 iterations at most, tol 0)
 *   --scale    multiplies every n (0.1 for a quick run)
 *   --json     also writes the figures as JSON
 *   --double   the DBSCAN cases in double precision (the float rows widened), as a
 *              float8[] column reaches the back end through SQL
 *   --cold     every large allocation of a call is fresh memory (glibc's mmap
 *              threshold fixed at 128 kB), so that each call faults its pages
 *              in as the first call of a new PostgreSQL backend does; without
 *              it the calls after the warm-up reuse the first one's memory
 *   --phases   prints the back end's phase times of every call to stderr
 *              (density peaks: dc, rho, delta, assignment; k-means: init,
 *              iterations, final pass, per iteration)
 *   --dump     writes, for kmeans2 and kmeans128, DIR/NAME.x.f32 (the rows),
 *              NAME.init.f64 (the initial centroids), NAME.labels.i32 and
 *              NAME.inertia.f64 (the answer), and DIR/kmeans.json, for
 *              bench/threads_sklearn.py
 *
 * Built by bench/Makefile (make -C bench threads_bench) with the flags of
 * common/flags.mk; links only the CPU back end (src/core), so it runs on a
 * machine without PostgreSQL and without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gc_backends.h"
#include "gc_testdata.h"

#define MAX_COUNTS 16

typedef enum
{
	CASE_DBSCAN,
	CASE_SPARSE,
	CASE_DPEAKS,
	CASE_KMEANS
} case_kind;

typedef struct bench_case
{
	const char *name;
	case_kind	kind;
	int64_t		n;
	int32_t		d;
	int32_t		k;				/* k-means */
	const char *what;
} bench_case;

/* One call's answer, compared bit for bit between thread counts. */
typedef struct answer
{
	void	   *buf[5];
	size_t		size[5];
	int64_t		scalar;
} answer;

static void
answer_alloc(answer *a, const bench_case *c)
{
	size_t		n = (size_t) c->n;

	memset(a, 0, sizeof(*a));
	switch (c->kind)
	{
		case CASE_DBSCAN:
		case CASE_SPARSE:
			a->size[0] = sizeof(int32_t) * n;
			a->size[1] = n;
			break;
		case CASE_DPEAKS:
			a->size[0] = sizeof(int32_t) * n;
			a->size[1] = sizeof(double) * n;
			a->size[2] = sizeof(double) * n;
			a->size[3] = n;
			break;
		case CASE_KMEANS:
			a->size[0] = sizeof(int32_t) * n;
			a->size[1] = sizeof(double) * n;
			a->size[2] = sizeof(double) * (size_t) c->k * c->d;
			a->size[3] = sizeof(int64_t) * (size_t) c->k;
			a->size[4] = sizeof(double) * (size_t) c->k;
			break;
	}
	for (int i = 0; i < 5; i++)
		if (a->size[i] && !(a->buf[i] = calloc(1, a->size[i])))
		{
			fprintf(stderr, "threads_bench: out of memory\n");
			exit(2);
		}
}

static void
answer_free(answer *a)
{
	for (int i = 0; i < 5; i++)
		free(a->buf[i]);
}

static int
answer_same(const answer *a, const answer *b)
{
	if (a->scalar != b->scalar)
		return 0;
	for (int i = 0; i < 5; i++)
		if (a->size[i] && memcmp(a->buf[i], b->buf[i], a->size[i]) != 0)
			return 0;
	return 1;
}

static int	show_phases = 0;
/* --double: the DBSCAN cases' rows in double precision (as float8[] columns come through SQL). */
static int	use_double = 0;
static double *dbscan_x64 = NULL;
/* The back end's compute time of the last call (gc_timing.compute_ms). */
static double last_compute_ms = 0.0;
/* CPU time of the last call: the process's (every thread) and the caller's thread alone. */
static double last_work_ms = 0.0;
static double last_caller_ms = 0.0;

static double
cpu_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One call on threads threads; returns the milliseconds, or -1 on failure. */
static double
run_once(const bench_case *c, const float *x, const double *init, int threads, answer *a)
{
	const gc_backend_api *api = gc_cpu_api();
	gc_tuning	tuning = gc_tuning_defaults();
	gc_timing	timing;
	gc_exec		e;
	gc_status	st = GC_OK;
	double		t0,
				w0,
				c0;

	memset(&e, 0, sizeof(e));
	tuning.cpu_threads = threads;
	e.struct_size = sizeof(e);
	e.tuning = &tuning;
	e.timing = &timing;
	t0 = gc_h_now_ms();
	w0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
	c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
	switch (c->kind)
	{
		case CASE_DBSCAN:
		case CASE_SPARSE:
			{
				gc_dbscan_params p = {sizeof(p), c->kind == CASE_SPARSE ? 0.002 : 0.05, 5};
				gc_dbscan_result r = {a->buf[0], a->buf[1], 0};

				if (dbscan_x64)
					st = api->dbscan(&e, dbscan_x64, GC_F64, c->n, c->d, &p, &r);
				else
					st = api->dbscan(&e, x, GC_F32, c->n, c->d, &p, &r);
				a->scalar = r.n_clusters;
			}
			break;
		case CASE_DPEAKS:
			{
				gc_dpeaks_params p;
				gc_dpeaks_result r;

				memset(&p, 0, sizeof(p));
				memset(&r, 0, sizeof(r));
				p.struct_size = sizeof(p);
				p.n_clusters = 31;
				p.derive_dc = 1;
				p.neighbor_rate = 0.02;
				p.kernel = GC_DP_KERNEL_CUTOFF;
				p.seed = 0;
				r.cluster = a->buf[0];
				r.rho = a->buf[1];
				r.delta = a->buf[2];
				r.is_center = a->buf[3];
				st = api->density_peaks(&e, x, GC_F32, c->n, c->d, &p, &r);
				a->scalar = r.n_centers;
			}
			break;
		case CASE_KMEANS:
			{
				gc_kmeans_params p;
				gc_kmeans_result r = {a->buf[0], a->buf[1], a->buf[2], a->buf[3], a->buf[4], 0};

				memset(&p, 0, sizeof(p));
				p.struct_size = sizeof(p);
				p.k = c->k;
				p.max_iter = 10;
				p.tol = 0.0;
				p.init = GC_KMEANS_INIT_GIVEN;
				p.n_init = 1;
				p.initial_centroids = init;
				p.precision = GC_PRECISION_FP32;
				st = api->kmeans(&e, x, GC_F32, c->n, c->d, &p, &r);
				a->scalar = r.iterations;
			}
			break;
	}
	if (st != GC_OK)
	{
		fprintf(stderr, "threads_bench: %s on %d threads: %s\n", c->name, threads,
				api->last_error()->message);
		return -1;
	}
	if (timing.threads != threads)
		fprintf(stderr, "threads_bench: %s: %d threads asked for, %d ran\n", c->name, threads,
				timing.threads);
	last_compute_ms = timing.compute_ms;
	last_work_ms = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - w0;
	last_caller_ms = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
	if (show_phases)
		fprintf(stderr, "  %s, %d threads: compute %.1f ms, phases %.1f %.1f %.1f %.1f ms\n",
				c->name, threads, timing.compute_ms, timing.phase_ms[0], timing.phase_ms[1],
				timing.phase_ms[2], timing.phase_ms[3]);
	return gc_h_now_ms() - t0;
}

/* The median of v[0 .. n) (sorts v). */
static double
median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--)
		{
			double		t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int
write_file(const char *dir, const char *name, const void *p, size_t bytes)
{
	char		path[4096];
	FILE	   *f;
	int			ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")))
		return -1;
	ok = fwrite(p, 1, bytes, f) == bytes;
	return fclose(f) == 0 && ok ? 0 : -1;
}

int
main(int argc, char **argv)
{
	bench_case	cases[] = {
		{"dbscan", CASE_DBSCAN, 10000000, 2, 0, "DBSCAN 10M x 2 blobs, eps 0.05, min_pts 5"},
		{"sparse", CASE_SPARSE, 2000000, 2, 0, "DBSCAN 2M x 2 sparse (2 rows per cell), eps 0.002, min_pts 5"},
		{"dpeaks", CASE_DPEAKS, 1000000, 2, 0, "density peaks 1M x 2 D31-like, cutoff"},
		{"kmeans2", CASE_KMEANS, 1000000, 2, 20, "k-means 1M x 2, k = 20, 10 iterations"},
		{"kmeans128", CASE_KMEANS, 100000, 128, 256, "k-means 100k x 128, k = 256, 10 iterations"},
	};
	int			ncases = (int) (sizeof(cases) / sizeof(cases[0]));
	int			counts[MAX_COUNTS] = {1, 2, 4, 8, 16};
	int			ncounts = 5;
	int			reps = 3;
	double		scale = 1.0;
	const char *only = NULL;
	const char *json_path = NULL;
	const char *dump = NULL;
	FILE	   *json = NULL;
	int			all_same = 1;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
		{
			char	   *s = argv[++i];

			ncounts = 0;
			while (*s && ncounts < MAX_COUNTS)
			{
				counts[ncounts++] = (int) strtol(s, &s, 10);
				if (*s == ',')
					s++;
			}
		}
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (strcmp(argv[i], "--cases") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json_path = argv[++i];
		else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
			dump = argv[++i];
		else if (strcmp(argv[i], "--phases") == 0)
			show_phases = 1;
		else if (strcmp(argv[i], "--double") == 0)
			use_double = 1;
		else if (strcmp(argv[i], "--cold") == 0)
			mallopt(M_MMAP_THRESHOLD, 128 * 1024);	/* fixed: no reuse of large blocks */
		else
		{
			fprintf(stderr, "usage: %s [--threads 1,2,4,8,16] [--reps R] [--scale F] "
					"[--cases dbscan,sparse,dpeaks,kmeans2,kmeans128] [--json FILE] [--dump DIR] [--phases] [--double] [--cold]\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > 256 || ncounts < 1)
		return 2;
	if (json_path && !(json = fopen(json_path, "w")))
	{
		perror(json_path);
		return 2;
	}
	printf("CPU back end, %ld CPUs online; ms: best of %d calls after a warm-up; compute: the "
		   "median of their gc_timing.compute_ms; cpu: the median CPU time of the call, every "
		   "thread; busiest: the median CPU time of the busiest thread (the caller's, or the "
		   "others' mean share), so that bound = one thread's cpu / busiest is the speed-up the "
		   "work allows on idle cores, whatever else the machine runs; same: the answer equals "
		   "the first thread count's bit for bit\n\n", sysconf(_SC_NPROCESSORS_ONLN), reps);
	printf("| case | threads | ms | speed-up | compute ms (median) | compute speed-up | cpu ms | "
		   "busiest ms | bound | same |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
	if (json)
		fprintf(json, "{\"cpus\": %ld, \"reps\": %d, \"runs\": [", sysconf(_SC_NPROCESSORS_ONLN), reps);
	for (int ci = 0, first_json = 1; ci < ncases; ci++)
	{
		bench_case *c = &cases[ci];
		float	   *x;
		double	   *init = NULL;
		answer		ref,
					cur;
		double		one = 0.0;
		double		one_compute = 0.0;
		double		one_work = 0.0;

		if (only && !strstr(only, c->name))
			continue;
		c->n = (int64_t) (c->n * scale);
		if (c->n < 1000)
			c->n = 1000;
		x = gc_td_alloc(c->n, c->d);
		if (!x)
			return 2;
		if (c->kind == CASE_SPARSE)
		{
			gc_rng		rng;

			gc_rng_seed(&rng, gc_td_seed("sparse", c->n, c->d));
			for (int64_t g = 1; g <= c->n; g++)
			{
				x[(g - 1) * 2] = (float) ((double) (g % 1000) * 0.01 + gc_rng_uniform(&rng) * 0.004);
				x[(g - 1) * 2 + 1] = (float) ((double) (g % 997) * 0.01 + gc_rng_uniform(&rng) * 0.004);
			}
		}
		else if (c->kind == CASE_DPEAKS)
			gc_td_generate("d31", x, c->n, c->d, gc_td_seed("d31", c->n, c->d));
		else if (c->kind == CASE_DBSCAN || c->d == 2)
			gc_td_generate("blobs", x, c->n, c->d, gc_td_seed("blobs", c->n, c->d));
		else
		{
			/* 256 blobs in [0, 100]^128 of sd 10: they overlap */
			gc_td_blob_spec s = {c->k, 100.0, 5.0, 10.0, 0.05};

			if (gc_td_blobs(x, c->n, c->d, &s, gc_td_seed("wideblobs", c->n, c->d), NULL) != 0)
				return 2;
		}
		if (c->kind == CASE_KMEANS)
		{
			/* the initial centroids: k rows at a fixed stride */
			init = malloc(sizeof(double) * (size_t) c->k * c->d);
			for (int32_t j = 0; j < c->k; j++)
				for (int32_t t = 0; t < c->d; t++)
					init[(size_t) j * c->d + t] = x[((int64_t) j * (c->n / c->k) + 17) % c->n * c->d + t];
			if (dump)
			{
				char		name[256];

				snprintf(name, sizeof(name), "%s.x.f32", c->name);
				if (write_file(dump, name, x, sizeof(float) * (size_t) c->n * c->d) != 0)
					return 2;
				snprintf(name, sizeof(name), "%s.init.f64", c->name);
				if (write_file(dump, name, init, sizeof(double) * (size_t) c->k * c->d) != 0)
					return 2;
			}
		}
		if (use_double && (c->kind == CASE_DBSCAN || c->kind == CASE_SPARSE))
		{
			/* the same rows, each coordinate of the float data as a double */
			dbscan_x64 = malloc(sizeof(double) * (size_t) c->n * c->d);
			if (!dbscan_x64)
				return 2;
			for (int64_t i = 0; i < c->n * c->d; i++)
				dbscan_x64[i] = x[i];
		}
		answer_alloc(&ref, c);
		answer_alloc(&cur, c);
		for (int ti = 0; ti < ncounts; ti++)
		{
			double		best = 1e300;
			double		compute[256];
			double		work[256];
			double		caller[256];
			double		med,
						med_work,
						med_caller,
						busiest;
			int			same = 1;

			for (int r = 0; r <= reps; r++)
			{
				answer	   *a = ti == 0 && r == 0 ? &ref : &cur;
				double		ms = run_once(c, x, init, counts[ti], a);

				if (ms < 0)
					return 1;
				if (a != &ref)
					same &= answer_same(&ref, a);
				if (r > 0 && ms < best)
					best = ms;
				if (r > 0)
				{
					compute[r - 1] = last_compute_ms;
					work[r - 1] = last_work_ms;
					caller[r - 1] = last_caller_ms;
				}
			}
			med = median(compute, reps);
			med_work = median(work, reps);
			med_caller = median(caller, reps);
			/* the busiest thread's CPU time: the caller's, or the others' share when larger */
			busiest = med_caller;
			if (counts[ti] > 1 && (med_work - med_caller) / (counts[ti] - 1) > busiest)
				busiest = (med_work - med_caller) / (counts[ti] - 1);
			if (counts[ti] == 1)
			{
				one = best;
				one_compute = med;
				one_work = med_work;
			}
			all_same &= same;
			printf("| %s | %d | %.1f | %s%.2f | %.1f | %s%.2f | %.0f | %.0f | %s%.2f | %s |\n", c->what,
				   counts[ti], best, one > 0 ? "" : "~", one > 0 ? one / best : 0.0, med,
				   one_compute > 0 ? "" : "~", one_compute > 0 ? one_compute / med : 0.0,
				   med_work, busiest, one_work > 0 ? "" : "~", one_work > 0 ? one_work / busiest : 0.0,
				   same ? "yes" : "NO");
			fflush(stdout);
			if (json)
			{
				fprintf(json, "%s\n {\"case\": \"%s\", \"n\": %lld, \"d\": %d, \"k\": %d, \"threads\": %d, "
						"\"ms\": %.3f, \"same\": %s}", first_json ? "" : ",", c->name, (long long) c->n,
						c->d, c->k, counts[ti], best, same ? "true" : "false");
				first_json = 0;
			}
		}
		{
			/* a digest of the first thread count's answer, to compare builds */
			uint64_t	h = 1469598103934665603ULL;

			for (int i = 0; i < 5; i++)
				for (size_t b = 0; b < ref.size[i]; b++)
					h = (h ^ ((const unsigned char *) ref.buf[i])[b]) * 1099511628211ULL;
			h = (h ^ (uint64_t) ref.scalar) * 1099511628211ULL;
			fprintf(stderr, "threads_bench: %s answer digest %016llx\n", c->name, (unsigned long long) h);
		}
		if (dump && c->kind == CASE_KMEANS)
		{
			char		name[256];

			/* the labels and per-cluster inertia of the first thread count */
			snprintf(name, sizeof(name), "%s.labels.i32", c->name);
			if (write_file(dump, name, ref.buf[0], ref.size[0]) != 0)
				return 2;
			snprintf(name, sizeof(name), "%s.inertia.f64", c->name);
			if (write_file(dump, name, ref.buf[4], ref.size[4]) != 0)
				return 2;
		}
		answer_free(&ref);
		answer_free(&cur);
		free(dbscan_x64);
		dbscan_x64 = NULL;
		free(x);
		free(init);
	}
	if (dump)
	{
		char		meta[1024];
		int64_t		n2 = (int64_t) (1000000 * scale),
					n128 = (int64_t) (100000 * scale);

		snprintf(meta, sizeof(meta),
				 "{\"kmeans2\": {\"n\": %lld, \"d\": 2, \"k\": 20, \"max_iter\": 10},\n"
				 " \"kmeans128\": {\"n\": %lld, \"d\": 128, \"k\": 256, \"max_iter\": 10}}\n",
				 (long long) (n2 < 1000 ? 1000 : n2), (long long) (n128 < 1000 ? 1000 : n128));
		if (write_file(dump, "kmeans.json", meta, strlen(meta)) != 0)
			return 2;
	}
	if (json)
	{
		fprintf(json, "\n]}\n");
		fclose(json);
	}
	return all_same ? 0 : 1;
}
