/* test_agent_telemetry.c - unit tests of the telemetry socket: valid lines
 * are emitted with the node filled and per-rank records kept; malformed,
 * wrong-kind, oversized and binary lines are rejected with reasons without
 * costing their neighbours; partial lines across reads; many concurrent
 * clients; stale and live socket files; step coalescing; a round trip
 * from the Python reporter (python/gpuheal_reporter) when python3 exists;
 * and who may write (issue 24): every socket test writes as a pod's process
 * through an injected proc root (so they hold under any uid), a pod's UID
 * is stamped over the line's own claim, and a writer in no pod and not
 * root, or one that cannot be identified, has its lines refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/telemetry.h"
#include "signal/signal_json.h"

#define MAX_SIGS 64

struct recorder {
    pthread_mutex_t mu;
    struct gh_signal sigs[MAX_SIGS];
    int n;          /* kept */
    long total;     /* all emitted */
    int bad_json;   /* emitted signals the codec refuses to encode */
};

static void record(void *ctx, const struct gh_signal *s)
{
    struct recorder *r = ctx;
    char *json = NULL;
    pthread_mutex_lock(&r->mu);
    if (gh_signal_encode(s, &json, NULL) != GH_OK)
        r->bad_json++;
    free(json);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], s, NULL) == GH_OK)
        r->n++;
    r->total++;
    pthread_mutex_unlock(&r->mu);
}

static struct recorder *recorder_new(void)
{
    struct recorder *r = calloc(1, sizeof *r);
    assert_non_null(r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void recorder_free(struct recorder *r)
{
    for (int i = 0; i < r->n; i++)
        gh_signal_clear(&r->sigs[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static long recorded(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    long n = r->total;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int64_t fake_now = 1800000000LL * GH_NS_PER_S;
static int64_t fake_clock_now(void *ctx)
{
    (void)ctx;
    return fake_now;
}
static const struct gh_clock fake_clock = {fake_clock_now, NULL};

#define STEP(rank, step)                                                                      \
    "{\"ts\":\"2026-11-29T07:00:01.000000Z\",\"source\":\"telemetry\",\"kind\":\"step\","   \
    "\"job\":\"ml/llm-70b\",\"rank\":" #rank ",\"step\":" #step ",\"step_ms\":1432.5,"      \
    "\"comm_ms\":210.1,\"loss\":2.31}\n"

static struct gh_telemetry *new_ingest(struct recorder *r, size_t line_max)
{
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = NULL;
    struct gh_err err;
    gh_telemetry_opts_init(&o);
    o.socket_path = "";
    o.node = "gpu-03";
    o.line_max = line_max;
    o.emit = record;
    o.emit_ctx = r;
    int rc = gh_telemetry_new(&o, &t, &err);
    if (rc)
        fail_msg("gh_telemetry_new: %s", err.msg);
    return t;
}

static void feed(struct gh_telemetry *t, const char *s)
{
    gh_telemetry_ingest(t, s, strlen(s), false);
}

static void test_valid_lines(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_ingest(r, 0);
    feed(t, STEP(45, 1200));
    feed(t, "{\"ts\":\"2026-11-29T07:00:02.500000Z\",\"source\":\"telemetry\",\"kind\":"
            "\"checkpoint\",\"job\":\"ml/llm-70b\",\"step\":1000,\"path\":\"s3://c/1000\","
            "\"state\":\"saved\"}\n");
    feed(t, "{\"ts\":\"2026-11-29T07:00:03Z\",\"node\":\"gpu-99\",\"source\":\"telemetry\","
            "\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":5,\"rank\":1,\"replica\":0,"
            "\"value\":\"deadBEEF\"}\n");
    feed(t, "\n  \r\n");
    feed(t, STEP(45, 1201));

    /* the gpu-99 line is refused: a rank reports for this agent's node */
    assert_int_equal(r->n, 3);
    assert_int_equal(r->bad_json, 0);
    assert_int_equal(r->sigs[0].kind, GH_KIND_STEP);
    assert_string_equal(r->sigs[0].node, "gpu-03"); /* filled */
    assert_int_equal(r->sigs[0].rank, 45);
    assert_int_equal(r->sigs[1].kind, GH_KIND_CHECKPOINT);
    assert_string_equal(r->sigs[1].path, "s3://c/1000");
    assert_int_equal(r->sigs[2].kind, GH_KIND_STEP);

    struct gh_telemetry_rank rk;
    assert_int_equal(gh_telemetry_rank(t, "ml/llm-70b", 45, &rk), GH_OK);
    assert_int_equal(rk.step, 1201);
    assert_true(rk.step_ms == 1432.5);
    assert_true(rk.has_comm_ms);
    assert_int_equal(rk.lines, 2);
    assert_string_equal(rk.node, "gpu-03");
    assert_int_equal(gh_telemetry_rank(t, "ml/llm-70b", 44, &rk), GH_ENOTFOUND);

    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.lines, 4);
    assert_int_equal(st.accepted, 3);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(st.ranks, 1);
    gh_telemetry_free(t);
    recorder_free(r);
}

static bool has_reject(struct gh_telemetry *t, const char *needle)
{
    struct gh_telemetry_reject rj[GH_TELEMETRY_REJECTS_KEEP];
    size_t n = gh_telemetry_rejects(t, rj, GH_TELEMETRY_REJECTS_KEEP);
    for (size_t i = 0; i < n; i++)
        if (strstr(rj[i].reason, needle))
            return true;
    return false;
}

static void test_malformed(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_ingest(r, 0);
    feed(t, "not json\n");
    feed(t, STEP(1, 10));
    feed(t, "[1,2]\n");
    feed(t, "{\"ts\":\"2026-11-29T07:00:01Z\",\"node\":\"n\",\"source\":\"kmsg\",\"kind\":\"xid\","
            "\"code\":79}\n");
    feed(t, "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\",\"kind\":\"xid\","
            "\"code\":79}\n");
    feed(t, "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\",\"kind\":\"step\","
            "\"job\":\"j\",\"rank\":1,\"step\":2}\n"); /* no step_ms */
    feed(t, "{\"ts\":\"yesterday\",\"source\":\"telemetry\",\"kind\":\"step\"}\n");
    feed(t, "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\",\"kind\":\"step\","
            "\"job\":\"j\",\"rank\":-1,\"step\":2,\"step_ms\":1}\n");
    feed(t, STEP(2, 11));

    assert_int_equal(r->n, 2);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.accepted, 2);
    assert_int_equal(st.rejected, 7);
    assert_int_equal(st.lines, 9);
    assert_true(has_reject(t, "line 1: invalid JSON"));
    assert_true(has_reject(t, "line 3: not a JSON object"));
    assert_true(has_reject(t, "line 4: field \"source\": \"kmsg\", must be \"telemetry\""));
    assert_true(has_reject(t, "line 5: field \"kind\": \"xid\" is not a telemetry kind"));
    assert_true(has_reject(t, "line 6: field \"step_ms\": missing"));
    assert_true(has_reject(t, "line 7: field \"ts\""));
    assert_true(has_reject(t, "line 8: field \"rank\""));
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_oversized(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_ingest(r, 256);
    char big[1000];
    memset(big, 'x', sizeof big);

    /* in one chunk */
    gh_telemetry_ingest(t, big, 300, false);
    feed(t, "\n");
    feed(t, STEP(1, 1));
    /* across many chunks, then a good line in the same chunk as its end */
    for (int i = 0; i < 10; i++)
        gh_telemetry_ingest(t, big, sizeof big, false);
    feed(t, "tail\n" STEP(1, 2));
    /* a partial that grows past the cap in the chunk with its newline */
    gh_telemetry_ingest(t, big, 200, false);
    gh_telemetry_ingest(t, big, 100, false);
    feed(t, "\n" STEP(1, 3));
    /* exactly line_max is fine (a valid step padded with spaces) */
    char exact[257];
    const char *s = STEP(1, 4);
    size_t sl = strlen(s) - 1;
    memset(exact, ' ', 256);
    memcpy(exact, s, sl);
    exact[256] = '\n';
    gh_telemetry_ingest(t, exact, 257, false);

    assert_int_equal(r->n, 4);
    assert_int_equal(r->sigs[3].step, 4);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.oversized, 3);
    assert_int_equal(st.rejected, 3);
    assert_int_equal(st.accepted, 4);
    assert_true(has_reject(t, "line 1: longer than 256 bytes"));
    assert_true(has_reject(t, "line 3: longer than 256 bytes"));
    assert_true(has_reject(t, "line 5: longer than 256 bytes"));
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_binary(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_ingest(r, 0);
    unsigned char junk[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (unsigned char)(x >> 16);
    }
    gh_telemetry_ingest(t, (const char *)junk, sizeof junk, false);
    feed(t, "\n");
    const char nul_line[] = "{\"ts\":\"2026\0-11\"}\n\xff\xfe\x00\x01\n";
    gh_telemetry_ingest(t, nul_line, sizeof nul_line - 1, false);
    feed(t, STEP(7, 70));
    assert_int_equal(r->n, 1);
    assert_int_equal(r->sigs[0].rank, 7);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_true(st.rejected >= 2);
    /* rejects are printable */
    struct gh_telemetry_reject rj[GH_TELEMETRY_REJECTS_KEEP];
    size_t n = gh_telemetry_rejects(t, rj, GH_TELEMETRY_REJECTS_KEEP);
    assert_true(n >= 2);
    for (size_t i = 0; i < n; i++)
        for (const char *p = rj[i].line; *p; p++)
            assert_true(*p >= 0x20 && *p < 0x7f);
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_partial_lines(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_ingest(r, 0);
    const char *text = STEP(1, 1) STEP(2, 2) STEP(3, 3);
    for (const char *p = text; *p; p++)
        gh_telemetry_ingest(t, p, 1, false);
    /* a last line without newline counts when the client ends */
    const char *s = STEP(4, 4);
    gh_telemetry_ingest(t, s, strlen(s) - 1, false);
    assert_int_equal(r->n, 3);
    gh_telemetry_ingest(t, NULL, 0, true);
    assert_int_equal(r->n, 4);
    assert_int_equal(r->sigs[3].rank, 4);
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_step_coalescing(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = NULL;
    gh_telemetry_opts_init(&o);
    o.socket_path = "";
    o.step_emit_interval_ns = GH_NS_PER_S;
    o.clock = &fake_clock;
    o.emit = record;
    o.emit_ctx = r;
    assert_int_equal(gh_telemetry_new(&o, &t, NULL), GH_OK);
    feed(t, STEP(1, 1) STEP(1, 2) STEP(2, 1) STEP(1, 3));
    assert_int_equal(r->n, 2); /* rank 1 step 1, rank 2 step 1 */
    fake_now += GH_NS_PER_S;
    feed(t, STEP(1, 4) STEP(1, 5));
    assert_int_equal(r->n, 3);
    assert_int_equal(r->sigs[2].step, 4);
    /* checkpoints are never coalesced */
    feed(t, "{\"ts\":\"2026-11-29T07:00:02Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
            "\"job\":\"ml/llm-70b\",\"step\":5,\"path\":\"/c/5\",\"state\":\"failed\"}\n");
    assert_int_equal(r->n, 4);
    struct gh_telemetry_rank rk;
    assert_int_equal(gh_telemetry_rank(t, "ml/llm-70b", 1, &rk), GH_OK);
    assert_int_equal(rk.step, 5);
    assert_int_equal(rk.lines, 5);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.steps_coalesced, 3);
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_max_ranks(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = NULL;
    gh_telemetry_opts_init(&o);
    o.socket_path = "";
    o.max_ranks = 100;
    o.emit = record;
    o.emit_ctx = r;
    assert_int_equal(gh_telemetry_new(&o, &t, NULL), GH_OK);
    char line[256];
    for (int i = 0; i < 150; i++) {
        snprintf(line, sizeof line,
                 "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\",\"kind\":\"step\","
                 "\"job\":\"j%d\",\"rank\":%d,\"step\":1,\"step_ms\":1}\n", i % 7, i);
        feed(t, line);
    }
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.ranks, 100);
    assert_int_equal(st.ranks_dropped, 50);
    assert_int_equal(r->total, 150); /* still emitted */
    struct gh_telemetry_rank rk;
    assert_int_equal(gh_telemetry_rank(t, "j3", 3, &rk), GH_OK);
    gh_telemetry_free(t);
    recorder_free(r);
}

/* ---- sockets ---- */

static char tmpdir[64];
static char sock_path[96];

#define POD_UID "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"

/* The socket tests' writers' cgroups: <tmpdir>/proc/<pid>/cgroup (the
 * source's injected proc root), so that who writes does not depend on the
 * uid or cgroup the tests run under. */
static void fake_cgroup(pid_t pid, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/proc", tmpdir);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/proc/%d", tmpdir, (int)pid);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/proc/%d/cgroup", tmpdir, (int)pid);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gh-tel-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(sock_path, sizeof sock_path, "%s/t.sock", tmpdir);
    /* this process's threads write as a pod's ranks */
    fake_cgroup(getpid(), "0::/kubepods/burstable/pod" POD_UID "/c0ffee\n");
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    unlink(sock_path);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static struct gh_telemetry *new_sock(struct recorder *r, int max_clients)
{
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = NULL;
    struct gh_err err;
    gh_telemetry_opts_init(&o);
    o.socket_path = sock_path;
    o.node = "gpu-03";
    o.max_clients = max_clients;
    char proc[600];
    snprintf(proc, sizeof proc, "%s/proc", tmpdir);
    o.proc_root = proc;
    o.emit = record;
    o.emit_ctx = r;
    if (gh_telemetry_new(&o, &t, &err))
        fail_msg("gh_telemetry_new: %s", err.msg);
    return t;
}

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        assert_true(w > 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Drives the source as the agent's loop does (gh_telemetry_run_once when
 * its epoll fd is readable) until it has read `lines` lines; false after
 * limit_s seconds without getting there. */
static bool run_until(struct gh_telemetry *t, uint64_t lines, int limit_s)
{
    struct gh_telemetry_stats st;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        gh_telemetry_stats(t, &st);
        if (st.lines >= lines)
            return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= limit_s)
            return false;
        assert_int_equal(gh_telemetry_run_once(t, 1000, NULL), GH_OK);
    }
}

#define N_CLIENTS 64
#define N_LINES 200

struct writer_arg {
    int id;
};

static void *writer(void *arg)
{
    struct writer_arg *w = arg;
    int fd = connect_to(sock_path);
    char buf[N_LINES * 200];
    size_t len = 0;
    for (int i = 0; i < N_LINES; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len,
                                "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\","
                                "\"kind\":\"step\",\"job\":\"ml/j\",\"rank\":%d,\"step\":%d,"
                                "\"step_ms\":%d.5}\n",
                                w->id, i + 1, 100 + w->id);
    /* odd-sized writes so lines split across reads */
    size_t off = 0, chunk = 7 + (size_t)w->id * 13;
    while (off < len) {
        size_t n = len - off < chunk ? len - off : chunk;
        write_all(fd, buf + off, n);
        off += n;
        if ((off / chunk) % 50 == 0)
            usleep(100);
    }
    close(fd);
    return NULL;
}

static void test_many_clients(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_sock(r, 0);
    pthread_t th[N_CLIENTS];
    struct writer_arg wa[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        wa[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, writer, &wa[i]), 0);
    }
    /* a client sending garbage in the middle of it all */
    int bad = connect_to(sock_path);
    write_all(bad, "\x01\x02garbage\n{\"oops\n", 17);
    /* the writers block when their socket buffers fill: read while they write */
    assert_true(run_until(t, N_CLIENTS * N_LINES + 2, 60));
    for (int i = 0; i < N_CLIENTS; i++)
        pthread_join(th[i], NULL);
    close(bad);

    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.accepted, N_CLIENTS * N_LINES);
    assert_int_equal(st.rejected, 2);
    assert_int_equal(st.clients_total, N_CLIENTS + 1);
    assert_int_equal(recorded(r), N_CLIENTS * N_LINES);
    assert_int_equal(r->bad_json, 0);
    for (int i = 0; i < N_CLIENTS; i++) {
        struct gh_telemetry_rank rk;
        assert_int_equal(gh_telemetry_rank(t, "ml/j", i, &rk), GH_OK);
        assert_int_equal(rk.step, N_LINES);
        assert_int_equal(rk.lines, N_LINES);
        assert_true(rk.step_ms == 100 + i + 0.5);
    }
    gh_telemetry_free(t);
    struct stat sb;
    assert_int_not_equal(stat(sock_path, &sb), 0); /* removed */
    recorder_free(r);
}

static void test_run_once_and_limits(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_sock(r, 2);
    int a = connect_to(sock_path), b = connect_to(sock_path), c = connect_to(sock_path);
    for (int i = 0; i < 20; i++)
        gh_telemetry_run_once(t, 10, NULL);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.clients_now, 2);
    assert_int_equal(st.clients_refused, 1);
    /* the refused one sees end of file */
    char ch;
    assert_int_equal(read(c, &ch, 1), 0);
    const char *s = STEP(9, 9);
    write_all(a, s, strlen(s) - 1); /* no newline, then close */
    close(a);
    write_all(b, s, strlen(s));
    for (int i = 0; i < 20 && recorded(r) < 2; i++)
        gh_telemetry_run_once(t, 10, NULL);
    assert_int_equal(recorded(r), 2);
    close(b);
    close(c);
    gh_telemetry_free(t);
    recorder_free(r);
}

static void test_socket_files(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = new_sock(r, 0), *t2 = NULL;
    struct gh_err err;
    gh_telemetry_opts_init(&o);
    o.socket_path = sock_path;
    /* a live one is not stolen */
    assert_int_equal(gh_telemetry_new(&o, &t2, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "in use"));
    struct stat sb;
    assert_int_equal(stat(sock_path, &sb), 0); /* and not unlinked by the failure */
    gh_telemetry_free(t);

    /* a stale one (a socket nobody listens on) is replaced */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    assert_int_equal(gh_telemetry_new(&o, &t2, &err), GH_OK);
    assert_int_equal(stat(sock_path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0666);
    gh_telemetry_free(t2);

    /* a regular file is never removed */
    FILE *f = fopen(sock_path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(gh_telemetry_new(&o, &t2, &err), GH_EINVAL);
    assert_int_equal(stat(sock_path, &sb), 0);
    unlink(sock_path);

    /* too long for sun_path */
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    o.socket_path = longp;
    assert_int_equal(gh_telemetry_new(&o, &t2, &err), GH_EINVAL);
    recorder_free(r);
}

/* The Python reporter writes into the C socket. */
static void test_python_round_trip(void **state)
{
    (void)state;
    if (system("python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null") != 0)
        skip();
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_sock(r, 0);
    char cmd[1400], done[600];
    snprintf(done, sizeof done, "%s/done", tmpdir);
    /* the writer waits until the agent has read its lines: a writer must
     * still be there when the agent identifies it (docs/agent.md) */
    snprintf(cmd, sizeof cmd,
             "import math, os, time, gpuheal_reporter as g\n"
             "r = g.Reporter(\"ml/rt\", 3)\n"
             "r.step(1, 12.5, loss=2.5, comm_ms=1.5, tokens_per_s=1000.0)\n"
             "r.step(2, 13.0, loss=math.nan)\n"
             "r.checkpoint(2, \"/ckpt/2\")\n"
             "r.replica_checksum(2, 0, \"abc123\")\n"
             "r.close()\n"
             "assert r.stats()[\"sent\"] == 4, r.stats()\n"
             "for _ in range(1200):\n"
             "    if os.path.exists(\"%s\"): break\n"
             "    time.sleep(0.05)\n",
             done);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (chdir(GH_SOURCE_DIR "/python") || setenv("GPUHEAL_SOCKET", sock_path, 1))
            _exit(126);
        execlp("python3", "python3", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    fake_cgroup(child, "0::/kubepods.slice/kubepods-pod0b1c2d3e_4f50_6172_8394_a5b6c7d8e9f0"
                       ".slice/cri-containerd-1.scope\n");
    bool got = run_until(t, 4, 60);
    FILE *df = fopen(done, "w");
    assert_non_null(df);
    fclose(df);
    int wst = 0;
    assert_int_equal(waitpid(child, &wst, 0), child);
    assert_true(got);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.accepted, 4);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(r->n, 4);
    assert_int_equal(r->sigs[0].kind, GH_KIND_STEP);
    assert_string_equal(r->sigs[0].job, "ml/rt");
    assert_int_equal(r->sigs[0].rank, 3);
    assert_true(r->sigs[0].has_tokens_per_s);
    assert_true(r->sigs[1].has_loss && r->sigs[1].loss != r->sigs[1].loss); /* NaN */
    assert_int_equal(r->sigs[2].kind, GH_KIND_CHECKPOINT);
    assert_int_equal(r->sigs[3].kind, GH_KIND_REPLICA_CHECKSUM);
    assert_string_equal(r->sigs[3].value, "abc123");
    for (int i = 0; i < 4; i++) /* the writer's pod, from its cgroup */
        assert_string_equal(r->sigs[i].pod_uid, POD_UID);
    gh_telemetry_free(t);
    recorder_free(r);
}

/* One client: connects, writes text, closes; the source reads it all. */
static void one_client(struct gh_telemetry *t, const char *text, uint64_t lines_before)
{
    int fd = connect_to(sock_path);
    write_all(fd, text, strlen(text));
    close(fd);
    assert_true(run_until(t, lines_before + 1, 30));
}

static bool last_reject_has(struct gh_telemetry *t, const char *what)
{
    struct gh_telemetry_reject rj[GH_TELEMETRY_REJECTS_KEEP];
    size_t n = gh_telemetry_rejects(t, rj, GH_TELEMETRY_REJECTS_KEEP);
    if (n == 0)
        return false;
    printf("  reject: %s\n", rj[n - 1].reason);
    return strstr(rj[n - 1].reason, what) != NULL;
}

#define POD_LINE                                                                                   \
    "{\"ts\":\"2026-11-29T07:00:01Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","           \
    "\"job\":\"ml/a\",\"step\":5,\"path\":\"s3://ckpt/a/5\",\"state\":\"saved\","                  \
    "\"pod_uid\":\"11111111-2222-3333-4444-555555555555\"}\n"

/* Who writes (issue 24): a pod's process has its pod's UID stamped on its
 * lines, over what the line claims; a host process only as root; a writer
 * in no pod and not root, or one whose pod cannot be told, is refused. */
static void test_writer_identity(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_sock(r, 0);
    struct gh_telemetry_stats st;

    /* a pod's process: its pod, not the one the line names */
    one_client(t, POD_LINE, 0);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.accepted, 1);
    assert_int_equal(r->n, 1);
    assert_string_equal(r->sigs[0].pod_uid, POD_UID);

    /* a process in no pod: root on the host, or refused */
    fake_cgroup(getpid(), "0::/user.slice/user-0.slice/session-1.scope\n");
    one_client(t, POD_LINE, 1);
    gh_telemetry_stats(t, &st);
    if (geteuid() == 0) {
        assert_int_equal(st.accepted, 2);
        assert_int_equal(r->n, 2);
        assert_null(r->sigs[1].pod_uid); /* no pod to stamp: the claim is dropped */
    } else {
        assert_int_equal(st.rejected, 1);
        assert_true(last_reject_has(t, "runs in no pod and is not root"));
    }

    /* not root and in no pod: a child that gives up root when it has it */
    uint64_t rej = st.rejected;
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1 || (geteuid() == 0 && setuid(65534) != 0))
            _exit(2);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            _exit(3);
        const char *line = POD_LINE;
        if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
            _exit(4);
        /* stay until the parent has read it: identified while alive */
        (void)read(go[0], &c, 1);
        _exit(0);
    }
    close(go[0]);
    fake_cgroup(child, "0::/system.slice/cron.service\n");
    chmod(tmpdir, 0755); /* the socket's directory, for uid 65534 */
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_true(run_until(t, 3, 30));
    close(go[1]);
    int wst = 0;
    assert_int_equal(waitpid(child, &wst, 0), child);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.rejected, rej + 1);
    assert_true(last_reject_has(t, "runs in no pod and is not root"));

    /* a writer whose pod cannot be told (no cgroup file): refused */
    char path[600];
    snprintf(path, sizeof path, "%s/proc/%d/cgroup", tmpdir, (int)getpid());
    assert_int_equal(unlink(path), 0);
    one_client(t, POD_LINE, 3);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.rejected, rej + 2);
    assert_true(last_reject_has(t, "the writer's pod cannot be told"));
    /* two pods in one cgroup file: refused too */
    fake_cgroup(getpid(), "2:memory:/kubepods/pod" POD_UID "/a\n"
                          "0::/kubepods/pod11111111-2222-3333-4444-555555555555/a\n");
    one_client(t, POD_LINE, 4);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.rejected, rej + 3);
    assert_true(last_reject_has(t, "cgroup line 2: pod 11111111-"));
    assert_int_equal(r->bad_json, 0);
    gh_telemetry_free(t);
    recorder_free(r);
}

/* Reads what the agent wrote back to fd within a few seconds of driving
 * the loop (the restart line), into buf. */
static size_t read_back(struct gh_telemetry *t, int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (int i = 0; i < 50 && got < cap - 1; i++) {
        assert_int_equal(gh_telemetry_run_once(t, 100, NULL), GH_OK);
        ssize_t n = recv(fd, buf + got, cap - 1 - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            if (memchr(buf, '\n', got))
                break;
        }
    }
    buf[got] = '\0';
    return got;
}

/* A restart request (issue 25, in place): written once to the pod's
 * connections open when it was first seen, never to a later one (the
 * restarted process), never to another pod's; repeated, not again. */
static void test_restart_request(void **state)
{
    (void)state;
    struct recorder *r = recorder_new();
    struct gh_telemetry *t = new_sock(r, 0);
    struct gh_telemetry_stats st;
    struct gh_err err;
    char buf[512];
    int a = connect_to(sock_path);
    write_all(a, POD_LINE, strlen(POD_LINE));
    assert_true(run_until(t, 1, 30)); /* accepted and identified: pod POD_UID */

    /* another pod's request: nothing for this connection */
    assert_int_equal(
        gh_telemetry_restart(t, "11111111-2222-3333-4444-555555555555", "inc-0", "inc-0", 88, &err),
        GH_OK);
    assert_int_equal(read_back(t, a, buf, sizeof buf), 0);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.restarts_no_client, 1);

    assert_int_equal(gh_telemetry_restart(t, POD_UID, "inc-1", "inc-1", 88, &err), GH_OK);
    assert_true(read_back(t, a, buf, sizeof buf) > 0);
    json_t *o = json_loads(buf, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "kind")), "restart");
    assert_string_equal(json_string_value(json_object_get(o, "id")), "inc-1");
    assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 88);
    json_decref(o);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.restarts_delivered, 1);

    /* the restarted process connects; the same request again (the
     * annotation seen at the next update): not for it, not twice */
    int b = connect_to(sock_path);
    write_all(b, POD_LINE, strlen(POD_LINE));
    assert_true(run_until(t, 2, 30));
    assert_int_equal(gh_telemetry_restart(t, POD_UID, "inc-1", "inc-1", 88, &err), GH_OK);
    assert_int_equal(read_back(t, b, buf, sizeof buf), 0);
    assert_int_equal(read_back(t, a, buf, sizeof buf), 0);
    gh_telemetry_stats(t, &st);
    assert_int_equal(st.restarts_delivered, 1);

    /* a new request reaches both connections of the pod */
    assert_int_equal(gh_telemetry_restart(t, POD_UID, "inc-2", "inc-2", 7, &err), GH_OK);
    assert_true(read_back(t, b, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "\"exit_code\":7"));
    assert_true(read_back(t, a, buf, sizeof buf) > 0);

    /* bad requests: named */
    assert_int_equal(gh_telemetry_restart(t, POD_UID, "x", "x", 0, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "exit code"));
    assert_int_equal(gh_telemetry_restart(t, "", "x", "x", 9, &err), GH_EINVAL);
    close(a);
    close(b);
    gh_telemetry_free(t);
    recorder_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_restart_request, setup_dir, teardown_dir),
        cmocka_unit_test(test_valid_lines),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_partial_lines),
        cmocka_unit_test(test_step_coalescing),
        cmocka_unit_test(test_max_ranks),
        cmocka_unit_test_setup_teardown(test_many_clients, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_run_once_and_limits, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_socket_files, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_python_round_trip, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_writer_identity, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
