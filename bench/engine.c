/* engine.c (bench) - figures for the detection engine; never pass/fail:
 *   1. throughput: signals/s through timeline, detectors and policy on one
 *      core (a live-like mix: per-rank step telemetry, GPU health readings,
 *      NIC counters, checkpoints; 2 s reorder window);
 *   2. memory per tracked GPU and per rank;
 *   3. straggler detection delay in steps: one rank 10% slow among 1,024
 *      with 3% Gaussian jitter, over several seeds;
 *   4. false alarms per 10^6 healthy rank-steps (1,024 ranks, 3% jitter);
 *   5. per-step cost when few ranks of a large job report (64 of 65,536
 *      declared): the straggler detector's work follows the reports.
 * Usage: engine [--quick] [--throughput-only] [--steal-only | --copy-only] [--comm]
 *   --comm: the step telemetry also carries comm_ms (15% of the step).
 *   --steal-only / --copy-only run one of the two throughput passes (for a
 *   profiler: `valgrind --tool=callgrind --toggle-collect='gh_engine_*'`). */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

#define RANKS 1024
#define RPN 8
#define NODES (RANKS / RPN)

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(uint64_t *s) { return sqrt(-2.0 * log(uniform(s))) * cos(2.0 * M_PI * uniform(s)); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static char node_names[NODES][16];
static char job_name[] = "bench/llm";

struct counts {
    long incidents, stragglers;
    long first_straggler_step;
    long current_step;
};

static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct counts *c = ctx;
    c->incidents++;
    if (inc->cls == GH_CLASS_STRAGGLER) {
        c->stragglers++;
        if (c->first_straggler_step < 0)
            c->first_straggler_step = c->current_step;
    }
}

static struct gh_topology *topology(void)
{
    struct gh_topology *t = gh_topology_new();
    const char *names[NODES];
    for (int i = 0; i < NODES; i++) {
        snprintf(node_names[i], sizeof node_names[i], "node-%04d", i);
        names[i] = node_names[i];
    }
    gh_topology_add_job(t, job_name, names, NODES, RPN);
    return t;
}

static bool with_comm; /* --comm: start-up configuration */

static void step_signal(struct gh_signal *s, int rank, long step, double ms, int64_t ts)
{
    gh_signal_init(s);
    s->kind = GH_KIND_STEP;
    s->source = GH_SRC_TELEMETRY;
    s->ts_ns = ts;
    s->node = node_names[rank / RPN];
    s->gpu = rank % RPN;
    s->job = job_name;
    s->has_rank = true;
    s->rank = rank;
    s->has_step = true;
    s->step = step;
    s->step_ms = ms;
    if (with_comm) {
        s->has_comm_ms = true;
        s->comm_ms = 0.15 * ms;
    }
}

/* One second of a live-like stream, built into batch (caller-owned strings,
 * so the engine can steal them, as it does from the JSON codec). */
static size_t build_second(struct gh_signal *batch, long st, int64_t ts, uint64_t *rng)
{
    size_t n = 0;
    for (int r = 0; r < RANKS; r++) {
        struct gh_signal *s = &batch[n++];
        step_signal(s, r, st, 1000.0 * (1 + 0.03 * gauss(rng)), ts + r * 1000);
        s->node = strdup(node_names[r / RPN]);
        s->job = strdup(job_name);
        if (r == 0) {
            s->has_loss = true;
            s->loss = 2.0 + 1.0 / (1 + st);
        }
    }
    /* Every 10 s: a thermal and a power reading per GPU, a NIC counter per node. */
    if (st % 10 == 0)
        for (int g = 0; g < RANKS; g++) {
            for (int k = 0; k < 2; k++) {
                struct gh_signal *s = &batch[n++];
                gh_signal_init(s);
                s->kind = k ? GH_KIND_POWER : GH_KIND_THERMAL;
                s->source = GH_SRC_NVML;
                s->ts_ns = ts + 500000 + g * 2 + k;
                s->node = strdup(node_names[g / RPN]);
                s->gpu = g % RPN;
                s->celsius = 70 + 5 * uniform(rng);
                s->watts = 650;
            }
            if (g % RPN == 0) {
                struct gh_signal *s = &batch[n++];
                gh_signal_init(s);
                s->kind = GH_KIND_NIC;
                s->source = GH_SRC_HOST;
                s->ts_ns = ts + 600000 + g;
                s->node = strdup(node_names[g / RPN]);
                s->device = strdup("mlx5_0");
                s->has_port = true;
                s->port = 1;
                s->counter = strdup("symbol_error");
                s->has_count = true;
                s->count = st / 10;
            }
        }
    if (st % 100 == 0) {
        struct gh_signal *s = &batch[n++];
        gh_signal_init(s);
        s->kind = GH_KIND_CHECKPOINT;
        s->source = GH_SRC_TELEMETRY;
        s->ts_ns = ts + 700000;
        s->job = strdup(job_name);
        s->has_step = true;
        s->step = st;
        s->path = strdup("s3://ckpt/bench");
    }
    return n;
}

/* 1 + 2: throughput and memory. steal: hand the engine the decoded signals
 * (the controller's path); else the engine copies borrowed signals. */
static void throughput(long steps, bool steal)
{
    struct counts c = {0, 0, -1, 0};
    struct gh_topology *t = topology();
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg); /* live: 2 s reorder window */
    struct gh_signal *batch = calloc(RANKS * 4 + 16, sizeof *batch);
    struct mallinfo2 m0 = mallinfo2();
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &cfg, on_incident, &c, NULL);
    gh_topology_free(t);
    uint64_t rng = 7;
    int64_t t0 = 1795935600LL * GH_NS_PER_S;
    long n = 0;
    double engine_s = 0;
    for (long st = 0; st < steps; st++) {
        c.current_step = st;
        int64_t ts = t0 + st * GH_NS_PER_S;
        size_t k = build_second(batch, st, ts, &rng);
        double a = now_s();
        for (size_t i = 0; i < k; i++) {
            if (steal)
                gh_engine_ingest_steal(e, &batch[i], batch[i].ts_ns, NULL);
            else
                gh_engine_ingest(e, &batch[i], batch[i].ts_ns, NULL);
        }
        gh_engine_tick(e, ts + 999 * GH_NS_PER_MS);
        engine_s += now_s() - a;
        for (size_t i = 0; i < k; i++)
            gh_signal_clear(&batch[i]);
        n += (long)k;
    }
    double a = now_s();
    gh_engine_finish(e, INT64_MAX);
    engine_s += now_s() - a;
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    struct mallinfo2 m1 = mallinfo2();
    printf("throughput (%s) %.2f M signals/s (%ld signals, %.2f s in the engine, one core; %ld incidents)\n",
           steal ? "steal" : "copy ", (double)n / engine_s / 1e6, n, engine_s, c.incidents);
    if (steal) {
        printf("memory               %.0f KiB engine total (%zu B accounted); heap delta %.0f KiB in use, "
               "%.0f KiB footprint (with malloc's free chunks)\n",
               (double)es.bytes / 1024, es.bytes, (double)(m1.uordblks - m0.uordblks) / 1024,
               ((double)(m1.arena + m1.hblkhd) - (double)(m0.arena + m0.hblkhd)) / 1024);
        printf("memory per GPU/rank  %.0f B per tracked GPU = per rank here (%d GPUs, %d ranks); "
               "%.0f B without the dead entries pooled for reuse\n",
               (double)(m1.uordblks - m0.uordblks) / RANKS, RANKS, RANKS,
               ((double)(m1.uordblks - m0.uordblks) - (double)es.timeline.pooled_bytes) / RANKS);
        printf("                     of which detectors %.0f B/rank, timeline %.0f B/GPU\n",
               (double)es.detector_bytes / RANKS, (double)es.timeline.bytes / RANKS);
        printf("timeline             %llu entries live, %llu pooled for reuse, %zu shared names\n",
               (unsigned long long)es.timeline.entries_live, (unsigned long long)es.timeline.pooled,
               es.timeline.names);
    }
    gh_engine_free(e);
    free(batch);
}

/* Runs one job of RANKS ranks for `steps` steps, the rank `slow_rank` (or
 * none when < 0) slowed by factor from step `onset`; returns the counts. */
static struct counts straggler_run(uint64_t seed, int slow_rank, double factor, long onset,
                                   long steps)
{
    struct counts c = {0, 0, -1, 0};
    struct gh_topology *t = topology();
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &cfg, on_incident, &c, NULL);
    gh_topology_free(t);
    int64_t t0 = 1795935600LL * GH_NS_PER_S;
    for (long st = 0; st < steps; st++) {
        c.current_step = st;
        int64_t ts = t0 + st * GH_NS_PER_S;
        for (int r = 0; r < RANKS; r++) {
            double f = r == slow_rank && st >= onset ? factor : 1.0;
            struct gh_signal s;
            step_signal(&s, r, st, 1000.0 * (1 + 0.03 * gauss(&seed)) * f, ts + r * 1000);
            gh_engine_ingest(e, &s, s.ts_ns, NULL);
        }
        gh_engine_tick(e, ts + 999 * GH_NS_PER_MS);
        if (slow_rank >= 0 && c.stragglers)
            break;
    }
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
    return c;
}

/* 5: microseconds per step of a job declared with nodes x 8 ranks of which
 * 64, spread over the job, report each step. */
static double sparse_run(int nodes, long steps)
{
    char(*names)[16] = calloc((size_t)nodes, sizeof *names);
    const char **np = calloc((size_t)nodes, sizeof *np);
    if (!names || !np) {
        free(names);
        free(np);
        return NAN;
    }
    for (int i = 0; i < nodes; i++) {
        snprintf(names[i], sizeof names[i], "s-%05d", i);
        np[i] = names[i];
    }
    struct gh_topology *t = gh_topology_new();
    gh_topology_add_job(t, "bench/sparse", np, (size_t)nodes, RPN);
    struct counts c = {0, 0, -1, 0};
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &cfg, on_incident, &c, NULL);
    gh_topology_free(t);
    uint64_t seed = 99;
    int stride = nodes * RPN / 64;
    int64_t t0 = 1795935600LL * GH_NS_PER_S;
    double a = now_s();
    for (long st = 0; st < steps; st++) {
        int64_t ts = t0 + st * GH_NS_PER_S;
        for (int k = 0; k < 64; k++) {
            int r = k * stride;
            struct gh_signal sg;
            gh_signal_init(&sg);
            sg.kind = GH_KIND_STEP;
            sg.source = GH_SRC_TELEMETRY;
            sg.ts_ns = ts + k * 1000;
            sg.node = names[r / RPN];
            sg.gpu = r % RPN;
            sg.job = "bench/sparse";
            sg.has_rank = sg.has_step = true;
            sg.rank = r;
            sg.step = st;
            sg.step_ms = 1000.0 * (1 + 0.03 * gauss(&seed));
            gh_engine_ingest(e, &sg, sg.ts_ns, NULL);
        }
        gh_engine_tick(e, ts + 999 * GH_NS_PER_MS);
    }
    double us = (now_s() - a) * 1e6 / (double)steps;
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
    free(names);
    free(np);
    return us;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool quick = false, only_throughput = false, steal = true, copy = true;
    for (int i = 1; i < argc; i++) {
        quick |= strcmp(argv[i], "--quick") == 0;
        with_comm |= strcmp(argv[i], "--comm") == 0;
        only_throughput |= strcmp(argv[i], "--throughput-only") == 0;
        if (strcmp(argv[i], "--steal-only") == 0)
            only_throughput = true, copy = false;
        if (strcmp(argv[i], "--copy-only") == 0)
            only_throughput = true, steal = false;
    }
    printf("gpuheal engine benchmark (%d ranks, %d per node)\n", RANKS, RPN);
    if (steal)
        throughput(quick ? 300 : 2000, true);
    if (copy)
        throughput(quick ? 300 : 2000, false);
    if (only_throughput)
        return 0;

    int trials = quick ? 5 : 20;
    long delays[64];
    int missed = 0;
    for (int i = 0; i < trials; i++) {
        struct counts c = straggler_run(1000 + (uint64_t)i, 517, 1.10, 100, 400);
        delays[i] = c.first_straggler_step >= 0 ? c.first_straggler_step - 100 : 9999;
        missed += c.first_straggler_step < 0;
    }
    qsort(delays, (size_t)trials, sizeof delays[0], cmp_long);
    printf("straggler delay      median %ld steps, worst %ld, missed %d of %d (1 rank 10%% slow, 3%% jitter)\n",
           delays[trials / 2], delays[trials - 1], missed, trials);

    long rank_steps = 0, alarms = 0;
    int runs = quick ? 1 : 10;
    for (int i = 0; i < runs; i++) {
        long steps = 1000;
        struct counts c = straggler_run(5000 + (uint64_t)i, -1, 1.0, 0, steps);
        rank_steps += steps * RANKS;
        alarms += c.incidents;
    }
    printf("false alarms         %.2f per 10^6 healthy rank-steps (%ld incidents in %.1f M rank-steps)\n",
           (double)alarms * 1e6 / (double)rank_steps, alarms, (double)rank_steps / 1e6);

    long sparse_steps = quick ? 500 : 5000;
    double small = sparse_run(64 / RPN, sparse_steps), large = sparse_run(65536 / RPN, sparse_steps);
    printf("sparse reports       %.1f us per step with 64 of 65,536 declared ranks reporting, "
           "%.1f us for a 64-rank job\n", large, small);
    return 0;
}
