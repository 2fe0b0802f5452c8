/* test_ingest.c - the ingest endpoint over real HTTP (libcurl against the
 * server on 127.0.0.1:0): bearer tokens (missing, wrong, rotated), body,
 * line-length and line-count limits, bad lines reported with their line
 * numbers while the good lines of the same body are taken, duplicates
 * dropped by id (within a body, across bodies, and preloaded), a full
 * queue answered 503 without poisoning the duplicate set, /healthz,
 * /metrics, TLS; and the pieces: the dedup set, the wire helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ingest/dedup.h"
#include "signal/sigqueue.h"
#include "ingest/server.h"
#include "wire/token.h"
#include "wire/wire.h"

#define TOKEN "s3cr3t-token-abc"

struct fixture {
    char dir[64];
    char token_file[128];
    struct gh_sigqueue *q;
    struct gh_ingest_server *srv;
    char url[128];
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int start(struct fixture *f, size_t body_max, size_t max_lines, size_t qcap)
{
    struct gh_ingest_server_opts o = {0};
    struct gh_err err = {{0}};
    f->q = gh_sigqueue_new(qcap);
    assert_non_null(f->q);
    o.listen = "127.0.0.1:0";
    o.token_file = f->token_file;
    o.body_max = body_max;
    o.limits.max_lines = max_lines;
    o.dedup_capacity = 1000;
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    int rc = gh_ingest_server_new(&o, &f->srv, &err);
    if (rc)
        fail_msg("server: %s", err.msg);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", gh_ingest_server_port(f->srv));
    return 0;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-ingest-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->token_file, sizeof f->token_file, "%s/token", f->dir);
    write_file(f->token_file, "# the agents' token\n" TOKEN "\n");
    start(f, 64 * 1024, 100, 1000);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gh_ingest_server_free(f->srv);
    gh_sigqueue_free(f->q);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

struct reply {
    long status;
    char body[65536];
    size_t len;
    char retry_after[16];
};

static size_t on_body(char *d, size_t s, size_t n, void *ud)
{
    struct reply *r = ud;
    size_t k = s * n;
    if (r->len + k < sizeof r->body) {
        memcpy(r->body + r->len, d, k);
        r->len += k;
        r->body[r->len] = '\0';
    }
    return k;
}

static size_t on_hdr(char *d, size_t s, size_t n, void *ud)
{
    struct reply *r = ud;
    if (s * n > 13 && strncasecmp(d, "Retry-After: ", 13) == 0)
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)(s * n - 13 - 2), d + 13);
    return s * n;
}

/* POSTs (or GETs when body is NULL) url+path; token NULL = no header.
 * chunked: no Content-Length. */
static void request(const char *base, const char *path, const char *token, const char *body,
                    size_t len, bool chunked, const char *cafile, struct reply *r)
{
    char url[256], auth[256];
    memset(r, 0, sizeof *r);
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hd = curl_slist_append(hd, auth);
    }
    if (chunked)
        hd = curl_slist_append(hd, "Transfer-Encoding: chunked");
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        if (!chunked)
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_hdr);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
    if (cafile)
        curl_easy_setopt(h, CURLOPT_CAINFO, cafile);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    else
        r->status = -(long)cc;
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
}

static void post(struct fixture *f, const char *token, const char *body, struct reply *r)
{
    request(f->url, GH_INGEST_PATH, token, body, strlen(body), false, NULL, r);
}

static struct gh_ingest_result summary(const struct reply *r)
{
    struct gh_ingest_result res;
    struct gh_err err;
    if (gh_ingest_reply_decode(r->body, r->len, &res, &err))
        fail_msg("reply %ld not a summary: %s (%s)", r->status, err.msg, r->body);
    return res;
}

static size_t drain(struct fixture *f, char ids[][64], size_t cap)
{
    struct gh_signal s[64];
    size_t total = 0, n;
    while ((n = gh_sigqueue_pop(f->q, s, 64)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (ids && total < cap)
                snprintf(ids[total], 64, "%s", s[i].id ? s[i].id : "");
            total++;
            gh_signal_clear(&s[i]);
        }
    return total;
}

#define SIG(id) "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kmsg\"," \
                "\"kind\":\"xid\",\"code\":79,\"id\":\"" id "\"}"

static void test_accepts_good_lines(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    post(f, TOKEN, SIG("a1") "\n" SIG("a2") "\n\n" SIG("a3"), &r);
    assert_int_equal(r.status, 200);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 3);
    assert_int_equal(res.rejected, 0);
    char ids[8][64];
    assert_int_equal(drain(f, ids, 8), 3);
    assert_string_equal(ids[0], "a1");
    assert_string_equal(ids[2], "a3");
    /* No id: taken, never a duplicate. */
    const char *noid = "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kmsg\","
                       "\"kind\":\"gpu_lost\"}\n";
    post(f, TOKEN, noid, &r);
    post(f, TOKEN, noid, &r);
    assert_int_equal(summary(&r).accepted, 1);
    assert_int_equal(drain(f, NULL, 0), 2);
}

static void test_tokens(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    post(f, NULL, SIG("t1"), &r);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "bearer token"));
    post(f, "s3cr3t-token-abd", SIG("t1"), &r);
    assert_int_equal(r.status, 401);
    post(f, "s3cr3t", SIG("t1"), &r);
    assert_int_equal(r.status, 401);
    post(f, TOKEN "x", SIG("t1"), &r);
    assert_int_equal(r.status, 401);
    assert_int_equal(drain(f, NULL, 0), 0);
    /* A 401 is answered before a large body is read. */
    char *big = malloc(60000);
    memset(big, ' ', 59999);
    big[59999] = '\0';
    post(f, "wrong", big, &r);
    assert_int_equal(r.status, 401);
    free(big);
    /* Rotation: a second token is added, then the first removed; the file
     * is re-read when it changes (checked at most once a second). */
    sleep(1);
    write_file(f->token_file, TOKEN "\nnew-token-2\n");
    usleep(1100 * 1000);
    post(f, "new-token-2", SIG("t2"), &r);
    assert_int_equal(r.status, 200);
    post(f, TOKEN, SIG("t3"), &r);
    assert_int_equal(r.status, 200);
    write_file(f->token_file, "new-token-2\n");
    usleep(1100 * 1000);
    post(f, TOKEN, SIG("t4"), &r);
    assert_int_equal(r.status, 401);
    /* A broken file keeps the tokens we had. */
    write_file(f->token_file, "\n# nothing\n");
    usleep(1100 * 1000);
    post(f, "new-token-2", SIG("t5"), &r);
    assert_int_equal(r.status, 200);
    struct gh_ingest_server_stats st;
    gh_ingest_server_stats(f->srv, &st);
    assert_true(st.unauthorized >= 6);
    assert_true(st.token_reload_errors >= 1);
    drain(f, NULL, 0);
}

static void test_bad_lines_keep_good_ones(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    char body[8192];
    char longline[4200];
    memset(longline, 'x', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    snprintf(body, sizeof body,
             SIG("b1") "\n"
             "{not json\n"
             SIG("b2") "\n"
             "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kmsg\",\"kind\":\"xid\"}\n"
             "\n"
             "{\"scenario\":\"x\"}\n"
             SIG("b3") "\n"
             "[1,2]\n");
    post(f, TOKEN, body, &r);
    assert_int_equal(r.status, 422);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 3);
    assert_int_equal(res.rejected, 4);
    assert_int_equal(res.n_errors, 4);
    assert_int_equal(res.errors[0].line, 2);
    assert_non_null(strstr(res.errors[0].error, "invalid JSON"));
    assert_int_equal(res.errors[1].line, 4);
    assert_string_equal(res.errors[1].error, "field \"code\": missing");
    assert_int_equal(res.errors[2].line, 6);
    assert_int_equal(res.errors[3].line, 8);
    assert_int_equal(drain(f, NULL, 0), 3);
    (void)longline;
}

static void test_limits(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    /* Body over 64 KiB with a Content-Length: refused before reading. */
    size_t n = 70000;
    char *big = malloc(n + 1);
    memset(big, '\n', n);
    big[n] = '\0';
    post(f, TOKEN, big, &r);
    assert_int_equal(r.status, 413);
    /* The same without a Content-Length (chunked): refused when it passes. */
    request(f->url, GH_INGEST_PATH, TOKEN, big, n, true, NULL, &r);
    assert_int_equal(r.status, 413);
    free(big);
    /* Too many lines (limit 100). */
    char *many = malloc(101 * 2 + 1);
    for (int i = 0; i < 101; i++) {
        many[2 * i] = ' ';
        many[2 * i + 1] = '\n';
    }
    many[202] = '\0';
    post(f, TOKEN, many, &r);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "101 lines"));
    free(many);
    /* A line over the codec's cap is one rejected line. */
    size_t ll = 64 * 1024 + 10;
    gh_ingest_server_free(f->srv);
    gh_sigqueue_free(f->q);
    start(f, 1 << 20, 100, 1000);
    char *body = malloc(ll + 200);
    int k = snprintf(body, 200, "%s\n", SIG("l1"));
    memset(body + k, 'y', ll);
    snprintf(body + k + ll, 200 - 0, "\n%s\n", SIG("l2"));
    post(f, TOKEN, body, &r);
    free(body);
    assert_int_equal(r.status, 422);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 2);
    assert_int_equal(res.rejected, 1);
    assert_int_equal(res.errors[0].line, 2);
    assert_non_null(strstr(res.errors[0].error, "longer than"));
    drain(f, NULL, 0);
}

static void test_duplicates(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    post(f, TOKEN, SIG("d1") "\n" SIG("d2") "\n" SIG("d1"), &r);
    assert_int_equal(r.status, 200);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 2);
    assert_int_equal(res.duplicates, 1);
    post(f, TOKEN, SIG("d2") "\n" SIG("d3"), &r);
    res = summary(&r);
    assert_int_equal(res.accepted, 1);
    assert_int_equal(res.duplicates, 1);
    /* as the sink got it: an operator token's lines are injected */
    struct gh_signal d9;
    gh_signal_init(&d9);
    d9.source = GH_SRC_KMSG;
    d9.injected = true;
    d9.node = "n1";
    d9.id = "d9";
    gh_ingest_server_remember(f->srv, &d9);
    post(f, TOKEN, SIG("d9"), &r);
    assert_int_equal(summary(&r).duplicates, 1);
    assert_int_equal(drain(f, NULL, 0), 3);
}

static void test_queue_full_is_503(void **state)
{
    struct fixture *f = *state;
    gh_ingest_server_free(f->srv);
    gh_sigqueue_free(f->q);
    start(f, 1 << 20, 100, 3);
    struct reply r;
    post(f, TOKEN, SIG("q1") "\n" SIG("q2"), &r);
    assert_int_equal(r.status, 200);
    post(f, TOKEN, SIG("q3") "\n" SIG("q4"), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.retry_after, "1");
    /* Nothing of the refused body was remembered: after draining, the
     * retry is taken in full. */
    assert_int_equal(drain(f, NULL, 0), 2);
    post(f, TOKEN, SIG("q3") "\n" SIG("q4"), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).accepted, 2);
    assert_int_equal(drain(f, NULL, 0), 2);
}

static void test_health_metrics_and_errors(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    request(f->url, "/healthz", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    post(f, TOKEN, SIG("m1"), &r);
    request(f->url, "/metrics", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "gpuheal_ingest_signals_total{result=\"accepted\"} 1\n"));
    assert_non_null(strstr(r.body, "# TYPE gpuheal_ingest_requests_total counter"));
    request(f->url, "/nope", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 404);
    request(f->url, GH_INGEST_PATH, TOKEN, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 405);
    drain(f, NULL, 0);
}

static bool flag_ready(void *ctx) { return *(bool *)ctx; }

/* A standby (ready() false) refuses signals with 503 and remembers none of
 * them; /readyz follows ready(); the leader takes the same batch later. */
static void test_standby_refuses(void **state)
{
    struct fixture *f = *state;
    gh_ingest_server_free(f->srv);
    gh_sigqueue_free(f->q);
    f->q = gh_sigqueue_new(100);
    assert_non_null(f->q);
    bool leading = false;
    struct gh_ingest_server_opts o = {0};
    struct gh_err err = {{0}};
    o.listen = "127.0.0.1:0";
    o.token_file = f->token_file;
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    o.ready = flag_ready;
    o.ready_ctx = &leading;
    assert_int_equal(gh_ingest_server_new(&o, &f->srv, &err), GH_OK);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", gh_ingest_server_port(f->srv));
    struct reply r;
    post(f, TOKEN, SIG("s1") "\n" SIG("s2"), &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.retry_after, "1");
    assert_non_null(strstr(r.body, "not the leader"));
    request(f->url, "/readyz", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 503);
    request(f->url, "/healthz", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    post(f, NULL, SIG("s1"), &r); /* the token is still checked first */
    assert_int_equal(r.status, 401);
    assert_int_equal(drain(f, NULL, 0), 0);
    leading = true;
    request(f->url, "/readyz", NULL, NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    post(f, TOKEN, SIG("s1") "\n" SIG("s2"), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).accepted, 2);
    assert_int_equal(drain(f, NULL, 0), 2);
}

/* A self-signed certificate for 127.0.0.1, written as PEM files. */
static void make_cert(const char *cert_path, const char *key_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, "IP:127.0.0.1");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    FILE *cf = fopen(cert_path, "w"), *kf = fopen(key_path, "w");
    PEM_write_X509(cf, x);
    PEM_write_PrivateKey(kf, key, NULL, NULL, 0, NULL, NULL);
    fclose(cf);
    fclose(kf);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void test_tls(void **state)
{
    struct fixture *f = *state;
    char cert[128], key[128];
    snprintf(cert, sizeof cert, "%s/cert.pem", f->dir);
    snprintf(key, sizeof key, "%s/key.pem", f->dir);
    make_cert(cert, key);
    struct gh_ingest_server_opts o = {0};
    struct gh_ingest_server *srv = NULL;
    struct gh_err err;
    o.listen = "127.0.0.1:0";
    o.token_file = f->token_file;
    o.tls_cert = cert;
    o.tls_key = key;
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    int rc = gh_ingest_server_new(&o, &srv, &err);
    if (rc == GH_EUNSUPPORTED) {
        skip();
    }
    if (rc)
        fail_msg("tls server: %s", err.msg);
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", gh_ingest_server_port(srv));
    struct reply r;
    const char *body = SIG("tls1");
    request(url, GH_INGEST_PATH, TOKEN, body, strlen(body), false, cert, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).accepted, 1);
    /* Without trusting the certificate, curl refuses. */
    request(url, GH_INGEST_PATH, TOKEN, body, strlen(body), false, "/dev/null", &r);
    assert_true(r.status < 0);
    gh_ingest_server_free(srv);
    assert_int_equal(drain(f, NULL, 0), 1);
    /* Bad options. */
    o.tls_key = NULL;
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EINVAL);
    o.tls_key = f->token_file; /* not a key */
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EINVAL);
}

static void test_server_options(void **state)
{
    struct fixture *f = *state;
    struct gh_ingest_server_opts o = {0};
    struct gh_ingest_server *srv = NULL;
    struct gh_err err;
    o.listen = "127.0.0.1:0";
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EINVAL); /* no token */
    o.token_file = "/nonexistent/token";
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EINVAL);
    o.token_file = f->token_file;
    o.listen = "127.0.0.1";
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EINVAL);
    char inuse[64];
    snprintf(inuse, sizeof inuse, "127.0.0.1:%d", gh_ingest_server_port(f->srv));
    o.listen = inuse;
    assert_int_equal(gh_ingest_server_new(&o, &srv, &err), GH_EIO);
    assert_null(srv);
}

static void test_dedup_set(void **state)
{
    (void)state;
    struct gh_dedup *d = gh_dedup_new(100);
    struct gh_dedup_key k;
    char id[32];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof id, "id-%d", i);
        gh_dedup_key(id, strlen(id), &k);
        assert_true(gh_dedup_insert(d, &k));
        assert_false(gh_dedup_insert(d, &k));
    }
    assert_int_equal(gh_dedup_size(d), 100);
    /* Full: the oldest goes first. */
    gh_dedup_key("id-new", 6, &k);
    assert_true(gh_dedup_insert(d, &k));
    gh_dedup_key("id-0", 4, &k);
    assert_false(gh_dedup_contains(d, &k));
    gh_dedup_key("id-1", 4, &k);
    assert_true(gh_dedup_contains(d, &k));
    assert_true(gh_dedup_remove(d, &k));
    assert_false(gh_dedup_contains(d, &k));
    assert_false(gh_dedup_remove(d, &k));
    /* Churn far past the capacity: exactly the newest 100 stay. */
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof id, "c-%d", i);
        gh_dedup_key(id, strlen(id), &k);
        gh_dedup_insert(d, &k);
        if (i % 7 == 0) {
            assert_true(gh_dedup_remove(d, &k));
            assert_true(gh_dedup_insert(d, &k));
        }
    }
    /* A removal leaves a hole in the ring, so fewer than 100 may stay,
     * but always the newest, and the index agrees with the ring. */
    int present = 0;
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof id, "c-%d", i);
        gh_dedup_key(id, strlen(id), &k);
        bool in = gh_dedup_contains(d, &k);
        present += in;
        if (i >= 4920)
            assert_true(in);
        if (i < 4800)
            assert_false(in);
    }
    assert_int_equal(present, (int)gh_dedup_size(d));
    assert_true(present >= 80 && present <= 100);
    gh_dedup_free(d);
    assert_null(gh_dedup_new(0));
    gh_dedup_free(NULL);
}

static void test_wire_helpers(void **state)
{
    (void)state;
    char out[128];
    struct gh_err err;
    assert_int_equal(gh_ingest_url("http://c:8080", out, sizeof out, &err), GH_OK);
    assert_string_equal(out, "http://c:8080/v1/signals");
    assert_int_equal(gh_ingest_url("https://c/", out, sizeof out, &err), GH_OK);
    assert_string_equal(out, "https://c/v1/signals");
    assert_int_equal(gh_ingest_url("http://c/custom/in", out, sizeof out, &err), GH_OK);
    assert_string_equal(out, "http://c/custom/in");
    assert_int_equal(gh_ingest_url("ftp://c", out, sizeof out, &err), GH_EINVAL);
    assert_int_equal(gh_ingest_url("http://", out, sizeof out, &err), GH_EINVAL);
    assert_int_equal(gh_ingest_url("http://c", out, 8, &err), GH_ELIMIT);

    struct gh_ingest_result res = {0}, back;
    res.accepted = 5;
    res.duplicates = 2;
    gh_ingest_result_add_error(&res, 3, "bad\nthing");
    char *text = gh_ingest_reply_encode(&res);
    assert_non_null(text);
    assert_int_equal(gh_ingest_reply_decode(text, strlen(text), &back, &err), GH_OK);
    assert_int_equal(back.accepted, 5);
    assert_int_equal(back.duplicates, 2);
    assert_int_equal(back.rejected, 1);
    assert_int_equal(back.errors[0].line, 3);
    assert_string_equal(back.errors[0].error, "bad thing");
    free(text);
    for (int i = 0; i < 100; i++)
        gh_ingest_result_add_error(&res, i, "x");
    assert_int_equal(res.n_errors, GH_INGEST_ERRORS_MAX);
    assert_true(res.errors_truncated);
    assert_int_equal(gh_ingest_reply_decode("[]", 2, &back, &err), GH_EINVAL);
    assert_int_equal(gh_ingest_count_lines("a\nb", 3), 2);
    assert_int_equal(gh_ingest_count_lines("a\nb\n", 4), 2);
    assert_int_equal(gh_ingest_count_lines("", 0), 0);

    /* Token files. */
    char path[] = "/tmp/gh-token-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "  tok-1  \n#c\ntok-2\n");
    struct gh_token_set set;
    assert_int_equal(gh_token_set_load(path, &set, &err), GH_OK);
    assert_int_equal(set.n, 2);
    assert_true(gh_token_set_check_header(&set, "Bearer tok-1"));
    assert_true(gh_token_set_check_header(&set, "bearer tok-2"));
    assert_false(gh_token_set_check_header(&set, "Basic tok-1"));
    assert_false(gh_token_set_check_header(&set, "Bearer "));
    assert_false(gh_token_set_check_header(&set, NULL));
    char tok[16];
    assert_int_equal(gh_token_read(path, tok, sizeof tok, &err), GH_OK);
    assert_string_equal(tok, "tok-1");
    assert_int_equal(gh_token_read(path, tok, 3, &err), GH_ELIMIT);
    write_file(path, "has space inside\n");
    assert_int_equal(gh_token_set_load(path, &set, &err), GH_EINVAL);
    assert_null(strstr(err.msg, "space inside"));
    unlink(path);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accepts_good_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_lines_keep_good_ones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_full_is_503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_metrics_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_standby_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_options, setup, teardown),
        cmocka_unit_test(test_dedup_set),
        cmocka_unit_test(test_wire_helpers),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
