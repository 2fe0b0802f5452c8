/* test_audit_reconnect.c - the audit store when its database goes away
 * under it (audit/db_pg.c, db_sqlite.c): a PostgreSQL restart is outlived
 * (the next writes reconnect, with a backoff), a transaction whose
 * connection was lost is never completed on the new one, replicas creating
 * the schema at the same moment on an empty database all open it, and a
 * SQLite file deleted or replaced under an open store fails every write
 * from then on, saying so; a frozen server (connections open, nothing
 * answered) makes the store watch fail at once and each statement give up
 * after the answer deadline, and the store goes on once it runs again.
 * PostgreSQL parts on a private cluster (skipped
 * without the server binaries). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/db.h"
#include "audit/pg_testenv.h"
#include "audit/store_watch.h"
#include "common/mono.h"
#include "store_fixture.h"

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */
#define RECOVER_S 60             /* generous: the backoff caps at 5 s */

static int record(struct gh_audit *a, const char *id, struct gh_err *err)
{
    json_t *inc = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "class", "hardware", "node",
                            "gpu-1", "first_ts", "2026-11-29T07:00:09Z");
    assert_non_null(inc);
    int rc = gh_audit_record_incident(a, inc, "act", "Acting", "test", T0, NULL, err);
    json_decref(inc);
    return rc;
}

static long count(struct gh_audit *a, const char *what)
{
    long n = -1;
    struct gh_err err;
    if (gh_audit_count(a, what, &n, &err))
        fail_msg("count %s: %s", what, err.msg);
    return n;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls record(id) until it succeeds or RECOVER_S pass. */
static int record_eventually(struct gh_audit *a, const char *id, struct gh_err *err)
{
    int64_t until = gh_mono_ns() + RECOVER_S * 1000000000LL;
    int rc;
    while ((rc = record(a, id, err)) != GH_OK && gh_mono_ns() < until)
        nap_ms(100);
    return rc;
}

/* A server restart: writes fail while it is down, and go on after it. */
static void test_pg_restart(void **state)
{
    struct gh_pg_testenv *pg = *state;
    if (!pg)
        skip();
    struct gh_audit *a = NULL;
    struct gh_err err;
    assert_int_equal(gh_audit_open(pg->url, &a, &err), GH_OK);
    assert_int_equal(record(a, "inc-before", &err), GH_OK);
    gh_pg_testenv_halt(pg);
    assert_int_not_equal(record(a, "inc-while-down", &err), GH_OK);
    assert_non_null(strstr(err.msg, "postgres"));
    if (gh_pg_testenv_resume(pg, &err))
        fail_msg("restart: %s", err.msg);
    int rc = record_eventually(a, "inc-after", &err);
    if (rc)
        fail_msg("no write %d s after the restart: %s", RECOVER_S, err.msg);
    /* reads too; what was refused while down is not there */
    assert_int_equal(count(a, "incidents"), 2);
    gh_audit_close(a);
}

/* A transaction whose connection is lost is not completed on a new one:
 * its later statements and its commit fail, nothing of it is kept. */
static void test_pg_broken_transaction(void **state)
{
    struct gh_pg_testenv *pg = *state;
    if (!pg)
        skip();
    struct gh_audit *a = NULL;
    struct gh_err err;
    assert_int_equal(gh_audit_open(pg->url, &a, &err), GH_OK);
    long before = count(a, "incidents");
    assert_int_equal(gh_audit_begin(a, &err), GH_OK);
    assert_int_equal(record(a, "inc-tx-1", &err), GH_OK);
    gh_pg_testenv_halt(pg);
    if (gh_pg_testenv_resume(pg, &err))
        fail_msg("restart: %s", err.msg);
    assert_int_not_equal(record(a, "inc-tx-2", &err), GH_OK);
    assert_int_not_equal(record(a, "inc-tx-3", &err), GH_OK);
    assert_int_not_equal(gh_audit_commit(a, &err), GH_OK);
    /* the next transaction reconnects */
    if (record_eventually(a, "inc-next", &err))
        fail_msg("no write after the restart: %s", err.msg);
    assert_int_equal(count(a, "incidents"), before + 1);
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, "inc-tx-2"};
    struct gh_audit_incident_rec *recs = NULL;
    size_t n = 9;
    assert_int_equal(gh_audit_query(a, &s, 0, 0, &recs, &n, &err), GH_OK);
    assert_int_equal(n, 0);
    gh_audit_recs_free(recs, n);
    gh_audit_close(a);
}

struct prober {
    struct gh_store_watch *w;
    int rc;
    struct gh_err err;
    atomic_bool done;
};

static void *probe_once(void *arg)
{
    struct prober *p = arg;
    p->rc = gh_store_watch_probe(p->w, &p->err);
    atomic_store(&p->done, true);
    return NULL;
}

/* A frozen server: the probe that waits for its answer makes the verdict
 * "not ok" once it has waited past the stall bound (long before the
 * statement itself gives up, as no answer would ever come); the statement
 * gives up at the answer deadline with an error saying so; once the server
 * runs again the store reconnects and records, and the verdict is ok. */
static void test_pg_frozen(void **state)
{
    struct gh_pg_testenv *pg = *state;
    if (!pg)
        skip();
    struct gh_err err;
    struct gh_store_watch *w = NULL;
    struct gh_store_watch_opts o = {.db_url = pg->url, .identity = "frozen", .no_thread = true,
                                    .stall_ns = 100 * 1000000LL};
    if (gh_store_watch_new(&o, &w, &err))
        fail_msg("store watch: %s", err.msg);
    assert_true(gh_store_watch_ok(w));
    if (gh_pg_testenv_freeze(pg, true, &err))
        fail_msg("freeze: %s", err.msg);
    struct prober p = {.w = w};
    atomic_init(&p.done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, probe_once, &p), 0);
    while (gh_store_watch_ok(w)) /* the server answers nothing until thawed */
        nap_ms(10);
    /* seen while the probe still waits: the stall bound, not the deadline */
    assert_false(atomic_load(&p.done));
    struct gh_store_watch_state st;
    gh_store_watch_state(w, &st);
    assert_false(st.ok);
    assert_int_equal(st.changes, 1);
    assert_non_null(strstr(st.error, "no answer from the store for"));
    assert_int_equal(pthread_join(t, NULL), 0); /* the deadline ends the wait */
    assert_int_equal(p.rc, GH_EIO);
    assert_non_null(strstr(p.err.msg, "no answer within"));
    gh_store_watch_state(w, &st);
    assert_int_equal(st.changes, 1); /* the give-up is the same outage */
    if (gh_pg_testenv_freeze(pg, false, &err))
        fail_msg("thaw: %s", err.msg);
    int64_t until = gh_mono_ns() + RECOVER_S * 1000000000LL;
    int rc;
    while ((rc = gh_store_watch_probe(w, &err)) != GH_OK && gh_mono_ns() < until)
        nap_ms(100);
    if (rc)
        fail_msg("no write %d s after the thaw: %s", RECOVER_S, err.msg);
    assert_true(gh_store_watch_ok(w));
    gh_store_watch_state(w, &st);
    assert_true(st.ok);
    assert_int_equal(st.changes, 2);
    gh_store_watch_free(w);
}

/* Whether pid runs (a zombie waiting for its reaper does not). */
static bool alive(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && rp[2] == 'Z');
}

/* A test that fails while it holds the server frozen leaves the teardown a
 * server that cannot stop: gh_pg_testenv_stop lets it run first, so none is
 * left behind (a frozen server holds its port and memory until reboot). */
static void test_pg_frozen_server_still_stops(void **state)
{
    (void)state;
    struct gh_pg_testenv pg;
    struct gh_err err;
    int rc = gh_pg_testenv_start(&pg, &err);
    if (rc == GH_ENOTFOUND)
        skip();
    if (rc)
        fail_msg("start: %s", err.msg);
    char path[320];
    snprintf(path, sizeof path, "%s/data/postmaster.pid", pg.dir);
    FILE *f = fopen(path, "r");
    long pm = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &pm), 1);
    fclose(f);
    if (gh_pg_testenv_freeze(&pg, true, &err))
        fail_msg("freeze: %s", err.msg);
    gh_pg_testenv_stop(&pg);
    /* the postmaster exits (init reaps it): wait for that, boundedly */
    int64_t until = gh_mono_ns() + RECOVER_S * 1000000000LL;
    while (alive(pm) && gh_mono_ns() < until)
        nap_ms(50);
    if (alive(pm)) {
        kill((pid_t)pm, SIGCONT); /* do not leave it behind either way */
        fail_msg("the frozen server (pid %ld) is still there after stop", pm);
    }
}

#define RACERS 8
#define ROUNDS 4

struct racer {
    const char *url;
    pthread_barrier_t *go;
    int rc;
    struct gh_err err;
};

static void *race_open(void *arg)
{
    struct racer *r = arg;
    struct gh_audit *a = NULL;
    pthread_barrier_wait(r->go);
    r->rc = gh_audit_open(r->url, &a, &r->err);
    gh_audit_close(a);
    return NULL;
}

/* Replicas starting at once on an empty database: every one opens it. */
static void test_pg_schema_race(void **state)
{
    struct gh_pg_testenv *pg = *state;
    if (!pg)
        skip();
    struct gh_err err;
    struct gh_db *admin = NULL;
    assert_int_equal(gh_db_open(GH_DB_POSTGRES, pg->url + strlen("postgres:"), &admin, &err),
                     GH_OK);
    int failed = 0;
    char first[GH_ERR_MAX] = "";
    for (int round = 0; round < ROUNDS; round++) {
        char sql[64], url[700];
        snprintf(sql, sizeof sql, "CREATE DATABASE race_%d", round);
        if (gh_db_script(admin, sql, &err))
            fail_msg("%s: %s", sql, err.msg);
        snprintf(url, sizeof url, "postgres:host=%s port=5432 user=postgres dbname=race_%d",
                 pg->dir, round);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, RACERS);
        struct racer r[RACERS];
        pthread_t th[RACERS];
        for (int i = 0; i < RACERS; i++) {
            r[i] = (struct racer){.url = url, .go = &go};
            assert_int_equal(pthread_create(&th[i], NULL, race_open, &r[i]), 0);
        }
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            if (r[i].rc) {
                if (!failed)
                    snprintf(first, sizeof first, "%s", r[i].err.msg);
                failed++;
            }
        }
        pthread_barrier_destroy(&go);
    }
    gh_db_close(admin);
    if (failed)
        fail_msg("%d of %d opens failed, first: %s", failed, RACERS * ROUNDS, first);
}

/* A SQLite file deleted, or replaced, under an open store. */
static void test_sqlite_deleted(void **state)
{
    (void)state;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-audit-del");
    struct gh_audit *a = NULL;
    struct gh_err err;
    assert_int_equal(gh_audit_open(t.url, &a, &err), GH_OK);
    assert_int_equal(record(a, "inc-1", &err), GH_OK);
    gh_store_sqlite_unlink(t.path);
    assert_int_equal(record(a, "inc-2", &err), GH_EIO);
    assert_non_null(strstr(err.msg, "was deleted while open"));
    assert_non_null(strstr(err.msg, t.path));
    gh_audit_close(a);

    /* replaced: another store now at the path */
    struct gh_audit *b = NULL, *c = NULL;
    assert_int_equal(gh_audit_open(t.url, &b, &err), GH_OK);
    assert_int_equal(record(b, "inc-3", &err), GH_OK);
    char other[128];
    snprintf(other, sizeof other, "%s/other.db", t.dir);
    char other_url[140];
    snprintf(other_url, sizeof other_url, "sqlite:%s", other);
    assert_int_equal(gh_audit_open(other_url, &c, &err), GH_OK);
    gh_audit_close(c);
    assert_int_equal(rename(other, t.path), 0);
    assert_int_equal(record(b, "inc-4", &err), GH_EIO);
    assert_non_null(strstr(err.msg, "was replaced while open"));
    gh_audit_close(b);
    gh_store_sqlite_unlink(other);
    gh_store_tmp_remove(&t);
}

int main(void)
{
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test(test_pg_restart),
        cmocka_unit_test(test_pg_broken_transaction),
        cmocka_unit_test(test_pg_schema_race),
        cmocka_unit_test(test_pg_frozen),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite_deleted),
        cmocka_unit_test(test_pg_frozen_server_still_stops),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    return rc + cmocka_run_group_tests_name("postgres", pg_tests, gh_store_pg_setup,
                                            gh_store_pg_teardown);
}
