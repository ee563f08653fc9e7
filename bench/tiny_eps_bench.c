/*
 * tiny_eps_bench.c
 *    DBSCAN (and density peaks' cutoff) at a tiny eps against an ordinary
 *    one: the grid of common/dbscan_grid.h must not turn a tiny eps into a
 *    cliff (one cell holding every point, or the grid rebuilt once per
 *    doubling of its side).  For each case, one call per eps through the
 *    back end's table, wall time and the number of clusters and core points,
 *    and the ratio of each time to the case's ordinary eps (the first).
 *
 *   .bench/tiny_eps_bench [--gpu] [--lib PATH] [--scale S] [--reps R] [--only CASE] [--phases]
 *                         [--threads N]
 *
 *   --gpu    the GPU back end (gpuclust_cuda.so, opened as the extension
 *            opens it); without it the CPU back end
 *   --scale  the cases' row counts times S (default 1: 200k, 100k, 1M)
 *   --reps   best of R calls per eps (default 1)
 *   --phases also the back end's phases of the best call (gc_timing)
 *   --threads the CPU back end's threads (gc_tuning.cpu_threads; default:
 *            the CPUs this process may run on)
 *
 * Cases (the report of the cliff): "2d" 200k uniform 2-D doubles in the unit
 * square; "tight" 100k 2-D doubles within 1e-6 of (1, 1); "4d" 1M uniform
 * 4-D doubles (coarse grid over 3 chosen dimensions); "dpeaks" 100k 2-D
 * doubles, density peaks with the cutoff kernel and a given dc.
 * Built by bench/Makefile (make -C bench tiny_eps_bench).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "gc_backends.h"
#include "phases.h"

typedef struct bench_case
{
	const char *name;
	int64_t		n;
	int32_t		d;
	int			dpeaks;
	double		eps[8];			/* 0 ends; eps[0] is the ordinary one */
} bench_case;

static const bench_case cases[] = {
	{"2d", 200000, 2, 0, {5e-3, 1e-7, 1e-100, 1e-295, 1e-300, 2.2e-308, 4.9e-324, 0}},
	{"tight", 100000, 2, 0, {1e-8, 1e-100, 1e-300, 2.2e-308, 4.9e-324, 0}},
	{"4d", 1000000, 4, 0, {5e-2, 1e-10, 1e-100, 1e-300, 4.9e-324, 0}},
	{"dpeaks", 100000, 2, 1, {1e-2, 1e-100, 1e-300, 4.9e-324, 0}},
};

/* Uniform in [0, 1) from a small LCG, so the data do not depend on libc. */
static double
unif(uint64_t *s)
{
	*s = *s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return (double) (*s >> 11) * (1.0 / 9007199254740992.0);
}

static double *
make_rows(const bench_case *c, int64_t n)
{
	double	   *x = malloc(sizeof(double) * (size_t) n * c->d);
	uint64_t	s = 42;

	for (int64_t i = 0; i < n * c->d; i++)
		x[i] = strcmp(c->name, "tight") == 0 ? 1.0 + 1e-6 * unif(&s) : unif(&s);
	return x;
}

int
main(int argc, char **argv)
{
	const gc_backend_api *api = gc_cpu_api();
	const char *lib = NULL;
	const char *only = NULL;
	double		scale = 1.0;
	int			reps = 1;
	int			gpu = 0;
	int			phases = 0;
	gc_tuning	tuning = gc_tuning_defaults();

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--gpu") == 0)
			gpu = 1;
		else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--phases") == 0)
			phases = 1;
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			tuning.cpu_threads = atoi(argv[++i]);
		else
		{
			fprintf(stderr, "usage: %s [--gpu] [--lib PATH] [--scale S] [--reps R] [--only CASE] [--phases] [--threads N]\n", argv[0]);
			return 2;
		}
	}
	if (gpu)
	{
		char		why[1024];
		gc_device_info info;

		api = gc_h_open_gpu(gc_h_cuda_path(lib), &info, why, sizeof(why));
		if (!api)
		{
			fprintf(stderr, "%s\n", why);
			return 1;
		}
	}
	printf("back end: %s", gpu ? "GPU" : "CPU");
	if (!gpu)
		printf(", %d threads", tuning.cpu_threads > 0 ? tuning.cpu_threads : gc_pool_default_threads());
	printf("\n\n");
	printf("| case | rows | d | eps | ms | x ordinary | clusters | core |%s\n",
		   phases ? " phases ms (best run) |" : "");
	printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s\n", phases ? " --- |" : "");
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
	{
		const bench_case *c = &cases[ci];
		int64_t		n = (int64_t) (c->n * scale);
		double	   *x;
		int32_t    *cluster;
		uint8_t    *flag;
		double	   *rho,
				   *delta;
		double		base = 0;

		if (only && strcmp(only, c->name) != 0)
			continue;
		x = make_rows(c, n);
		cluster = malloc(sizeof(int32_t) * n);
		flag = malloc(n);
		rho = malloc(sizeof(double) * n);
		delta = malloc(sizeof(double) * n);
		for (int e = 0; c->eps[e] > 0; e++)
		{
			double		best = INFINITY;
			int64_t		clusters = 0,
						core = 0;
			gc_status	st = GC_OK;
			gc_timing	tm,
						best_tm;

			memset(&best_tm, 0, sizeof(best_tm));
			for (int r = 0; r < reps; r++)
			{
				gc_exec		ex;
				double		t0;

				memset(&ex, 0, sizeof(ex));
				memset(&tm, 0, sizeof(tm));
				ex.struct_size = sizeof(ex);
				ex.timing = &tm;
				ex.tuning = &tuning;
				t0 = gc_h_now_ms();
				if (c->dpeaks)
				{
					gc_dpeaks_params p;
					gc_dpeaks_result res;

					memset(&p, 0, sizeof(p));
					memset(&res, 0, sizeof(res));
					p.struct_size = sizeof(p);
					p.n_clusters = 3;
					p.dc = c->eps[e];
					p.neighbor_rate = 0.02;
					p.kernel = GC_DP_KERNEL_CUTOFF;
					res.cluster = cluster;
					res.rho = rho;
					res.delta = delta;
					res.is_center = flag;
					st = api->density_peaks(&ex, x, GC_F64, n, c->d, &p, &res);
					clusters = res.n_centers;
					core = 0;
				}
				else
				{
					gc_dbscan_params p;
					gc_dbscan_result res;

					memset(&p, 0, sizeof(p));
					p.struct_size = sizeof(p);
					p.eps = c->eps[e];
					p.min_pts = 5;
					res.cluster = cluster;
					res.is_core = flag;
					res.n_clusters = 0;
					st = api->dbscan(&ex, x, GC_F64, n, c->d, &p, &res);
					clusters = res.n_clusters;
					core = 0;
					for (int64_t i = 0; i < n; i++)
						core += flag[i];
				}
				if (st != GC_OK)
					break;
				if (gc_h_now_ms() - t0 < best)
				{
					best = gc_h_now_ms() - t0;
					best_tm = tm;
				}
			}
			if (st != GC_OK)
			{
				char		buf[1024];

				printf("| %s | %lld | %d | %.3g | error: %s | | | |\n", c->name, (long long) n, c->d,
					   c->eps[e], gc_h_error_text(api, buf, sizeof(buf)));
				continue;
			}
			if (e == 0)
				base = best;
			printf("| %s | %lld | %d | %.3g | %.1f | %.2f | %lld | %lld |", c->name, (long long) n, c->d,
				   c->eps[e], best, best / base, (long long) clusters, (long long) core);
			if (phases)
			{
				const char *const *names = c->dpeaks ? gc_dpeaks_phase_names : gc_dbscan_phase_names;

				for (int k = 0; k < GC_PHASES && names[k] != NULL; k++)
					printf(" %s %.1f", names[k], best_tm.phase_ms[k]);
				printf(" (to device %.1f, from device %.1f) |", best_tm.to_device_ms,
					   best_tm.from_device_ms);
			}
			printf("\n");
			fflush(stdout);
		}
		free(x);
		free(cluster);
		free(flag);
		free(rho);
		free(delta);
	}
	return 0;
}
