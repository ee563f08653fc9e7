/*
 * unit.h
 *    A minimal check harness for the core unit tests: CHECK counts and
 *    reports failures, UNIT_DONE prints "N passed, N failed" and sets the
 *    exit status; unit_exec and unit_error reach the CPU back end through
 *    its table, gc_cpu_api(), as the glue does.
 */
#ifndef GPUCLUST_UNIT_H
#define GPUCLUST_UNIT_H

#include <stdio.h>
#include <string.h>

#include "backend.h"

static int	unit_passed = 0;
static int	unit_failed = 0;

/* Threads of the CPU back end for the calls of unit_exec (0: its default, every CPU). */
static int	unit_threads = 0;
/* tuning.dbscan_sweep of the calls of unit_exec (-1: the CPU DBSCAN always builds its grid) */
static int	unit_dbscan_sweep = 0;
/* tuning.cpu_blas of the calls of unit_exec (-1: k-means's exact loops alone, never OpenBLAS) */
static int	unit_cpu_blas = 0;
static gc_tuning unit_tuning;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			unit_passed++; \
		else \
		{ \
			unit_failed++; \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

#define UNIT_DONE() \
	do { \
		printf("%s: %d passed, %d failed\n", __FILE__, unit_passed, unit_failed); \
		return unit_failed ? 1 : 0; \
	} while (0)

/*
 * An exec record for the CPU back end: default tuning but for unit_threads
 * and unit_dbscan_sweep,
 * the cancel callback and timing given (or NULL).
 */
static inline gc_exec
unit_exec(gc_cancel_fn cancel, gc_timing *timing)
{
	gc_exec		e;

	memset(&e, 0, sizeof(e));
	unit_tuning = gc_tuning_defaults();
	unit_tuning.cpu_threads = unit_threads;
	unit_tuning.dbscan_sweep = unit_dbscan_sweep;
	unit_tuning.cpu_blas = unit_cpu_blas;
	e.struct_size = sizeof(e);
	e.device_id = 0;
	e.tuning = &unit_tuning;
	e.cancel = cancel;
	e.cancel_arg = NULL;
	e.timing = timing;
	return e;
}

/* The message of the CPU back end's last error in this thread ("" if none). */
static inline const char *
unit_error(void)
{
	return gc_cpu_api()->last_error()->message;
}

/* HDBSCAN parameters: EOM, euclidean, no epsilon, the rest as given. */
static inline gc_hdbscan_params
unit_hdbscan_params(int32_t min_cluster_size, int32_t min_samples)
{
	gc_hdbscan_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.min_cluster_size = min_cluster_size;
	p.min_samples = min_samples;
	p.method = GC_HDBSCAN_EOM;
	p.metric = GC_METRIC_EUCLIDEAN;
	return p;
}

/* The thread counts every answer is compared over, bit for bit. */
static const int unit_thread_counts[] = {1, 2, 3, 8, 16};
#define UNIT_THREAD_COUNTS ((int) (sizeof(unit_thread_counts) / sizeof(unit_thread_counts[0])))

#endif
