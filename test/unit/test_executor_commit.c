/* test_executor_commit.c - a decision whose record fails to commit, against
 * a real SQLite audit store whose incidents table refuses rows (a trigger,
 * as a full disk refuses writes): each failed attempt is reported
 * (retrying, with the store's error), nothing is acted, and once the store
 * takes the row the decision is recorded once and finished; and a worker
 * that may no more act (its leadership may have passed) records nothing
 * and hands the incident back (deferred). The API server is an address
 * nobody listens on; the decisions are dry runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/db.h"
#include "common/mono.h"
#include "control/decision.h"
#include "control/executor.h"

struct fixture {
    char dir[64];
    char path[96];
    char url[128];
    struct gh_kube_config kc;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-exec-commit.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/audit.db", f->dir);
    snprintf(f->url, sizeof f->url, "sqlite:%s", f->path);
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

static void sql(const struct fixture *f, const char *script)
{
    struct gh_audit *a = NULL;
    struct gh_db *db = NULL;
    struct gh_err err;
    assert_int_equal(gh_audit_open(f->url, &a, &err), GH_OK); /* the schema */
    gh_audit_close(a);
    assert_int_equal(gh_db_open(GH_DB_SQLITE, f->path, &db, &err), GH_OK);
    if (gh_db_script(db, script, &err))
        fail_msg("%s: %s", script, err.msg);
    gh_db_close(db);
}

static void decision(struct gh_task *t, const char *id)
{
    memset(t, 0, sizeof *t);
    t->kind = GH_TASK_DECISION;
    t->incident = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:[]}", "id", id, "class",
                            "gpu_hardware", "node", "n1", "rule", "gpu-fell-off-bus", "reason",
                            "test", "actions", "isolate_node", "evidence");
    assert_non_null(t->incident);
    gh_decision_read(&t->d, t->incident); /* as the controller fills it */
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->mode, sizeof t->mode, "dry_run");
    t->n = 1;
    t->v[0].action = GH_ACT_ISOLATE_NODE;
    t->v[0].outcome = GH_GUARD_DRY_RUN;
    t->v[0].guard = "dry_run";
}

/* Waits (up to 30 s) for the next report. */
static bool next_report(struct gh_executor *ex, struct gh_exec_report *r)
{
    int64_t until = gh_mono_ns() + 30 * 1000000000LL;
    while (gh_mono_ns() < until) {
        if (gh_executor_poll(ex, r, 1) == 1)
            return true;
        struct pollfd p = {gh_executor_fd(ex), POLLIN, 0};
        (void)poll(&p, 1, 200);
    }
    return false;
}

static long incidents(const struct fixture *f)
{
    struct gh_audit *a = NULL;
    struct gh_err err;
    long n = -1;
    assert_int_equal(gh_audit_open(f->url, &a, &err), GH_OK);
    assert_int_equal(gh_audit_count(a, "incidents", &n, &err), GH_OK);
    gh_audit_close(a);
    return n;
}

static void test_commit_retried(void **state)
{
    struct fixture *f = *state;
    sql(f, "CREATE TRIGGER refuse BEFORE INSERT ON incidents "
           "BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END");
    struct gh_executor_opts o = {.kube = &f->kc, .db_url = f->url, .identity = "t",
                                 .qps = -1, .workers = 2};
    struct gh_executor *ex = NULL;
    struct gh_err err;
    assert_int_equal(gh_executor_new(&o, &ex, &err), GH_OK);
    struct gh_task t;
    decision(&t, "inc-commit-1");
    assert_int_equal(gh_executor_submit(ex, &t, &err), GH_OK);
    /* two failed attempts, each reported with the store's error */
    struct gh_exec_report r;
    for (int attempt = 1; attempt <= 2; attempt++) {
        assert_true(next_report(ex, &r));
        assert_true(r.retrying);
        assert_false(r.store_failed);
        assert_int_equal(r.attempt, attempt);
        assert_string_equal(r.id, "inc-commit-1");
        assert_string_equal(r.phase, "CommitRetry");
        assert_non_null(strstr(r.error, "database or disk is full (test)"));
    }
    assert_int_equal(incidents(f), 0);
    assert_int_equal(gh_executor_depth(ex), 1); /* held, not done */
    sql(f, "DROP TRIGGER refuse");
    /* the next attempt commits: further retry reports, then the outcome */
    do
        assert_true(next_report(ex, &r));
    while (r.retrying);
    assert_false(r.store_failed);
    assert_string_equal(r.id, "inc-commit-1");
    assert_string_equal(r.phase, "Skipped"); /* a dry run: recorded, not acted */
    assert_int_equal(incidents(f), 1);
    gh_executor_free(ex);
}

static atomic_bool leading;
static bool may_act(void *ud)
{
    (void)ud;
    return atomic_load(&leading);
}

static void test_not_leading(void **state)
{
    struct fixture *f = *state;
    atomic_store(&leading, false);
    struct gh_executor_opts o = {.kube = &f->kc, .db_url = f->url, .identity = "t",
                                 .qps = -1, .workers = 2, .may_act = may_act};
    struct gh_executor *ex = NULL;
    struct gh_err err;
    assert_int_equal(gh_executor_new(&o, &ex, &err), GH_OK);
    long before = incidents(f);
    struct gh_task t;
    decision(&t, "inc-fenced-1");
    assert_int_equal(gh_executor_submit(ex, &t, &err), GH_OK);
    struct gh_exec_report r;
    assert_true(next_report(ex, &r));
    assert_true(r.deferred);
    assert_false(r.retrying);
    assert_string_equal(r.phase, "NotLeader");
    assert_non_null(r.incident); /* handed back, owned by the reader */
    assert_string_equal(json_string_value(json_object_get(r.incident, "id")), "inc-fenced-1");
    json_decref(r.incident);
    assert_int_equal(incidents(f), before);
    /* leading again: the same decision is recorded */
    atomic_store(&leading, true);
    decision(&t, "inc-fenced-1");
    assert_int_equal(gh_executor_submit(ex, &t, &err), GH_OK);
    assert_true(next_report(ex, &r));
    assert_false(r.deferred);
    assert_null(r.incident);
    assert_string_equal(r.phase, "Skipped");
    assert_int_equal(incidents(f), before + 1);
    gh_executor_free(ex);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_leading, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
