/* test_engine_lifecycle.c - the engine over time: nodes that go down (and
 * fold with the XID that took them down), where jobs run (pod_started), the
 * checkpoint a straggler resumes from, gh_engine_next_deadline, and bounded
 * state when many short jobs pass through one long-running engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/strmap.h"
#include "test_engine_helpers.h"

static void node_signal(struct gh_engine *e, enum gh_kind k, double t, const char *node)
{
    feed(e, sig(k, t, node, -1));
}

static void podstart(struct gh_engine *e, double t, const char *node, const char *job, const char *pod)
{
    struct gh_signal s = sig(GH_KIND_POD_STARTED, t, node, -1);
    sset(&s.job, job);
    sset(&s.pod, pod);
    sset(&s.namespace_, "ml");
    feed(e, s);
}

static struct gh_topology *topo_4x8(void)
{
    struct gh_topology *t = gh_topology_new();
    const char *nodes[] = {"gpu-01", "gpu-02", "gpu-03", "gpu-04"};
    gh_topology_add_job(t, "ml/llm", nodes, 4, 8);
    return t;
}

/* The default policy with one line's text replaced (same length). */
static struct gh_policy *policy_with(const char *from, const char *to)
{
    const char *y = gh_policy_default_yaml();
    size_t len = strlen(y);
    char *text = malloc(len + 1);
    assert_non_null(text);
    memcpy(text, y, len + 1);
    char *at = strstr(text, from);
    assert_non_null(at);
    assert_int_equal(strlen(from), strlen(to));
    memcpy(at, to, strlen(to));
    struct gh_policy *p = NULL;
    assert_int_equal(gh_policy_parse(text, len, &p, NULL), GH_OK);
    free(text);
    return p;
}

/* ---- nodes returned to service ---------------------------------------- */

/* A node isolated for a fault, then returned to service (validation passed,
 * or an operator released it), that faults again is a new incident: the old
 * episode (30 min, up to twice that after the decision) no longer absorbs
 * it. Without a return the same evidence joins the open incident, while
 * another GPU's fault is its own. */
static void test_node_returned_fault_again_is_new_incident(void **st)
{
    (void)st;
    for (int returned = 0; returned <= 1; returned++) {
        struct sink sk;
        struct gh_engine *e = engine(topo_4x8(), &sk);
        xid(e, 100, "gpu-02", 3, 79);
        assert_int_equal(sk.n, 1);
        assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
        xid(e, 400, "gpu-02", 3, 79); /* before the return: the same fault */
        assert_int_equal(sk.n, 1);
        gh_engine_tick(e, T0 + S(1000));
        if (returned)
            gh_engine_node_returned(e, "gpu-02", T0 + S(1000));
        /* another GPU falls off the bus 29 minutes after the first */
        xid(e, 100 + 29 * 60, "gpu-02", 5, 79);
        /* returned or not, another GPU's fault well after the decision is
         * its own incident (issue 23.4: it used to be absorbed silently
         * while the node was out of service) */
        {
            assert_int_equal(sk.n, 2);
            const struct got *g = &sk.v[1];
            assert_string_equal(g->node, "gpu-02");
            assert_int_equal(g->gpu, 5);
            assert_true(got_action(g, GH_ACT_ISOLATE_NODE));
            assert_int_equal(g->first_ts, T0 + S(100 + 29 * 60));
        }
        gh_engine_free(e);
    }
}

/* A return only ends what took the node out before it: an incident decided
 * after the return (a new fault), or a return of a node with no incident,
 * changes nothing. */
static void test_node_returned_keeps_later_incident(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    gh_engine_node_returned(e, "gpu-01", T0 + S(50)); /* nothing there: a no-op */
    gh_engine_node_returned(e, NULL, T0 + S(50));
    xid(e, 100, "gpu-01", 0, 79);
    assert_int_equal(sk.n, 1);
    gh_engine_node_returned(e, "gpu-01", T0 + S(90)); /* older than the decision */
    xid(e, 200, "gpu-01", 1, 79);
    assert_int_equal(sk.n, 1);
    gh_engine_free(e);
}

/* ---- nodes that go down ------------------------------------------------ */

static void test_node_down_isolates_and_restarts(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    checkpoint(e, 10, "ml/llm", 100, true);
    checkpoint(e, 400, "ml/llm", 200, true);
    node_signal(e, GH_KIND_NODE_NOT_READY, 1000, "gpu-03");
    node_signal(e, GH_KIND_NODE_NOT_READY, 1020, "gpu-03"); /* re-reported: the same outage */
    podfail(e, 1040, "gpu-03", "ml/llm", "llm-17", "Error", 137, "NodeLost");
    gh_engine_tick(e, T0 + S(1059.9));
    assert_int_equal(sk.n, 0); /* within node_down (60 s) */
    gh_engine_tick(e, T0 + S(1060));
    /* past node_down the job's pods there are lost: it restarts, and no
     * hardware evidence blames the node */
    assert_int_equal(sk.n, 1);
    const struct got *g = &sk.v[0];
    assert_int_equal(g->cls, GH_CLASS_UNKNOWN);
    assert_string_equal(g->node, "");
    assert_string_equal(g->job, "ml/llm");
    assert_string_equal(g->rule, "node-lost-pods");
    assert_int_equal(g->impact, GH_IMPACT_DIED);
    assert_true(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_false(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_true(g->has_ckpt);
    assert_int_equal(g->ckpt_step, 200);
    assert_int_equal(g->first_ts, T0 + S(1000));
    assert_int_equal(g->decided_ts, T0 + S(1060));
    gh_engine_tick(e, T0 + S(1299.9));
    assert_int_equal(sk.n, 1); /* within Kubernetes' not-ready toleration (300 s) */
    gh_engine_tick(e, T0 + S(1300));
    assert_int_equal(sk.n, 2);
    g = &sk.v[1];
    assert_int_equal(g->cls, GH_CLASS_UNKNOWN);
    assert_string_equal(g->node, "gpu-03");
    assert_string_equal(g->rule, "node-not-ready");
    assert_true(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_true(got_action(g, GH_ACT_RUN_DIAGNOSTICS));
    /* the job already moved: not restarted twice */
    assert_false(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(g->first_ts, T0 + S(1000));
    /* A later flap of the same node joins it. */
    node_signal(e, GH_KIND_NODE_READY, 1500, "gpu-03");
    node_signal(e, GH_KIND_NODE_NOT_READY, 1600, "gpu-03");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    gh_engine_free(e);
}

static void test_node_back_ready_is_not_isolated(void **st)
{
    (void)st;
    /* A reboot: NotReady for four minutes, back Ready with a new boot. The
     * job restarts from its checkpoint; the node is never blamed. */
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    checkpoint(e, 10, "ml/llm", 100, true);
    node_signal(e, GH_KIND_NODE_NOT_READY, 1000, "gpu-02");
    podfail(e, 1030, "gpu-02", "ml/llm", "llm-9", "Error", 137, "NodeLost");
    node_signal(e, GH_KIND_NODE_READY, 1240, "gpu-02");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].node, "");
    assert_string_equal(sk.v[0].job, "ml/llm");
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[0].ckpt_step, 100);
    for (int i = 0; i < sk.n; i++)
        assert_false(got_action(&sk.v[i], GH_ACT_ISOLATE_NODE));
    gh_engine_free(e);
}

static void test_node_blip_or_no_job_is_no_incident(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_topology *t = topo_2x8();
    gh_topology_add_node(t, "gpu-09"); /* runs nothing */
    struct gh_engine *e = engine(t, &sk);
    node_signal(e, GH_KIND_NODE_NOT_READY, 100, "gpu-01");
    node_signal(e, GH_KIND_NODE_READY, 159, "gpu-01");
    node_signal(e, GH_KIND_NODE_NOT_READY, 1000, "gpu-09");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
}

static void test_node_down_folds_with_xid(void **st)
{
    (void)st;
    /* XID 79, then the node goes down: one incident, the GPU's. */
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 10, true);
    xid(e, 100, "gpu-02", 4, 79);
    node_signal(e, GH_KIND_NODE_NOT_READY, 130, "gpu-02");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_HARDWARE);
    assert_string_equal(sk.v[0].rule, "gpu-fell-off-bus");
    gh_engine_free(e);

    /* Down first, the XID within the grace: the same. */
    e = engine(topo_2x8(), &sk);
    node_signal(e, GH_KIND_NODE_NOT_READY, 100, "gpu-02");
    xid(e, 110, "gpu-02", 4, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_HARDWARE);
    gh_engine_free(e);

    /* Down and blamed first (past the toleration), the XID after (from the
     * agent's spool): it joins the node's incident. */
    e = engine(topo_2x8(), &sk);
    node_signal(e, GH_KIND_NODE_NOT_READY, 100, "gpu-02");
    xid(e, 500, "gpu-02", 4, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].rule, "node-lost-pods");
    assert_string_equal(sk.v[1].rule, "node-not-ready");
    gh_engine_free(e);

    /* Down, the job moved, then the XID within the toleration: the node is
     * blamed by the XID at once, and the job, already moved off it, is not
     * restarted again. */
    e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 10, true);
    node_signal(e, GH_KIND_NODE_NOT_READY, 100, "gpu-02");
    xid(e, 200, "gpu-02", 4, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].rule, "node-lost-pods");
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_string_equal(sk.v[1].rule, "gpu-fell-off-bus");
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_false(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    gh_engine_free(e);
}

static void test_node_detector_alone_names_hardware_cause(void **st)
{
    (void)st;
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    c.detectors = GH_DET_NODE;
    struct sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_topology *t = topo_2x8();
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    assert_non_null(e);
    xid(e, 10, "gpu-01", 3, 79); /* no hardware detector: no incident of its own */
    xid(e, 11, "gpu-01", 5, 13); /* an application XID explains nothing */
    node_signal(e, GH_KIND_NODE_NOT_READY, 20, "gpu-01");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_HARDWARE);
    assert_int_equal(sk.v[0].gpu, 3);
    assert_string_equal(sk.v[0].rule, "node-not-ready");
    assert_int_equal(sk.v[0].n_evidence, 2);
    gh_engine_free(e);
}

static void test_node_down_grace_is_a_setting(void **st)
{
    (void)st;
    struct gh_policy *p = policy_with("node_down: 60s ", "node_down: 300s");
    assert_int_equal(p->settings.node_down_ns, 300 * GH_NS_PER_S);
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    struct sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_topology *t = topo_2x8();
    struct gh_engine *e = gh_engine_new(p, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    node_signal(e, GH_KIND_NODE_NOT_READY, 100, "gpu-01");
    node_signal(e, GH_KIND_NODE_READY, 340, "gpu-01"); /* a four-minute reboot */
    node_signal(e, GH_KIND_NODE_NOT_READY, 1000, "gpu-02");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_int_equal(sk.v[0].decided_ts, T0 + S(1300));
    gh_engine_free(e);
    gh_policy_free(p);
}

/* ---- where jobs run ---------------------------------------------------- */

static void test_pod_started_places_job(void **st)
{
    (void)st;
    for (int with = 0; with < 2; with++) {
        struct sink sk;
        struct gh_engine *e = engine(topo_2x8(), &sk);
        checkpoint(e, 1, "ml/llm", 50, true);
        if (with)
            podstart(e, 100, "gpu-07", "ml/llm", "llm-9");
        xid(e, 3000, "gpu-07", 2, 79);
        gh_engine_finish(e, INT64_MAX);
        assert_int_equal(sk.n, 1);
        assert_string_equal(sk.v[0].node, "gpu-07");
        if (with) {
            assert_string_equal(sk.v[0].job, "ml/llm");
            assert_true(sk.v[0].has_ckpt);
            assert_int_equal(sk.v[0].ckpt_step, 50);
        } else {
            assert_string_equal(sk.v[0].job, ""); /* nothing said the job runs there */
            assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
        }
        gh_engine_free(e);
    }
}

/* ---- the checkpoint a straggler resumes from ---------------------------- */

static void test_straggler_resumes_from_latest_checkpoint(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    const char *names[] = {"gpu-01", "gpu-02", "gpu-03", "gpu-04"};
    uint64_t seed = 7;
    for (int stp = 0; stp < 120; stp++) {
        for (int r = 0; r < 32; r++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double jitter = (double)(seed >> 11) / (double)(1ULL << 52) - 1.0;
            double ms = 1000 * (1 + 0.03 * jitter) * (r == 21 && stp >= 50 ? 1.15 : 1.0);
            step(e, stp * 1.2 + r * 1e-4, names[r / 8], r % 8, "ml/llm", r, stp, ms, NOLOSS);
        }
        /* One checkpoint before the slowdown, one after it began. */
        if (stp == 20 || stp == 55)
            checkpoint(e, stp * 1.2 + 0.5, "ml/llm", stp, true);
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    assert_true(sk.v[0].first_ts < T0 + S(55 * 1.2)); /* the slowdown began before it */
    assert_true(sk.v[0].has_ckpt);
    assert_int_equal(sk.v[0].ckpt_step, 55); /* slow, not wrong: the latest */
    gh_engine_free(e);
}

/* A job declared with 4096 ranks of which 24 report: detection works on the
 * reports alone (and each step's work follows them, see bench/engine.c). */
static void test_straggler_few_reports_in_a_large_job(void **st)
{
    (void)st;
    struct gh_topology *t = gh_topology_new();
    char names[512][16];
    const char *np[512];
    for (int i = 0; i < 512; i++) {
        snprintf(names[i], sizeof names[i], "n-%03d", i);
        np[i] = names[i];
    }
    gh_topology_add_job(t, "ml/big", np, 512, 8);
    struct sink sk;
    struct gh_engine *e = engine(t, &sk);
    uint64_t seed = 11;
    for (int stp = 0; stp < 150; stp++)
        for (int k = 0; k < 24; k++) {
            int r = k * 170; /* spread over the job: ranks on 24 different nodes */
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double jitter = (double)(seed >> 11) / (double)(1ULL << 52) - 1.0;
            double ms = 1000 * (1 + 0.03 * jitter) * (k == 5 && stp >= 40 ? 1.2 : 1.0);
            step(e, stp * 1.2 + k * 1e-3, names[r / 8], r % 8, "ml/big", r, stp, ms, NOLOSS);
        }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    assert_string_equal(sk.v[0].node, names[5 * 170 / 8]); /* its node's only reporting rank */
    gh_engine_free(e);
}

/* ---- gh_engine_next_deadline ------------------------------------------- */

static void test_next_deadline(void **st)
{
    (void)st;
    struct gh_engine_config c;
    gh_engine_config_default(&c); /* the policy's 2 s reorder window */
    struct sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_topology *t = topo_2x8();
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    assert_int_equal(gh_engine_next_deadline(e), INT64_MAX); /* nothing waits */

    /* A pod failure waits for the reorder window, then for the hold (30 s)
     * in which hardware evidence could still explain it. */
    struct gh_signal s = sig(GH_KIND_POD_FAILED, 10, "gpu-01", -1);
    sset(&s.job, "ml/llm");
    sset(&s.pod, "llm-0");
    sset(&s.reason, "Error");
    sset(&s.msg, "KeyError: 'labels'");
    gh_engine_ingest_steal(e, &s, T0 + S(10.5), NULL);
    gh_signal_clear(&s);
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(12));
    gh_engine_tick(e, T0 + S(12) - 1);
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_int_equal(es.timeline.released, 0);
    gh_engine_tick(e, T0 + S(12));
    gh_engine_stats(e, &es);
    assert_int_equal(es.timeline.released, 1);
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(42));
    gh_engine_tick(e, T0 + S(42) - 1);
    assert_int_equal(sk.n, 0);
    gh_engine_tick(e, T0 + S(42));
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_APPLICATION);
    assert_int_equal(gh_engine_next_deadline(e), INT64_MAX);

    /* A node down: the earliest of the waiting signal and the node_down grace. */
    struct gh_signal nr = sig(GH_KIND_NODE_NOT_READY, 100, "gpu-02", -1);
    gh_engine_ingest_steal(e, &nr, T0 + S(100), NULL);
    gh_signal_clear(&nr);
    gh_engine_tick(e, T0 + S(102));
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(162));
    struct gh_signal later = sig(GH_KIND_NODE_READY, 150, "gpu-01", -1);
    gh_engine_ingest_steal(e, &later, T0 + S(150), NULL);
    gh_signal_clear(&later);
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(152));
    gh_engine_tick(e, gh_engine_next_deadline(e));
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(162));
    gh_engine_tick(e, gh_engine_next_deadline(e));
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[1].rule, "node-lost-pods");
    /* then the not-ready toleration (300 s after the NotReady) */
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(402));
    gh_engine_tick(e, gh_engine_next_deadline(e));
    assert_int_equal(sk.n, 3);
    assert_string_equal(sk.v[2].rule, "node-not-ready");
    assert_int_equal(gh_engine_next_deadline(e), INT64_MAX);
    gh_engine_free(e);

    /* Over the reorder buffer's bound a tick acts at once. */
    c.timeline.max_pending = 2;
    memset(&sk, 0, sizeof sk);
    e = gh_engine_new(NULL, NULL, NULL, &c, sink_cb, &sk, NULL);
    for (int i = 0; i < 3; i++) {
        struct gh_signal x = sig(GH_KIND_THERMAL, 1000 + i, "gpu-01", 0);
        gh_engine_ingest_steal(e, &x, T0 + S(1000), NULL);
        gh_signal_clear(&x);
    }
    assert_int_equal(gh_engine_next_deadline(e), INT64_MIN);
    gh_engine_tick(e, T0 + S(1000));
    assert_int_equal(gh_engine_next_deadline(e), T0 + S(1003));
    gh_engine_free(e);
}

/* ---- bounded state over a long run -------------------------------------- */

/* Job k: starts on node k % 16 at k * 300 s, checkpoints, ten steps of four
 * ranks with loss, replica checksums, NIC and thermal readings; every tenth
 * is OOMKilled at the end. */
static void short_job(struct gh_engine *e, int k)
{
    char job[32], node[16], pod[32];
    snprintf(job, sizeof job, "ml/j%05d", k);
    snprintf(node, sizeof node, "gpu-%02d", k % 16);
    snprintf(pod, sizeof pod, "j%05d-0", k);
    double t0 = k * 300.0;
    podstart(e, t0, node, job, pod);
    checkpoint(e, t0 + 1, job, 0, true);
    for (int stp = 1; stp <= 10; stp++)
        for (int r = 0; r < 4; r++)
            step(e, t0 + 2 + stp + r * 1e-3, node, r, job, r, stp, 1000 + 10 * r, 2.0 + 0.01 * stp);
    for (int rep = 0; rep < 2; rep++) {
        struct gh_signal s = sig(GH_KIND_REPLICA_CHECKSUM, t0 + 13 + rep * 0.01, node, rep * 2);
        sset(&s.job, job);
        s.has_step = s.has_rank = true;
        s.step = 10;
        s.rank = rep * 2;
        s.replica = rep;
        sset(&s.value, "cafe");
        feed(e, s);
    }
    struct gh_signal th = sig(GH_KIND_THERMAL, t0 + 14, node, 0);
    th.celsius = 70;
    feed(e, th);
    struct gh_signal n = sig(GH_KIND_NIC, t0 + 15, node, -1);
    sset(&n.device, "mlx5_0");
    n.has_port = true;
    n.port = 1;
    sset(&n.counter, "symbol_error");
    n.has_count = true;
    n.count = k;
    feed(e, n);
    if (k % 10 == 0)
        podfail(e, t0 + 20, node, job, pod, "OOMKilled", 137, NULL);
}

static void test_many_short_jobs_stay_bounded(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(NULL, &sk);
    struct gh_engine_stats a, b;
    /* A week of jobs first: the per-node rings (kept by count and by age,
     * 7 days) are full by then. */
    int k = 0;
    for (; k < 2100; k++)
        short_job(e, k);
    gh_engine_stats(e, &a);
    for (; k < 6300; k++) {
        short_job(e, k);
        if (getenv("GH_TEST_VERBOSE") && k % 300 == 0) {
            gh_engine_stats(e, &b);
            fprintf(stderr, "k %d bytes %zu detectors %zu jobs %zu timeline jobs %zu entries %llu\n", k,
                    b.bytes, b.detector_bytes, b.jobs, b.timeline.jobs,
                    (unsigned long long)b.timeline.entries_live);
        }
    }
    gh_engine_stats(e, &b);
    /* Three times the jobs, the same memory: only the last hour's jobs are
     * held (12 at one every 5 min, plus up to a sweep period's). */
    assert_true(b.bytes < a.bytes + a.bytes / 10);
    assert_true(b.detector_bytes < a.detector_bytes + a.detector_bytes / 10);
    assert_true(b.jobs <= 20);
    assert_true(b.timeline.jobs <= 20);
    assert_true(b.timeline.entries_live < a.timeline.entries_live + a.timeline.entries_live / 10);
    assert_true(b.expired_jobs >= 6300 - 20);
    assert_int_equal(b.incidents, 630); /* every OOM, each its own job */

    /* A new job is still tracked: its node's fault names it and its checkpoint. */
    memset(&sk, 0, sizeof sk); /* the sink keeps the first 64 */
    short_job(e, k);
    xid(e, k * 300.0 + 30, "gpu-12", 1, 79); /* k % 16 == 12 */
    gh_engine_finish(e, INT64_MAX);
    const struct got *g = &sk.v[sk.n - 1];
    assert_int_equal(g->cls, GH_CLASS_GPU_HARDWARE);
    char job[32];
    snprintf(job, sizeof job, "ml/j%05d", k);
    assert_string_equal(g->job, job);
    assert_true(g->has_ckpt);
    assert_int_equal(g->ckpt_step, 0);
    gh_engine_free(e);
}

static void test_declared_jobs_keep_placement_until_forgotten(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 0, "ml/llm", 7, true);
    /* Five quiet hours: the declared job keeps its placement and checkpoint. */
    for (int h = 1; h <= 5; h++)
        node_signal(e, GH_KIND_NODE_READY, h * 3600.0, "gpu-05");
    xid(e, 5 * 3600.0 + 10, "gpu-02", 0, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].job, "ml/llm");
    assert_int_equal(sk.v[0].ckpt_step, 7);
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_int_equal(es.jobs, 1);
    gh_engine_forget_job(e, "ml/llm");
    gh_engine_stats(e, &es);
    assert_int_equal(es.jobs, 0);
    assert_int_equal(es.timeline.jobs, 0);
    gh_engine_free(e);

    /* A job learned from signals alone is forgotten after job_idle. */
    e = engine(NULL, &sk);
    step(e, 0, "gpu-01", 0, "ml/tmp", 0, 1, 1000, NOLOSS);
    checkpoint(e, 1, "ml/tmp", 1, true);
    gh_engine_stats(e, &es);
    assert_int_equal(es.jobs, 1);
    for (int m = 1; m <= 90; m++)
        node_signal(e, GH_KIND_NODE_READY, m * 60.0, "gpu-05");
    gh_engine_stats(e, &es);
    assert_int_equal(es.jobs, 0);
    assert_int_equal(es.timeline.jobs, 0);
    assert_int_equal(es.expired_jobs, 1);
    gh_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_down_isolates_and_restarts),
        cmocka_unit_test(test_node_returned_fault_again_is_new_incident),
        cmocka_unit_test(test_node_returned_keeps_later_incident),
        cmocka_unit_test(test_node_back_ready_is_not_isolated),
        cmocka_unit_test(test_node_blip_or_no_job_is_no_incident),
        cmocka_unit_test(test_node_down_folds_with_xid),
        cmocka_unit_test(test_node_detector_alone_names_hardware_cause),
        cmocka_unit_test(test_node_down_grace_is_a_setting),
        cmocka_unit_test(test_pod_started_places_job),
        cmocka_unit_test(test_straggler_resumes_from_latest_checkpoint),
        cmocka_unit_test(test_straggler_few_reports_in_a_large_job),
        cmocka_unit_test(test_next_deadline),
        cmocka_unit_test(test_many_short_jobs_stay_bounded),
        cmocka_unit_test(test_declared_jobs_keep_placement_until_forgotten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
