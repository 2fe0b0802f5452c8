/* actuator.h - gpuheal's recovery actions as Kubernetes API calls, each
 * idempotent: running one twice (a controller killed and restarted between
 * the call and its record) changes nothing the second time and says so
 * ("noop"). Synchronous, on the calling thread's own client: the controller
 * runs them on its executor thread, never on its event loop.
 *
 * Ownership: what gpuheal sets on a node carries an annotation naming the
 * incident (gpuheal.io/cordoned-by, gpuheal.io/tainted-by); gpuheal only
 * ever undoes what carries its annotation, never a cordon or a taint that
 * someone else set.
 *
 * Implemented in node_ops.c (isolate, release, drain, requests to the
 * agent, replace hand-off, validation gate) and job_ops.c (retry in place,
 * restart from checkpoint with the resume ConfigMap; the job kinds in
 * job_kinds.c). */
#ifndef GH_CONTROL_ACTUATOR_H
#define GH_CONTROL_ACTUATOR_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "kube/client.h"

#define GH_TAINT_KEY "gpuheal.io/unhealthy"
#define GH_ANN_CORDONED_BY "gpuheal.io/cordoned-by"
#define GH_ANN_TAINTED_BY "gpuheal.io/tainted-by"
#define GH_ANN_ISOLATED_AT "gpuheal.io/isolated-at"
#define GH_ANN_REQUEST_PREFIX "gpuheal.io/request-" /* + action name, on GPUNodeHealth */
#define GH_ANN_RESTARTED_FOR "gpuheal.io/restarted-for"
#define GH_ANN_RESTART_COUNT "gpuheal.io/restart-count"
#define GH_ANN_AVOID_NODES "gpuheal.io/avoid-nodes"
/* on each pod template of a replacement job: the identity it runs as,
 * "system:serviceaccount:NS:NAME", copied from the job it replaces */
#define GH_ANN_SERVICE_ACCOUNT "gpuheal.io/service-account"
#define GH_ANN_APPROVED "gpuheal.io/approved"
#define GH_LABEL_REPLACE "gpuheal.io/replace"
#define GH_RESUME_SUFFIX "-gpuheal-resume"

/* What every action needs. Borrowed. */
struct gh_act_ctx {
    struct gh_kube_client *c;
    const struct gh_clock *clock;
    const char *incident;  /* the incident id: written into ownership annotations */
    const char *taint_key; /* the taint isolate_node sets and release_node removes;
                            * NULL: GH_TAINT_KEY */
};

/* The outcome of one action (a small value type). */
struct gh_act_result {
    char result[16];  /* "succeeded", "failed", "noop", "skipped"; "requested": handed to
                         the node agent, whose outcome is recorded when it answers */
    long http;        /* last API status code (0: none) */
    char api[400];    /* "HTTP 200", or the API's Status for a failure */
    char detail[512]; /* plain words: what changed */
};

/* Cordons node and adds the NoSchedule (or NoExecute) taint x->taint_key
 * (gpuheal.io/unhealthy by default), each with its ownership annotation; a cordon
 * already set by someone else is left alone and not claimed. */
int gh_act_isolate_node(const struct gh_act_ctx *x, const char *node, bool no_execute,
                        struct gh_act_result *r, struct gh_err *err);

/* Undoes what gpuheal set on node (its cordon, its taint), nothing else. */
int gh_act_release_node(const struct gh_act_ctx *x, const char *node, struct gh_act_result *r,
                        struct gh_err *err);

struct gh_drain_opts {
    int concurrency;      /* evictions in flight per drain; 0: 8 */
    int64_t timeout_ns;   /* give up on pods a PodDisruptionBudget keeps; 0: 60 s */
    int64_t grace_s;      /* pod termination grace; -1: the pod's own */
    int total;            /* evictions in flight across concurrent drains; 0: 64 */
    atomic_int *inflight; /* the count of those, shared by the drains running at once
                             (the executor's; borrowed); NULL: concurrency alone bounds */
};

/* Evicts every pod on node (Eviction API, so PodDisruptionBudgets hold)
 * except DaemonSet and mirror pods and finished pods, with bounded
 * concurrency; pods a budget protects are retried until timeout. */
int gh_act_drain_node(const struct gh_act_ctx *x, const char *node, const struct gh_drain_opts *o,
                      struct gh_act_result *r, struct gh_err *err);

/* A request for the node agent (reset_gpu, reboot_node, run_diagnostics)
 * on the node's GPUNodeHealth (created when absent): annotation
 * gpuheal.io/request-<action> = {"id","action","gpu","pci","incident","time"} (pci,
 * the GPU's bus id, only when its index gpu is unknown: -1 with pci set) and
 * status.lastAction {action, time, incident, result: Pending}. The agent
 * carries it out and reports on the GPUNodeHealth (gh_act_request_outcome);
 * the result is "requested" (also when the same request was already
 * posted), never "succeeded": only the agent knows. See docs/controller.md. */
int gh_act_request_node_op(const struct gh_act_ctx *x, const char *node, const char *action,
                           int gpu, const char *pci, struct gh_act_result *r, struct gh_err *err);

/* What the agent answered to request id (the annotation's "id") of action
 * on GPUNodeHealth gnh (borrowed): its condition Request-<action> naming
 * "request <id>" with a final reason. Returns false while there is none
 * (or only RebootPending); else fills result ("succeeded", "failed",
 * "not_configured", "interrupted") and detail ("agent: <Reason>: <its
 * message>", cap bytes). */
bool gh_act_request_outcome(const json_t *gnh, const char *action, const char *id,
                            char *result, size_t rcap, char *detail, size_t cap);


/* replace_node hand-off: label gpuheal.io/replace=true and annotations
 * gpuheal.io/replace-incident / -reason on the node; when the node belongs
 * to a Cluster API Machine, that Machine gets cluster.x-k8s.io/delete-machine. */
int gh_act_replace_node(const struct gh_act_ctx *x, const char *node, const char *reason,
                        struct gh_act_result *r, struct gh_err *err);

/* The validation gate: true when gnh (a GPUNodeHealth, borrowed) has the
 * condition Validated=True set at or after since_ns. */
bool gh_act_validation_passed(const json_t *gnh, int64_t since_ns);

/* retry_in_place: deletes the failed pods of job ns/name (label
 * batch.kubernetes.io/job-name, jobset.sigs.k8s.io/jobset-name or
 * training.kubeflow.org/job-name) and the pods named in pods[0..npods) ("ns/pod")
 * that are not running well, so the job's controller recreates them. */
int gh_act_retry_in_place(const struct gh_act_ctx *x, const char *ns, const char *name,
                          const char *const *pods, int npods, struct gh_act_result *r,
                          struct gh_err *err);

/* restart_from_checkpoint of the job ns/name: a batch/v1 Job (Indexed or
 * not; one a JobSet controls restarts that JobSet), else a JobSet
 * (jobset.x-k8s.io/v1alpha2), else a PyTorchJob (kubeflow.org/v1); in two
 * steps so that it survives a crash between them:
 *   prepare: reads the object and builds its replacement (same kind, name
 *     and spec, node affinity away from avoid[0..navoid) and the nodes
 *     earlier restarts avoided in every pod template, annotations naming
 *     the incident) into *payload (new JSON object with its "kind", stored
 *     with the intent before anything changes);
 *   execute: applies the resume ConfigMap <name>-gpuheal-resume (keys step,
 *     path, incident; docs/resume-contract.md), deletes the old object (by
 *     UID precondition) and creates the replacement. Run again, it sees the
 *     replacement and does nothing. step < 0: no checkpoint (start over). */
int gh_act_restart_prepare(const struct gh_act_ctx *x, const char *ns, const char *name,
                           const char *const *avoid, int navoid, int64_t step, const char *path,
                           json_t **payload, struct gh_act_result *r, struct gh_err *err);
int gh_act_restart_execute(const struct gh_act_ctx *x, const json_t *payload,
                           struct gh_act_result *r, struct gh_err *err);

/* Sets r to result with a formatted detail. */
void gh_act_result_set(struct gh_act_result *r, const char *result, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the API's answer in r: a success's status code, or a failure's
 * decoded Status (code, reason, message), or err's detail when no reply came. */
void gh_act_result_api_ok(struct gh_act_result *r, long code);
void gh_act_result_api_fail(struct gh_act_result *r, const struct gh_kube_status *st,
                            const struct gh_err *err);

#endif
