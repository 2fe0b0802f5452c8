/* report.c - gathers what `gpuheal report` shows into the bounded model of
 * report-t.h: signals onto timeline lanes (markers thinned when a lane is
 * full), steps into per-rank and per-node series, incidents with their
 * evidence, guard verdicts and actions. Drawing is html.c's job. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "report/report-t.h"

/* Two step signals of a node further apart than this start a new span of
 * activity on its training lane. */
#define ACTIVITY_GAP_NS (120 * 1000000000LL)
#define LABEL_MAX 160
#define DETAIL_MAX 4096

void gh_report_limits_default(struct gh_report_limits *l)
{
    l->max_lanes = 512;
    l->max_lane_events = 200;
    l->max_shown_lanes = 48;
    l->max_jobs = 16;
    l->max_job_nodes = 1024;
    l->max_rank_series = 64;
    l->max_node_series = 256;
    l->max_series_points = 512;
    l->max_chart_points = 8000;
    l->max_incidents = 500;
    l->max_evidence_rows = 40;
    l->max_rows = 40;
    l->max_text = 2048;
}

static const char *const group_names[GH_REP__GROUPS] = {
    "kernel log", "NVML/DCGM", "host", "Kubernetes", "training", "probes",
};

const char *gh_rep_group_name(enum gh_rep_group g)
{
    return (unsigned)g < GH_REP__GROUPS ? group_names[g] : "other";
}

/* A copy of at most max bytes of s, cut on a UTF-8 boundary. *out NULL
 * when s is NULL. */
static int sdup(char **out, const char *s, size_t max, struct gh_err *err)
{
    *out = NULL;
    if (!s)
        return GH_OK;
    size_t n = strnlen(s, max + 1);
    if (n > max) {
        n = max;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    char *p = malloc(n + 1);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    memcpy(p, s, n);
    p[n] = '\0';
    *out = p;
    return GH_OK;
}

static bool streq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

struct gh_report *gh_report_new(const struct gh_report_limits *lim, struct gh_err *err)
{
    struct gh_report *r = calloc(1, sizeof *r);
    if (!r) {
        gh_err_set(err, GH_ENOMEM, "report: out of memory");
        return NULL;
    }
    if (lim)
        r->lim = *lim;
    else
        gh_report_limits_default(&r->lim);
    if (r->lim.max_text < 16)
        r->lim.max_text = 16;
    if (!r->lim.max_lane_events)
        r->lim.max_lane_events = 1;
    r->lanes = calloc(r->lim.max_lanes ? r->lim.max_lanes : 1, sizeof *r->lanes);
    r->jobs = calloc(r->lim.max_jobs ? r->lim.max_jobs : 1, sizeof *r->jobs);
    r->inc = calloc(r->lim.max_incidents ? r->lim.max_incidents : 1, sizeof *r->inc);
    if (!r->lanes || !r->jobs || !r->inc) {
        gh_report_free(r);
        gh_err_set(err, GH_ENOMEM, "report: out of memory");
        return NULL;
    }
    return r;
}

static void free_series(struct gh_rep_series *s)
{
    free(s->node);
    gh_series_clear(&s->s);
}

static void free_incident(struct gh_rep_incident *in)
{
    char **f[] = {&in->id,   &in->cls,   &in->severity,  &in->node,   &in->job,    &in->rule,
                  &in->reason, &in->mode, &in->phase, &in->ckpt_path, &in->actions};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        free(*f[i]);
    for (size_t i = 0; i < in->n_ev; i++) {
        struct gh_rep_ev_row *e = &in->ev[i];
        free(e->source), free(e->kind), free(e->node), free(e->summary), free(e->raw);
    }
    free(in->ev);
    for (size_t i = 0; i < in->n_guards; i++) {
        struct gh_rep_guard_row *g = &in->guards[i];
        free(g->action), free(g->target), free(g->guard), free(g->verdict), free(g->detail);
    }
    free(in->guards);
    for (size_t i = 0; i < in->n_acts; i++) {
        struct gh_rep_action_row *a = &in->acts[i];
        free(a->action), free(a->target), free(a->result), free(a->api_result), free(a->detail);
    }
    free(in->acts);
}

void gh_report_free(struct gh_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_lanes; i++) {
        struct gh_rep_lane *l = &r->lanes[i];
        for (size_t k = 0; k < l->n_ev; k++) {
            free(l->ev[k].label);
            free(l->ev[k].detail);
        }
        free(l->ev);
        free(l->node);
        free(l->job);
    }
    for (size_t i = 0; i < r->n_jobs; i++) {
        struct gh_rep_job *j = &r->jobs[i];
        free(j->name);
        for (size_t k = 0; k < j->n_nodes; k++)
            free(j->nodes[k]);
        free(j->nodes);
        for (size_t k = 0; k < j->n_ranks; k++)
            free_series(&j->ranks[k]);
        free(j->ranks);
        for (size_t k = 0; k < j->n_nodes_s; k++)
            free_series(&j->nodes_s[k]);
        free(j->nodes_s);
    }
    for (size_t i = 0; i < r->n_inc; i++)
        free_incident(&r->inc[i]);
    free(r->lanes);
    free(r->jobs);
    free(r->inc);
    free(r->title);
    free(r->origin);
    free(r->subject);
    free(r);
}

static int set_str(char **field, const char *v, size_t max, struct gh_err *err)
{
    char *p;
    int rc = sdup(&p, v, max, err);
    if (rc)
        return rc;
    free(*field);
    *field = p;
    return GH_OK;
}

int gh_report_set_title(struct gh_report *r, const char *title, struct gh_err *err)
{
    return set_str(&r->title, title, r->lim.max_text, err);
}

int gh_report_set_origin(struct gh_report *r, const char *origin, struct gh_err *err)
{
    return set_str(&r->origin, origin, r->lim.max_text, err);
}

int gh_report_set_subject(struct gh_report *r, enum gh_report_scope scope, const char *name,
                          struct gh_err *err)
{
    if (scope != GH_REPORT_ALL && (!name || !*name))
        return gh_err_set(err, GH_EINVAL, "report: a job or node subject needs a name");
    int rc = set_str(&r->subject, scope == GH_REPORT_ALL ? NULL : name, r->lim.max_text, err);
    if (!rc)
        r->scope = scope;
    return rc;
}

/* ---- jobs */

const struct gh_rep_job *gh_rep_find_job(const struct gh_report *r, const char *name)
{
    for (size_t i = 0; name && i < r->n_jobs; i++)
        if (strcmp(r->jobs[i].name, name) == 0)
            return &r->jobs[i];
    return NULL;
}

bool gh_rep_job_has_node(const struct gh_rep_job *j, const char *node)
{
    for (size_t i = 0; j && node && i < j->n_nodes; i++)
        if (strcmp(j->nodes[i], node) == 0)
            return true;
    return false;
}

/* The job's record, created when absent (NULL when over max_jobs: counted,
 * or outside a job subject). */
static int job_get(struct gh_report *r, const char *name, struct gh_rep_job **out,
                   struct gh_err *err)
{
    *out = (struct gh_rep_job *)gh_rep_find_job(r, name);
    if (*out || !name)
        return GH_OK;
    if (r->scope == GH_REPORT_JOB && strcmp(name, r->subject) != 0)
        return GH_OK;
    if (r->n_jobs >= r->lim.max_jobs) {
        r->st.jobs_dropped++;
        return GH_OK;
    }
    struct gh_rep_job *j = &r->jobs[r->n_jobs];
    memset(j, 0, sizeof *j);
    j->ckpt_last_ns = INT64_MIN;
    int rc = sdup(&j->name, name, r->lim.max_text, err);
    if (rc)
        return rc;
    r->n_jobs++;
    *out = j;
    return GH_OK;
}

static int job_add_node(struct gh_report *r, struct gh_rep_job *j, const char *node,
                        struct gh_err *err)
{
    if (!j || !node || gh_rep_job_has_node(j, node))
        return GH_OK;
    if (j->n_nodes >= r->lim.max_job_nodes) {
        j->nodes_dropped = true;
        return GH_OK;
    }
    if (!j->nodes) {
        j->nodes = calloc(r->lim.max_job_nodes, sizeof *j->nodes);
        if (!j->nodes)
            return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    }
    int rc = sdup(&j->nodes[j->n_nodes], node, r->lim.max_text, err);
    if (!rc)
        j->n_nodes++;
    return rc;
}

bool gh_report_concerns(const struct gh_report *r, const char *node, const char *job)
{
    switch (r->scope) {
    case GH_REPORT_ALL:
        return true;
    case GH_REPORT_NODE:
        /* the node's own signals, and job-level ones (checkpoints) of its jobs */
        return streq(node, r->subject) ||
               (!node && gh_rep_job_has_node(gh_rep_find_job(r, job), r->subject));
    case GH_REPORT_JOB:
        return (job && strcmp(job, r->subject) == 0) ||
               gh_rep_job_has_node(gh_rep_find_job(r, r->subject), node);
    }
    return false;
}

int gh_report_add_header(struct gh_report *r, const json_t *header, struct gh_err *err)
{
    const json_t *jobs = json_object_get(header, "jobs");
    size_t i;
    const json_t *jo;
    json_array_foreach(jobs, i, jo) {
        const char *name = gh_json_str(jo, "name");
        const json_t *nodes = json_object_get(jo, "nodes");
        if (!name)
            continue;
        if (r->scope == GH_REPORT_NODE) {
            /* only the jobs on the subject node */
            bool on = false;
            size_t k;
            const json_t *n;
            json_array_foreach(nodes, k, n) on = on || streq(json_string_value(n), r->subject);
            if (!on)
                continue;
        }
        struct gh_rep_job *j;
        int rc = job_get(r, name, &j, err);
        if (rc)
            return rc;
        size_t k;
        const json_t *n;
        json_array_foreach(nodes, k, n) {
            rc = job_add_node(r, j, json_string_value(n), err);
            if (rc)
                return rc;
        }
    }
    return GH_OK;
}

/* ---- lanes and markers */

static enum gh_rep_group group_of(enum gh_source src)
{
    switch (src) {
    case GH_SRC_KMSG: return GH_REP_KMSG;
    case GH_SRC_NVML:
    case GH_SRC_DCGM: return GH_REP_GPU;
    case GH_SRC_HOST: return GH_REP_HOST;
    case GH_SRC_KUBE: return GH_REP_KUBE;
    case GH_SRC_TELEMETRY: return GH_REP_TRAIN;
    case GH_SRC_PROBE:
    case GH_SRC__COUNT: break;
    }
    return GH_REP_PROBE;
}

/* The lane for (node or job, gpu, group); NULL when max_lanes is reached
 * (counted). */
static int lane_get(struct gh_report *r, const char *node, const char *job, int gpu,
                    enum gh_rep_group g, struct gh_rep_lane **out, struct gh_err *err)
{
    *out = NULL;
    if (node)
        job = NULL;
    if (g != GH_REP_KMSG && g != GH_REP_GPU)
        gpu = -1;
    if (r->last_lane < r->n_lanes) {
        struct gh_rep_lane *l = &r->lanes[r->last_lane];
        if (l->group == g && l->gpu == gpu && streq(l->node, node) && streq(l->job, job)) {
            *out = l;
            return GH_OK;
        }
    }
    for (size_t i = 0; i < r->n_lanes; i++) {
        struct gh_rep_lane *l = &r->lanes[i];
        if (l->group == g && l->gpu == gpu && streq(l->node, node) && streq(l->job, job)) {
            r->last_lane = i;
            *out = l;
            return GH_OK;
        }
    }
    if (r->n_lanes >= r->lim.max_lanes) {
        r->st.lanes_dropped++;
        return GH_OK;
    }
    struct gh_rep_lane *l = &r->lanes[r->n_lanes];
    memset(l, 0, sizeof *l);
    l->gpu = gpu;
    l->group = g;
    int rc = sdup(&l->node, node, r->lim.max_text, err);
    if (!rc)
        rc = sdup(&l->job, job, r->lim.max_text, err);
    if (!rc)
        l->ev = calloc(r->lim.max_lane_events, sizeof *l->ev);
    if (rc || !l->ev) {
        free(l->node);
        free(l->job);
        free(l->ev);
        memset(l, 0, sizeof *l);
        return rc ? rc : gh_err_set(err, GH_ENOMEM, "report: out of memory");
    }
    r->last_lane = r->n_lanes++;
    *out = l;
    return GH_OK;
}

/* Drops every other marker of weight w (oldest kept); the count removed. */
static size_t thin(struct gh_report *r, struct gh_rep_lane *l, uint8_t w)
{
    size_t k = 0, seen = 0;
    for (size_t i = 0; i < l->n_ev; i++) {
        if (l->ev[i].weight == w && (seen++ % 2) == 1) {
            free(l->ev[i].label);
            free(l->ev[i].detail);
            continue;
        }
        l->ev[k++] = l->ev[i];
    }
    size_t removed = l->n_ev - k;
    l->n_ev = k;
    l->dropped += removed;
    r->st.markers_dropped += removed;
    r->st.markers -= removed;
    return removed;
}

static int lane_add(struct gh_report *r, struct gh_rep_lane *l, const struct gh_rep_event *e,
                    struct gh_err *err)
{
    /* the same evidence recorded for two incidents: one marker */
    for (size_t i = l->n_ev, seen = 0; i > 0 && seen < 16; i--, seen++) {
        const struct gh_rep_event *o = &l->ev[i - 1];
        if (o->ts == e->ts && o->kind == e->kind && o->gpu == e->gpu && streq(o->label, e->label))
            return GH_OK;
    }
    if (l->n_ev >= r->lim.max_lane_events) {
        for (uint8_t w = GH_REP_MINOR; w <= e->weight && l->n_ev >= r->lim.max_lane_events; w++)
            thin(r, l, w);
        if (l->n_ev >= r->lim.max_lane_events) {
            l->dropped++;
            r->st.markers_dropped++;
            return GH_OK;
        }
    }
    struct gh_rep_event c = *e;
    int rc = sdup(&c.label, e->label, r->lim.max_text, err);
    if (!rc)
        rc = sdup(&c.detail, e->detail, r->lim.max_text, err);
    if (rc) {
        free(c.label);
        return rc;
    }
    /* kept in time order: input is mostly sorted, so this rarely moves */
    size_t at = l->n_ev;
    while (at > 0 && l->ev[at - 1].ts > c.ts)
        at--;
    memmove(&l->ev[at + 1], &l->ev[at], (l->n_ev - at) * sizeof *l->ev);
    l->ev[at] = c;
    l->n_ev++;
    r->st.markers++;
    return GH_OK;
}

/* A short label, the weight and a detail line for a signal. */
static uint8_t describe(const struct gh_signal *s, char *label, size_t lcap, char *detail,
                        size_t dcap)
{
    uint8_t w = GH_REP_NOTABLE;
    const char *msg = s->msg;
    detail[0] = '\0';
    switch (s->kind) {
    case GH_KIND_XID:
        snprintf(label, lcap, "XID %d", s->code);
        w = GH_REP_MAJOR;
        break;
    case GH_KIND_SXID:
        snprintf(label, lcap, "SXID %d", s->code);
        w = GH_REP_MAJOR;
        break;
    case GH_KIND_ECC:
        snprintf(label, lcap, "ECC %s-bit (%" PRId64 ")", s->bits == GH_ECC_DOUBLE ? "double" : "single",
                 s->has_count ? s->count : 0);
        w = s->bits == GH_ECC_DOUBLE ? GH_REP_MAJOR : GH_REP_NOTABLE;
        break;
    case GH_KIND_ROW_REMAP:
        snprintf(label, lcap, "row remap%s%s", s->failure ? " failure" : "",
                 s->pending ? " pending" : "");
        w = s->failure ? GH_REP_MAJOR : GH_REP_NOTABLE;
        break;
    case GH_KIND_GPU_LOST:
        snprintf(label, lcap, "GPU lost");
        w = GH_REP_MAJOR;
        break;
    case GH_KIND_NVLINK:
        if (s->has_link)
            snprintf(label, lcap, "NVLink %d %s", s->link, s->counter ? s->counter : "");
        else
            snprintf(label, lcap, "NVLink %s", s->counter ? s->counter : "");
        break;
    case GH_KIND_PCIE:
        snprintf(label, lcap, "PCIe %s", s->counter ? s->counter : "");
        break;
    case GH_KIND_NIC:
        snprintf(label, lcap, "%s %s%s", s->device ? s->device : "NIC", s->counter ? s->counter : "",
                 s->state == GH_LINK_DOWN ? " (down)" : "");
        if (s->state == GH_LINK_DOWN)
            w = GH_REP_MAJOR;
        break;
    case GH_KIND_THERMAL:
        snprintf(label, lcap, "%.0f \xC2\xB0""C%s", s->celsius, s->throttled ? " throttled" : "");
        w = s->throttled ? GH_REP_NOTABLE : GH_REP_MINOR;
        break;
    case GH_KIND_POWER:
        snprintf(label, lcap, "%.0f W%s", s->watts, s->throttled ? " throttled" : "");
        w = s->throttled ? GH_REP_NOTABLE : GH_REP_MINOR;
        break;
    case GH_KIND_STEP:
        snprintf(label, lcap, "step %" PRId64, s->has_step ? s->step : 0);
        w = GH_REP_MINOR;
        break;
    case GH_KIND_CHECKPOINT:
        snprintf(label, lcap, "checkpoint %" PRId64 " %s", s->has_step ? s->step : 0,
                 s->ckpt_state == GH_CKPT_FAILED ? "failed" : "saved");
        w = s->ckpt_state == GH_CKPT_FAILED ? GH_REP_MAJOR : GH_REP_NOTABLE;
        if (s->path)
            snprintf(detail, dcap, "%s", s->path);
        break;
    case GH_KIND_REPLICA_CHECKSUM:
        snprintf(label, lcap, "checksum rank %d", s->has_rank ? s->rank : -1);
        w = GH_REP_MINOR;
        break;
    case GH_KIND_POD_FAILED:
        snprintf(label, lcap, "pod failed: %s", s->reason ? s->reason : "?");
        w = GH_REP_MAJOR;
        if (s->has_exit_code)
            snprintf(detail, dcap, "pod %s/%s exit %d: %s", s->namespace_ ? s->namespace_ : "",
                     s->pod ? s->pod : "", s->exit_code, msg ? msg : "");
        else
            snprintf(detail, dcap, "pod %s/%s: %s", s->namespace_ ? s->namespace_ : "",
                     s->pod ? s->pod : "", msg ? msg : "");
        msg = NULL;
        break;
    case GH_KIND_POD_STARTED:
        snprintf(label, lcap, "pod started");
        snprintf(detail, dcap, "pod %s/%s", s->namespace_ ? s->namespace_ : "",
                 s->pod ? s->pod : "");
        break;
    case GH_KIND_POD_SUCCEEDED:
        snprintf(label, lcap, "pod succeeded");
        snprintf(detail, dcap, "pod %s/%s", s->namespace_ ? s->namespace_ : "",
                 s->pod ? s->pod : "");
        break;
    case GH_KIND_JOB_FINISHED:
        snprintf(label, lcap, "job %s", s->job_state == GH_JOB_FAILED ? "failed" : "complete");
        snprintf(detail, dcap, "%s", s->job ? s->job : "");
        break;
    case GH_KIND_NODE_NOT_READY:
        snprintf(label, lcap, "NotReady");
        w = GH_REP_MAJOR;
        break;
    case GH_KIND_NODE_READY:
        snprintf(label, lcap, "Ready");
        break;
    case GH_KIND_PROBE_RESULT:
        snprintf(label, lcap, "%s %s", s->check ? s->check : "probe", s->passed ? "passed" : "FAILED");
        w = s->passed ? GH_REP_NOTABLE : GH_REP_MAJOR;
        if (s->detail)
            snprintf(detail, dcap, "%s", s->detail);
        break;
    case GH_KIND_NODE_CONDITION:
        snprintf(label, lcap, "%s=%s", s->condition ? s->condition : "condition",
                 s->cond_status == GH_COND_TRUE    ? "True"
                 : s->cond_status == GH_COND_FALSE ? "False"
                                                   : "Unknown");
        w = s->cond_status == GH_COND_TRUE ? GH_REP_MAJOR : GH_REP_NOTABLE;
        if (s->reason)
            snprintf(detail, dcap, "%s", s->reason);
        break;
    case GH_KIND__COUNT:
        snprintf(label, lcap, "?");
        break;
    }
    if (msg && !detail[0])
        snprintf(detail, dcap, "%s", msg);
    return w;
}

static int add_step(struct gh_report *r, const struct gh_signal *s, struct gh_err *err)
{
    struct gh_rep_job *j;
    int rc = job_get(r, s->job, &j, err);
    if (!rc)
        rc = job_add_node(r, j, s->node, err);
    if (rc)
        return rc;
    r->st.steps++;
    if (!r->has_t0) {
        r->t0 = s->ts_ns;
        r->has_t0 = true;
    }
    double x = (double)(s->ts_ns - r->t0) / 1e9;
    if (j && s->has_rank && isfinite(s->step_ms)) {
        j->steps++;
        /* a series per rank and placement: a rank a restart moved to another
         * node is a new line, named after that node (keyed by rank alone,
         * the old node's name stayed on the moved rank's times) */
        struct gh_rep_series *rs = NULL;
        for (size_t i = 0; i < j->n_ranks && !rs; i++)
            if (j->ranks[i].rank == s->rank && j->ranks[i].gpu == s->gpu &&
                (j->ranks[i].node && s->node ? strcmp(j->ranks[i].node, s->node) == 0
                                             : j->ranks[i].node == s->node))
                rs = &j->ranks[i];
        if (!rs && j->n_ranks < r->lim.max_rank_series) {
            if (!j->ranks && !(j->ranks = calloc(r->lim.max_rank_series, sizeof *j->ranks)))
                return gh_err_set(err, GH_ENOMEM, "report: out of memory");
            rs = &j->ranks[j->n_ranks];
            memset(rs, 0, sizeof *rs);
            rs->rank = s->rank;
            rs->gpu = s->gpu;
            if ((rc = sdup(&rs->node, s->node, r->lim.max_text, err)) ||
                (rc = gh_series_init(&rs->s, r->lim.max_series_points, err))) {
                free_series(rs);
                return rc;
            }
            j->n_ranks++;
        } else if (!rs) {
            j->ranks_dropped = true;
        }
        if (rs)
            gh_series_add(&rs->s, x, s->step_ms);
        /* the node's mean over its ranks, one point per step */
        struct gh_rep_series *ns = NULL;
        for (size_t i = 0; s->node && i < j->n_nodes_s && !ns; i++)
            if (strcmp(j->nodes_s[i].node, s->node) == 0)
                ns = &j->nodes_s[i];
        if (!ns && s->node && j->n_nodes_s < r->lim.max_node_series) {
            if (!j->nodes_s && !(j->nodes_s = calloc(r->lim.max_node_series, sizeof *j->nodes_s)))
                return gh_err_set(err, GH_ENOMEM, "report: out of memory");
            ns = &j->nodes_s[j->n_nodes_s];
            memset(ns, 0, sizeof *ns);
            ns->rank = -1;
            ns->gpu = -1;
            if ((rc = sdup(&ns->node, s->node, r->lim.max_text, err)) ||
                (rc = gh_series_init(&ns->s, r->lim.max_series_points, err))) {
                free_series(ns);
                return rc;
            }
            j->n_nodes_s++;
        } else if (!ns && s->node) {
            j->nodes_s_dropped = true;
        }
        if (ns) {
            int64_t step = s->has_step ? s->step : -1;
            if (ns->pn && ns->pstep != step) {
                gh_series_add(&ns->s, ns->pts, ns->psum / ns->pn);
                ns->pn = 0;
                ns->psum = 0;
            }
            ns->pstep = step;
            ns->psum += s->step_ms;
            ns->pts = ns->pn ? fmax(ns->pts, x) : x;
            ns->pn++;
        }
    }
    /* activity on the node's training lane */
    if (!s->node)
        return GH_OK;
    struct gh_rep_lane *l;
    if ((rc = lane_get(r, s->node, NULL, -1, GH_REP_TRAIN, &l, err)) || !l)
        return rc;
    l->steps++;
    int64_t t = s->ts_ns;
    for (size_t i = l->n_seg; i > 0; i--) {
        struct gh_rep_seg *g = &l->seg[i - 1];
        if (t >= g->a - ACTIVITY_GAP_NS && t <= g->b + ACTIVITY_GAP_NS) {
            if (t < g->a)
                g->a = t;
            if (t > g->b)
                g->b = t;
            return GH_OK;
        }
    }
    if (l->n_seg < GH_REP_MAX_SEGS) {
        l->seg[l->n_seg].a = l->seg[l->n_seg].b = t;
        l->n_seg++;
    } else if (t > l->seg[l->n_seg - 1].b) {
        l->seg[l->n_seg - 1].b = t;
    }
    return GH_OK;
}

int gh_report_add_signal(struct gh_report *r, const struct gh_signal *s, struct gh_err *err)
{
    r->st.signals++;
    if (!gh_report_concerns(r, s->node, s->job)) {
        r->st.filtered++;
        return GH_OK;
    }
    if (s->kind == GH_KIND_STEP)
        return add_step(r, s, err);
    int rc = GH_OK;
    struct gh_rep_job *j = NULL;
    if (s->job && (rc = job_get(r, s->job, &j, err)))
        return rc;
    if (s->kind == GH_KIND_POD_FAILED || s->kind == GH_KIND_POD_STARTED)
        if ((rc = job_add_node(r, j, s->node, err)))
            return rc;
    if (s->kind == GH_KIND_CHECKPOINT && j && s->ckpt_state == GH_CKPT_SAVED &&
        s->ts_ns > j->ckpt_last_ns)
        j->ckpt_last_ns = s->ts_ns;
    const char *node = s->kind == GH_KIND_CHECKPOINT ? NULL : s->node;
    const char *job = node ? NULL : s->job;
    struct gh_rep_lane *l;
    if ((rc = lane_get(r, node, job, s->gpu, group_of(s->source), &l, err)) || !l)
        return rc;
    char label[LABEL_MAX];
    char *detail = malloc(DETAIL_MAX);
    if (!detail)
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    struct gh_rep_event e = {.ts = s->ts_ns, .gpu = s->gpu, .kind = (uint8_t)s->kind,
                             .injected = s->injected, .label = label, .detail = detail};
    e.weight = describe(s, label, sizeof label, detail, DETAIL_MAX);
    if (!detail[0])
        e.detail = NULL;
    rc = lane_add(r, l, &e, err);
    free(detail);
    return rc;
}

/* ---- incidents */

static struct gh_rep_incident *incident_at(struct gh_report *r, long idx)
{
    return idx >= 0 && (size_t)idx < r->n_inc ? &r->inc[idx] : NULL;
}

int gh_report_add_incident(struct gh_report *r, const struct gh_report_incident *inc, long *idx,
                           struct gh_err *err)
{
    if (idx)
        *idx = -1;
    if (r->n_inc >= r->lim.max_incidents) {
        r->st.incidents_dropped++;
        return GH_OK;
    }
    struct gh_rep_incident *in = &r->inc[r->n_inc];
    memset(in, 0, sizeof *in);
    size_t m = r->lim.max_text;
    char acts[1024];
    size_t off = 0;
    acts[0] = '\0';
    for (size_t i = 0; i < inc->n_actions && off < sizeof acts; i++) {
        int k = snprintf(acts + off, sizeof acts - off, "%s%s", i ? ", " : "",
                         inc->actions[i] ? inc->actions[i] : "?");
        if (k < 0)
            break;
        off += (size_t)k;
    }
    int rc;
    if ((rc = sdup(&in->id, inc->id ? inc->id : "?", m, err)) ||
        (rc = sdup(&in->cls, inc->cls ? inc->cls : "unknown", m, err)) ||
        (rc = sdup(&in->severity, inc->severity, m, err)) ||
        (rc = sdup(&in->node, inc->node, m, err)) || (rc = sdup(&in->job, inc->job, m, err)) ||
        (rc = sdup(&in->rule, inc->rule, m, err)) || (rc = sdup(&in->reason, inc->reason, m, err)) ||
        (rc = sdup(&in->mode, inc->mode, m, err)) || (rc = sdup(&in->phase, inc->phase, m, err)) ||
        (rc = sdup(&in->ckpt_path, inc->ckpt_path, m, err)) ||
        (rc = sdup(&in->actions, acts, m, err))) {
        free_incident(in);
        memset(in, 0, sizeof *in);
        return rc;
    }
    in->gpu = inc->gpu;
    in->first_ns = inc->first_ns;
    in->decided_ns = inc->decided_ns;
    in->ckpt_step = inc->ckpt_step;
    if (idx)
        *idx = (long)r->n_inc;
    r->n_inc++;
    /* the blamed node runs the job */
    struct gh_rep_job *j = NULL;
    if (inc->job && inc->node && !(rc = job_get(r, inc->job, &j, err)))
        rc = job_add_node(r, j, inc->node, err);
    return rc;
}

static const char *summary_of(const struct gh_signal *s, char *buf, size_t cap)
{
    char label[LABEL_MAX], detail[8];
    describe(s, label, sizeof label, detail, sizeof detail);
    switch (s->kind) {
    case GH_KIND_STEP:
        snprintf(buf, cap, "%s rank %d: %.1f ms", label, s->has_rank ? s->rank : -1, s->step_ms);
        break;
    case GH_KIND_REPLICA_CHECKSUM:
        snprintf(buf, cap, "%s step %" PRId64 " replica %d: %s", label, s->has_step ? s->step : 0,
                 s->replica, s->value ? s->value : "");
        break;
    case GH_KIND_POD_FAILED:
        if (s->has_exit_code)
            snprintf(buf, cap, "%s (pod %s/%s, exit %d)", label, s->namespace_ ? s->namespace_ : "",
                     s->pod ? s->pod : "", s->exit_code);
        else
            snprintf(buf, cap, "%s (pod %s/%s)", label, s->namespace_ ? s->namespace_ : "",
                     s->pod ? s->pod : "");
        break;
    case GH_KIND_NVLINK:
    case GH_KIND_PCIE:
    case GH_KIND_NIC:
        if (s->has_count)
            snprintf(buf, cap, "%s = %" PRId64, label, s->count);
        else
            snprintf(buf, cap, "%s", label);
        break;
    default:
        snprintf(buf, cap, "%s", label);
        break;
    }
    return buf;
}

int gh_report_add_evidence(struct gh_report *r, long idx, const struct gh_signal *s,
                           const char *raw, struct gh_err *err)
{
    struct gh_rep_incident *in = incident_at(r, idx);
    if (!in)
        return GH_OK;
    in->ev_total++;
    if (in->n_ev >= r->lim.max_evidence_rows)
        return GH_OK;
    if (!in->ev && !(in->ev = calloc(r->lim.max_evidence_rows, sizeof *in->ev)))
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    struct gh_rep_ev_row *e = &in->ev[in->n_ev];
    memset(e, 0, sizeof *e);
    e->ts = s->ts_ns;
    e->gpu = s->gpu;
    e->injected = s->injected;
    char sum[512];
    size_t m = r->lim.max_text;
    int rc;
    if ((rc = sdup(&e->source, gh_source_name(s->source), m, err)) ||
        (rc = sdup(&e->kind, gh_kind_name(s->kind), m, err)) ||
        (rc = sdup(&e->node, s->node, m, err)) ||
        (rc = sdup(&e->summary, summary_of(s, sum, sizeof sum), m, err)) ||
        (rc = sdup(&e->raw, s->msg ? s->msg : raw, m, err))) {
        free(e->source), free(e->kind), free(e->node), free(e->summary), free(e->raw);
        memset(e, 0, sizeof *e);
        return rc;
    }
    in->n_ev++;
    return GH_OK;
}

int gh_report_add_joined_evidence(struct gh_report *r, long idx, const struct gh_signal *s,
                                  const char *raw, struct gh_err *err)
{
    struct gh_rep_incident *in = incident_at(r, idx);
    size_t before = in ? in->n_ev : 0;
    int rc = gh_report_add_evidence(r, idx, s, raw, err);
    if (!rc && in && in->n_ev > before)
        in->ev[in->n_ev - 1].joined = true;
    return rc;
}

int gh_report_add_guard(struct gh_report *r, long idx, const struct gh_report_guard *g,
                        struct gh_err *err)
{
    struct gh_rep_incident *in = incident_at(r, idx);
    if (!in)
        return GH_OK;
    in->guards_total++;
    if (in->n_guards >= r->lim.max_rows)
        return GH_OK;
    if (!in->guards && !(in->guards = calloc(r->lim.max_rows, sizeof *in->guards)))
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    struct gh_rep_guard_row *o = &in->guards[in->n_guards];
    memset(o, 0, sizeof *o);
    o->ts = g->ts_ns;
    size_t m = r->lim.max_text;
    int rc;
    if ((rc = sdup(&o->action, g->action, m, err)) || (rc = sdup(&o->target, g->target, m, err)) ||
        (rc = sdup(&o->guard, g->guard, m, err)) || (rc = sdup(&o->verdict, g->verdict, m, err)) ||
        (rc = sdup(&o->detail, g->detail, m, err))) {
        free(o->action), free(o->target), free(o->guard), free(o->verdict), free(o->detail);
        memset(o, 0, sizeof *o);
        return rc;
    }
    in->n_guards++;
    return GH_OK;
}

int gh_report_add_action(struct gh_report *r, long idx, const struct gh_report_action *a,
                         struct gh_err *err)
{
    struct gh_rep_incident *in = incident_at(r, idx);
    if (!in)
        return GH_OK;
    in->acts_total++;
    if (in->n_acts >= r->lim.max_rows)
        return GH_OK;
    if (!in->acts && !(in->acts = calloc(r->lim.max_rows, sizeof *in->acts)))
        return gh_err_set(err, GH_ENOMEM, "report: out of memory");
    struct gh_rep_action_row *o = &in->acts[in->n_acts];
    memset(o, 0, sizeof *o);
    o->started = a->started_ns;
    o->finished = a->finished_ns;
    o->http = a->http;
    size_t m = r->lim.max_text;
    int rc;
    if ((rc = sdup(&o->action, a->action, m, err)) || (rc = sdup(&o->target, a->target, m, err)) ||
        (rc = sdup(&o->result, a->result, m, err)) ||
        (rc = sdup(&o->api_result, a->api_result, m, err)) ||
        (rc = sdup(&o->detail, a->detail, m, err))) {
        free(o->action), free(o->target), free(o->result), free(o->api_result), free(o->detail);
        memset(o, 0, sizeof *o);
        return rc;
    }
    in->n_acts++;
    return GH_OK;
}

size_t gh_rep_series_points(const struct gh_rep_series *s, double *x, double *y, size_t max)
{
    size_t n = gh_series_copy(&s->s, x, y, max);
    if (s->rank < 0 && s->pn && n < max) {
        x[n] = s->pts;
        y[n] = s->psum / s->pn;
        n++;
    }
    return n;
}

void gh_report_stats(const struct gh_report *r, struct gh_report_stats *out)
{
    *out = r->st;
    out->lanes = r->n_lanes;
    out->jobs = r->n_jobs;
    out->incidents = r->n_inc;
}
