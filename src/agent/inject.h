/* inject.h - the agent's injection source: spec signals (JSON lines) read
 * from a file or a FIFO, for tests, demos and operators. Every signal is
 * emitted with injected = true, whatever the line said.
 *
 * Lines are decoded by the signal codec; a line without "node" gets
 * opts.node (so a demo file can omit it). A scenario header line
 * ({"scenario":...}) is skipped. A bad line is counted, kept in a ring of
 * recent rejects with its line number and reason ("line 7: field \"code\":
 * missing"), passed to opts.on_reject when set, and never stops the lines
 * after it. Lines longer than GH_SIGNAL_LINE_MAX are rejected and skipped.
 *
 * A regular file is read to its end, after which the source is done
 * (gh_inject_poll returns GH_ENOTFOUND), unless opts.follow, in which case
 * appends are read as they come. A FIFO is held open for reading and
 * writing, so that writers may come and go without an end of file; it is
 * never done.
 *
 * Driving: gh_inject_poll() from the caller's loop (never blocks; the
 * agent polls on its loop's timer). emit and on_reject are called from the
 * poll() caller, never concurrently with themselves. */
#ifndef GH_AGENT_INJECT_H
#define GH_AGENT_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_INJECT_REJECTS_KEEP 16

/* Receives each signal (borrowed for the call). */
typedef void (*gh_inject_emit_fn)(void *ctx, const struct gh_signal *s);
/* Receives each bad line's number (1-based, physical lines) and reason
 * (borrowed, "line N: ..."). */
typedef void (*gh_inject_reject_fn)(void *ctx, long line_no, const char *reason);

struct gh_inject_opts {
    const char *path;           /* copied; required: a regular file or a FIFO */
    const char *node;           /* copied; filled into lines without node; may be NULL */
    bool follow;                /* regular file: keep reading appends */
    gh_inject_emit_fn emit;     /* required */
    void *emit_ctx;
    gh_inject_reject_fn on_reject; /* optional */
    void *reject_ctx;
};

/* Zeroes *o (all defaults). */
void gh_inject_opts_init(struct gh_inject_opts *o);

struct gh_inject;

/* Opens the path (a FIFO without a writer is fine). *out: caller frees with
 * gh_inject_free(). GH_ENOTFOUND, GH_EIO, GH_EINVAL (not a file or FIFO),
 * GH_ENOMEM. */
int gh_inject_new(const struct gh_inject_opts *opts, struct gh_inject **out, struct gh_err *err);

/* Reads what is available now (at most about 4 MiB per call) and emits.
 * GH_OK; GH_ENOTFOUND when a non-followed regular file has been read to its
 * end (done; a final line without newline is processed); GH_EIO. */
int gh_inject_poll(struct gh_inject *in, struct gh_err *err);

/* true once a non-followed regular file has been read to its end. Thread-safe. */
bool gh_inject_done(struct gh_inject *in);

struct gh_inject_stats {
    uint64_t lines;      /* physical lines read */
    uint64_t signals;    /* emitted */
    uint64_t rejected;
};
/* Thread-safe. */
void gh_inject_stats(struct gh_inject *in, struct gh_inject_stats *out);

struct gh_inject_reject {
    long line_no;
    char reason[200];
};
/* Copies up to cap recent rejects, oldest first; returns how many. Thread-safe. */
size_t gh_inject_rejects(struct gh_inject *in, struct gh_inject_reject *out, size_t cap);

/* Closes and frees. Accepts NULL. */
void gh_inject_free(struct gh_inject *in);

#endif
