/*
 * gpu.h
 *    The GPU back end, loaded lazily on first use (gpu.c).
 */
#ifndef GPUCLUST_GPU_H
#define GPUCLUST_GPU_H

#include "gpuclust.h"

/* gpu.c: the lazily loaded GPU back end. */
extern const gc_backend_api *GcGpuApi(char *reason, size_t reasonlen,
									  gc_status *why);
extern void GcGpuReleaseCallback(void *arg);
extern void GcGpuTakeInit(double *init_ms);

#endif							/* GPUCLUST_GPU_H */
