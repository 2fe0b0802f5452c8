/* det_podhost.c - a Ready node that fails every pod: its kubelet refuses the
 * pods at admission (a device plugin's Allocate fails: "requested number of
 * devices unavailable for nvidia.com/gpu", "nvml: GPU is lost") or its
 * runtime cannot create or start their containers (nvidia-container-cli
 * failing in a hung driver call), while the Node stays Ready and the
 * scheduler keeps sending it pods (NVIDIA/k8s-device-plugin#231 saw 12k
 * failed pods pile up; docs/engine.md, "A Ready node that fails every pod").
 *
 * The evidence is the pods' own failures (gh_classify_pod_rejected), judged
 * by whom they belong to: pods of settings.pod_host.min_jobs different jobs
 * (min_pods in all) refused by one node within settings.pod_host.window
 * blame the node. One job's pods, however many, never do: its image or its
 * spec may be what fails (a job is its job label, else the pod's owner as
 * its name says: a ReplicaSet's pods share all but the last "-" part).
 * The same failure on many nodes at once is not each node's: the fleet
 * detector counts the nodes that show each failure's signature (its reason
 * and its message's words) and takes the nodes' findings into one shared
 * cause (det_fleet.c), so a device plugin rollout gone wrong takes no node
 * out of service.
 *
 * The finding names no job (the pods never ran: their controllers create
 * them again, elsewhere once the node is out of scheduling); its evidence is
 * every refused pod (name, job, reason, message). After it, the node's
 * further refusals join its incident for a window; then they count again. */
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "common/utf8.h"
#include "engine/classify.h"
#include "engine/detector.h"

#define RING GH_FINDING_MAX_EVIDENCE /* refusals remembered per node */

struct refusal {
    int64_t ts;
    uint64_t owner; /* hash of the job (or the pod's owner) */
    const struct gh_tl_entry *ev;
};

struct pnode {
    int n;
    struct refusal v[RING]; /* oldest first */
    int64_t reported;       /* when its finding was made (INT64_MIN: none) */
};

struct podhost {
    struct gh_strmap *nodes; /* node -> struct pnode * */
};

static int ph_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct podhost *p = calloc(1, sizeof *p);
    if (!p)
        return GH_ENOMEM;
    p->nodes = gh_strmap_new(GH_TOPO_MAX_NODES);
    *state = p;
    return p->nodes ? GH_OK : GH_ENOMEM;
}

static void pnode_clear(struct pnode *n)
{
    for (int i = 0; i < n->n; i++)
        gh_tl_unref(n->v[i].ev);
    n->n = 0;
}

static void ph_destroy(void *state)
{
    struct podhost *p = state;
    if (p->nodes)
        for (size_t i = 0; i < gh_strmap_count(p->nodes); i++) {
            struct pnode *n = gh_strmap_value(p->nodes, i);
            if (n)
                pnode_clear(n);
            free(n);
        }
    gh_strmap_free(p->nodes);
    free(p);
}

/* Whose pod s is: its job, else its owner as its name says (namespace/name
 * without its last "-" part: a ReplicaSet's or a Deployment's pods share
 * it), else the pod. */
static uint64_t owner_of(const struct gh_signal *s)
{
    if (s->job)
        return gh_hash_str(GH_HASH_INIT, s->job) | 1;
    uint64_t h = gh_hash_str(GH_HASH_INIT, s->namespace_ ? s->namespace_ : "");
    const char *pod = s->pod ? s->pod : "";
    const char *dash = strrchr(pod, '-');
    size_t len = dash && dash != pod ? (size_t)(dash - pod) : strlen(pod);
    for (size_t i = 0; i < len; i++)
        h = gh_hash_u64(h, (unsigned char)pod[i]);
    return h | 1;
}

static void drop_before(struct pnode *n, int64_t before)
{
    int k = 0;
    for (int i = 0; i < n->n; i++) {
        if (n->v[i].ts < before)
            gh_tl_unref(n->v[i].ev);
        else
            n->v[k++] = n->v[i];
    }
    n->n = k;
}

static int owners(const struct pnode *n)
{
    int k = 0;
    for (int i = 0; i < n->n; i++) {
        bool seen = false;
        for (int q = 0; q < i && !seen; q++)
            seen = n->v[q].owner == n->v[i].owner;
        k += !seen;
    }
    return k;
}

/* msg shortened for a sentence: its head and its tail, where the runtime's
 * and the device plugin's words say what failed ("... nvml: GPU is lost,
 * which is unexpected"), into buf (cap bytes). */
static const char *gist(const char *msg, char *buf, size_t cap)
{
    size_t n = msg ? strlen(msg) : 0;
    if (n < 110) {
        gh_sfmt(buf, cap, "%s", msg ? msg : "");
        return buf;
    }
    const char *tail = msg + n - 60, *space = strchr(tail, ' ');
    if (space && space - tail < 20)
        tail = space + 1; /* from a word's start */
    while (tail > msg && ((unsigned char)*tail & 0xC0) == 0x80)
        tail--; /* not inside a UTF-8 sequence */
    gh_sfmt(buf, cap, "%.45s ... %s", msg, tail);
    gh_utf8_trim(buf);
    return buf;
}

/* The finding: the node refused n->n pods of jobs different jobs. */
static void report(struct gh_engine *e, const char *node, struct pnode *n, int jobs, int64_t now)
{
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_UNKNOWN;
    f.kind = GH_KIND_POD_FAILED;
    f.severity = GH_SEV_HIGH; /* it can run no pod: it cannot wait */
    f.has_metric = true;
    f.metric = jobs;
    f.node = node;
    f.first_ts = n->v[0].ts;
    for (int i = 0; i < n->n; i++)
        gh_finding_add(&f, n->v[i].ev);
    const struct gh_signal *first = &n->v[0].ev->sig;
    char words[128];
    size_t used = (size_t)gh_sfmt(
        f.what, sizeof f.what,
        "%s refused %d pods of %d different jobs within %.0f s at admission or container "
        "creation while Ready (%s: \"%s\"); pods",
        node, n->n, jobs, (double)(now - n->v[0].ts) / GH_NS_PER_S,
        first->reason ? first->reason : "?", gist(first->msg, words, sizeof words));
    /* one pod of each job, by name */
    for (int i = 0, shown = 0; i < n->n && shown < 4 && used < sizeof f.what; i++) {
        bool seen = false;
        for (int q = 0; q < i && !seen; q++)
            seen = n->v[q].owner == n->v[i].owner;
        if (seen)
            continue;
        const struct gh_signal *s = &n->v[i].ev->sig;
        used += (size_t)gh_sfmt(f.what + used, sizeof f.what - used, "%s %.60s (%.60s)",
                                shown ? "," : "", s->pod ? s->pod : "?",
                                s->job ? s->job : "no job");
        shown++;
    }
    if (used < sizeof f.what)
        gh_sfmt(f.what + used, sizeof f.what - used, ": the node fails them, not the jobs");
    gh_utf8_trim(f.what);
    n->reported = now;
    gh_ctx_report(e, &f);
}

static void ph_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct podhost *p = state;
    const struct gh_signal *s = &ent->sig;
    if (!s->node || !gh_classify_pod_rejected(s))
        return;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    bool created;
    struct pnode *n = gh_ctx_value(e, p->nodes, s->node, sizeof *n, NULL, &created);
    if (!n)
        return;
    if (created)
        n->reported = INT64_MIN;
    int64_t now = ent->ts_ns;
    if (n->reported != INT64_MIN && now - n->reported < st->pod_host_window_ns) {
        /* the same fault refusing more pods: its incident's */
        gh_ctx_absorbed(e, ent);
        return;
    }
    drop_before(n, now - st->pod_host_window_ns);
    if (n->n == RING) {
        gh_tl_unref(n->v[0].ev);
        memmove(n->v, n->v + 1, (RING - 1) * sizeof n->v[0]);
        n->n--;
    }
    n->v[n->n++] = (struct refusal){now, owner_of(s), gh_tl_ref(ent)};
    int jobs = owners(n);
    /* refusals of several jobs: the application detector leaves them to
     * this one (gh_ctx_flap_suspect) */
    if (jobs >= 2)
        gh_ctx_note_flap_suspect(e, s->node, now);
    if (jobs < st->pod_host_min_jobs || n->n < st->pod_host_min_pods)
        return;
    report(e, s->node, n, jobs, now);
    pnode_clear(n);
}

struct ph_expire {
    int64_t before;
};

static bool drop_node(const char *key, void *value, void *ctx)
{
    const struct ph_expire *x = ctx;
    struct pnode *n = value;
    (void)key;
    if (n) {
        drop_before(n, x->before);
        if (n->n || (n->reported != INT64_MIN && n->reported >= x->before))
            return false;
    }
    free(n);
    return true;
}

/* Refusals leave with the window; a node with none left and no recent
 * finding is forgotten. */
static void ph_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct podhost *p = state;
    int64_t w = gh_ctx_settings(e)->pod_host_window_ns;
    if (now < INT64_MIN + w)
        return;
    struct ph_expire x = {now - w};
    gh_strmap_remove_if(p->nodes, drop_node, &x);
}

static size_t ph_memory(const void *state)
{
    const struct podhost *p = state;
    return sizeof *p + gh_strmap_memory(p->nodes) + gh_strmap_live(p->nodes) * sizeof(struct pnode);
}

const struct gh_detector_ops gh_det_podhost = {
    .name = "pod_host",
    .kinds = GH_KIND_BIT(GH_KIND_POD_FAILED),
    .create = ph_create,
    .destroy = ph_destroy,
    .on_signal = ph_on_signal,
    .expire = ph_expire,
    .memory = ph_memory,
};
