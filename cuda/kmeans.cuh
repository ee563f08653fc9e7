/*
 * kmeans.cuh
 *    What the parts of the GPU k-means share: the launch constants, the
 *    state of one call grouped by concern (the plan, the rows, the centroids,
 *    the update's sums, the per-iteration report, the product form, the
 *    sorted update's workspace), and the host launchers each part offers the
 *    driver.  Internal to gpuclust_cuda.so (namespace gc::km, hidden).
 *
 *    kmeans.cu          the driver: plan, buffers, the phases, gcu_kmeans
 *    kmeans_lowd.cu     assignment for d <= 32, fused with the update for d <= 16
 *    kmeans_product.cu  assignment for d > 32: GEMM, checked argmin, refinement
 *    kmeans_direct.cu   assignment of rows of double precision, in double;
 *                       the DGEMM level of the product form (fast FP64)
 *    kmeans_update.cu   centroid forms, the sorted and fixed-point updates,
 *                       empty clusters, final distances
 *    kmeans_init.cu     data statistics and initial centroids (k-means++ on the device)
 *
 * Kernels live beside their launchers, in an anonymous namespace of their
 * file (no relocatable device code: a kernel is launched from the file that
 * defines it).
 */
#ifndef GPUCLUST_KMEANS_CUH
#define GPUCLUST_KMEANS_CUH

#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "kmeans_init.h"
#include "metric.h"

namespace gc {
namespace km {

using gc::DeviceBuffer;

constexpr int BLOCK = 256;				/* threads per block of the row kernels */
constexpr int PPT = 2;					/* points per thread in the low-d kernel */
constexpr int GC_SLICE = 2048;			/* rows per slice of the sorted update */
constexpr size_t FUSED_SMEM_MAX = 40 * 1024;	/* shared memory of the fused update, at most */
constexpr size_t TILE_SMEM_MAX = 32 * 1024;	/* shared memory of a low-d centroid tile, at most */

#define CUBLAS_TRY(call) \
	do { \
		cublasStatus_t gc_cb_ = (call); \
		if (gc_cb_ != CUBLAS_STATUS_SUCCESS) \
			::gc::fail(gc_cb_ == CUBLAS_STATUS_ALLOC_FAILED ? GC_ERR_OUT_OF_MEMORY : GC_ERR_CUDA, \
					   "%s failed: cuBLAS status %d at %s:%d", #call, (int) gc_cb_, __FILE__, __LINE__); \
	} while (0)

/*
 * cuBLAS, loaded with dlopen at the first k-means product of the process
 * (Cublas::open), not with the back end: the library and its cublasLt take
 * about 60 ms to load (more when not in the page cache) and most calls never use
 * them (DBSCAN, density peaks, HDBSCAN, k-means of d <= 32 in single
 * precision).  The entry points the products call, by their names in
 * cublas_v2.h.
 */
struct CublasApi
{
	decltype(&cublasCreate) create;
	/* the library's entry points (C++ also sees inline overloads taking cudaDataType) */
	cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
							  const void *, const void *, cudaDataType, int, const void *, cudaDataType,
							  int, const void *, void *, cudaDataType, int, cublasComputeType_t,
							  cublasGemmAlgo_t);
	cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
											  int, int, const void *, const void *, cudaDataType, int,
											  long long, const void *, cudaDataType, int, long long,
											  const void *, void *, cudaDataType, int, long long, int,
											  cublasComputeType_t, cublasGemmAlgo_t);
	decltype(&cublasDgemm) dgemm;
};

/* The loaded cuBLAS; valid after a Cublas::open of this process. */
extern CublasApi cublas;

/*
 * The cuBLAS handle of the current device, created at its first use and
 * kept for the life of the process (a handle costs about a millisecond to
 * create and a few megabytes of device memory, which stay with it).  The
 * first open of the process loads cuBLAS; a library that cannot be loaded
 * is the call's GC_ERR_CUDA, saying which.
 */
struct Cublas
{
	cublasHandle_t h = nullptr;

	void open();
};

/* Blocks for work items of per_block each, at least 1 and at most cap. */
inline unsigned int grid_for(int64_t work, int64_t per_block, unsigned int cap)
{
	int64_t		g = (work + per_block - 1) / per_block;

	return (unsigned int) std::max<int64_t>(1, std::min<int64_t>(g, cap));
}

/* Adds every thread's count to *total, one atomic per block; synchronizes the block. */
__device__ inline void block_add(unsigned long long *total,	/* [1] in/out */
								 unsigned int mine)
{
	__shared__ unsigned int blk;

	if (threadIdx.x == 0)
		blk = 0;
	__syncthreads();
	if (mine)
		atomicAdd(&blk, mine);
	__syncthreads();
	if (threadIdx.x == 0 && blk)
		atomicAdd(total, (unsigned long long) blk);
}

/* ---------------------------------------------------------------- the state of one call */

/* The shape of the call and what the plan chose for it (kmeans.cu). */
struct Plan
{
	int64_t		n = 0;
	int			d = 0;
	int			k = 0;
	int			sms = 1;				/* multiprocessors of the device */
	gc_dtype	dtype = GC_F32;			/* element type of the rows */
	gc_metric	metric = GC_METRIC_EUCLIDEAN;	/* COSINE: unit centroids after each update */
	int			maxd = 0;				/* 2, 4, 8, 16, 32, 0 for the product form, -1 for double rows */
	bool		fused = false;			/* fixed-point update inside the low-d assignment */
	bool		f64_gemm = false;		/* double rows, d > 32: the DGEMM product, checked */
	bool		resident = true;		/* all rows on the device, else chunks copied per pass */
	int64_t		chunk_rows = 0;			/* rows per chunk (n when resident) */
	int64_t		gemm_tile = 0;			/* rows per product (maxd == 0) */

	int64_t		chunks() const { return (n + chunk_rows - 1) / chunk_rows; }
	int64_t		chunk_off(int64_t c) const { return c * chunk_rows; }
	int64_t		chunk_len(int64_t c) const { return std::min<int64_t>(chunk_rows, n - c * chunk_rows); }
};

/* Statistics of the data: the unit of tol, the centring, the box of the fixed point. */
struct DataStats
{
	double		mean_var = 0.0;			/* mean per-feature variance */
	std::vector<double> mean, lo, hi;	/* [d] each */
};

/* The rows on the device: all of them or one chunk, and what every row keeps. */
struct Rows
{
	DeviceBuffer<float> x;				/* [chunk_rows, d] (GC_F32) */
	DeviceBuffer<double> x64;			/* [chunk_rows, d] (GC_F64) */
	int64_t		loaded = -1;			/* the chunk now in x; -1: none */
	DeviceBuffer<int32_t> lab_a, lab_b; /* [n] labels of this pass and of the last */
	DeviceBuffer<float> d2;				/* [n] squared distance as the assignment found it */
};

/* The centroids in every form the kernels read. */
struct Centroids
{
	DeviceBuffer<double> cen, cen_new;	/* [k, d] current and next */
	DeviceBuffer<float> cen_f;			/* [k, d] float: the reference of the update's offsets */
	DeviceBuffer<float> cen_cf;			/* [k, d] centred on the data mean (product form) */
	DeviceBuffer<float> cen_pad;		/* [k, maxd] zero-padded (low-d form; centred for maxd 32) */
	DeviceBuffer<float> cnorm;			/* [k] ||c'||^2 (maxd == 32) */
	DeviceBuffer<float> cval;			/* [k] ||c'||^2 (product form) */
	DeviceBuffer<float> cnrm;			/* [k] ||c'|| (product form, for the check's bound) */
	DeviceBuffer<double> mean_d;		/* [d] data mean */
	DeviceBuffer<double> cen_cd;		/* [k, d] centred, double (DGEMM form) */
	DeviceBuffer<double> cval64;		/* [k] ||c'||^2 (DGEMM form) */
	DeviceBuffer<unsigned long long> cmax64;	/* [1] max ||c'||^2, as the bits of a double (DGEMM form) */
	DeviceBuffer<float> mean_f;			/* [maxd] data mean, zero-padded (maxd == 32) */
};

/* The update's sums of x - c_f per cluster. */
struct Sums
{
	DeviceBuffer<double> sums;			/* [k, d] */
	DeviceBuffer<unsigned long long> fx;	/* [k, d] fixed point (fused update) */
	double		fx_scale = 0.0;			/* fixed-point units per unit of x (fused update) */
};

/*
 * What a pass reports, in one device array so that one copy brings it to
 * the host: cluster sizes [k], squared moves [k] (double), rows changed [1];
 * then the product check's counts over the call [2].
 */
struct Report
{
	int			k = 0;
	DeviceBuffer<unsigned long long> dev;
	std::vector<unsigned long long> host;	/* the last copy of dev */

	unsigned long long *counts() const { return dev.get(); }
	double	   *shifts() const { return reinterpret_cast<double *>(dev.get() + k); }
	unsigned long long *changed() const { return dev.get() + 2 * (size_t) k; }
	unsigned long long *checked() const { return dev.get() + 2 * (size_t) k + 1; }
	size_t		len() const { return 2 * (size_t) k + 3; }
};

/* The product form (d > 32): its choices, its counts and its buffers. */
struct Product
{
	bool		tf32_first = false;		/* the first product in TF32 */
	bool		refine = true;			/* the product checked, candidates compared in double */
	bool		two_level = false;		/* rows the TF32 check leaves open go to a second product */
	bool		dgemm = false;			/* ... a DGEMM (fast FP64), else an FP32 product */
	bool		dgemm_all = false;		/* every row straight to the DGEMM (most were open) */
	int			decide_cap = 0x7fffffff;	/* candidates the TF32 check decides in double, at most */
	float		wfac = 2.5f;			/* the candidate window, 2.5 E (1.25 of 2 E) */
	bool		tile_mode = false;		/* rows by their last label, each tile centred on its own */
	int64_t		escalated = 0;			/* rows of this pass sent to the second product */
	int64_t		escalated_full = 0;		/* ... of them to the DGEMM of all k centroids */
	int64_t		escalated_total = 0;	/* rows sent to the second product over the call */
	Cublas		blas;
	DeviceBuffer<float> xc;				/* [chunk_rows, d] centred rows */
	DeviceBuffer<float> xnorm;			/* [chunk_rows] ||x'||^2 */
	DeviceBuffer<float> dots;			/* [gemm_tile, k] x'.c' of one tile */
	DeviceBuffer<float> xg;				/* [gemm_tile, d] rows gathered for the FP32 product */
	DeviceBuffer<float> xg_norm;		/* [gemm_tile] their ||x'||^2 */
	DeviceBuffer<int32_t> unres;		/* [chunk_rows] rows the TF32 check left open */
	DeviceBuffer<unsigned int> unres_n; /* [1] how many */
	DeviceBuffer<unsigned long long> counts_before; /* [3] the pass's changed and checked counts before a chunk */
	/* tile mode: the rows of a chunk ordered by label, each tile's rows and centroids centred on the tile */
	DeviceBuffer<int32_t> perm, pkin, pkeys, piota;	/* [chunk_rows] rows by label, keys, sorted keys, 0.. */
	DeviceBuffer<int32_t> rank;			/* [k] the centroids' place in a spatial order */
	bool		ranked = false;			/* rank is of this run's centroids */
	DeviceBuffer<unsigned char> psort_tmp;	/* CUB workspace */
	size_t		psort_bytes = 0;
	int64_t		tile_step = 0;			/* rows per tile */
	int			group_tiles = 1;		/* tiles per batched GEMM */
	DeviceBuffer<double> tmean;			/* [group_tiles, d] the tiles' centres */
	DeviceBuffer<float> xtn;			/* [chunk_rows] ||x - centre||^2 of the rows in perm order (in xc) */
	DeviceBuffer<float> cen_t;			/* [group_tiles, k, d] centroids - centre */
	DeviceBuffer<float> cval_t, cnrm_t; /* [group_tiles, k] their squared norms and norms */
	/* tile mode's DGEMM level over each tile's candidates (dgemm) */
	DeviceBuffer<unsigned char> cmark;	/* [group_tiles, k] the tiles' candidates, marked */
	DeviceBuffer<unsigned char> qopen;	/* [group_tiles * tile_step] the group's rows left open */
	DeviceBuffer<int32_t> tcols;		/* [group_tiles, k] each tile's candidates, increasing */
	DeviceBuffer<int32_t> trows;		/* [group_tiles * tile_step] each tile's open rows (chunk rows) */
	DeviceBuffer<int32_t> tcount;		/* [2, group_tiles] candidates and open rows per tile */
	std::vector<int32_t> tcount_h;		/* the host's copy */
	DeviceBuffer<double> cen_g, cval_g; /* [k / 4, d], [k / 4] a tile's candidates, gathered */
	DeviceBuffer<double> xc64;			/* [chunk_rows, d] centred rows (DGEMM form) */
	DeviceBuffer<double> xnorm64;		/* [chunk_rows] ||x'||^2 (DGEMM form) */
	DeviceBuffer<double> dots64;		/* [gemm_tile, k] x'.c' of one tile (DGEMM form) */
};

/* The sorted update's workspace (when the update is not fused). */
struct SortWork
{
	DeviceBuffer<int32_t> keys, iota, perm; /* [chunk_rows] sorted labels, 0.., rows by label */
	DeviceBuffer<int64_t> seg_start, seg_count; /* [k] each cluster's run in the sorted rows */
	DeviceBuffer<int> nslices, slice_off;	/* [k] slices per cluster, their exclusive scan */
	DeviceBuffer<double> partial;		/* [k + chunk_rows / GC_SLICE + 1, d] slice sums */
	DeviceBuffer<unsigned char> sort_tmp, scan_tmp;	/* CUB workspaces */
	size_t		sort_tmp_bytes = 0, scan_tmp_bytes = 0;
};

/* ---------------------------------------------------------------- kmeans_lowd.cu */

/*
 * Nearest centroid (d <= 32) for the `rows` rows of x, with fused also their
 * fixed-point sums and counts.  Writes labels [rows], d2 [rows] and counts
 * the rows whose label differs from labels_old [rows] (or null).
 */
void assign_lowd(const Plan &plan, bool fused, const float *x /* [rows, d] */, int64_t rows,
				 const Centroids &cen, Sums &sums, const Report &rep,
				 int32_t *labels, const int32_t *labels_old, float *d2);

/* ---------------------------------------------------------------- kmeans_direct.cu */

/*
 * Nearest centroid of the `rows` rows of double precision x, every
 * distance in double as the CPU sums it; writes labels and d2 as
 * assign_lowd does.
 */
void assign_direct(const Plan &plan, const double *x /* [rows, d] */, int64_t rows,
				   const double *cen /* [k, d] */, const Report &rep,
				   int32_t *labels, const int32_t *labels_old, float *d2);

/* The DGEMM form (d > 32): the centred rows xc64 and their norms xnorm64 of the chunk's rows. */
void center_rows64(const Plan &plan, const double *x /* [rows, d] */, int64_t rows,
				   const double *mean /* [d] */, Product &pr);

/* The DGEMM form: the centred centroids cen_cd, their norms cval64 and the largest, cmax64. */
void prep_centroids64(const Plan &plan, Centroids &cen);

/*
 * Nearest centroid (double rows, d > 32) by a DGEMM of the centred rows and
 * centroids, checked: the candidates within a bound of the product's error
 * compared by their distance in double, summed as the CPU sums it.
 */
void assign_dgemm(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
				  const double *x /* [rows, d] */, int64_t rows,
				  int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec);

/*
 * The exact level of rows of single precision on devices with fast FP64:
 * rows rowmap[0 .. tr) (or the first tr) of the chunk x by a DGEMM of the
 * rows and centroids centred on the data mean in double, checked with the
 * DGEMM's bound (the labels of the double distances); labels, d2 and the
 * counts as assign_product.
 */
void assign_dgemm_rows(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					   const float *x /* [rows, d] */, const int32_t *rowmap /* [tr] or null */, int64_t tr,
					   int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec);

/*
 * The DGEMM level over a tile's candidates only (tile mode on devices with
 * fast FP64): the tr rows rowmap[q] of the chunk x, which the TF32 check
 * left open, against the u centroids cols[0 .. u) (increasing numbers)
 * that hold every candidate of those rows, so every centroid at a row's
 * nearest distance; checked as assign_dgemm_rows, with the same labels.
 */
void assign_dgemm_cols(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					   const float *x /* [rows, d] */, const int32_t *rowmap /* [tr] */, int64_t tr,
					   const int32_t *cols /* [u] device */, int u,
					   int32_t *labels, const int32_t *labels_old, float *d2);

/* ---------------------------------------------------------------- kmeans_product.cu */

/*
 * The product to run for these parameters on a device of compute
 * capability cc_major, fast_fp64 where its FP64 GEMM runs at about its
 * FP32 GEMM's speed (fast_fp64 in kmeans.cu), for k centroids.
 */
void product_choose(Product &pr, const gc_kmeans_params &p, const gc_tuning &tuning, int cc_major, bool fast_fp64,
					int k);

/*
 * After a pass of an iteration: when many rows needed the FP32 product, the
 * next passes take tiles of rows ordered by label, each centred on its own
 * (tile mode); when most still did, they go straight to the FP32 product.
 */
void product_settle(Product &pr, int64_t n);

/* The centred rows xc and their norms xnorm of the chunk's rows. */
void center_rows(const Plan &plan, const float *x /* [rows, d] */, int64_t rows,
				 const double *mean /* [d] */, Product &pr);

/*
 * Nearest centroid (d > 32) for the `rows` rows of x, as assign_lowd; in
 * tile mode the rows go in the order of hint (their labels of the last
 * pass), which changes only the speed.
 */
void assign_product(const Plan &plan, Product &pr, const Centroids &cen, const Report &rep,
					const float *x /* [rows, d] */, int64_t rows,
					int32_t *labels, const int32_t *labels_old, float *d2, const gc_exec &exec,
					const int32_t *hint /* [rows] */);

/* ---------------------------------------------------------------- kmeans_update.cu */

/* The float forms of cen for the assignment (and for the update's offsets). */
void prep_centroids(const Plan &plan, Centroids &cen);

/* Allocates the sorted update's workspace for chunks of plan.chunk_rows rows. */
void sort_workspace(const Plan &plan, SortWork &sw);

/* Sorted update of one chunk: the sums of x - c_f per cluster, added to sums, and the counts. */
void sorted_update(const Plan &plan, SortWork &sw, const float *x /* [rows, d] */, int64_t rows,
				   const int32_t *labels /* [rows] */, const Centroids &cen, Sums &sums,
				   const Report &rep);
void sorted_update(const Plan &plan, SortWork &sw, const double *x /* [rows, d] */, int64_t rows,
				   const int32_t *labels /* [rows] */, const Centroids &cen, Sums &sums,
				   const Report &rep);

/* Fused update, after the pass: the fixed-point sums to double. */
void unfix_sums(const Plan &plan, Sums &sums);

/*
 * cen_new = c_f + sums / counts (cen where empty), scaled to unit length
 * when the metric is cosine (gc_kmeans_unit_centroid), and each cluster's
 * squared move.
 */
void finalize_centroids(const Plan &plan, const Centroids &cen, const Sums &sums, const Report &rep);

/*
 * Re-seeds the empty clusters with the shared rule (the walk's order sorted
 * on the device, the walk over its first rows on the host; all of it on the
 * host when the device has no room for the sort) and moves the centroids
 * again.  rep.host holds the counts and moves of the pass
 * and is updated.  Asks exec's cancel callback (GC_ERR_CANCELLED).  Returns
 * the number of clusters re-seeded.
 */
int32_t reseed_empty(const Plan &plan, const void *hx /* [n, d] host, plan.dtype */,
					 const int32_t *labels /* [n] device */, const float *d2 /* [n] device */,
					 const Centroids &cen, Sums &sums, Report &rep, const gc_exec &exec);

/*
 * d2 = squared distance of each row of x to its centroid, in double as on
 * the CPU; as_metric: gc_metric_distance(plan.metric, ·) of it.
 */
void exact_distances(const Plan &plan, const float *x /* [rows, d] */, int64_t rows,
					 const int32_t *labels /* [rows] */, const double *cen /* [k, d] */,
					 double *d2 /* [rows] out */, bool as_metric);
void exact_distances(const Plan &plan, const double *x /* [rows, d] */, int64_t rows,
					 const int32_t *labels /* [rows] */, const double *cen /* [k, d] */,
					 double *d2 /* [rows] out */, bool as_metric);

/* ---------------------------------------------------------------- kmeans_init.cu */

/* Statistics of the host rows (chunked data), as the CPU computes them. */
void stats_host(const Plan &plan, const void *hx /* [n, d], plan.dtype */, DataStats &st, const gc_exec &exec);
/* The largest |x| of count values on the device (rows of single precision). */
float max_abs_device(const float *x, size_t count);

/*
 * Statistics of the resident rows x on the device; also leaves the mean in
 * mean_d.  mean_only: the mean, lo and hi only (one pass; mean_var stays 0).
 */
void stats_device(const Plan &plan, const float *x /* [n, d] device */, DataStats &st,
				  double *mean_d /* [d] device */, bool mean_only = false);
void stats_device(const Plan &plan, const double *x /* [n, d] device */, DataStats &st,
				  double *mean_d /* [d] device */, bool mean_only = false);

/*
 * The initial centroids h_cen [k, d] by the shared rules (k-means++ on the
 * device when the data are resident and n is large), and the scale of the
 * fixed-point sums.  hx and x are of element type plan.dtype.
 */
void initial_centroids(const Plan &plan, const gc_kmeans_params &p, const void *hx /* [n, d] host */,
					   const void *x /* [n, d] device, when resident */, const DataStats &st,
					   const gc_exec &exec, std::vector<double> &h_cen, double &fx_scale);

} // namespace km
} // namespace gc

#endif /* GPUCLUST_KMEANS_CUH */
