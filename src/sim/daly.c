/* daly.c - Young's and Daly's checkpoint-interval formulas and Daly's efficiency model. */
#include "sim/daly.h"

#include <math.h>

double gh_daly_young(double m, double d)
{
    if (!(m > 0) || !(d >= 0) || !isfinite(m) || !isfinite(d))
        return NAN;
    return sqrt(2.0 * d * m);
}

double gh_daly_optimum(double m, double d)
{
    if (!(m > 0) || !(d >= 0) || !isfinite(m) || !isfinite(d))
        return NAN;
    if (d >= 2.0 * m)
        return m;
    double x = d / (2.0 * m);
    return sqrt(2.0 * d * m) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - d;
}

double gh_daly_ettr(double m, double tau, double d, double r)
{
    if (!(m > 0) || !(tau > 0) || !(d >= 0) || !(r >= 0))
        return NAN;
    /* expm1 keeps precision when (tau + delta) << M. */
    double tw = m * exp(r / m) * expm1((tau + d) / m);
    return tau / tw;
}
