/* metrics.c - the controller's counters, histogram and gauges, and their
 * Prometheus text exposition. */
#include "control/metrics.h"

#include "common/version.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const results[] = {"succeeded", "failed", "noop", "skipped", "requested"};
#define N_RESULTS 5
static const char *const guards[] = {"budget", "rate", "cooldown", "storm", "dry_run", "approval"};
#define N_GUARDS 6
static const double buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define N_BUCKETS 10
static const char *const sources[] = {"ingest", "kube"};
#define N_SOURCES 2

struct gh_ctl_metrics {
    pthread_mutex_t mu;
    uint64_t incidents[GH_CLASS__COUNT];
    uint64_t shared[GH_SCOPE__COUNT];               /* GH_SCOPE_RACK and up */
    uint64_t actions[GH_ACT__COUNT + 1][N_RESULTS]; /* last row: release_node */
    uint64_t trips[N_GUARDS];
    uint64_t lat_count, lat_buckets[N_BUCKETS];
    double lat_sum;
    uint64_t signals[N_SOURCES];
    uint64_t commit_failures;
    uint64_t engine_nomem;
    uint64_t joined_stored, joined_capped;
    double gauges[GH_GAUGE__COUNT];
};

struct gh_ctl_metrics *gh_ctl_metrics_new(void)
{
    struct gh_ctl_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void gh_ctl_metrics_free(struct gh_ctl_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void gh_ctl_metrics_commit_failure(struct gh_ctl_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->commit_failures++;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_joined(struct gh_ctl_metrics *m, unsigned stored, unsigned capped)
{
    pthread_mutex_lock(&m->mu);
    m->joined_stored += stored;
    m->joined_capped += capped;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_engine_nomem(struct gh_ctl_metrics *m, unsigned long long total)
{
    pthread_mutex_lock(&m->mu);
    m->engine_nomem = total;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_incident(struct gh_ctl_metrics *m, enum gh_class cls)
{
    if ((int)cls < 0 || cls >= GH_CLASS__COUNT)
        return;
    pthread_mutex_lock(&m->mu);
    m->incidents[cls]++;
    pthread_mutex_unlock(&m->mu);
}

/* the scopes of a component several nodes share (taxonomy.h) */
static bool shared_scope(int s) { return s >= GH_SCOPE_RACK && s < GH_SCOPE__COUNT; }

void gh_ctl_metrics_shared_cause(struct gh_ctl_metrics *m, enum gh_scope scope)
{
    if (!shared_scope((int)scope))
        return;
    pthread_mutex_lock(&m->mu);
    m->shared[scope]++;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_action(struct gh_ctl_metrics *m, int action, const char *result)
{
    int row = action < 0 || action >= GH_ACT__COUNT ? GH_ACT__COUNT : action;
    int col = 3;
    for (int i = 0; i < N_RESULTS; i++)
        if (result && !strcmp(result, results[i]))
            col = i;
    /* what the node agent answered to a request that did not succeed */
    if (result && (!strcmp(result, "not_configured") || !strcmp(result, "interrupted") ||
                   !strcmp(result, "timed_out")))
        col = 1;
    pthread_mutex_lock(&m->mu);
    m->actions[row][col]++;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_guard_trip(struct gh_ctl_metrics *m, const char *guard)
{
    for (int i = 0; i < N_GUARDS; i++)
        if (guard && !strcmp(guard, guards[i])) {
            pthread_mutex_lock(&m->mu);
            m->trips[i]++;
            pthread_mutex_unlock(&m->mu);
        }
}

void gh_ctl_metrics_latency(struct gh_ctl_metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    m->lat_count++;
    m->lat_sum += s;
    for (int i = 0; i < N_BUCKETS; i++)
        if (s <= buckets[i])
            m->lat_buckets[i]++;
    pthread_mutex_unlock(&m->mu);
}

void gh_ctl_metrics_signals(struct gh_ctl_metrics *m, const char *source, unsigned long n)
{
    for (int i = 0; i < N_SOURCES; i++)
        if (source && !strcmp(source, sources[i])) {
            pthread_mutex_lock(&m->mu);
            m->signals[i] += n;
            pthread_mutex_unlock(&m->mu);
        }
}

void gh_ctl_metrics_gauge(struct gh_ctl_metrics *m, enum gh_ctl_gauge g, double v)
{
    if ((int)g < 0 || g >= GH_GAUGE__COUNT)
        return;
    pthread_mutex_lock(&m->mu);
    m->gauges[g] = v;
    pthread_mutex_unlock(&m->mu);
}

struct out {
    char *buf;
    size_t cap, used;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
    if (o->used + 1 >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->buf + o->used, o->cap - o->used, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    if ((size_t)w >= o->cap - o->used) { /* cut: drop the partial line */
        char *nl = o->used ? memrchr(o->buf, '\n', o->used) : NULL;
        o->used = nl ? (size_t)(nl - o->buf) + 1 : 0;
        o->buf[o->used] = '\0';
        o->cap = o->used + 1; /* nothing more fits */
        return;
    }
    o->used += (size_t)w;
}

size_t gh_ctl_metrics_write(struct gh_ctl_metrics *m, char *buf, size_t cap)
{
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    struct out o = {buf, cap, 0};
    put(&o, "# HELP gpuheal_build_info The running gpuheal's component and version (always 1).\n"
            "# TYPE gpuheal_build_info gauge\n"
            "gpuheal_build_info{component=\"controller\",version=\"%s\"} 1\n", GH_VERSION);
    pthread_mutex_lock(&m->mu);
    put(&o, "# HELP gpuheal_incidents_total Incidents decided, by fault class.\n"
            "# TYPE gpuheal_incidents_total counter\n");
    for (int c = 0; c < GH_CLASS__COUNT; c++)
        put(&o, "gpuheal_incidents_total{class=\"%s\"} %llu\n", gh_class_name((enum gh_class)c),
            (unsigned long long)m->incidents[c]);
    put(&o, "# HELP gpuheal_shared_cause_incidents_total Incidents whose cause several nodes "
            "share (a rack, a switch or rail, an NVLink domain, the fleet), by scope: none of "
            "their nodes is taken out of service for it.\n"
            "# TYPE gpuheal_shared_cause_incidents_total counter\n");
    for (int s = GH_SCOPE_RACK; s < GH_SCOPE__COUNT; s++)
        put(&o, "gpuheal_shared_cause_incidents_total{scope=\"%s\"} %llu\n",
            gh_scope_name((enum gh_scope)s), (unsigned long long)m->shared[s]);
    put(&o, "# HELP gpuheal_actions_total Recovery actions carried out, by type and result.\n"
            "# TYPE gpuheal_actions_total counter\n");
    for (int a = 0; a <= GH_ACT__COUNT; a++) {
        if (a == GH_ACT_NONE)
            continue;
        const char *name = a == GH_ACT__COUNT ? "release_node" : gh_action_name((enum gh_action)a);
        for (int r = 0; r < N_RESULTS; r++)
            put(&o, "gpuheal_actions_total{action=\"%s\",result=\"%s\"} %llu\n", name, results[r],
                (unsigned long long)m->actions[a][r]);
    }
    put(&o, "# HELP gpuheal_guard_trips_total Actions a guard held back, by guard.\n"
            "# TYPE gpuheal_guard_trips_total counter\n");
    for (int g = 0; g < N_GUARDS; g++)
        put(&o, "gpuheal_guard_trips_total{guard=\"%s\"} %llu\n", guards[g],
            (unsigned long long)m->trips[g]);
    put(&o, "# HELP gpuheal_controller_signals_total Signals fed to the engine, by origin.\n"
            "# TYPE gpuheal_controller_signals_total counter\n");
    for (int s = 0; s < N_SOURCES; s++)
        put(&o, "gpuheal_controller_signals_total{origin=\"%s\"} %llu\n", sources[s],
            (unsigned long long)m->signals[s]);
    put(&o, "# HELP gpuheal_controller_decision_commit_failures_total Decision records the "
            "audit store failed to commit (each attempt; the decision is tried again).\n"
            "# TYPE gpuheal_controller_decision_commit_failures_total counter\n"
            "gpuheal_controller_decision_commit_failures_total %llu\n",
        (unsigned long long)m->commit_failures);
    put(&o,
        "# HELP gpuheal_joined_evidence_total Signals that joined an incident after it was "
        "decided, by what became of their audit row (not_stored: the incident had the most "
        "rows kept).\n"
        "# TYPE gpuheal_joined_evidence_total counter\n"
        "gpuheal_joined_evidence_total{result=\"stored\"} %llu\n"
        "gpuheal_joined_evidence_total{result=\"not_stored\"} %llu\n",
        (unsigned long long)m->joined_stored, (unsigned long long)m->joined_capped);
    put(&o,
        "# HELP gpuheal_engine_allocation_failures_total Allocations the engine could not "
        "make while it released, detected and decided (each may have cost a signal's "
        "effect: a finding or an incident).\n"
        "# TYPE gpuheal_engine_allocation_failures_total counter\n"
        "gpuheal_engine_allocation_failures_total %llu\n",
        (unsigned long long)m->engine_nomem);
    put(&o, "# HELP gpuheal_decision_latency_seconds From the first evidence received to the "
            "first action issued.\n# TYPE gpuheal_decision_latency_seconds histogram\n");
    for (int b = 0; b < N_BUCKETS; b++)
        put(&o, "gpuheal_decision_latency_seconds_bucket{le=\"%g\"} %llu\n", buckets[b],
            (unsigned long long)m->lat_buckets[b]);
    put(&o, "gpuheal_decision_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
        (unsigned long long)m->lat_count);
    put(&o, "gpuheal_decision_latency_seconds_sum %.6f\n", m->lat_sum);
    put(&o, "gpuheal_decision_latency_seconds_count %llu\n", (unsigned long long)m->lat_count);
    static const char *const gnames[][2] = {
        {"gpuheal_controller_leader", "1 while this controller holds the Lease."},
        {"gpuheal_controller_signal_queue_depth", "Signals waiting for the event loop."},
        {"gpuheal_controller_executor_queue_depth", "Tasks waiting for the executor."},
        {"gpuheal_nodes_isolated", "Nodes gpuheal holds out of service."},
        {"gpuheal_incidents_awaiting_approval", "Incidents waiting for approval."},
        {"gpuheal_engine_pending_signals", "Signals in the engine's reorder window."},
        {"gpuheal_controller_store_up", "1 while the audit store takes writes (readiness "
                                        "needs it)."},
        {"gpuheal_engine_held_findings", "Findings and shared causes the engine holds for other "
                                         "nodes, decided when their holds end."}};
    _Static_assert(sizeof gnames / sizeof gnames[0] == GH_GAUGE__COUNT, "a name per gauge");
    for (int g = 0; g < GH_GAUGE__COUNT; g++)
        put(&o, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", gnames[g][0], gnames[g][1],
            gnames[g][0], gnames[g][0], m->gauges[g]);
    pthread_mutex_unlock(&m->mu);
    return o.used;
}
