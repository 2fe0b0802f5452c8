/* test_control_inputs.c - the controller's inputs besides agents: Events as
 * kube signals (which reasons, gpuheal's own skipped, new occurrences only,
 * history skipped, Evicted sharing the pod failure's id) and RecoveryPolicy
 * rules as engine rules (conversion, escalation, field-named errors, the
 * set keeping a previous version, priority order, reload through the
 * engine) and drain decisions waiting for a checkpoint (namespace
 * annotations, release on the job's checkpoint or at the timeout, what the
 * incident then says). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "control/decision.h"
#include "control/drain_wait.h"
#include "control/kube_signals.h"
#include "control/policy_cr.h"
#include "engine/engine.h"
#include "kube/yaml_json.h"

#define NOW (1795935600LL * GH_NS_PER_S) /* 2026-11-29T07:00:00Z */

static json_t *event(const char *kind, const char *name, const char *reason, int count,
                     const char *when)
{
    return json_pack("{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:s, s:s, s:i}",
                     "metadata", "name", "ev-1", "namespace", "default", "uid", "e-uid",
                     "regarding", "kind", kind, "name", name, "namespace",
                     strcmp(kind, "Pod") ? "" : "ml", "uid", "p-uid", "reason", reason, "note",
                     "node is not ready", "type", "Warning", "reportingController", "kubelet",
                     "eventTime", when, "deprecatedCount", count);
}

static void test_event_node(void **st)
{
    (void)st;
    struct gh_signal s[1];
    json_t *e = event("Node", "gpu-07", "NodeNotReady", 1, "2026-11-29T06:59:58.000000Z");
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_NOT_READY);
    assert_int_equal(s[0].source, GH_SRC_KUBE);
    assert_string_equal(s[0].node, "gpu-07");
    assert_string_equal(s[0].id, "kube:event:e-uid:1");
    assert_int_equal(s[0].ts_ns, NOW - 2 * GH_NS_PER_S);
    assert_non_null(strstr(s[0].msg, "NodeNotReady"));
    gh_signal_clear(&s[0]);

    /* the same occurrence again (a resync or an unrelated change): nothing */
    json_t *same = json_deep_copy(e);
    assert_int_equal(gh_kube_event_signals(e, same, NULL, NOW, 0, s, 1), 0);
    /* seen once more: a new id */
    json_object_set_new(same, "deprecatedCount", json_integer(2));
    assert_int_equal(gh_kube_event_signals(e, same, NULL, NOW, 0, s, 1), 1);
    assert_string_equal(s[0].id, "kube:event:e-uid:2");
    gh_signal_clear(&s[0]);
    /* series.count wins over deprecatedCount */
    json_object_set_new(same, "series", json_pack("{s:i, s:s}", "count", 5, "lastObservedTime",
                                                  "2026-11-29T06:59:59.000000Z"));
    assert_int_equal(gh_kube_event_signals(e, same, NULL, NOW, 0, s, 1), 1);
    assert_string_equal(s[0].id, "kube:event:e-uid:5");
    assert_int_equal(s[0].ts_ns, NOW - GH_NS_PER_S);
    gh_signal_clear(&s[0]);
    json_decref(same);

    /* history older than max_age at first sight is skipped */
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW + 600 * GH_NS_PER_S,
                                           300 * GH_NS_PER_S, s, 1),
                     0);
    json_decref(e);

    e = event("Node", "gpu-07", "Rebooted", 1, "2026-11-29T06:59:58.000000Z");
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_READY);
    gh_signal_clear(&s[0]);
    json_decref(e);
    e = event("Node", "gpu-07", "NodeReady", 1, "2026-11-29T06:59:58.000000Z");
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_READY);
    gh_signal_clear(&s[0]);
    json_decref(e);

    /* reasons the engine has no use for */
    const char *other[] = {"Starting", "NodeHasSufficientMemory", "SystemOOM", "FailedScheduling"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        e = event("Node", "gpu-07", other[i], 1, "2026-11-29T06:59:58.000000Z");
        assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 0);
        json_decref(e);
    }
}

static void test_event_own_skipped(void **st)
{
    (void)st;
    struct gh_signal s[1];
    json_t *e = event("Node", "gpu-07", "NodeNotReady", 1, "2026-11-29T06:59:58.000000Z");
    json_object_set_new(e, "reportingController", json_string("gpuheal.io/controller"));
    assert_true(gh_kube_event_is_own(e));
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 0);
    json_object_set_new(e, "reportingController", json_string("kubelet"));
    json_object_set_new(e, "deprecatedSource",
                        json_pack("{s:s}", "component", "gpuheal-controller"));
    assert_true(gh_kube_event_is_own(e));
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 0);
    json_object_del(e, "deprecatedSource");
    assert_false(gh_kube_event_is_own(e));
    json_decref(e);
}

static void test_event_evicted(void **st)
{
    (void)st;
    struct gh_signal s[1];
    json_t *e = event("Pod", "llm-3", "Evicted", 1, "2026-11-29T06:59:58.000000Z");
    json_t *pod = json_pack("{s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}}", "metadata", "name", "llm-3",
                            "namespace", "ml", "uid", "p-uid", "labels",
                            "batch.kubernetes.io/job-name", "llm", "spec", "nodeName", "gpu-17");
    assert_int_equal(gh_kube_event_signals(NULL, e, pod, NOW, 0, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_FAILED);
    assert_string_equal(s[0].id, "kube:pod:p-uid:failed"); /* the pod informer's id */
    assert_string_equal(s[0].reason, "Evicted");
    assert_string_equal(s[0].job, "ml/llm");
    assert_string_equal(s[0].node, "gpu-17");
    gh_signal_clear(&s[0]);
    /* the pod already gone from the cache: still a signal, without node */
    assert_int_equal(gh_kube_event_signals(NULL, e, NULL, NOW, 0, s, 1), 1);
    assert_string_equal(s[0].namespace_, "ml");
    assert_string_equal(s[0].pod, "llm-3");
    assert_null(s[0].node);
    gh_signal_clear(&s[0]);
    json_decref(pod);
    json_decref(e);
}

/* ---- RecoveryPolicy rules */

static json_t *cr(const char *name, int gen, int prio, const char *rules_json)
{
    json_t *rules = json_loads(rules_json, 0, NULL);
    assert_non_null(rules);
    return json_pack("{s:{s:s, s:i}, s:{s:i, s:o}}", "metadata", "name", name, "generation", gen,
                     "spec", "priority", prio, "rules", rules);
}

static void test_cr_rules(void **st)
{
    (void)st;
    struct gh_policy *p = calloc(1, sizeof *p);
    json_t *o = cr("a", 1, 0,
                   "[{\"name\":\"gpu-fell-off-bus\",\"description\":\"engine: min_severity high, "
                   "debounce 10s, boot_grace 5m\",\"match\":{\"class\":\"gpu_hardware\","
                   "\"kinds\":[\"xid\"],\"codes\":[79],\"repetitions\":2,\"window\":\"1h30m\"},"
                   "\"actions\":[{\"action\":\"isolate_node\"},{\"action\":"
                   "\"restart_from_checkpoint\"},{\"action\":\"reboot_node\",\"escalateAfter\":"
                   "\"7d\",\"maxRetries\":0},{\"action\":\"replace_node\"}]},"
                   "{\"name\":\"slow\",\"description\":\"engine: impact slower+died\","
                   "\"match\":{\"class\":\"straggler\",\"threshold\":0.2},"
                   "\"actions\":[{\"action\":\"none\"}]}]");
    struct gh_err err = {{0}};
    assert_int_equal(gh_policy_cr_rules(json_object_get(o, "spec"), p, &err), GH_OK);
    assert_int_equal(p->n_rules, 2);
    const struct gh_rule *r = &p->rules[0];
    assert_string_equal(r->name, "gpu-fell-off-bus");
    assert_int_equal(r->classes, 1u << GH_CLASS_GPU_HARDWARE);
    assert_int_equal(r->kinds, 1u << GH_KIND_XID);
    assert_int_equal(r->n_codes, 1);
    assert_int_equal(r->codes[0], 79);
    assert_int_equal(r->repetitions, 2);
    assert_int_equal(r->window_ns, 5400 * GH_NS_PER_S);
    assert_int_equal(r->min_severity, GH_SEV_HIGH);
    assert_int_equal(r->debounce_ns, 10 * GH_NS_PER_S);
    assert_int_equal(r->boot_grace_ns, 300 * GH_NS_PER_S);
    assert_int_equal(r->impacts, 0); /* any impact */
    assert_int_equal(p->rules[1].impacts, (1u << GH_IMPACT_SLOWER) | (1u << GH_IMPACT_DIED));
    /* base: up to the escalateAfter entry; escalation: that entry replaced
     * by what follows, from the 2nd incident within 7 days */
    assert_int_equal(r->n_actions, 3);
    assert_int_equal(r->actions[2], GH_ACT_REBOOT_NODE);
    assert_int_equal(r->n_escalations, 1);
    assert_int_equal(r->escalations[0].after, 2);
    assert_int_equal(r->escalations[0].within_ns, 7 * 86400 * GH_NS_PER_S);
    assert_int_equal(r->escalations[0].n_actions, 3);
    assert_int_equal(r->escalations[0].actions[0], GH_ACT_ISOLATE_NODE);
    assert_int_equal(r->escalations[0].actions[1], GH_ACT_RESTART_FROM_CHECKPOINT);
    assert_int_equal(r->escalations[0].actions[2], GH_ACT_REPLACE_NODE);
    assert_true(p->rules[1].has_threshold);
    assert_int_equal(p->rules[1].n_escalations, 0);
    json_decref(o);

    /* errors name the field; nothing is appended */
    const struct {
        const char *rules, *field;
    } bad[] = {
        {"[{\"name\":\"x\",\"match\":{\"class\":\"gpu\"},\"actions\":[{\"action\":\"none\"}]}]",
         "spec.rules[0].match.class"},
        {"[{\"name\":\"x\",\"match\":{\"class\":\"network\"},\"actions\":[{\"action\":\"none\"}]},"
         "{\"name\":\"y\",\"match\":{\"class\":\"network\",\"kinds\":[\"nic\",\"bogus\"]},"
         "\"actions\":[{\"action\":\"none\"}]}]",
         "spec.rules[1].match.kinds[1]"},
        {"[{\"name\":\"x\",\"match\":{\"class\":\"network\"},\"actions\":[{\"action\":\"fix\"}]}]",
         "spec.rules[0].actions[0].action"},
        {"[{\"name\":\"x\",\"match\":{\"class\":\"network\",\"window\":\"soon\"},"
         "\"actions\":[{\"action\":\"none\"}]}]",
         "spec.rules[0].match.window"},
        {"[]", "spec.rules"},
        {"[{\"name\":\"x\",\"description\":\"engine: impact died+dead\",\"match\":{\"class\":"
         "\"network\"},\"actions\":[{\"action\":\"none\"}]}]",
         "spec.rules[0].description: engine: unknown impact \"dead\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = cr("b", 1, 0, bad[i].rules);
        assert_int_equal(gh_policy_cr_rules(json_object_get(o, "spec"), p, &err), GH_EINVAL);
        assert_int_equal(strncmp(err.msg, bad[i].field, strlen(bad[i].field)), 0);
        assert_int_equal(p->n_rules, 2);
        json_decref(o);
    }
    free(p);
}

/* The shipped RecoveryPolicy (deploy/policy-default.yaml, generated from
 * the built-in policy) converts whole, rule for rule. */
static void test_cr_default_policy(void **st)
{
    (void)st;
    FILE *f = fopen(GH_SOURCE_DIR "/deploy/policy-default.yaml", "rb");
    assert_non_null(f);
    static char buf[256 * 1024];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof buf);
    json_t *obj = NULL;
    struct gh_err err = {{0}};
    assert_int_equal(gh_yaml_to_json(buf, len, &obj, &err), GH_OK);
    const json_t *spec = json_object_get(obj, "spec");
    struct gh_policy *p = calloc(1, sizeof *p);
    int rc = gh_policy_cr_rules(spec, p, &err);
    if (rc)
        print_message("%s\n", err.msg);
    assert_int_equal(rc, GH_OK);
    assert_int_equal(p->n_rules, (int)json_array_size(json_object_get(spec, "rules")));
    /* the rule that gen-policy-cr.py split from gpu-fell-off-bus keeps its
     * escalation to replace_node */
    bool found = false;
    for (int i = 0; i < p->n_rules; i++) {
        const struct gh_rule *r = &p->rules[i];
        if (strcmp(r->name, "gpu-fell-off-bus") != 0)
            continue;
        found = true;
        assert_int_equal(r->n_codes, 1);
        assert_int_equal(r->codes[0], 79);
        assert_int_equal(r->n_escalations, 1);
        assert_int_equal(r->escalations[0].actions[r->escalations[0].n_actions - 1],
                         GH_ACT_REPLACE_NODE);
    }
    assert_true(found);
    free(p);
    json_decref(obj);
}

#define RULE(name, cls, act)                                                                     \
    "[{\"name\":\"" name "\",\"match\":{\"class\":\"" cls "\"},\"actions\":[{\"action\":\"" act  \
    "\"}]}]"

struct engine_sink {
    int n;
    char rule[4][GH_POLICY_NAME_MAX];
    enum gh_action act[4];
};

static void engine_cb(void *ctx, const struct gh_incident *inc)
{
    struct engine_sink *sk = ctx;
    if (sk->n < 4) {
        snprintf(sk->rule[sk->n], sizeof sk->rule[0], "%s", inc->rule ? inc->rule : "");
        sk->act[sk->n] = inc->n_actions > 0 ? inc->actions[0] : GH_ACT_NONE;
        sk->n++;
    }
}

static void app_failure(struct gh_engine *e, const char *job, int64_t t)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = t;
    s.source = GH_SRC_KUBE;
    s.kind = GH_KIND_POD_FAILED;
    gh_signal_set_str(&s.job, job, strlen(job));
    gh_signal_set_str(&s.namespace_, "ml", 2);
    gh_signal_set_str(&s.pod, "p-0", 3);
    gh_signal_set_str(&s.reason, "Error", 5);
    gh_signal_set_str(&s.msg, "Traceback: KeyError: 'labels'", 29);
    s.has_exit_code = true;
    s.exit_code = 1;
    assert_int_equal(gh_engine_ingest_steal(e, &s, t, NULL), GH_OK);
    gh_signal_clear(&s);
}

static void test_crset(void **st)
{
    (void)st;
    struct gh_policy *base = gh_policy_new_default();
    struct gh_policy_crset *s = gh_policy_crset_new(base);
    struct gh_policy_cr_verdict v;
    int from = -1;

    /* no objects: the base's rules */
    gh_policy_crset_begin(s);
    struct gh_policy *p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 0);
    assert_true(gh_policy_equal(p, base));
    free(p);
    gh_policy_crset_begin(s);
    assert_null(gh_policy_crset_end(s, &from)); /* unchanged */

    /* two objects: the higher priority's rules first; settings the base's */
    json_t *lo = cr("low", 1, 0, RULE("app", "application", "retry_in_place"));
    json_t *hi = cr("high", 1, 10, RULE("net", "network", "drain_node"));
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, lo, &v);
    assert_true(v.accepted && v.fresh && v.changed);
    gh_policy_crset_offer(s, hi, &v);
    assert_true(v.accepted);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 2);
    assert_int_equal(p->n_rules, 2);
    assert_string_equal(p->rules[0].name, "net");
    assert_string_equal(p->rules[1].name, "app");
    assert_memory_equal(&p->settings, &base->settings, sizeof base->settings);
    free(p);

    /* an invalid new version of "low": rejected, the old one stays */
    json_t *bad = cr("low", 2, 0, RULE("app", "application", "reboot_everything"));
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, bad, &v);
    assert_false(v.accepted);
    assert_true(v.fresh);
    assert_string_equal(v.reason, "InvalidRule");
    assert_non_null(strstr(v.message, "spec.rules[0].actions[0].action"));
    assert_non_null(strstr(v.message, "previously accepted version stays"));
    assert_int_equal(v.rules, 1);
    gh_policy_crset_offer(s, hi, &v);
    assert_null(gh_policy_crset_end(s, &from)); /* nothing changed */
    /* judged once: offered again, the same verdict, not fresh */
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, bad, &v);
    assert_false(v.accepted);
    assert_false(v.fresh);
    gh_policy_crset_offer(s, hi, &v);
    assert_null(gh_policy_crset_end(s, &from));

    /* a valid version 3 replaces it; "high" deleted */
    json_t *lo3 = cr("low", 3, 0, RULE("app", "application", "restart_from_checkpoint"));
    gh_policy_crset_begin(s);
    gh_policy_crset_offer(s, lo3, &v);
    assert_true(v.accepted && v.changed);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 1);
    assert_int_equal(p->n_rules, 1);
    assert_int_equal(p->rules[0].actions[0], GH_ACT_RESTART_FROM_CHECKPOINT);

    /* the engine decides by the reloaded rules: the same kind of fault,
     * before and after the swap */
    struct engine_sink sk;
    memset(&sk, 0, sizeof sk);
    struct gh_engine_config ec;
    gh_engine_config_default(&ec);
    ec.reorder_window_ns = 0;
    struct gh_engine *e = gh_engine_new(base, NULL, NULL, &ec, engine_cb, &sk, NULL);
    assert_non_null(e);
    app_failure(e, "ml/one", NOW);
    gh_engine_finish(e, NOW + 120 * GH_NS_PER_S);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.rule[0], "application-fault");
    gh_engine_set_policy(e, p);
    assert_ptr_equal(gh_engine_policy(e), p);
    app_failure(e, "ml/two", NOW + 200 * GH_NS_PER_S);
    gh_engine_finish(e, NOW + 400 * GH_NS_PER_S);
    assert_int_equal(sk.n, 2);
    assert_string_equal(sk.rule[1], "app");
    assert_int_equal(sk.act[1], GH_ACT_RESTART_FROM_CHECKPOINT);
    gh_engine_free(e);
    free(p);

    /* every object gone: back to the base's rules */
    gh_policy_crset_begin(s);
    p = gh_policy_crset_end(s, &from);
    assert_non_null(p);
    assert_int_equal(from, 0);
    assert_true(gh_policy_equal(p, base));
    free(p);

    json_decref(lo);
    json_decref(hi);
    json_decref(bad);
    json_decref(lo3);
    gh_policy_crset_free(s);
    gh_policy_free(base);
}

/* ---- drain in checkpoint mode */

static void test_drain_mode(void **st)
{
    (void)st;
    struct gh_drain_mode m;
    struct gh_err err;
    assert_int_equal(gh_drain_mode_of(NULL, &m, &err), GH_OK);
    assert_false(m.checkpoint);
    json_t *ns = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "ml", "annotations",
                           GH_ANN_DRAIN_MODE, "checkpoint");
    assert_int_equal(gh_drain_mode_of(ns, &m, &err), GH_OK);
    assert_true(m.checkpoint);
    assert_int_equal(m.timeout_ns, 600 * GH_NS_PER_S);
    json_t *ann = json_object_get(json_object_get(ns, "metadata"), "annotations");
    json_object_set_new(ann, GH_ANN_DRAIN_CKPT_TIMEOUT, json_string("90s"));
    assert_int_equal(gh_drain_mode_of(ns, &m, &err), GH_OK);
    assert_int_equal(m.timeout_ns, 90 * GH_NS_PER_S);
    json_object_set_new(ann, GH_ANN_DRAIN_CKPT_TIMEOUT, json_string("a while"));
    assert_int_equal(gh_drain_mode_of(ns, &m, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, GH_ANN_DRAIN_CKPT_TIMEOUT));
    assert_false(m.checkpoint);
    json_object_del(ann, GH_ANN_DRAIN_CKPT_TIMEOUT);
    json_object_set_new(ann, GH_ANN_DRAIN_MODE, json_string("later"));
    assert_int_equal(gh_drain_mode_of(ns, &m, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, GH_ANN_DRAIN_MODE));
    json_object_set_new(ann, GH_ANN_DRAIN_MODE, json_string("immediate"));
    assert_int_equal(gh_drain_mode_of(ns, &m, &err), GH_OK);
    assert_false(m.checkpoint);
    json_decref(ns);
}

static struct gh_task drain_task(const char *id)
{
    struct gh_task t;
    memset(&t, 0, sizeof t);
    t.kind = GH_TASK_DECISION;
    snprintf(t.id, sizeof t.id, "%s", id);
    snprintf(t.mode, sizeof t.mode, "act");
    t.n = 1;
    t.v[0].action = GH_ACT_DRAIN_NODE;
    t.incident = json_pack("{s:s, s:s, s:s}", "id", id, "node", "gpu-03", "reason",
                           strcmp(id, "inc-a") ? "NVSwitch error" : "NVSwitch error.");
    gh_decision_read(&t.d, t.incident); /* as the controller fills it */
    return t;
}

static void test_drain_waits(void **st)
{
    (void)st;
    struct gh_drain_waits *w = gh_drain_waits_new();
    struct gh_err err;
    struct gh_task out;
    const char *two[] = {"ml/llm", "ml/eval"};

    struct gh_task a = drain_task("inc-a");
    assert_int_equal(gh_drain_waits_hold(w, &a, two, 2, NOW, NOW + 600 * GH_NS_PER_S, &err),
                     GH_OK);
    assert_null(a.incident); /* stolen */
    struct gh_task b = drain_task("inc-b");
    assert_int_equal(gh_drain_waits_hold(w, &b, two + 1, 1, NOW, NOW + 60 * GH_NS_PER_S, &err),
                     GH_OK);
    assert_int_equal(gh_drain_waits_count(w), 2);
    assert_int_equal(gh_drain_waits_next_deadline(w), NOW + 60 * GH_NS_PER_S);
    assert_false(gh_drain_waits_take(w, NOW + GH_NS_PER_S, &out));

    /* another job's checkpoint: nothing */
    assert_false(gh_drain_waits_checkpoint(w, "ml/other", 5, NULL, NOW + GH_NS_PER_S));
    assert_false(gh_drain_waits_take(w, NOW + GH_NS_PER_S, &out));
    /* ml/llm saved: a waits for ml/eval still */
    assert_true(
        gh_drain_waits_checkpoint(w, "ml/llm", 1200, "s3://ck/1200", NOW + 2 * GH_NS_PER_S));
    assert_false(gh_drain_waits_take(w, NOW + 2 * GH_NS_PER_S, &out));

    /* b's deadline: released, timed out */
    assert_true(gh_drain_waits_take(w, NOW + 60 * GH_NS_PER_S, &out));
    assert_string_equal(out.id, "inc-b");
    json_t *dw = json_object_get(out.incident, "drain_wait");
    assert_string_equal(json_string_value(json_object_get(dw, "outcome")), "timeout");
    assert_true(json_number_value(json_object_get(dw, "waited_s")) == 60.0);
    const char *reason = json_string_value(json_object_get(out.incident, "reason"));
    assert_non_null(strstr(reason, "NVSwitch error; drain_node waited for the next checkpoint "
                                   "and timed out after 60.0 s (ml/eval no checkpoint)."));
    json_decref(out.incident);
    assert_false(gh_drain_waits_take(w, NOW + 60 * GH_NS_PER_S, &out));

    /* ml/eval saved: a released with both steps */
    assert_true(gh_drain_waits_checkpoint(w, "ml/eval", 40, NULL, NOW + 70 * GH_NS_PER_S));
    assert_true(gh_drain_waits_take(w, NOW + 70 * GH_NS_PER_S, &out));
    assert_string_equal(out.id, "inc-a");
    assert_int_equal(out.v[0].action, GH_ACT_DRAIN_NODE);
    dw = json_object_get(out.incident, "drain_wait");
    assert_string_equal(json_string_value(json_object_get(dw, "outcome")), "checkpoint");
    json_t *j0 = json_array_get(json_object_get(dw, "jobs"), 0);
    assert_int_equal(json_integer_value(json_object_get(j0, "step")), 1200);
    assert_string_equal(json_string_value(json_object_get(j0, "path")), "s3://ck/1200");
    reason = json_string_value(json_object_get(out.incident, "reason"));
    assert_string_equal(reason, "NVSwitch error. drain_node waited 70.0 s for the next checkpoint "
                                "(ml/llm checkpoint step 1200, ml/eval checkpoint step 40).");
    json_decref(out.incident);
    assert_int_equal(gh_drain_waits_count(w), 0);
    assert_int_equal(gh_drain_waits_next_deadline(w), INT64_MAX);

    /* bounded */
    for (int i = 0; i < GH_DRAIN_WAITS_MAX; i++) {
        struct gh_task t = drain_task("inc-n");
        assert_int_equal(gh_drain_waits_hold(w, &t, two, 1, NOW, NOW + GH_NS_PER_S, &err), GH_OK);
    }
    struct gh_task full = drain_task("inc-full");
    assert_int_equal(gh_drain_waits_hold(w, &full, two, 1, NOW, NOW + GH_NS_PER_S, &err),
                     GH_ELIMIT);
    assert_non_null(full.incident); /* untouched: the caller drains now */
    json_decref(full.incident);
    gh_drain_waits_free(w); /* frees the held incidents */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_node),      cmocka_unit_test(test_event_own_skipped),
        cmocka_unit_test(test_event_evicted),   cmocka_unit_test(test_cr_rules),
        cmocka_unit_test(test_crset),           cmocka_unit_test(test_drain_mode),
        cmocka_unit_test(test_drain_waits),     cmocka_unit_test(test_cr_default_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
