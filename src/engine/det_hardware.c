/* det_hardware.c - hardware findings: XID/SXID through the catalog, ECC, row
 * remapping, lost GPUs, NVLink/PCIe counter rates, sustained throttling,
 * failed probes; notes boots and hardware alerts for the other detectors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "common/strmap.h"
#include "signal/xid_catalog.h"

#define CTR_WINDOW 64 /* (ts, delta) samples kept per counter */
#define MAX_KEYS (1 << 20)

/* A counter read as cumulative: deltas between readings, summed over a window. */
struct counter {
    int64_t last;
    int64_t seen;  /* ts of the latest reading */
    bool has_last;
    bool sticky;   /* a volatile double-bit ECC count above 0: a fresh baseline
                      would report it again, so it is never forgotten */
    int n, head;
    int64_t ts[CTR_WINDOW], d[CTR_WINDOW];
};

/* Per GPU (or per node for node-level readings). */
struct gstate {
    int64_t seen;              /* ts of the latest reading */
    int64_t throttle_since[2]; /* thermal, power; INT64_MIN = not throttled */
    int64_t throttle_last[2];
    const struct gh_tl_entry *throttle_ev[2]; /* the streak's first reading (ref) */
    bool remap_pending, remap_failure, remap_seen;
    int64_t sxid_fatal_ts;     /* node level: the latest fatal SXid (0: none) */
    int n_sxid_minor;          /* node level: non-fatal SXids within the hour ... */
    int64_t sxid_minor_since;  /* ... counted since this ts */
};

#define SXID_PROPAGATION_NS (10 * GH_NS_PER_S) /* a fatal SXid shows on GPUs as XID 74 */
#define SXID_MINOR_REPEAT 5                     /* non-fatal SXids in an hour that matter */
#define SXID_MINOR_WINDOW_NS (3600 * GH_NS_PER_S)

struct hw {
    struct gh_engine *e;        /* borrowed: the engine that runs it */
    struct gh_strmap *gpus;     /* "node/gpu" -> struct gstate * */
    struct gh_strmap *counters; /* "node/gpu/kind/counter/link" -> struct counter * */
};

static int hw_create(struct gh_engine *e, void **state)
{
    struct hw *h = calloc(1, sizeof *h);
    if (!h)
        return GH_ENOMEM;
    h->e = e;
    h->gpus = gh_strmap_new(MAX_KEYS);
    h->counters = gh_strmap_new(MAX_KEYS);
    *state = h;
    return h->gpus && h->counters ? GH_OK : GH_ENOMEM;
}

static void gstate_free(struct gstate *g)
{
    if (g) {
        gh_tl_unref(g->throttle_ev[0]);
        gh_tl_unref(g->throttle_ev[1]);
    }
    free(g);
}

static void free_values(struct gh_strmap *m)
{
    if (m)
        for (size_t i = 0; i < gh_strmap_count(m); i++)
            free(gh_strmap_value(m, i));
    gh_strmap_free(m);
}

static void hw_destroy(void *state)
{
    struct hw *h = state;
    if (h->gpus)
        for (size_t i = 0; i < gh_strmap_count(h->gpus); i++)
            gstate_free(gh_strmap_value(h->gpus, i));
    gh_strmap_free(h->gpus);
    free_values(h->counters);
    free(h);
}

/* The state of GPU gpu on node ("node/gpu"; gpu -1: the node itself). */
static struct gstate *state_at(struct hw *h, const char *node, int gpu)
{
    char key[300];
    gh_strmap_key_int(key, sizeof key, node, '/', gpu); /* "%s/%d", no printf */
    bool created;
    struct gstate *g = gh_ctx_value(h->e, h->gpus, key, sizeof *g, NULL, &created);
    if (g && created) {
        g->throttle_since[0] = g->throttle_since[1] = INT64_MIN;
        g->throttle_last[0] = g->throttle_last[1] = INT64_MIN;
    }
    return g;
}

static struct gstate *gpu_state(struct hw *h, const struct gh_signal *s)
{
    return state_at(h, s->node, s->gpu);
}

/* Feeds a cumulative reading; returns the increase now (*delta) and the sum
 * of increases within window ending at ts. The first reading is a baseline
 * (device counters count since boot) unless from_zero (a count of logged
 * events, which the kernel-log parser starts at 0: its first reading is all
 * new); a drop means a reset: the new value is the increase. */
static int64_t counter_feed(struct counter *c, int64_t ts, int64_t value, int64_t window,
                            bool from_zero, int64_t *delta)
{
    int64_t d = c->has_last || !from_zero ? 0 : value;
    if (c->has_last)
        d = value >= c->last ? value - c->last : value;
    c->last = value;
    c->has_last = true;
    c->seen = ts;
    *delta = d;
    if (d > 0) {
        int idx = (c->head + c->n) % CTR_WINDOW;
        if (c->n == CTR_WINDOW) {
            c->head = (c->head + 1) % CTR_WINDOW;
            c->n--;
        }
        c->ts[idx] = ts;
        c->d[idx] = d;
        c->n++;
    }
    int64_t sum = 0;
    for (int i = 0; i < c->n; i++) {
        int k = (c->head + i) % CTR_WINDOW;
        if (c->ts[k] > ts - window)
            sum += c->d[k];
    }
    return sum;
}

static struct counter *counter_for(struct hw *h, const struct gh_signal *s, const char *extra)
{
    char key[400];
    gh_sfmt(key, sizeof key, "%s/%d/%s/%s/%d/%s", s->node ? s->node : "", s->gpu,
             gh_kind_name(s->kind), s->counter ? s->counter : "", s->has_link ? s->link : -1,
             extra ? extra : "");
    return gh_ctx_value(h->e, h->counters, key, sizeof(struct counter), NULL, NULL);
}

static void report_full(struct gh_engine *e, const struct gh_tl_entry *ent, enum gh_class cls,
                        enum gh_severity sev, int code, bool has_metric, double metric,
                        const char *what, const enum gh_action *req, int n_req)
{
    struct gh_finding f;
    gh_finding_init(&f);
    for (int i = 0; i < n_req && i < 4; i++)
        f.requested[f.n_requested++] = req[i];
    f.cls = cls;
    f.kind = ent->sig.kind;
    f.code = code;
    f.severity = sev;
    f.has_metric = has_metric;
    f.metric = metric;
    f.node = ent->sig.node;
    f.gpu = gh_ctx_gpu_of(e, &ent->sig);
    f.first_ts = ent->ts_ns;
    gh_finding_add(&f, ent);
    gh_sfmt(f.what, sizeof f.what, "%s", what);
    if (sev >= GH_SEV_MEDIUM && f.node)
        gh_ctx_note_hw_alert(e, f.node, ent->ts_ns);
    gh_ctx_report(e, &f);
}

static void report(struct gh_engine *e, const struct gh_tl_entry *ent, enum gh_class cls,
                   enum gh_severity sev, int code, bool has_metric, double metric, const char *what)
{
    report_full(e, ent, cls, sev, code, has_metric, metric, what, NULL, 0);
}

static void report_req(struct gh_engine *e, const struct gh_tl_entry *ent, enum gh_class cls,
                       enum gh_severity sev, int code, const char *what,
                       const enum gh_action *req, int n_req)
{
    report_full(e, ent, cls, sev, code, false, 0, what, req, n_req);
}

/* The node-level state ("node/-1"), NULL without a node. */
static struct gstate *node_state(struct hw *h, const char *node)
{
    return node ? state_at(h, node, -1) : NULL;
}

/* XID 154 names the recovery the driver now requires ("... changed from 0x0
 * (None) to 0x2 (Node Reboot Required)"): nvmlDeviceGpuRecoveryAction_t.
 * Returns how many actions it put in out; -1 when the message says none. */
static int recovery_actions(const char *msg, enum gh_action *out)
{
    const char *p = msg ? strstr(msg, " to 0x") : NULL;
    if (!p)
        return -1;
    char *end;
    long v = strtol(p + 6, &end, 16);
    if (end == p + 6)
        return -1;
    switch (v) {
    case 1: /* GPU reset */
    case 6: /* bus reset */
        out[0] = GH_ACT_RESET_GPU;
        return 1;
    case 2: /* node reboot */
    case 7: /* system reboot */
        out[0] = GH_ACT_REBOOT_NODE;
        return 1;
    case 3: /* drain peer-to-peer work */
        out[0] = GH_ACT_DRAIN_NODE;
        return 1;
    case 4: /* drain and reset */
        out[0] = GH_ACT_DRAIN_NODE;
        out[1] = GH_ACT_RESET_GPU;
        return 2;
    case 0: /* none: the earlier action is no longer needed */
        return 0;
    default:
        return -1;
    }
}

static void on_xid(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    const struct gh_xid_info *x = gh_xid_lookup(s->code);
    char where[300], what[320];
    gh_where(s->node, gh_ctx_gpu_of(e, s), where, sizeof where);
    if (x->application)
        return; /* the application detector weighs these */
    if (x->secondary) {
        /* A consequence of another fault: joins an open incident on the node
         * or is only recorded. */
        if (gh_ctx_node_episode(e, s->node, ent->ts_ns, NULL))
            gh_ctx_absorbed(e, ent);
        return;
    }
    if (x->severity <= GH_SEV_INFO && x->code >= 0)
        return;
    /* the line's own "Fatal"/"Non-fatal" over the catalog's default */
    enum gh_stated st = gh_classify_stated(s->msg);
    enum gh_severity sev = gh_classify_stated_severity(x->severity, st);
    if (s->code == 74 && s->node) {
        /* A fatal NVSwitch error reaches the GPUs as XID 74: the SXid's
         * incident is the root cause; this joins it. */
        struct gstate *n = node_state(h, s->node);
        if (n && n->sxid_fatal_ts && ent->ts_ns - n->sxid_fatal_ts <= SXID_PROPAGATION_NS &&
            gh_ctx_node_episode(e, s->node, ent->ts_ns, NULL)) {
            gh_ctx_absorbed(e, ent);
            return;
        }
    }
    enum gh_action req[4];
    int n_req = s->code == 154 ? recovery_actions(s->msg, req) : -1;
    if (n_req == 0)
        return; /* XID 154 saying no recovery is needed any more */
    gh_sfmt(what, sizeof what, "XID %d (%s) on %s: %s %s fault%s", s->code,
            x->code >= 0 ? x->summary : "not in the catalog", where, gh_severity_name(sev),
            gh_class_name(x->cls),
            sev == x->severity         ? ""
            : st == GH_STATED_NONFATAL ? " (the driver's line says non-fatal)"
                                       : " (the driver's line says fatal)");
    if (n_req > 0) {
        const char *m = strstr(s->msg, " to 0x");
        gh_sfmt(what, sizeof what, "XID 154 on %s: the driver changed the GPU's recovery action%.60s",
                 where, m);
    }
    report_req(e, ent, x->cls, sev, s->code, what, req, n_req > 0 ? n_req : 0);
}

static void on_sxid(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    enum gh_severity sev = gh_classify_sxid(s->code, s->msg);
    struct gstate *n = node_state(h, s->node);
    if (n)
        n->seen = ent->ts_ns;
    if (sev <= GH_SEV_INFO)
        return;
    char what[320];
    if (sev == GH_SEV_LOW) {
        /* Non-fatal: a link to check when it keeps coming, not at once. */
        if (!n)
            return;
        if (n->n_sxid_minor == 0 || ent->ts_ns - n->sxid_minor_since > SXID_MINOR_WINDOW_NS) {
            n->n_sxid_minor = 0;
            n->sxid_minor_since = ent->ts_ns;
        }
        if (++n->n_sxid_minor < SXID_MINOR_REPEAT)
            return;
        n->n_sxid_minor = 0;
        gh_sfmt(what, sizeof what, "%d non-fatal NVSwitch SXids (latest %d) within an hour on %s%s%s",
                 SXID_MINOR_REPEAT, s->code, s->node ? s->node : "?", s->switch_id ? " " : "",
                 s->switch_id ? s->switch_id : "");
        report(e, ent, GH_CLASS_INTERCONNECT, GH_SEV_MEDIUM, s->code, false, 0, what);
        return;
    }
    if (sev >= GH_SEV_HIGH && n)
        n->sxid_fatal_ts = ent->ts_ns;
    gh_sfmt(what, sizeof what, "%s NVSwitch SXID %d on %s%s%s",
             sev == GH_SEV_CRITICAL ? "fatal" : sev == GH_SEV_HIGH ? "potentially fatal" : "",
             s->code, s->node ? s->node : "?", s->switch_id ? " " : "",
             s->switch_id ? s->switch_id : "");
    report(e, ent, GH_CLASS_INTERCONNECT, sev, s->code, false, 0,
           what[0] == ' ' ? what + 1 : what);
}

static void on_ecc(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    char where[300], what[320];
    gh_where(s->node, s->gpu, where, sizeof where);
    if (s->bits == GH_ECC_DOUBLE) {
        bool event;
        int64_t delta = 1;
        if (!s->has_count) {
            event = true;
        } else {
            struct counter *c = counter_for(h, s, s->is_volatile ? "v" : "a");
            bool first = c && !c->has_last;
            int64_t sum = c ? counter_feed(c, ent->ts_ns, s->count, st->counter_window_ns,
                                            s->source == GH_SRC_KMSG, &delta)
                            : 0;
            (void)sum;
            if (c)
                c->sticky = s->is_volatile && s->count > 0;
            /* A volatile count is since the driver loaded: any is news. An
             * aggregate count carries history: only an increase is. */
            event = delta > 0 || (first && s->is_volatile && s->count > 0);
            if (first && s->is_volatile)
                delta = s->count;
        }
        if (!event)
            return;
        gh_sfmt(what, sizeof what, "uncorrectable (double-bit) ECC error%s on %s",
                 delta > 1 ? "s" : "", where);
        report(e, ent, GH_CLASS_GPU_MEMORY, GH_SEV_CRITICAL, -1, true, (double)delta, what);
        return;
    }
    if (!s->has_count)
        return;
    struct counter *c = counter_for(h, s, s->is_volatile ? "v" : "a");
    if (!c)
        return;
    int64_t delta, sum = counter_feed(c, ent->ts_ns, s->count, st->counter_window_ns,
                                      s->source == GH_SRC_KMSG, &delta);
    if (delta <= 0)
        return;
    gh_sfmt(what, sizeof what, "%lld correctable (single-bit) ECC errors within %llds on %s",
             (long long)sum, (long long)(st->counter_window_ns / GH_NS_PER_S), where);
    report(e, ent, GH_CLASS_GPU_MEMORY, GH_SEV_LOW, -1, true, (double)sum, what);
}

static void on_row_remap(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    struct gstate *g = gpu_state(h, s);
    if (!g)
        return;
    g->seen = ent->ts_ns;
    char where[300], what[320];
    gh_where(s->node, s->gpu, where, sizeof where);
    bool new_failure = s->failure && (!g->remap_seen || !g->remap_failure);
    bool new_pending = s->pending && (!g->remap_seen || !g->remap_pending);
    g->remap_seen = true;
    g->remap_failure = s->failure;
    g->remap_pending = s->pending;
    if (!new_failure && !new_pending)
        return;
    if (new_failure)
        gh_sfmt(what, sizeof what,
                 "row remapping failed on %s (%lld uncorrectable rows): the GPU has no spare rows left",
                 where, (long long)s->uncorrectable);
    else
        gh_sfmt(what, sizeof what,
                 "a row remap is pending on %s (%lld uncorrectable rows): it takes effect at the next GPU reset",
                 where, (long long)s->uncorrectable);
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_GPU_MEMORY;
    f.kind = s->kind;
    f.severity = new_failure ? GH_SEV_CRITICAL : GH_SEV_MEDIUM;
    f.node = s->node;
    f.gpu = s->gpu;
    /* The kernel's remap event (XID 63) or failure (XID 64) on this GPU just
     * before the NVML reading is the same event: its evidence, and first. */
    const struct gh_tl_entry *v[8];
    size_t nv = s->node ? gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE, s->node, -1,
                                            GH_KIND_BIT(GH_KIND_XID),
                                            ent->ts_ns - gh_ctx_settings(e)->counter_window_ns,
                                            ent->ts_ns, true, v, 8)
                          : 0;
    for (size_t i = 0; i < nv; i++)
        if ((v[i]->sig.code == 63 || v[i]->sig.code == 64) && gh_ctx_gpu_of(e, &v[i]->sig) == s->gpu)
            gh_finding_add(&f, v[i]);
    gh_finding_add(&f, ent);
    f.first_ts = f.evidence[0]->ts_ns;
    gh_sfmt(f.what, sizeof f.what, "%s", what);
    if (s->node)
        gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
    gh_ctx_report(e, &f);
}

static bool fatal_counter(const char *c)
{
    return c && (strcasestr(c, "uncorrectable") || strcasestr(c, "fatal") ||
                 strcasestr(c, "surprise_down") || strcasestr(c, "recovery_failed"));
}

static void on_link_counter(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    if (!s->has_count)
        return;
    struct counter *c = counter_for(h, s, NULL);
    if (!c)
        return;
    int64_t delta, sum = counter_feed(c, ent->ts_ns, s->count, st->counter_window_ns,
                                      s->source == GH_SRC_KMSG, &delta);
    if (delta <= 0)
        return;
    char where[300], what[320], link[32] = "";
    gh_where(s->node, s->gpu, where, sizeof where);
    if (s->kind == GH_KIND_NVLINK && s->has_link)
        gh_sfmt(link, sizeof link, " link %d", s->link);
    bool fatal = s->kind == GH_KIND_PCIE && fatal_counter(s->counter);
    gh_sfmt(what, sizeof what, "%s%s %s errors rose by %lld within %llds on %s",
             s->kind == GH_KIND_NVLINK ? "NVLink" : "PCIe", link, s->counter ? s->counter : "?",
             (long long)sum, (long long)(st->counter_window_ns / GH_NS_PER_S), where);
    report(e, ent, GH_CLASS_INTERCONNECT, fatal ? GH_SEV_HIGH : GH_SEV_LOW, -1, true, (double)sum,
           what);
}

static void on_throttle(struct hw *h, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    struct gstate *g = gpu_state(h, s);
    if (!g)
        return;
    g->seen = ent->ts_ns;
    int i = s->kind == GH_KIND_POWER ? 1 : 0;
    /* A gap in readings longer than the counter window breaks the streak. */
    if (g->throttle_last[i] != INT64_MIN &&
        ent->ts_ns - g->throttle_last[i] > gh_ctx_settings(e)->counter_window_ns)
        g->throttle_since[i] = INT64_MIN;
    g->throttle_last[i] = ent->ts_ns;
    if (!s->throttled)
        g->throttle_since[i] = INT64_MIN;
    if (g->throttle_since[i] == INT64_MIN && g->throttle_ev[i]) {
        gh_tl_unref(g->throttle_ev[i]);
        g->throttle_ev[i] = NULL;
    }
    if (!s->throttled)
        return;
    if (g->throttle_since[i] == INT64_MIN) {
        g->throttle_since[i] = ent->ts_ns;
        g->throttle_ev[i] = gh_tl_ref(ent);
    }
    double secs = (double)(ent->ts_ns - g->throttle_since[i]) / 1e9;
    if (secs <= 0)
        return;
    char where[300], what[320];
    gh_where(s->node, s->gpu, where, sizeof where);
    if (i == 0)
        gh_sfmt(what, sizeof what, "%s throttled for heat for %.0fs (%.0f C)", where, secs,
                 s->celsius);
    else
        gh_sfmt(what, sizeof what, "%s power-throttled for %.0fs (%.0f W)", where, secs, s->watts);
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_THERMAL_POWER;
    f.kind = s->kind;
    f.severity = GH_SEV_LOW;
    f.has_metric = true;
    f.metric = secs;
    f.node = s->node;
    f.gpu = s->gpu;
    f.first_ts = g->throttle_since[i];
    /* Evidence: the streak's first reading (the onset, first_ts), then the
     * readings of the streak the timeline still holds. */
    gh_finding_add(&f, g->throttle_ev[i]);
    const struct gh_tl_entry *v[GH_FINDING_MAX_EVIDENCE];
    size_t n = gh_timeline_query(gh_ctx_timeline(e), s->gpu >= 0 ? GH_TL_GPU : GH_TL_NODE, s->node,
                                 s->gpu, GH_KIND_BIT(s->kind), g->throttle_since[i], ent->ts_ns,
                                 false, v, GH_FINDING_MAX_EVIDENCE - 2);
    for (size_t k = 0; k < n; k++)
        if (v[k]->sig.gpu == s->gpu)
            gh_finding_add(&f, v[k]);
    gh_finding_add(&f, ent);
    gh_sfmt(f.what, sizeof f.what, "%s", what);
    gh_ctx_report(e, &f);
}

static void on_probe(struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    if (s->passed)
        return;
    const char *c = s->check ? s->check : "";
    enum gh_class cls = GH_CLASS_GPU_HARDWARE;
    if (strcasestr(c, "checksum") || strcasestr(c, "sdc") || strcasestr(c, "replay"))
        cls = GH_CLASS_SILENT_DATA_CORRUPTION;
    else if (strcasestr(c, "pcie") || strcasestr(c, "nvlink") || strcasestr(c, "p2p"))
        cls = GH_CLASS_INTERCONNECT;
    else if (strcasestr(c, "ib") == c || strcasestr(c, "nic") || strcasestr(c, "rdma") ||
             strcasestr(c, "nccl") || strcasestr(c, "net"))
        cls = GH_CLASS_NETWORK;
    else if (strcasestr(c, "mem") || strcasestr(c, "ecc"))
        cls = GH_CLASS_GPU_MEMORY;
    char where[300], what[320];
    gh_where(s->node, s->gpu, where, sizeof where);
    gh_sfmt(what, sizeof what, "probe %s failed on %s%s%s", *c ? c : "?", where,
             s->detail ? ": " : "", s->detail ? s->detail : "");
    report(e, ent, cls, GH_SEV_HIGH, -1, false, 0, what);
}

static void hw_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct hw *h = state;
    const struct gh_signal *s = &ent->sig;
    char where[300], what[320];
    switch (s->kind) {
    case GH_KIND_XID:
        on_xid(h, e, ent);
        break;
    case GH_KIND_SXID:
        on_sxid(h, e, ent);
        break;
    case GH_KIND_ECC:
        on_ecc(h, e, ent);
        break;
    case GH_KIND_ROW_REMAP:
        on_row_remap(h, e, ent);
        break;
    case GH_KIND_GPU_LOST:
        gh_sfmt(what, sizeof what, "%s stopped answering (GPU lost)",
                 gh_where(s->node, s->gpu, where, sizeof where));
        report(e, ent, GH_CLASS_GPU_HARDWARE, GH_SEV_CRITICAL, -1, false, 0, what);
        break;
    case GH_KIND_NVLINK:
    case GH_KIND_PCIE:
        on_link_counter(h, e, ent);
        break;
    case GH_KIND_THERMAL:
    case GH_KIND_POWER:
        on_throttle(h, e, ent);
        break;
    case GH_KIND_PROBE_RESULT:
        on_probe(e, ent);
        break;
    case GH_KIND_NODE_READY:
        gh_ctx_note_boot(e, s->node, ent->ts_ns);
        break;
    case GH_KIND_NODE_NOT_READY:
        gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
        break;
    default:
        break;
    }
}

static bool drop_gpu(const char *key, void *value, void *ctx)
{
    const int64_t *before = ctx;
    struct gstate *g = value;
    (void)key;
    /* A remap state is kept: forgetting it would report it again. (A
     * throttling streak ends anyway after a gap of a counter window.) */
    if (g && (g->seen >= *before || g->remap_pending || g->remap_failure))
        return false;
    gstate_free(g);
    return true;
}

static bool drop_counter(const char *key, void *value, void *ctx)
{
    const int64_t *before = ctx;
    struct counter *c = value;
    (void)key;
    if (c && (c->seen >= *before || c->sticky))
        return false;
    free(c);
    return true;
}

/* Counters and GPU states not read for longer than their window and the
 * idle period (a node gone, a GPU replaced): the next reading starts a new
 * baseline, which reports nothing by itself. */
static void hw_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct hw *h = state;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    int64_t keep = st->job_idle_ns > 0 ? st->job_idle_ns : 3600 * GH_NS_PER_S;
    if (keep < st->counter_window_ns)
        keep = st->counter_window_ns;
    if (now < INT64_MIN + keep)
        return;
    int64_t before = now - keep;
    gh_strmap_remove_if(h->gpus, drop_gpu, &before);
    gh_strmap_remove_if(h->counters, drop_counter, &before);
}

static size_t hw_memory(const void *state)
{
    const struct hw *h = state;
    return sizeof *h + gh_strmap_memory(h->gpus) + gh_strmap_memory(h->counters) +
           gh_strmap_live(h->gpus) * sizeof(struct gstate) +
           gh_strmap_live(h->counters) * sizeof(struct counter);
}

const struct gh_detector_ops gh_det_hardware = {
    .name = "hardware",
    .kinds = GH_KIND_BIT(GH_KIND_XID) | GH_KIND_BIT(GH_KIND_SXID) | GH_KIND_BIT(GH_KIND_ECC) |
             GH_KIND_BIT(GH_KIND_ROW_REMAP) | GH_KIND_BIT(GH_KIND_GPU_LOST) |
             GH_KIND_BIT(GH_KIND_NVLINK) | GH_KIND_BIT(GH_KIND_PCIE) |
             GH_KIND_BIT(GH_KIND_THERMAL) | GH_KIND_BIT(GH_KIND_POWER) |
             GH_KIND_BIT(GH_KIND_PROBE_RESULT) | GH_KIND_BIT(GH_KIND_NODE_READY) |
             GH_KIND_BIT(GH_KIND_NODE_NOT_READY),
    .create = hw_create,
    .destroy = hw_destroy,
    .on_signal = hw_on_signal,
    .expire = hw_expire,
    .memory = hw_memory,
};
