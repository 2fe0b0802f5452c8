/* preset.c - the simulator's parameters: defaults with their sources, the
 * named presets, checks, and the YAML listing that data/sim-presets.yaml
 * holds a copy of.
 *
 * Sources (tags as in shared/data/failure-rates.yaml: [P] primary, [Q] quoted
 * primary, [S] secondary only, [D] derived here, [A] an assumption of this
 * model with no published figure):
 *  - per-class interruption rates: Llama 3 Table 5 counts over 21,233,664
 *    GPU-hours (arXiv:2407.21783 section 3.3.4) [D from P];
 *  - totals of other clusters: Meta RSC-1/RSC-2 (arXiv:2410.21680) [Q], BLOOM
 *    [P], OPT-175B [Q], Ant Group DLRover blog [P, vendor]; the Llama 3 class
 *    mix is scaled to each total [D];
 *  - detection latencies: ByteRobust (arXiv:2509.16293) [S]; PyTorch NCCL
 *    timeout 600 s [P]; Kubernetes defaults (node-monitor-grace-period 40 s,
 *    not-ready toleration 300 s, CrashLoopBackOff 10 s doubling to 300 s) [P];
 *    manual diagnosis > 30 min (Minder, NSDI'25) [S];
 *  - restart 600 s: Meta u0 5-20 min [Q], MegaScale catch-up <= 15 min [P];
 *  - stragglers: episodes of 10 s .. 10 h (FALCON) [P], slowdown 1.1x
 *    (ByteDance OSDI'25 threshold) .. 3.04x (worker-caused mean) [Q]; rate
 *    [D]: 0.425 of jobs straggle x 0.017 worker-caused x (1 - 1/3.04) ~ 0.5%
 *    of GPU time, spread over 1.2 h mean episodes of one node in 2,048;
 *  - step 6 s: 6 x 405e9 x 16M tokens / (16,384 x 400 TFLOP/s) [D];
 *  - layout: scalable units of 32 nodes, one leaf switch per rail (512 leaves
 *    for 2,048 DGX nodes), NVIDIA DGX SuperPOD reference architecture [P];
 *    4 nodes per rack (its H100 rack layout) [S];
 *  - leaf reboots: 0.051% of ToR switches crash per month, Alibaba HPN
 *    (SIGCOMM'24 section 2.3) [S] = 6.98e-7 per switch-hour [D]; down for
 *    2-6 min [A] (half of the switch failures in Azure's fleet lasted under
 *    6 min: Singh et al., "Surviving switch failures in cloud datacenters",
 *    CCR 2021 [S]);
 *  - noisy rollouts (every upgraded node logs XID 149 NETIR Nonfatal, the
 *    driver's wording, shared/data/kmsg-samples.txt) and misfiring checks
 *    (KernelDeadlock, node-problem-detector's condition, on a quarter of the
 *    nodes): no published rate; one in 60 and one in 90 days [A]. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/daly.h"
#include "sim/sim.h"

static const char *const class_names[GH_SIM_CLASS__COUNT] = {
    "gpu_hard", "hbm_ecc",   "sdc",         "network", "nic",
    "host",     "software",  "hang",        "planned", "straggler",
    "flapping", "link_flap", "leaf_reboot", "rollout", "check_misfire",
};

static const char *const waste_names[GH_SIM_W__COUNT] = {
    "checkpoint", "lost_work", "detection", "restart", "waiting_for_nodes", "straggler_slowdown",
};

const char *gh_sim_class_name(enum gh_sim_class c)
{
    return (unsigned)c < GH_SIM_CLASS__COUNT ? class_names[c] : "?";
}

int gh_sim_class_from_name(const char *name)
{
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
        if (strcmp(name, class_names[i]) == 0)
            return i;
    return -1;
}

const char *gh_sim_waste_name(enum gh_sim_waste w)
{
    return (unsigned)w < GH_SIM_W__COUNT ? waste_names[w] : "?";
}

/* Llama 3 Table 5, per GPU-hour [D from P] (shared/data/failure-rates.yaml). */
static const double llama3_rates[GH_SIM_CLASS__COUNT] = {
    [GH_SIM_GPU_HARD] = 8.95e-6,  /* faulty GPU 148 + SRAM 19 + GSP 17 + thermal 6 */
    [GH_SIM_HBM_ECC] = 3.39e-6,   /* HBM3 72 */
    [GH_SIM_SDC] = 2.83e-7,       /* 6 */
    [GH_SIM_NETWORK] = 1.65e-6,   /* switch/cable 35 */
    [GH_SIM_NIC] = 3.30e-7,       /* 7 */
    [GH_SIM_HOST] = 2.169e-6,     /* host hardware 14 (6.59e-7) + unplanned maintenance 32 (1.51e-6) */
    [GH_SIM_SOFTWARE] = 2.64e-6,  /* software bug 54 + dependency 2 */
    [GH_SIM_HANG] = 3.30e-7,      /* NCCL watchdog timeouts 7 */
    [GH_SIM_PLANNED] = 2.21e-6,   /* planned 47 */
    [GH_SIM_STRAGGLER] = 5e-6,    /* per node-hour [D], see above */
    [GH_SIM_FLAPPING] = 0.01,     /* per flapping node-hour [A]: one failure in ~4 days */
    [GH_SIM_LINK_FLAP] = 0.002,   /* per node-hour [A]; Alibaba HPN sees 5K-60K flaps a day [S] */
};
#define LLAMA3_UNEXPECTED 1.9742e-5 /* sum of the unexpected classes above */

/* Where each rate comes from (the YAML listing's comments). */
static const char *const rate_notes[GH_SIM_CLASS__COUNT] = {
    [GH_SIM_GPU_HARD] = "[D] Llama 3: faulty GPU 148 + SRAM 19 + GSP 17 + thermal 6",
    [GH_SIM_HBM_ECC] = "[D] Llama 3: HBM3 72",
    [GH_SIM_SDC] = "[D] Llama 3: silent data corruption 6",
    [GH_SIM_NETWORK] = "[D] Llama 3: switch/cable 35",
    [GH_SIM_NIC] = "[D] Llama 3: NIC 7",
    [GH_SIM_HOST] = "[D] Llama 3: host hardware 14 + unplanned maintenance 32",
    [GH_SIM_SOFTWARE] = "[D] Llama 3: software bug 54 + dependency 2",
    [GH_SIM_HANG] = "[D] Llama 3: NCCL watchdog timeouts 7",
    [GH_SIM_PLANNED] = "[D] Llama 3: planned 47",
    [GH_SIM_STRAGGLER] = "[D] per node-hour: ByteDance OSDI'25, worker-caused ~0.5% of GPU time",
    [GH_SIM_FLAPPING] = "[A] per flapping node-hour",
    [GH_SIM_LINK_FLAP] = "[A] per node-hour; Alibaba HPN sees 5K-60K flaps/day [S]",
    [GH_SIM_LEAF_REBOOT] =
        "[D] per leaf switch-hour: Alibaba HPN, 0.051% of ToRs crash a month [S]",
    [GH_SIM_ROLLOUT] = "[A] per cluster-hour: a noisy driver/firmware rollout every 60 days",
    [GH_SIM_CHECK_MISFIRE] = "[A] per cluster-hour: a misfiring health check every 90 days",
};

void gh_sim_config_default(struct gh_sim_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->preset, sizeof c->preset, "%s", "llama3-16k");
    c->gpus = 16384;
    c->gpus_per_node = 8;
    c->job_gpus = 0;
    c->spare_fraction = 0.02;       /* [A] */
    c->days = 54;
    c->job_days = 0;
    c->step_s = 6;
    c->ckpt_stall_s = 60;           /* [A] a synchronous save; reliability-numbers 4.2 */
    c->ckpt_interval_s = 0;
    c->restart_s = 600;
    memcpy(c->rate, llama3_rates, sizeof c->rate);
    /* correlated processes, the same in every preset */
    c->rate[GH_SIM_LEAF_REBOOT] = 6.98e-7;           /* per leaf switch-hour [D]: HPN [S] */
    c->rate[GH_SIM_ROLLOUT] = 1.0 / (60 * 24);       /* per cluster-hour [A]: one in 60 days */
    c->rate[GH_SIM_CHECK_MISFIRE] = 1.0 / (90 * 24); /* per cluster-hour [A]: one in 90 days */
    c->rate_scale = 1;
    c->class_mask = (1u << GH_SIM_CLASS__COUNT) - 1;
    c->straggler_slow_min = 1.1;
    c->straggler_slow_max = 3.04;
    c->straggler_dur_min_s = 10;
    c->straggler_dur_max_s = 36000;
    c->step_jitter = 0.03;          /* [A] */
    c->sdc_silent_s = 600;          /* [A] */
    c->sdc_check_s = 300;           /* [A] a weight-hash check across DP replicas every ~40 steps */
    c->sdc_human_s = 6 * 3600.0;    /* [A] loss curves and evals */
    c->sdc_spike = 0.5;             /* [A] harmful SDC shows loss/grad-norm spikes or NaN
                                     * (Altenbernd et al., arXiv:2604.00726; Ma et al., ACL 2025);
                                     * the fraction is not published */
    c->report_s = 60;               /* [A] a sample of the per-step stream, for cost */
    c->flapping_fraction = 0;       /* the Llama 3 counts already include any */
    c->flap_up_max_s = 20;          /* [A] */
    c->nodes_per_rack = 4;          /* DGX SuperPOD H100 rack layout [S] */
    c->nodes_per_leaf = 32;         /* a DGX SuperPOD scalable unit, one leaf per rail [P] */
    c->leaf_down_min_s = 120;       /* [A] reboot; Azure: half of failures < 6 min [S] */
    c->leaf_down_max_s = 360;
    c->rollout_s = 12 * 3600.0;  /* [A] node batches over a working day */
    c->misfire_fraction = 0.25;  /* [A] */
    c->misfire_spread_s = 600;   /* [A] "within minutes" */
    c->misfire_fix_min_s = 3600; /* [A] someone notices, fixes the check and clears it */
    c->misfire_fix_max_s = 6 * 3600.0;
    snprintf(c->misfire_condition, sizeof c->misfire_condition, "%s", "KernelDeadlock");
    c->lat_kmsg_s = 2;
    c->lat_nvml_s = 10;
    c->lat_nic_s = 30;
    c->lat_link_s = 60;
    c->lat_kube_s = 1;              /* [A] */
    c->lat_notready_s = 40;
    c->nccl_timeout_s = 600;
    c->pod_evict_s = 300;
    c->backoff_s = 10;
    c->backoff_max_s = 300;
    c->human_s = 1800;
    c->act_s = 5;                   /* [A] */
    c->replace_fraction = 0.1;      /* [A] */
    c->repair_reset_s = 300;        /* [A] */
    c->repair_reboot_s = 900;       /* [A] */
    c->repair_diag_s = 1800;        /* [A]; Aegis full check < 10 min [S] */
    c->repair_replace_s = 2 * 86400.0; /* hours to days [S] */
    c->repair_host_s = 4 * 3600.0;  /* [A] */
    c->planned_maint_s = 2 * 3600.0;/* [A] */
}

struct preset {
    const char *name, *summary;
    long gpus, job_gpus;
    double days, job_days, total_rate; /* total unexpected rate per GPU-hour: scales the Llama 3 mix */
    double spare_fraction, flapping_fraction, ckpt_interval_s;
};

static const struct preset presets[] = {
    {"llama3-16k", "Llama 3 405B pre-training: 16,384 H100 in one job, 54 days, Table 5 rates",
     16384, 0, 54, 0, LLAMA3_UNEXPECTED, 0.02, 0, 0},
    {"cluster-100k", "100,000 GPUs for 60 days at the Llama 3 rates, in jobs of 16,384 GPUs",
     100000, 16384, 60, 0, LLAMA3_UNEXPECTED, 0.02, 0, 0},
    {"rsc1", "Meta RSC-1 rate (6.50 / 1000 node-days): 16,384 GPUs in 1,024-GPU jobs of 2 days, "
             "1% flapping nodes",
     16384, 1024, 30, 2, 3.39e-5, 0.02, 0.01, 0},
    {"rsc2", "Meta RSC-2 rate (2.34 / 1000 node-days): 8,192 GPUs in 512-GPU jobs of 2 days",
     8192, 512, 30, 2, 1.22e-5, 0.02, 0.01, 0},
    {"bloom", "BLOOM-176B: 384 A100 (48 nodes + 4 spares), 2.2e-5 per GPU-hour, 3-hour checkpoints",
     384, 0, 30, 0, 2.2e-5, 0.0834, 0, 10800},
    {"opt175b", "OPT-175B: 992 A100, 7.4e-5 per GPU-hour (logbook restarts), 60 days",
     992, 0, 60, 0, 7.4e-5, 0.02, 0, 0},
    {"ant-high", "the high end: 1.1e-4 per GPU-hour (Ant Group blog), 1,024 GPUs, 30 days",
     1024, 0, 30, 0, 1.1e-4, 0.02, 0, 0},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

int gh_sim_preset_count(void) { return N_PRESETS; }
const char *gh_sim_preset_name(int i) { return i >= 0 && i < N_PRESETS ? presets[i].name : NULL; }
const char *gh_sim_preset_summary(int i)
{
    return i >= 0 && i < N_PRESETS ? presets[i].summary : NULL;
}

static void apply(const struct preset *p, struct gh_sim_config *c)
{
    gh_sim_config_default(c);
    snprintf(c->preset, sizeof c->preset, "%s", p->name);
    c->gpus = p->gpus;
    c->job_gpus = p->job_gpus;
    c->days = p->days;
    c->job_days = p->job_days;
    c->spare_fraction = p->spare_fraction;
    c->flapping_fraction = p->flapping_fraction;
    c->ckpt_interval_s = p->ckpt_interval_s;
    double k = p->total_rate / LLAMA3_UNEXPECTED;
    for (int i = 0; i <= GH_SIM_PLANNED; i++)
        c->rate[i] = llama3_rates[i] * k;
}

int gh_sim_preset(const char *name, struct gh_sim_config *c, struct gh_err *err)
{
    for (int i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) {
            apply(&presets[i], c);
            return GH_OK;
        }
    return gh_err_set(err, GH_ENOTFOUND, "unknown preset \"%s\" (gpuheal simulate --list-presets)",
                      name);
}

void gh_sim_presets_write_yaml(FILE *f)
{
    fprintf(f, "# sim-presets.yaml - the presets of `gpuheal simulate`, as compiled into\n"
               "# src/sim/preset.c (`gpuheal simulate --print-presets` writes this file; a\n"
               "# test holds them equal). Sources: shared/data/failure-rates.yaml and\n"
               "# reliability-numbers.md; per-class rates are the Llama 3 Table 5 mix\n"
               "# (arXiv:2407.21783) scaled to each cluster's total unexpected rate.\n"
               "# Units: rates per GPU-hour (straggler and link_flap: per node-hour;\n"
               "# flapping: per flapping node-hour; leaf_reboot: per leaf switch-hour;\n"
               "# rollout and check_misfire: per cluster-hour); times in seconds. job_gpus\n"
               "# 0: one job of all the GPUs; job_days 0: jobs run through (else a finished\n"
               "# job's place is taken by a new one on nodes from the pool). leaf_reboot,\n"
               "# rollout and check_misfire are correlated processes: one cause on many\n"
               "# nodes, none of them at fault (sources in src/sim/preset.c).\n"
               "presets:\n");
    for (int i = 0; i < N_PRESETS; i++) {
        struct gh_sim_config c;
        apply(&presets[i], &c);
        fprintf(f, "  - name: %s\n", c.preset);
        fprintf(f, "    summary: \"%s\"\n", presets[i].summary);
        fprintf(f, "    gpus: %ld\n    gpus_per_node: %d\n    job_gpus: %ld\n", c.gpus,
                c.gpus_per_node, c.job_gpus);
        fprintf(f, "    spare_fraction: %.6g\n    days: %.6g\n    job_days: %.6g\n    step_s: %.6g\n",
                c.spare_fraction, c.days, c.job_days, c.step_s);
        char interval[32] = "auto";
        if (c.ckpt_interval_s > 0)
            snprintf(interval, sizeof interval, "%.6g", c.ckpt_interval_s);
        fprintf(f, "    checkpoint_stall_s: %.6g\n    checkpoint_interval_s: %s\n    restart_s: %.6g\n",
                c.ckpt_stall_s, interval, c.restart_s);
        fprintf(f, "    rates:\n");
        for (int k = 0; k < GH_SIM_CLASS__COUNT; k++) {
            char v[64];
            snprintf(v, sizeof v, "%s: %.4g", class_names[k], c.rate[k]);
            fprintf(f, "      %-20s  # %s\n", v, rate_notes[k]);
        }
        fprintf(f, "    straggler: {slowdown: [%.6g, %.6g], duration_s: [%.6g, %.6g], jitter: %.6g}\n",
                c.straggler_slow_min, c.straggler_slow_max, c.straggler_dur_min_s,
                c.straggler_dur_max_s, c.step_jitter);
        fprintf(f, "    sdc: {silent_s: %.6g, human_s: %.6g, check_s: %.6g, spike: %.6g}\n",
                c.sdc_silent_s, c.sdc_human_s, c.sdc_check_s, c.sdc_spike);
        fprintf(f, "    report_s: %.6g\n", c.report_s);
        fprintf(f, "    flapping_fraction: %.6g\n    link_flap_up_max_s: %.6g\n", c.flapping_fraction,
                c.flap_up_max_s);
        fprintf(f, "    layout: {nodes_per_rack: %d, nodes_per_leaf: %d}\n", c.nodes_per_rack,
                c.nodes_per_leaf);
        fprintf(
            f,
            "    correlated: {leaf_down_s: [%.6g, %.6g], rollout_s: %.6g, misfire_fraction: %.6g, "
            "misfire_spread_s: %.6g, misfire_fix_s: [%.6g, %.6g], misfire_condition: %s}\n",
            c.leaf_down_min_s, c.leaf_down_max_s, c.rollout_s, c.misfire_fraction,
            c.misfire_spread_s, c.misfire_fix_min_s, c.misfire_fix_max_s, c.misfire_condition);
        fprintf(f,
                "    detection_s: {kmsg: %.6g, nvml: %.6g, nic: %.6g, link: %.6g, kube: %.6g, "
                "not_ready: %.6g, nccl_timeout: %.6g, pod_evict: %.6g, human: %.6g, act: %.6g}\n",
                c.lat_kmsg_s, c.lat_nvml_s, c.lat_nic_s, c.lat_link_s, c.lat_kube_s,
                c.lat_notready_s, c.nccl_timeout_s, c.pod_evict_s, c.human_s, c.act_s);
        fprintf(f, "    backoff_s: [%.6g, %.6g]\n", c.backoff_s, c.backoff_max_s);
        fprintf(f, "    replace_fraction: %.6g\n", c.replace_fraction);
        fprintf(f,
                "    repair_s: {reset_gpu: %.6g, reboot_node: %.6g, run_diagnostics: %.6g, "
                "replace_node: %.6g, host: %.6g, planned: %.6g}\n",
                c.repair_reset_s, c.repair_reboot_s, c.repair_diag_s, c.repair_replace_s,
                c.repair_host_s, c.planned_maint_s);
    }
}

static long job_gpus_of(const struct gh_sim_config *c)
{
    return c->job_gpus > 0 && c->job_gpus < c->gpus ? c->job_gpus : c->gpus;
}

double gh_sim_job_mtbf_s(const struct gh_sim_config *c)
{
    double per_h = 0, g = (double)job_gpus_of(c);
    for (int i = 0; i <= GH_SIM_PLANNED; i++)
        if (c->class_mask & (1u << i))
            per_h += c->rate[i] * g;
    if (c->class_mask & (1u << GH_SIM_FLAPPING))
        per_h += c->flapping_fraction * (g / c->gpus_per_node) * c->rate[GH_SIM_FLAPPING];
    per_h *= c->rate_scale;
    return per_h > 0 ? 3600.0 / per_h : INFINITY;
}

double gh_sim_interval_s(const struct gh_sim_config *c)
{
    if (c->ckpt_interval_s > 0)
        return c->ckpt_interval_s;
    double m = gh_sim_job_mtbf_s(c), tau = gh_daly_optimum(m, c->ckpt_stall_s);
    if (!isfinite(tau))
        return c->days * 86400.0;
    return tau < 1 ? 1 : tau;
}

int gh_sim_config_check(const struct gh_sim_config *c, struct gh_err *err)
{
    if (c->gpus_per_node < 1 || c->gpus_per_node > 64)
        return gh_err_set(err, GH_EINVAL, "gpus per node must be 1..64");
    if (c->gpus < c->gpus_per_node || c->gpus % c->gpus_per_node)
        return gh_err_set(err, GH_EINVAL, "gpus (%ld) must be a positive multiple of gpus per node (%d)",
                          c->gpus, c->gpus_per_node);
    if (c->job_gpus < 0 || c->job_gpus % c->gpus_per_node)
        return gh_err_set(err, GH_EINVAL, "job gpus (%ld) must be a multiple of gpus per node (%d)",
                          c->job_gpus, c->gpus_per_node);
    double nodes = (double)c->gpus / c->gpus_per_node;
    if (nodes * (1 + c->spare_fraction) + 1 > 65536)
        return gh_err_set(err, GH_EINVAL, "too many nodes (at most 65,536 with spares)");
    if (c->job_gpus > 0 && (double)c->gpus / (double)c->job_gpus > 4096)
        return gh_err_set(err, GH_EINVAL, "too many jobs (at most 4,096)");
    if (!(c->days > 0 && c->days <= 3660))
        return gh_err_set(err, GH_EINVAL, "days must be in (0, 3660]");
    if (!(c->spare_fraction >= 0 && c->spare_fraction <= 1))
        return gh_err_set(err, GH_EINVAL, "spare fraction must be in [0, 1]");
    if (!(c->step_s > 0) || !(c->ckpt_stall_s >= 0) || !(c->ckpt_interval_s >= 0) ||
        !(c->restart_s >= 0) || !(c->job_days >= 0) || !isfinite(c->ckpt_stall_s) ||
        !isfinite(c->restart_s) || !isfinite(c->ckpt_interval_s))
        return gh_err_set(err, GH_EINVAL, "times must be finite and non-negative (step > 0)");
    if (!(c->rate_scale >= 0) || !isfinite(c->rate_scale))
        return gh_err_set(err, GH_EINVAL, "rate scale must be finite and >= 0");
    for (int i = 0; i < GH_SIM_CLASS__COUNT; i++)
        if (!(c->rate[i] >= 0) || !isfinite(c->rate[i]))
            return gh_err_set(err, GH_EINVAL, "rate of %s must be finite and >= 0", class_names[i]);
    if (!(c->straggler_slow_min >= 1 && c->straggler_slow_max >= c->straggler_slow_min &&
          c->straggler_dur_min_s > 0 && c->straggler_dur_max_s >= c->straggler_dur_min_s))
        return gh_err_set(err, GH_EINVAL, "straggler slowdown and duration ranges are invalid");
    if (!(c->replace_fraction >= 0 && c->replace_fraction <= 1))
        return gh_err_set(err, GH_EINVAL, "replace fraction must be in [0, 1]");
    if (!(c->flapping_fraction >= 0 && c->flapping_fraction <= 1))
        return gh_err_set(err, GH_EINVAL, "flapping fraction must be in [0, 1]");
    if (c->nodes_per_rack < 1 || c->nodes_per_leaf < 1)
        return gh_err_set(err, GH_EINVAL, "nodes per rack and per leaf must be >= 1");
    if (!(c->leaf_down_min_s > 0 && c->leaf_down_max_s >= c->leaf_down_min_s &&
          isfinite(c->leaf_down_max_s) && c->rollout_s >= 0 && isfinite(c->rollout_s) &&
          c->misfire_fraction >= 0 && c->misfire_fraction <= 1 && c->misfire_spread_s >= 0 &&
          isfinite(c->misfire_spread_s) && c->misfire_fix_min_s > 0 &&
          c->misfire_fix_max_s >= c->misfire_fix_min_s && isfinite(c->misfire_fix_max_s)))
        return gh_err_set(err, GH_EINVAL, "correlated process parameters are invalid");
    if (!c->misfire_condition[0])
        return gh_err_set(err, GH_EINVAL, "the misfiring check needs a condition name");
    double interval = gh_sim_interval_s(c);
    if (interval / c->step_s > 1e9)
        return gh_err_set(err, GH_EINVAL, "checkpoint interval too long for the step");
    return GH_OK;
}
