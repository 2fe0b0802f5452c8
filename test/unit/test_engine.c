/* test_engine.c - the engine end to end: hardware faults, application faults,
 * one incident per root cause, checkpoints, grace, repetitions, skew, dups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_engine_helpers.h"

static void test_xid79_then_forty_pod_failures(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 0, "ml/llm", 1000, true);
    checkpoint(e, 50, "ml/llm", 1100, false);
    xid(e, 100, "gpu-02", 3, 79);
    xid(e, 100.5, "gpu-02", 3, 45);
    for (int i = 0; i < 40; i++) {
        char pod[32];
        snprintf(pod, sizeof pod, "llm-worker-%d", i);
        podfail(e, 130 + i * 0.5, i < 8 ? "gpu-02" : "gpu-01", "ml/llm", pod, "Error", 1,
                "NCCL watchdog timeout: collective operation timed out");
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    struct got *g = &sk.v[0];
    assert_int_equal(g->cls, GH_CLASS_GPU_HARDWARE);
    assert_string_equal(g->node, "gpu-02");
    assert_int_equal(g->gpu, 3);
    assert_string_equal(g->job, "ml/llm");
    assert_true(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_true(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_true(g->has_ckpt);
    assert_int_equal(g->ckpt_step, 1000); /* the failed save does not count */
    assert_int_equal(g->first_ts, T0 + S(100));
    assert_int_equal(g->decided_ts, T0 + S(100));
    assert_string_equal(g->rule, "gpu-fell-off-bus");
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_true(es.absorbed >= 40);
    gh_engine_free(e);
}

static void test_application_fault_blames_no_node(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    xid(e, 10, "gpu-01", 0, 13);
    xid(e, 10.1, "gpu-01", 1, 13);
    xid(e, 10.2, "gpu-02", 4, 13);
    podfail(e, 12, "gpu-01", "ml/llm", "w-0", "Error", 1, "RuntimeError: CUDA error: an illegal instruction");
    podfail(e, 12.5, "gpu-02", "ml/llm", "w-1", "Error", 1, "RuntimeError");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    struct got *g = &sk.v[0];
    assert_int_equal(g->cls, GH_CLASS_APPLICATION);
    assert_string_equal(g->node, "");
    assert_int_equal(g->gpu, -1);
    assert_string_equal(g->job, "ml/llm");
    assert_false(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_true(got_action(g, GH_ACT_RETRY_IN_PLACE));
    assert_int_equal(g->first_ts, T0 + S(10));
    assert_int_equal(g->decided_ts, T0 + S(40)); /* after the 30 s hold */
    assert_int_equal(g->n_evidence, 5);
    gh_engine_free(e);
}

static void test_oom_decided_at_once(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    podfail(e, 5, "gpu-01", "ml/llm", "w-0", "OOMKilled", 137, NULL);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_APPLICATION);
    assert_int_equal(sk.v[0].decided_ts, T0 + S(5));
    gh_engine_free(e);
}

static void test_late_hardware_evidence_claims_pod_failures(void **st)
{
    (void)st;
    /* The node's kernel clock is 8 s ahead: its XID appears after the pods failed. */
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    podfail(e, 100, "gpu-01", "ml/llm", "w-0", "Error", 1, "RuntimeError: CUDA error: unspecified launch failure");
    xid(e, 108, "gpu-02", 6, 48);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_MEMORY);
    assert_string_equal(sk.v[0].node, "gpu-02");
    gh_engine_free(e);
}

static void test_same_app_xid_follows_gpu(void **st)
{
    (void)st;
    const char *n1[] = {"gpu-07"};
    struct sink sk;
    struct gh_engine *e;
    struct gh_topology *t = gh_topology_new();
    gh_topology_add_job(t, "a/job1", n1, 1, 8);
    e = engine(t, &sk);
    xid(e, 10, "gpu-07", 2, 31);
    struct gh_signal s = sig(GH_KIND_STEP, 3000, "gpu-07", 2);
    /* job2's rank 2 now runs on gpu-07 GPU 2. */
    sset(&s.job, "b/job2");
    s.has_rank = true;
    s.rank = 2;
    s.has_step = true;
    s.step = 1;
    s.step_ms = 1000;
    feed(e, s);
    xid(e, 3010, "gpu-07", 2, 31);
    gh_engine_finish(e, INT64_MAX);
    /* First an application incident (one job), then the GPU (two jobs). */
    assert_true(sk.n >= 2);
    assert_int_equal(sk.v[0].cls, GH_CLASS_APPLICATION);
    assert_int_equal(sk.v[1].cls, GH_CLASS_GPU_HARDWARE);
    assert_string_equal(sk.v[1].node, "gpu-07");
    assert_int_equal(sk.v[1].gpu, 2);
    gh_engine_free(e);
}

static void test_low_severity_needs_repetition_and_respects_boot_grace(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    feed(e, sig(GH_KIND_NODE_READY, 0, "gpu-01", -1));
    /* Noise right after boot: ignored. */
    for (int i = 0; i < 8; i++)
        xid(e, 30 + i * 20, "gpu-01", 0, 38);
    /* Later, 5 in an hour (debounced 10 s): diagnostics. */
    for (int i = 0; i < 4; i++)
        xid(e, 1000 + i * 60, "gpu-02", 1, 38);
    assert_int_equal(sk.n, 0);
    xid(e, 1000 + 4 * 60, "gpu-02", 1, 38);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].rule, "xid-low-repeating");
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_int_equal(sk.v[0].n_evidence, 5);
    assert_true(got_action(&sk.v[0], GH_ACT_RUN_DIAGNOSTICS));
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_int_equal(es.grace, 8);
    gh_engine_free(e);
}

static void test_two_simultaneous_faults(void **st)
{
    (void)st;
    struct gh_topology *t = gh_topology_new();
    const char *a[] = {"gpu-01", "gpu-02"}, *b[] = {"gpu-03"};
    gh_topology_add_job(t, "ml/a", a, 2, 8);
    gh_topology_add_job(t, "ml/b", b, 1, 8);
    struct sink sk;
    struct gh_engine *e = engine(t, &sk);
    xid(e, 10, "gpu-01", 1, 79);
    struct gh_signal s = sig(GH_KIND_ECC, 10.2, "gpu-03", 5);
    s.bits = GH_ECC_DOUBLE;
    s.is_volatile = true;
    s.has_count = true;
    s.count = 1;
    feed(e, s);
    podfail(e, 40, "gpu-02", "ml/a", "a-3", "Error", 1, "NCCL error");
    podfail(e, 41, "gpu-03", "ml/b", "b-0", "Error", 1, "CUDA error: uncorrectable ECC error encountered");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].node, "gpu-01");
    assert_string_equal(sk.v[0].job, "ml/a");
    assert_string_equal(sk.v[1].node, "gpu-03");
    assert_int_equal(sk.v[1].cls, GH_CLASS_GPU_MEMORY);
    assert_string_equal(sk.v[1].job, "ml/b");
    gh_engine_free(e);
}

static void test_duplicates_and_reorder_window(void **st)
{
    (void)st;
    struct gh_topology *t = topo_2x8();
    struct gh_engine_config c;
    gh_engine_config_default(&c); /* live: 2 s window */
    struct sink sk = {0};
    struct gh_engine *e = gh_engine_new(NULL, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    /* The pod failure arrives first, the XID that explains it 1 s later but
     * stamped earlier: inside the window it is put back in order. */
    struct gh_signal p = sig(GH_KIND_POD_FAILED, 10, "gpu-01", -1);
    sset(&p.job, "ml/llm");
    sset(&p.reason, "Error");
    p.has_exit_code = true;
    p.exit_code = 1;
    assert_int_equal(gh_engine_ingest(e, &p, T0 + S(10), NULL), GH_OK);
    assert_int_equal(gh_engine_ingest(e, &p, T0 + S(10.1), NULL), GH_EAGAIN);
    gh_signal_clear(&p);
    struct gh_signal x = sig(GH_KIND_XID, 9.5, "gpu-01", 2);
    x.code = 79;
    gh_engine_tick(e, T0 + S(10.5));
    assert_int_equal(gh_engine_ingest(e, &x, T0 + S(11), NULL), GH_OK);
    gh_signal_clear(&x);
    gh_engine_tick(e, T0 + S(12));
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_GPU_HARDWARE);
    struct gh_engine_stats es;
    gh_engine_stats(e, &es);
    assert_int_equal(es.timeline.duplicates, 1);
    assert_int_equal(es.timeline.late, 0);
    gh_engine_free(e);
}

static void test_crash_loop_escalates(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    for (int i = 0; i < 6; i++)
        podfail(e, i * 1900, "gpu-01", "ml/llm", "w-0", "Error", 1, "ValueError: bad config");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 6);
    for (int i = 0; i < sk.n; i++) {
        assert_int_equal(sk.v[i].cls, GH_CLASS_APPLICATION);
        assert_string_equal(sk.v[i].node, "");
    }
    assert_true(got_action(&sk.v[0], GH_ACT_RETRY_IN_PLACE));
    assert_true(got_action(&sk.v[2], GH_ACT_NONE)); /* the third within 6 h: budget spent */
    gh_engine_free(e);
}

static void test_row_remap_and_gpu_lost(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    struct gh_signal s = sig(GH_KIND_ROW_REMAP, 1, "gpu-01", 4);
    s.pending = true;
    s.uncorrectable = 1;
    feed(e, s);
    s = sig(GH_KIND_ROW_REMAP, 61, "gpu-01", 4); /* the same state again: nothing new */
    s.pending = true;
    feed(e, s);
    feed(e, sig(GH_KIND_GPU_LOST, 2000, "gpu-02", 0));
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].rule, "row-remap-pending");
    /* nothing harmed (the GPU works on; the remap takes effect at the next
     * reset): the drain and the reset wait for a safe moment */
    assert_int_equal(sk.v[0].impact, GH_IMPACT_NONE);
    assert_false(sk.v[0].urgent);
    assert_false(got_action(&sk.v[0], GH_ACT_RESET_GPU));
    assert_false(got_action(&sk.v[0], GH_ACT_DRAIN_NODE));
    assert_true(got_deferred(&sk.v[0], GH_ACT_RESET_GPU));
    assert_true(got_deferred(&sk.v[0], GH_ACT_DRAIN_NODE));
    assert_string_equal(sk.v[1].rule, "gpu-lost");
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    gh_engine_free(e);
}

static void test_counter_rates_and_throttle(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    /* NVLink CRC counter: slow growth is noise, a burst is a fault. */
    long vals[] = {1000, 1002, 1005, 1005, 2300};
    for (int i = 0; i < 5; i++) {
        struct gh_signal s = sig(GH_KIND_NVLINK, i * 60, "gpu-01", 3);
        s.has_link = true;
        s.link = 2;
        sset(&s.counter, "crc_flit");
        s.has_count = true;
        s.count = vals[i];
        feed(e, s);
    }
    /* Throttling: a diurnal swing without throttling, then 6 min throttled. */
    for (int i = 0; i < 20; i++) {
        struct gh_signal s = sig(GH_KIND_THERMAL, 1000 + i * 30, "gpu-02", 1);
        s.celsius = 70 + i;
        s.throttled = i >= 8;
        feed(e, s);
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].rule, "nvlink-error-rate");
    assert_string_equal(sk.v[1].rule, "thermal-sustained");
    assert_int_equal(sk.v[1].first_ts, T0 + S(1000 + 8 * 30));
    gh_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xid79_then_forty_pod_failures),
        cmocka_unit_test(test_application_fault_blames_no_node),
        cmocka_unit_test(test_oom_decided_at_once),
        cmocka_unit_test(test_late_hardware_evidence_claims_pod_failures),
        cmocka_unit_test(test_same_app_xid_follows_gpu),
        cmocka_unit_test(test_low_severity_needs_repetition_and_respects_boot_grace),
        cmocka_unit_test(test_two_simultaneous_faults),
        cmocka_unit_test(test_duplicates_and_reorder_window),
        cmocka_unit_test(test_crash_loop_escalates),
        cmocka_unit_test(test_row_remap_and_gpu_lost),
        cmocka_unit_test(test_counter_rates_and_throttle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
