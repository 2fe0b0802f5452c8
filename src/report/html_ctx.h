/* html_ctx.h - internal to the report page (report/html*.c): the state its
 * parts share while one page is written (drawn time range, lane order,
 * blamed nodes, scratch for series points), planned once by
 * gh_html_plan(), and the helpers the page (html.c), the timeline
 * (html_timeline.c) and the step charts (html_steps.c) all use. */
#ifndef GH_REPORT_HTML_CTX_H
#define GH_REPORT_HTML_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "report/report-t.h"

/* SVG geometry (user units; the SVG scales to the page's width), the same
 * for the timeline and the step charts so that their time axes line up. */
#define SVG_W 1200
#define LABEL_W 250
#define PLOT_X0 (LABEL_W + 10)
#define PLOT_W (SVG_W - PLOT_X0 - 20)

struct gh_html_ctx {
    const struct gh_report *r; /* borrowed */
    FILE *f;                   /* borrowed */
    int64_t t0, t1;            /* drawn time range */
    bool same_day;
    bool has_range;
    /* lanes drawn, in order (owned, indexes into r->lanes) */
    size_t *order;
    size_t n_order, lanes_hidden;
    /* nodes with nothing but steps, drawn together when there are many */
    size_t n_quiet_nodes;
    struct gh_rep_seg *qseg; /* owned */
    size_t n_qseg;
    /* blamed nodes (the arrays owned, the strings borrowed from incidents) */
    const char **blamed;
    const char **blamed_cls;
    size_t n_blamed;
    double *bx, *by; /* owned scratch for series points */
    double *dx, *dy;
    size_t scratch;
};

/* Plans the page for c->r: time range, lanes in drawing order, blamed
 * nodes, scratch. GH_OK or GH_ENOMEM; gh_html_ctx_release() frees what it
 * allocated either way. */
int gh_html_plan(struct gh_html_ctx *c, struct gh_err *err);
void gh_html_ctx_release(struct gh_html_ctx *c);

/* A severity as a class name: one of the known severities or "unknown". */
const char *gh_html_sev_class(const char *sev);
/* "07:11:40.123" (same day) or "2026-11-29 07:11:40.123", into buf. */
const char *gh_html_fmt_t(const struct gh_html_ctx *c, int64_t ns, char *buf, size_t cap);
/* The x of time ns on the plot. */
double gh_html_xpos(const struct gh_html_ctx *c, int64_t ns);
/* Whether node is blamed by an incident; *cls (when cls is not NULL) its class. */
bool gh_html_is_blamed(const struct gh_html_ctx *c, const char *node, const char **cls);
bool gh_html_job_in_scope(const struct gh_report *r, const struct gh_rep_job *j);

/* Time ticks across the plot: the step between them (ns). */
int64_t gh_html_tick_step(int64_t span);
/* Tick lines from y_top to y_bot, with their times above y_top when labels. */
void gh_html_time_axis(struct gh_html_ctx *c, double y_top, double y_bot, bool labels);

/* The page's sections drawn as SVG. */
void gh_html_timeline(struct gh_html_ctx *c);
void gh_html_step_charts(struct gh_html_ctx *c);

#endif
