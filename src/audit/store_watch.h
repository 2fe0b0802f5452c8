/* store_watch.h - whether the audit store can record now. A thread of its
 * own writes one probe row (meta key "probe/IDENTITY") every interval on
 * its own connection, which reconnects as db.h says; the other writers (the
 * signal journal) report the outcome of their writes too, and the latest
 * outcome of any write is the verdict. A probe that has waited for its
 * answer longer than the stall bound counts as a failed write at once (a
 * frozen server answers nothing, so no outcome would ever come; the
 * database layer gives up on it later, db_pg.c). The controller's
 * readiness and its leadership follow the verdict (docs/controller.md,
 * "Readiness").
 *
 *   gh_store_watch_new(&opts, &w, &err);
 *   gh_store_watch_note(w, rc, err.msg);   any thread, after a write
 *   gh_store_watch_ok(w);                  any thread
 *   gh_store_watch_free(w);
 *
 * Times are monotonic (gh_mono_ns). Never blocks its callers on I/O. */
#ifndef GH_AUDIT_STORE_WATCH_H
#define GH_AUDIT_STORE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct gh_store_watch_opts {
    const char *db_url;   /* the audit store (copied) */
    const char *identity; /* copied: names the probe row (one per replica) */
    int64_t every_ns;     /* probe interval; 0: 1 s */
    bool no_thread;       /* tests: no thread; the caller probes */
    int64_t stall_ns;     /* a probe waiting longer is a failure; 0: 5 s (at least 3 intervals) */
};

struct gh_store_watch;

/* Opens its connection (the store must be reachable now) and starts the
 * thread. *out: caller frees with gh_store_watch_free. */
int gh_store_watch_new(const struct gh_store_watch_opts *o, struct gh_store_watch **out,
                       struct gh_err *err);
/* Stops and joins the thread, closes. Accepts NULL. */
void gh_store_watch_free(struct gh_store_watch *w);

/* One probe write now, on the caller's thread (serialized with the
 * thread's). Returns its outcome, also noted. */
int gh_store_watch_probe(struct gh_store_watch *w, struct gh_err *err);

/* A write's outcome: rc GH_OK, or a failure with its message (borrowed).
 * Accepts a NULL watch. */
void gh_store_watch_note(struct gh_store_watch *w, int rc, const char *msg);

/* The verdict: the latest write succeeded and no probe has waited for its
 * answer past the stall bound. Lock-free. */
bool gh_store_watch_ok(struct gh_store_watch *w);

struct gh_store_watch_state {
    bool ok;
    int64_t since_ns;     /* monotonic: when the verdict last changed (the start at first) */
    uint64_t changes;     /* how often it changed */
    uint64_t failures;    /* failed writes noted */
    char error[256];      /* the latest failure's message ("" when none yet) */
};
/* The state; a probe waiting past the stall bound is noted as a failure
 * here first (one change, "no answer from the store for N s"). */
void gh_store_watch_state(struct gh_store_watch *w, struct gh_store_watch_state *out);

#endif
