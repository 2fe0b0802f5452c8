/* html.c - draws the report model as one self-contained HTML page: inline
 * CSS, a timeline and step-time charts as SVG written here, tables of
 * incidents, evidence, decisions and actions; every input string escaped,
 * every list bounded by the model's caps and the page saying what was left
 * out. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "common/utf8.h"
#include "report/html.h"
#include "report/report-t.h"

/* SVG geometry (user units; the SVG scales to the page's width). */
#define SVG_W 1200
#define LABEL_W 250
#define PLOT_X0 (LABEL_W + 10)
#define PLOT_W (SVG_W - PLOT_X0 - 20)
#define AXIS_H 30
#define LANE_H 22
#define HEAD_H 20
#define CHART_H 330
#define CHART_TOP 20
#define CHART_PLOT_H 260

/* ---- escaping */

static void put_fffd(FILE *out)
{
    fputs("\xEF\xBF\xBD", out);
}

/* Escapes s[0..n); in a <title> (title true) a newline becomes a character
 * reference so that tooltips keep their lines. */
static void escape_n(FILE *out, const char *s, size_t n, bool title)
{
    const unsigned char *p = (const unsigned char *)s;
    while (n) {
        unsigned c = *p;
        size_t k = 1;
        switch (c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        case '\n': fputs(title ? "&#10;" : "\n", out); break;
        case '\t': fputc('\t', out); break;
        default:
            if (c < 0x20 || c == 0x7F) {
                put_fffd(out);
            } else if (c < 0x80) {
                fputc((int)c, out);
            } else if ((k = gh_utf8_seq((const char *)p, n)) == 0) {
                put_fffd(out);
                k = 1;
            } else {
                fwrite(p, 1, k, out);
            }
        }
        p += k;
        n -= k;
    }
}

void gh_html_escape(FILE *out, const char *s)
{
    if (s)
        escape_n(out, s, strlen(s), false);
}

static void esc_title(FILE *out, const char *s)
{
    if (s)
        escape_n(out, s, strlen(s), true);
}

static void esc(FILE *out, const char *s)
{
    gh_html_escape(out, s);
}

/* ---- helpers */

struct ctx {
    const struct gh_report *r;
    FILE *f;
    int64_t t0, t1;      /* drawn time range */
    bool same_day;
    bool has_range;
    /* lanes drawn, in order */
    size_t *order;
    size_t n_order, lanes_hidden;
    /* nodes with nothing but steps, drawn together when there are many */
    size_t n_quiet_nodes;
    struct gh_rep_seg *qseg;
    size_t n_qseg;
    /* blamed nodes (borrowed from incidents) */
    const char **blamed;
    const char **blamed_cls;
    size_t n_blamed;
    double *bx, *by;     /* scratch for series points */
    double *dx, *dy;
    size_t scratch;
};

static const char *sev_class(const char *sev)
{
    static const char *const known[] = {"critical", "high", "medium", "low", "info"};
    for (size_t i = 0; sev && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(sev, known[i]) == 0)
            return known[i];
    return "unknown";
}

static const char *src_class(enum gh_rep_group g)
{
    static const char *const c[GH_REP__GROUPS] = {"kmsg", "gpu", "host", "kube", "train", "probe"};
    return (unsigned)g < GH_REP__GROUPS ? c[g] : "other";
}

/* Fixed words from the store (results, verdicts) as a class name: only
 * letters, digits and _ pass; anything else is "other". */
static const char *word_class(const char *w, const char *const *known, size_t n)
{
    for (size_t i = 0; w && i < n; i++)
        if (strcmp(w, known[i]) == 0)
            return known[i];
    return "other";
}

/* "07:11:40.123" (same day) or "2026-11-29 07:11:40.123". */
static const char *fmt_t(const struct ctx *c, int64_t ns, char *buf, size_t cap)
{
    char full[GH_RFC3339_MAX];
    gh_time_format_rfc3339(ns, full, sizeof full);
    if (c->same_day)
        snprintf(buf, cap, "%.12s", full + 11);
    else
        snprintf(buf, cap, "%.10s %.12s", full, full + 11);
    return buf;
}

static const char *fmt_full(int64_t ns, char *buf, size_t cap)
{
    char full[GH_RFC3339_MAX];
    gh_time_format_rfc3339(ns, full, sizeof full);
    snprintf(buf, cap, "%.10s %.12sZ", full, full + 11);
    return buf;
}

static double xpos(const struct ctx *c, int64_t ns)
{
    double span = (double)(c->t1 - c->t0);
    return PLOT_X0 + (double)(ns - c->t0) / span * PLOT_W;
}

static bool is_blamed(const struct ctx *c, const char *node, const char **cls)
{
    for (size_t i = 0; node && i < c->n_blamed; i++)
        if (strcmp(c->blamed[i], node) == 0) {
            if (cls)
                *cls = c->blamed_cls[i];
            return true;
        }
    return false;
}

static bool lane_in_scope(const struct gh_report *r, const struct gh_rep_lane *l)
{
    if (r->scope == GH_REPORT_ALL)
        return true;
    if (r->scope == GH_REPORT_NODE)
        return l->node ? strcmp(l->node, r->subject) == 0
                       : gh_rep_job_has_node(gh_rep_find_job(r, l->job), r->subject);
    const struct gh_rep_job *j = gh_rep_find_job(r, r->subject);
    return (l->job && strcmp(l->job, r->subject) == 0) || gh_rep_job_has_node(j, l->node);
}

static bool job_in_scope(const struct gh_report *r, const struct gh_rep_job *j)
{
    if (r->scope == GH_REPORT_ALL)
        return true;
    if (r->scope == GH_REPORT_JOB)
        return strcmp(j->name, r->subject) == 0;
    return gh_rep_job_has_node(j, r->subject);
}

static void widen(struct ctx *c, int64_t t)
{
    if (t == INT64_MIN || t == 0)
        return;
    if (!c->has_range) {
        c->t0 = c->t1 = t;
        c->has_range = true;
    } else {
        if (t < c->t0)
            c->t0 = t;
        if (t > c->t1)
            c->t1 = t;
    }
}

/* ---- lane order */

static int lane_cmp(const void *a, const void *b, void *ud)
{
    const struct ctx *c = ud;
    const struct gh_rep_lane *x = &c->r->lanes[*(const size_t *)a];
    const struct gh_rep_lane *y = &c->r->lanes[*(const size_t *)b];
    /* job and cluster lanes first, then blamed nodes, then the others by name */
    int xr = x->node ? (is_blamed(c, x->node, NULL) ? 1 : 2) : 0;
    int yr = y->node ? (is_blamed(c, y->node, NULL) ? 1 : 2) : 0;
    if (xr != yr)
        return xr - yr;
    const char *xn = x->node ? x->node : x->job ? x->job : "";
    const char *yn = y->node ? y->node : y->job ? y->job : "";
    int k = strcmp(xn, yn);
    if (k)
        return k;
    if (x->group != y->group)
        return (int)x->group - (int)y->group;
    return x->gpu - y->gpu;
}

/* More quiet nodes than this (steps reported, nothing else seen, not
 * blamed) share one lane. */
#define QUIET_MAX 6

static bool lane_quiet(const struct gh_rep_lane *l)
{
    return l->node && l->group == GH_REP_TRAIN && !l->n_ev && !l->dropped;
}

static int seg_cmp(const void *a, const void *b)
{
    const struct gh_rep_seg *x = a, *y = b;
    return (x->a > y->a) - (x->a < y->a);
}

/* Takes the lanes of quiet nodes out of c->order[0..*n) (sorted: a node's
 * lanes together) when there are more than QUIET_MAX such nodes, and keeps
 * the union of their activity in c->qseg. */
static int fold_quiet(struct ctx *c, size_t *n, struct gh_err *err)
{
    const struct gh_report *r = c->r;
    size_t quiet_nodes = 0, quiet_lanes = 0;
    for (size_t i = 0; i < *n;) {
        const struct gh_rep_lane *l = &r->lanes[c->order[i]];
        size_t e = i + 1;
        bool quiet = lane_quiet(l) && !is_blamed(c, l->node, NULL);
        for (; e < *n && r->lanes[c->order[e]].node &&
               l->node && strcmp(r->lanes[c->order[e]].node, l->node) == 0; e++)
            quiet = quiet && lane_quiet(&r->lanes[c->order[e]]);
        if (quiet) {
            quiet_nodes++;
            quiet_lanes += e - i;
        }
        i = e;
    }
    if (quiet_nodes <= QUIET_MAX)
        return GH_OK;
    c->qseg = malloc(quiet_lanes * GH_REP_MAX_SEGS * sizeof *c->qseg + 1);
    if (!c->qseg)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < *n;) {
        const struct gh_rep_lane *l = &r->lanes[c->order[i]];
        size_t e = i + 1;
        bool quiet = lane_quiet(l) && !is_blamed(c, l->node, NULL);
        for (; e < *n && r->lanes[c->order[e]].node &&
               l->node && strcmp(r->lanes[c->order[e]].node, l->node) == 0; e++)
            quiet = quiet && lane_quiet(&r->lanes[c->order[e]]);
        for (size_t j = i; j < e; j++) {
            const struct gh_rep_lane *m = &r->lanes[c->order[j]];
            if (!quiet) {
                c->order[k++] = c->order[j];
                continue;
            }
            memcpy(c->qseg + c->n_qseg, m->seg, m->n_seg * sizeof *m->seg);
            c->n_qseg += m->n_seg;
        }
        i = e;
    }
    *n = k;
    c->n_quiet_nodes = quiet_nodes;
    /* the union of their spans */
    qsort(c->qseg, c->n_qseg, sizeof *c->qseg, seg_cmp);
    size_t m = 0;
    for (size_t i = 0; i < c->n_qseg; i++) {
        if (m && c->qseg[i].a <= c->qseg[m - 1].b) {
            if (c->qseg[i].b > c->qseg[m - 1].b)
                c->qseg[m - 1].b = c->qseg[i].b;
        } else {
            c->qseg[m++] = c->qseg[i];
        }
    }
    c->n_qseg = m;
    return GH_OK;
}

static int plan(struct ctx *c, struct gh_err *err)
{
    const struct gh_report *r = c->r;
    c->blamed = calloc(r->n_inc + 1, sizeof *c->blamed);
    c->blamed_cls = calloc(r->n_inc + 1, sizeof *c->blamed_cls);
    c->order = calloc(r->n_lanes + 1, sizeof *c->order);
    if (!c->blamed || !c->blamed_cls || !c->order)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        widen(c, in->first_ns);
        widen(c, in->decided_ns);
        for (size_t k = 0; k < in->n_guards; k++)
            widen(c, in->guards[k].ts);
        for (size_t k = 0; k < in->n_acts; k++) {
            widen(c, in->acts[k].started);
            widen(c, in->acts[k].finished);
        }
        for (size_t k = 0; k < in->n_ev; k++)
            widen(c, in->ev[k].ts);
        if (in->node && !is_blamed(c, in->node, NULL)) {
            c->blamed[c->n_blamed] = in->node;
            c->blamed_cls[c->n_blamed++] = in->cls;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < r->n_lanes; i++) {
        const struct gh_rep_lane *l = &r->lanes[i];
        if (!lane_in_scope(r, l))
            continue;
        c->order[n++] = i;
        for (size_t k = 0; k < l->n_ev; k++)
            widen(c, l->ev[k].ts);
        for (size_t k = 0; k < l->n_seg; k++) {
            widen(c, l->seg[k].a);
            widen(c, l->seg[k].b);
        }
    }
    qsort_r(c->order, n, sizeof *c->order, lane_cmp, c);
    int rc = fold_quiet(c, &n, err);
    if (rc)
        return rc;
    if (n > r->lim.max_shown_lanes) {
        c->lanes_hidden = n - r->lim.max_shown_lanes;
        n = r->lim.max_shown_lanes;
    }
    c->n_order = n;
    /* the step series' time range (x: seconds since r->t0) */
    size_t most = 1;
    for (size_t j = 0; j < r->n_jobs; j++) {
        const struct gh_rep_job *jb = &r->jobs[j];
        if (!job_in_scope(r, jb))
            continue;
        const struct gh_rep_series *sets[2] = {jb->ranks, jb->nodes_s};
        size_t ns[2] = {jb->n_ranks, jb->n_nodes_s};
        for (int s = 0; s < 2; s++)
            for (size_t k = 0; k < ns[s]; k++) {
                const struct gh_rep_series *se = &sets[s][k];
                if (se->s.n + 2 > most)
                    most = se->s.n + 2;
                if (se->s.n) {
                    widen(c, r->t0 + (int64_t)(se->s.x[0] * 1e9));
                    widen(c, r->t0 + (int64_t)(se->s.x[se->s.n - 1] * 1e9));
                }
            }
    }
    c->scratch = most;
    c->bx = malloc(most * sizeof *c->bx);
    c->by = malloc(most * sizeof *c->by);
    c->dx = malloc(most * sizeof *c->dx);
    c->dy = malloc(most * sizeof *c->dy);
    if (!c->bx || !c->by || !c->dx || !c->dy)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    if (c->has_range) {
        int64_t span = c->t1 - c->t0;
        if (span < 60 * GH_NS_PER_S) {
            int64_t pad = (60 * GH_NS_PER_S - span) / 2;
            c->t0 -= pad;
            c->t1 += pad;
            span = c->t1 - c->t0;
        }
        c->t0 -= span / 40;
        c->t1 += span / 40;
        char a[GH_RFC3339_MAX], b[GH_RFC3339_MAX];
        gh_time_format_rfc3339(c->t0, a, sizeof a);
        gh_time_format_rfc3339(c->t1, b, sizeof b);
        c->same_day = memcmp(a, b, 10) == 0;
    }
    return GH_OK;
}

/* ---- CSS */

static const char css[] =
    ":root{--kmsg:#c0392b;--gpu:#e67e22;--host:#8d6e63;--kube:#2f6db3;--train:#2e9b57;"
    "--probe:#8e44ad;--crit:#b71c1c;--high:#e53935;--med:#f39c12;--low:#7f8c8d;--ink:#1d2330;"
    "--muted:#5f6b7a;--line:#d9dee5;--bg:#f6f7f9}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',"
    "sans-serif;color:var(--ink);background:var(--bg)}\n"
    "main{max-width:1320px;margin:0 auto;padding:16px 24px 40px}\n"
    "header.top{background:#1d2330;color:#fff;padding:14px 24px}\n"
    "header.top h1{margin:0;font-size:20px;font-weight:600}\n"
    "header.top .meta{color:#c8d0da;font-size:13px;margin-top:2px}\n"
    "nav{font-size:13px;margin:10px 0 0}nav a{color:#9fc3ff;margin-right:14px}\n"
    "section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:14px 16px;"
    "margin:16px 0}\n"
    "h2{font-size:16px;margin:0 0 10px}h3{font-size:15px;margin:0 0 6px}\n"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:12px}\n"
    ".card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:130px}\n"
    ".card b{display:block;font-size:22px}.card span{color:var(--muted);font-size:12px}\n"
    "table{border-collapse:collapse;width:100%;font-size:13px}\n"
    "th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}\n"
    "th{background:#eef1f5;font-weight:600;white-space:nowrap}\n"
    "td.t{white-space:nowrap;font-variant-numeric:tabular-nums}\n"
    "td.node.blamed{color:var(--crit);font-weight:700}\n"
    "code.raw{font:12px/1.35 ui-monospace,'DejaVu Sans Mono',monospace;white-space:pre-wrap;"
    "word-break:break-all}\n"
    ".sev{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}\n"
    ".sev.critical{background:var(--crit)}.sev.high{background:var(--high)}"
    ".sev.medium{background:var(--med)}.sev.low,.sev.info,.sev.unknown{background:var(--low)}\n"
    ".truncated{color:#8a5a00;background:#fff6e0;border:1px solid #f0d49a;border-radius:4px;"
    "padding:4px 8px;font-size:12px;margin:6px 0}\n"
    ".muted{color:var(--muted)}.injected{color:#8e44ad;font-size:11px;font-weight:600}\n"
    "svg{width:100%;height:auto;display:block}\n"
    "svg text{font:11px system-ui,'DejaVu Sans',sans-serif;fill:var(--ink)}\n"
    "svg .axis line{stroke:var(--line)}svg .axis text{fill:var(--muted)}\n"
    "svg .lane-bg{fill:#fafbfc}svg .lane-bg.alt{fill:#f1f3f6}\n"
    "svg .head-bg{fill:#e4e8ee}svg .head-bg.blamed{fill:#fde3e1}\n"
    "svg text.title,svg .head text{font-weight:700}svg .head.blamed text{fill:var(--crit)}\n"
    "svg .lane-label{fill:var(--muted)}\n"
    "svg .marker circle{stroke:#fff;stroke-width:1}\n"
    "svg .marker.w2 circle{stroke:#000;stroke-width:1.2}\n"
    "svg .marker.injected circle{stroke-dasharray:2 1}\n"
    "svg .src-kmsg circle{fill:var(--kmsg)}svg .src-gpu circle{fill:var(--gpu)}"
    "svg .src-host circle{fill:var(--host)}svg .src-kube circle{fill:var(--kube)}"
    "svg .src-train circle{fill:var(--train)}svg .src-probe circle{fill:var(--probe)}\n"
    "svg .labels text{font-size:10px;pointer-events:none}\n"
    "svg rect.activity{fill:var(--train);opacity:.35}\n"
    "svg .decision path{stroke:#000;stroke-width:1}\n"
    "svg .decision.critical path{fill:var(--crit)}svg .decision.high path{fill:var(--high)}"
    "svg .decision.medium path{fill:var(--med)}svg .decision.low path,svg .decision.info path,"
    "svg .decision.unknown path{fill:var(--low)}\n"
    "svg .decision text{font-weight:600;font-size:10px}\n"
    "svg rect.detect{fill:#f39c12;opacity:.25}\n"
    "svg line.decision-line{stroke:var(--crit);stroke-width:1;stroke-dasharray:4 3;opacity:.7;"
    "pointer-events:none}\n"
    "svg .action rect{stroke:#000;stroke-width:.5}\n"
    "svg .action.succeeded rect{fill:#2e9b57}svg .action.failed rect{fill:var(--crit)}"
    "svg .action.other rect,svg .action.noop rect,svg .action.skipped rect{fill:#95a5a6}\n"
    "svg .guard path{stroke:#000;stroke-width:.5}\n"
    "svg .guard.allowed path,svg .guard.approved path{fill:#2e9b57}"
    "svg .guard.denied path{fill:var(--crit)}svg .guard.dry_run path{fill:#2f6db3}"
    "svg .guard.awaiting_approval path{fill:#f39c12}svg .guard.other path{fill:#95a5a6}\n"
    "svg polyline.series{fill:none;stroke:#7f9bb8;stroke-width:1.2;opacity:.7}\n"
    "svg polyline.series.blamed{stroke:var(--crit);stroke-width:2.2;opacity:.95}\n"
    "svg polyline.series.blamed.gpu{stroke-width:3.2}\n"
    "svg .grid line{stroke:var(--line)}\n"
    ".legend{font-size:12px;color:var(--muted);margin:4px 0 0}\n"
    ".legend i{display:inline-block;width:10px;height:10px;border-radius:50%;margin:0 4px 0 12px;"
    "vertical-align:-1px}\n"
    ".legend i.line{border-radius:0;height:3px;width:18px;vertical-align:3px}\n"
    "article.incident{border-left:4px solid var(--low);padding:8px 12px;margin:12px 0;"
    "background:#fbfcfd}\n"
    "article.incident.critical{border-color:var(--crit)}article.incident.high{border-color:"
    "var(--high)}article.incident.medium{border-color:var(--med)}\n"
    "p.reason{margin:4px 0 8px}\n"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 8px;"
    "font-size:13px}dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}\n"
    "figure{margin:0 0 14px}figcaption{font-size:12px;color:var(--muted)}\n";

/* ---- page parts */

static void page_head(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"gpuheal report\">\n<title>",
          f);
    esc(f, r->title ? r->title : "gpuheal report");
    if (r->subject) {
        fputs(" \xE2\x80\x94 ", f);
        esc(f, r->subject);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
    fputs("<header class=\"top\"><h1>", f);
    esc(f, r->title ? r->title : "gpuheal report");
    if (r->subject) {
        fputs(": ", f);
        esc(f, r->scope == GH_REPORT_JOB ? "job " : "node ");
        esc(f, r->subject);
    }
    fputs("</h1><div class=\"meta\">", f);
    if (r->origin) {
        fputs("from ", f);
        esc(f, r->origin);
    }
    if (c->has_range) {
        char a[64], b[64];
        fprintf(f, "%s%s \xE2\x86\x92 %s", r->origin ? " \xC2\xB7 " : "",
                fmt_full(c->t0, a, sizeof a), fmt_full(c->t1, b, sizeof b));
    }
    fputs("</div>\n<nav><a href=\"#summary\">Summary</a><a href=\"#timeline-section\">Timeline"
          "</a><a href=\"#steps-section\">Step time</a><a href=\"#decisions\">Decisions</a>"
          "<a href=\"#incidents\">Incidents</a></nav></header>\n<main>\n",
          f);
}

static void summary(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    uint64_t acts = 0;
    for (size_t i = 0; i < r->n_inc; i++)
        acts += r->inc[i].acts_total;
    fputs("<section id=\"summary\"><h2>Summary</h2><div class=\"cards\">", f);
    fprintf(f, "<div class=\"card\" id=\"count-signals\"><b>%" PRIu64 "</b><span>signals read</span>"
               "</div>", r->st.signals);
    fprintf(f, "<div class=\"card\" id=\"count-incidents\"><b>%zu</b><span>incidents</span></div>",
            r->n_inc + r->st.incidents_dropped);
    fprintf(f, "<div class=\"card\" id=\"count-blamed\"><b>%zu</b><span>nodes blamed</span></div>",
            c->n_blamed);
    fprintf(f, "<div class=\"card\" id=\"count-actions\"><b>%" PRIu64 "</b><span>actions taken"
               "</span></div>", acts);
    fputs("</div>\n", f);
    if (!r->n_inc) {
        fputs("<p class=\"muted\" id=\"no-incidents\">No incidents: gpuheal decided nothing about "
              "this subject.</p>\n", f);
    } else {
        fputs("<table id=\"incidents-table\"><thead><tr><th>#</th><th>decided</th><th>class</th>"
              "<th>severity</th><th>node</th><th>GPU</th><th>job</th><th>rule</th><th>actions</th>"
              "<th>mode</th></tr></thead><tbody>\n", f);
        for (size_t i = 0; i < r->n_inc; i++) {
            const struct gh_rep_incident *in = &r->inc[i];
            char t[64];
            fprintf(f, "<tr class=\"sev-%s\"><td><a href=\"#incident-%zu\">%zu</a></td>"
                       "<td class=\"t\">%s</td><td class=\"cls\">", sev_class(in->severity), i,
                    i + 1, fmt_t(c, in->decided_ns, t, sizeof t));
            esc(f, in->cls);
            fprintf(f, "</td><td><span class=\"sev %s\">", sev_class(in->severity));
            esc(f, in->severity ? in->severity : "?");
            fprintf(f, "</span></td><td class=\"node%s\">", in->node ? " blamed" : "");
            esc(f, in->node ? in->node : "\xE2\x80\x94");
            fputs("</td><td>", f);
            if (in->gpu >= 0)
                fprintf(f, "%d", in->gpu);
            fputs("</td><td class=\"job\">", f);
            esc(f, in->job);
            fputs("</td><td class=\"rule\">", f);
            esc(f, in->rule);
            fputs("</td><td>", f);
            esc(f, in->actions);
            fputs("</td><td>", f);
            esc(f, in->mode ? in->mode : "replay");
            if (in->phase) {
                fputs(" / ", f);
                esc(f, in->phase);
            }
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    if (r->st.incidents_dropped)
        fprintf(f, "<p class=\"truncated\">%zu more incidents not shown (cap %zu).</p>\n",
                r->st.incidents_dropped, r->lim.max_incidents);
    fputs("</section>\n", f);
}

/* Time ticks across the plot: at most about ten, at round steps. */
static int64_t tick_step(int64_t span)
{
    static const int64_t steps_s[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
                                      7200, 10800, 21600, 43200, 86400, 172800, 604800};
    for (size_t i = 0; i < sizeof steps_s / sizeof steps_s[0]; i++)
        if (span / (steps_s[i] * GH_NS_PER_S) <= 10)
            return steps_s[i] * GH_NS_PER_S;
    return 604800 * GH_NS_PER_S * (span / (604800 * GH_NS_PER_S * 10) + 1);
}

static void time_axis(struct ctx *c, double y_top, double y_bot, bool labels)
{
    FILE *f = c->f;
    int64_t st = tick_step(c->t1 - c->t0);
    int64_t first = c->t0 - (c->t0 % st + st) % st + st;
    fputs("<g class=\"axis\">", f);
    for (int64_t t = first; t < c->t1; t += st) {
        double x = xpos(c, t);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, y_top, x, y_bot);
        if (labels) {
            char full[GH_RFC3339_MAX];
            gh_time_format_rfc3339(t, full, sizeof full);
            if (c->same_day)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.8s</text>", x,
                        y_top - 6, full + 11);
            else
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.5s %.5s</text>", x,
                        y_top - 6, full + 5, full + 11);
        }
    }
    fputs("</g>\n", f);
}

static void decision_lines(struct ctx *c, double y_top, double y_bot)
{
    for (size_t i = 0; i < c->r->n_inc; i++) {
        double x = xpos(c, c->r->inc[i].decided_ns);
        fprintf(c->f, "<line class=\"decision-line\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                      "y2=\"%.1f\"/>", x, y_top, x, y_bot);
    }
}

static void diamond(FILE *f, double x, double y, double s)
{
    fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\"/>", x, y - s, x + s, y, x,
            y + s, x - s, y);
}

static double label_w(const char *s)
{
    return 6.0 * (double)strlen(s) + 6;
}

/* A label gap units right of x1, or left of x0 when it would run off the
 * plot; returns where the label ends on the right (to keep the next clear). */
static double text_beside(FILE *f, double x0, double x1, double y, double gap, const char *s)
{
    double w = label_w(s);
    if (x1 + gap + w <= SVG_W) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x1 + gap, y);
        esc(f, s);
        fputs("</text>", f);
        return x1 + gap + w;
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", x0 - gap, y);
    esc(f, s);
    fputs("</text>", f);
    return x1 + gap;
}

static void lane_label(FILE *f, const struct gh_rep_lane *l, double y)
{
    fprintf(f, "<text class=\"lane-label\" x=\"18\" y=\"%.1f\">", y + 15);
    esc(f, gh_rep_group_name(l->group));
    if (l->gpu >= 0)
        fprintf(f, " \xC2\xB7 GPU %d", l->gpu);
    if (l->dropped)
        fprintf(f, " (+%" PRIu64 " not drawn)", l->dropped);
    fputs("</text>", f);
}

static void draw_lane(struct ctx *c, const struct gh_rep_lane *l, double y, bool alt)
{
    FILE *f = c->f;
    fprintf(f, "<g class=\"lane src-%s\" data-source=\"%s\"", src_class(l->group),
            src_class(l->group));
    if (l->node) {
        fputs(" data-node=\"", f);
        esc(f, l->node);
        fputs("\"", f);
    }
    if (l->gpu >= 0)
        fprintf(f, " data-gpu=\"%d\"", l->gpu);
    fprintf(f, "><rect class=\"lane-bg%s\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>",
            alt ? " alt" : "", y, SVG_W, LANE_H);
    lane_label(f, l, y);
    double mid = y + LANE_H / 2.0;
    for (size_t k = 0; k < l->n_seg; k++) {
        double a = xpos(c, l->seg[k].a), b = xpos(c, l->seg[k].b);
        char ta[64], tb[64];
        fprintf(f, "<rect class=\"activity\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\">"
                   "<title>steps reported %s \xE2\x80\x93 %s</title></rect>",
                a, mid - 4, b - a < 2 ? 2 : b - a, fmt_t(c, l->seg[k].a, ta, sizeof ta),
                fmt_t(c, l->seg[k].b, tb, sizeof tb));
    }
    for (size_t k = 0; k < l->n_ev; k++) {
        const struct gh_rep_event *e = &l->ev[k];
        double x = xpos(c, e->ts);
        char t[64];
        fprintf(f, "<g class=\"marker w%u%s\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"/><title>",
                e->weight, e->injected ? " injected" : "", x, mid,
                e->weight == GH_REP_MAJOR ? "5" : e->weight == GH_REP_NOTABLE ? "4" : "3");
        fprintf(f, "%s  ", fmt_t(c, e->ts, t, sizeof t));
        esc(f, gh_rep_group_name(l->group));
        if (l->node) {
            fputs("  ", f);
            esc(f, l->node);
        }
        if (e->gpu >= 0)
            fprintf(f, " GPU %d", e->gpu);
        fputs("  ", f);
        esc(f, e->label);
        if (e->injected)
            fputs(" (injected)", f);
        if (e->detail) {
            fputs("&#10;", f);
            esc_title(f, e->detail);
        }
        fputs("</title>", f);
        fputs("</g>", f);
    }
    /* labels after the markers, so that no marker covers one */
    fputs("<g class=\"labels\">", f);
    double label_end = -1;
    for (size_t k = 0; k < l->n_ev;) {
        const struct gh_rep_event *e = &l->ev[k];
        double x = xpos(c, e->ts), last = x;
        /* markers close together with the same label share one: "... x10" */
        size_t m = 1;
        while (k + m < l->n_ev && xpos(c, l->ev[k + m].ts) - last < 6 &&
               strcmp(l->ev[k + m].label, e->label) == 0)
            last = xpos(c, l->ev[k + m++].ts);
        if (e->weight >= GH_REP_NOTABLE && x > label_end) {
            char lab[256];
            if (m > 1)
                snprintf(lab, sizeof lab, "%s \xC3\x97%zu", e->label, m);
            else
                snprintf(lab, sizeof lab, "%s", e->label);
            label_end = text_beside(f, x, last, mid + 4, 7, lab);
        }
        k += m;
    }
    fputs("</g></g>\n", f);
}

static void timeline(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<section id=\"timeline-section\"><h2>Timeline</h2>\n", f);
    if (!c->has_range) {
        fputs("<p class=\"muted\">Nothing to draw: no signals or decisions.</p></section>\n", f);
        return;
    }
    bool any_acts = false;
    for (size_t i = 0; i < r->n_inc; i++)
        any_acts = any_acts || r->inc[i].n_acts || r->inc[i].n_guards;
    /* heights: axis, decisions, actions, then groups and lanes */
    double h = AXIS_H + LANE_H + 6 + (any_acts ? LANE_H : 0);
    const char *prev = NULL;
    bool first = true;
    for (size_t i = 0; i < c->n_order; i++) {
        const struct gh_rep_lane *l = &r->lanes[c->order[i]];
        const char *g = l->node ? l->node : l->job ? l->job : "";
        if (first || strcmp(g, prev) != 0 || (!l->node) != (!r->lanes[c->order[i - 1]].node))
            h += HEAD_H;
        first = false;
        prev = g;
        h += LANE_H;
    }
    if (c->n_quiet_nodes)
        h += HEAD_H + LANE_H;
    h += 8;
    fprintf(f, "<svg id=\"timeline\" class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" "
               "viewBox=\"0 0 %d %.0f\" width=\"%d\" height=\"%.0f\" role=\"img\" "
               "aria-label=\"signals, decisions and actions over time\">\n",
            SVG_W, h, SVG_W, h);
    time_axis(c, AXIS_H, h - 4, true);
    /* gpuheal's decisions */
    double y = AXIS_H;
    fprintf(f, "<g class=\"lane decisions\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
               "width=\"%d\" height=\"%d\"/><text class=\"title\" x=\"6\" y=\"%.1f\">"
               "gpuheal decisions</text>", y, SVG_W, LANE_H + 6, y + 17);
    double mid = y + (LANE_H + 6) / 2.0, label_end = -1;
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        double xa = xpos(c, in->first_ns), xb = xpos(c, in->decided_ns);
        if (in->first_ns && xb - xa >= 1)
            fprintf(f, "<rect class=\"detect\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\">"
                       "<title>evidence from first signal to decision</title></rect>",
                    xa, mid - 5, xb - xa);
        char t[64];
        fprintf(f, "<a href=\"#incident-%zu\"><g class=\"decision %s\" data-incident=\"%zu\">", i,
                sev_class(in->severity), i);
        diamond(f, xb, mid, 7);
        fprintf(f, "<title>%s  decision #%zu: ", fmt_t(c, in->decided_ns, t, sizeof t), i + 1);
        esc(f, in->cls);
        if (in->node) {
            fputs(" on ", f);
            esc(f, in->node);
        }
        fputs("&#10;rule: ", f);
        esc(f, in->rule);
        fputs("&#10;actions: ", f);
        esc(f, in->actions);
        fputs("&#10;", f);
        esc_title(f, in->reason);
        fputs("</title>", f);
        fputs("</g></a>", f);
    }
    fputs("<g class=\"labels\">", f);
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        double xb = xpos(c, in->decided_ns);
        if (xb <= label_end)
            continue;
        char lab[256];
        int len = snprintf(lab, sizeof lab, "#%zu %s%s%s", i + 1, in->cls,
                           in->node ? " \xC2\xB7 " : "", in->node ? in->node : "");
        /* the decisions this label would cover are counted in it */
        size_t more = 0;
        double end = xb + 10 + label_w(lab) + 40;
        for (size_t k = i + 1; k < r->n_inc; k++)
            more += xpos(c, r->inc[k].decided_ns) <= end;
        if (more && len > 0 && (size_t)len < sizeof lab)
            snprintf(lab + len, sizeof lab - (size_t)len, " (+%zu)", more);
        label_end = fmax(text_beside(f, xb, xb, mid + 4, 10, lab), end);
    }
    fputs("</g></g>\n", f);
    y += LANE_H + 6;
    if (any_acts) {
        fprintf(f, "<g class=\"lane actions\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
                   "width=\"%d\" height=\"%d\"/><text class=\"title\" x=\"6\" "
                   "y=\"%.1f\">gpuheal actions and guards</text>", y, SVG_W, LANE_H, y + 15);
        static const char *const results[] = {"succeeded", "failed", "noop", "skipped"};
        static const char *const verdicts[] = {"allowed", "denied", "dry_run", "awaiting_approval",
                                               "approved"};
        mid = y + LANE_H / 2.0;
        for (size_t i = 0; i < r->n_inc; i++) {
            const struct gh_rep_incident *in = &r->inc[i];
            for (size_t k = 0; k < in->n_guards; k++) {
                const struct gh_rep_guard_row *g = &in->guards[k];
                double x = xpos(c, g->ts);
                char t[64];
                fprintf(f, "<g class=\"guard %s\"><path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\"/>"
                           "<title>%s  guard ", word_class(g->verdict, verdicts, 5), x, mid - 8,
                        x + 5, mid - 1, x - 5, mid - 1, fmt_t(c, g->ts, t, sizeof t));
                esc(f, g->guard);
                fputs(": ", f);
                esc(f, g->verdict);
                fputs(" \xE2\x80\x94 ", f);
                esc(f, g->action);
                fputs(" ", f);
                esc(f, g->target);
                if (g->detail) {
                    fputs("&#10;", f);
                    esc_title(f, g->detail);
                }
                fputs("</title></g>", f);
            }
            for (size_t k = 0; k < in->n_acts; k++) {
                const struct gh_rep_action_row *a = &in->acts[k];
                double xa = xpos(c, a->started), xb = xpos(c, a->finished);
                char t[64];
                fprintf(f, "<g class=\"action %s\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                           "height=\"7\"/><title>%s  ", word_class(a->result, results, 4), xa,
                        mid + 1, xb - xa < 3 ? 3 : xb - xa, fmt_t(c, a->started, t, sizeof t));
                esc(f, a->action);
                fputs(" ", f);
                esc(f, a->target);
                fputs(": ", f);
                esc(f, a->result);
                if (a->http)
                    fprintf(f, " (HTTP %ld)", a->http);
                if (a->api_result) {
                    fputs("&#10;", f);
                    esc_title(f, a->api_result);
                }
                if (a->detail) {
                    fputs("&#10;", f);
                    esc_title(f, a->detail);
                }
                fputs("</title></g>", f);
            }
        }
        fputs("</g>\n", f);
        y += LANE_H;
    }
    /* lanes, grouped under their node (or job) */
    prev = NULL;
    first = true;
    double lanes_top = y;
    for (size_t i = 0; i < c->n_order; i++) {
        const struct gh_rep_lane *l = &r->lanes[c->order[i]];
        const char *g = l->node ? l->node : l->job ? l->job : "";
        if (first || strcmp(g, prev) != 0 || (!l->node) != (!r->lanes[c->order[i - 1]].node)) {
            const char *cls = NULL;
            bool bl = l->node && is_blamed(c, l->node, &cls);
            fprintf(f, "<g class=\"head%s\"><rect class=\"head-bg%s\" x=\"0\" y=\"%.1f\" "
                       "width=\"%d\" height=\"%d\"/><text x=\"6\" y=\"%.1f\">",
                    bl ? " blamed" : "", bl ? " blamed" : "", y, SVG_W, HEAD_H, y + 14);
            esc(f, l->node ? "node " : l->job ? "job " : "cluster");
            esc(f, g);
            if (bl) {
                fputs(" \xE2\x80\x94 blamed: ", f);
                esc(f, cls);
            }
            fputs("</text></g>\n", f);
            y += HEAD_H;
        }
        first = false;
        prev = g;
        draw_lane(c, l, y, i % 2);
        y += LANE_H;
    }
    if (c->n_quiet_nodes) {
        fprintf(f, "<g class=\"head quiet\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
                   "width=\"%d\" height=\"%d\"/><text x=\"6\" y=\"%.1f\">%zu more nodes: steps "
                   "reported, nothing else seen</text></g>\n", y, SVG_W, HEAD_H, y + 14,
                c->n_quiet_nodes);
        y += HEAD_H;
        fprintf(f, "<g class=\"lane src-train quiet\" data-source=\"train\"><rect "
                   "class=\"lane-bg\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>"
                   "<text class=\"lane-label\" x=\"18\" y=\"%.1f\">training (%zu nodes)</text>",
                y, SVG_W, LANE_H, y + 15, c->n_quiet_nodes);
        for (size_t k = 0; k < c->n_qseg; k++) {
            double a = xpos(c, c->qseg[k].a), b = xpos(c, c->qseg[k].b);
            fprintf(f, "<rect class=\"activity\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"8\"/>", a, y + LANE_H / 2.0 - 4, b - a < 2 ? 2 : b - a);
        }
        fputs("</g>\n", f);
        y += LANE_H;
    }
    decision_lines(c, lanes_top, y);
    fputs("</svg>\n", f);
    fputs("<p class=\"legend\"><i style=\"background:var(--kmsg)\"></i>kernel log"
          "<i style=\"background:var(--gpu)\"></i>NVML/DCGM<i style=\"background:var(--host)\">"
          "</i>host<i style=\"background:var(--kube)\"></i>Kubernetes"
          "<i style=\"background:var(--train)\"></i>training (bars: steps reported)"
          "<i style=\"background:var(--probe)\"></i>probes<i class=\"line\" "
          "style=\"background:var(--crit)\"></i>decision (hover a marker for its raw line; a "
          "diamond for the rule and reason)</p>\n", f);
    if (c->lanes_hidden)
        fprintf(f, "<p class=\"truncated\" id=\"lanes-truncated\">%zu more lanes not shown (at most "
                   "%zu drawn; blamed nodes first).</p>\n", c->lanes_hidden,
                r->lim.max_shown_lanes);
    if (r->st.lanes_dropped)
        fprintf(f, "<p class=\"truncated\">%zu signals fell on lanes beyond the cap of %zu lanes and "
                   "are not drawn.</p>\n", r->st.lanes_dropped, r->lim.max_lanes);
    if (r->st.markers_dropped)
        fprintf(f, "<p class=\"truncated\">%" PRIu64 " markers thinned out (at most %zu per lane; "
                   "the most telling kept).</p>\n", r->st.markers_dropped,
                r->lim.max_lane_events);
    fputs("</section>\n", f);
}

/* ---- step charts */

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
static size_t series_draw_points(struct ctx *c, const struct gh_rep_series *se, size_t cap)
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

static void step_chart(struct ctx *c, const struct gh_rep_job *j, size_t k)
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
    esc(f, j->name);
    fprintf(f, "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
               "height=\"%d\" role=\"img\" aria-label=\"step time per %s\">\n",
            SVG_W, CHART_H, SVG_W, CHART_H, per_rank ? "rank" : "node");
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#fbfcfd\" "
               "stroke=\"#d9dee5\"/>", PLOT_X0, y0, PLOT_W, CHART_PLOT_H);
    fputs("<g class=\"grid\">", f);
    for (double v = lo; v <= hi + ystep / 2; v += ystep) {
        double y = y1 - (v - lo) / (hi - lo) * CHART_PLOT_H;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\">%g</text>", PLOT_X0, y, PLOT_X0 + PLOT_W, y, PLOT_X0 - 6,
                y + 4, v);
    }
    fputs("</g>", f);
    fprintf(f, "<text class=\"title\" x=\"10\" y=\"%.0f\">", y0 + 14);
    esc(f, j->name);
    fprintf(f, "</text><text x=\"10\" y=\"%.0f\" class=\"lane-label\">step time (ms) per %s</text>",
            y0 + 30, per_rank ? "rank" : "node (mean of its ranks)");
    time_axis(c, y1, y1 + 4, false);
    /* time labels under the plot */
    {
        int64_t st = tick_step(c->t1 - c->t0);
        int64_t t = c->t0 - (c->t0 % st + st) % st + st;
        for (; t < c->t1; t += st) {
            char full[GH_RFC3339_MAX];
            gh_time_format_rfc3339(t, full, sizeof full);
            fprintf(f, "<text class=\"lane-label\" x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">"
                       "%.8s</text>", xpos(c, t), y1 + 18, full + 11);
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
            esc(f, se->node);
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
            esc(f, se->node ? se->node : "?");
            if (se->gpu >= 0)
                fprintf(f, " GPU %d", se->gpu);
            if (b) {
                fputs(" \xE2\x80\x94 blamed: ", f);
                esc(f, b->in->cls);
            }
            fputs("</title></polyline>\n", f);
        }
    }
    for (size_t i = 0; i < nb; i++) {
        double x = xpos(c, bl[i].in->decided_ns);
        fprintf(f, "<line class=\"decision-line\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"/>"
                   "<text x=\"%.1f\" y=\"%.0f\" fill=\"#b71c1c\">decision #%zu</text>",
                x, y0, x, y1, x + 4, y0 + 12, bl[i].idx + 1);
    }
    fputs("</svg>\n<figcaption>", f);
    esc(f, j->name);
    fprintf(f, ": %" PRIu64 " step reports, %zu %s", j->steps, ns, per_rank ? "ranks" : "nodes");
    if (nb) {
        fputs("; highlighted: ", f);
        for (size_t i = 0; i < nb; i++) {
            fputs(i ? ", " : "", f);
            esc(f, bl[i].node);
            if (bl[i].gpu >= 0)
                fprintf(f, " GPU %d", bl[i].gpu);
            fputs(" (", f);
            esc(f, bl[i].in->cls);
            fputs(")", f);
        }
    }
    fputs(". Values outside the axis are drawn at its edge.</figcaption>\n", f);
    if (decimated || stride > 1)
        fprintf(f, "<p class=\"truncated\">Points averaged for drawing: at most %zu per series "
                   "(stored as means of up to %" PRIu64 " reports).</p>\n", per, stride);
    if (j->ranks_dropped)
        fprintf(f, "<p class=\"truncated\">More than %zu ranks: drawn per node.</p>\n",
                r->lim.max_rank_series);
    if (j->nodes_s_dropped)
        fprintf(f, "<p class=\"truncated\">More than %zu nodes: the rest are not drawn.</p>\n",
                r->lim.max_node_series);
    fputs("</figure>\n", f);
}

static void step_charts(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<section id=\"steps-section\"><h2>Step time</h2>\n", f);
    size_t k = 0;
    for (size_t j = 0; j < r->n_jobs; j++) {
        const struct gh_rep_job *jb = &r->jobs[j];
        if (!job_in_scope(r, jb) || (!jb->n_ranks && !jb->n_nodes_s))
            continue;
        step_chart(c, jb, k++);
    }
    if (!k)
        fputs("<p class=\"muted\" id=\"no-steps\">No step telemetry for this subject.</p>\n", f);
    if (r->st.jobs_dropped)
        fprintf(f, "<p class=\"truncated\">Signals of more than %zu jobs: the rest have no chart."
                   "</p>\n", r->lim.max_jobs);
    fputs("</section>\n", f);
}

/* ---- decisions table */

struct row {
    int64_t ts;
    size_t inc;
    int what; /* 0 decision, 1 guard, 2 action */
    size_t k;
};

static int row_cmp(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->inc != y->inc)
        return x->inc < y->inc ? -1 : 1;
    if (x->what != y->what)
        return x->what - y->what;
    return (x->k > y->k) - (x->k < y->k);
}

static void decisions(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<section id=\"decisions\"><h2>Decisions and actions</h2>\n", f);
    size_t n = 0;
    for (size_t i = 0; i < r->n_inc; i++)
        n += 1 + r->inc[i].n_guards + r->inc[i].n_acts;
    struct row *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows) {
        fputs("<p class=\"truncated\">out of memory</p></section>\n", f);
        return;
    }
    n = 0;
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        rows[n++] = (struct row){in->decided_ns, i, 0, 0};
        for (size_t k = 0; k < in->n_guards; k++)
            rows[n++] = (struct row){in->guards[k].ts, i, 1, k};
        for (size_t k = 0; k < in->n_acts; k++)
            rows[n++] = (struct row){in->acts[k].started, i, 2, k};
    }
    qsort(rows, n, sizeof *rows, row_cmp);
    if (!n)
        fputs("<p class=\"muted\">None.</p>\n", f);
    else
        fputs("<table id=\"decisions-table\"><thead><tr><th>time</th><th>incident</th><th>what"
              "</th><th>rule / guard</th><th>action</th><th>why / result</th></tr></thead>"
              "<tbody>\n", f);
    for (size_t i = 0; i < n; i++) {
        const struct gh_rep_incident *in = &r->inc[rows[i].inc];
        char t[64];
        fprintf(f, "<tr class=\"%s\"><td class=\"t\">%s</td><td><a href=\"#incident-%zu\">#%zu"
                   "</a></td>",
                rows[i].what == 0 ? "decision" : rows[i].what == 1 ? "guard" : "action",
                fmt_t(c, rows[i].ts, t, sizeof t), rows[i].inc, rows[i].inc + 1);
        if (rows[i].what == 0) {
            fputs("<td>decision</td><td class=\"rule\">", f);
            esc(f, in->rule);
            fputs("</td><td>", f);
            esc(f, in->actions);
            fputs("</td><td>", f);
            esc(f, in->reason);
        } else if (rows[i].what == 1) {
            const struct gh_rep_guard_row *g = &in->guards[rows[i].k];
            fputs("<td>guard: ", f);
            esc(f, g->verdict);
            fputs("</td><td>", f);
            esc(f, g->guard);
            fputs("</td><td>", f);
            esc(f, g->action);
            fputs(" ", f);
            esc(f, g->target);
            fputs("</td><td>", f);
            esc(f, g->detail);
        } else {
            const struct gh_rep_action_row *a = &in->acts[rows[i].k];
            fputs("<td>action: ", f);
            esc(f, a->result);
            fputs("</td><td></td><td>", f);
            esc(f, a->action);
            fputs(" ", f);
            esc(f, a->target);
            fputs("</td><td>", f);
            /* api_result already reads "HTTP 200" or the failure's Status;
             * the bare code is the fallback when it is empty. */
            if (a->api_result && a->api_result[0])
                esc(f, a->api_result);
            else if (a->http)
                fprintf(f, "HTTP %ld", a->http);
            if (a->detail) {
                fputs(" \xE2\x80\x94 ", f);
                esc(f, a->detail);
            }
        }
        fputs("</td></tr>\n", f);
    }
    if (n)
        fputs("</tbody></table>\n", f);
    free(rows);
    fputs("</section>\n", f);
}

/* ---- incidents */

static void incident(struct ctx *c, size_t i)
{
    const struct gh_report *r = c->r;
    const struct gh_rep_incident *in = &r->inc[i];
    FILE *f = c->f;
    char t[64];
    fprintf(f, "<article class=\"incident %s\" id=\"incident-%zu\"><h3>#%zu ",
            sev_class(in->severity), i, i + 1);
    esc(f, in->cls);
    if (in->node) {
        fputs(" on ", f);
        esc(f, in->node);
        if (in->gpu >= 0)
            fprintf(f, " GPU %d", in->gpu);
    }
    if (in->job) {
        fputs(" \xE2\x80\x94 job ", f);
        esc(f, in->job);
    }
    fprintf(f, " <span class=\"sev %s\">", sev_class(in->severity));
    esc(f, in->severity ? in->severity : "?");
    fputs("</span></h3>\n<p class=\"reason\">", f);
    esc(f, in->reason);
    fputs("</p>\n<dl class=\"facts\"><dt>id</dt><dd><code>", f);
    esc(f, in->id);
    fputs("</code></dd><dt>rule</dt><dd class=\"rule\">", f);
    esc(f, in->rule);
    fputs("</dd><dt>actions</dt><dd>", f);
    esc(f, in->actions);
    fputs("</dd>", f);
    if (in->ckpt_step >= 0 || in->ckpt_path) {
        fputs("<dt>checkpoint</dt><dd>", f);
        if (in->ckpt_step >= 0)
            fprintf(f, "step %" PRId64 " ", in->ckpt_step);
        esc(f, in->ckpt_path);
        fputs("</dd>", f);
    }
    fprintf(f, "<dt>first evidence</dt><dd>%s</dd>", fmt_t(c, in->first_ns, t, sizeof t));
    fprintf(f, "<dt>decided</dt><dd>%s</dd>", fmt_t(c, in->decided_ns, t, sizeof t));
    if (in->mode) {
        fputs("<dt>mode / phase</dt><dd>", f);
        esc(f, in->mode);
        if (in->phase) {
            fputs(" / ", f);
            esc(f, in->phase);
        }
        fputs("</dd>", f);
    }
    fputs("</dl>\n", f);
    if (in->n_ev) {
        fputs("<table class=\"evidence\"><thead><tr><th>time</th><th>source</th><th>kind</th>"
              "<th>node</th><th>GPU</th><th>what</th><th>raw line</th></tr></thead><tbody>\n", f);
        for (size_t k = 0; k < in->n_ev; k++) {
            const struct gh_rep_ev_row *e = &in->ev[k];
            fprintf(f, "<tr><td class=\"t\">%s</td><td>", fmt_t(c, e->ts, t, sizeof t));
            esc(f, e->source);
            fputs("</td><td>", f);
            esc(f, e->kind);
            fputs("</td><td class=\"node\">", f);
            esc(f, e->node);
            fputs("</td><td>", f);
            if (e->gpu >= 0)
                fprintf(f, "%d", e->gpu);
            fputs("</td><td>", f);
            esc(f, e->summary);
            if (e->injected)
                fputs(" <span class=\"injected\">injected</span>", f);
            fputs("</td><td><code class=\"raw\">", f);
            esc(f, e->raw);
            fputs("</code></td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    if (in->ev_total > in->n_ev)
        fprintf(f, "<p class=\"truncated\">Showing %zu of %" PRIu64 " evidence signals.</p>\n",
                in->n_ev, in->ev_total);
    if (in->n_guards) {
        fputs("<table class=\"guards\"><thead><tr><th>time</th><th>guard</th><th>verdict</th>"
              "<th>action</th><th>target</th><th>detail</th></tr></thead><tbody>\n", f);
        for (size_t k = 0; k < in->n_guards; k++) {
            const struct gh_rep_guard_row *g = &in->guards[k];
            fprintf(f, "<tr><td class=\"t\">%s</td><td>", fmt_t(c, g->ts, t, sizeof t));
            esc(f, g->guard);
            fputs("</td><td>", f);
            esc(f, g->verdict);
            fputs("</td><td>", f);
            esc(f, g->action);
            fputs("</td><td>", f);
            esc(f, g->target);
            fputs("</td><td>", f);
            esc(f, g->detail);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    if (in->guards_total > in->n_guards)
        fprintf(f, "<p class=\"truncated\">Showing %zu of %" PRIu64 " guard verdicts.</p>\n",
                in->n_guards, in->guards_total);
    if (in->n_acts) {
        fputs("<table class=\"actions\"><thead><tr><th>started</th><th>took</th><th>action</th>"
              "<th>target</th><th>result</th><th>API</th><th>detail</th></tr></thead><tbody>\n", f);
        for (size_t k = 0; k < in->n_acts; k++) {
            const struct gh_rep_action_row *a = &in->acts[k];
            fprintf(f, "<tr><td class=\"t\">%s</td><td class=\"t\">%.3f s</td><td>",
                    fmt_t(c, a->started, t, sizeof t),
                    (double)(a->finished - a->started) / 1e9);
            esc(f, a->action);
            fputs("</td><td>", f);
            esc(f, a->target);
            fputs("</td><td>", f);
            esc(f, a->result);
            fputs("</td><td>", f);
            if (a->http)
                fprintf(f, "%ld ", a->http);
            esc(f, a->api_result);
            fputs("</td><td>", f);
            esc(f, a->detail);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    if (in->acts_total > in->n_acts)
        fprintf(f, "<p class=\"truncated\">Showing %zu of %" PRIu64 " actions.</p>\n", in->n_acts,
                in->acts_total);
    fputs("</article>\n", f);
}

static void incidents(struct ctx *c)
{
    FILE *f = c->f;
    fputs("<section id=\"incidents\"><h2>Incidents and their evidence</h2>\n", f);
    if (!c->r->n_inc)
        fputs("<p class=\"muted\">None.</p>\n", f);
    for (size_t i = 0; i < c->r->n_inc; i++)
        incident(c, i);
    fputs("</section>\n", f);
}

static void footer(struct ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<section id=\"limits\"><h2>About this report</h2><p class=\"muted\">", f);
    fprintf(f, "%" PRIu64 " signals read", r->st.signals);
    if (r->st.filtered)
        fprintf(f, ", %" PRIu64 " outside the subject", r->st.filtered);
    fprintf(f, "; %" PRIu64 " step reports; %zu timeline lanes, %" PRIu64 " markers.",
            r->st.steps, r->n_lanes, r->st.markers);
    fputs(" Times are UTC. One self-contained file: no scripts, nothing fetched.</p></section>\n"
          "</main>\n</body>\n</html>\n", f);
}

int gh_report_write_html(const struct gh_report *r, FILE *out, struct gh_err *err)
{
    struct ctx c = {.r = r, .f = out};
    int rc = plan(&c, err);
    if (!rc) {
        page_head(&c);
        summary(&c);
        timeline(&c);
        step_charts(&c);
        decisions(&c);
        incidents(&c);
        footer(&c);
        if (fflush(out) != 0 || ferror(out))
            rc = gh_err_set(err, GH_EIO, "report: write failed");
    }
    free(c.blamed);
    free(c.blamed_cls);
    free(c.order);
    free(c.qseg);
    free(c.bx);
    free(c.by);
    free(c.dx);
    free(c.dy);
    return rc;
}
