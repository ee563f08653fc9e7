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

#endif							/* GPUCLUST_BENCH_PAIRS_CALL_H */
