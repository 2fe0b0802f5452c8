/* controller.c - the controller's event loop: informers and ingest into the
 * engine, incidents through the guards to the executor, approvals, the
 * validation gate, leader election and metrics. */
#include "control/controller.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/journal.h"
#include "audit/step_writer.h"
#include "audit/store_watch.h"
#include "common/json.h"
#include "common/log.h"
#include "common/mono.h"
#include "control/executor.h"
#include "control/job_costs.h"
#include "control/job_kinds.h"
#include "control/job_watch.h"
#include "control/kube_signals.h"
#include "control/drain_hold.h"
#include "control/drain_wait.h"
#include "control/metrics.h"
#include "control/policy_cr.h"
#include "engine/detector.h"
#include "engine/engine.h"
#include "engine/strmap.h"
#include "control/agent_auth.h"
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
#define COSTS_MAX 65536 /* jobs whose pods state costs (GH_TOPO_MAX_JOBS) */
#define EVENT_MAX_AGE (5 * 60 * GH_NS_PER_S) /* Events older at first sight are history */
#define REPLAY_HOLD_MAX_NS (30 * GH_NS_PER_S) /* replayed signals wait this long for informers */
#define EVENTS_CACHED_MAX 4096 /* Events kept per Event informer (the latest added) */
/* a leader whose store has not taken a write for this long steps down */
#define STORE_STEP_DOWN_NS (5 * GH_NS_PER_S)
#define FENCE_NONE INT64_MAX /* no leader election: this process always leads */

struct gh_controller {
    struct gh_controller_opts o;
    char identity[128];
    struct gh_node_conditions node_conds; /* watched for node_condition signals */
    const struct gh_clock *clock;
    struct gh_kube_client *c;
    struct gh_engine *engine;
    struct gh_guard *guard;
    struct gh_ctl_metrics *metrics;
    struct gh_executor *ex;
    struct gh_step_writer *telemetry; /* step samples into the audit store */
    struct gh_sigqueue *queue;
    struct gh_ingest_server *ingest;
    struct gh_agent_auth *agent_auth; /* NULL: no agent authentication */
    struct gh_kube_leader *leader;
    struct gh_kube_informer *inf_nodes, *inf_pods, *inf_gnh, *inf_incidents, *inf_policies;
    struct gh_job_watch *jobs; /* Job, JobSet, PyTorchJob informers: whose pods are whose */
    bool leading;
    atomic_bool ready; /* = leading, for /readyz on the ingest thread */
    /* Fencing: the monotonic time until which this process surely leads
     * (gh_kube_leader_fence; FENCE_NONE without election; 0: not leading).
     * Read on the ingest and executor threads. */
    _Atomic int64_t fence;
    struct gh_store_watch *watch; /* whether the audit store takes writes */
    struct gh_store_watch_state store; /* as the loop last saw it */
    bool held_for_store;          /* leadership held back: the store cannot record */
    struct gh_strmap *known;    /* incident ids decided (here or before a restart) */
    struct gh_strmap *awaiting; /* id -> json_t* incident waiting for approval (NULL: done) */
    size_t n_awaiting;
    struct gh_strmap *released; /* "node@isolated-at" whose release was asked */
    struct gh_strmap *answers;  /* "request-id|result" of agent answers submitted */
    int64_t requests_scanned;   /* when unanswered requests were last looked at */
    struct {
        json_t *inc;
        int64_t first_arrival;
    } deferred[DEFERRED_MAX];     /* decided while standing by, oldest first */
    size_t n_deferred;
    int64_t last_tick;
    struct gh_guard_config base_guards;
    struct gh_guard_config guards_logged; /* as last logged (event=guards) */
    bool guards_logged_once;
    struct gh_kube_informer *inf_events;      /* Events in the watched namespace(s) */
    struct gh_kube_informer *inf_node_events; /* Node Events ("default") when not watched */
    struct gh_policy_crset *crset;            /* RecoveryPolicy rules (policy_cr.h) */
    struct gh_policy *policy_now;             /* the engine's policy after a reload (owned) */
    struct gh_kube_informer *inf_namespaces;  /* drain modes (drain_wait.h) */
    struct gh_drain_waits *waits;             /* drain decisions waiting for a checkpoint */
    struct gh_journal *journal;               /* accepted signals; the ingest thread's */
    int64_t journal_keep;                     /* its retention (ns) */
    int64_t journal_seen_until;               /* replayed up to this arrival (ns) */
    int64_t led_until;                        /* when this process last stopped leading; 0: never led */
    int64_t replay_hold_until;                /* mono ns: replayed signals wait for the
                                                 informers (topology, policy); 0: none */
    struct gh_strmap *decided;                /* decision keys (journal.h) of the stored
                                                 incidents; NULL without a journal */
    struct gh_strmap *costs;                  /* job -> struct job_cost * (owned): the
                                                 costs its annotations state */
    int64_t costs_refreshed;                  /* when their remaining runs were last set */
};

/* A job's costs as its object and pods state them (job_costs.h), in
 * ctl->costs. */
struct job_cost {
    struct gh_job_costs c; /* the job object's figures, else its pod's */
    char end_on[340];      /* who stated the end: "pod NS/NAME", "JobSet NS/NAME" */
    char cost_on[340];     /* ... and the restart cost */
    uint64_t warned;       /* hash of the last invalid-annotation warnings logged */
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

static const char *ann(const json_t *o, const char *k)
{
    return gh_json_str(o, "metadata", "annotations", k);
}

/* ---- signals into the engine */

static void checkpoint_seen(struct gh_controller *ctl, const struct gh_signal *s, int64_t at);

static void feed(struct gh_controller *ctl, struct gh_signal *s, const char *origin)
{
    struct gh_err err;
    if (s->kind == GH_KIND_CHECKPOINT && s->ckpt_state == GH_CKPT_SAVED && s->job)
        checkpoint_seen(ctl, s, now(ctl));
    (void)gh_step_writer_note(ctl->telemetry, s); /* memory only; its thread writes */
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

/* ---- fencing: nothing is accepted or done past the lease */

/* True while this process surely leads, on the monotonic clock: checked
 * where the loop's own view (ctl->leading) may be late - the ingest thread
 * accepting a batch, a worker about to record or act, the loop after a
 * pause (SIGSTOP, a stalled VM) before its deadline timer ran. Any thread. */
static bool fenced_in(struct gh_controller *ctl)
{
    int64_t f = atomic_load(&ctl->fence);
    return f == FENCE_NONE || (f > 0 && gh_mono_ns() < f);
}

static bool may_act(void *ud) { return fenced_in(ud); }

/* ---- the signal journal: durable before the ingest answers 200 */

/* The ingest sink (on the ingest server's thread): the batch is committed
 * to the journal, then queued; a journal that cannot write answers 503 and
 * the sender keeps the batch. Only while fenced in, before and after the
 * commit: a batch committed after the lease could pass is not
 * acknowledged (the sender sends it again, to the leader), so every batch
 * answered 200 is in the journal before another replica can lead and read
 * it (journal_catch_up). */
static int journal_sink(void *ud, struct gh_signal *sigs, size_t n)
{
    struct gh_controller *ctl = ud;
    struct gh_err err;
    if (!fenced_in(ctl))
        return GH_EAGAIN;
    if (ctl->journal) {
        int rc = gh_journal_append(ctl->journal, sigs, n, now(ctl), &err);
        gh_store_watch_note(ctl->watch, rc, err.msg);
        if (rc != GH_OK) {
            GH_LOG(GH_LOG_WARN, "event=journal_write_failed signals=%zu error=\"%s\"", n,
                   err.msg);
            return GH_EAGAIN;
        }
        if (!fenced_in(ctl)) {
            GH_LOG(GH_LOG_WARN, "event=batch_not_acknowledged signals=%zu reason=\"the lease "
                   "may have passed during the journal commit\"", n);
            return GH_EAGAIN;
        }
    }
    return gh_sigqueue_push(ctl->queue, sigs, n);
}

/* The longest window a detector needs to rebuild what it held before a
 * restart. Not the long histories (flap_lookback, 28 d by default, and
 * same_gpu_lookback, 24 h): a journal of every signal over those would not
 * be small; --journal-retention raises it. */
static int64_t longest_window(const struct gh_policy *p)
{
    const struct gh_policy_settings *s = &p->settings;
    int64_t w[] = {s->hold_ns,          s->episode_ns,    s->hardware_lookback_ns,
                   s->counter_window_ns, s->nic_window_ns, s->flap_same_failure_ns,
                   s->node_down_ns};
    int64_t m = 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        m = w[i] > m ? w[i] : m;
    for (int i = 0; i < p->n_rules; i++)
        m = p->rules[i].window_ns > m ? p->rules[i].window_ns : m;
    return m;
}

static int note_decided(void *ud, const char *key)
{
    struct gh_controller *ctl = ud;
    (void)gh_strmap_intern(ctl->decided, key, NULL, NULL);
    return GH_OK;
}

static int replay_one(void *ud, struct gh_signal *s, int64_t arrival_ns)
{
    struct gh_controller *ctl = ud;
    if (s->kind == GH_KIND_CHECKPOINT && s->ckpt_state == GH_CKPT_SAVED && s->job)
        checkpoint_seen(ctl, s, arrival_ns);
    /* not to the step writer: its buckets hold these already */
    if (gh_engine_ingest_steal(ctl->engine, s, arrival_ns, NULL) == GH_OK)
        gh_ctl_metrics_signals(ctl->metrics, "ingest", 1);
    gh_signal_clear(s);
    return GH_OK;
}

/* Opens the journal and feeds what it kept within the retention to the
 * engine, oldest arrival first; incidents already decided are suppressed
 * by the known set when the engine decides them again. */
static int journal_start(struct gh_controller *ctl, const struct gh_controller_opts *o,
                         struct gh_err *err)
{
    if (o->journal_retention_ns < 0) {
        GH_LOG(GH_LOG_WARN, "event=journal_off note=\"a 200 from the ingest is not durable\"");
        return GH_OK;
    }
    int64_t keep = o->journal_retention_ns;
    if (keep == 0) {
        keep = longest_window(gh_engine_policy(ctl->engine));
        keep = keep > GH_JOURNAL_DEFAULT_RETENTION_NS ? keep : GH_JOURNAL_DEFAULT_RETENTION_NS;
    }
    struct gh_journal_opts jo = {.db_url = o->db_url, .retention_ns = keep, .clock = ctl->clock};
    int rc = gh_journal_open(&jo, &ctl->journal, err);
    if (rc)
        return rc;
    ctl->journal_keep = keep;
    int64_t t0 = gh_mono_ns(), since = now(ctl) - keep;
    ctl->journal_seen_until = now(ctl);
    struct gh_journal_replay_stats st;
    if (!(ctl->decided = gh_strmap_new(KNOWN_MAX)))
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    /* decisions from before the oldest replayed signal cannot recur */
    if ((rc = gh_journal_decided(ctl->journal, since, note_decided, ctl, err)) ||
        (rc = gh_journal_prune(ctl->journal, since, NULL, err)) ||
        (rc = gh_journal_replay(ctl->journal, since, replay_one, ctl, &st, err)))
        return rc;
    GH_LOG(GH_LOG_INFO, "event=journal_replayed signals=%zu unreadable=%zu retention_s=%lld ms=%.1f",
           st.replayed, st.unreadable, (long long)(keep / GH_NS_PER_S),
           (double)(gh_mono_ns() - t0) / 1e6);
    /* decided only once the pods (which job is on which node) and the
     * RecoveryPolicy rules are known, as they were when the signals came:
     * the incident ids (class, node, job, first evidence, rule) match */
    if (st.replayed > 0)
        ctl->replay_hold_until = gh_mono_ns() + REPLAY_HOLD_MAX_NS;
    return GH_OK;
}

/* A standby becoming leader: what the previous leader journalled since
 * this replica's start never reached its engine (a standby refuses
 * signals), so it is replayed now, before this replica takes signals
 * itself (the journal is the ingest thread's, idle until then). Ids seen
 * before are duplicates to the engine; decisions already in the store are
 * known by their keys, and the executor drops a recorded incident. */
static void journal_catch_up(struct gh_controller *ctl)
{
    if (!ctl->journal)
        return;
    int64_t t0 = gh_mono_ns(), t = now(ctl);
    int64_t since = ctl->journal_seen_until - 5 * GH_NS_PER_S; /* clocks of replicas */
    if (since < t - ctl->journal_keep)
        since = t - ctl->journal_keep;
    struct gh_journal_replay_stats st = {0};
    struct gh_err err;
    if (gh_journal_decided(ctl->journal, since, note_decided, ctl, &err) ||
        gh_journal_replay(ctl->journal, since, replay_one, ctl, &st, &err)) {
        GH_LOG(GH_LOG_WARN, "event=journal_catch_up_failed error=\"%s\"", err.msg);
        return;
    }
    ctl->journal_seen_until = t;
    GH_LOG(GH_LOG_INFO, "event=journal_caught_up signals=%zu unreadable=%zu ms=%.1f",
           st.replayed, st.unreadable, (double)(gh_mono_ns() - t0) / 1e6);
}

/* True while replayed signals wait for the informers' first lists. */
static bool replay_held(struct gh_controller *ctl)
{
    if (!ctl->replay_hold_until)
        return false;
    int64_t t = gh_mono_ns();
    bool synced = gh_kube_informer_synced(ctl->inf_nodes) &&
                  gh_kube_informer_synced(ctl->inf_pods) &&
                  gh_kube_informer_synced(ctl->inf_policies);
    if (!synced && t < ctl->replay_hold_until)
        return true;
    GH_LOG(synced ? GH_LOG_INFO : GH_LOG_WARN, "event=journal_replay_released synced=%d waited_ms=%.0f",
           synced, (double)(t - (ctl->replay_hold_until - REPLAY_HOLD_MAX_NS)) / 1e6);
    ctl->replay_hold_until = 0;
    return false;
}

/* An incident (stolen) kept for this process's next leadership: decided
 * while standing by, or handed back by the executor unrecorded. */
static void defer(struct gh_controller *ctl, json_t *j, int64_t first)
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

static void submit(struct gh_controller *ctl, struct gh_task *t)
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
    const char *id = gh_json_str(inc, "id"), *node = gh_json_str(inc, "node");
    int cls = gh_class_from_name(gh_json_str(inc, "class") ? gh_json_str(inc, "class") : "");
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
           gh_json_str(inc, "class") ? gh_json_str(inc, "class") : "-", node ? node : "-",
           gh_json_str(inc, "job") ? gh_json_str(inc, "job") : "-", gh_json_str(inc, "rule") ? gh_json_str(inc, "rule") : "-",
           task.mode);
    task.incident = inc;
    if (!awaits && hold_drain(ctl, &task))
        return; /* submitted when the jobs have checkpointed, or at the timeout */
    submit(ctl, &task);
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
        snprintf(more, sizeof more, "Job costs: the policy defaults (no valid %s, %s or %s "
                 "annotation on the job or its pods).", GH_ANN_EXPECTED_END, GH_ANN_REMAINING,
                 GH_ANN_RESTART_COST);
    append_reason(j, more);
}

/* A RecoveryPolicy with a nodeSelector governs only the nodes it selects
 * (policy_cr.h): the engine skips its rules for other nodes (rule_governs);
 * when no rule governs the node, the first matching one decided, and the
 * incident is recorded with no action and says why. False then. */
static bool node_governed(struct gh_controller *ctl, int rule, const char *node, char *why,
                          size_t cap)
{
    if (!node || !ctl->crset || !gh_policy_crset_has_selectors(ctl->crset))
        return true;
    const struct gh_kube_obj *no =
        ctl->inf_nodes ? gh_kube_store_get(gh_kube_informer_store(ctl->inf_nodes), NULL, node)
                       : NULL;
    json_t *n = no ? gh_kube_obj_json(no) : NULL; /* unknown node: no labels */
    bool yes = gh_policy_crset_governs(
        ctl->crset, rule, json_object_get(json_object_get(n, "metadata"), "labels"), why, cap);
    json_decref(n);
    return yes;
}

/* The engine's rule filter (gh_engine_set_rule_filter). */
static bool rule_governs(void *ud, int rule, const char *node)
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
    snprintf(more, sizeof more, "Not acted: %s, and node %s does not have them "
             "(no RecoveryPolicy governs this node for rule %s).", why, inc->node, inc->rule);
    append_reason(j, more);
    GH_LOG(GH_LOG_INFO, "event=incident_not_governed id=%s node=%s rule=%s why=\"%s\"", inc->id,
           inc->node, inc->rule, why);
    return false;
}

static void on_incident(void *ud, const struct gh_incident *inc)
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
    if (!governed(ctl, inc, j))
        json_object_set_new(j, "actions", json_pack("[s]", gh_action_name(GH_ACT_NONE)));
    int64_t first = 0;
    for (size_t i = 0; i < inc->n_evidence; i++)
        if (inc->evidence[i]->arrival_ns && (!first || inc->evidence[i]->arrival_ns < first))
            first = inc->evidence[i]->arrival_ns;
    if (ctl->leading && fenced_in(ctl)) {
        decide(ctl, j, first);
        return;
    }
    /* A standby keeps what it decided (agents may post to any replica) and
     * hands it over when it leads; the shared audit store drops what the
     * leader of the time already recorded (same incident id). */
    defer(ctl, j, first);
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
    const char *node = gh_json_str(inc, "node");
    gh_guard_check(ctl->guard, acts, n, node, true, t, task.v);
    count_trips(ctl, task.v, task.n);
    gh_guard_commit(ctl->guard, task.v, task.n, node, t);
    task.incident = inc; /* the executor reads it from the store; the hold needs it */
    GH_LOG(GH_LOG_INFO, "event=approved id=%s by=\"%s\"", id, by ? by : "");
    if (hold_drain(ctl, &task))
        return; /* approved, then held like a decision (drain_wait.h) */
    submit(ctl, &task);
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
    const char *j = node && !strcmp(node, nj->node) &&
                            !(phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
                        ? gh_job_of_pod(pod, gh_job_watch_jobs(nj->ctl->jobs), job, sizeof job,
                                        NULL)
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
        drains = drains || (t->v[i].action == GH_ACT_DRAIN_NODE &&
                            t->v[i].outcome == GH_GUARD_ALLOW);
    const char *node = gh_json_str(t->incident, "node"), *job = gh_json_str(t->incident, "job");
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
        const struct gh_kube_obj *no =
            gh_kube_store_get(gh_kube_informer_store(ctl->inf_namespaces), NULL, ns);
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
    rec.hold = gh_drain_hold_payload(t, wait, n, t0, t0 + timeout);
    struct gh_err err;
    if (gh_drain_waits_hold(ctl->waits, t, wait, n, t0, t0 + timeout, &err)) {
        GH_LOG(GH_LOG_WARN, "event=drain_not_held id=%s error=\"%s\" (drains now)", id, err.msg);
        json_decref(rec.incident);
        json_decref(rec.hold);
        return false;
    }
    if (rec.incident && rec.hold)
        submit(ctl, &rec);
    else
        GH_LOG(GH_LOG_WARN, "event=drain_hold_not_recorded id=%s error=\"out of memory\" "
               "(a restart would decide it again)", id);
    json_decref(rec.incident);
    json_decref(rec.hold);
    if (!gh_kube_timer_add(ctl->c, timeout, drain_timer, ctl))
        GH_LOG(GH_LOG_WARN, "event=drain_timer_failed id=%s error=\"out of memory\" (released "
               "by a checkpoint or the next timer only)", id);
    GH_LOG(GH_LOG_INFO, "event=drain_waiting id=%s node=%s job=%s jobs=%d timeout_s=%.0f", id,
           node, wait[0], n, (double)timeout / 1e9);
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
        submit(ctl, &t);
    }
}

static void drain_timer(void *ud) { release_drains(ud); }

/* at: when the checkpoint arrived (a replayed one: its arrival) */
static void checkpoint_seen(struct gh_controller *ctl, const struct gh_signal *s, int64_t at)
{
    if (ctl->waits && gh_drain_waits_checkpoint(ctl->waits, s->job, s->has_step ? s->step : -1,
                                                s->path, at))
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
    GH_LOG(GH_LOG_INFO, "event=drain_hold_resumed id=%s job=%s jobs=%d left_s=%.1f", id,
           jobs[0], h->n, (double)left / 1e9);
}

/* Leading: the drains held by the previous leader (or this process before
 * a restart) are held again, with their deadlines (drain_hold.h). Reads
 * the store from the loop, once per leadership. */
static void resume_holds(struct gh_controller *ctl, struct gh_audit *a)
{
    struct gh_err err;
    int64_t back = ctl->o.remember_ns > 0 ? ctl->o.remember_ns : 7 * 24 * 3600 * GH_NS_PER_S;
    if (gh_drain_holds_resume(a, now(ctl) - back, now(ctl), ctl->identity, hold_resumed, ctl,
                              &err))
        GH_LOG(GH_LOG_ERROR, "event=drain_holds_unread error=\"%s\"", err.msg);
    release_drains(ctl); /* those whose deadline passed meanwhile */
}

/* ---- a job's remaining run and restart cost (job_costs.h) */

/* The job object (kind "Job", "JobSet", "PyTorchJob") from its informer's
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
    uint64_t h = rp || rj ? gh_hash_str(gh_hash_str(GH_HASH_INIT, rp ? ep.msg : ""),
                                        rj ? ej.msg : "")
                          : 0;
    if (h && h != jc->warned) {
        if (rj)
            GH_LOG(GH_LOG_WARN, "event=job_costs_invalid job=%s %s error=\"%s\" (the policy "
                   "default is used for it)", job, job_is, ej.msg);
        if (rp)
            GH_LOG(GH_LOG_WARN, "event=job_costs_invalid job=%s %s error=\"%s\" (the policy "
                   "default is used for it)", job, pod_is, ep.msg);
    }
    jc->warned = h;
}

/* Job ji (its topology index, -1: none) gets the remaining run and restart
 * cost its entry states as of now (unstated: the policy defaults). */
static void job_costs_apply(struct gh_controller *ctl, const char *job, long ji)
{
    long k = ctl->costs && ji >= 0 ? gh_strmap_find(ctl->costs, job) : -1;
    const struct job_cost *jc = k >= 0 ? gh_strmap_value(ctl->costs, (size_t)k) : NULL;
    if (jc)
        gh_topology_set_job_costs(gh_ctx_topology(ctl->engine), ji,
                                  gh_job_costs_remaining_s(&jc->c, now(ctl)),
                                  gh_job_costs_restart_s(&jc->c));
}

/* Remaining runs shrink as time passes: set again once a second. */
static void job_costs_refresh(struct gh_controller *ctl)
{
    int64_t t = now(ctl);
    if (!ctl->costs || t - ctl->costs_refreshed < GH_NS_PER_S)
        return;
    ctl->costs_refreshed = t;
    struct gh_topology *topo = gh_ctx_topology(ctl->engine);
    for (size_t i = 0; i < gh_strmap_count(ctl->costs); i++) {
        const char *job = gh_strmap_key(ctl->costs, i);
        if (job)
            job_costs_apply(ctl, job, gh_topology_find_job(topo, job));
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
    const char *j = gh_job_of_pod(pod, gh_job_watch_jobs(ctl->jobs), job, sizeof job, &kind);
    const char *node = gh_json_str(pod, "spec", "nodeName");
    const char *phase = gh_json_str(pod, "status", "phase");
    if (!j || !node || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return;
    /* the engine's own topology: a job the informers show is declared, so
     * a fault on its node is the job's fault */
    struct gh_topology *topo = gh_ctx_topology(ctl->engine);
    job_costs_note(ctl, j, kind ? kind : "", pod);
    long ji = gh_topology_find_job(topo, j);
    if (!(ji >= 0 && gh_topology_job_declared(topo, (size_t)ji) &&
          gh_topology_job_has_node(topo, (size_t)ji, node))) {
        const char *nodes[1] = {node};
        ji = gh_topology_add_job(topo, j, nodes, 1, 0);
    }
    job_costs_apply(ctl, j, ji);
}

static void pod_change(void *ud, const json_t *old, const json_t *obj)
{
    struct gh_controller *ctl = ud;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    size_t n = gh_kube_pod_signals(old, obj, now(ctl), s, GH_KUBE_SIGNALS_MAX);
    /* the job as the owners say (a JobSet's pod is the JobSet's) */
    char job[320];
    const char *j = gh_job_of_pod(obj, gh_job_watch_jobs(ctl->jobs), job, sizeof job, NULL);
    for (size_t i = 0; j && i < n; i++)
        if (s[i].job)
            (void)gh_signal_set_str(&s[i].job, j, strlen(j));
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
    const char *j = gh_job_of_pod(obj, gh_job_watch_jobs(ctl->jobs), job, sizeof job, NULL);
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
    gh_kube_store_index_foreach(gh_kube_informer_store(ctl->inf_pods), "job", slash + 1,
                                place_pod, &p);
}

/* A Job, JobSet or PyTorchJob changed: place its pods again (the owner
 * may reach its cache after them); a JobSet's child Job is no job of its
 * own: what was placed under its name moves to the JobSet. */
static void job_changed(void *ud, const char *job, const char *part)
{
    struct gh_controller *ctl = ud;
    if (part) {
        gh_engine_forget_job(ctl->engine, part);
        job_costs_forget(ctl, part);
        place_pods(ctl, part);
    }
    place_pods(ctl, job);
}

/* A training job is over (job_finished): the engine stops restarting it. */
static void job_signal(void *ud, struct gh_signal *s) { feed(ud, s, "kube"); }

static bool held_by_gpuheal(const json_t *node)
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
    if (!old || !held_by_gpuheal(old))
        return false;
    if (!held_by_gpuheal(obj))
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
    if (returned_to_service(old, obj))
        gh_engine_node_returned(ctl->engine, name, now(ctl));
    count_nodes(ctl);
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    if (gh_kube_node_signals(old, obj, now(ctl), s, 1) == 1)
        feed(ctl, &s[0], "kube");
    /* the conditions other agents set (NPD's checks), as they change */
    size_t nc = gh_kube_node_condition_signals(old, obj, &ctl->node_conds, now(ctl), s,
                                               GH_KUBE_SIGNALS_MAX);
    for (size_t i = 0; i < nc; i++)
        feed(ctl, &s[i], "kube");
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
    if (!ctl->leading || !node || strlen(node) >= sizeof ((struct gh_task *)0)->node)
        return;
    int64_t limit = ctl->o.request_timeout_ns > 0 ? ctl->o.request_timeout_ns
                                                  : 3600 * GH_NS_PER_S;
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
            snprintf(t.req_detail, sizeof t.req_detail, "the agent on %s did not answer request "
                     "%s (posted %s) within %llds (--request-timeout)", node, id, at,
                     (long long)(limit / GH_NS_PER_S));
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
            submit(ctl, &t);
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
static void scan_requests(struct gh_controller *ctl)
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
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        if (gh_json_str(c, "type") && !strcmp(gh_json_str(c, "type"), "Accepted") && gh_json_str(c, "status") &&
            !strcmp(gh_json_str(c, "status"), want) && gh_json_str(c, "reason") &&
            !strcmp(gh_json_str(c, "reason"), v->reason) && gh_json_str(c, "message") &&
            !strcmp(gh_json_str(c, "message"), v->message) &&
            json_integer_value(json_object_get(st, "observedGeneration")) == gen)
            return;
    }
    char ts[GH_RFC3339_MAX];
    gh_time_format_rfc3339(now(ctl), ts, sizeof ts);
    json_t *patch = json_pack(
        "{s:{s:I, s:i, s:s, s:[{s:s, s:s, s:s, s:s, s:s, s:I}, {s:s, s:s, s:s, s:s, s:s, s:I}]}}",
        "status", "observedGeneration", (json_int_t)gen, "ruleCount", v->rules, "lastEvaluated",
        ts, "conditions", "type", "Accepted", "status", want, "reason", v->reason, "message",
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
        GH_LOG(GH_LOG_WARN, "event=policy_rejected name=%s reason=%s error=\"%s\"", name,
               v.reason, v.message);
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
           from ? "RecoveryPolicy" : ctl->o.policy ? "--policy" : "built-in", from);
}

static void policies_changed(struct gh_controller *ctl)
{
    struct gh_guard_config g = ctl->base_guards;
    gh_kube_store_foreach(gh_kube_informer_store(ctl->inf_policies), apply_policy, &g);
    gh_guard_set_config(ctl->guard, &g);
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
                                                         gh_json_str(reg, "namespace"), gh_json_str(reg, "name"));
        pod = po ? gh_kube_obj_json(po) : NULL;
    }
    struct gh_signal s[1];
    if (gh_kube_event_signals(old, ev, pod, now(ctl), EVENT_MAX_AGE, s, 1) == 1)
        feed(ctl, &s[0], "kube");
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
                                      .max_objects =
                                          res == &gh_kube_res_events ? EVENTS_CACHED_MAX : 0};
    int rc = gh_kube_informer_new(ctl->c, &o, h, ctl, out, err);
    if (!rc)
        rc = gh_kube_informer_start(*out, err);
    return rc;
}

/* ---- leadership */

/* /readyz: only the leader is ready, so that the ingest Service routes
 * agents to it (a standby would hold their incidents until a failover),
 * and only while its lease surely holds (fencing) and its audit store
 * takes writes (what it acknowledged could not be kept otherwise). The
 * same answer gates POST /v1/signals. On the ingest thread. */
static bool ready_to_serve(void *ud)
{
    struct gh_controller *ctl = ud;
    return atomic_load(&ctl->ready) && fenced_in(ctl) &&
           (!ctl->watch || gh_store_watch_ok(ctl->watch));
}

struct restore_ctx {
    struct gh_controller *ctl;
    size_t n;
};

static int restore_one(void *ud, int64_t ts, const char *action, const char *target)
{
    struct restore_ctx *r = ud;
    int a = gh_action_from_name(action);
    if (a < 0)
        return GH_OK;
    const char *node = strncmp(target, "node/", 5) == 0 ? target + 5 : NULL;
    gh_guard_restore(r->ctl->guard, (enum gh_action)a, node, ts);
    r->n++;
    return GH_OK;
}

/* Counts what earlier leaders allowed within the longest guard window (the
 * hourly rate, the cooldown, the storm window), so that a restart or a
 * failover neither resets the rate nor forgets a cooldown. What this process
 * allowed while it led is in memory already: only rows since it last
 * stopped leading are read. A short read on the loop, once per won lease. */
static void restore_guards(struct gh_controller *ctl, struct gh_audit *a)
{
    const struct gh_guard_config *gc = gh_guard_config(ctl->guard);
    int64_t t = now(ctl), back = 3600 * GH_NS_PER_S;
    if (gc->node_cooldown_ns > back)
        back = gc->node_cooldown_ns;
    if (gc->storm_window_ns > back)
        back = gc->storm_window_ns;
    int64_t since = t - back;
    if (ctl->led_until > since)
        since = ctl->led_until;
    struct restore_ctx r = {ctl, 0};
    struct gh_err err;
    if (gh_audit_allowed_since(a, since, restore_one, &r, &err)) {
        GH_LOG(GH_LOG_WARN, "event=guards_not_restored error=\"%s\" (rate and cooldowns start "
               "empty)", err.msg);
    } else if (r.n) {
        GH_LOG(GH_LOG_INFO, "event=guards_restored actions=%zu since_s=%.0f", r.n,
               (double)(t - since) / 1e9);
    }
}

/* Leadership won: what earlier leaders left in the store (the guards'
 * history, the held drains) is read through one store opened for both. */
static void lead(struct gh_controller *ctl)
{
    ctl->leading = true;
    atomic_store(&ctl->fence, ctl->leader ? gh_kube_leader_fence(ctl->leader) : FENCE_NONE);
    struct gh_audit *a = NULL;
    struct gh_err err;
    if (gh_audit_open(ctl->o.db_url, &a, &err)) {
        GH_LOG(GH_LOG_ERROR, "event=store_unread error=\"%s\" (guards start empty, held "
               "drains not resumed)", err.msg);
        a = NULL;
    }
    if (a)
        restore_guards(ctl, a);
    journal_catch_up(ctl);
    atomic_store(&ctl->ready, true);
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_LEADER, 1);
    struct gh_task t;
    memset(&t, 0, sizeof t);
    t.kind = GH_TASK_REPLAY;
    submit(ctl, &t);
    if (a)
        resume_holds(ctl, a);
    gh_audit_close(a);
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
    atomic_store(&ctl->fence, 0);
    ctl->led_until = now(ctl);
    gh_drain_waits_clear(ctl->waits); /* the store keeps them for the next leader */
    atomic_store(&ctl->ready, false);
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_LEADER, 0);
    GH_LOG(GH_LOG_WARN, "event=not_leading");
}

/* Each loop turn: the fence moves on with each renewal. */
static void fence_refresh(struct gh_controller *ctl)
{
    if (ctl->leading && ctl->leader)
        atomic_store(&ctl->fence, gh_kube_leader_fence(ctl->leader));
}

/* Each loop turn: what the store watch says, logged when it changes; a
 * leader whose store has taken no write for STORE_STEP_DOWN_NS steps down
 * (another replica may reach the store), and contends again once it
 * records. Readiness follows the watch at once (ready_to_serve). */
static void store_check(struct gh_controller *ctl)
{
    struct gh_store_watch_state st;
    gh_store_watch_state(ctl->watch, &st);
    if (st.changes != ctl->store.changes) {
        if (st.ok)
            /* the snapshot taken at the outage counts its first failed write */
            GH_LOG(GH_LOG_INFO, "event=store_recovered down_s=%.1f failed_writes=%llu (ready "
                   "again while leading)", (double)(st.since_ns - ctl->store.since_ns) / 1e9,
                   (unsigned long long)(st.failures - ctl->store.failures + 1));
        else
            GH_LOG(GH_LOG_ERROR, "event=store_unavailable error=\"%s\" (not ready: signals are "
                   "refused with 503 and kept by their senders)", st.error);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_STORE_UP, st.ok ? 1 : 0);
        ctl->store = st;
    }
    if (!ctl->leader)
        return;
    bool hold = !st.ok && gh_mono_ns() - st.since_ns >= STORE_STEP_DOWN_NS;
    if (hold != ctl->held_for_store) {
        ctl->held_for_store = hold;
        if (hold)
            GH_LOG(GH_LOG_ERROR, "event=store_step_down down_s=%.1f error=\"%s\" (leadership "
                   "held back until the store records)", (double)(gh_mono_ns() - st.since_ns) / 1e9,
                   st.error);
        else
            GH_LOG(GH_LOG_INFO, "event=store_contend_again");
        gh_kube_leader_hold(ctl->leader, hold);
    }
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
            if (r[i].retrying) {
                gh_ctl_metrics_commit_failure(ctl->metrics);
                GH_LOG(GH_LOG_ERROR, "event=decision_commit_failed id=%s node=%s attempt=%d "
                       "error=\"%s\" (tried again; nothing is done before it commits)",
                       r[i].id, r[i].node[0] ? r[i].node : "-", r[i].attempt, r[i].error);
                continue;
            }
            if (r[i].deferred) {
                /* not recorded: for this process's next leadership (the
                 * leader of now decides it from the journal) */
                long k = gh_strmap_find(ctl->known, r[i].id);
                if (k >= 0)
                    gh_strmap_remove(ctl->known, (size_t)k);
                GH_LOG(GH_LOG_WARN, "event=decision_deferred id=%s node=%s reason=\"not "
                       "surely leading: not recorded, not acted\"", r[i].id,
                       r[i].node[0] ? r[i].node : "-");
                if (r[i].incident)
                    defer(ctl, r[i].incident, r[i].first_arrival_ns);
                r[i].incident = NULL;
            }
            if (r[i].fenced)
                GH_LOG(GH_LOG_WARN, "event=actions_left_pending id=%s reason=\"not surely "
                       "leading\" (the leader completes them)", r[i].id);
            if (r[i].store_failed)
                GH_LOG(GH_LOG_ERROR, "event=decision_not_recorded id=%s node=%s error=\"%s\" "
                       "(stopping: the journal keeps its signals for the next start)", r[i].id,
                       r[i].node[0] ? r[i].node : "-", r[i].error);
            for (int k = 0; k < r[i].n; k++)
                gh_ctl_metrics_action(ctl->metrics,
                                      r[i].kind == GH_TASK_RELEASE ? -1 : (int)r[i].acts[k].action,
                                      r[i].acts[k].result);
            if (r[i].first_issue_ns && r[i].first_arrival_ns &&
                r[i].first_issue_ns >= r[i].first_arrival_ns)
                gh_ctl_metrics_latency(ctl->metrics,
                                       (double)(r[i].first_issue_ns - r[i].first_arrival_ns) / 1e9);
            bool nothing_done = r[i].store_failed || r[i].deferred ||
                                !strcmp(r[i].phase, "Duplicate");
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
    if (!o->token_file && !o->agent_service_account && !o->allow_anonymous)
        return gh_err_set(err, GH_EINVAL,
                          "controller: --token-file or --agent-service-account is needed");
    struct gh_node_conditions conds;
    if (gh_node_conditions_parse(o->node_conditions ? o->node_conditions
                                                    : GH_NODE_CONDITIONS_DEFAULT,
                                 &conds, err))
        return GH_EINVAL;
    struct gh_controller *ctl = calloc(1, sizeof *ctl);
    if (!ctl)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    ctl->o = *o;
    ctl->node_conds = conds;
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
    ctl->answers = gh_strmap_new(AWAIT_MAX);
    ctl->costs = gh_strmap_new(COSTS_MAX);
    ctl->metrics = gh_ctl_metrics_new();
    ctl->guard = gh_guard_new(&o->guards);
    ctl->queue = gh_sigqueue_new(SIGQUEUE_CAP);
    if (!ctl->known || !ctl->awaiting || !ctl->released || !ctl->answers || !ctl->metrics ||
        !ctl->guard ||
        !ctl->queue || !ctl->costs) {
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
    ec.reorder_window_ns =
        o->reorder_window_ns >= 0 ? o->reorder_window_ns : GH_CONTROLLER_REORDER_WINDOW_NS;
    ctl->engine = gh_engine_new(o->policy, NULL, ctl->clock, &ec, on_incident, ctl, err);
    if (!ctl->engine) {
        rc = GH_EINVAL;
        goto fail;
    }
    /* RecoveryPolicy rules, when any object is accepted, replace the rules
     * of --policy or the built-in policy, whose settings stay */
    gh_engine_set_rule_filter(ctl->engine, rule_governs, ctl);
    if (!(ctl->crset = gh_policy_crset_new(gh_engine_policy(ctl->engine))) ||
        !(ctl->waits = gh_drain_waits_new())) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    struct gh_executor_opts xo = {.kube = o->kube,
                                  .db_url = o->db_url,
                                  .clock = ctl->clock,
                                  .identity = ctl->identity,
                                  .no_execute_taint = o->no_execute_taint,
                                  .taint_key = o->taint_key,
                                  .drain = o->drain,
                                  .crash_after = o->crash_after,
                                  .qps = o->qps,
                                  .workers = o->executor_workers,
                                  .may_act = may_act,
                                  .may_act_ud = ctl};
    if ((rc = gh_executor_new(&xo, &ctl->ex, err)))
        goto fail;
    struct gh_step_writer_opts to = {.db_url = o->db_url};
    if ((rc = gh_step_writer_new(&to, &ctl->telemetry, err)))
        goto fail;
    if ((rc = journal_start(ctl, o, err)))
        goto fail;
    struct gh_store_watch_opts wo = {.db_url = o->db_url, .identity = ctl->identity};
    if ((rc = gh_store_watch_new(&wo, &ctl->watch, err)))
        goto fail;
    gh_store_watch_state(ctl->watch, &ctl->store);
    gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_STORE_UP, 1);
    if (o->agent_service_account) {
        struct gh_agent_auth_opts ao = {.kube = o->kube,
                                        .clock = ctl->clock,
                                        .service_account = o->agent_service_account,
                                        .audience = o->agent_audience};
        if ((rc = gh_agent_auth_new(&ao, &ctl->agent_auth, err)))
            goto fail;
    }
    struct gh_ingest_server_opts io = {.listen = o->listen,
                                       .token_file = o->token_file,
                                       .allow_anonymous = o->allow_anonymous && !o->token_file &&
                                                          !o->agent_service_account,
                                       .authenticate = ctl->agent_auth ? gh_agent_auth_check : NULL,
                                       .auth_ctx = ctl->agent_auth,
                                       .header_timeout_s = o->ingest_header_timeout_s,
                                       .max_per_client = o->ingest_max_per_client,
                                       .tls_cert = o->tls_cert,
                                       .tls_key = o->tls_key,
                                       .body_max = o->ingest_body_max,
                                       .limits = {o->ingest_line_max, o->ingest_max_lines},
                                       .dedup_capacity = o->ingest_dedup_capacity,
                                       .max_connections = o->ingest_max_connections,
                                       .idle_timeout_s = o->ingest_idle_timeout_s,
                                       .sink = journal_sink,
                                       .sink_ctx = ctl,
                                       .extra_metrics = metrics_text,
                                       .metrics_ctx = ctl,
                                       .ready = ready_to_serve,
                                       .ready_ctx = ctl};
    if ((rc = gh_ingest_server_new(&io, &ctl->ingest, err)))
        goto fail;
    /* what this start runs with (never the store URL: it may hold a password) */
    GH_LOG(GH_LOG_DEBUG,
           "event=options store=%s tls=%d leader_election=%d watch_namespace=%s "
           "node_selector=%s reorder_window_ms=%lld executor_workers=%d qps=%g",
           o->db_url && strncmp(o->db_url, "sqlite:", 7) == 0 ? "sqlite" : "postgres",
           o->tls_cert != NULL,
           !o->no_leader_election, o->watch_namespace ? o->watch_namespace : "(all)",
           o->node_selector ? o->node_selector : "(all)",
           (long long)((o->reorder_window_ns < 0 ? GH_CONTROLLER_REORDER_WINDOW_NS
                                                 : o->reorder_window_ns) /
                       1000000),
           o->executor_workers > 0 ? o->executor_workers : 8, o->qps > 0 ? o->qps : 50);
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
static const char *const pod_keep[] = {"/metadata/labels", "/metadata/ownerReferences",
                                       "/metadata/deletionTimestamp",
                                       "/spec/nodeName", "/status/phase", "/status/reason",
                                       "/status/message", "/status/startTime",
                                       "/status/containerStatuses",
                                       "/metadata/annotations/gpuheal.io~1expected-end",
                                       "/metadata/annotations/gpuheal.io~1remaining",
                                       "/metadata/annotations/gpuheal.io~1restart-cost"};
static const char *const gnh_keep[] = {"/metadata/annotations", "/status/conditions",
                                       "/status/lastAction"};
static const char *const incident_keep[] = {"/metadata/annotations", "/status/phase"};
static const char *const policy_keep[] = {"/metadata/generation", "/spec/dryRun",
                                          "/spec/nodeSelector",
                                          "/spec/budgets", "/spec/priority", "/spec/rules",
                                          "/status/observedGeneration", "/status/conditions"};
static const char *const event_keep[] = {"/regarding", "/reason", "/note", "/type",
                                         "/reportingController", "/deprecatedSource",
                                         "/deprecatedCount", "/series", "/eventTime",
                                         "/deprecatedLastTimestamp"};

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
    /* Events: the watched namespace's (all: every namespace's), and the
     * nodes' (kubelets post them in "default") */
    struct gh_kube_handlers hev = {event_add, event_update, NULL, NULL, inf_error};
    struct gh_kube_handlers hnev = {node_event_add, node_event_update, NULL, NULL, inf_error};
    const char *wns = ctl->o.watch_namespace;
    if ((rc = start_informer(ctl, &gh_kube_res_events, wns, NULL, event_keep, N(event_keep), &hev,
                             &ctl->inf_events, err)) ||
        (wns && strcmp(wns, "default") != 0 &&
         (rc = start_informer(ctl, &gh_kube_res_events, "default", NULL, event_keep,
                              N(event_keep), &hnev, &ctl->inf_node_events, err))))
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
        (rc = gh_job_watch_start(ctl->jobs, err)))
        return gh_err_prefix(err, rc, "job informers");
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
        bool held = replay_held(ctl);
        int64_t wait_ns = tick, due = held ? INT64_MAX : gh_engine_next_deadline(ctl->engine);
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
        fence_refresh(ctl);
        store_check(ctl);
        size_t fed = drain_queue(ctl);
        int64_t t = now(ctl);
        /* at once after new signals (a zero reorder window decides now),
         * else every tick */
        int64_t next = gh_engine_next_deadline(ctl->engine);
        if (!held && (fed || t - ctl->last_tick >= tick || (next != INT64_MAX && next <= t))) {
            job_costs_refresh(ctl);
            gh_engine_tick(ctl->engine, t);
            ctl->last_tick = t;
        }
        reports(ctl);
        scan_requests(ctl);
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
    gh_job_watch_free(ctl->jobs);
    gh_kube_informer_free(ctl->inf_nodes);
    gh_kube_informer_free(ctl->inf_pods);
    gh_kube_informer_free(ctl->inf_gnh);
    gh_kube_informer_free(ctl->inf_incidents);
    gh_kube_informer_free(ctl->inf_policies);
    gh_kube_informer_free(ctl->inf_events);
    gh_kube_informer_free(ctl->inf_node_events);
    gh_kube_informer_free(ctl->inf_namespaces);
    gh_ingest_server_free(ctl->ingest);
    gh_agent_auth_free(ctl->agent_auth); /* after the ingest threads that call it */
    gh_journal_close(ctl->journal); /* after the ingest thread that writes it */
    gh_store_watch_free(ctl->watch);
    gh_executor_free(ctl->ex);
    gh_step_writer_free(ctl->telemetry);
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
    gh_strmap_free(ctl->decided);
    gh_strmap_free(ctl->released);
    gh_strmap_free(ctl->answers);
    if (ctl->costs)
        for (size_t i = 0; i < gh_strmap_count(ctl->costs); i++)
            free(gh_strmap_value(ctl->costs, i));
    gh_strmap_free(ctl->costs);
    gh_guard_free(ctl->guard);
    gh_ctl_metrics_free(ctl->metrics);
    gh_policy_crset_free(ctl->crset);
    gh_drain_waits_free(ctl->waits);
    free(ctl->policy_now); /* after the engine, which borrowed it */
    free(ctl);
}
