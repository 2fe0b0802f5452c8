/* step_writer.h - the controller's batching writer of training
 * telemetry into the audit store (telemetry.h). The event loop hands it
 * each step signal; it only aggregates in memory (per job, rank and time
 * bucket, under a mutex held for a hash lookup) and never does I/O. A
 * thread of its own, with its own store connection, writes what was
 * gathered in one transaction every flush interval, or sooner when half
 * the buffer is used. When the buffer is full until the next flush, new
 * buckets are dropped and counted (samples of buckets already buffered
 * are still merged).
 *
 *   gh_step_writer_new(&opts, &tw, &err);
 *   gh_step_writer_note(tw, &sig);          event loop, each signal
 *   gh_step_writer_free(tw);                writes what is left, joins */
#ifndef GH_AUDIT_STEP_WRITER_H
#define GH_AUDIT_STEP_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

struct gh_step_writer_opts {
    const char *db_url;   /* the audit store (copied; the writer opens its own connection) */
    int64_t bucket_ns;    /* aggregation width; 0: 5 s */
    int64_t retain_ns;    /* buckets older than the newest one seen minus this are
                             deleted at each flush; 0: 6 h, < 0: never */
    int64_t flush_ns;     /* write interval; 0: 2 s */
    size_t max_pending;   /* buckets buffered between two writes; 0: 8192 */
    bool no_thread;       /* tests: no writer thread; the caller flushes */
};

struct gh_step_writer;

/* Opens the store and starts the thread. *out: caller frees with
 * gh_step_writer_free. */
int gh_step_writer_new(const struct gh_step_writer_opts *o, struct gh_step_writer **out,
                     struct gh_err *err);
/* Stops the thread, writes what is buffered, closes. Accepts NULL. */
void gh_step_writer_free(struct gh_step_writer *t);

/* Takes s (borrowed) when it is a step with a job, a rank and a finite,
 * non-negative step_ms; other signals are ignored. Returns true when the
 * sample was kept. Never blocks on I/O. Accepts a NULL writer. */
bool gh_step_writer_note(struct gh_step_writer *t, const struct gh_signal *s);

/* Writes what is buffered now, on the caller's thread (serialized with the
 * writer thread). */
int gh_step_writer_flush(struct gh_step_writer *t, struct gh_err *err);

struct gh_step_writer_stats {
    uint64_t samples;     /* step samples taken */
    uint64_t dropped;     /* samples dropped: the buffer was full */
    uint64_t flushes;     /* transactions committed */
    uint64_t rows;        /* bucket rows merged */
    uint64_t failures;    /* transactions that failed (their buckets are lost) */
    char last_error[160]; /* "" when none */
};
void gh_step_writer_stats(struct gh_step_writer *t, struct gh_step_writer_stats *out);

#endif
