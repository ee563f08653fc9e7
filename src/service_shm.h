/*
 * service_shm.h
 *    What the GPU service and the backends share: the service's state and
 *    the request slots in the server's shared memory, and the layout of one
 *    request's dynamic shared memory segment (service.c is the backends'
 *    side, service_main.c the service's).
 *
 * A request's life, slot->state (changed under GcServiceShared.lock):
 *   FREE -> SUBMITTED   a backend copied its rows and parameters into a DSM
 *                       segment and set the service's latch;
 *   -> QUEUED           the service attached the segment;
 *   -> RUNNING          admitted (a worker thread and the memory estimate
 *                       free on its device, the least loaded one when the
 *                       session did not set gpuclust.device_id), handed to
 *                       a worker thread;
 *   -> DONE             answered, cancelled, timed out in the queue or failed
 *                       by a stopping service; the service detached and set
 *                       the backend's latch;
 *   -> FREE             the backend read the answer (or, for a backend that
 *                       went away, the service).
 */
#ifndef GPUCLUST_SERVICE_SHM_H
#define GPUCLUST_SERVICE_SHM_H

#include "postgres.h"

#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "backend.h"

#define GC_SVC_MAX_DEVICES 16

/* slot->device_id of a request that may run on any device (until admitted) */
#define GC_SVC_ANY_DEVICE (-1)

typedef enum GcSvcState
{
	GC_SVC_FREE = 0,
	GC_SVC_SUBMITTED,
	GC_SVC_QUEUED,
	GC_SVC_RUNNING,
	GC_SVC_DONE
} GcSvcState;

typedef enum GcSvcOp
{
	GC_SVC_DEVICE_INFO = 0,
	GC_SVC_DBSCAN,
	GC_SVC_KMEANS,
	GC_SVC_DPEAKS,
	GC_SVC_KMEANS_ASSIGN,
	GC_SVC_HDBSCAN
} GcSvcOp;

/* One request slot; a backend has at most one at a time. */
typedef struct GcSvcSlot
{
	GcSvcState	state;
	int			pid;			/* the backend's */
	int			session;		/* the queue's turns: the leader's pid for a parallel worker, else pid */
	Latch	   *latch;			/* the backend's, set when the state becomes DONE */
	uint64		generation;		/* of the service that took it */
	uint64		ticket;			/* arrival order, within a session */
	dsm_handle	handle;
	GcSvcOp		op;
	int32		device_id;		/* GC_SVC_ANY_DEVICE: the service chooses */
	int64		rows;
	int32		dims;
	int64		memory;			/* the estimate the admission reserves */
	int32		queue_timeout_ms;	/* 0: none */
	TimestampTz submitted;
	TimestampTz started;
	volatile int cancel;		/* set by the backend; read by the worker thread */
	gc_status	answer;			/* the status, once DONE (also when the segment was never attached) */
	bool		orphaned;		/* the backend went away: the service frees the slot */
} GcSvcSlot;

/* Per device, as the service runs it. */
typedef struct GcSvcDevice
{
	gc_device_info info;		/* free_memory as read after the last request */
	int32		threads;
	int32		running;
	int32		queued;			/* waiting requests that may run here (set to it or to any) */
	int64		budget;			/* bytes the requests running at once may reserve */
	int64		reserved;		/* bytes the running requests reserved */
} GcSvcDevice;

typedef struct GcServiceShared
{
	LWLock	   *lock;
	int			service_pid;	/* 0: not running */
	Latch	   *service_latch;
	uint64		generation;		/* +1 at each start of the service */
	bool		ready;			/* devices known, requests taken */
	char		backend_name[16];	/* "gpu", or "cpu" for the test stand-in */
	char		reason[512];	/* why there is no device, when ndevices is 0 */
	gc_status	why;
	int32		ndevices;
	GcSvcDevice devices[GC_SVC_MAX_DEVICES];
	uint64		next_ticket;
	int32		nslots;
	GcSvcSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} GcServiceShared;

extern GcServiceShared *gc_service;

/* Where gpuclust.service_backend sends the service. */
typedef enum GcSvcBackend
{
	GC_SVC_BACKEND_GPU = 0,
	GC_SVC_BACKEND_CPU = 1
} GcSvcBackend;

extern int	gc_service_backend_guc;
extern int	gc_service_threads_guc;
extern int	gc_service_memory_budget_guc;	/* MB; 0: a share of the device */
extern int	gc_service_test_delay_guc;
extern int	gc_service_test_devices_guc;
extern bool gc_service_test_fault_guc;

/* The budget's share of the device's memory when gpuclust.service_memory_budget is 0. */
#define GC_SVC_DEFAULT_BUDGET_SHARE 0.8

/*
 * The head of a request's DSM segment; x and the other arrays follow at the
 * offsets it gives.  The pointer fields of params and result are the
 * backend's own and mean nothing in the service: each side rewrites them
 * (GcSvcBuffers lists them, in the same order on both sides).
 */
typedef struct GcSvcRequest
{
	GcSvcOp		op;
	gc_dtype	dtype;
	int64		n;
	int32		d;
	int32		device_id;		/* the device that runs it (the service writes its choice) */
	bool		has_tuning;
	gc_tuning	tuning;
	int32		test_delay_ms;	/* the CPU stand-in waits this long first (tests) */
	bool		test_fault;		/* gpuclust.service_test_fault: break the context instead (tests) */
	union
	{
		gc_dbscan_params db;
		gc_kmeans_params km;
		gc_dpeaks_params dp;
		gc_kmeans_assign_params ka;
		gc_hdbscan_params hd;
	}			params;
	union
	{
		gc_dbscan_result db;
		gc_kmeans_result km;
		gc_dpeaks_result dp;
		gc_kmeans_assign_result ka;
		gc_hdbscan_result hd;
	}			result;
	bool		has_tree;
	gc_hdbscan_tree tree;
	int64		x_offset;
#define GC_SVC_MAX_BUFS 16
	int64		offset[GC_SVC_MAX_BUFS];	/* -1: NULL */
	/* answers */
	gc_status	status;
	gc_error	error;
	gc_timing	timing;
	gc_device_info info;
} GcSvcRequest;

/* One array of a request: the address of its pointer field, its bytes, its direction. */
typedef struct GcSvcBuf
{
	void	  **field;
	int64		bytes;
	bool		in;				/* copied into the segment by the backend */
} GcSvcBuf;

/* The arrays of request r besides x, in a fixed order; returns how many. */
static inline int
GcSvcBuffers(GcSvcRequest *r, GcSvcBuf *b)
{
	int			nb = 0;
	int64		n = r->n;
	int64		d = r->d;
	int64		k;
	int64		cap;

#define GC_SVC_BUF(f, bytes_, in_) \
	(b[nb].field = (void **) (f), b[nb].bytes = (bytes_), b[nb].in = (in_), nb++)
	switch (r->op)
	{
		case GC_SVC_DEVICE_INFO:
			break;
		case GC_SVC_DBSCAN:
			GC_SVC_BUF(&r->result.db.cluster, n * 4, false);
			GC_SVC_BUF(&r->result.db.is_core, n, false);
			break;
		case GC_SVC_KMEANS:
			k = r->params.km.k;
			GC_SVC_BUF(&r->params.km.initial_centroids, k * d * 8, true);
			GC_SVC_BUF(&r->result.km.labels, n * 4, false);
			GC_SVC_BUF(&r->result.km.distance, n * 8, false);
			GC_SVC_BUF(&r->result.km.centroids, k * d * 8, false);
			GC_SVC_BUF(&r->result.km.sizes, k * 8, false);
			GC_SVC_BUF(&r->result.km.inertia, k * 8, false);
			break;
		case GC_SVC_DPEAKS:
			GC_SVC_BUF(&r->result.dp.cluster, n * 4, false);
			GC_SVC_BUF(&r->result.dp.rho, n * 8, false);
			GC_SVC_BUF(&r->result.dp.delta, n * 8, false);
			GC_SVC_BUF(&r->result.dp.is_center, n, false);
			break;
		case GC_SVC_KMEANS_ASSIGN:
			k = r->params.ka.k;
			GC_SVC_BUF(&r->params.ka.centroids, k * d * 8, true);
			GC_SVC_BUF(&r->result.ka.labels, n * 4, false);
			GC_SVC_BUF(&r->result.ka.distance, n * 8, false);
			break;
		case GC_SVC_HDBSCAN:
			GC_SVC_BUF(&r->result.hd.cluster, n * 4, false);
			GC_SVC_BUF(&r->result.hd.probability, n * 8, false);
			GC_SVC_BUF(&r->result.hd.outlier_score, n * 8, false);
			GC_SVC_BUF(&r->result.hd.core_distance, n * 8, false);
			if (r->has_tree)
			{
				cap = r->tree.capacity;
				GC_SVC_BUF(&r->tree.parent, cap * 8, false);
				GC_SVC_BUF(&r->tree.child, cap * 8, false);
				GC_SVC_BUF(&r->tree.child_row, cap * 8, false);
				GC_SVC_BUF(&r->tree.lambda_val, cap * 8, false);
				GC_SVC_BUF(&r->tree.child_size, cap * 8, false);
				GC_SVC_BUF(&r->tree.node_selected, cap, false);
				GC_SVC_BUF(&r->tree.node_cluster, cap * 4, false);
			}
			break;
	}
#undef GC_SVC_BUF
	return nb;
}

/* The algorithm's name in gpuclust_service_requests(). */
static inline const char *
GcSvcOpName(GcSvcOp op)
{
	static const char *const names[] = {"device_info", "dbscan", "kmeans", "density_peaks",
	"kmeans_assign", "hdbscan"};

	return (unsigned) op < lengthof(names) ? names[op] : "?";
}

#endif							/* GPUCLUST_SERVICE_SHM_H */
