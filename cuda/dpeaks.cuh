/*
 * dpeaks.cuh
 *    What the parts of the GPU density peaks share: launch sizes, CUB's
 *    temporary storage, the grid index on the device, the workspace that
 *    the phases fill and empty, and the phases themselves.
 *
 *    cuda/dpeaks.cu          the driver: memory estimate, upload, the phases
 *                            in order, the entry point gcu_density_peaks
 *    cuda/dpeaks_index.cu    the layouts of the points (structure of
 *                            arrays, gathers, orders by key) and the grid
 *                            index
 *    cuda/dpeaks_dc.cu       phase dc: exact selection or sample quantile
 *    cuda/dpeaks_rho.cu      phase rho: the densities
 *    cuda/dpeaks_delta.cu    phase delta: density order, nearest denser point
 *    cuda/dpeaks_assign.cu   phase assign: centres and labels
 *    cuda/dpeaks_pairs.cu    rho and delta on the pair engine (d >= 16)
 *    cuda/dpeaks_tiles.cuh   device helpers of the all-pairs kernels
 */
#ifndef GPUCLUST_DPEAKS_CUH
#define GPUCLUST_DPEAKS_CUH

#include "common.cuh"
#include "dpeaks_common.h"
#include "entry.cuh"
#include "pairs.h"

#include <algorithm>

namespace gc {
namespace dpeaks {

constexpr int kBlock = 256;			/* threads per block */
constexpr int kTile = 128;			/* points per shared-memory tile (128 terms of 2^56 fit in 64 bits) */
constexpr int64_t kPointsPerLaunch = INT64_C(1) << 20;	/* grid queries per launch */
constexpr int64_t kPairsPerLaunch = INT64_C(1) << 33;	/* pairs of up to 4 features per launch, about 10 ms */

/*
 * Pairs a launch may evaluate at this dimension: kPairsPerLaunch for up to
 * four features, fewer for more, so that a launch stays near 10 ms and a
 * cancel is answered between launches.
 */
inline int64_t pairs_per_launch(int d)
{
	return std::max<int64_t>(1, kPairsPerLaunch / ((d + 3) / 4));
}

/* Blocks for work items, at least one and at most 2^30 (grid-stride kernels do the rest). */
inline unsigned grid_for(int64_t work, int block = kBlock)
{
	int64_t		b = (work + block - 1) / block;

	return (unsigned) std::max<int64_t>(1, std::min<int64_t>(b, 1 << 30));
}

/* Two-phase CUB temporary storage, owned; it only grows. */
struct Temp
{
	DeviceBuffer<char> buf;
	void *get(size_t bytes)
	{
		if (bytes > buf.size())
			buf.reset(std::max<size_t>(bytes, 1), "CUB temporary storage");
		return buf.get();
	}
};

/* The grid index on the device (d <= 3): cells, points sorted by cell. */
struct DevGrid
{
	gc_dp_grid	g;				/* what the kernels take, pointing into the buffers below */
	int64_t		ncells = 0;
	DeviceBuffer<int64_t> cell_start;	/* [ncells + 1] */
	DeviceBuffer<double> xg;	/* [d][n] in cell order */
	DeviceBuffer<int64_t> order;	/* [n] sorted position -> row */
	DeviceBuffer<int64_t> rank; /* [n] sorted position -> density rank */

	void release()
	{
		cell_start.release();
		xg.release();
		order.release();
		rank.release();
	}
};

/*
 * One density peaks call on the device.  The phases fill it in order and
 * release what they no longer need, so that the device memory at any
 * moment stays within the estimate of cuda/dpeaks.cu; everything left is
 * freed with it, whatever the way out.
 */
struct Workspace
{
	Workspace(const Call &c, int64_t n_, int32_t d_, const gc_dpeaks_params &p, int sms_)
		: call(c), params(p), n(n_), d(d_), sms(sms_),
		  use_pairs(gc_pair_engine_chosen(&c.tuning, d_) && n_ < INT32_MAX),
		  use_grid(d_ <= GC_DP_GRID_MAX_DIM && !use_pairs), gauss(p.kernel == GC_DP_KERNEL_GAUSSIAN),
		  metric(p.metric)
	{
		c.timing->path = use_pairs ? GC_PATH_PAIRS : GC_PATH_INDEX;
	}

	const Call &call;
	const gc_dpeaks_params &params;
	const int64_t n;
	const int	d;
	const int	sms;			/* multiprocessors of the device */
	const bool	use_pairs;		/* rho and delta on the pair engine (cuda/dpeaks_pairs.cu) */
	const bool	use_grid;		/* d <= 3: the grid index */
	const bool	gauss;			/* the gaussian kernel, else the cutoff */
	const gc_metric metric;		/* dc, delta in its units; every comparison on dist2 */
	const void *hx = nullptr;	/* [n, d] the caller's points, on the host, of type dtype */
	gc_dtype	dtype = GC_F32;

	Temp		temp;
	DeviceBuffer<double> xs;	/* [d][n] the points by row, until the density order */
	/* the pair engine: the rows as uploaded, [n, d] of dtype, until the density order */
	DeviceBuffer<float> xrow_f;
	DeviceBuffer<double> xrow_d;
	int64_t		pair_exact = 0; /* pairs of rho sent to the canonical path */

	template <typename T>
	const T    *rows() const;

	/* dc */
	double		dc = 0.0;
	gc_dc_method dc_method = GC_DC_GIVEN;
	int64_t		dc_sample = 0;

	/* rho */
	double		T = 0.0;		/* cutoff kernel: dist2 < T counts (gc_dp_cutoff_threshold) */
	DevGrid		grid;			/* until the assignment */
	DeviceBuffer<double> rho;	/* [n] by row */

	/* delta: by density rank */
	DeviceBuffer<int64_t> by_rank;	/* [n] rank -> row */
	DeviceBuffer<double> rho_r; /* [n] */
	DeviceBuffer<double> xr;	/* [d][n] the points, until the assignment */
	DeviceBuffer<double> bd2_r; /* [n] squared distance to the nearest denser point */
	DeviceBuffer<int64_t> nbr_r;	/* [n] rank of the nearest denser point, -1 for rank 0 */

	/* assign: the answer by row */
	DeviceBuffer<int32_t> cluster;	/* [n] */
	DeviceBuffer<uint8_t> is_center;	/* [n] */
	DeviceBuffer<double> delta; /* [n] */
	int64_t		n_centers = 0;
};

template <>
inline const float *Workspace::rows<float>() const
{
	return xrow_f.get();
}

template <>
inline const double *Workspace::rows<double>() const
{
	return xrow_d.get();
}

/* Slices of j so that about four resident waves of threads run. */
/* gc::check_cancel_synced: launches here are cut to about 10 ms. */
inline void cancel_point(const Workspace &w)
{
	check_cancel_synced(w.call.exec);
}

inline int slices_for(const Workspace &w)
{
	int64_t		want = (int64_t) w.sms * 2048 * 4;
	int64_t		s = (want + w.n - 1) / w.n;

	return (int) std::max<int64_t>(1, std::min<int64_t>(64, s));
}

/* The layouts of the points (cuda/dpeaks_index.cu). */
template <typename T>
void to_soa(const T *x, /* [n, d] float or double */ int64_t n, int d, double *xs /* [d][n] */);
void gather_soa(const double *src, /* [d][n] */ const int64_t *perm, /* [n] */ int64_t n, int d,
				double *dst /* [d][n]: dst[k][r] = src[k][perm[r]] */);
void sort_rows(Workspace &w, const uint64_t *keys, /* [n] */ int64_t n, int end_bit, bool descending,
			   int64_t *order /* [n] out: rows by key, stable */);
void build_grid(Workspace &w, const double *xs /* [d][n] */);

/* The pair engine (cuda/dpeaks_pairs.cu): its device bytes beside the scans', rho, delta. */
int64_t		pairs_bytes_estimate(const Workspace &w, int64_t esize);
void		rho_pairs_engine(Workspace &w);
/*
 * The exact dc selection on the engine: the k-th smallest dist2 over
 * ordered pairs (its bit pattern into *key); false where the window taken
 * from the seeded sample missed it, and the radix select must decide.
 */
bool		dc_exact_pairs(Workspace &w, int64_t k, uint64_t seed, uint64_t *key);
void		dc_sample_sorted(Workspace &w, const double *xs, /* [d][n] */ uint64_t seed,
							 DeviceBuffer<uint64_t> &sorted /* [GC_DP_DC_SAMPLE_PAIRS] out */);
void		delta_pairs_engine(Workspace &w);

/* The phases, in order. */
void dc_phase(Workspace &w);
void rho_phase(Workspace &w);
void delta_phase(Workspace &w);
void assign_phase(Workspace &w);

} // namespace dpeaks
} // namespace gc

#endif /* GPUCLUST_DPEAKS_CUH */
