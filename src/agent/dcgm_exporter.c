/* dcgm_exporter.c - the scraper of an existing dcgm-exporter (see dcgm.h,
 * part 2): libcurl GET of /metrics -> the Prometheus text parser
 * (dcgm_promtext.h) -> per-GPU tables -> diff against the previous scrape
 * -> signals, with the XIDs shipped kept across restarts (dcgm_shipped.h). */
#include "agent/dcgm.h"
#include "agent/dcgm_shipped.h"
#include "agent/dcgm_signal.h"
#include "agent/level.h"
#include "agent/worker.h"
#include "common/curlbuf.h"
#include "common/pci.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum xm {
    XM_XID_LAST,
    XM_SBE_VOL,
    XM_DBE_VOL,
    XM_SBE_AGG,
    XM_DBE_AGG,
    XM_REMAP_FAILURE,
    XM_REMAP_PENDING,
    XM_REMAP_CORR,
    XM_REMAP_UNC,
    XM_RETIRED_SBE,
    XM_RETIRED_DBE,
    XM_RETIRED_PENDING,
    XM_TEMP,
    XM_SLOWDOWN_TEMP,
    XM_POWER,
    XM_REASONS,
    XM_PCIE_REPLAY,
    XM__SCALARS,
    XM_XID_COUNT = XM__SCALARS, /* per xid label */
    XM_NVL_REPLAY,              /* NVLink, in spec counter order below */
    XM_NVL_RECOVERY,
    XM_NVL_CRC_FLIT,
    XM_NVL_CRC_DATA,
};

static const char *const nvl_counter_names[4] = {"replay", "recovery", "crc_flit", "crc_data"};

/* Exporter metric names: the legacy (CSV) names and DCGM's renamed ones.
 * lane = true: a prefix followed by the link number ("..._L3"). */
static const struct {
    const char *name;
    enum xm m;
    bool lane;
} xnames[] = {
    {"DCGM_FI_DEV_XID_ERRORS", XM_XID_LAST, false},
    {"DCGM_FI_DEV_XID_ERROR", XM_XID_LAST, false},
    {"DCGM_EXP_XID_ERRORS_COUNT", XM_XID_COUNT, false},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", XM_SBE_VOL, false},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", XM_DBE_VOL, false},
    {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", XM_SBE_AGG, false},
    {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", XM_DBE_AGG, false},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", XM_REMAP_FAILURE, false},
    {"DCGM_FI_DEV_ROW_REMAP_FAILED", XM_REMAP_FAILURE, false},
    {"DCGM_FI_DEV_ROW_REMAP_PENDING", XM_REMAP_PENDING, false},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", XM_REMAP_CORR, false},
    {"DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", XM_REMAP_CORR, false},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", XM_REMAP_UNC, false},
    {"DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", XM_REMAP_UNC, false},
    {"DCGM_FI_DEV_RETIRED_SBE", XM_RETIRED_SBE, false},
    {"DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL", XM_RETIRED_SBE, false},
    {"DCGM_FI_DEV_RETIRED_DBE", XM_RETIRED_DBE, false},
    {"DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL", XM_RETIRED_DBE, false},
    {"DCGM_FI_DEV_RETIRED_PENDING", XM_RETIRED_PENDING, false},
    {"DCGM_FI_DEV_PAGE_RETIRED_PENDING", XM_RETIRED_PENDING, false},
    {"DCGM_FI_DEV_GPU_TEMP", XM_TEMP, false},
    {"DCGM_FI_DEV_GPU_TEMP_CELSIUS", XM_TEMP, false},
    {"DCGM_FI_DEV_SLOWDOWN_TEMP", XM_SLOWDOWN_TEMP, false},
    {"DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS", XM_SLOWDOWN_TEMP, false},
    {"DCGM_FI_DEV_POWER_USAGE", XM_POWER, false},
    {"DCGM_FI_DEV_BOARD_POWER_WATTS", XM_POWER, false},
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", XM_REASONS, false},
    {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", XM_REASONS, false},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", XM_PCIE_REPLAY, false},
    {"DCGM_FI_DEV_PCIE_REPLAY_TOTAL", XM_PCIE_REPLAY, false},
    {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", XM_NVL_CRC_FLIT, false},
    {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", XM_NVL_CRC_FLIT, false},
    {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", XM_NVL_CRC_DATA, false},
    {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL", XM_NVL_CRC_DATA, false},
    {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", XM_NVL_REPLAY, false},
    {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL", XM_NVL_REPLAY, false},
    {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", XM_NVL_RECOVERY, false},
    {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL", XM_NVL_RECOVERY, false},
    {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L", XM_NVL_CRC_FLIT, true},
    {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_L", XM_NVL_CRC_DATA, true},
    {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_L", XM_NVL_REPLAY, true},
    {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_L", XM_NVL_RECOVERY, true},
};

#define NVL_LINKS GH_DCGM_NVL_LINKS
#define NVL_TOTAL NVL_LINKS /* slot for GPU-level totals */
#define NVL_SLOTS (NVL_LINKS + 1)
#define XID_CODES 32

/* Clock-event bits (gpu-signals.md 3.4; DCGM uses the same values). */
#define THERMAL_REASONS 0x60u
#define POWER_REASONS 0x84u

struct xgpu {
    bool seen;
    uint32_t has; /* bit per scalar */
    double v[XM__SCALARS];
    uint8_t nvl_has[NVL_SLOTS]; /* bit per counter */
    double nvl[NVL_SLOTS][4];
    unsigned nxid;
    struct {
        int code;
        double count;
    } xid[XID_CODES];
    char pci[32];
};

struct gh_dcgm_exporter {
    pthread_mutex_t mu; /* serialises scrape/ingest; guards all below */
    char *url, *node;
    int64_t timeout_ns, holddown_ns;
    size_t max_body;
    double temp_threshold;
    const struct gh_clock *clock;
    gh_dcgm_emit_fn emit;
    void *emit_ctx;
    CURL *curl;
    char curl_err[CURL_ERROR_SIZE];
    struct xgpu cur[GH_DCGM_MAX_GPUS], prev[GH_DCGM_MAX_GPUS];
    bool have_prev[GH_DCGM_MAX_GPUS];
    struct gh_level thermal[GH_DCGM_MAX_GPUS], power[GH_DCGM_MAX_GPUS];
    char *state_path, *boot_id;                     /* NULL: nothing remembered across restarts */
    struct gh_dcgm_xid_seen seen[GH_DCGM_MAX_GPUS]; /* XIDs shipped (dcgm_shipped.h) */
    bool seen_dirty;
    struct gh_dcgm_exporter_stats stats;
    struct gh_worker *worker; /* ticks every interval */
};

static bool label_is(const struct gh_dcgm_promtext_label *l, const char *name)
{
    size_t n = strlen(name);
    return l->name_len == n && memcmp(l->name, name, n) == 0;
}

/* A small non-negative decimal integer label value; -1 if not one. */
static int label_int(const struct gh_dcgm_promtext_label *l, int max)
{
    long v = 0;
    if (l->value_len == 0 || l->value_len > 9)
        return -1;
    for (size_t i = 0; i < l->value_len; i++) {
        if (!isdigit((unsigned char)l->value[i]))
            return -1;
        v = v * 10 + (l->value[i] - '0');
    }
    return v > max ? -1 : (int)v;
}

static int lookup_metric(const char *name, size_t len, int *lane)
{
    *lane = -1;
    for (size_t k = 0; k < sizeof xnames / sizeof xnames[0]; k++) {
        size_t n = strlen(xnames[k].name);
        if (!xnames[k].lane) {
            if (len == n && memcmp(name, xnames[k].name, n) == 0)
                return (int)xnames[k].m;
        } else if (len > n && len <= n + 2 && memcmp(name, xnames[k].name, n) == 0) {
            int l = 0;
            for (size_t i = n; i < len; i++) {
                if (!isdigit((unsigned char)name[i]))
                    return -1;
                l = l * 10 + (name[i] - '0');
            }
            if (l >= NVL_LINKS)
                return -1;
            *lane = l;
            return (int)xnames[k].m;
        }
    }
    return -1;
}

static int on_sample(void *ctx, const struct gh_dcgm_promtext_sample *s)
{
    struct gh_dcgm_exporter *ex = ctx;
    const struct gh_dcgm_promtext_label *pci = NULL;
    int gpu = -1, link = -1, xid = -1, lane, m;
    struct xgpu *g;

    if (s->name_len < 5 || memcmp(s->name, "DCGM_", 5) != 0)
        return 0;
    m = lookup_metric(s->name, s->name_len, &lane);
    if (m < 0 || !isfinite(s->value) || s->value < 0)
        return 0;
    for (size_t i = 0; i < s->nlabels; i++) {
        const struct gh_dcgm_promtext_label *l = &s->labels[i];
        if (label_is(l, "gpu"))
            gpu = label_int(l, GH_DCGM_MAX_GPUS - 1);
        else if (label_is(l, "nvlink"))
            link = label_int(l, NVL_LINKS - 1);
        else if (label_is(l, "xid"))
            xid = label_int(l, 999999999);
        else if (label_is(l, "pci_bus_id"))
            pci = l;
    }
    if (gpu < 0)
        return 0;
    g = &ex->cur[gpu];
    g->seen = true;
    ex->stats.samples++;
    /* "00000000:3B:00.0" -> the one form signals and metrics use; what is
     * not an address is left out */
    if (pci && !g->pci[0])
        (void)gh_pci_canon(pci->value, pci->value_len, NULL, g->pci, sizeof g->pci);
    if (m < XM__SCALARS) {
        g->v[m] = s->value;
        g->has |= 1u << m;
    } else if (m == XM_XID_COUNT) {
        unsigned k;
        if (xid < 0)
            return 0;
        for (k = 0; k < g->nxid; k++)
            if (g->xid[k].code == xid)
                break;
        if (k == g->nxid) {
            if (g->nxid == XID_CODES)
                return 0;
            g->nxid++;
            g->xid[k].code = xid;
            g->xid[k].count = 0;
        }
        if (s->value > g->xid[k].count)
            g->xid[k].count = s->value;
    } else {
        int slot = link >= 0 ? link : lane >= 0 ? lane : NVL_TOTAL;
        int c = m - XM_NVL_REPLAY;
        g->nvl[slot][c] = s->value;
        g->nvl_has[slot] |= (uint8_t)(1u << c);
    }
    return 0;
}

static int64_t as_count(double v) { return v >= 9.2e18 ? INT64_MAX : (int64_t)v; }

static int xemit(struct gh_dcgm_exporter *ex, struct gh_signal *s, const struct xgpu *g,
                 const char *counter, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int xemit(struct gh_dcgm_exporter *ex, struct gh_signal *s, const struct xgpu *g,
                 const char *counter, const char *fmt, ...)
{
    char msg[GH_DCGM_MSG_MAX];
    va_list ap;
    int rc;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rc = gh_dcgm_signal_emit(ex->emit, ex->emit_ctx, s, ex->node, g->pci, counter, msg);
    if (rc == GH_OK)
        ex->stats.signals++;
    else
        ex->stats.dropped++;
    return rc;
}

static void xbegin(struct gh_signal *s, enum gh_kind kind, int gpu, int64_t now)
{
    gh_signal_init(s);
    s->ts_ns = now;
    s->source = GH_SRC_DCGM;
    s->kind = kind;
    s->gpu = gpu;
}

#define HAS(g, m) (((g)->has >> (m)) & 1u)

/* Diffs GPU gpu's scrape (cur) against prev and emits; then merges cur
 * into prev. Returns GH_ENOMEM if a signal was dropped. */
static int diff_gpu(struct gh_dcgm_exporter *ex, int gpu, int64_t now)
{
    struct xgpu *c = &ex->cur[gpu], *p = &ex->prev[gpu];
    bool first = !ex->have_prev[gpu];
    struct gh_signal s;
    int rc = GH_OK;

#define KEEP(x)                                                                                    \
    do {                                                                                           \
        if ((x) != GH_OK)                                                                          \
            rc = GH_ENOMEM;                                                                        \
    } while (0)

    if (first)
        memset(p, 0, sizeof *p);

    /* XIDs: the per-code counter when exported, else the last-XID gauge.
     * The first scrape after an agent restart compares with what was
     * shipped before it (same boot), not with nothing. */
    struct gh_dcgm_xid_seen *sh = &ex->seen[gpu];
    bool base = first && sh->known;
    if (c->nxid > 0) {
        for (unsigned k = 0; k < c->nxid; k++) {
            double before = 0;
            if (base) {
                for (unsigned j = 0; j < sh->n; j++)
                    if (sh->xid[j].code == c->xid[k].code)
                        before = sh->xid[j].count;
            }
            for (unsigned j = 0; j < p->nxid; j++)
                if (p->xid[j].code == c->xid[k].code)
                    before = p->xid[j].count;
            if (c->xid[k].count > before) {
                xbegin(&s, GH_KIND_XID, gpu, now);
                s.code = c->xid[k].code;
                KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: XID %d count %.0f -> %.0f%s",
                           c->xid[k].code, before, c->xid[k].count,
                           first ? " at first scrape" : ""));
            }
        }
    } else if (HAS(c, XM_XID_LAST)) {
        double v = c->v[XM_XID_LAST];
        bool moved = first ? (base && sh->has_last ? v != sh->last : v != 0)
                           : (!HAS(p, XM_XID_LAST) || v != p->v[XM_XID_LAST]);
        if (moved && v >= 1 && v <= 2147483647.0) {
            xbegin(&s, GH_KIND_XID, gpu, now);
            s.code = (int)v;
            KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: last XID %d%s", (int)v,
                       first ? " at first scrape" : ""));
        }
    }
    /* what this scrape showed is what has been shipped */
    if (c->nxid > 0 || HAS(c, XM_XID_LAST)) {
        struct gh_dcgm_xid_seen now_seen = *sh;
        now_seen.known = true;
        if (HAS(c, XM_XID_LAST)) {
            now_seen.has_last = true;
            now_seen.last = c->v[XM_XID_LAST];
        }
        for (unsigned k = 0; k < c->nxid; k++) {
            unsigned j = 0;
            while (j < now_seen.n && now_seen.xid[j].code != c->xid[k].code)
                j++;
            if (j == now_seen.n && now_seen.n < GH_DCGM_SHIPPED_CODES)
                now_seen.n++;
            if (j < now_seen.n) {
                now_seen.xid[j].code = c->xid[k].code;
                now_seen.xid[j].count = c->xid[k].count;
            }
        }
        if (memcmp(&now_seen, sh, sizeof now_seen) != 0) {
            *sh = now_seen;
            ex->seen_dirty = true;
        }
    }

    /* ECC. */
    static const struct {
        enum xm m;
        enum gh_ecc_bits bits;
        bool vol;
        const char *name;
    } ecc[4] = {
        {XM_DBE_VOL, GH_ECC_DOUBLE, true, "double-bit ECC errors (volatile)"},
        {XM_DBE_AGG, GH_ECC_DOUBLE, false, "double-bit ECC errors (aggregate)"},
        {XM_SBE_VOL, GH_ECC_SINGLE, true, "single-bit ECC errors (volatile)"},
        {XM_SBE_AGG, GH_ECC_SINGLE, false, "single-bit ECC errors (aggregate)"},
    };
    for (int k = 0; k < 4; k++) {
        enum xm m = ecc[k].m;
        double v = c->v[m];
        if (!HAS(c, m))
            continue;
        if ((first && ecc[k].bits == GH_ECC_DOUBLE && v > 0) ||
            (!first && HAS(p, m) && v > p->v[m])) {
            xbegin(&s, GH_KIND_ECC, gpu, now);
            s.bits = ecc[k].bits;
            s.is_volatile = ecc[k].vol;
            s.has_count = true;
            s.count = as_count(v);
            if (first)
                KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: %s = %.0f at first scrape", ecc[k].name,
                           v));
            else
                KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: %s %.0f -> %.0f", ecc[k].name, p->v[m],
                           v));
        }
    }

    /* Row remapping: one signal for any change of the four. */
    {
        const uint32_t rb = (1u << XM_REMAP_FAILURE) | (1u << XM_REMAP_PENDING) |
                            (1u << XM_REMAP_CORR) | (1u << XM_REMAP_UNC);
        if (c->has & rb) {
            double nv[4], ov[4];
            bool changed = false;
            for (int k = 0; k < 4; k++) {
                enum xm m = (enum xm)(XM_REMAP_FAILURE + k);
                ov[k] = HAS(p, m) ? p->v[m] : 0;
                nv[k] = HAS(c, m) ? c->v[m] : ov[k];
                if (HAS(c, m) && HAS(p, m) && nv[k] != ov[k])
                    changed = true;
            }
            if ((first && (nv[0] != 0 || nv[1] != 0)) || (!first && changed)) {
                xbegin(&s, GH_KIND_ROW_REMAP, gpu, now);
                s.failure = nv[0] != 0;
                s.pending = nv[1] != 0;
                s.correctable = as_count(nv[2]);
                s.uncorrectable = as_count(nv[3]);
                KEEP(xemit(ex, &s, c, NULL,
                           "dcgm-exporter: remapped rows%s: failure %.0f, pending %.0f, "
                           "correctable %.0f, uncorrectable %.0f",
                           first ? " at first scrape" : "", nv[0], nv[1], nv[2], nv[3]));
            }
        }
    }

    /* Page retirement, reported as row_remap (as the NVML source does). */
    {
        const uint32_t rb = (1u << XM_RETIRED_SBE) | (1u << XM_RETIRED_DBE) |
                            (1u << XM_RETIRED_PENDING);
        if (c->has & rb) {
            double sbe = HAS(c, XM_RETIRED_SBE) ? c->v[XM_RETIRED_SBE] : p->v[XM_RETIRED_SBE];
            double dbe = HAS(c, XM_RETIRED_DBE) ? c->v[XM_RETIRED_DBE] : p->v[XM_RETIRED_DBE];
            double pend = HAS(c, XM_RETIRED_PENDING) ? c->v[XM_RETIRED_PENDING]
                                                     : p->v[XM_RETIRED_PENDING];
            bool moved = !first &&
                         ((HAS(p, XM_RETIRED_SBE) && sbe > p->v[XM_RETIRED_SBE]) ||
                          (HAS(p, XM_RETIRED_DBE) && dbe > p->v[XM_RETIRED_DBE]) ||
                          (HAS(p, XM_RETIRED_PENDING) && pend != p->v[XM_RETIRED_PENDING]));
            if ((first && (pend != 0 || dbe > 0)) || moved) {
                xbegin(&s, GH_KIND_ROW_REMAP, gpu, now);
                s.pending = pend != 0;
                s.correctable = as_count(sbe);
                s.uncorrectable = as_count(dbe);
                KEEP(xemit(ex, &s, c, NULL,
                           "dcgm-exporter: page retirement%s: pages retired for SBE %.0f, for "
                           "DBE %.0f, retirement pending %.0f",
                           first ? " at first scrape" : "", sbe, dbe, pend));
            }
        }
    }

    /* PCIe replays. */
    if (HAS(c, XM_PCIE_REPLAY) && !first && HAS(p, XM_PCIE_REPLAY) &&
        c->v[XM_PCIE_REPLAY] > p->v[XM_PCIE_REPLAY]) {
        xbegin(&s, GH_KIND_PCIE, gpu, now);
        s.has_count = true;
        s.count = as_count(c->v[XM_PCIE_REPLAY]);
        KEEP(xemit(ex, &s, c, "replay", "dcgm-exporter: PCIe replay counter %.0f -> %.0f",
                   p->v[XM_PCIE_REPLAY], c->v[XM_PCIE_REPLAY]));
    }

    /* NVLink. */
    for (int slot = 0; slot < NVL_SLOTS && !first; slot++) {
        for (int k = 0; k < 4; k++) {
            uint8_t bit = (uint8_t)(1u << k);
            if (!(c->nvl_has[slot] & bit) || !(p->nvl_has[slot] & bit) ||
                !(c->nvl[slot][k] > p->nvl[slot][k]))
                continue;
            xbegin(&s, GH_KIND_NVLINK, gpu, now);
            s.has_count = true;
            s.count = as_count(c->nvl[slot][k]);
            if (slot < NVL_LINKS) {
                s.has_link = true;
                s.link = slot;
                KEEP(xemit(ex, &s, c, nvl_counter_names[k],
                           "dcgm-exporter: NVLink %d %s errors %.0f -> %.0f", slot,
                           nvl_counter_names[k], p->nvl[slot][k], c->nvl[slot][k]));
            } else {
                KEEP(xemit(ex, &s, c, nvl_counter_names[k],
                           "dcgm-exporter: NVLink %s errors (all links) %.0f -> %.0f",
                           nvl_counter_names[k], p->nvl[slot][k], c->nvl[slot][k]));
            }
        }
    }

    /* Thermal and power levels. */
    if (HAS(c, XM_TEMP)) {
        double thr = ex->temp_threshold > 0 ? ex->temp_threshold
                     : HAS(c, XM_SLOWDOWN_TEMP) && c->v[XM_SLOWDOWN_TEMP] > 5
                         ? c->v[XM_SLOWDOWN_TEMP] - 5
                         : 85.0;
        uint64_t reasons = HAS(c, XM_REASONS) && c->v[XM_REASONS] < 1.8e19
                               ? (uint64_t)c->v[XM_REASONS]
                               : 0;
        bool hot = c->v[XM_TEMP] >= thr;
        bool throttled = (reasons & THERMAL_REASONS) != 0;
        if (gh_level_due(&ex->thermal[gpu], (hot ? 1 : 0) | (throttled ? 2 : 0), now,
                         ex->holddown_ns)) {
            xbegin(&s, GH_KIND_THERMAL, gpu, now);
            s.celsius = c->v[XM_TEMP];
            s.throttled = throttled;
            KEEP(xemit(ex, &s, c, NULL,
                       "dcgm-exporter: GPU temperature %.0f C (threshold %.0f C) %s; thermal "
                       "throttle %s (clock-event reasons 0x%" PRIx64 ")",
                       c->v[XM_TEMP], thr, hot ? "over" : "under", throttled ? "on" : "off",
                       reasons));
        }
    }
    if (HAS(c, XM_POWER) && HAS(c, XM_REASONS) && c->v[XM_REASONS] < 1.8e19) {
        uint64_t reasons = (uint64_t)c->v[XM_REASONS];
        bool throttled = (reasons & POWER_REASONS) != 0;
        if (gh_level_due(&ex->power[gpu], throttled ? 1 : 0, now, ex->holddown_ns)) {
            xbegin(&s, GH_KIND_POWER, gpu, now);
            s.watts = c->v[XM_POWER];
            s.throttled = throttled;
            KEEP(xemit(ex, &s, c, NULL,
                       "dcgm-exporter: power %.1f W; power throttle %s (clock-event reasons "
                       "0x%" PRIx64 ")",
                       c->v[XM_POWER], throttled ? "on" : "off", reasons));
        }
    }
#undef KEEP

    /* Merge: what this scrape had replaces; what it lacked is kept. */
    for (int m = 0; m < XM__SCALARS; m++)
        if (HAS(c, m)) {
            p->v[m] = c->v[m];
            p->has |= 1u << m;
        }
    for (int slot = 0; slot < NVL_SLOTS; slot++)
        for (int k = 0; k < 4; k++)
            if (c->nvl_has[slot] & (1u << k)) {
                p->nvl[slot][k] = c->nvl[slot][k];
                p->nvl_has[slot] |= (uint8_t)(1u << k);
            }
    if (c->nxid > 0) {
        p->nxid = c->nxid;
        memcpy(p->xid, c->xid, sizeof p->xid);
    }
    if (c->pci[0])
        memcpy(p->pci, c->pci, sizeof p->pci);
    ex->have_prev[gpu] = true;
    return rc;
}

static int ingest_locked(struct gh_dcgm_exporter *ex, const char *text, size_t len,
                         struct gh_err *err)
{
    size_t bad = 0;
    int64_t now = gh_clock_now(ex->clock);
    int rc, drc = GH_OK;

    memset(ex->cur, 0, sizeof ex->cur);
    rc = gh_dcgm_promtext_parse(text, len, on_sample, ex, &bad, err);
    ex->stats.bad_lines += bad;
    if (rc != GH_OK && rc != GH_EINVAL)
        return rc;
    for (int g = 0; g < GH_DCGM_MAX_GPUS; g++)
        if (ex->cur[g].seen && diff_gpu(ex, g, now) != GH_OK)
            drc = GH_ENOMEM;
    if (ex->seen_dirty && ex->state_path) { /* on the scrape thread, not the loop */
        struct gh_err serr;
        if (gh_dcgm_shipped_save(ex->state_path, ex->boot_id, ex->seen, GH_DCGM_MAX_GPUS, &serr) ==
            GH_OK)
            ex->seen_dirty = false;
        else
            ex->stats.state_errors++;
    }
    /* a signal lost to OOM outranks malformed lines: GH_EINVAL would tell
     * the caller every good line counted */
    if (drc != GH_OK)
        rc = gh_err_set(err, GH_ENOMEM, "dcgm-exporter: out of memory building a signal");
    return rc;
}

int gh_dcgm_exporter_ingest(struct gh_dcgm_exporter *ex, const char *text, size_t len,
                            struct gh_err *err)
{
    int rc;
    pthread_mutex_lock(&ex->mu);
    rc = ingest_locked(ex, text, len, err);
    pthread_mutex_unlock(&ex->mu);
    return rc;
}

int gh_dcgm_exporter_scrape_once(struct gh_dcgm_exporter *ex, struct gh_err *err)
{
    struct gh_curlbuf b = {0};
    CURLcode cc;
    long status = 0;
    int rc;

    pthread_mutex_lock(&ex->mu);
    b.max = ex->max_body;
    ex->curl_err[0] = '\0';
    curl_easy_setopt(ex->curl, CURLOPT_WRITEDATA, &b);
    cc = curl_easy_perform(ex->curl);
    ex->stats.scrapes++;
    if (cc != CURLE_OK) {
        ex->stats.failures++;
        if (b.over)
            rc = gh_err_set(err, GH_ELIMIT, "dcgm-exporter: %s: body larger than %zu bytes",
                            ex->url, ex->max_body);
        else if (b.nomem)
            rc = gh_err_set(err, GH_ENOMEM, "dcgm-exporter: out of memory reading %s", ex->url);
        else
            rc = gh_err_set(err, cc == CURLE_OPERATION_TIMEDOUT ? GH_ETIMEOUT : GH_EIO,
                            "dcgm-exporter: GET %s: %s", ex->url,
                            ex->curl_err[0] ? ex->curl_err : curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(ex->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        ex->stats.failures++;
        rc = gh_err_set(err, GH_EIO, "dcgm-exporter: GET %s: HTTP status %ld", ex->url, status);
        goto out;
    }
    rc = ingest_locked(ex, b.p ? b.p : "", b.len, err);
out:
    curl_easy_setopt(ex->curl, CURLOPT_WRITEDATA, NULL);
    pthread_mutex_unlock(&ex->mu);
    free(b.p);
    return rc;
}

static void exporter_tick(void *arg, struct gh_worker *w)
{
    (void)w;
    gh_dcgm_exporter_scrape_once(arg, NULL);
}

int gh_dcgm_exporter_new(const struct gh_dcgm_exporter_opts *opts, struct gh_dcgm_exporter **out,
                         struct gh_err *err)
{
    struct gh_dcgm_exporter *ex;
    int64_t interval;
    long timeout_ms;
    int rc;

    *out = NULL;
    if (!opts || !opts->emit || !opts->node || !opts->node[0] || !opts->url || !opts->url[0])
        return gh_err_set(err, GH_EINVAL, "dcgm-exporter: url, node and emit are required");
    if (opts->interval_ns < 0 || opts->timeout_ns < 0 || opts->state_holddown_ns < 0)
        return gh_err_set(err, GH_EINVAL, "dcgm-exporter: negative interval");
    ex = calloc(1, sizeof *ex);
    if (!ex)
        return gh_err_set(err, GH_ENOMEM, "dcgm-exporter: out of memory");
    if (pthread_mutex_init(&ex->mu, NULL)) {
        free(ex);
        return gh_err_set(err, GH_EIO, "dcgm-exporter: mutex init failed");
    }
    ex->url = strdup(opts->url);
    ex->node = strdup(opts->node);
    ex->timeout_ns = opts->timeout_ns ? opts->timeout_ns : 5 * GH_NS_PER_S;
    ex->holddown_ns = opts->state_holddown_ns ? opts->state_holddown_ns : 30 * GH_NS_PER_S;
    ex->max_body = opts->max_body ? opts->max_body : 8u * 1024 * 1024;
    ex->temp_threshold = opts->temp_threshold_celsius;
    ex->clock = opts->clock ? opts->clock : gh_clock_real();
    ex->emit = opts->emit;
    ex->emit_ctx = opts->emit_ctx;
    interval = opts->interval_ns ? opts->interval_ns : 10 * GH_NS_PER_S;
    if (opts->state_path && opts->boot_id) {
        ex->state_path = strdup(opts->state_path);
        ex->boot_id = strdup(opts->boot_id);
        bool same = false;
        struct gh_err lerr;
        if (ex->state_path && ex->boot_id &&
            gh_dcgm_shipped_load(ex->state_path, ex->boot_id, ex->seen, GH_DCGM_MAX_GPUS, &same,
                                 &lerr) != GH_OK)
            ex->stats.state_errors++; /* nothing known: shipped again, as without a state */
    }
    if (!ex->url || !ex->node ||
        (opts->state_path && opts->boot_id && (!ex->state_path || !ex->boot_id))) {
        rc = gh_err_set(err, GH_ENOMEM, "dcgm-exporter: out of memory");
        goto fail;
    }
    ex->curl = curl_easy_init();
    if (!ex->curl) {
        rc = gh_err_set(err, GH_ENOMEM, "dcgm-exporter: curl_easy_init failed");
        goto fail;
    }
    timeout_ms = (long)(ex->timeout_ns / GH_NS_PER_MS);
    if (curl_easy_setopt(ex->curl, CURLOPT_URL, ex->url) != CURLE_OK ||
        curl_easy_setopt(ex->curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK) {
        rc = gh_err_set(err, GH_EINVAL, "dcgm-exporter: unusable URL %s", ex->url);
        goto fail;
    }
    curl_easy_setopt(ex->curl, CURLOPT_WRITEFUNCTION, gh_curlbuf_write);
    curl_easy_setopt(ex->curl, CURLOPT_ERRORBUFFER, ex->curl_err);
    curl_easy_setopt(ex->curl, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
    curl_easy_setopt(ex->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
    curl_easy_setopt(ex->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ex->curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(ex->curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(ex->curl, CURLOPT_USERAGENT, "gpuheal-agent");
    /* Ask for the text format (not protobuf or OpenMetrics). */
    {
        struct curl_slist *h = curl_slist_append(NULL, "Accept: text/plain;version=0.0.4");
        if (!h) {
            rc = gh_err_set(err, GH_ENOMEM, "dcgm-exporter: out of memory");
            goto fail;
        }
        curl_easy_setopt(ex->curl, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(ex->curl, CURLOPT_PRIVATE, (void *)h); /* freed in free() */
    }
    struct gh_worker_opts wo = {.name = "dcgm-exporter scraper",
                                .period_ns = interval,
                                .cadence = GH_WORKER_RATE,
                                .run = exporter_tick,
                                .arg = ex};
    if ((rc = gh_worker_new(&wo, &ex->worker, err)))
        goto fail;
    *out = ex;
    return GH_OK;
fail:
    gh_dcgm_exporter_free(ex);
    return rc;
}

int gh_dcgm_exporter_start(struct gh_dcgm_exporter *ex, struct gh_err *err)
{
    return gh_worker_start(ex->worker, err);
}

void gh_dcgm_exporter_stop(struct gh_dcgm_exporter *ex)
{
    if (ex)
        gh_worker_stop(ex->worker);
}

void gh_dcgm_exporter_stats(struct gh_dcgm_exporter *ex, struct gh_dcgm_exporter_stats *out)
{
    pthread_mutex_lock(&ex->mu);
    *out = ex->stats;
    pthread_mutex_unlock(&ex->mu);
}

void gh_dcgm_exporter_free(struct gh_dcgm_exporter *ex)
{
    if (!ex)
        return;
    gh_worker_free(ex->worker); /* stops it first */
    if (ex->curl) {
        char *priv = NULL;
        curl_easy_getinfo(ex->curl, CURLINFO_PRIVATE, &priv);
        curl_easy_cleanup(ex->curl);
        curl_slist_free_all((struct curl_slist *)(void *)priv);
    }
    pthread_mutex_destroy(&ex->mu);
    free(ex->url);
    free(ex->node);
    free(ex->state_path);
    free(ex->boot_id);
    free(ex);
}
