/*
 * copy.cu
 *    Large copies between the caller's pageable memory and the device
 *    through pinned staging buffers, on a few host threads.
 *
 * cudaMemcpy from pageable memory stages through the driver's own pinned
 * buffers with one host thread doing the memcpy, about 5 GB/s on the H100
 * machine, where the bus takes 25 GB/s or more from pinned memory.  Here
 * each of up to kThreads threads copies its own contiguous share of the
 * bytes in pieces of kPiece through two pinned buffers of its own and its
 * own stream: one piece crosses the bus while the thread copies the next
 * (or the last) between the caller's memory and the other buffer.  The
 * threads run with every signal blocked and call nothing of PostgreSQL.
 *
 * The pinned buffers (kThreads * 2 * kPiece, 64 MiB) are allocated at the
 * first copy of kStagedMin bytes or more and kept for the life of the
 * process, so that only that first copy pays for pinning them.  So are the
 * threads' streams and events: all kThreads of them, made for a device at
 * its first staged copy, whatever that copy's number of threads.  Streams
 * made and destroyed in every copy left the driver's own device memory for
 * them to grow by 2 MiB at a time whenever a copy ran on more threads at
 * once than any before it (issue 42: a cancelled DBSCAN of 10M double rows,
 * 160 MB on 8 threads after 80 MB float uploads on 4, ended with 2 MiB less
 * free device memory); now that memory is taken once, at the first staged
 * copy, and every later copy of any size uses the same streams.  Smaller
 * copies, and every copy when the buffers or streams cannot be had, take
 * cudaMemcpy.
 *
 * Copies are short (tens of milliseconds for gigabytes); no cancel is asked
 * while one runs.
 */
#include "entry.cuh"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <mutex>
#include <thread>
#include <vector>

namespace gc {
namespace {

constexpr int kThreads = 8;
constexpr size_t kPiece = (size_t) 4 << 20;
constexpr size_t kStagedMin = (size_t) 64 << 20;

constexpr int kMaxDevices = 64;

/* One copy thread's stream and the events of its two buffers, on one device. */
struct Lane
{
	cudaStream_t s = nullptr;
	cudaEvent_t ev[2] = {nullptr, nullptr};
};

struct Staging
{
	std::mutex	mu;
	bool		tried = false;
	char	   *buf = nullptr;	/* [kThreads][2][kPiece] pinned, or null */
	bool		lanes_tried[kMaxDevices] = {};
	bool		lanes_ok[kMaxDevices] = {};
	Lane		lanes[kMaxDevices][kThreads];	/* made once per device, kept for the process */
};

Staging staging;

/*
 * The streams and events of every copy thread on device (the current one),
 * all kThreads made at once; false where they cannot be had (what was made
 * is destroyed, and the copies of that device take cudaMemcpy).
 */
bool make_lanes(int device)
{
	Lane	   *l = staging.lanes[device];
	cudaError_t e = cudaSuccess;

	for (int t = 0; t < kThreads && e == cudaSuccess; t++)
	{
		e = cudaStreamCreateWithFlags(&l[t].s, cudaStreamNonBlocking);
		for (int b = 0; b < 2 && e == cudaSuccess; b++)
			e = cudaEventCreateWithFlags(&l[t].ev[b], cudaEventDisableTiming);
	}
	if (e == cudaSuccess)
		return true;
	(void) cudaGetLastError();	/* the error is not the call's: it copies without */
	for (int t = 0; t < kThreads; t++)
	{
		for (int b = 0; b < 2; b++)
			if (l[t].ev[b])
				cudaEventDestroy(l[t].ev[b]);
		if (l[t].s)
			cudaStreamDestroy(l[t].s);
		l[t] = Lane();
	}
	return false;
}

/*
 * The pinned buffers, allocated at the first call, and the lanes of device
 * (the current one), made at its first call; null where either cannot be had.
 */
char *staging_buffers(int device)
{
	std::lock_guard<std::mutex> lock(staging.mu);

	if (!staging.tried)
	{
		void	   *p = nullptr;

		staging.tried = true;
		if (cudaHostAlloc(&p, (size_t) kThreads * 2 * kPiece, cudaHostAllocPortable) == cudaSuccess)
			staging.buf = (char *) p;
		else
			(void) cudaGetLastError();	/* the error is not the call's: it copies without */
	}
	if (!staging.buf || device < 0 || device >= kMaxDevices)
		return nullptr;
	if (!staging.lanes_tried[device])
	{
		staging.lanes_tried[device] = true;
		staging.lanes_ok[device] = make_lanes(device);
	}
	return staging.lanes_ok[device] ? staging.buf : nullptr;
}

/* The threads to use for bytes: one per 16 MiB, at most kThreads and the CPUs this process may use. */
int copy_threads(const Call &call, size_t bytes)
{
	int			cpus = 1;
	cpu_set_t	set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpus = CPU_COUNT(&set);
	if (call.tuning.cpu_threads > 0)
		cpus = std::min(cpus, call.tuning.cpu_threads);
	return (int) std::max<size_t>(1, std::min<size_t>({(size_t) kThreads, (size_t) cpus, bytes / ((size_t) 16 << 20)}));
}

/*
 * One thread's share [from, to) of a copy, through its buffers buf [2][kPiece]
 * on its lane (stream and events): to the device (dev is dst) or from it
 * (dev is src).
 */
cudaError_t copy_share(int device, bool to_device, char *host, char *dev, size_t from, size_t to, char *buf,
					   const Lane &lane)
{
	cudaStream_t s = lane.s;
	const cudaEvent_t *ev = lane.ev;
	cudaError_t e = cudaSetDevice(device);

	size_t		pending_at = 0,
				pending_len = 0;	/* (from the device) the piece in the other buffer, not yet copied out */
	int			j = 0;

	for (size_t at = from; at < to && e == cudaSuccess; at += kPiece, j++)
	{
		const size_t len = std::min(kPiece, to - at);
		char	   *pin = buf + (size_t) (j & 1) * kPiece;

		if (to_device)
		{
			/* the buffer's last piece must have crossed before it is refilled */
			if (j >= 2)
				e = cudaEventSynchronize(ev[j & 1]);
			if (e != cudaSuccess)
				break;
			memcpy(pin, host + at, len);
			e = cudaMemcpyAsync(dev + at, pin, len, cudaMemcpyHostToDevice, s);
			if (e == cudaSuccess)
				e = cudaEventRecord(ev[j & 1], s);
		}
		else
		{
			e = cudaMemcpyAsync(pin, dev + at, len, cudaMemcpyDeviceToHost, s);
			if (e == cudaSuccess)
				e = cudaEventRecord(ev[j & 1], s);
			if (e == cudaSuccess && pending_len > 0)
			{
				e = cudaEventSynchronize(ev[(j - 1) & 1]);
				if (e == cudaSuccess)
					memcpy(host + pending_at, buf + (size_t) ((j - 1) & 1) * kPiece, pending_len);
			}
			pending_at = at;
			pending_len = len;
		}
	}
	if (e == cudaSuccess && !to_device && pending_len > 0)
	{
		e = cudaEventSynchronize(ev[(j - 1) & 1]);
		if (e == cudaSuccess)
			memcpy(host + pending_at, buf + (size_t) ((j - 1) & 1) * kPiece, pending_len);
	}
	/* the lane is the next copy's: nothing of this one may still run on it */
	if (s)
	{
		cudaError_t w = cudaStreamSynchronize(s);

		if (e == cudaSuccess)
			e = w;
	}
	return e;
}

void copy(const Call &call, bool to_device, void *host, void *dev, size_t bytes)
{
	const cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
	const int	device = call.exec.device_id;
	char	   *buf = bytes >= kStagedMin ? staging_buffers(device) : nullptr;

	if (!buf)
	{
		CUDA_TRY(to_device ? cudaMemcpy(dev, host, bytes, kind) : cudaMemcpy(host, dev, bytes, kind));
		return;
	}

	/* the kernels that wrote dev, on whatever stream, are done before its bytes are read */
	if (!to_device)
		CUDA_TRY(cudaDeviceSynchronize());

	const int	threads = copy_threads(call, bytes);
	const Lane *lanes = staging.lanes[device];
	std::vector<cudaError_t> status((size_t) threads, cudaSuccess);
	std::vector<std::thread> pool;
	sigset_t	all,
				old;
	/* shares of whole pieces, so that no piece is split between two threads */
	const size_t pieces = (bytes + kPiece - 1) / kPiece;
	auto		share = [&](int t, size_t &from, size_t &to) {
		from = std::min(bytes, pieces * (size_t) t / (size_t) threads * kPiece);
		to = std::min(bytes, pieces * (size_t) (t + 1) / (size_t) threads * kPiece);
	};
	int			started = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int t = 1; t < threads; t++)
	{
		size_t		from,
					to;

		share(t, from, to);
		try
		{
			pool.emplace_back([&, t, from, to] {
				status[(size_t) t] = copy_share(device, to_device, (char *) host, (char *) dev, from, to,
												buf + (size_t) t * 2 * kPiece, lanes[t]);
			});
			started++;
		}
		catch (...)
		{
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	/* this thread's share, and that of each thread that could not be started */
	for (int t = 0; t < threads; t++)
		if (t == 0 || t > started)
		{
			size_t		from,
						to;

			share(t, from, to);
			if (status[0] == cudaSuccess)
				status[0] = copy_share(device, to_device, (char *) host, (char *) dev, from, to, buf, lanes[0]);
		}
	for (auto &th : pool)
		th.join();
	for (cudaError_t e : status)
		CUDA_TRY(e);
}

} // namespace

void copy_to_device(const Call &call, void *dst, const void *src, size_t bytes)
{
	if (bytes > 0)
		copy(call, true, const_cast<void *>(src), dst, bytes);
}

void copy_to_host(const Call &call, void *dst, const void *src, size_t bytes)
{
	if (bytes > 0)
		copy(call, false, dst, const_cast<void *>(src), bytes);
}

} // namespace gc
