/* test_engine_podhost.c - a Ready node that fails every pod (issue 25
 * section 4): pods of several jobs refused by one node at admission or
 * container creation isolate the node (rule node-rejects-pods), with every
 * refused pod in the evidence and no job restarted or blamed; one job's
 * pods never blame the node, however many; pods that fail for their own
 * image's fault are no refusal of the node's; a creation error that
 * shows on every node it reached is no node's; refusals spread wider than
 * the window do not add up; after
 * the incident, more refusals join it; the same refusal on many nodes at
 * once is one shared cause that takes no node out, its first node waiting
 * the fleet's hold for the others; a driver call's "timed
 * out" at container creation is not a collective timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/classify.h"
#include "test_engine_helpers.h"

#define NODES 40

static const char *const LOST =
    "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc "
    "error: code = Unknown desc = Unable to retrieve list of available devices: error creating "
    "nvml.Device 5: nvml: GPU is lost, which is unexpected";
static const char *const CLI =
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: error "
    "running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
    "initialization error: driver rpc error: timed out: unknown";
static const char *const BAD_EXEC =
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: exec: \"torchrun2\": executable file "
    "not found in $PATH: unknown";

static const char *name(int i)
{
    static char names[NODES][16];
    snprintf(names[i], sizeof names[i], "node-%02d", i);
    return names[i];
}

/* NODES nodes; job ml/llm on the first two. */
static struct gh_topology *fleet(void)
{
    struct gh_topology *t = gh_topology_new();
    const char *nodes[NODES];
    for (int i = 0; i < NODES; i++)
        nodes[i] = name(i);
    gh_topology_add_job(t, "ml/llm", nodes, 2, 8);
    for (int i = 2; i < NODES; i++)
        gh_topology_add_node(t, name(i));
    return t;
}

static void refused(struct gh_engine *e, double t, const char *node, const char *job,
                    const char *pod, const char *msg)
{
    podfail(e, t, node, job, pod, "UnexpectedAdmissionError", -1, msg);
}

static int count_rule(const struct sink *sk, const char *rule)
{
    int n = 0;
    for (int i = 0; i < sk->n; i++)
        n += strcmp(sk->v[i].rule, rule) == 0;
    return n;
}

static bool out_of_service(const struct got *g)
{
    return got_action(g, GH_ACT_ISOLATE_NODE) || got_action(g, GH_ACT_DRAIN_NODE) ||
           got_action(g, GH_ACT_RESET_GPU) || got_action(g, GH_ACT_REBOOT_NODE) ||
           got_action(g, GH_ACT_REPLACE_NODE);
}

static void test_three_jobs_isolate(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    refused(e, 100, "node-07", "ml/sweep", "sweep-1-abcde", LOST);
    refused(e, 130, "node-07", "ml/eval", "eval-fghjk", LOST);
    assert_int_equal(sk.n, 0); /* two pods: not yet */
    refused(e, 170, "node-07", "ml/finetune", "finetune-worker-1", LOST);
    gh_engine_tick(e, T0 + S(175)); /* past the fleet's 1 s look at the others */
    assert_int_equal(sk.n, 1);
    const struct got *g = &sk.v[0];
    assert_int_equal(g->cls, GH_CLASS_UNKNOWN);
    assert_string_equal(g->node, "node-07");
    assert_string_equal(g->job, "");
    assert_string_equal(g->rule, "node-rejects-pods");
    assert_true(got_action(g, GH_ACT_ISOLATE_NODE));
    assert_true(got_action(g, GH_ACT_RUN_DIAGNOSTICS));
    assert_false(got_action(g, GH_ACT_RESTART_FROM_CHECKPOINT));
    assert_false(got_action(g, GH_ACT_RETRY_IN_PLACE));
    assert_true(g->urgent);
    assert_int_equal(g->n_evidence, 3);
    assert_int_equal(g->first_ts, T0 + S(100));
    assert_non_null(strstr(g->reason, "node-07 refused 3 pods of 3 different jobs"));
    assert_non_null(strstr(g->reason, "sweep-1-abcde (ml/sweep)"));
    assert_non_null(strstr(g->reason, "finetune-worker-1 (ml/finetune)"));
    assert_non_null(strstr(g->reason, "UnexpectedAdmissionError"));
    assert_non_null(strstr(g->reason, "no job restarts"));
    /* more refusals join it: no second incident, no application blamed */
    refused(e, 200, "node-07", "ml/sweep", "sweep-2-lmnpq", LOST);
    refused(e, 230, "node-07", "ml/other", "other-x", LOST);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    gh_engine_free(e);
}

static void test_one_job_never_blames(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    for (int i = 0; i < 12; i++) {
        char pod[32];
        snprintf(pod, sizeof pod, "imgsr-worker-%d", i % 2);
        refused(e, 100 + 20 * i, "node-05", "tf/imgsr", pod,
                "Pod Update plugin resources failed due to requested number of devices "
                "unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected");
    }
    gh_engine_finish(e, INT64_MAX);
    for (int i = 0; i < sk.n; i++) {
        assert_string_equal(sk.v[i].node, "");
        assert_false(out_of_service(&sk.v[i]));
    }
    assert_int_equal(count_rule(&sk, "node-rejects-pods"), 0);
    assert_int_equal(count_rule(&sk, "flapping-node"), 0);
    gh_engine_free(e);
}

/* A Deployment's pods carry no job label: its ReplicaSet's pods (the same
 * name but the last part) are one owner, not many jobs. */
static void test_one_replicaset_never_blames(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    const char *pods[] = {"rns-backbone-77c89d8844-jwv4n", "rns-backbone-77c89d8844-k629z",
                          "rns-backbone-77c89d8844-k85t2", "rns-backbone-77c89d8844-kftj8"};
    for (int i = 0; i < 4; i++)
        refused(e, 100 + 5 * i, "node-03", NULL, pods[i], LOST);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "node-rejects-pods"), 0);
    for (int i = 0; i < sk.n; i++)
        assert_false(out_of_service(&sk.v[i]));
    gh_engine_free(e);
}

/* Refusals further apart than the window do not add up. */
static void test_window(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    refused(e, 100, "node-09", "ml/a", "a-1", LOST);
    refused(e, 100 + 700, "node-09", "ml/b", "b-1", LOST);
    refused(e, 100 + 1400, "node-09", "ml/c", "c-1", LOST);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "node-rejects-pods"), 0);
    for (int i = 0; i < sk.n; i++)
        assert_false(out_of_service(&sk.v[i]));
    gh_engine_free(e);
}

/* A container toolkit upgrade leaves no CDI spec on the nodes it reached:
 * every GPU container there fails at creation. On node-11 pods of two jobs
 * fail, as job d's do on six other nodes at the same time: the failure is
 * everywhere, no node's own, none out of service. */
static void test_same_create_error_everywhere_is_no_node(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    const char *cdi = "failed to create containerd container: CDI device injection failed: "
                      "unresolvable CDI devices nvidia.com/gpu=all";
    podfail(e, 2000, "node-11", "ml/d", "d-11", "CreateContainerError", -1, cdi);
    for (int i = 12; i < 18; i++) {
        char pod[16];
        snprintf(pod, sizeof pod, "d-%d", i);
        podfail(e, 2000 + (i - 11) * 0.5, name(i), "ml/d", pod, "CreateContainerError", -1, cdi);
    }
    podfail(e, 2010, "node-11", "ml/e", "e-11", "CreateContainerError", -1, cdi);
    podfail(e, 2020, "node-11", "ml/e", "e-11b", "CreateContainerError", -1, cdi);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "shared-cause"), 1);
    for (int i = 0; i < sk.n; i++) {
        assert_false(out_of_service(&sk.v[i]));
        assert_string_equal(sk.v[i].node, "");
    }
    gh_engine_free(e);
}

/* Pods of four jobs bound to node-11 with an entrypoint their image lacks
 * (or no command at all): the pods' own fault in the runtime's words, no
 * refusal of the node's (what several jobs' failures on one node say stays
 * the flapping detector's call, as before). */
static void test_own_image_fault_is_no_refusal(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    podfail(e, 100, "node-11", "ml/x", "x-0", "StartError", 128, BAD_EXEC);
    podfail(e, 105, "node-11", "ml/y", "y-0", "StartError", 128, BAD_EXEC);
    podfail(e, 110, "node-11", "ml/z", "z-0", "StartError", 128, BAD_EXEC);
    podfail(e, 115, "node-11", "ml/w", "w-0", "RunContainerError", -1,
            "failed to generate container spec: no command specified");
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "node-rejects-pods"), 0);
    gh_engine_free(e);
}

/* nvidia-container-cli timing out in a hung driver call at container
 * creation (StartError, exit code 128): the node's, isolated; no
 * collective timeout, no application incident for any of the jobs. */
static void test_container_create_timeout(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    podfail(e, 100, "node-04", "ml/a", "a-worker-0", "StartError", 128, CLI);
    podfail(e, 112, "node-04", "ml/b", "b-worker-0", "StartError", 128, CLI);
    podfail(e, 125, "node-04", "ml/c", "c-0", "StartError", 128, CLI);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(sk.n, 1);
    assert_string_equal(sk.v[0].rule, "node-rejects-pods");
    assert_string_equal(sk.v[0].node, "node-04");
    assert_true(got_action(&sk.v[0], GH_ACT_ISOLATE_NODE));
    gh_engine_free(e);
}

/* A device plugin rollout: the same refusal on every node within minutes,
 * pods of two jobs on each: one shared cause, no node out of service. */
static void test_same_refusal_on_40_nodes_is_shared(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    const char *eof = "Allocate failed due to rpc error: code = Unavailable desc = error reading "
                      "from server: EOF, which is unexpected";
    /* node i's plugin restarts at 600 + 6i; its pods are refused 1, 12 and
     * 25 s later; fed in time order, as the stream is */
    for (int tick = 0; tick < 6 * NODES + 30; tick++)
        for (int i = 0; i < NODES; i++) {
            int dt = tick - 6 * i;
            char pod[48];
            if (dt == 1 || dt == 12) {
                snprintf(pod, sizeof pod, "embed-%d-%c", i, dt == 1 ? 'a' : 'b');
                refused(e, 600 + tick, name(i), "batch/embed", pod, eof);
            } else if (dt == 25) {
                snprintf(pod, sizeof pod, "notebook-%d", i);
                refused(e, 600 + tick, name(i), i % 2 ? "team-a/nb" : "team-b/nb", pod, eof);
            }
        }
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "shared-cause"), 1);
    for (int i = 0; i < sk.n; i++) {
        assert_false(out_of_service(&sk.v[i]));
        assert_string_equal(sk.v[i].node, "");
    }
    gh_engine_free(e);
}

/* A rollout reaching node after node: the first node's three refusals
 * come before any other node's; the next nodes show the same words within
 * the fleet's hold (15 s): the first node is not taken out as its own. */
static void test_first_node_waits_for_the_rollout(void **st)
{
    (void)st;
    struct sink sk;
    struct gh_engine *e = engine(fleet(), &sk);
    const char *eof = "Allocate failed due to rpc error: code = Unavailable desc = error reading "
                      "from server: EOF, which is unexpected";
    refused(e, 100, "node-20", "batch/embed", "embed-a", eof);
    refused(e, 100.5, "node-20", "batch/embed", "embed-b", eof);
    refused(e, 101, "node-20", "team-a/nb", "nb-a", eof);
    refused(e, 106, "node-21", "batch/embed", "embed-c", eof);
    refused(e, 111, "node-22", "batch/embed", "embed-d", eof);
    refused(e, 112, "node-22", "team-b/nb", "nb-b", eof);
    refused(e, 113, "node-22", "batch/embed", "embed-e", eof);
    gh_engine_finish(e, INT64_MAX);
    assert_int_equal(count_rule(&sk, "node-rejects-pods"), 0);
    assert_int_equal(count_rule(&sk, "shared-cause"), 1);
    for (int i = 0; i < sk.n; i++)
        assert_false(out_of_service(&sk.v[i]));
    gh_engine_free(e);
}

static void test_classify(void **st)
{
    (void)st;
    struct gh_signal s;
    gh_signal_init(&s);
    s.kind = GH_KIND_POD_FAILED;
    sset(&s.reason, "UnexpectedAdmissionError");
    assert_true(gh_classify_pod_rejected(&s));
    assert_true(gh_classify_pod_admission(&s));
    sset(&s.reason, "CreateContainerError");
    assert_true(gh_classify_pod_rejected(&s));
    assert_false(gh_classify_pod_admission(&s));
    sset(&s.reason, "CreateContainerConfigError"); /* a missing Secret: the pod's spec */
    assert_false(gh_classify_pod_rejected(&s));
    sset(&s.reason, "ErrImagePull"); /* a registry: never the node's */
    assert_false(gh_classify_pod_rejected(&s));
    sset(&s.reason, "StartError");
    sset(&s.msg, BAD_EXEC); /* the image's own entrypoint */
    assert_false(gh_classify_pod_rejected(&s));
    sset(&s.msg, CLI);
    assert_true(gh_classify_pod_rejected(&s));
    /* the driver's "timed out" at container creation: not a collective */
    s.has_exit_code = true;
    s.exit_code = 128;
    assert_int_equal(gh_classify_pod_failure(&s), GH_PF_APP);
    sset(&s.reason, "Error");
    assert_true(gh_classify_pod_rejected(&s)); /* by its words */
    sset(&s.msg, "NCCL watchdog timed out");
    assert_false(gh_classify_pod_rejected(&s));
    assert_int_equal(gh_classify_pod_failure(&s), GH_PF_COLLECTIVE);
    gh_signal_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_jobs_isolate),
        cmocka_unit_test(test_one_job_never_blames),
        cmocka_unit_test(test_one_replicaset_never_blames),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_same_create_error_everywhere_is_no_node),
        cmocka_unit_test(test_own_image_fault_is_no_refusal),
        cmocka_unit_test(test_container_create_timeout),
        cmocka_unit_test(test_same_refusal_on_40_nodes_is_shared),
        cmocka_unit_test(test_first_node_waits_for_the_rollout),
        cmocka_unit_test(test_classify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
