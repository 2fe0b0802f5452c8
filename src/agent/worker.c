/* worker.c - the agent's worker thread (see worker.h): one mutex and one
 * monotonic condition variable for the waits, an atomic stop flag for the
 * work's checks, and an eventfd for the work's own poll(). */
#include "agent/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/mono.h"

struct gh_worker {
    struct gh_worker_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; stop or kick */
    bool kicked;         /* under mu */
    atomic_bool stopping;
    int stopfd;
    bool running; /* the owner's */
    pthread_t thread;
};

static void *worker_main(void *arg)
{
    struct gh_worker *w = arg;
    if (w->o.period_ns <= 0) {
        w->o.run(w->o.arg, w);
        return NULL;
    }
    int64_t next = gh_mono_ns();
    while (!atomic_load(&w->stopping)) {
        int64_t now;
        w->o.run(w->o.arg, w);
        now = gh_mono_ns();
        if (w->o.cadence == GH_WORKER_RATE) {
            next += w->o.period_ns;
            if (next < now)
                next = now + w->o.period_ns; /* fell behind (a hang): restart the cadence */
        } else {
            next = now + w->o.period_ns;
        }
        /* a kick means nothing to a periodic worker: wait out the period */
        while (gh_worker_wait_until(w, next) && gh_mono_ns() < next)
            ;
    }
    return NULL;
}

int gh_worker_new(const struct gh_worker_opts *opts, struct gh_worker **out, struct gh_err *err)
{
    const char *name = opts->name ? opts->name : "worker";
    *out = NULL;
    if (!opts->run || opts->period_ns < 0)
        return gh_err_set(err, GH_EINVAL, "%s: worker needs work and a period >= 0", name);
    struct gh_worker *w = calloc(1, sizeof *w);
    if (!w)
        return gh_err_set(err, GH_ENOMEM, "%s: out of memory", name);
    w->o = *opts;
    w->o.name = name;
    atomic_init(&w->stopping, false);
    if (pthread_mutex_init(&w->mu, NULL)) {
        free(w);
        return gh_err_set(err, GH_EIO, "%s: cannot create a mutex", name);
    }
    if (gh_cond_init_monotonic(&w->cond)) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return gh_err_set(err, GH_EIO, "%s: cannot create a condition", name);
    }
    w->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->stopfd < 0) {
        int e = errno;
        gh_worker_free(w);
        return gh_err_set(err, GH_EIO, "%s: eventfd: %s", name, strerror(e));
    }
    *out = w;
    return GH_OK;
}

int gh_worker_start(struct gh_worker *w, struct gh_err *err)
{
    if (w->running)
        return gh_err_set(err, GH_EINVAL, "%s: already started", w->o.name);
    atomic_store(&w->stopping, false);
    pthread_mutex_lock(&w->mu);
    w->kicked = false;
    pthread_mutex_unlock(&w->mu);
    int e = pthread_create(&w->thread, NULL, worker_main, w);
    if (e)
        return gh_err_set(err, GH_EIO, "%s: cannot start a thread: %s", w->o.name, strerror(e));
    w->running = true;
    return GH_OK;
}

void gh_worker_stop(struct gh_worker *w)
{
    if (!w || !w->running)
        return;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stopping, true);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->mu);
    uint64_t one = 1;
    if (write(w->stopfd, &one, sizeof one) < 0) {
        /* the counter is non-zero already */
    }
    if (w->o.wake)
        w->o.wake(w->o.arg);
    pthread_join(w->thread, NULL);
    uint64_t v;
    if (read(w->stopfd, &v, sizeof v) < 0) {
        /* nothing to reset */
    }
    w->running = false;
}

bool gh_worker_running(const struct gh_worker *w) { return w->running; }

bool gh_worker_stopping(const struct gh_worker *w)
{
    return atomic_load(&((struct gh_worker *)w)->stopping);
}

bool gh_worker_wait_until(struct gh_worker *w, int64_t at_ns)
{
    pthread_mutex_lock(&w->mu);
    while (!atomic_load(&w->stopping) && !w->kicked) {
        if (at_ns == INT64_MAX)
            pthread_cond_wait(&w->cond, &w->mu);
        else if (!gh_cond_wait_until(&w->cond, &w->mu, at_ns))
            break;
    }
    w->kicked = false;
    bool go_on = !atomic_load(&w->stopping);
    pthread_mutex_unlock(&w->mu);
    return go_on;
}

void gh_worker_kick(struct gh_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->kicked = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

int gh_worker_stop_fd(const struct gh_worker *w) { return w->stopfd; }

void gh_worker_free(struct gh_worker *w)
{
    if (!w)
        return;
    gh_worker_stop(w);
    if (w->stopfd >= 0)
        close(w->stopfd);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
