/*
 * checks.h
 *    The parameter checks of every algorithm, once: the glue calls them to
 *    report a bad argument to the SQL user (before the gather with n < 0,
 *    the count not known yet, and after it with the count), and both back
 *    ends call them at their entry points.  The words of each error are
 *    written here and nowhere else.
 *
 * Plain C, host only, compiled by gcc and nvcc.
 */
#ifndef GPUCLUST_CHECKS_H
#define GPUCLUST_CHECKS_H

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

/* Clears an error record. */
static inline void
gc_error_clear(gc_error *e)
{
	e->message[0] = '\0';
	e->detail[0] = '\0';
	e->hint[0] = '\0';
}

static inline void
gc_error_vformat(char *buf, const char *fmt, va_list ap)
#ifdef __GNUC__
__attribute__((format(printf, 2, 0)))
#endif
;
static inline void
gc_error_vformat(char *buf, const char *fmt, va_list ap)
{
	vsnprintf(buf, GC_ERROR_TEXT, fmt, ap);
}

/* Sets the message (detail and hint emptied) and returns status. */
static inline gc_status
gc_error_set(gc_error *e, gc_status status, const char *fmt,...)
#ifdef __GNUC__
__attribute__((format(printf, 3, 4)))
#endif
;
static inline gc_status
gc_error_set(gc_error *e, gc_status status, const char *fmt,...)
{
	va_list		ap;

	gc_error_clear(e);
	va_start(ap, fmt);
	gc_error_vformat(e->message, fmt, ap);
	va_end(ap);
	return status;
}

/* Sets the detail sentence; returns status. */
static inline gc_status
gc_error_detail(gc_error *e, gc_status status, const char *fmt,...)
#ifdef __GNUC__
__attribute__((format(printf, 3, 4)))
#endif
;
static inline gc_status
gc_error_detail(gc_error *e, gc_status status, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	gc_error_vformat(e->detail, fmt, ap);
	va_end(ap);
	return status;
}

/* Sets the hint sentence; returns status. */
static inline gc_status
gc_error_hint(gc_error *e, gc_status status, const char *fmt,...)
#ifdef __GNUC__
__attribute__((format(printf, 3, 4)))
#endif
;
static inline gc_status
gc_error_hint(gc_error *e, gc_status status, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	gc_error_vformat(e->hint, fmt, ap);
	va_end(ap);
	return status;
}

/* The shape of the input: n >= 0 rows (or < 0: not known yet), d >= 1 features. */
static inline gc_status
gc_check_shape(const char *algorithm, int64_t n, int32_t d, gc_error *e)
{
	if (n > 0 && d < 1)
		return gc_error_set(e, GC_ERR_INVALID_ARGUMENT,
							"%s needs at least one feature per row", algorithm);
	return GC_OK;
}

/* A parameter struct of another build (struct_size differs): a bug. */
static inline gc_status
gc_check_version(const char *what, uint32_t struct_size, size_t expected, gc_error *e)
{
	if (struct_size != expected)
		return gc_error_set(e, GC_ERR_INTERNAL,
							"%s of size %u, expected %zu: the parts of gpuclust are of different versions",
							what, (unsigned) struct_size, expected);
	return GC_OK;
}

/* The element type of the rows and the metric: values of this build, or a bug. */
static inline gc_status
gc_check_input(const char *algorithm, gc_dtype dtype, gc_metric metric, gc_error *e)
{
	if (dtype != GC_F32 && dtype != GC_F64)
		return gc_error_set(e, GC_ERR_INTERNAL, "%s called with element type %d",
							algorithm, (int) dtype);
	if (metric != GC_METRIC_EUCLIDEAN && metric != GC_METRIC_COSINE)
		return gc_error_set(e, GC_ERR_INTERNAL, "%s called with metric %d",
							algorithm, (int) metric);
	return GC_OK;
}

/* ---------------------------------------------------------------- feature values */

/*
 * In double precision a feature's magnitude is at most this, so that no
 * squared distance overflows: (2 * 1e150)^2 times any number of features
 * gpuclust accepts stays far below the largest double.  In single precision
 * the limit is that of real.
 */
#define GC_F64_MAX_ABS 1e150

/* The sentences of a value beyond the limit of its precision, features and centroids alike. */
#define GC_F64_RANGE_DETAIL "features are at most 1e150 in magnitude, so that squared distances do not overflow double precision."
#define GC_F64_RANGE_HINT "Scale the features, for example by dividing by a constant."
#define GC_F32_RANGE_DETAIL "these features are computed in single precision."
#define GC_F32_RANGE_HINT "Compute in double precision with SET gpuclust.precision = double, or scale the features."

/* What is wrong with one coordinate, if anything. */
typedef enum gc_value_verdict
{
	GC_VALUE_OK = 0,
	GC_VALUE_NAN,				/* NaN */
	GC_VALUE_INFINITE,			/* +/- infinity */
	GC_VALUE_OUT_OF_RANGE		/* finite, beyond the limit of the precision */
} gc_value_verdict;

/*
 * The rule for the magnitude of one coordinate, of a row or of a centroid,
 * computed in precision dtype: finite, and at most GC_F64_MAX_ABS in double
 * precision, at most FLT_MAX in single precision.  (A row's value that is not
 * zero but rounds to zero as a real is refused by the gather, which converts
 * it; centroids stay in double precision, so theirs are kept.)
 */
static inline gc_value_verdict
gc_coordinate_verdict(double v, gc_dtype dtype)
{
	if (isnan(v))
		return GC_VALUE_NAN;
	if (isinf(v))
		return GC_VALUE_INFINITE;
	if (fabs(v) > (dtype == GC_F32 ? (double) FLT_MAX : GC_F64_MAX_ABS))
		return GC_VALUE_OUT_OF_RANGE;
	return GC_VALUE_OK;
}

/* The largest |value| of count doubles (0 for none). */
static inline double
gc_max_abs_f64(const double *v, int64_t count)
{
	double		m = 0.0;

	for (int64_t i = 0; i < count; i++)
		if (fabs(v[i]) > m)
			m = fabs(v[i]);
	return m;
}

/*
 * Checks the k x d centroids c (what: "initial_centroids" or "centroids")
 * against the rules of the features they are compared with, in precision
 * dtype (GC_F64 before the rows are known: its limit is the wider one).
 * *verdict, when not NULL, gets what was wrong, for the caller's SQLSTATE
 * (the features' one: data exception for NaN and infinity, numeric value
 * out of range beyond the limit).
 */
static inline gc_status
gc_check_centroid_values(const char *what, const double *c, int32_t k, int32_t d,
						 gc_dtype dtype, gc_error *e, gc_value_verdict *verdict)
{
	if (verdict != NULL)
		*verdict = GC_VALUE_OK;
	if (c == NULL || k < 1 || d < 1)
		return GC_OK;
	for (int64_t i = 0; i < (int64_t) k * d; i++)
	{
		gc_value_verdict v = gc_coordinate_verdict(c[i], dtype);
		long long	row = (long long) (i / d + 1);
		long long	col = (long long) (i % d + 1);

		if (v == GC_VALUE_OK)
			continue;
		if (verdict != NULL)
			*verdict = v;
		if (v == GC_VALUE_NAN || v == GC_VALUE_INFINITE)
		{
			gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "row %lld, column %lld of %s is %s", row, col, what,
						 v == GC_VALUE_NAN ? "NaN" : (c[i] > 0 ? "Infinity" : "-Infinity"));
			gc_error_detail(e, GC_OK, "Centroids follow the rules of the features: finite numbers only.");
			return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
								 "Replace NaN and infinity with finite coordinates.");
		}
		if (dtype == GC_F32)
		{
			gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "row %lld, column %lld of %s is out of range for type real",
						 row, col, what);
			gc_error_detail(e, GC_OK, "The value is %g; " GC_F32_RANGE_DETAIL, c[i]);
			return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, GC_F32_RANGE_HINT);
		}
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "row %lld, column %lld of %s is out of range", row, col, what);
		gc_error_detail(e, GC_OK, "The value is %g; " GC_F64_RANGE_DETAIL, c[i]);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, GC_F64_RANGE_HINT);
	}
	return GC_OK;
}

/* ---------------------------------------------------------------- DBSCAN */

static inline gc_status
gc_check_dbscan(const gc_dbscan_params *p, int64_t n, int32_t d, gc_error *e)
{
	gc_status	st;

	if (p == NULL)
		return gc_error_set(e, GC_ERR_INTERNAL, "DBSCAN parameters are missing");
	if ((st = gc_check_version("gc_dbscan_params", p->struct_size, sizeof(*p), e)) != GC_OK)
		return st;
	if (!(p->eps > 0) || isinf(p->eps))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "eps must be positive and finite");
		gc_error_detail(e, GC_OK, "eps is %g.", p->eps);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "eps is the neighbourhood radius, in the units of the features.");
	}
	if (p->min_pts < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "min_pts must be at least 1");
		gc_error_detail(e, GC_OK, "min_pts is %d.", p->min_pts);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "min_pts counts the point itself, as in ST_ClusterDBSCAN.");
	}
	return gc_check_shape("DBSCAN", n, d, e);
}

/* ---------------------------------------------------------------- k-means */

static inline gc_status
gc_check_kmeans(const gc_kmeans_params *p, int64_t n, int32_t d, gc_error *e)
{
	gc_status	st;

	if (p == NULL)
		return gc_error_set(e, GC_ERR_INTERNAL, "k-means parameters are missing");
	if ((st = gc_check_version("gc_kmeans_params", p->struct_size, sizeof(*p), e)) != GC_OK)
		return st;
	if (p->k < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "k must be at least 1");
		gc_error_detail(e, GC_OK, "k is %d.", p->k);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, "k is the number of clusters to find.");
	}
	if (p->max_iter < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "max_iter must be at least 1");
		gc_error_detail(e, GC_OK, "max_iter is %d.", p->max_iter);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "max_iter bounds the number of Lloyd iterations; the default is 300.");
	}
	if (!(p->tol >= 0) || isinf(p->tol))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "tol must be a finite number >= 0");
		gc_error_detail(e, GC_OK, "tol is %g.", p->tol);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "tol is relative to the mean variance of the features, as in scikit-learn; "
							 "the default is 1e-4, and 0 iterates until no row changes cluster.");
	}
	if (p->init != GC_KMEANS_INIT_PLUSPLUS && p->init != GC_KMEANS_INIT_RANDOM &&
		p->init != GC_KMEANS_INIT_GIVEN && p->init != GC_KMEANS_INIT_PLUSPLUS_PLAIN)
		return gc_error_set(e, GC_ERR_INTERNAL, "unknown k-means init method %d", (int) p->init);
	if (p->n_init < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "n_init must be at least 1");
		gc_error_detail(e, GC_OK, "n_init is %d.", p->n_init);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "n_init is the number of runs from different seeds, the one of lowest inertia kept; the default is 1.");
	}
	if (p->n_init > 1 && p->init == GC_KMEANS_INIT_GIVEN)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "n_init must be 1 when initial_centroids is given");
		gc_error_detail(e, GC_OK, "n_init is %d; runs from the same initial centroids give the same answer.",
						p->n_init);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Leave n_init at 1, or leave initial_centroids NULL to start each run from init.");
	}
	if (p->precision != GC_PRECISION_FP32 && p->precision != GC_PRECISION_TF32)
		return gc_error_set(e, GC_ERR_INTERNAL, "unknown k-means precision %d", (int) p->precision);
	if (p->init == GC_KMEANS_INIT_GIVEN && d >= 1)
	{
		if (p->initial_centroids == NULL)
			return gc_error_set(e, GC_ERR_INTERNAL, "initial centroids are missing");
		if ((st = gc_check_centroid_values("initial_centroids", p->initial_centroids, p->k, d,
											GC_F64, e, NULL)) != GC_OK)
			return st;
	}
	if (n <= 0)
		return GC_OK;			/* an empty input: no rows, no centroids */
	if (p->k > n)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "k (%d) is greater than the number of rows (%lld)",
					 p->k, (long long) n);
		gc_error_detail(e, GC_OK,
						"Every cluster starts at a distinct row or at an initial centroid and needs a row.");
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Use a smaller k, or a query that returns at least k rows.");
	}
	if ((st = gc_check_shape("k-means", n, d, e)) != GC_OK)
		return st;
	return GC_OK;
}

/*
 * Checks the centroids of a k-means assignment (d >= 1 when known, else
 * only k).  The dimension of the rows is compared by the caller, which
 * names both.
 */
static inline gc_status
gc_check_kmeans_assign(const gc_kmeans_assign_params *p, int64_t n, int32_t d, gc_error *e)
{
	gc_status	st;

	if (p == NULL)
		return gc_error_set(e, GC_ERR_INTERNAL, "k-means assignment parameters are missing");
	if ((st = gc_check_version("gc_kmeans_assign_params", p->struct_size, sizeof(*p), e)) != GC_OK)
		return st;
	if (p->k < 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "centroids must hold at least one centroid");
		gc_error_detail(e, GC_OK, "k is %d.", p->k);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Pass the k x d array of a fitted model, one row per cluster.");
	}
	if (p->precision != GC_PRECISION_FP32 && p->precision != GC_PRECISION_TF32)
		return gc_error_set(e, GC_ERR_INTERNAL, "unknown k-means precision %d", (int) p->precision);
	if (d >= 1)
	{
		if (p->centroids == NULL)
			return gc_error_set(e, GC_ERR_INTERNAL, "centroids are missing");
		if ((st = gc_check_centroid_values("centroids", p->centroids, p->k, d, GC_F64, e, NULL)) != GC_OK)
			return st;
	}
	if (n < 0)
		return GC_OK;
	return gc_check_shape("k-means assignment", n, d, e);
}

/* ---------------------------------------------------------------- density peaks */

/* n_clusters when it is given: at least 1 (0 in the params means thresholds). */
static inline gc_status
gc_check_dpeaks_n_clusters(int32_t n_clusters, gc_error *e)
{
	if (n_clusters >= 1)
		return GC_OK;
	gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "n_clusters must be at least 1");
	gc_error_detail(e, GC_OK, "n_clusters is %d.", n_clusters);
	return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
						 "Leave n_clusters NULL to choose the centres with rho_min and delta_min.");
}

static inline gc_status
gc_check_dpeaks(const gc_dpeaks_params *p, int64_t n, int32_t d, gc_error *e)
{
	gc_status	st;

	if (p == NULL)
		return gc_error_set(e, GC_ERR_INTERNAL, "density peaks parameters are missing");
	if ((st = gc_check_version("gc_dpeaks_params", p->struct_size, sizeof(*p), e)) != GC_OK)
		return st;
	if (p->n_clusters < 0)
		return gc_check_dpeaks_n_clusters(p->n_clusters, e);
	if (!p->derive_dc && (!(p->dc > 0.0) || isinf(p->dc)))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "dc must be positive and finite");
		gc_error_detail(e, GC_OK, "dc is %g.", p->dc);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "dc is the cutoff distance in the units of the features; "
							 "leave it NULL to derive it from neighbor_rate.");
	}
	if (p->derive_dc && p->dc != 0.0)
		return gc_error_set(e, GC_ERR_INTERNAL, "dc is both given and to be derived");
	if (!(p->neighbor_rate > 0.0 && p->neighbor_rate < 1.0))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "neighbor_rate must be between 0 and 1 exclusive");
		gc_error_detail(e, GC_OK, "neighbor_rate is %g.", p->neighbor_rate);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "dc is chosen so that about this fraction of all pairs lies within it; "
							 "0.01 to 0.02 is usual.");
	}
	if (p->kernel != GC_DP_KERNEL_GAUSSIAN && p->kernel != GC_DP_KERNEL_CUTOFF)
		return gc_error_set(e, GC_ERR_INTERNAL, "unknown density kernel %d", (int) p->kernel);
	if (isnan(p->rho_min) || isnan(p->delta_min))
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "rho_min and delta_min must be numbers");
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
							 "Read the thresholds off the decision graph (rho against delta).");
	}
	if (n < 0)
		return GC_OK;
	if (n > 0 && p->n_clusters > n)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "n_clusters must not exceed the number of rows");
		gc_error_detail(e, GC_OK, "n_clusters is %d but the query returned %lld rows.",
						p->n_clusters, (long long) n);
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, "Ask for fewer clusters.");
	}
	if (p->derive_dc && n == 1)
	{
		gc_error_set(e, GC_ERR_INVALID_ARGUMENT, "dc cannot be estimated from a single row");
		gc_error_detail(e, GC_OK, "dc is a quantile of the distances between pairs of rows.");
		return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT, "Give dc explicitly.");
	}
	return gc_check_shape("density peaks", n, d, e);
}

/* The data, not the parameters, leave dc undefined: too many duplicate rows. */
static inline gc_status
gc_error_dpeaks_zero_quantile(gc_error *e)
{
	gc_error_set(e, GC_ERR_INVALID_ARGUMENT,
				 "the neighbor_rate quantile of the pairwise distances is zero");
	gc_error_detail(e, GC_OK,
					"dc is derived from the distances between pairs of rows, and too many of them are zero.");
	return gc_error_hint(e, GC_ERR_INVALID_ARGUMENT,
						 "Give dc explicitly, or raise neighbor_rate above the fraction of duplicate pairs.");
}

#endif							/* GPUCLUST_CHECKS_H */
