/*
 * backend.h
 *    The one interface between the PostgreSQL glue (src/) and the two back
 *    ends: the CPU core (src/core/) and the GPU back end (cuda/).  Both back
 *    ends implement the same table of entry points, gc_backend_api, with the
 *    same parameter and result structs, status codes, error record, timing
 *    and tuning, so the glue runs either one the same way.
 *
 * Plain C types only; this header and the other headers of common/ are
 * compiled by gcc and by nvcc.  The GPU back end is a separate shared
 * object, gpuclust_cuda.so, that the glue opens with dlopen() on first GPU
 * use and reads through one exported symbol, gpuclust_cuda_api(); the CPU
 * back end is linked in and read through gc_cpu_api() (src/core/backend.c).
 * Every entry point returns a gc_status; on failure last_error() describes
 * it.  No C++ exception, no longjmp and no PostgreSQL header ever crosses
 * this boundary.
 *
 * Buffers are owned by the caller and live in host memory.  Matrices are
 * row-major: x is [n, d] with row i at x + i * d.
 *
 * Long work is cut into steps; between steps the back end calls
 * exec->cancel(exec->cancel_arg) and returns GC_ERR_CANCELLED, having freed
 * everything, when it answers non-zero.
 */
#ifndef GPUCLUST_BACKEND_H
#define GPUCLUST_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct or the api table changes incompatibly. */
#define GC_ABI_VERSION 9

typedef enum gc_status
{
	GC_OK = 0,
	GC_ERR_NOT_BUILT,			/* the GPU back end was not compiled in */
	GC_ERR_NO_DRIVER,			/* no usable NVIDIA driver (or too old) */
	GC_ERR_NO_DEVICE,			/* driver present but no (such) device */
	GC_ERR_OUT_OF_MEMORY,		/* device or host allocation failed */
	GC_ERR_CANCELLED,			/* cancel callback answered yes */
	GC_ERR_INVALID_ARGUMENT,	/* parameters or data rejected; the error says why */
	GC_ERR_CUDA,				/* any other CUDA or library failure */
	GC_ERR_INTERNAL,			/* broken invariant: a bug */
	GC_ERR_QUEUE_TIMEOUT,		/* the GPU service's queue: gpuclust.gpu_queue_timeout passed */
	GC_ERR_UNAVAILABLE			/* the GPU service is not running, or stopped during the call */
} gc_status;

/*
 * What went wrong, written by a back end (or by a check of common/checks.h)
 * in the words the SQL user reads: message lowercase without a final
 * period, detail and hint whole sentences or empty.
 */
#define GC_ERROR_TEXT 512
typedef struct gc_error
{
	char		message[GC_ERROR_TEXT];
	char		detail[GC_ERROR_TEXT];
	char		hint[GC_ERROR_TEXT];
} gc_error;

/* Answers non-zero when the caller wants the work stopped. */
typedef int (*gc_cancel_fn) (void *arg);

/*
 * The GPU's start-up, paid once per process (a PostgreSQL backend) by its
 * first GPU call: the places of gc_timing.init_ms, named in common/phases.h.
 * driver and load are the glue's (src/gpu.c: the driver's cuInit, then the
 * back end's dlopen with the CUDA runtime and cuBLAS libraries), the others
 * the GPU back end's (cuda/api.cu): the device's primary context, the
 * cuBLAS handle (k-means products only) and the first device allocation.
 */
typedef enum gc_init_part
{
	GC_INIT_DRIVER = 0,
	GC_INIT_LOAD = 1,
	GC_INIT_CONTEXT = 2,
	GC_INIT_CUBLAS = 3,
	GC_INIT_ALLOC = 4,
	GC_INIT_PARTS = 5
} gc_init_part;

/* Host wall-clock milliseconds spent in each part of one call. */
typedef struct gc_timing
{
	double		to_device_ms;	/* host to device copies (GPU) */
	double		compute_ms;		/* the computation, synchronized */
	double		from_device_ms; /* device to host copies (GPU) */
	double		phase_ms[4];	/* algorithm-specific phases, see each algorithm */
	int64_t		counts[3];		/* algorithm-specific counts, see each algorithm */
	int64_t		bytes_needed;	/* bytes needed; set on GC_ERR_OUT_OF_MEMORY */
	int32_t		threads;		/* CPU threads that ran the call (the CPU back end; 0 on the GPU) */
	double		init_ms[GC_INIT_PARTS]; /* GPU start-up this call paid (gc_init_part); 0 when warm */
	int32_t		path;			/* DBSCAN, density peaks: GC_PATH_INDEX or GC_PATH_PAIRS; 0 not said */
	int32_t		pair_screen;	/* the pair engine's screen (gc_pair_precision of common/pairs.h) */
	int64_t		pair_exact;		/* pairs the pair engine decided in the canonical arithmetic */
} gc_timing;

/* gc_timing.path: the grid or tree index, or the pair engine (common/pairs.h). */
#define GC_PATH_INDEX 1
#define GC_PATH_PAIRS 2

/*
 * Tuning and debugging knobs: none changes an answer, only the way to it.
 * The glue fills them from developer settings (gpuclust.dbscan_grid, ...),
 * harnesses from their arguments.  gc_tuning_defaults() gives the values
 * used when the caller passes no tuning.
 */
#define GC_TUNING_VERSION 3

typedef enum gc_dbscan_grid
{
	GC_DBSCAN_GRID_AUTO = 0,	/* the back end chooses */
	GC_DBSCAN_GRID_FINE = 1,	/* cells of side eps/sqrt(d) (d <= 3) */
	GC_DBSCAN_GRID_COARSE = 2	/* cells of side eps */
} gc_dbscan_grid;

typedef enum gc_kmeans_gemm
{
	GC_KMEANS_GEMM_AUTO = 0,	/* TF32 first where the device has it, then checked */
	GC_KMEANS_GEMM_SGEMM = 1,	/* the FP32 product only */
	GC_KMEANS_GEMM_TF32_FP32 = 2	/* TF32, then FP32 for the open rows (no DGEMM level) */
} gc_kmeans_gemm;

typedef struct gc_tuning
{
	uint32_t	struct_size;	/* sizeof(gc_tuning) */
	uint32_t	version;		/* GC_TUNING_VERSION */
	int32_t		debug;			/* non-zero: the back end prints its choices to stderr */
	gc_dbscan_grid dbscan_grid; /* GPU DBSCAN grid */
	gc_kmeans_gemm kmeans_gemm; /* GPU k-means product for d > 32 */
	double		kmeans_window;	/* >= 1 widens the candidate window by that factor; 0: default */
	int64_t		kmeans_tile_rows;	/* rows per GPU product (>= 32); 0: chosen from free memory */
	int64_t		kmeans_chunk_rows;	/* cap on GPU rows per chunk (>= 1024); 0: no cap */
	int32_t		cpu_threads;	/* CPU back end threads, and the GPU's for HDBSCAN's host part; 0: the CPUs the process may run on */
	int32_t		dbscan_sweep;	/* CPU DBSCAN of few rows: 0 the back end chooses, -1 always the grid */
	int32_t		cpu_blas;		/* CPU k-means products and pair engine: 0 through OpenBLAS where installed, -1 never (exact loops) */
	int32_t		pair_path;		/* DBSCAN, density peaks, HDBSCAN: 0 the rules of common/pairs.h, 1 the pair engine, -1 the grid or tree */
	int32_t		pair_screen;	/* the pair engine's screen: 0 chosen, else 1 + a gc_pair_precision */
	double		pair_margin;	/* the screen's error bound times this: 1; 0 only for the tests' mutation check (no setting) */
} gc_tuning;

static inline gc_tuning
gc_tuning_defaults(void)
{
	gc_tuning	t;

	t.struct_size = (uint32_t) sizeof(gc_tuning);
	t.version = GC_TUNING_VERSION;
	t.debug = 0;
	t.dbscan_grid = GC_DBSCAN_GRID_AUTO;
	t.kmeans_gemm = GC_KMEANS_GEMM_AUTO;
	t.kmeans_window = 0.0;
	t.kmeans_tile_rows = 0;
	t.kmeans_chunk_rows = 0;
	t.cpu_threads = 0;
	t.dbscan_sweep = 0;
	t.cpu_blas = 0;
	t.pair_path = 0;
	t.pair_screen = 0;
	t.pair_margin = 1.0;
	return t;
}

/*
 * The element type of the input rows x: single precision (real, real[],
 * pgvector vector and halfvec) or double precision (double precision,
 * numeric, integers, PostGIS coordinates).  Either way each algorithm's
 * arithmetic is done as its comments say (mostly in double); what changes
 * is the value of each coordinate, which is exactly the caller's.
 */
typedef enum gc_dtype
{
	GC_F32 = 0,					/* x is const float * */
	GC_F64 = 1					/* x is const double * */
} gc_dtype;

/*
 * The distance between rows, see common/metric.h for the exact arithmetic.
 * GC_METRIC_COSINE: the caller passes rows of unit length, made so by
 * gc_unit_rows() of common/metric.h (the glue does it, in double, and
 * rejects a zero row); the distance of two such rows is half their squared
 * Euclidean distance, which is 1 - cos(a, b) up to rounding.
 */
typedef enum gc_metric
{
	GC_METRIC_EUCLIDEAN = 0,
	GC_METRIC_COSINE = 1
} gc_metric;

/* How one entry point runs: where, with which knobs, how to stop, where the times go. */
typedef struct gc_exec
{
	uint32_t	struct_size;	/* sizeof(gc_exec) */
	int32_t		device_id;		/* GPU to use (ignored by the CPU) */
	const gc_tuning *tuning;	/* NULL: gc_tuning_defaults() */
	gc_cancel_fn cancel;		/* NULL: never cancelled */
	void	   *cancel_arg;
	gc_timing  *timing;			/* out, NULL: not wanted */
} gc_exec;

typedef struct gc_device_info
{
	int32_t		device_id;
	char		name[256];
	int64_t		total_memory;	/* bytes */
	int64_t		free_memory;	/* bytes, when read */
	int32_t		cc_major;
	int32_t		cc_minor;
} gc_device_info;

/* ---------------------------------------------------------------- DBSCAN
 * Semantics (both back ends, bit-identical answers):
 *  - squared Euclidean distance accumulated in double over dimensions
 *    0..d-1 in order, without fused multiply-add; a neighbour when its
 *    distance of the metric is at most eps, i.e. when dist2 <=
 *    gc_metric_dist2_le(metric, eps) of common/metric.h (itself included);
 *    for the Euclidean metric that is PostGIS's sqrt(dist2) <= eps;
 *  - core when the neighbourhood holds >= min_pts points;
 *  - a border point takes the cluster of the lowest-index core point within eps;
 *  - clusters are numbered 0, 1, ... by their lowest-index member; noise is -1.
 * Cell planning of the grid index: common/dbscan_grid.h.
 */
typedef struct gc_dbscan_params
{
	uint32_t	struct_size;	/* sizeof(gc_dbscan_params) */
	double		eps;			/* > 0, finite */
	int32_t		min_pts;		/* >= 1 */
	gc_metric	metric;			/* eps is in this metric's units */
} gc_dbscan_params;

typedef struct gc_dbscan_result
{
	int32_t    *cluster;		/* [n] out: cluster id or -1 for noise */
	uint8_t    *is_core;		/* [n] out: 1 for core points */
	int64_t		n_clusters;		/* out */
} gc_dbscan_result;

/* ---------------------------------------------------------------- k-means
 * Lloyd's algorithm, see src/core/kmeans.c for the exact rules and
 * common/kmeans_init.h for what both back ends share.
 * timing.phase_ms: [0] statistics and initialisation, [1] iterations,
 * [2] final pass, [3] milliseconds per iteration.
 */
typedef enum gc_kmeans_init
{
	GC_KMEANS_INIT_PLUSPLUS = 0,	/* greedy k-means++: 2 + floor(ln k) D^2 draws per step */
	GC_KMEANS_INIT_RANDOM = 1,	/* k distinct rows chosen by seed */
	GC_KMEANS_INIT_GIVEN = 2,	/* initial_centroids */
	GC_KMEANS_INIT_PLUSPLUS_PLAIN = 3	/* k-means++ with one D^2 draw per step */
} gc_kmeans_init;

typedef enum gc_precision
{
	GC_PRECISION_FP32 = 0,		/* nearest centroid as in double precision */
	GC_PRECISION_TF32 = 1		/* opt-in: TF32 products alone, no check */
} gc_precision;

typedef struct gc_kmeans_params
{
	uint32_t	struct_size;	/* sizeof(gc_kmeans_params) */
	int32_t		k;				/* 1 <= k <= n */
	int32_t		max_iter;		/* >= 1 */
	double		tol;			/* >= 0, relative to the mean feature variance */
	uint64_t	seed;
	gc_kmeans_init init;
	const double *initial_centroids;	/* [k, d] when init == GIVEN (d as passed to the check) */
	gc_precision precision;
	int32_t		n_init;			/* >= 1 runs, seeds gc_kmeans_run_seed(seed, r); 1 when GIVEN */
	gc_metric	metric;			/* COSINE: spherical k-means */
} gc_kmeans_params;

typedef struct gc_kmeans_result
{
	int32_t    *labels;			/* [n] out */
	double	   *distance;		/* [n] out: distance to the assigned centroid */
	double	   *centroids;		/* [k, d] out */
	int64_t    *sizes;			/* [k] out */
	double	   *inertia;		/* [k] out: per-cluster sum of squared distances (COSINE: of cosine distances) */
	int32_t		iterations;		/* out: of the run kept */
	int32_t		best_run;		/* out: the run kept (0-based), lowest total inertia, first on a tie */
} gc_kmeans_result;

/*
 * k-means assignment: every row to its nearest of k given centroids, as the
 * final assignment of gc_backend_api.kmeans gives it for those centroids
 * (the same arithmetic, the lowest cluster number on a tie, the same
 * precision rules), and its distance of the metric computed in double.
 * timing.phase_ms: [0] preparation, [1] assignment, [2] distances.
 * timing.counts as for kmeans.
 */
typedef struct gc_kmeans_assign_params
{
	uint32_t	struct_size;	/* sizeof(gc_kmeans_assign_params) */
	int32_t		k;				/* >= 1 */
	const double *centroids;	/* [k, d] finite; unit rows when COSINE */
	gc_precision precision;
	gc_metric	metric;
} gc_kmeans_assign_params;

typedef struct gc_kmeans_assign_result
{
	int32_t    *labels;			/* [n] out */
	double	   *distance;		/* [n] out */
} gc_kmeans_assign_result;

/* ---------------------------------------------------------------- density peaks
 * Rodriguez & Laio, see src/core/dpeaks.c for the exact rules and
 * common/dpeaks_common.h for the arithmetic both back ends share.
 * timing.phase_ms: [0] dc, [1] rho, [2] delta, [3] assignment.
 */
typedef enum gc_dp_kernel
{
	GC_DP_KERNEL_GAUSSIAN = 0,
	GC_DP_KERNEL_CUTOFF = 1
} gc_dp_kernel;

typedef enum gc_dc_method
{
	GC_DC_GIVEN = 0,			/* dc was passed in */
	GC_DC_EXACT = 1,			/* binary search over all pairs */
	GC_DC_SAMPLE = 2			/* quantile of a seeded sample */
} gc_dc_method;

typedef struct gc_dpeaks_params
{
	uint32_t	struct_size;	/* sizeof(gc_dpeaks_params) */
	int32_t		n_clusters;		/* > 0: that many centres; 0: thresholds */
	double		dc;				/* > 0: given; 0 when derive_dc */
	int32_t		derive_dc;		/* non-zero: dc from neighbor_rate */
	double		neighbor_rate;	/* in (0, 1) */
	gc_dp_kernel kernel;
	double		rho_min;		/* used when n_clusters == 0 */
	double		delta_min;		/* used when n_clusters == 0 */
	uint64_t	seed;			/* for dc sampling */
	gc_metric	metric;			/* dc, rho_min/delta_min and delta in its units */
} gc_dpeaks_params;

typedef struct gc_dpeaks_result
{
	int32_t    *cluster;		/* [n] out */
	double	   *rho;			/* [n] out */
	double	   *delta;			/* [n] out */
	uint8_t    *is_center;		/* [n] out */
	double		dc;				/* out: the cutoff distance used */
	gc_dc_method dc_method;		/* out */
	int64_t		dc_sample;		/* out: sample size when GC_DC_SAMPLE */
	int64_t		n_centers;		/* out */
} gc_dpeaks_result;

/* ---------------------------------------------------------------- HDBSCAN
 * Campello, Moulavi & Sander, "Density-based clustering based on
 * hierarchical density estimates" (2013), with scikit-learn's HDBSCAN
 * semantics; common/hdbscan.h holds the exact rules and the part both back
 * ends share (everything after the minimum spanning tree).  In short:
 *  - dist(a, b) = gc_metric_distance(metric, dist2(a, b)) of common/metric.h;
 *  - core(a) = the min_samples-th smallest dist(a, b) over all rows b, a
 *    itself included (so min_samples = 1 gives 0);
 *  - mutual reachability w(a, b) = max(core(a), core(b), dist(a, b));
 *  - the MST is the unique minimum spanning tree under the order (w, lower
 *    row, higher row), and single linkage merges its edges in that order;
 *  - then the condensed tree, stability, EOM or leaf selection, labels,
 *    probabilities and GLOSH outlier scores (gc_hdbscan_finish).
 * Clusters are numbered 0, 1, ... by their lowest-index member; noise is -1.
 * timing.phase_ms: [0] core distances, [1] minimum spanning tree,
 * [2] hierarchy, condensed tree and selection; timing.counts: [0] Boruvka
 * rounds, [1] distance evaluations.
 */
typedef enum gc_hdbscan_method
{
	GC_HDBSCAN_EOM = 0,			/* excess of mass */
	GC_HDBSCAN_LEAF = 1			/* the leaves of the condensed tree */
} gc_hdbscan_method;

typedef struct gc_hdbscan_params
{
	uint32_t	struct_size;	/* sizeof(gc_hdbscan_params) */
	int32_t		min_cluster_size;	/* >= 2 */
	int32_t		min_samples;	/* 1 <= min_samples <= n */
	double		cluster_selection_epsilon;	/* >= 0, finite, in the metric's units */
	gc_hdbscan_method method;
	int32_t		allow_single_cluster;	/* non-zero: the root may be selected */
	int64_t		max_cluster_size;	/* 0: no limit (EOM only, as scikit-learn) */
	gc_metric	metric;
} gc_hdbscan_params;

/*
 * The condensed tree, optional: the caller passes arrays of capacity 2 n
 * (every row once, every cluster node but the root once) or NULL.  Cluster
 * nodes are numbered 0 (the root), 1, 2, ... in the order they are made;
 * a row of the tree has a cluster node as parent and either a cluster node
 * (child >= 0, child_row -1) or a row (child -1, child_row its index) as
 * child.  Per cluster node: selected and its cluster number (-1 when not
 * selected).
 */
typedef struct gc_hdbscan_tree
{
	int64_t		capacity;		/* rows the arrays below hold (>= 2 n) */
	int64_t	   *parent;			/* [capacity] out: cluster node */
	int64_t	   *child;			/* [capacity] out: cluster node, or -1 */
	int64_t	   *child_row;		/* [capacity] out: row index, or -1 */
	double	   *lambda_val;		/* [capacity] out: 1 / distance at which the child leaves */
	int64_t	   *child_size;		/* [capacity] out: rows under the child */
	int64_t		rows;			/* out: rows written */
	uint8_t    *node_selected;	/* [capacity] out: per cluster node */
	int32_t    *node_cluster;	/* [capacity] out: per cluster node, -1 unless selected */
	int64_t		nodes;			/* out: cluster nodes */
} gc_hdbscan_tree;

typedef struct gc_hdbscan_result
{
	int32_t    *cluster;		/* [n] out: cluster id or -1 for noise */
	double	   *probability;	/* [n] out: scikit-learn's probabilities_ */
	double	   *outlier_score;	/* [n] out: GLOSH, as the hdbscan library's outlier_scores_ */
	/* (both or neither NULL: not wanted, not computed) */
	double	   *core_distance;	/* [n] out, NULL: not wanted */
	gc_hdbscan_tree *tree;		/* NULL: not wanted */
	int64_t		n_clusters;		/* out */
} gc_hdbscan_result;

/* ---------------------------------------------------------------- the api table */
typedef struct gc_backend_api
{
	uint32_t	abi_version;	/* GC_ABI_VERSION */
	uint32_t	struct_size;	/* sizeof(gc_backend_api) */
	const char *name;			/* "cpu" or "gpu" */

	/* The last failure in this thread (empty texts if none). */
	const gc_error *(*last_error) (void);

	/* Number of usable devices; GC_ERR_NO_DRIVER / GC_ERR_NO_DEVICE when none. */
	gc_status	(*device_count) (int32_t *count);

	gc_status	(*device_info) (int32_t device_id, gc_device_info *info);

	/* Frees any memory the back end still holds (safe to call any time). */
	void		(*release) (void);

	gc_status	(*dbscan) (const gc_exec *exec,
							const void *x, gc_dtype dtype, /* [n, d] row-major */
							int64_t n, int32_t d,
							const gc_dbscan_params *params,
							gc_dbscan_result *result);

	gc_status	(*kmeans) (const gc_exec *exec,
						   const void *x, gc_dtype dtype, /* [n, d] row-major */
						   int64_t n, int32_t d,
						   const gc_kmeans_params *params,
						   gc_kmeans_result *result);

	gc_status	(*density_peaks) (const gc_exec *exec,
								  const void *x, gc_dtype dtype, /* [n, d] row-major */
								  int64_t n, int32_t d,
								  const gc_dpeaks_params *params,
								  gc_dpeaks_result *result);

	gc_status	(*kmeans_assign) (const gc_exec *exec,
								  const void *x, gc_dtype dtype, /* [n, d] row-major */
								  int64_t n, int32_t d,
								  const gc_kmeans_assign_params *params,
								  gc_kmeans_assign_result *result);

	gc_status	(*hdbscan) (const gc_exec *exec,
							const void *x, gc_dtype dtype, /* [n, d] row-major */
							int64_t n, int32_t d,
							const gc_hdbscan_params *params,
							gc_hdbscan_result *result);
} gc_backend_api;

/* The CPU back end (src/core/backend.c), linked into gpuclust.so and every harness. */
const gc_backend_api *gc_cpu_api(void);

/* The one symbol gpuclust_cuda.so exports. */
#define GC_CUDA_API_SYMBOL "gpuclust_cuda_api"
typedef const gc_backend_api *(*gc_cuda_api_fn) (void);
const gc_backend_api *gpuclust_cuda_api(void);

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_BACKEND_H */
