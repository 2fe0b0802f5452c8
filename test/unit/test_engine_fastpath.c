/* test_engine_fastpath.c - the engine's per-signal fast paths keep the slow
 * paths' results: the reorder buffer's FIFO + heap releases in (ts, arrival)
 * order, the dedup generations forget exactly as before, pooled entries and
 * shared names outlive the timeline while referenced, the printf-free key and
 * the small-n median agree with snprintf and a sort. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/stats.h"
#include "common/strmap.h"
#include "engine/timeline.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void mk(struct gh_signal *s, int64_t ts, const char *node, const char *job, int code)
{
    gh_signal_init(s);
    s->kind = GH_KIND_XID;
    s->source = GH_SRC_KMSG;
    s->ts_ns = ts;
    s->gpu = code % 8;
    s->code = code;
    if (node)
        gh_signal_set_str(&s->node, node, strlen(node));
    if (job)
        gh_signal_set_str(&s->job, job, strlen(job));
}

struct ref {
    int64_t ts;
    int idx;
};

static int cmp_ref(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Mostly ordered arrivals with late ones and equal times, released while
 * pushing and at the end: always the least (ts, arrival order) first. */
static void test_release_order(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.window_ns = 1000;
    struct gh_timeline *tl = gh_timeline_new(&c);
    assert_non_null(tl);
    enum { N = 20000 };
    struct ref *pend = calloc(N, sizeof *pend);
    assert_non_null(pend);
    size_t np = 0;
    uint64_t seed = 42;
    int64_t now = 0;
    int released = 0;
    for (int i = 0; i < N; i++) {
        now += 10;
        int64_t ts = now;
        uint64_t r = rnd(&seed) % 100;
        if (r < 15)
            ts -= (int64_t)(rnd(&seed) % 3000); /* late, sometimes past the window */
        else if (r < 20)
            ts = now - 10; /* equal to the previous one's time */
        struct gh_signal s;
        mk(&s, ts, r % 2 ? "node-a" : "node-b", "ns/job", i);
        assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
        gh_signal_clear(&s);
        pend[np++] = (struct ref){ts, i};
        assert_int_equal(gh_timeline_pending(tl), np);
        if (rnd(&seed) % 4 == 0) {
            const struct gh_tl_entry *e;
            while ((e = gh_timeline_release(tl, now, false)) != NULL) {
                qsort(pend, np, sizeof *pend, cmp_ref);
                assert_true(pend[0].ts <= now - c.window_ns);
                assert_int_equal(e->sig.code, pend[0].idx);
                assert_int_equal(e->ts_ns, pend[0].ts);
                memmove(pend, pend + 1, (np - 1) * sizeof *pend);
                np--;
                released++;
            }
            if (np) {
                qsort(pend, np, sizeof *pend, cmp_ref);
                assert_int_equal(gh_timeline_pending_ts(tl), pend[0].ts);
            }
        }
    }
    qsort(pend, np, sizeof *pend, cmp_ref);
    for (size_t k = 0; k < np; k++) {
        const struct gh_tl_entry *e = gh_timeline_release(tl, INT64_MIN, true);
        assert_non_null(e);
        assert_int_equal(e->sig.code, pend[k].idx);
        released++;
    }
    assert_null(gh_timeline_release(tl, INT64_MAX, true));
    assert_int_equal(gh_timeline_pending_ts(tl), INT64_MAX);
    assert_int_equal(released, N);
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.released, N);
    free(pend);
    gh_timeline_free(tl);
}

/* Over max_pending the oldest goes early, from either queue. */
static void test_forced_release(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.max_pending = 3;
    struct gh_timeline *tl = gh_timeline_new(&c);
    assert_non_null(tl);
    int64_t ts[] = {100, 50, 200, 75}; /* FIFO: 100, 200; heap: 50, 75 */
    for (int i = 0; i < 4; i++) {
        struct gh_signal s;
        mk(&s, ts[i], "n", NULL, i);
        assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
        gh_signal_clear(&s);
    }
    const struct gh_tl_entry *e = gh_timeline_release(tl, 0, false);
    assert_non_null(e);
    assert_int_equal(e->sig.code, 1); /* ts 50 */
    assert_null(gh_timeline_release(tl, 0, false));
    struct gh_timeline_stats s;
    gh_timeline_stats(tl, &s);
    assert_int_equal(s.forced, 1);
    int want[] = {3, 0, 2};
    for (int i = 0; i < 3; i++) {
        e = gh_timeline_release(tl, 0, true);
        assert_non_null(e);
        assert_int_equal(e->sig.code, want[i]);
    }
    gh_timeline_free(tl);
}

/* Two generations of dedup_cap keys: a key is remembered until the second
 * rotation after it. */
static void test_dedup_generations(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.dedup_cap = 16;
    struct gh_timeline *tl = gh_timeline_new(&c);
    assert_non_null(tl);
    struct gh_signal s;
    for (int i = 0; i < 17; i++) { /* 0..15 fill generation 0; 16 rotates it out */
        mk(&s, 1000 + i, "n", NULL, i);
        assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
        gh_signal_clear(&s);
    }
    mk(&s, 1000, "n", NULL, 0); /* in the old generation */
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_EAGAIN);
    gh_signal_clear(&s);
    mk(&s, 1016, "n", NULL, 16); /* in the current one */
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_EAGAIN);
    gh_signal_clear(&s);
    for (int i = 17; i < 33; i++) { /* 16..31 fill the new one; 32 rotates again */
        mk(&s, 1000 + i, "n", NULL, i);
        assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
        gh_signal_clear(&s);
    }
    mk(&s, 1000, "n", NULL, 0); /* forgotten */
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
    gh_signal_clear(&s);
    mk(&s, 1017, "n", NULL, 17); /* still remembered */
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_EAGAIN);
    gh_signal_clear(&s);
    /* The id, when given, is the key with the node, source and injected
     * flag: same id and node, other content, is a duplicate; the same id
     * on another node is another signal (issue 15 #1). */
    mk(&s, 5000, "n", NULL, 99);
    gh_signal_set_str(&s.id, "abc", 3);
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
    gh_signal_clear(&s);
    mk(&s, 6000, "n", NULL, 98);
    gh_signal_set_str(&s.id, "abc", 3);
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_EAGAIN);
    gh_signal_clear(&s);
    mk(&s, 6000, "m", NULL, 98);
    gh_signal_set_str(&s.id, "abc", 3);
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
    gh_signal_clear(&s);
    /* NULL and "" name the same node for dedup, as before. */
    mk(&s, 7000, NULL, NULL, 97);
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
    gh_signal_clear(&s);
    mk(&s, 7000, "", NULL, 97);
    assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_EAGAIN);
    gh_signal_clear(&s);
    gh_timeline_free(tl);
}

/* Copied and stolen signals share one copy of each name; entries (pooled or
 * not) and their names stay valid after the timeline is freed while
 * someone holds a reference. Run under ASan. */
static void test_names_and_pool(void **st)
{
    (void)st;
    struct gh_timeline_config c;
    gh_timeline_config_default(&c);
    c.window_ns = 0;
    struct gh_timeline *tl = gh_timeline_new(&c);
    assert_non_null(tl);
    const struct gh_tl_entry *kept[4] = {0};
    int n_kept = 0;
    char node[32];
    for (int i = 0; i < 12000; i++) { /* past the node rings' 256: entries die */
        struct gh_signal s;
        snprintf(node, sizeof node, "node-%02d", i % 24);
        mk(&s, 1000 + i, node, i % 3 ? "ns/train" : "ns/eval", i);
        s.kind = GH_KIND_XID;
        if (i % 2) {
            assert_int_equal(gh_timeline_push_steal(tl, &s, INT64_MIN, NULL), GH_OK);
            assert_null(s.node); /* taken */
        } else {
            assert_int_equal(gh_timeline_push(tl, &s, INT64_MIN, NULL), GH_OK);
            gh_signal_clear(&s);
        }
        const struct gh_tl_entry *e = gh_timeline_release(tl, 1000 + i, false);
        assert_non_null(e);
        assert_int_equal(e->sig.code, i);
        assert_string_equal(e->sig.node, node);
        assert_string_equal(e->sig.job, i % 3 ? "ns/train" : "ns/eval");
        if (i % 3000 == 7 && n_kept < 4)
            kept[n_kept++] = gh_tl_ref(e);
    }
    /* One copy per name: the entries of one node share its string. */
    const struct gh_tl_entry *v[8];
    size_t n = gh_timeline_query(tl, GH_TL_NODE, "node-05", -1, GH_KIND_BIT(GH_KIND_XID), INT64_MIN,
                                 INT64_MAX, true, v, 8);
    assert_true(n >= 2);
    for (size_t k = 1; k < n; k++)
        assert_ptr_equal(v[k]->sig.node, v[0]->sig.node);
    struct gh_timeline_stats ts;
    gh_timeline_stats(tl, &ts);
    assert_int_equal(ts.names, 24 + 2);
    assert_true(ts.pooled > 0);
    gh_timeline_free(tl);
    for (int k = 0; k < n_kept; k++) {
        snprintf(node, sizeof node, "node-%02d", kept[k]->sig.code % 24);
        assert_string_equal(kept[k]->sig.node, node);
        gh_tl_unref(kept[k]);
    }
}

static void test_key_int(void **st)
{
    (void)st;
    const char *prefixes[] = {NULL, "", "n", "gpu-node-0042", "a-rather-long-node-name.example.org"};
    int nums[] = {0, 1, -1, 7, 10, 99, 1024, -4096, 123456789, INT_MAX, INT_MIN};
    for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++)
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
            for (size_t cap = 1; cap <= 48; cap++) {
                char want[64], got[64];
                memset(got, 'x', sizeof got);
                snprintf(want, cap, "%s/%d", prefixes[p] ? prefixes[p] : "", nums[k]);
                assert_ptr_equal(gh_strmap_key_int(got, cap, prefixes[p], '/', nums[k]), got);
                assert_string_equal(got, want);
                size_t l = strlen(got);
                assert_true(l < cap);
                assert_int_equal(got[l + 1], 'x'); /* nothing written past the NUL */
            }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sorted_median(const double *v, size_t n)
{
    double *t = malloc(n * sizeof *t);
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2.0;
    free(t);
    return m;
}

/* The median and MAD, small inputs by insertion sort and large ones by
 * selection, equal a full sort's, ties and duplicates included. */
static void test_median(void **st)
{
    (void)st;
    uint64_t seed = 7;
    double v[1100], w[1100], scratch[1100];
    for (int trial = 0; trial < 400; trial++) {
        size_t n = trial < 200 ? (size_t)(trial % 40) + 1 : (size_t)(rnd(&seed) % 1100) + 1;
        for (size_t i = 0; i < n; i++)
            v[i] = trial % 3 ? (double)(rnd(&seed) % 10000) / 7.0 : (double)(rnd(&seed) % 4);
        double want = sorted_median(v, n);
        memcpy(w, v, n * sizeof *w);
        assert_true(gh_stats_median(w, n) == want);
        for (size_t i = 0; i < n; i++)
            scratch[i] = fabs(v[i] - want);
        double want_mad = sorted_median(scratch, n);
        assert_true(gh_stats_mad(v, n, want, scratch) == want_mad);
    }
    assert_true(isnan(gh_stats_median(v, 0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_order),  cmocka_unit_test(test_forced_release),
        cmocka_unit_test(test_dedup_generations), cmocka_unit_test(test_names_and_pool),
        cmocka_unit_test(test_key_int),        cmocka_unit_test(test_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
