/* test_guard.c - the guards: node budget (absolute and percent), hourly
 * action rate, per-node cooldown, storm breaker (never blocking a return to
 * service), dry run and approval; no node action for an incident that
 * blames no node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/timeutil.h"
#include "control/guard.h"

#define S GH_NS_PER_S
#define T0 (1795935600LL * S)

static const enum gh_action isolate_restart[] = {GH_ACT_ISOLATE_NODE,
                                                 GH_ACT_RESTART_FROM_CHECKPOINT,
                                                 GH_ACT_REBOOT_NODE};

static struct gh_guard *make(void (*tweak)(struct gh_guard_config *))
{
    struct gh_guard_config c;
    gh_guard_config_default(&c);
    c.node_cooldown_ns = 0;
    c.storm_nodes = 0;
    c.max_actions_per_hour = 0;
    if (tweak)
        tweak(&c);
    struct gh_guard *g = gh_guard_new(&c);
    assert_non_null(g);
    gh_guard_set_node_count(g, 100);
    return g;
}

static void budget2(struct gh_guard_config *c)
{
    c->max_isolated = 2;
    c->max_isolated_pct = -1;
}

static void test_budget_absolute(void **st)
{
    (void)st;
    struct gh_guard *g = make(budget2);
    struct gh_guard_verdict v[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v), 3);
    assert_int_equal(v[0].outcome, GH_GUARD_ALLOW);
    assert_string_equal(v[0].guard, "budget");
    gh_guard_commit(g, v, 3, "n1", T0);
    assert_true(gh_guard_is_isolated(g, "n1"));
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n2", false, T0, v), 3);
    gh_guard_commit(g, v, 3, "n2", T0);
    assert_int_equal(gh_guard_isolated_count(g), 2);
    /* the third node: node actions denied, the job restart still goes */
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n3", false, T0, v), 1);
    assert_int_equal(v[0].outcome, GH_GUARD_DENY);
    assert_string_equal(v[0].guard, "budget");
    assert_non_null(strstr(v[0].detail, "not acted: budget (2 of 2 nodes"));
    assert_int_equal(v[1].outcome, GH_GUARD_ALLOW);
    assert_int_equal(v[2].outcome, GH_GUARD_DENY);
    /* a node already held needs no more budget */
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v), 3);
    /* one returns to service: budget again */
    gh_guard_set_isolated(g, "n1", false);
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n3", false, T0, v), 3);
    struct gh_guard_stats s;
    gh_guard_count(g, v, 3);
    gh_guard_stats(g, &s);
    assert_int_equal(s.allowed, 3);
    gh_guard_free(g);
}

static void pct10(struct gh_guard_config *c)
{
    c->max_isolated = -1;
    c->max_isolated_pct = 10;
}

static void test_budget_percent(void **st)
{
    (void)st;
    struct gh_guard *g = make(pct10);
    gh_guard_set_node_count(g, 25);
    assert_int_equal(gh_guard_budget(g), 2);
    gh_guard_set_node_count(g, 3); /* at least one node */
    assert_int_equal(gh_guard_budget(g), 1);
    gh_guard_set_isolated(g, "a", true);
    struct gh_guard_verdict v[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "b", false, T0, v), 1);
    assert_string_equal(v[0].guard, "budget");
    gh_guard_free(g);
}

/* 0 is a budget of zero nodes (it read as "no cap"), as a count and as 0%;
 * the job restart is never a node action and still goes */
static void zero_nodes(struct gh_guard_config *c)
{
    c->max_isolated = 0;
    c->max_isolated_pct = -1;
}
static void zero_pct(struct gh_guard_config *c)
{
    c->max_isolated = -1;
    c->max_isolated_pct = 0;
}

static void test_budget_zero(void **st)
{
    (void)st;
    void (*tweaks[])(struct gh_guard_config *) = {zero_nodes, zero_pct};
    for (size_t i = 0; i < 2; i++) {
        struct gh_guard *g = make(tweaks[i]);
        assert_int_equal(gh_guard_budget(g), 0);
        struct gh_guard_verdict v[3];
        assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v), 1);
        assert_int_equal(v[0].outcome, GH_GUARD_DENY);
        assert_string_equal(v[0].guard, "budget");
        assert_int_equal(v[1].outcome, GH_GUARD_ALLOW);
        assert_int_equal(v[2].outcome, GH_GUARD_DENY);
        gh_guard_free(g);
    }
    /* both unset: no cap */
    struct gh_guard_config c;
    gh_guard_config_default(&c);
    c.max_isolated = -1;
    c.max_isolated_pct = -1;
    struct gh_guard *g = gh_guard_new(&c);
    assert_int_equal(gh_guard_budget(g), SIZE_MAX);
    gh_guard_free(g);
}

static void test_budget_parse(void **st)
{
    (void)st;
    int n;
    double p;
    struct gh_err e;
    assert_int_equal(gh_guard_parse_budget("0", &n, &p, &e), GH_OK);
    assert_int_equal(n, 0);
    assert_true(p < 0);
    assert_int_equal(gh_guard_parse_budget("0%", &n, &p, &e), GH_OK);
    assert_int_equal(n, -1);
    assert_true(p == 0);
    assert_int_equal(gh_guard_parse_budget("12.5%", &n, &p, &e), GH_OK);
    assert_true(p == 12.5);
    assert_int_equal(gh_guard_parse_budget("100%", &n, &p, &e), GH_OK);
    assert_int_equal(gh_guard_parse_budget("7", &n, &p, &e), GH_OK);
    assert_int_equal(n, 7);
    assert_int_equal(gh_guard_parse_budget("150%", &n, &p, &e), GH_EINVAL);
    assert_non_null(strstr(e.msg, "150%\": a percentage is 0% to 100%"));
    const char *bad[] = {"", "-1", "1.5", "%", "x", "10 %", "1e3", "2000000", ".5%", "5.%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gh_guard_parse_budget(bad[i], &n, &p, &e), GH_EINVAL);
    /* tightening: a smaller cap wins, a larger one never loosens */
    struct gh_guard_config c;
    gh_guard_config_default(&c);
    gh_guard_tighten_budget(&c, 20, -1);
    assert_int_equal(c.max_isolated, 10);
    gh_guard_tighten_budget(&c, 0, -1);
    assert_int_equal(c.max_isolated, 0);
    gh_guard_tighten_budget(&c, -1, 50);
    assert_true(c.max_isolated_pct == 10);
    c.max_isolated_pct = -1;
    gh_guard_tighten_budget(&c, -1, 50);
    assert_true(c.max_isolated_pct == 50);
}

static void rate3(struct gh_guard_config *c) { c->max_actions_per_hour = 3; }

static void test_rate(void **st)
{
    (void)st;
    struct gh_guard *g = make(rate3);
    enum gh_action retry = GH_ACT_RETRY_IN_PLACE;
    struct gh_guard_verdict v[1];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gh_guard_check(g, &retry, 1, NULL, false, T0 + i * S, v), 1);
        gh_guard_commit(g, v, 1, NULL, T0 + i * S);
    }
    assert_int_equal(gh_guard_check(g, &retry, 1, NULL, false, T0 + 10 * S, v), 0);
    assert_string_equal(v[0].guard, "rate");
    assert_non_null(strstr(v[0].detail, "3 actions in the last hour"));
    /* an hour after the first: one slot again */
    assert_int_equal(gh_guard_check(g, &retry, 1, NULL, false, T0 + 3600 * S + 1, v), 1);
    /* within one incident the rate counts each action */
    struct gh_guard_verdict w[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n", false, T0 + 3600 * S + 1, w), 1);
    assert_int_equal(w[0].outcome, GH_GUARD_ALLOW);
    assert_string_equal(w[1].guard, "rate");
    gh_guard_free(g);
}

static void cool(struct gh_guard_config *c) { c->node_cooldown_ns = 600 * S; }

static void test_cooldown(void **st)
{
    (void)st;
    struct gh_guard *g = make(cool);
    struct gh_guard_verdict v[3];
    gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v);
    gh_guard_commit(g, v, 3, "n1", T0);
    enum gh_action reboot[] = {GH_ACT_REBOOT_NODE, GH_ACT_RESTART_FROM_CHECKPOINT};
    assert_int_equal(gh_guard_check(g, reboot, 2, "n1", false, T0 + 60 * S, v), 1);
    assert_string_equal(v[0].guard, "cooldown");
    assert_int_equal(v[1].outcome, GH_GUARD_ALLOW); /* the job is not the node */
    assert_int_equal(gh_guard_check(g, reboot, 2, "n1", false, T0 + 601 * S, v), 2);
    /* other nodes are not cooling */
    assert_int_equal(gh_guard_check(g, reboot, 2, "n2", false, T0 + 60 * S, v), 2);
    gh_guard_free(g);
}

static void storm(struct gh_guard_config *c)
{
    c->storm_nodes = 3;
    c->storm_window_ns = 60 * S;
    c->storm_hold_ns = 300 * S;
    c->dry_run = false;
}

static void test_storm_breaker(void **st)
{
    (void)st;
    struct gh_guard *g = make(storm);
    struct gh_guard_verdict v[3];
    gh_guard_note_blame(g, "a", T0);
    gh_guard_note_blame(g, "b", T0 + 10 * S);
    assert_false(gh_guard_storm_open(g, T0 + 10 * S));
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "a", false, T0 + 10 * S, v), 3);
    gh_guard_commit(g, v, 3, "a", T0 + 10 * S);
    gh_guard_note_blame(g, "c", T0 + 20 * S);
    assert_true(gh_guard_storm_open(g, T0 + 20 * S));
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "c", false, T0 + 20 * S, v), 1);
    assert_string_equal(v[0].guard, "storm");
    assert_int_equal(v[1].outcome, GH_GUARD_ALLOW);
    /* a node already held may still be acted on (reboot) */
    enum gh_action reboot = GH_ACT_REBOOT_NODE;
    assert_int_equal(gh_guard_check(g, &reboot, 1, "a", false, T0 + 20 * S, v), 1);
    /* returning a healthy node to service is never blocked */
    assert_true(gh_guard_may_release(g, "a", v));
    assert_int_equal(v[0].outcome, GH_GUARD_ALLOW);
    /* still open within the hold, closed after it */
    assert_true(gh_guard_storm_open(g, T0 + 200 * S));
    assert_false(gh_guard_storm_open(g, T0 + 400 * S));
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "c", false, T0 + 400 * S, v), 3);
    gh_guard_free(g);
}

static void restored(struct gh_guard_config *c)
{
    c->max_actions_per_hour = 3;
    c->node_cooldown_ns = 600 * S;
    c->storm_nodes = 2;
    c->storm_window_ns = 60 * S;
    c->storm_hold_ns = 300 * S;
}

/* What a restarted controller reads back from the audit store counts as if
 * this process had allowed it: rate, cooldown and storm; not the budget
 * (the informers say which nodes are held). */
static void test_restore(void **st)
{
    (void)st;
    struct gh_guard *g = make(restored);
    gh_guard_restore(g, GH_ACT_ISOLATE_NODE, "n1", T0);
    gh_guard_restore(g, GH_ACT_RESTART_FROM_CHECKPOINT, NULL, T0);
    gh_guard_restore(g, GH_ACT_NONE, "n9", T0); /* ignored */
    assert_int_equal(gh_guard_isolated_count(g), 0);
    enum gh_action retry = GH_ACT_RETRY_IN_PLACE;
    struct gh_guard_verdict v[3];
    /* two of three spent: one more, then the rate */
    assert_int_equal(gh_guard_check(g, &retry, 1, NULL, false, T0 + 5 * S, v), 1);
    gh_guard_commit(g, v, 1, NULL, T0 + 5 * S);
    assert_int_equal(gh_guard_check(g, &retry, 1, NULL, false, T0 + 6 * S, v), 0);
    assert_string_equal(v[0].guard, "rate");
    /* n1 cools for 600 s from the restored action (rate aside) */
    struct gh_guard_verdict w[3];
    gh_guard_check(g, isolate_restart, 3, "n1", false, T0 + 3600 * S + 1, w);
    assert_int_equal(w[0].outcome, GH_GUARD_ALLOW); /* cooldown over, rate window too */
    struct gh_guard *g2 = make(restored);
    gh_guard_restore(g2, GH_ACT_ISOLATE_NODE, "n1", T0);
    gh_guard_check(g2, isolate_restart, 3, "n1", false, T0 + 60 * S, w);
    assert_string_equal(w[0].guard, "cooldown");
    /* and n1's blame counts toward the storm breaker */
    assert_false(gh_guard_storm_open(g2, T0 + 10 * S));
    gh_guard_note_blame(g2, "n2", T0 + 10 * S);
    assert_true(gh_guard_storm_open(g2, T0 + 10 * S));
    gh_guard_free(g2);
    gh_guard_free(g);
}

static void dry(struct gh_guard_config *c)
{
    c->dry_run = true;
    c->max_isolated = 1;
    c->max_isolated_pct = -1;
}

static void test_dry_run(void **st)
{
    (void)st;
    struct gh_guard *g = make(dry);
    gh_guard_set_isolated(g, "x", true);
    struct gh_guard_verdict v[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(v[i].outcome, GH_GUARD_DRY_RUN);
    assert_non_null(strstr(v[0].detail, "dry run: would not act (not acted: budget"));
    assert_non_null(strstr(v[1].detail, "dry run: would act"));
    assert_false(gh_guard_may_release(g, "x", v));
    gh_guard_free(g);
}

/* Issue 26: a dry run's verdicts count its own would-be isolations against
 * the budget: two XID 79s on two nodes with a budget of 1 - the first would
 * act, the second would not (it used to say "would act" twice); the same
 * node again is not counted twice; an hour later the hold is over; once
 * the dry run ends, the real budget is whole again. */
static void test_dry_run_counts_its_own(void **st)
{
    (void)st;
    struct gh_guard *g = make(dry);
    struct gh_guard_verdict v[3];
    gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v);
    assert_non_null(
        strstr(v[0].detail, "dry run: would act (1 of 1 nodes out of service after this)"));
    gh_guard_commit(g, v, 3, "n1", T0);
    assert_int_equal(gh_guard_isolated_count(g), 0); /* nothing really out */
    gh_guard_check(g, isolate_restart, 3, "n2", false, T0 + S, v);
    assert_non_null(strstr(v[0].detail, "dry run: would not act (not acted: budget (1 of 1 nodes "
                                        "already out of service, 1 of them by this dry run's own"));
    gh_guard_commit(g, v, 3, "n2", T0 + S);
    gh_guard_check(g, isolate_restart, 3, "n1", false, T0 + 2 * S, v);
    assert_non_null(strstr(v[0].detail, "dry run: would act")); /* n1 is the one held */
    gh_guard_check(g, isolate_restart, 3, "n2", false, T0 + 3601 * S, v);
    assert_non_null(strstr(v[0].detail, "dry run: would act (1 of 1")); /* n1's hold is over */
    gh_guard_check(g, isolate_restart, 3, "n2", false, T0 + 2 * S, v);
    assert_non_null(strstr(v[0].detail, "would not act"));
    struct gh_guard_config c = *gh_guard_config(g);
    c.dry_run = false;
    gh_guard_set_config(g, &c);
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n2", false, T0 + 2 * S, v), 3);
    assert_int_equal(v[0].outcome, GH_GUARD_ALLOW);
    gh_guard_free(g);
}

static void approval(struct gh_guard_config *c) { c->approval = true; }

static void test_approval(void **st)
{
    (void)st;
    struct gh_guard *g = make(approval);
    struct gh_guard_verdict v[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", false, T0, v), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(v[i].outcome, GH_GUARD_AWAIT);
        assert_string_equal(v[i].guard, "approval");
    }
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, "n1", true, T0, v), 3);
    enum gh_action none = GH_ACT_NONE;
    assert_int_equal(gh_guard_check(g, &none, 1, NULL, false, T0, v), 1);
    gh_guard_free(g);
}

/* An incident that blames no node (a cause several nodes share): its node
 * actions are never allowed - not in approval, not approved, and a dry run
 * says it would not act - while its job's restart is judged as usual. */
static void test_no_node(void **st)
{
    (void)st;
    struct gh_guard *g = make(NULL);
    struct gh_guard_verdict v[3];
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, NULL, false, T0, v), 1);
    assert_int_equal(v[0].outcome, GH_GUARD_DENY);
    assert_string_equal(v[0].guard, "no_node");
    assert_non_null(strstr(v[0].detail, "isolate_node needs a blamed node"));
    assert_int_equal(v[1].outcome, GH_GUARD_ALLOW);
    assert_int_equal(v[2].outcome, GH_GUARD_DENY);
    gh_guard_commit(g, v, 3, NULL, T0);
    assert_int_equal(gh_guard_isolated_count(g), 0);
    gh_guard_free(g);
    g = make(approval);
    assert_int_equal(gh_guard_check(g, isolate_restart, 3, NULL, true, T0, v), 1);
    assert_int_equal(v[0].outcome, GH_GUARD_DENY);
    gh_guard_free(g);
    g = make(dry);
    gh_guard_check(g, isolate_restart, 3, NULL, false, T0, v);
    assert_int_equal(v[0].outcome, GH_GUARD_DRY_RUN);
    assert_non_null(strstr(v[0].detail, "dry run: would not act (not acted: isolate_node needs"));
    gh_guard_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_absolute),
        cmocka_unit_test(test_budget_percent),
        cmocka_unit_test(test_budget_zero),
        cmocka_unit_test(test_budget_parse),
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_cooldown),
        cmocka_unit_test(test_storm_breaker),
        cmocka_unit_test(test_dry_run),
        cmocka_unit_test(test_dry_run_counts_its_own),
        cmocka_unit_test(test_approval),
        cmocka_unit_test(test_restore),
        cmocka_unit_test(test_no_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
