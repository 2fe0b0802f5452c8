/* store_watch.c - the audit store's health (store_watch.h): a probe
 * thread with its own connection, and a verdict under a mutex that every
 * writer updates. */
#include "audit/store_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/audit_int.h"
#include "audit/db.h"
#include "common/mono.h"

#define DEF_EVERY_NS 1000000000LL
#define DEF_STALL_NS 5000000000LL

struct gh_store_watch {
    struct gh_audit *a;        /* owned; used under io */
    char key[160];             /* "probe/IDENTITY" */
    int64_t every_ns;
    int64_t stall_ns;
    atomic_llong probing_since; /* mono: the probe waiting for its answer since; 0: none */
    int64_t stall_noted;        /* under mu: the probing_since whose stall was noted */
    pthread_mutex_t io;        /* the connection */
    pthread_mutex_t mu;        /* everything below */
    pthread_cond_t cv;         /* stop */
    bool stop, started;
    pthread_t thread;
    atomic_bool ok;            /* st.ok, for lock-free reads */
    struct gh_store_watch_state st;
};

void gh_store_watch_note(struct gh_store_watch *w, int rc, const char *msg)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    bool ok = rc == GH_OK;
    if (!ok) {
        w->st.failures++;
        snprintf(w->st.error, sizeof w->st.error, "%s", msg && *msg ? msg : gh_rc_str(rc));
    }
    if (ok != w->st.ok) {
        w->st.ok = ok;
        w->st.since_ns = gh_mono_ns();
        w->st.changes++;
        atomic_store(&w->ok, ok);
    }
    pthread_mutex_unlock(&w->mu);
}

static bool stalled(struct gh_store_watch *w, int64_t now)
{
    int64_t since = atomic_load(&w->probing_since);
    return since && now - since > w->stall_ns;
}

int gh_store_watch_probe(struct gh_store_watch *w, struct gh_err *err)
{
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)gh_mono_ns());
    struct gh_db_val p[] = {gh_db_text(w->key), gh_db_text(t)};
    struct gh_err e = {{0}};
    pthread_mutex_lock(&w->io);
    atomic_store(&w->probing_since, gh_mono_ns());
    int rc = gh_db_exec(gh_audit__db(w->a),
                        "INSERT INTO meta (key, value) VALUES ($1, $2) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        p, 2, NULL, &e);
    atomic_store(&w->probing_since, 0);
    pthread_mutex_unlock(&w->io);
    gh_store_watch_note(w, rc, e.msg);
    if (rc && err)
        *err = e;
    return rc;
}

static void *run(void *arg)
{
    struct gh_store_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mu);
        (void)gh_store_watch_probe(w, NULL);
        pthread_mutex_lock(&w->mu);
        int64_t at = gh_mono_ns() + w->every_ns;
        while (!w->stop && gh_cond_wait_until(&w->cv, &w->mu, at))
            ;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int gh_store_watch_new(const struct gh_store_watch_opts *o, struct gh_store_watch **out,
                       struct gh_err *err)
{
    *out = NULL;
    struct gh_store_watch *w = calloc(1, sizeof *w);
    if (!w)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    snprintf(w->key, sizeof w->key, "probe/%.150s", o->identity ? o->identity : "");
    w->every_ns = o->every_ns > 0 ? o->every_ns : DEF_EVERY_NS;
    w->stall_ns = o->stall_ns > 0 ? o->stall_ns : DEF_STALL_NS;
    if (!o->stall_ns && w->stall_ns < 3 * w->every_ns)
        w->stall_ns = 3 * w->every_ns;
    atomic_init(&w->probing_since, 0);
    pthread_mutex_init(&w->io, NULL);
    pthread_mutex_init(&w->mu, NULL);
    gh_cond_init_monotonic(&w->cv);
    w->st.ok = true;
    w->st.since_ns = gh_mono_ns();
    atomic_init(&w->ok, true);
    int rc = gh_audit_open(o->db_url, &w->a, err);
    if (!rc && (rc = gh_store_watch_probe(w, err)) == GH_OK && !o->no_thread) {
        if (pthread_create(&w->thread, NULL, run, w) != 0)
            rc = gh_err_set(err, GH_EIO, "store watch: pthread_create failed");
        else
            w->started = true;
    }
    if (rc) {
        gh_store_watch_free(w);
        return gh_err_prefix(err, rc, "store watch");
    }
    *out = w;
    return GH_OK;
}

void gh_store_watch_free(struct gh_store_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->started)
        pthread_join(w->thread, NULL);
    gh_audit_close(w->a);
    pthread_mutex_destroy(&w->io);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

bool gh_store_watch_ok(struct gh_store_watch *w)
{
    return atomic_load(&w->ok) && !stalled(w, gh_mono_ns());
}

void gh_store_watch_state(struct gh_store_watch *w, struct gh_store_watch_state *out)
{
    int64_t now = gh_mono_ns();
    pthread_mutex_lock(&w->mu);
    int64_t since = atomic_load(&w->probing_since);
    if (stalled(w, now) && since != w->stall_noted) {
        w->stall_noted = since;
        if (w->st.ok) {
            w->st.ok = false;
            w->st.since_ns = since; /* the store has taken no write since then */
            w->st.changes++;
            atomic_store(&w->ok, false);
        }
        w->st.failures++;
        snprintf(w->st.error, sizeof w->st.error, "no answer from the store for %.0f s (the "
                 "probe write still waits)", (double)(now - since) / 1e9);
    }
    *out = w->st;
    pthread_mutex_unlock(&w->mu);
}
