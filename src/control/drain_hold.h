/* drain_hold.h - the durable record of a drain held for a checkpoint
 * (drain_wait.h), so that a controller killed during the hold, or a new
 * leader, resumes it with the same deadline and drains once.
 *
 * In the audit store a hold is:
 *   - the incident, phase "HeldForCheckpoint" (the Incident object says
 *     Pending, with the hold in its message);
 *   - an intent "<id>/hold" (action "hold_drain", state "held": the
 *     executor's replay, which runs "pending" intents, leaves it alone)
 *     whose payload is the held task: its kind (decision or approved), the
 *     guards' verdicts, the jobs waited for, since and deadline;
 *   - guard rows (guard "checkpoint", action drain_node): verdict
 *     "held_for_checkpoint" when held, "hold_resumed" for each resumption
 *     by a new leader (after a restart or a takeover), "released" ("released: job X saved checkpoint step
 *     N" / "released: timeout ...") when it goes to the executor.
 * The release flips the phase from HeldForCheckpoint in the commit that
 * writes the actions' intents: a second release of the same hold (a
 * restart between the two) finds it released and does nothing.
 *
 * The executor writes holds and releases (its worker threads own the
 * store); the controller reads them back once per leadership. */
#ifndef GH_CONTROL_DRAIN_HOLD_H
#define GH_CONTROL_DRAIN_HOLD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"
#include "common/err.h"
#include "control/drain_wait.h"
#include "control/task-t.h"

#define GH_PHASE_HELD "HeldForCheckpoint"

/* The payload of a hold's intent (new reference; NULL on OOM) for task t
 * (kind DECISION or APPROVED; borrowed), held for jobs[0..n) from since_ns
 * until deadline_ns. */
json_t *gh_drain_hold_payload(const struct gh_task *t, const char *const *jobs, int n,
                              int64_t since_ns, int64_t deadline_ns);

/* In the caller's transaction: the hold of incident inc (borrowed; already
 * recorded) with payload (borrowed): its intent, its guard row, phase
 * HeldForCheckpoint. detail[0..cap) receives the sentence written. */
int gh_drain_hold_record(struct gh_audit *a, const json_t *inc, const json_t *payload,
                         int64_t now_ns, char *detail, size_t cap, struct gh_err *err);

/* In the caller's transaction: a held task released (inc borrowed, with
 * the "drain_wait" that drain_wait.c told). When the store holds incident
 * inc's id as HeldForCheckpoint: writes the "released" guard row, the
 * reason and object that tell the wait, finishes the hold's intent
 * ("released") and sets phase Acting; *released = true. Otherwise nothing
 * is written and *released = false (released before: a duplicate). */
int gh_drain_hold_release(struct gh_audit *a, const json_t *inc, int64_t now_ns, bool *released,
                          struct gh_err *err);

/* One hold read back from the store. A value type; t.incident owned. */
struct gh_drain_hold {
    struct gh_task t;
    char jobs[GH_DRAIN_WAIT_JOBS][320];
    int n;
    int64_t since_ns, deadline_ns;
};

/* fn takes h->t.incident (it must free it or hand it on). */
typedef void (*gh_drain_hold_fn)(void *ud, struct gh_drain_hold *h);
/* A hold of incident id (borrowed for the call) that could not be read
 * back or resumed, and why (err, borrowed): skipped. */
typedef void (*gh_drain_hold_skip_fn)(void *ud, const char *id, const struct gh_err *err);

/* Calls fn for each hold recorded for an incident decided at or after
 * since_ns, after writing its "hold_resumed" guard row (by who, at now_ns:
 * the time left, or that the deadline passed). A hold whose record cannot
 * be read is skipped and told to skipped (NULL: not told); this module
 * does not log (common/log.h), its caller does. */
int gh_drain_holds_resume(struct gh_audit *a, int64_t since_ns, int64_t now_ns, const char *who,
                          gh_drain_hold_fn fn, gh_drain_hold_skip_fn skipped, void *ud,
                          struct gh_err *err);

#endif
