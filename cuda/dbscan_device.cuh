/*
 * dbscan_device.cuh
 *    Device helpers of the GPU DBSCAN kernels: cell keys and the cell hash
 *    table, the neighbour cells of a cell as rows, the distance (gc_dist2
 *    of common/portable.h bit for bit) and the lock-free disjoint-set
 *    forest.
 */
#ifndef GPUCLUST_DBSCAN_DEVICE_CUH
#define GPUCLUST_DBSCAN_DEVICE_CUH

#include "dbscan.cuh"

namespace gc {
namespace dbscan {

__host__ __device__ inline unsigned long long hash_key(unsigned long long key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return key;
}

/*
 * gc_dist2 (T = float) and gc_dist2_f64 (T = double) of common/portable.h:
 * double, in order, no contraction.
 */
template <int D, typename T>
__device__ __forceinline__ double dist2(const T *a, /* [d] */ const T *b, /* [d] */ int d)
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
template <int D, typename T>
struct Query
{
	T			v[D > 0 ? D : 1];
	const T    *p;

	__device__ void load(const T *xs, /* [n, d] */ int32_t j, int d)
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

template <int D, typename T>
__device__ __forceinline__ const T *point(const T *xs, /* [n, d] */ int32_t q, int d)
{
	return xs + (size_t) q * (D > 0 ? D : d);
}

/* The cell key of point i: its cell coordinates (gc_grid_cell_of) with the last fastest. */
template <typename T>
__device__ __forceinline__ unsigned long long point_key(const GridParams &gp,
														const T *x, /* [n, d] */ int64_t i)
{
	unsigned long long k = 0;
	const T    *row = x + (size_t) i * gp.plan.d;

	for (int j = 0; j < gp.plan.g; j++)
		k = k * (unsigned long long) gp.plan.extent[j] +
			(unsigned long long) gc_grid_cell_of(&gp.plan, (double) row[gp.plan.dim[j]], j);
	return k;
}

/* Candidates a thread looks at between two reads of the abort flag. */
constexpr int32_t kAbortEvery = 4096;

/* Counts one candidate; true every kAbortEvery of them when the host asked to stop. */
__device__ __forceinline__ bool abort_tick(const GridParams &gp, int32_t &tick)
{
	if (++tick < kAbortEvery)
		return false;
	tick = 0;
	return *gp.abort != 0;
}

__device__ __forceinline__ bool cell_dense(const GridParams &gp, int32_t size)
{
	return gp.plan.dense_ok && size >= gp.min_pts;
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
										   long long *coord /* [g] out */)
{
	for (int k = gp.plan.g - 1; k >= 0; k--)
	{
		coord[k] = (long long) (key % (unsigned long long) gp.plan.extent[k]);
		key /= (unsigned long long) gp.plan.extent[k];
	}
}

/*
 * The existing cells of neighbour row t of cell c (coordinates coord, key
 * key): cells first .. last of the cell table, or false when there are none.
 * One hash probe finds one cell of the row (the middle one first); its
 * neighbours in the table are the rest.
 */
__device__ __forceinline__ bool row_cells(const GridParams &gp, const Cells &cells,
										  const long long *coord, /* [g] */
										  unsigned long long key, int32_t c, int t,
										  int32_t &first, int32_t &last)
{
	const int	L = gp.plan.g - 1;
	long long	base = (long long) key;

	for (int k = 0; k < L; k++)
	{
		int			o = gp.plan.row_off[t][k];
		long long	nc = coord[k] + o;

		if (nc < 0 || nc >= gp.plan.extent[k])
			return false;
		base += (long long) o * gp.stride[k];
	}

	const int	r = gp.plan.row_half[t];
	const long long lo = coord[L] < r ? -coord[L] : -r;
	const long long hi = coord[L] + r >= gp.plan.extent[L] ? gp.plan.extent[L] - 1 - coord[L] : r;
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

/*
 * The disjoint-set forest over sorted positions, parent[x] <= x always:
 * compare-and-swap hooking of the larger root under the smaller, as in
 * Jaiganesh and Burtscher, "A High-Performance Connected Components
 * Implementation for GPUs" (ECL-CC).
 */
__device__ __forceinline__ int32_t uf_find(int32_t *parent_, /* [n] */ int32_t x)
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
__device__ __forceinline__ void uf_union(int32_t *parent, /* [n] */ int32_t a, int32_t b)
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

} // namespace dbscan
} // namespace gc

#endif /* GPUCLUST_DBSCAN_DEVICE_CUH */
