/* series.h - bounded (x, y) series for the report's charts.
 *
 * A gh_series keeps at most cap points however many are added: each stored
 * point is the mean of a bucket of `stride` consecutive input points, and
 * when the buffer fills, neighbouring pairs are merged and the stride
 * doubles. Memory is fixed at init; the shape of a long series survives
 * (means, not samples, so noise shrinks instead of aliasing).
 *
 * gh_series_decimate is the one-shot form used when drawing: it reduces n
 * points to at most cap bucket means. */
#ifndef GH_REPORT_SERIES_H
#define GH_REPORT_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GH_SERIES_MIN_CAP 4

struct gh_series {
    double *x, *y;    /* owned; n stored bucket means */
    size_t n, cap;    /* cap even, >= GH_SERIES_MIN_CAP */
    uint64_t stride;  /* input points per stored point */
    uint64_t raw;     /* input points added in all */
    double px, py;    /* sums of the bucket being filled */
    uint64_t pn;      /* its count (< stride) */
};

/* Allocates room for cap points (rounded up to even, at least
 * GH_SERIES_MIN_CAP). Returns GH_OK or GH_ENOMEM (s left empty, safe to
 * clear). */
int gh_series_init(struct gh_series *s, size_t cap, struct gh_err *err);
/* Frees the buffers; accepts NULL and a zeroed or failed series. */
void gh_series_clear(struct gh_series *s);
/* Adds one point; non-finite x or y are ignored. Never allocates. */
void gh_series_add(struct gh_series *s, double x, double y);
/* Copies the stored points, then the partial bucket being filled when it
 * holds at least half a stride (or is all there is), into x[0..max) and
 * y[0..max); returns how many were written (at most s->n + 1). */
size_t gh_series_copy(const struct gh_series *s, double *x, double *y, size_t max);

/* Reduces x[0..n), y[0..n) (borrowed, in x order) to at most cap points,
 * each the mean of ceil(n / cap) consecutive input points (the last bucket
 * may be smaller), written to ox, oy (room for min(n, cap) points; may not
 * alias the input). n <= cap copies. Returns the number written; 0 when
 * cap is 0. */
size_t gh_series_decimate(const double *x, const double *y, size_t n, size_t cap, double *ox,
                          double *oy);

#endif
