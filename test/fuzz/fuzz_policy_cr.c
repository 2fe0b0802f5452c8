/* fuzz_policy_cr.c - libFuzzer target for RecoveryPolicy objects as the
 * controller and `gpuheal policy lint` read them: arbitrary bytes as YAML
 * (gh_yaml_to_json), offered to a policy set (gh_policy_crset_offer: the
 * spec's rules, nodeSelector and priority checked and converted). A verdict
 * is either accepted with a bounded rule count or refused with a reason and
 * a message; the merged policy stays within the engine's bounds. Seeds:
 * test/fuzz/policy_cr/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "control/policy_cr.h"
#include "kube/yaml_json.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz_policy_cr: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL;
    struct gh_err err = {{0}};
    if (gh_yaml_to_json((const char *)data, size, &doc, &err) != GH_OK)
        return 0;
    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *set = base ? gh_policy_crset_new(base) : NULL;
    if (!set)
        die("out of memory");
    for (int pass = 0; pass < 2; pass++) { /* the second pass: already judged */
        gh_policy_crset_begin(set);
        struct gh_policy_cr_verdict v;
        gh_policy_crset_offer(set, doc, &v);
        if (strnlen(v.message, sizeof v.message) == sizeof v.message ||
            strnlen(v.reason, sizeof v.reason) == sizeof v.reason)
            die("unterminated verdict");
        if (v.accepted && (v.rules < 0 || v.rules > GH_POLICY_MAX_RULES || strcmp(v.reason, "Accepted")))
            die("accepted verdict");
        if (!v.accepted && (!v.reason[0] || !v.message[0]))
            die("a refusal without a reason or message");
        int n = 0;
        struct gh_policy *merged = gh_policy_crset_end(set, &n);
        if (merged && (merged->n_rules < 0 || merged->n_rules > GH_POLICY_MAX_RULES))
            die("merged rule count");
        if (n < 0 || n > 1)
            die("objects in force");
        gh_policy_free(merged);
    }
    gh_policy_crset_free(set);
    gh_policy_free(base);
    json_decref(doc);
    return 0;
}
