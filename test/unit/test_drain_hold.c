/* test_drain_hold.c - drains held for a checkpoint in the audit store
 * (control/drain_hold.h), on SQLite and on a private PostgreSQL: the hold's
 * record is not a pending intent, a restart reads it back with the same
 * deadline and verdicts, the release happens once and tells the wait; and
 * the recent checkpoints a resumed hold counts (control/drain_wait.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "control/decision.h"
#include "control/drain_hold.h"
#include "control/drain_wait.h"
#include "store_fixture.h"

#define NOW 1795935610000000000LL /* 2026-11-29T07:00:10Z */
#define S GH_NS_PER_S

static json_t *incident(const char *id)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:[s,s], s:s, s:s, s:[]}", "id", id, "class",
                     "interconnect", "node", "gpu-03", "job", "ml/llm", "first_ts",
                     "2026-11-29T07:00:10.000000Z", "decided_ts", "2026-11-29T07:00:10.250000Z",
                     "actions", "drain_node", "run_diagnostics", "rule", "nvswitch-error",
                     "reason", "NVSwitch SXID 12028.", "evidence");
}

static struct gh_task task(const char *id, enum gh_task_kind kind)
{
    struct gh_task t;
    memset(&t, 0, sizeof t);
    t.kind = kind;
    snprintf(t.id, sizeof t.id, "%s", id);
    snprintf(t.mode, sizeof t.mode, "%s", kind == GH_TASK_DECISION ? "act" : "");
    if (kind == GH_TASK_APPROVED)
        snprintf(t.approver, sizeof t.approver, "approved by ops");
    t.n = 2;
    t.v[0] = (struct gh_guard_verdict){GH_ACT_DRAIN_NODE, GH_GUARD_ALLOW, "budget", "1 of 10"};
    t.v[1] = (struct gh_guard_verdict){GH_ACT_RUN_DIAGNOSTICS, GH_GUARD_ALLOW, "none", "ok"};
    t.incident = incident(id);
    gh_decision_read(&t.d, t.incident); /* as the controller fills it */
    return t;
}

/* Records incident id held (as the executor's HOLD task does). */
static void hold(struct gh_audit *a, const char *id, enum gh_task_kind kind, int64_t deadline)
{
    struct gh_task t = task(id, kind);
    const char *jobs[] = {"ml/llm"};
    json_t *p = gh_drain_hold_payload(&t, jobs, 1, NOW, deadline);
    assert_non_null(p);
    struct gh_err err;
    bool inserted = false;
    char detail[512];
    assert_int_equal(gh_audit_begin(a, &err), GH_OK);
    assert_int_equal(gh_audit_record_incident(a, t.incident, "act", GH_PHASE_HELD, "test", NOW,
                                              &inserted, &err),
                     GH_OK);
    assert_true(inserted);
    assert_int_equal(gh_drain_hold_record(a, t.incident, p, NOW, detail, sizeof detail, &err),
                     GH_OK);
    assert_int_equal(gh_audit_commit(a, &err), GH_OK);
    assert_non_null(strstr(detail, "held until the next checkpoint of ml/llm"));
    json_decref(p);
    json_decref(t.incident);
}

static int count_pending(void *ud, const struct gh_audit_intent *it)
{
    (void)it;
    (*(int *)ud)++;
    return GH_OK;
}

struct got {
    int n;
    struct gh_drain_hold h[4];
};

static void collect(void *ud, struct gh_drain_hold *h)
{
    struct got *g = ud;
    assert_true(g->n < 4);
    g->h[g->n++] = *h; /* incident owned by g now */
}

struct skips {
    int n;
    char id[64], msg[sizeof ((struct gh_err *)0)->msg];
};

static void skipped(void *ud, const char *id, const struct gh_err *err)
{
    struct skips *k = ud;
    k->n++;
    snprintf(k->id, sizeof k->id, "%s", id);
    snprintf(k->msg, sizeof k->msg, "%s", err->msg);
}

/* the skip callback's ud is collect's: both are told through one struct */
struct resumed {
    struct got g;
    struct skips k;
};

static void collect_r(void *ud, struct gh_drain_hold *h) { collect(&((struct resumed *)ud)->g, h); }
static void skipped_r(void *ud, const char *id, const struct gh_err *err)
{
    skipped(&((struct resumed *)ud)->k, id, err);
}

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n; i++)
        json_decref(g->h[i].t.incident);
    g->n = 0;
}

static const char *phase_of(struct gh_audit *a, const char *id, char *buf, size_t cap)
{
    struct gh_audit_subject s = {GH_AUDIT_INCIDENT, ""};
    snprintf(s.name, sizeof s.name, "%s", id);
    struct gh_audit_incident_rec *r = NULL;
    size_t n = 0;
    assert_int_equal(gh_audit_query(a, &s, 0, 1, &r, &n, NULL), GH_OK);
    assert_int_equal(n, 1);
    snprintf(buf, cap, "%s|%s", r[0].phase, r[0].reason ? r[0].reason : "");
    for (size_t i = 0; i < r[0].n_guards; i++)
        if (r[0].guards[i].verdict && !strcmp(r[0].guards[i].verdict, "released"))
            snprintf(buf + strlen(buf), cap - strlen(buf), "|%s", r[0].guards[i].detail);
    gh_audit_recs_free(r, n);
    return buf;
}

static void exercise(const char *url)
{
    struct gh_audit *a = NULL;
    struct gh_err err;
    assert_int_equal(gh_audit_open(url, &a, &err), GH_OK);
    hold(a, "inc-00000000000000d1", GH_TASK_DECISION, NOW + 600 * S);
    hold(a, "inc-00000000000000d2", GH_TASK_APPROVED, NOW + 60 * S);

    /* the replay of pending intents leaves holds alone */
    int pending = 0;
    assert_int_equal(gh_audit_intents_pending(a, count_pending, &pending, &err), GH_OK);
    assert_int_equal(pending, 0);

    /* a restart reads both back, deadlines and verdicts unchanged */
    struct got g = {0};
    assert_int_equal(gh_drain_holds_resume(a, NOW - S, NOW + 100 * S, "ctl-2", collect, NULL, &g,
                                           &err),
                     GH_OK);
    assert_int_equal(g.n, 2);
    struct gh_drain_hold *d1 = &g.h[0], *d2 = &g.h[1];
    assert_string_equal(d1->t.id, "inc-00000000000000d1");
    assert_int_equal(d1->t.kind, GH_TASK_DECISION);
    assert_string_equal(d1->t.mode, "act");
    assert_int_equal(d1->since_ns, NOW);
    assert_int_equal(d1->deadline_ns, NOW + 600 * S);
    assert_int_equal(d1->n, 1);
    assert_string_equal(d1->jobs[0], "ml/llm");
    assert_int_equal(d1->t.n, 2);
    assert_int_equal(d1->t.v[0].action, GH_ACT_DRAIN_NODE);
    assert_int_equal(d1->t.v[0].outcome, GH_GUARD_ALLOW);
    assert_string_equal(d1->t.v[0].guard, "budget");
    assert_string_equal(d1->t.v[1].detail, "ok");
    assert_string_equal(json_string_value(json_object_get(d1->t.incident, "node")), "gpu-03");
    /* its decision is filled from the stored incident (task-t.h) */
    assert_string_equal(d1->t.d.node, "gpu-03");
    assert_string_equal(d1->t.d.job, "ml/llm");
    assert_int_equal(d1->t.d.n_actions, 2);
    assert_int_equal(d1->t.d.actions[1], GH_ACT_RUN_DIAGNOSTICS);
    assert_int_equal(d2->t.kind, GH_TASK_APPROVED);
    assert_string_equal(d2->t.approver, "approved by ops");
    assert_int_equal(d2->deadline_ns, NOW + 60 * S);

    /* released (the wait told as drain_wait.c tells it): once */
    struct gh_drain_waits *w = gh_drain_waits_new();
    const char *jobs[] = {"ml/llm"};
    assert_int_equal(gh_drain_waits_hold(w, &d1->t, jobs, 1, d1->since_ns, d1->deadline_ns, &err),
                     GH_OK);
    assert_true(gh_drain_waits_checkpoint(w, "ml/llm", 1300, "s3://ck/1300", NOW + 120 * S));
    struct gh_task out;
    assert_true(gh_drain_waits_take(w, NOW + 120 * S, &out));
    bool released = false;
    assert_int_equal(gh_audit_begin(a, &err), GH_OK);
    assert_int_equal(gh_drain_hold_release(a, out.incident, NOW + 120 * S, &released, &err), GH_OK);
    assert_int_equal(gh_audit_commit(a, &err), GH_OK);
    assert_true(released);
    char buf[2048];
    phase_of(a, "inc-00000000000000d1", buf, sizeof buf);
    assert_non_null(strstr(buf, "Acting|NVSwitch SXID 12028. drain_node waited 120.0 s for the "
                                "next checkpoint (ml/llm checkpoint step 1300).|released: job "
                                "ml/llm saved checkpoint step 1300 (held 120.0 s)"));
    released = true;
    assert_int_equal(gh_drain_hold_release(a, out.incident, NOW + 121 * S, &released, &err), GH_OK);
    assert_false(released); /* a second release: nothing */
    json_decref(out.incident);
    gh_drain_waits_free(w);

    /* an incident held without its hold's record: skipped, and told to
     * the caller (who logs it; drain_hold.c does not) */
    json_t *bad = incident("inc-00000000000000d3");
    bool inserted = false;
    assert_int_equal(gh_audit_begin(a, &err), GH_OK);
    assert_int_equal(gh_audit_record_incident(a, bad, "act", GH_PHASE_HELD, "test", NOW,
                                              &inserted, &err),
                     GH_OK);
    assert_int_equal(gh_audit_commit(a, &err), GH_OK);
    json_decref(bad);

    /* the next restart resumes only the one still held; its deadline passed */
    got_free(&g);
    struct resumed r = {0};
    assert_int_equal(gh_drain_holds_resume(a, NOW - S, NOW + 100 * S, "ctl-3", collect_r,
                                           skipped_r, &r, &err),
                     GH_OK);
    assert_int_equal(r.g.n, 1);
    assert_string_equal(r.g.h[0].t.id, "inc-00000000000000d2");
    got_free(&r.g);
    assert_int_equal(r.k.n, 1);
    assert_string_equal(r.k.id, "inc-00000000000000d3");
    assert_non_null(strstr(r.k.msg, "no hold recorded"));
    long guards = 0;
    assert_int_equal(gh_audit_count(a, "guards", &guards, &err), GH_OK);
    assert_int_equal(guards, 2 + 2 + 1 + 1); /* held x2, resumed x2, released, resumed */
    gh_audit_close(a);
}

static void test_sqlite(void **st)
{
    (void)st;
    struct gh_store_tmp t;
    gh_store_tmp_make(&t, "gh-hold");
    exercise(t.url);
    gh_store_tmp_remove(&t);
}

static void test_postgres(void **st)
{
    if (!*st) {
        skip();
        return;
    }
    exercise(((struct gh_pg_testenv *)*st)->url);
}

/* A resumed hold counts a checkpoint that arrived after its start (the
 * journal's replay, before the restart); a new hold does not count one
 * from before it. */
static void test_recent_checkpoints(void **st)
{
    (void)st;
    struct gh_drain_waits *w = gh_drain_waits_new();
    struct gh_err err;
    struct gh_task out;
    const char *jobs[] = {"ml/llm"};
    assert_false(gh_drain_waits_checkpoint(w, "ml/llm", 77, "/ck/77", NOW + 5 * S));

    struct gh_task fresh = task("inc-f", GH_TASK_DECISION);
    assert_int_equal(gh_drain_waits_hold(w, &fresh, jobs, 1, NOW + 6 * S, NOW + 60 * S, &err),
                     GH_OK);
    assert_false(gh_drain_waits_take(w, NOW + 7 * S, &out));
    assert_true(gh_drain_waits_has(w, "inc-f"));

    struct gh_task resumed = task("inc-r", GH_TASK_DECISION);
    assert_int_equal(gh_drain_waits_hold(w, &resumed, jobs, 1, NOW, NOW + 60 * S, &err), GH_OK);
    assert_true(gh_drain_waits_take(w, NOW + 7 * S, &out));
    assert_string_equal(out.id, "inc-r");
    json_t *dw = json_object_get(out.incident, "drain_wait");
    assert_string_equal(json_string_value(json_object_get(dw, "outcome")), "checkpoint");
    json_t *j0 = json_array_get(json_object_get(dw, "jobs"), 0);
    assert_int_equal(json_integer_value(json_object_get(j0, "step")), 77);
    json_decref(out.incident);

    /* leadership lost: the holds go, the recent checkpoints stay */
    gh_drain_waits_clear(w);
    assert_int_equal(gh_drain_waits_count(w), 0);
    assert_false(gh_drain_waits_has(w, "inc-f"));
    struct gh_task again = task("inc-r2", GH_TASK_DECISION);
    assert_int_equal(gh_drain_waits_hold(w, &again, jobs, 1, NOW + S, NOW + 60 * S, &err), GH_OK);
    assert_true(gh_drain_waits_take(w, NOW + 8 * S, &out));
    json_decref(out.incident);

    /* bounded: many jobs later, the first job's checkpoint is forgotten */
    for (int i = 0; i < GH_DRAIN_RECENT_MAX; i++) {
        char job[32];
        snprintf(job, sizeof job, "ml/j%d", i);
        gh_drain_waits_checkpoint(w, job, i, NULL, NOW + 10 * S);
    }
    struct gh_task late = task("inc-l", GH_TASK_DECISION);
    assert_int_equal(gh_drain_waits_hold(w, &late, jobs, 1, NOW, NOW + 60 * S, &err), GH_OK);
    assert_false(gh_drain_waits_take(w, NOW + 11 * S, &out));
    gh_drain_waits_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite),
        cmocka_unit_test(test_postgres),
        cmocka_unit_test(test_recent_checkpoints),
    };
    return cmocka_run_group_tests(tests, gh_store_pg_setup, gh_store_pg_teardown);
}
