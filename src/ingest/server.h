/* server.h - the controller's ingest endpoint on libmicrohttpd:
 *
 *   POST /v1/signals   JSON lines in (ingest/wire.h for the protocol),
 *                      bearer token required, summary out
 *   GET  /healthz      "ok"
 *   GET  /metrics      Prometheus text: requests by status, signals by
 *                      result, bytes, dedup set size (plus the owner's own
 *                      lines, opts.extra_metrics)
 *
 * The server runs on its own thread (libmicrohttpd's internal epoll
 * thread); accepted signals are handed to opts.sink on that thread, which
 * normally pushes them to a gh_sigqueue read by the owner's event loop
 * (gh_ingest_queue_sink). Nothing the owner's loop does blocks on it.
 *
 * Security: tokens are compared in constant time (SHA-256 of the presented
 * token against each allowed token's SHA-256 with CRYPTO_memcmp, all of
 * them, no early exit), so neither a token's bytes nor its length leak by
 * timing. The token file holds one token per line ('#' comments and blank
 * lines skipped, at most 16 tokens, for rotation) and is re-read when it
 * changes (checked at most once a second), as a mounted Kubernetes Secret
 * is updated in place. The request body is bounded (opts.body_max; a
 * declared Content-Length over it is refused before the body is read), as
 * are the line length and count (opts.limits) and the connections. With
 * TLS only TLS 1.2 and 1.3 are offered (GnuTLS "NORMAL" otherwise). */
#ifndef GH_INGEST_SERVER_H
#define GH_INGEST_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/queue.h"
#include "ingest/wire.h"
#include "signal/signal.h"

/* Takes sigs[0..n) (stealing each on GH_OK; the server clears them
 * otherwise). GH_EAGAIN = no room now: the request is answered 503 with
 * Retry-After and none of its signals counts as seen. Called on the
 * server's thread, one call at a time. */
typedef int (*gh_ingest_sink_fn)(void *ctx, struct gh_signal *sigs, size_t n);

/* A sink that pushes to the gh_sigqueue ctx. */
int gh_ingest_queue_sink(void *queue, struct gh_signal *sigs, size_t n);

/* Appends extra Prometheus text lines to buf[0..cap) and returns the bytes
 * written (at most cap - 1; NUL-terminated). Called on the server's thread. */
typedef size_t (*gh_ingest_metrics_fn)(void *ctx, char *buf, size_t cap);

struct gh_ingest_server;

struct gh_ingest_server_opts {
    const char *listen;          /* borrowed; "HOST:PORT" (port 0: any free port) */
    const char *token_file;      /* borrowed (copied); required unless allow_anonymous */
    bool allow_anonymous;        /* no token needed (tests, a loopback dev server) */
    const char *tls_cert;        /* borrowed; PEM file paths, both or neither: HTTPS */
    const char *tls_key;
    size_t body_max;             /* 0 = 8 MiB */
    struct gh_ingest_limits limits; /* line_max, max_lines */
    size_t dedup_capacity;       /* 0 = 1M ids (about 24 MiB) */
    unsigned max_connections;    /* 0 = 256 */
    unsigned idle_timeout_s;     /* 0 = 30 */
    gh_ingest_sink_fn sink;      /* required */
    void *sink_ctx;              /* borrowed */
    gh_ingest_metrics_fn extra_metrics; /* optional */
    void *metrics_ctx;
    /* Optional: while ready(ready_ctx) is false, POST /v1/signals answers
     * 503 with Retry-After and Connection: close, and GET /readyz 503
     * (without it: always ready). The controller is ready only while it
     * leads: a standby would hold the incidents until a failover, so the
     * sender retries, on a new connection that a Service may send to the
     * leader. Called on the server's thread: cheap and thread-safe. */
    bool (*ready)(void *ctx);
    void *ready_ctx;
    /* Optional: called once before the socket is opened, to preload the ids
     * the owner already stored (gh_ingest_server_remember). Preloading after
     * the server listens would let a sender's retry slip in as new. */
    void (*preload)(void *ctx, struct gh_ingest_server *srv);
    void *preload_ctx;
};

struct gh_ingest_server;

/* Opens the socket, loads the tokens and TLS files and starts the server
 * thread. *out: caller frees with gh_ingest_server_free(). GH_EINVAL (bad
 * options, an empty or unreadable token file, bad TLS files), GH_EIO
 * (listen), GH_EUNSUPPORTED (TLS asked for, libmicrohttpd built without
 * it), GH_ENOMEM. */
int gh_ingest_server_new(const struct gh_ingest_server_opts *opts,
                         struct gh_ingest_server **out, struct gh_err *err);

/* The bound TCP port. */
int gh_ingest_server_port(const struct gh_ingest_server *srv);

/* Marks id (borrowed) as already seen: the owner preloads the ids it has
 * stored (e.g. from its audit store) so that a retry after a restart of
 * the receiver is still a duplicate. Thread-safe. */
void gh_ingest_server_remember(struct gh_ingest_server *srv, const char *id);

struct gh_ingest_server_stats {
    uint64_t requests, unauthorized, too_large, partial, unavailable, bad_requests;
    uint64_t accepted, duplicates, rejected, bytes;
    size_t dedup_size;
    uint64_t dedup_evicted;
    uint64_t token_reloads, token_reload_errors;
};
/* Thread-safe. */
void gh_ingest_server_stats(struct gh_ingest_server *srv, struct gh_ingest_server_stats *out);

/* Stops the thread, closes connections and the socket, frees. NULL ok. */
void gh_ingest_server_free(struct gh_ingest_server *srv);

#endif
