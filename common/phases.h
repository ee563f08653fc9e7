/*
 * phases.h
 *    The named phases of each algorithm: the places of gc_timing.phase_ms
 *    (common/backend.h) and their names in the timing NOTICE.  Both back
 *    ends fill every phase of an algorithm they run, at the same places, as
 *    ArborX names its profiling regions: a phase's time is comparable
 *    between the CPU and the GPU.
 *
 * Plain C, for gcc and nvcc.  A new algorithm adds its enum and its names
 * here (at most GC_PHASES of them).
 */
#ifndef GPUCLUST_PHASES_H
#define GPUCLUST_PHASES_H

#include <stddef.h>

/* Phases per algorithm: the length of gc_timing.phase_ms. */
#define GC_PHASES 4

/* DBSCAN: the grid (or the sweep's sort), core points, unions of core points, border points and numbering. */
enum
{
	GC_DBSCAN_PHASE_INDEX = 0,
	GC_DBSCAN_PHASE_CORE = 1,
	GC_DBSCAN_PHASE_UNION = 2,
	GC_DBSCAN_PHASE_BORDER = 3
};
static const char *const gc_dbscan_phase_names[GC_PHASES] = {"index", "core", "union", "border"};

/* k-means: statistics and initial centroids, the iterations, the final pass; and the mean iteration (not a sum). */
enum
{
	GC_KMEANS_PHASE_INIT = 0,
	GC_KMEANS_PHASE_ITERATIONS = 1,
	GC_KMEANS_PHASE_FINAL = 2,
	GC_KMEANS_PHASE_PER_ITERATION = 3
};
static const char *const gc_kmeans_phase_names[GC_PHASES] = {"init", "iterations", "final", "per_iteration"};

/* k-means assignment to given centroids: preparation, the assignment, the exact distances. */
enum
{
	GC_KMEANS_ASSIGN_PHASE_PREPARE = 0,
	GC_KMEANS_ASSIGN_PHASE_ASSIGN = 1,
	GC_KMEANS_ASSIGN_PHASE_DISTANCES = 2
};
static const char *const gc_kmeans_assign_phase_names[GC_PHASES] = {"prepare", "assign", "distances", NULL};

/* Density peaks: the cutoff distance, local density, distance to a denser point, assignment. */
enum
{
	GC_DPEAKS_PHASE_DC = 0,
	GC_DPEAKS_PHASE_RHO = 1,
	GC_DPEAKS_PHASE_DELTA = 2,
	GC_DPEAKS_PHASE_ASSIGN = 3
};
static const char *const gc_dpeaks_phase_names[GC_PHASES] = {"dc", "rho", "delta", "assignment"};

/* HDBSCAN: core distances, the minimum spanning tree, the rest (hierarchy, condensed tree, selection, scores). */
enum
{
	GC_HDBSCAN_PHASE_CORE = 0,
	GC_HDBSCAN_PHASE_MST = 1,
	GC_HDBSCAN_PHASE_TREE = 2
};
static const char *const gc_hdbscan_phase_names[GC_PHASES] = {"core", "mst", "tree", NULL};

/* The GPU's start-up (gc_init_part of common/backend.h): its parts in the timing NOTICE. */
static const char *const gc_init_part_names[5] = {"driver", "load", "context", "cublas", "alloc"};

#endif							/* GPUCLUST_PHASES_H */
