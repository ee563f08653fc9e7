/*
 * buffer.h
 *    The gather's row buffers: malloc'd, grown as rows arrive, faulted in
 *    ahead of the rows (buffer.c), and the gather's developer settings
 *    gpuclust.gather_huge_pages and gpuclust.gather_prefault.
 */
#ifndef GPUCLUST_BUFFER_H
#define GPUCLUST_BUFFER_H

#include "postgres.h"

#ifdef __linux__
#include <pthread.h>
#endif

#include "port/atomics.h"
#include "utils/palloc.h"

struct GatherReceiver;

/*
 * With gpuclust.gather_prefault, a thread faults in the pages of the feature
 * buffer ahead of the rows, so that the kernel's work of finding and zeroing
 * pages runs beside the gather instead of in it.  The thread does nothing but
 * madvise calls on that buffer, with every signal blocked; it stops at the
 * end of the buffer, when told, or on the first call that fails.  The buffer
 * neither moves nor goes while it runs: StopPrefault comes first.
 */
typedef struct Prefault
{
#ifdef __linux__
	pthread_t	thread;
#endif
	bool		running;
	char	   *start;			/* page-aligned */
	Size		bytes;			/* whole pages from start */
	pg_atomic_uint64 written;	/* bytes from start the gather has reached */
	pg_atomic_uint64 skip;		/* bytes from start the gather faulted in itself */
	pg_atomic_uint64 done;		/* bytes from start the thread has faulted in */
	pg_atomic_uint32 stop;
} Prefault;

/* The malloc'd row buffers, freed by a reset callback of the context they belong to. */
typedef struct GatherBuffers
{
	MemoryContextCallback cb;
	void	   *x;
	int64	   *ids;
	Prefault	prefault;
} GatherBuffers;

/* developer settings of the gather (buffer.c) */
extern bool gc_gather_huge_pages_guc;
extern bool gc_gather_prefault_guc;

/* Defines gpuclust.gather_huge_pages and gpuclust.gather_prefault. */
extern void GcBufferDefineGucs(int flags);

/* Makes room for the next row (see buffer.c). */
extern void MakeRoom(struct GatherReceiver *st);

/* Allocates the row buffers for exactly rows rows at once (the parallel gather's merge). */
extern void AllocRows(struct GatherReceiver *st, int64 rows, bool populate);

/* Faults in the whole pages of [start, end) with one call (Linux 5.14); false where it cannot. */
extern bool Populate(void *start, void *end);

/* Stops the prefault thread and waits for it. */
extern void StopPrefault(Prefault *pf);

#endif							/* GPUCLUST_BUFFER_H */
