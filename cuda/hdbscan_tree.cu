/*
 * hdbscan_tree.cu
 *    The bounding volume hierarchy of the GPU HDBSCAN (cuda/hdbscan.cuh):
 *    Morton codes on all the box dimensions (the first min(d, 16)
 *    coordinates), in order of widest spread, 63 / M bits each (52 for one,
 *    31 for two), each coordinate first mapped
 *    through the empirical distribution of a sample of the rows (a
 *    piecewise linear map through 255 sample quantiles between the true
 *    minimum and maximum), so that far outliers do not crush the bulk of the
 *    rows into a few codes; then a stable CUB radix
 *    sort of the rows by code, the binary radix tree of Karras (HPG 2012)
 *    with the sorted position as tie breaker, and the per-node data filled
 *    bottom up (boxes and lowest row; smallest core distance; uniform
 *    component per Boruvka round) by one thread per leaf that climbs while
 *    it is the second to reach a node.
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <vector>

namespace gc {
namespace hdbscan {
namespace {

/*
 * Coded coordinates at most: every box dimension.  With 3 of 8 the boxes of
 * the nodes were wide in the others: on the H200, 1M x 8 blobs took 6.8 s
 * (core distances 5.7 s), with all 8 1.04 s (0.91 s); 1M x 5 0.22 s and
 * 0.12 s (BENCHMARKS.md, "HDBSCAN's GPU tree").
 */
constexpr int kMortonDims = kMaxBoxDims;

static_assert(kMaxBoxDims >= kMortonDims, "the Morton dimensions are chosen among the box dimensions");

/* A double as an unsigned integer of the same order (for atomicMin / atomicMax). */
__device__ __forceinline__ unsigned long long ord_bits(double v)
{
	unsigned long long b = (unsigned long long) __double_as_longlong(v);

	return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}

__host__ __device__ inline double ord_value(unsigned long long u)
{
	unsigned long long b = (u >> 63) ? (u & 0x7fffffffffffffffULL) : ~u;
	double		v;

	memcpy(&v, &b, sizeof(v));
	return v;
}

/*
 * The extent of the rows x [n, d] on their first M coordinates, into lo [M]
 * / hi [M] (order bits), and the count of non-finite coordinates (all d).
 */
template <typename T>
__global__ void bounds_kernel(const T *x, /* [n, d] */ int32_t n, int32_t d, int M,
							  unsigned long long *lo, /* [M] in/out */
							  unsigned long long *hi, /* [M] in/out */
							  unsigned long long *nonfinite /* [1] in/out */)
{
	unsigned long long bad = 0;

	double		mn[kMaxBoxDims], mx[kMaxBoxDims];

	for (int k = 0; k < kMaxBoxDims; k++)
	{
		mn[k] = DBL_MAX;
		mx[k] = -DBL_MAX;
	}
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		for (int k = 0; k < d; k++)
		{
			double		v = (double) x[(size_t) i * d + k];

			if (!isfinite(v))
				bad++;
			else if (k < M)
			{
				mn[k] = fmin(mn[k], v);
				mx[k] = fmax(mx[k], v);
			}
		}
	}
	for (int o = 16; o > 0; o >>= 1)
		bad += __shfl_xor_sync(0xffffffffu, bad, o);
	if ((threadIdx.x & 31) == 0 && bad)
		atomicAdd(nonfinite, bad);
	for (int k = 0; k < M; k++)
	{
		for (int o = 16; o > 0; o >>= 1)
		{
			mn[k] = fmin(mn[k], __shfl_xor_sync(0xffffffffu, mn[k], o));
			mx[k] = fmax(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], o));
		}
		if ((threadIdx.x & 31) == 0)
		{
			atomicMin(lo + k, ord_bits(mn[k]));
			atomicMax(hi + k, ord_bits(mx[k]));
		}
	}
}

/* Knots of the map of a coordinate to [0, 1]: the minimum, sample quantiles, the maximum. */
constexpr int kKnots = 257;

/*
 * Rows of the host sample that places the knots: 16 a knot.  On the H100
 * machine the 1M-row build took 4.6-4.7 ms with 16,384 rows (read from the
 * host's rows and sorted there) and 1.7 ms with 4,096; the searches after
 * it did 0.3-1.2 % more distances.
 */
constexpr int32_t kSample = 4096;

struct MortonParams
{
	int			dim[kMortonDims];	/* the coordinates coded */
	int			nk[kMortonDims];	/* knots of each (strictly increasing), <= kKnots */
	const double *knots;		/* [kMortonDims, kKnots] on the device */
	double		maxq;
	int			bits;
	int			M;
};

/* v mapped to [0, 1] through the knots kn [c]: piecewise linear, non-decreasing. */
__device__ __forceinline__ double knot_map(const double *kn, /* [c] */ int c, double v)
{
	if (c < 2 || v <= kn[0])
		return 0.0;
	if (v >= kn[c - 1])
		return 1.0;

	int			lo = 0,
				hi = c - 1;		/* kn [lo] < v < kn [hi] */

	while (hi - lo > 1)
	{
		const int	mid = (lo + hi) / 2;

		if (kn[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return ((double) lo + (v - kn[lo]) / (kn[lo + 1] - kn[lo])) / (double) (c - 1);
}

/* The Morton code of every row, and iota as the values of the sort. */
template <typename T>
__global__ void morton_kernel(const T *x, /* [n, d] */ int32_t n, int32_t d, MortonParams mp,
							  unsigned long long *code, /* [n] out */
							  int32_t *idx /* [n] out */)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long q[kMortonDims] = {};
	unsigned long long c = 0;

	if (i >= n)
		return;
	for (int k = 0; k < mp.M; k++)
	{
		double		f = knot_map(mp.knots + k * kKnots, mp.nk[k], (double) x[(size_t) i * d + mp.dim[k]]) *
			mp.maxq;

		q[k] = f > 0 ? (f < mp.maxq ? (unsigned long long) f : (unsigned long long) mp.maxq) : 0;
	}
	for (int b = mp.bits - 1; b >= 0; b--)
		for (int k = 0; k < mp.M; k++)
			c = (c << 1) | ((q[k] >> b) & 1ULL);
	code[i] = c;
	idx[i] = (int32_t) i;
}

/* xs [pos] = x [perm [pos]], inv [perm [pos]] = pos. */
template <typename T>
__global__ void gather_kernel(const T *x, /* [n, d] */ const int32_t *perm, /* [n] */
							  int32_t n, int32_t d,
							  T *xs, /* [n, d] out */
							  int32_t *inv /* [n] out */)
{
	int64_t		pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;

	int32_t		r = perm[pos];

	for (int k = 0; k < d; k++)
		xs[(size_t) pos * d + k] = x[(size_t) r * d + k];
	inv[r] = (int32_t) pos;
}

/* The length of the common prefix of the keys (code, position) at sorted positions i and j; -1 outside. */
__device__ __forceinline__ int delta(const unsigned long long *code, /* [n] */ int32_t n,
									 int64_t i, int64_t j)
{
	if (j < 0 || j >= n)
		return -1;

	unsigned long long a = code[i],
				b = code[j];

	if (a != b)
		return __clzll((long long) (a ^ b));
	return 64 + __clz((int) ((uint32_t) i ^ (uint32_t) j));
}

/*
 * Karras 2012, algorithm 4: the children of internal node i, their parent,
 * and the far end j of the node's sorted positions [min (i, j), max (i, j)].
 */
__global__ void karras_kernel(const unsigned long long *code, /* [n] sorted */ int32_t n,
							  int32_t *left, /* [n - 1] out */
							  int32_t *right, /* [n - 1] out */
							  int32_t *parent_int, /* [n - 1] out (the root's set before) */
							  int32_t *parent_leaf, /* [n] out */
							  int32_t *span /* [n - 1] out */)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (int64_t) n - 1)
		return;

	const int	dir = delta(code, n, i, i + 1) - delta(code, n, i, i - 1) > 0 ? 1 : -1;
	const int	dmin = delta(code, n, i, i - dir);
	int64_t		lmax = 2;

	while (delta(code, n, i, i + lmax * dir) > dmin)
		lmax *= 2;

	int64_t		l = 0;

	for (int64_t t = lmax / 2; t >= 1; t /= 2)
		if (delta(code, n, i, i + (l + t) * dir) > dmin)
			l += t;

	const int64_t j = i + l * dir;
	const int	dnode = delta(code, n, i, j);
	int64_t		s = 0,
				div = 2,
				t;

	do
	{
		t = (l + div - 1) / div;
		if (delta(code, n, i, i + (s + t) * dir) > dnode)
			s += t;
		div *= 2;
	} while (t > 1);

	const int64_t gamma = i + s * dir + (dir < 0 ? -1 : 0);
	const int64_t lo = i < j ? i : j;
	const int64_t hi = i < j ? j : i;
	int32_t		lc,
				rc;

	if (lo == gamma)
	{
		lc = ~(int32_t) gamma;
		parent_leaf[gamma] = (int32_t) i;
	}
	else
	{
		lc = (int32_t) gamma;
		parent_int[gamma] = (int32_t) i;
	}
	if (hi == gamma + 1)
	{
		rc = ~(int32_t) (gamma + 1);
		parent_leaf[gamma + 1] = (int32_t) i;
	}
	else
	{
		rc = (int32_t) (gamma + 1);
		parent_int[gamma + 1] = (int32_t) i;
	}
	left[i] = lc;
	right[i] = rc;
	span[i] = (int32_t) j;
}

enum UpMode
{
	kUpBox = 0,					/* boxes and lowest row */
	kUpCore = 1,				/* smallest core distance */
	kUpComp = 2					/* uniform component */
};

template <typename T>
struct UpArgs
{
	const T    *xs;				/* [n, d] */
	const int32_t *perm;		/* [n] */
	const int32_t *left;		/* [n - 1] */
	const int32_t *right;		/* [n - 1] */
	const int32_t *parent_int;	/* [n - 1] */
	const int32_t *parent_leaf; /* [n] */
	int32_t    *flag;			/* [n - 1] zeroed */
	T		   *box;			/* [n - 1, 2 B] */
	int32_t    *minrow;			/* [n - 1] */
	double	   *mincore;		/* [n - 1] */
	const double *core_s;		/* [n] */
	int32_t    *ncomp;			/* [n - 1] */
	const int32_t *comp;		/* [n] */
	int32_t		n;
	int32_t		d;
	int32_t		B;
};

/* Fills internal node v from its two children (both done: v's second visitor runs this). */
template <int MODE, typename T>
__device__ __forceinline__ void combine(const UpArgs<T> &u, int32_t v)
{
	const int32_t c[2] = {u.left[v], u.right[v]};

	if (MODE == kUpBox)
	{
		const int	B = u.B;
		int32_t		mr = INT_MAX;

		for (int k = 0; k < B; k++)
		{
			T			lo,
						hi;

			for (int s = 0; s < 2; s++)
			{
				T			a,
							b;

				if (c[s] < 0)
					a = b = u.xs[(size_t) (~c[s]) * u.d + k];
				else
				{
					a = __ldcg(u.box + (size_t) c[s] * 2 * B + k);
					b = __ldcg(u.box + (size_t) c[s] * 2 * B + B + k);
				}
				if (s == 0 || a < lo)
					lo = a;
				if (s == 0 || b > hi)
					hi = b;
			}
			u.box[(size_t) v * 2 * B + k] = lo;
			u.box[(size_t) v * 2 * B + B + k] = hi;
		}
		for (int s = 0; s < 2; s++)
		{
			int32_t		m = c[s] < 0 ? u.perm[~c[s]] : __ldcg(u.minrow + c[s]);

			mr = m < mr ? m : mr;
		}
		u.minrow[v] = mr;
	}
	else if (MODE == kUpCore)
	{
		double		m = DBL_MAX;

		for (int s = 0; s < 2; s++)
		{
			double		x = c[s] < 0 ? u.core_s[~c[s]] : __ldcg(u.mincore + c[s]);

			m = x < m ? x : m;
		}
		u.mincore[v] = m;
	}
	else
	{
		int32_t		a = c[0] < 0 ? u.comp[~c[0]] : __ldcg(u.ncomp + c[0]);
		int32_t		b = c[1] < 0 ? u.comp[~c[1]] : __ldcg(u.ncomp + c[1]);

		u.ncomp[v] = (a == b && a >= 0) ? a : -1;
	}
}

/*
 * One thread per leaf climbs towards the root; at each node the first
 * thread to arrive stops and the second fills the node (its children are
 * both done: the first wrote its child before the fence and the count).
 */
template <int MODE, typename T>
__global__ void up_kernel(UpArgs<T> u)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= u.n)
		return;

	int32_t		v = u.parent_leaf[pos];

	while (v >= 0)
	{
		__threadfence();
		if (atomicAdd(u.flag + v, 1) == 0)
			return;
		__threadfence();
		combine<MODE, T>(u, v);
		v = u.parent_int[v];
	}
}

template <typename T>
UpArgs<T> up_args(Workspace &w)
{
	UpArgs<T>	u;

	u.xs = w.xs<T>().get();
	u.perm = w.perm.get();
	u.left = w.left.get();
	u.right = w.right.get();
	u.parent_int = w.parent_int.get();
	u.parent_leaf = w.parent_leaf.get();
	u.flag = w.flag.get();
	u.box = w.box<T>().get();
	u.minrow = w.minrow.get();
	u.mincore = w.mincore.get();
	u.core_s = w.core_s.get();
	u.ncomp = w.ncomp.get();
	u.comp = nullptr;
	u.n = w.n;
	u.d = w.d;
	u.B = w.B;
	return u;
}

template <int MODE>
void climb(Workspace &w, const int32_t *comp)
{
	CUDA_TRY(cudaMemset(w.flag.get(), 0, w.flag.bytes()));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);
		UpArgs<T>	u = up_args<T>(w);

		u.comp = comp;
		up_kernel<MODE, T><<<blocks_for(w.n, 256), 256>>>(u);
		CHECK_LAUNCH("up_kernel");
	});
}

} // namespace

void build_tree(Workspace &w)
{
	Stopwatch	sw;
	const int32_t n = w.n;
	const int	M = std::min<int32_t>(w.d, kMortonDims);
	const int	E = w.B;		/* the extent is read on the box dimensions */

	/* The extent of the rows on the box dimensions. */
	DeviceBuffer<unsigned long long> ext(2 * kMaxBoxDims + 1, "the extent of the rows");
	unsigned long long h_ext[2 * kMaxBoxDims + 1];

	for (int k = 0; k < kMaxBoxDims; k++)
	{
		h_ext[k] = ~0ULL;
		h_ext[kMaxBoxDims + k] = 0;
	}
	h_ext[2 * kMaxBoxDims] = 0;
	CUDA_TRY(cudaMemcpy(ext.get(), h_ext, sizeof(h_ext), cudaMemcpyHostToDevice));
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		bounds_kernel<T><<<std::min<unsigned>(blocks_for(n, 256), 1024), 256>>>(
			w.x<T>().get(), n, w.d, E, ext.get(), ext.get() + kMaxBoxDims, ext.get() + 2 * kMaxBoxDims);
		CHECK_LAUNCH("bounds_kernel");
	});
	CUDA_TRY(cudaMemcpy(h_ext, ext.get(), sizeof(h_ext), cudaMemcpyDeviceToHost));
	if (h_ext[2 * kMaxBoxDims])
		fail(GC_ERR_INVALID_ARGUMENT,
			 "the points hold %llu non-finite coordinates (NaN or infinity)", h_ext[2 * kMaxBoxDims]);

	MortonParams mp;

	memset(&mp, 0, sizeof(mp));
	mp.M = M;
	mp.bits = M == 1 ? 52 : (M == 2 ? 31 : 63 / M);
	mp.maxq = (double) ((1ULL << mp.bits) - 1);

	/*
	 * A sample of the host rows (every n / kSample-th): per box dimension its
	 * values sorted; the spread of a dimension is its interquartile range in
	 * the sample, then its extent (so that outliers do not choose it).
	 */
	const int32_t ns = std::min<int32_t>(n, kSample);
	std::vector<double> sample((size_t) E * ns);
	std::vector<double> knots((size_t) kMortonDims * kKnots, 0.0);

	for (int32_t j = 0; j < ns; j++)
	{
		const int64_t r = (int64_t) j * n / ns;

		for (int k = 0; k < E; k++)
			sample[(size_t) k * ns + j] = w.dtype == GC_F64 ?
				((const double *) w.hx)[(size_t) r * w.d + k] :
				(double) ((const float *) w.hx)[(size_t) r * w.d + k];
	}
	{
		double		iqr[kMaxBoxDims],
					span[kMaxBoxDims];
		bool		taken[kMaxBoxDims] = {false};

		for (int k = 0; k < E; k++)
		{
			double	   *v = sample.data() + (size_t) k * ns;

			std::sort(v, v + ns);
			iqr[k] = v[(3 * (int64_t) ns) / 4] - v[ns / 4];
			span[k] = ord_value(h_ext[kMaxBoxDims + k]) - ord_value(h_ext[k]);
			if (!(span[k] >= 0))
				span[k] = 0;
		}
		for (int m = 0; m < M; m++)
		{
			int			best = -1;

			for (int k = 0; k < E; k++)
				if (!taken[k] &&
					(best < 0 || iqr[k] > iqr[best] || (iqr[k] == iqr[best] && span[k] > span[best])))
					best = k;
			taken[best] = true;
		}
		for (int k = 0, m = 0; k < E; k++)
			if (taken[k])
				mp.dim[m++] = k;
	}
	/* The knots: the true minimum, kKnots - 2 sample quantiles, the true maximum; strictly increasing. */
	for (int m = 0; m < M; m++)
	{
		const int	k = mp.dim[m];
		const double *v = sample.data() + (size_t) k * ns;
		double	   *kn = knots.data() + (size_t) m * kKnots;
		int			c = 0;
		auto		add = [&](double t) {
			if (c == 0 || t > kn[c - 1])
				kn[c++] = t;
		};

		add(ord_value(h_ext[k]));
		for (int q = 0; q < kKnots - 2; q++)
			add(v[(int64_t) q * (ns - 1) / (kKnots - 3)]);
		add(ord_value(h_ext[kMaxBoxDims + k]));
		mp.nk[m] = c;
	}

	DeviceBuffer<double> knots_d(knots.size(), "the Morton map");

	CUDA_TRY(cudaMemcpy(knots_d.get(), knots.data(), knots_d.bytes(), cudaMemcpyHostToDevice));
	mp.knots = knots_d.get();
	if (w.debug)
	{
		fprintf(stderr, "gpuclust hdbscan: Morton code on dimensions");
		for (int m = 0; m < M; m++)
			fprintf(stderr, " %d", mp.dim[m]);
		fprintf(stderr, " of %d, %d bits each\n", w.d, mp.bits);
	}

	/* Codes, sorted stably with the row indices. */
	{
		DeviceBuffer<unsigned long long> code_a(n, "the Morton codes"),
					code_b(n, "the Morton codes");
		DeviceBuffer<int32_t> idx_a(n, "the sort of the rows"),
					idx_b(n, "the sort of the rows");

		by_type(w.dtype, [&](auto tv) {
			using T = decltype(tv);

			morton_kernel<T><<<blocks_for(n, 256), 256>>>(w.x<T>().get(), n, w.d, mp,
														   code_a.get(), idx_a.get());
			CHECK_LAUNCH("morton_kernel");
		});

		cub::DoubleBuffer<unsigned long long> keys(code_a.get(), code_b.get());
		cub::DoubleBuffer<int32_t> vals(idx_a.get(), idx_b.get());
		size_t		tmp_bytes = 0;

		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, keys, vals, n, 0, 64));
		{
			DeviceBuffer<unsigned char> tmp(tmp_bytes, "the sort of the Morton codes");

			CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, keys, vals, n, 0, 64));
		}
		w.call.check_cancel();

		/* The rows in sorted order; the caller's copy is no longer needed. */
		w.perm.reset(n, "the order of the rows");
		w.inv.reset(n, "the order of the rows");
		CUDA_TRY(cudaMemcpy(w.perm.get(), vals.Current(), (size_t) n * sizeof(int32_t),
							cudaMemcpyDeviceToDevice));
		by_type(w.dtype, [&](auto tv) {
			using T = decltype(tv);

			w.xs<T>().reset((size_t) n * w.d, "the sorted rows");
			gather_kernel<T><<<blocks_for(n, 256), 256>>>(w.x<T>().get(), w.perm.get(), n, w.d,
														  w.xs<T>().get(), w.inv.get());
			CHECK_LAUNCH("gather_kernel");
			CUDA_TRY(cudaDeviceSynchronize());
			w.x<T>().release();
		});

		/* The radix tree. */
		w.left.reset(n - 1, "the hierarchy");
		w.right.reset(n - 1, "the hierarchy");
		w.parent_int.reset(n - 1, "the hierarchy");
		w.parent_leaf.reset(n, "the hierarchy");
		w.span.reset(n - 1, "the hierarchy");
		w.flag.reset(n - 1, "the hierarchy");
		CUDA_TRY(cudaMemset(w.parent_int.get(), 0xff, w.parent_int.bytes()));
		karras_kernel<<<blocks_for(n - 1, 256), 256>>>(keys.Current(), n, w.left.get(),
														w.right.get(), w.parent_int.get(),
														w.parent_leaf.get(), w.span.get());
		CHECK_LAUNCH("karras_kernel");
		CUDA_TRY(cudaDeviceSynchronize());
	}
	w.call.check_cancel();

	/* Boxes and lowest rows, bottom up. */
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		w.box<T>().reset((size_t) (n - 1) * 2 * w.B, "the boxes of the hierarchy");
	});
	w.minrow.reset(n - 1, "the hierarchy");
	w.mincore.reset(n - 1, "the hierarchy");
	w.ncomp.reset(n - 1, "the hierarchy");
	climb<kUpBox>(w, nullptr);
	CUDA_TRY(cudaDeviceSynchronize());
	if (w.debug)
		fprintf(stderr, "gpuclust hdbscan: the rows' hierarchy built, %.3f ms\n", sw.ms());
	w.call.check_cancel();
}

void fill_mincore(Workspace &w)
{
	climb<kUpCore>(w, nullptr);
}

void fill_ncomp(Workspace &w, const int32_t *comp /* [n] */)
{
	climb<kUpComp>(w, comp);
}

} // namespace hdbscan
} // namespace gc
