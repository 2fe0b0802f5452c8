/* nvml_derive.c - the signals and the health snapshot that one NVML poll's
 * samples mean (see nvml_derive.h): counters that moved up against their
 * baselines, standing faults at the first poll, remap and retirement
 * states, GPU-lost once per loss, thermal and power levels with a
 * hold-down. Pure: no NVML call, no lock. */
#include "agent/nvml_derive.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_TEMP_C 85.0
#define SLOWDOWN_MARGIN_C 5.0
/* Clock-event bits that mean "throttled" (shared/data/gpu-signals.md 3.4). */
#define THERMAL_REASONS                                                                            \
    (nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown)
#define POWER_REASONS                                                                              \
    (nvmlClocksEventReasonSwPowerCap | nvmlClocksThrottleReasonHwPowerBrakeSlowdown)

/* In nvmlNvLinkErrorCounter_t order. */
static const char *const link_counter_names[GH_NVML_L__COUNT] = {"replay", "recovery", "crc_flit",
                                                                 "crc_data"};

const char *gh_nvml_rc_name(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED: return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT: return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED: return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION: return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_ALREADY_INITIALIZED: return "NVML_ERROR_ALREADY_INITIALIZED";
    case NVML_ERROR_NOT_FOUND: return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_INSUFFICIENT_POWER: return "NVML_ERROR_INSUFFICIENT_POWER";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT: return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_IRQ_ISSUE: return "NVML_ERROR_IRQ_ISSUE";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_CORRUPTED_INFOROM: return "NVML_ERROR_CORRUPTED_INFOROM";
    case NVML_ERROR_GPU_IS_LOST: return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED: return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_OPERATING_SYSTEM: return "NVML_ERROR_OPERATING_SYSTEM";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE: return "NVML_ERROR_IN_USE";
    case NVML_ERROR_MEMORY: return "NVML_ERROR_MEMORY";
    case NVML_ERROR_NO_DATA: return "NVML_ERROR_NO_DATA";
    case NVML_ERROR_UNKNOWN: return "NVML_ERROR_UNKNOWN";
    }
    return "NVML_ERROR_?";
}

void gh_nvml_signal_begin(const struct gh_nvml_derive_cfg *src, struct gh_signal *s,
                          enum gh_kind kind, int gpu)
{
    gh_signal_init(s);
    s->ts_ns = gh_clock_now(src->clock);
    s->source = GH_SRC_NVML;
    s->kind = kind;
    s->gpu = gpu;
}

int gh_nvml_signal_emitf(const struct gh_nvml_derive_cfg *src, struct gh_signal *s,
                         const char *counter, const char *fmt, ...)
{
    char msg[GH_NVML_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return src->emit(src->emit_ctx, s, counter, msg);
}

static double temp_threshold(const struct gh_nvml_derive_cfg *src, const struct gh_nvml_dev *d)
{
    if (src->temp_threshold > 0)
        return src->temp_threshold;
    if (d->has_slowdown && d->slowdown_c > SLOWDOWN_MARGIN_C)
        return (double)d->slowdown_c - SLOWDOWN_MARGIN_C;
    return DEFAULT_TEMP_C;
}

int gh_nvml_derive(const struct gh_nvml_derive_cfg *src, unsigned i, const struct gh_nvml_dev *d,
                   struct gh_nvml_gpu_state *g, const struct gh_nvml_sample *s)
{
    struct gh_nvml_sample *b = &g->base;
    int64_t now = gh_clock_now(src->clock);
    struct gh_signal sig;
    int rc = GH_OK;

#define KEEP(x)                                                                                    \
    do {                                                                                           \
        if ((x) != GH_OK)                                                                          \
            rc = GH_ENOMEM;                                                                        \
    } while (0)

    if (s->lost) {
        if (!g->lost) {
            char what[GH_NVML_MSG_MAX];
            g->lost = true;
            snprintf(what, sizeof what, "NVML: %s on GPU %u returned %s (%d)%s",
                     s->lost_call ? s->lost_call : "?", i, gh_nvml_rc_name(s->lost_rc),
                     (int)s->lost_rc,
                     s->lost_rc == NVML_ERROR_GPU_IS_LOST
                         ? ": the GPU has fallen off the bus or is otherwise inaccessible"
                         : ": the GPU needs a reset");
            gh_nvml_signal_begin(src, &sig, GH_KIND_GPU_LOST, (int)i);
            KEEP(src->emit(src->emit_ctx, &sig, NULL, what));
        }
        return rc;
    }
    if (!d->h)
        return rc; /* never had a handle (not lost): nothing to compare */
    g->lost = false;

    /* ECC counters: double-bit first so a DBE is reported before SBE noise. */
    static const struct {
        enum gh_nvml_metric m;
        enum gh_ecc_bits bits;
        bool vol;
        const char *name;
    } ecc[4] = {
        {GH_NVML_M_DBE_VOL, GH_ECC_DOUBLE, true, "double-bit ECC errors (volatile)"},
        {GH_NVML_M_DBE_AGG, GH_ECC_DOUBLE, false, "double-bit ECC errors (aggregate)"},
        {GH_NVML_M_SBE_VOL, GH_ECC_SINGLE, true, "single-bit ECC errors (volatile)"},
        {GH_NVML_M_SBE_AGG, GH_ECC_SINGLE, false, "single-bit ECC errors (aggregate)"},
    };
    for (int k = 0; k < 4; k++) {
        enum gh_nvml_metric m = ecc[k].m;
        uint64_t cur = s->v[m];
        bool first;
        if (!(s->valid & GH_NVML_BIT(m)))
            continue;
        first = !(b->valid & GH_NVML_BIT(m));
        if ((first && ecc[k].bits == GH_ECC_DOUBLE && cur > 0) || (!first && cur > b->v[m])) {
            gh_nvml_signal_begin(src, &sig, GH_KIND_ECC, (int)i);
            sig.bits = ecc[k].bits;
            sig.is_volatile = ecc[k].vol;
            sig.has_count = true;
            sig.count = cur > INT64_MAX ? INT64_MAX : (int64_t)cur;
            if (first)
                KEEP(gh_nvml_signal_emitf(src, &sig, NULL, "NVML: %s = %" PRIu64 " at first poll",
                                          ecc[k].name, cur));
            else
                KEEP(gh_nvml_signal_emitf(src, &sig, NULL, "NVML: %s %" PRIu64 " -> %" PRIu64,
                                          ecc[k].name, b->v[m], cur));
        }
        b->v[m] = cur;
        b->valid |= GH_NVML_BIT(m);
    }

    /* Row remapping (Ampere and newer). */
    if (s->valid & GH_NVML_BIT(GH_NVML_M_REMAP)) {
        bool first = !(b->valid & GH_NVML_BIT(GH_NVML_M_REMAP));
        bool changed = !first && (s->remap_corr != b->remap_corr || s->remap_unc != b->remap_unc ||
                                  s->remap_pending != b->remap_pending ||
                                  s->remap_failure != b->remap_failure);
        if ((first && (s->remap_pending || s->remap_failure)) || changed) {
            gh_nvml_signal_begin(src, &sig, GH_KIND_ROW_REMAP, (int)i);
            sig.pending = s->remap_pending;
            sig.failure = s->remap_failure;
            sig.correctable = s->remap_corr;
            sig.uncorrectable = s->remap_unc;
            if (first)
                KEEP(gh_nvml_signal_emitf(
                    src, &sig, NULL,
                    "NVML: remapped rows at first poll: correctable %u, uncorrectable "
                    "%u, pending %u, failure %u",
                    s->remap_corr, s->remap_unc, s->remap_pending, s->remap_failure));
            else
                KEEP(gh_nvml_signal_emitf(
                    src, &sig, NULL,
                    "NVML: remapped rows: correctable %u -> %u, uncorrectable %u -> "
                    "%u, pending %u -> %u, failure %u -> %u",
                    b->remap_corr, s->remap_corr, b->remap_unc, s->remap_unc, b->remap_pending,
                    s->remap_pending, b->remap_failure, s->remap_failure));
        }
        b->remap_corr = s->remap_corr;
        b->remap_unc = s->remap_unc;
        b->remap_pending = s->remap_pending;
        b->remap_failure = s->remap_failure;
        b->valid |= GH_NVML_BIT(GH_NVML_M_REMAP);
    }

    /* Page retirement (before Ampere), reported as row_remap (see nvml.h). */
    {
        const uint32_t rbits = GH_NVML_BIT(GH_NVML_M_RETIRED_SBE) |
                               GH_NVML_BIT(GH_NVML_M_RETIRED_DBE) |
                               GH_NVML_BIT(GH_NVML_M_RETIRED_PENDING);
        uint32_t have = s->valid & rbits;
        if (have) {
            bool first = (b->valid & have) != have;
            uint64_t sbe = s->v[GH_NVML_M_RETIRED_SBE], dbe = s->v[GH_NVML_M_RETIRED_DBE];
            uint64_t pend = s->v[GH_NVML_M_RETIRED_PENDING];
            bool moved = !first &&
                         (sbe > b->v[GH_NVML_M_RETIRED_SBE] || dbe > b->v[GH_NVML_M_RETIRED_DBE] ||
                          pend != b->v[GH_NVML_M_RETIRED_PENDING]);
            if ((first && (pend || dbe > 0)) || moved) {
                gh_nvml_signal_begin(src, &sig, GH_KIND_ROW_REMAP, (int)i);
                sig.pending = pend != 0;
                sig.failure = false;
                sig.correctable = sbe > INT64_MAX ? INT64_MAX : (int64_t)sbe;
                sig.uncorrectable = dbe > INT64_MAX ? INT64_MAX : (int64_t)dbe;
                KEEP(gh_nvml_signal_emitf(src, &sig, NULL,
                                          "NVML: page retirement%s: pages retired for SBE %" PRIu64
                                          ", for DBE %" PRIu64 ", retirement pending %" PRIu64,
                                          first ? " at first poll" : "", sbe, dbe, pend));
            }
            for (enum gh_nvml_metric m = GH_NVML_M_RETIRED_SBE; m <= GH_NVML_M_RETIRED_PENDING;
                 m++) {
                if (s->valid & GH_NVML_BIT(m)) {
                    b->v[m] = s->v[m];
                    b->valid |= GH_NVML_BIT(m);
                }
            }
        }
    }

    /* PCIe replays. */
    if (s->valid & GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY)) {
        uint64_t cur = s->v[GH_NVML_M_PCIE_REPLAY];
        if ((b->valid & GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY)) && cur > b->v[GH_NVML_M_PCIE_REPLAY]) {
            gh_nvml_signal_begin(src, &sig, GH_KIND_PCIE, (int)i);
            sig.has_count = true;
            sig.count = (int64_t)cur;
            KEEP(gh_nvml_signal_emitf(src, &sig, "replay",
                                      "NVML: PCIe replay counter %" PRIu64 " -> %" PRIu64,
                                      b->v[GH_NVML_M_PCIE_REPLAY], cur));
        }
        b->v[GH_NVML_M_PCIE_REPLAY] = cur;
        b->valid |= GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY);
    }

    /* NVLink error counters. */
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        for (unsigned k = 0; k < GH_NVML_L__COUNT; k++) {
            uint8_t bit = (uint8_t)(1u << k);
            uint64_t cur = s->link[l][k];
            if (!(s->link_valid[l] & bit))
                continue;
            if ((b->link_valid[l] & bit) && cur > b->link[l][k]) {
                gh_nvml_signal_begin(src, &sig, GH_KIND_NVLINK, (int)i);
                sig.has_link = true;
                sig.link = (int)l;
                sig.has_count = true;
                sig.count = cur > INT64_MAX ? INT64_MAX : (int64_t)cur;
                KEEP(gh_nvml_signal_emitf(src, &sig, link_counter_names[k],
                                          "NVML: NVLink %u %s errors %" PRIu64 " -> %" PRIu64, l,
                                          link_counter_names[k], b->link[l][k], cur));
            }
            b->link[l][k] = cur;
            b->link_valid[l] |= bit;
        }
    }

    /* Thermal: threshold crossed or thermal throttle, either way. */
    if (s->valid & GH_NVML_BIT(GH_NVML_M_TEMP)) {
        double thr = temp_threshold(src, d);
        double celsius = (double)s->v[GH_NVML_M_TEMP];
        uint64_t reasons = (s->valid & GH_NVML_BIT(GH_NVML_M_REASONS)) ? s->v[GH_NVML_M_REASONS]
                                                                       : 0;
        bool hot = celsius >= thr;
        bool throttled = (reasons & THERMAL_REASONS) != 0;
        int state = (hot ? 1 : 0) | (throttled ? 2 : 0);
        if (gh_level_due(&g->thermal, state, now, src->holddown_ns)) {
            gh_nvml_signal_begin(src, &sig, GH_KIND_THERMAL, (int)i);
            sig.celsius = celsius;
            sig.throttled = throttled;
            KEEP(gh_nvml_signal_emitf(
                src, &sig, NULL,
                "NVML: GPU temperature %.0f C (threshold %.0f C) %s; thermal throttle "
                "%s (clock-event reasons 0x%" PRIx64 ")",
                celsius, thr, hot ? "over" : "under", throttled ? "on" : "off", reasons));
        }
    }
    /* Power: power-cap or power-brake throttle on/off. */
    if ((s->valid & GH_NVML_BIT(GH_NVML_M_POWER)) && (s->valid & GH_NVML_BIT(GH_NVML_M_REASONS))) {
        double watts = (double)s->v[GH_NVML_M_POWER] / 1000.0;
        uint64_t reasons = s->v[GH_NVML_M_REASONS];
        bool throttled = (reasons & POWER_REASONS) != 0;
        if (gh_level_due(&g->power, throttled ? 1 : 0, now, src->holddown_ns)) {
            gh_nvml_signal_begin(src, &sig, GH_KIND_POWER, (int)i);
            sig.watts = watts;
            sig.throttled = throttled;
            if (d->has_power_limit)
                KEEP(gh_nvml_signal_emitf(
                    src, &sig, NULL,
                    "NVML: power %.1f W (limit %.1f W); power throttle %s (clock-event "
                    "reasons 0x%" PRIx64 ")",
                    watts, d->power_limit_mw / 1000.0, throttled ? "on" : "off", reasons));
            else
                KEEP(gh_nvml_signal_emitf(
                    src, &sig, NULL,
                    "NVML: power %.1f W; power throttle %s (clock-event reasons 0x%" PRIx64 ")",
                    watts, throttled ? "on" : "off", reasons));
        }
    }
    for (enum gh_nvml_metric m = GH_NVML_M_TEMP; m <= GH_NVML_M_REASONS; m++) {
        if (s->valid & GH_NVML_BIT(m)) {
            b->v[m] = s->v[m];
            b->valid |= GH_NVML_BIT(m);
        }
    }
#undef KEEP
    return rc;
}

void gh_nvml_derive_health(const struct gh_nvml_gpu_state *g, const struct gh_nvml_sample *s,
                           struct gh_nvml_gpu_health *h)
{
    const struct gh_nvml_sample *b = &g->base;

    h->lost = g->lost;
    if (!s->lost) {
        h->has_temp = (s->valid & GH_NVML_BIT(GH_NVML_M_TEMP)) != 0;
        h->celsius = (double)s->v[GH_NVML_M_TEMP];
        h->has_power = (s->valid & GH_NVML_BIT(GH_NVML_M_POWER)) != 0;
        h->watts = (double)s->v[GH_NVML_M_POWER] / 1000.0;
        h->has_reasons = (s->valid & GH_NVML_BIT(GH_NVML_M_REASONS)) != 0;
        h->clock_event_reasons = s->v[GH_NVML_M_REASONS];
    }
    /* Counters from the baselines: the last value read, kept across a
     * failed read. */
    h->has_ecc = (b->valid & (GH_NVML_BIT(GH_NVML_M_SBE_VOL) | GH_NVML_BIT(GH_NVML_M_DBE_VOL) |
                              GH_NVML_BIT(GH_NVML_M_SBE_AGG) | GH_NVML_BIT(GH_NVML_M_DBE_AGG))) !=
                 0;
    h->ecc_sbe_volatile = (int64_t)b->v[GH_NVML_M_SBE_VOL];
    h->ecc_dbe_volatile = (int64_t)b->v[GH_NVML_M_DBE_VOL];
    h->ecc_sbe_aggregate = (int64_t)b->v[GH_NVML_M_SBE_AGG];
    h->ecc_dbe_aggregate = (int64_t)b->v[GH_NVML_M_DBE_AGG];
    h->has_remap = (b->valid & GH_NVML_BIT(GH_NVML_M_REMAP)) != 0;
    h->remap_pending = b->remap_pending;
    h->remap_failure = b->remap_failure;
    h->remap_correctable = b->remap_corr;
    h->remap_uncorrectable = b->remap_unc;
    h->has_retired = (b->valid & (GH_NVML_BIT(GH_NVML_M_RETIRED_SBE) |
                                  GH_NVML_BIT(GH_NVML_M_RETIRED_DBE))) != 0;
    h->retired_sbe = (int64_t)b->v[GH_NVML_M_RETIRED_SBE];
    h->retired_dbe = (int64_t)b->v[GH_NVML_M_RETIRED_DBE];
    h->retired_pending = b->v[GH_NVML_M_RETIRED_PENDING] != 0;
    h->has_pcie_replay = (b->valid & GH_NVML_BIT(GH_NVML_M_PCIE_REPLAY)) != 0;
    h->pcie_replay = (int64_t)b->v[GH_NVML_M_PCIE_REPLAY];
}
