/* test_agent_health_publish.c - node-local GPU health published to the real
 * control plane (test/kube): a kwok fake node gets the GPUHealthy condition
 * and its GPUNodeHealth object (created when missing) with GPUs, states and
 * evidence; XID 79 on GPU 3 turns both unhealthy, a passing probe turns them
 * back; many changes make few requests (rate limit, coalescing); an agent
 * restart replays the evidence of this boot and forgets that of an earlier
 * one; passing probes over an unchanged state are not rewritten until the
 * resync (injected clock). The agent never cordons or taints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/health.h"
#include "agent/health_publish.h"
#include "kube/api.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    char node[96];
    struct gh_health *h;
    struct gh_health_publish *p;
    struct gh_kube_client *c2;  /* test_unchanged_not_rewritten: the other client */
    int64_t offset;             /* and its injected clock: real time + offset */
    struct gh_clock clk;
};

static json_t *get_obj(struct env *e, const struct gh_kube_res *res)
{
    struct gh_kube_ref ref = {res, NULL, e->node};
    json_t *o = NULL;
    struct gh_err err;
    int rc = gh_kube_get(e->c, &ref, &o, NULL, &err);
    if (rc)
        fail_msg("get %s/%s: %s", res->resource, e->node, err.msg);
    return o;
}

static const json_t *condition(const json_t *node, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static bool node_ready(void *ud)
{
    struct env *e = ud;
    json_t *n = get_obj(e, &gh_kube_res_nodes);
    bool ok = strcmp(str(condition(n, "Ready"), "status"), "True") == 0;
    json_decref(n);
    if (!ok)
        usleep(100000);
    return ok;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    snprintf(e->node, sizeof e->node, "health-%ld-%04llx", (long)getpid(),
             (unsigned long long)(gh_kube_client_rand(e->c) & 0xffff));
    /* kwok manages it; tainted so that other tests' pods never land here */
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:{s:s}}, s:{s:[{s:s, s:s}]}, "
                          "s:{s:{s:s}}}",
                          "apiVersion", "v1", "kind", "Node", "metadata", "name", e->node,
                          "labels", "gpuheal.io/fake", "true", "annotations",
                          "kwok.x-k8s.io/node", "fake", "spec", "taints", "key",
                          "gpuheal.io/test-only", "effect", "NoSchedule", "status", "capacity",
                          "nvidia.com/gpu", "8");
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
    int rc = gh_kube_create(e->c, &ref, n, NULL, NULL, &err);
    json_decref(n);
    if (rc) {
        fprintf(stderr, "setup node: %s\n", err.msg);
        return -1;
    }
    /* kwok's first status write replaces the conditions: wait for it */
    for (int i = 0; i < 300 && !node_ready(e); i++)
        ;
    *state = e;
    return 0;
}

static void drop_publisher(struct env *e)
{
    gh_health_publish_free(e->p);
    gh_health_free(e->h);
    e->p = NULL;
    e->h = NULL;
}

static int teardown(void **state)
{
    struct env *e = *state;
    drop_publisher(e);
    gh_kube_client_free(e->c2);
    struct gh_kube_ref g = {&gh_kube_res_gpunodehealths, NULL, e->node};
    gh_kube_delete(e->c, &g, NULL, NULL, NULL);
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, e->node};
    gh_kube_delete(e->c, &ref, NULL, NULL, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static void make(struct env *e, int64_t min_interval_ns, int64_t boot_ns)
{
    struct gh_health_opts ho = {.clock = gh_kube_client_clock(e->c)};
    struct gh_err err;
    assert_int_equal(gh_health_new(&ho, &e->h, &err), GH_OK);
    struct gh_health_publish_opts po = {.node = e->node,
                                        .min_interval_ns = min_interval_ns,
                                        .resync_ns = -1,
                                        .boot_ns = boot_ns};
    assert_int_equal(gh_health_publish_new(e->c, e->h, &po, &e->p, &err), GH_OK);
}

static int64_t now(struct env *e)
{
    return gh_clock_now(gh_kube_client_clock(e->c));
}

static void eight_gpus(struct env *e)
{
    for (int i = 0; i < 8; i++) {
        struct gh_nvml_gpu_health s = {.index = i};
        snprintf(s.pci, sizeof s.pci, "00000000:%02X:00.0", 0x18 + 0x10 * i);
        snprintf(s.uuid, sizeof s.uuid, "GPU-%08d-0000-0000-0000-000000000000", i);
        assert_int_equal(gh_health_observe_nvml(e->h, &s, NULL), GH_OK);
    }
}

static void feed(struct env *e, enum gh_kind kind, int gpu, int code, bool passed)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = now(e);
    s.kind = kind;
    s.gpu = gpu;
    gh_signal_set_str(&s.node, e->node, strlen(e->node));
    if (kind == GH_KIND_XID) {
        s.source = GH_SRC_KMSG;
        s.code = code;
        char m[96];
        snprintf(m, sizeof m, "NVRM: Xid (PCI:0000:48:00): %d, pid=1234, GPU has fallen off the bus.",
                 code);
        gh_signal_set_str(&s.msg, m, strlen(m));
    } else {
        s.source = GH_SRC_PROBE;
        gh_signal_set_str(&s.check, "gemm_checksum", 13);
        s.passed = passed;
    }
    assert_int_equal(gh_health_feed(e->h, &s, NULL), GH_OK);
    gh_signal_clear(&s);
}

static void flush(struct env *e)
{
    struct gh_err err;
    int rc = gh_health_publish_flush(e->p, 30000, &err);
    if (rc)
        fail_msg("flush: %s", err.msg);
}

static const json_t *gpu_entry(const json_t *gnh, int index)
{
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(json_object_get(gnh, "status"), "gpus"), i, g) {
        if (json_integer_value(json_object_get(g, "index")) == index)
            return g;
    }
    return NULL;
}

static long long status_int(const json_t *gnh, const char *k)
{
    return json_integer_value(json_object_get(json_object_get(gnh, "status"), k));
}

static void test_xid79_and_recovery(void **state)
{
    struct env *e = *state;
    make(e, 200 * GH_NS_PER_MS, 0);
    eight_gpus(e);
    gh_health_publish_update(e->p);
    flush(e);

    json_t *n = get_obj(e, &gh_kube_res_nodes);
    const json_t *c = condition(n, GH_HEALTH_CONDITION);
    assert_non_null(c);
    assert_string_equal(str(c, "status"), "True");
    assert_string_equal(str(c, "reason"), "AllGPUsHealthy");
    assert_string_equal(str(c, "message"), "all 8 GPUs healthy");
    assert_non_null(condition(n, "Ready")); /* kwok's conditions are kept */
    const char *uid = gh_kube_meta_uid(n);
    char t_healthy[64];
    snprintf(t_healthy, sizeof t_healthy, "%s", str(c, "lastTransitionTime"));
    /* never cordoned or tainted by the agent */
    assert_false(json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable")));
    /* (the node lifecycle controller may add node.kubernetes.io/... taints when
     * kwok's heartbeat lags under load: not the agent's) */
    size_t ti;
    json_t *taint;
    json_array_foreach(json_object_get(json_object_get(n, "spec"), "taints"), ti, taint) {
        const char *key = str(taint, "key");
        assert_non_null(key);
        if (strncmp(key, "node.kubernetes.io/", 19) != 0)
            assert_string_equal(key, "gpuheal.io/test-only");
    }

    json_t *g = get_obj(e, &gh_kube_res_gpunodehealths);
    assert_string_equal(str(json_object_get(g, "spec"), "nodeName"), e->node);
    json_t *owner = json_array_get(json_object_get(json_object_get(g, "metadata"),
                                                   "ownerReferences"), 0);
    assert_string_equal(str(owner, "uid"), uid);
    assert_string_equal(str(json_object_get(g, "status"), "state"), "Healthy");
    assert_int_equal(status_int(g, "gpuCount"), 8);
    assert_int_equal(status_int(g, "healthyGPUs"), 8);
    assert_string_equal(str(gpu_entry(g, 3), "pciBusId"), "0000:48:00.0");
    assert_string_equal(str(gpu_entry(g, 3), "state"), "Healthy");
    json_decref(g);
    json_decref(n);
    struct gh_health_publish_stats st;
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.gnh_creates, 1);
    assert_int_equal(st.failures, 0);

    /* XID 79 on GPU 3 */
    sleep(1); /* so that the transition time moves */
    feed(e, GH_KIND_XID, 3, 79, false);
    gh_health_publish_update(e->p);
    flush(e);
    n = get_obj(e, &gh_kube_res_nodes);
    c = condition(n, GH_HEALTH_CONDITION);
    assert_string_equal(str(c, "status"), "False");
    assert_string_equal(str(c, "reason"), "XidCritical");
    assert_non_null(strstr(str(c, "message"), "GPU 3 (0000:48:00.0): XID 79"));
    assert_true(strcmp(str(c, "lastTransitionTime"), t_healthy) > 0);
    char t_failed[64];
    snprintf(t_failed, sizeof t_failed, "%s", str(c, "lastTransitionTime"));
    assert_false(json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable")));
    json_decref(n);

    g = get_obj(e, &gh_kube_res_gpunodehealths);
    assert_string_equal(str(json_object_get(g, "status"), "state"), "Unhealthy");
    assert_int_equal(status_int(g, "healthyGPUs"), 7);
    assert_string_equal(str(gpu_entry(g, 3), "state"), "Failed");
    assert_int_equal(json_integer_value(json_object_get(gpu_entry(g, 3), "lastXid")), 79);
    json_t *ev = json_object_get(json_object_get(g, "status"), "evidence");
    assert_int_equal(json_array_size(ev), 1);
    json_t *e0 = json_array_get(ev, 0);
    assert_string_equal(str(e0, "kind"), "xid");
    assert_string_equal(str(e0, "source"), "kmsg");
    assert_int_equal(json_integer_value(json_object_get(e0, "code")), 79);
    assert_int_equal(json_integer_value(json_object_get(e0, "gpu")), 3);
    const json_t *gc = condition(g, GH_HEALTH_CONDITION);
    assert_string_equal(str(gc, "reason"), "XidCritical");
    json_decref(g);

    /* the same state again: nothing is written */
    gh_health_publish_stats(e->p, &st);
    uint64_t np = st.node_patches, ga = st.gnh_applies;
    gh_health_publish_update(e->p);
    flush(e);
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.node_patches, np);
    assert_int_equal(st.gnh_applies, ga);

    /* a passing probe on GPU 3: healthy again */
    sleep(1);
    feed(e, GH_KIND_PROBE_RESULT, 3, 0, true);
    gh_health_publish_update(e->p);
    flush(e);
    n = get_obj(e, &gh_kube_res_nodes);
    c = condition(n, GH_HEALTH_CONDITION);
    assert_string_equal(str(c, "status"), "True");
    assert_string_equal(str(c, "reason"), "AllGPUsHealthy");
    assert_true(strcmp(str(c, "lastTransitionTime"), t_failed) > 0);
    json_decref(n);
    g = get_obj(e, &gh_kube_res_gpunodehealths);
    assert_string_equal(str(json_object_get(g, "status"), "state"), "Healthy");
    assert_int_equal(status_int(g, "healthyGPUs"), 8);
    assert_string_equal(str(gpu_entry(g, 3), "state"), "Healthy");
    ev = json_object_get(json_object_get(g, "status"), "evidence");
    assert_int_equal(json_array_size(ev), 2);
    assert_string_equal(str(json_array_get(ev, 1), "kind"), "probe_result");
    json_decref(g);
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.gnh_creates, 1);
}

static bool never(void *ud)
{
    (void)ud;
    return false;
}

static void test_rate_limit(void **state)
{
    struct env *e = *state;
    make(e, GH_NS_PER_S, 0);
    eight_gpus(e);
    gh_health_publish_update(e->p);
    flush(e);
    struct gh_health_publish_stats st0, st;
    struct gh_kube_client_stats cs0, cs;
    gh_health_publish_stats(e->p, &st0);
    gh_kube_client_stats(e->c, &cs0);

    /* 40 changes within ~1.2 s: XIDs and recoveries on GPU 5 */
    for (int i = 0; i < 40; i++) {
        if (i % 2 == 0)
            feed(e, GH_KIND_XID, 5, i % 4 == 0 ? 79 : 48, false);
        else
            feed(e, GH_KIND_PROBE_RESULT, 5, 0, true);
        gh_health_publish_update(e->p);
        gh_kube_testenv_until(e->c, never, NULL, 30);
    }
    feed(e, GH_KIND_XID, 5, 48, false); /* the last word: unhealthy */
    gh_health_publish_update(e->p);
    /* the coalesced state goes out once the interval has passed */
    gh_kube_testenv_until(e->c, never, NULL, 2500);
    gh_health_publish_stats(e->p, &st);
    gh_kube_client_stats(e->c, &cs);
    uint64_t node = st.node_patches - st0.node_patches, gnh = st.gnh_applies - st0.gnh_applies;
    fprintf(stderr, "# 41 changes -> %llu node patches, %llu status applies, %llu checks\n",
            (unsigned long long)node, (unsigned long long)gnh,
            (unsigned long long)(st.checks - st0.checks));
    assert_true(node >= 1 && node <= 4);
    assert_true(gnh >= 1 && gnh <= 4);
    assert_int_equal(cs.started - cs0.started, node + gnh); /* every request counted */
    assert_int_equal(st.updates - st0.updates, 41);
    assert_int_equal(st.failures, 0);

    /* and the API holds the final state without a flush */
    json_t *n = get_obj(e, &gh_kube_res_nodes);
    const json_t *c = condition(n, GH_HEALTH_CONDITION);
    assert_string_equal(str(c, "status"), "False");
    assert_non_null(strstr(str(c, "message"), "GPU 5"));
    assert_non_null(strstr(str(c, "message"), "XID 48"));
    json_decref(n);
    json_t *g = get_obj(e, &gh_kube_res_gpunodehealths);
    assert_string_equal(str(gpu_entry(g, 5), "state"), "Failed");
    assert_int_equal(json_integer_value(json_object_get(gpu_entry(g, 5), "lastXid")), 48);
    assert_int_equal(json_array_size(json_object_get(json_object_get(g, "status"), "evidence")),
                     8); /* the GPU's ring: newest 8 of 41 */
    json_decref(g);
}

static void test_restart_replays_this_boot(void **state)
{
    struct env *e = *state;
    int64_t boot = now(e) - 3600 * GH_NS_PER_S;
    make(e, 200 * GH_NS_PER_MS, boot);
    eight_gpus(e);
    feed(e, GH_KIND_XID, 3, 79, false);
    gh_health_publish_update(e->p);
    flush(e);
    json_t *n = get_obj(e, &gh_kube_res_nodes);
    char ltt[64];
    snprintf(ltt, sizeof ltt, "%s", str(condition(n, GH_HEALTH_CONDITION), "lastTransitionTime"));
    json_decref(n);
    drop_publisher(e);

    /* agent restart, same boot: GPU 3 stays failed, nothing to rewrite on the Node */
    sleep(1);
    make(e, 200 * GH_NS_PER_MS, boot);
    eight_gpus(e);
    gh_health_publish_update(e->p);
    flush(e);
    struct gh_health_publish_stats st;
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.restored, 1);
    assert_int_equal(st.node_patches, 0);
    struct gh_health_gpu gpu;
    assert_int_equal(gh_health_gpu_at(e->h, gh_health_find(e->h, 3), &gpu), GH_OK);
    assert_int_equal(gpu.state, GH_GPU_UNHEALTHY);
    n = get_obj(e, &gh_kube_res_nodes);
    const json_t *c = condition(n, GH_HEALTH_CONDITION);
    assert_string_equal(str(c, "status"), "False");
    assert_string_equal(str(c, "lastTransitionTime"), ltt);
    json_decref(n);
    drop_publisher(e);

    /* after a reboot (boot time later than the object): forgotten */
    make(e, 200 * GH_NS_PER_MS, now(e));
    eight_gpus(e);
    gh_health_publish_update(e->p);
    flush(e);
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.restored, 0);
    n = get_obj(e, &gh_kube_res_nodes);
    c = condition(n, GH_HEALTH_CONDITION);
    assert_string_equal(str(c, "status"), "True");
    json_decref(n);
    json_t *g = get_obj(e, &gh_kube_res_gpunodehealths);
    assert_int_equal(status_int(g, "healthyGPUs"), 8);
    json_decref(g);
}

/* The injected clock of test_unchanged_not_rewritten: real time plus an
 * offset the test moves forward. */
static int64_t offset_now(void *ctx)
{
    return gh_clock_now(gh_clock_real()) + *(int64_t *)ctx;
}

static void test_unchanged_not_rewritten(void **state)
{
    struct env *e = *state;
    e->clk = (struct gh_clock){offset_now, &e->offset};
    struct gh_kube_client_opts co = {.clock = &e->clk};
    struct gh_kube_client *c = NULL;
    struct gh_err err;
    assert_int_equal(gh_kube_testenv_client(&co, &c, &err), GH_OK);
    e->c2 = e->c; /* teardown frees both */
    e->c = c;
    int64_t *offset = &e->offset;
    struct gh_health_opts ho = {.clock = &e->clk};
    assert_int_equal(gh_health_new(&ho, &e->h, &err), GH_OK);
    struct gh_health_publish_opts po = {.node = e->node, .min_interval_ns = GH_NS_PER_S,
                                        .resync_ns = 300 * GH_NS_PER_S};
    assert_int_equal(gh_health_publish_new(e->c, e->h, &po, &e->p, &err), GH_OK);
    eight_gpus(e);
    feed(e, GH_KIND_XID, 5, 13, false); /* evidence that stays (GPU 5's own ring) */
    gh_health_publish_update(e->p);
    flush(e);
    /* the first passes are a change (they are GPU 2's and the node's first) */
    feed(e, GH_KIND_PROBE_RESULT, 2, 0, true);
    feed(e, GH_KIND_PROBE_RESULT, -1, 0, true);
    gh_health_publish_update(e->p);
    flush(e);
    struct gh_health_publish_stats st0, st;
    gh_health_publish_stats(e->p, &st0);

    /* 20 probe passes, GPU-level and node-level, 2 s apart on the clock:
     * nothing changes but the probes' own timestamps */
    for (int i = 0; i < 20; i++) {
        *offset += 2 * GH_NS_PER_S;
        feed(e, GH_KIND_PROBE_RESULT, 2, 0, true);
        feed(e, GH_KIND_PROBE_RESULT, -1, 0, true);
        gh_health_publish_update(e->p);
        gh_kube_testenv_until(e->c, never, NULL, 20);
    }
    gh_health_publish_stats(e->p, &st);
    fprintf(stderr, "# 40 probe passes -> %llu node patches, %llu status applies, %llu checks "
            "(%llu unchanged)\n", (unsigned long long)(st.node_patches - st0.node_patches),
            (unsigned long long)(st.gnh_applies - st0.gnh_applies),
            (unsigned long long)(st.checks - st0.checks),
            (unsigned long long)(st.unchanged - st0.unchanged));
    assert_int_equal(st.node_patches, st0.node_patches);
    assert_int_equal(st.gnh_applies, st0.gnh_applies);
    assert_true(st.unchanged - st0.unchanged >= 10);
    json_t *g = get_obj(e, &gh_kube_res_gpunodehealths);
    size_t ev0 = json_array_size(json_object_get(json_object_get(g, "status"), "evidence"));
    json_decref(g);

    /* the resync (5 min on the injected clock) writes it all, passes included */
    *offset += 301 * GH_NS_PER_S;
    gh_kube_testenv_until(e->c, never, NULL, 300);
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.gnh_applies, st0.gnh_applies + 1);
    assert_int_equal(st.node_patches, st0.node_patches + 1);
    g = get_obj(e, &gh_kube_res_gpunodehealths);
    size_t ev1 = json_array_size(json_object_get(json_object_get(g, "status"), "evidence"));
    json_decref(g);
    fprintf(stderr, "# resync: evidence %zu -> %zu entries\n", ev0, ev1);
    assert_true(ev1 > ev0);

    /* a real change is written at once (the interval has long passed) */
    *offset += 2 * GH_NS_PER_S;
    feed(e, GH_KIND_XID, 2, 79, false);
    gh_health_publish_update(e->p);
    gh_kube_testenv_until(e->c, never, NULL, 300);
    gh_health_publish_stats(e->p, &st);
    assert_int_equal(st.gnh_applies, st0.gnh_applies + 2);
    assert_int_equal(st.node_patches, st0.node_patches + 2);
    assert_int_equal(st.failures, 0);

    drop_publisher(e);
}

static void test_missing_node_is_an_error(void **state)
{
    struct env *e = *state;
    char real[64];
    snprintf(real, sizeof real, "%.40s", e->node);
    snprintf(e->node, sizeof e->node, "%s-absent", real);
    make(e, 200 * GH_NS_PER_MS, 0);
    struct gh_err err;
    int rc = gh_health_publish_flush(e->p, 30000, &err);
    fprintf(stderr, "# %s\n", err.msg);
    assert_int_equal(rc, GH_ENOTFOUND);
    struct gh_health_publish_stats st;
    gh_health_publish_stats(e->p, &st);
    assert_true(st.failures >= 1);
    assert_int_equal(st.last_rc, GH_ENOTFOUND);
    drop_publisher(e);
    /* the GPUNodeHealth of the missing node was created; remove it */
    struct gh_kube_ref g = {&gh_kube_res_gpunodehealths, NULL, e->node};
    gh_kube_delete(e->c, &g, NULL, NULL, NULL);
    snprintf(e->node, sizeof e->node, "%s", real);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_xid79_and_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_replays_this_boot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unchanged_not_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_node_is_an_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
