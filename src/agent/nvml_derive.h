/* nvml_derive.h - the NVML source's pure half: from one poll's raw sample
 * of a GPU and what earlier polls left (baselines, lost and level states),
 * the signals to emit and the node-local health snapshot. No NVML call, no
 * thread, no lock: the deadline-bound core (nvml.c) fills the samples on
 * its worker thread and calls this from the polling thread. Internal to
 * src/agent/ (and its unit test, test_agent_nvml_derive.c). */
#ifndef GH_AGENT_NVML_DERIVE_H
#define GH_AGENT_NVML_DERIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/level.h"
#include "agent/nvml.h"
#include "agent/nvml_api.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_NVML_MSG_MAX 384 /* a signal's msg */

/* The metrics a poll reads of each GPU (bits of gh_nvml_sample.valid). */
enum gh_nvml_metric {
    GH_NVML_M_TEMP,
    GH_NVML_M_POWER,
    GH_NVML_M_REASONS,
    GH_NVML_M_SBE_VOL,
    GH_NVML_M_DBE_VOL,
    GH_NVML_M_SBE_AGG,
    GH_NVML_M_DBE_AGG,
    GH_NVML_M_REMAP,
    GH_NVML_M_RETIRED_SBE,
    GH_NVML_M_RETIRED_DBE,
    GH_NVML_M_RETIRED_PENDING,
    GH_NVML_M_PCIE_REPLAY,
    GH_NVML_M__COUNT
};
#define GH_NVML_BIT(m) (1u << (m))

/* In nvmlNvLinkErrorCounter_t order. */
enum { GH_NVML_L__COUNT = 4 };

/* What one poll read of one GPU (the core's worker fills it). */
struct gh_nvml_sample {
    uint32_t valid; /* GH_NVML_BIT(metric) read this poll */
    bool lost;      /* a call said GPU_IS_LOST or RESET_REQUIRED */
    nvmlReturn_t lost_rc;
    const char *lost_call; /* static string */
    uint64_t v[GH_NVML_M__COUNT];
    unsigned remap_corr, remap_unc, remap_pending, remap_failure;
    uint8_t link_valid[NVML_NVLINK_MAX_LINKS]; /* bit per link counter */
    uint64_t link[NVML_NVLINK_MAX_LINKS][GH_NVML_L__COUNT];
};

/* What initialisation learned about a GPU; written by the worker during
 * init (and unsupported/handle during polls), read by others only after. */
struct gh_nvml_dev {
    nvmlDevice_t h;         /* NULL when the handle could not be had */
    nvmlReturn_t handle_rc; /* why not */
    char pci[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    bool has_slowdown;
    unsigned slowdown_c;
    bool has_power_limit;
    unsigned power_limit_mw;
    uint32_t links;       /* bit per NVLink that exists */
    uint32_t unsupported; /* worker only: GH_NVML_BIT(metric) said NOT_SUPPORTED */
    uint8_t link_unsupported[NVML_NVLINK_MAX_LINKS];
};

/* What earlier polls left of one GPU: the derivation's memory. */
struct gh_nvml_gpu_state {
    struct gh_nvml_sample base; /* base.valid: which baselines exist */
    bool lost;
    struct gh_level thermal, power; /* level.h */
};

/* Receives one derived signal: fill its node, pci (from the GPU index),
 * counter (may be NULL) and msg (borrowed), emit it and clear it. Returns
 * GH_OK, or GH_ENOMEM when it was dropped. */
typedef int (*gh_nvml_derive_emit_fn)(void *ctx, struct gh_signal *s, const char *counter,
                                      const char *msg);

struct gh_nvml_derive_cfg {
    const struct gh_clock *clock; /* borrowed; ts of the signals, hold-down time */
    double temp_threshold;        /* > 0: fixed; else slowdown - 5 C, else 85 C */
    int64_t holddown_ns;          /* thermal/power re-report hold-down */
    gh_nvml_derive_emit_fn emit;
    void *emit_ctx;
};

/* Compares GPU i's new sample s (borrowed) with its state g (updated:
 * baselines, lost, levels) and emits what changed (see nvml.h for which
 * changes are signals). d: what initialisation learned about the GPU.
 * Returns GH_ENOMEM when a signal was dropped, else GH_OK. */
int gh_nvml_derive(const struct gh_nvml_derive_cfg *cfg, unsigned i, const struct gh_nvml_dev *d,
                   struct gh_nvml_gpu_state *g, const struct gh_nvml_sample *s);

/* GPU i's health snapshot for /metrics and the node-local health from its
 * state g (after gh_nvml_derive) and the sample s: current values from s,
 * counters from the baselines (the last value read, kept across a failed
 * read). Overwrites the fields it knows in *h. */
void gh_nvml_derive_health(const struct gh_nvml_gpu_state *g, const struct gh_nvml_sample *s,
                           struct gh_nvml_gpu_health *h);

/* Starts *s (overwritten) as a signal of `kind` for GPU gpu (-1 = node
 * level), source nvml, ts from cfg->clock. */
void gh_nvml_signal_begin(const struct gh_nvml_derive_cfg *cfg, struct gh_signal *s,
                          enum gh_kind kind, int gpu);
/* Formats msg (at most GH_NVML_MSG_MAX bytes) and hands s to cfg->emit,
 * which clears it; returns what emit returns. Also the NVML core's way to
 * emit (gpu_lost on a hang, the event thread's XIDs). */
int gh_nvml_signal_emitf(const struct gh_nvml_derive_cfg *cfg, struct gh_signal *s,
                         const char *counter, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "NVML_ERROR_GPU_IS_LOST", ...; "NVML_ERROR_?" for unknown values. */
const char *gh_nvml_rc_name(nvmlReturn_t r);

#endif
