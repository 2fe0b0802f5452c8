/* test_agent_nvml_derive.c - unit tests of the NVML source's derivation of
 * signals from samples (agent/nvml_derive.h), without any NVML library:
 * standing faults at the first poll (DBE, row-remap pending/failure,
 * retirement) but not SBE noise; counters that move up (ECC, PCIe replay,
 * NVLink) and not down or still; remap state changes; a lost GPU said once
 * per loss; thermal and power levels held down; the threshold from the
 * slowdown temperature; the health snapshot from the baselines; a dropped
 * signal reported as GH_ENOMEM. The clock is the test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/nvml_derive.h"

#define MAX_SIGS 32

struct rec {
    struct gh_signal sigs[MAX_SIGS];
    char counter[MAX_SIGS][32];
    char msg[MAX_SIGS][GH_NVML_MSG_MAX];
    int n;
    bool refuse; /* answer GH_ENOMEM (a dropped signal) */
};

static int64_t now_ns;
static int64_t test_now(void *ctx)
{
    (void)ctx;
    return now_ns;
}
static const struct gh_clock test_clock = {test_now, NULL};

static int record(void *ctx, struct gh_signal *s, const char *counter, const char *msg)
{
    struct rec *r = ctx;
    int rc = r->refuse ? GH_ENOMEM : GH_OK;
    if (!r->refuse && r->n < MAX_SIGS) {
        r->sigs[r->n] = *s; /* no strings are set by the derivation */
        snprintf(r->counter[r->n], sizeof r->counter[0], "%s", counter ? counter : "");
        snprintf(r->msg[r->n], sizeof r->msg[0], "%s", msg);
        r->n++;
    }
    gh_signal_clear(s);
    return rc;
}

struct fixture {
    struct rec rec;
    struct gh_nvml_derive_cfg cfg;
    struct gh_nvml_dev dev;
    struct gh_nvml_gpu_state g;
    struct gh_nvml_sample s;
};

static struct fixture *fx_new(void)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    now_ns = 1000 * GH_NS_PER_S;
    f->cfg = (struct gh_nvml_derive_cfg){.clock = &test_clock, .holddown_ns = 30 * GH_NS_PER_S,
                                         .emit = record, .emit_ctx = &f->rec};
    f->dev.h = (nvmlDevice_t)0x1;
    return f;
}

static void set(struct gh_nvml_sample *s, enum gh_nvml_metric m, uint64_t v)
{
    s->valid |= GH_NVML_BIT(m);
    s->v[m] = v;
}

static int derive(struct fixture *f)
{
    f->rec.n = 0;
    return gh_nvml_derive(&f->cfg, 2, &f->dev, &f->g, &f->s);
}

static void test_first_poll_standing_faults_only(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    set(&f->s, GH_NVML_M_SBE_VOL, 7);  /* noise: no signal at the first poll */
    set(&f->s, GH_NVML_M_DBE_VOL, 1);  /* a standing fault */
    set(&f->s, GH_NVML_M_PCIE_REPLAY, 5);
    f->s.valid |= GH_NVML_BIT(GH_NVML_M_REMAP);
    f->s.remap_pending = 1;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_ECC);
    assert_int_equal(f->rec.sigs[0].bits, GH_ECC_DOUBLE);
    assert_true(f->rec.sigs[0].is_volatile);
    assert_int_equal(f->rec.sigs[0].count, 1);
    assert_int_equal(f->rec.sigs[0].gpu, 2);
    assert_int_equal(f->rec.sigs[0].source, GH_SRC_NVML);
    assert_int_equal(f->rec.sigs[0].ts_ns, now_ns);
    assert_string_equal(f->rec.msg[0], "NVML: double-bit ECC errors (volatile) = 1 at first poll");
    assert_int_equal(f->rec.sigs[1].kind, GH_KIND_ROW_REMAP);
    assert_true(f->rec.sigs[1].pending);
    /* the same values again: nothing */
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0);
    free(f);
}

static void test_counters_move_up(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    set(&f->s, GH_NVML_M_SBE_AGG, 3);
    set(&f->s, GH_NVML_M_PCIE_REPLAY, 10);
    f->s.link_valid[4] = 1u << 2; /* crc_flit */
    f->s.link[4][2] = 100;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0); /* baselines */
    set(&f->s, GH_NVML_M_SBE_AGG, 5);
    set(&f->s, GH_NVML_M_PCIE_REPLAY, 12);
    f->s.link[4][2] = 130;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 3);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_ECC);
    assert_int_equal(f->rec.sigs[0].bits, GH_ECC_SINGLE);
    assert_false(f->rec.sigs[0].is_volatile);
    assert_string_equal(f->rec.msg[0], "NVML: single-bit ECC errors (aggregate) 3 -> 5");
    assert_int_equal(f->rec.sigs[1].kind, GH_KIND_PCIE);
    assert_string_equal(f->rec.counter[1], "replay");
    assert_int_equal(f->rec.sigs[1].count, 12);
    assert_int_equal(f->rec.sigs[2].kind, GH_KIND_NVLINK);
    assert_true(f->rec.sigs[2].has_link);
    assert_int_equal(f->rec.sigs[2].link, 4);
    assert_string_equal(f->rec.counter[2], "crc_flit");
    assert_string_equal(f->rec.msg[2], "NVML: NVLink 4 crc_flit errors 100 -> 130");
    /* down (a reset of the counters) or still: nothing, the baseline follows */
    set(&f->s, GH_NVML_M_SBE_AGG, 1);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0);
    set(&f->s, GH_NVML_M_SBE_AGG, 2);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 1);
    assert_string_equal(f->rec.msg[0], "NVML: single-bit ECC errors (aggregate) 1 -> 2");
    free(f);
}

static void test_remap_and_retirement(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    f->s.valid |= GH_NVML_BIT(GH_NVML_M_REMAP);
    f->s.remap_corr = 1;
    set(&f->s, GH_NVML_M_RETIRED_SBE, 0);
    set(&f->s, GH_NVML_M_RETIRED_DBE, 0);
    set(&f->s, GH_NVML_M_RETIRED_PENDING, 0);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0); /* nothing standing */
    f->s.remap_unc = 1;
    f->s.remap_failure = 1;
    set(&f->s, GH_NVML_M_RETIRED_DBE, 2);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_ROW_REMAP);
    assert_true(f->rec.sigs[0].failure);
    assert_int_equal(f->rec.sigs[0].uncorrectable, 1);
    assert_int_equal(f->rec.sigs[1].kind, GH_KIND_ROW_REMAP); /* retirement, as row_remap */
    assert_int_equal(f->rec.sigs[1].uncorrectable, 2);
    assert_false(f->rec.sigs[1].failure);
    assert_string_equal(f->rec.msg[1], "NVML: page retirement: pages retired for SBE 0, for DBE 2, "
                                       "retirement pending 0");
    free(f);
}

static void test_lost_once_per_loss(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    f->s.lost = true;
    f->s.lost_rc = NVML_ERROR_GPU_IS_LOST;
    f->s.lost_call = "nvmlDeviceGetTemperature";
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_GPU_LOST);
    assert_string_equal(f->rec.msg[0],
                        "NVML: nvmlDeviceGetTemperature on GPU 2 returned NVML_ERROR_GPU_IS_LOST "
                        "(15): the GPU has fallen off the bus or is otherwise inaccessible");
    assert_true(f->g.lost);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0); /* still lost: said once */
    struct gh_nvml_gpu_health h = {0};
    gh_nvml_derive_health(&f->g, &f->s, &h);
    assert_true(h.lost);
    /* it answers again, then is lost again (reset required): said again */
    memset(&f->s, 0, sizeof f->s);
    assert_int_equal(derive(f), GH_OK);
    assert_false(f->g.lost);
    f->s.lost = true;
    f->s.lost_rc = NVML_ERROR_RESET_REQUIRED;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 1);
    assert_string_equal(f->rec.msg[0], "NVML: ? on GPU 2 returned NVML_ERROR_RESET_REQUIRED (16): "
                                       "the GPU needs a reset");
    free(f);
}

static void test_thermal_and_power_held_down(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    f->dev.has_slowdown = true;
    f->dev.slowdown_c = 90; /* threshold 85 */
    f->dev.has_power_limit = true;
    f->dev.power_limit_mw = 400000;
    set(&f->s, GH_NVML_M_TEMP, 86);
    set(&f->s, GH_NVML_M_POWER, 350000);
    set(&f->s, GH_NVML_M_REASONS, nvmlClocksEventReasonSwPowerCap);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_THERMAL);
    assert_true(f->rec.sigs[0].celsius == 86.0);
    assert_false(f->rec.sigs[0].throttled);
    assert_string_equal(f->rec.msg[0], "NVML: GPU temperature 86 C (threshold 85 C) over; thermal "
                                       "throttle off (clock-event reasons 0x4)");
    assert_int_equal(f->rec.sigs[1].kind, GH_KIND_POWER);
    assert_true(f->rec.sigs[1].throttled);
    assert_true(f->rec.sigs[1].watts == 350.0);
    assert_string_equal(f->rec.msg[1], "NVML: power 350.0 W (limit 400.0 W); power throttle on "
                                       "(clock-event reasons 0x4)");
    /* back to normal within the hold-down: not yet */
    now_ns += 10 * GH_NS_PER_S;
    set(&f->s, GH_NVML_M_TEMP, 70);
    set(&f->s, GH_NVML_M_REASONS, 0);
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 0);
    /* after it: both said */
    now_ns += 21 * GH_NS_PER_S;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.sigs[0].kind, GH_KIND_THERMAL);
    assert_int_equal(f->rec.sigs[1].kind, GH_KIND_POWER);
    assert_false(f->rec.sigs[1].throttled);
    /* a configured threshold wins over the slowdown temperature */
    f->cfg.temp_threshold = 60;
    now_ns += 31 * GH_NS_PER_S;
    assert_int_equal(derive(f), GH_OK);
    assert_int_equal(f->rec.n, 1);
    assert_string_equal(f->rec.msg[0], "NVML: GPU temperature 70 C (threshold 60 C) over; thermal "
                                       "throttle off (clock-event reasons 0x0)");
    free(f);
}

static void test_health_and_dropped(void **st)
{
    (void)st;
    struct fixture *f = fx_new();
    set(&f->s, GH_NVML_M_TEMP, 55);
    set(&f->s, GH_NVML_M_DBE_AGG, 4);
    set(&f->s, GH_NVML_M_PCIE_REPLAY, 9);
    f->rec.refuse = true;
    assert_int_equal(derive(f), GH_ENOMEM); /* the DBE signal was dropped */
    struct gh_nvml_gpu_health h = {0};
    gh_nvml_derive_health(&f->g, &f->s, &h);
    assert_false(h.lost);
    assert_true(h.has_temp);
    assert_true(h.celsius == 55.0);
    assert_false(h.has_power);
    assert_true(h.has_ecc);
    assert_int_equal(h.ecc_dbe_aggregate, 4);
    assert_true(h.has_pcie_replay);
    assert_int_equal(h.pcie_replay, 9);
    assert_false(h.has_remap);
    /* a failed read keeps the last counter value */
    f->rec.refuse = false;
    f->s.valid = GH_NVML_BIT(GH_NVML_M_TEMP);
    assert_int_equal(derive(f), GH_OK);
    gh_nvml_derive_health(&f->g, &f->s, &h);
    assert_int_equal(h.ecc_dbe_aggregate, 4);
    free(f);
}

static void test_rc_names(void **st)
{
    (void)st;
    assert_string_equal(gh_nvml_rc_name(NVML_ERROR_GPU_IS_LOST), "NVML_ERROR_GPU_IS_LOST");
    assert_string_equal(gh_nvml_rc_name(NVML_SUCCESS), "NVML_SUCCESS");
    assert_string_equal(gh_nvml_rc_name((nvmlReturn_t)12345), "NVML_ERROR_?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_poll_standing_faults_only),
        cmocka_unit_test(test_counters_move_up),
        cmocka_unit_test(test_remap_and_retirement),
        cmocka_unit_test(test_lost_once_per_loss),
        cmocka_unit_test(test_thermal_and_power_held_down),
        cmocka_unit_test(test_health_and_dropped),
        cmocka_unit_test(test_rc_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
