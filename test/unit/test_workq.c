/* test_workq.c - the ingest's worker queue (src/ingest/workq.c): one
 * answer per job whatever happens (done, late, stopped), refusals at once
 * when full or when every worker is stalled, a late job's run still ending
 * (its effect kept), urgent jobs first, and every job released once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/mono.h"
#include "common/timeutil.h"
#include "ingest/workq.h"

struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
};

static struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
static atomic_int released, order_n;
static int order[16];

struct job {
    struct gh_workq_job j; /* first */
    int id;
    bool block; /* run waits for the gate */
    atomic_int answers, runs;
    atomic_int end; /* an enum gh_workq_end, -1 before the answer */
    atomic_bool ran_to_end;
    bool heap;
};

static void run(struct gh_workq_job *wj)
{
    struct job *j = (struct job *)wj;
    atomic_fetch_add(&j->runs, 1);
    int k = atomic_fetch_add(&order_n, 1);
    if (k < 16)
        order[k] = j->id;
    if (j->block) {
        pthread_mutex_lock(&g.mu);
        while (!g.open)
            pthread_cond_wait(&g.cv, &g.mu);
        pthread_mutex_unlock(&g.mu);
    }
    atomic_store(&j->ran_to_end, true);
}

static void answer(struct gh_workq_job *wj, enum gh_workq_end end)
{
    struct job *j = (struct job *)wj;
    atomic_store(&j->end, (int)end);
    atomic_fetch_add(&j->answers, 1);
}

static void release(struct gh_workq_job *wj)
{
    (void)wj;
    atomic_fetch_add(&released, 1);
}

static void init(struct job *j, int id, bool block)
{
    memset(j, 0, sizeof *j);
    j->j.run = run;
    j->j.answer = answer;
    j->j.release = release;
    j->id = id;
    j->block = block;
    atomic_store(&j->end, -1);
}

static void open_gate(bool open)
{
    pthread_mutex_lock(&g.mu);
    g.open = open;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
}

static bool wait_answers(struct job *j, int n, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        if (atomic_load(&j->answers) >= n)
            return true;
        usleep(5000);
    }
    return atomic_load(&j->answers) >= n;
}

/* Until n jobs run (a worker took them), polled without a fixed sleep. */
static void wait_running(struct gh_workq *q, size_t n)
{
    struct gh_workq_stats st;
    for (int i = 0; i < 2000; i++) {
        gh_workq_stats(q, &st);
        if (st.running == n)
            return;
        usleep(5000);
    }
    fail_msg("no worker took the job in 10 s");
}

static int reset(void **state)
{
    (void)state;
    open_gate(false);
    atomic_store(&released, 0);
    atomic_store(&order_n, 0);
    return 0;
}

/* a job that ends in time: one DONE answer, released once */
static void test_done(void **state)
{
    (void)state;
    struct gh_workq *q;
    struct gh_err err;
    struct gh_workq_opts o = {.name = "t", .threads = 1, .cap = 4};
    assert_int_equal(gh_workq_new(&o, &q, &err), GH_OK);
    struct job a;
    init(&a, 1, false);
    char why[128];
    assert_int_equal(gh_workq_push(q, &a.j, false, why, sizeof why), GH_OK);
    assert_true(wait_answers(&a, 1, 5000));
    gh_workq_free(q);
    assert_int_equal(atomic_load(&a.end), GH_WORKQ_DONE);
    assert_int_equal(atomic_load(&a.answers), 1);
    assert_int_equal(atomic_load(&released), 1);
}

/* a run that hangs: answered LATE at its deadline, the run still ends
 * later (and is not answered again); the jobs waiting behind it are
 * answered LATE without running; once the worker is stalled a push is
 * refused at once; a full queue too */
static void test_late_stalled_full(void **state)
{
    (void)state;
    struct gh_workq *q;
    struct gh_err err;
    struct gh_workq_opts o = {.name = "commit",
                              .threads = 1,
                              .cap = 2,
                              .wait_ns = 300 * GH_NS_PER_MS,
                              .stall_ns = 150 * GH_NS_PER_MS};
    assert_int_equal(gh_workq_new(&o, &q, &err), GH_OK);
    struct job hung, w1, w2, w3;
    init(&hung, 1, true);
    init(&w1, 2, false);
    init(&w2, 3, false);
    init(&w3, 4, false);
    char why[128];
    int64_t t0 = gh_mono_ns();
    assert_int_equal(gh_workq_push(q, &hung.j, false, why, sizeof why), GH_OK);
    wait_running(q, 1); /* the worker took it */
    assert_int_equal(gh_workq_push(q, &w1.j, false, why, sizeof why), GH_OK);
    assert_int_equal(gh_workq_push(q, &w2.j, false, why, sizeof why), GH_OK);
    assert_int_equal(gh_workq_push(q, &w3.j, false, why, sizeof why), GH_EAGAIN);
    assert_non_null(strstr(why, "2 commit jobs wait already"));
    assert_true(wait_answers(&hung, 1, 5000));
    double late_ms = (double)(gh_mono_ns() - t0) / 1e6;
    assert_int_equal(atomic_load(&hung.end), GH_WORKQ_LATE);
    assert_true(wait_answers(&w1, 1, 5000));
    assert_true(wait_answers(&w2, 1, 5000));
    assert_int_equal(atomic_load(&w1.end), GH_WORKQ_LATE);
    assert_int_equal(atomic_load(&w1.runs), 0);
    /* the worker is on hung for over 150 ms: stalled */
    assert_int_equal(gh_workq_push(q, &w3.j, false, why, sizeof why), GH_EAGAIN);
    assert_non_null(strstr(why, "the commit in progress has not ended for"));
    struct gh_workq_stats st;
    gh_workq_stats(q, &st);
    assert_int_equal(st.late, 3);
    assert_int_equal(st.refused_full, 1);
    assert_int_equal(st.refused_stalled, 1);
    assert_int_equal(st.running, 1);
    assert_false(atomic_load(&hung.ran_to_end));
    open_gate(true);
    gh_workq_free(q); /* waits for hung's run */
    assert_true(atomic_load(&hung.ran_to_end));
    assert_int_equal(atomic_load(&hung.answers), 1);
    assert_int_equal(atomic_load(&released), 3); /* hung, w1, w2; w3 never queued */
    print_message("late answer after %.0f ms (deadline 300 ms)\n", late_ms);
    assert_true(late_ms >= 290);
}

/* urgent jobs go ahead of those waiting */
static void test_urgent_first(void **state)
{
    (void)state;
    struct gh_workq *q;
    struct gh_err err;
    struct gh_workq_opts o = {.name = "review",
                              .threads = 1,
                              .cap = 8,
                              .wait_ns = 60 * GH_NS_PER_S,
                              .stall_ns = 60 * GH_NS_PER_S};
    assert_int_equal(gh_workq_new(&o, &q, &err), GH_OK);
    struct job first, a, b, u;
    init(&first, 1, true);
    init(&a, 2, false);
    init(&b, 3, false);
    init(&u, 4, false);
    char why[128];
    assert_int_equal(gh_workq_push(q, &first.j, false, why, sizeof why), GH_OK);
    wait_running(q, 1);
    assert_int_equal(gh_workq_push(q, &a.j, false, why, sizeof why), GH_OK);
    assert_int_equal(gh_workq_push(q, &b.j, false, why, sizeof why), GH_OK);
    assert_int_equal(gh_workq_push(q, &u.j, true, why, sizeof why), GH_OK);
    open_gate(true);
    assert_true(wait_answers(&b, 1, 5000));
    gh_workq_free(q);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 4); /* the urgent one */
    assert_int_equal(order[2], 2);
    assert_int_equal(order[3], 3);
    assert_int_equal(atomic_load(&released), 4);
}

static atomic_bool answered_before_open;

static void *opener(void *arg)
{
    struct job *j = arg;
    usleep(200 * 1000);
    atomic_store(&answered_before_open, atomic_load(&j->answers) == 1);
    open_gate(true);
    return NULL;
}

/* stopping answers every job STOPPED at once, the waiting ones without a
 * run, and lets the run in progress end */
static void test_stop(void **state)
{
    (void)state;
    struct gh_workq *q;
    struct gh_err err;
    struct gh_workq_opts o = {.name = "t", .threads = 1, .cap = 8, .wait_ns = 60 * GH_NS_PER_S};
    assert_int_equal(gh_workq_new(&o, &q, &err), GH_OK);
    struct job running, waiting;
    init(&running, 1, true);
    init(&waiting, 2, false);
    char why[128];
    assert_int_equal(gh_workq_push(q, &running.j, false, why, sizeof why), GH_OK);
    wait_running(q, 1);
    assert_int_equal(gh_workq_push(q, &waiting.j, false, why, sizeof why), GH_OK);
    /* the gate opens 200 ms after the stop began: by then both were
     * answered, the run still in progress */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, opener, &running), 0);
    gh_workq_stop(q);
    pthread_join(th, NULL);
    assert_true(atomic_load(&answered_before_open));
    assert_true(atomic_load(&running.ran_to_end));
    assert_int_equal(atomic_load(&running.end), GH_WORKQ_STOPPED);
    assert_int_equal(atomic_load(&running.answers), 1);
    assert_int_equal(atomic_load(&waiting.answers), 1);
    assert_int_equal(atomic_load(&waiting.runs), 0);
    assert_int_equal(atomic_load(&waiting.end), GH_WORKQ_STOPPED);
    assert_int_equal(gh_workq_push(q, &waiting.j, false, why, sizeof why), GH_EAGAIN);
    gh_workq_free(q);
    assert_int_equal(atomic_load(&released), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_done, reset),
        cmocka_unit_test_setup(test_late_stalled_full, reset),
        cmocka_unit_test_setup(test_urgent_first, reset),
        cmocka_unit_test_setup(test_stop, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
