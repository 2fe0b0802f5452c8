/* test_sim_correlated.c - the simulator's correlated processes (one cause,
 * many nodes, none of them at fault): a leaf switch reboot takes the same
 * rail down on every node under the leaf within a second and brings it back
 * minutes later; a rollout reaches every node once within its window; a
 * misfiring check sets its condition on a share of the nodes within minutes
 * and clears it on each hours later; none of them harms a job or changes
 * another fault (their own random stream); a node isolated for one is
 * counted as a false isolation for a correlated cause, whatever the engine
 * decides; and the Node labels name racks, leaf switches and the driver in
 * words the engine reads. The processes' signals are checked in the trace
 * under the k8s-default policy (no rules), so that no decision of the
 * engine's changes what the cluster does. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/scope.h"
#include "sim/layout.h"
#include "sim/sim.h"

#define MAX_LINES 20000

/* One trace line of a correlated process. */
struct line {
    double t;
    char event[24];
    int node; /* -1: none */
    char detail[64];
    unsigned ev; /* the event's number (after '#' in detail) */
};

struct trace {
    int n;
    struct line *l;
};

/* 2,048 GPUs (256 nodes + 6 spares: 9 leaf groups, the last of 6 nodes),
 * one process only, for `days`. */
static void small(struct gh_sim_config *c, int cls, double days)
{
    gh_sim_config_default(c);
    c->gpus = 2048;
    c->days = days;
    c->class_mask = 1u << cls;
}

static int n_nodes(const struct gh_sim_config *c)
{
    long job_nodes = c->gpus / c->gpus_per_node;
    return (int)(job_nodes + (long)ceil((double)job_nodes * c->spare_fraction - 1e-9));
}

/* Runs c under policy `name` with a trace; keeps the correlated processes'
 * lines in *tr (caller frees tr->l). */
static void run_traced(const struct gh_sim_config *c, const char *name, struct trace *tr,
                       struct gh_sim_result *r)
{
    struct gh_policy *pol;
    assert_int_equal(gh_sim_policy_new(name, &pol, NULL), GH_OK);
    FILE *f = tmpfile();
    assert_non_null(f);
    struct gh_err err;
    assert_int_equal(gh_sim_run_traced(c, pol, 3, 1, f, r, &err), GH_OK);
    gh_policy_free(pol);
    rewind(f);
    tr->n = 0;
    tr->l = calloc(MAX_LINES, sizeof *tr->l);
    assert_non_null(tr->l);
    static char buf[1 << 20]; /* a shared incident names every node it affected */
    static const char *const kinds[] = {"leaf_reboot", "leaf_link_down", "leaf_link_up",
                                        "rollout",     "rollout_line",   "check_misfire",
                                        "check_true",  "check_false"};
    while (fgets(buf, sizeof buf, f)) {
        assert_non_null(strchr(buf, '\n')); /* the whole line */
        json_t *o = json_loads(buf, 0, NULL);
        assert_non_null(o);
        const char *ev = json_string_value(json_object_get(o, "event"));
        bool ours = false;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] && ev; k++)
            ours |= strcmp(ev, kinds[k]) == 0;
        if (ours) {
            assert_true(tr->n < MAX_LINES);
            struct line *l = &tr->l[tr->n++];
            l->t = json_real_value(json_object_get(o, "t"));
            snprintf(l->event, sizeof l->event, "%s", ev);
            const char *node = json_string_value(json_object_get(o, "node"));
            l->node = node ? (int)strtol(node + 5, NULL, 10) : -1;
            const char *d = json_string_value(json_object_get(o, "detail"));
            snprintf(l->detail, sizeof l->detail, "%s", d ? d : "");
            const char *h = strchr(l->detail, '#');
            assert_non_null(h);
            l->ev = (unsigned)strtoul(h + 1, NULL, 10);
        }
        json_decref(o);
    }
    fclose(f);
}

/* Every leaf reboot: the same device and port go down on every node of its
 * scalable unit, all within 1 s of the reboot, and up again together (within
 * 1 s) 120-360 s later; nothing else. The job is never interrupted. */
static void test_leaf_reboot_one_rail_all_nodes(void **st)
{
    (void)st;
    struct gh_sim_config c;
    small(&c, GH_SIM_LEAF_REBOOT, 2);
    c.rate[GH_SIM_LEAF_REBOOT] = 0.25 / (9 * 8); /* a reboot every 4 h among the 72 leaves */
    struct trace tr;
    struct gh_sim_result r;
    run_traced(&c, "k8s-default", &tr, &r);
    int nodes = n_nodes(&c), reboots = 0;
    assert_int_equal(nodes, 262);
    for (int i = 0; i < tr.n; i++) {
        const struct line *b = &tr.l[i];
        if (strcmp(b->event, "leaf_reboot") != 0)
            continue;
        reboots++;
        int su, rail;
        assert_int_equal(sscanf(b->detail, "su%d-rail%d", &su, &rail), 2);
        char dev[24];
        snprintf(dev, sizeof dev, "mlx5_%d/1 ", rail);
        int first = su * 32, last = first + 32 < nodes ? first + 32 : nodes;
        int down[32] = {0}, up[32] = {0};
        double up_min = INFINITY, up_max = -INFINITY;
        for (int k = 0; k < tr.n; k++) {
            const struct line *l = &tr.l[k];
            if (l->ev != b->ev || l == b)
                continue;
            assert_true(l->node >= first && l->node < last);
            assert_true(strncmp(l->detail, dev, strlen(dev)) == 0);
            if (strcmp(l->event, "leaf_link_down") == 0) {
                assert_true(l->t >= b->t && l->t < b->t + 1.0);
                down[l->node - first]++;
            } else {
                assert_string_equal(l->event, "leaf_link_up");
                up[l->node - first]++;
                up_min = fmin(up_min, l->t);
                up_max = fmax(up_max, l->t);
            }
        }
        if (up_max < 0)
            continue; /* came back after the end */
        for (int n = 0; n < last - first; n++) {
            assert_int_equal(down[n], 1);
            assert_int_equal(up[n], 1);
        }
        assert_true(up_min >= b->t + 120 && up_max < b->t + 361 + 1);
        assert_true(up_max - up_min < 1.0);
    }
    print_message("%d leaf reboots, %.0f signals\n", reboots, r.signals);
    assert_true(reboots >= 4);
    assert_true(r.interruptions_total == 0);
    assert_true(r.isolations == 0);
    free(tr.l);
}

/* A rollout reaches every node exactly once, within rollout_s, each line
 * naming one of its GPUs. */
static void test_rollout_reaches_every_node_once(void **st)
{
    (void)st;
    struct gh_sim_config c;
    small(&c, GH_SIM_ROLLOUT, 1);
    c.rate[GH_SIM_ROLLOUT] = 1.0 / 8; /* per cluster-hour */
    c.rollout_s = 3600;
    struct trace tr;
    struct gh_sim_result r;
    run_traced(&c, "k8s-default", &tr, &r);
    int nodes = n_nodes(&c), rollouts = 0;
    int *seen = calloc((size_t)nodes, sizeof *seen);
    assert_non_null(seen);
    for (int i = 0; i < tr.n; i++) {
        const struct line *b = &tr.l[i];
        if (strcmp(b->event, "rollout") != 0 || b->t > c.days * 86400 - c.rollout_s)
            continue;
        rollouts++;
        memset(seen, 0, (size_t)nodes * sizeof *seen);
        for (int k = 0; k < tr.n; k++) {
            const struct line *l = &tr.l[k];
            if (l->ev != b->ev || l == b)
                continue;
            assert_string_equal(l->event, "rollout_line");
            assert_true(l->t >= b->t && l->t <= b->t + c.rollout_s);
            long gpu = strtol(l->detail, NULL, 10);
            assert_true(gpu >= 0 && gpu < c.gpus_per_node);
            seen[l->node]++;
        }
        for (int n = 0; n < nodes; n++)
            assert_int_equal(seen[n], 1);
    }
    print_message("%d complete rollouts\n", rollouts);
    assert_true(rollouts >= 1);
    assert_true(r.interruptions_total == 0);
    free(seen);
    free(tr.l);
}

/* A misfiring check sets its condition on about misfire_fraction of the
 * nodes within misfire_spread_s, and clears it on each of them once,
 * between misfire_fix_min_s and misfire_fix_max_s (plus the spread) later. */
static void test_check_misfire_sets_then_clears(void **st)
{
    (void)st;
    struct gh_sim_config c;
    small(&c, GH_SIM_CHECK_MISFIRE, 2);
    c.rate[GH_SIM_CHECK_MISFIRE] = 1.0 / 24;
    c.misfire_fix_max_s = 3 * 3600.0;
    struct trace tr;
    struct gh_sim_result r;
    run_traced(&c, "k8s-default", &tr, &r);
    int nodes = n_nodes(&c), misfires = 0;
    int *on = calloc((size_t)nodes, sizeof *on);
    assert_non_null(on);
    for (int i = 0; i < tr.n; i++) {
        const struct line *b = &tr.l[i];
        if (strcmp(b->event, "check_misfire") != 0 ||
            b->t > c.days * 86400 - c.misfire_fix_max_s - c.misfire_spread_s)
            continue;
        misfires++;
        assert_true(strncmp(b->detail, "KernelDeadlock ", 15) == 0);
        memset(on, 0, (size_t)nodes * sizeof *on);
        int set = 0;
        for (int k = 0; k < tr.n; k++) {
            const struct line *l = &tr.l[k];
            if (l->ev != b->ev || l == b)
                continue;
            if (strcmp(l->event, "check_true") == 0) {
                assert_true(l->t >= b->t && l->t <= b->t + c.misfire_spread_s);
                assert_int_equal(on[l->node], 0);
                on[l->node] = 1;
                set++;
            } else {
                assert_string_equal(l->event, "check_false");
                assert_int_equal(on[l->node], 1);
                assert_true(l->t >= b->t + c.misfire_fix_min_s &&
                            l->t <= b->t + c.misfire_fix_max_s + c.misfire_spread_s);
                on[l->node] = 2;
            }
        }
        for (int n = 0; n < nodes; n++)
            assert_true(on[n] != 1); /* every condition set was cleared */
        print_message("misfire %u: %d of %d nodes\n", b->ev, set, nodes);
        assert_true(set > nodes / 8 && set < nodes / 2); /* 25% of 262: 66 +/- 7 */
    }
    assert_true(misfires >= 1);
    assert_true(r.interruptions_total == 0);
    free(on);
    free(tr.l);
}

/* Whatever the engine decides about them, a node isolated for a correlated
 * process is a false isolation for a correlated cause: with only those
 * processes, every isolation is one. */
static void test_isolations_for_correlated_causes_counted(void **st)
{
    (void)st;
    const int cls[] = {GH_SIM_LEAF_REBOOT, GH_SIM_CHECK_MISFIRE};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        struct gh_sim_config c;
        small(&c, cls[i], 2);
        c.rate[GH_SIM_LEAF_REBOOT] = 0.25 / (9 * 8);
        c.rate[GH_SIM_CHECK_MISFIRE] = 1.0 / 24;
        struct gh_sim_result r;
        struct gh_policy *pol;
        assert_int_equal(gh_sim_policy_new("gpuheal", &pol, NULL), GH_OK);
        struct gh_err err;
        assert_int_equal(gh_sim_run(&c, pol, 3, 1, &r, &err), GH_OK);
        gh_policy_free(pol);
        print_message("%s: %.0f isolations, %.0f false, %.0f for correlated causes, "
                      "%.1f per 10,000 GPU-days; %.0f interruptions\n",
                      gh_sim_class_name((enum gh_sim_class)cls[i]), r.isolations,
                      r.false_isolations, r.false_isolations_correlated,
                      r.false_isolations_correlated / r.cluster_gpu_days * 1e4,
                      r.interruptions_total);
        assert_true(r.isolations == r.false_isolations);
        assert_true(r.false_isolations == r.false_isolations_correlated);
        assert_true(r.false_isolations_by_class[cls[i]] == r.false_isolations);
        assert_true(r.interruptions_total == r.interruptions[cls[i]]);
        assert_true(fabs(r.cluster_gpu_days - 262.0 * 8 * 2) < 1e-6);
    }
}

/* The processes harm no job and change no other fault: with no rules
 * (k8s-default) the same faults come and the same work gets done with them
 * on or off; only their signals are added. Off, they send nothing. */
static void test_processes_change_no_fault(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    c.gpus = 4096;
    c.days = 4;
    c.rate_scale = 3;
    c.rate[GH_SIM_LEAF_REBOOT] *= 200;
    c.rate[GH_SIM_ROLLOUT] *= 10;
    c.rate[GH_SIM_CHECK_MISFIRE] *= 10;
    struct gh_policy *pol;
    assert_int_equal(gh_sim_policy_new("k8s-default", &pol, NULL), GH_OK);
    struct gh_sim_result on, off, zero;
    struct gh_err err;
    assert_int_equal(gh_sim_run(&c, pol, 8, 1, &on, &err), GH_OK);
    struct gh_sim_config d = c;
    d.class_mask &= ~(uint32_t)GH_SIM_CORRELATED_MASK;
    assert_int_equal(gh_sim_run(&d, pol, 8, 1, &off, &err), GH_OK);
    d = c;
    d.rate[GH_SIM_LEAF_REBOOT] = d.rate[GH_SIM_ROLLOUT] = d.rate[GH_SIM_CHECK_MISFIRE] = 0;
    assert_int_equal(gh_sim_run(&d, pol, 8, 1, &zero, &err), GH_OK);
    gh_policy_free(pol);
    print_message("signals %.0f on, %.0f off; ETTR %.6f / %.6f\n", on.signals, off.signals, on.ettr,
                  off.ettr);
    assert_true(on.signals > off.signals + 1000);
    for (int k = 0; k < GH_SIM_CLASS__COUNT; k++)
        assert_true(on.interruptions[k] == off.interruptions[k]);
    assert_true(fabs(on.ettr - off.ettr) < 1e-9);
    assert_true(on.isolations == off.isolations);
    assert_memory_equal(&off, &zero, offsetof(struct gh_sim_result, runs)); /* every figure */
}

/* Node labels: rack, one leaf per rail, the driver; keys the engine reads
 * as the components they are. */
static void test_node_labels(void **st)
{
    (void)st;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    struct gh_sim_labels lb;
    gh_sim_node_labels(&c, 33, 0, &lb);
    assert_int_equal(lb.n, 10);
    assert_string_equal(lb.keys[0], "example.com/rack");
    assert_string_equal(lb.values[0], "rack-0008");
    assert_string_equal(lb.keys[3], "example.com/ib-leaf-rail2");
    assert_string_equal(lb.values[3], "su001-rail2");
    assert_string_equal(lb.keys[9], "nvidia.com/cuda.driver-version.full");
    assert_string_equal(lb.values[9], "570.124.06");
    assert_int_equal(gh_scope_of_label(lb.keys[0]), GH_SCOPE_RACK);
    for (int r = 1; r <= 8; r++)
        assert_int_equal(gh_scope_of_label(lb.keys[r]), GH_SCOPE_SWITCH);
    assert_int_equal(gh_scope_of_label(lb.keys[9]), GH_SCOPE_FLEET);
    gh_sim_node_labels(&c, 31, 2, &lb);
    assert_string_equal(lb.values[1], "su000-rail0");
    assert_string_equal(lb.values[9], "570.124.08");
    assert_int_equal(gh_sim_leaf_groups(&c, 2089), 66);
    c.gpus_per_node = 4;
    gh_sim_node_labels(&c, 0, 0, &lb);
    assert_int_equal(lb.n, 6); /* 4 rails */
}

static void test_config_checks(void **st)
{
    (void)st;
    struct gh_err err;
    struct gh_sim_config c;
    gh_sim_config_default(&c);
    assert_true(c.class_mask & GH_SIM_CORRELATED_MASK); /* on in the presets */
    assert_int_equal(gh_sim_class_from_name("leaf_reboot"), GH_SIM_LEAF_REBOOT);
    assert_int_equal(gh_sim_class_from_name("check_misfire"), GH_SIM_CHECK_MISFIRE);
    c.misfire_fraction = 1.5;
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    c.leaf_down_max_s = 60; /* below the minimum */
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    c.nodes_per_leaf = 0;
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    gh_sim_config_default(&c);
    c.misfire_condition[0] = '\0';
    assert_int_equal(gh_sim_config_check(&c, &err), GH_EINVAL);
    /* They are not interruption classes: the job MTBF and Daly's optimum
     * stay the Llama 3 figures. */
    gh_sim_config_default(&c);
    double m = gh_sim_job_mtbf_s(&c);
    c.class_mask &= ~(uint32_t)GH_SIM_CORRELATED_MASK;
    assert_true(gh_sim_job_mtbf_s(&c) == m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaf_reboot_one_rail_all_nodes),
        cmocka_unit_test(test_rollout_reaches_every_node_once),
        cmocka_unit_test(test_check_misfire_sets_then_clears),
        cmocka_unit_test(test_isolations_for_correlated_causes_counted),
        cmocka_unit_test(test_processes_change_no_fault),
        cmocka_unit_test(test_node_labels),
        cmocka_unit_test(test_config_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
