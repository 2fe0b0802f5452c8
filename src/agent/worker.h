/* worker.h - the agent's one worker thread pattern: a thread that runs a
 * source's work every period (or once, when the work is a loop of its own),
 * waits on the monotonic clock between runs, and stops promptly through a
 * stop flag, a condition variable and an eventfd that the work can poll()
 * alongside its own fds (a child process, a socket).
 *
 * Used by the sources with threads of their own: NIC, probes, DCGM (health
 * watches and the exporter scraper), NVML's poll thread and the requests
 * watcher. The deadline of each run is the work's own (NVML's call
 * deadline, a probe's timeout, curl's): a stop waits for the run in
 * progress, so it is bounded by that deadline.
 *
 * Cadences
 * - GH_WORKER_AFTER: the next run starts period_ns after the previous one
 *   ended (NIC).
 * - GH_WORKER_RATE: runs start every period_ns from the first; a run that
 *   ends after its successor was due (a hang) restarts the cadence from its
 *   end (NVML, DCGM).
 * - period_ns == 0: run() is called once; it loops itself, checking
 *   gh_worker_stopping() and waiting with gh_worker_wait_until() (probes,
 *   requests).
 *
 * A worker can be started again after a stop. Not thread-safe for start,
 * stop and free (one owner); stopping, wait_until, stop_fd (the worker's
 * thread) and kick (any thread) may run concurrently with them. */
#ifndef GH_AGENT_WORKER_H
#define GH_AGENT_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct gh_worker;

enum gh_worker_cadence { GH_WORKER_AFTER = 0, GH_WORKER_RATE };

struct gh_worker_opts {
    const char *name;  /* borrowed, must outlive the worker: "nic", for errors */
    int64_t period_ns; /* > 0: run() every period; 0: run() once (a loop itself) */
    enum gh_worker_cadence cadence;
    /* The work, on the worker's thread; w is the worker (for stopping,
     * wait_until, stop_fd). arg is opts.arg, borrowed. */
    void (*run)(void *arg, struct gh_worker *w);
    /* Optional: called by gh_worker_stop (on the stopping thread) after the
     * stop flag is set, to cut short a wait run() does on its own (e.g.
     * gh_kube_client_wakeup). */
    void (*wake)(void *arg);
    void *arg;
};

/* *out: a new, not yet started worker; caller frees with gh_worker_free().
 * GH_EINVAL (no run, negative period), GH_ENOMEM, GH_EIO (eventfd). */
int gh_worker_new(const struct gh_worker_opts *opts, struct gh_worker **out, struct gh_err *err);

/* Starts the thread. GH_EINVAL "<name>: already started"; GH_EIO when the
 * thread cannot be created. */
int gh_worker_start(struct gh_worker *w, struct gh_err *err);

/* Asks the thread to stop (flag, condition, eventfd, opts.wake) and joins
 * it: returns when the run in progress has returned. Idempotent; accepts
 * NULL and a worker never started. */
void gh_worker_stop(struct gh_worker *w);

/* true from a successful start until the stop that joins the thread. For
 * the owner. */
bool gh_worker_running(const struct gh_worker *w);

/* true once a stop was asked (until the next start). */
bool gh_worker_stopping(const struct gh_worker *w);

/* Waits until the monotonic time at_ns (INT64_MAX: no deadline), a kick or
 * a stop. Returns false when stopping, else true (deadline or kick: the
 * caller re-checks its own state). For run(), on the worker's thread. */
bool gh_worker_wait_until(struct gh_worker *w, int64_t at_ns);

/* Ends the current or next gh_worker_wait_until early (new work queued).
 * Any thread. */
void gh_worker_kick(struct gh_worker *w);

/* An eventfd, readable from the moment a stop is asked until the thread is
 * joined: for run()'s own poll() (a child process's pipes). Borrowed. */
int gh_worker_stop_fd(const struct gh_worker *w);

/* Stops (as gh_worker_stop) and frees. Accepts NULL. */
void gh_worker_free(struct gh_worker *w);

#endif
