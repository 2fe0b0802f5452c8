/* controller_int.h - internal to the controller's three files (not a
 * public header): the controller's state and what its parts call in one
 * another. controller.c is the event loop and the lifecycle (signals into
 * the engine, the journal, leadership, the executor's reports),
 * controller_inputs.c the informers' handlers (Pods, Nodes, GPUNodeHealths,
 * Incidents, RecoveryPolicies, Events, the job kinds) and the jobs' costs,
 * controller_decide.c an incident's way to the executor (guards, the task,
 * deferral while standing by, approval, drains held for a checkpoint).
 * Everything here runs on the loop's thread unless it says otherwise. */
#ifndef GH_CONTROL_CONTROLLER_INT_H
#define GH_CONTROL_CONTROLLER_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"
#include "audit/journal.h"
#include "audit/step_writer.h"
#include "audit/store_watch.h"
#include "common/json.h"
#include "common/mono.h"
#include "common/strmap.h"
#include "control/agent_auth.h"
#include "control/controller.h"
#include "control/decision.h"
#include "control/drain_hold.h"
#include "control/drain_wait.h"
#include "control/executor.h"
#include "control/guard.h"
#include "control/job_costs.h"
#include "control/job_watch.h"
#include "control/kube_signals.h"
#include "control/metrics.h"
#include "control/policy_cr.h"
#include "control/tenancy.h"
#include "engine/engine.h"
#include "ingest/server.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/leader.h"
#include "signal/sigqueue.h"

#define KNOWN_MAX (1u << 20)
#define AWAIT_MAX 65536
/* Joined evidence (gh_ctl_on_joined): incidents whose joined signals are
 * counted (past it, the store's cap alone bounds them), and the executor
 * depth at which joined reports are shed so that decisions go first. */
#define JOINED_IDS_MAX 4096
#define JOINED_QUEUE_MAX 1024
#define SIGQUEUE_CAP 65536
#define POP_BATCH 256
#define METRICS_MAX (64 * 1024)
#define DEFERRED_MAX 4096
#define COSTS_MAX 65536                       /* jobs whose pods state costs (GH_TOPO_MAX_JOBS) */
#define EVENT_MAX_AGE (5 * 60 * GH_NS_PER_S)  /* Events older at first sight are history */
#define REPLAY_HOLD_MAX_NS (30 * GH_NS_PER_S) /* replayed signals wait this long for informers */
#define EVENTS_CACHED_MAX 4096 /* Events kept per Event informer (the latest added) */
/* a leader whose store has not taken a write for this long steps down */
#define STORE_STEP_DOWN_NS (5 * GH_NS_PER_S)
#define FENCE_NONE INT64_MAX /* no leader election: this process always leads */

struct gh_controller {
    struct gh_controller_opts o;
    char identity[128];
    uint64_t engine_nomem;                /* gh_engine_stats.nomem as last logged */
    bool labels_failing;                  /* the engine refused a Node's labels (logged once) */
    size_t nodes_labelled;                /* Nodes with a label that names a shared component */
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
    /* whose pods run where, for the ingest's admission of a node's
     * training telemetry (written here, read on the ingest threads) */
    struct gh_tenancy *tenancy;
    struct gh_kube_leader *leader;
    struct gh_kube_informer *inf_nodes, *inf_pods, *inf_gnh, *inf_incidents, *inf_policies;
    struct gh_job_watch *jobs; /* Job, JobSet, PyTorchJob informers: whose pods are whose */
    bool leading;
    atomic_bool ready; /* = leading, for /readyz on the ingest thread */
    /* Fencing: the monotonic time until which this process surely leads
     * (gh_kube_leader_fence; FENCE_NONE without election; 0: not leading).
     * Read on the ingest and executor threads. */
    _Atomic int64_t fence;
    struct gh_store_watch *watch;      /* whether the audit store takes writes */
    struct gh_store_watch_state store; /* as the loop last saw it */
    bool held_for_store;               /* leadership held back: the store cannot record */
    struct gh_strmap *known;           /* incident ids decided (here or before a restart) */
    struct gh_strmap *awaiting; /* id -> json_t* incident waiting for approval (NULL: done) */
    size_t n_awaiting;
    struct gh_strmap *released; /* "node@isolated-at" whose release was asked */
    struct gh_strmap *answers;  /* "request-id|result" of agent answers submitted */
    struct gh_strmap *joined_n; /* incident id -> signals submitted as joined (value: count) */
    uint64_t joined_shed;       /* joined reports not submitted: the executor was busy */
    int64_t requests_scanned;   /* when unanswered requests were last looked at */
    struct {
        json_t *inc;
        int64_t first_arrival;
    } deferred[DEFERRED_MAX]; /* decided while standing by, oldest first */
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
    int64_t led_until;         /* when this process last stopped leading; 0: never led */
    int64_t replay_hold_until; /* mono ns: replayed signals wait for the
                                                 informers (topology, policy); 0: none */
    struct gh_strmap *decided; /* decision keys (journal.h) of the stored
                                                 incidents; NULL without a journal */
    struct gh_strmap *costs;   /* job -> struct job_cost * (owned): the
                                                 costs its annotations state */
    int64_t costs_refreshed;   /* when their remaining runs were last set */
};

/* A job's costs as its object and pods state them (job_costs.h), in
 * ctl->costs. */
struct job_cost {
    struct gh_job_costs c; /* the job object's figures, else its pod's */
    char end_on[340];      /* who stated the end: "pod NS/NAME", "JobSet NS/NAME" */
    char cost_on[340];     /* ... and the restart cost */
    uint64_t warned;       /* hash of the last invalid-annotation warnings logged */
};

static inline int64_t now(const struct gh_controller *ctl) { return gh_clock_now(ctl->clock); }

static inline const char *ann(const json_t *o, const char *k)
{
    return gh_json_str(o, "metadata", "annotations", k);
}

/* True while this process surely leads, on the monotonic clock: checked
 * where the loop's own view (ctl->leading) may be late - the ingest thread
 * accepting a batch, a worker about to record or act, the loop after a
 * pause (SIGSTOP, a stalled VM) before its deadline timer ran. Any thread. */
static inline bool fenced_in(struct gh_controller *ctl)
{
    int64_t f = atomic_load(&ctl->fence);
    return f == FENCE_NONE || (f > 0 && gh_mono_ns() < f);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- controller.c */

/* Feeds s (stolen: cleared after) to the engine; origin names it in the
 * metrics ("ingest", "kube"). */
void gh_ctl_feed(struct gh_controller *ctl, struct gh_signal *s, const char *origin);

/* ---- controller_inputs.c */

/* Starts the informers and the job informers (gh_controller_run). */
int gh_ctl_inputs_start(struct gh_controller *ctl, struct gh_err *err);
/* Whether gpuheal holds node (its cordon or taint annotations). */
bool gh_ctl_held_by_gpuheal(const json_t *node);
/* Each loop turn: the jobs' remaining runs, set again once a second. */
void gh_ctl_job_costs_refresh(struct gh_controller *ctl);
/* Each loop turn: requests unanswered past --request-timeout, once a second. */
void gh_ctl_scan_requests(struct gh_controller *ctl);
/* A RELEASE report (reports()): once the validation gate's uncordon took
 * effect (result "succeeded" or "noop"), the engine takes new evidence on
 * node as a new incident (gh_engine_node_returned), logged node_returned. */
void gh_ctl_release_done(struct gh_controller *ctl, const char *node, const char *incident,
                         const char *result);

/* ---- controller_decide.c */

/* The engine's incident callback (gh_engine_new) and rule filter
 * (gh_engine_set_rule_filter). */
void gh_ctl_on_incident(void *ud, const struct gh_incident *inc);
/* The engine's joined-evidence callback (gh_engine_set_joined): the
 * signals go to the audit store as a JOINED task, off the loop. */
void gh_ctl_on_joined(void *ud, const char *incident_id, const char *node,
                      const struct gh_tl_entry *const *ev, size_t n);
bool gh_ctl_rule_governs(void *ud, int rule, const char *node);
/* Incident j (stolen) kept for this process's next leadership. */
void gh_ctl_defer(struct gh_controller *ctl, json_t *j, int64_t first);
/* Incident inc (stolen) with its decision d (borrowed from inc) through the
 * guards to the executor (leading). */
void gh_ctl_decide(struct gh_controller *ctl, json_t *inc, const struct gh_decision *d,
                   int64_t first_arrival);
/* Hands t to the executor (t->incident and t->hold stolen); a refusal is
 * logged and t's objects freed. */
void gh_ctl_submit(struct gh_controller *ctl, struct gh_task *t);
/* The incident id waiting for approval got it from by. */
void gh_ctl_approve(struct gh_controller *ctl, const char *id, const char *by);
/* A saved checkpoint s that arrived at at: the drains held for it may go. */
void gh_ctl_checkpoint_seen(struct gh_controller *ctl, const struct gh_signal *s, int64_t at);
/* Leading: the drains held before are held again (reads store a). */
void gh_ctl_resume_holds(struct gh_controller *ctl, struct gh_audit *a);

#endif
