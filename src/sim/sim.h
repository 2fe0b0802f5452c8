/* sim.h - gpuheal's discrete-event cluster simulator: what-if goodput, policy
 * comparison and checkpoint-interval advice.
 *
 * A cluster of nodes x GPUs (with spares) runs training jobs that checkpoint
 * every tau of compute with a stall delta. Failure processes per class
 * (rates per GPU-hour, from shared/data/failure-rates.yaml) break nodes; the
 * simulated cluster emits the spec's signals (XIDs, lost GPUs, ECC, NIC
 * links, pod failures, NotReady nodes, step telemetry around stragglers,
 * replica checksums for silent data corruption) at simulated times; the real
 * detection engine and policy decide; the simulated actions (isolate, restart
 * from a checkpoint, reset, reboot, replace, diagnose) take simulated time.
 * Kubernetes' own behaviour (pod restarts in place, collective timeouts,
 * NotReady eviction) and a human operator run under every policy.
 *
 * Healthy steady state is modelled analytically: between events a job's
 * progress and checkpoints are computed, not stepped, so 100k GPUs x 60 days
 * runs in seconds. Everything is deterministic for a given seed. */
#ifndef GH_SIM_SIM_H
#define GH_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "engine/policy.h"

/* Failure classes of the model. Rates: per GPU-hour of GPUs in jobs for the
 * interruption classes (gpu_hard .. planned); per node-hour for straggler
 * episodes and benign link flaps; per flapping ("lemon") node-hour for
 * flapping; per leaf switch-hour for leaf reboots; per cluster-hour for
 * rollouts and misfiring checks (they reach the whole fleet). */
enum gh_sim_class {
    GH_SIM_GPU_HARD,  /* faulty GPU, SRAM, GSP, thermal: XID 79/46/119/..., lost GPU */
    GH_SIM_HBM_ECC,   /* HBM uncorrectable ECC, row-remap failure: XID 48/95/64/94, ecc */
    GH_SIM_SDC,       /* silent data corruption: replica checksums disagree after a silent period */
    GH_SIM_NETWORK,   /* switch / cable: an InfiniBand link goes down and stays down */
    GH_SIM_NIC,       /* NIC crash */
    GH_SIM_HOST,      /* host hardware and unplanned host maintenance: node NotReady */
    GH_SIM_SOFTWARE,  /* software / dependency bug: a pod exits with an error */
    GH_SIM_HANG,      /* collective hang with no cause found (NCCL watchdog) */
    GH_SIM_PLANNED,   /* planned maintenance: drained at a checkpoint */
    GH_SIM_STRAGGLER, /* fail-slow episode of one node (gray) */
    GH_SIM_FLAPPING,  /* a flapping node's intermittent failures (gray) */
    GH_SIM_LINK_FLAP, /* a benign link flap: down and up within seconds (noise) */
    /* Correlated processes: one cause, many nodes, none of them at fault.
     * They harm no job by themselves; only what the engine decides about
     * them does (GH_SIM_CORRELATED_FIRST .. GH_SIM_CLASS__COUNT - 1). */
    GH_SIM_LEAF_REBOOT,   /* a leaf switch reboots: one rail down on every node under it */
    GH_SIM_ROLLOUT,       /* a driver or firmware rollout whose nodes log a non-fatal line */
    GH_SIM_CHECK_MISFIRE, /* another agent's health check sets its condition on many nodes */
    GH_SIM_CLASS__COUNT
};
#define GH_SIM_CORRELATED_FIRST GH_SIM_LEAF_REBOOT
#define GH_SIM_CORRELATED_MASK                                                                     \
    ((1u << GH_SIM_LEAF_REBOOT) | (1u << GH_SIM_ROLLOUT) | (1u << GH_SIM_CHECK_MISFIRE))

/* Where job GPU-time that is not productive goes. */
enum gh_sim_waste {
    GH_SIM_W_CHECKPOINT, /* checkpoint stalls */
    GH_SIM_W_LOST_WORK,  /* work since the restored checkpoint, discarded */
    GH_SIM_W_DETECTION,  /* from the fault until a restart begins (timeouts, people, backoff) */
    GH_SIM_W_RESTART,    /* restarts (reschedule + init + reload), failed ones too */
    GH_SIM_W_WAITING,    /* waiting for healthy nodes */
    GH_SIM_W_SLOWDOWN,   /* running slower than healthy (stragglers) */
    GH_SIM_W__COUNT
};

const char *gh_sim_class_name(enum gh_sim_class c);
int gh_sim_class_from_name(const char *name); /* -1 when unknown */
const char *gh_sim_waste_name(enum gh_sim_waste w);

#define GH_SIM_NAME_MAX 48

struct gh_sim_config {
    char preset[GH_SIM_NAME_MAX];
    /* cluster and jobs */
    long gpus;               /* GPUs in jobs (spares come on top) */
    int gpus_per_node;
    long job_gpus;           /* GPUs per job; 0 = one job of all gpus */
    double spare_fraction;   /* spare nodes, as a fraction of the job nodes (rounded up) */
    double days;             /* simulated wall time */
    double job_days;         /* a job's compute; 0 = runs through (else a new job takes its place) */
    double step_s;           /* a training step */
    /* checkpointing and restart */
    double ckpt_stall_s;     /* delta */
    double ckpt_interval_s;  /* tau (compute between checkpoints); 0 = auto (Daly) */
    double restart_s;        /* reschedule + init + reload, once the restart begins */
    /* failure processes (see enum gh_sim_class for units) */
    double rate[GH_SIM_CLASS__COUNT];
    double rate_scale;       /* multiplies every rate */
    uint32_t class_mask;     /* enabled classes, bit 1u << class */
    /* gray failures */
    double straggler_slow_min, straggler_slow_max; /* compute slowdown factor, log-uniform */
    double straggler_dur_min_s, straggler_dur_max_s; /* episode length, log-uniform */
    double step_jitter;      /* relative noise of per-rank compute time */
    double
        sdc_silent_s; /* mean silent period before the bad replica diverges (exponential; 0: at once) */
    double sdc_check_s;      /* the job compares replica checksums this often and ships every
                              * comparison, agreeing or not; 0: only the disagreeing one */
    double sdc_human_s;      /* a person notices corruption (loss, evals) this long after onset */
    double sdc_spike;        /* fraction of corruptions whose onset shows as a loss spike on the
                              * bad GPU's rank (harmful corruption's signature) */
    double report_s;         /* the job's step telemetry (loss included) is sampled this often:
                              * 4 ranks per report; 0: none */
    double flapping_fraction;/* nodes that are flapping ("lemon") nodes */
    double flap_up_max_s;    /* a benign link flap lasts up to this */
    /* where nodes sit (their Node labels name it): racks, and leaf
     * switches of a rail-optimised fabric, one per rail (NIC index) for
     * each group of nodes_per_leaf consecutive nodes (a scalable unit) */
    int nodes_per_rack, nodes_per_leaf;
    /* correlated processes (rates in rate[], see enum gh_sim_class) */
    double leaf_down_min_s, leaf_down_max_s; /* a leaf's rail is down this long, log-uniform */
    double rollout_s;        /* a rollout reaches every node within this, in random order */
    double misfire_fraction; /* a misfiring check sets its condition on this share of nodes ... */
    double misfire_spread_s; /* ... within this ... */
    double misfire_fix_min_s, misfire_fix_max_s; /* ... cleared this long after (log-uniform) */
    char misfire_condition[GH_SIM_NAME_MAX];     /* the condition it sets (node_condition) */
    /* detection latency per source */
    double lat_kmsg_s, lat_nvml_s, lat_nic_s, lat_link_s, lat_kube_s, lat_notready_s;
    double nccl_timeout_s;   /* collective watchdog: a hang becomes pod failures */
    double pod_evict_s;      /* Kubernetes evicts pods this long after NotReady */
    double backoff_s, backoff_max_s; /* pod restart backoff (doubling) */
    double human_s;          /* a person isolates a node that keeps breaking its job */
    double act_s;            /* controller: decision to action (API calls) */
    /* repair */
    double replace_fraction; /* hardware faults a GPU reset or node reboot does not fix */
    double repair_reset_s, repair_reboot_s, repair_diag_s, repair_replace_s;
    double repair_host_s, planned_maint_s;
};

/* The built-in defaults (the llama3-16k preset). */
void gh_sim_config_default(struct gh_sim_config *c);
/* Fills c from the named preset; GH_ENOTFOUND when unknown. */
int gh_sim_preset(const char *name, struct gh_sim_config *c, struct gh_err *err);
int gh_sim_preset_count(void);
const char *gh_sim_preset_name(int i);
const char *gh_sim_preset_summary(int i);
/* Writes every preset as YAML (data/sim-presets.yaml is this output; a test
 * holds them equal). */
void gh_sim_presets_write_yaml(FILE *f);

/* Job MTBF in seconds implied by c's enabled interruption rates (per job). */
double gh_sim_job_mtbf_s(const struct gh_sim_config *c);
/* The checkpoint interval c uses: its own, or Daly's optimum for the job MTBF. */
double gh_sim_interval_s(const struct gh_sim_config *c);
/* Checks c; GH_EINVAL with the reason. */
int gh_sim_config_check(const struct gh_sim_config *c, struct gh_err *err);

/* Policies: "gpuheal" (the built-in default), "xid-only" (hardware XIDs
 * only), "k8s-default" (no rules: Kubernetes and people only). Caller frees
 * with gh_policy_free. GH_ENOTFOUND for another name. */
int gh_sim_policy_new(const char *name, struct gh_policy **out, struct gh_err *err);

struct gh_sim_result {
    double ettr;             /* productive / wall time of jobs, GPU-weighted */
    double goodput;          /* productive GPU-hours / all GPU-hours of the cluster, spares included */
    double mttr_s;           /* mean time from an interruption to running again */
    double job_gpu_hours, cluster_gpu_hours, productive_gpu_hours;
    double interruptions[GH_SIM_CLASS__COUNT];
    double interruptions_total;
    double wasted_gpu_hours[GH_SIM_W__COUNT];
    double wasted_by_class_gpu_hours[GH_SIM_CLASS__COUNT];
    /* ... split by bucket (lost work, detection, restart, waiting; stalls and
     * slowdown belong to no outage) */
    double wasted_class_bucket_gpu_hours[GH_SIM_CLASS__COUNT][GH_SIM_W__COUNT];
    double isolations;       /* node isolations and drains (engine and people) */
    double false_isolations; /* ... of nodes with nothing wrong */
    double false_isolations_correlated; /* ... of those, for a correlated process's signals
                                         * (a cause the node shares, not its own) */
    double false_isolations_by_class[GH_SIM_CLASS__COUNT]; /* ... by the class the simulator
                                                            * gives the incident */
    double cluster_gpu_days; /* every GPU of the cluster, spares included: the base of the
                              * false isolations per 10,000 GPU-days */
    double human_isolations;
    double human_rollbacks;  /* corruption a restart left in place, rolled back by a person */
    double incidents;        /* incidents the engine decided */
    double signals;          /* signals fed to the engine */
    double late_signals;     /* ... that the engine saw out of order (should be 0) */
    double jobs_completed;
    double checkpoint_interval_s;
    double job_mtbf_s;       /* analytic, from the rates */
    double daly_ettr;        /* Daly's model for (MTBF, tau, delta, restart + detection) */
    double ettr_stderr;      /* over runs (0 for one run) */
    int runs;
};

/* Runs the model `runs` times (run i seeded with (seed, i)) with policy
 * (borrowed; NULL = the built-in default) and writes the mean of each figure
 * to *out. GH_EINVAL for a bad config, GH_ENOMEM. */
int gh_sim_run(const struct gh_sim_config *c, const struct gh_policy *policy, uint64_t seed,
               int runs, struct gh_sim_result *out, struct gh_err *err);
/* The same, writing a trace of faults, incidents and actions as JSON lines
 * to trace (borrowed; NULL = none). */
int gh_sim_run_traced(const struct gh_sim_config *c, const struct gh_policy *policy, uint64_t seed,
                      int runs, FILE *trace, struct gh_sim_result *out, struct gh_err *err);

#endif
