/* informer.c - the reflector (paginated list, then watch from the list's
 * resourceVersion; bookmarks; relist on 410; backoff with jitter) feeding a
 * gh_kube_store and the user's handlers, plus periodic resync. */
#include "kube/informer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/watch.h"

#define PENDING_MAX 65536 /* decoded, not yet applied watch events */

struct pev {
    enum gh_kube_ev_type type;
    json_t *obj; /* owned reference */
};

/* The key of an object added to the cache (max_objects). */
struct added {
    char *ns, *name; /* owned; ns NULL: cluster-scoped */
};

struct gh_kube_informer {
    struct gh_kube_client *c;
    const struct gh_kube_res *res;
    char *ns, *label, *field;
    struct gh_kube_store *store;
    struct gh_kube_handlers h;
    void *ud;
    int page_size;
    int64_t resync_ns, backoff_min, backoff_max;
    int watch_timeout_s;

    struct gh_kube_call *call; /* the list page or watch on the wire */
    uint64_t timer;            /* backoff / restart */
    uint64_t resync_timer;
    uint64_t drain_timer;
    bool started, stopped, synced, listing;
    char rv[128];              /* last applied resourceVersion */
    char list_rv[128];
    char *cont;                /* continue token of the list in progress, or NULL */
    bool list_restarted;
    int64_t backoff;

    struct gh_kube_watch_decoder *dec;
    struct pev *pend;
    size_t npend, cappend;
    bool want_relist;
    bool watch_got_data;
    int64_t watch_started;
    struct gh_kube_status ev_status; /* of an ERROR event */
    struct gh_kube_informer_stats st;
    size_t max_objects;              /* 0: unbounded */
    struct added *ring;              /* max_objects keys, in the order added */
    size_t rhead, rn;
};

static void start_list(struct gh_kube_informer *inf);
static void start_watch(struct gh_kube_informer *inf);

static int64_t now(const struct gh_kube_informer *inf)
{
    return gh_clock_now(gh_kube_client_clock(inf->c));
}

static void report(struct gh_kube_informer *inf, int rc, const struct gh_kube_status *st,
                   const char *msg)
{
    if (inf->h.on_error)
        inf->h.on_error(inf->ud, rc, st, msg);
}

/* ------------------------------------------------------------------ apply */

static void set_rv(struct gh_kube_informer *inf, const json_t *obj)
{
    const char *rv = gh_kube_meta_rv(obj);
    if (rv && rv[0] && strlen(rv) < sizeof inf->rv)
        snprintf(inf->rv, sizeof inf->rv, "%s", rv);
}

/* A bounded cache: the first added (still cached) leaves when one more is
 * added at the bound. Keys of objects deleted meanwhile count until their
 * turn, so the cache never holds more than max_objects. */
static void bound_cache(struct gh_kube_informer *inf, const json_t *added)
{
    const char *name = gh_kube_meta_name(added), *ns = gh_kube_meta_namespace(added);
    if (!inf->max_objects || !name)
        return;
    if (inf->rn == inf->max_objects) {
        struct added *k = &inf->ring[inf->rhead];
        bool same = k->name && !strcmp(k->name, name) &&
                    ((!k->ns && !ns) || (k->ns && ns && !strcmp(k->ns, ns)));
        json_t *meta = same ? NULL : json_pack("{s:s}", "name", k->name ? k->name : "");
        if (meta && k->ns)
            json_object_set_new(meta, "namespace", json_string(k->ns));
        json_t *key = meta ? json_pack("{s:o}", "metadata", meta) : NULL, *old = NULL;
        if (key && gh_kube_store_remove(inf->store, key, &old, NULL) == GH_OK && old)
            inf->st.evicted++;
        json_decref(old);
        json_decref(key);
        free(k->ns);
        free(k->name);
        k->ns = k->name = NULL;
        inf->rhead = (inf->rhead + 1) % inf->max_objects;
        inf->rn--;
    }
    struct added *k = &inf->ring[(inf->rhead + inf->rn) % inf->max_objects];
    k->name = strdup(name);
    k->ns = ns ? strdup(ns) : NULL;
    inf->rn++;
}

static void apply_upsert(struct gh_kube_informer *inf, const json_t *full)
{
    enum gh_kube_change chg;
    json_t *kept = NULL, *old = NULL;
    struct gh_err e;
    int rc = gh_kube_store_upsert(inf->store, full, &chg, &kept,
                                  inf->h.on_update ? &old : NULL, &e);
    if (rc) {
        report(inf, rc, NULL, e.msg);
        return;
    }
    if (chg == GH_KUBE_ADDED)
        bound_cache(inf, kept);
    if (chg == GH_KUBE_ADDED && inf->h.on_add)
        inf->h.on_add(inf->ud, kept);
    else if (chg == GH_KUBE_UPDATED && inf->h.on_update)
        inf->h.on_update(inf->ud, old, kept);
    json_decref(kept);
    json_decref(old);
}

static void apply_delete(struct gh_kube_informer *inf, const json_t *obj)
{
    json_t *old = NULL;
    struct gh_err e;
    int rc = gh_kube_store_remove(inf->store, obj, &old, &e);
    if (rc) {
        report(inf, rc, NULL, e.msg);
        return;
    }
    if (old && inf->h.on_delete)
        inf->h.on_delete(inf->ud, old);
    json_decref(old);
}

static void on_gone(void *ud, json_t *old)
{
    struct gh_kube_informer *inf = ud;
    if (inf->h.on_delete)
        inf->h.on_delete(inf->ud, old);
}

static void drop_pending(struct gh_kube_informer *inf)
{
    for (size_t i = 0; i < inf->npend; i++)
        json_decref(inf->pend[i].obj);
    inf->npend = 0;
}

/* Applies decoded watch events in order (on the loop, outside curl). The
 * queue is detached first, so a handler that stops the informer is safe. */
static void drain(struct gh_kube_informer *inf)
{
    struct pev *arr = inf->pend;
    size_t n = inf->npend, i;
    inf->pend = NULL;
    inf->npend = inf->cappend = 0;
    for (i = 0; i < n && !inf->stopped; i++) {
        struct pev *p = &arr[i];
        switch (p->type) {
        case GH_KUBE_EV_ADDED:
        case GH_KUBE_EV_MODIFIED:
            apply_upsert(inf, p->obj);
            inf->st.events++;
            break;
        case GH_KUBE_EV_DELETED:
            apply_delete(inf, p->obj);
            inf->st.events++;
            break;
        case GH_KUBE_EV_BOOKMARK:
            inf->st.bookmarks++;
            break;
        case GH_KUBE_EV_ERROR:
            break;
        }
        if (p->type != GH_KUBE_EV_ERROR)
            set_rv(inf, p->obj);
        json_decref(p->obj);
    }
    for (; i < n; i++)
        json_decref(arr[i].obj);
    free(arr);
}

static void drain_timer_fn(void *ud)
{
    struct gh_kube_informer *inf = ud;
    inf->drain_timer = 0;
    drain(inf);
}

/* ------------------------------------------------------------------ backoff */

static void retry_timer_fn(void *ud)
{
    struct gh_kube_informer *inf = ud;
    inf->timer = 0;
    if (inf->stopped)
        return;
    if (inf->listing || !inf->rv[0])
        start_list(inf);
    else
        start_watch(inf);
}

/* The base doubles from backoff_min up to backoff_max; the delay is uniform
 * in [base/2, base), so informers that failed together (an apiserver
 * restart) spread their retries out, at the cap too. */
static void schedule_retry(struct gh_kube_informer *inf)
{
    inf->backoff = inf->backoff ? inf->backoff * 2 : inf->backoff_min;
    if (inf->backoff > inf->backoff_max)
        inf->backoff = inf->backoff_max;
    int64_t d = gh_kube_jitter(inf->c, inf->backoff / 2, 1.0);
    inf->st.last_backoff_ns = d;
    inf->st.retries++;
    gh_kube_timer_cancel(inf->c, inf->timer);
    inf->timer = gh_kube_timer_add(inf->c, d, retry_timer_fn, inf);
}

/* ------------------------------------------------------------------ list */

static void list_page(struct gh_kube_informer *inf);

static void list_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_kube_informer *inf = ud;
    inf->call = NULL;
    if (rc) {
        if (resp->status.kind == GH_KUBE_R_GONE && inf->cont && !inf->list_restarted) {
            inf->list_restarted = true; /* continue token expired: a fresh list */
            start_list(inf);
            return;
        }
        report(inf, rc, &resp->status, err ? err->msg : "list failed");
        schedule_retry(inf);
        return;
    }
    const json_t *items = json_object_get(resp->body, "items");
    if (!json_is_array(items)) {
        report(inf, GH_EINVAL, NULL, "list: reply has no items array");
        schedule_retry(inf);
        return;
    }
    inf->st.pages++;
    const char *rv = gh_kube_json_str(resp->body, "metadata", "resourceVersion");
    if (rv && strlen(rv) < sizeof inf->list_rv)
        snprintf(inf->list_rv, sizeof inf->list_rv, "%s", rv);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        if (inf->stopped)
            return;
        apply_upsert(inf, it);
    }
    if (inf->stopped)
        return;
    const char *next = gh_kube_json_str(resp->body, "metadata", "continue");
    free(inf->cont);
    inf->cont = NULL;
    if (next && next[0]) {
        inf->cont = strdup(next);
        if (!inf->cont) {
            report(inf, GH_ENOMEM, NULL, "out of memory");
            schedule_retry(inf);
            return;
        }
        list_page(inf);
        return;
    }
    /* complete: objects not listed are gone */
    gh_kube_store_sweep(inf->store, on_gone, inf, NULL);
    if (inf->stopped)
        return;
    inf->listing = false;
    inf->list_restarted = false;
    snprintf(inf->rv, sizeof inf->rv, "%s", inf->list_rv);
    inf->st.lists++;
    inf->backoff = 0;
    if (!inf->synced) {
        inf->synced = true;
        if (inf->h.on_synced)
            inf->h.on_synced(inf->ud);
        if (inf->stopped)
            return;
    }
    start_watch(inf);
}

static void list_page(struct gh_kube_informer *inf)
{
    struct gh_kube_req req;
    struct gh_err e;
    struct gh_kube_ref ref = {inf->res, inf->ns, NULL};
    struct gh_kube_list_opts lo = {
        .label_selector = inf->label,
        .field_selector = inf->field,
        .limit = inf->page_size,
        .continue_token = inf->cont,
    };
    int rc = gh_kube_req_list(&req, &ref, &lo, &e);
    if (!rc)
        rc = gh_kube_submit(inf->c, &req, list_done, NULL, inf, &inf->call, &e);
    if (rc) {
        report(inf, rc, NULL, e.msg);
        schedule_retry(inf);
    }
}

static void start_list(struct gh_kube_informer *inf)
{
    if (inf->stopped)
        return;
    if (inf->call) {
        gh_kube_cancel(inf->c, inf->call);
        inf->call = NULL;
    }
    inf->listing = true;
    free(inf->cont);
    inf->cont = NULL;
    inf->list_rv[0] = '\0';
    gh_kube_store_mark_begin(inf->store);
    list_page(inf);
}

void gh_kube_informer_relist(struct gh_kube_informer *inf)
{
    inf->list_restarted = false;
    start_list(inf);
}

/* ------------------------------------------------------------------ watch */

static int on_event(void *ud, enum gh_kube_ev_type type, json_t *obj, struct gh_err *err)
{
    struct gh_kube_informer *inf = ud;
    if (type == GH_KUBE_EV_ERROR) {
        gh_kube_status_from_json(&inf->ev_status, obj);
        if (inf->ev_status.kind == GH_KUBE_R_GONE) {
            inf->want_relist = true;
            return gh_err_set(err, GH_EAGAIN, "watch: %d %s: %s", inf->ev_status.code,
                              inf->ev_status.reason, inf->ev_status.message);
        }
        return gh_err_set(err, GH_EIO, "watch ERROR event: %d %s: %s", inf->ev_status.code,
                          inf->ev_status.reason, inf->ev_status.message);
    }
    if (inf->npend >= PENDING_MAX)
        return gh_err_set(err, GH_ELIMIT, "watch: more than %d events pending", PENDING_MAX);
    if (inf->npend == inf->cappend) {
        size_t ncap = inf->cappend ? inf->cappend * 2 : 64;
        struct pev *np = realloc(inf->pend, ncap * sizeof *np);
        if (!np)
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        inf->pend = np;
        inf->cappend = ncap;
    }
    inf->pend[inf->npend++] = (struct pev){type, json_incref(obj)};
    return GH_OK;
}

static int watch_data(void *ud, const char *data, size_t len, struct gh_err *err)
{
    struct gh_kube_informer *inf = ud;
    inf->watch_got_data = true;
    int rc = gh_kube_watch_decoder_feed(inf->dec, data, len, err);
    if (inf->npend && !inf->drain_timer)
        inf->drain_timer = gh_kube_timer_add(inf->c, 0, drain_timer_fn, inf);
    return rc;
}

static void watch_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_kube_informer *inf = ud;
    inf->call = NULL;
    gh_kube_timer_cancel(inf->c, inf->drain_timer);
    inf->drain_timer = 0;
    drain(inf); /* events decoded before the end come first */
    if (inf->stopped)
        return;
    if (inf->want_relist || resp->status.kind == GH_KUBE_R_GONE) {
        inf->st.relists_410++;
        report(inf, GH_EAGAIN, inf->want_relist ? &inf->ev_status : &resp->status,
               err ? err->msg : "watch: 410 Gone");
        if (!inf->stopped)
            start_list(inf);
        return;
    }
    struct gh_err fe;
    if (rc == GH_OK && gh_kube_watch_decoder_finish(inf->dec, &fe) != GH_OK) {
        rc = GH_EINVAL;
        err = &fe;
    }
    bool quick = now(inf) - inf->watch_started < GH_NS_PER_S;
    if (rc == GH_OK && !(quick && !inf->watch_got_data)) {
        start_watch(inf); /* the server's timeout ended it: resume at once */
        return;
    }
    inf->st.watch_errors++;
    report(inf, rc ? rc : GH_EAGAIN, &resp->status, err ? err->msg : "watch ended at once");
    if (inf->watch_got_data)
        inf->backoff = 0;
    if (!inf->stopped)
        schedule_retry(inf);
}

static void start_watch(struct gh_kube_informer *inf)
{
    if (inf->stopped)
        return;
    if (!inf->rv[0]) {
        start_list(inf);
        return;
    }
    gh_kube_watch_decoder_reset(inf->dec);
    inf->want_relist = false;
    inf->watch_got_data = false;
    inf->watch_started = now(inf);
    int64_t t = gh_kube_jitter(inf->c, inf->watch_timeout_s, 1.0);
    struct gh_kube_req req;
    struct gh_err e;
    struct gh_kube_ref ref = {inf->res, inf->ns, NULL};
    struct gh_kube_list_opts lo = {
        .label_selector = inf->label,
        .field_selector = inf->field,
        .resource_version = inf->rv,
        .allow_bookmarks = true,
        .timeout_s = (int)t,
    };
    int rc = gh_kube_req_watch(&req, &ref, &lo, &e);
    if (!rc)
        rc = gh_kube_submit(inf->c, &req, watch_done, watch_data, inf, &inf->call, &e);
    if (rc) {
        report(inf, rc, NULL, e.msg);
        schedule_retry(inf);
        return;
    }
    inf->st.watches++;
}

/* ------------------------------------------------------------------ resync */

static int resync_one(void *ud, const struct gh_kube_obj *o)
{
    struct gh_kube_informer *inf = ud;
    json_t *j = gh_kube_obj_json(o);
    if (j && inf->h.on_update)
        inf->h.on_update(inf->ud, NULL, j);
    json_decref(j);
    return inf->stopped ? GH_EAGAIN : GH_OK;
}

static void resync_fn(void *ud)
{
    struct gh_kube_informer *inf = ud;
    inf->resync_timer = 0;
    if (inf->stopped)
        return;
    if (inf->synced) {
        inf->st.resyncs++;
        gh_kube_store_foreach(inf->store, resync_one, inf);
    }
    if (!inf->stopped)
        inf->resync_timer = gh_kube_timer_add(inf->c, inf->resync_ns, resync_fn, inf);
}

/* ------------------------------------------------------------------ lifecycle */

static int dup_opt(char **dst, const char *src)
{
    *dst = NULL;
    if (!src || !src[0])
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

int gh_kube_informer_new(struct gh_kube_client *c, const struct gh_kube_informer_opts *o,
                         const struct gh_kube_handlers *h, void *ud,
                         struct gh_kube_informer **out, struct gh_err *err)
{
    *out = NULL;
    if (!c || !o || !o->res)
        return gh_err_set(err, GH_EINVAL, "informer: no client or resource");
    struct gh_kube_informer *inf = calloc(1, sizeof *inf);
    if (!inf)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    inf->c = c;
    inf->res = o->res;
    if (h)
        inf->h = *h;
    inf->ud = ud;
    inf->page_size = o->page_size > 0 ? o->page_size : 500;
    inf->resync_ns = o->resync_ns;
    inf->backoff_min = o->backoff_min_ns > 0 ? o->backoff_min_ns : 500 * GH_NS_PER_MS;
    inf->backoff_max = o->backoff_max_ns > 0 ? o->backoff_max_ns : 30 * GH_NS_PER_S;
    inf->watch_timeout_s = o->watch_timeout_s > 0 ? o->watch_timeout_s : 300;
    inf->max_objects = o->max_objects;
    int rc;
    if (inf->max_objects && !(inf->ring = calloc(inf->max_objects, sizeof *inf->ring))) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    if (dup_opt(&inf->ns, o->ns) || dup_opt(&inf->label, o->label_selector) ||
        dup_opt(&inf->field, o->field_selector)) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto fail;
    }
    struct gh_kube_store_opts so = {o->keep, o->nkeep, o->indexes, o->nindexes};
    if ((rc = gh_kube_store_new(&so, &inf->store, err)) ||
        (rc = gh_kube_watch_decoder_new(o->max_event, on_event, inf, &inf->dec, err)))
        goto fail;
    *out = inf;
    return GH_OK;
fail:
    gh_kube_informer_free(inf);
    return rc;
}

int gh_kube_informer_start(struct gh_kube_informer *inf, struct gh_err *err)
{
    if (inf->started && !inf->stopped)
        return gh_err_set(err, GH_EINVAL, "informer already started");
    inf->started = true;
    inf->stopped = false;
    if (inf->resync_ns > 0)
        inf->resync_timer = gh_kube_timer_add(inf->c, inf->resync_ns, resync_fn, inf);
    start_list(inf);
    return GH_OK;
}

void gh_kube_informer_stop(struct gh_kube_informer *inf)
{
    if (!inf)
        return;
    inf->stopped = true;
    if (inf->call)
        gh_kube_cancel(inf->c, inf->call);
    inf->call = NULL;
    gh_kube_timer_cancel(inf->c, inf->timer);
    gh_kube_timer_cancel(inf->c, inf->resync_timer);
    gh_kube_timer_cancel(inf->c, inf->drain_timer);
    inf->timer = inf->resync_timer = inf->drain_timer = 0;
    drop_pending(inf);
}

void gh_kube_informer_free(struct gh_kube_informer *inf)
{
    if (!inf)
        return;
    gh_kube_informer_stop(inf);
    gh_kube_store_free(inf->store);
    gh_kube_watch_decoder_free(inf->dec);
    free(inf->pend);
    free(inf->cont);
    free(inf->ns);
    free(inf->label);
    free(inf->field);
    for (size_t i = 0; inf->ring && i < inf->max_objects; i++) {
        free(inf->ring[i].ns);
        free(inf->ring[i].name);
    }
    free(inf->ring);
    free(inf);
}

bool gh_kube_informer_synced(const struct gh_kube_informer *inf) { return inf->synced; }

const struct gh_kube_store *gh_kube_informer_store(const struct gh_kube_informer *inf)
{
    return inf->store;
}

const char *gh_kube_informer_rv(const struct gh_kube_informer *inf) { return inf->rv; }

void gh_kube_informer_stats(const struct gh_kube_informer *inf, struct gh_kube_informer_stats *st)
{
    *st = inf->st;
}
