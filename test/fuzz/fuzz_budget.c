/* fuzz_budget.c - libFuzzer target for the node budget parser
 * (gh_guard_parse_budget, what --max-unavailable and a RecoveryPolicy's
 * budgets.maxUnavailableNodes go through) and gh_policy_cr_budget on the
 * same bytes as a JSON value: never both caps set, a count within 0 to
 * 1000000, a percentage within 0 to 100, an error always with a message;
 * a budget accepted as a string is accepted again from its own formatting
 * (aborts otherwise). Seeds: test/fuzz/budget/. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/guard.h"
#include "control/policy_cr.h"

static void check(int rc, int nodes, double pct, const struct gh_err *err)
{
    if (rc == GH_OK) {
        if ((nodes >= 0) == (pct >= 0) || nodes > 1000000 || pct > 100)
            abort();
    } else if (rc != GH_EINVAL || !err->msg[0]) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int nodes;
    double pct;
    struct gh_err err = {{0}};
    int rc = gh_guard_parse_budget(s, &nodes, &pct, &err);
    check(rc, nodes, pct, &err);
    if (rc == GH_OK) {
        char again[64];
        if (nodes >= 0)
            snprintf(again, sizeof again, "%d", nodes);
        else
            snprintf(again, sizeof again, "%.6f%%", pct);
        int n2;
        double p2;
        if (gh_guard_parse_budget(again, &n2, &p2, &err) != GH_OK || n2 != nodes ||
            (pct >= 0 && p2 < 0))
            abort();
    }
    /* the same bytes as a JSON value of budgets.maxUnavailableNodes */
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (v) {
        json_t *b = json_object();
        json_object_set_new(b, "maxUnavailableNodes", v);
        memset(&err, 0, sizeof err);
        rc = gh_policy_cr_budget(b, &nodes, &pct, &err);
        if (rc == GH_OK && json_is_null(v)) {
            if (nodes >= 0 || pct >= 0)
                abort();
        } else {
            check(rc, nodes, pct, &err);
        }
        json_decref(b);
    }
    free(s);
    return 0;
}
