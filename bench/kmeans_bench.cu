/*
 * kmeans_bench.cu
 *    Standalone harness for gpuclust's k-means on a GPU machine, without
 *    PostgreSQL: loads gpuclust_cuda.so through its one exported symbol,
 *    links the CPU core, and
 *
 *      kmeans_bench check       runs CPU and GPU on the same inputs and
 *                               prints label mismatches, inertia and
 *                               centroid differences (exit 1 on a failure);
 *      kmeans_bench one n d k it   one GPU run on uniform data (for profilers)
 *      kmeans_bench bench       times the GPU k-means on the benchmark shapes
 *                               next to one cuBLAS SGEMM of the same shape
 *                               (FP32 and TF32), the floor of the distance
 *                               work; for d > 32 with the three forms of the
 *                               product: fp32 (TF32, checked; the default),
 *                               sgemm (FP32, checked) and tf32 (unchecked).
 *                               KMEANS_BENCH_TILES=r1,r2,... adds fp32 runs
 *                               with that many rows per product.
 *
 *    Build (bench/kmeans_bench.sh does it):
 *      gcc -O2 -ffp-contract=off -Isrc/core -Icuda -c src/core/kmeans.c src/core/util.c
 *      nvcc -O2 -Isrc/core -Icuda bench/kmeans_bench.cu kmeans.o util.o -lcublas -ldl
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "core.h"
}

static const gc_cuda_api *api;

static double
now_ms()
{
	return std::chrono::duration<double, std::milli>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* xorshift-style generator for the data, independent of the library's. */
struct Gen
{
	uint64_t	s;
	explicit Gen(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	double unif() { return (double) (next() >> 11) * (1.0 / 9007199254740992.0); }
};

/* n rows around k well-separated centres (uniform noise of half-width 1 per feature). */
struct Data
{
	int64_t		n;
	int			d;
	std::vector<float> x;
	std::vector<int32_t> truth;
	std::vector<double> centres;
};

static Data
blobs(int64_t n, int d, int k, uint64_t seed, double offset)
{
	Data		D;
	Gen			g(seed);
	double		sep = 4.0 * std::sqrt((double) d) + 1.0;
	double		box = sep * std::pow((double) k, 1.0 / std::min(d, 8)) * 4.0;

	D.n = n;
	D.d = d;
	D.centres.resize((size_t) k * d);
	for (int j = 0; j < k; j++)
	{
		for (int tries = 0;; tries++)
		{
			bool		ok = true;

			for (int t = 0; t < d; t++)
				D.centres[(size_t) j * d + t] = offset + (g.unif() * 2 - 1) * box;
			for (int i = 0; i < j && ok; i++)
			{
				double		s = 0;

				for (int t = 0; t < d; t++)
				{
					double		u = D.centres[(size_t) j * d + t] - D.centres[(size_t) i * d + t];

					s += u * u;
				}
				ok = std::sqrt(s) > sep;
			}
			if (ok)
				break;
		}
	}
	D.x.resize((size_t) n * d);
	D.truth.resize(n);
	for (int64_t i = 0; i < n; i++)
	{
		int			j = (int) (g.next() % (uint64_t) k);

		D.truth[i] = j;
		for (int t = 0; t < d; t++)
			D.x[(size_t) i * d + t] = (float) (D.centres[(size_t) j * d + t] + (g.unif() * 2 - 1));
	}
	return D;
}

static Data
uniform(int64_t n, int d, uint64_t seed)
{
	Data		D;
	Gen			g(seed);

	D.n = n;
	D.d = d;
	D.x.resize((size_t) n * d);
	for (size_t i = 0; i < D.x.size(); i++)
		D.x[i] = (float) g.unif();
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
		r.labels = labels.data();
		r.distance = distance.data();
		r.centroids = centroids.data();
		r.sizes = sizes.data();
		r.inertia = inertia.data();
		r.iterations = 0;
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

static void
run_cpu(const Data &D, const gc_kmeans_params &p, Out &o)
{
	char		errbuf[GC_ERRBUF_SIZE] = "";
	double		t0 = now_ms();

	o.st = gc_kmeans_cpu(D.x.data(), D.n, D.d, &p, &o.r, nullptr, nullptr, errbuf);
	o.wall_ms = now_ms() - t0;
	o.err = errbuf;
}

static void
run_gpu(const Data &D, const gc_kmeans_params &p, Out &o)
{
	double		t0 = now_ms();

	o.st = api->kmeans(0, D.x.data(), D.n, D.d, &p, &o.r, &o.timing, nullptr, nullptr);
	o.wall_ms = now_ms() - t0;
	if (o.st != GC_OK)
		o.err = api->last_error();
}

static gc_kmeans_params
make_params(int k, gc_kmeans_init init, const double *given, int max_iter, double tol,
			gc_precision prec)
{
	gc_kmeans_params p;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.k = k;
	p.max_iter = max_iter;
	p.tol = tol;
	p.seed = 7;
	p.init = init;
	p.initial_centroids = given;
	p.precision = prec;
	return p;
}

static int	failures = 0;

/* One CPU-against-GPU comparison. */
static void
compare(const char *name, const Data &D, const gc_kmeans_params &p, int64_t max_mismatch,
		double max_rel_inertia)
{
	Out			c(D.n, p.k, D.d),
				g(D.n, p.k, D.d);

	run_cpu(D, p, c);
	run_gpu(D, p, g);
	if (c.st != GC_OK || g.st != GC_OK)
	{
		printf("%-34s FAIL status cpu %d (%s) gpu %d (%s)\n", name, c.st, c.err.c_str(), g.st,
			   g.err.c_str());
		failures++;
		return;
	}

	int64_t		mism = 0;
	double		cdiff = 0,
				ddiff = 0;

	for (int64_t i = 0; i < D.n; i++)
	{
		mism += c.labels[i] != g.labels[i];
		if (c.labels[i] == g.labels[i])
			ddiff = std::max(ddiff, std::fabs(c.distance[i] - g.distance[i]));
	}
	for (size_t i = 0; i < c.centroids.size(); i++)
		cdiff = std::max(cdiff, std::fabs(c.centroids[i] - g.centroids[i]));

	double		ic = c.total_inertia(),
				ig = g.total_inertia();
	double		rel = std::fabs(ic - ig) / std::max(ic, 1e-300);
	bool		ok = mism <= max_mismatch && rel <= max_rel_inertia;

	printf("%-34s %s n=%lld d=%d k=%d it cpu %d gpu %d | label mismatches %lld | inertia rel diff %.2e "
		   "| max centroid diff %.2e | max distance diff %.2e | cpu %.0f ms gpu %.0f ms",
		   name, ok ? "ok  " : "FAIL", (long long) D.n, D.d, p.k, c.r.iterations, g.r.iterations,
		   (long long) mism, rel, cdiff, ddiff, c.wall_ms, g.wall_ms);
	if (D.d > 32)
		printf(" | decided in double %lld rows, %lld candidates, to FP32 %lld rows",
			   (long long) g.timing.counts[0], (long long) g.timing.counts[1], (long long) g.timing.counts[2]);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static std::vector<double>
near_truth(const Data &D, int k, double shift)
{
	std::vector<double> c(D.centres.begin(), D.centres.begin() + (size_t) k * D.d);

	for (double &v : c)
		v += shift;
	return c;
}

static int
check()
{
	{
		Data		D = blobs(10000000, 2, 8, 1, 0.0);
		std::vector<double> c0 = near_truth(D, 8, 0.3);

		compare("10M x 2, k=8, given (fused)", D,
				make_params(8, GC_KMEANS_INIT_GIVEN, c0.data(), 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		compare("10M x 2, k=8, k-means++ (device)", D,
				make_params(8, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
	}
	{
		Data		D = blobs(1000000, 2, 100, 2, 0.0);

		compare("1M x 2, k=100, k-means++", D,
				make_params(100, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
	}
	{
		Data		D = blobs(500000, 12, 300, 3, 0.0);

		compare("500K x 12, k=300, random (sorted)", D,
				make_params(300, GC_KMEANS_INIT_RANDOM, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
	}
	{
		Data		D = blobs(500000, 32, 50, 4, 0.0);

		compare("500K x 32, k=50, k-means++", D,
				make_params(50, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
	}
	{
		Data		D = blobs(200000, 100, 64, 5, 0.0);

		compare("200K x 100, k=64, k-means++ (TF32)", D,
				make_params(64, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		setenv("GPUCLUST_KMEANS_GEMM", "sgemm", 1);
		compare("200K x 100, k=64, k-means++ (SGEMM)", D,
				make_params(64, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		unsetenv("GPUCLUST_KMEANS_GEMM");
		/* report only: random rows may put two centres in one blob, whose split is then a near-tie */
		compare("200K x 100, k=64, random [report]", D,
				make_params(64, GC_KMEANS_INIT_RANDOM, nullptr, 300, 1e-4, GC_PRECISION_FP32), D.n, 1e-5);
		compare("200K x 100, k=64, k-means++, tf32 [report]", D,
				make_params(64, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_TF32), D.n, 1.0);
	}
	{
		Data		D = blobs(100000, 300, 500, 13, 0.0);

		compare("100K x 300, k=500, k-means++ (TF32)", D,
				make_params(500, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		/* a window a million times wider: every centroid a candidate, both fallbacks run */
		setenv("GPUCLUST_KMEANS_WINDOW", "1e6", 1);
		compare("100K x 300, k=500, every candidate", D,
				make_params(500, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		unsetenv("GPUCLUST_KMEANS_WINDOW");
	}
	{
		Data		D = blobs(300000, 64, 10, 6, 1000.0);
		std::vector<double> c0 = near_truth(D, 10, 0.5);

		compare("300K x 64 offset 1000, k=10, given", D,
				make_params(10, GC_KMEANS_INIT_GIVEN, c0.data(), 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		setenv("GPUCLUST_KMEANS_GEMM", "sgemm", 1);
		compare("300K x 64 offset 1000, given, SGEMM", D,
				make_params(10, GC_KMEANS_INIT_GIVEN, c0.data(), 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		unsetenv("GPUCLUST_KMEANS_GEMM");
	}
	{
		Data		D = blobs(1000000, 8, 20, 7, 0.0);
		std::vector<double> c0 = near_truth(D, 20, 0.2);

		setenv("GPUCLUST_KMEANS_CHUNK_ROWS", "100000", 1);
		compare("1M x 8, k=20, given, chunks of 100K", D,
				make_params(20, GC_KMEANS_INIT_GIVEN, c0.data(), 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		compare("1M x 8, k=20, k-means++, chunks", D,
				make_params(20, GC_KMEANS_INIT_PLUSPLUS, nullptr, 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
		unsetenv("GPUCLUST_KMEANS_CHUNK_ROWS");
	}
	{
		Data		D = blobs(100000, 2, 4, 8, 0.0);
		std::vector<double> c0 = near_truth(D, 5, 0.1);

		c0[8] = 1e4;
		c0[9] = 1e4;
		compare("100K x 2, k=5, one empty at start", D,
				make_params(5, GC_KMEANS_INIT_GIVEN, c0.data(), 300, 1e-4, GC_PRECISION_FP32), 0, 1e-6);
	}
	{
		Data		D = uniform(1000000, 3, 9);

		/* no structure: ties and float rounding may send the runs apart; report only */
		compare("1M x 3 uniform, k=16, 10 iterations", D,
				make_params(16, GC_KMEANS_INIT_PLUSPLUS, nullptr, 10, 0.0, GC_PRECISION_FP32), D.n, 1e-3);
	}
	/* determinism of the GPU: the same call twice */
	{
		Data		D = uniform(2000000, 5, 10);
		gc_kmeans_params p = make_params(64, GC_KMEANS_INIT_PLUSPLUS, nullptr, 30, 1e-4, GC_PRECISION_FP32);
		Out			a(D.n, 64, 5),
					b(D.n, 64, 5);

		run_gpu(D, p, a);
		run_gpu(D, p, b);
		bool		same = a.st == GC_OK && b.st == GC_OK && a.labels == b.labels && a.centroids == b.centroids;

		printf("%-34s %s\n", "GPU twice, 2M x 5 k=64", same ? "ok   identical" : "FAIL differ");
		failures += !same;
	}
	printf("check: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}

/* One SGEMM of the distance shape (rows x k x d), scaled from a slice when the output is too big. */
static double
sgemm_ms(int64_t rows, int k, int d, bool tf32)
{
	int64_t		slice = std::min<int64_t>(rows, std::max<int64_t>(1024, (int64_t) ((size_t(8) << 30) / ((size_t) k * 4))));
	float	   *a, *b, *c;
	cublasHandle_t h;
	cudaEvent_t e0, e1;
	float		ms = 0;
	const float one = 1, zero = 0;

	cudaMalloc(&a, sizeof(float) * (size_t) k * d);
	cudaMalloc(&b, sizeof(float) * (size_t) slice * d);
	cudaMalloc(&c, sizeof(float) * (size_t) slice * k);
	cudaMemset(a, 0, sizeof(float) * (size_t) k * d);
	cudaMemset(b, 0, sizeof(float) * (size_t) slice * d);
	cublasCreate(&h);
	cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, k, (int) slice, d, &one, a, d, b, d, &zero, c, k);
	cudaEventRecord(e0);
	for (int r = 0; r < 3; r++)
		cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, k, (int) slice, d, &one, a, d, b, d, &zero, c, k);
	cudaEventRecord(e1);
	cudaEventSynchronize(e1);
	cudaEventElapsedTime(&ms, e0, e1);
	cublasDestroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	return ms / 3.0 * (double) rows / (double) slice;
}

static int
bench(const char *json_path)
{
	struct Shape
	{
		int64_t		n;
		int			d, k, iters;
	}			shapes[] = {
		{10000000, 2, 100, 20}, {10000000, 32, 1000, 10}, {1000000, 256, 20000, 25}, {1000000, 768, 1024, 10},
		{-1000000, 256, 20000, 25}		/* the same on 200 blobs */
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
	cudaDeviceProp prop;
	double		t_start = now_ms();

	cudaGetDeviceProperties(&prop, 0);
	printf("device: %s\n", prop.name);
	if (js)
		fprintf(js, "{\"device\": \"%s\", \"runs\": [\n", prop.name);
	bool		first = true;

	for (const Shape &s : shapes)
	{
		int64_t		n = s.n < 0 ? -s.n : s.n;
		Data		D = s.n < 0 ? blobs(n, s.d, 200, 11, 0.0) : uniform(n, s.d, 11);

		struct Variant
		{
			const char *label;
			gc_precision prec;
			const char *gemm;
			long		tile;
		};
		std::vector<Variant> variants = {
			{"fp32", GC_PRECISION_FP32, nullptr, 0}, {"sgemm", GC_PRECISION_FP32, "sgemm", 0},
			{"tf32", GC_PRECISION_TF32, nullptr, 0}
		};
		double		floors[2] = {-1, -1};

		for (long t : tiles)
			if (t > 0)
				variants.push_back({"fp32", GC_PRECISION_FP32, nullptr, t});
		for (const Variant &v : variants)
		{
			if (s.d <= 32 && (v.prec != GC_PRECISION_FP32 || v.gemm || v.tile))
				continue;		/* the low-dimension kernel has no GEMM */
			if (s.n < 0 && (v.gemm || v.tile))
				continue;
			if (v.gemm)
				setenv("GPUCLUST_KMEANS_GEMM", v.gemm, 1);
			if (v.tile)
				setenv("GPUCLUST_KMEANS_TILE_ROWS", std::to_string(v.tile).c_str(), 1);

			gc_kmeans_params p = make_params(s.k, GC_KMEANS_INIT_RANDOM, nullptr, s.iters, 0.0, v.prec);
			Out			g(n, s.k, s.d);

			run_gpu(D, p, g);
			unsetenv("GPUCLUST_KMEANS_GEMM");
			unsetenv("GPUCLUST_KMEANS_TILE_ROWS");
			if (g.st != GC_OK)
			{
				printf("%lld x %d k=%d %s: GPU error %d: %s\n", (long long) n, s.d, s.k, v.label, g.st,
					   g.err.c_str());
				continue;
			}
			bool		tf = v.prec == GC_PRECISION_TF32;

			if (floors[tf] < 0)
				floors[tf] = sgemm_ms(n, s.k, s.d, tf);

			double		floor_ms = floors[tf];
			std::string label = std::string(v.label) + (s.n < 0 ? " blobs" : "") +
				(v.tile ? " tile " + std::to_string(v.tile) : "");

			printf("[%4.0f s] %8lld x %-4d k=%-6d %-16s iterations %3d | per iteration %9.3f ms | iterations %9.1f ms "
				   "| init %8.1f ms | final %8.1f ms | to device %7.1f ms | call %9.1f ms | one SGEMM %s %9.3f ms"
				   " | inertia %.9e | decided in double %lld, candidates %lld, to FP32 %lld\n",
				   (now_ms() - t_start) / 1000.0, (long long) n, s.d, s.k, label.c_str(), g.r.iterations,
				   g.timing.phase_ms[3],
				   g.timing.phase_ms[1], g.timing.phase_ms[0], g.timing.phase_ms[2], g.timing.to_device_ms,
				   g.wall_ms, tf ? "tf32" : "fp32", floor_ms, g.total_inertia(),
				   (long long) g.timing.counts[0], (long long) g.timing.counts[1], (long long) g.timing.counts[2]);
			fflush(stdout);
			if (js)
			{
				fprintf(js, "%s{\"n\": %lld, \"d\": %d, \"k\": %d, \"variant\": \"%s\", \"iterations\": %d, "
						"\"per_iteration_ms\": %.4f, \"iterations_ms\": %.3f, \"init_ms\": %.3f, "
						"\"final_ms\": %.3f, \"to_device_ms\": %.3f, \"call_ms\": %.3f, \"sgemm_ms\": %.4f, "
						"\"inertia\": %.12e, \"decided_in_double\": %lld, \"candidates\": %lld, "
						"\"to_fp32\": %lld}\n",
						first ? "" : ",", (long long) n, s.d, s.k, label.c_str(), g.r.iterations,
						g.timing.phase_ms[3], g.timing.phase_ms[1], g.timing.phase_ms[0], g.timing.phase_ms[2],
						g.timing.to_device_ms, g.wall_ms, floor_ms, g.total_inertia(),
						(long long) g.timing.counts[0], (long long) g.timing.counts[1],
						(long long) g.timing.counts[2]);
				first = false;
				fflush(js);
			}
		}
	}
	/* k-means++ on the device, 10M x 2 k=100 */
	{
		Data		D = uniform(10000000, 2, 12);
		gc_kmeans_params p = make_params(100, GC_KMEANS_INIT_PLUSPLUS, nullptr, 1, 0.0, GC_PRECISION_FP32);
		Out			g(D.n, 100, 2);

		run_gpu(D, p, g);
		printf("k-means++ init 10M x 2 k=100 on the device: statistics + init %.1f ms\n", g.timing.phase_ms[0]);
		fflush(stdout);
		if (js)
			fprintf(js, "], \"kmeanspp_10Mx2_k100_init_ms\": %.3f}\n", g.timing.phase_ms[0]);
	}
	if (js)
		fclose(js);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *lib = getenv("GPUCLUST_CUDA_SO") ? getenv("GPUCLUST_CUDA_SO") : "./gpuclust_cuda.so";
	void	   *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h)
	{
		fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
		return 2;
	}
	api = ((gc_cuda_api_fn) dlsym(h, GC_CUDA_API_SYMBOL))();
	if (argc > 1 && strcmp(argv[1], "check") == 0)
		return check();
	if (argc > 1 && strcmp(argv[1], "bench") == 0)
		return bench(argc > 2 ? argv[2] : nullptr);
	if (argc > 5 && strcmp(argv[1], "one") == 0)
	{
		/* one GPU run on uniform data, for profilers: one n d k iterations */
		Data		D = uniform(atoll(argv[2]), atoi(argv[3]), 11);
		gc_kmeans_params p = make_params(atoi(argv[4]), GC_KMEANS_INIT_RANDOM, nullptr, atoi(argv[5]), 0.0,
										 GC_PRECISION_FP32);
		Out			g(D.n, p.k, D.d);

		run_gpu(D, p, g);
		printf("%s: per iteration %.3f ms\n", g.st == GC_OK ? "ok" : g.err.c_str(), g.timing.phase_ms[3]);
		return g.st == GC_OK ? 0 : 1;
	}
	fprintf(stderr, "usage: %s check | bench [json] | one n d k iterations\n", argv[0]);
	return 2;
}
