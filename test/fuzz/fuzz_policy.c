/* fuzz_policy.c - libFuzzer target for the policy parser and linter:
 * arbitrary bytes as a policy file. Every accepted policy must be internally
 * consistent (bounded counts, known names) and reparse to an equal policy
 * after its rules are matched against a few findings. Seeds: test/fuzz/policy/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/policy.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz_policy: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gh_policy *p = NULL;
    struct gh_policy_diags d;
    int rc = gh_policy_parse((const char *)data, size, &p, &d);
    if ((rc == GH_OK) != (p != NULL))
        die("return code and result disagree");
    if (d.n > GH_POLICY_MAX_DIAGS || d.n > d.errors + d.warnings)
        die("diagnostic counts");
    for (int i = 0; i < d.n; i++)
        if (strnlen(d.d[i].msg, sizeof d.d[i].msg) == sizeof d.d[i].msg)
            die("unterminated diagnostic");
    if (!p)
        return 0;
    if (d.errors)
        die("a policy with errors was accepted");
    if (p->n_rules < 0 || p->n_rules > GH_POLICY_MAX_RULES)
        die("rule count");
    for (int i = 0; i < p->n_rules; i++) {
        const struct gh_rule *r = &p->rules[i];
        if ((r->n_actions < 1 && !r->catalog_actions) || r->n_actions > GH_POLICY_MAX_ACTIONS ||
            (r->catalog_actions && r->n_actions) || r->repetitions < 1 ||
            r->n_codes > GH_POLICY_MAX_CODES || r->n_escalations > GH_POLICY_MAX_ESCALATIONS)
            die("rule bounds");
        for (int a = 0; a < r->n_actions; a++)
            if ((unsigned)r->actions[a] >= GH_ACT__COUNT)
                die("action out of range");
        int earlier[GH_POLICY_MAX_ESCALATIONS] = {5, 5, 5, 5};
        enum gh_action out[GH_POLICY_MAX_ACTIONS];
        int level;
        int n = gh_policy_actions(r, earlier, out, &level);
        /* a [catalog] rule names no actions of its own: 0 until it escalates */
        int least = r->catalog_actions && level == 0 ? 0 : 1;
        if (n < least || n > GH_POLICY_MAX_ACTIONS || level < 0 || level > r->n_escalations)
            die("escalation");
    }
    for (int c = 0; c < GH_CLASS__COUNT; c++) {
        struct gh_policy_query q = {(enum gh_class)c, GH_KIND_XID, 79, GH_SEV_CRITICAL, true, 1e6, false, GH_IMPACT_NONE, NULL};
        int r = gh_policy_match(p, &q);
        if (r < -1 || r >= p->n_rules)
            die("match index");
    }
    gh_policy_free(p);
    return 0;
}
