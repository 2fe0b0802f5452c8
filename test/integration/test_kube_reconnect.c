/* test_kube_reconnect.c - watch timeouts, bookmarks, reconnect backoff and
 * malformed server data against the real control plane: the server's
 * timeoutSeconds ends a watch and the informer resumes it at once (no
 * relist); the apiserver's periodic bookmarks reach it; the client's own
 * timeout ends requests to an apiserver that hangs (SIGSTOP); while an
 * apiserver is down the informer retries with exponential backoff and
 * jitter (also at the cap), then converges; a 2xx reply that is not JSON,
 * or a stream that is not a watch stream, is an error, never a crash. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/informer.h"
#include "kube/testenv.h"
#include "kube/watch.h"

struct env {
    struct gh_kube_client *c;
    char ns[64];
    struct gh_kube_testenv_apiserver api;
    /* per test, released by test_teardown even when an assertion fails */
    struct gh_kube_informer *inf;
    struct gh_kube_client *pc;
    /* started in setup, checked by the last test: bookmarks come about once a
     * minute, so it watches while the other tests run */
    struct gh_kube_informer *bm;
    double bm_started;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    if (gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "watch", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    static const char *const keep[] = {"/data"};
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_configmaps, .ns = e->ns, .keep = keep,
                                      .nkeep = 1};
    static const struct gh_kube_handlers none;
    if (gh_kube_informer_new(e->c, &o, &none, NULL, &e->bm, &err) ||
        gh_kube_informer_start(e->bm, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->bm_started = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    *state = e;
    return 0;
}

static int test_teardown(void **state)
{
    struct env *e = *state;
    if (e->api.pid)
        kill(e->api.pid, SIGCONT); /* a test that failed while it was stopped */
    gh_kube_informer_free(e->inf);
    gh_kube_client_free(e->pc);
    e->inf = NULL;
    e->pc = NULL;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gh_kube_testenv_apiserver_free(&e->api);
    gh_kube_informer_free(e->bm);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    free(e);
    return 0;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool synced(void *ud) { return gh_kube_informer_synced(ud); }

static void put_cm(struct gh_kube_client *c, const char *ns, const char *name, const char *v)
{
    struct gh_err err;
    if (gh_kube_testenv_put_configmap(c, ns, name, v, &err))
        fail_msg("apply %s: %s", name, err.msg);
}

struct has_value {
    struct gh_kube_informer *inf;
    const char *ns, *name, *v;
};

/* The cache holds name with data.v == v. */
static bool has_value(void *ud)
{
    struct has_value *h = ud;
    const struct gh_kube_obj *o = gh_kube_store_get(gh_kube_informer_store(h->inf), h->ns, h->name);
    if (!o)
        return false;
    json_t *j = gh_kube_obj_json(o);
    const char *v = json_string_value(json_object_get(json_object_get(j, "data"), "v"));
    bool ok = v && strcmp(v, h->v) == 0;
    json_decref(j);
    return ok;
}

static const char *const keep_cm[] = {"/data"};

static bool reopened_thrice(void *ud)
{
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(ud, &st);
    return st.watches >= 4;
}

/* timeoutSeconds=2..4: the server ends each watch; the informer re-opens it
 * from its resourceVersion at once (no error, no relist), and a change made
 * after several re-opens still reaches the cache. */
static void test_server_timeout(void **state)
{
    struct env *e = *state;
    put_cm(e->c, e->ns, "tick", "0");
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_configmaps, .ns = e->ns,
                                      .keep = keep_cm, .nkeep = 1, .watch_timeout_s = 2};
    struct gh_err err;
    assert_int_equal(gh_kube_informer_new(e->c, &o, &(struct gh_kube_handlers){0}, NULL, &e->inf,
                                          &err),
                     GH_OK);
    assert_int_equal(gh_kube_informer_start(e->inf, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->c, synced, e->inf, 30000));
    char rv0[64];
    snprintf(rv0, sizeof rv0, "%s", gh_kube_informer_rv(e->inf));

    /* watches of 2-4 s: three of them end and are re-opened within 12 s */
    double t0 = mono_s();
    assert_true(gh_kube_testenv_until(e->c, reopened_thrice, e->inf, 30000));
    double dt = mono_s() - t0;
    put_cm(e->c, e->ns, "tick", "1");
    struct has_value hv = {e->inf, e->ns, "tick", "1"};
    assert_true(gh_kube_testenv_until(e->c, has_value, &hv, 30000));

    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(e->inf, &st);
    fprintf(stderr, "# %.1fs: watches=%lu watch_errors=%lu lists=%lu bookmarks=%lu retries=%lu "
                    "rv %s -> %s\n",
            dt, st.watches, st.watch_errors, st.lists, st.bookmarks, st.retries, rv0,
            gh_kube_informer_rv(e->inf));
    assert_true(st.watches >= 4);                  /* the first + three re-opens */
    assert_true(st.watches <= (unsigned long)(dt / 2.0) + 3); /* none before its timeout */
    assert_true(dt >= 5.9);                        /* three watches of >= 2 s each */
    assert_int_equal(st.watch_errors, 0);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.lists, 1);     /* resumed from the resourceVersion, never relisted */
    assert_true(st.events >= 1);
    assert_true(strtoll(gh_kube_informer_rv(e->inf), NULL, 10) > strtoll(rv0, NULL, 10));
}

struct done_state {
    bool done;
    int rc;
    struct gh_kube_status st;
    char msg[512];
};

static void on_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct done_state *d = ud;
    d->done = true;
    d->rc = rc;
    d->st = resp->status;
    snprintf(d->msg, sizeof d->msg, "%s", err ? err->msg : "");
}

static int ignore_data(void *ud, const char *data, size_t len, struct gh_err *err)
{
    (void)ud;
    (void)data;
    (void)len;
    (void)err;
    return GH_OK;
}

static bool is_done(void *ud) { return ((struct done_state *)ud)->done; }

/* An apiserver that accepts connections but never answers (SIGSTOP): on
 * the open (HTTP/2) connection the request timeout ends a request and a
 * watch's own timeout ends the watch; a new connection ends at the connect
 * timeout (the TLS handshake never completes); after SIGCONT all works. */
static void test_client_timeouts_on_hung_apiserver(void **state)
{
    struct env *e = *state;
    struct gh_err err;
    if (!e->api.pid && gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("start apiserver: %s", err.msg);
    struct gh_kube_client_opts po = {.connect_timeout_ms = 8000, .request_timeout_ms = 1500};
    assert_int_equal(gh_kube_testenv_apiserver_client(&e->api, &po, &e->pc, &err), GH_OK);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, NULL};
    assert_int_equal(gh_kube_list(e->pc, &ref, NULL, NULL, NULL, &err), GH_OK);

    assert_int_equal(gh_kube_testenv_apiserver_pause(&e->api, &err), GH_OK);
    /* a plain request on the open connection: request_timeout_ms */
    struct gh_kube_status st;
    double t0 = mono_s();
    int rc = gh_kube_list(e->pc, &ref, NULL, NULL, &st, &err);
    double dt = mono_s() - t0;
    fprintf(stderr, "# list on a hung apiserver: rc=%d after %.2fs: %s\n", rc, dt, err.msg);
    assert_int_equal(rc, GH_ETIMEOUT);
    assert_int_equal(st.kind, GH_KUBE_R_TRANSPORT);
    assert_int_equal(st.code, 0);
    assert_true(dt >= 1.4 && dt < 7.0);

    /* a watch: its own timeout_ms (the informer sets timeoutSeconds + 30 s) */
    struct gh_kube_req req;
    struct gh_kube_list_opts lo = {.resource_version = "0", .allow_bookmarks = true,
                                   .timeout_s = 60};
    assert_int_equal(gh_kube_req_watch(&req, &ref, &lo, &err), GH_OK);
    req.timeout_ms = 2500;
    struct done_state d = {0};
    t0 = mono_s();
    assert_int_equal(gh_kube_submit(e->pc, &req, on_done, ignore_data, &d, NULL, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->pc, is_done, &d, 20000));
    dt = mono_s() - t0;
    fprintf(stderr, "# watch on a hung apiserver: rc=%d after %.2fs: %s\n", d.rc, dt, d.msg);
    assert_int_equal(d.rc, GH_ETIMEOUT);
    assert_int_equal(d.st.kind, GH_KUBE_R_TRANSPORT);
    assert_true(dt >= 2.4 && dt < 7.0);

    /* a new connection: the connect timeout covers the TLS handshake */
    struct gh_kube_client *fresh = NULL;
    struct gh_kube_client_opts fo = {.connect_timeout_ms = 1000, .request_timeout_ms = 30000};
    assert_int_equal(gh_kube_testenv_apiserver_client(&e->api, &fo, &fresh, &err), GH_OK);
    t0 = mono_s();
    rc = gh_kube_list(fresh, &ref, NULL, NULL, &st, &err);
    dt = mono_s() - t0;
    fprintf(stderr, "# new connection to a hung apiserver: rc=%d after %.2fs: %s\n", rc, dt,
            err.msg);
    gh_kube_client_free(fresh);
    assert_int_equal(rc, GH_ETIMEOUT);
    assert_int_equal(st.kind, GH_KUBE_R_TRANSPORT);
    assert_true(dt >= 0.9 && dt < 7.0);

    assert_int_equal(gh_kube_testenv_apiserver_resume(&e->api, &err), GH_OK);
    rc = GH_EAGAIN;
    for (int i = 0; i < 20 && rc != GH_OK; i++)
        rc = gh_kube_list(e->pc, &ref, NULL, NULL, NULL, &err);
    assert_int_equal(rc, GH_OK);
}

struct sampler {
    struct gh_kube_informer *inf;
    int64_t seen[256];
    int nseen;
};

/* Records each distinct retry delay the informer chose. */
static bool sample_backoff(void *ud)
{
    struct sampler *s = ud;
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(s->inf, &st);
    int64_t d = st.last_backoff_ns;
    if (d > 0 && s->nseen < 256 && (s->nseen == 0 || s->seen[s->nseen - 1] != d))
        s->seen[s->nseen++] = d;
    return false;
}

/* The apiserver is down for 8 s: the informer's retries back off
 * exponentially to the cap, with jitter at the cap too; when it is back the
 * informer resumes and sees what changed meanwhile. */
static void test_reconnect_backoff_with_jitter(void **state)
{
    struct env *e = *state;
    struct gh_err err;
    if (!e->api.pid && gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("start apiserver: %s", err.msg);
    struct gh_kube_client_opts po = {.connect_timeout_ms = 1000};
    assert_int_equal(gh_kube_testenv_apiserver_client(&e->api, &po, &e->pc, &err), GH_OK);
    put_cm(e->c, e->ns, "backoff", "before");
    const int64_t min = 100 * GH_NS_PER_MS, max = 800 * GH_NS_PER_MS;
    struct gh_kube_informer_opts o = {.res = &gh_kube_res_configmaps, .ns = e->ns,
                                      .keep = keep_cm, .nkeep = 1, .backoff_min_ns = min,
                                      .backoff_max_ns = max};
    assert_int_equal(gh_kube_informer_new(e->pc, &o, &(struct gh_kube_handlers){0}, NULL, &e->inf,
                                          &err),
                     GH_OK);
    assert_int_equal(gh_kube_informer_start(e->inf, &err), GH_OK);
    struct has_value hv = {e->inf, e->ns, "backoff", "before"};
    assert_true(gh_kube_testenv_until(e->pc, has_value, &hv, 30000));

    gh_kube_testenv_apiserver_kill(&e->api, SIGKILL);
    struct sampler s = {.inf = e->inf};
    double until = mono_s() + 8.0;
    while (mono_s() < until) { /* retries are >= 50 ms apart: a 5 ms poll sees each */
        gh_kube_client_run(e->pc, 5, NULL);
        sample_backoff(&s);
    }
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(e->inf, &st);
    fprintf(stderr, "# 8 s down: retries=%lu watches=%lu lists=%lu; delays (ms):", st.retries,
            st.watches, st.lists);
    for (int i = 0; i < s.nseen; i++)
        fprintf(stderr, " %.0f", (double)s.seen[i] / GH_NS_PER_MS);
    fprintf(stderr, "\n");
    /* 50+100+200+400 ms, then [400, 800) ms: about 12 in 8 s; a retry loop
     * without backoff would make thousands */
    assert_true(st.retries >= 6);
    assert_true(st.retries <= 25);
    int at_cap = 0, distinct_at_cap = 0;
    for (int i = 0; i < s.nseen; i++) {
        assert_true(s.seen[i] >= min / 2);
        assert_true(s.seen[i] < max);
        if (s.seen[i] >= max / 2) {
            at_cap++;
            bool dup = false;
            for (int k = 0; k < i; k++)
                dup = dup || s.seen[k] == s.seen[i];
            distinct_at_cap += !dup;
        }
    }
    assert_true(s.nseen >= 5);
    assert_true(s.seen[0] < min); /* the first retry comes after [min/2, min) */
    assert_true(at_cap >= 3);
    assert_true(distinct_at_cap >= 3); /* jittered, not one fixed period */

    /* changed while down; seen after the apiserver is back */
    put_cm(e->c, e->ns, "backoff", "while-down");
    if (gh_kube_testenv_apiserver_start(&e->api, &err))
        fail_msg("restart apiserver: %s", err.msg);
    hv.v = "while-down";
    assert_true(gh_kube_testenv_until(e->pc, has_value, &hv, 60000));
    put_cm(e->c, e->ns, "backoff", "after");
    hv.v = "after";
    assert_true(gh_kube_testenv_until(e->pc, has_value, &hv, 30000));
}

struct ev_count {
    int n;
};

static int count_event(void *ud, enum gh_kube_ev_type type, json_t *obj, struct gh_err *err)
{
    (void)type;
    (void)obj;
    (void)err;
    ((struct ev_count *)ud)->n++;
    return GH_OK;
}

struct decode_state {
    struct gh_kube_watch_decoder *dec;
    struct done_state d;
    int data_rc;
    char data_msg[512];
};

static int decode_data(void *ud, const char *data, size_t len, struct gh_err *err)
{
    struct decode_state *s = ud;
    int rc = gh_kube_watch_decoder_feed(s->dec, data, len, err);
    if (rc) {
        s->data_rc = rc;
        snprintf(s->data_msg, sizeof s->data_msg, "%s", err->msg);
    }
    return rc;
}

static void decode_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    on_done(&((struct decode_state *)ud)->d, rc, resp, err);
}

static bool decode_finished(void *ud) { return ((struct decode_state *)ud)->d.done; }

/* Real server endpoints that are not what the client expects: a 2xx text
 * body (/readyz, /metrics) where JSON is expected, and a JSON document
 * (/version) streamed as if it were a watch. Errors with a message, no crash. */
static void test_malformed_server_data(void **state)
{
    struct env *e = *state;
    static const char *const paths[] = {"/readyz", "/metrics"};
    for (size_t i = 0; i < 2; i++) {
        struct gh_kube_req req = {.method = GH_KUBE_GET};
        snprintf(req.path, sizeof req.path, "%s", paths[i]);
        struct gh_kube_resp resp;
        struct gh_err err = {{0}};
        int rc = gh_kube_call(e->c, &req, &resp, &err);
        fprintf(stderr, "# GET %s: rc=%d http=%ld: %.120s\n", paths[i], rc, resp.http, err.msg);
        assert_int_equal(rc, GH_EINVAL);
        assert_int_equal(resp.http, 200);
        assert_null(resp.body);
        assert_non_null(strstr(err.msg, "malformed JSON"));
        assert_non_null(strstr(err.msg, paths[i]));
        gh_kube_resp_clear(&resp);
    }

    struct decode_state s = {0};
    struct ev_count n = {0};
    struct gh_err err;
    assert_int_equal(gh_kube_watch_decoder_new(0, count_event, &n, &s.dec, &err), GH_OK);
    struct gh_kube_req req = {.method = GH_KUBE_GET, .watch = true, .timeout_ms = 20000};
    snprintf(req.path, sizeof req.path, "/version");
    assert_int_equal(gh_kube_submit(e->c, &req, decode_done, decode_data, &s, NULL, &err), GH_OK);
    assert_true(gh_kube_testenv_until(e->c, decode_finished, &s, 20000));
    fprintf(stderr, "# /version as a watch stream: rc=%d: %s\n", s.d.rc, s.d.msg);
    assert_int_equal(s.d.rc, GH_EINVAL);
    assert_int_equal(s.data_rc, GH_EINVAL);
    assert_true(strlen(s.d.msg) > 0);
    assert_int_equal(n.n, 0);
    gh_kube_watch_decoder_free(s.dec);

    /* the client is still fine */
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, e->ns};
    assert_int_equal(gh_kube_get(e->c, &ref, NULL, NULL, &err), GH_OK);
}

static bool got_bookmark(void *ud)
{
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(ud, &st);
    return st.bookmarks >= 1;
}

/* The informer started in setup (watch timeout 300-600 s, allowWatchBookmarks)
 * gets the apiserver's periodic BOOKMARK (about a minute after the watch
 * opened) on its single watch, and its resourceVersion follows it. */
static void test_bookmarks(void **state)
{
    struct env *e = *state;
    put_cm(e->c, e->ns, "bookmark", "x");
    assert_true(gh_kube_testenv_until(e->c, got_bookmark, e->bm, 120000));
    struct gh_kube_informer_stats st;
    gh_kube_informer_stats(e->bm, &st);
    fprintf(stderr, "# first bookmark %.1fs after the informer started: watches=%lu lists=%lu "
                    "events=%lu bookmarks=%lu rv=%s\n",
            mono_s() - e->bm_started, st.watches, st.lists, st.events, st.bookmarks,
            gh_kube_informer_rv(e->bm));
    assert_int_equal(st.lists, 1);
    assert_int_equal(st.watch_errors, 0);
    assert_true(st.events >= 1);
    /* a later change still arrives on the same watch */
    put_cm(e->c, e->ns, "bookmark", "y");
    struct has_value hv = {e->bm, e->ns, "bookmark", "y"};
    assert_true(gh_kube_testenv_until(e->c, has_value, &hv, 30000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_server_timeout, test_teardown),
        cmocka_unit_test_teardown(test_client_timeouts_on_hung_apiserver, test_teardown),
        cmocka_unit_test_teardown(test_reconnect_backoff_with_jitter, test_teardown),
        cmocka_unit_test_teardown(test_malformed_server_data, test_teardown),
        cmocka_unit_test_teardown(test_bookmarks, test_teardown),
    };
    return cmocka_run_group_tests_name("kube_reconnect", tests, setup, teardown);
}
