/* test_agent_nvml.c - unit tests of the NVML source against the
 * fault-injection library (test/nvml-fake, built as GH_BUILD_DIR/lib/
 * libnvidia-ml-fake.so): each fault becomes the right signal once, quiet
 * counters give none, a hung call is reported within the deadline without
 * hanging the caller, and a missing library or driver is a clear error.
 * Every emitted signal must also pass the spec codec (gh_signal_encode). */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "agent/nvml.h"
#include "signal/signal_json.h"

#ifndef GH_BUILD_DIR
#error "GH_BUILD_DIR must be defined by the build"
#endif
#define FAKE_LIB GH_BUILD_DIR "/lib/libnvidia-ml-fake.so"

#define MAX_SIGS 256

/* ---- a controllable clock ---- */
static _Atomic int64_t fake_now = 1800000000LL * 1000000000LL;
static int64_t fake_clock_now(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_now);
}
static const struct gh_clock fake_clock = {fake_clock_now, NULL};
static void advance(int64_t ns)
{
    atomic_fetch_add(&fake_now, ns);
}

/* ---- a recorder for emitted signals ---- */
struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct gh_signal sigs[MAX_SIGS];
    int n;
    int bad_json; /* signals the codec refused */
    char last_json_err[GH_ERR_MAX];
};

static void record(void *ctx, const struct gh_signal *sig)
{
    struct recorder *r = ctx;
    struct gh_err err;
    char *json = NULL;

    pthread_mutex_lock(&r->mu);
    if (gh_signal_encode(sig, &json, &err) != GH_OK) {
        r->bad_json++;
        snprintf(r->last_json_err, sizeof r->last_json_err, "%s", err.msg);
    }
    free(json);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], sig, NULL) == GH_OK)
        r->n++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

static struct recorder *recorder_new(void)
{
    struct recorder *r = calloc(1, sizeof *r);
    assert_non_null(r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    return r;
}

static void recorder_free(struct recorder *r)
{
    assert_int_equal(r->bad_json, 0);
    for (int i = 0; i < r->n; i++)
        gh_signal_clear(&r->sigs[i]);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static int count(struct recorder *r)
{
    int n;
    pthread_mutex_lock(&r->mu);
    n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Waits up to secs for a signal of kind; returns its index or -1. */
static int wait_kind(struct recorder *r, enum gh_kind kind, double secs)
{
    struct timespec until;
    int found = -1;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)secs;
    until.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    for (;;) {
        for (int i = 0; i < r->n; i++)
            if (r->sigs[i].kind == kind) {
                found = i;
                break;
            }
        if (found >= 0 || pthread_cond_timedwait(&r->cond, &r->mu, &until) != 0)
            break;
    }
    pthread_mutex_unlock(&r->mu);
    return found;
}

static int count_kind(struct recorder *r, enum gh_kind kind)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        n += r->sigs[i].kind == kind;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* ---- fixtures ---- */

static char config_path[64];

static void write_config(const char *text)
{
    FILE *f;
    if (!config_path[0]) {
        int fd;
        snprintf(config_path, sizeof config_path, "/tmp/gh-nvml-fake-XXXXXX");
        fd = mkstemp(config_path);
        assert_true(fd >= 0);
        close(fd);
    }
    f = fopen(config_path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(setenv("GH_NVML_FAKE_CONFIG", config_path, 1), 0);
}

static struct gh_nvml_opts base_opts(struct recorder *r)
{
    struct gh_nvml_opts o = {
        .lib_path = FAKE_LIB,
        .node = "gpu-07",
        .poll_interval_ns = 20 * GH_NS_PER_MS,
        .deadline_ns = 2 * GH_NS_PER_S,
        .state_holddown_ns = 5 * GH_NS_PER_S,
        .clock = &fake_clock,
        .emit = record,
        .emit_ctx = r,
    };
    return o;
}

static struct gh_nvml_source *open_source(const char *config, const struct gh_nvml_opts *o)
{
    struct gh_nvml_source *src = NULL;
    struct gh_err err = {{0}};
    int rc;
    write_config(config);
    rc = gh_nvml_source_new(o, &src, &err);
    if (rc != GH_OK)
        fail_msg("gh_nvml_source_new: %s (%s)", gh_rc_str(rc), err.msg);
    return src;
}

/* Polls once, expecting GH_OK, advancing the fake clock 1 s after. */
static void poll_ok(struct gh_nvml_source *src)
{
    struct gh_err err = {{0}};
    int rc = gh_nvml_source_poll_once(src, &err);
    if (rc != GH_OK)
        fail_msg("poll_once: %s (%s)", gh_rc_str(rc), err.msg);
    advance(GH_NS_PER_S);
}

static double elapsed_s(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- tests ---- */

static void test_no_library(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = (void *)1;
    struct gh_err err = {{0}};
    (void)state;

    o.lib_path = "/nonexistent/libnvidia-ml.so.1";
    assert_int_equal(gh_nvml_source_new(&o, &src, &err), GH_ENOTFOUND);
    assert_null(src);
    assert_non_null(strstr(err.msg, "NVML: /nonexistent/libnvidia-ml.so.1 not found (dlopen: "));
    assert_non_null(strstr(err.msg, "; GPU polling disabled"));

    /* The default name, on a machine without NVIDIA's driver. */
    if (access("/dev/nvidiactl", F_OK) != 0) {
        o.lib_path = NULL;
        err.msg[0] = '\0';
        int rc = gh_nvml_source_new(&o, &src, &err);
        if (rc == GH_OK) {
            gh_nvml_source_free(src);
        } else {
            assert_int_equal(rc, GH_ENOTFOUND);
            assert_non_null(strstr(err.msg, "GPU polling disabled"));
        }
    }
    assert_int_equal(count(r), 0);
    recorder_free(r);
}

static void test_bad_opts(void **state)
{
    struct gh_nvml_opts o = {0};
    struct gh_nvml_source *src = NULL;
    struct gh_err err = {{0}};
    (void)state;
    assert_int_equal(gh_nvml_source_new(&o, &src, &err), GH_EINVAL);
    assert_null(src);
    gh_nvml_source_free(NULL);
}

static void test_driver_not_loaded(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = NULL;
    struct gh_err err = {{0}};
    (void)state;

    write_config("init_error 9\n");
    assert_int_equal(gh_nvml_source_new(&o, &src, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)"));
    assert_non_null(strstr(err.msg, "GPU polling disabled"));

    write_config("gpus 0\n");
    assert_int_equal(gh_nvml_source_new(&o, &src, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "no GPU found"));
    recorder_free(r);
}

static const char *const quiet_8 =
    "gpus 8\n"
    "nvlinks 18\n"
    "* ecc.sbe.aggregate 12\n"
    "* ecc.sbe.volatile 3\n"
    "* remap.correctable 2\n"
    "* pcie.replay 40\n"
    "* nvlink.0.replay 7\n"
    "* temp 61\n"
    "* power_mw 412000\n";

static void test_quiet_counters_no_signals(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source(quiet_8, &o);
    struct gh_nvml_gpu_health h;
    struct gh_nvml_stats st;
    (void)state;

    assert_int_equal(gh_nvml_source_gpu_count(src), 8);
    for (int i = 0; i < 6; i++)
        poll_ok(src);
    assert_int_equal(count(r), 0);

    assert_int_equal(gh_nvml_source_health(src, 5, &h), GH_OK);
    assert_int_equal(h.index, 5);
    assert_string_equal(h.pci, "0000:68:00.0");
    assert_string_equal(h.uuid, "GPU-fa4e0000-0000-4000-8000-000000000005");
    assert_false(h.lost);
    assert_true(h.has_temp);
    assert_true(h.celsius == 61.0);
    assert_true(h.has_power);
    assert_true(h.watts == 412.0);
    assert_true(h.has_ecc);
    assert_int_equal(h.ecc_sbe_aggregate, 12);
    assert_int_equal(h.ecc_sbe_volatile, 3);
    assert_int_equal(h.ecc_dbe_volatile, 0);
    assert_true(h.has_remap);
    assert_int_equal(h.remap_correctable, 2);
    assert_true(h.has_pcie_replay);
    assert_int_equal(h.pcie_replay, 40);
    assert_int_equal(h.nvlinks, 18);
    assert_int_equal(gh_nvml_source_health(src, 8, &h), GH_ENOTFOUND);
    assert_int_equal(gh_nvml_source_health(src, -1, &h), GH_ENOTFOUND);

    gh_nvml_source_stats(src, &st);
    assert_int_equal(st.polls, 6);
    assert_int_equal(st.signals, 0);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_ecc_dbe(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 4\n"
                                             "3 ecc.dbe.volatile 2 at=3\n"
                                             "3 ecc.dbe.aggregate 2 at=3\n",
                                             &o);
    (void)state;

    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src);
    assert_int_equal(count(r), 2);
    for (int i = 0; i < 2; i++) {
        const struct gh_signal *s = &r->sigs[i];
        assert_int_equal(s->kind, GH_KIND_ECC);
        assert_int_equal(s->source, GH_SRC_NVML);
        assert_int_equal(s->gpu, 3);
        assert_string_equal(s->node, "gpu-07");
        assert_string_equal(s->pci, "0000:48:00.0");
        assert_int_equal(s->bits, GH_ECC_DOUBLE);
        assert_true(s->has_count);
        assert_int_equal(s->count, 2);
        assert_non_null(strstr(s->msg, "0 -> 2"));
    }
    assert_true(r->sigs[0].is_volatile);
    assert_false(r->sigs[1].is_volatile);
    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 2);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_ecc_standing_dbe_reported_once(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 2\n"
                                             "1 ecc.dbe.aggregate 5\n"
                                             "* ecc.sbe.aggregate 100\n",
                                             &o);
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_ECC);
    assert_int_equal(r->sigs[0].gpu, 1);
    assert_int_equal(r->sigs[0].count, 5);
    assert_false(r->sigs[0].is_volatile);
    assert_non_null(strstr(r->sigs[0].msg, "at first poll"));
    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_ecc_sbe_moves_and_volatile_reset(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 1\n"
                                             "0 ecc.sbe.volatile 10\n"
                                             "0 ecc.sbe.volatile 11 at=3\n"
                                             "0 ecc.sbe.volatile 0 at=4\n",
                                             &o);
    (void)state;

    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src); /* 10 -> 11 */
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].bits, GH_ECC_SINGLE);
    assert_true(r->sigs[0].is_volatile);
    assert_int_equal(r->sigs[0].count, 11);
    poll_ok(src); /* 11 -> 0: driver reload, re-baselined silently */
    poll_ok(src);
    assert_int_equal(count(r), 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_row_remap_failure_and_pending(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 3\n"
                                             "2 remap.uncorrectable 1 at=2\n"
                                             "2 remap.failure 1 at=2\n"
                                             "0 remap.pending 1 at=3\n"
                                             "0 remap.pending 0 at=5\n",
                                             &o);
    const struct gh_signal *s;
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    s = &r->sigs[0];
    assert_int_equal(s->kind, GH_KIND_ROW_REMAP);
    assert_int_equal(s->gpu, 2);
    assert_true(s->failure);
    assert_false(s->pending);
    assert_int_equal(s->uncorrectable, 1);
    assert_int_equal(s->correctable, 0);

    poll_ok(src);
    assert_int_equal(count(r), 2);
    s = &r->sigs[1];
    assert_int_equal(s->kind, GH_KIND_ROW_REMAP);
    assert_int_equal(s->gpu, 0);
    assert_true(s->pending);
    assert_false(s->failure);

    poll_ok(src);
    assert_int_equal(count(r), 2);
    poll_ok(src); /* pending cleared (after a reset) */
    assert_int_equal(count(r), 3);
    assert_false(r->sigs[2].pending);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_row_remap_standing_failure(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 2\n1 remap.failure 1\n", &o);
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_ROW_REMAP);
    assert_true(r->sigs[0].failure);
    assert_non_null(strstr(r->sigs[0].msg, "at first poll"));
    poll_ok(src);
    assert_int_equal(count(r), 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_retired_pages(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 1\n"
                                             "* unsupported.nvmlDeviceGetRemappedRows 1\n"
                                             "0 retired.dbe 2 at=2\n"
                                             "0 retired.pending 1 at=2\n",
                                             &o);
    struct gh_nvml_gpu_health h;
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_ROW_REMAP);
    assert_true(r->sigs[0].pending);
    assert_int_equal(r->sigs[0].uncorrectable, 2);
    assert_non_null(strstr(r->sigs[0].msg, "page retirement"));
    assert_int_equal(gh_nvml_source_health(src, 0, &h), GH_OK);
    assert_false(h.has_remap);
    assert_true(h.has_retired);
    assert_int_equal(h.retired_dbe, 2);
    assert_true(h.retired_pending);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_lost_gpu_once_until_it_answers(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 4\n"
                                             "1 lost 1 at=2\n"
                                             "1 lost 0 at=5\n"
                                             "1 lost 1 at=7\n",
                                             &o);
    struct gh_nvml_gpu_health h;
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_GPU_LOST);
    assert_int_equal(r->sigs[0].gpu, 1);
    assert_string_equal(r->sigs[0].pci, "0000:28:00.0");
    assert_non_null(strstr(r->sigs[0].msg, "NVML_ERROR_GPU_IS_LOST (15)"));
    assert_int_equal(gh_nvml_source_health(src, 1, &h), GH_OK);
    assert_true(h.lost);
    assert_int_equal(gh_nvml_source_health(src, 0, &h), GH_OK);
    assert_false(h.lost);

    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 1); /* once */
    poll_ok(src);                  /* step 5: answers again */
    assert_int_equal(gh_nvml_source_health(src, 1, &h), GH_OK);
    assert_false(h.lost);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    poll_ok(src); /* step 7: lost again: a new signal */
    assert_int_equal(count(r), 2);
    assert_int_equal(r->sigs[1].kind, GH_KIND_GPU_LOST);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_reset_required(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 1\n0 reset_required 1 at=2\n", &o);
    (void)state;

    poll_ok(src);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_GPU_LOST);
    assert_non_null(strstr(r->sigs[0].msg, "NVML_ERROR_RESET_REQUIRED"));
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_nvlink_and_pcie_counters(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 4\n"
                                             "nvlinks 6\n"
                                             "2 nvlink.3.crc_flit 0 at=3 every=1:5\n"
                                             "1 pcie.replay 7 at=2\n",
                                             &o);
    int nv = 0, pc = 0;
    (void)state;

    for (int i = 0; i < 5; i++)
        poll_ok(src);
    /* crc_flit: 0 (steps 1-3), 5, 10 -> two signals; pcie: 0 -> 7 once */
    for (int i = 0; i < r->n; i++) {
        const struct gh_signal *s = &r->sigs[i];
        if (s->kind == GH_KIND_NVLINK) {
            assert_int_equal(s->gpu, 2);
            assert_true(s->has_link);
            assert_int_equal(s->link, 3);
            assert_string_equal(s->counter, "crc_flit");
            assert_int_equal(s->count, 5 * (nv + 1));
            nv++;
        } else if (s->kind == GH_KIND_PCIE) {
            assert_int_equal(s->gpu, 1);
            assert_string_equal(s->counter, "replay");
            assert_int_equal(s->count, 7);
            pc++;
        } else {
            fail_msg("unexpected signal %s", gh_kind_name(s->kind));
        }
    }
    assert_int_equal(nv, 2);
    assert_int_equal(pc, 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_thermal_and_power(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 3\n"
                                             "0 temp 88 at=2\n"   /* slowdown 90 - 5 = 85 */
                                             "0 temp 50 at=8\n"
                                             "1 reasons 0x40 at=2\n"
                                             "2 reasons 0x4 at=3\n",
                                             &o);
    int t0 = 0;
    (void)state;

    poll_ok(src);
    assert_int_equal(count(r), 0);
    poll_ok(src);
    assert_int_equal(count(r), 2);
    assert_int_equal(r->sigs[0].kind, GH_KIND_THERMAL);
    assert_int_equal(r->sigs[0].gpu, 0);
    assert_true(r->sigs[0].celsius == 88.0);
    assert_false(r->sigs[0].throttled);
    assert_non_null(strstr(r->sigs[0].msg, "(threshold 85 C) over"));
    assert_int_equal(r->sigs[1].kind, GH_KIND_THERMAL);
    assert_int_equal(r->sigs[1].gpu, 1);
    assert_true(r->sigs[1].throttled);
    poll_ok(src);
    assert_int_equal(count(r), 3);
    assert_int_equal(r->sigs[2].kind, GH_KIND_POWER);
    assert_int_equal(r->sigs[2].gpu, 2);
    assert_true(r->sigs[2].throttled);
    assert_true(r->sigs[2].watts == 250.0);
    assert_non_null(strstr(r->sigs[2].msg, "limit 700.0 W"));
    for (int i = 0; i < 5; i++)
        poll_ok(src);
    /* step 8: GPU 0 cools down, 6 s after the first report (hold-down 5 s) */
    assert_int_equal(count(r), 4);
    assert_int_equal(r->sigs[3].kind, GH_KIND_THERMAL);
    assert_true(r->sigs[3].celsius == 50.0);
    assert_non_null(strstr(r->sigs[3].msg, "under"));
    for (int i = 0; i < r->n; i++)
        t0 += r->sigs[i].kind == GH_KIND_THERMAL && r->sigs[i].gpu == 0;
    assert_int_equal(t0, 2);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_thermal_flapping_is_held_down(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    char config[1024];
    size_t n = 0;
    struct gh_nvml_source *src;
    (void)state;

    /* Over and under the threshold on alternate polls, steps 2..20. */
    n += (size_t)snprintf(config + n, sizeof config - n, "gpus 1\n");
    for (int step = 2; step <= 20; step++)
        n += (size_t)snprintf(config + n, sizeof config - n, "0 temp %d at=%d\n",
                              step % 2 ? 60 : 89, step);
    src = open_source(config, &o);
    for (int i = 0; i < 20; i++)
        poll_ok(src); /* 1 s per poll, hold-down 5 s */
    /* at most one report per 5 s over 19 s of flapping */
    assert_true(count_kind(r, GH_KIND_THERMAL) >= 2);
    assert_true(count_kind(r, GH_KIND_THERMAL) <= 4);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_xid_event(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = open_source("gpus 4\n2 xid 79 at=3\n", &o);
    struct gh_nvml_stats st;
    struct gh_err err = {{0}};
    int i;
    (void)state;

    assert_int_equal(gh_nvml_source_start(src, &err), GH_OK);
    assert_int_equal(gh_nvml_source_start(src, &err), GH_EINVAL);
    i = wait_kind(r, GH_KIND_XID, 10.0);
    assert_true(i >= 0);
    assert_int_equal(r->sigs[i].code, 79);
    assert_int_equal(r->sigs[i].gpu, 2);
    assert_string_equal(r->sigs[i].pci, "0000:38:00.0");
    assert_non_null(strstr(r->sigs[i].msg, "Xid 79"));
    gh_nvml_source_stop(src);
    gh_nvml_source_stop(src);
    gh_nvml_source_stats(src, &st);
    assert_true(st.polls >= 3);
    assert_int_equal(st.events, 1);
    assert_int_equal(count_kind(r, GH_KIND_XID), 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_events_unsupported_still_polls(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src =
        open_source("gpus 2\nevents unsupported\n0 xid 48 at=2\n1 ecc.dbe.volatile 1 at=3\n", &o);
    struct gh_err err = {{0}};
    (void)state;

    assert_int_equal(gh_nvml_source_start(src, &err), GH_OK);
    assert_true(wait_kind(r, GH_KIND_ECC, 10.0) >= 0);
    gh_nvml_source_free(src); /* stops */
    assert_int_equal(count_kind(r, GH_KIND_XID), 0);
    recorder_free(r);
}

static void test_hanging_call(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src;
    struct gh_nvml_gpu_health h;
    struct gh_nvml_stats st;
    struct gh_err err = {{0}};
    struct timespec t0;
    double took;
    int rc;
    (void)state;

    o.deadline_ns = 300 * GH_NS_PER_MS;
    src = open_source("gpus 4\n2 hang.nvmlDeviceGetTotalEccErrors 1.5 at=2\n", &o);
    poll_ok(src);

    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = gh_nvml_source_poll_once(src, &err);
    took = elapsed_s(&t0);
    assert_int_equal(rc, GH_ETIMEOUT);
    assert_true(took >= 0.25 && took < 1.0);
    assert_non_null(strstr(err.msg, "nvmlDeviceGetTotalEccErrors on GPU 2 did not return within 0.3 s"));
    assert_int_equal(count(r), 1);
    assert_int_equal(r->sigs[0].kind, GH_KIND_GPU_LOST);
    assert_int_equal(r->sigs[0].gpu, 2);
    assert_string_equal(r->sigs[0].msg, err.msg);
    assert_int_equal(gh_nvml_source_health(src, 2, &h), GH_OK);
    assert_true(h.lost);

    /* Still stuck: returns at once, no second signal. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = gh_nvml_source_poll_once(src, &err);
    assert_true(elapsed_s(&t0) < 0.1);
    assert_int_equal(rc, GH_EAGAIN);
    assert_non_null(strstr(err.msg, "still has not returned"));
    assert_int_equal(count(r), 1);

    /* The call returns after 1.5 s; polling resumes by itself. */
    usleep(1500 * 1000);
    poll_ok(src);
    assert_int_equal(gh_nvml_source_health(src, 2, &h), GH_OK);
    assert_false(h.lost);
    poll_ok(src);
    assert_int_equal(count(r), 1);
    gh_nvml_source_stats(src, &st);
    assert_int_equal(st.poll_timeouts, 1);
    gh_nvml_source_free(src);
    recorder_free(r);
}

static void test_hang_then_free_does_not_block(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src;
    struct gh_err err = {{0}};
    struct timespec t0;
    (void)state;

    o.deadline_ns = 200 * GH_NS_PER_MS;
    src = open_source("gpus 2\n0 hang.nvmlDeviceGetPowerUsage 1.2 at=1\n", &o);
    assert_int_equal(gh_nvml_source_start(src, &err), GH_OK);
    assert_true(wait_kind(r, GH_KIND_GPU_LOST, 5.0) >= 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gh_nvml_source_free(src); /* the worker is abandoned inside the call */
    /* bounded by the event wait (0.5 s) + the deadline (0.2 s) */
    assert_true(elapsed_s(&t0) < 1.5);
    assert_int_equal(count_kind(r, GH_KIND_GPU_LOST), 1);
    recorder_free(r);
    /* Let the abandoned worker return, shut NVML down and free its state
     * before the next test loads the fake again (ASan checks the path). */
    usleep(1500 * 1000);
}

static void test_event_wait_hang(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src;
    struct gh_err err = {{0}};
    struct timespec t0;
    int i;
    (void)state;

    o.deadline_ns = 200 * GH_NS_PER_MS;
    src = open_source("gpus 2\n* hang.nvmlEventSetWait_v2 1.5 at=2\n", &o);
    assert_int_equal(gh_nvml_source_start(src, &err), GH_OK);
    i = wait_kind(r, GH_KIND_GPU_LOST, 5.0);
    assert_true(i >= 0);
    assert_int_equal(r->sigs[i].gpu, -1);
    assert_non_null(strstr(r->sigs[i].msg, "nvmlEventSetWait_v2"));
    assert_non_null(strstr(r->sigs[i].msg, "did not return within 0.2 s"));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gh_nvml_source_free(src); /* the event thread is abandoned */
    assert_true(elapsed_s(&t0) < 1.5);
    assert_int_equal(count_kind(r, GH_KIND_GPU_LOST), 1);
    recorder_free(r);
    /* It returns, finds itself last out, and shuts NVML down (the next test
     * reloads the fake's config only if it did). */
    usleep(1500 * 1000);
}

static void test_init_hang(void **state)
{
    struct recorder *r = recorder_new();
    struct gh_nvml_opts o = base_opts(r);
    struct gh_nvml_source *src = NULL;
    struct gh_err err = {{0}};
    struct timespec t0;
    (void)state;

    o.deadline_ns = 200 * GH_NS_PER_MS;
    write_config("gpus 1\n0 hang.nvmlDeviceGetUUID 1.0\n");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(gh_nvml_source_new(&o, &src, &err), GH_ETIMEOUT);
    assert_true(elapsed_s(&t0) < 0.8);
    assert_null(src);
    assert_non_null(strstr(err.msg, "nvmlDeviceGetUUID did not return within 0.2 s"));
    recorder_free(r);
    usleep(1200 * 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_library),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_driver_not_loaded),
        cmocka_unit_test(test_quiet_counters_no_signals),
        cmocka_unit_test(test_ecc_dbe),
        cmocka_unit_test(test_ecc_standing_dbe_reported_once),
        cmocka_unit_test(test_ecc_sbe_moves_and_volatile_reset),
        cmocka_unit_test(test_row_remap_failure_and_pending),
        cmocka_unit_test(test_row_remap_standing_failure),
        cmocka_unit_test(test_retired_pages),
        cmocka_unit_test(test_lost_gpu_once_until_it_answers),
        cmocka_unit_test(test_reset_required),
        cmocka_unit_test(test_nvlink_and_pcie_counters),
        cmocka_unit_test(test_thermal_and_power),
        cmocka_unit_test(test_thermal_flapping_is_held_down),
        cmocka_unit_test(test_xid_event),
        cmocka_unit_test(test_events_unsupported_still_polls),
        cmocka_unit_test(test_hanging_call),
        cmocka_unit_test(test_hang_then_free_does_not_block),
        cmocka_unit_test(test_event_wait_hang),
        cmocka_unit_test(test_init_hang),
        cmocka_unit_test(test_ecc_dbe), /* the fake was shut down and reloads */
    };
    /* Keep the fake loaded for the whole run, so that the sources' dlclose
     * does not unmap it between tests (its state is reloaded by nvmlInit_v2
     * anyway; unmapping would only make TSan see old and new globals at one
     * address as a race). */
    void *keep = dlopen(FAKE_LIB, RTLD_NOW | RTLD_LOCAL);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (keep)
        dlclose(keep);
    if (config_path[0])
        unlink(config_path);
    return rc;
}
