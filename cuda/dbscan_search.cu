/*
 * dbscan_search.cu
 *    Phases core, union and border of the GPU DBSCAN: every search of the
 *    neighbour cells of a point or of a cell, over the index of
 *    cuda/dbscan_index.cu, in chunks between which the cancel callback is
 *    asked.
 *
 *    core     a thread per point counts neighbours and stops at min_pts
 *             (skipped when min_pts <= 2: the union phase finds them);
 *    union    core-core pairs joined in the lock-free disjoint-set forest of
 *             cuda/dbscan_device.cuh, each pair looked at once; dense cells
 *             (DenseBox) joined a warp per cell;
 *    border   a thread per non-core point takes the lowest-row core point
 *             within eps.
 *
 * A pair is within eps when its dist2 is at most gp.plan.bound
 * (gc_metric_dist2_le of common/metric.h, computed on the host).  Kernels
 * are templated on the element type T of the points (float or double).
 *
 * Kernels are templated on the dimension D for d <= 3 (the query point in
 * registers) and take D = 0 for any other d.  With d > 3 the grid is only a
 * filter and every candidate is checked with the full distance; the threads
 * of a warp then read the same candidate (a broadcast) as in the
 * intra-block parallelism of CUDA-DClust (Böhm et al., "Density-based
 * Clustering using Graphics Processors").
 */
#include "dbscan_device.cuh"

#include <algorithm>
#include <climits>

namespace gc {
namespace dbscan {

/* wait_or_cancel of dbscan.cuh. */
void wait_or_cancel(const gc_exec &exec, const AbortFlag &abort)
{
	Stopwatch	sw;
	double		next = 1.0;

	for (;;)
	{
		cudaError_t e = cudaStreamQuery(0);

		if (e == cudaSuccess)
			return;
		if (e != cudaErrorNotReady)
			CUDA_TRY(e);
		if (sw.ms() < next)
			continue;
		next = sw.ms() + 1.0;
		if (exec.cancel && exec.cancel(exec.cancel_arg))
		{
			abort.raise();
			CUDA_TRY(cudaDeviceSynchronize());
			fail(GC_ERR_CANCELLED, "canceled");
		}
	}
}

namespace {

/*
 * First chunk of a chunked phase, in points and in cells: small, so that a
 * cancel is answered quickly even where every point has millions of
 * candidates (all points in a few cells); run_chunked doubles it while
 * launches are fast.
 */
constexpr int32_t kFirstPoints = 1 << 14;
constexpr int32_t kFirstCells = 1 << 12;

/*
 * Runs launch(begin, end) over [0, total) in chunks, waiting after
 * each and asking the cancel callback before each.  The chunk grows while a
 * launch takes under 10 ms and shrinks above 50 ms, so a cancel is answered
 * within a few tens of milliseconds whatever the density of the data.
 */
template <typename Launch>
void run_chunked(const Workspace &w, const char *what, int32_t total, int32_t first_chunk,
				 Launch launch)
{
	int64_t		chunk = std::max<int32_t>(first_chunk, 1);
	int			launches = 0;
	Stopwatch	all;

	for (int64_t begin = 0; begin < total;)
	{
		int64_t		end = std::min<int64_t>(begin + chunk, total);
		Stopwatch	sw;

		w.call.check_cancel();
		launch((int32_t) begin, (int32_t) end);
		wait_or_cancel(w.call.exec, w.abort);
		double		ms = sw.ms();

		if (ms < 10.0 && chunk < (1 << 26))
			chunk *= 2;
		else if (ms > 50.0 && chunk > 64)
			chunk /= 2;
		begin = end;
		launches++;
	}
	if (w.debug())
		fprintf(stderr, "gpuclust dbscan %s: %d items, %d launches, %.3f ms\n", what, total,
				launches, all.ms());
}

/* ------------------------------------------------------------------ core */

/* core[j] for the points [begin, end) outside dense cells. */
template <int D, typename T>
__global__ void core_kernel(GridParams gp, Cells cells, const T *xs, /* [n, d] sorted */
							const int32_t *cellid, /* [n] */ uint8_t *core, /* [n] */
							int32_t begin, int32_t end)
{
	int32_t		j = begin + blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= end)
		return;
	int32_t		c = cellid[j];
	int32_t		size = cells.start[c + 1] - cells.start[c];

	if (cell_dense(gp, size))
		return;

	Query<D, T>	qp;
	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[c];
	int32_t		count = gp.plan.dense_ok ? size : 0;
	int32_t		tick = 0;

	qp.load(xs, j, gp.plan.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.plan.nrows && count < gp.min_pts; t++)
	{
		int32_t		first, last;

		if (!row_cells(gp, cells, coord, key, c, t, first, last))
			continue;
		for (int32_t b = first; b <= last && count < gp.min_pts; b++)
		{
			if (gp.plan.dense_ok && b == c)
				continue;
			int32_t		be = cells.start[b + 1];

			for (int32_t q = cells.start[b]; q < be; q++)
			{
				if (abort_tick(gp, tick))
					return;
				if (dist2<D>(qp.p, point<D>(xs, q, gp.plan.d), gp.plan.d) <= gp.plan.bound &&
					++count >= gp.min_pts)
					break;
			}
		}
	}
	core[j] = count >= gp.min_pts;
}

} // namespace

/* Phase core: the core points; with min_pts <= 2 the union phase finds them. */
void core_phase(Workspace &w)
{
	w.call.check_cancel();
	if (w.min_pts <= 2)
		return;
	const GridParams &gp = w.gp;
	const Cells	cells = w.cells();

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		const T    *xs = w.xs<T>().get();

		by_dim(w.d, [&](auto Dc) {
			constexpr int D = decltype(Dc)::value;

			run_chunked(w, "core points", w.n, kFirstPoints, [&](int32_t b, int32_t e) {
				core_kernel<D, T><<<grid_for(e - b), kBlock>>>(gp, cells, xs, w.cellid.get(),
																w.core.get(), b, e);
				CHECK_LAUNCH("core_kernel");
			});
		});
	});
}

namespace {

/* ------------------------------------------------------------------ union */

/*
 * Core points outside dense cells.  A pair of such points is joined by the
 * later one; a pair with a point of a dense cell by the point outside it.
 * With min_pts <= 2 core is not known yet: any pair within eps is a pair of
 * core points (each has itself and the other), so it is marked here.
 */
template <int D, typename T>
__global__ void union_point_kernel(GridParams gp, Cells cells, const T *xs, /* [n, d] */
								   const int32_t *cellid, /* [n] */ uint8_t *core, /* [n] */
								   int32_t *parent, /* [n] */ int32_t begin, int32_t end)
{
	int32_t		j = begin + blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= end)
		return;
	int32_t		c = cellid[j];

	if (cell_dense(gp, cells.start[c + 1] - cells.start[c]))
		return;
	const bool	known = gp.min_pts > 2;

	if (known && !core[j])
		return;

	Query<D, T>	qp;
	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[c];
	int32_t		tick = 0;

	qp.load(xs, j, gp.plan.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.plan.nrows; t++)
	{
		int32_t		first, last;

		if (!row_cells(gp, cells, coord, key, c, t, first, last))
			continue;
		for (int32_t b = first; b <= last; b++)
		{
			int32_t		bs = cells.start[b];
			int32_t		be = cells.start[b + 1];

			if (cell_dense(gp, be - bs))
			{
				if (uf_find(parent, j) == uf_find(parent, bs))
					continue;
				for (int32_t q = bs; q < be; q++)
				{
					if (abort_tick(gp, tick))
						return;
					if (dist2<D>(qp.p, point<D>(xs, q, gp.plan.d), gp.plan.d) <= gp.plan.bound)
					{
						if (!known)
							core[j] = 1;
						uf_union(parent, j, q);
						break;
					}
				}
			}
			else
			{
				if (be > j)
					be = j;
				for (int32_t q = bs; q < be; q++)
				{
					if (abort_tick(gp, tick))
						return;
					if (known && !core[q])
						continue;
					if (dist2<D>(qp.p, point<D>(xs, q, gp.plan.d), gp.plan.d) <= gp.plan.bound)
					{
						if (!known)
						{
							core[j] = 1;
							core[q] = 1;
						}
						if (uf_find(parent, j) != uf_find(parent, q))
							uf_union(parent, j, q);
					}
				}
			}
		}
	}
}

/* The smaller and the larger of two finite coordinates. */
template <typename T>
__device__ __forceinline__ T vmin(T a, T b)
{
	return b < a ? b : a;
}

template <typename T>
__device__ __forceinline__ T vmax(T a, T b)
{
	return b > a ? b : a;
}

/* The bounding box of points [s, e), computed by a whole warp; every lane gets it. */
template <int D, typename T>
__device__ __forceinline__ void warp_box(const T *xs, /* [n, D] */
										 int32_t s, int32_t e, int lane,
										 T *lo, /* [D] out */
										 T *hi) /* [D] out */
{
#pragma unroll
	for (int k = 0; k < D; k++)
	{
		lo[k] = (T) INFINITY;
		hi[k] = (T) -INFINITY;
	}
	for (int32_t p = s + lane; p < e; p += 32)
#pragma unroll
		for (int k = 0; k < D; k++)
		{
			T			v = xs[(size_t) p * D + k];

			lo[k] = vmin(lo[k], v);
			hi[k] = vmax(hi[k], v);
		}
#pragma unroll
	for (int k = 0; k < D; k++)
		for (int o = 16; o > 0; o >>= 1)
		{
			lo[k] = vmin(lo[k], __shfl_xor_sync(0xffffffffu, lo[k], o));
			hi[k] = vmax(hi[k], __shfl_xor_sync(0xffffffffu, hi[k], o));
		}
}

/*
 * A lower bound (gap2) and an upper bound (span2) of the computed distance
 * of every pair of points of boxes a and b: the operations of dist2 on box
 * corners, and rounding is monotone.
 */
template <int D, typename T>
__device__ __forceinline__ void box_bounds(const T *alo, const T *ahi, /* [D] */
										   const T *blo, const T *bhi, /* [D] */
										   double &gap2, double &span2)
{
	gap2 = 0.0;
	span2 = 0.0;
#pragma unroll
	for (int k = 0; k < D; k++)
	{
		double		g = 0.0;

		if ((double) blo[k] > (double) ahi[k])
			g = __dsub_rn((double) blo[k], (double) ahi[k]);
		else if ((double) alo[k] > (double) bhi[k])
			g = __dsub_rn((double) alo[k], (double) bhi[k]);
		gap2 = __dadd_rn(gap2, __dmul_rn(g, g));

		double		s1 = __dsub_rn((double) bhi[k], (double) alo[k]);
		double		s2 = __dsub_rn((double) ahi[k], (double) blo[k]);
		double		s = s1 > s2 ? s1 : s2;

		span2 = __dadd_rn(span2, __dmul_rn(s, s));
	}
}

/* Whether some point of [as, ae) lies within eps of some point of [bs, be): a whole warp, 32 pairs at a time. */
template <int D, typename T>
__device__ __forceinline__ bool warp_any_within(const T *xs, /* [n, D] */ double bound,
												int32_t as, int32_t ae, int32_t bs, int32_t be,
												int lane)
{
	int32_t		na = ae - as, nbsz = be - bs;
	int64_t		pairs = (int64_t) na * nbsz;

	for (int64_t base2 = 0; base2 < pairs; base2 += 32)
	{
		int64_t		u = base2 + lane;
		bool		hit = false;

		if (u < pairs)
		{
			int32_t		p = as + (int32_t) (u / nbsz);
			int32_t		q = bs + (int32_t) (u % nbsz);

			hit = dist2<D>(xs + (size_t) p * D, xs + (size_t) q * D, D) <= bound;
		}
		if (__any_sync(0xffffffffu, hit))
			return true;
	}
	return false;
}

/*
 * Joins dense cell a = [as, ae) (box alo, ahi) with cell nb when that is
 * dense, within eps and not yet in the same set; the whole warp calls it.
 */
template <int D, typename T>
__device__ __forceinline__ void join_dense(const GridParams &gp, const Cells &cells,
										   const T *xs, /* [n, D] */ int32_t *parent, /* [n] */
										   int32_t as, int32_t ae,
										   const T *alo, const T *ahi, /* [D] */
										   int32_t nb, int lane)
{
	int32_t		bs = cells.start[nb];
	int32_t		be = cells.start[nb + 1];

	if (!cell_dense(gp, be - bs))
		return;

	/*
	 * Other warps change the forest meanwhile, so the lanes could see
	 * different roots: lane 0 decides for the warp.
	 */
	int			joined = 0;

	if (lane == 0)
		joined = uf_find(parent, as) == uf_find(parent, bs);
	if (__shfl_sync(0xffffffffu, joined, 0))
		return;

	T			blo[D], bhi[D];
	double		gap2, span2;

	warp_box<D>(xs, bs, be, lane, blo, bhi);
	box_bounds<D>(alo, ahi, blo, bhi, gap2, span2);
	if (gap2 > gp.plan.bound)
		return;
	if (span2 <= gp.plan.bound || warp_any_within<D>(xs, gp.plan.bound, as, ae, bs, be, lane))
	{
		if (lane == 0)
			uf_union(parent, as, bs);
	}
}

/*
 * Pairs of dense cells (d <= 3 only), a warp per cell a, joined with each
 * dense neighbour cell b < a: nothing to do when already one set; a
 * comparison of the two bounding boxes settles most pairs; otherwise the
 * warp compares pairs 32 at a time and stops at the first within eps.
 * The box tests never change the answer (see box_bounds).
 */
template <int D, typename T>
__global__ void union_cell_kernel(GridParams gp, Cells cells, const T *xs, /* [n, D] */
								  int32_t *parent, /* [n] */ int32_t begin, int32_t end)
{
	const int	lane = threadIdx.x & 31;
	int32_t		a = begin + (int32_t) ((blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5);

	if (a >= end)
		return;
	int32_t		as = cells.start[a];
	int32_t		ae = cells.start[a + 1];

	if (!cell_dense(gp, ae - as))
		return;

	T			alo[D], ahi[D];

	warp_box<D>(xs, as, ae, lane, alo, ahi);

	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[a];

	decode_key(gp, key, coord);
	/* A lane per neighbour row; the warp then takes each dense cell b < a. */
	int32_t		first = 0, last = -1;

	if (lane < gp.plan.nrows && !row_cells(gp, cells, coord, key, a, lane, first, last))
		last = -1;
	if (last >= a)
		last = a - 1;
	unsigned	rows = __ballot_sync(0xffffffffu, first <= last);

	while (rows)
	{
		int			src = __ffs(rows) - 1;

		rows &= rows - 1;
		int32_t		f = __shfl_sync(0xffffffffu, first, src);
		int32_t		l = __shfl_sync(0xffffffffu, last, src);

		for (int32_t nb = f; nb <= l; nb++)
			join_dense<D>(gp, cells, xs, parent, as, ae, alo, ahi, nb, lane);
	}
}

} // namespace

/* Phase union: dense cells with dense cells, then every other core-core pair. */
void union_phase(Workspace &w)
{
	w.call.check_cancel();
	const GridParams &gp = w.gp;
	const Cells	cells = w.cells();

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		const T    *xs = w.xs<T>().get();

		by_dim(w.d, [&](auto Dc) {
			constexpr int D = decltype(Dc)::value;

			/* dense_ok implies d <= 3: D > 0 */
			if constexpr (D > 0)
				if (gp.plan.dense_ok)
					run_chunked(w, "dense cell unions", w.ncells, kFirstCells, [&](int32_t b, int32_t e) {
						union_cell_kernel<D, T><<<grid_for((int64_t) (e - b) * 32), kBlock>>>(
							gp, cells, xs, w.parent.get(), b, e);
						CHECK_LAUNCH("union_cell_kernel");
					});
			run_chunked(w, "point unions", w.n, kFirstPoints, [&](int32_t b, int32_t e) {
				union_point_kernel<D, T><<<grid_for(e - b), kBlock>>>(gp, cells, xs, w.cellid.get(),
																	   w.core.get(), w.parent.get(), b, e);
				CHECK_LAUNCH("union_point_kernel");
			});
		});
	});
}

namespace {

/* ------------------------------------------------------------------ border */

/*
 * best[j]: sorted position of the lowest-row core point within eps of
 * non-core j, or -1.  Cells list their rows in increasing order, so the
 * first hit in a cell is that cell's best.
 */
template <int D, typename T>
__global__ void border_kernel(GridParams gp, Cells cells, const T *xs, /* [n, d] */
							  const int32_t *cellid, /* [n] */ const uint8_t *core, /* [n] */
							  const int32_t *row, /* [n] */
							  int32_t *best, /* [n] */ int32_t begin, int32_t end)
{
	int32_t		j = begin + blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= end)
		return;
	if (core[j])
	{
		best[j] = -1;
		return;
	}

	Query<D, T>	qp;
	long long	coord[kMaxGridDims];
	int32_t		c = cellid[j];
	unsigned long long key = cells.key[c];
	int32_t		best_pos = -1;
	int32_t		best_row = INT_MAX;
	int32_t		tick = 0;

	qp.load(xs, j, gp.plan.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.plan.nrows; t++)
	{
		int32_t		first, last;

		if (!row_cells(gp, cells, coord, key, c, t, first, last))
			continue;
		for (int32_t b = first; b <= last; b++)
		{
			int32_t		be = cells.start[b + 1];

			for (int32_t q = cells.start[b]; q < be; q++)
			{
				int32_t		r = row[q];

				if (abort_tick(gp, tick))
					return;
				if (r >= best_row)
					break;		/* rows increase within a cell */
				if (core[q] && dist2<D>(qp.p, point<D>(xs, q, gp.plan.d), gp.plan.d) <= gp.plan.bound)
				{
					best_row = r;
					best_pos = q;
					break;
				}
			}
		}
	}
	best[j] = best_pos;
}

} // namespace

/* Phase border: w.best, the core point of each border point (there are none with min_pts <= 2). */
void border_phase(Workspace &w)
{
	w.call.check_cancel();
	if (w.min_pts <= 2)
	{
		CUDA_TRY(cudaMemset(w.best.get(), 0xff, sizeof(int32_t) * (size_t) w.n));
		return;
	}
	const GridParams &gp = w.gp;
	const Cells	cells = w.cells();

	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		const T    *xs = w.xs<T>().get();

		by_dim(w.d, [&](auto Dc) {
			constexpr int D = decltype(Dc)::value;

			run_chunked(w, "border points", w.n, kFirstPoints, [&](int32_t b, int32_t e) {
				border_kernel<D, T><<<grid_for(e - b), kBlock>>>(gp, cells, xs, w.cellid.get(),
																  w.core.get(), w.row.get(), w.best.get(),
																  b, e);
				CHECK_LAUNCH("border_kernel");
			});
		});
	});
}

} // namespace dbscan
} // namespace gc
