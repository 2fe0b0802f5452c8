/* test_agent_probe.c - unit tests of the health-check runner: /bin/true and
 * /bin/false, exit codes and captured output, a sleeping command killed at
 * its timeout, leftovers of the process group killed, bounded and sanitised
 * output, a command that cannot start, death by signal; and the worker:
 * on-demand requests, schedules, latest results, stop killing a running
 * check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probe.h"
#include "signal/signal_json.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void run(const char *const *argv, int64_t timeout_ns, size_t output_max,
                struct gh_probe_outcome *o, int want_rc)
{
    struct gh_probe_check c = {.name = "t", .argv = argv, .timeout_ns = timeout_ns, .gpu = -1};
    struct gh_err err;
    int rc = gh_probe_run_check(&c, output_max, -1, o, &err);
    if (rc != want_rc)
        fail_msg("rc %d (%s), wanted %d", rc, err.msg, want_rc);
    assert_non_null(o->detail);
}

static void test_true_false(void **st)
{
    (void)st;
    struct gh_probe_outcome o;
    const char *t[] = {"/bin/true", NULL};
    run(t, 0, 0, &o, GH_OK);
    assert_true(o.passed);
    assert_int_equal(o.exit_code, 0);
    assert_string_equal(o.detail, "exit 0");
    gh_probe_outcome_clear(&o);

    const char *f[] = {"/bin/false", NULL};
    run(f, 0, 0, &o, GH_OK);
    assert_false(o.passed);
    assert_int_equal(o.exit_code, 1);
    assert_string_equal(o.detail, "exit 1");
    gh_probe_outcome_clear(&o);
}

static void test_output(void **st)
{
    (void)st;
    struct gh_probe_outcome o;
    const char *a[] = {"/bin/sh", "-c", "echo hello; echo err >&2; exit 3", NULL};
    run(a, 0, 0, &o, GH_OK);
    assert_false(o.passed);
    assert_string_equal(o.detail, "exit 3: hello\nerr");
    gh_probe_outcome_clear(&o);

    /* bounded: the last bytes are kept */
    const char *b[] = {"/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done",
                       NULL};
    run(b, 0, 64, &o, GH_OK);
    assert_true(o.passed);
    assert_true(strlen(o.detail) <= 64 + 16);
    assert_non_null(strstr(o.detail, "exit 0: ..."));
    assert_non_null(strstr(o.detail, "line2999"));
    gh_probe_outcome_clear(&o);

    /* control bytes and invalid UTF-8 become '?', valid UTF-8 stays */
    const char *c[] = {"/bin/sh", "-c", "printf 'a\\001b\\377c\\303\\251'", NULL};
    run(c, 0, 0, &o, GH_OK);
    assert_string_equal(o.detail, "exit 0: a?b?c\xc3\xa9");
    struct gh_signal s;
    gh_signal_init(&s);
    s.detail = o.detail; /* borrowed: the codec accepts it */
    char *json = NULL;
    s.source = GH_SRC_PROBE;
    s.kind = GH_KIND_PROBE_RESULT;
    s.node = (char *)"n";
    s.check = (char *)"c";
    assert_int_equal(gh_signal_encode(&s, &json, NULL), GH_OK);
    free(json);
    gh_probe_outcome_clear(&o);
}

static void test_timeout(void **st)
{
    (void)st;
    struct gh_probe_outcome o;
    const char *a[] = {"/bin/sleep", "30", NULL};
    int64_t t0 = mono_ms();
    run(a, 200 * GH_NS_PER_MS, 0, &o, GH_OK);
    int64_t ms = mono_ms() - t0;
    assert_true(ms >= 190 && ms < 3000);
    assert_false(o.passed);
    assert_true(o.timed_out);
    assert_string_equal(o.detail, "timed out after 0.2 s");
    gh_probe_outcome_clear(&o);

    /* output before the timeout is kept */
    const char *b[] = {"/bin/sh", "-c", "echo working; exec sleep 30", NULL};
    run(b, 300 * GH_NS_PER_MS, 0, &o, GH_OK);
    assert_true(o.timed_out);
    assert_string_equal(o.detail, "timed out after 0.3 s: working");
    gh_probe_outcome_clear(&o);
}

static void test_group_leftovers(void **st)
{
    (void)st;
    struct gh_probe_outcome o;
    /* The command exits at once but leaves a child holding the output pipe:
     * the group is killed, the run does not wait for the child. */
    const char *a[] = {"/bin/sh", "-c", "sleep 30 & echo started", NULL};
    int64_t t0 = mono_ms();
    run(a, 20 * GH_NS_PER_S, 0, &o, GH_OK);
    assert_true(mono_ms() - t0 < 5000);
    assert_true(o.passed);
    assert_string_equal(o.detail, "exit 0: started");
    gh_probe_outcome_clear(&o);
}

static void test_cannot_start_and_signal(void **st)
{
    (void)st;
    struct gh_probe_outcome o;
    const char *a[] = {"/nonexistent/check", NULL};
    run(a, 0, 0, &o, GH_EIO);
    assert_false(o.passed);
    assert_non_null(strstr(o.detail, "cannot start /nonexistent/check"));
    gh_probe_outcome_clear(&o);

    const char *b[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
    run(b, 0, 0, &o, GH_OK);
    assert_false(o.passed);
    assert_int_equal(o.term_signal, 9);
    assert_string_equal(o.detail, "killed by signal 9");
    gh_probe_outcome_clear(&o);
}

/* ---- the worker ---- */

#define MAX_SIGS 64
struct recorder {
    pthread_mutex_t mu;
    struct gh_signal sigs[MAX_SIGS];
    int n;
    int bad_json;
};

static void record(void *ctx, const struct gh_signal *s)
{
    struct recorder *r = ctx;
    char *json = NULL;
    pthread_mutex_lock(&r->mu);
    if (gh_signal_encode(s, &json, NULL) != GH_OK)
        r->bad_json++;
    free(json);
    if (r->n < MAX_SIGS && gh_signal_copy(&r->sigs[r->n], s, NULL) == GH_OK)
        r->n++;
    pthread_mutex_unlock(&r->mu);
}

static int count_check(struct recorder *r, const char *name)
{
    int k = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->sigs[i].check, name) == 0)
            k++;
    pthread_mutex_unlock(&r->mu);
    return k;
}

static bool wait_check(struct recorder *r, const char *name, int n, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (count_check(r, name) >= n)
            return true;
        usleep(1000);
    }
    return false;
}

static void test_worker(void **st)
{
    (void)st;
    struct recorder r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    const char *t[] = {"/bin/true", NULL};
    const char *f[] = {"/bin/sh", "-c", "echo bad checksum; exit 2", NULL};
    const char *s[] = {"/bin/sleep", "30", NULL};
    struct gh_probe_check checks[] = {
        {.name = "gemm_checksum", .argv = t, .gpu = 3},
        {.name = "pcie_bw", .argv = f, .interval_ns = 150 * GH_NS_PER_MS, .gpu = -1},
        {.name = "slow", .argv = s, .timeout_ns = 60 * GH_NS_PER_S, .gpu = -1},
    };
    struct gh_probe_opts o;
    struct gh_probe *p = NULL;
    struct gh_err err;
    gh_probe_opts_init(&o);
    o.node = "gpu-09";
    o.checks = checks;
    o.n_checks = 3;
    o.emit = record;
    o.emit_ctx = &r;
    assert_int_equal(gh_probe_new(&o, &p, &err), GH_OK);
    assert_int_equal(gh_probe_request(p, "gemm_checksum", NULL), GH_OK); /* before start */
    assert_int_equal(gh_probe_request(p, "nope", &err), GH_ENOTFOUND);
    assert_int_equal(gh_probe_start(p, NULL), GH_OK);
    assert_true(wait_check(&r, "gemm_checksum", 1, 5000));
    assert_true(wait_check(&r, "pcie_bw", 2, 5000)); /* scheduled, twice */

    pthread_mutex_lock(&r.mu);
    for (int i = 0; i < r.n; i++) {
        assert_int_equal(r.sigs[i].source, GH_SRC_PROBE);
        assert_int_equal(r.sigs[i].kind, GH_KIND_PROBE_RESULT);
        assert_string_equal(r.sigs[i].node, "gpu-09");
        if (strcmp(r.sigs[i].check, "gemm_checksum") == 0) {
            assert_true(r.sigs[i].passed);
            assert_int_equal(r.sigs[i].gpu, 3);
            assert_string_equal(r.sigs[i].detail, "exit 0");
        } else {
            assert_false(r.sigs[i].passed);
            assert_int_equal(r.sigs[i].gpu, -1);
            assert_string_equal(r.sigs[i].detail, "exit 2: bad checksum");
        }
    }
    assert_int_equal(r.bad_json, 0);
    pthread_mutex_unlock(&r.mu);

    struct gh_probe_last l;
    assert_int_equal(gh_probe_last(p, "pcie_bw", &l), GH_OK);
    assert_true(l.has_run);
    assert_false(l.passed);
    assert_true(l.runs >= 2 && l.failures == l.runs);
    assert_int_equal(gh_probe_last(p, "slow", &l), GH_OK);
    assert_false(l.has_run);
    assert_int_equal(gh_probe_last(p, "x", &l), GH_ENOTFOUND);

    /* a request never blocks on the check; stop kills the running one */
    int64_t t0 = mono_ms();
    assert_int_equal(gh_probe_request(p, "slow", NULL), GH_OK);
    assert_int_equal(gh_probe_request(p, "slow", NULL), GH_OK); /* not queued twice */
    assert_true(mono_ms() - t0 < 100);
    usleep(300000);
    t0 = mono_ms();
    gh_probe_stop(p);
    assert_true(mono_ms() - t0 < 3000);
    assert_int_equal(count_check(&r, "slow"), 0); /* stopped: no result */
    gh_probe_free(p);
    for (int i = 0; i < r.n; i++)
        gh_signal_clear(&r.sigs[i]);
    pthread_mutex_destroy(&r.mu);
}

static void test_validation(void **st)
{
    (void)st;
    const char *rel[] = {"true", NULL};
    const char *abs[] = {"/bin/true", NULL};
    struct gh_probe_check c[2] = {{.name = "a", .argv = rel}, {.name = "a", .argv = abs}};
    struct gh_probe_opts o;
    struct gh_probe *p = NULL;
    gh_probe_opts_init(&o);
    o.node = "n";
    o.emit = record;
    o.checks = c;
    o.n_checks = 1;
    assert_int_equal(gh_probe_new(&o, &p, NULL), GH_EINVAL);
    c[0].argv = abs;
    o.n_checks = 2;
    assert_int_equal(gh_probe_new(&o, &p, NULL), GH_EINVAL); /* same name twice */
    c[1].name = "";
    assert_int_equal(gh_probe_new(&o, &p, NULL), GH_EINVAL);
    o.n_checks = 1;
    o.node = NULL;
    assert_int_equal(gh_probe_new(&o, &p, NULL), GH_EINVAL);
    o.node = "n";
    assert_int_equal(gh_probe_new(&o, &p, NULL), GH_OK);
    gh_probe_free(p);
    gh_probe_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_true_false),
        cmocka_unit_test(test_output),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_group_leftovers),
        cmocka_unit_test(test_cannot_start_and_signal),
        cmocka_unit_test(test_worker),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
