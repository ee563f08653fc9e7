/*
 * tuning.h
 *    gc_tuning from the settings: gpuclust.cpu_threads and the developer
 *    settings (tuning.c).
 */
#ifndef GPUCLUST_TUNING_H
#define GPUCLUST_TUNING_H

#include "postgres.h"

#include "backend.h"

extern gc_tuning gc_tuning_gucs;	/* developer settings, see GcTuningDefineGucs */

/* Copies the settings into gc_tuning_gucs (at the start of every call). */
extern void SyncTuning(void);

/* Defines gpuclust.cpu_threads and the developer settings. */
extern void GcTuningDefineGucs(void);

#endif							/* GPUCLUST_TUNING_H */
