/* stats.c - median/MAD by quickselect and the Poisson tail for the detectors. */
#include "engine/stats.h"

#include <math.h>

/* Wirth's selection: after the call v[k] holds the k-th smallest and
 * v[0..k) <= v[k] <= v(k..n). Signed indices: the scans may step below 0. */
static double select_kth(double *v, size_t n, size_t kk)
{
    long l = 0, m = (long)n - 1, k = (long)kk;
    while (l < m) {
        double x = v[k];
        long i = l, j = m;
        do {
            while (v[i] < x)
                i++;
            while (x < v[j])
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < k)
            l = i;
        if (k < i)
            m = j;
    }
    return v[k];
}

double gh_stats_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double upper = select_kth(v, n, n / 2);
    if (n % 2)
        return upper;
    /* The lower middle is the maximum of the left part after selection. */
    double lower = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lower)
            lower = v[i];
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
