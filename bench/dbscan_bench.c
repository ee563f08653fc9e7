/*
 * dbscan_bench.c
 *    Timings of the GPU DBSCAN without PostgreSQL (formerly the --bench mode
 *    of test/gpu/gpu_vs_cpu): one generated data set (test/data/gc_testdata.h)
 *    through the GPU back end, gpuclust_cuda.so opened with dlopen as the
 *    extension opens it, per phase, best of R runs after a warm-up; the CPU
 *    back end once on the same points, and whether both agree.  The checks
 *    of the GPU against the CPU are in test/gpu (gpu_vs_cpu dbscan).
 *
 *   .bench/dbscan_bench SHAPE N D EPS MIN_PTS [--reps R] [--no-cpu] [--dump DIR]
 *                       [--debug] [--grid auto|fine|coarse] [--lib PATH]
 *                       [--f64] [--decimals K] [--metric euclidean|cosine] [--shift S] [--unit]
 *
 *   SHAPE     a shape of gc_testdata.h (blobs, gantao, uniform, ...)
 *   --no-cpu  skip the CPU run
 *   --f64     double precision rows: the generated values as doubles
 *             (rounded to K decimals with --decimals K, as a numeric column
 *             holds them); without it single precision
 *   --shift   S added to every coordinate (after the rounding)
 *   --metric  cosine: every row scaled to unit length (gc_unit_rows) after
 *             the shift, EPS in cosine units
 *   --unit    the rows scaled to unit length as for cosine, with the metric
 *             given: Euclidean with EPS = sqrt(2 e) has the neighbours of
 *             cosine with eps e (up to the last ulp of the bound), so the
 *             two time the metric alone
 *   --dump    write DIR/SHAPE.f32 or .f64 (the points), DIR/SHAPE.labels.i32 and
 *             DIR/SHAPE.core.u8 (the GPU answer), for bench/dbscan_gpu_sklearn.py
 *
 * F32 against F64 on 10M 2-D rows with two decimals, and Euclidean against
 * cosine on the same unit rows with the same neighbours:
 *
 *   .bench/dbscan_bench round2 10000000 2 0.05 5
 *   .bench/dbscan_bench round2 10000000 2 0.05 5 --f64 --decimals 2
 *   .bench/dbscan_bench blobs 1000000 3 0.02 5 --shift -50 --unit
 *   .bench/dbscan_bench blobs 1000000 3 0.0002 5 --shift -50 --metric cosine
 *   --debug   tuning.debug: the back end prints its choices to stderr
 *   --grid    tuning.dbscan_grid: force the fine or the coarse grid
 *   --lib     the GPU back end (default $GPUCLUST_CUDA_SO, else ./gpuclust_cuda.so)
 *
 * Prints a line per GPU run and one "RESULT key=value ..." line.  Built by
 * bench/Makefile (make -C bench dbscan_bench), run from the project root by
 * bench/dbscan_gpu_bench.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc_backends.h"
#include "gc_testdata.h"
#include "metric.h"

typedef struct answer
{
	int32_t    *cluster;
	uint8_t    *is_core;
	int64_t		n_clusters;
	gc_timing	timing;
	double		wall_ms;
	gc_status	status;
	char		error[1024];
} answer;

static void
answer_alloc(answer *a, int64_t n)
{
	memset(a, 0, sizeof(*a));
	a->cluster = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
	a->is_core = (uint8_t *) malloc((size_t) n);
	if (!a->cluster || !a->is_core)
	{
		fprintf(stderr, "dbscan_bench: out of host memory\n");
		exit(2);
	}
}

static void
answer_free(answer *a)
{
	free(a->cluster);
	free(a->is_core);
}

static void
run(const gc_backend_api *api, answer *a, const void *x, gc_dtype t, gc_metric m, int64_t n,
	int32_t d, double eps, int min_pts, const gc_tuning *tuning)
{
	gc_dbscan_params p;
	gc_dbscan_result r;
	gc_exec		e = gc_h_exec(tuning, NULL, &a->timing);
	double		t0;

	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	p.eps = eps;
	p.min_pts = min_pts;
	p.metric = m;
	memset(&r, 0, sizeof(r));
	r.cluster = a->cluster;
	r.is_core = a->is_core;
	t0 = gc_h_now_ms();
	a->status = api->dbscan(&e, x, t, n, d, &p, &r);
	a->wall_ms = gc_h_now_ms() - t0;
	a->n_clusters = r.n_clusters;
	if (a->status != GC_OK)
		gc_h_error_text(api, a->error, sizeof(a->error));
}

static void
dump(const char *dir, const char *shape, const char *suffix, const void *data, size_t size, size_t count)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, shape, suffix);
	f = fopen(path, "wb");
	if (!f || fwrite(data, size, count, f) != count)
		fprintf(stderr, "dbscan_bench: cannot write %s\n", path);
	if (f)
		fclose(f);
}

static void
usage(void)
{
	fprintf(stderr, "usage: dbscan_bench SHAPE N D EPS MIN_PTS [--reps R] [--no-cpu] [--dump DIR] [--debug]\n"
			"                    [--grid auto|fine|coarse] [--lib PATH]\n"
			"                    [--f64] [--decimals K] [--metric euclidean|cosine] [--shift S] [--unit]\n"
			"shapes: %s\n", GC_TD_SHAPES);
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *shape,
			   *dumpdir = NULL,
			   *lib = NULL;
	int64_t		n;
	int32_t		d;
	double		eps;
	int			min_pts,
				reps = 3,
				with_cpu = 1,
				decimals = -1,
				unit = 0;
	gc_dtype	dtype = GC_F32;
	gc_metric	metric = GC_METRIC_EUCLIDEAN;
	double		shift = 0.0;
	void	   *rows;
	gc_tuning	tuning = gc_tuning_defaults();
	const gc_backend_api *gpu;
	gc_device_info info;
	char		why[1024];
	float	   *x;
	answer		g,
				c;
	gc_timing	best;
	double		best_wall = 0,
				t0;

	if (argc < 6)
		usage();
	shape = argv[1];
	n = atoll(argv[2]);
	d = atoi(argv[3]);
	eps = atof(argv[4]);
	min_pts = atoi(argv[5]);
	for (int i = 6; i < argc; i++)
	{
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--no-cpu") == 0)
			with_cpu = 0;
		else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
			dumpdir = argv[++i];
		else if (strcmp(argv[i], "--debug") == 0)
			tuning.debug = 1;
		else if (strcmp(argv[i], "--grid") == 0 && i + 1 < argc)
		{
			const char *gname = argv[++i];

			tuning.dbscan_grid = strcmp(gname, "fine") == 0 ? GC_DBSCAN_GRID_FINE
				: strcmp(gname, "coarse") == 0 ? GC_DBSCAN_GRID_COARSE : GC_DBSCAN_GRID_AUTO;
		}
		else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--f64") == 0)
			dtype = GC_F64;
		else if (strcmp(argv[i], "--decimals") == 0 && i + 1 < argc)
			decimals = atoi(argv[++i]);
		else if (strcmp(argv[i], "--shift") == 0 && i + 1 < argc)
			shift = atof(argv[++i]);
		else if (strcmp(argv[i], "--unit") == 0)
			unit = 1;
		else if (strcmp(argv[i], "--metric") == 0 && i + 1 < argc)
		{
			const char *mname = argv[++i];

			if (strcmp(mname, "cosine") == 0)
				metric = GC_METRIC_COSINE;
			else if (strcmp(mname, "euclidean") != 0)
				usage();
		}
		else
			usage();
	}
	if (decimals > 15 || (decimals >= 0 && dtype != GC_F64))
		usage();
	if (n < 1 || d < 1 || reps < 1)
		usage();

	gpu = gc_h_open_gpu(gc_h_cuda_path(lib), &info, why, sizeof(why));
	if (!gpu)
	{
		printf("dbscan_bench: %s\n", why);
		return 1;
	}
	printf("device 0: %s, %.1f GiB\n", info.name, info.total_memory / 1073741824.0);

	t0 = gc_h_now_ms();
	x = gc_td_alloc(n, d);
	if (!x)
	{
		fprintf(stderr, "dbscan_bench: out of host memory\n");
		return 2;
	}
	switch (gc_td_generate(shape, x, n, d, gc_td_seed(shape, n, d)))
	{
		case 1:
			break;
		case 0:
			fprintf(stderr, "dbscan_bench: unknown shape %s\n", shape);
			usage();
			break;
		default:
			fprintf(stderr, "dbscan_bench: out of host memory\n");
			return 2;
	}
	/* double rows: the values as doubles, rounded to the decimals asked for */
	rows = x;
	if (dtype == GC_F64)
	{
		double	   *xd = (double *) malloc(sizeof(double) * (size_t) n * d);
		double		scale = decimals >= 0 ? pow(10.0, decimals) : 0.0;

		if (!xd)
		{
			fprintf(stderr, "dbscan_bench: out of host memory\n");
			return 2;
		}
		for (int64_t i = 0; i < n * d; i++)
			xd[i] = (scale > 0 ? nearbyint((double) x[i] * scale) / scale : (double) x[i]) + shift;
		free(x);
		x = NULL;
		rows = xd;
	}
	else if (shift != 0)
		for (int64_t i = 0; i < n * d; i++)
			x[i] = (float) ((double) x[i] + shift);
	if ((unit || metric == GC_METRIC_COSINE) && gc_unit_rows(rows, dtype, n, d) >= 0)
	{
		fprintf(stderr, "dbscan_bench: a row has no direction; try another --shift\n");
		return 2;
	}
	printf("data %s n=%lld d=%d %s%s generated in %.0f ms\n", shape, (long long) n, d,
		   dtype == GC_F64 ? "double" : "float",
		   metric == GC_METRIC_COSINE ? " cosine" : unit ? " unit rows" : "",
		   gc_h_now_ms() - t0);

	answer_alloc(&g, n);
	run(gpu, &g, rows, dtype, metric, n, d, eps, min_pts, &tuning);	/* warm-up: context, modules */
	if (g.status != GC_OK)
	{
		printf("gpu error %s: %s\n", gc_h_status_name(g.status), g.error);
		return 1;
	}
	memset(&best, 0, sizeof(best));
	best.compute_ms = 1e300;
	for (int r = 0; r < reps; r++)
	{
		run(gpu, &g, rows, dtype, metric, n, d, eps, min_pts, &tuning);
		if (g.status != GC_OK)
		{
			printf("gpu error %s: %s\n", gc_h_status_name(g.status), g.error);
			return 1;
		}
		printf("gpu run %d: to_device %.2f compute %.2f (index %.2f core %.2f union %.2f "
			   "border+numbers %.2f) from_device %.2f wall %.2f ms\n",
			   r, g.timing.to_device_ms, g.timing.compute_ms, g.timing.phase_ms[0],
			   g.timing.phase_ms[1], g.timing.phase_ms[2], g.timing.phase_ms[3],
			   g.timing.from_device_ms, g.wall_ms);
		if (g.timing.compute_ms < best.compute_ms)
		{
			best = g.timing;
			best_wall = g.wall_ms;
		}
	}
	{
		int64_t		ncore = 0,
					nnoise = 0;

		for (int64_t i = 0; i < n; i++)
		{
			ncore += g.is_core[i];
			nnoise += g.cluster[i] < 0;
		}
		printf("RESULT gen=%s n=%lld d=%d dtype=%s metric=%s eps=%g min_pts=%d clusters=%lld core=%lld "
			   "noise=%lld gpu_to_device_ms=%.2f gpu_compute_ms=%.2f gpu_index_ms=%.2f gpu_core_ms=%.2f "
			   "gpu_union_ms=%.2f gpu_border_ms=%.2f gpu_from_device_ms=%.2f gpu_wall_ms=%.2f",
			   shape, (long long) n, d, dtype == GC_F64 ? "f64" : "f32",
			   metric == GC_METRIC_COSINE ? "cosine" : "euclidean", eps, min_pts,
			   (long long) g.n_clusters, (long long) ncore,
			   (long long) nnoise, best.to_device_ms, best.compute_ms, best.phase_ms[0], best.phase_ms[1],
			   best.phase_ms[2], best.phase_ms[3], best.from_device_ms, best_wall);
	}
	if (with_cpu)
	{
		answer_alloc(&c, n);
		run(gc_cpu_api(), &c, rows, dtype, metric, n, d, eps, min_pts, NULL);
		printf(" cpu_ms=%.1f agree=%s", c.wall_ms,
			   c.status == GC_OK && c.n_clusters == g.n_clusters &&
			   memcmp(c.cluster, g.cluster, sizeof(int32_t) * (size_t) n) == 0 &&
			   memcmp(c.is_core, g.is_core, (size_t) n) == 0 ? "yes" : "NO");
		answer_free(&c);
	}
	printf("\n");
	if (dumpdir)
	{
		dump(dumpdir, shape, dtype == GC_F64 ? "f64" : "f32", rows, gc_dtype_size(dtype), (size_t) n * d);
		dump(dumpdir, shape, "labels.i32", g.cluster, sizeof(int32_t), (size_t) n);
		dump(dumpdir, shape, "core.u8", g.is_core, 1, (size_t) n);
	}
	fflush(stdout);
	answer_free(&g);
	free(rows);
	return 0;
}
