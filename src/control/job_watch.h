/* job_watch.h - informers on the training-job kinds (job_kinds.h: batch/v1
 * Job, JobSet, PyTorchJob, TrainJob, LeaderWorkerSet, MPIJob, Volcano Job), each started only
 * once API discovery (GET /apis/<group>/<version>) lists its resource, and
 * discovery retried every 30 s until it does, so a CRD installed after
 * the controller started is picked up. Every change to one of these
 * objects is reported as the job it concerns ("namespace/name"; a Job a
 * JobSet or MPIJob controls reports that, a JobSet a TrainJob controls the
 * TrainJob: gh_job_parent), so the controller re-reads the
 * placement of that job's pods. Everything runs on the client's loop. */
#ifndef GH_CONTROL_JOB_WATCH_H
#define GH_CONTROL_JOB_WATCH_H

#include <stdbool.h>

#include "common/err.h"
#include "control/job_kinds.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/store.h"
#include "signal/signal.h"

struct gh_job_watch;

/* job: "namespace/name", borrowed for the call; part: the child Job
 * ("namespace/name") that changed when it is part of job (a JobSet's or
 * an MPIJob's), so
 * that what was placed under the child's name moves to job; else NULL. */
typedef void (*gh_job_changed_fn)(void *ud, const char *job, const char *part);

/* c is borrowed and must outlive the watch; ns NULL: all namespaces
 * (copied). fn runs on the loop with ud. */
int gh_job_watch_new(struct gh_kube_client *c, const char *ns, gh_job_changed_fn fn, void *ud,
                     struct gh_job_watch **out, struct gh_err *err);
/* A signal the watch makes (job_finished, kube_signals.h): fn owns *s and
 * clears it with gh_signal_clear. */
typedef void (*gh_job_signal_fn)(void *ud, struct gh_signal *s);
/* Sets the receiver of the watch's signals (NULL: none). */
void gh_job_watch_on_signal(struct gh_job_watch *w, gh_job_signal_fn fn, void *ud);
/* What the watch did that its owner may log (this module does not log,
 * common/log.h): res is the kind's resource (gh_job_kind_name names it); rc and
 * error (borrowed for the call, "" when none) say why for the failures. */
enum gh_job_watch_what {
    GH_JOB_WATCH_INFORMER_ERROR,   /* an informer's watch or list failed (retried) */
    GH_JOB_WATCH_INFORMER_FAILED,  /* an informer could not start (discovery again in 30 s) */
    GH_JOB_WATCH_INFORMER_STARTED, /* the kind is served: its informer runs */
    GH_JOB_WATCH_INFORMER_SYNCED,  /* its informer listed every object of the kind */
    GH_JOB_WATCH_DISCOVERY_FAILED, /* discovery failed (again in 30 s) */
    GH_JOB_WATCH_NOT_SERVED,       /* the API server does not serve the kind (yet) */
};
struct gh_job_watch_note {
    enum gh_job_watch_what what;
    const struct gh_kube_res *res; /* the kind's resource (static) */
    int rc;                        /* INFORMER_ERROR: the informer's code */
    const char *error;
};
typedef void (*gh_job_watch_note_fn)(void *ud, const struct gh_job_watch_note *n);
/* Sets the receiver of the watch's notes (NULL: none). */
void gh_job_watch_on_note(struct gh_job_watch *w, gh_job_watch_note_fn fn, void *ud);
/* Starts discovery (asynchronous). */
int gh_job_watch_start(struct gh_job_watch *w, struct gh_err *err);
/* Cancels requests, timers and informers, frees. Accepts NULL. */
void gh_job_watch_free(struct gh_job_watch *w);

/* Whether every kind's objects are known: each kind's informer has listed
 * them or the API server does not serve it. False until discovery answered
 * for every kind, and again while a kind newly served is being listed. */
bool gh_job_watch_listed(const struct gh_job_watch *w);

/* The batch/v1 Job informer's cache (objects keep labels and
 * ownerReferences; borrowed), NULL while it does not run. */
const struct gh_kube_store *gh_job_watch_jobs(const struct gh_job_watch *w);
/* The Job and JobSet caches gh_job_of_pod climbs through (each NULL
 * while its informer does not run). */
struct gh_job_caches gh_job_watch_caches(const struct gh_job_watch *w);
/* The cache of kind (a name gh_job_kind_name gives: "Job", "JobSet",
 * "TrainJob", "Job.batch.volcano.sh", ...; borrowed), NULL while its
 * informer does not run or for another kind. Objects keep labels,
 * ownerReferences, creationTimestamp, the gpuheal.io/expected-end,
 * remaining and restart-cost annotations (job_costs.h),
 * gpuheal.io/checkpoint-prefix (tenancy.h), status.conditions and
 * status.state (a Volcano Job's phase). */
const struct gh_kube_store *gh_job_watch_store(const struct gh_job_watch *w, const char *kind);

#endif
