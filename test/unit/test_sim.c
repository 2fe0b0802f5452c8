/* test_sim.c - the simulator: its PRNG and event queue, Young/Daly against
 * the worked example of reliability-numbers.md, the validation (memoryless
 * hard failures only: simulated ETTR within 0.5% of Daly's model), exact
 * reproduction from a seed, GPU-time accounting that adds up, the policies
 * in their expected order, and gray failures reaching the real engine. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/daly.h"
#include "sim/evq.h"
#include "sim/rng.h"
#include "sim/sim.h"
#include "sim/svg.h"

static void test_rng(void **st)
{
    (void)st;
    struct gh_rng a, b;
    gh_rng_seed(&a, 42, 0);
    gh_rng_seed(&b, 42, 0);
    for (int i = 0; i < 1000; i++)
        assert_true(gh_rng_u64(&a) == gh_rng_u64(&b));
    gh_rng_seed(&b, 42, 1);
    assert_true(gh_rng_u64(&a) != gh_rng_u64(&b));
    double sum = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = gh_rng_exp(&a, 2.0);
        assert_true(x >= 0);
        sum += x;
        uint64_t k = gh_rng_below(&a, 7);
        assert_true(k < 7);
        double u = gh_rng_unit(&a);
        assert_true(u > 0 && u < 1);
        double l = gh_rng_loguniform(&a, 1.1, 3.04);
        assert_true(l >= 1.1 && l <= 3.04);
    }
    assert_true(fabs(sum / n - 0.5) < 0.005);
    assert_true(isinf(gh_rng_exp(&a, 0)));
}

static void test_evq_order(void **st)
{
    (void)st;
    struct gh_evq *q = gh_evq_new(1000);
    assert_non_null(q);
    struct gh_rng r;
    gh_rng_seed(&r, 1, 0);
    for (int i = 0; i < 500; i++) {
        struct gh_ev e = {.t = (double)gh_rng_below(&r, 50), .a = i};
        assert_int_equal(gh_evq_push(q, &e), GH_OK);
    }
    struct gh_ev prev = {.t = -1, .a = -1}, e;
    int n = 0;
    while (gh_evq_pop(q, &e)) {
        assert_true(e.t > prev.t || (e.t == prev.t && e.a > prev.a)); /* FIFO at equal times */
        prev = e;
        n++;
    }
    assert_int_equal(n, 500);
    gh_evq_free(q);
    q = gh_evq_new(2);
    struct gh_ev x = {.t = 1};
    assert_int_equal(gh_evq_push(q, &x), GH_OK);
    assert_int_equal(gh_evq_push(q, &x), GH_OK);
    assert_int_equal(gh_evq_push(q, &x), GH_ELIMIT);
    gh_evq_free(q);
}

/* reliability-numbers.md section 4.2: scenario A (M = 185.6 min) and B (108.2 min). */
static void test_daly_worked_example(void **st)
{
    (void)st;
    double a = 185.6 * 60, b = 108.2 * 60;
    assert_true(fabs(gh_daly_young(a, 60) / 60 - 19.3) < 0.05);
    assert_true(fabs(gh_daly_optimum(a, 60) / 60 - 18.6) < 0.05);
    assert_true(fabs(gh_daly_young(a, 300) / 60 - 43.1) < 0.05);
    assert_true(fabs(gh_daly_optimum(a, 300) / 60 - 39.8) < 0.05);
    assert_true(fabs(gh_daly_young(b, 300) / 60 - 32.9) < 0.05);
    assert_true(fabs(gh_daly_optimum(b, 300) / 60 - 29.6) < 0.05);
    assert_true(fabs(gh_daly_ettr(a, gh_daly_optimum(a, 60), 60, 600) - 0.853) < 0.0015);
    assert_true(fabs(gh_daly_ettr(a, gh_daly_optimum(a, 60), 60, 120) - 0.890) < 0.0015);
    assert_true(fabs(gh_daly_ettr(b, gh_daly_optimum(b, 300), 300, 600) - 0.662) < 0.0015);
    assert_true(fabs(gh_daly_ettr(b, gh_daly_optimum(b, 0.6), 0.6, 120) - 0.968) < 0.0015);
    /* Daly's published optima for delta = 5 min: M = 24 h -> 116.7 min, 6 h -> 56.7, 15 min -> 9.14. */
    assert_true(fabs(gh_daly_optimum(86400, 300) / 60 - 116.7) < 0.1);
    assert_true(fabs(gh_daly_optimum(21600, 300) / 60 - 56.7) < 0.1);
    assert_true(fabs(gh_daly_optimum(900, 300) / 60 - 9.14) < 0.02);
    assert_true(gh_daly_optimum(100, 300) == 100); /* stall >= 2M */
    assert_true(isnan(gh_daly_young(0, 60)));
    assert_true(isnan(gh_daly_ettr(100, 0, 1, 1)));
}

/* Runs per interval of the Daly validation: the full 120 in
 * unit/test_sim_release (this file built -O2 without sanitizers against an
 * unsanitized copy of the engine and simulator: CMakeLists.txt), with the
 * three intervals; under ASan+UBSan, where the same path is checked for
 * memory errors, 30 runs at the optimum only. */
#ifndef GH_SIM_DALY_RUNS
#define GH_SIM_DALY_RUNS 30
#endif

static void hard_only(struct gh_sim_config *c)
{
    gh_sim_config_default(c);
    c->class_mask = 1u << GH_SIM_GPU_HARD;
    c->replace_fraction = 0; /* memoryless: every repair fixes the node */
    c->spare_fraction = 0.1;
    /* A small cluster at a high rate: the MTBF of a 16k-GPU job at 6x the
     * Llama 3 GPU rate (68 min), at an eighth of the cost per failure. */
    c->gpus = 2048;
    c->rate_scale = 48;
    c->days = 30;
    c->report_s = 0; /* no step telemetry: Daly's model has none, and it ships no fault */
}

/* The acceptance test of the model: with memoryless hard failures decided
 * by the real engine in seconds, the simulated ETTR agrees with Daly's
 * complete model (R = restart + detection + decision) within 0.5%, at the
 * optimum and away from it. */
static void test_daly_validation(void **st)
{
    (void)st;
#ifdef GH_SIM_RELEASE
    const double taus[] = {0, 300, 1200};
#else
    const double taus[] = {0}; /* the optimum; all three in test_sim_release */
#endif
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        struct gh_sim_config c;
        hard_only(&c);
        c.ckpt_interval_s = taus[i];
        struct gh_sim_result r;
        struct gh_err err;
        assert_int_equal(gh_sim_run(&c, NULL, 7, GH_SIM_DALY_RUNS, &r, &err), GH_OK);
        double rel = (r.ettr - r.daly_ettr) / r.daly_ettr;
        print_message("tau %.0f s: simulated ETTR %.4f +/- %.4f, Daly %.4f, %+.3f%%, %.0f interruptions/run\n",
                      r.checkpoint_interval_s, r.ettr, r.ettr_stderr, r.daly_ettr, 100 * rel,
                      r.interruptions_total);
        assert_true(fabs(rel) < 0.005);
        assert_true(r.interruptions_total > 500);
        assert_true(r.late_signals == 0);
        assert_true(r.false_isolations == 0);
    }
}

static void test_seed_reproduces(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    c.days = 6;
    c.rate_scale = 3;
    struct gh_sim_result a, b, d;
    struct gh_err err;
    assert_int_equal(gh_sim_run(&c, NULL, 11, 2, &a, &err), GH_OK);
    assert_int_equal(gh_sim_run(&c, NULL, 11, 2, &b, &err), GH_OK);
    assert_memory_equal(&a, &b, offsetof(struct gh_sim_result, runs)); /* every figure */
    assert_int_equal(a.runs, b.runs);
    assert_int_equal(gh_sim_run(&c, NULL, 12, 2, &d, &err), GH_OK);
    assert_true(a.ettr != d.ettr);
}

/* Productive plus wasted GPU-hours is every job GPU-hour, under each policy. */
static void test_accounting(void **st)
{
    (void)st;
    const char *names[] = {"k8s-default", "xid-only", "gpuheal"};
    for (int p = 0; p < 3; p++) {
        struct gh_sim_config c;
        assert_int_equal(gh_sim_preset("rsc1", &c, NULL), GH_OK);
        c.days = 8;
        c.rate_scale = 2;
        c.rate[GH_SIM_STRAGGLER] *= 20;
        struct gh_policy *pol;
        assert_int_equal(gh_sim_policy_new(names[p], &pol, NULL), GH_OK);
        struct gh_sim_result r;
        struct gh_err err;
        assert_int_equal(gh_sim_run(&c, pol, 3, 1, &r, &err), GH_OK);
        gh_policy_free(pol);
        double sum = r.productive_gpu_hours;
        for (int w = 0; w < GH_SIM_W__COUNT; w++) {
            assert_true(r.wasted_gpu_hours[w] >= -1e-6);
            sum += r.wasted_gpu_hours[w];
        }
        assert_true(fabs(sum - r.job_gpu_hours) < 1e-6 * r.job_gpu_hours);
        assert_true(fabs(r.job_gpu_hours - 16384.0 * 8 * 24) < 1e-6 * r.job_gpu_hours);
        assert_true(r.ettr > 0.3 && r.ettr < 1);
        assert_true(r.goodput < r.ettr);
        assert_true(r.jobs_completed > 0);
        assert_true(r.late_signals == 0);
    }
}

static void run_policy(const struct gh_sim_config *c, const char *name, int runs,
                       struct gh_sim_result *r)
{
    struct gh_policy *pol;
    assert_int_equal(gh_sim_policy_new(name, &pol, NULL), GH_OK);
    struct gh_err err;
    assert_int_equal(gh_sim_run(c, pol, 5, runs, r, &err), GH_OK);
    gh_policy_free(pol);
    print_message("%-12s ETTR %.4f goodput %.4f interruptions %.1f MTTR %.0f s isolations %.1f "
                  "(false %.1f, people %.1f) incidents %.0f\n",
                  name, r->ettr, r->goodput, r->interruptions_total, r->mttr_s, r->isolations,
                  r->false_isolations, r->human_isolations, r->incidents);
}

static void test_policies_ordered(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    c.days = 8;
    c.rate_scale = 3;
    /* The node-level classes: what the correlated processes cost each
     * policy is test_sim_correlated's. */
    c.class_mask &= ~(uint32_t)GH_SIM_CORRELATED_MASK;
    struct gh_sim_result k8s, xid, gh;
    run_policy(&c, "k8s-default", 2, &k8s);
    run_policy(&c, "xid-only", 2, &xid);
    run_policy(&c, "gpuheal", 2, &gh);
    assert_true(gh.ettr > xid.ettr);
    assert_true(xid.ettr > k8s.ettr);
    assert_true(gh.mttr_s < xid.mttr_s && xid.mttr_s < k8s.mttr_s);
    /* No rule acts (the engine still names a shared cause, acting on nothing). */
    assert_true(k8s.isolations == k8s.human_isolations);
    assert_true(k8s.human_isolations > 0);
    assert_true(gh.human_isolations < k8s.human_isolations / 4);
    assert_true(gh.false_isolations <= 0.05 * gh.isolations + 1);
    assert_true(gh.late_signals == 0 && xid.late_signals == 0);
}

static void test_stragglers_evicted(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    c.class_mask = (1u << GH_SIM_STRAGGLER) | (1u << GH_SIM_SOFTWARE);
    c.rate[GH_SIM_STRAGGLER] *= 40;
    c.days = 4;
    struct gh_sim_result k8s, gh;
    run_policy(&c, "k8s-default", 1, &k8s);
    run_policy(&c, "gpuheal", 1, &gh);
    assert_true(gh.isolations > 0);
    assert_true(gh.interruptions[GH_SIM_STRAGGLER] > 0);
    assert_true(k8s.interruptions[GH_SIM_STRAGGLER] == 0);
    assert_true(gh.wasted_gpu_hours[GH_SIM_W_SLOWDOWN] < k8s.wasted_gpu_hours[GH_SIM_W_SLOWDOWN] / 4);
    assert_true(gh.ettr > k8s.ettr);
}

static void test_sdc_detected(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    c.class_mask = (1u << GH_SIM_SDC) | (1u << GH_SIM_SOFTWARE);
    c.rate[GH_SIM_SDC] *= 20;
    c.days = 10;
    struct gh_sim_result xid, gh;
    run_policy(&c, "xid-only", 2, &xid);
    run_policy(&c, "gpuheal", 2, &gh);
    assert_true(gh.isolations > gh.human_isolations); /* the engine found most of them */
    assert_true(xid.human_isolations == xid.isolations && xid.isolations > 0);
    assert_true(gh.wasted_by_class_gpu_hours[GH_SIM_SDC] < xid.wasted_by_class_gpu_hours[GH_SIM_SDC]);
}

/* Corruption (20x the Llama 3 rate) and software faults only, 10 days of
 * the default cluster, a 5 s stall and a 120 s restart; the bad replica
 * diverges after silent_s on average, checksums compared every check_s. */
static void sdc_config(struct gh_sim_config *c, double silent_s, double check_s)
{
    gh_sim_config_default(c);
    c->class_mask = (1u << GH_SIM_SDC) | (1u << GH_SIM_SOFTWARE);
    c->rate[GH_SIM_SDC] *= 20;
    c->days = 10;
    c->ckpt_stall_s = 5;
    c->restart_s = 120;
    c->sdc_silent_s = silent_s;
    c->sdc_check_s = check_s;
}

/* The job ships every replica-checksum comparison (every 600 s, longer
 * than the 313 s checkpoint interval) and a bad replica diverges at once:
 * the engine resumes from a checkpoint the agreeing checksums verified, so
 * no restart restores corrupt state and no person has to roll back (with
 * "the latest checkpoint before the disagreement" about half of them did).
 * The rolled-back work is split by class and bucket, adding up. */
static void test_sdc_verified_checkpoint(void **st)
{
    (void)st;
    struct gh_sim_config c;
    sdc_config(&c, 0, 600);
    struct gh_sim_result gh;
    run_policy(&c, "gpuheal", 2, &gh);
    assert_true(gh.interruptions[GH_SIM_SDC] >= 2);
    assert_true(gh.human_rollbacks == 0);
    for (int k = 0; k < GH_SIM_CLASS__COUNT; k++) {
        double sum = 0;
        for (int w = 0; w < GH_SIM_W__COUNT; w++)
            sum += gh.wasted_class_bucket_gpu_hours[k][w];
        assert_true(fabs(sum - gh.wasted_by_class_gpu_hours[k]) <= 1e-6 * (1 + sum));
    }
}

/* A bad GPU computes wrong for 40 min on average before its replica
 * diverges, and every corruption shows at once as a loss spike on its rank:
 * the spike restarts the job from before it (diagnostics, node kept), and
 * the divergence, usually past the 30 min episode, resumes from before the
 * spike too (the kept suspect), so people roll back at most a quarter as
 * often as without the spikes. */
static void test_sdc_loss_spike_kept_suspect(void **st)
{
    (void)st;
    struct gh_sim_config c;
    sdc_config(&c, 2400, 300);
    c.gpus = 2048; /* a smaller job at 8x the rate: as many corruptions, an eighth of the cost */
    c.rate[GH_SIM_SDC] *= 8;
    c.sdc_spike = 1;
    struct gh_sim_result spike, none;
    run_policy(&c, "gpuheal", 2, &spike);
    c.sdc_spike = 0;
    run_policy(&c, "gpuheal", 2, &none);
    assert_true(spike.interruptions[GH_SIM_SDC] >= 4);
    fprintf(stderr, "rolled back by people: %.2f with spikes, %.2f without\n",
            spike.human_rollbacks, none.human_rollbacks);
    /* Spikes within a restart's first reports go unjudged (no loss history
     * yet): those few still need a person. */
    assert_true(spike.human_rollbacks * 4 <= none.human_rollbacks);
    assert_true(spike.wasted_by_class_gpu_hours[GH_SIM_SDC] <
                none.wasted_by_class_gpu_hours[GH_SIM_SDC]);
}

static void test_flapping_caught(void **st)
{
    (void)st;
    struct gh_sim_config c;
    assert_int_equal(gh_sim_preset("rsc1", &c, NULL), GH_OK);
    c.class_mask = (1u << GH_SIM_FLAPPING) | (1u << GH_SIM_SOFTWARE);
    c.days = 10;
    struct gh_sim_result k8s, gh;
    run_policy(&c, "k8s-default", 1, &k8s);
    run_policy(&c, "gpuheal", 1, &gh);
    assert_true(gh.isolations > 0);
    assert_true(gh.false_isolations == 0);
    assert_true(gh.interruptions[GH_SIM_FLAPPING] < k8s.interruptions[GH_SIM_FLAPPING]);
}

/* Benign link flaps only, dense enough that a node's second flap (on
 * another of its NICs, drawn afresh) often begins before its first has come
 * back up: each port's "up" is reported on that port, so no port stays
 * "down" for the engine and nothing is isolated as a dead link. */
static void test_link_flaps_report_their_own_port(void **st)
{
    (void)st;
    struct gh_sim_config c;
    assert_int_equal(gh_sim_preset("rsc1", &c, NULL), GH_OK);
    c.class_mask = 1u << GH_SIM_LINK_FLAP;
    c.rate_scale = 200;
    c.days = 1;
    struct gh_sim_result gh;
    run_policy(&c, "gpuheal", 1, &gh);
    /* ~20,000 flaps (flaps close together are one shared incident) */
    assert_true(gh.signals > 30000 && gh.incidents > 100);
    assert_true(gh.isolations == 0);
}

static void test_presets_and_checks(void **st)
{
    (void)st;
    struct gh_err err;
    struct gh_sim_config c;
    assert_true(gh_sim_preset_count() >= 5);
    for (int i = 0; i < gh_sim_preset_count(); i++) {
        assert_int_equal(gh_sim_preset(gh_sim_preset_name(i), &c, &err), GH_OK);
        assert_int_equal(gh_sim_config_check(&c, &err), GH_OK);
        assert_true(gh_sim_job_mtbf_s(&c) > 0);
        assert_true(gh_sim_interval_s(&c) > 0);
    }
    assert_int_equal(gh_sim_preset("llama3-16k", &c, &err), GH_OK);
    /* Llama 3: 419 unexpected interruptions in 54 days -> job MTBF 3.09 h; with
     * the 47 planned ones, 2.78 h. */
    assert_true(fabs(gh_sim_job_mtbf_s(&c) / 3600 - 2.78) < 0.01);
    assert_int_equal(gh_sim_preset("nope", &c, &err), GH_ENOTFOUND);
    gh_sim_config_default(&c);
    c.gpus = 1001;
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    c.days = 0;
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    c.rate[GH_SIM_SDC] = -1;
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    struct gh_sim_result r;
    assert_int_equal(gh_sim_run(&c, NULL, 1, 0, &r, &err), GH_EINVAL);
    assert_int_equal(gh_sim_class_from_name("gpu_hard"), GH_SIM_GPU_HARD);
    assert_int_equal(gh_sim_class_from_name("bogus"), -1);
    struct gh_policy *p = NULL;
    assert_int_equal(gh_sim_policy_new("bogus", &p, &err), GH_ENOTFOUND);
    assert_null(p);
    assert_int_equal(gh_sim_policy_new("k8s-default", &p, &err), GH_OK);
    assert_int_equal(p->n_rules, 0);
    gh_policy_free(p);
    assert_int_equal(gh_sim_policy_new("xid-only", &p, &err), GH_OK);
    assert_true(p->n_rules >= 3);
    gh_policy_free(p);
}

static void test_svg(void **st)
{
    (void)st;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    double x[] = {60, 600, 6000}, y[] = {0.8, 0.9, 0.85};
    struct gh_svg_series s[] = {{"gpuheal", 3, x, y, false}, {"a<b & \"c\"", 3, x, y, true}};
    struct gh_svg_chart ch = {"ETTR", "interval (s)", "ETTR", true, 2, s};
    assert_int_equal(gh_svg_write(f, &ch), 0);
    fclose(f);
    assert_non_null(strstr(buf, "<svg"));
    assert_non_null(strstr(buf, "<polyline"));
    assert_non_null(strstr(buf, "gpuheal"));
    assert_non_null(strstr(buf, "a&lt;b &amp; &quot;c&quot;"));
    assert_non_null(strstr(buf, "</svg>"));
    free(buf);
    /* a policy named on the command line can be any bytes: the chart stays
     * well-formed XML (invalid UTF-8 and control characters as U+FFFD, the
     * apostrophe as a reference, the same rule as the report page) */
    struct gh_svg_series bad[] = {{"Daly's \xff\x01model", 3, x, y, false}};
    struct gh_svg_chart badch = {"t", "x", "y", true, 1, bad};
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(gh_svg_write(f, &badch), 0);
    fclose(f);
    assert_non_null(strstr(buf, ">Daly&#39;s \xEF\xBF\xBD\xEF\xBF\xBDmodel</text>"));
    assert_null(strstr(buf, "\xff"));
    free(buf);
    struct gh_svg_chart empty = {"x", "x", "y", false, 0, NULL};
    f = open_memstream(&buf, &len);
    assert_int_equal(gh_svg_write(f, &empty), -1);
    fclose(f);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_evq_order),
        cmocka_unit_test(test_daly_worked_example),
        cmocka_unit_test(test_daly_validation),
        cmocka_unit_test(test_seed_reproduces),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_policies_ordered),
        cmocka_unit_test(test_stragglers_evicted),
        cmocka_unit_test(test_sdc_detected),
        cmocka_unit_test(test_sdc_verified_checkpoint),
        cmocka_unit_test(test_sdc_loss_spike_kept_suspect),
        cmocka_unit_test(test_flapping_caught),
        cmocka_unit_test(test_link_flaps_report_their_own_port),
        cmocka_unit_test(test_presets_and_checks),
        cmocka_unit_test(test_svg),
    };
#ifdef GH_SIM_RELEASE
    cmocka_set_test_filter("test_daly_validation"); /* the rest runs under ASan */
#endif
    return cmocka_run_group_tests(tests, NULL, NULL);
}
