/*
 * dpeaks_bench.c
 *    Timings of density peaks (Rodriguez and Laio, "Clustering by fast
 *    search and find of density peaks", Science 2014) outside PostgreSQL,
 *    per phase (dc, rho, delta, assignment), on D31-like 2-D blobs
 *    (test/data/gc_testdata.h: 31 Gaussian blobs in [0, 30]^2, 1 % noise):
 *    the GPU back end (gpuclust_cuda.so, opened with dlopen) and the CPU
 *    back end (gc_cpu_api()), both through their api tables.  The checks of
 *    the GPU against the CPU are in test/gpu (gpu_vs_cpu dpeaks).
 *
 *    dpeaks_bench bench [cpu]    GPU timings (a first call, then a second)
 *                                at 46k, 1M and 10M rows; with cpu, the CPU
 *                                too where it fits in its time limit, and
 *                                how many rows both answer alike; the 10M
 *                                gaussian case with DPEAKS_BENCH_10M_GAUSSIAN=1
 *    dpeaks_bench cpu [limit_s]  the CPU alone (no GPU needed), 46k and 1M
 *    dpeaks_bench skew [gpu]     the cutoff kernel on the same points with
 *                                and without one far row (shapes speck0
 *                                and speck of gc_testdata.h), 2-D: the CPU
 *                                at 100k rows (best of 3), with gpu also
 *                                the GPU at 1M rows (best of 3 after a
 *                                warm-up); a markdown table
 *    dpeaks_bench precision [n] [gaussian|cutoff] [cosine] [cpu]
 *                                the same D31-like rows in single and in
 *                                double precision (default 1M rows, the
 *                                gaussian kernel, Euclidean), best of 3
 *                                after a warm-up each, and the ratio
 *                                double / single; on the GPU, or the CPU
 *    dpeaks_bench metric [n] [gaussian|cutoff] [f64] [cpu]
 *                                the same rows with the Euclidean and the
 *                                cosine metric (the rows scaled to unit
 *                                length for cosine, as the glue does;
 *                                default 1M rows, gaussian, single
 *                                precision), and the ratio cosine /
 *                                Euclidean
 *
 * Double-precision rows are the D31-like floats each moved by less than a
 * float step (a function of the value), so that they are truly double.
 *
 * Every result is one JSON line on stdout.  The GPU back end is
 * $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so.  Built by bench/Makefile;
 * bench/dpeaks_bench.sh builds and runs it from the project root.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpeaks_common.h"
#include "gc_backends.h"
#include "gc_testdata.h"

static float *
d31(int64_t n)
{
	float	   *x = gc_td_alloc(n, 2);

	if (!x || gc_td_generate("d31", x, n, 2, gc_td_seed("d31", n, 2)) != 1)
	{
		fprintf(stderr, "dpeaks_bench: out of host memory\n");
		exit(2);
	}
	return x;
}

typedef struct out
{
	int32_t    *cluster;
	double	   *rho;
	double	   *delta;
	uint8_t    *is_center;
	gc_dpeaks_result r;
	gc_timing	t;
	gc_status	st;
	double		ms;
	char		err[1024];
} out;

static void
out_init(out *o, int64_t n)
{
	memset(o, 0, sizeof(*o));
	o->cluster = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	o->rho = (double *) malloc(sizeof(double) * (size_t) n);
	o->delta = (double *) malloc(sizeof(double) * (size_t) n);
	o->is_center = (uint8_t *) malloc((size_t) n);
	if (!o->cluster || !o->rho || !o->delta || !o->is_center)
	{
		fprintf(stderr, "dpeaks_bench: out of host memory\n");
		exit(2);
	}
}

static void
out_free(out *o)
{
	free(o->cluster);
	free(o->rho);
	free(o->delta);
	free(o->is_center);
}

/* Runs one call; a CPU run stops at limit_s seconds (0: no limit) through the cancel callback. */
static void
run_t(const gc_backend_api *api, const void *x, gc_dtype dtype, int64_t n, int32_t d,
	  const gc_dpeaks_params *p, out *o, double limit_s)
{
	gc_h_cancel deadline = {0, 0, 0, 0};
	gc_exec		e;
	double		t0 = gc_h_now_ms();

	deadline.deadline_ms = limit_s > 0 ? t0 + limit_s * 1000.0 : 0;
	e = gc_h_exec(NULL, limit_s > 0 ? &deadline : NULL, &o->t);
	memset(&o->r, 0, sizeof(o->r));
	o->r.cluster = o->cluster;
	o->r.rho = o->rho;
	o->r.delta = o->delta;
	o->r.is_center = o->is_center;
	o->st = api->density_peaks(&e, x, dtype, n, d, p, &o->r);
	o->ms = gc_h_now_ms() - t0;
	if (o->st != GC_OK)
		gc_h_error_text(api, o->err, sizeof(o->err));
	else
		o->err[0] = '\0';
}

static void
run(const gc_backend_api *api, const float *x, int64_t n, int32_t d, const gc_dpeaks_params *p, out *o,
	double limit_s)
{
	run_t(api, x, GC_F32, n, d, p, o, limit_s);
}

/* n_clusters centres, dc from neighbor_rate. */
static gc_dpeaks_params
params(int32_t nc, double rate, gc_dp_kernel kernel)
{
	gc_dpeaks_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.n_clusters = nc;
	p.dc = 0.0;
	p.derive_dc = 1;
	p.neighbor_rate = rate;
	p.kernel = kernel;
	p.seed = GC_DP_DEFAULT_SEED;	/* the seed of the dc sample when the caller gives none */
	return p;
}

static const char *
kname(gc_dp_kernel k)
{
	return k == GC_DP_KERNEL_GAUSSIAN ? "gaussian" : "cutoff";
}

static const char *
mname(gc_dc_method m)
{
	return m == GC_DC_GIVEN ? "given" : m == GC_DC_EXACT ? "exact" : "sample";
}

/* An error text inside a JSON string: quotes and backslashes dropped. */
static const char *
json_safe(char *s)
{
	for (char *c = s; *c; c++)
		if (*c == '"' || *c == '\\' || (unsigned char) *c < 32)
			*c = ' ';
	return s;
}

static void
print_timing(const char *who, out *o)
{
	printf("\"%s\":{\"status\":%d,\"ms\":%.3f,\"dc_ms\":%.3f,\"rho_ms\":%.3f,\"delta_ms\":%.3f,"
		   "\"assign_ms\":%.3f,\"to_device_ms\":%.3f,\"from_device_ms\":%.3f",
		   who, (int) o->st, o->ms, o->t.phase_ms[0], o->t.phase_ms[1], o->t.phase_ms[2],
		   o->t.phase_ms[3], o->t.to_device_ms, o->t.from_device_ms);
	if (o->st != GC_OK)
		printf(",\"error\":\"%s\"", json_safe(o->err));
	printf("}");
}

static void
bench_one(const gc_backend_api *gpu, int64_t n, gc_dp_kernel kernel, int with_cpu, double cpu_limit_s)
{
	float	   *x = d31(n);
	gc_dpeaks_params p = params(31, 0.02, kernel);
	out			g,
				g2,
				c;

	out_init(&g, n);
	out_init(&g2, n);
	run(gpu, x, n, 2, &p, &g, 0);	/* first call: context and module load */
	run(gpu, x, n, 2, &p, &g2, 0);
	printf("{\"mode\":\"bench\",\"n\":%lld,\"d\":2,\"kernel\":\"%s\",\"dc\":%.9g,\"dc_method\":\"%s\","
		   "\"centers\":%lld,", (long long) n, kname(kernel), g2.r.dc, mname(g2.r.dc_method),
		   (long long) g2.r.n_centers);
	print_timing("gpu_first", &g);
	printf(",");
	print_timing("gpu", &g2);
	if (with_cpu)
	{
		out_init(&c, n);
		run(gc_cpu_api(), x, n, 2, &p, &c, cpu_limit_s);
		printf(",");
		print_timing("cpu", &c);
		if (c.st == GC_OK && g2.st == GC_OK)
		{
			int64_t		same = 0;

			for (int64_t i = 0; i < n; i++)
				same += c.cluster[i] == g2.cluster[i] && c.rho[i] == g2.rho[i] && c.delta[i] == g2.delta[i];
			printf(",\"cpu_gpu_identical_rows\":%lld", (long long) same);
		}
		out_free(&c);
	}
	printf("}\n");
	fflush(stdout);
	out_free(&g);
	out_free(&g2);
	free(x);
}

/* Best of three calls' milliseconds; 1 when all agreed with the first. */
static double
best_of_3(const gc_backend_api *api, const float *x, int64_t n, gc_dpeaks_params *p, out *o, int *same)
{
	double		best = 1e300;
	out			first;

	out_init(&first, n);
	*same = 1;
	for (int r = 0; r < 3; r++)
	{
		run(api, x, n, 2, p, r == 0 ? &first : o, 0);
		if (r > 0)
			*same &= o->st == GC_OK &&
				memcmp(o->cluster, first.cluster, sizeof(int32_t) * (size_t) n) == 0 &&
				memcmp(o->rho, first.rho, sizeof(double) * (size_t) n) == 0;
		if ((r == 0 ? first.ms : o->ms) < best)
			best = r == 0 ? first.ms : o->ms;
	}
	out_free(&first);
	return best;
}

/* ---------------------------------------------------------------- precision and metric */

/* n D31-like 2-D rows of element type t, unit rows for cosine; the caller frees. */
static void *
rows_of(int64_t n, gc_dtype t, gc_metric m)
{
	float	   *f = d31(n);
	void	   *x = f;

	if (t == GC_F64)
	{
		double	   *y = (double *) malloc(sizeof(double) * (size_t) n * 2);

		if (!y)
		{
			fprintf(stderr, "dpeaks_bench: out of host memory\n");
			exit(2);
		}
		for (int64_t i = 0; i < n * 2; i++)
			y[i] = gc_td_refine(f[i]);
		free(f);
		x = y;
	}
	if (m == GC_METRIC_COSINE && gc_unit_rows(x, t, n, 2) >= 0)
	{
		fprintf(stderr, "dpeaks_bench: a zero row\n");
		exit(2);
	}
	return x;
}

/*
 * One variant of a comparison: a warm-up call, then the best of three, as
 * a JSON line; returns the best milliseconds (0 when a call failed).
 */
static double
variant(const char *mode, const gc_backend_api *api, int64_t n, gc_dp_kernel kernel, gc_dtype t,
		gc_metric m)
{
	void	   *x = rows_of(n, t, m);
	gc_dpeaks_params p = params(31, 0.02, kernel);
	out			o,
				best;
	double		best_ms = 0.0;

	p.metric = m;
	out_init(&o, n);
	out_init(&best, n);
	run_t(api, x, t, n, 2, &p, &o, 0);	/* warm-up (a GPU's first call loads its context) */
	for (int r = 0; r < 3 && o.st == GC_OK; r++)
	{
		run_t(api, x, t, n, 2, &p, &o, 0);
		if (o.st == GC_OK && (best_ms == 0.0 || o.ms < best_ms))
		{
			out		tmp = best;

			best = o;
			o = tmp;
			best_ms = best.ms;
		}
	}
	if (best_ms == 0.0)
	{
		/* the failed call, for its status and error */
		out		tmp = best;

		best = o;
		o = tmp;
	}
	printf("{\"mode\":\"%s\",\"back_end\":\"%s\",\"n\":%lld,\"d\":2,\"kernel\":\"%s\",\"rows\":\"%s\","
		   "\"metric\":\"%s\",\"dc\":%.9g,\"dc_method\":\"%s\",\"centers\":%lld,\"best_of\":3,",
		   mode, api->name, (long long) n, kname(kernel), t == GC_F64 ? "double" : "single",
		   m == GC_METRIC_COSINE ? "cosine" : "euclidean", best.r.dc, mname(best.r.dc_method),
		   (long long) best.r.n_centers);
	print_timing("best", &best);
	printf("}\n");
	fflush(stdout);
	out_free(&o);
	out_free(&best);
	free(x);
	return best_ms;
}

/*
 * dpeaks_bench precision|metric [n] [gaussian|cutoff] [cosine|f64] [cpu]:
 * the two variants and their ratio.
 */
static int
compare(const char *mode, int argc, char **argv)
{
	int64_t		n = 1000000;
	gc_dp_kernel kernel = GC_DP_KERNEL_GAUSSIAN;
	int			cosine = 0,
				f64 = 0,
				cpu = 0;
	const gc_backend_api *api;
	double		a,
				b;

	for (int i = 2; i < argc; i++)
	{
		if (strcmp(argv[i], "gaussian") == 0)
			kernel = GC_DP_KERNEL_GAUSSIAN;
		else if (strcmp(argv[i], "cutoff") == 0)
			kernel = GC_DP_KERNEL_CUTOFF;
		else if (strcmp(argv[i], "cosine") == 0 && strcmp(mode, "precision") == 0)
			cosine = 1;
		else if (strcmp(argv[i], "f64") == 0 && strcmp(mode, "metric") == 0)
			f64 = 1;
		else if (strcmp(argv[i], "cpu") == 0)
			cpu = 1;
		else if (atoll(argv[i]) >= 2)
			n = atoll(argv[i]);
		else
		{
			fprintf(stderr, "dpeaks_bench %s: unknown argument %s\n", mode, argv[i]);
			return 2;
		}
	}
	if (cpu)
		api = gc_cpu_api();
	else
	{
		gc_device_info info;
		char		why[1024];

		api = gc_h_open_gpu(gc_h_cuda_path(NULL), &info, why, sizeof(why));
		if (!api)
		{
			fprintf(stderr, "dpeaks_bench: %s\n", why);
			return 2;
		}
		printf("{\"device\":\"%s\",\"memory\":%lld}\n", info.name, (long long) info.total_memory);
	}
	if (strcmp(mode, "precision") == 0)
	{
		gc_metric	m = cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;

		a = variant(mode, api, n, kernel, GC_F32, m);
		b = variant(mode, api, n, kernel, GC_F64, m);
		printf("{\"mode\":\"precision\",\"n\":%lld,\"kernel\":\"%s\",\"metric\":\"%s\","
			   "\"single_ms\":%.3f,\"double_ms\":%.3f,\"double_over_single\":%.3f}\n",
			   (long long) n, kname(kernel), cosine ? "cosine" : "euclidean", a, b, a > 0 ? b / a : 0.0);
	}
	else
	{
		gc_dtype	t = f64 ? GC_F64 : GC_F32;

		a = variant(mode, api, n, kernel, t, GC_METRIC_EUCLIDEAN);
		b = variant(mode, api, n, kernel, t, GC_METRIC_COSINE);
		printf("{\"mode\":\"metric\",\"n\":%lld,\"kernel\":\"%s\",\"rows\":\"%s\","
			   "\"euclidean_ms\":%.3f,\"cosine_ms\":%.3f,\"cosine_over_euclidean\":%.3f}\n",
			   (long long) n, kname(kernel), f64 ? "double" : "single", a, b, a > 0 ? b / a : 0.0);
	}
	return a > 0 && b > 0 ? 0 : 1;
}

/* The skew table: cutoff density peaks with and without one far row. */
static int
skew(const gc_backend_api *gpu)
{
	struct
	{
		const gc_backend_api *api;
		const char *who;
		int64_t		n;
	}			runs[2] = {{gc_cpu_api(), "CPU", 100000}, {gpu, "GPU", 1000000}};

	printf("| back end | n | without the far row | with one row at 1e6 | ratio | repeatable |\n"
		   "|---|---:|---:|---:|---:|---|\n");
	for (int b = 0; b < (gpu ? 2 : 1); b++)
	{
		double		ms[2];
		int			same = 1;

		for (int s = 0; s < 2; s++)
		{
			int64_t		n = runs[b].n;
			float	   *x = gc_td_alloc(n, 2);
			gc_dpeaks_params p = params(5, 0.02, GC_DP_KERNEL_CUTOFF);
			out			o;
			int			ok;

			if (!x || gc_td_generate(s ? "speck" : "speck0", x, n, 2, 0) != 1)
			{
				fprintf(stderr, "dpeaks_bench: out of host memory\n");
				return 2;
			}
			out_init(&o, n);
			ms[s] = best_of_3(runs[b].api, x, n, &p, &o, &ok);
			same &= ok;
			out_free(&o);
			free(x);
		}
		printf("| %s | %lld | %.1f ms | %.1f ms | %.2f | %s |\n", runs[b].who, (long long) runs[b].n,
			   ms[0], ms[1], ms[1] / ms[0], same ? "yes" : "NO");
		fflush(stdout);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const gc_backend_api *gpu;
	gc_device_info info;
	char		why[1024];

	if (strcmp(mode, "cpu") == 0)
	{
		/* the CPU alone, for machines without a GPU */
		int64_t		sizes[] = {46000, 46000, 1000000};
		gc_dp_kernel kernels[] = {GC_DP_KERNEL_GAUSSIAN, GC_DP_KERNEL_CUTOFF, GC_DP_KERNEL_CUTOFF};
		double		limit_s = argc > 2 ? atof(argv[2]) : 120.0;

		for (int r = 0; r < 3; r++)
		{
			float	   *x = d31(sizes[r]);
			gc_dpeaks_params p = params(31, 0.02, kernels[r]);
			out			c;

			out_init(&c, sizes[r]);
			run(gc_cpu_api(), x, sizes[r], 2, &p, &c, limit_s);
			printf("{\"mode\":\"cpu\",\"n\":%lld,\"d\":2,\"kernel\":\"%s\",\"dc\":%.9g,\"dc_method\":\"%s\",",
				   (long long) sizes[r], kname(kernels[r]), c.r.dc, mname(c.r.dc_method));
			print_timing("cpu", &c);
			printf("}\n");
			fflush(stdout);
			out_free(&c);
			free(x);
		}
		return 0;
	}
	if (strcmp(mode, "skew") == 0 && !(argc > 2 && strcmp(argv[2], "gpu") == 0))
		return skew(NULL);
	if (strcmp(mode, "precision") == 0 || strcmp(mode, "metric") == 0)
		return compare(mode, argc, argv);
	if (strcmp(mode, "bench") != 0 && strcmp(mode, "skew") != 0)
	{
		fprintf(stderr, "usage: dpeaks_bench bench [cpu] | cpu [limit_s] | skew [gpu]\n"
				"       | precision [n] [gaussian|cutoff] [cosine] [cpu]\n"
				"       | metric [n] [gaussian|cutoff] [f64] [cpu]\n"
				"(the GPU-against-CPU check moved to test/gpu: gpu_vs_cpu dpeaks)\n");
		return 2;
	}
	gpu = gc_h_open_gpu(gc_h_cuda_path(NULL), &info, why, sizeof(why));
	if (!gpu)
	{
		fprintf(stderr, "dpeaks_bench: %s\n", why);
		return 2;
	}
	if (strcmp(mode, "skew") == 0)
	{
		printf("device: %s\n\n", info.name);
		return skew(gpu);
	}
	printf("{\"device\":\"%s\",\"memory\":%lld}\n", info.name, (long long) info.total_memory);
	{
		int			with_cpu = argc > 2 && strcmp(argv[2], "cpu") == 0;

		bench_one(gpu, 46000, GC_DP_KERNEL_GAUSSIAN, with_cpu, 60);
		bench_one(gpu, 46000, GC_DP_KERNEL_CUTOFF, with_cpu, 60);
		bench_one(gpu, 1000000, GC_DP_KERNEL_CUTOFF, with_cpu, 60);
		bench_one(gpu, 1000000, GC_DP_KERNEL_GAUSSIAN, 0, 0);
		bench_one(gpu, 10000000, GC_DP_KERNEL_CUTOFF, 0, 0);
		/* quadratic: tens of seconds on an H100, so only when asked */
		if (getenv("DPEAKS_BENCH_10M_GAUSSIAN"))
			bench_one(gpu, 10000000, GC_DP_KERNEL_GAUSSIAN, 0, 0);
	}
	return 0;
}
