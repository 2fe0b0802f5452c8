/* test_agent_worker.c - unit tests of the agent's worker thread: a periodic
 * worker runs at once and then every period until stopped, a stop ends a
 * long wait at once and no run follows it; a looping worker (period 0) is
 * woken by kicks, by the stop (its wait_until returns false) and, in its
 * own poll(), by the stop fd; opts.wake is called on stop; a second start
 * is refused and a stopped worker starts again. Waits are on conditions
 * (a counter under a mutex), never on sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include <cmocka.h>

#include "agent/worker.h"
#include "common/mono.h"
#include "common/timeutil.h"

struct counter {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int runs, kicks, wakes, polled;
    bool saw_stop_fd;
};

static void counter_init(struct counter *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cond, NULL);
}

static void counter_destroy(struct counter *c)
{
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
}

static void bump(struct counter *c, int *field)
{
    pthread_mutex_lock(&c->mu);
    (*field)++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
}

static int get(struct counter *c, const int *field)
{
    pthread_mutex_lock(&c->mu);
    int v = *field;
    pthread_mutex_unlock(&c->mu);
    return v;
}

/* Waits until *field >= n (the test's timeout bounds a hang). */
static void wait_at_least(struct counter *c, const int *field, int n)
{
    pthread_mutex_lock(&c->mu);
    while (*field < n)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void count_run(void *arg, struct gh_worker *w)
{
    struct counter *c = arg;
    assert_false(gh_worker_stopping(w));
    bump(c, &c->runs);
}

static void periodic(enum gh_worker_cadence cadence)
{
    struct counter c;
    counter_init(&c);
    struct gh_worker *w = NULL;
    struct gh_worker_opts o = {.name = "t", .period_ns = 2 * GH_NS_PER_MS, .cadence = cadence,
                               .run = count_run, .arg = &c};
    assert_int_equal(gh_worker_new(&o, &w, NULL), GH_OK);
    assert_false(gh_worker_running(w));
    assert_int_equal(gh_worker_start(w, NULL), GH_OK);
    assert_true(gh_worker_running(w));
    struct gh_err err;
    assert_int_equal(gh_worker_start(w, &err), GH_EINVAL);
    assert_string_equal(err.msg, "t: already started");
    wait_at_least(&c, &c.runs, 5);
    gh_worker_stop(w);
    assert_false(gh_worker_running(w));
    int after = get(&c, &c.runs);
    gh_worker_stop(w); /* idempotent */
    assert_int_equal(get(&c, &c.runs), after); /* joined: no run after the stop */
    /* and again */
    assert_int_equal(gh_worker_start(w, NULL), GH_OK);
    wait_at_least(&c, &c.runs, after + 3);
    gh_worker_free(w);
    counter_destroy(&c);
}

static void test_periodic_after(void **st)
{
    (void)st;
    periodic(GH_WORKER_AFTER);
}

static void test_periodic_rate(void **st)
{
    (void)st;
    periodic(GH_WORKER_RATE);
}

/* An hour's period: the first run is at once, the stop does not wait the hour. */
static void test_stop_ends_the_wait(void **st)
{
    (void)st;
    struct counter c;
    counter_init(&c);
    struct gh_worker *w = NULL;
    struct gh_worker_opts o = {.name = "t", .period_ns = 3600 * GH_NS_PER_S,
                               .cadence = GH_WORKER_RATE, .run = count_run, .arg = &c};
    assert_int_equal(gh_worker_new(&o, &w, NULL), GH_OK);
    assert_int_equal(gh_worker_start(w, NULL), GH_OK);
    wait_at_least(&c, &c.runs, 1);
    int64_t t0 = gh_mono_ns();
    gh_worker_stop(w);
    assert_true(gh_mono_ns() - t0 < 60 * GH_NS_PER_S);
    assert_int_equal(get(&c, &c.runs), 1);
    gh_worker_free(w);
    counter_destroy(&c);
}

/* period 0: the run is a loop of its own, waiting for kicks without a deadline. */
static void kick_loop(void *arg, struct gh_worker *w)
{
    struct counter *c = arg;
    bump(c, &c->runs);
    while (gh_worker_wait_until(w, INT64_MAX))
        bump(c, &c->kicks);
    assert_true(gh_worker_stopping(w));
}

static void on_wake(void *arg)
{
    struct counter *c = arg;
    bump(c, &c->wakes);
}

static void test_loop_kicks_and_wake(void **st)
{
    (void)st;
    struct counter c;
    counter_init(&c);
    struct gh_worker *w = NULL;
    struct gh_worker_opts o = {.name = "loop", .run = kick_loop, .wake = on_wake, .arg = &c};
    assert_int_equal(gh_worker_new(&o, &w, NULL), GH_OK);
    assert_int_equal(gh_worker_start(w, NULL), GH_OK);
    wait_at_least(&c, &c.runs, 1);
    for (int i = 1; i <= 3; i++) {
        gh_worker_kick(w);
        wait_at_least(&c, &c.kicks, i); /* each kick ends one wait */
    }
    assert_int_equal(get(&c, &c.wakes), 0);
    gh_worker_stop(w);
    assert_int_equal(get(&c, &c.wakes), 1);
    assert_int_equal(get(&c, &c.runs), 1); /* run once, not again */
    gh_worker_free(w);
    assert_int_equal(get(&c, &c.wakes), 1); /* free of a stopped worker wakes nothing */
    counter_destroy(&c);
}

/* A deadline ends a wait with true (not stopping). */
static void deadline_loop(void *arg, struct gh_worker *w)
{
    struct counter *c = arg;
    while (!gh_worker_stopping(w)) {
        int64_t at = gh_mono_ns() + GH_NS_PER_MS;
        if (gh_worker_wait_until(w, at)) {
            assert_true(gh_mono_ns() >= at);
            bump(c, &c->runs);
        }
    }
}

static void test_deadline(void **st)
{
    (void)st;
    struct counter c;
    counter_init(&c);
    struct gh_worker *w = NULL;
    struct gh_worker_opts o = {.name = "d", .run = deadline_loop, .arg = &c};
    assert_int_equal(gh_worker_new(&o, &w, NULL), GH_OK);
    assert_int_equal(gh_worker_start(w, NULL), GH_OK);
    wait_at_least(&c, &c.runs, 3);
    gh_worker_free(w); /* stops it */
    counter_destroy(&c);
}

/* The stop fd ends the run's own poll() (a child process's pipes in probes). */
static void poll_loop(void *arg, struct gh_worker *w)
{
    struct counter *c = arg;
    struct pollfd pf = {.fd = gh_worker_stop_fd(w), .events = POLLIN};
    bump(c, &c->polled);
    int n = poll(&pf, 1, -1);
    pthread_mutex_lock(&c->mu);
    c->saw_stop_fd = n == 1 && (pf.revents & POLLIN);
    pthread_mutex_unlock(&c->mu);
}

static void test_stop_fd(void **st)
{
    (void)st;
    struct counter c;
    counter_init(&c);
    struct gh_worker *w = NULL;
    struct gh_worker_opts o = {.name = "p", .run = poll_loop, .arg = &c};
    assert_int_equal(gh_worker_new(&o, &w, NULL), GH_OK);
    for (int round = 1; round <= 2; round++) { /* the fd is reset for a restart */
        assert_int_equal(gh_worker_start(w, NULL), GH_OK);
        wait_at_least(&c, &c.polled, round);
        struct pollfd pf = {.fd = gh_worker_stop_fd(w), .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 0), 0); /* not readable before the stop */
        gh_worker_stop(w);
        assert_true(c.saw_stop_fd);
        c.saw_stop_fd = false;
    }
    gh_worker_free(w);
    counter_destroy(&c);
}

static void test_bad_opts(void **st)
{
    (void)st;
    struct gh_worker *w = (struct gh_worker *)1;
    struct gh_err err;
    struct gh_worker_opts o = {.name = "x"};
    assert_int_equal(gh_worker_new(&o, &w, &err), GH_EINVAL);
    assert_null(w);
    o.run = count_run;
    o.period_ns = -1;
    assert_int_equal(gh_worker_new(&o, &w, &err), GH_EINVAL);
    gh_worker_stop(NULL);
    gh_worker_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_periodic_after),
        cmocka_unit_test(test_periodic_rate),
        cmocka_unit_test(test_stop_ends_the_wait),
        cmocka_unit_test(test_loop_kicks_and_wake),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_stop_fd),
        cmocka_unit_test(test_bad_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
