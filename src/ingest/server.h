/* server.h - the controller's ingest endpoint on libmicrohttpd:
 *
 *   POST /v1/signals   JSON lines in (wire/wire.h for the protocol),
 *                      bearer token required, summary out
 *   GET  /healthz      "ok"
 *   GET  /metrics      Prometheus text: requests by status, signals by
 *                      result, bytes, dedup set size (plus the owner's own
 *                      lines, opts.extra_metrics)
 *
 * The server runs on threads of its own: libmicrohttpd's request threads
 * (opts.threads), which never wait on a dependency, and two worker queues
 * (ingest/workq.h): token reviews (opts.authenticate) and batches (parse,
 * duplicates, opts.sink, one at a time). A request waiting for either has
 * its connection suspended, holding no thread, and is answered 503 with
 * Retry-After when its worker is stalled or its answer late; /healthz,
 * /readyz and /metrics answer from memory. The sink normally pushes to a
 * gh_sigqueue read by the owner's event loop (gh_ingest_queue_sink).
 * Nothing the owner's loop does blocks on it.
 *
 * Senders (docs/design.md, "Threat model"): a request is authenticated
 * before its body is read, as one of
 *   - an operator: a token of opts.token_file (gpuheal inject, tests); may
 *     name any node;
 *   - a node: a token opts.authenticate accepts (the controller's
 *     TokenReview of an agent's bound ServiceAccount token), naming the one
 *     node the sender may report for; a line naming another node is
 *     rejected (422) and a line without a node gets the sender's;
 *   - anonymous (opts.allow_anonymous, tests and a loopback dev server).
 * Whoever sends, a line with source "kube" is rejected: those signals
 * come only from the controller's own informers. An operator's signals are
 * marked injected. Duplicates are dropped by the signal's node, source,
 * injected flag and id together (gh_dedup_signal_key): a node sender can
 * name only its own node and an operator's lines are injected, so no
 * sender can pre-send the id of another sender's (or another source's)
 * signal and have that one dropped as a duplicate.
 *
 * Connections: libmicrohttpd's thread pool (opts.threads), a bound on all
 * connections and on those of one client address (opts.max_per_client),
 * a deadline for a request's headers (opts.header_timeout_s, the time
 * without a byte before the headers are complete; then opts.idle_timeout_s
 * applies), and a refused request (401, 404, ...) closes its connection.
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
#include "signal/signal.h"
#include "signal/sigqueue.h"
#include "wire/wire.h"

/* Takes sigs[0..n) (stealing each on GH_OK; the server clears them
 * otherwise). GH_EAGAIN = no room now: the request is answered 503 with
 * Retry-After and none of its signals counts as seen. Called on the
 * server's write worker, one call at a time; it may block for a bounded
 * time (a commit): the request is answered 503 once write_wait_ms pass,
 * and what the call then commits is still kept (the sender's retry is
 * answered as duplicates). */
typedef int (*gh_ingest_sink_fn)(void *ctx, struct gh_signal *sigs, size_t n);

/* A sink that pushes to the gh_sigqueue ctx. */
int gh_ingest_queue_sink(void *queue, struct gh_signal *sigs, size_t n);

/* Appends extra Prometheus text lines to buf[0..cap) and returns the bytes
 * written (at most cap - 1; NUL-terminated). Called on one of the server's
 * threads, one call at a time. */
typedef size_t (*gh_ingest_metrics_fn)(void *ctx, char *buf, size_t cap);

#define GH_INGEST_NODE_MAX 254

/* Who sent a request (a small value type). */
enum gh_ingest_sender_kind {
    GH_SENDER_ANONYMOUS,
    GH_SENDER_OPERATOR,
    GH_SENDER_NODE,
};
struct gh_ingest_sender {
    enum gh_ingest_sender_kind kind;
    char node[GH_INGEST_NODE_MAX]; /* GH_SENDER_NODE: the node it reports for */
};

/* Authenticates token[0..len) (borrowed; not an operator token). GH_OK
 * with *out filled (kind GH_SENDER_NODE and its node), GH_EINVAL when it is
 * refused (401; err says why, never with token bytes), GH_EAGAIN when it
 * cannot be checked now (503), GH_ELIMIT when too many tokens are being
 * checked (503). It may block for a bounded time (a TokenReview): it runs
 * on the server's review worker, never on a request thread, so a review
 * in flight holds no thread another client needs. */
typedef int (*gh_ingest_auth_fn)(void *ctx, const char *token, size_t len,
                                 struct gh_ingest_sender *out, struct gh_err *err);

/* The non-blocking half of gh_ingest_auth_fn, on the request threads: a
 * verdict already known (GH_OK, GH_EINVAL as above), or GH_ENOTFOUND when
 * the token must be reviewed (by the gh_ingest_auth_fn, on the review
 * worker); then *urgent is set when the token was accepted before (a known
 * sender's renewal goes ahead of tokens never seen). */
typedef int (*gh_ingest_auth_cached_fn)(void *ctx, const char *token, size_t len,
                                        struct gh_ingest_sender *out, bool *urgent,
                                        struct gh_err *err);

/* Why a request was refused (gpuheal_ingest_refused_total{reason}). */
enum gh_ingest_refusal {
    GH_REFUSED_UNAUTHORIZED,       /* 401: no bearer token, or a wrong operator one */
    GH_REFUSED_TOKEN,              /* 401: the token review refused the token */
    GH_REFUSED_REVIEW_RATE,        /* 503: more token reviews a second than allowed */
    GH_REFUSED_REVIEW_UNAVAILABLE, /* 503: the review failed (API server) */
    GH_REFUSED_REVIEW_BUSY,        /* 503: the review queue is full, stalled or late */
    GH_REFUSED_NOT_READY,          /* 503: not the leader, or its store cannot record */
    GH_REFUSED_STORE_BUSY,         /* 503: the write queue is full, stalled or late */
    GH_REFUSED_STORE_FAILED,       /* 503: the sink could not take the batch */
    GH_REFUSED_NOT_ADMITTED_YET,   /* 503: the owner cannot judge a line yet (admit) */
    GH_REFUSED_TOO_LARGE,          /* 413 */
    GH_REFUSED_BAD_REQUEST,        /* 404, 405 */
    GH_REFUSED__COUNT
};
/* The label value of r ("unauthorized", "token", ...). */
const char *gh_ingest_refusal_name(enum gh_ingest_refusal r);

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
    unsigned max_connections;    /* 0 = 1024 (split among the threads) */
    unsigned idle_timeout_s;     /* 0 = 30 */
    unsigned header_timeout_s;   /* silence allowed before the headers are in; 0 = 5;
                                    at most idle_timeout_s */
    unsigned max_per_client;     /* connections from one client address; 0 = 32 */
    unsigned threads;            /* server threads; 0 = 4 */
    gh_ingest_auth_fn authenticate; /* optional: node senders (see above) */
    gh_ingest_auth_cached_fn authenticate_cached; /* optional: its fast half; without
                                                     it every token is reviewed */
    void *auth_ctx;
    /* Work that may block runs on worker threads of the server's own
     * (ingest/workq.h), never on the request threads: token reviews (one
     * worker) and batch commits through the sink (one worker, so one sink
     * call at a time). A request waits for either with its connection
     * suspended (no thread held) and is answered 503 with Retry-After when
     * the queue is full or its worker stalled (at once) or when its answer
     * is not in within review_wait_ms / write_wait_ms. */
    unsigned review_wait_ms;     /* 0 = 2000 */
    unsigned write_wait_ms;      /* 0 = 2000 */
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
    /* Optional: whether a line of a node sender (after the node checks)
     * may be taken: GH_OK; GH_EINVAL refused for its sender (422, counted
     * as forged; why says why); GH_EAGAIN not now (the request is answered
     * 503 with Retry-After and why; none of its lines counts as seen).
     * Called on the server's threads, possibly several at once: cheap and
     * thread-safe. The controller's: control/tenancy.h. */
    int (*admit)(void *ctx, const struct gh_ingest_sender *who, const struct gh_signal *sig,
                 char *why, size_t cap);
    void *admit_ctx;
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

/* Marks sig (borrowed; its node, source, injected flag and id, as the
 * sink got it) as already seen: the owner preloads the ids it has
 * stored (e.g. from its audit store) so that a retry after a restart of
 * the receiver is still a duplicate. Thread-safe. */
void gh_ingest_server_remember(struct gh_ingest_server *srv, const struct gh_signal *sig);

struct gh_ingest_server_stats {
    uint64_t requests, unauthorized, too_large, partial, unavailable, bad_requests;
    uint64_t accepted, duplicates, rejected, bytes;
    uint64_t forged;              /* lines refused for their sender: another node's, kube */
    uint64_t auth_unavailable;    /* requests answered 503: the token could not be checked */
    uint64_t refused[GH_REFUSED__COUNT]; /* every refused request, by reason */
    uint64_t reviews_late, writes_late;  /* answered 503 while still running */
    size_t dedup_size;
    uint64_t dedup_evicted;
    unsigned connections;         /* open now */
    uint64_t token_reloads, token_reload_errors;
};
/* Thread-safe. */
void gh_ingest_server_stats(struct gh_ingest_server *srv, struct gh_ingest_server_stats *out);

/* Stops the thread, closes connections and the socket, frees. NULL ok. */
void gh_ingest_server_free(struct gh_ingest_server *srv);

#endif
