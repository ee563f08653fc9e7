/*
 * gc_testdata.h
 *    The generated data sets of gpuclust's harnesses, in one place: the
 *    GPU-against-CPU checks (test/gpu) and the benchmarks (bench/) draw their
 *    points from here, so a data set has one definition and one random
 *    stream (common/rng.h: xoshiro256** seeded through splitmix64) wherever
 *    it is used.  A set is fixed by its shape, n, d and seed; gc_td_seed()
 *    derives the seed from the shape's name, n and d, so the same set comes
 *    back in every run and every program.
 *
 * Shapes (gc_td_generate() by name, with the defaults below; the functions
 * further down take the parameters):
 *
 *   blobs      20 Gaussian blobs (sd 1), centres uniform in [5, 95]^d, 5 %
 *              uniform noise in [0, 100]^d (the DBSCAN sets)
 *   uniform    uniform in [0, 100]^d
 *   dups       n rows drawn from 1000 distinct uniform points: exact
 *              duplicates only
 *   gantao     a seed spreader in [0, 1e5]^d after Gan and Tao, "DBSCAN
 *              Revisited: Mis-Claim, Un-Fixability, and Approximation"
 *              (SIGMOD 2015): a random walk that emits points in a ball of
 *              radius 100 around itself and restarts at random places, with
 *              0.01 % uniform noise
 *   outliers   blobs with 8 rows at +-1e20 (a coordinate range that forces a
 *              grid index to widen its cells)
 *   d31        31 Gaussian blobs (sd 0.6) in [0, 30]^d with 1 % uniform
 *              noise, in the manner of the D31 set of Veenman, Reinders and
 *              Backer, "A maximum variance cluster algorithm" (IEEE TPAMI
 *              2002); the density-peaks sets
 *   separated  k = 20 blobs whose centres lie at least 4 sqrt(d) + 1 apart,
 *              uniform noise of half-width 1 around each (the k-means sets;
 *              gc_td_separated() takes k, an offset, and returns the centres)
 *   unit       uniform in [0, 1)^d (the k-means timing sets)
 *
 * and the shapes users' data have that the ones above do not:
 *
 *   round2     blobs with every coordinate rounded to 0.01: many equal
 *              coordinates and distances, and a round eps (0.05) falls on
 *              the distances between grid points, where only the exact
 *              comparison decides
 *   latlon     longitude / latitude pairs (d = 2; more dimensions: further
 *              pairs) around 30 hot spots in the box of a city (2.25 to
 *              2.42 east, 48.80 to 48.90 north), spread 0.002 degrees, 10 %
 *              spread over the box, rounded to 1e-5 degrees (five decimals,
 *              about a metre); float has only 2 to 3 ulps per 1e-5 there
 *   far        blobs with 0.1 % of the rows (at least 2) 1e4 to 1e7 away
 *              from the data in random directions: far outliers, not huge
 *              coordinates
 *   close      many small tight clusters (one per 200 rows, sd 0.1) on a
 *              jittered lattice of spacing 1, so that clusters lie close to
 *              each other and border rows sit within reach of two of them
 *   wide       embedding-like rows: 16 blobs on the unit sphere, each row a
 *              centre plus Gaussian noise of total size 0.3, normalised to
 *              length 1 (for d in the hundreds)
 *   speck      uniform in [0, 1e-3]^d but for one row at 1e6 in every
 *              coordinate: a mistyped coordinate far from dense data
 *   speck0     the same rows as speck without the far one (the row keeps
 *              its uniform draw): the reference of the skew benchmarks
 *   flat       blobs whose first three coordinates are the constant 0.5
 *              (d > 3): the spread lies in the later features only
 *   chain      rows on a line (the first coordinate; the others 0) whose
 *              gaps grow along it, in random order: single linkage adds the
 *              rows to one cluster one at a time while the gaps' growth
 *              (1/n a step) is above the rounding of float coordinates (up
 *              to 1.5 n), that is for a few thousand rows; larger sets are
 *              long lines of uneven gaps, deep hierarchies whose clusters
 *              lose rows one or a few at a time
 *
 * Plain C that also compiles as C++ (bench/kmeans_bench.cu): header only,
 * static inline, explicit casts.  Coordinates are computed in double and
 * stored as float.
 */
#ifndef GPUCLUST_TESTDATA_H
#define GPUCLUST_TESTDATA_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* ---------------------------------------------------------------- draws */

/* A standard normal draw (Box-Muller, one of the pair). */
/*
 * A double of the float f moved by less than half a float step, by a function
 * of f alone: double-precision data whose rounding to float is f.
 */
static inline double
gc_td_refine(float f)
{
	float		a = fabsf(f);
	double		step = (double) nextafterf(a, INFINITY) - (double) a;
	uint32_t	bits;

	memcpy(&bits, &f, sizeof(bits));
	if (!isfinite(step) || a == 0.0f)
		return (double) f;
	return (double) f + step * ((double) (gc_mix64(bits) >> 11) / 9007199254740992.0 - 0.5) * 0.9;
}

static inline double
gc_td_normal(gc_rng *rng)
{
	double		u = 1.0 - gc_rng_uniform(rng);	/* (0, 1] */
	double		v = gc_rng_uniform(rng);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* A uniform draw in [lo, hi). */
static inline double
gc_td_between(gc_rng *rng, double lo, double hi)
{
	return lo + (hi - lo) * gc_rng_uniform(rng);
}

/* A random unit vector of d doubles. */
static inline void
gc_td_direction(gc_rng *rng, double *v, int32_t d)
{
	double		norm;

	do
	{
		norm = 0.0;
		for (int32_t k = 0; k < d; k++)
		{
			v[k] = gc_td_normal(rng);
			norm += v[k] * v[k];
		}
	} while (!(norm > 1e-300));
	norm = sqrt(norm);
	for (int32_t k = 0; k < d; k++)
		v[k] /= norm;
}

/* The seed of a named set: a hash of the name, n and d. */
static inline uint64_t
gc_td_seed(const char *name, int64_t n, int32_t d)
{
	uint64_t	h = UINT64_C(0x6763746573746461);	/* "gctestda" */

	for (const char *c = name; c && *c; c++)
		h = gc_mix64(h ^ (uint64_t) (unsigned char) *c);
	h = gc_mix64(h ^ (uint64_t) n);
	return gc_mix64(h ^ (uint64_t) (uint32_t) d);
}

/* [n, d] floats, or NULL; the caller frees. */
static inline float *
gc_td_alloc(int64_t n, int32_t d)
{
	if (n < 0 || d < 1 || (uint64_t) n > SIZE_MAX / sizeof(float) / (uint64_t) d)
		return NULL;
	return (float *) malloc(sizeof(float) * (size_t) (n > 0 ? n : 1) * (size_t) d);
}

/*
 * Rows around m centres on a line (k-means' hard case for the checked
 * product: many clusters close to each other compared to their distance
 * from the data mean): centre j = (j - (m - 1) / 2) * spacing * u for a
 * random unit vector u, row i = centre (i mod m) + N(0, noise^2) in every
 * coordinate.  Returns 0, or -1 when out of memory.
 */
static inline int
gc_td_line(float *x, int64_t n, int32_t d, int32_t m, double spacing, double noise, uint64_t seed)
{
	gc_rng		rng;
	double	   *u = (double *) malloc(sizeof(double) * (size_t) d);

	if (!u)
		return -1;
	gc_rng_seed(&rng, seed);
	gc_td_direction(&rng, u, d);
	for (int64_t i = 0; i < n; i++)
	{
		double		a = ((double) (i % m) - 0.5 * (double) (m - 1)) * spacing;

		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = (float) (a * u[t] + noise * gc_td_normal(&rng));
	}
	free(u);
	return 0;
}

/* Every coordinate rounded to the nearest multiple of step (as a user's numeric(.., 2) would be). */
static inline void
gc_td_round(float *x, int64_t n, int32_t d, double step)
{
	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) (nearbyint((double) x[i] / step) * step);
}

/* ---------------------------------------------------------------- Gaussian blobs */

typedef struct gc_td_blob_spec
{
	int32_t		k;				/* blobs */
	double		box;			/* the data box is [0, box]^d */
	double		margin;			/* centres uniform in [margin, box - margin]^d */
	double		sd;				/* of each coordinate around its centre */
	double		noise;			/* fraction of rows uniform in the box */
} gc_td_blob_spec;

/* The DBSCAN blobs: 20 blobs of sd 1 in [0, 100]^d, 5 % noise. */
static inline gc_td_blob_spec
gc_td_blobs_default(void)
{
	gc_td_blob_spec s = {20, 100.0, 5.0, 1.0, 0.05};

	return s;
}

/* The D31-like density-peaks blobs: 31 blobs of sd 0.6 in [0, 30]^d, 1 % noise. */
static inline gc_td_blob_spec
gc_td_d31_default(void)
{
	gc_td_blob_spec s = {31, 30.0, 0.0, 0.6, 0.01};

	return s;
}

/*
 * n rows of d features around spec.k Gaussian blobs; each row is noise with
 * probability spec.noise, else of a blob chosen uniformly.  truth [n] (may
 * be NULL) gets the blob of each row, -1 for noise.  Returns 0, or -1 when
 * out of memory.
 */
static inline int
gc_td_blobs(float *x, int64_t n, int32_t d, const gc_td_blob_spec *spec, uint64_t seed,
			int32_t *truth)
{
	gc_rng		rng;
	double	   *c = (double *) malloc(sizeof(double) * (size_t) spec->k * (size_t) d);

	if (!c)
		return -1;
	gc_rng_seed(&rng, seed);
	for (int64_t i = 0; i < (int64_t) spec->k * d; i++)
		c[i] = gc_td_between(&rng, spec->margin, spec->box - spec->margin);
	for (int64_t i = 0; i < n; i++)
	{
		float	   *p = x + i * d;

		if (gc_rng_uniform(&rng) < spec->noise)
		{
			for (int32_t k = 0; k < d; k++)
				p[k] = (float) gc_td_between(&rng, 0.0, spec->box);
			if (truth)
				truth[i] = -1;
		}
		else
		{
			int32_t		b = (int32_t) gc_rng_below(&rng, (uint64_t) spec->k);

			for (int32_t k = 0; k < d; k++)
				p[k] = (float) (c[(int64_t) b * d + k] + spec->sd * gc_td_normal(&rng));
			if (truth)
				truth[i] = b;
		}
	}
	free(c);
	return 0;
}

/* ---------------------------------------------------------------- separated blobs (k-means) */

/*
 * n rows around k centres at least 4 sqrt(d) + 1 apart (drawn in a box that
 * grows with k, shifted by offset in every coordinate), each row its centre
 * plus uniform noise in [-1, 1) per feature.  centres [k, d] and truth [n]
 * (either may be NULL) get the centres and the centre of each row.
 * Returns 0, or -1 when out of memory.
 */
static inline int
gc_td_separated(float *x, int64_t n, int32_t d, int32_t k, double offset, uint64_t seed,
				double *centres, int32_t *truth)
{
	gc_rng		rng;
	double		sep = 4.0 * sqrt((double) d) + 1.0;
	double		box = sep * pow((double) k, 1.0 / (d < 8 ? d : 8)) * 4.0;
	double	   *c = centres ? centres : (double *) malloc(sizeof(double) * (size_t) k * (size_t) d);

	if (!c)
		return -1;
	gc_rng_seed(&rng, seed);
	for (int32_t j = 0; j < k; j++)
	{
		for (;;)
		{
			int			ok = 1;

			for (int32_t t = 0; t < d; t++)
				c[(int64_t) j * d + t] = offset + gc_td_between(&rng, -box, box);
			for (int32_t i = 0; i < j && ok; i++)
			{
				double		s = 0.0;

				for (int32_t t = 0; t < d; t++)
				{
					double		u = c[(int64_t) j * d + t] - c[(int64_t) i * d + t];

					s += u * u;
				}
				ok = sqrt(s) > sep;
			}
			if (ok)
				break;
		}
	}
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		j = (int32_t) gc_rng_below(&rng, (uint64_t) k);

		if (truth)
			truth[i] = j;
		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = (float) (c[(int64_t) j * d + t] + gc_td_between(&rng, -1.0, 1.0));
	}
	if (!centres)
		free(c);
	return 0;
}

/* ---------------------------------------------------------------- uniform, duplicates */

static inline void
gc_td_uniform(float *x, int64_t n, int32_t d, double lo, double hi, uint64_t seed)
{
	gc_rng		rng;

	gc_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n * d; i++)
		x[i] = (float) gc_td_between(&rng, lo, hi);
}

/* n rows, each a copy of one of m distinct points uniform in [0, box)^d.  Returns 0 or -1. */
static inline int
gc_td_dups(float *x, int64_t n, int32_t d, int32_t m, double box, uint64_t seed)
{
	gc_rng		rng;
	float	   *base = (float *) malloc(sizeof(float) * (size_t) m * (size_t) d);

	if (!base)
		return -1;
	gc_rng_seed(&rng, seed);
	for (int64_t i = 0; i < (int64_t) m * d; i++)
		base[i] = (float) gc_td_between(&rng, 0.0, box);
	for (int64_t i = 0; i < n; i++)
		memcpy(x + i * d, base + (int64_t) gc_rng_below(&rng, (uint64_t) m) * d, sizeof(float) * (size_t) d);
	free(base);
	return 0;
}

/* ---------------------------------------------------------------- seed spreader */

/*
 * The seed spreader of Gan and Tao (see the top): in [0, box]^d a walker
 * emits per_step points uniform in the ball of the given radius around
 * itself, then moves 50 d in a random direction (reflected at the box) or,
 * with probability 10 / (n / per_step), jumps to a random place; each point
 * is uniform noise in the box with probability 1e-4.  Returns 0 or -1.
 */
static inline int
gc_td_gantao(float *x, int64_t n, int32_t d, uint64_t seed)
{
	const double box = 1e5,
				radius = 100.0,
				shift = 50.0 * d;
	const int64_t per_step = 100;
	const double restart = 10.0 / ((double) (n > per_step ? n : per_step) / per_step);
	gc_rng		rng;
	double	   *s = (double *) malloc(sizeof(double) * 3 * (size_t) d);
	double	   *o = s + d,
			   *dir = s + 2 * d;

	if (!s)
		return -1;
	gc_rng_seed(&rng, seed);
	for (int32_t k = 0; k < d; k++)
		s[k] = gc_td_between(&rng, 0.0, box);
	for (int64_t i = 0; i < n;)
	{
		for (int64_t t = 0; t < per_step && i < n; t++, i++)
		{
			float	   *p = x + i * d;

			if (gc_rng_uniform(&rng) < 1e-4)
			{
				for (int32_t k = 0; k < d; k++)
					p[k] = (float) gc_td_between(&rng, 0.0, box);
				continue;
			}
			/* uniform in the ball: a direction and a radius of density r^(d-1) */
			gc_td_direction(&rng, o, d);
			{
				double		r = radius * pow(gc_rng_uniform(&rng), 1.0 / d);

				for (int32_t k = 0; k < d; k++)
					p[k] = (float) (s[k] + r * o[k]);
			}
		}
		if (gc_rng_uniform(&rng) < restart)
			for (int32_t k = 0; k < d; k++)
				s[k] = gc_td_between(&rng, 0.0, box);
		else
		{
			gc_td_direction(&rng, dir, d);
			for (int32_t k = 0; k < d; k++)
			{
				s[k] += shift * dir[k];
				if (s[k] < 0)
					s[k] = -s[k];
				if (s[k] > box)
					s[k] = 2 * box - s[k];
			}
		}
	}
	free(s);
	return 0;
}

/* ---------------------------------------------------------------- users' shapes */

/*
 * Longitude / latitude pairs (see latlon at the top), rounded to 1e-5
 * degrees; odd d: the last feature is a third coordinate in [0, 100) metres
 * rounded to 0.01.  Returns 0 or -1.
 */
static inline int
gc_td_latlon(float *x, int64_t n, int32_t d, uint64_t seed)
{
	enum
	{
		SPOTS = 30
	};
	const double lon0 = 2.25,
				lon1 = 2.42,
				lat0 = 48.80,
				lat1 = 48.90,
				spread = 0.002;
	gc_rng		rng;
	int32_t		pairs = d / 2;
	double	   *spot = (double *) malloc(sizeof(double) * SPOTS * 2 * (size_t) (pairs > 0 ? pairs : 1));

	if (!spot)
		return -1;
	gc_rng_seed(&rng, seed);
	for (int32_t s = 0; s < SPOTS * (pairs > 0 ? pairs : 1); s++)
	{
		spot[2 * s] = gc_td_between(&rng, lon0, lon1);
		spot[2 * s + 1] = gc_td_between(&rng, lat0, lat1);
	}
	for (int64_t i = 0; i < n; i++)
	{
		float	   *p = x + i * d;
		int			background = gc_rng_uniform(&rng) < 0.10;
		int32_t		s = (int32_t) gc_rng_below(&rng, SPOTS);

		for (int32_t q = 0; q < pairs; q++)
		{
			double		lon,
						lat;

			if (background)
			{
				lon = gc_td_between(&rng, lon0, lon1);
				lat = gc_td_between(&rng, lat0, lat1);
			}
			else
			{
				lon = spot[2 * (q * SPOTS + s)] + spread * gc_td_normal(&rng);
				lat = spot[2 * (q * SPOTS + s) + 1] + spread * gc_td_normal(&rng);
			}
			p[2 * q] = (float) (nearbyint(lon * 1e5) / 1e5);
			p[2 * q + 1] = (float) (nearbyint(lat * 1e5) / 1e5);
		}
		if (d % 2)
			p[d - 1] = (float) (nearbyint(gc_td_between(&rng, 0.0, 100.0) * 100.0) / 100.0);
	}
	free(spot);
	return 0;
}

/*
 * Replaces about fraction * n rows (at least 2, at most n) by far outliers:
 * a row of the data moved 10^u, u uniform in [4, 7], in a random direction.
 * Which rows is drawn from seed.  Returns 0 or -1.
 */
static inline int
gc_td_far_outliers(float *x, int64_t n, int32_t d, double fraction, uint64_t seed)
{
	gc_rng		rng;
	int64_t		m = (int64_t) (fraction * (double) n);
	double	   *dir = (double *) malloc(sizeof(double) * (size_t) d);

	if (!dir)
		return -1;
	if (m < 2)
		m = 2;
	if (m > n)
		m = n;
	gc_rng_seed(&rng, seed ^ UINT64_C(0x6661722d6f75746c));
	for (int64_t t = 0; t < m; t++)
	{
		int64_t		i = (int64_t) gc_rng_below(&rng, (uint64_t) n);
		double		dist = pow(10.0, gc_td_between(&rng, 4.0, 7.0));

		gc_td_direction(&rng, dir, d);
		for (int32_t k = 0; k < d; k++)
			x[i * d + k] = (float) ((double) x[i * d + k] + dist * dir[k]);
	}
	free(dir);
	return 0;
}

/*
 * Many close clusters: one per per_cluster rows (at least one), centres on
 * the points of a lattice of spacing 1 (side ceil(m^(1/d)), filled in
 * mixed-radix order) moved by up to +-0.1, rows Gaussian around them with
 * the given sd.
 */
static inline void
gc_td_close(float *x, int64_t n, int32_t d, int64_t per_cluster, double sd, uint64_t seed)
{
	gc_rng		rng;
	int64_t		m = n / (per_cluster > 0 ? per_cluster : 1);
	int64_t		side;

	if (m < 1)
		m = 1;
	side = (int64_t) ceil(pow((double) m, 1.0 / d) - 1e-9);
	if (side < 1)
		side = 1;
	gc_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		c = (int64_t) gc_rng_below(&rng, (uint64_t) m);
		gc_rng		jitter;

		/* the jitter of centre c is drawn from its own stream, the same for every row */
		gc_rng_seed(&jitter, seed ^ gc_mix64((uint64_t) c));
		for (int32_t k = 0; k < d; k++)
		{
			double		centre = (double) (c % side) + gc_td_between(&jitter, -0.1, 0.1);

			c /= side;
			x[i * d + k] = (float) (centre + sd * gc_td_normal(&rng));
		}
	}
}

/*
 * Embedding-like rows: k centres uniform on the unit sphere, each row a
 * centre plus Gaussian noise of expected length spread, scaled to length 1.
 * Returns 0 or -1.
 */
static inline int
gc_td_wide(float *x, int64_t n, int32_t d, int32_t k, double spread, uint64_t seed)
{
	gc_rng		rng;
	double	   *c = (double *) malloc(sizeof(double) * ((size_t) k + 1) * (size_t) d);
	double	   *v;
	double		sd = spread / sqrt((double) d);

	if (!c)
		return -1;
	v = c + (int64_t) k * d;
	gc_rng_seed(&rng, seed);
	for (int32_t j = 0; j < k; j++)
		gc_td_direction(&rng, c + (int64_t) j * d, d);
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		j = (int32_t) gc_rng_below(&rng, (uint64_t) k);
		double		norm = 0.0;

		for (int32_t t = 0; t < d; t++)
		{
			v[t] = c[(int64_t) j * d + t] + sd * gc_td_normal(&rng);
			norm += v[t] * v[t];
		}
		norm = sqrt(norm);
		for (int32_t t = 0; t < d; t++)
			x[i * d + t] = (float) (v[t] / norm);
	}
	free(c);
	return 0;
}

/* chain: see the top. */
static inline void
gc_td_chain(float *x, int64_t n, int32_t d, uint64_t seed)
{
	gc_rng		rng;

	gc_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
		for (int32_t k = 0; k < d; k++)
			x[i * d + k] = k == 0 ? (float) ((double) i + 0.5 * (double) i * ((double) i / (double) n)) : 0.0f;
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) gc_rng_below(&rng, (uint64_t) (i + 1));
		float		t = x[i * d];

		x[i * d] = x[j * d];
		x[j * d] = t;
	}
}

/* ---------------------------------------------------------------- by name */

/* The names gc_td_generate() knows, for usage messages. */
#define GC_TD_SHAPES "blobs uniform dups gantao outliers d31 separated unit round2 latlon far close wide chain"

/*
 * Fills x [n, d] with the named shape (see the top) from seed.  Returns 1,
 * 0 for an unknown name, -1 when out of memory.
 */
static inline int
gc_td_generate(const char *shape, float *x, int64_t n, int32_t d, uint64_t seed)
{
	if (strcmp(shape, "blobs") == 0 || strcmp(shape, "outliers") == 0 ||
		strcmp(shape, "round2") == 0 || strcmp(shape, "far") == 0)
	{
		gc_td_blob_spec s = gc_td_blobs_default();

		if (gc_td_blobs(x, n, d, &s, seed, NULL) != 0)
			return -1;
		if (strcmp(shape, "outliers") == 0)
			for (int64_t i = 0; i < n && i < 8; i++)
				for (int32_t k = 0; k < d; k++)
					x[(i * 7919) % n * d + k] = (i & 1) ? 1e20f : -1e20f;
		if (strcmp(shape, "round2") == 0)
			gc_td_round(x, n, d, 0.01);
		if (strcmp(shape, "far") == 0 && gc_td_far_outliers(x, n, d, 0.001, seed) != 0)
			return -1;
		return 1;
	}
	if (strcmp(shape, "d31") == 0)
	{
		gc_td_blob_spec s = gc_td_d31_default();

		return gc_td_blobs(x, n, d, &s, seed, NULL) == 0 ? 1 : -1;
	}
	if (strcmp(shape, "uniform") == 0)
	{
		gc_td_uniform(x, n, d, 0.0, 100.0, seed);
		return 1;
	}
	if (strcmp(shape, "unit") == 0)
	{
		gc_td_uniform(x, n, d, 0.0, 1.0, seed);
		return 1;
	}
	if (strcmp(shape, "dups") == 0)
		return gc_td_dups(x, n, d, 1000, 100.0, seed) == 0 ? 1 : -1;
	if (strcmp(shape, "gantao") == 0)
		return gc_td_gantao(x, n, d, seed) == 0 ? 1 : -1;
	if (strcmp(shape, "separated") == 0)
		return gc_td_separated(x, n, d, 20, 0.0, seed, NULL, NULL) == 0 ? 1 : -1;
	if (strcmp(shape, "latlon") == 0)
		return gc_td_latlon(x, n, d, seed) == 0 ? 1 : -1;
	if (strcmp(shape, "close") == 0)
	{
		gc_td_close(x, n, d, 200, 0.1, seed);
		return 1;
	}
	if (strcmp(shape, "wide") == 0)
		return gc_td_wide(x, n, d, 16, 0.3, seed) == 0 ? 1 : -1;
	if (strcmp(shape, "speck") == 0 || strcmp(shape, "speck0") == 0)
	{
		gc_td_uniform(x, n, d, 0.0, 1e-3, gc_td_seed("speck", n, d));
		for (int32_t k = 0; k < d && strcmp(shape, "speck") == 0; k++)
			x[(n / 2) * d + k] = 1e6f;
		return 1;
	}
	if (strcmp(shape, "chain") == 0)
	{
		gc_td_chain(x, n, d, seed);
		return 1;
	}
	if (strcmp(shape, "flat") == 0)
	{
		gc_td_blob_spec s = gc_td_blobs_default();

		if (gc_td_blobs(x, n, d, &s, seed, NULL) != 0)
			return -1;
		for (int64_t i = 0; i < n; i++)
			for (int32_t k = 0; k < d && k < 3; k++)
				x[i * d + k] = 0.5f;
		return 1;
	}
	return 0;
}

#endif							/* GPUCLUST_TESTDATA_H */
