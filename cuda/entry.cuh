/*
 * entry.cuh
 *    The frame that the algorithm entry points of the GPU back end share
 *    (gcu_dbscan in cuda/dbscan.cu, gcu_density_peaks in cuda/dpeaks.cu):
 *    the call's exec record, tuning and timing, the device it runs on, the
 *    bytes asked for when device memory runs out, the points uploaded and
 *    the results copied back (cuda/copy.cu), and the dispatch of a templated kernel on the
 *    number of dimensions.
 */
#ifndef GPUCLUST_ENTRY_CUH
#define GPUCLUST_ENTRY_CUH

#include "common.cuh"

#include <algorithm>
#include <initializer_list>
#include <type_traits>

namespace gc {

/*
 * The exec record and the tuning it points to must be of this build (a bug
 * otherwise), as the CPU back end requires; a caller may pass none.
 */
inline const gc_exec &checked_exec(const gc_exec &exec)
{
	require(gc_check_version("gc_exec", exec.struct_size, sizeof(gc_exec), error_record()));
	if (exec.tuning)
		require(gc_check_version("gc_tuning", exec.tuning->struct_size, sizeof(gc_tuning),
								 error_record()));
	return exec;
}

/*
 * The result struct, and the input rows when n > 0, must be there; n must
 * be known (the checks of common/checks.h let n < 0 pass for the glue).
 * Otherwise a bug of the caller, in the words of the CPU back end.
 * result_ok: the result struct and, when n > 0, its arrays.
 */
inline void require_buffers(const char *algorithm, const void *x, int64_t n, bool result_ok)
{
	if (n < 0)
		fail(GC_ERR_INTERNAL, "%s called with %lld rows", algorithm, (long long) n);
	if (!result_ok)
		fail(GC_ERR_INTERNAL, "%s result is missing", algorithm);
	if (n > 0 && !x)
		fail(GC_ERR_INTERNAL, "%s input rows are missing", algorithm);
}

/*
 * One call of an algorithm entry point: the exec record (a default one,
 * device 0, when the caller passes none), the tuning in force, and the
 * timing (the caller's, or a local one when it wants none), zeroed.
 * Neither copied nor moved: exec and timing may point into it.
 */
class Call
{
  private:
	gc_exec		none_ = {sizeof(gc_exec), 0, nullptr, nullptr, nullptr, nullptr};
	gc_timing	local_;

  public:
	explicit Call(const gc_exec *e)
		: exec(e ? checked_exec(*e) : none_), tuning(tuning_of(exec)),
		  timing(exec.timing ? exec.timing : &local_)
	{
		memset(timing, 0, sizeof(*timing));
	}
	Call(const Call &) = delete;
	Call &operator=(const Call &) = delete;

	/* Raises GC_ERR_CANCELLED when the caller asks to stop. */
	void check_cancel() const { gc::check_cancel(exec); }

	const gc_exec &exec;
	const gc_tuning tuning;
	gc_timing *const timing;
};

/* Runs phase, adding its time to ms. */
template <typename Phase>
void timed(double &ms, Phase &&phase)
{
	Stopwatch	sw;

	phase();
	ms += sw.ms();
}

/* A pooled call's pool, from construction to destruction, however the call ends. */
class PoolScope
{
  public:
	PoolScope(bool on, int32_t device_id) : on_(on)
	{
		if (on_)
			begin_pool(device_id);
	}
	~PoolScope()
	{
		if (on_)
			end_pool();
	}
	PoolScope(const PoolScope &) = delete;
	PoolScope &operator=(const PoolScope &) = delete;

  private:
	bool		on_;
};

/*
 * Runs the algorithm on the call's device; the GPU start-up it paid (the
 * first call of the process) goes to timing->init_ms.  When device memory runs out,
 * timing->bytes_needed says the larger of the estimate and the allocation
 * that failed.  pooled: its device memory comes from the device's pool
 * (cuda/api.cu), given back when it ends; for an algorithm of many
 * buffers a call (HDBSCAN), where cudaMalloc and cudaFree cost milliseconds.
 * With backend debugging on, the allocations and their time go to stderr.
 */
template <typename Run>
void run_on_device(const Call &call, Run &&run, bool pooled = false)
{
	/* the start-up this call pays goes to its timing->init_ms, not what device_info paid */
	drop_init();
	memory_stats() = MemoryStats{};
	try
	{
		use_device(call.exec.device_id);

		PoolScope	scope(pooled, call.exec.device_id);

		run();
	}
	catch (const Failure &f)
	{
		take_init(call.timing);
		if (f.status == GC_ERR_OUT_OF_MEMORY)
			call.timing->bytes_needed = std::max<int64_t>(call.timing->bytes_needed, oom_bytes_needed);
		throw;
	}
	take_init(call.timing);
	if (call.tuning.debug)
	{
		const MemoryStats &m = memory_stats();

		fprintf(stderr, "gpuclust: device memory%s: %lld allocations, %.3f ms; %lld frees, %.3f ms\n",
				pooled ? " (pooled)" : "", (long long) m.allocs, m.alloc_ms, (long long) m.frees, m.free_ms);
	}
}

/*
 * Raises GC_ERR_OUT_OF_MEMORY, saying how much is needed, when the device
 * has less than need bytes free; records need in timing->bytes_needed.
 */
inline void require_device_memory(const Call &call, int64_t need, const char *algorithm,
								  int64_t n, int32_t d)
{
	size_t		free_b = 0,
				total_b = 0;

	call.timing->bytes_needed = need;
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
	if ((uint64_t) need > free_b)
	{
		oom_bytes_needed = need;
		fail(GC_ERR_OUT_OF_MEMORY,
			 "%s of %lld points of dimension %d needs about %lld bytes of device memory, "
			 "%zu bytes are free of %zu", algorithm, (long long) n, d, (long long) need,
			 free_b, total_b);
	}
}

/*
 * bytes from the caller's pageable host memory src to the device at dst,
 * and back: large copies go through pinned staging buffers on a few host
 * threads (cuda/copy.cu).  copy_to_host waits for the device first.
 */
void copy_to_device(const Call &call, void *dst, const void *src, size_t bytes);
void copy_to_host(const Call &call, void *dst, const void *src, size_t bytes);

/*
 * The caller's points [n, d] of element type T in a new device buffer.
 * timing->to_device_ms is the time since the call's run began (since), the
 * copy included.
 */
template <typename T>
DeviceBuffer<T> upload_points(const Call &call, const Stopwatch &since,
							  const T *x, /* [n, d] host */
							  int64_t n, int32_t d)
{
	DeviceBuffer<T> dev((size_t) n * d, "the points");

	call.check_cancel();
	copy_to_device(call, dev.get(), x, dev.bytes());
	call.timing->to_device_ms = since.ms();
	return dev;
}

/* One result array to copy back: bytes from device src to the caller's host dst. */
struct ResultCopy
{
	void	   *dst;
	const void *src;
	size_t		bytes;
};

/* Copies the results to the caller's buffers, timed as timing->from_device_ms. */
inline void copy_results(const Call &call, std::initializer_list<ResultCopy> copies)
{
	Stopwatch	sw;

	for (const ResultCopy &c : copies)
		copy_to_host(call, c.dst, c.src, c.bytes);
	call.timing->from_device_ms = sw.ms();
}

/* Calls f with the dimension d as a compile-time constant for d <= 3, 0 (any d) otherwise. */
template <typename F>
void by_dim(int d, F &&f)
{
	switch (d)
	{
		case 1:
			f(std::integral_constant<int, 1>());
			break;
		case 2:
			f(std::integral_constant<int, 2>());
			break;
		case 3:
			f(std::integral_constant<int, 3>());
			break;
		default:
			f(std::integral_constant<int, 0>());
			break;
	}
}

} // namespace gc

#endif /* GPUCLUST_ENTRY_CUH */
