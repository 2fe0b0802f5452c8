/* stats.h - the small robust statistics the detectors share: median and MAD
 * by selection (no full sort), and the Poisson upper tail. Pure functions,
 * no allocation: callers pass scratch space. */
#ifndef GH_ENGINE_STATS_H
#define GH_ENGINE_STATS_H

#include <stddef.h>

/* Median of v[0..n) (n > 0, finite values). Reorders v in place
 * (selection; insertion sort up to 16 values). For even n, the mean of the
 * two middle values. */
double gh_stats_median(double *v, size_t n);

/* Median absolute deviation around med of v[0..n): writes |v[i]-med| into
 * scratch[0..n) (caller-owned, n doubles) and returns its median. v is not
 * modified. Unscaled: multiply by 1.4826 for a normal sigma. */
double gh_stats_mad(const double *v, size_t n, double med, double *scratch);

/* P(X >= k) for X ~ Poisson(mu), mu >= 0, k >= 0. Exact summation of the
 * lower tail in log space; 1.0 when k == 0. */
double gh_stats_poisson_tail(long k, double mu);

/* Number of set bits in the low n bits of w (n <= 64). */
int gh_stats_popcount(unsigned long long w, int n);

#endif
