/* step_writer.c - the batching telemetry writer: an in-memory table of
 * bucket aggregates filled by the event loop, swapped out and written in
 * one transaction by a thread that owns its own audit-store connection. */
#include "audit/step_writer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/telemetry.h"
#include "common/timeutil.h"

#define DEF_BUCKET_NS (5 * GH_NS_PER_S)
#define DEF_RETAIN_NS (6 * 3600 * GH_NS_PER_S)
#define DEF_FLUSH_NS (2 * GH_NS_PER_S)
#define DEF_PENDING 8192
#define MAX_PENDING (1u << 20)

/* Buckets gathered between two writes, with an open-addressing index. */
struct buf {
    struct gh_audit_steps *v; /* owned, max_pending entries */
    size_t n;
    int32_t *idx;             /* owned, hcap slots: entry index or -1 */
};

struct gh_step_writer {
    struct gh_step_writer_opts o;
    char *url;
    struct gh_audit *a;
    size_t hcap;              /* power of two, >= 2 * max_pending */
    pthread_mutex_t mu;       /* cur, stats, stop */
    pthread_cond_t cv;
    pthread_mutex_t io;       /* the store connection and spare */
    struct buf cur, spare;
    struct gh_step_writer_stats st;
    int64_t newest_bucket;
    bool stop, thread_started;
    pthread_t thread;
};

static uint64_t hash_key(const char *job, int rank, int64_t bucket)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)job; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    h = (h ^ (uint64_t)(uint32_t)rank) * 1099511628211ull;
    h = (h ^ (uint64_t)bucket) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int buf_init(struct buf *b, size_t max, size_t hcap)
{
    b->n = 0;
    b->v = calloc(max, sizeof *b->v);
    b->idx = malloc(hcap * sizeof *b->idx);
    if (!b->v || !b->idx)
        return GH_ENOMEM;
    memset(b->idx, 0xff, hcap * sizeof *b->idx);
    return GH_OK;
}

static void buf_free(struct buf *b)
{
    free(b->v);
    free(b->idx);
}

bool gh_step_writer_note(struct gh_step_writer *t, const struct gh_signal *s)
{
    if (!t || s->kind != GH_KIND_STEP || !s->job || !*s->job || !s->has_rank ||
        !isfinite(s->step_ms) || s->step_ms < 0 || strlen(s->job) >= GH_AUDIT_ID_MAX)
        return false;
    int64_t us = llround(s->step_ms * 1000.0);
    int64_t w = t->o.bucket_ns;
    int64_t bucket = s->ts_ns - ((s->ts_ns % w) + w) % w;
    uint64_t h = hash_key(s->job, s->rank, bucket);
    bool kept = true, wake = false;
    pthread_mutex_lock(&t->mu);
    struct buf *b = &t->cur;
    size_t slot = (size_t)h & (t->hcap - 1);
    struct gh_audit_steps *e = NULL;
    for (;;) {
        int32_t i = b->idx[slot];
        if (i < 0)
            break;
        struct gh_audit_steps *c = &b->v[i];
        if (c->rank == s->rank && c->bucket_ns == bucket && strcmp(c->job, s->job) == 0) {
            e = c;
            break;
        }
        slot = (slot + 1) & (t->hcap - 1);
    }
    if (!e && b->n < t->o.max_pending) {
        b->idx[slot] = (int32_t)b->n;
        e = &b->v[b->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->job, sizeof e->job, "%s", s->job);
        e->rank = s->rank;
        e->gpu = -1;
        e->bucket_ns = bucket;
        e->last_step = -1;
        e->min_us = us;
        e->max_us = us;
        wake = b->n == t->o.max_pending / 2;
    }
    if (e) {
        if (s->node && !e->node[0])
            snprintf(e->node, sizeof e->node, "%s", s->node);
        if (s->gpu >= 0)
            e->gpu = s->gpu;
        e->n++;
        e->sum_us += us;
        e->min_us = us < e->min_us ? us : e->min_us;
        e->max_us = us > e->max_us ? us : e->max_us;
        if (s->ts_ns >= e->last_ns) {
            e->last_ns = s->ts_ns;
            e->last_step = s->has_step ? s->step : -1;
        }
        if (bucket > t->newest_bucket)
            t->newest_bucket = bucket;
        t->st.samples++;
    } else {
        t->st.dropped++;
        kept = false;
    }
    if (wake)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return kept;
}

int gh_step_writer_flush(struct gh_step_writer *t, struct gh_err *err)
{
    pthread_mutex_lock(&t->io);
    /* swap: the event loop goes on filling an empty buffer */
    pthread_mutex_lock(&t->mu);
    struct buf full = t->cur;
    t->cur = t->spare;
    t->spare = full;
    int64_t drop = t->o.retain_ns > 0 && t->newest_bucket > t->o.retain_ns
                       ? t->newest_bucket - t->o.retain_ns
                       : 0;
    pthread_mutex_unlock(&t->mu);
    int rc = GH_OK;
    struct buf *b = &t->spare;
    if (b->n) {
        struct gh_err e;
        rc = gh_audit_steps_merge(t->a, b->v, b->n, drop, &e);
        pthread_mutex_lock(&t->mu);
        if (rc) {
            t->st.failures++;
            snprintf(t->st.last_error, sizeof t->st.last_error, "%.159s", e.msg);
        } else {
            t->st.flushes++;
            t->st.rows += b->n;
        }
        pthread_mutex_unlock(&t->mu);
        if (rc && err)
            *err = e;
        b->n = 0;
        memset(b->idx, 0xff, t->hcap * sizeof *b->idx);
    }
    pthread_mutex_unlock(&t->io);
    return rc;
}

static void *writer(void *arg)
{
    struct gh_step_writer *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t at = (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec + t->o.flush_ns;
        ts.tv_sec = (time_t)(at / GH_NS_PER_S);
        ts.tv_nsec = (long)(at % GH_NS_PER_S);
        if (t->cur.n < t->o.max_pending / 2)
            (void)pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->mu);
        (void)gh_step_writer_flush(t, NULL); /* counted in the stats */
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int gh_step_writer_new(const struct gh_step_writer_opts *o, struct gh_step_writer **out,
                     struct gh_err *err)
{
    *out = NULL;
    struct gh_step_writer *t = calloc(1, sizeof *t);
    if (!t)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    t->o = *o;
    if (t->o.bucket_ns <= 0)
        t->o.bucket_ns = DEF_BUCKET_NS;
    if (t->o.retain_ns == 0)
        t->o.retain_ns = DEF_RETAIN_NS;
    if (t->o.flush_ns <= 0)
        t->o.flush_ns = DEF_FLUSH_NS;
    if (t->o.max_pending == 0)
        t->o.max_pending = DEF_PENDING;
    if (t->o.max_pending > MAX_PENDING)
        t->o.max_pending = MAX_PENDING;
    t->hcap = 16;
    while (t->hcap < 2 * t->o.max_pending)
        t->hcap *= 2;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->io, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = GH_OK;
    t->url = o->db_url ? strdup(o->db_url) : NULL;
    if (!t->url || buf_init(&t->cur, t->o.max_pending, t->hcap) ||
        buf_init(&t->spare, t->o.max_pending, t->hcap)) {
        rc = gh_err_set(err, GH_ENOMEM, "telemetry writer: out of memory");
        goto fail;
    }
    t->o.db_url = t->url;
    if ((rc = gh_audit_open(t->url, &t->a, err)))
        goto fail;
    if (!t->o.no_thread) {
        if (pthread_create(&t->thread, NULL, writer, t) != 0) {
            rc = gh_err_set(err, GH_EIO, "telemetry writer: pthread_create failed");
            goto fail;
        }
        t->thread_started = true;
    }
    *out = t;
    return GH_OK;
fail:
    gh_step_writer_free(t);
    return rc;
}

void gh_step_writer_free(struct gh_step_writer *t)
{
    if (!t)
        return;
    if (t->thread_started) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    if (t->a && t->cur.v)
        (void)gh_step_writer_flush(t, NULL);
    gh_audit_close(t->a);
    buf_free(&t->cur);
    buf_free(&t->spare);
    free(t->url);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->io);
    pthread_cond_destroy(&t->cv);
    free(t);
}

void gh_step_writer_stats(struct gh_step_writer *t, struct gh_step_writer_stats *out)
{
    pthread_mutex_lock(&t->mu);
    *out = t->st;
    pthread_mutex_unlock(&t->mu);
}
