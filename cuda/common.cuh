/*
 * common.cuh
 *    Helpers shared by the CUDA sources of the GPU back end: error capture
 *    (CUDA_TRY, CHECK_LAUNCH), the per-thread last error, owned device
 *    buffers, timing, the tuning in force and the cancel check between
 *    launches.
 *
 * Nothing here throws across the C boundary: every entry point in the api
 * table catches everything (GC_ENTRY_BEGIN / GC_ENTRY_END) and returns a
 * gc_status.  Device memory is owned by DeviceBuffer, so every return path
 * frees it.
 */
#ifndef GPUCLUST_COMMON_CUH
#define GPUCLUST_COMMON_CUH

#include <cuda_runtime.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

#include "backend.h"
#include "checks.h"

namespace gc {

/* Sets the per-thread last-error message and returns status. */
gc_status set_error(gc_status status, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* The per-thread last error, for the checks of common/checks.h to write into. */
gc_error *error_record();
void clear_error();

/* Maps a CUDA runtime error to a status. */
gc_status status_of(cudaError_t err);

/* Thrown inside the back end only; converted to a status at the entry point. */
struct Failure
{
	gc_status status;
};

[[noreturn]] void fail(gc_status status, const char *fmt, ...)
#ifdef __GNUC__
	__attribute__((format(printf, 2, 3)))
#endif
	;

[[noreturn]] void fail_cuda(cudaError_t err, const char *what, const char *file, int line);

/* Device bytes asked for by the last failed allocation (for the OOM message). */
extern thread_local int64_t oom_bytes_needed;

} // namespace gc

/* Wraps a CUDA runtime call; a failure names the step and CUDA's error string. */
#define CUDA_TRY(call) \
	do { \
		cudaError_t gc_err_ = (call); \
		if (gc_err_ != cudaSuccess) \
			::gc::fail_cuda(gc_err_, #call, __FILE__, __LINE__); \
	} while (0)

/* After every kernel launch. */
#define CHECK_LAUNCH(name) \
	do { \
		cudaError_t gc_err_ = cudaGetLastError(); \
		if (gc_err_ != cudaSuccess) \
			::gc::fail_cuda(gc_err_, "launch of " name, __FILE__, __LINE__); \
	} while (0)

/* Opens and closes the body of an api entry point. */
#define GC_ENTRY_BEGIN \
	::gc::clear_error(); \
	try {
#define GC_ENTRY_END \
	} catch (const ::gc::Failure &f_) { \
		return f_.status; \
	} catch (const std::bad_alloc &) { \
		return ::gc::set_error(GC_ERR_OUT_OF_MEMORY, "out of host memory in the GPU back end"); \
	} catch (...) { \
		return ::gc::set_error(GC_ERR_INTERNAL, "unexpected exception in the GPU back end"); \
	} \
	return GC_OK;

namespace gc {

/*
 * Sets the device for this call and checks that it exists.  The first time
 * in the process for a device it also creates the device's primary context
 * (cudaFree(nullptr)), timed as the start-up's context part.
 */
void use_device(int32_t device_id);

/*
 * The GPU start-up paid since the last take_init (gc_init_part of
 * common/backend.h): note_init adds ms to a part, take_init adds what was
 * noted to timing->init_ms and forgets it, drop_init forgets it.  One
 * record per process: a PostgreSQL backend runs one call at a time.
 */
void note_init(gc_init_part part, double ms);
void take_init(gc_timing *timing);
void drop_init();

/* Raises GC_ERR_CANCELLED when the caller asks to stop. */
inline void check_cancel(gc_cancel_fn cancel, void *arg)
{
	if (cancel && cancel(arg))
		fail(GC_ERR_CANCELLED, "canceled");
}

/* Raises GC_ERR_CANCELLED when the caller of this entry point asks to stop. */
inline void check_cancel(const gc_exec &ex)
{
	check_cancel(ex.cancel, ex.cancel_arg);
}

/*
 * Waits for the work queued so far, then asks the caller: between launches
 * cut to tens of milliseconds, a cancel is answered within about that (a
 * check without the wait would run ahead of the queued launches).
 */
inline void check_cancel_synced(const gc_exec &ex)
{
	CUDA_TRY(cudaDeviceSynchronize());
	check_cancel(ex);
}

/* The tuning in force: the caller's, or the defaults when it passed none. */
inline gc_tuning tuning_of(const gc_exec &ex)
{
	if (ex.tuning && ex.tuning->struct_size == sizeof(gc_tuning) &&
		ex.tuning->version == GC_TUNING_VERSION)
		return *ex.tuning;
	return gc_tuning_defaults();
}

/* Raises the status of a check of common/checks.h, its words already in the last error. */
inline void require(gc_status status)
{
	if (status != GC_OK)
		throw Failure{status};
}

/* Milliseconds of host wall clock. */
class Stopwatch
{
  public:
	Stopwatch() : t0_(std::chrono::steady_clock::now()) {}
	double ms() const
	{
		return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
	}
	void restart() { t0_ = std::chrono::steady_clock::now(); }

  private:
	std::chrono::steady_clock::time_point t0_;
};

/*
 * Allocates device memory: from the device's stream-ordered pool in a pooled
 * call (*pooled set), else by cudaMalloc (see cuda/api.cu); an out-of-memory
 * names how much was needed.  device_free gives it back the way it came.
 * begin_pool and end_pool bracket a pooled call (run_on_device).
 */
void *device_alloc(size_t bytes, const char *what, bool *pooled);
void device_free(void *p, bool pooled);
void begin_pool(int32_t device_id);
void end_pool();

/* Allocations and frees of the call so far, and their host milliseconds (for the debug lines). */
struct MemoryStats
{
	int64_t		allocs;
	int64_t		frees;
	double		alloc_ms;
	double		free_ms;
};
MemoryStats &memory_stats();

/* An owned device array of T; freed when it goes out of scope. */
template <typename T>
class DeviceBuffer
{
  public:
	DeviceBuffer() = default;
	DeviceBuffer(size_t count, const char *what) { reset(count, what); }
	~DeviceBuffer() { release(); }
	DeviceBuffer(const DeviceBuffer &) = delete;
	DeviceBuffer &operator=(const DeviceBuffer &) = delete;
	DeviceBuffer(DeviceBuffer &&o) noexcept : p_(o.p_), n_(o.n_), pooled_(o.pooled_)
	{
		o.p_ = nullptr;
		o.n_ = 0;
	}
	DeviceBuffer &operator=(DeviceBuffer &&o) noexcept
	{
		std::swap(p_, o.p_);
		std::swap(n_, o.n_);
		std::swap(pooled_, o.pooled_);
		return *this;
	}

	void reset(size_t count, const char *what)
	{
		release();
		if (count > 0)
			p_ = static_cast<T *>(device_alloc(count * sizeof(T), what, &pooled_));
		n_ = count;
	}
	void release()
	{
		if (p_)
			device_free(p_, pooled_);
		p_ = nullptr;
		n_ = 0;
	}
	T *get() const { return p_; }
	size_t size() const { return n_; }
	size_t bytes() const { return n_ * sizeof(T); }

  private:
	T *p_ = nullptr;
	size_t n_ = 0;
	bool pooled_ = false;
};

} // namespace gc

/* The algorithm entry points behind the api table (one .cu each). */
extern "C" {
gc_status gcu_dbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
					 const gc_dbscan_params *params, gc_dbscan_result *result);
gc_status gcu_kmeans(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
					 const gc_kmeans_params *params, gc_kmeans_result *result);
gc_status gcu_kmeans_assign(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
						   const gc_kmeans_assign_params *params, gc_kmeans_assign_result *result);
gc_status gcu_density_peaks(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
							const gc_dpeaks_params *params, gc_dpeaks_result *result);
gc_status gcu_hdbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
					  const gc_hdbscan_params *params, gc_hdbscan_result *result);
}

#endif /* GPUCLUST_COMMON_CUH */
