/* test_engine_gray2.c - gray failures, second set: a job that diverges from
 * its first steps is its own doing, corruption restarts resume before every
 * precursor and for every follow-up, stragglers judged against the job's own
 * jitter, and InfiniBand ports that keep retraining under slower
 * communication. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "test_engine_helpers.h"

static void ecc_sbe(struct gh_engine *e, double t, const char *node, int gpu, long count)
{
    struct gh_signal s = sig(GH_KIND_ECC, t, node, gpu);
    s.bits = GH_ECC_SINGLE;
    s.has_count = true;
    s.count = count;
    feed(e, s);
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

/* One step of the 2x8 job at time t, all ranks the same loss; replicas 0
 * and 1 (ranks 0 and 8) report agreeing checksums. */
static void step_all(struct gh_engine *e, double t, int64_t stp, double loss)
{
    for (int r = 0; r < 16; r++)
        step(e, t + r * 0.001, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 1000, loss);
    char v[32];
    snprintf(v, sizeof v, "%08llx", (unsigned long long)(stp * 7919));
    checksum(e, t + 0.1, "gpu-01", 0, 0, 0, stp, v);
    checksum(e, t + 0.1, "gpu-02", 0, 8, 1, stp, v);
}

static int count_cls(const struct sink *sk, enum gh_class c)
{
    int n = 0;
    for (int i = 0; i < sk->n; i++)
        n += sk->v[i].cls == c;
    return n;
}

static bool any_node_action(const struct sink *sk)
{
    for (int i = 0; i < sk->n; i++)
        if (got_action(&sk->v[i], GH_ACT_ISOLATE_NODE) || got_action(&sk->v[i], GH_ACT_DRAIN_NODE) ||
            got_action(&sk->v[i], GH_ACT_RESET_GPU))
            return true;
    return false;
}

static void test_nan_from_first_steps_is_application(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    step_all(e, 2, 1, 11.2);
    step_all(e, 4, 2, 10.9);
    step_all(e, 6, 3, NAN);
    step_all(e, 8, 4, NAN);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_APPLICATION);
    assert_string_equal(sk.v[0].node, "");
    assert_false(any_node_action(&sk));
    assert_non_null(strstr(sk.v[0].reason, "diverged"));
    gh_engine_free(e);
}

static void test_nan_right_after_restart_is_application(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 0, true);
    for (int stp = 1; stp <= 60; stp++) {
        if (stp == 40)
            checkpoint(e, stp * 2.0 - 0.5, "ml/llm", 40, true);
        step_all(e, stp * 2.0, stp, 3.0 * exp(-stp / 100.0));
    }
    /* Restarted from step 40 (with, say, a new learning rate) and diverges. */
    step_all(e, 300, 41, 2.9);
    step_all(e, 302, 42, INFINITY);
    step_all(e, 304, 43, NAN);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_APPLICATION);
    assert_false(any_node_action(&sk));
    gh_engine_free(e);
}

static void test_nan_from_start_with_ecc_storm_is_corruption(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    ecc_sbe(e, 0.3, "gpu-02", 3, 10);
    ecc_sbe(e, 0.9, "gpu-02", 3, 400);
    ecc_sbe(e, 1.5, "gpu-02", 3, 900); /* a storm, below the drain threshold */
    step_all(e, 2, 1, 11.2);
    step_all(e, 4, 2, NAN);
    step_all(e, 6, 3, NAN);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_cls(&sk, GH_CLASS_SILENT_DATA_CORRUPTION), 1);
    assert_int_equal(count_cls(&sk, GH_CLASS_APPLICATION), 0);
    gh_engine_free(e);
}

/* An ECC storm on gpu-02 starts at t=70; the loss spikes at step 50 (t=100).
 * Checkpoints at steps 30 (t=60) and 40 (t=80): the one at 40 was written
 * while the GPU was already corrupting data. */
static void test_corruption_checkpoint_precedes_hardware_precursor(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 0, true);
    ecc_sbe(e, 30, "gpu-02", 5, 2);
    for (int stp = 1; stp <= 60; stp++) {
        double t = stp * 2.0;
        if (stp == 30 || stp == 40)
            checkpoint(e, t - 0.5, "ml/llm", stp, true);
        if (stp == 35)
            ecc_sbe(e, t + 0.5, "gpu-02", 5, 40);
        if (stp == 45)
            ecc_sbe(e, t + 0.5, "gpu-02", 5, 400);
        step_all(e, t, stp, stp == 50 ? 40.0 : 3.0 * exp(-stp / 100.0));
    }
    gh_engine_finish(e, INT64_MAX);
    int k = -1;
    for (int i = 0; i < sk.n; i++)
        if (sk.v[i].cls == GH_CLASS_SILENT_DATA_CORRUPTION)
            k = i;
    assert_true(k >= 0);
    assert_true(sk.v[k].has_ckpt);
    assert_int_equal(sk.v[k].ckpt_step, 30);
    gh_engine_free(e);
}

/* A checksum disagreement blames gpu-02 at step 180 (checkpoint 100 before
 * it, 200 after it); later the diagnostics fail on gpu-01 too: that
 * follow-up's restart also resumes from 100, never from 200. */
static void test_corruption_followup_keeps_checkpoint(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 5, "ml/llm", 100, true);
    for (int stp = 101; stp <= 220; stp++) {
        double t = 10 + (stp - 101) * 2.0;
        if (stp == 200)
            checkpoint(e, t + 0.5, "ml/llm", 200, true);
        for (int rep = 0; rep < 4; rep++) {
            int rank = rep * 4;
            char v[32];
            snprintf(v, sizeof v, "%08x", stp * 7919);
            if (rep == 2 && stp >= 180)
                snprintf(v, sizeof v, "bad%05x", stp);
            checksum(e, t + rep * 0.01, rank < 8 ? "gpu-01" : "gpu-02", rank % 8, rank, rep, stp, v);
        }
    }
    struct gh_signal p = sig(GH_KIND_PROBE_RESULT, 300, "gpu-01", 6);
    sset(&p.check, "gemm_checksum");
    p.passed = false;
    sset(&p.detail, "mismatch in 1 of 1000 tiles");
    feed(e, p);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_int_equal(sk.v[0].ckpt_step, 100);
    assert_string_equal(sk.v[1].node, "gpu-01");
    assert_true(got_action(&sk.v[1], GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_true(sk.v[1].has_ckpt);
    assert_int_equal(sk.v[1].ckpt_step, 100);
    gh_engine_free(e);
}


/* Checksums of 4 replicas every 10 steps from `from` to 220 (replica 2
 * diverged from step 180 on), checkpoints at 150 and 175. */
static void verified_run(struct gh_engine *e, int from)
{
    checkpoint(e, 1, "ml/llm", 100, true);
    for (int stp = 101; stp <= 220; stp++) {
        double t = 10 + (stp - 101) * 2.0;
        if (stp == 150 || stp == 175)
            checkpoint(e, t + 0.5, "ml/llm", stp, true);
        if (stp < from || stp % 10 != 0)
            continue;
        for (int rep = 0; rep < 4; rep++) {
            int rank = rep * 4;
            char v[32];
            snprintf(v, sizeof v, "%08x", stp * 7919);
            if (rep == 2 && stp >= 180)
                snprintf(v, sizeof v, "bad%05x", stp);
            checksum(e, t + rep * 0.01, rank < 8 ? "gpu-01" : "gpu-02", rank % 8, rank, rep, stp, v);
        }
    }
}

/* The replicas agreed at step 170 and disagree at 180: checkpoint 175 was
 * saved between them (unverified: the divergence may predate it), 150 was
 * verified clean by the agreement at 170, so the restart resumes from 150. */
static void test_corruption_checkpoint_verified_by_agreeing_checksums(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    verified_run(e, 110);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_SILENT_DATA_CORRUPTION);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_true(sk.v[0].has_ckpt);
    assert_int_equal(sk.v[0].ckpt_step, 150);
    assert_non_null(strstr(sk.v[0].reason, "agreeing at step 170 verified the checkpoint of step 150"));
    gh_engine_free(e);
}

/* Checksums that first came at the disagreeing step verify nothing: the
 * latest checkpoint before the disagreement (175) is chosen, as before. */
static void test_corruption_checkpoint_unverified_without_agreement(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    verified_run(e, 180);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_true(sk.v[0].has_ckpt);
    assert_int_equal(sk.v[0].ckpt_step, 175);
    assert_null(strstr(sk.v[0].reason, "verified the checkpoint"));
    gh_engine_free(e);
}


/* Four replicas' checksums of step stp at time t, replica 2 differing when bad. */
static void checksums4(struct gh_engine *e, double t, int64_t stp, bool bad)
{
    for (int rep = 0; rep < 4; rep++) {
        int rank = rep * 4;
        char v[32];
        snprintf(v, sizeof v, "%08llx", (unsigned long long)(stp * 7919));
        if (rep == 2 && bad)
            snprintf(v, sizeof v, "bad%05llx", (unsigned long long)stp);
        checksum(e, t + rep * 0.01, rank < 8 ? "gpu-01" : "gpu-02", rank % 8, rank, rep, stp, v);
    }
}

/* The replicas agreed at step 170, then the job restarted from 100 and the
 * new run saved 150 before its checksums disagreed at 160: the old run's
 * agreement was taken before 150 was saved and verifies nothing of the new
 * run, so the restart resumes from 100 (saved before that agreement). */
static void test_corruption_agreement_before_save_verifies_nothing(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 100, true);
    for (int stp = 110; stp <= 170; stp += 10)
        checksums4(e, 10 + (stp - 100) * 2.0, stp, false);
    /* restart from 100 at t = 200 */
    checkpoint(e, 200 + 50 * 2.0 + 0.5, "ml/llm", 150, true);
    checksums4(e, 200 + 60 * 2.0, 160, true);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.v[0].cls, GH_CLASS_SILENT_DATA_CORRUPTION);
    assert_true(sk.v[0].has_ckpt);
    assert_int_equal(sk.v[0].ckpt_step, 100);
    gh_engine_free(e);
}


/* A disagreement at step 130 comes while an application incident of the job
 * is open (it explains it, nothing is reported); no checksums agreed before
 * (nothing is verified) or after, and when the disagreement is reported after that incident's
 * episode, the restart still resumes from before the first one (100), not
 * from the checkpoint saved in between (150). */
static void test_corruption_first_disagreement_held_back_bounds_checkpoint(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    checkpoint(e, 1, "ml/llm", 100, true);
    podfail(e, 30, "gpu-01", "ml/llm", "llm-0", "Error", 1, "Traceback: ValueError: bad batch");
    checksums4(e, 60, 130, true);
    checkpoint(e, 100, "ml/llm", 150, true);
    checksums4(e, 2400, 1300, true);
    gh_engine_finish(e, INT64_MAX);
    int k = -1;
    for (int i = 0; i < sk.n; i++)
        if (sk.v[i].cls == GH_CLASS_SILENT_DATA_CORRUPTION)
            k = i;
    assert_true(k >= 0);
    assert_true(sk.v[k].has_ckpt);
    assert_int_equal(sk.v[k].ckpt_step, 100);
    assert_non_null(strstr(sk.v[k].reason, "first disagreed at step 130"));
    gh_engine_free(e);
}


/* NaN at step 3 of a fresh job while that step's replica checksums are
 * still coming in and two of them already differ: not the job's doing. */
static void test_nan_at_start_with_pending_disagreement_is_corruption(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    for (int stp = 1; stp <= 5; stp++) {
        double t = stp * 2.0;
        for (int r = 0; r < 16; r++)
            step(e, t + r * 0.001, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 1000,
                 stp >= 3 ? NAN : 10.0);
        char v[32];
        snprintf(v, sizeof v, "%08x", stp * 7919);
        checksum(e, t + 0.1, "gpu-01", 0, 0, 0, stp, v);
        if (stp == 3)
            snprintf(v, sizeof v, "bad%05x", stp);
        checksum(e, t + 0.1, "gpu-02", 0, 8, 1, stp, v);
        if (stp < 3)
            checksum(e, t + 0.2, "gpu-02", 4, 12, 2, stp, v);
    }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_cls(&sk, GH_CLASS_APPLICATION), 0);
    assert_true(count_cls(&sk, GH_CLASS_SILENT_DATA_CORRUPTION) >= 1);
    gh_engine_free(e);
}

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
        cmocka_unit_test(test_nan_from_first_steps_is_application),
        cmocka_unit_test(test_nan_right_after_restart_is_application),
        cmocka_unit_test(test_nan_from_start_with_ecc_storm_is_corruption),
        cmocka_unit_test(test_nan_at_start_with_pending_disagreement_is_corruption),
        cmocka_unit_test(test_corruption_checkpoint_precedes_hardware_precursor),
        cmocka_unit_test(test_corruption_followup_keeps_checkpoint),
        cmocka_unit_test(test_corruption_checkpoint_verified_by_agreeing_checksums),
        cmocka_unit_test(test_corruption_checkpoint_unverified_without_agreement),
        cmocka_unit_test(test_corruption_agreement_before_save_verifies_nothing),
        cmocka_unit_test(test_corruption_first_disagreement_held_back_bounds_checkpoint),
        cmocka_unit_test(test_straggler_six_percent_in_quiet_job),
        cmocka_unit_test(test_straggler_jitter_threshold_no_false_alarm),
        cmocka_unit_test(test_retraining_port_slower_comm_is_network),
        cmocka_unit_test(test_retraining_port_needs_measured_slowdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
