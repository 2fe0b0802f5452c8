/* db_pg.c - the audit store's SQL interface on PostgreSQL through libpq,
 * loaded with dlopen when a postgres:// store is opened: the binaries run
 * (with SQLite) on hosts without libpq, and no build flag is needed. Each
 * connection holds its own function table, so there is no global state.
 *
 * A connection the server dropped (a restart, a failover, an idle kill) is
 * opened again on the next statement, no more often than a backoff allows
 * (0.1 s doubling to 5 s while it fails), so a store outlives its server's
 * restart. Never inside a transaction: once the connection of an open
 * transaction is lost, every statement fails until its ROLLBACK (or
 * COMMIT, which fails too), so a half-written transaction is never
 * completed on a new connection. A BEGIN or a SELECT outside a transaction
 * that finds the connection dropped is sent again once it is back.
 *
 * A server that keeps the connection open and never answers (its host
 * frozen, the process stopped, a network path that drops packets without a
 * reset) would hold a blocking PQexec forever, and with it the thread that
 * records decisions and the probe that says whether the store records.
 * Statements are therefore sent with libpq's asynchronous calls on a
 * non-blocking connection and their answer awaited with poll for at most
 * ANSWER_DEADLINE_NS; past it the connection is shut down (the server
 * rolls back what it had of an open transaction once it notices) and
 * handled as one the server dropped. A COMMIT that got no answer may have
 * committed: its error says the outcome is unknown. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <postgresql/libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "audit/db.h"
#include "common/mono.h"

#define ROW_MAX_COLS 64
#define RECONNECT_FIRST_NS (100 * 1000000LL)
#define RECONNECT_MAX_NS (5 * 1000000000LL)
/* a server that does not answer a connection attempt; a connect_timeout
 * in the store URL wins */
#define CONNECT_TIMEOUT_S "5"
/* the longest a statement waits for the server's answer: far above what
 * gpuheal's statements take on a loaded server (milliseconds; a schema
 * creation a few seconds), short enough that a frozen server is noticed
 * while a decision can still be recorded elsewhere */
#define ANSWER_DEADLINE_S 30
#define ANSWER_DEADLINE_NS (ANSWER_DEADLINE_S * 1000000000LL)

struct pg {
    void *lib;
    PGconn *conn;
    bool in_tx;              /* a BEGIN succeeded, its COMMIT/ROLLBACK not yet sent */
    bool dropped;            /* shut down by us after a missing answer; PQreset reopens */
    bool late;               /* the last statement got no answer before the deadline */
    int64_t retry_at_ns;     /* mono: the next reconnection attempt (0: at once) */
    int64_t backoff_ns;      /* the wait after a failed attempt */
    __typeof__(&PQconnectdbParams) connectdb;
    __typeof__(&PQreset) reset;
    __typeof__(&PQstatus) status;
    __typeof__(&PQerrorMessage) error_message;
    __typeof__(&PQfinish) finish;
    __typeof__(&PQsendQuery) send_query;
    __typeof__(&PQsendQueryParams) send_query_params;
    __typeof__(&PQgetResult) get_result;
    __typeof__(&PQisBusy) is_busy;
    __typeof__(&PQconsumeInput) consume_input;
    __typeof__(&PQflush) flush;
    __typeof__(&PQsocket) socket;
    __typeof__(&PQsetnonblocking) set_nonblocking;
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
    if (!r && p->late)
        return gh_err_set(err, GH_EIO, "postgres %s: no answer within %d s; the connection "
                          "was shut down (a COMMIT's outcome is unknown)", what, ANSWER_DEADLINE_S);
    if (!r)
        return pg_fail(GH_EIO, what, p->error_message(p->conn), err);
    ExecStatusType s = p->result_status(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return GH_OK;
    return pg_fail(GH_EIO, what, p->result_error(r), err);
}

static bool conn_ok(const struct pg *p)
{
    return !p->dropped && p->status(p->conn) == CONNECTION_OK;
}

/* Shuts the connection down after a missing answer: the socket closes now
 * (the server's backend sees it once it runs again and ends its session),
 * the next statement reopens it as after a server restart. */
static void drop(struct pg *p)
{
    int fd = p->socket(p->conn);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    p->dropped = true;
}

/* Waits until the connection's socket is ready for ev; false once the
 * deadline (monotonic) has passed. A poll error is left to libpq to report. */
static bool wait_sock(struct pg *p, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - gh_mono_ns();
        if (left <= 0)
            return false;
        struct pollfd pfd = {.fd = p->socket(p->conn), .events = ev};
        if (pfd.fd < 0)
            return true;
        int n = poll(&pfd, 1, (int)((left + 999999) / 1000000));
        if (n > 0 || (n < 0 && errno != EINTR))
            return true;
    }
}

/* The answer to the statement just sent, as PQexec gives it (the last
 * result), awaited until the deadline. NULL: the connection failed (its
 * message says why) or, with p->late set, the server did not answer in
 * time and the connection was shut down. Caller clears the result. */
static PGresult *answer(struct pg *p)
{
    int64_t deadline = gh_mono_ns() + ANSWER_DEADLINE_NS;
    int f;
    while ((f = p->flush(p->conn)) == 1) {
        if (!wait_sock(p, POLLIN | POLLOUT, deadline))
            goto late;
        if (!p->consume_input(p->conn))
            break;
    }
    PGresult *last = NULL;
    for (;;) {
        while (p->is_busy(p->conn)) {
            if (!wait_sock(p, POLLIN, deadline)) {
                p->clear(last);
                goto late;
            }
            if (!p->consume_input(p->conn))
                break; /* the connection failed: PQgetResult says so */
        }
        PGresult *r = p->get_result(p->conn);
        if (!r)
            break;
        p->clear(last);
        last = r;
        ExecStatusType s = p->result_status(r);
        if (s == PGRES_COPY_IN || s == PGRES_COPY_OUT || s == PGRES_COPY_BOTH)
            break; /* gpuheal sends no COPY; never wait on one */
    }
    return last;
late:
    p->late = true;
    drop(p);
    return NULL;
}

/* Sends sql (one or more statements, no parameters) and awaits its answer. */
static PGresult *exec_text(struct pg *p, const char *sql)
{
    p->late = false;
    if (!p->send_query(p->conn, sql))
        return NULL;
    return answer(p);
}

/* The session settings every connection starts with. */
static int session_setup(struct pg *p, struct gh_err *err)
{
    if (p->set_nonblocking(p->conn, 1) != 0)
        return pg_fail(GH_EIO, "session setup", p->error_message(p->conn), err);
    PGresult *r = exec_text(p, "SET client_min_messages = warning");
    int rc = result_rc(p, r, "session setup", err);
    p->clear(r);
    return rc;
}

/* A dropped connection opened again, when the backoff allows. */
static int reconnect(struct pg *p, struct gh_err *err)
{
    int64_t t = gh_mono_ns();
    if (t < p->retry_at_ns)
        return gh_err_set(err, GH_EIO, "postgres: connection lost; next reconnection attempt "
                          "in %lld ms", (long long)((p->retry_at_ns - t) / 1000000));
    p->reset(p->conn);
    p->dropped = false;
    if (conn_ok(p) && session_setup(p, err) == GH_OK) {
        p->backoff_ns = 0;
        p->retry_at_ns = 0;
        return GH_OK;
    }
    p->backoff_ns = p->backoff_ns ? p->backoff_ns * 2 : RECONNECT_FIRST_NS;
    if (p->backoff_ns > RECONNECT_MAX_NS)
        p->backoff_ns = RECONNECT_MAX_NS;
    p->retry_at_ns = gh_mono_ns() + p->backoff_ns;
    return pg_fail(GH_EIO, "reconnect", p->error_message(p->conn), err);
}

enum stmt { STMT_OTHER, STMT_BEGIN, STMT_COMMIT, STMT_ROLLBACK, STMT_READ };

static enum stmt stmt_of(const char *sql)
{
    if (!strcmp(sql, "BEGIN"))
        return STMT_BEGIN;
    if (!strcmp(sql, "COMMIT"))
        return STMT_COMMIT;
    if (!strcmp(sql, "ROLLBACK"))
        return STMT_ROLLBACK;
    return strncmp(sql, "SELECT ", 7) == 0 ? STMT_READ : STMT_OTHER;
}

/* Before a statement: GH_OK to send it; *skip: a ROLLBACK of a transaction
 * whose connection is gone (the server ended it) is not sent. */
static int before(struct pg *p, enum stmt k, bool *skip, struct gh_err *err)
{
    *skip = false;
    if (conn_ok(p))
        return GH_OK;
    if (p->in_tx) {
        if (k == STMT_ROLLBACK) {
            p->in_tx = false;
            *skip = true;
            return GH_OK;
        }
        if (k == STMT_COMMIT)
            p->in_tx = false;
        return gh_err_set(err, GH_EIO, "postgres: connection lost inside a transaction "
                          "(nothing of it was committed)");
    }
    return reconnect(p, err);
}

/* After a statement: the transaction state it leaves. */
static void after(struct pg *p, enum stmt k, bool ok)
{
    if (k == STMT_BEGIN)
        p->in_tx = ok;
    else if (k == STMT_COMMIT || k == STMT_ROLLBACK)
        p->in_tx = false;
}

/* Whether a failed statement k may be sent again on a new connection:
 * nothing of it can have happened (a BEGIN, a read outside a transaction)
 * and the failure was the dropped connection. */
static bool resend(struct pg *p, enum stmt k)
{
    return !conn_ok(p) && !p->in_tx && (k == STMT_BEGIN || k == STMT_READ) &&
           reconnect(p, NULL) == GH_OK;
}

static int pg_script(void *h, const char *sql, struct gh_err *err)
{
    struct pg *p = h;
    bool skip;
    int rc = before(p, STMT_OTHER, &skip, err);
    if (rc)
        return rc;
    PGresult *r = exec_text(p, sql);
    rc = result_rc(p, r, "script", err);
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
    p->late = false;
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
    int sent = p->send_query_params(p->conn, sql, np, NULL, vals, NULL, NULL, 0);
    if (vals != vals_s) {
        free(vals);
        free(ints);
    }
    return sent ? answer(p) : NULL;
}

static int pg_exec(void *h, const char *sql, const struct gh_db_val *v, int np, long *changed,
                   struct gh_err *err)
{
    struct pg *p = h;
    enum stmt k = stmt_of(sql);
    bool skip;
    int rc = before(p, k, &skip, err);
    if (rc || skip)
        return rc;
    PGresult *r = run(p, sql, v, np);
    rc = result_rc(p, r, "exec", err);
    if (rc && resend(p, k)) {
        p->clear(r);
        r = run(p, sql, v, np);
        rc = result_rc(p, r, "exec", err);
    }
    after(p, k, rc == GH_OK);
    if (!rc && changed)
        *changed = strtol(p->cmd_tuples(r), NULL, 10);
    p->clear(r);
    return rc;
}

static int pg_query(void *h, const char *sql, const struct gh_db_val *v, int np, gh_db_row_fn row,
                    void *ud, struct gh_err *err)
{
    struct pg *p = h;
    enum stmt k = stmt_of(sql);
    bool skip;
    int rc = before(p, k, &skip, err);
    if (rc || skip)
        return rc;
    PGresult *r = run(p, sql, v, np);
    rc = result_rc(p, r, "query", err);
    if (rc && resend(p, k)) {
        p->clear(r);
        r = run(p, sql, v, np);
        rc = result_rc(p, r, "query", err);
    }
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
    LOAD(connectdb, "PQconnectdbParams");
    LOAD(reset, "PQreset");
    LOAD(status, "PQstatus");
    LOAD(error_message, "PQerrorMessage");
    LOAD(finish, "PQfinish");
    LOAD(send_query, "PQsendQuery");
    LOAD(send_query_params, "PQsendQueryParams");
    LOAD(get_result, "PQgetResult");
    LOAD(is_busy, "PQisBusy");
    LOAD(consume_input, "PQconsumeInput");
    LOAD(flush, "PQflush");
    LOAD(socket, "PQsocket");
    LOAD(set_nonblocking, "PQsetnonblocking");
    LOAD(result_status, "PQresultStatus");
    LOAD(result_error, "PQresultErrorMessage");
    LOAD(clear, "PQclear");
    LOAD(ntuples, "PQntuples");
    LOAD(nfields, "PQnfields");
    LOAD(getvalue, "PQgetvalue");
    LOAD(getisnull, "PQgetisnull");
    LOAD(cmd_tuples, "PQcmdTuples");
    LOAD(set_notice_processor, "PQsetNoticeProcessor");
    /* conninfo expanded in the place of dbname: its own connect_timeout,
     * when it has one, comes later and wins */
    const char *const keys[] = {"connect_timeout", "dbname", NULL};
    const char *const vals[] = {CONNECT_TIMEOUT_S, conninfo, NULL};
    p->conn = p->connectdb(keys, vals, 1);
    if (!p->conn) {
        rc = gh_err_set(err, GH_ENOMEM, "postgres: out of memory");
        goto out;
    }
    if (p->status(p->conn) != CONNECTION_OK) {
        rc = pg_fail(GH_EIO, "connect", p->error_message(p->conn), err);
        goto out;
    }
    p->set_notice_processor(p->conn, quiet, NULL); /* kept across PQreset */
    rc = session_setup(p, err);
out:
    if (rc) {
        pg_close(p);
        return rc;
    }
    *h = p;
    *ops = &pg_ops;
    return GH_OK;
}
