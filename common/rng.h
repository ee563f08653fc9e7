/*
 * rng.h
 *    The random numbers of gpuclust, the same on every back end and in every
 *    harness: a counter-based hash (splitmix64's finaliser) for draws that
 *    must not depend on order, such as the sampled pairs of the density-peaks
 *    dc estimate, and a sequential generator (xoshiro256** by Blackman and
 *    Vigna, seeded through splitmix64) for draws made one after the other,
 *    such as the k-means initial centroids and test data.
 */
#ifndef GPUCLUST_RNG_H
#define GPUCLUST_RNG_H

#include <stdint.h>

#include "portable.h"

/* splitmix64's finaliser of z + golden gamma: a hash of a counter. */
static GC_HD uint64_t
gc_mix64(uint64_t z)
{
	z += UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

typedef struct gc_rng
{
	uint64_t	s[4];
} gc_rng;

/* Seeds the generator: four steps of splitmix64 from seed. */
static inline void
gc_rng_seed(gc_rng *rng, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
	{
		rng->s[i] = gc_mix64(seed);
		seed += UINT64_C(0x9E3779B97F4A7C15);
	}
}

static inline uint64_t
gc_rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* The next 64 random bits (xoshiro256**). */
static inline uint64_t
gc_rng_next(gc_rng *rng)
{
	uint64_t   *s = rng->s;
	uint64_t	result = gc_rotl64(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = gc_rotl64(s[3], 45);
	return result;
}

/* Uniform integer in [0, bound), bound > 0, without modulo bias. */
static inline uint64_t
gc_rng_below(gc_rng *rng, uint64_t bound)
{
	uint64_t	limit = UINT64_MAX - UINT64_MAX % bound;
	uint64_t	r;

	do
		r = gc_rng_next(rng);
	while (r >= limit);
	return r % bound;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double
gc_rng_uniform(gc_rng *rng)
{
	return (double) (gc_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

#endif							/* GPUCLUST_RNG_H */
