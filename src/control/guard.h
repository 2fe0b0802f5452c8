/* guard.h - the safety guards every recovery action passes before the
 * controller acts: a cluster budget of nodes held out of service (absolute
 * and percent), an action rate per hour, a per-node cooldown, a storm
 * breaker (many nodes blamed at once pauses new isolations), dry run and
 * approval mode. Pure in-memory state with every time passed in; the
 * controller feeds it what the informers see (node count, which nodes
 * gpuheal holds isolated) and what it dispatched.
 *
 * Returning a healthy node to service is never blocked by the budget, the
 * rate, the cooldown or the storm breaker (gh_guard_may_release). */
#ifndef GH_CONTROL_GUARD_H
#define GH_CONTROL_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/taxonomy.h"

struct gh_guard_config {
    int max_isolated;          /* nodes gpuheal may hold out of service (0: none at all);
                                  < 0 = no absolute cap */
    double max_isolated_pct;   /* ... as a percent of known nodes, 0..100 (floor, at least 1
                                  when above 0; 0%: none at all); < 0 = no percent cap */
    int max_actions_per_hour;  /* actions dispatched in any 60 min; 0 = unlimited */
    int64_t node_cooldown_ns;  /* no new node action this soon after the last one; 0 = none */
    int storm_nodes;           /* this many distinct nodes blamed ... ; 0 = breaker off */
    int64_t storm_window_ns;   /* ... within this window opens the breaker ... */
    int64_t storm_hold_ns;     /* ... for this long after the latest blame */
    bool dry_run;              /* decide and record, never act */
    bool approval;             /* act only on approved incidents */
};

/* Defaults: 10 nodes / 10 %, 30 actions per hour, 30 min cooldown, storm
 * at 5 nodes in 5 min held 15 min, acting without approval. */
void gh_guard_config_default(struct gh_guard_config *c);

enum gh_guard_outcome {
    GH_GUARD_ALLOW,
    GH_GUARD_DENY,     /* not acted: the guard named in .guard */
    GH_GUARD_DRY_RUN,  /* not acted: dry run (.guard/.detail: what would have happened) */
    GH_GUARD_AWAIT,    /* waits for approval */
};

/* One verdict per action (a small value type; guard points to a static
 * string: "none", "budget", "rate", "cooldown", "storm", "dry_run",
 * "approval", or "no_node": an action on a node for an incident that
 * blames none, such as a cause several nodes share, is never taken). */
struct gh_guard_verdict {
    enum gh_action action;
    enum gh_guard_outcome outcome;
    const char *guard;
    char detail[200];
};

/* Parses a budget of nodes held out of service, as --max-unavailable and
 * a RecoveryPolicy's budgets.maxUnavailableNodes write it: "N" (a count,
 * 0..1000000) or "P%" (0..100, decimals allowed). On success sets *nodes
 * (or -1) and *pct (or -1): exactly one of them >= 0. GH_EINVAL with err
 * naming what was wrong ("150%: a percentage is 0 to 100"). */
int gh_guard_parse_budget(const char *s, int *nodes, double *pct, struct gh_err *err);

/* Tightens c with a budget (nodes or pct < 0: that one unset): a cap
 * replaces c's only when it is smaller, so a policy never loosens the
 * flags. */
void gh_guard_tighten_budget(struct gh_guard_config *c, int nodes, double pct);

struct gh_guard;

/* cfg copied. NULL on OOM. Caller frees with gh_guard_free. */
struct gh_guard *gh_guard_new(const struct gh_guard_config *cfg);
void gh_guard_free(struct gh_guard *g);
void gh_guard_set_config(struct gh_guard *g, const struct gh_guard_config *cfg);
const struct gh_guard_config *gh_guard_config(const struct gh_guard *g);

/* What the cluster looks like (from the informers). */
void gh_guard_set_node_count(struct gh_guard *g, size_t n);
/* node (borrowed) is / is no longer held out of service by gpuheal. */
void gh_guard_set_isolated(struct gh_guard *g, const char *node, bool isolated);
bool gh_guard_is_isolated(const struct gh_guard *g, const char *node);
size_t gh_guard_isolated_count(const struct gh_guard *g);
/* The budget in nodes for the current node count (SIZE_MAX: no cap). */
size_t gh_guard_budget(const struct gh_guard *g);

/* An incident blamed node at t (feeds the storm breaker). */
void gh_guard_note_blame(struct gh_guard *g, const char *node, int64_t t);
bool gh_guard_storm_open(const struct gh_guard *g, int64_t now);

/* True for actions that take a node out of service (and count against the
 * budget): isolate, drain, reset_gpu, reboot, replace, run_diagnostics. */
bool gh_guard_action_removes_node(enum gh_action a);

/* Judges the actions acts[0..n) of one incident about node (NULL: none
 * blamed: its node actions are denied, guard "no_node") at now; approved:
 * the incident was approved. Writes n verdicts to out and returns how many
 * are GH_GUARD_ALLOW. Changes nothing. */
int gh_guard_check(const struct gh_guard *g, const enum gh_action *acts, int n, const char *node,
                   bool approved, int64_t now, struct gh_guard_verdict *out);

/* Records the allowed verdicts of v[0..n) as dispatched at now: they count
 * toward the hourly rate, start node's cooldown, and reserve the budget
 * (node counts as isolated) when one of them removes the node. */
void gh_guard_commit(struct gh_guard *g, const struct gh_guard_verdict *v, int n,
                     const char *node, int64_t now);

/* Counts an action allowed before this process started (read back from the
 * audit store at t) toward the hourly rate; when it removes node (may be
 * NULL) from service, starts the node's cooldown at t and notes a blame for
 * the storm breaker. Whether the node is still isolated is left to what the
 * informers say (gh_guard_set_isolated). */
void gh_guard_restore(struct gh_guard *g, enum gh_action action, const char *node, int64_t t);

/* Returning node to service: allowed unless dry run. Never counted. */
bool gh_guard_may_release(const struct gh_guard *g, const char *node,
                          struct gh_guard_verdict *out);

struct gh_guard_stats {
    uint64_t allowed, denied_budget, denied_rate, denied_cooldown, denied_storm, dry_run,
        awaiting;
};
void gh_guard_stats(const struct gh_guard *g, struct gh_guard_stats *out);
/* Counts verdicts v[0..n) into the stats (the controller calls it once per
 * decision, so that re-checks of an incident awaiting approval count once). */
void gh_guard_count(struct gh_guard *g, const struct gh_guard_verdict *v, int n);

#endif
