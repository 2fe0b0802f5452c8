/* svg.h - a small line-chart writer (SVG 1.1, no dependencies): series of
 * (x, y) points as polylines over labelled axes, x optionally logarithmic,
 * with a legend. Used for `gpuheal simulate --sweep`. */
#ifndef GH_SIM_SVG_H
#define GH_SIM_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct gh_svg_series {
    const char *name;      /* legend text (borrowed) */
    size_t n;
    const double *x, *y;   /* borrowed; non-finite points are skipped */
    bool dashed;
};

struct gh_svg_chart {
    const char *title, *xlabel, *ylabel; /* borrowed */
    bool logx;
    size_t n_series;
    const struct gh_svg_series *series;  /* borrowed */
};

/* Writes the chart to f. Returns 0, or -1 when there is nothing to draw or
 * writing failed. */
int gh_svg_write(FILE *f, const struct gh_svg_chart *ch);

#endif
