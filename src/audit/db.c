/* db.c - dispatch of the audit store's SQL interface to its backend, and
 * transactions on top of it. */
#include "audit/db.h"

#include <stdlib.h>

struct gh_db {
    enum gh_db_kind kind;
    void *h;
    const struct gh_db_ops *ops;
};

int gh_db_open(enum gh_db_kind kind, const char *target, struct gh_db **out, struct gh_err *err)
{
    *out = NULL;
    struct gh_db *db = calloc(1, sizeof *db);
    if (!db)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    db->kind = kind;
    int rc = kind == GH_DB_SQLITE ? gh_db_sqlite_open(target, &db->h, &db->ops, err)
                                  : gh_db_pg_open(target, &db->h, &db->ops, err);
    if (rc) {
        free(db);
        return rc;
    }
    *out = db;
    return GH_OK;
}

void gh_db_close(struct gh_db *db)
{
    if (!db)
        return;
    db->ops->close(db->h);
    free(db);
}

enum gh_db_kind gh_db_kind(const struct gh_db *db) { return db->kind; }

int gh_db_script(struct gh_db *db, const char *sql, struct gh_err *err)
{
    return db->ops->script(db->h, sql, err);
}

int gh_db_exec(struct gh_db *db, const char *sql, const struct gh_db_val *p, int np, long *changed,
               struct gh_err *err)
{
    if (np > GH_DB_MAX_PARAMS)
        return gh_err_set(err, GH_ELIMIT, "too many SQL parameters (%d)", np);
    return db->ops->exec(db->h, sql, p, np, changed, err);
}

int gh_db_query(struct gh_db *db, const char *sql, const struct gh_db_val *p, int np,
                gh_db_row_fn row, void *ud, struct gh_err *err)
{
    if (np > GH_DB_MAX_PARAMS)
        return gh_err_set(err, GH_ELIMIT, "too many SQL parameters (%d)", np);
    return db->ops->query(db->h, sql, p, np, row, ud, err);
}

int gh_db_begin(struct gh_db *db, struct gh_err *err)
{
    /* SQLite: take the write lock at once, so that a reader elsewhere
     * cannot make the commit fail half-way with SQLITE_BUSY. */
    return db->ops->exec(db->h, db->kind == GH_DB_SQLITE ? "BEGIN IMMEDIATE" : "BEGIN", NULL, 0,
                         NULL, err);
}

int gh_db_commit(struct gh_db *db, struct gh_err *err)
{
    return db->ops->exec(db->h, "COMMIT", NULL, 0, NULL, err);
}

void gh_db_rollback(struct gh_db *db) { (void)db->ops->exec(db->h, "ROLLBACK", NULL, 0, NULL, NULL); }
