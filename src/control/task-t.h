/* task-t.h - types only (no functions, haproxy's "-t.h"): a decision as
 * the controller and its executor read it, and the task the event loop
 * hands the executor. Here so that executor.h, drain_wait.h and
 * drain_hold.h share the task without including one another; the
 * functions that fill a decision are in control/decision.h.
 *
 * A decision is filled once where an incident enters the controller (the
 * engine's struct gh_incident, or its object read back from the audit
 * store) and read as fields from then on: the class and the actions as
 * enums, the GPU as a number. Its strings are borrowed from the incident
 * object the task owns (the spec section 3 JSON, which stays the form that
 * is recorded and published), so they live exactly as long as that object
 * and are never truncated; the fields they point at are not changed once
 * the decision is filled (only "reason" and "drain_wait" are, which it
 * does not hold). */
#ifndef GH_CONTROL_TASK_T_H
#define GH_CONTROL_TASK_T_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/guard.h"
#include "engine/incident.h"
#include "signal/taxonomy.h"

#define GH_TASK_MAX_ACTIONS GH_INCIDENT_MAX_ACTIONS
/* pods named in the evidence that a decision acts on and posts Events
 * about (the first ones with a namespace and a name, oldest first) */
#define GH_DECISION_PODS_MAX 16

/* A value type; every pointer is borrowed from the incident object it
 * was filled from. */
struct gh_decision {
    const char *id;   /* NULL: none (not an incident gpuheal made) */
    int cls;          /* enum gh_class; -1: a class name this build does not know */
    const char *node; /* the blamed node; NULL when none */
    int gpu;          /* the blamed GPU; -1 when unknown */
    const char *job;  /* "namespace/name" (or a bare name: namespace "default"); NULL */
    const char *rule; /* the rule that chose the actions ("" when none); NULL */
    int n_actions;    /* actions whose names this build knows, in order */
    enum gh_action actions[GH_TASK_MAX_ACTIONS];
    bool has_checkpoint;         /* the checkpoint to resume from (restart_from_checkpoint) */
    int64_t checkpoint_step;     /* -1: unknown */
    const char *checkpoint_path; /* NULL: unknown */
    /* A cause several nodes share (spec section 3, 2026-12-07): its scope
     * (GH_SCOPE_UNSAID when the incident says none), the component its
     * labels name ("LABEL=VALUE"; NULL when none) and how many nodes showed
     * it. node is then NULL: nothing acts on a node for it. */
    enum gh_scope scope;
    const char *component;
    size_t n_affected;
    int n_pods;
    struct {
        const char *ns, *name;
    } pods[GH_DECISION_PODS_MAX];
};

enum gh_task_kind {
    GH_TASK_DECISION, /* a new incident with the guards' verdicts */
    GH_TASK_APPROVED, /* an incident that waited for approval, with new verdicts */
    GH_TASK_RELEASE,  /* return a validated node to service */
    GH_TASK_REPLAY,   /* complete the intents left pending (at start / on leadership) */
    GH_TASK_HOLD,     /* record a drain held for a checkpoint (drain_hold.h) */
    GH_TASK_OUTCOME,  /* record what the node agent answered to a request (or that it
                         never answered) and republish the incident */
    GH_TASK_JOINED,   /* record evidence that joined a decided incident (id; incident:
                         an array of signal objects; node; joined_ns) */
};

/* A value type; incident is owned by the task (stolen by submit), and d
 * borrows from it: whoever takes the incident takes d with it. */
struct gh_task {
    enum gh_task_kind kind;
    json_t *incident;     /* DECISION: the incident object (spec section 3) */
    struct gh_decision d; /* DECISION, APPROVED, HOLD: read from incident */
    char id[64];          /* DECISION, APPROVED: the incident id; RELEASE: the one
                                  that isolated the node ("" when unknown) */
    char node[254];       /* RELEASE */
    char mode[16];        /* "act", "dry_run", "approval" */
    char approver[128];   /* APPROVED */
    int n;
    struct gh_guard_verdict v[GH_TASK_MAX_ACTIONS];
    int64_t first_arrival_ns; /* when the first evidence reached the controller (0: unknown) */
    json_t *hold;             /* HOLD: the hold's record (drain_hold.h; owned, stolen by
                                  submit); incident: a copy of the incident */
    /* OUTCOME: id is the incident, node the agent's; action its request;
     * result "succeeded", "failed", "not_configured", "interrupted" or
     * "timed_out", detail the agent's words */
    enum gh_action req_action;
    char req_result[16];
    char req_detail[600];
    int64_t joined_ns; /* JOINED: when the engine reported it */
};

#endif
