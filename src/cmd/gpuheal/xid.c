/* xid.c - `gpuheal xid [--json] [--policy FILE] [CODE...]`: the XID catalog
 * as the engine sees it, and what the policy's rule for each code does (the
 * catalog's own suggestions are not what runs: the rule's actions are). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "engine/policy.h"
#include "signal/xid_catalog.h"

/* What the policy does for one code: its first matching rule (the one the
 * decision stage starts from), that rule's actions at its first incident on
 * a node, and whether a rule before it matches on impact (then a harmed or
 * unharmed job can change the rule). */
struct verdict {
    const struct gh_rule *rule; /* NULL: no rule matches, nothing but a record */
    int n_actions;
    enum gh_action actions[GH_POLICY_MAX_ACTIONS];
    bool by_impact;
    bool stated; /* the line's own words come first (XID 154's recovery action) */
};

static void verdict_of(const struct gh_policy *p, const struct gh_xid_info *x, int code,
                       struct verdict *v)
{
    memset(v, 0, sizeof *v);
    struct gh_policy_query q = {
        .cls = x->cls, .kind = GH_KIND_XID, .code = code, .severity = x->severity};
    int at = gh_policy_match(p, &q);
    v->by_impact = gh_policy_impact_matters(p, &q, at);
    v->stated = code == 154;
    if (at < 0)
        return;
    v->rule = &p->rules[at];
    if (v->rule->catalog_actions) {
        v->n_actions = x->n_actions < GH_POLICY_MAX_ACTIONS ? x->n_actions : GH_POLICY_MAX_ACTIONS;
        memcpy(v->actions, x->actions, (size_t)v->n_actions * sizeof v->actions[0]);
    } else {
        int none[GH_POLICY_MAX_ESCALATIONS] = {0}, level = 0;
        v->n_actions = gh_policy_actions(v->rule, none, v->actions, &level);
    }
}

static json_t *actions_json(const enum gh_action *a, int n)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_string(gh_action_name(a[i])));
    return arr;
}

static json_t *info_json(const struct gh_xid_info *x, long asked, const struct verdict *v)
{
    json_t *rule = json_pack("{s:s?, s:o, s:b, s:b}", "name", v->rule ? v->rule->name : NULL,
                             "actions", actions_json(v->actions, v->n_actions), "by_impact",
                             v->by_impact, "stated_first", v->stated);
    return json_pack("{s:I, s:b, s:s, s:s, s:s, s:s, s:b, s:b, s:o, s:o}", "code",
                     (json_int_t)asked, "known", x->code >= 0, "name", x->name, "summary",
                     x->summary, "class", gh_class_name(x->cls), "severity",
                     gh_severity_name(x->severity), "application", x->application, "secondary",
                     x->secondary, "actions", actions_json(x->actions, x->n_actions), "rule", rule);
}

static void print_header(void)
{
    printf("%-5s %-22s %-8s %-24s %-48s %s\n", "CODE", "CLASS", "SEVERITY", "RULE",
           "ACTIONS (the rule's, first incident)", "SUMMARY");
}

static void print_text(const struct gh_xid_info *x, long asked, const struct verdict *v)
{
    char actions[256] = "";
    size_t used = 0;
    if (v->stated)
        used += (size_t)snprintf(actions, sizeof actions, "the line's stated action,");
    for (int i = 0; i < v->n_actions && used < sizeof actions; i++)
        used += (size_t)snprintf(actions + used, sizeof actions - used, "%s%s", i ? "," : "",
                                 gh_action_name(v->actions[i]));
    if (!v->n_actions && used < sizeof actions)
        used += (size_t)snprintf(actions + used, sizeof actions - used, "none (recorded)");
    if (v->by_impact && used < sizeof actions)
        snprintf(actions + used, sizeof actions - used, " (or by the job's harm)");
    printf("%-5ld %-22s %-8s %-24s %-48s %s\n", asked, gh_class_name(x->cls),
           gh_severity_name(x->severity), v->rule ? v->rule->name : "-", actions, x->summary);
}

static void emit(const struct gh_policy *p, const struct gh_xid_info *x, long asked, int as_json)
{
    struct verdict v;
    verdict_of(p, x, (int)asked, &v);
    if (as_json) {
        json_t *j = info_json(x, asked, &v);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s)
            puts(s);
        free(s);
        json_decref(j);
    } else {
        print_text(x, asked, &v);
    }
}

int gh_cmd_xid(int argc, char **argv)
{
    int as_json = 0, first = 1;
    const char *policy_path = NULL;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (strcmp(argv[first], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[first], "--policy") == 0 && first + 1 < argc) {
            policy_path = argv[++first];
        } else if (strcmp(argv[first], "-h") == 0 || strcmp(argv[first], "--help") == 0) {
            printf("usage: gpuheal xid [--json] [--policy FILE] [CODE...]\n"
                   "Prints the catalog (all codes, or the given ones): class, severity, and\n"
                   "the policy's rule for the code (the built-in default unless --policy)\n"
                   "with the actions it takes at a node's first incident. Escalations, a\n"
                   "job's harm and the fleet's view can change them (docs/engine.md); XID\n"
                   "154's line states its recovery action, which comes first. An unknown\n"
                   "code maps to class unknown. --json adds the catalog's own suggested\n"
                   "actions (\"actions\") next to the rule's (\"rule\").\n");
            return 0;
        } else {
            fprintf(stderr, "gpuheal xid: unknown option \"%s\"\n", argv[first]);
            return 2;
        }
    }
    struct gh_policy *policy = policy_path ? gh_cmd_load_policy(policy_path)
                                           : gh_policy_new_default();
    if (!policy)
        return policy_path ? 2 : 1;
    int rc = 0;
    for (int i = first; i < argc; i++) {
        char *end;
        long code = strtol(argv[i], &end, 10);
        if (end == argv[i] || *end || code < 0 || code > 1000000) {
            fprintf(stderr, "gpuheal xid: \"%s\" is not an XID code (a non-negative integer)\n",
                    argv[i]);
            rc = 2;
            goto out;
        }
    }
    if (!as_json)
        print_header();
    if (first == argc)
        for (int i = 0; i < gh_xid_count(); i++)
            emit(policy, gh_xid_at(i), gh_xid_at(i)->code, as_json);
    for (int i = first; i < argc; i++)
        emit(policy, gh_xid_lookup((int)strtol(argv[i], NULL, 10)), strtol(argv[i], NULL, 10),
             as_json);
out:
    gh_policy_free(policy);
    return rc;
}
