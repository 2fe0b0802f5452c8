/* pg_testenv.h - a private, throw-away PostgreSQL cluster for tests and
 * benchmarks: initdb into a temporary directory, a server on a Unix socket
 * in that directory only (no TCP), stopped and removed afterwards. Uses
 * Debian's /usr/lib/postgresql/<N>/bin (or $GH_PG_BIN). When run as root,
 * the server runs as the "postgres" user (PostgreSQL refuses root). */
#ifndef GH_AUDIT_PG_TESTENV_H
#define GH_AUDIT_PG_TESTENV_H

#include <stdbool.h>

#include "common/err.h"

struct gh_pg_testenv {
    char dir[256];   /* the temporary directory (data/, socket, logs) */
    char bin[256];   /* where initdb and pg_ctl are */
    char url[600];   /* for gh_audit_open: "postgres:host=... port=... user=... dbname=..." */
    char uri[600];   /* the same as a postgresql:// URI (for command lines) */
    int running;
};

/* GH_ENOTFOUND when no PostgreSQL server binaries are installed (the caller
 * skips), GH_EIO when the cluster does not start (log tail in err). */
int gh_pg_testenv_start(struct gh_pg_testenv *pg, struct gh_err *err);
/* Stops the server (fast shutdown: the clients' connections are closed) and
 * keeps the cluster; gh_pg_testenv_resume starts it again on the same data,
 * socket and port (a PostgreSQL restart, for reconnection tests). */
void gh_pg_testenv_halt(struct gh_pg_testenv *pg);
int gh_pg_testenv_resume(struct gh_pg_testenv *pg, struct gh_err *err);
/* Freezes the server's processes (SIGSTOP) or lets them run again
 * (SIGCONT): a server that keeps its connections open and answers nothing,
 * as a frozen host does. Unfreeze before gh_pg_testenv_stop. */
int gh_pg_testenv_freeze(struct gh_pg_testenv *pg, bool frozen, struct gh_err *err);
/* Stops the server (immediate) and removes the directory. Accepts a
 * never-started value. */
void gh_pg_testenv_stop(struct gh_pg_testenv *pg);

#endif
