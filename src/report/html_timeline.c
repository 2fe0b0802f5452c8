/* html_timeline.c - the report page's timeline (svg#timeline): gpuheal's
 * decisions, its actions and guard verdicts, then one lane per source
 * group and node (per GPU for the kernel log and NVML/DCGM) with markers
 * carrying the raw line, and the time axis the step charts share. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/html_escape.h"
#include "common/svg_draw.h"
#include "common/timeutil.h"
#include "report/html_ctx.h"
#include "report/report.h"

#define AXIS_H 30
#define LANE_H 22
#define HEAD_H 20

/* At most about ten ticks, at round steps. */
int64_t gh_html_tick_step(int64_t span)
{
    static const int64_t steps_s[] = {1,     2,     5,     10,    15,     30,    60,
                                      120,   300,   600,   900,   1800,   3600,  7200,
                                      10800, 21600, 43200, 86400, 172800, 604800};
    for (size_t i = 0; i < sizeof steps_s / sizeof steps_s[0]; i++)
        if (span / (steps_s[i] * GH_NS_PER_S) <= 10)
            return steps_s[i] * GH_NS_PER_S;
    return 604800 * GH_NS_PER_S * (span / (604800 * GH_NS_PER_S * 10) + 1);
}

void gh_html_time_axis(struct gh_html_ctx *c, double y_top, double y_bot, bool labels)
{
    FILE *f = c->f;
    int64_t st = gh_html_tick_step(c->t1 - c->t0);
    int64_t first = c->t0 - (c->t0 % st + st) % st + st;
    fputs("<g class=\"axis\">", f);
    for (int64_t t = first; t < c->t1; t += st) {
        double x = gh_html_xpos(c, t);
        gh_svg_line(f, NULL, x, y_top, x, y_bot, NULL);
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

static void decision_lines(struct gh_html_ctx *c, double y_top, double y_bot)
{
    for (size_t i = 0; i < c->r->n_inc; i++) {
        double x = gh_html_xpos(c, c->r->inc[i].decided_ns);
        gh_svg_line(c->f, "decision-line", x, y_top, x, y_bot, NULL);
    }
}

static double label_w(const char *s) { return 6.0 * (double)strlen(s) + 6; }

/* A label gap units right of x1, or left of x0 when it would run off the
 * plot; returns where the label ends on the right (to keep the next clear). */
static double text_beside(FILE *f, double x0, double x1, double y, double gap, const char *s)
{
    double w = label_w(s);
    if (x1 + gap + w <= SVG_W) {
        gh_svg_text(f, x1 + gap, y, NULL, s);
        return x1 + gap + w;
    }
    gh_svg_text(f, x0 - gap, y, "end", s);
    return x1 + gap;
}

static void lane_label(FILE *f, const struct gh_rep_lane *l, double y)
{
    fprintf(f, "<text class=\"lane-label\" x=\"18\" y=\"%.1f\">", y + 15);
    gh_html_escape(f, gh_rep_group_name(l->group));
    if (l->gpu >= 0)
        fprintf(f, " \xC2\xB7 GPU %d", l->gpu);
    if (l->dropped)
        fprintf(f, " (+%" PRIu64 " not drawn)", l->dropped);
    fputs("</text>", f);
}

static void draw_lane(struct gh_html_ctx *c, const struct gh_rep_lane *l, double y, bool alt)
{
    FILE *f = c->f;
    fprintf(f, "<g class=\"lane src-%s\" data-source=\"%s\"", src_class(l->group),
            src_class(l->group));
    if (l->node) {
        fputs(" data-node=\"", f);
        gh_html_escape(f, l->node);
        fputs("\"", f);
    }
    if (l->gpu >= 0)
        fprintf(f, " data-gpu=\"%d\"", l->gpu);
    fprintf(f, "><rect class=\"lane-bg%s\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>",
            alt ? " alt" : "", y, SVG_W, LANE_H);
    lane_label(f, l, y);
    double mid = y + LANE_H / 2.0;
    for (size_t k = 0; k < l->n_seg; k++) {
        double a = gh_html_xpos(c, l->seg[k].a), b = gh_html_xpos(c, l->seg[k].b);
        char ta[64], tb[64];
        fprintf(f,
                "<rect class=\"activity\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\">"
                "<title>steps reported %s \xE2\x80\x93 %s</title></rect>",
                a, mid - 4, b - a < 2 ? 2 : b - a, gh_html_fmt_t(c, l->seg[k].a, ta, sizeof ta),
                gh_html_fmt_t(c, l->seg[k].b, tb, sizeof tb));
    }
    for (size_t k = 0; k < l->n_ev; k++) {
        const struct gh_rep_event *e = &l->ev[k];
        double x = gh_html_xpos(c, e->ts);
        char t[64];
        fprintf(f, "<g class=\"marker w%u%s\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"/><title>",
                e->weight, e->injected ? " injected" : "", x, mid,
                e->weight == GH_REP_MAJOR     ? "5"
                : e->weight == GH_REP_NOTABLE ? "4"
                                              : "3");
        fprintf(f, "%s  ", gh_html_fmt_t(c, e->ts, t, sizeof t));
        gh_html_escape(f, gh_rep_group_name(l->group));
        if (l->node) {
            fputs("  ", f);
            gh_html_escape(f, l->node);
        }
        if (e->gpu >= 0)
            fprintf(f, " GPU %d", e->gpu);
        fputs("  ", f);
        gh_html_escape(f, e->label);
        if (e->injected)
            fputs(" (injected)", f);
        if (e->detail) {
            fputs("&#10;", f);
            gh_html_escape_title(f, e->detail);
        }
        fputs("</title>", f);
        fputs("</g>", f);
    }
    /* labels after the markers, so that no marker covers one */
    fputs("<g class=\"labels\">", f);
    double label_end = -1;
    for (size_t k = 0; k < l->n_ev;) {
        const struct gh_rep_event *e = &l->ev[k];
        double x = gh_html_xpos(c, e->ts), last = x;
        /* markers close together with the same label share one: "... x10" */
        size_t m = 1;
        while (k + m < l->n_ev && gh_html_xpos(c, l->ev[k + m].ts) - last < 6 &&
               strcmp(l->ev[k + m].label, e->label) == 0)
            last = gh_html_xpos(c, l->ev[k + m++].ts);
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

void gh_html_timeline(struct gh_html_ctx *c)
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
    fprintf(f,
            "<svg id=\"timeline\" class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" "
            "viewBox=\"0 0 %d %.0f\" width=\"%d\" height=\"%.0f\" role=\"img\" "
            "aria-label=\"signals, decisions and actions over time\">\n",
            SVG_W, h, SVG_W, h);
    gh_html_time_axis(c, AXIS_H, h - 4, true);
    /* gpuheal's decisions */
    double y = AXIS_H;
    fprintf(f,
            "<g class=\"lane decisions\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
            "width=\"%d\" height=\"%d\"/><text class=\"title\" x=\"6\" y=\"%.1f\">"
            "gpuheal decisions</text>",
            y, SVG_W, LANE_H + 6, y + 17);
    double mid = y + (LANE_H + 6) / 2.0, label_end = -1;
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        double xa = gh_html_xpos(c, in->first_ns), xb = gh_html_xpos(c, in->decided_ns);
        if (in->first_ns && xb - xa >= 1)
            fprintf(f,
                    "<rect class=\"detect\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\">"
                    "<title>evidence from first signal to decision</title></rect>",
                    xa, mid - 5, xb - xa);
        char t[64];
        fprintf(f, "<a href=\"#incident-%zu\"><g class=\"decision %s\" data-incident=\"%zu\">", i,
                gh_html_sev_class(in->severity), i);
        gh_svg_diamond(f, xb, mid, 7);
        fprintf(f, "<title>%s  decision #%zu: ", gh_html_fmt_t(c, in->decided_ns, t, sizeof t),
                i + 1);
        gh_html_escape(f, in->cls);
        if (in->node) {
            fputs(" on ", f);
            gh_html_escape(f, in->node);
        }
        fputs("&#10;rule: ", f);
        gh_html_escape(f, in->rule);
        fputs("&#10;actions: ", f);
        gh_html_escape(f, in->actions);
        fputs("&#10;", f);
        gh_html_escape_title(f, in->reason);
        fputs("</title>", f);
        fputs("</g></a>", f);
    }
    fputs("<g class=\"labels\">", f);
    for (size_t i = 0; i < r->n_inc; i++) {
        const struct gh_rep_incident *in = &r->inc[i];
        double xb = gh_html_xpos(c, in->decided_ns);
        if (xb <= label_end)
            continue;
        char lab[256];
        int len = snprintf(lab, sizeof lab, "#%zu %s%s%s", i + 1, in->cls,
                           in->node ? " \xC2\xB7 " : "", in->node ? in->node : "");
        /* the decisions this label would cover are counted in it */
        size_t more = 0;
        double end = xb + 10 + label_w(lab) + 40;
        for (size_t k = i + 1; k < r->n_inc; k++)
            more += gh_html_xpos(c, r->inc[k].decided_ns) <= end;
        if (more && len > 0 && (size_t)len < sizeof lab)
            snprintf(lab + len, sizeof lab - (size_t)len, " (+%zu)", more);
        label_end = fmax(text_beside(f, xb, xb, mid + 4, 10, lab), end);
    }
    fputs("</g></g>\n", f);
    y += LANE_H + 6;
    if (any_acts) {
        fprintf(f,
                "<g class=\"lane actions\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
                "width=\"%d\" height=\"%d\"/><text class=\"title\" x=\"6\" "
                "y=\"%.1f\">gpuheal actions and guards</text>",
                y, SVG_W, LANE_H, y + 15);
        static const char *const results[] = {"succeeded", "failed", "noop", "skipped"};
        static const char *const verdicts[] = {"allowed", "denied", "dry_run", "awaiting_approval",
                                               "approved"};
        mid = y + LANE_H / 2.0;
        for (size_t i = 0; i < r->n_inc; i++) {
            const struct gh_rep_incident *in = &r->inc[i];
            for (size_t k = 0; k < in->n_guards; k++) {
                const struct gh_rep_guard_row *g = &in->guards[k];
                double x = gh_html_xpos(c, g->ts);
                char t[64];
                fprintf(f,
                        "<g class=\"guard %s\"><path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\"/>"
                        "<title>%s  guard ",
                        word_class(g->verdict, verdicts, 5), x, mid - 8, x + 5, mid - 1, x - 5,
                        mid - 1, gh_html_fmt_t(c, g->ts, t, sizeof t));
                gh_html_escape(f, g->guard);
                fputs(": ", f);
                gh_html_escape(f, g->verdict);
                fputs(" \xE2\x80\x94 ", f);
                gh_html_escape(f, g->action);
                fputs(" ", f);
                gh_html_escape(f, g->target);
                if (g->detail) {
                    fputs("&#10;", f);
                    gh_html_escape_title(f, g->detail);
                }
                fputs("</title></g>", f);
            }
            for (size_t k = 0; k < in->n_acts; k++) {
                const struct gh_rep_action_row *a = &in->acts[k];
                double xa = gh_html_xpos(c, a->started), xb = gh_html_xpos(c, a->finished);
                char t[64];
                fprintf(f,
                        "<g class=\"action %s\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                        "height=\"7\"/><title>%s  ",
                        word_class(a->result, results, 4), xa, mid + 1, xb - xa < 3 ? 3 : xb - xa,
                        gh_html_fmt_t(c, a->started, t, sizeof t));
                gh_html_escape(f, a->action);
                fputs(" ", f);
                gh_html_escape(f, a->target);
                fputs(": ", f);
                gh_html_escape(f, a->result);
                if (a->http)
                    fprintf(f, " (HTTP %ld)", a->http);
                if (a->api_result) {
                    fputs("&#10;", f);
                    gh_html_escape_title(f, a->api_result);
                }
                if (a->detail) {
                    fputs("&#10;", f);
                    gh_html_escape_title(f, a->detail);
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
            bool bl = l->node && gh_html_is_blamed(c, l->node, &cls);
            fprintf(f,
                    "<g class=\"head%s\"><rect class=\"head-bg%s\" x=\"0\" y=\"%.1f\" "
                    "width=\"%d\" height=\"%d\"/><text x=\"6\" y=\"%.1f\">",
                    bl ? " blamed" : "", bl ? " blamed" : "", y, SVG_W, HEAD_H, y + 14);
            gh_html_escape(f, l->node ? "node " : l->job ? "job " : "cluster");
            gh_html_escape(f, g);
            if (bl) {
                fputs(" \xE2\x80\x94 blamed: ", f);
                gh_html_escape(f, cls);
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
        fprintf(f,
                "<g class=\"head quiet\"><rect class=\"head-bg\" x=\"0\" y=\"%.1f\" "
                "width=\"%d\" height=\"%d\"/><text x=\"6\" y=\"%.1f\">%zu more nodes: steps "
                "reported, nothing else seen</text></g>\n",
                y, SVG_W, HEAD_H, y + 14, c->n_quiet_nodes);
        y += HEAD_H;
        fprintf(f,
                "<g class=\"lane src-train quiet\" data-source=\"train\"><rect "
                "class=\"lane-bg\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>"
                "<text class=\"lane-label\" x=\"18\" y=\"%.1f\">training (%zu nodes)</text>",
                y, SVG_W, LANE_H, y + 15, c->n_quiet_nodes);
        for (size_t k = 0; k < c->n_qseg; k++) {
            double a = gh_html_xpos(c, c->qseg[k].a), b = gh_html_xpos(c, c->qseg[k].b);
            fprintf(f,
                    "<rect class=\"activity\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"8\"/>",
                    a, y + LANE_H / 2.0 - 4, b - a < 2 ? 2 : b - a);
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
          "diamond for the rule and reason)</p>\n",
          f);
    if (c->lanes_hidden)
        fprintf(f,
                "<p class=\"truncated\" id=\"lanes-truncated\">%zu more lanes not shown (at most "
                "%zu drawn; blamed nodes first).</p>\n",
                c->lanes_hidden, r->lim.max_shown_lanes);
    if (r->st.lanes_dropped)
        fprintf(f,
                "<p class=\"truncated\">%zu signals fell on lanes beyond the cap of %zu lanes and "
                "are not drawn.</p>\n",
                r->st.lanes_dropped, r->lim.max_lanes);
    if (r->st.markers_dropped)
        fprintf(f,
                "<p class=\"truncated\">%" PRIu64 " markers thinned out (at most %zu per lane; "
                "the most telling kept).</p>\n",
                r->st.markers_dropped, r->lim.max_lane_events);
    fputs("</section>\n", f);
}
