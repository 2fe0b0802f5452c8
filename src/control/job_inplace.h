/* job_inplace.h - the fast rungs of the recovery ladder (docs/resume-contract.md,
 * "How fast the job comes back"): a job's running pods restarted in place
 * (Kubernetes container restart rules, action RestartAllContainers: the pod
 * keeps its node, IP, devices and volumes), and "replace only what is
 * lost" (the pods of an excluded node deleted, marked DisruptionTarget so
 * that the job's own failure budget is not spent, while the others restart
 * in place).
 *
 * How a pod is told: the controller writes the annotation
 * restart.gpuheal.io/<pod UID> = {"id","incident","pod","exit_code","time"}
 * on the GPUNodeHealth of the pod's node; that node's agent (agent/requests.c)
 * hands it to the training processes of that pod connected to its
 * telemetry socket (agent/telemetry.c), and the reporter (python/) makes
 * the process exit with exit_code, which the pod's restart rule maps to
 * RestartAllContainers. The controller sees it done when every pod's
 * containers' restart count rose; the annotations are removed at the end
 * either way.
 *
 * Synchronous, like every action (actuator.h): on the executor's thread. */
#ifndef GH_CONTROL_JOB_INPLACE_H
#define GH_CONTROL_JOB_INPLACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "control/actuator.h"

#define GH_ANN_RESTART_PREFIX "restart.gpuheal.io/" /* + pod UID, on GPUNodeHealth */
#define GH_INPLACE_TIMEOUT_DEFAULT_NS (30 * GH_NS_PER_S)
/* the DisruptionTarget reason on the pods gpuheal deletes for a cause not
 * the job's own (docs/resume-contract.md, "The job's budget is the job's") */
#define GH_DISRUPTION_REASON "DeletionByGpuheal"

/* The exit code that makes the pod spec (a PodSpec, borrowed) restart all
 * its containers in place: the first container with a restartPolicyRules
 * entry of action RestartAllContainers and exitCodes operator In (its first
 * value in 1..255), or operator NotIn (the lowest code in 1..255 not
 * listed). -1 when there is none, with the reason in why (cap bytes). */
int gh_inplace_exit_code(const json_t *pod_spec, char *why, size_t cap);

/* The sum of the restart counts of a pod's containers (status.containerStatuses). */
long gh_inplace_restarts(const json_t *pod);

/* Whether pod (borrowed) may be restarted in place now: Running, not
 * being deleted. */
bool gh_inplace_running(const json_t *pod);

/* The ladder's rungs, as recorded in the action's detail ("mode <name>"). */
#define GH_MODE_IN_PLACE "in_place"
#define GH_MODE_REPLACE_LOST "replace_lost"
#define GH_MODE_FULL_RECREATE "full_recreate"
#define GH_MODE_DELETE_FAILED "delete_failed"

struct gh_inplace_opts {
    int64_t timeout_ns;            /* 0: GH_INPLACE_TIMEOUT_DEFAULT_NS */
    const char *const *lost_nodes; /* nodes excluded: their pods are deleted, not restarted
                                    * (replace only what is lost); borrowed */
    int n_lost;
};

/* Restarts in place the running pods of the job plan->namespace/name (plan:
 * the restart plan gh_act_restart_prepare built, borrowed; its "inplace"
 * member, when a run before this one left it, is resumed: the pods it
 * names, their restart counts before), after the resume ConfigMap is
 * applied; with o->lost_nodes, deletes the job's pods on those nodes
 * (DisruptionTarget first) once the others were told. Records what it
 * sends in plan's "inplace" member (the caller stores the plan before
 * anything is sent: *sent_cb, when not NULL, is called once with it first;
 * a non-zero return stops).
 *   GH_OK: every pod restarted (r "succeeded", detail "mode in_place: ...");
 *   GH_EUNSUPPORTED: this rung is not available (why: a pod without the
 *     restart rule, a pod not running, no GPUNodeHealth on a pod's node, a
 *     Job that is not Indexed for replace_lost ...): nothing was changed
 *     but the ConfigMap;
 *   GH_ETIMEOUT: a pod was not restarted within the timeout (the reporter
 *     not connected, the rule not acting): why says which;
 *   another code: an API failure (r holds it).
 * why: cap bytes, the reason a rung was not used or failed. */
typedef int (*gh_inplace_sent_fn)(void *ud, json_t *plan);
int gh_act_restart_in_place(const struct gh_act_ctx *x, json_t *plan,
                            const struct gh_inplace_opts *o, gh_inplace_sent_fn sent_cb, void *ud,
                            struct gh_act_result *r, char *why, size_t cap, struct gh_err *err);

/* The resume ConfigMap of plan (gh_act_restart_prepare's) applied alone
 * (job_ops.c). */
int gh_act_resume_apply(const struct gh_act_ctx *x, const json_t *plan, struct gh_act_result *r,
                        struct gh_err *err);

#endif
