/*
 * pairs.cu
 *    The GPU pair engine (pairs.cuh): the operands and their norms on the
 *    device, the screen's precision, the tile size and each tile's product
 *    through cuBLAS.
 *
 * The rows are put in the engine's order: each takes the nearest of K
 * centres (rows of the data at an even stride, K = n / 256 up to 256; the
 * nearest by a TF32 product of the globally centred rows, which only
 * chooses, never decides), a stable CUB sort groups them by centre, and a
 * row's operand is its scaled offset from its centre (common/pairs.h,
 * gc_pair_pbound), in float for the TF32 and FP32 screens and in double for
 * the FP64 one; its products with every centre (U, W) are summed in double
 * by a kernel of ours, a short loop per centre that no library call fits
 * better.  TF32 (cublasGemmEx with
 * CUBLAS_COMPUTE_32F_FAST_TF32) is the default where the device has tensor
 * cores for it (compute capability 8.0 on) and its band at a typical pair
 * is at most a sixteenth of the threshold (gc_pair_choose); otherwise the
 * FP64 product (cublasDgemm; tensor cores on the A100, H100 and H200).  The
 * FP32 screen (CUBLAS_COMPUTE_32F_PEDANTIC) serves tests.  The tile is
 * 16,384 rows square where a quarter of the free device memory holds its
 * products, else smaller, at least 1,024.
 */
#include "kmeans.cuh"
#include "pairs.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <vector>

namespace gc {
namespace pairs {
namespace {

constexpr int32_t kTileMax = 16384;
constexpr int32_t kTileMin = 1024;
constexpr int32_t kMaxParts = 256;

/* g[i, :] = (x[i, :] - mu) * s in float: the globally centred rows that choose each row's centre. */
template <typename T>
__global__ void global_kernel(const T *x, /* [n, d] */ int32_t n, int32_t d, const double *mu, /* [d] */
							  double s, float *g /* [n, d] */, float *g2 /* [n] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float		acc = 0.f;

	for (int32_t k = 0; k < d; k++)
	{
		float		v = (float) (((double) x[(size_t) i * d + k] - mu[k]) * s);

		g[(size_t) i * d + k] = v;
		acc += v * v;
	}
	g2[i] = acc;
}

/* part[i]: the centre nearest row i by the products gc [n, K] (column-major) and the norms. */
__global__ void nearest_kernel(int32_t n, int32_t K, const float *gc, const float *g2, /* [n] */
							   const int32_t *crow, /* [K] */ int32_t *part, int32_t *iota)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	int32_t		best = 0;
	float		bv = INFINITY;

	for (int32_t q = 0; q < K; q++)
	{
		float		v = g2[crow[q]] - 2.f * gc[(size_t) i + (size_t) q * n];

		if (v < bv)
		{
			bv = v;
			best = q;
		}
	}
	part[i] = best;
	iota[i] = i;
}

/* xs[p, :] = x[row[p], :]; pos[row[p]] = p. */
template <typename T>
__global__ void gather_kernel(const T *x, int32_t n, int32_t d, const int32_t *row, T *xs, int32_t *pos)
{
	int32_t		p = blockIdx.x;

	if (p >= n)
		return;
	int32_t		r = row[p];

	for (int32_t k = threadIdx.x; k < d; k += blockDim.x)
		xs[(size_t) p * d + k] = x[(size_t) r * d + k];
	if (threadIdx.x == 0)
		pos[r] = p;
}

/* The norm of s xs[p] - C[part[p]] before rounding: the operands' typical size, for the choice of screen. */
template <typename T>
__global__ void offset_kernel(const T *xs, int32_t n, int32_t d, const int32_t *part, const double *C, /* [K, d] */
							  double s, double *nx /* [n] */)
{
	int32_t		p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= n)
		return;
	const double *c = C + (size_t) part[p] * d;
	double		acc = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		double		v = __dsub_rn(__dmul_rn((double) xs[(size_t) p * d + k], s), c[k]);

		acc = __dadd_rn(acc, __dmul_rn(v, v));
	}
	nx[p] = sqrt(acc);
}

/*
 * op[p, :] = fl(s xs[p, :] - C[part[p], :]) of type O, n2 and nx its squared
 * norm and norm (double, from the rounded values); U[p, q] = op[p] . C[q]
 * (double) for every centre q, W[p] = U[p, part[p]].  A block per row,
 * a thread per centre.
 */
template <typename T, typename O>
__global__ void operands_kernel(const T *xs, int32_t n, int32_t d, const int32_t *part,
								const double *C, /* [K, d] */ const double *CT, /* [d, K] */ int32_t K,
								double s, O *op, double *n2, double *nx, double *U, double *W)
{
	int32_t		p = blockIdx.x;
	int32_t		q = threadIdx.x;
	const int32_t P = part[p];
	const double *c = C + (size_t) P * d;
	double		u = 0.0,
				s2 = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		O			o = (O) __dsub_rn(__dmul_rn((double) xs[(size_t) p * d + k], s), c[k]);

		if (q == 0)
		{
			op[(size_t) p * d + k] = o;
			s2 = __dadd_rn(s2, __dmul_rn((double) o, (double) o));
		}
		if (q < K)
			u = __dadd_rn(u, __dmul_rn((double) o, CT[(size_t) k * K + q]));
	}
	if (q < K)
		U[(size_t) p * K + q] = u;
	if (q == P)
		W[p] = u;
	if (q == 0)
	{
		/* a row whose operands overflowed takes the canonical path for all its pairs */
		if (!isfinite(s2))
			s2 = (double) INFINITY;
		n2[p] = s2;
		nx[p] = sqrt(s2);
	}
}

} // namespace

int64_t Engine::bytes_estimate(int32_t n, int32_t d)
{
	/* rows by position, operands (double at most), U [n, K], the per-row arrays, the smallest tile */
	return (int64_t) n * d * 16 + (int64_t) n * (8 * kMaxParts + 48) + (int64_t) kTileMin * kTileMin * 8 +
		(4 << 20);
}

Engine::Engine(const Call &call, const void *hx, const void *dx, gc_dtype dtype, int32_t n, int32_t d,
			   double t)
	: call_(call), dtype_(dtype), n_(n), d_(d), t_(t)
{
	std::vector<double> mu((size_t) d), col(GC_PAIR_SAMPLE);
	double		s = 1.0,
				s_typ = 0.0;
	int			dev = 0,
				major = 0;
	const unsigned grid = (unsigned) ((n + 255) / 256);

	gc_pair_centre(hx, dtype, n, d, mu.data(), &s, &s_typ, col.data());
	CUDA_TRY(cudaGetDevice(&dev));
	CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));

	km::Cublas	cb;

	cb.open();
	blas_ = (void *) cb.h;

	/* the centres: K rows at an even stride, scaled (C = s c, exact) */
	K_ = std::max<int32_t>(1, std::min<int32_t>(kMaxParts, n / 256));
	std::vector<int32_t> crow((size_t) K_);
	std::vector<double> C((size_t) K_ * d), CT((size_t) d * K_), D((size_t) K_ * K_), sD((size_t) K_ * K_),
				cn((size_t) K_);

	for (int32_t q = 0; q < K_; q++)
	{
		crow[q] = (int32_t) (((int64_t) q * n) / K_);
		for (int32_t k = 0; k < d; k++)
		{
			C[(size_t) q * d + k] = gc_pair_elem(hx, dtype, d, crow[q], k) * s;
			CT[(size_t) k * K_ + q] = C[(size_t) q * d + k];
		}
	}
	for (int32_t a = 0; a < K_; a++)
	{
		double		an = 0.0;

		for (int32_t k = 0; k < d; k++)
			an += C[(size_t) a * d + k] * C[(size_t) a * d + k];
		cn[a] = sqrt(an) * (1 + 0x1p-50);
		for (int32_t b = 0; b < K_; b++)
		{
			double		acc = 0.0;

			for (int32_t k = 0; k < d; k++)
			{
				double		v = C[(size_t) a * d + k] - C[(size_t) b * d + k];

				acc += v * v;
			}
			D[(size_t) a * K_ + b] = acc;
			sD[(size_t) a * K_ + b] = sqrt(acc) * (1 + 0x1p-50);
		}
	}

	DeviceBuffer<double> dmu((size_t) d, "the pair engine's centre"),
				dC((size_t) K_ * d, "the pair engine's centres"),
				dCT((size_t) K_ * d, "the pair engine's centres");
	DeviceBuffer<int32_t> dcrow((size_t) K_, "the pair engine's centres");

	CUDA_TRY(cudaMemcpy(dmu.get(), mu.data(), sizeof(double) * d, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemcpy(dC.get(), C.data(), sizeof(double) * K_ * d, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemcpy(dCT.get(), CT.data(), sizeof(double) * K_ * d, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemcpy(dcrow.get(), crow.data(), sizeof(int32_t) * K_, cudaMemcpyHostToDevice));
	D_.reset((size_t) K_ * K_, "the pair engine's centres");
	sD_.reset((size_t) K_ * K_, "the pair engine's centres");
	cn_.reset((size_t) K_, "the pair engine's centres");
	CUDA_TRY(cudaMemcpy(D_.get(), D.data(), sizeof(double) * K_ * K_, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemcpy(sD_.get(), sD.data(), sizeof(double) * K_ * K_, cudaMemcpyHostToDevice));
	CUDA_TRY(cudaMemcpy(cn_.get(), cn.data(), sizeof(double) * K_, cudaMemcpyHostToDevice));

	/* each row's part: the nearest centre by a TF32 product (a choice, never a decision) */
	part_.reset((size_t) n, "the pair engine's parts");
	row_.reset((size_t) n, "the pair engine's order");
	pos_.reset((size_t) n, "the pair engine's order");
	{
		DeviceBuffer<float> g((size_t) n * d, "the pair engine's parts"),
					g2((size_t) n, "the pair engine's parts"),
					gc((size_t) n * K_, "the pair engine's parts"),
					gcen((size_t) K_ * d, "the pair engine's parts");
		DeviceBuffer<int32_t> iota((size_t) n, "the pair engine's order"),
					keys((size_t) n, "the pair engine's order");
		const float one = 1.f,
					zero = 0.f;

		if (dtype == GC_F64)
			global_kernel<double><<<grid, 256>>>((const double *) dx, n, d, dmu.get(), s, g.get(), g2.get());
		else
			global_kernel<float><<<grid, 256>>>((const float *) dx, n, d, dmu.get(), s, g.get(), g2.get());
		CHECK_LAUNCH("global_kernel");
		for (int32_t q = 0; q < K_; q++)
			CUDA_TRY(cudaMemcpyAsync(gcen.get() + (size_t) q * d, g.get() + (size_t) crow[q] * d,
									 sizeof(float) * d, cudaMemcpyDeviceToDevice));
		CUBLAS_TRY(km::cublas.gemm_ex((cublasHandle_t) blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, K_, d, &one, g.get(),
									  CUDA_R_32F, d, gcen.get(), CUDA_R_32F, d, &zero, gc.get(), CUDA_R_32F, n,
									  major >= 8 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
									  CUBLAS_GEMM_DEFAULT));
		nearest_kernel<<<grid, 256>>>(n, K_, gc.get(), g2.get(), dcrow.get(), keys.get(), iota.get());
		CHECK_LAUNCH("nearest_kernel");

		size_t		bytes = 0;
		int			bits = 1;

		while ((1 << bits) < K_)
			bits++;
		CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys.get(), part_.get(), iota.get(), row_.get(),
												 n, 0, bits));
		DeviceBuffer<char> tmp(std::max<size_t>(bytes, 1), "the pair engine's order");

		CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, keys.get(), part_.get(), iota.get(), row_.get(),
												 n, 0, bits));
		CHECK_LAUNCH("DeviceRadixSort");
	}

	/*
	 * The rows by position, the operands' typical size (twice the median
	 * offset: rows far from every centre, noise, are the exception), the
	 * screen.
	 */
	n2_.reset((size_t) n, "the pair engine's norms");
	nx_.reset((size_t) n, "the pair engine's norms");
	auto		prep = [&](auto tv) {
		using T = decltype(tv);
		DeviceBuffer<T> &xs = xs_of<T>();

		xs.reset((size_t) n * d, "the rows in the pair engine's order");
		gather_kernel<T><<<n, 128>>>((const T *) dx, n, d, row_.get(), xs.get(), pos_.get());
		CHECK_LAUNCH("gather_kernel");
		offset_kernel<T><<<grid, 256>>>(xs.get(), n, d, part_.get(), dC.get(), s, nx_.get());
		CHECK_LAUNCH("offset_kernel");
	};

	if (dtype == GC_F64)
		prep(0.0);
	else
		prep(0.0f);
	{
		std::vector<double> nx((size_t) n);
		int64_t		step = n > GC_PAIR_SAMPLE ? n / GC_PAIR_SAMPLE : 1,
					ns = 0;

		CUDA_TRY(cudaMemcpy(nx.data(), nx_.get(), sizeof(double) * n, cudaMemcpyDeviceToHost));
		for (int64_t i = 0; i < n && ns < GC_PAIR_SAMPLE; i += step)
			col[ns++] = nx[i];
		s_typ = 2.0 * gc_pair_select(col.data(), ns, ns / 2);
	}
	if (call.tuning.pair_screen > 0)
		prec_ = (gc_pair_precision) (call.tuning.pair_screen - 1);
	else
	{
		gc_pair_precision fast = major >= 8 ? GC_PAIR_TF32 : GC_PAIR_FP32;
		gc_pair_pbound b = gc_pair_pbound_make(fast, d, s, t, 1.0);

		prec_ = b.screen && gc_pair_pmargin(&b, s_typ / 2, s_typ / 2, 0.0, 0.0, 0.0) * 16.0 <= t * s * s
			? fast : GC_PAIR_FP64;
	}
	bound_ = gc_pair_pbound_make(prec_, d, s, t, call.tuning.pair_margin);

	/* the operands and their products with the centres */
	U_.reset((size_t) n * K_, "the pair engine's centre products");
	W_.reset((size_t) n, "the pair engine's centre products");
	auto		ops = [&](auto tv) {
		using T = decltype(tv);
		const T    *xs = (const T *) (dtype == GC_F64 ? (const void *) xs_f64_.get() : (const void *) xs_f32_.get());
		const int	threads = std::max<int32_t>(32, ((K_ + 31) / 32) * 32);

		if (prec_ == GC_PAIR_FP64)
		{
			opd_.reset((size_t) n * d, "the pair engine's operands");
			operands_kernel<T, double><<<n, threads>>>(xs, n, d, part_.get(), dC.get(), dCT.get(), K_, s,
													   opd_.get(), n2_.get(), nx_.get(), U_.get(), W_.get());
		}
		else
		{
			opf_.reset((size_t) n * d, "the pair engine's operands");
			operands_kernel<T, float><<<n, threads>>>(xs, n, d, part_.get(), dC.get(), dCT.get(), K_, s,
													  opf_.get(), n2_.get(), nx_.get(), U_.get(), W_.get());
		}
		CHECK_LAUNCH("operands_kernel");
	};

	if (dtype == GC_F64)
		ops(0.0);
	else
		ops(0.0f);
	exact_.reset(1, "the pair engine's counter");
	CUDA_TRY(cudaMemset(exact_.get(), 0, sizeof(unsigned long long)));

	/* the tile: as large as a quarter of the free memory allows */
	size_t		free_b = 0,
				total_b = 0;
	const size_t esize = prec_ == GC_PAIR_FP64 ? sizeof(double) : sizeof(float);

	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
	tile_ = std::min<int32_t>(kTileMax, std::max<int32_t>(n, 1));
	while (tile_ > kTileMin && (size_t) tile_ * tile_ * esize > free_b / 4)
		tile_ /= 2;
	if (prec_ == GC_PAIR_FP64)
		pd_.reset((size_t) tile_ * tile_, "the pair engine's tile");
	else
		pf_.reset((size_t) tile_ * tile_, "the pair engine's tile");

	call.timing->path = GC_PATH_PAIRS;
	call.timing->pair_screen = prec_;
	if (call.tuning.debug)
		fprintf(stderr, "gpuclust pairs: n=%d d=%d parts=%d screen=%s tile=%d scale=%g s_typ=%g t=%g\n", n, d, K_,
				gc_pair_precision_names[prec_], tile_, s, s_typ, t * s * s);
}

Tile Engine::tile(int32_t i0, int32_t j0) const
{
	Tile		tl;

	tl.x = dtype_ == GC_F64 ? (const void *) xs_f64_.get() : (const void *) xs_f32_.get();
	tl.n2 = n2_.get();
	tl.nx = nx_.get();
	tl.part = part_.get();
	tl.U = U_.get();
	tl.W = W_.get();
	tl.D = D_.get();
	tl.sD = sD_.get();
	tl.cn = cn_.get();
	tl.K = K_;
	tl.pf = prec_ == GC_PAIR_FP64 ? nullptr : pf_.get();
	tl.pd = prec_ == GC_PAIR_FP64 ? pd_.get() : nullptr;
	tl.bound = bound_;
	tl.t = t_;
	tl.n = n_;
	tl.d = d_;
	tl.i0 = i0;
	tl.bi = std::min(tile_, n_ - i0);
	tl.j0 = j0;
	tl.bj = std::min(tile_, n_ - j0);
	tl.exact = exact_.get();
	return tl;
}

/* The tile's products: rows i0.. (as the first operand, transposed) times rows j0.., column-major. */
void Engine::product(const Tile &tl)
{
	cublasHandle_t h = (cublasHandle_t) blas_;

	if (prec_ == GC_PAIR_FP64)
	{
		const double one = 1.0,
					zero = 0.0;

		CUBLAS_TRY(km::cublas.dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, tl.bi, tl.bj, d_, &one,
									opd_.get() + (size_t) tl.i0 * d_, d_,
									opd_.get() + (size_t) tl.j0 * d_, d_, &zero, pd_.get(), tl.bi));
	}
	else
	{
		const float one = 1.0f,
					zero = 0.0f;

		CUBLAS_TRY(km::cublas.gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, tl.bi, tl.bj, d_, &one,
									  opf_.get() + (size_t) tl.i0 * d_, CUDA_R_32F, d_,
									  opf_.get() + (size_t) tl.j0 * d_, CUDA_R_32F, d_, &zero,
									  pf_.get(), CUDA_R_32F, tl.bi,
									  prec_ == GC_PAIR_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
									  : CUBLAS_COMPUTE_32F_PEDANTIC,
									  CUBLAS_GEMM_DEFAULT));
	}
}

} // namespace pairs
} // namespace gc
