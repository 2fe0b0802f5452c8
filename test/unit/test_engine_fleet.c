/* test_engine_fleet.c - one cause, many nodes (issue 23): a signature that
 * several nodes show at once is one shared incident that blames and acts on
 * none of them (with labels, it names the component); the breaker stops a
 * rule that would take too many nodes out; the line's own "Non-fatal"
 * outweighs the catalog; a job whose steps keep coming is not harmed; a
 * second fault on another GPU is its own incident; a checkpoint reported
 * failed after it was saved is no restart point. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_engine_helpers.h"

#define NODES 12

static const char *name(int i)
{
    static char names[NODES][16];
    snprintf(names[i], sizeof names[i], "node-%02d", i);
    return names[i];
}

/* NODES nodes running job ml/llm (8 ranks each); with labels, nodes 0-5
 * under leaf leaf-a and 6-11 under leaf-b, two racks of 6. */
static struct gh_topology *fleet(bool labels)
{
    struct gh_topology *t = gh_topology_new();
    const char *nodes[NODES];
    for (int i = 0; i < NODES; i++)
        nodes[i] = name(i);
    gh_topology_add_job(t, "ml/llm", nodes, NODES, 8);
    for (int i = 0; labels && i < NODES; i++) {
        const char *keys[] = {"example.com/ib-leaf-rail2", "example.com/rack",
                              "kubernetes.io/hostname"};
        const char *values[] = {i < 6 ? "leaf-a" : "leaf-b", i < 6 ? "r1" : "r2", name(i)};
        assert_int_equal(gh_topology_set_node_labels(t, name(i), keys, values, 3), GH_OK);
    }
    return t;
}

/* One step of the job (rank 0 of each node reports) at time t. */
static void steps_at(struct gh_engine *e, double t, int64_t stepno)
{
    for (int i = 0; i < NODES; i++)
        step(e, t + i * 1e-3, name(i), 0, "ml/llm", i * 8, stepno, 1000, NOLOSS);
}

static void nic(struct gh_engine *e, double t, const char *node, const char *dev, bool down)
{
    struct gh_signal s = sig(GH_KIND_NIC, t, node, -1);
    sset(&s.device, dev);
    s.has_port = true;
    s.port = 1;
    s.state = down ? GH_LINK_DOWN : GH_LINK_UP;
    sset(&s.counter, "link_downed");
    s.has_count = true;
    s.count = 1;
    feed(e, s);
}

static int shared(const struct sink *sk)
{
    int n = 0;
    for (int i = 0; i < sk->n; i++)
        n += strcmp(sk->v[i].rule, "shared-cause") == 0;
    return n;
}

static bool acts_on_node(const struct got *g)
{
    return got_action(g, GH_ACT_ISOLATE_NODE) || got_action(g, GH_ACT_DRAIN_NODE) ||
           got_action(g, GH_ACT_RESET_GPU) || got_action(g, GH_ACT_REBOOT_NODE) ||
           got_action(g, GH_ACT_REPLACE_NODE);
}

/* A leaf switch reboots: one rail down on 6 nodes within a second, up 3
 * minutes later, while NCCL trains on over the other rails. */
static void leaf_switch(bool labels, struct sink *sk)
{
    struct gh_engine *e = engine(fleet(labels), sk);
    checkpoint(e, 1, "ml/llm", 90, true);
    int64_t st = 100;
    for (double t = 0; t < 400; t += 2)
        steps_at(e, t, st++);
    for (int i = 0; i < 6; i++)
        nic(e, 200 + 0.1 * i, name(i), "mlx5_2", true);
    for (int i = 0; i < 6; i++)
        nic(e, 380 + 0.1 * i, name(i), "mlx5_2", false);
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
}

static void test_leaf_switch_is_one_shared_cause(void **state)
{
    (void)state;
    struct sink sk;
    leaf_switch(false, &sk);
    assert_int_equal(sk.n, 1);
    assert_int_equal(shared(&sk), 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[0].node, "");
    assert_false(acts_on_node(&sk.v[0]));
    /* the job kept stepping: nothing restarts */
    assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_non_null(strstr(sk.v[0].reason, "on 6 nodes"));
    assert_non_null(strstr(sk.v[0].reason, "scope switch"));
}

static void test_leaf_switch_named_by_labels(void **state)
{
    (void)state;
    struct sink sk;
    leaf_switch(true, &sk);
    assert_int_equal(sk.n, 1);
    /* the rack and the leaf both join the six: the rack is more specific
     * than the switch, but the rail's label says switch and the rack's
     * nodes are the same six, so either names it; the reason says which */
    assert_non_null(strstr(sk.v[0].reason, "example.com/"));
}

/* A condition set on 12 nodes within 6 s: the first node waits 1 s for
 * others, those that follow wait the hold, the third makes it shared: no
 * node isolated, one incident naming all 12. */
static void test_condition_rollout_isolates_none(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    int64_t st = 100;
    for (double t = 0; t < 60; t += 2)
        steps_at(e, t, st++);
    for (int i = 0; i < NODES; i++) {
        struct gh_signal s = sig(GH_KIND_NODE_CONDITION, 60 + 0.5 * i, name(i), -1);
        s.source = GH_SRC_KUBE;
        sset(&s.condition, "KernelDeadlock");
        sset(&s.reason, "DockerHung");
        s.cond_status = GH_COND_TRUE;
        feed(e, s);
    }
    gh_engine_finish(e, INT64_MAX);
    int isolated = 0;
    for (int i = 0; i < sk.n; i++)
        isolated += sk.v[i].node[0] && got_action(&sk.v[i], GH_ACT_ISOLATE_NODE);
    assert_int_equal(isolated, 0);
    assert_int_equal(shared(&sk), 1);
    assert_int_equal(sk.n, 1);
    assert_non_null(strstr(sk.v[0].reason, "on 12 nodes"));
    gh_engine_free(e);
}

/* XID 79 (a GPU's own fatal fault) on five nodes within minutes: the
 * first three are isolated, then the breaker stops the rule. */
static void test_breaker_stops_a_rule_taking_many_nodes(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    checkpoint(e, 1, "ml/llm", 90, true);
    for (int i = 0; i < 5; i++)
        xid(e, 100 + 20 * i, name(i), i, 79);
    gh_engine_finish(e, INT64_MAX);
    int isolated = 0;
    for (int i = 0; i < sk.n; i++)
        isolated += sk.v[i].node[0] && acts_on_node(&sk.v[i]);
    assert_int_equal(isolated, 3);
    assert_int_equal(shared(&sk), 1);
    assert_int_equal(sk.n, 4);
    assert_non_null(strstr(sk.v[3].reason, "breaker"));
    assert_false(acts_on_node(&sk.v[3]));
    gh_engine_free(e);
}

/* An NVLink5 XID whose line says Nonfatal under a healthy job: low, only
 * when it repeats; no reset. The same code said Fatal acts. */
static void test_stated_nonfatal_nvlink_xid_does_not_reset(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    struct gh_signal s = sig(GH_KIND_XID, 100, name(3), 2);
    s.code = 149;
    sset(&s.msg, "NVRM: Xid (PCI:0000:1b:00): 149, Nonfatal error detected on link 7");
    feed(e, s);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);

    e = engine(fleet(false), &sk);
    s = sig(GH_KIND_XID, 100, name(3), 2);
    s.code = 149;
    sset(&s.msg, "NVRM: Xid (PCI:0000:1b:00): 149, Fatal error detected on link 7");
    feed(e, s);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_true(got_action(&sk.v[0], GH_ACT_RESET_GPU));
    gh_engine_free(e);
}

/* One node's rail dies while NCCL trains on over the others: its steps
 * keep coming, so the job is not restarted and the node waits. */
static void test_dead_link_with_progress_restarts_nothing(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    checkpoint(e, 1, "ml/llm", 90, true);
    int64_t st = 100;
    for (double t = 0; t < 400; t += 2) {
        steps_at(e, t, st++);
        if (t == 200)
            nic(e, 200.5, name(4), "mlx5_1", true);
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].node, name(4));
    assert_false(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_int_equal(sk.v[0].impact, GH_IMPACT_NONE);
    assert_non_null(strstr(sk.v[0].reason, "steps kept coming"));
    gh_engine_free(e);
}

/* XID 79 on GPU 0, then a double-bit ECC error on GPU 3 a quarter of an
 * hour later: two incidents, the second not restarting the job again (the
 * first restarted it away from the node). */
static void test_second_fault_is_its_own_incident(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    checkpoint(e, 1, "ml/llm", 90, true);
    xid(e, 70, name(1), 0, 79);
    xid(e, 70 + 900, name(1), 3, 48);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[1].gpu, 3);
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_false(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    gh_engine_free(e);
}

/* A checkpoint reported failed after it was saved, even after the fault,
 * is no restart point (later reports win). */
static void test_failed_checkpoint_is_no_restart_point(void **state)
{
    (void)state;
    struct sink sk;
    struct gh_engine *e = engine(fleet(false), &sk);
    checkpoint(e, 1, "ml/llm", 90, true);
    checkpoint(e, 50, "ml/llm", 95, true);
    xid(e, 70, name(1), 0, 48);
    checkpoint(e, 80, "ml/llm", 95, false);
    xid(e, 90, name(2), 1, 79); /* decided after the failed report */
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_int_equal(sk.v[0].ckpt_step, 95); /* the failure was not known yet */
    assert_true(sk.v[1].has_ckpt);
    assert_int_equal(sk.v[1].ckpt_step, 90);
    gh_engine_free(e);
}

/* What joined incidents already decided (gh_engine_set_joined). */
struct joins {
    int n;
    struct {
        char id[32], node[64];
        enum gh_kind kind;
        int code;
        int64_t ts;
    } v[256];
};

static void joined_cb(void *ctx, const char *id, const char *node,
                      const struct gh_tl_entry *const *ev, size_t n)
{
    struct joins *j = ctx;
    for (size_t i = 0; i < n && j->n < 256; i++) {
        snprintf(j->v[j->n].id, sizeof j->v[j->n].id, "%s", id);
        snprintf(j->v[j->n].node, sizeof j->v[j->n].node, "%s", node ? node : "");
        j->v[j->n].kind = ev[i]->sig.kind;
        j->v[j->n].code = ev[i]->sig.code;
        j->v[j->n].ts = ev[i]->sig.ts_ns;
        j->n++;
    }
}

/* A second XID 79 on the same GPU a minute after the first: one incident,
 * and the second signal is reported as joining it, with its id. */
static void test_second_xid_joins_node_incident(void **state)
{
    (void)state;
    struct sink sk;
    struct joins jn;
    memset(&jn, 0, sizeof jn);
    struct gh_engine *e = engine(fleet(false), &sk);
    gh_engine_set_joined(e, joined_cb, &jn);
    checkpoint(e, 1, "ml/llm", 90, true);
    xid(e, 70, name(1), 0, 79);
    xid(e, 130, name(1), 0, 79);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    bool found = false;
    for (int i = 0; i < jn.n; i++) {
        assert_string_equal(jn.v[i].id, sk.v[0].id);
        found |= jn.v[i].ts == T0 + S(130) && jn.v[i].code == 79 &&
                 strcmp(jn.v[i].node, name(1)) == 0;
    }
    assert_true(found);
    gh_engine_free(e);
}

/* XID 79 on all 12 nodes 0.2 s apart (the chaos storm of kube/chaos_short):
 * the first three are their own incidents, the fourth trips the breaker
 * into one shared cause (affected_nodes 4); every later node's XID joins
 * that incident and is reported with its id (before: nothing said so). */
static void test_late_nodes_join_shared_cause(void **state)
{
    (void)state;
    struct sink sk;
    struct joins jn;
    memset(&jn, 0, sizeof jn);
    struct gh_engine *e = engine(fleet(false), &sk);
    gh_engine_set_joined(e, joined_cb, &jn);
    checkpoint(e, 1, "ml/llm", 90, true);
    for (int i = 0; i < NODES; i++)
        xid(e, 70 + 0.2 * i, name(i), 0, 79);
    gh_engine_finish(e, INT64_MAX);
    int sh = -1;
    for (int i = 0; i < sk.n; i++)
        if (strcmp(sk.v[i].rule, "shared-cause") == 0 && sh < 0)
            sh = i;
    assert_true(sh >= 0);
    int joined_nodes = 0;

    for (int i = 0; i < NODES; i++) {
        char want[32];
        snprintf(want, sizeof want, "%s,", name(i));
        bool in_ev = false, in_join = false;
        for (int k = 0; k < sk.n; k++)
            in_ev |= strstr(sk.v[k].ev_nodes, want) != NULL;
        for (int k = 0; k < jn.n; k++)
            if (strcmp(jn.v[k].node, name(i)) == 0 && jn.v[k].code == 79) {
                in_join = true;
                assert_string_equal(jn.v[k].id, sk.v[sh].id);
            }
        if (!in_ev)
            assert_true(in_join);
        joined_nodes += in_join && !in_ev;
    }
    assert_true(joined_nodes > 0); /* the storm outran the record */
    gh_engine_free(e);
}

/* No callback set: decisions are the same as with one. */
static void test_joined_callback_changes_nothing(void **state)
{
    (void)state;
    struct sink a, b;
    struct joins jn;
    memset(&jn, 0, sizeof jn);
    for (int pass = 0; pass < 2; pass++) {
        struct sink *sk = pass ? &b : &a;
        struct gh_engine *e = engine(fleet(false), sk);
        if (pass)
            gh_engine_set_joined(e, joined_cb, &jn);
        checkpoint(e, 1, "ml/llm", 90, true);
        for (int i = 0; i < NODES; i++)
            xid(e, 70 + 0.2 * i, name(i), 0, 79);
        gh_engine_finish(e, INT64_MAX);
        gh_engine_free(e);
    }
    assert_int_equal(a.n, b.n);
    for (int i = 0; i < a.n; i++) {
        assert_string_equal(a.v[i].id, b.v[i].id);
        assert_string_equal(a.v[i].reason, b.v[i].reason);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaf_switch_is_one_shared_cause),
        cmocka_unit_test(test_leaf_switch_named_by_labels),
        cmocka_unit_test(test_condition_rollout_isolates_none),
        cmocka_unit_test(test_breaker_stops_a_rule_taking_many_nodes),
        cmocka_unit_test(test_stated_nonfatal_nvlink_xid_does_not_reset),
        cmocka_unit_test(test_dead_link_with_progress_restarts_nothing),
        cmocka_unit_test(test_second_fault_is_its_own_incident),
        cmocka_unit_test(test_failed_checkpoint_is_no_restart_point),
        cmocka_unit_test(test_second_xid_joins_node_incident),
        cmocka_unit_test(test_late_nodes_join_shared_cause),
        cmocka_unit_test(test_joined_callback_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
