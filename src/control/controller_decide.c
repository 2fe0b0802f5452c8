/* controller_decide.c - an incident's way from the engine to the
 * executor: the decision filled once (decision.h), the RecoveryPolicy
 * node selectors, the guards and the task, deferral while standing by,
 * approvals, and drains held for a checkpoint (drain_wait.h, drain_hold.h).
 * On the controller's loop (controller_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/controller_int.h"
#include "control/job_kinds.h"
#include "signal/signal_json.h"

/* An incident (stolen) kept for this process's next leadership: decided
 * while standing by, or handed back by the executor unrecorded. */
void gh_ctl_defer(struct gh_controller *ctl, json_t *j, int64_t first)
{
    if (ctl->n_deferred == DEFERRED_MAX) {
        json_decref(ctl->deferred[0].inc);
        memmove(ctl->deferred, ctl->deferred + 1, (DEFERRED_MAX - 1) * sizeof ctl->deferred[0]);
        ctl->n_deferred--;
    }
    ctl->deferred[ctl->n_deferred].inc = j;
    ctl->deferred[ctl->n_deferred].first_arrival = first;
    ctl->n_deferred++;
}

/* ---- incidents: guards, then the executor */

static bool hold_drain(struct gh_controller *ctl, struct gh_task *t);
static void drain_timer(void *ud);

void gh_ctl_submit(struct gh_controller *ctl, struct gh_task *t)
{
    struct gh_err err;
    if (gh_executor_submit(ctl->ex, t, &err)) {
        GH_LOG(GH_LOG_ERROR, "event=task_refused id=%s error=\"%s\"", t->id, err.msg);
        json_decref(t->incident);
        t->incident = NULL;
        json_decref(t->hold);
        t->hold = NULL;
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

/* An incident (spec section 3 object, stolen) the leader acts on: guards,
 * then the executor. d: its decision (borrowed from inc; copied into the
 * task). */
void gh_ctl_decide(struct gh_controller *ctl, json_t *inc, const struct gh_decision *d,
                   int64_t first_arrival)
{
    int64_t t = now(ctl);
    const char *id = d->id, *node = d->node;
    int cls = d->cls;
    bool created = false;
    if (!id || gh_strmap_intern(ctl->known, id, &created, NULL) < 0 || !created) {
        GH_LOG(GH_LOG_DEBUG, "event=incident_known id=%s", id ? id : "-");
        json_decref(inc);
        return;
    }
    if (cls >= 0)
        gh_ctl_metrics_incident(ctl->metrics, (enum gh_class)cls);
    gh_ctl_metrics_shared_cause(ctl->metrics, d->scope);
    if (node && cls >= 0 && blames_hardware((enum gh_class)cls))
        gh_guard_note_blame(ctl->guard, node, t);
    struct gh_task task;
    memset(&task, 0, sizeof task);
    task.kind = GH_TASK_DECISION;
    task.d = *d;
    snprintf(task.id, sizeof task.id, "%s", id);
    task.n = d->n_actions;
    gh_guard_check(ctl->guard, d->actions, task.n, node, false, t, task.v);
    count_trips(ctl, task.v, task.n);
    gh_guard_commit(ctl->guard, task.v, task.n, node, t);
    const struct gh_guard_config *gc = gh_guard_config(ctl->guard);
    snprintf(task.mode, sizeof task.mode, "%s",
             gc->dry_run    ? "dry_run"
             : gc->approval ? "approval"
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
           cls >= 0 ? gh_class_name((enum gh_class)cls) : "-", node ? node : "-",
           d->job ? d->job : "-", d->rule ? d->rule : "-", task.mode);
    if (d->scope != GH_SCOPE_UNSAID && d->n_affected)
        GH_LOG(GH_LOG_WARN,
               "event=shared_cause id=%s scope=%s component=\"%s\" affected_nodes=%zu (no node "
               "is taken out of service for it)",
               id, gh_scope_name(d->scope), d->component ? d->component : "", d->n_affected);
    task.incident = inc;
    if (!awaits && hold_drain(ctl, &task))
        return; /* submitted when the jobs have checkpointed, or at the timeout */
    gh_ctl_submit(ctl, &task);
}

/* Adds a sentence to the incident's reason. */
static void append_reason(json_t *inc, const char *more)
{
    const char *r = gh_json_str(inc, "reason");
    size_t n = (r ? strlen(r) : 0) + strlen(more) + 2;
    char *buf = malloc(n);
    if (!buf)
        return;
    snprintf(buf, n, "%s%s%s", r ? r : "", r && *r ? " " : "", more);
    json_object_set_new(inc, "reason", json_string(buf));
    free(buf);
}

/* A straggler's reason says where the job's remaining run and restart
 * cost came from: annotations (which, on what) or the policy's defaults. */
static void costs_reason(struct gh_controller *ctl, const struct gh_incident *inc, json_t *j)
{
    if (inc->cls != GH_CLASS_STRAGGLER || !inc->job)
        return;
    long k = ctl->costs ? gh_strmap_find(ctl->costs, inc->job) : -1;
    const struct job_cost *jc = k >= 0 ? gh_strmap_value(ctl->costs, (size_t)k) : NULL;
    char d[1024], more[1100];
    if (jc && gh_job_costs_stated(&jc->c))
        snprintf(more, sizeof more, "Job costs: %s.",
                 gh_job_costs_describe(&jc->c, now(ctl), jc->end_on, jc->cost_on, d, sizeof d));
    else
        snprintf(more, sizeof more,
                 "Job costs: the policy defaults (no valid %s, %s or %s "
                 "annotation on the job or its pods).",
                 GH_ANN_EXPECTED_END, GH_ANN_REMAINING, GH_ANN_RESTART_COST);
    append_reason(j, more);
}

/* A RecoveryPolicy with a nodeSelector governs only the nodes it selects
 * (policy_cr.h): the engine skips its rules for other nodes (gh_ctl_rule_governs);
 * when no rule governs the node, the first matching one decided, and the
 * incident is recorded with no action and says why. False then. */
static bool node_governed(struct gh_controller *ctl, int rule, const char *node, char *why,
                          size_t cap)
{
    if (!node || !ctl->crset || !gh_policy_crset_has_selectors(ctl->crset))
        return true;
    const struct gh_kube_obj *no = ctl->inf_nodes
                                       ? gh_kube_store_get(gh_kube_informer_store(ctl->inf_nodes),
                                                           NULL, node)
                                       : NULL;
    json_t *n = no ? gh_kube_obj_json(no) : NULL; /* unknown node: no labels */
    bool yes = gh_policy_crset_governs(
        ctl->crset, rule, json_object_get(json_object_get(n, "metadata"), "labels"), why, cap);
    json_decref(n);
    return yes;
}

/* The engine's rule filter (gh_engine_set_rule_filter). */
bool gh_ctl_rule_governs(void *ud, int rule, const char *node)
{
    return node_governed(ud, rule, node, NULL, 0);
}

static bool governed(struct gh_controller *ctl, const struct gh_incident *inc, json_t *j)
{
    if (!inc->node || !inc->rule || !ctl->crset)
        return true;
    const struct gh_policy *p = gh_engine_policy(ctl->engine);
    int ri = -1;
    for (int i = 0; i < p->n_rules && ri < 0; i++)
        if (inc->rule == p->rules[i].name)
            ri = i;
    char why[400];
    if (ri < 0 || node_governed(ctl, ri, inc->node, why, sizeof why))
        return true;
    char more[600];
    snprintf(more, sizeof more,
             "Not acted: %s, and node %s does not have them "
             "(no RecoveryPolicy governs this node for rule %s).",
             why, inc->node, inc->rule);
    append_reason(j, more);
    GH_LOG(GH_LOG_INFO, "event=incident_not_governed id=%s node=%s rule=%s why=\"%s\"", inc->id,
           inc->node, inc->rule, why);
    return false;
}

void gh_ctl_on_joined(void *ud, const char *incident_id, const char *node,
                      const struct gh_tl_entry *const *ev, size_t n)
{
    struct gh_controller *ctl = ud;
    /* Bounded: an incident past the store's cap is not sent again (its
     * signals stay in the journal), and joined rows never crowd decisions
     * out of the executor's queue. */
    long k = ctl->joined_n ? gh_strmap_intern(ctl->joined_n, incident_id, NULL, NULL) : -1;
    uintptr_t sent = k >= 0 ? (uintptr_t)gh_strmap_value(ctl->joined_n, (size_t)k) : 0;
    if (sent >= GH_AUDIT_JOINED_MAX) {
        gh_ctl_metrics_joined(ctl->metrics, 0, (unsigned)n);
        return;
    }
    if (gh_executor_depth(ctl->ex) >= JOINED_QUEUE_MAX) {
        gh_ctl_metrics_joined(ctl->metrics, 0, (unsigned)n);
        uint64_t c = ++ctl->joined_shed;
        if ((c & (c - 1)) == 0) /* the 1st, 2nd, 4th, ... */
            GH_LOG(GH_LOG_WARN,
                   "event=joined_evidence_shed id=%s signals=%zu shed=%llu "
                   "(the executor is busy: decisions first; the journal keeps them)",
                   incident_id, n, (unsigned long long)c);
        return;
    }
    if (k >= 0)
        gh_strmap_set_value(ctl->joined_n, (size_t)k, (void *)(sent + n));
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = gh_signal_encode_json(&ev[i]->sig);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (!arr) {
        GH_LOG(GH_LOG_ERROR, "event=joined_evidence_dropped id=%s error=\"out of memory\"",
               incident_id);
        return;
    }
    struct gh_task t;
    memset(&t, 0, sizeof t);
    t.kind = GH_TASK_JOINED;
    snprintf(t.id, sizeof t.id, "%s", incident_id);
    snprintf(t.node, sizeof t.node, "%s", node ? node : "");
    t.incident = arr;
    t.joined_ns = now(ctl);
    GH_LOG(GH_LOG_DEBUG, "event=evidence_joined id=%s node=%s signals=%zu", incident_id,
           node ? node : "-", n);
    gh_ctl_submit(ctl, &t);
}

void gh_ctl_on_incident(void *ud, const struct gh_incident *inc)
{
    struct gh_controller *ctl = ud;
    if (ctl->decided && gh_strmap_count(ctl->decided) > 0) {
        /* decided before the restart, maybe with another job on the node */
        char key[512];
        gh_journal_decision_key(gh_class_name(inc->cls), inc->node, inc->gpu, inc->first_ts,
                                inc->rule, key, sizeof key);
        if (gh_strmap_find(ctl->decided, key) >= 0) {
            GH_LOG(GH_LOG_DEBUG, "event=incident_known id=%s key=%s", inc->id, key);
            return;
        }
    }
    json_t *j = gh_incident_to_json(inc);
    if (!j) {
        GH_LOG(GH_LOG_ERROR, "event=incident_dropped id=%s error=\"out of memory\"", inc->id);
        return;
    }
    costs_reason(ctl, inc, j);
    struct gh_decision d;
    gh_decision_from_incident(&d, inc, j);
    if (!governed(ctl, inc, j)) {
        json_object_set_new(j, "actions", json_pack("[s]", gh_action_name(GH_ACT_NONE)));
        d.n_actions = 1;
        d.actions[0] = GH_ACT_NONE;
    }
    int64_t first = 0;
    for (size_t i = 0; i < inc->n_evidence; i++)
        if (inc->evidence[i]->arrival_ns && (!first || inc->evidence[i]->arrival_ns < first))
            first = inc->evidence[i]->arrival_ns;
    if (ctl->leading && fenced_in(ctl)) {
        gh_ctl_decide(ctl, j, &d, first);
        return;
    }
    /* A standby keeps what it decided (agents may post to any replica) and
     * hands it over when it leads; the shared audit store drops what the
     * leader of the time already recorded (same incident id). */
    gh_ctl_defer(ctl, j, first);
    GH_LOG(GH_LOG_INFO, "event=incident_not_leader id=%s deferred=%zu", inc->id, ctl->n_deferred);
}

/* An incident waiting for approval got it: check the guards again (the
 * cluster changed meanwhile) and act. */
void gh_ctl_approve(struct gh_controller *ctl, const char *id, const char *by)
{
    long k = gh_strmap_find(ctl->awaiting, id);
    json_t *inc = k >= 0 ? gh_strmap_value(ctl->awaiting, (size_t)k) : NULL;
    if (!inc)
        return;
    gh_strmap_set_value(ctl->awaiting, (size_t)k, NULL);
    ctl->n_awaiting--;
    struct gh_task task;
    memset(&task, 0, sizeof task);
    gh_decision_read(&task.d, inc); /* held as its object (also read back from the store) */
    int n = task.d.n_actions;
    task.kind = GH_TASK_APPROVED;
    snprintf(task.id, sizeof task.id, "%s", id);
    snprintf(task.approver, sizeof task.approver, "approved by %s", by && *by ? by : "someone");
    task.n = n;
    int64_t t = now(ctl);
    const char *node = task.d.node;
    gh_guard_check(ctl->guard, task.d.actions, n, node, true, t, task.v);
    count_trips(ctl, task.v, task.n);
    gh_guard_commit(ctl->guard, task.v, task.n, node, t);
    task.incident = inc; /* the executor reads it from the store; the hold needs it */
    GH_LOG(GH_LOG_INFO, "event=approved id=%s by=\"%s\"", id, by ? by : "");
    if (hold_drain(ctl, &task))
        return; /* approved, then held like a decision (drain_wait.h) */
    gh_ctl_submit(ctl, &task);
}

/* ---- drain_node in checkpoint mode (drain_wait.h) */

struct node_jobs {
    struct gh_controller *ctl;
    const char *node;
    char jobs[GH_DRAIN_WAIT_JOBS][320];
    int n;
};

static void add_job(struct node_jobs *nj, const char *job)
{
    for (int i = 0; i < nj->n; i++)
        if (!strcmp(nj->jobs[i], job))
            return;
    if (nj->n < GH_DRAIN_WAIT_JOBS)
        snprintf(nj->jobs[nj->n++], sizeof nj->jobs[0], "%s", job);
}

static int job_on_node(void *ud, const struct gh_kube_obj *o)
{
    struct node_jobs *nj = ud;
    json_t *pod = gh_kube_obj_json(o);
    const char *node = gh_json_str(pod, "spec", "nodeName");
    const char *phase = gh_json_str(pod, "status", "phase");
    char job[320];
    struct gh_job_caches jc = gh_job_watch_caches(nj->ctl->jobs);
    const char *j = node && !strcmp(node, nj->node) &&
                            !(phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
                        ? gh_job_of_pod(pod, &jc, job, sizeof job, NULL)
                        : NULL;
    if (j)
        add_job(nj, j);
    json_decref(pod);
    return GH_OK;
}

/* A decision that drains a node running jobs of checkpoint-mode
 * namespaces waits (stolen into ctl->waits); false: act now. */
static bool hold_drain(struct gh_controller *ctl, struct gh_task *t)
{
    if (!ctl->inf_namespaces || (t->kind == GH_TASK_DECISION && strcmp(t->mode, "act") != 0))
        return false;
    bool drains = false;
    for (int i = 0; i < t->n; i++)
        drains = drains ||
                 (t->v[i].action == GH_ACT_DRAIN_NODE && t->v[i].outcome == GH_GUARD_ALLOW);
    const char *node = t->d.node, *job = t->d.job;
    if (!drains || !node)
        return false;
    /* the incident's job, else the jobs with pods on the node */
    struct node_jobs nj = {.ctl = ctl, .node = node};
    if (job)
        add_job(&nj, job);
    else if (ctl->inf_pods)
        gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_pods), job_on_node, &nj);
    const char *wait[GH_DRAIN_WAIT_JOBS];
    int n = 0;
    int64_t timeout = INT64_MAX;
    for (int i = 0; i < nj.n; i++) {
        char ns[254];
        const char *slash = strchr(nj.jobs[i], '/');
        if (!slash)
            continue;
        snprintf(ns, sizeof ns, "%.*s", (int)(slash - nj.jobs[i]), nj.jobs[i]);
        const struct gh_kube_obj *no = gh_kube_store_get(
            gh_kube_informer_store(ctl->inf_namespaces), NULL, ns);
        json_t *nso = no ? gh_kube_obj_json(no) : NULL;
        struct gh_drain_mode m;
        struct gh_err err;
        if (gh_drain_mode_of(nso, &m, &err))
            GH_LOG(GH_LOG_WARN, "event=drain_mode_invalid namespace=%s error=\"%s\" (immediate)",
                   ns, err.msg);
        json_decref(nso);
        if (!m.checkpoint)
            continue;
        wait[n++] = nj.jobs[i];
        if (m.timeout_ns < timeout)
            timeout = m.timeout_ns;
    }
    if (n == 0)
        return false;
    int64_t t0 = now(ctl);
    char id[64];
    snprintf(id, sizeof id, "%s", t->id);
    t->first_arrival_ns = 0; /* a deliberate wait is no decision latency */
    /* its record (drain_hold.h), so that a restart resumes it */
    struct gh_task rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = GH_TASK_HOLD;
    snprintf(rec.id, sizeof rec.id, "%s", id);
    snprintf(rec.mode, sizeof rec.mode, "%s", t->mode);
    rec.incident = json_deep_copy(t->incident);
    gh_decision_read(&rec.d, rec.incident);
    rec.hold = gh_drain_hold_payload(t, wait, n, t0, t0 + timeout);
    struct gh_err err;
    if (gh_drain_waits_hold(ctl->waits, t, wait, n, t0, t0 + timeout, &err)) {
        GH_LOG(GH_LOG_WARN, "event=drain_not_held id=%s error=\"%s\" (drains now)", id, err.msg);
        json_decref(rec.incident);
        json_decref(rec.hold);
        return false;
    }
    if (rec.incident && rec.hold)
        gh_ctl_submit(ctl, &rec);
    else
        GH_LOG(GH_LOG_WARN,
               "event=drain_hold_not_recorded id=%s error=\"out of memory\" "
               "(a restart would decide it again)",
               id);
    json_decref(rec.incident);
    json_decref(rec.hold);
    if (!gh_kube_timer_add(ctl->c, timeout, drain_timer, ctl))
        GH_LOG(GH_LOG_WARN,
               "event=drain_timer_failed id=%s error=\"out of memory\" (released "
               "by a checkpoint or the next timer only)",
               id);
    GH_LOG(GH_LOG_INFO, "event=drain_waiting id=%s node=%s job=%s jobs=%d timeout_s=%.0f", id, node,
           wait[0], n, (double)timeout / 1e9);
    return true;
}

/* Hands the holds that are done to the executor. */
static void release_drains(struct gh_controller *ctl)
{
    struct gh_task t;
    if (!ctl->leading)
        return; /* the holds are the leader's */
    while (gh_drain_waits_take(ctl->waits, now(ctl), &t)) {
        json_t *dw = json_object_get(t.incident, "drain_wait");
        GH_LOG(GH_LOG_INFO, "event=drain_released id=%s outcome=%s waited_s=%.1f", t.id,
               gh_json_str(dw, "outcome") ? gh_json_str(dw, "outcome") : "-",
               json_number_value(json_object_get(dw, "waited_s")));
        gh_ctl_submit(ctl, &t);
    }
}

static void drain_timer(void *ud) { release_drains(ud); }

/* at: when the checkpoint arrived (a replayed one: its arrival) */
void gh_ctl_checkpoint_seen(struct gh_controller *ctl, const struct gh_signal *s, int64_t at)
{
    if (ctl->waits &&
        gh_drain_waits_checkpoint(ctl->waits, s->job, s->has_step ? s->step : -1, s->path, at))
        release_drains(ctl);
}

/* A hold read back from the store: held again until the same deadline. */
static void hold_resumed(void *ud, struct gh_drain_hold *h)
{
    struct gh_controller *ctl = ud;
    char id[64];
    snprintf(id, sizeof id, "%s", h->t.id);
    if (gh_drain_waits_has(ctl->waits, id)) {
        json_decref(h->t.incident);
        return;
    }
    const char *jobs[GH_DRAIN_WAIT_JOBS];
    for (int i = 0; i < h->n; i++)
        jobs[i] = h->jobs[i];
    int64_t left = h->deadline_ns - now(ctl);
    struct gh_err err;
    if (gh_drain_waits_hold(ctl->waits, &h->t, jobs, h->n, h->since_ns, h->deadline_ns, &err)) {
        GH_LOG(GH_LOG_ERROR, "event=drain_hold_not_resumed id=%s error=\"%s\"", id, err.msg);
        json_decref(h->t.incident);
        return;
    }
    if (!gh_kube_timer_add(ctl->c, left > 0 ? left : 0, drain_timer, ctl))
        GH_LOG(GH_LOG_WARN, "event=drain_timer_failed id=%s error=\"out of memory\"", id);
    GH_LOG(GH_LOG_INFO, "event=drain_hold_resumed id=%s job=%s jobs=%d left_s=%.1f", id, jobs[0],
           h->n, (double)left / 1e9);
}

static void hold_skipped(void *ud, const char *id, const struct gh_err *err)
{
    (void)ud;
    GH_LOG(GH_LOG_WARN, "event=drain_hold_unreadable id=%s error=\"%s\"", id, err->msg);
}

/* Leading: the drains held by the previous leader (or this process before
 * a restart) are held again, with their deadlines (drain_hold.h). Reads
 * the store from the loop, once per leadership. */
void gh_ctl_resume_holds(struct gh_controller *ctl, struct gh_audit *a)
{
    struct gh_err err;
    int64_t back = ctl->o.remember_ns > 0 ? ctl->o.remember_ns : 7 * 24 * 3600 * GH_NS_PER_S;
    if (gh_drain_holds_resume(a, now(ctl) - back, now(ctl), ctl->identity, hold_resumed,
                              hold_skipped, ctl, &err))
        GH_LOG(GH_LOG_ERROR, "event=drain_holds_unread error=\"%s\"", err.msg);
    release_drains(ctl); /* those whose deadline passed meanwhile */
}
