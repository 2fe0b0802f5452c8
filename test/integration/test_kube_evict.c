/* test_kube_evict.c - the Eviction subresource against the real control
 * plane: a pod on a kwok fake node, guarded by a PodDisruptionBudget; the
 * eviction is refused with 429 (a normal answer: GH_EAGAIN, retry later)
 * while the budget allows no disruption, and goes through once it does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    char ns[64];
    char node[96];
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "evict", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    snprintf(e->node, sizeof e->node, "%s-node", e->ns);
    /* tainted so that other tests' pods are never scheduled here */
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
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, e->node};
    gh_kube_delete(e->c, &ref, NULL, NULL, NULL);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static bool pod_ready(struct env *e, const char *name)
{
    struct gh_kube_ref ref = {&gh_kube_res_pods, e->ns, name};
    json_t *p = NULL;
    if (gh_kube_get(e->c, &ref, &p, NULL, NULL))
        return false;
    bool ready = false;
    size_t i;
    json_t *cnd;
    json_array_foreach(json_object_get(json_object_get(p, "status"), "conditions"), i, cnd) {
        const char *t = json_string_value(json_object_get(cnd, "type"));
        const char *s = json_string_value(json_object_get(cnd, "status"));
        if (t && s && strcmp(t, "Ready") == 0 && strcmp(s, "True") == 0)
            ready = true;
    }
    json_decref(p);
    return ready;
}

/* Polls the PDB until the disruption controller has processed generation
 * and allows `allowed` disruptions. */
static bool pdb_settled(struct env *e, long long allowed)
{
    for (int i = 0; i < 600; i++) {
        struct gh_kube_ref ref = {&gh_kube_res_pdbs, e->ns, "guard"};
        json_t *p = NULL;
        if (gh_kube_get(e->c, &ref, &p, NULL, NULL) == GH_OK) {
            json_t *st = json_object_get(p, "status");
            long long gen = json_integer_value(json_object_get(json_object_get(p, "metadata"),
                                                               "generation"));
            long long obs = json_integer_value(json_object_get(st, "observedGeneration"));
            long long da = json_integer_value(json_object_get(st, "disruptionsAllowed"));
            long long healthy = json_integer_value(json_object_get(st, "currentHealthy"));
            json_decref(p);
            if (obs == gen && da == allowed && healthy == 1)
                return true;
        }
        usleep(100000);
    }
    return false;
}

static void test_eviction_blocked_by_pdb(void **state)
{
    struct env *e = *state;
    json_t *pod = json_pack(
        "{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}], s:[{s:s}]}}", "apiVersion", "v1",
        "kind", "Pod", "metadata", "name", "worker", "labels", "app", "trainer", "spec",
        "nodeName", e->node, "containers", "name", "main", "image", "trainer:latest", "tolerations",
        "operator", "Exists");
    struct gh_kube_ref pods = {&gh_kube_res_pods, e->ns, NULL};
    struct gh_err err;
    int rc = gh_kube_create(e->c, &pods, pod, NULL, NULL, &err);
    if (rc)
        fail_msg("pod: %s", err.msg);
    json_decref(pod);
    int i;
    for (i = 0; i < 600 && !pod_ready(e, "worker"); i++)
        usleep(100000);
    assert_true(i < 600); /* kwok made it Running and Ready */

    json_t *pdb = json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}}}}", "apiVersion", "policy/v1",
                            "kind", "PodDisruptionBudget", "metadata", "name", "guard", "spec",
                            "minAvailable", 1, "selector", "matchLabels", "app", "trainer");
    struct gh_kube_ref pdbs = {&gh_kube_res_pdbs, e->ns, NULL};
    assert_int_equal(gh_kube_create(e->c, &pdbs, pdb, NULL, NULL, &err), GH_OK);
    json_decref(pdb);
    assert_true(pdb_settled(e, 0));

    /* blocked: 429, a normal answer */
    struct gh_kube_status st;
    rc = gh_kube_evict(e->c, e->ns, "worker", NULL, &st, &err);
    fprintf(stderr, "# %s\n", err.msg);
    assert_int_equal(rc, GH_EAGAIN);
    assert_int_equal(st.code, 429);
    assert_int_equal(st.kind, GH_KUBE_R_TOO_MANY_REQUESTS);
    assert_non_null(strstr(st.message, "disruption budget"));
    struct gh_kube_ref wref = {&gh_kube_res_pods, e->ns, "worker"};
    json_t *still = NULL;
    assert_int_equal(gh_kube_get(e->c, &wref, &still, NULL, NULL), GH_OK);
    assert_null(json_object_get(json_object_get(still, "metadata"), "deletionTimestamp"));
    json_decref(still);

    /* the budget allows one disruption: the eviction goes through */
    /* (maxUnavailable needs a controller with a scale; this pod is bare) */
    json_t *p = json_pack("{s:{s:i}}", "spec", "minAvailable", 0);
    struct gh_kube_ref g = {&gh_kube_res_pdbs, e->ns, "guard"};
    assert_int_equal(gh_kube_patch(e->c, &g, NULL, GH_KUBE_PATCH_MERGE, p, NULL, NULL, &err),
                     GH_OK);
    json_decref(p);
    assert_true(pdb_settled(e, 1));
    struct gh_kube_delete_opts d = {.grace_period_s = 0};
    rc = gh_kube_evict(e->c, e->ns, "worker", &d, &st, &err);
    if (rc)
        fail_msg("evict: %s", err.msg);
    json_t *gone = NULL;
    rc = gh_kube_get(e->c, &wref, &gone, NULL, NULL);
    assert_true(rc == GH_ENOTFOUND ||
                json_object_get(json_object_get(gone, "metadata"), "deletionTimestamp"));
    json_decref(gone);

    /* evicting a pod that does not exist: 404 */
    assert_int_equal(gh_kube_evict(e->c, e->ns, "nobody", NULL, &st, &err), GH_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eviction_blocked_by_pdb),
    };
    return cmocka_run_group_tests_name("kube_evict", tests, setup, teardown);
}
