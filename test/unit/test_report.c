/* test_report.c - the HTML report: escaping of every input string (a
 * <script> in a kernel line stays text), bounded series and decimation,
 * scenarios replayed through the engine rendering the expected elements
 * (timeline lanes, the step chart with the straggler highlighted, incidents
 * with evidence), subjects, caps that say what they left out, the audit
 * store as a source, and write errors. */
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
#include "engine/engine.h"
#include "report/from_audit.h"
#include "report/from_engine.h"
#include "report/html.h"
#include "report/report.h"
#include "report/series.h"
#include "signal/signal_json.h"
#include "report_page.h"
#include "store_fixture.h"

/* ---- helpers */

static char *escaped(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    gh_html_escape(f, s);
    fclose(f);
    return buf;
}

#define assert_has(page, s)                                                                       \
    do {                                                                                          \
        if (!strstr((page), (s)))                                                                 \
            fail_msg("page lacks %s", (s));                                                       \
    } while (0)
#define assert_lacks(page, s)                                                                     \
    do {                                                                                          \
        if (strstr((page), (s)))                                                                  \
            fail_msg("page has %s", (s));                                                         \
    } while (0)

static void on_incident(void *ud, const struct gh_incident *inc)
{
    struct gh_err err;
    assert_int_equal(gh_report_add_engine_incident(ud, inc, &err), GH_OK);
}

/* Replays scenario lines (header first, sorted) through the engine and onto
 * r, as `gpuheal report --scenario` does. */
static void replay(struct gh_report *r, FILE *in)
{
    struct gh_err err = {{0}};
    struct gh_signal_reader *rd = gh_signal_reader_new(in);
    assert_non_null(rd);
    struct gh_engine_config cfg;
    gh_engine_config_default(&cfg);
    cfg.reorder_window_ns = 0;
    struct gh_engine *e = NULL;
    for (;;) {
        struct gh_signal s;
        json_t *h = NULL;
        int rc = gh_signal_reader_next(rd, &s, &h, &err);
        if (rc == GH_ENOTFOUND)
            break;
        if (rc)
            fail_msg("scenario: %s", err.msg);
        if (h) {
            struct gh_topology *topo = NULL;
            assert_int_equal(gh_topology_from_header(h, &topo, &err), GH_OK);
            assert_int_equal(gh_report_add_header(r, h, &err), GH_OK);
            assert_null(e);
            e = gh_engine_new(NULL, topo, NULL, &cfg, on_incident, r, &err);
            gh_topology_free(topo);
            json_decref(h);
            continue;
        }
        if (!e)
            e = gh_engine_new(NULL, NULL, NULL, &cfg, on_incident, r, &err);
        assert_non_null(e);
        assert_int_equal(gh_report_add_signal(r, &s, &err), GH_OK);
        int64_t ts = s.ts_ns;
        gh_engine_ingest_steal(e, &s, ts, NULL);
        gh_signal_clear(&s);
        gh_engine_tick(e, ts);
    }
    if (e) {
        gh_engine_finish(e, INT64_MAX);
        gh_engine_free(e);
    }
    gh_signal_reader_free(rd);
}

static void replay_file(struct gh_report *r, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/test/scenarios/%s", GH_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open", path);
    replay(r, f);
    fclose(f);
}

static void replay_text(struct gh_report *r, const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "rb");
    assert_non_null(f);
    replay(r, f);
    fclose(f);
}

/* ---- escaping */

static void test_escape(void **state)
{
    (void)state;
    char *s = escaped("<script>alert('x')</script> & \"q\"");
    assert_string_equal(s, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
    free(s);
    /* UTF-8 kept; control bytes and broken sequences become U+FFFD */
    s = escaped("\xC2\xB0""C ok\t\n");
    assert_string_equal(s, "\xC2\xB0""C ok\t\n");
    free(s);
    s = escaped("a\x01""b\x7F""c\xC3""d\xED\xA0\x80""e\xF8");
    assert_string_equal(s, "a\xEF\xBF\xBD""b\xEF\xBF\xBD""c\xEF\xBF\xBD""d\xEF\xBF\xBD\xEF\xBF\xBD"
                           "\xEF\xBF\xBD""e\xEF\xBF\xBD");
    free(s);
    s = escaped(NULL);
    assert_string_equal(s, "");
    free(s);
}

/* A hostile kernel line, pod message, job and node name end up as text. */
static const char *hostile =
    "{\"scenario\":\"hostile\",\"nodes\":[\"gpu-01\",\"gpu-<b>\"],\"gpus_per_node\":8,"
    "\"jobs\":[{\"name\":\"ml/<i>job\",\"nodes\":[\"gpu-01\",\"gpu-<b>\"],\"ranks_per_node\":1}]}\n"
    "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
    "\"job\":\"ml/<i>job\",\"step\":10,\"path\":\"s3://x/\\\"><script>1</script>\","
    "\"state\":\"saved\"}\n"
    "{\"ts\":\"2026-11-29T07:00:10Z\",\"node\":\"gpu-<b>\",\"gpu\":2,\"source\":\"kmsg\","
    "\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid 79 <script>alert('pwn')</script>\"}\n"
    "{\"ts\":\"2026-11-29T07:00:11Z\",\"node\":\"gpu-01\",\"source\":\"kube\",\"kind\":"
    "\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"w-0\",\"job\":\"ml/<i>job\",\"reason\":"
    "\"Error\",\"exit_code\":1,\"msg\":\"</title><script>x()</script>\"}\n";

static void test_script_in_msg_is_escaped(void **state)
{
    (void)state;
    struct gh_err err;
    struct gh_report *r = gh_report_new(NULL, &err);
    assert_non_null(r);
    assert_int_equal(gh_report_set_origin(r, "scenario <hostile>", &err), 0);
    replay_text(r, hostile);
    char *page = render(r);
    assert_lacks(page, "<script");
    assert_lacks(page, "gpu-<b>");
    assert_lacks(page, "<i>job");
    assert_has(page, "NVRM: Xid 79 &lt;script&gt;alert(&#39;pwn&#39;)&lt;/script&gt;");
    assert_has(page, "&lt;/title&gt;&lt;script&gt;x()&lt;/script&gt;");
    assert_has(page, "gpu-&lt;b&gt;");
    assert_has(page, "scenario &lt;hostile&gt;");
    /* the incident is there, with the raw line as evidence */
    assert_has(page, "id=\"incidents-table\"");
    assert_has(page, "<td class=\"node blamed\">gpu-&lt;b&gt;</td>");
    assert_has(page, "<code class=\"raw\">NVRM: Xid 79 &lt;script&gt;");
    /* no script at all in the page */
    assert_int_equal(count(page, "<script"), 0);
    free(page);
    gh_report_free(r);
}

/* ---- series and decimation */

static void test_series_bounded(void **state)
{
    (void)state;
    struct gh_series s;
    struct gh_err err;
    assert_int_equal(gh_series_init(&s, 63, &err), 0);
    assert_int_equal(s.cap, 64);
    for (int i = 0; i < 100000; i++)
        gh_series_add(&s, i, 2.0 * i);
    gh_series_add(&s, NAN, 1);
    gh_series_add(&s, 1, INFINITY);
    assert_int_equal(s.raw, 100000);
    assert_true(s.n <= 64 && s.n >= 32);
    assert_true((s.stride & (s.stride - 1)) == 0);
    /* bucket means keep the line: y = 2x at every point, in order */
    double x[65], y[65];
    size_t n = gh_series_copy(&s, x, y, 65);
    assert_true(n >= s.n && n <= s.n + 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(fabs(y[i] - 2 * x[i]) < 1e-6);
        if (i)
            assert_true(x[i] > x[i - 1]);
    }
    /* the first bucket is the mean of the first stride points */
    assert_true(fabs(x[0] - (double)(s.stride - 1) / 2) < 1e-9);
    /* together they cover the input */
    assert_true(x[n - 1] > 99000);
    gh_series_clear(&s);
    gh_series_clear(&s);
    gh_series_clear(NULL);
}

static void test_decimate(void **state)
{
    (void)state;
    double x[1000], y[1000], ox[1000], oy[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = i, y[i] = i % 2 ? 10 : 20;
    size_t n = gh_series_decimate(x, y, 1000, 100, ox, oy);
    assert_int_equal(n, 100);
    assert_true(fabs(ox[0] - 4.5) < 1e-9);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(oy[i] - 15) < 1e-9);
    /* uneven: 1000 into 300 -> buckets of 4, 250 points */
    n = gh_series_decimate(x, y, 1000, 300, ox, oy);
    assert_int_equal(n, 250);
    n = gh_series_decimate(x, y, 7, 3, ox, oy);
    assert_int_equal(n, 3);
    assert_true(fabs(ox[2] - 6) < 1e-9); /* the last bucket holds one */
    n = gh_series_decimate(x, y, 10, 100, ox, oy);
    assert_int_equal(n, 10);
    assert_memory_equal(ox, x, 10 * sizeof *x);
    assert_int_equal(gh_series_decimate(x, y, 10, 0, ox, oy), 0);
}

/* ---- scenarios */

static void test_straggler_scenario(void **state)
{
    (void)state;
    struct gh_err err;
    struct gh_report *r = gh_report_new(NULL, &err);
    assert_non_null(r);
    replay_file(r, "straggler-one-node.jsonl");
    struct gh_report_stats st;
    gh_report_stats(r, &st);
    assert_int_equal(st.signals, 1600);
    assert_int_equal(st.steps, 1600);
    assert_int_equal(st.incidents, 1);
    char *page = render(r);
    assert_has(page, "<!DOCTYPE html>");
    assert_has(page, "<svg id=\"timeline\" class=\"timeline\"");
    assert_has(page, "<svg id=\"steps-0\" class=\"step-chart\" data-job=\"ml/llm\"");
    /* 16 ranks, the 4 of gpu-02 highlighted */
    assert_int_equal(count(page, "<polyline class=\"series"), 16);
    assert_int_equal(count(page, "<polyline class=\"series blamed\" data-node=\"gpu-02\""), 4);
    assert_has(page, "<td class=\"node blamed\">gpu-02</td>");
    assert_has(page, "class=\"decision medium\"");
    assert_has(page, "straggler-evict");
    assert_has(page, "<g class=\"head blamed\">");
    assert_has(page, "data-source=\"train\" data-node=\"gpu-02\"");
    assert_has(page, "<article class=\"incident medium\" id=\"incident-0\">");
    assert_has(page, "<table class=\"evidence\">");
    assert_has(page, "id=\"decisions-table\"");
    /* self-contained */
    assert_lacks(page, "<script");
    assert_lacks(page, "src=");
    assert_lacks(page, "href=\"http");
    assert_lacks(page, "url(");
    assert_lacks(page, "@import");
    assert_lacks(page, "<link");
    assert_lacks(page, "<img");
    free(page);
    gh_report_free(r);
}

static void test_xid79_scenario_and_subjects(void **state)
{
    (void)state;
    struct gh_err err;
    struct gh_report *r = gh_report_new(NULL, &err);
    replay_file(r, "xid79-fell-off-bus.jsonl");
    char *page = render(r);
    assert_has(page, "<td class=\"node blamed\">gpu-03</td>");
    assert_has(page, "data-source=\"kmsg\" data-node=\"gpu-03\" data-gpu=\"5\"");
    assert_has(page, "XID 79");
    assert_has(page, "NVRM: Xid (PCI:0000:bd:00): 79, pid=1234, GPU has fallen off the bus.");
    assert_has(page, "gpu-fell-off-bus");
    assert_has(page, "checkpoint 1100 saved");
    assert_has(page, "pod failed: Error \xC3\x97""10"); /* ten pods of a node at once */
    assert_has(page, "id=\"no-steps\"");
    free(page);
    gh_report_free(r);

    /* node subject: only that node's lanes, and its incident */
    r = gh_report_new(NULL, &err);
    assert_int_equal(gh_report_set_subject(r, GH_REPORT_NODE, "gpu-01", &err), 0);
    replay_file(r, "xid79-fell-off-bus.jsonl");
    page = render(r);
    assert_has(page, "data-node=\"gpu-01\"");
    assert_lacks(page, "data-node=\"gpu-03\"");
    assert_has(page, "checkpoint 1100 saved"); /* the job on gpu-01 */
    assert_has(page, "id=\"no-incidents\"");    /* the XID's evidence is on gpu-03 */
    free(page);
    gh_report_free(r);

    r = gh_report_new(NULL, &err);
    assert_int_equal(gh_report_set_subject(r, GH_REPORT_NODE, "gpu-03", &err), 0);
    replay_file(r, "xid79-fell-off-bus.jsonl");
    page = render(r);
    assert_has(page, "<td class=\"node blamed\">gpu-03</td>");
    assert_lacks(page, "data-node=\"gpu-01\"");
    free(page);
    gh_report_free(r);

    /* job subject: another job's signals stay out */
    r = gh_report_new(NULL, &err);
    assert_int_equal(gh_report_set_subject(r, GH_REPORT_JOB, "other/job", &err), 0);
    replay_file(r, "xid79-fell-off-bus.jsonl");
    struct gh_report_stats st;
    gh_report_stats(r, &st);
    assert_int_equal(st.filtered, st.signals);
    page = render(r);
    assert_has(page, "id=\"no-incidents\"");
    assert_has(page, "Nothing to draw");
    free(page);
    gh_report_free(r);
    /* a job or node subject needs a name */
    r = gh_report_new(NULL, &err);
    assert_int_equal(gh_report_set_subject(r, GH_REPORT_JOB, NULL, &err), GH_EINVAL);
    assert_int_equal(gh_report_set_subject(r, GH_REPORT_NODE, "", &err), GH_EINVAL);
    gh_report_free(r);
}

/* ---- caps */

static void test_caps_are_said(void **state)
{
    (void)state;
    struct gh_report_limits lim;
    gh_report_limits_default(&lim);
    lim.max_lane_events = 8;
    lim.max_evidence_rows = 2;
    lim.max_shown_lanes = 2;
    lim.max_incidents = 1;
    lim.max_text = 40;
    struct gh_err err;
    struct gh_report *r = gh_report_new(&lim, &err);
    assert_non_null(r);
    /* an XID storm on one GPU, with minor thermal readings in between */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < 50; i++) {
        fprintf(f, "{\"ts\":\"2026-11-29T07:00:%02d.000000Z\",\"node\":\"gpu-09\",\"gpu\":1,"
                   "\"source\":\"nvml\",\"kind\":\"thermal\",\"celsius\":60,\"throttled\":false}\n",
                i);
        fprintf(f, "{\"ts\":\"2026-11-29T07:00:%02d.500000Z\",\"node\":\"gpu-09\",\"gpu\":1,"
                   "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":48,\"msg\":\"NVRM: Xid 48 "
                   "a very long kernel line that goes on and on and on past the cap %d\"}\n", i, i);
    }
    for (int n = 0; n < 4; n++)
        fprintf(f, "{\"ts\":\"2026-11-29T07:01:00Z\",\"node\":\"gpu-1%d\",\"source\":\"kube\","
                   "\"kind\":\"node_not_ready\"}\n", n);
    fclose(f);
    replay_text(r, text);
    free(text);
    struct gh_report_stats st;
    gh_report_stats(r, &st);
    assert_true(st.markers_dropped > 0);
    char *page = render(r);
    assert_has(page, "not drawn)");
    assert_has(page, "markers thinned out");
    assert_has(page, "id=\"lanes-truncated\"");
    /* strings cut at max_text */
    assert_has(page, "NVRM: Xid 48 a very long kernel line");
    assert_lacks(page, "past the cap");
    free(page);
    gh_report_free(r);

    /* evidence rows and chart points */
    gh_report_limits_default(&lim);
    lim.max_evidence_rows = 2;
    lim.max_chart_points = 64;
    lim.max_series_points = 16;
    r = gh_report_new(&lim, &err);
    replay_file(r, "straggler-one-node.jsonl");
    page = render(r);
    assert_has(page, "class=\"truncated\">Showing 2 of 9 evidence signals.</p>");
    assert_has(page, "Points averaged for drawing: at most 8 per series");
    assert_int_equal(count(page, "<tr><td class=\"t\">"), 2);
    /* at most 8 points per polyline: 7 separators between them */
    const char *p = page;
    size_t lines = 0;
    while ((p = strstr(p, "<polyline class=\"series"))) {
        const char *pts = strstr(p, "points=\""), *end = pts ? strchr(pts + 8, '"') : NULL;
        assert_non_null(end);
        size_t spaces = 0;
        for (const char *q = pts + 8; q < end; q++)
            spaces += *q == ' ';
        assert_true(spaces <= 7);
        p = end;
        lines++;
    }
    assert_int_equal(lines, 16);
    free(page);
    gh_report_free(r);
}

/* ---- the audit store as a source */

static const char *incident_json =
    "{\"id\":\"inc-00000000000000bb\",\"class\":\"gpu_hardware\",\"node\":\"gpu-17\",\"gpu\":3,"
    "\"job\":\"ml/llm\",\"first_ts\":\"2026-11-29T07:00:10.000000Z\","
    "\"decided_ts\":\"2026-11-29T07:00:10.250000Z\","
    "\"actions\":[\"isolate_node\",\"restart_from_checkpoint\"],"
    "\"evidence\":[{\"ts\":\"2026-11-29T07:00:10.000000Z\",\"node\":\"gpu-17\",\"gpu\":3,"
    "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid 79 <script>x</script>\"}],"
    "\"rule\":\"gpu-fell-off-bus\",\"reason\":\"XID 79 on gpu-17 GPU 3.\",\"severity\":\"critical\"}";

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */

static void test_from_audit(void **state)
{
    (void)state;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-report");
    const char *url = t.url;
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    if (gh_audit_open(url, &a, &err))
        fail_msg("open: %s", err.msg);
    json_t *inc = json_loads(incident_json, 0, NULL);
    assert_non_null(inc);
    assert_int_equal(gh_audit_record_incident(a, inc, "act", "Done", "ctl-1", T0, NULL, &err), 0);
    json_decref(inc);
    struct gh_audit_guard g = {"inc-00000000000000bb", T0 + 260000000, "isolate_node",
                               "node/gpu-17", "budget", "denied",
                               "not acted: budget (2 of 2 nodes isolated)"};
    assert_int_equal(gh_audit_record_guard(a, &g, &err), 0);
    struct gh_audit_action act = {"inc-00000000000000bb", NULL, "restart_from_checkpoint",
                                  "job/ml/llm", T0 + 300000000, T0 + 900000000, "succeeded",
                                  200, "HTTP 200 OK", "deleted 16 pods"};
    assert_int_equal(gh_audit_record_action(a, &act, &err), 0);

    for (int all = 0; all < 2; all++) {
        struct gh_report *r = gh_report_new(NULL, &err);
        struct gh_audit_subject subj;
        assert_int_equal(gh_audit_subject_parse("node/gpu-17", &subj, &err), 0);
        if (gh_report_load_audit(r, a, all ? NULL : &subj, 0, 0, &err))
            fail_msg("load: %s", err.msg);
        char *page = render(r);
        assert_has(page, "<td class=\"node blamed\">gpu-17</td>");
        assert_has(page, "class=\"guard denied\"");
        assert_has(page, "not acted: budget (2 of 2 nodes isolated)");
        assert_has(page, "class=\"action succeeded\"");
        assert_has(page, "deleted 16 pods");
        assert_has(page, "data-source=\"kmsg\" data-node=\"gpu-17\" data-gpu=\"3\"");
        assert_has(page, "NVRM: Xid 79 &lt;script&gt;x&lt;/script&gt;");
        assert_lacks(page, "<script");
        assert_has(page, "act / Done");
        free(page);
        gh_report_free(r);
    }
    gh_audit_close(a);
    gh_store_tmp_remove(&t);
}

static void test_write_error(void **state)
{
    (void)state;
    struct gh_err err;
    struct gh_report *r = gh_report_new(NULL, &err);
    replay_file(r, "xid79-fell-off-bus.jsonl");
    FILE *f = fopen("/dev/full", "w");
    if (!f) {
        gh_report_free(r);
        skip();
    }
    assert_int_equal(gh_report_write_html(r, f, &err), GH_EIO);
    fclose(f);
    gh_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_script_in_msg_is_escaped),
        cmocka_unit_test(test_series_bounded),
        cmocka_unit_test(test_decimate),
        cmocka_unit_test(test_straggler_scenario),
        cmocka_unit_test(test_xid79_scenario_and_subjects),
        cmocka_unit_test(test_caps_are_said),
        cmocka_unit_test(test_from_audit),
        cmocka_unit_test(test_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
