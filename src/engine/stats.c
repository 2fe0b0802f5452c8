/* stats.c - median/MAD by quickselect and the Poisson tail for the detectors. */
#include "engine/stats.h"

#include <math.h>
#include <stdbool.h>

/* Small inputs (a node's ranks) and the last few values of a selection:
 * insertion sort. */
#define SMALL_N 16

static void insertion_sort(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        double x = v[i];
        size_t j = i;
        for (; j > 0 && x < v[j - 1]; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Moves the values of v[lo..hi) below p (le: not above p) to its front, in
 * no particular order; returns the end of them. No branch on the values:
 * step times compare unpredictably, and a mispredicted branch per value
 * cost more than the comparisons themselves. */
static size_t partition(double *v, size_t lo, size_t hi, double p, bool le)
{
    size_t i = lo;
    if (le) {
        for (size_t j = lo; j < hi; j++) {
            double x = v[j];
            v[j] = v[i];
            v[i] = x;
            i += x <= p;
        }
    } else {
        for (size_t j = lo; j < hi; j++) {
            double x = v[j];
            v[j] = v[i];
            v[i] = x;
            i += x < p;
        }
    }
    return i;
}

static double min2(double a, double b) { return b < a ? b : a; }
static double max2(double a, double b) { return b > a ? b : a; }

/* Quickselect: after the call v[k] holds the k-th smallest and
 * v[0..k) <= v[k] <= v(k..n) (finite values). Each round splits the range
 * around the median of three of its values into below, equal and above. */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > SMALL_N) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
        double p = max2(min2(a, b), min2(max2(a, b), c));
        size_t lt = partition(v, lo, hi, p, false); /* [lo,lt) < p: p is in [lt,hi) */
        if (k < lt) {
            hi = lt;
            continue;
        }
        size_t eq = partition(v, lt, hi, p, true); /* [lt,eq) == p < [eq,hi) */
        if (k < eq)
            return v[k];
        lo = eq;
    }
    insertion_sort(v + lo, hi - lo);
    return v[k];
}

double gh_stats_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    if (n <= SMALL_N) {
        insertion_sort(v, n);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    }
    double upper = select_kth(v, n, n / 2);
    if (n % 2)
        return upper;
    /* The lower middle is the maximum of the left part after selection. */
    double lower = v[0];
    for (size_t i = 1; i < n / 2; i++)
        lower = max2(lower, v[i]);
    return (lower + upper) / 2.0;
}

double gh_stats_mad(const double *v, size_t n, double med, double *scratch)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = fabs(v[i] - med);
    return gh_stats_median(scratch, n);
}

double gh_stats_poisson_tail(long k, double mu)
{
    if (k <= 0)
        return 1.0;
    if (mu <= 0)
        return 0.0;
    /* P(X >= k) = 1 - sum_{i<k} e^-mu mu^i / i!. For a tiny tail (k well
     * above mu) sum the upper terms directly to keep precision. */
    if ((double)k > mu) {
        double logp = -mu + (double)k * log(mu) - lgamma((double)k + 1.0);
        double term = exp(logp), sum = 0.0;
        for (long i = k; i < k + 1000; i++) {
            sum += term;
            term *= mu / (double)(i + 1);
            if (term < sum * 1e-16)
                break;
        }
        return sum > 1.0 ? 1.0 : sum;
    }
    double term = exp(-mu), cdf = 0.0;
    for (long i = 0; i < k; i++) {
        cdf += term;
        term *= mu / (double)(i + 1);
    }
    double p = 1.0 - cdf;
    return p < 0.0 ? 0.0 : p;
}

int gh_stats_popcount(unsigned long long w, int n)
{
    if (n < 64)
        w &= (1ULL << n) - 1ULL;
    return __builtin_popcountll(w);
}
