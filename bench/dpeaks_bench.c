/*
 * dpeaks_bench.c
 *    Density peaks outside PostgreSQL: the CPU core (src/core) against the
 *    GPU back end (gpuclust_cuda.so, opened with dlopen), on generated 2-D
 *    and higher-dimensional Gaussian blobs (D31-like: 31 clusters).
 *
 *    dpeaks_bench check          CPU against GPU: rho, delta, centres and
 *                                labels on sizes up to 1M; exits non-zero on
 *                                any difference
 *    dpeaks_bench bench [cpu]    per-phase timings of the GPU (and, with
 *                                cpu, of the CPU where it fits in the time
 *                                limit) at 46k, 1M and 10M points; the 10M
 *                                gaussian case with DPEAKS_BENCH_10M_GAUSSIAN=1
 *    dpeaks_bench cpu [limit_s]  the CPU path alone (no GPU needed)
 *
 * Every result is one JSON line on stdout.  bench/dpeaks_bench.sh builds
 * and runs it from the project root, after `make`.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "dpeaks_common.h"

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------- data */
static uint64_t rng;

static double
urand(void)
{
	rng = gc_dp_mix64(rng);
	return (double) (rng >> 11) / 9007199254740992.0;
}

static double
nrand(void)
{
	double		u = urand(),
				v = urand();

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* n points in d dimensions around k centres in [0, 30]^d, sd 0.6, 1% uniform noise. */
static float *
make_blobs(int64_t n, int d, int k, uint64_t seed)
{
	float	   *x = malloc(sizeof(float) * n * d);
	double	   *c = malloc(sizeof(double) * k * d);

	rng = seed;
	for (int i = 0; i < k * d; i++)
		c[i] = urand() * 30.0;
	for (int64_t i = 0; i < n; i++)
	{
		int			b = (int) (urand() * k);
		int			noise = urand() < 0.01;

		for (int j = 0; j < d; j++)
			x[i * d + j] = (float) (noise ? urand() * 30.0 : c[b * d + j] + 0.6 * nrand());
	}
	free(c);
	return x;
}

/* ---------------------------------------------------------------- runs */
typedef struct Out
{
	int32_t    *cluster;
	double	   *rho;
	double	   *delta;
	uint8_t    *is_center;
	gc_dpeaks_result r;
	gc_timing	t;
	gc_status	st;
	double		ms;
	char		err[GC_ERRBUF_SIZE];
} Out;

static void
out_init(Out *o, int64_t n)
{
	memset(o, 0, sizeof(*o));
	o->cluster = malloc(sizeof(int32_t) * n);
	o->rho = malloc(sizeof(double) * n);
	o->delta = malloc(sizeof(double) * n);
	o->is_center = malloc(n);
	o->r.cluster = o->cluster;
	o->r.rho = o->rho;
	o->r.delta = o->delta;
	o->r.is_center = o->is_center;
}

static void
out_free(Out *o)
{
	free(o->cluster);
	free(o->rho);
	free(o->delta);
	free(o->is_center);
}

static double cpu_deadline;

/* Stops a CPU run that passes its time limit. */
static int
over_time(void *arg)
{
	return now_ms() > cpu_deadline;
}

static const gc_cuda_api *api;

static void
run_gpu(const float *x, int64_t n, int d, const gc_dpeaks_params *p, Out *o)
{
	double		t0 = now_ms();

	o->st = api->density_peaks(0, x, n, d, p, &o->r, &o->t, NULL, NULL);
	o->ms = now_ms() - t0;
	if (o->st != GC_OK)
		snprintf(o->err, sizeof(o->err), "%s", api->last_error());
}

static void
run_cpu(const float *x, int64_t n, int d, const gc_dpeaks_params *p, Out *o, double limit_s)
{
	double		t0 = now_ms();

	cpu_deadline = t0 + limit_s * 1000.0;
	o->st = gc_dpeaks_cpu(x, n, d, p, &o->r, &o->t, over_time, NULL, o->err);
	o->ms = now_ms() - t0;
}

static gc_dpeaks_params
params(int nc, double dc, double rate, gc_dp_kernel kernel)
{
	gc_dpeaks_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.n_clusters = nc;
	p.dc = dc;
	p.neighbor_rate = rate;
	p.kernel = kernel;
	p.seed = GC_DP_DEFAULT_SEED;
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

static void
print_timing(const char *who, const Out *o)
{
	printf("\"%s\":{\"status\":%d,\"ms\":%.3f,\"dc_ms\":%.3f,\"rho_ms\":%.3f,\"delta_ms\":%.3f,"
		   "\"assign_ms\":%.3f,\"to_device_ms\":%.3f,\"from_device_ms\":%.3f}",
		   who, (int) o->st, o->ms, o->t.phase_ms[0], o->t.phase_ms[1], o->t.phase_ms[2],
		   o->t.phase_ms[3], o->t.to_device_ms, o->t.from_device_ms);
}

/* CPU against GPU on one input; returns the number of differences. */
static int64_t
check_one(int64_t n, int d, gc_dp_kernel kernel, double dc, double rate, int nc, double cpu_limit_s)
{
	float	   *x = make_blobs(n, d, 31, 1000 + n + d);
	gc_dpeaks_params p = params(nc, dc, rate, kernel);
	Out			c,
				g;
	int64_t		bad_rho = 0,
				bad_delta = 0,
				bad_label = 0,
				bad_center = 0;
	double		max_rel_rho = 0.0,
				max_rel_delta = 0.0;
	double		tol = kernel == GC_DP_KERNEL_GAUSSIAN ? 1e-6 : 1e-9;

	out_init(&c, n);
	out_init(&g, n);
	run_gpu(x, n, d, &p, &g);
	run_cpu(x, n, d, &p, &c, cpu_limit_s);
	if (c.st == GC_OK && g.st == GC_OK)
	{
		for (int64_t i = 0; i < n; i++)
		{
			double		er = fabs(c.rho[i] - g.rho[i]) / fmax(fabs(c.rho[i]), 1e-300);
			double		ed = fabs(c.delta[i] - g.delta[i]) / fmax(fabs(c.delta[i]), 1e-300);

			if (c.rho[i] != g.rho[i])
				max_rel_rho = fmax(max_rel_rho, er);
			if (c.delta[i] != g.delta[i])
				max_rel_delta = fmax(max_rel_delta, ed);
			bad_rho += er > tol;
			bad_delta += ed > tol;
			bad_label += c.cluster[i] != g.cluster[i];
			bad_center += c.is_center[i] != g.is_center[i];
		}
	}
	printf("{\"mode\":\"check\",\"n\":%lld,\"d\":%d,\"kernel\":\"%s\",\"n_clusters\":%d,"
		   "\"dc_cpu\":%.17g,\"dc_gpu\":%.17g,\"dc_method\":\"%s\",\"centers_cpu\":%lld,\"centers_gpu\":%lld,"
		   "\"rho_bad\":%lld,\"delta_bad\":%lld,\"label_bad\":%lld,\"center_bad\":%lld,"
		   "\"max_rel_rho\":%.3g,\"max_rel_delta\":%.3g,",
		   (long long) n, d, kname(kernel), nc, c.r.dc, g.r.dc, mname(g.r.dc_method),
		   (long long) c.r.n_centers, (long long) g.r.n_centers,
		   (long long) bad_rho, (long long) bad_delta, (long long) bad_label, (long long) bad_center,
		   max_rel_rho, max_rel_delta);
	print_timing("cpu", &c);
	printf(",");
	print_timing("gpu", &g);
	if (g.st != GC_OK)
		printf(",\"gpu_error\":\"%s\"", g.err);
	if (c.st != GC_OK)
		printf(",\"cpu_error\":\"%s\"", c.err);
	printf("}\n");
	fflush(stdout);
	{
		int64_t		bad = bad_rho + bad_delta + bad_label + bad_center +
			(c.st != GC_OK) + (g.st != GC_OK) + (c.r.dc != g.r.dc) + (c.r.n_centers != g.r.n_centers);

		out_free(&c);
		out_free(&g);
		free(x);
		return bad;
	}
}

static void
bench_one(int64_t n, gc_dp_kernel kernel, int with_cpu, double cpu_limit_s)
{
	float	   *x = make_blobs(n, 2, 31, 7 + n);
	gc_dpeaks_params p = params(31, 0.0, 0.02, kernel);
	Out			g,
				g2,
				c;

	out_init(&g, n);
	out_init(&g2, n);
	out_init(&c, n);
	run_gpu(x, n, 2, &p, &g);	/* first call: context and module load */
	run_gpu(x, n, 2, &p, &g2);
	printf("{\"mode\":\"bench\",\"n\":%lld,\"d\":2,\"kernel\":\"%s\",\"dc\":%.9g,\"dc_method\":\"%s\","
		   "\"centers\":%lld,", (long long) n, kname(kernel), g2.r.dc, mname(g2.r.dc_method),
		   (long long) g2.r.n_centers);
	print_timing("gpu_first", &g);
	printf(",");
	print_timing("gpu", &g2);
	if (with_cpu)
	{
		run_cpu(x, n, 2, &p, &c, cpu_limit_s);
		printf(",");
		print_timing("cpu", &c);
		if (c.st == GC_OK)
		{
			int64_t		same = 0;

			for (int64_t i = 0; i < n; i++)
				same += c.cluster[i] == g2.cluster[i] && c.rho[i] == g2.rho[i] && c.delta[i] == g2.delta[i];
			printf(",\"cpu_gpu_identical_rows\":%lld", (long long) same);
		}
	}
	if (g2.st != GC_OK)
		printf(",\"gpu_error\":\"%s\"", g2.err);
	printf("}\n");
	fflush(stdout);
	out_free(&g);
	out_free(&g2);
	out_free(&c);
	free(x);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "check";
	const char *lib = getenv("GPUCLUST_CUDA_SO") ? getenv("GPUCLUST_CUDA_SO") : "./gpuclust_cuda.so";
	void	   *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	gc_cuda_api_fn fn;
	gc_device_info info;
	int32_t		count = 0;

	if (strcmp(mode, "cpu") == 0)
	{
		/* the CPU path alone, for machines without a GPU */
		int64_t		sizes[] = {46000, 46000, 1000000};
		gc_dp_kernel kernels[] = {GC_DP_KERNEL_GAUSSIAN, GC_DP_KERNEL_CUTOFF, GC_DP_KERNEL_CUTOFF};

		for (int r = 0; r < 3; r++)
		{
			float	   *x = make_blobs(sizes[r], 2, 31, 7 + sizes[r]);
			gc_dpeaks_params p = params(31, 0.0, 0.02, kernels[r]);
			Out			c;

			out_init(&c, sizes[r]);
			run_cpu(x, sizes[r], 2, &p, &c, argc > 2 ? atof(argv[2]) : 120.0);
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
	if (!h || !(fn = (gc_cuda_api_fn) dlsym(h, GC_CUDA_API_SYMBOL)) || !(api = fn()) ||
		api->device_count(&count) != GC_OK || count < 1)
	{
		fprintf(stderr, "no GPU back end: %s\n", h ? (api ? api->last_error() : "no api") : dlerror());
		return 2;
	}
	api->device_info(0, &info);
	printf("{\"device\":\"%s\",\"memory\":%lld}\n", info.name, (long long) info.total_memory);

	if (strcmp(mode, "check") == 0)
	{
		int64_t		bad = 0;

		/* exact dc, both kernels, the grid (d <= 3) and the scans (d > 3) */
		bad += check_one(3000, 2, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.02, 31, 60);
		bad += check_one(3000, 2, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 31, 60);
		bad += check_one(2500, 1, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 31, 60);
		bad += check_one(4000, 3, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.02, 31, 60);
		bad += check_one(3000, 1, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.02, 31, 60);
		bad += check_one(20000, 2, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.005, 31, 60);
		bad += check_one(3000, 5, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 31, 60);
		bad += check_one(3000, 5, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.02, 31, 60);
		/* too many dimensions for shared-memory tiles: global memory */
		bad += check_one(1500, 64, GC_DP_KERNEL_GAUSSIAN, 0.0, 0.02, 31, 60);
		bad += check_one(1500, 40, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 31, 60);
		bad += check_one(46000, 2, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 31, 120);
		bad += check_one(46000, 2, GC_DP_KERNEL_GAUSSIAN, 1.0, 0.02, 31, 120);
		/* sampled dc, thresholds */
		bad += check_one(200000, 2, GC_DP_KERNEL_CUTOFF, 0.0, 0.02, 0, 120);
		bad += check_one(200000, 3, GC_DP_KERNEL_CUTOFF, 0.0, 0.01, 31, 120);
		bad += check_one(1000000, 2, GC_DP_KERNEL_CUTOFF, 0.0, 0.002, 31, 150);
		printf("{\"mode\":\"check\",\"differences\":%lld}\n", (long long) bad);
		return bad ? 1 : 0;
	}
	if (strcmp(mode, "bench") == 0)
	{
		int			with_cpu = argc > 2 && strcmp(argv[2], "cpu") == 0;

		bench_one(46000, GC_DP_KERNEL_GAUSSIAN, with_cpu, 60);
		bench_one(46000, GC_DP_KERNEL_CUTOFF, with_cpu, 60);
		bench_one(1000000, GC_DP_KERNEL_CUTOFF, with_cpu, 60);
		bench_one(1000000, GC_DP_KERNEL_GAUSSIAN, 0, 0);
		bench_one(10000000, GC_DP_KERNEL_CUTOFF, 0, 0);
		/* quadratic: tens of seconds on an H100, so only when asked */
		if (getenv("DPEAKS_BENCH_10M_GAUSSIAN"))
			bench_one(10000000, GC_DP_KERNEL_GAUSSIAN, 0, 0);
		return 0;
	}
	fprintf(stderr, "usage: dpeaks_bench check | bench [cpu]\n");
	return 2;
}
