/* audit.h - the controller's audit store: every decision with its evidence
 * and rule, every guard decision (including "not acted: budget"), every
 * action with its API result and timing, and the intents written before
 * acting, on SQLite or PostgreSQL behind one interface.
 *
 *   gh_audit_open("sqlite:/var/lib/gpuheal/audit.db", &a, &err);
 *   gh_audit_open("postgres://user@host/db", &a, &err);
 *
 * Writes are synchronous: when a write returns GH_OK it is committed and
 * durable (SQLite: WAL with synchronous=FULL). A store belongs to one thread
 * at a time; the controller uses it from its worker threads, never from its
 * event loop. Readers (gpuheal explain/timeline) open their own store.
 *
 * Times are int64 nanoseconds since the epoch, UTC. */
#ifndef GH_AUDIT_AUDIT_H
#define GH_AUDIT_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct gh_audit;

/* url: "sqlite:PATH" (also a bare path), "postgres://..." or
 * "postgresql://..." (libpq URI), or "postgres:" + a libpq key=value string.
 * Creates the schema when absent. *out: caller frees with gh_audit_close. */
int gh_audit_open(const char *url, struct gh_audit **out, struct gh_err *err);
/* The same for readers: a SQLite file that does not exist is GH_ENOTFOUND
 * instead of a new, empty store. */
int gh_audit_open_existing(const char *url, struct gh_audit **out, struct gh_err *err);
void gh_audit_close(struct gh_audit *a);
/* "sqlite" or "postgres". */
const char *gh_audit_backend(const struct gh_audit *a);

/* Groups the following writes into one commit. Writes outside a group
 * commit one by one. */
int gh_audit_begin(struct gh_audit *a, struct gh_err *err);
int gh_audit_commit(struct gh_audit *a, struct gh_err *err);
void gh_audit_rollback(struct gh_audit *a);

/* ---- writes */

/* Records a decision: inc is an incident object of spec/signals.md section 3
 * (borrowed), with its evidence rows. mode: "act", "dry_run" or "approval";
 * phase: the Incident phase (Pending, AwaitingApproval, ...). Idempotent by
 * the incident id: a second record of the same id changes nothing and sets
 * *inserted (optional) false. */
int gh_audit_record_incident(struct gh_audit *a, const json_t *inc, const char *mode,
                             const char *phase, const char *controller, int64_t now,
                             bool *inserted, struct gh_err *err);

int gh_audit_set_phase(struct gh_audit *a, const char *incident_id, const char *phase,
                       struct gh_err *err);
/* Sets the phase of incident_id to `to` only if it is `from` now; *swapped
 * says whether it was (of two concurrent swaps, one wins: the row is
 * locked until the first commits). */
int gh_audit_swap_phase(struct gh_audit *a, const char *incident_id, const char *from,
                        const char *to, bool *swapped, struct gh_err *err);
/* Replaces the reason and the incident object (JSON text) of a recorded
 * incident: a drain held for a checkpoint tells its wait when released
 * (control/drain_hold.h). Strings borrowed. */
int gh_audit_set_reason(struct gh_audit *a, const char *incident_id, const char *reason,
                        const char *json, struct gh_err *err);

/* A guard's verdict on one action of an incident. Strings borrowed.
 * verdict: "allowed", "denied", "dry_run", "awaiting_approval", "approved". */
struct gh_audit_guard {
    const char *incident_id;
    int64_t ts_ns;
    const char *action;
    const char *target; /* "node/NAME", "job/NS/NAME", "pod/NS/NAME" */
    const char *guard;  /* "budget", "rate", "cooldown", "storm", "dry_run", "approval", "all" */
    const char *verdict;
    const char *detail; /* plain words: "not acted: budget (2 of 2 nodes isolated)" */
};
int gh_audit_record_guard(struct gh_audit *a, const struct gh_audit_guard *g, struct gh_err *err);

/* One action and its outcome. Strings borrowed. result: "succeeded",
 * "failed", "noop" (already in the wanted state), "skipped". */
struct gh_audit_action {
    const char *incident_id;
    const char *intent_id; /* may be NULL */
    const char *action;
    const char *target;
    int64_t started_ns, finished_ns;
    const char *result;
    long http;              /* last API status code, 0 when none */
    const char *api_result; /* "HTTP 201 Created", or the API's Status message */
    const char *detail;     /* plain words: what changed */
};
int gh_audit_record_action(struct gh_audit *a, const struct gh_audit_action *r,
                           struct gh_err *err);

/* Evidence that joined incident_id after it was decided (engine.h,
 * gh_engine_set_joined): ev is the signal object (spec section 1, borrowed),
 * node the joining node (borrowed; used when ev names none). Keyed by the
 * signal's id, else a hash of its JSON: a second record of the same signal
 * changes nothing. At most GH_AUDIT_JOINED_MAX rows per incident; past
 * that, nothing is stored and *res says so (the caller counts it). */
#define GH_AUDIT_JOINED_MAX 1000
enum gh_audit_joined {
    GH_AUDIT_JOINED_STORED,
    GH_AUDIT_JOINED_DUPLICATE, /* already stored */
    GH_AUDIT_JOINED_CAPPED,    /* the incident has GH_AUDIT_JOINED_MAX rows: not stored */
};
int gh_audit_record_joined(struct gh_audit *a, const char *incident_id, const char *node,
                           const json_t *ev, int64_t joined_ns, enum gh_audit_joined *res,
                           struct gh_err *err);

/* An intent: written (state "pending") before an action is attempted and
 * finished after it, so that a controller killed in between finds it on
 * start and completes it. id is unique per incident, action and target. */
#define GH_AUDIT_ID_MAX 256
struct gh_audit_intent {
    char id[GH_AUDIT_ID_MAX];
    char incident_id[64];
    int seq;               /* order within the incident */
    char action[32];
    char target[GH_AUDIT_ID_MAX];
    char state[16];        /* "pending", "done", "failed", "cancelled" */
    int64_t created_ns, updated_ns;
    int attempts;
    char *payload;         /* owned JSON text or NULL (what the action needs to resume) */
};
void gh_audit_intent_clear(struct gh_audit_intent *it);

/* Inserts it (state pending, attempts 1) unless an intent with its id
 * exists; then *existing (optional) receives true and the stored state is
 * loaded into it (payload replaced) with attempts incremented. */
int gh_audit_intent_begin(struct gh_audit *a, struct gh_audit_intent *it, bool *existing,
                          struct gh_err *err);
/* Replaces the payload (borrowed text) of intent id. */
int gh_audit_intent_set_payload(struct gh_audit *a, const char *id, const char *payload,
                                struct gh_err *err);
int gh_audit_intent_finish(struct gh_audit *a, const char *id, const char *state, int64_t now,
                           struct gh_err *err);
/* Calls fn for each pending intent, oldest first (it borrowed for the call). */
typedef int (*gh_audit_intent_fn)(void *ud, const struct gh_audit_intent *it);
int gh_audit_intents_pending(struct gh_audit *a, gh_audit_intent_fn fn, void *ud,
                             struct gh_err *err);

/* ---- reads */

/* Ids of the incidents decided at or after since_ns (what a restarted
 * controller must not decide again). */
typedef int (*gh_audit_id_fn)(void *ud, const char *id, const char *phase);
int gh_audit_incident_ids(struct gh_audit *a, int64_t since_ns, gh_audit_id_fn fn, void *ud,
                          struct gh_err *err);

/* The actions guards allowed (verdict "allowed" or "approved", release_node
 * excluded) recorded at or after since_ns, oldest first: what a restarted
 * controller counts again toward the hourly rate, the cooldowns and the storm
 * breaker. target: "node/NAME", "job/NS/NAME", ...; strings valid during
 * the call. */
typedef int (*gh_audit_allowed_fn)(void *ud, int64_t ts_ns, const char *action,
                                   const char *target);
int gh_audit_allowed_since(struct gh_audit *a, int64_t since_ns, gh_audit_allowed_fn fn,
                           void *ud, struct gh_err *err);

/* What explain and timeline ask about. */
enum gh_audit_subject_kind { GH_AUDIT_NODE, GH_AUDIT_JOB, GH_AUDIT_POD, GH_AUDIT_INCIDENT };
struct gh_audit_subject {
    enum gh_audit_subject_kind kind;
    char name[GH_AUDIT_ID_MAX]; /* node name, "ns/name" for jobs and pods, or an incident id */
};
/* Parses "node/NAME", "job/NS/NAME", "pod/NS/NAME", "incident/ID" (or a
 * bare "inc-..."). */
int gh_audit_subject_parse(const char *s, struct gh_audit_subject *out, struct gh_err *err);
/* "node/NAME" etc. into buf. */
const char *gh_audit_subject_str(const struct gh_audit_subject *s, char *buf, size_t cap);

/* A loaded incident with everything recorded about it. All strings owned
 * by the record (NULL when absent). */
struct gh_audit_ev_rec {
    int64_t ts_ns;
    char *source, *kind, *node, *job, *pod, *msg, *json;
    int gpu;      /* -1 when absent */
    long code;    /* -1 when absent */
    bool injected;
    int64_t joined_ns; /* joined evidence: when it joined (0: the decision's own) */
};
struct gh_audit_guard_rec {
    int64_t ts_ns;
    char *action, *target, *guard, *verdict, *detail;
};
struct gh_audit_action_rec {
    int64_t started_ns, finished_ns;
    char *action, *target, *result, *api_result, *detail;
    long http;
};
struct gh_audit_incident_rec {
    char *id, *cls, *severity, *node, *job, *rule, *reason, *actions, *mode, *phase;
    char *controller, *ckpt_path, *json;
    int gpu;            /* -1 when absent */
    int64_t ckpt_step;  /* -1 when absent */
    int64_t first_ns, decided_ns, recorded_ns;
    size_t n_ev, n_guards, n_actions, n_joined;
    struct gh_audit_ev_rec *ev;
    struct gh_audit_ev_rec *joined; /* evidence that joined it later, in time order */
    struct gh_audit_guard_rec *guards;
    struct gh_audit_action_rec *acts;
};

#define GH_AUDIT_QUERY_MAX 1000

/* The incidents that concern subj (blamed node, affected job, a pod in the
 * evidence, an action's target), decided at or after since_ns, oldest first,
 * at most max (0: GH_AUDIT_QUERY_MAX; the newest are kept). *out: caller
 * frees with gh_audit_recs_free(*out, *n). */
int gh_audit_query(struct gh_audit *a, const struct gh_audit_subject *subj, int64_t since_ns,
                   size_t max, struct gh_audit_incident_rec **out, size_t *n, struct gh_err *err);
void gh_audit_recs_free(struct gh_audit_incident_rec *v, size_t n);

/* Counts for tests and reports. what: "incidents", "evidence", "guards",
 * "actions", "intents", "telemetry" (bucket rows, telemetry.h), "joined"
 * (joined_evidence rows). */
int gh_audit_count(struct gh_audit *a, const char *what, long *n, struct gh_err *err);

#endif
