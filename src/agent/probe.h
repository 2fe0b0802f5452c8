/* probe.h - the agent's health-check runner: configured commands run on
 * demand (the controller asks through GPUNodeHealth) and on a schedule;
 * each run becomes one probe_result signal (source "probe": check, passed,
 * detail).
 *
 * A check is an argv (no shell; use {"/bin/sh","-c","..."} for one), run
 * with posix_spawn in its own process group, stdin /dev/null, stdout and
 * stderr captured together through a pipe. passed = exited with status 0
 * within the timeout. detail: "exit 0", "exit 3", "killed by signal 11" or
 * "timed out after 5.0 s", then ": " and the last opts.output_max bytes of
 * output (control bytes and invalid UTF-8 as '?'), when there was any. On
 * timeout, on stop, and after the command exits, the whole process group
 * gets SIGKILL (a check leaves nothing running).
 *
 * Checks run one at a time on the source's worker thread, never on the
 * caller's: gh_probe_request() only queues (a check already queued is not
 * queued twice). A scheduled check first runs one interval after start.
 * The waits use CLOCK_MONOTONIC; signal timestamps opts.clock.
 *
 * The child is reaped with waitpid() on its pid: a process that sets
 * SIGCHLD to SIG_IGN cannot use this module.
 *
 * emit is called from the worker thread, never concurrently with itself. */
#ifndef GH_AGENT_PROBE_H
#define GH_AGENT_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_PROBE_MAX_CHECKS 32
#define GH_PROBE_MAX_ARGS 32
#define GH_PROBE_OUTPUT_MAX_DEFAULT 1024

/* Receives each result (borrowed for the call). */
typedef void (*gh_probe_emit_fn)(void *ctx, const struct gh_signal *s);

/* One configured check. Everything is copied by gh_probe_new(). */
struct gh_probe_check {
    const char *name;           /* the signal's "check", e.g. "gemm_checksum"; unique */
    const char *const *argv;    /* NULL-terminated, argv[0] a path (no PATH search) */
    int64_t timeout_ns;         /* 0 = 60 s */
    int64_t interval_ns;        /* 0 = on demand only */
    int gpu;                    /* the GPU it checks, -1 = node-level */
    const char *const *envp;    /* the child's environment, NULL-terminated "K=V";
                                 * NULL = the agent's. gh_probe_run_check() only:
                                 * gh_probe_new() ignores it */
};

struct gh_probe_opts {
    const char *node;           /* copied; required */
    const struct gh_probe_check *checks; /* borrowed for gh_probe_new (copied) */
    size_t n_checks;            /* at most GH_PROBE_MAX_CHECKS */
    size_t output_max;          /* 0 = GH_PROBE_OUTPUT_MAX_DEFAULT; at most 16384 */
    const struct gh_clock *clock; /* borrowed; NULL = real */
    gh_probe_emit_fn emit;      /* required */
    void *emit_ctx;
};

void gh_probe_opts_init(struct gh_probe_opts *o);

/* The outcome of one run. detail is malloc'd (caller frees). */
struct gh_probe_outcome {
    bool passed;
    bool timed_out;
    int exit_code;              /* -1 when killed or not started */
    int term_signal;            /* 0 when it exited */
    int64_t duration_ns;
    char *detail;
};

/* Runs one check now on the calling thread (blocks up to its timeout; for
 * workers, tools and tests). stop_fd (-1 = none) readable = kill and
 * return early with GH_EAGAIN. GH_OK with *out filled (passed or not);
 * GH_EIO when it could not be started (out filled too: passed false,
 * detail says why); GH_ENOMEM. */
int gh_probe_run_check(const struct gh_probe_check *c, size_t output_max, int stop_fd,
                       struct gh_probe_outcome *out, struct gh_err *err);
/* Frees out->detail. Accepts NULL. */
void gh_probe_outcome_clear(struct gh_probe_outcome *out);

struct gh_probe;

/* Validates and copies the checks (argv[0] must be an absolute path; names
 * unique and non-empty). *out: caller frees with gh_probe_free(). */
int gh_probe_new(const struct gh_probe_opts *opts, struct gh_probe **out, struct gh_err *err);

/* Starts the worker (schedules and the request queue). GH_EINVAL if started. */
int gh_probe_start(struct gh_probe *p, struct gh_err *err);
/* Stops the worker, killing a running check. Idempotent. */
void gh_probe_stop(struct gh_probe *p);

/* Queues check `name` (borrowed) to run soon. Never blocks on the check.
 * GH_ENOTFOUND for an unknown name. Thread-safe. Before start the request
 * waits for start. */
int gh_probe_request(struct gh_probe *p, const char *name, struct gh_err *err);

/* The latest result of a check, for /metrics and GPUNodeHealth. */
struct gh_probe_last {
    bool has_run;
    bool passed;
    bool timed_out;
    int64_t ts_ns;              /* when it finished, opts.clock */
    int64_t duration_ns;
    uint64_t runs, failures;
    char detail[256];           /* start of the detail */
};
/* GH_ENOTFOUND for an unknown name. Thread-safe. */
int gh_probe_last(struct gh_probe *p, const char *name, struct gh_probe_last *out);

/* Stops and frees. Accepts NULL. */
void gh_probe_free(struct gh_probe *p);

#endif
