/*
 * pairs_call.h
 *    The one call that bench/pairs_bench.cu (GPU and CPU) and
 *    bench/pairs_cpu_bench.c (CPU alone) time: DBSCAN with (eps, min_pts),
 *    or density peaks with 50 clusters and dc from the default neighbour
 *    rate, through a back end's table, into the caller's arrays.
 */
#ifndef GPUCLUST_BENCH_PAIRS_CALL_H
#define GPUCLUST_BENCH_PAIRS_CALL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dpeaks_common.h"

/*
 * algo "dbscan" fills cluster [n] and flag [n] (core); anything else runs
 * density peaks into cluster, flag (centre), rho and delta [n].
 */
static inline gc_status
pairs_call(const gc_backend_api *api, const gc_exec *e, const char *algo, const void *x, gc_dtype t, int n,
		   int d, gc_metric m, double eps, int min_pts, int32_t *cluster, uint8_t *flag, double *rho,
		   double *delta)
{
	if (strcmp(algo, "dbscan") == 0)
	{
		gc_dbscan_params p = {sizeof(p), eps, min_pts, m};
		gc_dbscan_result res = {cluster, flag, 0};

		return api->dbscan(e, x, t, n, d, &p, &res);
	}
	else
	{
		gc_dpeaks_params p;
		gc_dpeaks_result res;

		memset(&p, 0, sizeof(p));
		memset(&res, 0, sizeof(res));
		p.struct_size = sizeof(p);
		p.n_clusters = 50;
		p.derive_dc = 1;
		p.neighbor_rate = 0.02;
		p.kernel = GC_DP_KERNEL_GAUSSIAN;
		p.seed = GC_DP_DEFAULT_SEED;
		p.metric = m;
		res.cluster = cluster;
		res.rho = rho;
		res.delta = delta;
		res.is_center = flag;
		return api->density_peaks(e, x, t, n, d, &p, &res);
	}
}

/* The arguments both benches take: N D, then the options of pairs_common_arg. */
typedef struct pairs_opts
{
	int			n;
	int			d;
	int			k;				/* --k: the neighbour whose distance eps is taken from */
	int			min_pts;
	int			reps;
	int			threads;
	int			cosine;
	int			f64;
	double		eps;			/* 0: chosen from the rows */
	const char *algo;			/* dbscan, dpeaks or both */
	const char *dump;			/* NULL, or where the float rows go */
} pairs_opts;

/* N and D from argv [1] and argv [2] (argc >= 3), the defaults for the rest. */
static inline void
pairs_opts_init(pairs_opts *o, char **argv)
{
	memset(o, 0, sizeof(*o));
	o->n = atoi(argv[1]);
	o->d = atoi(argv[2]);
	o->k = 10;
	o->min_pts = 10;
	o->reps = 3;
	o->algo = "dbscan";
}

/*
 * Takes argv [*i] (and its value, moving *i past it) when it is --cosine,
 * --f64, --k, --min-pts, --reps, --threads, --eps, --algo or --dump: 1,
 * else 0.
 */
static inline int
pairs_common_arg(pairs_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;

	if (!strcmp(a, "--cosine"))
		o->cosine = 1;
	else if (!strcmp(a, "--f64"))
		o->f64 = 1;
	else if (v == NULL)
		return 0;
	else if (!strcmp(a, "--k"))
		o->k = atoi(v);
	else if (!strcmp(a, "--min-pts"))
		o->min_pts = atoi(v);
	else if (!strcmp(a, "--reps"))
		o->reps = atoi(v);
	else if (!strcmp(a, "--threads"))
		o->threads = atoi(v);
	else if (!strcmp(a, "--eps"))
		o->eps = atof(v);
	else if (!strcmp(a, "--algo"))
		o->algo = v;
	else if (!strcmp(a, "--dump"))
		o->dump = v;
	else
		return 0;
	if (strcmp(a, "--cosine") && strcmp(a, "--f64"))
		(*i)++;
	return 1;
}

#endif							/* GPUCLUST_BENCH_PAIRS_CALL_H */
