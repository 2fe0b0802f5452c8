/* publisher.h - ships the spool's signal lines to the controller's ingest
 * endpoint (POST /v1/signals, wire/wire.h) without ever blocking the
 * agent's event loop.
 *
 * Model
 * - One request at a time, made by the publisher's worker thread with
 *   libcurl (one easy handle, so the connection and TLS session are
 *   reused). The loop hands it a batch read from the spool and learns of
 *   the completion through an eventfd (gh_publisher_fd), then acks the
 *   spool: the spool is only ever touched by the loop.
 * - Batching: a batch is sent once batch_records lines are pending, or
 *   linger_ns after the first line became pending, whichever is first; a
 *   backlog (replay after an outage) goes out in full batches back to back.
 * - Replies: 200, or 422 with the summary (some lines rejected): the whole
 *   batch is acked; each rejected line is reported to opts.on_reject with
 *   its seq, text and the server's reason, and dropped (retrying a line
 *   the controller refuses cannot succeed; duplicates are fine). 413: the
 *   batch limits are halved and the batch re-sent at once (a lone line
 *   refused as too large is reported and dropped). Anything else -
 *   connection failure, timeout, 5xx, 401/403 (a token being rotated),
 *   429 - is retried with exponential backoff and full jitter (never below
 *   a Retry-After), re-reading the batch from the spool, which keeps it.
 * - The token file is re-read for every request (a rotated Secret is
 *   picked up; the token never appears in errors or events).
 *
 * Threads: everything but the worker runs on the owner's loop; the
 * callbacks are called from gh_publisher_tick on that loop. */
#ifndef GH_AGENT_PUBLISHER_H
#define GH_AGENT_PUBLISHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/spool.h"
#include "common/err.h"
#include "common/timeutil.h"

/* A line the controller refused (borrowed for the call). */
typedef void (*gh_publisher_reject_fn)(void *ctx, uint64_t seq, const char *line, size_t len,
                                       const char *error);

enum gh_publisher_event {
    GH_PUB_FAILING,    /* a request failed after the last one succeeded */
    GH_PUB_RECOVERED,  /* a request succeeded after failures */
    GH_PUB_SHRUNK,     /* 413: batch limits halved */
};
/* detail: what failed ("HTTP 503: receiver queue full", "connect: ...")
 * and when the next try is, or how many failures there were. */
typedef void (*gh_publisher_event_fn)(void *ctx, enum gh_publisher_event ev, const char *detail);

struct gh_publisher_opts {
    const char *url;            /* borrowed (copied); controller base URL or .../v1/signals */
    const char *token_file;     /* borrowed (copied); NULL = no Authorization header */
    const char *ca_file;        /* borrowed (copied); PEM bundle for https; NULL = system */
    size_t batch_records;       /* 0 = 1000 */
    size_t batch_bytes;         /* 0 = 1 MiB (at least one line is always sent) */
    int64_t linger_ns;          /* 0 = 200 ms */
    int64_t timeout_ns;         /* 0 = 10 s, one request */
    int64_t backoff_min_ns;     /* 0 = 250 ms */
    int64_t backoff_max_ns;     /* 0 = 30 s */
    const struct gh_clock *clock; /* borrowed; NULL = real (linger, backoff) */
    gh_publisher_reject_fn on_reject; /* optional */
    gh_publisher_event_fn on_event;   /* optional */
    void *cb_ctx;
};

struct gh_publisher;

/* Validates opts and starts the worker. *out: caller frees with
 * gh_publisher_free(). GH_EINVAL (bad URL), GH_ENOMEM, GH_EIO. */
int gh_publisher_new(const struct gh_publisher_opts *opts, struct gh_publisher **out,
                     struct gh_err *err);

/* The eventfd that becomes readable when a request completes (owned by
 * the publisher; the owner only polls it, gh_publisher_tick reads it). */
int gh_publisher_fd(const struct gh_publisher *p);

/* Does what is due now: handles a completed request (acks sp, reports
 * rejects) and starts the next one when a batch is ready and no backoff is
 * running. Never blocks. GH_OK, or an error from the spool (logged by the
 * owner; the publisher retries later). */
int gh_publisher_tick(struct gh_publisher *p, struct gh_spool *sp, int64_t now_ns,
                      struct gh_err *err);

/* When tick next has something to do without an fd event (a linger or a
 * backoff ending), INT64_MAX when nothing. */
int64_t gh_publisher_next_deadline(const struct gh_publisher *p);

/* True while a request is in flight. */
bool gh_publisher_busy(const struct gh_publisher *p);

struct gh_publisher_stats {
    uint64_t requests, ok, failures, retries_413;
    uint64_t accepted, duplicates, rejected;   /* lines, as the controller counted */
    uint64_t bytes;                             /* request bodies sent */
    uint64_t consecutive_failures;
    long last_status;                           /* last HTTP status, 0 = none/no reply */
    int64_t last_ok_ns;                         /* clock time of the last success, 0 = never */
};
void gh_publisher_stats(const struct gh_publisher *p, struct gh_publisher_stats *out);

/* Stops the worker (an in-flight request is aborted within about 100 ms)
 * and frees. The spool keeps what was not acked. Accepts NULL. */
void gh_publisher_free(struct gh_publisher *p);

#endif
