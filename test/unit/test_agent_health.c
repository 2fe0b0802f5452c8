/* test_agent_health.c - unit tests of node-local GPU health: the state
 * machine driven by signal sequences (XIDs by the catalog, ECC, row remap,
 * throttling, lost GPUs), recovery by reset, probe and NVML snapshot, GPU
 * index resolution from PCI id and UUID, bounded evidence with pinning,
 * duplicates, limits, and what time alone changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/health.h"
#include "signal/xid_catalog.h"

#define S(x) ((int64_t)(x) * GH_NS_PER_S)
#define T0 S(1800000000)

struct fake_clock {
    int64_t now;
};

static int64_t fake_now(void *ctx)
{
    return ((struct fake_clock *)ctx)->now;
}

struct fx {
    struct fake_clock fc;
    struct gh_clock clock;
    struct gh_health *h;
};

static int setup_opts(void **state, int evidence)
{
    struct fx *f = calloc(1, sizeof *f);
    f->fc.now = T0;
    f->clock.now = fake_now;
    f->clock.ctx = &f->fc;
    struct gh_health_opts o = {.clock = &f->clock,
                               .evidence_per_gpu = evidence,
                               .degraded_hold_ns = S(600),
                               .throttle_sustain_ns = S(60),
                               .sbe_window_ns = S(3600),
                               .sbe_burst = 100};
    struct gh_err err;
    if (gh_health_new(&o, &f->h, &err) != GH_OK) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_opts(state, 0);
}

static int setup_small(void **state)
{
    return setup_opts(state, 4);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gh_health_free(f->h);
    free(f);
    return 0;
}

/* Feeds one signal built from the arguments; ts is seconds after T0. */
static int feed(struct fx *f, enum gh_kind kind, int gpu, int64_t ts, void (*set)(struct gh_signal *))
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = kind;
    s.source = GH_SRC_NVML;
    s.gpu = gpu;
    s.ts_ns = T0 + S(ts);
    gh_signal_set_str(&s.node, "n1", 2);
    if (set)
        set(&s);
    struct gh_err err;
    int rc = gh_health_feed(f->h, &s, &err);
    gh_signal_clear(&s);
    return rc;
}

static int feed_xid(struct fx *f, int gpu, int64_t ts, int code)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.gpu = gpu;
    s.code = code;
    s.ts_ns = T0 + S(ts);
    char msg[64];
    snprintf(msg, sizeof msg, "NVRM: Xid %d", code);
    gh_signal_set_str(&s.msg, msg, strlen(msg));
    int rc = gh_health_feed(f->h, &s, NULL);
    gh_signal_clear(&s);
    return rc;
}

static struct gh_health_gpu gpu_of(struct fx *f, int index)
{
    struct gh_health_gpu g;
    memset(&g, 0, sizeof g);
    int i = gh_health_find(f->h, index);
    assert_true(i >= 0);
    assert_int_equal(gh_health_gpu_at(f->h, i, &g), GH_OK);
    return g;
}

/* A catalog code with this severity that is neither application nor secondary. */
static int code_with(enum gh_severity sev)
{
    for (int i = 0; i < gh_xid_count(); i++) {
        const struct gh_xid_info *x = gh_xid_at(i);
        if (x->severity == sev && !x->application && !x->secondary)
            return x->code;
    }
    fail_msg("no XID with severity %d", (int)sev);
    return -1;
}

static void test_empty(void **state)
{
    struct fx *f = *state;
    struct gh_health_summary sum;
    gh_health_summarize(f->h, &sum);
    assert_int_equal(sum.state, GH_GPU_HEALTHY);
    assert_int_equal(sum.reason, GH_HR_NONE);
    assert_int_equal(sum.gpus, 0);
    assert_string_equal(sum.message, "no GPU observed yet");
    assert_int_equal(gh_health_next_change(f->h), INT64_MAX);
    assert_string_equal(gh_health_reason_name(GH_HR_NONE), "AllGPUsHealthy");
    assert_string_equal(gh_gpu_state_crd(GH_GPU_UNHEALTHY), "Failed");
}

static void test_xid79_critical(void **state)
{
    struct fx *f = *state;
    struct gh_nvml_gpu_health snap = {.index = 0};
    for (int i = 0; i < 8; i++) {
        snap.index = i;
        snprintf(snap.pci, sizeof snap.pci, "00000000:%02X:00.0", 0x10 + i);
        assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    }
    uint64_t g0 = gh_health_generation(f->h);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gh_health_generation(f->h), g0); /* nothing new */

    assert_int_equal(feed_xid(f, 3, 1, 79), GH_OK);
    assert_true(gh_health_generation(f->h) > g0);
    struct gh_health_gpu g = gpu_of(f, 3);
    assert_int_equal(g.state, GH_GPU_UNHEALTHY);
    assert_int_equal(g.reason, GH_HR_XID_CRITICAL);
    assert_int_equal(g.code, 79);
    assert_true(g.has_last_xid);
    assert_int_equal(g.last_xid, 79);
    assert_string_equal(g.pci, "0000:13:00.0");
    assert_int_equal(g.last_signal_ns, T0 + S(1));

    struct gh_health_summary sum;
    gh_health_summarize(f->h, &sum);
    assert_int_equal(sum.state, GH_GPU_UNHEALTHY);
    assert_int_equal(sum.reason, GH_HR_XID_CRITICAL);
    assert_int_equal(sum.gpu, 3);
    assert_int_equal(sum.gpus, 8);
    assert_int_equal(sum.healthy, 7);
    assert_int_equal(sum.unhealthy, 1);
    assert_non_null(strstr(sum.message, "GPU 3 (0000:13:00.0): XID 79"));
    assert_non_null(strstr(sum.message, "critical"));

    const struct gh_signal *ev[8];
    size_t n = gh_health_evidence(f->h, gh_health_find(f->h, 3), ev, 8);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0]->code, 79);
    assert_int_equal(ev[0]->gpu, 3);
    /* sticky: time alone does not heal a critical XID */
    f->fc.now += S(86400);
    assert_int_equal(gpu_of(f, 3).state, GH_GPU_UNHEALTHY);
}

static void test_xid_severities(void **state)
{
    struct fx *f = *state;
    assert_int_equal(feed_xid(f, 0, 0, 13), GH_OK); /* application: evidence only */
    assert_int_equal(feed_xid(f, 1, 0, 45), GH_OK); /* secondary */
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
    assert_int_equal(gpu_of(f, 0).last_xid, 13);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);

    assert_int_equal(feed_xid(f, 2, 0, code_with(GH_SEV_HIGH)), GH_OK);
    assert_int_equal(gpu_of(f, 2).reason, GH_HR_XID_HIGH);
    assert_int_equal(gpu_of(f, 2).state, GH_GPU_UNHEALTHY);

    assert_int_equal(feed_xid(f, 4, 0, code_with(GH_SEV_MEDIUM)), GH_OK);
    assert_int_equal(gpu_of(f, 4).reason, GH_HR_XID_MEDIUM);
    assert_int_equal(gpu_of(f, 4).state, GH_GPU_DEGRADED);

    int low = code_with(GH_SEV_LOW);
    assert_int_equal(feed_xid(f, 5, 0, low), GH_OK);
    assert_int_equal(gpu_of(f, 5).reason, GH_HR_XID_LOW);

    /* a code not in the catalog: medium, as the catalog's unknown entry says */
    assert_false(gh_xid_known(60000));
    assert_int_equal(feed_xid(f, 6, 0, 60000), GH_OK);
    assert_int_equal(gpu_of(f, 6).state, GH_GPU_DEGRADED);
    assert_non_null(strstr(gpu_of(f, 6).what, "not in the catalog"));

    /* degraded events end after the quiet period; the next change says when */
    assert_int_equal(gh_health_next_change(f->h), T0 + S(600));
    f->fc.now = T0 + S(599);
    assert_int_equal(gpu_of(f, 5).state, GH_GPU_DEGRADED);
    f->fc.now = T0 + S(600);
    assert_int_equal(gpu_of(f, 5).state, GH_GPU_HEALTHY);
    assert_int_equal(gpu_of(f, 4).state, GH_GPU_HEALTHY);
    assert_int_equal(gpu_of(f, 2).state, GH_GPU_UNHEALTHY); /* high: sticky */
    assert_int_equal(gh_health_next_change(f->h), INT64_MAX);

    /* the most serious reason of a GPU wins */
    assert_int_equal(feed_xid(f, 2, 700, low), GH_OK);
    f->fc.now = T0 + S(700);
    assert_int_equal(gpu_of(f, 2).reason, GH_HR_XID_HIGH);
}

static void lost_set(struct gh_signal *s)
{
    gh_signal_set_str(&s->msg, "GPU has fallen off the bus", 26);
}

static void probe_pass(struct gh_signal *s)
{
    s->source = GH_SRC_PROBE;
    gh_signal_set_str(&s->check, "gemm_checksum", 13);
    s->passed = true;
}

static void probe_fail(struct gh_signal *s)
{
    s->source = GH_SRC_PROBE;
    gh_signal_set_str(&s->check, "gemm_checksum", 13);
    gh_signal_set_str(&s->detail, "mismatch", 8);
    s->passed = false;
}

static void test_lost_and_recovery(void **state)
{
    struct fx *f = *state;
    struct gh_nvml_gpu_health snap = {.index = 1};
    snprintf(snap.pci, sizeof snap.pci, "00000000:3B:00.0");
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);

    f->fc.now = T0 + S(10);
    assert_int_equal(feed(f, GH_KIND_GPU_LOST, 1, 10, lost_set), GH_OK);
    struct gh_health_gpu g = gpu_of(f, 1);
    assert_int_equal(g.state, GH_GPU_LOST);
    assert_int_equal(g.reason, GH_HR_GPU_LOST);
    struct gh_health_summary sum;
    gh_health_summarize(f->h, &sum);
    assert_int_equal(sum.lost, 1);
    assert_string_equal(gh_health_reason_name(sum.reason), "GPULost");

    /* a snapshot that never saw the loss cannot end it */
    f->fc.now = T0 + S(11);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_LOST);
    /* NVML sees it lost, then answering again: over */
    snap.lost = true;
    f->fc.now = T0 + S(12);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_LOST);
    snap.lost = false;
    f->fc.now = T0 + S(13);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);
    /* a late copy of the old loss does not bring it back */
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_GPU_LOST;
    s.source = GH_SRC_KMSG;
    s.gpu = 1;
    s.ts_ns = T0 + S(12);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);

    /* a snapshot alone may report a loss; a passing probe ends it */
    snap.lost = true;
    f->fc.now = T0 + S(20);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_LOST);
    assert_int_equal(feed(f, GH_KIND_PROBE_RESULT, 1, 21, probe_pass), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);

    /* a failing probe: unhealthy until a reset */
    assert_int_equal(feed(f, GH_KIND_PROBE_RESULT, 1, 30, probe_fail), GH_OK);
    g = gpu_of(f, 1);
    assert_int_equal(g.reason, GH_HR_PROBE_FAILED);
    assert_non_null(strstr(g.what, "gemm_checksum"));
    gh_health_note_reset(f->h, 1, T0 + S(40));
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);
}

static void test_reset_orders_by_time(void **state)
{
    struct fx *f = *state;
    assert_int_equal(feed_xid(f, 0, 100, 79), GH_OK);
    assert_int_equal(feed_xid(f, 1, 100, 79), GH_OK);
    gh_health_note_reset(f->h, 0, T0 + S(200));
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_UNHEALTHY); /* another GPU */
    /* observed before the reset, delivered after it: void */
    assert_int_equal(feed_xid(f, 0, 150, 48), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
    assert_int_equal(feed_xid(f, 0, 250, 79), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_UNHEALTHY);
    gh_health_note_reset(f->h, -1, T0 + S(300));
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);
}

static int64_t g_count;
static bool g_volatile;
static void dbe(struct gh_signal *s)
{
    s->bits = GH_ECC_DOUBLE;
    s->has_count = true;
    s->count = g_count;
    s->is_volatile = g_volatile;
}
static void sbe(struct gh_signal *s)
{
    s->bits = GH_ECC_SINGLE;
    s->has_count = true;
    s->count = g_count;
    s->is_volatile = g_volatile;
}

static void test_ecc(void **state)
{
    struct fx *f = *state;
    /* aggregate history seen at start: shown, not news */
    g_volatile = false;
    g_count = 5;
    assert_int_equal(feed(f, GH_KIND_ECC, 0, 1, dbe), GH_OK);
    struct gh_health_gpu g = gpu_of(f, 0);
    assert_int_equal(g.state, GH_GPU_HEALTHY);
    assert_true(g.has_ecc_double_bit);
    assert_int_equal(g.ecc_double_bit, 5);
    g_count = 6;
    assert_int_equal(feed(f, GH_KIND_ECC, 0, 2, dbe), GH_OK);
    g = gpu_of(f, 0);
    assert_int_equal(g.reason, GH_HR_ECC_DOUBLE_BIT);
    assert_int_equal(g.ecc_double_bit, 6);

    /* volatile: any count since the driver loaded is news */
    g_volatile = true;
    g_count = 0;
    assert_int_equal(feed(f, GH_KIND_ECC, 1, 1, dbe), GH_OK);
    assert_int_equal(gpu_of(f, 1).state, GH_GPU_HEALTHY);
    g_count = 1;
    assert_int_equal(feed(f, GH_KIND_ECC, 2, 1, dbe), GH_OK);
    assert_int_equal(gpu_of(f, 2).state, GH_GPU_UNHEALTHY);

    /* correctable: a burst of 100 within the window degrades */
    g_volatile = true;
    g_count = 1000;
    assert_int_equal(feed(f, GH_KIND_ECC, 3, 0, sbe), GH_OK); /* baseline */
    g_count = 1050;
    assert_int_equal(feed(f, GH_KIND_ECC, 3, 10, sbe), GH_OK);
    assert_int_equal(gpu_of(f, 3).state, GH_GPU_HEALTHY);
    g_count = 1099;
    assert_int_equal(feed(f, GH_KIND_ECC, 3, 20, sbe), GH_OK);
    assert_int_equal(gpu_of(f, 3).state, GH_GPU_HEALTHY);
    g_count = 1100;
    assert_int_equal(feed(f, GH_KIND_ECC, 3, 30, sbe), GH_OK);
    g = gpu_of(f, 3);
    assert_int_equal(g.reason, GH_HR_ECC_CORRECTABLE);
    assert_non_null(strstr(g.what, "100 correctable"));
    /* slow trickle outside the window: not a burst */
    g_count = 5000;
    assert_int_equal(feed(f, GH_KIND_ECC, 4, 0, sbe), GH_OK);
    for (int k = 1; k <= 5; k++) {
        g_count += 30;
        assert_int_equal(feed(f, GH_KIND_ECC, 4, (int64_t)k * 4000, sbe), GH_OK);
    }
    f->fc.now = T0 + S(20000);
    assert_int_equal(gpu_of(f, 4).state, GH_GPU_HEALTHY);
}

static bool g_pending, g_failure;
static void remap(struct gh_signal *s)
{
    s->pending = g_pending;
    s->failure = g_failure;
    s->uncorrectable = 3;
}

static void test_row_remap_levels(void **state)
{
    struct fx *f = *state;
    g_pending = true, g_failure = false;
    assert_int_equal(feed(f, GH_KIND_ROW_REMAP, 0, 10, remap), GH_OK);
    struct gh_health_gpu g = gpu_of(f, 0);
    assert_int_equal(g.reason, GH_HR_ROW_REMAP_PENDING);
    assert_true(g.remap_pending);
    assert_non_null(strstr(g.what, "next GPU reset"));
    /* a reset does not end a level; the next reading does */
    gh_health_note_reset(f->h, 0, T0 + S(20));
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_DEGRADED);
    g_pending = false, g_failure = true;
    assert_int_equal(feed(f, GH_KIND_ROW_REMAP, 0, 30, remap), GH_OK);
    assert_int_equal(gpu_of(f, 0).reason, GH_HR_ROW_REMAP_FAILURE);
    /* an older reading is ignored */
    g_pending = false, g_failure = false;
    assert_int_equal(feed(f, GH_KIND_ROW_REMAP, 0, 25, remap), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_UNHEALTHY);
    assert_int_equal(feed(f, GH_KIND_ROW_REMAP, 0, 40, remap), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);

    /* from an NVML snapshot: page retirement pending */
    struct gh_nvml_gpu_health snap = {.index = 2, .has_retired = true, .retired_pending = true};
    f->fc.now = T0 + S(50);
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    g = gpu_of(f, 2);
    assert_int_equal(g.reason, GH_HR_ROW_REMAP_PENDING);
    assert_non_null(strstr(g.what, "page retirement"));
}

static bool g_throttled;
static void thermal(struct gh_signal *s)
{
    s->celsius = 91;
    s->throttled = g_throttled;
}

static void test_throttle_sustained(void **state)
{
    struct fx *f = *state;
    g_throttled = true;
    f->fc.now = T0 + S(100);
    assert_int_equal(feed(f, GH_KIND_THERMAL, 0, 100, thermal), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
    assert_int_equal(gh_health_next_change(f->h), T0 + S(160));
    /* still throttled: a repeat reading does not restart the streak */
    f->fc.now = T0 + S(130);
    assert_int_equal(feed(f, GH_KIND_THERMAL, 0, 130, thermal), GH_OK);
    f->fc.now = T0 + S(160);
    struct gh_health_gpu g = gpu_of(f, 0);
    assert_int_equal(g.reason, GH_HR_THROTTLED);
    assert_non_null(strstr(g.what, "91 C"));
    assert_int_equal(gh_health_next_change(f->h), INT64_MAX);
    g_throttled = false;
    assert_int_equal(feed(f, GH_KIND_THERMAL, 0, 170, thermal), GH_OK);
    assert_int_equal(gpu_of(f, 0).state, GH_GPU_HEALTHY);
}

static void test_pci_uuid_resolution(void **state)
{
    struct fx *f = *state;
    /* the kernel log names the GPU by PCI id (no function) before NVML */
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.code = 79;
    s.ts_ns = T0 + S(1);
    gh_signal_set_str(&s.pci, "0000:3b:00", 10);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    assert_int_equal(gh_health_count(f->h), 1);
    struct gh_health_gpu g;
    assert_int_equal(gh_health_gpu_at(f->h, 0, &g), GH_OK);
    assert_int_equal(g.index, -1);
    assert_int_equal(g.state, GH_GPU_UNHEALTHY);
    struct gh_health_summary sum;
    gh_health_summarize(f->h, &sum);
    assert_int_equal(sum.gpus, 0);
    assert_int_equal(sum.unhealthy, 1);
    assert_non_null(strstr(sum.message, "GPU at PCI 0000:3b:00.0: XID 79"));

    /* NVML: index 3 is 00000000:3B:00.0 with a UUID -> merged */
    struct gh_nvml_gpu_health snap = {.index = 3};
    snprintf(snap.pci, sizeof snap.pci, "00000000:3B:00.0");
    snprintf(snap.uuid, sizeof snap.uuid, "GPU-aaaa-3");
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_int_equal(gh_health_count(f->h), 1);
    g = gpu_of(f, 3);
    assert_int_equal(g.state, GH_GPU_UNHEALTHY);
    assert_int_equal(g.code, 79);
    assert_string_equal(g.uuid, "GPU-aaaa-3");
    const struct gh_signal *ev[4];
    assert_int_equal(gh_health_evidence(f->h, gh_health_find(f->h, 3), ev, 4), 1);
    assert_int_equal(ev[0]->gpu, 3);

    /* later signals by UUID alone, or by another PCI spelling, resolve */
    gh_signal_init(&s);
    s.kind = GH_KIND_ROW_REMAP;
    s.source = GH_SRC_DCGM;
    s.pending = true;
    s.ts_ns = T0 + S(2);
    gh_signal_set_str(&s.uuid, "gpu-AAAA-3", 10);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    assert_int_equal(gh_health_count(f->h), 1);
    assert_true(gpu_of(f, 3).remap_pending);

    /* a signal carrying index and PCI teaches a mapping too */
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.code = 13;
    s.ts_ns = T0 + S(3);
    gh_signal_set_str(&s.pci, "0000:5e:00.0", 12);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK); /* unknown yet */
    s.gpu = 5;
    s.code = 31;
    s.ts_ns = T0 + S(4);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    assert_int_equal(gh_health_count(f->h), 2);
    g = gpu_of(f, 5);
    assert_int_equal(g.last_xid, 31);
    assert_string_equal(g.pci, "0000:5e:00.0");
    assert_int_equal(gh_health_evidence(f->h, gh_health_find(f->h, 5), ev, 4), 2);

    /* re-enumeration: NVML now says index 6 is 0000:5e:00; index 5 loses it */
    snap = (struct gh_nvml_gpu_health){.index = 6};
    snprintf(snap.pci, sizeof snap.pci, "00000000:5E:00.0");
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    assert_string_equal(gpu_of(f, 5).pci, "");
    assert_string_equal(gpu_of(f, 6).pci, "0000:5e:00.0");
}

static void test_evidence_bounded_and_pinned(void **state)
{
    struct fx *f = *state; /* 4 per GPU */
    assert_int_equal(feed_xid(f, 0, 1, 79), GH_OK);
    for (int k = 0; k < 10; k++)
        assert_int_equal(feed_xid(f, 0, 2 + k, 13), GH_OK);
    const struct gh_signal *ev[8];
    size_t n = gh_health_evidence(f->h, 0, ev, 8);
    assert_int_equal(n, 4);
    assert_int_equal(ev[0]->code, 79); /* the cause is kept */
    assert_int_equal(ev[3]->ts_ns, T0 + S(11));
    struct gh_health_stats st;
    gh_health_stats(f->h, &st);
    assert_int_equal(st.evidence_dropped, 7);
    assert_int_equal(gpu_of(f, 0).reason, GH_HR_XID_CRITICAL);

    /* long messages are cut, on a character boundary */
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.gpu = 1;
    s.code = 13;
    s.ts_ns = T0;
    char big[2000];
    for (size_t i = 0; i + 2 < sizeof big; i += 2)
        memcpy(big + i, "\xc3\xa9", 2); /* é */
    big[sizeof big - 2] = '\0';
    gh_signal_set_str(&s.msg, big, strlen(big));
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    n = gh_health_evidence(f->h, gh_health_find(f->h, 1), ev, 8);
    assert_int_equal(n, 1);
    assert_true(strlen(ev[0]->msg) <= GH_HEALTH_TEXT_MAX);
    assert_int_equal(strlen(ev[0]->msg) % 2, 0);
}

/* The cause survives a merge too: an XID 79 named by PCI only (the kernel
 * log, before NVML), while GPU 3's own entry fills its evidence with XID 13s
 * (4 kept per GPU here); NVML then says index 3 is that PCI id: the merged
 * evidence keeps the XID 79 its condition points at (the merge kept the
 * newest 4 by arrival and dropped it: CI saw GPU 3 Failed with lastXid 79
 * and no XID 79 in the GPUNodeHealth's evidence). */
static void test_evidence_pinned_through_merge(void **state)
{
    struct fx *f = *state;
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.code = 79;
    s.ts_ns = T0 + S(1);
    gh_signal_set_str(&s.pci, "0000:48:00.0", 12);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    for (int k = 0; k < 6; k++)
        assert_int_equal(feed_xid(f, 3, 2 + k, 13), GH_OK);
    struct gh_nvml_gpu_health snap = {.index = 3};
    snprintf(snap.pci, sizeof snap.pci, "00000000:48:00.0");
    assert_int_equal(gh_health_observe_nvml(f->h, &snap, NULL), GH_OK);
    const struct gh_signal *ev[8];
    size_t n = gh_health_evidence(f->h, gh_health_find(f->h, 3), ev, 8);
    assert_int_equal(n, 4);
    bool cause = false;
    for (size_t i = 0; i < n; i++)
        cause = cause || ev[i]->code == 79;
    assert_true(cause);
    assert_int_equal(gpu_of(f, 3).reason, GH_HR_XID_CRITICAL);
}

static void test_duplicates_limits_ignored(void **state)
{
    struct fx *f = *state;
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_XID;
    s.source = GH_SRC_KMSG;
    s.gpu = 2;
    s.code = 79;
    s.ts_ns = T0;
    gh_signal_set_str(&s.id, "n1/boot/7", 9);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    uint64_t gen = gh_health_generation(f->h);
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    assert_int_equal(gh_health_generation(f->h), gen);
    struct gh_health_stats st;
    gh_health_stats(f->h, &st);
    assert_int_equal(st.duplicates, 1);

    s.gpu = 64;
    struct gh_err err;
    assert_int_equal(gh_health_feed(f->h, &s, &err), GH_ELIMIT);
    gh_signal_clear(&s);

    /* node-level: no GPU named */
    gh_signal_init(&s);
    s.kind = GH_KIND_SXID;
    s.source = GH_SRC_KMSG;
    s.code = 12028;
    s.ts_ns = T0;
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    const struct gh_signal *ev[4];
    assert_int_equal(gh_health_evidence(f->h, -1, ev, 4), 2); /* the over-limit one too */

    /* training kinds are not GPU health */
    gh_signal_init(&s);
    s.kind = GH_KIND_STEP;
    s.source = GH_SRC_TELEMETRY;
    s.gpu = 0;
    assert_int_equal(gh_health_feed(f->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
    assert_int_equal(gh_health_count(f->h), 1);
    gh_health_stats(f->h, &st);
    assert_int_equal(st.ignored, 1);
    assert_int_equal(st.over_limit, 1);

    struct gh_health_opts bad = {.evidence_per_gpu = 99};
    struct gh_health *h = NULL;
    assert_int_equal(gh_health_new(&bad, &h, &err), GH_EINVAL);
    assert_null(h);
}

static void link_fatal(struct gh_signal *s)
{
    gh_signal_set_str(&s->counter, "aer_uncorrectable", 17);
}
static void link_replay(struct gh_signal *s)
{
    s->has_link = true;
    s->link = 2;
    s->has_count = true;
    s->count = 4;
    gh_signal_set_str(&s->counter, "replay", 6);
}

static void test_links(void **state)
{
    struct fx *f = *state;
    assert_int_equal(feed(f, GH_KIND_PCIE, 0, 0, link_fatal), GH_OK);
    assert_int_equal(gpu_of(f, 0).reason, GH_HR_PCIE_FATAL);
    assert_int_equal(feed(f, GH_KIND_NVLINK, 1, 0, link_replay), GH_OK);
    struct gh_health_gpu g = gpu_of(f, 1);
    assert_int_equal(g.reason, GH_HR_LINK_ERRORS);
    assert_non_null(strstr(g.what, "NVLink link 2 replay"));
    struct gh_health_summary sum;
    gh_health_summarize(f->h, &sum);
    /* the message lists every GPU that is not healthy, worst first */
    const char *a = strstr(sum.message, "GPU 0"), *b = strstr(sum.message, "GPU 1");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xid79_critical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xid_severities, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_and_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_orders_by_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ecc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row_remap_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_throttle_sustained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pci_uuid_resolution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evidence_bounded_and_pinned, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_evidence_pinned_through_merge, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_limits_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
