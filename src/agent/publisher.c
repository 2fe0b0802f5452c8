/* publisher.c - batches from the spool POSTed to the controller by a
 * libcurl worker thread, with acks, per-line rejects, and backoff. */
#include "agent/publisher.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/curlbuf.h"
#include "wire/token.h"
#include "wire/wire.h"

#define RESP_MAX (256 * 1024)
#define URL_MAX  2048

struct result {
    CURLcode cc;
    long status;
    char *body;
    size_t len;
    int64_t retry_after_s;      /* -1 = none */
    char error[GH_ERR_MAX];     /* transport or token error */
};

struct gh_publisher {
    char url[URL_MAX];
    char *token_file, *ca_file;
    size_t lim_records, lim_bytes;
    int64_t linger, timeout, bmin, bmax;
    const struct gh_clock *clock;
    gh_publisher_reject_fn on_reject;
    gh_publisher_event_fn on_event;
    void *cb_ctx;
    int efd;

    /* shared with the worker, under mu */
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, has_job, done;
    struct result res;
    atomic_bool abort;

    /* the loop's side */
    struct gh_spool_batch batch;  /* in flight: the worker reads batch.body */
    bool busy, resend, failing;
    int64_t retry_at, pending_since;
    unsigned attempt;
    uint64_t rng;
    struct gh_publisher_stats st;
};

/* ---- worker ---- */

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    int64_t *retry_after = ud;
    size_t n = size * nmemb;
    if (n > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        char tmp[32];
        size_t k = n - 12 < sizeof tmp - 1 ? n - 12 : sizeof tmp - 1;
        memcpy(tmp, data + 12, k);
        tmp[k] = '\0';
        char *end;
        long v = strtol(tmp, &end, 10);
        if (end != tmp && v >= 0 && v < 3600)
            *retry_after = v;
    }
    return n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct gh_publisher *p = ud;
    return atomic_load(&p->abort) ? 1 : 0;
}

static void do_request(struct gh_publisher *p, CURL *h, struct result *res)
{
    struct curl_slist *hdrs = NULL;
    /* the summary fits well within RESP_MAX: the excess is dropped, the reply read */
    struct gh_curlbuf rb = {.max = RESP_MAX, .drop_excess = true};
    char auth[GH_TOKEN_MAX + 32];
    struct gh_err terr;

    memset(res, 0, sizeof *res);
    res->retry_after_s = -1;
    if (p->token_file) {
        char tok[GH_TOKEN_MAX + 1];
        if (gh_token_read(p->token_file, tok, sizeof tok, &terr) != GH_OK) {
            res->cc = CURLE_LOGIN_DENIED;
            snprintf(res->error, sizeof res->error, "%s", terr.msg);
            return;
        }
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        memset(tok, 0, sizeof tok);
        hdrs = curl_slist_append(hdrs, auth);
        memset(auth, 0, sizeof auth);
    }
    struct curl_slist *h2 = curl_slist_append(hdrs, "Content-Type: application/x-ndjson");
    if (h2)
        hdrs = h2;
    h2 = curl_slist_append(hdrs, "Expect:");
    if (h2)
        hdrs = h2;

    curl_easy_setopt(h, CURLOPT_URL, p->url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, p->batch.body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->batch.len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(p->timeout / GH_NS_PER_MS));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(p->timeout / GH_NS_PER_MS));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, gh_curlbuf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &rb);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &res->retry_after_s);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, res->error);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (p->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
    res->cc = curl_easy_perform(h);
    if (res->cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
    else if (!res->error[0])
        snprintf(res->error, sizeof res->error, "%s", curl_easy_strerror(res->cc));
    /* The header list holds the token: wipe it before freeing. */
    for (struct curl_slist *s = hdrs; s; s = s->next)
        memset(s->data, 0, strlen(s->data));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    res->body = rb.p;
    res->len = rb.len;
}

static void *worker(void *arg)
{
    struct gh_publisher *p = arg;
    CURL *h = curl_easy_init();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->has_job && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        pthread_mutex_unlock(&p->mu);

        struct result res;
        if (h) {
            do_request(p, h, &res);
        } else {
            memset(&res, 0, sizeof res);
            res.cc = CURLE_FAILED_INIT;
            res.retry_after_s = -1;
            snprintf(res.error, sizeof res.error, "curl_easy_init failed");
        }
        pthread_mutex_lock(&p->mu);
        p->res = res;
        p->has_job = false;
        p->done = true;
        pthread_mutex_unlock(&p->mu);
        uint64_t one = 1;
        ssize_t w;
        do
            w = write(p->efd, &one, sizeof one);
        while (w < 0 && errno == EINTR);
    }
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

/* ---- the loop's side ---- */

int gh_publisher_new(const struct gh_publisher_opts *opts, struct gh_publisher **out,
                     struct gh_err *err)
{
    int rc;
    *out = NULL;
    struct gh_publisher *p = calloc(1, sizeof *p);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "publisher: out of memory");
    p->efd = -1;
    if (!opts->url) {
        rc = gh_err_set(err, GH_EINVAL, "publisher: a controller URL is required");
        goto fail;
    }
    if ((rc = gh_ingest_url(opts->url, p->url, sizeof p->url, err)))
        goto fail;
    p->token_file = opts->token_file ? strdup(opts->token_file) : NULL;
    p->ca_file = opts->ca_file ? strdup(opts->ca_file) : NULL;
    if ((opts->token_file && !p->token_file) || (opts->ca_file && !p->ca_file)) {
        rc = gh_err_set(err, GH_ENOMEM, "publisher: out of memory");
        goto fail;
    }
    p->lim_records = opts->batch_records ? opts->batch_records : 1000;
    p->lim_bytes = opts->batch_bytes ? opts->batch_bytes : 1024 * 1024;
    p->linger = opts->linger_ns ? opts->linger_ns : 200 * GH_NS_PER_MS;
    p->timeout = opts->timeout_ns ? opts->timeout_ns : 10 * GH_NS_PER_S;
    p->bmin = opts->backoff_min_ns ? opts->backoff_min_ns : 250 * GH_NS_PER_MS;
    p->bmax = opts->backoff_max_ns ? opts->backoff_max_ns : 30 * GH_NS_PER_S;
    if (p->bmax < p->bmin)
        p->bmax = p->bmin;
    p->clock = opts->clock ? opts->clock : gh_clock_real();
    p->on_reject = opts->on_reject;
    p->on_event = opts->on_event;
    p->cb_ctx = opts->cb_ctx;
    p->rng = (uint64_t)gh_clock_now(p->clock) ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)p;
    if (!p->rng)
        p->rng = 0x9e3779b97f4a7c15ull;
    p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->efd < 0) {
        rc = gh_err_set(err, GH_EIO, "publisher: eventfd: %s", strerror(errno));
        goto fail;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->abort, false);
    if (pthread_create(&p->th, NULL, worker, p) != 0) {
        rc = gh_err_set(err, GH_EIO, "publisher: cannot start the worker thread");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        goto fail;
    }
    p->started = true;
    *out = p;
    return GH_OK;
fail:
    if (p->efd >= 0)
        close(p->efd);
    free(p->token_file);
    free(p->ca_file);
    free(p);
    return rc;
}

int gh_publisher_fd(const struct gh_publisher *p)
{
    return p->efd;
}

bool gh_publisher_busy(const struct gh_publisher *p)
{
    return p->busy;
}

static uint64_t next_rand(struct gh_publisher *p)
{
    uint64_t x = p->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return p->rng = x;
}

static void event(struct gh_publisher *p, enum gh_publisher_event ev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void event(struct gh_publisher *p, enum gh_publisher_event ev, const char *fmt, ...)
{
    if (!p->on_event)
        return;
    char msg[URL_MAX + GH_ERR_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->on_event(p->cb_ctx, ev, msg);
}

/* Line `line` (1-based) of the batch body. */
static const char *batch_line(const struct gh_spool_batch *b, long line, size_t *len)
{
    const char *s = b->body, *end = b->body + b->len;
    for (long i = 1; i < line && s < end; i++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        s = nl ? nl + 1 : end;
    }
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    *len = nl ? (size_t)(nl - s) : (size_t)(end - s);
    return s;
}

static void reject(struct gh_publisher *p, long line, const char *why)
{
    if (!p->on_reject || line < 1 || (size_t)line > p->batch.n)
        return;
    size_t len;
    const char *text = batch_line(&p->batch, line, &len);
    p->on_reject(p->cb_ctx, p->batch.seqs[line - 1], text, len, why);
}

static void failed(struct gh_publisher *p, int64_t now, const char *what, int64_t retry_after_s)
{
    p->st.failures++;
    p->st.consecutive_failures++;
    if (p->attempt < 32)
        p->attempt++;
    int64_t d = p->bmin;
    for (unsigned i = 1; i < p->attempt && d < p->bmax; i++)
        d *= 2;
    if (d > p->bmax)
        d = p->bmax;
    /* Full jitter over the upper half: agents restarted together spread out. */
    int64_t wait = d / 2 + (int64_t)(next_rand(p) % (uint64_t)(d / 2 + 1));
    if (retry_after_s >= 0 && retry_after_s * GH_NS_PER_S > wait)
        wait = retry_after_s * GH_NS_PER_S;
    p->retry_at = now + wait;
    p->resend = true;
    if (!p->failing) {
        p->failing = true;
        event(p, GH_PUB_FAILING, "%s; retrying in %.1f s (backoff up to %.0f s, spool keeps it)",
              what, (double)wait / 1e9, (double)p->bmax / 1e9);
    }
}

static int handle_result(struct gh_publisher *p, struct gh_spool *sp, int64_t now,
                         struct gh_err *err)
{
    struct result res;
    int rc = GH_OK;
    pthread_mutex_lock(&p->mu);
    res = p->res;
    memset(&p->res, 0, sizeof p->res);
    p->done = false;
    pthread_mutex_unlock(&p->mu);
    p->busy = false;
    p->st.last_status = res.status;

    struct gh_ingest_result *sum = NULL;
    if (res.cc == CURLE_OK && (res.status == 200 || res.status == 422)) {
        sum = malloc(sizeof *sum);
        struct gh_err perr;
        if (sum && gh_ingest_reply_decode(res.body ? res.body : "", res.len, sum, &perr)) {
            char what[GH_ERR_MAX + 32];
            snprintf(what, sizeof what, "HTTP %ld with a bad summary (%s)", res.status, perr.msg);
            failed(p, now, what, -1);
            goto out;
        }
        if (!sum) {
            failed(p, now, "out of memory", -1);
            goto out;
        }
        for (size_t i = 0; i < sum->n_errors; i++)
            reject(p, sum->errors[i].line, sum->errors[i].error);
        p->st.ok++;
        p->st.accepted += sum->accepted;
        p->st.duplicates += sum->duplicates;
        p->st.rejected += sum->rejected;
        p->st.last_ok_ns = now;
        rc = gh_spool_ack(sp, &p->batch, err);
        if (p->failing)
            event(p, GH_PUB_RECOVERED, "controller took a batch after %llu failed attempts",
                  (unsigned long long)p->st.consecutive_failures);
        p->failing = false;
        p->attempt = 0;
        p->st.consecutive_failures = 0;
        p->resend = false;
        p->retry_at = 0;
    } else if (res.cc == CURLE_OK && res.status == 413) {
        p->st.retries_413++;
        if (p->batch.n > 1) {
            p->lim_records = p->batch.n / 2;
            if (p->lim_bytes > p->batch.len / 2)
                p->lim_bytes = p->batch.len / 2 > 1 ? p->batch.len / 2 : 1;
            event(p, GH_PUB_SHRUNK, "HTTP 413 for %zu lines / %zu bytes; batches now at most "
                  "%zu lines / %zu bytes", p->batch.n, p->batch.len, p->lim_records, p->lim_bytes);
            p->resend = true;
            p->retry_at = now;
        } else {
            reject(p, 1, "refused as too large (HTTP 413)");
            p->st.rejected++;
            rc = gh_spool_ack(sp, &p->batch, err);
        }
    } else {
        char what[URL_MAX + GH_ERR_MAX + 300];
        if (res.cc != CURLE_OK)
            snprintf(what, sizeof what, "POST %s: %s", p->url, res.error);
        else
            snprintf(what, sizeof what, "POST %s: HTTP %ld%s%.*s", p->url, res.status,
                     res.len ? ": " : "", (int)(res.len > 200 ? 200 : res.len),
                     res.body ? res.body : "");
        /* keep the message on one line */
        for (char *c = what; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        failed(p, now, what, res.retry_after_s);
    }
out:
    free(sum);
    free(res.body);
    gh_spool_batch_clear(&p->batch);
    return rc;
}

int gh_publisher_tick(struct gh_publisher *p, struct gh_spool *sp, int64_t now_ns,
                      struct gh_err *err)
{
    int rc = GH_OK;
    if (p->busy) {
        uint64_t v;
        ssize_t r;
        do
            r = read(p->efd, &v, sizeof v);
        while (r < 0 && errno == EINTR);
        pthread_mutex_lock(&p->mu);
        bool done = p->done;
        pthread_mutex_unlock(&p->mu);
        if (!done)
            return GH_OK;
        rc = handle_result(p, sp, now_ns, err);
        if (rc)
            return rc;
    }
    if (now_ns < p->retry_at)
        return GH_OK;
    struct gh_spool_stats ss;
    gh_spool_stats(sp, &ss);
    if (ss.pending == 0) {
        p->pending_since = 0;
        return GH_OK;
    }
    if (p->pending_since == 0)
        p->pending_since = now_ns;
    if (!p->resend && ss.pending < p->lim_records && now_ns < p->pending_since + p->linger)
        return GH_OK;
    if ((rc = gh_spool_read(sp, p->lim_records, p->lim_bytes, &p->batch, err)))
        return rc;
    if (p->batch.n == 0) {
        /* Pending records the spool holds in memory (its disk is full):
         * come back after another linger, not at once. */
        gh_spool_batch_clear(&p->batch);
        p->pending_since = now_ns;
        return GH_OK;
    }
    p->pending_since = 0;
    p->busy = true;
    p->st.requests++;
    p->st.bytes += p->batch.len;
    pthread_mutex_lock(&p->mu);
    p->has_job = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return GH_OK;
}

int64_t gh_publisher_next_deadline(const struct gh_publisher *p)
{
    if (p->busy)
        return INT64_MAX;
    if (p->resend)
        return p->retry_at;
    if (p->pending_since)
        return p->pending_since + p->linger;
    return INT64_MAX;
}

void gh_publisher_stats(const struct gh_publisher *p, struct gh_publisher_stats *out)
{
    *out = p->st;
}

void gh_publisher_free(struct gh_publisher *p)
{
    if (!p)
        return;
    if (p->started) {
        atomic_store(&p->abort, true);
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->th, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
    free(p->res.body);
    gh_spool_batch_clear(&p->batch);
    if (p->efd >= 0)
        close(p->efd);
    free(p->token_file);
    free(p->ca_file);
    free(p);
}
