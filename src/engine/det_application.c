/* det_application.c - application versus hardware: pod failures and
 * application XIDs with no hardware evidence on the job's nodes are the
 * application's (no node blamed); the same application XID on one GPU across
 * different jobs is the GPU's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"
#include "engine/detector.h"
#include "common/strmap.h"
#include "signal/xid_catalog.h"

#define MAX_KEYS (1 << 20)
#define MAX_PENDING 4096
#define XHIST 16
#define GPU_SET 64

/* Failures of one job waiting for the hold to pass. */
struct ajob {
    bool pending;
    int64_t first_ts, deadline;
    size_t n_ev;
    const struct gh_tl_entry *ev[GH_FINDING_MAX_EVIDENCE];
    int n_fail, n_oom, n_xid, xid_code;
    enum gh_severity max_xid_sev;
    int n_gpus;
    uint64_t gpus[GPU_SET]; /* distinct GPUs that raised application XIDs */
    char first_node[128];
};

/* Application XIDs seen on one GPU: which codes, in which jobs (by the
 * hash of the job's name: 0 = no job; an index could be reused by another
 * job once the first is forgotten). */
struct xhist {
    int n;
    struct {
        int code;
        uint64_t job;
        int64_t ts;
    } v[XHIST];
};

struct app {
    struct gh_strmap *jobs;  /* job (or "node:NAME" when unknown) -> struct ajob * */
    struct gh_strmap *gpus;  /* "node/gpu" -> struct xhist * */
    long pending[MAX_PENDING];
    int n_pending;
};

static int app_create(struct gh_engine *e, void **state)
{
    (void)e;
    struct app *a = calloc(1, sizeof *a);
    if (!a)
        return GH_ENOMEM;
    a->jobs = gh_strmap_new(MAX_KEYS);
    a->gpus = gh_strmap_new(MAX_KEYS);
    *state = a;
    return a->jobs && a->gpus ? GH_OK : GH_ENOMEM;
}

static void ajob_reset(struct ajob *j)
{
    for (size_t i = 0; i < j->n_ev; i++)
        gh_tl_unref(j->ev[i]);
    memset(j, 0, sizeof *j);
}

static void app_destroy(void *state)
{
    struct app *a = state;
    if (a->jobs)
        for (size_t i = 0; i < gh_strmap_count(a->jobs); i++) {
            struct ajob *j = gh_strmap_value(a->jobs, i);
            if (j)
                ajob_reset(j);
            free(j);
        }
    if (a->gpus)
        for (size_t i = 0; i < gh_strmap_count(a->gpus); i++)
            free(gh_strmap_value(a->gpus, i));
    gh_strmap_free(a->jobs);
    gh_strmap_free(a->gpus);
    free(a);
}

/* An incident open on node at t explains a failure there, unless it was
 * decided from a Node condition: a flag about the host does not make an
 * application's own crash the node's; only a failure the host caused
 * (failure, may be NULL) is explained by it. */
static bool node_explains(struct gh_engine *e, const char *node, int64_t t,
                          const struct gh_signal *failure)
{
    if (!gh_ctx_node_episode(e, node, t, NULL))
        return false;
    return !gh_ctx_node_condition_episode(e, node, t) ||
           (failure && gh_classify_host_failure(failure));
}

/* Is there hardware evidence (an alert or a decided incident) on node or on
 * any node of job within [since, until]? */
static bool hw_explains(struct gh_engine *e, const char *job, const char *node, int64_t since,
                        int64_t until, const struct gh_signal *failure)
{
    int64_t t;
    if (node &&
        (gh_ctx_hw_alert(e, node, since, until, &t) || node_explains(e, node, until, failure)))
        return true;
    struct gh_topology *topo = gh_ctx_topology(e);
    long j = job ? gh_topology_find_job(topo, job) : -1;
    if (j < 0)
        return false;
    const unsigned *nodes;
    size_t n = gh_topology_job_nodes(topo, (size_t)j, &nodes);
    for (size_t i = 0; i < n; i++) {
        const char *nn = gh_topology_node_name(topo, nodes[i]);
        if (gh_ctx_hw_alert(e, nn, since, until, &t) || node_explains(e, nn, until, NULL))
            return true;
    }
    return false;
}

static void add_pending(struct app *a, struct ajob *j, long idx, const struct gh_tl_entry *ent,
                        int64_t deadline)
{
    if (!j->pending) {
        if (a->n_pending >= MAX_PENDING)
            return; /* bounded: the oldest waiting jobs still decide */
        j->pending = true;
        j->first_ts = ent->ts_ns;
        j->deadline = deadline;
        a->pending[a->n_pending++] = idx;
        if (ent->sig.node)
            gh_sfmt(j->first_node, sizeof j->first_node, "%s", ent->sig.node);
    } else if (deadline < j->deadline) {
        j->deadline = deadline;
    }
    if (j->n_ev < GH_FINDING_MAX_EVIDENCE)
        j->ev[j->n_ev++] = gh_tl_ref(ent);
}

static void on_pod_failed(struct app *a, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    const struct gh_signal *s = &ent->sig;
    enum gh_podfail pf = gh_classify_pod_failure(s);
    if (pf == GH_PF_IGNORE || pf == GH_PF_COLLECTIVE)
        return;
    /* refused at the kubelet's admission: it never ran, nothing of the
     * application's failed (det_podhost.c judges the node) */
    if (gh_classify_pod_admission(s))
        return;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    const char *job = s->job;
    if (job)
        gh_topology_note(gh_ctx_topology(e), job, s->node, -1, -1);
    else
        job = gh_ctx_job_on(e, s->node, -1);
    char key[300];
    gh_sfmt(key, sizeof key, "%s%s", job ? "" : "pod:", job ? job : s->pod ? s->pod : "?");
    int64_t since = ent->ts_ns - st->hardware_lookback_ns;
    if (hw_explains(e, job, s->node, since, ent->ts_ns, s) ||
        (job && gh_ctx_job_episode(e, job, ent->ts_ns, NULL))) {
        gh_ctx_absorbed(e, ent);
        return;
    }
    long idx;
    struct ajob *j = gh_ctx_value(e, a->jobs, key, sizeof *j, &idx, NULL);
    if (!j)
        return;
    add_pending(a, j, idx, ent, pf == GH_PF_OOM ? ent->ts_ns : ent->ts_ns + st->hold_ns);
    j->n_fail++;
    j->n_oom += pf == GH_PF_OOM;
}

static void on_app_xid(struct app *a, struct gh_engine *e, const struct gh_tl_entry *ent,
                       const struct gh_xid_info *x)
{
    const struct gh_signal *s = &ent->sig;
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    int gpu = gh_ctx_gpu_of(e, s);
    const char *job = gh_ctx_job_on(e, s->node, gpu);
    if (hw_explains(e, job, s->node, ent->ts_ns - st->hardware_lookback_ns, ent->ts_ns, NULL)) {
        gh_ctx_absorbed(e, ent);
        return;
    }
    /* The same code on this GPU in other jobs: the GPU, not the code. */
    char gkey[300];
    if (gpu >= 0)
        gh_sfmt(gkey, sizeof gkey, "%s/%d", s->node ? s->node : "", gpu);
    else /* a kernel-log line names only the bus: the GPU by its bus id */
        gh_sfmt(gkey, sizeof gkey, "%s/pci:%s", s->node ? s->node : "", s->pci ? s->pci : "");
    struct xhist *h = s->node && (gpu >= 0 || s->pci)
                          ? gh_ctx_value(e, a->gpus, gkey, sizeof *h, NULL, NULL)
                          : NULL;
    if (h && !x->secondary) {
        uint64_t jid = job ? gh_hash_str(GH_HASH_INIT, job) | 1 : 0;
        if (h->n == XHIST) {
            memmove(h->v, h->v + 1, (XHIST - 1) * sizeof h->v[0]);
            h->n--;
        }
        h->v[h->n].code = s->code;
        h->v[h->n].job = jid;
        h->v[h->n].ts = ent->ts_ns;
        h->n++;
        uint64_t jobs[XHIST];
        int n_jobs = 0;
        for (int i = 0; i < h->n; i++) {
            if (h->v[i].code != s->code || h->v[i].job == 0 ||
                h->v[i].ts < ent->ts_ns - st->same_gpu_lookback_ns)
                continue;
            bool seen = false;
            for (int k = 0; k < n_jobs && !seen; k++)
                seen = jobs[k] == h->v[i].job;
            if (!seen)
                jobs[n_jobs++] = h->v[i].job;
        }
        if (n_jobs >= st->same_gpu_jobs) {
            struct gh_finding f;
            gh_finding_init(&f);
            f.cls = GH_CLASS_GPU_HARDWARE;
            f.kind = GH_KIND_XID;
            f.code = s->code;
            f.severity = GH_SEV_HIGH;
            f.has_metric = true; /* how many jobs: the app-xid-same-gpu rule's threshold */
            f.metric = n_jobs;
            f.node = s->node;
            f.gpu = gpu;
            f.job = job;
            const struct gh_tl_entry *v[GH_FINDING_MAX_EVIDENCE];
            size_t n = gh_timeline_query(gh_ctx_timeline(e), s->gpu >= 0 ? GH_TL_GPU : GH_TL_NODE,
                                         s->node, s->gpu,
                                         GH_KIND_BIT(GH_KIND_XID),
                                         ent->ts_ns - st->same_gpu_lookback_ns, ent->ts_ns, true, v,
                                         GH_FINDING_MAX_EVIDENCE);
            for (size_t i = 0; i < n; i++)
                if (v[i]->sig.code == s->code && gh_ctx_gpu_of(e, &v[i]->sig) == gpu)
                    gh_finding_add(&f, v[i]);
            gh_finding_add(&f, ent);
            f.first_ts = f.evidence[0]->ts_ns;
            gh_sfmt(f.what, sizeof f.what,
                     "application XID %d (%s) repeated on %s GPU %d in %d different jobs: it follows "
                     "the GPU, not the code",
                     s->code, x->summary, s->node, gpu, n_jobs);
            gh_ctx_note_hw_alert(e, s->node, ent->ts_ns);
            gh_ctx_report(e, &f);
            return;
        }
    }
    char key[300];
    gh_sfmt(key, sizeof key, "%s%s", job ? "" : "node:", job ? job : s->node ? s->node : "?");
    long idx;
    struct ajob *j = gh_ctx_value(e, a->jobs, key, sizeof *j, &idx, NULL);
    if (!j)
        return;
    add_pending(a, j, idx, ent, ent->ts_ns + st->hold_ns);
    j->n_xid++;
    if (x->severity > j->max_xid_sev)
        j->max_xid_sev = x->severity;
    if (j->xid_code == 0 && !x->secondary)
        j->xid_code = s->code;
    uint64_t g = gh_hash_u64(gh_hash_str(GH_HASH_INIT, s->node),
                             (uint64_t)(int64_t)(gpu >= 0 ? gpu : (int)gh_hash_str(0, s->pci)));
    bool seen = false;
    for (int i = 0; i < j->n_gpus && !seen; i++)
        seen = j->gpus[i] == g;
    if (!seen && j->n_gpus < GPU_SET)
        j->gpus[j->n_gpus++] = g;
}

static void app_on_signal(void *state, struct gh_engine *e, const struct gh_tl_entry *ent)
{
    struct app *a = state;
    if (ent->sig.kind == GH_KIND_POD_FAILED) {
        on_pod_failed(a, e, ent);
    } else if (ent->sig.kind == GH_KIND_XID) {
        const struct gh_xid_info *x = gh_xid_lookup(ent->sig.code);
        if (x->application)
            on_app_xid(a, e, ent, x);
    }
}

static void decide_job(struct app *a, struct gh_engine *e, const char *key, struct ajob *j, int64_t now)
{
    const struct gh_policy_settings *st = gh_ctx_settings(e);
    bool surrogate = strncmp(key, "pod:", 4) == 0 || strncmp(key, "node:", 5) == 0;
    const char *job = surrogate ? NULL : key;
    const char *node = j->first_node[0] ? j->first_node : NULL;
    (void)a;
    if (hw_explains(e, job, node, j->first_ts - st->hardware_lookback_ns, now, NULL) ||
        (job && gh_ctx_job_episode(e, job, now, NULL))) {
        for (size_t i = 0; i < j->n_ev; i++)
            gh_ctx_absorbed(e, j->ev[i]);
        return;
    }
    /* A node in failures of several jobs is the flapping detector's call. */
    if (node && j->n_oom == 0 && j->n_xid == 0 &&
        gh_ctx_flap_suspect(e, node, j->first_ts - st->flap_same_failure_ns))
        return;
    /* Low-severity application XIDs alone (e.g. 43: NVIDIA says ignore
     * unless the job failed) are recorded, not an incident. */
    if (j->n_fail == 0 && j->max_xid_sev < GH_SEV_MEDIUM)
        return;
    struct gh_finding f;
    gh_finding_init(&f);
    f.cls = GH_CLASS_APPLICATION;
    f.kind = j->n_fail ? GH_KIND_POD_FAILED : GH_KIND_XID;
    f.code = j->n_fail ? -1 : j->xid_code;
    f.severity = GH_SEV_MEDIUM;
    f.has_metric = true;
    f.metric = j->n_fail + j->n_xid;
    f.job = job;
    f.first_ts = j->first_ts;
    for (size_t i = 0; i < j->n_ev; i++)
        gh_finding_add(&f, j->ev[i]);
    /* The sentence: what failed, how, and that no hardware spoke up. */
    size_t used = 0;
    const struct gh_signal *first_fail = NULL;
    for (size_t i = 0; i < j->n_ev && !first_fail; i++)
        if (j->ev[i]->sig.kind == GH_KIND_POD_FAILED)
            first_fail = &j->ev[i]->sig;
    used += (size_t)gh_sfmt(f.what + used, sizeof f.what - used, "%s: ",
                             job ? job : node ? node : "a pod");
    if (j->n_fail && used < sizeof f.what) {
        char how[160] = "";
        if (first_fail && first_fail->reason)
            gh_sfmt(how, sizeof how, "%s", first_fail->reason);
        if (first_fail && first_fail->has_exit_code) {
            size_t l = strlen(how);
            gh_sfmt(how + l, sizeof how - l, "%sexit code %d", l ? ", " : "", first_fail->exit_code);
        }
        used += (size_t)gh_sfmt(f.what + used, sizeof f.what - used, "%d pod failure%s%s%s%s",
                                 j->n_fail, j->n_fail > 1 ? "s" : "", how[0] ? " (" : "", how,
                                 how[0] ? ")" : "");
    }
    if (j->n_xid && used < sizeof f.what) {
        const struct gh_xid_info *x = gh_xid_lookup(j->xid_code ? j->xid_code : 45);
        used += (size_t)gh_sfmt(f.what + used, sizeof f.what - used,
                                 "%sapplication XID %d (%s) on %d GPU%s", j->n_fail ? " and " : "",
                                 j->xid_code ? j->xid_code : 45, x->summary, j->n_gpus,
                                 j->n_gpus == 1 ? "" : "s");
    }
    if (used < sizeof f.what)
        gh_sfmt(f.what + used, sizeof f.what - used,
                 " with no hardware evidence on %s: an application fault, no node blamed",
                 job ? "its nodes" : "the node");
    gh_ctx_report(e, &f);
}

static void app_on_deadline(void *state, struct gh_engine *e, int64_t now)
{
    struct app *a = state;
    int keep = 0;
    for (int i = 0; i < a->n_pending; i++) {
        long idx = a->pending[i];
        struct ajob *j = gh_strmap_value(a->jobs, (size_t)idx);
        if (j->deadline > now) {
            a->pending[keep++] = idx;
            continue;
        }
        decide_job(a, e, gh_strmap_key(a->jobs, (size_t)idx), j, now);
        ajob_reset(j);
    }
    a->n_pending = keep;
}

static int64_t app_next_deadline(void *state)
{
    struct app *a = state;
    int64_t d = INT64_MAX;
    for (int i = 0; i < a->n_pending; i++) {
        struct ajob *j = gh_strmap_value(a->jobs, (size_t)a->pending[i]);
        if (j->deadline < d)
            d = j->deadline;
    }
    return d;
}

static bool drop_settled(const char *key, void *value, void *ctx)
{
    struct ajob *j = value;
    (void)key;
    (void)ctx;
    if (j && j->pending)
        return false; /* its index is in the pending list */
    if (j)
        ajob_reset(j);
    free(j);
    return true;
}

static bool drop_old_xids(const char *key, void *value, void *ctx)
{
    const int64_t *before = ctx;
    struct xhist *h = value;
    (void)key;
    if (h && h->n && h->v[h->n - 1].ts >= *before)
        return false;
    free(h);
    return true;
}

/* A job's failures are forgotten once decided (the decision stage keeps
 * what escalation needs); a GPU's application XIDs past the lookback that
 * compares them across jobs. */
static void app_expire(void *state, struct gh_engine *e, int64_t now)
{
    struct app *a = state;
    int64_t lookback = gh_ctx_settings(e)->same_gpu_lookback_ns;
    gh_strmap_remove_if(a->jobs, drop_settled, NULL);
    if (now < INT64_MIN + lookback)
        return;
    int64_t before = now - lookback;
    gh_strmap_remove_if(a->gpus, drop_old_xids, &before);
}

static size_t app_memory(const void *state)
{
    const struct app *a = state;
    return sizeof *a + gh_strmap_memory(a->jobs) + gh_strmap_memory(a->gpus) +
           gh_strmap_live(a->jobs) * sizeof(struct ajob) +
           gh_strmap_live(a->gpus) * sizeof(struct xhist);
}

const struct gh_detector_ops gh_det_application = {
    .name = "application",
    .kinds = GH_KIND_BIT(GH_KIND_POD_FAILED) | GH_KIND_BIT(GH_KIND_XID),
    .create = app_create,
    .destroy = app_destroy,
    .on_signal = app_on_signal,
    .on_deadline = app_on_deadline,
    .next_deadline = app_next_deadline,
    .expire = app_expire,
    .memory = app_memory,
};
