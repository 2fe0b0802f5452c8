/* test_drain_bound.c - drains against the real control plane under the
 * bound on evictions in flight across drains (--drain-evictions-in-flight,
 * gh_drain_opts.total/.inflight): a drain whose places are all taken by
 * others evicts nothing until one frees, gives up at its timeout saying why,
 * two drains on two threads share the bound, and every place taken is
 * given back. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/actuator.h"
#include "kube/api.h"
#include "kube/testenv.h"

#define NODES 2

struct env {
    struct gh_kube_client *c; /* the main thread's */
    char ns[64];
    char node[NODES][96];
};

/* One drain on its own thread with its own client (a client belongs to one
 * thread), as an executor worker runs it. */
struct run {
    struct gh_kube_client *c;
    const char *node;
    struct gh_drain_opts o;
    int rc;
    struct gh_act_result r;
    struct gh_err err;
    pthread_t t;
};

static int make_node(struct gh_kube_client *c, const char *name)
{
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{}, s:{s:{s:s}}}", "apiVersion", "v1",
                          "kind", "Node", "metadata", "name", name, "labels",
                          "gpuheal.io/test-node", "true", "spec", "status", "capacity",
                          "nvidia.com/gpu", "8");
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
    struct gh_err err;
    int rc = n ? gh_kube_create(c, &ref, n, NULL, NULL, &err) : GH_ENOMEM;
    json_decref(n);
    if (rc)
        fprintf(stderr, "node %s: %s\n", name, rc == GH_ENOMEM ? "out of memory" : err.msg);
    return rc;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (!e || gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "drain-bound", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        snprintf(e->node[i], sizeof e->node[i], "%s-n%d", e->ns, i);
        if (make_node(e->c, e->node[i]))
            return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    for (int i = 0; i < NODES; i++) {
        struct gh_kube_ref r = {&gh_kube_res_nodes, NULL, e->node[i]};
        gh_kube_delete(e->c, &r, NULL, NULL, NULL);
    }
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static void make_pods(struct env *e, const char *prefix, int n, const char *node)
{
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        json_t *pod = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:[{s:s, s:s}], s:[{s:s}]}}",
                                "apiVersion", "v1", "kind", "Pod", "metadata", "name", name,
                                "spec", "nodeName", node, "containers", "name", "main", "image",
                                "trainer:latest", "tolerations", "operator", "Exists");
        struct gh_kube_ref ref = {&gh_kube_res_pods, e->ns, NULL};
        struct gh_err err;
        int rc = pod ? gh_kube_create(e->c, &ref, pod, NULL, NULL, &err) : GH_ENOMEM;
        json_decref(pod);
        if (rc)
            fail_msg("pod %s: %s", name, err.msg);
    }
}

/* How many of prefix-0..n-1 are still there and not being deleted. */
static int pods_left(struct env *e, const char *prefix, int n)
{
    int left = 0;
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        struct gh_kube_ref ref = {&gh_kube_res_pods, e->ns, name};
        json_t *o = NULL;
        struct gh_err err;
        if (gh_kube_get(e->c, &ref, &o, NULL, &err) == GH_OK &&
            !json_object_get(json_object_get(o, "metadata"), "deletionTimestamp"))
            left++;
        json_decref(o);
    }
    return left;
}

static void *drain_thread(void *ud)
{
    struct run *r = ud;
    struct gh_act_ctx x = {.c = r->c, .incident = "inc-00000000000000b1"};
    r->rc = gh_act_drain_node(&x, r->node, &r->o, &r->r, &r->err);
    return NULL;
}

static void run_start(struct run *r, const char *node, atomic_int *shared, int total,
                      int64_t timeout_s)
{
    memset(r, 0, sizeof *r);
    r->node = node;
    r->o = (struct gh_drain_opts){.concurrency = 8,
                                  .timeout_ns = timeout_s * GH_NS_PER_S,
                                  .grace_s = 0,
                                  .total = total,
                                  .inflight = shared};
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &r->c, &err))
        fail_msg("client: %s", err.msg);
    assert_int_equal(pthread_create(&r->t, NULL, drain_thread, r), 0);
}

static void run_join(struct run *r)
{
    pthread_join(r->t, NULL);
    gh_kube_client_free(r->c);
    r->c = NULL;
}

/* Every place taken by others: nothing is evicted until they free one,
 * then the drain completes and gives its places back. */
static void test_waits_for_a_place(void **state)
{
    struct env *e = *state;
    make_pods(e, "w", 3, e->node[0]);
    atomic_int shared;
    atomic_init(&shared, 2); /* the bound, all held elsewhere */
    struct run r;
    run_start(&r, e->node[0], &shared, 2, 30);
    usleep(1500 * 1000);
    assert_int_equal(pods_left(e, "w", 3), 3);
    atomic_store(&shared, 0); /* the other drains finish */
    run_join(&r);
    if (r.rc)
        fail_msg("drain: %s / %s", r.err.msg, r.r.detail);
    assert_string_equal(r.r.result, "succeeded");
    assert_non_null(strstr(r.r.detail, "evicted 3 pods"));
    assert_int_equal(pods_left(e, "w", 3), 0);
    assert_int_equal(atomic_load(&shared), 0);
}

/* A place that never frees: the drain gives up at its timeout and says the
 * bound, not a PodDisruptionBudget, kept the pod. */
static void test_timeout_under_the_bound(void **state)
{
    struct env *e = *state;
    make_pods(e, "t", 1, e->node[1]);
    atomic_int shared;
    atomic_init(&shared, 1);
    struct run r;
    run_start(&r, e->node[1], &shared, 1, 1);
    run_join(&r);
    assert_int_equal(r.rc, GH_EAGAIN);
    assert_string_equal(r.r.result, "failed");
    assert_non_null(strstr(r.r.detail, "0 kept by a PodDisruptionBudget"));
    assert_non_null(strstr(r.r.detail, "1 not started"));
    assert_int_equal(pods_left(e, "t", 1), 1);
    assert_int_equal(atomic_load(&shared), 1); /* nothing taken, nothing given */
    /* the same pod goes once a place is free */
    atomic_store(&shared, 0);
    run_start(&r, e->node[1], &shared, 1, 20);
    run_join(&r);
    assert_int_equal(r.rc, GH_OK);
    assert_int_equal(pods_left(e, "t", 1), 0);
}

struct peak {
    atomic_int *shared;
    atomic_bool stop;
    int max;
};

static void *watch_peak(void *ud)
{
    struct peak *p = ud;
    while (!atomic_load(&p->stop)) {
        int v = atomic_load(p->shared);
        if (v > p->max)
            p->max = v;
    }
    return NULL;
}

/* Two drains at once, 8 in flight each allowed, 2 across both: the count
 * never passes 2, both empty their nodes, the count ends at 0. */
static void test_two_drains_share_the_bound(void **state)
{
    struct env *e = *state;
    make_pods(e, "a", 6, e->node[0]);
    make_pods(e, "b", 6, e->node[1]);
    atomic_int shared;
    atomic_init(&shared, 0);
    struct peak pk = {.shared = &shared};
    atomic_init(&pk.stop, false);
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, watch_peak, &pk), 0);
    struct run r1, r2;
    run_start(&r1, e->node[0], &shared, 2, 30);
    run_start(&r2, e->node[1], &shared, 2, 30);
    run_join(&r1);
    run_join(&r2);
    atomic_store(&pk.stop, true);
    pthread_join(pt, NULL);
    if (r1.rc || r2.rc)
        fail_msg("drains: %s / %s", r1.r.detail, r2.r.detail);
    assert_non_null(strstr(r1.r.detail, "evicted 6 pods"));
    assert_non_null(strstr(r2.r.detail, "evicted 6 pods"));
    assert_int_equal(pods_left(e, "a", 6) + pods_left(e, "b", 6), 0);
    assert_true(pk.max >= 1 && pk.max <= 2);
    assert_int_equal(atomic_load(&shared), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_for_a_place),
        cmocka_unit_test(test_timeout_under_the_bound),
        cmocka_unit_test(test_two_drains_share_the_bound),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
