/* test_control_decision.c - a decision (control/task-t.h) filled from the
 * engine's incident equals the one read back from its object, as the
 * store keeps it (so an approval after a restart, a replay or a handed-back
 * decision act on the same fields); what an object lacks or this build
 * does not know is "none"; the evidence's pods are the first
 * GH_DECISION_PODS_MAX with a namespace and a name, oldest first; a
 * shared cause's scope, component and count, and its Event's note. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "control/decision.h"
#include "control/executor_publish.h"
#include "signal/signal_json.h"

#define EVIDENCE 20

static void decode(struct gh_tl_entry *e, const char *line)
{
    struct gh_err err;
    memset(e, 0, sizeof *e);
    assert_int_equal(gh_signal_decode(line, strlen(line), 1, &e->sig, &err), GH_OK);
}

static void str_equal(const char *a, const char *b)
{
    if (!a || !b)
        assert_true(a == b);
    else
        assert_string_equal(a, b);
}

static void same(const struct gh_decision *a, const struct gh_decision *b)
{
    str_equal(a->id, b->id);
    assert_int_equal(a->cls, b->cls);
    str_equal(a->node, b->node);
    assert_int_equal(a->gpu, b->gpu);
    str_equal(a->job, b->job);
    str_equal(a->rule, b->rule);
    assert_int_equal(a->n_actions, b->n_actions);
    for (int i = 0; i < a->n_actions; i++)
        assert_int_equal(a->actions[i], b->actions[i]);
    assert_int_equal(a->has_checkpoint, b->has_checkpoint);
    assert_int_equal(a->checkpoint_step, b->checkpoint_step);
    str_equal(a->checkpoint_path, b->checkpoint_path);
    assert_int_equal(a->scope, b->scope);
    str_equal(a->component, b->component);
    assert_int_equal(a->n_affected, b->n_affected);
    assert_int_equal(a->n_pods, b->n_pods);
    for (int i = 0; i < a->n_pods; i++) {
        assert_string_equal(a->pods[i].ns, b->pods[i].ns);
        assert_string_equal(a->pods[i].name, b->pods[i].name);
    }
}

static void test_incident_and_record_agree(void **st)
{
    (void)st;
    static struct gh_tl_entry ev[EVIDENCE];
    decode(&ev[0], "{\"ts\":\"2026-11-29T08:01:40Z\",\"node\":\"gpu-02\",\"gpu\":3,"
                   "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid 79\"}");
    for (int i = 1; i < EVIDENCE; i++) {
        char line[300];
        snprintf(line, sizeof line, "{\"ts\":\"2026-11-29T08:01:41Z\",\"node\":\"gpu-02\","
                 "\"source\":\"kube\",\"kind\":\"pod_failed\",\"namespace\":\"ml\","
                 "\"pod\":\"train-%d\",\"job\":\"ml/train\",\"reason\":\"Error\"}", i);
        decode(&ev[i], line);
    }
    struct gh_incident inc;
    memset(&inc, 0, sizeof inc);
    snprintf(inc.id, sizeof inc.id, "inc-0123456789abcdef");
    inc.cls = GH_CLASS_GPU_HARDWARE;
    inc.node = "gpu-02";
    inc.gpu = 3;
    inc.job = "ml/train";
    inc.n_actions = 3;
    inc.actions[0] = GH_ACT_ISOLATE_NODE;
    inc.actions[1] = GH_ACT_DRAIN_NODE;
    inc.actions[2] = GH_ACT_RESTART_FROM_CHECKPOINT;
    inc.has_checkpoint = true;
    inc.checkpoint_step = 1200;
    inc.checkpoint_path = "s3://ckpt/step-1200";
    inc.n_evidence = EVIDENCE;
    for (int i = 0; i < EVIDENCE; i++)
        inc.evidence[i] = &ev[i];
    inc.rule = "gpu-fell-off-bus";
    snprintf(inc.reason, sizeof inc.reason, "GPU 3 fell off the bus.");
    json_t *obj = gh_incident_to_json(&inc);
    assert_non_null(obj);

    struct gh_decision a, b;
    gh_decision_from_incident(&a, &inc, obj);
    /* as the store gives it back: the text of the object, parsed again */
    char *text = json_dumps(obj, JSON_COMPACT);
    json_t *back = json_loads(text, 0, NULL);
    assert_non_null(back);
    gh_decision_read(&b, back);
    same(&a, &b);

    assert_string_equal(a.id, "inc-0123456789abcdef");
    assert_int_equal(a.cls, GH_CLASS_GPU_HARDWARE);
    assert_string_equal(a.node, "gpu-02");
    assert_int_equal(a.gpu, 3);
    assert_string_equal(a.job, "ml/train");
    assert_int_equal(a.n_actions, 3);
    assert_int_equal(a.actions[2], GH_ACT_RESTART_FROM_CHECKPOINT);
    assert_int_equal(a.checkpoint_step, 1200);
    assert_string_equal(a.checkpoint_path, "s3://ckpt/step-1200");
    /* the xid names no pod; the first 16 pod failures, oldest first */
    assert_int_equal(a.n_pods, GH_DECISION_PODS_MAX);
    assert_string_equal(a.pods[0].ns, "ml");
    assert_string_equal(a.pods[0].name, "train-1");
    assert_string_equal(a.pods[GH_DECISION_PODS_MAX - 1].name, "train-16");
    /* borrowed from the object: its strings, not copies */
    assert_ptr_equal(a.node, json_string_value(json_object_get(obj, "node")));

    free(text);
    json_decref(back);
    json_decref(obj);
    for (int i = 0; i < EVIDENCE; i++)
        gh_signal_clear(&ev[i].sig);
}

static void test_absent_and_unknown(void **st)
{
    (void)st;
    struct gh_decision d;
    /* an application fault: no node, GPU, job or checkpoint; an action and
     * a class of another build are left out */
    json_t *o = json_pack("{s:s, s:s, s:s, s:[s, s, s], s:[], s:s}", "id", "inc-app", "class",
                          "from_the_future", "rule", "", "actions", "retry_in_place",
                          "launch_rockets", "none", "evidence", "gpu", "3");
    assert_non_null(o);
    gh_decision_read(&d, o);
    assert_string_equal(d.id, "inc-app");
    assert_int_equal(d.cls, -1);
    assert_null(d.node);
    assert_int_equal(d.gpu, -1); /* not an integer */
    assert_null(d.job);
    assert_string_equal(d.rule, "");
    assert_int_equal(d.n_actions, 2);
    assert_int_equal(d.actions[0], GH_ACT_RETRY_IN_PLACE);
    assert_int_equal(d.actions[1], GH_ACT_NONE);
    assert_false(d.has_checkpoint);
    assert_int_equal(d.checkpoint_step, -1);
    assert_null(d.checkpoint_path);
    assert_int_equal(d.n_pods, 0);
    json_decref(o);
    gh_decision_read(&d, NULL);
    assert_null(d.id);
    assert_int_equal(d.cls, -1);
    assert_int_equal(d.n_actions, 0);
}

/* A cause several nodes share: no node, its scope, component and the
 * number of affected nodes, the same from the incident and from its
 * object; the SharedCause Event's note names all three. */
static void test_shared_cause(void **st)
{
    (void)st;
    static struct gh_tl_entry ev[1];
    decode(&ev[0], "{\"ts\":\"2026-11-29T08:01:40Z\",\"node\":\"gpu-02\",\"source\":\"host\","
                   "\"kind\":\"nic\",\"device\":\"mlx5_0\",\"port\":1,"
                   "\"counter\":\"link_downed\",\"count\":1,\"state\":\"down\"}");
    static const char *const nodes[] = {"gpu-01", "gpu-02", "gpu-03"};
    struct gh_incident inc;
    memset(&inc, 0, sizeof inc);
    snprintf(inc.id, sizeof inc.id, "inc-5ead");
    inc.cls = GH_CLASS_NETWORK;
    inc.gpu = -1;
    inc.n_actions = 1;
    inc.actions[0] = GH_ACT_NONE;
    inc.n_evidence = 1;
    inc.evidence[0] = &ev[0];
    inc.rule = "shared-switch";
    inc.scope = GH_SCOPE_SWITCH;
    inc.component = "example.com/ib-leaf=leaf-3";
    inc.n_affected = 3;
    inc.affected_nodes = nodes;
    json_t *obj = gh_incident_to_json(&inc);
    assert_non_null(obj);
    struct gh_decision a, b;
    gh_decision_from_incident(&a, &inc, obj);
    char *text = json_dumps(obj, JSON_COMPACT);
    json_t *back = json_loads(text, 0, NULL);
    gh_decision_read(&b, back);
    same(&a, &b);
    assert_null(a.node);
    assert_int_equal(a.scope, GH_SCOPE_SWITCH);
    assert_string_equal(a.component, "example.com/ib-leaf=leaf-3");
    assert_int_equal(a.n_affected, 3);
    char note[1024];
    gh_exec_shared_cause_note(&a, note, sizeof note);
    assert_string_equal(note, "inc-5ead: shared cause: scope switch, component "
                              "example.com/ib-leaf=leaf-3, 3 nodes affected; none of them is "
                              "cordoned, drained, reset or rebooted for it: look at what they "
                              "share");
    a.component = NULL;
    gh_exec_shared_cause_note(&a, note, sizeof note);
    assert_non_null(strstr(note, "component unknown (no Node label names it), 3 nodes"));
    /* a node's own incident says no scope */
    json_object_del(back, "scope");
    gh_decision_read(&b, back);
    assert_int_equal(b.scope, GH_SCOPE_UNSAID);
    free(text);
    json_decref(back);
    json_decref(obj);
    gh_signal_clear(&ev[0].sig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incident_and_record_agree),
        cmocka_unit_test(test_absent_and_unknown),
        cmocka_unit_test(test_shared_cause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
