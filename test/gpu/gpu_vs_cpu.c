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
 *       --quick caps every data set at 200,000 rows, --max-n at N rows.
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
 * Prints a table per algorithm and, last, "N passed, N failed"; exits 1 when
 * a check failed, 2 on a usage error.  The timings of bench/ are separate
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
	return n;
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

	if (want_dbscan)
		dbscan_checks();
	if (want_kmeans)
		kmeans_checks();
	if (want_dpeaks)
		dpeaks_checks();
	if (want_hdbscan)
		hdbscan_checks();

	printf("\n%d passed, %d failed\n", H.passed, H.failed);
	return H.failed ? 1 : 0;
}
