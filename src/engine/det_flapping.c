/* det_flapping.c - flapping ("lemon") nodes: a node that is the first to fail
 * in more job failures, across different jobs, than the cluster's base rate
 * explains, even when every restart succeeds. The test is a Poisson upper
 * tail on the node's failures given its exposure (node-hours watched) and the
 * rate of the other nodes (never below a floor), with a minimum of evidence.
 *
 * Of the pods of one job failure, the first whose own failure points at its
 * node is blamed. A pod that only timed out waiting in a collective (NCCL
 * watchdog, ...) names none: it waited for a peer that stopped, and every
 * rank of the job times out the same way, so which of them Kubernetes saw
 * first is no evidence against its node (the rank that always reports first,
 * rank 0, would be blamed for every hang of the job). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "engine/stats.h"
#include "common/strmap.h"

#define INV 32            /* involvements remembered per node */
#define MAX_KEYS (1 << 20)
#define GLOBAL 65536

struct involvement {
    int64_t ts;
    uint64_t job; /* hash of the job key, 0 for a node that went NotReady */
    const struct gh_tl_entry *ev;
};

struct fnode {
    int n;
    struct involvement v[INV];
    bool down;      /* NotReady with no node_ready since: more NotReady is the same outage */
    bool reported;
    int64_t reported_ts;
};

/* The current failure of one job: its first failing pod that points at its
 * own node names the node. */
struct fjob {
    int64_t last_ts;
    bool blamed; /* the current failure named its node */
};

struct flap {
    struct gh_strmap *nodes; /* node -> struct fnode * */
    struct gh_strmap *jobs;  /* job -> struct fjob * */
    int64_t global[GLOBAL];  /* ts of every involvement, ring, for the cluster rate */
    int g_head, g_n;
};

static int fl_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct flap *f = calloc(1, sizeof *f);
    if (!f)
        return GH_ENOMEM;
    f->nodes = gh_strmap_new(GH_TOPO_MAX_NODES);
    f->jobs = gh_strmap_new(MAX_KEYS);
    *state = f;
    return f->nodes && f->jobs ? GH_OK : GH_ENOMEM;
}

static void fl_destroy(void *state)
{
    struct flap *f = state;
    if (f->nodes)
        for (size_t i = 0; i < gh_strmap_count(f->nodes); i++) {
            struct fnode *n = gh_strmap_value(f->nodes, i);
            for (int k = 0; n && k < n->n; k++)
                gh_tl_unref(n->v[k].ev);
            free(n);
        }
    if (f->jobs)
        for (size_t i = 0; i < gh_strmap_count(f->jobs); i++)
            free(gh_strmap_value(f->jobs, i));
    gh_strmap_free(f->nodes);
    gh_strmap_free(f->jobs);
    free(f);
}

static int global_since(const struct flap *f, int64_t since)
{
    int c = 0;
    for (int i = 0; i < f->g_n; i++)
        c += f->global[(f->g_head + i) % GLOBAL] >= since;
    return c;
}

static void involve(struct flap *f, struct gh_engine *e, const char *node, uint64_t job,
                    const struct gh_tl_entry *ent)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    struct fnode *n = gh_ctx_value(e, f->nodes, node, sizeof *n, NULL, NULL);
    if (!n)
        return;
    int64_t now = ent->ts_ns, since = now - st->flap_lookback_ns;
    /* Forget what left the lookback; keep the newest INV. */
    int keep = 0;
    for (int i = 0; i < n->n; i++) {
        if (n->v[i].ts < since || (n->n == INV && i == 0 && keep == 0)) {
            gh_tl_unref(n->v[i].ev);
            continue;
        }
        n->v[keep++] = n->v[i];
    }
    n->n = keep;
    n->v[n->n++] = (struct involvement){now, job, gh_tl_ref(ent)};
    f->global[(f->g_head + f->g_n) % GLOBAL] = now;
    if (f->g_n < GLOBAL)
        f->g_n++;
    else
        f->g_head = (f->g_head + 1) % GLOBAL;

    /* Independent failures: of different jobs, or of the same job hours
     * apart (a crash loop fails every few minutes; a node that breaks a
     * long-running job again and again is not the job's fault). A NotReady
     * node counts on its own each time. */
    int k = n->n, jobs = 0;
    for (int i = 0; i < n->n; i++) {
        bool seen = false;
        for (int q = i - 1; q >= 0 && !seen; q--)
            if (n->v[q].job == n->v[i].job && n->v[i].job != 0)
                seen = n->v[i].ts - n->v[q].ts < 3600 * GH_NS_PER_S;
        jobs += !seen;
    }
    if (k >= 2 && jobs >= 2)
        gh_ctx_note_flap_suspect(e, node, now);
    if (n->reported && now - n->reported_ts < st->flap_lookback_ns)
        return;
    if (k < st->flap_min_failures || jobs < st->flap_min_jobs)
        return;
    /* Exposure: every known node has been watched since the stream began. */
    int64_t start = gh_ctx_start(e);
    if (start < since)
        start = since;
    double hours = (double)(now - start) / 3.6e12;
    if (hours < 1.0 / 60)
        hours = 1.0 / 60;
    size_t n_nodes = gh_topology_node_count(gh_ctx_topology(e));
    if (n_nodes < gh_strmap_live(f->nodes))
        n_nodes = gh_strmap_live(f->nodes);
    double others = (double)(global_since(f, since) - k);
    double rate = n_nodes > 1 ? others / ((double)(n_nodes - 1) * hours) : 0;
    if (rate < st->flap_base_rate)
        rate = st->flap_base_rate;
    double mu = rate * hours, p = gh_stats_poisson_tail(k, mu);
    if (p >= st->flap_alpha)
        return;
    struct gh_finding fd;
    gh_finding_init(&fd);
    fd.cls = GH_CLASS_FLAPPING_NODE;
    fd.kind = ent->sig.kind;
    fd.severity = GH_SEV_HIGH;
    fd.has_metric = true;
    fd.metric = p;
    fd.node = node;
    fd.first_ts = n->v[0].ts;
    for (int i = 0; i < n->n; i++)
        gh_finding_add(&fd, n->v[i].ev);
    gh_sfmt(fd.what, sizeof fd.what,
             "%s was the first to fail in %d job failures across %d jobs in %.1f h, where the "
             "cluster's rate (%.2g per node-hour) predicts %.2g (Poisson tail p = %.2g): a "
             "flapping node",
             node, k, jobs, hours, rate, mu, p);
    n->reported = true;
    n->reported_ts = now;
    gh_ctx_report(e, &fd);
}

static void fl_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct flap *f = state;
    const struct gh_signal *s = &ent->sig;
    if (!s->node)
        return;
    if (s->kind == GH_KIND_NODE_READY) {
        long i = gh_strmap_find(f->nodes, s->node);
        struct fnode *n = i >= 0 ? gh_strmap_value(f->nodes, (size_t)i) : NULL;
        if (n)
            n->down = false;
        return;
    }
    if (s->kind == GH_KIND_NODE_NOT_READY) {
        struct fnode *n = gh_ctx_value(e, f->nodes, s->node, sizeof *n, NULL, NULL);
        if (!n || n->down)
            return;
        n->down = true;
        involve(f, e, s->node, 0, ent);
        return;
    }
    if (s->kind != GH_KIND_POD_FAILED)
        return;
    enum gh_podfail pf = gh_classify_pod_failure(s);
    if (pf == GH_PF_IGNORE || pf == GH_PF_OOM)
        return;
    /* A pod the node refused to run (admission, container creation) is
     * judged at once by det_podhost.c, against the jobs it belonged to and
     * the fleet around the node: not a job failure of the node's history. */
    if (gh_classify_pod_rejected(s))
        return;
    /* A failure that a decided GPU, memory or interconnect incident on this
     * node explains is that incident's consequence, with its own escalation
     * on repeats: counting it here too would make a second incident of one
     * root cause. */
    enum gh_class cls;
    if (gh_ctx_node_episode(e, s->node, ent->ts_ns, &cls) &&
        (cls == GH_CLASS_GPU_HARDWARE || cls == GH_CLASS_GPU_MEMORY || cls == GH_CLASS_INTERCONNECT))
        return;
    const char *job = s->job ? s->job : gh_ctx_job_on(e, s->node, -1);
    char key[300];
    gh_sfmt(key, sizeof key, "%s%s", job ? "" : "pod:", job ? job : s->pod ? s->pod : "?");
    struct fjob *fj = gh_ctx_value(e, f->jobs, key, sizeof *fj, NULL, NULL);
    if (!fj)
        return;
    /* Pods of one job failing together are one failure, blamed on the first
     * that failed on its own account: a collective timeout is a peer's
     * symptom and blames nobody. */
    bool same = fj->last_ts && ent->ts_ns - fj->last_ts <= gh_ctx_settings(e)->flap_same_failure_ns;
    fj->last_ts = ent->ts_ns;
    if (!same)
        fj->blamed = false;
    if (pf == GH_PF_COLLECTIVE || fj->blamed)
        return;
    fj->blamed = true;
    involve(f, e, s->node, gh_hash_str(GH_HASH_INIT, key) | 1, ent);
}

struct fl_expire {
    int64_t lookback_before, same_before;
};

static bool drop_node(const char *key, void *value, void *ctx)
{
    const struct fl_expire *x = ctx;
    struct fnode *n = value;
    (void)key;
    if (n) {
        int keep = 0;
        for (int i = 0; i < n->n; i++) {
            if (n->v[i].ts < x->lookback_before)
                gh_tl_unref(n->v[i].ev);
            else
                n->v[keep++] = n->v[i];
        }
        n->n = keep;
        if (n->n || n->down || (n->reported && n->reported_ts >= x->lookback_before))
            return false;
    }
    free(n);
    return true;
}

static bool drop_job(const char *key, void *value, void *ctx)
{
    const struct fl_expire *x = ctx;
    struct fjob *j = value;
    (void)key;
    if (j && j->last_ts >= x->same_before)
        return false;
    free(j);
    return true;
}

/* Involvements leave with the lookback; a job's "current failure" after
 * same_failure. */
static void fl_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct flap *f = state;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    if (now < INT64_MIN + st->flap_lookback_ns || now < INT64_MIN + st->flap_same_failure_ns)
        return;
    struct fl_expire x = {now - st->flap_lookback_ns, now - st->flap_same_failure_ns};
    gh_strmap_remove_if(f->nodes, drop_node, &x);
    gh_strmap_remove_if(f->jobs, drop_job, &x);
}

static size_t fl_memory(const void *state)
{
    const struct flap *f = state;
    return sizeof *f + gh_strmap_memory(f->nodes) + gh_strmap_memory(f->jobs) +
           gh_strmap_live(f->nodes) * sizeof(struct fnode) +
           gh_strmap_live(f->jobs) * sizeof(struct fjob);
}

const struct gh_detector_ops gh_det_flapping = {
    .name = "flapping",
    .kinds = GH_KIND_BIT(GH_KIND_POD_FAILED) | GH_KIND_BIT(GH_KIND_NODE_NOT_READY) |
             GH_KIND_BIT(GH_KIND_NODE_READY),
    .create = fl_create,
    .destroy = fl_destroy,
    .on_signal = fl_on_signal,
    .expire = fl_expire,
    .memory = fl_memory,
};
