/* controller.c - the controller's event loop: informers and ingest into the
 * engine, incidents through the guards to the executor, approvals, the
 * validation gate, leader election and metrics. */
#include "control/controller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "audit/audit.h"
#include "common/log.h"
#include "control/executor.h"
#include "control/kube_signals.h"
#include "control/metrics.h"
#include "engine/detector.h"
#include "engine/engine.h"
#include "engine/strmap.h"
#include "ingest/queue.h"
#include "ingest/server.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/leader.h"

#define KNOWN_MAX (1u << 20)
#define AWAIT_MAX 65536
#define SIGQUEUE_CAP 65536
#define POP_BATCH 256
#define METRICS_MAX (64 * 1024)
#define DEFERRED_MAX 4096

struct gh_controller {
    struct gh_controller_opts o;
    char identity[128];
    const struct gh_clock *clock;
    struct gh_kube_client *c;
    struct gh_engine *engine;
    struct gh_guard *guard;
    struct gh_ctl_metrics *metrics;
    struct gh_executor *ex;
    struct gh_sigqueue *queue;
    struct gh_ingest_server *ingest;
    struct gh_kube_leader *leader;
    struct gh_kube_informer *inf_nodes, *inf_pods, *inf_gnh, *inf_incidents, *inf_policies;
    bool leading;
    struct gh_strmap *known;    /* incident ids decided (here or before a restart) */
    struct gh_strmap *awaiting; /* id -> json_t* incident waiting for approval (NULL: done) */
    size_t n_awaiting;
    struct gh_strmap *released; /* "node@isolated-at" whose release was asked */
    struct {
        json_t *inc;
        int64_t first_arrival;
    } deferred[DEFERRED_MAX];     /* decided while standing by, oldest first */
    size_t n_deferred;
    int64_t last_tick;
    struct gh_guard_config base_guards;
};

void gh_controller_opts_default(struct gh_controller_opts *o)
{
    memset(o, 0, sizeof *o);
    o->listen = "0.0.0.0:8443";
    o->reorder_window_ns = -1;
    gh_guard_config_default(&o->guards);
    o->drain.grace_s = -1;
}

static int64_t now(const struct gh_controller *ctl) { return gh_clock_now(ctl->clock); }

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char *ann(const json_t *o, const char *k)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "annotations"), k));
}

/* ---- signals into the engine */

static void feed(struct gh_controller *ctl, struct gh_signal *s, const char *origin)
{
    struct gh_err err;
    int rc = gh_engine_ingest_steal(ctl->engine, s, now(ctl), &err);
    gh_signal_clear(s);
    if (rc == GH_OK)
        gh_ctl_metrics_signals(ctl->metrics, origin, 1);
    else if (rc != GH_EAGAIN)
        GH_LOG(GH_LOG_WARN, "event=signal_dropped origin=%s error=\"%s\"", origin, err.msg);
}

/* Returns how many signals were fed. */
static size_t drain_queue(struct gh_controller *ctl)
{
    struct gh_signal batch[POP_BATCH];
    size_t n, total = 0;
    while ((n = gh_sigqueue_pop(ctl->queue, batch, POP_BATCH)) > 0) {
        for (size_t i = 0; i < n; i++)
            feed(ctl, &batch[i], "ingest");
        total += n;
    }
    return total;
}

/* ---- incidents: guards, then the executor */

static void submit(struct gh_controller *ctl, struct gh_task *t)
{
    struct gh_err err;
    if (gh_executor_submit(ctl->ex, t, &err)) {
        GH_LOG(GH_LOG_ERROR, "event=task_refused id=%s error=\"%s\"", t->id, err.msg);
        json_decref(t->incident);
        t->incident = NULL;
    }
}

static void count_trips(struct gh_controller *ctl, const struct gh_guard_verdict *v, int n)
{
    gh_guard_count(ctl->guard, v, n);
    for (int i = 0; i < n; i++)
        if (v[i].outcome != GH_GUARD_ALLOW)
            gh_ctl_metrics_guard_trip(ctl->metrics, v[i].guard);
}

static bool blames_hardware(enum gh_class c)
{
    return c != GH_CLASS_APPLICATION && c != GH_CLASS_STRAGGLER && c != GH_CLASS_UNKNOWN;
}

/* Reads the actions of an incident object into acts (at most max). */
static int actions_of(const json_t *inc, enum gh_action *acts, int max)
{
    int n = 0;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(inc, "actions"), i, a) {
        int x = gh_action_from_name(json_string_value(a) ? json_string_value(a) : "");
        if (x >= 0 && n < max)
            acts[n++] = (enum gh_action)x;
    }
    return n;
}

/* An incident (spec section 3 object, stolen) the leader acts on: guards,
 * then the executor. */
static void decide(struct gh_controller *ctl, json_t *inc, int64_t first_arrival)
{
    int64_t t = now(ctl);
    const char *id = jstr(inc, "id"), *node = jstr(inc, "node");
    int cls = gh_class_from_name(jstr(inc, "class") ? jstr(inc, "class") : "");
    bool created = false;
    if (!id || gh_strmap_intern(ctl->known, id, &created, NULL) < 0 || !created) {
        GH_LOG(GH_LOG_DEBUG, "event=incident_known id=%s", id ? id : "-");
        json_decref(inc);
        return;
    }
    if (cls >= 0)
        gh_ctl_metrics_incident(ctl->metrics, (enum gh_class)cls);
    if (node && cls >= 0 && blames_hardware((enum gh_class)cls))
        gh_guard_note_blame(ctl->guard, node, t);
    struct gh_task task;
    memset(&task, 0, sizeof task);
    task.kind = GH_TASK_DECISION;
    snprintf(task.id, sizeof task.id, "%s", id);
    enum gh_action acts[GH_TASK_MAX_ACTIONS];
    task.n = actions_of(inc, acts, GH_TASK_MAX_ACTIONS);
    gh_guard_check(ctl->guard, acts, task.n, node, false, t, task.v);
    count_trips(ctl, task.v, task.n);
    gh_guard_commit(ctl->guard, task.v, task.n, node, t);
    const struct gh_guard_config *gc = gh_guard_config(ctl->guard);
    snprintf(task.mode, sizeof task.mode, "%s", gc->dry_run ? "dry_run" : gc->approval ? "approval"
                                                                                       : "act");
    task.first_arrival_ns = first_arrival;
    bool awaits = false;
    for (int i = 0; i < task.n; i++)
        awaits = awaits || task.v[i].outcome == GH_GUARD_AWAIT;
    if (awaits && ctl->n_awaiting < AWAIT_MAX) {
        long k = gh_strmap_intern(ctl->awaiting, id, NULL, NULL);
        if (k >= 0) {
            json_decref(gh_strmap_value(ctl->awaiting, (size_t)k));
            gh_strmap_set_value(ctl->awaiting, (size_t)k, json_incref(inc));
            ctl->n_awaiting++;
        }
    }
    GH_LOG(GH_LOG_INFO, "event=incident id=%s class=%s node=%s job=%s rule=%s mode=%s", id,
           jstr(inc, "class") ? jstr(inc, "class") : "-", node ? node : "-",
           jstr(inc, "job") ? jstr(inc, "job") : "-", jstr(inc, "rule") ? jstr(inc, "rule") : "-",
           task.mode);
    task.incident = inc;
    submit(ctl, &task);
}

static void on_incident(void *ud, const struct gh_incident *inc)
{
    struct gh_controller *ctl = ud;
    json_t *j = gh_incident_to_json(inc);
    if (!j) {
        GH_LOG(GH_LOG_ERROR, "event=incident_dropped id=%s error=\"out of memory\"", inc->id);
        return;
    }
    int64_t first = 0;
    for (size_t i = 0; i < inc->n_evidence; i++)
        if (inc->evidence[i]->arrival_ns && (!first || inc->evidence[i]->arrival_ns < first))
            first = inc->evidence[i]->arrival_ns;
    if (ctl->leading) {
        decide(ctl, j, first);
        return;
    }
    /* A standby keeps what it decided (agents may post to any replica) and
     * hands it over when it leads; the shared audit store drops what the
     * leader of the time already recorded (same incident id). */
    if (ctl->n_deferred == DEFERRED_MAX) {
        json_decref(ctl->deferred[0].inc);
        memmove(ctl->deferred, ctl->deferred + 1, (DEFERRED_MAX - 1) * sizeof ctl->deferred[0]);
        ctl->n_deferred--;
    }
    ctl->deferred[ctl->n_deferred].inc = j;
    ctl->deferred[ctl->n_deferred].first_arrival = first;
    ctl->n_deferred++;
    GH_LOG(GH_LOG_INFO, "event=incident_not_leader id=%s deferred=%zu", inc->id, ctl->n_deferred);
}

/* An incident waiting for approval got it: check the guards again (the
 * cluster changed meanwhile) and act. */
static void approve(struct gh_controller *ctl, const char *id, const char *by)
{
    long k = gh_strmap_find(ctl->awaiting, id);
    json_t *inc = k >= 0 ? gh_strmap_value(ctl->awaiting, (size_t)k) : NULL;
    if (!inc)
        return;
    gh_strmap_set_value(ctl->awaiting, (size_t)k, NULL);
    ctl->n_awaiting--;
    enum gh_action acts[GH_TASK_MAX_ACTIONS];
    int n = actions_of(inc, acts, GH_TASK_MAX_ACTIONS);
    struct gh_task task;
    memset(&task, 0, sizeof task);
    task.kind = GH_TASK_APPROVED;
    snprintf(task.id, sizeof task.id, "%s", id);
    snprintf(task.approver, sizeof task.approver, "approved by %s", by && *by ? by : "someone");
    task.n = n;
    int64_t t = now(ctl);
    const char *node = jstr(inc, "node");
    gh_guard_check(ctl->guard, acts, n, node, true, t, task.v);
    count_trips(ctl, task.v, task.n);
    gh_guard_commit(ctl->guard, task.v, task.n, node, t);
    json_decref(inc);
    GH_LOG(GH_LOG_INFO, "event=approved id=%s by=\"%s\"", id, by ? by : "");
    submit(ctl, &task);
}

/* ---- informers */

static void pod_topology(struct gh_controller *ctl, const json_t *pod)
{
    char job[320];
    const char *j = gh_kube_pod_job(pod, job, sizeof job);
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    if (!j || !node || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return;
    /* the engine's own topology: a job the informers show is declared, so
     * a fault on its node is the job's fault */
    struct gh_topology *topo = gh_ctx_topology(ctl->engine);
    long ji = gh_topology_find_job(topo, j);
    if (ji >= 0 && gh_topology_job_declared(topo, (size_t)ji) &&
        gh_topology_job_has_node(topo, (size_t)ji, node))
        return;
    const char *nodes[1] = {node};
    gh_topology_add_job(topo, j, nodes, 1, 0);
}

static void pod_change(void *ud, const json_t *old, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    size_t n = gh_kube_pod_signals(old, obj, now(ctl), s, GH_KUBE_SIGNALS_MAX);
    pod_topology(ctl, obj);
    for (size_t i = 0; i < n; i++)
        feed(ctl, &s[i], "kube");
}

static void pod_add(void *ud, const json_t *obj) { pod_change(ud, NULL, obj); }

struct same_job {
    const char *ns;
    size_t n;
};

static int count_same_ns(void *ud, const struct gh_kube_obj *o)
{
    struct same_job *s = ud;
    json_t *p = gh_kube_obj_json(o);
    const char *ns = p ? gh_kube_meta_namespace(p) : NULL;
    if (ns && s->ns && !strcmp(ns, s->ns))
        s->n++;
    json_decref(p);
    return GH_OK;
}

/* The last pod of a job is gone: the job has ended (or moved wholesale);
 * the engine forgets its placement. */
static void pod_delete(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    char job[320];
    const char *j = gh_kube_pod_job(obj, job, sizeof job);
    const char *slash = j ? strchr(j, '/') : NULL;
    if (!slash)
        return;
    struct same_job s = {gh_kube_meta_namespace(obj), 0};
    gh_kube_store_index_foreach(gh_kube_informer_store(ctl->inf_pods), "job", slash + 1,
                                count_same_ns, &s);
    if (s.n == 0)
        gh_engine_forget_job(ctl->engine, j);
}

static void pod_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old) /* resync replays carry nothing new */
        pod_change(ud, old, obj);
}

static bool held_by_gpuheal(const json_t *node)
{
    return ann(node, GH_ANN_CORDONED_BY) || ann(node, GH_ANN_TAINTED_BY);
}

static void count_nodes(struct gh_controller *ctl)
{
    const struct gh_kube_store *st = gh_kube_informer_store(ctl->inf_nodes);
    gh_guard_set_node_count(ctl->guard, gh_kube_store_count(st));
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_NODES_ISOLATED,
                         (double)gh_guard_isolated_count(ctl->guard));
}

static void check_release(struct gh_controller *ctl, const char *node_name);

static void node_change(void *ud, const json_t *old, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (!name)
        return;
    bool held = held_by_gpuheal(obj);
    if (held)
        gh_guard_set_isolated(ctl->guard, name, true);
    else if (!old || held_by_gpuheal(old))
        gh_guard_set_isolated(ctl->guard, name, false);
    count_nodes(ctl);
    struct gh_signal s[1];
    if (gh_kube_node_signals(old, obj, now(ctl), s, 1) == 1)
        feed(ctl, &s[0], "kube");
    if (held)
        check_release(ctl, name);
}

static void node_add(void *ud, const json_t *obj) { node_change(ud, NULL, obj); }

static void node_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old)
        node_change(ud, old, obj);
}

static void node_delete(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (name)
        gh_guard_set_isolated(ctl->guard, name, false);
    count_nodes(ctl);
}

/* The validation gate: a node gpuheal holds returns to service once its
 * GPUNodeHealth says Validated=True after the isolation. */
static void check_release(struct gh_controller *ctl, const char *node_name)
{
    if (!ctl->leading)
        return;
    const struct gh_kube_obj *no =
        gh_kube_store_get(gh_kube_informer_store(ctl->inf_nodes), NULL, node_name);
    const struct gh_kube_obj *go =
        gh_kube_store_get(gh_kube_informer_store(ctl->inf_gnh), NULL, node_name);
    if (!no || !go)
        return;
    json_t *node = gh_kube_obj_json(no), *gnh = gh_kube_obj_json(go);
    const char *at = node ? ann(node, GH_ANN_ISOLATED_AT) : NULL;
    int64_t since = 0;
    if (node && gnh && held_by_gpuheal(node) && at &&
        gh_time_parse_rfc3339(at, strlen(at), &since) && gh_act_validation_passed(gnh, since)) {
        char key[400];
        snprintf(key, sizeof key, "%s@%s", node_name, at);
        bool created = false;
        if (gh_strmap_intern(ctl->released, key, &created, NULL) >= 0 && created) {
            struct gh_task t;
            memset(&t, 0, sizeof t);
            t.kind = GH_TASK_RELEASE;
            snprintf(t.node, sizeof t.node, "%s", node_name);
            const char *by = ann(node, GH_ANN_CORDONED_BY);
            if (!by)
                by = ann(node, GH_ANN_TAINTED_BY);
            snprintf(t.id, sizeof t.id, "%s", by ? by : "");
            GH_LOG(GH_LOG_INFO, "event=validation_passed node=%s incident=%s", node_name, t.id);
            submit(ctl, &t);
        }
    }
    json_decref(node);
    json_decref(gnh);
}

static void gnh_change(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (name)
        check_release(ctl, name);
}

static void gnh_update(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    gnh_change(ud, obj);
}

static void incident_change(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *id = gh_kube_meta_name(obj);
    const char *ok = ann(obj, GH_ANN_APPROVED);
    if (id && ok && !strcmp(ok, "true") && ctl->leading)
        approve(ctl, id, ann(obj, "gpuheal.io/approved-by"));
}

static void incident_update(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    incident_change(ud, obj);
}

/* RecoveryPolicy objects tighten the base guards: dry run and approval
 * when any policy asks, the smallest budgets any policy sets. */
static int apply_policy(void *ud, const struct gh_kube_obj *o)
{
    struct gh_guard_config *g = ud;
    json_t *p = gh_kube_obj_json(o);
    json_t *spec = json_object_get(p, "spec");
    if (json_is_true(json_object_get(spec, "dryRun")))
        g->dry_run = true;
    json_t *b = json_object_get(spec, "budgets");
    json_t *mu = json_object_get(b, "maxUnavailableNodes");
    if (json_is_integer(mu) && json_integer_value(mu) >= 0 &&
        (g->max_isolated == 0 || json_integer_value(mu) < g->max_isolated))
        g->max_isolated = (int)json_integer_value(mu);
    if (json_is_string(mu)) {
        double pct = strtod(json_string_value(mu), NULL);
        if (pct > 0 && (g->max_isolated_pct == 0 || pct < g->max_isolated_pct))
            g->max_isolated_pct = pct;
    }
    json_t *rate = json_object_get(b, "maxActionsPerHour");
    if (json_is_integer(rate) && json_integer_value(rate) > 0 &&
        (g->max_actions_per_hour == 0 || json_integer_value(rate) < g->max_actions_per_hour))
        g->max_actions_per_hour = (int)json_integer_value(rate);
    const char *cd = jstr(b, "nodeCooldown");
    int64_t cdn;
    if (cd && gh_policy_parse_duration(cd, &cdn) && cdn > g->node_cooldown_ns)
        g->node_cooldown_ns = cdn;
    if (json_is_true(json_object_get(b, "requireApproval")))
        g->approval = true;
    json_decref(p);
    return GH_OK;
}

static void policies_changed(struct gh_controller *ctl)
{
    struct gh_guard_config g = ctl->base_guards;
    gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_policies), apply_policy, &g);
    gh_guard_set_config(ctl->guard, &g);
    GH_LOG(GH_LOG_INFO,
           "event=guards dry_run=%d approval=%d max_isolated=%d max_isolated_pct=%g "
           "max_actions_per_hour=%d cooldown_s=%.0f",
           g.dry_run, g.approval, g.max_isolated, g.max_isolated_pct, g.max_actions_per_hour,
           (double)g.node_cooldown_ns / 1e9);
}

static void policy_add(void *ud, const json_t *obj)
{
    (void)obj;
    policies_changed(ud);
}
static void policy_update(void *ud, const json_t *old, const json_t *obj)
{
    (void)obj;
    if (old)
        policies_changed(ud);
}
static void policy_synced(void *ud) { policies_changed(ud); }

static void inf_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    (void)ud;
    (void)st;
    GH_LOG(GH_LOG_WARN, "event=informer_error rc=%s error=\"%s\"", gh_rc_str(rc), msg ? msg : "");
}

/* Pods by job name (the namespace is compared by the caller). */
static const struct gh_kube_index_spec pod_indexes[] = {
    {"job",
     {"/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name",
      "/metadata/labels/jobset.sigs.k8s.io~1jobset-name",
      "/metadata/labels/training.kubeflow.org~1job-name"}},
};

static int start_informer(struct gh_controller *ctl, const struct gh_kube_res *res, const char *ns,
                          const char *sel, const char *const *keep, size_t nkeep,
                          const struct gh_kube_handlers *h, struct gh_kube_informer **out,
                          struct gh_err *err)
{
    bool pods = res == &gh_kube_res_pods;
    struct gh_kube_informer_opts o = {.res = res,
                                      .ns = ns,
                                      .label_selector = sel,
                                      .keep = keep,
                                      .nkeep = nkeep,
                                      .indexes = pods ? pod_indexes : NULL,
                                      .nindexes = pods ? 1 : 0};
    int rc = gh_kube_informer_new(ctl->c, &o, h, ctl, out, err);
    if (!rc)
        rc = gh_kube_informer_start(*out, err);
    return rc;
}

/* ---- leadership */

static void lead(struct gh_controller *ctl)
{
    ctl->leading = true;
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_LEADER, 1);
    struct gh_task t;
    memset(&t, 0, sizeof t);
    t.kind = GH_TASK_REPLAY;
    submit(ctl, &t);
    for (size_t i = 0; i < ctl->n_deferred; i++)
        decide(ctl, ctl->deferred[i].inc, ctl->deferred[i].first_arrival);
    ctl->n_deferred = 0;
}

static void leader_started(void *ud)
{
    GH_LOG(GH_LOG_INFO, "event=leading");
    lead(ud);
}

static void leader_stopped(void *ud)
{
    struct gh_controller *ctl = ud;
    ctl->leading = false;
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_LEADER, 0);
    GH_LOG(GH_LOG_WARN, "event=not_leading");
}

static void new_leader(void *ud, const char *id)
{
    (void)ud;
    GH_LOG(GH_LOG_INFO, "event=leader_observed holder=%s", id && *id ? id : "-");
}

/* ---- executor reports */

static void reports(struct gh_controller *ctl)
{
    struct gh_exec_report r[32];
    size_t n;
    while ((n = gh_executor_poll(ctl->ex, r, 32)) > 0) {
        for (size_t i = 0; i < n; i++) {
            for (int k = 0; k < r[i].n; k++)
                gh_ctl_metrics_action(ctl->metrics,
                                      r[i].kind == GH_TASK_RELEASE ? -1 : (int)r[i].acts[k].action,
                                      r[i].acts[k].result);
            if (r[i].first_issue_ns && r[i].first_arrival_ns &&
                r[i].first_issue_ns >= r[i].first_arrival_ns)
                gh_ctl_metrics_latency(ctl->metrics,
                                       (double)(r[i].first_issue_ns - r[i].first_arrival_ns) / 1e9);
            bool nothing_done = r[i].store_failed || !strcmp(r[i].phase, "Duplicate");
            if ((r[i].isolation_failed || nothing_done) && r[i].node[0]) {
                /* give back the budget reserved at decision time, unless
                 * the node is in fact held (the informers say) */
                const struct gh_kube_obj *no =
                    gh_kube_store_get(gh_kube_informer_store(ctl->inf_nodes), NULL, r[i].node);
                json_t *node = no ? gh_kube_obj_json(no) : NULL;
                gh_guard_set_isolated(ctl->guard, r[i].node, node && held_by_gpuheal(node));
                json_decref(node);
            }
            if (r[i].warning[0])
                GH_LOG(GH_LOG_WARN, "event=publish_failed id=%s error=\"%s\"", r[i].id,
                       r[i].warning);
            if (r[i].kind != GH_TASK_REPLAY || r[i].id[0])
                GH_LOG(GH_LOG_INFO, "event=task_done kind=%d id=%s node=%s phase=%s actions=%d%s",
                       (int)r[i].kind, r[i].id[0] ? r[i].id : "-", r[i].node[0] ? r[i].node : "-",
                       r[i].phase, r[i].n, r[i].store_failed ? " store_failed=1" : "");
        }
    }
}

/* ---- lifecycle */

static size_t metrics_text(void *ud, char *buf, size_t cap)
{
    struct gh_controller *ctl = ud;
    return gh_ctl_metrics_write(ctl->metrics, buf, cap);
}

struct load_ctx {
    struct gh_controller *ctl;
    struct gh_audit *a;
};

static int load_known(void *ud, const char *id, const char *phase)
{
    struct load_ctx *l = ud;
    struct gh_controller *ctl = l->ctl;
    if (gh_strmap_intern(ctl->known, id, NULL, NULL) < 0)
        return GH_OK;
    if (strcmp(phase, "AwaitingApproval") != 0 || ctl->n_awaiting >= AWAIT_MAX)
        return GH_OK;
    /* waiting for approval before the restart: wait on */
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 0;
    if (gh_audit_query(l->a, &s, 0, 1, &recs, &n, NULL) == GH_OK && n == 1 && recs[0].json) {
        json_t *inc = json_loads(recs[0].json, 0, NULL);
        long k = inc ? gh_strmap_intern(ctl->awaiting, id, NULL, NULL) : -1;
        if (k >= 0) {
            gh_strmap_set_value(ctl->awaiting, (size_t)k, inc);
            ctl->n_awaiting++;
        } else {
            json_decref(inc);
        }
    }
    gh_audit_recs_free(recs, n);
    return GH_OK;
}

int gh_controller_new(const struct gh_controller_opts *o, struct gh_controller **out,
                      struct gh_err *err)
{
    *out = NULL;
    if (!o->kube || !o->db_url || !o->listen)
        return gh_err_set(err, GH_EINVAL, "controller: kube config, --db and --listen are needed");
    if (!o->token_file && !o->allow_anonymous)
        return gh_err_set(err, GH_EINVAL, "controller: --token-file is needed");
    struct gh_controller *ctl = calloc(1, sizeof *ctl);
    if (!ctl)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    ctl->o = *o;
    ctl->clock = o->clock ? o->clock : gh_clock_real();
    if (o->identity && *o->identity) {
        snprintf(ctl->identity, sizeof ctl->identity, "%s", o->identity);
    } else {
        char host[64] = "gpuheal";
        gethostname(host, sizeof host - 1);
        snprintf(ctl->identity, sizeof ctl->identity, "%s-%d", host, (int)getpid());
    }
    ctl->o.identity = ctl->identity;
    ctl->base_guards = o->guards;
    int rc = GH_OK;
    ctl->known = gh_strmap_new(KNOWN_MAX);
    ctl->awaiting = gh_strmap_new(AWAIT_MAX);
    ctl->released = gh_strmap_new(AWAIT_MAX);
    ctl->metrics = gh_ctl_metrics_new();
    ctl->guard = gh_guard_new(&o->guards);
    ctl->queue = gh_sigqueue_new(SIGQUEUE_CAP);
    if (!ctl->known || !ctl->awaiting || !ctl->released || !ctl->metrics || !ctl->guard ||
        !ctl->queue) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    /* what was decided before this process: never decide it again */
    struct gh_audit *a = NULL;
    if ((rc = gh_audit_open(o->db_url, &a, err)))
        goto fail;
    int64_t back = o->remember_ns > 0 ? o->remember_ns : 7 * 24 * 3600 * GH_NS_PER_S;
    struct load_ctx lc = {ctl, a};
    rc = gh_audit_incident_ids(a, now(ctl) - back, load_known, &lc, err);
    gh_audit_close(a);
    if (rc)
        goto fail;

    struct gh_kube_client_opts co = {.clock = ctl->clock, .qps = o->qps,
                                     .user_agent = "gpuheal-controller"};
    if ((rc = gh_kube_client_new(o->kube, &co, &ctl->c, err)))
        goto fail;
    struct gh_engine_config ec;
    gh_engine_config_default(&ec);
    ec.reorder_window_ns = o->reorder_window_ns;
    ctl->engine = gh_engine_new(o->policy, NULL, ctl->clock, &ec, on_incident, ctl, err);
    if (!ctl->engine) {
        rc = GH_EINVAL;
        goto fail;
    }
    struct gh_executor_opts xo = {.kube = o->kube,
                                  .db_url = o->db_url,
                                  .clock = ctl->clock,
                                  .identity = ctl->identity,
                                  .no_execute_taint = o->no_execute_taint,
                                  .drain = o->drain,
                                  .crash_after = o->crash_after,
                                  .qps = o->qps};
    if ((rc = gh_executor_new(&xo, &ctl->ex, err)))
        goto fail;
    struct gh_ingest_server_opts io = {.listen = o->listen,
                                       .token_file = o->token_file,
                                       .allow_anonymous = o->allow_anonymous && !o->token_file,
                                       .tls_cert = o->tls_cert,
                                       .tls_key = o->tls_key,
                                       .sink = gh_ingest_queue_sink,
                                       .sink_ctx = ctl->queue,
                                       .extra_metrics = metrics_text,
                                       .metrics_ctx = ctl};
    if ((rc = gh_ingest_server_new(&io, &ctl->ingest, err)))
        goto fail;
    *out = ctl;
    return GH_OK;
fail:
    gh_controller_free(ctl);
    return rc;
}

int gh_controller_port(const struct gh_controller *ctl)
{
    return ctl->ingest ? gh_ingest_server_port(ctl->ingest) : 0;
}

static const char *const node_keep[] = {"/metadata/labels", "/metadata/annotations",
                                        "/spec/unschedulable", "/spec/taints",
                                        "/status/conditions"};
static const char *const pod_keep[] = {"/metadata/labels", "/spec/nodeName", "/status/phase",
                                       "/status/reason", "/status/message", "/status/startTime",
                                       "/status/containerStatuses"};
static const char *const gnh_keep[] = {"/metadata/annotations", "/status/conditions",
                                       "/status/lastAction"};
static const char *const incident_keep[] = {"/metadata/annotations", "/status/phase"};
static const char *const policy_keep[] = {"/spec/dryRun", "/spec/budgets", "/spec/priority"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

int gh_controller_run(struct gh_controller *ctl, int stop_fd, struct gh_err *err)
{
    int rc;
    struct gh_kube_handlers hn = {node_add, node_update, node_delete, NULL, inf_error};
    struct gh_kube_handlers hp = {pod_add, pod_update, pod_delete, NULL, inf_error};
    struct gh_kube_handlers hg = {gnh_change, gnh_update, NULL, NULL, inf_error};
    struct gh_kube_handlers hi = {incident_change, incident_update, NULL, NULL, inf_error};
    struct gh_kube_handlers hpol = {policy_add, policy_update, policy_add, policy_synced,
                                    inf_error};
    /* policy_add doubles as the delete handler: any change recomputes */
    if ((rc = start_informer(ctl, &gh_kube_res_nodes, NULL, ctl->o.node_selector, node_keep,
                             N(node_keep), &hn, &ctl->inf_nodes, err)) ||
        (rc = start_informer(ctl, &gh_kube_res_pods, ctl->o.watch_namespace, NULL, pod_keep,
                             N(pod_keep), &hp, &ctl->inf_pods, err)) ||
        (rc = start_informer(ctl, &gh_kube_res_gpunodehealths, NULL, NULL, gnh_keep, N(gnh_keep),
                             &hg, &ctl->inf_gnh, err)) ||
        (rc = start_informer(ctl, &gh_kube_res_incidents, NULL, NULL, incident_keep,
                             N(incident_keep), &hi, &ctl->inf_incidents, err)) ||
        (rc = start_informer(ctl, &gh_kube_res_recoverypolicies, NULL, NULL, policy_keep,
                             N(policy_keep), &hpol, &ctl->inf_policies, err)))
        return gh_err_prefix(err, rc, "informers");
    if (ctl->o.no_leader_election) {
        lead(ctl);
    } else {
        struct gh_kube_leader_opts lo = {
            .ns = ctl->o.lease_namespace ? ctl->o.lease_namespace : "gpuheal-system",
            .name = ctl->o.lease_name ? ctl->o.lease_name : "gpuheal-controller",
            .identity = ctl->identity,
            .lease_ns = ctl->o.lease_ns,
            .renew_deadline_ns = ctl->o.renew_ns,
            .retry_ns = ctl->o.retry_ns};
        struct gh_kube_leader_cbs cbs = {leader_started, leader_stopped, new_leader};
        if ((rc = gh_kube_leader_new(ctl->c, &lo, &cbs, ctl, &ctl->leader, err)) ||
            (rc = gh_kube_leader_start(ctl->leader, err)))
            return gh_err_prefix(err, rc, "leader election");
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return gh_err_set(err, GH_EIO, "epoll: %s", strerror(errno));
    int fds[] = {gh_kube_client_fd(ctl->c), gh_sigqueue_fd(ctl->queue), gh_executor_fd(ctl->ex),
                 stop_fd};
    for (size_t i = 0; i < N(fds); i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (fds[i] >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            close(ep);
            return gh_err_set(err, GH_EIO, "epoll_ctl: %s", strerror(errno));
        }
    }
    int64_t tick = ctl->o.tick_ns > 0 ? ctl->o.tick_ns : 20 * GH_NS_PER_MS;
    GH_LOG(GH_LOG_INFO, "event=started identity=%s port=%d db=%s", ctl->identity,
           gh_controller_port(ctl), strncmp(ctl->o.db_url, "postgres", 8) ? "sqlite" : "postgres");
    bool stop = false;
    rc = GH_OK;
    while (!stop) {
        struct epoll_event evs[8];
        /* until the engine has something to do (a signal leaving the
         * reorder window, a detector deadline), at most one tick */
        int64_t wait_ns = tick, due = gh_engine_next_deadline(ctl->engine);
        if (due == INT64_MIN)
            wait_ns = 0;
        else if (due != INT64_MAX && due - now(ctl) < wait_ns)
            wait_ns = due - now(ctl) > 0 ? due - now(ctl) : 0;
        int wait = (int)((wait_ns + GH_NS_PER_MS - 1) / GH_NS_PER_MS);
        int n = epoll_wait(ep, evs, 8, wait);
        if (n < 0 && errno != EINTR) {
            rc = gh_err_set(err, GH_EIO, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++)
            if (evs[i].data.fd == stop_fd)
                stop = true;
        struct gh_err kerr;
        if (gh_kube_client_run(ctl->c, 0, &kerr))
            GH_LOG(GH_LOG_WARN, "event=client_error error=\"%s\"", kerr.msg);
        size_t fed = drain_queue(ctl);
        int64_t t = now(ctl);
        /* at once after new signals (a zero reorder window decides now),
         * else every tick */
        int64_t next = gh_engine_next_deadline(ctl->engine);
        if (fed || t - ctl->last_tick >= tick || (next != INT64_MAX && next <= t)) {
            gh_engine_tick(ctl->engine, t);
            ctl->last_tick = t;
        }
        reports(ctl);
        struct gh_sigqueue_stats qs;
        gh_sigqueue_stats(ctl->queue, &qs);
        struct gh_engine_stats es;
        gh_engine_stats(ctl->engine, &es);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_SIGNAL_QUEUE, (double)qs.depth);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_EXECUTOR_QUEUE,
                             (double)gh_executor_depth(ctl->ex));
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_AWAITING_APPROVAL, (double)ctl->n_awaiting);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_ENGINE_PENDING,
                             (double)es.timeline.pushed - (double)es.timeline.released -
                                 (double)es.timeline.duplicates);
    }
    close(ep);
    return rc;
}

void gh_controller_free(struct gh_controller *ctl)
{
    if (!ctl)
        return;
    if (ctl->leader) {
        (void)gh_kube_leader_release(ctl->leader, NULL);
        gh_kube_leader_free(ctl->leader);
    }
    gh_kube_informer_free(ctl->inf_nodes);
    gh_kube_informer_free(ctl->inf_pods);
    gh_kube_informer_free(ctl->inf_gnh);
    gh_kube_informer_free(ctl->inf_incidents);
    gh_kube_informer_free(ctl->inf_policies);
    gh_ingest_server_free(ctl->ingest);
    gh_executor_free(ctl->ex);
    gh_engine_free(ctl->engine);
    gh_kube_client_free(ctl->c);
    gh_sigqueue_free(ctl->queue);
    if (ctl->awaiting)
        for (size_t i = 0; i < gh_strmap_count(ctl->awaiting); i++)
            json_decref(gh_strmap_value(ctl->awaiting, i));
    gh_strmap_free(ctl->awaiting);
    for (size_t i = 0; i < ctl->n_deferred; i++)
        json_decref(ctl->deferred[i].inc);
    gh_strmap_free(ctl->known);
    gh_strmap_free(ctl->released);
    gh_guard_free(ctl->guard);
    gh_ctl_metrics_free(ctl->metrics);
    free(ctl);
}
