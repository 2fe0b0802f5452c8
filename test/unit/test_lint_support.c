/* test_lint_support.c - unit tests of what `gpuheal policy lint` reports
 * with: the nearest known word ("did you mean"), the line of a field path in
 * YAML text, and the CRD schema check (types, unknown fields, required,
 * enums, bounds, patterns, int-or-string) on the embedded RecoveryPolicy
 * CRD. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/closest.h"
#include "kube/schema.h"
#include "kube/yaml_json.h"
#include "kube/yaml_lines.h"

static void test_closest(void **st)
{
    (void)st;
    static const char *const keys[] = {"version", "settings", "rules", NULL};
    assert_string_equal(gh_closest_word("rulez", keys), "rules");
    assert_string_equal(gh_closest_word("setings", keys), "settings");
    assert_null(gh_closest_word("bogus", keys));
    static const char *const cls[] = {"class", "kind", "codes", NULL};
    assert_string_equal(gh_closest_word("clas", cls), "class");
    assert_null(gh_closest_word("cl", cls)); /* short words: 1 edit at most */
    char longw[100];
    memset(longw, 'a', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    assert_null(gh_closest_word(longw, keys));
}

static const char doc[] = "apiVersion: gpuheal.io/v1alpha1\n"      /* 1 */
                          "kind: RecoveryPolicy\n"                 /* 2 */
                          "metadata: {name: p}\n"                  /* 3 */
                          "spec:\n"                                /* 4 */
                          "  dryRun: flase\n"                      /* 5 */
                          "  rules:\n"                             /* 6 */
                          "    - name: a\n"                        /* 7 */
                          "      match: {class: x}\n"              /* 8 */
                          "    - name: b\n"                        /* 9 */
                          "      match:\n"                         /* 10 */
                          "        clas: gpu_hardware\n"           /* 11 */
                          "      actions: [{action: none}]\n"      /* 12 */
                          "  budgets: {maxUnavailableNodes: 3}\n"; /* 13 */

static void test_line_of(void **st)
{
    (void)st;
    size_t n = strlen(doc);
    assert_int_equal(gh_yaml_line_of(doc, n, "kind"), 2);
    assert_int_equal(gh_yaml_line_of(doc, n, "metadata.name"), 3);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec"), 4);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.dryRun"), 5);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules"), 6);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[0]"), 7);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[0].match.class"), 8);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[1]"), 9);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[1].match.clas"), 11);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[1].actions[0].action"), 12);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.budgets.maxUnavailableNodes"), 13);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.rules[2]"), 0);
    assert_int_equal(gh_yaml_line_of(doc, n, "spec.nope"), 0);
    assert_int_equal(gh_yaml_line_of("a: [", 4, "a"), 1); /* up to where it parses */
    assert_int_equal(gh_yaml_line_of("", 0, "a"), 0);
}

struct got {
    int n;
    char all[4096];
};

static int collect(void *ctx, const struct gh_schema_problem *p)
{
    struct got *g = ctx;
    size_t u = strlen(g->all);
    snprintf(g->all + u, sizeof g->all - u, "%s: %s\n", p->path, p->msg);
    g->n++;
    return 0;
}

static json_t *crd_schema(void)
{
    const char *crd = gh_crd_recoverypolicy_yaml();
    json_t *d = NULL;
    struct gh_err err = {{0}};
    assert_int_equal(gh_yaml_to_json(crd, strlen(crd), &d, &err), GH_OK);
    json_t *s = json_object_get(
        json_object_get(json_array_get(json_object_get(json_object_get(d, "spec"), "versions"), 0),
                        "schema"),
        "openAPIV3Schema");
    assert_non_null(s);
    json_incref(s);
    json_decref(d);
    return s;
}

static void test_schema(void **st)
{
    (void)st;
    json_t *schema = crd_schema();
    json_t *v = NULL;
    struct gh_err err = {{0}};
    assert_int_equal(gh_yaml_to_json(doc, strlen(doc), &v, &err), GH_OK);
    struct got g = {0};
    size_t found = gh_schema_check(schema, v, "", collect, &g);
    assert_int_equal(found, (size_t)g.n);
    assert_non_null(
        strstr(g.all, "spec.dryRun: a boolean (true or false) is needed, not a string \"flase\""));
    assert_non_null(
        strstr(g.all, "spec.rules[0].match.class: \"x\" is not one of the allowed values\n"));
    assert_non_null(strstr(g.all, "spec.rules[0].actions: required, missing"));
    assert_non_null(strstr(g.all, "spec.rules[1].match.class: required, missing"));
    assert_non_null(strstr(
        g.all, "spec.rules[1].match.clas: unknown field \"clas\" (did you mean \"class\"?)"));
    assert_int_equal(g.n, 5);
    json_decref(v);

    /* int-or-string, bounds, patterns; metadata is not checked field by field */
    const char *ok = "apiVersion: gpuheal.io/v1alpha1\nkind: RecoveryPolicy\n"
                     "metadata: {name: p, labels: {a: b}}\n"
                     "spec:\n  budgets: {maxUnavailableNodes: \"10%\", nodeCooldown: 30m}\n"
                     "  rules: [{name: a, match: {class: gpu_hardware, codes: [79], window: 1h30m},"
                     " actions: [{action: isolate_node}]}]\n";
    assert_int_equal(gh_yaml_to_json(ok, strlen(ok), &v, &err), GH_OK);
    memset(&g, 0, sizeof g);
    assert_int_equal(gh_schema_check(schema, v, "", collect, &g), 0);
    json_decref(v);
    const char *bad = "spec:\n  budgets: {maxUnavailableNodes: true, nodeCooldown: soon}\n"
                      "  rules: [{name: Bad_Name, match: {class: gpu_hardware, codes: [70000]},"
                      " actions: []}]\n";
    assert_int_equal(gh_yaml_to_json(bad, strlen(bad), &v, &err), GH_OK);
    memset(&g, 0, sizeof g);
    gh_schema_check(schema, v, "", collect, &g);
    assert_non_null(strstr(
        g.all,
        "spec.budgets.maxUnavailableNodes: an integer or a string is needed, not a boolean true"));
    assert_non_null(strstr(g.all, "spec.budgets.nodeCooldown: \"soon\" does not match"));
    assert_non_null(strstr(g.all, "spec.rules[0].name: \"Bad_Name\" does not match"));
    assert_non_null(
        strstr(g.all, "spec.rules[0].match.codes[0]: 70000 is above the maximum 65535"));
    assert_non_null(strstr(g.all, "spec.rules[0].actions: at least 1 item needed"));
    json_decref(v);
    json_decref(schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_line_of),
        cmocka_unit_test(test_schema),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
