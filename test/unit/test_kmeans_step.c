/*
 * test_kmeans_step.c
 *    The exact sums of common/kmeans_step.h: one value comes back as itself,
 *    two values round as IEEE addition rounds them (a + b correctly
 *    rounded), the normalized accumulator does not depend on the order of
 *    the additions or on how they are split and merged, and sums that
 *    cancel are exactly zero; the 128-bit block sums (gc_wacc) folded into a
 *    superaccumulator give the same accumulator as adding every value to it,
 *    whatever the window and wherever the values fall; the nearest-centroid
 *    rule against gc_dist2_f64.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kmeans_step.h"
#include "rng.h"
#include "unit.h"

/* A random double over many binades, subnormals and both signs included. */
static double
random_double(gc_rng *rng)
{
	uint64_t	kind = gc_rng_below(rng, 8);
	double		m = gc_rng_uniform(rng) + 0.5;
	double		v;

	if (kind == 0)
		v = ldexp(m, -1074 + (int) gc_rng_below(rng, 60));	/* subnormal and tiny */
	else if (kind == 1)
		v = ldexp(m, 400 + (int) gc_rng_below(rng, 100));	/* huge */
	else
		v = ldexp(m, (int) gc_rng_below(rng, 120) - 60);
	return gc_rng_below(rng, 2) ? -v : v;
}

static double
sum_of(const double *v, int n)
{
	gc_sacc		a;

	memset(&a, 0, sizeof(a));
	for (int i = 0; i < n; i++)
		gc_sacc_add(&a, v[i]);
	gc_sacc_normalize(&a);
	return gc_sacc_round(&a);
}

int
main(void)
{
	gc_rng		rng;
	int			bad;

	gc_rng_seed(&rng, 42);

	/* one value, and two: exactly what IEEE addition gives */
	bad = 0;
	for (int i = 0; i < 200000; i++)
	{
		double		v[2] = {random_double(&rng), random_double(&rng)};

		if (i % 3 == 0)
			v[1] = ldexp(v[0], -(int) gc_rng_below(&rng, 60)) * (gc_rng_below(&rng, 2) ? -1 : 1);
		if (sum_of(v, 1) != v[0] || sum_of(v, 2) != v[0] + v[1])
		{
			if (bad++ < 5)
				fprintf(stderr, "%.17g + %.17g: %.17g, IEEE %.17g\n", v[0], v[1], sum_of(v, 2), v[0] + v[1]);
		}
	}
	CHECK(bad == 0, "%d sums of one or two values differ from IEEE arithmetic", bad);
	{
		double		v[3] = {DBL_MAX, DBL_MAX, -DBL_MAX};
		double		w[2] = {DBL_MAX, DBL_MAX};
		double		x[2] = {DBL_TRUE_MIN, -DBL_TRUE_MIN};
		double		y[4] = {1e100, 1.0, -1e100, 0x1p-1074};

		CHECK(sum_of(v, 3) == DBL_MAX, "max + max - max is %g", sum_of(v, 3));
		CHECK(isinf(sum_of(w, 2)), "max + max is %g", sum_of(w, 2));
		CHECK(sum_of(x, 2) == 0.0, "min - min is %g", sum_of(x, 2));
		CHECK(sum_of(y, 4) == 1.0, "1e100 + 1 - 1e100 + tiny is %.17g", sum_of(y, 4));
	}

	/* order and grouping do not matter: the same normalized chunks */
	{
		enum
		{
		N = 5000};
		double	   *v = malloc(sizeof(double) * N);
		gc_sacc		a,
					b,
					parts[7];
		int			same = 1;

		for (int i = 0; i < N; i++)
			v[i] = random_double(&rng);
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		memset(parts, 0, sizeof(parts));
		for (int i = 0; i < N; i++)
			gc_sacc_add(&a, v[i]);
		for (int i = N - 1; i >= 0; i--)
			gc_sacc_add(&parts[gc_rng_below(&rng, 7)], v[i]);
		for (int p = 6; p >= 0; p--)
			gc_sacc_merge(&b, &parts[p]);
		gc_sacc_normalize(&a);
		gc_sacc_normalize(&b);
		for (int c = 0; c < GC_SACC_CHUNKS; c++)
			same &= a.c[c] == b.c[c];
		CHECK(same, "the sums in two orders and groupings differ");
		/* and minus every value: zero */
		for (int i = 0; i < N; i++)
			gc_sacc_add(&a, -v[i]);
		gc_sacc_normalize(&a);
		CHECK(gc_sacc_round(&a) == 0.0, "the sum minus itself is %g", gc_sacc_round(&a));
		free(v);
	}

	/*
	 * block sums: values in and out of the window (the out ones straight into
	 * the superaccumulator), folded at random points, against gc_sacc_add
	 * of every value; the normalized chunks must be equal.
	 */
	{
		int			wrong = 0;

		for (int trial = 0; trial < 300; trial++)
		{
			int			n = 1 + (int) gc_rng_below(&rng, 3000);
			double		scale = ldexp(1.0, (int) gc_rng_below(&rng, 1600) - 800);
			gc_sacc		a,
						b;
			gc_wacc		w = {0, 0};
			int32_t		top = 0;
			int32_t		p;
			double	   *v = malloc(sizeof(double) * n);

			memset(&a, 0, sizeof(a));
			memset(&b, 0, sizeof(b));
			for (int i = 0; i < n; i++)
			{
				uint64_t	kind = gc_rng_below(&rng, 10);

				if (trial % 5 == 0)
					v[i] = random_double(&rng);
				else if (kind == 0)
					v[i] = ldexp(gc_rng_uniform(&rng), -(int) gc_rng_below(&rng, 200)) * scale;
				else if (kind == 1)
					v[i] = 0.0;
				else
					v[i] = (double) (float) ((gc_rng_uniform(&rng) - 0.5) * scale);
				if (!isfinite(v[i]))
					v[i] = 1.0;
				if (gc_rng_below(&rng, 2))
					v[i] = -v[i];
				top = top > gc_wacc_lsb(v[i]) ? top : gc_wacc_lsb(v[i]);
			}
			/* the window of the first values only: later ones may fall out */
			p = gc_wacc_unit(trial % 3 == 0 ? top : gc_wacc_lsb(v[0]));
			for (int i = 0; i < n; i++)
			{
				gc_sacc_add(&a, v[i]);
				if (!gc_wacc_add(&w, v[i], p))
					gc_sacc_add(&b, v[i]);
				if (gc_rng_below(&rng, 500) == 0)
					gc_wacc_fold(&b, &w, p);
			}
			gc_wacc_fold(&b, &w, p);
			gc_sacc_normalize(&a);
			gc_sacc_normalize(&b);
			wrong += memcmp(&a, &b, sizeof(a)) != 0 || w.lo != 0 || w.hi != 0;
			free(v);
		}
		CHECK(wrong == 0, "%d block sums differ from the superaccumulator's", wrong);
	}

	/* the nearest centroid: the least gc_dist2_f64, the lowest number on a tie */
	{
		double		cen[6 * 3];
		double		cent[6 * 3];
		double		dist[6];
		int			wrong = 0;

		for (int i = 0; i < 18; i++)
			cen[i] = (double) gc_rng_below(&rng, 5);
		gc_kmeans_transpose(cen, 6, 3, cent);
		for (int i = 0; i < 10000; i++)
		{
			double		row[3] = {(double) gc_rng_below(&rng, 5), (double) gc_rng_below(&rng, 5),
			gc_rng_uniform(&rng) * 4};
			double		d2;
			int32_t		j = gc_kmeans_nearest(row, 3, cent, 6, dist, &d2);
			int32_t		bj = 0;

			for (int32_t c = 1; c < 6; c++)
				if (gc_dist2_f64(row, cen + 3 * c, 3) < gc_dist2_f64(row, cen + 3 * bj, 3))
					bj = c;
			wrong += j != bj || d2 != gc_dist2_f64(row, cen + 3 * bj, 3);
		}
		CHECK(wrong == 0, "%d rows went to another centroid than the least distance", wrong);
	}
	UNIT_DONE();
}
