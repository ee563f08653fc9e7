/*
 * gpu.c
 *    Loading the GPU back end (gpuclust_cuda.so) lazily, in the backend
 *    process, on first GPU use.
 *
 * Nothing here runs in the postmaster or in _PG_init: CUDA does not survive
 * fork().  When the GPU service runs (gpuclust in shared_preload_libraries,
 * service.c), backends get its proxy instead and only the service loads the
 * back end, through the same code.  A back end that was not built, is not installed, cannot be loaded
 * (no driver library) or finds no device is an ordinary "no GPU" answer with
 * a reason, never a crash.  The answer is kept for the life of the backend.
 *
 * The driver is asked first, alone (DriverProbe: libcuda.so.1, cuInit,
 * cuDeviceGetCount), and the back end, which brings the CUDA runtime (cuBLAS
 * only at the first k-means product: cuda/kmeans_product.cu), is loaded
 * only when a device is there.  So on a server without a driver the first
 * GPU-sized call of a backend costs one dlopen that fails, and on one with a
 * driver but no device the driver's own initialization.  The time of both
 * steps goes to the first GPU call's timing (GcGpuTakeInit), with the
 * back end's own start-up (the context, cuBLAS, the first allocation).
 */
#include "postgres.h"

#include <dlfcn.h>
#include <unistd.h>

#include "miscadmin.h"
#include "portability/instr_time.h"

#include "gpuclust.h"
#include "gpu.h"
#include "service.h"

static bool gpu_tried = false;
/* The start-up the glue paid (GC_INIT_DRIVER, GC_INIT_LOAD), until a GPU call reports it. */
static double gpu_init_ms[GC_INIT_PARTS];
static const gc_backend_api *gpu_api = NULL;
static gc_status gpu_why = GC_ERR_NOT_BUILT;
static char gpu_reason[512];

#ifdef GC_HAVE_CUDA
/* The driver API's entry points the probe uses (cuda.h's signatures; CUresult is an int). */
typedef int (*GcCuInitFn) (unsigned int flags);
typedef int (*GcCuDeviceGetCountFn) (int *count);
typedef int (*GcCuGetErrorStringFn) (int error, const char **text);

#define GC_CUDA_ERROR_NO_DEVICE 100	/* CUDA_ERROR_NO_DEVICE of cuda.h */

/*
 * Whether the NVIDIA driver sees a device, asked of the driver library alone
 * (libcuda.so.1), before the back end is loaded.  When it does not, sets
 * gpu_why and gpu_reason and returns false.  The library stays loaded when
 * it initialized: the back end's runtime uses the same one.
 */
static bool
DriverProbe(void)
{
	void	   *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	GcCuInitFn	cu_init;
	GcCuDeviceGetCountFn cu_count;
	GcCuGetErrorStringFn cu_error;
	const char *text = NULL;
	int			count = 0;
	int			rc;

	if (h == NULL)
	{
		gpu_why = GC_ERR_NO_DRIVER;
		snprintf(gpu_reason, sizeof(gpu_reason),
				 "No usable NVIDIA driver: the driver library libcuda.so.1 could not be loaded (%s).",
				 dlerror());
		return false;
	}
	cu_init = (GcCuInitFn) dlsym(h, "cuInit");
	cu_count = (GcCuDeviceGetCountFn) dlsym(h, "cuDeviceGetCount");
	cu_error = (GcCuGetErrorStringFn) dlsym(h, "cuGetErrorString");
	if (cu_init == NULL || cu_count == NULL)
	{
		gpu_why = GC_ERR_NO_DRIVER;
		snprintf(gpu_reason, sizeof(gpu_reason),
				 "No usable NVIDIA driver: libcuda.so.1 lacks cuInit or cuDeviceGetCount.");
		dlclose(h);
		return false;
	}
	/*
	 * Kernels load when first launched, not all of the back end's modules
	 * with the context (the CUDA runtime's default since 12.2; said here for
	 * older drivers and runtimes, unless the server's environment chose).
	 * The driver reads it at cuInit.
	 */
	setenv("CUDA_MODULE_LOADING", "LAZY", 0);
	rc = cu_init(0);
	if (rc == 0)
		rc = cu_count(&count);
	if (rc == 0 && count > 0)
		return true;
	if (rc != 0 && cu_error != NULL)
		cu_error(rc, &text);
	gpu_why = rc == 0 || rc == GC_CUDA_ERROR_NO_DEVICE ? GC_ERR_NO_DEVICE : GC_ERR_NO_DRIVER;
	if (rc == 0)
		snprintf(gpu_reason, sizeof(gpu_reason), "No CUDA device: the NVIDIA driver sees none.");
	else
		snprintf(gpu_reason, sizeof(gpu_reason), "%s: the NVIDIA driver answered error %d (%s).",
				 gpu_why == GC_ERR_NO_DEVICE ? "No CUDA device" : "No usable NVIDIA driver",
				 rc, text ? text : "no description");
	return false;
}
#endif

/* Opens the back end once and asks it for a device. */
static void
GpuLoad(void)
{
#ifndef GC_HAVE_CUDA
	gpu_why = GC_ERR_NOT_BUILT;
	snprintf(gpu_reason, sizeof(gpu_reason),
			 "gpuclust was built without the GPU back end (USE_CUDA=0, or nvcc was not found).");
#else
	char		path[MAXPGPATH];
	void	   *handle;
	gc_cuda_api_fn fn;
	const gc_backend_api *api;
	int32		count = 0;
	gc_status	st;
	instr_time	t0;
	instr_time	t1;

	snprintf(path, sizeof(path), "%s/gpuclust_cuda%s", pkglib_path, DLSUFFIX);
	if (access(path, R_OK) != 0)
	{
		gpu_why = GC_ERR_NOT_BUILT;
		snprintf(gpu_reason, sizeof(gpu_reason),
				 "The GPU back end \"%s\" is not installed.", path);
		return;
	}
	INSTR_TIME_SET_CURRENT(t0);
	if (!DriverProbe())
		return;
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	gpu_init_ms[GC_INIT_DRIVER] = INSTR_TIME_GET_MILLISEC(t1);
	INSTR_TIME_SET_CURRENT(t0);
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL)
	{
		gpu_why = GC_ERR_NO_DRIVER;
		snprintf(gpu_reason, sizeof(gpu_reason),
				 "The GPU back end could not be loaded: %s.", dlerror());
		return;
	}
	fn = (gc_cuda_api_fn) dlsym(handle, GC_CUDA_API_SYMBOL);
	api = fn ? fn() : NULL;
	if (api == NULL || api->abi_version != GC_ABI_VERSION ||
		api->struct_size != sizeof(gc_backend_api))
	{
		gpu_why = GC_ERR_NOT_BUILT;
		snprintf(gpu_reason, sizeof(gpu_reason),
				 "The GPU back end \"%s\" does not match this version of gpuclust; reinstall it.", path);
		return;
	}
	st = api->device_count(&count);
	if (st != GC_OK)
	{
		gpu_why = st;
		snprintf(gpu_reason, sizeof(gpu_reason), "%s: %s.",
				 st == GC_ERR_NO_DEVICE ? "No CUDA device" : "No usable NVIDIA driver",
				 api->last_error()->message);
		return;
	}
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	gpu_init_ms[GC_INIT_LOAD] = INSTR_TIME_GET_MILLISEC(t1);
	gpu_why = GC_OK;
	gpu_api = api;
#endif
}

/*
 * The back end's api table, or NULL with the reason (a sentence for DETAIL)
 * and a status saying which it was: not built, no driver, no device.
 */
const gc_backend_api *
GcGpuApi(char *reason, size_t reasonlen, gc_status *why)
{
	/* with the GPU service, a backend sends its GPU calls there and never loads CUDA */
	if (GcServiceEnabled())
		return GcServiceApi(reason, reasonlen, why);
	if (!gpu_tried)
	{
		gpu_tried = true;
		GpuLoad();
	}
	if (why)
		*why = gpu_why;
	if (reason && reasonlen > 0)
		strlcpy(reason, gpu_api ? "" : gpu_reason, reasonlen);
	return gpu_api;
}

/*
 * Adds the start-up the glue paid loading the back end (the driver's
 * cuInit, the back end's dlopen) to init_ms[GC_INIT_PARTS], once: the first
 * GPU call of the backend reports it.
 */
void
GcGpuTakeInit(double *init_ms)
{
	for (int i = 0; i < GC_INIT_PARTS; i++)
	{
		init_ms[i] += gpu_init_ms[i];
		gpu_init_ms[i] = 0.0;
	}
}

/* Memory-context reset callback: the back end lets go of its device memory. */
void
GcGpuReleaseCallback(void *arg)
{
	const gc_backend_api *api = (const gc_backend_api *) arg;

	if (api && api->release)
		api->release();
}
