/* series.c - bounded, decimating (x, y) series: bucket means with a stride
 * that doubles when the buffer fills, and the one-shot decimation used when
 * a chart is drawn. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/series.h"

int gh_series_init(struct gh_series *s, size_t cap, struct gh_err *err)
{
    memset(s, 0, sizeof *s);
    if (cap < GH_SERIES_MIN_CAP)
        cap = GH_SERIES_MIN_CAP;
    if (cap % 2)
        cap++;
    if (cap > SIZE_MAX / sizeof(double) / 2)
        return gh_err_set(err, GH_ELIMIT, "series: %zu points is too many", cap);
    s->x = malloc(cap * sizeof *s->x);
    s->y = malloc(cap * sizeof *s->y);
    if (!s->x || !s->y) {
        gh_series_clear(s);
        return gh_err_set(err, GH_ENOMEM, "series: out of memory");
    }
    s->cap = cap;
    s->stride = 1;
    return GH_OK;
}

void gh_series_clear(struct gh_series *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

/* Full buffer: pairs merge (each holds `stride` inputs, so plain means are
 * the weighted ones), the stride doubles. */
static void halve(struct gh_series *s)
{
    size_t m = s->n / 2;
    for (size_t i = 0; i < m; i++) {
        s->x[i] = (s->x[2 * i] + s->x[2 * i + 1]) / 2;
        s->y[i] = (s->y[2 * i] + s->y[2 * i + 1]) / 2;
    }
    s->n = m;
    s->stride *= 2;
}

void gh_series_add(struct gh_series *s, double x, double y)
{
    if (!s->cap || !isfinite(x) || !isfinite(y))
        return;
    s->raw++;
    s->px += x;
    s->py += y;
    if (++s->pn < s->stride)
        return;
    if (s->n == s->cap) {
        /* the bucket goes on filling up to the new, doubled stride */
        halve(s);
        return;
    }
    s->x[s->n] = s->px / (double)s->pn;
    s->y[s->n] = s->py / (double)s->pn;
    s->n++;
    s->px = s->py = 0;
    s->pn = 0;
}

size_t gh_series_copy(const struct gh_series *s, double *x, double *y, size_t max)
{
    size_t k = 0;
    for (; k < s->n && k < max; k++) {
        x[k] = s->x[k];
        y[k] = s->y[k];
    }
    /* a partial bucket is noisier than the rest: only when half full */
    if (s->pn && k < max && (s->pn * 2 >= s->stride || !s->n)) {
        x[k] = s->px / (double)s->pn;
        y[k] = s->py / (double)s->pn;
        k++;
    }
    return k;
}

size_t gh_series_decimate(const double *x, const double *y, size_t n, size_t cap, double *ox,
                          double *oy)
{
    if (!cap)
        return 0;
    if (n <= cap) {
        memcpy(ox, x, n * sizeof *ox);
        memcpy(oy, y, n * sizeof *oy);
        return n;
    }
    size_t b = (n + cap - 1) / cap, k = 0;
    for (size_t i = 0; i < n; i += b, k++) {
        size_t e = i + b < n ? i + b : n;
        double sx = 0, sy = 0;
        for (size_t j = i; j < e; j++) {
            sx += x[j];
            sy += y[j];
        }
        ox[k] = sx / (double)(e - i);
        oy[k] = sy / (double)(e - i);
    }
    return k;
}
