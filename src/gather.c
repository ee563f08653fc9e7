/*
 * gather.c
 *    Runs the user's query read-only through SPI and packs its rows into a
 *    matrix of single or double precision, checking the input contract
 *    shared by every algorithm.
 *
 * The query's first column is the row id (smallint, integer or bigint); the
 * rest are the features: exactly one one-dimensional real[] or double
 * precision[] column, or one pgvector vector or halfvec or PostGIS geometry
 * point column, or one or more numeric scalar columns.  Rows stream from the
 * executor into a DestReceiver that appends them to the matrix: nothing is
 * materialized in SPI_tuptable and no allocation is made per row (in-line
 * values are read where they lie, even with a short varlena header; only
 * toasted ones are detoasted, in a context reset in batches).
 *
 * The element type follows the input, as scikit-learn's does (GcDtypeFor):
 * real, real[], vector and halfvec features are kept in single precision,
 * every other type (double precision, numeric, integers, PostGIS's double
 * coordinates) in double precision; gpuclust.precision = single or double
 * overrides.
 *
 * The readers of single feature values (GcFeatureTypeOf, GcFeatureOpen,
 * GcFeatureCopy) serve the window functions of window.c as well.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __linux__
#include <pthread.h>
#include <signal.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "port/atomics.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/plancache.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "gpuclust.h"

#define GATHER_FIRST_ROWS 4096
/* ... but no more than this many bytes before the second row arrives (wide rows) */
#define GATHER_FIRST_BYTES (INT64CONST(16) << 20)
#define GATHER_RESET_EVERY 1024
/* the block detoasted values go to, kept over resets: they are not faulted in anew */
#define GATHER_TMP_BYTES ((Size) 4 << 20)
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

typedef enum FeatureKind
{
	FEATURES_FLOAT4_ARRAY,
	FEATURES_FLOAT8_ARRAY,
	FEATURES_SCALARS,
	FEATURES_NATIVE				/* vector, halfvec or geometry: ftype */
} FeatureKind;

typedef struct GatherReceiver
{
	DestReceiver pub;			/* must be first */
	GcInput    *in;
	MemoryContext outcxt;		/* in->x and in->ids go with it */
	MemoryContext tmpcxt;		/* detoasting and numeric conversion */
	TupleDesc	desc;
	bool	   *plain;			/* [natts] a column of that name WHERE can test (ColRef), or NULL */
	FeatureKind kind;
	GcFeatureType ftype;		/* FEATURES_NATIVE */
	int			natts;
	Oid		   *types;			/* [natts] */
	int64		cap;			/* rows allocated */
	double		est_rows;		/* the planner's estimate of the rows, 0 if none */
	int64		populated;		/* rows of the buffers faulted in ahead */
	bool		no_populate;	/* the kernel cannot fault in ahead */
	int64		since_reset;
	Size		tmp_used;		/* bytes detoasted into tmpcxt since its reset, at most */
	struct GatherBuffers *buffers;	/* in->x and in->ids, malloc'd */
} GatherReceiver;

/* The name of column i (0-based) for messages. */
static const char *
ColName(GatherReceiver *st, int i)
{
	return NameStr(TupleDescAttr(st->desc, i)->attname);
}

/*
 * Column i (0-based) as a hint's WHERE clause can name it: its name when it
 * is a plain column of the query's FROM (st->plain), else its position, since
 * an expression's output name (int4, ?column?) is no name WHERE knows.
 */
static const char *
ColRef(GatherReceiver *st, int i)
{
	if (st->plain != NULL && st->plain[i])
		return quote_identifier(ColName(st, i));
	return psprintf("<the expression of column %d>", i + 1);
}

static bool
IsIdType(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

static bool
IsScalarFeatureType(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID ||
		t == FLOAT4OID || t == FLOAT8OID || t == NUMERICOID;
}

/* Checks the result columns of the query against the input contract. */
static void
CheckColumns(GatherReceiver *st, TupleDesc desc)
{
	const char *hint = "Write the query as SELECT id, f FROM ... with f a real[], double precision[], "
		"vector, halfvec or geometry column, or as SELECT id, x, y, ... FROM ... with numeric columns.";

	st->desc = desc;
	st->natts = desc->natts;
	if (st->natts < 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the query must return a row id column and at least one feature column"),
				 errdetail("It returns %d column(s).", st->natts),
				 errhint("%s", hint)));
	st->types = palloc(sizeof(Oid) * st->natts);
	for (int i = 0; i < st->natts; i++)
		st->types[i] = TupleDescAttr(desc, i)->atttypid;

	if (!IsIdType(st->types[0]))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the first column of the query must be the row id"),
				 errdetail("Column \"%s\" has type %s; a row id is smallint, integer or bigint.",
						   ColName(st, 0), format_type_be(st->types[0])),
				 errhint("%s", hint)));

	if (st->natts == 2)
	{
		GcFeatureType ft = GcFeatureTypeOf(st->types[1]);

		if (ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY)
		{
			st->kind = ft == GC_FEATURE_FLOAT4_ARRAY ? FEATURES_FLOAT4_ARRAY : FEATURES_FLOAT8_ARRAY;
			st->in->d = 0;		/* known from the first row */
			st->in->dtype = GcFeatureDtype(ft, st->types[1]);
			return;
		}
		if (ft >= GC_FEATURE_VECTOR)
		{
			st->kind = FEATURES_NATIVE;
			st->ftype = ft;
			st->in->d = 0;		/* known from the first row */
			st->in->dtype = GcFeatureDtype(ft, st->types[1]);
			return;
		}
	}
	for (int i = 1; i < st->natts; i++)
	{
		Oid			t = st->types[i];
		GcFeatureType ft;

		if (IsScalarFeatureType(t))
			continue;
		ft = GcFeatureTypeOf(t);
		if (ft != GC_FEATURE_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY ?
					 errmsg("a feature array must be the only feature column") :
					 errmsg("a feature of type %s must be the only feature column", format_type_be(t)),
					 errdetail("The query returns %d feature columns, and \"%s\" is %s.",
							   st->natts - 1, ColName(st, i),
							   ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_FLOAT8_ARRAY ?
							   "an array" : "a value of several features"),
					 errhint("%s", hint)));
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of the query has type %s, which is not a feature type",
						ColName(st, i), format_type_be(t)),
				 errdetail("Features are one column of type %s, or columns of "
						   "type smallint, integer, bigint, real, double precision or numeric.",
						   GcFeatureTypeNames()),
				 errhint("%s", hint)));
	}
	st->kind = FEATURES_SCALARS;
	st->in->d = st->natts - 1;
	/* single precision only when every feature column is real */
	st->in->dtype = GcFeatureDtype(GC_FEATURE_SCALAR, FLOAT4OID);
	for (int i = 1; i < st->natts; i++)
		if (GcFeatureDtype(GC_FEATURE_SCALAR, st->types[i]) == GC_F64)
			st->in->dtype = GC_F64;
}

/*
 * The element type the features of a value of type typid (feature type ft)
 * are kept and computed in: single precision for real, real[], vector and
 * halfvec, double precision for the others, unless gpuclust.precision says
 * single or double.
 */
gc_dtype
GcFeatureDtype(GcFeatureType ft, Oid typid)
{
	bool		single;

	if (gc_precision_guc == GC_PRECISION_SINGLE)
		return GC_F32;
	if (gc_precision_guc == GC_PRECISION_DOUBLE)
		return GC_F64;
	single = ft == GC_FEATURE_FLOAT4_ARRAY || ft == GC_FEATURE_VECTOR ||
		ft == GC_FEATURE_HALFVEC || (ft == GC_FEATURE_SCALAR && typid == FLOAT4OID);
	return single ? GC_F32 : GC_F64;
}

/* The error for a row without a direction under the cosine metric. */
void
GcZeroRowError(const char *title, const GcRowRef *row)
{
	char		name[96];

	GcRowName(row, name, sizeof(name));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the features of %s are all zero", name),
			 errdetail("With the cosine metric %s needs a direction for every row, and a zero vector has none.",
					   title),
			 errhint("Filter such rows out of the query, or use metric => 'euclidean'.")));
}

/*
 * Scales every gathered row to unit length for the cosine metric
 * (gc_unit_rows of common/metric.h); a zero row is an error naming its id.
 */
void
GcUnitRows(GcInput *in, const char *title)
{
	int64		bad = gc_unit_rows(in->x, in->dtype, in->n, in->d);

	if (bad >= 0)
	{
		GcRowRef	row = {in->ids[bad], 0, 0};

		GcZeroRowError(title, &row);
	}
}

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
static void
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
 * Faults in the pages of [start, end) of a row buffer ahead of the rows
 * (whole pages inside the range only).  One madvise for megabytes of pages
 * costs less than a page fault per page, each a trap into the kernel; the
 * kernel still zeroes every page.  False where the kernel cannot (before
 * Linux 5.14) or will not.
 */
static bool
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
static void
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

/*
 * In double precision a feature's magnitude is at most this, so that no
 * squared distance overflows: (2 * 1e150)^2 times any number of features
 * gpuclust accepts stays far below the largest double.
 */
#define F64_MAX_ABS 1e150
#define F64_OK(v) (fabs(v) <= F64_MAX_ABS)	/* false for NaN and infinities too */

/*
 * Refuses a finite value that the element type cannot hold: beyond its range
 * (overflow) or not zero but rounding to zero (underflow); in double
 * precision, beyond F64_MAX_ABS.  value is its text.
 */
static void
RangeError(const char *what, int64 id, const char *value, bool underflow, gc_dtype dtype)
{
	if (dtype == GC_F64)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s of the row with id " INT64_FORMAT " is out of range", what, id),
				 underflow ?
				 errdetail("The value is %s, which is not zero but rounds to zero in double precision.", value) :
				 errdetail("The value is %s; features are at most 1e150 in magnitude, "
						   "so that squared distances do not overflow double precision.", value),
				 underflow ?
				 errhint("Scale the features, for example by multiplying by a constant.") :
				 errhint("Scale the features, for example by dividing by a constant.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s of the row with id " INT64_FORMAT " is out of range for type real", what, id),
			 underflow ?
			 errdetail("The value is %s, which is not zero but rounds to zero as a real; "
					   "these features are computed in single precision.", value) :
			 errdetail("The value is %s; these features are computed in single precision.", value),
			 errhint("Compute in double precision with SET gpuclust.precision = double, or scale the features.")));
}

/*
 * Stores one feature value as element i of row dst of the input's element
 * type, refusing NaN, infinities, and in single precision overflow of real
 * and nonzero values that would become zero as real (subnormal reals are
 * kept).
 */
static inline void
PutFeature(GatherReceiver *st, void *dst, int32 i, double v, int64 id, const char *what)
{
	float		f;

	if (unlikely(!isfinite(v)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s of the row with id " INT64_FORMAT " is %s", what, id,
						isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity")),
				 errdetail("Features must be finite numbers, so that every distance is one."),
				 isnan(v) ?
				 errhint("Filter such rows out of the query, for example with WHERE NOT (x = 'NaN').") :
				 errhint("Filter such rows out of the query, for example with WHERE x NOT IN ('Infinity', '-Infinity').")));
	if (st->in->dtype == GC_F64)
	{
		if (unlikely(!F64_OK(v)))
		{
			char		value[32];

			snprintf(value, sizeof(value), "%g", v);
			RangeError(what, id, value, false, GC_F64);
		}
		((double *) dst)[i] = v;
		return;
	}
	f = (float) v;
	if (unlikely(isinf(f) || (f == 0.0f && v != 0.0)))
	{
		char		value[32];

		snprintf(value, sizeof(value), "%g", v);
		RangeError(what, id, value, !isinf(f), GC_F32);
	}
	((float *) dst)[i] = f;
}

/* The value of a scalar feature column of an integer or float type as double. */
static inline double
ScalarValue(Datum v, Oid t)
{
	switch (t)
	{
		case INT2OID:
			return (double) DatumGetInt16(v);
		case INT4OID:
			return (double) DatumGetInt32(v);
		case INT8OID:
			return (double) DatumGetInt64(v);
		case FLOAT4OID:
			return (double) DatumGetFloat4(v);
		case FLOAT8OID:
			return DatumGetFloat8(v);
		default:
			elog(ERROR, "unexpected feature type %u, please report a bug", t);
			return 0.0;			/* keep the compiler quiet */
	}
}

/*
 * The value of the numeric feature in column col as double (NaN and
 * infinities as such, for PutFeature to refuse).  A finite value beyond the
 * range of double precision is refused here, naming the row id, instead of by
 * numeric_float8, which would not name it.  Allocates in the current memory
 * context.
 */
static double
NumericValue(GatherReceiver *st, Datum datum, int64 id, int col)
{
	Numeric		num = DatumGetNumeric(datum);
	char	   *text;
	char	   *end;
	double		v;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(num)));

	/* numeric_float8 does the same, but raises an error without the id */
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	v = strtod(text, &end);
	if (unlikely(*end != '\0'))
		elog(ERROR, "numeric value \"%s\" does not read as double precision, please report a bug", text);
	if (unlikely(isinf(v) || (v == 0.0 && strpbrk(text, "123456789") != NULL)))
	{
		char	   *sci = numeric_out_sci(num, 5);
		char	   *e = strchr(sci, 'e');
		char		what[NAMEDATALEN + 16];

		/* %g style: 1.50000e+400 as 1.5e+400 */
		if (e != NULL && strchr(sci, '.') != NULL)
		{
			char	   *keep = e;

			while (keep[-1] == '0')
				keep--;
			if (keep[-1] == '.')
				keep--;
			memmove(keep, e, strlen(e) + 1);
		}
		snprintf(what, sizeof(what), "feature \"%s\"", ColName(st, col));
		RangeError(what, id, sci, !isinf(v), st->in->dtype);
	}
	return v;
}

/*
 * Copies n reals from src (any alignment) to dst and says whether every one
 * is finite, in one pass: a real is NaN or infinite when its exponent bits
 * are all ones.  The values are copied whatever they are; the caller looks
 * for the first bad one only when there is one.  On x86-64 the copy runs 32
 * values a step in AVX2 registers where the processor has them, else 8 in
 * SSE2; elsewhere one value at a time, without a branch per value (adding 1
 * to an exponent of all ones carries into the sign bit, which no other
 * exponent does).
 */
static bool
CopyFinite4Plain(float *dst, const char *src, int32 n)
{
	uint32		acc = 0;

	for (int32 k = 0; k < n; k++)
	{
		uint32		u;

		memcpy(&u, src + sizeof(float) * k, sizeof(u));
		memcpy(dst + k, &u, sizeof(u));
		acc |= (u & 0x7f800000) + 0x00800000;
	}
	return (acc & 0x80000000) == 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GC_GATHER_X86
#endif

#ifdef GC_GATHER_X86
static bool
CopyFinite4Sse2(float *dst, const char *src, int32 n)
{
	const __m128i exp = _mm_set1_epi32(0x7f800000);
	__m128i		bad0 = _mm_setzero_si128();
	__m128i		bad1 = _mm_setzero_si128();
	int32		k = 0;

	for (; k + 8 <= n; k += 8)
	{
		__m128i		a = _mm_loadu_si128((const __m128i *) (src + sizeof(float) * k));
		__m128i		b = _mm_loadu_si128((const __m128i *) (src + sizeof(float) * (k + 4)));

		_mm_storeu_si128((__m128i *) (dst + k), a);
		_mm_storeu_si128((__m128i *) (dst + k + 4), b);
		bad0 = _mm_or_si128(bad0, _mm_cmpeq_epi32(_mm_and_si128(a, exp), exp));
		bad1 = _mm_or_si128(bad1, _mm_cmpeq_epi32(_mm_and_si128(b, exp), exp));
	}
	/* the rest, copied whatever the steps found */
	if (!CopyFinite4Plain(dst + k, src + sizeof(float) * k, n - k))
		return false;
	return _mm_movemask_epi8(_mm_or_si128(bad0, bad1)) == 0;
}

__attribute__((target("avx2")))
static bool
CopyFinite4Avx2(float *dst, const char *src, int32 n)
{
	const __m256i exp = _mm256_set1_epi32(0x7f800000);
	__m256i		bad0 = _mm256_setzero_si256();
	__m256i		bad1 = _mm256_setzero_si256();
	int32		k = 0;

	for (; k + 32 <= n; k += 32)
	{
		const char *s = src + sizeof(float) * k;
		__m256i		a = _mm256_loadu_si256((const __m256i *) s);
		__m256i		b = _mm256_loadu_si256((const __m256i *) (s + 32));
		__m256i		c = _mm256_loadu_si256((const __m256i *) (s + 64));
		__m256i		d = _mm256_loadu_si256((const __m256i *) (s + 96));

		_mm256_storeu_si256((__m256i *) (dst + k), a);
		_mm256_storeu_si256((__m256i *) (dst + k + 8), b);
		_mm256_storeu_si256((__m256i *) (dst + k + 16), c);
		_mm256_storeu_si256((__m256i *) (dst + k + 24), d);
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(a, exp), exp));
		bad1 = _mm256_or_si256(bad1, _mm256_cmpeq_epi32(_mm256_and_si256(b, exp), exp));
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(c, exp), exp));
		bad1 = _mm256_or_si256(bad1, _mm256_cmpeq_epi32(_mm256_and_si256(d, exp), exp));
	}
	for (; k + 8 <= n; k += 8)
	{
		__m256i		a = _mm256_loadu_si256((const __m256i *) (src + sizeof(float) * k));

		_mm256_storeu_si256((__m256i *) (dst + k), a);
		bad0 = _mm256_or_si256(bad0, _mm256_cmpeq_epi32(_mm256_and_si256(a, exp), exp));
	}
	bad0 = _mm256_or_si256(bad0, bad1);
	/* the rest, copied whatever the steps found */
	if (!CopyFinite4Plain(dst + k, src + sizeof(float) * k, n - k))
		return false;
	return _mm256_testz_si256(bad0, bad0) != 0;
}
#endif

typedef bool (*CopyFinite4Fn) (float *dst, const char *src, int32 n);

static bool CopyFinite4First(float *dst, const char *src, int32 n);

static CopyFinite4Fn copy_finite4 = CopyFinite4First;

/* The first call picks the version for this processor. */
static bool
CopyFinite4First(float *dst, const char *src, int32 n)
{
#ifdef GC_GATHER_X86
	__builtin_cpu_init();
	copy_finite4 = __builtin_cpu_supports("avx2") ? CopyFinite4Avx2 : CopyFinite4Sse2;
#else
	copy_finite4 = CopyFinite4Plain;
#endif
	return copy_finite4(dst, src, n);
}

static inline bool
CopyFinite4(float *dst, const char *src, int32 n)
{
	return copy_finite4(dst, src, n);
}

/*
 * Appends the elements of a one-dimensional float array to dst.  In-line
 * arrays are read in place: the ArrayType fields follow the varlena header,
 * whether it is 4 bytes or 1, and offsets count from a 4-byte header.
 */
static void
PutArray(GatherReceiver *st, Datum datum, int64 id)
{
	GcInput    *in = st->in;
	struct varlena *v = (struct varlena *) DatumGetPointer(datum);
	const char *body;
	int32		ndim;
	int32		dataoffset;
	int32		len;
	const char *data;
	float	   *dst;
	bool		f8 = st->kind == FEATURES_FLOAT8_ARRAY;
	const char *what = "an element of the feature array";

	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
	{
		MemoryContext old = MemoryContextSwitchTo(st->tmpcxt);

		v = PG_DETOAST_DATUM(datum);
		MemoryContextSwitchTo(old);
	}
	body = VARDATA_ANY(v);
	memcpy(&ndim, body, sizeof(int32));
	memcpy(&dataoffset, body + sizeof(int32), sizeof(int32));
	if (ndim != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 ndim == 0 ?
				 errmsg("the feature array of the row with id " INT64_FORMAT " is empty", id) :
				 errmsg("the feature array of the row with id " INT64_FORMAT " has %d dimensions", id, ndim),
				 errdetail("Feature arrays must be one-dimensional and not empty."),
				 errhint("Filter with WHERE cardinality(%s) > 0, or flatten the array.", ColRef(st, 1))));
	if (dataoffset != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the feature array of the row with id " INT64_FORMAT " contains NULL", id),
				 errdetail("Every feature of a row needs a value."),
				 errhint("Filter with WHERE array_position(%s, NULL) IS NULL.", ColRef(st, 1))));
	memcpy(&len, body + sizeof(ArrayType) - VARHDRSZ, sizeof(int32));

	if (in->n == 0 && in->d == 0)
		in->d = len;
	else if (len != in->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature array of the row with id " INT64_FORMAT " has %d elements, but the first row's has %d",
						id, len, in->d),
				 errhint("Every feature array must have the same length.")));
	if (unlikely(in->n >= st->populated))
		MakeRoom(st);

	data = body + ARR_OVERHEAD_NONULLS(1) - VARHDRSZ;
	if (in->dtype == GC_F64)
	{
		double	   *dst8 = (double *) in->x + (Size) in->n * in->d;
		bool		bad = false;

		if (f8)
			memcpy(dst8, data, sizeof(double) * len);
		else
			for (int32 k = 0; k < len; k++)
			{
				float		e;

				memcpy(&e, data + sizeof(float) * k, sizeof(float));
				dst8[k] = e;
			}
		for (int32 k = 0; k < len; k++)
			bad |= (bool) (!F64_OK(dst8[k]));
		if (unlikely(bad))
			for (int32 k = 0; k < len; k++)
				PutFeature(st, dst8, k, dst8[k], id, what);
		return;
	}
	dst = (float *) in->x + (Size) in->n * in->d;
	if (!f8)
	{
		if (unlikely(!CopyFinite4(dst, data, len)))
			for (int32 k = 0; k < len; k++)
				if (!isfinite(dst[k]))
					PutFeature(st, dst, k, dst[k], id, what);
	}
	else
	{
		bool		bad = false;

		for (int32 k = 0; k < len; k++)
		{
			double		e;
			float		f;

			memcpy(&e, data + sizeof(double) * k, sizeof(double));
			f = (float) e;
			dst[k] = f;
			bad |= (bool) ((isfinite(f) == 0) | ((f == 0.0f) & (e != 0.0)));
		}
		/* again, value by value, for the message about the first bad one */
		if (unlikely(bad))
			for (int32 k = 0; k < len; k++)
			{
				double		e;

				memcpy(&e, data + sizeof(double) * k, sizeof(double));
				PutFeature(st, dst, k, e, id, what);
			}
	}
}

/* ------------------------------------------------------------ native types */

/*
 * pgvector's vector and halfvec and PostGIS's geometry are read from their
 * documented binary layouts, without a build or link dependency on either
 * extension: their type OIDs are looked up at call time (the type of that
 * name in the schema of the extension that owns it) and cached until a
 * pg_type change invalidates them (CREATE/DROP EXTENSION, ALTER EXTENSION
 * ... SET SCHEMA).
 *
 *   vector   varlena header, int16 dim, int16 unused, float4 x[dim]
 *   halfvec  varlena header, int16 dim, int16 unused, IEEE binary16 x[dim]
 *   geometry GSERIALIZED: varlena header, uint8 srid[3], uint8 gflags,
 *            [v2 with the extended flag: uint64 xflags], [bbox: float4 pairs
 *            per dimension, 3 pairs when geodetic], then the geometry:
 *            uint32 type, uint32 npoints, float8 coordinates (x, y, [z], [m])
 */
typedef enum FeatureFormat
{
	FORMAT_FLOAT4,
	FORMAT_FLOAT8,
	FORMAT_HALF,
	FORMAT_SCALAR
} FeatureFormat;

/* gflags bits shared by gserialized v1 and v2 */
#define GS_FLAG_Z			0x01
#define GS_FLAG_M			0x02
#define GS_FLAG_BBOX		0x04
#define GS_FLAG_GEODETIC	0x08
#define GS2_FLAG_EXTENDED	0x10	/* v2 only */
#define GS_FLAG_VERSION1	0x40	/* set: v2 (PostGIS 3), clear: v1 */
#define GS_FLAG_VERSION2	0x80	/* a later serialization */
#define GS_POINTTYPE		1

static bool ext_types_valid = false;
static bool ext_callback_registered = false;
static Oid	vector_oid = InvalidOid;
static Oid	halfvec_oid = InvalidOid;
static Oid	geometry_oid = InvalidOid;

/* Any change to pg_type may move or drop an extension type. */
static void
ExtTypesInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	ext_types_valid = false;
}

/* The type typname in the schema of extension extname, or InvalidOid. */
static Oid
ExtensionType(const char *extname, const char *typname)
{
	Oid			ext = get_extension_oid(extname, true);
	Oid			nsp = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(ext))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		return InvalidOid;
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum(typname), ObjectIdGetDatum(nsp));
}

/* Looks up the extension types once, and again after a pg_type change. */
static void
LookupExtensionTypes(void)
{
	if (ext_types_valid)
		return;
	if (!ext_callback_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, ExtTypesInvalidate, (Datum) 0);
		ext_callback_registered = true;
	}
	vector_oid = ExtensionType("vector", "vector");
	halfvec_oid = ExtensionType("vector", "halfvec");
	geometry_oid = ExtensionType("postgis", "geometry");
	ext_types_valid = true;
}

/* The feature type of a column of type typid, or GC_FEATURE_NONE. */
GcFeatureType
GcFeatureTypeOf(Oid typid)
{
	if (IsScalarFeatureType(typid))
		return GC_FEATURE_SCALAR;
	if (typid == FLOAT4ARRAYOID)
		return GC_FEATURE_FLOAT4_ARRAY;
	if (typid == FLOAT8ARRAYOID)
		return GC_FEATURE_FLOAT8_ARRAY;
	if (typid < FirstNormalObjectId)
		return GC_FEATURE_NONE;
	LookupExtensionTypes();
	if (typid == vector_oid)
		return GC_FEATURE_VECTOR;
	if (typid == halfvec_oid)
		return GC_FEATURE_HALFVEC;
	if (typid == geometry_oid)
		return GC_FEATURE_GEOMETRY;
	return GC_FEATURE_NONE;
}

/* The accepted feature types, for messages. */
const char *
GcFeatureTypeNames(void)
{
	return "real[], double precision[], pgvector's vector or halfvec, or PostGIS's geometry (points)";
}

/* "the row with id 42", "row 3 of partition 2", or "this row" (partition < 0: one value, no id). */
void
GcRowName(const GcRowRef *row, char *buf, size_t len)
{
	if (row->partition < 0)
		snprintf(buf, len, "this row");
	else if (row->partition == 0)
		snprintf(buf, len, "the row with id " INT64_FORMAT, row->id);
	else
		snprintf(buf, len, "row " INT64_FORMAT " of partition " INT64_FORMAT,
				 row->row, row->partition);
}

/* The row's name for a message (a static buffer, for the error being raised). */
static const char *
RowStr(const GcRowRef *row)
{
	static char buf[96];

	GcRowName(row, buf, sizeof(buf));
	return buf;
}

/* The name of a PostGIS geometry type number, for messages. */
static const char *
GeometryTypeName(uint32 type)
{
	static const char *const names[] = {
		"unknown", "point", "linestring", "polygon", "multipoint", "multilinestring",
		"multipolygon", "geometrycollection", "circularstring", "compoundcurve",
		"curvepolygon", "multicurve", "multisurface", "polyhedralsurface",
		"triangle", "tin"
	};

	return type < lengthof(names) ? names[type] : "unknown";
}

/* A geometry that cannot be read: a broken invariant of PostGIS's format. */
static void
MalformedGeometry(const GcRowRef *row, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the geometry of %s is malformed", RowStr(row)),
			 errdetail("It is %s.", what),
			 errhint("Filter the row out of the query; the stored value may be damaged.")));
}

/*
 * Opens a PostGIS geometry (body: after the varlena header, len bytes): a
 * 2-D or 3-D point.  M is skipped; SRID is ignored.
 */
static void
OpenGeometry(const char *body, Size len, const GcRowRef *row, GcFeature *out)
{
	uint8		gflags;
	Size		off = 4;		/* srid[3], gflags */
	int			ndims;
	uint32		type;
	uint32		npoints;

	if (len < 4)
		MalformedGeometry(row, "shorter than its header");
	gflags = (uint8) body[3];
	if (gflags & GS_FLAG_VERSION2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the geometry of %s has a serialization gpuclust cannot read", RowStr(row)),
				 errdetail("Its flags are 0x%02x; gpuclust reads the formats of PostGIS 2 and 3.", gflags),
				 errhint("Pass the coordinates as numbers instead: SELECT id, ST_X(geom), ST_Y(geom) FROM ....")));
	ndims = 2 + ((gflags & GS_FLAG_Z) ? 1 : 0) + ((gflags & GS_FLAG_M) ? 1 : 0);
	if ((gflags & GS_FLAG_VERSION1) && (gflags & GS2_FLAG_EXTENDED))
		off += 8;
	if (gflags & GS_FLAG_BBOX)
		off += (gflags & GS_FLAG_GEODETIC) ? 6 * sizeof(float) : 2 * ndims * sizeof(float);
	if (len < off + 8)
		MalformedGeometry(row, "shorter than its type and size");
	memcpy(&type, body + off, sizeof(uint32));
	memcpy(&npoints, body + off + 4, sizeof(uint32));
	if (type != GS_POINTTYPE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the geometry of %s is a %s, not a point", RowStr(row), GeometryTypeName(type)),
				 errdetail("gpuclust clusters points: each row's geometry gives its coordinates as features."),
				 errhint("Pass a point per row, for example ST_Centroid(geom) or ST_PointOnSurface(geom).")));
	if (npoints == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the geometry of %s is an empty point", RowStr(row)),
				 errdetail("An empty point has no coordinates to cluster."),
				 errhint("Filter with WHERE NOT ST_IsEmpty(geom); in a window function, pass a NULL feature instead (its cluster is NULL).")));
	if (npoints != 1 || len < off + 8 + (Size) ndims * sizeof(double))
		MalformedGeometry(row, "a point of a wrong size");
	/* x, y and z come first; m, if any, last */
	out->fmt = FORMAT_FLOAT8;
	out->d = (gflags & GS_FLAG_Z) ? 3 : 2;
	out->data = body + off + 8;
}

/* Converts an IEEE binary16 value to float, exactly. */
static inline float
HalfToFloat(uint16 h)
{
	uint32		sign = (uint32) (h & 0x8000) << 16;
	uint32		exp = (h >> 10) & 0x1f;
	uint32		man = h & 0x3ff;
	uint32		bits;
	float		f;

	if (exp == 0x1f)
		bits = sign | 0x7f800000 | (man << 13);
	else if (exp != 0)
		bits = sign | ((exp + 112) << 23) | (man << 13);
	else
	{
		/* zero or subnormal: man * 2^-24, exact in float */
		f = (float) man * (1.0f / 16777216.0f);
		memcpy(&bits, &f, sizeof(bits));
		bits |= sign;
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

#ifdef GC_GATHER_X86
/*
 * Converts n halves at src (any alignment) to reals at dst, exactly (as
 * HalfToFloat; the conversion instruction is exact for every half, subnormal
 * ones included), 8 a step, and says whether every one is finite.
 */
__attribute__((target("avx2,f16c")))
static bool
HalfToFloatFiniteF16c(float *dst, const char *src, int32 n)
{
	const __m128i exp = _mm_set1_epi16(0x7c00);
	__m128i		bad = _mm_setzero_si128();
	uint32		tail = 0;
	int32		k = 0;

	for (; k + 8 <= n; k += 8)
	{
		__m128i		h = _mm_loadu_si128((const __m128i *) (src + 2 * k));

		bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp));
		_mm256_storeu_ps(dst + k, _mm256_cvtph_ps(h));
	}
	for (; k < n; k++)
	{
		uint16		h;

		memcpy(&h, src + 2 * k, sizeof(h));
		dst[k] = HalfToFloat(h);
		tail |= (uint32) ((h & 0x7c00) == 0x7c00);
	}
	return _mm_movemask_epi8(bad) == 0 && tail == 0;
}
#endif

/*
 * Converts n halves at src to reals at dst where the processor has an
 * instruction for it, saying whether every one is finite; false, having done
 * nothing or part, where it has not (the caller then goes value by value).
 */
static bool
HalfToFloatFinite(float *dst, const char *src, int32 n)
{
#ifdef GC_GATHER_X86
	static int	have_f16c = -1;

	if (unlikely(have_f16c < 0))
	{
		unsigned int a,
					b,
					c,
					d;

		/* F16C from CPUID (not every compiler's __builtin_cpu_supports knows it) */
		__builtin_cpu_init();
		have_f16c = __builtin_cpu_supports("avx2") &&
			__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
	}
	if (have_f16c)
		return HalfToFloatFiniteF16c(dst, src, n);
#endif
	return false;
}

/*
 * Refuses a value that is not finite or that real cannot hold (beyond its
 * range, or not zero but zero as a real), naming the row.  finite_source: a
 * numeric beyond the range of double precision.
 */
static void
BadFeatureValue(const GcRowRef *row, double v, float f, bool finite_source)
{
	if (!isfinite(v) && !finite_source)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("a feature of %s is %s", RowStr(row),
						isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity")),
				 errdetail("Features must be finite numbers, so that every distance is one."),
				 errhint("Filter such rows out, or pass a NULL feature for them (its cluster is NULL).")));
	if (finite_source)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("a feature of %s is out of range", RowStr(row)),
				 isinf(v) ?
				 errdetail("The value is beyond the range of double precision.") :
				 v == DBL_MIN ?
				 errdetail("The value is not zero but rounds to zero in double precision.") :
				 errdetail("The value is %g; features are at most 1e150 in magnitude, "
						   "so that squared distances do not overflow double precision.", v),
				 v == DBL_MIN ?
				 errhint("Scale the features, for example by multiplying by a constant.") :
				 errhint("Scale the features, for example by dividing by a constant.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("a feature of %s is out of range for type real", RowStr(row)),
			 isinf(f) ?
			 errdetail("The value is %g; these features are computed in single precision.", v) :
			 errdetail("The value is not zero but rounds to zero as a real; "
					   "these features are computed in single precision."),
			 errhint("Compute in double precision with SET gpuclust.precision = double, or scale the features.")));
}

/*
 * Stores one double as feature k of dst of element type dtype, refusing
 * what is not finite and, in single precision, what real cannot hold.
 */
static inline void
PutDouble(void *dst, int32 k, gc_dtype dtype, double v, const GcRowRef *row)
{
	float		f;

	if (dtype == GC_F64)
	{
		if (unlikely(!F64_OK(v)))
			BadFeatureValue(row, v, (float) v, isfinite(v));
		((double *) dst)[k] = v;
		return;
	}
	f = (float) v;
	if (unlikely(!isfinite(v) || isinf(f) || (f == 0.0f && v != 0.0)))
		BadFeatureValue(row, v, f, false);
	((float *) dst)[k] = f;
}

/*
 * Opens one non-NULL feature value of type kind for GcFeatureCopy: its
 * number of features and where they lie.  Toasted values are detoasted in
 * tmpcxt; in-line ones are read where they lie.
 */
void
GcFeatureOpen(GcFeatureType kind, Oid typid, Datum value, const GcRowRef *row,
			  MemoryContext tmpcxt, GcFeature *out)
{
	struct varlena *v;
	const char *body;
	Size		len;

	memset(out, 0, sizeof(*out));
	if (kind == GC_FEATURE_SCALAR)
	{
		out->fmt = FORMAT_SCALAR;
		out->d = 1;
		if (typid == NUMERICOID)
		{
			Numeric		num = DatumGetNumeric(value);

			if (numeric_is_nan(num) || numeric_is_inf(num))
				out->scalar = DatumGetFloat8(DirectFunctionCall1(numeric_float8, value));
			else
			{
				/* numeric_float8 would refuse values beyond double without the row */
				char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out, value));

				out->scalar = strtod(text, NULL);
				if (isinf(out->scalar))
					BadFeatureValue(row, out->scalar, (float) out->scalar, true);
				if (out->scalar == 0.0 && strpbrk(text, "123456789") != NULL)
					BadFeatureValue(row, DBL_MIN, 0.0f, true);
				pfree(text);
			}
		}
		else
			out->scalar = ScalarValue(value, typid);
		return;
	}

	v = (struct varlena *) DatumGetPointer(value);
	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
	{
		MemoryContext old = MemoryContextSwitchTo(tmpcxt);

		v = PG_DETOAST_DATUM(value);
		MemoryContextSwitchTo(old);
	}
	body = VARDATA_ANY(v);
	len = VARSIZE_ANY_EXHDR(v);

	switch (kind)
	{
		case GC_FEATURE_VECTOR:
		case GC_FEATURE_HALFVEC:
			{
				int16		dim;

				memcpy(&dim, body, sizeof(int16));
				if (dim < 1 || len < 4 + (Size) dim * (kind == GC_FEATURE_VECTOR ? 4 : 2))
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("the %s of %s is malformed",
									kind == GC_FEATURE_VECTOR ? "vector" : "halfvec", RowStr(row)),
							 errdetail("It has %d dimensions in %zu bytes.", dim, len),
							 errhint("Filter the row out of the query; the stored value may be damaged.")));
				out->d = dim;
				out->fmt = kind == GC_FEATURE_VECTOR ? FORMAT_FLOAT4 : FORMAT_HALF;
				out->data = body + 4;
				return;
			}
		case GC_FEATURE_GEOMETRY:
			OpenGeometry(body, len, row, out);
			return;
		case GC_FEATURE_FLOAT4_ARRAY:
		case GC_FEATURE_FLOAT8_ARRAY:
			{
				int32		ndim;
				int32		dataoffset;
				int32		n;

				memcpy(&ndim, body, sizeof(int32));
				memcpy(&dataoffset, body + sizeof(int32), sizeof(int32));
				if (ndim != 1)
					ereport(ERROR,
							(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
							 ndim == 0 ?
							 errmsg("the feature array of %s is empty", RowStr(row)) :
							 errmsg("the feature array of %s has %d dimensions", RowStr(row), ndim),
							 errdetail("Feature arrays must be one-dimensional and not empty."),
							 errhint("Filter such rows out with WHERE cardinality(...) > 0, or flatten the array.")));
				if (dataoffset != 0)
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("the feature array of %s contains NULL", RowStr(row)),
							 errdetail("Every feature of a row needs a value."),
							 errhint("Filter such rows out, or pass a NULL feature for them (its cluster is NULL).")));
				memcpy(&n, body + sizeof(ArrayType) - VARHDRSZ, sizeof(int32));
				out->d = n;
				out->fmt = kind == GC_FEATURE_FLOAT4_ARRAY ? FORMAT_FLOAT4 : FORMAT_FLOAT8;
				out->data = body + ARR_OVERHEAD_NONULLS(1) - VARHDRSZ;
				return;
			}
		default:
			elog(ERROR, "unexpected feature type %d, please report a bug", (int) kind);
	}
}

/*
 * Writes the f->d features of an opened value to dst, elements of type
 * dtype, checking each.
 */
void
GcFeatureCopy(const GcFeature *f, void *dst, gc_dtype dtype, const GcRowRef *row)
{
	int32		d = f->d;
	float	   *dst4 = (float *) dst;

	switch ((FeatureFormat) f->fmt)
	{
		case FORMAT_FLOAT4:
			if (dtype == GC_F64)
			{
				for (int32 k = 0; k < d; k++)
				{
					float		e;

					memcpy(&e, f->data + sizeof(float) * k, sizeof(float));
					PutDouble(dst, k, dtype, e, row);
				}
				break;
			}
			if (unlikely(!CopyFinite4(dst4, f->data, d)))
				for (int32 k = 0; k < d; k++)
					if (!isfinite(dst4[k]))
						BadFeatureValue(row, dst4[k], dst4[k], false);
			break;
		case FORMAT_HALF:
			/* at once where the processor converts halves; value by value for the message */
			if (dtype == GC_F32 && HalfToFloatFinite(dst4, f->data, d))
				break;
			for (int32 k = 0; k < d; k++)
			{
				uint16		h;
				float		e;

				memcpy(&h, f->data + 2 * k, sizeof(uint16));
				e = HalfToFloat(h);
				if (unlikely((h & 0x7c00) == 0x7c00))
					BadFeatureValue(row, e, e, false);
				if (dtype == GC_F64)
					((double *) dst)[k] = e;
				else
					dst4[k] = e;
			}
			break;
		case FORMAT_FLOAT8:
			for (int32 k = 0; k < d; k++)
			{
				double		e;

				memcpy(&e, f->data + sizeof(double) * k, sizeof(double));
				PutDouble(dst, k, dtype, e, row);
			}
			break;
		case FORMAT_SCALAR:
			PutDouble(dst, 0, dtype, f->scalar, row);
			break;
	}
}

/* Appends one row's vector, halfvec or geometry feature. */
static void
PutNative(GatherReceiver *st, Datum datum, int64 id)
{
	GcInput    *in = st->in;
	GcRowRef	row = {id, 0, 0};
	GcFeature	f;

	GcFeatureOpen(st->ftype, st->types[1], datum, &row, st->tmpcxt, &f);
	if (in->n == 0 && in->d == 0)
		in->d = f.d;
	else if (f.d != in->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the feature of the row with id " INT64_FORMAT " has %d dimensions, but the first row's has %d",
						id, f.d, in->d),
				 errdetail("The rows are clustered together, so they share one number of features."),
				 errhint("Every row must have the same number of features.")));
	if (unlikely(in->n >= st->populated))
		MakeRoom(st);
	GcFeatureCopy(&f, (char *) in->x + (Size) in->n * in->d * gc_dtype_size(in->dtype), in->dtype, &row);
}

/* DestReceiver: appends one row of the query. */
static bool
GatherReceive(TupleTableSlot *slot, DestReceiver *self)
{
	GatherReceiver *st = (GatherReceiver *) self;
	GcInput    *in = st->in;
	bool		isnull;
	Datum		v;
	int64		id;

	slot_getallattrs(slot);
	v = slot->tts_values[0];
	isnull = slot->tts_isnull[0];
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the row id is NULL in row " INT64_FORMAT " of the query", in->n + 1),
				 errdetail("Every row needs an id: the result names the rows by it."),
				 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, 0))));
	switch (st->types[0])
	{
		case INT2OID:
			id = DatumGetInt16(v);
			break;
		case INT4OID:
			id = DatumGetInt32(v);
			break;
		default:
			id = DatumGetInt64(v);
	}

	if (st->kind == FEATURES_SCALARS)
	{
		void	   *row;
		float	   *dst;
		bool		f8 = in->dtype == GC_F64;

		if (unlikely(in->n >= st->populated))
			MakeRoom(st);
		row = (char *) in->x + (Size) in->n * in->d * gc_dtype_size(in->dtype);
		dst = (float *) row;
		for (int i = 1; i < st->natts; i++)
		{
			char		what[NAMEDATALEN + 16];
			double		e;

			if (slot->tts_isnull[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("feature \"%s\" is NULL in the row with id " INT64_FORMAT, ColName(st, i), id),
						 errdetail("Every feature of a row needs a value."),
						 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, i))));
			if (st->types[i] == NUMERICOID)
			{
				MemoryContext old = MemoryContextSwitchTo(st->tmpcxt);

				e = NumericValue(st, slot->tts_values[i], id, i);
				MemoryContextSwitchTo(old);
			}
			else
				e = ScalarValue(slot->tts_values[i], st->types[i]);
			if (f8)
			{
				((double *) row)[i - 1] = e;
				if (likely(F64_OK(e)))
					continue;
			}
			else
			{
				dst[i - 1] = (float) e;
				if (likely(isfinite(e) && !isinf(dst[i - 1]) && !(dst[i - 1] == 0.0f && e != 0.0)))
					continue;
			}
			snprintf(what, sizeof(what), "feature \"%s\"", ColName(st, i));
			PutFeature(st, row, i - 1, e, id, what);
		}
	}
	else
	{
		if (slot->tts_isnull[1])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 st->kind == FEATURES_NATIVE ?
					 errmsg("the feature is NULL in the row with id " INT64_FORMAT, id) :
					 errmsg("the feature array is NULL in the row with id " INT64_FORMAT, id),
					 errdetail("Every row needs its features."),
					 errhint("Filter with WHERE %s IS NOT NULL.", ColRef(st, 1))));
		if (unlikely(VARATT_IS_EXTERNAL(DatumGetPointer(slot->tts_values[1])) ||
					 VARATT_IS_COMPRESSED(DatumGetPointer(slot->tts_values[1]))))
		{
			/*
			 * A toasted value is detoasted into tmpcxt: reset it before it
			 * outgrows its first block, which it keeps, so that the same
			 * pages take every batch (chunks are rounded up to a power of 2).
			 */
			Size		need = 2 * toast_raw_datum_size(slot->tts_values[1]) + 64;

			if (st->tmp_used > 0 && st->tmp_used + need > GATHER_TMP_BYTES)
			{
				MemoryContextReset(st->tmpcxt);
				st->tmp_used = 0;
			}
			st->tmp_used += need;
		}
		if (st->kind == FEATURES_NATIVE)
			PutNative(st, slot->tts_values[1], id);
		else
			PutArray(st, slot->tts_values[1], id);
	}
	in->ids[in->n] = id;
	in->n++;

	if (++st->since_reset >= GATHER_RESET_EVERY)
	{
		st->since_reset = 0;
		st->tmp_used = 0;
		MemoryContextReset(st->tmpcxt);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

static void
GatherStartup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
GatherShutdown(DestReceiver *self)
{
}

static void
GatherDestroy(DestReceiver *self)
{
}

/*
 * The name of a statement's command for a message: its command tag, except
 * SELECT INTO, whose tag is SELECT but which creates a table.
 */
static const char *
CommandName(Query *q, CachedPlanSource *ps)
{
	if (q->utilityStmt != NULL && IsA(q->utilityStmt, CreateTableAsStmt) &&
		ps->commandTag == CMDTAG_SELECT)
		return "SELECT INTO";
	return GetCommandTagName(ps->commandTag);
}

/*
 * Whether a query inside node (a subquery, a WITH query, a sublink, a view's
 * query once the rules expanded it) locks rows: FOR UPDATE or FOR SHARE
 * anywhere, not only at the top.
 */
static bool
LocksRows(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		if (((Query *) node)->rowMarks != NIL)
			return true;
		return query_tree_walker((Query *) node, LocksRows, context, 0);
	}
	return expression_tree_walker(node, LocksRows, context);
}

/* Refuses anything but one read-only SELECT: nothing may change. */
static void
CheckReadOnly(SPIPlanPtr plan, const char *query)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *ps;
	ListCell   *lc;

	if (list_length(sources) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query must be a single SELECT statement"),
				 errdetail("It holds %d statements.", list_length(sources)),
				 errhint("Pass one SELECT that returns the row id and the features.")));
	ps = (CachedPlanSource *) linitial(sources);
	foreach(lc, ps->query_list)
	{
		Query	   *q = lfirst_node(Query, lc);

		if (q->commandType != CMD_SELECT || q->utilityStmt != NULL ||
			q->hasModifyingCTE || LocksRows((Node *) q, NULL))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the query must be read-only"),
					 errdetail(q->commandType == CMD_SELECT && q->utilityStmt == NULL ?
							   "It modifies or locks rows (a data-modifying WITH, or FOR UPDATE/SHARE)." :
							   "Its command is %s.", CommandName(q, ps)),
					 errhint("Pass a plain SELECT that returns the row id and the features; "
							 "gpuclust never changes data.")));
	}
	if (ps->resultDesc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the query must return rows"),
				 errdetail("It is a statement that returns no result set."),
				 errhint("Pass a SELECT that returns the row id and the features.")));
}

/*
 * Which of the natts result columns of q are plain columns of its FROM
 * under their own name, so that a hint's WHERE clause can name them
 * (ColRef).
 */
static bool *
PlainColumns(Query *q, int natts)
{
	bool	   *plain = palloc0(sizeof(bool) * natts);
	int			i = 0;
	ListCell   *lc;

	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		Var		   *v = (Var *) te->expr;
		RangeTblEntry *rte;

		if (te->resjunk || i >= natts)
			continue;
		if (IsA(v, Var) && v->varlevelsup == 0 && v->varattno > 0 && te->resname != NULL &&
			v->varno >= 1 && v->varno <= list_length(q->rtable))
		{
			rte = rt_fetch(v->varno, q->rtable);
			plain[i] = rte->eref != NULL && v->varattno <= list_length(rte->eref->colnames) &&
				strcmp(strVal(list_nth(rte->eref->colnames, v->varattno - 1)), te->resname) == 0;
		}
		i++;
	}
	return plain;
}

/* Runs the prepared query, streaming its rows into st. */
static void
ExecuteInto(SPIPlanPtr plan, GatherReceiver *st)
{
#ifdef GC_HAVE_SPI_EXECUTE_EXTENDED
	{
		SPIExecuteOptions options;
		int			rc;

		memset(&options, 0, sizeof(options));
		options.read_only = true;
		options.dest = &st->pub;
		rc = SPI_execute_plan_extended(plan, &options);
		if (rc < 0)
			elog(ERROR, "SPI_execute_plan_extended failed: %s", SPI_result_code_string(rc));
	}
#else
	{
		Portal		portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
		TupleTableSlot *slot = MakeSingleTupleTableSlot(portal->tupDesc, &TTSOpsHeapTuple);

		for (;;)
		{
			SPI_cursor_fetch(portal, true, 10000);
			if (SPI_processed == 0)
				break;
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				ExecStoreHeapTuple(SPI_tuptable->vals[i], slot, false);
				GatherReceive(slot, &st->pub);
			}
			SPI_freetuptable(SPI_tuptable);
		}
		ExecDropSingleTupleTableSlot(slot);
		SPI_cursor_close(portal);
	}
#endif
}

/*
 * The planner's estimate of the rows of the prepared query, -1 where it is
 * not one SELECT.  The plan is the one the query then runs with: a query
 * without parameters gets the generic plan, planned once.  Also the estimate
 * of the planner support function (support.c).
 */
double
GcPlannedRows(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	double		rows = -1;

	if (cplan == NULL)
		return -1;
	if (list_length(cplan->stmt_list) == 1)
	{
		PlannedStmt *ps = linitial_node(PlannedStmt, cplan->stmt_list);

		if (ps->commandType == CMD_SELECT && ps->utilityStmt == NULL && ps->planTree != NULL)
			rows = ps->planTree->plan_rows;
	}
#if PG_VERSION_NUM >= 140000
	ReleaseCachedPlan(cplan, NULL);
#else
	ReleaseCachedPlan(cplan, false);
#endif
	return rows;
}

/*
 * Prepares and runs the query through SPI, streaming its rows into st.  The
 * statement itself must be a SELECT; functions it calls could still write,
 * and running it as in a read-only transaction refuses most such writes with
 * a clear error (temporary tables, large objects and some others excepted,
 * as in any read-only transaction): the caller rolls back what is left.
 */
static void
RunQuery(const char *query, GatherReceiver *st)
{
	SPIPlanPtr	plan;
	int			rc;
	bool		save_read_only = XactReadOnly;

	if ((rc = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(rc));
	/*
	 * Parallel plans are allowed: the plan runs once, to completion, into
	 * the DestReceiver, which is what PostgreSQL asks of a parallel plan.
	 * The planner still keeps it serial when the query calls anything
	 * parallel unsafe or when workers would not pay (a plain scan of every
	 * row usually does not: each row would cross over from a worker).
	 */
	plan = SPI_prepare_cursor(query, 0, NULL, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare_cursor failed: %s", SPI_result_code_string(SPI_result));
	CheckReadOnly(plan, query);
	{
		CachedPlanSource *ps = linitial(SPI_plan_get_plan_sources(plan));
		MemoryContext old = MemoryContextSwitchTo(st->outcxt);

		CheckColumns(st, CreateTupleDescCopy(ps->resultDesc));
		st->plain = PlainColumns(linitial_node(Query, ps->query_list), st->natts);
		MemoryContextSwitchTo(old);
	}
	XactReadOnly = true;
	PG_TRY();
	{
		st->est_rows = Max(GcPlannedRows(plan), 0.0);
		ExecuteInto(plan, st);
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();
	SPI_finish();
}

/*
 * Runs query read-only with the caller's privileges and fills in (in the
 * current memory context).  An empty result gives n = 0.
 *
 * The query runs in a subtransaction that is always rolled back once its
 * rows are copied out, so nothing it did stays: no row, large object,
 * temporary table, setting, notification or transaction-level lock.  What is
 * not transactional in PostgreSQL stays as it would after any rollback:
 * sequence values, session-level advisory locks, files written by server
 * functions, signals sent to other backends.
 */
void
GcGather(const char *query, GcInput *in)
{
	MemoryContext outcxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	GatherReceiver st;

	memset(in, 0, sizeof(*in));
	memset(&st, 0, sizeof(st));
	st.pub.receiveSlot = GatherReceive;
	st.pub.rStartup = GatherStartup;
	st.pub.rShutdown = GatherShutdown;
	st.pub.rDestroy = GatherDestroy;
	st.pub.mydest = DestNone;
	st.in = in;
	st.outcxt = outcxt;
	st.tmpcxt = AllocSetContextCreate(outcxt, "gpuclust gather",
									  GATHER_TMP_BYTES, GATHER_TMP_BYTES, GATHER_TMP_BYTES);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(outcxt);
	PG_TRY();
	{
		RunQuery(query, &st);
		if (st.buffers != NULL)
			StopPrefault(&st.buffers->prefault);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (st.buffers != NULL)
			StopPrefault(&st.buffers->prefault);

		/* Roll back our own subtransaction before the error goes up. */
		MemoryContextSwitchTo(outcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(outcxt);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(outcxt);
	CurrentResourceOwner = owner;

	MemoryContextDelete(st.tmpcxt);
	if (in->n == 0)
		in->d = st.kind == FEATURES_SCALARS ? st.natts - 1 : 0;
}
