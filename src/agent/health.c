/* health.c - node-local GPU health: per-GPU conditions from hardware signals
 * and NVML snapshots (rules in health.h), GPU identity resolution, bounded
 * evidence rings. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/health.h"
#include "common/pci.h"
#include "signal/xid_catalog.h"

#define NEVER INT64_MIN
#define SBE_RING 16

struct ring {
    int n, cap;
    struct gh_signal sig[GH_HEALTH_EVIDENCE_CAP];
    uint64_t seq[GH_HEALTH_EVIDENCE_CAP]; /* arrival order, 1.. */
};

/* One reason's record. events: ts of the latest trigger (NEVER = none);
 * levels: ts of the onset (NEVER = off). seq: the evidence that caused it
 * (pinned in the ring while active; 0 = none). */
struct cond {
    int64_t ts;
    int code;
    uint64_t seq;
    char what[200];
};

struct counter {
    bool has;
    int64_t count, ts;
};

struct entry {
    bool used;
    int index;               /* -1 = not learned */
    bool has_pci;
    uint64_t pci_key;
    char pci[32];
    char uuid[96];
    int64_t clear_ts;        /* latest reset / passing probe */
    int64_t lost_clear_ts;   /* latest "answers again" snapshot */
    bool snap_seen, snap_lost;
    struct cond c[GH_HR__COUNT];
    int64_t remap_ts;        /* reading time of the remap levels */
    bool remap_pending, remap_failure;
    int64_t thr_ts[2];       /* [0] thermal, [1] power: reading time */
    bool throttled[2];
    int64_t thr_since[2];
    double thr_val[2];
    struct counter dbe[2], sbe[2]; /* [0] aggregate, [1] volatile */
    int sbe_n, sbe_head;
    int64_t sbe_t[SBE_RING], sbe_d[SBE_RING];
    int sbe_v[SBE_RING];
    bool has_dbe_show;
    int64_t dbe_show;
    bool has_last_xid;
    int last_xid;
    int64_t last_xid_ts;
    int64_t last_signal_ns;
    struct ring ev;
};

struct gh_health {
    const struct gh_clock *clock;
    int64_t hold_ns, sustain_ns, sbe_window_ns, sbe_burst;
    struct entry e[GH_HEALTH_MAX_GPUS];
    struct ring node_ev;
    uint64_t gen, seq;
    struct gh_health_stats st;
};

static const char *const reason_names[GH_HR__COUNT] = {
    [GH_HR_NONE] = "AllGPUsHealthy",
    [GH_HR_LINK_ERRORS] = "LinkErrors",
    [GH_HR_THROTTLED] = "Throttled",
    [GH_HR_ECC_CORRECTABLE] = "EccCorrectableBurst",
    [GH_HR_XID_LOW] = "XidLow",
    [GH_HR_XID_MEDIUM] = "XidMedium",
    [GH_HR_ROW_REMAP_PENDING] = "RowRemapPending",
    [GH_HR_PROBE_FAILED] = "ProbeFailed",
    [GH_HR_PCIE_FATAL] = "PCIeFatal",
    [GH_HR_XID_HIGH] = "XidHigh",
    [GH_HR_ROW_REMAP_FAILURE] = "RowRemapFailure",
    [GH_HR_ECC_DOUBLE_BIT] = "EccDoubleBit",
    [GH_HR_XID_CRITICAL] = "XidCritical",
    [GH_HR_GPU_LOST] = "GPULost",
};

const char *gh_gpu_state_name(enum gh_gpu_state s)
{
    switch (s) {
    case GH_GPU_HEALTHY: return "healthy";
    case GH_GPU_DEGRADED: return "degraded";
    case GH_GPU_UNHEALTHY: return "unhealthy";
    case GH_GPU_LOST: return "lost";
    }
    return "unknown";
}

const char *gh_gpu_state_crd(enum gh_gpu_state s)
{
    switch (s) {
    case GH_GPU_HEALTHY: return "Healthy";
    case GH_GPU_DEGRADED: return "Degraded";
    case GH_GPU_UNHEALTHY: return "Failed";
    case GH_GPU_LOST: return "Lost";
    }
    return "Unknown";
}

const char *gh_health_reason_name(enum gh_health_reason r)
{
    return r >= 0 && r < GH_HR__COUNT ? reason_names[r] : "Unknown";
}

enum gh_gpu_state gh_health_reason_state(enum gh_health_reason r)
{
    if (r >= GH_HR_GPU_LOST)
        return GH_GPU_LOST;
    if (r >= GH_HR_PROBE_FAILED)
        return GH_GPU_UNHEALTHY;
    if (r > GH_HR_NONE)
        return GH_GPU_DEGRADED;
    return GH_GPU_HEALTHY;
}

static bool is_decaying(enum gh_health_reason r)
{
    return r == GH_HR_LINK_ERRORS || r == GH_HR_ECC_CORRECTABLE || r == GH_HR_XID_LOW ||
           r == GH_HR_XID_MEDIUM;
}

static bool is_level(enum gh_health_reason r)
{
    return r == GH_HR_ROW_REMAP_PENDING || r == GH_HR_ROW_REMAP_FAILURE || r == GH_HR_THROTTLED;
}

/* ---- setup ---- */

static void entry_reset(struct entry *e, int cap)
{
    for (int i = 0; i < e->ev.n; i++)
        gh_signal_clear(&e->ev.sig[i]);
    memset(e, 0, sizeof *e);
    e->index = -1;
    e->clear_ts = e->lost_clear_ts = NEVER;
    e->remap_ts = e->thr_ts[0] = e->thr_ts[1] = NEVER;
    e->last_xid_ts = NEVER;
    for (int r = 0; r < GH_HR__COUNT; r++) {
        e->c[r].ts = NEVER;
        e->c[r].code = -1;
    }
    e->ev.cap = cap;
}

int gh_health_new(const struct gh_health_opts *opts, struct gh_health **out, struct gh_err *err)
{
    *out = NULL;
    struct gh_health_opts o = {0};
    if (opts)
        o = *opts;
    if (o.evidence_per_gpu < 0 || o.evidence_per_gpu > GH_HEALTH_EVIDENCE_CAP)
        return gh_err_set(err, GH_EINVAL, "evidence_per_gpu must be 1..%d",
                          GH_HEALTH_EVIDENCE_CAP);
    if (o.degraded_hold_ns < 0 || o.throttle_sustain_ns < 0 || o.sbe_window_ns < 0 ||
        o.sbe_burst < 0)
        return gh_err_set(err, GH_EINVAL, "negative health option");
    struct gh_health *h = calloc(1, sizeof *h);
    if (!h)
        return gh_err_set(err, GH_ENOMEM, "health state");
    h->clock = o.clock ? o.clock : gh_clock_real();
    h->hold_ns = o.degraded_hold_ns ? o.degraded_hold_ns : 30 * 60 * GH_NS_PER_S;
    h->sustain_ns = o.throttle_sustain_ns ? o.throttle_sustain_ns : 60 * GH_NS_PER_S;
    h->sbe_window_ns = o.sbe_window_ns ? o.sbe_window_ns : 3600 * GH_NS_PER_S;
    h->sbe_burst = o.sbe_burst ? o.sbe_burst : 100;
    int cap = o.evidence_per_gpu ? o.evidence_per_gpu : 8;
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        entry_reset(&h->e[i], cap);
    h->node_ev.cap = cap;
    *out = h;
    return GH_OK;
}

void gh_health_free(struct gh_health *h)
{
    if (!h)
        return;
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        for (int k = 0; k < h->e[i].ev.n; k++)
            gh_signal_clear(&h->e[i].ev.sig[k]);
    for (int k = 0; k < h->node_ev.n; k++)
        gh_signal_clear(&h->node_ev.sig[k]);
    free(h);
}

/* ---- conditions ---- */

static bool cond_active(const struct gh_health *h, const struct entry *e, int r, int64_t now)
{
    const struct cond *c = &e->c[r];
    switch (r) {
    case GH_HR_NONE:
        return false;
    case GH_HR_ROW_REMAP_PENDING:
        return e->remap_pending;
    case GH_HR_ROW_REMAP_FAILURE:
        return e->remap_failure;
    case GH_HR_THROTTLED:
        for (int k = 0; k < 2; k++)
            if (e->throttled[k] && now - e->thr_since[k] >= h->sustain_ns)
                return true;
        return false;
    case GH_HR_GPU_LOST:
        return c->ts != NEVER && c->ts > e->clear_ts && c->ts > e->lost_clear_ts;
    default:
        if (c->ts == NEVER || c->ts <= e->clear_ts)
            return false;
        return !is_decaying(r) || now - c->ts < h->hold_ns;
    }
}

static enum gh_health_reason worst(const struct gh_health *h, const struct entry *e, int64_t now)
{
    for (int r = GH_HR__COUNT - 1; r > GH_HR_NONE; r--)
        if (cond_active(h, e, r, now))
            return r;
    return GH_HR_NONE;
}

/* Records an event (or a level's onset) of reason r at ts. */
static void cond_set(struct entry *e, int r, int64_t ts, int code, uint64_t seq, const char *what)
{
    struct cond *c = &e->c[r];
    if (!is_level(r) && c->ts != NEVER && ts < c->ts)
        return; /* an older trigger than the one held */
    c->ts = ts;
    c->code = code;
    c->seq = seq;
    snprintf(c->what, sizeof c->what, "%s", what);
}

/* ---- evidence ---- */

static bool pinned(const struct gh_health *h, const struct entry *e, uint64_t seq, int64_t now)
{
    if (!e || !seq)
        return false;
    for (int r = 1; r < GH_HR__COUNT; r++)
        if (e->c[r].seq == seq && cond_active(h, e, r, now))
            return true;
    return false;
}

/* Cuts s at max bytes on a UTF-8 character boundary. */
static void cut_utf8(char *s, size_t max)
{
    if (!s || strlen(s) <= max)
        return;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Duplicates: the same id, or without ids the same observation. */
static bool same_signal(const struct gh_signal *a, const struct gh_signal *b)
{
    if (a->id || b->id)
        return a->id && b->id && strcmp(a->id, b->id) == 0;
    return a->ts_ns == b->ts_ns && a->source == b->source && a->kind == b->kind &&
           a->code == b->code && a->has_count == b->has_count && a->count == b->count &&
           a->bits == b->bits && a->is_volatile == b->is_volatile && a->pending == b->pending &&
           a->failure == b->failure && a->uncorrectable == b->uncorrectable &&
           a->has_link == b->has_link && a->link == b->link && a->throttled == b->throttled &&
           a->passed == b->passed && str_eq(a->counter, b->counter) &&
           str_eq(a->check, b->check) && str_eq(a->msg, b->msg);
}

static bool ring_has(const struct ring *rg, const struct gh_signal *s)
{
    for (int i = 0; i < rg->n; i++)
        if (same_signal(&rg->sig[i], s))
            return true;
    return false;
}

/* Adds a copy of s (gpu set to index) to the ring, evicting the oldest
 * entry that no active condition of e points at (else the oldest). Returns
 * the new entry's seq, or 0 when the copy failed. */
static uint64_t ring_add(struct gh_health *h, struct ring *rg, struct entry *e,
                         const struct gh_signal *s, int index)
{
    struct gh_signal copy;
    if (gh_signal_copy(&copy, s, NULL) != GH_OK) {
        h->st.evidence_dropped++;
        return 0;
    }
    cut_utf8(copy.msg, GH_HEALTH_TEXT_MAX);
    cut_utf8(copy.detail, GH_HEALTH_TEXT_MAX);
    if (index >= 0)
        copy.gpu = index;
    if (rg->n == rg->cap) {
        int64_t now = gh_clock_now(h->clock);
        int victim = 0;
        for (int i = 0; i < rg->n; i++)
            if (!pinned(h, e, rg->seq[i], now)) {
                victim = i;
                break;
            }
        gh_signal_clear(&rg->sig[victim]);
        memmove(&rg->sig[victim], &rg->sig[victim + 1],
                (size_t)(rg->n - victim - 1) * sizeof rg->sig[0]);
        memmove(&rg->seq[victim], &rg->seq[victim + 1],
                (size_t)(rg->n - victim - 1) * sizeof rg->seq[0]);
        rg->n--;
        h->st.evidence_dropped++;
    }
    rg->sig[rg->n] = copy;
    rg->seq[rg->n] = ++h->seq;
    rg->n++;
    return h->seq;
}

/* ---- identity ---- */

/* pci (NULL allowed) in the canonical form and its device key. */
static bool pci_parse(const char *s, uint64_t *key, char *canon, size_t cap)
{
    struct gh_pci a;
    if (!s || !gh_pci_canon(s, strlen(s), &a, canon, cap))
        return false;
    *key = gh_pci_device_key(&a);
    return true;
}

static int by_index(const struct gh_health *h, int index)
{
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        if (h->e[i].used && h->e[i].index == index)
            return i;
    return -1;
}

static int alloc_entry(struct gh_health *h, int index)
{
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        if (!h->e[i].used) {
            h->e[i].used = true;
            h->e[i].index = index;
            return i;
        }
    return -1;
}

static bool pci_match(const struct entry *e, bool has, uint64_t key)
{
    return has && e->has_pci && e->pci_key == key;
}

static bool uuid_match(const struct entry *e, const char *uuid)
{
    return uuid && *uuid && e->uuid[0] && strcasecmp(e->uuid, uuid) == 0;
}

static void merge_counter(struct counter *d, const struct counter *s)
{
    if (s->has && (!d->has || s->ts > d->ts))
        *d = *s;
}

/* Moves src's state into dst (dst has the index) and frees src. */
static void merge(struct gh_health *h, struct entry *d, struct entry *s)
{
    h->st.merges++;
    if (s->clear_ts > d->clear_ts)
        d->clear_ts = s->clear_ts;
    if (s->lost_clear_ts > d->lost_clear_ts)
        d->lost_clear_ts = s->lost_clear_ts;
    for (int r = 1; r < GH_HR__COUNT; r++)
        if (!is_level(r) && s->c[r].ts != NEVER && (d->c[r].ts == NEVER || s->c[r].ts > d->c[r].ts))
            d->c[r] = s->c[r];
    if (s->remap_ts != NEVER && s->remap_ts > d->remap_ts) {
        d->remap_ts = s->remap_ts;
        d->remap_pending = s->remap_pending;
        d->remap_failure = s->remap_failure;
        d->c[GH_HR_ROW_REMAP_PENDING] = s->c[GH_HR_ROW_REMAP_PENDING];
        d->c[GH_HR_ROW_REMAP_FAILURE] = s->c[GH_HR_ROW_REMAP_FAILURE];
    }
    for (int k = 0; k < 2; k++) {
        if (s->thr_ts[k] != NEVER && s->thr_ts[k] > d->thr_ts[k]) {
            d->thr_ts[k] = s->thr_ts[k];
            d->throttled[k] = s->throttled[k];
            d->thr_since[k] = s->thr_since[k];
            d->thr_val[k] = s->thr_val[k];
            d->c[GH_HR_THROTTLED] = s->c[GH_HR_THROTTLED];
        }
        merge_counter(&d->dbe[k], &s->dbe[k]);
        merge_counter(&d->sbe[k], &s->sbe[k]);
    }
    for (int i = 0; i < s->sbe_n && d->sbe_n < SBE_RING; i++) {
        int j = (s->sbe_head + SBE_RING - s->sbe_n + i) % SBE_RING;
        d->sbe_t[d->sbe_head] = s->sbe_t[j];
        d->sbe_d[d->sbe_head] = s->sbe_d[j];
        d->sbe_v[d->sbe_head] = s->sbe_v[j];
        d->sbe_head = (d->sbe_head + 1) % SBE_RING;
        d->sbe_n++;
    }
    if (s->has_dbe_show && (!d->has_dbe_show || s->dbe_show > d->dbe_show)) {
        d->has_dbe_show = true;
        d->dbe_show = s->dbe_show;
    }
    if (s->has_last_xid && s->last_xid_ts > d->last_xid_ts) {
        d->has_last_xid = true;
        d->last_xid = s->last_xid;
        d->last_xid_ts = s->last_xid_ts;
    }
    if (s->last_signal_ns > d->last_signal_ns)
        d->last_signal_ns = s->last_signal_ns;
    if (!d->has_pci && s->has_pci) {
        d->has_pci = true;
        d->pci_key = s->pci_key;
        memcpy(d->pci, s->pci, sizeof d->pci);
    }
    if (!d->uuid[0])
        memcpy(d->uuid, s->uuid, sizeof d->uuid);
    /* evidence: both rings by arrival, newest cap kept */
    struct ring *a = &d->ev, *b = &s->ev;
    struct gh_signal sig[2 * GH_HEALTH_EVIDENCE_CAP];
    uint64_t seq[2 * GH_HEALTH_EVIDENCE_CAP];
    int n = 0, i = 0, j = 0;
    while (i < a->n || j < b->n) {
        bool take_a = j >= b->n || (i < a->n && a->seq[i] < b->seq[j]);
        if (take_a) {
            sig[n] = a->sig[i];
            seq[n++] = a->seq[i++];
        } else {
            sig[n] = b->sig[j];
            sig[n].gpu = d->index;
            seq[n++] = b->seq[j++];
        }
    }
    /* over the cap: the oldest go first, except what an active condition
     * points at (the XID that made the GPU fail, when probe results kept
     * coming under the other name meanwhile), as ring_add evicts */
    int64_t now = gh_clock_now(h->clock);
    while (n > a->cap) {
        int victim = 0;
        for (int k = 0; k < n; k++)
            if (!pinned(h, d, seq[k], now)) {
                victim = k;
                break;
            }
        gh_signal_clear(&sig[victim]);
        memmove(&sig[victim], &sig[victim + 1], (size_t)(n - victim - 1) * sizeof sig[0]);
        memmove(&seq[victim], &seq[victim + 1], (size_t)(n - victim - 1) * sizeof seq[0]);
        n--;
        h->st.evidence_dropped++;
    }
    a->n = n;
    memcpy(a->sig, sig, (size_t)a->n * sizeof sig[0]);
    memcpy(a->seq, seq, (size_t)a->n * sizeof seq[0]);
    b->n = 0;
    entry_reset(s, a->cap);
}

/* Slot index i has index `index` and is named by pci/uuid too: merges
 * index-less entries with that name into it, and takes the name away from
 * an entry with another index (the newer fact wins). */
static bool learn(struct gh_health *h, int i, const char *pci, const char *uuid)
{
    bool changed = false;
    uint64_t key = 0;
    char canon[32];
    bool has = pci_parse(pci, &key, canon, sizeof canon);
    struct entry *d = &h->e[i];
    for (int k = 0; k < GH_HEALTH_MAX_GPUS; k++) {
        struct entry *o = &h->e[k];
        if (k == i || !o->used)
            continue;
        bool pm = pci_match(o, has, key), um = uuid_match(o, uuid);
        if (!pm && !um)
            continue;
        changed = true;
        if (o->index < 0) {
            merge(h, d, o);
            continue;
        }
        if (pm)
            o->has_pci = false, o->pci[0] = '\0';
        if (um)
            o->uuid[0] = '\0';
    }
    if (has && (!d->has_pci || d->pci_key != key)) {
        d->has_pci = true;
        d->pci_key = key;
        memcpy(d->pci, canon, sizeof d->pci);
        changed = true;
    }
    if (uuid && *uuid && strcasecmp(d->uuid, uuid) != 0) {
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
        changed = true;
    }
    return changed;
}

/* The entry a (gpu, pci, uuid) names, created when new. Returns the slot,
 * -1 when nothing names a GPU, -2 when over a limit. *changed is set when
 * an entry or a mapping was created. */
static int resolve(struct gh_health *h, int gpu, const char *pci, const char *uuid, bool *changed)
{
    if (gpu >= GH_HEALTH_MAX_GPUS)
        return -2;
    if (gpu >= 0) {
        int i = by_index(h, gpu);
        if (i < 0) {
            i = alloc_entry(h, gpu);
            if (i < 0)
                return -2;
            *changed = true;
        }
        if ((pci && *pci) || (uuid && *uuid))
            *changed |= learn(h, i, pci, uuid);
        return i;
    }
    uint64_t key = 0;
    char canon[32] = "";
    bool has = pci_parse(pci, &key, canon, sizeof canon);
    bool has_uuid = uuid && *uuid;
    if (!has && !has_uuid)
        return -1;
    int found = -1;
    for (int k = 0; k < GH_HEALTH_MAX_GPUS && found < 0; k++)
        if (h->e[k].used && (pci_match(&h->e[k], has, key) || uuid_match(&h->e[k], uuid)))
            found = k;
    if (found >= 0) {
        struct entry *e = &h->e[found];
        if (e->index >= 0) {
            /* both names given: the index entry may learn the other one */
            if ((has && !e->has_pci) || (has_uuid && !e->uuid[0]))
                *changed |= learn(h, found, has ? pci : NULL, has_uuid ? uuid : NULL);
        } else {
            if (has && !e->has_pci) {
                e->has_pci = true;
                e->pci_key = key;
                memcpy(e->pci, canon, sizeof e->pci);
                *changed = true;
            }
            if (has_uuid && !e->uuid[0]) {
                snprintf(e->uuid, sizeof e->uuid, "%s", uuid);
                *changed = true;
            }
        }
        return found;
    }
    int i = alloc_entry(h, -1);
    if (i < 0)
        return -2;
    struct entry *e = &h->e[i];
    if (has) {
        e->has_pci = true;
        e->pci_key = key;
        memcpy(e->pci, canon, sizeof e->pci);
    } else if (pci && *pci) {
        snprintf(e->pci, sizeof e->pci, "%s", pci); /* unparsable: shown as given */
    }
    if (has_uuid)
        snprintf(e->uuid, sizeof e->uuid, "%s", uuid);
    *changed = true;
    return i;
}

/* ---- signals ---- */

static bool hardware_kind(enum gh_kind k)
{
    switch (k) {
    case GH_KIND_XID:
    case GH_KIND_SXID:
    case GH_KIND_ECC:
    case GH_KIND_ROW_REMAP:
    case GH_KIND_GPU_LOST:
    case GH_KIND_NVLINK:
    case GH_KIND_PCIE:
    case GH_KIND_THERMAL:
    case GH_KIND_POWER:
    case GH_KIND_PROBE_RESULT:
        return true;
    default:
        return false;
    }
}

static bool fatal_counter(const char *c)
{
    return c && (strcasestr(c, "uncorrectable") || strcasestr(c, "fatal") ||
                 strcasestr(c, "surprise_down"));
}

static void on_xid(struct entry *e, const struct gh_signal *s, uint64_t seq)
{
    if (s->ts_ns >= e->last_xid_ts) {
        e->has_last_xid = true;
        e->last_xid = s->code;
        e->last_xid_ts = s->ts_ns;
    }
    const struct gh_xid_info *x = gh_xid_lookup(s->code);
    if (x->application || x->secondary || (x->severity <= GH_SEV_INFO && x->code >= 0))
        return;
    int r;
    switch (x->severity) {
    case GH_SEV_CRITICAL: r = GH_HR_XID_CRITICAL; break;
    case GH_SEV_HIGH: r = GH_HR_XID_HIGH; break;
    case GH_SEV_MEDIUM: r = GH_HR_XID_MEDIUM; break;
    default: r = GH_HR_XID_LOW; break;
    }
    char what[200];
    snprintf(what, sizeof what, "XID %d (%s), %s", s->code,
             x->code >= 0 ? x->summary : "not in the catalog", gh_severity_name(x->severity));
    cond_set(e, r, s->ts_ns, s->code, seq, what);
}

static void on_ecc(struct gh_health *h, struct entry *e, const struct gh_signal *s, uint64_t seq)
{
    int v = s->is_volatile ? 1 : 0;
    char what[200];
    if (s->bits == GH_ECC_DOUBLE) {
        bool news;
        if (!s->has_count) {
            news = true;
        } else {
            struct counter *c = &e->dbe[v];
            if (c->has && s->ts_ns < c->ts)
                return; /* an older reading */
            int64_t prev = c->has ? c->count : -1;
            c->has = true;
            c->count = s->count;
            c->ts = s->ts_ns;
            if (!e->has_dbe_show || s->count > e->dbe_show) {
                e->has_dbe_show = true;
                e->dbe_show = s->count;
            }
            /* volatile counts are since the driver loaded: any is news;
             * an aggregate one carries history: only a rise is */
            news = prev >= 0 ? s->count > prev : (v == 1 && s->count > 0);
        }
        if (!news)
            return;
        if (s->has_count)
            snprintf(what, sizeof what, "uncorrectable (double-bit) ECC errors, %s count %" PRId64,
                     v ? "volatile" : "aggregate", s->count);
        else
            snprintf(what, sizeof what, "uncorrectable (double-bit) ECC error");
        cond_set(e, GH_HR_ECC_DOUBLE_BIT, s->ts_ns, -1, seq, what);
        return;
    }
    int64_t delta = 1;
    if (s->has_count) {
        struct counter *c = &e->sbe[v];
        if (c->has && s->ts_ns < c->ts)
            return;
        delta = c->has && s->count > c->count ? s->count - c->count : 0;
        c->has = true;
        c->count = s->count;
        c->ts = s->ts_ns;
    }
    if (delta <= 0)
        return;
    e->sbe_t[e->sbe_head] = s->ts_ns;
    e->sbe_d[e->sbe_head] = delta;
    e->sbe_v[e->sbe_head] = v;
    e->sbe_head = (e->sbe_head + 1) % SBE_RING;
    if (e->sbe_n < SBE_RING)
        e->sbe_n++;
    int64_t sum = 0;
    for (int i = 0; i < e->sbe_n; i++) {
        int j = (e->sbe_head + SBE_RING - 1 - i) % SBE_RING;
        if (e->sbe_v[j] == v && e->sbe_t[j] > s->ts_ns - h->sbe_window_ns &&
            e->sbe_t[j] <= s->ts_ns && e->sbe_t[j] > e->clear_ts)
            sum += e->sbe_d[j];
    }
    if (sum < h->sbe_burst)
        return;
    snprintf(what, sizeof what, "%" PRId64 " correctable ECC errors within %" PRId64 " s", sum,
             (int64_t)(h->sbe_window_ns / GH_NS_PER_S));
    cond_set(e, GH_HR_ECC_CORRECTABLE, s->ts_ns, -1, seq, what);
}

static void on_remap(struct entry *e, const struct gh_signal *s, bool pending, bool failure,
                     int64_t ts, uint64_t seq, const char *mechanism)
{
    if (e->remap_ts != NEVER && ts < e->remap_ts)
        return;
    char what[200];
    e->remap_ts = ts;
    if (failure && !e->remap_failure) {
        snprintf(what, sizeof what, "%s failed (%" PRId64 " uncorrectable rows): no spare rows left",
                 mechanism, s ? s->uncorrectable : 0);
        cond_set(e, GH_HR_ROW_REMAP_FAILURE, ts, -1, seq, what);
    }
    if (pending && !e->remap_pending) {
        snprintf(what, sizeof what,
                 "%s pending (%" PRId64 " uncorrectable rows), takes effect at the next GPU reset",
                 mechanism, s ? s->uncorrectable : 0);
        cond_set(e, GH_HR_ROW_REMAP_PENDING, ts, -1, seq, what);
    }
    e->remap_failure = failure;
    e->remap_pending = pending;
}

static void on_throttle(struct entry *e, const struct gh_signal *s, uint64_t seq)
{
    int k = s->kind == GH_KIND_POWER ? 1 : 0;
    if (e->thr_ts[k] != NEVER && s->ts_ns < e->thr_ts[k])
        return;
    e->thr_ts[k] = s->ts_ns;
    e->thr_val[k] = k ? s->watts : s->celsius;
    if (s->throttled && !e->throttled[k]) {
        e->thr_since[k] = s->ts_ns;
        char what[200], t[GH_RFC3339_MAX];
        gh_time_format_rfc3339(s->ts_ns, t, sizeof t);
        if (k)
            snprintf(what, sizeof what, "power-throttled since %s (%.0f W)", t, s->watts);
        else
            snprintf(what, sizeof what, "throttled for heat since %s (%.0f C)", t, s->celsius);
        cond_set(e, GH_HR_THROTTLED, s->ts_ns, -1, seq, what);
    }
    e->throttled[k] = s->throttled;
}

static void recover(struct entry *e, int64_t ts)
{
    if (ts > e->clear_ts)
        e->clear_ts = ts;
}

int gh_health_feed(struct gh_health *h, const struct gh_signal *s, struct gh_err *err)
{
    if (!hardware_kind(s->kind)) {
        h->st.ignored++;
        return GH_OK;
    }
    bool changed = false;
    int i = resolve(h, s->gpu, s->pci, s->uuid, &changed);
    if (i < 0) {
        int rc = GH_OK;
        if (i == -2) {
            h->st.over_limit++;
            rc = gh_err_set(err, GH_ELIMIT, "GPU %d: no room for it (at most %d GPUs)", s->gpu,
                            GH_HEALTH_MAX_GPUS);
        }
        if (ring_has(&h->node_ev, s)) {
            h->st.duplicates++;
            return rc;
        }
        h->st.fed++;
        h->st.node_level++;
        h->gen++;
        if (!ring_add(h, &h->node_ev, NULL, s, -1) && !rc)
            rc = gh_err_set(err, GH_ENOMEM, "evidence copy");
        return rc;
    }
    struct entry *e = &h->e[i];
    if (ring_has(&e->ev, s)) {
        h->st.duplicates++;
        if (changed)
            h->gen++;
        return GH_OK;
    }
    h->st.fed++;
    h->gen++;
    uint64_t seq = ring_add(h, &e->ev, e, s, e->index);
    if (s->ts_ns > e->last_signal_ns)
        e->last_signal_ns = s->ts_ns;
    char what[200];
    switch (s->kind) {
    case GH_KIND_XID:
        on_xid(e, s, seq);
        break;
    case GH_KIND_ECC:
        on_ecc(h, e, s, seq);
        break;
    case GH_KIND_ROW_REMAP:
        on_remap(e, s, s->pending, s->failure, s->ts_ns, seq, "row remapping");
        break;
    case GH_KIND_GPU_LOST:
        snprintf(what, sizeof what, "stopped answering (GPU lost)%s%.150s", s->msg ? ": " : "",
                 s->msg ? s->msg : "");
        cond_set(e, GH_HR_GPU_LOST, s->ts_ns, -1, seq, what);
        break;
    case GH_KIND_NVLINK:
    case GH_KIND_PCIE:
        if (s->has_count && s->count == 0)
            break;
        if (s->kind == GH_KIND_PCIE && fatal_counter(s->counter)) {
            snprintf(what, sizeof what, "PCIe %s errors (fatal)", s->counter);
            cond_set(e, GH_HR_PCIE_FATAL, s->ts_ns, -1, seq, what);
        } else {
            char link[24] = "";
            if (s->kind == GH_KIND_NVLINK && s->has_link)
                snprintf(link, sizeof link, " link %d", s->link);
            snprintf(what, sizeof what, "%s%s %s errors rose",
                     s->kind == GH_KIND_NVLINK ? "NVLink" : "PCIe", link,
                     s->counter ? s->counter : "?");
            cond_set(e, GH_HR_LINK_ERRORS, s->ts_ns, -1, seq, what);
        }
        break;
    case GH_KIND_THERMAL:
    case GH_KIND_POWER:
        on_throttle(e, s, seq);
        break;
    case GH_KIND_PROBE_RESULT:
        if (s->passed) {
            recover(e, s->ts_ns);
        } else {
            snprintf(what, sizeof what, "probe %s failed%s%.120s", s->check ? s->check : "?",
                     s->detail ? ": " : "", s->detail ? s->detail : "");
            cond_set(e, GH_HR_PROBE_FAILED, s->ts_ns, -1, seq, what);
        }
        break;
    default: /* sxid on a GPU: evidence only */
        break;
    }
    return seq ? GH_OK : gh_err_set(err, GH_ENOMEM, "evidence copy");
}

int gh_health_observe_nvml(struct gh_health *h, const struct gh_nvml_gpu_health *snap,
                           struct gh_err *err)
{
    bool changed = false;
    int i = resolve(h, snap->index, snap->pci, snap->uuid, &changed);
    if (i < 0) {
        h->st.over_limit++;
        return gh_err_set(err, i == -2 ? GH_ELIMIT : GH_EINVAL, "NVML GPU %d: %s", snap->index,
                          i == -2 ? "no room for it" : "no index");
    }
    struct entry *e = &h->e[i];
    int64_t now = gh_clock_now(h->clock);
    bool lost = cond_active(h, e, GH_HR_GPU_LOST, now);
    if (snap->lost) {
        if (!lost) {
            cond_set(e, GH_HR_GPU_LOST, now, -1, 0, "stopped answering NVML (GPU lost)");
            changed = true;
        }
    } else if (lost && e->snap_seen && e->snap_lost) {
        e->lost_clear_ts = now; /* it answers again */
        changed = true;
    }
    e->snap_seen = true;
    e->snap_lost = snap->lost;
    if (snap->has_remap || snap->has_retired) {
        bool pending = (snap->has_remap && snap->remap_pending) ||
                       (snap->has_retired && snap->retired_pending);
        bool failure = snap->has_remap && snap->remap_failure;
        if (pending != e->remap_pending || failure != e->remap_failure) {
            struct gh_signal s;
            gh_signal_init(&s);
            s.uncorrectable = snap->has_remap ? snap->remap_uncorrectable : snap->retired_dbe;
            on_remap(e, &s, pending, failure, now, 0,
                     snap->has_remap ? "row remapping" : "page retirement");
            changed = true;
        }
    }
    if (snap->has_ecc) {
        int64_t d = snap->ecc_dbe_aggregate > snap->ecc_dbe_volatile ? snap->ecc_dbe_aggregate
                                                                      : snap->ecc_dbe_volatile;
        if (!e->has_dbe_show || d > e->dbe_show) {
            e->has_dbe_show = true;
            e->dbe_show = d;
            changed = true;
        }
    }
    if (changed)
        h->gen++;
    return GH_OK;
}

void gh_health_note_reset(struct gh_health *h, int gpu, int64_t ts_ns)
{
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++) {
        struct entry *e = &h->e[i];
        if (e->used && (gpu < 0 || e->index == gpu)) {
            recover(e, ts_ns);
            h->gen++;
        }
    }
}

/* ---- reading ---- */

/* Used slots: indexed by index, then index-less by slot. Returns count. */
static int order(const struct gh_health *h, int *out)
{
    int n = 0;
    for (int idx = 0; idx < GH_HEALTH_MAX_GPUS; idx++) {
        int i = by_index(h, idx);
        if (i >= 0)
            out[n++] = i;
    }
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        if (h->e[i].used && h->e[i].index < 0)
            out[n++] = i;
    return n;
}

int gh_health_count(const struct gh_health *h)
{
    int n = 0;
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++)
        n += h->e[i].used;
    return n;
}

int gh_health_index_of(const struct gh_health *h, const char *pci, const char *uuid)
{
    uint64_t key = 0;
    char canon[GH_PCI_MAX];
    bool has = pci_parse(pci, &key, canon, sizeof canon);
    for (int k = 0; k < GH_HEALTH_MAX_GPUS; k++)
        if (h->e[k].used && h->e[k].index >= 0 &&
            (pci_match(&h->e[k], has, key) || uuid_match(&h->e[k], uuid)))
            return h->e[k].index;
    return -1;
}

int gh_health_find(const struct gh_health *h, int gpu)
{
    int ord[GH_HEALTH_MAX_GPUS], n = order(h, ord);
    for (int k = 0; k < n; k++)
        if (h->e[ord[k]].index == gpu)
            return k;
    return -1;
}

static void fill(const struct gh_health *h, const struct entry *e, int64_t now,
                 struct gh_health_gpu *g)
{
    memset(g, 0, sizeof *g);
    g->index = e->index;
    memcpy(g->pci, e->pci, sizeof g->pci);
    memcpy(g->uuid, e->uuid, sizeof g->uuid);
    g->reason = worst(h, e, now);
    g->state = gh_health_reason_state(g->reason);
    g->code = -1;
    if (g->reason != GH_HR_NONE) {
        const struct cond *c = &e->c[g->reason];
        g->code = c->code;
        snprintf(g->what, sizeof g->what, "%s", c->what);
    }
    g->has_last_xid = e->has_last_xid;
    g->last_xid = e->last_xid;
    g->has_ecc_double_bit = e->has_dbe_show;
    g->ecc_double_bit = e->dbe_show;
    g->remap_pending = e->remap_pending;
    g->remap_failure = e->remap_failure;
    g->last_signal_ns = e->last_signal_ns;
}

int gh_health_gpu_at(const struct gh_health *h, int i, struct gh_health_gpu *out)
{
    int ord[GH_HEALTH_MAX_GPUS], n = order(h, ord);
    if (i < 0 || i >= n)
        return GH_ENOTFOUND;
    fill(h, &h->e[ord[i]], gh_clock_now(h->clock), out);
    return GH_OK;
}

static void name_gpu(const struct gh_health_gpu *g, char *buf, size_t cap)
{
    if (g->index >= 0 && g->pci[0])
        snprintf(buf, cap, "GPU %d (%s)", g->index, g->pci);
    else if (g->index >= 0)
        snprintf(buf, cap, "GPU %d", g->index);
    else if (g->pci[0])
        snprintf(buf, cap, "GPU at PCI %s", g->pci);
    else
        snprintf(buf, cap, "GPU %s", g->uuid);
}

void gh_health_summarize(const struct gh_health *h, struct gh_health_summary *out)
{
    memset(out, 0, sizeof *out);
    out->gpu = -1;
    int ord[GH_HEALTH_MAX_GPUS], n = order(h, ord);
    int64_t now = gh_clock_now(h->clock);
    struct gh_health_gpu g[GH_HEALTH_MAX_GPUS];
    for (int k = 0; k < n; k++) {
        fill(h, &h->e[ord[k]], now, &g[k]);
        switch (g[k].state) {
        case GH_GPU_HEALTHY: out->healthy++; break;
        case GH_GPU_DEGRADED: out->degraded++; break;
        case GH_GPU_UNHEALTHY: out->unhealthy++; break;
        case GH_GPU_LOST: out->lost++; break;
        }
        if (g[k].index >= 0)
            out->gpus++;
        if (g[k].reason > out->reason) {
            out->reason = g[k].reason;
            out->gpu = g[k].index;
        }
    }
    out->state = gh_health_reason_state(out->reason);
    size_t len = 0, cap = sizeof out->message;
    if (out->reason == GH_HR_NONE) {
        if (n == 0)
            snprintf(out->message, cap, "no GPU observed yet");
        else
            snprintf(out->message, cap, "all %d GPUs healthy", n);
        return;
    }
    /* non-healthy GPUs, most serious first */
    for (int r = GH_HR__COUNT - 1; r > GH_HR_NONE; r--)
        for (int k = 0; k < n; k++) {
            if ((int)g[k].reason != r)
                continue;
            char name[160];
            name_gpu(&g[k], name, sizeof name);
            int w = snprintf(out->message + len, cap - len, "%s%s: %s", len ? "; " : "", name,
                             g[k].what);
            if (w < 0 || (size_t)w >= cap - len) {
                /* full: end with an ellipsis */
                if (cap > 5)
                    memcpy(out->message + cap - 5, " ...", 5);
                return;
            }
            len += (size_t)w;
        }
}

size_t gh_health_evidence(const struct gh_health *h, int i, const struct gh_signal **out,
                          size_t cap)
{
    const struct ring *rg;
    if (i < 0) {
        rg = &h->node_ev;
    } else {
        int ord[GH_HEALTH_MAX_GPUS], n = order(h, ord);
        if (i >= n)
            return 0;
        rg = &h->e[ord[i]].ev;
    }
    size_t k = 0;
    for (int j = 0; j < rg->n && k < cap; j++)
        out[k++] = &rg->sig[j];
    return k;
}

uint64_t gh_health_generation(const struct gh_health *h)
{
    return h->gen;
}

int64_t gh_health_next_change(const struct gh_health *h)
{
    int64_t now = gh_clock_now(h->clock), next = INT64_MAX;
    for (int i = 0; i < GH_HEALTH_MAX_GPUS; i++) {
        const struct entry *e = &h->e[i];
        if (!e->used)
            continue;
        for (int k = 0; k < 2; k++)
            if (e->throttled[k] && now - e->thr_since[k] < h->sustain_ns &&
                e->thr_since[k] + h->sustain_ns < next)
                next = e->thr_since[k] + h->sustain_ns;
        for (int r = 1; r < GH_HR__COUNT; r++)
            if (is_decaying(r) && cond_active(h, e, r, now) && e->c[r].ts + h->hold_ns < next)
                next = e->c[r].ts + h->hold_ns;
    }
    return next;
}

void gh_health_stats(const struct gh_health *h, struct gh_health_stats *out)
{
    *out = h->st;
}
