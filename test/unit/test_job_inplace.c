/* test_job_inplace.c - what the in-place rung reads from a pod: the exit
 * code its RestartAllContainers rule restarts on (In, NotIn, other actions
 * and bad values ignored), the containers' restart counts, whether it is
 * running. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "control/job_inplace.h"

static json_t *spec(const char *rules_json)
{
    json_error_t e;
    char text[2048];
    snprintf(text, sizeof text,
             "{\"containers\":[{\"name\":\"sidecar\"},{\"name\":\"train\","
             "\"restartPolicy\":\"Never\",\"restartPolicyRules\":%s}]}",
             rules_json);
    json_t *o = json_loads(text, 0, &e);
    if (!o)
        fail_msg("bad test JSON: %s", e.text);
    return o;
}

static int code_of(const char *rules, char *why, size_t cap)
{
    json_t *s = spec(rules);
    int c = gh_inplace_exit_code(s, why, cap);
    json_decref(s);
    return c;
}

static void test_exit_code(void **st)
{
    (void)st;
    char why[200];
    assert_int_equal(code_of("[{\"action\":\"RestartAllContainers\",\"exitCodes\":"
                             "{\"operator\":\"In\",\"values\":[88,89]}}]",
                             why, sizeof why),
                     88);
    /* a plain Restart rule first, then the one that restarts all */
    assert_int_equal(code_of("[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\","
                             "\"values\":[42]}},{\"action\":\"RestartAllContainers\","
                             "\"exitCodes\":{\"operator\":\"In\",\"values\":[0,300,77]}}]",
                             why, sizeof why),
                     77);
    /* NotIn: the lowest code 1-255 it leaves out */
    assert_int_equal(code_of("[{\"action\":\"RestartAllContainers\",\"exitCodes\":"
                             "{\"operator\":\"NotIn\",\"values\":[0,1,2,3]}}]",
                             why, sizeof why),
                     4);
    /* none */
    why[0] = '\0';
    assert_int_equal(code_of("[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\","
                             "\"values\":[88]}}]",
                             why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "RestartAllContainers"));
    assert_int_equal(code_of("[{\"action\":\"RestartAllContainers\",\"exitCodes\":"
                             "{\"operator\":\"In\",\"values\":[0, \"88\"]}}]",
                             why, sizeof why),
                     -1);
    assert_int_equal(code_of("[{\"action\":\"RestartAllContainers\"}]", why, sizeof why), -1);
    assert_int_equal(code_of("\"not a list\"", why, sizeof why), -1);
    json_t *empty = json_object();
    assert_int_equal(gh_inplace_exit_code(empty, NULL, 0), -1);
    assert_int_equal(gh_inplace_exit_code(NULL, NULL, 0), -1);
    json_decref(empty);
}

static void test_restarts_and_running(void **st)
{
    (void)st;
    json_t *pod = json_loads("{\"metadata\":{\"name\":\"p\"},\"status\":{\"phase\":\"Running\","
                             "\"containerStatuses\":[{\"restartCount\":2},{\"restartCount\":3}]}}",
                             0, NULL);
    assert_non_null(pod);
    assert_int_equal(gh_inplace_restarts(pod), 5);
    assert_true(gh_inplace_running(pod));
    json_object_set_new(json_object_get(pod, "metadata"), "deletionTimestamp",
                        json_string("2026-12-08T00:00:00Z"));
    assert_false(gh_inplace_running(pod));
    json_decref(pod);
    pod = json_loads("{\"status\":{\"phase\":\"Pending\"}}", 0, NULL);
    assert_int_equal(gh_inplace_restarts(pod), 0);
    assert_false(gh_inplace_running(pod));
    json_decref(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code),
        cmocka_unit_test(test_restarts_and_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
