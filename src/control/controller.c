/* controller.c - the controller's event loop and lifecycle: signals from
 * the ingest into the engine, the signal journal, leader election and
 * fencing, the audit store's health, the executor's reports, metrics. The
 * informers' handlers are in controller_inputs.c, an incident's way to the
 * executor in controller_decide.c (controller_int.h). */
#include "control/controller.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/log.h"
#include "control/controller_int.h"

void gh_controller_opts_default(struct gh_controller_opts *o)
{
    memset(o, 0, sizeof *o);
    o->listen = "0.0.0.0:8443";
    o->reorder_window_ns = -1;
    gh_guard_config_default(&o->guards);
    o->drain.grace_s = -1;
}

/* ---- signals into the engine */

void gh_ctl_feed(struct gh_controller *ctl, struct gh_signal *s, const char *origin)
{
    struct gh_err err;
    if (s->kind == GH_KIND_CHECKPOINT && s->ckpt_state == GH_CKPT_SAVED && s->job)
        gh_ctl_checkpoint_seen(ctl, s, now(ctl));
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
            gh_ctl_feed(ctl, &batch[i], "ingest");
        total += n;
    }
    return total;
}

/* The ingest's admission of a node's line (on an ingest thread): a job's
 * training telemetry only from a pod of that job on the sender's node
 * (control/tenancy.h). */
static int tenancy_admit(void *ctx, const struct gh_ingest_sender *who, const struct gh_signal *sig,
                         char *why, size_t cap)
{
    return gh_tenancy_admit(ctx, who->node, sig, why, cap);
}

/* ---- fencing: nothing is accepted or done past the lease */

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
        gh_ctl_checkpoint_seen(ctl, s, arrival_ns);
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
    gh_ctl_submit(ctl, &t);
    if (a)
        gh_ctl_resume_holds(ctl, a);
    gh_audit_close(a);
    for (size_t i = 0; i < ctl->n_deferred; i++) {
        /* held as its object (a decision the executor handed back is one) */
        struct gh_decision d;
        gh_decision_read(&d, ctl->deferred[i].inc);
        gh_ctl_decide(ctl, ctl->deferred[i].inc, &d, ctl->deferred[i].first_arrival);
    }
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
                    gh_ctl_defer(ctl, r[i].incident, r[i].first_arrival_ns);
                r[i].incident = NULL;
            }
            if (r[i].fenced)
                GH_LOG(GH_LOG_WARN, "event=actions_left_pending id=%s reason=\"not surely "
                       "leading\" (the leader completes them)", r[i].id);
            if (r[i].store_failed)
                GH_LOG(GH_LOG_ERROR, "event=decision_not_recorded id=%s node=%s error=\"%s\" "
                       "(stopping: the journal keeps its signals for the next start)", r[i].id,
                       r[i].node[0] ? r[i].node : "-", r[i].error);
            if (r[i].kind == GH_TASK_JOINED) {
                gh_ctl_metrics_joined(ctl->metrics, (unsigned)r[i].joined_stored,
                                      (unsigned)r[i].joined_capped);
                if (r[i].joined_capped)
                    GH_LOG(GH_LOG_WARN,
                           "event=joined_evidence_capped id=%s not_stored=%d "
                           "(the incident keeps %d joined rows)",
                           r[i].id, r[i].joined_capped, GH_AUDIT_JOINED_MAX);
                if (r[i].warning[0])
                    GH_LOG(GH_LOG_ERROR, "event=joined_evidence_not_recorded id=%s error=\"%s\"",
                           r[i].id, r[i].warning);
                continue;
            }
            if (r[i].kind == GH_TASK_RELEASE && r[i].n > 0)
                gh_ctl_release_done(ctl, r[i].node, r[i].id, r[i].acts[0].result);
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
                gh_guard_set_isolated(ctl->guard, r[i].node, node && gh_ctl_held_by_gpuheal(node));
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
    size_t n = gh_ctl_metrics_write(ctl->metrics, buf, cap);
    if (!ctl->agent_auth || n + 1 >= cap)
        return n;
    struct gh_agent_auth_stats s;
    gh_agent_auth_stats(ctl->agent_auth, &s);
    int k = snprintf(buf + n, cap - n,
                     "# HELP gpuheal_agent_token_reviews_total Agents' tokens checked, by result: "
                     "reviewed (a TokenReview sent), cached (a remembered verdict), accepted, "
                     "refused, unavailable (the review failed), rate_limited (not sent: over the "
                     "rate), known_evicted (an accepted token pushed out by another).\n"
                     "# TYPE gpuheal_agent_token_reviews_total counter\n"
                     "gpuheal_agent_token_reviews_total{result=\"reviewed\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"cached\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"accepted\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"refused\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"unavailable\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"rate_limited\"} %llu\n"
                     "gpuheal_agent_token_reviews_total{result=\"known_evicted\"} %llu\n",
                     (unsigned long long)s.reviews, (unsigned long long)s.cache_hits,
                     (unsigned long long)s.accepted, (unsigned long long)s.refused,
                     (unsigned long long)s.unavailable, (unsigned long long)s.rate_limited,
                     (unsigned long long)s.known_evicted);
    if (k < 0 || (size_t)k >= cap - n)
        return n; /* no room: left out whole */
    return n + (size_t)k;
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
    if (gh_node_conditions_parse(
            o->node_conditions ? o->node_conditions : GH_NODE_CONDITIONS_DEFAULT, &conds, err))
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
    ctl->joined_n = gh_strmap_new(JOINED_IDS_MAX);
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
    ctl->engine = gh_engine_new(o->policy, NULL, ctl->clock, &ec, gh_ctl_on_incident, ctl, err);
    if (ctl->engine)
        gh_engine_set_joined(ctl->engine, gh_ctl_on_joined, ctl);
    if (!ctl->engine) {
        rc = GH_EINVAL;
        goto fail;
    }
    /* RecoveryPolicy rules, when any object is accepted, replace the rules
     * of --policy or the built-in policy, whose settings stay */
    gh_engine_set_rule_filter(ctl->engine, gh_ctl_rule_governs, ctl);
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
                                  .inplace_timeout_ns = o->inplace_timeout_ns,
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
    gh_ingest_auth_cached_fn auth_cached = ctl->agent_auth ? gh_agent_auth_cached : NULL;
    struct gh_ingest_limits limits = {.line_max = o->ingest_line_max,
                                      .max_lines = o->ingest_max_lines};
    if ((rc = gh_tenancy_new(0, &ctl->tenancy, err)))
        goto fail;
    struct gh_ingest_server_opts io = {.listen = o->listen,
                                       .token_file = o->token_file,
                                       .allow_anonymous = o->allow_anonymous && !o->token_file &&
                                                          !o->agent_service_account,
                                       .authenticate = ctl->agent_auth ? gh_agent_auth_check : NULL,
                                       .authenticate_cached = auth_cached,
                                       .auth_ctx = ctl->agent_auth,
                                       .header_timeout_s = o->ingest_header_timeout_s,
                                       .max_per_client = o->ingest_max_per_client,
                                       .tls_cert = o->tls_cert,
                                       .tls_key = o->tls_key,
                                       .body_max = o->ingest_body_max,
                                       .limits = limits,
                                       .dedup_capacity = o->ingest_dedup_capacity,
                                       .max_connections = o->ingest_max_connections,
                                       .idle_timeout_s = o->ingest_idle_timeout_s,
                                       .sink = journal_sink,
                                       .sink_ctx = ctl,
                                       .extra_metrics = metrics_text,
                                       .metrics_ctx = ctl,
                                       .ready = ready_to_serve,
                                       .ready_ctx = ctl,
                                       .admit = tenancy_admit,
                                       .admit_ctx = ctl->tenancy};
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

int gh_controller_run(struct gh_controller *ctl, int stop_fd, struct gh_err *err)
{
    int rc;
    if ((rc = gh_ctl_inputs_start(ctl, err)))
        return rc;
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
            gh_ctl_job_costs_refresh(ctl);
            gh_engine_tick(ctl->engine, t);
            ctl->last_tick = t;
        }
        reports(ctl);
        gh_ctl_scan_requests(ctl);
        struct gh_sigqueue_stats qs;
        gh_sigqueue_stats(ctl->queue, &qs);
        struct gh_engine_stats es;
        gh_engine_stats(ctl->engine, &es);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_SIGNAL_QUEUE, (double)qs.depth);
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_EXECUTOR_QUEUE,
                             (double)gh_executor_depth(ctl->ex));
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_AWAITING_APPROVAL, (double)ctl->n_awaiting);
        if (es.nomem != ctl->engine_nomem) {
            GH_LOG(GH_LOG_ERROR,
                   "event=engine_out_of_memory failures=%llu new=%llu (a signal's "
                   "effect may be lost: a finding or an incident; the process is short of "
                   "memory)",
                   (unsigned long long)es.nomem,
                   (unsigned long long)(es.nomem - ctl->engine_nomem));
            ctl->engine_nomem = es.nomem;
            gh_ctl_metrics_engine_nomem(ctl->metrics, es.nomem);
        }
        gh_ctl_metrics_gauge(ctl->metrics, GH_GAUGE_ENGINE_HELD, (double)es.held);
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
    gh_tenancy_free(ctl->tenancy);       /* likewise */
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
    gh_strmap_free(ctl->joined_n);
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
