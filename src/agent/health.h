/* health.h - node-local GPU health: each GPU's state (healthy, degraded,
 * unhealthy, lost) derived from the node's hardware signals by the XID
 * catalog and the signal kinds, with recent evidence per GPU. Pure state: no
 * I/O, no threads, no allocation after gh_health_new() except evidence
 * copies. health_publish.h writes it to the Kubernetes API.
 *
 * Which signal does what (a "reason"; each GPU reports its most serious
 * active one, and the reason fixes the state):
 *
 *   lost       gpu_lost (nvml or kmsg), or an NVML snapshot with lost set.
 *   unhealthy  xid with catalog severity critical or high; ecc double-bit
 *              (a volatile count > 0, an aggregate count that rose, or an
 *              event without a count); row_remap failure; probe_result
 *              failed on the GPU; pcie with a fatal counter
 *              (*uncorrectable*, *fatal*, *surprise_down*).
 *   degraded   xid with severity low or medium (an unknown code is medium,
 *              as the catalog says); row_remap pending (or NVML page
 *              retirement pending); thermal or power throttled without a
 *              break for opts.throttle_sustain_ns; correctable ECC errors
 *              rising by opts.sbe_burst within opts.sbe_window_ns; nvlink
 *              and non-fatal pcie counters that moved.
 *   evidence only (no state): xid the catalog marks application (the job's
 *              fault, e.g. 13, 31, 43) or secondary (45), or severity info;
 *              an aggregate double-bit count first seen after start (history,
 *              not news); readings that end a condition (throttle off).
 *   ignored    training, kube and nic kinds (not GPU health).
 *
 * Kinds of reason and how each ends:
 * - events (XIDs, ECC, probe failures, PCIe fatal, gpu_lost) hold until a
 *   recovery: gh_health_note_reset() (a GPU reset or driver reload seen) or
 *   a probe_result that passed on that GPU, each at time T, voids every
 *   event of that GPU observed at or before T (an event observed later, even
 *   if delivered earlier, stays). Degrading events also end by themselves
 *   opts.degraded_hold_ns after the latest one (quiet period).
 * - lost also ends when an NVML snapshot says the GPU answers again after a
 *   snapshot that said it did not (a true -> false transition; a snapshot
 *   taken before the loss was noticed cannot end it).
 * - levels (row remap pending/failure, throttling) follow the latest
 *   reading by signal time (a reading older than the one held is ignored);
 *   a reset or probe does not end them: the next reading does.
 * - agent restart: this state is memory only. NVML's first poll re-reports
 *   standing faults (lost, remap, volatile double-bit, throttling);
 *   health_publish replays the evidence of the node's GPUNodeHealth written
 *   since the current boot, so a critical XID is not forgotten by a restart
 *   and is forgotten by a reboot (which resets every GPU).
 *
 * GPU identity: signals name a GPU by NVML index, PCI bus id or UUID. A
 * signal or snapshot carrying the index with a PCI id or UUID teaches the
 * mapping; later signals with only a PCI id or UUID resolve through it
 * (PCI ids compare by domain:bus:device, so "0000:3b:00", "0000:3b:00.0"
 * and NVML's "00000000:3B:00.0" are one GPU). A signal naming an unknown PCI
 * id or UUID gets an entry without an index, which is merged into the
 * indexed entry once the mapping is learned. A hardware signal naming no GPU
 * is node-level evidence (no state).
 *
 * Time: signal times (ts_ns) order events; the injected clock decides what
 * time-based conditions (sustained throttling, the degraded quiet period)
 * hold now. Not thread-safe: one owner (the agent's event loop). */
#ifndef GH_AGENT_HEALTH_H
#define GH_AGENT_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/nvml.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

/* Entries (GPUs, indexed or not yet) kept; the CRD's status.gpus maxItems. */
#define GH_HEALTH_MAX_GPUS 64
/* Largest evidence ring per GPU (and for node-level evidence). */
#define GH_HEALTH_EVIDENCE_CAP 16
/* Evidence msg and probe detail are cut to this many bytes (UTF-8 safe). */
#define GH_HEALTH_TEXT_MAX 512

enum gh_gpu_state {
    GH_GPU_HEALTHY,
    GH_GPU_DEGRADED,
    GH_GPU_UNHEALTHY,
    GH_GPU_LOST,
};

/* Ordered: a higher value is more serious; the ranges give the state. */
enum gh_health_reason {
    GH_HR_NONE,              /* healthy */
    GH_HR_LINK_ERRORS,       /* degraded ... */
    GH_HR_THROTTLED,
    GH_HR_ECC_CORRECTABLE,
    GH_HR_XID_LOW,
    GH_HR_XID_MEDIUM,
    GH_HR_ROW_REMAP_PENDING,
    GH_HR_PROBE_FAILED,      /* unhealthy ... */
    GH_HR_PCIE_FATAL,
    GH_HR_XID_HIGH,
    GH_HR_ROW_REMAP_FAILURE,
    GH_HR_ECC_DOUBLE_BIT,
    GH_HR_XID_CRITICAL,
    GH_HR_GPU_LOST,          /* lost */
    GH_HR__COUNT
};

/* "healthy", "degraded", "unhealthy", "lost". */
const char *gh_gpu_state_name(enum gh_gpu_state s);
/* The GPUNodeHealth status.gpus[].state value: "Healthy", "Degraded",
 * "Failed" (unhealthy), "Lost". */
const char *gh_gpu_state_crd(enum gh_gpu_state s);
/* A CamelCase condition reason: "AllGPUsHealthy" (NONE), "LinkErrors",
 * "Throttled", "EccCorrectableBurst", "XidLow", "XidMedium",
 * "RowRemapPending", "ProbeFailed", "PCIeFatal", "XidHigh",
 * "RowRemapFailure", "EccDoubleBit", "XidCritical", "GPULost". */
const char *gh_health_reason_name(enum gh_health_reason r);
enum gh_gpu_state gh_health_reason_state(enum gh_health_reason r);

struct gh_health;

struct gh_health_opts {
    const struct gh_clock *clock;  /* borrowed, outlives h; NULL = real clock */
    int evidence_per_gpu;          /* ring size, 1..GH_HEALTH_EVIDENCE_CAP; 0 = 8 */
    int64_t degraded_hold_ns;      /* 0 = 30 min: degrading events end after this quiet time */
    int64_t throttle_sustain_ns;   /* 0 = 60 s */
    int64_t sbe_window_ns;         /* 0 = 1 h */
    int64_t sbe_burst;             /* 0 = 100 correctable errors within the window */
};

/* New, empty state (no GPU known). opts may be NULL. Caller frees with
 * gh_health_free(). GH_ENOMEM, GH_EINVAL (an option out of range). */
int gh_health_new(const struct gh_health_opts *opts, struct gh_health **out, struct gh_err *err);
/* Accepts NULL. */
void gh_health_free(struct gh_health *h);

/* Applies one signal (borrowed; copied into the evidence ring when it
 * matters). Non-hardware kinds are ignored (GH_OK). A signal identical to
 * one held (same id, or without id the same ts, source, kind and code) is a
 * duplicate and ignored. GH_ELIMIT when it names a GPU index >= 64 or no
 * entry is free (it becomes node-level evidence; counted); GH_ENOMEM when
 * the evidence copy failed (the state is still updated). */
int gh_health_feed(struct gh_health *h, const struct gh_signal *sig, struct gh_err *err);

/* Applies an NVML snapshot (borrowed; gh_nvml_source_health() of one GPU
 * after a poll), observed now: makes the GPU known (so healthy GPUs are
 * counted and listed), learns index <-> PCI id/UUID, lost (see above), the
 * remap and page-retirement levels and the ECC double-bit count shown in
 * status. Errors as gh_health_feed. */
int gh_health_observe_nvml(struct gh_health *h, const struct gh_nvml_gpu_health *snap,
                           struct gh_err *err);

/* A GPU reset or driver reload was observed at ts_ns (e.g. the controller
 * reported reset_gpu done, or NVML's volatile counters restarted): voids the
 * GPU's events observed at or before it. gpu -1 = every GPU. */
void gh_health_note_reset(struct gh_health *h, int gpu, int64_t ts_ns);

/* One GPU as of now. index -1 when not learned yet (then pci or uuid is
 * set). Strings are "" when unknown. */
struct gh_health_gpu {
    int index;
    char pci[32];            /* canonical "0000:3b:00.0", or as given */
    char uuid[96];
    enum gh_gpu_state state;
    enum gh_health_reason reason;
    int code;                /* the XID of an XID reason, else -1 */
    char what[256];          /* the reason in words: "XID 79 (GPU has fallen off the bus), critical" */
    bool has_last_xid;
    int last_xid;
    bool has_ecc_double_bit;
    int64_t ecc_double_bit;  /* largest double-bit count seen (aggregate or volatile) */
    bool remap_pending, remap_failure;
    int64_t last_signal_ns;  /* newest signal time, 0 = none */
};

/* Number of entries (0..GH_HEALTH_MAX_GPUS), indexed ones first, by index. */
int gh_health_count(const struct gh_health *h);
/* Fills *out for entry i (0..count-1), evaluated at the clock's now.
 * GH_ENOTFOUND for a bad i. */
int gh_health_gpu_at(const struct gh_health *h, int i, struct gh_health_gpu *out);
/* The entry number i (for gh_health_gpu_at, gh_health_evidence) of NVML
 * index gpu; -1 when unknown. */
int gh_health_find(const struct gh_health *h, int gpu);

/* The NVML index of the GPU named by pci or uuid (either may be NULL), as
 * learned from NVML's snapshots and indexed signals; -1 when unknown. */
int gh_health_index_of(const struct gh_health *h, const char *pci, const char *uuid);

/* The node as a whole, evaluated now. */
struct gh_health_summary {
    enum gh_gpu_state state;      /* the worst GPU's */
    enum gh_health_reason reason; /* the worst GPU's reason (NONE when healthy) */
    int gpu;                      /* its index (-1: none, or not learned) */
    int gpus;                     /* entries with an index */
    int healthy, degraded, unhealthy, lost; /* over every entry */
    char message[1024];           /* "GPU 3 (0000:3b:00.0): XID 79 (...), critical; GPU 5: ..." */
};
void gh_health_summarize(const struct gh_health *h, struct gh_health_summary *out);

/* Evidence of entry i (i = -1: node-level), oldest first: up to cap
 * borrowed pointers (valid until the next call that changes h) into out.
 * Returns how many. Each is a spec signal whose gpu is the resolved index
 * when known. */
size_t gh_health_evidence(const struct gh_health *h, int i, const struct gh_signal **out,
                          size_t cap);

/* Bumped by every change of what gh_health_gpu_at/summarize/evidence show,
 * except changes that only time brings (see gh_health_next_change). */
uint64_t gh_health_generation(const struct gh_health *h);

/* The earliest time (clock ns) after now when a time-based condition starts
 * or ends (a throttle becomes sustained, a degraded quiet period ends);
 * INT64_MAX when none is pending. */
int64_t gh_health_next_change(const struct gh_health *h);

struct gh_health_stats {
    uint64_t fed, ignored, duplicates, node_level, over_limit, merges, evidence_dropped;
};
void gh_health_stats(const struct gh_health *h, struct gh_health_stats *out);

#endif
