/* client.c - the Kubernetes API transport on libcurl's multi interface:
 * request queue, rate limiter, in-flight bound, timers, replies into
 * gh_kube_resp with every error body decoded as a Status. */
#include "kube/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/curlbuf.h"
#include "kube/ratelimit.h"

#define WATCH_ERRBODY_MAX (64u << 10) /* error body of a failed watch */

enum call_state { CALL_QUEUED, CALL_ACTIVE, CALL_COMPLETED };

struct gh_kube_call {
    struct gh_kube_call *prev, *next; /* in the list of its state */
    enum call_state state;
    struct gh_kube_req req;
    CURL *easy;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    struct gh_curlbuf body; /* reply body (non-2xx of a watch, or any non-watch reply),
                               capped at body.max; a chunk over it aborts the call */
    gh_kube_done_fn done;
    gh_kube_data_fn data;
    void *ud;
    int abort_rc;           /* set by the data callback or a local limit */
    struct gh_err abort_err;
    CURLcode result;
    bool cancelled;
    bool throttled_once;
};

struct list {
    struct gh_kube_call *head, *tail;
    int n;
};

struct timer {
    struct timer *next;
    int64_t due;
    uint64_t id;
    gh_kube_timer_fn fn;
    void *ud;
};

struct gh_kube_client {
    struct gh_kube_config cfg;
    struct gh_kube_client_opts o;
    char *user_agent;
    char *base_url;                 /* scheme://host:port[/prefix] used in URLs */
    struct curl_slist *connect_to;  /* for tls-server-name, or NULL */
    CURLM *multi;
    CURLSH *share;
    int epfd;              /* curl's sockets + tfd + efd: the caller's loop watches this */
    int tfd;               /* timerfd armed at the earliest deadline */
    int efd;               /* eventfd for gh_kube_client_wakeup */
    int64_t curl_deadline; /* CLOCK_MONOTONIC ns when curl wants a timeout call; 0: none */
    struct list queued, active, completed;
    int inflight; /* non-watch in active */
    int watches;
    struct timer *timers; /* sorted by due, then id */
    uint64_t next_timer_id;
    double tokens;
    int64_t tokens_at;
    int64_t rl_wait_until;
    char *token;          /* current bearer token, or NULL */
    int64_t token_read_at;
    bool token_stale;     /* re-read before the next request (after a 401) */
    uint64_t rng;
    bool in_perform;
    struct gh_kube_client_stats st;
};

static void arm(struct gh_kube_client *c);

/* ------------------------------------------------------------------ lists */

static void list_push(struct list *l, struct gh_kube_call *k)
{
    k->prev = l->tail;
    k->next = NULL;
    if (l->tail)
        l->tail->next = k;
    else
        l->head = k;
    l->tail = k;
    l->n++;
}

static void list_unlink(struct list *l, struct gh_kube_call *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        l->head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    else
        l->tail = k->prev;
    k->prev = k->next = NULL;
    l->n--;
}

static struct list *list_of(struct gh_kube_client *c, struct gh_kube_call *k)
{
    return k->state == CALL_QUEUED ? &c->queued : k->state == CALL_ACTIVE ? &c->active
                                                                           : &c->completed;
}

/* ------------------------------------------------------------------ misc */

void gh_kube_req_clear(struct gh_kube_req *req)
{
    if (!req)
        return;
    free(req->body);
    req->body = NULL;
    req->body_len = 0;
}

void gh_kube_resp_clear(struct gh_kube_resp *resp)
{
    if (!resp)
        return;
    json_decref(resp->body);
    resp->body = NULL;
    resp->http = 0;
    gh_kube_status_reset(&resp->status);
}

static int64_t now_ns(const struct gh_kube_client *c) { return gh_clock_now(c->o.clock); }

uint64_t gh_kube_client_rand(struct gh_kube_client *c)
{
    /* xorshift64* */
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

int64_t gh_kube_jitter(struct gh_kube_client *c, int64_t base, double factor)
{
    if (base <= 0 || factor <= 0)
        return base;
    double u = (double)(gh_kube_client_rand(c) >> 11) / (double)(1ULL << 53);
    return base + (int64_t)((double)base * factor * u);
}

const struct gh_clock *gh_kube_client_clock(const struct gh_kube_client *c) { return c->o.clock; }

const char *gh_kube_client_namespace(const struct gh_kube_client *c)
{
    return c->cfg.namespace_ && c->cfg.namespace_[0] ? c->cfg.namespace_ : "default";
}

void gh_kube_client_stats(const struct gh_kube_client *c, struct gh_kube_client_stats *st)
{
    *st = c->st;
    st->inflight = c->inflight;
    st->watches = c->watches;
    st->queued = c->queued.n;
}

void gh_kube_client_wakeup(struct gh_kube_client *c)
{
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0) {
        /* the counter is already non-zero: the loop will wake anyway */
    }
}

int gh_kube_client_fd(const struct gh_kube_client *c) { return c->epfd; }

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

/* ------------------------------------------------------------------ token */

static void refresh_token(struct gh_kube_client *c, int64_t now)
{
    if (!c->cfg.token_file)
        return;
    if (!c->token_stale && c->token && now - c->token_read_at < c->o.token_reread_ns)
        return;
    struct gh_kube_blob b = {0};
    c->token_read_at = now;
    c->token_stale = false;
    if (gh_kube_read_file(c->cfg.token_file, GH_KUBECONFIG_MAX_FILE, &b, NULL))
        return; /* keep the last good token; the server's 401 will say the rest */
    size_t s = 0, e = b.len;
    while (s < e && (b.data[s] == ' ' || b.data[s] == '\n' || b.data[s] == '\r' || b.data[s] == '\t'))
        s++;
    while (e > s && (b.data[e - 1] == ' ' || b.data[e - 1] == '\n' || b.data[e - 1] == '\r' ||
                     b.data[e - 1] == '\t'))
        e--;
    if (e > s && !memchr(b.data + s, '\n', e - s) && !memchr(b.data + s, '\0', e - s)) {
        char *t = strndup((char *)b.data + s, e - s);
        if (t) {
            if (c->token)
                memset(c->token, 0, strlen(c->token));
            free(c->token);
            c->token = t;
            c->st.token_reads++;
        }
    }
    memset(b.data, 0, b.len);
    free(b.data);
}

/* ------------------------------------------------------------------ rate limit */

static bool rl_take(struct gh_kube_client *c, int64_t now, int64_t *wait_ns)
{
    if (c->o.shared_limit)
        return gh_kube_ratelimit_take(c->o.shared_limit, now, wait_ns);
    if (c->o.qps < 0)
        return true;
    int64_t dt = now - c->tokens_at;
    if (dt > 0) {
        c->tokens += (double)dt * c->o.qps / 1e9;
        if (c->tokens > c->o.burst)
            c->tokens = c->o.burst;
        c->tokens_at = now;
    }
    if (c->tokens >= 1.0) {
        c->tokens -= 1.0;
        return true;
    }
    *wait_ns = (int64_t)((1.0 - c->tokens) / c->o.qps * 1e9) + 1;
    return false;
}

/* ------------------------------------------------------------------ calls */

static void call_free(struct gh_kube_call *k)
{
    if (!k)
        return;
    if (k->easy)
        curl_easy_cleanup(k->easy);
    curl_slist_free_all(k->hdrs);
    gh_kube_req_clear(&k->req);
    free(k->body.p);
    free(k);
}

static size_t body_append(struct gh_kube_call *k, const char *p, size_t len)
{
    size_t kept = gh_curlbuf_append(&k->body, p, len);
    if (kept == len)
        return len;
    if (k->body.over) {
        k->abort_rc = GH_ELIMIT;
        gh_err_set(&k->abort_err, GH_ELIMIT, "reply body larger than %zu bytes", k->body.max);
    } else {
        k->abort_rc = GH_ENOMEM;
        gh_err_set(&k->abort_err, GH_ENOMEM, "out of memory for the reply body");
    }
    return 0;
}

/* curl write callback: a 2xx watch body streams to the data callback; any
 * other body is buffered up to the call's cap. Returning short aborts. */
static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
    struct gh_kube_call *k = ud;
    size_t len = sz * n;
    if (k->cancelled || k->abort_rc)
        return 0;
    if (k->req.watch && k->data) {
        long code = 0;
        curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && code < 300) {
            int rc = k->data(k->ud, p, len, &k->abort_err);
            if (rc) {
                k->abort_rc = rc;
                return 0;
            }
            return len;
        }
    }
    return body_append(k, p, len);
}

static const char *method_name(enum gh_kube_method m)
{
    switch (m) {
    case GH_KUBE_GET: return "GET";
    case GH_KUBE_POST: return "POST";
    case GH_KUBE_PUT: return "PUT";
    case GH_KUBE_PATCH: return "PATCH";
    case GH_KUBE_DELETE: return "DELETE";
    }
    return "GET";
}

/* "GET /api/v1/pods" (query dropped), for error messages. */
static void call_what(const struct gh_kube_call *k, char *buf, size_t cap)
{
    const char *q = strchr(k->req.path, '?');
    int plen = q ? (int)(q - k->req.path) : (int)strlen(k->req.path);
    if (plen > 200)
        plen = 200;
    snprintf(buf, cap, "%s %.*s", method_name(k->req.method), plen, k->req.path);
}

static int add_header(struct gh_kube_call *k, const char *h, struct gh_err *err)
{
    struct curl_slist *n = curl_slist_append(k->hdrs, h);
    if (!n)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    k->hdrs = n;
    return GH_OK;
}

/* Builds the easy handle of k and adds it to the multi. */
static int call_start(struct gh_kube_client *c, struct gh_kube_call *k, int64_t now,
                      struct gh_err *err)
{
    char url[GH_KUBE_PATH_MAX + 512];
    int n = snprintf(url, sizeof url, "%s%s", c->base_url, k->req.path);
    if (n < 0 || (size_t)n >= sizeof url)
        return gh_err_set(err, GH_ELIMIT, "URL too long");
    CURL *e = curl_easy_init();
    if (!e)
        return gh_err_set(err, GH_ENOMEM, "curl_easy_init failed");
    k->easy = e;
    refresh_token(c, now);

    int rc = GH_OK;
    char hbuf[256];
    if ((rc = add_header(k, "Accept: application/json", err)) || (rc = add_header(k, "Expect:", err)))
        return rc;
    if (k->req.body) {
        snprintf(hbuf, sizeof hbuf, "Content-Type: %s",
                 k->req.content_type ? k->req.content_type : "application/json");
        if ((rc = add_header(k, hbuf, err)))
            return rc;
    }
    const char *tok = c->token ? c->token : c->cfg.token;
    if (tok) {
        size_t tl = strlen(tok);
        char *auth = malloc(tl + 32);
        if (!auth)
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        snprintf(auth, tl + 32, "Authorization: Bearer %s", tok);
        rc = add_header(k, auth, err);
        memset(auth, 0, tl + 32);
        free(auth);
        if (rc)
            return rc;
    }

    CURLcode cc = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (cc == CURLE_OK)                                                                        \
            cc = curl_easy_setopt(e, opt, val);                                                    \
    } while (0)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_PRIVATE, k);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, k);
    SET(CURLOPT_ERRORBUFFER, k->errbuf);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PROTOCOLS_STR, "https,http");
    SET(CURLOPT_HTTP_VERSION,
        c->o.http1_only ? (long)CURL_HTTP_VERSION_1_1 : (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_PIPEWAIT, 1L);
    SET(CURLOPT_SHARE, c->share);
    SET(CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
    SET(CURLOPT_TIMEOUT_MS, k->req.timeout_ms > 0 ? k->req.timeout_ms
                            : k->req.watch        ? 0L
                                                  : c->o.request_timeout_ms);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, 30L);
    SET(CURLOPT_TCP_KEEPINTVL, 15L);
    SET(CURLOPT_ACCEPT_ENCODING, "");
    SET(CURLOPT_USERAGENT, c->user_agent);
    SET(CURLOPT_HTTPHEADER, k->hdrs);
    SET(CURLOPT_SSL_VERIFYPEER, c->cfg.insecure_skip_tls_verify ? 0L : 1L);
    SET(CURLOPT_SSL_VERIFYHOST, c->cfg.insecure_skip_tls_verify ? 0L : 2L);
    if (c->connect_to)
        SET(CURLOPT_CONNECT_TO, c->connect_to);
    if (c->cfg.ca_pem.data) {
        struct curl_blob b = {c->cfg.ca_pem.data, c->cfg.ca_pem.len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_CAINFO_BLOB, &b);
    }
    if (c->cfg.cert_pem.data && c->cfg.key_pem.data) {
        struct curl_blob cb = {c->cfg.cert_pem.data, c->cfg.cert_pem.len, CURL_BLOB_NOCOPY};
        struct curl_blob kb = {c->cfg.key_pem.data, c->cfg.key_pem.len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_SSLCERTTYPE, "PEM");
        SET(CURLOPT_SSLCERT_BLOB, &cb);
        SET(CURLOPT_SSLKEYTYPE, "PEM");
        SET(CURLOPT_SSLKEY_BLOB, &kb);
    }
    switch (k->req.method) {
    case GH_KUBE_GET:
        break;
    case GH_KUBE_POST:
        SET(CURLOPT_POST, 1L);
        break;
    default:
        SET(CURLOPT_CUSTOMREQUEST, method_name(k->req.method));
        break;
    }
    if (k->req.body || k->req.method == GH_KUBE_POST) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)k->req.body_len);
        SET(CURLOPT_POSTFIELDS, k->req.body ? k->req.body : "");
    }
#undef SET
    if (cc != CURLE_OK)
        return gh_err_set(err, GH_EINVAL, "curl option: %s", curl_easy_strerror(cc));
    CURLMcode mc = curl_multi_add_handle(c->multi, e);
    if (mc != CURLM_OK)
        return gh_err_set(err, GH_EIO, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    return GH_OK;
}

/* Moves queued calls onto the wire as far as slots and tokens allow. */
static void pump(struct gh_kube_client *c)
{
    int64_t now = now_ns(c);
    struct gh_kube_call *k = c->queued.head;
    while (k) {
        struct gh_kube_call *next = k->next;
        if (!k->req.watch && c->inflight >= c->o.max_inflight) {
            k = next;
            continue;
        }
        int64_t wait = 0;
        if (!rl_take(c, now, &wait)) {
            c->rl_wait_until = now + wait;
            if (!k->throttled_once) {
                k->throttled_once = true;
                c->st.throttled++;
            }
            return;
        }
        list_unlink(&c->queued, k);
        struct gh_err e;
        int rc = call_start(c, k, now, &e);
        if (rc) {
            /* fails locally: deliver through the completion path */
            if (k->easy) {
                curl_easy_cleanup(k->easy);
                k->easy = NULL;
            }
            k->abort_rc = rc;
            k->abort_err = e;
            k->state = CALL_COMPLETED;
            list_push(&c->completed, k);
        } else {
            k->state = CALL_ACTIVE;
            list_push(&c->active, k);
            if (k->req.watch)
                c->watches++;
            else
                c->inflight++;
            c->st.started++;
        }
        k = next;
    }
    c->rl_wait_until = 0;
}

static void detach_active(struct gh_kube_client *c, struct gh_kube_call *k)
{
    curl_multi_remove_handle(c->multi, k->easy);
    list_unlink(&c->active, k);
    if (k->req.watch)
        c->watches--;
    else
        c->inflight--;
}

void gh_kube_cancel(struct gh_kube_client *c, struct gh_kube_call *k)
{
    if (!c || !k)
        return;
    if (k->state == CALL_ACTIVE && c->in_perform) {
        k->cancelled = true; /* swept right after curl ran */
        return;
    }
    if (k->state == CALL_ACTIVE)
        detach_active(c, k);
    else
        list_unlink(list_of(c, k), k);
    call_free(k);
}

int gh_kube_submit(struct gh_kube_client *c, struct gh_kube_req *req, gh_kube_done_fn done,
                   gh_kube_data_fn data, void *ud, struct gh_kube_call **out, struct gh_err *err)
{
    if (out)
        *out = NULL;
    if (!done || req->path[0] != '/') {
        gh_kube_req_clear(req);
        return gh_err_set(err, GH_EINVAL, "submit: no callback or a path without '/'");
    }
    if (c->queued.n >= c->o.max_queued) {
        gh_kube_req_clear(req);
        return gh_err_set(err, GH_ELIMIT, "submit: %d requests already queued", c->queued.n);
    }
    struct gh_kube_call *k = calloc(1, sizeof *k);
    if (!k) {
        gh_kube_req_clear(req);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    k->req = *req;
    req->body = NULL;
    req->body_len = 0;
    k->done = done;
    k->data = data;
    k->ud = ud;
    k->body.max = k->req.watch ? WATCH_ERRBODY_MAX : c->o.max_body;
    k->state = CALL_QUEUED;
    list_push(&c->queued, k);
    if (out)
        *out = k;
    if (!c->in_perform) {
        pump(c);
        arm(c);
    }
    return GH_OK;
}

/* Turns a finished transfer into rc + resp and runs its callback. */
static void deliver(struct gh_kube_client *c, struct gh_kube_call *k)
{
    struct gh_kube_resp resp = {0};
    struct gh_err e = {{0}};
    char what[256];
    int rc = GH_OK;
    gh_kube_status_reset(&resp.status);
    call_what(k, what, sizeof what);
    if (k->easy) {
        curl_easy_getinfo(k->easy, CURLINFO_RESPONSE_CODE, &resp.http);
        long ver = 0;
        curl_easy_getinfo(k->easy, CURLINFO_HTTP_VERSION, &ver);
        if (ver)
            c->st.last_http_version = ver;
        long nc = 0;
        if (curl_easy_getinfo(k->easy, CURLINFO_NUM_CONNECTS, &nc) == CURLE_OK && nc > 0)
            c->st.connects += (uint64_t)nc;
    }
    bool is2xx = resp.http >= 200 && resp.http < 300;
    if (k->abort_rc) {
        rc = k->abort_rc;
        gh_err_prefix(&k->abort_err, rc, "%s", what);
        e = k->abort_err;
        if (!is2xx && resp.http > 0)
            gh_kube_status_from_reply(&resp.status, resp.http, k->body.p, k->body.len, -1);
    } else if (k->result != CURLE_OK && !(resp.http > 0 && !is2xx)) {
        /* no (complete) reply: a transport failure */
        resp.status.kind = GH_KUBE_R_TRANSPORT;
        snprintf(resp.status.message, sizeof resp.status.message, "%s",
                 k->errbuf[0] ? k->errbuf : curl_easy_strerror(k->result));
        rc = k->result == CURLE_OPERATION_TIMEDOUT ? GH_ETIMEOUT : GH_EAGAIN;
        gh_err_set(&e, rc, "%s: %s", what, resp.status.message);
    } else if (is2xx) {
        if (!k->req.watch && k->body.len > 0) {
            json_error_t je;
            resp.body = json_loadb(k->body.p, k->body.len, 0, &je);
            if (!resp.body) {
                rc = gh_err_set(&e, GH_EINVAL, "%s: malformed JSON reply at line %d column %d: %s",
                                what, je.line, je.column, je.text);
            }
        }
    } else {
        curl_off_t ra = -1;
        curl_easy_getinfo(k->easy, CURLINFO_RETRY_AFTER, &ra);
        gh_kube_status_from_reply(&resp.status, resp.http, k->body.p, k->body.len,
                                  ra > 0 && ra < 86400 ? (int)ra : -1);
        rc = gh_kube_status_err(&resp.status, what, &e);
        if (resp.http == 401)
            c->token_stale = true;
    }
    c->st.completed++;
    k->done(k->ud, rc, &resp, rc ? &e : NULL);
    gh_kube_resp_clear(&resp);
}

static void dispatch_completed(struct gh_kube_client *c)
{
    struct gh_kube_call *k;
    while ((k = c->completed.head)) {
        list_unlink(&c->completed, k);
        k->state = CALL_COMPLETED; /* detached: a cancel from done cannot reach it */
        deliver(c, k);
        call_free(k);
    }
}

/* curl tells which sockets to watch; they go into the client's epoll set. */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct gh_kube_client *c = userp;
    (void)e;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
        curl_multi_assign(c->multi, fd, NULL);
        return 0;
    }
    struct epoll_event ev = {0};
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    if (socketp) {
        if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
            return 0;
    }
    if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(c->epfd, EPOLL_CTL_MOD, fd, &ev) != 0))
        return -1;
    curl_multi_assign(c->multi, fd, (void *)1);
    return 0;
}

/* curl's single timeout; only recorded here (acted on in drive()). */
static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
    struct gh_kube_client *c = userp;
    (void)m;
    c->curl_deadline = timeout_ms < 0 ? 0 : mono_ns() + (int64_t)timeout_ms * GH_NS_PER_MS;
    return 0;
}

/* Nanoseconds (monotonic) until the earliest thing due: curl's timeout, a
 * timer, a rate-limiter token; -1 when nothing is pending. */
static int64_t next_due_ns(struct gh_kube_client *c)
{
    int64_t now = now_ns(c), mono = mono_ns(), d[3];
    int n = 0;
    if (c->completed.head)
        return 0;
    if (c->curl_deadline)
        d[n++] = c->curl_deadline - mono;
    if (c->timers)
        d[n++] = c->timers->due - now;
    if (c->rl_wait_until)
        d[n++] = c->rl_wait_until - now;
    if (n == 0)
        return -1;
    int64_t best = d[0];
    for (int i = 1; i < n; i++)
        if (d[i] < best)
            best = d[i];
    return best < 0 ? 0 : best; /* overdue: now */
}

/* Arms the timerfd so the epoll fd turns readable when something is due. */
static void arm(struct gh_kube_client *c)
{
    int64_t d = next_due_ns(c);
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (d >= 0) {
        if (d < 1)
            d = 1; /* zero would disarm */
        its.it_value.tv_sec = d / GH_NS_PER_S;
        its.it_value.tv_nsec = d % GH_NS_PER_S;
    }
    timerfd_settime(c->tfd, 0, &its, NULL);
}

static void drain_fd(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) > 0) {
    }
}

/* Hands ready sockets and due timeouts to curl, then collects finished
 * transfers into the completed list. */
static int drive(struct gh_kube_client *c, const struct epoll_event *evs, int n,
                 struct gh_err *err)
{
    int running = 0;
    CURLMcode mc = CURLM_OK;
    c->in_perform = true;
    for (int i = 0; i < n && mc == CURLM_OK; i++) {
        int fd = evs[i].data.fd;
        if (fd == c->tfd || fd == c->efd) {
            drain_fd(fd);
            continue;
        }
        int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                    (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        mc = curl_multi_socket_action(c->multi, fd, flags, &running);
    }
    if (mc == CURLM_OK && c->curl_deadline && mono_ns() >= c->curl_deadline) {
        c->curl_deadline = 0;
        mc = curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    c->in_perform = false;
    /* sweep calls cancelled while curl ran */
    for (struct gh_kube_call *k = c->active.head, *next; k; k = next) {
        next = k->next;
        if (k->cancelled) {
            detach_active(c, k);
            call_free(k);
        }
    }
    if (mc != CURLM_OK)
        return gh_err_set(err, GH_EIO, "curl_multi_socket_action: %s", curl_multi_strerror(mc));
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct gh_kube_call *k = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&k);
        if (!k)
            continue;
        k->result = m->data.result;
        detach_active(c, k);
        k->state = CALL_COMPLETED;
        list_push(&c->completed, k);
    }
    return GH_OK;
}

/* ------------------------------------------------------------------ timers */

uint64_t gh_kube_timer_add(struct gh_kube_client *c, int64_t delay_ns, gh_kube_timer_fn fn,
                           void *ud)
{
    struct timer *t = malloc(sizeof *t);
    if (!t)
        return 0;
    t->due = now_ns(c) + (delay_ns > 0 ? delay_ns : 0);
    t->id = ++c->next_timer_id;
    t->fn = fn;
    t->ud = ud;
    struct timer **pp = &c->timers;
    while (*pp && (*pp)->due <= t->due)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    if (!c->in_perform)
        arm(c);
    return t->id;
}

void gh_kube_timer_cancel(struct gh_kube_client *c, uint64_t id)
{
    if (!id)
        return;
    for (struct timer **pp = &c->timers; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            struct timer *t = *pp;
            *pp = t->next;
            free(t);
            return;
        }
}

static void fire_timers(struct gh_kube_client *c)
{
    int64_t now = now_ns(c);
    uint64_t max_id = c->next_timer_id; /* timers added by callbacks wait a turn */
    for (;;) {
        struct timer **pp = &c->timers;
        while (*pp && (*pp)->due <= now && (*pp)->id > max_id)
            pp = &(*pp)->next;
        struct timer *t = *pp;
        if (!t || t->due > now)
            return;
        *pp = t->next;
        gh_kube_timer_fn fn = t->fn;
        void *ud = t->ud;
        free(t);
        fn(ud);
    }
}

/* ------------------------------------------------------------------ loop */

int gh_kube_client_run(struct gh_kube_client *c, int max_wait_ms, struct gh_err *err)
{
    fire_timers(c);
    pump(c);
    dispatch_completed(c);

    long wait = max_wait_ms < 0 ? 0 : max_wait_ms;
    int64_t due = next_due_ns(c);
    if (due >= 0 && due / GH_NS_PER_MS < wait)
        wait = (long)((due + GH_NS_PER_MS - 1) / GH_NS_PER_MS);
    struct epoll_event evs[64];
    int n = epoll_wait(c->epfd, evs, 64, (int)wait);
    if (n < 0) {
        if (errno != EINTR)
            return gh_err_set(err, GH_EIO, "epoll_wait: %s", strerror(errno));
        n = 0;
    }
    int rc = drive(c, evs, n, err);
    if (rc)
        return rc;
    dispatch_completed(c);
    fire_timers(c);
    pump(c);
    dispatch_completed(c);
    arm(c);
    return GH_OK;
}

struct sync_state {
    bool done;
    int rc;
    struct gh_kube_resp *resp;
    struct gh_err err;
};

static void sync_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct sync_state *s = ud;
    s->done = true;
    s->rc = rc;
    s->resp->http = resp->http;
    s->resp->body = resp->body;
    resp->body = NULL;
    s->resp->status = resp->status;
    if (err)
        s->err = *err;
}

int gh_kube_call(struct gh_kube_client *c, struct gh_kube_req *req, struct gh_kube_resp *resp,
                 struct gh_err *err)
{
    memset(resp, 0, sizeof *resp);
    gh_kube_status_reset(&resp->status);
    if (req->watch) {
        gh_kube_req_clear(req);
        return gh_err_set(err, GH_EINVAL, "gh_kube_call: watch requests are asynchronous only");
    }
    struct sync_state s = {.resp = resp};
    struct gh_kube_call *k = NULL;
    int rc = gh_kube_submit(c, req, sync_done, NULL, &s, &k, err);
    if (rc)
        return rc;
    while (!s.done) {
        rc = gh_kube_client_run(c, 1000, err);
        if (rc) {
            if (!s.done)
                gh_kube_cancel(c, k);
            return rc;
        }
    }
    if (s.rc && err)
        *err = s.err;
    return s.rc;
}

/* ------------------------------------------------------------------ lifecycle */

/* For tls-server-name: URLs name that host (SNI and verification), and
 * CONNECT_TO sends the connection to the configured server. */
static int setup_urls(struct gh_kube_client *c, struct gh_err *err)
{
    if (!c->cfg.tls_server_name) {
        c->base_url = strdup(c->cfg.server);
        return c->base_url ? GH_OK : gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *url = NULL;
    int rc = GH_OK;
    if (!u || curl_url_set(u, CURLUPART_URL, c->cfg.server, 0) ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) ||
        curl_url_set(u, CURLUPART_HOST, c->cfg.tls_server_name, 0) ||
        curl_url_get(u, CURLUPART_URL, &url, 0)) {
        rc = gh_err_set(err, GH_EINVAL, "server URL \"%.100s\" or tls-server-name is invalid",
                        c->cfg.server);
        goto out;
    }
    char ct[600];
    int n = snprintf(ct, sizeof ct, "%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port);
    if (n < 0 || (size_t)n >= sizeof ct) {
        rc = gh_err_set(err, GH_ELIMIT, "tls-server-name too long");
        goto out;
    }
    c->connect_to = curl_slist_append(NULL, ct);
    size_t ul = strlen(url);
    while (ul > 0 && url[ul - 1] == '/')
        url[--ul] = '\0';
    c->base_url = strdup(url);
    if (!c->connect_to || !c->base_url)
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
out:
    curl_free(host);
    curl_free(port);
    curl_free(url);
    curl_url_cleanup(u);
    return rc;
}

int gh_kube_client_new(const struct gh_kube_config *cfg, const struct gh_kube_client_opts *opts,
                       struct gh_kube_client **out, struct gh_err *err)
{
    *out = NULL;
    if (!cfg || !cfg->server)
        return gh_err_set(err, GH_EINVAL, "kube client: no server configured");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return gh_err_set(err, GH_EIO, "curl_global_init failed");
    struct gh_kube_client *c = calloc(1, sizeof *c);
    if (!c) {
        curl_global_cleanup();
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    c->epfd = c->tfd = c->efd = -1;
    int rc;
    if (opts)
        c->o = *opts;
    if (!c->o.clock)
        c->o.clock = gh_clock_real();
    if (c->o.qps == 0)
        c->o.qps = 50;
    if (c->o.burst <= 0)
        c->o.burst = 100;
    if (c->o.max_inflight <= 0)
        c->o.max_inflight = 32;
    if (c->o.max_queued <= 0)
        c->o.max_queued = 10000;
    if (c->o.max_body == 0)
        c->o.max_body = 64u << 20;
    if (c->o.connect_timeout_ms <= 0)
        c->o.connect_timeout_ms = 10000;
    if (c->o.request_timeout_ms <= 0)
        c->o.request_timeout_ms = 60000;
    if (c->o.token_reread_ns <= 0)
        c->o.token_reread_ns = 60 * GH_NS_PER_S;
    c->user_agent = strdup(c->o.user_agent ? c->o.user_agent : "gpuheal/0.1");
    c->o.user_agent = NULL;
    if (!c->user_agent) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = gh_kube_config_copy(&c->cfg, cfg, err)) || (rc = setup_urls(c, err)))
        goto fail;
    c->multi = curl_multi_init();
    c->share = curl_share_init();
    if (!c->multi || !c->share) {
        rc = gh_err_set(err, GH_ENOMEM, "curl multi/share init failed");
        goto fail;
    }
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event tev = {.events = EPOLLIN, .data.fd = c->tfd};
    struct epoll_event eev = {.events = EPOLLIN, .data.fd = c->efd};
    if (c->epfd < 0 || c->tfd < 0 || c->efd < 0 ||
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->tfd, &tev) ||
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->efd, &eev)) {
        rc = gh_err_set(err, GH_EIO, "epoll/timerfd/eventfd: %s", strerror(errno));
        goto fail;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    c->tokens = c->o.burst;
    c->tokens_at = now_ns(c);
    c->rng = c->o.seed ? c->o.seed
                       : (uint64_t)now_ns(c) ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ULL;
    if (!c->rng)
        c->rng = 1;
    if (c->cfg.token_file) {
        c->token_stale = true;
        refresh_token(c, now_ns(c));
    }
    *out = c;
    return GH_OK;
fail:
    gh_kube_client_free(c);
    return rc;
}

void gh_kube_client_free(struct gh_kube_client *c)
{
    if (!c)
        return;
    struct gh_kube_call *k;
    while ((k = c->active.head)) {
        detach_active(c, k);
        call_free(k);
    }
    while ((k = c->queued.head)) {
        list_unlink(&c->queued, k);
        call_free(k);
    }
    while ((k = c->completed.head)) {
        list_unlink(&c->completed, k);
        call_free(k);
    }
    while (c->timers) {
        struct timer *t = c->timers;
        c->timers = t->next;
        free(t);
    }
    if (c->multi)
        curl_multi_cleanup(c->multi);
    if (c->share)
        curl_share_cleanup(c->share);
    if (c->epfd >= 0)
        close(c->epfd);
    if (c->tfd >= 0)
        close(c->tfd);
    if (c->efd >= 0)
        close(c->efd);
    curl_slist_free_all(c->connect_to);
    if (c->token)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    free(c->base_url);
    free(c->user_agent);
    gh_kube_config_clear(&c->cfg);
    free(c);
    curl_global_cleanup();
}
