/* det_fleet.c - one cause, many nodes: the same signature on several nodes
 * within a short window (the same XID or SXid and its stated severity, the
 * same NIC device and port going down, the same Node condition and reason,
 * the same throttling, NotReady together) is a component they share (a
 * switch, a rollout, a rack's power, another agent's check), not a fault of
 * each node. Such a cause is one incident that names the component and its
 * nodes, blames none and takes none out of service; only a job the evidence
 * shows harmed restarts (docs/engine.md, "Shared causes").
 *
 * It sees every signal first (the engine dispatches it before the other
 * detectors), counting per signature the nodes that showed it. The engine
 * hands it each finding before the decision stage (gh_fleet_take): a
 * finding whose evidence carries a signature shared now joins the shared
 * cause. The decision stage hands it a finding about to be decided about
 * its node (gh_fleet_hold): while the signature may still become shared it
 * waits, 1 s when its node is the first to show it (a switch or an NVLink
 * domain takes its nodes within a second; a node's own fault is hardly
 * slowed down, and what other detectors conclude from its open incident, a
 * pod failure the host explains, holds), settings.fleet.hold from its
 * node's first showing once other nodes show it too.
 * Evidence of a node's own (a GPU that fell off the bus, double-bit ECC,
 * a memory fault) has no signature here: it stays the node's incident, and
 * only the decision stage's breaker stops a rule that takes too many nodes
 * out at once. */
#include "engine/fleet.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "engine/classify.h"
#include "engine/decide.h"
#include "engine/scope.h"
#include "signal/xid_catalog.h"

#define FLEET_EV 64   /* evidence kept per shared cause: its first nodes' first signals */
#define FLEET_JOBS 16 /* jobs one shared cause restarted */
#define FLEET_NODES 65536
#define NOT_READY_WINDOW_NS (60 * GH_NS_PER_S) /* nodes NotReady together */
/* Without labels, throttling on more nodes than a rack holds (an NVL72
 * rack's 18 compute trays) is a site's cap or cooling, not one rack's. */
#define RACK_NODES 18
/* A shared cause's record is decided once no new node began to show it for
 * this long (a rollout reaches node after node), at most settings.fleet.
 * window after it became shared; a harmed job restarts at once. */
#define SETTLE_NS (60 * GH_NS_PER_S)
#define FIRST_HOLD_NS (GH_NS_PER_S)

struct fnode {
    uint32_t node; /* topology index */
    int64_t first, last;
};

/* One signature's episode: the nodes that showed it. */
struct fsig {
    enum gh_class cls;
    enum gh_severity severity;
    bool events;    /* its signals alone make the incident (not only its findings) */
    int64_t window; /* nodes within this of each other are one cause */
    enum gh_scope natural; /* the component such a signature points at (a port: its switch) */
    int64_t first_hold;    /* how long its first node's finding waits for others */
    char hint[32];  /* what names it among the labels (a NIC device: its rail) */
    size_t n, cap;
    struct fnode *nodes; /* in the order they showed it */
    uint32_t *slots;     /* node -> its position + 1 (0: empty), open addressing */
    size_t n_slots;      /* a power of two, at least 2 x cap; 0 when none */
    int64_t last;        /* its latest showing */
    int64_t last_onset;  /* when the latest node began to show it */
    int64_t shared_at;   /* when it became a shared cause (0: not) */
    bool decided;        /* its incident was emitted */
    char inc_id[32];     /* ... with this id (what later findings join) */
    bool pending;        /* listed in fleet.due */
    size_t n_ev;
    const struct gh_tl_entry *ev[FLEET_EV];
    int n_jobs;
    uint64_t jobs[FLEET_JOBS];
    char what[160];
};

/* A finding waiting for the other nodes, with copies of what it borrowed. */
struct held {
    struct gh_finding f;
    int64_t until;
    char node[256], job[256], condition[GH_POLICY_CONDITION_MAX];
};

struct fleet {
    struct gh_strmap *sigs; /* signature -> struct fsig * */
    size_t n_due, cap_due;
    char **due; /* signatures shared but not decided yet (their keys) */
    size_t n_held, cap_held;
    struct held **held;
    const struct gh_finding *again; /* a held finding being decided now */
    int64_t window_ns;              /* settings.fleet.window, as last read */
};

static void fsig_reset(struct fsig *s)
{
    for (size_t i = 0; i < s->n_ev; i++)
        gh_tl_unref(s->ev[i]);
    s->n_ev = 0;
    s->n = 0;
    if (s->slots)
        memset(s->slots, 0, s->n_slots * sizeof *s->slots);
    s->shared_at = 0;
    s->decided = false;
    s->inc_id[0] = '\0';
    s->n_jobs = 0;
    s->last_onset = 0;
}

static void fsig_free(struct fsig *s)
{
    if (!s)
        return;
    fsig_reset(s);
    free(s->nodes);
    free(s->slots);
    free(s);
}

static void held_free(struct held *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->f.n_evidence; i++)
        gh_tl_unref(h->f.evidence[i]);
    free(h);
}

static int fleet_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct fleet *fl = calloc(1, sizeof *fl);
    if (!fl || !(fl->sigs = gh_strmap_new(1 << 16))) {
        free(fl);
        return GH_ENOMEM;
    }
    *state = fl;
    return GH_OK;
}

static void fleet_destroy(void *state)
{
    struct fleet *fl = state;
    if (!fl)
        return;
    for (size_t i = 0; i < gh_strmap_count(fl->sigs); i++)
        fsig_free(gh_strmap_value(fl->sigs, i));
    gh_strmap_free(fl->sigs);
    for (size_t i = 0; i < fl->n_due; i++)
        free(fl->due[i]);
    free(fl->due);
    for (size_t i = 0; i < fl->n_held; i++)
        held_free(fl->held[i]);
    free(fl->held);
    free(fl);
}

/* What a line said of its own severity, for the words of a signature. */
static const char *stated_words(enum gh_stated said)
{
    return said == GH_STATED_NONFATAL ? " (non-fatal)" : said == GH_STATED_FATAL ? " (fatal)" : "";
}

/* The words of a message, without what differs from node to node and pod
 * to pod (device indices, UUIDs, counts, pod suffixes: every token with a
 * digit in it), as a hash: one failure's text on every node. */
static uint64_t words_hash(const char *msg)
{
    uint64_t h = GH_HASH_INIT;
    const char *p = msg ? msg : "";
    while (*p) {
        while (*p && !isalnum((unsigned char)*p))
            p++;
        const char *w = p;
        bool digit = false;
        while (*p && isalnum((unsigned char)*p))
            digit |= isdigit((unsigned char)*p++) != 0;
        if (digit || p == w)
            continue;
        for (const char *c = w; c < p; c++)
            h = gh_hash_u64(h, (uint64_t)tolower((unsigned char)*c));
        h = gh_hash_u64(h, ' ');
    }
    return h;
}

/* The signature of s, when it is one several nodes can share: writes its
 * key, class, severity, window and words. Evidence of a node's own (GPU
 * memory, a GPU's fatal fault, an application's error) has none. */
static bool signature(const struct gh_signal *s, const struct gh_policy_settings *st, char *key,
                      size_t cap, struct fsig *out)
{
    if (!s->node)
        return false;
    out->window = st->fleet_window_ns;
    out->first_hold = FIRST_HOLD_NS;
    out->events = true;
    out->natural = GH_SCOPE_FLEET;
    out->hint[0] = '\0';
    switch (s->kind) {
    case GH_KIND_XID: {
        const struct gh_xid_info *x = gh_xid_lookup(s->code);
        if (x->application || x->secondary)
            return false;
        enum gh_stated said = gh_classify_stated(s->msg);
        enum gh_severity sev = gh_classify_stated_severity(x->severity, said);
        if (sev <= GH_SEV_INFO || sev >= GH_SEV_CRITICAL || x->cls == GH_CLASS_GPU_MEMORY)
            return false;
        out->cls = x->cls;
        out->severity = sev;
        gh_sfmt(key, cap, "x%d%c", s->code, "-nf"[said]);
        gh_sfmt(out->what, sizeof out->what, "XID %d%s", s->code, stated_words(said));
        return true;
    }
    case GH_KIND_SXID: {
        /* an NVLink Switch System's switches serve many nodes; a node's
         * own NVSwitch's fatal errors (HGX) stay the node's */
        enum gh_stated said = gh_classify_stated(s->msg);
        enum gh_severity sev = gh_classify_sxid(s->code, s->msg);
        if (sev <= GH_SEV_INFO || sev >= GH_SEV_CRITICAL)
            return false;
        out->cls = GH_CLASS_INTERCONNECT;
        out->severity = sev;
        out->natural = GH_SCOPE_NVLINK_DOMAIN;
        gh_sfmt(key, cap, "s%d%c", s->code, "-nf"[said]);
        gh_sfmt(out->what, sizeof out->what, "NVSwitch SXid %d%s", s->code, stated_words(said));
        return true;
    }
    case GH_KIND_NIC:
        if (s->state != GH_LINK_DOWN || !s->device)
            return false;
        out->cls = GH_CLASS_NETWORK;
        out->severity = GH_SEV_HIGH;
        out->window = st->fleet_link_window_ns;
        out->natural = GH_SCOPE_SWITCH;
        gh_sfmt(out->hint, sizeof out->hint, "%s", s->device);
        gh_sfmt(key, cap, "n%s/%d", s->device, s->has_port ? s->port : -1);
        gh_sfmt(out->what, sizeof out->what, "NIC %s port %d down", s->device,
                s->has_port ? s->port : 1);
        return true;
    case GH_KIND_NODE_CONDITION:
        if (s->cond_status != GH_COND_TRUE || !s->condition)
            return false;
        out->cls = gh_condition_class(s->condition);
        out->severity = GH_SEV_MEDIUM;
        gh_sfmt(key, cap, "c%s|%s", s->condition, s->reason ? s->reason : "");
        gh_sfmt(out->what, sizeof out->what, "Node condition %s True%s%s", s->condition,
                s->reason ? " (reason " : "", s->reason ? s->reason : "");
        if (s->reason)
            gh_sfmt(out->what + strlen(out->what), sizeof out->what - strlen(out->what), ")");
        return true;
    case GH_KIND_THERMAL:
    case GH_KIND_POWER:
        if (!s->throttled)
            return false;
        out->cls = GH_CLASS_THERMAL_POWER;
        out->severity = GH_SEV_LOW;
        out->natural = GH_SCOPE_RACK;
        out->events = false; /* a reading: only its findings (sustained) count */
        gh_sfmt(key, cap, "t%d", (int)s->kind);
        gh_sfmt(out->what, sizeof out->what, "%s throttling",
                s->kind == GH_KIND_POWER ? "power" : "thermal");
        return true;
    case GH_KIND_POD_FAILED: {
        /* a pod its node refused to run (det_podhost.c): the same reason and
         * words on many nodes are a device plugin's or a runtime's rollout,
         * a scheduler's bug, not each node's fault; only the nodes' own
         * findings (pods of several jobs refused) make its incident */
        if (!gh_classify_pod_rejected(s))
            return false;
        out->cls = GH_CLASS_UNKNOWN;
        out->severity = GH_SEV_HIGH;
        out->events = false;
        /* the refused pods are lost already, more are refused either way:
         * its first node's finding waits the whole hold for the others (a
         * rollout reaches node after node), not a second */
        out->first_hold = st->fleet_hold_ns;
        gh_sfmt(key, cap, "p%.64s|%016llx", s->reason ? s->reason : "",
                (unsigned long long)words_hash(s->msg));
        gh_sfmt(out->what, sizeof out->what, "pods refused by their nodes: %s (\"%.100s\")",
                s->reason ? s->reason : "?", s->msg ? s->msg : "");
        gh_utf8_trim(out->what);
        return true;
    }
    case GH_KIND_NODE_NOT_READY:
        out->cls = GH_CLASS_UNKNOWN;
        out->severity = GH_SEV_HIGH;
        out->events = false; /* a blip alone is no incident: the nodes' findings are */
        out->window = NOT_READY_WINDOW_NS;
        gh_sfmt(key, cap, "r");
        gh_sfmt(out->what, sizeof out->what, "NotReady");
        return true;
    default: return false;
    }
}

static size_t slot_of(uint32_t node, size_t n_slots)
{
    return (size_t)(gh_hash_u64(GH_HASH_INIT, node) & (n_slots - 1));
}

/* A rollout reaches thousands of nodes: each signal finds its node in O(1). */
static struct fnode *fsig_node(struct fsig *s, uint32_t node)
{
    if (!s->n_slots)
        return NULL;
    for (size_t i = slot_of(node, s->n_slots);; i = (i + 1) & (s->n_slots - 1)) {
        uint32_t v = s->slots[i];
        if (!v)
            return NULL;
        if (s->nodes[v - 1].node == node)
            return &s->nodes[v - 1];
    }
}

/* Indexes s->nodes[at] (room made by the caller: n_slots >= 2 x cap). */
static void index_node(struct fsig *s, size_t at)
{
    size_t i = slot_of(s->nodes[at].node, s->n_slots);
    while (s->slots[i])
        i = (i + 1) & (s->n_slots - 1);
    s->slots[i] = (uint32_t)at + 1;
}

/* Grows s to hold one more node. */
static int fsig_grow(struct fsig *s)
{
    if (s->n < s->cap)
        return GH_OK;
    size_t ncap = s->cap ? s->cap * 2 : 8;
    struct fnode *nn = realloc(s->nodes, ncap * sizeof *nn);
    if (!nn)
        return GH_ENOMEM;
    s->nodes = nn;
    uint32_t *ns = calloc(ncap * 2, sizeof *ns);
    if (!ns)
        return GH_ENOMEM;
    free(s->slots);
    s->slots = ns;
    s->n_slots = ncap * 2;
    s->cap = ncap;
    for (size_t i = 0; i < s->n; i++)
        index_node(s, i);
    return GH_OK;
}

/* Whether s is a cause its nodes share at now: min_nodes of them began to
 * show it within its window, or two that a rack, switch or NVLink-domain
 * label joins. */
static bool shared_now(const struct fsig *s, struct gh_topology *t,
                       const struct gh_policy_settings *st, int64_t now)
{
    uint32_t recent[FLEET_EV];
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->nodes[i].first >= now - s->window && k < FLEET_EV)
            recent[k++] = s->nodes[i].node;
    if (k < 2)
        return false;
    char component[192];
    enum gh_scope sc = gh_scope_common(t, recent, k, s->hint, component, sizeof component);
    bool joined = sc != GH_SCOPE_UNSAID && sc != GH_SCOPE_FLEET;
    if (k >= (size_t)st->fleet_min_nodes) {
        /* Where the labels say which component each node hangs off (a
         * port's leaf), nodes that do not share one are no cause of it;
         * only many more make a cause beyond it (a firmware, a spine):
         * three unrelated flaps within seconds are three nodes' own. */
        if (!joined && s->natural != GH_SCOPE_FLEET &&
            gh_scope_labelled(t, recent[0], s->natural))
            return k >= 3 * (size_t)st->fleet_min_nodes;
        return true;
    }
    return joined;
}

static int add_due(struct fleet *fl, const char *key)
{
    if (fl->n_due == fl->cap_due) {
        size_t ncap = fl->cap_due ? fl->cap_due * 2 : 8;
        char **nd = realloc(fl->due, ncap * sizeof *nd);
        if (!nd)
            return GH_ENOMEM;
        fl->due = nd;
        fl->cap_due = ncap;
    }
    if (!(fl->due[fl->n_due] = strdup(key)))
        return GH_ENOMEM;
    fl->n_due++;
    return GH_OK;
}

static void fleet_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct fleet *fl = state;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct gh_topology *t = gh_ctx_topology(e);
    char key[160];
    struct fsig proto;
    if (!signature(&ent->sig, st, key, sizeof key, &proto))
        return;
    long ni = gh_topology_find_node(t, ent->sig.node);
    if (ni < 0)
        ni = gh_topology_add_node(t, ent->sig.node);
    if (ni < 0)
        return;
    bool created;
    long idx;
    struct fsig *s = gh_ctx_value(e, fl->sigs, key, sizeof *s, &idx, &created);
    if (!s)
        return;
    fl->window_ns = st->fleet_window_ns;
    int64_t ts = ent->ts_ns;
    /* the last episode is over (no node showed it for a while: a state
     * that lasts is read again and again): a new one */
    if (s->n && ts - s->last > st->fleet_window_ns && !s->pending)
        fsig_reset(s);
    s->cls = proto.cls;
    if (proto.severity > s->severity || s->n == 0)
        s->severity = proto.severity;
    s->events = proto.events;
    s->window = proto.window;
    s->natural = proto.natural;
    s->first_hold = proto.first_hold;
    memcpy(s->hint, proto.hint, sizeof s->hint);
    memcpy(s->what, proto.what, sizeof s->what);
    if (ts > s->last)
        s->last = ts;
    struct fnode *fn = fsig_node(s, (uint32_t)ni);
    if (fn) {
        if (ts > fn->last)
            fn->last = ts;
    } else if (s->n < FLEET_NODES) {
        if (fsig_grow(s) != GH_OK) {
            gh_ctx_nomem(e);
            return;
        }
        s->nodes[s->n] = (struct fnode){(uint32_t)ni, ts, ts};
        index_node(s, s->n++);
        if (ts > s->last_onset)
            s->last_onset = ts;
        if (s->n_ev < FLEET_EV)
            s->ev[s->n_ev++] = gh_tl_ref(ent);
        if (s->decided) /* a node after the record: joins it */
            gh_ctx_joined(e, s->inc_id, gh_topology_node_name(t, (uint32_t)ni), &ent, 1);
    }
    if (!s->shared_at && shared_now(s, t, st, ts)) {
        s->shared_at = ts;
        /* signals alone are the incident: decided once it settled */
        if (s->events && !s->decided && !s->pending) {
            if (add_due(fl, key) == GH_OK)
                s->pending = true;
            else
                gh_ctx_nomem(e);
        }
    }
}

/* The shared cause s as the decision stage takes it. names: room for its
 * nodes' names (s->n). */
static void describe(const struct fsig *s, struct gh_topology *t, const char *key,
                     const char **names, uint32_t *idx, char *component, size_t cap,
                     struct gh_shared *out)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < s->n; i++) {
        names[i] = gh_topology_node_name(t, s->nodes[i].node);
        idx[i] = s->nodes[i].node;
        lo = s->nodes[i].first < lo ? s->nodes[i].first : lo;
        hi = s->nodes[i].first > hi ? s->nodes[i].first : hi;
    }
    enum gh_scope sc = gh_scope_common(t, idx, s->n, s->hint, component, cap);
    if (sc == GH_SCOPE_UNSAID) {
        /* no label names it: what such a signature shares most often */
        component[0] = '\0';
        sc = s->cls == GH_CLASS_NETWORK                               ? GH_SCOPE_SWITCH
             : s->cls == GH_CLASS_INTERCONNECT                        ? GH_SCOPE_NVLINK_DOMAIN
             : s->cls == GH_CLASS_THERMAL_POWER && s->n <= RACK_NODES ? GH_SCOPE_RACK
                                                                      : GH_SCOPE_FLEET;
    }
    *out = (struct gh_shared){
        .cls = s->cls,
        .severity = s->severity,
        .scope = sc,
        .component = component[0] ? component : NULL,
        .n_nodes = s->n,
        .nodes = names,
        .n_evidence = s->n_ev,
        .evidence = s->ev,
        .window_ns = hi > lo ? hi - lo : 0,
        .key_hash = gh_hash_str(GH_HASH_INIT, key),
        .what = s->what,
    };
}

/* Decides on shared cause s (key) for finding f (NULL: its signals). */
static int add_due(struct fleet *fl, const char *key);
static bool hold_copy(struct fleet *fl, const struct gh_finding *f, int64_t until);

static enum gh_outcome decide(struct fleet *fl, struct gh_engine *e, struct fsig *s,
                              const char *key, const struct gh_finding *f)
{
    if (f && !gh_ctx_shared_restarts(e, f, s->jobs, s->n_jobs)) {
        /* nothing to restart: it joins the cause, whose record is decided
         * once it settled (describing it costs its nodes: not per finding) */
        if (!s->decided && !s->pending) {
            if (add_due(fl, key) == GH_OK)
                s->pending = true;
            else
                gh_ctx_nomem(e);
        }
        gh_ctx_absorbed(e, NULL);
        if (s->decided)
            gh_ctx_joined(e, s->inc_id, f->node, f->evidence, f->n_evidence);
        return GH_OUT_ABSORBED;
    }
    /* A harmed job's restart (the cause's first record) waits until its
     * first node showed it FIRST_HOLD_NS ago: the nodes a switch or an
     * NVLink domain takes within that second are named in it, not just
     * the two that made the cause shared (a second is nothing to a restart) */
    int64_t named_by = s->n ? s->nodes[0].first + FIRST_HOLD_NS : INT64_MIN;
    if (f && !s->decided && gh_ctx_now(e) < named_by) {
        if (hold_copy(fl, f, named_by))
            return GH_OUT_PENDING;
        gh_ctx_nomem(e); /* decided now, naming fewer nodes */
    }
    struct gh_topology *t = gh_ctx_topology(e);
    const char **names = malloc((s->n ? s->n : 1) * sizeof *names);
    uint32_t *idx = malloc((s->n ? s->n : 1) * sizeof *idx);
    if (!names || !idx) {
        free(names);
        free(idx);
        gh_ctx_nomem(e);
        return GH_OUT_ERROR;
    }
    char component[192];
    struct gh_shared sh;
    describe(s, t, key, names, idx, component, sizeof component, &sh);
    uint64_t restarted = 0;
    /* a finding restarts its job now when harmed (the first time, in the
     * cause's record); the record itself waits for the cause to settle */
    enum gh_outcome o = gh_ctx_decide_shared(e, &sh, f, !f, f && s->decided, s->jobs, s->n_jobs,
                                             &restarted);
    if (o == GH_OUT_DECIDED) {
        if (!s->decided)
            gh_sfmt(s->inc_id, sizeof s->inc_id, "%s", gh_ctx_shared_id(e));
        s->decided = true;
    } else if (f && s->decided) {
        gh_ctx_joined(e, s->inc_id, f->node, f->evidence, f->n_evidence);
    }
    if (restarted && s->n_jobs < FLEET_JOBS)
        s->jobs[s->n_jobs++] = restarted;
    if (!s->decided && !s->pending) {
        if (add_due(fl, key) == GH_OK)
            s->pending = true;
        else
            gh_ctx_nomem(e);
    }
    free(names);
    free(idx);
    return o;
}

/* The signature among f's evidence that f's node showed, its fsig and key. */
static struct fsig *finding_sig(struct fleet *fl, struct gh_engine *e, const struct gh_finding *f,
                                char *key, size_t cap, struct fnode **fn)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    long ni = gh_topology_find_node(gh_ctx_topology(e), f->node);
    if (ni < 0)
        return NULL;
    struct fsig *best = NULL;
    for (size_t i = 0; i < f->n_evidence; i++) {
        struct fsig proto;
        char k[160];
        if (!signature(&f->evidence[i]->sig, st, k, sizeof k, &proto))
            continue;
        long at = gh_strmap_find(fl->sigs, k);
        struct fsig *s = at >= 0 ? gh_strmap_value(fl->sigs, (size_t)at) : NULL;
        struct fnode *n = s ? fsig_node(s, (uint32_t)ni) : NULL;
        if (!n)
            continue;
        /* a shared one wins: the finding is part of it */
        if (!best || (s->shared_at && !best->shared_at)) {
            best = s;
            *fn = n;
            gh_sfmt(key, cap, "%s", k);
        }
    }
    return best;
}

size_t gh_fleet_waiting(const void *state)
{
    const struct fleet *fl = state;
    return fl ? fl->n_held + fl->n_due : 0;
}

bool gh_fleet_take(void *state, struct gh_engine *e, const struct gh_finding *f,
                   enum gh_outcome *out)
{
    struct fleet *fl = state;
    if (!fl || !f->node)
        return false;
    char key[160];
    struct fnode *fn = NULL;
    struct fsig *s = finding_sig(fl, e, f, key, sizeof key, &fn);
    if (!s || !s->shared_at)
        return false;
    *out = decide(fl, e, s, key, f);
    return true;
}

/* Another node began to show s within its window before fn did, or since. */
static bool others(const struct fsig *s, const struct fnode *fn)
{
    for (size_t i = 0; i < s->n; i++)
        if (&s->nodes[i] != fn && s->nodes[i].first >= fn->first - s->window)
            return true;
    return false;
}

/* Keeps a copy of f (its strings and evidence references too) until
 * stream time until, when it is decided again; false when out of memory. */
static bool hold_copy(struct fleet *fl, const struct gh_finding *f, int64_t until)
{
    if (fl->n_held == fl->cap_held) {
        size_t ncap = fl->cap_held ? fl->cap_held * 2 : 8;
        struct held **nh = realloc(fl->held, ncap * sizeof *nh);
        if (!nh)
            return false;
        fl->held = nh;
        fl->cap_held = ncap;
    }
    struct held *h = calloc(1, sizeof *h);
    if (!h)
        return false;
    h->f = *f;
    gh_sfmt(h->node, sizeof h->node, "%s", f->node);
    h->f.node = h->node;
    if (f->job) {
        gh_sfmt(h->job, sizeof h->job, "%s", f->job);
        h->f.job = h->job;
    }
    if (f->condition) {
        gh_sfmt(h->condition, sizeof h->condition, "%s", f->condition);
        h->f.condition = h->condition;
    }
    for (size_t i = 0; i < f->n_evidence; i++)
        gh_tl_ref(f->evidence[i]);
    h->until = until;
    fl->held[fl->n_held++] = h;
    return true;
}

bool gh_fleet_hold(void *state, struct gh_engine *e, const struct gh_finding *f, bool harmless)
{
    struct fleet *fl = state;
    if (!fl || !f->node || f == fl->again)
        return false;
    char key[160];
    struct fnode *fn = NULL;
    struct fsig *s = finding_sig(fl, e, f, key, sizeof key, &fn);
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    /* Only once another node showed it too (a node alone decides at once,
     * as its own), and while more may follow: a node that showed it long
     * enough ago for the others to show it too decides now. */
    if (!s || s->shared_at)
        return false;
    bool other = others(s, fn);
    /* the first node waits FIRST_HOLD_NS only (its signature's first_hold):
     * a cause many nodes share at once (a switch, an NVLink domain) shows
     * on the others within it; a finding that harms nothing loses nothing
     * by waiting the whole hold, in which a check or a rollout reaching
     * nodes one by one shows on the others */
    int64_t hold = other || harmless ? st->fleet_hold_ns : s->first_hold;
    if (hold > st->fleet_hold_ns)
        hold = st->fleet_hold_ns;
    if (fn->first + hold <= gh_ctx_now(e) ||
        gh_topology_node_count(gh_ctx_topology(e)) < (size_t)st->fleet_min_nodes)
        return false;
    return hold_copy(fl, f, fn->first + hold);
}

bool gh_fleet_hold_until(void *state, const struct gh_finding *f, int64_t until)
{
    return state && hold_copy(state, f, until);
}

/* The GPU index f's evidence names, now that later readings may map its
 * PCI bus id or UUID to one; -1 when none does. */
static int gpu_of_evidence(struct gh_engine *e, const struct gh_finding *f)
{
    for (size_t i = 0; i < f->n_evidence; i++) {
        const struct gh_signal *s = &f->evidence[i]->sig;
        int g = s->node && f->node && !strcmp(s->node, f->node) ? gh_ctx_gpu_of(e, s) : -1;
        if (g >= 0)
            return g;
    }
    return -1;
}

/* When shared cause s's record is due. */
static int64_t due_at(const struct fsig *s, int64_t window)
{
    int64_t settle = s->last_onset + SETTLE_NS, latest = s->shared_at + window;
    return settle < latest ? settle : latest;
}

static int64_t fleet_next_deadline(void *state)
{
    struct fleet *fl = state;
    int64_t t = INT64_MAX;
    for (size_t i = 0; i < fl->n_held; i++)
        if (fl->held[i]->until < t)
            t = fl->held[i]->until;
    for (size_t i = 0; i < fl->n_due; i++) {
        long at = gh_strmap_find(fl->sigs, fl->due[i]);
        const struct fsig *s = at >= 0 ? gh_strmap_value(fl->sigs, (size_t)at) : NULL;
        int64_t due = s ? due_at(s, fl->window_ns) : INT64_MIN + 1;
        if (due < t)
            t = due;
    }
    return t;
}

static void flush_due(struct fleet *fl, struct gh_engine *e, int64_t now);

static void fleet_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct fleet *fl = state;
    const int64_t hold = gh_ctx_settings(e)->fleet_hold_ns;
    flush_due(fl, e, now);
    /* held findings whose hold is over, oldest first: shared now, or their
     * node's own after all */
    for (size_t i = 0; i < fl->n_held;) {
        struct held *h = fl->held[i];
        if (h->until > now) {
            i++;
            continue;
        }
        memmove(fl->held + i, fl->held + i + 1, (fl->n_held - i - 1) * sizeof *fl->held);
        fl->n_held--;
        char key[160];
        struct fnode *fn = NULL;
        struct fsig *s = finding_sig(fl, e, &h->f, key, sizeof key, &fn);
        if (s && s->shared_at) {
            decide(fl, e, s, key, &h->f);
        } else if (s && fn && h->until < fn->first + hold && others(s, fn) &&
                   fl->n_held < fl->cap_held) {
            /* others began to show it meanwhile: wait the whole hold */
            h->until = fn->first + hold;
            fl->held[fl->n_held++] = h;
            continue;
        } else {
            if (h->f.gpu < 0)
                h->f.gpu = gpu_of_evidence(e, &h->f);
            fl->again = &h->f;
            gh_ctx_report(e, &h->f);
            fl->again = NULL;
        }
        held_free(h);
    }
}

/* Signatures whose signals alone are the incident, due once their hold is
 * over: the other nodes had the time to show it too. */
static void flush_due(struct fleet *fl, struct gh_engine *e, int64_t now)
{
    for (size_t i = 0; i < fl->n_due;) {
        long at = gh_strmap_find(fl->sigs, fl->due[i]);
        struct fsig *s = at >= 0 ? gh_strmap_value(fl->sigs, (size_t)at) : NULL;
        if (s && !s->decided && due_at(s, fl->window_ns) > now) {
            i++;
            continue;
        }
        char *key = fl->due[i];
        memmove(fl->due + i, fl->due + i + 1, (fl->n_due - i - 1) * sizeof *fl->due);
        fl->n_due--;
        if (s) {
            s->pending = false;
            if (!s->decided)
                decide(fl, e, s, key, NULL);
        }
        free(key);
    }
}

struct expire_arg {
    int64_t now;
};

static bool drop_sig(const char *key, void *value, void *ctx)
{
    const struct expire_arg *x = ctx;
    struct fsig *s = value;
    (void)key;
    /* an episode over for a window past its latest showing (and for as
     * long as an incident's follow-ups may still come) is forgotten */
    if (s && (s->pending || x->now - s->last <= 2 * s->window + 3600 * GH_NS_PER_S))
        return false;
    fsig_free(s);
    return true;
}

static void fleet_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct fleet *fl = state;
    (void)e;
    struct expire_arg x = {now};
    gh_strmap_remove_if(fl->sigs, drop_sig, &x);
}

static size_t fleet_memory(const void *state)
{
    const struct fleet *fl = state;
    size_t b = sizeof *fl + gh_strmap_memory(fl->sigs) + fl->cap_held * sizeof *fl->held +
               fl->n_held * sizeof(struct held) + fl->cap_due * sizeof *fl->due;
    for (size_t i = 0; i < gh_strmap_count(fl->sigs); i++) {
        const struct fsig *s = gh_strmap_value(fl->sigs, i);
        if (s)
            b += sizeof *s + s->cap * sizeof *s->nodes + s->n_slots * sizeof *s->slots;
    }
    return b;
}

const struct gh_detector_ops gh_det_fleet = {
    .name = "fleet",
    .kinds = GH_KIND_BIT(GH_KIND_XID) | GH_KIND_BIT(GH_KIND_SXID) | GH_KIND_BIT(GH_KIND_NIC) |
             GH_KIND_BIT(GH_KIND_NODE_CONDITION) | GH_KIND_BIT(GH_KIND_THERMAL) |
             GH_KIND_BIT(GH_KIND_POWER) | GH_KIND_BIT(GH_KIND_NODE_NOT_READY) |
             GH_KIND_BIT(GH_KIND_POD_FAILED),
    .create = fleet_create,
    .destroy = fleet_destroy,
    .on_signal = fleet_on_signal,
    .on_deadline = fleet_on_deadline,
    .next_deadline = fleet_next_deadline,
    .expire = fleet_expire,
    .memory = fleet_memory,
};
