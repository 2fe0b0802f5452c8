/* db_sqlite.c - the audit store's SQL interface on SQLite: WAL journal,
 * synchronous=FULL (each commit is on disk before it returns), a busy
 * timeout so that `gpuheal explain` can read while the controller writes. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/db.h"

#define BUSY_TIMEOUT_MS 10000
#define ROW_MAX_COLS 64

static int sq_err(sqlite3 *h, int rc, const char *what, struct gh_err *err)
{
    int code = rc == SQLITE_NOMEM ? GH_ENOMEM : (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) ? GH_EAGAIN
                                                                                           : GH_EIO;
    return gh_err_set(err, code, "sqlite %s: %s", what, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
}

static int sq_script(void *hv, const char *sql, struct gh_err *err)
{
    sqlite3 *h = hv;
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int r = gh_err_set(err, rc == SQLITE_BUSY ? GH_EAGAIN : GH_EIO, "sqlite: %s",
                           msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return r;
    }
    return GH_OK;
}

static int prepare(sqlite3 *h, const char *sql, const struct gh_db_val *p, int np,
                   sqlite3_stmt **out, struct gh_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sq_err(h, rc, "prepare", err);
    for (int i = 0; i < np; i++) {
        char name[16];
        snprintf(name, sizeof name, "$%d", i + 1);
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx == 0)
            continue; /* the statement does not use it */
        switch (p[i].t) {
        case GH_DBV_NULL: rc = sqlite3_bind_null(st, idx); break;
        case GH_DBV_INT: rc = sqlite3_bind_int64(st, idx, p[i].i); break;
        case GH_DBV_TEXT: rc = sqlite3_bind_text(st, idx, p[i].s, -1, SQLITE_TRANSIENT); break;
        }
        if (rc != SQLITE_OK) {
            sqlite3_finalize(st);
            return sq_err(h, rc, "bind", err);
        }
    }
    *out = st;
    return GH_OK;
}

static int sq_exec(void *hv, const char *sql, const struct gh_db_val *p, int np, long *changed,
                   struct gh_err *err)
{
    sqlite3 *h = hv;
    sqlite3_stmt *st;
    int rc = prepare(h, sql, p, np, &st, err);
    if (rc)
        return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (s != SQLITE_DONE)
        rc = sq_err(h, s, "step", err);
    else if (changed)
        *changed = sqlite3_changes(h);
    sqlite3_finalize(st);
    return rc;
}

static int sq_query(void *hv, const char *sql, const struct gh_db_val *p, int np, gh_db_row_fn row,
                    void *ud, struct gh_err *err)
{
    sqlite3 *h = hv;
    sqlite3_stmt *st;
    int rc = prepare(h, sql, p, np, &st, err);
    if (rc)
        return rc;
    int ncols = sqlite3_column_count(st);
    if (ncols > ROW_MAX_COLS) {
        sqlite3_finalize(st);
        return gh_err_set(err, GH_ELIMIT, "query returns %d columns", ncols);
    }
    const char *vals[ROW_MAX_COLS];
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < ncols; i++)
            vals[i] = (const char *)sqlite3_column_text(st, i);
        rc = row(ud, ncols, vals);
        if (rc)
            break;
    }
    if (!rc && s != SQLITE_DONE)
        rc = sq_err(h, s, "step", err);
    sqlite3_finalize(st);
    return rc;
}

static void sq_close(void *hv) { sqlite3_close_v2(hv); }

static const struct gh_db_ops sqlite_ops = {sq_script, sq_exec, sq_query, sq_close};

int gh_db_sqlite_open(const char *path, void **h, const struct gh_db_ops **ops, struct gh_err *err)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        rc = gh_err_set(err, GH_EIO, "sqlite open %s: %s", path,
                        db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close_v2(db);
        return rc;
    }
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    rc = sq_script(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
                   err);
    if (rc) {
        gh_err_prefix(err, rc, "%s", path);
        sqlite3_close_v2(db);
        return rc;
    }
    *h = db;
    *ops = &sqlite_ops;
    return GH_OK;
}
