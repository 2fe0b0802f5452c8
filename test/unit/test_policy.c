/* test_policy.c - policy parsing, lint with line numbers, matching, escalation, defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "engine/policy.h"

static char *slurp(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static struct gh_policy *parse(const char *text, struct gh_policy_diags *d)
{
    struct gh_policy *p = NULL;
    gh_policy_parse(text, strlen(text), &p, d);
    return p;
}

static bool has_diag(const struct gh_policy_diags *d, int line, bool error, const char *needle)
{
    for (int i = 0; i < d->n; i++)
        if (d->d[i].line == line && d->d[i].error == error && strstr(d->d[i].msg, needle))
            return true;
    return false;
}

static void dump(const struct gh_policy_diags *d)
{
    for (int i = 0; i < d->n; i++)
        fprintf(stderr, "  %d: %s: %s\n", d->d[i].line, d->d[i].error ? "error" : "warning",
                d->d[i].msg);
}

static void test_default_is_clean(void **st)
{
    (void)st;
    struct gh_policy_diags d;
    struct gh_policy *p = parse(gh_policy_default_yaml(), &d);
    dump(&d);
    assert_non_null(p);
    assert_int_equal(d.errors, 0);
    assert_int_equal(d.warnings, 0);
    assert_true(p->n_rules >= 20);
    gh_policy_free(p);
}

static void test_default_equals_file(void **st)
{
    (void)st;
    size_t len = 0;
    char *text = slurp(GH_SOURCE_DIR "/data/policy-default.yaml", &len);
    assert_non_null(text);
    struct gh_policy *file = NULL, *builtin = gh_policy_new_default();
    assert_int_equal(gh_policy_parse(text, len, &file, NULL), GH_OK);
    assert_non_null(builtin);
    assert_true(gh_policy_equal(file, builtin));
    /* The text itself too, so that comments do not drift either. */
    assert_string_equal(text, gh_policy_default_yaml());
    gh_policy_free(file);
    gh_policy_free(builtin);
    free(text);
}

static void test_lint_line_numbers(void **st)
{
    (void)st;
    const char *y = "version: 1\n"                                  /* 1 */
                    "settings:\n"                                   /* 2 */
                    "  hold: 30 seconds\n"                          /* 3 */
                    "  straggler: {k: 30, n: 20}\n"                 /* 4 */
                    "rules:\n"                                      /* 5 */
                    "  - name: app\n"                               /* 6 */
                    "    match: {class: application}\n"             /* 7 */
                    "    actions: [retry_in_place, isolate_node]\n" /* 8 */
                    "  - name: typo\n"                              /* 9 */
                    "    match: {clas: gpu_hardware}\n"             /* 10 */
                    "    actions: [reboot]\n"                       /* 11 */
                    "  - name: app\n"                               /* 12 */
                    "    match: {class: application, min_severity: high}\n"
                    "    actions: [none]\n";
    struct gh_policy_diags d;
    struct gh_policy *p = parse(y, &d);
    dump(&d);
    assert_null(p);
    assert_true(has_diag(&d, 3, true, "not a duration"));
    assert_true(has_diag(&d, 1, true, "k (30) is larger than n"));
    assert_true(has_diag(&d, 6, true, "blames no node"));
    assert_true(has_diag(&d, 10, true, "unknown key \"clas\""));
    assert_true(has_diag(&d, 11, true, "unknown action \"reboot\""));
    assert_true(has_diag(&d, 12, true, "already used on line 6"));
    assert_true(has_diag(&d, 12, false, "can never match"));
}

static void test_yaml_syntax_error(void **st)
{
    (void)st;
    struct gh_policy_diags d;
    struct gh_policy *p = parse("version: 1\nrules:\n  - name: [unclosed\n", &d);
    assert_null(p);
    assert_int_equal(d.errors, 1);
    assert_true(d.d[0].line >= 3);
    p = parse("", &d);
    assert_null(p);
    p = parse("- just\n- a list\n", &d);
    assert_null(p);
    /* Aliases do not multiply work beyond the visit cap. */
    p = parse("a: &a [1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nrules: [*b]\n", &d);
    assert_null(p);
}

static void test_match_and_escalation(void **st)
{
    (void)st;
    struct gh_policy *p = gh_policy_new_default();
    struct gh_policy_query q = {GH_CLASS_GPU_HARDWARE, GH_KIND_XID, 79, GH_SEV_CRITICAL, false, 0, false, GH_IMPACT_NONE, NULL};
    int r = gh_policy_match(p, &q);
    assert_true(r >= 0);
    assert_string_equal(p->rules[r].name, "gpu-fell-off-bus");
    q = (struct gh_policy_query){GH_CLASS_GPU_HARDWARE, GH_KIND_XID, 119, GH_SEV_CRITICAL, false, 0, false, GH_IMPACT_NONE, NULL};
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "xid-critical");
    q = (struct gh_policy_query){GH_CLASS_INTERCONNECT, GH_KIND_NVLINK, -1, GH_SEV_LOW, true, 999, false, GH_IMPACT_NONE, NULL};
    assert_int_equal(gh_policy_match(p, &q), -1); /* below the threshold */
    q.metric = 1000;
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "nvlink-error-rate");
    q = (struct gh_policy_query){GH_CLASS_APPLICATION, GH_KIND_POD_FAILED, -1, GH_SEV_MEDIUM, false, 0, false, GH_IMPACT_NONE, NULL};
    r = gh_policy_match(p, &q);
    assert_string_equal(p->rules[r].name, "application-fault");
    enum gh_action a[GH_POLICY_MAX_ACTIONS];
    int level, earlier[GH_POLICY_MAX_ESCALATIONS] = {0};
    int n = gh_policy_actions(&p->rules[r], earlier, a, &level);
    assert_int_equal(n, 1);
    assert_int_equal(a[0], GH_ACT_RETRY_IN_PLACE);
    assert_int_equal(level, 0);
    earlier[0] = 2; /* the third within the window */
    n = gh_policy_actions(&p->rules[r], earlier, a, &level);
    assert_int_equal(a[0], GH_ACT_NONE);
    assert_int_equal(level, 1);
    gh_policy_free(p);
}

static void test_node_down_rule_and_settings(void **st)
{
    (void)st;
    struct gh_policy *p = gh_policy_new_default();
    assert_int_equal(p->settings.node_down_ns, 60 * GH_NS_PER_S);
    assert_int_equal(p->settings.job_idle_ns, 3600 * GH_NS_PER_S);
    struct gh_policy_query q = {GH_CLASS_UNKNOWN, GH_KIND_NODE_NOT_READY, -1, GH_SEV_HIGH, true, 60, false, GH_IMPACT_NONE, NULL};
    int r = gh_policy_match(p, &q);
    assert_true(r >= 0);
    assert_string_equal(p->rules[r].name, "node-not-ready");
    assert_int_equal(p->rules[r].n_actions, 3);
    assert_int_equal(p->rules[r].actions[0], GH_ACT_ISOLATE_NODE);
    assert_int_equal(p->rules[r].actions[1], GH_ACT_RESTART_FROM_CHECKPOINT);
    assert_int_equal(p->rules[r].actions[2], GH_ACT_RUN_DIAGNOSTICS);
    q.cls = GH_CLASS_GPU_HARDWARE; /* hardware evidence explained the outage */
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-not-ready");
    q.cls = GH_CLASS_FLAPPING_NODE; /* a node that keeps going NotReady is another matter */
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "flapping-node");
    q = (struct gh_policy_query){GH_CLASS_UNKNOWN, GH_KIND_POD_FAILED, -1, GH_SEV_MEDIUM, false, 0, false, GH_IMPACT_NONE, NULL};
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "unknown-fault");
    q.severity = GH_SEV_HIGH; /* a node refusing the pods of several jobs (det_podhost.c) */
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-rejects-pods");
    assert_int_equal(p->rules[gh_policy_match(p, &q)].actions[0], GH_ACT_ISOLATE_NODE);
    gh_policy_free(p);

    struct gh_policy_diags d;
    p = parse("version: 1\nsettings:\n  node_down: 5m\n  job_idle: 0s\nrules: []\n", &d);
    assert_non_null(p);
    assert_int_equal(p->settings.node_down_ns, 300 * GH_NS_PER_S);
    assert_int_equal(p->settings.job_idle_ns, 0);
    gh_policy_free(p);
}

static void test_custom_policy(void **st)
{
    (void)st;
    const char *y = "version: 1\n"
                    "rules:\n"
                    "  - name: sbe\n"
                    "    match:\n"
                    "      class: [gpu_memory]\n"
                    "      kind: ecc\n"
                    "      codes: [1, 2]\n"
                    "      min_severity: low\n"
                    "      threshold: 10.5\n"
                    "      repetitions: 3\n"
                    "      window: 90m\n"
                    "      debounce: 500ms\n"
                    "      boot_grace: 2h\n"
                    "    actions: [drain_node]\n"
                    "    escalate:\n"
                    "      - {after: 2, within: 1d, actions: [isolate_node]}\n"
                    "      - {after: 4, within: 7d, actions: [replace_node, isolate_node]}\n";
    struct gh_policy_diags d;
    struct gh_policy *p = parse(y, &d);
    dump(&d);
    assert_non_null(p);
    const struct gh_rule *r = &p->rules[0];
    assert_int_equal(r->classes, 1u << GH_CLASS_GPU_MEMORY);
    assert_int_equal(r->kinds, 1u << GH_KIND_ECC);
    assert_int_equal(r->n_codes, 2);
    assert_true(r->threshold == 10.5);
    assert_int_equal(r->repetitions, 3);
    assert_int_equal(r->window_ns, 90LL * 60 * 1000000000LL);
    assert_int_equal(r->debounce_ns, 500LL * 1000000LL);
    assert_int_equal(r->boot_grace_ns, 7200LL * 1000000000LL);
    assert_int_equal(r->n_escalations, 2);
    assert_int_equal(r->escalations[1].n_actions, 2);
    /* Settings omitted: defaults. */
    struct gh_policy_settings def;
    gh_policy_settings_default(&def);
    assert_memory_equal(&p->settings, &def, sizeof def);
    gh_policy_free(p);
}

/* Rules match a Node condition by name (issue 16 item 14): the default
 * rules for node-problem-detector's conditions, the catch-all for other
 * configured ones, and lint of the new field. */
static void test_condition_match(void **st)
{
    (void)st;
    struct gh_policy *p = gh_policy_new_default();
    struct gh_policy_query q = {GH_CLASS_UNKNOWN, GH_KIND_NODE_CONDITION, -1, GH_SEV_HIGH, false, 0,
                                false, GH_IMPACT_NONE, "KernelDeadlock"};
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-cannot-run-work");
    q.condition = "ReadonlyFilesystem";
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-cannot-run-work");
    q.condition = "FrequentContainerdRestart";
    q.severity = GH_SEV_MEDIUM;
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-runtime-restarting");
    q.condition = "kerneldeadlock"; /* names are exact, as the API server keeps them */
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-condition");
    q.condition = NULL; /* a finding without a condition never matches a rule naming some */
    assert_string_equal(p->rules[gh_policy_match(p, &q)].name, "node-condition");
    q = (struct gh_policy_query){GH_CLASS_INTERCONNECT, GH_KIND_NODE_CONDITION, -1, GH_SEV_HIGH,
                                 false, 0, false, GH_IMPACT_NONE, "FabricManagerDown"};
    int r = gh_policy_match(p, &q);
    assert_string_equal(p->rules[r].name, "gpu-fabric-manager-down");
    assert_int_equal(p->rules[r].n_actions, 2);
    assert_int_equal(p->rules[r].actions[0], GH_ACT_ISOLATE_NODE);
    gh_policy_free(p);

    const char *y = "version: 1\n"                                                  /* 1 */
                    "rules:\n"                                                      /* 2 */
                    "  - name: a\n"                                                 /* 3 */
                    "    match: {condition: [KernelDeadlock, example.com/Gpu]}\n"   /* 4 */
                    "    actions: [drain_node]\n"                                   /* 5 */
                    "  - name: b\n"                                                 /* 6 */
                    "    match: {kind: node_condition, condition: KernelDeadlock}\n"
                    "    actions: [isolate_node]\n"                                 /* 8 */
                    "  - name: c\n"                                                 /* 9 */
                    "    match: {kind: node_condition, condition: [Other]}\n"       /* 10 */
                    "    actions: [isolate_node]\n";                                /* 11 */
    struct gh_policy_diags d;
    p = parse(y, &d);
    dump(&d);
    assert_non_null(p);
    assert_int_equal(p->rules[0].n_conditions, 2);
    assert_string_equal(p->rules[0].conditions[1], "example.com/Gpu");
    assert_true(has_diag(&d, 6, false, "can never match: rule \"a\""));
    assert_false(has_diag(&d, 9, false, "can never match"));
    gh_policy_free(p);

    y = "version: 1\n"
        "rules:\n"
        "  - name: bad\n"
        "    match: {kind: xid, condition: [\"-x\", \"has space\", KernelDeadlock, KernelDeadlock]}\n"
        "    actions: [drain_node]\n";
    p = parse(y, &d);
    dump(&d);
    assert_null(p);
    assert_true(has_diag(&d, 4, true, "match.condition: \"-x\" is not a Node condition type"));
    assert_true(has_diag(&d, 4, true, "match.condition: \"has space\" is not"));
    assert_true(has_diag(&d, 4, false, "\"KernelDeadlock\" is listed twice"));
    assert_true(has_diag(&d, 3, false, "the rule's kinds exclude them"));
}

static void test_durations(void **st)
{
    (void)st;
    int64_t ns;
    assert_true(gh_policy_parse_duration("2s", &ns) && ns == 2000000000LL);
    assert_true(gh_policy_parse_duration("1.5m", &ns) && ns == 90000000000LL);
    assert_true(gh_policy_parse_duration("7d", &ns) && ns == 7LL * 86400 * 1000000000LL);
    assert_true(gh_policy_parse_duration("30", &ns) && ns == 30000000000LL);
    assert_false(gh_policy_parse_duration("-1s", &ns));
    assert_false(gh_policy_parse_duration("5 minutes", &ns));
    assert_false(gh_policy_parse_duration("", &ns));
    assert_false(gh_policy_parse_duration("1e30d", &ns));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_clean),  cmocka_unit_test(test_default_equals_file),
        cmocka_unit_test(test_lint_line_numbers), cmocka_unit_test(test_yaml_syntax_error),
        cmocka_unit_test(test_match_and_escalation), cmocka_unit_test(test_custom_policy),
        cmocka_unit_test(test_node_down_rule_and_settings),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_condition_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
