/*
 * kmeans.cu
 *    k-means on the GPU, the driver: Lloyd's algorithm with the rules of the
 *    CPU back end (src/core/kmeans.c), the same initial centroids and the
 *    same stopping rule (common/kmeans_init.h).  Here are the plan (which
 *    kernels, how much of the data stays on the device), the buffers, the
 *    phases of a call and the entry point gcu_kmeans (in the frame of
 *    entry.cuh that every algorithm shares); the kernels are in the files
 *    kmeans.cuh lists.
 *
 * The phases; each frees what it allocated for itself, and each that does
 * work has its own cancel point:
 *
 *  - init: the statistics of the data and the initial centroids;
 *  - per Lloyd iteration, assign: the nearest centroid of every row
 *    (kmeans_lowd.cu for d <= 32, kmeans_product.cu above; for rows of
 *    double precision kmeans_direct.cu, in double whatever d), with the sums
 *    of the update taken while each chunk is on the device; update: the new
 *    centroids and the re-seeding of empty clusters (kmeans_update.cu);
 *    converge: the stopping rule;
 *  - finish: a last assignment unless no row moved, each row's exact
 *    distance, and the results to the host.
 *
 * Data larger than the device memory are processed in chunks of rows that
 * are copied in for every pass; only labels and distances stay resident.
 *
 * Rows of double precision (GC_F64) stay double on the device: their
 * assignment gives the labels of double arithmetic for the current
 * centroids, as the CPU's (kmeans_direct.cu: every distance in double for
 * d <= 32, a DGEMM product checked in double above), and their update is
 * the sorted one.  The metric cosine (spherical k-means)
 * changes the update only (unit centroids, kmeans_update.cu) and the
 * output (the cosine distance dist2 / 2, inertia its sum).
 *
 * timing.phase_ms: [0] plan, statistics and initial centroids, [1] the
 * Lloyd iterations, [2] the final assignment and distances, [3]
 * milliseconds per iteration.  timing.counts (product forms, over the call):
 * [0] rows decided among several candidates in double, [1] candidates
 * compared, [2] rows through the second product (rows of single precision:
 * the DGEMM on devices with fast FP64, else the FP32 product; those sent
 * there by the TF32 check and, once most were, every row; 0 for rows of
 * double precision).
 */
#include <cfloat>
#include <cmath>
#include <cstring>

#include "entry.cuh"
#include "kmeans.cuh"
#include "phases.h"

namespace gc {
namespace km {
namespace {

/* What an update did: rows that changed cluster, clusters re-seeded, the sum of squared moves. */
struct Moves
{
	unsigned long long changed = 0;
	int32_t		reseeded = 0;
	double		shift = 0.0;
};

/* One k-means call on the device. */
class KMeans
{
  public:
	KMeans(const gc_exec &exec, const gc_tuning &tuning, const void *x, gc_dtype dtype, int64_t n, int d,
		   const gc_kmeans_params &p, gc_timing &timing)
		: exec_(exec), tuning_(tuning), hx_(x), p_(p), timing_(timing)
	{
		plan_.n = n;
		plan_.d = d;
		plan_.k = p.k;
		plan_.dtype = dtype;
		plan_.metric = p.metric;
	}

	void run(gc_kmeans_result *result);
	void assign_to(const double *centroids /* [k, d] */, gc_kmeans_assign_result *result);

  private:
	/* the plan and the buffers */
	void plan();
	void size_chunks(size_t free_b);
	void allocate();

	/* the rows on the device */
	void load_chunk(int64_t c);
	void copy_chunk(int64_t c);
	void prepare_chunk(int64_t rows);
	const void *xdev() const;

	/* the phases */
	void init_stats(bool mean_only);
	void check_single_range(double max_abs) const;
	double max_abs_rows();
	void upload_centre();
	void init_centroids();
	void one_run(gc_kmeans_result *result);
	int32_t iterate(int32_t *&labels, bool &strict);
	void assign(bool with_sums, int32_t *labels, const int32_t *labels_old);
	Moves update(const int32_t *labels);
	static bool converge(const Moves &mv, double tol_abs, bool &strict);
	void finish(gc_kmeans_result *result, int32_t *labels, bool strict);

	/* their steps */
	void pass(bool with_sums, int32_t *labels, const int32_t *labels_old);
	void assign_chunk(int64_t off, int64_t rows, bool with_sums, int32_t *labels, const int32_t *labels_old);
	void counts_to_timing();
	void distances_to_host(double *distance, const int32_t *labels, bool as_metric);
	void results_to_host(gc_kmeans_result *result, const int32_t *labels);

	const gc_exec &exec_;
	const gc_tuning tuning_;
	const void *hx_;					/* [n, d] host rows of element type plan_.dtype */
	gc_kmeans_params p_;				/* the seed is the current run's */
	gc_timing  &timing_;

	bool		assign_only_ = false;	/* assign_to: one pass, no update */
	Plan		plan_;
	DataStats	stats_;
	std::vector<double> h_cen_;			/* [k, d] initial centroids */
	Rows		rows_;
	Centroids	cen_;
	Sums		sums_;
	Report		rep_;
	Product		prod_;
	SortWork	sort_;
};

/* ---------------------------------------------------------------- the plan and the buffers */

/*
 * Whether device dev has fast FP64: FP64 tensor cores, whose DGEMM runs at
 * about the speed of its FP32 GEMM.  The driver's ratio of single- to
 * double-precision throughput is 2 on the data-centre parts (A100, compute
 * capability 8.0; H100, 9.0), whose FP64 tensor cores double that again
 * for a GEMM (H100 SXM: 67 TFLOP/s FP64 tensor against 67 FP32; measured
 * with cuBLAS by bench/kmeans_bench.sh gemm: BENCHMARKS.md, k-means), and
 * 32 or 64 on the consumer and workstation parts (8.6, 8.9, 12.x), where a
 * DGEMM costs 30 to 60 times an SGEMM; tensor cores came with 8.0 (V100,
 * 7.0, has the ratio 2 without them: its DGEMM is half its SGEMM).
 */
static bool fast_fp64(int dev, int major)
{
	int			ratio = 0;

	if (major < 8)
		return false;
	CUDA_TRY(cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, dev));
	return ratio > 0 && ratio <= 2;
}

/* Chooses the kernels and how much of the data stays on the device. */
void KMeans::plan()
{
	int			dev = 0;
	int			major = 0;
	size_t		free_b = 0,
				total_b = 0;
	const int	d = plan_.d;

	CUDA_TRY(cudaGetDevice(&dev));
	CUDA_TRY(cudaDeviceGetAttribute(&plan_.sms, cudaDevAttrMultiProcessorCount, dev));
	CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));

	plan_.maxd = plan_.dtype == GC_F64 ? -1 :
		d <= 2 ? 2 : d <= 4 ? 4 : d <= 8 ? 8 : d <= 16 ? 16 : d <= 32 ? 32 : 0;
	plan_.f64_gemm = plan_.dtype == GC_F64 && d > 32;
	CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	product_choose(prod_, p_, tuning_, major, fast_fp64(dev, major), plan_.k);
	plan_.fused = plan_.maxd > 0 && plan_.maxd <= 16 &&
		(size_t) plan_.k * plan_.maxd * 4 + (size_t) plan_.k * d * 8 + (size_t) plan_.k * 4 <= FUSED_SMEM_MAX;
	size_chunks(free_b);
}

/*
 * Rows per chunk (all of them when they fit in 90% of the free memory) and
 * rows per product.  The tuning's kmeans_tile_rows sets the rows per
 * product (benchmarks), kmeans_chunk_rows caps the rows per chunk (tests
 * use it to run the chunked path).
 */
void KMeans::size_chunks(size_t free_b)
{
	const int64_t n = plan_.n;
	const int	d = plan_.d;
	const int	k = plan_.k;
	const bool	fused = plan_.fused;
	const int	maxd = plan_.maxd;
	const bool	gemm = maxd == 0 || plan_.f64_gemm;
	const size_t vs = plan_.f64_gemm ? 8 : 4;	/* bytes of the product's values */

	/* bytes that do not depend on the chunk */
	size_t		kd = (size_t) k * d;
	size_t		fixed = kd * (8 * 5 + 4 * 3 + (plan_.f64_gemm || prod_.dgemm ? 8 : 0)) + (size_t) k * (4 * 8 + 64) +
		(size_t) d * 16 + (64u << 20);
	size_t		per_row = 4 + 4 + 4 + 8;	/* two label arrays, d2, mind2 / exact d2 */
	size_t		per_chunk_row = (size_t) d * gc_dtype_size(plan_.dtype) + (fused ? 0 : 4 * 3 + 16 + 8) +
		(gemm ? (size_t) d * vs + 8 : 0) + (maxd == 0 ? 4 * 5 + 8 : 0);
	size_t		budget = (size_t) (free_b * 0.9);

	if (gemm)
	{
		/* GEMM tiles: at most 1 GiB or an eighth of the free memory */
		size_t		dots_bytes = std::min<size_t>(size_t(1) << 30, free_b / 8);

		plan_.gemm_tile = std::max<int64_t>(1024, (int64_t) (dots_bytes / ((size_t) k * vs)));
		/*
		 * one pass (an assignment) of the checked product, whose labels do not
		 * depend on the tiles: at most 65,536 rows, less memory to map ('tf32'
		 * keeps the run's tiles, so that it gives the run's labels)
		 */
		if (assign_only_ && (prod_.refine || plan_.f64_gemm))
			plan_.gemm_tile = std::min<int64_t>(plan_.gemm_tile, 65536);
		if (tuning_.kmeans_tile_rows >= 32)
			plan_.gemm_tile = tuning_.kmeans_tile_rows;
		fixed += (size_t) plan_.gemm_tile * k * vs + (maxd == 0 ? (size_t) plan_.gemm_tile * d * 4 : 0);
		/* the tile mode's centroids, norms and centre, rows' norms; its per-row arrays below */
		if (maxd == 0)
			fixed += kd * 4 + (size_t) k * 12 + (size_t) d * 8 + (size_t) plan_.gemm_tile * 4 +
				(size_t) (plan_.gemm_tile / 4096 + 1) * ((size_t) k * (d + 2) * 4 + (size_t) d * 8);
		/* its DGEMM level: marks and lists of candidates and open rows, a tile's candidates gathered */
		if (maxd == 0 && prod_.dgemm)
			fixed += (size_t) (plan_.gemm_tile / 4096 + 1) * k * 5 + (size_t) plan_.gemm_tile * 5 +
				(size_t) (k / 4 + 1) * (d + 1) * 8;
	}
	if (!fused)
		fixed += (size_t) (k + 1) * d * 8;	/* partial sums, beyond the per-slice rows */

	size_t		need_resident = fixed + (size_t) n * (per_row + per_chunk_row) +
		(fused ? 0 : (size_t) n / GC_SLICE * d * 8);
	int64_t		cap = int64_t(1) << 30;

	if (tuning_.kmeans_chunk_rows >= 1024)
		cap = std::min<int64_t>(cap, tuning_.kmeans_chunk_rows);

	if (need_resident <= budget && n <= cap)
	{
		plan_.resident = true;
		plan_.chunk_rows = n;
	}
	else
	{
		size_t		base = fixed + (size_t) n * per_row;
		int64_t		rows = base < budget ?
			(int64_t) ((budget - base) / (per_chunk_row + (fused ? 0 : (size_t) d * 8 / GC_SLICE + 1))) : 0;

		rows = std::min<int64_t>(rows, cap);
		rows = rows / 1024 * 1024;
		if (rows < std::min<int64_t>(65536, cap))
		{
			gc::oom_bytes_needed = (int64_t) (base + 65536 * per_chunk_row);
			gc::fail(GC_ERR_OUT_OF_MEMORY,
					 "k-means of %lld rows needs at least %lld bytes of device memory (%zu free)",
					 (long long) n, (long long) gc::oom_bytes_needed, free_b);
		}
		plan_.resident = false;
		plan_.chunk_rows = rows;
	}
	if (gemm)
		plan_.gemm_tile = std::min<int64_t>(plan_.gemm_tile, plan_.chunk_rows);
}

/*
 * The device buffers of the plan, for the whole call; an assignment to
 * given centroids (assign_only_) leaves out those of the update.  Tile
 * mode's come when it starts (assign_product).
 */
void KMeans::allocate()
{
	const bool	assign_only = assign_only_;
	const int64_t n = plan_.n;
	const int	d = plan_.d;
	const int	k = plan_.k;
	const int	maxd = plan_.maxd;
	const int64_t chunk = plan_.chunk_rows;
	size_t		kd = (size_t) k * d;

	if (plan_.dtype == GC_F64)
		rows_.x64.reset((size_t) chunk * d, "k-means data");
	else
		rows_.x.reset((size_t) chunk * d, "k-means data");
	rows_.lab_a.reset(n, "k-means labels");
	if (!assign_only)
		rows_.lab_b.reset(n, "k-means labels");
	rows_.d2.reset(n, "k-means distances");
	cen_.cen.reset(kd, "centroids");
	if (!assign_only)
		cen_.cen_new.reset(kd, "centroids");
	cen_.cen_f.reset(kd, "centroids");
	cen_.mean_d.reset(d, "data mean");
	if (!assign_only)
		sums_.sums.reset(kd, "centroid sums");
	rep_.k = k;
	rep_.dev.reset(rep_.len(), "cluster sizes and moves");
	rep_.host = std::vector<unsigned long long>(rep_.len());
	CUDA_TRY(cudaMemset(rep_.dev.get(), 0, sizeof(unsigned long long) * rep_.len()));
	if (maxd > 0)
		cen_.cen_pad.reset((size_t) k * maxd, "centroids");
	if (maxd >= 32)
	{
		cen_.cnorm.reset(k, "centroid norms");
		cen_.mean_f.reset(maxd, "data mean");
	}
	if (maxd == 0)
	{
		cen_.cen_cf.reset(kd, "centroids");
		cen_.cval.reset(k, "centroid norms");
		cen_.cnrm.reset(k, "centroid norms");
		prod_.xc.reset((size_t) chunk * d, "centred data");
		prod_.xnorm.reset(chunk, "row norms");
		prod_.dots.reset((size_t) plan_.gemm_tile * k, "distance tile");
		prod_.xg.reset((size_t) plan_.gemm_tile * d, "rows for the FP32 product");
		prod_.xg_norm.reset(plan_.gemm_tile, "rows for the FP32 product");
		prod_.unres.reset(chunk, "rows for the FP32 product");
		prod_.unres_n.reset(1, "rows for the FP32 product");
	}
	if (plan_.f64_gemm || (maxd == 0 && prod_.dgemm))
	{
		/* the DGEMM form of the centroids (rows of double precision, or the DGEMM level) */
		cen_.cen_cd.reset(kd, "centroids");
		cen_.cval64.reset(k, "centroid norms");
		cen_.cmax64.reset(1, "centroid norms");
	}
	if (plan_.f64_gemm)
	{
		prod_.xc64.reset((size_t) chunk * d, "centred data");
		prod_.xnorm64.reset(chunk, "row norms");
		prod_.dots64.reset((size_t) plan_.gemm_tile * k, "distance tile");
	}
	if (assign_only)
		return;
	if (plan_.fused)
		sums_.fx.reset(kd, "fixed-point sums");
	else
		sort_workspace(plan_, sort_);
}

/* ---------------------------------------------------------------- the rows on the device */

/* Makes chunk c the content of rows_.x (a no-op when the data are resident). */
void KMeans::load_chunk(int64_t c)
{
	if (rows_.loaded == c)
		return;
	copy_chunk(c);
	prepare_chunk(plan_.chunk_len(c));
	rows_.loaded = c;
}

/* Copies the rows of chunk c into rows_.x. */
void KMeans::copy_chunk(int64_t c)
{
	int64_t		off = plan_.chunk_off(c);
	int64_t		rows = plan_.chunk_len(c);
	gc::Stopwatch sw;

	size_t		es = gc_dtype_size(plan_.dtype);

	CUDA_TRY(cudaMemcpy(const_cast<void *>(xdev()), (const char *) hx_ + (size_t) off * plan_.d * es,
						es * (size_t) rows * plan_.d, cudaMemcpyHostToDevice));
	timing_.to_device_ms += sw.ms();
}

/* The rows on the device, of element type plan_.dtype. */
const void *KMeans::xdev() const
{
	return plan_.dtype == GC_F64 ? (const void *) rows_.x64.get() : (const void *) rows_.x.get();
}

/* The centred rows and their norms of the product form, from rows_.x and the mean. */
void KMeans::prepare_chunk(int64_t rows)
{
	if (plan_.maxd == 0)
		center_rows(plan_, rows_.x.get(), rows, cen_.mean_d.get(), prod_);
	else if (plan_.f64_gemm)
		center_rows64(plan_, rows_.x64.get(), rows, cen_.mean_d.get(), prod_);
}

/* ---------------------------------------------------------------- the phases */

/*
 * Phase init, once per call: the data statistics (the centred rows of the
 * product form need the mean); mean_only for an assignment, which needs no
 * unit of tol.
 */
void KMeans::init_stats(bool mean_only)
{
	const int	d = plan_.d;

	gc::check_cancel(exec_);
	stats_.mean.assign(d, 0.0);
	stats_.lo.assign(d, 0.0);
	stats_.hi.assign(d, 0.0);
	if (plan_.resident)
	{
		copy_chunk(0);
		if (plan_.dtype == GC_F64)
			stats_device(plan_, rows_.x64.get(), stats_, cen_.mean_d.get(), mean_only);
		else
			stats_device(plan_, rows_.x.get(), stats_, cen_.mean_d.get(), mean_only);
	}
	else
		stats_host(plan_, hx_, stats_, exec_);
	upload_centre();
	if (plan_.resident)
	{
		prepare_chunk(plan_.n);
		rows_.loaded = 0;
	}
}

/* stats_.mean, the point the product forms and d > 16 centre on, to the device. */
void KMeans::upload_centre()
{
	const int	d = plan_.d;

	CUDA_TRY(cudaMemcpy(cen_.mean_d.get(), stats_.mean.data(), sizeof(double) * d, cudaMemcpyHostToDevice));
	if (plan_.maxd >= 32)
	{
		std::vector<float> mf(plan_.maxd, 0.0f);

		for (int t = 0; t < d; t++)
			mf[t] = (float) stats_.mean[t];
		CUDA_TRY(cudaMemcpy(cen_.mean_f.get(), mf.data(), sizeof(float) * plan_.maxd, cudaMemcpyHostToDevice));
	}
}

/*
 * The single-precision kernels square the rows' coordinates (or their
 * offsets from a centre or a centroid) and sum d of them: rows whose squared
 * norm could pass the float limit would give infinities and wrong labels, so
 * they are refused with a way out.  The CPU, and the GPU on rows of double
 * precision, have no such limit.  With m the largest |coordinate|, every
 * offset is at most 2 m and a product of two at most 4 m^2 per feature:
 * 16 d m^2 must stay below 2^126.  m: from the statistics of a fit, or one
 * pass over the rows for an assignment (max_abs_rows), and the given
 * centroids' largest |coordinate|.
 */
void KMeans::check_single_range(double m) const
{
	double		r2 = (double) plan_.d * m * m;

	if (plan_.dtype != GC_F32)
		return;
	if (!(16.0 * r2 < std::ldexp(1.0, 126)))
		gc::fail(GC_ERR_INVALID_ARGUMENT,
				 "the rows or centroids are too large for the GPU's single-precision k-means: a coordinate reaches "
				 "%.3g, so a squared distance could reach %.3g, past %.3g where single precision ends. Set "
				 "gpuclust.precision = 'double' (the GPU then computes in double precision), or use "
				 "device => 'cpu'",
				 m, 4.0 * r2, (double) FLT_MAX);
}

/* The largest |coordinate| of the statistics. */
static double stats_max_abs(const DataStats &st)
{
	double		m = 0.0;

	for (size_t t = 0; t < st.lo.size(); t++)
		m = std::max(m, std::max(std::fabs(st.lo[t]), std::fabs(st.hi[t])));
	return m;
}

/* The largest |coordinate| of the rows (single precision), for check_single_range. */
double KMeans::max_abs_rows()
{
	float		m = 0.0f;

	if (plan_.resident)
	{
		load_chunk(0);
		m = max_abs_device(rows_.x.get(), (size_t) plan_.n * plan_.d);
	}
	else
	{
		const float *x = static_cast<const float *>(hx_);
		const size_t count = (size_t) plan_.n * plan_.d;

		for (size_t i = 0; i < count; i++)
		{
			if ((i & (((size_t) 1 << 24) - 1)) == 0)
				gc::check_cancel(exec_);
			m = std::max(m, std::fabs(x[i]));
		}
	}
	return m;
}

/* Phase init, once per run: the initial centroids of the run's seed on the device. */
void KMeans::init_centroids()
{
	gc::check_cancel(exec_);
	initial_centroids(plan_, p_, hx_, xdev(), stats_, exec_, h_cen_, sums_.fx_scale);
	CUDA_TRY(cudaMemcpy(cen_.cen.get(), h_cen_.data(), sizeof(double) * h_cen_.size(), cudaMemcpyHostToDevice));
}

/*
 * The Lloyd iterations: assign, update, converge.  Leaves in labels the
 * device labels of the last assignment, in strict whether it moved no row;
 * returns the number of iterations.
 */
int32_t KMeans::iterate(int32_t *&labels, bool &strict)
{
	double		tol_abs = p_.tol * stats_.mean_var;
	int32_t    *labels_old = rows_.lab_b.get();
	int			it;

	labels = rows_.lab_a.get();
	CUDA_TRY(cudaMemset(labels_old, 0xff, sizeof(int32_t) * (size_t) plan_.n));
	for (it = 0; it < p_.max_iter; it++)
	{
		assign(true, labels, labels_old);

		Moves		mv = update(labels);

		if (converge(mv, tol_abs, strict))
			break;
		std::swap(labels, labels_old);
	}
	return it < p_.max_iter ? it + 1 : p_.max_iter;
}

/*
 * Phase assign: the float forms of the centroids, then one pass over the
 * chunks; with_sums also takes the sums of the update while each chunk is
 * on the device.
 */
void KMeans::assign(bool with_sums, int32_t *labels, const int32_t *labels_old)
{
	gc::check_cancel(exec_);
	prep_centroids(plan_, cen_);
	if (plan_.f64_gemm || (plan_.maxd == 0 && prod_.dgemm))
		prep_centroids64(plan_, cen_);
	prod_.escalated = 0;
	prod_.escalated_full = 0;
	pass(with_sums, labels, labels_old);
	prod_.escalated_total += prod_.escalated;
	if (with_sums)
		product_settle(prod_, plan_.n);
}

/* One pass over every chunk: assignment, and the sums of the update when asked. */
void KMeans::pass(bool with_sums, int32_t *labels, const int32_t *labels_old)
{
	const int	k = plan_.k;

	CUDA_TRY(cudaMemset(rep_.changed(), 0, sizeof(unsigned long long)));
	if (with_sums)
	{
		CUDA_TRY(cudaMemset(rep_.counts(), 0, sizeof(unsigned long long) * k));
		CUDA_TRY(cudaMemset(sums_.sums.get(), 0, sizeof(double) * (size_t) k * plan_.d));
		if (plan_.fused)
			CUDA_TRY(cudaMemset(sums_.fx.get(), 0, sizeof(unsigned long long) * (size_t) k * plan_.d));
	}
	for (int64_t c = 0; c < plan_.chunks(); c++)
	{
		int64_t		off = plan_.chunk_off(c);
		int64_t		rows = plan_.chunk_len(c);

		if (c > 0)
			gc::check_cancel(exec_);
		load_chunk(c);
		assign_chunk(off, rows, with_sums, labels, labels_old);
		if (with_sums && !plan_.fused && plan_.dtype == GC_F64)
			sorted_update(plan_, sort_, rows_.x64.get(), rows, labels + off, cen_, sums_, rep_);
		else if (with_sums && !plan_.fused)
			sorted_update(plan_, sort_, rows_.x.get(), rows, labels + off, cen_, sums_, rep_);
	}
	if (with_sums && plan_.fused)
		unfix_sums(plan_, sums_);
}

/* Nearest centroid for rows [off, off + rows) of the data, the loaded chunk. */
void KMeans::assign_chunk(int64_t off, int64_t rows, bool with_sums, int32_t *labels,
						  const int32_t *labels_old)
{
	int32_t    *lab = labels + off;
	const int32_t *old = labels_old ? labels_old + off : nullptr;
	float	   *d2 = rows_.d2.get() + off;

	if (plan_.f64_gemm)
		assign_dgemm(plan_, prod_, cen_, rep_, rows_.x64.get(), rows, lab, old, d2, exec_);
	else if (plan_.maxd < 0)
		assign_direct(plan_, rows_.x64.get(), rows, cen_.cen.get(), rep_, lab, old, d2);
	else if (plan_.maxd > 0)
		assign_lowd(plan_, with_sums && plan_.fused, rows_.x.get(), rows, cen_, sums_, rep_, lab, old, d2);
	else
		assign_product(plan_, prod_, cen_, rep_, rows_.x.get(), rows, lab, old, d2, exec_, old ? old : lab);
}

/*
 * Phase update: the new centroids from the pass's sums, the empty clusters
 * re-seeded (rare), and the new centroids made current.
 */
Moves KMeans::update(const int32_t *labels)
{
	const int	k = plan_.k;
	std::vector<unsigned long long> &h = rep_.host;
	Moves		mv;

	gc::check_cancel(exec_);
	finalize_centroids(plan_, cen_, sums_, rep_);
	CUDA_TRY(cudaMemcpy(h.data(), rep_.dev.get(), sizeof(unsigned long long) * h.size(),
						cudaMemcpyDeviceToHost));
	mv.changed = h[2 * (size_t) k];
	if (std::find(h.begin(), h.begin() + k, 0ull) != h.begin() + k)
		mv.reseeded = reseed_empty(plan_, hx_, labels, rows_.d2.get(), cen_, sums_, rep_, exec_);
	for (int j = 0; j < k; j++)
	{
		double		move;

		memcpy(&move, &h[(size_t) k + j], sizeof(double));
		mv.shift += move;
	}
	std::swap(cen_.cen, cen_.cen_new);
	return mv;
}

/*
 * Phase converge: stop when no row changed cluster and none was re-seeded
 * (strict: the labels are final), or when the centroids moved by at most
 * tol_abs in all.  No work and nothing to free, so no cancel point.
 */
bool KMeans::converge(const Moves &mv, double tol_abs, bool &strict)
{
	if (mv.changed == 0 && mv.reseeded == 0)
	{
		strict = true;
		return true;
	}
	return mv.shift <= tol_abs;
}

/* Phase finish: the final assignment (unless strict), the exact distances, the results. */
void KMeans::finish(gc_kmeans_result *result, int32_t *labels, bool strict)
{
	if (!strict)
		assign(false, labels, nullptr);
	counts_to_timing();
	distances_to_host(result->distance, labels, false);
	results_to_host(result, labels);
}

/* The product's counts (decided in double, candidates, sent to FP32) into the timing record. */
void KMeans::counts_to_timing()
{
	if (plan_.maxd == 0 || plan_.f64_gemm)
	{
		std::vector<unsigned long long> &h = rep_.host;

		CUDA_TRY(cudaMemcpy(h.data(), rep_.dev.get(), sizeof(unsigned long long) * h.size(),
							cudaMemcpyDeviceToHost));
		timing_.counts[0] = (int64_t) h[2 * (size_t) plan_.k + 1];
		timing_.counts[1] = (int64_t) h[2 * (size_t) plan_.k + 2];
		timing_.counts[2] = prod_.escalated_total;
	}
}

/*
 * Each row's squared distance to its centroid, in double, into distance[n];
 * as_metric: the metric's distance of it (gc_metric_distance, on the device).
 */
void KMeans::distances_to_host(double *distance, const int32_t *labels, bool as_metric)
{
	DeviceBuffer<double> d2x(plan_.chunk_rows, "distances");

	for (int64_t c = 0; c < plan_.chunks(); c++)
	{
		int64_t		off = plan_.chunk_off(c);
		int64_t		rows = plan_.chunk_len(c);

		if (c > 0)
			gc::check_cancel(exec_);
		load_chunk(c);
		if (plan_.dtype == GC_F64)
			exact_distances(plan_, rows_.x64.get(), rows, labels + off, cen_.cen.get(), d2x.get(), as_metric);
		else
			exact_distances(plan_, rows_.x.get(), rows, labels + off, cen_.cen.get(), d2x.get(), as_metric);

		gc::Stopwatch cp;

		CUDA_TRY(cudaMemcpy(distance + off, d2x.get(), sizeof(double) * rows, cudaMemcpyDeviceToHost));
		timing_.from_device_ms += cp.ms();
	}
}

/* Labels and centroids to the host; sizes, inertia and distances from them. */
void KMeans::results_to_host(gc_kmeans_result *result, const int32_t *labels)
{
	const int64_t n = plan_.n;
	gc::Stopwatch cp;

	CUDA_TRY(cudaMemcpy(result->labels, labels, sizeof(int32_t) * n, cudaMemcpyDeviceToHost));
	CUDA_TRY(cudaMemcpy(result->centroids, cen_.cen.get(), sizeof(double) * (size_t) plan_.k * plan_.d,
						cudaMemcpyDeviceToHost));
	timing_.from_device_ms += cp.ms();
	for (int j = 0; j < plan_.k; j++)
	{
		result->sizes[j] = 0;
		result->inertia[j] = 0.0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		double		s = result->distance[i];

		result->sizes[result->labels[i]]++;
		result->inertia[result->labels[i]] += s;
		result->distance[i] = gc_metric_distance(plan_.metric, s);
	}
	/* cosine: the sum of the distances dist2 / 2 is the sum of dist2 halved, exactly (as the CPU) */
	if (plan_.metric == GC_METRIC_COSINE)
		for (int j = 0; j < plan_.k; j++)
			result->inertia[j] *= 0.5;
}

/* One run from the seed in p_: initial centroids, iterations, the results; phase times add up. */
void KMeans::one_run(gc_kmeans_result *result)
{
	gc::Stopwatch sw;
	int32_t    *labels = nullptr;
	bool		strict = false;

	init_centroids();
	/* a run starts without labels: its first pass decides again whether it needs tile mode */
	prod_.ranked = false;
	prod_.tile_mode = false;
	CUDA_TRY(cudaDeviceSynchronize());
	timing_.phase_ms[GC_KMEANS_PHASE_INIT] += sw.ms();

	sw.restart();
	result->iterations = iterate(labels, strict);
	CUDA_TRY(cudaDeviceSynchronize());
	timing_.phase_ms[GC_KMEANS_PHASE_ITERATIONS] += sw.ms();

	sw.restart();
	finish(result, labels, strict);
	timing_.phase_ms[GC_KMEANS_PHASE_FINAL] += sw.ms();
}

/*
 * The n_init runs over the same data on the device: run r from the seed
 * gc_kmeans_run_seed(seed, r), the run that gc_kmeans_keep_run picks kept
 * (common/kmeans_init.h, the CPU back end's rule too).
 */
void KMeans::run(gc_kmeans_result *result)
{
	gc::Stopwatch total;
	gc::Stopwatch sw;
	const int64_t n = plan_.n;
	const int	k = plan_.k;
	const size_t kd = (size_t) k * plan_.d;
	const uint64_t seed = p_.seed;
	int64_t		iters;
	double		best;

	plan();
	/* cuBLAS (its handle costs tens of ms the first time) only for the products that call it */
	if (plan_.maxd == 0 || plan_.f64_gemm)
		prod_.blas.open();
	allocate();
	init_stats(false);
	check_single_range(std::max(stats_max_abs(stats_),
								p_.init == GC_KMEANS_INIT_GIVEN ?
								gc_max_abs_f64(p_.initial_centroids, (int64_t) k * plan_.d) : 0.0));
	CUDA_TRY(cudaDeviceSynchronize());
	timing_.phase_ms[GC_KMEANS_PHASE_INIT] = sw.ms();

	result->best_run = 0;
	one_run(result);
	iters = result->iterations;
	best = gc_kmeans_total_inertia(result->inertia, k);
	if (p_.n_init > 1)
	{
		std::vector<int32_t> labels(n);
		std::vector<double> distance(n), centroids(kd), inertia(k);
		std::vector<int64_t> sizes(k);
		gc_kmeans_result tmp;

		tmp.labels = labels.data();
		tmp.distance = distance.data();
		tmp.centroids = centroids.data();
		tmp.sizes = sizes.data();
		tmp.inertia = inertia.data();
		for (int r = 1; r < p_.n_init; r++)
		{
			p_.seed = gc_kmeans_run_seed(seed, r);
			one_run(&tmp);
			iters += tmp.iterations;
			if (gc_kmeans_keep_run(tmp.inertia, k, &best))
			{
				std::copy(labels.begin(), labels.end(), result->labels);
				std::copy(distance.begin(), distance.end(), result->distance);
				std::copy(centroids.begin(), centroids.end(), result->centroids);
				std::copy(sizes.begin(), sizes.end(), result->sizes);
				std::copy(inertia.begin(), inertia.end(), result->inertia);
				result->iterations = tmp.iterations;
				result->best_run = r;
			}
		}
	}
	timing_.phase_ms[GC_KMEANS_PHASE_PER_ITERATION] =
		iters > 0 ? timing_.phase_ms[GC_KMEANS_PHASE_ITERATIONS] / (double) iters : 0.0;
	timing_.compute_ms = total.ms() - timing_.to_device_ms - timing_.from_device_ms;
}

/*
 * Assignment to given centroids: the final pass of a run (assign without
 * sums, the exact distances) for these centroids.  The checked product
 * forms give the labels of the double distances whatever point they centre
 * on, so they centre on the centroids' mean (no pass over the data); the
 * unchecked forms that centre (d 17 to 32 in single precision, 'tf32')
 * centre on the data mean as a run does, so that the labels are the run's.
 */
void KMeans::assign_to(const double *centroids, gc_kmeans_assign_result *result)
{
	gc::Stopwatch total;
	gc::Stopwatch sw;
	const int	k = plan_.k;
	const int	d = plan_.d;
	int32_t    *labels = nullptr;

	assign_only_ = true;
	plan();

	const bool	product = plan_.maxd == 0 || plan_.f64_gemm;
	const bool	checked = plan_.f64_gemm || (plan_.maxd == 0 && prod_.refine);

	if (product)
		prod_.blas.open();
	allocate();
	labels = rows_.lab_a.get();
	if (checked)
	{
		stats_.mean.assign(d, 0.0);
		for (int j = 0; j < k; j++)
			for (int t = 0; t < d; t++)
				stats_.mean[t] += centroids[(size_t) j * d + t];
		for (int t = 0; t < d; t++)
			stats_.mean[t] /= k;
		upload_centre();
	}
	else if (product || plan_.maxd >= 32)
		init_stats(true);
	else
		CUDA_TRY(cudaMemset(cen_.mean_d.get(), 0, sizeof(double) * (size_t) d));
	CUDA_TRY(cudaMemcpy(cen_.cen.get(), centroids, sizeof(double) * (size_t) k * d, cudaMemcpyHostToDevice));
	if (plan_.dtype == GC_F32)
		check_single_range(std::max(max_abs_rows(), gc_max_abs_f64(centroids, (int64_t) k * d)));
	CUDA_TRY(cudaDeviceSynchronize());
	timing_.phase_ms[GC_KMEANS_ASSIGN_PHASE_PREPARE] = sw.ms();

	sw.restart();
	assign(false, labels, nullptr);
	counts_to_timing();
	CUDA_TRY(cudaDeviceSynchronize());
	timing_.phase_ms[GC_KMEANS_ASSIGN_PHASE_ASSIGN] = sw.ms();

	sw.restart();
	distances_to_host(result->distance, labels, true);

	gc::Stopwatch cp;

	CUDA_TRY(cudaMemcpy(result->labels, labels, sizeof(int32_t) * plan_.n, cudaMemcpyDeviceToHost));
	timing_.from_device_ms += cp.ms();
	timing_.phase_ms[GC_KMEANS_ASSIGN_PHASE_DISTANCES] = sw.ms();
	timing_.compute_ms = total.ms() - timing_.to_device_ms - timing_.from_device_ms;
}

} // namespace
} // namespace km
} // namespace gc

extern "C" gc_status gcu_kmeans(const gc_exec *exec, const void *xv, gc_dtype dtype, int64_t n, int32_t d,
								const gc_kmeans_params *params, gc_kmeans_result *result)
{
	GC_ENTRY_BEGIN
	gc::require(gc_check_kmeans(params, n, d, gc::error_record()));
	gc::require(gc_check_input("k-means", dtype, params->metric, gc::error_record()));
	gc::require(gc_check_centroid_values("initial_centroids",
										 params->init == GC_KMEANS_INIT_GIVEN ? params->initial_centroids : nullptr,
										 params->k, d, dtype, gc::error_record(), nullptr));

	const void *x = xv;

	gc::Call	call(exec);

	gc::require_buffers("k-means", x, n,
						result && (n == 0 || (result->labels && result->distance && result->centroids &&
											  result->sizes && result->inertia)));
	if (n == 0)
	{
		/* an empty input: no rows, no centroids */
		result->iterations = 0;
		return GC_OK;
	}
	gc::run_on_device(call, [&] {
		gc::km::KMeans km(call.exec, call.tuning, x, dtype, n, d, *params, *call.timing);

		km.run(result);
	});
	GC_ENTRY_END
}

extern "C" gc_status gcu_kmeans_assign(const gc_exec *exec, const void *xv, gc_dtype dtype, int64_t n, int32_t d,
									   const gc_kmeans_assign_params *params, gc_kmeans_assign_result *result)
{
	GC_ENTRY_BEGIN
	gc::require(gc_check_kmeans_assign(params, n, d, gc::error_record()));
	gc::require(gc_check_input("k-means assignment", dtype, params->metric, gc::error_record()));
	gc::require(gc_check_centroid_values("centroids", params->centroids, params->k, d, dtype,
										 gc::error_record(), nullptr));

	const void *x = xv;

	gc::Call	call(exec);

	gc::require_buffers("k-means assignment", x, n,
						result && (n == 0 || (result->labels && result->distance)));
	if (n == 0)
		return GC_OK;
	gc::run_on_device(call, [&] {
		gc_kmeans_params kp;

		memset(&kp, 0, sizeof(kp));
		kp.struct_size = sizeof(kp);
		kp.k = params->k;
		kp.max_iter = 1;
		kp.init = GC_KMEANS_INIT_GIVEN;
		kp.initial_centroids = params->centroids;
		kp.precision = params->precision;
		kp.n_init = 1;
		kp.metric = params->metric;

		gc::km::KMeans km(call.exec, call.tuning, x, dtype, n, d, kp, *call.timing);

		km.assign_to(params->centroids, result);
	});
	GC_ENTRY_END
}
