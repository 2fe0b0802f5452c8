/* agent.h - the pieces of the gpuheal-agent binary that its files share:
 * the configuration (config.c), the agent's state (main.c), /metrics
 * (metrics.c) and the HTTP endpoint on the agent's event loop (http.c).
 * Internal to the binary. */
#ifndef GH_CMD_AGENT_AGENT_H
#define GH_CMD_AGENT_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/coalesce.h"
#include "agent/dcgm.h"
#include "agent/health.h"
#include "agent/health_publish.h"
#include "agent/inject.h"
#include "agent/kmsg_source.h"
#include "agent/nic.h"
#include "agent/nvml.h"
#include "agent/probe.h"
#include "agent/publisher.h"
#include "agent/requests.h"
#include "agent/spool.h"
#include "agent/telemetry.h"
#include "common/timeutil.h"
#include "signal/sigqueue.h"
#include "kube/client.h"

/* ---- configuration (config.c) ---- */

/* One configured health check (--probe NAME=COMMAND[,timeout=D][,every=D][,gpu=N]). */
struct agent_probe {
    char *name;
    char *command;            /* run as /bin/sh -c COMMAND */
    int64_t timeout_ns;       /* 0 = the probe module's 60 s */
    int64_t interval_ns;      /* 0 = on demand only */
    int gpu;                  /* -1 = node-level */
};

enum agent_kube_mode {
    AGENT_KUBE_AUTO,          /* in-cluster when KUBERNETES_SERVICE_HOST is set, else off */
    AGENT_KUBE_FILE,          /* --kubeconfig PATH */
    AGENT_KUBE_OFF,           /* --kubeconfig off */
};

struct agent_config {
    char *node;
    char *kmsg;               /* NULL = off */
    bool kmsg_file_mode;      /* a text log followed like tail -F, not /dev/kmsg records */
    char *nvml_lib;           /* NULL = off */
    int64_t poll_interval_ns;
    bool dcgm;
    char *dcgm_exporter;      /* NULL = none */
    char *telemetry_socket;   /* NULL = off */
    char *inject;             /* NULL = none */
    char *nic_root;           /* NULL = off */
    int64_t nic_poll_interval_ns;
    bool inject_follow;       /* keep reading appends to a regular --inject file */
    int64_t telemetry_step_interval_ns; /* 0 = every step line */
    int64_t dcgm_interval_ns;
    enum agent_kube_mode kube_mode;
    char *kubeconfig;         /* AGENT_KUBE_FILE only */
    char *kube_context;       /* NULL = current-context */
    int64_t health_interval_ns; /* least time between two writes of GPU health */
    struct agent_probe *probes;
    size_t n_probes;
    char *controller;         /* NULL = spool only */
    char *token_file;
    char *ca_file;
    char *spool_dir;
    uint64_t spool_max_bytes;
    unsigned spool_telemetry_share; /* percent of spool_max_bytes telemetry may fill */
    int64_t spool_sync_ns;
    size_t batch_records;
    int64_t batch_linger_ns;
    char *listen;             /* NULL = off */
    int log_level;
    char *boot_id_path;
    char *request_cmd[GH_REQ__COUNT]; /* NULL = not configured (agent/requests.h) */
    char *validate_cmd;       /* NULL = not configured */
    int64_t request_timeout_ns;
};

/* Parses one --probe value ("NAME=COMMAND[,timeout=D][,every=D][,gpu=N]")
 * into *out (caller frees out->name, out->command). 0, or 2 with err set. */
int agent_probe_parse(const char *spec, struct agent_probe *out, char *err, size_t cap);

/* Parses defaults < config file (--config or $GPUHEAL_CONFIG) < environment
 * ($GPUHEAL_<NAME>) < flags into *cfg (caller frees with
 * agent_config_free). Returns 0, 1 when --help/--version was printed, or 2
 * with err[0..cap) saying what was wrong. */
int agent_config_parse(int argc, char **argv, struct agent_config *cfg, char *err, size_t cap);
void agent_config_free(struct agent_config *cfg);

/* ---- the agent (main.c) ---- */

struct agent_http;

struct agent {
    struct agent_config cfg;
    const struct gh_clock *clock;
    char boot_id[80];
    int64_t started_ns;

    int epfd, timerfd, sigfd;
    struct gh_sigqueue *inbox;     /* signals from sources' own threads */
    struct gh_spool *spool;
    struct gh_coalesce *co;
    struct gh_publisher *pub;
    struct agent_http *http;

    struct gh_kmsg_source *kmsg;
    struct gh_nvml_source *nvml;
    struct gh_dcgm_health *dcgm;
    struct gh_dcgm_exporter *dcgmx;
    struct gh_telemetry *tele;
    /* tele for the requests thread (restart requests): set once the socket
     * is up; that thread stops before tele is freed */
    _Atomic(struct gh_telemetry *) tele_relay;
    struct gh_inject *inject;
    struct gh_nic_source *nic;
    struct gh_probe *probe;
    bool inject_done;

    /* node-local GPU health (always) and its publisher (with Kubernetes) */
    struct gh_health *health;
    struct gh_kube_client *kube;
    struct gh_health_publish *hpub;
    struct gh_requests *requests;  /* the controller's requests (with Kubernetes) */
    uint64_t health_gen;           /* generation last handed to the publisher */
    uint64_t nvml_polls_seen;      /* NVML polls whose snapshots health has seen */
    enum gh_gpu_state health_logged_state;
    enum gh_health_reason health_logged_reason;
    uint64_t hpub_failures_logged;
    int64_t hpub_fail_log_at;
    uint64_t kube_run_errors;
    int64_t kube_err_log_at;
    uint64_t health_foreign;       /* signals naming another node: not fed */

    int64_t next_poll, next_sync;
    bool more_input;               /* a source has more to read now */
    uint64_t kmsg_seq_spooled;     /* highest kmsg record seq in the spool (to commit after sync) */
    uint64_t kmsg_seq_committed;

    /* counters for /metrics (loop thread, except inbox_dropped) */
    uint64_t received[GH_SRC__COUNT][GH_KIND__COUNT];
    uint64_t spooled, spool_refused, lines_rejected;
    atomic_uint_fast64_t inbox_dropped;
    uint64_t lost_logged;          /* spool loss already logged */
    int64_t lost_log_at;
    uint64_t tele_dropped_logged;  /* telemetry dropped by the spool, already logged */
    int64_t tele_dropped_log_at;
    /* spool write/sync/read errors and refused signals: said at most every
     * 10 s, with how many were not said */
    struct agent_ratelog {
        int64_t at;
        uint64_t suppressed;
    } log_write, log_sync, log_read, log_refused;
    uint64_t overflow_logged, dropped_logged;
    int64_t overflow_log_at, dropped_log_at;
};

/* ---- node-local GPU health and Kubernetes (node_health.c) ---- */

/* Creates the health state and, when Kubernetes is configured (--kubeconfig,
 * or in-cluster), the API client and the health publisher; says once when
 * publishing is off. 0, or 1 when the agent cannot start (an explicit
 * --kubeconfig that cannot be used; out of memory). */
int agent_health_start(struct agent *a);
/* The kube client's epoll fd for the loop (readable: agent_health_run), -1
 * without Kubernetes. */
int agent_health_fd(const struct agent *a);
/* One signal the agent ships (borrowed): into the health state when it is
 * about this node. */
void agent_health_feed(struct agent *a, const struct gh_signal *s);
/* After each loop iteration: NVML snapshots of a new poll into the health
 * state; a changed state logged and handed to the publisher. */
void agent_health_tick(struct agent *a, int64_t now);
/* The kube client's pending work (never blocks). */
void agent_health_run(struct agent *a);
/* Stops carrying out the controller's requests (before the inbox drains). */
void agent_requests_stop(struct agent *a);
/* Shutdown: writes the current state (bounded wait) and frees. */
void agent_health_stop(struct agent *a);

/* Renders the Prometheus text of /metrics into buf[0..cap) and returns its
 * length (NUL-terminated; cut at a line boundary when it does not fit). */
size_t agent_metrics_render(struct agent *a, char *buf, size_t cap);

/* ---- /healthz and /metrics on the loop (http.c) ---- */

/* Starts libmicrohttpd without a thread of its own, on hostport ("HOST:PORT";
 * port 0 = any). *port: the bound port. NULL with err set on failure. */
struct agent_http *agent_http_start(struct agent *a, const char *hostport, int *port,
                                    char *err, size_t cap);
/* The fd the loop polls (readable: call agent_http_run). */
int agent_http_fd(const struct agent_http *h);
/* Does the pending HTTP work; never blocks. */
void agent_http_run(struct agent_http *h);
/* Milliseconds until libmicrohttpd wants agent_http_run for a timeout,
 * -1 = none. */
int64_t agent_http_timeout_ms(struct agent_http *h);
void agent_http_stop(struct agent_http *h);

#endif
