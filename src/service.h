/*
 * service.h
 *    The GPU service (service.c, service_main.c): one background worker that
 *    owns the GPU for the whole server and runs every backend's GPU calls,
 *    started when gpuclust is in shared_preload_libraries.
 */
#ifndef GPUCLUST_SERVICE_H
#define GPUCLUST_SERVICE_H

#include "gpuclust.h"

#include "utils/guc.h"

/* gpuclust.gpu_queue_timeout, in milliseconds; 0: wait without limit. */
extern int	gc_gpu_queue_timeout_guc;

/*
 * From _PG_init: the service's settings, and while shared_preload_libraries
 * is being processed (and gpuclust.service is on) its shared memory and
 * its background worker.
 */
extern void GcServiceInit(void);

/*
 * The check and assign hooks of gpuclust.device_id: they note whether the
 * value was set (in postgresql.conf, ALTER ROLE or DATABASE, SET) or is the
 * default.  The service sends a call whose device was not set to the least
 * loaded GPU; a set device_id pins it.
 */
extern bool GcDeviceIdCheck(int *newval, void **extra, GucSource source);
extern void GcDeviceIdAssign(int newval, void *extra);

/* True in the service process, which loads the back end itself. */
extern bool gc_in_service;

/* Whether this process sends its GPU calls to the service (it was registered at start). */
extern bool GcServiceEnabled(void);

/*
 * The service's api table (a proxy of gc_backend_api that sends each call to
 * the service and waits for its answer), or NULL with the reason in
 * reason and the status in *why when the service is not running or found
 * no GPU.
 */
extern const gc_backend_api *GcServiceApi(char *reason, size_t reasonlen, gc_status *why);

/* The background worker's entry point, named in its registration. */
extern PGDLLEXPORT void GcServiceMain(Datum arg);

#endif							/* GPUCLUST_SERVICE_H */
