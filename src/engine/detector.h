/* detector.h - what a detector is: a small state machine that watches the
 * released, time-ordered stream for some kinds of signals and reports
 * findings (a suspected fault with its evidence) to the engine, which turns
 * them into incidents through the policy. Each detector is one file and can
 * be driven alone in a test through a bare engine.
 *
 * Detectors do no I/O and read no clock: time is the stream time of the
 * signal being handled, or the deadline being fired. A detector that needs
 * to wait (for hardware evidence, for a link to come back) asks for a
 * deadline through next_deadline(). */
#ifndef GH_ENGINE_DETECTOR_H
#define GH_ENGINE_DETECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strmap.h"
#include "common/timeutil.h"
#include "engine/policy.h"
#include "engine/timeline.h"
#include "engine/topology.h"
#include "signal/taxonomy.h"

struct gh_engine;

#define GH_FINDING_MAX_EVIDENCE 32

/* A suspected fault. Strings and evidence are borrowed for the duration of
 * gh_ctx_report(); the engine copies or references what it keeps. */
struct gh_finding {
    enum gh_class cls;
    enum gh_kind kind;        /* the kind of signal that carries the verdict */
    int code;                 /* XID/SXID code, -1 when none */
    const char
        *condition; /* node_condition: the Node condition's type (rules match it), else NULL */
    enum gh_severity severity;
    bool has_metric;
    double metric;            /* the measured value rules' thresholds compare */
    const char *node;         /* the blamed node, NULL when none */
    int gpu;                  /* the blamed GPU, -1 when none */
    const char *job;          /* the affected job, NULL when none */
    int64_t first_ts;         /* earliest evidence (0: take it from the evidence) */
    int64_t anomaly_ts;       /* resume from a checkpoint saved before this (0: first_ts) */
    int64_t anomaly_step;     /* ... and with a step below this (-1: any) */
    int impact;               /* enum gh_impact when the detector measured it; -1: the
                                 decision stage assesses it from the evidence */
    bool has_slowdown;
    double slowdown;          /* with impact slower: 0.12 = 12% slower than peers */
    int n_requested;          /* actions the source itself asks for (XID 154), */
    enum gh_action requested[4]; /* done first, before the rule's own */
    size_t n_evidence;
    const struct gh_tl_entry *evidence[GH_FINDING_MAX_EVIDENCE];
    char what[400]; /* the reason's first half: what was seen, in words */
};

/* Zeroes f and sets the "absent" values (gpu -1, code -1, anomaly_step -1,
 * impact -1). */
void gh_finding_init(struct gh_finding *f);
/* Appends an evidence entry (ignored beyond the cap or when already there). */
void gh_finding_add(struct gh_finding *f, const struct gh_tl_entry *e);

/* What became of a report. */
enum gh_outcome {
    GH_OUT_DECIDED,    /* a new incident was emitted */
    GH_OUT_ABSORBED,   /* evidence of a root cause already decided: joined it */
    GH_OUT_PENDING,    /* counted towards a rule's repetitions; not yet */
    GH_OUT_GRACE,      /* within a node's boot grace: ignored */
    GH_OUT_UNMATCHED,  /* no rule matches: dropped */
    GH_OUT_ERROR,
};

struct gh_detector_ops {
    const char *name;
    uint32_t kinds; /* GH_KIND_BIT mask of the kinds it wants */
    int (*create)(struct gh_engine *e, void **state);
    void (*destroy)(void *state);
    void (*on_signal)(void *state, struct gh_engine *e, const struct gh_tl_entry *ent);
    /* Fires the detector's due work at stream time now. May be NULL. */
    void (*on_deadline)(void *state, struct gh_engine *e, int64_t now);
    /* Earliest pending deadline, INT64_MAX when none. May be NULL. */
    int64_t (*next_deadline)(void *state);
    /* Forgets state that can no longer matter at stream time now: jobs no
     * signal named for settings.job_idle, counters past their windows,
     * nodes back to their default state. Called between signals, every few
     * minutes of stream time. May be NULL. */
    void (*expire)(void *state, struct gh_engine *e, int64_t now);
    size_t (*memory)(const void *state);
};

/* The detectors, in dispatch order. */
extern const struct gh_detector_ops gh_det_hardware;
extern const struct gh_detector_ops gh_det_network;
extern const struct gh_detector_ops gh_det_flapping;
extern const struct gh_detector_ops gh_det_application;
extern const struct gh_detector_ops gh_det_straggler;
extern const struct gh_detector_ops gh_det_sdc;
extern const struct gh_detector_ops gh_det_node;
extern const struct gh_detector_ops gh_det_condition;
extern const struct gh_detector_ops gh_det_fleet;
extern const struct gh_detector_ops gh_det_podhost;

/* The class det_condition gives a Node condition's finding (unknown for a
 * site's own check): the class of a cause several nodes share by it. */
enum gh_class gh_condition_class(const char *condition);

/* ---- what the engine offers detectors (implemented in engine.c) ------- */

const struct gh_policy_settings *gh_ctx_settings(struct gh_engine *e);
struct gh_topology *gh_ctx_topology(struct gh_engine *e);
/* Whether a measured slowdown is worth restarting job (its topology index
 * tj, -1 when unknown): the expected loss, slowdown x the job's remaining
 * run, against the restart cost plus the rollback to its latest saved
 * checkpoint (slow is not wrong: that checkpoint is good). Unknown remaining
 * run and restart cost take the policy's assumptions. Shared by the
 * straggler and network detectors. */
struct gh_restart_worth {
    double remaining_s; /* the job's remaining run */
    double loss_s;      /* slowdown x remaining */
    double cost_s;      /* restart + rollback */
    bool worth;         /* loss_s > cost_s */
    /* what the reason says of them: "" when the job said (its
     * gpuheal.io/remaining or expected-end, restart-cost annotations),
     * else which policy default stood in */
    char assumed[96];
};
void gh_ctx_restart_worth(struct gh_engine *e, const char *job, long tj, double slowdown,
                          struct gh_restart_worth *out);
struct gh_timeline *gh_ctx_timeline(struct gh_engine *e);
int64_t gh_ctx_now(struct gh_engine *e);   /* stream time */
int64_t gh_ctx_start(struct gh_engine *e); /* stream time of the first signal */

/* gh_strmap_get_or_alloc on a detector's map m (borrowed), counting an
 * allocation failure (not a full map) in gh_engine_stats.nomem. Inline: it
 * is on every signal's path. */
void gh_ctx_value_failed(struct gh_engine *e, const struct gh_strmap *m);
static inline void *gh_ctx_value(struct gh_engine *e, struct gh_strmap *m, const char *key,
                                 size_t size, long *idx, bool *created)
{
    void *v = gh_strmap_get_or_alloc(m, key, size, idx, created);
    if (!v)
        gh_ctx_value_failed(e, m);
    return v;
}
/* A detector could not allocate what it needed for a signal or a
 * deadline: counted in gh_engine_stats.nomem, since on_signal and
 * on_deadline return nothing. */
void gh_ctx_nomem(struct gh_engine *e);

/* Hands a finding to the decision stage. */
enum gh_outcome gh_ctx_report(struct gh_engine *e, const struct gh_finding *f);
/* Hands a cause several nodes share to the decision stage (decide.h,
 * gh_decider_shared, whose arguments these are). */
struct gh_shared;
enum gh_outcome gh_ctx_decide_shared(struct gh_engine *e, const struct gh_shared *s,
                                     const struct gh_finding *f, bool record, bool followup,
                                     const uint64_t *done, int n_done, uint64_t *restarted);

/* Shared facts between detectors, per node. */
void gh_ctx_note_boot(struct gh_engine *e, const char *node, int64_t ts);
/* The node's latest boot (node_ready), INT64_MIN when none was seen. */
int64_t gh_ctx_boot_ts(struct gh_engine *e, const char *node);
/* Significant hardware (or link) evidence on node at ts: explains failures. */
void gh_ctx_note_hw_alert(struct gh_engine *e, const char *node, int64_t ts);
/* Latest hardware alert on node within [since, until]; false when none. */
bool gh_ctx_hw_alert(struct gh_engine *e, const char *node, int64_t since, int64_t until,
                     int64_t *ts);
/* A node the flapping detector suspects (in failures of more than one job). */
void gh_ctx_note_flap_suspect(struct gh_engine *e, const char *node, int64_t ts);
bool gh_ctx_flap_suspect(struct gh_engine *e, const char *node, int64_t since);
/* An incident on node (or, for node-less ones, on job) decided and still
 * open at time t: more evidence of it should join it, not start another.
 * *cls (may be NULL) receives its class. */
bool gh_ctx_node_episode(struct gh_engine *e, const char *node, int64_t t, enum gh_class *cls);
bool gh_ctx_job_episode(struct gh_engine *e, const char *job, int64_t t, enum gh_class *cls);
/* Whether the incident open on node at t was decided from a Node condition
 * (node_condition): a flag about the node's host, which explains only the
 * failures the host causes (gh_classify_host_failure), never an
 * application's own. */
bool gh_ctx_node_condition_episode(struct gh_engine *e, const char *node, int64_t t);
/* node's condition went False at ts: a record it left waiting is no longer
 * due (what it isolated stays until the node is returned). */
void gh_ctx_condition_cleared(struct gh_engine *e, const char *node, const char *condition,
                              int64_t ts);
/* Stream time of the latest GPU/memory/interconnect incident anywhere in
 * the cluster, INT64_MIN when none. */
int64_t gh_ctx_last_hardware_incident(struct gh_engine *e);
/* Records that ent was absorbed as consequence of an open incident. */
void gh_ctx_absorbed(struct gh_engine *e, const struct gh_tl_entry *ent);
/* Reports ev[0..n) (borrowed), node's (NULL: none), as evidence that joined
 * the incident incident_id already decided (engine.h, gh_engine_set_joined);
 * a no-op when no callback is set. */
void gh_ctx_joined(struct gh_engine *e, const char *incident_id, const char *node,
                   const struct gh_tl_entry *const *ev, size_t n);
/* The id of the incident gh_ctx_decide_shared last emitted. */
const char *gh_ctx_shared_id(struct gh_engine *e);

/* The GPU index of s: its own "gpu", else the index learned from earlier
 * signals of the node that carried both the index and this PCI bus id or
 * UUID (kernel-log lines name only the bus). -1 when unknown. */
int gh_ctx_gpu_of(struct gh_engine *e, const struct gh_signal *s);

/* Stream time of the latest signal that named job, INT64_MIN when none
 * did (or so long ago that the engine forgot it): the detectors forget a
 * job's state when this is older than settings.job_idle. */
int64_t gh_ctx_job_seen(struct gh_engine *e, const char *job);

/* gh_decider_shared_restarts (decide.h) at stream time. */
bool gh_ctx_shared_restarts(struct gh_engine *e, const struct gh_finding *f, const uint64_t *done,
                            int n_done);

/* Whether job kept training after first (impact.h, gh_progress_fn): its
 * highest step rose twice from 10 s after first on. *step: the newest. */
bool gh_ctx_job_progressing(struct gh_engine *e, const char *job, int64_t first, int64_t now,
                            int64_t *step);

/* The job running on node/gpu (topology), or NULL. */
const char *gh_ctx_job_on(struct gh_engine *e, const char *node, int gpu);

#endif
