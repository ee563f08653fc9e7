/*
 * hdbscan.cu
 *    HDBSCAN on the GPU (gcu_hdbscan), with exactly the answer of the CPU
 *    back end: the same core distances, the same minimum spanning tree
 *    (unique under the order of common/hdbscan.h) and the same host part
 *    (gc_hdbscan_finish of common/hdbscan.h) after it.  This file is the
 *    driver: the memory estimate, the upload, the phases, the sort of the
 *    tree's edges and the entry point.  cuda/hdbscan.cuh lists the parts:
 *
 *   tree    a linear BVH over the rows (cuda/hdbscan_tree.cu);
 *   core    exact k-nearest-neighbour search in it, k = min_samples, one
 *           thread per row (cuda/hdbscan_search.cu);
 *   MST     Boruvka rounds of the single-tree EMST of ArborX on the mutual
 *           reachability distance (cuda/hdbscan_search.cu);
 *   sort    the n - 1 edges by (w, lo, hi): two stable CUB radix sorts,
 *           first by lo << 32 | hi, then by the bits of w (which order as
 *           the weights, all >= 0);
 *   link    the single-linkage hierarchy of the sorted edges: Boruvka
 *           rounds over the tree (cuda/hdbscan_link.cu);
 *   condense each node's place in the condensed tree, by pointer jumping
 *           over the hierarchy (cuda/hdbscan_condense.cu);
 *   finish  the clusters' stabilities, their selection (on the host) and
 *           each row's answer (cuda/hdbscan_finish.cu); only the answer
 *           comes back.  For gpu_hdbscan_tree's rows the core distances,
 *           edges, hierarchy and places come back instead and
 *           gc_hdbscan_finish runs on tuning.cpu_threads threads of the host
 *           (common/hdbscan_host.h; 0: the CPUs the process may run on, at
 *           most 64).
 *
 * Rows of single or double precision (gc_dtype) are kept in their
 * precision; dist2 is gc_dist2 / gc_dist2_f64 of common/portable.h bit for
 * bit (the helper of DBSCAN, cuda/dbscan_device.cuh), the distance
 * gc_metric_distance of common/metric.h (cosine: the caller passes unit
 * rows, as for DBSCAN).
 *
 * Memory is linear in n: about n (2 d e + 2 min(d, 16) e + 420) bytes with e
 * bytes an element, plus CUB's temporary storage (and 256 MiB of heaps when
 * min_samples > 32, 4 min_samples + 8 bytes a row of nearest rows for the
 * first Boruvka round when 2 <= min_samples <= 16), estimated before
 * anything is allocated.  The searches
 * run in chunks of rows sized to take 10 to 50 ms; the cancel callback is
 * asked while they run, and an abort flag stops a running launch.
 *
 * timing->phase_ms: [0] tree and core distances, [1] minimum spanning tree
 * (with the sort of its edges, the hierarchy and the places in the
 * condensed tree), [2] the finish (stabilities, selection and answers,
 * the copy of the answer not included) or, where the host finishes, the
 * host part; counts: [0] Boruvka rounds, [1] distance evaluations, [2]
 * clusters whose stability the host summed (cuda/hdbscan_finish.cu).
 * tuning.debug prints each search's launches, each Boruvka round and each
 * step of the finish to stderr, and checks the device's hierarchy against
 * the host's walk (gc_hdbscan_merges_differ).
 */
#include "hdbscan.cuh"

#include <cub/cub.cuh>

#include <sched.h>

#include "hdbscan_host.h"

#include <memory>
#include <thread>
#include <vector>

namespace gc {
namespace hdbscan {
namespace {

size_t sort64_temp_bytes(int32_t n)
{
	size_t		bytes = 0;
	cub::DoubleBuffer<unsigned long long> k(nullptr, nullptr);
	cub::DoubleBuffer<unsigned long long> v(nullptr, nullptr);

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, 64));
	return bytes;
}

int64_t bytes_estimate(int32_t n, int32_t d, size_t esize, int32_t k, size_t sort_tmp)
{
	const int64_t nn = n;
	const int64_t B = std::min<int32_t>(d, kMaxBoxDims);
	/*
	 * 164 bytes a row for the tree and the Boruvka rounds, 96 for the
	 * hierarchy, 160 for the places in the condensed tree (the finish
	 * needs less: at most 40 a row and 120 a cluster, at most one cluster
	 * a row)
	 */
	int64_t		need = nn * (2 * d * (int64_t) esize + 2 * B * (int64_t) esize + 420) +
		(int64_t) sort_tmp + (16 << 20);

	if (k > kLocalK)
		need += (int64_t) 256 << 20;
	if (k >= 2 && k <= kSeedK)
		need += nn * (4 * (int64_t) k + 8);	/* the nearest rows for the first Boruvka round */
	return need;
}

/* core_row [perm [pos]] = core_s [pos]. */
__global__ void scatter_core(const double *core_s, /* [n] */ const int32_t *perm, /* [n] */
							 int32_t n, double *core_row /* [n] out */)
{
	const int64_t pos = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (pos < n)
		core_row[perm[pos]] = core_s[pos];
}

/* The sorted edges as gc_hdbscan_edge. */
__global__ void pack_edges(const unsigned long long *wbits, /* [m] */
						   const unsigned long long *pair, /* [m] */
						   int32_t m, gc_hdbscan_edge *out /* [m] out */)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= m)
		return;

	gc_hdbscan_edge e;

	e.w = __longlong_as_double((long long) wbits[i]);
	e.lo = (int32_t) (pair[i] >> 32);
	e.hi = (int32_t) (pair[i] & 0xffffffffULL);
	out[i] = e;
}

/* The edges of w sorted by (w, lo, hi), into edges [n - 1] on the device. */
void sort_edges(Workspace &w, DeviceBuffer<gc_hdbscan_edge> &edges)
{
	const int32_t m = w.n - 1;
	DeviceBuffer<unsigned long long> w2(m, "the sort of the tree's edges");
	DeviceBuffer<unsigned long long> p2(m, "the sort of the tree's edges");
	size_t		tmp_bytes = sort64_temp_bytes(m);
	DeviceBuffer<unsigned char> tmp(tmp_bytes, "the sort of the tree's edges");
	cub::DoubleBuffer<unsigned long long> kp(w.edge_pair.get(), p2.get());
	cub::DoubleBuffer<unsigned long long> vw(w.edge_w.get(), w2.get());

	/* By (lo, hi), then stably by w. */
	CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, kp, vw, m, 0, 64));

	cub::DoubleBuffer<unsigned long long> kw(vw.Current(), vw.Alternate());
	cub::DoubleBuffer<unsigned long long> vp(kp.Current(), kp.Alternate());

	CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp.get(), tmp_bytes, kw, vp, m, 0, 64));
	edges.reset(m, "the minimum spanning tree");
	pack_edges<<<blocks_for(m, 256), 256>>>(kw.Current(), vp.Current(), m, edges.get());
	CHECK_LAUNCH("pack_edges");
	CUDA_TRY(cudaDeviceSynchronize());
}

/*
 * The device part: core distances by row into core [n] (unless NULL);
 * with result, the answer into it (finish); else the sorted tree into mst
 * [n - 1], its single-linkage hierarchy into merges [n - 1] and each node's
 * place in the condensed tree into states [2 n - 1], for the host.
 */
void run(Workspace &w, const void *x, /* [n, d] host */
		 const gc_hdbscan_params &p,
		 double *core, /* [n] out, host, or NULL */
		 gc_hdbscan_result *result, /* out, or NULL */
		 gc_hdbscan_edge *mst, /* [n - 1] out, host, without result */
		 gc_hdb_merge *merges, /* [n - 1] out, host, without result */
		 gc_hdb_state *states, /* [2 n - 1] out, host, without result */
		 FinishHost *host /* with result: the finish's host memory */)
{
	gc_timing  *t = w.call.timing;
	Stopwatch	sw;

	const bool	on_pairs = pairs_chosen(w);

	require_device_memory(w.call, on_pairs ? pairs_bytes_estimate(w.n, w.d, gc_dtype_size(w.dtype), w.k,
																  sort64_temp_bytes(w.n))
						  : bytes_estimate(w.n, w.d, gc_dtype_size(w.dtype), w.k, sort64_temp_bytes(w.n)),
						  "HDBSCAN", w.n, w.d);
	by_type(w.dtype, [&](auto tv) {
		using T = decltype(tv);

		w.x<T>() = upload_points(w.call, sw, (const T *) x, w.n, w.d);
	});
	w.hx = x;
	w.evals.reset(1, "a counter");
	CUDA_TRY(cudaMemset(w.evals.get(), 0, sizeof(unsigned long long)));

	Stopwatch	compute;
	DeviceBuffer<gc_hdbscan_edge> edges;
	DeviceBuffer<gc_hdb_merge> mg;
	DeviceBuffer<gc_hdb_state> st;

	timed(t->phase_ms[0], [&] {
		if (on_pairs)
			pairs_core_phase(w);	/* the engine sets timing's path and screen */
		else
		{
			t->path = GC_PATH_INDEX;
			build_tree(w);
			core_phase(w);
		}
		CUDA_TRY(cudaDeviceSynchronize());
	});
	timed(t->phase_ms[1], [&] {
		Stopwatch	lap;
		auto		step = [&](const char *done) {
			if (w.debug)
			{
				CUDA_TRY(cudaDeviceSynchronize());
				fprintf(stderr, "gpuclust hdbscan: %s, %.3f ms\n", done, lap.ms());
				lap.restart();
			}
		};

		if (on_pairs)
			pairs_mst_phase(w);
		else
			mst_phase(w);
		step("spanning tree");
		sort_edges(w, edges);
		step("edges sorted");
		linkage(w.call, edges.get(), w.n, mg);
		step("hierarchy");
		condense(w.call, edges.get(), mg.get(), w.n, w.min_cluster_size, st);
		step("places in the condensed tree");
		CUDA_TRY(cudaDeviceSynchronize());
	});
	t->compute_ms = compute.ms();
	if (w.debug)
	{
		/* the device's hierarchy against the host's walk */
		std::vector<gc_hdbscan_edge> he(edges.size());
		std::vector<gc_hdb_merge> hm(mg.size());
		int64_t		differ;

		CUDA_TRY(cudaMemcpy(he.data(), edges.get(), edges.bytes(), cudaMemcpyDeviceToHost));
		CUDA_TRY(cudaMemcpy(hm.data(), mg.get(), mg.bytes(), cudaMemcpyDeviceToHost));
		differ = gc_hdbscan_merges_differ(w.n, he.data(), hm.data());
		fprintf(stderr, "gpuclust hdbscan: %lld of %lld merges differ from the host's\n",
				(long long) differ, (long long) (w.n - 1));
		if (differ != 0)
			fail(GC_ERR_INTERNAL, "HDBSCAN's hierarchy on the device differs from the host's in %lld merges",
				 (long long) differ);
	}

	unsigned long long evals = 0;
	double		copy_ms = 0.0;

	CUDA_TRY(cudaMemcpy(&evals, w.evals.get(), sizeof(evals), cudaMemcpyDeviceToHost));
	t->counts[0] = w.rounds;
	t->counts[1] = (int64_t) evals + w.pair_exact;
	if (on_pairs)
		t->pair_exact = w.pair_exact;	/* over the engines of every pass */
	if (core)
	{
		DeviceBuffer<double> core_row(w.n, "the core distances");

		scatter_core<<<blocks_for(w.n, 256), 256>>>(w.core_s.get(), w.perm.get(), w.n, core_row.get());
		CHECK_LAUNCH("scatter_core");
		copy_results(w.call, {{core, core_row.get(), core_row.bytes()}});
		copy_ms = t->from_device_ms;
	}
	if (result)
	{
		Stopwatch	fin;

		finish(w.call, p, edges.get(), mg.get(), st.get(), w.n, result, *host);
		t->from_device_ms += copy_ms;
		t->phase_ms[2] = fin.ms() - (t->from_device_ms - copy_ms);
		return;
	}
	copy_results(w.call, {{mst, edges.get(), edges.bytes()},
						  {merges, mg.get(), mg.bytes()},
						  {states, st.get(), st.bytes()}});
	t->from_device_ms += copy_ms;
}

} // namespace
} // namespace hdbscan
} // namespace gc

/* Threads of the host part: tuning.cpu_threads, 0 for the CPUs the process may run on. */
static int host_threads(const gc::Call &call)
{
	int			threads = gc::tuning_of(call.exec).cpu_threads;

	if (threads <= 0)
	{
		cpu_set_t	cpus;

		threads = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
	}
	return threads;
}

extern "C" gc_status gcu_hdbscan(const gc_exec *exec,
								 const void *x, gc_dtype dtype, /* [n, d] row-major */
								 int64_t n, int32_t d, const gc_hdbscan_params *params,
								 gc_hdbscan_result *result)
{
	GC_ENTRY_BEGIN
	if (!params)
		return gc::set_error(GC_ERR_INTERNAL, "HDBSCAN called without parameters");
	gc::require(gc_check_hdbscan(params, n, d, gc::error_record()));
	gc::require(gc_check_input("HDBSCAN", dtype, params->metric, gc::error_record()));

	gc::Call	call(exec);

	gc::require_buffers("HDBSCAN", x, n,
						result && (n == 0 || (result->cluster &&
											  !result->probability == !result->outlier_score)));
	if (result->tree && n > 0 && result->tree->capacity < 2 * n)
		return gc::set_error(GC_ERR_INTERNAL, "HDBSCAN's tree holds %lld rows, not 2 n = %lld",
							 (long long) result->tree->capacity, (long long) (2 * n));
	result->n_clusters = 0;
	if (result->tree)
	{
		result->tree->rows = 0;
		result->tree->nodes = 0;
	}
	if (n == 0)
		return GC_OK;

	if (n == 1)
	{
		/* min_samples is 1: the row itself; the answer is the host's */
		double		core0 = 0.0;
		gc_hdbscan_edge none;
		gc_hdb_host host;
		gc_status	st;

		gc_hdb_host_begin(&host, 1, call.exec.cancel, call.exec.cancel_arg);
		st = gc_hdbscan_finish(params, n, &core0, &none, NULL, NULL, result, &host.thr,
							   call.exec.cancel, call.exec.cancel_arg, gc::error_record());
		gc_hdb_host_end(&host);
		if (st != GC_OK)
			return st;
		if (result->core_distance)
			result->core_distance[0] = core0;
		return GC_OK;
	}

	/*
	 * Without the condensed tree's rows (gpu_hdbscan_tree), the device
	 * computes the answer (cuda/hdbscan_finish.cu) and only the answer
	 * comes back.
	 */
	if (!result->tree)
	{
		/* at most kmax clusters: the leaves hold disjoint sets of min_cluster_size rows or more */
		const int64_t kmax = params->min_cluster_size >= 2 ? 2 * (n / params->min_cluster_size) + 1 : n;
		gc::hdbscan::FinishHost host(n, kmax);
		std::vector<std::pair<void *, size_t>> bufs;

		/* the clusters' arrays too, unless gigabytes (min_cluster_size 2 on tens of millions of rows) */
		if (kmax <= ((int64_t) 1 << 30) / 100)
			bufs = host.buffers();

		bufs.push_back({result->cluster, sizeof(int32_t) * (size_t) n});
		if (result->probability)
		{
			bufs.push_back({result->probability, sizeof(double) * (size_t) n});
			bufs.push_back({result->outlier_score, sizeof(double) * (size_t) n});
		}
		if (result->core_distance)
			bufs.push_back({result->core_distance, sizeof(double) * (size_t) n});

		gc::hdbscan::Prefault pf(bufs, std::min(8, host_threads(call)));

		gc::run_on_device(call, [&] {
			gc::hdbscan::Workspace w(call, dtype, (int32_t) n, d, *params);

			gc::hdbscan::run(w, x, *params, result->core_distance, result, NULL, NULL, NULL, &host);
		}, true);
		return GC_OK;
	}

	/* Host memory for the device's answer, then the device part (its memory freed on every path). */
	/* not zeroed: every element is written by the device */
	std::unique_ptr<double[]> core(new double[(size_t) n]);
	std::unique_ptr<gc_hdbscan_edge[]> mst(new gc_hdbscan_edge[(size_t) n]);
	std::unique_ptr<gc_hdb_merge[]> merges(new gc_hdb_merge[(size_t) n]);
	std::unique_ptr<gc_hdb_state[]> states(new gc_hdb_state[(size_t) (2 * n)]);

	{
		gc::hdbscan::Prefault pf({{core.get(), sizeof(double) * (size_t) n},
								  {mst.get(), sizeof(gc_hdbscan_edge) * (size_t) (n - 1)},
								  {merges.get(), sizeof(gc_hdb_merge) * (size_t) (n - 1)},
								  {states.get(), sizeof(gc_hdb_state) * (size_t) (2 * n - 1)}},
								 std::min(8, host_threads(call)));

		gc::run_on_device(call, [&] {
			gc::hdbscan::Workspace w(call, dtype, (int32_t) n, d, *params);

			gc::hdbscan::run(w, x, *params, core.get(), NULL, mst.get(), merges.get(), states.get(), NULL);
		}, true);
	}

	gc_status	st;

	{
		gc::Stopwatch sw;
		gc_hdb_host host;

		gc_hdb_host_begin(&host, host_threads(call), call.exec.cancel, call.exec.cancel_arg);
		st = gc_hdbscan_finish(params, n, core.get(), mst.get(), merges.get(), states.get(), result,
							   &host.thr, call.exec.cancel, call.exec.cancel_arg, gc::error_record());
		gc_hdb_host_end(&host);
		call.timing->phase_ms[2] = sw.ms();
	}
	if (st != GC_OK)
		return st;
	if (result->core_distance)
		memcpy(result->core_distance, core.get(), (size_t) n * sizeof(double));
	GC_ENTRY_END
}
