/* test_ingest_senders.c - the ingest endpoint's senders and connections
 * over real HTTP (libcurl against the server on 127.0.0.1:0), issue 15
 * #1, #2 and #4: a node sender (an authenticate callback standing in for
 * the TokenReview, which test/integration/controller_agent_auth.sh checks
 * on the real API server) may report only for its node and a line without
 * a node gets it; source "kube" is refused from every sender; an
 * operator's lines are marked injected; duplicates are by node, source,
 * injected and id, so a pre-sent id never makes another sender's (or
 * source's) signal a duplicate; a token the callback
 * cannot check now is 503; with 300 connections of one client trickling
 * headers, an authenticated POST from another address and /healthz still
 * answer, and a connection silent before its headers are in is closed;
 * issue 24 #1: the owner's admit callback refuses a node's line (422,
 * forged) or answers the request 503 "retry", never an operator's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "signal/sigqueue.h"
#include "ingest/server.h"
#include "wire/wire.h"

#define OP_TOKEN "operator-token-1"
#define N1_TOKEN "node-n1-token"
#define BUSY_TOKEN "busy-token"

struct fixture {
    char dir[64];
    char token_file[128];
    struct gh_sigqueue *q;
    struct gh_ingest_server *srv;
    int port;
    char url[128];
};

/* The authenticate callback: N1_TOKEN is node n1's; BUSY_TOKEN cannot be
 * checked now; anything else is refused. */
static int auth(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                struct gh_err *err)
{
    (void)ctx;
    if (len == strlen(N1_TOKEN) && !memcmp(token, N1_TOKEN, len)) {
        out->kind = GH_SENDER_NODE;
        snprintf(out->node, sizeof out->node, "n1");
        return GH_OK;
    }
    if (len == strlen(BUSY_TOKEN) && !memcmp(token, BUSY_TOKEN, len))
        return gh_err_set(err, GH_EAGAIN, "API server unreachable");
    return gh_err_set(err, GH_EINVAL, "not a token of the agents");
}

/* The admit callback (the controller's is control/tenancy.c): job "ml/a"
 * runs on n1, "ml/wait" is not listed yet, anything else has no pod on the
 * sender's node. Counts its calls. */
static atomic_int admit_calls;
static int admit(void *ctx, const struct gh_ingest_sender *who, const struct gh_signal *sig,
                 char *why, size_t cap)
{
    (void)ctx;
    atomic_fetch_add(&admit_calls, 1);
    if (sig->kind != GH_KIND_STEP && sig->kind != GH_KIND_CHECKPOINT)
        return GH_OK;
    if (sig->job && !strcmp(sig->job, "ml/wait")) {
        snprintf(why, cap, "the pods are not listed yet; retry");
        return GH_EAGAIN;
    }
    if (sig->job && !strcmp(sig->job, "ml/a") && !strcmp(who->node, "n1"))
        return GH_OK;
    snprintf(why, cap, "job \"%s\" has no pod on node \"%s\"", sig->job ? sig->job : "",
             who->node);
    return GH_EINVAL;
}

static int setup_opts(void **state, unsigned header_timeout_s)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-senders-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->token_file, sizeof f->token_file, "%s/token", f->dir);
    FILE *tf = fopen(f->token_file, "w");
    assert_non_null(tf);
    fputs(OP_TOKEN "\n", tf);
    fclose(tf);
    f->q = gh_sigqueue_new(10000);
    struct gh_ingest_server_opts o = {0};
    struct gh_err err = {{0}};
    o.listen = "0.0.0.0:0"; /* reachable from 127.0.0.2 as well */
    o.token_file = f->token_file;
    o.authenticate = auth;
    o.header_timeout_s = header_timeout_s;
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    o.admit = admit;
    if (gh_ingest_server_new(&o, &f->srv, &err))
        fail_msg("server: %s", err.msg);
    f->port = gh_ingest_server_port(f->srv);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->port);
    *state = f;
    return 0;
}
static int setup(void **state) { return setup_opts(state, 0); }
static int setup_short_headers(void **state) { return setup_opts(state, 1); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    gh_ingest_server_free(f->srv);
    gh_sigqueue_free(f->q);
    unlink(f->token_file);
    rmdir(f->dir);
    free(f);
    return 0;
}

struct reply {
    long status;
    char body[16384];
    size_t len;
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

/* POST body (GET path when body is NULL) with token (NULL: none). */
static void request(struct fixture *f, const char *path, const char *token, const char *body,
                    struct reply *r)
{
    char url[256], hdr[256];
    memset(r, 0, sizeof *r);
    snprintf(url, sizeof url, "%s%s", f->url, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    if (token) {
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", token);
        hd = curl_slist_append(hd, hdr);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    else
        r->status = -(long)cc;
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
}

static struct gh_ingest_result summary(const struct reply *r)
{
    struct gh_ingest_result res;
    struct gh_err err;
    if (gh_ingest_reply_decode(r->body, r->len, &res, &err))
        fail_msg("reply %ld not a summary: %s (%s)", r->status, err.msg, r->body);
    return res;
}

/* Pops what the sink got: ids and nodes into ids/nodes[0..cap). */
static size_t drain(struct fixture *f, char ids[][96], char nodes[][32], size_t cap)
{
    struct gh_signal s[64];
    size_t total = 0, n;
    while ((n = gh_sigqueue_pop(f->q, s, 64)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (total < cap) {
                if (ids)
                    snprintf(ids[total], 96, "%s", s[i].id ? s[i].id : "");
                if (nodes)
                    snprintf(nodes[total], 32, "%s", s[i].node ? s[i].node : "");
            }
            total++;
            gh_signal_clear(&s[i]);
        }
    return total;
}

#define XID(node, id)                                                                    \
    "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"" node "\",\"source\":\"kmsg\","         \
    "\"kind\":\"xid\",\"code\":79,\"id\":\"" id "\"}"
#define STEP(id)                                                                         \
    "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"telemetry\","          \
    "\"kind\":\"step\",\"job\":\"ml/a\",\"rank\":0,\"step\":1,\"step_ms\":10,\"id\":\"" id "\"}"

static void test_node_sender(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    /* its own node, and a line without a node: taken (the node filled in);
     * another node's: refused with a message naming both */
    request(f, GH_INGEST_PATH, N1_TOKEN,
            XID("n1", "a") "\n" XID("n2", "b") "\n"
            "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
            "\"job\":\"ml/a\",\"step\":5,\"path\":\"/c/5\",\"state\":\"saved\"}",
            &r);
    assert_int_equal(r.status, 422);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 2);
    assert_int_equal(res.rejected, 1);
    assert_int_equal(res.errors[0].line, 2);
    assert_non_null(strstr(res.errors[0].error, "\"n2\" is another node; this sender may "
                                                "report only for node \"n1\""));
    char ids[4][96], nodes[4][32];
    assert_int_equal(drain(f, ids, nodes, 4), 2);
    assert_string_equal(ids[0], "a"); /* ids as sent */
    assert_string_equal(nodes[1], "n1");
    /* an operator may name any node; its lines are injected, a node's not */
    request(f, GH_INGEST_PATH, OP_TOKEN, XID("n2", "b"), &r);
    assert_int_equal(r.status, 200);
    request(f, GH_INGEST_PATH, N1_TOKEN, XID("n1", "c"), &r);
    assert_int_equal(r.status, 200);
    struct gh_signal got[2];
    assert_int_equal(gh_sigqueue_pop(f->q, got, 2), 2);
    assert_string_equal(got[0].id, "b");
    assert_string_equal(got[0].node, "n2");
    assert_true(got[0].injected);
    assert_false(got[1].injected);
    gh_signal_clear(&got[0]);
    gh_signal_clear(&got[1]);

    /* the forged line is counted */
    request(f, "/metrics", NULL, NULL, &r);
    assert_non_null(strstr(r.body, "gpuheal_ingest_signals_forged_total 1\n"));
}

#define STEP_OF(job, id)                                                                 \
    "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"telemetry\",\"kind\":\"step\","       \
    "\"job\":\"" job "\",\"rank\":0,\"step\":1,\"step_ms\":10,\"id\":\"" id "\"}"

/* issue 24 #1: the owner admits a node's lines; a refusal is a forged line
 * (422, counted), "not now" answers the whole request 503 with the reason
 * (none of its lines seen: the same batch is taken when sent again); an
 * operator's lines are not the owner's to admit (injected) */
static void test_admit(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    atomic_store(&admit_calls, 0);
    request(f, GH_INGEST_PATH, N1_TOKEN, STEP_OF("ml/a", "s1") "\n" STEP_OF("ml/b", "s2"), &r);
    assert_int_equal(r.status, 422);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 1);
    assert_int_equal(res.rejected, 1);
    assert_int_equal(res.errors[0].line, 2);
    assert_non_null(strstr(res.errors[0].error, "job \"ml/b\" has no pod on node \"n1\""));
    char ids[4][96];
    assert_int_equal(drain(f, ids, NULL, 4), 1);
    assert_string_equal(ids[0], "s1");
    request(f, "/metrics", NULL, NULL, &r);
    assert_non_null(strstr(r.body, "gpuheal_ingest_signals_forged_total 1\n"));

    /* not now: 503, Retry-After, the reason; nothing taken or remembered */
    request(f, GH_INGEST_PATH, N1_TOKEN, STEP_OF("ml/a", "s3") "\n" STEP_OF("ml/wait", "s4"), &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "line 2: the pods are not listed yet; retry"));
    assert_int_equal(drain(f, NULL, NULL, 0), 0);
    request(f, GH_INGEST_PATH, N1_TOKEN, STEP_OF("ml/a", "s3"), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).duplicates, 0); /* s3 was not remembered by the 503 */
    assert_int_equal(drain(f, NULL, NULL, 0), 1);

    /* the operator's lines: not admitted by the owner, marked injected */
    int before = atomic_load(&admit_calls);
    request(f, GH_INGEST_PATH, OP_TOKEN, STEP_OF("ml/b", "s5"), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atomic_load(&admit_calls), before);
    struct gh_signal got;
    assert_int_equal(gh_sigqueue_pop(f->q, &got, 1), 1);
    assert_true(got.injected);
    gh_signal_clear(&got);
}

static void test_kube_source_refused(void **state)
{
    struct fixture *f = *state;
    const char *tokens[] = {N1_TOKEN, OP_TOKEN};
    for (size_t i = 0; i < 2; i++) {
        struct reply r;
        request(f, GH_INGEST_PATH, tokens[i],
                "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kube\","
                "\"kind\":\"node_not_ready\"}\n"
                "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kube\","
                "\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"p\",\"reason\":\"Error\"}",
                &r);
        assert_int_equal(r.status, 422);
        struct gh_ingest_result res = summary(&r);
        assert_int_equal(res.accepted, 0);
        assert_int_equal(res.rejected, 2);
        assert_non_null(strstr(res.errors[1].error, "only from the controller's own informers"));
    }
    assert_int_equal(drain(f, NULL, NULL, 0), 0);
}

/* issue 24 #6: a node sender's XID line without "node" (a kind that must
 * name its node) was refused with 422; it takes the sender's node, as the
 * docs say. An operator's (no node of its own) is still refused. */
static void test_node_sender_line_without_node(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    static const char line[] = "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kmsg\","
                               "\"kind\":\"xid\",\"code\":79,\"id\":\"nonode-1\"}";
    request(f, GH_INGEST_PATH, N1_TOKEN, line, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).accepted, 1);
    char ids[2][96], nodes[2][32];
    assert_int_equal(drain(f, ids, nodes, 2), 1);
    assert_string_equal(ids[0], "nonode-1");
    assert_string_equal(nodes[0], "n1");
    request(f, GH_INGEST_PATH, OP_TOKEN, line, &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "field \\\"node\\\": missing"));
    assert_int_equal(drain(f, NULL, NULL, 0), 0);
}

/* issue 15 #1: step lines and injected lines with the ids a kernel record
 * will have did not make it a duplicate */
static void test_ids_per_sender_and_source(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    request(f, GH_INGEST_PATH, N1_TOKEN, STEP("n1/boot/950"), &r);
    assert_int_equal(r.status, 200);
    request(f, GH_INGEST_PATH, OP_TOKEN, XID("n1", "n1/boot/951"), &r);
    assert_int_equal(r.status, 200);
    request(f, GH_INGEST_PATH, N1_TOKEN, XID("n1", "n1/boot/950") "\n" XID("n1", "n1/boot/951"),
            &r);
    assert_int_equal(r.status, 200);
    struct gh_ingest_result res = summary(&r);
    assert_int_equal(res.accepted, 2);
    assert_int_equal(res.duplicates, 0);
    /* the node's own retry is a duplicate */
    request(f, GH_INGEST_PATH, N1_TOKEN, XID("n1", "n1/boot/950"), &r);
    assert_int_equal(summary(&r).duplicates, 1);
    assert_int_equal(drain(f, NULL, NULL, 8), 4);
}

static void test_refused_tokens(void **state)
{
    struct fixture *f = *state;
    struct reply r;
    request(f, GH_INGEST_PATH, "made-up", XID("n1", "x"), &r);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "bearer token refused: not a token of the agents"));
    request(f, GH_INGEST_PATH, NULL, XID("n1", "x"), &r);
    assert_int_equal(r.status, 401);
    request(f, GH_INGEST_PATH, BUSY_TOKEN, XID("n1", "x"), &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "cannot be checked now: API server unreachable"));
    assert_int_equal(drain(f, NULL, NULL, 0), 0);
}

/* A TCP connection from src (e.g. "127.0.0.2") to the server; -1 when the
 * connect fails. */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

#define IDLE_CONNS 300

struct trickle {
    int fds[IDLE_CONNS];
    atomic_bool stop;
};

/* One more header line on every connection each 0.5 s (a client keeping
 * its connections alive under any header timeout), until stop. */
static void *trickler(void *arg)
{
    struct trickle *t = arg;
    while (!atomic_load(&t->stop)) {
        for (int i = 0; i < IDLE_CONNS; i++) {
            static const char line[] = "X-Slow: 1\r\n";
            if (t->fds[i] >= 0 && send(t->fds[i], line, sizeof line - 1, MSG_NOSIGNAL) < 0) {
                close(t->fds[i]);
                t->fds[i] = -1;
            }
        }
        usleep(500 * 1000);
    }
    return NULL;
}

/* issue 15 #4: 300 connections of one client, each trickling header lines
 * and never ending its headers, took every connection slot: real POSTs
 * and /healthz waited; now one client gets at most its share of them */
static void test_idle_connections(void **state)
{
    struct fixture *f = *state;
    struct trickle t = {.stop = false};
    int open_ = 0;
    for (int i = 0; i < IDLE_CONNS; i++) {
        t.fds[i] = connect_from("127.0.0.2", f->port);
        if (t.fds[i] < 0)
            continue;
        open_++;
        static const char part[] = "POST /v1/signals HTTP/1.1\r\nHost: x\r\n";
        if (send(t.fds[i], part, sizeof part - 1, MSG_NOSIGNAL) < 0) {
            close(t.fds[i]);
            t.fds[i] = -1;
        }
    }
    assert_true(open_ > 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, trickler, &t), 0);
    struct reply r;
    request(f, "/healthz", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    request(f, GH_INGEST_PATH, N1_TOKEN, XID("n1", "idle-1"), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(summary(&r).accepted, 1);
    assert_int_equal(drain(f, NULL, NULL, 0), 1);
    atomic_store(&t.stop, true);
    pthread_join(th, NULL);
    for (int i = 0; i < IDLE_CONNS; i++)
        if (t.fds[i] >= 0)
            close(t.fds[i]);
}

/* a connection silent before its headers are complete is closed after the
 * header timeout (1 s here), not the 30 s idle timeout */
static void test_header_timeout(void **state)
{
    struct fixture *f = *state;
    int fd = connect_from("127.0.0.1", f->port);
    assert_true(fd >= 0);
    static const char part[] = "POST /v1/signals HTTP/1.1\r\n";
    assert_int_equal(write(fd, part, sizeof part - 1), (ssize_t)(sizeof part - 1));
    /* the server closes it: an end of file (or a reset) well before 30 s */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 20000), 1);
    char buf[256];
    assert_true(read(fd, buf, sizeof buf) <= 0);
    close(fd);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_node_sender, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_source_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_sender_line_without_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_per_sender_and_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_timeout, setup_short_headers, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
