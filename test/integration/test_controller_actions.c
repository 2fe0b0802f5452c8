/* test_controller_actions.c - the actuator against the real control plane:
 * isolate/release with ownership (someone else's cordon is never claimed
 * nor undone), drain through the Eviction API (a PodDisruptionBudget holds), requests to the agent on
 * GPUNodeHealth and the validation gate, retry in place, restart of a Job
 * from its checkpoint (twice = once; a crash between delete and create),
 * a resume path only under the job's gpuheal.io/checkpoint-prefix (issue
 * 24: elsewhere, none declared, an older controller's plan: by step, with
 * path-withheld), and the replace hand-off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/actuator.h"
#include "control/tenancy.h"
#include "kube/api.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    char ns[64];
    char node[96], node2[96];
    struct gh_act_ctx x;
};

static int make_node(struct gh_kube_client *c, const char *name, bool cordoned)
{
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:b, s:[{s:s, s:s}]}, s:{s:{s:s}}}",
                          "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
                          "gpuheal.io/test-node", "true", "spec", "unschedulable", cordoned,
                          "taints", "key", "gpuheal.io/test-only", "effect", "NoSchedule",
                          "status", "capacity", "nvidia.com/gpu", "8");
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
    struct gh_err err;
    int rc = gh_kube_create(c, &ref, n, NULL, NULL, &err);
    json_decref(n);
    if (rc)
        fprintf(stderr, "node %s: %s\n", name, err.msg);
    return rc;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "ctl-act", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    snprintf(e->node, sizeof e->node, "%s-n1", e->ns);
    snprintf(e->node2, sizeof e->node2, "%s-n2", e->ns);
    if (make_node(e->c, e->node, false) || make_node(e->c, e->node2, true))
        return -1;
    e->x.c = e->c;
    e->x.clock = NULL;
    e->x.incident = "inc-00000000000000a1";
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    struct gh_kube_ref r1 = {&gh_kube_res_nodes, NULL, e->node};
    struct gh_kube_ref r2 = {&gh_kube_res_nodes, NULL, e->node2};
    struct gh_kube_ref g1 = {&gh_kube_res_gpunodehealths, NULL, e->node};
    gh_kube_delete(e->c, &r1, NULL, NULL, NULL);
    gh_kube_delete(e->c, &r2, NULL, NULL, NULL);
    gh_kube_delete(e->c, &g1, NULL, NULL, NULL);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static json_t *get(struct env *e, const struct gh_kube_res *res, const char *ns, const char *name)
{
    struct gh_kube_ref ref = {res, ns, name};
    json_t *o = NULL;
    struct gh_err err;
    if (gh_kube_get(e->c, &ref, &o, NULL, &err))
        return NULL;
    return o;
}

static int count_taints(const json_t *node, const char *key)
{
    int n = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t) {
        const char *k = json_string_value(json_object_get(t, "key"));
        if (k && strcmp(k, key) == 0)
            n++;
    }
    return n;
}

static const char *ann(const json_t *o, const char *k)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "annotations"), k));
}

static void test_isolate_release(void **state)
{
    struct env *e = *state;
    struct gh_act_result r;
    struct gh_err err = {{0}};
    assert_int_equal(gh_act_isolate_node(&e->x, e->node, false, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    json_t *n = get(e, &gh_kube_res_nodes, NULL, e->node);
    assert_true(json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable")));
    assert_int_equal(count_taints(n, GH_TAINT_KEY), 1);
    assert_int_equal(count_taints(n, "gpuheal.io/test-only"), 1);
    assert_string_equal(ann(n, GH_ANN_CORDONED_BY), e->x.incident);
    assert_non_null(ann(n, GH_ANN_ISOLATED_AT));
    json_decref(n);
    /* twice = once */
    assert_int_equal(gh_act_isolate_node(&e->x, e->node, false, &r, &err), 0);
    assert_string_equal(r.result, "noop");
    n = get(e, &gh_kube_res_nodes, NULL, e->node);
    assert_int_equal(count_taints(n, GH_TAINT_KEY), 1);
    json_decref(n);
    assert_int_equal(gh_act_release_node(&e->x, e->node, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    n = get(e, &gh_kube_res_nodes, NULL, e->node);
    assert_false(json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable")));
    assert_int_equal(count_taints(n, GH_TAINT_KEY), 0);
    assert_int_equal(count_taints(n, "gpuheal.io/test-only"), 1); /* not ours: kept */
    json_decref(n);
    assert_int_equal(gh_act_release_node(&e->x, e->node, &r, &err), 0);
    assert_string_equal(r.result, "noop");

    /* node2 was cordoned by someone else: gpuheal taints it but never claims
     * nor undoes that cordon */
    assert_int_equal(gh_act_isolate_node(&e->x, e->node2, false, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "someone else"));
    n = get(e, &gh_kube_res_nodes, NULL, e->node2);
    assert_null(ann(n, GH_ANN_CORDONED_BY));
    json_decref(n);
    assert_int_equal(gh_act_release_node(&e->x, e->node2, &r, &err), 0);
    n = get(e, &gh_kube_res_nodes, NULL, e->node2);
    assert_true(json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable")));
    assert_int_equal(count_taints(n, GH_TAINT_KEY), 0);
    json_decref(n);
}

static void make_pod(struct env *e, const char *name, const char *job, const char *node)
{
    json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}], s:[{s:s}]}}",
                            "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "labels",
                            "batch.kubernetes.io/job-name", job, "spec", "containers", "name",
                            "main", "image", "trainer:latest", "tolerations", "operator",
                            "Exists");
    if (node)
        json_object_set_new(json_object_get(pod, "spec"), "nodeName", json_string(node));
    struct gh_kube_ref ref = {&gh_kube_res_pods, e->ns, NULL};
    struct gh_err err;
    int rc = gh_kube_create(e->c, &ref, pod, NULL, NULL, &err);
    json_decref(pod);
    if (rc)
        fail_msg("pod %s: %s", name, err.msg);
}

static void test_drain(void **state)
{
    struct env *e = *state;
    make_pod(e, "d1", "none", e->node);
    make_pod(e, "d2", "none", e->node);
    struct gh_act_result r;
    struct gh_err err = {{0}};
    struct gh_drain_opts o = {.concurrency = 2, .timeout_ns = 20LL * GH_NS_PER_S, .grace_s = 0};
    int rc = gh_act_drain_node(&e->x, e->node, &o, &r, &err);
    if (rc)
        fail_msg("drain: %s / %s", err.msg, r.detail);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "evicted 2 pods"));
    /* evicted pods are deleted (or terminating) */
    for (const char *p = "d1"; p; p = strcmp(p, "d1") == 0 ? "d2" : NULL) {
        json_t *o2 = get(e, &gh_kube_res_pods, e->ns, p);
        assert_true(!o2 || json_object_get(json_object_get(o2, "metadata"), "deletionTimestamp"));
        json_decref(o2);
    }
}

/* A PodDisruptionBudget that allows no disruption keeps its pod: the drain
 * retries until its timeout and says so; without the budget it goes. */
static void test_drain_pdb(void **state)
{
    struct env *e = *state;
    json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}], s:[{s:s}]}}",
                            "apiVersion", "v1", "kind", "Pod", "metadata", "name", "guarded",
                            "labels", "app", "guarded", "spec", "nodeName", e->node, "containers",
                            "name", "main", "image", "trainer:latest", "tolerations", "operator",
                            "Exists");
    struct gh_kube_ref pods = {&gh_kube_res_pods, e->ns, NULL};
    struct gh_err err = {{0}};
    if (gh_kube_create(e->c, &pods, pod, NULL, NULL, &err))
        fail_msg("pod: %s", err.msg);
    json_decref(pod);
    /* the kubelet's part: running and ready */
    json_t *sp = json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "status", "phase", "Running", "conditions",
                           "type", "Ready", "status", "True");
    struct gh_kube_ref pref = {&gh_kube_res_pods, e->ns, "guarded"};
    if (gh_kube_patch(e->c, &pref, "status", GH_KUBE_PATCH_MERGE, sp, NULL, NULL, &err))
        fail_msg("pod status: %s", err.msg);
    json_decref(sp);
    json_t *pdb = json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}}}}", "apiVersion", "policy/v1",
                            "kind", "PodDisruptionBudget", "metadata", "name", "guard", "spec",
                            "minAvailable", 1, "selector", "matchLabels", "app", "guarded");
    struct gh_kube_ref pdbs = {&gh_kube_res_pdbs, e->ns, NULL};
    if (gh_kube_create(e->c, &pdbs, pdb, NULL, NULL, &err))
        fail_msg("pdb: %s", err.msg);
    json_decref(pdb);
    /* until the disruption controller has counted the pod */
    bool settled = false;
    for (int i = 0; i < 300 && !settled; i++) {
        json_t *p = get(e, &gh_kube_res_pdbs, e->ns, "guard");
        json_t *st = json_object_get(p, "status");
        settled = json_integer_value(json_object_get(st, "observedGeneration")) ==
                      json_integer_value(json_object_get(json_object_get(p, "metadata"),
                                                         "generation")) &&
                  json_integer_value(json_object_get(st, "currentHealthy")) == 1;
        json_decref(p);
        if (!settled)
            usleep(100000);
    }
    assert_true(settled);
    struct gh_act_result r;
    struct gh_drain_opts o = {.concurrency = 2, .timeout_ns = 3LL * GH_NS_PER_S, .grace_s = 0};
    assert_int_equal(gh_act_drain_node(&e->x, e->node, &o, &r, &err), GH_EAGAIN);
    assert_string_equal(r.result, "failed");
    assert_non_null(strstr(r.detail, "kept by a PodDisruptionBudget"));
    json_t *still = get(e, &gh_kube_res_pods, e->ns, "guarded");
    assert_non_null(still);
    assert_null(json_object_get(json_object_get(still, "metadata"), "deletionTimestamp"));
    json_decref(still);
    struct gh_kube_ref gref = {&gh_kube_res_pdbs, e->ns, "guard"};
    assert_int_equal(gh_kube_delete(e->c, &gref, NULL, NULL, &err), 0);
    o.timeout_ns = 20LL * GH_NS_PER_S;
    int rc = gh_act_drain_node(&e->x, e->node, &o, &r, &err);
    if (rc)
        fail_msg("drain without the budget: %s", r.detail);
    assert_string_equal(r.result, "succeeded");
}

static void test_request_and_validation(void **state)
{
    struct env *e = *state;
    struct gh_act_result r;
    struct gh_err err = {{0}};
    int rc = gh_act_request_node_op(&e->x, e->node, "reboot_node", 3, NULL, &r, &err);
    if (rc)
        fail_msg("request: %s (%s)", err.msg, r.api);
    /* handed to the agent: not done until it answers */
    assert_string_equal(r.result, "requested");
    assert_int_equal(gh_act_request_node_op(&e->x, e->node, "reboot_node", 3, NULL, &r, &err), 0);
    assert_string_equal(r.result, "requested");
    json_t *g = get(e, &gh_kube_res_gpunodehealths, NULL, e->node);
    assert_non_null(g);
    const char *req = ann(g, "gpuheal.io/request-reboot_node");
    assert_non_null(req);
    assert_non_null(strstr(req, "\"gpu\":3"));
    json_t *la = json_object_get(json_object_get(g, "status"), "lastAction");
    assert_string_equal(json_string_value(json_object_get(la, "result")), "Pending");
    assert_false(gh_act_validation_passed(g, 0));
    char res[16], detail[600];
    json_decref(g);
    /* no answer yet; then the agent's interim RebootPending, then its
     * NotConfigured for another request id (not this one), then its answer */
    static const char *const answers[][4] = {
        {"Unknown", "RebootPending", ": reboot command exited 0; waiting", ""},
        {"False", "NotConfigured", "other/reboot_node: no --reboot-cmd", ""},
        {"False", "NotConfigured", ": no --reboot-cmd configured", "not_configured"},
        {"False", "Interrupted", ": the agent was killed while it ran", "interrupted"},
        {"False", "TimedOut", ": killed after 20s", "failed"},
        {"True", "Succeeded", ": exit 0: rebooting", "succeeded"},
    };
    char rid[128];
    snprintf(rid, sizeof rid, "%s/reboot_node", e->x.incident);
    g = get(e, &gh_kube_res_gpunodehealths, NULL, e->node);
    assert_false(
        gh_act_request_outcome(g, "reboot_node", rid, res, sizeof res, detail, sizeof detail));
    json_decref(g);
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        char msg[256];
        /* "request ID: detail" (another request's id when the text names one) */
        if (answers[i][2][0] == ':')
            snprintf(msg, sizeof msg, "request %s%s", rid, answers[i][2]);
        else
            snprintf(msg, sizeof msg, "request %s", answers[i][2]);
        json_t *cp = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status", "conditions",
                               "type", "Request-reboot_node", "status", answers[i][0], "reason",
                               answers[i][1], "message", msg, "lastTransitionTime",
                               "2030-01-01T00:00:00Z");
        struct gh_kube_ref cref = {&gh_kube_res_gpunodehealths, NULL, e->node};
        assert_int_equal(gh_kube_patch(e->c, &cref, "status", GH_KUBE_PATCH_MERGE, cp, NULL, NULL,
                                       &err), 0);
        json_decref(cp);
        g = get(e, &gh_kube_res_gpunodehealths, NULL, e->node);
        bool have = gh_act_request_outcome(g, "reboot_node", rid, res, sizeof res, detail,
                                           sizeof detail);
        json_decref(g);
        assert_int_equal(have, answers[i][3][0] != '\0');
        if (have) {
            assert_string_equal(res, answers[i][3]);
            char want[300];
            snprintf(want, sizeof want, "agent: %s: %s", answers[i][1], msg);
            assert_string_equal(detail, want);
        }
    }
    /* the agent reports a passing validation probe */
    json_t *sp = json_pack("{s:{s:[{s:s, s:s, s:s, s:s}]}}", "status", "conditions", "type",
                           "Validated", "status", "True", "lastTransitionTime",
                           "2030-01-01T00:00:00Z", "reason", "ProbePassed");
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, e->node};
    assert_int_equal(gh_kube_patch(e->c, &ref, "status", GH_KUBE_PATCH_MERGE, sp, NULL, NULL, &err),
                     0);
    json_decref(sp);
    g = get(e, &gh_kube_res_gpunodehealths, NULL, e->node);
    assert_true(gh_act_validation_passed(g, 1800000000LL * GH_NS_PER_S));
    assert_false(gh_act_validation_passed(g, 1900000000LL * GH_NS_PER_S)); /* stale */
    json_decref(g);
}

static void set_failed(struct env *e, const char *name)
{
    json_t *sp = json_pack("{s:{s:s, s:[{s:s, s:{s:{s:i, s:s}}}]}}", "status", "phase", "Failed",
                           "containerStatuses", "name", "main", "state", "terminated", "exitCode",
                           1, "reason", "Error");
    struct gh_kube_ref ref = {&gh_kube_res_pods, e->ns, name};
    struct gh_err err;
    json_t *o = json_object_get(sp, "status");
    json_t *cs = json_array_get(json_object_get(o, "containerStatuses"), 0);
    json_object_set_new(cs, "image", json_string("trainer:latest"));
    json_object_set_new(cs, "imageID", json_string(""));
    json_object_set_new(cs, "ready", json_false());
    json_object_set_new(cs, "restartCount", json_integer(0));
    int rc = gh_kube_patch(e->c, &ref, "status", GH_KUBE_PATCH_MERGE, sp, NULL, NULL, &err);
    json_decref(sp);
    if (rc)
        fail_msg("status %s: %s", name, err.msg);
}

static void test_retry_in_place(void **state)
{
    struct env *e = *state;
    /* pods on a node no kubelet serves, so that nothing but us changes them */
    make_pod(e, "r1", "trainer", "nowhere");
    make_pod(e, "r2", "trainer", "nowhere");
    set_failed(e, "r1");
    struct gh_act_result r;
    struct gh_err err = {{0}};
    char named[128];
    snprintf(named, sizeof named, "%s/r1", e->ns);
    const char *pods[] = {named};
    assert_int_equal(gh_act_retry_in_place(&e->x, e->ns, "trainer", pods, 1, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "deleted 1 failed pod (r1)"));
    json_t *p2 = get(e, &gh_kube_res_pods, e->ns, "r2");
    assert_non_null(p2); /* running pods are left alone */
    json_decref(p2);
    assert_int_equal(gh_act_retry_in_place(&e->x, e->ns, "trainer", pods, 1, &r, &err), 0);
    assert_true(strcmp(r.result, "noop") == 0 || strcmp(r.result, "succeeded") == 0);
}

/* A suspended Indexed Job; prefix (NULL: none) its declared
 * gpuheal.io/checkpoint-prefix. */
static void make_job(struct env *e, const char *name, const char *prefix)
{
    json_t *job = json_pack(
        "{s:s, s:s, s:{s:s}, s:{s:b, s:i, s:i, s:s, s:{s:{s:s, s:[{s:s, s:s}]}}}}", "apiVersion",
        "batch/v1", "kind", "Job", "metadata", "name", name, "spec", "suspend", 1, "completions",
        2, "parallelism", 2, "completionMode", "Indexed", "template", "spec", "restartPolicy",
        "Never", "containers", "name", "main", "image", "trainer:latest");
    if (prefix)
        json_object_set_new(json_object_get(job, "metadata"), "annotations",
                            json_pack("{s:s}", GH_ANN_CHECKPOINT_PREFIX, prefix));
    struct gh_kube_ref ref = {&gh_kube_res_jobs, e->ns, NULL};
    struct gh_err err;
    int rc = gh_kube_create(e->c, &ref, job, NULL, NULL, &err);
    json_decref(job);
    if (rc)
        fail_msg("job: %s", err.msg);
}

static void test_restart_from_checkpoint(void **state)
{
    struct env *e = *state;
    make_job(e, "llm", "s3://ckpt/llm/");
    json_t *old = get(e, &gh_kube_res_jobs, e->ns, "llm");
    char olduid[64];
    snprintf(olduid, sizeof olduid, "%s", gh_kube_meta_uid(old));
    json_decref(old);
    struct gh_act_result r;
    struct gh_err err = {{0}};
    const char *avoid[] = {e->node};
    json_t *pl = NULL;
    int rc = gh_act_restart_prepare(&e->x, e->ns, "llm", avoid, 1, 100, "s3://ckpt/llm/100", &pl,
                                    &r, &err);
    if (rc)
        fail_msg("prepare: %s", err.msg);
    assert_int_equal(gh_act_restart_execute(&e->x, pl, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "resume from step 100"));
    json_t *nj = get(e, &gh_kube_res_jobs, e->ns, "llm");
    assert_non_null(nj);
    assert_string_not_equal(gh_kube_meta_uid(nj), olduid);
    assert_string_equal(ann(nj, GH_ANN_RESTARTED_FOR), e->x.incident);
    assert_string_equal(ann(nj, GH_ANN_RESTART_COUNT), "1");
    assert_string_equal(ann(nj, GH_ANN_AVOID_NODES), e->node);
    char *text = json_dumps(nj, JSON_COMPACT);
    assert_non_null(strstr(text, "\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
                                 "\"NotIn\",\"values\":[\""));
    assert_non_null(strstr(text, "\"gpuheal.io/resume-step\":\"100\""));
    assert_non_null(strstr(text, "\"completionMode\":\"Indexed\""));
    free(text);
    char newuid[64];
    snprintf(newuid, sizeof newuid, "%s", gh_kube_meta_uid(nj));
    json_decref(nj);
    json_t *cm = get(e, &gh_kube_res_configmaps, e->ns, "llm-gpuheal-resume");
    assert_non_null(cm);
    json_t *data = json_object_get(cm, "data");
    assert_string_equal(json_string_value(json_object_get(data, "step")), "100");
    assert_string_equal(json_string_value(json_object_get(data, "path")), "s3://ckpt/llm/100");
    json_decref(cm);
    /* run again (a controller restarted after acting): nothing changes */
    assert_int_equal(gh_act_restart_execute(&e->x, pl, &r, &err), 0);
    assert_string_equal(r.result, "noop");
    nj = get(e, &gh_kube_res_jobs, e->ns, "llm");
    assert_string_equal(gh_kube_meta_uid(nj), newuid);
    json_decref(nj);
    json_decref(pl);

    /* a second restart avoids both nodes; a crash between delete and
     * create: execute finds no Job and creates the replacement */
    const char *avoid2[] = {e->node2};
    e->x.incident = "inc-00000000000000a2";
    assert_int_equal(gh_act_restart_prepare(&e->x, e->ns, "llm", avoid2, 1, -1, NULL, &pl, &r,
                                            &err), 0);
    struct gh_kube_ref jref = {&gh_kube_res_jobs, e->ns, "llm"};
    struct gh_kube_delete_opts d = {.grace_period_s = -1, .propagation = "Background"};
    assert_int_equal(gh_kube_delete(e->c, &jref, &d, NULL, &err), 0);
    rc = gh_act_restart_execute(&e->x, pl, &r, &err);
    if (rc)
        fail_msg("execute after a crash: %s (%s; %s)", err.msg, r.detail, r.api);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "no checkpoint"));
    nj = get(e, &gh_kube_res_jobs, e->ns, "llm");
    char expect[200];
    snprintf(expect, sizeof expect, "%s,%s", e->node, e->node2);
    assert_string_equal(ann(nj, GH_ANN_AVOID_NODES), expect);
    assert_string_equal(ann(nj, GH_ANN_RESTART_COUNT), "2");
    json_decref(nj);
    cm = get(e, &gh_kube_res_configmaps, e->ns, "llm-gpuheal-resume");
    assert_null(json_object_get(json_object_get(cm, "data"), "step")); /* start over */
    json_decref(cm);
    json_decref(pl);
    e->x.incident = "inc-00000000000000a1";
}

static json_t *cm_data(struct env *e, const char *name)
{
    char cm[300];
    snprintf(cm, sizeof cm, "%s-gpuheal-resume", name);
    json_t *o = get(e, &gh_kube_res_configmaps, e->ns, cm);
    assert_non_null(o);
    json_t *d = json_incref(json_object_get(o, "data"));
    json_decref(o);
    return d;
}

/* issue 24 #1: the resume carries a path only under the job's declared
 * gpuheal.io/checkpoint-prefix: a path elsewhere, a job that declares none
 * and a plan prepared before paths were checked all resume by step alone,
 * with path-withheld saying why and no resume-path in the pod template */
static void test_restart_path_withheld(void **state)
{
    struct env *e = *state;
    struct gh_act_result r;
    struct gh_err err = {{0}};
    json_t *pl = NULL, *d;
    const char *avoid[] = {e->node};
    e->x.incident = "inc-00000000000000b1";

    make_job(e, "pw1", "s3://ckpt/pw1");
    assert_int_equal(gh_act_restart_prepare(&e->x, e->ns, "pw1", avoid, 1, 300,
                                            "s3://ckpt/pw1-evil/300", &pl, &r, &err), 0);
    assert_int_equal(gh_act_restart_execute(&e->x, pl, &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    assert_non_null(strstr(r.detail, "resume from step 300, no path: \"s3://ckpt/pw1-evil/300\" "
                                     "is not under gpuheal.io/checkpoint-prefix \"s3://ckpt/pw1\""));
    d = cm_data(e, "pw1");
    assert_string_equal(json_string_value(json_object_get(d, "step")), "300");
    assert_null(json_object_get(d, "path"));
    assert_non_null(strstr(json_string_value(json_object_get(d, "path-withheld")), "is not under"));
    json_decref(d);
    json_t *nj = get(e, &gh_kube_res_jobs, e->ns, "pw1");
    char *text = json_dumps(nj, JSON_COMPACT);
    assert_non_null(strstr(text, "\"gpuheal.io/resume-step\":\"300\""));
    assert_null(strstr(text, "resume-path"));
    free(text);
    json_decref(nj);
    json_decref(pl);

    e->x.incident = "inc-00000000000000b2";
    make_job(e, "pw2", NULL);
    assert_int_equal(gh_act_restart_prepare(&e->x, e->ns, "pw2", avoid, 1, 7, "s3://ckpt/pw2/7",
                                            &pl, &r, &err), 0);
    assert_int_equal(gh_act_restart_execute(&e->x, pl, &r, &err), 0);
    d = cm_data(e, "pw2");
    assert_string_equal(json_string_value(json_object_get(d, "step")), "7");
    assert_null(json_object_get(d, "path"));
    assert_string_equal(json_string_value(json_object_get(d, "path-withheld")),
                        "the job declares no gpuheal.io/checkpoint-prefix");
    json_decref(d);
    json_decref(pl);

    /* a plan of an older controller: "path" without "path_withheld", its
     * job declaring no prefix */
    e->x.incident = "inc-00000000000000b3";
    make_job(e, "pw3", "s3://ckpt/pw3/");
    assert_int_equal(gh_act_restart_prepare(&e->x, e->ns, "pw3", avoid, 1, 9, "s3://ckpt/pw3/9",
                                            &pl, &r, &err), 0);
    assert_string_equal(json_string_value(json_object_get(pl, "path")), "s3://ckpt/pw3/9");
    json_object_del(json_object_get(json_object_get(json_object_get(pl, "job"), "metadata"),
                                    "annotations"),
                    GH_ANN_CHECKPOINT_PREFIX);
    assert_int_equal(gh_act_restart_execute(&e->x, pl, &r, &err), 0);
    d = cm_data(e, "pw3");
    assert_null(json_object_get(d, "path"));
    assert_non_null(json_object_get(d, "path-withheld"));
    json_decref(d);
    nj = get(e, &gh_kube_res_jobs, e->ns, "pw3");
    text = json_dumps(nj, JSON_COMPACT);
    assert_null(strstr(text, "resume-path"));
    free(text);
    json_decref(nj);
    json_decref(pl);
    e->x.incident = "inc-00000000000000a1";
}

static void test_replace(void **state)
{
    struct env *e = *state;
    struct gh_act_result r;
    struct gh_err err = {{0}};
    assert_int_equal(gh_act_replace_node(&e->x, e->node2, "XID 79 twice in 7 days", &r, &err), 0);
    assert_string_equal(r.result, "succeeded");
    assert_int_equal(gh_act_replace_node(&e->x, e->node2, "XID 79 twice in 7 days", &r, &err), 0);
    assert_string_equal(r.result, "noop");
    json_t *n = get(e, &gh_kube_res_nodes, NULL, e->node2);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(n, "metadata"), "labels"),
                            GH_LABEL_REPLACE)),
                        "true");
    json_decref(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isolate_release),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_drain_pdb),
        cmocka_unit_test(test_request_and_validation),
        cmocka_unit_test(test_retry_in_place),
        cmocka_unit_test(test_restart_from_checkpoint),
        cmocka_unit_test(test_restart_path_withheld),
        cmocka_unit_test(test_replace),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
