/*
 * blas.c
 *    OpenBLAS opened with dlopen (blas.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"

/* The CBLAS constants (cblas.h), passed as int as the C ABI passes enums. */
#define CBLAS_ROW_MAJOR 101
#define CBLAS_NO_TRANS 111
#define CBLAS_TRANS 112

typedef void (*sgemm_fn) (int order, int ta, int tb, int m, int n, int k, float alpha,
						  const float *a, int lda, const float *b, int ldb, float beta,
						  float *c, int ldc);
typedef void (*dgemm_fn) (int order, int ta, int tb, int m, int n, int k, double alpha,
						  const double *a, int lda, const double *b, int ldb, double beta,
						  double *c, int ldc);
typedef void (*set_threads_fn) (int n);
typedef char *(*get_config_fn) (void);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static gc_blas_state blas_state = GC_BLAS_MISSING;
static sgemm_fn blas_sgemm;
static dgemm_fn blas_dgemm;
static char blas_text[256];

/*
 * The kernels OpenBLAS is told to use when OPENBLAS_CORETYPE is not set: a
 * release of OpenBLAS older than the processor does not recognise it and
 * falls back to its SSE3 kernels ("Prescott"), several times slower (an
 * Intel Xeon of 2023 under OpenBLAS 0.3.21: 15 GFLOP/s per core for SGEMM).
 * The AVX-512 kernels (SkylakeX) where the CPU has the AVX-512 subsets
 * they use, else the AVX2 ones (Haswell) where it has AVX2 and FMA, else
 * OpenBLAS's own choice.
 */
static const char *
blas_core_type(void)
{
	if (getenv("OPENBLAS_CORETYPE") != NULL)
		return NULL;
#if defined(__GNUC__) && defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
		__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512cd"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
#endif
	return NULL;
}

/* The look-up, once per process. */
static void
blas_open(void)
{
	static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
	void	   *h = NULL;
	const char *name = NULL;
	int			set_env;
	const char *core;
	set_threads_fn set_threads;
	get_config_fn get_config;

	/*
	 * OpenBLAS's own variables are read, and set around dlopen where unset,
	 * only to protect it from its known faults: threads of its own beside
	 * ours, and kernels too slow on processors newer than the release.
	 * Whether gpuclust uses OpenBLAS at all is tuning.cpu_blas, not the
	 * environment.
	 */
	/* no OpenBLAS threads of its own: every product runs on its caller's thread */
	set_env = getenv("OPENBLAS_NUM_THREADS") == NULL;
	if (set_env)
		setenv("OPENBLAS_NUM_THREADS", "1", 0);
	core = blas_core_type();
	if (core)
		setenv("OPENBLAS_CORETYPE", core, 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
	{
		name = names[i];
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	}
	if (set_env)
		unsetenv("OPENBLAS_NUM_THREADS");
	if (core)
		unsetenv("OPENBLAS_CORETYPE");
	if (!h)
	{
		snprintf(blas_text, sizeof(blas_text), "OpenBLAS not found (libopenblas.so.0)");
		return;
	}

	blas_sgemm = (sgemm_fn) dlsym(h, "cblas_sgemm");
	blas_dgemm = (dgemm_fn) dlsym(h, "cblas_dgemm");
	set_threads = (set_threads_fn) dlsym(h, "openblas_set_num_threads");
	get_config = (get_config_fn) dlsym(h, "openblas_get_config");
	if (!blas_sgemm || !blas_dgemm || !set_threads)
	{
		/* the handle stays open: unloading a library that may have started threads is unsafe */
		snprintf(blas_text, sizeof(blas_text),
				 "OpenBLAS not used (%s lacks cblas_sgemm, cblas_dgemm or openblas_set_num_threads)",
				 name);
		return;
	}
	set_threads(1);
	{
		const char *config = get_config ? get_config() : NULL;
		get_config_fn get_core = (get_config_fn) dlsym(h, "openblas_get_corename");
		const char *kernels = get_core ? get_core() : NULL;

		snprintf(blas_text, sizeof(blas_text), "%s%s (%s; kernels %s%s)",
				 config && strncmp(config, "OpenBLAS", 8) == 0 ? "" : "OpenBLAS ",
				 config ? config : "of unknown configuration", name,
				 kernels ? kernels : "unknown", core ? ", chosen by gpuclust" : "");
	}
	blas_state = GC_BLAS_READY;
}

gc_blas_state
gc_blas_state_get(void)
{
	pthread_once(&blas_once, blas_open);
	return blas_state;
}

int
gc_blas_available(void)
{
	return gc_blas_state_get() == GC_BLAS_READY;
}

const char *
gc_blas_describe(void)
{
	gc_blas_state_get();
	return blas_text;
}

void
gc_blas_sgemm_nt(int m, int n, int kk, const float *a, const float *b, float *c)
{
	blas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, m, n, kk, 1.0f, a, kk, b, kk,
			   0.0f, c, n);
}

void
gc_blas_dgemm_nt(int m, int n, int kk, const double *a, const double *b, double *c)
{
	blas_dgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, m, n, kk, 1.0, a, kk, b, kk,
			   0.0, c, n);
}
