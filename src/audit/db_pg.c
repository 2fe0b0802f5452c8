/* db_pg.c - the audit store's SQL interface on PostgreSQL through libpq,
 * loaded with dlopen when a postgres:// store is opened: the binaries run
 * (with SQLite) on hosts without libpq, and no build flag is needed. Each
 * connection holds its own function table, so there is no global state. */
#include <dlfcn.h>
#include <postgresql/libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/db.h"

#define ROW_MAX_COLS 64

struct pg {
    void *lib;
    PGconn *conn;
    __typeof__(&PQconnectdb) connectdb;
    __typeof__(&PQstatus) status;
    __typeof__(&PQerrorMessage) error_message;
    __typeof__(&PQfinish) finish;
    __typeof__(&PQexec) exec;
    __typeof__(&PQexecParams) exec_params;
    __typeof__(&PQresultStatus) result_status;
    __typeof__(&PQresultErrorMessage) result_error;
    __typeof__(&PQclear) clear;
    __typeof__(&PQntuples) ntuples;
    __typeof__(&PQnfields) nfields;
    __typeof__(&PQgetvalue) getvalue;
    __typeof__(&PQgetisnull) getisnull;
    __typeof__(&PQcmdTuples) cmd_tuples;
    __typeof__(&PQsetNoticeProcessor) set_notice_processor;
};

/* libpq prints server notices ("relation exists, skipping") on stderr by
 * default; a library must not print. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* The first line of a libpq message, without its trailing newline. */
static int pg_fail(int rc, const char *what, const char *msg, struct gh_err *err)
{
    size_t n = msg ? strcspn(msg, "\n") : 0;
    return gh_err_set(err, rc, "postgres %s: %.*s", what, (int)n, msg ? msg : "");
}

static int result_rc(struct pg *p, PGresult *r, const char *what, struct gh_err *err)
{
    if (!r)
        return pg_fail(GH_EIO, what, p->error_message(p->conn), err);
    ExecStatusType s = p->result_status(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return GH_OK;
    return pg_fail(GH_EIO, what, p->result_error(r), err);
}

static int pg_script(void *h, const char *sql, struct gh_err *err)
{
    struct pg *p = h;
    PGresult *r = p->exec(p->conn, sql);
    int rc = result_rc(p, r, "script", err);
    p->clear(r);
    return rc;
}

#define STACK_PARAMS 16

/* Runs sql with v[0..np) as text parameters; NULL when out of memory. */
static PGresult *run(struct pg *p, const char *sql, const struct gh_db_val *v, int np)
{
    const char *vals_s[STACK_PARAMS] = {NULL};
    char ints_s[STACK_PARAMS][24];
    const char **vals = vals_s;
    char(*ints)[24] = ints_s;
    if (np > STACK_PARAMS) { /* a multi-row INSERT: on the heap */
        vals = malloc((size_t)np * sizeof *vals);
        ints = malloc((size_t)np * sizeof *ints);
        if (!vals || !ints) {
            free(vals);
            free(ints);
            return NULL;
        }
    }
    for (int i = 0; i < np; i++) {
        switch (v[i].t) {
        case GH_DBV_NULL: vals[i] = NULL; break;
        case GH_DBV_TEXT: vals[i] = v[i].s; break;
        case GH_DBV_INT:
            snprintf(ints[i], sizeof ints[i], "%lld", (long long)v[i].i);
            vals[i] = ints[i];
            break;
        }
    }
    PGresult *r = p->exec_params(p->conn, sql, np, NULL, vals, NULL, NULL, 0);
    if (vals != vals_s) {
        free(vals);
        free(ints);
    }
    return r;
}

static int pg_exec(void *h, const char *sql, const struct gh_db_val *v, int np, long *changed,
                   struct gh_err *err)
{
    struct pg *p = h;
    PGresult *r = run(p, sql, v, np);
    int rc = result_rc(p, r, "exec", err);
    if (!rc && changed)
        *changed = strtol(p->cmd_tuples(r), NULL, 10);
    p->clear(r);
    return rc;
}

static int pg_query(void *h, const char *sql, const struct gh_db_val *v, int np, gh_db_row_fn row,
                    void *ud, struct gh_err *err)
{
    struct pg *p = h;
    PGresult *r = run(p, sql, v, np);
    int rc = result_rc(p, r, "query", err);
    if (rc) {
        p->clear(r);
        return rc;
    }
    int nrows = p->ntuples(r), ncols = p->nfields(r);
    if (ncols > ROW_MAX_COLS) {
        p->clear(r);
        return gh_err_set(err, GH_ELIMIT, "query returns %d columns", ncols);
    }
    const char *vals[ROW_MAX_COLS];
    for (int i = 0; i < nrows && !rc; i++) {
        for (int c = 0; c < ncols; c++)
            vals[c] = p->getisnull(r, i, c) ? NULL : p->getvalue(r, i, c);
        rc = row(ud, ncols, vals);
    }
    p->clear(r);
    return rc;
}

static void pg_close(void *h)
{
    struct pg *p = h;
    if (!p)
        return;
    if (p->conn)
        p->finish(p->conn);
    if (p->lib)
        dlclose(p->lib);
    free(p);
}

static const struct gh_db_ops pg_ops = {pg_script, pg_exec, pg_query, pg_close};

#define LOAD(field, sym)                                                                          \
    do {                                                                                          \
        *(void **)&p->field = dlsym(p->lib, sym);                                                 \
        if (!p->field) {                                                                          \
            rc = gh_err_set(err, GH_EUNSUPPORTED, "libpq: symbol %s missing", sym);               \
            goto out;                                                                             \
        }                                                                                         \
    } while (0)

int gh_db_pg_open(const char *conninfo, void **h, const struct gh_db_ops **ops, struct gh_err *err)
{
    int rc = GH_OK;
    struct pg *p = calloc(1, sizeof *p);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    p->lib = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!p->lib) {
        rc = gh_err_set(err, GH_EUNSUPPORTED, "PostgreSQL store needs libpq.so.5: %s", dlerror());
        goto out;
    }
    LOAD(connectdb, "PQconnectdb");
    LOAD(status, "PQstatus");
    LOAD(error_message, "PQerrorMessage");
    LOAD(finish, "PQfinish");
    LOAD(exec, "PQexec");
    LOAD(exec_params, "PQexecParams");
    LOAD(result_status, "PQresultStatus");
    LOAD(result_error, "PQresultErrorMessage");
    LOAD(clear, "PQclear");
    LOAD(ntuples, "PQntuples");
    LOAD(nfields, "PQnfields");
    LOAD(getvalue, "PQgetvalue");
    LOAD(getisnull, "PQgetisnull");
    LOAD(cmd_tuples, "PQcmdTuples");
    LOAD(set_notice_processor, "PQsetNoticeProcessor");
    p->conn = p->connectdb(conninfo);
    if (!p->conn) {
        rc = gh_err_set(err, GH_ENOMEM, "postgres: out of memory");
        goto out;
    }
    if (p->status(p->conn) != CONNECTION_OK) {
        rc = pg_fail(GH_EIO, "connect", p->error_message(p->conn), err);
        goto out;
    }
    p->set_notice_processor(p->conn, quiet, NULL);
    rc = pg_script(p, "SET client_min_messages = warning", err);
out:
    if (rc) {
        pg_close(p);
        return rc;
    }
    *h = p;
    *ops = &pg_ops;
    return GH_OK;
}
