/*
 * buffer.c
 *    The gather's row buffers: the first size (the planner's estimate when it
 *    can be trusted), growth, transparent huge pages, and the faulting in of
 *    pages ahead of the rows, by the gather itself and by the prefault
 *    thread of gpuclust.gather_prefault.  The parallel gather of many
 *    workers writes into these buffers too.
 */
#include "postgres.h"

#include <stdlib.h>
#include <unistd.h>

#ifdef __linux__
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#endif

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "buffer.h"
#include "metric.h"
#include "receiver.h"
#include "tuning.h"

#define GATHER_FIRST_ROWS 4096
/* ... but no more than this many bytes before the second row arrives (wide rows) */
#define GATHER_FIRST_BYTES (INT64CONST(16) << 20)
/*
 * the row buffers are faulted in this many bytes ahead of the rows written:
 * few enough that the lines the kernel has just zeroed can still be in the
 * core's cache when the rows are written to them (8MB ahead, the gather of
 * wide rows took about a tenth longer), many enough that the madvise calls
 * cost nothing
 */
#define GATHER_POPULATE_BYTES (INT64CONST(256) << 10)
/* a planner's estimate of more rows than this many bytes hold is not trusted for the first size */
#define GATHER_PRESIZE_MAX_BYTES (INT64CONST(4) << 30)

/* the thread of gpuclust.gather_prefault: for a feature buffer of this size or more */
#define PREFAULT_MIN_BYTES ((Size) 64 << 20)
/* ... faulting in this much at a time, at most this far ahead of the rows */
#define PREFAULT_STEP ((Size) 2 << 20)
#define PREFAULT_AHEAD ((Size) 128 << 20)

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23	/* Linux 5.14; older kernels answer EINVAL */
#endif

bool		gc_gather_huge_pages_guc = false;
bool		gc_gather_prefault_guc = true;

#ifdef __linux__
/* The prefault thread: faults in the buffer, step by step, keeping ahead of the rows. */
static void *
PrefaultMain(void *arg)
{
	Prefault   *pf = (Prefault *) arg;
	Size		done = 0;

	while (done < pf->bytes && pg_atomic_read_u32(&pf->stop) == 0)
	{
		Size		len;
		Size		skip = (Size) pg_atomic_read_u64(&pf->skip);

		/* where the gather caught up and faulted in pages itself, go on after them */
		if (skip > done)
		{
			done = Min(skip, pf->bytes);
			pg_atomic_write_u64(&pf->done, done);
			continue;
		}
		if (done > pg_atomic_read_u64(&pf->written) + PREFAULT_AHEAD)
		{
			usleep(100);
			continue;
		}
		len = Min(PREFAULT_STEP, pf->bytes - done);
		if (madvise(pf->start + done, len, MADV_POPULATE_WRITE) != 0)
			break;
		done += len;
		pg_atomic_write_u64(&pf->done, done);
	}
	return NULL;
}
#endif

/* Starts the prefault thread on [x, x + bytes); false if it did not start. */
static bool
StartPrefault(Prefault *pf, void *x, Size bytes)
{
#ifdef __linux__
	uintptr_t	page = (uintptr_t) sysconf(_SC_PAGESIZE);
	uintptr_t	a = TYPEALIGN(page, (uintptr_t) x);
	uintptr_t	b = TYPEALIGN_DOWN(page, (uintptr_t) x + bytes);
	sigset_t	all;
	sigset_t	old;
	int			rc;

	if (b <= a)
		return false;
	pf->start = (char *) a;
	pf->bytes = b - a;
	pg_atomic_init_u64(&pf->written, 0);
	pg_atomic_init_u64(&pf->skip, 0);
	pg_atomic_init_u64(&pf->done, 0);
	pg_atomic_init_u32(&pf->stop, 0);
	/* signals are the backend's: the thread takes none */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&pf->thread, NULL, PrefaultMain, pf);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pf->running = (rc == 0);
	return pf->running;
#else
	return false;
#endif
}

/* Tells the gather's progress to the prefault thread: bytes of the buffer written. */
static inline void
PrefaultProgress(Prefault *pf, char *x, Size written)
{
	if (pf->running)
		pg_atomic_write_u64(&pf->written, x + written > pf->start ? (uint64) (x + written - pf->start) : 0);
}

/* Stops the prefault thread and waits for it (at most one step of madvise). */
void
StopPrefault(Prefault *pf)
{
#ifdef __linux__
	if (!pf->running)
		return;
	pg_atomic_write_u32(&pf->stop, 1);
	pthread_join(pf->thread, NULL);
	pf->running = false;
#endif
}

/* Frees the row buffers with the memory context they belong to. */
static void
FreeBuffers(void *arg)
{
	GatherBuffers *b = (GatherBuffers *) arg;

	StopPrefault(&b->prefault);
	free(b->x);
	free(b->ids);
	b->x = NULL;
	b->ids = NULL;
}

/*
 * With gpuclust.gather_huge_pages, asks for transparent huge pages for a row
 * buffer where the kernel leaves them to madvise: a gigabyte of 4 kB pages
 * is a quarter of a million page faults, each zeroing its page, and they
 * take as long as reading the rows.  Only advice; whether it pays depends on
 * the kernel's defrag setting and on how fragmented memory is (on a virtual
 * machine it was slower), hence a developer setting, off by default.
 */
static void
AdviseHugePages(void *p, Size bytes)
{
#if defined(MADV_HUGEPAGE)
	const uintptr_t huge = 2 * 1024 * 1024;
	uintptr_t	start = TYPEALIGN(huge, (uintptr_t) p);
	uintptr_t	end = TYPEALIGN_DOWN(huge, (uintptr_t) p + bytes);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#endif
}

/*
 * Makes room for one more row, doubling the buffers.  They are malloc'd and
 * grown with realloc, which moves large blocks by remapping their pages
 * (mremap) instead of copying them and touching fresh pages: doubling a
 * gigabyte through palloc and memcpy spent more time in page faults and
 * copies than reading the rows.  A reset callback on outcxt frees them, so
 * they live exactly as long as a palloc'd buffer would.
 */
static void
Grow(GatherReceiver *st)
{
	GcInput    *in = st->in;
	Size		esize = gc_dtype_size(in->dtype);
	int64		rowbytes = (int64) in->d * (int64) esize + (int64) sizeof(int64);
	int64		first = Max(1, Min(GATHER_FIRST_ROWS, GATHER_FIRST_BYTES / rowbytes));
	int64		cap = st->cap == 0 ? first : st->cap * 2;
	Size		xbytes;
	Size		ibytes;
	void	   *x;
	int64	   *ids;

	if (st->buffers == NULL)
	{
		st->buffers = MemoryContextAllocZero(st->outcxt, sizeof(GatherBuffers));
		st->buffers->cb.func = FreeBuffers;
		st->buffers->cb.arg = st->buffers;
		MemoryContextRegisterResetCallback(st->outcxt, &st->buffers->cb);
	}

	/*
	 * The first size is the planner's estimate of the rows when there is
	 * one, so that the buffers are allocated once: pages not written to are
	 * never faulted in, so an estimate too high costs address space only.
	 * Where that much cannot be had, the buffers start small and double.
	 */
	if (st->cap == 0 && st->est_rows > first &&
		st->est_rows <= (double) (GATHER_PRESIZE_MAX_BYTES / rowbytes))
	{
		int64		est = (int64) st->est_rows + 1;

		x = malloc((Size) est * in->d * esize + 1);
		ids = x == NULL ? NULL : malloc((Size) est * sizeof(int64));
		if (x != NULL && ids != NULL)
		{
			in->x = st->buffers->x = x;
			in->ids = st->buffers->ids = ids;
			if (gc_gather_huge_pages_guc)
				AdviseHugePages(x, (Size) est * in->d * esize);
			/* a thread beside the backend's, where the backend may run on more than one CPU */
			if (gc_gather_prefault_guc && gc_tuning_gucs.cpu_threads > 1 &&
				(Size) est * in->d * esize >= PREFAULT_MIN_BYTES)
				(void) StartPrefault(&st->buffers->prefault, x, (Size) est * in->d * esize);
			st->cap = est;
			return;
		}
		free(x);
	}
	xbytes = (Size) cap * in->d * esize;
	ibytes = (Size) cap * sizeof(int64);
	/* the buffer may move */
	StopPrefault(&st->buffers->prefault);
	/* realloc leaves the old block in place when it fails */
	x = (cap > MaxAllocHugeSize / ((Size) in->d * esize)) ? NULL :
		realloc(st->buffers->x, Max(xbytes, 1));
	if (x != NULL)
		in->x = st->buffers->x = x;
	ids = x == NULL ? NULL : realloc(st->buffers->ids, ibytes);
	if (ids != NULL)
		in->ids = st->buffers->ids = ids;
	if (x != NULL && ids != NULL && gc_gather_huge_pages_guc)
		AdviseHugePages(x, xbytes);
	if (x == NULL || ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory gathering the rows of the query"),
				 errdetail("%zu bytes are needed for %lld rows of %d features.",
						   xbytes + ibytes, (long long) cap, in->d),
				 errhint("Cluster fewer rows or fewer features at a time.")));
	st->cap = cap;
}

/*
 * Allocates the row buffers for exactly rows rows at once, freed with
 * st->outcxt as Grow's are: the parallel gather knows the count before it
 * writes the rows.  With populate, their pages are faulted in here (where
 * one thread writes them next).
 */
void
AllocRows(GatherReceiver *st, int64 rows, bool populate)
{
	GcInput    *in = st->in;
	Size		esize = gc_dtype_size(in->dtype);
	Size		xbytes;
	Size		ibytes = (Size) rows * sizeof(int64);
	void	   *x = NULL;
	int64	   *ids = NULL;

	Assert(st->buffers == NULL);
	st->buffers = MemoryContextAllocZero(st->outcxt, sizeof(GatherBuffers));
	st->buffers->cb.func = FreeBuffers;
	st->buffers->cb.arg = st->buffers;
	MemoryContextRegisterResetCallback(st->outcxt, &st->buffers->cb);
	xbytes = (in->d > 0 && rows > (int64) (MaxAllocHugeSize / ((Size) in->d * esize))) ? 0 :
		(Size) rows * in->d * esize;
	if (in->d == 0 || xbytes > 0)
		x = malloc(xbytes + 1);
	if (x != NULL)
		ids = malloc(ibytes + 1);
	st->buffers->x = x;
	st->buffers->ids = ids;
	if (x == NULL || ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory gathering the rows of the query"),
				 errdetail("%zu bytes are needed for %lld rows of %d features.",
						   (Size) rows * in->d * esize + ibytes, (long long) rows, in->d),
				 errhint("Cluster fewer rows or fewer features at a time.")));
	if (gc_gather_huge_pages_guc)
		AdviseHugePages(x, xbytes);
	/* every row is written next: the pages faulted in by one call each, not one by one */
	if (populate)
	{
		(void) Populate(x, (char *) x + xbytes);
		(void) Populate(ids, ids + rows);
	}
	in->x = x;
	in->ids = ids;
	st->cap = rows;
}

/*
 * Faults in the pages of [start, end) of a row buffer ahead of the rows
 * (whole pages inside the range only).  One madvise for megabytes of pages
 * costs less than a page fault per page, each a trap into the kernel; the
 * kernel still zeroes every page.  False where the kernel cannot (before
 * Linux 5.14) or will not.
 */
bool
Populate(void *start, void *end)
{
#if defined(__linux__)
	static uintptr_t page = 0;
	uintptr_t	a;
	uintptr_t	b;

	if (page == 0)
		page = (uintptr_t) sysconf(_SC_PAGESIZE);
	a = TYPEALIGN(page, (uintptr_t) start);
	b = TYPEALIGN_DOWN(page, (uintptr_t) end);
	return b <= a || madvise((void *) a, b - a, MADV_POPULATE_WRITE) == 0;
#else
	return false;
#endif
}

/*
 * Makes room for the next row: grows the buffers when they are full, and
 * faults in the next GATHER_POPULATE_BYTES of them ahead of the rows.
 */
void
MakeRoom(GatherReceiver *st)
{
	GcInput    *in = st->in;
	Size		rowsize = (Size) in->d * gc_dtype_size(in->dtype);
	int64		window;
	int64		upto;
	Prefault   *pf;

	if (in->n == st->cap)
		Grow(st);
	window = Max(1, GATHER_POPULATE_BYTES / ((int64) rowsize + (int64) sizeof(int64)));
	upto = Min(st->cap, in->n + window);
	pf = &st->buffers->prefault;
	PrefaultProgress(pf, (char *) in->x, (Size) in->n * rowsize);
	if (!st->no_populate && upto > in->n)
	{
		char	   *from = (char *) in->x + (Size) in->n * rowsize;
		char	   *to = (char *) in->x + (Size) upto * rowsize;
		bool		ok = true;

		/*
		 * The features where the prefault thread has not been yet (where it
		 * runs: it keeps ahead when a core is free, else the gather does
		 * them and the thread goes on after them), the row ids here.
		 */
		if (pf->running)
		{
			char	   *ahead = pf->start + pg_atomic_read_u64(&pf->done);

			if (ahead > from)
				from = ahead;
		}
		if (from < to)
		{
			ok = Populate(from, to);
			if (ok && pf->running && to > pf->start)
				pg_atomic_write_u64(&pf->skip,
									TYPEALIGN_DOWN((Size) sysconf(_SC_PAGESIZE), (Size) (to - pf->start)));
		}
		if (!(ok && Populate(in->ids + in->n, in->ids + upto)))
			st->no_populate = true;
	}
	st->populated = upto;
}

/* Defines the gather's developer settings (flags: those of the developer settings). */
void
GcBufferDefineGucs(int flags)
{
	DefineCustomBoolVariable("gpuclust.gather_huge_pages",
							 "The gather asks the kernel for transparent huge pages for its row buffers (Linux).",
							 NULL, &gc_gather_huge_pages_guc, false,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomBoolVariable("gpuclust.gather_prefault",
							 "A thread faults in the gather's feature buffer ahead of the rows (Linux 5.14, 64 MB and more, gpuclust.cpu_threads above 1).",
							 NULL, &gc_gather_prefault_guc, true,
							 PGC_USERSET, flags, NULL, NULL, NULL);
}
