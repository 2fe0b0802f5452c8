/* wire.h - the ingest protocol of POST /v1/signals, shared by the server
 * (src/ingest/server.c) and its clients (the agent's publisher, `gpuheal
 * inject`):
 *
 *   request: a body of JSON lines (spec/signals.md section 1), at most
 *            lim.max_lines physical lines, each at most lim.line_max bytes;
 *   reply:   {"accepted":N,"duplicates":N,"rejected":N,
 *             "errors":[{"line":L,"error":"..."}, ...],"errors_truncated":B}
 *            with status 200 when no line was rejected and 422 when some
 *            were (the accepted lines of the same body are taken all the
 *            same: a bad line never costs the good ones). Lines are numbered
 *            from 1 within the body, blank lines included; blank lines are
 *            neither accepted nor rejected.
 * Whole-request refusals carry {"error":"..."}: 401 (no or wrong bearer
 * token), 413 (body or line count over the limit), 503 (the receiver's
 * queue is full: retry after the Retry-After seconds), 400, 404, 405. */
#ifndef GH_WIRE_WIRE_H
#define GH_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

#define GH_INGEST_PATH "/v1/signals"
/* Errors itemised in one reply; more are counted only. */
#define GH_INGEST_ERRORS_MAX 64
#define GH_INGEST_ERROR_LEN 240

struct gh_ingest_limits {
    size_t line_max;  /* 0 = GH_SIGNAL_LINE_MAX; longer lines are rejected */
    size_t max_lines; /* 0 = 10000; more lines is GH_ELIMIT (413) */
    const char *default_node; /* borrowed; NULL, or the node a line without
                                 "node" reports for (a node sender's own) */
};

struct gh_ingest_line_error {
    long line;                       /* 1-based line of the body */
    char error[GH_INGEST_ERROR_LEN]; /* without a "line N: " prefix */
};

/* The summary of one body. A small value type; errors[0..n_errors) are
 * itemised, rejected counts them all. */
struct gh_ingest_result {
    uint64_t accepted, duplicates, rejected;
    size_t n_errors;
    bool errors_truncated;
    struct gh_ingest_line_error errors[GH_INGEST_ERRORS_MAX];
};

/* What the taker did with a decoded signal. */
enum gh_ingest_take {
    GH_INGEST_TAKEN = 0,     /* kept: the signal was stolen (now owned by the taker) */
    GH_INGEST_DUPLICATE = 1, /* already seen: the parser clears it */
    GH_INGEST_STOP = 2,      /* out of memory or room: stop, the parser clears it */
    GH_INGEST_REFUSED = 3,   /* refused: the taker added the line's error to the
                                result (gh_ingest_result_add_error); the parser clears it */
};

/* Called for each good line in order; sig is the taker's to steal (on
 * TAKEN), else the parser clears it. */
typedef enum gh_ingest_take (*gh_ingest_take_fn)(void *ctx, long line, struct gh_signal *sig);

/* Counts the physical lines of body[0..len) (a final line without '\n'
 * counts; nothing after the last '\n' does not). */
size_t gh_ingest_count_lines(const char *body, size_t len);

/* Parses body[0..len) (borrowed; may hold any bytes) line by line: blank
 * lines are skipped, a line longer than lim->line_max or one the signal
 * codec refuses is counted in res->rejected with its line number, and each
 * good signal is handed to take. A scenario header line is rejected. res is
 * reset first. Returns GH_OK (whatever the lines held), GH_ELIMIT when the
 * body has more than max_lines lines (nothing is parsed), GH_ENOMEM, or
 * GH_EAGAIN when take said STOP (res counts the lines before it). */
int gh_ingest_parse(const char *body, size_t len, const struct gh_ingest_limits *lim,
                    gh_ingest_take_fn take, void *ctx, struct gh_ingest_result *res,
                    struct gh_err *err);

/* Adds a line error to res (counted; itemised while there is room). */
void gh_ingest_result_add_error(struct gh_ingest_result *res, long line, const char *msg);

/* The reply body for res: one JSON object and '\n', malloc'd (caller
 * frees), NULL on OOM. */
char *gh_ingest_reply_encode(const struct gh_ingest_result *res);

/* Parses a reply body (borrowed) into *out. GH_EINVAL when it is not a
 * summary object (err says why). */
int gh_ingest_reply_decode(const char *text, size_t len, struct gh_ingest_result *out,
                           struct gh_err *err);

/* The ingest URL for a controller address: base (borrowed) as is when it
 * has a path other than "/", else base + GH_INGEST_PATH. GH_EINVAL when it
 * is not http:// or https://, GH_ELIMIT when out[cap] is too small. */
int gh_ingest_url(const char *base, char *out, size_t cap, struct gh_err *err);

#endif
