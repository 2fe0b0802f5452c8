/* ingest_idle.c - authenticated POST latency of the ingest server while idle
 * connections hold it (issue 15 #4): N connections each send a request line
 * and then one header line every TRICKLE seconds, never ending their
 * headers, from ADDRS loopback addresses (127.0.0.2, 127.0.0.3, ...); a
 * client on 127.0.0.1 POSTs one signal every 100 ms (a new connection
 * each) and GETs /healthz, for SECONDS seconds. Prints p50/p99/max of both
 * and how many POSTs failed (curl timeout 10 s).
 *
 *   bench/ingest_idle [N [TRICKLE [ADDRS [SECONDS [old]]]]]   (300 10 1 20)
 *
 * "old" runs the server with the limits of before the fix (one thread, 256
 * connections, no per-client limit, the 30 s idle timeout for headers too). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "signal/sigqueue.h"
#include "ingest/server.h"

#define MAX_CONNS 4096
#define TOKEN "bench-idle-token"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct attack {
    int fds[MAX_CONNS];
    int n, port, addrs;
    double trickle_s;
    atomic_bool stop;
    atomic_int open;
};

static int connect_from(int k, int port)
{
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%d", 2 + k);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto fail;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto fail;
    static const char part[] = "POST /v1/signals HTTP/1.1\r\nHost: x\r\n";
    if (send(fd, part, sizeof part - 1, MSG_NOSIGNAL) < 0)
        goto fail;
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Keeps n connections: one header line each per trickle period; a closed
 * one is opened again (as an attacker would). */
static void *attacker(void *arg)
{
    struct attack *a = arg;
    for (int i = 0; i < a->n; i++)
        a->fds[i] = connect_from(i % a->addrs, a->port);
    while (!atomic_load(&a->stop)) {
        int open = 0;
        for (int i = 0; i < a->n; i++) {
            if (a->fds[i] >= 0 && send(a->fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) {
                close(a->fds[i]);
                a->fds[i] = -1;
            }
            if (a->fds[i] < 0)
                a->fds[i] = connect_from(i % a->addrs, a->port);
            open += a->fds[i] >= 0;
        }
        atomic_store(&a->open, open);
        for (double t = 0; t < a->trickle_s && !atomic_load(&a->stop); t += 0.1)
            usleep(100 * 1000);
    }
    for (int i = 0; i < a->n; i++)
        if (a->fds[i] >= 0)
            close(a->fds[i]);
    return NULL;
}

static size_t sink_body(char *d, size_t s, size_t n, void *ud)
{
    (void)d;
    (void)ud;
    return s * n;
}

/* One request; seconds taken, or -1 when it failed. */
static double one(const char *url, const char *body)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hd = curl_slist_append(NULL, "Authorization: Bearer " TOKEN);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    double t0 = now_s();
    long code = 0;
    CURLcode cc = curl_easy_perform(h);
    double dt = now_s() - t0;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return code == 200 ? dt : -1;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n, int failed)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    if (n == 0) {
        printf("%-8s ok 0, failed %d\n", what, failed);
        return;
    }
    printf("%-8s ok %d, failed %d: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", what, n, failed,
           v[n / 2] * 1e3, v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] * 1e3, v[n - 1] * 1e3);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 300;
    double trickle = argc > 2 ? strtod(argv[2], NULL) : 10;
    int addrs = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 1;
    double secs = argc > 4 ? strtod(argv[4], NULL) : 20;
    int old = argc > 5 && !strcmp(argv[5], "old");
    if (n < 0 || n > MAX_CONNS || addrs < 1 || addrs > 200) {
        fprintf(stderr, "usage: ingest_idle [N<=%d [TRICKLE_S [ADDRS<=200 [SECONDS [old]]]]]\n",
                MAX_CONNS);
        return 2;
    }
    char dir[] = "/tmp/gh-bench-idle-XXXXXX", tf[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(tf, sizeof tf, "%s/token", dir);
    FILE *f = fopen(tf, "w");
    if (!f)
        return 1;
    fputs(TOKEN "\n", f);
    fclose(f);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct gh_sigqueue *q = gh_sigqueue_new(1u << 16);
    struct gh_ingest_server_opts o = {.listen = "0.0.0.0:0", .token_file = tf,
                                      .sink = gh_ingest_queue_sink, .sink_ctx = q};
    if (old) {
        o.threads = 1;
        o.max_connections = 256;
        o.max_per_client = 65536;
        o.header_timeout_s = 30;
    }
    struct gh_ingest_server *srv;
    struct gh_err err = {{0}};
    if (gh_ingest_server_new(&o, &srv, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 1;
    }
    int port = gh_ingest_server_port(srv);
    printf("ingest_idle: %d connections from %d address(es), a header line every %.0f s, "
           "%.0f s of POSTs, %s limits\n", n, addrs, trickle, secs,
           old ? "old (1 thread, 256 connections, no per-client bound, 30 s for headers)"
               : "default (4 threads, 1024 connections, 32 per client, 5 s for headers)");
    static struct attack a;
    a.n = n;
    a.port = port;
    a.addrs = addrs;
    a.trickle_s = trickle;
    pthread_t th;
    pthread_create(&th, NULL, attacker, &a);
    sleep(2); /* the connections are opened */

    char post_url[128], health_url[128];
    snprintf(post_url, sizeof post_url, "http://127.0.0.1:%d/v1/signals", port);
    snprintf(health_url, sizeof health_url, "http://127.0.0.1:%d/healthz", port);
    static double pv[100000], hv[100000];
    int np = 0, nh = 0, pf = 0, hf = 0, seq = 0;
    double end = now_s() + secs;
    while (now_s() < end && np + pf < 100000) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n1\",\"source\":\"kmsg\","
                 "\"kind\":\"xid\",\"code\":79,\"id\":\"idle/%d\"}",
                 seq++);
        double d = one(post_url, body);
        if (d >= 0)
            pv[np++] = d;
        else
            pf++;
        d = one(health_url, NULL);
        if (d >= 0)
            hv[nh++] = d;
        else
            hf++;
        struct gh_signal s[64];
        size_t k;
        while ((k = gh_sigqueue_pop(q, s, 64)) > 0)
            for (size_t i = 0; i < k; i++)
                gh_signal_clear(&s[i]);
        usleep(100 * 1000);
    }
    struct gh_ingest_server_stats st;
    gh_ingest_server_stats(srv, &st);
    printf("connections the server holds at the end: %u (the attacker keeps %d of %d open "
           "or reopening)\n", st.connections, atomic_load(&a.open), n);
    report("POST", pv, np, pf);
    report("/healthz", hv, nh, hf);
    atomic_store(&a.stop, true);
    pthread_join(th, NULL);
    gh_ingest_server_free(srv);
    gh_sigqueue_free(q);
    unlink(tf);
    rmdir(dir);
    curl_global_cleanup();
    return 0;
}
