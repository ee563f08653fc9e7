/*
 * hdbscan_file_bench.c
 *    HDBSCAN of a matrix read from a file, on the CPU or the GPU back end,
 *    through the back-end table as the extension calls it: the runner behind
 *    bench/hdbscan_anchors.py, which gives scikit-learn and the hdbscan
 *    library the same rows.
 *
 *   .bench/hdbscan_file_bench FILE N D MIN_CLUSTER_SIZE MIN_SAMPLES [options]
 *   --device cpu|gpu  (default cpu)
 *   --threads T       CPU threads (default: every CPU)
 *   --f64             FILE holds doubles (default: floats), row-major [N, D]
 *   --labels OUT      write the labels (int32 [N]) to OUT
 *   --repeat R        run R times, report the fastest (default 1)
 *   --lib PATH        the GPU back end (default $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so)
 *
 * Prints one line of JSON: the device, the times of the phases (the
 * fastest run), the clusters and the noise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_backends.h"

int
main(int argc, char **argv)
{
	const char *file,
			   *device = "cpu",
			   *labels_out = NULL,
			   *lib = NULL;
	int64_t		n;
	int32_t		d;
	int			f64 = 0,
				repeat = 1,
				threads = 0;
	gc_hdbscan_params p;
	gc_hdbscan_result r;
	gc_tuning	tu = gc_tuning_defaults();
	const gc_backend_api *api;
	void	   *x;
	size_t		esize;
	FILE	   *f;
	double		best_ms = -1;
	gc_timing	best_t = {0};
	char		why[2048];
	int64_t		noise = 0;
	gc_device_info info;

	if (argc < 6)
	{
		fprintf(stderr, "usage: %s FILE N D MIN_CLUSTER_SIZE MIN_SAMPLES [--device cpu|gpu] "
				"[--threads T] [--f64] [--labels OUT] [--repeat R] [--lib PATH]\n", argv[0]);
		return 2;
	}
	file = argv[1];
	n = atoll(argv[2]);
	d = atoi(argv[3]);
	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.min_cluster_size = atoi(argv[4]);
	p.min_samples = atoi(argv[5]);
	p.method = GC_HDBSCAN_EOM;
	p.metric = GC_METRIC_EUCLIDEAN;
	for (int i = 6; i < argc; i++)
	{
		if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
			device = argv[++i];
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--f64") == 0)
			f64 = 1;
		else if (strcmp(argv[i], "--labels") == 0 && i + 1 < argc)
			labels_out = argv[++i];
		else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else
		{
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	esize = f64 ? sizeof(double) : sizeof(float);
	x = malloc(esize * (size_t) n * (size_t) d);
	f = fopen(file, "rb");
	if (x == NULL || f == NULL || fread(x, esize, (size_t) n * d, f) != (size_t) n * d)
	{
		fprintf(stderr, "cannot read %lld x %d values from %s\n", (long long) n, d, file);
		return 1;
	}
	fclose(f);
	if (strcmp(device, "gpu") == 0)
	{
		api = gc_h_open_gpu(gc_h_cuda_path(lib), &info, why, sizeof(why));
		if (api == NULL)
		{
			fprintf(stderr, "no GPU back end: %s\n", why);
			return 1;
		}
		device = info.name;
	}
	else
		api = gc_cpu_api();
	tu.cpu_threads = threads;
	memset(&r, 0, sizeof(r));
	r.cluster = malloc(sizeof(int32_t) * (size_t) n);
	r.probability = malloc(sizeof(double) * (size_t) n);
	r.outlier_score = malloc(sizeof(double) * (size_t) n);
	for (int rep = 0; rep < repeat; rep++)
	{
		gc_timing	t;
		gc_exec		e = gc_h_exec(&tu, NULL, &t);
		double		t0 = gc_h_now_ms(),
					ms;
		gc_status	st = api->hdbscan(&e, x, f64 ? GC_F64 : GC_F32, n, d, &p, &r);

		ms = gc_h_now_ms() - t0;
		if (st != GC_OK)
		{
			fprintf(stderr, "HDBSCAN failed: %s\n", gc_h_error_text(api, why, sizeof(why)));
			return 1;
		}
		if (best_ms < 0 || ms < best_ms)
		{
			best_ms = ms;
			best_t = t;
		}
	}
	for (int64_t i = 0; i < n; i++)
		noise += r.cluster[i] < 0;
	if (labels_out)
	{
		f = fopen(labels_out, "wb");
		if (f == NULL || fwrite(r.cluster, sizeof(int32_t), (size_t) n, f) != (size_t) n)
		{
			fprintf(stderr, "cannot write %s\n", labels_out);
			return 1;
		}
		fclose(f);
	}
	printf("{\"device\": \"%s\", \"n\": %lld, \"d\": %d, \"min_cluster_size\": %d, \"min_samples\": %d, "
		   "\"wall_ms\": %.3f, \"compute_ms\": %.3f, \"to_device_ms\": %.3f, \"from_device_ms\": %.3f, "
		   "\"core_ms\": %.3f, \"mst_ms\": %.3f, \"tree_ms\": %.3f, \"rounds\": %lld, "
		   "\"distances\": %lld, \"threads\": %d, \"clusters\": %lld, \"noise\": %lld}\n",
		   device, (long long) n, d, p.min_cluster_size, p.min_samples, best_ms, best_t.compute_ms,
		   best_t.to_device_ms, best_t.from_device_ms, best_t.phase_ms[0], best_t.phase_ms[1],
		   best_t.phase_ms[2], (long long) best_t.counts[0], (long long) best_t.counts[1],
		   best_t.threads, (long long) r.n_clusters, (long long) noise);
	return 0;
}
