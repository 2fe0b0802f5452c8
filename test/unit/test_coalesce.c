/* test_coalesce.c - unit tests of storm coalescing: a 100k-line XID storm
 * of one key becomes two signals per window, keys are independent, other
 * kinds pass, summaries keep their order, the table is bounded and its
 * overflow counted, and a kept sample's msg is cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "agent/coalesce.h"
#include "signal/signal_json.h"

#define T0 (1800000000LL * GH_NS_PER_S)

struct sink {
    int n;
    struct gh_signal sigs[64];
};

static void on_emit(void *ctx, struct gh_signal *s)
{
    struct sink *k = ctx;
    /* A summary must still be a valid spec signal. */
    char *line = NULL;
    struct gh_err err;
    if (gh_signal_encode(s, &line, &err) != GH_OK)
        fail_msg("summary does not encode: %s", err.msg);
    free(line);
    if (k->n < 64)
        assert_int_equal(gh_signal_copy(&k->sigs[k->n++], s, NULL), GH_OK);
}

static void sink_clear(struct sink *k)
{
    for (int i = 0; i < k->n; i++)
        gh_signal_clear(&k->sigs[i]);
    k->n = 0;
}

static void xid(struct gh_signal *s, int gpu, int code, const char *msg, int64_t ts)
{
    gh_signal_init(s);
    s->ts_ns = ts;
    s->source = GH_SRC_KMSG;
    s->kind = GH_KIND_XID;
    s->gpu = gpu;
    s->code = code;
    gh_signal_set_str(&s->node, "n1", 2);
    if (msg)
        gh_signal_set_str(&s->msg, msg, strlen(msg));
}

static void test_storm_one_key(void **state)
{
    (void)state;
    struct gh_coalesce *c = gh_coalesce_new(NULL);
    struct sink k = {0};
    struct gh_signal s;
    const int storm = 100000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int first = 0, held = 0;
    for (int i = 0; i < storm; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "NVRM: Xid (PCI:0000:3b:00): 79, sample %d", i);
        int64_t now = T0 + (int64_t)i * 9000; /* 100k samples over 0.9 s */
        xid(&s, 3, 79, msg, now);
        enum gh_coalesce_verdict v = gh_coalesce_offer(c, &s, now, on_emit, &k);
        first += v == GH_COALESCE_FIRST;
        held += v == GH_COALESCE_HELD;
        gh_signal_clear(&s);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("# coalesced %d samples in %.3f s (%.0f samples/s)\n", storm, secs, storm / secs);
    assert_int_equal(first, 1);
    assert_int_equal(held, storm - 1);
    assert_int_equal(k.n, 0);
    assert_int_equal(gh_coalesce_next_deadline(c), T0 + GH_NS_PER_S);
    /* Not yet over. */
    gh_coalesce_flush(c, T0 + GH_NS_PER_S - 1, false, on_emit, &k);
    assert_int_equal(k.n, 0);
    gh_coalesce_flush(c, T0 + GH_NS_PER_S, false, on_emit, &k);
    assert_int_equal(k.n, 1);
    assert_string_equal(k.sigs[0].msg,
                        "NVRM: Xid (PCI:0000:3b:00): 79, sample 99999 [coalesced 99999]");
    assert_int_equal(k.sigs[0].code, 79);
    assert_int_equal(k.sigs[0].gpu, 3);
    assert_int_equal(k.sigs[0].ts_ns, T0 + (int64_t)(storm - 1) * 9000);
    struct gh_coalesce_stats st;
    gh_coalesce_stats(c, &st);
    assert_int_equal(st.offered, storm);
    assert_int_equal(st.summaries, 1);
    assert_int_equal(st.keys, 0);
    assert_int_equal(gh_coalesce_next_deadline(c), INT64_MAX);
    sink_clear(&k);
    gh_coalesce_free(c);
}

static void test_keys_independent(void **state)
{
    (void)state;
    struct gh_coalesce *c = gh_coalesce_new(NULL);
    struct sink k = {0};
    struct gh_signal s;
    /* gpu 0 code 79, gpu 1 code 79, gpu 0 code 48, and gpu 0 code 79 by pci */
    int gpus[] = {0, 1, 0, 0}, codes[] = {79, 79, 48, 79};
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < 4; i++) {
            xid(&s, gpus[i], codes[i], NULL, T0);
            if (i == 3) {
                s.gpu = -1;
                gh_signal_set_str(&s.pci, "0000:3b:00.0", 12);
            }
            enum gh_coalesce_verdict v = gh_coalesce_offer(c, &s, T0 + rep, on_emit, &k);
            assert_int_equal(v, rep == 0 ? GH_COALESCE_FIRST : GH_COALESCE_HELD);
            gh_signal_clear(&s);
        }
    gh_coalesce_flush(c, T0 + 2 * GH_NS_PER_S, false, on_emit, &k);
    assert_int_equal(k.n, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(k.sigs[i].msg, "coalesced 2");
    sink_clear(&k);
    gh_coalesce_free(c);
}

static void test_other_kinds_pass(void **state)
{
    (void)state;
    struct gh_coalesce *c = gh_coalesce_new(NULL);
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_STEP;
    s.source = GH_SRC_TELEMETRY;
    for (int i = 0; i < 10; i++)
        assert_int_equal(gh_coalesce_offer(c, &s, T0, NULL, NULL), GH_COALESCE_PASS);
    s.kind = GH_KIND_ECC;
    assert_int_equal(gh_coalesce_offer(c, &s, T0, NULL, NULL), GH_COALESCE_PASS);
    struct gh_coalesce_stats st;
    gh_coalesce_stats(c, &st);
    assert_int_equal(st.passed, 11);
    gh_coalesce_free(c);
}

static void test_new_window_emits_summary_first(void **state)
{
    (void)state;
    struct gh_coalesce *c = gh_coalesce_new(NULL);
    struct sink k = {0};
    struct gh_signal s;
    xid(&s, 0, 13, "a", T0);
    assert_int_equal(gh_coalesce_offer(c, &s, T0, on_emit, &k), GH_COALESCE_FIRST);
    assert_int_equal(gh_coalesce_offer(c, &s, T0 + 1, on_emit, &k), GH_COALESCE_HELD);
    /* The window ended and nobody flushed: the next sample first emits the
     * summary, then opens a new window. */
    assert_int_equal(gh_coalesce_offer(c, &s, T0 + GH_NS_PER_S + 5, on_emit, &k),
                     GH_COALESCE_FIRST);
    assert_int_equal(k.n, 1);
    assert_string_equal(k.sigs[0].msg, "a [coalesced 1]");
    /* A window with no held sample ends silently. */
    gh_coalesce_flush(c, T0 + 3 * GH_NS_PER_S, false, on_emit, &k);
    assert_int_equal(k.n, 1);
    gh_signal_clear(&s);
    sink_clear(&k);
    gh_coalesce_free(c);
}

static void test_overflow_bounded(void **state)
{
    (void)state;
    struct gh_coalesce_opts o = {.max_keys = 4};
    struct gh_coalesce *c = gh_coalesce_new(&o);
    struct sink k = {0};
    struct gh_signal s;
    for (int code = 1; code <= 6; code++) {
        xid(&s, 0, code, NULL, T0);
        enum gh_coalesce_verdict v = gh_coalesce_offer(c, &s, T0, on_emit, &k);
        assert_int_equal(v, code <= 4 ? GH_COALESCE_FIRST : GH_COALESCE_OVERFLOW);
        gh_signal_clear(&s);
    }
    struct gh_coalesce_stats st;
    gh_coalesce_stats(c, &st);
    assert_int_equal(st.overflow, 2);
    assert_int_equal(st.keys, 4);
    /* Room again after the windows close. */
    gh_coalesce_flush(c, T0 + GH_NS_PER_S, false, on_emit, &k);
    xid(&s, 0, 6, NULL, T0);
    assert_int_equal(gh_coalesce_offer(c, &s, T0 + GH_NS_PER_S, on_emit, &k), GH_COALESCE_FIRST);
    gh_signal_clear(&s);
    /* Many keys churning through a small table never leak or break the
     * index (backward-shift deletion). */
    for (int round = 0; round < 200; round++) {
        int64_t now = T0 + (int64_t)(round + 2) * GH_NS_PER_S;
        for (int code = 0; code < 4; code++) {
            xid(&s, round % 7, code + round, NULL, now);
            enum gh_coalesce_verdict v = gh_coalesce_offer(c, &s, now, on_emit, &k);
            assert_true(v == GH_COALESCE_FIRST || v == GH_COALESCE_OVERFLOW);
            assert_int_equal(gh_coalesce_offer(c, &s, now, on_emit, &k),
                             v == GH_COALESCE_FIRST ? GH_COALESCE_HELD : GH_COALESCE_OVERFLOW);
            gh_signal_clear(&s);
        }
        gh_coalesce_flush(c, now + GH_NS_PER_S, false, on_emit, &k);
        sink_clear(&k);
    }
    gh_coalesce_stats(c, &st);
    assert_int_equal(st.keys, 0);
    gh_coalesce_flush(c, 0, true, on_emit, &k);
    sink_clear(&k);
    gh_coalesce_free(c);
}

static void test_msg_cut_and_flush_all(void **state)
{
    (void)state;
    struct gh_coalesce_opts o = {.msg_max = 16, .window_ns = 10 * GH_NS_PER_S};
    struct gh_coalesce *c = gh_coalesce_new(&o);
    struct sink k = {0};
    struct gh_signal s;
    xid(&s, 0, 79, "0123456789abcdefghijklmnop", T0);
    gh_coalesce_offer(c, &s, T0, on_emit, &k);
    gh_coalesce_offer(c, &s, T0, on_emit, &k);
    gh_signal_clear(&s);
    assert_int_equal(gh_coalesce_next_deadline(c), T0 + 10 * GH_NS_PER_S);
    gh_coalesce_flush(c, T0, true, on_emit, &k); /* shutdown */
    assert_int_equal(k.n, 1);
    assert_string_equal(k.sigs[0].msg, "0123456789abcdef [coalesced 1]");
    sink_clear(&k);
    gh_coalesce_free(c);
    gh_coalesce_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storm_one_key),
        cmocka_unit_test(test_keys_independent),
        cmocka_unit_test(test_other_kinds_pass),
        cmocka_unit_test(test_new_window_emits_summary_first),
        cmocka_unit_test(test_overflow_bounded),
        cmocka_unit_test(test_msg_cut_and_flush_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
