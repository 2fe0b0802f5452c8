/* scenario_gen.c - `gpuheal scenario gen`: large synthetic scenarios (e.g.
 * 1,024 ranks x 10,000 steps with one chosen fault) as JSON lines on stdout,
 * with the incidents a correct engine should decide written by --expect.
 * Deterministic for a given --seed. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "common/timeutil.h"

struct gen {
    int ranks, rpn, nodes;
    long steps, fault_step, ckpt_every;
    int fault_rank;
    double step_ms, jitter, slow;
    uint64_t rng;
    const char *fault, *job;
    int64_t t0;
    FILE *out;
};

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0; }

static double gauss(uint64_t *s)
{
    return sqrt(-2.0 * log(uniform(s))) * cos(2.0 * M_PI * uniform(s));
}

static const char *node_name(int n, char *buf, size_t cap)
{
    snprintf(buf, cap, "node-%04d", n);
    return buf;
}

static void ts(int64_t ns, char *buf) { gh_time_format_rfc3339(ns, buf, GH_RFC3339_MAX); }

static bool is(const struct gen *g, const char *f) { return strcmp(g->fault, f) == 0; }

static void header(const struct gen *g)
{
    char n[32];
    fprintf(g->out, "{\"scenario\":\"gen-%s-%dr-%lds\",\"nodes\":[", g->fault, g->ranks, g->steps);
    for (int i = 0; i < g->nodes; i++)
        fprintf(g->out, "%s\"%s\"", i ? "," : "", node_name(i, n, sizeof n));
    fprintf(g->out, "],\"gpus_per_node\":%d,\"jobs\":[{\"name\":\"%s\",\"nodes\":[", g->rpn, g->job);
    for (int i = 0; i < g->nodes; i++)
        fprintf(g->out, "%s\"%s\"", i ? "," : "", node_name(i, n, sizeof n));
    fprintf(g->out, "],\"ranks_per_node\":%d}]}\n", g->rpn);
}

static void pod_failures(const struct gen *g, int64_t at, const char *msg)
{
    char t[GH_RFC3339_MAX], n[32];
    for (int r = 0; r < g->ranks; r++) {
        ts(at + (int64_t)r * 1000, t);
        fprintf(g->out,
                "{\"ts\":\"%s\",\"node\":\"%s\",\"source\":\"kube\",\"kind\":\"pod_failed\","
                "\"namespace\":\"gen\",\"pod\":\"worker-%d\",\"job\":\"%s\",\"reason\":\"Error\","
                "\"exit_code\":1,\"msg\":\"%s\"}\n",
                t, node_name(r / g->rpn, n, sizeof n), r, g->job, msg);
    }
}

static int generate(struct gen *g)
{
    char t[GH_RFC3339_MAX], n[32];
    header(g);
    int64_t step_ns = (int64_t)(g->step_ms * 1e6);
    int fault_node = g->fault_rank / g->rpn;
    bool stopped = false;
    for (long s = 0; s < g->steps && !stopped; s++) {
        int64_t at = g->t0 + s * step_ns;
        bool after = s >= g->fault_step;
        double loss = 2.0 + 8.0 * exp(-(double)s / 2000.0);
        if (is(g, "sdc-loss") && after)
            loss *= 7.0;
        for (int r = 0; r < g->ranks; r++) {
            double f = 1.0;
            if (after && ((is(g, "straggler") && r == g->fault_rank) ||
                          (is(g, "slow-node") && r / g->rpn == fault_node) || is(g, "job-slow")))
                f = g->slow;
            double ms = g->step_ms * (1.0 + g->jitter * gauss(&g->rng)) * f;
            if (ms < 1)
                ms = 1;
            ts(at + (int64_t)r * 1000, t);
            fprintf(g->out,
                    "{\"ts\":\"%s\",\"node\":\"%s\",\"gpu\":%d,\"source\":\"telemetry\",\"kind\":\"step\","
                    "\"job\":\"%s\",\"rank\":%d,\"step\":%ld,\"step_ms\":%.3f",
                    t, node_name(r / g->rpn, n, sizeof n), r % g->rpn, g->job, r, s, ms);
            if (r == 0)
                fprintf(g->out, ",\"loss\":%.5f", loss);
            fputs("}\n", g->out);
        }
        if (is(g, "sdc-checksum") && s % 10 == 0)
            for (int rep = 0; rep < g->nodes; rep++) {
                ts(at + step_ns / 2 + rep * 1000, t);
                uint64_t v = (uint64_t)s * 2654435761u;
                if (after && rep == fault_node)
                    v ^= 0xdeadbeefULL;
                fprintf(g->out,
                        "{\"ts\":\"%s\",\"node\":\"%s\",\"gpu\":0,\"source\":\"telemetry\","
                        "\"kind\":\"replica_checksum\",\"job\":\"%s\",\"step\":%ld,\"rank\":%d,"
                        "\"replica\":%d,\"value\":\"%016" PRIx64 "\"}\n",
                        t, node_name(rep, n, sizeof n), g->job, s, rep * g->rpn, rep, v);
            }
        if (g->ckpt_every > 0 && s > 0 && s % g->ckpt_every == 0) {
            ts(at + step_ns * 3 / 4, t);
            fprintf(g->out,
                    "{\"ts\":\"%s\",\"source\":\"telemetry\",\"kind\":\"checkpoint\",\"job\":\"%s\","
                    "\"step\":%ld,\"path\":\"s3://ckpt/gen/step-%ld\",\"state\":\"saved\"}\n",
                    t, g->job, s, s);
        }
        if (s == g->fault_step) {
            int64_t ft = at + step_ns / 3;
            ts(ft, t);
            node_name(fault_node, n, sizeof n);
            if (is(g, "xid79")) {
                fprintf(g->out,
                        "{\"ts\":\"%s\",\"node\":\"%s\",\"gpu\":%d,\"source\":\"kmsg\",\"kind\":\"xid\","
                        "\"code\":79,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\"}\n",
                        t, n, g->fault_rank % g->rpn);
                pod_failures(g, ft + 600 * GH_NS_PER_S, "NCCL watchdog timeout: collective operation timed out");
                stopped = true;
            } else if (is(g, "nic-flap")) {
                fprintf(g->out,
                        "{\"ts\":\"%s\",\"node\":\"%s\",\"source\":\"host\",\"kind\":\"nic\","
                        "\"device\":\"mlx5_0\",\"port\":1,\"counter\":\"link_downed\",\"count\":1,\"state\":\"down\"}\n",
                        t, n);
                ts(ft + 2 * GH_NS_PER_S, t);
                fprintf(g->out,
                        "{\"ts\":\"%s\",\"node\":\"%s\",\"source\":\"host\",\"kind\":\"nic\","
                        "\"device\":\"mlx5_0\",\"port\":1,\"counter\":\"link_downed\",\"count\":1,\"state\":\"up\"}\n",
                        t, n);
            } else if (is(g, "app")) {
                pod_failures(g, ft, "Traceback (most recent call last): ValueError: bad batch");
                stopped = true;
            }
        }
    }
    return ferror(g->out) ? 1 : 0;
}

static int write_expect(const struct gen *g, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    char n[32];
    node_name(g->fault_rank / g->rpn, n, sizeof n);
    fprintf(f, "{\"description\":\"gpuheal scenario gen --fault %s --ranks %d --steps %ld\",\"incidents\":[", g->fault,
            g->ranks, g->steps);
    if (is(g, "straggler"))
        fprintf(f, "{\"class\":\"straggler\",\"node\":\"%s\",\"gpu\":%d}", n, g->fault_rank % g->rpn);
    else if (is(g, "slow-node"))
        fprintf(f, "{\"class\":\"straggler\",\"node\":\"%s\"}", n);
    else if (is(g, "xid79"))
        fprintf(f, "{\"class\":\"gpu_hardware\",\"node\":\"%s\",\"actions_include\":[\"isolate_node\"]}", n);
    else if (is(g, "sdc-checksum"))
        fprintf(f, "{\"class\":\"silent_data_corruption\",\"node\":\"%s\"}", n);
    else if (is(g, "sdc-loss"))
        fprintf(f, "{\"class\":\"silent_data_corruption\",\"node\":null}");
    else if (is(g, "nic-flap"))
        fprintf(f, "{\"class\":\"network\",\"node\":\"%s\",\"actions_include\":[\"retry_in_place\"]}", n);
    else if (is(g, "app"))
        fprintf(f, "{\"class\":\"application\",\"node\":null}");
    fprintf(f, "]}\n");
    return fclose(f) ? 1 : 0;
}

static const char *const faults[] = {"none", "straggler", "slow-node", "job-slow", "xid79",
                                     "sdc-checksum", "sdc-loss", "nic-flap", "app"};

int gh_scenario_gen(int argc, char **argv);
int gh_scenario_gen(int argc, char **argv)
{
    struct gen g = {.ranks = 1024, .rpn = 8, .steps = 10000, .fault_step = -1, .ckpt_every = 500,
                    .fault_rank = -1, .step_ms = 1000, .jitter = 0.03, .slow = 1.10, .rng = 1,
                    .fault = "none", .job = "gen/llm", .t0 = 1795935600LL * GH_NS_PER_S, .out = stdout};
    const char *expect = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("usage: gpuheal scenario gen [--ranks N] [--ranks-per-node N] [--steps N]\n"
                   "         [--fault none|straggler|slow-node|job-slow|xid79|sdc-checksum|sdc-loss|nic-flap|app]\n"
                   "         [--fault-step N] [--fault-rank N] [--slow FACTOR] [--jitter SIGMA]\n"
                   "         [--step-ms MS] [--checkpoint-every N] [--seed N] [--expect FILE]\n"
                   "Writes a synthetic scenario to stdout (defaults: 1024 ranks, 8 per node,\n"
                   "10000 steps of 1000 ms with 3%% Gaussian jitter, no fault; a fault starts at\n"
                   "the middle step on the middle rank; --slow 1.10). --expect writes the\n"
                   "incidents a correct engine decides, for `gpuheal scenario score`.\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "gpuheal scenario gen: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--ranks") == 0)
            g.ranks = (int)strtol(v, &end, 10);
        else if (strcmp(a, "--ranks-per-node") == 0)
            g.rpn = (int)strtol(v, &end, 10);
        else if (strcmp(a, "--steps") == 0)
            g.steps = strtol(v, &end, 10);
        else if (strcmp(a, "--fault-step") == 0)
            g.fault_step = strtol(v, &end, 10);
        else if (strcmp(a, "--fault-rank") == 0)
            g.fault_rank = (int)strtol(v, &end, 10);
        else if (strcmp(a, "--slow") == 0)
            g.slow = strtod(v, &end);
        else if (strcmp(a, "--jitter") == 0)
            g.jitter = strtod(v, &end);
        else if (strcmp(a, "--step-ms") == 0)
            g.step_ms = strtod(v, &end);
        else if (strcmp(a, "--checkpoint-every") == 0)
            g.ckpt_every = strtol(v, &end, 10);
        else if (strcmp(a, "--seed") == 0)
            g.rng = strtoull(v, &end, 10);
        else if (strcmp(a, "--expect") == 0)
            expect = v, end = (char *)v + strlen(v);
        else if (strcmp(a, "--fault") == 0) {
            g.fault = NULL;
            for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++)
                if (strcmp(v, faults[k]) == 0)
                    g.fault = faults[k];
            if (!g.fault) {
                fprintf(stderr, "gpuheal scenario gen: unknown fault \"%s\"\n", v);
                return 2;
            }
            end = (char *)v + strlen(v);
        } else {
            fprintf(stderr, "gpuheal scenario gen: unknown option \"%s\"\n", a);
            return 2;
        }
        if (!end || *end) {
            fprintf(stderr, "gpuheal scenario gen: %s: \"%s\" is not a number\n", a, v);
            return 2;
        }
    }
    if (g.ranks < 1 || g.ranks > 1000000 || g.rpn < 1 || g.rpn > 1024 || g.steps < 1 ||
        g.step_ms <= 0 || g.jitter < 0 || g.slow <= 0) {
        fprintf(stderr, "gpuheal scenario gen: out-of-range option\n");
        return 2;
    }
    g.nodes = (g.ranks + g.rpn - 1) / g.rpn;
    g.ranks = g.nodes * g.rpn;
    if (g.fault_step < 0)
        g.fault_step = g.steps / 2;
    if (g.fault_rank < 0 || g.fault_rank >= g.ranks)
        g.fault_rank = g.ranks / 2 + 3 < g.ranks ? g.ranks / 2 + 3 : g.ranks - 1;
    if (strcmp(g.fault, "none") == 0 || strcmp(g.fault, "job-slow") == 0)
        g.fault_step = strcmp(g.fault, "none") == 0 ? g.steps : g.fault_step;
    if (expect && write_expect(&g, expect)) {
        fprintf(stderr, "gpuheal scenario gen: %s: cannot write\n", expect);
        return 1;
    }
    return generate(&g);
}
