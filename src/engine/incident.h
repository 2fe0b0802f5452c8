/* incident.h - the engine's output (spec section 3): one decision about one
 * root cause, with its evidence, the rule that chose the actions and a
 * sentence that says why. */
#ifndef GH_ENGINE_INCIDENT_H
#define GH_ENGINE_INCIDENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "engine/timeline.h"
#include "signal/taxonomy.h"

#define GH_INCIDENT_MAX_ACTIONS 8
#define GH_INCIDENT_MAX_EVIDENCE 64

/* Handed to the engine's callback; everything in it is borrowed for the
 * duration of the call (copy what you keep, e.g. with gh_incident_encode). */
struct gh_incident {
    char id[32];              /* stable: a hash of class, subject, first evidence and rule */
    enum gh_class cls;
    const char *node;         /* blamed node; NULL when none (an application fault) */
    int gpu;                  /* blamed GPU; -1 when unknown */
    const char *job;          /* affected job; NULL when none */
    int64_t first_ts;         /* ts of the earliest evidence */
    int64_t decided_ts;       /* stream time of the decision */
    int n_actions;
    enum gh_action actions[GH_INCIDENT_MAX_ACTIONS];
    bool has_checkpoint;      /* for restart_from_checkpoint */
    int64_t checkpoint_step;
    const char *checkpoint_path;
    size_t n_evidence;        /* oldest first */
    const struct gh_tl_entry *evidence[GH_INCIDENT_MAX_EVIDENCE];
    const char *rule;
    char reason[640];
    /* Extras (also in the JSON, after the spec's fields). */
    enum gh_severity severity;
    int escalation;           /* 0 = the rule's base actions */
    enum gh_impact impact;    /* what the fault did to the job (impact.h) */
    bool has_slowdown;
    double slowdown;          /* with impact slower (or measured and below the threshold) */
    bool urgent;              /* a fatal code or corruption: acted on now */
    int n_deferred;           /* actions that wait for a safe moment (the GPU idle, the */
    enum gh_action deferred[GH_INCIDENT_MAX_ACTIONS]; /* job ended): none of them is in actions */
    /* A cause several nodes share (spec section 3, added 2026-12-07): its
     * scope, the nodes that showed it (node is then NULL: none is blamed,
     * none taken out of service for it) and, when their labels name it,
     * the component ("LABEL=VALUE"). GH_SCOPE_UNSAID for a node's own. */
    enum gh_scope scope;
    const char *component; /* NULL when no label names it */
    size_t n_affected;
    const char *const *affected_nodes; /* n_affected names */
};

/* Receives each incident as it is decided (ctx is the caller's). */
typedef void (*gh_incident_fn)(void *ctx, const struct gh_incident *inc);

/* Evidence that joined an incident already decided (docs/engine.md,
 * "Joined evidence"): incident_id is the id the incident was emitted with;
 * node the joining node (NULL: none); ev[0..n) the joining signals. All
 * borrowed for the call; it runs inside ingest/tick/finish and must not
 * call back into the engine. */
typedef void (*gh_joined_fn)(void *ctx, const char *incident_id, const char *node,
                             const struct gh_tl_entry *const *ev, size_t n);

/* The spec section 3 object for inc (caller owns: json_decref). NULL on OOM. */
json_t *gh_incident_to_json(const struct gh_incident *inc);
/* One compact JSON line without the newline; *out malloc'd (caller frees). */
int gh_incident_encode(const struct gh_incident *inc, char **out, struct gh_err *err);

#endif
