/* test_policy_selector.c - RecoveryPolicy spec.nodeSelector: which nodes'
 * labels a selector selects, which object a rule of the merged policy
 * belongs to and whether it governs a node (priority order, objects
 * without a selector, the base policy's rules), invalid selectors
 * rejected, a selector change seen as a change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "control/policy_cr.h"
#include "engine/engine.h"

#define NOW (1795935600LL * GH_NS_PER_S) /* 2026-11-29T07:00:00Z */

static void test_selects(void **st)
{
    (void)st;
    json_t *labels = json_pack("{s:s, s:s}", "gpuheal.io/pool", "a", "zone", "z1");
    json_t *empty = json_object();
    json_t *pool_a = json_pack("{s:s}", "gpuheal.io/pool", "a");
    json_t *pool_b = json_pack("{s:s}", "gpuheal.io/pool", "b");
    json_t *both = json_pack("{s:s, s:s}", "gpuheal.io/pool", "a", "zone", "z1");
    json_t *both_off = json_pack("{s:s, s:s}", "gpuheal.io/pool", "a", "zone", "z2");
    json_t *other = json_pack("{s:s}", "rack", "r1");
    json_t *prefix = json_pack("{s:s}", "gpuheal.io/pool", "");
    assert_true(gh_policy_cr_selects(NULL, labels));
    assert_true(gh_policy_cr_selects(empty, labels));
    assert_true(gh_policy_cr_selects(empty, NULL));
    assert_true(gh_policy_cr_selects(pool_a, labels));
    assert_false(gh_policy_cr_selects(pool_b, labels));
    assert_true(gh_policy_cr_selects(both, labels));
    assert_false(gh_policy_cr_selects(both_off, labels));
    assert_false(gh_policy_cr_selects(other, labels));
    assert_false(gh_policy_cr_selects(prefix, labels));
    assert_false(gh_policy_cr_selects(pool_a, NULL));
    assert_false(gh_policy_cr_selects(pool_a, empty));
    json_t *objs[] = {labels, empty, pool_a, pool_b, both, both_off, other, prefix};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        json_decref(objs[i]);
}

/* a RecoveryPolicy object with one rule, for XID 79, doing action */
static json_t *rp(const char *name, int gen, int prio, json_t *selector, const char *rule,
                  const char *action)
{
    json_t *o = json_pack("{s:{s:s, s:i}, s:{s:i, s:[{s:s, s:{s:s, s:[i]}, s:[{s:s}]}]}}",
                          "metadata", "name", name, "generation", gen, "spec", "priority", prio,
                          "rules", "name", rule, "match", "class", "gpu_hardware", "codes", 79,
                          "actions", "action", action);
    assert_non_null(o);
    if (selector)
        json_object_set_new(json_object_get(o, "spec"), "nodeSelector", selector);
    return o;
}

static int rule_index(const struct gh_policy *p, const char *name)
{
    for (int i = 0; i < p->n_rules; i++)
        if (!strcmp(p->rules[i].name, name))
            return i;
    return -1;
}

static void test_governs(void **st)
{
    (void)st;
    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *s = gh_policy_crset_new(base);
    struct gh_policy_cr_verdict v;
    json_t *node_a = json_pack("{s:s}", "gpuheal.io/pool", "a");
    json_t *node_b = json_pack("{s:s}", "gpuheal.io/pool", "b");
    char why[256];

    /* no objects: the base policy's rules govern every node */
    gh_policy_crset_begin(s);
    int from = -1;
    struct gh_policy *p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 0);
    for (int i = 0; i < p->n_rules; i++)
        assert_true(gh_policy_crset_governs(s, i, node_b, why, sizeof why));
    assert_false(gh_policy_crset_has_selectors(s));
    gh_policy_free(p);

    /* pool-a (priority 10, selector) over catch-all (priority 0) */
    json_t *a = rp("pool-a", 1, 10, json_pack("{s:s}", "gpuheal.io/pool", "a"), "a-xid79",
                   "isolate_node");
    json_t *all = rp("catch-all", 1, 0, NULL, "all-xid79", "run_diagnostics");
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, all, &v);
    if (!v.accepted)
        fprintf(stderr, "%s: %s\n", v.reason, v.message);
    assert_true(v.accepted);
    gh_policy_crset_offer(s, a, &v);
    assert_true(v.accepted);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 2);
    int ra = rule_index(p, "a-xid79"), rall = rule_index(p, "all-xid79");
    assert_int_equal(ra, 0); /* the higher priority first */
    assert_int_equal(rall, 1);
    assert_true(gh_policy_crset_governs(s, ra, node_a, why, sizeof why));
    why[0] = '\0';
    assert_false(gh_policy_crset_governs(s, ra, node_b, why, sizeof why));
    assert_string_equal(why, "RecoveryPolicy pool-a governs only nodes with the labels "
                             "gpuheal.io/pool=a");
    assert_false(gh_policy_crset_governs(s, ra, NULL, why, sizeof why)); /* unknown node */
    assert_true(gh_policy_crset_governs(s, rall, node_b, why, sizeof why));
    assert_true(gh_policy_crset_governs(s, rall, NULL, why, sizeof why));
    assert_true(gh_policy_crset_governs(s, 99, node_b, why, sizeof why)); /* no object's */
    assert_true(gh_policy_crset_has_selectors(s));
    gh_policy_free(p);

    /* the selector changes (new generation, same rules): seen as a change;
     * now it selects pool b */
    json_decref(a);
    a = rp("pool-a", 2, 10, json_pack("{s:s}", "gpuheal.io/pool", "b"), "a-xid79",
           "isolate_node");
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, all, &v);
    gh_policy_crset_offer(s, a, &v);
    assert_true(v.accepted);
    assert_true(v.changed);
    p = gh_policy_crset_end(s, &from);
    assert_null(p); /* the merged rules are the same: the engine keeps its policy */
    assert_true(gh_policy_crset_governs(s, ra, node_b, why, sizeof why));
    assert_false(gh_policy_crset_governs(s, ra, node_a, why, sizeof why));

    /* an invalid selector is rejected, the previous version stays */
    json_decref(a);
    a = rp("pool-a", 3, 10, json_pack("{s:i}", "gpuheal.io/pool", 1), "a-xid79", "isolate_node");
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, all, &v);
    gh_policy_crset_offer(s, a, &v);
    assert_false(v.accepted);
    assert_string_equal(v.reason, "InvalidRule");
    assert_non_null(strstr(v.message, "spec.nodeSelector.gpuheal.io/pool: a string value"));
    assert_null(gh_policy_crset_end(s, &from));
    assert_true(gh_policy_crset_governs(s, ra, node_b, why, sizeof why));
    assert_false(gh_policy_crset_governs(s, ra, node_a, why, sizeof why));

    /* swapped priorities: the catch-all's rule first, then pool-a's */
    json_decref(a);
    json_decref(all);
    a = rp("pool-a", 4, 0, json_pack("{s:s}", "gpuheal.io/pool", "a"), "a-xid79", "isolate_node");
    all = rp("catch-all", 2, 10, NULL, "all-xid79", "run_diagnostics");
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, a, &v);
    gh_policy_crset_offer(s, all, &v);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(rule_index(p, "all-xid79"), 0);
    assert_int_equal(rule_index(p, "a-xid79"), 1);
    assert_true(gh_policy_crset_governs(s, 0, node_b, why, sizeof why));
    assert_false(gh_policy_crset_governs(s, 1, node_b, why, sizeof why));
    assert_true(gh_policy_crset_governs(s, 1, node_a, why, sizeof why));
    gh_policy_free(p);

    /* the selective object deleted: its rules are gone with it */
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, all, &v);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(p->n_rules, 1);
    assert_true(gh_policy_crset_governs(s, 0, node_a, why, sizeof why));
    assert_false(gh_policy_crset_has_selectors(s));
    gh_policy_free(p);

    json_decref(a);
    json_decref(all);
    json_decref(node_a);
    json_decref(node_b);
    gh_policy_crset_free(s);
    gh_policy_free(base);
}

/* ---- the engine picks, per node, the first rule that governs it */

struct filter_ctx {
    const struct gh_policy_crset *s;
    json_t *labels; /* node name -> labels */
};

static bool filter(void *ctx, int rule, const char *node)
{
    struct filter_ctx *fc = ctx;
    return gh_policy_crset_governs(fc->s, rule, json_object_get(fc->labels, node), NULL, 0);
}

struct decided {
    int n;
    char node[4][16], rule[4][32];
    enum gh_action act[4];
};

static void on_inc(void *ctx, const struct gh_incident *inc)
{
    struct decided *d = ctx;
    if (d->n == 4)
        return;
    snprintf(d->node[d->n], sizeof d->node[0], "%s", inc->node ? inc->node : "");
    snprintf(d->rule[d->n], sizeof d->rule[0], "%s", inc->rule ? inc->rule : "");
    d->act[d->n] = inc->n_actions ? inc->actions[0] : GH_ACT_NONE;
    d->n++;
}

static int64_t fixed_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

static void xid79(struct gh_engine *e, const char *node, int64_t t)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = t;
    s.source = GH_SRC_KMSG;
    s.kind = GH_KIND_XID;
    s.code = 79;
    s.gpu = 0;
    gh_signal_set_str(&s.node, node, strlen(node));
    gh_signal_set_str(&s.msg, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", 60);
    assert_int_equal(gh_engine_ingest_steal(e, &s, t, NULL), GH_OK);
    gh_signal_clear(&s);
}

static const struct decided *find(const struct decided *d, const char *node, int *i)
{
    for (*i = 0; *i < d->n; (*i)++)
        if (!strcmp(d->node[*i], node))
            return d;
    return NULL;
}

static void test_engine_filter(void **st)
{
    (void)st;
    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *s = gh_policy_crset_new(base);
    struct gh_policy_cr_verdict v;
    json_t *a = rp("pool-a", 1, 10, json_pack("{s:s}", "gpuheal.io/pool", "a"), "a-xid79",
                   "isolate_node");
    json_t *b = rp("pool-b", 1, 5, json_pack("{s:s}", "gpuheal.io/pool", "b"), "b-xid79",
                   "run_diagnostics");
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, a, &v);
    gh_policy_crset_offer(s, b, &v);
    int from;
    struct gh_policy *p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 2);
    assert_true(gh_policy_crset_has_selectors(s));
    struct filter_ctx fc = {s, json_pack("{s:{s:s}, s:{s:s}, s:{}}", "a1", "gpuheal.io/pool", "a",
                                         "b1", "gpuheal.io/pool", "b", "c1")};
    int64_t t = NOW;
    struct gh_clock clk = {fixed_now, &t};
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct decided d = {0};
    struct gh_err err;
    struct gh_engine *e = gh_engine_new(p, NULL, &clk, &cfg, on_inc, &d, &err);
    assert_non_null(e);
    gh_engine_set_rule_filter(e, filter, &fc);
    xid79(e, "a1", NOW);
    xid79(e, "b1", NOW + 1000);
    xid79(e, "c1", NOW + 2000);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(d.n, 3);
    int i;
    /* pool a: its own object's rule, although pool b's matches too */
    assert_non_null(find(&d, "a1", &i));
    assert_string_equal(d.rule[i], "a-xid79");
    assert_int_equal(d.act[i], GH_ACT_ISOLATE_NODE);
    /* pool b: the lower priority's rule, the higher one not governing it */
    assert_non_null(find(&d, "b1", &i));
    assert_string_equal(d.rule[i], "b-xid79");
    assert_int_equal(d.act[i], GH_ACT_RUN_DIAGNOSTICS);
    /* no pool: none governs; the first match decided (the controller
     * records it without action, saying why) */
    assert_non_null(find(&d, "c1", &i));
    assert_string_equal(d.rule[i], "a-xid79");
    assert_false(filter(&fc, 0, "c1") || filter(&fc, 1, "c1"));
    gh_engine_free(e);

    /* without the filter, the first match everywhere (as before) */
    memset(&d, 0, sizeof d);
    e = gh_engine_new(p, NULL, &clk, &cfg, on_inc, &d, &err);
    assert_non_null(e);
    xid79(e, "b1", NOW);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.rule[0], "a-xid79");
    gh_engine_free(e);

    json_decref(fc.labels);
    json_decref(a);
    json_decref(b);
    gh_policy_free(p);
    gh_policy_crset_free(s);
    gh_policy_free(base);
}

/* spec.budgets.maxUnavailableNodes: 0 is zero nodes (it read as "no cap"),
 * an out-of-range value ("150%", -1, a bool) refuses the object with a
 * message naming the field */
static void test_budget(void **st)
{
    (void)st;
    int n;
    double p;
    struct gh_err e;
    json_t *b = json_pack("{s:i}", "maxUnavailableNodes", 0);
    assert_int_equal(gh_policy_cr_budget(b, &n, &p, &e), GH_OK);
    assert_int_equal(n, 0);
    assert_true(p < 0);
    json_object_set_new(b, "maxUnavailableNodes", json_string("0%"));
    assert_int_equal(gh_policy_cr_budget(b, &n, &p, &e), GH_OK);
    assert_int_equal(n, -1);
    assert_true(p == 0);
    assert_int_equal(gh_policy_cr_budget(NULL, &n, &p, &e), GH_OK);
    assert_true(n == -1 && p < 0);
    json_object_set_new(b, "maxUnavailableNodes", json_integer(-1));
    assert_int_equal(gh_policy_cr_budget(b, &n, &p, &e), GH_EINVAL);
    json_object_set_new(b, "maxUnavailableNodes", json_true());
    assert_int_equal(gh_policy_cr_budget(b, &n, &p, &e), GH_EINVAL);
    json_object_set_new(b, "maxUnavailableNodes", json_string("150%"));
    assert_int_equal(gh_policy_cr_budget(b, &n, &p, &e), GH_EINVAL);
    assert_string_equal(e.msg,
                        "spec.budgets.maxUnavailableNodes: \"150%\": a percentage is 0% to 100%");

    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *s = gh_policy_crset_new(base);
    json_t *o = rp("budget", 1, 10, NULL, "r-xid79", "isolate_node");
    json_object_set(json_object_get(o, "spec"), "budgets", b);
    struct gh_policy_cr_verdict v;
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, o, &v);
    assert_false(v.accepted);
    assert_string_equal(v.reason, "InvalidBudget");
    assert_non_null(strstr(v.message, "150%"));
    gh_policy_free(gh_policy_crset_end(s, NULL));
    gh_policy_crset_free(s);
    gh_policy_free(base);
    json_decref(o);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selects),
        cmocka_unit_test(test_governs),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_engine_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
