/* test_report_store.c - the step chart of a report made from the audit
 * store: the straggler scenario's step signals go through the controller's
 * step writer (audit/step_writer.h) into a SQLite store, and the report
 * loaded from that store (job subject, and no subject) has the job's chart
 * with one series per rank, the slow node's ranks highlighted; a store
 * without telemetry has no chart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/step_writer.h"
#include "report/from_audit.h"
#include "report/html.h"
#include "report/report.h"
#include "signal/signal_json.h"
#include "report_page.h"
#include "store_fixture.h"

static const char *incident_json =
    "{\"id\":\"inc-00000000000000cc\",\"class\":\"straggler\",\"node\":\"gpu-02\","
    "\"job\":\"ml/llm\",\"first_ts\":\"2026-11-29T07:01:00.000000Z\","
    "\"decided_ts\":\"2026-11-29T07:01:30.000000Z\","
    "\"actions\":[\"isolate_node\",\"restart_from_checkpoint\"],"
    "\"evidence\":[{\"ts\":\"2026-11-29T07:01:00.000000Z\",\"node\":\"gpu-02\",\"gpu\":0,"
    "\"source\":\"telemetry\",\"kind\":\"step\",\"job\":\"ml/llm\",\"rank\":4,\"step\":51,"
    "\"step_ms\":1130.0}],"
    "\"rule\":\"straggler-evict\",\"reason\":\"gpu-02 12% slower\",\"severity\":\"medium\"}";

/* The scenario's signals through the writer; returns how many were kept. */
static size_t feed(struct gh_step_writer *w, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/scenarios/%s", GH_SOURCE_DIR, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    struct gh_signal_reader *rd = gh_signal_reader_new(f);
    assert_non_null(rd);
    size_t kept = 0;
    for (;;) {
        struct gh_signal s;
        json_t *h = NULL;
        struct gh_err err;
        int rc = gh_signal_reader_next(rd, &s, &h, &err);
        if (rc == GH_ENOTFOUND)
            break;
        if (rc)
            fail_msg("scenario: %s", err.msg);
        if (h) {
            json_decref(h);
            continue;
        }
        kept += gh_step_writer_note(w, &s);
        gh_signal_clear(&s);
    }
    gh_signal_reader_free(rd);
    fclose(f);
    return kept;
}

static char *report_page(struct gh_audit *a, const char *subject, struct gh_report_stats *st)
{
    struct gh_err err = {{0}};
    struct gh_report *r = gh_report_new(NULL, &err);
    assert_non_null(r);
    struct gh_audit_subject subj;
    if (subject)
        assert_int_equal(gh_audit_subject_parse(subject, &subj, &err), 0);
    if (gh_report_load_audit(r, a, subject ? &subj : NULL, 0, 0, &err))
        fail_msg("load: %s", err.msg);
    gh_report_stats(r, st);
    char *page = render(r);
    gh_report_free(r);
    return page;
}

static void test_steps_from_store(void **state)
{
    (void)state;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-report-store");
    const char *url = t.url;
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    if (gh_audit_open(url, &a, &err))
        fail_msg("open: %s", err.msg);
    json_t *inc = json_loads(incident_json, 0, NULL);
    assert_non_null(inc);
    assert_int_equal(gh_audit_record_incident(a, inc, "act", "Done", "ctl", 0, NULL, &err), 0);
    json_decref(inc);

    /* before: evidence only, no chart of 16 ranks */
    struct gh_report_stats st;
    char *page = report_page(a, "job/ml/llm", &st);
    assert_true(count(page, "<polyline class=\"series") < 2);
    free(page);

    /* the straggler scenario: 16 ranks x 100 steps of ~1 s */
    struct gh_step_writer *w = NULL;
    struct gh_step_writer_opts o = {.db_url = url, .no_thread = true};
    if (gh_step_writer_new(&o, &w, &err))
        fail_msg("writer: %s", err.msg);
    assert_int_equal(feed(w, "straggler-one-node.jsonl"), 1600);
    assert_int_equal(gh_step_writer_flush(w, &err), 0);
    struct gh_step_writer_stats ws;
    gh_step_writer_stats(w, &ws);
    gh_step_writer_free(w);
    assert_int_equal(ws.samples, 1600);
    assert_int_equal(ws.dropped, 0);
    /* 5 s buckets over 07:00:10 .. 07:02:08.8: 24 per rank (the slow
     * node's ranks finish later), far fewer rows than samples */
    if (ws.rows < 16 * 24 || ws.rows > 16 * 26)
        fail_msg("%llu telemetry rows", (unsigned long long)ws.rows);
    long n = 0;
    assert_int_equal(gh_audit_count(a, "incidents", &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(gh_audit_count(a, "telemetry", &n, &err), 0);
    assert_int_equal(n, (long)ws.rows);

    for (int all = 0; all < 2; all++) {
        page = report_page(a, all ? NULL : "job/ml/llm", &st);
        assert_int_equal(st.incidents, 1);
        assert_int_equal(st.steps, ws.rows); /* the evidence step is not drawn twice */
        if (!strstr(page, "<svg id=\"steps-0\" class=\"step-chart\" data-job=\"ml/llm\""))
            fail_msg("no step chart for ml/llm");
        assert_int_equal(count(page, "<polyline class=\"series"), 16);
        assert_int_equal(count(page, "<polyline class=\"series blamed\" data-node=\"gpu-02\""), 4);
        assert_non_null(strstr(page, "straggler-evict"));
        free(page);
    }
    /* a signal that joined the incident after its decision: its row says so */
    json_t *jv = json_loads("{\"id\":\"sig-joined-1\",\"ts\":\"2026-11-29T07:02:30Z\","
                            "\"node\":\"gpu-07\",\"gpu\":2,\"source\":\"kmsg\","
                            "\"kind\":\"xid\",\"code\":79}",
                            0, NULL);
    assert_non_null(jv);
    enum gh_audit_joined jr;
    assert_int_equal(gh_audit_record_joined(a, "inc-00000000000000cc", NULL, jv, 0, &jr, &err), 0);
    json_decref(jv);
    assert_int_equal(jr, GH_AUDIT_JOINED_STORED);
    page = report_page(a, "job/ml/llm", &st);
    assert_int_equal(count(page, "<span class=\"joined\">joined later</span>"), 1);
    free(page);

    /* a node subject keeps its steps too */
    page = report_page(a, "node/gpu-02", &st);
    assert_true(st.steps > 0);
    free(page);

    gh_audit_close(a);
    gh_store_tmp_remove(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps_from_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
