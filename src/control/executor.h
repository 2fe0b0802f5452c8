/* executor.h - the controller's worker threads, where everything that
 * blocks happens: it records each decision in the audit store (incident,
 * evidence, guard verdicts and one intent per action, in one commit) before
 * acting, runs the actuator's API calls, records each result and finishes
 * its intent, then publishes the Incident object and Kubernetes Events.
 * A replay task completes the intents a killed process left pending, so no
 * action is lost and, the actions being idempotent, none is done twice.
 *
 * The event loop submits tasks (never blocking: a full queue is refused)
 * and reads reports when gh_executor_fd() is readable. A pool of worker
 * threads runs them, each with its own Kubernetes client and audit
 * connection. Tasks that share a target (incident, node, job) run one
 * after the other in submission order; an approval or a replay runs alone.
 * A decision whose first action isolates its node runs in two stages: the
 * record and the isolation first, and the rest of its actions only when no
 * new task is waiting, so a burst of faults gets its nodes isolated first
 * (its targets stay held between the stages). */
#ifndef GH_CONTROL_EXECUTOR_H
#define GH_CONTROL_EXECUTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "control/actuator.h"
#include "control/guard.h"
#include "control/task-t.h"
#include "engine/incident.h"
#include "kube/kubeconfig.h"

/* What a task did (a value type). */
struct gh_exec_report {
    enum gh_task_kind kind;
    char id[64];
    char node[254];
    char phase[24];            /* the Incident phase reached; "Duplicate" when already recorded */
    int n;
    struct {
        enum gh_action action;
        char result[16];       /* succeeded failed noop skipped requested (the agent's
                                  outcome follows in an OUTCOME report), or an OUTCOME's */
    } acts[GH_TASK_MAX_ACTIONS];
    int64_t first_arrival_ns;
    int64_t first_issue_ns;    /* clock time the first action's API call was issued (0: none) */
    bool isolation_failed;     /* a node action failed: give its budget back */
    bool store_failed;         /* the audit store refused the record: nothing was done */
    char warning[300];         /* the first failure to publish (Incident object), or "" */
    /* A decision's record failed to commit and will be tried again: a
     * report of its own, the task not done (phase "CommitRetry"). */
    bool retrying;
    int attempt;               /* retrying: which attempt failed (1, 2, ...) */
    char error[300];           /* retrying, store_failed: the store's error */
    /* The decision was not recorded because this controller may no more
     * act (may_act): incident is the incident object, owned by the report
     * (the reader takes it), to be decided by whoever leads next. */
    bool deferred;
    json_t *incident;
    bool fenced;               /* intents left pending: may_act turned false */
    /* JOINED: rows stored, and signals not stored because the incident
     * has GH_AUDIT_JOINED_MAX rows already */
    int joined_stored, joined_capped;
};

struct gh_executor_opts {
    const struct gh_kube_config *kube; /* copied: the executor's own client */
    const char *db_url;                /* the audit store */
    const struct gh_clock *clock;      /* borrowed; NULL: real */
    const char *identity;              /* copied: reporting instance, controller name */
    bool no_execute_taint;             /* isolate with NoExecute instead of NoSchedule */
    const char *taint_key;             /* borrowed, outlives the executor; NULL: GH_TAINT_KEY */
    struct gh_drain_opts drain;
    int64_t inplace_timeout_ns;        /* how long pods may take to restart in place before
                                          the restart falls back to a full recreate
                                          (job_inplace.h); 0: 30 s, < 0: never in place */
    size_t queue_cap;                  /* 0: 4096 */
    /* Test hook: after this action's API call succeeds and before it is
     * recorded, the process kills itself (SIGKILL) - a crash mid-action. */
    const char *crash_after;
    double qps;                        /* the executor's QPS budget, split evenly between
                                          the workers' clients (burst 100 likewise); 0: 50;
                                          < 0: unlimited */
    int workers;                       /* worker threads; 0: 8 (at most 64) */
    /* Optional, called on worker threads (must not block): false once
     * this controller may no more record decisions or act (its leadership
     * may have passed). Checked before each decision's record and each
     * action. NULL: always. */
    bool (*may_act)(void *ud);
    void *may_act_ud;
};

struct gh_executor;

/* Opens the audit store and the client and starts the thread. *out: caller
 * frees with gh_executor_free. */
int gh_executor_new(const struct gh_executor_opts *o, struct gh_executor **out,
                    struct gh_err *err);
/* Lets the running tasks finish their stage, drops the queued ones (their intents stay
 * in the store: the next leader replays them), joins. Accepts NULL. */
void gh_executor_free(struct gh_executor *ex);

/* Readable (EFD_NONBLOCK) while reports wait. Owned by the executor. */
int gh_executor_fd(const struct gh_executor *ex);

/* Queues t; t->incident and t->hold are stolen (NULL after). GH_ELIMIT when full. Any
 * thread. */
int gh_executor_submit(struct gh_executor *ex, struct gh_task *t, struct gh_err *err);

/* Moves up to max reports into out; returns how many. The caller owns
 * each report's incident (json_decref; NULL in most). */
size_t gh_executor_poll(struct gh_executor *ex, struct gh_exec_report *out, size_t max);

/* Tasks queued or running. */
size_t gh_executor_depth(struct gh_executor *ex);

#endif
