/* html_steps.c - the report page's step-time charts (svg.step-chart, one
 * per job): step time per rank, or per node for large jobs, the y range
 * chosen so that a straggler shows, the blamed node's series on top, the
 * decisions that blamed it marked; series decimated to the model's cap. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/html_escape.h"
#include "common/timeutil.h"
#include "report/html_ctx.h"
#include "report/report.h"
#include "report/series.h"

#define CHART_H 330
#define CHART_TOP 20
#define CHART_PLOT_H 260

struct pt {
    double x, y;
};

static int pt_cmp(const void *a, const void *b)
{
    const struct pt *p = a, *q = b;
    return (p->x > q->x) - (p->x < q->x);
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double nice_step(double range)
{
    double raw = range / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

/* Points of series se for drawing, sorted by x and decimated to cap, into
 * c->dx/dy; returns the count. */
static size_t series_draw_points(struct gh_html_ctx *c, const struct gh_rep_series *se, size_t cap)
{
    size_t n = gh_rep_series_points(se, c->bx, c->by, c->scratch);
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = c->bx[i - 1] <= c->bx[i];
    if (!sorted) {
        struct pt *p = malloc(n * sizeof *p);
        if (p) {
            for (size_t i = 0; i < n; i++)
                p[i] = (struct pt){c->bx[i], c->by[i]};
            qsort(p, n, sizeof *p, pt_cmp);
            for (size_t i = 0; i < n; i++)
                c->bx[i] = p[i].x, c->by[i] = p[i].y;
            free(p);
        }
    }
    return gh_series_decimate(c->bx, c->by, n, cap, c->dx, c->dy);
}

struct blame {
    const char *node;
    int gpu;
    const struct gh_rep_incident *in;
    size_t idx;
};

static void step_chart(struct gh_html_ctx *c, const struct gh_rep_job *j, size_t k)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    bool per_rank = j->n_ranks && !j->ranks_dropped;
    const struct gh_rep_series *set = per_rank ? j->ranks : j->nodes_s;
    size_t ns = per_rank ? j->n_ranks : j->n_nodes_s;
    if (!ns)
        return;
    /* who is blamed in this job */
    struct blame bl[16];
    size_t nb = 0;
    for (size_t i = 0; i < r->n_inc && nb < 16; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        if (in->node && ((in->job && strcmp(in->job, j->name) == 0) ||
                         (!in->job && gh_rep_job_has_node(j, in->node))))
            bl[nb++] = (struct blame){in->node, in->gpu, in, i};
    }
    size_t per = r->lim.max_chart_points / ns;
    if (per < 8)
        per = 8;
    /* the y range: 0.5th to 99.5th percentile of what is drawn... */
    size_t total = 0, cap_all = ns * per;
    double *all = malloc((cap_all ? cap_all : 1) * sizeof *all);
    if (!all)
        return;
    bool decimated = false;
    uint64_t stride = 1;
    for (size_t s = 0; s < ns; s++) {
        size_t stored = set[s].s.n + (set[s].s.pn ? 1 : 0) + (set[s].pn ? 1 : 0);
        if (stored > per)
            decimated = true;
        if (set[s].s.stride > stride)
            stride = set[s].s.stride;
        size_t m = series_draw_points(c, &set[s], per);
        for (size_t i = 0; i < m && total < cap_all; i++)
            all[total++] = c->dy[i];
    }
    if (!total) {
        free(all);
        return;
    }
    qsort(all, total, sizeof *all, dbl_cmp);
    double lo = all[(size_t)((double)(total - 1) * 0.005)];
    double hi = all[(size_t)((double)(total - 1) * 0.995)];
    /* ...widened to every point within 1.5x the median: a straggler (a few
     * slow points, 5-50% slower) must show, while a restart's minute-long
     * step would flatten everything else */
    double median = all[(total - 1) / 2];
    for (size_t i = total; i-- > 0;)
        if (all[i] <= 1.5 * median) {
            if (all[i] > hi)
                hi = all[i];
            break;
        }
    for (size_t i = 0; i < total; i++)
        if (all[i] >= median / 1.5) {
            if (all[i] < lo)
                lo = all[i];
            break;
        }
    free(all);
    if (hi - lo < 1e-9) {
        lo -= 1;
        hi += 1;
    }
    double pad = (hi - lo) * 0.08;
    lo -= pad;
    hi += pad;
    if (lo < 0)
        lo = 0;
    double ystep = nice_step(hi - lo);
    lo = floor(lo / ystep) * ystep;
    hi = ceil(hi / ystep) * ystep;
    double y0 = CHART_TOP, y1 = CHART_TOP + CHART_PLOT_H;

    fputs("<figure>", f);
    fprintf(f, "<svg id=\"steps-%zu\" class=\"step-chart\" data-job=\"", k);
    gh_html_escape(f, j->name);
    fprintf(f,
            "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
            "height=\"%d\" role=\"img\" aria-label=\"step time per %s\">\n",
            SVG_W, CHART_H, SVG_W, CHART_H, per_rank ? "rank" : "node");
    fprintf(f,
            "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#fbfcfd\" "
            "stroke=\"#d9dee5\"/>",
            PLOT_X0, y0, PLOT_W, CHART_PLOT_H);
    fputs("<g class=\"grid\">", f);
    for (double v = lo; v <= hi + ystep / 2; v += ystep) {
        double y = y1 - (v - lo) / (hi - lo) * CHART_PLOT_H;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>",
                PLOT_X0, y, PLOT_X0 + PLOT_W, y, PLOT_X0 - 6, y + 4, v);
    }
    fputs("</g>", f);
    fprintf(f, "<text class=\"title\" x=\"10\" y=\"%.0f\">", y0 + 14);
    gh_html_escape(f, j->name);
    fprintf(f, "</text><text x=\"10\" y=\"%.0f\" class=\"lane-label\">step time (ms) per %s</text>",
            y0 + 30, per_rank ? "rank" : "node (mean of its ranks)");
    gh_html_time_axis(c, y1, y1 + 4, false);
    /* time labels under the plot */
    {
        int64_t st = gh_html_tick_step(c->t1 - c->t0);
        int64_t t = c->t0 - (c->t0 % st + st) % st + st;
        for (; t < c->t1; t += st) {
            char full[GH_RFC3339_MAX];
            gh_time_format_rfc3339(t, full, sizeof full);
            fprintf(f,
                    "<text class=\"lane-label\" x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">"
                    "%.8s</text>",
                    gh_html_xpos(c, t), y1 + 18, full + 11);
        }
    }
    double span = (double)(c->t1 - c->t0);
    /* others first, the blamed on top */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t s = 0; s < ns; s++) {
            const struct gh_rep_series *se = &set[s];
            const struct blame *b = NULL;
            for (size_t i = 0; i < nb && !b; i++)
                if (se->node && strcmp(bl[i].node, se->node) == 0)
                    b = &bl[i];
            if ((pass == 0) != (b == NULL))
                continue;
            bool gpu = b && per_rank && b->gpu >= 0 && se->gpu == b->gpu;
            size_t m = series_draw_points(c, se, per);
            fprintf(f, "<polyline class=\"series%s%s\" data-node=\"", b ? " blamed" : "",
                    gpu ? " gpu" : "");
            gh_html_escape(f, se->node);
            fputs("\"", f);
            if (se->rank >= 0)
                fprintf(f, " data-rank=\"%d\"", se->rank);
            fputs(" points=\"", f);
            for (size_t i = 0; i < m; i++) {
                double x = PLOT_X0 + ((double)(r->t0 - c->t0) + c->dx[i] * 1e9) / span * PLOT_W;
                double v = c->dy[i] < lo ? lo : c->dy[i] > hi ? hi : c->dy[i];
                double y = y1 - (v - lo) / (hi - lo) * CHART_PLOT_H;
                fprintf(f, "%s%.1f,%.1f", i ? " " : "", x, y);
            }
            fputs("\"><title>", f);
            if (se->rank >= 0)
                fprintf(f, "rank %d on ", se->rank);
            else
                fputs("mean of the ranks on ", f);
            gh_html_escape(f, se->node ? se->node : "?");
            if (se->gpu >= 0)
                fprintf(f, " GPU %d", se->gpu);
            if (b) {
                fputs(" \xE2\x80\x94 blamed: ", f);
                gh_html_escape(f, b->in->cls);
            }
            fputs("</title></polyline>\n", f);
        }
    }
    for (size_t i = 0; i < nb; i++) {
        double x = gh_html_xpos(c, bl[i].in->decided_ns);
        fprintf(f,
                "<line class=\"decision-line\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"/>"
                "<text x=\"%.1f\" y=\"%.0f\" fill=\"#b71c1c\">decision #%zu</text>",
                x, y0, x, y1, x + 4, y0 + 12, bl[i].idx + 1);
    }
    fputs("</svg>\n<figcaption>", f);
    gh_html_escape(f, j->name);
    fprintf(f, ": %" PRIu64 " step reports, %zu %s", j->steps, ns, per_rank ? "ranks" : "nodes");
    if (nb) {
        fputs("; highlighted: ", f);
        for (size_t i = 0; i < nb; i++) {
            fputs(i ? ", " : "", f);
            gh_html_escape(f, bl[i].node);
            if (bl[i].gpu >= 0)
                fprintf(f, " GPU %d", bl[i].gpu);
            fputs(" (", f);
            gh_html_escape(f, bl[i].in->cls);
            fputs(")", f);
        }
    }
    fputs(". Values outside the axis are drawn at its edge.</figcaption>\n", f);
    if (decimated || stride > 1)
        fprintf(f,
                "<p class=\"truncated\">Points averaged for drawing: at most %zu per series "
                "(stored as means of up to %" PRIu64 " reports).</p>\n",
                per, stride);
    if (j->ranks_dropped)
        fprintf(f, "<p class=\"truncated\">More than %zu ranks: drawn per node.</p>\n",
                r->lim.max_rank_series);
    if (j->nodes_s_dropped)
        fprintf(f, "<p class=\"truncated\">More than %zu nodes: the rest are not drawn.</p>\n",
                r->lim.max_node_series);
    fputs("</figure>\n", f);
}

void gh_html_step_charts(struct gh_html_ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<section id=\"steps-section\"><h2>Step time</h2>\n", f);
    size_t k = 0;
    for (size_t j = 0; j < r->n_jobs; j++) {
        const struct gh_rep_job *jb = &r->jobs[j];
        if (!gh_html_job_in_scope(r, jb) || (!jb->n_ranks && !jb->n_nodes_s))
            continue;
        step_chart(c, jb, k++);
    }
    if (!k)
        fputs("<p class=\"muted\" id=\"no-steps\">No step telemetry for this subject.</p>\n", f);
    if (r->st.jobs_dropped)
        fprintf(f,
                "<p class=\"truncated\">Signals of more than %zu jobs: the rest have no chart."
                "</p>\n",
                r->lim.max_jobs);
    fputs("</section>\n", f);
}
