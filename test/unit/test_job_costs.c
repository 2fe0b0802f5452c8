/* test_job_costs.c - a job's remaining run and restart cost read from its
 * pods' gpuheal.io annotations (expected-end, remaining counted from the
 * pod's start, restart-cost; invalid values named and left to the policy
 * default; what the reason then says), and the straggler detector's
 * verdict changing with those figures once they are in the topology. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"
#include "control/job_costs.h"
#include "engine/engine.h"

#define NOW (1795935600LL * GH_NS_PER_S) /* 2026-11-29T07:00:00Z */

/* a pod with the given annotations (NULL: absent) and start time */
static json_t *pod(const char *end, const char *rem, const char *cost, const char *start)
{
    json_t *ann = json_object();
    if (end)
        json_object_set_new(ann, GH_ANN_EXPECTED_END, json_string(end));
    if (rem)
        json_object_set_new(ann, GH_ANN_REMAINING, json_string(rem));
    if (cost)
        json_object_set_new(ann, GH_ANN_RESTART_COST, json_string(cost));
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:o}, s:{}}", "metadata", "name", "llm-0",
                          "namespace", "ml", "creationTimestamp", "2026-11-29T06:00:00Z",
                          "annotations", ann, "status");
    if (start)
        json_object_set_new(json_object_get(p, "status"), "startTime", json_string(start));
    return p;
}

static void test_none(void **st)
{
    (void)st;
    json_t *p = pod(NULL, NULL, NULL, NULL);
    struct gh_job_costs c;
    struct gh_err err;
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_false(gh_job_costs_stated(&c));
    assert_true(gh_job_costs_remaining_s(&c, NOW) < 0);
    assert_true(gh_job_costs_restart_s(&c) < 0);
    char d[256];
    assert_string_equal(gh_job_costs_describe(&c, NOW, "pod ml/llm-0", "pod ml/llm-0", d, sizeof d),
                        "remaining: the policy default, restart cost: the policy default");
    json_decref(p);
    /* other annotations, and none at all, are nothing stated */
    p = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "x", "annotations", "a", "b");
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_false(gh_job_costs_stated(&c));
    json_decref(p);
    p = json_object();
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_false(gh_job_costs_stated(&c));
    json_decref(p);
}

static void test_expected_end(void **st)
{
    (void)st;
    json_t *p = pod("2026-11-29T07:05:00Z", NULL, "48h", NULL);
    struct gh_job_costs c;
    struct gh_err err;
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_true(gh_job_costs_stated(&c));
    assert_string_equal(c.end_from, GH_ANN_EXPECTED_END);
    assert_int_equal(c.end_ns, NOW + 300 * GH_NS_PER_S);
    /* recomputed as time passes, 0 once past */
    assert_true(gh_job_costs_remaining_s(&c, NOW) == 300.0);
    assert_true(gh_job_costs_remaining_s(&c, NOW + 60 * GH_NS_PER_S) == 240.0);
    assert_true(gh_job_costs_remaining_s(&c, NOW + 900 * GH_NS_PER_S) == 0.0);
    assert_true(gh_job_costs_restart_s(&c) == 48 * 3600.0);
    char d[256];
    assert_string_equal(gh_job_costs_describe(&c, NOW, "pod ml/llm-0", "JobSet ml/llm", d,
                                              sizeof d),
                        "remaining 5.0 min (annotation gpuheal.io/expected-end on pod ml/llm-0, "
                        "end 2026-11-29T07:05:00.000000Z), restart cost 48.0 h (annotation "
                        "gpuheal.io/restart-cost on JobSet ml/llm)");
    assert_string_equal(gh_job_costs_describe(&c, NOW + 250 * GH_NS_PER_S, NULL, NULL, d, sizeof d),
                        "remaining 50 s (annotation gpuheal.io/expected-end, end "
                        "2026-11-29T07:05:00.000000Z), restart cost 48.0 h (annotation "
                        "gpuheal.io/restart-cost)");
    /* bounded */
    char small[24];
    gh_job_costs_describe(&c, NOW, "pod ml/llm-0", NULL, small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    json_decref(p);
    /* an offset is honoured */
    p = pod("2026-11-29T09:05:00+02:00", NULL, NULL, NULL);
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_int_equal(c.end_ns, NOW + 300 * GH_NS_PER_S);
    assert_true(gh_job_costs_restart_s(&c) < 0);
    json_decref(p);
}

static void test_remaining(void **st)
{
    (void)st;
    struct gh_job_costs c;
    struct gh_err err;
    /* counted from the pod's start */
    json_t *p = pod(NULL, "1h30m", NULL, "2026-11-29T06:50:00Z");
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_string_equal(c.end_from, GH_ANN_REMAINING);
    assert_true(gh_job_costs_remaining_s(&c, NOW) == 80 * 60.0);
    json_decref(p);
    /* no start time yet: from the creation */
    p = pod(NULL, "90m", NULL, NULL);
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_true(gh_job_costs_remaining_s(&c, NOW) == 30 * 60.0);
    json_decref(p);
    /* expected-end wins when both are valid */
    p = pod("2026-11-29T07:05:00Z", "90m", NULL, "2026-11-29T06:50:00Z");
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_string_equal(c.end_from, GH_ANN_EXPECTED_END);
    assert_true(gh_job_costs_remaining_s(&c, NOW) == 300.0);
    json_decref(p);
    /* an invalid expected-end leaves a valid remaining in force */
    p = pod("tomorrow", "90m", NULL, "2026-11-29T06:50:00Z");
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_EINVAL);
    assert_string_equal(c.end_from, GH_ANN_REMAINING);
    assert_string_equal(err.msg, "gpuheal.io/expected-end \"tomorrow\": not an RFC 3339 time");
    json_decref(p);
}

static void test_invalid(void **st)
{
    (void)st;
    struct gh_job_costs c;
    struct gh_err err;
    json_t *p = pod("2026-13-01T00:00:00Z", "soon", "-5m", NULL);
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_EINVAL);
    assert_false(gh_job_costs_stated(&c));
    assert_string_equal(err.msg,
                        "gpuheal.io/expected-end \"2026-13-01T00:00:00Z\": not an RFC 3339 time; "
                        "gpuheal.io/remaining \"soon\": not a duration (e.g. 90m, 1h30m, 2d); "
                        "gpuheal.io/restart-cost \"-5m\": not a duration (e.g. 10m, 1h30m)");
    json_decref(p);
    /* the valid one of several is kept */
    static const char *const bad_durations[] = {"", "10", "10 m", "m", "nanm", "infh", "1e30d",
                                                "10m30"};
    for (size_t i = 0; i < sizeof bad_durations / sizeof bad_durations[0]; i++) {
        p = pod("2026-11-29T08:00:00Z", NULL, bad_durations[i], NULL);
        assert_int_equal(gh_job_costs_read(p, &c, &err), GH_EINVAL);
        assert_non_null(strstr(err.msg, GH_ANN_RESTART_COST));
        assert_true(gh_job_costs_restart_s(&c) < 0);
        assert_true(gh_job_costs_remaining_s(&c, NOW) == 3600.0);
        json_decref(p);
    }
    /* a non-string annotation is not one */
    p = pod(NULL, NULL, NULL, NULL);
    json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"),
                        GH_ANN_RESTART_COST, json_integer(600));
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_OK);
    assert_false(gh_job_costs_stated(&c));
    json_decref(p);
    /* a long value is cut in the message, which stays bounded */
    char longv[2000];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    p = pod(longv, longv, longv, NULL);
    assert_int_equal(gh_job_costs_read(p, &c, &err), GH_EINVAL);
    assert_true(strlen(err.msg) < sizeof err.msg);
    json_decref(p);
}

/* ---- the straggler detector with per-job figures */

struct seen {
    int n;
    char reason[640];
    enum gh_action act;
};

static void on_inc(void *ctx, const struct gh_incident *inc)
{
    struct seen *s = ctx;
    s->n++;
    snprintf(s->reason, sizeof s->reason, "%s", inc->reason);
    s->act = inc->n_actions ? inc->actions[0] : GH_ACT_NONE;
}

static int64_t fixed_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

/* job ml/llm on 4 nodes, 8 ranks each, the ranks of n2 15% slow for 24
 * steps; remaining/cost < 0: not stated (the policy's 24 h and 10 min) */
static void straggle(double remaining_s, double cost_s, struct seen *out)
{
    static int64_t t_now = NOW + 60 * GH_NS_PER_S;
    struct gh_clock clk = {fixed_now, &t_now};
    struct gh_err err;
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    cfg.detectors = GH_DET_STRAGGLER;
    memset(out, 0, sizeof *out);
    struct gh_topology *t = gh_topology_new();
    assert_non_null(t);
    const char *nodes[] = {"n0", "n1", "n2", "n3"};
    long j = gh_topology_add_job(t, "ml/llm", nodes, 4, 8);
    assert_true(j >= 0);
    gh_topology_set_job_costs(t, j, remaining_s, cost_s);
    struct gh_engine *e = gh_engine_new(NULL, t, &clk, &cfg, on_inc, out, &err);
    gh_topology_free(t); /* the engine holds a copy */
    assert_non_null(e);
    for (int step = 0; step < 24; step++) {
        int64_t ts = NOW + step * GH_NS_PER_S;
        for (int r = 0; r < 32; r++) {
            struct gh_signal s;
            gh_signal_init(&s);
            s.ts_ns = ts;
            s.source = GH_SRC_TELEMETRY;
            s.kind = GH_KIND_STEP;
            gh_signal_set_str(&s.node, nodes[r / 8], 2);
            gh_signal_set_str(&s.job, "ml/llm", 6);
            s.gpu = r % 8;
            s.has_rank = true;
            s.rank = r;
            s.has_step = true;
            s.step = step;
            s.step_ms = r / 8 == 2 ? 1150 : 1000 + (r % 3);
            assert_int_equal(gh_engine_ingest_steal(e, &s, ts, NULL), GH_OK);
            gh_signal_clear(&s);
        }
    }
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
}

static void test_straggler_figures(void **st)
{
    (void)st;
    struct seen s;
    straggle(-1, -1, &s); /* the policy's: 24 h remaining, 10 min restart */
    assert_true(s.n >= 1);
    assert_non_null(strstr(s.reason, "exceeds the restart cost"));
    assert_null(strstr(s.reason, "does not exceed"));
    assert_non_null(strstr(s.reason, "over the remaining 24.00 h, exceeds the restart cost of "
                                     "0.17 h"));
    assert_int_equal(s.act, GH_ACT_ISOLATE_NODE);

    straggle(300, -1, &s); /* 5 min left: not worth it */
    assert_true(s.n >= 1);
    assert_non_null(strstr(s.reason, "does not exceed the restart cost"));
    assert_non_null(strstr(s.reason, "over the remaining 0.08 h, does not exceed the restart "
                                     "cost of 0.17 h"));
    assert_int_equal(s.act, GH_ACT_NONE);

    straggle(-1, 48 * 3600.0, &s); /* a 48 h restart: not worth it either */
    assert_true(s.n >= 1);
    assert_non_null(strstr(s.reason, "does not exceed the restart cost"));
    assert_non_null(strstr(s.reason, "over the remaining 24.00 h, does not exceed the restart "
                                     "cost of 48.00 h"));
    assert_int_equal(s.act, GH_ACT_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),      cmocka_unit_test(test_expected_end),
        cmocka_unit_test(test_remaining), cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_straggler_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
