/* decide.h - the decision stage: findings -> incidents. One incident per
 * root cause (evidence of a cause already decided joins it for `episode`),
 * repetitions counted per rule and subject (node, else job), boot grace,
 * escalation on repeats, the checkpoint to resume from, and the reason. */
#ifndef GH_ENGINE_DECIDE_H
#define GH_ENGINE_DECIDE_H

#include "engine/detector.h"
#include "engine/impact.h"
#include "engine/incident.h"
#include "engine/policy.h"
#include "engine/timeline.h"
#include "engine/topology.h"

struct gh_decider;

/* All pointers are borrowed and must outlive the decider. NULL on OOM. */
struct gh_decider *gh_decider_new(const struct gh_policy *policy, struct gh_topology *topo,
                                  struct gh_timeline *tl, gh_incident_fn cb, void *cb_ctx);
void gh_decider_free(struct gh_decider *d);

/* Decides on f at stream time now. boot_ts: when f's node last became ready
 * (INT64_MIN when unknown). */
enum gh_outcome gh_decider_submit(struct gh_decider *d, const struct gh_finding *f, int64_t now,
                                  int64_t boot_ts);

/* A cause several nodes share (engine/fleet.c found it): what its incident
 * names. Everything borrowed for the call. */
struct gh_shared {
    enum gh_class cls;
    enum gh_severity severity;
    enum gh_scope scope;
    const char *component; /* "LABEL=VALUE" when the nodes' labels name it, else NULL */
    size_t n_nodes;
    const char *const *nodes; /* the nodes that showed it, in the order they did */
    size_t n_evidence;
    const struct gh_tl_entry *const *evidence; /* their first signals, oldest first */
    int64_t window_ns;                         /* they began to show it within this */
    uint64_t key_hash;                         /* the signature, for the incident's id */
    const char *what; /* the signature in words ("NIC mlx5_2 port 1 down") */
};

/* Decides on a shared cause s at stream time now, for finding f (NULL: the
 * signals alone). A job that f shows harmed (died or wrong) and still
 * running, whose name's hash is not among done[0..n_done), is restarted
 * from its checkpoint by an incident that names the component and its
 * nodes, blames none and takes none out of service; with record, that
 * incident is emitted even when nothing restarts (the cause's one record);
 * followup says it comes after that record. *restarted gets the restarted
 * job's hash (0: none). GH_OUT_DECIDED when an incident was emitted, else
 * GH_OUT_ABSORBED. */
enum gh_outcome gh_decider_shared(struct gh_decider *d, const struct gh_shared *s,
                                  const struct gh_finding *f, int64_t now, bool record,
                                  bool followup, const uint64_t *done, int n_done,
                                  uint64_t *restarted);

/* Whether gh_decider_shared would restart a job for f (without deciding):
 * asked before describing a shared cause, which costs its nodes. false:
 * f is counted as a finding, and the caller absorbs it. */
bool gh_decider_shared_restarts(struct gh_decider *d, const struct gh_finding *f, int64_t now,
                                const uint64_t *done, int n_done);

/* Reports what an incident's open episode absorbs (incident.h,
 * gh_joined_fn); NULL: nothing. */
void gh_decider_set_joined(struct gh_decider *d, gh_joined_fn fn, void *ctx);
/* The id of the incident whose episode of node (else job; either may be
 * NULL) is open at t, NULL when none. Valid until the next decision. */
const char *gh_decider_episode_id(struct gh_decider *d, const char *node, const char *job,
                                  int64_t t);
/* The id of the incident gh_decider_shared last emitted ("" when none). */
const char *gh_decider_last_id(const struct gh_decider *d);

bool gh_decider_node_episode(struct gh_decider *d, const char *node, int64_t t, enum gh_class *cls);
bool gh_decider_job_episode(struct gh_decider *d, const char *job, int64_t t, enum gh_class *cls);
/* The node episode open at t was decided from a node_condition finding. */
bool gh_decider_node_condition_episode(struct gh_decider *d, const char *node, int64_t t);
/* node's condition cleared at ts: a record of that condition stops waiting
 * (nothing of it is due any more) and its episode ends. */
void gh_decider_condition_cleared(struct gh_decider *d, const char *node, const char *condition,
                                  int64_t ts);
void gh_decider_count_absorbed(struct gh_decider *d);
/* node (borrowed) returned to service at stream time ts: the episode of the
 * incident that took it out (decided at or before ts) ends at ts, so later
 * evidence on the node is a new incident (docs/engine.md, "Episodes"). */
void gh_decider_node_returned(struct gh_decider *d, const char *node, int64_t ts);
/* Every incident decided at or before stream time ts stops absorbing
 * evidence after ts: what follows is a new incident (escalated on repeats
 * as ever). For a driver whose earlier decisions were not carried out: a
 * dry run that ended. */
void gh_decider_close_all(struct gh_decider *d, int64_t ts);
/* Stream time of the latest hardware-class incident anywhere (GPU, memory,
 * interconnect), INT64_MIN when none. */
int64_t gh_decider_last_hardware(const struct gh_decider *d);

/* Forgets what can no longer matter at stream time now: episodes closed
 * for longer than the hardware lookback, occurrences that left their rule's
 * window, incident histories older than every escalation window. */
void gh_decider_expire(struct gh_decider *d, int64_t now);

/* Decides by policy (borrowed, must outlive the decider) from now on.
 * Repetition counts and escalation histories are kept per rule position,
 * so they are dropped; episodes (what was decided) are kept. */
void gh_decider_set_policy(struct gh_decider *d, const struct gh_policy *policy);

/* Asked before an incident about a node is emitted: true when f waits
 * (engine/fleet.h, gh_fleet_hold); it is submitted again later. harmless:
 * no job is harmed by it and the hardware can wait, so nothing is lost by
 * waiting longer. */
typedef bool (*gh_hold_fn)(void *ctx, const struct gh_finding *f, bool harmless);
void gh_decider_set_hold(struct gh_decider *d, gh_hold_fn fn, void *ctx);

/* Which rules govern which nodes (engine.h, gh_engine_set_rule_filter). */
typedef bool (*gh_rule_filter_fn)(void *ctx, int rule, const char *node);
void gh_decider_set_rule_filter(struct gh_decider *d, gh_rule_filter_fn fn, void *ctx);

/* Whether job still runs on node (NULL: anywhere) at the time of evidence
 * first_ts: false when it ended or left (why: in words, for the reason). */
typedef bool (*gh_job_live_fn)(void *ctx, const char *job, const char *node, int64_t first_ts,
                               char *why, size_t cap);
void gh_decider_set_job_live(struct gh_decider *d, gh_job_live_fn fn, gh_progress_fn progress,
                             void *ctx);

/* What runs changed under a record whose actions wait (docs/engine.md,
 * "Impact"): job_harmed: ent, a pod_failed of the record's job on its node,
 * is harm after all, and the record is decided again with impact died;
 * job_gone: the record's job has no pod left on node (ent: the pod_succeeded
 * or job_finished), the safe moment: decided again, what waited for the GPU
 * may run now; job_finished: job_gone for every node whose record waits
 * for ent's job. ent is borrowed. */
void gh_decider_job_harmed(struct gh_decider *d, const struct gh_tl_entry *ent, int64_t now);
void gh_decider_job_gone(struct gh_decider *d, const char *node, const struct gh_tl_entry *ent,
                         int64_t now);
void gh_decider_job_finished(struct gh_decider *d, const struct gh_tl_entry *ent, int64_t now);

struct gh_decider_stats {
    uint64_t findings, decided, absorbed, pending, grace, unmatched;
    uint64_t nomem; /* allocations that failed (a repetition, history or episode not kept) */
};
void gh_decider_stats(const struct gh_decider *d, struct gh_decider_stats *out);
size_t gh_decider_memory(const struct gh_decider *d);

#endif
