/* workq.h - a bounded queue of jobs run on worker threads of its own, for
 * work that may block on a dependency (a TokenReview against the API
 * server, a commit to the store) and so must never run on the ingest
 * server's request threads, which also answer /healthz, /readyz and
 * /metrics.
 *
 * Each job gets exactly one answer (job->answer):
 *   GH_WORKQ_DONE     its run ended before its deadline;
 *   GH_WORKQ_LATE     its deadline (opts.wait_ns after the push) passed
 *                     first: the requester answers "not now" (503) at
 *                     once, and a run already started goes on to its end
 *                     with nobody waiting for it (its effects, a cached
 *                     verdict or a committed batch, are still kept);
 *   GH_WORKQ_STOPPED  the queue stopped before it ended.
 * A push is refused at once (GH_EAGAIN, nothing queued) when opts.cap jobs
 * wait, when every worker has been on its job for longer than
 * opts.stall_ns (the dependency is not answering: a fast refusal beats a
 * wait), or when the queue is stopping.
 *
 * Thread-safe. Deadlines on the monotonic clock (common/mono.h). */
#ifndef GH_INGEST_WORKQ_H
#define GH_INGEST_WORKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum gh_workq_end { GH_WORKQ_DONE, GH_WORKQ_LATE, GH_WORKQ_STOPPED };

/* Embedded in the owner's job (first member or found by offset). The
 * owner sets the three callbacks before the push; the rest is the
 * queue's. After a GH_OK push the job belongs to the queue until release. */
struct gh_workq_job {
    void (*run)(struct gh_workq_job *j); /* on a worker; may block (bounded) */
    /* exactly once, on a worker or the queue's timer thread, no lock held */
    void (*answer)(struct gh_workq_job *j, enum gh_workq_end end);
    void (*release)(struct gh_workq_job *j); /* once the run (if any) and the
                                                answer are over: frees j */
    /* the queue's */
    struct gh_workq_job *next, *reap_next;
    int64_t deadline_ns;
    int refs;
    bool answered;
};

struct gh_workq_opts {
    const char *name; /* borrowed, kept: "review", "write" (for messages) */
    unsigned threads; /* workers; 0: 1 */
    size_t cap;       /* jobs waiting (not running); 0: 64 */
    int64_t wait_ns;  /* a job's deadline after its push; 0: 2 s */
    int64_t stall_ns; /* a worker on one job longer is stalled; 0: 1 s */
};

struct gh_workq;

/* *out: caller frees with gh_workq_free. GH_ENOMEM, GH_EIO (threads). */
int gh_workq_new(const struct gh_workq_opts *opts, struct gh_workq **out, struct gh_err *err);

/* Queues j (at the head when urgent). GH_OK, or GH_EAGAIN (refused, see
 * above; j untouched and still the caller's), with why[cap] saying why. */
int gh_workq_push(struct gh_workq *q, struct gh_workq_job *j, bool urgent, char *why, size_t cap);

struct gh_workq_stats {
    size_t waiting, running;
    uint64_t done, late, refused_full, refused_stalled;
};
void gh_workq_stats(struct gh_workq *q, struct gh_workq_stats *out);

/* Answers every job not answered yet GH_WORKQ_STOPPED, lets the runs in
 * progress end (each bounded by its own deadline), joins the threads.
 * Pushes are refused from then on. Idempotent. */
void gh_workq_stop(struct gh_workq *q);

/* Stops (gh_workq_stop) and frees. NULL ok. */
void gh_workq_free(struct gh_workq *q);

#endif
