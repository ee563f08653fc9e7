/*
 * service_main.c
 *    The GPU service: the background worker that loads the back end once,
 *    keeps it for the life of the server and runs the requests of every
 *    backend (service_shm.h says how they travel, service.c is the
 *    backends' side).
 *
 * One main loop and a few worker threads per device.  The main loop is the
 * only part that calls PostgreSQL: it takes new requests from the slots,
 * attaches their DSM segments, admits them while a worker thread and the
 * device-memory budget allow, hands the thread plain pointers into the
 * segment, and when the thread is done detaches and sets the backend's
 * latch.
 *
 * The queue is fair: round-robin over sessions.  The next request admitted
 * is one of the session served least recently (a session never served
 * first), a session's own requests in their order of arrival; a parallel
 * worker's requests count as its leader's.  A request that does not fit
 * keeps what is behind it from jumping ahead on its device (on every
 * device when it may run on any), so a large request is not starved by
 * small ones.  A request whose session did not set gpuclust.device_id goes
 * to the least loaded device that has a worker thread free and the request's
 * memory estimate within its budget: the least share of the budget
 * reserved, then the fewest requests running, then the lowest number.  The
 * answers do not depend on the device.  The threads run the back end's
 * entry point and nothing else; they tell the main loop they finished by
 * writing a byte into a pipe that the main loop waits on with its latch.
 * The back end's cancel callback reads the slot's cancel flag.
 *
 * With gpuclust.service_backend = 'gpu' (the default) the back end is
 * gpuclust_cuda.so, loaded here and in no other process of the server; its
 * entry points run one at a time (every kernel of the back end runs on the
 * legacy default stream, which serializes the device's work anyway).  With
 * 'cpu' the CPU back end stands in for it behind the same protocol, for
 * tests on machines without a GPU, as gpuclust.service_test_devices
 * devices.
 *
 * At start, before it takes requests, the service makes a small call of
 * every entry point on each device (WarmUp), so that what the back end
 * sets up on first use (the device's memory pool, cuBLAS with its handle
 * and first products for k-means above 32 dimensions, the first
 * allocation) is paid once by the service and by no session's call.
 *
 * A CUDA error that leaves the device unusable (the device no longer
 * answers after a failed call) fails every open request and ends the
 * service with exit status 1: the postmaster starts it again after
 * bgw_restart_time, without restarting the server.  The request whose
 * call broke the context gets its CUDA error; every other open request,
 * and any that a worker thread would start after it, the status
 * GC_ERR_UNAVAILABLE ("lost its GPU context"), on which device auto
 * computes on the CPU.  gpuclust.service_test_fault (tests) breaks the
 * context on purpose: the request runs a kernel that writes to an
 * illegal address (gpuclust_cuda_test_fault of cuda/service_fault.cu),
 * or on the CPU stand-in a simulated CUDA error that the service treats
 * the same way.
 */
#include "postgres.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "miscadmin.h"
#include "params.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include "gpu.h"
#include "service.h"
#include "service_shm.h"

/* One request handed to a worker thread: plain pointers only. */
typedef struct SvcJob
{
	int			slot;			/* index in gc_service->slots */
	dsm_segment *seg;			/* the main loop's mapping (the thread does not touch it) */
	GcSvcRequest *req;			/* the head of the segment */
	char	   *base;
	volatile int *cancel;		/* the slot's cancel flag */
} SvcJob;

typedef struct SvcThread
{
	pthread_t	tid;
	int			device;
	SvcJob	   *job;			/* NULL: idle */
	bool		done;			/* the job finished; the main loop takes it */
	bool		context_lost;	/* the device no longer answers after the job */
	bool		have_info;		/* info was read after the job */
	gc_device_info info;
} SvcThread;

static const gc_backend_api *svc_api = NULL;
static bool svc_serial = false;	/* the back end's entry points run one at a time */
static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;	/* guards threads[] and the job handoff */
static pthread_cond_t svc_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t svc_api_mu = PTHREAD_MUTEX_INITIALIZER;
static SvcThread *threads = NULL;
static int	nthreads = 0;
static volatile int svc_stopping = 0;

/*
 * Set (under svc_mu) by the worker thread whose call broke the device
 * context; svc_lost_error is that call's error message.  No call starts on
 * the back end after it.
 */
static volatile int svc_context_lost = 0;
static char svc_lost_error[GC_ERROR_TEXT];

/*
 * The GPU back end's test-only entry point (cuda/service_fault.cu): a
 * kernel that writes to an illegal address on the device, which breaks
 * the context; returns GC_ERR_CUDA with the error in last_error().  Read
 * with dlsym from gpuclust_cuda.so, which GcGpuApi loaded.
 */
typedef gc_status (*GcTestFaultFn) (int32_t device_id);
#define GC_CUDA_TEST_FAULT_SYMBOL "gpuclust_cuda_test_fault"
static GcTestFaultFn svc_test_fault = NULL;
static int	wake_pipe[2] = {-1, -1};
/* the segments attached in the main loop, per slot */
static dsm_segment **attached = NULL;
/* per slot: Schedule tried to attach its segment in this pass */
static bool *attach_tried = NULL;

/*
 * When each session was last served (admitted), for the queue's turns: one
 * entry per session, as many as there are slots; when full, the entry
 * served longest ago makes room (a session without an entry counts as
 * never served, which orders it where its entry would have been).
 */
typedef struct SvcSession
{
	int			session;		/* 0: unused */
	uint64		served;			/* svc_serve_clock at its last admission */
} SvcSession;

static SvcSession *sessions = NULL;
static uint64 svc_serve_clock = 0;

/* ----------------------------------------------------------------- threads */

/* The back end's cancel callback: the backend's flag, or the service stopping. */
static int
JobCancelled(void *arg)
{
	SvcJob	   *job = (SvcJob *) arg;

	return *job->cancel || svc_stopping;
}

/* The stand-in's test delay, in steps that heed cancel; whether it ran out uncancelled. */
static bool
TestDelay(SvcJob *job)
{
	for (int waited = 0; waited < job->req->test_delay_ms; waited += 10)
	{
		struct timespec ts = {0, 10 * 1000 * 1000};

		if (JobCancelled(job))
			return false;
		nanosleep(&ts, NULL);
	}
	return true;
}

/* The error of a request that a lost context stopped (the service restarts). */
static void
LostContextError(gc_error *e)
{
	memset(e, 0, sizeof(*e));
	strlcpy(e->message, "the gpuclust GPU service lost its GPU context during the call", sizeof(e->message));
	snprintf(e->detail, sizeof(e->detail),
			 "A CUDA error in another request left the device unusable (%s). "
			 "The postmaster restarts the service; the next call can use it again.",
			 svc_lost_error[0] ? svc_lost_error : "no message");
}

/*
 * gpuclust.service_test_fault: instead of the request, a kernel that writes
 * to an illegal address (the GPU back end), or the CUDA error it would give
 * (the CPU stand-in).  Either way the request fails with GC_ERR_CUDA and
 * ThreadMain finds the context lost.
 */
static void
TestFault(GcSvcRequest *r)
{
	memset(&r->error, 0, sizeof(r->error));
	if (gc_service_backend_guc == GC_SVC_BACKEND_CPU)
	{
		r->status = GC_ERR_CUDA;
		strlcpy(r->error.message,
				"gpuclust.service_test_fault: an illegal memory access was encountered "
				"(cudaErrorIllegalAddress), simulated by the GPU service's CPU stand-in",
				sizeof(r->error.message));
		return;
	}
	if (svc_test_fault == NULL)
	{
		r->status = GC_ERR_INTERNAL;
		strlcpy(r->error.message, "gpuclust.service_test_fault: the GPU back end has no "
				GC_CUDA_TEST_FAULT_SYMBOL, sizeof(r->error.message));
		return;
	}
	r->status = svc_test_fault(r->device_id);
	r->error = *svc_api->last_error();
}

/* Runs one request on the back end, into its segment. */
static void
RunJob(SvcJob *job)
{
	GcSvcRequest *r = job->req;
	GcSvcBuf	bufs[GC_SVC_MAX_BUFS];
	int			nb = GcSvcBuffers(r, bufs);
	gc_exec		exec;
	const void *x = job->base + r->x_offset;
	gc_status	st;

	for (int i = 0; i < nb; i++)
		*bufs[i].field = r->offset[i] < 0 ? NULL : job->base + r->offset[i];
	if (r->op == GC_SVC_HDBSCAN)
		r->result.hd.tree = r->has_tree ? &r->tree : NULL;
	memset(&exec, 0, sizeof(exec));
	exec.struct_size = sizeof(exec);
	exec.device_id = gc_service_backend_guc == GC_SVC_BACKEND_CPU ? 0 : r->device_id;
	exec.tuning = r->has_tuning ? &r->tuning : NULL;
	exec.cancel = JobCancelled;
	exec.cancel_arg = job;
	exec.timing = &r->timing;
	memset(&r->timing, 0, sizeof(r->timing));

	if (gc_service_backend_guc == GC_SVC_BACKEND_CPU && r->test_delay_ms > 0 && !TestDelay(job))
	{
		r->status = GC_ERR_CANCELLED;
		snprintf(r->error.message, sizeof(r->error.message), "cancelled");
		return;
	}
	if (svc_context_lost)
	{
		/* another call broke the context: nothing more runs in this process */
		r->status = GC_ERR_UNAVAILABLE;
		LostContextError(&r->error);
		return;
	}
	if (r->test_fault)
	{
		TestFault(r);
		return;
	}
	switch (r->op)
	{
		case GC_SVC_DEVICE_INFO:
			st = svc_api->device_info(exec.device_id, &r->info);
			break;
		case GC_SVC_DBSCAN:
			st = svc_api->dbscan(&exec, x, r->dtype, r->n, r->d, &r->params.db, &r->result.db);
			break;
		case GC_SVC_KMEANS:
			st = svc_api->kmeans(&exec, x, r->dtype, r->n, r->d, &r->params.km, &r->result.km);
			break;
		case GC_SVC_DPEAKS:
			st = svc_api->density_peaks(&exec, x, r->dtype, r->n, r->d, &r->params.dp, &r->result.dp);
			break;
		case GC_SVC_KMEANS_ASSIGN:
			st = svc_api->kmeans_assign(&exec, x, r->dtype, r->n, r->d, &r->params.ka, &r->result.ka);
			break;
		case GC_SVC_HDBSCAN:
			st = svc_api->hdbscan(&exec, x, r->dtype, r->n, r->d, &r->params.hd, &r->result.hd);
			break;
		default:
			st = GC_ERR_INTERNAL;
			snprintf(r->error.message, sizeof(r->error.message), "unknown request %d", (int) r->op);
			break;
	}
	r->status = st;
	if (st != GC_OK && r->op <= GC_SVC_HDBSCAN)
		r->error = *svc_api->last_error();
}

/*
 * Reads the device's state after a call; whether it answers (a lost
 * context does not).  The caller holds svc_api_mu when the back end is
 * serial.
 */
static bool
DeviceAnswers(int device, gc_device_info *info)
{
	bool		ok;
	bool		standin = gc_service_backend_guc == GC_SVC_BACKEND_CPU;

	/* the stand-in's devices are all the CPU, its device 0 */
	ok = svc_api->device_info(standin ? 0 : device, info) == GC_OK;
	if (ok && standin)
		info->device_id = device;
	return ok;
}

/* A worker thread: waits for a job, runs it, tells the main loop. */
static void *
ThreadMain(void *arg)
{
	SvcThread  *t = (SvcThread *) arg;

	pthread_mutex_lock(&svc_mu);
	for (;;)
	{
		SvcJob	   *job;
		bool		lost;
		bool		answers;
		gc_device_info info;
		char		b = 1;

		while ((t->job == NULL || t->done) && !svc_stopping)
			pthread_cond_wait(&svc_cv, &svc_mu);
		if (t->job == NULL || t->done)
			break;
		job = t->job;
		pthread_mutex_unlock(&svc_mu);

		/* the call and the look at the device after it, with no other call between */
		if (svc_serial)
			pthread_mutex_lock(&svc_api_mu);
		RunJob(job);
		answers = !svc_context_lost && DeviceAnswers(t->device, &info);
		if (gc_service_backend_guc == GC_SVC_BACKEND_GPU)
			lost = !answers && job->req->status == GC_ERR_CUDA;
		else
			lost = job->req->test_fault && job->req->status == GC_ERR_CUDA;
		if (lost)
		{
			pthread_mutex_lock(&svc_mu);
			if (!svc_context_lost)
				strlcpy(svc_lost_error, job->req->error.message, sizeof(svc_lost_error));
			svc_context_lost = 1;
			pthread_mutex_unlock(&svc_mu);
		}
		if (svc_serial)
			pthread_mutex_unlock(&svc_api_mu);

		pthread_mutex_lock(&svc_mu);
		t->done = true;
		t->context_lost = lost;
		t->have_info = answers;
		if (answers)
			t->info = info;
		if (write(wake_pipe[1], &b, 1) < 0)
		{
			/* the pipe is full: the main loop is awake already */
		}
	}
	pthread_mutex_unlock(&svc_mu);
	return NULL;
}

/* Starts the worker threads with every signal blocked (signals are the main loop's). */
static void
StartThreads(int ndev, int per_device)
{
	sigset_t	all;
	sigset_t	old;

	nthreads = ndev * per_device;
	threads = MemoryContextAllocZero(TopMemoryContext, sizeof(SvcThread) * Max(nthreads, 1));
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < nthreads; i++)
	{
		threads[i].device = i / per_device;
		if (pthread_create(&threads[i].tid, NULL, ThreadMain, &threads[i]) != 0)
		{
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			ereport(FATAL,
					(errmsg("gpuclust GPU service could not start its worker threads: %m")));
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ----------------------------------------------------------------- the main loop */

/* Completes slot s (under the lock): DONE for its backend, or FREE when it went away. */
static void
Complete(int s)
{
	GcSvcSlot  *slot = &gc_service->slots[s];

	if (attached[s])
	{
		slot->answer = ((GcSvcRequest *) dsm_segment_address(attached[s]))->status;
		dsm_detach(attached[s]);
		attached[s] = NULL;
	}
	if (slot->orphaned)
	{
		slot->state = GC_SVC_FREE;
		return;
	}
	slot->state = GC_SVC_DONE;
	if (slot->latch)
		SetLatch(slot->latch);
}

/* Answers a request that did not run, through its segment when attached. */
static void
Answer(int s, gc_status st, const char *message, const char *detail, const char *hint)
{
	gc_service->slots[s].answer = st;
	if (attached[s])
	{
		GcSvcRequest *r = dsm_segment_address(attached[s]);

		memset(&r->error, 0, sizeof(r->error));
		r->status = st;
		strlcpy(r->error.message, message, sizeof(r->error.message));
		if (detail)
			strlcpy(r->error.detail, detail, sizeof(r->error.detail));
		if (hint)
			strlcpy(r->error.hint, hint, sizeof(r->error.hint));
	}
	Complete(s);
}

/* Takes what the threads finished; whether one of them lost the device. */
static bool
CollectDone(void)
{
	bool		lost = false;
	char		buf[64];

	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	pthread_mutex_lock(&svc_mu);
	for (int i = 0; i < nthreads; i++)
	{
		SvcThread  *t = &threads[i];

		if (t->job == NULL || !t->done)
			continue;
		if (t->context_lost)
			lost = true;
		{
			int			s = t->job->slot;
			GcSvcDevice *dev = &gc_service->devices[t->device];

			dev->running--;
			dev->reserved -= gc_service->slots[s].memory;
			if (t->have_info)
				dev->info.free_memory = t->info.free_memory;
			pfree(t->job);
			t->job = NULL;
			t->done = false;
			t->context_lost = false;
			Complete(s);
		}
	}
	pthread_mutex_unlock(&svc_mu);
	LWLockRelease(gc_service->lock);
	return lost;
}

/* When session was last served; 0: never (or too long ago to remember). */
static uint64
LastServed(int session)
{
	for (int i = 0; i < gc_service->nslots; i++)
		if (sessions[i].session == session)
			return sessions[i].served;
	return 0;
}

/* Notes that session is served now. */
static void
MarkServed(int session)
{
	int			e = -1;

	for (int i = 0; i < gc_service->nslots; i++)
	{
		if (sessions[i].session == session)
		{
			e = i;
			break;
		}
		if (e < 0 || sessions[i].served < sessions[e].served)
			e = i;				/* an unused entry has served 0 */
	}
	sessions[e].session = session;
	sessions[e].served = ++svc_serve_clock;
}

/* An idle worker thread of device dev, or -1. */
static int
IdleThread(int dev)
{
	for (int i = 0; i < nthreads; i++)
		if (threads[i].device == dev && threads[i].job == NULL)
			return i;
	return -1;
}

/* Whether request c may still be admitted in this pass: a device it may run on is not blocked. */
static bool
MayRun(const GcSvcSlot *c, const bool *blocked)
{
	if (c->device_id != GC_SVC_ANY_DEVICE)
		return !blocked[c->device_id];
	for (int d = 0; d < gc_service->ndevices; d++)
		if (!blocked[d])
			return true;
	return false;
}

/*
 * Whether a request of memory bytes fits on device d now: a worker thread
 * is free and the estimate is within what the budget has left (a request
 * larger than the whole budget runs alone).
 */
static bool
Fits(int d, int64 memory)
{
	GcSvcDevice *dev = &gc_service->devices[d];

	if (IdleThread(d) < 0)
		return false;
	return dev->running == 0 || dev->reserved + memory <= dev->budget;
}

/*
 * The device request c runs on now, or -1 when it must wait: its own when
 * the session set gpuclust.device_id, else the least loaded unblocked
 * device it fits on (one whose budget holds the estimate before one it
 * would have to itself).
 */
static int
ChooseDevice(const GcSvcSlot *c, const bool *blocked)
{
	int			best = -1;
	bool		best_within = false;
	double		best_share = 0;

	if (c->device_id != GC_SVC_ANY_DEVICE)
		return Fits(c->device_id, c->memory) ? c->device_id : -1;
	for (int d = 0; d < gc_service->ndevices; d++)
	{
		GcSvcDevice *dev = &gc_service->devices[d];
		bool		within = c->memory <= dev->budget;
		double		share = dev->budget > 0 ? (double) dev->reserved / dev->budget : 0;

		if (blocked[d] || !Fits(d, c->memory))
			continue;
		if (best < 0 || (within && !best_within) ||
			(within == best_within &&
			 (share < best_share ||
			  (share == best_share && dev->running < gc_service->devices[best].running))))
		{
			best = d;
			best_within = within;
			best_share = share;
		}
	}
	return best;
}

/*
 * One pass over the slots: attaches new requests, answers the cancelled and
 * the abandoned, times out the queue, then admits in the queue's turns.
 */
static void
Schedule(void)
{
	int			nslots = gc_service->nslots;
	TimestampTz now = GetCurrentTimestamp();
	bool		blocked[GC_SVC_MAX_DEVICES] = {false};

	/*
	 * New requests: attach outside the lock (dsm_attach takes its own).  A
	 * request submitted after this loop passed its slot is attached in the
	 * next pass (its backend set the latch), not failed below.
	 */
	memset(attach_tried, 0, sizeof(bool) * nslots);
	for (int s = 0; s < nslots; s++)
	{
		GcSvcSlot  *slot = &gc_service->slots[s];
		dsm_handle	h;

		if (slot->state != GC_SVC_SUBMITTED || slot->cancel || slot->orphaned || attached[s] ||
			slot->generation != gc_service->generation)
			continue;
		h = slot->handle;
		attach_tried[s] = true;
		attached[s] = dsm_attach(h);
		if (attached[s])
			dsm_pin_mapping(attached[s]);
	}

	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	for (int d = 0; d < gc_service->ndevices; d++)
		gc_service->devices[d].queued = 0;
	for (int s = 0; s < nslots; s++)
	{
		GcSvcSlot  *slot = &gc_service->slots[s];

		if (slot->state != GC_SVC_SUBMITTED && slot->state != GC_SVC_QUEUED)
			continue;
		if (slot->generation != gc_service->generation)
		{
			/* a service before this one took it: its backend notices and frees it */
			if (slot->orphaned)
				slot->state = GC_SVC_FREE;
			continue;
		}
		if (slot->orphaned)
			Complete(s);
		else if (slot->cancel)
			Answer(s, GC_ERR_CANCELLED, "cancelled", NULL, NULL);
		else if (slot->state == GC_SVC_SUBMITTED && attached[s] == NULL && !attach_tried[s])
			continue;			/* submitted after the attach loop: the next pass */
		else if (slot->state == GC_SVC_SUBMITTED && attached[s] == NULL)
			Answer(s, GC_ERR_INTERNAL, "the GPU service could not attach the request's shared memory", NULL, NULL);
		else if ((slot->device_id == GC_SVC_ANY_DEVICE && slot->op == GC_SVC_DEVICE_INFO) ||
				 (slot->device_id != GC_SVC_ANY_DEVICE &&
				  (slot->device_id < 0 || slot->device_id >= gc_service->ndevices)))
		{
			char		detail[128];

			snprintf(detail, sizeof(detail), "The GPU service has %d device(s).", gc_service->ndevices);
			Answer(s, GC_ERR_NO_DEVICE, "no such GPU in the GPU service", detail, NULL);
		}
		else if (slot->op == GC_SVC_DEVICE_INFO)
		{
			/* from what the service knows, without waiting for a worker thread */
			GcSvcRequest *r = dsm_segment_address(attached[s]);

			r->info = gc_service->devices[slot->device_id].info;
			memset(&r->error, 0, sizeof(r->error));
			r->status = GC_OK;
			Complete(s);
		}
		else if (slot->queue_timeout_ms > 0 &&
				 TimestampDifferenceExceeds(slot->submitted, now, slot->queue_timeout_ms))
		{
			char		detail[320];

			if (slot->device_id == GC_SVC_ANY_DEVICE)
			{
				int			running = 0;
				int64		budget = 0;

				for (int d = 0; d < gc_service->ndevices; d++)
				{
					running += gc_service->devices[d].running;
					budget = Max(budget, gc_service->devices[d].budget);
				}
				snprintf(detail, sizeof(detail),
						 "The request waited %d ms behind %d running request(s) on %d device(s) for a concurrency slot and %lld bytes of a device's memory budget (the largest is %lld bytes).",
						 slot->queue_timeout_ms, running, gc_service->ndevices,
						 (long long) slot->memory, (long long) budget);
			}
			else
				snprintf(detail, sizeof(detail),
						 "The request waited %d ms behind %d running request(s) for a concurrency slot and %lld bytes of the device's memory budget of %lld bytes.",
						 slot->queue_timeout_ms, gc_service->devices[slot->device_id].running,
						 (long long) slot->memory, (long long) gc_service->devices[slot->device_id].budget);
			Answer(s, GC_ERR_QUEUE_TIMEOUT, "the GPU service's queue is full", detail, NULL);
		}
		else
		{
			slot->state = GC_SVC_QUEUED;
			for (int d = 0; d < gc_service->ndevices; d++)
				if (slot->device_id == GC_SVC_ANY_DEVICE || slot->device_id == d)
					gc_service->devices[d].queued++;
		}
	}

	/* admission: in the queue's turns, while the next request fits */
	for (;;)
	{
		int			best = -1;
		uint64		best_served = 0;
		GcSvcSlot  *slot;
		GcSvcDevice *dev;
		SvcJob	   *job;
		int			t = -1;
		int			d;

		for (int s = 0; s < nslots; s++)
		{
			GcSvcSlot  *c = &gc_service->slots[s];
			uint64		served;

			if (c->state != GC_SVC_QUEUED || c->generation != gc_service->generation ||
				!MayRun(c, blocked))
				continue;
			served = LastServed(c->session);
			if (best < 0 || served < best_served ||
				(served == best_served && c->ticket < gc_service->slots[best].ticket))
			{
				best = s;
				best_served = served;
			}
		}
		if (best < 0)
			break;
		slot = &gc_service->slots[best];
		d = ChooseDevice(slot, blocked);
		if (d >= 0)
			t = IdleThread(d);
		if (t < 0)
		{
			/* nothing behind it goes first where it could run */
			for (int i = 0; i < gc_service->ndevices; i++)
				if (slot->device_id == GC_SVC_ANY_DEVICE || slot->device_id == i)
					blocked[i] = true;
			continue;
		}
		dev = &gc_service->devices[d];
		job = MemoryContextAllocZero(TopMemoryContext, sizeof(SvcJob));
		job->slot = best;
		job->seg = attached[best];
		job->base = dsm_segment_address(attached[best]);
		job->req = (GcSvcRequest *) job->base;
		job->req->device_id = d;
		job->cancel = &slot->cancel;
		for (int i = 0; i < gc_service->ndevices; i++)
			if (slot->device_id == GC_SVC_ANY_DEVICE || slot->device_id == i)
				gc_service->devices[i].queued--;
		slot->device_id = d;
		slot->state = GC_SVC_RUNNING;
		slot->started = GetCurrentTimestamp();
		dev->running++;
		dev->reserved += slot->memory;
		MarkServed(slot->session);
		pthread_mutex_lock(&svc_mu);
		threads[t].job = job;
		threads[t].done = false;
		pthread_cond_broadcast(&svc_cv);
		pthread_mutex_unlock(&svc_mu);
	}
	LWLockRelease(gc_service->lock);
}

/* The budget of each device from gpuclust.service_memory_budget. */
static void
SetBudgets(void)
{
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	for (int d = 0; d < gc_service->ndevices; d++)
		gc_service->devices[d].budget = gc_service_memory_budget_guc > 0 ?
			(int64) gc_service_memory_budget_guc * 1024 * 1024 :
			(int64) (gc_service->devices[d].info.total_memory * GC_SVC_DEFAULT_BUDGET_SHARE);
	LWLockRelease(gc_service->lock);
}

/* Asks every running request to stop and waits for the threads to finish them. */
static void
StopThreads(void)
{
	static bool joined = false;

	if (joined)
		return;
	joined = true;
	svc_stopping = 1;
	pthread_mutex_lock(&svc_mu);
	pthread_cond_broadcast(&svc_cv);
	pthread_mutex_unlock(&svc_mu);
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i].tid, NULL);

	/*
	 * The threads are gone: an answer they finished stands (a request that
	 * ran before the context was lost, or the one that lost it); the rest,
	 * cancelled by the stop or not run, is the caller's to answer.
	 */
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	pthread_mutex_lock(&svc_mu);
	for (int i = 0; i < nthreads; i++)
		if (threads[i].job)
		{
			SvcJob	   *job = threads[i].job;
			GcSvcDevice *dev = &gc_service->devices[threads[i].device];
			gc_status	st = job->req->status;

			dev->running--;
			dev->reserved -= gc_service->slots[job->slot].memory;
			if (threads[i].done && st != GC_ERR_CANCELLED && st != GC_ERR_UNAVAILABLE)
				Complete(job->slot);
			threads[i].job = NULL;
		}
	pthread_mutex_unlock(&svc_mu);
	LWLockRelease(gc_service->lock);
}

/*
 * before_shmem_exit (while the segments are still mapped): the service is
 * going; the threads stop (their requests cancelled) and every open request
 * is answered, so that no backend waits for it.
 */
static void
ServiceExit(int code, Datum arg)
{
	if (gc_service == NULL || threads == NULL)
		return;
	StopThreads();
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	gc_service->ready = false;
	gc_service->service_pid = 0;
	gc_service->service_latch = NULL;
	for (int s = 0; attached && s < gc_service->nslots; s++)
	{
		GcSvcState st = gc_service->slots[s].state;

		if (st != GC_SVC_SUBMITTED && st != GC_SVC_QUEUED && st != GC_SVC_RUNNING)
			continue;
		if (svc_context_lost)
		{
			gc_error	e;

			LostContextError(&e);
			Answer(s, GC_ERR_UNAVAILABLE, e.message, e.detail, NULL);
		}
		else
			Answer(s, GC_ERR_UNAVAILABLE, "the gpuclust GPU service stopped during the call",
				   "The postmaster restarts it; the next call can use it again.", NULL);
	}
	for (int d = 0; d < gc_service->ndevices; d++)
	{
		gc_service->devices[d].running = 0;
		gc_service->devices[d].queued = 0;
		gc_service->devices[d].reserved = 0;
	}
	LWLockRelease(gc_service->lock);
}

/*
 * The rows of a warm-up call: 4 blobs of warm_rows / 4 rows in WARM_DIMS
 * dimensions (fewer on the CPU stand-in, for which the warm-up only runs
 * the code: its start stays short for the tests).
 */
#define WARM_ROWS 512
#define WARM_ROWS_STANDIN 64
#define WARM_DIMS 64
static int	warm_rows = WARM_ROWS;

/* Fills x [warm_rows, d] of dtype with the warm-up rows (a fixed sequence). */
static void
WarmRows(void *x, gc_dtype dtype, int d)
{
	uint64		state = 43;

	for (int i = 0; i < warm_rows; i++)
		for (int j = 0; j < d; j++)
		{
			double		v;

			state = state * 6364136223846793005ULL + 1442695040888963407ULL;
			v = (i % 4) * 3.0 + (double) (state >> 11) / (double) (1ULL << 53);
			if (dtype == GC_F32)
				((float *) x)[(int64) i * d + j] = (float) v;
			else
				((double *) x)[(int64) i * d + j] = v;
		}
}

/*
 * A small call of every entry point on device dev, in both element types,
 * at 2, 3, 8 and 64 dimensions (the grid and tree paths of the few
 * dimensions, and the pair engine and k-means through cuBLAS at 64), so
 * that the back end's first-use costs, its kernels' loading included, are
 * paid here; returns the milliseconds, and the first failure's text in
 * failed (empty when none).
 */
static const int warm_dims[] = {2, 3, 8, WARM_DIMS};

static double
WarmUp(int dev, char *failed, size_t failedlen)
{
	instr_time	t0;
	instr_time	t1;
	gc_exec		exec;
	gc_timing	timing;
	int32	   *labels = palloc(sizeof(int32) * WARM_ROWS);
	uint8	   *flags = palloc(WARM_ROWS);
	double	   *a = palloc(sizeof(double) * WARM_ROWS);
	double	   *b = palloc(sizeof(double) * WARM_ROWS);
	double	   *c = palloc(sizeof(double) * WARM_ROWS);
	double	   *centroids = palloc(sizeof(double) * 4 * WARM_DIMS);
	int64	   *sizes = palloc(sizeof(int64) * 4);
	double	   *inertia = palloc(sizeof(double) * 4);
	void	   *x = palloc(sizeof(double) * WARM_ROWS * WARM_DIMS);

	failed[0] = '\0';
	if (gc_service_backend_guc == GC_SVC_BACKEND_CPU)
		warm_rows = WARM_ROWS_STANDIN;
	memset(&exec, 0, sizeof(exec));
	exec.struct_size = sizeof(exec);
	exec.device_id = dev;
	exec.timing = &timing;
	INSTR_TIME_SET_CURRENT(t0);
	for (int t = 0; t < 2; t++)
	{
		gc_dtype	dtype = t == 0 ? GC_F32 : GC_F64;

		for (int w = 0; w < lengthof(warm_dims); w++)
		{
			int			d = warm_dims[w];
			const char *what = NULL;
			gc_dbscan_params dbp;
			gc_dbscan_result dbr = {labels, flags, 0};
			gc_kmeans_params kmp;
			gc_kmeans_result kmr = {labels, a, centroids, sizes, inertia, 0, 0};
			gc_kmeans_assign_params kap;
			gc_kmeans_assign_result kar = {labels, a};
			gc_dpeaks_params dpp;
			gc_dpeaks_result dpr;
			gc_hdbscan_params hdp;
			gc_hdbscan_result hdr;

			WarmRows(x, dtype, d);
			gc_dbscan_params_init(&dbp);
			dbp.eps = 1.0;
			dbp.min_pts = 4;
			gc_kmeans_params_init(&kmp);
			kmp.k = 4;
			memset(&kap, 0, sizeof(kap));
			kap.struct_size = sizeof(kap);
			kap.k = 4;
			kap.centroids = centroids;
			kap.precision = GC_PRECISION_FP32;
			kap.metric = GC_METRIC_EUCLIDEAN;
			gc_dpeaks_params_init(&dpp);
			dpp.n_clusters = 4;
			memset(&dpr, 0, sizeof(dpr));
			dpr.cluster = labels;
			dpr.rho = a;
			dpr.delta = b;
			dpr.is_center = flags;
			gc_hdbscan_params_init(&hdp);
			hdp.min_cluster_size = 8;
			hdp.min_samples = 8;
			memset(&hdr, 0, sizeof(hdr));
			hdr.cluster = labels;
			hdr.probability = a;
			hdr.outlier_score = b;
			hdr.core_distance = c;

			if (svc_api->dbscan(&exec, x, dtype, warm_rows, d, &dbp, &dbr) != GC_OK)
				what = "DBSCAN";
			else if (svc_api->kmeans(&exec, x, dtype, warm_rows, d, &kmp, &kmr) != GC_OK)
				what = "k-means";
			else if (svc_api->kmeans_assign(&exec, x, dtype, warm_rows, d, &kap, &kar) != GC_OK)
				what = "k-means assignment";
			else if (svc_api->density_peaks(&exec, x, dtype, warm_rows, d, &dpp, &dpr) != GC_OK)
				what = "density peaks";
			else if (svc_api->hdbscan(&exec, x, dtype, warm_rows, d, &hdp, &hdr) != GC_OK)
				what = "HDBSCAN";
			if (what != NULL && failed[0] == '\0')
				snprintf(failed, failedlen, "%s of %d x %d %s rows: %s", what, warm_rows, d,
						 dtype == GC_F32 ? "real" : "double precision", svc_api->last_error()->message);
		}
	}
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	pfree(labels);
	pfree(flags);
	pfree(a);
	pfree(b);
	pfree(c);
	pfree(centroids);
	pfree(sizes);
	pfree(inertia);
	pfree(x);
	return INSTR_TIME_GET_MILLISEC(t1);
}

/*
 * atexit, registered after the back end started (so it runs before the CUDA
 * runtime's and cuBLAS's own exit handlers): a service whose context is
 * lost leaves without tearing down CUDA in it, so that nothing can hold up
 * its exit; PostgreSQL's exit callbacks have run by then.
 */
static void
SkipCudaTeardown(void)
{
	if (svc_context_lost)
		_exit(1);
}

/* Loads the back end the service runs; fills the devices or the reason there are none. */
static void
LoadBackend(void)
{
	char		reason[512] = "";
	gc_status	why = GC_OK;
	int32		count = 0;

	if (gc_service_backend_guc == GC_SVC_BACKEND_CPU)
	{
		svc_api = gc_cpu_api();
		svc_serial = false;
		strlcpy(gc_service->backend_name, "cpu", sizeof(gc_service->backend_name));
	}
	else
	{
		/*
		 * Kernels load at first use, as in a session (gpu.c): loading every
		 * module at once (CUDA_MODULE_LOADING=EAGER) loads all of cuBLAS's
		 * too and holds more device memory than the context itself.  The
		 * warm-up below loads those of every entry point's usual paths.
		 */
		svc_api = GcGpuApi(reason, sizeof(reason), &why);
		svc_serial = true;
		strlcpy(gc_service->backend_name, "gpu", sizeof(gc_service->backend_name));
		if (svc_api != NULL)
		{
			/* the test-only entry point, from the library GcGpuApi loaded */
			char		path[MAXPGPATH];
			void	   *h;

			snprintf(path, sizeof(path), "%s/gpuclust_cuda%s", pkglib_path, DLSUFFIX);
			h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
			if (h != NULL)
				svc_test_fault = (GcTestFaultFn) dlsym(h, GC_CUDA_TEST_FAULT_SYMBOL);
		}
	}
	if (svc_api != NULL && svc_api->device_count(&count) != GC_OK)
	{
		why = GC_ERR_NO_DEVICE;
		strlcpy(reason, svc_api->last_error()->message, sizeof(reason));
		count = 0;
	}
	else if (svc_api != NULL && gc_service_backend_guc == GC_SVC_BACKEND_CPU)
		count = gc_service_test_devices_guc;
	count = Min(count, GC_SVC_MAX_DEVICES);
	for (int d = 0; d < count; d++)
	{
		GcSvcDevice *dev = &gc_service->devices[d];

		memset(dev, 0, sizeof(*dev));
		/* the device's primary context, made here once (the stand-in's are all its device 0) */
		if (!DeviceAnswers(d, &dev->info))
		{
			why = GC_ERR_NO_DEVICE;
			snprintf(reason, sizeof(reason), "GPU %d: %s", d, svc_api->last_error()->message);
			count = 0;
			break;
		}
		if (gc_service_backend_guc == GC_SVC_BACKEND_CPU)
			strlcpy(dev->info.name, "CPU (the GPU service's test stand-in)", sizeof(dev->info.name));
		dev->threads = gc_service_threads_guc;
	}
	gc_service->ndevices = count;
	gc_service->why = why;
	strlcpy(gc_service->reason, reason, sizeof(gc_service->reason));
}

void
GcServiceMain(Datum arg)
{
	bool		lost = false;
	double		warm_ms = 0;

	gc_in_service = true;
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	if (gc_service == NULL)
		ereport(FATAL, (errmsg("gpuclust GPU service: its shared memory is missing")));
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "gpuclust GPU service");
	attached = MemoryContextAllocZero(TopMemoryContext, sizeof(dsm_segment *) * gc_service->nslots);
	attach_tried = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * gc_service->nslots);
	sessions = MemoryContextAllocZero(TopMemoryContext, sizeof(SvcSession) * gc_service->nslots);

	if (pipe(wake_pipe) != 0 || fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
		fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) != 0)
		ereport(FATAL, (errmsg("gpuclust GPU service could not make its pipe: %m")));

	/*
	 * A new generation: requests a service before this one took (it stopped
	 * without answering them) are not run; their backends notice the new
	 * generation and free their slots, the abandoned ones are freed here.
	 */
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	gc_service->generation++;
	for (int s = 0; s < gc_service->nslots; s++)
		if (gc_service->slots[s].orphaned)
			gc_service->slots[s].state = GC_SVC_FREE;
	LWLockRelease(gc_service->lock);

	LoadBackend();
	SetBudgets();

	/* the back end's first-use costs, here and not in a session's first call (the stand-in's devices are one) */
	for (int d = 0; d < (gc_service_backend_guc == GC_SVC_BACKEND_CPU ? Min(gc_service->ndevices, 1) :
						 gc_service->ndevices); d++)
	{
		char		failed[GC_ERROR_TEXT + 128];
		double		ms = WarmUp(d, failed, sizeof(failed));

		if (failed[0])
			ereport(WARNING,
					(errmsg("gpuclust GPU service: the warm-up call on device %d failed", d),
					 errdetail("%s", failed)));
		warm_ms = Max(warm_ms, ms);
		/* the free memory after it, for gpuclust_devices() */
		if (DeviceAnswers(d, &gc_service->devices[d].info) &&
			gc_service_backend_guc == GC_SVC_BACKEND_CPU)
			strlcpy(gc_service->devices[d].info.name, "CPU (the GPU service's test stand-in)",
					sizeof(gc_service->devices[d].info.name));
	}
	atexit(SkipCudaTeardown);
	StartThreads(gc_service->ndevices, gc_service_threads_guc);
	before_shmem_exit(ServiceExit, (Datum) 0);

	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	gc_service->service_latch = MyLatch;
	gc_service->service_pid = MyProcPid;
	gc_service->ready = true;
	LWLockRelease(gc_service->lock);
	ereport(LOG,
			(errmsg("gpuclust GPU service ready: %d device(s) on the %s back end, %d thread(s) each, warm-up %.0f ms",
					gc_service->ndevices, gc_service->backend_name, gc_service_threads_guc, warm_ms),
			 gc_service->ndevices == 0 ? errdetail("%s", gc_service->reason) : 0));

	while (!ShutdownRequestPending && !lost)
	{
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 wake_pipe[0], 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			SetBudgets();
		}
		lost = CollectDone();
		if (!lost)
			Schedule();
	}

	/* stopping: ServiceExit cancels and answers what is open */
	if (lost)
		ereport(LOG,
				(errmsg("gpuclust GPU service lost its GPU context; restarting"),
				 errdetail("A CUDA error left the device unusable in this process; the open requests fail with an error.")));
	proc_exit(1);
}
