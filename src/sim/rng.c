/* rng.c - xoshiro256** (Blackman and Vigna, 2018) seeded with splitmix64. */
#include "sim/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void gh_rng_seed(struct gh_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1; /* the one state xoshiro cannot leave */
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gh_rng_u64(struct gh_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double gh_rng_unit(struct gh_rng *r)
{
    /* 53 random bits, centred in their interval: (0, 1) exclusive. */
    return ((double)(gh_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

uint64_t gh_rng_below(struct gh_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased. */
    __uint128_t m = (__uint128_t)gh_rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        /* cppcheck-suppress oppositeExpression ; (2^64 - n) mod n, Lemire's threshold */
        uint64_t t = -n % n;
        while (lo < t) {
            m = (__uint128_t)gh_rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double gh_rng_exp(struct gh_rng *r, double rate)
{
    if (!(rate > 0))
        return INFINITY;
    return -log(gh_rng_unit(r)) / rate;
}

double gh_rng_normal(struct gh_rng *r)
{
    double u = gh_rng_unit(r), v = gh_rng_unit(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

double gh_rng_loguniform(struct gh_rng *r, double lo, double hi)
{
    if (!(hi > lo))
        return lo;
    return lo * exp(gh_rng_unit(r) * log(hi / lo));
}
