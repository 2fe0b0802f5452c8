/* test_engine_topology.c - the scenario header as topology, rank placement,
 * which job runs on a GPU, and the incident's JSON form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine/incident.h"
#include "engine/topology.h"

static struct gh_topology *from(const char *text, int expect_rc)
{
    json_error_t je;
    json_t *h = json_loads(text, 0, &je);
    assert_non_null(h);
    struct gh_topology *t = NULL;
    struct gh_err err;
    assert_int_equal(gh_topology_from_header(h, &t, &err), expect_rc);
    json_decref(h);
    return t;
}

static void test_header(void **st)
{
    (void)st;
    struct gh_topology *t = from("{\"scenario\":\"x\",\"nodes\":[\"a\",\"b\",\"c\"],\"gpus_per_node\":8,"
                                 "\"jobs\":[{\"name\":\"ml/j\",\"nodes\":[\"b\",\"c\"],\"ranks_per_node\":4,"
                                 "\"remaining_s\":3600,\"extra\":true},{\"name\":\"k\",\"nodes\":[\"a\"]}]}",
                                 GH_OK);
    assert_string_equal(gh_topology_scenario(t), "x");
    assert_int_equal(gh_topology_node_count(t), 3);
    long j = gh_topology_find_job(t, "ml/j");
    assert_true(j >= 0);
    assert_true(gh_topology_job_declared(t, (size_t)j));
    assert_int_equal(gh_topology_job_ranks(t, (size_t)j), 8);
    const char *node;
    int gpu;
    assert_true(gh_topology_rank_location(t, (size_t)j, 5, &node, &gpu));
    assert_string_equal(node, "c");
    assert_int_equal(gpu, 1);
    assert_false(gh_topology_rank_location(t, (size_t)j, 8, &node, &gpu));
    assert_true(gh_topology_job_remaining_s(t, (size_t)j) == 3600);
    /* "k" has no ranks_per_node: gpus_per_node is the default. */
    assert_int_equal(gh_topology_job_ranks(t, (size_t)gh_topology_find_job(t, "k")), 8);
    assert_string_equal(gh_topology_job_name(t, (size_t)gh_topology_job_on_node(t, "a", -1)), "k");
    assert_int_equal(gh_topology_job_on_node(t, "zzz", -1), -1);
    struct gh_topology *c = gh_topology_clone(t);
    assert_int_equal(gh_topology_job_ranks(c, (size_t)gh_topology_find_job(c, "ml/j")), 8);
    gh_topology_free(c);
    gh_topology_free(t);
    assert_null(from("{\"scenario\":\"x\",\"nodes\":\"a\"}", GH_EINVAL));
    assert_null(from("{\"scenario\":\"x\",\"jobs\":[{\"nodes\":[\"a\"]}]}", GH_EINVAL));
    assert_null(from("{\"scenario\":\"x\",\"gpus_per_node\":-1}", GH_EINVAL));
    /* an empty node name is bad input, not "too many nodes" */
    assert_null(from("{\"scenario\":\"x\",\"nodes\":[\"a\",\"\"]}", GH_EINVAL));
    assert_null(from("{\"scenario\":\"x\",\"jobs\":[{\"name\":\"j\",\"nodes\":[\"\"]}]}",
                     GH_EINVAL));
    t = from("{\"scenario\":\"empty\"}", GH_OK);
    assert_int_equal(gh_topology_node_count(t), 0);
    gh_topology_free(t);
}

static void test_learning_and_job_on_gpu(void **st)
{
    (void)st;
    struct gh_topology *t = gh_topology_new();
    const char *n[] = {"g7"};
    gh_topology_add_job(t, "old", n, 1, 8);
    gh_topology_add_job(t, "new", n, 1, 8);
    /* Both hold the node; the one seen most recently on GPU 2 wins. */
    gh_topology_note(t, "old", "g7", 2, 2);
    gh_topology_note(t, "new", "g7", 2, 2);
    assert_string_equal(gh_topology_job_name(t, (size_t)gh_topology_job_on_node(t, "g7", 2)), "new");
    gh_topology_note(t, "old", "g7", 2, 2);
    assert_string_equal(gh_topology_job_name(t, (size_t)gh_topology_job_on_node(t, "g7", 2)), "old");
    /* A learned job: not declared; ranks from the highest seen. */
    long j = gh_topology_note(t, "solo", "g9", 40, 0);
    assert_false(gh_topology_job_declared(t, (size_t)j));
    assert_int_equal(gh_topology_job_ranks(t, (size_t)j), 41);
    assert_true(gh_topology_job_has_node(t, (size_t)j, "g9"));
    gh_topology_free(t);
}

static void test_incident_json(void **st)
{
    (void)st;
    struct gh_incident inc;
    memset(&inc, 0, sizeof inc);
    snprintf(inc.id, sizeof inc.id, "inc-1");
    inc.cls = GH_CLASS_APPLICATION;
    inc.gpu = -1;
    inc.job = "ml/j";
    inc.first_ts = 1795935600LL * 1000000000LL;
    inc.decided_ts = inc.first_ts + 30LL * 1000000000LL;
    inc.actions[inc.n_actions++] = GH_ACT_RETRY_IN_PLACE;
    inc.rule = "application-fault";
    snprintf(inc.reason, sizeof inc.reason, "because");
    char *s = NULL;
    assert_int_equal(gh_incident_encode(&inc, &s, NULL), GH_OK);
    assert_string_equal(s, "{\"id\":\"inc-1\",\"class\":\"application\",\"job\":\"ml/j\","
                           "\"first_ts\":\"2026-11-29T07:00:00.000000Z\","
                           "\"decided_ts\":\"2026-11-29T07:00:30.000000Z\","
                           "\"actions\":[\"retry_in_place\"],\"evidence\":[],"
                           "\"rule\":\"application-fault\",\"reason\":\"because\",\"severity\":\"info\","
                           "\"impact\":{\"job\":\"none\",\"hardware\":\"can_wait\"}}");
    free(s);
    /* the impact: what the fault did, how much slower, what waits */
    inc.impact = GH_IMPACT_SLOWER;
    inc.has_slowdown = true;
    inc.slowdown = 0.25;
    inc.deferred[inc.n_deferred++] = GH_ACT_RESET_GPU;
    assert_int_equal(gh_incident_encode(&inc, &s, NULL), GH_OK);
    assert_non_null(strstr(s, "\"impact\":{\"job\":\"slower\",\"slowdown\":0.25,"
                              "\"hardware\":\"can_wait\",\"deferred\":[\"reset_gpu\"]}}"));
    free(s);
    inc.impact = GH_IMPACT_NONE;
    inc.has_slowdown = false;
    inc.n_deferred = 0;
    inc.cls = GH_CLASS_GPU_HARDWARE;
    inc.node = "g1";
    inc.gpu = 3;
    inc.has_checkpoint = true;
    inc.checkpoint_step = 1000;
    inc.checkpoint_path = "s3://c/1000";
    json_t *o = gh_incident_to_json(&inc);
    assert_string_equal(json_string_value(json_object_get(o, "node")), "g1");
    assert_int_equal(json_integer_value(json_object_get(o, "gpu")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "checkpoint"), "step")), 1000);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_learning_and_job_on_gpu),
        cmocka_unit_test(test_incident_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
