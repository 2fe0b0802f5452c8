/* test_kube_verbs.c - every Kubernetes verb of src/kube against the real
 * control plane (test/kube): get, paginated list, create (and its dry run), update with
 * conflict retry, four patch kinds, status subresource, delete with
 * preconditions, Events, Leases, Status decoding of errors, HTTP/2 with
 * connection reuse, rate limit and in-flight bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "kube/api.h"
#include "kube/events.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    char ns[64];
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "verbs", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static json_t *configmap(const char *ns, const char *name, const char *k, const char *v)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", name, "namespace", ns, "labels", "set",
                     "verbs", "data", k, v);
}

static json_t *create_cm(struct env *e, const char *name)
{
    struct gh_err err;
    json_t *cm = configmap(e->ns, name, "a", "1"), *out = NULL;
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, NULL};
    int rc = gh_kube_create(e->c, &ref, cm, &out, NULL, &err);
    if (rc)
        fprintf(stderr, "create %s: %s\n", name, err.msg);
    assert_int_equal(rc, GH_OK);
    json_decref(cm);
    return out;
}

static const char *data_of(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(json_object_get(o, "data"), k));
}

static void test_get_missing_decodes_status(void **state)
{
    struct env *e = *state;
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "absent"};
    struct gh_kube_status st;
    struct gh_err err;
    json_t *o = NULL;
    assert_int_equal(gh_kube_get(e->c, &ref, &o, &st, &err), GH_ENOTFOUND);
    assert_null(o);
    assert_int_equal(st.code, 404);
    assert_int_equal(st.kind, GH_KUBE_R_NOT_FOUND);
    assert_string_equal(st.reason, "NotFound");
    assert_non_null(strstr(st.message, "absent"));
    assert_non_null(strstr(err.msg, "HTTP 404 NotFound"));
}

static void test_create_get_and_errors(void **state)
{
    struct env *e = *state;
    json_t *made = create_cm(e, "cm-create");
    assert_non_null(gh_kube_meta_uid(made));
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "cm-create"};
    json_t *got = NULL;
    assert_int_equal(gh_kube_get(e->c, &ref, &got, NULL, NULL), GH_OK);
    assert_string_equal(data_of(got, "a"), "1");
    assert_string_equal(gh_kube_meta_uid(got), gh_kube_meta_uid(made));

    /* the same name again: 409 AlreadyExists */
    struct gh_kube_status st;
    struct gh_err err;
    json_t *cm = configmap(e->ns, "cm-create", "a", "2");
    struct gh_kube_ref coll = {&gh_kube_res_configmaps, e->ns, NULL};
    assert_int_equal(gh_kube_create(e->c, &coll, cm, NULL, &st, &err), GH_EIO);
    assert_int_equal(st.code, 409);
    assert_int_equal(st.kind, GH_KUBE_R_ALREADY_EXISTS);
    json_decref(cm);

    /* an invalid name: 422 Invalid with a cause */
    cm = configmap(e->ns, "Bad_Name", "a", "1");
    assert_int_equal(gh_kube_create(e->c, &coll, cm, NULL, &st, &err), GH_EIO);
    assert_int_equal(st.code, 422);
    assert_int_equal(st.kind, GH_KUBE_R_INVALID);
    assert_true(strlen(st.message) > 0);
    assert_true(strlen(st.cause) > 0);
    json_decref(cm);
    json_decref(made);
    json_decref(got);
}

/* gh_kube_create_dry_run: admitted and validated, never stored; an existing
 * name answers AlreadyExists (the restart's check before it deletes). */
static void test_create_dry_run(void **state)
{
    struct env *e = *state;
    struct gh_kube_status st;
    struct gh_err err = {{0}};
    struct gh_kube_ref coll = {&gh_kube_res_configmaps, e->ns, NULL};
    json_t *cm = configmap(e->ns, "cm-dry", "a", "1");
    assert_int_equal(gh_kube_create_dry_run(e->c, &coll, cm, &st, &err), GH_OK);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "cm-dry"};
    assert_int_equal(gh_kube_get(e->c, &ref, NULL, NULL, NULL), GH_ENOTFOUND);
    json_decref(create_cm(e, "cm-dry"));
    assert_int_equal(gh_kube_create_dry_run(e->c, &coll, cm, &st, &err), GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_ALREADY_EXISTS);
    json_decref(cm);
    /* invalid: refused like the real create */
    cm = configmap(e->ns, "Bad_Name", "a", "1");
    assert_int_equal(gh_kube_create_dry_run(e->c, &coll, cm, &st, &err), GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_INVALID);
    json_decref(cm);
}

static int count_item(void *ud, json_t *item)
{
    (void)item;
    (*(int *)ud)++;
    return 0;
}

static void test_list_pagination(void **state)
{
    struct env *e = *state;
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof name, "page-%d", i);
        json_t *cm = configmap(e->ns, name, "i", "x");
        json_object_set_new(json_object_get(json_object_get(cm, "metadata"), "labels"), "set",
                            json_string("page"));
        struct gh_kube_ref coll = {&gh_kube_res_configmaps, e->ns, NULL};
        assert_int_equal(gh_kube_create(e->c, &coll, cm, NULL, NULL, NULL), GH_OK);
        json_decref(cm);
    }
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, NULL};
    struct gh_kube_list_opts lo = {.label_selector = "set=page", .limit = 3};
    json_t *page = NULL;
    assert_int_equal(gh_kube_list(e->c, &ref, &lo, &page, NULL, NULL), GH_OK);
    assert_int_equal(json_array_size(json_object_get(page, "items")), 3);
    assert_non_null(gh_kube_json_str(page, "metadata", "continue"));
    json_decref(page);

    int n = 0;
    char rv[64];
    struct gh_err err;
    assert_int_equal(gh_kube_list_all(e->c, &ref, &lo, count_item, &n, rv, sizeof rv, NULL, &err),
                     GH_OK);
    assert_int_equal(n, 7);
    assert_true(rv[0] != '\0');
}

struct interfere {
    struct env *e;
    int calls;
};

/* First call: someone else updates the object between our GET and PUT. */
static int mutate_with_interference(void *ud, json_t *obj)
{
    struct interfere *in = ud;
    in->calls++;
    if (in->calls == 1) {
        struct gh_kube_ref ref = {&gh_kube_res_configmaps, in->e->ns, "cm-conflict"};
        json_t *p = json_pack("{s:{s:s}}", "data", "other", "writer");
        assert_int_equal(gh_kube_patch(in->e->c, &ref, NULL, GH_KUBE_PATCH_MERGE, p, NULL, NULL,
                                       NULL),
                         GH_OK);
        json_decref(p);
    }
    json_object_set_new(json_object_get(obj, "data"), "mine", json_string("yes"));
    return 0;
}

static void test_conflict_and_retry(void **state)
{
    struct env *e = *state;
    json_t *v1 = create_cm(e, "cm-conflict");
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "cm-conflict"};
    /* advance the object, then PUT the stale copy: 409 Conflict */
    json_t *p = json_pack("{s:{s:s}}", "data", "a", "2");
    assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_MERGE, p, NULL, NULL, NULL),
                     GH_OK);
    json_decref(p);
    struct gh_kube_status st;
    struct gh_err err;
    assert_int_equal(gh_kube_update(e->c, &ref, NULL, v1, NULL, &st, &err), GH_EIO);
    assert_int_equal(st.code, 409);
    assert_int_equal(st.kind, GH_KUBE_R_CONFLICT);
    json_decref(v1);

    /* read-modify-write retries through the conflict */
    struct interfere in = {e, 0};
    int tries = 0;
    json_t *out = NULL;
    assert_int_equal(gh_kube_update_retry(e->c, &ref, NULL, mutate_with_interference, &in, 5, &out,
                                          &tries, &st, &err),
                     GH_OK);
    assert_int_equal(tries, 2);
    assert_string_equal(data_of(out, "mine"), "yes");
    assert_string_equal(data_of(out, "other"), "writer");
    json_decref(out);
}

static bool has_manager(const json_t *obj, const char *manager, const char *op)
{
    const json_t *mf = json_object_get(json_object_get(obj, "metadata"), "managedFields");
    size_t i;
    const json_t *m;
    json_array_foreach(mf, i, m) {
        const char *n = json_string_value(json_object_get(m, "manager"));
        const char *o = json_string_value(json_object_get(m, "operation"));
        if (n && o && strcmp(n, manager) == 0 && strcmp(o, op) == 0)
            return true;
    }
    return false;
}

static void test_patch_kinds(void **state)
{
    struct env *e = *state;
    json_decref(create_cm(e, "cm-patch"));
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "cm-patch"};
    json_t *out = NULL, *p;

    p = json_pack("{s:{s:s}}", "data", "merge", "m");
    assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_MERGE, p, &out, NULL, NULL),
                     GH_OK);
    assert_string_equal(data_of(out, "merge"), "m");
    json_decref(p);
    json_decref(out);

    p = json_pack("{s:{s:s}}", "data", "strategic", "s");
    assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_STRATEGIC, p, &out, NULL, NULL),
                     GH_OK);
    assert_string_equal(data_of(out, "strategic"), "s");
    assert_string_equal(data_of(out, "merge"), "m");
    json_decref(p);
    json_decref(out);

    p = json_pack("[{s:s, s:s, s:s}]", "op", "add", "path", "/data/jsonpatch", "value", "j");
    assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_JSON, p, &out, NULL, NULL),
                     GH_OK);
    assert_string_equal(data_of(out, "jsonpatch"), "j");
    json_decref(p);
    json_decref(out);

    /* a JSON patch whose test fails: 422 */
    struct gh_kube_status st;
    p = json_pack("[{s:s, s:s, s:s}]", "op", "test", "path", "/data/a", "value", "nope");
    assert_int_not_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_JSON, p, NULL, &st, NULL),
                         GH_OK);
    assert_true(st.code == 422 || st.code == 500);
    json_decref(p);

    p = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", "cm-patch", "namespace", e->ns, "data", "applied", "ssa");
    assert_int_equal(gh_kube_patch(e->c, &ref, NULL, GH_KUBE_PATCH_APPLY, p, &out, NULL, NULL),
                     GH_OK);
    assert_string_equal(data_of(out, "applied"), "ssa");
    assert_true(has_manager(out, GH_KUBE_FIELD_MANAGER, "Apply"));
    assert_true(has_manager(out, GH_KUBE_FIELD_MANAGER, "Update"));
    json_decref(p);
    json_decref(out);
}

static void test_status_subresource_on_crd(void **state)
{
    struct env *e = *state;
    char name[80];
    snprintf(name, sizeof name, "%s-gpu-node", e->ns);
    json_t *gnh = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "gpuheal.io/v1alpha1",
                            "kind", "GPUNodeHealth", "metadata", "name", name, "spec", "nodeName",
                            name);
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, name};
    struct gh_err err;
    int rc = gh_kube_create(e->c, &ref, gnh, NULL, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, GH_OK);
    json_decref(gnh);

    /* status through /status; a spec change there is ignored */
    json_t *p = json_pack("{s:{s:s}, s:{s:s, s:i}}", "spec", "nodeName", "changed", "status",
                          "state", "Degraded", "gpuCount", 8);
    json_t *out = NULL;
    assert_int_equal(gh_kube_patch(e->c, &ref, "status", GH_KUBE_PATCH_MERGE, p, &out, NULL, &err),
                     GH_OK);
    assert_string_equal(gh_kube_json_str(out, "status", "state"), "Degraded");
    assert_string_equal(gh_kube_json_str(out, "spec", "nodeName"), name);
    json_decref(p);
    json_decref(out);

    /* an invalid status value is refused by the CRD's validation */
    struct gh_kube_status st;
    p = json_pack("{s:{s:s}}", "status", "state", "Sparkly");
    assert_int_equal(gh_kube_patch(e->c, &ref, "status", GH_KUBE_PATCH_MERGE, p, NULL, &st, &err),
                     GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_INVALID);
    json_decref(p);

    /* strategic merge is for built-in types only: 415 */
    p = json_pack("{s:{s:s}}", "status", "state", "Healthy");
    assert_int_equal(gh_kube_patch(e->c, &ref, "status", GH_KUBE_PATCH_STRATEGIC, p, NULL, &st,
                                   &err),
                     GH_EIO);
    assert_int_equal(st.code, 415);
    json_decref(p);

    /* PUT of the status subresource with the read resourceVersion */
    json_t *cur = NULL;
    assert_int_equal(gh_kube_get(e->c, &ref, &cur, NULL, NULL), GH_OK);
    json_object_set_new(json_object_get(cur, "status"), "state", json_string("Healthy"));
    assert_int_equal(gh_kube_update(e->c, &ref, "status", cur, &out, NULL, &err), GH_OK);
    assert_string_equal(gh_kube_json_str(out, "status", "state"), "Healthy");
    json_decref(cur);
    json_decref(out);
    assert_int_equal(gh_kube_delete(e->c, &ref, NULL, NULL, NULL), GH_OK);
}

static void test_delete_preconditions(void **state)
{
    struct env *e = *state;
    json_t *made = create_cm(e, "cm-delete");
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, "cm-delete"};
    struct gh_kube_status st;
    struct gh_err err;
    struct gh_kube_delete_opts bad_uid = {.uid = "00000000-0000-0000-0000-000000000000",
                                          .grace_period_s = -1};
    assert_int_equal(gh_kube_delete(e->c, &ref, &bad_uid, &st, &err), GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_CONFLICT);
    assert_non_null(strstr(st.message, "recondition"));
    struct gh_kube_delete_opts bad_rv = {.resource_version = "1", .grace_period_s = -1};
    assert_int_equal(gh_kube_delete(e->c, &ref, &bad_rv, &st, &err), GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_CONFLICT);
    struct gh_kube_delete_opts good = {.uid = gh_kube_meta_uid(made),
                                       .resource_version = gh_kube_meta_rv(made),
                                       .grace_period_s = 0,
                                       .propagation = "Background"};
    assert_int_equal(gh_kube_delete(e->c, &ref, &good, &st, &err), GH_OK);
    assert_int_equal(gh_kube_delete(e->c, &ref, NULL, &st, &err), GH_ENOTFOUND);
    json_decref(made);
}

static void test_events(void **state)
{
    struct env *e = *state;
    json_t *cm = create_cm(e, "cm-event");
    struct gh_kube_event_spec s = {
        .regarding_api_version = "v1",
        .regarding_kind = "ConfigMap",
        .regarding_name = "cm-event",
        .regarding_ns = e->ns,
        .regarding_uid = gh_kube_meta_uid(cm),
        .type = "Warning",
        .reason = "GPUFellOffBus",
        .action = "IsolateNode",
        .note = "GPU 3 fell off the bus (XID 79); node isolated",
        .reporting_instance = "test-kube-verbs",
    };
    json_t *out = NULL;
    struct gh_err err;
    int rc = gh_kube_event_post(e->c, &s, &out, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, GH_OK);
    assert_string_equal(json_string_value(json_object_get(out, "reason")), "GPUFellOffBus");
    json_decref(out);

    struct gh_kube_ref ref = {&gh_kube_res_events, e->ns, NULL};
    struct gh_kube_list_opts lo = {.field_selector = "regarding.name=cm-event"};
    json_t *list = NULL;
    assert_int_equal(gh_kube_list(e->c, &ref, &lo, &list, NULL, NULL), GH_OK);
    const json_t *items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 1);
    const json_t *ev = json_array_get(items, 0);
    assert_string_equal(json_string_value(json_object_get(ev, "note")), s.note);
    assert_string_equal(json_string_value(json_object_get(ev, "reportingController")),
                        "gpuheal.io/controller");
    json_decref(list);
    json_decref(cm);
}

static void test_leases(void **state)
{
    struct env *e = *state;
    json_t *l = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i}}", "apiVersion",
                          "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", "lease-a",
                          "spec", "holderIdentity", "me", "leaseDurationSeconds", 15);
    struct gh_kube_ref ref = {&gh_kube_res_leases, e->ns, "lease-a"};
    json_t *out = NULL;
    assert_int_equal(gh_kube_create(e->c, &ref, l, &out, NULL, NULL), GH_OK);
    json_object_set_new(json_object_get(out, "spec"), "holderIdentity", json_string("you"));
    json_t *out2 = NULL;
    assert_int_equal(gh_kube_update(e->c, &ref, NULL, out, &out2, NULL, NULL), GH_OK);
    assert_string_equal(gh_kube_json_str(out2, "spec", "holderIdentity"), "you");
    /* a second write from the old copy loses */
    struct gh_kube_status st;
    assert_int_equal(gh_kube_update(e->c, &ref, NULL, out, NULL, &st, NULL), GH_EIO);
    assert_int_equal(st.kind, GH_KUBE_R_CONFLICT);
    json_decref(l);
    json_decref(out);
    json_decref(out2);
}

static void test_http2_and_connection_reuse(void **state)
{
    struct env *e = *state;
    struct gh_kube_client_stats before, after;
    gh_kube_client_stats(e->c, &before);
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, e->ns};
    for (int i = 0; i < 20; i++)
        assert_int_equal(gh_kube_get(e->c, &ref, NULL, NULL, NULL), GH_OK);
    gh_kube_client_stats(e->c, &after);
    assert_int_equal(after.last_http_version, CURL_HTTP_VERSION_2_0);
    assert_int_equal(after.completed - before.completed, 20);
    assert_true(after.connects - before.connects <= 1); /* one connection, reused */
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_rate_limit(void **state)
{
    struct env *e = *state;
    struct gh_kube_client *c = NULL;
    struct gh_kube_client_opts o = {.qps = 10, .burst = 1};
    assert_int_equal(gh_kube_testenv_client(&o, &c, NULL), GH_OK);
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, e->ns};
    double t0 = mono_s();
    for (int i = 0; i < 11; i++)
        assert_int_equal(gh_kube_get(c, &ref, NULL, NULL, NULL), GH_OK);
    double dt = mono_s() - t0;
    struct gh_kube_client_stats st;
    gh_kube_client_stats(c, &st);
    assert_true(dt >= 0.9); /* 10 waits of 100 ms */
    assert_true(st.throttled >= 9);
    gh_kube_client_free(c);
}

struct async_count {
    int done, ok;
};

static void count_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)resp;
    (void)err;
    struct async_count *a = ud;
    a->done++;
    a->ok += rc == GH_OK;
}

static bool all_done(void *ud) { return ((struct async_count *)ud)->done == 10; }

static void test_inflight_bound(void **state)
{
    struct env *e = *state;
    struct gh_kube_client *c = NULL;
    struct gh_kube_client_opts o = {.qps = -1, .max_inflight = 2};
    assert_int_equal(gh_kube_testenv_client(&o, &c, NULL), GH_OK);
    struct async_count a = {0, 0};
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, e->ns};
    for (int i = 0; i < 10; i++) {
        struct gh_kube_req req;
        assert_int_equal(gh_kube_req_get(&req, &ref, NULL, NULL), GH_OK);
        assert_int_equal(gh_kube_submit(c, &req, count_done, NULL, &a, NULL, NULL), GH_OK);
    }
    struct gh_kube_client_stats st;
    gh_kube_client_stats(c, &st);
    assert_int_equal(st.inflight, 2);
    assert_int_equal(st.queued, 8);
    int max_inflight = 0;
    while (a.done < 10) {
        gh_kube_client_run(c, 100, NULL);
        gh_kube_client_stats(c, &st);
        if (st.inflight > max_inflight)
            max_inflight = st.inflight;
    }
    assert_true(max_inflight <= 2);
    assert_int_equal(a.ok, 10);
    assert_true(gh_kube_testenv_until(c, all_done, &a, 1000));
    gh_kube_client_free(c);
}

/* Driven from the caller's own epoll loop: readiness of gh_kube_client_fd()
 * and run(c, 0), never a blocking wait inside the client. */
static void test_callers_epoll_loop(void **state)
{
    struct env *e = *state;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = gh_kube_client_fd(e->c)};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, gh_kube_client_fd(e->c), &ev), 0);
    struct async_count a = {0, 0};
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, e->ns};
    for (int i = 0; i < 10; i++) {
        struct gh_kube_req req;
        assert_int_equal(gh_kube_req_get(&req, &ref, NULL, NULL), GH_OK);
        assert_int_equal(gh_kube_submit(e->c, &req, count_done, NULL, &a, NULL, NULL), GH_OK);
    }
    int wakeups = 0;
    while (a.done < 10 && wakeups < 10000) {
        struct epoll_event out;
        if (epoll_wait(ep, &out, 1, 5000) == 1) {
            wakeups++;
            assert_int_equal(gh_kube_client_run(e->c, 0, NULL), GH_OK);
        } else {
            fail_msg("the client's fd never became readable");
        }
    }
    assert_int_equal(a.ok, 10);
    close(ep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_missing_decodes_status),
        cmocka_unit_test(test_create_get_and_errors),
        cmocka_unit_test(test_create_dry_run),
        cmocka_unit_test(test_list_pagination),
        cmocka_unit_test(test_conflict_and_retry),
        cmocka_unit_test(test_patch_kinds),
        cmocka_unit_test(test_status_subresource_on_crd),
        cmocka_unit_test(test_delete_preconditions),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_leases),
        cmocka_unit_test(test_http2_and_connection_reuse),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_inflight_bound),
        cmocka_unit_test(test_callers_epoll_loop),
    };
    return cmocka_run_group_tests_name("kube_verbs", tests, setup, teardown);
}
