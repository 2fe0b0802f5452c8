/* html_plan.c - plans one report page before anything is written: the
 * drawn time range, which lanes are drawn in which order (job and cluster
 * lanes, then blamed nodes, then the rest; quiet nodes folded into one
 * lane), the blamed nodes, and scratch for the step series; plus the small
 * helpers every part of the page uses. */
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "report/html_ctx.h"
#include "report/report.h"

const char *gh_html_sev_class(const char *sev)
{
    static const char *const known[] = {"critical", "high", "medium", "low", "info"};
    for (size_t i = 0; sev && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(sev, known[i]) == 0)
            return known[i];
    return "unknown";
}

const char *gh_html_fmt_t(const struct gh_html_ctx *c, int64_t ns, char *buf, size_t cap)
{
    char full[GH_RFC3339_MAX];
    gh_time_format_rfc3339(ns, full, sizeof full);
    if (c->same_day)
        snprintf(buf, cap, "%.12s", full + 11);
    else
        snprintf(buf, cap, "%.10s %.12s", full, full + 11);
    return buf;
}

double gh_html_xpos(const struct gh_html_ctx *c, int64_t ns)
{
    double span = (double)(c->t1 - c->t0);
    return PLOT_X0 + (double)(ns - c->t0) / span * PLOT_W;
}

bool gh_html_is_blamed(const struct gh_html_ctx *c, const char *node, const char **cls)
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

bool gh_html_job_in_scope(const struct gh_report *r, const struct gh_rep_job *j)
{
    if (r->scope == GH_REPORT_ALL)
        return true;
    if (r->scope == GH_REPORT_JOB)
        return strcmp(j->name, r->subject) == 0;
    return gh_rep_job_has_node(j, r->subject);
}

static void widen(struct gh_html_ctx *c, int64_t t)
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
    const struct gh_html_ctx *c = ud;
    const struct gh_rep_lane *x = &c->r->lanes[*(const size_t *)a];
    const struct gh_rep_lane *y = &c->r->lanes[*(const size_t *)b];
    /* job and cluster lanes first, then blamed nodes, then the others by name */
    int xr = x->node ? (gh_html_is_blamed(c, x->node, NULL) ? 1 : 2) : 0;
    int yr = y->node ? (gh_html_is_blamed(c, y->node, NULL) ? 1 : 2) : 0;
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
static int fold_quiet(struct gh_html_ctx *c, size_t *n, struct gh_err *err)
{
    const struct gh_report *r = c->r;
    size_t quiet_nodes = 0, quiet_lanes = 0;
    for (size_t i = 0; i < *n;) {
        const struct gh_rep_lane *l = &r->lanes[c->order[i]];
        size_t e = i + 1;
        bool quiet = lane_quiet(l) && !gh_html_is_blamed(c, l->node, NULL);
        for (; e < *n && r->lanes[c->order[e]].node && l->node &&
               strcmp(r->lanes[c->order[e]].node, l->node) == 0;
             e++)
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
        bool quiet = lane_quiet(l) && !gh_html_is_blamed(c, l->node, NULL);
        for (; e < *n && r->lanes[c->order[e]].node && l->node &&
               strcmp(r->lanes[c->order[e]].node, l->node) == 0;
             e++)
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

int gh_html_plan(struct gh_html_ctx *c, struct gh_err *err)
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
        if (in->node && !gh_html_is_blamed(c, in->node, NULL)) {
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
        if (!gh_html_job_in_scope(r, jb))
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

void gh_html_ctx_release(struct gh_html_ctx *c)
{
    free(c->blamed);
    free(c->blamed_cls);
    free(c->order);
    free(c->qseg);
    free(c->bx);
    free(c->by);
    free(c->dx);
    free(c->dy);
}
