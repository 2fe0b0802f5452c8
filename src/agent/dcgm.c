/* dcgm.c - the DCGM source: GPU health as DCGM sees it, from its library's
 * health watches or from a dcgm-exporter's /metrics, turned into signals.
 *
 * Three layers, bottom up: a Prometheus text-format parser (bounded, no
 * allocation per line, fuzzed by test/fuzz/fuzz_promtext.c); the exporter
 * scraper (libcurl GET -> parser -> per-GPU tables -> diff against the
 * previous scrape -> signals); and the DCGM library client (dlopen, health
 * watches, incidents -> signals). The DCGM ABI subset is declared here, not
 * from NVIDIA's headers (not packaged): values from NVIDIA/DCGM
 * dcgmlib/dcgm_structs.h, dcgm_errors.h (see shared/data/gpu-signals.md 4). */
#include "agent/dcgm.h"
#include "agent/dcgm_shipped.h"
#include "agent/worker.h"
#include "common/pci.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MSG_MAX 512

/* ---- shared helpers ---- */

/* Level state (thermal/power) with a hold-down, as in nvml.c. */
struct level {
    bool ever;
    int emitted;
    int64_t emitted_at;
};

static bool level_due(struct level *lv, int state, int64_t now, int64_t holddown)
{
    if (state == lv->emitted)
        return false;
    if (lv->ever && now - lv->emitted_at < holddown)
        return false;
    lv->ever = true;
    lv->emitted = state;
    lv->emitted_at = now;
    return true;
}

/* Fills node/pci/msg/counter of s (strings copied), emits it, clears it.
 * GH_ENOMEM when a copy fails (the signal is dropped). */
static int emit_signal(gh_dcgm_emit_fn emit, void *ctx, struct gh_signal *s, const char *node,
                       const char *pci, const char *counter, const char *msg)
{
    int rc = GH_OK;
    if (gh_signal_set_str(&s->node, node, strlen(node)) ||
        gh_signal_set_str(&s->msg, msg, strlen(msg)) ||
        (pci && pci[0] && gh_signal_set_str(&s->pci, pci, strlen(pci))) ||
        (counter && gh_signal_set_str(&s->counter, counter, strlen(counter))))
        rc = GH_ENOMEM;
    if (rc == GH_OK)
        emit(ctx, s);
    gh_signal_clear(s);
    return rc;
}

/* ==== Prometheus text format ==== */

static bool is_name_start(int c, bool colon)
{
    return isalpha(c) || c == '_' || (colon && c == ':');
}

static bool is_name_char(int c, bool colon)
{
    return isalnum(c) || c == '_' || (colon && c == ':');
}

static size_t skip_blanks(const char *p, size_t i, size_t n)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return i;
}

/* Parses one line (no '\n'); *is_sample false for blank/comment lines.
 * Returns NULL or why the line is malformed. Label values are unescaped
 * into scratch (at least n bytes). */
static const char *parse_line(const char *p, size_t n, char *scratch,
                              struct gh_dcgm_promtext_label *labels, struct gh_dcgm_promtext_sample *s,
                              bool *is_sample)
{
    size_t i = skip_blanks(p, 0, n), start, out = 0;
    char tok[64];

    *is_sample = false;
    if (i == n || p[i] == '#')
        return NULL;
    if (memchr(p, '\0', n))
        return "NUL byte in line";
    start = i;
    if (!is_name_start((unsigned char)p[i], true))
        return "bad metric name";
    while (i < n && is_name_char((unsigned char)p[i], true))
        i++;
    s->name = p + start;
    s->name_len = i - start;
    s->labels = labels;
    s->nlabels = 0;
    i = skip_blanks(p, i, n);
    if (i < n && p[i] == '{') {
        i++;
        for (;;) {
            struct gh_dcgm_promtext_label *l;
            i = skip_blanks(p, i, n);
            if (i < n && p[i] == '}') {
                i++;
                break;
            }
            if (s->nlabels == GH_DCGM_PROMTEXT_LABELS_MAX)
                return "too many labels";
            if (i == n || !is_name_start((unsigned char)p[i], false))
                return "bad label name";
            l = &labels[s->nlabels];
            start = i;
            while (i < n && is_name_char((unsigned char)p[i], false))
                i++;
            l->name = p + start;
            l->name_len = i - start;
            i = skip_blanks(p, i, n);
            if (i == n || p[i] != '=')
                return "'=' expected after label name";
            i = skip_blanks(p, i + 1, n);
            if (i == n || p[i] != '"')
                return "label value not quoted";
            i++;
            l->value = scratch + out;
            for (;;) {
                if (i == n)
                    return "unterminated label value";
                if (p[i] == '"')
                    break;
                if (p[i] == '\\') {
                    if (i + 1 == n)
                        return "unterminated label value";
                    switch (p[i + 1]) {
                    case '\\': scratch[out++] = '\\'; break;
                    case '"': scratch[out++] = '"'; break;
                    case 'n': scratch[out++] = '\n'; break;
                    default: return "bad escape in label value";
                    }
                    i += 2;
                } else {
                    scratch[out++] = p[i++];
                }
            }
            l->value_len = (size_t)(scratch + out - l->value);
            i++; /* closing quote */
            s->nlabels++;
            i = skip_blanks(p, i, n);
            if (i < n && p[i] == ',') {
                i++;
                continue;
            }
            if (i < n && p[i] == '}') {
                i++;
                break;
            }
            return "',' or '}' expected after label value";
        }
        i = skip_blanks(p, i, n);
    } else if (i == start + s->name_len) {
        return "space expected after metric name";
    }
    /* value */
    start = i;
    while (i < n && p[i] != ' ' && p[i] != '\t')
        i++;
    if (i == start)
        return "value missing";
    if (i - start >= sizeof tok)
        return "value too long";
    memcpy(tok, p + start, i - start);
    tok[i - start] = '\0';
    {
        char *end;
        errno = 0;
        s->value = strtod(tok, &end);
        if (end == tok || *end != '\0')
            return "bad value";
    }
    /* optional timestamp (ms) */
    s->has_timestamp = false;
    i = skip_blanks(p, i, n);
    if (i < n) {
        char *end;
        long long ts;
        start = i;
        while (i < n && p[i] != ' ' && p[i] != '\t')
            i++;
        if (i - start >= sizeof tok)
            return "timestamp too long";
        memcpy(tok, p + start, i - start);
        tok[i - start] = '\0';
        errno = 0;
        ts = strtoll(tok, &end, 10);
        if (errno || end == tok || *end != '\0')
            return "bad timestamp";
        s->has_timestamp = true;
        s->timestamp_ms = ts;
        if (skip_blanks(p, i, n) != n)
            return "trailing text after timestamp";
    }
    *is_sample = true;
    return NULL;
}

int gh_dcgm_promtext_parse(const char *text, size_t len, gh_dcgm_promtext_fn fn, void *ctx,
                           size_t *bad_lines, struct gh_err *err)
{
    struct gh_dcgm_promtext_label labels[GH_DCGM_PROMTEXT_LABELS_MAX];
    char *scratch = malloc(GH_DCGM_PROMTEXT_LINE_MAX);
    size_t pos = 0, bad = 0;
    long lineno = 0;
    int rc = GH_OK;

    if (!scratch)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        struct gh_dcgm_promtext_sample s;
        const char *why;
        bool is_sample;

        pos += n + (nl ? 1 : 0);
        lineno++;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n > GH_DCGM_PROMTEXT_LINE_MAX) {
            why = "line too long";
        } else {
            memset(&s, 0, sizeof s);
            why = parse_line(line, n, scratch, labels, &s, &is_sample);
        }
        if (why) {
            if (bad++ == 0)
                gh_err_set(err, GH_EINVAL, "line %ld: %s", lineno, why);
            continue;
        }
        if (!is_sample)
            continue;
        s.line = lineno;
        rc = fn(ctx, &s);
        if (rc)
            break;
    }
    free(scratch);
    if (bad_lines)
        *bad_lines = bad;
    if (rc)
        return rc;
    return bad ? GH_EINVAL : GH_OK;
}

/* ==== dcgm-exporter scrape ==== */

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

#define NVL_LINKS    18
#define NVL_TOTAL    NVL_LINKS /* slot for GPU-level totals */
#define NVL_SLOTS    (NVL_LINKS + 1)
#define XID_CODES    32

/* Clock-event bits (gpu-signals.md 3.4; DCGM uses the same values). */
#define THERMAL_REASONS 0x60u
#define POWER_REASONS   0x84u

struct xgpu {
    bool seen;
    uint32_t has;                 /* bit per scalar */
    double v[XM__SCALARS];
    uint8_t nvl_has[NVL_SLOTS];   /* bit per counter */
    double nvl[NVL_SLOTS][4];
    unsigned nxid;
    struct {
        int code;
        double count;
    } xid[XID_CODES];
    char pci[32];
};

struct gh_dcgm_exporter {
    pthread_mutex_t mu;           /* serialises scrape/ingest; guards all below */
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
    struct level thermal[GH_DCGM_MAX_GPUS], power[GH_DCGM_MAX_GPUS];
    char *state_path, *boot_id;   /* NULL: nothing remembered across restarts */
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

static int64_t as_count(double v)
{
    return v >= 9.2e18 ? INT64_MAX : (int64_t)v;
}

static int xemit(struct gh_dcgm_exporter *ex, struct gh_signal *s, const struct xgpu *g,
                 const char *counter, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int xemit(struct gh_dcgm_exporter *ex, struct gh_signal *s, const struct xgpu *g,
                 const char *counter, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;
    int rc;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rc = emit_signal(ex->emit, ex->emit_ctx, s, ex->node, g->pci, counter, msg);
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

#define KEEP(x) do { if ((x) != GH_OK) rc = GH_ENOMEM; } while (0)

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
                KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: %s = %.0f at first scrape",
                           ecc[k].name, v));
            else
                KEEP(xemit(ex, &s, c, NULL, "dcgm-exporter: %s %.0f -> %.0f", ecc[k].name,
                           p->v[m], v));
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
            double pend =
                HAS(c, XM_RETIRED_PENDING) ? c->v[XM_RETIRED_PENDING] : p->v[XM_RETIRED_PENDING];
            bool moved = !first && ((HAS(p, XM_RETIRED_SBE) && sbe > p->v[XM_RETIRED_SBE]) ||
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
        if (level_due(&ex->thermal[gpu], (hot ? 1 : 0) | (throttled ? 2 : 0), now,
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
        if (level_due(&ex->power[gpu], throttled ? 1 : 0, now, ex->holddown_ns)) {
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
        if (gh_dcgm_shipped_save(ex->state_path, ex->boot_id, ex->seen, GH_DCGM_MAX_GPUS,
                                 &serr) == GH_OK)
            ex->seen_dirty = false;
        else
            ex->stats.state_errors++;
    }
    if (drc != GH_OK && rc == GH_OK)
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

struct body {
    char *buf;
    size_t len, cap, max;
    bool over, nomem;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct body *b = ud;
    size_t n = size * nmemb;
    if (n > b->max - b->len) {
        b->over = true;
        return 0;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64 * 1024;
        char *p;
        while (cap < b->len + n)
            cap *= 2;
        if (cap > b->max)
            cap = b->max;
        p = realloc(b->buf, cap);
        if (!p) {
            b->nomem = true;
            return 0;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    return n;
}

int gh_dcgm_exporter_scrape_once(struct gh_dcgm_exporter *ex, struct gh_err *err)
{
    struct body b = {0};
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
    rc = ingest_locked(ex, b.buf ? b.buf : "", b.len, err);
out:
    curl_easy_setopt(ex->curl, CURLOPT_WRITEDATA, NULL);
    pthread_mutex_unlock(&ex->mu);
    free(b.buf);
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
    curl_easy_setopt(ex->curl, CURLOPT_WRITEFUNCTION, on_body);
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
    struct gh_worker_opts wo = {.name = "dcgm-exporter scraper", .period_ns = interval,
                                .cadence = GH_WORKER_RATE, .run = exporter_tick, .arg = ex};
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

/* ==== DCGM library health watches ==== */

/* The DCGM ABI subset (dcgm_structs.h). */
typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef int dcgmReturn_t;
#define DCGM_ST_OK                0
#define DCGM_ST_VER_MISMATCH      (-12)
#define DCGM_OPERATION_MODE_AUTO  1
#define DCGM_GROUP_ALL_GPUS       0x7fffffff
#define DCGM_FE_GPU               1
#define DCGM_HEALTH_RESULT_PASS   0
/* PCIE NVLINK MEM SM INFOROM THERMAL POWER DRIVER */
#define GH_DCGM_WATCHES           0x3F3u
#define MAKE_DCGM_VERSION(size, ver) ((unsigned)(size) | ((unsigned)(ver) << 24))

typedef struct {
    char msg[1024];
    unsigned int code;
} gh_dcgmDiagErrorDetail_t;

typedef struct {
    unsigned int entityGroupId;
    unsigned int entityId;
} gh_dcgmGroupEntityPair_t;

typedef struct {
    unsigned int system;
    int health;
    gh_dcgmDiagErrorDetail_t error;
    gh_dcgmGroupEntityPair_t entityInfo;
} gh_dcgmIncidentInfo_t;

/* v4 (DCGM 2.0-3.x): 64 incidents; v5 (DCGM 4): 1024 (DCGM_GROUP_MAX_ENTITIES_V2). */
#define INCIDENTS_V4 64
#define INCIDENTS_V5 1024
typedef struct {
    unsigned int version;
    int overallHealth;
    unsigned int incidentCount;
    gh_dcgmIncidentInfo_t incidents[INCIDENTS_V5];
} gh_dcgmHealthResponse_v5;
#define RESPONSE_SIZE(n) (offsetof(gh_dcgmHealthResponse_v5, incidents) + (n) * sizeof(gh_dcgmIncidentInfo_t))

_Static_assert(sizeof(gh_dcgmIncidentInfo_t) == 1044, "dcgmIncidentInfo_t ABI");

typedef dcgmReturn_t (*gh_dcgmInit_fn)(void);
typedef dcgmReturn_t (*gh_dcgmShutdown_fn)(void);
typedef dcgmReturn_t (*gh_dcgmStartEmbedded_fn)(int mode, dcgmHandle_t *handle);
typedef dcgmReturn_t (*gh_dcgmStopEmbedded_fn)(dcgmHandle_t handle);
typedef dcgmReturn_t (*gh_dcgmConnect_fn)(const char *address, dcgmHandle_t *handle);
typedef dcgmReturn_t (*gh_dcgmDisconnect_fn)(dcgmHandle_t handle);
typedef dcgmReturn_t (*gh_dcgmHealthSet_fn)(dcgmHandle_t handle, dcgmGpuGrp_t group,
                                            unsigned int systems);
typedef dcgmReturn_t (*gh_dcgmHealthCheck_fn)(dcgmHandle_t handle, dcgmGpuGrp_t group,
                                              void *response);
typedef const char *(*gh_errorString_fn)(dcgmReturn_t result);

#define INCIDENT_SET_MAX 256

struct incident_key {
    unsigned group, entity, system, code;
};

struct gh_dcgm_health {
    pthread_mutex_t mu;          /* serialises checks */
    void *dl;
    struct {
        gh_dcgmInit_fn init;
        gh_dcgmShutdown_fn shutdown;
        gh_dcgmStartEmbedded_fn start_embedded;
        gh_dcgmStopEmbedded_fn stop_embedded;
        gh_dcgmConnect_fn connect;
        gh_dcgmDisconnect_fn disconnect;
        gh_dcgmHealthSet_fn health_set;
        gh_dcgmHealthCheck_fn health_check;
        gh_errorString_fn error_string;
    } fn;
    bool inited, embedded, connected;
    dcgmHandle_t handle;
    int version;                 /* 0 unknown, 5, 4, -1 none accepted */
    gh_dcgmHealthResponse_v5 *resp;
    struct incident_key active[INCIDENT_SET_MAX];
    unsigned nactive;
    char *node;
    const struct gh_clock *clock;
    gh_dcgm_emit_fn emit;
    void *emit_ctx;
    struct gh_worker *worker; /* ticks every interval */
};

static const char *dcgm_str(struct gh_dcgm_health *h, dcgmReturn_t r)
{
    const char *s = h->fn.error_string ? h->fn.error_string(r) : NULL;
    return s ? s : "unknown DCGM error";
}

/* First decimal number after `word` (case-insensitive) in msg, or -1. */
static long number_after(const char *msg, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = msg; *p; p++) {
        if (strncasecmp(p, word, wl) == 0) {
            const char *q = p + wl;
            long v = 0;
            int digits = 0;
            while (*q == ' ' || *q == ':' || *q == '=')
                q++;
            while (isdigit((unsigned char)*q) && digits < 9) {
                v = v * 10 + (*q++ - '0');
                digits++;
            }
            if (digits)
                return v;
        }
    }
    return -1;
}

/* Maps one incident to a signal; false when the spec has no kind for it. */
static bool map_incident(const gh_dcgmIncidentInfo_t *in, struct gh_signal *s, const char **counter)
{
    long n;
    *counter = NULL;
    switch (in->error.code) {
    case 4: /* DCGM_FR_VOLATILE_DBE_DETECTED */
        s->kind = GH_KIND_ECC;
        s->bits = GH_ECC_DOUBLE;
        s->is_volatile = true;
        s->has_count = true;
        n = number_after(in->error.msg, "detected");
        s->count = n > 0 ? n : 1;
        return true;
    case 80: /* DCGM_FR_ROW_REMAP_FAILURE */
        s->kind = GH_KIND_ROW_REMAP;
        s->failure = true;
        return true;
    case 85: /* DCGM_FR_PENDING_ROW_REMAP */
    case 6:  /* DCGM_FR_PENDING_PAGE_RETIREMENTS */
    case 83: /* DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS */
        s->kind = GH_KIND_ROW_REMAP;
        s->pending = true;
        return true;
    case 101: /* DCGM_FR_XID_ERROR */
        s->kind = GH_KIND_XID;
        n = number_after(in->error.msg, "xid");
        s->code = n > 0 ? (int)n : 999; /* 999: NVML's "unknown Xid" */
        return true;
    case 120: /* DCGM_FR_FALLEN_OFF_BUS */
        s->kind = GH_KIND_GPU_LOST;
        return true;
    case 13: /* DCGM_FR_NVLINK_ERROR_THRESHOLD */
    case 70: /* DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD */
        s->kind = GH_KIND_NVLINK;
        s->has_count = true;
        s->count = 0;
        n = number_after(in->error.msg, "link");
        if (n >= 0 && n < NVL_LINKS) {
            s->has_link = true;
            s->link = (int)n;
        }
        *counter = in->error.code == 70 ? "crc_flit" : "replay";
        return true;
    case 3:   /* DCGM_FR_PCI_REPLAY_RATE */
    case 104: /* DCGM_FR_PCIE_REPLAY_VIOLATION */
    case 107: /* DCGM_FR_PCIE_REPLAY_THRESHOLD_VIOLATION */
        s->kind = GH_KIND_PCIE;
        s->has_count = true;
        s->count = 0;
        *counter = "replay";
        return true;
    default:
        return false;
    }
}

static bool key_in(const struct incident_key *set, unsigned n, const struct incident_key *k)
{
    for (unsigned i = 0; i < n; i++)
        if (memcmp(&set[i], k, sizeof *k) == 0)
            return true;
    return false;
}

int gh_dcgm_health_check_once(struct gh_dcgm_health *h, struct gh_err *err)
{
    static const int versions[2] = {5, 4};
    struct incident_key now_set[INCIDENT_SET_MAX];
    unsigned nnow = 0, count, max = 0;
    dcgmReturn_t r = DCGM_ST_VER_MISMATCH;
    int rc = GH_OK;
    int64_t now;

    pthread_mutex_lock(&h->mu);
    if (h->version < 0) {
        rc = gh_err_set(err, GH_EUNSUPPORTED, "DCGM: no known health response version accepted");
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        int v = versions[k];
        max = v == 5 ? INCIDENTS_V5 : INCIDENTS_V4;
        if (h->version && h->version != v)
            continue;
        memset(h->resp, 0, offsetof(gh_dcgmHealthResponse_v5, incidents));
        h->resp->version = MAKE_DCGM_VERSION(RESPONSE_SIZE(max), v);
        r = h->fn.health_check(h->handle, DCGM_GROUP_ALL_GPUS, h->resp);
        if (r != DCGM_ST_VER_MISMATCH) {
            h->version = v;
            break;
        }
    }
    if (r == DCGM_ST_VER_MISMATCH) {
        h->version = -1;
        rc = gh_err_set(err, GH_EUNSUPPORTED,
                        "DCGM: dcgmHealthCheck accepts neither response v5 nor v4; DCGM health "
                        "watches disabled (use the dcgm-exporter scrape)");
        goto out;
    }
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_EIO, "DCGM: dcgmHealthCheck failed: %s (%d)", dcgm_str(h, r), r);
        goto out;
    }
    count = h->resp->incidentCount < max ? h->resp->incidentCount : max;
    now = gh_clock_now(h->clock);
    for (unsigned i = 0; i < count; i++) {
        gh_dcgmIncidentInfo_t *in = &h->resp->incidents[i];
        struct incident_key key = {in->entityInfo.entityGroupId, in->entityInfo.entityId,
                                   in->system, in->error.code};
        struct gh_signal s;
        const char *counter;
        char msg[MSG_MAX];
        int gpu;

        if (in->health == DCGM_HEALTH_RESULT_PASS)
            continue;
        in->error.msg[sizeof in->error.msg - 1] = '\0';
        if (key_in(now_set, nnow, &key))
            continue;
        if (nnow < INCIDENT_SET_MAX)
            now_set[nnow++] = key;
        if (key_in(h->active, h->nactive, &key))
            continue; /* reported while it lasts */
        gh_signal_init(&s);
        if (!map_incident(in, &s, &counter))
            continue;
        gpu = key.group == DCGM_FE_GPU && key.entity < GH_DCGM_MAX_GPUS ? (int)key.entity : -1;
        s.ts_ns = now;
        s.source = GH_SRC_DCGM;
        s.gpu = gpu;
        /* DCGM's text is ASCII in practice; keep only printable ASCII. */
        snprintf(msg, sizeof msg, "DCGM health (system 0x%x, code %u, %s): %.400s", key.system,
                 key.code, in->health >= 20 ? "fail" : "warn", in->error.msg);
        for (char *p = msg; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                *p = ' ';
        if (emit_signal(h->emit, h->emit_ctx, &s, h->node, NULL, counter, msg) != GH_OK)
            rc = gh_err_set(err, GH_ENOMEM, "DCGM: out of memory building a signal");
    }
    memcpy(h->active, now_set, nnow * sizeof now_set[0]);
    h->nactive = nnow;
out:
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void health_tick(void *arg, struct gh_worker *w)
{
    (void)w;
    gh_dcgm_health_check_once(arg, NULL);
}

int gh_dcgm_health_new(const struct gh_dcgm_health_opts *opts, struct gh_dcgm_health **out,
                       struct gh_err *err)
{
    static const char *const defaults[] = {"libdcgm.so.4", "libdcgm.so.3"};
    struct gh_dcgm_health *h;
    char why[256] = "";
    dcgmReturn_t r;
    int rc;

    *out = NULL;
    if (!opts || !opts->emit || !opts->node || !opts->node[0])
        return gh_err_set(err, GH_EINVAL, "DCGM: node and emit are required");
    if (opts->interval_ns < 0)
        return gh_err_set(err, GH_EINVAL, "DCGM: negative interval");
    h = calloc(1, sizeof *h);
    if (!h)
        return gh_err_set(err, GH_ENOMEM, "DCGM: out of memory");
    if (pthread_mutex_init(&h->mu, NULL)) {
        free(h);
        return gh_err_set(err, GH_EIO, "DCGM: mutex init failed");
    }
    h->node = strdup(opts->node);
    h->resp = malloc(sizeof *h->resp);
    h->clock = opts->clock ? opts->clock : gh_clock_real();
    h->emit = opts->emit;
    h->emit_ctx = opts->emit_ctx;
    if (!h->node || !h->resp) {
        rc = gh_err_set(err, GH_ENOMEM, "DCGM: out of memory");
        goto fail;
    }
    if (opts->lib_path && opts->lib_path[0]) {
        dlerror();
        h->dl = dlopen(opts->lib_path, RTLD_NOW | RTLD_LOCAL);
        if (!h->dl) {
            const char *e = dlerror();
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: %s not found (dlopen: %s); DCGM health watches disabled",
                            opts->lib_path, e ? e : "?");
            goto fail;
        }
    } else {
        for (size_t i = 0; i < 2 && !h->dl; i++) {
            dlerror();
            h->dl = dlopen(defaults[i], RTLD_NOW | RTLD_LOCAL);
            if (!h->dl && i == 0) {
                const char *e = dlerror();
                snprintf(why, sizeof why, "%s", e ? e : "?");
            }
        }
        if (!h->dl) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: libdcgm.so.4 / libdcgm.so.3 not found (dlopen: %s); DCGM "
                            "health watches disabled",
                            why);
            goto fail;
        }
    }
#define SYM(field, name) *(void **)&h->fn.field = dlsym(h->dl, name)
    SYM(init, "dcgmInit");
    SYM(shutdown, "dcgmShutdown");
    SYM(start_embedded, "dcgmStartEmbedded");
    SYM(stop_embedded, "dcgmStopEmbedded");
    SYM(connect, "dcgmConnect");
    SYM(disconnect, "dcgmDisconnect");
    SYM(health_set, "dcgmHealthSet");
    SYM(health_check, "dcgmHealthCheck");
    SYM(error_string, "errorString");
#undef SYM
    if (!h->fn.init || !h->fn.shutdown || !h->fn.health_set || !h->fn.health_check ||
        (opts->hostengine ? !h->fn.connect || !h->fn.disconnect
                          : !h->fn.start_embedded || !h->fn.stop_embedded)) {
        rc = gh_err_set(err, GH_ENOTFOUND,
                        "DCGM: the library lacks a needed symbol; DCGM health watches disabled");
        goto fail;
    }
    r = h->fn.init();
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_ENOTFOUND,
                        "DCGM: dcgmInit failed: %s (%d); DCGM health watches disabled",
                        dcgm_str(h, r), r);
        goto fail;
    }
    h->inited = true;
    if (opts->hostengine) {
        r = h->fn.connect(opts->hostengine, &h->handle);
        if (r != DCGM_ST_OK) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: cannot connect to nv-hostengine at %s: %s (%d); DCGM health "
                            "watches disabled",
                            opts->hostengine, dcgm_str(h, r), r);
            goto fail;
        }
        h->connected = true;
    } else {
        r = h->fn.start_embedded(DCGM_OPERATION_MODE_AUTO, &h->handle);
        if (r != DCGM_ST_OK) {
            rc = gh_err_set(err, GH_ENOTFOUND,
                            "DCGM: cannot start the embedded host engine: %s (%d); DCGM health "
                            "watches disabled",
                            dcgm_str(h, r), r);
            goto fail;
        }
        h->embedded = true;
    }
    r = h->fn.health_set(h->handle, DCGM_GROUP_ALL_GPUS, GH_DCGM_WATCHES);
    if (r != DCGM_ST_OK) {
        rc = gh_err_set(err, GH_EIO, "DCGM: dcgmHealthSet failed: %s (%d)", dcgm_str(h, r), r);
        goto fail;
    }
    struct gh_worker_opts wo = {.name = "DCGM health checker",
                                .period_ns = opts->interval_ns ? opts->interval_ns
                                                               : 10 * GH_NS_PER_S,
                                .cadence = GH_WORKER_RATE, .run = health_tick, .arg = h};
    if ((rc = gh_worker_new(&wo, &h->worker, err)))
        goto fail;
    *out = h;
    return GH_OK;
fail:
    gh_dcgm_health_free(h);
    return rc;
}

int gh_dcgm_health_start(struct gh_dcgm_health *h, struct gh_err *err)
{
    return gh_worker_start(h->worker, err);
}

void gh_dcgm_health_stop(struct gh_dcgm_health *h)
{
    if (h)
        gh_worker_stop(h->worker);
}

void gh_dcgm_health_free(struct gh_dcgm_health *h)
{
    if (!h)
        return;
    gh_worker_free(h->worker); /* stops it first */
    if (h->embedded)
        h->fn.stop_embedded(h->handle);
    if (h->connected)
        h->fn.disconnect(h->handle);
    if (h->inited)
        h->fn.shutdown();
    if (h->dl)
        dlclose(h->dl);
    pthread_mutex_destroy(&h->mu);
    free(h->resp);
    free(h->node);
    free(h);
}
