/* requests.h - carries out the controller's requests to this node's agent
 * (annotations gpuheal.io/request-<action> on the node's GPUNodeHealth,
 * written by gh_act_request_node_op) and reports the results.
 *
 * Actions: reset_gpu, reboot_node, run_diagnostics. The annotation's value
 * is {"id","action","gpu","incident","time"}; a request is new when its id
 * differs from the last one handled for that action. For each new request,
 * on a worker thread of its own (with its own Kubernetes client, which it
 * owns from gh_requests_new on):
 *   1. the handled id is written to opts.state_path first (the file names
 *      the last id per action, the request running, a reboot awaited and a
 *      validation owed), so that a restart neither repeats a request nor
 *      forgets it (a validation cut short runs at the next start);
 *   2. the configured command for the action runs (an argv, no shell; env
 *      GPUHEAL_ACTION, GPUHEAL_REQUEST_ID, GPUHEAL_INCIDENT, GPUHEAL_GPU (the
 *      index, empty for node-level), GPUHEAL_NODE; opts.timeout_ns; output
 *      captured, its last opts.output_max bytes kept; see probe.h);
 *   3. a probe_result signal (check "request_<action>") goes to opts.emit;
 *   4. unless the action failed, the validation command runs (same env);
 *      its probe_result (check "validate") goes to opts.emit;
 *   5. server-side apply (force, field manager opts.field_manager, never
 *      the health publisher's) of GPUNodeHealth status.conditions:
 *      "Request-<action>" (status True when the command exited 0, False
 *      otherwise; reason Succeeded, Failed, TimedOut, NotConfigured,
 *      Interrupted, RebootPending (Unknown); message "request <id>: ..."
 *      with the output excerpt; lastTransitionTime the end of the run) and
 *      "Validated" (True/False, reason ValidationPassed, ValidationFailed,
 *      ActionFailed or NoValidateCommand, message naming the probe,
 *      lastTransitionTime now, changed or not); and, when status.lastAction
 *      is this request's (same action and incident), lastAction.result
 *      Succeeded or Failed (merge patch with a resourceVersion
 *      precondition; the controller writes lastAction after the
 *      annotation, so it is waited for up to 2 min). A failed write is
 *      retried every 5 s.
 * reboot_node: after the reboot command exits 0 (or is cut short by the
 * agent stopping) the request stays in progress (condition RebootPending;
 * other requests run meanwhile); when the agent starts again with a
 * different boot id it is recorded as Succeeded and validation runs. The
 * same boot id at start means the reboot has not happened: it is not run
 * again. Any other request found in progress at start was interrupted by
 * the agent stopping: it is recorded as Failed (Interrupted), not rerun.
 * A request whose id already appears in its Request-<action> condition
 * (state file lost) is taken as handled.
 *
 * The module never cordons, uncordons or taints: that is the controller's. */
#ifndef GH_AGENT_REQUESTS_H
#define GH_AGENT_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probe.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "kube/client.h"

#define GH_REQUESTS_FIELD_MANAGER "gpuheal-agent-requests"
#define GH_REQUESTS_VALIDATED "Validated"

enum gh_request_action {
    GH_REQ_RESET_GPU,
    GH_REQ_REBOOT_NODE,
    GH_REQ_RUN_DIAGNOSTICS,
    GH_REQ__COUNT
};

/* "reset_gpu", "reboot_node", "run_diagnostics" (static). */
const char *gh_request_action_name(enum gh_request_action a);

/* Splits a command ("PATH ARG ...", separated by spaces or tabs, no quoting,
 * no shell) into a NULL-terminated argv (*out, caller frees with
 * gh_requests_argv_free). argv[0] must be an absolute path; at most
 * GH_PROBE_MAX_ARGS words. GH_EINVAL with the reason, GH_ENOMEM. */
int gh_requests_parse_cmd(const char *cmd, char ***out, struct gh_err *err);
void gh_requests_argv_free(char **argv);

struct gh_requests_opts {
    const char *node;                      /* copied; required */
    const char *state_path;                /* copied; required: the handled-request file */
    const char *boot_id;                   /* copied; required: this boot's id */
    const char *cmd[GH_REQ__COUNT];        /* copied; NULL = not configured */
    const char *validate_cmd;              /* copied; NULL = not configured */
    int64_t timeout_ns;                    /* per command; 0 = 10 min */
    size_t output_max;                     /* 0 = 512 bytes of output kept */
    const char *field_manager;             /* copied; NULL = GH_REQUESTS_FIELD_MANAGER */
    gh_probe_emit_fn emit;                 /* required; called from the worker thread */
    void *emit_ctx;
    /* Optional: each restart request on the GPUNodeHealth (annotation
     * restart.gpuheal.io/<pod UID> = {"id","incident","pod","exit_code",
     * "time"}, control/job_inplace.h) is passed on, from the worker thread,
     * at every update that still shows it (the callee keeps it once per id;
     * agent/telemetry.h). One older than GH_REQUESTS_RESTART_MAX_AGE by its
     * "time" is not (left by a controller that stopped before removing it). */
    void (*restart)(void *ctx, const char *pod_uid, const char *id, const char *incident,
                    int exit_code);
    void *restart_ctx;
};
#define GH_REQUESTS_RESTART_PREFIX "restart.gpuheal.io/"
#define GH_REQUESTS_RESTART_MAX_AGE_NS (120 * GH_NS_PER_S)

struct gh_requests;

/* Validates opts (commands parsed), reads the state file (absent = nothing
 * handled yet; unreadable or corrupt = GH_EINVAL) and takes ownership of c
 * (freed by gh_requests_free, also on failure; used only by the worker
 * thread from gh_requests_start on; its clock stamps the signals and the
 * conditions). */
int gh_requests_new(struct gh_kube_client *c, const struct gh_requests_opts *opts,
                    struct gh_requests **out, struct gh_err *err);

/* Starts the worker: resumes a request in progress, then watches the
 * node's GPUNodeHealth. */
int gh_requests_start(struct gh_requests *r, struct gh_err *err);

/* Stops the worker (a running command's process group is killed; the
 * request stays in progress and is recorded as Interrupted at the next
 * start, unless it was a reboot), frees the client and everything.
 * Accepts NULL. */
void gh_requests_free(struct gh_requests *r);

struct gh_requests_stats {
    uint64_t received[GH_REQ__COUNT];   /* new requests seen */
    uint64_t succeeded[GH_REQ__COUNT];
    uint64_t failed[GH_REQ__COUNT];
    uint64_t validations_passed, validations_failed;
    uint64_t status_writes, write_failures;
    char last_err[GH_ERR_MAX];
};
/* Thread-safe. */
void gh_requests_stats(struct gh_requests *r, struct gh_requests_stats *out);

#endif
