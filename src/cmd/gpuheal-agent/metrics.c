/* metrics.c - the agent's /metrics in Prometheus text format: signals by
 * source and kind, coalescing, spool depth and loss, shipping, sources'
 * counters, per-GPU temperature, power and ECC from the NVML snapshot,
 * per-GPU health state, its publishing to Kubernetes, and probe results. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd/gpuheal-agent/agent.h"
#include "common/version.h"

struct out {
    char *buf;
    size_t len, cap;
    bool full;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->full = true; /* cut at the last whole line */
        o->buf[o->len] = '\0';
        return;
    }
    o->len += (size_t)n;
}

static void head(struct out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct out *o, const char *name, const char *help, uint64_t v)
{
    head(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct out *o, const char *name, const char *help, double v)
{
    head(o, name, "gauge", help);
    put(o, "%s %.17g\n", name, v);
}

/* Label values here are ours or PCI ids/UUIDs; escape anyway. */
static const char *esc(const char *s, char *buf, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 3 < cap; s++) {
        if (*s == '"' || *s == '\\') {
            buf[k++] = '\\';
            buf[k++] = *s;
        } else if (*s == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else {
            buf[k++] = *s;
        }
    }
    buf[k] = '\0';
    return buf;
}

static void gpu_metrics(struct out *o, struct agent *a)
{
    int n = gh_nvml_source_gpu_count(a->nvml);
    struct gh_nvml_gpu_health h;
    char pci[80], uuid[200];
    static const char *const names[] = {
        "gpuheal_gpu_temperature_celsius", "gpuheal_gpu_power_watts",
        "gpuheal_gpu_ecc_errors", "gpuheal_gpu_lost", "gpuheal_gpu_remapped_rows"};
    static const char *const helps[] = {
        "GPU temperature as of the latest NVML poll.",
        "GPU power draw as of the latest NVML poll.",
        "ECC error counts (NVML counters, cumulative per scope).",
        "1 when the GPU stopped answering (lost or hung) and has not answered since.",
        "Remapped rows (row remapping, Ampere and later)."};
    for (int m = 0; m < 5; m++) {
        head(o, names[m], "gauge", helps[m]);
        for (int i = 0; i < n; i++) {
            if (gh_nvml_source_health(a->nvml, i, &h) != GH_OK)
                continue;
            esc(h.pci, pci, sizeof pci);
            esc(h.uuid, uuid, sizeof uuid);
            char labels[400];
            snprintf(labels, sizeof labels, "gpu=\"%d\",pci=\"%s\",uuid=\"%s\"", h.index, pci,
                     uuid);
            switch (m) {
            case 0:
                if (h.has_temp)
                    put(o, "%s{%s} %.17g\n", names[m], labels, h.celsius);
                break;
            case 1:
                if (h.has_power)
                    put(o, "%s{%s} %.17g\n", names[m], labels, h.watts);
                break;
            case 2:
                if (h.has_ecc) {
                    put(o, "%s{%s,bits=\"single\",scope=\"volatile\"} %lld\n", names[m], labels,
                        (long long)h.ecc_sbe_volatile);
                    put(o, "%s{%s,bits=\"double\",scope=\"volatile\"} %lld\n", names[m], labels,
                        (long long)h.ecc_dbe_volatile);
                    put(o, "%s{%s,bits=\"single\",scope=\"aggregate\"} %lld\n", names[m], labels,
                        (long long)h.ecc_sbe_aggregate);
                    put(o, "%s{%s,bits=\"double\",scope=\"aggregate\"} %lld\n", names[m], labels,
                        (long long)h.ecc_dbe_aggregate);
                }
                break;
            case 3:
                put(o, "%s{%s} %d\n", names[m], labels, h.lost ? 1 : 0);
                break;
            case 4:
                if (h.has_remap) {
                    put(o, "%s{%s,kind=\"correctable\"} %lld\n", names[m], labels,
                        (long long)h.remap_correctable);
                    put(o, "%s{%s,kind=\"uncorrectable\"} %lld\n", names[m], labels,
                        (long long)h.remap_uncorrectable);
                    put(o, "%s{%s,kind=\"pending\"} %d\n", names[m], labels, h.remap_pending);
                    put(o, "%s{%s,kind=\"failure\"} %d\n", names[m], labels, h.remap_failure);
                }
                break;
            }
        }
    }
}

static void health_metrics(struct out *o, struct agent *a)
{
    head(o, "gpuheal_gpu_state", "gauge",
         "1 for the GPU's current node-local health state (healthy, degraded, unhealthy, lost).");
    int n = gh_health_count(a->health);
    for (int i = 0; i < n; i++) {
        struct gh_health_gpu g;
        if (gh_health_gpu_at(a->health, i, &g) != GH_OK)
            continue;
        char idx[16] = "", pci[80], uuid[200];
        if (g.index >= 0)
            snprintf(idx, sizeof idx, "%d", g.index);
        esc(g.pci, pci, sizeof pci);
        esc(g.uuid, uuid, sizeof uuid);
        for (int s = GH_GPU_HEALTHY; s <= GH_GPU_LOST; s++)
            put(o, "gpuheal_gpu_state{gpu=\"%s\",pci=\"%s\",uuid=\"%s\",state=\"%s\"} %d\n", idx,
                pci, uuid, gh_gpu_state_name((enum gh_gpu_state)s), (int)g.state == s);
    }
    struct gh_health_stats hs;
    gh_health_stats(a->health, &hs);
    head(o, "gpuheal_agent_health_signals_total", "counter",
         "Shipped signals offered to the node-local GPU health, by what became of them.");
    put(o, "gpuheal_agent_health_signals_total{result=\"fed\"} %llu\n", (unsigned long long)hs.fed);
    put(o, "gpuheal_agent_health_signals_total{result=\"ignored\"} %llu\n",
        (unsigned long long)hs.ignored);
    put(o, "gpuheal_agent_health_signals_total{result=\"duplicate\"} %llu\n",
        (unsigned long long)hs.duplicates);
    put(o, "gpuheal_agent_health_signals_total{result=\"node_level\"} %llu\n",
        (unsigned long long)hs.node_level);
    put(o, "gpuheal_agent_health_signals_total{result=\"over_limit\"} %llu\n",
        (unsigned long long)hs.over_limit);
    put(o, "gpuheal_agent_health_signals_total{result=\"other_node\"} %llu\n",
        (unsigned long long)a->health_foreign);

    gauge(o, "gpuheal_agent_kube_publishing",
          "1 when GPU health is published to the Kubernetes API.", a->hpub != NULL);
    if (!a->hpub)
        return;
    struct gh_health_publish_stats ps;
    gh_health_publish_stats(a->hpub, &ps);
    head(o, "gpuheal_agent_health_publish_writes_total", "counter",
         "Writes of GPU health to the Kubernetes API, by object.");
    put(o, "gpuheal_agent_health_publish_writes_total{object=\"node\"} %llu\n",
        (unsigned long long)ps.node_patches);
    put(o, "gpuheal_agent_health_publish_writes_total{object=\"gpunodehealth\"} %llu\n",
        (unsigned long long)ps.gnh_applies);
    counter(o, "gpuheal_agent_health_publish_creates_total",
            "GPUNodeHealth objects the agent created.", ps.gnh_creates);
    counter(o, "gpuheal_agent_health_publish_errors_total",
            "Failed GPU health writes (retried with backoff).", ps.failures);
    counter(o, "gpuheal_agent_health_publish_checks_total",
            "Comparisons of the health state with what was last written.", ps.checks);
    counter(o, "gpuheal_agent_health_publish_unchanged_total",
            "Checks that found nothing to write.", ps.unchanged);
    counter(o, "gpuheal_agent_health_publish_restored_total",
            "Evidence signals of this boot replayed from the GPUNodeHealth at start.",
            ps.restored);
    if (!a->requests)
        return;
    struct gh_requests_stats rs;
    gh_requests_stats(a->requests, &rs);
    head(o, "gpuheal_agent_requests_total", "counter",
         "The controller's requests carried out, by action and result.");
    for (int i = 0; i < GH_REQ__COUNT; i++) {
        const char *act = gh_request_action_name((enum gh_request_action)i);
        put(o, "gpuheal_agent_requests_total{action=\"%s\",result=\"received\"} %llu\n", act,
            (unsigned long long)rs.received[i]);
        put(o, "gpuheal_agent_requests_total{action=\"%s\",result=\"succeeded\"} %llu\n", act,
            (unsigned long long)rs.succeeded[i]);
        put(o, "gpuheal_agent_requests_total{action=\"%s\",result=\"failed\"} %llu\n", act,
            (unsigned long long)rs.failed[i]);
    }
    head(o, "gpuheal_agent_validations_total", "counter",
         "Validation probe runs after requests, by result.");
    put(o, "gpuheal_agent_validations_total{result=\"passed\"} %llu\n",
        (unsigned long long)rs.validations_passed);
    put(o, "gpuheal_agent_validations_total{result=\"failed\"} %llu\n",
        (unsigned long long)rs.validations_failed);
    counter(o, "gpuheal_agent_requests_status_errors_total",
            "Failed writes of request results to GPUNodeHealth (retried).", rs.write_failures);
}

static void probe_metrics(struct out *o, struct agent *a)
{
    static const char *const names[] = {
        "gpuheal_agent_probe_runs_total", "gpuheal_agent_probe_failures_total",
        "gpuheal_agent_probe_passed", "gpuheal_agent_probe_duration_seconds",
        "gpuheal_agent_probe_last_run_seconds"};
    static const char *const types[] = {"counter", "counter", "gauge", "gauge", "gauge"};
    static const char *const helps[] = {
        "Runs of the configured check.", "Runs of the check that did not pass.",
        "1 when the check's latest run passed, 0 when it failed.",
        "Duration of the check's latest run.", "Unix time the check's latest run ended."};
    for (int m = 0; m < 5; m++) {
        head(o, names[m], types[m], helps[m]);
        for (size_t i = 0; i < a->cfg.n_probes; i++) {
            struct gh_probe_last l;
            char name[160];
            if (gh_probe_last(a->probe, a->cfg.probes[i].name, &l) != GH_OK)
                continue;
            esc(a->cfg.probes[i].name, name, sizeof name);
            if (m == 0)
                put(o, "%s{check=\"%s\"} %llu\n", names[m], name, (unsigned long long)l.runs);
            else if (m == 1)
                put(o, "%s{check=\"%s\"} %llu\n", names[m], name, (unsigned long long)l.failures);
            else if (!l.has_run)
                continue;
            else if (m == 2)
                put(o, "%s{check=\"%s\"} %d\n", names[m], name, l.passed);
            else if (m == 3)
                put(o, "%s{check=\"%s\"} %.17g\n", names[m], name, (double)l.duration_ns / 1e9);
            else
                put(o, "%s{check=\"%s\"} %.17g\n", names[m], name, (double)l.ts_ns / 1e9);
        }
    }
}

size_t agent_metrics_render(struct agent *a, char *buf, size_t cap)
{
    struct out o = {buf, 0, cap, false};
    buf[0] = '\0';

    head(&o, "gpuheal_agent_signals_total", "counter",
         "Signals received from the sources, by source and kind (before coalescing).");
    for (int s = 0; s < GH_SRC__COUNT; s++)
        for (int k = 0; k < GH_KIND__COUNT; k++)
            if (a->received[s][k])
                put(&o, "gpuheal_agent_signals_total{source=\"%s\",kind=\"%s\"} %llu\n",
                    gh_source_name((enum gh_source)s), gh_kind_name((enum gh_kind)k),
                    (unsigned long long)a->received[s][k]);
    counter(&o, "gpuheal_agent_signals_spooled_total", "Signals written to the spool.", a->spooled);
    counter(&o, "gpuheal_agent_signals_refused_total",
            "Signals the spool refused (not encodable, or a write failed).", a->spool_refused);
    counter(&o, "gpuheal_agent_inbox_dropped_total",
            "Signals from source threads dropped because the loop's inbox was full.",
            (uint64_t)atomic_load(&a->inbox_dropped));

    struct gh_coalesce_stats cs;
    gh_coalesce_stats(a->co, &cs);
    counter(&o, "gpuheal_agent_coalesced_total",
            "Storm samples counted into a coalesced summary instead of being shipped.", cs.held);
    counter(&o, "gpuheal_agent_coalesce_summaries_total",
            "Coalesced summary signals shipped (msg \"[coalesced N]\").", cs.summaries);
    counter(&o, "gpuheal_agent_coalesce_overflow_total",
            "Storm samples dropped because the coalescing table was full.", cs.overflow);
    gauge(&o, "gpuheal_agent_coalesce_keys", "Storm keys with an open window.", (double)cs.keys);

    struct gh_spool_stats ss;
    gh_spool_stats(a->spool, &ss);
    gauge(&o, "gpuheal_agent_spool_pending", "Signals in the spool not yet accepted by the controller.",
          (double)ss.pending);
    gauge(&o, "gpuheal_agent_spool_bytes", "Bytes of spool segment files.", (double)ss.bytes);
    gauge(&o, "gpuheal_agent_spool_max_bytes", "The spool's bound.", (double)a->cfg.spool_max_bytes);
    gauge(&o, "gpuheal_agent_spool_segments", "Spool segment files.", (double)ss.segments);
    counter(&o, "gpuheal_agent_spool_lost_total",
            "Unshipped signals LOST because the spool was full (oldest dropped).", ss.lost);
    counter(&o, "gpuheal_agent_spool_corrupt_total", "Spool records skipped as corrupt.", ss.corrupt);
    counter(&o, "gpuheal_agent_spool_telemetry_dropped_total",
            "Telemetry lines dropped: telemetry's share of the spool full, or spool writes "
            "failing (hardware signals are kept).", ss.telemetry_dropped);
    gauge(&o, "gpuheal_agent_spool_telemetry_bytes", "Spool bytes of telemetry records.",
          (double)ss.telemetry_bytes);
    gauge(&o, "gpuheal_agent_spool_telemetry_max_bytes", "Telemetry's share of the spool.",
          (double)ss.telemetry_max_bytes);
    counter(&o, "gpuheal_agent_spool_write_errors_total",
            "Spool writes that failed (e.g. ENOSPC); their records are held and retried.",
            ss.write_errors);
    gauge(&o, "gpuheal_agent_spool_held", "Signals held in memory while spool writes fail.",
          (double)ss.held);
    counter(&o, "gpuheal_agent_spool_torn_bytes_total",
            "Bytes of a torn last record truncated when the spool was opened.", ss.torn_bytes);

    if (a->pub) {
        struct gh_publisher_stats ps;
        gh_publisher_stats(a->pub, &ps);
        counter(&o, "gpuheal_agent_publish_requests_total", "POSTs to the controller.", ps.requests);
        counter(&o, "gpuheal_agent_publish_failures_total",
                "POSTs that failed and will be retried.", ps.failures);
        head(&o, "gpuheal_agent_publish_lines_total", "counter",
             "Lines shipped, by the controller's verdict.");
        put(&o, "gpuheal_agent_publish_lines_total{result=\"accepted\"} %llu\n",
            (unsigned long long)ps.accepted);
        put(&o, "gpuheal_agent_publish_lines_total{result=\"duplicate\"} %llu\n",
            (unsigned long long)ps.duplicates);
        put(&o, "gpuheal_agent_publish_lines_total{result=\"rejected\"} %llu\n",
            (unsigned long long)ps.rejected);
        gauge(&o, "gpuheal_agent_publish_last_success_seconds",
              "Unix time of the last accepted batch (0 = never).", (double)ps.last_ok_ns / 1e9);
        gauge(&o, "gpuheal_agent_publish_consecutive_failures",
              "Failed POSTs since the last success.", (double)ps.consecutive_failures);
    }

    /* Enabled: configured to run (a flag or setting turned it on); up: running.
     * A source turned off on purpose is 0 in both, so "enabled and not up" is
     * the only "down". A one-shot --inject file read to its end is finished:
     * neither enabled nor up any more. */
    const struct {
        const char *name;
        bool enabled, up;
    } srcs[] = {
        {"kmsg", a->cfg.kmsg != NULL, a->kmsg != NULL},
        {"nvml", a->cfg.nvml_lib != NULL, a->nvml != NULL},
        {"dcgm", a->cfg.dcgm, a->dcgm != NULL},
        {"dcgm_exporter", a->cfg.dcgm_exporter != NULL, a->dcgmx != NULL},
        {"telemetry", a->cfg.telemetry_socket != NULL, a->tele != NULL},
        {"nic", a->cfg.nic_root != NULL, a->nic != NULL},
        {"inject", a->cfg.inject != NULL && !a->inject_done, a->inject != NULL && !a->inject_done},
        {"probe", a->cfg.n_probes > 0, a->probe != NULL},
    };
    head(&o, "gpuheal_agent_source_enabled", "gauge",
         "1 when the source is configured to run; 0 when it is turned off.");
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++)
        put(&o, "gpuheal_agent_source_enabled{source=\"%s\"} %d\n", srcs[i].name, srcs[i].enabled);
    head(&o, "gpuheal_agent_source_up", "gauge",
         "1 when the source is running (an enabled source at 0 is down).");
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++)
        put(&o, "gpuheal_agent_source_up{source=\"%s\"} %d\n", srcs[i].name, srcs[i].up);

    if (a->kmsg) {
        struct gh_kmsg_source_stats ks;
        gh_kmsg_source_stats(a->kmsg, &ks);
        counter(&o, "gpuheal_agent_kmsg_records_total", "Kernel log records read.", ks.records);
        counter(&o, "gpuheal_agent_kmsg_overruns_total",
                "Kernel log records lost to ring overwrite before they were read.", ks.overruns);
        counter(&o, "gpuheal_agent_kmsg_skipped_total",
                "Kernel log signals not re-shipped after a restart.", ks.skipped);
    }
    if (a->nvml) {
        struct gh_nvml_stats ns;
        gh_nvml_source_stats(a->nvml, &ns);
        counter(&o, "gpuheal_agent_nvml_polls_total", "NVML polls.", ns.polls);
        counter(&o, "gpuheal_agent_nvml_poll_timeouts_total",
                "NVML polls that hit the deadline (a hung driver call).", ns.poll_timeouts);
        gpu_metrics(&o, a);
    }
    if (a->tele) {
        struct gh_telemetry_stats ts;
        gh_telemetry_stats(a->tele, &ts);
        counter(&o, "gpuheal_agent_telemetry_lines_total", "Telemetry lines received.", ts.lines);
        counter(&o, "gpuheal_agent_telemetry_rejected_total", "Telemetry lines rejected.",
                ts.rejected);
        gauge(&o, "gpuheal_agent_telemetry_clients", "Connected telemetry clients.",
              (double)ts.clients_now);
    }
    if (a->inject) {
        struct gh_inject_stats is;
        gh_inject_stats(a->inject, &is);
        counter(&o, "gpuheal_agent_inject_rejected_total", "Injected lines rejected.", is.rejected);
    }
    if (a->health)
        health_metrics(&o, a);
    if (a->probe)
        probe_metrics(&o, a);
    gauge(&o, "gpuheal_agent_start_time_seconds", "Unix time the agent started.",
          (double)a->started_ns / 1e9);
    head(&o, "gpuheal_build_info", "gauge", "The running gpuheal's component and version (always 1).");
    put(&o, "gpuheal_build_info{component=\"agent\",version=\"%s\"} 1\n", GH_VERSION);
    return o.len;
}
