/* test_journal_batch.c - the signal journal's multi-row INSERTs
 * (GH_JOURNAL_ROWS_PER_INSERT rows per statement) and the store's
 * prepared-statement cache, on SQLite and on a private PostgreSQL: a batch
 * over two statements long with duplicate ids inside one statement, across
 * statements of one batch and across batches keeps each id's first row and
 * the arrival order; a chunk that fails leaves nothing of its batch; the
 * cache serves a statement again, prepares a second copy for a statement
 * already in use by a row callback, evicts and re-prepares, and binds
 * a parameter used twice (and, on SQLite, one not used). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/db.h"
#include "audit/journal.h"
#include "signal/signal_json.h"
#include "store_fixture.h"

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */
#define ROWS GH_JOURNAL_ROWS_PER_INSERT
#define BATCH (2 * ROWS + 37) /* three statements, the last one short */

/* A thermal signal with id "b-<idn>" (or none when idn < 0), telling
 * copies of one id apart by celsius. */
static void make(struct gh_signal *s, int idn, int celsius, int64_t ts_ns)
{
    memset(s, 0, sizeof *s);
    char line[256], id[32] = "";
    if (idn >= 0)
        snprintf(id, sizeof id, ",\"id\":\"b-%d\"", idn);
    snprintf(line, sizeof line,
             "{\"ts\":\"2026-11-29T07:00:09Z\",\"node\":\"gpu-%d\",\"gpu\":%d,\"source\":\"nvml\","
             "\"kind\":\"thermal\",\"celsius\":%d,\"throttled\":false%s}",
             idn < 0 ? 999 : idn % 100, (idn < 0 ? 0 : idn) % 8, celsius, id);
    struct gh_err err;
    if (gh_signal_decode(line, strlen(line), 0, s, &err))
        fail_msg("decode %s: %s", line, err.msg);
    s->ts_ns = ts_ns;
}

static void clear_all(struct gh_signal *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&s[i]);
}

#define MAX_GOT (6 * ROWS)
struct got {
    size_t n;
    char id[MAX_GOT][32];
    int celsius[MAX_GOT];
    int64_t ts[MAX_GOT], arrival[MAX_GOT];
};

static int collect(void *ud, struct gh_signal *sig, int64_t arrival_ns)
{
    struct got *g = ud;
    if (g->n == MAX_GOT) {
        gh_signal_clear(sig);
        return GH_ELIMIT;
    }
    snprintf(g->id[g->n], sizeof g->id[0], "%s", sig->id ? sig->id : "");
    g->celsius[g->n] = (int)sig->celsius;
    g->ts[g->n] = sig->ts_ns;
    g->arrival[g->n++] = arrival_ns;
    gh_signal_clear(sig);
    return GH_OK;
}

static long count(struct gh_journal *j)
{
    long n = -1;
    struct gh_err err;
    assert_int_equal(gh_journal_count(j, &n, &err), GH_OK);
    return n;
}

struct fake_clock {
    int64_t t;
};
static int64_t fake_now(void *ctx) { return ((struct fake_clock *)ctx)->t; }

static void exercise(const char *url)
{
    /* the journal's clock at the batches' arrival: nothing is pruned */
    struct fake_clock fc = {T0 + 10 * GH_NS_PER_S};
    struct gh_clock clock = {fake_now, &fc};
    struct gh_journal_opts jo = {.db_url = url, .clock = &clock};
    struct gh_journal *j = NULL;
    struct gh_err err = {{0}};
    if (gh_journal_open(&jo, &j, &err))
        fail_msg("open %s: %s", url, err.msg);

    /* batch 1: ids 0..BATCH-1 in order, except that
     *   position ROWS+5 repeats id 5 (an earlier statement of the batch),
     *   position 11 repeats id 10 (the same statement),
     *   position 2*ROWS+1 repeats id 2*ROWS (the last, short statement);
     * each repeat has celsius 99, the first copies 40 + id % 50. */
    struct gh_signal *b = calloc(BATCH, sizeof *b);
    assert_non_null(b);
    int ids[BATCH];
    for (int i = 0; i < BATCH; i++) {
        ids[i] = i;
        int dup = i == ROWS + 5 ? 5 : i == 11 ? 10 : i == 2 * ROWS + 1 ? 2 * ROWS : -1;
        make(&b[i], dup >= 0 ? dup : i, dup >= 0 ? 99 : 40 + i % 50, T0 + i);
        if (dup >= 0)
            ids[i] = -1;
    }
    assert_int_equal(gh_journal_append(j, b, BATCH, T0 + GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), BATCH - 3);

    /* batch 2: ids BATCH-10..BATCH+ROWS-1: the first 10 already journalled
     * (across batches, celsius 98 now), the rest new, plus a signal without
     * an id sent twice (keyed by its encoding) */
    size_t n2 = ROWS + 10 + 2;
    struct gh_signal *b2 = calloc(n2, sizeof *b2);
    assert_non_null(b2);
    for (size_t i = 0; i < ROWS + 10; i++) {
        int idn = BATCH - 10 + (int)i;
        make(&b2[i], idn, i < 10 ? 98 : 40 + idn % 50, T0 + idn);
    }
    make(&b2[ROWS + 10], -1, 77, T0);
    make(&b2[ROWS + 11], -1, 77, T0);
    assert_int_equal(gh_journal_append(j, b2, n2, T0 + 2 * GH_NS_PER_S, &err), GH_OK);
    long want = BATCH - 3 + ROWS + 1;
    assert_int_equal(count(j), want);
    /* the whole second batch again (a retry): nothing added */
    assert_int_equal(gh_journal_append(j, b2, n2, T0 + 3 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), want);

    /* a batch whose last statement fails leaves none of its rows */
    struct gh_signal *b3 = calloc(ROWS + 2, sizeof *b3);
    assert_non_null(b3);
    for (int i = 0; i < ROWS + 2; i++)
        make(&b3[i], 10000 + i, 50, T0);
    b3[ROWS + 1].celsius = NAN; /* not encodable: the second statement fails */
    assert_int_not_equal(gh_journal_append(j, b3, ROWS + 2, T0 + 4 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), want);
    /* and the journal goes on: the same ids, all encodable, are taken */
    b3[ROWS + 1].celsius = 50;
    assert_int_equal(gh_journal_append(j, b3, ROWS + 2, T0 + 5 * GH_NS_PER_S, &err), GH_OK);
    want += ROWS + 2;
    assert_int_equal(count(j), want);

    /* read back after a reopen: arrival order, then the batch's order; the
     * first copy of each id */
    gh_journal_close(j);
    j = NULL;
    assert_int_equal(gh_journal_open(&jo, &j, &err), GH_OK);
    struct got *g = calloc(1, sizeof *g);
    assert_non_null(g);
    struct gh_journal_replay_stats st;
    assert_int_equal(gh_journal_replay(j, 0, collect, g, &st, &err), GH_OK);
    assert_int_equal(st.replayed, (size_t)want);
    assert_int_equal(st.unreadable, 0);
    size_t k = 0;
    for (int i = 0; i < BATCH; i++) {
        if (ids[i] < 0)
            continue;
        char id[32];
        snprintf(id, sizeof id, "b-%d", i);
        assert_string_equal(g->id[k], id);
        assert_int_equal(g->celsius[k], 40 + i % 50); /* not 99 or 98 */
        assert_int_equal(g->ts[k], T0 + i);
        assert_int_equal(g->arrival[k], T0 + GH_NS_PER_S);
        k++;
    }
    for (int i = 0; i < ROWS; i++, k++) {
        char id[32];
        snprintf(id, sizeof id, "b-%d", BATCH + i);
        assert_string_equal(g->id[k], id);
        assert_int_equal(g->arrival[k], T0 + 2 * GH_NS_PER_S);
    }
    assert_string_equal(g->id[k], ""); /* the signal without an id, once */
    assert_int_equal(g->celsius[k], 77);
    k++;
    for (int i = 0; i < ROWS + 2; i++, k++) {
        char id[32];
        snprintf(id, sizeof id, "b-%d", 10000 + i);
        assert_string_equal(g->id[k], id);
        assert_int_equal(g->arrival[k], T0 + 5 * GH_NS_PER_S);
    }
    assert_int_equal(k, g->n);

    /* exactly one statement's worth, and one more: both boundaries */
    clear_all(b3, ROWS + 2);
    for (int i = 0; i < ROWS + 1; i++)
        make(&b3[i], 20000 + i, 50, T0);
    assert_int_equal(gh_journal_append(j, b3, ROWS, T0 + 6 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), want + ROWS);
    assert_int_equal(gh_journal_append(j, b3, ROWS + 1, T0 + 7 * GH_NS_PER_S, &err), GH_OK);
    assert_int_equal(count(j), want + ROWS + 1);

    long removed = -1;
    assert_int_equal(gh_journal_prune(j, INT64_MAX, &removed, &err), GH_OK);
    assert_int_equal(removed, want + ROWS + 1);
    free(g);
    clear_all(b, BATCH);
    clear_all(b2, n2);
    clear_all(b3, ROWS + 1);
    free(b);
    free(b2);
    free(b3);
    gh_journal_close(j);
}

/* ---- the statement cache, through gh_db directly */

struct nested {
    struct gh_db *db;
    int rows, inner_rows;
    char seen[64];
};

static int inner_row(void *ud, int ncols, const char *const *vals)
{
    struct nested *n = ud;
    assert_int_equal(ncols, 1);
    n->inner_rows++;
    snprintf(n->seen + strlen(n->seen), sizeof n->seen - strlen(n->seen), "%s,", vals[0]);
    return GH_OK;
}

/* Runs the very statement that is stepping now (busy in the cache). */
static int outer_row(void *ud, int ncols, const char *const *vals)
{
    struct nested *n = ud;
    (void)ncols;
    (void)vals;
    n->rows++;
    struct gh_db_val p[] = {gh_db_int(2)};
    struct gh_err err;
    int rc = gh_db_query(n->db, "SELECT k FROM t WHERE k <= $1 ORDER BY k", p, 1, inner_row, n,
                         &err);
    if (rc)
        fail_msg("nested query: %s", err.msg);
    return rc;
}

static int one_value(void *ud, int ncols, const char *const *vals)
{
    assert_int_equal(ncols, 1);
    snprintf(ud, 64, "%s", vals[0] ? vals[0] : "NULL");
    return GH_OK;
}

static void cache_exercise(enum gh_db_kind kind, const char *target)
{
    struct gh_db *db = NULL;
    struct gh_err err = {{0}};
    if (gh_db_open(kind, target, &db, &err))
        fail_msg("open %s: %s", target, err.msg);
    assert_int_equal(gh_db_script(db, "DROP TABLE IF EXISTS t; CREATE TABLE t (k BIGINT PRIMARY "
                                      "KEY, v TEXT, w TEXT)", &err), GH_OK);
    /* the same INSERT 100 times (cached after the first) */
    for (int i = 1; i <= 100; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        struct gh_db_val p[] = {gh_db_int(i), gh_db_text(v), gh_db_null()};
        long changed = -1;
        assert_int_equal(gh_db_exec(db, "INSERT INTO t (k, v, w) VALUES ($1, $2, $3)", p, 3,
                                    &changed, &err), GH_OK);
        assert_int_equal(changed, 1);
    }
    /* a parameter used twice; on SQLite also one not used at all
     * (PostgreSQL refuses a parameter whose type it cannot infer) */
    struct gh_db_val p2[] = {gh_db_text("same"), gh_db_text("unused")};
    long changed = -1;
    assert_int_equal(gh_db_exec(db, "UPDATE t SET v = $1, w = $1 WHERE k = 7", p2,
                                kind == GH_DB_SQLITE ? 2 : 1, &changed, &err), GH_OK);
    assert_int_equal(changed, 1);
    char got[64] = "";
    assert_int_equal(gh_db_query(db, "SELECT v || '/' || w FROM t WHERE k = 7", NULL, 0,
                                 one_value, got, &err), GH_OK);
    assert_string_equal(got, "same/same");
    /* the bindings of one use do not leak into the next: NULL stays NULL */
    struct gh_db_val p3[] = {gh_db_int(101), gh_db_text("v101"), gh_db_null()};
    assert_int_equal(gh_db_exec(db, "INSERT INTO t (k, v, w) VALUES ($1, $2, $3)", p3, 3, NULL,
                                &err), GH_OK);
    assert_int_equal(gh_db_query(db, "SELECT COALESCE(w, 'NULL') FROM t WHERE k = 101", NULL, 0,
                                 one_value, got, &err), GH_OK);
    assert_string_equal(got, "NULL");

    /* a row callback running the statement that is stepping */
    struct nested n = {.db = db};
    struct gh_db_val p4[] = {gh_db_int(3)};
    assert_int_equal(gh_db_query(db, "SELECT k FROM t WHERE k <= $1 ORDER BY k", p4, 1, outer_row,
                                 &n, &err), GH_OK);
    assert_int_equal(n.rows, 3);
    assert_int_equal(n.inner_rows, 6);
    assert_string_equal(n.seen, "1,2,1,2,1,2,");

    /* more distinct statements than the cache holds, twice over, inside a
     * transaction that is rolled back: each still runs right */
    assert_int_equal(gh_db_begin(db, &err), GH_OK);
    for (int round = 0; round < 2; round++)
        for (int i = 1; i <= 80; i++) {
            char sql[96];
            snprintf(sql, sizeof sql, "UPDATE t SET w = $1 WHERE k = %d", i);
            struct gh_db_val p5[] = {gh_db_text(round ? "r1" : "r0")};
            changed = -1;
            assert_int_equal(gh_db_exec(db, sql, p5, 1, &changed, &err), GH_OK);
            assert_int_equal(changed, 1);
        }
    gh_db_rollback(db);
    assert_int_equal(gh_db_query(db, "SELECT COUNT(*) FROM t WHERE w = 'r1'", NULL, 0, one_value,
                                 got, &err), GH_OK);
    assert_string_equal(got, "0");
    /* a failing statement (duplicate key) leaves the cache usable */
    struct gh_db_val dup[] = {gh_db_int(1), gh_db_text("x"), gh_db_null()};
    assert_int_not_equal(gh_db_exec(db, "INSERT INTO t (k, v, w) VALUES ($1, $2, $3)", dup, 3,
                                    NULL, &err), GH_OK);
    struct gh_db_val ok[] = {gh_db_int(102), gh_db_text("x"), gh_db_null()};
    assert_int_equal(gh_db_exec(db, "INSERT INTO t (k, v, w) VALUES ($1, $2, $3)", ok, 3, NULL,
                                &err), GH_OK);
    assert_int_equal(gh_db_query(db, "SELECT COUNT(*) FROM t", NULL, 0, one_value, got, &err),
                     GH_OK);
    assert_string_equal(got, "102");
    /* over the parameter limit: refused, not truncated */
    assert_int_equal(gh_db_exec(db, "SELECT 1", ok, GH_DB_MAX_PARAMS + 1, NULL, &err), GH_ELIMIT);
    gh_db_close(db);
}

static void test_sqlite(void **st)
{
    (void)st;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-jbatch");
    exercise(t.url);
    gh_store_tmp_remove(&t);
}

static void test_sqlite_cache(void **st)
{
    (void)st;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-dbcache");
    cache_exercise(GH_DB_SQLITE, t.path);
    gh_store_tmp_remove(&t);
}

static void test_postgres(void **st)
{
    struct gh_pg_testenv *pg = *st;
    if (!pg)
        skip();
    exercise(pg->url);
    assert_int_equal(strncmp(pg->url, "postgres:", 9), 0);
    cache_exercise(GH_DB_POSTGRES, pg->url + 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_sqlite_cache),
        cmocka_unit_test_setup_teardown(test_postgres, gh_store_pg_setup, gh_store_pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
