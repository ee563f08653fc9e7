/*
 * service.c
 *    The backends' side of the GPU service: its settings, its shared memory
 *    and background worker (registered by _PG_init while
 *    shared_preload_libraries is processed), the proxy back end that sends
 *    each GPU call to the service and waits for the answer, and the SQL
 *    functions gpuclust_service() and gpuclust_service_requests().
 *
 * A call through the proxy: the backend creates a DSM segment with the
 * request head (service_shm.h), its rows x and the other input arrays,
 * fills a request slot with the segment's handle and a memory estimate, and
 * waits on its latch.  The outputs come back through the same segment.
 * While it waits it answers interrupts: on a cancel, statement_timeout or
 * pg_terminate_backend it sets the slot's cancel flag, waits for the
 * service to let go of the request and only then raises the error, so
 * nothing is left in the service.  A service that stops or restarts under a
 * waiting backend is noticed within GC_SVC_POLL_MS.  Each answered request
 * says at DEBUG1 how long it waited in the service's queue and ran (the
 * load benchmark reads it with client_min_messages = debug1).
 */
#include "postgres.h"

#include <signal.h>

#include "access/parallel.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "output.h"
#include "service.h"
#include "service_shm.h"

int			gc_gpu_queue_timeout_guc = 10000;
int			gc_service_backend_guc = GC_SVC_BACKEND_GPU;
int			gc_service_threads_guc = 2;
int			gc_service_memory_budget_guc = 0;
int			gc_service_test_delay_guc = 0;
int			gc_service_test_devices_guc = 1;
bool		gc_service_test_fault_guc = false;
static bool gc_service_guc = true;

/* Whether gpuclust.device_id was set rather than left at its default. */
static bool device_id_set = false;

GcServiceShared *gc_service = NULL;

/* The service was registered in this server (set in the postmaster, inherited by fork). */
static bool service_registered = false;

/* How often a waiting backend looks at the service, in milliseconds. */
#define GC_SVC_POLL_MS 100
/* How long a new call waits for a starting service. */
#define GC_SVC_START_WAIT_MS 1000
/* How long a cancelled call waits for the service to let go of the request. */
#define GC_SVC_CANCEL_WAIT_MS 5000

static const struct config_enum_entry service_backend_options[] = {
	{"gpu", GC_SVC_BACKEND_GPU, false},
	{"cpu", GC_SVC_BACKEND_CPU, false},
	{NULL, 0, false}
};

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The size of the service's shared memory: the head and one slot per backend. */
static Size
ServiceShmemSize(void)
{
	return add_size(offsetof(GcServiceShared, slots),
					mul_size(MaxBackends, sizeof(GcSvcSlot)));
}

#if PG_VERSION_NUM >= 150000
/* shmem_request_hook: the service's shared memory and its lock. */
static void
ServiceShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(ServiceShmemSize());
	RequestNamedLWLockTranche("gpuclust_service", 1);
}
#endif

/* shmem_startup_hook: finds or makes the service's shared memory. */
static void
ServiceShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gc_service = ShmemInitStruct("gpuclust service", ServiceShmemSize(), &found);
	if (!found)
	{
		memset(gc_service, 0, ServiceShmemSize());
		gc_service->lock = &(GetNamedLWLockTranche("gpuclust_service"))->lock;
		gc_service->nslots = MaxBackends;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* gpuclust.device_id's check hook: extra records whether the value was set. */
bool
GcDeviceIdCheck(int *newval, void **extra, GucSource source)
{
	bool	   *set = malloc(sizeof(bool));

	if (set == NULL)
		return false;
	*set = source > PGC_S_DYNAMIC_DEFAULT;
	*extra = set;
	return true;
}

/* gpuclust.device_id's assign hook (also on RESET and at the end of a transaction). */
void
GcDeviceIdAssign(int newval, void *extra)
{
	device_id_set = extra != NULL && *(bool *) extra;
}

/* Defines the service's settings; registers it while shared_preload_libraries is processed. */
void
GcServiceInit(void)
{
	BackgroundWorker worker;

	DefineCustomIntVariable("gpuclust.service_memory_budget",
							"Device memory the requests running at once on a device may reserve.",
							"0: 80% of the device's memory.",
							&gc_service_memory_budget_guc, 0, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.gpu_queue_timeout",
							"How long a GPU call waits in the GPU service's queue.",
							"Past it, device auto computes on the CPU and device gpu is an error; 0: no limit.",
							&gc_gpu_queue_timeout_guc, 10000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.service_test_delay",
							"Milliseconds the GPU service's CPU stand-in waits before each request (tests).",
							NULL, &gc_service_test_delay_guc, 0, 0, 3600 * 1000,
							PGC_SUSET, GUC_UNIT_MS | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomBoolVariable("gpuclust.service_test_fault",
							 "Makes the GPU service break its GPU context on this session's GPU calls (tests).",
							 "Each call launches a kernel that writes to an illegal address instead of "
							 "computing (the CPU stand-in simulates it); the service fails its open "
							 "requests and restarts.",
							 &gc_service_test_fault_guc, false,
							 PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);

	/* settings read at server start exist only where they can take effect */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomBoolVariable("gpuclust.service",
							 "Runs the GPU calls of every session in one GPU service process.",
							 "Takes effect when gpuclust is in shared_preload_libraries; "
							 "off: each session loads the GPU back end itself.",
							 &gc_service_guc, true, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.service_threads",
							"Requests the GPU service runs at once on each device.",
							NULL, &gc_service_threads_guc, 2, 1, 64,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("gpuclust.service_backend",
							 "The back end the GPU service runs (cpu: a stand-in for tests without a GPU).",
							 NULL, &gc_service_backend_guc, GC_SVC_BACKEND_GPU, service_backend_options,
							 PGC_POSTMASTER, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.service_test_devices",
							"Devices the GPU service's CPU stand-in presents (tests).",
							NULL, &gc_service_test_devices_guc, 1, 1, GC_SVC_MAX_DEVICES,
							PGC_POSTMASTER, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	if (!gc_service_guc)
		return;

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = ServiceShmemRequest;
#else
	RequestAddinShmemSpace(ServiceShmemSize());
	RequestNamedLWLockTranche("gpuclust_service", 1);
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = ServiceShmemStartup;

	memset(&worker, 0, sizeof(worker));
	snprintf(worker.bgw_name, BGW_MAXLEN, "gpuclust GPU service");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gpuclust GPU service");
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_PostmasterStart;
	/* an exit with status 1 (a lost CUDA context, SIGTERM) restarts it after a second */
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, sizeof(worker.bgw_library_name), "gpuclust");
	snprintf(worker.bgw_function_name, sizeof(worker.bgw_function_name), "GcServiceMain");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
	service_registered = true;
}

/* Set in the service process itself: there the back end is loaded directly. */
bool		gc_in_service = false;

bool
GcServiceEnabled(void)
{
	return service_registered && gc_service != NULL && !gc_in_service;
}

/* ----------------------------------------------------------------- the proxy */

static gc_error proxy_error;
static int	my_slot = -1;		/* the slot this backend uses, once it took one */
static bool exit_hook_set = false;

static const gc_error *
ProxyLastError(void)
{
	return &proxy_error;
}

/* Sets the proxy's error record and returns st. */
static gc_status
ProxyFail(gc_status st, const char *message, const char *detail, const char *hint)
{
	memset(&proxy_error, 0, sizeof(proxy_error));
	strlcpy(proxy_error.message, message, sizeof(proxy_error.message));
	if (detail)
		strlcpy(proxy_error.detail, detail, sizeof(proxy_error.detail));
	if (hint)
		strlcpy(proxy_error.hint, hint, sizeof(proxy_error.hint));
	return st;
}

/* Whether the service that took a request of generation gen is still there. */
static bool
ServiceAlive(uint64 gen)
{
	int			pid = gc_service->service_pid;

	if (!gc_service->ready || pid == 0 || gc_service->generation != gen)
		return false;
	return kill(pid, 0) == 0;
}

/* Waits up to GC_SVC_START_WAIT_MS for a starting service; whether it is ready. */
static bool
WaitServiceReady(void)
{
	for (int waited = 0; !gc_service->ready && waited < GC_SVC_START_WAIT_MS; waited += 20)
	{
		CHECK_FOR_INTERRUPTS();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 20,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	return gc_service->ready;
}

static gc_status
ProxyDeviceCount(int32_t *count)
{
	*count = 0;
	if (!gc_service->ready)
		return ProxyFail(GC_ERR_UNAVAILABLE, "the gpuclust GPU service is not running", NULL, NULL);
	if (gc_service->ndevices == 0)
		return ProxyFail(gc_service->why, gc_service->reason, NULL, NULL);
	*count = gc_service->ndevices;
	return GC_OK;
}

static void
ProxyRelease(void)
{
}

/* before_shmem_exit: a backend that leaves during a request hands the slot to the service. */
static void
ServiceBackendExit(int code, Datum arg)
{
	GcSvcSlot  *slot;

	if (my_slot < 0 || gc_service == NULL)
		return;
	slot = &gc_service->slots[my_slot];
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid && slot->state != GC_SVC_FREE)
	{
		if (slot->state == GC_SVC_DONE)
			slot->state = GC_SVC_FREE;
		else
		{
			slot->cancel = 1;
			slot->orphaned = true;
			slot->latch = NULL;
		}
	}
	LWLockRelease(gc_service->lock);
	if (gc_service->service_latch && gc_service->service_pid != 0)
		SetLatch(gc_service->service_latch);
	my_slot = -1;
}

/*
 * A conservative estimate of the device memory a request needs: its rows,
 * the outputs, a per-row allowance for the algorithm's working arrays, and
 * 64 MiB of workspace.
 */
static int64
EstimateMemory(const GcSvcRequest *r)
{
	int64		n = r->n;
	int64		d = r->d;
	int64		x = n * d * (r->dtype == GC_F64 ? 8 : 4);
	int64		bytes = x + ((int64) 64 << 20);

	switch (r->op)
	{
		case GC_SVC_DEVICE_INFO:
			return 0;
		case GC_SVC_DBSCAN:
			bytes += x + n * 64;
			break;
		case GC_SVC_KMEANS:
			bytes += x + n * 48 + (int64) r->params.km.k * d * 8 * 4;
			break;
		case GC_SVC_DPEAKS:
			bytes += x + n * 96;
			break;
		case GC_SVC_KMEANS_ASSIGN:
			bytes += n * 24 + (int64) r->params.ka.k * d * 8 * 2;
			break;
		case GC_SVC_HDBSCAN:
			bytes += x + n * 160;
			break;
	}
	return bytes;
}

/* Takes a free slot for this backend, or -1 (more backends than slots cannot happen). */
static int
TakeSlot(void)
{
	for (int i = 0; i < gc_service->nslots; i++)
		if (gc_service->slots[i].state == GC_SVC_FREE)
			return i;
	return -1;
}

/*
 * Sends request r (its params and result hold the caller's pointers) with
 * rows x to the service, to the device exec names when pinned, else to the
 * one the service chooses; waits, and copies the answer back into the
 * caller's arrays and into *r.  The statuses of the service itself:
 * GC_ERR_UNAVAILABLE (not running, or stopped during the call) and
 * GC_ERR_QUEUE_TIMEOUT.  A cancel comes back as GC_ERR_CANCELLED, after
 * the service let go of the request.
 */
static gc_status
Submit(GcSvcRequest *r, const gc_exec *exec, bool pinned, const void *x)
{
	GcSvcBuf	bufs[GC_SVC_MAX_BUFS];
	int			nb;
	Size		total;
	dsm_segment *seg;
	GcSvcRequest *head;
	char	   *base;
	GcSvcSlot  *slot;
	int			s;
	uint64		gen;
	bool		cancelled = false;
	int			cancel_waited = 0;
	gc_status	st;
	int64		xbytes = r->n * r->d * (r->dtype == GC_F64 ? 8 : 4);

	memset(&proxy_error, 0, sizeof(proxy_error));
	if (!WaitServiceReady())
		return ProxyFail(GC_ERR_UNAVAILABLE, "the gpuclust GPU service is not running",
						 "It did not answer within a second.", NULL);
	if (gc_service->ndevices == 0)
		return ProxyFail(gc_service->why, gc_service->reason, NULL, NULL);

	/* the segment: the head, x, then each array, 64-byte aligned */
	r->device_id = exec ? exec->device_id : 0;
	r->has_tuning = exec && exec->tuning;
	if (r->has_tuning)
		r->tuning = *exec->tuning;
	r->test_delay_ms = gc_service_test_delay_guc;
	r->test_fault = gc_service_test_fault_guc;
	total = TYPEALIGN(64, sizeof(GcSvcRequest));
	r->x_offset = total;
	total += TYPEALIGN(64, xbytes);
	nb = GcSvcBuffers(r, bufs);
	for (int i = 0; i < nb; i++)
	{
		if (*bufs[i].field == NULL)
		{
			r->offset[i] = -1;
			continue;
		}
		r->offset[i] = total;
		total += TYPEALIGN(64, bufs[i].bytes);
	}
	seg = dsm_create(total, 0);
	base = dsm_segment_address(seg);
	head = (GcSvcRequest *) base;
	memcpy(head, r, sizeof(GcSvcRequest));
	head->status = GC_ERR_INTERNAL;
	if (xbytes > 0)
		memcpy(base + r->x_offset, x, xbytes);
	for (int i = 0; i < nb; i++)
		if (r->offset[i] >= 0 && bufs[i].in)
			memcpy(base + r->offset[i], *bufs[i].field, bufs[i].bytes);

	if (!exit_hook_set)
	{
		before_shmem_exit(ServiceBackendExit, (Datum) 0);
		exit_hook_set = true;
	}

	/* the slot */
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	s = gc_service->ready ? TakeSlot() : -1;
	if (s < 0)
	{
		LWLockRelease(gc_service->lock);
		dsm_detach(seg);
		return ProxyFail(GC_ERR_UNAVAILABLE, "the gpuclust GPU service is not running", NULL, NULL);
	}
	slot = &gc_service->slots[s];
	memset(slot, 0, sizeof(*slot));
	slot->pid = MyProcPid;
	/* a parallel worker takes its turns in the queue with its leader */
	slot->session = IsParallelWorker() && MyProc->lockGroupLeader ?
		MyProc->lockGroupLeader->pid : MyProcPid;
	slot->latch = MyLatch;
	gen = slot->generation = gc_service->generation;
	slot->ticket = ++gc_service->next_ticket;
	slot->handle = dsm_segment_handle(seg);
	slot->op = r->op;
	slot->device_id = pinned ? r->device_id : GC_SVC_ANY_DEVICE;
	slot->rows = r->n;
	slot->dims = r->d;
	slot->memory = EstimateMemory(r);
	slot->queue_timeout_ms = gc_gpu_queue_timeout_guc;
	slot->submitted = GetCurrentTimestamp();
	slot->state = GC_SVC_SUBMITTED;
	my_slot = s;
	LWLockRelease(gc_service->lock);
	SetLatch(gc_service->service_latch);

	/* the wait */
	for (;;)
	{
		GcSvcState state;
		bool		alive;

		LWLockAcquire(gc_service->lock, LW_SHARED);
		state = slot->state;
		LWLockRelease(gc_service->lock);
		if (state == GC_SVC_DONE)
			break;
		alive = ServiceAlive(gen);
		if (!alive || (cancelled && cancel_waited >= GC_SVC_CANCEL_WAIT_MS))
		{
			/* the service is gone (or does not let go): the slot is no longer its */
			LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
			if (slot->state == GC_SVC_DONE || !alive)
				slot->state = GC_SVC_FREE;
			else
			{
				slot->orphaned = true;
				slot->latch = NULL;
			}
			LWLockRelease(gc_service->lock);
			my_slot = -1;
			dsm_detach(seg);
			if (cancelled)
				return ProxyFail(GC_ERR_CANCELLED, "cancelled", NULL, NULL);
			return ProxyFail(GC_ERR_UNAVAILABLE, "the gpuclust GPU service stopped during the call",
							 "The postmaster restarts it; the next call can use it again.", NULL);
		}
		if (!cancelled && InterruptPending && (QueryCancelPending || ProcDiePending))
		{
			/* raised by the caller once the service let go (GC_ERR_CANCELLED) */
			slot->cancel = 1;
			cancelled = true;
			SetLatch(gc_service->service_latch);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 GC_SVC_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (cancelled)
			cancel_waited += GC_SVC_POLL_MS;
	}

	/* the answer */
	st = slot->answer;
	proxy_error = head->error;
	if (slot->started != 0)
		elog(DEBUG1, "gpuclust: the GPU service ran the %s request of %lld rows on device %d: "
			 "queued %.3f ms, ran %.3f ms",
			 GcSvcOpName(r->op), (long long) r->n, slot->device_id,
			 (double) (slot->started - slot->submitted) / 1000.0,
			 (double) (GetCurrentTimestamp() - slot->started) / 1000.0);
	if (cancelled)
		st = ProxyFail(GC_ERR_CANCELLED, "cancelled", NULL, NULL);
	else if (st == GC_ERR_UNAVAILABLE && proxy_error.message[0] == '\0')
		st = ProxyFail(GC_ERR_UNAVAILABLE, "the gpuclust GPU service stopped during the call", NULL, NULL);
	else if (st != GC_OK && proxy_error.message[0] == '\0')
	{
		char		message[160];

		snprintf(message, sizeof(message),
				 "the gpuclust GPU service answered the %s request with status %d and no error text (%s)",
				 GcSvcOpName(r->op), (int) st, slot->started != 0 ? "it ran" : "it did not run");
		st = ProxyFail(GC_ERR_INTERNAL, message, NULL, NULL);
	}
	if (exec && exec->timing)
		*exec->timing = head->timing;
	if (st == GC_OK)
	{
		GcSvcRequest answer;
		GcSvcBuf	abufs[GC_SVC_MAX_BUFS];

		for (int i = 0; i < nb; i++)
			if (r->offset[i] >= 0 && !bufs[i].in)
				memcpy(*bufs[i].field, base + r->offset[i], bufs[i].bytes);
		/* the scalars of the result, with the caller's pointers put back */
		memcpy(&answer, head, sizeof(answer));
		(void) GcSvcBuffers(&answer, abufs);
		for (int i = 0; i < nb; i++)
			*abufs[i].field = *bufs[i].field;
		if (r->op == GC_SVC_HDBSCAN)
			answer.result.hd.tree = r->result.hd.tree;
		r->result = answer.result;
		r->tree = answer.tree;
		r->info = answer.info;
	}
	LWLockAcquire(gc_service->lock, LW_EXCLUSIVE);
	slot->state = GC_SVC_FREE;
	LWLockRelease(gc_service->lock);
	my_slot = -1;
	dsm_detach(seg);
	return st;
}

/* A new request of op on n rows of x, its result struct zeroed. */
static void
NewRequest(GcSvcRequest *r, GcSvcOp op, gc_dtype dtype, int64 n, int32 d)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->dtype = dtype;
	r->n = n;
	r->d = d;
}

static gc_status
ProxyDeviceInfo(int32_t device_id, gc_device_info *info)
{
	GcSvcRequest r;
	gc_exec		exec;
	gc_status	st;

	memset(&exec, 0, sizeof(exec));
	exec.struct_size = sizeof(exec);
	exec.device_id = device_id;
	NewRequest(&r, GC_SVC_DEVICE_INFO, GC_F32, 0, 0);
	st = Submit(&r, &exec, true, NULL);
	if (st == GC_OK)
		*info = r.info;
	return st;
}

static gc_status
ProxyDbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			const gc_dbscan_params *params, gc_dbscan_result *result)
{
	GcSvcRequest r;
	gc_status	st;

	NewRequest(&r, GC_SVC_DBSCAN, dtype, n, d);
	r.params.db = *params;
	r.result.db = *result;
	st = Submit(&r, exec, device_id_set, x);
	if (st == GC_OK)
		*result = r.result.db;
	return st;
}

static gc_status
ProxyKmeans(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			const gc_kmeans_params *params, gc_kmeans_result *result)
{
	GcSvcRequest r;
	gc_status	st;

	NewRequest(&r, GC_SVC_KMEANS, dtype, n, d);
	r.params.km = *params;
	r.result.km = *result;
	st = Submit(&r, exec, device_id_set, x);
	if (st == GC_OK)
		*result = r.result.km;
	return st;
}

static gc_status
ProxyDensityPeaks(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				  const gc_dpeaks_params *params, gc_dpeaks_result *result)
{
	GcSvcRequest r;
	gc_status	st;

	NewRequest(&r, GC_SVC_DPEAKS, dtype, n, d);
	r.params.dp = *params;
	r.result.dp = *result;
	st = Submit(&r, exec, device_id_set, x);
	if (st == GC_OK)
		*result = r.result.dp;
	return st;
}

static gc_status
ProxyKmeansAssign(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
				  const gc_kmeans_assign_params *params, gc_kmeans_assign_result *result)
{
	GcSvcRequest r;
	gc_status	st;

	NewRequest(&r, GC_SVC_KMEANS_ASSIGN, dtype, n, d);
	r.params.ka = *params;
	r.result.ka = *result;
	st = Submit(&r, exec, device_id_set, x);
	if (st == GC_OK)
		*result = r.result.ka;
	return st;
}

static gc_status
ProxyHdbscan(const gc_exec *exec, const void *x, gc_dtype dtype, int64_t n, int32_t d,
			 const gc_hdbscan_params *params, gc_hdbscan_result *result)
{
	GcSvcRequest r;
	gc_status	st;

	NewRequest(&r, GC_SVC_HDBSCAN, dtype, n, d);
	r.params.hd = *params;
	r.result.hd = *result;
	if (result->tree)
	{
		r.has_tree = true;
		r.tree = *result->tree;
	}
	st = Submit(&r, exec, device_id_set, x);
	if (st == GC_OK)
	{
		*result = r.result.hd;
		if (result->tree)
			*result->tree = r.tree;
	}
	return st;
}

static const gc_backend_api proxy_api = {
	.abi_version = GC_ABI_VERSION,
	.struct_size = sizeof(gc_backend_api),
	.name = "gpu",
	.last_error = ProxyLastError,
	.device_count = ProxyDeviceCount,
	.device_info = ProxyDeviceInfo,
	.release = ProxyRelease,
	.dbscan = ProxyDbscan,
	.kmeans = ProxyKmeans,
	.density_peaks = ProxyDensityPeaks,
	.kmeans_assign = ProxyKmeansAssign,
	.hdbscan = ProxyHdbscan,
};

const gc_backend_api *
GcServiceApi(char *reason, size_t reasonlen, gc_status *why)
{
	if (!WaitServiceReady())
	{
		if (why)
			*why = GC_ERR_UNAVAILABLE;
		if (reason && reasonlen > 0)
			strlcpy(reason, "The gpuclust GPU service is not running (gpuclust is in shared_preload_libraries "
					"and the service computes every GPU call; the postmaster restarts it when it stops).",
					reasonlen);
		return NULL;
	}
	if (gc_service->ndevices == 0)
	{
		if (why)
			*why = gc_service->why;
		if (reason && reasonlen > 0)
			snprintf(reason, reasonlen, "The gpuclust GPU service found no GPU: %s", gc_service->reason);
		return NULL;
	}
	if (why)
		*why = GC_OK;
	if (reason && reasonlen > 0)
		reason[0] = '\0';
	return &proxy_api;
}

/* ----------------------------------------------------------------- SQL */

/* Starts a materialize-mode result of the function's row type. */
static Tuplestorestate *
StartRows(FunctionCallInfo fcinfo, TupleDesc *desc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	Tuplestorestate *ts;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) || !(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	*desc = CreateTupleDescCopy(*desc);
	ts = tuplestore_begin_heap(false, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = *desc;
	MemoryContextSwitchTo(oldcxt);
	return ts;
}

PG_FUNCTION_INFO_V1(gpuclust_service);

/*
 * gpuclust_service(): one row per device of the running service, with its
 * requests running and queued and the memory they reserved; no rows when
 * the service is not running.
 */
Datum
gpuclust_service(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts = StartRows(fcinfo, &desc);
	GcSvcDevice devs[GC_SVC_MAX_DEVICES];
	int			ndev = 0;
	int			pid = 0;
	char		backend[16] = "";

	if (GcServiceEnabled())
	{
		LWLockAcquire(gc_service->lock, LW_SHARED);
		if (gc_service->ready)
		{
			ndev = gc_service->ndevices;
			memcpy(devs, gc_service->devices, sizeof(devs));
			pid = gc_service->service_pid;
			strlcpy(backend, gc_service->backend_name, sizeof(backend));
		}
		LWLockRelease(gc_service->lock);
	}
	for (int i = 0; i < ndev; i++)
	{
		Datum		values[9];
		bool		nulls[9] = {false};

		values[0] = Int32GetDatum(devs[i].info.device_id);
		values[1] = CStringGetTextDatum(devs[i].info.name);
		values[2] = CStringGetTextDatum(backend);
		values[3] = Int32GetDatum(pid);
		values[4] = Int32GetDatum(devs[i].threads);
		values[5] = Int32GetDatum(devs[i].running);
		values[6] = Int32GetDatum(devs[i].queued);
		values[7] = Int64GetDatum(devs[i].reserved);
		values[8] = Int64GetDatum(devs[i].budget);
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(gpuclust_service_requests);

/* gpuclust_service_requests(): one row per request the service holds, queued or running. */
Datum
gpuclust_service_requests(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts = StartRows(fcinfo, &desc);
	GcSvcSlot  *copy;
	int			nslots = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (!GcServiceEnabled())
		return (Datum) 0;
	copy = palloc(sizeof(GcSvcSlot) * gc_service->nslots);
	LWLockAcquire(gc_service->lock, LW_SHARED);
	for (int i = 0; i < gc_service->nslots; i++)
		if (gc_service->slots[i].state != GC_SVC_FREE)
			copy[nslots++] = gc_service->slots[i];
	LWLockRelease(gc_service->lock);
	for (int i = 0; i < nslots; i++)
	{
		GcSvcSlot  *s = &copy[i];
		Datum		values[9];
		bool		nulls[9] = {false};
		const char *state;

		switch (s->state)
		{
			case GC_SVC_SUBMITTED:
			case GC_SVC_QUEUED:
				state = "queued";
				break;
			case GC_SVC_RUNNING:
				state = s->cancel ? "cancelling" : "running";
				break;
			default:
				state = "done";
				break;
		}
		values[0] = Int32GetDatum(s->orphaned ? 0 : s->pid);
		nulls[0] = s->orphaned;
		values[1] = CStringGetTextDatum(state);
		values[2] = CStringGetTextDatum(GcSvcOpName(s->op));
		values[3] = Int32GetDatum(s->device_id);
		nulls[3] = s->device_id == GC_SVC_ANY_DEVICE;
		values[4] = Int64GetDatum(s->rows);
		values[5] = Int32GetDatum(s->dims);
		values[6] = Int64GetDatum(s->memory);
		values[7] = TimestampTzGetDatum(s->submitted);
		values[8] = TimestampTzGetDatum(s->started);
		nulls[8] = s->started == 0;
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	(void) now;
	return (Datum) 0;
}
