/* test_engine_slowdown.c - slowdowns judged against the job's own noise:
 * a straggler only 6% slower stands out in a quiet job while jitter alone
 * raises no alarm, and an InfiniBand port that keeps retraining is a
 * network fault only with communication measured slower. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "test_engine_helpers.h"

/* Deterministic Gaussian jitter. */
static uint64_t rng_state = 1;
static double unif(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2.0 * log(unif())) * cos(2.0 * M_PI * unif()); }

static const char *const NODES4[] = {"gpu-01", "gpu-02", "gpu-03", "gpu-04"};

static struct gh_topology *topo_4x8(void)
{
    struct gh_topology *t = gh_topology_new();
    gh_topology_add_job(t, "ml/llm", NODES4, 4, 8);
    return t;
}

/* 4 nodes x 8 GPUs for `steps` steps with relative Gaussian jitter `jitter`
 * and a fixed per-rank offset of up to +-offset; rank `slow_rank` is
 * `factor` slower from step 50 on. Returns the step of the first incident
 * (or -1). */
static int run_jitter(struct gh_engine *e, struct sink *sk, int steps, double jitter, double offset,
                      int slow_rank, double factor)
{
    rng_state = 7;
    double off[32];
    for (int r = 0; r < 32; r++)
        off[r] = offset * (2 * unif() - 1);
    int first = -1;
    for (int stp = 0; stp < steps; stp++) {
        for (int r = 0; r < 32; r++) {
            double ms = 1000 * (1 + off[r]) * (1 + jitter * gauss());
            if (r == slow_rank && stp >= 50)
                ms *= factor;
            step(e, stp * 1.1 + r * 1e-4, NODES4[r / 8], r % 8, "ml/llm", r, stp, ms, NOLOSS);
        }
        if (first < 0 && sk->n)
            first = stp;
    }
    gh_engine_finish(e, INT64_MAX);
    return first;
}

static void test_straggler_six_percent_in_quiet_job(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    int at = run_jitter(e, &sk, 200, 0.008, 0.003, 21, 1.06);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    assert_string_equal(sk.v[0].node, "gpu-03");
    assert_int_equal(sk.v[0].gpu, 5);
    assert_true(at >= 50 && at <= 80);
    assert_non_null(strstr(sk.v[0].reason, "jitter"));
    gh_engine_free(e);
}

static void test_straggler_jitter_threshold_no_false_alarm(void **st)
{
    (void)st;
    struct sink sk;
    /* Quiet and healthy, ranks a little unequal: nothing. */
    struct gh_engine *e = engine(topo_4x8(), &sk);
    run_jitter(e, &sk, 3000, 0.008, 0.01, -1, 1.0);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
    /* Noisy (3% jitter): 6% is two sigmas, not a straggler. */
    e = engine(topo_4x8(), &sk);
    run_jitter(e, &sk, 400, 0.03, 0.0, 21, 1.06);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
}

static void nic_ctr(struct gh_engine *e, double t, const char *node, const char *counter, long count)
{
    struct gh_signal s = sig(GH_KIND_NIC, t, node, -1);
    sset(&s.device, "mlx5_1");
    s.has_port = true;
    s.port = 1;
    sset(&s.counter, counter);
    s.has_count = true;
    s.count = count;
    s.state = GH_LINK_UP;
    feed(e, s);
}

/* 4 nodes x 8 GPUs, 1 s steps of which comm_ms ~150; from step 60 the ranks
 * of gpu-03 communicate `comm_factor` slower; when `retrain`, gpu-03's
 * mlx5_1 port 1 counts a link_error_recovery every 30 s from step 60 (every
 * node reads its counters each 30 s). */
static void run_comm(struct gh_engine *e, int steps, double comm_factor, bool retrain)
{
    rng_state = 11;
    long rec = 0;
    for (int stp = 0; stp < steps; stp++) {
        double t = stp * 1.0;
        for (int r = 0; r < 32; r++) {
            struct gh_signal s = sig(GH_KIND_STEP, t + r * 1e-4, NODES4[r / 8], r % 8);
            sset(&s.job, "ml/llm");
            s.has_rank = true;
            s.rank = r;
            s.has_step = true;
            s.step = stp;
            double comm = 150 * (1 + 0.02 * gauss());
            if (r / 8 == 2 && stp >= 60)
                comm *= comm_factor;
            s.step_ms = 850 * (1 + 0.005 * gauss()) + comm;
            s.has_comm_ms = true;
            s.comm_ms = comm;
            feed(e, s);
        }
        if (stp % 30 == 15)
            for (int nd = 0; nd < 4; nd++) {
                if (nd == 2 && retrain && stp >= 60)
                    rec++;
                nic_ctr(e, t + 0.5, NODES4[nd], "link_error_recovery", nd == 2 ? rec : 0);
            }
    }
    gh_engine_finish(e, INT64_MAX);
}

/* A job that ships a sample of its ranks (gpu-04's never report) has a node
 * 60% slower for 11 steps, then no telemetry at all: the job stopped. Three
 * hours later a step of the restarted job arrives. The slow steps still in
 * flight are judged STEP_WAIT (120 s) after their first report, not when
 * that step pushes them out: the incident is decided on fresh evidence, not
 * three hours later about a slowness long over. */
static void test_straggler_steps_in_flight_judged_in_time(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    for (int stp = 0; stp < 11; stp++)
        for (int r = 0; r < 24; r++)
            step(e, 100 + stp * 1.6 + r * 1e-4, NODES4[r / 8], r % 8, "ml/llm", r, stp,
                 r >= 16 ? 1600 : 1000, NOLOSS);
    double last = 100 + 10 * 1.6;
    step(e, last + 3 * 3600, "gpu-01", 0, "ml/llm", 0, 11, 1000, NOLOSS);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_STRAGGLER);
    assert_string_equal(sk.v[0].node, "gpu-03");
    assert_true(sk.v[0].decided_ts <= T0 + S(last + 121));
    gh_engine_free(e);
}

static void test_retraining_port_slower_comm_is_network(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_4x8(), &sk);
    checkpoint(e, 100, "ml/llm", 100, true);
    run_comm(e, 400, 1.10, true);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[0].node, "gpu-03");
    assert_string_equal(sk.v[0].job, "ml/llm");
    assert_string_equal(sk.v[0].rule, "network-slow-link");
    assert_true(got_action(&sk.v[0], GH_ACT_DRAIN_NODE));
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_true(got_action(&sk.v[0], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_int_equal(sk.v[0].ckpt_step, 100);
    assert_non_null(strstr(sk.v[0].reason, "with the link up"));
    gh_engine_free(e);
}

static void test_retraining_port_needs_measured_slowdown(void **st)
{
    (void)st;
    struct sink sk;
    /* Retraining, communication as fast as the other nodes': nothing. */
    struct gh_engine *e = engine(topo_4x8(), &sk);
    run_comm(e, 400, 1.0, true);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
    /* Slower communication without a cause on the node: nothing either. */
    e = engine(topo_4x8(), &sk);
    run_comm(e, 400, 1.10, false);
    assert_int_equal(sk.n, 0);
    gh_engine_free(e);
    /* Ten minutes left: the slowdown costs less than a restart: recorded only. */
    struct gh_topology *t = topo_4x8();
    gh_topology_set_job_costs(t, gh_topology_find_job(t, "ml/llm"), 600, -1);
    e = engine(t, &sk);
    run_comm(e, 400, 1.10, true);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_NETWORK);
    assert_string_equal(sk.v[0].rule, "network-slow-link-not-worth-restart");
    assert_int_equal(sk.v[0].actions[0], GH_ACT_NONE);
    gh_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straggler_six_percent_in_quiet_job),
        cmocka_unit_test(test_straggler_jitter_threshold_no_false_alarm),
        cmocka_unit_test(test_straggler_steps_in_flight_judged_in_time),
        cmocka_unit_test(test_retraining_port_slower_comm_is_network),
        cmocka_unit_test(test_retraining_port_needs_measured_slowdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
