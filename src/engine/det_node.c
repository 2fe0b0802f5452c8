/* det_node.c - nodes that went down: a node NotReady for node_down with no
 * node_ready since, while a job's pods run on it, has lost those pods and
 * its job must move. With hardware evidence on the node that explains it,
 * that is one finding blaming the node (its class). Without, the job is
 * restarted without blaming the node (a finding naming only the job), and
 * the node is blamed only when it stays NotReady for not_ready_toleration
 * (Kubernetes' own default: 300 s); a node that comes back Ready before is
 * not. An incident already open on the node (the XID that took it down,
 * say) absorbs a finding, through the decision stage's episodes: one
 * incident per root cause. A node that comes back within node_down is a
 * blip (the flapping detector counts it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "common/strmap.h"
#include "signal/xid_catalog.h"

#define MAX_WATCH 4096
#define HW_EV 8

struct nnode {
    int64_t down_since;           /* INT64_MIN: ready (or never seen NotReady) */
    const struct gh_tl_entry *ev; /* the NotReady signal (ref) */
    bool watched;
    bool job_moved;               /* past node_down: the job's finding was made */
    bool alive;                   /* past node_down the job's ranks there still stepped */
    char job[256];                /* ... for this job */
};

struct ndet {
    struct gh_strmap *nodes; /* node -> struct nnode * */
    long watch[MAX_WATCH];   /* nodes down and not yet judged */
    int n_watch;
    int64_t grace;           /* settings.node_down_ns */
    int64_t toleration;      /* settings.not_ready_toleration_ns (>= grace) */
};

/* When n's outage is next judged. */
static int64_t due(const struct ndet *d, const struct nnode *n)
{
    return n->down_since + (n->job_moved || n->alive ? d->toleration : d->grace);
}

static int nd_create(struct gh_engine *e, void **state)
{
    struct ndet *d = calloc(1, sizeof *d);
    if (!d)
        return GH_ENOMEM;
    d->grace = gh_ctx_settings(e)->node_down_ns;
    d->toleration = gh_ctx_settings(e)->not_ready_toleration_ns;
    if (d->toleration < d->grace)
        d->toleration = d->grace;
    d->nodes = gh_strmap_new(GH_TOPO_MAX_NODES);
    *state = d;
    return d->nodes ? GH_OK : GH_ENOMEM;
}

static void nnode_free(struct nnode *n)
{
    if (n)
        gh_tl_unref(n->ev);
    free(n);
}

static void nd_destroy(void *state)
{
    struct ndet *d = state;
    if (d->nodes)
        for (size_t i = 0; i < gh_strmap_count(d->nodes); i++)
            nnode_free(gh_strmap_value(d->nodes, i));
    gh_strmap_free(d->nodes);
    free(d);
}

static void nd_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct ndet *d = state;
    const struct gh_signal *s = &ent->sig;
    (void)e;
    if (!s->node)
        return;
    long i;
    if (s->kind == GH_KIND_NODE_READY) {
        i = gh_strmap_find(d->nodes, s->node);
        struct nnode *n = i >= 0 ? gh_strmap_value(d->nodes, (size_t)i) : NULL;
        if (n && n->down_since != INT64_MIN) {
            n->down_since = INT64_MIN; /* back within node_down: a blip */
            gh_tl_unref(n->ev);
            n->ev = NULL;
        }
        if (n && n->watched) {
            int keep = 0;
            for (int k = 0; k < d->n_watch; k++)
                if (d->watch[k] != i)
                    d->watch[keep++] = d->watch[k];
            d->n_watch = keep;
            n->watched = false;
        }
        return;
    }
    if (s->kind != GH_KIND_NODE_NOT_READY)
        return;
    int rc = GH_OK;
    i = gh_strmap_intern(d->nodes, s->node, NULL, &rc);
    if (i < 0) {
        if (rc == GH_ENOMEM)
            gh_ctx_nomem(e);
        return;
    }
    struct nnode *n = gh_strmap_value(d->nodes, (size_t)i);
    if (!n) {
        n = calloc(1, sizeof *n);
        if (!n) {
            gh_ctx_nomem(e);
            return;
        }
        n->down_since = INT64_MIN;
        gh_strmap_set_value(d->nodes, (size_t)i, n);
    }
    if (n->down_since != INT64_MIN)
        return; /* still the same outage */
    if (!n->watched) {
        if (d->n_watch >= MAX_WATCH)
            return; /* bounded: the outages already watched still decide */
        d->watch[d->n_watch++] = i;
        n->watched = true;
    }
    n->down_since = ent->ts_ns;
    n->ev = gh_tl_ref(ent);
    n->job_moved = false;
    n->alive = false;
}

/* Whether job's ranks on node reported a step after since: its pods there
 * run on (a kubelet restart, an API server that lost the node's lease). */
static bool still_stepping(struct gh_engine *e, const char *node, const char *job, int64_t since,
                           int64_t now)
{
    const struct gh_tl_entry *v[16];
    size_t k = gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE_GPUS, node, -1,
                                 GH_KIND_BIT(GH_KIND_STEP), since + 1, now, true, v, 16);
    for (size_t i = 0; i < k; i++)
        if (v[i]->sig.job && strcmp(v[i]->sig.job, job) == 0)
            return true;
    return false;
}

/* Hardware evidence on node within [since, until] that explains a node going
 * down: a serious GPU, memory or interconnect fault. Adds it to f and
 * returns its class, or GH_CLASS_UNKNOWN. */
static enum gh_class hardware_cause(struct gh_engine *e, const char *node, int64_t since,
                                    int64_t until, struct gh_finding *f)
{
    const struct gh_tl_entry *v[HW_EV];
    uint32_t kinds = GH_KIND_BIT(GH_KIND_XID) | GH_KIND_BIT(GH_KIND_GPU_LOST) |
                     GH_KIND_BIT(GH_KIND_ECC) | GH_KIND_BIT(GH_KIND_ROW_REMAP);
    size_t n = gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE, node, -1, kinds, since, until,
                                 true, v, HW_EV);
    enum gh_class cls = GH_CLASS_UNKNOWN;
    for (size_t i = n; i-- > 0;) {
        const struct gh_signal *s = &v[i]->sig;
        enum gh_class c = GH_CLASS_UNKNOWN;
        if (s->kind == GH_KIND_XID) {
            const struct gh_xid_info *x = gh_xid_lookup(s->code);
            if (!x->application && !x->secondary && x->severity >= GH_SEV_HIGH)
                c = x->cls;
        } else if (s->kind == GH_KIND_GPU_LOST) {
            c = GH_CLASS_GPU_HARDWARE;
        } else if ((s->kind == GH_KIND_ECC && s->bits == GH_ECC_DOUBLE) ||
                   (s->kind == GH_KIND_ROW_REMAP && s->failure)) {
            c = GH_CLASS_GPU_MEMORY;
        }
        if (c != GH_CLASS_GPU_HARDWARE && c != GH_CLASS_GPU_MEMORY && c != GH_CLASS_INTERCONNECT)
            continue;
        if (cls == GH_CLASS_UNKNOWN) {
            cls = c; /* the latest */
            f->gpu = gh_ctx_gpu_of(e, s);
        }
        gh_finding_add(f, v[i]);
    }
    return cls;
}

/* Judges n's outage at now: the first time (node_down) with hardware
 * evidence blames the node, without only moves the job; the second time
 * (not_ready_toleration) blames the node. Returns true when the outage
 * needs no more judging. */
static bool judge(struct gh_engine *e, struct ndet *d, const char *node, struct nnode *n,
                  int64_t now)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    const char *job = n->job_moved ? n->job : gh_ctx_job_on(e, node, -1);
    if (!job)
        return true; /* nothing of a job to move; repeated outages are the flapping detector's */
    struct gh_finding f;
    gh_finding_init(&f);
    f.kind = GH_KIND_NODE_NOT_READY;
    f.severity = GH_SEV_HIGH;
    f.has_metric = true;
    f.metric = (double)(now - n->down_since) / 1e9;
    f.node = node;
    f.job = job;
    f.first_ts = n->down_since;
    f.impact = GH_IMPACT_DIED;
    gh_finding_add(&f, n->ev);
    f.cls = hardware_cause(e, node, n->down_since - st->hardware_lookback_ns, now, &f);
    /* The job's pods that failed on it meanwhile. */
    const struct gh_tl_entry *v[8];
    size_t k = gh_timeline_query(gh_ctx_timeline(e), GH_TL_NODE, node, -1,
                                 GH_KIND_BIT(GH_KIND_POD_FAILED), n->down_since, now, false, v, 8);
    for (size_t i = 0; i < k; i++)
        if (v[i]->sig.job && strcmp(v[i]->sig.job, job) == 0)
            gh_finding_add(&f, v[i]);
    int64_t stepno;
    bool trains = gh_ctx_job_progressing(e, job, n->down_since, now, &stepno);
    if (f.cls == GH_CLASS_UNKNOWN && n->alive && !n->job_moved && trains) {
        /* still training at the toleration: synchronous training advances
         * only when every rank does, so its pods there run; what is lost
         * is the API server's view of the node (its management network,
         * its kubelet), not its work: nothing to move or take out */
        return true;
    }
    if (f.cls == GH_CLASS_UNKNOWN && !n->job_moved && !n->alive && d->toleration > d->grace &&
        (trains || still_stepping(e, node, job, n->down_since, now))) {
        /* its pods there run on: nothing lost yet; Kubernetes evicts them
         * at its toleration, and the node is judged then */
        n->alive = true;
        return false;
    }
    if (f.cls == GH_CLASS_UNKNOWN && !n->job_moved && !n->alive && d->toleration > d->grace) {
        /* No hardware evidence: the job's pods there are lost, so the job
         * moves now; the node is not blamed unless it stays down. */
        f.node = NULL;
        f.severity = GH_SEV_MEDIUM; /* the job's loss, not the node's fault */
        gh_sfmt(f.what, sizeof f.what,
                "%s has been NotReady for %.0fs with pods of %s on it: the pods there are lost, "
                "no hardware evidence blames the node (it is isolated only if it stays NotReady "
                "for %.0fs)",
                node, f.metric, job, (double)d->toleration / 1e9);
        gh_sfmt(n->job, sizeof n->job, "%s", job);
        gh_ctx_report(e, &f);
        n->job_moved = true;
        /* restarted elsewhere: faults on the node no longer hit it (a pod
         * of it started there again, or a step from there, undoes this) */
        long j = gh_topology_find_job(gh_ctx_topology(e), n->job);
        if (j >= 0)
            gh_topology_job_leave(gh_ctx_topology(e), (size_t)j, node, now);
        return false;
    }
    gh_sfmt(f.what, sizeof f.what,
            "%s has been NotReady for %.0fs with pods of %s on it and has not come back: the node "
            "is down%s",
            node, f.metric, job,
            f.cls == GH_CLASS_UNKNOWN ? ", no hardware evidence says why"
                                      : ", after hardware faults on it");
    gh_ctx_report(e, &f);
    return true;
}

static void nd_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct ndet *d = state;
    int keep = 0;
    for (int i = 0; i < d->n_watch; i++) {
        long idx = d->watch[i];
        struct nnode *n = gh_strmap_value(d->nodes, (size_t)idx);
        if (due(d, n) > now) {
            d->watch[keep++] = idx;
            continue;
        }
        if (!judge(e, d, gh_strmap_key(d->nodes, (size_t)idx), n, now)) {
            d->watch[keep++] = idx; /* again at the toleration */
            continue;
        }
        n->watched = false;
        /* down_since stays until node_ready: more NotReady signals of this
         * outage are not a new one. */
    }
    d->n_watch = keep;
}

static int64_t nd_next_deadline(void *state)
{
    struct ndet *d = state;
    int64_t t = INT64_MAX;
    for (int i = 0; i < d->n_watch; i++) {
        const struct nnode *n = gh_strmap_value(d->nodes, (size_t)d->watch[i]);
        if (n->down_since != INT64_MIN && due(d, n) < t)
            t = due(d, n);
    }
    return t;
}

static bool drop_ready(const char *key, void *value, void *ctx)
{
    struct nnode *n = value;
    (void)key;
    (void)ctx;
    if (n && (n->watched || n->down_since != INT64_MIN))
        return false;
    nnode_free(n);
    return true;
}

static void nd_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct ndet *d = state;
    (void)e;
    (void)now;
    gh_strmap_remove_if(d->nodes, drop_ready, NULL);
}

static size_t nd_memory(const void *state)
{
    const struct ndet *d = state;
    return sizeof *d + gh_strmap_memory(d->nodes) + gh_strmap_live(d->nodes) * sizeof(struct nnode);
}

const struct gh_detector_ops gh_det_node = {
    .name = "node",
    .kinds = GH_KIND_BIT(GH_KIND_NODE_NOT_READY) | GH_KIND_BIT(GH_KIND_NODE_READY),
    .create = nd_create,
    .destroy = nd_destroy,
    .on_signal = nd_on_signal,
    .on_deadline = nd_on_deadline,
    .next_deadline = nd_next_deadline,
    .expire = nd_expire,
    .memory = nd_memory,
};
