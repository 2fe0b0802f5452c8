/* drain_wait.h - drain_node in "checkpoint" mode: a decision that drains a
 * node running a job of a namespace annotated
 *
 *     gpuheal.io/drain-mode: checkpoint
 *     gpuheal.io/drain-checkpoint-timeout: 10m     (optional; default 10m)
 *
 * is held by the event loop (never blocking it: a timer on the Kubernetes
 * client's loop wakes it at the deadline) until each such job has reported
 * a saved checkpoint (a `checkpoint` signal, state "saved") after the
 * decision, or until the timeout. Then the decision goes to the executor as
 * usual; the incident says what the wait was (field "drain_wait" and a
 * sentence appended to its reason), so the audit store records it.
 * Annotation absent or "immediate": drains at once (the default).
 *
 * The holds are bounded (GH_DRAIN_WAITS_MAX); a full table drains at once.
 * The latest saved checkpoint of the last GH_DRAIN_RECENT_MAX jobs is kept
 * too, so that a hold resumed after a restart (drain_hold.h) counts a
 * checkpoint that arrived after its start, before the restart (the signal
 * journal's replay reports it with its arrival time). */
#ifndef GH_CONTROL_DRAIN_WAIT_H
#define GH_CONTROL_DRAIN_WAIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "control/task-t.h"

#define GH_ANN_DRAIN_MODE "gpuheal.io/drain-mode"
#define GH_ANN_DRAIN_CKPT_TIMEOUT "gpuheal.io/drain-checkpoint-timeout"
#define GH_DRAIN_CKPT_TIMEOUT_DEFAULT (600 * GH_NS_PER_S)
#define GH_DRAIN_WAIT_JOBS 8
#define GH_DRAIN_WAITS_MAX 256
#define GH_DRAIN_RECENT_MAX 64

struct gh_drain_mode {
    bool checkpoint;    /* wait for the job's next checkpoint */
    int64_t timeout_ns; /* at most this long */
};

/* The mode a Namespace object (borrowed; its metadata.annotations) asks
 * for. GH_EINVAL with a message naming the annotation for a value that is
 * neither "immediate" nor "checkpoint", or a timeout that is not a duration
 * ("90s", "10m", "1h"); m is then immediate. ns NULL: immediate. */
int gh_drain_mode_of(const json_t *ns, struct gh_drain_mode *m, struct gh_err *err);

struct gh_drain_waits;

struct gh_drain_waits *gh_drain_waits_new(void);
/* Frees the held tasks (their incidents too). Accepts NULL. */
void gh_drain_waits_free(struct gh_drain_waits *w);

/* Holds t (stolen: t->incident is NULL after) until every job of
 * jobs[0..n) ("namespace/name", copied; 1 <= n <= GH_DRAIN_WAIT_JOBS) has
 * saved a checkpoint at or after now_ns (the hold's start: in the past for
 * a resumed hold, whose jobs' recent checkpoints count), or until
 * deadline_ns. GH_ELIMIT when GH_DRAIN_WAITS_MAX are held (t untouched). */
int gh_drain_waits_hold(struct gh_drain_waits *w, struct gh_task *t, const char *const *jobs,
                        int n, int64_t now_ns, int64_t deadline_ns, struct gh_err *err);

/* A checkpoint of job (state saved; step < 0 unknown; path may be NULL)
 * arrived at now_ns (remembered as the job's recent one). Returns true
 * when a hold waited for it. */
bool gh_drain_waits_checkpoint(struct gh_drain_waits *w, const char *job, int64_t step,
                               const char *path, int64_t now_ns);

/* Moves one hold that is done (every job checkpointed, or its deadline <=
 * now_ns) into *out (the caller owns out->incident, whose "drain_wait"
 * and reason now tell the wait). False when none is done. */
bool gh_drain_waits_take(struct gh_drain_waits *w, int64_t now_ns, struct gh_task *out);

/* The earliest deadline held; INT64_MAX when none. */
int64_t gh_drain_waits_next_deadline(const struct gh_drain_waits *w);
size_t gh_drain_waits_count(const struct gh_drain_waits *w);
/* Whether the decision of incident id is held. */
bool gh_drain_waits_has(const struct gh_drain_waits *w, const char *id);
/* Drops every hold (their incidents freed; leadership lost: the store
 * keeps them for the next leader); the recent checkpoints stay. */
void gh_drain_waits_clear(struct gh_drain_waits *w);

#endif
