/* nvml.h - the agent's NVML source: GPU health counters polled through the
 * NVIDIA Management Library (loaded with dlopen), XID events, and lost or
 * hung GPUs, turned into spec signals (source "nvml").
 *
 * Model
 * - Every NVML call runs on the source's own worker thread. A caller (the
 *   poll thread that gh_nvml_source_start() runs, or a test calling
 *   gh_nvml_source_poll_once()) hands the worker a job and waits at most
 *   opts.deadline_ns. A driver call that does not return in time becomes one
 *   gpu_lost signal whose msg names the call ("NVML call
 *   nvmlDeviceGetTotalEccErrors on GPU 3 did not return within 5.0 s"), and
 *   the caller returns GH_ETIMEOUT. The worker is left inside the call: later
 *   polls return GH_EAGAIN at once (no new signal) until the call returns,
 *   then polling resumes by itself. (gpu_lost because the spec defines it as
 *   "the device stopped answering"; a second kind for the same fact would
 *   make every consumer handle both.)
 * - A signal is emitted when something changes, never per poll. The first
 *   poll of a GPU sets its baselines and reports only standing faults: a
 *   non-zero double-bit ECC count, a row-remap failure or pending remap,
 *   pending page retirement, a temperature over the threshold or a throttle.
 *   After that: an ECC, retired-page, PCIe-replay or NVLink counter that
 *   moves up (a counter that goes down, e.g. volatile ECC after a driver
 *   reload, is re-baselined silently); any change of the remapped-rows
 *   state; a thermal or power state change (threshold crossed, throttle on
 *   or off), at most one per kind per GPU per opts.state_holddown_ns, the
 *   latest state being reported when the hold-down ends.
 * - NVML_ERROR_GPU_IS_LOST (or NVML_ERROR_RESET_REQUIRED) from any call on a
 *   GPU: one gpu_lost signal, then none for that GPU until it answers again.
 * - A second thread waits on nvmlEventSetWait_v2 for XidCriticalError
 *   events (kind xid, code = the event data). Registration only records
 *   events from then on; the kernel log covers earlier ones.
 * - Page retirement (pre-Ampere GPUs) has no kind of its own in the spec;
 *   it is reported as row_remap (its Ampere successor): pending = retirement
 *   pending, correctable/uncorrectable = pages retired for SBE/DBE, msg
 *   "page retirement: ...". A GPU has one mechanism or the other.
 * - Timestamps come from opts.clock (the injected clock); deadlines and
 *   sleeps are real elapsed time (CLOCK_MONOTONIC), because a hung driver
 *   hangs in real time.
 *
 * Threads: emit is called from the poll thread and the event thread, never
 * concurrently with itself (the source serialises it). The callback must not
 * call back into the source. gh_nvml_source_health() may be called from any
 * thread. */
#ifndef GH_AGENT_NVML_H
#define GH_AGENT_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#define GH_NVML_MAX_GPUS    64

struct gh_nvml_source;

/* Receives each signal; sig and its strings are borrowed for the call only
 * (copy with gh_signal_copy() to keep it). */
typedef void (*gh_nvml_emit_fn)(void *ctx, const struct gh_signal *sig);

struct gh_nvml_opts {
    const char *lib_path;       /* borrowed; NULL = GH_NVML_DEFAULT_LIB */
    const char *node;           /* borrowed (copied); Kubernetes node name, required */
    int64_t poll_interval_ns;   /* 0 = 1 s; the poll thread's period */
    int64_t deadline_ns;        /* 0 = 5 s; longest wait for one NVML job */
    int64_t state_holddown_ns;  /* 0 = 30 s; thermal/power re-report hold-down */
    double temp_threshold_celsius; /* 0 = the GPU's slowdown threshold - 5, else 85 */
    const struct gh_clock *clock;  /* borrowed, must outlive the source; NULL = real */
    gh_nvml_emit_fn emit;       /* required */
    void *emit_ctx;             /* borrowed; passed to emit */
};

/* Loads the library, initialises NVML and learns the GPUs (on the worker,
 * within the deadline). On success *out is a new source (free with
 * gh_nvml_source_free()) that has not polled yet. Errors:
 *   GH_ENOTFOUND  no library, no driver, or no GPU; err says which and
 *                 ends "; GPU polling disabled" - log it once and run the
 *                 agent's other sources;
 *   GH_ETIMEOUT   NVML initialisation hung (the worker is abandoned);
 *   GH_EINVAL, GH_ENOMEM, GH_EIO. */
int gh_nvml_source_new(const struct gh_nvml_opts *opts, struct gh_nvml_source **out,
                       struct gh_err *err);

/* Starts the poll thread (poll_once every poll_interval_ns) and, when
 * events could be registered, the XID event thread. GH_EINVAL if started. */
int gh_nvml_source_start(struct gh_nvml_source *src, struct gh_err *err);

/* Stops both threads; returns within about deadline_ns + 0.5 s even if a
 * driver call is stuck (the stuck thread is abandoned). Idempotent. */
void gh_nvml_source_stop(struct gh_nvml_source *src);

/* One poll of every GPU, emitting what changed. Returns within deadline_ns.
 * GH_OK; GH_ETIMEOUT (a call hung now: signal emitted); GH_EAGAIN (a call
 * is still hung from before: nothing polled); GH_ENOMEM (a signal could
 * not be built; counted, polling continues). Not to be called concurrently
 * with the poll thread (serialised, but the thread's timing suffers). */
int gh_nvml_source_poll_once(struct gh_nvml_source *src, struct gh_err *err);

/* Number of GPUs found at initialisation. */
int gh_nvml_source_gpu_count(const struct gh_nvml_source *src);

/* What /metrics shows per GPU, as of the latest completed poll. has_* false
 * = not supported by the GPU or not read yet. */
struct gh_nvml_gpu_health {
    int index;
    char pci[32];               /* "00000000:3B:00.0" */
    char uuid[96];              /* "GPU-..." */
    bool lost;                  /* lost or hung, not answered since */
    bool has_temp;
    double celsius;
    bool has_power;
    double watts;
    bool has_reasons;
    uint64_t clock_event_reasons; /* nvmlClocksEventReason* bits */
    bool has_ecc;
    int64_t ecc_sbe_volatile, ecc_dbe_volatile, ecc_sbe_aggregate, ecc_dbe_aggregate;
    bool has_remap;
    bool remap_pending, remap_failure;
    int64_t remap_correctable, remap_uncorrectable;
    bool has_retired;
    int64_t retired_sbe, retired_dbe;
    bool retired_pending;
    bool has_pcie_replay;
    int64_t pcie_replay;
    int nvlinks;                /* links found (0 = no NVLink) */
};

/* Copies GPU index's health into *out. GH_ENOTFOUND for a bad index. */
int gh_nvml_source_health(struct gh_nvml_source *src, int index, struct gh_nvml_gpu_health *out);

/* Counters for /metrics: polls done, polls that timed out, signals emitted,
 * signals dropped (allocation failed). */
struct gh_nvml_stats {
    uint64_t polls, poll_timeouts, signals, dropped, events;
};
void gh_nvml_source_stats(struct gh_nvml_source *src, struct gh_nvml_stats *out);

/* Stops (as gh_nvml_source_stop) and frees. Returns within about
 * 2 x deadline_ns + 0.5 s: a thread stuck in the driver is abandoned with
 * the library state it needs, which it frees (and shuts NVML down) if its
 * call ever returns. Accepts NULL. */
void gh_nvml_source_free(struct gh_nvml_source *src);

#endif
