/* fuzz_policy_lint.c - libFuzzer target for what `gpuheal policy lint` adds
 * to a RecoveryPolicy object: arbitrary bytes as YAML text, the line of a
 * few field paths in it (gh_yaml_line_of: never past the text's last line)
 * and, when the text is a JSON-able document, the CRD schema's problems
 * (gh_schema_check: each with a terminated path and message). Seeds:
 * test/fuzz/policy_lint/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/schema.h"
#include "kube/yaml_json.h"
#include "kube/yaml_lines.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz_policy_lint: %s\n", what);
    abort();
}

static int problem(void *ctx, const struct gh_schema_problem *p)
{
    (void)ctx;
    if (strnlen(p->path, sizeof p->path) == sizeof p->path ||
        strnlen(p->msg, sizeof p->msg) == sizeof p->msg || !p->msg[0])
        die("a problem without a terminated path or message");
    return 0;
}

static json_t *schema;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!schema) {
        const char *crd = gh_crd_recoverypolicy_yaml();
        json_t *doc = NULL;
        struct gh_err err = {{0}};
        if (gh_yaml_to_json(crd, strlen(crd), &doc, &err) != GH_OK)
            die("the embedded CRD does not parse");
        schema = json_object_get(
            json_object_get(
                json_array_get(json_object_get(json_object_get(doc, "spec"), "versions"), 0),
                "schema"),
            "openAPIV3Schema");
        if (!schema)
            die("no openAPIV3Schema in the CRD");
        json_incref(schema);
        json_decref(doc);
    }
    const char *text = (const char *)data;
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || data[i] == '\r';
    static const char *const paths[] = {
        "spec", "spec.rules", "spec.rules[0]", "spec.rules[0].match.class", "metadata.name",
        "",     "[0]"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int l = gh_yaml_line_of(text, size, paths[i]);
        if (l < 0 || (size_t)l > lines)
            die("a line past the text's end");
    }
    json_t *doc = NULL;
    struct gh_err err = {{0}};
    if (gh_yaml_to_json(text, size, &doc, &err) != GH_OK)
        return 0;
    gh_schema_check(schema, doc, "", problem, NULL);
    json_decref(doc);
    return 0;
}
