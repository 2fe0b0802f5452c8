/* db_sqlite.c - the audit store's SQL interface on SQLite: WAL journal,
 * synchronous=FULL (each commit is on disk before it returns), a busy
 * timeout so that `gpuheal explain` can read while the controller writes,
 * and a cache of prepared statements keyed by SQL text (least recently
 * used one out), each reset and unbound after its use.
 *
 * The file is known by its device and inode from the open on: a write
 * (any statement through exec but ROLLBACK) first checks that the path
 * still names that file, and fails once it was deleted or replaced: what
 * would be written to an unlinked file is gone at the next start, so it is
 * never reported committed. */
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/db.h"

#define BUSY_TIMEOUT_MS 10000
#define ROW_MAX_COLS 64
#define CACHE_SLOTS 32

struct cached {
    char *sql;           /* owned; NULL: a free slot */
    sqlite3_stmt *st;    /* owned */
    bool busy;           /* in use by a call now (a row callback may run another) */
    uint64_t used;       /* tick of the last use */
};

struct sq {
    sqlite3 *h;          /* owned */
    char *path;          /* owned: the file opened; NULL for a temporary database */
    dev_t dev;
    ino_t ino;
    uint64_t tick;
    struct cached c[CACHE_SLOTS];
};

static int sq_err(sqlite3 *h, int rc, const char *what, struct gh_err *err)
{
    int code = rc == SQLITE_NOMEM ? GH_ENOMEM : (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) ? GH_EAGAIN
                                                                                           : GH_EIO;
    return gh_err_set(err, code, "sqlite %s: %s", what, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
}

static int exec_script(sqlite3 *h, const char *sql, struct gh_err *err)
{
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

static int sq_script(void *hv, const char *sql, struct gh_err *err)
{
    struct sq *q = hv;
    return exec_script(q->h, sql, err);
}

/* sql with each $N parameter written ?N (malloc'd; NULL on OOM): SQLite
 * gives ?N the index N, where it finds a named $N's index by a linear
 * search per parameter (quadratic for the journal's 1,280-parameter
 * INSERT). A '$' inside quotes, a -- comment or an identifier is left as it
 * is. */
static char *numbered_sql(const char *sql)
{
    char *out = strdup(sql);
    if (!out)
        return NULL;
    char quote = 0;
    for (char *c = out; *c; c++) {
        if (quote) {
            if (*c == quote)
                quote = 0;
        } else if (*c == '\'' || *c == '"') {
            quote = *c;
        } else if (c[0] == '-' && c[1] == '-') { /* a comment, to the line's end */
            while (c[1] && c[1] != '\n')
                c++;
        } else if (*c == '$' && c[1] >= '0' && c[1] <= '9' &&
                   (c == out || !(c[-1] == '_' || (c[-1] >= '0' && c[-1] <= '9') ||
                                  ((c[-1] | 0x20) >= 'a' && (c[-1] | 0x20) <= 'z')))) {
            *c = '?';
        }
    }
    return out;
}

/* A statement for sql: the cached one when it is free, else a new one,
 * kept in the cache when a slot is free or one not in use can be evicted.
 * *slot: the cache slot, or NULL for a statement the caller finalizes. */
static int statement(struct sq *q, const char *sql, sqlite3_stmt **out, struct cached **slot,
                     struct gh_err *err)
{
    struct cached *victim = NULL;
    *slot = NULL;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct cached *c = &q->c[i];
        if (c->sql && !c->busy && strcmp(c->sql, sql) == 0) {
            c->busy = true;
            c->used = ++q->tick;
            *out = c->st;
            *slot = c;
            return GH_OK;
        }
        if (!c->busy && (!victim || (victim->sql && (!c->sql || c->used < victim->used))))
            victim = c;
    }
    char *numbered = numbered_sql(sql);
    if (!numbered)
        return gh_err_set(err, GH_ENOMEM, "sqlite prepare: out of memory");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(q->h, numbered, -1, victim ? SQLITE_PREPARE_PERSISTENT : 0, &st,
                                NULL);
    free(numbered);
    if (rc != SQLITE_OK)
        return sq_err(q->h, rc, "prepare", err);
    if (victim) {
        char *copy = strdup(sql);
        if (copy) {
            if (victim->sql) {
                sqlite3_finalize(victim->st);
                free(victim->sql);
            }
            victim->sql = copy;
            victim->st = st;
            victim->busy = true;
            victim->used = ++q->tick;
            *slot = victim;
        }
    }
    *out = st;
    return GH_OK;
}

/* Ends a use of st: a cached statement is reset and unbound for the next
 * call (so it holds no read transaction open), another one finalized. */
static void release(sqlite3_stmt *st, struct cached *slot)
{
    if (!slot) {
        sqlite3_finalize(st);
        return;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    slot->busy = false;
}

/* Binds p[k] to the statement's parameter $k+1 (?k+1 once numbered: its
 * index is k+1); a statement may use a parameter twice or not at all.
 * Text is not copied: the caller's values outlive the call, and release()
 * unbinds them. */
static int prepare(struct sq *q, const char *sql, const struct gh_db_val *p, int np,
                   sqlite3_stmt **out, struct cached **slot, struct gh_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = statement(q, sql, &st, slot, err);
    if (rc)
        return rc;
    int n = sqlite3_bind_parameter_count(st);
    for (int idx = 1; idx <= n && idx <= np; idx++) {
        const struct gh_db_val *v = &p[idx - 1];
        switch (v->t) {
        case GH_DBV_NULL: rc = sqlite3_bind_null(st, idx); break;
        case GH_DBV_INT: rc = sqlite3_bind_int64(st, idx, v->i); break;
        case GH_DBV_TEXT: rc = sqlite3_bind_text(st, idx, v->s, -1, SQLITE_STATIC); break;
        }
        if (rc != SQLITE_OK) {
            rc = sq_err(q->h, rc, "bind", err);
            release(st, *slot);
            return rc;
        }
    }
    *out = st;
    return GH_OK;
}

/* GH_OK while the path names the file opened. */
static int same_file(const struct sq *q, struct gh_err *err)
{
    struct stat sb;
    if (!q->path)
        return GH_OK;
    if (stat(q->path, &sb) != 0)
        return gh_err_set(err, GH_EIO, "sqlite: the database file %s was deleted while open "
                          "(nothing more is written to it; a restart opens a new one)", q->path);
    if (sb.st_dev != q->dev || sb.st_ino != q->ino)
        return gh_err_set(err, GH_EIO, "sqlite: the database file %s was replaced while open "
                          "(inode %llu, now %llu; nothing more is written to the old one)",
                          q->path, (unsigned long long)q->ino, (unsigned long long)sb.st_ino);
    return GH_OK;
}

static int sq_exec(void *hv, const char *sql, const struct gh_db_val *p, int np, long *changed,
                   struct gh_err *err)
{
    struct sq *q = hv;
    if (strcmp(sql, "ROLLBACK") != 0) {
        int frc = same_file(q, err);
        if (frc)
            return frc;
    }
    sqlite3_stmt *st;
    struct cached *slot;
    int rc = prepare(q, sql, p, np, &st, &slot, err);
    if (rc)
        return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (s != SQLITE_DONE)
        rc = sq_err(q->h, s, "step", err);
    else if (changed)
        *changed = sqlite3_changes(q->h);
    release(st, slot);
    return rc;
}

static int sq_query(void *hv, const char *sql, const struct gh_db_val *p, int np, gh_db_row_fn row,
                    void *ud, struct gh_err *err)
{
    struct sq *q = hv;
    sqlite3_stmt *st;
    struct cached *slot;
    int rc = prepare(q, sql, p, np, &st, &slot, err);
    if (rc)
        return rc;
    int ncols = sqlite3_column_count(st);
    if (ncols > ROW_MAX_COLS) {
        release(st, slot);
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
        rc = sq_err(q->h, s, "step", err);
    release(st, slot);
    return rc;
}

static void sq_close(void *hv)
{
    struct sq *q = hv;
    if (!q)
        return;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        sqlite3_finalize(q->c[i].st);
        free(q->c[i].sql);
    }
    sqlite3_close_v2(q->h);
    free(q->path);
    free(q);
}

static const struct gh_db_ops sqlite_ops = {sq_script, sq_exec, sq_query, sq_close};

int gh_db_sqlite_open(const char *path, void **h, const struct gh_db_ops **ops, struct gh_err *err)
{
    struct sq *q = calloc(1, sizeof *q);
    if (!q)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        rc = gh_err_set(err, GH_EIO, "sqlite open %s: %s", path,
                        db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close_v2(db);
        free(q);
        return rc;
    }
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    rc = exec_script(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
                     err);
    if (rc) {
        gh_err_prefix(err, rc, "%s", path);
        sqlite3_close_v2(db);
        free(q);
        return rc;
    }
    struct stat sb;
    const char *file = sqlite3_db_filename(db, "main");
    if (file && *file && stat(file, &sb) == 0) {
        if (!(q->path = strdup(file))) {
            sqlite3_close_v2(db);
            free(q);
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        }
        q->dev = sb.st_dev;
        q->ino = sb.st_ino;
    }
    q->h = db;
    *h = q;
    *ops = &sqlite_ops;
    return GH_OK;
}
