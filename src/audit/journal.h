/* journal.h - the signal journal: every signal the ingest endpoint accepts
 * is written to the audit store's signal_journal table, one transaction per
 * POST batch, and committed before the request is answered; a restarted
 * controller replays the journal into its engine so that an acknowledged
 * signal is never lost with the process's memory (docs/controller.md,
 * "Durability").
 *
 *   gh_journal_open("sqlite:/var/lib/gpuheal/audit.db", &jo, &j, &err);
 *   gh_journal_append(j, sigs, n, arrival_ns, &err);   ... per POST batch
 *   gh_journal_replay(j, now - retention, fn, ud, &st, &err);  ... on start
 *
 * A journal owns its own store connection and belongs to one thread at a
 * time: the controller replays on its constructor's thread before the
 * ingest server starts, then appends on the ingest server's threads, one
 * at a time. Rows are keyed by the signal's node, source, injected flag and
 * id (or, for a signal without an id, a hash of its encoding): a second
 * append of the same signal changes nothing.
 * Rows older than the retention are deleted by append itself, at most once
 * per prune interval, in their own transaction after the batch's commit. */
#ifndef GH_AUDIT_JOURNAL_H
#define GH_AUDIT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_JOURNAL_DEFAULT_RETENTION_NS (3600 * GH_NS_PER_S)
#define GH_JOURNAL_DEFAULT_PRUNE_EVERY_NS (60 * GH_NS_PER_S)
/* Rows per INSERT statement: a batch of n signals takes ceil(n / this)
 * statements (1,280 parameters each: far below SQLite's 32,766 and
 * PostgreSQL's 65,535). */
#define GH_JOURNAL_ROWS_PER_INSERT 256

struct gh_journal_opts {
    const char *db_url;          /* borrowed: the audit store (gh_audit_open's url) */
    int64_t retention_ns;        /* rows older than this are pruned; 0: 1 h */
    int64_t prune_every_ns;      /* at most one prune per this; 0: 60 s */
    const struct gh_clock *clock;/* borrowed; NULL: real (prune timing and cutoff) */
};

struct gh_journal;

/* Opens its own connection to the store (creating the schema when absent).
 * *out: caller frees with gh_journal_close. */
int gh_journal_open(const struct gh_journal_opts *o, struct gh_journal **out,
                    struct gh_err *err);
void gh_journal_close(struct gh_journal *j);

/* Writes sigs[0..n) (borrowed), arrived at arrival_ns, in one transaction
 * and returns once it is committed (durable: SQLite synchronous=FULL,
 * PostgreSQL's commit). Signals already journalled are left as they are
 * (not an error). On any error nothing of the batch is kept. */
int gh_journal_append(struct gh_journal *j, const struct gh_signal *sigs, size_t n,
                      int64_t arrival_ns, struct gh_err *err);

/* Deletes the rows that arrived before cutoff_ns; *removed (optional). */
int gh_journal_prune(struct gh_journal *j, int64_t cutoff_ns, long *removed,
                     struct gh_err *err);

/* Receives one journalled signal (stolen: the callee clears it) and when it
 * arrived. Anything but GH_OK stops the replay with that rc. */
typedef int (*gh_journal_fn)(void *ud, struct gh_signal *sig, int64_t arrival_ns);

struct gh_journal_replay_stats {
    size_t replayed;   /* signals handed to fn */
    size_t unreadable; /* rows whose line no longer decodes (skipped) */
};
/* Calls fn for each row that arrived at or after since_ns, in arrival order
 * (within one batch, the batch's order). st optional. */
int gh_journal_replay(struct gh_journal *j, int64_t since_ns, gh_journal_fn fn, void *ud,
                      struct gh_journal_replay_stats *st, struct gh_err *err);

/* A decision's identity without its topology: an incident's id also hashes
 * the affected job, which a replay may not see again (a restart moved the
 * job off the blamed node), so a restarted controller also knows the
 * stored decisions by this key. cls: the class name; node NULL or gpu < 0
 * when absent; first_ns at microsecond precision (as the store keeps it).
 * Writes "class|node|gpu|first_us|rule" into buf[0..cap). */
void gh_journal_decision_key(const char *cls, const char *node, int gpu, int64_t first_ns,
                             const char *rule, char *buf, size_t cap);
/* Calls fn with the key of each incident in the store decided at or after
 * since_ns. */
typedef int (*gh_journal_key_fn)(void *ud, const char *key);
int gh_journal_decided(struct gh_journal *j, int64_t since_ns, gh_journal_key_fn fn, void *ud,
                       struct gh_err *err);

/* Rows in the journal now (tests, metrics). */
int gh_journal_count(struct gh_journal *j, long *n, struct gh_err *err);

#endif
