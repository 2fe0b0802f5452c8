/* node_health.c - gpuheal-agent's node-local GPU health (agent/health.h)
 * and its publishing to the Kubernetes API (agent/health_publish.h): where
 * the API server is (--kubeconfig, else in-cluster, else off), the kube
 * client on the agent's epoll loop, feeding the health state with what the
 * agent ships and with NVML snapshots, and the flush at shutdown; with
 * Kubernetes also the controller's requests (agent/requests.h, a thread and
 * client of their own) whose results come back through the inbox.
 *
 * What is fed: every signal the agent spools (after the storm coalescer:
 * a storm's first sample and its "[coalesced N]" summary, so that a storm
 * neither costs an evidence copy per line nor floods the evidence ring)
 * that names this node or no node. The health state exists without
 * Kubernetes too (/metrics shows it); only the publisher needs the API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/log.h"

#define FLUSH_TIMEOUT_MS 5000                  /* the write at shutdown */
#define LOG_EVERY_NS     (30 * GH_NS_PER_S)    /* repeated publish/transport errors */

/* This boot's start on the agent's (real-time) clock: now - CLOCK_BOOTTIME.
 * 0 (no evidence replay) when it cannot be had. */
static int64_t boot_ns(const struct agent *a)
{
    struct timespec up;
    if (clock_gettime(CLOCK_BOOTTIME, &up) != 0)
        return 0;
    int64_t b = gh_clock_now(a->clock) - ((int64_t)up.tv_sec * GH_NS_PER_S + up.tv_nsec);
    return b > 0 ? b : 0;
}

/* Loads the API server's configuration by the flags. 0 with *kc filled and
 * *from set, 0 with *from NULL when publishing is off (said once), 1 when
 * an explicit --kubeconfig cannot be used (fatal). */
static int load_kube_config(struct agent *a, struct gh_kube_config *kc, const char **from)
{
    struct gh_err err;
    *from = NULL;
    switch (a->cfg.kube_mode) {
    case AGENT_KUBE_OFF:
        GH_LOG(GH_LOG_INFO, "msg=\"Kubernetes publishing disabled: --kubeconfig off\"");
        return 0;
    case AGENT_KUBE_AUTO: {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        if (!host || !host[0]) {
            GH_LOG(GH_LOG_INFO, "msg=\"Kubernetes publishing disabled: no --kubeconfig and "
                   "KUBERNETES_SERVICE_HOST is not set (not in a pod); GPU health is kept "
                   "locally and shown on /metrics only\"");
            return 0;
        }
        if (gh_kube_incluster_load(NULL, kc, &err) != GH_OK) {
            GH_LOG(GH_LOG_ERROR, "msg=\"Kubernetes publishing disabled: in-cluster "
                   "configuration failed\" error=\"%s\"", err.msg);
            return 0;
        }
        *from = "in-cluster";
        return 0;
    }
    case AGENT_KUBE_FILE:
        if (gh_kubeconfig_load(a->cfg.kubeconfig, a->cfg.kube_context, kc, &err) != GH_OK) {
            GH_LOG(GH_LOG_ERROR, "msg=\"cannot use --kubeconfig\" path=%s error=\"%s\"",
                   a->cfg.kubeconfig, err.msg);
            return 1;
        }
        *from = "kubeconfig";
        return 0;
    }
    return 0;
}

/* emit of the requests' worker thread: into the inbox like other sources. */
static void emit_request_result(void *ctx, const struct gh_signal *s)
{
    struct agent *a = ctx;
    if (gh_sigqueue_push_copy(a->inbox, s) != GH_OK)
        atomic_fetch_add(&a->inbox_dropped, 1);
}

/* A restart request for a pod's processes: to the telemetry socket's
 * connections of that pod (agent/telemetry.h). Requests thread. */
static void relay_restart(void *ctx, const char *pod_uid, const char *id, const char *incident,
                          int exit_code)
{
    struct agent *a = ctx;
    struct gh_telemetry *t = atomic_load(&a->tele_relay);
    struct gh_err err;
    if (!t)
        return; /* no socket: the controller's wait times out and it recreates the job */
    if (gh_telemetry_restart(t, pod_uid, id, incident, exit_code, &err) != GH_OK)
        GH_LOG(GH_LOG_WARN, "msg=\"restart request not passed on\" pod_uid=%s error=\"%s\"",
               pod_uid, err.msg);
}

/* The controller's requests (agent/requests.h) on a client of their own:
 * their commands block, so they run on their own thread, not the loop.
 * Without it the agent runs on, saying why. */
static void start_requests(struct agent *a, const struct gh_kube_config *kc,
                           const struct gh_kube_client_opts *co)
{
    struct gh_err err;
    struct gh_kube_client *c = NULL;
    char state[4096];
    snprintf(state, sizeof state, "%s/requests.state", a->cfg.spool_dir);
    struct gh_requests_opts ro = {.node = a->cfg.node,
                                  .state_path = state,
                                  .boot_id = a->boot_id,
                                  .validate_cmd = a->cfg.validate_cmd,
                                  .timeout_ns = a->cfg.request_timeout_ns,
                                  .emit = emit_request_result,
                                  .emit_ctx = a,
                                  .restart = relay_restart,
                                  .restart_ctx = a};
    for (int i = 0; i < GH_REQ__COUNT; i++)
        ro.cmd[i] = a->cfg.request_cmd[i];
    /* a write that hangs must not hold up the agent's stop for long */
    struct gh_kube_client_opts rco = *co;
    rco.request_timeout_ms = 10000;
    if (gh_kube_client_new(kc, &rco, &c, &err) != GH_OK ||
        gh_requests_new(c, &ro, &a->requests, &err) != GH_OK ||
        gh_requests_start(a->requests, &err) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"requests from the controller will not be carried out\" "
               "error=\"%s\"", err.msg);
        gh_requests_free(a->requests);
        a->requests = NULL;
        return;
    }
    GH_LOG(GH_LOG_INFO, "msg=\"watching GPUNodeHealth for requests\" node=%s reset_gpu=%s "
           "reboot_node=%s run_diagnostics=%s validate=%s state=%s", a->cfg.node,
           ro.cmd[0] ? "configured" : "none", ro.cmd[1] ? "configured" : "none",
           ro.cmd[2] ? "configured" : "none", ro.validate_cmd ? "configured" : "none", state);
}

void agent_requests_stop(struct agent *a)
{
    gh_requests_free(a->requests); /* kills a running command */
    a->requests = NULL;
}

int agent_health_start(struct agent *a)
{
    struct gh_err err;
    struct gh_health_opts ho = {.clock = a->clock};
    if (gh_health_new(&ho, &a->health, &err) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"cannot keep GPU health\" error=\"%s\"", err.msg);
        return 1;
    }
    a->health_logged_state = GH_GPU_HEALTHY;
    a->health_logged_reason = GH_HR_NONE;

    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    const char *from;
    if (load_kube_config(a, &kc, &from))
        return 1;
    if (!from)
        return 0;
    struct gh_kube_client_opts co = {.clock = a->clock, .qps = 5, .burst = 10,
                                     .max_inflight = 4, .max_queued = 64,
                                     .max_body = 8u << 20, .request_timeout_ms = 30000,
                                     .user_agent = "gpuheal-agent/0.1"};
    int rc = 0;
    if (gh_kube_client_new(&kc, &co, &a->kube, &err) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"Kubernetes publishing disabled: cannot create the API "
               "client\" server=%s error=\"%s\"", kc.server ? kc.server : "?", err.msg);
        rc = a->cfg.kube_mode == AGENT_KUBE_FILE;
        goto out;
    }
    struct gh_health_publish_opts po = {.node = a->cfg.node,
                                        .min_interval_ns = a->cfg.health_interval_ns,
                                        .boot_ns = boot_ns(a)};
    if (gh_health_publish_new(a->kube, a->health, &po, &a->hpub, &err) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"Kubernetes publishing disabled: cannot start the GPU "
               "health publisher\" error=\"%s\"", err.msg);
        gh_kube_client_free(a->kube);
        a->kube = NULL;
        rc = 1;
        goto out;
    }
    GH_LOG(GH_LOG_INFO, "msg=\"Kubernetes publishing enabled: Node condition %s and "
           "GPUNodeHealth status of this node\" node=%s server=%s config=%s%s%s",
           GH_HEALTH_CONDITION, a->cfg.node, kc.server, from,
           a->cfg.kube_context ? " context=" : "", a->cfg.kube_context ? a->cfg.kube_context : "");
    /* The first check: reads the Node (and replays this boot's evidence);
     * writes "no GPU observed yet" until NVML's first poll is seen. */
    gh_health_publish_update(a->hpub);
    start_requests(a, &kc, &co);
out:
    gh_kube_config_clear(&kc);
    return rc;
}

int agent_health_fd(const struct agent *a)
{
    return a->kube ? gh_kube_client_fd(a->kube) : -1;
}

void agent_health_feed(struct agent *a, const struct gh_signal *s)
{
    if (!a->health)
        return;
    if (s->node && strcmp(s->node, a->cfg.node) != 0) {
        a->health_foreign++; /* an injected line about another node */
        return;
    }
    /* GH_ELIMIT / GH_ENOMEM are counted in the health stats (/metrics). */
    gh_health_feed(a->health, s, NULL);
}

/* NVML's snapshots, once per completed poll. */
static void observe_nvml(struct agent *a)
{
    struct gh_nvml_stats ns;
    gh_nvml_source_stats(a->nvml, &ns);
    if (ns.polls == a->nvml_polls_seen)
        return;
    a->nvml_polls_seen = ns.polls;
    int n = gh_nvml_source_gpu_count(a->nvml);
    for (int i = 0; i < n; i++) {
        struct gh_nvml_gpu_health snap;
        if (gh_nvml_source_health(a->nvml, i, &snap) == GH_OK)
            gh_health_observe_nvml(a->health, &snap, NULL);
    }
}

static void log_change(struct agent *a)
{
    struct gh_health_summary sum;
    gh_health_summarize(a->health, &sum);
    if (sum.state == a->health_logged_state && sum.reason == a->health_logged_reason)
        return;
    GH_LOG(sum.state >= GH_GPU_UNHEALTHY ? GH_LOG_WARN : GH_LOG_INFO,
           "msg=\"GPU health changed\" state=%s reason=%s gpus=%d healthy=%d degraded=%d "
           "unhealthy=%d lost=%d detail=\"%s\"", gh_gpu_state_name(sum.state),
           gh_health_reason_name(sum.reason), sum.gpus, sum.healthy, sum.degraded,
           sum.unhealthy, sum.lost, sum.message);
    a->health_logged_state = sum.state;
    a->health_logged_reason = sum.reason;
}

/* Publish failures are retried by the publisher; they are said at most
 * every LOG_EVERY_NS, with the API's reason. */
static void check_publish(struct agent *a, int64_t now)
{
    struct gh_health_publish_stats st;
    gh_health_publish_stats(a->hpub, &st);
    if (st.failures > a->hpub_failures_logged && now - a->hpub_fail_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_WARN, "msg=\"GPU health not published to Kubernetes; retrying\" "
               "failures=%llu error=\"%s\"", (unsigned long long)st.failures, st.last_err);
        a->hpub_failures_logged = st.failures;
        a->hpub_fail_log_at = now;
    }
}

void agent_health_tick(struct agent *a, int64_t now)
{
    if (!a->health)
        return;
    if (a->nvml)
        observe_nvml(a);
    uint64_t gen = gh_health_generation(a->health);
    if (gen != a->health_gen) {
        a->health_gen = gen;
        log_change(a);
        if (a->hpub)
            gh_health_publish_update(a->hpub); /* rate-limited and coalesced there */
    }
    if (a->hpub)
        check_publish(a, now);
}

void agent_health_run(struct agent *a)
{
    struct gh_err err;
    if (!a->kube || gh_kube_client_run(a->kube, 0, &err) == GH_OK)
        return;
    a->kube_run_errors++;
    int64_t now = gh_clock_now(a->clock);
    if (now - a->kube_err_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_WARN, "msg=\"Kubernetes client error\" total=%llu error=\"%s\"",
               (unsigned long long)a->kube_run_errors, err.msg);
        a->kube_err_log_at = now;
    }
}

void agent_health_stop(struct agent *a)
{
    if (a->hpub) {
        struct gh_err err;
        agent_health_tick(a, gh_clock_now(a->clock)); /* what stopping the sources fed */
        int rc = gh_health_publish_flush(a->hpub, FLUSH_TIMEOUT_MS, &err);
        struct gh_health_publish_stats st;
        gh_health_publish_stats(a->hpub, &st);
        if (rc == GH_OK)
            GH_LOG(GH_LOG_INFO, "msg=\"GPU health flushed to Kubernetes\" node_patches=%llu "
                   "status_applies=%llu failures=%llu", (unsigned long long)st.node_patches,
                   (unsigned long long)st.gnh_applies, (unsigned long long)st.failures);
        else
            GH_LOG(GH_LOG_WARN, "msg=\"GPU health not flushed to Kubernetes at stop\" "
                   "error=\"%s\"", err.msg);
    }
    gh_health_publish_free(a->hpub);
    gh_kube_client_free(a->kube);
    gh_health_free(a->health);
    a->hpub = NULL;
    a->kube = NULL;
    a->health = NULL;
}
