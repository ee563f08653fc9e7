/*
 * dbscan.cuh
 *    What the parts of the GPU DBSCAN share: the grid and cell table that
 *    kernels take by value, the workspace that the phases fill and empty,
 *    and the phases themselves.
 *
 *    cuda/dbscan.cu          the driver: memory estimate, upload, the phases
 *                            in order, the entry point gcu_dbscan
 *    cuda/dbscan_index.cu    phase index: bounding box, grid choice, points
 *                            sorted by cell, cell table, hash table
 *    cuda/dbscan_search.cu   phases core, union and border: the searches of
 *                            neighbour cells
 *    cuda/dbscan_number.cu   phase number: clusters numbered by their
 *                            lowest member row
 *    cuda/dbscan_pairs.cu    the phases on the pair engine (cuda/pairs.cuh)
 *                            where the grid prunes little
 *    cuda/dbscan_device.cuh  device helpers: cells, distances, the
 *                            disjoint-set forest
 */
#ifndef GPUCLUST_DBSCAN_CUH
#define GPUCLUST_DBSCAN_CUH

#include "common.cuh"
#include "dbscan_grid.h"
#include "entry.cuh"
#include "metric.h"

#include <type_traits>

namespace gc {
namespace dbscan {

constexpr int kMaxGridDims = GC_GRID_MAX_DIMS;
constexpr int kBlock = 256;

inline unsigned grid_for(int64_t items, int block = kBlock)
{
	return (unsigned) ((items + block - 1) / block);
}

/*
 * Calls f with a value of the element type of the rows (float for GC_F32,
 * double for GC_F64): kernels are templated on it, so that the float path
 * loads floats as before and the double path doubles.
 */
template <typename F>
void by_type(gc_dtype t, F &&f)
{
	if (t == GC_F64)
		f(0.0);
	else
		f(0.0f);
}

/* The buffer of element type T of a pair (float, double). */
template <typename T>
DeviceBuffer<T> &pick(DeviceBuffer<float> &f, DeviceBuffer<double> &d)
{
	if constexpr (std::is_same<T, float>::value)
		return f;
	else
		return d;
}

/* Everything a kernel needs to know about the grid; passed by value. */
struct GridParams
{
	gc_grid_plan plan;			/* cell side, extents, dense_ok, neighbour rows */
	int32_t		n;
	int32_t		min_pts;
	long long	stride[kMaxGridDims];	/* key = sum(coord[k] * stride[k]) */
	const volatile int32_t *abort;	/* set by the host on cancel (AbortFlag) */
};

/* The kernels' view of the grid planned by gc_grid_plan_make. */
inline GridParams grid_params(const gc_grid_plan &plan, int32_t n, int32_t min_pts)
{
	GridParams	gp;

	memset(&gp, 0, sizeof(gp));
	gp.plan = plan;
	gp.n = n;
	gp.min_pts = min_pts;
	gp.stride[plan.g - 1] = 1;
	for (int k = plan.g - 2; k >= 0; k--)
		gp.stride[k] = gp.stride[k + 1] * plan.extent[k + 1];
	return gp;
}

/*
 * A flag in mapped host memory that the search kernels read every
 * kAbortEvery candidates: the host sets it when the caller cancels while a
 * launch runs, and the launch ends early instead of finishing work that
 * may take minutes (one crowded cell).  Points with few candidates never
 * read it.
 */
class AbortFlag
{
  public:
	AbortFlag()
	{
		CUDA_TRY(cudaHostAlloc((void **) &host_, sizeof(int32_t), cudaHostAllocMapped));
		*host_ = 0;
		CUDA_TRY(cudaHostGetDevicePointer((void **) &dev_, (void *) host_, 0));
	}
	~AbortFlag() { cudaFreeHost((void *) host_); }
	AbortFlag(const AbortFlag &) = delete;
	AbortFlag &operator=(const AbortFlag &) = delete;

	void raise() const { *host_ = 1; }
	const volatile int32_t *device() const { return dev_; }

  private:
	volatile int32_t *host_ = nullptr;
	const volatile int32_t *dev_ = nullptr;
};

/*
 * Waits for the launches in flight, asking exec's cancel callback about once
 * a millisecond; on yes raises abort, so that the kernels stop at their next
 * read of it, and raises GC_ERR_CANCELLED once they did (the searches of
 * DBSCAN and HDBSCAN).
 */
void wait_or_cancel(const gc_exec &exec, const AbortFlag &abort);

/* The cell table on the device. */
struct Cells
{
	const int32_t *start;		/* [ncells + 1] first sorted position of each cell */
	const unsigned long long *key;	/* [ncells] */
	const int32_t *table;		/* [mask + 1] cell index or -1 */
	unsigned long long mask;
	int32_t		ncells;
};

/*
 * One DBSCAN call on the device.  The phases fill it in order and release
 * what they no longer need, so that the device memory at any moment is the
 * one estimated in cuda/dbscan.cu (bytes_estimate); everything left is
 * freed with it, whatever the way out.
 */
struct Workspace
{
	Workspace(const Call &c, gc_dtype t, int32_t n_, int32_t d_, const gc_dbscan_params &p)
		: call(c), dtype(t), n(n_), d(d_), bound(gc_metric_dist2_le(p.metric, p.eps)),
		  radius(gc_grid_radius(p.metric, p.eps, bound, d_)), min_pts(p.min_pts)
	{
	}

	const Call &call;
	const gc_dtype dtype;		/* of the points */
	const int32_t n;
	const int32_t d;
	const double bound;			/* a neighbour when dist2 <= bound (common/metric.h) */
	const double radius;		/* the grid's Euclidean radius (gc_grid_radius) */
	const int32_t min_pts;
	const void *hx = nullptr;	/* [n, d] the caller's points, on the host, of element type dtype */

	/* index */
	GridParams	gp;
	int32_t		dims[kMaxGridDims] = {0, 0, 0};	/* the grid dimensions (gc_grid_choose_dims) */
	AbortFlag	abort;			/* the cancel of a running launch */
	DeviceBuffer<double> map_val[kMaxGridDims];	/* a mapped plan's tables */
	DeviceBuffer<int64_t> map_cell[kMaxGridDims];
	double		dense_share = -1.0; /* estimated share of points in dense cells, -1: none */
	int32_t		ncells = 0;
	unsigned long long slots = 0;	/* hash table size, a power of two */
	DeviceBuffer<float> x_f32;	/* [n, d] the points by row, until sorted (GC_F32) */
	DeviceBuffer<double> x_f64; /* the same for GC_F64 */
	DeviceBuffer<unsigned long long> keys;	/* [n] cell key by sorted position, until the cell table */
	DeviceBuffer<int32_t> row;	/* [n] sorted position -> row */
	DeviceBuffer<float> xs_f32; /* [n, d] the points in cell order (GC_F32) */
	DeviceBuffer<double> xs_f64;	/* the same for GC_F64 */
	DeviceBuffer<int32_t> cellid;	/* [n] cell of each sorted position */
	DeviceBuffer<int32_t> start;	/* [ncells + 1] */
	DeviceBuffer<unsigned long long> ckey;	/* [ncells] */
	DeviceBuffer<int32_t> table;	/* [slots] cell index or -1 */

	/* core, union, border: by sorted position */
	DeviceBuffer<int32_t> parent;	/* [n] disjoint-set forest */
	DeviceBuffer<uint8_t> core; /* [n] */
	DeviceBuffer<int32_t> best; /* [n] border: position of its core point, -1; then root */

	/* number: the answer by row */
	DeviceBuffer<int32_t> cluster;	/* [n] */
	DeviceBuffer<uint8_t> is_core;	/* [n] */
	int32_t		n_clusters = 0;

	/* The points by row and in cell order, of element type T (that of dtype). */
	template <typename T>
	DeviceBuffer<T> &x() { return pick<T>(x_f32, x_f64); }
	template <typename T>
	DeviceBuffer<T> &xs() { return pick<T>(xs_f32, xs_f64); }

	Cells cells() const
	{
		return Cells{start.get(), ckey.get(), table.get(), slots - 1, ncells};
	}
	bool debug() const { return call.tuning.debug != 0; }
};

/* The phases, in order (cuda/dbscan_index.cu, dbscan_search.cu, dbscan_number.cu). */
void index_phase(Workspace &w);
void core_phase(Workspace &w);
void union_phase(Workspace &w);
void border_phase(Workspace &w);
void number_phase(Workspace &w);

/* DBSCAN on the pair engine instead of the grid (cuda/dbscan_pairs.cu): its device bytes, its phases. */
int64_t pairs_bytes_estimate(int32_t n, int32_t d, size_t esize);
void pairs_phases(Workspace &w);

} // namespace dbscan
} // namespace gc

#endif /* GPUCLUST_DBSCAN_CUH */
