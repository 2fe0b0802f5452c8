/* det_condition.c - Node conditions that other agents set (node-problem-
 * detector's kernel, runtime and systemd checks, a GPU operator's or a
 * site's own custom checks), seen as node_condition signals: a condition
 * turning True is a finding about its node; False clears it; Unknown (the
 * check could not tell) changes nothing. Only what the controller was told
 * to watch arrives (--node-conditions), as transitions.
 *
 * A condition alone is a flag, not harm (docs/engine.md, "Node
 * conditions"): the decision stage fits the rule's actions to the harm as
 * for any finding, and a condition whose meaning is that the node cannot
 * run work (a runtime hung in the kernel, a read-only filesystem) is urgent
 * (severity high). Harm for a condition is what the host does to a pod
 * (gh_classify_host_failure): such a pod failure on a node with a True
 * condition is reported again with impact died, so that its job restarts;
 * an application's own crash or OOM there is not the node's and stays the
 * application detector's. One incident per node and condition. */
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "engine/classify.h"
#include "engine/detector.h"
#include "signal/signal_json.h"

#define MAX_ACTIVE 16 /* True conditions tracked per node (a node has few) */

/* What gpuheal knows of a condition: its class, how urgent it is, and what
 * it means in words (the incident's reason quotes it). Unlisted ones (a
 * site's own checks) are flags of unknown class. */
struct known {
    const char *name;
    enum gh_class cls;
    enum gh_severity sev;
    const char *meaning;
};

static const struct known known[] = {
    {"KernelDeadlock", GH_CLASS_UNKNOWN, GH_SEV_HIGH,
     "a container runtime task is blocked in the kernel (node-problem-detector's kernel "
     "monitor): pods there can no longer be started or stopped"},
    {"ReadonlyFilesystem", GH_CLASS_UNKNOWN, GH_SEV_HIGH,
     "the kernel remounted a filesystem read-only (node-problem-detector's kernel monitor): "
     "pods and the kubelet there cannot write"},
    {"XfsShutdown", GH_CLASS_UNKNOWN, GH_SEV_HIGH,
     "an XFS filesystem shut down (node-problem-detector's kernel monitor): its files are gone "
     "until it is repaired"},
    {"CorruptDockerOverlay2", GH_CLASS_UNKNOWN, GH_SEV_HIGH,
     "docker's overlay2 image store is corrupt (node-problem-detector's docker monitor): "
     "containers there fail to start"},
    {"FrequentKubeletRestart", GH_CLASS_UNKNOWN, GH_SEV_MEDIUM,
     "the kubelet restarted 5 times in 20 minutes (node-problem-detector's systemd monitor)"},
    {"FrequentDockerRestart", GH_CLASS_UNKNOWN, GH_SEV_MEDIUM,
     "docker restarted 5 times in 20 minutes (node-problem-detector's systemd monitor)"},
    {"FrequentContainerdRestart", GH_CLASS_UNKNOWN, GH_SEV_MEDIUM,
     "containerd restarted 5 times in 20 minutes (node-problem-detector's systemd monitor)"},
    {"FabricManagerDown", GH_CLASS_INTERCONNECT, GH_SEV_HIGH,
     "NVIDIA Fabric Manager is not running (a node-problem-detector GPU check): on NVSwitch "
     "systems no multi-GPU job can start"},
    {"FabricManagerFlapping", GH_CLASS_INTERCONNECT, GH_SEV_HIGH,
     "NVIDIA Fabric Manager keeps restarting (a node-problem-detector GPU check): on NVSwitch "
     "systems multi-GPU jobs cannot start reliably"},
};

static const struct known other = {NULL, GH_CLASS_UNKNOWN, GH_SEV_MEDIUM,
                                   "a check of another agent on the node reports a problem"};

static const struct known *lookup(const char *name)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, name) == 0)
            return &known[i];
    return &other;
}

enum gh_class gh_condition_class(const char *condition)
{
    return condition ? lookup(condition)->cls : GH_CLASS_UNKNOWN;
}

/* A node's True conditions: the signal that raised each (a reference, which
 * also holds its name). */
struct cnode {
    int n;
    const struct gh_tl_entry *on[MAX_ACTIVE];
};

struct cdet {
    struct gh_strmap *nodes; /* node -> struct cnode * */
};

static int cd_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct cdet *d = calloc(1, sizeof *d);
    if (!d)
        return GH_ENOMEM;
    d->nodes = gh_strmap_new(GH_TOPO_MAX_NODES);
    *state = d;
    return d->nodes ? GH_OK : GH_ENOMEM;
}

static void cnode_free(struct cnode *n)
{
    for (int i = 0; n && i < n->n; i++)
        gh_tl_unref(n->on[i]);
    free(n);
}

static void cd_destroy(void *state)
{
    struct cdet *d = state;
    if (d->nodes)
        for (size_t i = 0; i < gh_strmap_count(d->nodes); i++)
            cnode_free(gh_strmap_value(d->nodes, i));
    gh_strmap_free(d->nodes);
    free(d);
}

static int find_on(const struct cnode *n, const char *condition)
{
    for (int i = 0; i < n->n; i++)
        if (strcmp(n->on[i]->sig.condition, condition) == 0)
            return i;
    return -1;
}

/* Reports the True condition `on` of node; pod (may be NULL): a failure
 * the host caused there since, which makes the impact died. */
static void report(struct gh_engine *e, const char *node, const struct gh_tl_entry *on,
                   const struct gh_tl_entry *pod)
{
    const struct gh_signal *c = &on->sig;
    const struct known *k = lookup(c->condition);
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = k->cls;
    f.kind = GH_KIND_NODE_CONDITION;
    f.condition = c->condition;
    f.severity = k->sev;
    f.node = node;
    f.first_ts = on->ts_ns;
    gh_finding_add(&f, on);
    /* the condition's reason and node are the API server's text: bounded
     * copies are cut at a whole character, or the incident could not be
     * encoded */
    char why[96] = "";
    if (c->reason)
        gh_sfmt(why, sizeof why, " (%.90s", c->reason);
    gh_utf8_trim(why);
    if (why[0])
        gh_sfmt(why + strlen(why), sizeof why - strlen(why), ")");
    if (pod) {
        const struct gh_signal *p = &pod->sig;
        f.job = p->job;
        f.impact = GH_IMPACT_DIED;
        gh_finding_add(&f, pod);
        gh_sfmt(f.what, sizeof f.what,
                "%s=True on %s%s: %s; then pod %s of %s failed there (%s), the host's doing, not "
                "the application's",
                c->condition, node, why, k->meaning, p->pod ? p->pod : "?", p->job,
                p->reason ? p->reason : "?");
    } else {
        gh_sfmt(f.what, sizeof f.what, "%s=True on %s%s: %s", c->condition, node, why, k->meaning);
    }
    gh_utf8_trim(f.what);
    gh_ctx_report(e, &f);
}

static void on_condition(struct cdet *d, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    if (!s->condition || s->cond_status == GH_COND_UNKNOWN)
        return; /* the check could not tell: neither raised nor cleared */
    long idx = gh_strmap_find(d->nodes, s->node);
    struct cnode *n = idx >= 0 ? gh_strmap_value(d->nodes, (size_t)idx) : NULL;
    int at = n ? find_on(n, s->condition) : -1;
    if (s->cond_status == GH_COND_FALSE) {
        if (at < 0)
            return;
        gh_tl_unref(n->on[at]);
        n->on[at] = n->on[--n->n];
        gh_ctx_condition_cleared(e, s->node, s->condition, ent->ts_ns);
        return;
    }
    if (at >= 0)
        return; /* still the same problem (a repeat, a new reason) */
    if (!n) {
        n = gh_strmap_get_or_alloc(d->nodes, s->node, sizeof *n, NULL, NULL);
        if (!n)
            return;
    }
    if (n->n >= MAX_ACTIVE)
        return; /* bounded: the conditions already tracked still decide */
    n->on[n->n++] = gh_tl_ref(ent);
    report(e, s->node, ent, NULL);
}

/* A pod that failed for its host's reasons on a node with a True condition:
 * the condition harmed its job (the most severe one, the first on a tie). */
static void on_pod_failed(struct cdet *d, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    if (!s->job || !gh_classify_host_failure(s))
        return;
    long idx = gh_strmap_find(d->nodes, s->node);
    struct cnode *n = idx >= 0 ? gh_strmap_value(d->nodes, (size_t)idx) : NULL;
    if (!n || n->n == 0)
        return;
    int best = 0;
    for (int i = 1; i < n->n; i++)
        if (lookup(n->on[i]->sig.condition)->sev > lookup(n->on[best]->sig.condition)->sev)
            best = i;
    report(e, s->node, n->on[best], ent);
}

static void cd_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct cdet *d = state;
    if (!ent->sig.node)
        return;
    if (ent->sig.kind == GH_KIND_NODE_CONDITION)
        on_condition(d, e, ent);
    else if (ent->sig.kind == GH_KIND_POD_FAILED)
        on_pod_failed(d, e, ent);
}

static bool drop_clear(const char *key, void *value, void *ctx)
{
    struct cnode *n = value;
    (void)key;
    (void)ctx;
    if (n && n->n > 0)
        return false;
    cnode_free(n);
    return true;
}

static void cd_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct cdet *d = state;
    (void)e;
    (void)now;
    gh_strmap_remove_if(d->nodes, drop_clear, NULL);
}

static size_t cd_memory(const void *state)
{
    const struct cdet *d = state;
    return sizeof *d + gh_strmap_memory(d->nodes) + gh_strmap_live(d->nodes) * sizeof(struct cnode);
}

const struct gh_detector_ops gh_det_condition = {
    .name = "condition",
    .kinds = GH_KIND_BIT(GH_KIND_NODE_CONDITION) | GH_KIND_BIT(GH_KIND_POD_FAILED),
    .create = cd_create,
    .destroy = cd_destroy,
    .on_signal = cd_on_signal,
    .expire = cd_expire,
    .memory = cd_memory,
};
