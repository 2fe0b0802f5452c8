/* test_engine_helpers.h - builds signals and collects incidents for the
 * engine tests (header-only: each test binary includes it once). */
#ifndef TEST_ENGINE_HELPERS_H
#define TEST_ENGINE_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "signal/signal.h"

/* Not every test binary uses every helper. */
#pragma GCC diagnostic ignored "-Wunused-function"

#define S(x) ((int64_t)((x) * 1e9))
/* step(): pass NOLOSS for "loss not reported". */
#define NOLOSS (-1e300)
#define T0 1795935600000000000LL /* 2026-11-29T07:00:00Z */

struct got {
    enum gh_class cls;
    char id[32], node[64], job[64], rule[64], reason[640];
    char ev_nodes[1024]; /* the nodes of its XID evidence, each followed by ',' */
    int gpu, n_actions, n_evidence;
    enum gh_action actions[8];
    bool has_ckpt;
    int64_t ckpt_step, first_ts, decided_ts;
    enum gh_impact impact;
    bool urgent;
    double slowdown;
    int n_deferred;
    enum gh_action deferred[8];
};

struct sink {
    int n;
    struct got v[64];
};

static void sink_cb(void *ctx, const struct gh_incident *inc)
{
    struct sink *s = ctx;
    if (s->n >= 64)
        return;
    struct got *g = &s->v[s->n++];
    memset(g, 0, sizeof *g);
    g->cls = inc->cls;
    snprintf(g->id, sizeof g->id, "%s", inc->id);
    size_t evu = 0;
    for (size_t i = 0; i < inc->n_evidence; i++) {
        const struct gh_signal *es = &inc->evidence[i]->sig;
        if (es->kind == GH_KIND_XID && es->node && evu < sizeof g->ev_nodes) {
            int w = snprintf(g->ev_nodes + evu, sizeof g->ev_nodes - evu, "%s,", es->node);
            evu += w > 0 ? (size_t)w : 0;
        }
    }
    snprintf(g->node, sizeof g->node, "%s", inc->node ? inc->node : "");
    snprintf(g->job, sizeof g->job, "%s", inc->job ? inc->job : "");
    snprintf(g->rule, sizeof g->rule, "%s", inc->rule);
    snprintf(g->reason, sizeof g->reason, "%s", inc->reason);
    g->gpu = inc->gpu;
    g->n_actions = inc->n_actions;
    memcpy(g->actions, inc->actions, sizeof inc->actions[0] * (size_t)inc->n_actions);
    g->n_evidence = (int)inc->n_evidence;
    g->has_ckpt = inc->has_checkpoint;
    g->ckpt_step = inc->checkpoint_step;
    g->first_ts = inc->first_ts;
    g->decided_ts = inc->decided_ts;
    g->impact = inc->impact;
    g->urgent = inc->urgent;
    g->slowdown = inc->has_slowdown ? inc->slowdown : 0;
    g->n_deferred = inc->n_deferred;
    memcpy(g->deferred, inc->deferred, sizeof inc->deferred[0] * (size_t)inc->n_deferred);
    /* The JSON encoding must work for every incident. */
    char *json = NULL;
    if (gh_incident_encode(inc, &json, NULL) == GH_OK && getenv("GH_TEST_VERBOSE"))
        fprintf(stderr, "%s\n", json);
    free(json);
}

static bool got_action(const struct got *g, enum gh_action a)
{
    for (int i = 0; i < g->n_actions; i++)
        if (g->actions[i] == a)
            return true;
    return false;
}

static bool got_deferred(const struct got *g, enum gh_action a)
{
    for (int i = 0; i < g->n_deferred; i++)
        if (g->deferred[i] == a)
            return true;
    return false;
}

static void sset(char **f, const char *v)
{
    if (v)
        gh_signal_set_str(f, v, strlen(v));
}

static struct gh_signal sig(enum gh_kind k, double t, const char *node, int gpu)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = k;
    s.ts_ns = T0 + S(t);
    s.gpu = gpu;
    sset(&s.node, node);
    switch (k) {
    case GH_KIND_XID: case GH_KIND_SXID: case GH_KIND_GPU_LOST: s.source = GH_SRC_KMSG; break;
    case GH_KIND_STEP: case GH_KIND_CHECKPOINT: case GH_KIND_REPLICA_CHECKSUM:
        s.source = GH_SRC_TELEMETRY; break;
    case GH_KIND_POD_FAILED: case GH_KIND_POD_STARTED: case GH_KIND_NODE_READY:
    case GH_KIND_NODE_NOT_READY: s.source = GH_SRC_KUBE; break;
    case GH_KIND_NIC: s.source = GH_SRC_HOST; break;
    case GH_KIND_PROBE_RESULT: s.source = GH_SRC_PROBE; break;
    default: s.source = GH_SRC_NVML; break;
    }
    return s;
}

/* Feeds s (consumed) as a replay does: arrival = ts, then tick. */
static void feed(struct gh_engine *e, struct gh_signal s)
{
    int64_t ts = s.ts_ns;
    gh_engine_ingest_steal(e, &s, ts, NULL);
    gh_signal_clear(&s);
    gh_engine_tick(e, ts);
}

static void xid(struct gh_engine *e, double t, const char *node, int gpu, int code)
{
    struct gh_signal s = sig(GH_KIND_XID, t, node, gpu);
    s.code = code;
    feed(e, s);
}

static void podfail(struct gh_engine *e, double t, const char *node, const char *job, const char *pod,
                    const char *reason, int exit_code, const char *msg)
{
    struct gh_signal s = sig(GH_KIND_POD_FAILED, t, node, -1);
    sset(&s.job, job);
    sset(&s.pod, pod);
    sset(&s.namespace_, "ml");
    sset(&s.reason, reason);
    sset(&s.msg, msg);
    if (exit_code >= 0) {
        s.has_exit_code = true;
        s.exit_code = exit_code;
    }
    feed(e, s);
}

static void checkpoint(struct gh_engine *e, double t, const char *job, int64_t step, bool saved)
{
    struct gh_signal s = sig(GH_KIND_CHECKPOINT, t, NULL, -1);
    sset(&s.job, job);
    s.has_step = true;
    s.step = step;
    char path[128];
    snprintf(path, sizeof path, "s3://ckpt/%s/step-%lld", job, (long long)step);
    sset(&s.path, path);
    s.ckpt_state = saved ? GH_CKPT_SAVED : GH_CKPT_FAILED;
    feed(e, s);
}

static void step(struct gh_engine *e, double t, const char *node, int gpu, const char *job, int rank,
                 int64_t stepno, double ms, double loss)
{
    struct gh_signal s = sig(GH_KIND_STEP, t, node, gpu);
    sset(&s.job, job);
    s.has_rank = true;
    s.rank = rank;
    s.has_step = true;
    s.step = stepno;
    s.step_ms = ms;
    if (loss != NOLOSS) {
        s.has_loss = true;
        s.loss = loss;
    }
    feed(e, s);
}

/* Two nodes x 8 GPUs running job "ml/llm" (ranks 8*n + g). */
static struct gh_topology *topo_2x8(void)
{
    struct gh_topology *t = gh_topology_new();
    const char *nodes[] = {"gpu-01", "gpu-02"};
    gh_topology_add_job(t, "ml/llm", nodes, 2, 8);
    return t;
}

static struct gh_engine *engine(struct gh_topology *t, struct sink *sk)
{
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    memset(sk, 0, sizeof *sk);
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &c, sink_cb, sk, NULL);
    gh_topology_free(t);
    return e;
}

#endif
