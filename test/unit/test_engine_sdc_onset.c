/* test_engine_sdc_onset.c - loss anomalies at a job's start and silent data
 * corruption's checkpoint: a job that diverges from its first steps (or
 * right after a restart) is its own doing, unless hardware evidence or
 * disagreeing replica checksums say corruption; a corruption restart
 * resumes before every hardware precursor, from a checkpoint agreeing
 * checksums verified (taken after it was saved, of a step at or after its
 * own, never across a restart), and its follow-ups keep that checkpoint. */
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

/* Rank 9 (gpu-02) alone reports a loss spike at step 130: suspected
 * corruption, resume from 120, gpu-02 stays in the job. The restarted job
 * runs 36 min (past the 30 min episode) with agreeing checksums, then the
 * replica of `bad_rank` diverges at step 1200. */
static void suspect_run(struct gh_engine *e, int bad_rank)
{
    static const int loss_ranks[] = {0, 4, 9, 12};
    checkpoint(e, 5, "ml/llm", 100, true);
    for (int stp = 101; stp <= 130; stp++) {
        double t = 10 + (stp - 101) * 2.0;
        if (stp == 120)
            checkpoint(e, t + 0.5, "ml/llm", 120, true);
        for (int i = 0; i < 4; i++) {
            int r = loss_ranks[i];
            step(e, t + i * 0.01, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 2000,
                 stp == 130 && r == 9 ? 40.0 : 2.0 + 0.01 * (stp % 3));
        }
    }
    double t1 = 10 + 29 * 2.0 + 120;
    for (int stp = 121; stp <= 1200; stp++) {
        double t = t1 + (stp - 121) * 2.0;
        for (int i = 0; i < 4; i++) {
            int r = loss_ranks[i];
            step(e, t + i * 0.01, r < 8 ? "gpu-01" : "gpu-02", r % 8, "ml/llm", r, stp, 2000,
                 2.0 + 0.01 * (stp % 3));
        }
        if (stp % 100 == 0)
            checkpoint(e, t + 0.5, "ml/llm", stp, true);
        if (stp % 10 != 0)
            continue;
        for (int rep = 0; rep < 4; rep++) {
            int rank = rep * 4;
            char v[32];
            snprintf(v, sizeof v, "%08x", stp * 7919);
            if (rank == bad_rank && stp == 1200)
                snprintf(v, sizeof v, "bad%05x", stp);
            checksum(e, t + 1 + rep * 0.01, rank < 8 ? "gpu-01" : "gpu-02", rank % 8, rank, rep, stp,
                     v);
        }
    }
}

/* The same node's replica diverges: the bad GPU computed wrong since its
 * spike, so resume from 120 (before it), not from 1100. */
static void test_corruption_of_kept_suspect_resumes_before_its_first_anomaly(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    suspect_run(e, 8);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[0].node, "gpu-02");
    assert_false(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    assert_int_equal(sk.v[0].ckpt_step, 120);
    assert_string_equal(sk.v[1].node, "gpu-02");
    assert_true(got_action(&sk.v[1], GH_ACT_ISOLATE_NODE));
    assert_true(sk.v[1].has_ckpt);
    assert_int_equal(sk.v[1].ckpt_step, 120);
    assert_non_null(strstr(sk.v[1].reason, "gpu-02 was already suspected of corruption"));
    gh_engine_free(e);
}

/* Another node's replica diverges: a new fault, the checkpoint the
 * agreement at 1190 verified (1100). */
static void test_corruption_of_other_node_ignores_kept_suspect(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(topo_2x8(), &sk);
    suspect_run(e, 4);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.v[1].node, "gpu-01");
    assert_int_equal(sk.v[1].ckpt_step, 1100);
    assert_null(strstr(sk.v[1].reason, "suspected of corruption then"));
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
        cmocka_unit_test(test_corruption_of_kept_suspect_resumes_before_its_first_anomaly),
        cmocka_unit_test(test_corruption_of_other_node_ignores_kept_suspect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
