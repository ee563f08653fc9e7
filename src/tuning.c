/*
 * tuning.c
 *    The settings that cross the back-end interface in gc_tuning: the CPU
 *    back end's threads (gpuclust.cpu_threads) and the developer settings
 *    (knobs of the back ends for tests and benchmarks), copied into
 *    gc_tuning_gucs for every call.
 */
#include "postgres.h"

#include "utils/guc.h"

#include "buffer.h"
#include "cpu_threads.h"
#include "tuning.h"

static int	cpu_threads_guc = 1;
gc_tuning	gc_tuning_gucs;

/* Developer settings stored as int/double, copied into gc_tuning_gucs by their assign hooks. */
static int	dbscan_grid_guc = GC_DBSCAN_GRID_AUTO;
static int	kmeans_gemm_guc = GC_KMEANS_GEMM_AUTO;
static bool debug_guc = false;
static double kmeans_window_guc = 0.0;
static int	kmeans_tile_rows_guc = 0;
static int	kmeans_chunk_rows_guc = 0;
static bool cpu_blas_guc = true;
static int	pair_path_guc = 0;
static int	pair_screen_guc = 0;

static const struct config_enum_entry grid_options[] = {
	{"auto", GC_DBSCAN_GRID_AUTO, false},
	{"fine", GC_DBSCAN_GRID_FINE, false},
	{"coarse", GC_DBSCAN_GRID_COARSE, false},
	{NULL, 0, false}
};

static const struct config_enum_entry pair_path_options[] = {
	{"auto", 0, false},
	{"pairs", 1, false},
	{"index", -1, false},
	{NULL, 0, false}
};

/* 1 + gc_pair_precision of common/pairs.h */
static const struct config_enum_entry pair_screen_options[] = {
	{"auto", 0, false},
	{"fp32", 1, false},
	{"tf32", 2, false},
	{"fp64", 3, false},
	{NULL, 0, false}
};

static const struct config_enum_entry gemm_options[] = {
	{"auto", GC_KMEANS_GEMM_AUTO, false},
	{"sgemm", GC_KMEANS_GEMM_SGEMM, false},
	{"tf32-fp32", GC_KMEANS_GEMM_TF32_FP32, false},
	{NULL, 0, false}
};

/* Copies the developer settings into gc_tuning_gucs (assign hooks run after the store). */
void
SyncTuning(void)
{
	gc_tuning_gucs = gc_tuning_defaults();
	gc_tuning_gucs.debug = debug_guc;
	gc_tuning_gucs.dbscan_grid = (gc_dbscan_grid) dbscan_grid_guc;
	gc_tuning_gucs.kmeans_gemm = (gc_kmeans_gemm) kmeans_gemm_guc;
	gc_tuning_gucs.kmeans_window = kmeans_window_guc;
	gc_tuning_gucs.kmeans_tile_rows = kmeans_tile_rows_guc;
	gc_tuning_gucs.kmeans_chunk_rows = kmeans_chunk_rows_guc;
	gc_tuning_gucs.cpu_threads = cpu_threads_guc;
	gc_tuning_gucs.cpu_blas = cpu_blas_guc ? 0 : -1;
	gc_tuning_gucs.pair_path = pair_path_guc;
	gc_tuning_gucs.pair_screen = pair_screen_guc;
}

/* gpuclust.kmeans_window: 0 (the default window) or a factor of at least 1. */
static bool
CheckKmeansWindow(double *newval, void **extra, GucSource source)
{
	if (*newval == 0.0 || *newval >= 1.0)
		return true;
	GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
	GUC_check_errdetail("gpuclust.kmeans_window is 0 (the default window) or a factor of at least 1 that widens it.");
	GUC_check_errhint("Use 0, or a value of 1 or more.");
	return false;
}

/*
 * The developer settings: knobs of the back ends for tests and benchmarks.
 * None changes an answer.  Hidden from SHOW ALL and the sample file, settable
 * per session like any other setting.
 */
static void
DefineTuningGucs(void)
{
	const int	flags = GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE;

	DefineCustomEnumVariable("gpuclust.dbscan_grid",
							 "Grid of the GPU DBSCAN: auto, fine (cells of side eps/sqrt(d)) or coarse (side eps).",
							 NULL, &dbscan_grid_guc, GC_DBSCAN_GRID_AUTO, grid_options,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomBoolVariable("gpuclust.backend_debug",
							 "The back ends print what they chose (grid, launches) to the server log.",
							 NULL, &debug_guc, false,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomEnumVariable("gpuclust.kmeans_gemm",
							 "Product of the GPU k-means for d > 32: auto (TF32 first where the GPU has it), sgemm (FP32 only) or tf32-fp32 (no DGEMM level).",
							 NULL, &kmeans_gemm_guc, GC_KMEANS_GEMM_AUTO, gemm_options,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomRealVariable("gpuclust.kmeans_window",
							 "Widens the candidate window of the checked GPU k-means product by this factor (0: default).",
							 NULL, &kmeans_window_guc, 0.0, 0.0, 1e12,
							 PGC_USERSET, flags, CheckKmeansWindow, NULL, NULL);
	DefineCustomIntVariable("gpuclust.kmeans_tile_rows",
							"Rows per GPU k-means product (0: chosen from the free memory; at least 32 otherwise).",
							NULL, &kmeans_tile_rows_guc, 0, 0, INT_MAX,
							PGC_USERSET, flags, NULL, NULL, NULL);
	GcBufferDefineGucs(flags);
	DefineCustomBoolVariable("gpuclust.cpu_blas",
							 "The CPU k-means takes its full searches from OpenBLAS's matrix product where OpenBLAS is installed (off: the exact loops alone).",
							 NULL, &cpu_blas_guc, true,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomEnumVariable("gpuclust.pair_path",
							 "DBSCAN and density peaks: auto (the pair engine from 16 features on), pairs (always the pair engine) or index (never); HDBSCAN: auto from 32 features on the CPU, the GPU only with pairs.",
							 NULL, &pair_path_guc, 0, pair_path_options,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomEnumVariable("gpuclust.pair_screen",
							 "Precision of the pair engine's screen: auto (chosen from its error bound), fp32 (CPU), tf32 (GPU) or fp64.",
							 NULL, &pair_screen_guc, 0, pair_screen_options,
							 PGC_USERSET, flags, NULL, NULL, NULL);
	DefineCustomIntVariable("gpuclust.kmeans_chunk_rows",
							"Caps the rows the GPU k-means keeps on the device at once (0: no cap; at least 1024 otherwise).",
							NULL, &kmeans_chunk_rows_guc, 0, 0, INT_MAX,
							PGC_USERSET, flags, NULL, NULL, NULL);
	SyncTuning();
}

/* Defines gpuclust.cpu_threads and the developer settings. */
void
GcTuningDefineGucs(void)
{
	/* the default: every CPU this server process may run on, at most GC_POOL_DEFAULT_MAX */
	DefineCustomIntVariable("gpuclust.cpu_threads",
							"Threads of the CPU back end for one call.",
							"The default is the number of CPUs this server process may run on, at most 64; "
							"1 computes on the backend's own thread alone. The answers do not depend on it.",
							&cpu_threads_guc, gc_pool_default_threads(), 1, GC_POOL_MAX_THREADS,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineTuningGucs();
}
