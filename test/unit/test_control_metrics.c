/* test_control_metrics.c - the controller's Prometheus text: counters by
 * label (shared-cause incidents by scope), the latency histogram's
 * cumulative buckets, gauges, and a buffer too small for everything (whole
 * lines only, NUL-terminated). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "control/metrics.h"

static void test_exposition(void **st)
{
    (void)st;
    struct gh_ctl_metrics *m = gh_ctl_metrics_new();
    assert_non_null(m);
    gh_ctl_metrics_incident(m, GH_CLASS_GPU_HARDWARE);
    gh_ctl_metrics_incident(m, GH_CLASS_GPU_HARDWARE);
    /* shared causes by scope; a node's own cause is not one */
    gh_ctl_metrics_shared_cause(m, GH_SCOPE_SWITCH);
    gh_ctl_metrics_shared_cause(m, GH_SCOPE_SWITCH);
    gh_ctl_metrics_shared_cause(m, GH_SCOPE_FLEET);
    gh_ctl_metrics_shared_cause(m, GH_SCOPE_NODE);
    gh_ctl_metrics_shared_cause(m, GH_SCOPE_UNSAID);
    gh_ctl_metrics_action(m, GH_ACT_ISOLATE_NODE, "succeeded");
    gh_ctl_metrics_action(m, GH_ACT_RESTART_FROM_CHECKPOINT, "failed");
    gh_ctl_metrics_action(m, -1, "noop");
    /* a request handed to the agent, then what it answered */
    gh_ctl_metrics_action(m, GH_ACT_REBOOT_NODE, "requested");
    gh_ctl_metrics_action(m, GH_ACT_REBOOT_NODE, "not_configured");
    gh_ctl_metrics_action(m, GH_ACT_RESET_GPU, "timed_out");
    gh_ctl_metrics_guard_trip(m, "budget");
    gh_ctl_metrics_guard_trip(m, "nonsense");
    gh_ctl_metrics_latency(m, 0.03);
    gh_ctl_metrics_latency(m, 0.7);
    gh_ctl_metrics_gauge(m, GH_GAUGE_LEADER, 1);
    gh_ctl_metrics_engine_nomem(m, 3);
    char buf[16384];
    size_t n = gh_ctl_metrics_write(m, buf, sizeof buf);
    assert_int_equal(n, strlen(buf));
    assert_non_null(strstr(buf, "gpuheal_incidents_total{class=\"gpu_hardware\"} 2\n"));
    assert_non_null(strstr(buf, "# TYPE gpuheal_shared_cause_incidents_total counter\n"
                                "gpuheal_shared_cause_incidents_total{scope=\"rack\"} 0\n"
                                "gpuheal_shared_cause_incidents_total{scope=\"switch\"} 2\n"
                                "gpuheal_shared_cause_incidents_total{scope=\"nvlink_domain\"} 0\n"
                                "gpuheal_shared_cause_incidents_total{scope=\"fleet\"} 1\n"));
    assert_null(strstr(buf, "scope=\"node\""));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"isolate_node\",result=\"succeeded\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"restart_from_checkpoint\",result=\"failed\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"release_node\",result=\"noop\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"reboot_node\",result=\"requested\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"reboot_node\",result=\"failed\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"reboot_node\",result=\"succeeded\"} 0\n"));
    assert_non_null(strstr(buf, "gpuheal_actions_total{action=\"reset_gpu\",result=\"failed\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_guard_trips_total{guard=\"budget\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_decision_latency_seconds_bucket{le=\"0.05\"} 1\n"));
    assert_non_null(strstr(buf, "gpuheal_decision_latency_seconds_bucket{le=\"1\"} 2\n"));
    assert_non_null(strstr(buf, "gpuheal_decision_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(buf, "gpuheal_decision_latency_seconds_count 2\n"));
    assert_non_null(strstr(buf, "gpuheal_controller_leader 1\n"));
    assert_non_null(strstr(buf, "# TYPE gpuheal_engine_allocation_failures_total counter\n"
                                "gpuheal_engine_allocation_failures_total 3\n"));
    /* every sample line: NAME[{...}] VALUE */
    for (char *line = buf; *line;) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        if (line[0] != '#') {
            char *sp = memchr(line, ' ', (size_t)(end - line));
            assert_non_null(sp);
            assert_true(strncmp(line, "gpuheal_", 8) == 0);
        }
        line = end + 1;
    }
    /* too small: whole lines only */
    char small[300];
    n = gh_ctl_metrics_write(m, small, sizeof small);
    assert_true(n < sizeof small);
    assert_int_equal(n, strlen(small));
    assert_true(n == 0 || small[n - 1] == '\n');
    gh_ctl_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exposition)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
