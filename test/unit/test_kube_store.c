/* test_kube_store.c - the informer cache: projection to kept fields,
 * add/update/unchanged, indexes that follow changes, relist sweep, stats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/store.h"
#include "kube/watch.h"

static const char *const keep[] = {"/spec/nodeName", "/status/phase",
                                   "/metadata/labels/batch.kubernetes.io~1job-name"};
static const struct gh_kube_index_spec idx[] = {
    {"node", {"/spec/nodeName", NULL}},
    {"job", {"/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name", NULL}},
};

static json_t *pod(const char *ns, const char *name, const char *rv, const char *node,
                   const char *job)
{
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:s, s:{}, s:[{s:s}]}, s:{s:s, s:[{s:s}]}, "
                          "s:{s:s, s:[{s:s}]}}",
                          "metadata", "name", name, "namespace", ns, "uid", "u-1",
                          "resourceVersion", rv, "labels", "managedFields", "manager", "x",
                          "spec", "nodeName", node, "containers", "image", "big-image:latest",
                          "status", "phase", "Running", "conditions", "type", "Ready");
    if (job)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "labels"),
                            "batch.kubernetes.io/job-name", json_string(job));
    return p;
}

static struct gh_kube_store *mk(void)
{
    struct gh_kube_store_opts o = {keep, 3, idx, 2};
    struct gh_kube_store *s = NULL;
    assert_int_equal(gh_kube_store_new(&o, &s, NULL), GH_OK);
    return s;
}

static void test_projection(void **state)
{
    (void)state;
    json_t *p = pod("ml", "w-0", "5", "gpu-1", "llm");
    json_t *k = gh_kube_project(p, keep, 3);
    char *txt = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(txt, "{\"metadata\":{\"labels\":{\"batch.kubernetes.io/job-name\":\"llm\"},"
                             "\"name\":\"w-0\",\"namespace\":\"ml\",\"resourceVersion\":\"5\","
                             "\"uid\":\"u-1\"},\"spec\":{\"nodeName\":\"gpu-1\"},"
                             "\"status\":{\"phase\":\"Running\"}}");
    free(txt);
    json_decref(k);
    assert_ptr_equal(gh_kube_pointer_get(p, ""), p);
    assert_null(gh_kube_pointer_get(p, "/spec/containers/0"));
    assert_null(gh_kube_pointer_get(p, "/bad~2escape"));
    json_decref(p);
}

/* Appends "s;" to the NUL-terminated buffer buf of cap bytes. */
static void add(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s;", s);
}

static int collect(void *ud, const struct gh_kube_obj *o)
{
    add(ud, 256, gh_kube_obj_key(o));
    return 0;
}

static void test_upsert_update_index(void **state)
{
    (void)state;
    struct gh_kube_store *s = mk();
    enum gh_kube_change chg;
    json_t *kept = NULL, *old = NULL;
    json_t *p = pod("ml", "w-0", "5", "gpu-1", "llm");
    assert_int_equal(gh_kube_store_upsert(s, p, &chg, &kept, &old, NULL), GH_OK);
    assert_int_equal(chg, GH_KUBE_ADDED);
    assert_null(old);
    assert_null(json_object_get(kept, "managedFields"));
    json_decref(kept);
    /* same RV: unchanged */
    assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, NULL, NULL), GH_OK);
    assert_int_equal(chg, GH_KUBE_UNCHANGED);
    json_decref(p);

    p = pod("ml", "w-1", "6", "gpu-1", "llm");
    assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, NULL, NULL), GH_OK);
    json_decref(p);
    p = pod("ml", "w-2", "7", "gpu-2", NULL);
    assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, NULL, NULL), GH_OK);
    json_decref(p);
    assert_int_equal(gh_kube_store_count(s), 3);
    assert_int_equal(gh_kube_store_index_count(s, "node", "gpu-1"), 2);
    assert_int_equal(gh_kube_store_index_count(s, "node", "gpu-2"), 1);
    assert_int_equal(gh_kube_store_index_count(s, "job", "llm"), 2);

    /* w-0 moves to gpu-2 */
    p = pod("ml", "w-0", "8", "gpu-2", "llm");
    assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, &old, NULL), GH_OK);
    assert_int_equal(chg, GH_KUBE_UPDATED);
    assert_string_equal(json_string_value(json_object_get(json_object_get(old, "spec"), "nodeName")),
                        "gpu-1");
    json_decref(old);
    json_decref(p);
    assert_int_equal(gh_kube_store_index_count(s, "node", "gpu-1"), 1);
    assert_int_equal(gh_kube_store_index_count(s, "node", "gpu-2"), 2);
    char buf[256] = "";
    assert_int_equal(gh_kube_store_index_foreach(s, "node", "gpu-2", collect, buf), GH_OK);
    assert_non_null(strstr(buf, "ml/w-0;"));
    assert_non_null(strstr(buf, "ml/w-2;"));
    assert_int_equal(gh_kube_store_index_foreach(s, "nope", "x", collect, buf), GH_ENOTFOUND);

    const struct gh_kube_obj *o = gh_kube_store_get(s, "ml", "w-0");
    assert_non_null(o);
    assert_string_equal(gh_kube_obj_rv(o), "8");
    assert_string_equal(gh_kube_obj_index_value(o, 0), "gpu-2");
    assert_string_equal(gh_kube_obj_index_value(o, 1), "llm");
    assert_null(gh_kube_store_get(s, "other", "w-0"));

    /* remove */
    p = pod("ml", "w-1", "9", "gpu-1", "llm");
    assert_int_equal(gh_kube_store_remove(s, p, &old, NULL), GH_OK);
    assert_non_null(old);
    json_decref(old);
    assert_int_equal(gh_kube_store_remove(s, p, &old, NULL), GH_OK);
    assert_null(old);
    json_decref(p);
    assert_int_equal(gh_kube_store_index_count(s, "node", "gpu-1"), 0);
    assert_int_equal(gh_kube_store_index_count(s, "job", "llm"), 1);
    gh_kube_store_free(s);
}

static void gone(void *ud, json_t *old)
{
    add(ud, 20000, json_string_value(json_object_get(json_object_get(old, "metadata"), "name")));
}

static void test_sweep_and_stats(void **state)
{
    (void)state;
    struct gh_kube_store *s = mk();
    enum gh_kube_change chg;
    for (int i = 0; i < 1000; i++) {
        char name[32], node[32];
        snprintf(name, sizeof name, "p-%d", i);
        snprintf(node, sizeof node, "n-%d", i % 37);
        json_t *p = pod("ns", name, "1", node, i % 2 ? "j" : NULL);
        assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, NULL, NULL), GH_OK);
        json_decref(p);
    }
    struct gh_kube_store_stats st;
    gh_kube_store_stats(s, &st);
    assert_int_equal(st.objects, 1000);
    assert_true(st.text_bytes > 1000 * 100);
    assert_true(st.heap_bytes > st.text_bytes);
    assert_true((st.heap_bytes - st.text_bytes) / 1000 < 400);
    assert_int_equal(st.index_buckets, 38);

    /* relist that sees only the even pods */
    gh_kube_store_mark_begin(s);
    for (int i = 0; i < 1000; i += 2) {
        char name[32];
        snprintf(name, sizeof name, "p-%d", i);
        json_t *p = pod("ns", name, "1", "x", NULL);
        assert_int_equal(gh_kube_store_upsert(s, p, &chg, NULL, NULL, NULL), GH_OK);
        assert_int_equal(chg, GH_KUBE_UNCHANGED);
        json_decref(p);
    }
    char *buf = calloc(1, 20000);
    assert_int_equal(gh_kube_store_sweep(s, gone, buf, NULL), GH_OK);
    assert_int_equal(gh_kube_store_count(s), 500);
    assert_non_null(strstr(buf, "p-1;"));
    assert_null(strstr(buf, "p-2;"));
    assert_int_equal(gh_kube_store_index_count(s, "job", "j"), 0);
    free(buf);
    gh_kube_store_free(s);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct gh_kube_store *s = mk();
    enum gh_kube_change chg;
    json_t *noname = json_pack("{s:{}}", "metadata");
    assert_int_equal(gh_kube_store_upsert(s, noname, &chg, NULL, NULL, NULL), GH_EINVAL);
    assert_int_equal(gh_kube_store_upsert(s, json_null(), &chg, NULL, NULL, NULL), GH_EINVAL);
    json_decref(noname);
    gh_kube_store_free(s);
    gh_kube_store_free(NULL);
    const char *const bad_keep[] = {"spec"};
    struct gh_kube_store_opts o = {bad_keep, 1, NULL, 0};
    assert_int_equal(gh_kube_store_new(&o, &s, NULL), GH_EINVAL);
}

/* ---- allocation-failure torture: the Nth jansson allocation fails */

static long alloc_budget = -1; /* allocations left before failing; -1: never fail */
static bool alloc_failed;

static void *failing_malloc(size_t n)
{
    if (alloc_budget == 0) {
        alloc_failed = true;
        return NULL;
    }
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

static int torture_event(void *ud, enum gh_kube_ev_type t, json_t *obj, struct gh_err *err)
{
    (void)err;
    struct gh_kube_store *s = ud;
    enum gh_kube_change chg;
    json_t *kept = NULL, *old = NULL;
    if (t == GH_KUBE_EV_DELETED)
        gh_kube_store_remove(s, obj, &old, NULL);
    else if (t != GH_KUBE_EV_BOOKMARK)
        gh_kube_store_upsert(s, obj, &chg, &kept, &old, NULL);
    json_decref(kept);
    json_decref(old);
    return GH_OK;
}

static void test_oom_torture(void **state)
{
    (void)state;
    const char *stream =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"1\",\"labels\":{\"job-name\":\"j\"}},\"spec\":{\"nodeName\":"
        "\"x\"},\"status\":{\"phase\":\"Running\"}}}\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
        "\"resourceVersion\":\"2\"},\"spec\":{\"nodeName\":\"y\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"}}}\n";
    json_set_alloc_funcs(failing_malloc, free);
    int completed = 0;
    long n;
    for (n = 0; n < 10000 && !completed; n++) {
        struct gh_kube_store_opts o = {keep, 3, idx, 2};
        struct gh_kube_store *s = NULL;
        struct gh_kube_watch_decoder *d = NULL;
        alloc_budget = -1;
        assert_int_equal(gh_kube_store_new(&o, &s, NULL), GH_OK);
        assert_int_equal(gh_kube_watch_decoder_new(0, torture_event, s, &d, NULL), GH_OK);
        alloc_failed = false;
        alloc_budget = n;
        (void)gh_kube_watch_decoder_feed(d, stream, strlen(stream), NULL);
        if (!alloc_failed)
            completed = 1;
        alloc_budget = -1;
        gh_kube_watch_decoder_free(d);
        gh_kube_store_free(s); /* ASan's leak check covers every failure path */
    }
    json_set_alloc_funcs(malloc, free);
    assert_true(completed);
    assert_true(n > 20); /* that many allocation points were made to fail */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_projection),
        cmocka_unit_test(test_upsert_update_index),
        cmocka_unit_test(test_sweep_and_stats),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_oom_torture),
    };
    return cmocka_run_group_tests_name("kube_store", tests, NULL, NULL);
}
