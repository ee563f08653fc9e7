/*
 * backend.c
 *    The CPU back end as a gc_backend_api table (common/backend.h), the same
 *    table the GPU back end exports: every entry clears this thread's error
 *    record, checks the parameters with the one check of common/checks.h,
 *    answers an empty input at once, and times the algorithm of the core.
 */
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "hdbscan.h"

/* The last failure of the CPU back end in this thread. */
static _Thread_local gc_error cpu_error;

/* The error record of this thread (empty texts if the last call succeeded). */
static const gc_error *
cpu_last_error(void)
{
	return &cpu_error;
}

/* The CPU is one device. */
static gc_status
cpu_device_count(int32_t *count)
{
	gc_error_clear(&cpu_error);
	if (count == NULL)
		return gc_error_set(&cpu_error, GC_ERR_INTERNAL, "device count pointer is missing");
	*count = 1;
	return GC_OK;
}

/* Describes device 0, the CPU, with the machine's memory when the system tells it. */
static gc_status
cpu_device_info(int32_t device_id, gc_device_info *info)
{
	long		page = -1;

	gc_error_clear(&cpu_error);
	if (info == NULL)
		return gc_error_set(&cpu_error, GC_ERR_INTERNAL, "device info pointer is missing");
	if (device_id != 0)
		return gc_error_set(&cpu_error, GC_ERR_NO_DEVICE,
							"the CPU back end has device 0 only, not %d", (int) device_id);
	memset(info, 0, sizeof(*info));
	info->device_id = 0;
	strcpy(info->name, "CPU");
#ifdef _SC_PAGESIZE
	page = sysconf(_SC_PAGESIZE);
#endif
#ifdef _SC_PHYS_PAGES
	if (page > 0 && sysconf(_SC_PHYS_PAGES) > 0)
		info->total_memory = (int64_t) sysconf(_SC_PHYS_PAGES) * page;
#endif
#ifdef _SC_AVPHYS_PAGES
	if (page > 0 && sysconf(_SC_AVPHYS_PAGES) > 0)
		info->free_memory = (int64_t) sysconf(_SC_AVPHYS_PAGES) * page;
#endif
	return GC_OK;
}

/* The CPU back end holds no memory between calls. */
static void
cpu_release(void)
{
}

/*
 * The common start of an algorithm entry: clears the error, checks the
 * exec record and fills ctx (a scratch timing record when the caller wants
 * none; the caller's is zeroed).  The parameters are checked by the caller.
 */
static gc_status
cpu_begin(const gc_exec *exec, gc_core_ctx *ctx, gc_timing *scratch,
		  const gc_tuning *defaults)
{
	gc_status	st;

	gc_error_clear(&cpu_error);
	memset(ctx, 0, sizeof(*ctx));
	ctx->err = &cpu_error;
	ctx->tuning = defaults;
	ctx->timing = scratch;
	memset(scratch, 0, sizeof(*scratch));
	if (exec == NULL)
		return GC_OK;
	if ((st = gc_check_version("gc_exec", exec->struct_size, sizeof(gc_exec), &cpu_error)) != GC_OK)
		return st;
	if (exec->tuning != NULL &&
		(st = gc_check_version("gc_tuning", exec->tuning->struct_size, sizeof(gc_tuning),
							   &cpu_error)) != GC_OK)
		return st;
	ctx->cancel = exec->cancel;
	ctx->cancel_arg = exec->cancel_arg;
	if (exec->tuning != NULL)
		ctx->tuning = exec->tuning;
	if (exec->timing != NULL)
	{
		ctx->timing = exec->timing;
		memset(ctx->timing, 0, sizeof(*ctx->timing));
	}
	return GC_OK;
}

/*
 * The call's threads: as many as the tuning asks for, or the CPUs this
 * process may run on, at most max_threads (small inputs: starting threads
 * would cost more than they save; the answer does not depend on it).
 * Started on the first parallel loop.
 */
/*
 * Rows per thread below which a call starts fewer threads: a DBSCAN row is
 * cheap (a 1,000-row call takes about 0.1 ms), a density peaks row is a row
 * of distances.  k-means decides per loop (serial below 4,096 rows).
 */
#define CPU_ROWS_PER_THREAD_DBSCAN 4096
#define CPU_ROWS_PER_THREAD_DPEAKS 512

static gc_status
cpu_pool_start(gc_core_ctx *ctx, int64_t max_threads)
{
	int			threads = ctx->tuning->cpu_threads;

	if (threads <= 0)
		threads = gc_pool_default_threads();
	if (threads > max_threads)
		threads = (int) max_threads;
	ctx->pool = gc_pool_create(ctx, threads);
	if (ctx->pool == NULL)
		return gc_core_oom(ctx, sizeof(gc_worker) * (size_t) threads,
						   "out of memory for %d threads", threads);
	return GC_OK;
}

/* Joins the call's threads and reports how many ran. */
static void
cpu_pool_end(gc_core_ctx *ctx)
{
	ctx->timing->threads = gc_pool_threads_used(ctx->pool);
	gc_pool_free(ctx->pool);
	ctx->pool = NULL;
}

/*
 * The buffers an algorithm reads and writes must be there (a bug of the
 * caller otherwise); result_ok: the result struct and, when n > 0, its arrays.
 */
static gc_status
cpu_check_buffers(const char *algorithm, const void *x, int64_t n, int result_ok)
{
	if (!result_ok)
		return gc_error_set(&cpu_error, GC_ERR_INTERNAL, "%s result is missing", algorithm);
	if (n > 0 && x == NULL)
		return gc_error_set(&cpu_error, GC_ERR_INTERNAL, "%s input rows are missing", algorithm);
	return GC_OK;
}

/* DBSCAN entry of the table. */
static gc_status
cpu_dbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
		   const gc_dbscan_params *params, gc_dbscan_result *result)
{
	gc_tuning	defaults = gc_tuning_defaults();
	int			result_ok = result != NULL &&
		(n == 0 || (result->cluster != NULL && result->is_core != NULL));
	gc_timing	scratch;
	gc_core_ctx ctx;
	gc_status	st;
	double		t0;

	if ((st = cpu_begin(exec, &ctx, &scratch, &defaults)) != GC_OK ||
		(st = gc_check_dbscan(params, n, d, &cpu_error)) != GC_OK ||
		(st = gc_check_input("DBSCAN", dtype, params->metric, &cpu_error)) != GC_OK ||
		(st = cpu_check_buffers("DBSCAN", x, n, result_ok)) != GC_OK)
		return st;
	result->n_clusters = 0;
	if (n == 0)
		return GC_OK;
	t0 = gc_core_now_ms();
	if ((st = cpu_pool_start(&ctx, 1 + n / CPU_ROWS_PER_THREAD_DBSCAN)) != GC_OK)
		return st;
	st = gc_core_dbscan(&ctx, x, dtype, n, d, params, result);
	cpu_pool_end(&ctx);
	ctx.timing->compute_ms = gc_core_now_ms() - t0;
	return st;
}

/* k-means entry of the table. */
static gc_status
cpu_kmeans(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
		   const gc_kmeans_params *params, gc_kmeans_result *result)
{
	gc_tuning	defaults = gc_tuning_defaults();
	int			result_ok = result != NULL &&
		(n == 0 || (result->labels != NULL && result->distance != NULL &&
					result->centroids != NULL && result->sizes != NULL &&
					result->inertia != NULL));
	gc_timing	scratch;
	gc_core_ctx ctx;
	gc_status	st;
	double		t0;

	if ((st = cpu_begin(exec, &ctx, &scratch, &defaults)) != GC_OK ||
		(st = gc_check_kmeans(params, n, d, &cpu_error)) != GC_OK ||
		(st = gc_check_input("k-means", dtype, params->metric, &cpu_error)) != GC_OK ||
		(st = gc_check_centroid_values("initial_centroids",
										params->init == GC_KMEANS_INIT_GIVEN ? params->initial_centroids : NULL,
										params->k, d, dtype, &cpu_error, NULL)) != GC_OK ||
		(st = cpu_check_buffers("k-means", x, n, result_ok)) != GC_OK)
		return st;
	result->iterations = 0;
	if (n == 0)
		return GC_OK;
	t0 = gc_core_now_ms();
	if ((st = cpu_pool_start(&ctx, GC_POOL_MAX_THREADS)) != GC_OK)
		return st;
	st = gc_core_kmeans(&ctx, x, dtype, n, d, params, result);
	cpu_pool_end(&ctx);
	ctx.timing->compute_ms = gc_core_now_ms() - t0;
	return st;
}

/* k-means assignment entry of the table. */
static gc_status
cpu_kmeans_assign(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				  const gc_kmeans_assign_params *params, gc_kmeans_assign_result *result)
{
	gc_tuning	defaults = gc_tuning_defaults();
	int			result_ok = result != NULL &&
		(n == 0 || (result->labels != NULL && result->distance != NULL));
	gc_timing	scratch;
	gc_core_ctx ctx;
	gc_status	st;
	double		t0;

	if ((st = cpu_begin(exec, &ctx, &scratch, &defaults)) != GC_OK ||
		(st = gc_check_kmeans_assign(params, n, d, &cpu_error)) != GC_OK ||
		(st = gc_check_input("k-means assignment", dtype, params->metric, &cpu_error)) != GC_OK ||
		(st = gc_check_centroid_values("centroids", params->centroids, params->k, d, dtype,
										&cpu_error, NULL)) != GC_OK ||
		(st = cpu_check_buffers("k-means assignment", x, n, result_ok)) != GC_OK)
		return st;
	if (n == 0)
		return GC_OK;
	t0 = gc_core_now_ms();
	if ((st = cpu_pool_start(&ctx, GC_POOL_MAX_THREADS)) != GC_OK)
		return st;
	st = gc_core_kmeans_assign(&ctx, x, dtype, n, d, params, result);
	cpu_pool_end(&ctx);
	ctx.timing->compute_ms = gc_core_now_ms() - t0;
	return st;
}

/* Density peaks entry of the table. */
static gc_status
cpu_density_peaks(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				  const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	gc_tuning	defaults = gc_tuning_defaults();
	int			result_ok = result != NULL &&
		(n == 0 || (result->cluster != NULL && result->rho != NULL &&
					result->delta != NULL && result->is_center != NULL));
	gc_timing	scratch;
	gc_core_ctx ctx;
	gc_status	st;
	double		t0;

	if ((st = cpu_begin(exec, &ctx, &scratch, &defaults)) != GC_OK ||
		(st = gc_check_dpeaks(params, n, d, &cpu_error)) != GC_OK ||
		(st = gc_check_input("density peaks", dtype, params->metric, &cpu_error)) != GC_OK ||
		(st = cpu_check_buffers("density peaks", x, n, result_ok)) != GC_OK)
		return st;
	/* no rows: no dc is derived, the one given (or 0) is reported */
	result->n_centers = 0;
	result->dc = params->dc;
	result->dc_method = params->derive_dc ? GC_DC_EXACT : GC_DC_GIVEN;
	result->dc_sample = 0;
	if (n == 0)
		return GC_OK;
	t0 = gc_core_now_ms();
	if ((st = cpu_pool_start(&ctx, 1 + n / CPU_ROWS_PER_THREAD_DPEAKS)) != GC_OK)
		return st;
	st = gc_core_dpeaks(&ctx, x, dtype, n, d, params, result);
	cpu_pool_end(&ctx);
	ctx.timing->compute_ms = gc_core_now_ms() - t0;
	return st;
}

/* Rows per thread below which an HDBSCAN call starts fewer threads. */
#define CPU_ROWS_PER_THREAD_HDBSCAN 2048

/* HDBSCAN entry of the table. */
static gc_status
cpu_hdbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			const gc_hdbscan_params *params, gc_hdbscan_result *result)
{
	gc_tuning	defaults = gc_tuning_defaults();
	int			result_ok = result != NULL &&
		(n == 0 || (result->cluster != NULL &&
					(result->probability == NULL) == (result->outlier_score == NULL)));
	gc_timing	scratch;
	gc_core_ctx ctx;
	gc_status	st;
	double		t0;

	if ((st = cpu_begin(exec, &ctx, &scratch, &defaults)) != GC_OK ||
		(st = gc_check_hdbscan(params, n, d, &cpu_error)) != GC_OK ||
		(st = gc_check_input("HDBSCAN", dtype, params->metric, &cpu_error)) != GC_OK ||
		(st = cpu_check_buffers("HDBSCAN", x, n, result_ok)) != GC_OK)
		return st;
	result->n_clusters = 0;
	if (result->tree != NULL)
	{
		result->tree->rows = 0;
		result->tree->nodes = 0;
	}
	if (n == 0)
		return GC_OK;
	t0 = gc_core_now_ms();
	if ((st = cpu_pool_start(&ctx, 1 + n / CPU_ROWS_PER_THREAD_HDBSCAN)) != GC_OK)
		return st;
	st = gc_core_hdbscan(&ctx, x, dtype, n, d, params, result);
	cpu_pool_end(&ctx);
	ctx.timing->compute_ms = gc_core_now_ms() - t0;
	return st;
}

/* The table gc_cpu_api() hands out. */
static const gc_backend_api cpu_api = {
	.abi_version = GC_ABI_VERSION,
	.struct_size = sizeof(gc_backend_api),
	.name = "cpu",
	.last_error = cpu_last_error,
	.device_count = cpu_device_count,
	.device_info = cpu_device_info,
	.release = cpu_release,
	.dbscan = cpu_dbscan,
	.kmeans = cpu_kmeans,
	.density_peaks = cpu_density_peaks,
	.kmeans_assign = cpu_kmeans_assign,
	.hdbscan = cpu_hdbscan,
};

/* The CPU back end's table of entry points. */
const gc_backend_api *
gc_cpu_api(void)
{
	return &cpu_api;
}
