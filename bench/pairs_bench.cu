/*
 * pairs_bench.cu
 *    DBSCAN and density peaks on the pair engine (common/pairs.h), GPU and
 *    CPU, on embedding-shaped data, beside the anchor the embeddings issue
 *    names: one pass of all n^2 dot products through cuBLAS in TF32 (and in
 *    FP32), on the same rows, in the same run, in tiles of the engine's
 *    size.  The GPU back end is gpuclust_cuda.so, opened with dlopen as the
 *    extension opens it; the CPU back end is linked in.
 *
 *   .bench/pairs_bench N D [--cosine] [--f64] [--k K] [--min-pts M] [--reps R]
 *                      [--threads T] [--no-cpu] [--algo dbscan|dpeaks|both]
 *                      [--path auto|pairs|index] [--eps E] [--json FILE] [--lib PATH]
 *                      [--dump FILE]
 *
 * The data: 20 Gaussian blobs of sd 1 in [0, 100]^D with 10 % uniform
 * noise (test/data/gc_testdata.h), for --cosine centred on the box and
 * scaled to unit rows; --f64 the same values as doubles.  eps, unless
 * given: the median distance to the K-th nearest row (K = 10) over 256
 * sampled rows, the value a k-distance plot suggests.  Density peaks: 50
 * clusters, dc from the default neighbour rate.
 *
 * Prints one table row per algorithm: GPU best of R (compute and the
 * phases), the screen, the pairs sent to the exact path, the CPU time with
 * T threads, whether the answers agree, and the anchors with the ratio
 * GPU / TF32 anchor.  --json appends the same as one JSON object per line;
 * --dump writes the float rows (N x D, raw) for bench/pairs_sklearn.py.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gc_backends.h"
#include "dpeaks_common.h"
#include "gc_testdata.h"
#include "metric.h"
#include "pairs_call.h"
#include "pairs.h"

#define CK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); exit(1); } \
	} while (0)
#define CB(call) \
	do { \
		cublasStatus_t s_ = (call); \
		if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s: status %d\n", #call, (int) s_); exit(1); } \
	} while (0)

/* dist2 of sampled query q to every row, in float (for the choice of eps only). */
__global__ void knn_kernel(const float *x, int n, int d, const int *q, int nq, float *out)
{
	int			s = blockIdx.y;
	int			j = blockIdx.x * blockDim.x + threadIdx.x;

	if (s >= nq || j >= n)
		return;
	const float *a = x + (size_t) q[s] * d;
	const float *b = x + (size_t) j * d;
	float		acc = 0.f;

	for (int k = 0; k < d; k++)
	{
		float		u = a[k] - b[k];

		acc += u * u;
	}
	out[(size_t) s * n + j] = acc;
}

static double
choose_eps(const float *hx, int n, int d, int k, bool cosine)
{
	const int	nq = 256;
	std::vector<int> q(nq);
	std::vector<float> out((size_t) nq * n);
	std::vector<double> kd;
	float	   *dx,
			   *dout;
	int		   *dq;

	for (int s = 0; s < nq; s++)
		q[s] = (int) (((int64_t) s * 7919 + 13) % n);
	CK(cudaMalloc(&dx, sizeof(float) * (size_t) n * d));
	CK(cudaMalloc(&dout, sizeof(float) * (size_t) nq * n));
	CK(cudaMalloc(&dq, sizeof(int) * nq));
	CK(cudaMemcpy(dx, hx, sizeof(float) * (size_t) n * d, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dq, q.data(), sizeof(int) * nq, cudaMemcpyHostToDevice));
	knn_kernel<<<dim3((n + 255) / 256, nq), 256>>>(dx, n, d, dq, nq, dout);
	CK(cudaMemcpy(out.data(), dout, sizeof(float) * (size_t) nq * n, cudaMemcpyDeviceToHost));
	cudaFree(dx);
	cudaFree(dout);
	cudaFree(dq);
	for (int s = 0; s < nq; s++)
	{
		float	   *r = out.data() + (size_t) s * n;

		std::nth_element(r, r + k, r + n);	/* r[0] is the row itself */
		kd.push_back(cosine ? r[k] * 0.5 : sqrt((double) r[k]));
	}
	std::nth_element(kd.begin(), kd.begin() + nq / 2, kd.end());
	return kd[nq / 2];
}

/* All n^2 dot products through cuBLAS in tiles of tile x tile; milliseconds of the pass. */
static double
anchor_ms(const float *hx, int n, int d, bool tf32)
{
	const int	tile = std::min(n, 16384);
	float	   *dx,
			   *dc;
	cublasHandle_t h;
	cudaEvent_t e0,
				e1;
	float		ms = 0.f;
	const float one = 1.f,
				zero = 0.f;

	CK(cudaMalloc(&dx, sizeof(float) * (size_t) n * d));
	CK(cudaMalloc(&dc, sizeof(float) * (size_t) tile * tile));
	CK(cudaMemcpy(dx, hx, sizeof(float) * (size_t) n * d, cudaMemcpyHostToDevice));
	CB(cublasCreate(&h));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int rep = 0; rep < 2; rep++)
	{
		CK(cudaEventRecord(e0));
		for (int i0 = 0; i0 < n; i0 += tile)
			for (int j0 = 0; j0 < n; j0 += tile)
				CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, std::min(tile, n - i0), std::min(tile, n - j0), d,
								&one, dx + (size_t) i0 * d, CUDA_R_32F, d, dx + (size_t) j0 * d, CUDA_R_32F, d,
								&zero, dc, CUDA_R_32F, std::min(tile, n - i0),
								tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC,
								CUBLAS_GEMM_DEFAULT));
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
	}
	cublasDestroy(h);
	cudaFree(dx);
	cudaFree(dc);
	return ms;
}

struct Run
{
	double		ms = 1e300;
	gc_timing	t = {};
	std::vector<int32_t> a;		/* cluster labels */
	std::vector<uint8_t> b;		/* core or centre flags */
	std::vector<double> rho, delta;
	bool		ok = false;
	char		err[512] = "";
};

static void
run_algo(const gc_backend_api *api, const char *algo, const void *x, gc_dtype t, int n, int d,
		 gc_metric m, double eps, int min_pts, int threads, int path, Run &r)
{
	gc_tuning	tu = gc_tuning_defaults();
	gc_exec		e;
	double		t0;
	gc_status	st;

	memset(&e, 0, sizeof(e));
	e.struct_size = sizeof(e);
	tu.cpu_threads = threads;
	tu.pair_path = path;
	e.tuning = &tu;
	e.timing = &r.t;
	r.a.resize(n);
	r.b.resize(n);
	if (strcmp(algo, "dbscan") != 0)
	{
		r.rho.resize(n);
		r.delta.resize(n);
	}
	t0 = gc_h_now_ms();
	st = pairs_call(api, &e, algo, x, t, n, d, m, eps, min_pts, r.a.data(), r.b.data(), r.rho.data(),
					 r.delta.data());
	r.ms = gc_h_now_ms() - t0;
	r.ok = st == GC_OK;
	if (!r.ok)
		gc_h_error_text(api, r.err, sizeof(r.err));
}

int
main(int argc, char **argv)
{
	pairs_opts	o;
	int			path = 0;
	bool		cpu = true;
	const char *json = NULL,
			   *lib = NULL;
	char		why[512];
	gc_device_info info;

	if (argc < 3)
	{
		fprintf(stderr, "usage: pairs_bench N D [--cosine] [--f64] [--k K] [--min-pts M] [--reps R] "
				"[--threads T] [--no-cpu] [--algo dbscan|dpeaks|both] [--path auto|pairs|index] [--eps E] "
				"[--json FILE] [--lib PATH]\n");
		return 2;
	}
	pairs_opts_init(&o, argv);
	for (int i = 3; i < argc; i++)
	{
		if (pairs_common_arg(&o, argc, argv, &i))
			continue;
		else if (!strcmp(argv[i], "--no-cpu"))
			cpu = false;
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--path") && i + 1 < argc)
		{
			i++;
			path = !strcmp(argv[i], "pairs") ? 1 : !strcmp(argv[i], "index") ? -1 : 0;
		}
		else
		{
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	const int	n = o.n,
				d = o.d,
				k = o.k,
				min_pts = o.min_pts,
				reps = o.reps,
				threads = o.threads;
	const bool	cosine = o.cosine != 0,
				f64 = o.f64 != 0;
	double		eps = o.eps;
	const char *algo = o.algo,
			   *dump = o.dump;
	const gc_backend_api *gpu = gc_h_open_gpu(gc_h_cuda_path(lib), &info, why, sizeof(why));

	if (!gpu)
	{
		fprintf(stderr, "%s\n", why);
		return 1;
	}

	std::vector<float> xf((size_t) n * d);
	gc_td_blob_spec spec = gc_td_blobs_default();

	spec.noise = 0.10;
	gc_td_blobs(xf.data(), n, d, &spec, gc_td_seed("pairs", n, d), NULL);
	if (cosine)
	{
		for (auto &v : xf)
			v -= (float) (spec.box / 2);
		gc_unit_rows(xf.data(), GC_F32, n, d);
	}
	std::vector<double> xd;

	if (f64)
		xd.assign(xf.begin(), xf.end());
	if (eps <= 0)
		eps = choose_eps(xf.data(), n, d, k, cosine);

	if (dump)
	{
		FILE	   *f = fopen(dump, "wb");

		if (!f || fwrite(xf.data(), sizeof(float), xf.size(), f) != xf.size())
		{
			fprintf(stderr, "cannot write %s\n", dump);
			return 1;
		}
		fclose(f);
	}

	const void *x = f64 ? (const void *) xd.data() : (const void *) xf.data();
	gc_dtype	t = f64 ? GC_F64 : GC_F32;
	gc_metric	m = cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
	double		tf32 = anchor_ms(xf.data(), n, d, true);
	double		fp32 = n <= 400000 ? anchor_ms(xf.data(), n, d, false) : -1.0;

	printf("# %s, %lld MiB; n=%d d=%d %s %s eps=%.6g min_pts=%d\n", info.name,
		   (long long) (info.total_memory >> 20), n, d, cosine ? "cosine" : "euclidean",
		   f64 ? "double" : "float", eps, min_pts);
	printf("%-7s %9s %9s %9s %9s %6s %12s %10s %7s %9s %9s %7s\n", "algo", "gpu_ms", "ph0", "ph1", "ph2",
		   "screen", "exact_pairs", "cpu_ms", "agree", "tf32_ms", "fp32_ms", "gpu/tf32");
	for (int a = 0; a < 2; a++)
	{
		const char *name = a == 0 ? "dbscan" : "dpeaks";

		if (strcmp(algo, "both") && strcmp(algo, name))
			continue;
		Run			best,
					c;

		for (int r = 0; r < reps; r++)
		{
			Run			g;

			run_algo(gpu, name, x, t, n, d, m, eps, min_pts, 0, path, g);
			if (!g.ok)
			{
				printf("%s: GPU failed: %s\n", name, g.err);
				return 1;
			}
			if (g.t.compute_ms < best.t.compute_ms || r == 0)
				best = g;
		}
		bool		agree = true;

		if (cpu)
		{
			run_algo(gc_cpu_api(), name, x, t, n, d, m, eps, min_pts, threads, path, c);
			if (!c.ok)
			{
				printf("%s: CPU failed: %s\n", name, c.err);
				return 1;
			}
			agree = c.a == best.a && c.b == best.b && c.rho == best.rho && c.delta == best.delta;
		}
		int			clusters = 0;

		for (int32_t v : best.a)
			clusters = std::max(clusters, v + 1);
		printf("%-7s %9.1f %9.1f %9.1f %9.1f %6s %12lld %10.1f %7s %9.1f %9.1f %7.2f   clusters=%d path=%s\n",
			   name, best.t.compute_ms, best.t.phase_ms[0], best.t.phase_ms[1], best.t.phase_ms[2],
			   best.t.path == GC_PATH_PAIRS ? gc_pair_precision_names[best.t.pair_screen % 3] : "-",
			   (long long) best.t.pair_exact, cpu ? c.ms : -1.0, cpu ? (agree ? "yes" : "NO") : "-", tf32,
			   fp32, best.t.compute_ms / tf32, clusters, best.t.path == GC_PATH_PAIRS ? "pairs" : "index");
		if (json)
		{
			FILE	   *f = fopen(json, "a");

			if (f)
			{
				fprintf(f, "{\"device\": \"%s\", \"algo\": \"%s\", \"n\": %d, \"d\": %d, \"metric\": \"%s\", "
						"\"dtype\": \"%s\", \"eps\": %.9g, \"gpu_compute_ms\": %.3f, \"screen\": \"%s\", "
						"\"exact_pairs\": %lld, \"cpu_ms\": %.3f, \"agree\": %s, \"tf32_anchor_ms\": %.3f, "
						"\"fp32_anchor_ms\": %.3f, \"clusters\": %d}\n",
						info.name, name, n, d, cosine ? "cosine" : "euclidean", f64 ? "double" : "float", eps,
						best.t.compute_ms, gc_pair_precision_names[best.t.pair_screen % 3],
						(long long) best.t.pair_exact, cpu ? c.ms : -1.0, agree ? "true" : "false", tf32, fp32,
						clusters);
				fclose(f);
			}
		}
		if (!agree)
			return 1;
	}
	return 0;
}
