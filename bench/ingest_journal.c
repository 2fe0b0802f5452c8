/* ingest_journal.c (bench) - what the signal journal costs the ingest
 * endpoint: POST /v1/signals throughput (batches of 500 lines, one client,
 * libcurl on loopback) with the controller's journal sink (one committed
 * transaction per batch before the 200) against a sink that only takes the
 * signals, on SQLite (WAL, synchronous=FULL, a file under /tmp) and, when
 * PostgreSQL's server binaries are installed, a private PostgreSQL on a
 * Unix socket. With the journal, also the time of the journal write itself
 * (wall and the ingest thread's CPU, per batch), which the HTTP path's
 * noise on a loaded machine does not blur. Figures only, never pass/fail.
 * Usage: ingest_journal [BATCHES] (default 200) */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/journal.h"
#include "audit/pg_testenv.h"
#include "ingest/server.h"

#define LINES 500

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int drop_sink(void *ud, struct gh_signal *sigs, size_t n)
{
    (void)ud;
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&sigs[i]);
    return GH_OK;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The journal and what its writes cost (touched on the server's thread
 * only, read after the server stopped). */
struct journal_ctx {
    struct gh_journal *j;
    double wall_s, cpu_s;
    long writes;
};

static int journal_sink(void *ud, struct gh_signal *sigs, size_t n)
{
    struct journal_ctx *jc = ud;
    double t0 = now_s(), c0 = thread_cpu_s();
    int rc = gh_journal_append(jc->j, sigs, n, gh_clock_now(gh_clock_real()), NULL);
    jc->wall_s += now_s() - t0;
    jc->cpu_s += thread_cpu_s() - c0;
    jc->writes++;
    if (rc == GH_OK)
        drop_sink(NULL, sigs, n);
    return rc == GH_OK ? GH_OK : GH_EAGAIN;
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* One body of LINES signals with ids unique to (run, batch). */
static size_t body(char *buf, size_t cap, int run, int batch)
{
    size_t len = 0;
    for (int i = 0; i < LINES && len < cap; i++) {
        int n = snprintf(buf + len, cap - len,
                         i % 2 ? "{\"ts\":\"2026-11-29T07:00:%02d.%06dZ\",\"node\":\"gpu-%03d\",\"gpu\":%d,"
                                 "\"source\":\"nvml\",\"kind\":\"thermal\",\"celsius\":%d,"
                                 "\"throttled\":false,\"id\":\"r%d-b%d-l%d\"}\n"
                               : "{\"ts\":\"2026-11-29T07:00:%02d.%06dZ\",\"node\":\"gpu-%03d\",\"gpu\":%d,"
                                 "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":%d,"
                                 "\"id\":\"r%d-b%d-l%d\"}\n",
                         i % 60, batch % 1000000, i % 128, i % 8, 31 + i % 40, run, batch, i);
        if (n < 0 || (size_t)n >= cap - len)
            break;
        len += (size_t)n;
    }
    return len;
}

static int run(const char *name, gh_ingest_sink_fn sink, void *ctx, int run_no, int batches)
{
    struct gh_ingest_server_opts o = {.listen = "127.0.0.1:0", .allow_anonymous = true,
                                      .sink = sink, .sink_ctx = ctx};
    struct gh_ingest_server *srv = NULL;
    struct gh_err err;
    if (gh_ingest_server_new(&o, &srv, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/signals", gh_ingest_server_port(srv));
    size_t cap = (size_t)LINES * 200;
    char *buf = malloc(cap);
    CURL *c = curl_easy_init();
    if (!buf || !c)
        return 1;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-ndjson");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    double busy = 0, worst = 0;
    int failed = 0;
    for (int b = 0; b < batches; b++) {
        size_t len = body(buf, cap, run_no, b);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, buf);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
        double t0 = now_s();
        long code = 0;
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200)
            failed++;
        double dt = now_s() - t0;
        busy += dt;
        worst = dt > worst ? dt : worst;
    }
    struct gh_ingest_server_stats st;
    gh_ingest_server_stats(srv, &st);
    printf("%-22s %6d batches x %d lines: %9.0f signals/s, %7.2f ms/batch mean, %7.2f ms max, "
           "%d not 200, %llu accepted\n",
           name, batches, LINES, (double)batches * LINES / busy, busy * 1e3 / batches, worst * 1e3,
           failed, (unsigned long long)st.accepted);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(buf);
    gh_ingest_server_free(srv);
    return failed ? 1 : 0;
}

static int with_journal(const char *name, const char *url, int run_no, int batches)
{
    struct gh_journal_opts jo = {.db_url = url};
    struct journal_ctx jc = {0};
    struct gh_err err;
    if (gh_journal_open(&jo, &jc.j, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    int rc = run(name, journal_sink, &jc, run_no, batches);
    if (jc.writes)
        printf("%-22s journal write alone: %7.2f ms/batch wall, %7.2f ms/batch CPU (%ld writes)\n",
               name, jc.wall_s * 1e3 / (double)jc.writes, jc.cpu_s * 1e3 / (double)jc.writes,
               jc.writes);
    gh_journal_close(jc.j);
    return rc;
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 200;
    if (batches <= 0)
        batches = 200;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char dir[] = "/tmp/gh-bench-journal-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char url[160], path[128];
    snprintf(path, sizeof path, "%s/audit.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", path);
    int rc = run("journal off", drop_sink, NULL, 1, batches);
    rc |= with_journal("journal sqlite", url, 2, batches);
    struct gh_pg_testenv pg;
    struct gh_err err;
    if (gh_pg_testenv_start(&pg, &err) == GH_OK) {
        rc |= with_journal("journal postgres", pg.url, 3, batches);
        gh_pg_testenv_stop(&pg);
    } else {
        printf("journal postgres       skipped: %s\n", err.msg);
    }
    const char *side[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[144];
        snprintf(p, sizeof p, "%s%s", path, side[i]);
        unlink(p);
    }
    rmdir(dir);
    curl_global_cleanup();
    return rc;
}
