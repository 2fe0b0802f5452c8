/* agent_rss.c - benchmark of the whole gpuheal-agent process: resident
 * memory and CPU with 8 GPUs (the fault-injection NVML library, 18 NVLinks
 * each) polled every second and shipping to an in-process ingest endpoint;
 * then an XID storm written to its kernel-log stand-in (a FIFO of
 * /dev/kmsg records) at a fixed rate, sampling RSS every second to show that
 * memory stays bounded, and counting what was shipped. Prints figures;
 * never passes or fails on them.
 *
 * usage: agent_rss [IDLE_SECONDS] [STORM_SECONDS] [STORM_LINES_PER_S]
 *   defaults 20, 10, 100000. The agent and the fake library are found next
 *   to this binary (../bin/gpuheal-agent, ../lib/libnvidia-ml-fake.so) or
 *   through $GH_AGENT and $GH_NVML_LIB. Use a build without sanitizers for
 *   meaningful memory figures. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "ingest/server.h"

extern char **environ;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / GH_NS_PER_S), (long)(ns % GH_NS_PER_S)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A "Key: N kB" line of /proc/PID/<file> (status: VmRSS, VmHWM;
 * smaps_rollup: Pss, Private_Clean, ...) in kB, -1 when absent. */
static long proc_kb(pid_t pid, const char *file, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    long kb = -1;
    size_t kl = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) {
            kb = strtol(line + kl, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

static long status_kb(pid_t pid, const char *key)
{
    return proc_kb(pid, "status", key);
}

/* Where the resident memory is: private to the agent or shared (library
 * text and data mapped by other processes too). */
static void print_rollup(pid_t pid, const char *when)
{
    long pc = proc_kb(pid, "smaps_rollup", "Private_Clean:");
    long pd = proc_kb(pid, "smaps_rollup", "Private_Dirty:");
    long sc = proc_kb(pid, "smaps_rollup", "Shared_Clean:");
    long sd = proc_kb(pid, "smaps_rollup", "Shared_Dirty:");
    long pss = proc_kb(pid, "smaps_rollup", "Pss:");
    long anon = proc_kb(pid, "smaps_rollup", "Anonymous:");
    if (pc < 0 || pd < 0 || sc < 0 || sd < 0) {
        printf("%s: /proc/%d/smaps_rollup not readable\n", when, (int)pid);
        return;
    }
    printf("%s: private %ld kB (clean %ld, dirty %ld), shared %ld kB (clean %ld, dirty %ld), "
           "PSS %ld kB, anonymous %ld kB\n", when, pc + pd, pc, pd, sc + sd, sc, sd, pss, anon);
}

/* utime + stime of pid, in clock ticks. */
static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    /* fields after ')': state(3) ... utime(14) stime(15) */
    long long ut = 0, st = 0;
    int field = 2;
    for (char *tok = p + 1; *tok; tok++) {
        if (*tok == ' ') {
            field++;
            char *end;
            long long v = strtoll(tok + 1, &end, 10);
            if (field == 14)
                ut = v;
            else if (field == 15) {
                st = v;
                break;
            }
        }
    }
    return ut + st;
}

struct counter_sink {
    atomic_ullong n;
};

static int count_sink(void *ctx, struct gh_signal *sigs, size_t n)
{
    struct counter_sink *c = ctx;
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&sigs[i]);
    atomic_fetch_add(&c->n, n);
    return GH_OK;
}

struct buf {
    char *p;
    size_t len;
};

static size_t on_body(char *d, size_t s, size_t n, void *ud)
{
    struct buf *b = ud;
    char *np = realloc(b->p, b->len + s * n + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->len, d, s * n);
    b->len += s * n;
    b->p[b->len] = '\0';
    return s * n;
}

static double metric(int port, const char *name)
{
    char url[64];
    struct buf b = {0};
    double v = -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    if (curl_easy_perform(h) == CURLE_OK && b.p) {
        size_t nl = strlen(name);
        for (char *line = b.p; line && *line;) {
            if (strncmp(line, name, nl) == 0 && line[nl] == ' ') {
                v = strtod(line + nl + 1, NULL);
                break;
            }
            line = strchr(line, '\n');
            if (line)
                line++;
        }
    }
    curl_easy_cleanup(h);
    free(b.p);
    return v;
}

static int agent_port(const char *log)
{
    for (int tries = 0; tries < 300; tries++) {
        FILE *f = fopen(log, "r");
        char line[1024];
        int port = -1;
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "msg=\"http listening\"");
            char *q = p ? strstr(p, " port=") : NULL;
            if (q)
                port = (int)strtol(q + 6, NULL, 10);
        }
        if (f)
            fclose(f);
        if (port > 0)
            return port;
        sleep_ns(100 * GH_NS_PER_MS);
    }
    return -1;
}

static void path_near_self(const char *rel, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    int n2 = snprintf(out, cap, "%s/%s", self, rel);
    if (n2 < 0 || (size_t)n2 >= cap)
        out[0] = '\0';
}

int main(int argc, char **argv)
{
    long idle_s = argc > 1 ? strtol(argv[1], NULL, 10) : 20;
    long storm_s = argc > 2 ? strtol(argv[2], NULL, 10) : 10;
    long rate = argc > 3 ? strtol(argv[3], NULL, 10) : 100000;
    char agent[PATH_MAX], lib[PATH_MAX], dir[] = "/tmp/gh-bench-agent-XXXXXX";
    if (getenv("GH_AGENT"))
        snprintf(agent, sizeof agent, "%s", getenv("GH_AGENT"));
    else
        path_near_self("../bin/gpuheal-agent", agent, sizeof agent);
    if (getenv("GH_NVML_LIB"))
        snprintf(lib, sizeof lib, "%s", getenv("GH_NVML_LIB"));
    else
        path_near_self("../lib/libnvidia-ml-fake.so", lib, sizeof lib);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char conf[PATH_MAX], token[PATH_MAX], fifo[PATH_MAX], log[PATH_MAX], spool[PATH_MAX];
    snprintf(conf, sizeof conf, "%s/nvml.conf", dir);
    snprintf(token, sizeof token, "%s/token", dir);
    snprintf(fifo, sizeof fifo, "%s/kmsg.fifo", dir);
    snprintf(log, sizeof log, "%s/agent.log", dir);
    snprintf(spool, sizeof spool, "%s/spool", dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "gpus 8\nnvlinks 18\n* temp 55\n");
    fclose(f);
    f = fopen(token, "w");
    fprintf(f, "bench-token\n");
    fclose(f);
    if (mkfifo(fifo, 0600) != 0) {
        perror("mkfifo");
        return 1;
    }

    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct counter_sink sink;
    atomic_init(&sink.n, 0);
    struct gh_ingest_server_opts so = {.listen = "127.0.0.1:0", .token_file = token,
                                       .sink = count_sink, .sink_ctx = &sink};
    struct gh_ingest_server *srv = NULL;
    struct gh_err err;
    if (gh_ingest_server_new(&so, &srv, &err)) {
        fprintf(stderr, "ingest server: %s\n", err.msg);
        return 1;
    }
    char url[64], env_conf[PATH_MAX + 32];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gh_ingest_server_port(srv));
    snprintf(env_conf, sizeof env_conf, "GH_NVML_FAKE_CONFIG=%s", conf);
    putenv(env_conf);

    char *args[] = {agent, "--node", "bench-node", "--kmsg", fifo, "--nvml-lib", lib,
                    "--poll-interval", "1s", "--dcgm", "off", "--nic-root", "off",
                    "--telemetry-socket", "off", "--controller", url, "--token-file", token,
                    "--spool-dir", spool, "--listen", "127.0.0.1:0", "--log-level", "info", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    if (posix_spawn(&pid, agent, &fa, NULL, args, environ) != 0) {
        fprintf(stderr, "cannot start %s\n", agent);
        return 1;
    }
    int port = agent_port(log);
    if (port < 0) {
        fprintf(stderr, "agent did not start; see %s\n", log);
        kill(pid, SIGKILL);
        return 1;
    }
    long clk = sysconf(_SC_CLK_TCK);
    printf("gpuheal-agent: %s\n8 GPUs x 18 NVLinks (fake NVML), 1 s poll, shipping to an in-process ingest endpoint\n",
           agent);

    /* Idle: steady polling. */
    sleep_ns(3 * GH_NS_PER_S);
    long long t0 = cpu_ticks(pid);
    int64_t w0 = mono_ns();
    sleep_ns(idle_s * GH_NS_PER_S);
    long long t1 = cpu_ticks(pid);
    int64_t w1 = mono_ns();
    double idle_cpu = (double)(t1 - t0) / (double)clk / ((double)(w1 - w0) / 1e9) * 100.0;
    long rss_idle = status_kb(pid, "VmRSS:"), hwm_idle = status_kb(pid, "VmHWM:");
    printf("idle %lds: RSS %ld kB (peak %ld kB), CPU %.3f%% of one core (%lld ticks of 1/%ld s)\n",
           idle_s, rss_idle, hwm_idle, idle_cpu, t1 - t0, clk);
    print_rollup(pid, "idle");

    /* Storm: XID 79 on 8 GPUs through the kernel-log stand-in. */
    int wfd = open(fifo, O_WRONLY | O_CLOEXEC);
    if (wfd < 0) {
        perror("open fifo");
        kill(pid, SIGKILL);
        return 1;
    }
    double spooled0 = metric(port, "gpuheal_agent_signals_spooled_total");
    long long c0 = cpu_ticks(pid);
    int64_t s0 = mono_ns();
    unsigned long long seq = 1000, written = 0;
    char chunk[256 * 1024];
    printf("storm: %ld XID lines/s for %ld s\n", rate, storm_s);
    for (long sec = 0; sec < storm_s; sec++) {
        for (int tick = 0; tick < 100; tick++) {
            int64_t due = s0 + (sec * 100 + tick) * 10 * GH_NS_PER_MS;
            int64_t now = mono_ns();
            if (due > now)
                sleep_ns(due - now);
            long lines = rate / 100;
            size_t len = 0;
            for (long i = 0; i < lines; i++) {
                if (len + 200 > sizeof chunk) {
                    if (write(wfd, chunk, len) < 0)
                        perror("write");
                    len = 0;
                }
                len += (size_t)snprintf(chunk + len, sizeof chunk - len,
                    "3,%llu,%llu,-;NVRM: Xid (PCI:0000:%02x:00): 79, pid=1234, GPU has fallen off the bus.\n",
                    seq, seq * 10, 0x18 + (unsigned)(seq % 8) * 0x10);
                seq++;
                written++;
            }
            if (len && write(wfd, chunk, len) < 0)
                perror("write");
        }
        printf("  t=%2lds RSS %ld kB\n", sec + 1, status_kb(pid, "VmRSS:"));
    }
    int64_t s1 = mono_ns();
    sleep_ns(3 * GH_NS_PER_S);
    long long c1 = cpu_ticks(pid);
    double storm_cpu = (double)(c1 - c0) / (double)clk / ((double)(s1 - s0) / 1e9) * 100.0;
    double spooled1 = metric(port, "gpuheal_agent_signals_spooled_total");
    double coalesced = metric(port, "gpuheal_agent_coalesced_total");
    double records = metric(port, "gpuheal_agent_kmsg_records_total");
    printf("storm: %llu lines written, %.0f read by the agent, %.0f coalesced, %.0f signals "
           "spooled during the storm (%.1f/s)\n",
           written, records, coalesced, spooled1 - spooled0,
           (spooled1 - spooled0) / ((double)(s1 - s0) / 1e9));
    printf("storm: CPU %.1f%% of one core, RSS after %ld kB, peak over the whole run %ld kB\n",
           storm_cpu, status_kb(pid, "VmRSS:"), status_kb(pid, "VmHWM:"));
    printf("controller received %llu signals in total\n", (unsigned long long)atomic_load(&sink.n));

    close(wfd);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    gh_ingest_server_free(srv);
    curl_global_cleanup();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
