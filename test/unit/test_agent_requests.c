/* test_agent_requests.c - unit tests of the request module's parts that need
 * no API server: command parsing (no shell, absolute path, word bound),
 * option checks, and a corrupt state file refused. The requests themselves
 * run against the real control plane in test/integration/agent_requests.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/requests.h"
#include "kube/kubeconfig.h"

static void test_parse_cmd(void **state)
{
    (void)state;
    char **v;
    struct gh_err err;
    assert_int_equal(gh_requests_parse_cmd("  /usr/bin/nvidia-smi\t-r  -i $GPU ;rm ", &v, &err),
                     GH_OK);
    const char *want[] = {"/usr/bin/nvidia-smi", "-r", "-i", "$GPU", ";rm"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(v[i], want[i]); /* words as given: no shell expands them */
    assert_null(v[5]);
    gh_requests_argv_free(v);

    assert_int_equal(gh_requests_parse_cmd("reboot now", &v, &err), GH_EINVAL);
    assert_null(v);
    assert_non_null(strstr(err.msg, "\"reboot\" is not an absolute path"));
    assert_int_equal(gh_requests_parse_cmd("   ", &v, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "empty command"));
    assert_int_equal(gh_requests_parse_cmd(NULL, &v, &err), GH_EINVAL);

    char many[400] = "/bin/echo";
    size_t len = strlen(many);
    for (int i = 0; i < GH_PROBE_MAX_ARGS; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, " x");
    assert_int_equal(gh_requests_parse_cmd(many, &v, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "more than"));
    many[strlen(many) - 2] = '\0'; /* exactly GH_PROBE_MAX_ARGS words */
    assert_int_equal(gh_requests_parse_cmd(many, &v, &err), GH_OK);
    gh_requests_argv_free(v);
}

static void test_action_names(void **state)
{
    (void)state;
    assert_string_equal(gh_request_action_name(GH_REQ_RESET_GPU), "reset_gpu");
    assert_string_equal(gh_request_action_name(GH_REQ_REBOOT_NODE), "reboot_node");
    assert_string_equal(gh_request_action_name(GH_REQ_RUN_DIAGNOSTICS), "run_diagnostics");
    assert_string_equal(gh_request_action_name(GH_REQ__COUNT), "?");
}

static void no_emit(void *ctx, const struct gh_signal *s)
{
    (void)ctx;
    (void)s;
}

/* A client for a server nobody dials (nothing is started here). */
static struct gh_kube_client *idle_client(void)
{
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    kc.server = strdup("https://127.0.0.1:1");
    struct gh_kube_client *c = NULL;
    struct gh_err err;
    assert_int_equal(gh_kube_client_new(&kc, NULL, &c, &err), GH_OK);
    gh_kube_config_clear(&kc);
    return c;
}

static void test_new_checks(void **state)
{
    (void)state;
    char dir[] = "/tmp/gh-req-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/requests.state", dir);
    struct gh_requests *r = NULL;
    struct gh_err err;
    struct gh_requests_opts o = {.node = "n1", .state_path = path, .boot_id = "b1",
                                 .emit = no_emit};

    /* no state file yet: fine */
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_OK);
    gh_requests_free(r);

    /* a bad command is named */
    o.cmd[GH_REQ_REBOOT_NODE] = "systemctl reboot";
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_EINVAL);
    assert_null(r);
    assert_non_null(strstr(err.msg, "reboot_node command"));
    o.cmd[GH_REQ_REBOOT_NODE] = "/bin/systemctl reboot";
    o.validate_cmd = "";
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "validate command"));
    o.validate_cmd = NULL;

    /* a corrupt state file is refused (a repeat could reboot a node twice) */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"last\": {\"reboot_node\": ", f);
    fclose(f);
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, path));

    /* a valid one is read */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"last\":{\"reboot_node\":{\"id\":\"i/reboot_node\",\"result\":\"Succeeded\","
          "\"at\":1}},\"pending\":{\"action\":\"reset_gpu\",\"id\":\"j/reset_gpu\",\"gpu\":2,"
          "\"incident\":\"j\",\"boot_id\":\"b1\",\"started\":5}}\n", f);
    fclose(f);
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_OK);
    gh_requests_free(r);

    /* missing required options */
    o.boot_id = NULL;
    assert_int_equal(gh_requests_new(idle_client(), &o, &r, &err), GH_EINVAL);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_cmd),
        cmocka_unit_test(test_action_names),
        cmocka_unit_test(test_new_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
