/* controller_inputs.c - the controller's informer handlers: Pods (their
 * signals, which job runs where, the jobs' stated costs), Nodes (holds,
 * returns to service), GPUNodeHealths (the validation gate, the agent's
 * answers to requests), Incidents (approvals), RecoveryPolicies (guards
 * and rules, their status), Events, and the job kinds' informers. On the
 * controller's loop (controller_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/controller_int.h"
#include "control/job_kinds.h"
#include "control/kube_signals.h"
#include "kube/api.h"

/* ---- a job's remaining run and restart cost (job_costs.h) */

/* The job object (kind as gh_job_kind_name names it) from its informer's
 * cache, a new reference, or NULL. */
static json_t *job_object(struct gh_controller *ctl, const char *job, const char *kind)
{
    const struct gh_kube_store *st = gh_job_watch_store(ctl->jobs, kind);
    const char *slash = strchr(job, '/');
    if (!st || !slash)
        return NULL;
    char ns[254];
    snprintf(ns, sizeof ns, "%.*s", (int)(slash - job), job);
    const struct gh_kube_obj *o = gh_kube_store_get(st, ns, slash + 1);
    return o ? gh_kube_obj_json(o) : NULL;
}

/* A job's costs from its object's annotations and its pod's (its pods
 * share their template's): per figure the job object's wins. They replace
 * what the job's entry held; only jobs that state any, or stated any
 * before, have an entry. An invalid value is logged once per job (until
 * it changes) and its figure is the policy's default. */
static void job_costs_note(struct gh_controller *ctl, const char *job, const char *kind,
                           const json_t *pod)
{
    struct gh_job_costs cp, cj = {INT64_MIN, NULL, -1};
    struct gh_err ep, ej = {{0}};
    int rp = gh_job_costs_read(pod, &cp, &ep), rj = GH_OK;
    json_t *jo = ctl->costs ? job_object(ctl, job, kind) : NULL;
    if (jo)
        rj = gh_job_costs_read(jo, &cj, &ej);
    json_decref(jo);
    if (!ctl->costs || (rp == GH_OK && rj == GH_OK && !gh_job_costs_stated(&cp) &&
                        !gh_job_costs_stated(&cj) && gh_strmap_find(ctl->costs, job) < 0))
        return;
    struct job_cost *jc = gh_strmap_get_or_alloc(ctl->costs, job, sizeof *jc, NULL, NULL);
    if (!jc)
        return;
    const char *ns = gh_kube_meta_namespace(pod), *name = gh_kube_meta_name(pod);
    char pod_is[340], job_is[340];
    snprintf(pod_is, sizeof pod_is, "pod %s/%s", ns ? ns : "-", name ? name : "-");
    snprintf(job_is, sizeof job_is, "%s %s", kind, job);
    const struct gh_job_costs *e = cj.end_from ? &cj : &cp;
    jc->c.end_ns = e->end_ns;
    jc->c.end_from = e->end_from;
    snprintf(jc->end_on, sizeof jc->end_on, "%s", e == &cj ? job_is : pod_is);
    jc->c.restart_cost_ns = cj.restart_cost_ns >= 0 ? cj.restart_cost_ns : cp.restart_cost_ns;
    snprintf(jc->cost_on, sizeof jc->cost_on, "%s", cj.restart_cost_ns >= 0 ? job_is : pod_is);
    uint64_t h = rp || rj
                     ? gh_hash_str(gh_hash_str(GH_HASH_INIT, rp ? ep.msg : ""), rj ? ej.msg : "")
                     : 0;
    if (h && h != jc->warned) {
        if (rj)
            GH_LOG(GH_LOG_WARN,
                   "event=job_costs_invalid job=%s %s error=\"%s\" (the policy "
                   "default is used for it)",
                   job, job_is, ej.msg);
        if (rp)
            GH_LOG(GH_LOG_WARN,
                   "event=job_costs_invalid job=%s %s error=\"%s\" (the policy "
                   "default is used for it)",
                   job, pod_is, ep.msg);
    }
    jc->warned = h;
}

/* The engine's job gets the remaining run and restart cost its entry
 * states as of now (unstated: the policy defaults); a job the engine does
 * not hold is left alone (gh_engine_set_job_costs). */
static void job_costs_apply(struct gh_controller *ctl, const char *job)
{
    long k = ctl->costs ? gh_strmap_find(ctl->costs, job) : -1;
    const struct job_cost *jc = k >= 0 ? gh_strmap_value(ctl->costs, (size_t)k) : NULL;
    if (jc)
        gh_engine_set_job_costs(ctl->engine, job, gh_job_costs_remaining_s(&jc->c, now(ctl)),
                                gh_job_costs_restart_s(&jc->c));
}

/* Remaining runs shrink as time passes: set again once a second. */
void gh_ctl_job_costs_refresh(struct gh_controller *ctl)
{
    int64_t t = now(ctl);
    if (!ctl->costs || t - ctl->costs_refreshed < GH_NS_PER_S)
        return;
    ctl->costs_refreshed = t;
    for (size_t i = 0; i < gh_strmap_count(ctl->costs); i++) {
        const char *job = gh_strmap_key(ctl->costs, i);
        if (job)
            job_costs_apply(ctl, job);
    }
}

static void job_costs_forget(struct gh_controller *ctl, const char *job)
{
    long k = ctl->costs ? gh_strmap_find(ctl->costs, job) : -1;
    if (k < 0)
        return;
    free(gh_strmap_value(ctl->costs, (size_t)k));
    gh_strmap_remove(ctl->costs, (size_t)k);
}

/* ---- informers */

static void pod_topology(struct gh_controller *ctl, const json_t *pod)
{
    char job[320];
    const char *kind = "";
    struct gh_job_caches jc = gh_job_watch_caches(ctl->jobs);
    const char *j = gh_job_of_pod(pod, &jc, job, sizeof job, &kind);
    const char *node = gh_json_str(pod, "spec", "nodeName");
    const char *phase = gh_json_str(pod, "status", "phase");
    bool over = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
    /* whose telemetry this pod may write, and from where (tenancy.h) */
    const char *uid = gh_kube_meta_uid(pod);
    int trc = gh_tenancy_pod(ctl->tenancy, uid, over ? NULL : j, over ? NULL : node);
    if (trc)
        GH_LOG(GH_LOG_WARN,
               "event=tenancy_pod_not_recorded pod_uid=%s job=%s error=%s (its "
               "telemetry is refused)",
               uid ? uid : "-", j ? j : "-", gh_rc_str(trc));
    if (!j || !node || over)
        return;
    /* a job the informers show is declared, so a fault on its node is the
     * job's fault; a full job table leaves it undeclared (and without its
     * costs), as before the engine had room */
    job_costs_note(ctl, j, kind ? kind : "", pod);
    if (gh_engine_declare_pod(ctl->engine, j, node) == GH_OK)
        job_costs_apply(ctl, j);
}

static void pod_change(void *ud, const json_t *old, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    size_t n = gh_kube_pod_signals(old, obj, now(ctl), s, GH_KUBE_SIGNALS_MAX);
    /* the job as the owners say (a JobSet's pod is the JobSet's) */
    char job[320];
    struct gh_job_caches jc = gh_job_watch_caches(ctl->jobs);
    const char *j = gh_job_of_pod(obj, &jc, job, sizeof job, NULL);
    for (size_t i = 0; j && i < n; i++)
        if (s[i].job)
            (void)gh_signal_set_str(&s[i].job, j, strlen(j));
    pod_topology(ctl, obj);
    for (size_t i = 0; i < n; i++)
        gh_ctl_feed(ctl, &s[i], "kube");
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
    (void)gh_tenancy_pod(ctl->tenancy, gh_kube_meta_uid(obj), NULL, NULL);
    char job[320];
    struct gh_job_caches jc = gh_job_watch_caches(ctl->jobs);
    const char *j = gh_job_of_pod(obj, &jc, job, sizeof job, NULL);
    const char *slash = j ? strchr(j, '/') : NULL;
    if (!slash)
        return;
    struct same_job s = {gh_kube_meta_namespace(obj), 0};
    gh_kube_store_index_foreach(gh_kube_informer_store(ctl->inf_pods), "job", slash + 1,
                                count_same_ns, &s);
    if (s.n == 0) {
        gh_engine_forget_job(ctl->engine, j);
        job_costs_forget(ctl, j);
    }
}

/* Every pod listed: a pod not seen now is no pod (tenancy.h). */
static void pods_synced(void *ud)
{
    struct gh_controller *ctl = ud;
    gh_tenancy_set_listed(ctl->tenancy, GH_TENANCY_PODS, true);
}

static void pod_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old) /* resync replays carry nothing new */
        pod_change(ud, old, obj);
}

struct pods_of {
    struct gh_controller *ctl;
    const char *ns;
};

static int place_pod(void *ud, const struct gh_kube_obj *o)
{
    struct pods_of *p = ud;
    json_t *pod = gh_kube_obj_json(o);
    const char *ns = pod ? gh_kube_meta_namespace(pod) : NULL;
    if (ns && !strcmp(ns, p->ns))
        pod_topology(p->ctl, pod);
    json_decref(pod);
    return GH_OK;
}

static void place_pods(struct gh_controller *ctl, const char *job)
{
    const char *slash = strchr(job, '/');
    if (!slash || !ctl->inf_pods)
        return;
    char ns[64];
    snprintf(ns, sizeof ns, "%.*s", (int)(slash - job), job);
    struct pods_of p = {ctl, ns};
    gh_kube_store_index_foreach(gh_kube_informer_store(ctl->inf_pods), "job", slash + 1, place_pod,
                                &p);
}

/* Where job's checkpoints are, as its object declares (tenancy.h): the
 * ingest takes a checkpoint path of the job only under it. */
static void job_prefix_note(struct gh_controller *ctl, const char *job)
{
    /* a TrainJob before the JobSet of its name, a JobSet before a Job */
    static const char *const kinds[] = {
        "TrainJob", "JobSet", "PyTorchJob", "LeaderWorkerSet", "MPIJob", "Job.batch.volcano.sh",
        "Job"};
    _Static_assert(sizeof kinds / sizeof kinds[0] == GH_JOB_NKINDS, "every kind");
    json_t *o = NULL;
    for (size_t i = 0; !o && i < sizeof kinds / sizeof kinds[0]; i++)
        o = job_object(ctl, job, kinds[i]);
    const char *pre = o ? ann(o, GH_ANN_CHECKPOINT_PREFIX) : NULL;
    struct gh_err err = {{0}};
    if (gh_tenancy_set_prefix(ctl->tenancy, job, pre, &err))
        GH_LOG(GH_LOG_WARN,
               "event=checkpoint_prefix_invalid job=%s error=\"%s\" (it covers no path: "
               "the job is restarted from a checkpoint's step, never its path)",
               job, err.msg);
    json_decref(o);
}

/* A job object changed: place its pods again (the owner may reach its
 * cache after them); a JobSet's or MPIJob's child Job is no job of its
 * own: what was placed under its name moves to its parent. */
static void job_changed(void *ud, const char *job, const char *part)
{
    struct gh_controller *ctl = ud;
    job_prefix_note(ctl, job);
    if (part) {
        gh_engine_forget_job(ctl->engine, part);
        job_costs_forget(ctl, part);
        place_pods(ctl, part);
    }
    place_pods(ctl, job);
}

/* What the job informers did (job_watch.h), in the lines they logged;
 * the ingest judges training lines once every job kind is listed. */
static void job_watch_note(void *ud, const struct gh_job_watch_note *n)
{
    struct gh_controller *ctl = ud;
    gh_tenancy_set_listed(ctl->tenancy, GH_TENANCY_JOBS, gh_job_watch_listed(ctl->jobs));
    const char *kind = gh_job_kind_name(n->res);
    switch (n->what) {
    case GH_JOB_WATCH_INFORMER_ERROR:
        GH_LOG(GH_LOG_WARN, "event=informer_error kind=%s rc=%s error=\"%s\"", kind,
               gh_rc_str(n->rc), n->error);
        break;
    case GH_JOB_WATCH_INFORMER_FAILED:
        GH_LOG(GH_LOG_ERROR, "event=job_informer kind=%s error=\"%s\"", kind, n->error);
        break;
    case GH_JOB_WATCH_INFORMER_STARTED:
        GH_LOG(GH_LOG_INFO, "event=job_informer kind=%s group=%s version=%s", kind,
               *n->res->group ? n->res->group : "core", n->res->version);
        break;
    case GH_JOB_WATCH_DISCOVERY_FAILED:
        GH_LOG(GH_LOG_WARN, "event=discovery_failed kind=%s error=\"%s\"", kind, n->error);
        break;
    case GH_JOB_WATCH_INFORMER_SYNCED:
        GH_LOG(GH_LOG_INFO, "event=job_informer_synced kind=%s", kind);
        break;
    case GH_JOB_WATCH_NOT_SERVED: GH_LOG(GH_LOG_DEBUG, "event=not_served kind=%s", kind); break;
    }
}

/* A training job is over (job_finished): the engine stops restarting it. */
static void job_signal(void *ud, struct gh_signal *s) { gh_ctl_feed(ud, s, "kube"); }

bool gh_ctl_held_by_gpuheal(const json_t *node)
{
    return ann(node, GH_ANN_CORDONED_BY) || ann(node, GH_ANN_TAINTED_BY);
}

static bool unschedulable(const json_t *node)
{
    return json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
}

/* Whether a node gpuheal held is back in service: gpuheal's hold lifted
 * (the validation gate, `gpuheal release`), or its cordon lifted by hand
 * (kubectl uncordon leaves the annotation) with no taint of gpuheal's left.
 * The engine then takes new evidence there as a new incident. */
static bool returned_to_service(const json_t *old, const json_t *obj)
{
    if (!old || !gh_ctl_held_by_gpuheal(old))
        return false;
    if (!gh_ctl_held_by_gpuheal(obj))
        return true;
    return ann(old, GH_ANN_CORDONED_BY) && unschedulable(old) && !unschedulable(obj) &&
           !ann(obj, GH_ANN_TAINTED_BY);
}

static void count_nodes(struct gh_controller *ctl)
{
    const struct gh_kube_store *st = gh_kube_informer_store(ctl->inf_nodes);
    gh_guard_set_node_count(ctl->guard, gh_kube_store_count(st));
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_NODES_ISOLATED,
                         (double)gh_guard_isolated_count(ctl->guard));
}

static void check_release(struct gh_controller *ctl, const char *node_name);

/* Whether gpuheal's own validation gate released the isolation old shows
 * (check_release submitted it): then the release's report tells the engine,
 * at the moment the uncordon took effect (gh_ctl_release_done), and the
 * informer's later sight of it must not: by then a new fault there may
 * have been decided, and its episode would be ended by a stale return. */
static bool released_by_gpuheal(struct gh_controller *ctl, const char *name, const json_t *old)
{
    const char *at = ann(old, GH_ANN_ISOLATED_AT);
    char key[400];
    if (!at)
        return false;
    snprintf(key, sizeof key, "%s@%s", name, at);
    return gh_strmap_find(ctl->released, key) >= 0;
}

void gh_ctl_release_done(struct gh_controller *ctl, const char *node, const char *incident,
                         const char *result)
{
    if (strcmp(result, "succeeded") != 0 && strcmp(result, "noop") != 0)
        return;
    gh_engine_node_returned(ctl->engine, node, now(ctl));
    GH_LOG(GH_LOG_INFO,
           "event=node_returned node=%s by=validation incident=%s (new evidence "
           "there is a new incident)",
           node, incident && *incident ? incident : "-");
}

/* The Node's labels that name a component it shares with others (rack,
 * switch or rail, NVLink domain, what a rollout shares), mirrored into the
 * engine, which names a shared cause by them: on first sight, when they
 * change (nothing to do when they did not) and, emptied, when the Node
 * goes. obj NULL: the Node was deleted (old is its last state). */
static void mirror_labels(struct gh_controller *ctl, const char *name, const json_t *old,
                          const json_t *obj)
{
    if (!gh_kube_node_labels_changed(old, obj, gh_engine_label_wanted))
        return;
    const char *keys[GH_KUBE_NODE_LABELS_MAX], *values[GH_KUBE_NODE_LABELS_MAX];
    size_t was = old ? gh_kube_node_labels(old, gh_engine_label_wanted, keys, values,
                                           GH_KUBE_NODE_LABELS_MAX)
                     : 0;
    size_t n = obj ? gh_kube_node_labels(obj, gh_engine_label_wanted, keys, values,
                                         GH_KUBE_NODE_LABELS_MAX)
                   : 0;
    if (was && !n && ctl->nodes_labelled)
        ctl->nodes_labelled--;
    else if (!was && n)
        ctl->nodes_labelled++;
    int rc = gh_engine_set_node_labels(ctl->engine, name, keys, values, n);
    if (rc && !ctl->labels_failing)
        GH_LOG(GH_LOG_WARN,
               "event=node_labels_not_set node=%s error=\"%s\" (a shared cause on it may go "
               "unnamed; logged once until it works again)",
               name, rc == GH_ELIMIT ? "the engine's node table is full" : "out of memory");
    else if (!rc)
        GH_LOG(GH_LOG_DEBUG, "event=node_labels node=%s labels=%zu", name, n);
    ctl->labels_failing = rc != GH_OK;
}

static void node_change(void *ud, const json_t *old, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (!name)
        return;
    mirror_labels(ctl, name, old, obj);
    bool held = gh_ctl_held_by_gpuheal(obj);
    if (held)
        gh_guard_set_isolated(ctl->guard, name, true);
    else if (!old || gh_ctl_held_by_gpuheal(old))
        gh_guard_set_isolated(ctl->guard, name, false);
    if (returned_to_service(old, obj) && !released_by_gpuheal(ctl, name, old)) {
        gh_engine_node_returned(ctl->engine, name, now(ctl));
        GH_LOG(GH_LOG_INFO,
               "event=node_returned node=%s by=uncordon (new evidence there is a "
               "new incident)",
               name);
    }
    count_nodes(ctl);
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    if (gh_kube_node_signals(old, obj, now(ctl), s, 1) == 1)
        gh_ctl_feed(ctl, &s[0], "kube");
    /* the conditions other agents set (NPD's checks), as they change */
    size_t nc = gh_kube_node_condition_signals(old, obj, &ctl->node_conds, now(ctl), s,
                                               GH_KUBE_SIGNALS_MAX);
    for (size_t i = 0; i < nc; i++)
        gh_ctl_feed(ctl, &s[i], "kube");
    if (held)
        check_release(ctl, name);
}

static void node_add(void *ud, const json_t *obj) { node_change(ud, NULL, obj); }

/* The first complete list of Nodes: how many, and how many name a
 * component they share (what the engine can name a shared cause by). */
static void nodes_synced(void *ud)
{
    struct gh_controller *ctl = ud;
    GH_LOG(GH_LOG_INFO, "event=nodes_listed nodes=%zu with_component_labels=%zu",
           gh_kube_store_count(gh_kube_informer_store(ctl->inf_nodes)), ctl->nodes_labelled);
}

static void node_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old)
        node_change(ud, old, obj);
}

static void node_delete(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (name) {
        gh_guard_set_isolated(ctl->guard, name, false);
        mirror_labels(ctl, name, obj, NULL);
    }
    count_nodes(ctl);
}

/* The validation gate: a node gpuheal holds returns to service once its
 * GPUNodeHealth says Validated=True after the isolation. */
static void check_release(struct gh_controller *ctl, const char *node_name)
{
    if (!ctl->leading)
        return;
    const struct gh_kube_obj *no = gh_kube_store_get(gh_kube_informer_store(ctl->inf_nodes), NULL,
                                                     node_name);
    const struct gh_kube_obj *go = gh_kube_store_get(gh_kube_informer_store(ctl->inf_gnh), NULL,
                                                     node_name);
    if (!no || !go)
        return;
    json_t *node = gh_kube_obj_json(no), *gnh = gh_kube_obj_json(go);
    const char *at = node ? ann(node, GH_ANN_ISOLATED_AT) : NULL;
    int64_t since = 0;
    if (node && gnh && gh_ctl_held_by_gpuheal(node) && at &&
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
            gh_ctl_submit(ctl, &t);
        }
    }
    json_decref(node);
    json_decref(gnh);
}

/* The node agent's answers to the requests on GPUNodeHealth gnh: each
 * request annotation whose Request-<action> condition names it with a final
 * reason, or (timeouts) that is older than --request-timeout without one,
 * becomes an OUTCOME task once; the executor records it after the request
 * (also across restarts: it looks in the store first). */
static void check_requests(struct gh_controller *ctl, const json_t *gnh, bool timeouts)
{
    static const enum gh_action acts[] = {GH_ACT_RESET_GPU, GH_ACT_REBOOT_NODE,
                                          GH_ACT_RUN_DIAGNOSTICS};
    const char *node = gh_kube_meta_name(gnh);
    if (!ctl->leading || !node || strlen(node) >= sizeof((struct gh_task *)0)->node)
        return;
    int64_t limit = ctl->o.request_timeout_ns > 0 ? ctl->o.request_timeout_ns : 3600 * GH_NS_PER_S;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        const char *action = gh_action_name(acts[i]);
        char key[128];
        snprintf(key, sizeof key, "%s%s", GH_ANN_REQUEST_PREFIX, action);
        const char *text = ann(gnh, key);
        json_t *req = text ? json_loads(text, 0, NULL) : NULL;
        const char *id = gh_json_str(req, "id");
        const char *inc = gh_json_str(req, "incident");
        const char *at = gh_json_str(req, "time");
        struct gh_task t;
        memset(&t, 0, sizeof t);
        if (!id || !inc || strlen(inc) >= sizeof t.id) {
            json_decref(req);
            continue;
        }
        bool have = gh_act_request_outcome(gnh, action, id, t.req_result, sizeof t.req_result,
                                           t.req_detail, sizeof t.req_detail);
        int64_t since = 0;
        if (!have) {
            if (!timeouts || !at || !gh_time_parse_rfc3339(at, strlen(at), &since) ||
                now(ctl) - since < limit) {
                json_decref(req);
                continue;
            }
            snprintf(t.req_result, sizeof t.req_result, "timed_out");
            snprintf(t.req_detail, sizeof t.req_detail,
                     "the agent on %s did not answer request "
                     "%s (posted %s) within %llds (--request-timeout)",
                     node, id, at, (long long)(limit / GH_NS_PER_S));
        }
        char done[400];
        snprintf(done, sizeof done, "%s|%s", id, t.req_result);
        bool created = true;
        (void)gh_strmap_intern(ctl->answers, done, &created, NULL); /* full: the store dedups */
        if (created) {
            t.kind = GH_TASK_OUTCOME;
            t.req_action = acts[i];
            snprintf(t.id, sizeof t.id, "%s", inc);
            snprintf(t.node, sizeof t.node, "%s", node);
            GH_LOG(GH_LOG_INFO, "event=request_answered node=%s request=%s result=%s", node, id,
                   t.req_result);
            gh_ctl_submit(ctl, &t);
        }
        json_decref(req);
    }
}

static int scan_request(void *ud, const struct gh_kube_obj *o)
{
    json_t *gnh = gh_kube_obj_json(o);
    if (gnh)
        check_requests(ud, gnh, true);
    json_decref(gnh);
    return 0;
}

/* Once a second: requests unanswered past --request-timeout. */
void gh_ctl_scan_requests(struct gh_controller *ctl)
{
    int64_t t = now(ctl);
    if (!ctl->leading || !ctl->inf_gnh || t - ctl->requests_scanned < GH_NS_PER_S)
        return;
    ctl->requests_scanned = t;
    (void)gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_gnh), scan_request, ctl);
}

static void gnh_change(void *ud, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    const char *name = gh_kube_meta_name(obj);
    if (name)
        check_release(ctl, name);
    check_requests(ctl, obj, false);
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
        gh_ctl_approve(ctl, id, ann(obj, "gpuheal.io/approved-by"));
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
    int nodes;
    double pct;
    /* a budget out of range is refused (the object's status says why) */
    if (gh_policy_cr_budget(b, &nodes, &pct, NULL) == GH_OK)
        gh_guard_tighten_budget(g, nodes, pct);
    json_t *rate = json_object_get(b, "maxActionsPerHour");
    if (json_is_integer(rate) && json_integer_value(rate) > 0 &&
        (g->max_actions_per_hour == 0 || json_integer_value(rate) < g->max_actions_per_hour))
        g->max_actions_per_hour = (int)json_integer_value(rate);
    const char *cd = gh_json_str(b, "nodeCooldown");
    int64_t cdn;
    if (cd && gh_policy_parse_duration(cd, &cdn) && cdn > g->node_cooldown_ns)
        g->node_cooldown_ns = cdn;
    if (json_is_true(json_object_get(b, "requireApproval")))
        g->approval = true;
    json_decref(p);
    return GH_OK;
}

static void status_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)ud;
    (void)resp;
    if (rc)
        GH_LOG(GH_LOG_WARN, "event=policy_status_failed error=\"%s\"", err ? err->msg : "");
}

/* The verdict on a RecoveryPolicy into its status (condition Accepted,
 * and Ready for `kubectl get rp`), unless the status says so already. */
static void policy_status(struct gh_controller *ctl, const json_t *p,
                          const struct gh_policy_cr_verdict *v)
{
    json_t *st = json_object_get(p, "status");
    int64_t gen = json_integer_value(json_object_get(json_object_get(p, "metadata"), "generation"));
    const char *want = v->accepted ? "True" : "False";
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (gh_json_str(c, "type") && !strcmp(gh_json_str(c, "type"), "Accepted") &&
            gh_json_str(c, "status") && !strcmp(gh_json_str(c, "status"), want) &&
            gh_json_str(c, "reason") && !strcmp(gh_json_str(c, "reason"), v->reason) &&
            gh_json_str(c, "message") && !strcmp(gh_json_str(c, "message"), v->message) &&
            json_integer_value(json_object_get(st, "observedGeneration")) == gen)
            return;
    }
    char ts[GH_RFC3339_MAX];
    gh_time_format_rfc3339(now(ctl), ts, sizeof ts);
    json_t *patch = json_pack(
        "{s:{s:I, s:i, s:s, s:[{s:s, s:s, s:s, s:s, s:s, s:I}, {s:s, s:s, s:s, s:s, s:s, s:I}]}}",
        "status", "observedGeneration", (json_int_t)gen, "ruleCount", v->rules, "lastEvaluated", ts,
        "conditions", "type", "Accepted", "status", want, "reason", v->reason, "message",
        v->message, "lastTransitionTime", ts, "observedGeneration", (json_int_t)gen, "type",
        "Ready", "status", v->rules > 0 ? "True" : "False", "reason", v->reason, "message",
        v->message, "lastTransitionTime", ts, "observedGeneration", (json_int_t)gen);
    struct gh_kube_ref ref = {&gh_kube_res_recoverypolicies, NULL, gh_kube_meta_name(p)};
    struct gh_kube_req req;
    memset(&req, 0, sizeof req);
    struct gh_err err;
    if (!patch || gh_kube_req_patch(&req, &ref, "status", GH_KUBE_PATCH_MERGE, patch, &err) ||
        gh_kube_submit(ctl->c, &req, status_done, NULL, ctl, NULL, &err))
        GH_LOG(GH_LOG_WARN, "event=policy_status_failed name=%s error=\"%s\"",
               gh_kube_meta_name(p) ? gh_kube_meta_name(p) : "-",
               patch ? err.msg : "out of memory");
    gh_kube_req_clear(&req);
    json_decref(patch);
}

static int offer_policy(void *ud, const struct gh_kube_obj *o)
{
    struct gh_controller *ctl = ud;
    json_t *p = gh_kube_obj_json(o);
    if (!p)
        return GH_OK;
    struct gh_policy_cr_verdict v;
    gh_policy_crset_offer(ctl->crset, p, &v);
    const char *name = gh_kube_meta_name(p) ? gh_kube_meta_name(p) : "-";
    if (v.fresh && !v.accepted)
        GH_LOG(GH_LOG_WARN, "event=policy_rejected name=%s reason=%s error=\"%s\"", name, v.reason,
               v.message);
    else if (v.fresh)
        GH_LOG(GH_LOG_INFO, "event=policy_accepted name=%s rules=%d", name, v.rules);
    policy_status(ctl, p, &v);
    json_decref(p);
    return GH_OK;
}

/* The rules of the RecoveryPolicy objects in force replace the engine's
 * (a valid new version at once; an invalid one keeps the previous). */
static void policy_rules(struct gh_controller *ctl)
{
    gh_policy_crset_begin(ctl->crset);
    gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_policies), offer_policy, ctl);
    int from = 0;
    struct gh_policy *next = gh_policy_crset_end(ctl->crset, &from);
    if (!next)
        return;
    gh_engine_set_policy(ctl->engine, next);
    free(ctl->policy_now);
    ctl->policy_now = next;
    GH_LOG(GH_LOG_INFO, "event=policy_rules rules=%d from=%s objects=%d", next->n_rules,
           from            ? "RecoveryPolicy"
           : ctl->o.policy ? "--policy"
                           : "built-in",
           from);
}

static void policies_changed(struct gh_controller *ctl)
{
    struct gh_guard_config g = ctl->base_guards;
    gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_policies), apply_policy, &g);
    bool was_dry = gh_guard_config(ctl->guard)->dry_run;
    gh_guard_set_config(ctl->guard, &g);
    if (was_dry && !g.dry_run) {
        /* the dry run's incidents were only recorded: the next fault of
         * one is a new incident, acted on, not evidence absorbed into it */
        gh_engine_decisions_not_acted(ctl->engine);
        GH_LOG(GH_LOG_INFO, "event=dry_run_ended msg=\"open incidents of the dry run closed: "
                            "later faults are decided anew\"");
    }
    policy_rules(ctl);
    /* Every add, update and the sync come here (at start, once per
     * RecoveryPolicy and once more): the line is logged when what it says
     * changed, not each time. */
    const struct gh_guard_config *l = &ctl->guards_logged;
    if (ctl->guards_logged_once && l->dry_run == g.dry_run && l->approval == g.approval &&
        l->max_isolated == g.max_isolated && l->max_isolated_pct == g.max_isolated_pct &&
        l->max_actions_per_hour == g.max_actions_per_hour &&
        l->node_cooldown_ns == g.node_cooldown_ns)
        return;
    ctl->guards_logged = g;
    ctl->guards_logged_once = true;
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

/* Events (events.k8s.io/v1) as kube signals (kube_signals.h); gpuheal's
 * own are skipped there. */
static void event_change(struct gh_controller *ctl, const json_t *old, const json_t *ev,
                         bool nodes_only)
{
    const json_t *reg = json_object_get(ev, "regarding");
    const char *kind = gh_json_str(reg, "kind");
    if (!kind || (nodes_only && strcmp(kind, "Node") != 0))
        return;
    json_t *pod = NULL;
    if (!strcmp(kind, "Pod") && ctl->inf_pods && gh_json_str(reg, "name")) {
        const struct gh_kube_obj *po = gh_kube_store_get(gh_kube_informer_store(ctl->inf_pods),
                                                         gh_json_str(reg, "namespace"),
                                                         gh_json_str(reg, "name"));
        pod = po ? gh_kube_obj_json(po) : NULL;
    }
    struct gh_signal s[1];
    if (gh_kube_event_signals(old, ev, pod, now(ctl), EVENT_MAX_AGE, s, 1) == 1)
        gh_ctl_feed(ctl, &s[0], "kube");
    json_decref(pod);
}

static void event_add(void *ud, const json_t *obj) { event_change(ud, NULL, obj, false); }
static void event_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old) /* resync replays carry nothing new */
        event_change(ud, old, obj, false);
}
static void node_event_add(void *ud, const json_t *obj) { event_change(ud, NULL, obj, true); }
static void node_event_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old)
        event_change(ud, old, obj, true);
}

static void inf_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    (void)ud;
    (void)st;
    GH_LOG(GH_LOG_WARN, "event=informer_error rc=%s error=\"%s\"", gh_rc_str(rc), msg ? msg : "");
}

/* Pods by job name (the namespace is compared by the caller). */
static const struct gh_kube_index_spec pod_indexes[] = {
    {"job",
     {"/metadata/labels/jobset.sigs.k8s.io~1jobset-name",
      "/metadata/labels/leaderworkerset.sigs.k8s.io~1name", "/metadata/labels/volcano.sh~1job-name",
      "/metadata/labels/training.kubeflow.org~1job-name",
      "/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name"}},
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
                                      .nindexes = pods ? 1 : 0,
                                      /* Events are signals, not state: bounded */
                                      .max_objects = res == &gh_kube_res_events ? EVENTS_CACHED_MAX
                                                                                : 0};
    int rc = gh_kube_informer_new(ctl->c, &o, h, ctl, out, err);
    if (!rc)
        rc = gh_kube_informer_start(*out, err);
    return rc;
}

static const char *const node_keep[] = {"/metadata/labels", "/metadata/annotations",
                                        "/spec/unschedulable", "/spec/taints",
                                        "/status/conditions"};
static const char *const pod_keep[] = {"/metadata/labels",
                                       "/metadata/ownerReferences",
                                       "/metadata/deletionTimestamp",
                                       "/spec/nodeName",
                                       "/status/phase",
                                       "/status/reason",
                                       "/status/message",
                                       "/status/startTime",
                                       "/status/containerStatuses",
                                       "/metadata/annotations/gpuheal.io~1expected-end",
                                       "/metadata/annotations/gpuheal.io~1remaining",
                                       "/metadata/annotations/gpuheal.io~1restart-cost"};
static const char *const gnh_keep[] = {"/metadata/annotations", "/status/conditions",
                                       "/status/lastAction"};
static const char *const incident_keep[] = {"/metadata/annotations", "/status/phase"};
static const char *const policy_keep[] = {
    "/metadata/generation", "/spec/dryRun", "/spec/nodeSelector",         "/spec/budgets",
    "/spec/priority",       "/spec/rules",  "/status/observedGeneration", "/status/conditions"};
static const char *const event_keep[] = {
    "/regarding",        "/reason",          "/note",   "/type",      "/reportingController",
    "/deprecatedSource", "/deprecatedCount", "/series", "/eventTime", "/deprecatedLastTimestamp"};

/* The informers (Nodes, Pods, GPUNodeHealths, Incidents, RecoveryPolicies,
 * Events, Namespaces) and the job informers, with the handlers above. */
int gh_ctl_inputs_start(struct gh_controller *ctl, struct gh_err *err)
{
    int rc;
    struct gh_kube_handlers hn = {node_add, node_update, node_delete, nodes_synced, inf_error};
    struct gh_kube_handlers hp = {pod_add, pod_update, pod_delete, pods_synced, inf_error};
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
    /* Events: the watched namespace's (all: every namespace's), and the
     * nodes' (kubelets post them in "default") */
    struct gh_kube_handlers hev = {event_add, event_update, NULL, NULL, inf_error};
    struct gh_kube_handlers hnev = {node_event_add, node_event_update, NULL, NULL, inf_error};
    const char *wns = ctl->o.watch_namespace;
    if ((rc = start_informer(ctl, &gh_kube_res_events, wns, NULL, event_keep, N(event_keep), &hev,
                             &ctl->inf_events, err)) ||
        (wns && strcmp(wns, "default") != 0 &&
         (rc = start_informer(ctl, &gh_kube_res_events, "default", NULL, event_keep, N(event_keep),
                              &hnev, &ctl->inf_node_events, err))))
        return gh_err_prefix(err, rc, "event informers");
    /* Namespaces: their drain mode (one namespace's when one is watched) */
    static const char *const ns_keep[] = {"/metadata/annotations"};
    char nsel[320];
    snprintf(nsel, sizeof nsel, "metadata.name=%s", wns ? wns : "");
    struct gh_kube_informer_opts nso = {.res = &gh_kube_res_namespaces,
                                        .field_selector = wns ? nsel : NULL,
                                        .keep = ns_keep,
                                        .nkeep = 1};
    struct gh_kube_handlers hns = {NULL, NULL, NULL, NULL, inf_error};
    if ((rc = gh_kube_informer_new(ctl->c, &nso, &hns, ctl, &ctl->inf_namespaces, err)) ||
        (rc = gh_kube_informer_start(ctl->inf_namespaces, err)))
        return gh_err_prefix(err, rc, "namespace informer");
    if ((rc = gh_job_watch_new(ctl->c, ctl->o.watch_namespace, job_changed, ctl, &ctl->jobs,
                               err)) ||
        (gh_job_watch_on_signal(ctl->jobs, job_signal, ctl), 0) ||
        (gh_job_watch_on_note(ctl->jobs, job_watch_note, ctl), 0) ||
        (rc = gh_job_watch_start(ctl->jobs, err)))
        return gh_err_prefix(err, rc, "job informers");
    return GH_OK;
}
