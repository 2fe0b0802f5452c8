/* controller.h - the controller's event loop: signals from the ingest
 * endpoint and from the informers (Node, Pod, Event, GPUNodeHealth,
 * Incident, RecoveryPolicy, Namespace) go into the detection engine; its incidents pass the
 * guards and, on the Lease leader only, go to the executor, which records
 * and acts. Also: job topology from the Pod informer, approvals seen on
 * Incident objects, the validation gate that returns nodes to service, and
 * /healthz + /metrics on the ingest server.
 *
 * One thread runs the loop (epoll over the Kubernetes client, the signal
 * queue, the executor's reports and the caller's stop fd); nothing on it
 * blocks. The ingest server and the executor have their own threads. */
#ifndef GH_CONTROL_CONTROLLER_H
#define GH_CONTROL_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "control/actuator.h"
#include "control/guard.h"
#include "engine/policy.h"
#include "kube/kubeconfig.h"

/* The controller's reorder window unless set: short enough for the 1 s p99
 * decision target (docs/controller.md, "Decision latency"). The policy's
 * settings.reorder_window is for the other drivers (simulate). */
#define GH_CONTROLLER_REORDER_WINDOW_NS (500 * GH_NS_PER_MS)

struct gh_controller_opts {
    const struct gh_kube_config *kube; /* borrowed (copied by the clients) */
    const char *db_url;                /* audit store: sqlite:PATH or postgres://... */
    const char *listen;                /* ingest HOST:PORT (port 0: any) */
    const char *token_file;            /* operator bearer tokens (any node); NULL needs
                                          agent_service_account or allow_anonymous */
    const char *agent_service_account; /* "NAMESPACE/NAME": agents' bound tokens checked by
                                          TokenReview, each may report only for its node;
                                          NULL: no agent authentication */
    const char *agent_audience;        /* the agents' token audience; NULL: "gpuheal" */
    bool allow_anonymous;
    const char *tls_cert, *tls_key;    /* ingest HTTPS (both or neither) */
    const struct gh_policy *policy;    /* borrowed, outlives the controller; NULL: default */
    int64_t reorder_window_ns;         /* < 0: GH_CONTROLLER_REORDER_WINDOW_NS */
    struct gh_guard_config guards;     /* base guards; RecoveryPolicy objects tighten them */
    const char *identity;              /* this replica (Lease holder, Event reporter) */
    const char *lease_namespace;       /* NULL: "gpuheal-system" */
    const char *lease_name;            /* NULL: "gpuheal-controller" */
    int64_t lease_ns, renew_ns, retry_ns; /* 0: 15 s, 10 s, 2 s */
    bool no_leader_election;           /* act at once (one replica) */
    const char *watch_namespace;       /* pods watched (and acted on); NULL: all */
    const char *node_selector;         /* nodes governed (label selector); NULL: all */
    bool no_execute_taint;
    int64_t inplace_timeout_ns; /* executor: restart in place within this (0: 30 s; < 0: off) */
    const char *taint_key;             /* borrowed, outlives the controller; NULL: GH_TAINT_KEY */
    const char *node_conditions;       /* Node condition types other agents set, turned into
                                          node_condition signals ("A,B,..."; "" or "none":
                                          none); NULL: GH_NODE_CONDITIONS_DEFAULT (NPD's) */
    struct gh_drain_opts drain;
    const char *crash_after;           /* executor test hook (see executor.h) */
    const struct gh_clock *clock;      /* borrowed; NULL: real */
    int64_t tick_ns;                   /* engine tick; 0: 20 ms (and after new signals) */
    int64_t remember_ns;               /* incidents already decided, looked back; 0: 7 days */
    int64_t request_timeout_ns;        /* a node agent request unanswered this long is
                                          recorded timed out; 0: 1 h */
    double qps;                        /* Kubernetes client QPS of each client (the
                                          executor's workers share one); 0: 50 */
    int executor_workers;              /* executor threads; 0: 8 */
    int64_t journal_retention_ns;      /* accepted signals journalled (and replayed on
                                          start) this long; 0: the policy's longest
                                          detector window, at least 1 h; < 0: no journal */
    /* ingest endpoint limits (ingest/server.h); 0: the server's default */
    size_t ingest_body_max;            /* request body bytes; 0: 8 MiB */
    size_t ingest_line_max;            /* bytes per line, at most 64 KiB; 0: 64 KiB */
    size_t ingest_max_lines;           /* lines per request; 0: 10000 */
    unsigned ingest_max_connections;   /* 0: 1024 */
    unsigned ingest_idle_timeout_s;    /* 0: 30 */
    unsigned ingest_header_timeout_s;  /* 0: 5 */
    unsigned ingest_max_per_client;    /* connections from one address; 0: 32 */
    size_t ingest_dedup_capacity;      /* signal ids remembered; 0: 1M */
};
void gh_controller_opts_default(struct gh_controller_opts *o);

struct gh_controller;

/* Opens the audit store (loading what was decided before), starts the
 * ingest server and the executor, after replaying the signal journal
 * (audit/journal.h) into the engine. Nothing is watched until run. *out:
 * caller frees with gh_controller_free. */
int gh_controller_new(const struct gh_controller_opts *o, struct gh_controller **out,
                      struct gh_err *err);

/* Starts informers and leader election and runs the loop until stop_fd
 * (e.g. a signalfd or eventfd) is readable. */
int gh_controller_run(struct gh_controller *ctl, int stop_fd, struct gh_err *err);

/* The ingest server's bound port. */
int gh_controller_port(const struct gh_controller *ctl);

/* Releases the Lease when held, stops everything, frees. Accepts NULL. */
void gh_controller_free(struct gh_controller *ctl);

#endif
