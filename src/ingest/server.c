/* server.c - the ingest HTTP endpoint (POST /v1/signals, /healthz, /readyz,
 * /metrics) on libmicrohttpd's thread pool, with sender authentication,
 * per-sender signal checks, connection and body bounds
 * and duplicate drop, handing accepted signals to the owner's sink. */
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
    gh_ingest_auth_fn authenticate; /* optional */
    void *auth_ctx;
    unsigned header_timeout_s, idle_timeout_s;
    int (*admit)(void *ctx, const struct gh_ingest_sender *who, const struct gh_signal *sig,
                 char *why, size_t cap); /* optional */
    void *admit_ctx;
    bool (*ready)(void *ctx); /* optional; NULL: always ready */
    void *ready_ctx;
    char *tls_cert, *tls_key;     /* PEM text, kept while the daemon runs */

    pthread_mutex_t mu;           /* guards everything below */
    struct gh_token_set tokens;
    struct stat token_st;         /* the file as last loaded */
    int64_t token_checked_ns;     /* CLOCK_MONOTONIC of the last stat */
    struct gh_dedup *dedup;
    struct gh_ingest_server_stats st;
};

/* Per-request state (MHD's con_cls). */
struct request {
    bool ingest;          /* POST /v1/signals, authorised, within limits so far */
    struct gh_ingest_sender sender; /* who sent it (ingest) */
    int refuse;           /* != 0: answer this status once the body is drained */
    char *buf;
    size_t len, cap;
    size_t discarded;     /* body bytes read and dropped */
};

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
        srv->st.token_reloads++;
    } else {
        srv->st.token_reload_errors++;
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

/* Who sent the request: 0 (known, *out set), or the status to answer
 * (401, 503) with why[cap]. */
static unsigned authenticate(struct gh_ingest_server *srv, struct MHD_Connection *c,
                             struct gh_ingest_sender *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (!srv->token_file && !srv->authenticate) {
        out->kind = GH_SENDER_ANONYMOUS;
        return 0;
    }
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (srv->token_file) {
        pthread_mutex_lock(&srv->mu);
        maybe_reload_tokens(srv);
        bool ok = gh_token_set_check_header(&srv->tokens, h);
        pthread_mutex_unlock(&srv->mu);
        if (ok) {
            out->kind = GH_SENDER_OPERATOR;
            return 0;
        }
    }
    size_t n = 0;
    const char *tok = bearer(h, &n);
    if (!tok || !srv->authenticate) {
        snprintf(why, cap, "missing or wrong bearer token");
        return MHD_HTTP_UNAUTHORIZED;
    }
    struct gh_err err = {{0}};
    int rc = srv->authenticate(srv->auth_ctx, tok, n, out, &err);
    if (rc == GH_OK && out->kind == GH_SENDER_NODE && out->node[0])
        return 0;
    if (rc == GH_EAGAIN) {
        snprintf(why, cap, "the bearer token cannot be checked now: %s", err.msg);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    snprintf(why, cap, "bearer token refused: %s", rc ? err.msg : "no node");
    return MHD_HTTP_UNAUTHORIZED;
}

/* ---- the batch being taken from one body ---- */

struct batch {
    struct gh_ingest_server *srv;
    const struct gh_ingest_sender *sender;
    struct gh_ingest_result *res;
    struct gh_signal *sigs;
    size_t n, cap;
    struct gh_dedup_key *keys;    /* ids inserted for this batch (undone on refusal) */
    size_t nkeys, keycap;
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
    b->srv->st.forged++;
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
        if (gh_dedup_contains(b->srv->dedup, &k))
            return GH_INGEST_DUPLICATE;
        if (b->nkeys == b->keycap && !grow((void **)&b->keys, &b->keycap, sizeof *b->keys))
            return GH_INGEST_STOP;
        gh_dedup_insert(b->srv->dedup, &k);
        b->keys[b->nkeys++] = k;
    }
    b->sigs[b->n++] = *sig;
    return GH_INGEST_TAKEN;
}

static void batch_free(struct batch *b, bool undo_keys)
{
    for (size_t i = 0; i < b->n; i++)
        gh_signal_clear(&b->sigs[i]);
    if (undo_keys)
        for (size_t i = 0; i < b->nkeys; i++)
            gh_dedup_remove(b->srv->dedup, &b->keys[i]);
    free(b->sigs);
    free(b->keys);
}

static enum MHD_Result handle_body(struct gh_ingest_server *srv, struct MHD_Connection *c,
                                   struct request *rq)
{
    struct gh_ingest_result *res = malloc(sizeof *res);
    struct batch b = {.srv = srv, .sender = &rq->sender, .res = res};
    struct gh_err err = {{0}};
    if (!res)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");

    pthread_mutex_lock(&srv->mu);
    srv->st.bytes += rq->len;
    int rc = gh_ingest_parse(rq->buf ? rq->buf : "", rq->len, &srv->limits, take, &b, res, &err);
    bool undo = true;
    if (rc == GH_OK && b.n > 0) {
        rc = srv->sink(srv->sink_ctx, b.sigs, b.n);
        if (rc == GH_OK) {
            /* The sink stole them; nothing left to clear. */
            b.n = 0;
        } else {
            rc = GH_EAGAIN;
        }
    }
    if (rc == GH_OK) {
        undo = false;
        srv->st.accepted += res->accepted;
        srv->st.duplicates += res->duplicates;
        srv->st.rejected += res->rejected;
        if (res->rejected)
            srv->st.partial++;
    } else if (rc == GH_ELIMIT) {
        srv->st.too_large++;
    } else if (rc == GH_EAGAIN) {
        srv->st.unavailable++;
    }
    batch_free(&b, undo);
    pthread_mutex_unlock(&srv->mu);

    enum MHD_Result ret;
    if (rc == GH_OK) {
        char *body = gh_ingest_reply_encode(res);
        ret = body ? reply(c, res->rejected ? 422 : MHD_HTTP_OK, "application/json", body, false)
                   : reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    } else if (rc == GH_ELIMIT) {
        ret = reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, err.msg);
    } else if (rc == GH_EAGAIN && b.retry[0]) {
        ret = reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, b.retry);
    } else if (rc == GH_EAGAIN) {
        ret = reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "receiver cannot take the batch now (queue full or journal write failed); retry later");
    } else {
        ret = reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    free(res);
    return ret;
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
    if (srv->extra_metrics && (size_t)n < METRICS_MAX - 1) {
        pthread_mutex_lock(&srv->metrics_mu);
        n += (int)srv->extra_metrics(srv->metrics_ctx, buf + n, METRICS_MAX - (size_t)n);
        pthread_mutex_unlock(&srv->metrics_mu);
    }
    buf[n < METRICS_MAX ? n : METRICS_MAX - 1] = '\0';
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf, false);
}

static void count(struct gh_ingest_server *srv, uint64_t *counter)
{
    pthread_mutex_lock(&srv->mu);
    (*counter)++;
    pthread_mutex_unlock(&srv->mu);
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
        char why[GH_ERR_MAX + 64];
        unsigned refuse = authenticate(srv, c, &rq->sender, why, sizeof why);
        if (refuse) {
            count(srv, refuse == MHD_HTTP_UNAUTHORIZED ? &srv->st.unauthorized
                                                       : &srv->st.auth_unavailable);
            /* Answer before the body is read: an unauthorised client
             * does not get to make us read megabytes. */
            return reply_error(c, refuse, why);
        }
        if (srv->ready && !srv->ready(srv->ready_ctx)) {
            /* A standby would only hold the incidents until a failover:
             * the sender keeps the batch and retries (on the leader). */
            count(srv, &srv->st.unavailable);
            return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                               "not ready (not the leader, or its store cannot record); retry "
                               "(a new connection may reach the leader)");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || *end || v > srv->body_max) {
                count(srv, &srv->st.too_large);
                char msg[96];
                snprintf(msg, sizeof msg, "request body over %zu bytes", srv->body_max);
                return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, msg);
            }
            if (v > 0) {
                rq->buf = malloc((size_t)v);
                if (!rq->buf)
                    return MHD_NO;
                rq->cap = (size_t)v;
            }
        }
        rq->ingest = true;
        return MHD_YES;
    }

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
            count(srv, &srv->st.too_large);
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
        snprintf(msg, sizeof msg, "request body over %zu bytes", srv->body_max);
        return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, msg);
    }
    if (rq->refuse) {
        count(srv, &srv->st.bad_requests);
        return reply_error(c, (unsigned)rq->refuse,
                           rq->refuse == MHD_HTTP_NOT_FOUND ? "no such path" : "method not allowed");
    }
    if (strcmp(url, "/healthz") == 0) {
        char *ok = malloc(4);
        if (!ok)
            return MHD_NO;
        memcpy(ok, "ok\n", 4);
        return reply(c, MHD_HTTP_OK, "text/plain", ok, false);
    }
    if (strcmp(url, "/readyz") == 0) {
        if (srv->ready && !srv->ready(srv->ready_ctx))
            return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                               "not ready (not the leader, or its store cannot record)");
        char *ok = malloc(4);
        if (!ok)
            return MHD_NO;
        memcpy(ok, "ok\n", 4);
        return reply(c, MHD_HTTP_OK, "text/plain", ok, false);
    }
    if (strcmp(url, "/metrics") == 0)
        return handle_metrics(srv, c);
    if (!rq->ingest)
        return MHD_YES; /* a reply was queued earlier */
    rq->ingest = false;
    return handle_body(srv, c, rq);
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
    pthread_mutex_init(&srv->metrics_mu, NULL);
    srv->authenticate = opts->authenticate;
    srv->auth_ctx = opts->auth_ctx;
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
    if (opts->preload)
        opts->preload(opts->preload_ctx, srv);
    if ((rc = gh_listen_tcp(opts->listen, &fd, &srv->port, err)))
        goto fail;

    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
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
    pthread_mutex_lock(&srv->mu);
    *out = srv->st;
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
    if (srv->mhd)
        MHD_stop_daemon(srv->mhd); /* closes the listening socket too */
    gh_dedup_free(srv->dedup);
    free(srv->token_file);
    free(srv->tls_cert);
    if (srv->tls_key) {
        memset(srv->tls_key, 0, strlen(srv->tls_key));
        free(srv->tls_key);
    }
    OPENSSL_cleanse(&srv->tokens, sizeof srv->tokens);
    pthread_mutex_destroy(&srv->mu);
    pthread_mutex_destroy(&srv->metrics_mu);
    free(srv);
}
