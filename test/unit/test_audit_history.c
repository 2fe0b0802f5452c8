/* test_audit_history.c - the audit store's job history and telemetry, on
 * SQLite and on a private PostgreSQL: a job's interruptions (only incidents
 * whose actions restart it) and evidence span, step aggregates merged by
 * upsert and dropped by retention, and the batching step writer (explicit
 * flush, timer flush on its thread, a full buffer counted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/history.h"
#include "audit/pg_testenv.h"
#include "audit/step_writer.h"
#include "audit/telemetry.h"
#include "common/timeutil.h"
#include "store_fixture.h"

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */
#define H (3600 * GH_NS_PER_S)

/* An incident of job at t (first evidence) with actions (a JSON list). */
static void record(struct gh_audit *a, const char *id, const char *job, const char *cls,
                   int64_t t, const char *actions)
{
    char ts[40], buf[1024];
    gh_time_format_rfc3339(t, ts, sizeof ts);
    snprintf(buf, sizeof buf,
             "{\"id\":\"%s\",\"class\":\"%s\",\"node\":\"gpu-01\",\"job\":\"%s\","
             "\"first_ts\":\"%s\",\"decided_ts\":\"%s\",\"actions\":%s,"
             "\"evidence\":[{\"ts\":\"%s\",\"node\":\"gpu-01\",\"source\":\"kmsg\","
             "\"kind\":\"xid\",\"code\":79,\"job\":\"%s\"}],\"rule\":\"r\",\"reason\":\"x\"}",
             id, cls, job, ts, ts, actions, ts, job);
    json_t *inc = json_loads(buf, 0, NULL);
    assert_non_null(inc);
    struct gh_err err = {{0}};
    if (gh_audit_record_incident(a, inc, "act", "Done", "ctl", t, NULL, &err))
        fail_msg("record %s: %s", id, err.msg);
    json_decref(inc);
}

struct seen {
    char ids[8][64];
    size_t n;
};

static int take(void *ud, const struct gh_audit_interruption *it)
{
    struct seen *s = ud;
    if (s->n < 8)
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", it->id);
    s->n++;
    return GH_OK;
}

struct rows {
    struct gh_audit_steps v[64];
    size_t n;
};

static int take_steps(void *ud, const struct gh_audit_steps *s)
{
    struct rows *r = ud;
    if (r->n < 64)
        r->v[r->n] = *s;
    r->n++;
    return GH_OK;
}

static void step(struct gh_signal *s, const char *job, const char *node, int rank, int64_t ts,
                 int64_t stepno, double ms)
{
    gh_signal_init(s);
    s->source = GH_SRC_TELEMETRY;
    s->kind = GH_KIND_STEP;
    s->ts_ns = ts;
    assert_int_equal(gh_signal_set_str(&s->job, job, strlen(job)), 0);
    assert_int_equal(gh_signal_set_str(&s->node, node, strlen(node)), 0);
    s->has_rank = true;
    s->rank = rank;
    s->has_step = true;
    s->step = stepno;
    s->step_ms = ms;
}

static void exercise(const char *url)
{
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    if (gh_audit_open(url, &a, &err))
        fail_msg("open %s: %s", url, err.msg);

    /* history: 3 interruptions of ml/llm over 10 h, one incident that does
     * not restart it, one of another job */
    record(a, "inc-1", "ml/llm", "gpu_hardware", T0,
           "[\"isolate_node\",\"restart_from_checkpoint\"]");
    record(a, "inc-2", "ml/llm", "nccl_timeout", T0 + 4 * H, "[\"retry_in_place\"]");
    record(a, "inc-3", "ml/llm", "straggler", T0 + 6 * H, "[\"isolate_node\"]");
    record(a, "inc-4", "ml/llm", "gpu_hardware", T0 + 10 * H,
           "[\"isolate_node\",\"restart_from_checkpoint\",\"reboot_node\"]");
    record(a, "inc-5", "ml/other", "gpu_hardware", T0 + 20 * H, "[\"restart_from_checkpoint\"]");
    /* an action name that merely contains one of the words does not count */
    record(a, "inc-6", "ml/llm", "unknown", T0 + 5 * H, "[\"no_restart_from_checkpoint_x\"]");
    struct seen s = {0};
    assert_int_equal(gh_audit_interruptions(a, "ml/llm", 0, 0, take, &s, &err), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.ids[0], "inc-1");
    assert_string_equal(s.ids[1], "inc-2");
    assert_string_equal(s.ids[2], "inc-4");
    memset(&s, 0, sizeof s);
    assert_int_equal(gh_audit_interruptions(a, "ml/llm", T0 + 1, T0 + 9 * H, take, &s, &err), 0);
    assert_int_equal(s.n, 1);
    memset(&s, 0, sizeof s);
    assert_int_equal(gh_audit_interruptions(a, "ml/none", 0, 0, take, &s, &err), 0);
    assert_int_equal(s.n, 0);
    int64_t first = -1, last = -1;
    assert_int_equal(gh_audit_job_span(a, "ml/llm", 0, &first, &last, &err), 0);
    assert_true(first == T0);
    assert_true(last == T0 + 10 * H);
    assert_int_equal(gh_audit_job_span(a, "ml/none", 0, &first, &last, &err), 0);
    assert_true(first == 0 && last == 0);

    /* telemetry: merge adds, min/max widen, the newest sample's step wins */
    struct gh_audit_steps b[2];
    memset(b, 0, sizeof b);
    snprintf(b[0].job, sizeof b[0].job, "ml/llm");
    snprintf(b[0].node, sizeof b[0].node, "gpu-01");
    b[0].rank = 3, b[0].gpu = 3, b[0].bucket_ns = T0, b[0].last_ns = T0 + 2 * GH_NS_PER_S;
    b[0].last_step = 12, b[0].n = 2, b[0].sum_us = 2000000, b[0].min_us = 990000;
    b[0].max_us = 1010000;
    b[1] = b[0];
    b[1].last_ns = T0 + 4 * GH_NS_PER_S, b[1].last_step = 14, b[1].n = 1, b[1].sum_us = 1200000;
    b[1].min_us = b[1].max_us = 1200000;
    assert_int_equal(gh_audit_steps_merge(a, &b[0], 1, 0, &err), 0);
    assert_int_equal(gh_audit_steps_merge(a, &b[1], 1, 0, &err), 0);
    struct rows r = {0};
    assert_int_equal(gh_audit_steps_read(a, "ml/llm", 0, 0, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.v[0].n, 3);
    assert_int_equal(r.v[0].sum_us, 3200000);
    assert_int_equal(r.v[0].min_us, 990000);
    assert_int_equal(r.v[0].max_us, 1200000);
    assert_int_equal(r.v[0].last_step, 14);
    assert_int_equal(r.v[0].gpu, 3);
    assert_string_equal(r.v[0].node, "gpu-01");
    /* telemetry widens the job's span */
    assert_int_equal(gh_audit_job_span(a, "ml/other", 0, &first, &last, &err), 0);
    assert_true(first == T0 + 20 * H);

    /* the writer: the controller's path, flushed explicitly */
    struct gh_step_writer *w = NULL;
    struct gh_step_writer_opts o = {.db_url = url, .bucket_ns = 10 * GH_NS_PER_S,
                                    .retain_ns = 60 * GH_NS_PER_S, .max_pending = 8,
                                    .no_thread = true};
    if (gh_step_writer_new(&o, &w, &err))
        fail_msg("writer: %s", err.msg);
    struct gh_signal sg;
    /* 2 ranks x 30 steps of 1 s: 3 buckets each */
    for (int i = 0; i < 30; i++)
        for (int k = 0; k < 2; k++) {
            step(&sg, "ml/w", k ? "gpu-02" : "gpu-01", k, T0 + 100 * H + i * GH_NS_PER_S, i,
                 k ? 1100.0 : 1000.0);
            assert_true(gh_step_writer_note(w, &sg));
            gh_signal_clear(&sg);
        }
    /* not a step / no rank: ignored */
    step(&sg, "ml/w", "gpu-01", 0, T0 + 100 * H, 1, 1.0);
    sg.has_rank = false;
    assert_false(gh_step_writer_note(w, &sg));
    sg.has_rank = true;
    sg.kind = GH_KIND_CHECKPOINT;
    assert_false(gh_step_writer_note(w, &sg));
    gh_signal_clear(&sg);
    /* 6 buckets buffered of 8: two more new buckets fit, the third is dropped */
    for (int k = 2; k < 5; k++) {
        step(&sg, "ml/w", "gpu-03", k, T0 + 100 * H, 0, 900.0);
        bool kept = gh_step_writer_note(w, &sg);
        assert_true(kept == (k < 4));
        gh_signal_clear(&sg);
    }
    assert_int_equal(gh_step_writer_flush(w, &err), 0);
    struct gh_step_writer_stats st;
    gh_step_writer_stats(w, &st);
    assert_int_equal(st.samples, 62);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.flushes, 1);
    assert_int_equal(st.rows, 8);
    memset(&r, 0, sizeof r);
    assert_int_equal(gh_audit_steps_read(a, "ml/w", 0, 0, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 8);
    size_t rank1 = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.v[i].rank == 1) {
            rank1++;
            assert_int_equal(r.v[i].n, 10);
            assert_int_equal(r.v[i].sum_us, 11000000);
            assert_string_equal(r.v[i].node, "gpu-02");
        }
    assert_int_equal(rank1, 3);
    /* retention: a sample 10 min later drops every bucket older than 60 s
     * before it, across jobs (ml/llm and ml/other are far older) */
    step(&sg, "ml/w", "gpu-01", 0, T0 + 100 * H + 600 * GH_NS_PER_S, 600, 1000.0);
    assert_true(gh_step_writer_note(w, &sg));
    gh_signal_clear(&sg);
    assert_int_equal(gh_step_writer_flush(w, &err), 0);
    memset(&r, 0, sizeof r);
    assert_int_equal(gh_audit_steps_read(a, NULL, 0, 0, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.v[0].last_step, 600);
    gh_step_writer_free(w);

    /* on its thread: a short flush interval writes without being asked */
    o.no_thread = false;
    o.flush_ns = 50 * 1000000LL;
    o.retain_ns = -1;
    if (gh_step_writer_new(&o, &w, &err))
        fail_msg("writer: %s", err.msg);
    step(&sg, "ml/t", "gpu-01", 0, T0, 1, 1000.0);
    assert_true(gh_step_writer_note(w, &sg));
    gh_signal_clear(&sg);
    for (int i = 0; i < 100; i++) {
        gh_step_writer_stats(w, &st);
        if (st.flushes)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(st.flushes, 1);
    memset(&r, 0, sizeof r);
    assert_int_equal(gh_audit_steps_read(a, "ml/t", 0, 0, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 1);
    /* what is left at free is written */
    step(&sg, "ml/t", "gpu-01", 0, T0 + 60 * GH_NS_PER_S, 2, 1000.0);
    assert_true(gh_step_writer_note(w, &sg));
    gh_signal_clear(&sg);
    gh_step_writer_free(w);
    memset(&r, 0, sizeof r);
    assert_int_equal(gh_audit_steps_read(a, "ml/t", 0, 0, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 2);
    /* max keeps the newest, oldest first */
    memset(&r, 0, sizeof r);
    assert_int_equal(gh_audit_steps_read(a, "ml/t", 0, 1, take_steps, &r, &err), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.v[0].last_step, 2);
    gh_audit_close(a);
}

static void test_sqlite(void **st)
{
    (void)st;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-audit-hist");
    exercise(t.url);
    gh_store_tmp_remove(&t);
}

/* The cluster lives in setup/teardown (store_fixture.h). */
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
        cmocka_unit_test_setup_teardown(test_postgres, gh_store_pg_setup, gh_store_pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
