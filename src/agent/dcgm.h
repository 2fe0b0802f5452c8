/* dcgm.h - the agent's DCGM source (signals with source "dcgm"), in two
 * independent parts that a node uses either or both of (dcgm_health.c and
 * dcgm_exporter.c; the latter reads /metrics with dcgm_promtext.h):
 *
 * 1. Health watches through NVIDIA's DCGM library (dlopen libdcgm.so.4, then
 *    libdcgm.so.3): embedded host engine or a connection to nv-hostengine,
 *    dcgmHealthSet on all GPUs, and dcgmHealthCheck on each check; each new
 *    incident (GPU, watch system, error code) becomes one signal.
 * 2. A scraper of an existing dcgm-exporter's /metrics (Prometheus text
 *    format over HTTP, libcurl), for clusters that already run it. Metric
 *    names and labels as in shared/data/gpu-signals.md section 5; both the
 *    legacy (exporter CSV) and the renamed DCGM field names are accepted.
 *    As with NVML, the first scrape sets baselines and reports only standing
 *    faults (DBE, row-remap failure/pending, pending retirement, a non-zero
 *    last XID or XID count, over-temperature or throttle); after that a
 *    counter that moves up, a remap state change, an XID, or a
 *    thermal/power state change (held down like NVML's) is a signal.
 *
 * Both parts call emit from their own thread (start) or from the caller
 * (check_once / scrape_once / ingest), never concurrently with itself; the
 * signal is borrowed for the call. Timestamps come from the injected clock.
 *
 * Limits (documented choices):
 * - dcgm-exporter's DCGM_FI_DEV_XID_ERRORS holds only the last XID: the same
 *   XID twice in a row is one signal. DCGM_EXP_XID_ERRORS_COUNT{xid=...}
 *   counts per code and is preferred when present. With a state path, what
 *   was shipped survives an agent restart (not a reboot).
 * - NVLink GPU-level totals (..._ERROR_COUNT_TOTAL) carry no link number;
 *   such nvlink signals have has_link false (link absent on the wire).
 *   Per-lane metrics (..._COUNT_L<n>) and an nvlink="<n>" label give it.
 * - Health-watch incidents without a spec kind (SM, InfoROM, driver, ...)
 *   are counted in the stats, not emitted. */
#ifndef GH_AGENT_DCGM_H
#define GH_AGENT_DCGM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "agent/dcgm_promtext.h"
#include "signal/signal.h"

#define GH_DCGM_MAX_GPUS 64

/* Receives each signal (borrowed for the call). */
typedef void (*gh_dcgm_emit_fn)(void *ctx, const struct gh_signal *sig);

/* ---- 1. DCGM library health watches ---- */

struct gh_dcgm_health;

struct gh_dcgm_health_opts {
    const char *lib_path;      /* borrowed; NULL = libdcgm.so.4, then libdcgm.so.3 */
    const char *hostengine;    /* borrowed; NULL = embedded engine; else "host:port"
                                  or a unix socket path, as dcgmConnect takes */
    const char *node;          /* borrowed (copied), required */
    int64_t interval_ns;       /* 0 = 10 s; the check thread's period */
    const struct gh_clock *clock; /* borrowed; NULL = real */
    gh_dcgm_emit_fn emit;      /* required */
    void *emit_ctx;
};

/* Loads DCGM, starts or connects to the host engine and sets the health
 * watches. GH_ENOTFOUND when no library (err: "DCGM: libdcgm.so.4 /
 * libdcgm.so.3 not found (dlopen: ...); DCGM health watches disabled") or
 * the engine cannot be had; log it once and carry on. */
int gh_dcgm_health_new(const struct gh_dcgm_health_opts *opts, struct gh_dcgm_health **out,
                       struct gh_err *err);
/* One dcgmHealthCheck; emits new incidents. GH_EUNSUPPORTED when this
 * library accepts none of the response layouts we know (said once). */
int gh_dcgm_health_check_once(struct gh_dcgm_health *h, struct gh_err *err);
int gh_dcgm_health_start(struct gh_dcgm_health *h, struct gh_err *err);
void gh_dcgm_health_stop(struct gh_dcgm_health *h);
/* Stops, disconnects, unloads. Accepts NULL. */
void gh_dcgm_health_free(struct gh_dcgm_health *h);

/* ---- 2. dcgm-exporter scrape ---- */

struct gh_dcgm_exporter;

struct gh_dcgm_exporter_opts {
    const char *url;           /* borrowed (copied), e.g. http://127.0.0.1:9400/metrics */
    const char *node;          /* borrowed (copied), required */
    int64_t interval_ns;       /* 0 = 10 s; the scrape thread's period */
    int64_t timeout_ns;        /* 0 = 5 s; whole HTTP request */
    size_t max_body;           /* 0 = 8 MiB; a larger body is an error */
    int64_t state_holddown_ns; /* 0 = 30 s; thermal/power re-report hold-down */
    double temp_threshold_celsius; /* 0 = slowdown temperature - 5 when exported, else 85 */
    const struct gh_clock *clock;  /* borrowed; NULL = real */
    gh_dcgm_emit_fn emit;      /* required */
    void *emit_ctx;
    /* Both set: the XIDs shipped are kept in state_path (dcgm_shipped.h),
     * so the first scrape after a restart on the same boot_id does not ship
     * the exporter's standing last XID again. Borrowed (copied). */
    const char *state_path;
    const char *boot_id;
};

struct gh_dcgm_exporter_stats {
    uint64_t scrapes, failures, bad_lines, samples, signals, dropped;
    uint64_t state_errors; /* the shipped-XID state not read or not written */
};

int gh_dcgm_exporter_new(const struct gh_dcgm_exporter_opts *opts, struct gh_dcgm_exporter **out,
                         struct gh_err *err);
/* GET the URL (bounded by timeout_ns and max_body) and ingest the body.
 * GH_EIO (connection, non-200 status: err names it), GH_ETIMEOUT, GH_ELIMIT,
 * or what ingest returns. */
int gh_dcgm_exporter_scrape_once(struct gh_dcgm_exporter *ex, struct gh_err *err);
/* Parses text[0..len) (borrowed) as one scrape and emits what changed.
 * GH_OK, or GH_EINVAL when some lines were malformed (they are skipped and
 * counted; err names the first; the good lines still count), GH_ENOMEM. */
int gh_dcgm_exporter_ingest(struct gh_dcgm_exporter *ex, const char *text, size_t len,
                            struct gh_err *err);
int gh_dcgm_exporter_start(struct gh_dcgm_exporter *ex, struct gh_err *err);
void gh_dcgm_exporter_stop(struct gh_dcgm_exporter *ex);
void gh_dcgm_exporter_stats(struct gh_dcgm_exporter *ex, struct gh_dcgm_exporter_stats *out);
/* Stops and frees. Accepts NULL. */
void gh_dcgm_exporter_free(struct gh_dcgm_exporter *ex);

#endif
