/* test_control_signals.c - Pod and Node changes as kube signals: a failed
 * pod (with its container's exit code and message), a container restarted
 * after an error, a pod that started or ran to completion, a training job
 * whose Complete/Failed condition became True, a node going NotReady and back,
 * the Node conditions other agents set (node-problem-detector's) as they
 * change, and the --node-conditions list; ids
 * that make a repeat a duplicate; the job a pod belongs to; the Node labels
 * mirrored into the engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "common/timeutil.h"
#include "control/kube_signals.h"
#include "signal/signal_json.h"

static json_t *pod(const char *phase, int restarts, int last_exit)
{
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}, s:{s:s, s:s}}", "metadata",
                          "name", "llm-3", "namespace", "ml", "uid", "u-1", "labels",
                          "batch.kubernetes.io/job-name", "llm", "spec", "nodeName", "gpu-17",
                          "status", "phase", phase, "startTime", "2026-11-29T07:00:00Z");
    json_t *cs = json_pack("{s:s, s:i}", "name", "main", "restartCount", restarts);
    if (last_exit >= 0)
        json_object_set_new(cs, "lastState",
                            json_pack("{s:{s:i, s:s, s:s, s:s}}", "terminated", "exitCode",
                                      last_exit, "reason", last_exit == 137 ? "OOMKilled" : "Error",
                                      "finishedAt", "2026-11-29T07:05:00Z", "message",
                                      "Traceback: ValueError"));
    json_object_set_new(json_object_get(p, "status"), "containerStatuses", json_pack("[o]", cs));
    return p;
}

static void test_job_name(void **st)
{
    (void)st;
    json_t *p = pod("Running", 0, -1);
    char buf[100];
    assert_string_equal(gh_kube_pod_job(p, buf, sizeof buf), "ml/llm");
    json_object_del(json_object_get(json_object_get(p, "metadata"), "labels"),
                    "batch.kubernetes.io/job-name");
    assert_null(gh_kube_pod_job(p, buf, sizeof buf));
    json_decref(p);
}

static void test_pod_lifecycle(void **st)
{
    (void)st;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    json_t *pending = pod("Pending", 0, -1), *running = pod("Running", 0, -1);
    assert_int_equal(gh_kube_pod_signals(pending, pending, 1, s, 8), 0);
    assert_int_equal(gh_kube_pod_signals(pending, running, 1, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_STARTED);
    assert_string_equal(s[0].job, "ml/llm");
    assert_string_equal(s[0].node, "gpu-17");
    assert_string_equal(s[0].id, "kube:pod:u-1:started");
    gh_signal_clear(&s[0]);
    /* a resync (same state) says nothing */
    assert_int_equal(gh_kube_pod_signals(running, running, 1, s, 8), 0);

    /* a restart after an error */
    json_t *restarted = pod("Running", 1, 1);
    assert_int_equal(gh_kube_pod_signals(running, restarted, 1, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_FAILED);
    assert_int_equal(s[0].exit_code, 1);
    assert_string_equal(s[0].reason, "Error");
    assert_string_equal(s[0].msg, "Traceback: ValueError");
    assert_string_equal(s[0].namespace_, "ml");
    assert_string_equal(s[0].pod, "llm-3");
    assert_string_equal(s[0].id, "kube:pod:u-1:main:1");
    gh_signal_clear(&s[0]);

    /* failed for good: OOMKilled */
    json_t *failed = pod("Failed", 1, 137);
    assert_int_equal(gh_kube_pod_signals(restarted, failed, 1, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_FAILED);
    assert_string_equal(s[0].reason, "OOMKilled");
    assert_int_equal(s[0].exit_code, 137);
    assert_string_equal(s[0].id, "kube:pod:u-1:failed");
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_pod_signals(failed, failed, 1, s, 8), 0);
    /* first sight of a failed pod (a relist) */
    assert_int_equal(gh_kube_pod_signals(NULL, failed, 1, s, 8), 1);
    gh_signal_clear(&s[0]);
    /* killed because it is being deleted (namespace deleted, drain, job
     * restarted): no failure, neither for good nor as a restart */
    json_t *deleting = pod("Failed", 1, 143);
    json_object_set_new(json_object_get(deleting, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T07:06:00Z"));
    assert_int_equal(gh_kube_pod_signals(running, deleting, 1, s, 8), 0);
    json_t *deleting_restart = pod("Running", 1, 143);
    json_object_set_new(json_object_get(deleting_restart, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T07:06:00Z"));
    assert_int_equal(gh_kube_pod_signals(running, deleting_restart, 1, s, 8), 0);
    /* restarted in place by a RestartAllContainers rule (the kubelet's
     * reason for each container it restarted): no failure (issue 25) */
    json_t *in_place = pod("Running", 1, 137);
    json_object_set_new(
        json_object_get(
            json_object_get(
                json_array_get(
                    json_object_get(json_object_get(in_place, "status"), "containerStatuses"), 0),
                "lastState"),
            "terminated"),
        "reason", json_string("RestartingAllContainers"));
    assert_int_equal(gh_kube_pod_signals(running, in_place, 1, s, 8), 0);
    json_decref(in_place);
    json_decref(deleting);
    json_decref(deleting_restart);
    json_decref(pending);
    json_decref(running);
    json_decref(restarted);
    json_decref(failed);
}

static void test_pod_succeeded(void **st)
{
    (void)st;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    json_t *running = pod("Running", 0, -1), *done = pod("Succeeded", 0, -1);
    json_t *cs = json_array_get(json_object_get(json_object_get(done, "status"), "containerStatuses"), 0);
    json_object_set_new(cs, "state",
                        json_pack("{s:{s:i, s:s}}", "terminated", "exitCode", 0, "finishedAt",
                                  "2026-11-29T09:00:00Z"));
    assert_int_equal(gh_kube_pod_signals(running, done, 1, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_SUCCEEDED);
    assert_string_equal(s[0].job, "ml/llm");
    assert_string_equal(s[0].node, "gpu-17");
    assert_string_equal(s[0].pod, "llm-3");
    assert_string_equal(s[0].id, "kube:pod:u-1:succeeded");
    int64_t t;
    assert_true(gh_time_parse_rfc3339("2026-11-29T09:00:00Z", 20, &t));
    assert_int_equal(s[0].ts_ns, t); /* when the container finished */
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_pod_signals(done, done, 1, s, 8), 0); /* a resync */
    json_decref(running);
    json_decref(done);
}

/* A node that refuses pods (issue 25 section 4): the kubelet's admission
 * (phase Failed, the pod's own reason and message, no container ran) and a
 * container the runtime cannot create (Pending, waiting in
 * CreateContainerError: once per reason and restart, with its message). */
static void test_pod_refused(void **st)
{
    (void)st;
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    json_t *pending = pod("Pending", 0, -1);
    json_t *admission = json_pack(
        "{s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}, s:{s:s, s:s, s:s}}", "metadata", "name", "llm-4",
        "namespace", "ml", "uid", "u-2", "labels", "batch.kubernetes.io/job-name", "llm", "spec",
        "nodeName", "gpu-17", "status", "phase", "Failed", "reason", "UnexpectedAdmissionError",
        "message",
        "Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 1, Available: 0, which is unexpected");
    assert_int_equal(gh_kube_pod_signals(NULL, admission, 7, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_FAILED);
    assert_string_equal(s[0].reason, "UnexpectedAdmissionError");
    assert_string_equal(s[0].job, "ml/llm");
    assert_string_equal(s[0].node, "gpu-17");
    assert_non_null(strstr(s[0].msg, "requested number of devices unavailable"));
    assert_false(s[0].has_exit_code);
    assert_string_equal(s[0].id, "kube:pod:u-2:failed");
    gh_signal_clear(&s[0]);

    json_t *creating = pod("Pending", 0, -1);
    json_t *cs = json_array_get(
        json_object_get(json_object_get(creating, "status"), "containerStatuses"), 0);
    json_object_set_new(cs, "state",
                        json_pack("{s:{s:s, s:s}}", "waiting", "reason", "CreateContainerError",
                                  "message", "context deadline exceeded"));
    assert_int_equal(gh_kube_pod_signals(pending, creating, 9, s, 8), 1);
    assert_int_equal(s[0].kind, GH_KIND_POD_FAILED);
    assert_string_equal(s[0].reason, "CreateContainerError");
    assert_string_equal(s[0].msg, "context deadline exceeded");
    assert_string_equal(s[0].id, "kube:pod:u-1:main:waiting:CreateContainerError:0");
    assert_int_equal(s[0].ts_ns, 9);
    gh_signal_clear(&s[0]);
    /* the pod as created, before the kubelet wrote any container status */
    json_t *bare = pod("Pending", 0, -1);
    json_object_del(json_object_get(bare, "status"), "containerStatuses");
    assert_int_equal(gh_kube_pod_signals(bare, creating, 9, s, 8), 1);
    assert_string_equal(s[0].reason, "CreateContainerError");
    gh_signal_clear(&s[0]);
    json_decref(bare);
    /* the kubelet retrying with the same reason: nothing new */
    assert_int_equal(gh_kube_pod_signals(creating, creating, 10, s, 8), 0);
    /* first sight of a pod already stuck: it is evidence now */
    assert_int_equal(gh_kube_pod_signals(NULL, creating, 11, s, 8), 1);
    gh_signal_clear(&s[0]);
    /* a start that failed (exit code 128, restarted): the restart's signal
     * only, not a second one for its waiting RunContainerError */
    json_t *started = pod("Pending", 1, 128);
    cs = json_array_get(json_object_get(json_object_get(started, "status"), "containerStatuses"),
                        0);
    json_object_set_new(cs, "state",
                        json_pack("{s:{s:s}}", "waiting", "reason", "RunContainerError"));
    assert_int_equal(gh_kube_pod_signals(creating, started, 12, s, 8), 1);
    assert_int_equal(s[0].exit_code, 128);
    gh_signal_clear(&s[0]);
    /* being deleted: no failure of the node's */
    json_object_set_new(json_object_get(creating, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T07:06:00Z"));
    assert_int_equal(gh_kube_pod_signals(pending, creating, 13, s, 8), 0);
    json_decref(pending);
    json_decref(admission);
    json_decref(creating);
    json_decref(started);
}

static json_t *job_obj(const char *cond, const char *status)
{
    json_t *j = json_pack("{s:{s:s, s:s, s:s}, s:{}}", "metadata", "name", "llm", "namespace",
                          "ml", "uid", "j-1", "status");
    if (cond)
        json_object_set_new(json_object_get(j, "status"), "conditions",
                            json_pack("[{s:s, s:s, s:s, s:s}]", "type", cond, "status", status,
                                      "lastTransitionTime", "2026-11-29T10:00:00Z", "reason",
                                      "BackoffLimitExceeded"));
    return j;
}

static void test_job_finished(void **st)
{
    (void)st;
    struct gh_signal s;
    json_t *run = job_obj(NULL, NULL), *susp = job_obj("Suspended", "True"),
           *notyet = job_obj("Complete", "False"), *ok = job_obj("Complete", "True"),
           *bad = job_obj("Failed", "True"), *set = job_obj("Completed", "True");
    assert_int_equal(gh_kube_job_signals(NULL, run, "ml/llm", 1, &s, 1), 0);
    assert_int_equal(gh_kube_job_signals(run, susp, "ml/llm", 1, &s, 1), 0);
    assert_int_equal(gh_kube_job_signals(run, notyet, "ml/llm", 1, &s, 1), 0);
    assert_int_equal(gh_kube_job_signals(run, ok, "ml/llm", 1, &s, 1), 1);
    assert_int_equal(s.kind, GH_KIND_JOB_FINISHED);
    assert_int_equal(s.source, GH_SRC_KUBE);
    assert_int_equal(s.job_state, GH_JOB_COMPLETE);
    assert_string_equal(s.job, "ml/llm");
    assert_string_equal(s.id, "kube:job:j-1:finished");
    assert_null(s.node);
    gh_signal_clear(&s);
    assert_int_equal(gh_kube_job_signals(ok, ok, "ml/llm", 1, &s, 1), 0); /* a resync */
    assert_int_equal(gh_kube_job_signals(run, bad, "ml/llm", 1, &s, 1), 1);
    assert_int_equal(s.job_state, GH_JOB_FAILED);
    gh_signal_clear(&s);
    assert_int_equal(gh_kube_job_signals(NULL, set, "ml/llm", 1, &s, 1), 1); /* a JobSet */
    assert_int_equal(s.job_state, GH_JOB_COMPLETE);
    gh_signal_clear(&s);
    json_decref(run);
    json_decref(susp);
    json_decref(notyet);
    json_decref(ok);
    json_decref(bad);
    json_decref(set);
}

static json_t *node(const char *ready, const char *when)
{
    return json_pack("{s:{s:s, s:s}, s:{s:[{s:s, s:s, s:s}]}}", "metadata", "name", "gpu-17",
                     "uid", "n-1", "status", "conditions", "type", "Ready", "status", ready,
                     "lastTransitionTime", when);
}

static void test_node_ready(void **st)
{
    (void)st;
    struct gh_signal s[1];
    json_t *up = node("True", "2026-11-29T07:00:00Z");
    json_t *down = node("Unknown", "2026-11-29T07:10:00Z");
    json_t *back = node("True", "2026-11-29T07:20:00Z");
    assert_int_equal(gh_kube_node_signals(NULL, up, 1, s, 1), 0);
    assert_int_equal(gh_kube_node_signals(up, down, 1, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_NOT_READY);
    assert_string_equal(s[0].node, "gpu-17");
    assert_true(s[0].ts_ns > 1000);
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_node_signals(down, down, 1, s, 1), 0);
    assert_int_equal(gh_kube_node_signals(down, back, 1, s, 1), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_READY);
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_node_signals(NULL, down, 1, s, 1), 1);
    gh_signal_clear(&s[0]);
    json_decref(up);
    json_decref(down);
    json_decref(back);
}

/* A Node with Ready=True and conditions given as (type, status, reason,
 * lastTransitionTime) quadruples, NULL-terminated. */
static json_t *npd_node(const char *type, ...)
{
    json_t *conds = json_pack("[{s:s, s:s, s:s}]", "type", "Ready", "status", "True",
                              "lastTransitionTime", "2026-11-29T06:00:00Z");
    va_list ap;
    va_start(ap, type);
    for (const char *t = type; t; t = va_arg(ap, const char *)) {
        const char *st = va_arg(ap, const char *), *reason = va_arg(ap, const char *),
                   *when = va_arg(ap, const char *);
        json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", t, "status", st,
                                               "reason", reason, "message", "from NPD",
                                               "lastTransitionTime", when));
    }
    va_end(ap);
    return json_pack("{s:{s:s, s:s}, s:{s:o}}", "metadata", "name", "gpu-17", "uid", "n-1",
                     "status", "conditions", conds);
}

static void test_node_conditions(void **st)
{
    (void)st;
    struct gh_node_conditions w;
    struct gh_err err = {{0}};
    assert_int_equal(gh_node_conditions_parse(GH_NODE_CONDITIONS_DEFAULT, &w, &err), GH_OK);
    assert_int_equal(w.n, 7);
    assert_true(gh_node_conditions_has(&w, "KernelDeadlock"));
    assert_false(gh_node_conditions_has(&w, "GPUHealthy"));
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    const char *t0 = "2026-11-29T07:00:00Z", *t1 = "2026-11-29T07:10:00Z";
    json_t *ok = npd_node("KernelDeadlock", "False", "KernelHasNoDeadlock", t0,
                          "FrequentKubeletRestart", "False", "NoFrequentKubeletRestart", t0,
                          "GPUHealthy", "False", "XidCritical", t0, "Site/Other", "True", "X", t0,
                          NULL);
    json_t *bad = npd_node("KernelDeadlock", "True", "DockerHung", t1, "FrequentKubeletRestart",
                           "False", "NoFrequentKubeletRestart", t0, "GPUHealthy", "False",
                           "XidCritical", t0, "Site/Other", "True", "X", t0, NULL);
    /* first sight: only what is True and watched (NPD starts every condition
     * False; gpuheal's own GPUHealthy and an unwatched type are never read) */
    assert_int_equal(gh_kube_node_condition_signals(NULL, ok, &w, 1, s, GH_KUBE_SIGNALS_MAX), 0);
    /* a resync (the same object) is no news */
    assert_int_equal(gh_kube_node_condition_signals(ok, ok, &w, 1, s, GH_KUBE_SIGNALS_MAX), 0);
    assert_int_equal(gh_kube_node_condition_signals(ok, bad, &w, 1, s, GH_KUBE_SIGNALS_MAX), 1);
    assert_int_equal(s[0].kind, GH_KIND_NODE_CONDITION);
    assert_int_equal(s[0].source, GH_SRC_KUBE);
    assert_string_equal(s[0].node, "gpu-17");
    assert_string_equal(s[0].condition, "KernelDeadlock");
    assert_int_equal(s[0].cond_status, GH_COND_TRUE);
    assert_string_equal(s[0].reason, "DockerHung");
    assert_string_equal(s[0].msg, "KernelDeadlock=True (DockerHung): from NPD");
    assert_string_equal(s[0].id, "kube:node:n-1:cond:KernelDeadlock:True:2026-11-29T07:10:00Z");
    int64_t when;
    assert_true(gh_time_parse_rfc3339(t1, strlen(t1), &when));
    assert_int_equal(s[0].ts_ns, when);
    /* the same signal after a controller restart (first sight of bad): the
     * same id, a duplicate of what was decided */
    char id[128];
    snprintf(id, sizeof id, "%s", s[0].id);
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_node_condition_signals(NULL, bad, &w, 1, s, GH_KUBE_SIGNALS_MAX), 1);
    assert_string_equal(s[0].id, id);
    gh_signal_clear(&s[0]);
    assert_int_equal(gh_kube_node_condition_signals(bad, bad, &w, 1, s, GH_KUBE_SIGNALS_MAX), 0);
    /* cleared */
    assert_int_equal(gh_kube_node_condition_signals(bad, ok, &w, 1, s, GH_KUBE_SIGNALS_MAX), 1);
    assert_int_equal(s[0].cond_status, GH_COND_FALSE);
    assert_string_equal(s[0].reason, "KernelHasNoDeadlock");
    gh_signal_clear(&s[0]);
    /* removed while True: reported False */
    json_t *gone = npd_node(NULL);
    assert_int_equal(gh_kube_node_condition_signals(bad, gone, &w, 1, s, GH_KUBE_SIGNALS_MAX), 1);
    assert_int_equal(s[0].cond_status, GH_COND_FALSE);
    assert_string_equal(s[0].reason, "ConditionRemoved");
    gh_signal_clear(&s[0]);
    /* appearing False or Unknown is a check starting: nothing */
    assert_int_equal(gh_kube_node_condition_signals(gone, ok, &w, 1, s, GH_KUBE_SIGNALS_MAX), 0);
    /* a site's own condition, when asked for */
    assert_int_equal(gh_node_conditions_parse("Site/Other,KernelDeadlock,Site/Other", &w, &err),
                     GH_OK);
    assert_int_equal(w.n, 2);
    assert_int_equal(gh_kube_node_condition_signals(NULL, ok, &w, 1, s, GH_KUBE_SIGNALS_MAX), 1);
    assert_string_equal(s[0].condition, "Site/Other");
    gh_signal_clear(&s[0]);
    /* max bounds the output */
    assert_int_equal(gh_kube_node_condition_signals(NULL, bad, &w, 1, s, 1), 1);
    gh_signal_clear(&s[0]);
    json_decref(ok);
    json_decref(bad);
    json_decref(gone);

    /* a long message of multi-byte characters (kernel lines quoted by NPD):
     * cut at a whole character, so the signal still encodes (found by
     * fuzz_kube_signals: a sequence cut in half could not be journalled) */
    char longmsg[3001];
    for (int i = 0; i < 1500; i++)
        memcpy(longmsg + 2 * i, "\xc3\xa9", 2); /* U+00E9 */
    longmsg[3000] = '\0';
    assert_int_equal(gh_node_conditions_parse(GH_NODE_CONDITIONS_DEFAULT, &w, &err), GH_OK);
    json_t *wide = npd_node("KernelDeadlock", "True", "DockerHung", t1, NULL);
    json_object_set_new(json_array_get(json_object_get(json_object_get(wide, "status"), "conditions"), 1),
                        "message", json_string(longmsg));
    for (size_t pad = 0; pad < 2; pad++) {
        if (pad) /* shift the cut by one byte */
            json_object_set_new(json_array_get(json_object_get(json_object_get(wide, "status"),
                                                               "conditions"), 1),
                                "reason", json_string("DockerHungX"));
        assert_int_equal(gh_kube_node_condition_signals(NULL, wide, &w, 1, s, 1), 1);
        assert_true(gh_utf8_valid(s[0].msg, strlen(s[0].msg)));
        char *line = NULL;
        assert_int_equal(gh_signal_encode(&s[0], &line, &err), GH_OK);
        free(line);
        gh_signal_clear(&s[0]);
    }
    json_decref(wide);

    /* the list: never the kubelet's or gpuheal's own; names as Kubernetes takes them */
    assert_int_equal(gh_node_conditions_parse("KernelDeadlock,Ready", &w, &err), GH_EINVAL);
    assert_string_equal(err.msg, "--node-conditions: \"Ready\" is the kubelet's own condition, "
                                 "not another agent's finding");
    assert_int_equal(gh_node_conditions_parse("MemoryPressure", &w, &err), GH_EINVAL);
    assert_int_equal(gh_node_conditions_parse("GPUHealthy", &w, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "gpuheal's own"));
    assert_int_equal(gh_node_conditions_parse("KernelDeadlock,,X", &w, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "\"\" is not a Node condition type"));
    assert_int_equal(gh_node_conditions_parse("-bad", &w, &err), GH_EINVAL);
    assert_int_equal(gh_node_conditions_parse("none", &w, &err), GH_OK);
    assert_int_equal(w.n, 0);
    assert_int_equal(gh_node_conditions_parse("", &w, &err), GH_OK);
    assert_int_equal(w.n, 0);
}

/* The Node labels the engine reads: only the wanted keys, and a change
 * only when one of them appears, goes or takes another value. */
static bool rackish(const char *key) { return strstr(key, "rack") || strstr(key, "leaf"); }

static void test_node_labels(void **st)
{
    (void)st;
    json_t *a = json_pack("{s:{s:s, s:{s:s, s:s, s:s}}}", "metadata", "name", "gpu-01", "labels",
                          "example.com/rack", "r07", "kubernetes.io/hostname", "gpu-01",
                          "example.com/ib-leaf", "leaf-3");
    const char *k[GH_KUBE_NODE_LABELS_MAX], *v[GH_KUBE_NODE_LABELS_MAX];
    size_t n = gh_kube_node_labels(a, rackish, k, v, GH_KUBE_NODE_LABELS_MAX);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_true(!strcmp(k[i], "example.com/rack") ? !strcmp(v[i], "r07")
                                                      : !strcmp(v[i], "leaf-3"));
    assert_int_equal(gh_kube_node_labels(a, rackish, k, v, 1), 1);
    assert_true(gh_kube_node_labels_changed(NULL, a, rackish)); /* first sight */
    json_t *b = json_deep_copy(a);
    assert_false(gh_kube_node_labels_changed(a, b, rackish));
    /* a label the engine does not read changes: nothing to tell */
    json_object_set_new(json_object_get(json_object_get(b, "metadata"), "labels"),
                        "kubernetes.io/hostname", json_string("renamed"));
    assert_false(gh_kube_node_labels_changed(a, b, rackish));
    json_object_set_new(json_object_get(json_object_get(b, "metadata"), "labels"),
                        "example.com/rack", json_string("r08"));
    assert_true(gh_kube_node_labels_changed(a, b, rackish));
    json_object_del(json_object_get(json_object_get(b, "metadata"), "labels"), "example.com/rack");
    assert_true(gh_kube_node_labels_changed(a, b, rackish));
    assert_true(gh_kube_node_labels_changed(a, NULL, rackish)); /* deleted */
    json_t *bare = json_pack("{s:{s:s}}", "metadata", "name", "gpu-02");
    assert_false(gh_kube_node_labels_changed(NULL, bare, rackish));
    assert_int_equal(gh_kube_node_labels(bare, rackish, k, v, GH_KUBE_NODE_LABELS_MAX), 0);
    json_decref(a);
    json_decref(b);
    json_decref(bare);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_name),      cmocka_unit_test(test_pod_lifecycle),
        cmocka_unit_test(test_pod_succeeded), cmocka_unit_test(test_job_finished),
        cmocka_unit_test(test_node_ready),    cmocka_unit_test(test_node_conditions),
        cmocka_unit_test(test_node_labels),   cmocka_unit_test(test_pod_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
