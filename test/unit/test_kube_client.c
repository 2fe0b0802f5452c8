/* test_kube_client.c - request building (paths, escaping, patch content
 * types, delete options), Status decoding, and the transport's rate limiter,
 * in-flight bound and timers on an injected clock (no server needed: the
 * requests go to a closed port and fail as transport errors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sys/epoll.h>
#include <time.h>

#include "kube/api.h"
#include "kube/client.h"
#include "kube/status.h"

static void test_paths(void **state)
{
    (void)state;
    char p[512];
    struct gh_err err;
    struct gh_kube_ref r1 = {&gh_kube_res_pods, "ml", "w-0"};
    assert_int_equal(gh_kube_path(p, sizeof p, &r1, "eviction", &err), GH_OK);
    assert_string_equal(p, "/api/v1/namespaces/ml/pods/w-0/eviction");
    struct gh_kube_ref r2 = {&gh_kube_res_pods, NULL, NULL};
    assert_int_equal(gh_kube_path(p, sizeof p, &r2, NULL, &err), GH_OK);
    assert_string_equal(p, "/api/v1/pods");
    struct gh_kube_ref r3 = {&gh_kube_res_leases, "kube-system", "gpuheal"};
    assert_int_equal(gh_kube_path(p, sizeof p, &r3, NULL, &err), GH_OK);
    assert_string_equal(p, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpuheal");
    struct gh_kube_ref r4 = {&gh_kube_res_nodes, "ignored", "gpu 1"};
    assert_int_equal(gh_kube_path(p, sizeof p, &r4, "status", &err), GH_OK);
    assert_string_equal(p, "/api/v1/nodes/gpu%201/status");
    struct gh_kube_ref r5 = {&gh_kube_res_incidents, NULL, "inc-1"};
    assert_int_equal(gh_kube_path(p, sizeof p, &r5, NULL, &err), GH_OK);
    assert_string_equal(p, "/apis/gpuheal.io/v1alpha1/incidents/inc-1");
    /* refusals */
    struct gh_kube_ref bad1 = {&gh_kube_res_pods, NULL, "x"};
    assert_int_equal(gh_kube_path(p, sizeof p, &bad1, NULL, &err), GH_EINVAL);
    struct gh_kube_ref bad2 = {&gh_kube_res_pods, "ml", "../x"};
    assert_int_equal(gh_kube_path(p, sizeof p, &bad2, NULL, &err), GH_EINVAL);
    struct gh_kube_ref bad3 = {&gh_kube_res_pods, "ml", ".."};
    assert_int_equal(gh_kube_path(p, sizeof p, &bad3, NULL, &err), GH_EINVAL);
    assert_int_equal(gh_kube_path(p, 10, &r1, NULL, &err), GH_ELIMIT);
    char q[64] = "/x";
    assert_int_equal(gh_kube_query_add(q, sizeof q, "labelSelector", "a=b,c in (d)", &err), GH_OK);
    assert_int_equal(gh_kube_query_add(q, sizeof q, "limit", "5", &err), GH_OK);
    assert_int_equal(gh_kube_query_add(q, sizeof q, "skip", NULL, &err), GH_OK);
    assert_string_equal(q, "/x?labelSelector=a%3Db%2Cc%20in%20%28d%29&limit=5");
    assert_int_equal(gh_kube_query_add(q, sizeof q, "k", "0123456789012345678901234567890", &err),
                     GH_ELIMIT);
    assert_string_equal(q, "/x?labelSelector=a%3Db%2Cc%20in%20%28d%29&limit=5");
}

static void test_builders(void **state)
{
    (void)state;
    struct gh_kube_req req;
    struct gh_err err;
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, "n1"};
    json_t *obj = json_pack("{s:{s:b}}", "spec", "unschedulable", 1);
    json_t *arr = json_pack("[{s:s, s:s}]", "op", "remove", "path", "/spec/taints");

    assert_int_equal(gh_kube_req_patch(&req, &ref, NULL, GH_KUBE_PATCH_MERGE, obj, &err), GH_OK);
    assert_int_equal(req.method, GH_KUBE_PATCH);
    assert_string_equal(req.content_type, "application/merge-patch+json");
    assert_string_equal(req.path, "/api/v1/nodes/n1?fieldManager=gpuheal");
    assert_string_equal(req.body, "{\"spec\":{\"unschedulable\":true}}");
    gh_kube_req_clear(&req);
    assert_int_equal(gh_kube_req_patch(&req, &ref, NULL, GH_KUBE_PATCH_STRATEGIC, obj, &err), GH_OK);
    assert_string_equal(req.content_type, "application/strategic-merge-patch+json");
    gh_kube_req_clear(&req);
    assert_int_equal(gh_kube_req_patch(&req, &ref, NULL, GH_KUBE_PATCH_APPLY, obj, &err), GH_OK);
    assert_string_equal(req.content_type, "application/apply-patch+yaml");
    assert_string_equal(req.path, "/api/v1/nodes/n1?fieldManager=gpuheal&force=true");
    gh_kube_req_clear(&req);
    assert_int_equal(gh_kube_req_patch(&req, &ref, NULL, GH_KUBE_PATCH_JSON, obj, &err), GH_EINVAL);
    assert_int_equal(gh_kube_req_patch(&req, &ref, NULL, GH_KUBE_PATCH_JSON, arr, &err), GH_OK);
    assert_string_equal(req.content_type, "application/json-patch+json");
    gh_kube_req_clear(&req);

    struct gh_kube_delete_opts d = {.uid = "u", .resource_version = "7", .grace_period_s = 0,
                                    .propagation = "Foreground", .dry_run = true};
    assert_int_equal(gh_kube_req_delete(&req, &ref, &d, &err), GH_OK);
    json_t *body = json_loads(req.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "preconditions"),
                                                          "uid")),
                        "u");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "preconditions"),
                                                          "resourceVersion")),
                        "7");
    assert_int_equal(json_integer_value(json_object_get(body, "gracePeriodSeconds")), 0);
    assert_string_equal(json_string_value(json_object_get(body, "propagationPolicy")), "Foreground");
    json_decref(body);
    gh_kube_req_clear(&req);

    struct gh_kube_ref coll = {&gh_kube_res_pods, "ml", NULL};
    struct gh_kube_list_opts lo = {.resource_version = "42", .allow_bookmarks = true,
                                   .timeout_s = 300, .label_selector = "app=x", .limit = 9};
    assert_int_equal(gh_kube_req_watch(&req, &coll, &lo, &err), GH_OK);
    assert_true(req.watch);
    assert_string_equal(req.path, "/api/v1/namespaces/ml/pods?watch=1&labelSelector=app%3Dx&"
                                  "resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=300");
    assert_int_equal(req.timeout_ms, 330000);
    assert_int_equal(gh_kube_req_list(&req, &coll, &lo, &err), GH_OK);
    assert_string_equal(req.path, "/api/v1/namespaces/ml/pods?labelSelector=app%3Dx&"
                                  "resourceVersion=42&limit=9");
    json_decref(obj);
    json_decref(arr);
}

static void test_status_decoding(void **state)
{
    (void)state;
    struct gh_kube_status st;
    const char *body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                       "\"message\":\"Cannot evict pod as it would violate the pod's disruption "
                       "budget.\",\"reason\":\"TooManyRequests\",\"details\":{\"causes\":[{"
                       "\"reason\":\"DisruptionBudget\",\"message\":\"The disruption budget pdb "
                       "needs 1 healthy pods\"}],\"retryAfterSeconds\":10},\"code\":429}";
    gh_kube_status_from_reply(&st, 429, body, strlen(body), -1);
    assert_int_equal(st.code, 429);
    assert_int_equal(st.kind, GH_KUBE_R_TOO_MANY_REQUESTS);
    assert_int_equal(st.retry_after_s, 10);
    assert_string_equal(st.reason, "TooManyRequests");
    assert_non_null(strstr(st.cause, "needs 1 healthy"));
    assert_int_equal(gh_kube_status_rc(&st), GH_EAGAIN);
    struct gh_err err;
    assert_int_equal(gh_kube_status_err(&st, "evict ml/w-0", &err), GH_EAGAIN);
    assert_non_null(strstr(err.msg, "HTTP 429 TooManyRequests"));
    assert_non_null(strstr(err.msg, "retry after 10s"));

    /* not JSON: the body becomes the message, the HTTP code classifies */
    gh_kube_status_from_reply(&st, 503, "upstream\x01 down", 14, 3);
    assert_int_equal(st.kind, GH_KUBE_R_UNAVAILABLE);
    assert_string_equal(st.message, "upstream  down");
    assert_int_equal(st.retry_after_s, 3);
    /* Expired is 410 too */
    const char *gone = "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too "
                       "old resource version: 1 (5)\"}";
    gh_kube_status_from_reply(&st, 410, gone, strlen(gone), -1);
    assert_int_equal(st.kind, GH_KUBE_R_GONE);
    json_t *j = json_loads(gone, 0, NULL);
    assert_true(gh_kube_status_from_json(&st, j));
    assert_int_equal(st.code, 410);
    json_decref(j);
    j = json_pack("{s:s}", "kind", "Pod");
    assert_false(gh_kube_status_from_json(&st, j));
    json_decref(j);
    /* a huge message is truncated, never overflows */
    char *big = malloc(5000);
    memset(big, 'm', 4999);
    big[4999] = '\0';
    gh_kube_status_from_reply(&st, 500, big, 4999, -1);
    assert_int_equal(strlen(st.message), sizeof st.message - 1);
    assert_int_equal(gh_kube_status_rc(&st), GH_EIO);
    free(big);
    gh_kube_status_from_reply(&st, 404, NULL, 0, -1);
    assert_int_equal(gh_kube_status_rc(&st), GH_ENOTFOUND);
}

/* ---- transport on a fake clock */

static int64_t fake_now(void *ctx) { return *(int64_t *)ctx; }

struct counter {
    int done;
    int transport_errors;
};

static void on_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)err;
    struct counter *c = ud;
    c->done++;
    if (rc == GH_EAGAIN && resp->status.kind == GH_KUBE_R_TRANSPORT && resp->http == 0)
        c->transport_errors++;
}

static struct gh_kube_client *fake_client(int64_t *t, double qps, int burst, int inflight)
{
    struct gh_kube_config cfg = {0};
    cfg.server = (char *)"http://127.0.0.1:1";
    struct gh_clock *clk = malloc(sizeof *clk);
    clk->now = fake_now;
    clk->ctx = t;
    struct gh_kube_client_opts o = {.clock = clk, .qps = qps, .burst = burst,
                                    .max_inflight = inflight, .seed = 42};
    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, &o, &c, NULL), GH_OK);
    return c;
}

static void submit_get(struct gh_kube_client *c, struct counter *n)
{
    struct gh_kube_req req;
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, "n"};
    assert_int_equal(gh_kube_req_get(&req, &ref, NULL, NULL), GH_OK);
    assert_int_equal(gh_kube_submit(c, &req, on_done, NULL, n, NULL, NULL), GH_OK);
}

static void spin(struct gh_kube_client *c, int turns)
{
    for (int i = 0; i < turns; i++)
        gh_kube_client_run(c, 20, NULL);
}

static void test_rate_limiter_fake_clock(void **state)
{
    (void)state;
    int64_t t = 1000 * GH_NS_PER_S;
    struct gh_kube_client *c = fake_client(&t, 1.0, 2, 100);
    const struct gh_clock *clk = gh_kube_client_clock(c);
    struct counter n = {0};
    for (int i = 0; i < 5; i++)
        submit_get(c, &n);
    struct gh_kube_client_stats st;
    gh_kube_client_stats(c, &st);
    assert_int_equal(st.started, 2); /* the burst */
    assert_int_equal(st.queued, 3);
    spin(c, 20);
    gh_kube_client_stats(c, &st);
    assert_int_equal(st.started, 2); /* time stands still: no new tokens */
    assert_int_equal(n.done, 2);
    assert_int_equal(n.transport_errors, 2);
    t += GH_NS_PER_S; /* one token */
    spin(c, 20);
    gh_kube_client_stats(c, &st);
    assert_int_equal(st.started, 3);
    t += 10 * GH_NS_PER_S; /* refills to the burst, not beyond */
    spin(c, 20);
    gh_kube_client_stats(c, &st);
    assert_int_equal(st.started, 5);
    assert_int_equal(st.queued, 0);
    spin(c, 20);
    assert_int_equal(n.done, 5);
    gh_kube_client_free(c);
    free((void *)clk);
}

static void test_queue_bound(void **state)
{
    (void)state;
    int64_t t = 0;
    struct gh_kube_config cfg = {0};
    cfg.server = (char *)"http://127.0.0.1:1";
    struct gh_clock clk = {fake_now, &t};
    struct gh_kube_client_opts o = {.clock = &clk, .qps = 1, .burst = 1, .max_queued = 3};
    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, &o, &c, NULL), GH_OK);
    struct counter n = {0};
    for (int i = 0; i < 4; i++)
        submit_get(c, &n); /* 1 started, 3 queued */
    struct gh_kube_req req;
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, "n"};
    assert_int_equal(gh_kube_req_get(&req, &ref, NULL, NULL), GH_OK);
    struct gh_err err;
    assert_int_equal(gh_kube_submit(c, &req, on_done, NULL, &n, NULL, &err), GH_ELIMIT);
    gh_kube_client_free(c); /* pending calls are dropped without callbacks */
    assert_true(n.done <= 1);
}

struct fired {
    char order[16];
    int n;
};

static void fire_a(void *ud) { struct fired *f = ud; f->order[f->n++] = 'a'; }
static void fire_b(void *ud) { struct fired *f = ud; f->order[f->n++] = 'b'; }
static void fire_c(void *ud) { struct fired *f = ud; f->order[f->n++] = 'c'; }

static void test_timers_fake_clock(void **state)
{
    (void)state;
    int64_t t = 0;
    struct gh_kube_client *c = fake_client(&t, 1.0, 1, 1);
    const struct gh_clock *clk = gh_kube_client_clock(c);
    struct fired f = {{0}, 0};
    gh_kube_timer_add(c, 5 * GH_NS_PER_S, fire_c, &f);
    gh_kube_timer_add(c, 1 * GH_NS_PER_S, fire_a, &f);
    uint64_t id = gh_kube_timer_add(c, 3 * GH_NS_PER_S, fire_b, &f);
    gh_kube_client_run(c, 0, NULL);
    assert_int_equal(f.n, 0);
    t = 2 * GH_NS_PER_S;
    gh_kube_client_run(c, 0, NULL);
    assert_string_equal(f.order, "a");
    gh_kube_timer_cancel(c, id);
    gh_kube_timer_cancel(c, 9999);
    t = 10 * GH_NS_PER_S;
    gh_kube_client_run(c, 0, NULL);
    assert_string_equal(f.order, "ac");
    /* jitter stays in [base, 2*base) */
    for (int i = 0; i < 1000; i++) {
        int64_t j = gh_kube_jitter(c, 1000, 1.0);
        assert_true(j >= 1000 && j < 2000);
    }
    gh_kube_client_free(c);
    free((void *)clk);
}

static bool flag_set;
static void set_flag(void *ud)
{
    (void)ud;
    flag_set = true;
}

/* The caller's own epoll loop watches gh_kube_client_fd(): it turns readable
 * when a timer is due and on wakeup, and run(c, 0) never blocks. */
static void test_fd_for_callers_loop(void **state)
{
    (void)state;
    struct gh_kube_config cfg = {0};
    cfg.server = (char *)"http://127.0.0.1:1";
    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, NULL, &c, NULL), GH_OK);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = gh_kube_client_fd(c)};
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, gh_kube_client_fd(c), &ev), 0);
    struct epoll_event out;
    assert_int_equal(epoll_wait(ep, &out, 1, 50), 0); /* idle: nothing to do */

    flag_set = false;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gh_kube_timer_add(c, 100 * GH_NS_PER_MS, set_flag, NULL);
    while (!flag_set) {
        assert_int_equal(epoll_wait(ep, &out, 1, 2000), 1);
        assert_int_equal(gh_kube_client_run(c, 0, NULL), GH_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    assert_true(ms >= 95 && ms < 1000);

    gh_kube_client_wakeup(c);
    assert_int_equal(epoll_wait(ep, &out, 1, 1000), 1);
    assert_int_equal(gh_kube_client_run(c, 0, NULL), GH_OK);
    assert_int_equal(epoll_wait(ep, &out, 1, 50), 0); /* drained */

    /* a request to a closed port completes through the same fd */
    struct counter n = {0};
    submit_get(c, &n);
    for (int i = 0; i < 100 && n.done == 0; i++)
        if (epoll_wait(ep, &out, 1, 1000) == 1)
            assert_int_equal(gh_kube_client_run(c, 0, NULL), GH_OK);
    assert_int_equal(n.done, 1);
    assert_int_equal(n.transport_errors, 1);
    close(ep);
    gh_kube_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_status_decoding),
        cmocka_unit_test(test_rate_limiter_fake_clock),
        cmocka_unit_test(test_queue_bound),
        cmocka_unit_test(test_timers_fake_clock),
        cmocka_unit_test(test_fd_for_callers_loop),
    };
    return cmocka_run_group_tests_name("kube_client", tests, NULL, NULL);
}
