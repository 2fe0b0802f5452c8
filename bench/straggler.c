/* straggler.c (bench) - false alarms and detection delay of the straggler
 * detector under realistic jitter; figures only, never pass/fail.
 *   For each jitter profile: healthy rank-steps (256 ranks = 32 nodes x 8
 *   GPUs, 1 s steps) counting every incident raised (a false alarm), then
 *   one GPU made `--slow` (default 6%) slower from step 100, over several
 *   seeds, reporting the delay from onset to the incident in steps and
 *   seconds.
 * Usage: straggler [--quick] [--slow FRACTION] [--steps N]
 * Profiles: Gaussian 0.5/1/2/3%; 1% with heavy tails (1% of rank-steps
 * +5..40%); 1% with per-node correlated jitter and fixed per-rank offsets
 * up to +-1%; 1% with a whole-job hiccup (+30%) every 97 steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define NODES 32
#define RPN 8
#define RANKS (NODES * RPN)

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(uint64_t *s) { return sqrt(-2.0 * log(uniform(s))) * cos(2.0 * M_PI * uniform(s)); }

struct profile {
    const char *name;
    double jitter, tail_p, node_jitter, offset;
    int hiccup_every;
};

static const struct profile PROFILES[] = {
    {"gaussian 0.5%", 0.005, 0, 0, 0, 0},
    {"gaussian 1%", 0.01, 0, 0, 0, 0},
    {"gaussian 2%", 0.02, 0, 0, 0, 0},
    {"gaussian 3%", 0.03, 0, 0, 0, 0},
    {"1% + heavy tails", 0.01, 0.01, 0, 0, 0},
    {"1% + node-correlated + offsets", 0.01, 0, 0.01, 0.01, 0},
    {"1% + job hiccups", 0.01, 0, 0, 0, 97},
};

struct counts {
    long incidents;
    long current_step;
    long first_step;
};

static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct counts *c = ctx;
    (void)inc;
    if (c->incidents++ == 0)
        c->first_step = c->current_step;
}

static char NAMES[NODES][16];

static struct gh_topology *topology(void)
{
    const char *np[NODES];
    for (int i = 0; i < NODES; i++) {
        snprintf(NAMES[i], sizeof NAMES[i], "h100-%03d", i);
        np[i] = NAMES[i];
    }
    struct gh_topology *t = gh_topology_new();
    gh_topology_add_job(t, "bench/llm", np, NODES, RPN);
    return t;
}

static void step_signal(struct gh_signal *s, int rank, long step, double ms, int64_t ts)
{
    gh_signal_init(s);
    s->kind = GH_KIND_STEP;
    s->source = GH_SRC_TELEMETRY;
    s->ts_ns = ts;
    gh_signal_set_str(&s->node, NAMES[rank / RPN], strlen(NAMES[rank / RPN]));
    s->gpu = rank % RPN;
    gh_signal_set_str(&s->job, "bench/llm", 9);
    s->has_rank = true;
    s->rank = rank;
    s->has_step = true;
    s->step = step;
    s->step_ms = ms;
}

/* One run: `steps` steps; rank slow_rank (none when < 0) `factor` slower
 * from step `onset`. Stops at the first incident when a rank is slow. */
static struct counts run(const struct profile *p, uint64_t seed, int slow_rank, double factor,
                         long onset, long steps)
{
    struct counts c = {0, 0, -1};
    struct gh_topology *t = topology();
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &cfg, on_incident, &c, NULL);
    gh_topology_free(t);
    double off[RANKS], nodej[NODES];
    for (int r = 0; r < RANKS; r++)
        off[r] = p->offset * (2 * uniform(&seed) - 1);
    int64_t t0 = 1795935600LL * GH_NS_PER_S;
    for (long st = 0; st < steps; st++) {
        c.current_step = st;
        int64_t ts = t0 + st * GH_NS_PER_S;
        for (int n = 0; n < NODES; n++)
            nodej[n] = p->node_jitter * gauss(&seed);
        double hic = p->hiccup_every && st % p->hiccup_every == 0 ? 1.3 : 1.0;
        for (int r = 0; r < RANKS; r++) {
            double f = (1 + off[r]) * (1 + p->jitter * gauss(&seed) + nodej[r / RPN]) * hic;
            if (p->tail_p > 0 && uniform(&seed) < p->tail_p)
                f *= 1.05 + 0.35 * uniform(&seed);
            if (r == slow_rank && st >= onset)
                f *= factor;
            struct gh_signal s;
            step_signal(&s, r, st, 1000.0 * f, ts + r * 1000);
            gh_engine_ingest_steal(e, &s, s.ts_ns, NULL);
            gh_signal_clear(&s);
        }
        gh_engine_tick(e, ts + 999 * GH_NS_PER_MS);
        if (slow_rank >= 0 && c.incidents)
            break;
    }
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
    return c;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool quick = false;
    double slow = 0.06;
    long steps = 4000; /* x 256 ranks = 1.02 M rank-steps per profile */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--slow") == 0 && i + 1 < argc)
            slow = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: straggler [--quick] [--slow FRACTION] [--steps N]\n");
            return 2;
        }
    }
    if (quick)
        steps = 400;
    int seeds = quick ? 3 : 10;
    printf("%-32s %14s %12s %28s\n", "profile", "rank-steps", "false alarms",
           "delay, 1 GPU slower (steps = s)");
    for (size_t p = 0; p < sizeof PROFILES / sizeof PROFILES[0]; p++) {
        struct counts h = run(&PROFILES[p], 1000 + p, -1, 1, 0, steps);
        long d[16];
        int missed = 0;
        for (int k = 0; k < seeds; k++) {
            struct counts c = run(&PROFILES[p], 77 + (uint64_t)k, 77 + k, 1 + slow, 100, 400);
            d[k] = c.first_step >= 0 ? c.first_step - 100 : 9999;
            missed += c.first_step < 0;
        }
        qsort(d, (size_t)seeds, sizeof d[0], cmp_long); /* the missed (9999) sort last */
        int found = seeds - missed;
        char delay[64];
        if (found == 0)
            snprintf(delay, sizeof delay, "missed %d of %d", missed, seeds);
        else
            snprintf(delay, sizeof delay, "median %ld, worst %ld, missed %d/%d", d[found / 2],
                     d[found - 1], missed, seeds);
        printf("%-32s %14ld %12ld %28s\n", PROFILES[p].name, steps * RANKS, h.incidents, delay);
        fflush(stdout);
    }
    printf("(%.0f%% slower GPU from step 100, 1 s steps, %d seeds, 300 steps given to find it; "
           "median and worst over the seeds that found it)\n",
           slow * 100, seeds);
    return 0;
}
