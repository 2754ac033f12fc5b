/*
 * wc_rng.c — a small deterministic RNG for data generation, initialisation and shuffling:
 * splitmix64 expands the seed, xoshiro256** produces the stream (both by Vigna et al.,
 * written here from their published descriptions). Deterministic across runs and machines,
 * which rte_rand (seeded per process) is not.
 *
 * Call chain: wc_dense_init, wc_ctr_gen_*, apps/train shuffling -> wc_rng_*.
 */
#include <math.h>

#include "apps/common/wc_model.h"

uint64_t wc_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void wc_rng_seed(struct wc_rng *r, uint64_t seed)
{
	unsigned i;

	for (i = 0; i < 4; i++) {
		seed += 0x9e3779b97f4a7c15ull;
		r->s[i] = wc_mix64(seed);
	}
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t wc_rng_u64(struct wc_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double wc_rng_uniform(struct wc_rng *r)
{
	return (double)(wc_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double wc_rng_normal(struct wc_rng *r)
{
	/* 1 - u keeps the log argument in (0, 1]. */
	double u = 1.0 - wc_rng_uniform(r), v = wc_rng_uniform(r);

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

uint64_t wc_rng_below(struct wc_rng *r, uint64_t n)
{
	/* Reject the top partial block so every residue is equally likely. */
	uint64_t limit = -n % n, x;

	do
		x = wc_rng_u64(r);
	while (x < limit);
	return x % n;
}

void wc_shuffle_u32(struct wc_rng *r, uint32_t *idx, uint32_t n)
{
	uint32_t i, j, t;

	for (i = n; i > 1; i--) {
		j = (uint32_t)wc_rng_below(r, i);
		t = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = t;
	}
}
