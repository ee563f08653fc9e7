/*
 * kmeans_seed.c
 *    k-means++ seeding (greedy and plain) on the call's threads: the rows
 *    that gc_kmeans_plusplus_rows of common/kmeans_init.h picks, the same
 *    for every thread count.
 *
 * The rows are cut into fixed blocks of SEED_BLOCK rows (the cut does not
 * depend on the thread count).  Each pass over the rows runs the blocks on
 * the pool's threads, and each block writes its own partial results: the
 * sum of its rows' integer weights, its largest squared distance, its part
 * of every candidate's potential.  Integer sums and maxima do not depend on
 * the order in which they are combined, so the totals are those of the
 * one-thread reference.  A draw target r is found in two steps: the block
 * whose running weight sum (the prefix sums of the block totals) first
 * exceeds r, then the row inside that block (gc_kmpp_pick), which is the row
 * the reference's walk from row 0 reaches.  The generator is read on the
 * caller's thread in the reference's order.
 *
 * Per step of k-means++ the passes are:
 *
 *   weights     the block totals of the weights under the step's scale;
 *               skipped when the previous step's update pass already summed
 *               them under the same scale (the scale only changes when the
 *               largest distance drops below a power of two);
 *   potentials  (greedy only) the distances to all candidates in one pass
 *               over the rows, each row read once;
 *   update      the new centre's distances folded into mind2, with the
 *               block maxima and the block totals of the new weights under
 *               the step's scale, in the same pass.
 *
 * When every row sits on a centre (the largest distance is 0, as with many
 * duplicates) the total weight is 0: the candidates are drawn uniformly,
 * their potentials are all 0 (the first is kept) and no update can change
 * mind2, so those passes are skipped.  With a zero total and a finite
 * largest distance (every weight truncated to 0) the potentials are 0 as
 * well and are skipped.
 *
 * Most rows are far from a new candidate: with near[i] the centre that
 * gives row i its distance m = mind2[i], a candidate c with
 * dist2(c, near[i]) > 4 m (1 + 2^-10) is farther from the row than that
 * centre by the triangle inequality, |x - c| >= |c - a| - |x - a| > |x - a|,
 * so min(m, dist2(x, c)) = m and the row's distance to c need not be
 * computed.  The margin 2^-10 covers the rounding of the three computed
 * squared distances (each within (d + 3) 2^-53 of the exact one, relative),
 * and the rule is used only for m in [2^-930, 2^995], where no square
 * underflows to matter and no bound overflows.  So the skipped rows add
 * exactly what the reference adds (the weight of m; no change in the
 * update).  The distances from the step's candidates to the centres so far
 * are computed once per step; the rule is used while there are at most
 * n / 16 centres (that table stays small beside a pass over the rows).
 *
 * The blocks ask the pool's stop flag (gc_worker_tick) every few
 * milliseconds of work, counted in coordinates read.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "kmeans_init.h"

/* Rows per block of the passes (fixed: the blocks' partial sums combine the same whatever the threads). */
#define SEED_BLOCK 1024

/* Passes of less work than this, in coordinates read, run on the caller's thread alone. */
#define SEED_PARALLEL_WORK (INT64_C(1) << 15)

/* Work between two looks at cancel, in coordinates read. */
#define SEED_CANCEL_WORK (INT64_C(1) << 22)

/* The triangle rule: dist2(c, near) > SEED_PRUNE_FACTOR * m, for m in [SEED_PRUNE_MIN, SEED_PRUNE_MAX]. */
#define SEED_PRUNE_FACTOR (4.0 * (1.0 + 1.0 / 1024.0))
#define SEED_PRUNE_MIN 0x1p-930
#define SEED_PRUNE_MAX 0x1p995
/* The most centres the candidates' distance table holds (ntrials x this doubles at most). */
#define SEED_PRUNE_CENTRES 65536

typedef enum seed_pass
{
	SEED_WEIGHTS,
	SEED_POTENTIALS,
	SEED_UPDATE
} seed_pass;

typedef struct seed_job
{
	const void *x;				/* [n, d] */
	gc_dtype	dtype;
	int64_t		n;
	int32_t		d;
	double	   *mind2;			/* [n] squared distance to the nearest centre */
	int64_t		nblocks;

	seed_pass	pass;
	double		scale;			/* the step's factor of the weights */
	int64_t		cen;			/* SEED_UPDATE: the new centre */
	int			first;			/* SEED_UPDATE: the first centre (no scale yet) */
	const int64_t *cand;		/* SEED_POTENTIALS: [ntrials] */
	int32_t		ntrials;

	int32_t    *near;			/* [n] the centre (index into rows) at mind2, or NULL: no triangle rule */
	const double *table;		/* [centre, ntrials] dist2 of the candidates to the centres, or NULL */
	int32_t		cidx;			/* SEED_UPDATE: the new centre's index */
	int32_t		tl;				/* SEED_UPDATE: the new centre's column of table */

	uint64_t   *bw;				/* [nblocks] sums of the weights under scale */
	double	   *bmax;			/* [nblocks] largest mind2 */
	uint64_t   *bpot;			/* [nblocks, ntrials] parts of the potentials */
} seed_job;

/* Rows between two looks at cancel when each row costs units coordinates: at least 1. */
static inline int64_t
seed_stride(int64_t units)
{
	int64_t		r = SEED_CANCEL_WORK / (units > 0 ? units : 1);

	return r < 1 ? 1 : r;
}

/* One block's part of the current pass, rows of element type dtype. */
static inline gc_status
seed_rows(seed_job *job, gc_worker *w, int64_t b, gc_dtype dtype)
{
	int64_t		lo = b * SEED_BLOCK;
	int64_t		hi = job->n - lo > SEED_BLOCK ? lo + SEED_BLOCK : job->n;
	const void *x = job->x;
	int32_t		d = job->d;
	double	   *mind2 = job->mind2;
	double		scale = job->scale;

	switch (job->pass)
	{
		case SEED_WEIGHTS:
			{
				uint64_t	s = 0;

				for (int64_t i = lo; i < hi; i++)
					s += gc_kmpp_weight(mind2[i], scale);
				job->bw[b] = s;
				if (gc_worker_tick(w, hi - lo, SEED_CANCEL_WORK))
					return GC_ERR_CANCELLED;
				break;
			}
		case SEED_POTENTIALS:
			{
				int32_t		ntrials = job->ntrials;
				int64_t		cand[GC_KMPP_MAX_TRIALS];
				uint64_t	pot[GC_KMPP_MAX_TRIALS];
				int64_t		units = (int64_t) d * ntrials;
				int64_t		stride = seed_stride(units);

				memcpy(cand, job->cand, sizeof(int64_t) * (size_t) ntrials);
				memset(pot, 0, sizeof(uint64_t) * (size_t) ntrials);
				for (int64_t from = lo; from < hi; from += stride)
				{
					int64_t		to = hi - from > stride ? from + stride : hi;

					for (int64_t i = from; i < to; i++)
					{
						double		m = mind2[i];

						if (job->table && m >= SEED_PRUNE_MIN && m <= SEED_PRUNE_MAX)
						{
							const double *tc = job->table + (int64_t) job->near[i] * ntrials;
							double		lim = m * SEED_PRUNE_FACTOR;
							uint64_t	wm = gc_kmpp_weight(m, scale);

							for (int32_t l = 0; l < ntrials; l++)
								pot[l] += tc[l] > lim ? wm :
									gc_kmpp_trial_weight(m, gc_kmeans_x_dist2(x, dtype, d, i, cand[l], 1, m), scale);
						}
						else
							gc_kmpp_potential_row(x, dtype, d, i, m, scale, cand, ntrials, pot);
					}
					if (gc_worker_tick(w, (to - from) * units, SEED_CANCEL_WORK))
						return GC_ERR_CANCELLED;
				}
				memcpy(job->bpot + b * ntrials, pot, sizeof(uint64_t) * (size_t) ntrials);
				break;
			}
		case SEED_UPDATE:
			{
				int64_t		cen = job->cen;
				int			first = job->first;
				int64_t		stride = seed_stride(d);
				double		mx = 0.0;
				uint64_t	s = 0;

				for (int64_t from = lo; from < hi; from += stride)
				{
					int64_t		to = hi - from > stride ? from + stride : hi;

					for (int64_t i = from; i < to; i++)
					{
						double		m = mind2[i];

						if (!(job->table && m >= SEED_PRUNE_MIN && m <= SEED_PRUNE_MAX &&
							  job->table[(int64_t) job->near[i] * job->ntrials + job->tl] > m * SEED_PRUNE_FACTOR))
						{
							double		t = gc_kmpp_update_row(x, dtype, d, i, cen, first, m);

							if (job->near && (first || t < m))
								job->near[i] = job->cidx;
							m = t;
							mind2[i] = m;
						}
						if (m > mx)
							mx = m;
						s += gc_kmpp_weight(m, scale);
					}
					if (gc_worker_tick(w, (to - from) * d, SEED_CANCEL_WORK))
						return GC_ERR_CANCELLED;
				}
				job->bmax[b] = mx;
				job->bw[b] = s;
				break;
			}
	}
	return GC_OK;
}

/* The blocks [b, e) of the current pass. */
static gc_status
seed_block(void *arg, gc_worker *w, int64_t b, int64_t e)
{
	seed_job   *job = arg;

	for (; b < e; b++)
	{
		gc_status	st = job->dtype == GC_F64 ? seed_rows(job, w, b, GC_F64) : seed_rows(job, w, b, GC_F32);

		if (st != GC_OK)
			return st;
	}
	return GC_OK;
}

/*
 * Runs one pass over every block: on the caller's thread alone when the
 * pass is too small to pay for waking the others (the answer is the same).
 */
static gc_status
seed_pass_run(gc_core_ctx *ctx, seed_job *job, seed_pass pass)
{
	int64_t		units = pass == SEED_WEIGHTS ? 1 : (int64_t) job->d * (pass == SEED_POTENTIALS ? job->ntrials : 1);
	int64_t		grain = job->n * units < SEED_PARALLEL_WORK ? job->nblocks :
		gc_pool_grain(ctx->pool, job->nblocks, 1);

	job->pass = pass;
	return gc_pool_for(ctx->pool, job->nblocks, grain, seed_block, job);
}

/*
 * The row of draw target r (0 <= r < the sum of bw): the block by the
 * prefix sums of the block totals, then the row inside it.  -1 only if the
 * totals disagree with mind2 (a bug).
 */
static int64_t
seed_pick(const seed_job *job, uint64_t r)
{
	uint64_t	acc = 0;
	int64_t		b = 0;
	int64_t		lo;
	int64_t		hi;

	while (b < job->nblocks - 1 && acc + job->bw[b] <= r)
		acc += job->bw[b++];
	lo = b * SEED_BLOCK;
	hi = job->n - lo > SEED_BLOCK ? lo + SEED_BLOCK : job->n;
	return gc_kmpp_pick(job->mind2 + lo, lo, hi, job->scale, r, &acc);
}

/*
 * The triangle rule's table for step c: dist2 of each candidate to each of
 * the centres rows[0 .. c), into table [c, ntrials]; job->table set, or
 * left NULL when the rule is off for this step.
 */
static gc_status
seed_table(gc_core_ctx *ctx, seed_job *job, double *table, const int64_t *rows, int32_t c,
		   const int64_t *cand, int32_t ntrials)
{
	int64_t		work = 0;

	job->table = NULL;
	if (!table || c > SEED_PRUNE_CENTRES || (int64_t) c * 16 > job->n)
		return GC_OK;
	for (int32_t j = 0; j < c; j++)
	{
		for (int32_t l = 0; l < ntrials; l++)
			table[(int64_t) j * ntrials + l] =
				gc_kmeans_x_dist2(job->x, job->dtype, job->d, cand[l], rows[j], 0, 0.0);
		if (gc_core_work(ctx, &work, (int64_t) ntrials * job->d, SEED_CANCEL_WORK))
			return GC_ERR_CANCELLED;
	}
	job->table = table;
	return GC_OK;
}

gc_status
gc_core_kmeans_plusplus_rows(gc_core_ctx *ctx, const void *x, gc_dtype dtype, int64_t n, int32_t d,
							 int32_t k, uint64_t seed, int32_t ntrials,
							 int64_t *rows, double *mind2)
{
	seed_job	job;
	gc_rng		rng;
	double		maxd2 = 0.0;
	double		bw_scale = 0.0; /* the scale of the sums in bw */
	int			bw_valid = 0;
	int64_t		cand[GC_KMPP_MAX_TRIALS];
	uint64_t	pot[GC_KMPP_MAX_TRIALS];
	double	   *table = NULL;
	size_t		bytes;
	gc_status	st = GC_OK;

	if (ntrials < 1)
		ntrials = 1;
	if (ntrials > GC_KMPP_MAX_TRIALS)
		ntrials = GC_KMPP_MAX_TRIALS;
	memset(&job, 0, sizeof(job));
	job.x = x;
	job.dtype = dtype;
	job.n = n;
	job.d = d;
	job.mind2 = mind2;
	job.nblocks = (n + SEED_BLOCK - 1) / SEED_BLOCK;
	job.ntrials = ntrials;
	job.cand = cand;
	bytes = sizeof(uint64_t) * (size_t) job.nblocks * (size_t) (ntrials + 1) +
		sizeof(double) * (size_t) job.nblocks;
	job.bw = malloc(sizeof(uint64_t) * (size_t) job.nblocks);
	job.bmax = malloc(sizeof(double) * (size_t) job.nblocks);
	job.bpot = ntrials > 1 ? malloc(sizeof(uint64_t) * (size_t) job.nblocks * (size_t) ntrials) : NULL;
	if (!job.bw || !job.bmax || (ntrials > 1 && !job.bpot))
	{
		st = gc_core_oom(ctx, bytes, "out of memory for k-means initialization");
		goto done;
	}
	/* the triangle rule's arrays: without them (no memory, or never used) every distance is computed */
	if (k >= 2 && n >= 16)
	{
		int32_t		kt = k < SEED_PRUNE_CENTRES ? k : SEED_PRUNE_CENTRES;

		job.near = malloc(sizeof(int32_t) * (size_t) n);
		table = malloc(sizeof(double) * (size_t) kt * (size_t) ntrials);
		if (!job.near || !table)
		{
			free(job.near);
			free(table);
			job.near = NULL;
			table = NULL;
		}
	}

	gc_rng_seed(&rng, seed);
	rows[0] = (int64_t) gc_rng_below(&rng, (uint64_t) n);
	if (k < 2)
		goto done;
	job.cen = rows[0];
	job.cidx = 0;
	job.first = 1;
	if ((st = seed_pass_run(ctx, &job, SEED_UPDATE)) != GC_OK)
		goto done;
	job.first = 0;
	for (int64_t b = 0; b < job.nblocks; b++)
		maxd2 = job.bmax[b] > maxd2 ? job.bmax[b] : maxd2;

	for (int32_t c = 1; c < k; c++)
	{
		uint64_t	total = 0;
		int32_t		best = 0;

		if (gc_core_cancelled(ctx))
		{
			st = GC_ERR_CANCELLED;
			goto done;
		}
		job.scale = gc_kmpp_scale(maxd2, n);
		if (maxd2 == 0.0)
		{
			/* every row on a centre: every weight is 0 */
			memset(job.bw, 0, sizeof(uint64_t) * (size_t) job.nblocks);
			bw_valid = 1;
			bw_scale = job.scale;
		}
		else if (!bw_valid || bw_scale != job.scale)
		{
			if ((st = seed_pass_run(ctx, &job, SEED_WEIGHTS)) != GC_OK)
				goto done;
			bw_valid = 1;
			bw_scale = job.scale;
		}
		for (int64_t b = 0; b < job.nblocks; b++)
			total += job.bw[b];

		/* the candidates, drawn as gc_kmpp_draw_candidates draws them */
		for (int32_t l = 0; l < ntrials; l++)
		{
			int64_t		target = gc_kmpp_draw(&rng, total, n);

			cand[l] = target < 0 ? -1 - target : seed_pick(&job, (uint64_t) target);
			if (cand[l] < 0)
			{
				st = gc_error_set(ctx->err, GC_ERR_INTERNAL,
								  "k-means++ weights disagree with their sums, please report a bug");
				goto done;
			}
		}

		/* a zero total with a finite largest distance: every potential is 0, the first is kept */
		job.table = NULL;
		if (ntrials > 1 && !(total == 0 && maxd2 <= DBL_MAX))
		{
			if ((st = seed_table(ctx, &job, table, rows, c, cand, ntrials)) != GC_OK ||
				(st = seed_pass_run(ctx, &job, SEED_POTENTIALS)) != GC_OK)
				goto done;
			memset(pot, 0, sizeof(pot));
			for (int64_t b = 0; b < job.nblocks; b++)
				for (int32_t l = 0; l < ntrials; l++)
					pot[l] += job.bpot[b * ntrials + l];
			best = gc_kmpp_best_trial(pot, ntrials);
		}
		rows[c] = cand[best];

		/* every row on a centre: nothing moves (and the last centre needs no update) */
		if (maxd2 == 0.0 || c == k - 1)
			continue;
		job.cen = rows[c];
		job.cidx = c;
		job.tl = best;
		if (!job.table && (st = seed_table(ctx, &job, table, rows, c, cand, ntrials)) != GC_OK)
			goto done;
		if ((st = seed_pass_run(ctx, &job, SEED_UPDATE)) != GC_OK)
			goto done;
		/* bw now holds the new weights under this step's scale */
		bw_valid = 1;
		bw_scale = job.scale;
		maxd2 = 0.0;
		for (int64_t b = 0; b < job.nblocks; b++)
			maxd2 = job.bmax[b] > maxd2 ? job.bmax[b] : maxd2;
	}

done:
	free(job.bw);
	free(job.bmax);
	free(job.bpot);
	free(job.near);
	free(table);
	return st;
}
