/* test_kube_informer.c - list+watch informers against the real control
 * plane: handlers and indexes (pods by node, by job), resync, a watch that
 * survives an apiserver crash and restart with no update missed, and a
 * relist after 410 Gone when the resourceVersion went stale through etcd
 * compaction. The crash tests use a private apiserver on the same etcd so
 * tests sharing the fixture's apiserver are not disturbed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/informer.h"
#include "kube/testenv.h"

struct seen;

struct env {
    struct gh_kube_client *c;
    char ns[64];
    struct gh_kube_testenv_apiserver api;
    /* per test, released by test_teardown even when an assertion fails */
    struct gh_kube_informer *inf;
    struct gh_kube_client *pc;
    struct seen *s;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "informer", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int test_teardown(void **state)
{
    struct env *e = *state;
    gh_kube_informer_free(e->inf);
    gh_kube_client_free(e->pc);
    free(e->s);
    e->inf = NULL;
    e->pc = NULL;
    e->s = NULL;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gh_kube_testenv_apiserver_free(&e->api);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

/* What the handlers saw: per object name, the last data value and flags. */
#define MAXO 64
struct seen {
    int adds, updates, deletes, resyncs, synced, errors;
    struct {
        char name[64];
        char val[64];
        bool deleted;
    } o[MAXO];
    int n;
};

static int slot(struct seen *s, const json_t *obj)
{
    const char *name = gh_kube_meta_name(obj);
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->o[i].name, name) == 0)
            return i;
    assert_true(s->n < MAXO);
    snprintf(s->o[s->n].name, sizeof s->o[0].name, "%s", name);
    return s->n++;
}

static void record(struct seen *s, const json_t *obj, bool deleted)
{
    int i = slot(s, obj);
    const char *v = json_string_value(json_object_get(json_object_get(obj, "data"), "v"));
    snprintf(s->o[i].val, sizeof s->o[i].val, "%s", v ? v : "");
    s->o[i].deleted = deleted;
}

static void h_add(void *ud, const json_t *obj)
{
    struct seen *s = ud;
    s->adds++;
    record(s, obj, false);
}
static void h_update(void *ud, const json_t *old, const json_t *obj)
{
    struct seen *s = ud;
    if (!old) {
        s->resyncs++;
        return;
    }
    s->updates++;
    record(s, obj, false);
}
static void h_delete(void *ud, const json_t *obj)
{
    struct seen *s = ud;
    s->deletes++;
    record(s, obj, true);
}
static void h_synced(void *ud) { ((struct seen *)ud)->synced = 1; }
static void h_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    (void)rc;
    (void)st;
    (void)msg;
    ((struct seen *)ud)->errors++;
}

static const struct gh_kube_handlers handlers = {h_add, h_update, h_delete, h_synced, h_error};
static const char *const keep_cm[] = {"/data", "/metadata/labels"};

static void put_cm(struct gh_kube_client *c, const char *ns, const char *name, const char *v)
{
    struct gh_err err;
    if (gh_kube_testenv_put_configmap(c, ns, name, v, &err))
        fail_msg("apply %s: %s", name, err.msg);
}

static void del_cm(struct gh_kube_client *c, const char *ns, const char *name)
{
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, ns, name};
    assert_int_equal(gh_kube_delete(c, &ref, NULL, NULL, NULL), GH_OK);
}

/* The cache equals the server: same objects at the same resourceVersion,
 * and the handlers saw each object's final value. */
struct converge {
    struct env *e;
    struct gh_kube_informer *inf;
    struct seen *s;
    const char *label;
};

static int match_item(void *ud, json_t *item)
{
    struct converge *cv = ud;
    const struct gh_kube_obj *o =
        gh_kube_store_get(gh_kube_informer_store(cv->inf), cv->e->ns, gh_kube_meta_name(item));
    if (!o || strcmp(gh_kube_obj_rv(o), gh_kube_meta_rv(item)) != 0)
        return GH_EAGAIN;
    const char *v = json_string_value(json_object_get(json_object_get(item, "data"), "v"));
    for (int i = 0; i < cv->s->n; i++)
        if (strcmp(cv->s->o[i].name, gh_kube_meta_name(item)) == 0)
            return !cv->s->o[i].deleted && v && strcmp(cv->s->o[i].val, v) == 0 ? GH_OK
                                                                                 : GH_EAGAIN;
    return GH_EAGAIN;
}

static bool converged(void *ud)
{
    struct converge *cv = ud;
    if (!gh_kube_informer_synced(cv->inf))
        return false;
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, cv->e->ns, NULL};
    struct gh_kube_list_opts lo = {.label_selector = cv->label};
    json_t *list = NULL;
    if (gh_kube_list(cv->e->c, &ref, &lo, &list, NULL, NULL))
        return false;
    size_t n = json_array_size(json_object_get(list, "items"));
    bool ok = n == gh_kube_store_count(gh_kube_informer_store(cv->inf));
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it) if (ok && match_item(cv, it)) ok =
        false;
    json_decref(list);
    /* deletions: every name the handlers saw and the server lacks is marked deleted */
    for (int k = 0; ok && k < cv->s->n; k++) {
        bool on_server = false;
        json_t *l2 = NULL;
        struct gh_kube_ref r2 = {&gh_kube_res_configmaps, cv->e->ns, cv->s->o[k].name};
        on_server = gh_kube_get(cv->e->c, &r2, &l2, NULL, NULL) == GH_OK;
        json_decref(l2);
        if (!on_server && !cv->s->o[k].deleted)
            ok = false;
    }
    return ok;
}

static bool synced(void *ud) { return gh_kube_informer_synced(ud); }

static bool never(void *ud)
{
    (void)ud;
    return false;
}

struct idx_wait {
    struct gh_kube_informer *inf;
    const char *index, *value;
    size_t want;
};

static bool idx_count(void *ud)
{
    struct idx_wait *w = ud;
    return gh_kube_store_index_count(gh_kube_informer_store(w->inf), w->index, w->value) ==
           w->want;
}

static void make_node(struct gh_kube_client *c, const char *name)
{
    /* tainted so that other tests' pods are never scheduled here */
    json_t *n = json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:{s:s}}, s:{s:[{s:s, s:s}]}, "
                          "s:{s:{s:s}}}",
                          "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
                          "gpuheal.io/fake", "true", "annotations", "kwok.x-k8s.io/node", "fake",
                          "spec", "taints", "key", "gpuheal.io/test-only", "effect", "NoSchedule",
                          "status", "capacity", "nvidia.com/gpu", "8");
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
    struct gh_err err;
    int rc = gh_kube_create(c, &ref, n, NULL, NULL, &err);
    if (rc)
        fail_msg("node %s: %s", name, err.msg);
    json_decref(n);
}

static void make_pod(struct gh_kube_client *c, const char *ns, const char *name, const char *node,
                     const char *job)
{
    json_t *p = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:s}], s:[{s:s, s:s}]}}", "apiVersion",
        "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns, "labels",
        "batch.kubernetes.io/job-name", job, "spec", "nodeName", node, "containers", "name", "main",
        "image", "busybox", "tolerations", "operator", "Exists", "effect", "NoSchedule");
    struct gh_kube_ref ref = {&gh_kube_res_pods, ns, NULL};
    struct gh_err err;
    int rc = gh_kube_create(c, &ref, p, NULL, NULL, &err);
    if (rc)
        fail_msg("pod %s: %s", name, err.msg);
    json_decref(p);
}

static void test_pods_by_node_and_job(void **state)
{
    struct env *e = *state;
    char n1[96], n2[96];
    snprintf(n1, sizeof n1, "%s-n1", e->ns);
    snprintf(n2, sizeof n2, "%s-n2", e->ns);
    make_node(e->c, n1);
    make_node(e->c, n2);
    static const char *const keep_pod[] = {"/spec/nodeName", "/status/phase",
                                           "/metadata/labels"};
    static const struct gh_kube_index_spec idx[] = {
        {"node", {"/spec/nodeName", NULL}},
        {"job", {"/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name",
                 NULL}},
    };
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_pods, .ns = e->ns, .keep = keep_pod,
                                      .nkeep = 3, .indexes = idx, .nindexes = 2,
                                      .resync_ns = GH_NS_PER_S};
    struct seen *sp = e->s = calloc(1, sizeof *sp);
    struct gh_kube_informer *inf = NULL;
    struct gh_err err;
    assert_int_equal(gh_kube_informer_new(e->c, &o, &handlers, sp, &e->inf, &err), GH_OK);
    inf = e->inf;
    assert_int_equal(gh_kube_informer_start(inf, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->c, synced, inf, 30000));

    make_pod(e->c, e->ns, "a-0", n1, "job-a");
    make_pod(e->c, e->ns, "a-1", n1, "job-a");
    make_pod(e->c, e->ns, "a-2", n2, "job-a");
    make_pod(e->c, e->ns, "b-0", n2, "job-b");
    struct idx_wait w = {inf, "job", "job-a", 3};
    assert_true(gh_kube_testenv_until(e->c, idx_count, &w, 30000));
    struct idx_wait wb = {inf, "job", "job-b", 1};
    assert_true(gh_kube_testenv_until(e->c, idx_count, &wb, 30000));
    assert_int_equal(gh_kube_store_index_count(gh_kube_informer_store(inf), "node", n1), 2);
    assert_int_equal(gh_kube_store_index_count(gh_kube_informer_store(inf), "node", n2), 2);
    assert_int_equal(gh_kube_store_index_count(gh_kube_informer_store(inf), "job", "job-b"), 1);

    /* kept fields only */
    const struct gh_kube_obj *ob = gh_kube_store_get(gh_kube_informer_store(inf), e->ns, "a-0");
    assert_non_null(ob);
    json_t *j = gh_kube_obj_json(ob);
    assert_null(json_object_get(j, "spec") ? json_object_get(json_object_get(j, "spec"),
                                                             "containers")
                                           : NULL);
    assert_null(json_object_get(json_object_get(j, "metadata"), "managedFields"));
    json_decref(j);

    /* delete one: the index follows */
    struct gh_kube_ref pr = {&gh_kube_res_pods, e->ns, "b-0"};
    struct gh_kube_delete_opts now = {.grace_period_s = 0};
    assert_int_equal(gh_kube_delete(e->c, &pr, &now, NULL, NULL), GH_OK);
    struct idx_wait w2 = {inf, "job", "job-b", 0};
    assert_true(gh_kube_testenv_until(e->c, idx_count, &w2, 60000));
    assert_true(sp->adds >= 4);
    assert_true(sp->deletes >= 1);
    /* periodic resync (every second here) replays the cache */
    gh_kube_testenv_until(e->c, never, NULL, 2500);
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(inf, &st);
    assert_true(st.resyncs >= 1);
    assert_true(sp->resyncs >= 3);
    assert_int_equal(sp->synced, 1);
    gh_kube_informer_free(inf);
    e->inf = NULL;

    struct gh_kube_ref nr = {&gh_kube_res_nodes, NULL, n1};
    gh_kube_delete(e->c, &nr, NULL, NULL, NULL);
    nr.name = n2;
    gh_kube_delete(e->c, &nr, NULL, NULL, NULL);
}

/* Informer on a private apiserver; crash it, change things through the
 * shared one while it is down, restart it: the informer converges. */
static void restart_scenario(struct env *e, const char *label, bool compact)
{
    struct gh_err err;
    if (!e->api.pid && gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("start apiserver: %s", err.msg);
    struct gh_kube_client *pc = NULL;
    struct gh_kube_client_opts po = {.connect_timeout_ms = 1000};
    assert_int_equal(gh_kube_testenv_apiserver_client(&e->api, &po, &e->pc, &err), GH_OK);
    pc = e->pc;

    char name[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s-%d", label, i);
        put_cm(e->c, e->ns, name, "v1");
    }
    char sel[64];
    snprintf(sel, sizeof sel, "set=%s", label);
    for (int i = 0; i < 5; i++) { /* label them so the informer selects them */
        snprintf(name, sizeof name, "%s-%d", label, i);
        struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, name};
        json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "set", label);
        assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_MERGE, p, NULL, NULL, NULL),
                         GH_OK);
        json_decref(p);
    }
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_configmaps, .ns = e->ns,
                                      .label_selector = sel, .keep = keep_cm, .nkeep = 2,
                                      .backoff_min_ns = 200 * GH_NS_PER_MS,
                                      .backoff_max_ns = 2 * GH_NS_PER_S};
    struct seen *sp = e->s = calloc(1, sizeof *sp);
    struct gh_kube_informer *inf = NULL;
    assert_int_equal(gh_kube_informer_new(pc, &o, &handlers, sp, &e->inf, &err), GH_OK);
    inf = e->inf;
    assert_int_equal(gh_kube_informer_start(inf, &err), GH_OK);
    struct converge cv = {e, inf, sp, sel};
    assert_true(gh_kube_testenv_until(pc, converged, &cv, 30000));
    /* the watch is open: a change flows through it */
    snprintf(name, sizeof name, "%s-4", label);
    put_cm(e->c, e->ns, name, "v2");
    assert_true(gh_kube_testenv_until(pc, converged, &cv, 30000));
    char rv_before[128];
    snprintf(rv_before, sizeof rv_before, "%s", gh_kube_informer_rv(inf));

    /* crash the apiserver mid-stream */
    gh_kube_testenv_apiserver_kill(&e->api, SIGKILL);
    gh_kube_testenv_until(pc, never, NULL, 1500); /* the informer notices, backs off */

    /* changes while it is down, through the shared apiserver */
    snprintf(name, sizeof name, "%s-0", label);
    put_cm(e->c, e->ns, name, "down-1");
    snprintf(name, sizeof name, "%s-1", label);
    put_cm(e->c, e->ns, name, "down-2");
    snprintf(name, sizeof name, "%s-2", label);
    del_cm(e->c, e->ns, name);
    snprintf(name, sizeof name, "%s-5", label);
    put_cm(e->c, e->ns, name, "new");
    {
        struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, name};
        json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "set", label);
        assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_MERGE, p, NULL, NULL, NULL),
                         GH_OK);
        json_decref(p);
    }
    if (compact) {
        int64_t rev = 0;
        if (gh_kube_testenv_etcd_compact(&rev, &err))
            fail_msg("compact: %s", err.msg);
        assert_true(rev > strtoll(rv_before, NULL, 10));
    }
    if (gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("restart apiserver: %s", err.msg);
    assert_true(gh_kube_testenv_until(pc, converged, &cv, 60000));

    /* and the new watch carries later changes */
    snprintf(name, sizeof name, "%s-3", label);
    put_cm(e->c, e->ns, name, "after");
    assert_true(gh_kube_testenv_until(pc, converged, &cv, 30000));

    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(inf, &st);
    fprintf(stderr, "# %s: lists=%lu relists_410=%lu watches=%lu watch_errors=%lu events=%lu "
                    "adds=%d updates=%d deletes=%d errors=%d\n",
            label, st.lists, st.relists_410, st.watches, st.watch_errors, st.events, sp->adds,
            sp->updates, sp->deletes, sp->errors);
    assert_true(st.watch_errors >= 1); /* it did see the crash */
    assert_int_equal(sp->deletes, 1);
    if (compact)
        assert_true(st.relists_410 >= 1);
}

static void test_watch_survives_apiserver_restart(void **state)
{
    restart_scenario(*state, "restart", false);
}

static void test_relist_on_410_after_compaction(void **state)
{
    restart_scenario(*state, "compact", true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_pods_by_node_and_job, test_teardown),
        cmocka_unit_test_teardown(test_watch_survives_apiserver_restart, test_teardown),
        cmocka_unit_test_teardown(test_relist_on_410_after_compaction, test_teardown),
    };
    return cmocka_run_group_tests_name("kube_informer", tests, setup, teardown);
}
