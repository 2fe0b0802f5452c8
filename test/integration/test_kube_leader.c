/* test_kube_leader.c - leader election on a Lease with two contenders
 * against the real control plane: the first (a child process) leads and
 * renews, the second waits; the leader is killed (SIGKILL, no release) and
 * the second takes over within the lease duration. Then a clean release
 * hands over at once. And a leader whose apiserver hangs steps down within
 * the renew deadline, before the lease could pass to another. A leader's
 * fence lies within the renew deadline of its last renewal; a held leader
 * stops leading at once, takes nothing while held, and leads again once
 * let go. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/mono.h"
#include "kube/api.h"
#include "kube/leader.h"
#include "kube/testenv.h"

#define LEASE_NS (4 * GH_NS_PER_S)
#define RENEW_NS (3 * GH_NS_PER_S)
#define RETRY_NS (GH_NS_PER_S / 2)

struct env {
    struct gh_kube_client *c;
    char ns[64];
    pid_t child;
    struct gh_kube_leader *b, *c2;
    struct gh_kube_testenv_apiserver api; /* private, for the renew-deadline test */
    struct gh_kube_leader *d;
    struct gh_kube_client *dc;
};

struct obs {
    int started, stopped;
    char last[128];
};

static void on_started(void *ud) { ((struct obs *)ud)->started++; }
static void on_stopped(void *ud) { ((struct obs *)ud)->stopped++; }
static void on_new(void *ud, const char *id)
{
    snprintf(((struct obs *)ud)->last, sizeof ((struct obs *)ud)->last, "%s", id);
}
static const struct gh_kube_leader_cbs cbs = {on_started, on_stopped, on_new};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "leader", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    if (e->child > 0) {
        kill(e->child, SIGKILL);
        waitpid(e->child, NULL, 0);
    }
    gh_kube_leader_free(e->b);
    gh_kube_leader_free(e->c2);
    if (e->api.pid)
        kill(e->api.pid, SIGCONT);
    gh_kube_leader_free(e->d);
    gh_kube_client_free(e->dc);
    gh_kube_testenv_apiserver_free(&e->api);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static struct gh_kube_leader_opts opts(const char *ns, const char *id)
{
    struct gh_kube_leader_opts o = {ns, "gpuheal-controller", id, LEASE_NS, RENEW_NS, RETRY_NS};
    return o;
}

/* The child contender: campaigns and renews until killed. */
static void child_main(const char *ns, const char *id)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct gh_kube_client *c = NULL;
    struct gh_kube_leader *l = NULL;
    struct obs o = {0};
    struct gh_kube_leader_opts lo = opts(ns, id);
    if (gh_kube_testenv_client(NULL, &c, NULL) ||
        gh_kube_leader_new(c, &lo, &cbs, &o, &l, NULL) || gh_kube_leader_start(l, NULL))
        _exit(2);
    for (;;)
        gh_kube_client_run(c, 200, NULL);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct holder_is {
    struct gh_kube_leader *l;
    const char *id;
};

static bool holder_is(void *ud)
{
    struct holder_is *h = ud;
    return strcmp(gh_kube_leader_holder(h->l), h->id) == 0;
}

static bool is_leader(void *ud) { return gh_kube_leader_is_leader(ud); }

static bool never(void *ud)
{
    (void)ud;
    return false;
}

static void test_two_contenders_failover(void **state)
{
    struct env *e = *state;
    char ida[64], idb[64];
    snprintf(ida, sizeof ida, "contender-a-%d", (int)getpid());
    snprintf(idb, sizeof idb, "contender-b-%d", (int)getpid());
    fflush(NULL);
    e->child = fork();
    assert_true(e->child >= 0);
    if (e->child == 0)
        child_main(e->ns, ida);

    struct obs ob = {0};
    struct gh_kube_leader_opts lo = opts(e->ns, idb);
    struct gh_err err;
    assert_int_equal(gh_kube_leader_new(e->c, &lo, &cbs, &ob, &e->b, &err), GH_OK);
    /* let A win first */
    struct gh_kube_ref ref = {&gh_kube_res_leases, e->ns, "gpuheal-controller"};
    int i;
    for (i = 0; i < 300; i++) {
        json_t *l = NULL;
        const char *h = NULL;
        if (gh_kube_get(e->c, &ref, &l, NULL, NULL) == GH_OK)
            h = gh_kube_json_str(l, "spec", "holderIdentity");
        bool held = h && strcmp(h, ida) == 0;
        json_decref(l);
        if (held)
            break;
        usleep(100000);
    }
    assert_true(i < 300);
    assert_int_equal(gh_kube_leader_start(e->b, &err), GH_OK);
    struct holder_is ha = {e->b, ida};
    assert_true(gh_kube_testenv_until(e->c, holder_is, &ha, 10000));
    /* A renews: B must not lead for well over a lease duration */
    gh_kube_testenv_until(e->c, never, NULL, 6000);
    assert_false(gh_kube_leader_is_leader(e->b));
    assert_int_equal(ob.started, 0);
    assert_string_equal(ob.last, ida);

    /* kill the leader: no release */
    kill(e->child, SIGKILL);
    waitpid(e->child, NULL, 0);
    e->child = 0;
    double t0 = mono_s();
    assert_true(gh_kube_testenv_until(e->c, is_leader, e->b, 20000));
    double took = mono_s() - t0;
    fprintf(stderr, "# failover took %.2fs (lease %.0fs, retry %.1fs)\n", took,
            (double)LEASE_NS / GH_NS_PER_S, (double)RETRY_NS / GH_NS_PER_S);
    /* B observed A's last renewal at most one retry period before the kill,
     * and then needs up to one lease duration plus one jittered retry. */
    assert_true(took <= (double)(LEASE_NS + 3 * RETRY_NS) / GH_NS_PER_S + 0.5);
    assert_int_equal(ob.started, 1);
    assert_string_equal(ob.last, idb);
    json_t *l = NULL;
    assert_int_equal(gh_kube_get(e->c, &ref, &l, NULL, NULL), GH_OK);
    assert_string_equal(gh_kube_json_str(l, "spec", "holderIdentity"), idb);
    assert_true(json_integer_value(json_object_get(json_object_get(l, "spec"),
                                                   "leaseTransitions")) >= 1);
    json_decref(l);

    /* B keeps it while renewing */
    gh_kube_testenv_until(e->c, never, NULL, 3000);
    assert_true(gh_kube_leader_is_leader(e->b));
    assert_int_equal(ob.stopped, 0);
}

static void test_release_hands_over(void **state)
{
    struct env *e = *state;
    assert_non_null(e->b);
    assert_true(gh_kube_leader_is_leader(e->b));
    struct gh_kube_client *c2 = NULL;
    assert_int_equal(gh_kube_testenv_client(NULL, &c2, NULL), GH_OK);
    struct obs oc = {0};
    char idc[64];
    snprintf(idc, sizeof idc, "contender-c-%d", (int)getpid());
    struct gh_kube_leader_opts lo = opts(e->ns, idc);
    assert_int_equal(gh_kube_leader_new(c2, &lo, &cbs, &oc, &e->c2, NULL), GH_OK);
    assert_int_equal(gh_kube_leader_start(e->c2, NULL), GH_OK);
    gh_kube_testenv_until(c2, never, NULL, 1500);
    assert_false(gh_kube_leader_is_leader(e->c2));

    struct gh_err err;
    assert_int_equal(gh_kube_leader_release(e->b, &err), GH_OK);
    assert_false(gh_kube_leader_is_leader(e->b));
    double t0 = mono_s();
    assert_true(gh_kube_testenv_until(c2, is_leader, e->c2, 10000));
    double took = mono_s() - t0;
    fprintf(stderr, "# hand-over after release took %.2fs\n", took);
    assert_true(took < (double)LEASE_NS / GH_NS_PER_S); /* no waiting out the lease */
    gh_kube_leader_free(e->c2);
    e->c2 = NULL;
    gh_kube_client_free(c2);
}

static bool not_leader(void *ud) { return !gh_kube_leader_is_leader(ud); }

/* The leader's apiserver hangs (SIGSTOP: connections open, no answers, the
 * client's request timeout at its 60 s default): the leader stops leading
 * once the renew deadline has passed since its last renewal, before the
 * lease duration after which another contender may take over. */
static void test_renew_deadline_on_hung_apiserver(void **state)
{
    struct env *e = *state;
    struct gh_err err;
    if (gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("start apiserver: %s", err.msg);
    assert_int_equal(gh_kube_testenv_apiserver_client(&e->api, NULL, &e->dc, &err), GH_OK);
    struct obs od = {0};
    char idd[64];
    snprintf(idd, sizeof idd, "contender-d-%d", (int)getpid());
    struct gh_kube_leader_opts lo = opts(e->ns, idd);
    lo.name = "renew-deadline";
    assert_int_equal(gh_kube_leader_new(e->dc, &lo, &cbs, &od, &e->d, &err), GH_OK);
    assert_int_equal(gh_kube_leader_start(e->d, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->dc, is_leader, e->d, 20000));
    /* renewing: still the leader after more than a lease duration */
    gh_kube_testenv_until(e->dc, never, NULL, 5000);
    assert_true(gh_kube_leader_is_leader(e->d));
    assert_int_equal(od.started, 1);

    assert_int_equal(gh_kube_testenv_apiserver_pause(&e->api, &err), GH_OK);
    double t0 = mono_s();
    assert_true(gh_kube_testenv_until(e->dc, not_leader, e->d, 30000));
    double took = mono_s() - t0;
    fprintf(stderr, "# stepped down %.2fs after the apiserver hung (renew deadline %.0fs, lease "
                    "%.0fs)\n",
            took, (double)RENEW_NS / GH_NS_PER_S, (double)LEASE_NS / GH_NS_PER_S);
    assert_int_equal(od.stopped, 1);
    /* the last renewal was at most one retry period before the hang */
    assert_true(took >= (double)(RENEW_NS - RETRY_NS) / GH_NS_PER_S - 0.1);
    assert_true(took < (double)LEASE_NS / GH_NS_PER_S);

    /* the apiserver answers again: it campaigns and leads again */
    assert_int_equal(gh_kube_testenv_apiserver_resume(&e->api, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->dc, is_leader, e->d, 30000));
    assert_int_equal(od.started, 2);
}

static void test_fence_and_hold(void **state)
{
    struct env *e = *state;
    struct obs oh = {0};
    char id[64];
    snprintf(id, sizeof id, "contender-h-%d", (int)getpid());
    struct gh_kube_leader_opts lo = opts(e->ns, id);
    lo.name = "hold";
    struct gh_kube_leader *l = NULL;
    assert_int_equal(gh_kube_leader_new(e->c, &lo, &cbs, &oh, &l, NULL), GH_OK);
    assert_int_equal(gh_kube_leader_start(l, NULL), GH_OK);
    assert_int_equal(gh_kube_leader_fence(l), 0);
    assert_true(gh_kube_testenv_until(e->c, is_leader, l, 20000));
    /* renewing for a while: the fence stays ahead, within the deadline */
    for (int i = 0; i < 4; i++) {
        gh_kube_testenv_until(e->c, never, NULL, 700);
        int64_t f = gh_kube_leader_fence(l), t = gh_mono_ns();
        assert_true(gh_kube_leader_is_leader(l));
        assert_true(f > t);
        assert_true(f <= t + RENEW_NS);
    }
    gh_kube_leader_hold(l, true);
    assert_true(gh_kube_leader_held(l));
    assert_false(gh_kube_leader_is_leader(l));
    assert_int_equal(gh_kube_leader_fence(l), 0);
    assert_int_equal(oh.stopped, 1);
    /* held: its own lease lapses and it does not take it again */
    gh_kube_testenv_until(e->c, never, NULL, (int)(LEASE_NS * 3 / 2 / GH_NS_PER_MS));
    assert_false(gh_kube_leader_is_leader(l));
    assert_int_equal(oh.started, 1);
    gh_kube_leader_hold(l, false);
    assert_true(gh_kube_testenv_until(e->c, is_leader, l, 20000));
    assert_int_equal(oh.started, 2);
    gh_kube_leader_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_contenders_failover),
        cmocka_unit_test(test_release_hands_over),
        cmocka_unit_test(test_fence_and_hold),
        cmocka_unit_test(test_renew_deadline_on_hung_apiserver),
    };
    return cmocka_run_group_tests_name("kube_leader", tests, setup, teardown);
}
