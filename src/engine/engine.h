/* engine.h - gpuheal's detection engine: signals in, incidents out.
 *
 * A plain library with no I/O and an injected clock. The controller feeds it
 * live signals, `gpuheal diagnose` a scenario file, the simulator a simulated
 * cluster: the same code decides in all three.
 *
 *   e = gh_engine_new(policy, topology, clock, NULL, on_incident, ctx, &err);
 *   gh_engine_ingest(e, &signal, arrival_ns, &err);   ... as signals arrive
 *   gh_engine_tick(e, now_ns);                        ... whenever time passes
 *                                                     (next due: gh_engine_next_deadline)
 *   gh_engine_finish(e, until_ns);                    ... at the end of a replay
 *   gh_engine_free(e);
 *
 * Signals are held for the reorder window (default 2 s) so that late
 * arrivals are put back in time order; deduplicated by id, else by content;
 * their source time is bounded by their arrival time. Released signals go to
 * the detectors (hardware, network, flapping, application, straggler, SDC,
 * node), whose findings the policy turns into incidents, handed to the callback
 * during ingest/tick/finish. Memory stays bounded on a long run: state of
 * jobs no signal named for settings.job_idle, and of counters and nodes
 * past their windows, is forgotten every few minutes of stream time. */
#ifndef GH_ENGINE_ENGINE_H
#define GH_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "engine/incident.h"
#include "engine/policy.h"
#include "engine/timeline.h"
#include "engine/topology.h"
#include "signal/signal.h"

/* Pass as a time to mean "read the engine's clock". */
#define GH_ENGINE_NOW INT64_MIN

/* Detectors, for gh_engine_config.detectors. */
enum {
    GH_DET_HARDWARE = 1 << 0,
    GH_DET_NETWORK = 1 << 1,
    GH_DET_FLAPPING = 1 << 2,
    GH_DET_CONDITION = 1 << 3, /* Node conditions other agents set (node_condition) */
    GH_DET_APPLICATION = 1 << 4,
    GH_DET_STRAGGLER = 1 << 5,
    GH_DET_SDC = 1 << 6,
    GH_DET_NODE = 1 << 7,  /* nodes NotReady past settings.node_down with a job on them */
    GH_DET_FLEET = 1 << 8, /* one signature on many nodes: a cause they share (settings.fleet) */
    GH_DET_PODHOST =
        1 << 9, /* a Ready node refusing the pods of several jobs (settings.pod_host) */
    GH_DET_ALL = (1 << 10) - 1,
};

struct gh_engine_config {
    /* < 0: the policy's settings.reorder_window. A replay of a file that is
     * already sorted by time uses 0. */
    int64_t reorder_window_ns;
    unsigned detectors; /* GH_DET_* mask (default GH_DET_ALL): run one alone in a test */
    struct gh_timeline_config timeline; /* retention, caps, skew bound */
};
void gh_engine_config_default(struct gh_engine_config *c);

struct gh_engine;

/* policy: borrowed, must outlive the engine (NULL = the built-in default,
 * owned by the engine). topo: copied (NULL = empty; the engine learns nodes,
 * jobs and ranks from signals). clock: borrowed (NULL = gh_clock_real()).
 * cfg: copied (NULL = defaults). cb: called for every incident, may be NULL;
 * it runs inside ingest/tick/finish and must not call back into the engine.
 * Returns NULL with err set on failure. */
struct gh_engine *gh_engine_new(const struct gh_policy *policy, const struct gh_topology *topo,
                                const struct gh_clock *clock, const struct gh_engine_config *cfg,
                                gh_incident_fn cb, void *cb_ctx, struct gh_err *err);
void gh_engine_free(struct gh_engine *e);

/* Takes a copy of s (borrowed) that arrived at arrival_ns (GH_ENGINE_NOW:
 * the clock). Returns GH_OK, GH_EAGAIN for a duplicate (dropped), GH_EINVAL,
 * GH_ENOMEM. Nothing is decided until the next tick/finish. */
int gh_engine_ingest(struct gh_engine *e, const struct gh_signal *s, int64_t arrival_ns,
                     struct gh_err *err);
/* The same, taking ownership of s's strings (s is left cleared). */
int gh_engine_ingest_steal(struct gh_engine *e, struct gh_signal *s, int64_t arrival_ns,
                           struct gh_err *err);

/* Advances the engine to now_ns (GH_ENGINE_NOW: the clock): releases the
 * signals older than now - window in time order and fires detector deadlines
 * up to the same point, interleaved by time. */
void gh_engine_tick(struct gh_engine *e, int64_t now_ns);

/* End of input: releases every waiting signal and fires every deadline up to
 * until_ns (INT64_MAX: all of them). */
void gh_engine_finish(struct gh_engine *e, int64_t until_ns);

/* The earliest time at which gh_engine_tick would do something (release a
 * waiting signal or fire a detector deadline): a driver may sleep until
 * then, waking earlier only when a signal arrives. INT64_MAX when nothing
 * waits; INT64_MIN when a tick now would already act (the reorder buffer
 * is over its bound). Times as gh_engine_tick takes them (the stream's
 * clock, deadlines plus the reorder window). */
int64_t gh_engine_next_deadline(const struct gh_engine *e);

/* Reports evidence that joins an incident already decided (an open
 * episode absorbing a node's or job's later signals, a node that shows a
 * shared cause after its record) to fn(ctx, ...) (incident.h,
 * gh_joined_fn); NULL: nothing is reported (the default; what is decided
 * does not change either way). */
void gh_engine_set_joined(struct gh_engine *e, gh_joined_fn fn, void *ctx);

/* Forgets job (borrowed): its placement, even a declared one, and what the
 * timeline holds for it. For drivers that know a job has ended (the
 * controller, when its last pod is gone); jobs nobody forgets expire when
 * no signal names them for settings.job_idle (declared ones keep their
 * placement, unless the topology's job table is half full). */
void gh_engine_forget_job(struct gh_engine *e, const char *job);

/* Declares that job (borrowed) has a running pod on node (borrowed), as a
 * driver that watches the cluster sees it (the controller's pod informer):
 * the job's placement is then declared, not only learned from signals, so
 * a fault on its node is the job's fault. Idempotent: a job already
 * declared on node is left as it is. GH_ELIMIT when the topology's job
 * table is full (or out of memory); GH_EINVAL for a NULL name. */
int gh_engine_declare_pod(struct gh_engine *e, const char *job, const char *node);

/* Replaces node's labels (all borrowed) with the n pairs keys[i] = values[i],
 * as the Node object shows them: the engine names a cause that several
 * nodes share by the labels they have in common (rack, NVLink domain,
 * switch or rail, driver version; settings.fleet). GH_ENOMEM, GH_ELIMIT
 * (the node table is full). */
int gh_engine_set_node_labels(struct gh_engine *e, const char *node, const char *const *keys,
                              const char *const *values, size_t n);

/* Whether the engine reads the label key (borrowed): one that names a
 * component nodes share (engine/scope.h). A driver that mirrors Node
 * labels passes only these. */
bool gh_engine_label_wanted(const char *key);

/* The remaining run and restart cost (seconds; < 0: unknown, the policy's
 * assume_remaining / restart_cost then) of job (borrowed), as its
 * annotations state them (control/job_costs.h). A no-op for a job the
 * engine does not hold (declare its pods first). */
void gh_engine_set_job_costs(struct gh_engine *e, const char *job, double remaining_s,
                             double restart_cost_s);

/* node (borrowed) was returned to service at ts (the stream's clock): the
 * validation gate released it, or an operator did. The incident that took
 * it out of service, decided at or before ts, no longer absorbs evidence
 * after ts: a new fault there is a new incident (escalated on repeats as
 * ever). For drivers that return nodes (the controller); a no-op for a node
 * with no such incident. */
void gh_engine_node_returned(struct gh_engine *e, const char *node, int64_t ts);

/* The incidents decided so far were not acted on (a dry run ended): each
 * stops absorbing evidence now, so the next fault of an episode that a dry
 * run only recorded is decided, and acted on, as a new incident instead of
 * joining one nobody acted on until it expires. */
void gh_engine_decisions_not_acted(struct gh_engine *e);

/* Stream time: the time of the latest signal or deadline handled. */
int64_t gh_engine_stream_time(const struct gh_engine *e);
const struct gh_topology *gh_engine_topology(const struct gh_engine *e);
const struct gh_policy *gh_engine_policy(const struct gh_engine *e);

/* Decides by policy (borrowed, must outlive the engine or the next call)
 * from now on: a live policy reload. Its rules take effect at once; its
 * settings only where read per decision (the reorder window and the expiry
 * period stay those the engine was created with). Repetition counts and
 * escalation histories restart; what was already decided stays. Not from
 * inside the incident callback. */
void gh_engine_set_policy(struct gh_engine *e, const struct gh_policy *policy);

/* Rules that govern only some nodes (the controller's RecoveryPolicy
 * nodeSelector): for a finding on a node, the first matching rule for
 * which fn(ctx, rule index, node) is true decides; when none is, the first
 * matching rule does, and fn's owner says so in the incident. Findings
 * without a node are not filtered. fn NULL (the default): every rule
 * governs every node. fn runs inside ingest/tick/finish, like the incident
 * callback, and must not call back into the engine. */
void gh_engine_set_rule_filter(struct gh_engine *e, bool (*fn)(void *ctx, int rule,
                                                                const char *node),
                               void *ctx);

struct gh_engine_stats {
    struct gh_timeline_stats timeline;
    uint64_t findings, incidents, absorbed, pending, grace, unmatched;
    uint64_t dispatched; /* signal deliveries to detectors */
    size_t bytes;        /* approximate memory: timeline + detectors + decisions + topology */
    size_t detector_bytes;
    size_t jobs;         /* jobs the topology holds now */
    uint64_t expired_jobs; /* idle jobs forgotten so far */
    /* Allocations that failed while signals were released, detected and
     * decided (tick/finish return nothing): each may have cost a retained
     * signal, a finding or an incident. 0 on a healthy run; a driver that
     * sees it grow reports it (gh_engine_ingest's own GH_ENOMEM is its
     * return value). */
    uint64_t nomem;
    /* Findings the fleet detector holds and shared causes not decided yet
     * (engine/fleet.h): decided when their holds end, within
     * settings.fleet.window plus 60 s. 0: nothing waits. */
    size_t held;
};
void gh_engine_stats(const struct gh_engine *e, struct gh_engine_stats *out);

#endif
