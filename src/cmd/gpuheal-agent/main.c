/* main.c - gpuheal-agent: the node agent's start, its one epoll event loop
 * and its orderly stop.
 *
 * Data path: sources -> (coalesce) -> spool -> publisher -> controller;
 * what is spooled also feeds the node-local GPU health (node_health.c),
 * which is published to the Kubernetes API by the kube client on this loop.
 * - Sources that read fds are driven by the loop: kmsg and inject are
 *   polled (non-blocking) on the loop's timer, telemetry's epoll fd and
 *   the HTTP server's epoll fd are in the loop's epoll set. Sources that
 *   call into drivers or sysfs on a schedule (NVML, DCGM, dcgm-exporter,
 *   NIC, probes) run on their own threads and hand signals to the loop
 *   through a bounded queue whose eventfd is in the epoll set.
 * - The Kubernetes client's epoll fd (curl sockets and its timers) is in the
 *   epoll set; the health publisher's writes are asynchronous on it.
 * - The loop coalesces storms, appends to the spool (flushed to the kernel
 *   at the end of every iteration: kill -9 safe) and fsyncs it on a timer
 *   (batched), after which the kernel-log position is committed.
 * - The publisher's worker thread POSTs batches; its completion eventfd is
 *   in the epoll set; acks go back to the spool on the loop.
 * - One timerfd, re-armed each iteration to the earliest deadline (source
 *   polls, fsync, coalescing windows, batching linger, retry backoff,
 *   HTTP timeouts). SIGTERM/SIGINT through a signalfd: stop sources, ship
 *   held summaries to the spool, fsync, persist the kmsg position, write
 *   the GPU health to Kubernetes once more (bounded wait).
 *
 * Privileges (also docs/agent.md): /dev/kmsg needs CAP_SYSLOG (or root)
 * when kernel.dmesg_restrict=1; NVML needs the NVIDIA device nodes
 * (/dev/nvidiactl, /dev/nvidia<N>, /dev/nvidia-uvm) readable and writable;
 * the spool directory and the telemetry socket's directory writable;
 * /sys/class/infiniband readable. The agent needs nothing else: no
 * CAP_SYS_ADMIN, no host network, no write access to the Kubernetes API
 * beyond its own node's status (the GPUHealthy condition) and its node's
 * GPUNodeHealth. A source that cannot run says so once and the others
 * carry on. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cmd/gpuheal-agent/agent.h"
#include "cmd/gpuheal-agent/check.h"
#include "common/log.h"

#define INBOX_CAP         16384
#define INBOX_PER_TURN    4096          /* signals taken from the inbox per iteration */
#define POLL_PERIOD_NS    (200 * GH_NS_PER_MS)  /* kmsg and inject polls */
#define LOG_EVERY_NS      (10 * GH_NS_PER_S)    /* rate limit of repeated warnings */

enum tag { TAG_SIGNAL = 1, TAG_TIMER, TAG_INBOX, TAG_PUBLISHER, TAG_TELEMETRY, TAG_HTTP, TAG_KUBE };

static int64_t now_ns(const struct agent *a)
{
    return gh_clock_now(a->clock);
}

/* ---- the data path ---- */

/* A repeated error said at most every LOG_EVERY_NS: true when it is to be
 * logged now (*suppressed then says how many were not since the last). */
static bool ratelog_due(struct agent *a, struct agent_ratelog *r, uint64_t *suppressed)
{
    int64_t now = now_ns(a);
    if (r->at && now - r->at < LOG_EVERY_NS) {
        r->suppressed++;
        return false;
    }
    *suppressed = r->suppressed;
    r->suppressed = 0;
    r->at = now;
    return true;
}

/* Appends one signal that is to be shipped. s is borrowed: the spool may
 * give it an id, so it works on a shallow copy whose id alone it may set. */
static void spool_signal(struct agent *a, const struct gh_signal *s)
{
    struct gh_signal tmp = *s;
    struct gh_err err;
    uint64_t seq;
    int rc = gh_spool_append(a->spool, &tmp, &seq, &err);
    if (tmp.id != s->id)
        free(tmp.id); /* the id the spool gave the copy */
    if (rc) {
        uint64_t quiet;
        if (s->source == GH_SRC_TELEMETRY && rc == GH_ELIMIT)
            return; /* telemetry beyond its share: counted by the spool, said by check_losses */
        a->spool_refused++;
        if (ratelog_due(a, &a->log_refused, &quiet))
            GH_LOG(GH_LOG_ERROR, "msg=\"signal not spooled\" source=%s kind=%s error=\"%s\" "
                   "refused_total=%llu not_logged=%llu", gh_source_name(s->source),
                   gh_kind_name(s->kind), err.msg, (unsigned long long)a->spool_refused,
                   (unsigned long long)quiet);
        return;
    }
    a->spooled++;
    if (s->source == GH_SRC_KMSG && a->kmsg && s->has_kmsg_seq && s->kmsg_seq > a->kmsg_seq_spooled)
        a->kmsg_seq_spooled = s->kmsg_seq;
}

/* A signal that is shipped: to the spool and into the node's GPU health. A
 * signal naming its GPU only by PCI address or UUID (the kernel log's XIDs)
 * is shipped with the index this node's health model has learned for it,
 * so the controller's incident names the GPU. */
static void deliver(struct agent *a, const struct gh_signal *s)
{
    struct gh_signal tmp;
    if (s->gpu < 0 && (s->pci || s->uuid) && a->health &&
        (!s->node || !strcmp(s->node, a->cfg.node))) {
        int g = gh_health_index_of(a->health, s->pci, s->uuid);
        if (g >= 0) {
            tmp = *s; /* shallow: only gpu differs */
            tmp.gpu = g;
            s = &tmp;
        }
    }
    spool_signal(a, s);
    agent_health_feed(a, s);
}

static void on_summary(void *ctx, struct gh_signal *s)
{
    deliver(ctx, s);
}

/* Every signal from every source goes through here, on the loop. Injected
 * signals (a test's, a demo's or an operator's deliberate, finite input)
 * are shipped line for line; the rest pass the storm coalescer. */
static void handle(struct agent *a, const struct gh_signal *s)
{
    if ((unsigned)s->source < GH_SRC__COUNT && (unsigned)s->kind < GH_KIND__COUNT)
        a->received[s->source][s->kind]++;
    if (s->injected) {
        deliver(a, s);
        return;
    }
    switch (gh_coalesce_offer(a->co, s, now_ns(a), on_summary, a)) {
    case GH_COALESCE_PASS:
    case GH_COALESCE_FIRST:
        deliver(a, s);
        break;
    case GH_COALESCE_HELD:
        break;
    case GH_COALESCE_OVERFLOW:
        break; /* counted; logged by check_losses */
    }
}

/* emit of the sources the loop drives (kmsg, inject, telemetry). */
static void emit_sync(void *ctx, const struct gh_signal *s)
{
    handle(ctx, s);
}

/* emit of the sources with threads of their own (NVML, DCGM, NIC, probes). */
static void emit_async(void *ctx, const struct gh_signal *s)
{
    struct agent *a = ctx;
    if (gh_sigqueue_push_copy(a->inbox, s) != GH_OK)
        atomic_fetch_add(&a->inbox_dropped, 1);
}

static void on_inject_reject(void *ctx, long line, const char *reason)
{
    (void)ctx;
    GH_LOG(GH_LOG_WARN, "msg=\"injected line rejected\" line=%ld reason=\"%s\"", line, reason);
}

static void on_pub_reject(void *ctx, uint64_t seq, const char *line, size_t len, const char *error)
{
    struct agent *a = ctx;
    a->lines_rejected++;
    GH_LOG(GH_LOG_WARN, "msg=\"controller rejected a signal; dropped\" seq=%llu error=\"%s\" "
           "line=\"%.*s\"", (unsigned long long)seq, error, (int)(len > 300 ? 300 : len), line);
}

static void on_pub_event(void *ctx, enum gh_publisher_event ev, const char *detail)
{
    (void)ctx;
    if (ev == GH_PUB_RECOVERED)
        GH_LOG(GH_LOG_INFO, "msg=\"controller reachable again\" detail=\"%s\"", detail);
    else
        GH_LOG(GH_LOG_WARN, "msg=\"%s\" detail=\"%s\"",
               ev == GH_PUB_FAILING ? "shipping to the controller failing" : "batches shrunk",
               detail);
}

/* Loss and drops are said loudly, at most every LOG_EVERY_NS, with totals. */
static void check_losses(struct agent *a, int64_t now)
{
    struct gh_spool_stats ss;
    gh_spool_stats(a->spool, &ss);
    if (ss.lost > a->lost_logged && now - a->lost_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_ERROR,
               "msg=\"SPOOL FULL: unshipped signals LOST (oldest dropped)\" lost_now=%llu "
               "lost_total=%llu spool_max_bytes=%llu pending=%llu - the controller is not "
               "taking signals; raise --spool-max-bytes or fix shipping",
               (unsigned long long)(ss.lost - a->lost_logged), (unsigned long long)ss.lost,
               (unsigned long long)a->cfg.spool_max_bytes, (unsigned long long)ss.pending);
        a->lost_logged = ss.lost;
        a->lost_log_at = now;
    }
    if (ss.telemetry_dropped > a->tele_dropped_logged &&
        now - a->tele_dropped_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_WARN,
               "msg=\"telemetry dropped: its share of the spool is full or spool writes fail\" "
               "dropped_now=%llu dropped_total=%llu telemetry_bytes=%llu share_bytes=%llu "
               "write_failing=%s - hardware signals are kept",
               (unsigned long long)(ss.telemetry_dropped - a->tele_dropped_logged),
               (unsigned long long)ss.telemetry_dropped, (unsigned long long)ss.telemetry_bytes,
               (unsigned long long)ss.telemetry_max_bytes, ss.write_failing ? "true" : "false");
        a->tele_dropped_logged = ss.telemetry_dropped;
        a->tele_dropped_log_at = now;
    }
    struct gh_coalesce_stats cs;
    gh_coalesce_stats(a->co, &cs);
    if (cs.overflow > a->overflow_logged && now - a->overflow_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_ERROR, "msg=\"coalescing table full: storm samples dropped\" total=%llu",
               (unsigned long long)cs.overflow);
        a->overflow_logged = cs.overflow;
        a->overflow_log_at = now;
    }
    uint64_t dropped = atomic_load(&a->inbox_dropped);
    if (dropped > a->dropped_logged && now - a->dropped_log_at >= LOG_EVERY_NS) {
        GH_LOG(GH_LOG_ERROR, "msg=\"inbox full: signals from source threads dropped\" total=%llu",
               (unsigned long long)dropped);
        a->dropped_logged = dropped;
        a->dropped_log_at = now;
    }
}

static void drain_inbox(struct agent *a)
{
    struct gh_signal batch[256];
    size_t total = 0, n;
    while (total < INBOX_PER_TURN && (n = gh_sigqueue_pop(a->inbox, batch, 256)) > 0) {
        for (size_t i = 0; i < n; i++) {
            handle(a, &batch[i]);
            gh_signal_clear(&batch[i]);
        }
        total += n;
    }
    if (total >= INBOX_PER_TURN)
        a->more_input = true;
}

static void poll_sources(struct agent *a)
{
    struct gh_err err;
    if (a->kmsg) {
        bool caught_up = true;
        if (gh_kmsg_source_poll(a->kmsg, &caught_up, &err) != GH_OK)
            GH_LOG(GH_LOG_WARN, "msg=\"kmsg read failed; retrying\" error=\"%s\"", err.msg);
        if (!caught_up)
            a->more_input = true;
    }
    if (a->inject && !a->inject_done) {
        int rc = gh_inject_poll(a->inject, &err);
        if (rc == GH_ENOTFOUND) {
            struct gh_inject_stats is;
            gh_inject_stats(a->inject, &is);
            GH_LOG(GH_LOG_INFO, "msg=\"inject file read\" path=%s signals=%llu rejected=%llu",
                   a->cfg.inject, (unsigned long long)is.signals, (unsigned long long)is.rejected);
            a->inject_done = true;
        } else if (rc) {
            GH_LOG(GH_LOG_WARN, "msg=\"inject read failed\" error=\"%s\"", err.msg);
        }
    }
}

static void sync_spool(struct agent *a)
{
    struct gh_err err;
    if (gh_spool_sync(a->spool, &err)) {
        uint64_t quiet;
        if (ratelog_due(a, &a->log_sync, &quiet))
            GH_LOG(GH_LOG_ERROR, "msg=\"spool fsync failed\" error=\"%s\" not_logged=%llu",
                   err.msg, (unsigned long long)quiet);
        return;
    }
    /* What is fsync'd in the spool need not be re-read from the kernel. */
    if (a->kmsg && a->cfg.kmsg_file_mode)
        gh_kmsg_source_commit_read(a->kmsg); /* its signals were spooled on this loop */
    else if (a->kmsg && a->kmsg_seq_spooled > a->kmsg_seq_committed) {
        gh_kmsg_source_commit(a->kmsg, a->kmsg_seq_spooled);
        a->kmsg_seq_committed = a->kmsg_seq_spooled;
    }
}

/* ---- the loop ---- */

static int add_fd(struct agent *a, int fd, enum tag tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};
    return epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void arm_timer(struct agent *a, int64_t now)
{
    int64_t dl = a->more_input ? now : a->next_poll;
    if (a->next_sync < dl)
        dl = a->next_sync;
    int64_t c = gh_coalesce_next_deadline(a->co);
    if (c < dl)
        dl = c;
    if (a->pub) {
        int64_t p = gh_publisher_next_deadline(a->pub);
        if (p < dl)
            dl = p;
    }
    int64_t wait = dl - now;
    if (a->http) {
        int64_t ms = agent_http_timeout_ms(a->http);
        if (ms >= 0 && ms * GH_NS_PER_MS < wait)
            wait = ms * GH_NS_PER_MS;
    }
    if (wait < 1)
        wait = 1; /* 0 would disarm the timer */
    struct itimerspec its = {{0, 0}, {(time_t)(wait / GH_NS_PER_S), (long)(wait % GH_NS_PER_S)}};
    timerfd_settime(a->timerfd, 0, &its, NULL);
}

static int run_loop(struct agent *a)
{
    bool stopping = false;
    struct gh_err err;
    while (!stopping) {
        bool kube_ready = false;
        int64_t now = now_ns(a);
        arm_timer(a, now);
        struct epoll_event evs[16];
        int n = epoll_wait(a->epfd, evs, 16, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            GH_LOG(GH_LOG_ERROR, "msg=\"epoll_wait failed\" error=\"%s\"", strerror(errno));
            return 1;
        }
        a->more_input = false;
        for (int i = 0; i < n; i++) {
            switch (evs[i].data.u32) {
            case TAG_SIGNAL: {
                struct signalfd_siginfo si;
                if (read(a->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
                    GH_LOG(GH_LOG_INFO, "msg=\"stopping\" signal=%u", si.ssi_signo);
                    stopping = true;
                }
                break;
            }
            case TAG_TIMER: {
                uint64_t exp;
                ssize_t r = read(a->timerfd, &exp, sizeof exp);
                (void)r;
                break;
            }
            case TAG_INBOX:
                drain_inbox(a);
                break;
            case TAG_PUBLISHER:
                break; /* the tick below reads it */
            case TAG_TELEMETRY:
                if (gh_telemetry_run_once(a->tele, 0, &err) != GH_OK)
                    GH_LOG(GH_LOG_WARN, "msg=\"telemetry socket error\" error=\"%s\"", err.msg);
                break;
            case TAG_HTTP:
                break; /* run below, after the spool flush */
            case TAG_KUBE:
                kube_ready = true; /* run below, after the health update */
                break;
            }
        }
        now = now_ns(a);
        if (now >= a->next_poll) {
            a->next_poll = now + POLL_PERIOD_NS;
            poll_sources(a);
        }
        gh_coalesce_flush(a->co, now, false, on_summary, a);
        uint64_t quiet;
        if (gh_spool_flush(a->spool, &err) && ratelog_due(a, &a->log_write, &quiet))
            GH_LOG(GH_LOG_ERROR, "msg=\"spool write failed; signals held in memory, what is on "
                   "disk still ships\" error=\"%s\" not_logged=%llu", err.msg,
                   (unsigned long long)quiet);
        /* After the flush: whatever /metrics counts as spooled is in the
         * kernel (kill -9 safe). */
        if (a->http)
            agent_http_run(a->http); /* requests and timeouts */
        if (now >= a->next_sync) {
            a->next_sync = now + a->cfg.spool_sync_ns;
            sync_spool(a);
        }
        if (a->pub && gh_publisher_tick(a->pub, a->spool, now, &err) &&
            ratelog_due(a, &a->log_read, &quiet))
            GH_LOG(GH_LOG_ERROR, "msg=\"spool read failed\" error=\"%s\" not_logged=%llu",
                   err.msg, (unsigned long long)quiet);
        agent_health_tick(a, now);
        if (kube_ready)
            agent_health_run(a);
        check_losses(a, now);
        if (a->more_input)
            a->next_poll = now; /* a source had more: come back at once */
    }
    return 0;
}

/* ---- start and stop ---- */

static void read_boot_id(struct agent *a)
{
    snprintf(a->boot_id, sizeof a->boot_id, "unknown");
    FILE *f = a->cfg.boot_id_path ? fopen(a->cfg.boot_id_path, "r") : NULL;
    if (!f)
        return;
    char buf[80];
    if (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, " \t\r\n")] = '\0';
        if (buf[0])
            snprintf(a->boot_id, sizeof a->boot_id, "%s", buf);
    }
    fclose(f);
}

/* The configured checks, each run as /bin/sh -c COMMAND on the probe
 * module's worker thread; results come back through the inbox. */
static void start_probes(struct agent *a)
{
    struct gh_err err;
    struct gh_probe_check checks[GH_PROBE_MAX_CHECKS];
    const char *argvs[GH_PROBE_MAX_CHECKS][4];
    size_t n = a->cfg.n_probes < GH_PROBE_MAX_CHECKS ? a->cfg.n_probes : GH_PROBE_MAX_CHECKS;
    for (size_t i = 0; i < n; i++) {
        const struct agent_probe *p = &a->cfg.probes[i];
        argvs[i][0] = "/bin/sh";
        argvs[i][1] = "-c";
        argvs[i][2] = p->command;
        argvs[i][3] = NULL;
        checks[i] = (struct gh_probe_check){.name = p->name, .argv = argvs[i],
                                            .timeout_ns = p->timeout_ns,
                                            .interval_ns = p->interval_ns, .gpu = p->gpu};
        if (!p->interval_ns)
            GH_LOG(GH_LOG_WARN, "msg=\"probe has no every=: it runs only on demand, and "
                   "on-demand requests from the controller are not wired yet\" probe=%s",
                   p->name);
    }
    struct gh_probe_opts o;
    gh_probe_opts_init(&o);
    o.node = a->cfg.node;
    o.checks = checks;
    o.n_checks = n;
    o.clock = a->clock;
    o.emit = emit_async;
    o.emit_ctx = a;
    if (gh_probe_new(&o, &a->probe, &err) != GH_OK ||
        gh_probe_start(a->probe, &err) != GH_OK) {
        GH_LOG(GH_LOG_ERROR, "msg=\"probes unavailable\" error=\"%s\"", err.msg);
        gh_probe_free(a->probe);
        a->probe = NULL;
        return;
    }
    GH_LOG(GH_LOG_INFO, "msg=\"probes running\" count=%zu", n);
}

static void start_sources(struct agent *a)
{
    struct gh_err err;
    char state[4096];

    if (a->cfg.kmsg) {
        struct gh_kmsg_source_opts o;
        gh_kmsg_source_opts_init(&o);
        snprintf(state, sizeof state, "%s/kmsg.state", a->cfg.spool_dir);
        o.mode = a->cfg.kmsg_file_mode ? GH_KMSG_SRC_FILE : GH_KMSG_SRC_DEVICE;
        o.path = a->cfg.kmsg;
        o.node = a->cfg.node;
        o.state_path = state;
        o.boot_id = a->boot_id;
        o.clock = a->clock;
        o.emit = emit_sync;
        o.emit_ctx = a;
        if (gh_kmsg_source_new(&o, &a->kmsg, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"kernel log source unavailable; running without it\" "
                   "path=%s error=\"%s\" hint=\"/dev/kmsg needs CAP_SYSLOG or root\"",
                   a->cfg.kmsg, err.msg);
            a->kmsg = NULL;
        }
    }
    if (a->cfg.nvml_lib) {
        struct gh_nvml_opts o = {0};
        o.lib_path = a->cfg.nvml_lib;
        o.node = a->cfg.node;
        o.poll_interval_ns = a->cfg.poll_interval_ns;
        o.clock = a->clock;
        o.emit = emit_async;
        o.emit_ctx = a;
        if (gh_nvml_source_new(&o, &a->nvml, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"NVML source unavailable; running without it\" error=\"%s\"",
                   err.msg);
            a->nvml = NULL;
        } else if (gh_nvml_source_start(a->nvml, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"NVML source did not start\" error=\"%s\"", err.msg);
            gh_nvml_source_free(a->nvml);
            a->nvml = NULL;
        } else {
            GH_LOG(GH_LOG_INFO, "msg=\"NVML source running\" gpus=%d",
                   gh_nvml_source_gpu_count(a->nvml));
        }
    }
    if (a->cfg.dcgm) {
        struct gh_dcgm_health_opts o = {0};
        o.node = a->cfg.node;
        o.interval_ns = a->cfg.dcgm_interval_ns;
        o.clock = a->clock;
        o.emit = emit_async;
        o.emit_ctx = a;
        if (gh_dcgm_health_new(&o, &a->dcgm, &err) != GH_OK ||
            gh_dcgm_health_start(a->dcgm, &err) != GH_OK) {
            GH_LOG(GH_LOG_INFO, "msg=\"DCGM health watches unavailable; running without them\" "
                   "error=\"%s\"", err.msg);
            gh_dcgm_health_free(a->dcgm);
            a->dcgm = NULL;
        }
    }
    if (a->cfg.dcgm_exporter) {
        struct gh_dcgm_exporter_opts o = {0};
        o.url = a->cfg.dcgm_exporter;
        o.node = a->cfg.node;
        snprintf(state, sizeof state, "%s/dcgm.state", a->cfg.spool_dir);
        o.state_path = state;
        o.boot_id = a->boot_id;
        o.interval_ns = a->cfg.dcgm_interval_ns;
        o.clock = a->clock;
        o.emit = emit_async;
        o.emit_ctx = a;
        if (gh_dcgm_exporter_new(&o, &a->dcgmx, &err) != GH_OK ||
            gh_dcgm_exporter_start(a->dcgmx, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"dcgm-exporter scrape unavailable\" error=\"%s\"", err.msg);
            gh_dcgm_exporter_free(a->dcgmx);
            a->dcgmx = NULL;
        }
    }
    if (a->cfg.telemetry_socket) {
        struct gh_telemetry_opts o;
        gh_telemetry_opts_init(&o);
        o.socket_path = a->cfg.telemetry_socket;
        o.node = a->cfg.node;
        o.step_emit_interval_ns = a->cfg.telemetry_step_interval_ns;
        o.clock = a->clock;
        o.emit = emit_sync;
        o.emit_ctx = a;
        if (gh_telemetry_new(&o, &a->tele, &err) != GH_OK ||
            add_fd(a, gh_telemetry_fd(a->tele), TAG_TELEMETRY) != 0) {
            GH_LOG(GH_LOG_WARN, "msg=\"telemetry socket unavailable; running without it\" "
                   "path=%s error=\"%s\"", a->cfg.telemetry_socket, err.msg);
            gh_telemetry_free(a->tele);
            a->tele = NULL;
        }
        atomic_store(&a->tele_relay, a->tele);
    }
    if (a->cfg.inject) {
        struct gh_inject_opts o;
        gh_inject_opts_init(&o);
        o.path = a->cfg.inject;
        o.node = a->cfg.node;
        o.follow = a->cfg.inject_follow;
        o.emit = emit_sync;
        o.emit_ctx = a;
        o.on_reject = on_inject_reject;
        if (gh_inject_new(&o, &a->inject, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"inject source unavailable\" path=%s error=\"%s\"",
                   a->cfg.inject, err.msg);
            a->inject = NULL;
        }
    }
    if (a->cfg.nic_root) {
        struct gh_nic_opts o;
        gh_nic_opts_init(&o);
        o.root = a->cfg.nic_root;
        o.node = a->cfg.node;
        o.poll_interval_ns = a->cfg.nic_poll_interval_ns;
        o.clock = a->clock;
        o.emit = emit_async;
        o.emit_ctx = a;
        if (gh_nic_source_new(&o, &a->nic, &err) != GH_OK ||
            gh_nic_source_start(a->nic, &err) != GH_OK) {
            GH_LOG(GH_LOG_WARN, "msg=\"NIC source unavailable\" error=\"%s\"", err.msg);
            gh_nic_source_free(a->nic);
            a->nic = NULL;
        }
    }
    if (a->cfg.n_probes)
        start_probes(a);
}

static void stop_sources(struct agent *a)
{
    /* Threads first, so nothing more arrives in the inbox. */
    agent_requests_stop(a);
    gh_nvml_source_free(a->nvml);
    gh_dcgm_health_free(a->dcgm);
    gh_dcgm_exporter_free(a->dcgmx);
    gh_nic_source_free(a->nic);
    gh_probe_free(a->probe); /* kills a running check */
    a->probe = NULL;
    a->nvml = NULL;
    a->dcgm = NULL;
    a->dcgmx = NULL;
    a->nic = NULL;
    if (a->inbox && a->co && a->spool) {
        struct gh_signal batch[256];
        size_t n;
        while ((n = gh_sigqueue_pop(a->inbox, batch, 256)) > 0)
            for (size_t i = 0; i < n; i++) {
                handle(a, &batch[i]);
                gh_signal_clear(&batch[i]);
            }
        gh_coalesce_flush(a->co, now_ns(a), true, on_summary, a);
        sync_spool(a);
    }
    gh_telemetry_free(a->tele);
    gh_inject_free(a->inject);
    a->tele = NULL;
    a->inject = NULL;
    if (a->kmsg) {
        struct gh_err err;
        if (gh_kmsg_source_persist(a->kmsg, &err))
            GH_LOG(GH_LOG_WARN, "msg=\"kmsg position not saved\" error=\"%s\"", err.msg);
        gh_kmsg_source_free(a->kmsg);
        a->kmsg = NULL;
    }
}

static int setup(struct agent *a)
{
    struct gh_err err;
    char msg[GH_ERR_MAX];

    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* Blocked before any thread starts, so every thread inherits it. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    a->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    a->inbox = gh_sigqueue_new(INBOX_CAP);
    a->co = gh_coalesce_new(NULL);
    if (a->epfd < 0 || a->timerfd < 0 || a->sigfd < 0 || !a->inbox || !a->co ||
        add_fd(a, a->sigfd, TAG_SIGNAL) || add_fd(a, a->timerfd, TAG_TIMER) ||
        add_fd(a, gh_sigqueue_fd(a->inbox), TAG_INBOX)) {
        GH_LOG(GH_LOG_ERROR, "msg=\"cannot set up the event loop\" error=\"%s\"", strerror(errno));
        return 1;
    }

    struct gh_spool_opts so = {.dir = a->cfg.spool_dir, .node = a->cfg.node,
                               .boot_id = a->boot_id, .max_bytes = a->cfg.spool_max_bytes,
                               .telemetry_max_bytes =
                                   a->cfg.spool_max_bytes / 100 * a->cfg.spool_telemetry_share,
                               .clock = a->clock};
    if (gh_spool_open(&so, &a->spool, &err)) {
        GH_LOG(GH_LOG_ERROR, "msg=\"cannot open the spool\" error=\"%s\"", err.msg);
        return 1;
    }
    struct gh_spool_stats ss;
    gh_spool_stats(a->spool, &ss);
    GH_LOG(ss.torn_bytes ? GH_LOG_WARN : GH_LOG_INFO,
           "msg=\"spool open\" dir=%s pending=%llu next_seq=%llu torn_bytes_truncated=%llu",
           a->cfg.spool_dir, (unsigned long long)ss.pending, (unsigned long long)ss.next_seq,
           (unsigned long long)ss.torn_bytes);

    if (a->cfg.controller) {
        struct gh_publisher_opts po = {.url = a->cfg.controller, .token_file = a->cfg.token_file,
                                       .ca_file = a->cfg.ca_file,
                                       .batch_records = a->cfg.batch_records,
                                       .linger_ns = a->cfg.batch_linger_ns, .clock = a->clock,
                                       .on_reject = on_pub_reject, .on_event = on_pub_event,
                                       .cb_ctx = a};
        if (gh_publisher_new(&po, &a->pub, &err) ||
            add_fd(a, gh_publisher_fd(a->pub), TAG_PUBLISHER)) {
            GH_LOG(GH_LOG_ERROR, "msg=\"cannot start shipping\" error=\"%s\"", err.msg);
            return 1;
        }
    } else {
        GH_LOG(GH_LOG_WARN, "msg=\"no --controller: signals are spooled, not shipped\"");
    }

    if (a->cfg.listen) {
        int port = 0;
        a->http = agent_http_start(a, a->cfg.listen, &port, msg, sizeof msg);
        if (!a->http || add_fd(a, agent_http_fd(a->http), TAG_HTTP)) {
            GH_LOG(GH_LOG_ERROR, "msg=\"cannot serve /metrics\" listen=%s error=\"%s\"",
                   a->cfg.listen, a->http ? strerror(errno) : msg);
            return 1;
        }
        GH_LOG(GH_LOG_INFO, "msg=\"http listening\" listen=%s port=%d", a->cfg.listen, port);
    }
    if (agent_health_start(a))
        return 1;
    if (a->kube && add_fd(a, agent_health_fd(a), TAG_KUBE)) {
        GH_LOG(GH_LOG_ERROR, "msg=\"cannot poll the Kubernetes client\" error=\"%s\"",
               strerror(errno));
        return 1;
    }
    start_sources(a);
    return 0;
}

int main(int argc, char **argv)
{
    struct agent a;
    char msg[GH_ERR_MAX];
    if (agent_check_wanted(argc, argv))
        return agent_check_main(argc, argv); /* one-shot node check (check.c) */
    memset(&a, 0, sizeof a);
    a.epfd = a.timerfd = a.sigfd = -1;
    int rc = agent_config_parse(argc, argv, &a.cfg, msg, sizeof msg);
    if (rc == 1)
        return 0;
    if (rc) {
        fprintf(stderr, "gpuheal-agent: %s\n", msg);
        return 2;
    }
    gh_log_set_level((enum gh_log_level)a.cfg.log_level);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    a.clock = gh_clock_real();
    a.started_ns = now_ns(&a);
    atomic_init(&a.inbox_dropped, 0);
    read_boot_id(&a);
    GH_LOG(GH_LOG_INFO, "msg=\"gpuheal-agent starting\" node=%s boot_id=%s controller=%s",
           a.cfg.node, a.boot_id, a.cfg.controller ? a.cfg.controller : "(none)");

    rc = setup(&a);
    if (rc == 0) {
        a.next_poll = a.next_sync = now_ns(&a);
        rc = run_loop(&a);
        stop_sources(&a);
    }
    agent_health_stop(&a); /* after the sources' last signals were fed */
    /* The publisher goes last: what it had not shipped stays in the spool. */
    gh_publisher_free(a.pub);
    agent_http_stop(a.http);
    if (a.spool) {
        struct gh_spool_stats ss;
        gh_spool_stats(a.spool, &ss);
        GH_LOG(GH_LOG_INFO, "msg=\"stopped\" spooled=%llu pending=%llu lost=%llu",
               (unsigned long long)a.spooled, (unsigned long long)ss.pending,
               (unsigned long long)ss.lost);
    }
    stop_sources(&a);
    gh_spool_close(a.spool);
    gh_coalesce_free(a.co);
    gh_sigqueue_free(a.inbox);
    if (a.epfd >= 0)
        close(a.epfd);
    if (a.timerfd >= 0)
        close(a.timerfd);
    if (a.sigfd >= 0)
        close(a.sigfd);
    agent_config_free(&a.cfg);
    curl_global_cleanup();
    return rc;
}
