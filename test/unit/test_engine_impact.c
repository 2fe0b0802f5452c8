/* test_engine_impact.c - the impact model (issue 14 sections 1-2): actions in
 * proportion to the harm the evidence shows (a flag is not harm; measured
 * slowdown, a pod that died, a fatal code are), records whose actions wait
 * for a safe moment and are decided again when it comes or when harm
 * shows, one record per node and cause, restarts of exactly the jobs
 * harmed (not of one that finished or left the node), and policies that
 * match on impact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/policy.h"
#include "test_engine_helpers.h"

/* Steps of ml/llm on both nodes of topo_2x8 at t: every rank at ms, the
 * ranks of slow_node at ms * factor. */
static void steps_at(struct gh_engine *e, double t, int64_t stepno, const char *slow_node,
                     double factor)
{
    const char *nodes[] = {"gpu-01", "gpu-02"};
    for (int n = 0; n < 2; n++)
        for (int g = 0; g < 8; g++)
            step(e, t + 0.001 * (8 * n + g), nodes[n], g, "ml/llm", 8 * n + g, stepno,
                 slow_node && strcmp(nodes[n], slow_node) == 0 ? 1000 * factor : 1000, NOLOSS);
}

static void kube_kind(struct gh_engine *e, enum gh_kind k, double t, const char *node,
                      const char *job, const char *pod)
{
    struct gh_signal s = sig(k, t, node, -1);
    s.source = GH_SRC_KUBE;
    sset(&s.job, job);
    if (k == GH_KIND_POD_SUCCEEDED) {
        sset(&s.namespace_, "ml");
        sset(&s.pod, pod);
    } else {
        s.job_state = GH_JOB_COMPLETE;
    }
    feed(e, s);
}

static void remap_pending(struct gh_engine *e, double t, const char *node, int gpu)
{
    struct gh_signal s = sig(GH_KIND_ROW_REMAP, t, node, gpu);
    s.pending = true;
    s.uncorrectable = 1;
    feed(e, s);
}

static void test_remap_pending_waits_for_safe_moment(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 10, true);
    for (int i = 0; i < 10; i++)
        steps_at(e, 2 + 2 * i, 11 + i, NULL, 1);
    remap_pending(e, 30, "gpu-02", 3);
    assert_int_equal(sk.n, 1);
    const struct got *g = &sk.v[0];
    assert_string_equal(g->rule, "row-remap-pending");
    assert_string_equal(g->job, "ml/llm");
    assert_int_equal(g->impact, GH_IMPACT_NONE);
    assert_false(g->urgent);
    assert_false(got_action(g, GH_ACT_DRAIN_NODE));
    assert_false(got_action(g, GH_ACT_RESET_GPU));
    assert_true(got_deferred(g, GH_ACT_DRAIN_NODE));
    assert_true(got_deferred(g, GH_ACT_RESET_GPU));
    assert_non_null(strstr(g->reason, "wait for a safe moment"));
    /* the job ends: the reset is due; the drain of a node nothing harmed
     * stays recorded */
    kube_kind(e, GH_KIND_JOB_FINISHED, 100, NULL, "ml/llm", NULL);
    assert_int_equal(sk.n, 2);
    g = &sk.v[1];
    assert_string_equal(g->rule, "row-remap-pending");
    assert_string_equal(g->node, "gpu-02");
    assert_int_equal(g->gpu, 3);
    assert_true(got_action(g, GH_ACT_RESET_GPU));
    assert_false(got_action(g, GH_ACT_DRAIN_NODE));
    assert_false(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_string_equal(g->job, "");
    assert_non_null(strstr(g->reason, "has finished: the safe moment"));
    /* once: the job's end does not reset it again */
    kube_kind(e, GH_KIND_POD_SUCCEEDED, 101, "gpu-02", "ml/llm", "llm-9");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    gh_engine_free(e);
}

static void test_pod_failure_after_record_restarts(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 10, true);
    int64_t counts[] = {5, 6, 600, 1600};
    for (int i = 0; i < 4; i++) {
        struct gh_signal s = sig(GH_KIND_ECC, 10 + 30 * i, "gpu-01", 6);
        s.bits = GH_ECC_SINGLE;
        s.has_count = true;
        s.count = counts[i];
        s.is_volatile = true;
        feed(e, s);
    }
    assert_int_equal(sk.n, 1); /* the storm: recorded, the drain waits */
    assert_string_equal(sk.v[0].rule, "ecc-single-bit-storm");
    assert_true(got_deferred(&sk.v[0], GH_ACT_DRAIN_NODE));
    assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    podfail(e, 120, "gpu-01", "ml/llm", "llm-6", "Error", 1,
            "RuntimeError: CUDA error: uncorrectable ECC error encountered");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    const struct got *g = &sk.v[1];
    assert_int_equal(g->cls, GH_CLASS_GPU_MEMORY);
    assert_int_equal(g->impact, GH_IMPACT_DIED);
    assert_true(got_action(g, GH_ACT_DRAIN_NODE));
    assert_true(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_true(g->has_ckpt);
    assert_int_equal(g->ckpt_step, 10);
    assert_int_equal(g->first_ts, sk.v[0].first_ts); /* the same cause, from its start */
    gh_engine_free(e);
}

static void throttle(struct gh_engine *e, double t, const char *node, int gpu)
{
    struct gh_signal s = sig(GH_KIND_THERMAL, t, node, gpu);
    s.celsius = 88;
    s.throttled = true;
    feed(e, s);
}

static void test_thermal_needs_measured_slowdown(void **st)
{
    (void)st;
    for (int slow = 0; slow < 2; slow++) {
        struct sink sk;
        struct gh_engine *e = engine(topo_2x8(), &sk);
        checkpoint(e, 1, "ml/llm", 10, true);
        /* two GPUs of gpu-02 throttle for 6 minutes; its ranks step at
         * their peers' pace (1%), or, from the 280th second, 30% slower
         * (a straggler verdict may follow later) */
        for (int i = 0; i <= 36; i++) {
            throttle(e, 10 * i, "gpu-02", 1);
            throttle(e, 10 * i + 1, "gpu-02", 5);
            steps_at(e, 10 * i + 2, 20 + i, "gpu-02", slow && i >= 28 ? 1.3 : 1.01);
        }
        gh_engine_finish(e, INT64_MAX);
        int thermal = 0;
        for (int k = 0; k < sk.n; k++) {
            if (sk.v[k].cls != GH_CLASS_THERMAL_POWER)
                continue;
            thermal++;
            assert_string_equal(sk.v[k].node, "gpu-02");
            if (slow) {
                assert_int_equal(sk.v[k].impact, GH_IMPACT_SLOWER);
                assert_true(sk.v[k].slowdown > 0.25 && sk.v[k].slowdown < 0.35);
                assert_true(got_action(&sk.v[k], GH_ACT_DRAIN_NODE));
            } else {
                assert_int_equal(sk.v[k].impact, GH_IMPACT_NONE);
                assert_false(got_action(&sk.v[k], GH_ACT_DRAIN_NODE));
                assert_true(got_deferred(&sk.v[k], GH_ACT_DRAIN_NODE));
            }
        }
        /* one incident per node and cause, not one per GPU */
        assert_int_equal(thermal, 1);
        gh_engine_free(e);
    }
}

static void test_fatal_sxid_restarts_job(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 40, true);
    struct gh_signal s = sig(GH_KIND_SXID, 10, "gpu-01", -1);
    s.code = 12028;
    sset(&s.msg, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Fatal, Link 33");
    feed(e, s);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].rule, "nvswitch-error");
    assert_int_equal(sk.v[0].impact, GH_IMPACT_DIED);
    assert_true(sk.v[0].urgent);
    assert_true(got_action(&sk.v[0], GH_ACT_DRAIN_NODE));
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[0].ckpt_step, 40);
    /* restart right after the drain, before the rest */
    assert_int_equal(sk.v[0].actions[0], GH_ACT_DRAIN_NODE);
    assert_int_equal(sk.v[0].actions[1], GH_ACT_RESTART_FROM_CHECKPOINT);
    gh_engine_free(e);
}

static void test_finished_or_gone_job_not_restarted(void **st)
{
    (void)st;
    /* job_finished, then XID 79: the node out, no restart */
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 40, true);
    kube_kind(e, GH_KIND_JOB_FINISHED, 50, NULL, "ml/llm", NULL);
    xid(e, 3600, "gpu-01", 2, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_string_equal(sk.v[0].job, "");
    gh_engine_free(e);

    /* its pods on gpu-02 succeeded (it runs on gpu-01): XID 79 on gpu-02
     * restarts nothing; once a pod of it starts there again, it does */
    e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 40, true);
    kube_kind(e, GH_KIND_POD_SUCCEEDED, 20, "gpu-02", "ml/llm", "llm-1");
    xid(e, 30, "gpu-02", 2, 79);
    assert_int_equal(sk.n, 1);
    assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    struct gh_signal s = sig(GH_KIND_POD_STARTED, 5000, "gpu-02", -1);
    sset(&s.job, "ml/llm");
    sset(&s.namespace_, "ml");
    sset(&s.pod, "llm-1b");
    feed(e, s);
    xid(e, 9000, "gpu-02", 4, 48);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[1].job, "ml/llm");
    assert_true(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    gh_engine_free(e);

    /* telemetry that streamed and ended with a checkpoint of its last step,
     * then 20 quiet minutes: finished; a last step that is not checkpointed
     * (a hang, a crash) is not */
    for (int ended = 0; ended < 2; ended++) {
        e = engine(topo_2x8(), &sk);
        for (int i = 0; i < 10; i++)
            steps_at(e, 2 + 2 * i, 1 + i, NULL, 1);
        checkpoint(e, 25, "ml/llm", ended ? 10 : 8, true);
        xid(e, 25 + 1200, "gpu-01", 2, 79);
        gh_engine_finish(e, INT64_MAX);
        assert_int_equal(sk.n, 1);
        assert_int_equal(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT), !ended);
        if (ended)
            assert_non_null(strstr(sk.v[0].reason, "ended with its final checkpoint"));
        gh_engine_free(e);
    }
}

static void test_not_ready_with_steps_waits(void **st)
{
    (void)st;
    /* a kubelet restart: NotReady for 150 s while the ranks there step on */
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 40, true);
    struct gh_signal s = sig(GH_KIND_NODE_NOT_READY, 10, "gpu-02", -1);
    feed(e, s);
    for (int i = 0; i < 80; i++)
        steps_at(e, 11 + 2 * i, 100 + i, NULL, 1);
    s = sig(GH_KIND_NODE_READY, 160, "gpu-02", -1);
    feed(e, s);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
}

static void test_policy_matches_impact(void **st)
{
    (void)st;
    /* a rule only for findings that harmed the job comes first */
    const char *y = "version: 1\n"
                    "rules:\n"
                    "  - name: remap-harmed\n"
                    "    match: {kind: row_remap, impact: [died, wrong]}\n"
                    "    actions: [drain_node, restart_from_checkpoint, reset_gpu]\n"
                    "  - name: remap-quiet\n"
                    "    match: {kind: row_remap, impact: none}\n"
                    "    actions: [none]\n";
    struct gh_policy *p = NULL;
    struct gh_policy_diags d;
    assert_int_equal(gh_policy_parse(y, strlen(y), &p, &d), GH_OK);
    assert_int_equal(p->rules[0].impacts, (1u << GH_IMPACT_DIED) | (1u << GH_IMPACT_WRONG));
    struct gh_policy_query q = {GH_CLASS_GPU_MEMORY, GH_KIND_ROW_REMAP, -1, GH_SEV_MEDIUM,
                                false, 0, false, GH_IMPACT_NONE, NULL};
    assert_int_equal(gh_policy_match(p, &q), -1); /* not assessed: no impact rule matches */
    assert_true(gh_policy_impact_matters(p, &q, -1));
    q.has_impact = true;
    assert_int_equal(gh_policy_match(p, &q), 1);
    q.impact = GH_IMPACT_DIED;
    assert_int_equal(gh_policy_match(p, &q), 0);

    struct sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    struct gh_topology *t = topo_2x8();
    struct gh_engine *e = gh_engine_new(p, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    remap_pending(e, 10, "gpu-01", 1);
    podfail(e, 20, "gpu-02", "ml/llm", "llm-9", "Error", 1, "CUDA error: an illegal memory access");
    remap_pending(e, 25, "gpu-02", 4);
    gh_engine_finish(e, INT64_MAX);
    int quiet = 0, harmed = 0;
    for (int k = 0; k < sk.n; k++) {
        quiet += strcmp(sk.v[k].rule, "remap-quiet") == 0 && strcmp(sk.v[k].node, "gpu-01") == 0;
        harmed += strcmp(sk.v[k].rule, "remap-harmed") == 0 && strcmp(sk.v[k].node, "gpu-02") == 0;
    }
    assert_int_equal(quiet, 1);
    assert_int_equal(harmed, 1);
    gh_engine_free(e);
    gh_policy_free(p);

    /* an unknown impact is an error naming it */
    const char *bad = "version: 1\nrules:\n  - name: r\n    match: {impact: [dead]}\n    actions: [none]\n";
    assert_int_equal(gh_policy_parse(bad, strlen(bad), &p, &d), GH_EINVAL);
    assert_non_null(strstr(d.d[0].msg, "unknown impact \"dead\""));
    assert_int_equal(d.d[0].line, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remap_pending_waits_for_safe_moment),
        cmocka_unit_test(test_pod_failure_after_record_restarts),
        cmocka_unit_test(test_thermal_needs_measured_slowdown),
        cmocka_unit_test(test_fatal_sxid_restarts_job),
        cmocka_unit_test(test_finished_or_gone_job_not_restarted),
        cmocka_unit_test(test_not_ready_with_steps_waits),
        cmocka_unit_test(test_policy_matches_impact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
