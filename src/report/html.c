/* html.c - draws the report model as one self-contained HTML page: inline
 * CSS, the head and summary, the timeline (html_timeline.c) and step-time
 * charts (html_steps.c) as SVG, tables of decisions, incidents, evidence
 * and actions; every input string escaped, every list bounded by the
 * model's caps and the page saying what was left out. The plan the parts
 * share is made first (html_plan.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/html_escape.h"
#include "common/timeutil.h"
#include "report/html.h"
#include "report/html_ctx.h"
#include "report/report-t.h"

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

static const char *fmt_full(int64_t ns, char *buf, size_t cap)
{
    char full[GH_RFC3339_MAX];
    gh_time_format_rfc3339(ns, full, sizeof full);
    snprintf(buf, cap, "%.10s %.12sZ", full, full + 11);
    return buf;
}

static void page_head(struct gh_html_ctx *c)
{
    const struct gh_report *r = c->r;
    FILE *f = c->f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"gpuheal report\">\n<title>",
          f);
    gh_html_escape(f, r->title ? r->title : "gpuheal report");
    if (r->subject) {
        fputs(" \xE2\x80\x94 ", f);
        gh_html_escape(f, r->subject);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
    fputs("<header class=\"top\"><h1>", f);
    gh_html_escape(f, r->title ? r->title : "gpuheal report");
    if (r->subject) {
        fputs(": ", f);
        gh_html_escape(f, r->scope == GH_REPORT_JOB ? "job " : "node ");
        gh_html_escape(f, r->subject);
    }
    fputs("</h1><div class=\"meta\">", f);
    if (r->origin) {
        fputs("from ", f);
        gh_html_escape(f, r->origin);
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

static void summary(struct gh_html_ctx *c)
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
            fprintf(f,
                    "<tr class=\"sev-%s\"><td><a href=\"#incident-%zu\">%zu</a></td>"
                    "<td class=\"t\">%s</td><td class=\"cls\">",
                    gh_html_sev_class(in->severity), i, i + 1,
                    gh_html_fmt_t(c, in->decided_ns, t, sizeof t));
            gh_html_escape(f, in->cls);
            fprintf(f, "</td><td><span class=\"sev %s\">", gh_html_sev_class(in->severity));
            gh_html_escape(f, in->severity ? in->severity : "?");
            fprintf(f, "</span></td><td class=\"node%s\">", in->node ? " blamed" : "");
            gh_html_escape(f, in->node ? in->node : "\xE2\x80\x94");
            fputs("</td><td>", f);
            if (in->gpu >= 0)
                fprintf(f, "%d", in->gpu);
            fputs("</td><td class=\"job\">", f);
            gh_html_escape(f, in->job);
            fputs("</td><td class=\"rule\">", f);
            gh_html_escape(f, in->rule);
            fputs("</td><td>", f);
            gh_html_escape(f, in->actions);
            fputs("</td><td>", f);
            gh_html_escape(f, in->mode ? in->mode : "replay");
            if (in->phase) {
                fputs(" / ", f);
                gh_html_escape(f, in->phase);
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

static void decisions(struct gh_html_ctx *c)
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
        fprintf(f,
                "<tr class=\"%s\"><td class=\"t\">%s</td><td><a href=\"#incident-%zu\">#%zu"
                "</a></td>",
                rows[i].what == 0   ? "decision"
                : rows[i].what == 1 ? "guard"
                                    : "action",
                gh_html_fmt_t(c, rows[i].ts, t, sizeof t), rows[i].inc, rows[i].inc + 1);
        if (rows[i].what == 0) {
            fputs("<td>decision</td><td class=\"rule\">", f);
            gh_html_escape(f, in->rule);
            fputs("</td><td>", f);
            gh_html_escape(f, in->actions);
            fputs("</td><td>", f);
            gh_html_escape(f, in->reason);
        } else if (rows[i].what == 1) {
            const struct gh_rep_guard_row *g = &in->guards[rows[i].k];
            fputs("<td>guard: ", f);
            gh_html_escape(f, g->verdict);
            fputs("</td><td>", f);
            gh_html_escape(f, g->guard);
            fputs("</td><td>", f);
            gh_html_escape(f, g->action);
            fputs(" ", f);
            gh_html_escape(f, g->target);
            fputs("</td><td>", f);
            gh_html_escape(f, g->detail);
        } else {
            const struct gh_rep_action_row *a = &in->acts[rows[i].k];
            fputs("<td>action: ", f);
            gh_html_escape(f, a->result);
            fputs("</td><td></td><td>", f);
            gh_html_escape(f, a->action);
            fputs(" ", f);
            gh_html_escape(f, a->target);
            fputs("</td><td>", f);
            /* api_result already reads "HTTP 200" or the failure's Status;
             * the bare code is the fallback when it is empty. */
            if (a->api_result && a->api_result[0])
                gh_html_escape(f, a->api_result);
            else if (a->http)
                fprintf(f, "HTTP %ld", a->http);
            if (a->detail) {
                fputs(" \xE2\x80\x94 ", f);
                gh_html_escape(f, a->detail);
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

static void incident(struct gh_html_ctx *c, size_t i)
{
    const struct gh_report *r = c->r;
    const struct gh_rep_incident *in = &r->inc[i];
    FILE *f = c->f;
    char t[64];
    fprintf(f, "<article class=\"incident %s\" id=\"incident-%zu\"><h3>#%zu ",
            gh_html_sev_class(in->severity), i, i + 1);
    gh_html_escape(f, in->cls);
    if (in->node) {
        fputs(" on ", f);
        gh_html_escape(f, in->node);
        if (in->gpu >= 0)
            fprintf(f, " GPU %d", in->gpu);
    }
    if (in->job) {
        fputs(" \xE2\x80\x94 job ", f);
        gh_html_escape(f, in->job);
    }
    fprintf(f, " <span class=\"sev %s\">", gh_html_sev_class(in->severity));
    gh_html_escape(f, in->severity ? in->severity : "?");
    fputs("</span></h3>\n<p class=\"reason\">", f);
    gh_html_escape(f, in->reason);
    fputs("</p>\n<dl class=\"facts\"><dt>id</dt><dd><code>", f);
    gh_html_escape(f, in->id);
    fputs("</code></dd><dt>rule</dt><dd class=\"rule\">", f);
    gh_html_escape(f, in->rule);
    fputs("</dd><dt>actions</dt><dd>", f);
    gh_html_escape(f, in->actions);
    fputs("</dd>", f);
    if (in->ckpt_step >= 0 || in->ckpt_path) {
        fputs("<dt>checkpoint</dt><dd>", f);
        if (in->ckpt_step >= 0)
            fprintf(f, "step %" PRId64 " ", in->ckpt_step);
        gh_html_escape(f, in->ckpt_path);
        fputs("</dd>", f);
    }
    fprintf(f, "<dt>first evidence</dt><dd>%s</dd>", gh_html_fmt_t(c, in->first_ns, t, sizeof t));
    fprintf(f, "<dt>decided</dt><dd>%s</dd>", gh_html_fmt_t(c, in->decided_ns, t, sizeof t));
    if (in->mode) {
        fputs("<dt>mode / phase</dt><dd>", f);
        gh_html_escape(f, in->mode);
        if (in->phase) {
            fputs(" / ", f);
            gh_html_escape(f, in->phase);
        }
        fputs("</dd>", f);
    }
    fputs("</dl>\n", f);
    if (in->n_ev) {
        fputs("<table class=\"evidence\"><thead><tr><th>time</th><th>source</th><th>kind</th>"
              "<th>node</th><th>GPU</th><th>what</th><th>raw line</th></tr></thead><tbody>\n", f);
        for (size_t k = 0; k < in->n_ev; k++) {
            const struct gh_rep_ev_row *e = &in->ev[k];
            fprintf(f, "<tr><td class=\"t\">%s</td><td>", gh_html_fmt_t(c, e->ts, t, sizeof t));
            gh_html_escape(f, e->source);
            fputs("</td><td>", f);
            gh_html_escape(f, e->kind);
            fputs("</td><td class=\"node\">", f);
            gh_html_escape(f, e->node);
            fputs("</td><td>", f);
            if (e->gpu >= 0)
                fprintf(f, "%d", e->gpu);
            fputs("</td><td>", f);
            gh_html_escape(f, e->summary);
            if (e->injected)
                fputs(" <span class=\"injected\">injected</span>", f);
            if (e->joined)
                fputs(" <span class=\"joined\">joined later</span>", f);
            fputs("</td><td><code class=\"raw\">", f);
            gh_html_escape(f, e->raw);
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
            fprintf(f, "<tr><td class=\"t\">%s</td><td>", gh_html_fmt_t(c, g->ts, t, sizeof t));
            gh_html_escape(f, g->guard);
            fputs("</td><td>", f);
            gh_html_escape(f, g->verdict);
            fputs("</td><td>", f);
            gh_html_escape(f, g->action);
            fputs("</td><td>", f);
            gh_html_escape(f, g->target);
            fputs("</td><td>", f);
            gh_html_escape(f, g->detail);
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
                    gh_html_fmt_t(c, a->started, t, sizeof t),
                    (double)(a->finished - a->started) / 1e9);
            gh_html_escape(f, a->action);
            fputs("</td><td>", f);
            gh_html_escape(f, a->target);
            fputs("</td><td>", f);
            gh_html_escape(f, a->result);
            fputs("</td><td>", f);
            if (a->http)
                fprintf(f, "%ld ", a->http);
            gh_html_escape(f, a->api_result);
            fputs("</td><td>", f);
            gh_html_escape(f, a->detail);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
    }
    if (in->acts_total > in->n_acts)
        fprintf(f, "<p class=\"truncated\">Showing %zu of %" PRIu64 " actions.</p>\n", in->n_acts,
                in->acts_total);
    fputs("</article>\n", f);
}

static void incidents(struct gh_html_ctx *c)
{
    FILE *f = c->f;
    fputs("<section id=\"incidents\"><h2>Incidents and their evidence</h2>\n", f);
    if (!c->r->n_inc)
        fputs("<p class=\"muted\">None.</p>\n", f);
    for (size_t i = 0; i < c->r->n_inc; i++)
        incident(c, i);
    fputs("</section>\n", f);
}

static void footer(struct gh_html_ctx *c)
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
    struct gh_html_ctx c = {.r = r, .f = out};
    int rc = gh_html_plan(&c, err);
    if (!rc) {
        page_head(&c);
        summary(&c);
        gh_html_timeline(&c);
        gh_html_step_charts(&c);
        decisions(&c);
        incidents(&c);
        footer(&c);
        if (fflush(out) != 0 || ferror(out))
            rc = gh_err_set(err, GH_EIO, "report: write failed");
    }
    gh_html_ctx_release(&c);
    return rc;
}
