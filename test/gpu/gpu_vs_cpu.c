/*
 * gpu_vs_cpu.c
 *    The GPU DBSCAN against the CPU core, on the GPU machine.
 *
 * Loads the GPU back end (gpuclust_cuda.so) the way the extension does,
 * with dlopen() and gpuclust_cuda_api(), and links the CPU core
 * (the C files of src/core).  Two modes:
 *
 *   gpu_vs_cpu [--lib PATH] [--quick]
 *       generated data sets (1-D to 64-D; blobs with noise, uniform, many
 *       duplicates, large eps, a huge coordinate range; 10k to 10M points):
 *       cluster numbers, core flags and cluster counts of the GPU must equal
 *       the CPU's exactly.  Then the error paths: a cancel callback that
 *       answers yes after a few calls (GC_ERR_CANCELLED), a non-finite
 *       coordinate (an error after the upload), an input too large for the
 *       device (GC_ERR_OUT_OF_MEMORY with the bytes needed, before any
 *       work), each followed by a check that the free device memory is what
 *       it was.  Prints a table and "N passed, N failed"; exits non-zero
 *       on a failure.  Without a usable GPU it says so and runs the CPU side
 *       only (to check the data sets), which counts as a failure.
 *
 *   gpu_vs_cpu --bench NAME N D EPS MIN_PTS [--reps R] [--no-cpu] [--dump DIR]
 *       timings of one generated set: GPU per phase (best of R runs after a
 *       warm-up), the CPU core once, and whether they agree; --dump writes
 *       DIR/NAME.f32 (the points) and DIR/NAME.labels.i32 /
 *       DIR/NAME.core.u8 (the GPU answer) for a comparison with
 *       scikit-learn (bench/dbscan_gpu_bench.sh).
 *
 * Data sets are generated from a fixed seed, so every run sees the same
 * points.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core.h"
#include "gpuclust_cuda.h"

static const gc_cuda_api *api;
static int	passed = 0;
static int	failed = 0;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ data */

static uint64_t rng;

static uint64_t
next_u64(void)
{
	uint64_t	z = (rng += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static double
uniform01(void)
{
	return (next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

static double
normal01(void)
{
	double		u = uniform01(), v = uniform01();

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/*
 * Fills x [n, d] with the named generator:
 *   blobs     20 Gaussian blobs (sd 1) in [0, 100]^d, 5% uniform noise
 *   uniform   uniform in [0, 100]^d
 *   dups      n copies drawn from 1000 distinct uniform points, and a jitter-free
 *             line of exact repeats
 *   gantao    a seed spreader in [0, 1e5]^d in the style of Gan and Tao
 *             (random walk emitting points in a ball of radius 100 around it,
 *             restarting at random places), 0.01% uniform noise
 *   outliers  blobs plus a few points at +-1e20 (a coordinate range that
 *             forces the grid to widen its cells)
 */
static int
generate(const char *name, float *x, int64_t n, int32_t d)
{
	rng = 12345 + (uint64_t) n * 31 + (uint64_t) d;
	if (strcmp(name, "blobs") == 0 || strcmp(name, "outliers") == 0)
	{
		enum {K = 20};
		double		centre[K][64];

		for (int c = 0; c < K; c++)
			for (int k = 0; k < d && k < 64; k++)
				centre[c][k] = 5.0 + 90.0 * uniform01();
		for (int64_t i = 0; i < n; i++)
		{
			float	   *p = x + i * d;

			if (uniform01() < 0.05)
				for (int k = 0; k < d; k++)
					p[k] = (float) (100.0 * uniform01());
			else
			{
				int			c = (int) (next_u64() % K);

				for (int k = 0; k < d; k++)
					p[k] = (float) (centre[c][k % 64] + normal01());
			}
		}
		if (strcmp(name, "outliers") == 0)
			for (int64_t i = 0; i < n && i < 8; i++)
				for (int k = 0; k < d; k++)
					x[(i * 7919) % n * d + k] = (i & 1) ? 1e20f : -1e20f;
		return 1;
	}
	if (strcmp(name, "uniform") == 0)
	{
		for (int64_t i = 0; i < n * d; i++)
			x[i] = (float) (100.0 * uniform01());
		return 1;
	}
	if (strcmp(name, "dups") == 0)
	{
		enum {M = 1000};
		float	   *base = malloc(sizeof(float) * M * d);

		for (int64_t i = 0; i < (int64_t) M * d; i++)
			base[i] = (float) (100.0 * uniform01());
		for (int64_t i = 0; i < n; i++)
			memcpy(x + i * d, base + (next_u64() % M) * d, sizeof(float) * d);
		free(base);
		return 1;
	}
	if (strcmp(name, "gantao") == 0)
	{
		const double box = 1e5, radius = 100.0, shift = 50.0 * d;
		const int64_t per_step = 100;
		const double restart = 10.0 / ((double) n / per_step);
		double		s[64];

		for (int k = 0; k < d; k++)
			s[k] = box * uniform01();
		for (int64_t i = 0; i < n;)
		{
			double		dir[64], norm = 0.0;

			for (int64_t t = 0; t < per_step && i < n; t++, i++)
			{
				float	   *p = x + i * d;

				if (uniform01() < 1e-4)
				{
					for (int k = 0; k < d; k++)
						p[k] = (float) (box * uniform01());
					continue;
				}
				/* uniform in the ball: rejection from the cube */
				for (;;)
				{
					double		r2 = 0.0, o[64];

					for (int k = 0; k < d; k++)
					{
						o[k] = 2.0 * uniform01() - 1.0;
						r2 += o[k] * o[k];
					}
					if (r2 <= 1.0)
					{
						for (int k = 0; k < d; k++)
							p[k] = (float) (s[k] + radius * o[k]);
						break;
					}
				}
			}
			if (uniform01() < restart)
				for (int k = 0; k < d; k++)
					s[k] = box * uniform01();
			else
			{
				for (int k = 0; k < d; k++)
				{
					dir[k] = normal01();
					norm += dir[k] * dir[k];
				}
				norm = sqrt(norm) + 1e-300;
				for (int k = 0; k < d; k++)
				{
					s[k] += shift * dir[k] / norm;
					if (s[k] < 0)
						s[k] = -s[k];
					if (s[k] > box)
						s[k] = 2 * box - s[k];
				}
			}
		}
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ runs */

typedef struct Answer
{
	int32_t    *cluster;
	uint8_t    *is_core;
	int64_t		n_clusters;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} Answer;

static void
answer_alloc(Answer *a, int64_t n)
{
	memset(a, 0, sizeof(*a));
	a->cluster = malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	a->is_core = malloc((size_t) (n > 0 ? n : 1));
}

static void
answer_free(Answer *a)
{
	free(a->cluster);
	free(a->is_core);
}

typedef struct CancelAfter
{
	int			calls;
	int			yes_after;		/* answer yes from this call on; <= 0: never */
	double		t_yes;
} CancelAfter;

static int
cancel_after(void *arg)
{
	CancelAfter *c = arg;

	c->calls++;
	if (c->yes_after > 0 && c->calls >= c->yes_after)
	{
		if (c->t_yes == 0)
			c->t_yes = now_ms();
		return 1;
	}
	return 0;
}

static void
run_cpu(Answer *a, const float *x, int64_t n, int32_t d, double eps, int min_pts)
{
	gc_dbscan_params p = {sizeof(gc_dbscan_params), eps, min_pts};
	gc_dbscan_result r = {a->cluster, a->is_core, 0};
	double		t0 = now_ms();

	a->status = gc_dbscan_cpu(x, n, d, &p, &r, NULL, NULL, a->error);
	a->wall_ms = now_ms() - t0;
	a->n_clusters = r.n_clusters;
}

static void
run_gpu(Answer *a, const float *x, int64_t n, int32_t d, double eps, int min_pts,
		CancelAfter *cancel)
{
	gc_dbscan_params p = {sizeof(gc_dbscan_params), eps, min_pts};
	gc_dbscan_result r = {a->cluster, a->is_core, 0};
	double		t0 = now_ms();

	memset(&a->timing, 0, sizeof(a->timing));
	a->status = api->dbscan(0, x, n, d, &p, &r, &a->timing,
							cancel ? cancel_after : NULL, cancel);
	a->wall_ms = now_ms() - t0;
	a->n_clusters = r.n_clusters;
	snprintf(a->error, sizeof(a->error), "%s", a->status == GC_OK ? "" : api->last_error());
}

static int64_t
free_device_memory(void)
{
	gc_device_info info;

	if (api->device_info(0, &info) != GC_OK)
		return -1;
	return info.free_memory;
}

static void
check(int ok, const char *what, const char *detail)
{
	if (ok)
		passed++;
	else
	{
		failed++;
		fprintf(stderr, "FAILED: %s: %s\n", what, detail);
	}
}

/* ------------------------------------------------------------------ differential cases */

typedef struct Case
{
	const char *gen;
	int64_t		n;
	int32_t		d;
	double		eps;
	int			min_pts;
} Case;

static const Case cases[] = {
	/* 1-D */
	{"blobs", 100000, 1, 0.0005, 5},
	{"uniform", 100000, 1, 0.002, 4},
	/* 2-D */
	{"blobs", 10000, 2, 0.3, 5},
	{"blobs", 1000000, 2, 0.05, 5},
	{"blobs", 1000000, 2, 0.04, 20},
	{"blobs", 1000000, 2, 0.01, 1},
	{"blobs", 1000000, 2, 0.01, 2},
	{"blobs", 10000000, 2, 0.05, 5},
	{"uniform", 1000000, 2, 0.1, 4},
	{"uniform", 1000000, 2, 0.08, 2},
	{"dups", 1000000, 2, 0.5, 10},
	{"dups", 200000, 2, 1e-6, 300},
	{"blobs", 100000, 2, 500.0, 5},
	{"outliers", 20000, 2, 0.3, 5},
	/* 3-D */
	{"blobs", 1000000, 3, 0.15, 5},
	{"uniform", 1000000, 3, 1.0, 3},
	{"uniform", 1000000, 3, 0.6, 2},
	{"dups", 1000000, 3, 2.0, 8},
	{"gantao", 1000000, 3, 25.0, 2},
	{"gantao", 2000000, 3, 25.0, 2},
	{"gantao", 1000000, 3, 40.0, 10},
	{"blobs", 100000, 3, 1000.0, 3},
	/* 8-D */
	{"blobs", 100000, 8, 1.2, 5},
	{"uniform", 30000, 8, 25.0, 4},
	{"dups", 100000, 8, 1.0, 20},
	{"blobs", 10000, 8, 1000.0, 10},
	/* 64-D */
	{"blobs", 20000, 64, 9.0, 5},
	{"uniform", 8000, 64, 240.0, 3},
	{"dups", 10000, 64, 1.0, 5},
};

/* Compares a GPU answer with the CPU's; "identical" or what differs. */
static void
compare(const Answer *cpu, const Answer *gpu_a, int64_t n, char *verdict, size_t size)
{
	int64_t		diff_c = 0, diff_k = 0, first = -1;

	if (gpu_a->status != GC_OK || cpu->status != GC_OK)
	{
		snprintf(verdict, size, "ERROR: cpu %d (%s), gpu %d (%s)", cpu->status, cpu->error,
				 gpu_a->status, gpu_a->error);
		return;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			bad = 0;

		if (cpu->cluster[i] != gpu_a->cluster[i])
			diff_c++, bad = 1;
		if (cpu->is_core[i] != gpu_a->is_core[i])
			diff_k++, bad = 1;
		if (bad && first < 0)
			first = i;
	}
	if (diff_c == 0 && diff_k == 0 && cpu->n_clusters == gpu_a->n_clusters)
		snprintf(verdict, size, "identical");
	else
		snprintf(verdict, size,
				 "DIFFERENT: %lld cluster, %lld core differences, clusters %lld vs %lld, "
				 "first at row %lld (cpu %d/%d gpu %d/%d)",
				 (long long) diff_c, (long long) diff_k, (long long) cpu->n_clusters,
				 (long long) gpu_a->n_clusters, (long long) first,
				 first >= 0 ? cpu->cluster[first] : 0, first >= 0 ? cpu->is_core[first] : 0,
				 first >= 0 ? gpu_a->cluster[first] : 0, first >= 0 ? gpu_a->is_core[first] : 0);
}

/*
 * One data set: the CPU once, the GPU with each grid it can use (for d <= 3
 * the automatic choice, the fine DenseBox grid and the coarse grid, forced
 * through GPUCLUST_DBSCAN_GRID); every GPU answer must equal the CPU's.
 */
static void
differential(const Case *c, int gpu)
{
	static const char *grids[] = {"auto", "fine", "coarse"};
	float	   *x = malloc(sizeof(float) * (size_t) c->n * c->d);
	Answer		cpu, gpu_a;
	int64_t		ncore = 0, nnoise = 0;
	char		name[64], verdict[2400] = "cpu only", times[128] = "";
	int			ngrids = c->d <= 3 ? 3 : 1;
	int			all_ok = 1;

	answer_alloc(&cpu, c->n);
	answer_alloc(&gpu_a, c->n);
	generate(c->gen, x, c->n, c->d);
	snprintf(name, sizeof(name), "%s-%dd", c->gen, c->d);

	run_cpu(&cpu, x, c->n, c->d, c->eps, c->min_pts);
	for (int64_t i = 0; i < c->n; i++)
	{
		ncore += cpu.is_core[i];
		nnoise += cpu.cluster[i] < 0;
	}
	for (int m = 0; gpu && m < ngrids; m++)
	{
		char		one[2400], what[128];
		size_t		len = strlen(times);

		if (m == 0)
			unsetenv("GPUCLUST_DBSCAN_GRID");
		else
			setenv("GPUCLUST_DBSCAN_GRID", grids[m], 1);
		run_gpu(&gpu_a, x, c->n, c->d, c->eps, c->min_pts, NULL);
		compare(&cpu, &gpu_a, c->n, one, sizeof(one));
		snprintf(what, sizeof(what), "%s grid %s", name, grids[m]);
		check(strcmp(one, "identical") == 0, what, one);
		snprintf(times + len, sizeof(times) - len, "%s%.2f", m ? " / " : "",
				 gpu_a.timing.compute_ms);
		if (strcmp(one, "identical") != 0 && all_ok)
		{
			all_ok = 0;
			snprintf(verdict, sizeof(verdict), "%s: %.2300s", grids[m], one);
		}
		else if (all_ok)
			snprintf(verdict, sizeof(verdict), "identical");
	}
	unsetenv("GPUCLUST_DBSCAN_GRID");
	printf("| %-11s | %8lld | %3d | %9g | %4d | %8lld | %8lld | %8lld | %9.1f | %s | %s |\n",
		   name, (long long) c->n, c->d, c->eps, c->min_pts, (long long) cpu.n_clusters,
		   (long long) ncore, (long long) nnoise, cpu.wall_ms, times, verdict);
	fflush(stdout);
	answer_free(&cpu);
	answer_free(&gpu_a);
	free(x);
}

/* ------------------------------------------------------------------ error paths */

static void
error_paths(void)
{
	const int64_t n = 10000000;
	const int32_t d = 2;
	float	   *x = malloc(sizeof(float) * n * d);
	Answer		a;
	int64_t		before, after;
	char		detail[1200];

	answer_alloc(&a, n);
	generate("blobs", x, n, d);

	/* Warm-up: every kernel of this path loaded, so free memory is stable. */
	run_gpu(&a, x, n, d, 0.05, 5, NULL);
	check(a.status == GC_OK, "warm-up run", a.error);
	before = free_device_memory();

	printf("\n| check | status | detail | free device memory before -> after |\n|---|---|---|---|\n");
	for (int yes_after = 1; yes_after <= 6; yes_after++)
	{
		CancelAfter c = {0, yes_after, 0};

		double		t_end;

		run_gpu(&a, x, n, d, 0.05, 5, &c);
		t_end = now_ms();
		after = free_device_memory();
		/* the time from the first yes to the return is printed to be read, not checked */
		snprintf(detail, sizeof(detail),
				 "cancel after %d calls: status %d (%s), %.2f ms from yes to return, %.1f ms in all",
				 yes_after, a.status, a.error, c.t_yes > 0 ? t_end - c.t_yes : -1.0, a.wall_ms);
		check(a.status == GC_ERR_CANCELLED, "cancel", detail);
		check(after == before, "device memory after cancel", detail);
		printf("| cancel after %d calls | %s | %s | %lld -> %lld |\n", yes_after,
			   a.status == GC_ERR_CANCELLED ? "GC_ERR_CANCELLED" : "UNEXPECTED", detail,
			   (long long) before, (long long) after);
	}

	/* A callback that never says yes is asked, and the run completes. */
	{
		CancelAfter c = {0, 0, 0};

		run_gpu(&a, x, n, d, 0.05, 5, &c);
		snprintf(detail, sizeof(detail), "status %d, asked %d times", a.status, c.calls);
		check(a.status == GC_OK && c.calls >= 5, "cancel callback asked during a full run", detail);
		printf("| callback never says yes | %s | %s | |\n", a.status == GC_OK ? "GC_OK" : "UNEXPECTED",
			   detail);
	}

	/* An error after the upload: a non-finite coordinate. */
	x[(n / 2) * d + 1] = NAN;
	run_gpu(&a, x, n, d, 0.05, 5, NULL);
	after = free_device_memory();
	snprintf(detail, sizeof(detail), "status %d (%s)", a.status, a.error);
	check(a.status == GC_ERR_INVALID_ARGUMENT, "non-finite coordinate", detail);
	check(after == before, "device memory after an error", detail);
	printf("| NaN coordinate | %s | %s | %lld -> %lld |\n",
		   a.status == GC_ERR_INVALID_ARGUMENT ? "GC_ERR_INVALID_ARGUMENT" : "UNEXPECTED", detail,
		   (long long) before, (long long) after);
	free(x);
	answer_free(&a);

	/* Bad parameters. */
	{
		float		y[4] = {0, 0, 1, 1};
		int32_t		cl[2];
		uint8_t		co[2];
		gc_dbscan_params p = {sizeof(gc_dbscan_params), -1.0, 5};
		gc_dbscan_result r = {cl, co, 0};
		gc_status	s = api->dbscan(0, y, 2, 2, &p, &r, NULL, NULL, NULL);

		snprintf(detail, sizeof(detail), "status %d (%s)", s, api->last_error());
		check(s == GC_ERR_INVALID_ARGUMENT, "negative eps", detail);
		printf("| eps = -1 | %s | %s | |\n", s == GC_ERR_INVALID_ARGUMENT ? "GC_ERR_INVALID_ARGUMENT" : "UNEXPECTED", detail);
	}

	/*
	 * Out of device memory: 12M points of dimension 1024 (48 GiB, mapped but
	 * never touched) need about twice that on the device; the back end must
	 * say so before reading the points.
	 */
	{
		const int64_t bn = 12000000;
		const int32_t bd = 1024;
		size_t		bytes = sizeof(float) * (size_t) bn * bd;
		float	   *big = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
							   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		gc_device_info info;

		api->device_info(0, &info);
		if (big == MAP_FAILED)
			printf("| out of memory | skipped | could not map %zu bytes of host memory | |\n", bytes);
		else
		{
			Answer		b;
			double		t0 = now_ms();

			memset(&b, 0, sizeof(b));
			b.cluster = mmap(NULL, sizeof(int32_t) * bn, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			b.is_core = mmap(NULL, bn, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			run_gpu(&b, big, bn, bd, 1.0, 5, NULL);
			after = free_device_memory();
			snprintf(detail, sizeof(detail), "status %d (%s), bytes_needed %lld, total %lld, %.1f ms",
					 b.status, b.error, (long long) b.timing.bytes_needed,
					 (long long) info.total_memory, now_ms() - t0);
			check(b.status == GC_ERR_OUT_OF_MEMORY, "out of device memory", detail);
			check(b.timing.bytes_needed > info.free_memory, "bytes needed reported", detail);
			check(after == before, "device memory after out of memory", detail);
			printf("| out of memory | %s | %s | %lld -> %lld |\n",
				   b.status == GC_ERR_OUT_OF_MEMORY ? "GC_ERR_OUT_OF_MEMORY" : "UNEXPECTED", detail,
				   (long long) before, (long long) after);
			munmap(big, bytes);
			munmap(b.cluster, sizeof(int32_t) * bn);
			munmap(b.is_core, bn);
		}
	}

	/* The back end still works after all that, with the same answer as the CPU. */
	{
		Case		c = {"blobs", 100000, 2, 0.3, 5};

		printf("\n");
		differential(&c, 1);
	}
}

/* ------------------------------------------------------------------ benchmark mode */

static int
bench(const char *gen, int64_t n, int32_t d, double eps, int min_pts, int reps, int cpu,
	  const char *dump)
{
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	Answer		g, best, c;
	double		t0 = now_ms();

	if (!generate(gen, x, n, d))
	{
		fprintf(stderr, "unknown generator %s\n", gen);
		return 2;
	}
	printf("data %s n=%lld d=%d generated in %.0f ms\n", gen, (long long) n, d, now_ms() - t0);
	answer_alloc(&g, n);
	memset(&best, 0, sizeof(best));
	best.timing.compute_ms = 1e300;
	run_gpu(&g, x, n, d, eps, min_pts, NULL);	/* warm-up */
	if (g.status != GC_OK)
	{
		printf("gpu error %d: %s\n", g.status, g.error);
		return 1;
	}
	for (int r = 0; r < reps; r++)
	{
		run_gpu(&g, x, n, d, eps, min_pts, NULL);
		printf("gpu run %d: to_device %.2f compute %.2f (index %.2f core %.2f union %.2f "
			   "border+numbers %.2f) from_device %.2f wall %.2f ms\n",
			   r, g.timing.to_device_ms, g.timing.compute_ms, g.timing.phase_ms[0],
			   g.timing.phase_ms[1], g.timing.phase_ms[2], g.timing.phase_ms[3],
			   g.timing.from_device_ms, g.wall_ms);
		if (g.timing.compute_ms < best.timing.compute_ms)
		{
			best.timing = g.timing;
			best.wall_ms = g.wall_ms;
		}
	}
	{
		int64_t		ncore = 0, nnoise = 0;

		for (int64_t i = 0; i < n; i++)
		{
			ncore += g.is_core[i];
			nnoise += g.cluster[i] < 0;
		}
		printf("RESULT gen=%s n=%lld d=%d eps=%g min_pts=%d clusters=%lld core=%lld noise=%lld "
			   "gpu_to_device_ms=%.2f gpu_compute_ms=%.2f gpu_index_ms=%.2f gpu_core_ms=%.2f "
			   "gpu_union_ms=%.2f gpu_border_ms=%.2f gpu_from_device_ms=%.2f gpu_wall_ms=%.2f",
			   gen, (long long) n, d, eps, min_pts, (long long) g.n_clusters, (long long) ncore,
			   (long long) nnoise, best.timing.to_device_ms, best.timing.compute_ms,
			   best.timing.phase_ms[0], best.timing.phase_ms[1], best.timing.phase_ms[2],
			   best.timing.phase_ms[3], best.timing.from_device_ms, best.wall_ms);
	}
	if (cpu)
	{
		answer_alloc(&c, n);
		run_cpu(&c, x, n, d, eps, min_pts);
		printf(" cpu_ms=%.1f agree=%s", c.wall_ms,
			   c.status == GC_OK && c.n_clusters == g.n_clusters &&
			   memcmp(c.cluster, g.cluster, sizeof(int32_t) * n) == 0 &&
			   memcmp(c.is_core, g.is_core, n) == 0 ? "yes" : "NO");
		answer_free(&c);
	}
	printf("\n");
	if (dump)
	{
		char		path[1024];
		FILE	   *f;

		snprintf(path, sizeof(path), "%s/%s.f32", dump, gen);
		f = fopen(path, "wb");
		if (f)
		{
			fwrite(x, sizeof(float), (size_t) n * d, f);
			fclose(f);
		}
		snprintf(path, sizeof(path), "%s/%s.labels.i32", dump, gen);
		f = fopen(path, "wb");
		if (f)
		{
			fwrite(g.cluster, sizeof(int32_t), (size_t) n, f);
			fclose(f);
		}
		snprintf(path, sizeof(path), "%s/%s.core.u8", dump, gen);
		f = fopen(path, "wb");
		if (f)
		{
			fwrite(g.is_core, 1, (size_t) n, f);
			fclose(f);
		}
	}
	fflush(stdout);
	answer_free(&g);
	free(x);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *lib = "./gpuclust_cuda.so";
	int			quick = 0;
	int			gpu = 0;
	int32_t		count = 0;
	void	   *h;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
	}

	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h)
	{
		gc_cuda_api_fn fn = (gc_cuda_api_fn) dlsym(h, GC_CUDA_API_SYMBOL);

		api = fn ? fn() : NULL;
	}
	if (!api || api->abi_version != GC_ABI_VERSION)
		fprintf(stderr, "cannot load the GPU back end %s: %s\n", lib, h ? "bad api table" : dlerror());
	else if (api->device_count(&count) != GC_OK || count < 1)
		fprintf(stderr, "no usable GPU: %s\n", api->last_error());
	else
	{
		gc_device_info info;

		gpu = 1;
		api->device_info(0, &info);
		printf("device 0: %s, %.1f GiB, compute capability %d.%d\n", info.name,
			   info.total_memory / 1073741824.0, info.cc_major, info.cc_minor);
	}

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--bench") == 0)
		{
			int			reps = 3, cpu = 1;
			const char *dump = NULL;

			if (i + 5 >= argc)
			{
				fprintf(stderr, "usage: --bench GEN N D EPS MIN_PTS [--reps R] [--no-cpu] [--dump DIR]\n");
				return 2;
			}
			for (int j = i + 6; j < argc; j++)
			{
				if (strcmp(argv[j], "--reps") == 0 && j + 1 < argc)
					reps = atoi(argv[++j]);
				else if (strcmp(argv[j], "--no-cpu") == 0)
					cpu = 0;
				else if (strcmp(argv[j], "--dump") == 0 && j + 1 < argc)
					dump = argv[++j];
			}
			if (!gpu)
				return 1;
			return bench(argv[i + 1], atoll(argv[i + 2]), atoi(argv[i + 3]), atof(argv[i + 4]),
						 atoi(argv[i + 5]), reps, cpu, dump);
		}

	printf("\n| data | n | d | eps | min_pts | clusters | core | noise | cpu ms | gpu compute ms (auto / fine / coarse grid) | result |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		Case		c = cases[i];

		if (quick && c.n > 200000)
			c.n = 200000;
		differential(&c, gpu);
	}
	if (gpu)
		error_paths();
	else
		check(0, "GPU", "no usable GPU: only the CPU side ran");
	printf("\n%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
