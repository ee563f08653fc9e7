/*
 * gpu_vs_cpu.c
 *    Every check of the GPU back end against the CPU back end, for the
 *    four algorithms, without PostgreSQL: the same generated inputs
 *    (test/data/gc_testdata.h) go through gc_cpu_api() (linked: the C files
 *    of src/core) and through gpuclust_cuda_api() (gpuclust_cuda.so, opened
 *    with dlopen as the extension opens it), and the answers must agree:
 *
 *      DBSCAN         cluster numbers, core flags and cluster count exactly
 *                     equal, for every grid the GPU can use (tuning.dbscan_grid
 *                     auto / fine / coarse for d <= 3); then the error paths:
 *                     cancel, a non-finite coordinate, bad parameters and an
 *                     input too large for the device, each followed by a
 *                     check that the free device memory is what it was
 *                     (check_dbscan.c);
 *      k-means        labels equal, except near-ties where a case allows
 *                     them, and the inertia within the case's limit; the
 *                     TF32-checked, FP32 (tuning.kmeans_gemm) products, the
 *                     widened window (tuning.kmeans_window) and the chunked
 *                     path (tuning.kmeans_chunk_rows); cancel (check_kmeans.c);
 *      density peaks  dc, rho, delta, centres and labels exactly equal, with
 *                     exact and sampled dc, both kernels, the grid and the
 *                     scans; cancel (check_dpeaks.c);
 *      HDBSCAN        labels, probabilities, outlier scores, core distances
 *                     (and the condensed tree where a case asks) identical
 *                     bit for bit; duplicates, lattices with exact ties, far
 *                     outliers, float / double, cosine, every selection
 *                     parameter; cancel, bad parameters, out of device
 *                     memory (check_hdbscan.c).
 *
 * Usage (from the project root, after `make`):
 *
 *   test/gpu/gpu_vs_cpu [--lib PATH] [--quick] [--max-n N] [dbscan] [kmeans] [dpeaks] [hdbscan]
 *       the named algorithms (all when none is named) against the GPU
 *       back end at PATH (default $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so);
 *       --max-n caps every data set at N rows.  --quick runs every kind of
 *       case (each shape, precision, metric, tuning; ties; cancel, the
 *       cancels in a row, error paths, out of memory) at small sizes: the
 *       differential sets capped at 200,000 rows and 2e7 values (wide rows:
 *       fewer), the cancels in a row of HDBSCAN on 200,000 rows; the error
 *       paths of DBSCAN and HDBSCAN keep their 10M rows (GPU only, seconds;
 *       uploads of 80 and 160 MB and answers of 80 MB, the staged copies of
 *       cuda/copy.cu), so that all four algorithms take a few minutes on the
 *       GPU machine.
 *       Without a usable GPU it says so and fails.
 *
 *   test/gpu/gpu_vs_cpu --cpu-only [--max-n N] [dbscan] [kmeans] [dpeaks] [hdbscan]
 *       the self-test of the harness: the CPU table against itself, through
 *       the same cases (capped at 4,000 rows, fewer for wide rows, unless
 *       --max-n says otherwise),
 *       tuning and comparison code; GPU-only checks (device memory, a
 *       non-finite coordinate, out of device memory) are skipped.  Each part
 *       also checks that its comparison notices a changed answer.
 *
 * Prints a table per algorithm, after each algorithm "ALGORITHM: N passed,
 * N failed in S s" (its own checks and wall time) and, last, "N passed, N
 * failed"; exits 1 when a check failed, 2 on a usage error.  The timings of bench/ are separate
 * (bench/dbscan_bench, bench/kmeans_bench, bench/dpeaks_bench).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

harness		H;

int
h_check(int ok, const char *what, const char *detail)
{
	if (ok)
		H.passed++;
	else
	{
		H.failed++;
		printf("FAILED: %s: %s\n", what, detail);
	}
	fflush(stdout);
	return ok;
}

int64_t
h_rows(int64_t n, int32_t d)
{
	if (H.max_n > 0 && n > H.max_n)
		n = H.max_n;
	if (H.cpu_only && !H.explicit_max_n)
	{
		int64_t		quadratic = (int64_t) sqrt(2.5e8 / (d > 0 ? d : 1));

		if (quadratic < 1000)
			quadratic = 1000;
		if (n > quadratic)
			n = quadratic;
	}
	/* --quick: wide sets of the same shape with fewer rows, at most 2e7 values (200,000 x 100) */
	if (H.quick && !H.explicit_max_n && n > (int64_t) (2e7 / (d > 0 ? d : 1)))
		n = (int64_t) (2e7 / (d > 0 ? d : 1));
	return n;
}

int64_t
h_size(int64_t full, int64_t quick, int64_t cpu)
{
	return H.cpu_only ? cpu : H.quick ? quick : full;
}

int64_t
h_free_device_memory(void)
{
	gc_device_info info;

	if (H.cpu_only || H.test->device_info(0, &info) != GC_OK)
		return -1;
	return info.free_memory;
}

const char *
h_memory_text(int64_t before, int64_t after, char *buf, size_t size)
{
	if (before < 0 && after < 0)
		snprintf(buf, size, "not read (no device)");
	else
		snprintf(buf, size, "%lld -> %lld", (long long) before, (long long) after);
	return buf;
}

float *
h_generate(const char *shape, int64_t n, int32_t d)
{
	float	   *x = gc_td_alloc(n, d);
	int			rc = x ? gc_td_generate(shape, x, n, d, gc_td_seed(shape, n, d)) : -1;

	if (rc != 1)
	{
		fprintf(stderr, "gpu_vs_cpu: cannot generate %s n=%lld d=%d: %s\n", shape, (long long) n, d,
				rc == 0 ? "unknown shape" : "out of memory");
		exit(2);
	}
	return x;
}

const char *
h_test_name(void)
{
	return H.cpu_only ? "cpu (again)" : "gpu";
}

int
h_status_verdict(gc_status ref, const char *ref_error, gc_status test, const char *test_error,
				 char *verdict, size_t size, int *same)
{
	if (ref == GC_OK && test == GC_OK)
		return 0;
	*same = ref == test && strcmp(ref_error, test_error) == 0;
	if (*same)
		snprintf(verdict, size, "same error on both: %s (%s)", gc_h_status_name(test), test_error);
	else
		snprintf(verdict, size, "ERROR: cpu %s (%s), %s %s (%s)", gc_h_status_name(ref), ref_error,
				 h_test_name(), gc_h_status_name(test), test_error);
	return 1;
}

/* splitmix64: the random questions of the cancels in a row. */
static uint64_t
h_next(uint64_t *state)
{
	uint64_t	z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The free device memory once the back end has let go of what it may keep (release()). */
static int64_t
h_released_memory(void)
{
	if (H.test->release)
		H.test->release();
	return h_free_device_memory();
}

void
h_cancel_storm(const char *algorithm, const char *kind, int64_t n, h_cancel_run run, void *ctx)
{
	const int	count = H.cpu_only ? 20 : 200;
	gc_h_cancel never = {0, 0, 0, 0};
	gc_status	st;
	uint64_t	seed = 42,
				state;
	int64_t		base,
				end;
	int			cancelled = 0,
				completed = 0,
				yes_ignored = 0,
				unexpected = 0,
				drifted = 0,
				questions;
	char		what[160],
				first_bad[400] = "",
				first_drift[400] = "",
				detail[1600],
				mem[64];
	double		t0 = gc_h_now_ms();

	for (const char *p = algorithm; *p; p++)
		seed = seed * 131 + (unsigned char) *p;
	for (const char *p = kind; *p; p++)
		seed = seed * 131 + (unsigned char) *p;
	state = seed;

	/* the warm-up of this very kind: what a first call of it makes and keeps is made here */
	st = run(ctx, &never);
	questions = never.calls;
	base = h_released_memory();
	snprintf(what, sizeof(what), "%s cancels in a row, %s: warm-up run", algorithm, kind);
	h_check(st == GC_OK && questions >= 1, what, gc_h_status_name(st));

	for (int i = 0; i < count && st == GC_OK; i++)
	{
		gc_h_cancel c = {0, 1 + (int) (h_next(&state) % (uint64_t) (questions + 1)), 0, 0};
		gc_status	s = run(ctx, &c);
		int64_t		now;

		if (s == GC_ERR_CANCELLED && c.t_yes > 0)
			cancelled++;
		else if (s == GC_OK)
		{
			completed++;
			yes_ignored += c.t_yes > 0;
		}
		else
		{
			unexpected++;
			if (!first_bad[0])
				snprintf(first_bad, sizeof(first_bad), "; first unexpected: call %d, yes at question %d of %d asked: %s",
						 i + 1, c.yes_after, c.calls, gc_h_status_name(s));
		}
		now = h_released_memory();
		if (now != base)
		{
			drifted++;
			if (!first_drift[0])
				snprintf(first_drift, sizeof(first_drift),
						 "; first at call %d (yes at question %d, %s): %lld -> %lld", i + 1, c.yes_after,
						 gc_h_status_name(s), (long long) base, (long long) now);
		}
	}
	end = h_released_memory();
	snprintf(detail, sizeof(detail),
			 "%lld rows, seed %llu, %d questions in a whole run: %d cancelled, %d ended GC_OK (%d of them "
			 "after a yes at their last questions), %d unexpected%s; free memory differed after %d calls%s; %.1f s",
			 (long long) n, (unsigned long long) seed, questions, cancelled, completed, yes_ignored, unexpected,
			 first_bad,
			 drifted, first_drift, (gc_h_now_ms() - t0) / 1000.0);
	snprintf(what, sizeof(what), "%s %d cancels in a row, %s: each ends cancelled (or done)", algorithm, count,
			 kind);
	h_check(st == GC_OK && unexpected == 0 && cancelled > 0, what, detail);
	if (!H.cpu_only)
	{
		snprintf(what, sizeof(what), "%s %d cancels in a row, %s: free device memory back to its start",
				 algorithm, count, kind);
		h_check(base >= 0 && end == base && drifted == 0, what, detail);
	}
	printf("| cancels in a row (%d, %s) | %s | %s | %s |\n", count, kind,
		   st == GC_OK && unexpected == 0 ? "GC_ERR_CANCELLED" : "UNEXPECTED", detail,
		   h_memory_text(base, end, mem, sizeof(mem)));
	fflush(stdout);
}

/* Runs one algorithm's checks; prints its own count and wall time. */
static void
h_part(const char *name, void (*checks) (void))
{
	int			passed = H.passed,
				failed = H.failed;
	double		t0 = gc_h_now_ms();

	checks();
	printf("\n%s: %d passed, %d failed in %.1f s\n", name, H.passed - passed, H.failed - failed,
		   (gc_h_now_ms() - t0) / 1000.0);
	fflush(stdout);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: gpu_vs_cpu [--lib PATH] [--quick] [--max-n N] [--cpu-only] [dbscan] [kmeans] [dpeaks] [hdbscan]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *lib = NULL;
	int			want_dbscan = 0,
				want_kmeans = 0,
				want_dpeaks = 0,
				want_hdbscan = 0;
	int			quick = 0;
	int64_t		max_n = -1;
	char		why[1024] = "";

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--max-n") == 0 && i + 1 < argc)
			max_n = atoll(argv[++i]);
		else if (strcmp(argv[i], "--cpu-only") == 0)
			H.cpu_only = 1;
		else if (strcmp(argv[i], "dbscan") == 0)
			want_dbscan = 1;
		else if (strcmp(argv[i], "kmeans") == 0)
			want_kmeans = 1;
		else if (strcmp(argv[i], "dpeaks") == 0 || strcmp(argv[i], "density_peaks") == 0)
			want_dpeaks = 1;
		else if (strcmp(argv[i], "hdbscan") == 0)
			want_hdbscan = 1;
		else if (strcmp(argv[i], "--bench") == 0)
		{
			fprintf(stderr, "gpu_vs_cpu: the DBSCAN timings moved to bench/dbscan_bench "
					"(make -C bench dbscan_bench; bench/dbscan_gpu_bench.sh runs it)\n");
			return 2;
		}
		else
			usage();
	}
	if (!want_dbscan && !want_kmeans && !want_dpeaks && !want_hdbscan)
		want_dbscan = want_kmeans = want_dpeaks = want_hdbscan = 1;
	H.max_n = max_n >= 0 ? max_n : H.cpu_only ? 4000 : quick ? 200000 : 0;
	H.explicit_max_n = max_n >= 0;
	H.quick = quick;

	H.ref = gc_cpu_api();
	if (!H.ref || H.ref->abi_version != GC_ABI_VERSION || H.ref->struct_size != sizeof(gc_backend_api))
	{
		printf("the CPU api table is of another version\n");
		H.failed++;
		printf("\n%d passed, %d failed\n", H.passed, H.failed);
		return 1;
	}
	if (H.cpu_only)
	{
		H.test = H.ref;
		printf("--cpu-only: the CPU back end against itself (a self-test of the harness; no GPU is used)\n");
	}
	else
	{
		H.test = gc_h_open_gpu(gc_h_cuda_path(lib), &H.device, why, sizeof(why));
		if (!H.test)
		{
			printf("no GPU to test: %s\n", why);
			printf("(gpu_vs_cpu --cpu-only runs the harness against the CPU back end alone)\n");
			H.failed++;
			printf("\n%d passed, %d failed\n", H.passed, H.failed);
			return 1;
		}
		printf("device 0: %s, %.1f GiB, compute capability %d.%d, back end %s\n", H.device.name,
			   H.device.total_memory / 1073741824.0, H.device.cc_major, H.device.cc_minor,
			   gc_h_cuda_path(lib));
	}
	if (H.max_n > 0)
		printf("data sets capped at %lld rows%s\n", (long long) H.max_n,
			   H.cpu_only && !H.explicit_max_n ? " (fewer for wide rows: rows^2 d <= 2.5e8)" : "");
	fflush(stdout);

	if (H.quick)
		printf("--quick: every kind of case at small sizes (see gpu_vs_cpu.c)\n");
	fflush(stdout);
	if (want_dbscan)
		h_part("dbscan", dbscan_checks);
	if (want_kmeans)
		h_part("kmeans", kmeans_checks);
	if (want_dpeaks)
		h_part("dpeaks", dpeaks_checks);
	if (want_hdbscan)
		h_part("hdbscan", hdbscan_checks);

	printf("\n%d passed, %d failed\n", H.passed, H.failed);
	return H.failed ? 1 : 0;
}
