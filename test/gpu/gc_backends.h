/*
 * gc_backends.h
 *    What the harnesses of test/gpu and bench/ share besides their data
 *    (test/data/gc_testdata.h): opening the GPU back end the way the
 *    extension does (dlopen of gpuclust_cuda.so, then its one symbol
 *    gpuclust_cuda_api(), common/backend.h), the text of a back end's last
 *    error, a cancel callback that says yes after a number of questions or
 *    after a deadline, and a clock.
 *
 * Plain C that also compiles as C++ (bench/kmeans_bench.cu); header only.
 */
#ifndef GPUCLUST_GC_BACKENDS_H
#define GPUCLUST_GC_BACKENDS_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* Monotonic wall clock in milliseconds. */
static inline double
gc_h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/*
 * The path of the GPU back end: the one given, else $GPUCLUST_CUDA_SO,
 * else ./gpuclust_cuda.so (the root of the tree, where `make` puts it).
 */
static inline const char *
gc_h_cuda_path(const char *given)
{
	const char *env = getenv("GPUCLUST_CUDA_SO");

	if (given && *given)
		return given;
	if (env && *env)
		return env;
	return "./gpuclust_cuda.so";
}

/*
 * Opens the GPU back end at path and checks its api table.  Returns the
 * table, or NULL with the reason in why [size].
 */
static inline const gc_backend_api *
gc_h_open_cuda(const char *path, char *why, size_t size)
{
	void	   *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	gc_cuda_api_fn fn;
	const gc_backend_api *api;

	if (!h)
	{
		snprintf(why, size, "cannot load the GPU back end %s: %s", path, dlerror());
		return NULL;
	}
	fn = (gc_cuda_api_fn) dlsym(h, GC_CUDA_API_SYMBOL);
	if (!fn)
	{
		snprintf(why, size, "%s has no symbol %s", path, GC_CUDA_API_SYMBOL);
		return NULL;
	}
	api = fn();
	if (!api || api->abi_version != GC_ABI_VERSION || api->struct_size != sizeof(gc_backend_api))
	{
		snprintf(why, size, "%s: api table of another version (abi %u, size %u; this harness: abi %d, size %zu)",
				 path, api ? (unsigned) api->abi_version : 0u, api ? (unsigned) api->struct_size : 0u,
				 GC_ABI_VERSION, sizeof(gc_backend_api));
		return NULL;
	}
	return api;
}

/*
 * The GPU back end with at least one device, or NULL with the reason in
 * why [size]; *info gets device 0.
 */
static inline const gc_backend_api *
gc_h_open_gpu(const char *path, gc_device_info *info, char *why, size_t size)
{
	const gc_backend_api *api = gc_h_open_cuda(path, why, size);
	int32_t		count = 0;

	if (!api)
		return NULL;
	if (api->device_count(&count) != GC_OK || count < 1)
	{
		snprintf(why, size, "no usable GPU: %s", api->last_error()->message);
		return NULL;
	}
	if (api->device_info(0, info) != GC_OK)
	{
		snprintf(why, size, "cannot read device 0: %s", api->last_error()->message);
		return NULL;
	}
	return api;
}

/* "message (detail) hint" of a back end's last error, into buf [size]. */
static inline const char *
gc_h_error_text(const gc_backend_api *api, char *buf, size_t size)
{
	const gc_error *e = api->last_error();
	int			len = snprintf(buf, size, "%s%s%s%s", e->message, e->detail[0] ? " (" : "", e->detail,
							   e->detail[0] ? ")" : "");

	if (e->hint[0] && len >= 0 && (size_t) len < size)
		len += snprintf(buf + len, size - (size_t) len, " hint: %s", e->hint);
	return buf;
}

static inline const char *
gc_h_status_name(gc_status s)
{
	switch (s)
	{
		case GC_OK:
			return "GC_OK";
		case GC_ERR_NOT_BUILT:
			return "GC_ERR_NOT_BUILT";
		case GC_ERR_NO_DRIVER:
			return "GC_ERR_NO_DRIVER";
		case GC_ERR_NO_DEVICE:
			return "GC_ERR_NO_DEVICE";
		case GC_ERR_OUT_OF_MEMORY:
			return "GC_ERR_OUT_OF_MEMORY";
		case GC_ERR_CANCELLED:
			return "GC_ERR_CANCELLED";
		case GC_ERR_INVALID_ARGUMENT:
			return "GC_ERR_INVALID_ARGUMENT";
		case GC_ERR_CUDA:
			return "GC_ERR_CUDA";
		case GC_ERR_QUEUE_TIMEOUT:
			return "GC_ERR_QUEUE_TIMEOUT";
		case GC_ERR_UNAVAILABLE:
			return "GC_ERR_UNAVAILABLE";
		case GC_ERR_INTERNAL:
			return "GC_ERR_INTERNAL";
	}
	return "GC_ERR_?";
}

/*
 * A cancel callback: answers yes from question yes_after on (<= 0: never),
 * or once the clock passes deadline_ms (0: no deadline).  Counts the
 * questions and notes when it first said yes.
 */
typedef struct gc_h_cancel
{
	int			calls;
	int			yes_after;
	double		deadline_ms;
	double		t_yes;
} gc_h_cancel;

static inline int
gc_h_cancel_fn(void *arg)
{
	gc_h_cancel *c = (gc_h_cancel *) arg;

	c->calls++;
	if ((c->yes_after > 0 && c->calls >= c->yes_after) ||
		(c->deadline_ms > 0 && gc_h_now_ms() > c->deadline_ms))
	{
		if (c->t_yes == 0)
			c->t_yes = gc_h_now_ms();
		return 1;
	}
	return 0;
}

/* An exec record: device 0, the tuning given (NULL: defaults), cancel and timing as given. */
static inline gc_exec
gc_h_exec(const gc_tuning *tuning, gc_h_cancel *cancel, gc_timing *timing)
{
	gc_exec		e;

	memset(&e, 0, sizeof(e));
	e.struct_size = (uint32_t) sizeof(gc_exec);
	e.device_id = 0;
	e.tuning = tuning;
	e.cancel = cancel ? gc_h_cancel_fn : NULL;
	e.cancel_arg = cancel;
	e.timing = timing;
	if (timing)
		memset(timing, 0, sizeof(*timing));
	return e;
}

#endif							/* GPUCLUST_GC_BACKENDS_H */
