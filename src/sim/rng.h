/* rng.h - the simulator's seeded pseudo-random numbers: xoshiro256** seeded
 * through splitmix64, with the few distributions the failure model needs.
 * A gh_rng is a small value owned by whoever holds it; no global state, so a
 * fixed seed reproduces a run exactly on every platform. */
#ifndef GH_SIM_RNG_H
#define GH_SIM_RNG_H

#include <stdint.h>

struct gh_rng {
    uint64_t s[4];
};

/* Seeds r from seed and a stream number (e.g. the run index), so that runs
 * of one seed are independent streams. */
void gh_rng_seed(struct gh_rng *r, uint64_t seed, uint64_t stream);
uint64_t gh_rng_u64(struct gh_rng *r);
/* Uniform in (0, 1): never 0 or 1. */
double gh_rng_unit(struct gh_rng *r);
/* Uniform integer in [0, n); n > 0. */
uint64_t gh_rng_below(struct gh_rng *r, uint64_t n);
/* Exponential with the given rate (> 0); +inf for rate <= 0. */
double gh_rng_exp(struct gh_rng *r, double rate);
/* Standard normal (Box-Muller, one value per call). */
double gh_rng_normal(struct gh_rng *r);
/* Log-uniform in [lo, hi] (0 < lo <= hi). */
double gh_rng_loguniform(struct gh_rng *r, double lo, double hi);

#endif
