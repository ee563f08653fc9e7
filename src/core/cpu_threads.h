/*
 * cpu_threads.h
 *    How many threads the CPU back end runs for one call: its limits and
 *    its default, for the pool (pool.h) and for the setting that chooses
 *    the count (gpuclust.cpu_threads, src/tuning.c), which needs nothing
 *    else of the pool.
 */
#ifndef GPUCLUST_CPU_THREADS_H
#define GPUCLUST_CPU_THREADS_H

/* The most threads one call runs, whatever is asked for. */
#define GC_POOL_MAX_THREADS 256
/* The default thread count is capped here (the CPUs the process may run on otherwise). */
#define GC_POOL_DEFAULT_MAX 64

/* The threads a call runs when the caller asks for 0: the CPUs this process may run on, capped. */
int			gc_pool_default_threads(void);

#endif							/* GPUCLUST_CPU_THREADS_H */
