/* test_audit.c - the audit store on SQLite and on a private PostgreSQL:
 * decisions with evidence, guard verdicts, actions, idempotent re-records,
 * intents across a reopen, queries by node/job/pod, and the explain and
 * timeline texts made from them. */
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
#include "audit/explain.h"
#include "audit/pg_testenv.h"
#include "store_fixture.h"

static const char *incident_json =
    "{\"id\":\"inc-00000000000000aa\",\"class\":\"gpu_hardware\",\"node\":\"gpu-17\",\"gpu\":3,"
    "\"job\":\"ml/llm\",\"first_ts\":\"2026-11-29T07:00:10.000000Z\","
    "\"decided_ts\":\"2026-11-29T07:00:10.250000Z\","
    "\"actions\":[\"isolate_node\",\"restart_from_checkpoint\",\"reboot_node\"],"
    "\"checkpoint\":{\"step\":100,\"path\":\"s3://ckpt/llm/100\"},"
    "\"evidence\":[{\"ts\":\"2026-11-29T07:00:10.000000Z\",\"node\":\"gpu-17\",\"gpu\":3,"
    "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, "
    "pid=1234, GPU has fallen off the bus.\"},"
    "{\"ts\":\"2026-11-29T07:00:10.100000Z\",\"node\":\"gpu-17\",\"source\":\"kube\","
    "\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"llm-3\",\"job\":\"ml/llm\","
    "\"reason\":\"Error\",\"exit_code\":1,\"injected\":true}],"
    "\"rule\":\"gpu-fell-off-bus\",\"reason\":\"XID 79 on gpu-17 GPU 3.\",\"severity\":\"critical\"}";

#define T0 1795935610000000000LL /* 2026-11-29T07:00:10Z */

static char *render(void (*fn)(FILE *, const struct gh_audit_subject *,
                               const struct gh_audit_incident_rec *, size_t),
                    const struct gh_audit_subject *s, struct gh_audit_incident_rec *r, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, s, r, n);
    fclose(f);
    return buf;
}

static void timeline_fn(FILE *f, const struct gh_audit_subject *s,
                        const struct gh_audit_incident_rec *r, size_t n)
{
    gh_timeline_write(f, s, r, n);
}

static void explain_fn(FILE *f, const struct gh_audit_subject *s,
                       const struct gh_audit_incident_rec *r, size_t n)
{
    gh_explain_write(f, s, 0, r, n);
}

static int count_pending(void *ud, const struct gh_audit_intent *it)
{
    (void)it;
    (*(int *)ud)++;
    return 0;
}

struct allowed_seen {
    int n;
    int64_t ts;
    char action[32], target[64];
};

static int note_allowed(void *ud, int64_t ts, const char *action, const char *target)
{
    struct allowed_seen *a = ud;
    a->n++;
    a->ts = ts;
    snprintf(a->action, sizeof a->action, "%s", action);
    snprintf(a->target, sizeof a->target, "%s", target);
    return 0;
}

static void exercise(const char *url)
{
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    int rc = gh_audit_open(url, &a, &err);
    if (rc)
        fail_msg("open %s: %s", url, err.msg);
    json_t *inc = json_loads(incident_json, 0, NULL);
    assert_non_null(inc);
    bool ins = false;
    assert_int_equal(gh_audit_record_incident(a, inc, "act", "Acting", "ctl-1", T0, &ins, &err), 0);
    assert_true(ins);
    /* a second record of the same decision (a restarted controller) is a no-op */
    assert_int_equal(gh_audit_record_incident(a, inc, "act", "Acting", "ctl-2", T0, &ins, &err), 0);
    assert_false(ins);
    json_decref(inc);

    struct gh_audit_guard g = {"inc-00000000000000aa", T0 + 260000000, "isolate_node", "node/gpu-17",
                               "budget", "allowed", "1 of 2 nodes isolated"};
    assert_int_equal(gh_audit_record_guard(a, &g, &err), 0);
    struct gh_audit_guard g2 = {"inc-00000000000000aa", T0 + 261000000, "reboot_node", "node/gpu-17",
                                "rate", "denied", "not acted: rate (10 actions in the last hour)"};
    assert_int_equal(gh_audit_record_guard(a, &g2, &err), 0);
    /* what a restarted controller counts again: the allowed one only (not the
     * denial), and none after its time */
    struct allowed_seen allowed = {0};
    assert_int_equal(gh_audit_allowed_since(a, T0, note_allowed, &allowed, &err), 0);
    assert_int_equal(allowed.n, 1);
    assert_int_equal(allowed.ts, T0 + 260000000);
    assert_string_equal(allowed.action, "isolate_node");
    assert_string_equal(allowed.target, "node/gpu-17");
    memset(&allowed, 0, sizeof allowed);
    assert_int_equal(gh_audit_allowed_since(a, T0 + 260000001, note_allowed, &allowed, &err), 0);
    assert_int_equal(allowed.n, 0);

    /* intent before acting, action, intent done */
    struct gh_audit_intent it;
    memset(&it, 0, sizeof it);
    snprintf(it.id, sizeof it.id, "inc-00000000000000aa/0/isolate_node/node/gpu-17");
    snprintf(it.incident_id, sizeof it.incident_id, "inc-00000000000000aa");
    snprintf(it.action, sizeof it.action, "isolate_node");
    snprintf(it.target, sizeof it.target, "node/gpu-17");
    it.created_ns = T0 + 3000;
    it.payload = strdup("{\"effect\":\"NoSchedule\"}");
    bool existing = true;
    assert_int_equal(gh_audit_intent_begin(a, &it, &existing, &err), 0);
    assert_false(existing);
    gh_audit_intent_clear(&it);
    gh_audit_close(a);

    /* reopen: the pending intent is still there (a controller killed here) */
    a = NULL;
    assert_int_equal(gh_audit_open(url, &a, &err), 0);
    int pending = 0;
    assert_int_equal(gh_audit_intents_pending(a, count_pending, &pending, &err), 0);
    assert_int_equal(pending, 1);
    struct gh_audit_intent again;
    memset(&again, 0, sizeof again);
    snprintf(again.id, sizeof again.id, "inc-00000000000000aa/0/isolate_node/node/gpu-17");
    snprintf(again.incident_id, sizeof again.incident_id, "inc-00000000000000aa");
    snprintf(again.action, sizeof again.action, "isolate_node");
    assert_int_equal(gh_audit_intent_begin(a, &again, &existing, &err), 0);
    assert_true(existing);
    assert_int_equal(again.attempts, 2);
    assert_string_equal(again.state, "pending");
    assert_non_null(again.payload);
    assert_non_null(strstr(again.payload, "NoSchedule"));
    gh_audit_intent_clear(&again);

    struct gh_audit_action act = {"inc-00000000000000aa",
                                  "inc-00000000000000aa/0/isolate_node/node/gpu-17",
                                  "isolate_node",
                                  "node/gpu-17",
                                  T0 + 300000000,
                                  T0 + 338000000,
                                  "succeeded",
                                  200,
                                  "HTTP 200",
                                  "cordoned; tainted gpuheal.io/unhealthy:NoSchedule"};
    assert_int_equal(gh_audit_record_action(a, &act, &err), 0);
    assert_int_equal(gh_audit_intent_finish(a, act.intent_id, "done", T0 + 338000000, &err), 0);
    pending = 0;
    assert_int_equal(gh_audit_intents_pending(a, count_pending, &pending, &err), 0);
    assert_int_equal(pending, 0);
    assert_int_equal(gh_audit_set_phase(a, "inc-00000000000000aa", "Succeeded", &err), 0);

    long n = 0;
    assert_int_equal(gh_audit_count(a, "evidence", &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(gh_audit_count(a, "guards", &n, &err), 0);
    assert_int_equal(n, 2);

    /* queries by every kind of subject */
    const char *subjects[] = {"node/gpu-17", "job/ml/llm", "pod/ml/llm-3", "inc-00000000000000aa"};
    for (size_t i = 0; i < 4; i++) {
        struct gh_audit_subject s;
        assert_int_equal(gh_audit_subject_parse(subjects[i], &s, &err), 0);
        struct gh_audit_incident_rec *recs = NULL;
        size_t nr = 0;
        assert_int_equal(gh_audit_query(a, &s, 0, 0, &recs, &nr, &err), 0);
        assert_int_equal(nr, 1);
        assert_string_equal(recs[0].rule, "gpu-fell-off-bus");
        assert_int_equal(recs[0].n_ev, 2);
        assert_int_equal(recs[0].n_guards, 2);
        assert_int_equal(recs[0].n_actions, 1);
        assert_int_equal(recs[0].ckpt_step, 100);
        assert_int_equal(recs[0].gpu, 3);
        assert_string_equal(recs[0].phase, "Succeeded");
        assert_string_equal(recs[0].controller, "ctl-1");
        assert_int_equal(recs[0].ev[0].code, 79);
        assert_true(recs[0].ev[1].injected);
        assert_string_equal(recs[0].ev[1].pod, "ml/llm-3");
        if (i == 1) {
            char *text = render(explain_fn, &s, recs, nr);
            assert_non_null(strstr(text, "GPU has fallen off the bus"));
            assert_non_null(strstr(text, "rule gpu-fell-off-bus chose"));
            assert_non_null(strstr(text, "not acted [rate]"));
            assert_non_null(strstr(text, "isolate_node node/gpu-17: succeeded in 38 ms"));
            assert_non_null(strstr(text, "checkpoint step 100"));
            assert_non_null(strstr(text, "(injected)"));
            free(text);
            text = render(timeline_fn, &s, recs, nr);
            /* time order: seen, decided, guards, action */
            char *seen = strstr(text, "kmsg on gpu-17 GPU 3: xid 79");
            char *dec = strstr(text, "gpu_hardware by rule gpu-fell-off-bus");
            char *act2 = strstr(text, "isolate_node succeeded (38 ms)");
            assert_non_null(seen);
            assert_non_null(dec);
            assert_non_null(act2);
            assert_true(seen < dec && dec < act2);
            free(text);
        }
        gh_audit_recs_free(recs, nr);
    }
    /* nothing about another node, nor since after the decision */
    struct gh_audit_subject other;
    assert_int_equal(gh_audit_subject_parse("node/gpu-18", &other, &err), 0);
    struct gh_audit_incident_rec *recs = NULL;
    size_t nr = 9;
    assert_int_equal(gh_audit_query(a, &other, 0, 0, &recs, &nr, &err), 0);
    assert_int_equal(nr, 0);
    assert_int_equal(gh_audit_subject_parse("node/gpu-17", &other, &err), 0);
    assert_int_equal(gh_audit_query(a, &other, T0 + 1000000000LL, 0, &recs, &nr, &err), 0);
    assert_int_equal(nr, 0);
    /* a release is never counted again */
    struct gh_audit_guard rel = {"inc-00000000000000aa", T0 + 262000000, "release_node",
                                 "node/gpu-17", "none", "allowed", "validated"};
    assert_int_equal(gh_audit_record_guard(a, &rel, &err), 0);
    struct allowed_seen after = {0};
    assert_int_equal(gh_audit_allowed_since(a, T0, note_allowed, &after, &err), 0);
    assert_int_equal(after.n, 1);
    assert_string_equal(after.action, "isolate_node");
    gh_audit_close(a);
}

/* Evidence that joined inc-...aa after it was decided (joined_evidence):
 * stored once per signal (its id, else its content), listed by explain and
 * the timeline as joined later, found by its node, capped per incident. */
static void exercise_joined(const char *url)
{
    struct gh_err err = {{0}};
    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open(url, &a, &err), 0);
    const char *id = "inc-00000000000000aa";
    json_t *x1 = json_loads(
        "{\"id\":\"sig-1\",\"ts\":\"2026-11-29T07:00:20Z\",\"node\":\"gpu-18\","
        "\"gpu\":1,\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,"
        "\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\"}",
        0, NULL);
    json_t *x2 = json_loads("{\"ts\":\"2026-11-29T07:00:21Z\",\"node\":\"gpu-19\",\"gpu\":0,"
                            "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79}",
                            0, NULL);
    assert_non_null(x1);
    assert_non_null(x2);
    enum gh_audit_joined res;
    assert_int_equal(gh_audit_record_joined(a, id, "gpu-18", x1, T0 + 11000000000LL, &res, &err),
                     0);
    assert_int_equal(res, GH_AUDIT_JOINED_STORED);
    /* the same signal again (a restarted controller replays its journal) */
    assert_int_equal(gh_audit_record_joined(a, id, "gpu-18", x1, T0 + 12000000000LL, &res, &err),
                     0);
    assert_int_equal(res, GH_AUDIT_JOINED_DUPLICATE);
    assert_int_equal(gh_audit_record_joined(a, id, NULL, x2, T0 + 11000000000LL, &res, &err), 0);
    assert_int_equal(res, GH_AUDIT_JOINED_STORED);
    assert_int_equal(gh_audit_record_joined(a, id, NULL, x2, T0 + 11000000000LL, &res, &err), 0);
    assert_int_equal(res, GH_AUDIT_JOINED_DUPLICATE);
    assert_int_not_equal(gh_audit_record_joined(a, "", NULL, x2, T0, &res, &err), 0);
    long n = 0;
    assert_int_equal(gh_audit_count(a, "joined", &n, &err), 0);
    assert_int_equal(n, 2);

    /* gpu-19 is named only by a joined row: the incident concerns it */
    struct gh_audit_subject subj;
    assert_int_equal(gh_audit_subject_parse("node/gpu-19", &subj, &err), 0);
    struct gh_audit_incident_rec *recs = NULL;
    size_t nr = 0;
    assert_int_equal(gh_audit_query(a, &subj, 0, 0, &recs, &nr, &err), 0);
    assert_int_equal(nr, 1);
    assert_int_equal(recs[0].n_joined, 2);
    assert_string_equal(recs[0].joined[0].node, "gpu-18");
    assert_int_equal(recs[0].joined[0].code, 79);
    assert_int_equal(recs[0].joined[0].joined_ns, T0 + 11000000000LL);
    char *ex = render(explain_fn, &subj, recs, nr);
    assert_non_null(strstr(ex, "Joined later (after the decision, 2 signals)"));
    assert_non_null(strstr(ex, "kmsg on gpu-19 GPU 0: xid 79 (joined later)"));
    free(ex);
    char *tl = render(timeline_fn, &subj, recs, nr);
    assert_non_null(strstr(tl, "joined "));
    assert_non_null(strstr(tl, "(joined inc-00000000000000aa later)"));
    free(tl);
    gh_audit_recs_free(recs, nr);

    /* the cap: GH_AUDIT_JOINED_MAX rows, then nothing more is stored */
    assert_int_equal(gh_audit_begin(a, &err), 0);
    int stored = 0, capped = 0;
    for (int i = 0; i < GH_AUDIT_JOINED_MAX; i++) {
        json_t *v = json_pack("{s:s, s:s, s:s, s:s, s:I}", "ts", "2026-11-29T07:01:00Z", "node",
                              "gpu-20", "source", "kmsg", "kind", "xid", "code", (json_int_t)i);
        assert_int_equal(gh_audit_record_joined(a, id, NULL, v, T0, &res, &err), 0);
        stored += res == GH_AUDIT_JOINED_STORED;
        capped += res == GH_AUDIT_JOINED_CAPPED;
        json_decref(v);
    }
    assert_int_equal(gh_audit_commit(a, &err), 0);
    assert_int_equal(stored, GH_AUDIT_JOINED_MAX - 2);
    assert_int_equal(capped, 2);
    /* a stored signal over the cap is still a duplicate, not a loss */
    assert_int_equal(gh_audit_record_joined(a, id, NULL, x2, T0, &res, &err), 0);
    assert_int_equal(res, GH_AUDIT_JOINED_DUPLICATE);
    assert_int_equal(gh_audit_count(a, "joined", &n, &err), 0);
    assert_int_equal(n, GH_AUDIT_JOINED_MAX);
    json_decref(x1);
    json_decref(x2);
    gh_audit_close(a);
}

static void test_sqlite(void **st)
{
    (void)st;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-audit");
    exercise(t.url);
    exercise_joined(t.url);
    /* WAL journal */
    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open(t.url, &a, NULL), 0);
    char wal[128];
    snprintf(wal, sizeof wal, "%s-wal", t.path);
    assert_int_equal(access(wal, F_OK), 0);
    assert_string_equal(gh_audit_backend(a), "sqlite");
    gh_audit_close(a);
    gh_store_tmp_remove(&t);
}

/* The PostgreSQL cluster lives in setup/teardown (store_fixture.h). */
static void test_postgres(void **st)
{
    struct gh_pg_testenv *pg = *st;
    if (!pg)
        skip();
    struct gh_err err = {{0}};
    exercise(pg->url);
    exercise_joined(pg->url);
    struct gh_audit *a = NULL;
    int rc = gh_audit_open(pg->uri, &a, &err);
    if (rc)
        fprintf(stderr, "uri %s: %s\n", pg->uri, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(gh_audit_backend(a), "postgres");
    long n = 0;
    assert_int_equal(gh_audit_count(a, "incidents", &n, &err), 0);
    assert_int_equal(n, 1);
    gh_audit_close(a);
}

/* A record whose reset waits for a safe moment (impact.deferred): explain
 * lists each deferred action as waiting, the reset with its GPU. */
static void test_explain_deferred(void **st)
{
    (void)st;
    char json[] = "{\"id\":\"inc-d\",\"class\":\"gpu_memory\",\"node\":\"gpu-17\",\"gpu\":5,"
                  "\"actions\":[\"none\"],\"impact\":{\"job\":\"none\",\"hardware\":\"can_wait\","
                  "\"deferred\":[\"drain_node\",\"reset_gpu\"]}}";
    struct gh_audit_incident_rec r = {.id = "inc-d", .cls = "gpu_memory", .node = "gpu-17",
                                      .actions = "none", .phase = "Succeeded", .json = json,
                                      .gpu = 5, .ckpt_step = -1};
    struct gh_audit_subject s = {GH_AUDIT_NODE, "gpu-17"};
    char *out = render(explain_fn, &s, &r, 1);
    assert_non_null(strstr(out, "    reset_gpu node/gpu-17 GPU 5: waiting for a safe moment"));
    assert_non_null(strstr(out, "    drain_node node/gpu-17: waiting for a safe moment"));
    free(out);
    r.json = NULL; /* nothing deferred: no such line */
    out = render(explain_fn, &s, &r, 1);
    assert_null(strstr(out, "waiting for a safe moment"));
    free(out);
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* Issue 26: explain printed straggler evidence without the step time, and
 * the timeline showed 2 pod failures where explain showed 3 (three pods
 * failing at once with one message on one node were taken for one). */
static void test_explain_facts_and_timeline_rows(void **st)
{
    (void)st;
    static char step_json[] = "{\"ts\":\"2026-11-29T07:00:05Z\",\"node\":\"gpu-17\",\"gpu\":3,"
                              "\"source\":\"telemetry\",\"kind\":\"step\",\"job\":\"ml/llm\","
                              "\"rank\":27,\"step\":1200,\"step_ms\":1412.5,\"comm_ms\":301.25}";
    char pods[3][300], podn[3][32];
    struct gh_audit_ev_rec ev[4];
    memset(ev, 0, sizeof ev);
    ev[0] = (struct gh_audit_ev_rec){
        T0 - 5000000000LL, "telemetry", "step", "gpu-17", "ml/llm", NULL, NULL,
        step_json,         3,           -1,     false,    0};
    for (int i = 0; i < 3; i++) {
        snprintf(
            pods[i], sizeof pods[i],
            "{\"ts\":\"2026-11-29T07:00:09Z\",\"node\":\"gpu-17\",\"source\":\"kube\","
            "\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"llm-%d\",\"job\":\"ml/llm\","
            "\"reason\":\"Error\",\"msg\":\"NCCL watchdog timeout\"}",
            i);
        snprintf(podn[i], sizeof podn[i], "ml/llm-%d", i);
        ev[1 + i] = (struct gh_audit_ev_rec){
            T0 - 1000000000LL,       "kube",  "pod_failed", "gpu-17", "ml/llm", podn[i],
            "NCCL watchdog timeout", pods[i], -1,           -1,       false,    0};
    }
    struct gh_audit_incident_rec r;
    memset(&r, 0, sizeof r);
    r.id = "inc-00000000000000bb";
    r.cls = "straggler";
    r.node = "gpu-17";
    r.job = "ml/llm";
    r.rule = "straggler-evict";
    r.actions = "isolate_node";
    r.gpu = 3;
    r.ckpt_step = -1;
    r.decided_ns = T0;
    r.ev = ev;
    r.n_ev = 4;
    struct gh_audit_subject s;
    struct gh_err err = {{0}};
    assert_int_equal(gh_audit_subject_parse("node/gpu-17", &s, &err), 0);
    char *text = render(explain_fn, &s, &r, 1);
    assert_non_null(strstr(text, "step rank 27 step 1200: 1412.5 ms (communication 301.2 ms)"));
    assert_int_equal(count_of(text, "pod_failed"), 3);
    free(text);
    text = render(timeline_fn, &s, &r, 1);
    assert_non_null(strstr(text, "rank 27 step 1200: 1412.5 ms"));
    assert_int_equal(count_of(text, "pod_failed"), 3);
    free(text);
    /* the same signal behind two incidents is still one row */
    struct gh_audit_incident_rec two[2] = {r, r};
    two[1].id = "inc-00000000000000cc";
    text = render(timeline_fn, &s, two, 2);
    assert_int_equal(count_of(text, "pod_failed"), 3);
    assert_int_equal(count_of(text, "rank 27 step 1200"), 1);
    free(text);
}

static void test_subject_parse(void **st)
{
    (void)st;
    struct gh_audit_subject s;
    struct gh_err err;
    assert_int_equal(gh_audit_subject_parse("job/ml/llm", &s, &err), 0);
    assert_int_equal(s.kind, GH_AUDIT_JOB);
    assert_string_equal(s.name, "ml/llm");
    assert_int_equal(gh_audit_subject_parse("pod/ml/x", &s, &err), 0);
    assert_int_equal(s.kind, GH_AUDIT_POD);
    assert_int_equal(gh_audit_subject_parse("incident/inc-1", &s, &err), 0);
    assert_int_equal(s.kind, GH_AUDIT_INCIDENT);
    assert_int_equal(gh_audit_subject_parse("pod/x", &s, &err), GH_EINVAL);
    /* a job without its namespace names no job: refused, not "0 incidents" */
    assert_int_equal(gh_audit_subject_parse("job/ml", &s, &err), GH_EINVAL);
    assert_string_equal(err.msg, "\"job/ml\": job/NS/NAME needs a namespace and a name");
    assert_int_equal(gh_audit_subject_parse("job/ml/", &s, &err), GH_EINVAL);
    assert_int_equal(gh_audit_subject_parse("job/ml/a/b", &s, &err), GH_EINVAL);
    assert_int_equal(gh_audit_subject_parse("node/a/b", &s, &err), GH_EINVAL);
    assert_int_equal(gh_audit_subject_parse("deployment/x/y", &s, &err), GH_EINVAL);
    assert_int_equal(gh_audit_subject_parse("gpu-17", &s, &err), GH_EINVAL);
    struct gh_audit *a = NULL;
    assert_int_equal(gh_audit_open("mysql://x", &a, &err), GH_EINVAL);
    assert_int_equal(gh_audit_open("sqlite:/nonexistent-dir/x/y.db", &a, &err), GH_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explain_facts_and_timeline_rows),
        cmocka_unit_test(test_subject_parse),
        cmocka_unit_test(test_explain_deferred),
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test_setup_teardown(test_postgres, gh_store_pg_setup, gh_store_pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
