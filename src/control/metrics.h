/* metrics.h - the controller's Prometheus metrics: incidents by class,
 * shared-cause incidents by scope, actions by type and result, guard trips, the decision latency histogram
 * (first evidence received -> first action issued), decision records that
 * failed to commit, the engine's failed allocations, and a few gauges (leader, queue depths, nodes
 * isolated, audit store up). Thread-safe: the event loop
 * updates, the HTTP server thread writes the text exposition. */
#ifndef GH_CONTROL_METRICS_H
#define GH_CONTROL_METRICS_H

#include <stddef.h>

#include "signal/taxonomy.h"

enum gh_ctl_gauge {
    GH_GAUGE_LEADER,
    GH_GAUGE_SIGNAL_QUEUE,
    GH_GAUGE_EXECUTOR_QUEUE,
    GH_GAUGE_NODES_ISOLATED,
    GH_GAUGE_AWAITING_APPROVAL,
    GH_GAUGE_ENGINE_PENDING,
    GH_GAUGE_STORE_UP,
    GH_GAUGE_ENGINE_HELD,
    GH_GAUGE__COUNT
};

struct gh_ctl_metrics;

/* NULL on OOM. Caller frees with gh_ctl_metrics_free. */
struct gh_ctl_metrics *gh_ctl_metrics_new(void);
void gh_ctl_metrics_free(struct gh_ctl_metrics *m);

void gh_ctl_metrics_incident(struct gh_ctl_metrics *m, enum gh_class cls);
/* An incident whose cause several nodes share (scope rack, switch,
 * nvlink_domain or fleet; other scopes are not counted). */
void gh_ctl_metrics_shared_cause(struct gh_ctl_metrics *m, enum gh_scope scope);
/* action: a gh_action, or -1 for release_node; result: "succeeded",
 * "failed", "noop", "skipped" (anything else counts as skipped). */
void gh_ctl_metrics_action(struct gh_ctl_metrics *m, int action, const char *result);
/* guard: "budget", "rate", "cooldown", "storm", "dry_run", "approval". */
void gh_ctl_metrics_guard_trip(struct gh_ctl_metrics *m, const char *guard);
void gh_ctl_metrics_latency(struct gh_ctl_metrics *m, double seconds);
/* A decision's record that failed to commit (each attempt counts). */
void gh_ctl_metrics_commit_failure(struct gh_ctl_metrics *m);
/* Joined evidence (audit.h, gh_audit_record_joined): rows stored, and
 * signals not stored because their incident had GH_AUDIT_JOINED_MAX rows. */
void gh_ctl_metrics_joined(struct gh_ctl_metrics *m, unsigned stored, unsigned capped);
/* The engine's failed allocations so far (gh_engine_stats.nomem: each may
 * have cost a signal's effect), exposed as a counter. */
void gh_ctl_metrics_engine_nomem(struct gh_ctl_metrics *m, unsigned long long total);
void gh_ctl_metrics_signals(struct gh_ctl_metrics *m, const char *source, unsigned long n);
void gh_ctl_metrics_gauge(struct gh_ctl_metrics *m, enum gh_ctl_gauge g, double v);

/* Appends the text exposition to buf[0..cap) (NUL-terminated); returns the
 * bytes written (without the NUL). */
size_t gh_ctl_metrics_write(struct gh_ctl_metrics *m, char *buf, size_t cap);

#endif
