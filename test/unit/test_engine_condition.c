/* test_engine_condition.c - Node conditions other agents set (issue 16 item
 * 14): a node_condition True is a finding about its node under the default
 * rules; a flag waits for harm, a condition that means the node cannot run
 * work isolates at once; a pod the host failed is harm and restarts its
 * job; an application's own crash on a flagged node stays the
 * application's; False clears a waiting record and Unknown changes
 * nothing; one incident per node and condition. */
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
#include "signal/signal_json.h"
#include "test_engine_helpers.h"

static void steps_at(struct gh_engine *e, double t, int64_t stepno)
{
    const char *nodes[] = {"gpu-01", "gpu-02"};
    for (int n = 0; n < 2; n++)
        for (int g = 0; g < 8; g++)
            step(e, t + 0.001 * (8 * n + g), nodes[n], g, "ml/llm", 8 * n + g, stepno, 1000,
                 NOLOSS);
}

static void cond(struct gh_engine *e, double t, const char *node, const char *condition,
                 enum gh_cond_status st, const char *reason)
{
    struct gh_signal s = sig(GH_KIND_NODE_CONDITION, t, node, -1);
    s.source = GH_SRC_KUBE;
    sset(&s.condition, condition);
    sset(&s.reason, reason);
    s.cond_status = st;
    feed(e, s);
}

static void job_finished(struct gh_engine *e, double t)
{
    struct gh_signal s = sig(GH_KIND_JOB_FINISHED, t, NULL, -1);
    s.source = GH_SRC_KUBE;
    sset(&s.job, "ml/llm");
    s.job_state = GH_JOB_COMPLETE;
    feed(e, s);
}

/* A running job, checkpointed, stepping on both nodes from t=2 to t=40. */
static struct gh_engine *running(struct sink *sk)
{
    struct gh_engine *e = engine(topo_2x8(), sk);
    checkpoint(e, 1, "ml/llm", 10, true);
    for (int i = 0; i < 20; i++)
        steps_at(e, 2 + 2 * i, 11 + i);
    return e;
}

static void test_flag_waits_and_app_crash_is_not_the_node(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-01", "FrequentKubeletRestart", GH_COND_TRUE, "FrequentKubeletRestart");
    assert_int_equal(sk.n, 1);
    const struct got *g = &sk.v[0];
    assert_int_equal(g->cls, GH_CLASS_UNKNOWN);
    assert_string_equal(g->node, "gpu-01");
    assert_string_equal(g->rule, "node-runtime-restarting");
    assert_int_equal(g->impact, GH_IMPACT_NONE);
    assert_false(g->urgent);
    assert_false(got_action(g, GH_ACT_DRAIN_NODE));
    assert_true(got_deferred(g, GH_ACT_DRAIN_NODE));
    assert_non_null(strstr(g->reason, "FrequentKubeletRestart=True on gpu-01"));
    /* the application's own OOM and crash on that node: the application's */
    podfail(e, 60, "gpu-01", "ml/llm", "llm-0", "OOMKilled", 137, NULL);
    podfail(e, 61, "gpu-01", "ml/llm", "llm-1", "Error", 1, "KeyError: 'attention_mask'");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    g = &sk.v[1];
    assert_int_equal(g->cls, GH_CLASS_APPLICATION);
    assert_string_equal(g->node, "");
    for (int i = 0; i < sk.n; i++) {
        assert_false(got_action(&sk.v[i], GH_ACT_DRAIN_NODE));
        assert_false(got_action(&sk.v[i], GH_ACT_ISOLATE_NODE));
    }
    gh_engine_free(e);
}

static void test_cannot_run_work_isolates_host_failure_restarts(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-02", "KernelDeadlock", GH_COND_TRUE, "DockerHung");
    assert_int_equal(sk.n, 1);
    const struct got *g = &sk.v[0];
    assert_string_equal(g->rule, "node-cannot-run-work");
    assert_string_equal(g->node, "gpu-02");
    assert_true(g->urgent);
    assert_true(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_false(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT)); /* nothing harmed yet */
    assert_false(got_action(g, GH_ACT_REBOOT_NODE));
    /* the same condition again (a relist): nothing new */
    cond(e, 42, "gpu-02", "KernelDeadlock", GH_COND_TRUE, "DockerHung");
    assert_int_equal(sk.n, 1);
    /* the runtime loses the job's container: the host's doing */
    podfail(e, 50, "gpu-02", "ml/llm", "llm-2", "ContainerStatusUnknown", 137,
            "The container could not be located when the pod was terminated");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    g = &sk.v[1];
    assert_int_equal(g->cls, GH_CLASS_UNKNOWN);
    assert_string_equal(g->node, "gpu-02");
    assert_string_equal(g->job, "ml/llm");
    assert_int_equal(g->impact, GH_IMPACT_DIED);
    assert_true(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_true(g->has_ckpt);
    assert_int_equal(g->ckpt_step, 10);
    assert_int_equal(g->first_ts, sk.v[0].first_ts); /* the same cause, from its start */
    assert_non_null(strstr(g->reason, "the host's doing"));
    gh_engine_free(e);
}

/* A flag's record and a pod the host failed: one follow-up (the drain that
 * waited runs, the job restarts), not one from the record and another from
 * the condition. */
static void test_flag_then_host_failure_one_followup(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-01", "FrequentContainerdRestart", GH_COND_TRUE, NULL);
    assert_int_equal(sk.n, 1);
    assert_true(got_deferred(&sk.v[0], GH_ACT_DRAIN_NODE));
    podfail(e, 50, "gpu-01", "ml/llm", "llm-1", "StartError", 128,
            "failed to create containerd task: context deadline exceeded");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    const struct got *g = &sk.v[1];
    assert_string_equal(g->rule, "node-runtime-restarting");
    assert_int_equal(g->impact, GH_IMPACT_DIED);
    assert_true(got_action(g, GH_ACT_DRAIN_NODE));
    assert_true(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    gh_engine_free(e);
}

static void test_false_unknown_and_clearing(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-01", "KernelDeadlock", GH_COND_FALSE, "KernelHasNoDeadlock");
    cond(e, 41, "gpu-02", "example.com/GpuCheck", GH_COND_UNKNOWN, "CheckTimedOut");
    assert_int_equal(sk.n, 0);
    cond(e, 42, "gpu-02", "FrequentDockerRestart", GH_COND_TRUE, NULL);
    assert_int_equal(sk.n, 1);
    assert_true(got_deferred(&sk.v[0], GH_ACT_DRAIN_NODE));
    /* Unknown: the check cannot tell; the record still waits */
    cond(e, 43, "gpu-02", "FrequentDockerRestart", GH_COND_UNKNOWN, NULL);
    /* cleared, then the job ends: the drain that waited is no longer due */
    cond(e, 300, "gpu-02", "FrequentDockerRestart", GH_COND_FALSE, "NoFrequentDockerRestart");
    job_finished(e, 400);
    assert_int_equal(sk.n, 1);
    /* raised again within the episode: the same flag flapping, one record */
    cond(e, 500, "gpu-02", "FrequentDockerRestart", GH_COND_TRUE, NULL);
    assert_int_equal(sk.n, 1);
    /* raised again long after: a new incident */
    cond(e, 500 + 3600, "gpu-02", "FrequentDockerRestart", GH_COND_FALSE, NULL);
    cond(e, 500 + 2 * 3600, "gpu-02", "FrequentDockerRestart", GH_COND_TRUE, NULL);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[1].rule, "node-runtime-restarting");
    gh_engine_free(e);
}

static void test_one_incident_per_condition(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-01", "FrequentContainerdRestart", GH_COND_TRUE, NULL);
    cond(e, 42, "gpu-01", "example.com/NvidiaGpuCheck", GH_COND_TRUE, "GpuUnhealthy");
    cond(e, 43, "gpu-01", "FrequentContainerdRestart", GH_COND_TRUE, NULL);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].rule, "node-runtime-restarting");
    assert_string_equal(sk.v[1].rule, "node-condition");
    assert_true(got_action(&sk.v[1], GH_ACT_RUN_DIAGNOSTICS)); /* the probes say more */
    assert_true(got_deferred(&sk.v[1], GH_ACT_DRAIN_NODE));
    assert_non_null(strstr(sk.v[1].reason, "(GpuUnhealthy)"));
    gh_engine_free(e);
}

/* A node returned to service with its condition still True is not taken
 * out again for the condition alone; a pod the host fails there is. */
static void test_return_stands_until_harm(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = running(&sk);
    cond(e, 41, "gpu-02", "ReadonlyFilesystem", GH_COND_TRUE, "FilesystemIsReadOnly");
    assert_int_equal(sk.n, 1);
    assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    gh_engine_node_returned(e, "gpu-02", T0 + S(100));
    cond(e, 110, "gpu-02", "ReadonlyFilesystem", GH_COND_TRUE, "FilesystemIsReadOnly");
    assert_int_equal(sk.n, 1);
    podfail(e, 120, "gpu-02", "ml/llm", "llm-3", "Error", 1,
            "OSError: [Errno 30] Read-only file system: '/ckpt/tmp'");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_true(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[1].impact, GH_IMPACT_DIED);
    gh_engine_free(e);
}

/* A condition's reason is the API server's text: however long and in
 * whatever script, the incident's reason stays valid UTF-8 (cut at a whole
 * character), or the incident could not be encoded (diagnose dropped it). */
static void test_long_reason_stays_utf8(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    char reason[402];
    reason[0] = 'x'; /* the second condition's reason: the cut one byte later */
    for (int i = 0; i < 200; i++)
        memcpy(reason + 1 + 2 * i, "\xc3\xa9", 2);
    reason[401] = '\0';
    cond(e, 1, "gpu-01", "KernelDeadlock", GH_COND_TRUE, reason + 1);
    cond(e, 2, "gpu-02", "KernelDeadlock", GH_COND_TRUE, reason);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    for (int i = 0; i < sk.n; i++)
        assert_true(gh_utf8_valid(sk.v[i].reason, strlen(sk.v[i].reason)));
    gh_engine_free(e);
}

static void test_policy_matches_condition(void **st)
{
    (void)st;
    const char *y = "version: 1\n"
                    "rules:\n"
                    "  - name: site-gpu-check\n"
                    "    match: {kind: node_condition, condition: [example.com/GpuCheck]}\n"
                    "    actions: [isolate_node, run_diagnostics]\n";
    struct gh_policy *p = NULL;
    assert_int_equal(gh_policy_parse(y, strlen(y), &p, NULL), GH_OK);
    struct gh_engine_config c;
    gh_engine_config_default(&c);
    c.reorder_window_ns = 0;
    struct sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_topology *t = topo_2x8();
    struct gh_engine *e = gh_engine_new(p, t, NULL, &c, sink_cb, &sk, NULL);
    gh_topology_free(t);
    cond(e, 1, "gpu-01", "KernelDeadlock", GH_COND_TRUE, NULL); /* no rule: dropped */
    cond(e, 2, "gpu-02", "example.com/GpuCheck", GH_COND_TRUE, NULL);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].rule, "site-gpu-check");
    assert_string_equal(sk.v[0].node, "gpu-02");
    gh_engine_free(e);
    gh_policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_waits_and_app_crash_is_not_the_node),
        cmocka_unit_test(test_cannot_run_work_isolates_host_failure_restarts),
        cmocka_unit_test(test_flag_then_host_failure_one_followup),
        cmocka_unit_test(test_false_unknown_and_clearing),
        cmocka_unit_test(test_one_incident_per_condition),
        cmocka_unit_test(test_return_stands_until_harm),
        cmocka_unit_test(test_long_reason_stays_utf8),
        cmocka_unit_test(test_policy_matches_condition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
