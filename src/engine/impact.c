/* impact.c - a finding's impact on the job where it happened, from the evidence. */
#include "engine/impact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/classify.h"

#define PEER_NODES 64   /* peers compared with the node: its job's first nodes */
#define STEPS_PER_NODE 64
#define PEER_STEPS (PEER_NODES * 16)
#define POD_BEFORE_NS (60 * GH_NS_PER_S) /* a pod failure this close before the evidence is its */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The job's latest per-rank times on node within [since, now] appended to
 * v (compute time when the rank reports its communication time). */
static size_t node_times(struct gh_timeline *tl, const char *job, const char *node, int64_t since,
                         int64_t now, double *v, size_t n, size_t cap)
{
    const struct gh_tl_entry *e[STEPS_PER_NODE];
    size_t k = gh_timeline_query(tl, GH_TL_NODE_GPUS, node, -1, GH_KIND_BIT(GH_KIND_STEP), since,
                                 now, true, e, STEPS_PER_NODE);
    for (size_t i = 0; i < k && n < cap; i++) {
        const struct gh_signal *s = &e[i]->sig;
        if (!s->job || strcmp(s->job, job) != 0)
            continue;
        double t = s->step_ms;
        if (s->has_comm_ms && s->comm_ms < t)
            t -= s->comm_ms;
        v[n++] = t;
    }
    return n;
}

bool gh_impact_slowdown(struct gh_timeline *tl, struct gh_topology *topo, const char *job,
                        const char *node, int64_t since, int64_t now, double *slowdown)
{
    long j = job ? gh_topology_find_job(topo, job) : -1;
    if (j < 0 || !node)
        return false;
    double mine[STEPS_PER_NODE], *peers = malloc(PEER_STEPS * sizeof *peers);
    if (!peers)
        return false;
    size_t nm = node_times(tl, job, node, since, now, mine, 0, STEPS_PER_NODE), np = 0;
    const unsigned *nodes;
    size_t nn = gh_topology_job_nodes(topo, (size_t)j, &nodes);
    for (size_t i = 0, seen = 0; nm && i < nn && seen < PEER_NODES; i++) {
        const char *peer = gh_topology_node_name(topo, nodes[i]);
        if (!peer || strcmp(peer, node) == 0)
            continue;
        seen++;
        np = node_times(tl, job, peer, since, now, peers, np, PEER_STEPS);
    }
    bool ok = nm > 0 && np > 0;
    if (ok) {
        double p = median(peers, np), m = median(mine, nm);
        ok = p > 0;
        if (ok)
            *slowdown = m / p - 1;
    }
    free(peers);
    return ok;
}

/* A pod of job that failed on node in [since, now], not an eviction or a
 * preemption (those are not the hardware's doing); host_only: only one the
 * node's host caused (a Node condition's harm, gh_classify_host_failure). */
static const struct gh_tl_entry *pod_failure(struct gh_timeline *tl, const char *job,
                                             const char *node, int64_t since, int64_t now,
                                             bool host_only)
{
    const struct gh_tl_entry *v[16];
    size_t k = gh_timeline_query(tl, GH_TL_NODE, node, -1, GH_KIND_BIT(GH_KIND_POD_FAILED), since,
                                 now, false, v, 16);
    for (size_t i = 0; i < k; i++) {
        const struct gh_signal *s = &v[i]->sig;
        if (s->job && strcmp(s->job, job) == 0 && gh_classify_pod_failure(s) != GH_PF_IGNORE &&
            (!host_only || gh_classify_host_failure(s)))
            return v[i];
    }
    return NULL;
}

/* A step of job on node in [since, now] whose loss is not finite. */
static bool bad_loss(struct gh_timeline *tl, const char *job, const char *node, int64_t since,
                     int64_t now)
{
    const struct gh_tl_entry *v[STEPS_PER_NODE];
    size_t k = gh_timeline_query(tl, GH_TL_NODE_GPUS, node, -1, GH_KIND_BIT(GH_KIND_STEP), since,
                                 now, true, v, STEPS_PER_NODE);
    for (size_t i = 0; i < k; i++) {
        const struct gh_signal *s = &v[i]->sig;
        if (s->job && strcmp(s->job, job) == 0 && s->has_loss && !isfinite(s->loss))
            return true;
    }
    return false;
}

/* Kinds whose fatal (high, critical) findings kill or hang the processes
 * using the device: the driver tears their contexts down, or a collective
 * waits forever on a link that is gone. */
static bool kills(enum gh_kind k)
{
    return k == GH_KIND_XID || k == GH_KIND_GPU_LOST || k == GH_KIND_ECC || k == GH_KIND_SXID ||
           k == GH_KIND_ROW_REMAP || k == GH_KIND_PCIE || k == GH_KIND_NVLINK ||
           k == GH_KIND_NIC;
}

void gh_impact_assess(const struct gh_finding *f, const char *job, struct gh_timeline *tl,
                      struct gh_topology *topo, const struct gh_policy_settings *st, int64_t now,
                      gh_progress_fn progressing, void *pctx, struct gh_impact_view *out)
{
    memset(out, 0, sizeof *out);
    out->urgent = f->severity >= GH_SEV_HIGH;
    int64_t first = f->first_ts ? f->first_ts : now;
    if (f->n_evidence && f->evidence[0]->ts_ns < first)
        first = f->evidence[0]->ts_ns;
    if (f->impact >= 0 && f->impact < GH_IMPACT__COUNT) {
        /* the detector measured it */
        out->impact = (enum gh_impact)f->impact;
        out->has_slowdown = f->has_slowdown;
        out->slowdown = f->slowdown;
        gh_sfmt(out->why, sizeof out->why, "as its detector measured");
        return;
    }
    switch (f->cls) {
    case GH_CLASS_STRAGGLER:
        out->impact = GH_IMPACT_SLOWER;
        out->has_slowdown = f->has_metric;
        out->slowdown = f->metric;
        gh_sfmt(out->why, sizeof out->why, "its ranks there are slower than their peers");
        return;
    case GH_CLASS_SILENT_DATA_CORRUPTION:
        out->impact = GH_IMPACT_WRONG;
        gh_sfmt(out->why, sizeof out->why, "its results disagree or its loss went wrong");
        return;
    case GH_CLASS_APPLICATION:
    case GH_CLASS_FLAPPING_NODE:
        out->impact = GH_IMPACT_DIED;
        gh_sfmt(out->why, sizeof out->why, "its pods failed");
        return;
    case GH_CLASS_NETWORK:
        if (f->kind != GH_KIND_NIC) { /* a collective that timed out */
            out->impact = GH_IMPACT_DIED;
            gh_sfmt(out->why, sizeof out->why, "its collectives timed out");
            return;
        }
        break;
    default:
        break;
    }
    int64_t step;
    if (f->kind == GH_KIND_NODE_NOT_READY) {
        const char *j = job ? job : f->job;
        if (j && progressing && progressing(pctx, j, first, now, &step)) {
            /* its management network, not its work: the kubelet stopped
             * reporting while the job trains on (NotReady is the API
             * server's view; training needs every rank) */
            out->impact = GH_IMPACT_NONE;
            out->urgent = false;
            out->progressing = true;
            gh_sfmt(out->why, sizeof out->why,
                    "its steps kept coming while %s was NotReady (step %lld): its pods there "
                    "still run",
                    f->node ? f->node : "the node", (long long)step);
            return;
        }
        out->impact = GH_IMPACT_DIED;
        gh_sfmt(out->why, sizeof out->why, "its pods on %s are lost with the node",
                f->node ? f->node : "the node");
        return;
    }
    if (!job || !f->node) {
        out->impact = GH_IMPACT_NONE;
        gh_sfmt(out->why, sizeof out->why, "no job runs there");
        return;
    }
    for (size_t i = 0; i < f->n_evidence; i++)
        if (f->evidence[i]->sig.kind == GH_KIND_POD_FAILED) {
            out->impact = GH_IMPACT_DIED;
            gh_sfmt(out->why, sizeof out->why, "its pod %s failed",
                    f->evidence[i]->sig.pod ? f->evidence[i]->sig.pod : "?");
            return;
        }
    const struct gh_tl_entry *pf = pod_failure(tl, job, f->node, first - POD_BEFORE_NS, now,
                                               f->kind == GH_KIND_NODE_CONDITION);
    if (pf) {
        out->impact = GH_IMPACT_DIED;
        gh_sfmt(out->why, sizeof out->why, "its pod %s failed on %s (%s)",
                pf->sig.pod ? pf->sig.pod : "?", f->node, pf->sig.reason ? pf->sig.reason : "?");
        return;
    }
    if (out->urgent && kills(f->kind) && progressing && progressing(pctx, job, first, now, &step)) {
        /* NCCL carried on over the other rails, or the device was not the
         * job's: a link's state is not harm, and it can wait */
        out->impact = GH_IMPACT_NONE;
        out->progressing = true;
        if (f->kind == GH_KIND_NIC)
            out->urgent = false;
        gh_sfmt(out->why, sizeof out->why, "its steps kept coming after the fault (step %lld)",
                (long long)step);
        return;
    }
    if (out->urgent && kills(f->kind)) {
        out->impact = GH_IMPACT_DIED;
        gh_sfmt(out->why, sizeof out->why,
                "a fatal error kills or hangs its processes on the device");
        return;
    }
    /* what the ranks there report now: their latest steps (a counter's
     * finding is as old as its last reading, its rise took a window) */
    int64_t since = now - st->counter_window_ns < first ? now - st->counter_window_ns : first;
    if (bad_loss(tl, job, f->node, since, now)) {
        out->impact = GH_IMPACT_WRONG;
        gh_sfmt(out->why, sizeof out->why, "its ranks on %s report a non-finite loss", f->node);
        return;
    }
    double sd;
    if (gh_impact_slowdown(tl, topo, job, f->node, since, now, &sd)) {
        out->has_slowdown = true;
        out->slowdown = sd;
        if (sd >= st->straggler_threshold) {
            out->impact = GH_IMPACT_SLOWER;
            gh_sfmt(out->why, sizeof out->why, "its ranks on %s are %.0f%% slower than their peers",
                    f->node, sd * 100);
            return;
        }
        out->impact = GH_IMPACT_NONE;
        gh_sfmt(out->why, sizeof out->why,
                "no pod of it failed on %s and its ranks there keep their peers' pace (%+.1f%%)",
                f->node, sd * 100);
        return;
    }
    out->impact = GH_IMPACT_NONE;
    gh_sfmt(out->why, sizeof out->why, "no pod of it failed on %s and no step telemetry shows harm",
            f->node);
}
