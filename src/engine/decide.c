/* decide.c - findings to incidents: episodes, repetitions, grace, escalation, checkpoint, reason. */
#include "engine/decide.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "engine/classify.h"
#include "engine/impact.h"
#include "engine/scope.h"
#include "common/strmap.h"
#include "signal/xid_catalog.h"

#define OCC_MAX 32   /* occurrences (and their evidence) kept per rule and subject */
#define EP_EV 8      /* evidence kept with a record that waits */
#define HIST_MAX 16  /* decided incidents remembered per rule and subject */
#define MAX_KEYS (1 << 20)
/* A checkpoint this soon after a corruption incident's decision may still be
 * the corrupted run's (the restart takes effect after the action). */
#define CORRUPT_SETTLE_NS (120 * GH_NS_PER_S)

struct episode {
    bool active;
    enum gh_class cls;
    enum gh_kind kind;                   /* the deciding finding's kind */
    char cause[GH_POLICY_CONDITION_MAX]; /* node_condition: its condition ("" otherwise) */
    int strength;
    unsigned acts; /* bit per enum gh_action the incident chose */
    unsigned deferred; /* ... and those it left for a safe moment */
    int gpu;
    int64_t assessed; /* when the impact was last assessed for a finding it absorbed */
    uint64_t dev;     /* the GPU it is about: index + 1, or its bus id's hash (0: none) */
    bool cleared;     /* node_condition: went False; raised again within the episode it is
                       * the same flapping flag, not a new incident */
    int64_t first_ts, expires, decided;
    char job[160]; /* the job its incident restarted ("" when none) */
    int64_t anomaly_ts, anomaly_step;
    char inc_id[32];    /* the id of the incident that opened or last extended it */
    uint64_t node_hash; /* 'c' episodes: the node the corruption blamed (0: none) */
    /* 'c' episodes: a node a corruption incident blamed but left in the
     * job (no isolate, drain or replace), suspect until suspect_until; its
     * first anomaly since it became suspect. */
    uint64_t suspect_hash;
    int64_t suspect_until, suspect_ts, suspect_step;
    /* A record whose actions wait (strength 0, deferred): what it was, to
     * decide again when the job is harmed after all or the moment is safe. */
    struct {
        bool held;
        enum gh_kind kind;
        int code;
        enum gh_severity severity;
        bool has_metric;
        double metric;
        char job[160];
        char what[320];
        size_t n_ev;
        const struct gh_tl_entry *ev[EP_EV]; /* refs, oldest first */
    } rec;
};

/* A record's deferred actions stay due this long (a job that runs for days). */
#define REC_KEEP_NS (7LL * 24 * 3600 * GH_NS_PER_S)

static void rec_clear(struct episode *ep)
{
    for (size_t i = 0; i < ep->rec.n_ev; i++)
        gh_tl_unref(ep->rec.ev[i]);
    ep->rec.n_ev = 0;
    ep->rec.held = false;
}

/* ep's record waits for harm or a safe moment: what f was, its job and its
 * first EP_EV pieces of evidence (refs). */
static void rec_hold(struct episode *ep, const struct gh_finding *f, const char *job,
                     const struct gh_tl_entry *const *ev, size_t n_ev)
{
    ep->rec.held = true;
    ep->rec.kind = f->kind;
    ep->rec.code = f->code;
    ep->rec.severity = f->severity;
    ep->rec.has_metric = f->has_metric;
    ep->rec.metric = f->metric;
    gh_sfmt(ep->rec.job, sizeof ep->rec.job, "%s", job ? job : "");
    gh_sfmt(ep->rec.what, sizeof ep->rec.what, "%s", f->what);
    for (size_t i = 0; i < n_ev && ep->rec.n_ev < EP_EV; i++)
        ep->rec.ev[ep->rec.n_ev++] = gh_tl_ref(ev[i]);
}

static void episode_free(struct episode *ep)
{
    if (ep)
        rec_clear(ep);
    free(ep);
}

struct occ {
    int rule;                               /* the rule's index */
    int n;
    int64_t ts[OCC_MAX];                    /* counted occurrences, oldest first */
    size_t n_ev;
    const struct gh_tl_entry *ev[OCC_MAX];  /* their evidence (refs), oldest first */
};

struct hist {
    int rule;
    int n;
    int64_t ts[HIST_MAX];
};

struct gh_decider {
    const struct gh_policy *policy;
    struct gh_topology *topo;
    struct gh_timeline *tl;
    gh_incident_fn cb;
    void *cb_ctx;
    struct gh_strmap *episodes; /* "n:NODE" / "j:JOB" -> struct episode * */
    struct gh_strmap *occs;     /* "RULE#SUBJECT" -> struct occ * */
    struct gh_strmap *hists;    /* "RULE#SUBJECT" -> struct hist * */
    struct gh_strmap *breakers; /* "RULE#CODE" -> struct breaker * */
    struct gh_decider_stats st;
    int64_t last_hw;
    gh_rule_filter_fn governs; /* NULL: every rule governs every node */
    void *governs_ctx;
    gh_job_live_fn live;       /* NULL: a job placed on a node runs there */
    gh_progress_fn progress;   /* with live's ctx: whether a job kept training */
    void *live_ctx;
    gh_hold_fn hold; /* NULL: nothing waits */
    void *hold_ctx;
    gh_joined_fn joined; /* NULL: what episodes absorb is not reported */
    void *joined_ctx;
    char last_id[32]; /* the id gh_decider_shared last emitted */
};

/* A record-only episode re-assesses the impact of more of its evidence at
 * most this often (a throttling GPU reports every reading). */
#define REASSESS_NS (60 * GH_NS_PER_S)

void gh_finding_init(struct gh_finding *f)
{
    memset(f, 0, sizeof *f);
    f->gpu = -1;
    f->code = -1;
    f->anomaly_step = -1;
    f->impact = -1;
}

void gh_finding_add(struct gh_finding *f, const struct gh_tl_entry *e)
{
    if (!e || f->n_evidence >= GH_FINDING_MAX_EVIDENCE)
        return;
    for (size_t i = 0; i < f->n_evidence; i++)
        if (f->evidence[i] == e)
            return;
    f->evidence[f->n_evidence++] = e;
}

struct gh_decider *gh_decider_new(const struct gh_policy *policy, struct gh_topology *topo,
                                  struct gh_timeline *tl, gh_incident_fn cb, void *cb_ctx)
{
    struct gh_decider *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->policy = policy;
    d->topo = topo;
    d->tl = tl;
    d->cb = cb;
    d->cb_ctx = cb_ctx;
    d->last_hw = INT64_MIN;
    d->episodes = gh_strmap_new(MAX_KEYS);
    d->occs = gh_strmap_new(MAX_KEYS);
    d->hists = gh_strmap_new(MAX_KEYS);
    d->breakers = gh_strmap_new(MAX_KEYS);
    if (!d->episodes || !d->occs || !d->hists || !d->breakers) {
        gh_decider_free(d);
        return NULL;
    }
    return d;
}

static void occ_clear(struct occ *o)
{
    for (size_t i = 0; i < o->n_ev; i++)
        gh_tl_unref(o->ev[i]);
    o->n = 0;
    o->n_ev = 0;
}

void gh_decider_free(struct gh_decider *d)
{
    if (!d)
        return;
    if (d->episodes)
        for (size_t i = 0; i < gh_strmap_count(d->episodes); i++)
            episode_free(gh_strmap_value(d->episodes, i));
    if (d->occs)
        for (size_t i = 0; i < gh_strmap_count(d->occs); i++) {
            struct occ *o = gh_strmap_value(d->occs, i);
            if (o)
                occ_clear(o);
            free(o);
        }
    if (d->hists)
        for (size_t i = 0; i < gh_strmap_count(d->hists); i++)
            free(gh_strmap_value(d->hists, i));
    gh_strmap_free(d->episodes);
    gh_strmap_free(d->occs);
    gh_strmap_free(d->hists);
    if (d->breakers)
        for (size_t i = 0; i < gh_strmap_count(d->breakers); i++)
            free(gh_strmap_value(d->breakers, i));
    gh_strmap_free(d->breakers);
    free(d);
}

/* A value slot of map for key, allocating size bytes (zeroed) on first use.
 * NULL when the map is full or out of memory (counted in d->st.nomem). */
static void *slot(struct gh_decider *d, struct gh_strmap *m, const char *key, size_t size)
{
    int rc = GH_OK;
    bool made;
    long i = gh_strmap_intern(m, key, &made, &rc);
    if (i < 0) {
        if (rc == GH_ENOMEM)
            d->st.nomem++;
        return NULL;
    }
    void *v = gh_strmap_value(m, (size_t)i);
    if (!v) {
        v = calloc(1, size);
        if (v) {
            gh_strmap_set_value(m, (size_t)i, v);
        } else {
            if (made) /* no key without a value */
                gh_strmap_remove(m, (size_t)i);
            d->st.nomem++;
        }
    }
    return v;
}

static struct episode *episode_find(struct gh_decider *d, char prefix, const char *name)
{
    char key[320];
    gh_sfmt(key, sizeof key, "%c:%s", prefix, name);
    long i = gh_strmap_find(d->episodes, key);
    return i < 0 ? NULL : gh_strmap_value(d->episodes, (size_t)i);
}

/* A record: an incident that took nothing out of service (strength 0, or
 * 1: diagnostics) because what would have waits. */
static bool record_only(const struct episode *ep)
{
    return ep->strength == 0 || (ep->strength <= 1 && ep->deferred);
}

static bool episode_open(const struct episode *ep, int64_t t)
{
    return ep && ep->active && t >= ep->first_ts - GH_NS_PER_S * 600 && t <= ep->expires;
}

void gh_decider_set_joined(struct gh_decider *d, gh_joined_fn fn, void *ctx)
{
    d->joined = fn;
    d->joined_ctx = ctx;
}

const char *gh_decider_episode_id(struct gh_decider *d, const char *node, const char *job,
                                  int64_t t)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    if (!episode_open(ep, t) || !ep->inc_id[0])
        ep = job ? episode_find(d, 'j', job) : NULL;
    return episode_open(ep, t) && ep->inc_id[0] ? ep->inc_id : NULL;
}

const char *gh_decider_last_id(const struct gh_decider *d) { return d->last_id; }

bool gh_decider_node_episode(struct gh_decider *d, const char *node, int64_t t, enum gh_class *cls)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    if (!episode_open(ep, t))
        return false;
    if (cls)
        *cls = ep->cls;
    return true;
}

bool gh_decider_job_episode(struct gh_decider *d, const char *job, int64_t t, enum gh_class *cls)
{
    struct episode *ep = job ? episode_find(d, 'j', job) : NULL;
    if (!episode_open(ep, t))
        return false;
    if (cls)
        *cls = ep->cls;
    return true;
}

bool gh_decider_node_condition_episode(struct gh_decider *d, const char *node, int64_t t)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    return episode_open(ep, t) && ep->kind == GH_KIND_NODE_CONDITION;
}

/* Whether f is a Node condition other than the one ep was decided from: a
 * cause of its own on the node (KernelDeadlock after FrequentKubeletRestart). */
static bool other_condition(const struct episode *ep, const struct gh_finding *f)
{
    return f->kind == GH_KIND_NODE_CONDITION && ep->kind == GH_KIND_NODE_CONDITION &&
           strcmp(ep->cause, f->condition ? f->condition : "") != 0;
}

void gh_decider_count_absorbed(struct gh_decider *d) { d->st.absorbed++; }

void gh_decider_node_returned(struct gh_decider *d, const char *node, int64_t ts)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    /* Only what took the node out of service ends with its return; a record
     * (the node stayed in service) and an incident decided after ts (a new
     * fault) stay open. Histories are kept: repeats still escalate. */
    if (ep && ep->active && !record_only(ep) && ep->decided <= ts && ep->expires > ts)
        ep->expires = ts;
}

static bool close_episode(const char *key, void *value, void *ctx)
{
    (void)key;
    struct episode *ep = value;
    int64_t ts = *(const int64_t *)ctx;
    if (ep && ep->active && ep->decided <= ts && ep->expires > ts)
        ep->expires = ts;
    return false; /* kept: gh_decider_expire forgets it in time */
}

void gh_decider_close_all(struct gh_decider *d, int64_t ts)
{
    gh_strmap_remove_if(d->episodes, close_episode, &ts);
}

int64_t gh_decider_last_hardware(const struct gh_decider *d) { return d->last_hw; }

/* How disruptive a set of actions is: an absorbed finding may not call for
 * more than the incident it joins already did. */
static int strength(const enum gh_action *a, int n)
{
    static const int s[GH_ACT__COUNT] = {
        [GH_ACT_NONE] = 0,          [GH_ACT_RETRY_IN_PLACE] = 1, [GH_ACT_RUN_DIAGNOSTICS] = 1,
        [GH_ACT_RESTART_FROM_CHECKPOINT] = 2, [GH_ACT_DRAIN_NODE] = 3, [GH_ACT_RESET_GPU] = 3,
        [GH_ACT_ISOLATE_NODE] = 4,  [GH_ACT_REBOOT_NODE] = 4,    [GH_ACT_REPLACE_NODE] = 5,
    };
    int m = 0;
    for (int i = 0; i < n; i++)
        if ((unsigned)a[i] < GH_ACT__COUNT && s[a[i]] > m)
            m = s[a[i]];
    return m;
}

static bool targets_node(enum gh_action a)
{
    return a == GH_ACT_ISOLATE_NODE || a == GH_ACT_DRAIN_NODE || a == GH_ACT_RESET_GPU ||
           a == GH_ACT_REBOOT_NODE || a == GH_ACT_REPLACE_NODE;
}

/* Whether a takes the node out of its jobs (a reset or reboot is in place). */
static bool takes_out(enum gh_action a)
{
    return a == GH_ACT_ISOLATE_NODE || a == GH_ACT_DRAIN_NODE || a == GH_ACT_REPLACE_NODE;
}

/* The latest checkpoint of job saved before `before` (and below step `below`
 * when >= 0). Borrowed from the timeline. */
static const struct gh_tl_entry *checkpoint_before(struct gh_decider *d, const char *job,
                                                   int64_t before, int64_t below)
{
    /* Later reports win (spec section 1): a checkpoint reported failed
     * after it was reported saved, even after the fault, is no restart
     * point. Newest first, so such a report is seen before its save. */
    const struct gh_tl_entry *v[64];
    int64_t failed[64];
    size_t n_failed = 0;
    size_t n = gh_timeline_query(d->tl, GH_TL_JOB, job, -1, GH_KIND_BIT(GH_KIND_CHECKPOINT),
                                 INT64_MIN, INT64_MAX, true, v, 64);
    for (size_t i = n; i-- > 0;) {
        const struct gh_signal *s = &v[i]->sig;
        if (s->ckpt_state != GH_CKPT_SAVED) {
            if (s->has_step && n_failed < 64)
                failed[n_failed++] = s->step;
            continue;
        }
        if (v[i]->ts_ns > before - 1 || (below >= 0 && s->has_step && s->step >= below))
            continue;
        bool bad = false;
        for (size_t k = 0; k < n_failed && !bad; k++)
            bad = s->has_step && failed[k] == s->step;
        if (!bad)
            return v[i];
    }
    return NULL;
}

static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...)
{
    if (*used >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n < cap - *used ? (size_t)n : cap - *used - 1;
}

static const char *action_phrase(enum gh_action a)
{
    switch (a) {
    case GH_ACT_NONE: return "take no action";
    case GH_ACT_RETRY_IN_PLACE: return "retry the job in place";
    case GH_ACT_RESTART_FROM_CHECKPOINT: return "restart the job from its checkpoint";
    case GH_ACT_ISOLATE_NODE: return "isolate the node";
    case GH_ACT_DRAIN_NODE: return "drain the node";
    case GH_ACT_RESET_GPU: return "reset the GPU";
    case GH_ACT_REBOOT_NODE: return "reboot the node";
    case GH_ACT_REPLACE_NODE: return "replace the node";
    case GH_ACT_RUN_DIAGNOSTICS: return "run diagnostics";
    default: return "?";
    }
}

static uint64_t incident_hash(const struct gh_incident *inc)
{
    uint64_t h = gh_hash_u64(GH_HASH_INIT, (uint64_t)inc->cls);
    h = gh_hash_str(h, inc->node);
    h = gh_hash_u64(h, (uint64_t)(int64_t)inc->gpu);
    h = gh_hash_str(h, inc->job);
    h = gh_hash_u64(h, (uint64_t)inc->first_ts);
    h = gh_hash_str(h, inc->rule);
    return h;
}

/* A rule's base actions for f: its own, or the XID catalog's for f's code. */
static int base_actions(const struct gh_rule *r, const struct gh_finding *f, enum gh_action *out)
{
    if (!r->catalog_actions) {
        memcpy(out, r->actions, (size_t)r->n_actions * sizeof *out);
        return r->n_actions;
    }
    const struct gh_xid_info *x = gh_xid_lookup(f->code >= 0 ? f->code : -1);
    int n = x->n_actions < GH_POLICY_MAX_ACTIONS ? x->n_actions : GH_POLICY_MAX_ACTIONS;
    memcpy(out, x->actions, (size_t)n * sizeof *out);
    if (n == 0)
        out[n++] = GH_ACT_RUN_DIAGNOSTICS;
    return n;
}

static void subject_key(char *key, size_t cap, int rule, const struct gh_finding *f)
{
    gh_sfmt(key, cap, "%d#%s%s", rule, f->node ? "n:" : f->job ? "j:" : "-",
             f->node ? f->node : f->job ? f->job : "");
}

/* ---- proportion: actions fitted to the harm --------------------------- */

/* What takes the node or GPU out of service (diagnostics are the agent's
 * light probes: they run beside the job). */
static bool disruptive(enum gh_action a) { return targets_node(a); }

static bool has_act(const enum gh_action *a, int n, enum gh_action x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x)
            return true;
    return false;
}

static int drop_act(enum gh_action *a, int n, enum gh_action x)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (a[i] != x)
            a[k++] = a[i];
    return k;
}

/* The job a finding on a node concerns: its own, else the one running
 * there now (the topology skips jobs that ended or left the node). */
static bool refuses_pods(const struct gh_finding *f)
{
    return f->node && !f->job && f->kind == GH_KIND_POD_FAILED &&
           f->cls != GH_CLASS_FLAPPING_NODE && f->cls != GH_CLASS_APPLICATION;
}

static const char *job_of(struct gh_decider *d, const struct gh_finding *f)
{
    /* a node refusing the pods of several jobs (det_podhost.c) concerns
     * none of them: their pods never ran there */
    if (f->job || !f->node || f->cls == GH_CLASS_FLAPPING_NODE || refuses_pods(f))
        return f->job;
    long j = gh_topology_job_on_node(d->topo, f->node, f->gpu);
    return j >= 0 ? gh_topology_job_name(d->topo, (size_t)j) : NULL;
}

struct fit {
    bool assessed;
    struct gh_impact_view iv;
    const char *job;       /* the job harmed, or NULL */
    bool running;          /* job still runs where the fault is */
    char gone_why[160];    /* when not: why */
    unsigned deferred;     /* bit per action left for a safe moment */
    int n_deferred;
    enum gh_action deferred_list[GH_INCIDENT_MAX_ACTIONS];
    bool restart_added, restart_dropped_done, restart_dropped_gone, restart_dropped_none;
};

static void assess(struct gh_decider *d, const struct gh_finding *f, int64_t now, struct fit *x)
{
    if (x->assessed)
        return;
    x->assessed = true;
    x->job = job_of(d, f);
    x->running = true;
    int64_t first = f->first_ts ? f->first_ts : now;
    if (x->job && d->live &&
        !d->live(d->live_ctx, x->job, f->node, first, x->gone_why, sizeof x->gone_why))
        x->running = false;
    gh_impact_assess(f, x->running ? x->job : NULL, d->tl, d->topo, &d->policy->settings, now,
                     d->live ? d->progress : NULL, d->live_ctx, &x->iv);
}

/* Fits actions a[0..n) to the harm x assessed (docs/engine.md, "Impact"):
 * with nothing harmed and nothing urgent, what takes the node or GPU out of
 * service waits for a safe moment (deferred); a job whose processes died or
 * compute wrong is restarted from its checkpoint; a job that no longer runs
 * there, or that an open incident already restarted after this evidence
 * began, is not. Returns the new count. */
static int fit_actions(struct gh_decider *d, const struct gh_finding *f, int64_t now, struct fit *x,
                       enum gh_action *a, int n)
{
    x->deferred = 0;
    x->n_deferred = 0;
    x->restart_added = x->restart_dropped_done = x->restart_dropped_gone =
        x->restart_dropped_none = false;
    /* what the source itself requires (XID 154's recovery action) is urgent */
    if (f->n_requested > 0)
        x->iv.urgent = true;
    if (!x->iv.urgent && x->iv.impact == GH_IMPACT_NONE && f->cls != GH_CLASS_APPLICATION) {
        /* with no job there the GPU is idle now: a reset or diagnostics
         * need not wait, but nothing harmed still takes no node out */
        bool idle = !x->job || !x->running;
        int k = 0;
        for (int i = 0; i < n; i++) {
            bool wait = idle ? a[i] == GH_ACT_ISOLATE_NODE || a[i] == GH_ACT_DRAIN_NODE ||
                                   a[i] == GH_ACT_REPLACE_NODE
                             : disruptive(a[i]);
            if (wait && f->node) {
                if (!(x->deferred & (1u << a[i])) && x->n_deferred < GH_INCIDENT_MAX_ACTIONS)
                    x->deferred_list[x->n_deferred++] = a[i];
                x->deferred |= 1u << a[i];
            } else if (a[i] == GH_ACT_RESTART_FROM_CHECKPOINT) {
                x->restart_dropped_none = true;
            } else {
                a[k++] = a[i];
            }
        }
        n = k;
    }
    bool harmed = x->iv.impact == GH_IMPACT_DIED || x->iv.impact == GH_IMPACT_WRONG;
    if (harmed && x->job && x->running && f->node && f->cls != GH_CLASS_APPLICATION &&
        !has_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT) && !has_act(a, n, GH_ACT_RETRY_IN_PLACE) &&
        n < GH_POLICY_MAX_ACTIONS) {
        /* after what takes the node out of service, before the rest */
        int at = 0;
        for (int i = 0; i < n; i++)
            if (a[i] == GH_ACT_ISOLATE_NODE || a[i] == GH_ACT_DRAIN_NODE)
                at = i + 1;
        memmove(a + at + 1, a + at, (size_t)(n - at) * sizeof a[0]);
        a[at] = GH_ACT_RESTART_FROM_CHECKPOINT;
        n++;
        x->restart_added = true;
    }
    if (x->job && !x->running && has_act(a, n, GH_ACT_RETRY_IN_PLACE)) {
        /* its controller said it is over (a crash loop that spent its
         * backoff limit): retrying would only fail again */
        n = drop_act(a, n, GH_ACT_RETRY_IN_PLACE);
        x->restart_dropped_gone = true;
    }
    if (x->iv.progressing && has_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT)) {
        /* its steps kept coming: nothing of it to restart */
        n = drop_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT);
        x->restart_dropped_none = true;
    }
    if (has_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT) && f->node && x->job) {
        /* an open incident took this node out and restarted the job: it
         * restarted away from the node, a later fault there is not its */
        struct episode *nep = episode_find(d, 'n', f->node);
        unsigned moved = (1u << GH_ACT_RESTART_FROM_CHECKPOINT) | (1u << GH_ACT_ISOLATE_NODE) |
                         (1u << GH_ACT_DRAIN_NODE) | (1u << GH_ACT_REPLACE_NODE);
        if (episode_open(nep, now) && (nep->acts & (1u << GH_ACT_RESTART_FROM_CHECKPOINT)) &&
            (nep->acts & moved & ~(1u << GH_ACT_RESTART_FROM_CHECKPOINT)) &&
            nep->decided < (f->first_ts ? f->first_ts : now)) {
            n = drop_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT);
            x->restart_dropped_done = true;
        }
    }
    if (has_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT)) {
        struct episode *jep = x->job ? episode_find(d, 'j', x->job) : NULL;
        int64_t first = f->first_ts ? f->first_ts : now;
        if (x->job && !x->running) {
            n = drop_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT);
            x->restart_dropped_gone = true;
        } else if (episode_open(jep, now) && (jep->acts & (1u << GH_ACT_RESTART_FROM_CHECKPOINT)) &&
                   jep->decided >= first && jep->cls != GH_CLASS_SILENT_DATA_CORRUPTION &&
                   f->cls != GH_CLASS_SILENT_DATA_CORRUPTION) {
            n = drop_act(a, n, GH_ACT_RESTART_FROM_CHECKPOINT);
            x->restart_dropped_done = true;
        }
    }
    return n;
}

/* Whether an open episode already holds what f calls for: its actions,
 * and, when f only records (strength 0), the same cause and what it defers. */
static bool covered(const struct episode *ep, const struct gh_finding *f, int strength_f,
                    unsigned acts_f, unsigned deferred_f, unsigned asked)
{
    if (strength_f > ep->strength || (asked & ~ep->acts) || (acts_f & ~ep->acts & ~1u))
        return false;
    if (deferred_f & ~(ep->deferred | ep->acts))
        return false;
    if (strength_f <= 1 && record_only(ep) && ep->cls != f->cls)
        return false; /* another cause on the same node: its own record */
    if ((deferred_f & (1u << GH_ACT_RESET_GPU)) && f->gpu != ep->gpu)
        return false; /* another GPU to reset */
    return true;
}

/* A second fault of the node's GPUs is not more of the first: another GPU's
 * serious fault well after the open incident was decided (XID 79 on GPU 0,
 * then XID 48 on GPU 3 a quarter of an hour later) is its own incident. */
#define OTHER_FAULT_NS (300 * GH_NS_PER_S)
/* The GPU a finding is about: its index when known, else the bus id its
 * first evidence names (kernel-log lines name only the bus). 0: none. */
static uint64_t dev_of(const struct gh_finding *f)
{
    if (f->gpu >= 0)
        return (uint64_t)f->gpu + 1;
    for (size_t i = 0; i < f->n_evidence; i++)
        if (f->evidence[i]->sig.pci)
            return gh_hash_str(GH_HASH_INIT, f->evidence[i]->sig.pci) | (1ULL << 63);
    return 0;
}
static bool other_fault(const struct episode *ep, const struct gh_finding *f, int64_t now)
{
    int64_t first = f->first_ts ? f->first_ts : now;
    return (f->cls == GH_CLASS_GPU_HARDWARE || f->cls == GH_CLASS_GPU_MEMORY) &&
           (ep->cls == GH_CLASS_GPU_HARDWARE || ep->cls == GH_CLASS_GPU_MEMORY) &&
           f->severity >= GH_SEV_HIGH && ep->dev && dev_of(f) && dev_of(f) != ep->dev &&
           first - ep->decided >= OTHER_FAULT_NS;
}

/* A fault whose rule restarts the job it harms, on a node whose open
 * episode restarted another job: a restart of that other job, not of this
 * one (a contained error, XID 94, kills only the processes of the job on
 * its GPU; a second job hit on the same node needs its own restart). */
static bool other_job(struct gh_decider *d, const struct episode *ep, const struct gh_finding *f,
                      const enum gh_action *base, int n_base)
{
    if (!ep->job[0] || !has_act(base, n_base, GH_ACT_RESTART_FROM_CHECKPOINT))
        return false;
    const char *j = job_of(d, f);
    return j && strcmp(j, ep->job) != 0;
}

static unsigned act_mask(const enum gh_action *a, int n)
{
    unsigned m = 0;
    for (int i = 0; i < n; i++)
        m |= 1u << a[i];
    return m;
}

struct expire_ctx {
    const struct gh_policy *p;
    int64_t now;
};

/* The breaker (docs/engine.md, "Shared causes"): the nodes one rule took
 * out of service or reset for one code within settings.fleet.window. More
 * than settings.fleet.breaker of them is one cause beyond them (a driver,
 * a switch, power): the next wait for a person, as one incident. */
#define BREAKER_MAX 64
#define BREAKER_JOBS 16
struct breaker {
    int n;
    uint32_t node[BREAKER_MAX]; /* topology indices, oldest first */
    int64_t ts[BREAKER_MAX];
    bool emitted; /* its shared incident was emitted */
    char inc_id[32]; /* ... with this id: what later nodes join */
    int n_jobs;
    uint64_t jobs[BREAKER_JOBS]; /* jobs it restarted */
};

static bool drop_breaker(const char *key, void *value, void *ctx)
{
    const struct expire_ctx *x = ctx;
    struct breaker *b = value;
    (void)key;
    if (b && b->n && b->ts[b->n - 1] >= x->now - x->p->settings.fleet_window_ns)
        return false;
    free(b);
    return true;
}

static bool hits_node(enum gh_action a)
{
    return takes_out(a) || a == GH_ACT_RESET_GPU || a == GH_ACT_REBOOT_NODE;
}

/* Counts inc's node against its rule's breaker; true when the breaker is
 * open (more nodes than allowed): the incident must not act on its node,
 * and *out then holds what became of it (one shared incident). */
static bool breaker_open(struct gh_decider *d, const struct gh_incident *inc,
                         const struct gh_finding *f, int64_t now, enum gh_outcome *out)
{
    bool hits = false;
    for (int i = 0; i < inc->n_actions; i++)
        hits |= hits_node(inc->actions[i]);
    long ni = inc->node ? gh_topology_find_node(d->topo, inc->node) : -1;
    if (!hits || ni < 0)
        return false;
    const struct gh_policy_settings *st = &d->policy->settings;
    char key[160];
    gh_sfmt(key, sizeof key, "%s#%d#%s", inc->rule ? inc->rule : "", f->code,
            f->condition ? f->condition : "");
    struct breaker *b = slot(d, d->breakers, key, sizeof *b);
    if (!b)
        return false;
    int drop = 0;
    while (drop < b->n && b->ts[drop] < now - st->fleet_window_ns)
        drop++;
    if (drop) {
        memmove(b->node, b->node + drop, (size_t)(b->n - drop) * sizeof b->node[0]);
        memmove(b->ts, b->ts + drop, (size_t)(b->n - drop) * sizeof b->ts[0]);
        b->n -= drop;
        if (b->n == 0) {
            b->emitted = false;
            b->inc_id[0] = '\0';
            b->n_jobs = 0;
        }
    }
    for (int i = 0; i < b->n; i++)
        if (b->node[i] == (uint32_t)ni) {
            b->ts[i] = now;
            if (b->emitted && d->joined && b->inc_id[0] && f->n_evidence)
                d->joined(d->joined_ctx, b->inc_id, inc->node, f->evidence, f->n_evidence);
            return b->emitted; /* the same node again */
        }
    int limit = st->fleet_breaker < BREAKER_MAX - 1 ? st->fleet_breaker : BREAKER_MAX - 1;
    if (b->n == BREAKER_MAX) {
        memmove(b->node, b->node + 1, (BREAKER_MAX - 1) * sizeof b->node[0]);
        memmove(b->ts, b->ts + 1, (BREAKER_MAX - 1) * sizeof b->ts[0]);
        b->n--;
    }
    b->node[b->n] = (uint32_t)ni;
    b->ts[b->n++] = now;
    if (b->n <= limit)
        return false;
    /* Open: one incident for all of them, acting on none. */
    const char *names[BREAKER_MAX];
    for (int i = 0; i < b->n; i++)
        names[i] = gh_topology_node_name(d->topo, b->node[i]);
    char component[192], what[200];
    enum gh_scope sc =
        gh_scope_common(d->topo, b->node, (size_t)b->n, NULL, component, sizeof component);
    gh_sfmt(what, sizeof what,
            "breaker: rule %s would take a %d%s node out of service or reset it "
            "for %s within %llds (at most %d)",
            inc->rule ? inc->rule : "?", b->n,
            b->n == 2   ? "nd"
            : b->n == 3 ? "rd"
                        : "th",
            f->code >= 0 ? "the same code" : "the same cause",
            (long long)(st->fleet_window_ns / GH_NS_PER_S), limit);
    struct gh_shared sh = {
        .cls = inc->cls,
        .severity = inc->severity,
        .scope = sc == GH_SCOPE_UNSAID ? GH_SCOPE_FLEET : sc,
        .component = component[0] ? component : NULL,
        .n_nodes = (size_t)b->n,
        .nodes = names,
        .n_evidence = inc->n_evidence,
        .evidence = inc->evidence,
        .window_ns = st->fleet_window_ns,
        .key_hash = gh_hash_str(GH_HASH_INIT, key),
        .what = what,
    };
    uint64_t restarted = 0;
    *out = gh_decider_shared(d, &sh, f, now, !b->emitted, b->emitted, b->jobs, b->n_jobs,
                             &restarted);
    if (*out == GH_OUT_DECIDED && !b->emitted)
        gh_sfmt(b->inc_id, sizeof b->inc_id, "%s", d->last_id);
    else if (*out == GH_OUT_ABSORBED && d->joined && b->inc_id[0] && f->n_evidence)
        d->joined(d->joined_ctx, b->inc_id, inc->node, f->evidence, f->n_evidence);
    b->emitted = true;
    if (restarted && b->n_jobs < BREAKER_JOBS)
        b->jobs[b->n_jobs++] = restarted;
    return true;
}

enum gh_outcome gh_decider_submit(struct gh_decider *d, const struct gh_finding *f, int64_t now,
                                  int64_t boot_ts)
{
    const struct gh_policy *p = d->policy;
    d->st.findings++;
    struct fit fx;
    fx.assessed = false;
    struct gh_policy_query q = {f->cls,    f->kind, f->code,        f->severity, f->has_metric,
                                f->metric, false,   GH_IMPACT_NONE, f->condition};
    int ri = gh_policy_match(p, &q);
    if (gh_policy_impact_matters(p, &q, ri)) {
        /* a rule that matches on impact comes first: assess, then match */
        assess(d, f, now, &fx);
        q.has_impact = true;
        q.impact = fx.iv.impact;
        ri = gh_policy_match(p, &q);
    }
    if (ri < 0) {
        d->st.unmatched++;
        return GH_OUT_UNMATCHED;
    }
    /* the first matching rule that governs the finding's node; when none
     * does, the first match decides and the driver records that no rule
     * governs the node (it calls the same filter) */
    for (int gi = ri; d->governs && gi >= 0 && f->node; gi = gh_policy_match_from(p, &q, gi + 1))
        if (d->governs(d->governs_ctx, gi, f->node)) {
            ri = gi;
            break;
        }
    const struct gh_rule *r = &p->rules[ri];
    enum gh_action base[GH_POLICY_MAX_ACTIONS];
    int n_base = base_actions(r, f, base);

    /* Evidence of a cause already decided joins it, unless it calls for more. */
    struct episode *ep = f->node ? episode_find(d, 'n', f->node)
                                 : f->job ? episode_find(d, 'j', f->job) : NULL;
    unsigned asked = 0; /* what the source asks for beyond the open incident */
    for (int i = 0; i < f->n_requested; i++)
        asked |= 1u << f->requested[i];
    bool absorb = false;
    if (episode_open(ep, now) && !other_condition(ep, f) && !other_fault(ep, f, now) &&
        !other_job(d, ep, f, base, n_base)) {
        /* a Node condition's harm shown after its incident (a pod the host
         * failed) is weighed against what the incident did: its job's
         * restart is more, though the rule's actions are the same */
        bool harm_after = f->kind == GH_KIND_NODE_CONDITION && f->impact == GH_IMPACT_DIED;
        if (strength(base, n_base) <= ep->strength && (asked & ~ep->acts) == 0 &&
            (!record_only(ep) || ep->cls == f->cls) && !harm_after) {
            absorb = true;
        } else if (record_only(ep) && ep->cls == f->cls && f->severity < GH_SEV_HIGH &&
                   f->impact < 0 && now - ep->assessed < REASSESS_NS && (asked & ~ep->acts) == 0) {
            absorb = true; /* a record of this cause, assessed a moment ago */
        } else {
            /* what it calls for once fitted to the harm */
            enum gh_action fitted[GH_POLICY_MAX_ACTIONS];
            memcpy(fitted, base, (size_t)n_base * sizeof base[0]);
            assess(d, f, now, &fx);
            int nf = fit_actions(d, f, now, &fx, fitted, n_base);
            absorb = covered(ep, f, strength(fitted, nf), act_mask(fitted, nf), fx.deferred, asked);
            if (record_only(ep))
                ep->assessed = now;
        }
    }
    if (absorb && ep->cleared && f->kind == GH_KIND_NODE_CONDITION) {
        /* the flag raised again: what it deferred is due again on harm */
        ep->cleared = false;
        if (ep->deferred && record_only(ep) && f->node)
            rec_hold(ep, f, job_of(d, f), f->evidence, f->n_evidence);
    }
    if (absorb) {
        /* Evidence keeps a node's episode open, but for at most two
         * episodes after the decision: a node that still fails jobs after
         * its incident's actions (back from repair, still broken) is a new
         * incident, escalated, not more of the old one forever. A record
         * that took no action stays open while its cause lasts. */
        int64_t until = now + p->settings.episode_ns, cap = ep->decided + 2 * p->settings.episode_ns;
        if (until > cap && !record_only(ep))
            until = cap;
        if (f->node && until > ep->expires)
            ep->expires = until;
        d->st.absorbed++;
        if (d->joined && ep->inc_id[0] && f->n_evidence)
            d->joined(d->joined_ctx, ep->inc_id, f->node, f->evidence, f->n_evidence);
        return GH_OUT_ABSORBED;
    }

    if (r->boot_grace_ns > 0 && boot_ts != INT64_MIN && now >= boot_ts &&
        now - boot_ts < r->boot_grace_ns) {
        d->st.grace++;
        return GH_OUT_GRACE;
    }

    char key[320];
    subject_key(key, sizeof key, ri, f);
    struct occ *o = NULL;
    if (r->repetitions > 1) {
        o = slot(d, d->occs, key, sizeof *o);
        if (!o)
            return GH_OUT_ERROR;
        o->rule = ri;
        /* Forget occurrences that left the window. */
        int drop = 0;
        while (drop < o->n && r->window_ns > 0 && o->ts[drop] < now - r->window_ns)
            drop++;
        if (drop) {
            memmove(o->ts, o->ts + drop, (size_t)(o->n - drop) * sizeof o->ts[0]);
            o->n -= drop;
            int64_t oldest = o->n ? o->ts[0] : INT64_MAX;
            size_t keep = 0;
            for (size_t i = 0; i < o->n_ev; i++) {
                if (o->ev[i]->ts_ns < oldest && o->ev[i]->ts_ns < now - r->window_ns)
                    gh_tl_unref(o->ev[i]);
                else
                    o->ev[keep++] = o->ev[i];
            }
            o->n_ev = keep;
        }
        bool bounce = o->n && r->debounce_ns > 0 && now - o->ts[o->n - 1] < r->debounce_ns;
        if (!bounce) {
            if (o->n == OCC_MAX) {
                memmove(o->ts, o->ts + 1, (OCC_MAX - 1) * sizeof o->ts[0]);
                o->n--;
            }
            o->ts[o->n++] = now;
        }
        for (size_t i = 0; i < f->n_evidence; i++) {
            if (o->n_ev == OCC_MAX) {
                gh_tl_unref(o->ev[0]);
                memmove(o->ev, o->ev + 1, (OCC_MAX - 1) * sizeof o->ev[0]);
                o->n_ev--;
            }
            o->ev[o->n_ev++] = gh_tl_ref(f->evidence[i]);
        }
        if (o->n < r->repetitions) {
            d->st.pending++;
            return GH_OUT_PENDING;
        }
    }

    /* Decide. */
    struct gh_incident inc;
    memset(&inc, 0, sizeof inc);
    inc.cls = f->cls;
    inc.node = f->node;
    inc.gpu = f->node ? f->gpu : -1;
    /* A node-level fault hits the job running there now; a flapping node
     * is about the node across jobs, so it names none. A job that ended or
     * left before the evidence is not affected. */
    assess(d, f, now, &fx);
    inc.job = fx.running ? fx.job : NULL;
    inc.impact = fx.iv.impact;
    inc.has_slowdown = fx.iv.has_slowdown;
    inc.slowdown = fx.iv.slowdown;
    inc.urgent = fx.iv.urgent;
    inc.rule = r->name;
    inc.severity = f->severity;
    inc.decided_ts = now;

    /* Evidence: pending occurrences' and the finding's, oldest first. */
    const struct gh_tl_entry *ev[OCC_MAX + GH_FINDING_MAX_EVIDENCE];
    size_t n_ev = 0;
    if (o)
        for (size_t i = 0; i < o->n_ev; i++)
            ev[n_ev++] = o->ev[i];
    for (size_t i = 0; i < f->n_evidence; i++)
        ev[n_ev++] = f->evidence[i];
    qsort(ev, n_ev, sizeof ev[0], gh_tl_entry_cmp);
    for (size_t i = 0; i < n_ev; i++) {
        if (i && ev[i] == ev[i - 1])
            continue;
        if (inc.n_evidence < GH_INCIDENT_MAX_EVIDENCE)
            inc.evidence[inc.n_evidence++] = ev[i];
    }
    /* first_ts is the ts of the earliest evidence (spec section 3): a
     * detector's onset that its evidence no longer holds does not count. */
    inc.first_ts = f->first_ts ? f->first_ts : now;
    if (inc.n_evidence)
        inc.first_ts = inc.evidence[0]->ts_ns;

    /* Actions, escalated by earlier incidents of this rule on this subject. */
    struct hist *h = slot(d, d->hists, key, sizeof *h);
    if (h)
        h->rule = ri;
    int earlier[GH_POLICY_MAX_ESCALATIONS] = {0};
    for (int e = 0; h && e < r->n_escalations; e++)
        for (int i = 0; i < h->n; i++)
            if (r->escalations[e].within_ns == 0 || h->ts[i] >= now - r->escalations[e].within_ns)
                earlier[e]++;
    enum gh_action acts[GH_POLICY_MAX_ACTIONS];
    int n_acts = gh_policy_actions(r, earlier, acts, &inc.escalation);
    if (inc.escalation == 0) {
        memcpy(acts, base, (size_t)n_base * sizeof acts[0]);
        n_acts = n_base;
    }
    /* What the source asks for (XID 154's recovery action) comes first. */
    enum gh_action all[GH_POLICY_MAX_ACTIONS + 4];
    int n_all = 0;
    for (int i = 0; i < f->n_requested && i < 4; i++)
        all[n_all++] = f->requested[i];
    for (int i = 0; i < n_acts; i++) {
        bool dup = false;
        for (int k = 0; k < n_all; k++)
            dup |= all[k] == acts[i];
        if (!dup)
            all[n_all++] = acts[i];
    }
    n_all = fit_actions(d, f, now, &fx, all, n_all > GH_POLICY_MAX_ACTIONS ? GH_POLICY_MAX_ACTIONS
                                                                           : n_all);
    for (int i = 0; i < fx.n_deferred; i++)
        inc.deferred[inc.n_deferred++] = fx.deferred_list[i];
    for (int i = 0; i < n_all && inc.n_actions < GH_INCIDENT_MAX_ACTIONS; i++) {
        if (!inc.node && targets_node(all[i]))
            continue;
        if (!inc.job && all[i] == GH_ACT_RESTART_FROM_CHECKPOINT)
            continue;
        inc.actions[inc.n_actions++] = all[i];
    }
    if (inc.n_actions == 0)
        inc.actions[inc.n_actions++] = GH_ACT_NONE;

    /* Checkpoint: the latest saved before the first anomaly. An open
     * silent-data-corruption incident on the job moves that point back. */
    int64_t anomaly = f->anomaly_ts ? f->anomaly_ts : inc.first_ts, below = f->anomaly_step;
    /* A straggler is slow, not wrong: every checkpoint it saved is good, so
     * it resumes from the latest, losing no correct work. */
    if (f->cls == GH_CLASS_STRAGGLER) {
        anomaly = now + 1;
        below = -1;
    }
    struct episode *jep = inc.job ? episode_find(d, 'j', inc.job) : NULL;
    if (episode_open(jep, now) && jep->cls == GH_CLASS_SILENT_DATA_CORRUPTION &&
        jep->anomaly_ts < anomaly) {
        anomaly = jep->anomaly_ts;
        below = jep->anomaly_step;
    }
    /* Corruption of the job that began earlier (whatever node its incident
     * blamed): no restart of the episode resumes from a checkpoint saved
     * while it was corrupting, from its onset until the restart that the
     * corruption's incident ordered took effect; what the job saved after
     * that restart (off the suspect node) is good. */
    struct episode *cep = inc.job ? episode_find(d, 'c', inc.job) : NULL;
    if (episode_open(cep, now) && cep->anomaly_ts < anomaly) {
        /* More corruption, or a fault of the node it blamed (or of any node
         * when it blamed none): the same root cause, the job may still be
         * wrong. Another node's fault: only the checkpoints of the
         * corrupting run are excluded. */
        bool same = inc.cls == GH_CLASS_SILENT_DATA_CORRUPTION || cep->node_hash == 0 ||
                    (inc.node && gh_hash_str(GH_HASH_INIT, inc.node) == cep->node_hash);
        const struct gh_tl_entry *c0 = same ? NULL : checkpoint_before(d, inc.job, anomaly, below);
        if (same || !c0 ||
            (c0->ts_ns >= cep->anomaly_ts && c0->ts_ns < cep->decided + CORRUPT_SETTLE_NS)) {
            anomaly = cep->anomaly_ts;
            below = cep->anomaly_step;
        }
    }
    /* More corruption on a node an earlier corruption incident blamed and
     * left in the job: the same bad GPU most likely computed wrong all the
     * while (two independent corruption signals on one node by chance are
     * rare), so resume from before the first, as long as a checkpoint
     * saved before it is still known. */
    bool suspect = cep && cep->active && inc.cls == GH_CLASS_SILENT_DATA_CORRUPTION && inc.node &&
                   now <= cep->suspect_until &&
                   gh_hash_str(GH_HASH_INIT, inc.node) == cep->suspect_hash &&
                   cep->suspect_ts < anomaly;
    bool restarts = false;
    for (int i = 0; i < inc.n_actions; i++)
        restarts |= inc.actions[i] == GH_ACT_RESTART_FROM_CHECKPOINT && inc.job;
    const struct gh_tl_entry *ck = restarts && suspect
                                       ? checkpoint_before(d, inc.job, cep->suspect_ts,
                                                           cep->suspect_step)
                                       : NULL;
    bool by_suspect = ck != NULL;
    if (restarts && !ck)
        ck = checkpoint_before(d, inc.job, anomaly, below);
    if (by_suspect) {
        anomaly = cep->suspect_ts;
        below = cep->suspect_step;
    }
    if (ck) {
        inc.has_checkpoint = true;
        inc.checkpoint_step = ck->sig.step;
        inc.checkpoint_path = ck->sig.path;
    }

    /* Reason: what was seen, then what the rule chose. */
    size_t used = 0;
    append(inc.reason, sizeof inc.reason, &used, "%s", f->what[0] ? f->what : gh_class_name(f->cls));
    append(inc.reason, sizeof inc.reason, &used, "; rule %s", r->name);
    if (inc.escalation)
        append(inc.reason, sizeof inc.reason, &used, " (escalated: incident %d of this rule here)",
               earlier[inc.escalation - 1] + 1);
    if (r->repetitions > 1)
        append(inc.reason, sizeof inc.reason, &used, " (%d occurrences)", o ? o->n : 1);
    append(inc.reason, sizeof inc.reason, &used, " chose to ");
    for (int i = 0; i < inc.n_actions; i++) {
        append(inc.reason, sizeof inc.reason, &used, "%s%s",
               i == 0 ? "" : i == inc.n_actions - 1 ? " and " : ", ", action_phrase(inc.actions[i]));
        if (inc.actions[i] == GH_ACT_RESTART_FROM_CHECKPOINT) {
            if (ck && by_suspect)
                append(inc.reason, sizeof inc.reason, &used,
                       " at step %lld (before step %lld: %s was already suspected of corruption "
                       "then and stayed in the job)",
                       (long long)ck->sig.step, (long long)cep->suspect_step, inc.node);
            else if (ck)
                append(inc.reason, sizeof inc.reason, &used, " at step %lld",
                       (long long)ck->sig.step);
            else
                append(inc.reason, sizeof inc.reason, &used, " (none saved before the evidence)");
        }
    }
    /* the impact, and what it changed */
    if (fx.job && fx.running)
        append(inc.reason, sizeof inc.reason, &used, "; impact on %s: %s (%s)", fx.job,
               gh_impact_name(fx.iv.impact), fx.iv.why);
    else if (fx.job)
        append(inc.reason, sizeof inc.reason, &used, "; %s is not restarted: %s", fx.job,
               fx.gone_why);
    else if (inc.node && refuses_pods(f))
        append(inc.reason, sizeof inc.reason, &used,
               "; no job restarts: the refused pods never ran, their controllers create them "
               "again, elsewhere once %s is out of scheduling",
               inc.node);
    else if (inc.node)
        append(inc.reason, sizeof inc.reason, &used, "; impact: none (no job runs there)");
    if (fx.restart_added)
        append(inc.reason, sizeof inc.reason, &used, "; the job was harmed, so it restarts");
    if (fx.restart_dropped_done)
        append(inc.reason, sizeof inc.reason, &used,
               "; the job was already restarted by an open incident since this began");
    if (inc.n_deferred) {
        append(inc.reason, sizeof inc.reason, &used, "; %s, so ",
               fx.iv.urgent ? "urgent" : "nothing harmed and the hardware can wait");
        for (int i = 0; i < inc.n_deferred; i++)
            append(inc.reason, sizeof inc.reason, &used, "%s%s",
                   i == 0 ? "" : i == inc.n_deferred - 1 ? " and " : ", ",
                   gh_action_name(inc.deferred[i]));
        if (fx.job && fx.running)
            append(inc.reason, sizeof inc.reason, &used,
                   " wait%s for a safe moment (the GPU idle or the job ended)",
                   inc.n_deferred == 1 ? "s" : "");
        else
            append(inc.reason, sizeof inc.reason, &used, " %s only recorded",
                   inc.n_deferred == 1 ? "is" : "are");
    }
    append(inc.reason, sizeof inc.reason, &used, ".");
    gh_sfmt(inc.id, sizeof inc.id, "inc-%016llx", (unsigned long long)incident_hash(&inc));

    bool harmless = !fx.iv.urgent && (!inc.job || fx.iv.impact == GH_IMPACT_NONE);
    if (inc.node && d->hold && d->hold(d->hold_ctx, f, harmless)) {
        d->st.pending++; /* other nodes may show the same: it waits for them */
        return GH_OUT_PENDING;
    }
    enum gh_outcome tripped = GH_OUT_DECIDED;
    if (breaker_open(d, &inc, f, now, &tripped)) {
        if (o)
            occ_clear(o);
        return tripped;
    }
    d->st.decided++;
    if (inc.node && (inc.cls == GH_CLASS_GPU_HARDWARE || inc.cls == GH_CLASS_GPU_MEMORY ||
                     inc.cls == GH_CLASS_INTERCONNECT))
        d->last_hw = now;
    if (d->cb)
        d->cb(d->cb_ctx, &inc);
    /* Remember: the episode (one incident per root cause) and the history. */
    if (h) {
        if (h->n == HIST_MAX) {
            memmove(h->ts, h->ts + 1, (HIST_MAX - 1) * sizeof h->ts[0]);
            h->n--;
        }
        h->ts[h->n++] = now;
    }
    if (o)
        occ_clear(o);
    char ekey[320];
    gh_sfmt(ekey, sizeof ekey, "%c:%s", inc.node ? 'n' : 'j',
             inc.node ? inc.node : inc.job ? inc.job : "");
    if (inc.node || inc.job) {
        struct episode *ne = slot(d, d->episodes, ekey, sizeof *ne);
        if (ne) {
            /* a follow-up within an open episode adds to what it chose */
            bool was_open = episode_open(ne, now);
            int prev = was_open ? ne->strength : 0;
            if (!was_open)
                ne->acts = 0;
            ne->active = true;
            ne->cleared = false;
            ne->cls = inc.cls;
            ne->kind = f->kind;
            gh_sfmt(ne->cause, sizeof ne->cause, "%s",
                    f->kind == GH_KIND_NODE_CONDITION && f->condition ? f->condition : "");
            ne->strength = strength(inc.actions, inc.n_actions);
            if (ne->strength < prev)
                ne->strength = prev;
            for (int i = 0; i < inc.n_actions; i++)
                ne->acts |= 1u << inc.actions[i];
            if (!was_open)
                ne->job[0] = '\0';
            if (inc.job && has_act(inc.actions, inc.n_actions, GH_ACT_RESTART_FROM_CHECKPOINT))
                gh_sfmt(ne->job, sizeof ne->job, "%s", inc.job);
            if (!was_open)
                ne->deferred = 0;
            ne->deferred |= fx.deferred;
            ne->gpu = inc.gpu;
            ne->dev = dev_of(f);
            ne->assessed = now;
            rec_clear(ne);
            if (ne->deferred && record_only(ne) && inc.node)
                rec_hold(ne, f, inc.job, inc.evidence, inc.n_evidence);
            /* SDC keeps the incident's strength floor: a follow-up that
             * localises the bad node must still be able to isolate it. */
            ne->first_ts = inc.first_ts;
            ne->decided = now;
            ne->expires = now + p->settings.episode_ns;
            ne->anomaly_ts = anomaly;
            ne->anomaly_step = below;
            gh_sfmt(ne->inc_id, sizeof ne->inc_id, "%s", inc.id);
        }
    }
    /* Only corruption incidents open or extend it: the job's other
     * incidents (link flaps, faults elsewhere) must not keep an old onset
     * alive for later, unrelated corruption. */
    if (inc.job && inc.cls == GH_CLASS_SILENT_DATA_CORRUPTION) {
        gh_sfmt(ekey, sizeof ekey, "c:%s", inc.job);
        struct episode *ce = slot(d, d->episodes, ekey, sizeof *ce);
        if (ce) {
            bool was_open = episode_open(ce, now);
            if (!was_open || anomaly < ce->anomaly_ts) {
                ce->anomaly_ts = anomaly;
                ce->anomaly_step = below;
                ce->first_ts = anomaly;
            }
            /* the bad window ends with the latest corruption incident's restart */
            ce->decided = now;
            if (!was_open)
                ce->node_hash = inc.node ? gh_hash_str(GH_HASH_INIT, inc.node) : 0;
            ce->active = true;
            ce->cls = GH_CLASS_SILENT_DATA_CORRUPTION;
            ce->expires = now + p->settings.episode_ns;
            bool removed = false;
            for (int i = 0; i < inc.n_actions; i++)
                removed |= takes_out(inc.actions[i]);
            uint64_t nh = inc.node ? gh_hash_str(GH_HASH_INIT, inc.node) : 0;
            bool held = now <= ce->suspect_until && nh == ce->suspect_hash;
            if (inc.node && !removed) {
                if (!held || anomaly < ce->suspect_ts) {
                    ce->suspect_ts = anomaly;
                    ce->suspect_step = below;
                }
                ce->suspect_hash = nh;
                ce->suspect_until = now + p->settings.sdc_suspect_ns;
            } else if (held && removed) {
                ce->suspect_until = 0; /* out of the job now */
            }
        }
    }
    return GH_OUT_DECIDED;
}

/* ---- expiry ----------------------------------------------------------- */

static const struct gh_rule *rule_at(const struct gh_policy *p, int r)
{
    return r >= 0 && r < p->n_rules ? &p->rules[r] : NULL;
}

static bool drop_episode(const char *key, void *value, void *ctx)
{
    const struct expire_ctx *x = ctx;
    struct episode *ep = value;
    (void)key;
    /* Closed for good: queries look at most a hardware lookback back; a
     * record whose actions wait stays until they are due, a week at most. */
    if (ep && ep->active && ep->expires >= x->now - x->p->settings.hardware_lookback_ns)
        return false;
    if (ep && ep->active && ep->rec.held && ep->decided >= x->now - REC_KEEP_NS)
        return false;
    if (ep && ep->active && ep->suspect_until >= x->now)
        return false;
    episode_free(ep);
    return true;
}

static bool drop_occ(const char *key, void *value, void *ctx)
{
    const struct expire_ctx *x = ctx;
    struct occ *o = value;
    const struct gh_rule *r = o ? rule_at(x->p, o->rule) : NULL;
    (void)key;
    if (o && o->n > 0) {
        if (!r || r->window_ns <= 0 || o->ts[o->n - 1] >= x->now - r->window_ns)
            return false; /* occurrences still counting */
    }
    if (o)
        occ_clear(o);
    free(o);
    return true;
}

static bool drop_hist(const char *key, void *value, void *ctx)
{
    const struct expire_ctx *x = ctx;
    struct hist *h = value;
    const struct gh_rule *r = h ? rule_at(x->p, h->rule) : NULL;
    (void)key;
    if (h && h->n > 0 && r) {
        int64_t within = 0;
        for (int i = 0; i < r->n_escalations; i++) {
            if (r->escalations[i].within_ns == 0)
                return false; /* counted forever */
            if (r->escalations[i].within_ns > within)
                within = r->escalations[i].within_ns;
        }
        if (within > 0 && h->ts[h->n - 1] >= x->now - within)
            return false; /* may still escalate */
    }
    free(h);
    return true;
}

void gh_decider_expire(struct gh_decider *d, int64_t now)
{
    struct expire_ctx x = {d->policy, now};
    gh_strmap_remove_if(d->episodes, drop_episode, &x);
    gh_strmap_remove_if(d->occs, drop_occ, &x);
    gh_strmap_remove_if(d->hists, drop_hist, &x);
    gh_strmap_remove_if(d->breakers, drop_breaker, &x);
}

static bool drop_any_occ(const char *key, void *value, void *ctx)
{
    (void)key;
    (void)ctx;
    if (value)
        occ_clear(value);
    free(value);
    return true;
}

static bool drop_any(const char *key, void *value, void *ctx)
{
    (void)key;
    (void)ctx;
    free(value);
    return true;
}

void gh_decider_set_policy(struct gh_decider *d, const struct gh_policy *policy)
{
    d->policy = policy;
    gh_strmap_remove_if(d->occs, drop_any_occ, NULL);
    gh_strmap_remove_if(d->hists, drop_any, NULL);
    gh_strmap_remove_if(d->breakers, drop_any, NULL);
}

/* Decides node's record again with ent (borrowed) as more evidence and the
 * impact given (-1: assessed), what it says appended to the record's words. */
static enum gh_outcome redecide(struct gh_decider *d, const char *node, struct episode *ep,
                                const struct gh_tl_entry *ent, int impact, const char *more,
                                int64_t now)
{
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = ep->cls;
    f.kind = ep->rec.kind;
    f.code = ep->rec.code;
    /* a copy: deciding rewrites the episode's cause from f.condition */
    char cause[GH_POLICY_CONDITION_MAX];
    gh_sfmt(cause, sizeof cause, "%s", ep->cause);
    f.condition = cause[0] ? cause : NULL;
    f.severity = ep->rec.severity;
    f.has_metric = ep->rec.has_metric;
    f.metric = ep->rec.metric;
    f.node = node;
    f.gpu = ep->gpu;
    f.impact = impact;
    for (size_t i = 0; i < ep->rec.n_ev; i++)
        gh_finding_add(&f, ep->rec.ev[i]);
    gh_finding_add(&f, ent);
    f.first_ts = f.evidence[0]->ts_ns;
    gh_sfmt(f.what, sizeof f.what, "%s; %s", ep->rec.what, more);
    return gh_decider_submit(d, &f, now, INT64_MIN);
}

static struct episode *record_of(struct gh_decider *d, const char *node, const char *job)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    if (!ep || !ep->active || !ep->rec.held || ep->rec.n_ev == 0)
        return NULL;
    if (job && ep->rec.job[0] && strcmp(job, ep->rec.job) != 0)
        return NULL;
    return ep;
}

void gh_decider_job_harmed(struct gh_decider *d, const struct gh_tl_entry *ent, int64_t now)
{
    const struct gh_signal *s = &ent->sig;
    struct episode *ep = record_of(d, s->node, s->job);
    if (!ep || !s->job || !ep->rec.job[0] || ep->decided > ent->ts_ns)
        return;
    /* the same cause still: while the record is open (its evidence goes
     * on), and a failure of the pod's own, not a collective that timed out
     * (another node's fault shows so on every node) nor an eviction */
    enum gh_podfail pf = gh_classify_pod_failure(s);
    if (!episode_open(ep, ent->ts_ns) || pf == GH_PF_IGNORE || pf == GH_PF_COLLECTIVE)
        return;
    /* a Node condition flags the host: only what the host does to a pod
     * (the runtime could not run it, the filesystem went read-only) is its
     * harm; an application's own crash or OOM is not the node's doing */
    if (ep->rec.kind == GH_KIND_NODE_CONDITION && !gh_classify_host_failure(s))
        return;
    char more[256];
    gh_sfmt(more, sizeof more, "then pod %s of %s failed on %s (%s)", s->pod ? s->pod : "?", s->job,
            s->node, s->reason ? s->reason : "?");
    redecide(d, s->node, ep, ent, GH_IMPACT_DIED, more, now);
}

void gh_decider_condition_cleared(struct gh_decider *d, const char *node, const char *condition,
                                  int64_t ts)
{
    struct episode *ep = node ? episode_find(d, 'n', node) : NULL;
    if (!episode_open(ep, ts) || ep->kind != GH_KIND_NODE_CONDITION || !record_only(ep) ||
        strcmp(ep->cause, condition ? condition : "") != 0)
        return;
    /* a flag that went away: nothing it deferred is due. Raised again
     * while the episode lasts, it is the same flag flapping: it joins this
     * record (one per episode, not one per flip); later it is a new
     * incident (and its rule's escalation counts it). */
    rec_clear(ep);
    ep->cleared = true;
}

void gh_decider_job_gone(struct gh_decider *d, const char *node, const struct gh_tl_entry *ent,
                         int64_t now)
{
    const struct gh_signal *s = &ent->sig;
    struct episode *ep = record_of(d, node, s->job);
    if (!ep || !ep->rec.job[0])
        return;
    char more[256];
    gh_sfmt(more, sizeof more, "%s %s: the safe moment for what waited",
            s->job ? s->job : "the job",
            s->kind == GH_KIND_JOB_FINISHED ? "has finished" : "has no pod left on the node");
    /* The facts changed: assess again, however recently the record was
     * (a job that leaves within the minute is a safe moment too). */
    ep->assessed = now - REASSESS_NS;
    if (redecide(d, node, ep, ent, -1, more, now) == GH_OUT_DECIDED)
        rec_clear(ep); /* done: not due again */
}

void gh_decider_job_finished(struct gh_decider *d, const struct gh_tl_entry *ent, int64_t now)
{
    const char *job = ent->sig.job;
    if (!job)
        return;
    /* the nodes whose record waits for this job (few: records are rare) */
    for (size_t i = 0; i < gh_strmap_count(d->episodes); i++) {
        const char *key = gh_strmap_key(d->episodes, i);
        struct episode *ep = gh_strmap_value(d->episodes, i);
        if (key && ep && key[0] == 'n' && key[1] == ':' && ep->rec.held &&
            strcmp(ep->rec.job, job) == 0)
            gh_decider_job_gone(d, key + 2, ent, now);
    }
}

void gh_decider_set_job_live(struct gh_decider *d, gh_job_live_fn fn, gh_progress_fn progress,
                             void *ctx)
{
    d->live = fn;
    d->progress = progress;
    d->live_ctx = ctx;
}

void gh_decider_set_hold(struct gh_decider *d, gh_hold_fn fn, void *ctx)
{
    d->hold = fn;
    d->hold_ctx = ctx;
}

void gh_decider_set_rule_filter(struct gh_decider *d, gh_rule_filter_fn fn, void *ctx)
{
    d->governs = fn;
    d->governs_ctx = ctx;
}

void gh_decider_stats(const struct gh_decider *d, struct gh_decider_stats *out) { *out = d->st; }

size_t gh_decider_memory(const struct gh_decider *d)
{
    return sizeof *d + gh_strmap_memory(d->episodes) + gh_strmap_memory(d->occs) +
           gh_strmap_memory(d->hists) + gh_strmap_live(d->episodes) * sizeof(struct episode) +
           gh_strmap_live(d->occs) * sizeof(struct occ) +
           gh_strmap_live(d->hists) * sizeof(struct hist);
}

/* ---- shared causes ---------------------------------------------------- */

/* A job restarted by an incident with no node: its episode, so that what
 * the fault does next (its pods failing, a collective timing out) does not
 * restart it again (fit_actions). */
static void note_job_restart(struct gh_decider *d, const struct gh_incident *inc, int64_t now)
{
    char key[320];
    gh_sfmt(key, sizeof key, "j:%s", inc->job);
    struct episode *ep = slot(d, d->episodes, key, sizeof *ep);
    if (!ep)
        return;
    bool was_open = episode_open(ep, now);
    if (!was_open) {
        ep->acts = 0;
        ep->deferred = 0;
        ep->strength = 0;
        ep->first_ts = inc->first_ts;
        ep->anomaly_ts = inc->first_ts;
        ep->anomaly_step = -1;
    }
    ep->active = true;
    ep->cls = inc->cls;
    ep->kind = GH_KIND__COUNT;
    ep->cause[0] = '\0';
    ep->gpu = -1;
    ep->acts |= 1u << GH_ACT_RESTART_FROM_CHECKPOINT;
    gh_sfmt(ep->inc_id, sizeof ep->inc_id, "%s", inc->id);
    int st = strength(inc->actions, inc->n_actions);
    if (st > ep->strength)
        ep->strength = st;
    ep->decided = now;
    ep->assessed = now;
    ep->expires = now + d->policy->settings.episode_ns;
}

static int cmp_ev(const void *a, const void *b) { return gh_tl_entry_cmp(a, b); }

/* The job f shows harmed (died or wrong), still running, not among done and
 * not restarted by an open incident since the fault began: the one a shared
 * cause restarts for f, NULL when none. fx gets the assessment. */
static const char *shared_job(struct gh_decider *d, const struct gh_finding *f, int64_t now,
                              const uint64_t *done, int n_done, struct fit *fx)
{
    assess(d, f, now, fx);
    bool harmed = fx->iv.impact == GH_IMPACT_DIED || fx->iv.impact == GH_IMPACT_WRONG;
    if (!harmed || !fx->job || !fx->running)
        return NULL;
    uint64_t jh = gh_hash_str(GH_HASH_INIT, fx->job);
    for (int i = 0; i < n_done; i++)
        if (done[i] == jh)
            return NULL;
    /* its pods fail as the fault goes on: not restarted twice */
    struct episode *jep = episode_find(d, 'j', fx->job);
    int64_t first_ts = f->first_ts ? f->first_ts : now;
    if (episode_open(jep, now) && (jep->acts & (1u << GH_ACT_RESTART_FROM_CHECKPOINT)) &&
        jep->decided >= first_ts - d->policy->settings.fleet_window_ns)
        return NULL;
    return fx->job;
}

bool gh_decider_shared_restarts(struct gh_decider *d, const struct gh_finding *f, int64_t now,
                                const uint64_t *done, int n_done)
{
    struct fit fx;
    fx.assessed = false;
    if (shared_job(d, f, now, done, n_done, &fx))
        return true;
    d->st.findings++; /* it ends here, absorbed by the caller */
    return false;
}

enum gh_outcome gh_decider_shared(struct gh_decider *d, const struct gh_shared *s,
                                  const struct gh_finding *f, int64_t now, bool record,
                                  bool followup, const uint64_t *done, int n_done,
                                  uint64_t *restarted)
{
    *restarted = 0;
    struct fit fx;
    fx.assessed = false;
    const char *job = NULL;
    if (f) {
        d->st.findings++;
        job = shared_job(d, f, now, done, n_done, &fx);
    }
    if (!record && !job) {
        d->st.absorbed++;
        return GH_OUT_ABSORBED;
    }
    struct gh_incident inc;
    memset(&inc, 0, sizeof inc);
    inc.cls = f ? f->cls : s->cls;
    inc.node = NULL;
    inc.gpu = -1;
    inc.job = job;
    inc.rule = "shared-cause";
    inc.severity = f ? f->severity : s->severity;
    inc.impact = f ? fx.iv.impact : GH_IMPACT_NONE;
    inc.decided_ts = now;
    inc.scope = s->scope;
    inc.component = s->component;
    inc.n_affected = s->n_nodes;
    inc.affected_nodes = s->nodes;
    /* Evidence: each node's first showing, then the finding's. */
    const struct gh_tl_entry *ev[GH_INCIDENT_MAX_EVIDENCE + GH_FINDING_MAX_EVIDENCE];
    size_t n_ev = 0;
    for (size_t i = 0; i < s->n_evidence && n_ev < GH_INCIDENT_MAX_EVIDENCE; i++)
        ev[n_ev++] = s->evidence[i];
    for (size_t i = 0; f && i < f->n_evidence; i++)
        ev[n_ev++] = f->evidence[i];
    qsort(ev, n_ev, sizeof ev[0], cmp_ev);
    for (size_t i = 0; i < n_ev; i++)
        if ((!i || ev[i] != ev[i - 1]) && inc.n_evidence < GH_INCIDENT_MAX_EVIDENCE)
            inc.evidence[inc.n_evidence++] = ev[i];
    inc.first_ts = inc.n_evidence ? inc.evidence[0]->ts_ns : now;
    const struct gh_tl_entry *ck = NULL;
    if (job) {
        inc.actions[inc.n_actions++] = GH_ACT_RESTART_FROM_CHECKPOINT;
        int64_t at = f->anomaly_ts ? f->anomaly_ts : f->first_ts ? f->first_ts : inc.first_ts;
        if (inc.first_ts < at)
            at = inc.first_ts;
        ck = checkpoint_before(d, job, at, f->anomaly_step);
        if (ck) {
            inc.has_checkpoint = true;
            inc.checkpoint_step = ck->sig.step;
            inc.checkpoint_path = ck->sig.path;
        }
        *restarted = gh_hash_str(GH_HASH_INIT, job);
    } else {
        inc.actions[inc.n_actions++] = GH_ACT_NONE;
    }
    size_t used = 0;
    char nodes[160];
    size_t nu = 0;
    nodes[0] = '\0';
    for (size_t i = 0; i < s->n_nodes && i < 4; i++)
        append(nodes, sizeof nodes, &nu, "%s%s", i ? ", " : "", s->nodes[i]);
    if (s->n_nodes > 4)
        append(nodes, sizeof nodes, &nu, " and %zu more", s->n_nodes - 4);
    append(inc.reason, sizeof inc.reason, &used,
           "%s on %zu nodes within %.1fs (%s): one cause they share%s%s%s (scope %s), not each "
           "node's own, so no node is blamed or taken out of service for it",
           s->what, s->n_nodes, (double)s->window_ns / GH_NS_PER_S, nodes, s->component ? ", " : "",
           s->component ? s->component : "", s->component ? " in common" : "",
           gh_scope_name(s->scope));
    if (followup)
        append(inc.reason, sizeof inc.reason, &used, " (a follow-up for a harmed job)");
    if (job && ck)
        append(inc.reason, sizeof inc.reason, &used,
               "; impact on %s: %s (%s), so it restarts from its checkpoint at step %lld", job,
               gh_impact_name(fx.iv.impact), fx.iv.why, (long long)ck->sig.step);
    else if (job)
        append(inc.reason, sizeof inc.reason, &used,
               "; impact on %s: %s (%s), so it restarts (none saved before the evidence)", job,
               gh_impact_name(fx.iv.impact), fx.iv.why);
    else if (f && fx.job && fx.running)
        append(inc.reason, sizeof inc.reason, &used, "; impact on %s: %s (%s), so nothing restarts",
               fx.job, gh_impact_name(fx.iv.impact), fx.iv.why);
    append(inc.reason, sizeof inc.reason, &used, "; a person should look at the %s.",
           s->scope == GH_SCOPE_SWITCH          ? "switch or rail"
           : s->scope == GH_SCOPE_RACK          ? "rack (power, cooling)"
           : s->scope == GH_SCOPE_NVLINK_DOMAIN ? "NVLink domain"
                                                : "change these nodes share (a rollout, a check)");
    uint64_t h = incident_hash(&inc);
    h = gh_hash_u64(h, s->key_hash);
    gh_sfmt(inc.id, sizeof inc.id, "inc-%016llx", (unsigned long long)h);
    gh_sfmt(d->last_id, sizeof d->last_id, "%s", inc.id);
    d->st.decided++;
    if (d->cb)
        d->cb(d->cb_ctx, &inc);
    if (job)
        note_job_restart(d, &inc, now);
    return GH_OUT_DECIDED;
}
