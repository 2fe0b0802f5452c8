/* db.h - the small SQL interface the audit store is written against, with
 * two implementations: SQLite (db_sqlite.c) and PostgreSQL through libpq
 * (db_pg.c). Statements use $1..$n placeholders in both; values travel as
 * 64-bit integers, text or NULL, and rows come back as text.
 *
 * A SQLite connection keeps a small cache of prepared statements keyed by
 * their SQL text (db_sqlite.c), so a statement run again is not parsed
 * again; PostgreSQL statements are sent with their parameters each time.
 *
 * A gh_db belongs to one thread at a time (the audit store's owner). */
#ifndef GH_AUDIT_DB_H
#define GH_AUDIT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum gh_db_kind { GH_DB_SQLITE, GH_DB_POSTGRES };

/* A statement parameter (a small value type; s is borrowed). */
struct gh_db_val {
    enum { GH_DBV_NULL, GH_DBV_INT, GH_DBV_TEXT } t;
    int64_t i;
    const char *s;
};

static inline struct gh_db_val gh_db_int(int64_t i)
{
    struct gh_db_val v = {GH_DBV_INT, i, NULL};
    return v;
}
/* NULL s is SQL NULL. */
static inline struct gh_db_val gh_db_text(const char *s)
{
    struct gh_db_val v = {s ? GH_DBV_TEXT : GH_DBV_NULL, 0, s};
    return v;
}
static inline struct gh_db_val gh_db_null(void)
{
    struct gh_db_val v = {GH_DBV_NULL, 0, NULL};
    return v;
}

/* Parameters of one statement: room for the signal journal's multi-row
 * INSERT (journal.h); SQLite (3.32+) allows 32,766 and PostgreSQL 65,535. */
#define GH_DB_MAX_PARAMS 2048

/* One result row: vals[i] is the text of column i (borrowed for the call),
 * NULL for SQL NULL. Return GH_OK to go on, anything else stops the query
 * with that rc. */
typedef int (*gh_db_row_fn)(void *ud, int ncols, const char *const *vals);

struct gh_db;

/* Opens target: for SQLite a file path (created when absent; WAL journal,
 * synchronous=FULL, busy timeout), for PostgreSQL a libpq connection string
 * or URI. *out: caller frees with gh_db_close. GH_EIO when the database
 * cannot be opened, GH_EUNSUPPORTED when libpq cannot be loaded. */
int gh_db_open(enum gh_db_kind kind, const char *target, struct gh_db **out, struct gh_err *err);
void gh_db_close(struct gh_db *db);
enum gh_db_kind gh_db_kind(const struct gh_db *db);

/* Runs a script of ;-separated statements without parameters (DDL). */
int gh_db_script(struct gh_db *db, const char *sql, struct gh_err *err);

/* Runs one statement with np parameters. *changed (optional) receives the
 * number of rows inserted/updated/deleted. */
int gh_db_exec(struct gh_db *db, const char *sql, const struct gh_db_val *p, int np, long *changed,
               struct gh_err *err);

/* Runs one query; row(ud, ...) for each row in order. */
int gh_db_query(struct gh_db *db, const char *sql, const struct gh_db_val *p, int np,
                gh_db_row_fn row, void *ud, struct gh_err *err);

/* Transactions: begin/commit/rollback (rollback never fails loudly). */
int gh_db_begin(struct gh_db *db, struct gh_err *err);
int gh_db_commit(struct gh_db *db, struct gh_err *err);
void gh_db_rollback(struct gh_db *db);

/* Backend entry points (used by gh_db_open). */
struct gh_db_ops {
    int (*script)(void *h, const char *sql, struct gh_err *err);
    int (*exec)(void *h, const char *sql, const struct gh_db_val *p, int np, long *changed,
                struct gh_err *err);
    int (*query)(void *h, const char *sql, const struct gh_db_val *p, int np, gh_db_row_fn row,
                 void *ud, struct gh_err *err);
    void (*close)(void *h);
};

int gh_db_sqlite_open(const char *path, void **h, const struct gh_db_ops **ops, struct gh_err *err);
int gh_db_pg_open(const char *conninfo, void **h, const struct gh_db_ops **ops,
                  struct gh_err *err);

#endif
