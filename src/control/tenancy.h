/* tenancy.h - whose telemetry a node may send: the controller's view of
 * which pod (by UID) belongs to which job and runs on which node, from its
 * Pod informer, and where each job declares its checkpoints go. Training
 * telemetry (step, checkpoint, replica_checksum) from an agent is taken
 * only when the job has a pod on the agent's node, and, when the agent
 * stamped the writer's pod (pod_uid, agent/telemetry.h), only when that pod
 * is a pod of the job on that node. A checkpoint of a job that declares a
 * prefix (GH_ANN_CHECKPOINT_PREFIX) is taken only with a path under it.
 *
 * Threads: the loop writes (the informers' handlers), the ingest server's
 * threads read (gh_tenancy_admit); one mutex guards the tables. Bounded:
 * at most max_pods pods, as many placements and declared prefixes. */
#ifndef GH_CONTROL_TENANCY_H
#define GH_CONTROL_TENANCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

/* On a Job, JobSet or PyTorchJob (and only there: its owner writes it):
 * the location every checkpoint of the job is under, e.g.
 * "s3://ckpt/team-a/llm/". The resume ConfigMap carries only a path under
 * it (docs/resume-contract.md). */
#define GH_ANN_CHECKPOINT_PREFIX "gpuheal.io/checkpoint-prefix"
#define GH_TENANCY_PREFIX_MAX 1024

struct gh_tenancy;

/* *out: caller frees with gh_tenancy_free(). max_pods 0 = 1M. GH_ENOMEM. */
int gh_tenancy_new(size_t max_pods, struct gh_tenancy **out, struct gh_err *err);
void gh_tenancy_free(struct gh_tenancy *t); /* accepts NULL */

/* The pod uid (borrowed) is job's on node (both borrowed), or, with job or
 * node NULL, is no job's any more (also what a deleted pod gets). GH_OK,
 * GH_ELIMIT (the table is full: the pod's lines are refused), GH_ENOMEM. */
int gh_tenancy_pod(struct gh_tenancy *t, const char *uid, const char *job, const char *node);

/* What the controller must have listed before it judges a line: the pods
 * (a pod not yet seen may be one the list still brings) and the training
 * jobs (a job's declared prefix, and which JobSet a pod's Job belongs to,
 * come from them). Until both are listed every training line is answered
 * "retry" (GH_EAGAIN), never taken unchecked nor refused. */
enum gh_tenancy_list {
    GH_TENANCY_PODS = 1,
    GH_TENANCY_JOBS = 2,
};
/* what has been listed (true) or is being listed again (false). */
void gh_tenancy_set_listed(struct gh_tenancy *t, enum gh_tenancy_list what, bool listed);

/* The prefix job declares (borrowed; NULL or "" = none). GH_OK, GH_EINVAL
 * (a prefix that is not a safe one: err says why; the job then has none),
 * GH_ELIMIT, GH_ENOMEM. */
int gh_tenancy_set_prefix(struct gh_tenancy *t, const char *job, const char *prefix,
                          struct gh_err *err);

/* Whether telemetry line sig (borrowed), sent by node's agent (node
 * borrowed), may be taken: GH_OK; GH_EINVAL refused (why[0..cap) says
 * why: another job's pod, no pod of the job on node, a path outside the
 * job's prefix); GH_EAGAIN not now (the pods or the jobs are not listed
 * yet). Signals other than step, checkpoint and replica_checksum are
 * GH_OK. Thread-safe. */
int gh_tenancy_admit(struct gh_tenancy *t, const char *node, const struct gh_signal *sig, char *why,
                     size_t cap);

/* Whether path (borrowed) is under prefix (borrowed): it starts with the
 * prefix and continues at a '/' boundary (the prefix's own trailing '/',
 * or a '/' right after it; "s3://b/job" does not cover "s3://b/job-evil"),
 * and neither has a "." or ".." segment, an escaped dot or slash ("%2e",
 * "%2f"), a backslash or a control character. A NULL or empty prefix
 * covers nothing. */
bool gh_tenancy_path_under(const char *prefix, const char *path);

/* Whether prefix (borrowed) is one a job may declare: not empty, at most
 * GH_TENANCY_PREFIX_MAX bytes, and none of what path_under refuses.
 * GH_OK or GH_EINVAL with err saying what is wrong. */
int gh_tenancy_prefix_check(const char *prefix, struct gh_err *err);

struct gh_tenancy_stats {
    size_t pods, placements, prefixes;
    uint64_t admitted, refused, retried;
};
void gh_tenancy_stats(struct gh_tenancy *t, struct gh_tenancy_stats *out);

#endif
