/* test_journal.c - the signal journal (audit/journal.h) on SQLite and on a
 * private PostgreSQL: batches committed and read back in arrival order with
 * exact times, duplicates ignored, a failed batch leaving nothing, pruning
 * by age, persistence across a reopen, and an engine fed by a replay
 * deciding the same incident id as the engine fed live. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/journal.h"
#include "audit/pg_testenv.h"
#include "engine/engine.h"
#include "signal/signal_json.h"
#include "store_fixture.h"

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */

struct fake_clock {
    int64_t t;
};
static int64_t fake_now(void *ctx) { return ((struct fake_clock *)ctx)->t; }

static const char *const lines[] = {
    "{\"ts\":\"2026-11-29T07:00:09.123456789Z\",\"node\":\"gpu-17\",\"gpu\":3,\"source\":\"kmsg\","
    "\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off "
    "the bus.\",\"id\":\"a-1\"}",
    "{\"ts\":\"2026-11-29T07:00:09.5Z\",\"node\":\"gpu-17\",\"source\":\"kube\","
    "\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"llm-3\",\"job\":\"ml/llm\","
    "\"reason\":\"Error\",\"exit_code\":1,\"id\":\"a-2\"}",
    /* no id: keyed by a hash of its encoding */
    "{\"ts\":\"2026-11-29T07:00:09.9Z\",\"node\":\"gpu-17\",\"gpu\":3,\"source\":\"nvml\","
    "\"kind\":\"thermal\",\"celsius\":91,\"throttled\":true}",
};
#define NLINES (sizeof lines / sizeof lines[0])

static void decode_all(struct gh_signal *out)
{
    for (size_t i = 0; i < NLINES; i++) {
        struct gh_err err;
        if (gh_signal_decode(lines[i], strlen(lines[i]), 0, &out[i], &err))
            fail_msg("decode %zu: %s", i, err.msg);
    }
}

static void clear_all(struct gh_signal *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&s[i]);
}

#define MAX_GOT 16
struct got {
    size_t n;
    struct gh_signal s[MAX_GOT];
    int64_t arrival[MAX_GOT];
};

static int collect(void *ud, struct gh_signal *sig, int64_t arrival_ns)
{
    struct got *g = ud;
    if (g->n == MAX_GOT) {
        gh_signal_clear(sig);
        return GH_ELIMIT;
    }
    g->s[g->n] = *sig; /* stolen */
    g->arrival[g->n++] = arrival_ns;
    return GH_OK;
}

static long count(struct gh_journal *j)
{
    long n = -1;
    struct gh_err err;
    assert_int_equal(gh_journal_count(j, &n, &err), GH_OK);
    return n;
}

static void exercise(const char *url)
{
    struct fake_clock fc = {T0 + GH_NS_PER_S};
    struct gh_clock clock = {fake_now, &fc};
    struct gh_journal_opts jo = {.db_url = url,
                                 .retention_ns = 600 * GH_NS_PER_S,
                                 .prune_every_ns = 60 * GH_NS_PER_S,
                                 .clock = &clock};
    struct gh_journal *j = NULL;
    struct gh_err err = {{0}};
    if (gh_journal_open(&jo, &j, &err))
        fail_msg("open %s: %s", url, err.msg);
    assert_int_equal(count(j), 0);

    struct gh_signal s[NLINES];
    decode_all(s);
    /* two batches: the last signal arrives later */
    assert_int_equal(gh_journal_append(j, s, 2, T0 + GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(gh_journal_append(j, s + 2, 1, T0 + 2 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), 3);
    /* a resent batch (the sender never saw the answer): fine, nothing added */
    assert_int_equal(gh_journal_append(j, s, 3, T0 + 3 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), 3);

    /* a batch with a signal that cannot be written leaves nothing behind */
    struct gh_signal bad[2];
    assert_int_equal(gh_signal_decode(lines[0], strlen(lines[0]), 0, &bad[0], &err), GH_OK);
    assert_int_equal(gh_signal_decode(lines[2], strlen(lines[2]), 0, &bad[1], &err), GH_OK);
    free(bad[0].id);
    bad[0].id = strdup("c-1");
    bad[1].celsius = NAN; /* not encodable */
    assert_int_not_equal(gh_journal_append(j, bad, 2, T0 + 4 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), 3);
    clear_all(bad, 2);
    clear_all(s + 2, NLINES - 2);
    struct gh_signal keep[NLINES];
    decode_all(keep);

    /* reopened (a restart): read back in arrival order with exact times */
    gh_journal_close(j);
    j = NULL;
    assert_int_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    struct got g;
    memset(&g, 0, sizeof g);
    struct gh_journal_replay_stats st;
    assert_int_equal(gh_journal_replay(j, 0, collect, &g, &st, &err), GH_OK);
    assert_int_equal(st.replayed, 3);
    assert_int_equal(st.unreadable, 0);
    assert_int_equal(g.n, 3);
    for (size_t i = 0; i < NLINES; i++) {
        assert_int_equal(g.s[i].ts_ns, keep[i].ts_ns); /* nanoseconds kept */
        assert_int_equal(g.s[i].kind, keep[i].kind);
        if (keep[i].id)
            assert_string_equal(g.s[i].id, keep[i].id);
        else
            assert_null(g.s[i].id);
    }
    assert_int_equal(g.arrival[0], T0 + GH_NS_PER_S);
    assert_int_equal(g.arrival[1], T0 + GH_NS_PER_S);
    assert_int_equal(g.arrival[2], T0 + 2 * GH_NS_PER_S);
    clear_all(g.s, g.n);
    /* since: only what arrived at or after it */
    memset(&g, 0, sizeof g);
    assert_int_equal(gh_journal_replay(j, T0 + 2 * GH_NS_PER_S, collect, &g, &st, &err), GH_OK);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.s[0].kind, GH_KIND_THERMAL);
    clear_all(g.s, g.n);

    /* pruning: by append, at most once per interval, rows past retention */
    fc.t = T0 + 601 * GH_NS_PER_S + GH_NS_PER_S / 2; /* first batch past 600 s, second not */
    struct gh_signal one;
    assert_int_equal(gh_signal_decode(lines[0], strlen(lines[0]), 0, &one, &err), GH_OK);
    free(one.id);
    one.id = strdup("b-1");
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 2); /* a-1, a-2 pruned; thermal and b-1 kept */
    fc.t += 10 * GH_NS_PER_S;      /* everything but b-1 old now, but within the interval */
    free(one.id);
    one.id = strdup("b-2");
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 3);
    fc.t += 60 * GH_NS_PER_S; /* the interval passed: thermal pruned */
    free(one.id);
    one.id = strdup("b-3");
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 3);
    /* the same id from another source, node or an injection is another
     * signal, another row (issue 15 #1); the same again is not */
    one.source = GH_SRC_TELEMETRY;
    one.kind = GH_KIND_STEP;
    free(one.job);
    one.job = strdup("ml/a");
    one.has_rank = one.has_step = true;
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 4);
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 4);
    one.injected = true;
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 5);
    free(one.node);
    one.node = strdup("other-node");
    assert_int_equal(gh_journal_append(j, &one, 1, fc.t, &err), GH_OK);
    assert_int_equal(count(j), 6);
    long removed = -1;
    assert_int_equal(gh_journal_prune(j, INT64_MAX, &removed, &err), GH_OK);
    assert_int_equal(removed, 6);
    assert_int_equal(count(j), 0);
    gh_signal_clear(&one);
    clear_all(keep, NLINES);
    clear_all(s, 2);
    gh_journal_close(j);
}

/* ---- a replay decides the same incident as the live feed */

struct ids {
    int n;
    char id[8][32];
};
static void on_incident(void *ctx, const struct gh_incident *inc)
{
    struct ids *ids = ctx;
    if (ids->n < 8)
        snprintf(ids->id[ids->n++], sizeof ids->id[0], "%s", inc->id);
}

static int to_engine(void *ud, struct gh_signal *sig, int64_t arrival_ns)
{
    int rc = gh_engine_ingest_steal(ud, sig, arrival_ns, NULL);
    gh_signal_clear(sig);
    return rc == GH_OK || rc == GH_EAGAIN ? GH_OK : rc;
}

static void test_replay_same_incident(void **st)
{
    (void)st;
    char path[] = "/tmp/gh-journal-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    char url[64];
    snprintf(url, sizeof url, "sqlite:%s", path);
    struct fake_clock fc = {T0};
    struct gh_clock clock = {fake_now, &fc};
    struct gh_err err = {{0}};

    /* live: the batch journalled, then fed */
    struct ids live = {0}, again = {0};
    struct gh_engine *e = gh_engine_new(NULL, NULL, &clock, NULL, on_incident, &live, &err);
    assert_non_null(e);
    struct gh_journal_opts jo = {.db_url = url, .clock = &clock};
    struct gh_journal *j = NULL;
    assert_int_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    struct gh_signal s[NLINES];
    decode_all(s);
    assert_int_equal(gh_journal_append(j, s, NLINES, T0, &err), GH_OK);
    for (size_t i = 0; i < NLINES; i++)
        assert_int_equal(gh_engine_ingest_steal(e, &s[i], T0, &err), GH_OK);
    clear_all(s, NLINES);
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
    gh_journal_close(j);
    assert_true(live.n >= 1);

    /* restarted later: the replay decides the same ids */
    fc.t = T0 + 120 * GH_NS_PER_S;
    e = gh_engine_new(NULL, NULL, &clock, NULL, on_incident, &again, &err);
    assert_non_null(e);
    assert_int_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    struct gh_journal_replay_stats rs;
    assert_int_equal(gh_journal_replay(j, fc.t - 3600 * GH_NS_PER_S, to_engine, e, &rs, &err),
                     GH_OK);
    assert_int_equal(rs.replayed, NLINES);
    gh_engine_finish(e, INT64_MAX);
    gh_engine_free(e);
    gh_journal_close(j);
    assert_int_equal(again.n, live.n);
    for (int i = 0; i < live.n; i++)
        assert_string_equal(again.id[i], live.id[i]);
    gh_store_sqlite_unlink(path);
}

static int one_key(void *ud, const char *key)
{
    char *buf = ud;
    if (*buf)
        return GH_ELIMIT; /* one incident stored: one key */
    snprintf(buf, 512, "%s", key);
    return GH_OK;
}

/* The decision key of a stored incident matches the key of the same
 * decision made without its job (what a replay may see). */
static void test_decided_keys(void **st)
{
    (void)st;
    char path[] = "/tmp/gh-journal-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    char url[64];
    snprintf(url, sizeof url, "sqlite:%s", path);
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open(url, &a, &err), GH_OK);
    json_t *inc = json_loads(
        "{\"id\":\"inc-00000000000000aa\",\"class\":\"gpu_hardware\",\"node\":\"gpu-17\","
        "\"gpu\":3,\"job\":\"ml/llm\",\"first_ts\":\"2026-11-29T07:00:09.123456Z\","
        "\"decided_ts\":\"2026-11-29T07:00:10.000000Z\",\"actions\":[\"isolate_node\"],"
        "\"evidence\":[],\"rule\":\"gpu-fell-off-bus\",\"reason\":\"x\","
        "\"severity\":\"critical\"}",
        0, NULL);
    assert_non_null(inc);
    assert_int_equal(gh_audit_record_incident(a, inc, "act", "Acting", "c", T0, NULL, &err), 0);
    json_decref(inc);
    gh_audit_close(a);

    struct gh_journal_opts jo = {.db_url = url};
    struct gh_journal *j = NULL;
    assert_int_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    char got[512] = "";
    assert_int_equal(gh_journal_decided(j, T0 - 3600 * GH_NS_PER_S, one_key, got, &err), GH_OK);
    char want[512];
    /* the engine's time in ns (sub-microsecond digits are not stored) */
    gh_journal_decision_key("gpu_hardware", "gpu-17", 3, 1795935609123456789LL,
                            "gpu-fell-off-bus", want, sizeof want);
    assert_string_equal(got, want);
    got[0] = '\0';
    assert_int_equal(gh_journal_decided(j, T0 + GH_NS_PER_S, one_key, got, &err), GH_OK);
    assert_string_equal(got, ""); /* decided before since */
    gh_journal_close(j);
    gh_store_sqlite_unlink(path);
}

static void test_sqlite(void **st)
{
    (void)st;
    char path[] = "/tmp/gh-journal-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    char url[64];
    snprintf(url, sizeof url, "sqlite:%s", path);
    exercise(url);
    gh_store_sqlite_unlink(path);
}

static void test_open_error(void **st)
{
    (void)st;
    struct gh_journal_opts jo = {.db_url = "sqlite:/nonexistent-dir/x/audit.db"};
    struct gh_journal *j = NULL;
    struct gh_err err = {{0}};
    assert_int_not_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    assert_null(j);
    assert_non_null(strstr(err.msg, "journal"));
}

static void test_postgres(void **st)
{
    struct gh_pg_testenv *pg = *st;
    if (!pg)
        skip();
    exercise(pg->url);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_open_error),
        cmocka_unit_test(test_replay_same_incident),
        cmocka_unit_test(test_decided_keys),
        cmocka_unit_test_setup_teardown(test_postgres, gh_store_pg_setup, gh_store_pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
