/* workq.c - a bounded job queue with worker threads of its own and a timer
 * thread that answers a job late once its deadline passes (workq.h). */
#include "ingest/workq.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>

#include "common/mono.h"
#include "common/timeutil.h"

#define TICK_NS (20 * GH_NS_PER_MS) /* the timer's period: deadlines hold to it */
#define MAX_THREADS 64

struct worker {
    struct gh_workq *q;
    pthread_t th;
    bool started;
    struct gh_workq_job *job; /* running, or NULL */
    int64_t since_ns;         /* when job started */
};

struct gh_workq {
    char name[32];
    size_t cap;
    int64_t wait_ns, stall_ns;
    unsigned nthreads;

    pthread_mutex_t mu;  /* everything below; never held across a callback */
    pthread_cond_t work; /* a job waits, or stopping */
    pthread_cond_t tick; /* the timer's sleep (stopping wakes it) */
    struct gh_workq_job *head, *tail;
    size_t waiting;
    bool stopping, stopped;
    struct worker *w; /* nthreads */
    pthread_t timer;
    bool timer_started;
    struct gh_workq_stats st;
};

/* Drops one reference (mu held); true when the caller must release j. */
static bool unref(struct gh_workq_job *j) { return --j->refs == 0; }

static void drop(struct gh_workq *q, struct gh_workq_job *j)
{
    pthread_mutex_lock(&q->mu);
    bool last = unref(j);
    pthread_mutex_unlock(&q->mu);
    if (last)
        j->release(j);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct gh_workq *q = w->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stopping && !q->head)
            pthread_cond_wait(&q->work, &q->mu);
        if (q->stopping)
            break;
        struct gh_workq_job *j = q->head;
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        q->waiting--;
        w->job = j;
        w->since_ns = gh_mono_ns();
        pthread_mutex_unlock(&q->mu);

        j->run(j);

        pthread_mutex_lock(&q->mu);
        w->job = NULL;
        bool answer = !j->answered;
        j->answered = true;
        if (answer)
            q->st.done++;
        pthread_mutex_unlock(&q->mu);
        if (answer) {
            j->answer(j, GH_WORKQ_DONE);
            drop(q, j); /* the answer's reference */
        }
        pthread_mutex_lock(&q->mu);
        bool last = unref(j); /* the run's reference */
        pthread_mutex_unlock(&q->mu);
        if (last)
            j->release(j);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Takes the jobs to answer now (mu held): waiting ones past their
 * deadline (or all, when stopping) leave the queue and lose their run's
 * reference; running ones past it (or all) are marked answered. Returns
 * them linked by reap_next. */
static struct gh_workq_job *collect(struct gh_workq *q, int64_t now, bool all)
{
    struct gh_workq_job *out = NULL, **pp = &q->head, *prev = NULL;
    while (*pp) {
        struct gh_workq_job *j = *pp;
        if (all || j->deadline_ns <= now) {
            *pp = j->next;
            if (q->tail == j)
                q->tail = prev;
            q->waiting--;
            j->refs--; /* it will never run; the answer's reference stays */
            j->answered = true;
            j->reap_next = out;
            out = j;
            if (!all)
                q->st.late++;
        } else {
            prev = j;
            pp = &j->next;
        }
    }
    for (unsigned i = 0; i < q->nthreads; i++) {
        struct gh_workq_job *j = q->w[i].job;
        if (j && !j->answered && (all || j->deadline_ns <= now)) {
            j->answered = true;
            j->reap_next = out;
            out = j;
            if (!all)
                q->st.late++;
        }
    }
    return out;
}

static void answer_all(struct gh_workq *q, struct gh_workq_job *list, enum gh_workq_end end)
{
    while (list) {
        struct gh_workq_job *j = list;
        list = j->reap_next;
        j->answer(j, end);
        drop(q, j);
    }
}

static void *timer_main(void *arg)
{
    struct gh_workq *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stopping) {
        struct gh_workq_job *late = collect(q, gh_mono_ns(), false);
        if (late) {
            pthread_mutex_unlock(&q->mu);
            answer_all(q, late, GH_WORKQ_LATE);
            pthread_mutex_lock(&q->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t t = (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec + TICK_NS;
        ts.tv_sec = (time_t)(t / GH_NS_PER_S);
        ts.tv_nsec = (long)(t % GH_NS_PER_S);
        pthread_cond_timedwait(&q->tick, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int gh_workq_new(const struct gh_workq_opts *o, struct gh_workq **out, struct gh_err *err)
{
    *out = NULL;
    struct gh_workq *q = calloc(1, sizeof *q);
    unsigned n = o->threads ? o->threads : 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    if (!q || !(q->w = calloc(n, sizeof *q->w))) {
        free(q);
        return gh_err_set(err, GH_ENOMEM, "%s queue: out of memory", o->name ? o->name : "work");
    }
    snprintf(q->name, sizeof q->name, "%s", o->name ? o->name : "work");
    q->nthreads = n;
    q->cap = o->cap ? o->cap : 64;
    q->wait_ns = o->wait_ns > 0 ? o->wait_ns : 2 * GH_NS_PER_S;
    q->stall_ns = o->stall_ns > 0 ? o->stall_ns : GH_NS_PER_S;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->tick, &ca);
    pthread_condattr_destroy(&ca);
    for (unsigned i = 0; i < n; i++) {
        q->w[i].q = q;
        if (pthread_create(&q->w[i].th, NULL, worker_main, &q->w[i]) != 0)
            goto fail;
        q->w[i].started = true;
    }
    if (pthread_create(&q->timer, NULL, timer_main, q) != 0)
        goto fail;
    q->timer_started = true;
    *out = q;
    return GH_OK;
fail:
    gh_err_set(err, GH_EIO, "%s queue: cannot start its threads", q->name);
    gh_workq_free(q);
    return GH_EIO;
}

int gh_workq_push(struct gh_workq *q, struct gh_workq_job *j, bool urgent, char *why, size_t cap)
{
    int64_t now = gh_mono_ns();
    pthread_mutex_lock(&q->mu);
    if (q->stopping) {
        pthread_mutex_unlock(&q->mu);
        snprintf(why, cap, "shutting down");
        return GH_EAGAIN;
    }
    if (q->waiting >= q->cap) {
        q->st.refused_full++;
        pthread_mutex_unlock(&q->mu);
        snprintf(why, cap, "%zu %s jobs wait already", q->cap, q->name);
        return GH_EAGAIN;
    }
    unsigned stalled = 0;
    int64_t oldest = now;
    for (unsigned i = 0; i < q->nthreads; i++)
        if (q->w[i].job && now - q->w[i].since_ns > q->stall_ns) {
            stalled++;
            oldest = q->w[i].since_ns < oldest ? q->w[i].since_ns : oldest;
        }
    if (stalled == q->nthreads) {
        q->st.refused_stalled++;
        pthread_mutex_unlock(&q->mu);
        snprintf(why, cap, "the %s in progress has not ended for %.1f s", q->name,
                 (double)(now - oldest) / 1e9);
        return GH_EAGAIN;
    }
    j->refs = 2; /* the run's and the answer's */
    j->answered = false;
    j->deadline_ns = now + q->wait_ns;
    j->reap_next = NULL;
    if (urgent) {
        j->next = q->head;
        q->head = j;
        if (!q->tail)
            q->tail = j;
    } else {
        j->next = NULL;
        if (q->tail)
            q->tail->next = j;
        else
            q->head = j;
        q->tail = j;
    }
    q->waiting++;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
    return GH_OK;
}

void gh_workq_stats(struct gh_workq *q, struct gh_workq_stats *out)
{
    pthread_mutex_lock(&q->mu);
    *out = q->st;
    out->waiting = q->waiting;
    out->running = 0;
    for (unsigned i = 0; i < q->nthreads; i++)
        out->running += q->w[i].job != NULL;
    pthread_mutex_unlock(&q->mu);
}

void gh_workq_stop(struct gh_workq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    if (q->stopped) {
        pthread_mutex_unlock(&q->mu);
        return;
    }
    q->stopping = true;
    q->stopped = true;
    struct gh_workq_job *all = collect(q, 0, true);
    pthread_cond_broadcast(&q->work);
    pthread_cond_broadcast(&q->tick);
    pthread_mutex_unlock(&q->mu);
    answer_all(q, all, GH_WORKQ_STOPPED);
    for (unsigned i = 0; i < q->nthreads; i++)
        if (q->w[i].started)
            pthread_join(q->w[i].th, NULL);
    if (q->timer_started)
        pthread_join(q->timer, NULL);
}

void gh_workq_free(struct gh_workq *q)
{
    if (!q)
        return;
    gh_workq_stop(q);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->tick);
    free(q->w);
    free(q);
}
