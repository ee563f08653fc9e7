/*
 * dbscan.cu
 *    DBSCAN on the GPU, with exactly the answer of the CPU core
 *    (src/core/dbscan.c, gc_dbscan_cpu): same neighbours, same core points,
 *    same border rule, same cluster numbers.
 *
 * The algorithm is the two-phase union-find DBSCAN of FDBSCAN and
 * FDBSCAN-DenseBox (Prokopenko, Lebrun-Grandie, Arndt, seed 003), with a
 * uniform grid as the search index instead of a bounding volume hierarchy,
 * and with everything from the first sort to the cluster numbers on the
 * device (no transfer in between):
 *
 *   index    the cell of each point on the first min(d, 3) dimensions (the
 *            grid chosen from a sample, see run_dbscan), a
 *            stable CUB radix sort of the points by cell, cells as runs of
 *            the sorted order (a CUB scan), an open-addressing hash table
 *            from cell key to cell;
 *   core     a thread per point counts neighbours and stops at min_pts
 *            (skipped when min_pts <= 2: the union phase finds them);
 *   union    core-core pairs joined in a lock-free disjoint-set forest
 *            (compare-and-swap hooking of the larger root under the smaller,
 *            as in ECL-CC); each pair is looked at once;
 *   border   a thread per non-core point takes the lowest-row core point
 *            within eps (cells list their rows in increasing order, so the
 *            first hit in a cell is that cell's best);
 *   numbers  per root the lowest row among its members (atomicMin), a flag
 *            at that row, an inclusive CUB scan over rows: the cluster
 *            number of every point, numbered by first appearance.
 *
 * With d <= 3 the cells have side eps/sqrt(d) (less a 1e-5 margin), so every
 * two points of one cell are within eps: a cell holding at least min_pts
 * points is all core and one set without a single distance computation
 * (DenseBox).  Two dense cells are joined by a warp that first compares the
 * bounding boxes of their points and otherwise stops at the first pair within
 * eps.  Where a sample says that few points lie in dense cells (sparse data,
 * small min_pts) the 5^d neighbour cells of that grid cost more than they
 * save, and a grid of side eps (3^d neighbours, no dense cells) is used.
 * With d > 3 the grid on three dimensions is only a filter of side eps and
 * every candidate is checked with the full distance: for data that the first
 * dimensions do not separate this degrades to a blocked all-pairs scan, in
 * which the threads of a warp read the same candidate (a broadcast) as in the
 * intra-block parallelism of CUDA-DClust (Bohm et al., seed 000).  Cell side,
 * extents, reach and the pruned neighbour offsets follow the rules of the CPU
 * core (grid_build in src/core/dbscan.c).  Neighbour cells are visited as
 * rows along the last grid dimension: one hash probe finds a cell of an
 * occupied row, and the rest of the row are its neighbours in the sorted
 * cell table.
 *
 * Distances: squared Euclidean in double, dimension by dimension in order,
 * each float widened before the subtraction, with explicitly rounded
 * operations (no fused multiply-add), compared with eps * eps computed in
 * double on the host.  That is gc_dist2 of core.h, bit for bit.
 *
 * Memory is linear in n: about max(8*n*d + 16*n, 4*n*d + 45*n) bytes at the
 * peak (57 bytes a point in three dimensions) plus CUB's temporary storage;
 * it is estimated before anything is allocated and compared with
 * cudaMemGetInfo.  Per-point kernels run in chunks sized to take a few tens
 * of milliseconds, and the cancel callback is asked between chunks.
 *
 * timing->phase_ms: [0] index, [1] core points, [2] unions, [3] border points
 * and cluster numbers.
 */
#include "common.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdlib>

namespace {

constexpr int kMaxGridDims = 3;
constexpr int kMaxRows = 25;	/* (2 * reach + 1)^2 with reach <= 2 */
constexpr double kMaxExtent = 2147483648.0; /* cells along one dimension */
constexpr int kBlock = 256;
constexpr int kBboxBlocks = 512;
constexpr double kDenseShare = 0.5;	/* see run_dbscan */
/*
 * First chunk of a chunked phase, in points and in cells: small, so that a
 * cancel is answered quickly even where every point has millions of
 * candidates (all points in a few cells); run_chunked doubles it while
 * launches are fast.
 */
constexpr int32_t kFirstPoints = 1 << 14;
constexpr int32_t kFirstCells = 1 << 12;

/* Everything a kernel needs to know about the grid; passed by value. */
struct GridParams
{
	int32_t		n;
	int32_t		d;
	int32_t		g;				/* grid dimensions: min(d, 3) */
	int32_t		dense_ok;		/* cells small enough that all members are neighbours */
	int32_t		min_pts;
	int32_t		noffsets;		/* neighbour cells (for the record) */
	int32_t		nrows;
	double		eps2;
	double		side;
	double		lo[kMaxGridDims];
	long long	extent[kMaxGridDims];
	long long	stride[kMaxGridDims];	/* key = sum(coord[k] * stride[k]) */
	/*
	 * The neighbour cells as rows along the last grid dimension (stride 1 in
	 * the key, so the existing cells of a row are consecutive in the cell
	 * table): row t is offset row_off[t] in the other dimensions and
	 * -row_reach[t] .. row_reach[t] in the last.
	 */
	int8_t		row_off[kMaxRows * (kMaxGridDims - 1)];
	int8_t		row_reach[kMaxRows];
};

/* The cell table on the device. */
struct Cells
{
	const int32_t *start;		/* [ncells + 1] first sorted position of each cell */
	const unsigned long long *key;	/* [ncells] */
	const int32_t *table;		/* [mask + 1] cell index or -1 */
	unsigned long long mask;
	int32_t		ncells;
};

__host__ __device__ inline unsigned long long hash_key(unsigned long long key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return key;
}

/* gc_dist2 of core.h: double, in order, no contraction. */
template <int D>
__device__ __forceinline__ double dist2(const float *a, const float *b, int d)
{
	double		s = 0.0;
	const int	dd = D > 0 ? D : d;

#pragma unroll
	for (int k = 0; k < dd; k++)
	{
		double		t = __dsub_rn((double) a[k], (double) b[k]);

		s = __dadd_rn(s, __dmul_rn(t, t));
	}
	return s;
}

/* The query point: in registers for small fixed d, in global memory otherwise. */
template <int D>
struct Query
{
	float		v[D > 0 ? D : 1];
	const float *p;

	__device__ void load(const float *xs, int32_t j, int d)
	{
		if (D > 0)
		{
#pragma unroll
			for (int k = 0; k < (D > 0 ? D : 1); k++)
				v[k] = xs[(size_t) j * D + k];
			p = v;
		}
		else
			p = xs + (size_t) j * d;
	}
};

template <int D>
__device__ __forceinline__ const float *point(const float *xs, int32_t q, int d)
{
	return xs + (size_t) q * (D > 0 ? D : d);
}

/* Cell index for a key, or -1 (linear probing). */
__device__ __forceinline__ int32_t cell_lookup(const Cells &cells, unsigned long long key)
{
	unsigned long long h = hash_key(key) & cells.mask;

	for (;;)
	{
		int32_t		c = __ldg(cells.table + h);

		if (c < 0)
			return -1;
		if (__ldg(cells.key + c) == key)
			return c;
		h = (h + 1) & cells.mask;
	}
}

__device__ __forceinline__ void decode_key(const GridParams &gp, unsigned long long key,
										   long long *coord)
{
	for (int k = gp.g - 1; k >= 0; k--)
	{
		coord[k] = (long long) (key % (unsigned long long) gp.extent[k]);
		key /= (unsigned long long) gp.extent[k];
	}
}

/*
 * The existing cells of neighbour row t of cell c (coordinates coord, key
 * key): cells first .. last of the cell table, or false when there are none.
 * One hash probe finds one cell of the row (the middle one first); its
 * neighbours in the table are the rest.
 */
__device__ __forceinline__ bool row_cells(const GridParams &gp, const Cells &cells,
										  const long long *coord, unsigned long long key,
										  int32_t c, int t, int32_t &first, int32_t &last)
{
	const int	L = gp.g - 1;
	long long	base = (long long) key;

	for (int k = 0; k < L; k++)
	{
		int			o = gp.row_off[t * (kMaxGridDims - 1) + k];
		long long	nc = coord[k] + o;

		if (nc < 0 || nc >= gp.extent[k])
			return false;
		base += (long long) o * gp.stride[k];
	}

	const int	r = gp.row_reach[t];
	const long long lo = coord[L] < r ? -coord[L] : -r;
	const long long hi = coord[L] + r >= gp.extent[L] ? gp.extent[L] - 1 - coord[L] : r;
	int32_t		found = -1;

	if (base == (long long) key)
		found = c;
	else
		for (int step = 0; step <= 2 * r && found < 0; step++)
		{
			int			o = (step & 1) ? -((step + 1) >> 1) : (step >> 1);

			if (o >= lo && o <= hi)
				found = cell_lookup(cells, (unsigned long long) (base + o));
		}
	if (found < 0)
		return false;

	const unsigned long long klo = (unsigned long long) (base + lo);
	const unsigned long long khi = (unsigned long long) (base + hi);

	first = found;
	while (first > 0 && __ldg(cells.key + first - 1) >= klo)
		first--;
	last = found;
	while (last + 1 < cells.ncells && __ldg(cells.key + last + 1) <= khi)
		last++;
	return true;
}

/* Disjoint-set forest over sorted positions; parent[x] <= x always. */
__device__ __forceinline__ int32_t uf_find(int32_t *parent_, int32_t x)
{
	volatile int32_t *parent = parent_;
	int32_t		curr = parent[x];

	if (curr != x)
	{
		int32_t		next, prev = x;

		while (curr > (next = parent[curr]))
		{
			parent[prev] = next;
			prev = curr;
			curr = next;
		}
	}
	return curr;
}

/* Joins the sets of a and b: the larger root is hooked under the smaller with a CAS. */
__device__ __forceinline__ void uf_union(int32_t *parent, int32_t a, int32_t b)
{
	int32_t		ra = uf_find(parent, a);
	int32_t		rb = uf_find(parent, b);

	while (ra != rb)
	{
		int32_t		old;

		if (ra < rb)
		{
			int32_t		t = ra;

			ra = rb;
			rb = t;
		}
		old = atomicCAS(parent + ra, ra, rb);
		if (old == ra)
			break;
		ra = old;
	}
}

__device__ __forceinline__ bool cell_dense(const GridParams &gp, int32_t size)
{
	return gp.dense_ok && size >= gp.min_pts;
}

/* ------------------------------------------------------------------ index */

/* Per-block min/max over the grid dimensions, and a count of non-finite values. */
__global__ void bbox_kernel(const float *x, /* [n, d] */ int64_t n, int d, int g,
							float *part_lo, /* [blocks, g] */ float *part_hi, /* [blocks, g] */
							unsigned long long *nonfinite /* [1] */)
{
	float		lo[kMaxGridDims], hi[kMaxGridDims];
	unsigned long long bad = 0;

	for (int k = 0; k < kMaxGridDims; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		const float *p = x + (size_t) i * d;

		for (int k = 0; k < d; k++)
		{
			float		v = p[k];

			if (!isfinite(v))
				bad++;
			else if (k < g)
			{
				lo[k] = fminf(lo[k], v);
				hi[k] = fmaxf(hi[k], v);
			}
		}
	}

	typedef cub::BlockReduce<float, kBlock> Reduce;
	__shared__ typename Reduce::TempStorage tmp;

	for (int k = 0; k < g; k++)
	{
		float		a = Reduce(tmp).Reduce(lo[k], cuda::minimum<float>());

		__syncthreads();
		float		b = Reduce(tmp).Reduce(hi[k], cuda::maximum<float>());

		__syncthreads();
		if (threadIdx.x == 0)
		{
			part_lo[blockIdx.x * g + k] = a;
			part_hi[blockIdx.x * g + k] = b;
		}
	}
	if (bad)
		atomicAdd(nonfinite, bad);
}

/* The cell coordinate along grid dimension k, exactly as the CPU core computes it. */
__device__ __forceinline__ long long cell_coord(const GridParams &gp, int k, float v)
{
	double		c = floor(__ddiv_rn(__dsub_rn((double) v, gp.lo[k]), gp.side));

	if (c < 0)
		c = 0;
	if (c >= (double) gp.extent[k])
		c = (double) (gp.extent[k] - 1);
	return (long long) c;
}

__device__ __forceinline__ unsigned long long point_key(const GridParams &gp, const float *x,
														int64_t i)
{
	unsigned long long k = 0;

	for (int j = 0; j < gp.g; j++)
		k = k * (unsigned long long) gp.extent[j] +
			(unsigned long long) cell_coord(gp, j, x[(size_t) i * gp.d + j]);
	return k;
}

__global__ void key_kernel(GridParams gp, const float *x, /* [n, d] */
						   unsigned long long *key, /* [n] */ int32_t *row /* [n] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= gp.n)
		return;
	key[i] = point_key(gp, x, i);
	row[i] = i;
}

/*
 * Estimating the share of points in dense cells before sorting: the cells of
 * an evenly spaced sample of points go into a small hash table, every point
 * adds one to its cell's count when the cell is there (counts stop at
 * min_pts), and the share of sample points whose cell reached min_pts is the
 * estimate.
 */
constexpr int kSample = 1 << 16;
constexpr unsigned long long kSampleSlots = 1ULL << 17;
constexpr unsigned long long kEmptyKey = ~0ULL;

__device__ __forceinline__ unsigned long long sample_slot(const unsigned long long *skey,
														  unsigned long long key)
{
	unsigned long long h = hash_key(key) & (kSampleSlots - 1);

	while (skey[h] != key && skey[h] != kEmptyKey)
		h = (h + 1) & (kSampleSlots - 1);
	return h;
}

__global__ void sample_insert_kernel(GridParams gp, const float *x, int64_t stride, int32_t s,
									 unsigned long long *skey /* [kSampleSlots] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= s)
		return;
	unsigned long long key = point_key(gp, x, (int64_t) i * stride);
	unsigned long long h = hash_key(key) & (kSampleSlots - 1);

	for (;;)
	{
		unsigned long long old = atomicCAS(skey + h, kEmptyKey, key);

		if (old == kEmptyKey || old == key)
			return;
		h = (h + 1) & (kSampleSlots - 1);
	}
}

__global__ void sample_count_kernel(GridParams gp, const float *x,
									const unsigned long long *skey, /* [kSampleSlots] */
									int32_t *scount /* [kSampleSlots] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= gp.n)
		return;
	unsigned long long key = point_key(gp, x, i);
	unsigned long long h = sample_slot(skey, key);

	if (skey[h] == key && *((volatile int32_t *) scount + h) < gp.min_pts)
		atomicAdd(scount + h, 1);
}

__global__ void sample_tally_kernel(GridParams gp, const float *x, int64_t stride, int32_t s,
									const unsigned long long *skey, const int32_t *scount,
									unsigned long long *dense /* [1] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= s)
		return;
	unsigned long long h = sample_slot(skey, point_key(gp, x, (int64_t) i * stride));

	if (scount[h] >= gp.min_pts)
		atomicAdd(dense, 1ULL);
}

/* xs[j] = x[row[j]]: the points in cell order; flag[j] = 1 where a cell starts. */
__global__ void gather_kernel(int32_t n, int d, const float *x, /* [n, d] */
							  const int32_t *row, /* [n] */ const unsigned long long *key, /* [n] */
							  float *xs, /* [n, d] */ int32_t *flag /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	const float *src = x + (size_t) row[j] * d;
	float	   *dst = xs + (size_t) j * d;

	for (int k = 0; k < d; k++)
		dst[k] = src[k];
	flag[j] = (j == 0 || key[j] != key[j - 1]) ? 1 : 0;
}

/* After the inclusive scan cellid[j] - 1 is the cell of j: record cell starts and keys. */
__global__ void cell_kernel(int32_t n, const unsigned long long *key, /* [n] */
							int32_t *cellid, /* [n] in: inclusive scan, out: cell */
							int32_t *start, /* [ncells + 1] */ unsigned long long *ckey /* [ncells] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		c = cellid[j] - 1;

	cellid[j] = c;
	if (j == 0 || key[j] != key[j - 1])
	{
		start[c] = j;
		ckey[c] = key[j];
	}
	if (j == n - 1)
		start[c + 1] = n;
}

__global__ void hash_kernel(GridParams gp, int32_t ncells, const int32_t *start,
							const unsigned long long *ckey, /* [ncells] */
							int32_t *table, /* [mask + 1] */ unsigned long long mask,
							unsigned long long *dense_points /* [1] */)
{
	int32_t		c = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long dense = 0;

	if (c < ncells)
	{
		unsigned long long h = hash_key(ckey[c]) & mask;
		int32_t		size = start[c + 1] - start[c];

		while (atomicCAS(table + h, -1, c) != -1)
			h = (h + 1) & mask;
		if (cell_dense(gp, size))
			dense = (unsigned long long) size;
	}
	for (int o = 16; o > 0; o >>= 1)
		dense += __shfl_xor_sync(0xffffffffu, dense, o);
	if ((threadIdx.x & 31) == 0 && dense)
		atomicAdd(dense_points, dense);
}

/* Points of dense cells are core and hang under their cell's first point. */
__global__ void init_kernel(GridParams gp, const int32_t *cellid, const int32_t *start,
							int32_t *parent, /* [n] */ uint8_t *core /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= gp.n)
		return;
	int32_t		c = cellid[j];
	int32_t		s = start[c];

	if (cell_dense(gp, start[c + 1] - s))
	{
		parent[j] = s;
		core[j] = 1;
	}
	else
	{
		parent[j] = j;
		core[j] = gp.min_pts <= 1;
	}
}

/* ------------------------------------------------------------------ phase 1: core points */

template <int D>
__global__ void core_kernel(GridParams gp, Cells cells, const float *xs, /* [n, d] sorted */
							const int32_t *cellid, uint8_t *core, int32_t begin, int32_t end)
{
	int32_t		j = begin + blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= end)
		return;
	int32_t		c = cellid[j];
	int32_t		size = cells.start[c + 1] - cells.start[c];

	if (cell_dense(gp, size))
		return;

	Query<D>	qp;
	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[c];
	int32_t		count = gp.dense_ok ? size : 0;

	qp.load(xs, j, gp.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.nrows && count < gp.min_pts; t++)
	{
		int32_t		first, last;

		if (!row_cells(gp, cells, coord, key, c, t, first, last))
			continue;
		for (int32_t b = first; b <= last && count < gp.min_pts; b++)
		{
			if (gp.dense_ok && b == c)
				continue;
			int32_t		be = cells.start[b + 1];

			for (int32_t q = cells.start[b]; q < be; q++)
				if (dist2<D>(qp.p, point<D>(xs, q, gp.d), gp.d) <= gp.eps2 &&
					++count >= gp.min_pts)
					break;
		}
	}
	core[j] = count >= gp.min_pts;
}

/* ------------------------------------------------------------------ phase 2: unions */

/*
 * Core points outside dense cells.  A pair of such points is joined by the
 * later one; a pair with a point of a dense cell by the point outside it.
 * With min_pts <= 2 core is not known yet: any pair within eps is a pair of
 * core points (each has itself and the other), so it is marked here.
 */
template <int D>
__global__ void union_point_kernel(GridParams gp, Cells cells, const float *xs, /* [n, d] */
								   const int32_t *cellid, uint8_t *core, int32_t *parent,
								   int32_t begin, int32_t end)
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

	Query<D>	qp;
	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[c];

	qp.load(xs, j, gp.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.nrows; t++)
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
					if (dist2<D>(qp.p, point<D>(xs, q, gp.d), gp.d) <= gp.eps2)
					{
						if (!known)
							core[j] = 1;
						uf_union(parent, j, q);
						break;
					}
			}
			else
			{
				if (be > j)
					be = j;
				for (int32_t q = bs; q < be; q++)
				{
					if (known && !core[q])
						continue;
					if (dist2<D>(qp.p, point<D>(xs, q, gp.d), gp.d) <= gp.eps2)
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

/* The bounding box of points [s, e), computed by a whole warp; every lane gets it. */
template <int D>
__device__ __forceinline__ void warp_box(const float *xs, /* [n, D] */
										 int32_t s, int32_t e, int lane,
										 float *lo, /* [D] out */
										 float *hi) /* [D] out */
{
#pragma unroll
	for (int k = 0; k < D; k++)
	{
		lo[k] = INFINITY;
		hi[k] = -INFINITY;
	}
	for (int32_t p = s + lane; p < e; p += 32)
#pragma unroll
		for (int k = 0; k < D; k++)
		{
			float		v = xs[(size_t) p * D + k];

			lo[k] = fminf(lo[k], v);
			hi[k] = fmaxf(hi[k], v);
		}
#pragma unroll
	for (int k = 0; k < D; k++)
		for (int o = 16; o > 0; o >>= 1)
		{
			lo[k] = fminf(lo[k], __shfl_xor_sync(0xffffffffu, lo[k], o));
			hi[k] = fmaxf(hi[k], __shfl_xor_sync(0xffffffffu, hi[k], o));
		}
}

/*
 * Pairs of dense cells (d <= 3 only), a warp per cell a, joined with each
 * dense neighbour cell b < a: nothing to do when already one set; a
 * comparison of the two bounding boxes settles most pairs; otherwise the
 * warp compares pairs 32 at a time and stops at the first within eps.
 * The box tests use the operations of dist2 on box corners, which bound
 * the computed distance of every pair from below and above (rounding is
 * monotone), so they never change the answer.
 */
template <int D>
__global__ void union_cell_kernel(GridParams gp, Cells cells, const float *xs, /* [n, D] */
								  int32_t *parent, int32_t begin, int32_t end)
{
	const int	lane = threadIdx.x & 31;
	int32_t		a = begin + (int32_t) ((blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5);

	if (a >= end)
		return;
	int32_t		as = cells.start[a];
	int32_t		ae = cells.start[a + 1];

	if (!cell_dense(gp, ae - as))
		return;

	float		alo[D], ahi[D];

	warp_box<D>(xs, as, ae, lane, alo, ahi);

	long long	coord[kMaxGridDims];
	unsigned long long key = cells.key[a];

	decode_key(gp, key, coord);
	/* A lane per neighbour row; the warp then takes each dense cell b < a. */
	int32_t		first = 0, last = -1;

	if (lane < gp.nrows && !row_cells(gp, cells, coord, key, a, lane, first, last))
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
		{
			int32_t		bs = cells.start[nb];
			int32_t		be = cells.start[nb + 1];

			if (!cell_dense(gp, be - bs))
				continue;

			/*
			 * Other warps change the forest meanwhile, so the lanes could see
			 * different roots: lane 0 decides for the warp.
			 */
			int			joined = 0;

			if (lane == 0)
				joined = uf_find(parent, as) == uf_find(parent, bs);
			if (__shfl_sync(0xffffffffu, joined, 0))
				continue;

			float		blo[D], bhi[D];

			warp_box<D>(xs, bs, be, lane, blo, bhi);

			/* Lower bound (gap) and upper bound (span) of every pair's distance. */
			double		gap2 = 0.0, span2 = 0.0;

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
			if (gap2 > gp.eps2)
				continue;
			if (span2 <= gp.eps2)
			{
				if (lane == 0)
					uf_union(parent, as, bs);
				continue;
			}

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

					hit = dist2<D>(xs + (size_t) p * D, xs + (size_t) q * D, D) <= gp.eps2;
				}
				if (__any_sync(0xffffffffu, hit))
				{
					if (lane == 0)
						uf_union(parent, as, bs);
					break;
				}
			}
		}
	}
}

/* ------------------------------------------------------------------ phase 3: border points */

/* best[j]: sorted position of the lowest-row core point within eps of non-core j, or -1. */
template <int D>
__global__ void border_kernel(GridParams gp, Cells cells, const float *xs, /* [n, d] */
							  const int32_t *cellid, const uint8_t *core, const int32_t *row,
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

	Query<D>	qp;
	long long	coord[kMaxGridDims];
	int32_t		c = cellid[j];
	unsigned long long key = cells.key[c];
	int32_t		best_pos = -1;
	int32_t		best_row = INT_MAX;

	qp.load(xs, j, gp.d);
	decode_key(gp, key, coord);
	for (int t = 0; t < gp.nrows; t++)
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

				if (r >= best_row)
					break;		/* rows increase within a cell */
				if (core[q] && dist2<D>(qp.p, point<D>(xs, q, gp.d), gp.d) <= gp.eps2)
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

/* ------------------------------------------------------------------ cluster numbers */

/* root[j]: the set of core j, of border j's core point, or -1; minrow[root] = lowest member row. */
__global__ void root_kernel(int32_t n, const uint8_t *core, int32_t *parent,
							int32_t *best_root, /* [n] in: best, out: root */
							const int32_t *row, int32_t *minrow /* [n] */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r;

	if (core[j])
		r = uf_find(parent, j);
	else
		r = best_root[j] >= 0 ? uf_find(parent, best_root[j]) : -1;
	best_root[j] = r;
	if (r >= 0)
		atomicMin(minrow + r, row[j]);
}

__global__ void fill_kernel(int32_t n, int32_t *a, int32_t v)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < n)
		a[j] = v;
}

/* flag[row] = 1 where a row is the first member of its cluster. */
__global__ void first_kernel(int32_t n, const int32_t *root, const int32_t *row,
							 const int32_t *minrow, int32_t *flag /* [n] by row */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r = root[j];

	flag[row[j]] = (r >= 0 && minrow[r] == row[j]) ? 1 : 0;
}

/* The answer by row: cluster number (inclusive rank - 1) and core flag. */
__global__ void label_kernel(int32_t n, const int32_t *root, const int32_t *row,
							 const int32_t *minrow, const int32_t *rank, const uint8_t *core,
							 int32_t *cluster, /* [n] by row */ uint8_t *is_core /* [n] by row */)
{
	int32_t		j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= n)
		return;
	int32_t		r = root[j];
	int32_t		i = row[j];

	cluster[i] = r >= 0 ? rank[minrow[r]] - 1 : -1;
	is_core[i] = core[j];
}

/* ------------------------------------------------------------------ host side */

inline unsigned grid_for(int64_t items, int block = kBlock)
{
	return (unsigned) ((items + block - 1) / block);
}

/*
 * Runs launch(begin, end) over [0, total) in chunks, synchronizing after
 * each and asking the cancel callback before each.  The chunk grows while a
 * launch takes under 10 ms and shrinks above 50 ms, so a cancel is answered
 * within a few tens of milliseconds whatever the density of the data.
 */
template <typename Launch>
void run_chunked(const char *what, int32_t total, int32_t first_chunk, gc_cancel_fn cancel,
				 void *cancel_arg, Launch launch)
{
	int64_t		chunk = std::max<int32_t>(first_chunk, 1);
	int			launches = 0;
	gc::Stopwatch all;

	for (int64_t begin = 0; begin < total;)
	{
		int64_t		end = std::min<int64_t>(begin + chunk, total);
		gc::Stopwatch sw;

		gc::check_cancel(cancel, cancel_arg);
		launch((int32_t) begin, (int32_t) end);
		CUDA_TRY(cudaDeviceSynchronize());
		double		ms = sw.ms();

		if (ms < 10.0 && chunk < (1 << 26))
			chunk *= 2;
		else if (ms > 50.0 && chunk > 64)
			chunk /= 2;
		begin = end;
		launches++;
	}
	if (getenv("GPUCLUST_DBSCAN_DEBUG"))
		fprintf(stderr, "gpuclust dbscan %s: %d items, %d launches, %.3f ms\n", what, total,
				launches, all.ms());
}

/* The host half of the grid: the same choices as grid_build in src/core/dbscan.c. */
void plan_grid(GridParams &gp, int32_t n, int32_t d, double eps, int32_t min_pts,
			   const double *lo, const double *hi, bool coarse)
{
	double		side0;

	memset(&gp, 0, sizeof(gp));
	gp.n = n;
	gp.d = d;
	gp.g = d < kMaxGridDims ? d : kMaxGridDims;
	gp.min_pts = min_pts;
	gp.eps2 = eps * eps;
	for (int k = 0; k < gp.g; k++)
		gp.lo[k] = lo[k];

	if (d <= kMaxGridDims && !coarse)
		side0 = eps / sqrt((double) d) * (1.0 - 1e-5);
	else
		side0 = eps * (1.0 + 1e-5);
	gp.side = side0;
	for (;;)
	{
		double		cells = 1.0;
		bool		fits = true;

		for (int k = 0; k < gp.g; k++)
		{
			double		e = floor((hi[k] - lo[k]) / gp.side) + 1.0;

			if (e > kMaxExtent)
				fits = false;
			cells *= e;
		}
		if (fits && cells < 4.0e18)
			break;
		gp.side *= 2.0;
	}
	for (int k = 0; k < gp.g; k++)
		gp.extent[k] = (long long) floor((hi[k] - lo[k]) / gp.side) + 1;
	gp.stride[gp.g - 1] = 1;
	for (int k = gp.g - 2; k >= 0; k--)
		gp.stride[k] = gp.stride[k + 1] * gp.extent[k + 1];
	gp.dense_ok = (d <= kMaxGridDims && !coarse && gp.side == side0);

	int			reach = (int) floor(eps / gp.side * (1.0 + 4e-6)) + 1;

	if (reach > 2)
		gc::fail(GC_ERR_INTERNAL, "grid reach %d is out of range; please report a bug", reach);

	int			width = 2 * reach + 1;
	int			total = 1;
	double		lim = eps * eps;

	for (int k = 0; k < gp.g; k++)
		total *= width;
	/* reach of the last dimension for each offset of the others, -1: none */
	int			row_r[kMaxRows];
	int			row_n[kMaxRows];
	int			prefixes = total / width;

	for (int t = 0; t < prefixes; t++)
	{
		row_r[t] = -1;
		row_n[t] = 0;
	}
	for (int t = 0; t < total; t++)
	{
		int			o[kMaxGridDims] = {0, 0, 0};
		double		gap2 = 0.0;
		int			r = t;

		for (int k = gp.g - 1; k >= 0; k--)
		{
			int			a;

			o[k] = (r % width) - reach;
			r /= width;
			a = o[k] < 0 ? -o[k] : o[k];
			if (a > 1)
			{
				double		gap = (double) (a - 1) * gp.side * (1.0 - 4e-6);

				gap2 += gap * gap;
			}
		}
		if (gap2 > lim)
			continue;
		/* offsets are enumerated with the last dimension fastest */
		int			prefix = t / width;
		int			last_abs = o[gp.g - 1] < 0 ? -o[gp.g - 1] : o[gp.g - 1];

		row_r[prefix] = std::max(row_r[prefix], last_abs);
		row_n[prefix]++;
		gp.noffsets++;
	}
	for (int t = 0; t < prefixes; t++)
	{
		if (row_r[t] < 0)
			continue;
		/* the kept offsets of a row are -r .. r: the gap grows with |offset| */
		if (row_n[t] != 2 * row_r[t] + 1)
			gc::fail(GC_ERR_INTERNAL, "grid row with a hole; please report a bug");
		int			r = t;

		for (int k = gp.g - 2; k >= 0; k--)
		{
			gp.row_off[gp.nrows * (kMaxGridDims - 1) + k] = (int8_t) ((r % width) - reach);
			r /= width;
		}
		gp.row_reach[gp.nrows] = (int8_t) row_r[t];
		gp.nrows++;
	}
	if (gp.nrows == 0)
		gc::fail(GC_ERR_INTERNAL, "grid without its own cell; please report a bug");
}

size_t sort_temp_bytes(int32_t n, int end_bit)
{
	size_t		bytes = 0;
	cub::DoubleBuffer<unsigned long long> k(nullptr, nullptr);
	cub::DoubleBuffer<int32_t> v(nullptr, nullptr);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, end_bit));
	return bytes;
}

size_t scan_temp_bytes(int32_t n)
{
	size_t		bytes = 0;

	CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, (int32_t *) nullptr,
										   (int32_t *) nullptr, n));
	return bytes;
}

int key_bits(const GridParams &gp)
{
	unsigned long long cells = 1;

	for (int k = 0; k < gp.g; k++)
		cells *= (unsigned long long) gp.extent[k];
	int			bits = 1;

	while (bits < 64 && (cells - 1) >> bits)
		bits++;
	return bits;
}

/* Device bytes at the peak of run_dbscan (see the stages there). */
int64_t bytes_estimate(int32_t n, int32_t d, size_t sort_tmp, size_t scan_tmp)
{
	const int64_t nn = n;
	const int64_t xb = nn * d * 4;
	/* x, two key and two row buffers, sort temp */
	int64_t		s1 = xb + nn * 24 + (int64_t) sort_tmp;
	/* x, keys, rows, xs, flags */
	int64_t		s2 = 2 * xb + nn * 16;
	/* xs, keys, rows, cellid, cell keys and starts, scan temp */
	int64_t		s3 = xb + nn * 28 + 8 + (int64_t) scan_tmp;
	/* xs, rows, cellid, cell keys and starts, hash, parent, core, best */
	int64_t		s4 = xb + nn * 45 + 72;
	/* rows, parent, core, root, minrow, flag, rank, cluster and is_core by row */
	int64_t		s5 = nn * 30 + (int64_t) scan_tmp;

	return std::max({s1, s2, s3, s4, s5}) + (4 << 20);
}

template <int D>
void run_phases(const GridParams &gp, const Cells &cells, const float *xs, const int32_t *cellid,
				uint8_t *core, int32_t *parent, const int32_t *row, int32_t *best,
				int32_t ncells, gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	const int32_t n = gp.n;
	gc::Stopwatch sw;

	/* Phase 1: core points; with min_pts <= 2 the union phase finds them. */
	if (gp.min_pts > 2)
		run_chunked("core points", n, kFirstPoints, cancel, cancel_arg, [&](int32_t b, int32_t e) {
			core_kernel<D><<<grid_for(e - b), kBlock>>>(gp, cells, xs, cellid, core, b, e);
			CHECK_LAUNCH("core_kernel");
		});
	timing->phase_ms[1] = sw.ms();
	sw.restart();

	/* Phase 2: unions of core-core pairs. */
	if (gp.dense_ok)
		run_chunked("dense cell unions", ncells, kFirstCells, cancel, cancel_arg,
					[&](int32_t b, int32_t e) {
			union_cell_kernel<(D > 0 ? D : 1)><<<grid_for((int64_t) (e - b) * 32), kBlock>>>(
				gp, cells, xs, parent, b, e);
			CHECK_LAUNCH("union_cell_kernel");
		});
	run_chunked("point unions", n, kFirstPoints, cancel, cancel_arg, [&](int32_t b, int32_t e) {
		union_point_kernel<D><<<grid_for(e - b), kBlock>>>(gp, cells, xs, cellid, core, parent,
															b, e);
		CHECK_LAUNCH("union_point_kernel");
	});
	timing->phase_ms[2] = sw.ms();
	sw.restart();

	/* Phase 3: border points (there are none with min_pts <= 2). */
	if (gp.min_pts > 2)
		run_chunked("border points", n, kFirstPoints, cancel, cancel_arg, [&](int32_t b, int32_t e) {
			border_kernel<D><<<grid_for(e - b), kBlock>>>(gp, cells, xs, cellid, core, row, best,
														   b, e);
			CHECK_LAUNCH("border_kernel");
		});
	else
		CUDA_TRY(cudaMemset(best, 0xff, sizeof(int32_t) * (size_t) n));
	timing->phase_ms[3] = sw.ms();
}

void run_dbscan(const float *x_host, int32_t n, int32_t d, const gc_dbscan_params *params,
				gc_dbscan_result *result, gc_timing *timing, gc_cancel_fn cancel,
				void *cancel_arg)
{
	const int32_t g = d < kMaxGridDims ? d : kMaxGridDims;
	gc::Stopwatch sw;

	/* Memory first: say how much is needed before any work starts. */
	size_t		sort_tmp = sort_temp_bytes(n, 64);
	size_t		scan_tmp = scan_temp_bytes(n);
	int64_t		need = bytes_estimate(n, d, sort_tmp, scan_tmp);
	size_t		free_b = 0, total_b = 0;

	timing->bytes_needed = need;
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
	if ((uint64_t) need > free_b)
	{
		gc::oom_bytes_needed = need;
		gc::fail(GC_ERR_OUT_OF_MEMORY,
				 "DBSCAN of %d points of dimension %d needs about %lld bytes of device memory, "
				 "%zu bytes are free of %zu", n, d, (long long) need, free_b, total_b);
	}

	/* Stage 1: upload, bounding box, cell keys, stable sort by cell. */
	gc::DeviceBuffer<float> x((size_t) n * d, "the points");

	gc::check_cancel(cancel, cancel_arg);
	CUDA_TRY(cudaMemcpy(x.get(), x_host, x.bytes(), cudaMemcpyHostToDevice));
	timing->to_device_ms = sw.ms();
	sw.restart();
	gc::Stopwatch compute;

	double		lo[kMaxGridDims], hi[kMaxGridDims];
	{
		gc::DeviceBuffer<float> part((size_t) kBboxBlocks * g * 2, "the bounding box");
		gc::DeviceBuffer<unsigned long long> bad(1, "the bounding box");
		float		hpart[kBboxBlocks * kMaxGridDims * 2];
		unsigned long long hbad = 0;

		CUDA_TRY(cudaMemset(bad.get(), 0, sizeof(unsigned long long)));
		bbox_kernel<<<kBboxBlocks, kBlock>>>(x.get(), n, d, g, part.get(),
											  part.get() + kBboxBlocks * g, bad.get());
		CHECK_LAUNCH("bbox_kernel");
		CUDA_TRY(cudaMemcpy(hpart, part.get(), part.bytes(), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(&hbad, bad.get(), sizeof(hbad), cudaMemcpyDeviceToHost));
		if (hbad)
			gc::fail(GC_ERR_INVALID_ARGUMENT,
					 "the points hold %llu non-finite coordinates (NaN or infinity)", hbad);
		for (int k = 0; k < g; k++)
		{
			float		l = INFINITY, h = -INFINITY;

			for (int b = 0; b < kBboxBlocks; b++)
			{
				l = std::min(l, hpart[b * g + k]);
				h = std::max(h, hpart[kBboxBlocks * g + b * g + k]);
			}
			lo[k] = l;
			hi[k] = h;
		}
	}

	/*
	 * Stages 2 and 3: the grid.  With d <= 3 the fine DenseBox grid is used
	 * unless an estimate from a sample says that less than kDenseShare of
	 * the points lie in dense cells: then its 125-cell neighbourhood costs
	 * more than the dense cells save, and a grid of side eps (27 cells, no
	 * dense cells) is used.  The environment variable GPUCLUST_DBSCAN_GRID =
	 * fine | coarse forces one of the two (for benchmarks and tests; the
	 * answer is the same), and GPUCLUST_DBSCAN_DEBUG, when set, prints the
	 * grid chosen to stderr.
	 */
	const char *grid_env = getenv("GPUCLUST_DBSCAN_GRID");
	const bool	force_fine = grid_env && strcmp(grid_env, "fine") == 0;
	const bool	force_coarse = grid_env && strcmp(grid_env, "coarse") == 0;
	bool		coarse = force_coarse;
	double		dense_share = -1.0;
	GridParams	gp;

	plan_grid(gp, n, d, params->eps, params->min_pts, lo, hi, coarse);
	if (gp.dense_ok && !force_fine)
	{
		const int32_t s = std::min<int32_t>(n, kSample);
		const int64_t stride = n / s;
		gc::DeviceBuffer<unsigned long long> skey(kSampleSlots + 1, "the density sample");
		gc::DeviceBuffer<int32_t> scount(kSampleSlots, "the density sample");
		unsigned long long dense = 0;

		CUDA_TRY(cudaMemset(skey.get(), 0xff, sizeof(unsigned long long) * kSampleSlots));
		CUDA_TRY(cudaMemset(skey.get() + kSampleSlots, 0, sizeof(unsigned long long)));
		CUDA_TRY(cudaMemset(scount.get(), 0, scount.bytes()));
		sample_insert_kernel<<<grid_for(s), kBlock>>>(gp, x.get(), stride, s, skey.get());
		CHECK_LAUNCH("sample_insert_kernel");
		sample_count_kernel<<<grid_for(n), kBlock>>>(gp, x.get(), skey.get(), scount.get());
		CHECK_LAUNCH("sample_count_kernel");
		sample_tally_kernel<<<grid_for(s), kBlock>>>(gp, x.get(), stride, s, skey.get(),
													 scount.get(), skey.get() + kSampleSlots);
		CHECK_LAUNCH("sample_tally_kernel");
		CUDA_TRY(cudaMemcpy(&dense, skey.get() + kSampleSlots, sizeof(dense),
							cudaMemcpyDeviceToHost));
		dense_share = (double) dense / s;
		if (dense_share < kDenseShare)
		{
			coarse = true;
			plan_grid(gp, n, d, params->eps, params->min_pts, lo, hi, coarse);
		}
	}

	gc::DeviceBuffer<int32_t> row;	/* sorted position -> row */
	gc::DeviceBuffer<unsigned long long> keys;

	{
		gc::DeviceBuffer<unsigned long long> keys_b(n, "cell keys");
		gc::DeviceBuffer<int32_t> rows_b(n, "row numbers");

		keys.reset(n, "cell keys");
		row.reset(n, "row numbers");
		key_kernel<<<grid_for(n), kBlock>>>(gp, x.get(), keys.get(), row.get());
		CHECK_LAUNCH("key_kernel");
		gc::check_cancel(cancel, cancel_arg);

		cub::DoubleBuffer<unsigned long long> k(keys.get(), keys_b.get());
		cub::DoubleBuffer<int32_t> v(row.get(), rows_b.get());
		int			bits = key_bits(gp);
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, bits));
		gc::DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the sort");
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, k, v, n, 0, bits));
		CHECK_LAUNCH("DeviceRadixSort");
		if (k.Current() != keys.get())
			std::swap(keys, keys_b);
		if (v.Current() != row.get())
			std::swap(row, rows_b);
	}

	/* Points in cell order, cell starts and keys. */
	gc::DeviceBuffer<float> xs((size_t) n * d, "the sorted points");
	gc::DeviceBuffer<int32_t> cellid(n, "cell numbers");

	gather_kernel<<<grid_for(n), kBlock>>>(n, d, x.get(), row.get(), keys.get(), xs.get(),
										   cellid.get());
	CHECK_LAUNCH("gather_kernel");
	x.release();
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, cellid.get(), cellid.get(), n));
		gc::DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the cell scan");
		CUDA_TRY(cub::DeviceScan::InclusiveSum(tmp.get(), bytes, cellid.get(), cellid.get(), n));
		CHECK_LAUNCH("DeviceScan");
	}
	int32_t		ncells = 0;

	CUDA_TRY(cudaMemcpy(&ncells, cellid.get() + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));

	gc::DeviceBuffer<int32_t> start((size_t) ncells + 1, "cell starts");
	gc::DeviceBuffer<unsigned long long> ckey(ncells, "cell keys");

	cell_kernel<<<grid_for(n), kBlock>>>(n, keys.get(), cellid.get(), start.get(), ckey.get());
	CHECK_LAUNCH("cell_kernel");
	keys.release();

	/* Hash table from cell key to cell. */
	unsigned long long slots = 16;

	while (slots < 2 * (unsigned long long) ncells)
		slots <<= 1;
	gc::DeviceBuffer<int32_t> table(slots, "the cell hash table");
	gc::DeviceBuffer<unsigned long long> dense_points(1, "the dense cell count");

	CUDA_TRY(cudaMemset(table.get(), 0xff, table.bytes()));
	CUDA_TRY(cudaMemset(dense_points.get(), 0, sizeof(unsigned long long)));
	hash_kernel<<<grid_for(ncells), kBlock>>>(gp, ncells, start.get(), ckey.get(), table.get(),
											  slots - 1, dense_points.get());
	CHECK_LAUNCH("hash_kernel");
	if (getenv("GPUCLUST_DBSCAN_DEBUG"))
	{
		unsigned long long in_dense = 0;

		CUDA_TRY(cudaMemcpy(&in_dense, dense_points.get(), sizeof(in_dense),
							cudaMemcpyDeviceToHost));
		fprintf(stderr, "gpuclust dbscan grid: n=%d d=%d side=%g extent=%lld,%lld,%lld "
				"cells=%d dense_ok=%d points_in_dense_cells=%llu estimated_share=%.4f "
				"offsets=%d rows=%d\n",
				n, d, gp.side, gp.extent[0], gp.g > 1 ? gp.extent[1] : 1LL,
				gp.g > 2 ? gp.extent[2] : 1LL, ncells, gp.dense_ok, in_dense, dense_share,
				gp.noffsets, gp.nrows);
	}

	Cells		cells = {start.get(), ckey.get(), table.get(), slots - 1, ncells};
	gc::DeviceBuffer<int32_t> parent(n, "the disjoint-set forest");
	gc::DeviceBuffer<uint8_t> core(n, "core flags");
	gc::DeviceBuffer<int32_t> best(n, "border points");

	init_kernel<<<grid_for(n), kBlock>>>(gp, cellid.get(), start.get(), parent.get(), core.get());
	CHECK_LAUNCH("init_kernel");
	CUDA_TRY(cudaDeviceSynchronize());
	timing->phase_ms[0] = sw.ms();

	/* Phases 1 to 3. */
	switch (d)
	{
		case 1:
			run_phases<1>(gp, cells, xs.get(), cellid.get(), core.get(), parent.get(), row.get(),
						  best.get(), ncells, timing, cancel, cancel_arg);
			break;
		case 2:
			run_phases<2>(gp, cells, xs.get(), cellid.get(), core.get(), parent.get(), row.get(),
						  best.get(), ncells, timing, cancel, cancel_arg);
			break;
		case 3:
			run_phases<3>(gp, cells, xs.get(), cellid.get(), core.get(), parent.get(), row.get(),
						  best.get(), ncells, timing, cancel, cancel_arg);
			break;
		default:
			run_phases<0>(gp, cells, xs.get(), cellid.get(), core.get(), parent.get(), row.get(),
						  best.get(), ncells, timing, cancel, cancel_arg);
			break;
	}
	sw.restart();
	gc::check_cancel(cancel, cancel_arg);

	/* Cluster numbers by lowest member row. */
	xs.release();
	table.release();
	ckey.release();
	start.release();
	cellid.release();

	gc::DeviceBuffer<int32_t> minrow(n, "cluster numbers");
	gc::DeviceBuffer<int32_t> flag(n, "cluster numbers");
	gc::DeviceBuffer<int32_t> rank(n, "cluster numbers");
	gc::DeviceBuffer<uint8_t> is_core(n, "core flags");

	fill_kernel<<<grid_for(n), kBlock>>>(n, minrow.get(), INT_MAX);
	CHECK_LAUNCH("fill_kernel");
	root_kernel<<<grid_for(n), kBlock>>>(n, core.get(), parent.get(), best.get(), row.get(),
										 minrow.get());
	CHECK_LAUNCH("root_kernel");
	first_kernel<<<grid_for(n), kBlock>>>(n, best.get(), row.get(), minrow.get(), flag.get());
	CHECK_LAUNCH("first_kernel");
	{
		size_t		bytes = 0;

		CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, flag.get(), rank.get(), n));
		gc::DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the cluster scan");
		CUDA_TRY(cub::DeviceScan::InclusiveSum(tmp.get(), bytes, flag.get(), rank.get(), n));
		CHECK_LAUNCH("DeviceScan");
	}
	/* flag is free again: it takes the cluster numbers by row. */
	label_kernel<<<grid_for(n), kBlock>>>(n, best.get(), row.get(), minrow.get(), rank.get(),
										  core.get(), flag.get(), is_core.get());
	CHECK_LAUNCH("label_kernel");

	int32_t		nclusters = 0;

	CUDA_TRY(cudaMemcpy(&nclusters, rank.get() + (n - 1), sizeof(int32_t), cudaMemcpyDeviceToHost));
	timing->phase_ms[3] += sw.ms();
	timing->compute_ms = compute.ms();

	/* Results back to the caller's buffers. */
	sw.restart();
	CUDA_TRY(cudaMemcpy(result->cluster, flag.get(), sizeof(int32_t) * (size_t) n,
						cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(result->is_core, is_core.get(), (size_t) n, cudaMemcpyDeviceToHost));
	result->n_clusters = nclusters;
	timing->from_device_ms = sw.ms();
}

} // namespace

extern "C" gc_status gcu_dbscan(int32_t device_id, const float *x, int64_t n, int32_t d,
								const gc_dbscan_params *params, gc_dbscan_result *result,
								gc_timing *timing, gc_cancel_fn cancel, void *cancel_arg)
{
	GC_ENTRY_BEGIN
	gc_timing	local;
	gc_timing  *t = timing ? timing : &local;

	memset(t, 0, sizeof(*t));
	if (!params || !result || (n > 0 && (!x || !result->cluster || !result->is_core)))
		return gc::set_error(GC_ERR_INVALID_ARGUMENT, "missing argument to gpu dbscan");
	if (params->struct_size < sizeof(gc_dbscan_params))
		return gc::set_error(GC_ERR_INVALID_ARGUMENT, "gc_dbscan_params is too small");
	if (!(params->eps > 0.0) || !std::isfinite(params->eps) || params->min_pts < 1 || d < 1 ||
		n < 0)
		return gc::set_error(GC_ERR_INVALID_ARGUMENT,
							 "invalid DBSCAN parameters (eps %g, min_pts %d, d %d)",
							 params->eps, params->min_pts, d);
	if (n > INT32_MAX - 1)
		return gc::set_error(GC_ERR_INVALID_ARGUMENT,
							 "the GPU DBSCAN takes at most %d points, not %lld",
							 INT32_MAX - 1, (long long) n);
	result->n_clusters = 0;
	if (n == 0)
		return GC_OK;
	gc::use_device(device_id);
	try
	{
		run_dbscan(x, (int32_t) n, d, params, result, t, cancel, cancel_arg);
	}
	catch (const gc::Failure &f)
	{
		if (f.status == GC_ERR_OUT_OF_MEMORY)
			t->bytes_needed = std::max<int64_t>(t->bytes_needed, gc::oom_bytes_needed);
		throw;
	}
	GC_ENTRY_END
}
