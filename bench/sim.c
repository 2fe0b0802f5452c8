/* sim.c - benchmark of `gpuheal simulate`: 100,000 GPUs x 60 days on one
 * core (target <= 10 s), then the policy comparison on the llama3-16k preset
 * (Llama 3 405B: 16,384 GPUs, 54 days, Table 5 rates). Prints figures;
 * never fails on time. Usage: bench/sim [RUNS] (runs per policy, default 5). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sim/sim.h"

static double secs(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 5;
    if (runs < 1)
        runs = 1;
    struct gh_sim_config c;
    struct gh_err err;
    struct gh_sim_result r;
    if (gh_sim_preset("cluster-100k", &c, &err) != GH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_PROCESS_CPUTIME_ID);
    if (gh_sim_run(&c, NULL, 1, 1, &r, &err) != GH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double wall = secs(CLOCK_MONOTONIC) - w0, cpu = secs(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("cluster-100k: %ld GPUs x %g days, policy gpuheal, one run on one core: %.2f s CPU "
           "(%.2f s wall; target <= 10 s)\n",
           c.gpus, c.days, cpu, wall);
    printf("  %.0f interruptions, %.0f incidents, %.0f signals to the engine, ETTR %.4f, goodput %.4f\n\n",
           r.interruptions_total, r.incidents, r.signals, r.ettr, r.goodput);

    if (gh_sim_preset("llama3-16k", &c, &err) != GH_OK)
        return 1;
    printf("llama3-16k: %ld GPUs, %g days, stall %g s, restart %g s, checkpoint interval auto "
           "(Daly: %.0f s), %d runs per policy, seed 1\n\n",
           c.gpus, c.days, c.ckpt_stall_s, c.restart_s, gh_sim_interval_s(&c), runs);
    printf("| policy | ETTR | goodput | interruptions | MTTR (s) | wasted GPU-h | lost work | "
           "detection | restart | straggler | isolations | false | by people | s/run |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const char *names[] = {"k8s-default", "xid-only", "gpuheal"};
    for (int i = 0; i < 3; i++) {
        struct gh_policy *p;
        if (gh_sim_policy_new(names[i], &p, &err) != GH_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        c0 = secs(CLOCK_PROCESS_CPUTIME_ID);
        int rc = gh_sim_run(&c, p, 1, runs, &r, &err);
        cpu = secs(CLOCK_PROCESS_CPUTIME_ID) - c0;
        gh_policy_free(p);
        if (rc != GH_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double wasted = 0;
        for (int w = 0; w < GH_SIM_W__COUNT; w++)
            wasted += r.wasted_gpu_hours[w];
        printf("| %s | %.4f +/- %.4f | %.4f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | "
               "%.1f | %.1f | %.2f |\n",
               names[i], r.ettr, r.ettr_stderr, r.goodput, r.interruptions_total, r.mttr_s, wasted,
               r.wasted_gpu_hours[GH_SIM_W_LOST_WORK], r.wasted_gpu_hours[GH_SIM_W_DETECTION],
               r.wasted_gpu_hours[GH_SIM_W_RESTART], r.wasted_gpu_hours[GH_SIM_W_SLOWDOWN],
               r.isolations, r.false_isolations, r.human_isolations, cpu / runs);
    }
    printf("\nDaly's model for hard failures decided in seconds: %.4f\n", r.daly_ettr);
    return 0;
}
