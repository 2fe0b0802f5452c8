/* executor.c - the controller's worker thread: record, intend, act, record,
 * publish; and the replay of intents a killed process left pending. */
#include "control/executor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "audit/audit.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/events.h"

#define QUEUE_DEFAULT 4096
#define REPORTS_MAX 4096
#define EVIDENCE_CR_MAX 100
#define PODS_MAX 16

struct gh_executor {
    struct gh_executor_opts o;
    char identity[128];
    char crash_after[32];
    struct gh_kube_client *c;
    struct gh_audit *a;
    const struct gh_clock *clock;
    int efd;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct gh_task *q; /* ring */
    size_t qcap, qhead, qn;
    bool busy;
    struct gh_exec_report *rep; /* ring */
    size_t rhead, rn;
};

static int64_t now(const struct gh_executor *ex) { return gh_clock_now(ex->clock); }

/* ---- small helpers */

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char *verdict_name(enum gh_guard_outcome o)
{
    switch (o) {
    case GH_GUARD_ALLOW: return "allowed";
    case GH_GUARD_DENY: return "denied";
    case GH_GUARD_DRY_RUN: return "dry_run";
    case GH_GUARD_AWAIT: return "awaiting_approval";
    }
    return "?";
}

static bool node_action(enum gh_action a)
{
    return a == GH_ACT_ISOLATE_NODE || a == GH_ACT_DRAIN_NODE || a == GH_ACT_RESET_GPU ||
           a == GH_ACT_REBOOT_NODE || a == GH_ACT_REPLACE_NODE || a == GH_ACT_RUN_DIAGNOSTICS;
}

/* Splits "ns/name" (a job without a namespace is in "default"). */
static void split_job(const char *job, char *ns, size_t nscap, char *name, size_t namecap)
{
    const char *slash = job ? strchr(job, '/') : NULL;
    if (slash) {
        snprintf(ns, nscap, "%.*s", (int)(slash - job), job);
        snprintf(name, namecap, "%s", slash + 1);
    } else {
        snprintf(ns, nscap, "default");
        snprintf(name, namecap, "%s", job ? job : "");
    }
}

static void target_of(const json_t *inc, enum gh_action a, char *buf, size_t cap)
{
    const char *node = jstr(inc, "node"), *job = jstr(inc, "job");
    if (node_action(a) && node)
        snprintf(buf, cap, "node/%s", node);
    else if (job) {
        char ns[64], name[254];
        split_job(job, ns, sizeof ns, name, sizeof name);
        snprintf(buf, cap, "job/%.63s/%.180s", ns, name);
    } else if (node)
        snprintf(buf, cap, "node/%s", node);
    else
        snprintf(buf, cap, "-");
}

static void intent_id(char *buf, size_t cap, const char *inc, int seq, enum gh_action a)
{
    snprintf(buf, cap, "%s/%d/%s", inc, seq, gh_action_name(a));
}

/* ---- reports */

static void report(struct gh_executor *ex, const struct gh_exec_report *r)
{
    pthread_mutex_lock(&ex->mu);
    if (ex->rn == REPORTS_MAX) { /* the loop is not reading: drop the oldest */
        ex->rhead = (ex->rhead + 1) % REPORTS_MAX;
        ex->rn--;
    }
    ex->rep[(ex->rhead + ex->rn) % REPORTS_MAX] = *r;
    ex->rn++;
    pthread_mutex_unlock(&ex->mu);
    uint64_t one = 1;
    ssize_t w = write(ex->efd, &one, sizeof one);
    (void)w;
}

/* ---- publishing: the Incident object and Events */

static const char *cr_result(const char *r)
{
    if (!r)
        return "Pending";
    if (!strcmp(r, "succeeded") || !strcmp(r, "noop"))
        return "Succeeded";
    if (!strcmp(r, "failed"))
        return "Failed";
    if (!strcmp(r, "denied"))
        return "Blocked";
    if (!strcmp(r, "awaiting_approval") || !strcmp(r, "pending"))
        return "Pending";
    return "Skipped";
}

static json_t *incident_spec(const json_t *inc, const char *mode)
{
    json_t *spec = json_object();
    if (!spec)
        return NULL;
    const char *keys[][2] = {{"id", "id"},        {"class", "class"},    {"node", "node"},
                             {"job", "job"},      {"rule", "rule"},      {"first_ts", "firstTime"},
                             {"decided_ts", "decidedTime"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = jstr(inc, keys[i][0]);
        if (v)
            json_object_set_new(spec, keys[i][1], json_string(v));
    }
    char reason[2048];
    snprintf(reason, sizeof reason, "%s", jstr(inc, "reason") ? jstr(inc, "reason") : "");
    json_object_set_new(spec, "reason", json_string(reason));
    json_t *gpu = json_object_get(inc, "gpu");
    if (json_is_integer(gpu))
        json_object_set(spec, "gpu", gpu);
    json_t *acts = json_object_get(inc, "actions");
    json_object_set_new(spec, "actions", json_is_array(acts) && json_array_size(acts)
                                             ? json_deep_copy(acts)
                                             : json_pack("[s]", "none"));
    json_t *ck = json_object_get(inc, "checkpoint");
    if (json_is_object(ck))
        json_object_set_new(spec, "checkpoint", json_deep_copy(ck));
    json_t *ev = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(inc, "evidence"), i, e) {
        if (i >= EVIDENCE_CR_MAX)
            break;
        json_t *c = json_deep_copy(e);
        const char *msg = jstr(c, "msg");
        if (msg && strlen(msg) > 4000) {
            size_t cut = 4000; /* not inside a UTF-8 sequence */
            while (cut > 0 && ((unsigned char)msg[cut] & 0xC0) == 0x80)
                cut--;
            json_object_set_new(c, "msg", json_stringn(msg, cut));
        }
        json_array_append_new(ev, c);
    }
    json_object_set_new(spec, "evidence", ev);
    json_object_set_new(spec, "dryRun", json_boolean(mode && !strcmp(mode, "dry_run")));
    return spec;
}

static void rfc_now(const struct gh_executor *ex, char *buf)
{
    int64_t t = now(ex);
    gh_time_format_rfc3339(t - t % GH_NS_PER_S, buf, GH_RFC3339_MAX);
    char *dot = strchr(buf, '.');
    if (dot)
        memcpy(dot, "Z", 2);
}

/* Creates or updates the Incident object (server-side apply) and its
 * status. Failures are reported in the audit trail's detail, never fatal:
 * the store is the record, the object its view. */
static void publish_incident(struct gh_executor *ex, const json_t *inc, const char *mode,
                             const char *phase, const json_t *status_actions, const char *message,
                             struct gh_exec_report *rep)
{
    const char *id = jstr(inc, "id");
    if (!id)
        return;
    struct gh_err err = {{0}};
    int rc = GH_OK;
    json_t *labels = json_pack("{s:s}", "gpuheal.io/class", jstr(inc, "class") ? jstr(inc, "class") : "unknown");
    const char *node = jstr(inc, "node");
    if (labels && node && strlen(node) <= 63)
        json_object_set_new(labels, "gpuheal.io/node", json_string(node));
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion", "gpuheal.io/v1alpha1",
                            "kind", "Incident", "metadata", "name", id, "labels", labels, "spec",
                            incident_spec(inc, mode));
    struct gh_kube_ref ref = {&gh_kube_res_incidents, NULL, id};
    rc = obj ? gh_kube_patch(ex->c, &ref, NULL, GH_KUBE_PATCH_APPLY, obj, NULL, NULL, &err)
             : gh_err_set(&err, GH_ENOMEM, "out of memory");
    json_decref(obj);
    char ts[GH_RFC3339_MAX];
    rfc_now(ex, ts);
    json_t *st = json_pack("{s:{s:s, s:s}}", "status", "phase", phase, "message",
                           message ? message : "");
    json_t *s = json_object_get(st, "status");
    if (status_actions)
        json_object_set(s, "actions", (json_t *)status_actions);
    if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed") || !strcmp(phase, "Skipped"))
        json_object_set_new(s, "completionTime", json_string(ts));
    if (!rc)
        rc = st ? gh_kube_patch(ex->c, &ref, "status", GH_KUBE_PATCH_MERGE, st, NULL, NULL, &err)
                : gh_err_set(&err, GH_ENOMEM, "out of memory");
    json_decref(st);
    if (rc && rep && !rep->warning[0])
        snprintf(rep->warning, sizeof rep->warning, "Incident %s: %.250s", id, err.msg);
}

static void event(struct gh_executor *ex, const char *api, const char *kind, const char *ns,
                  const char *name, const char *type, const char *reason, const char *action,
                  const char *note)
{
    struct gh_kube_event_spec s = {
        .regarding_api_version = api,
        .regarding_kind = kind,
        .regarding_name = name,
        .regarding_ns = ns,
        .type = type,
        .reason = reason,
        .action = action,
        .note = note,
        .reporting_instance = ex->identity,
    };
    (void)gh_kube_event_post(ex->c, &s, NULL, NULL, NULL);
}

/* Events about a decision on the node, the job and the pods in the
 * evidence, and on the Incident object itself. */
static void decision_events(struct gh_executor *ex, const json_t *inc, const char *summary)
{
    const char *id = jstr(inc, "id"), *node = jstr(inc, "node"), *job = jstr(inc, "job");
    char note[1024];
    snprintf(note, sizeof note, "%s: %s", id ? id : "?", summary);
    if (id)
        event(ex, "gpuheal.io/v1alpha1", "Incident", NULL, id, "Warning", "IncidentDecided",
              "Decide", note);
    if (node)
        event(ex, "v1", "Node", NULL, node, "Warning", "GPUFault", "Decide", note);
    if (job) {
        char ns[64], name[254];
        split_job(job, ns, sizeof ns, name, sizeof name);
        event(ex, "batch/v1", "Job", ns, name, "Warning", "GPUFault", "Decide", note);
    }
    size_t i;
    json_t *e;
    int pods = 0;
    json_array_foreach(json_object_get(inc, "evidence"), i, e) {
        const char *pns = jstr(e, "namespace"), *pod = jstr(e, "pod");
        if (pns && pod && pods++ < PODS_MAX)
            event(ex, "v1", "Pod", pns, pod, "Warning", "GPUFaultDiagnosed", "Decide", note);
    }
}

/* ---- actions */

struct run_ctx {
    const json_t *inc;
    const char *id;
    int64_t first_issue;
};

/* Runs one intent's action; records it and finishes the intent. */
static void run_intent(struct gh_executor *ex, struct run_ctx *rc, struct gh_audit_intent *it,
                       struct gh_act_result *res)
{
    const json_t *inc = rc->inc;
    enum gh_action a = (enum gh_action)gh_action_from_name(it->action);
    struct gh_act_ctx x = {ex->c, ex->clock, rc->id};
    struct gh_err err = {{0}};
    const char *node = jstr(inc, "node"), *job = jstr(inc, "job");
    char ns[64], name[254];
    split_job(job, ns, sizeof ns, name, sizeof name);
    int64_t t0 = now(ex);
    if (!rc->first_issue)
        rc->first_issue = t0;
    memset(res, 0, sizeof *res);
    json_t *gpu = json_object_get(inc, "gpu");
    int g = json_is_integer(gpu) ? (int)json_integer_value(gpu) : -1;
    switch (a) {
    case GH_ACT_ISOLATE_NODE:
        gh_act_isolate_node(&x, node, ex->o.no_execute_taint, res, &err);
        break;
    case GH_ACT_DRAIN_NODE: gh_act_drain_node(&x, node, &ex->o.drain, res, &err); break;
    case GH_ACT_RESET_GPU:
    case GH_ACT_REBOOT_NODE:
    case GH_ACT_RUN_DIAGNOSTICS:
        gh_act_request_node_op(&x, node, it->action, a == GH_ACT_RESET_GPU ? g : -1, res, &err);
        break;
    case GH_ACT_REPLACE_NODE: gh_act_replace_node(&x, node, jstr(inc, "reason"), res, &err); break;
    case GH_ACT_RETRY_IN_PLACE: {
        char buf[PODS_MAX][320];
        const char *pods[PODS_MAX];
        int np = 0;
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(inc, "evidence"), i, e) {
            const char *pns = jstr(e, "namespace"), *pod = jstr(e, "pod");
            if (pns && pod && np < PODS_MAX) {
                snprintf(buf[np], sizeof buf[np], "%s/%s", pns, pod);
                pods[np] = buf[np];
                np++;
            }
        }
        gh_act_retry_in_place(&x, job ? ns : NULL, job ? name : NULL, pods, np, res, &err);
        break;
    }
    case GH_ACT_RESTART_FROM_CHECKPOINT: {
        if (!job) {
            gh_act_result_set(res, "skipped", "no job to restart");
            break;
        }
        json_t *pl = it->payload ? json_loads(it->payload, 0, NULL) : NULL;
        if (!pl) {
            const char *avoid[1] = {node};
            json_t *ck = json_object_get(inc, "checkpoint");
            json_t *step = json_object_get(ck, "step");
            if (gh_act_restart_prepare(&x, ns, name, avoid, node ? 1 : 0,
                                       json_is_integer(step) ? json_integer_value(step) : -1,
                                       jstr(ck, "path"), &pl, res, &err) != GH_OK)
                break;
            /* durable before anything changes: a crash from here on
             * resumes with the same replacement */
            char *text = json_dumps(pl, JSON_COMPACT);
            int src = text ? gh_audit_intent_set_payload(ex->a, it->id, text, &err) : GH_ENOMEM;
            free(text);
            if (src) {
                json_decref(pl);
                gh_act_result_set(res, "failed", "could not store the restart plan: %s", err.msg);
                break;
            }
        }
        gh_act_restart_execute(&x, pl, res, &err);
        json_decref(pl);
        break;
    }
    default: gh_act_result_set(res, "skipped", "nothing to do"); break;
    }
    int64_t t1 = now(ex);
    if (ex->crash_after[0] && strcmp(ex->crash_after, it->action) == 0)
        raise(SIGKILL); /* test hook: a crash after acting, before recording */
    struct gh_audit_action rec = {rc->id, it->id, it->action, it->target, t0, t1, res->result,
                                  res->http, res->api, res->detail};
    struct gh_err e2;
    (void)gh_audit_record_action(ex->a, &rec, &e2);
    const char *state = strcmp(res->result, "failed") == 0 ? "failed" : "done";
    (void)gh_audit_intent_finish(ex->a, it->id, state, t1, &e2);

    /* Events about the action */
    char note[1024];
    snprintf(note, sizeof note, "%s %s: %s (%s)", it->action, res->result, res->detail, rc->id);
    bool ok = strcmp(res->result, "failed") != 0;
    if (node && node_action(a))
        event(ex, "v1", "Node", NULL, node, ok ? "Normal" : "Warning",
              ok ? "GPUHealAction" : "GPUHealActionFailed", it->action, note);
    if (job && (a == GH_ACT_RESTART_FROM_CHECKPOINT || a == GH_ACT_RETRY_IN_PLACE))
        event(ex, "batch/v1", "Job", ns, name, ok ? "Normal" : "Warning",
              ok ? "GPUHealAction" : "GPUHealActionFailed", it->action, note);
}

/* Runs the pending intents of incident id (in order) and publishes the
 * outcome. r collects per-action results. */
struct pending_list {
    struct gh_audit_intent *v;
    size_t n, cap;
    const char *only; /* incident id filter, NULL: all */
};

static int collect_intent(void *ud, const struct gh_audit_intent *it)
{
    struct pending_list *l = ud;
    if (l->only && strcmp(l->only, it->incident_id) != 0)
        return GH_OK;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct gh_audit_intent *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv)
            return GH_ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n] = *it;
    l->v[l->n].payload = it->payload ? strdup(it->payload) : NULL;
    l->n++;
    return GH_OK;
}

static void free_list(struct pending_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        gh_audit_intent_clear(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* The whole recorded history of one incident: phase from its actions. */
static void finish_incident(struct gh_executor *ex, const json_t *inc, const char *mode,
                            struct gh_exec_report *rep)
{
    const char *id = jstr(inc, "id");
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    struct gh_err err;
    json_t *acts = json_array();
    const char *phase = "Succeeded";
    bool any = false, pending = false;
    char msg[1024] = "";
    size_t used = 0;
    if (gh_audit_query(ex->a, &s, 0, 1, &recs, &n, &err) == GH_OK && n == 1) {
        /* the guards' verdicts, then the results of what was done */
        for (size_t i = 0; i < recs[0].n_guards; i++) {
            const struct gh_audit_guard_rec *g = &recs[0].guards[i];
            if (!g->action || !g->verdict || !strcmp(g->verdict, "allowed") ||
                !strcmp(g->verdict, "approved"))
                continue;
            /* the latest verdict per action wins (approval re-checks) */
            bool later = false;
            for (size_t k = i + 1; k < recs[0].n_guards; k++)
                later = later || (recs[0].guards[k].action &&
                                  !strcmp(recs[0].guards[k].action, g->action));
            if (later)
                continue;
            json_array_append_new(acts, json_pack("{s:s, s:s, s:s}", "action", g->action,
                                                  "result", cr_result(g->verdict), "message",
                                                  g->detail ? g->detail : ""));
            if (!strcmp(g->verdict, "awaiting_approval"))
                pending = true;
        }
        for (size_t i = 0; i < recs[0].n_actions; i++) {
            const struct gh_audit_action_rec *x = &recs[0].acts[i];
            char t1[GH_RFC3339_MAX], t2[GH_RFC3339_MAX];
            gh_time_format_rfc3339(x->started_ns, t1, sizeof t1);
            gh_time_format_rfc3339(x->finished_ns, t2, sizeof t2);
            char m[1024];
            snprintf(m, sizeof m, "%s", x->detail ? x->detail : "");
            json_array_append_new(acts, json_pack("{s:s, s:s, s:s, s:s, s:s}", "action",
                                                  x->action, "result", cr_result(x->result),
                                                  "startTime", t1, "completionTime", t2,
                                                  "message", m));
            any = true;
            if (x->result && !strcmp(x->result, "failed"))
                phase = "Failed";
            if (used < sizeof msg) {
                int w = snprintf(msg + used, sizeof msg - used, "%s%s %s", used ? "; " : "",
                                 x->action, x->result);
                used += w > 0 ? (size_t)w : 0;
            }
        }
    }
    gh_audit_recs_free(recs, n);
    /* open intents: still acting */
    struct pending_list l = {.only = id};
    (void)gh_audit_intents_pending(ex->a, collect_intent, &l, &err);
    if (l.n)
        phase = "Acting";
    free_list(&l);
    if (!any && strcmp(phase, "Acting") != 0) {
        bool nothing = true;
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(inc, "actions"), i, a) {
            if (json_string_value(a) && strcmp(json_string_value(a), "none") != 0)
                nothing = false;
        }
        phase = pending ? "AwaitingApproval" : nothing ? "Succeeded" : "Skipped";
        if (!used)
            snprintf(msg, sizeof msg, "%s", pending ? "waiting for approval (gpuheal approve ID)"
                                      : nothing    ? "nothing to do"
                                                   : "not acted: see the guards' verdicts");
    }
    (void)gh_audit_set_phase(ex->a, id, phase, &err);
    publish_incident(ex, inc, mode, phase, acts, msg, rep);
    json_decref(acts);
    if (rep)
        snprintf(rep->phase, sizeof rep->phase, "%s", phase);
}

static void run_pending(struct gh_executor *ex, const json_t *inc, const char *id,
                        struct gh_exec_report *rep)
{
    struct pending_list l = {.only = id};
    struct gh_err err;
    (void)gh_audit_intents_pending(ex->a, collect_intent, &l, &err);
    struct run_ctx rc = {inc, id, 0};
    for (size_t i = 0; i < l.n; i++) {
        struct gh_act_result res;
        run_intent(ex, &rc, &l.v[i], &res);
        if (rep && rep->n < GH_TASK_MAX_ACTIONS) {
            enum gh_action a = (enum gh_action)gh_action_from_name(l.v[i].action);
            rep->acts[rep->n].action = a;
            snprintf(rep->acts[rep->n].result, sizeof rep->acts[rep->n].result, "%s", res.result);
            rep->n++;
            if (node_action(a) && !strcmp(res.result, "failed"))
                rep->isolation_failed = true;
        }
    }
    if (rep)
        rep->first_issue_ns = rc.first_issue;
    free_list(&l);
}

/* Records guards and intents of the allowed actions in the current
 * transaction. */
static int record_verdicts(struct gh_executor *ex, const json_t *inc, const struct gh_task *t,
                           int64_t ts, struct gh_err *err)
{
    const char *id = jstr(inc, "id");
    int rc = GH_OK;
    if (t->kind == GH_TASK_APPROVED) {
        struct gh_audit_guard g = {id, ts, NULL, NULL, "approval", "approved",
                                   t->approver[0] ? t->approver : "approved"};
        rc = gh_audit_record_guard(ex->a, &g, err);
    }
    for (int i = 0; i < t->n && !rc; i++) {
        char target[GH_AUDIT_ID_MAX];
        target_of(inc, t->v[i].action, target, sizeof target);
        struct gh_audit_guard g = {id,
                                   ts,
                                   gh_action_name(t->v[i].action),
                                   target,
                                   t->v[i].guard,
                                   verdict_name(t->v[i].outcome),
                                   t->v[i].detail};
        rc = gh_audit_record_guard(ex->a, &g, err);
        if (rc || t->v[i].outcome != GH_GUARD_ALLOW || t->v[i].action == GH_ACT_NONE)
            continue;
        struct gh_audit_intent it;
        memset(&it, 0, sizeof it);
        intent_id(it.id, sizeof it.id, id, i, t->v[i].action);
        snprintf(it.incident_id, sizeof it.incident_id, "%s", id);
        it.seq = i;
        snprintf(it.action, sizeof it.action, "%s", gh_action_name(t->v[i].action));
        snprintf(it.target, sizeof it.target, "%s", target);
        it.created_ns = ts;
        rc = gh_audit_intent_begin(ex->a, &it, NULL, err);
        gh_audit_intent_clear(&it);
    }
    return rc;
}

static json_t *load_incident_json(struct gh_executor *ex, const char *id, char *mode, size_t cap)
{
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    struct gh_err err;
    json_t *inc = NULL;
    if (gh_audit_query(ex->a, &s, 0, 1, &recs, &n, &err) == GH_OK && n == 1 && recs[0].json) {
        inc = json_loads(recs[0].json, 0, NULL);
        if (mode)
            snprintf(mode, cap, "%s", recs[0].mode ? recs[0].mode : "act");
    }
    gh_audit_recs_free(recs, n);
    return inc;
}

static void do_decision(struct gh_executor *ex, struct gh_task *t, struct gh_exec_report *rep)
{
    json_t *inc = t->incident;
    const char *id = jstr(inc, "id");
    snprintf(rep->id, sizeof rep->id, "%s", id ? id : "");
    snprintf(rep->node, sizeof rep->node, "%s", jstr(inc, "node") ? jstr(inc, "node") : "");
    struct gh_err err = {{0}};
    int64_t ts = now(ex);
    bool allowed = false, awaiting = false;
    for (int i = 0; i < t->n; i++) {
        allowed = allowed || (t->v[i].outcome == GH_GUARD_ALLOW && t->v[i].action != GH_ACT_NONE);
        awaiting = awaiting || t->v[i].outcome == GH_GUARD_AWAIT;
    }
    const char *phase = allowed ? "Acting" : awaiting ? "AwaitingApproval" : "Pending";
    bool inserted = false;
    int rc = gh_audit_begin(ex->a, &err);
    if (!rc)
        rc = gh_audit_record_incident(ex->a, inc, t->mode, phase, ex->identity, ts, &inserted,
                                      &err);
    if (!rc && !inserted) {
        /* decided and recorded before (by a process since restarted) */
        gh_audit_rollback(ex->a);
        snprintf(rep->phase, sizeof rep->phase, "Duplicate");
        return;
    }
    if (!rc)
        rc = record_verdicts(ex, inc, t, ts, &err);
    if (!rc)
        rc = gh_audit_commit(ex->a, &err);
    else
        gh_audit_rollback(ex->a);
    if (rc) {
        /* no record, no action: the store is the precondition of acting */
        rep->store_failed = true;
        snprintf(rep->phase, sizeof rep->phase, "Failed");
        return;
    }
    run_pending(ex, inc, id, rep);
    decision_events(ex, inc, jstr(inc, "reason") ? jstr(inc, "reason") : "");
    finish_incident(ex, inc, t->mode, rep);
}

static void do_approved(struct gh_executor *ex, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    char mode[16] = "approval";
    json_t *inc = load_incident_json(ex, t->id, mode, sizeof mode);
    if (!inc) {
        snprintf(rep->phase, sizeof rep->phase, "Unknown");
        return;
    }
    snprintf(rep->node, sizeof rep->node, "%s", jstr(inc, "node") ? jstr(inc, "node") : "");
    struct gh_err err = {{0}};
    int rc = gh_audit_begin(ex->a, &err);
    if (!rc)
        rc = record_verdicts(ex, inc, t, now(ex), &err);
    if (!rc)
        rc = gh_audit_set_phase(ex->a, t->id, "Acting", &err);
    if (!rc)
        rc = gh_audit_commit(ex->a, &err);
    else
        gh_audit_rollback(ex->a);
    if (rc) {
        rep->store_failed = true;
        json_decref(inc);
        return;
    }
    run_pending(ex, inc, t->id, rep);
    finish_incident(ex, inc, mode, rep);
    json_decref(inc);
}

static void do_release(struct gh_executor *ex, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->node, sizeof rep->node, "%s", t->node);
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    struct gh_act_ctx x = {ex->c, ex->clock, t->id[0] ? t->id : "release"};
    struct gh_act_result res;
    struct gh_err err = {{0}};
    int64_t t0 = now(ex);
    gh_act_release_node(&x, t->node, &res, &err);
    int64_t t1 = now(ex);
    rep->n = 1;
    rep->acts[0].action = GH_ACT_NONE;
    snprintf(rep->acts[0].result, sizeof rep->acts[0].result, "%s", res.result);
    snprintf(rep->phase, sizeof rep->phase, "%s", res.result);
    if (t->id[0]) {
        char target[300];
        snprintf(target, sizeof target, "node/%s", t->node);
        struct gh_audit_guard g = {t->id, t0, "release_node", target, "none", "allowed",
                                   "validation passed; returning a node to service is never "
                                   "blocked"};
        struct gh_audit_action rec = {t->id, NULL, "release_node", target, t0, t1, res.result,
                                      res.http, res.api, res.detail};
        if (gh_audit_record_guard(ex->a, &g, &err) == GH_OK)
            (void)gh_audit_record_action(ex->a, &rec, &err);
    }
    char note[1024];
    snprintf(note, sizeof note, "validation passed: %s", res.detail);
    event(ex, "v1", "Node", NULL, t->node, "Normal", "NodeReturnedToService", "Uncordon", note);
}

static void do_replay(struct gh_executor *ex, struct gh_exec_report *rep)
{
    struct pending_list l = {0};
    struct gh_err err;
    (void)gh_audit_intents_pending(ex->a, collect_intent, &l, &err);
    /* one incident at a time, in the order their intents were written */
    for (size_t i = 0; i < l.n; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(l.v[k].incident_id, l.v[i].incident_id) == 0;
        if (seen)
            continue;
        char mode[16] = "act";
        json_t *inc = load_incident_json(ex, l.v[i].incident_id, mode, sizeof mode);
        if (!inc) {
            (void)gh_audit_intent_finish(ex->a, l.v[i].id, "cancelled", now(ex), &err);
            continue;
        }
        struct gh_exec_report r;
        memset(&r, 0, sizeof r);
        r.kind = GH_TASK_REPLAY;
        snprintf(r.id, sizeof r.id, "%s", l.v[i].incident_id);
        snprintf(r.node, sizeof r.node, "%s", jstr(inc, "node") ? jstr(inc, "node") : "");
        run_pending(ex, inc, l.v[i].incident_id, &r);
        finish_incident(ex, inc, mode, &r);
        json_decref(inc);
        report(ex, &r);
        rep->n++;
    }
    free_list(&l);
    snprintf(rep->phase, sizeof rep->phase, "Replayed");
}

static void *worker(void *arg)
{
    struct gh_executor *ex = arg;
    for (;;) {
        pthread_mutex_lock(&ex->mu);
        while (!ex->stop && ex->qn == 0)
            pthread_cond_wait(&ex->cv, &ex->mu);
        if (ex->stop) {
            pthread_mutex_unlock(&ex->mu);
            break;
        }
        struct gh_task t = ex->q[ex->qhead];
        ex->qhead = (ex->qhead + 1) % ex->qcap;
        ex->qn--;
        ex->busy = true;
        pthread_mutex_unlock(&ex->mu);

        struct gh_exec_report rep;
        memset(&rep, 0, sizeof rep);
        rep.kind = t.kind;
        rep.first_arrival_ns = t.first_arrival_ns;
        switch (t.kind) {
        case GH_TASK_DECISION: do_decision(ex, &t, &rep); break;
        case GH_TASK_APPROVED: do_approved(ex, &t, &rep); break;
        case GH_TASK_RELEASE: do_release(ex, &t, &rep); break;
        case GH_TASK_REPLAY: do_replay(ex, &rep); break;
        }
        json_decref(t.incident);
        report(ex, &rep);
        pthread_mutex_lock(&ex->mu);
        ex->busy = false;
        pthread_mutex_unlock(&ex->mu);
    }
    return NULL;
}

int gh_executor_new(const struct gh_executor_opts *o, struct gh_executor **out,
                    struct gh_err *err)
{
    *out = NULL;
    struct gh_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    ex->o = *o;
    ex->efd = -1;
    ex->clock = o->clock ? o->clock : gh_clock_real();
    ex->o.clock = ex->clock;
    snprintf(ex->identity, sizeof ex->identity, "%s", o->identity ? o->identity : "gpuheal");
    snprintf(ex->crash_after, sizeof ex->crash_after, "%s", o->crash_after ? o->crash_after : "");
    ex->o.identity = ex->identity;
    ex->o.crash_after = NULL;
    ex->o.kube = NULL;
    ex->o.db_url = NULL;
    ex->qcap = o->queue_cap ? o->queue_cap : QUEUE_DEFAULT;
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv, NULL);
    int rc = GH_OK;
    ex->q = calloc(ex->qcap, sizeof *ex->q);
    ex->rep = calloc(REPORTS_MAX, sizeof *ex->rep);
    if (!ex->q || !ex->rep) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    ex->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ex->efd < 0) {
        rc = gh_err_set(err, GH_EIO, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if ((rc = gh_audit_open(o->db_url, &ex->a, err)))
        goto fail;
    struct gh_kube_client_opts co = {.clock = ex->clock, .qps = o->qps, .user_agent =
                                     "gpuheal-controller/executor"};
    if ((rc = gh_kube_client_new(o->kube, &co, &ex->c, err)))
        goto fail;
    if (pthread_create(&ex->thread, NULL, worker, ex) != 0) {
        rc = gh_err_set(err, GH_EIO, "pthread_create failed");
        goto fail;
    }
    ex->started = true;
    *out = ex;
    return GH_OK;
fail:
    gh_executor_free(ex);
    return rc;
}

void gh_executor_free(struct gh_executor *ex)
{
    if (!ex)
        return;
    if (ex->started) {
        pthread_mutex_lock(&ex->mu);
        ex->stop = true;
        pthread_cond_signal(&ex->cv);
        pthread_mutex_unlock(&ex->mu);
        pthread_join(ex->thread, NULL);
    }
    for (size_t i = 0; ex->q && i < ex->qn; i++)
        json_decref(ex->q[(ex->qhead + i) % ex->qcap].incident);
    free(ex->q);
    free(ex->rep);
    if (ex->efd >= 0)
        close(ex->efd);
    gh_audit_close(ex->a);
    gh_kube_client_free(ex->c);
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    free(ex);
}

int gh_executor_fd(const struct gh_executor *ex) { return ex->efd; }

int gh_executor_submit(struct gh_executor *ex, struct gh_task *t, struct gh_err *err)
{
    pthread_mutex_lock(&ex->mu);
    if (ex->qn == ex->qcap) {
        pthread_mutex_unlock(&ex->mu);
        return gh_err_set(err, GH_ELIMIT, "executor queue full (%zu tasks)", ex->qcap);
    }
    ex->q[(ex->qhead + ex->qn) % ex->qcap] = *t;
    ex->qn++;
    t->incident = NULL;
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
    return GH_OK;
}

size_t gh_executor_poll(struct gh_executor *ex, struct gh_exec_report *out, size_t max)
{
    uint64_t v;
    ssize_t r = read(ex->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&ex->mu);
    size_t n = 0;
    while (n < max && ex->rn > 0) {
        out[n++] = ex->rep[ex->rhead];
        ex->rhead = (ex->rhead + 1) % REPORTS_MAX;
        ex->rn--;
    }
    bool more = ex->rn > 0;
    pthread_mutex_unlock(&ex->mu);
    if (more) {
        uint64_t one = 1;
        ssize_t w = write(ex->efd, &one, sizeof one);
        (void)w;
    }
    return n;
}

size_t gh_executor_depth(struct gh_executor *ex)
{
    pthread_mutex_lock(&ex->mu);
    size_t n = ex->qn + (ex->busy ? 1 : 0);
    pthread_mutex_unlock(&ex->mu);
    return n;
}
