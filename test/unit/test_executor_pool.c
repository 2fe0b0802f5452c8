/* test_executor_pool.c - the executor's worker pool against a real SQLite
 * audit store: many decisions through several workers are each recorded
 * once (a duplicate is refused), tasks on one node report in submission
 * order, two workers act at once on different nodes, and freeing the
 * executor stops the workers in their retry back-off promptly. The API
 * server is an address nobody listens on: actions fail as transport
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "control/decision.h"
#include "control/executor.h"

#define NODES 5
#define TASKS 40

struct fixture {
    char dir[64];
    char url[128];
    struct gh_kube_config kc;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-exec-pool.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->url, sizeof f->url, "sqlite:%s/audit.db", f->dir);
    f->kc.server = strdup("http://127.0.0.1:1");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char path[128];
    const char *files[] = {"audit.db", "audit.db-wal", "audit.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", f->dir, files[i]);
        unlink(path);
    }
    rmdir(f->dir);
    gh_kube_config_clear(&f->kc);
    free(f);
    return 0;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void decision(struct gh_task *t, int i, const char *mode, enum gh_guard_outcome out)
{
    memset(t, 0, sizeof *t);
    t->kind = GH_TASK_DECISION;
    char id[32], node[32];
    snprintf(id, sizeof id, "inc-%04d", i);
    snprintf(node, sizeof node, "n%d", i % NODES);
    t->incident = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:[]}", "id", id, "class",
                            "gpu_hardware", "node", node, "rule", "gpu-fell-off-bus", "reason",
                            "test", "actions", "isolate_node", "evidence");
    assert_non_null(t->incident);
    gh_decision_read(&t->d, t->incident); /* as the controller fills it */
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->mode, sizeof t->mode, "%s", mode);
    t->n = 1;
    t->v[0].action = GH_ACT_ISOLATE_NODE;
    t->v[0].outcome = out;
    t->v[0].guard = out == GH_GUARD_ALLOW ? "none" : "dry_run";
}

static int count_id(void *ud, const char *id, const char *phase)
{
    (void)id;
    (void)phase;
    (*(int *)ud)++;
    return GH_OK;
}

static int count_pending(void *ud, const struct gh_audit_intent *it)
{
    (void)it;
    (*(int *)ud)++;
    return GH_OK;
}

/* Dry-run decisions: recorded, Events and the Incident object attempted
 * (the API is unreachable: published with a warning), no action. */
static void test_many_decisions(void **state)
{
    struct fixture *f = *state;
    struct gh_executor_opts o = {.kube = &f->kc, .db_url = f->url, .identity = "t",
                                 .qps = -1, .workers = 4};
    struct gh_executor *ex = NULL;
    struct gh_err err;
    assert_int_equal(gh_executor_new(&o, &ex, &err), GH_OK);
    for (int i = 0; i < TASKS; i++) {
        struct gh_task t;
        decision(&t, i, "dry_run", GH_GUARD_DRY_RUN);
        assert_int_equal(gh_executor_submit(ex, &t, &err), GH_OK);
        assert_null(t.incident);
    }
    struct gh_task dup;
    decision(&dup, 7, "dry_run", GH_GUARD_DRY_RUN); /* the same incident again */
    assert_int_equal(gh_executor_submit(ex, &dup, &err), GH_OK);

    char order[NODES][TASKS][64];
    int on[NODES] = {0};
    int got = 0, dups = 0;
    double deadline = mono() + 60;
    while (got < TASKS + 1 && mono() < deadline) {
        struct pollfd p = {gh_executor_fd(ex), POLLIN, 0};
        (void)poll(&p, 1, 200);
        struct gh_exec_report r[16];
        size_t n = gh_executor_poll(ex, r, 16);
        for (size_t i = 0; i < n; i++, got++) {
            assert_int_equal(r[i].kind, GH_TASK_DECISION);
            assert_false(r[i].store_failed);
            if (!strcmp(r[i].phase, "Duplicate")) {
                assert_string_equal(r[i].id, "inc-0007");
                dups++;
                continue;
            }
            assert_string_equal(r[i].phase, "Skipped");
            int node = r[i].node[1] - '0';
            assert_true(node >= 0 && node < NODES);
            snprintf(order[node][on[node]++], 64, "%s", r[i].id);
        }
    }
    assert_int_equal(got, TASKS + 1);
    assert_int_equal(dups, 1);
    /* one node's tasks ran (and reported) in submission order */
    for (int k = 0; k < NODES; k++) {
        assert_int_equal(on[k], TASKS / NODES);
        for (int i = 0; i < on[k]; i++) {
            char want[32];
            snprintf(want, sizeof want, "inc-%04d", k + i * NODES);
            assert_string_equal(order[k][i], want);
        }
    }
    /* a task reports before it leaves the in-flight list */
    deadline = mono() + 5;
    while (gh_executor_depth(ex) > 0 && mono() < deadline)
        usleep(10 * 1000);
    assert_int_equal(gh_executor_depth(ex), 0);
    gh_executor_free(ex);

    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open(f->url, &a, &err), GH_OK);
    int ids = 0;
    assert_int_equal(gh_audit_incident_ids(a, 0, count_id, &ids, &err), GH_OK);
    assert_int_equal(ids, TASKS);
    gh_audit_close(a);
}

/* Allowed isolations against an unreachable API server retry with a
 * back-off, one per worker; freeing the executor ends that at once. Queued
 * tasks are dropped. */
static void test_free_during_retry(void **state)
{
    struct fixture *f = *state;
    struct gh_executor_opts o = {.kube = &f->kc, .db_url = f->url, .identity = "t",
                                 .qps = -1, .workers = 2};
    struct gh_executor *ex = NULL;
    struct gh_err err;
    assert_int_equal(gh_executor_new(&o, &ex, &err), GH_OK);
    for (int i = 100; i < 110; i++) { /* i % NODES: two nodes, so most wait */
        struct gh_task t;
        decision(&t, i, "act", GH_GUARD_ALLOW);
        assert_int_equal(gh_executor_submit(ex, &t, &err), GH_OK);
    }
    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open(f->url, &a, &err), GH_OK);
    int pending = 0;
    double deadline = mono() + 20;
    while (pending < 1 && mono() < deadline) {
        usleep(50 * 1000);
        pending = 0;
        assert_int_equal(gh_audit_intents_pending(a, count_pending, &pending, &err), GH_OK);
    }
    assert_true(pending >= 1);
    assert_true(gh_executor_depth(ex) >= 2);
    usleep(300 * 1000); /* into the back-off */
    double t0 = mono();
    gh_executor_free(ex);
    assert_true(mono() - t0 < 5.0);
    /* the two started (one per worker, their nodes differ) recorded their
     * attempt as failed and finished their intents; the queued ones were
     * never recorded (the next leader decides them again) */
    pending = 0;
    assert_int_equal(gh_audit_intents_pending(a, count_pending, &pending, &err), GH_OK);
    assert_int_equal(pending, 0);
    int ids = 0;
    assert_int_equal(gh_audit_incident_ids(a, 0, count_id, &ids, &err), GH_OK);
    assert_int_equal(ids, 2);
    gh_audit_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_many_decisions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_during_retry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
