/*
 * pairs.cu
 *    The GPU pair engine (pairs.cuh): the operands and their norms on the
 *    device, the screen's precision, the tile size and each tile's product
 *    through cuBLAS.
 *
 * The operands are the rows centred and scaled as common/pairs.h says
 * (gc_pair_centre, from the host rows), in float for the TF32 and FP32
 * screens and in double for the FP64 one.  TF32 (cublasGemmEx with
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

#include <algorithm>
#include <vector>

namespace gc {
namespace pairs {
namespace {

constexpr int32_t kTileMax = 16384;
constexpr int32_t kTileMin = 1024;

/* op[i, :] = (x[i, :] - mu) * s rounded to O, n2[i] = its squared norm in double, nx[i] its norm. */
template <typename T, typename O>
__global__ void operands_kernel(const T *x, /* [n, d] */ int32_t n, int32_t d,
								const double *mu, /* [d] */ double s,
								O *op, /* [n, d] */ double *n2, /* [n] */ double *nx /* [n] */)
{
	int32_t		i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	double		s2 = 0.0;

	for (int32_t k = 0; k < d; k++)
	{
		double		y = __dmul_rn(__dsub_rn((double) x[(size_t) i * d + k], mu[k]), s);
		O			o = (O) y;

		op[(size_t) i * d + k] = o;
		s2 = __dadd_rn(s2, __dmul_rn((double) o, (double) o));
	}
	/* a row whose operands overflowed takes the canonical path for all its pairs */
	if (!isfinite(s2))
		s2 = (double) INFINITY;
	n2[i] = s2;
	nx[i] = sqrt(s2);
}

} // namespace

int64_t Engine::bytes_estimate(int32_t n, int32_t d)
{
	/* operands (double at most), norms, the smallest tile, the counter */
	return (int64_t) n * d * 8 + (int64_t) n * 16 + (int64_t) kTileMin * kTileMin * 8 + 64;
}

Engine::Engine(const Call &call, const void *hx, const void *dx, gc_dtype dtype, int32_t n, int32_t d,
			   double t)
	: call_(call), dx_(dx), dtype_(dtype), n_(n), d_(d), t_(t)
{
	std::vector<double> mu((size_t) d), col(GC_PAIR_SAMPLE);
	double		s = 1.0,
				s_typ = 0.0;
	int			dev = 0,
				major = 0;

	gc_pair_centre(hx, dtype, n, d, mu.data(), &s, &s_typ, col.data());
	CUDA_TRY(cudaGetDevice(&dev));
	CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	if (call.tuning.pair_screen > 0)
		prec_ = (gc_pair_precision) (call.tuning.pair_screen - 1);
	else if (major >= 8)
		prec_ = gc_pair_choose(GC_PAIR_TF32, d, s, t, s_typ);
	else
		prec_ = gc_pair_choose(GC_PAIR_FP32, d, s, t, s_typ);
	bound_ = gc_pair_bound_make(prec_, d, s, t, call.tuning.pair_margin);
	s2inv_ = 1.0 / (s * s);

	DeviceBuffer<double> dmu((size_t) d, "the pair engine's centre");

	CUDA_TRY(cudaMemcpy(dmu.get(), mu.data(), sizeof(double) * d, cudaMemcpyHostToDevice));
	n2_.reset((size_t) n, "the pair engine's norms");
	nx_.reset((size_t) n, "the pair engine's norms");
	exact_.reset(1, "the pair engine's counter");
	CUDA_TRY(cudaMemset(exact_.get(), 0, sizeof(unsigned long long)));

	const unsigned grid = (unsigned) ((n + 255) / 256);
	auto		prep = [&](auto tv) {
		using T = decltype(tv);

		if (prec_ == GC_PAIR_FP64)
		{
			opd_.reset((size_t) n * d, "the pair engine's operands");
			operands_kernel<T, double><<<grid, 256>>>((const T *) dx, n, d, dmu.get(), s, opd_.get(),
													  n2_.get(), nx_.get());
		}
		else
		{
			opf_.reset((size_t) n * d, "the pair engine's operands");
			operands_kernel<T, float><<<grid, 256>>>((const T *) dx, n, d, dmu.get(), s, opf_.get(),
													 n2_.get(), nx_.get());
		}
		CHECK_LAUNCH("operands_kernel");
	};

	if (dtype == GC_F64)
		prep(0.0);
	else
		prep(0.0f);

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

	km::Cublas	cb;

	cb.open();
	blas_ = (void *) cb.h;
	for (cudaEvent_t &e : ev_)
		CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	if (const char *e = getenv("GPUCLUST_TEST_SLICE_PAIR_FEATURES"))
	{
		const double v = atof(e);

		if (v > 0 && v < slice_budget_)
			slice_budget_ = v;
	}
	call.timing->path = GC_PATH_PAIRS;
	call.timing->pair_screen = prec_;
	if (call.tuning.debug)
		fprintf(stderr, "gpuclust pairs: n=%d d=%d screen=%s tile=%d scale=%g s_typ=%g band(s_typ)=%g t=%g\n",
				n, d, gc_pair_precision_names[prec_], tile_, s, s_typ, gc_pair_margin(&bound_, s_typ),
				t * s * s);
}

Engine::~Engine()
{
	for (cudaEvent_t e : ev_)
		if (e)
			cudaEventDestroy(e);
}

Tile Engine::tile(int32_t i0, int32_t j0) const
{
	Tile		tl;

	tl.x = dx_;
	tl.n2 = n2_.get();
	tl.nx = nx_.get();
	tl.pf = prec_ == GC_PAIR_FP64 ? nullptr : pf_.get();
	tl.pd = prec_ == GC_PAIR_FP64 ? pd_.get() : nullptr;
	tl.bound = bound_;
	tl.t = t_;
	tl.s2inv = s2inv_;
	tl.n = n_;
	tl.d = d_;
	tl.i0 = i0;
	tl.bi = std::min(tile_, n_ - i0);
	tl.j0 = j0;
	tl.bj = std::min(tile_, n_ - j0);
	tl.ld = tl.bi;
	tl.diag = i0 == j0;
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
