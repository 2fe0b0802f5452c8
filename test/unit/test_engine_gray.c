/* test_engine_gray.c - gray failures through the engine: stragglers (rank,
 * node, whole job, not worth it), silent data corruption (checksums, loss,
 * probes), flapping nodes, and network faults (flap, dead link, hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "test_engine_helpers.h"

/* Deterministic jitter in [-1, 1). */
static double jit(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / (double)(1ULL << 52) - 1.0;
}

static struct gh_topology *topo_n(int nodes, double remaining_s)
{
    struct gh_topology *t = gh_topology_new();
    const char *names[8] = {"gpu-01", "gpu-02", "gpu-03", "gpu-04",
                            "gpu-05", "gpu-06", "gpu-07", "gpu-08"};
    long j = gh_topology_add_job(t, "ml/llm", names, (size_t)nodes, 8);
    gh_topology_set_job_costs(t, j, remaining_s, -1);
    return t;
}

static const char *node_of(int rank)
{
    static const char *names[8] = {"gpu-01", "gpu-02", "gpu-03", "gpu-04",
                                   "gpu-05", "gpu-06", "gpu-07", "gpu-08"};
    return names[rank / 8];
}

/* Runs `steps` steps of a job on `nodes` nodes; slow(rank, step) gives a
 * rank's slowdown factor. Returns the step at which the first incident was
 * decided (or -1). */
static int run_steps(struct gh_engine *e, struct sink *sk, int nodes, int steps,
                     double (*slow)(int rank, int step))
{
    uint64_t seed = 42;
    int first = -1;
    for (int st = 0; st < steps; st++) {
        for (int r = 0; r < nodes * 8; r++) {
            double ms = 1000 * (1 + 0.03 * jit(&seed)) * slow(r, st);
            step(e, st * 1.2 + r * 1e-4, node_of(r), r % 8, "ml/llm", r, st, ms, NOLOSS);
        }
        if (first < 0 && sk->n)
            first = st;
    }
    gh_engine_finish(e, INT64_MAX);
    return first;
}

static double slow_rank13(int r, int st) { return r == 13 && st >= 50 ? 1.15 : 1.0; }
static double slow_node3(int r, int st) { return r / 8 == 2 && st >= 50 ? 1.12 : 1.0; }
static double slow_all(int r, int st) { (void)r; return st >= 50 ? 1.25 : 1.0; }
static double slow_half(int r, int st) { return r / 8 == 1 && st >= 50 ? 1.15 : 1.0; }
static double healthy(int r, int st) { (void)r; (void)st; return 1.0; }

static void test_straggler_rank(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_n(4, -1), &sk);
    int at = run_steps(e, &sk, 4, 150, slow_rank13);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_int_equal(sk.v[0].gpu, 5);
    assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_true(at >= 50 && at <= 80);
    gh_engine_free(e);
}

static void test_straggler_detector_alone(void **st)
{
    (void)st;
    struct gh_topology *t = topo_n(4, -1);
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    c.detectors = GH_DET_STRAGGLER;
    struct sink sk = {0};
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    xid(e, 1, "gpu-01", 0, 79); /* no hardware detector running: ignored */
    run_steps(e, &sk, 4, 150, slow_rank13);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_int_equal(es.findings, 1);
    gh_engine_free(e);
}

static void test_straggler_node(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_n(4, -1), &sk);
    run_steps(e, &sk, 4, 150, slow_node3);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].node, "gpu-03");
    assert_int_equal(sk.v[0].gpu, -1);
    gh_engine_free(e);
}

static void test_straggler_two_nodes(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_n(2, -1), &sk);
    run_steps(e, &sk, 2, 150, slow_half);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].node, "gpu-02");
    gh_engine_free(e);
}

static void test_whole_job_slow_is_not_a_straggler(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_n(4, -1), &sk);
    run_steps(e, &sk, 4, 200, slow_all);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
    e = engine(topo_n(8, -1), &sk);
    run_steps(e, &sk, 8, 300, healthy);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
}

static void test_straggler_not_worth_restart(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_n(4, 600), &sk); /* 10 min left */
    run_steps(e, &sk, 4, 150, slow_rank13);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].rule, "straggler-not-worth-restart");
    assert_int_equal(sk.v[0].n_actions, 1);
    assert_int_equal(sk.v[0].actions[0], GH_ACT_NONE);
    gh_engine_free(e);
}

static void checksum(struct gh_engine *e, double t, const char *node, int gpu, int rank, int replica,
                     int64_t stepno, const char *value)
{
    struct gh_signal s = sig(GH_KIND_REPLICA_CHECKSUM, t, node, gpu);
    sset(&s.job, "ml/llm");
    s.has_rank = true;
    s.rank = rank;
    s.has_step = true;
    s.step = stepno;
    s.replica = replica;
    sset(&s.value, value);
    feed(e, s);
}

static void test_sdc_checksum_odd_one_out(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 5, "ml/llm", 100, true);
    for (int stp = 101; stp <= 220; stp++) {
        double t = 10 + (stp - 101) * 2.0;
        if (stp == 200)
            checkpoint(e, t + 0.5, "ml/llm", 200, true); /* saved after the corruption */
        for (int rep = 0; rep < 4; rep++) {
            int rank = rep * 4;
            char v[32];
            snprintf(v, sizeof v, "%08x", stp * 7919);
            if (rep == 2 && stp >= 180)
                snprintf(v, sizeof v, "bad%05x", stp);
            checksum(e, t + rep * 0.01, rank < 8 ? "gpu-01" : "gpu-02", rank % 8, rank, rep, stp, v);
        }
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_SILENT_DATA_CORRUPTION);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_int_equal(sk.v[0].gpu, 0);
    assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_true(sk.v[0].has_ckpt);
    assert_int_equal(sk.v[0].ckpt_step, 100);
    gh_engine_free(e);
}

static void test_sdc_loss_spike_then_probe(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 0, true);
    for (int stp = 1; stp <= 60; stp++) {
        double t = stp * 2.0;
        if (stp == 40)
            checkpoint(e, t - 0.5, "ml/llm", 40, true);
        double loss = 3.0 * exp(-stp / 100.0);
        if (stp == 45)
            loss = NAN;
        for (int r = 0; r < 16; r++)
            step(e, t + r * 0.001, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 1000, loss);
    }
    struct gh_signal p = sig(GH_KIND_PROBE_RESULT, 200, "gpu-02", 3);
    sset(&p.check, "gemm_checksum");
    p.passed = false;
    sset(&p.detail, "mismatch in 3 of 1000 tiles");
    feed(e, p);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_int_equal(sk.v[0].cls, GH_CLASS_SILENT_DATA_CORRUPTION);
    assert_string_equal(sk.v[0].node, "");
    assert_true(got_action(&sk.v[0], GH_ACT_RUN_DIAGNOSTICS));
    assert_int_equal(sk.v[0].ckpt_step, 40);
    assert_int_equal(sk.v[1].cls, GH_CLASS_SILENT_DATA_CORRUPTION);
    assert_string_equal(sk.v[1].node, "gpu-02");
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_int_equal(sk.v[1].ckpt_step, 40); /* before the first anomaly, not the latest */
    gh_engine_free(e);
}

static const char *const six_names[] = {"gpu-01", "gpu-02", "gpu-03",
                                        "gpu-04", "gpu-05", "gpu-06"};

/* An engine over six nodes of no job, gpu-01 seen Ready at 0. */
static struct gh_engine *six_nodes(struct sink *sk)
{
    struct gh_topology *t = gh_topology_new();
    for (int i = 0; i < 6; i++)
        gh_topology_add_node(t, six_names[i]);
    struct gh_engine *e = engine(t, sk);
    feed(e, sig(GH_KIND_NODE_READY, 0, "gpu-01", -1));
    return e;
}

static void test_flapping_node(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = six_nodes(&sk);
    /* Three jobs, each failing first on gpu-05 (then on its peers), hours apart. */
    const char *jobs[] = {"a/one", "b/two", "c/three"};
    for (int k = 0; k < 3; k++) {
        double t0 = 3600.0 * (2 + 4 * k);
        podfail(e, t0, "gpu-05", jobs[k], "p-0", "Error", 1, "RuntimeError: CUDA error: unspecified launch failure");
        podfail(e, t0 + 20, six_names[k], jobs[k], "p-1", "Error", 1, "RuntimeError: NCCL error");
    }
    /* An unrelated single failure elsewhere. */
    podfail(e, 3600.0 * 13, "gpu-02", "d/four", "p-0", "Error", 1, "KeyError");
    gh_engine_finish(e, INT64_MAX);
    int flapping = -1, apps = 0;
    for (int i = 0; i < sk.n; i++) {
        if (sk.v[i].cls == GH_CLASS_FLAPPING_NODE)
            flapping = i;
        else if (sk.v[i].cls == GH_CLASS_APPLICATION)
            apps++;
        assert_false(sk.v[i].cls == GH_CLASS_APPLICATION && sk.v[i].node[0]);
    }
    assert_true(flapping >= 0);
    assert_string_equal(sk.v[flapping].node, "gpu-05");
    assert_true(got_action(&sk.v[flapping], GH_ACT_ISOLATE_NODE));
    assert_true(got_action(&sk.v[flapping], GH_ACT_RUN_DIAGNOSTICS));
    assert_true(apps <= 2); /* the first job's failure, and the unrelated one */
    gh_engine_free(e);
}

/* Every rank of a hung job times out in its collectives at about the same
 * time; the pod Kubernetes reports first (here always gpu-01's, rank 0) only
 * waited for a peer. Three hangs of one job hours apart blame no node; when a
 * pod of the failure fails on its own account (a CUDA error on gpu-05) after
 * the timeouts, that one is blamed. */
static void test_flapping_collective_timeouts_blame_nobody(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = six_nodes(&sk);
    static const char wd[] = "[Rank 0] Watchdog caught collective operation timeout: "
                             "WorkNCCL(OpType=ALLREDUCE) ran for 600000 milliseconds before timing out";
    for (int k = 0; k < 3; k++) {
        double t0 = 3600.0 * (2 + 4 * k);
        podfail(e, t0, "gpu-01", "a/one", "p-0", "Error", 1, wd);
        podfail(e, t0, six_names[2 + k % 2], "a/one", "p-1", "Error", 1, wd);
    }
    const char *jobs[] = {"b/two", "c/three", "d/four"};
    for (int k = 0; k < 3; k++) {
        double t0 = 3600.0 * (20 + 4 * k);
        podfail(e, t0, "gpu-02", jobs[k], "p-0", "Error", 1, wd);
        podfail(e, t0 + 5, "gpu-05", jobs[k], "p-1", "Error", 1,
                "RuntimeError: CUDA error: unspecified launch failure");
    }
    gh_engine_finish(e, INT64_MAX);
    int flapping = 0;
    for (int i = 0; i < sk.n; i++) {
        if (sk.v[i].cls != GH_CLASS_FLAPPING_NODE)
            continue;
        flapping++;
        assert_string_equal(sk.v[i].node, "gpu-05");
    }
    assert_int_equal(flapping, 1);
    gh_engine_free(e);
}

static void nic(struct gh_engine *e, double t, const char *node, const char *state, long link_downed)
{
    struct gh_signal s = sig(GH_KIND_NIC, t, node, -1);
    sset(&s.device, "mlx5_0");
    s.has_port = true;
    s.port = 1;
    sset(&s.counter, "link_downed");
    s.has_count = true;
    s.count = link_downed;
    s.state = strcmp(state, "down") == 0 ? GH_LINK_DOWN : GH_LINK_UP;
    feed(e, s);
}

static void test_nic_flap_and_dead_link(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    nic(e, 0, "gpu-01", "up", 3);
    nic(e, 100, "gpu-01", "down", 4);
    nic(e, 102.5, "gpu-01", "up", 4);
    podfail(e, 103, "gpu-01", "ml/llm", "w-0", "Error", 1, "NCCL error: remote process exited or there was a network error");
    nic(e, 5000, "gpu-02", "up", 0);
    nic(e, 5010, "gpu-02", "down", 1);
    nic(e, 5030, "gpu-02", "down", 1);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[0].node, "gpu-01");
    assert_true(got_action(&sk.v[0], GH_ACT_RETRY_IN_PLACE));
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_int_equal(sk.v[1].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[1].node, "gpu-02");
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_true(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[1].decided_ts, T0 + S(5070));
    gh_engine_free(e);
}

static void test_collective_hang_localised(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    for (int stp = 1; stp <= 20; stp++)
        for (int r = 0; r < 16; r++)
            if (!(r == 9 && stp == 20))
                step(e, stp * 1.0 + r * 1e-3, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 1000, NOLOSS);
    for (int r = 0; r < 16; r++) {
        char pod[16];
        snprintf(pod, sizeof pod, "w-%d", r);
        podfail(e, 620 + r * 0.1, r < 8 ? "gpu-01" : "gpu-02", "ml/llm", pod, "Error", 1,
                "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.");
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    gh_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straggler_rank),
        cmocka_unit_test(test_straggler_detector_alone),
        cmocka_unit_test(test_straggler_node),
        cmocka_unit_test(test_straggler_two_nodes),
        cmocka_unit_test(test_whole_job_slow_is_not_a_straggler),
        cmocka_unit_test(test_straggler_not_worth_restart),
        cmocka_unit_test(test_sdc_checksum_odd_one_out),
        cmocka_unit_test(test_sdc_loss_spike_then_probe),
        cmocka_unit_test(test_flapping_node),
        cmocka_unit_test(test_flapping_collective_timeouts_blame_nobody),
        cmocka_unit_test(test_nic_flap_and_dead_link),
        cmocka_unit_test(test_collective_hang_localised),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
