/* executor.c - the controller's worker pool: record, intend, act, record,
 * publish; and the replay of intents a killed process left pending. Tasks
 * sharing a target are serialized; isolations go before slower actions.
 * The Incident object and the Events are published by executor_publish.c. */
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
#include "common/json.h"
#include "control/decision.h"
#include "control/executor_publish.h"
#include "control/drain_hold.h"
#include "control/job_inplace.h"
#include "control/job_kinds.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/ratelimit.h"

#define QUEUE_DEFAULT 4096
#define REPORTS_MAX 4096

#define WORKERS_DEFAULT 8
#define WORKERS_MAX 64
#define KEYS_MAX 3
#define KEY_MAX 320
#define SCAN_MAX 512 /* queued tasks looked at for one that may start */

/* A task in the executor, with the targets it touches. A stage of a task
 * runs only when no unfinished task submitted before it shares a target
 * with that stage: tasks sharing a target run one after the other, in
 * submission order. A barrier (an approval, whose targets are in the store;
 * a replay) shares every target. A decision that isolates first (split)
 * touches only its incident and node in stage 1, its job too in stage 2.
 * Owned by the queue, then by the in-flight list until its report is out. */
struct job {
    struct gh_task t;
    uint64_t seq;                 /* submission order */
    char keys[KEYS_MAX][KEY_MAX]; /* "inc/ID", "node/NAME", then "job/NS/NAME" */
    uint64_t kh[KEYS_MAX];        /* their hashes, compared first */
    int nkeys, nkeys1;            /* all; stage 1's (a split decision) */
    bool barrier;
    bool split;                /* a decision whose first allowed action isolates */
    bool rest;                 /* stage 1 done: the rest waits in the continuations */
    struct gh_exec_report rep; /* filled by both stages */
    struct job *next;          /* in-flight list */
    struct job *cnext;         /* continuations (FIFO) */
};

/* One worker thread with what is not shared: its Kubernetes client (a
 * client belongs to one thread) and its audit store connection. */
struct worker {
    struct gh_executor *ex; /* borrowed */
    struct gh_kube_client *c;
    struct gh_exec_pub pub; /* c, the clock, the identity: for publishing */
    struct gh_audit *a;
    pthread_t thread;
    bool started;
};

struct gh_executor {
    struct gh_executor_opts o;
    char identity[128];
    char crash_after[32];
    const struct gh_clock *clock;
    int efd;
    struct worker *w;
    size_t nw;
    struct gh_kube_ratelimit *limit; /* the --qps budget, shared by the workers' clients */
    atomic_int drain_inflight;       /* evictions in flight across the workers' drains */
    /* everything below under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* work may have become runnable; stop */
    pthread_cond_t stopcv; /* stop (for retry back-offs) */
    bool stop;
    struct job **q; /* ring, submission order */
    size_t qcap, qhead, qn;
    struct job *held;        /* in flight: running, or waiting for its stage 2 */
    size_t nheld;
    struct job *ch, *ct;     /* continuations, head and tail */
    uint64_t seq;            /* the last task's submission number */
    struct gh_exec_report *rep; /* ring */
    size_t rhead, rn;
};

static int64_t now(const struct worker *w) { return gh_clock_now(w->ex->clock); }

/* Whether this controller may record and act now (executor.h, may_act). */
static bool may_act(const struct worker *w)
{
    return !w->ex->o.may_act || w->ex->o.may_act(w->ex->o.may_act_ud);
}

/* ---- small helpers */

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

static void target_of(const struct gh_decision *d, enum gh_action a, char *buf, size_t cap)
{
    const char *node = d->node, *job = d->job;
    if (node_action(a) && node)
        snprintf(buf, cap, "node/%s", node);
    else if (job) {
        char ns[64], name[254];
        gh_exec_split_job(job, ns, sizeof ns, name, sizeof name);
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

static void report(struct worker *w, const struct gh_exec_report *r)
{
    pthread_mutex_lock(&w->ex->mu);
    if (w->ex->rn == REPORTS_MAX) { /* the loop is not reading: drop the oldest */
        json_decref(w->ex->rep[w->ex->rhead].incident);
        w->ex->rhead = (w->ex->rhead + 1) % REPORTS_MAX;
        w->ex->rn--;
    }
    w->ex->rep[(w->ex->rhead + w->ex->rn) % REPORTS_MAX] = *r;
    w->ex->rn++;
    pthread_mutex_unlock(&w->ex->mu);
    uint64_t one = 1;
    ssize_t wr = write(w->ex->efd, &one, sizeof one);
    (void)wr;
}

/* ---- actions */

struct run_ctx {
    const json_t *inc;           /* its object: what is recorded (the reason) */
    const struct gh_decision *d; /* read from inc */
    const char *id;
    int64_t first_issue;
};

/* A failure worth trying again: the API server unreachable (no HTTP
 * status), throttling or a server-side error (429, 5xx), as while the API
 * server or etcd restarts. Every action is idempotent, so a retry is safe. */
static bool transient_failure(const struct gh_act_result *res)
{
    return strcmp(res->result, "failed") == 0 &&
           (res->http == 0 || res->http == 429 || res->http >= 500);
}

/* Waits ms on the executor's condition variable; true when stopping. */
static bool wait_or_stop(struct worker *w, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->ex->mu);
    while (!w->ex->stop && pthread_cond_timedwait(&w->ex->stopcv, &w->ex->mu, &ts) == 0)
        ;
    bool stop = w->ex->stop;
    pthread_mutex_unlock(&w->ex->mu);
    return stop;
}

#define RETRY_ATTEMPTS 12 /* 0.25 s doubling to 5 s: about 40 s in all */
#define COMMIT_RETRY_FIRST_MS 100
#define COMMIT_RETRY_MAX_MS 5000

static void act_once(struct worker *w, struct run_ctx *rc, struct gh_audit_intent *it,
                     struct gh_act_result *res);

/* Runs one intent's action (retrying transient API failures, bounded);
 * records it and finishes the intent. */
static void run_intent(struct worker *w, struct run_ctx *rc, struct gh_audit_intent *it,
                       struct gh_act_result *res)
{
    enum gh_action a = (enum gh_action)gh_action_from_name(it->action);
    const char *node = rc->d->node, *job = rc->d->job;
    char ns[64], name[254];
    gh_exec_split_job(job, ns, sizeof ns, name, sizeof name);
    int64_t t0 = now(w);
    if (!rc->first_issue)
        rc->first_issue = t0;
    long backoff_ms = 250;
    for (int attempt = 1;; attempt++) {
        act_once(w, rc, it, res);
        if (!transient_failure(res) || attempt >= RETRY_ATTEMPTS || wait_or_stop(w, backoff_ms))
            break;
        backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
    }
    int64_t t1 = now(w);
    if (w->ex->crash_after[0] && strcmp(w->ex->crash_after, it->action) == 0)
        raise(SIGKILL); /* test hook: a crash after acting, before recording */
    struct gh_audit_action rec = {rc->id, it->id, it->action, it->target, t0, t1, res->result,
                                  res->http, res->api, res->detail};
    struct gh_err e2;
    (void)gh_audit_record_action(w->a, &rec, &e2);
    const char *state = strcmp(res->result, "failed") == 0 ? "failed" : "done";
    (void)gh_audit_intent_finish(w->a, it->id, state, t1, &e2);

    /* Events about the action */
    char note[1024];
    snprintf(note, sizeof note, "%s %s: %s (%s)", it->action, res->result, res->detail, rc->id);
    bool ok = strcmp(res->result, "failed") != 0;
    if (node && node_action(a))
        gh_exec_event(&w->pub, &gh_kube_res_nodes, NULL, node, ok ? "Normal" : "Warning",
                      ok ? "GPUHealAction" : "GPUHealActionFailed", it->action, note);
    if (job && (a == GH_ACT_RESTART_FROM_CHECKPOINT || a == GH_ACT_RETRY_IN_PLACE)) {
        /* the restart plan names what was restarted: a Job, a JobSet (also
         * for a JobSet's child Job) or a PyTorchJob */
        const struct gh_kube_res *res_of = &gh_kube_res_jobs;
        char pns[64], pname[254];
        snprintf(pns, sizeof pns, "%s", ns);
        snprintf(pname, sizeof pname, "%s", name);
        json_t *pl = a == GH_ACT_RESTART_FROM_CHECKPOINT && it->payload
                         ? json_loads(it->payload, 0, NULL)
                         : NULL;
        const struct gh_kube_res *r = gh_job_res_of_kind(gh_json_str(pl, "kind") ? gh_json_str(pl, "kind") : "");
        if (r && gh_json_str(pl, "namespace") && gh_json_str(pl, "name")) {
            res_of = r;
            snprintf(pns, sizeof pns, "%s", gh_json_str(pl, "namespace"));
            snprintf(pname, sizeof pname, "%s", gh_json_str(pl, "name"));
        }
        json_decref(pl);
        gh_exec_event(&w->pub, res_of, pns, pname, ok ? "Normal" : "Warning",
                      ok ? "GPUHealAction" : "GPUHealActionFailed", it->action, note);
    }
}

/* Whether the decision takes its node out of service: a node is
 * excluded, so the job's pods there cannot restart in place. */
static bool excludes_node(const struct gh_decision *d)
{
    for (int i = 0; i < d->n_actions; i++)
        if (d->actions[i] == GH_ACT_ISOLATE_NODE || d->actions[i] == GH_ACT_DRAIN_NODE ||
            d->actions[i] == GH_ACT_REPLACE_NODE)
            return true;
    return false;
}

struct plan_store {
    struct worker *w;
    struct gh_audit_intent *it;
    struct gh_err *err;
};

/* Stores the restart plan pl with the intent (gh_inplace_sent_fn), so that
 * a retry or a restarted controller resumes it. */
static int store_plan(void *ud, json_t *pl)
{
    struct plan_store *ps = ud;
    char *text = json_dumps(pl, JSON_COMPACT);
    int rc = text ? gh_audit_intent_set_payload(ps->w->a, ps->it->id, text, ps->err) : GH_ENOMEM;
    if (rc == GH_OK) {
        free(ps->it->payload);
        ps->it->payload = text;
    } else {
        free(text);
    }
    return rc;
}

/* One try of an intent's action into res. */
static void act_once(struct worker *w, struct run_ctx *rc, struct gh_audit_intent *it,
                     struct gh_act_result *res)
{
    const struct gh_decision *d = rc->d;
    enum gh_action a = (enum gh_action)gh_action_from_name(it->action);
    struct gh_act_ctx x = {w->c, w->ex->clock, rc->id, w->ex->o.taint_key};
    struct gh_err err = {{0}};
    const char *node = d->node, *job = d->job;
    char ns[64], name[254];
    gh_exec_split_job(job, ns, sizeof ns, name, sizeof name);
    memset(res, 0, sizeof *res);
    int g = d->gpu;
    if (node_action(a) && !node) {
        /* the guards never allow one (guard "no_node"); an intent left by
         * another build must not reach the API without a node either */
        gh_act_result_set(res, "skipped", "no node blamed: %s has no target", it->action);
        return;
    }
    switch (a) {
    case GH_ACT_ISOLATE_NODE:
        gh_act_isolate_node(&x, node, w->ex->o.no_execute_taint, res, &err);
        break;
    case GH_ACT_DRAIN_NODE: gh_act_drain_node(&x, node, &w->ex->o.drain, res, &err); break;
    case GH_ACT_RESET_GPU:
    case GH_ACT_REBOOT_NODE:
    case GH_ACT_RUN_DIAGNOSTICS:
        /* a GPU known only by its bus id (a kernel-log XID) is named by it */
        gh_act_request_node_op(&x, node, it->action, a == GH_ACT_RESET_GPU ? g : -1,
                               a == GH_ACT_RESET_GPU && g < 0 ? gh_exec_incident_pci(rc->inc)
                                                              : NULL,
                               res, &err);
        break;
    case GH_ACT_REPLACE_NODE:
        gh_act_replace_node(&x, node, gh_json_str(rc->inc, "reason"), res, &err);
        break;
    case GH_ACT_RETRY_IN_PLACE: {
        char buf[GH_DECISION_PODS_MAX][320];
        const char *pods[GH_DECISION_PODS_MAX];
        int np = 0;
        for (; np < d->n_pods; np++) {
            snprintf(buf[np], sizeof buf[np], "%s/%s", d->pods[np].ns, d->pods[np].name);
            pods[np] = buf[np];
        }
        /* in place first (job_inplace.h): the job's running pods restart
         * where they are; the failed ones are deleted as before */
        char why[400] = "";
        json_t *pl = it->payload ? json_loads(it->payload, 0, NULL) : NULL;
        if (job && !pl && w->ex->o.inplace_timeout_ns >= 0) {
            struct gh_act_result pr;
            if (gh_act_restart_prepare(&x, ns, name, NULL, 0, d->checkpoint_step,
                                       d->checkpoint_path, &pl, &pr, &err) != GH_OK)
                snprintf(why, sizeof why, "in_place not available: %.300s", pr.detail);
            else if (d->checkpoint_step < 0)
                json_object_set_new(pl, "resume_kept", json_true()); /* no checkpoint known */
        } else if (w->ex->o.inplace_timeout_ns < 0) {
            snprintf(why, sizeof why, "in-place restarts are off (--in-place-timeout)");
        }
        if (pl && !gh_json_str(pl, "fallback")) {
            struct gh_inplace_opts io = {.timeout_ns = w->ex->o.inplace_timeout_ns};
            struct gh_act_result ir;
            int irc = gh_act_restart_in_place(&x, pl, &io, store_plan,
                                              &(struct plan_store){w, it, &err}, &ir, why,
                                              sizeof why, &err);
            if (irc == GH_OK || (irc != GH_EUNSUPPORTED && irc != GH_ETIMEOUT)) {
                json_decref(pl);
                *res = ir;
                if (irc == GH_OK) { /* and the failed pods, for their controller */
                    struct gh_act_result fr;
                    gh_act_retry_in_place(&x, ns, name, pods, np, &fr, &err);
                    size_t used = strlen(res->detail);
                    if (strcmp(fr.result, "succeeded") == 0 && used < sizeof res->detail)
                        snprintf(res->detail + used, sizeof res->detail - used, "; %.200s",
                                 fr.detail);
                }
                break;
            }
            char fbtext[sizeof why + 64];
            snprintf(fbtext, sizeof fbtext, "%s %s: %s", GH_MODE_IN_PLACE,
                     irc == GH_ETIMEOUT ? "failed" : "not available", why);
            snprintf(why, sizeof why, "%.399s", fbtext);
            json_object_set_new(pl, "fallback", json_string(why));
            (void)store_plan(&(struct plan_store){w, it, &err}, pl);
        } else if (pl) {
            snprintf(why, sizeof why, "%.399s", gh_json_str(pl, "fallback"));
        }
        json_decref(pl);
        gh_act_retry_in_place(&x, job ? ns : NULL, job ? name : NULL, pods, np, res, &err);
        if (job && why[0]) {
            char detail[sizeof res->detail];
            snprintf(detail, sizeof detail, "mode %s (%.200s): %.280s", GH_MODE_DELETE_FAILED, why,
                     res->detail);
            memcpy(res->detail, detail, sizeof detail);
        }
        break;
    }
    case GH_ACT_RESTART_FROM_CHECKPOINT: {
        if (!job) {
            gh_act_result_set(res, "skipped", "no job to restart");
            break;
        }
        /* the ladder (job_inplace.h): in place when no node is excluded,
         * only the excluded node's pods replaced when the kind allows it,
         * the whole object recreated otherwise or when a faster rung is
         * not available or fails */
        bool excluded = node && excludes_node(d);
        json_t *pl = it->payload ? json_loads(it->payload, 0, NULL) : NULL;
        if (!pl) {
            const char *avoid[1] = {node};
            if (gh_act_restart_prepare(&x, ns, name, avoid, excluded ? 1 : 0, d->checkpoint_step,
                                       d->checkpoint_path, &pl, res, &err) != GH_OK)
                break;
            /* durable before anything changes: a crash from here on
             * resumes with the same replacement */
            if (store_plan(&(struct plan_store){w, it, &err}, pl) != GH_OK) {
                json_decref(pl);
                gh_act_result_set(res, "failed", "could not store the restart plan: %s", err.msg);
                break;
            }
        }
        char why[400] = "";
        const char *faster = excluded ? GH_MODE_REPLACE_LOST : GH_MODE_IN_PLACE;
        const char *fb = gh_json_str(pl, "fallback");
        if (fb) {
            snprintf(why, sizeof why, "%s", fb); /* decided before a restart of the controller */
        } else if (w->ex->o.inplace_timeout_ns < 0) {
            snprintf(why, sizeof why, "in-place restarts are off (--in-place-timeout)");
        } else {
            const char *lost[1] = {node};
            struct gh_inplace_opts io = {.timeout_ns = w->ex->o.inplace_timeout_ns,
                                         .lost_nodes = lost,
                                         .n_lost = excluded ? 1 : 0};
            int irc = gh_act_restart_in_place(&x, pl, &io, store_plan,
                                              &(struct plan_store){w, it, &err}, res, why,
                                              sizeof why, &err);
            if (irc == GH_OK || (irc != GH_EUNSUPPORTED && irc != GH_ETIMEOUT)) {
                json_decref(pl); /* done, or an API failure the caller retries */
                break;
            }
            /* down the ladder, remembered so that a retry does not try again */
            char fbtext[sizeof why + 64];
            snprintf(fbtext, sizeof fbtext, "%s %s: %s", faster,
                     irc == GH_ETIMEOUT ? "failed" : "not available", why);
            snprintf(why, sizeof why, "%.399s", fbtext);
            json_object_set_new(pl, "fallback", json_string(why));
            (void)store_plan(&(struct plan_store){w, it, &err}, pl);
        }
        gh_act_restart_execute(&x, pl, res, &err);
        json_decref(pl);
        char detail[sizeof res->detail];
        snprintf(detail, sizeof detail, "mode %s (%.200s): %.280s", GH_MODE_FULL_RECREATE, why,
                 res->detail);
        memcpy(res->detail, detail, sizeof detail);
        break;
    }
    default: gh_act_result_set(res, "skipped", "nothing to do"); break;
    }
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

/* Whether action row i of r is a request the agent answered later (a row
 * of the same action and target after it). */
static bool answered(const struct gh_audit_incident_rec *r, size_t i)
{
    const struct gh_audit_action_rec *x = &r->acts[i];
    if (!x->result || strcmp(x->result, "requested") != 0)
        return false;
    for (size_t k = i + 1; k < r->n_actions; k++)
        if (r->acts[k].action && x->action && !strcmp(r->acts[k].action, x->action) &&
            r->acts[k].target && x->target && !strcmp(r->acts[k].target, x->target) &&
            r->acts[k].result && strcmp(r->acts[k].result, "requested") != 0)
            return true;
    return false;
}

/* The whole recorded history of one incident: phase from its actions. */
static void finish_incident(struct worker *w, const json_t *inc, const struct gh_decision *d,
                            const char *mode, struct gh_exec_report *rep)
{
    const char *id = d->id;
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    struct gh_err err;
    json_t *acts = json_array();
    const char *phase = "Succeeded";
    bool any = false, pending = false, requested = false, unconfigured = false;
    char msg[1024] = "";
    size_t used = 0;
    if (gh_audit_query(w->a, &s, 0, 1, &recs, &n, &err) == GH_OK && n == 1) {
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
            json_array_append_new(acts, json_pack("{s:s, s:s, s:s}", "action", g->action, "result",
                                                  gh_exec_cr_result(g->verdict), "message",
                                                  g->detail ? g->detail : ""));
            if (!strcmp(g->verdict, "awaiting_approval"))
                pending = true;
        }
        for (size_t i = 0; i < recs[0].n_actions; i++) {
            const struct gh_audit_action_rec *x = &recs[0].acts[i];
            if (answered(&recs[0], i))
                continue; /* the agent's outcome, recorded after, stands for it */
            char t1[GH_RFC3339_MAX], t2[GH_RFC3339_MAX];
            gh_time_format_rfc3339(x->started_ns, t1, sizeof t1);
            gh_time_format_rfc3339(x->finished_ns, t2, sizeof t2);
            char m[1024];
            snprintf(m, sizeof m, "%s", x->detail ? x->detail : "");
            json_array_append_new(acts,
                                  json_pack("{s:s, s:s, s:s, s:s, s:s}", "action", x->action,
                                            "result", gh_exec_cr_result(x->result), "startTime", t1,
                                            "completionTime", t2, "message", m));
            any = true;
            if (x->result && !strcmp(gh_exec_cr_result(x->result), "Failed"))
                phase = "Failed";
            if (x->result && !strcmp(x->result, "not_configured"))
                unconfigured = true;
            if (x->result && !strcmp(x->result, "requested"))
                requested = true;
            if (used < sizeof msg) {
                int wn = snprintf(msg + used, sizeof msg - used, "%s%s %s", used ? "; " : "",
                                  x->action, x->result);
                used += wn > 0 ? (size_t)wn : 0;
            }
        }
    }
    gh_audit_recs_free(recs, n);
    /* what waits for a safe moment (impact.deferred): a follow-up runs it */
    size_t di;
    json_t *da;
    json_array_foreach(json_object_get(json_object_get(inc, "impact"), "deferred"), di, da)
    {
        if (!json_is_string(da))
            continue;
        json_array_append_new(acts, json_pack("{s:s, s:s, s:s}", "action", json_string_value(da),
                                              "result", "Waiting", "message",
                                              "waits for a safe moment (the GPU idle or the job "
                                              "ended): a follow-up incident runs it"));
        if (used < sizeof msg) {
            int wn = snprintf(msg + used, sizeof msg - used, "%s%s waits for a safe moment",
                              used ? "; " : "", json_string_value(da));
            used += wn > 0 ? (size_t)wn : 0;
        }
    }
    /* what did not run only because nobody configured it on the node (its
     * agent has no --reboot-cmd, --reset-gpu-cmd or --diagnostics-cmd):
     * not a failure of anything tried, and said so (docs/operations.md,
     * "Repair commands") */
    if (unconfigured && !strcmp(phase, "Succeeded"))
        phase = "NotConfigured";
    /* open intents: still acting */
    struct pending_list l = {.only = id};
    (void)gh_audit_intents_pending(w->a, collect_intent, &l, &err);
    if (l.n || requested)
        phase = "Acting"; /* an intent still open, or a request the agent has not answered */
    free_list(&l);
    if (!any && strcmp(phase, "Acting") != 0) {
        bool nothing = true;
        for (int i = 0; i < d->n_actions; i++)
            nothing = nothing && d->actions[i] == GH_ACT_NONE;
        phase = pending ? "AwaitingApproval" : nothing ? "Succeeded" : "Skipped";
        if (!used)
            snprintf(msg, sizeof msg, "%s", pending ? "waiting for approval (gpuheal approve ID)"
                                      : nothing    ? "nothing to do"
                                                   : "not acted: see the guards' verdicts");
    }
    (void)gh_audit_set_phase(w->a, id, phase, &err);
    gh_exec_publish_incident(&w->pub, inc, mode, phase, acts, msg, rep);
    json_decref(acts);
    if (rep)
        snprintf(rep->phase, sizeof rep->phase, "%s", phase);
}

/* Runs the pending intents of incident id in order. isolate_first: when
 * the first of them isolates the node, only the leading isolations run and
 * true is returned while others remain (stage 2 runs them), so that a
 * burst of incidents gets its nodes isolated before anything slower. */
static bool run_pending(struct worker *w, const json_t *inc, const struct gh_decision *d,
                        const char *id, struct gh_exec_report *rep, bool isolate_first)
{
    struct pending_list l = {.only = id};
    struct gh_err err;
    (void)gh_audit_intents_pending(w->a, collect_intent, &l, &err);
    struct run_ctx rc = {inc, d, id, 0};
    bool split = isolate_first && l.n > 0 &&
                 gh_action_from_name(l.v[0].action) == (int)GH_ACT_ISOLATE_NODE;
    bool rest = false;
    for (size_t i = 0; i < l.n; i++) {
        enum gh_action a = (enum gh_action)gh_action_from_name(l.v[i].action);
        if (split && a != GH_ACT_ISOLATE_NODE) {
            rest = true;
            break;
        }
        if (!may_act(w)) {
            /* leadership may have passed: the intents stay pending for
             * the leader (its replay, or its decision of the same id) */
            if (rep)
                rep->fenced = true;
            break;
        }
        struct gh_act_result res;
        run_intent(w, &rc, &l.v[i], &res);
        if (rep && rep->n < GH_TASK_MAX_ACTIONS) {
            rep->acts[rep->n].action = a;
            snprintf(rep->acts[rep->n].result, sizeof rep->acts[rep->n].result, "%s", res.result);
            rep->n++;
            if (node_action(a) && !strcmp(res.result, "failed"))
                rep->isolation_failed = true;
        }
    }
    if (rep && !rep->first_issue_ns)
        rep->first_issue_ns = rc.first_issue;
    free_list(&l);
    return rest;
}

/* Records guards and intents of the allowed actions in the current
 * transaction. */
static int record_verdicts(struct worker *w, const struct gh_decision *d, const struct gh_task *t,
                           int64_t ts, struct gh_err *err)
{
    const char *id = d->id;
    int rc = GH_OK;
    if (t->kind == GH_TASK_APPROVED) {
        struct gh_audit_guard g = {id, ts, NULL, NULL, "approval", "approved",
                                   t->approver[0] ? t->approver : "approved"};
        rc = gh_audit_record_guard(w->a, &g, err);
    }
    for (int i = 0; i < t->n && !rc; i++) {
        char target[GH_AUDIT_ID_MAX];
        target_of(d, t->v[i].action, target, sizeof target);
        struct gh_audit_guard g = {id,
                                   ts,
                                   gh_action_name(t->v[i].action),
                                   target,
                                   t->v[i].guard,
                                   verdict_name(t->v[i].outcome),
                                   t->v[i].detail};
        rc = gh_audit_record_guard(w->a, &g, err);
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
        rc = gh_audit_intent_begin(w->a, &it, NULL, err);
        gh_audit_intent_clear(&it);
    }
    return rc;
}

static json_t *load_incident_json(struct worker *w, const char *id, char *mode, size_t cap)
{
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    struct gh_err err;
    json_t *inc = NULL;
    if (gh_audit_query(w->a, &s, 0, 1, &recs, &n, &err) == GH_OK && n == 1 && recs[0].json) {
        inc = json_loads(recs[0].json, 0, NULL);
        if (mode)
            snprintf(mode, cap, "%s", recs[0].mode ? recs[0].mode : "act");
    }
    gh_audit_recs_free(recs, n);
    return inc;
}

/* Stage 2 of a decision: the remaining actions, the Events, the outcome. */
static void do_decision_rest(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    json_t *inc = t->incident;
    const char *id = t->d.id;
    (void)run_pending(w, inc, &t->d, id, rep, false);
    /* the Incident object first: its Event names it by uid */
    finish_incident(w, inc, &t->d, t->mode, rep);
    gh_exec_decision_events(&w->pub, &t->d, t->mode,
                            gh_json_str(inc, "reason") ? gh_json_str(inc, "reason") : "");
}

/* Pending intents of incident id in the store (0 when unreadable). */
static size_t pending_of(struct worker *w, const char *id)
{
    struct pending_list l = {.only = id};
    struct gh_err err;
    (void)gh_audit_intents_pending(w->a, collect_intent, &l, &err);
    size_t n = l.n;
    free_list(&l);
    return n;
}

/* A decision's record in one commit: the incident, its evidence, the
 * verdicts and an intent per allowed action. *dup: it was recorded before
 * (nothing written). An error leaves nothing. */
static int record_decision(struct worker *w, struct gh_task *t, bool *dup, struct gh_err *err)
{
    json_t *inc = t->incident;
    int64_t ts = now(w);
    bool allowed = false, awaiting = false;
    for (int i = 0; i < t->n; i++) {
        allowed = allowed || (t->v[i].outcome == GH_GUARD_ALLOW && t->v[i].action != GH_ACT_NONE);
        awaiting = awaiting || t->v[i].outcome == GH_GUARD_AWAIT;
    }
    const char *phase = allowed ? "Acting" : awaiting ? "AwaitingApproval" : "Pending";
    bool inserted = false, released = false;
    *dup = false;
    int rc = gh_audit_begin(w->a, err);
    if (!rc)
        rc = gh_audit_record_incident(w->a, inc, t->mode, phase, w->ex->identity, ts, &inserted,
                                      err);
    if (!rc && !inserted) /* a drain held for a checkpoint, recorded then */
        rc = gh_drain_hold_release(w->a, inc, ts, &released, err);
    if (!rc && !inserted && !released) {
        gh_audit_rollback(w->a);
        *dup = true;
        return GH_OK;
    }
    if (!rc)
        rc = record_verdicts(w, &t->d, t, ts, err);
    if (!rc)
        rc = gh_audit_commit(w->a, err);
    else
        gh_audit_rollback(w->a);
    return rc;
}

/* Stage 1: record, intend and, when split, only the leading isolations.
 * True when stage 2 is to follow. A record that fails to commit is tried
 * again (COMMIT_RETRY_FIRST_MS doubling to COMMIT_RETRY_MAX_MS), each
 * failure reported (retrying) to the loop, holding the decision's targets
 * so that what follows on them waits, in order; until it commits, the
 * executor stops, or this controller may no more act: then the incident
 * goes back to the loop (deferred) for whoever leads next, and the signal
 * journal still holds its evidence for a restart. */
static bool do_decision(struct worker *w, struct gh_task *t, bool split,
                        struct gh_exec_report *rep)
{
    json_t *inc = t->incident;
    const char *id = t->d.id;
    snprintf(rep->id, sizeof rep->id, "%s", id ? id : "");
    snprintf(rep->node, sizeof rep->node, "%s", t->d.node ? t->d.node : "");
    struct gh_err err = {{0}};
    bool dup = false;
    long backoff_ms = COMMIT_RETRY_FIRST_MS;
    for (int attempt = 1;; attempt++) {
        if (!may_act(w)) {
            rep->deferred = true;
            rep->incident = json_deep_copy(inc);
            snprintf(rep->phase, sizeof rep->phase, "NotLeader");
            return false;
        }
        int rc = record_decision(w, t, &dup, &err);
        if (rc == GH_OK)
            break;
        struct gh_exec_report r;
        memset(&r, 0, sizeof r);
        r.kind = t->kind;
        r.retrying = true;
        r.attempt = attempt;
        snprintf(r.id, sizeof r.id, "%s", rep->id);
        snprintf(r.node, sizeof r.node, "%s", rep->node);
        snprintf(r.phase, sizeof r.phase, "CommitRetry");
        snprintf(r.error, sizeof r.error, "%.299s", err.msg);
        report(w, &r);
        if (wait_or_stop(w, backoff_ms)) {
            /* no record, no action: the store is the precondition of acting */
            rep->store_failed = true;
            snprintf(rep->error, sizeof rep->error, "%.299s", err.msg);
            snprintf(rep->phase, sizeof rep->phase, "Failed");
            return false;
        }
        backoff_ms = backoff_ms * 2 > COMMIT_RETRY_MAX_MS ? COMMIT_RETRY_MAX_MS : backoff_ms * 2;
    }
    /* Recorded before: by another replica, or by an attempt of ours whose
     * commit was reported failed yet happened. Intents it left pending are
     * work undone (a leader that lost its lease stops before acting): the
     * leader does them; none pending, nothing to do. */
    if (dup && pending_of(w, id) == 0) {
        snprintf(rep->phase, sizeof rep->phase, "Duplicate");
        return false;
    }
    if (run_pending(w, inc, &t->d, id, rep, split))
        return true;
    /* the Incident object first: its Event names it by uid */
    finish_incident(w, inc, &t->d, t->mode, rep);
    gh_exec_decision_events(&w->pub, &t->d, t->mode,
                            gh_json_str(inc, "reason") ? gh_json_str(inc, "reason") : "");
    return false;
}

static void do_approved(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    char mode[16] = "approval";
    json_t *inc = load_incident_json(w, t->id, mode, sizeof mode);
    if (!inc) {
        snprintf(rep->phase, sizeof rep->phase, "Unknown");
        return;
    }
    struct gh_decision d; /* the stored record's (borrowed from inc) */
    gh_decision_read(&d, inc);
    snprintf(rep->node, sizeof rep->node, "%s", d.node ? d.node : "");
    struct gh_err err = {{0}};
    int rc = gh_audit_begin(w->a, &err);
    bool released = false;
    if (!rc && json_object_get(t->incident, "drain_wait")) {
        /* held for a checkpoint after the approval: released once */
        rc = gh_drain_hold_release(w->a, t->incident, now(w), &released, &err);
        if (!rc && !released) {
            gh_audit_rollback(w->a);
            snprintf(rep->phase, sizeof rep->phase, "Duplicate");
            json_decref(inc);
            return;
        }
        if (released) { /* the stored object now tells the wait */
            json_decref(inc);
            inc = json_incref(t->incident);
            d = t->d;
        }
    }
    if (!rc)
        rc = record_verdicts(w, &d, t, now(w), &err);
    if (!rc)
        rc = gh_audit_set_phase(w->a, t->id, "Acting", &err);
    if (!rc)
        rc = gh_audit_commit(w->a, &err);
    else
        gh_audit_rollback(w->a);
    if (rc) {
        rep->store_failed = true;
        json_decref(inc);
        return;
    }
    (void)run_pending(w, inc, &d, t->id, rep, false);
    finish_incident(w, inc, &d, mode, rep);
    json_decref(inc);
}

/* A drain held for a checkpoint: its record, before anything is done, so
 * that a restarted controller resumes it (drain_hold.h). */
static void do_hold(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    json_t *inc = t->incident;
    const char *id = t->d.id;
    snprintf(rep->id, sizeof rep->id, "%s", id ? id : t->id);
    snprintf(rep->node, sizeof rep->node, "%s", t->d.node ? t->d.node : "");
    bool decision = gh_json_str(t->hold, "task") && !strcmp(gh_json_str(t->hold, "task"), "decision");
    const char *mode = decision ? t->mode : "approval";
    struct gh_err err = {{0}};
    char detail[1024] = "";
    int64_t ts = now(w);
    bool inserted = true;
    int rc = gh_audit_begin(w->a, &err);
    if (!rc && decision)
        rc = gh_audit_record_incident(w->a, inc, mode, GH_PHASE_HELD, w->ex->identity, ts,
                                      &inserted, &err);
    if (!rc && !inserted) {
        gh_audit_rollback(w->a);
        snprintf(rep->phase, sizeof rep->phase, "Duplicate");
        return;
    }
    if (!rc)
        rc = gh_drain_hold_record(w->a, inc, t->hold, ts, detail, sizeof detail, &err);
    if (!rc)
        rc = gh_audit_commit(w->a, &err);
    else
        gh_audit_rollback(w->a);
    if (rc) {
        /* the hold lives on in memory; only a restart would lose it */
        snprintf(rep->warning, sizeof rep->warning, "drain hold %.63s not recorded: %.200s",
                 rep->id, err.msg);
        snprintf(rep->phase, sizeof rep->phase, "Held");
        return;
    }
    /* the Incident object's phases have no "held": Pending, and why */
    gh_exec_publish_incident(&w->pub, inc, mode, "Pending", NULL, detail, rep);
    snprintf(rep->phase, sizeof rep->phase, "%s", GH_PHASE_HELD);
}

static void do_release(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->node, sizeof rep->node, "%s", t->node);
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    struct gh_act_ctx x = {w->c, w->ex->clock, t->id[0] ? t->id : "release", w->ex->o.taint_key};
    struct gh_act_result res;
    struct gh_err err = {{0}};
    int64_t t0 = now(w);
    gh_act_release_node(&x, t->node, &res, &err);
    int64_t t1 = now(w);
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
        if (gh_audit_record_guard(w->a, &g, &err) == GH_OK)
            (void)gh_audit_record_action(w->a, &rec, &err);
    }
    char note[1024];
    snprintf(note, sizeof note, "validation passed: %s", res.detail);
    gh_exec_event(&w->pub, &gh_kube_res_nodes, NULL, t->node, "Normal", "NodeReturnedToService",
                  "Uncordon", note);
}

/* What the node agent answered to a request (or its silence past the
 * timeout): recorded once after the "requested" row, the Incident's phase
 * and status follow, an Event on the node says it. */
static void do_outcome(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    snprintf(rep->node, sizeof rep->node, "%s", t->node);
    const char *action = gh_action_name(t->req_action);
    char target[300];
    snprintf(target, sizeof target, "node/%s", t->node);
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", t->id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    struct gh_err err = {{0}};
    json_t *inc = NULL;
    char mode[16] = "act";
    bool asked = false, done = false;
    if (gh_audit_query(w->a, &s, 0, 1, &recs, &n, &err) == GH_OK && n == 1) {
        for (size_t i = 0; i < recs[0].n_actions; i++) {
            const struct gh_audit_action_rec *x = &recs[0].acts[i];
            if (!x->action || strcmp(x->action, action) != 0 || !x->target ||
                strcmp(x->target, target) != 0 || !x->result)
                continue;
            if (!strcmp(x->result, "requested"))
                asked = true, done = false;
            else if (asked)
                done = true;
        }
        if (recs[0].json)
            inc = json_loads(recs[0].json, 0, NULL);
        if (recs[0].mode)
            snprintf(mode, sizeof mode, "%s", recs[0].mode);
    }
    gh_audit_recs_free(recs, n);
    /* not this controller's request, or its outcome already recorded (a
     * restart lists the GPUNodeHealth again) */
    if (!inc || !asked || done) {
        json_decref(inc);
        snprintf(rep->phase, sizeof rep->phase, "Duplicate");
        return;
    }
    int64_t ts = now(w);
    struct gh_audit_action rec = {t->id, NULL, action, target, ts, ts, t->req_result, 0,
                                  "GPUNodeHealth", t->req_detail};
    (void)gh_audit_record_action(w->a, &rec, &err);
    rep->n = 1;
    rep->acts[0].action = t->req_action;
    snprintf(rep->acts[0].result, sizeof rep->acts[0].result, "%s", t->req_result);
    bool ok = !strcmp(t->req_result, "succeeded");
    char note[1024];
    snprintf(note, sizeof note, "%s %s: %s (%s)", action, t->req_result, t->req_detail, t->id);
    gh_exec_event(&w->pub, &gh_kube_res_nodes, NULL, t->node, ok ? "Normal" : "Warning",
                  ok ? "GPUHealAction" : "GPUHealActionFailed", action, note);
    struct gh_decision d; /* the stored record's (borrowed from inc) */
    gh_decision_read(&d, inc);
    finish_incident(w, inc, &d, mode, rep);
    json_decref(inc);
}

static void do_replay(struct worker *w, struct gh_exec_report *rep)
{
    struct pending_list l = {0};
    struct gh_err err;
    (void)gh_audit_intents_pending(w->a, collect_intent, &l, &err);
    /* one incident at a time, in the order their intents were written */
    for (size_t i = 0; i < l.n; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(l.v[k].incident_id, l.v[i].incident_id) == 0;
        if (seen)
            continue;
        char mode[16] = "act";
        json_t *inc = load_incident_json(w, l.v[i].incident_id, mode, sizeof mode);
        if (!inc) {
            (void)gh_audit_intent_finish(w->a, l.v[i].id, "cancelled", now(w), &err);
            continue;
        }
        struct gh_decision d; /* the stored record's (borrowed from inc) */
        gh_decision_read(&d, inc);
        struct gh_exec_report r;
        memset(&r, 0, sizeof r);
        r.kind = GH_TASK_REPLAY;
        snprintf(r.id, sizeof r.id, "%s", l.v[i].incident_id);
        snprintf(r.node, sizeof r.node, "%s", d.node ? d.node : "");
        (void)run_pending(w, inc, &d, l.v[i].incident_id, &r, false);
        finish_incident(w, inc, &d, mode, &r);
        json_decref(inc);
        report(w, &r);
        rep->n++;
    }
    free_list(&l);
    snprintf(rep->phase, sizeof rep->phase, "Replayed");
}

/* ---- the pool */

/* Whether unfinished task y (all its targets) is in the way of x's stage
 * with targets x->keys[0..nk). */
static bool in_way(const struct job *y, const struct job *x, int nk)
{
    if (y == x || y->seq > x->seq)
        return false;
    if (y->barrier || x->barrier)
        return true;
    for (int i = 0; i < y->nkeys; i++)
        for (int k = 0; k < nk; k++)
            if (y->kh[i] == x->kh[k] && !strcmp(y->keys[i], x->keys[k]))
                return true;
    return false;
}

static struct job *queued(const struct gh_executor *ex, size_t i)
{
    return ex->q[(ex->qhead + i) % ex->qcap];
}

/* Under mu: whether x's next stage may start now. */
static bool may_run(const struct gh_executor *ex, const struct job *x)
{
    int nk = x->split && !x->rest ? x->nkeys1 : x->nkeys;
    for (const struct job *h = ex->held; h; h = h->next)
        if (in_way(h, x, nk))
            return false;
    for (size_t k = 0; k < ex->qn; k++) {
        const struct job *y = queued(ex, k);
        if (y->seq > x->seq)
            break; /* the queue is in submission order */
        if (in_way(y, x, nk))
            return false;
    }
    return true;
}

/* Under mu: the next job to run, now in flight, or NULL. New tasks first
 * (their stage 1 isolates), then the continuations; the oldest that may
 * run. */
static struct job *pick(struct gh_executor *ex)
{
    for (size_t i = 0; i < ex->qn && i < SCAN_MAX; i++) {
        struct job *j = queued(ex, i);
        if (may_run(ex, j)) {
            for (size_t k = i; k + 1 < ex->qn; k++)
                ex->q[(ex->qhead + k) % ex->qcap] = ex->q[(ex->qhead + k + 1) % ex->qcap];
            ex->qn--;
            j->next = ex->held;
            ex->held = j;
            ex->nheld++;
            return j;
        }
        if (j->barrier)
            break; /* nothing passes a barrier */
    }
    size_t scanned = 0;
    for (struct job **p = &ex->ch; *p && scanned < SCAN_MAX; p = &(*p)->cnext, scanned++) {
        struct job *c = *p;
        if (!may_run(ex, c))
            continue;
        *p = c->cnext;
        if (ex->ct == c) { /* the tail: its predecessor is the new tail */
            ex->ct = NULL;
            for (struct job *t = ex->ch; t; t = t->cnext)
                ex->ct = t;
        }
        c->cnext = NULL;
        return c;
    }
    return NULL;
}

/* Under mu: j leaves the in-flight list. */
static void unhold(struct gh_executor *ex, struct job *j)
{
    for (struct job **p = &ex->held; *p; p = &(*p)->next) {
        if (*p == j) {
            *p = j->next;
            ex->nheld--;
            return;
        }
    }
}

/* Evidence that joined a decided incident: its rows, in one commit
 * (idempotent: a replay's second report of a signal changes nothing). A
 * failure is a warning: the journal keeps the signals, and the next start
 * reports them again. */
static void do_joined(struct worker *w, struct gh_task *t, struct gh_exec_report *rep)
{
    snprintf(rep->id, sizeof rep->id, "%s", t->id);
    struct gh_err err = {{0}};
    int rc = gh_audit_begin(w->a, &err);
    size_t i;
    json_t *ev;
    json_array_foreach(t->incident, i, ev)
    {
        if (rc)
            break;
        enum gh_audit_joined res;
        rc = gh_audit_record_joined(w->a, t->id, t->node[0] ? t->node : NULL, ev, t->joined_ns,
                                    &res, &err);
        rep->joined_stored += !rc && res == GH_AUDIT_JOINED_STORED;
        rep->joined_capped += !rc && res == GH_AUDIT_JOINED_CAPPED;
    }
    if (!rc)
        rc = gh_audit_commit(w->a, &err);
    else
        gh_audit_rollback(w->a);
    if (rc) {
        rep->joined_stored = 0;
        snprintf(rep->warning, sizeof rep->warning, "joined evidence of %.63s not recorded: %.200s",
                 t->id, err.msg);
    }
}

/* Runs one stage of j; true when its stage 2 is to follow. */
static bool run_job(struct worker *w, struct job *j)
{
    if (j->rest) {
        do_decision_rest(w, &j->t, &j->rep);
        return false;
    }
    switch (j->t.kind) {
    case GH_TASK_DECISION: return do_decision(w, &j->t, j->split, &j->rep);
    case GH_TASK_APPROVED: do_approved(w, &j->t, &j->rep); break;
    case GH_TASK_RELEASE: do_release(w, &j->t, &j->rep); break;
    case GH_TASK_REPLAY: do_replay(w, &j->rep); break;
    case GH_TASK_HOLD: do_hold(w, &j->t, &j->rep); break;
    case GH_TASK_OUTCOME: do_outcome(w, &j->t, &j->rep); break;
    case GH_TASK_JOINED: do_joined(w, &j->t, &j->rep); break;
    }
    return false;
}

static void job_free(struct job *j)
{
    if (j) {
        json_decref(j->t.incident);
        json_decref(j->t.hold);
        free(j);
    }
}

static void *worker(void *arg)
{
    struct worker *w = arg;
    struct gh_executor *ex = w->ex;
    for (;;) {
        pthread_mutex_lock(&ex->mu);
        struct job *j = NULL;
        while (!ex->stop && !(j = pick(ex)))
            pthread_cond_wait(&ex->cv, &ex->mu);
        pthread_mutex_unlock(&ex->mu);
        if (!j)
            break; /* stopping */
        bool more = run_job(w, j);
        if (!more)
            report(w, &j->rep); /* before its targets are free */
        pthread_mutex_lock(&ex->mu);
        if (more) {
            j->rest = true;
            if (ex->ct)
                ex->ct->cnext = j;
            else
                ex->ch = j;
            ex->ct = j;
        } else {
            unhold(ex, j);
        }
        pthread_cond_broadcast(&ex->cv);
        pthread_mutex_unlock(&ex->mu);
        if (!more)
            job_free(j);
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
    atomic_init(&ex->drain_inflight, 0);
    ex->o.drain.inflight = &ex->drain_inflight; /* --drain-evictions-in-flight across drains */
    snprintf(ex->identity, sizeof ex->identity, "%s", o->identity ? o->identity : "gpuheal");
    snprintf(ex->crash_after, sizeof ex->crash_after, "%s", o->crash_after ? o->crash_after : "");
    ex->o.identity = ex->identity;
    ex->o.crash_after = NULL;
    ex->o.kube = NULL;
    ex->o.db_url = NULL;
    ex->qcap = o->queue_cap ? o->queue_cap : QUEUE_DEFAULT;
    ex->nw = o->workers > 0 ? (size_t)o->workers : WORKERS_DEFAULT;
    if (ex->nw > WORKERS_MAX)
        ex->nw = WORKERS_MAX;
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv, NULL);
    pthread_cond_init(&ex->stopcv, NULL);
    int rc = GH_OK;
    ex->q = calloc(ex->qcap, sizeof *ex->q);
    ex->rep = calloc(REPORTS_MAX, sizeof *ex->rep);
    ex->w = calloc(ex->nw, sizeof *ex->w);
    if (!ex->q || !ex->rep || !ex->w) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    ex->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ex->efd < 0) {
        rc = gh_err_set(err, GH_EIO, "eventfd: %s", strerror(errno));
        goto fail;
    }
    /* the QPS budget is the executor's: one bucket that the workers'
     * clients share, so a lone incident may use all of it */
    double qps = o->qps > 0 ? o->qps : o->qps < 0 ? -1 : 50;
    if (qps > 0 && (rc = gh_kube_ratelimit_new(qps, 100, &ex->limit, err)))
        goto fail;
    struct gh_kube_client_opts co = {.clock = ex->clock,
                                     .qps = -1,
                                     .shared_limit = ex->limit,
                                     .user_agent = "gpuheal-controller/executor"};
    for (size_t i = 0; i < ex->nw; i++) {
        ex->w[i].ex = ex;
        if ((rc = gh_audit_open(o->db_url, &ex->w[i].a, err)))
            goto fail;
        if ((rc = gh_kube_client_new(o->kube, &co, &ex->w[i].c, err)))
            goto fail;
        ex->w[i].pub = (struct gh_exec_pub){ex->w[i].c, ex->clock, ex->identity};
    }
    for (size_t i = 0; i < ex->nw; i++) {
        if (pthread_create(&ex->w[i].thread, NULL, worker, &ex->w[i]) != 0) {
            rc = gh_err_set(err, GH_EIO, "pthread_create failed");
            goto fail;
        }
        ex->w[i].started = true;
    }
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
    pthread_mutex_lock(&ex->mu);
    ex->stop = true;
    pthread_cond_broadcast(&ex->cv);
    pthread_cond_broadcast(&ex->stopcv);
    pthread_mutex_unlock(&ex->mu);
    for (size_t i = 0; ex->w && i < ex->nw; i++)
        if (ex->w[i].started)
            pthread_join(ex->w[i].thread, NULL);
    /* what did not run keeps its intents in the store: replayed later */
    for (size_t i = 0; ex->q && i < ex->qn; i++)
        job_free(queued(ex, i));
    for (size_t i = 0; ex->rep && i < ex->rn; i++)
        json_decref(ex->rep[(ex->rhead + i) % REPORTS_MAX].incident);
    while (ex->held) {
        struct job *j = ex->held;
        ex->held = j->next;
        job_free(j);
    }
    for (size_t i = 0; ex->w && i < ex->nw; i++) {
        gh_audit_close(ex->w[i].a);
        gh_kube_client_free(ex->w[i].c);
    }
    gh_kube_ratelimit_free(ex->limit);
    free(ex->w);
    free(ex->q);
    free(ex->rep);
    if (ex->efd >= 0)
        close(ex->efd);
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    pthread_cond_destroy(&ex->stopcv);
    free(ex);
}

int gh_executor_fd(const struct gh_executor *ex) { return ex->efd; }

static uint64_t key_hash(const char *k)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    return h;
}

/* The targets a task touches; approvals (targets in the store) and replays
 * (every pending incident) are barriers. A decision whose first allowed
 * action isolates its node is split (see struct job). */
static void job_keys(struct job *j)
{
    const struct gh_task *t = &j->t;
    j->nkeys = 0;
    j->barrier = t->kind == GH_TASK_APPROVED || t->kind == GH_TASK_REPLAY;
    if (t->kind == GH_TASK_RELEASE)
        snprintf(j->keys[j->nkeys++], KEY_MAX, "node/%s", t->node);
    if (t->kind == GH_TASK_HOLD) /* before the release of the same incident */
        snprintf(j->keys[j->nkeys++], KEY_MAX, "inc/%.300s", t->id);
    if (t->kind == GH_TASK_JOINED) /* after the decision it joins */
        snprintf(j->keys[j->nkeys++], KEY_MAX, "inc/%.300s", t->id);
    if (t->kind == GH_TASK_OUTCOME) { /* after the decision that asked */
        snprintf(j->keys[j->nkeys++], KEY_MAX, "inc/%.300s", t->id);
        snprintf(j->keys[j->nkeys++], KEY_MAX, "node/%.300s", t->node);
    }
    if (t->kind == GH_TASK_DECISION) {
        const char *id = t->d.id, *node = t->d.node, *jb = t->d.job;
        snprintf(j->keys[j->nkeys++], KEY_MAX, "inc/%.300s", id ? id : t->id);
        if (node)
            snprintf(j->keys[j->nkeys++], KEY_MAX, "node/%.300s", node);
        j->nkeys1 = j->nkeys;
        if (jb) {
            char ns[64], name[254];
            gh_exec_split_job(jb, ns, sizeof ns, name, sizeof name);
            snprintf(j->keys[j->nkeys++], KEY_MAX, "job/%.63s/%.250s", ns, name);
        }
        for (int i = 0; i < t->n; i++) {
            if (t->v[i].outcome == GH_GUARD_ALLOW && t->v[i].action != GH_ACT_NONE) {
                j->split = node && t->v[i].action == GH_ACT_ISOLATE_NODE;
                break;
            }
        }
    }
    for (int i = 0; i < j->nkeys; i++)
        j->kh[i] = key_hash(j->keys[i]);
}

int gh_executor_submit(struct gh_executor *ex, struct gh_task *t, struct gh_err *err)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    j->t = *t;
    j->rep.kind = t->kind;
    j->rep.first_arrival_ns = t->first_arrival_ns;
    job_keys(j);
    pthread_mutex_lock(&ex->mu);
    if (ex->qn == ex->qcap) {
        pthread_mutex_unlock(&ex->mu);
        free(j);
        return gh_err_set(err, GH_ELIMIT, "executor queue full (%zu tasks)", ex->qcap);
    }
    j->seq = ++ex->seq;
    ex->q[(ex->qhead + ex->qn) % ex->qcap] = j;
    ex->qn++;
    t->incident = NULL;
    t->hold = NULL;
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
    size_t n = ex->qn + ex->nheld;
    pthread_mutex_unlock(&ex->mu);
    return n;
}
