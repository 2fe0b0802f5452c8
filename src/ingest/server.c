/* server.c - the ingest HTTP endpoint (POST /v1/signals, /healthz, /readyz,
 * /metrics) on libmicrohttpd's thread pool, with sender authentication,
 * per-sender signal checks, connection and body bounds
 * and duplicate drop, handing accepted signals to the owner's sink.
 *
 * The request threads never wait on a dependency: a token review and a
 * batch's commit run on worker queues (ingest/workq.h) while the request's
 * connection is suspended (MHD_suspend_connection), and health, readiness
 * and metrics answer from memory (the locks they take are never held
 * across I/O), so a hung API server or store cannot freeze the port. */
#include "ingest/server.h"

#include <errno.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/listen.h"
#include "common/timeutil.h"
#include "ingest/dedup.h"
#include "ingest/workq.h"
#include "wire/token.h"

#define DEFAULT_BODY_MAX (8u * 1024 * 1024)
#define TLS_FILE_MAX     (1024 * 1024)
#define METRICS_MAX      (64 * 1024)
#define DISCARD_MAX      (64u * 1024 * 1024)
/* GnuTLS priorities: its defaults, but TLS 1.2 and 1.3 only (the Debian 12
 * defaults still let a client negotiate TLS 1.0 and 1.1). */
#define TLS_PRIORITIES   "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

struct gh_ingest_server {
    struct MHD_Daemon *mhd;
    int port;
    char *token_file;             /* NULL = anonymous */
    size_t body_max;
    struct gh_ingest_limits limits;
    gh_ingest_sink_fn sink;
    void *sink_ctx;
    gh_ingest_metrics_fn extra_metrics;
    void *metrics_ctx;
    pthread_mutex_t metrics_mu;   /* one extra_metrics call at a time */
    gh_ingest_auth_fn authenticate;               /* optional; on the review worker */
    gh_ingest_auth_cached_fn authenticate_cached; /* optional; on the request threads */
    void *auth_ctx;
    struct gh_workq *reviews; /* token reviews (authenticate) */
    struct gh_workq *writes;  /* parse, dedup and sink of a batch, one at a time */
    int64_t review_wait_ns, write_wait_ns;
    unsigned header_timeout_s, idle_timeout_s;
    int (*admit)(void *ctx, const struct gh_ingest_sender *who, const struct gh_signal *sig,
                 char *why, size_t cap); /* optional */
    void *admit_ctx;
    bool (*ready)(void *ctx); /* optional; NULL: always ready */
    void *ready_ctx;
    char *tls_cert, *tls_key;     /* PEM text, kept while the daemon runs */

    /* the tokens and the dedup set; never held across a network or store call */
    pthread_mutex_t mu;
    struct gh_token_set tokens;
    struct stat token_st;         /* the file as last loaded */
    int64_t token_checked_ns;     /* CLOCK_MONOTONIC of the last stat */
    struct gh_dedup *dedup;

    pthread_mutex_t st_mu; /* the stats only: held for a copy or an increment */
    struct gh_ingest_server_stats st;
};

/* Where a request is, between libmicrohttpd's calls of on_request. */
enum phase {
    PH_NEW,
    PH_REVIEW, /* suspended: its token is being reviewed */
    PH_BODY,   /* reading (or draining) the body */
    PH_WRITE,  /* suspended: its batch is being committed */
    PH_ANSWERED,
};

/* Per-request state (MHD's con_cls). */
struct request {
    enum phase phase;
    bool ingest;          /* POST /v1/signals, authorised, within limits so far */
    struct gh_ingest_sender sender; /* who sent it (ingest) */
    int refuse;           /* != 0: answer this status once the body is drained */
    char *buf;
    size_t len, cap;
    size_t discarded;     /* body bytes read and dropped */
    /* a review's or a write's answer, set before the connection resumes */
    unsigned status; /* 0: the review accepted the sender */
    enum gh_ingest_refusal reason;
    char *answer; /* the reply body (200, 422), or NULL: why */
    char why[GH_ERR_MAX + 128];
};

static const char *const refusal_names[GH_REFUSED__COUNT] = {
    [GH_REFUSED_UNAUTHORIZED] = "unauthorized",
    [GH_REFUSED_TOKEN] = "token_refused",
    [GH_REFUSED_REVIEW_RATE] = "review_rate",
    [GH_REFUSED_REVIEW_UNAVAILABLE] = "review_unavailable",
    [GH_REFUSED_REVIEW_BUSY] = "review_busy",
    [GH_REFUSED_NOT_READY] = "not_ready",
    [GH_REFUSED_STORE_BUSY] = "store_busy",
    [GH_REFUSED_STORE_FAILED] = "store_failed",
    [GH_REFUSED_NOT_ADMITTED_YET] = "not_admitted_yet",
    [GH_REFUSED_TOO_LARGE] = "too_large",
    [GH_REFUSED_BAD_REQUEST] = "bad_request",
};

const char *gh_ingest_refusal_name(enum gh_ingest_refusal r)
{
    return (unsigned)r < GH_REFUSED__COUNT ? refusal_names[r] : "unknown";
}

int gh_ingest_queue_sink(void *queue, struct gh_signal *sigs, size_t n)
{
    return gh_sigqueue_push(queue, sigs, n);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
                             char *body, bool retry_after)
{
    struct MHD_Response *r;
    if (body)
        r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    else
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status >= 400 && status != 422 && !retry_after)
        /* a refused request does not keep its connection (a client
         * without a token holds no slot past its answer) */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (retry_after) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        /* the retry comes on a new connection, which a Service may send
         * to another replica (the leader, when this one is a standby) */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *body = malloc(strlen(msg) * 6 + 16);
    if (!body)
        return MHD_NO;
    /* msg is ours (no quotes or controls), but escape defensively. */
    char *p = body;
    p += snprintf(p, 16, "{\"error\":\"");
    for (const char *m = msg; *m; m++) {
        unsigned char ch = (unsigned char)*m;
        if (ch == '"' || ch == '\\') {
            *p++ = '\\';
            *p++ = (char)ch;
        } else if (ch < 0x20) {
            p += snprintf(p, 7, "\\u%04x", ch);
        } else {
            *p++ = (char)ch;
        }
    }
    memcpy(p, "\"}\n", 4);
    return reply(c, status, "application/json", body, status == MHD_HTTP_SERVICE_UNAVAILABLE);
}

static void count(struct gh_ingest_server *srv, uint64_t *counter)
{
    pthread_mutex_lock(&srv->st_mu);
    (*counter)++;
    pthread_mutex_unlock(&srv->st_mu);
}

/* Re-reads the token file when it changed (at most once a second). Called
 * with mu held. */
static void maybe_reload_tokens(struct gh_ingest_server *srv)
{
    int64_t now = mono_ns();
    if (now - srv->token_checked_ns < GH_NS_PER_S)
        return;
    srv->token_checked_ns = now;
    struct stat st;
    if (stat(srv->token_file, &st) != 0)
        return; /* keep the tokens we have */
    if (st.st_ino == srv->token_st.st_ino && st.st_size == srv->token_st.st_size &&
        st.st_mtim.tv_sec == srv->token_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == srv->token_st.st_mtim.tv_nsec)
        return;
    if (gh_token_set_load(srv->token_file, &srv->tokens, NULL) == GH_OK) {
        srv->token_st = st;
        count(srv, &srv->st.token_reloads);
    } else {
        count(srv, &srv->st.token_reload_errors);
    }
}

/* The token of an "Authorization: Bearer TOKEN" header (scheme
 * case-insensitive), or NULL. */
static const char *bearer(const char *h, size_t *len)
{
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return NULL;
    const char *t = h + 6;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t n = strlen(t);
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    if (n == 0 || n > GH_TOKEN_MAX)
        return NULL;
    *len = n;
    return t;
}

/* Answers a refused request: counted by status and by reason. */
static enum MHD_Result refuse(struct gh_ingest_server *srv, struct MHD_Connection *c,
                              unsigned status, enum gh_ingest_refusal reason, const char *why)
{
    pthread_mutex_lock(&srv->st_mu);
    srv->st.refused[reason]++;
    if (status == MHD_HTTP_UNAUTHORIZED)
        srv->st.unauthorized++;
    else if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        srv->st.unavailable++;
    else if (status == MHD_HTTP_CONTENT_TOO_LARGE)
        srv->st.too_large++;
    else
        srv->st.bad_requests++;
    if (reason == GH_REFUSED_REVIEW_RATE || reason == GH_REFUSED_REVIEW_UNAVAILABLE ||
        reason == GH_REFUSED_REVIEW_BUSY)
        srv->st.auth_unavailable++;
    pthread_mutex_unlock(&srv->st_mu);
    return reply_error(c, status, why);
}

/* ---- token reviews, on the review worker */

struct review_job {
    struct gh_workq_job j; /* first */
    struct gh_ingest_server *srv;
    struct MHD_Connection *c; /* suspended until the answer */
    struct request *rq;       /* valid until the answer resumes c */
    size_t len;
    char token[GH_TOKEN_MAX + 1];
    int rc;
    struct gh_ingest_sender sender;
    struct gh_err err;
};

static void review_run(struct gh_workq_job *wj)
{
    struct review_job *j = (struct review_job *)wj;
    j->rc = j->srv->authenticate(j->srv->auth_ctx, j->token, j->len, &j->sender, &j->err);
}

/* The review's verdict into rq: status 0 (the sender is known) or the
 * status and reason to refuse with. */
static void review_verdict(struct request *rq, int rc, const struct gh_ingest_sender *who,
                           const char *msg)
{
    if (rc == GH_OK && who->kind == GH_SENDER_NODE && who->node[0]) {
        rq->sender = *who;
        rq->status = 0;
        return;
    }
    rq->status = rc == GH_EAGAIN || rc == GH_ELIMIT ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                    : MHD_HTTP_UNAUTHORIZED;
    rq->reason = rc == GH_EAGAIN   ? GH_REFUSED_REVIEW_UNAVAILABLE
                 : rc == GH_ELIMIT ? GH_REFUSED_REVIEW_RATE
                                   : GH_REFUSED_TOKEN;
    if (rq->status == MHD_HTTP_SERVICE_UNAVAILABLE)
        snprintf(rq->why, sizeof rq->why, "the bearer token cannot be checked now: %s", msg);
    else
        snprintf(rq->why, sizeof rq->why, "bearer token refused: %s", rc ? msg : "no node");
}

/* A worker's job that gives no answer (end: late, or the queue stopped):
 * 503 for reason; a late one is counted in *late and told "<what> within
 * <wait_ns> s <then>". */
static void not_done(struct gh_ingest_server *srv, struct request *rq, enum gh_workq_end end,
                     enum gh_ingest_refusal reason, uint64_t *late, int64_t wait_ns,
                     const char *what, const char *then)
{
    rq->status = MHD_HTTP_SERVICE_UNAVAILABLE;
    rq->reason = reason;
    if (end == GH_WORKQ_LATE) {
        count(srv, late);
        snprintf(rq->why, sizeof rq->why, "%s within %.1f s %s", what, (double)wait_ns / 1e9, then);
    } else {
        snprintf(rq->why, sizeof rq->why, "shutting down; retry");
    }
}

/* Hands the answer back to libmicrohttpd: the job forgets the connection
 * and request first (the request may be gone once resumed). */
static void resume(struct MHD_Connection **c, struct request **rq)
{
    struct MHD_Connection *conn = *c;
    *c = NULL;
    *rq = NULL;
    MHD_resume_connection(conn);
}

static void review_answer(struct gh_workq_job *wj, enum gh_workq_end end)
{
    struct review_job *j = (struct review_job *)wj;
    struct request *rq = j->rq;
    if (end == GH_WORKQ_DONE)
        review_verdict(rq, j->rc, &j->sender, j->err.msg);
    else
        not_done(j->srv, rq, end, GH_REFUSED_REVIEW_BUSY, &j->srv->st.reviews_late,
                 j->srv->review_wait_ns, "the bearer token's review did not end",
                 "(the API server is slow or not answering); retry");
    resume(&j->c, &j->rq);
}

static void review_release(struct gh_workq_job *wj)
{
    OPENSSL_cleanse(wj, sizeof(struct review_job));
    free(wj);
}

/* The token in rq's Authorization header: an operator's, a sender known
 * to authenticate_cached, or one to review. Returns MHD_YES with
 * rq->phase PH_REVIEW when the connection was suspended for a review, or
 * what admit or refuse returned. */
static enum MHD_Result admit(struct gh_ingest_server *srv, struct MHD_Connection *c,
                             struct request *rq);

static enum MHD_Result start_auth(struct gh_ingest_server *srv, struct MHD_Connection *c,
                                  struct request *rq)
{
    memset(&rq->sender, 0, sizeof rq->sender);
    if (!srv->token_file && !srv->authenticate) {
        rq->sender.kind = GH_SENDER_ANONYMOUS;
        return admit(srv, c, rq);
    }
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (srv->token_file) {
        pthread_mutex_lock(&srv->mu);
        maybe_reload_tokens(srv);
        bool ok = gh_token_set_check_header(&srv->tokens, h);
        pthread_mutex_unlock(&srv->mu);
        if (ok) {
            rq->sender.kind = GH_SENDER_OPERATOR;
            return admit(srv, c, rq);
        }
    }
    size_t n = 0;
    const char *tok = bearer(h, &n);
    /* Answered before the body is read: an unauthorised client does not
     * get to make us read megabytes. */
    if (!tok || !srv->authenticate)
        return refuse(srv, c, MHD_HTTP_UNAUTHORIZED, GH_REFUSED_UNAUTHORIZED,
                      "missing or wrong bearer token");
    bool urgent = false;
    if (srv->authenticate_cached) {
        struct gh_err err = {{0}};
        struct gh_ingest_sender who = {0};
        int rc = srv->authenticate_cached(srv->auth_ctx, tok, n, &who, &urgent, &err);
        if (rc != GH_ENOTFOUND) {
            review_verdict(rq, rc, &who, err.msg);
            return rq->status ? refuse(srv, c, rq->status, rq->reason, rq->why) : admit(srv, c, rq);
        }
    }
    struct review_job *j = calloc(1, sizeof *j);
    if (!j)
        return MHD_NO;
    j->j.run = review_run;
    j->j.answer = review_answer;
    j->j.release = review_release;
    j->srv = srv;
    j->c = c;
    j->rq = rq;
    j->len = n;
    memcpy(j->token, tok, n);
    rq->phase = PH_REVIEW;
    /* suspended before the push: the answer may come at once, from
     * another thread, and resumes it */
    MHD_suspend_connection(c);
    char why[160];
    if (gh_workq_push(srv->reviews, &j->j, urgent, why, sizeof why) != GH_OK) {
        review_release(&j->j);
        rq->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        rq->reason = GH_REFUSED_REVIEW_BUSY;
        snprintf(rq->why, sizeof rq->why, "the bearer token cannot be reviewed now (%s); retry",
                 why);
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

/* ---- the batch being taken from one body, on the write worker */

struct batch {
    struct gh_ingest_server *srv;
    const struct gh_ingest_sender *sender;
    struct gh_ingest_result *res;
    struct gh_signal *sigs;
    size_t n, cap;
    struct gh_dedup_key *keys;    /* ids inserted for this batch (undone on refusal) */
    size_t nkeys, keycap;
    uint64_t forged;
    char retry[GH_INGEST_ERROR_LEN]; /* != "": admit said "not now" (503) */
};

static bool grow(void **p, size_t *cap, size_t elem)
{
    size_t ncap = *cap ? *cap * 2 : 64;
    void *np = realloc(*p, ncap * elem);
    if (!np)
        return false;
    *p = np;
    *cap = ncap;
    return true;
}

/* Refuses a line for its sender (counted as rejected and as forged). */
static enum gh_ingest_take forged(struct batch *b, long line, const char *msg)
{
    gh_ingest_result_add_error(b->res, line, msg);
    b->forged++;
    return GH_INGEST_REFUSED;
}

static enum gh_ingest_take take(void *ctx, long line, struct gh_signal *sig)
{
    struct batch *b = ctx;
    const struct gh_ingest_sender *who = b->sender;
    if (sig->source == GH_SRC_KUBE)
        return forged(b, line, "source \"kube\" is not taken from the network: those signals "
                               "come only from the controller's own informers");
    if (who->kind == GH_SENDER_NODE) {
        if (!sig->node) {
            if (gh_signal_set_str(&sig->node, who->node, strlen(who->node)))
                return GH_INGEST_STOP;
        } else if (strcmp(sig->node, who->node) != 0) {
            char msg[GH_INGEST_ERROR_LEN];
            snprintf(msg, sizeof msg,
                     "field \"node\": \"%.60s\" is another node; this sender may report "
                     "only for node \"%.60s\"",
                     sig->node, who->node);
            return forged(b, line, msg);
        }
    }
    if (who->kind == GH_SENDER_NODE && b->srv->admit) {
        char why[GH_INGEST_ERROR_LEN];
        why[0] = '\0';
        int rc = b->srv->admit(b->srv->admit_ctx, who, sig, why, sizeof why);
        if (rc == GH_EAGAIN) {
            snprintf(b->retry, sizeof b->retry, "line %ld: %.200s", line, why[0] ? why : "retry");
            return GH_INGEST_STOP;
        }
        if (rc)
            return forged(b, line, why[0] ? why : "refused for its sender");
    }
    if (who->kind == GH_SENDER_OPERATOR)
        sig->injected = true; /* the operator's credential is for injection */
    if (b->n == b->cap && !grow((void **)&b->sigs, &b->cap, sizeof *b->sigs))
        return GH_INGEST_STOP;
    if (sig->id) {
        struct gh_dedup_key k;
        gh_dedup_signal_key(sig, &k);
        if (b->nkeys == b->keycap && !grow((void **)&b->keys, &b->keycap, sizeof *b->keys))
            return GH_INGEST_STOP;
        /* one batch at a time comes here (the write worker): no other
         * batch inserts between the check and the insert */
        pthread_mutex_lock(&b->srv->mu);
        bool dup = gh_dedup_contains(b->srv->dedup, &k);
        if (!dup)
            gh_dedup_insert(b->srv->dedup, &k);
        pthread_mutex_unlock(&b->srv->mu);
        if (dup)
            return GH_INGEST_DUPLICATE;
        b->keys[b->nkeys++] = k;
    }
    b->sigs[b->n++] = *sig;
    return GH_INGEST_TAKEN;
}

static void batch_free(struct batch *b, bool undo_keys)
{
    for (size_t i = 0; i < b->n; i++)
        gh_signal_clear(&b->sigs[i]);
    if (undo_keys && b->nkeys) {
        pthread_mutex_lock(&b->srv->mu);
        for (size_t i = 0; i < b->nkeys; i++)
            gh_dedup_remove(b->srv->dedup, &b->keys[i]);
        pthread_mutex_unlock(&b->srv->mu);
    }
    free(b->sigs);
    free(b->keys);
}

struct write_job {
    struct gh_workq_job j; /* first */
    struct gh_ingest_server *srv;
    struct MHD_Connection *c; /* suspended until the answer */
    struct request *rq;       /* valid until the answer resumes c */
    struct gh_ingest_sender sender;
    char *buf; /* the body */
    size_t len;
    /* the outcome */
    unsigned status; /* 200, 422, 413, 503, 500 */
    enum gh_ingest_refusal reason;
    char *answer; /* the summary (200, 422) */
    char why[GH_ERR_MAX + 64];
};

static void write_run(struct gh_workq_job *wj)
{
    struct write_job *j = (struct write_job *)wj;
    struct gh_ingest_server *srv = j->srv;
    struct gh_ingest_result *res = malloc(sizeof *res);
    struct batch b = {.srv = srv, .sender = &j->sender, .res = res};
    struct gh_err err = {{0}};
    j->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    snprintf(j->why, sizeof j->why, "out of memory");
    if (!res)
        return;
    struct gh_ingest_limits lim = srv->limits;
    if (j->sender.kind == GH_SENDER_NODE)
        lim.default_node = j->sender.node; /* a line without "node" is the sender's */
    int rc = gh_ingest_parse(j->buf ? j->buf : "", j->len, &lim, take, &b, res, &err);
    bool undo = true;
    if (rc == GH_OK && b.n > 0) {
        rc = srv->sink(srv->sink_ctx, b.sigs, b.n);
        if (rc == GH_OK)
            b.n = 0; /* the sink stole them; nothing left to clear */
        else
            rc = GH_EAGAIN;
    }
    pthread_mutex_lock(&srv->st_mu);
    srv->st.bytes += j->len;
    srv->st.forged += b.forged;
    if (rc == GH_OK) {
        undo = false;
        srv->st.accepted += res->accepted;
        srv->st.duplicates += res->duplicates;
        srv->st.rejected += res->rejected;
        if (res->rejected)
            srv->st.partial++;
    }
    pthread_mutex_unlock(&srv->st_mu);
    batch_free(&b, undo);
    if (rc == GH_OK) {
        j->answer = gh_ingest_reply_encode(res);
        if (j->answer)
            j->status = res->rejected ? 422 : MHD_HTTP_OK;
    } else if (rc == GH_ELIMIT) {
        j->status = MHD_HTTP_CONTENT_TOO_LARGE;
        j->reason = GH_REFUSED_TOO_LARGE;
        snprintf(j->why, sizeof j->why, "%s", err.msg);
    } else if (rc == GH_EAGAIN && b.retry[0]) {
        /* a line the owner cannot judge yet (its job's pods not listed):
         * the whole batch again later, nothing of it taken */
        j->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        j->reason = GH_REFUSED_NOT_ADMITTED_YET;
        snprintf(j->why, sizeof j->why, "%s", b.retry);
    } else if (rc == GH_EAGAIN) {
        j->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        j->reason = GH_REFUSED_STORE_FAILED;
        snprintf(j->why, sizeof j->why,
                 "receiver cannot take the batch now (queue full or "
                 "journal write failed); retry later");
    }
    free(res);
}

static void write_answer(struct gh_workq_job *wj, enum gh_workq_end end)
{
    struct write_job *j = (struct write_job *)wj;
    struct request *rq = j->rq;
    if (end == GH_WORKQ_DONE) {
        rq->status = j->status;
        rq->reason = j->reason;
        rq->answer = j->answer;
        j->answer = NULL;
        snprintf(rq->why, sizeof rq->why, "%s", j->why);
    } else {
        not_done(j->srv, rq, end, GH_REFUSED_STORE_BUSY, &j->srv->st.writes_late,
                 j->srv->write_wait_ns, "the batch was not committed",
                 "(the store is slow or not answering); retry: what was committed meanwhile is "
                 "answered as duplicates");
    }
    resume(&j->c, &j->rq);
}

static void write_release(struct gh_workq_job *wj)
{
    struct write_job *j = (struct write_job *)wj;
    free(j->buf);
    free(j->answer);
    free(j);
}

/* The whole body is in: its batch goes to the write worker while the
 * connection waits suspended. */
static enum MHD_Result start_write(struct gh_ingest_server *srv, struct MHD_Connection *c,
                                   struct request *rq)
{
    struct write_job *j = calloc(1, sizeof *j);
    if (!j)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    j->j.run = write_run;
    j->j.answer = write_answer;
    j->j.release = write_release;
    j->srv = srv;
    j->c = c;
    j->rq = rq;
    j->sender = rq->sender;
    j->buf = rq->buf;
    j->len = rq->len;
    rq->buf = NULL;
    rq->len = rq->cap = 0;
    rq->phase = PH_WRITE;
    MHD_suspend_connection(c);
    char why[160];
    if (gh_workq_push(srv->writes, &j->j, false, why, sizeof why) != GH_OK) {
        write_release(&j->j);
        rq->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        rq->reason = GH_REFUSED_STORE_BUSY;
        snprintf(rq->why, sizeof rq->why, "the store cannot take the batch now (%s); retry", why);
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

static enum MHD_Result handle_metrics(struct gh_ingest_server *srv, struct MHD_Connection *c)
{
    char *buf = malloc(METRICS_MAX);
    if (!buf)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    struct gh_ingest_server_stats s;
    gh_ingest_server_stats(srv, &s);
    int n = snprintf(buf, METRICS_MAX,
        "# HELP gpuheal_ingest_requests_total Ingest requests, by outcome.\n"
        "# TYPE gpuheal_ingest_requests_total counter\n"
        "gpuheal_ingest_requests_total{outcome=\"all\"} %llu\n"
        "gpuheal_ingest_requests_total{outcome=\"unauthorized\"} %llu\n"
        "gpuheal_ingest_requests_total{outcome=\"too_large\"} %llu\n"
        "gpuheal_ingest_requests_total{outcome=\"partial\"} %llu\n"
        "gpuheal_ingest_requests_total{outcome=\"unavailable\"} %llu\n"
        "gpuheal_ingest_requests_total{outcome=\"bad_request\"} %llu\n"
        "# HELP gpuheal_ingest_signals_total Signal lines received, by result.\n"
        "# TYPE gpuheal_ingest_signals_total counter\n"
        "gpuheal_ingest_signals_total{result=\"accepted\"} %llu\n"
        "gpuheal_ingest_signals_total{result=\"duplicate\"} %llu\n"
        "gpuheal_ingest_signals_total{result=\"rejected\"} %llu\n"
        "# HELP gpuheal_ingest_signals_forged_total Signal lines refused for their sender "
        "(another node's, or source kube); counted in rejected too.\n"
        "# TYPE gpuheal_ingest_signals_forged_total counter\n"
        "gpuheal_ingest_signals_forged_total %llu\n"
        "# HELP gpuheal_ingest_bytes_total Request body bytes received.\n"
        "# TYPE gpuheal_ingest_bytes_total counter\n"
        "gpuheal_ingest_bytes_total %llu\n"
        "# HELP gpuheal_ingest_dedup_ids Signal ids remembered for duplicate drop.\n"
        "# TYPE gpuheal_ingest_dedup_ids gauge\n"
        "gpuheal_ingest_dedup_ids %zu\n"
        "# HELP gpuheal_ingest_dedup_evicted_total Ids forgotten to make room.\n"
        "# TYPE gpuheal_ingest_dedup_evicted_total counter\n"
        "gpuheal_ingest_dedup_evicted_total %llu\n"
        "# HELP gpuheal_ingest_connections Ingest connections open now.\n"
        "# TYPE gpuheal_ingest_connections gauge\n"
        "gpuheal_ingest_connections %u\n",
        (unsigned long long)s.requests, (unsigned long long)s.unauthorized,
        (unsigned long long)s.too_large, (unsigned long long)s.partial,
        (unsigned long long)s.unavailable, (unsigned long long)s.bad_requests,
        (unsigned long long)s.accepted, (unsigned long long)s.duplicates,
        (unsigned long long)s.rejected, (unsigned long long)s.forged,
        (unsigned long long)s.bytes, s.dedup_size,
        (unsigned long long)s.dedup_evicted, s.connections);
    if (n < 0 || n >= METRICS_MAX)
        n = 0;
    n += snprintf(buf + n, METRICS_MAX - (size_t)n,
                  "# HELP gpuheal_ingest_refused_total Requests refused (4xx, 503), by reason: "
                  "a token flood shows as unauthorized, token_refused or review_*, a slow store "
                  "as store_busy.\n"
                  "# TYPE gpuheal_ingest_refused_total counter\n");
    for (int r = 0; r < GH_REFUSED__COUNT && n < METRICS_MAX; r++)
        n += snprintf(buf + n, METRICS_MAX - (size_t)n,
                      "gpuheal_ingest_refused_total{reason=\"%s\"} %llu\n", refusal_names[r],
                      (unsigned long long)s.refused[r]);
    if (n < METRICS_MAX)
        n += snprintf(buf + n, METRICS_MAX - (size_t)n,
                      "# HELP gpuheal_ingest_late_total Requests answered 503 while their token "
                      "review or batch commit still ran, by stage.\n"
                      "# TYPE gpuheal_ingest_late_total counter\n"
                      "gpuheal_ingest_late_total{stage=\"review\"} %llu\n"
                      "gpuheal_ingest_late_total{stage=\"write\"} %llu\n",
                      (unsigned long long)s.reviews_late, (unsigned long long)s.writes_late);
    if (n >= METRICS_MAX)
        n = METRICS_MAX - 1;
    if (srv->extra_metrics && (size_t)n < METRICS_MAX - 1) {
        pthread_mutex_lock(&srv->metrics_mu);
        n += (int)srv->extra_metrics(srv->metrics_ctx, buf + n, METRICS_MAX - (size_t)n);
        pthread_mutex_unlock(&srv->metrics_mu);
    }
    buf[n < METRICS_MAX ? n : METRICS_MAX - 1] = '\0';
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, false);
}

/* The sender is known: the checks that need no body (readiness, declared
 * length), then the body is read. */
static enum MHD_Result admit(struct gh_ingest_server *srv, struct MHD_Connection *c,
                             struct request *rq)
{
    if (srv->ready && !srv->ready(srv->ready_ctx))
        /* A standby would only hold the incidents until a failover:
         * the sender keeps the batch and retries (on the leader). */
        return refuse(srv, c, MHD_HTTP_SERVICE_UNAVAILABLE, GH_REFUSED_NOT_READY,
                      "not ready (not the leader, or its store cannot record); retry "
                      "(a new connection may reach the leader)");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || *end || v > srv->body_max) {
            char msg[96];
            snprintf(msg, sizeof msg, "request body over %zu bytes", srv->body_max);
            return refuse(srv, c, MHD_HTTP_CONTENT_TOO_LARGE, GH_REFUSED_TOO_LARGE, msg);
        }
        if (v > 0) {
            rq->buf = malloc((size_t)v);
            if (!rq->buf)
                return MHD_NO;
            rq->cap = (size_t)v;
        }
    }
    rq->phase = PH_BODY;
    rq->ingest = true;
    return MHD_YES;
}

static enum MHD_Result reply_ok(struct MHD_Connection *c)
{
    char *ok = malloc(4);
    if (!ok)
        return MHD_NO;
    memcpy(ok, "ok\n", 4);
    return reply(c, MHD_HTTP_OK, "text/plain", ok, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    struct gh_ingest_server *srv = cls;
    struct request *rq = *con_cls;

    if (!rq) {
        /* First call: headers only. Decide now whether the body is wanted. */
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        *con_cls = rq;
        /* the headers are in: from now on the idle timeout applies */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, srv->idle_timeout_s);
        count(srv, &srv->st.requests);
        bool is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                      strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        rq->phase = PH_BODY;
        if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0 ||
            strcmp(url, "/metrics") == 0) {
            if (!is_get)
                rq->refuse = MHD_HTTP_METHOD_NOT_ALLOWED;
            return MHD_YES;
        }
        if (strcmp(url, GH_INGEST_PATH) != 0) {
            rq->refuse = MHD_HTTP_NOT_FOUND;
            return MHD_YES;
        }
        if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
            rq->refuse = MHD_HTTP_METHOD_NOT_ALLOWED;
            return MHD_YES;
        }
        rq->phase = PH_NEW;
        return start_auth(srv, c, rq);
    }

    if (rq->phase == PH_REVIEW) {
        /* resumed: the token's review answered (or its deadline passed) */
        rq->phase = PH_ANSWERED; /* admit makes it PH_BODY when the body is wanted */
        if (rq->status)
            return refuse(srv, c, rq->status, rq->reason, rq->why);
        return admit(srv, c, rq);
    }
    if (rq->phase == PH_WRITE) {
        /* resumed: the batch's write answered (or its deadline passed) */
        rq->phase = PH_ANSWERED;
        if (rq->answer) {
            char *body = rq->answer;
            rq->answer = NULL;
            return reply(c, rq->status, "application/json", body, false);
        }
        if (rq->status == MHD_HTTP_INTERNAL_SERVER_ERROR)
            return reply_error(c, rq->status, rq->why);
        return refuse(srv, c, rq->status, rq->reason, rq->why);
    }
    if (rq->phase == PH_ANSWERED)
        return MHD_YES; /* a reply was queued */

    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (!rq->ingest) {
            /* Drained and ignored, up to a bound: a client that keeps
             * sending is cut off (replying mid-upload would make the
             * kernel reset the connection and lose the reply). */
            rq->discarded += n;
            return rq->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
        }
        if (rq->len + n > srv->body_max) {
            /* A chunked body that outgrew the limit: 413 once it ends. */
            rq->ingest = false;
            rq->refuse = MHD_HTTP_CONTENT_TOO_LARGE;
            free(rq->buf);
            rq->buf = NULL;
            rq->len = rq->cap = 0;
            rq->discarded = n;
            return MHD_YES;
        }
        if (rq->len + n > rq->cap) {
            size_t ncap = rq->cap ? rq->cap : 64 * 1024;
            while (ncap < rq->len + n)
                ncap *= 2;
            if (ncap > srv->body_max)
                ncap = srv->body_max;
            char *nb = realloc(rq->buf, ncap);
            if (!nb)
                return MHD_NO;
            rq->buf = nb;
            rq->cap = ncap;
        }
        memcpy(rq->buf + rq->len, upload_data, n);
        rq->len += n;
        return MHD_YES;
    }

    /* Final call: the whole body is in. */
    if (rq->refuse == MHD_HTTP_CONTENT_TOO_LARGE) {
        char msg[96];
        rq->phase = PH_ANSWERED;
        snprintf(msg, sizeof msg, "request body over %zu bytes", srv->body_max);
        return refuse(srv, c, MHD_HTTP_CONTENT_TOO_LARGE, GH_REFUSED_TOO_LARGE, msg);
    }
    if (rq->refuse) {
        rq->phase = PH_ANSWERED;
        return refuse(srv, c, (unsigned)rq->refuse, GH_REFUSED_BAD_REQUEST,
                      rq->refuse == MHD_HTTP_NOT_FOUND ? "no such path" : "method not allowed");
    }
    /* health, readiness and metrics answer from memory: nothing here waits
     * on the API server or the store */
    if (strcmp(url, "/healthz") == 0)
        return reply_ok(c);
    if (strcmp(url, "/readyz") == 0) {
        if (srv->ready && !srv->ready(srv->ready_ctx))
            return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                               "not ready (not the leader, or its store cannot record)");
        return reply_ok(c);
    }
    if (strcmp(url, "/metrics") == 0)
        return handle_metrics(srv, c);
    if (!rq->ingest)
        return MHD_YES; /* a reply was queued earlier */
    rq->ingest = false;
    return start_write(srv, c, rq);
}

/* A new connection gets the header deadline until its first headers are
 * in (on_request); so does a kept-alive one between requests. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)socket_context;
    struct gh_ingest_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, srv->header_timeout_s);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct gh_ingest_server *srv = cls;
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, srv->header_timeout_s);
    struct request *rq = *con_cls;
    if (rq) {
        free(rq->buf);
        free(rq->answer);
        free(rq);
        *con_cls = NULL;
    }
}

static int read_small_file(const char *path, char **out, struct gh_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gh_err_set(err, GH_EINVAL, "%s: %s", path, strerror(errno));
    char *buf = malloc(TLS_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return gh_err_set(err, GH_ENOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, TLS_FILE_MAX + 1, f);
    fclose(f);
    if (n == 0 || n > TLS_FILE_MAX) {
        free(buf);
        return gh_err_set(err, GH_EINVAL, "%s: empty or larger than %d bytes", path,
                          TLS_FILE_MAX);
    }
    buf[n] = '\0';
    *out = buf;
    return GH_OK;
}

int gh_ingest_server_new(const struct gh_ingest_server_opts *opts,
                         struct gh_ingest_server **out, struct gh_err *err)
{
    int rc = GH_OK, fd = -1;
    *out = NULL;
    if (!opts->listen || !opts->sink)
        return gh_err_set(err, GH_EINVAL, "ingest server: listen and sink are required");
    if (!opts->token_file && !opts->authenticate && !opts->allow_anonymous)
        return gh_err_set(err, GH_EINVAL, "ingest server: a token file is required");
    if (!opts->tls_cert != !opts->tls_key)
        return gh_err_set(err, GH_EINVAL, "ingest server: TLS needs both a certificate and a key");
    if (opts->tls_cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return gh_err_set(err, GH_EUNSUPPORTED, "ingest server: libmicrohttpd without TLS");

    struct gh_ingest_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return gh_err_set(err, GH_ENOMEM, "ingest server: out of memory");
    pthread_mutex_init(&srv->mu, NULL);
    pthread_mutex_init(&srv->st_mu, NULL);
    pthread_mutex_init(&srv->metrics_mu, NULL);
    srv->authenticate = opts->authenticate;
    srv->authenticate_cached = opts->authenticate_cached;
    srv->auth_ctx = opts->auth_ctx;
    srv->review_wait_ns = (int64_t)(opts->review_wait_ms ? opts->review_wait_ms : 2000) *
                          GH_NS_PER_MS;
    srv->write_wait_ns = (int64_t)(opts->write_wait_ms ? opts->write_wait_ms : 2000) * GH_NS_PER_MS;
    srv->header_timeout_s = opts->header_timeout_s ? opts->header_timeout_s : 5u;
    srv->idle_timeout_s = opts->idle_timeout_s ? opts->idle_timeout_s : 30u;
    if (srv->header_timeout_s > srv->idle_timeout_s)
        srv->header_timeout_s = srv->idle_timeout_s; /* never longer than idle */
    srv->body_max = opts->body_max ? opts->body_max : DEFAULT_BODY_MAX;
    srv->limits = opts->limits;
    srv->sink = opts->sink;
    srv->sink_ctx = opts->sink_ctx;
    srv->extra_metrics = opts->extra_metrics;
    srv->metrics_ctx = opts->metrics_ctx;
    srv->ready = opts->ready;
    srv->ready_ctx = opts->ready_ctx;
    srv->admit = opts->admit;
    srv->admit_ctx = opts->admit_ctx;
    srv->dedup = gh_dedup_new(opts->dedup_capacity ? opts->dedup_capacity : (1u << 20));
    if (!srv->dedup) {
        rc = gh_err_set(err, GH_ENOMEM, "ingest server: dedup set: out of memory");
        goto fail;
    }
    if (opts->token_file) {
        srv->token_file = strdup(opts->token_file);
        if (!srv->token_file) {
            rc = gh_err_set(err, GH_ENOMEM, "ingest server: out of memory");
            goto fail;
        }
        if (stat(srv->token_file, &srv->token_st) != 0) {
            rc = gh_err_set(err, GH_EINVAL, "token file %s: %s", srv->token_file, strerror(errno));
            goto fail;
        }
        if ((rc = gh_token_set_load(srv->token_file, &srv->tokens, err)))
            goto fail;
        srv->token_checked_ns = mono_ns();
    }
    if (opts->tls_cert && ((rc = read_small_file(opts->tls_cert, &srv->tls_cert, err)) ||
                           (rc = read_small_file(opts->tls_key, &srv->tls_key, err))))
        goto fail;
    /* Reviews: one worker (the reviewer sends one at a time anyway); a
     * worker on one review for over 1 s is stalled, and further tokens
     * are refused at once rather than queued behind it. Writes: one
     * worker, so the sink sees one batch at a time, as before. */
    struct gh_workq_opts rqo = {.name = "token review",
                                .threads = 1,
                                .cap = 64,
                                .wait_ns = srv->review_wait_ns,
                                .stall_ns = GH_NS_PER_S};
    struct gh_workq_opts wqo = {.name = "batch commit",
                                .threads = 1,
                                .cap = 64,
                                .wait_ns = srv->write_wait_ns,
                                .stall_ns = GH_NS_PER_S};
    if ((rc = gh_workq_new(&rqo, &srv->reviews, err)) ||
        (rc = gh_workq_new(&wqo, &srv->writes, err)))
        goto fail;
    if (opts->preload)
        opts->preload(opts->preload_ctx, srv);
    if ((rc = gh_listen_tcp(opts->listen, &fd, &srv->port, err)))
        goto fail;

    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (srv->tls_cert)
        flags |= MHD_USE_TLS;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    srv->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, opts->max_connections ? opts->max_connections : 1024u,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, opts->max_per_client ? opts->max_per_client : 32u,
        MHD_OPTION_CONNECTION_TIMEOUT, srv->header_timeout_s,
        MHD_OPTION_THREAD_POOL_SIZE, opts->threads ? opts->threads : 4u,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        srv->tls_cert ? MHD_OPTION_ARRAY : MHD_OPTION_END, tls, MHD_OPTION_END);
    if (!srv->mhd) {
        rc = gh_err_set(err, srv->tls_cert ? GH_EINVAL : GH_EIO,
                        "ingest server: libmicrohttpd did not start on %s%s", opts->listen,
                        srv->tls_cert ? " (check the TLS certificate and key)" : "");
        goto fail;
    }
    *out = srv;
    return GH_OK;
fail:
    if (fd >= 0)
        close(fd);
    gh_ingest_server_free(srv);
    return rc;
}

int gh_ingest_server_port(const struct gh_ingest_server *srv)
{
    return srv->port;
}

void gh_ingest_server_remember(struct gh_ingest_server *srv, const struct gh_signal *sig)
{
    if (!sig->id)
        return;
    struct gh_dedup_key k;
    gh_dedup_signal_key(sig, &k);
    pthread_mutex_lock(&srv->mu);
    gh_dedup_insert(srv->dedup, &k);
    pthread_mutex_unlock(&srv->mu);
}

void gh_ingest_server_stats(struct gh_ingest_server *srv, struct gh_ingest_server_stats *out)
{
    pthread_mutex_lock(&srv->st_mu);
    *out = srv->st;
    pthread_mutex_unlock(&srv->st_mu);
    pthread_mutex_lock(&srv->mu);
    out->dedup_size = gh_dedup_size(srv->dedup);
    out->dedup_evicted = gh_dedup_evicted(srv->dedup);
    pthread_mutex_unlock(&srv->mu);
    const union MHD_DaemonInfo *di =
        srv->mhd ? MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    out->connections = di ? di->num_connections : 0;
}

void gh_ingest_server_free(struct gh_ingest_server *srv)
{
    if (!srv)
        return;
    /* every suspended connection is answered (and resumed) before the
     * daemon stops; a run in progress ends within its own bound */
    gh_workq_stop(srv->reviews);
    gh_workq_stop(srv->writes);
    if (srv->mhd)
        MHD_stop_daemon(srv->mhd); /* closes the listening socket too */
    gh_workq_free(srv->reviews);
    gh_workq_free(srv->writes);
    gh_dedup_free(srv->dedup);
    free(srv->token_file);
    free(srv->tls_cert);
    if (srv->tls_key) {
        memset(srv->tls_key, 0, strlen(srv->tls_key));
        free(srv->tls_key);
    }
    OPENSSL_cleanse(&srv->tokens, sizeof srv->tokens);
    pthread_mutex_destroy(&srv->mu);
    pthread_mutex_destroy(&srv->st_mu);
    pthread_mutex_destroy(&srv->metrics_mu);
    free(srv);
}
