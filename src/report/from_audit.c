/* from_audit.c - loads incidents from the audit store into a report: each
 * record's decision, evidence (as timeline markers and evidence rows), guard
 * verdicts and actions, and the store's step-time telemetry (one point per
 * rank and bucket) for the step charts. */
#include <stdlib.h>
#include <string.h>

#include "audit/telemetry.h"
#include "report/from_audit.h"
#include "signal/signal_json.h"

#define MAX_ACTIONS 16
#define MAX_TELEMETRY_JOBS 64

/* The jobs whose step chart came from telemetry: their evidence steps are
 * not drawn again (they would go back in time on the chart). */
struct tjobs {
    char name[MAX_TELEMETRY_JOBS][GH_AUDIT_ID_MAX];
    size_t n;
    bool all; /* more jobs than remembered */
};

static bool tjobs_has(const struct tjobs *t, const char *job)
{
    if (!t || !job)
        return false;
    if (t->all)
        return true;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->name[i], job) == 0)
            return true;
    return false;
}

/* The evidence row's signal: its stored JSON, or (when that no longer
 * decodes) what the row's columns say. */
static int ev_signal(const struct gh_audit_ev_rec *e, struct gh_signal *s)
{
    if (e->json && gh_signal_decode(e->json, strlen(e->json), 0, s, NULL) == GH_OK)
        return GH_OK;
    gh_signal_init(s);
    int src = e->source ? gh_source_from_name(e->source) : -1;
    int kind = e->kind ? gh_kind_from_name(e->kind) : -1;
    s->ts_ns = e->ts_ns;
    s->source = src < 0 ? GH_SRC_PROBE : (enum gh_source)src;
    s->kind = kind < 0 ? GH_KIND_PROBE_RESULT : (enum gh_kind)kind;
    s->gpu = e->gpu;
    s->code = e->code >= 0 ? (int)e->code : 0;
    s->injected = e->injected;
    if (gh_signal_set_str(&s->node, e->node, e->node ? strlen(e->node) : 0) ||
        gh_signal_set_str(&s->job, e->job, e->job ? strlen(e->job) : 0) ||
        gh_signal_set_str(&s->pod, e->pod, e->pod ? strlen(e->pod) : 0) ||
        gh_signal_set_str(&s->msg, e->msg, e->msg ? strlen(e->msg) : 0)) {
        gh_signal_clear(s);
        return GH_ENOMEM;
    }
    return GH_OK;
}

static int add_rec(struct gh_report *r, const struct gh_audit_incident_rec *rec,
                   const struct tjobs *tj, struct gh_err *err)
{
    /* "isolate_node,restart_from_checkpoint" */
    char buf[512];
    const char *acts[MAX_ACTIONS];
    size_t na = 0;
    snprintf(buf, sizeof buf, "%s", rec->actions ? rec->actions : "");
    for (char *p = buf, *save = NULL, *t; na < MAX_ACTIONS && (t = strtok_r(p, ",", &save));
         p = NULL)
        acts[na++] = t;
    struct gh_report_incident in = {
        .id = rec->id,
        .cls = rec->cls,
        .severity = rec->severity,
        .node = rec->node,
        .job = rec->job,
        .rule = rec->rule,
        .reason = rec->reason,
        .mode = rec->mode,
        .phase = rec->phase,
        .gpu = rec->gpu,
        .first_ns = rec->first_ns,
        .decided_ns = rec->decided_ns,
        .actions = acts,
        .n_actions = na,
        .ckpt_step = rec->ckpt_step,
        .ckpt_path = rec->ckpt_path,
    };
    long idx;
    int rc = gh_report_add_incident(r, &in, &idx, err);
    for (size_t i = 0; !rc && i < rec->n_ev; i++) {
        struct gh_signal s;
        if (ev_signal(&rec->ev[i], &s))
            return gh_err_set(err, GH_ENOMEM, "report: out of memory");
        if (s.kind != GH_KIND_STEP || !tjobs_has(tj, s.job))
            rc = gh_report_add_signal(r, &s, err);
        if (!rc && idx >= 0)
            rc = gh_report_add_evidence(r, idx, &s, rec->ev[i].json, err);
        gh_signal_clear(&s);
    }
    for (size_t i = 0; !rc && idx >= 0 && i < rec->n_joined; i++) {
        struct gh_signal s;
        if (ev_signal(&rec->joined[i], &s))
            return gh_err_set(err, GH_ENOMEM, "report: out of memory");
        rc = gh_report_add_joined_evidence(r, idx, &s, rec->joined[i].json, err);
        gh_signal_clear(&s);
    }
    for (size_t i = 0; !rc && idx >= 0 && i < rec->n_guards; i++) {
        const struct gh_audit_guard_rec *g = &rec->guards[i];
        struct gh_report_guard rg = {g->ts_ns, g->action, g->target, g->guard, g->verdict,
                                     g->detail};
        rc = gh_report_add_guard(r, idx, &rg, err);
    }
    for (size_t i = 0; !rc && idx >= 0 && i < rec->n_actions; i++) {
        const struct gh_audit_action_rec *a = &rec->acts[i];
        struct gh_report_action ra = {a->started_ns, a->finished_ns, a->action, a->target,
                                      a->result,     a->api_result,  a->detail, a->http};
        rc = gh_report_add_action(r, idx, &ra, err);
    }
    return rc;
}

int gh_report_add_audit_rec(struct gh_report *r, const struct gh_audit_incident_rec *rec,
                            struct gh_err *err)
{
    return add_rec(r, rec, NULL, err);
}

struct steps_ctx {
    struct gh_report *r;
    struct tjobs *tj;
    struct gh_err *err;
};

/* One stored bucket: a step signal at its newest sample, with the bucket's
 * mean step time. */
static int add_steps(void *ud, const struct gh_audit_steps *b)
{
    struct steps_ctx *c = ud;
    if (b->n <= 0)
        return GH_OK;
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = b->last_ns;
    s.source = GH_SRC_TELEMETRY;
    s.kind = GH_KIND_STEP;
    s.gpu = b->gpu;
    s.has_rank = true;
    s.rank = b->rank;
    s.has_step = b->last_step >= 0;
    s.step = b->last_step;
    s.step_ms = (double)b->sum_us / (double)b->n / 1000.0;
    if (gh_signal_set_str(&s.job, b->job, strlen(b->job)) ||
        (b->node[0] && gh_signal_set_str(&s.node, b->node, strlen(b->node)))) {
        gh_signal_clear(&s);
        return gh_err_set(c->err, GH_ENOMEM, "report: out of memory");
    }
    int rc = gh_report_add_signal(c->r, &s, c->err);
    gh_signal_clear(&s);
    if (!rc && !tjobs_has(c->tj, b->job)) {
        if (c->tj->n < MAX_TELEMETRY_JOBS)
            snprintf(c->tj->name[c->tj->n++], GH_AUDIT_ID_MAX, "%s", b->job);
        else
            c->tj->all = true;
    }
    return rc;
}

/* The newest max ids, oldest first (a ring while walking). */
struct ids {
    char (*id)[64];
    size_t cap, n, head;
};

static int take_id(void *ud, const char *id, const char *phase)
{
    (void)phase;
    struct ids *w = ud;
    size_t at = (w->head + w->n) % w->cap;
    if (w->n == w->cap)
        w->head = (w->head + 1) % w->cap;
    else
        w->n++;
    snprintf(w->id[at], sizeof w->id[at], "%s", id);
    return GH_OK;
}

static int add_recs(struct gh_report *r, struct gh_audit_incident_rec *recs, size_t n,
                    const struct tjobs *tj, struct gh_err *err)
{
    int rc = GH_OK;
    for (size_t i = 0; !rc && i < n; i++)
        rc = add_rec(r, &recs[i], tj, err);
    gh_audit_recs_free(recs, n);
    return rc;
}

int gh_report_load_audit(struct gh_report *r, struct gh_audit *a,
                         const struct gh_audit_subject *subj, int64_t since_ns, size_t max,
                         struct gh_err *err)
{
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    if (!max || max > GH_AUDIT_QUERY_MAX)
        max = GH_AUDIT_QUERY_MAX;
    /* the step charts first, in time order; then the incidents */
    struct tjobs *tj = calloc(1, sizeof *tj);
    if (!tj)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    int rc = GH_OK;
    if (!subj || subj->kind == GH_AUDIT_JOB || subj->kind == GH_AUDIT_NODE) {
        struct steps_ctx sc = {r, tj, err};
        rc = gh_audit_steps_read(a, subj && subj->kind == GH_AUDIT_JOB ? subj->name : NULL,
                                 since_ns, 0, add_steps, &sc, err);
    }
    if (rc || subj) {
        if (!rc)
            rc = gh_audit_query(a, subj, since_ns, max, &recs, &n, err);
        if (!rc)
            rc = add_recs(r, recs, n, tj, err);
        free(tj);
        return rc;
    }
    struct ids w = {.cap = max};
    w.id = calloc(max, sizeof *w.id);
    if (!w.id) {
        free(tj);
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    }
    rc = gh_audit_incident_ids(a, since_ns, take_id, &w, err);
    for (size_t i = 0; !rc && i < w.n; i++) {
        struct gh_audit_subject one = {.kind = GH_AUDIT_INCIDENT};
        snprintf(one.name, sizeof one.name, "%s", w.id[(w.head + i) % w.cap]);
        recs = NULL;
        n = 0;
        rc = gh_audit_query(a, &one, since_ns, 1, &recs, &n, err);
        if (!rc)
            rc = add_recs(r, recs, n, tj, err);
        else
            gh_audit_recs_free(recs, n);
    }
    free(w.id);
    free(tj);
    return rc;
}
