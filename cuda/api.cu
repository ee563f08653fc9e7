/*
 * api.cu
 *    The api table of the GPU back end (gpuclust_cuda.so): device discovery,
 *    last-error text, release, and the error helpers of common.cuh.
 */
#include "common.cuh"

namespace gc {

static thread_local gc_error last_error;
thread_local int64_t oom_bytes_needed = 0;

gc_status set_error(gc_status status, const char *fmt, ...)
{
	va_list ap;

	gc_error_clear(&last_error);
	va_start(ap, fmt);
	vsnprintf(last_error.message, sizeof(last_error.message), fmt, ap);
	va_end(ap);
	return status;
}

gc_error *error_record() { return &last_error; }

void clear_error()
{
	gc_error_clear(&last_error);
	oom_bytes_needed = 0;
}

gc_status status_of(cudaError_t err)
{
	switch (err)
	{
		case cudaSuccess:
			return GC_OK;
		case cudaErrorInsufficientDriver:
		case cudaErrorInitializationError:
		case cudaErrorStubLibrary:
		case cudaErrorCallRequiresNewerDriver:
		case cudaErrorSystemDriverMismatch:
		case cudaErrorCompatNotSupportedOnDevice:
			return GC_ERR_NO_DRIVER;
		case cudaErrorNoDevice:
		case cudaErrorInvalidDevice:
		case cudaErrorDevicesUnavailable:
		case cudaErrorNoKernelImageForDevice:
			return GC_ERR_NO_DEVICE;
		case cudaErrorMemoryAllocation:
			return GC_ERR_OUT_OF_MEMORY;
		default:
			return GC_ERR_CUDA;
	}
}

void fail(gc_status status, const char *fmt, ...)
{
	va_list ap;

	gc_error_clear(&last_error);
	va_start(ap, fmt);
	vsnprintf(last_error.message, sizeof(last_error.message), fmt, ap);
	va_end(ap);
	throw Failure{status};
}

void fail_cuda(cudaError_t err, const char *what, const char *file, int line)
{
	/* Clear a non-sticky error so that the next call starts clean. */
	cudaGetLastError();
	gc_error_clear(&last_error);
	snprintf(last_error.message, sizeof(last_error.message), "%s failed: %s (%s) at %s:%d",
			 what, cudaGetErrorString(err), cudaGetErrorName(err), file, line);
	throw Failure{status_of(err)};
}

/* Start-up milliseconds not reported yet, by gc_init_part. */
static double pending_init[GC_INIT_PARTS];
/* Whether the process made its first device allocation (the allocator's own start-up). */
static bool first_alloc_done = false;
/* Devices whose primary context this process created. */
static bool context_ready[64];

void note_init(gc_init_part part, double ms)
{
	pending_init[part] += ms;
}

void take_init(gc_timing *timing)
{
	for (int i = 0; i < GC_INIT_PARTS; i++)
	{
		timing->init_ms[i] += pending_init[i];
		pending_init[i] = 0.0;
	}
}

void drop_init()
{
	for (int i = 0; i < GC_INIT_PARTS; i++)
		pending_init[i] = 0.0;
}

/*
 * Device memory.  Outside a pooled call, cudaMalloc and cudaFree.  In a
 * pooled call (between begin_pool and end_pool), the device's default
 * stream-ordered pool: cudaMallocAsync and cudaFreeAsync on the legacy
 * default stream, where every kernel of the back end runs.  A buffer freed
 * there is reused by the next allocation of the call without a new mapping,
 * and the free does not wait for the device.  The pool keeps what is freed
 * while the call runs (its release threshold is the maximum); end_pool
 * gives it all back, so that a session holds no pool memory between calls.
 * Devices without pools take cudaMalloc in pooled calls too.
 */
static cudaMemPool_t device_pool[64];	/* the default pool of each device, once set up */
static bool pool_checked[64];
static cudaMemPool_t active_pool = nullptr;	/* while a pooled call runs */
static MemoryStats mem_stats;

MemoryStats &memory_stats() { return mem_stats; }

/* Gives back what the pool holds free; the frees are stream ordered, so the device is waited for first. */
static void trim(cudaMemPool_t p)
{
	if (cudaDeviceSynchronize() == cudaSuccess)
		cudaMemPoolTrimTo(p, 0);
	cudaGetLastError();
}

void begin_pool(int32_t device_id)
{
	if (device_id >= 0 && device_id < 64 && !pool_checked[device_id])
	{
		int			supported = 0;
		cudaMemPool_t p = nullptr;
		uint64_t	keep = UINT64_MAX;

		pool_checked[device_id] = true;
		if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device_id) == cudaSuccess &&
			supported && cudaDeviceGetDefaultMemPool(&p, device_id) == cudaSuccess &&
			cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
			device_pool[device_id] = p;
		cudaGetLastError();
	}
	active_pool = device_id >= 0 && device_id < 64 ? device_pool[device_id] : nullptr;
	if (active_pool)
		trim(active_pool);
}

void end_pool()
{
	if (active_pool)
		trim(active_pool);
	active_pool = nullptr;
}

void *device_alloc(size_t bytes, const char *what, bool *pooled)
{
	void *p = nullptr;
	Stopwatch sw;
	cudaMemPool_t pool = active_pool;
	cudaError_t err = pool ? cudaMallocAsync(&p, bytes, 0) : cudaMalloc(&p, bytes);

	if (err == cudaErrorMemoryAllocation && pool)
	{
		/* what the pool holds free may be in pieces too small: give it back and try again */
		cudaGetLastError();
		trim(pool);
		err = cudaMallocAsync(&p, bytes, 0);
	}
	if (err == cudaSuccess && !first_alloc_done)
	{
		first_alloc_done = true;
		note_init(GC_INIT_ALLOC, sw.ms());
	}
	mem_stats.allocs++;
	mem_stats.alloc_ms += sw.ms();

	if (err == cudaErrorMemoryAllocation)
	{
		size_t free_b = 0, total_b = 0;

		cudaGetLastError();
		cudaMemGetInfo(&free_b, &total_b);
		oom_bytes_needed = (int64_t) bytes;
		fail(GC_ERR_OUT_OF_MEMORY,
			 "could not allocate %zu bytes of device memory for %s (%zu bytes free of %zu)",
			 bytes, what, free_b, total_b);
	}
	if (err != cudaSuccess)
		fail_cuda(err, pool ? "cudaMallocAsync" : "cudaMalloc", __FILE__, __LINE__);
	*pooled = pool != nullptr;
	return p;
}

void device_free(void *p, bool pooled)
{
	Stopwatch	sw;

	if (pooled)
		cudaFreeAsync(p, 0);
	else
		cudaFree(p);
	mem_stats.frees++;
	mem_stats.free_ms += sw.ms();
}

void use_device(int32_t device_id)
{
	int count = 0;

	CUDA_TRY(cudaGetDeviceCount(&count));
	if (device_id < 0 || device_id >= count)
		fail(GC_ERR_NO_DEVICE, "device %d does not exist (%d device(s) found)", device_id, count);
	if (device_id < 64 && !context_ready[device_id])
	{
		Stopwatch sw;

		CUDA_TRY(cudaSetDevice(device_id));
		/* the primary context now, not inside the first kernel launch or allocation */
		CUDA_TRY(cudaFree(nullptr));
		context_ready[device_id] = true;
		note_init(GC_INIT_CONTEXT, sw.ms());
		return;
	}
	CUDA_TRY(cudaSetDevice(device_id));
}

} // namespace gc

extern "C" {

static const gc_error *api_last_error(void) { return gc::error_record(); }

static gc_status api_device_count(int32_t *count)
{
	GC_ENTRY_BEGIN
	int c = 0;
	cudaError_t err = cudaGetDeviceCount(&c);

	*count = 0;
	if (err != cudaSuccess)
	{
		cudaGetLastError();
		return gc::set_error(gc::status_of(err) == GC_ERR_CUDA ? GC_ERR_NO_DRIVER : gc::status_of(err),
							 "%s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
	}
	if (c == 0)
		return gc::set_error(GC_ERR_NO_DEVICE, "no CUDA device found");
	*count = c;
	GC_ENTRY_END
}

static gc_status api_device_info(int32_t device_id, gc_device_info *info)
{
	GC_ENTRY_BEGIN
	cudaDeviceProp prop;
	size_t free_b = 0, total_b = 0;

	gc::use_device(device_id);
	CUDA_TRY(cudaGetDeviceProperties(&prop, device_id));
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
	memset(info, 0, sizeof(*info));
	info->device_id = device_id;
	snprintf(info->name, sizeof(info->name), "%s", prop.name);
	info->total_memory = (int64_t) prop.totalGlobalMem;
	info->free_memory = (int64_t) free_b;
	info->cc_major = prop.major;
	info->cc_minor = prop.minor;
	GC_ENTRY_END
}

/* No device memory outlives an entry point; synchronize to be sure nothing runs. */
static void api_release(void)
{
	int dev = 0;

	if (cudaGetDevice(&dev) == cudaSuccess)
		cudaDeviceSynchronize();
	cudaGetLastError();
}

static const gc_backend_api the_api = {
	GC_ABI_VERSION,
	sizeof(gc_backend_api),
	"gpu",
	api_last_error,
	api_device_count,
	api_device_info,
	api_release,
	gcu_dbscan,
	gcu_kmeans,
	gcu_density_peaks,
	gcu_kmeans_assign,
	gcu_hdbscan,
};

__attribute__((visibility("default"))) const gc_backend_api *gpuclust_cuda_api(void)
{
	return &the_api;
}

} // extern "C"
