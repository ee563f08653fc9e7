/*
 * kmeans_bench.cu
 *    Timings of gpuclust's GPU k-means without PostgreSQL: loads
 *    gpuclust_cuda.so through its one exported symbol (as the extension
 *    does), runs its kmeans entry on generated data (test/data/gc_testdata.h)
 *    and puts each Lloyd iteration next to cuBLAS GEMMs of the same shape
 *    (TF32, FP32 and FP64), the floor of the distance work.  The checks of the GPU against
 *    the CPU are in test/gpu (gpu_vs_cpu kmeans).
 *
 *      kmeans_bench bench [json]       the benchmark shapes on uniform data
 *                                      in [0, 1)^d (and 1M x 256 on 200
 *                                      separated blobs, 1M x 768 k = 1024 on
 *                                      100 embedding-like blobs, default
 *                                      product only), each next to the TF32,
 *                                      FP32 and FP64 GEMM of its shape, with
 *                                      the rows decided in double, their
 *                                      candidates and the rows through the
 *                                      second product; for d > 32 the three
 *                                      forms of the product: fp32 (TF32,
 *                                      checked; the default), sgemm (FP32,
 *                                      checked; tuning.kmeans_gemm) and tf32
 *                                      (unchecked).  KMEANS_BENCH_TILES=r1,r2,...
 *                                      adds fp32 runs with that many rows per
 *                                      product (tuning.kmeans_tile_rows).
 *                                      json: also one JSON document there.
 *      kmeans_bench gemm [json]        the levels of the checked product on
 *                                      data with many close centroids (1M x
 *                                      256 k = 20000 on 200 blobs, 1M x 768
 *                                      k = 1024 on 100 embedding-like blobs;
 *                                      uniform and line data of the first
 *                                      shape; both blob sets in double
 *                                      precision; gpu_kmeans_assign on the
 *                                      blobs): time per iteration next to the
 *                                      TF32, FP32 and FP64 GEMM of the shape,
 *                                      rows and candidates at each level
 *                                      (KMEANS_BENCH_CASES=blobs,line,...
 *                                      runs those only; noassign in it leaves
 *                                      out the assignments;
 *                                      KMEANS_BENCH_TILES=r1,... adds runs of
 *                                      the blobs with that many rows per
 *                                      product, the DGEMM's half as many;
 *                                      KMEANS_BENCH_NO_DGEMM=1 runs with the
 *                                      FP32 second level)
 *      kmeans_bench hard [json]        the hard case of the checked product:
 *                                      1M x 256 rows around 997 centres on a
 *                                      line (spacing 1, noise 0.01 per
 *                                      coordinate; gc_td_line), k = 20000 and
 *                                      k = 1000, default product, with the
 *                                      rows decided in double and sent to
 *                                      FP32; then the assignment timings
 *      kmeans_bench assign [json]      gc_backend_api.kmeans_assign on
 *                                      10M x 2 k = 100 and 1M x 256 k = 1000
 *                                      (uniform and line data), next to one
 *                                      Lloyd iteration of the same shape
 *      kmeans_bench precision [json]   double against single precision and
 *                                      cosine against Euclidean: 10M x 2
 *                                      k = 100 (20 iterations) and 1M x 256
 *                                      k = 1000 (10 iterations), random
 *                                      initial rows, tol 0, each in f32, f64,
 *                                      f32 cosine and f64 cosine (the rows of
 *                                      cosine scaled to unit length first, as
 *                                      the glue does); the time per iteration
 *                                      and its ratio to f32 Euclidean
 *      kmeans_bench one n d k iters [kmeans++] [f64] [cosine]
 *                                      one GPU run on uniform data (for
 *                                      profilers), random initial rows or
 *                                      k-means++, in single (default) or
 *                                      double precision, Euclidean (default)
 *                                      or cosine
 *
 *    The GPU back end is $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so.
 *    CUDA is needed here only for the SGEMM floor and the device name.
 *    Built by bench/Makefile (nvcc, with the flags of common/flags.mk);
 *    bench/kmeans_bench.sh builds and runs it from the project root.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gc_backends.h"
#include "kmeans_init.h"
#include "metric.h"
#include "gc_testdata.h"

static const gc_backend_api *api;

/* n rows: uniform in [0, 1)^d, (blobs > 0) around that many separated blobs, (blobs < 0) on a line. */
struct Data
{
	int64_t		n;
	int			d;
	std::vector<float> x;
	std::vector<double> x64;			/* the rows when dtype is GC_F64 */
	gc_dtype	dtype = GC_F32;
	gc_metric	metric = GC_METRIC_EUCLIDEAN;	/* COSINE: unit rows */

	const void *rows() const { return dtype == GC_F64 ? (const void *) x64.data() : (const void *) x.data(); }
};

/*
 * D's rows in element type dt, and for cosine scaled to unit length
 * (gc_unit_rows, as the glue does; from the float values for both types).
 */
static Data
convert_data(const Data &D, gc_dtype dt, gc_metric metric)
{
	Data		E;

	E.n = D.n;
	E.d = D.d;
	E.dtype = dt;
	E.metric = metric;
	if (dt == GC_F64)
		E.x64.assign(D.x.begin(), D.x.end());
	else
		E.x = D.x;
	if (metric == GC_METRIC_COSINE &&
		gc_unit_rows(dt == GC_F64 ? (void *) E.x64.data() : (void *) E.x.data(), dt, E.n, E.d) >= 0)
	{
		fprintf(stderr, "kmeans_bench: a zero row\n");
		exit(2);
	}
	return E;
}

/*
 * Embedding-like rows: blobs (100) Gaussian blobs around random directions
 * of the unit sphere, noise of total size 0.3, each row normalised (the
 * shape of gc_td_wide, drawn on every core: rows in blocks of 16,384, each
 * block from its own seed, so the rows do not depend on the threads): at
 * k = 1024 about ten close centroids share a blob.
 */
static Data
make_wide(int64_t n, int d, int blobs)
{
	Data		D;
	const uint64_t seed = gc_td_seed("wide", n, d) + (uint64_t) blobs;
	const int64_t block = 16384;
	const double sd = 0.3 / std::sqrt((double) d);
	std::vector<double> c((size_t) blobs * d);
	gc_rng		rng;
	unsigned	nt = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
	std::vector<std::thread> th;

	D.n = n;
	D.d = d;
	D.x.resize((size_t) n * d);
	gc_rng_seed(&rng, seed);
	for (int j = 0; j < blobs; j++)
		gc_td_direction(&rng, c.data() + (size_t) j * d, d);
	for (unsigned t = 0; t < nt; t++)
		th.emplace_back([&, t]() {
			std::vector<double> v(d);

			for (int64_t b = t; b * block < n; b += nt)
			{
				gc_rng		r;

				gc_rng_seed(&r, seed + 1 + (uint64_t) b);
				for (int64_t i = b * block; i < std::min<int64_t>(n, (b + 1) * block); i++)
				{
					int			j = (int) gc_rng_below(&r, (uint64_t) blobs);
					double		norm = 0.0;

					for (int k = 0; k < d; k++)
					{
						v[k] = c[(size_t) j * d + k] + sd * gc_td_normal(&r);
						norm += v[k] * v[k];
					}
					norm = std::sqrt(norm);
					for (int k = 0; k < d; k++)
						D.x[(size_t) i * d + k] = (float) (v[k] / norm);
				}
			}
		});
	for (std::thread &x : th)
		x.join();
	return D;
}

static Data
make_data(int64_t n, int d, int blobs)
{
	Data		D;

	D.n = n;
	D.d = d;
	D.x.resize((size_t) n * d);
	if (blobs < 0)
	{
		if (gc_td_line(D.x.data(), n, d, -blobs, 1.0, 0.01, gc_td_seed("line", n, d)) != 0)
		{
			fprintf(stderr, "kmeans_bench: out of host memory\n");
			exit(2);
		}
	}
	else if (blobs > 0)
	{
		if (gc_td_separated(D.x.data(), n, d, blobs, 0.0, gc_td_seed("separated", n, d) + (uint64_t) blobs,
							nullptr, nullptr) != 0)
		{
			fprintf(stderr, "kmeans_bench: out of host memory\n");
			exit(2);
		}
	}
	else
		gc_td_uniform(D.x.data(), n, d, 0.0, 1.0, gc_td_seed("unit", n, d));
	return D;
}

struct Out
{
	std::vector<int32_t> labels;
	std::vector<double> distance, centroids, inertia;
	std::vector<int64_t> sizes;
	gc_kmeans_result r;
	gc_timing	timing;
	double		wall_ms = 0;
	gc_status	st = GC_OK;
	std::string err;

	Out(int64_t n, int k, int d)
		: labels(n), distance(n), centroids((size_t) k * d), inertia(k), sizes(k)
	{
		memset(&r, 0, sizeof(r));
		r.labels = labels.data();
		r.distance = distance.data();
		r.centroids = centroids.data();
		r.sizes = sizes.data();
		r.inertia = inertia.data();
		memset(&timing, 0, sizeof(timing));
	}
	double total_inertia() const
	{
		double		s = 0;

		for (double v : inertia)
			s += v;
		return s;
	}
};

/*
 * One timed call.  A short call on the first rows comes first: CUDA loads
 * the back end's kernels lazily, on first use (CUDA_MODULE_LOADING=LAZY,
 * the default), and that one-time cost, a few milliseconds a process, would
 * otherwise be charged to the first iterations.
 */
static void
run_gpu(const Data &D, const gc_kmeans_params &p, const gc_tuning &tuning, Out &o)
{
	gc_exec		e = gc_h_exec(&tuning, nullptr, &o.timing);
	int64_t		warm_n = std::min<int64_t>(D.n, std::max<int64_t>(65536, 4 * (int64_t) p.k));
	gc_kmeans_params warm = p;
	double		t0;
	char		buf[1024];

	warm.max_iter = 2;
	warm.metric = D.metric;
	if (api->kmeans(&e, D.rows(), D.dtype, warm_n, D.d, &warm, &o.r) != GC_OK)
	{
		o.st = GC_ERR_INTERNAL;
		o.err = std::string("warm-up: ") + gc_h_error_text(api, buf, sizeof(buf));
		return;
	}
	memset(&o.timing, 0, sizeof(o.timing));
	t0 = gc_h_now_ms();
	gc_kmeans_params q = p;

	q.metric = D.metric;
	o.st = api->kmeans(&e, D.rows(), D.dtype, D.n, D.d, &q, &o.r);
	o.wall_ms = gc_h_now_ms() - t0;
	if (o.st != GC_OK)
		o.err = gc_h_error_text(api, buf, sizeof(buf));
}

static gc_kmeans_params
make_params(int k, gc_kmeans_init init, int max_iter, double tol, gc_precision prec)
{
	gc_kmeans_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.k = k;
	p.max_iter = max_iter;
	p.tol = tol;
	p.seed = 7;
	p.init = init;
	p.initial_centroids = nullptr;
	p.precision = prec;
	p.n_init = 1;
	return p;
}

/* The three products of a shape: TF32 and FP32 SGEMM, FP64 DGEMM (FP64 tensor cores where the device has them). */
enum GemmKind
{
	GEMM_TF32, GEMM_FP32, GEMM_FP64
};

/*
 * One GEMM of the distance shape (rows x k x d) as the k-means product
 * calls it, scaled from a slice when the output is too big (8 GiB at most);
 * operands of random values in [-1, 1) (zeros would flatter the tensor
 * cores' power draw).
 */
static double
gemm_ms(int64_t rows, int k, int d, GemmKind kind)
{
	const size_t es = kind == GEMM_FP64 ? 8 : 4;
	int64_t		slice = std::min<int64_t>(rows, std::max<int64_t>(1024, (int64_t) ((size_t(8) << 30) / ((size_t) k * es))));
	void	   *a, *b, *c;
	cublasHandle_t h;
	cudaEvent_t e0, e1;
	float		ms = 0;
	const float one = 1, zero = 0;
	const double one64 = 1, zero64 = 0;
	std::vector<double> ha((size_t) std::max<int64_t>((int64_t) k, slice) * d);
	gc_rng		rng;

	gc_rng_seed(&rng, 11);
	for (double &v : ha)
		v = gc_td_between(&rng, -1.0, 1.0);
	std::vector<float> hf(ha.begin(), ha.end());
	const void *src = kind == GEMM_FP64 ? (const void *) ha.data() : (const void *) hf.data();

	if (cudaMalloc(&a, es * (size_t) k * d) != cudaSuccess || cudaMalloc(&b, es * (size_t) slice * d) != cudaSuccess ||
		cudaMalloc(&c, es * (size_t) slice * k) != cudaSuccess)
	{
		fprintf(stderr, "kmeans_bench: no device memory for the GEMM timing\n");
		exit(2);
	}
	cudaMemcpy(a, src, es * (size_t) k * d, cudaMemcpyHostToDevice);
	cudaMemcpy(b, src, es * (size_t) slice * d, cudaMemcpyHostToDevice);
	cublasCreate(&h);
	cublasSetMathMode(h, kind == GEMM_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	auto		one_gemm = [&]() {
		if (kind == GEMM_FP64)
			cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, k, (int) slice, d, &one64, (const double *) a, d,
						(const double *) b, d, &zero64, (double *) c, k);
		else
			cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, k, (int) slice, d, &one, (const float *) a, d,
						(const float *) b, d, &zero, (float *) c, k);
	};

	one_gemm();
	cudaEventRecord(e0);
	for (int r = 0; r < 3; r++)
		one_gemm();
	cudaEventRecord(e1);
	cudaEventSynchronize(e1);
	cudaEventElapsedTime(&ms, e0, e1);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cublasDestroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	return ms / 3.0 * (double) rows / (double) slice;
}

static double
sgemm_ms(int64_t rows, int k, int d, bool tf32)
{
	return gemm_ms(rows, k, d, tf32 ? GEMM_TF32 : GEMM_FP32);
}

static int
bench(const char *json_path, const gc_device_info &info)
{
	struct Shape
	{
		int64_t		n;
		int			d, k, iters, blobs;
		bool		wide;
	}			shapes[] = {
		{10000000, 2, 100, 20, 0, false}, {10000000, 32, 1000, 10, 0, false}, {1000000, 256, 20000, 25, 0, false},
		{1000000, 768, 1024, 10, 0, false}, {1000000, 256, 20000, 25, 200, false},
		{1000000, 768, 1024, 10, 100, true}
	};
	std::vector<long> tiles = {0};
	const char *tl = getenv("KMEANS_BENCH_TILES");

	for (const char *c = tl; c && *c;)
	{
		tiles.push_back(strtol(c, nullptr, 10));
		c = strchr(c, ',');
		c = c ? c + 1 : nullptr;
	}
	FILE	   *js = json_path ? fopen(json_path, "w") : nullptr;
	double		t_start = gc_h_now_ms();

	printf("device: %s\n", info.name);
	if (js)
		fprintf(js, "{\"device\": \"%s\", \"runs\": [\n", info.name);
	bool		first = true;

	for (const Shape &s : shapes)
	{
		Data		D = s.wide ? make_wide(s.n, s.d, s.blobs) : make_data(s.n, s.d, s.blobs);

		struct Variant
		{
			const char *label;
			gc_precision prec;
			bool		sgemm;
			long		tile;
		};
		std::vector<Variant> variants = {
			{"fp32", GC_PRECISION_FP32, false, 0}, {"sgemm", GC_PRECISION_FP32, true, 0},
			{"tf32", GC_PRECISION_TF32, false, 0}
		};
		double		floors[3] = {-1, -1, -1};

		for (long t : tiles)
			if (t > 0)
				variants.push_back({"fp32", GC_PRECISION_FP32, false, t});
		for (const Variant &v : variants)
		{
			if (s.d <= 32 && (v.prec != GC_PRECISION_FP32 || v.sgemm || v.tile))
				continue;		/* the low-dimension kernel has no GEMM */
			/*
			 * The blobs: the default product only.  (The unchecked tf32
			 * product on them did not finish within two minutes on an H100,
			 * before the move to gc_tuning as after.)
			 */
			if (s.blobs > 0 && (v.sgemm || v.tile || v.prec != GC_PRECISION_FP32))
				continue;

			gc_tuning	tuning = gc_tuning_defaults();

			if (v.sgemm)
				tuning.kmeans_gemm = GC_KMEANS_GEMM_SGEMM;
			tuning.kmeans_tile_rows = v.tile;

			gc_kmeans_params p = make_params(s.k, GC_KMEANS_INIT_RANDOM, s.iters, 0.0, v.prec);
			Out			g(s.n, s.k, s.d);

			run_gpu(D, p, tuning, g);
			if (g.st != GC_OK)
			{
				printf("%lld x %d k=%d %s: GPU error %d: %s\n", (long long) s.n, s.d, s.k, v.label, g.st,
					   g.err.c_str());
				continue;
			}
			bool		tf = v.prec == GC_PRECISION_TF32;

			/* the three products of the shape, side by side (d > 32; the low-d kernels have none) */
			if (floors[0] < 0)
				for (int f = 0; f < 3; f++)
					floors[f] = gemm_ms(s.n, s.k, s.d, (GemmKind) f);

			double		floor_ms = floors[tf ? GEMM_TF32 : GEMM_FP32];
			std::string label = std::string(v.label) + (s.wide ? " embeddings" : s.blobs > 0 ? " blobs" : "") +
				(v.tile ? " tile " + std::to_string(v.tile) : "");

			printf("[%4.0f s] %8lld x %-4d k=%-6d %-21s iterations %3d | per iteration %9.3f ms | iterations %9.1f ms "
				   "| init %8.1f ms | final %8.1f ms | to device %7.1f ms | call %9.1f ms | GEMM TF32 %8.3f, FP32 %8.3f, "
				   "FP64 %8.3f ms (%.2f x FP32, %.2f x FP64) | inertia %.9e | decided in double %lld, candidates %lld, "
				   "second product %lld\n",
				   (gc_h_now_ms() - t_start) / 1000.0, (long long) s.n, s.d, s.k, label.c_str(), g.r.iterations,
				   g.timing.phase_ms[3],
				   g.timing.phase_ms[1], g.timing.phase_ms[0], g.timing.phase_ms[2], g.timing.to_device_ms,
				   g.wall_ms, floors[0], floors[1], floors[2], g.timing.phase_ms[3] / floors[1],
				   g.timing.phase_ms[3] / floors[2], g.total_inertia(),
				   (long long) g.timing.counts[0], (long long) g.timing.counts[1], (long long) g.timing.counts[2]);
			fflush(stdout);
			if (js)
			{
				fprintf(js, "%s{\"n\": %lld, \"d\": %d, \"k\": %d, \"variant\": \"%s\", \"iterations\": %d, "
						"\"per_iteration_ms\": %.4f, \"iterations_ms\": %.3f, \"init_ms\": %.3f, "
						"\"final_ms\": %.3f, \"to_device_ms\": %.3f, \"call_ms\": %.3f, \"sgemm_ms\": %.4f, "
						"\"gemm_tf32_ms\": %.4f, \"gemm_fp32_ms\": %.4f, \"gemm_fp64_ms\": %.4f, "
						"\"inertia\": %.12e, \"decided_in_double\": %lld, \"candidates\": %lld, "
						"\"second_product\": %lld}\n",
						first ? "" : ",", (long long) s.n, s.d, s.k, label.c_str(), g.r.iterations,
						g.timing.phase_ms[3], g.timing.phase_ms[1], g.timing.phase_ms[0], g.timing.phase_ms[2],
						g.timing.to_device_ms, g.wall_ms, floor_ms, floors[0], floors[1], floors[2], g.total_inertia(),
						(long long) g.timing.counts[0], (long long) g.timing.counts[1],
						(long long) g.timing.counts[2]);
				first = false;
				fflush(js);
			}
		}
	}
	/* k-means++ on the device, 10M x 2 k=100 */
	{
		Data		D = make_data(10000000, 2, 0);
		gc_kmeans_params p = make_params(100, GC_KMEANS_INIT_PLUSPLUS, 1, 0.0, GC_PRECISION_FP32);
		Out			g(D.n, 100, 2);

		gc_kmeans_params q = make_params(100, GC_KMEANS_INIT_PLUSPLUS_PLAIN, 1, 0.0, GC_PRECISION_FP32);
		Out			h(D.n, 100, 2);

		run_gpu(D, p, gc_tuning_defaults(), g);
		run_gpu(D, q, gc_tuning_defaults(), h);
		printf("k-means++ init 10M x 2 k=100 on the device: statistics + init %.1f ms (greedy, %d candidates), "
			   "%.1f ms (plain)\n", g.timing.phase_ms[0], gc_kmpp_trials(100), h.timing.phase_ms[0]);
		fflush(stdout);
		if (js)
			fprintf(js, "], \"kmeanspp_10Mx2_k100_init_ms\": %.3f, \"plain_kmeanspp_10Mx2_k100_init_ms\": %.3f}\n",
					g.timing.phase_ms[0], h.timing.phase_ms[0]);
	}
	if (js)
		fclose(js);
	return 0;
}

/* One line of a k-means run with its floor, and its JSON object. */
static void
report_run(FILE *js, bool &first, const char *label, int64_t n, int d, int k, const Out &g, double floor_ms)
{
	printf("%8lld x %-4d k=%-6d %-14s iterations %3d | per iteration %9.3f ms (%.2f x one FP32 SGEMM %.3f ms) "
		   "| init %8.1f ms | decided in double %lld, candidates %lld, to FP32 %lld | inertia %.9e\n",
		   (long long) n, d, k, label, g.r.iterations, g.timing.phase_ms[3],
		   g.timing.phase_ms[3] / floor_ms, floor_ms, g.timing.phase_ms[0], (long long) g.timing.counts[0],
		   (long long) g.timing.counts[1], (long long) g.timing.counts[2], g.total_inertia());
	fflush(stdout);
	if (js)
	{
		fprintf(js, "%s{\"n\": %lld, \"d\": %d, \"k\": %d, \"variant\": \"%s\", \"iterations\": %d, "
				"\"per_iteration_ms\": %.4f, \"sgemm_ms\": %.4f, \"init_ms\": %.3f, "
				"\"decided_in_double\": %lld, \"candidates\": %lld, \"to_fp32\": %lld, \"inertia\": %.12e}\n",
				first ? "" : ",", (long long) n, d, k, label, g.r.iterations, g.timing.phase_ms[3], floor_ms,
				g.timing.phase_ms[0], (long long) g.timing.counts[0], (long long) g.timing.counts[1],
				(long long) g.timing.counts[2], g.total_inertia());
		first = false;
		fflush(js);
	}
}

/*
 * gc_backend_api.kmeans_assign of D's rows to k random rows as centroids,
 * after a short k-means run of the same shape for the per-iteration time.
 */
static void
assign_timing(FILE *js, bool &first, const char *label, const Data &D, int k)
{
	gc_kmeans_params p = make_params(k, GC_KMEANS_INIT_RANDOM, 5, 0.0, GC_PRECISION_FP32);
	Out			g(D.n, k, D.d);
	std::vector<int32_t> labels(D.n);
	std::vector<double> distance(D.n);
	gc_kmeans_assign_params ap;
	gc_kmeans_assign_result ar;
	gc_timing	t;
	gc_tuning	tuning = gc_tuning_defaults();
	gc_exec		e = gc_h_exec(&tuning, nullptr, &t);
	double		t0,
				wall;
	gc_status	st;
	char		buf[1024];

	run_gpu(D, p, tuning, g);
	if (g.st != GC_OK)
	{
		printf("assign %s: k-means error: %s\n", label, g.err.c_str());
		return;
	}
	memset(&ap, 0, sizeof(ap));
	ap.struct_size = sizeof(ap);
	ap.k = k;
	ap.centroids = g.centroids.data();
	ap.precision = GC_PRECISION_FP32;
	ap.metric = D.metric;
	ar.labels = labels.data();
	ar.distance = distance.data();
	memset(&t, 0, sizeof(t));
	st = api->kmeans_assign(&e, D.rows(), D.dtype, D.n, D.d, &ap, &ar);	/* warm-up */
	memset(&t, 0, sizeof(t));
	t0 = gc_h_now_ms();
	if (st == GC_OK)
		st = api->kmeans_assign(&e, D.rows(), D.dtype, D.n, D.d, &ap, &ar);
	wall = gc_h_now_ms() - t0;
	if (st != GC_OK)
	{
		printf("assign %s: error: %s\n", label, gc_h_error_text(api, buf, sizeof(buf)));
		return;
	}
	int64_t		same = 0;

	for (int64_t i = 0; i < D.n; i++)
		same += labels[i] == g.labels[i];
	printf("assign %-22s %8lld x %-4d k=%-5d | compute %8.3f ms (preparation %.3f, assignment %.3f, distances %.3f) "
		   "| to device %7.1f ms | from device %7.1f ms | call %8.1f ms | one Lloyd iteration %8.3f ms "
		   "| decided in double %lld, to FP32 %lld | labels as the fit's last %lld of %lld\n",
		   label, (long long) D.n, D.d, k, t.compute_ms, t.phase_ms[0], t.phase_ms[1], t.phase_ms[2],
		   t.to_device_ms, t.from_device_ms, wall, g.timing.phase_ms[3], (long long) t.counts[0],
		   (long long) t.counts[2], (long long) same, (long long) D.n);
	fflush(stdout);
	if (js)
	{
		fprintf(js, "%s{\"assign\": \"%s\", \"n\": %lld, \"d\": %d, \"k\": %d, \"compute_ms\": %.4f, "
				"\"to_device_ms\": %.3f, \"from_device_ms\": %.3f, \"call_ms\": %.3f, "
				"\"lloyd_iteration_ms\": %.4f}\n",
				first ? "" : ",", label, (long long) D.n, D.d, k, t.compute_ms, t.to_device_ms,
				t.from_device_ms, wall, g.timing.phase_ms[3]);
		first = false;
		fflush(js);
	}
}

/* The hard case (rows on a line, many close centroids) and/or the assignment timings. */
static int
bench_hard(const char *json_path, const gc_device_info &info, bool hard, bool assign)
{
	FILE	   *js = json_path ? fopen(json_path, "w") : nullptr;
	bool		first = true;

	printf("device: %s\n", info.name);
	if (js)
		fprintf(js, "{\"device\": \"%s\", \"runs\": [\n", info.name);
	Data		L = make_data(1000000, 256, -997);

	if (hard)
	{
		const int	ks[2] = {20000, 1000};

		for (int k : ks)
		{
			gc_kmeans_params p = make_params(k, GC_KMEANS_INIT_RANDOM, k > 5000 ? 10 : 25, 0.0, GC_PRECISION_FP32);
			Out			g(L.n, k, L.d);

			run_gpu(L, p, gc_tuning_defaults(), g);
			if (g.st != GC_OK)
			{
				printf("line 1M x 256 k=%d: GPU error %s\n", k, g.err.c_str());
				continue;
			}
			report_run(js, first, "fp32 line", L.n, L.d, k, g, sgemm_ms(L.n, k, L.d, false));
		}
		{
			/* the easy case next to it: uniform data, the benchmark's shape */
			Data		U = make_data(1000000, 256, 0);
			gc_kmeans_params p = make_params(20000, GC_KMEANS_INIT_RANDOM, 10, 0.0, GC_PRECISION_FP32);
			Out			g(U.n, 20000, U.d);

			run_gpu(U, p, gc_tuning_defaults(), g);
			if (g.st == GC_OK)
				report_run(js, first, "fp32 uniform", U.n, U.d, 20000, g, sgemm_ms(U.n, 20000, U.d, false));
		}
	}
	if (assign)
	{
		Data		D = make_data(10000000, 2, 0);
		Data		U = make_data(1000000, 256, 0);

		assign_timing(js, first, "uniform", D, 100);
		assign_timing(js, first, "uniform", U, 1000);
		assign_timing(js, first, "line", L, 1000);
	}
	if (js)
	{
		fprintf(js, "]}\n");
		fclose(js);
	}
	return 0;
}

/*
 * The levels of the checked product on data with many close centroids:
 * per case the time per iteration next to the three GEMMs of its shape
 * (TF32, FP32, FP64), and the rows and candidates that reached each level:
 * every row of a pass starts at the TF32 check (unless most rows went
 * straight to the second product), "second product" counts the rows of all
 * passes sent on to the FP32 product or, where the device has fast FP64,
 * the DGEMM, and "decided in double" the rows (and their candidates) whose
 * last level left several candidates, compared by their distance in double.
 * Then the same for rows of double precision, and gpu_kmeans_assign.
 * KMEANS_BENCH_NO_DGEMM=1 adds runs with tuning kmeans_gemm = TF32_FP32
 * (the second level in FP32, as on devices without fast FP64).
 */
static int
bench_levels(const char *json_path, const gc_device_info &info)
{
	struct Case
	{
		const char *label;
		int64_t		n;
		int			d, k, iters, blobs;
		char		kind;				/* s: separated blobs, w: embeddings, u: uniform, l: line */
		bool		f64;
	}			cases[] = {
		{"blobs", 1000000, 256, 20000, 10, 200, 's', false},
		{"embeddings", 1000000, 768, 1024, 10, 100, 'w', false},
		{"uniform", 1000000, 256, 20000, 10, 0, 'u', false},
		{"line", 1000000, 256, 20000, 10, -997, 'l', false},
		{"blobs f64", 1000000, 256, 20000, 10, 200, 's', true},
		{"embeddings f64", 1000000, 768, 1024, 10, 100, 'w', true},
	};
	FILE	   *js = json_path ? fopen(json_path, "w") : nullptr;
	bool		first = true;
	const char *nd = getenv("KMEANS_BENCH_NO_DGEMM");
	const char *only = getenv("KMEANS_BENCH_CASES");	/* comma-separated labels, or all */

	printf("device: %s\n", info.name);
	printf("| case | n x d, k | variant | iterations | per iteration ms | GEMM TF32 / FP32 / FP64 ms | x FP64 GEMM "
		   "| decided in double (candidates) | second product rows | inertia |\n"
		   "|---|---|---|---:|---:|---|---:|---:|---:|---:|\n");
	if (js)
		fprintf(js, "{\"device\": \"%s\", \"runs\": [\n", info.name);
	for (const Case &c : cases)
	{
		if (only && *only && !strstr(only, c.label))
			continue;

		Data		D0 = c.kind == 'w' ? make_wide(c.n, c.d, c.blobs) : make_data(c.n, c.d, c.kind == 'u' ? 0 : c.blobs);
		Data		D = c.f64 ? convert_data(D0, GC_F64, GC_METRIC_EUCLIDEAN) : D0;
		double		g[3];

		for (int f = 0; f < 3; f++)
			g[f] = gemm_ms(c.n, c.k, c.d, (GemmKind) f);
		/* variants: the default, tf32-fp32 (KMEANS_BENCH_NO_DGEMM=1), rows per product (KMEANS_BENCH_TILES) */
		std::vector<long> vars = {0};

		if (nd && *nd == '1' && !c.f64)
			vars.push_back(-1);
		for (const char *t = getenv("KMEANS_BENCH_TILES"); t && *t && !c.f64 && c.kind == 's';)
		{
			vars.push_back(strtol(t, nullptr, 10));
			t = strchr(t, ',');
			t = t ? t + 1 : nullptr;
		}
		for (long v : vars)
		{
			gc_tuning	tuning = gc_tuning_defaults();
			gc_kmeans_params p = make_params(c.k, GC_KMEANS_INIT_RANDOM, c.iters, 0.0, GC_PRECISION_FP32);
			Out			o(c.n, c.k, c.d);
			std::string vs = v < 0 ? "tf32-fp32" : v > 0 ? "tile_rows " + std::to_string(v) : "default";
			const char *vl = vs.c_str();

			if (v < 0)
				tuning.kmeans_gemm = GC_KMEANS_GEMM_TF32_FP32;
			if (v > 0)
				tuning.kmeans_tile_rows = v;
			run_gpu(D, p, tuning, o);
			if (o.st != GC_OK)
			{
				printf("| %s | %lld x %d, k=%d | %s | GPU error: %s |\n", c.label, (long long) c.n, c.d, c.k, vl,
					   o.err.c_str());
				continue;
			}
			printf("| %s | %lld x %d, k=%d | %s | %d | %.1f | %.1f / %.1f / %.1f | %.2f | %lld (%lld) | %lld | %.9e |\n",
				   c.label, (long long) c.n, c.d, c.k, vl, o.r.iterations, o.timing.phase_ms[3], g[0], g[1], g[2],
				   o.timing.phase_ms[3] / g[2], (long long) o.timing.counts[0], (long long) o.timing.counts[1],
				   (long long) o.timing.counts[2], o.total_inertia());
			fflush(stdout);
			if (js)
			{
				fprintf(js, "%s{\"case\": \"%s\", \"n\": %lld, \"d\": %d, \"k\": %d, \"variant\": \"%s\", "
						"\"iterations\": %d, \"per_iteration_ms\": %.4f, \"gemm_tf32_ms\": %.4f, "
						"\"gemm_fp32_ms\": %.4f, \"gemm_fp64_ms\": %.4f, \"decided_in_double\": %lld, "
						"\"candidates\": %lld, \"second_product\": %lld, \"inertia\": %.12e}\n",
						first ? "" : ",", c.label, (long long) c.n, c.d, c.k, vl, o.r.iterations,
						o.timing.phase_ms[3], g[0], g[1], g[2], (long long) o.timing.counts[0],
						(long long) o.timing.counts[1], (long long) o.timing.counts[2], o.total_inertia());
				first = false;
				fflush(js);
			}
		}
		if ((c.kind == 's' || c.kind == 'w') && !c.f64 && !(only && strstr(only, "noassign")))
			assign_timing(js, first, c.label, D, c.k);
	}
	if (js)
	{
		fprintf(js, "]}\n");
		fclose(js);
	}
	return 0;
}

/*
 * Double against single precision, cosine against Euclidean, on the two
 * benchmark shapes: the same uniform rows (in [-1, 1)^d, so that their
 * directions spread) in each form, random initial rows, tol 0 and a fixed
 * number of iterations, so that the times per iteration compare.
 */
static int
bench_precision(const char *json_path, const gc_device_info &info)
{
	struct Shape
	{
		int64_t		n;
		int			d, k, iters;
	}			shapes[] = {{10000000, 2, 100, 20}, {1000000, 256, 1000, 10}};
	struct Form
	{
		const char *label;
		gc_dtype	dtype;
		gc_metric	metric;
	}			forms[] = {
		{"f32", GC_F32, GC_METRIC_EUCLIDEAN}, {"f64", GC_F64, GC_METRIC_EUCLIDEAN},
		{"f32 cosine", GC_F32, GC_METRIC_COSINE}, {"f64 cosine", GC_F64, GC_METRIC_COSINE}
	};
	FILE	   *js = json_path ? fopen(json_path, "w") : nullptr;
	bool		first = true;

	printf("device: %s\n", info.name);
	if (js)
		fprintf(js, "{\"device\": \"%s\", \"runs\": [\n", info.name);
	for (const Shape &s : shapes)
	{
		Data		U;
		double		base = -1;

		U.n = s.n;
		U.d = s.d;
		U.x.resize((size_t) s.n * s.d);
		gc_td_uniform(U.x.data(), s.n, s.d, -1.0, 1.0, gc_td_seed("unit", s.n, s.d));
		for (const Form &f : forms)
		{
			Data		D = convert_data(U, f.dtype, f.metric);
			gc_kmeans_params p = make_params(s.k, GC_KMEANS_INIT_RANDOM, s.iters, 0.0, GC_PRECISION_FP32);
			Out			g(s.n, s.k, s.d);

			run_gpu(D, p, gc_tuning_defaults(), g);
			if (g.st != GC_OK)
			{
				printf("%lld x %d k=%d %s: GPU error %d: %s\n", (long long) s.n, s.d, s.k, f.label, g.st,
					   g.err.c_str());
				continue;
			}
			if (base < 0)
				base = g.timing.phase_ms[3];
			printf("%8lld x %-4d k=%-5d %-11s iterations %3d | per iteration %9.3f ms (%.2f x f32) "
				   "| init %8.1f ms | final %8.1f ms | to device %7.1f ms | call %9.1f ms | inertia %.9e\n",
				   (long long) s.n, s.d, s.k, f.label, g.r.iterations, g.timing.phase_ms[3],
				   g.timing.phase_ms[3] / base, g.timing.phase_ms[0], g.timing.phase_ms[2],
				   g.timing.to_device_ms, g.wall_ms, g.total_inertia());
			fflush(stdout);
			if (js)
			{
				fprintf(js, "%s{\"n\": %lld, \"d\": %d, \"k\": %d, \"form\": \"%s\", \"iterations\": %d, "
						"\"per_iteration_ms\": %.4f, \"ratio_to_f32\": %.4f, \"init_ms\": %.3f, "
						"\"final_ms\": %.3f, \"to_device_ms\": %.3f, \"call_ms\": %.3f, \"inertia\": %.12e}\n",
						first ? "" : ",", (long long) s.n, s.d, s.k, f.label, g.r.iterations,
						g.timing.phase_ms[3], g.timing.phase_ms[3] / base, g.timing.phase_ms[0],
						g.timing.phase_ms[2], g.timing.to_device_ms, g.wall_ms, g.total_inertia());
				first = false;
				fflush(js);
			}
		}
	}
	if (js)
	{
		fprintf(js, "]}\n");
		fclose(js);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	gc_device_info info;
	char		why[1024];

	if (argc > 1 && strcmp(argv[1], "check") == 0)
	{
		fprintf(stderr, "kmeans_bench: the GPU-against-CPU check moved to test/gpu: "
				"make -C test/gpu && test/gpu/gpu_vs_cpu kmeans\n");
		return 2;
	}
	bool		mode_ok = argc > 1 && (strcmp(argv[1], "bench") == 0 || strcmp(argv[1], "hard") == 0 ||
									   strcmp(argv[1], "gemm") == 0 ||
									   strcmp(argv[1], "assign") == 0 || strcmp(argv[1], "precision") == 0);

	if (!mode_ok && !(argc > 5 && strcmp(argv[1], "one") == 0))
	{
		fprintf(stderr, "usage: %s bench [json] | gemm [json] | hard [json] | assign [json] | precision [json] "
				"| one n d k iterations [kmeans++] [f64] [cosine]\n", argv[0]);
		return 2;
	}
	api = gc_h_open_gpu(gc_h_cuda_path(nullptr), &info, why, sizeof(why));
	if (!api)
	{
		fprintf(stderr, "kmeans_bench: %s\n", why);
		return 2;
	}
	if (strcmp(argv[1], "bench") == 0)
		return bench(argc > 2 ? argv[2] : nullptr, info);
	if (strcmp(argv[1], "gemm") == 0)
		return bench_levels(argc > 2 ? argv[2] : nullptr, info);
	if (strcmp(argv[1], "hard") == 0)
		return bench_hard(argc > 2 ? argv[2] : nullptr, info, true, true);
	if (strcmp(argv[1], "assign") == 0)
		return bench_hard(argc > 2 ? argv[2] : nullptr, info, false, true);
	if (strcmp(argv[1], "precision") == 0)
		return bench_precision(argc > 2 ? argv[2] : nullptr, info);

	/* one GPU run on uniform data, for profilers: one n d k iterations [kmeans++] [f64] [cosine] */
	bool		pp = false,
				f64 = false,
				cosine = false;

	for (int a = 6; a < argc; a++)
	{
		if (strcmp(argv[a], "kmeans++") == 0)
			pp = true;
		else if (strcmp(argv[a], "f64") == 0)
			f64 = true;
		else if (strcmp(argv[a], "cosine") == 0)
			cosine = true;
		else
		{
			fprintf(stderr, "kmeans_bench: unknown option %s (kmeans++, f64, cosine)\n", argv[a]);
			return 2;
		}
	}
	Data		U = make_data(atoll(argv[2]), atoi(argv[3]), 0);
	Data		D = convert_data(U, f64 ? GC_F64 : GC_F32, cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN);

	gc_kmeans_params p = make_params(atoi(argv[4]), pp ? GC_KMEANS_INIT_PLUSPLUS : GC_KMEANS_INIT_RANDOM,
									 atoi(argv[5]), 0.0, GC_PRECISION_FP32);
	Out			g(D.n, p.k, D.d);

	run_gpu(D, p, gc_tuning_defaults(), g);
	printf("%s: %d iterations, per iteration %.3f ms, statistics + init %.1f ms, call %.1f ms\n",
		   g.st == GC_OK ? "ok" : g.err.c_str(), g.r.iterations, g.timing.phase_ms[3], g.timing.phase_ms[0],
		   g.wall_ms);
	return g.st == GC_OK ? 0 : 1;
}
