/* store_fixture.h - the audit-store fixture of the store tests
 * (test_audit.c, test_audit_history.c, test_journal.c, test_report*.c): a
 * private PostgreSQL cluster held in cmocka setup/teardown, so that a failed
 * assertion never leaves a server running, and a SQLite store in a
 * temporary folder, removed with its WAL side files. Header-only (static inline): each test binary
 * includes it once, after <cmocka.h>. */
#ifndef TEST_STORE_FIXTURE_H
#define TEST_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "audit/pg_testenv.h"
#include "common/err.h"

/* cmocka setup: *st = the running cluster (static storage, owned by the
 * fixture until gh_store_pg_teardown), or NULL when no PostgreSQL server
 * binaries are installed (the test skips); -1 when the cluster does not
 * start. */
static inline int gh_store_pg_setup(void **st)
{
    static struct gh_pg_testenv pg;
    struct gh_err err = {{0}};
    int rc = gh_pg_testenv_start(&pg, &err);
    if (rc && rc != GH_ENOTFOUND) {
        fprintf(stderr, "postgres: %s\n", err.msg);
        return -1;
    }
    if (rc)
        fprintf(stderr, "postgres tests skipped: %s\n", err.msg);
    *st = rc ? NULL : &pg;
    return 0;
}

/* cmocka teardown: stops the cluster gh_store_pg_setup started, if any. */
static inline int gh_store_pg_teardown(void **st)
{
    if (*st)
        gh_pg_testenv_stop(*st);
    return 0;
}

/* Removes the SQLite file at path (borrowed) and its -wal and -shm files. */
static inline void gh_store_sqlite_unlink(const char *path)
{
    char side[512];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

/* A SQLite store in a fresh temporary folder: dir, path = dir/audit.db,
 * url = "sqlite:" path. */
struct gh_store_tmp {
    char dir[64];
    char path[96];
    char url[112];
};

/* Makes the folder /tmp/PREFIX-XXXXXX (prefix borrowed, short); fails the
 * test when it cannot. */
static inline void gh_store_tmp_make(struct gh_store_tmp *t, const char *prefix)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/%s-XXXXXX", prefix);
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof t->path, "%s/audit.db", t->dir);
    snprintf(t->url, sizeof t->url, "sqlite:%s", t->path);
}

/* Removes the store's files and its folder. */
static inline void gh_store_tmp_remove(const struct gh_store_tmp *t)
{
    gh_store_sqlite_unlink(t->path);
    rmdir(t->dir);
}

#endif
