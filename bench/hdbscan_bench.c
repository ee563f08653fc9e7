/*
 * hdbscan_bench.c
 *    Timings of HDBSCAN without PostgreSQL: one generated data set
 *    (test/data/gc_testdata.h) through the GPU back end (gpuclust_cuda.so,
 *    opened with dlopen as the extension opens it), best of R runs after a
 *    warm-up, and through the CPU back end on all the CPUs the process may
 *    run on (tuning.cpu_threads 0), best of R as well; per phase, and
 *    whether both answers are identical (labels, probabilities, outlier
 *    scores and core distances, bit for bit).  The checks of the GPU
 *    against the CPU are in test/gpu (gpu_vs_cpu hdbscan).
 *
 *   .bench/hdbscan_bench SHAPE N D MIN_CLUSTER_SIZE MIN_SAMPLES [--reps R]
 *                        [--cpu-reps R] [--no-cpu] [--no-gpu] [--f64] [--threads T]
 *                        [--gpu-threads T] [--debug] [--cpu-debug] [--cosine] [--pair-path P]
 *                        [--lib PATH] [--json FILE] [--header]
 *
 *   SHAPE      a shape of gc_testdata.h (blobs, gantao, uniform, ...)
 *   --reps     GPU runs after the warm-up (default 5); the best is printed
 *   --cpu-reps CPU runs (default 1)
 *   --no-cpu / --no-gpu   skip a back end
 *   --f64      double precision rows (the generated values as doubles)
 *   --threads  CPU threads (default 0: all the CPUs the process may run on)
 *   --gpu-threads  host threads of the GPU back end's host part (default 0: all)
 *   --debug    tuning.debug: the GPU back end prints its searches and rounds to stderr
 *   --cpu-debug  tuning.debug for the CPU back end: its tree, searches and rounds to stderr
 *   --cosine   the cosine metric (the rows scaled to unit length first, as the extension does)
 *   --pair-path  tuning.pair_path (gpuclust.pair_path): pairs, index or auto (default auto:
 *              the pair engine from 16 features on)
 *   --lib      the GPU back end (default $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so)
 *   --json     also append the figures to FILE as one JSON object on one line
 *   --header   print the table's header first
 *
 * Prints one row of a Markdown table: the set, then per back end the wall
 * time of the call, its phases (phase_ms: [0] core distances, [1] minimum
 * spanning tree, [2] hierarchy, condensed tree and selection; on the GPU
 * also to_device and from_device), the Boruvka rounds and distance
 * evaluations, the clusters and noise, and whether the answers agree.
 * Run from the project root by bench/hdbscan_bench.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_backends.h"
#include "gc_testdata.h"
#include "metric.h"

typedef struct answer
{
	int32_t    *cluster;
	double	   *probability;
	double	   *outlier;
	double	   *core;
	int64_t		n_clusters;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
	int			ran;
} answer;

static void *
xmalloc(size_t bytes)
{
	void	   *p = malloc(bytes > 0 ? bytes : 1);

	if (!p)
	{
		fprintf(stderr, "hdbscan_bench: out of host memory\n");
		exit(2);
	}
	return p;
}

static void
answer_alloc(answer *a, int64_t n)
{
	memset(a, 0, sizeof(*a));
	a->cluster = (int32_t *) xmalloc(sizeof(int32_t) * (size_t) n);
	a->probability = (double *) xmalloc(sizeof(double) * (size_t) n);
	a->outlier = (double *) xmalloc(sizeof(double) * (size_t) n);
	a->core = (double *) xmalloc(sizeof(double) * (size_t) n);
}

static void
answer_free(answer *a)
{
	free(a->cluster);
	free(a->probability);
	free(a->outlier);
	free(a->core);
}

static void
run(const gc_backend_api *api, answer *a, const void *x, gc_dtype t, int64_t n, int32_t d,
	const gc_hdbscan_params *p, const gc_tuning *tuning)
{
	gc_hdbscan_result r;
	gc_exec		e = gc_h_exec(tuning, NULL, &a->timing);
	double		t0;

	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.probability = a->probability;
	r.outlier_score = a->outlier;
	r.core_distance = a->core;
	a->ran = 1;
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
	if (a->status != GC_OK)
		gc_h_error_text(api, a->error, sizeof(a->error));
}

/* Runs reps times and keeps the fastest successful answer in best (stops at the first error). */
static void
best_of(const gc_backend_api *api, answer *best, answer *tmp, const void *x, gc_dtype t, int64_t n,
		int32_t d, const gc_hdbscan_params *p, const gc_tuning *tuning, int reps)
{
	for (int r = 0; r < reps; r++)
	{
		answer	   *into = r == 0 ? best : tmp;

		run(api, into, x, t, n, d, p, tuning);
		if (into->status != GC_OK)
		{
			if (into != best)
			{
				answer		s = *best;

				*best = *into;
				*into = s;
			}
			return;
		}
		if (into != best && into->wall_ms < best->wall_ms)
		{
			answer		s = *best;

			*best = *into;
			*into = s;
		}
	}
}

static const char *
agreement(const answer *g, const answer *c, int64_t n)
{
	if (!g->ran || !c->ran)
		return "-";
	if (g->status != GC_OK || c->status != GC_OK)
		return "error";
	if (g->n_clusters != c->n_clusters)
		return "DIFFERENT";
	for (int64_t i = 0; i < n; i++)
		if (g->cluster[i] != c->cluster[i] ||
			memcmp(g->probability + i, c->probability + i, sizeof(double)) != 0 ||
			memcmp(g->outlier + i, c->outlier + i, sizeof(double)) != 0 ||
			memcmp(g->core + i, c->core + i, sizeof(double)) != 0)
			return "DIFFERENT";
	return "identical";
}

static int64_t
noise_of(const answer *a, int64_t n)
{
	int64_t		k = 0;

	if (!a->ran || a->status != GC_OK)
		return -1;
	for (int64_t i = 0; i < n; i++)
		k += a->cluster[i] < 0;
	return k;
}

static void
json_side(FILE *f, const char *name, const answer *a)
{
	fprintf(f, "\"%s\": {\"ran\": %s, \"status\": \"%s\", \"error\": \"", name, a->ran ? "true" : "false",
		   gc_h_status_name(a->status));
	for (const char *s = a->error; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char) *s >= 32)
			fputc(*s, f);
	fprintf(f, "\", \"wall_ms\": %.3f, \"to_device_ms\": %.3f, \"compute_ms\": %.3f, "
		   "\"from_device_ms\": %.3f, \"core_ms\": %.3f, \"mst_ms\": %.3f, \"host_ms\": %.3f, "
		   "\"rounds\": %lld, \"distances\": %lld, \"threads\": %d, \"clusters\": %lld}",
		   a->wall_ms, a->timing.to_device_ms, a->timing.compute_ms, a->timing.from_device_ms,
		   a->timing.phase_ms[0], a->timing.phase_ms[1], a->timing.phase_ms[2],
		   (long long) a->timing.counts[0], (long long) a->timing.counts[1], a->timing.threads,
		   (long long) a->n_clusters);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: hdbscan_bench SHAPE N D MIN_CLUSTER_SIZE MIN_SAMPLES [--reps R] [--cpu-reps R]\n"
			"                     [--no-cpu] [--no-gpu] [--f64] [--threads T] [--gpu-threads T]\n"
			"                     [--debug] [--cpu-debug] [--cosine] [--pair-path pairs|index|auto]\n"
			"                     [--lib PATH]\n"
			"                     [--json FILE] [--header]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *shape,
			   *lib = NULL,
			   *json = NULL;
	int64_t		n;
	int32_t		d;
	int			mcs,
				ms,
				reps = 5,
				cpu_reps = 1,
				no_cpu = 0,
				no_gpu = 0,
				f64 = 0,
				header = 0,
				cosine = 0;
	gc_tuning	gtun = gc_tuning_defaults(),
				ctun = gc_tuning_defaults();
	gc_hdbscan_params p;
	float	   *xf;
	void	   *x;
	const gc_backend_api *gpu = NULL;
	answer		g,
				gt,
				c,
				ct;
	char		why[1024] = "";

	if (argc < 6)
		usage();
	shape = argv[1];
	n = atoll(argv[2]);
	d = atoi(argv[3]);
	mcs = atoi(argv[4]);
	ms = atoi(argv[5]);
	for (int i = 6; i < argc; i++)
	{
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--cpu-reps") == 0 && i + 1 < argc)
			cpu_reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--no-cpu") == 0)
			no_cpu = 1;
		else if (strcmp(argv[i], "--no-gpu") == 0)
			no_gpu = 1;
		else if (strcmp(argv[i], "--f64") == 0)
			f64 = 1;
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			ctun.cpu_threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--gpu-threads") == 0 && i + 1 < argc)
			gtun.cpu_threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--debug") == 0)
			gtun.debug = 1;
		else if (strcmp(argv[i], "--cpu-debug") == 0)
			ctun.debug = 1;
		else if (strcmp(argv[i], "--cosine") == 0)
			cosine = 1;
		else if (strcmp(argv[i], "--pair-path") == 0 && i + 1 < argc)
		{
			i++;
			gtun.pair_path = ctun.pair_path = strcmp(argv[i], "pairs") == 0 ? 1
				: strcmp(argv[i], "index") == 0 ? -1 : 0;
		}
		else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(argv[i], "--header") == 0)
			header = 1;
		else
			usage();
	}
	if (n < 1 || d < 1 || reps < 1 || cpu_reps < 1)
		usage();

	xf = (float *) xmalloc(sizeof(float) * (size_t) n * (size_t) d);
	if (gc_td_generate(shape, xf, n, d, gc_td_seed(shape, n, d)) != 1)
	{
		fprintf(stderr, "hdbscan_bench: unknown shape %s (%s)\n", shape, GC_TD_SHAPES);
		return 2;
	}
	x = xf;
	if (f64)
	{
		double	   *xd = (double *) xmalloc(sizeof(double) * (size_t) n * (size_t) d);

		for (size_t i = 0; i < (size_t) n * (size_t) d; i++)
			xd[i] = (double) xf[i];
		free(xf);
		x = xd;
	}

	if (cosine && gc_unit_rows(x, f64 ? GC_F64 : GC_F32, n, d) >= 0)
	{
		fprintf(stderr, "hdbscan_bench: a zero row has no direction for the cosine metric\n");
		return 2;
	}
	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.min_cluster_size = mcs;
	p.min_samples = ms;
	p.method = GC_HDBSCAN_EOM;
	p.metric = cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;

	answer_alloc(&g, n);
	answer_alloc(&gt, n);
	answer_alloc(&c, n);
	answer_alloc(&ct, n);
	g.ran = c.ran = 0;

	if (!no_gpu)
	{
		gc_device_info info;

		gpu = gc_h_open_gpu(gc_h_cuda_path(lib), &info, why, sizeof(why));
		if (!gpu)
		{
			g.ran = 1;
			g.status = GC_ERR_NO_DEVICE;
			snprintf(g.error, sizeof(g.error), "%s", why);
		}
		else
		{
			run(gpu, &gt, x, f64 ? GC_F64 : GC_F32, n, d, &p, &gtun);	/* warm-up */
			best_of(gpu, &g, &gt, x, f64 ? GC_F64 : GC_F32, n, d, &p, &gtun, reps);
		}
	}
	if (!no_cpu)
		best_of(gc_cpu_api(), &c, &ct, x, f64 ? GC_F64 : GC_F32, n, d, &p, &ctun, cpu_reps);

	if (json)
	{
		FILE	   *f = fopen(json, "a");

		if (!f)
		{
			fprintf(stderr, "hdbscan_bench: cannot open %s\n", json);
			return 2;
		}
		fprintf(f, "{\"shape\": \"%s\", \"n\": %lld, \"d\": %d, \"dtype\": \"%s\", \"min_cluster_size\": %d, "
				"\"min_samples\": %d, \"gpu_reps\": %d, \"cpu_reps\": %d, ",
				shape, (long long) n, d, f64 ? "f64" : "f32", mcs, ms, reps, cpu_reps);
		json_side(f, "gpu", &g);
		fprintf(f, ", ");
		json_side(f, "cpu", &c);
		fprintf(f, ", \"noise\": %lld, \"agree\": \"%s\"}\n", (long long) noise_of(g.ran ? &g : &c, n),
				agreement(&g, &c, n));
		fclose(f);
	}
	{
		if (header)
			printf("| set | n | d | mcs | ms | gpu wall ms | gpu to_dev / core / MST / host / from_dev ms | "
				   "rounds | distances | cpu wall ms (threads) | cpu core / MST / host ms | "
				   "clusters | noise | answers |\n"
				   "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
		printf("| %s%s%s%s | %lld | %d | %d | %d | ", shape, f64 ? " f64" : "", cosine ? " cosine" : "",
			   ctun.pair_path > 0 ? " pairs" : ctun.pair_path < 0 ? " index" : "", (long long) n, d, mcs, ms);
		if (g.ran && g.status == GC_OK)
			printf("%.1f | %.1f / %.1f / %.1f / %.1f / %.1f | %lld | %lld | ", g.wall_ms,
				   g.timing.to_device_ms, g.timing.phase_ms[0], g.timing.phase_ms[1],
				   g.timing.phase_ms[2], g.timing.from_device_ms, (long long) g.timing.counts[0],
				   (long long) g.timing.counts[1]);
		else
			printf("%s | | | | ", g.ran ? gc_h_status_name(g.status) : "-");
		if (c.ran && c.status == GC_OK)
			printf("%.1f (%d) | %.1f / %.1f / %.1f | ", c.wall_ms, c.timing.threads,
				   c.timing.phase_ms[0], c.timing.phase_ms[1], c.timing.phase_ms[2]);
		else
			printf("%s | | ", c.ran ? gc_h_status_name(c.status) : "-");
		printf("%lld | %lld | %s |\n", (long long) (g.ran && g.status == GC_OK ? g.n_clusters : c.n_clusters),
			   (long long) noise_of(g.ran && g.status == GC_OK ? &g : &c, n), agreement(&g, &c, n));
		if (g.ran && g.status != GC_OK)
			fprintf(stderr, "hdbscan_bench: gpu: %s\n", g.error);
		if (c.ran && c.status != GC_OK)
			fprintf(stderr, "hdbscan_bench: cpu: %s\n", c.error);
	}
	answer_free(&g);
	answer_free(&gt);
	answer_free(&c);
	answer_free(&ct);
	free(x);
	return (g.ran && g.status != GC_OK) || (c.ran && c.status != GC_OK) ? 1 : 0;
}
