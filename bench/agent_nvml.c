/* agent_nvml.c - benchmark of the NVML source's cost: CPU time per poll of 8
 * GPUs with 18 NVLinks each through the fault-injection library, and the
 * share of one core it costs at the default 1 s interval, both for bare
 * polls and for the running source (poll thread + XID event thread).
 * Prints figures; never passes or fails on time.
 *
 * usage: agent_nvml [FAKE_LIB] [POLLS] [LIVE_SECONDS]
 *   FAKE_LIB defaults to $GH_NVML_LIB, else ../lib/libnvidia-ml-fake.so
 *   next to this binary (the build tree's layout); POLLS 2000; LIVE 5.
 * The fake answers from memory behind a mutex, so the figures are the
 * agent's own cost plus a cheap driver; a real driver's calls (ioctls)
 * cost more, and "NVML calls per poll" says how many there are. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/nvml.h"

static int64_t ts_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

static void count_signal(void *ctx, const struct gh_signal *sig)
{
    (void)sig;
    (*(unsigned long *)ctx)++;
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t kl = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) {
            char *end;
            kb = strtol(line + kl, &end, 10);
            break;
        }
    fclose(f);
    return kb;
}

static long parse_long(const char *s, long dflt)
{
    char *end;
    long v;
    if (!s)
        return dflt;
    errno = 0;
    v = strtol(s, &end, 10);
    return (errno || end == s || *end || v <= 0) ? dflt : v;
}

int main(int argc, char **argv)
{
    char lib[PATH_MAX + 64], config[] = "/tmp/gh-bench-nvml-XXXXXX";
    const char *env = getenv("GH_NVML_LIB");
    long polls = parse_long(argc > 2 ? argv[2] : NULL, 2000);
    long live_s = parse_long(argc > 3 ? argv[3] : NULL, 5);
    unsigned long signals = 0;
    struct gh_nvml_source *src = NULL;
    struct gh_nvml_stats st;
    struct gh_err err = {{0}};
    unsigned long long (*fake_calls)(void) = NULL;
    unsigned long long calls0 = 0, calls1 = 0;
    int64_t cpu0, cpu1, wall0, wall1;
    void *dl;
    FILE *f;
    int fd, rc;

    if (argc > 1 && argv[1][0]) {
        snprintf(lib, sizeof lib, "%s", argv[1]);
    } else if (env && env[0]) {
        snprintf(lib, sizeof lib, "%s", env);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        char *slash;
        if (n <= 0) {
            fprintf(stderr, "agent_nvml: cannot find myself; pass FAKE_LIB\n");
            return 2;
        }
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(lib, sizeof lib, "%s/../lib/libnvidia-ml-fake.so", self);
    }

    fd = mkstemp(config);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        fprintf(stderr, "agent_nvml: cannot write a config: %s\n", strerror(errno));
        return 2;
    }
    /* 8 H100-like GPUs, 18 NVLinks, counters that exist but stay quiet. */
    fputs("gpus 8\nnvlinks 18\n* temp 64\n* power_mw 520000\n* ecc.sbe.aggregate 12\n"
          "* remap.correctable 1\n* pcie.replay 3\n* nvlink.0.crc_flit 2\n",
          f);
    fclose(f);
    setenv("GH_NVML_FAKE_CONFIG", config, 1);

    struct gh_nvml_opts opts = {
        .lib_path = lib,
        .node = "bench-node",
        .poll_interval_ns = GH_NS_PER_S,
        .emit = count_signal,
        .emit_ctx = &signals,
    };
    rc = gh_nvml_source_new(&opts, &src, &err);
    if (rc != GH_OK) {
        fprintf(stderr, "agent_nvml: %s\n", err.msg);
        unlink(config);
        return 2;
    }
    dl = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (dl)
        *(void **)&fake_calls = dlsym(dl, "gh_nvml_fake_calls");

    /* 1. Bare polls, back to back. */
    for (int i = 0; i < 20; i++)
        gh_nvml_source_poll_once(src, NULL);
    if (fake_calls)
        calls0 = fake_calls();
    cpu0 = ts_ns(CLOCK_PROCESS_CPUTIME_ID);
    wall0 = ts_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < polls; i++)
        gh_nvml_source_poll_once(src, NULL);
    cpu1 = ts_ns(CLOCK_PROCESS_CPUTIME_ID);
    wall1 = ts_ns(CLOCK_MONOTONIC);
    if (fake_calls)
        calls1 = fake_calls();

    double us_cpu = (double)(cpu1 - cpu0) / 1e3 / (double)polls;
    double us_wall = (double)(wall1 - wall0) / 1e3 / (double)polls;
    printf("NVML source, 8 GPUs x 18 NVLinks, fault-injection library (%s)\n", lib);
    printf("  bare polls:        %ld\n", polls);
    printf("  CPU per poll:      %.1f us (all threads; wall %.1f us)\n", us_cpu, us_wall);
    if (fake_calls)
        printf("  NVML calls / poll: %.0f\n", (double)(calls1 - calls0) / (double)polls);
    printf("  at a 1 s interval: %.4f %% of one core (polls alone)\n", us_cpu / 1e6 * 100.0);

    /* 2. The running source: poll thread at 1 s + XID event thread. */
    if (live_s > 0) {
        if (gh_nvml_source_start(src, &err) != GH_OK) {
            fprintf(stderr, "agent_nvml: %s\n", err.msg);
        } else {
            cpu0 = ts_ns(CLOCK_PROCESS_CPUTIME_ID);
            wall0 = ts_ns(CLOCK_MONOTONIC);
            sleep((unsigned)live_s);
            cpu1 = ts_ns(CLOCK_PROCESS_CPUTIME_ID);
            wall1 = ts_ns(CLOCK_MONOTONIC);
            gh_nvml_source_stop(src);
            printf("  running %lds at 1 s: %.4f %% of one core (CPU %.0f us over %.2f s wall)\n",
                   live_s, (double)(cpu1 - cpu0) / (double)(wall1 - wall0) * 100.0,
                   (double)(cpu1 - cpu0) / 1e3, (double)(wall1 - wall0) / 1e9);
        }
    }
    gh_nvml_source_stats(src, &st);
    printf("  polls %llu, timeouts %llu, signals %lu (quiet counters: expect 0)\n",
           (unsigned long long)st.polls, (unsigned long long)st.poll_timeouts, signals);
    printf("  process RSS now %ld KiB, peak %ld KiB (whole benchmark process)\n",
           status_kb("VmRSS:"), status_kb("VmHWM:"));
    gh_nvml_source_free(src);
    unlink(config);
    return 0;
}
