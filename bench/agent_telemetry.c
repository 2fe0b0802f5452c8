/* bench/agent_telemetry.c - measures the agent's telemetry socket on one
 * core: writer threads stream realistic step lines (and a few checkpoints)
 * over the Unix socket while one loop thread (pinned to a CPU when
 * possible) runs gh_telemetry_run_once(); prints lines/s by wall time and
 * per CPU-second of the loop thread, the same for the line handling
 * alone (gh_telemetry_ingest, no socket), and for decoding alone: the full
 * decoder (gh_signal_decode, jansson) against the fast path the socket uses
 * (gh_signal_fast_decode, yajl events; signal/signal_fast.h).
 *
 *   agent_telemetry [--lines N] [--writers N] [--ranks N] [--cpu N]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/telemetry.h"
#include "signal/signal_fast.h"
#include "signal/signal_json.h"

static atomic_ulong emitted;

static void on_signal(void *ctx, const struct gh_signal *s)
{
    (void)ctx;
    (void)s;
    atomic_fetch_add_explicit(&emitted, 1, memory_order_relaxed);
}

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long arg_long(const char *s, const char *name)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0) {
        fprintf(stderr, "agent_telemetry: bad %s \"%s\"\n", name, s);
        exit(2);
    }
    return v;
}

/* A buffer of `lines` lines as a training job would write them. */
static char *make_lines(long lines, long ranks, long first_rank, size_t *len)
{
    size_t cap = (size_t)lines * 220 + 1;
    char *buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "agent_telemetry: out of memory\n");
        exit(1);
    }
    size_t n = 0;
    for (long i = 0; i < lines; i++) {
        long rank = first_rank + i % ranks;
        if (i % 1000 == 999)
            n += (size_t)snprintf(buf + n, cap - n,
                                  "{\"ts\":\"2026-11-29T07:00:02.500000Z\",\"source\":"
                                  "\"telemetry\",\"kind\":\"checkpoint\",\"job\":\"ml/llm-70b\","
                                  "\"step\":%ld,\"path\":\"s3://ckpt/llm-70b/step-%ld\","
                                  "\"state\":\"saved\"}\n",
                                  i, i);
        else
            n += (size_t)snprintf(buf + n, cap - n,
                                  "{\"ts\":\"2026-11-29T07:00:01.%06ldZ\",\"node\":\"gpu-03\","
                                  "\"gpu\":%ld,\"source\":\"telemetry\",\"kind\":\"step\","
                                  "\"job\":\"ml/llm-70b\",\"rank\":%ld,\"step\":%ld,"
                                  "\"step_ms\":%ld.5,\"comm_ms\":210.1,\"loss\":2.31}\n",
                                  i % 1000000, rank % 8, rank, 1000 + i / ranks, 1400 + i % 50);
    }
    *len = n;
    return buf;
}

typedef int (*decode_fn)(const char *text, size_t len, long line_no, struct gh_signal *out,
                         struct gh_err *err);

/* Decodes every line of buf with fn; lines per CPU-second. */
static double decode_rate(decode_fn fn, const char *buf, size_t len, long lines)
{
    struct gh_signal s;
    struct gh_err err;
    long n = 0;
    double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (fn(p, k, n + 1, &s, &err) != GH_OK) {
            fprintf(stderr, "agent_telemetry: decode: %s\n", err.msg);
            exit(1);
        }
        gh_signal_clear(&s);
        n++;
        p += k + 1;
    }
    double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (n != lines) {
        fprintf(stderr, "agent_telemetry: decoded %ld of %ld lines\n", n, lines);
        exit(1);
    }
    return (double)n / cpu;
}

struct writer {
    const char *path;
    char *buf;
    size_t len;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", w->path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("agent_telemetry: connect");
        exit(1);
    }
    size_t off = 0;
    while (off < w->len) {
        size_t n = w->len - off < 65536 ? w->len - off : 65536;
        ssize_t k = write(fd, w->buf + off, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            perror("agent_telemetry: write");
            exit(1);
        }
        off += (size_t)k;
    }
    close(fd);
    return NULL;
}

struct loop {
    struct gh_telemetry *t;
    uint64_t target;
    int cpu;
    double cpu_s;
    double wall_end;
};

static void *loop_main(void *arg)
{
    struct loop *l = arg;
    if (l->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(l->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    struct gh_telemetry_stats st;
    for (;;) {
        gh_telemetry_run_once(l->t, 100, NULL);
        gh_telemetry_stats(l->t, &st);
        if (st.lines >= l->target)
            break;
    }
    l->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    l->wall_end = now_s(CLOCK_MONOTONIC);
    return NULL;
}

int main(int argc, char **argv)
{
    long lines = 2000000, writers = 4, ranks = 64;
    int cpu = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--lines") == 0)
            lines = arg_long(argv[++i], "--lines");
        else if (i + 1 < argc && strcmp(argv[i], "--writers") == 0)
            writers = arg_long(argv[++i], "--writers");
        else if (i + 1 < argc && strcmp(argv[i], "--ranks") == 0)
            ranks = arg_long(argv[++i], "--ranks");
        else if (i + 1 < argc && strcmp(argv[i], "--cpu") == 0)
            cpu = (int)strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: agent_telemetry [--lines N] [--writers N] [--ranks N] "
                            "[--cpu N (-1 = no pinning)]\n");
            return 2;
        }
    }
    if (writers > 256)
        writers = 256;
    long per = lines / writers;
    lines = per * writers;

    char dir[] = "/tmp/gh-bench-tel-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("agent_telemetry: mkdtemp");
        return 1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/t.sock", dir);

    /* 0. Decoding alone. */
    size_t dlen;
    char *dbuf = make_lines(per, ranks, 0, &dlen);
    double full = decode_rate(gh_signal_decode, dbuf, dlen, per);
    double fast = decode_rate(gh_signal_fast_decode, dbuf, dlen, per);
    free(dbuf);
    printf("decode alone: %ld lines, gh_signal_decode %.0f lines/s, gh_signal_fast_decode "
           "%.0f lines/s per CPU-second\n",
           per, full, fast);

    /* 1. The line handling alone. */
    struct gh_telemetry_opts o;
    struct gh_telemetry *t;
    struct gh_err err;
    gh_telemetry_opts_init(&o);
    o.socket_path = "";
    o.emit = on_signal;
    if (gh_telemetry_new(&o, &t, &err)) {
        fprintf(stderr, "agent_telemetry: %s\n", err.msg);
        return 1;
    }
    size_t len;
    char *buf = make_lines(per, ranks, 0, &len);
    double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    gh_telemetry_ingest(t, buf, len, true);
    double ingest_cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    struct gh_telemetry_stats st;
    gh_telemetry_stats(t, &st);
    if (st.accepted != (uint64_t)per) {
        fprintf(stderr, "agent_telemetry: ingest accepted %llu of %ld\n",
                (unsigned long long)st.accepted, per);
        return 1;
    }
    gh_telemetry_free(t);
    free(buf);
    printf("ingest (no socket): %ld lines, %.0f lines/s per CPU-second\n", per,
           (double)per / ingest_cpu);

    /* 2. Through the socket. */
    o.socket_path = path;
    atomic_store(&emitted, 0);
    if (gh_telemetry_new(&o, &t, &err)) {
        fprintf(stderr, "agent_telemetry: %s\n", err.msg);
        return 1;
    }
    struct writer *w = calloc((size_t)writers, sizeof *w);
    pthread_t *wt = calloc((size_t)writers, sizeof *wt);
    if (!w || !wt)
        return 1;
    for (long i = 0; i < writers; i++) {
        w[i].path = path;
        w[i].buf = make_lines(per, ranks, i * ranks, &w[i].len);
    }
    struct loop l = {t, (uint64_t)lines, cpu, 0, 0};
    pthread_t lt;
    double wall0 = now_s(CLOCK_MONOTONIC);
    pthread_create(&lt, NULL, loop_main, &l);
    for (long i = 0; i < writers; i++)
        pthread_create(&wt[i], NULL, writer_main, &w[i]);
    for (long i = 0; i < writers; i++)
        pthread_join(wt[i], NULL);
    pthread_join(lt, NULL);
    double wall = l.wall_end - wall0;
    gh_telemetry_stats(t, &st);
    printf("socket: %ld lines from %ld writers (%ld ranks each): %.3f s wall, loop thread "
           "%.3f CPU-s%s\n",
           lines, writers, ranks, wall, l.cpu_s, cpu >= 0 ? " (pinned)" : "");
    printf("socket: %.0f lines/s wall, %.0f lines/s per loop CPU-second; accepted %llu "
           "rejected %llu emitted %lu ranks %llu\n",
           (double)lines / wall, (double)lines / l.cpu_s, (unsigned long long)st.accepted,
           (unsigned long long)st.rejected, atomic_load(&emitted),
           (unsigned long long)st.ranks);
    gh_telemetry_free(t);
    for (long i = 0; i < writers; i++)
        free(w[i].buf);
    free(w);
    free(wt);
    rmdir(dir);
    return st.accepted == (uint64_t)lines ? 0 : 1;
}
