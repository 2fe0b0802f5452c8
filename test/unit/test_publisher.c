/* test_publisher.c - the publisher against the real ingest server over
 * HTTP: a spool backlog delivered in order and acked; a controller that is
 * down, then up (backoff, one "failing" and one "recovered" event, nothing
 * lost); lines the controller rejects reported with their seq and dropped;
 * 413 shrinking the batches; a wrong token retried until it is fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "agent/publisher.h"
#include "agent/spool.h"
#include "ingest/server.h"

#define TOKEN "pub-token"

struct fixture {
    char dir[64], spool_dir[96], token_file[96];
    struct gh_sigqueue *q;
    struct gh_ingest_server *srv;
    int port;
    struct gh_spool *sp;
    /* what the callbacks saw */
    int failing, recovered, shrunk;
    int rejects;
    int next_id;
    uint64_t reject_seqs[16];
    char last_reject[256];
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void server_start(struct fixture *f, const char *listen, size_t body_max)
{
    struct gh_ingest_server_opts o = {0};
    struct gh_err err;
    o.listen = listen;
    o.token_file = f->token_file;
    o.body_max = body_max;
    o.sink = gh_ingest_queue_sink;
    o.sink_ctx = f->q;
    if (gh_ingest_server_new(&o, &f->srv, &err))
        fail_msg("server: %s", err.msg);
    f->port = gh_ingest_server_port(f->srv);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/gh-pub-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->spool_dir, sizeof f->spool_dir, "%s/spool", f->dir);
    snprintf(f->token_file, sizeof f->token_file, "%s/token", f->dir);
    write_file(f->token_file, TOKEN "\n");
    f->q = gh_sigqueue_new(100000);
    struct gh_spool_opts so = {.dir = f->spool_dir, .node = "n1", .boot_id = "b"};
    struct gh_err err;
    assert_int_equal(gh_spool_open(&so, &f->sp, &err), GH_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gh_ingest_server_free(f->srv);
    gh_spool_close(f->sp);
    gh_sigqueue_free(f->q);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void on_reject(void *ctx, uint64_t seq, const char *line, size_t len, const char *error)
{
    struct fixture *f = ctx;
    if (f->rejects < 16)
        f->reject_seqs[f->rejects] = seq;
    f->rejects++;
    snprintf(f->last_reject, sizeof f->last_reject, "%.*s | %s", (int)len, line, error);
}

static void on_event(void *ctx, enum gh_publisher_event ev, const char *detail)
{
    struct fixture *f = ctx;
    (void)detail;
    f->failing += ev == GH_PUB_FAILING;
    f->recovered += ev == GH_PUB_RECOVERED;
    f->shrunk += ev == GH_PUB_SHRUNK;
}

static struct gh_publisher *publisher(struct fixture *f, size_t batch, const char *url)
{
    char buf[128];
    if (!url) {
        snprintf(buf, sizeof buf, "http://127.0.0.1:%d", f->port);
        url = buf;
    }
    struct gh_publisher_opts o = {
        .url = url, .token_file = f->token_file, .batch_records = batch,
        .linger_ns = 10 * GH_NS_PER_MS, .timeout_ns = 5 * GH_NS_PER_S,
        .backoff_min_ns = 20 * GH_NS_PER_MS, .backoff_max_ns = 200 * GH_NS_PER_MS,
        .on_reject = on_reject, .on_event = on_event, .cb_ctx = f};
    struct gh_publisher *p = NULL;
    struct gh_err err;
    if (gh_publisher_new(&o, &p, &err))
        fail_msg("publisher: %s", err.msg);
    return p;
}

static int64_t now_ns(void)
{
    return gh_clock_now(gh_clock_real());
}

static uint64_t pending(struct fixture *f)
{
    struct gh_spool_stats st;
    gh_spool_stats(f->sp, &st);
    return st.pending;
}

/* Runs the loop until the spool is empty or secs pass; returns pending. */
static uint64_t run(struct fixture *f, struct gh_publisher *p, double secs)
{
    int64_t end = now_ns() + (int64_t)(secs * 1e9);
    struct gh_err err;
    for (;;) {
        int64_t now = now_ns();
        assert_int_equal(gh_publisher_tick(p, f->sp, now, &err), GH_OK);
        if ((pending(f) == 0 && !gh_publisher_busy(p)) || now >= end)
            break;
        int64_t dl = gh_publisher_next_deadline(p);
        int64_t wait = dl == INT64_MAX ? 50 * GH_NS_PER_MS : dl - now;
        if (wait > 50 * GH_NS_PER_MS)
            wait = 50 * GH_NS_PER_MS;
        if (wait < 0)
            wait = 0;
        struct pollfd pfd = {.fd = gh_publisher_fd(p), .events = POLLIN};
        poll(&pfd, 1, (int)(wait / GH_NS_PER_MS) + 1);
    }
    return pending(f);
}

static void append(struct fixture *f, int n)
{
    for (int j = 0; j < n; j++) {
        int i = f->next_id++;
        char line[256];
        int k = snprintf(line, sizeof line,
                         "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"nvml\","
                         "\"kind\":\"thermal\",\"celsius\":%d,\"throttled\":false,"
                         "\"id\":\"n1/b/t%d-%d\"}", 50 + i % 40, f->port, i);
        assert_int_equal(gh_spool_append_line(f->sp, line, (size_t)k, NULL, NULL), GH_OK);
    }
}

static size_t drain(struct fixture *f, char (*ids)[64], size_t cap)
{
    struct gh_signal s[64];
    size_t total = 0, n;
    while ((n = gh_sigqueue_pop(f->q, s, 64)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (ids && total < cap)
                snprintf(ids[total], 64, "%s", s[i].id);
            total++;
            gh_signal_clear(&s[i]);
        }
    return total;
}

static void test_backlog_delivered_in_order(void **state)
{
    struct fixture *f = *state;
    server_start(f, "127.0.0.1:0", 0);
    append(f, 2500);
    struct gh_publisher *p = publisher(f, 1000, NULL);
    assert_int_equal(run(f, p, 20), 0);
    struct gh_publisher_stats st;
    gh_publisher_stats(p, &st);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.accepted, 2500);
    assert_int_equal(st.failures, 0);
    static char ids[2500][64];
    assert_int_equal(drain(f, ids, 2500), 2500);
    for (int i = 0; i < 2500; i++) {
        char want[64];
        snprintf(want, sizeof want, "n1/b/t%d-%d", f->port, i);
        assert_string_equal(ids[i], want);
    }
    /* Small trickles go out after the linger, not one per line. */
    append(f, 3);
    assert_int_equal(run(f, p, 5), 0);
    gh_publisher_stats(p, &st);
    assert_int_equal(st.requests, 4);
    assert_int_equal(drain(f, NULL, 0), 3);
    gh_publisher_free(p);
}

static void test_down_then_up(void **state)
{
    struct fixture *f = *state;
    /* Find a free port, then leave it closed. */
    server_start(f, "127.0.0.1:0", 0);
    int port = f->port;
    gh_ingest_server_free(f->srv);
    f->srv = NULL;
    append(f, 300);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    struct gh_publisher *p = publisher(f, 100, url);
    assert_int_equal(run(f, p, 1.0), 300);
    struct gh_publisher_stats st;
    gh_publisher_stats(p, &st);
    assert_true(st.failures >= 3);
    assert_int_equal(st.accepted, 0);
    assert_int_equal(f->failing, 1);
    /* Backoff: far fewer tries than the loop had chances for. */
    assert_true(st.failures <= 30);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    server_start(f, listen, 0);
    assert_int_equal(run(f, p, 20), 0);
    assert_int_equal(f->recovered, 1);
    assert_int_equal(drain(f, NULL, 0), 300);
    gh_publisher_free(p);
}

static void test_rejected_lines_dropped(void **state)
{
    struct fixture *f = *state;
    server_start(f, "127.0.0.1:0", 0);
    append(f, 2);
    uint64_t bad1, bad2;
    const char *b1 = "{\"ts\":\"nope\",\"source\":\"kmsg\",\"kind\":\"xid\"}";
    const char *b2 = "not json at all";
    assert_int_equal(gh_spool_append_line(f->sp, b1, strlen(b1), &bad1, NULL), GH_OK);
    append(f, 1);
    assert_int_equal(gh_spool_append_line(f->sp, b2, strlen(b2), &bad2, NULL), GH_OK);
    struct gh_publisher *p = publisher(f, 100, NULL);
    assert_int_equal(run(f, p, 10), 0);
    assert_int_equal(f->rejects, 2);
    assert_int_equal(f->reject_seqs[0], bad1);
    assert_int_equal(f->reject_seqs[1], bad2);
    assert_non_null(strstr(f->last_reject, "not json at all | invalid JSON"));
    struct gh_publisher_stats st;
    gh_publisher_stats(p, &st);
    assert_int_equal(st.rejected, 2);
    assert_int_equal(st.accepted, 3);
    assert_int_equal(st.failures, 0);
    assert_int_equal(drain(f, NULL, 0), 3);
    gh_publisher_free(p);
}

static void test_413_shrinks(void **state)
{
    struct fixture *f = *state;
    server_start(f, "127.0.0.1:0", 4096);
    append(f, 200); /* ~150 bytes a line */
    struct gh_publisher *p = publisher(f, 1000, NULL);
    assert_int_equal(run(f, p, 20), 0);
    assert_true(f->shrunk >= 2);
    struct gh_publisher_stats st;
    gh_publisher_stats(p, &st);
    assert_int_equal(st.accepted, 200);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(drain(f, NULL, 0), 200);
    gh_publisher_free(p);
}

static void test_wrong_token_retried(void **state)
{
    struct fixture *f = *state;
    server_start(f, "127.0.0.1:0", 0);
    append(f, 10);
    char other[128];
    snprintf(other, sizeof other, "%s/agent-token", f->dir);
    write_file(other, "wrong\n");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    struct gh_publisher_opts o = {
        .url = url, .token_file = other, .linger_ns = GH_NS_PER_MS,
        .backoff_min_ns = 20 * GH_NS_PER_MS, .backoff_max_ns = 100 * GH_NS_PER_MS,
        .on_event = on_event, .cb_ctx = f};
    struct gh_publisher *p = NULL;
    assert_int_equal(gh_publisher_new(&o, &p, NULL), GH_OK);
    assert_int_equal(run(f, p, 0.5), 10);
    struct gh_publisher_stats st;
    gh_publisher_stats(p, &st);
    assert_int_equal(st.last_status, 401);
    assert_int_equal(f->failing, 1);
    /* The token file is re-read for every request. */
    write_file(other, TOKEN "\n");
    assert_int_equal(run(f, p, 10), 0);
    assert_int_equal(drain(f, NULL, 0), 10);
    gh_publisher_free(p);
    /* Bad URL. */
    o.url = "ftp://x";
    assert_int_equal(gh_publisher_new(&o, &p, NULL), GH_EINVAL);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backlog_delivered_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down_then_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejected_lines_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_413_shrinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_token_retried, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
