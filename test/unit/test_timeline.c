/* test_timeline.c - the timeline: reorder window, dedup, skew bound, rings and eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/stats.h"
#include "common/strmap.h"
#include "engine/timeline.h"

#define S(x) ((int64_t)(x) * 1000000000LL)

static void mk(struct gh_signal *s, enum gh_kind k, int64_t ts, const char *node, int gpu)
{
    gh_signal_init(s);
    s->kind = k;
    s->source = GH_SRC_KMSG;
    s->ts_ns = ts;
    s->gpu = gpu;
    if (node)
        gh_signal_set_str(&s->node, node, strlen(node));
}

static void push(struct gh_timeline *tl, enum gh_kind k, int64_t ts, int64_t arrival, const char *node,
                 int gpu, int code, int expect_rc)
{
    struct gh_signal s;
    mk(&s, k, ts, node, gpu);
    s.code = code;
    assert_int_equal(gh_timeline_push(tl, &s, arrival, NULL), expect_rc);
    gh_signal_clear(&s);
}

static void test_reorder_window(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c); /* window 2 s */
    struct gh_timeline *tl = gh_timeline_new(&c);
    assert_non_null(tl);
    /* Arrive out of order within the window. */
    push(tl, GH_KIND_XID, S(10), S(10), "n1", 0, 1, GH_OK);
    push(tl, GH_KIND_XID, S(9), S(10), "n1", 0, 2, GH_OK);
    push(tl, GH_KIND_XID, S(11), S(11), "n1", 0, 3, GH_OK);
    /* Nothing before the window passes. */
    assert_null(gh_timeline_release(tl, S(10), false));
    const struct gh_tl_entry *e = gh_timeline_release(tl, S(12), false);
    assert_non_null(e);
    assert_int_equal(e->sig.code, 2);
    e = gh_timeline_release(tl, S(12), false);
    assert_int_equal(e->sig.code, 1);
    assert_null(gh_timeline_release(tl, S(12), false));
    e = gh_timeline_release(tl, S(13), false);
    assert_int_equal(e->sig.code, 3);
    /* A signal older than what was released is late, still delivered. */
    push(tl, GH_KIND_XID, S(5), S(14), "n1", 0, 4, GH_OK);
    e = gh_timeline_release(tl, S(14), false);
    assert_non_null(e);
    assert_true(e->late);
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.late, 1);
    assert_int_equal(ts.released, 4);
    gh_timeline_free(tl);
}

static void test_equal_ts_stable(void **st)
{
    (void)st;
    struct gh_timeline *tl = gh_timeline_new(NULL);
    for (int i = 0; i < 50; i++)
        push(tl, GH_KIND_XID, S(1), S(1), "n1", i % 8, 100 + i, GH_OK);
    for (int i = 0; i < 50; i++) {
        const struct gh_tl_entry *e = gh_timeline_release(tl, INT64_MAX, true);
        assert_non_null(e);
        assert_int_equal(e->sig.code, 100 + i);
    }
    gh_timeline_free(tl);
}

static void test_dedup(void **st)
{
    (void)st;
    struct gh_timeline *tl = gh_timeline_new(NULL);
    struct gh_signal s;
    mk(&s, GH_KIND_XID, S(1), "n1", 0);
    s.code = 79;
    gh_signal_set_str(&s.id, "n1-boot1-17", 11);
    assert_int_equal(gh_timeline_push(tl, &s, S(1), NULL), GH_OK);
    s.code = 80; /* same id, different content: still a duplicate */
    assert_int_equal(gh_timeline_push(tl, &s, S(1), NULL), GH_EAGAIN);
    /* the same id from another source, node or an injection is another
     * signal (issue 15 #1: step lines pre-sent with a kernel record's id
     * made it a duplicate) */
    s.source = GH_SRC_TELEMETRY;
    assert_int_equal(gh_timeline_push(tl, &s, S(1), NULL), GH_OK);
    s.source = GH_SRC_KMSG;
    s.injected = true;
    assert_int_equal(gh_timeline_push(tl, &s, S(1), NULL), GH_OK);
    s.injected = false;
    gh_signal_set_str(&s.node, "n2", 2);
    assert_int_equal(gh_timeline_push(tl, &s, S(1), NULL), GH_OK);
    gh_signal_clear(&s);
    /* Without an id: by content. */
    push(tl, GH_KIND_XID, S(2), S(2), "n1", 0, 13, GH_OK);
    push(tl, GH_KIND_XID, S(2), S(2), "n1", 0, 13, GH_EAGAIN);
    push(tl, GH_KIND_XID, S(2), S(2), "n1", 1, 13, GH_OK);
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.duplicates, 2);
    gh_timeline_free(tl);
}

static void test_dedup_bounded(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.dedup_cap = 64;
    struct gh_timeline *tl = gh_timeline_new(&c);
    for (int i = 0; i < 10000; i++) {
        push(tl, GH_KIND_XID, S(i), S(i), "n1", 0, 1, GH_OK);
        gh_timeline_release(tl, INT64_MAX, true);
    }
    /* A recent one is still known; memory did not grow with the count. */
    push(tl, GH_KIND_XID, S(9999), S(9999), "n1", 0, 1, GH_EAGAIN);
    gh_timeline_free(tl);
}

static void test_skew_bound(void **st)
{
    (void)st;
    struct gh_timeline *tl = gh_timeline_new(NULL);
    /* The node's clock is an hour ahead: its signal is placed at arrival. */
    push(tl, GH_KIND_XID, S(3600 + 100), S(100), "n1", 0, 1, GH_OK);
    push(tl, GH_KIND_XID, S(101), S(101), "n2", 0, 2, GH_OK);
    const struct gh_tl_entry *e = gh_timeline_release(tl, S(200), false);
    assert_int_equal(e->sig.code, 1);
    assert_int_equal(e->ts_ns, S(100));
    assert_int_equal(e->sig.ts_ns, S(3700)); /* the source time is kept */
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.ahead_clamped, 1);
    gh_timeline_free(tl);
}

static void test_rings_and_eviction(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.keep_node[GH_KIND_XID] = 4;
    c.keep_gpu[GH_KIND_XID] = 2;
    struct gh_timeline *tl = gh_timeline_new(&c);
    for (int i = 0; i < 10; i++) {
        push(tl, GH_KIND_XID, S(i), S(i), "n1", i % 2, i, GH_OK);
        gh_timeline_release(tl, INT64_MAX, true);
    }
    const struct gh_tl_entry *v[16];
    size_t n = gh_timeline_query(tl, GH_TL_NODE, "n1", -1, GH_KIND_BIT(GH_KIND_XID), INT64_MIN,
                                 INT64_MAX, false, v, 16);
    assert_int_equal(n, 4);
    assert_int_equal(v[0]->sig.code, 6); /* oldest first, newest kept */
    assert_int_equal(v[3]->sig.code, 9);
    n = gh_timeline_query(tl, GH_TL_GPU, "n1", 1, GH_KIND_BIT(GH_KIND_XID), INT64_MIN, INT64_MAX,
                          false, v, 16);
    assert_int_equal(n, 2);
    assert_int_equal(v[0]->sig.code, 7);
    assert_int_equal(v[1]->sig.code, 9);
    /* Time range and cap. */
    n = gh_timeline_query(tl, GH_TL_NODE, "n1", -1, GH_KIND_BIT(GH_KIND_XID), S(7), S(8), false, v, 16);
    assert_int_equal(n, 2);
    n = gh_timeline_query(tl, GH_TL_NODE, "n1", -1, GH_KIND_BIT(GH_KIND_XID), INT64_MIN, INT64_MAX,
                          true, v, 1);
    assert_int_equal(n, 1);
    assert_int_equal(v[0]->sig.code, 9);
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.evicted[GH_KIND_XID], 6 + 6);
    /* A reference keeps an evicted entry alive. */
    const struct gh_tl_entry *kept = gh_tl_ref(v[0]);
    for (int i = 10; i < 20; i++) {
        push(tl, GH_KIND_XID, S(i), S(i), "n1", 1, i, GH_OK);
        gh_timeline_release(tl, INT64_MAX, true);
    }
    assert_int_equal(kept->sig.code, 9);
    gh_tl_unref(kept);
    gh_timeline_free(tl);
}

static void test_max_age(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.max_age_ns = S(60);
    struct gh_timeline *tl = gh_timeline_new(&c);
    push(tl, GH_KIND_XID, S(0), S(0), "n1", 0, 1, GH_OK);
    push(tl, GH_KIND_XID, S(100), S(100), "n1", 0, 2, GH_OK);
    while (gh_timeline_release(tl, INT64_MAX, true))
        ;
    const struct gh_tl_entry *v[4];
    size_t n = gh_timeline_query(tl, GH_TL_NODE, "n1", -1, GH_KIND_BIT(GH_KIND_XID), INT64_MIN,
                                 INT64_MAX, false, v, 4);
    assert_int_equal(n, 1);
    assert_int_equal(v[0]->sig.code, 2);
    gh_timeline_free(tl);
}

static void test_pending_cap(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.max_pending = 4;
    struct gh_timeline *tl = gh_timeline_new(&c);
    for (int i = 0; i < 6; i++)
        push(tl, GH_KIND_XID, S(100 + i), S(100 + i), "n1", 0, i, GH_OK);
    /* Over the cap: the oldest leave early although the window has not passed. */
    assert_non_null(gh_timeline_release(tl, S(100), false));
    assert_non_null(gh_timeline_release(tl, S(100), false));
    assert_null(gh_timeline_release(tl, S(100), false));
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.forced, 2);
    gh_timeline_free(tl);
}

static void test_stats_helpers(void **st)
{
    (void)st;
    double v[] = {5, 1, 4, 2, 3};
    assert_true(gh_stats_median(v, 5) == 3.0);
    double w[] = {4, 1, 3, 2};
    assert_true(gh_stats_median(w, 4) == 2.5);
    double x[] = {1, 1, 1, 1, 100}, scratch[5];
    assert_true(gh_stats_mad(x, 5, 1.0, scratch) == 0.0);
    double p = gh_stats_poisson_tail(3, 0.001);
    assert_true(p > 1.6e-10 && p < 1.7e-10); /* ~ mu^3/6 */
    assert_true(gh_stats_poisson_tail(0, 5) == 1.0);
    double q = gh_stats_poisson_tail(5, 5.0);
    assert_true(q > 0.559 && q < 0.560);
    /* A long sorted and a constant input. */
    double *big = malloc(10001 * sizeof *big);
    for (int i = 0; i < 10001; i++)
        big[i] = i;
    assert_true(gh_stats_median(big, 10001) == 5000.0);
    for (int i = 0; i < 10001; i++)
        big[i] = 7;
    assert_true(gh_stats_median(big, 10001) == 7.0);
    free(big);
}

static bool drop_even(const char *key, void *value, void *ctx)
{
    (void)key;
    (void)ctx;
    return ((intptr_t)value - 1) % 2 == 0;
}

static void test_strmap(void **st)
{
    (void)st;
    struct gh_strmap *m = gh_strmap_new(1000);
    char k[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "node-%d", i);
        assert_int_equal(gh_strmap_intern(m, k, NULL, NULL), i);
    }
    int rc = 0;
    assert_int_equal(gh_strmap_intern(m, "one-too-many", NULL, &rc), -1);
    assert_int_equal(rc, GH_ELIMIT);
    assert_int_equal(gh_strmap_find(m, "node-517"), 517);
    assert_string_equal(gh_strmap_key(m, 3), "node-3");
    assert_int_equal(gh_strmap_find(m, "nope"), -1);
    gh_strmap_free(m);
}

/* Removal against a model: random inserts and removals of 300 keys; every
 * key is found exactly while it is in; freed indices are reused, so the
 * index range stays within the most keys ever in at once. */
static void test_strmap_remove(void **st)
{
    (void)st;
    struct gh_strmap *m = gh_strmap_new(200);
    bool in[300] = {false};
    long idx[300];
    size_t live = 0, most = 0;
    uint64_t r = 1;
    char k[32];
    for (int it = 0; it < 200000; it++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int key = (int)((r >> 33) % 300);
        snprintf(k, sizeof k, "job-%d", key);
        if (!in[key]) {
            bool created = false;
            int rc = 0;
            long i = gh_strmap_intern(m, k, &created, &rc);
            if (live == 200) {
                assert_int_equal(i, -1); /* the cap counts live keys */
                assert_int_equal(rc, GH_ELIMIT);
                continue;
            }
            assert_true(i >= 0 && created);
            gh_strmap_set_value(m, (size_t)i, (void *)(intptr_t)(key + 1));
            in[key] = true;
            idx[key] = i;
            live++;
        } else {
            assert_int_equal(gh_strmap_find(m, k), idx[key]);
            assert_int_equal((intptr_t)gh_strmap_value(m, (size_t)idx[key]), key + 1);
            gh_strmap_remove(m, (size_t)idx[key]);
            assert_null(gh_strmap_key(m, (size_t)idx[key]));
            in[key] = false;
            live--;
        }
        if (live > most)
            most = live;
        assert_int_equal(gh_strmap_live(m), live);
        assert_true(gh_strmap_count(m) <= most);
        if (it % 997 == 0)
            for (int q = 0; q < 300; q++) {
                snprintf(k, sizeof k, "job-%d", q);
                assert_int_equal(gh_strmap_find(m, k), in[q] ? idx[q] : -1);
            }
    }
    /* remove_if: drop the even ones. */
    size_t before = gh_strmap_live(m), evens = 0;
    for (int q = 0; q < 300; q += 2)
        evens += in[q];
    assert_int_equal(gh_strmap_remove_if(m, drop_even, NULL), evens);
    assert_int_equal(gh_strmap_live(m), before - evens);
    for (int q = 0; q < 300; q++) {
        snprintf(k, sizeof k, "job-%d", q);
        assert_int_equal(gh_strmap_find(m, k) >= 0, in[q] && q % 2 == 1);
    }
    gh_strmap_free(m);
}

static void test_forget_and_expire(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.max_age_ns = S(600);
    struct gh_timeline *tl = gh_timeline_new(&c);
    struct gh_signal s;
    mk(&s, GH_KIND_CHECKPOINT, S(10), NULL, -1);
    gh_signal_set_str(&s.job, "ml/a", 4);
    assert_int_equal(gh_timeline_push(tl, &s, S(10), NULL), GH_OK);
    gh_signal_clear(&s);
    push(tl, GH_KIND_XID, S(11), S(11), "n1", 2, 79, GH_OK);
    push(tl, GH_KIND_XID, S(500), S(500), "n2", 0, 79, GH_OK);
    const struct gh_tl_entry *kept = NULL;
    const struct gh_tl_entry *e;
    while ((e = gh_timeline_release(tl, INT64_MAX, true)))
        if (e->sig.kind == GH_KIND_XID && !kept)
            kept = gh_tl_ref(e); /* evidence someone holds */
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.jobs, 1);
    assert_int_equal(ts.nodes, 2);
    assert_true(gh_timeline_forget(tl, GH_TL_JOB, "ml/a"));
    assert_false(gh_timeline_forget(tl, GH_TL_JOB, "ml/a"));
    const struct gh_tl_entry *v[4];
    assert_int_equal(gh_timeline_query(tl, GH_TL_JOB, "ml/a", -1, ~0u, INT64_MIN, INT64_MAX, false, v, 4), 0);
    /* n1's newest entry is older than max_age at 700 s, n2's is not. */
    assert_int_equal(gh_timeline_expire(tl, S(700)), 1);
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.nodes, 1);
    assert_int_equal(gh_timeline_query(tl, GH_TL_GPU, "n1", 2, ~0u, INT64_MIN, INT64_MAX, false, v, 4), 0);
    assert_int_equal(gh_timeline_query(tl, GH_TL_NODE, "n2", -1, ~0u, INT64_MIN, INT64_MAX, false, v, 4), 1);
    assert_int_equal(kept->sig.code, 79); /* still alive */
    gh_tl_unref(kept);
    /* A forgotten node comes back with its next signal. */
    push(tl, GH_KIND_XID, S(800), S(800), "n1", 2, 48, GH_OK);
    while (gh_timeline_release(tl, INT64_MAX, true))
        ;
    assert_int_equal(gh_timeline_query(tl, GH_TL_GPU, "n1", 2, ~0u, INT64_MIN, INT64_MAX, false, v, 4), 1);
    gh_timeline_free(tl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reorder_window), cmocka_unit_test(test_equal_ts_stable),
        cmocka_unit_test(test_dedup),          cmocka_unit_test(test_dedup_bounded),
        cmocka_unit_test(test_skew_bound),     cmocka_unit_test(test_rings_and_eviction),
        cmocka_unit_test(test_max_age),        cmocka_unit_test(test_pending_cap),
        cmocka_unit_test(test_stats_helpers),  cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_strmap_remove),  cmocka_unit_test(test_forget_and_expire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
