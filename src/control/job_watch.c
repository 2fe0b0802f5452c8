/* job_watch.c - discovery-gated informers on the training-job kinds
 * (job_kinds.h) reporting which job changed (see job_watch.h). */
#include "control/job_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/timeutil.h"
#include "control/job_kinds.h"
#include "control/kube_signals.h"
#include "kube/informer.h"

#define NKINDS GH_JOB_NKINDS
#define REDISCOVER_NS (30 * GH_NS_PER_S)

/* What is known of a kind's objects (gh_job_watch_listed). */
enum listing {
    L_UNKNOWN,    /* discovery has not answered, failed, or the informer not started */
    L_NOT_SERVED, /* the API server does not serve the kind: no objects */
    L_LISTING,    /* its informer runs and has not listed yet */
    L_LISTED,     /* its informer listed every object */
};

struct kind {
    struct gh_job_watch *w;
    const struct gh_kube_res *res;
    enum listing listing;
    struct gh_kube_informer *inf;
    struct gh_kube_call *call; /* discovery in flight */
    uint64_t timer;            /* next discovery */
};

struct gh_job_watch {
    struct gh_kube_client *c;
    char *ns;
    gh_job_changed_fn fn;
    void *ud;
    gh_job_signal_fn sig_fn; /* NULL: no signals */
    void *sig_ud;
    gh_job_watch_note_fn note_fn; /* NULL: not told */
    void *note_ud;
    struct kind k[NKINDS];
};

static const char *const keep[] = {
    "/metadata/labels", "/metadata/ownerReferences", "/metadata/uid",
    /* whether it is over (job_finished): conditions; a Volcano Job's phase */
    "/status/conditions", "/status/state",
    /* a job's remaining run and restart cost (job_costs.h) */
    "/metadata/creationTimestamp", "/metadata/annotations/gpuheal.io~1expected-end",
    "/metadata/annotations/gpuheal.io~1remaining", "/metadata/annotations/gpuheal.io~1restart-cost",
    /* where its checkpoints are (control/tenancy.h) */
    "/metadata/annotations/gpuheal.io~1checkpoint-prefix"};

static void discover(void *ud);

static void note(const struct kind *k, enum gh_job_watch_what what, int rc, const char *error)
{
    struct gh_job_watch_note n = {what, k->res, rc, error ? error : ""};
    if (k->w->note_fn)
        k->w->note_fn(k->w->note_ud, &n);
}

/* The job an object of kind k concerns: what controls it when that is
 * one of the kinds (gh_job_parent: a JobSet's or an MPIJob's Job -> that
 * JobSet or MPIJob; a TrainJob's JobSet -> the TrainJob, of the same
 * name). A job that became over (not a child: its parent says for all) is
 * also a job_finished signal. */
static void report(struct kind *k, const json_t *old, const json_t *obj)
{
    const char *ns = gh_kube_meta_namespace(obj), *name = gh_kube_meta_name(obj);
    const char *top = name;
    bool child = gh_job_parent(k->res, obj, &top) != NULL;
    if (!ns || !name || !top || !*top)
        return;
    char job[320], part[320];
    snprintf(job, sizeof job, "%s/%s", ns, top);
    snprintf(part, sizeof part, "%s/%s", ns, name);
    k->w->fn(k->w->ud, job, strcmp(top, name) ? part : NULL);
    struct gh_signal s;
    int64_t t = gh_clock_now(gh_kube_client_clock(k->w->c));
    if (k->w->sig_fn && !child && gh_kube_job_signals(old, obj, job, t, &s, 1) == 1)
        k->w->sig_fn(k->w->sig_ud, &s);
}

static void on_add(void *ud, const json_t *obj) { report(ud, NULL, obj); }

static void on_update(void *ud, const json_t *old, const json_t *obj)
{
    if (old) /* resync replays carry nothing new */
        report(ud, old, obj);
}

static void on_error(void *ud, int rc, const struct gh_kube_status *st, const char *msg)
{
    struct kind *k = ud;
    (void)st;
    note(k, GH_JOB_WATCH_INFORMER_ERROR, rc, msg);
}

static void on_synced(void *ud)
{
    struct kind *k = ud;
    k->listing = L_LISTED;
    note(k, GH_JOB_WATCH_INFORMER_SYNCED, GH_OK, NULL);
}

static bool lists(const json_t *body, const char *plural)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(body, "resources"), i, r) {
        const char *n = gh_json_str(r, "name");
        if (n && !strcmp(n, plural))
            return true;
    }
    return false;
}

static void start_informer(struct kind *k)
{
    struct gh_kube_informer_opts o = {
        .res = k->res, .ns = k->w->ns, .keep = keep, .nkeep = sizeof keep / sizeof keep[0]};
    struct gh_kube_handlers h = {on_add, on_update, on_add, on_synced, on_error};
    struct gh_err err;
    if (gh_kube_informer_new(k->w->c, &o, &h, k, &k->inf, &err) ||
        gh_kube_informer_start(k->inf, &err)) {
        note(k, GH_JOB_WATCH_INFORMER_FAILED, GH_OK, err.msg);
        gh_kube_informer_free(k->inf);
        k->inf = NULL;
        k->listing = L_UNKNOWN;
        k->timer = gh_kube_timer_add(k->w->c, REDISCOVER_NS, discover, k);
        return;
    }
    k->listing = L_LISTING;
    note(k, GH_JOB_WATCH_INFORMER_STARTED, GH_OK, NULL);
}

static void discovered(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct kind *k = ud;
    k->call = NULL;
    if (rc == GH_OK && lists(resp->body, k->res->resource)) {
        start_informer(k);
        return;
    }
    if (rc != GH_OK && rc != GH_ENOTFOUND) {
        /* a kind known not served stays so until discovery says otherwise */
        note(k, GH_JOB_WATCH_DISCOVERY_FAILED, rc, err ? err->msg : "");
    } else {
        k->listing = L_NOT_SERVED;
        note(k, GH_JOB_WATCH_NOT_SERVED, rc, NULL);
    }
    k->timer = gh_kube_timer_add(k->w->c, REDISCOVER_NS, discover, k);
}

static void discover(void *ud)
{
    struct kind *k = ud;
    k->timer = 0;
    struct gh_kube_req req;
    memset(&req, 0, sizeof req);
    req.method = GH_KUBE_GET;
    int w = *k->res->group
                ? snprintf(req.path, sizeof req.path, "/apis/%s/%s", k->res->group,
                           k->res->version)
                : snprintf(req.path, sizeof req.path, "/api/%s", k->res->version);
    struct gh_err err;
    if (w <= 0 || (size_t)w >= sizeof req.path ||
        gh_kube_submit(k->w->c, &req, discovered, NULL, k, &k->call, &err)) {
        k->call = NULL;
        k->timer = gh_kube_timer_add(k->w->c, REDISCOVER_NS, discover, k);
    }
}

int gh_job_watch_new(struct gh_kube_client *c, const char *ns, gh_job_changed_fn fn, void *ud,
                     struct gh_job_watch **out, struct gh_err *err)
{
    *out = NULL;
    struct gh_job_watch *w = calloc(1, sizeof *w);
    if (!w || (ns && !(w->ns = strdup(ns)))) {
        free(w);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    w->c = c;
    w->fn = fn;
    w->ud = ud;
    for (int i = 0; i < NKINDS; i++) {
        w->k[i].w = w;
        w->k[i].res = gh_job_kinds[i];
    }
    *out = w;
    return GH_OK;
}

void gh_job_watch_on_signal(struct gh_job_watch *w, gh_job_signal_fn fn, void *ud)
{
    w->sig_fn = fn;
    w->sig_ud = ud;
}

void gh_job_watch_on_note(struct gh_job_watch *w, gh_job_watch_note_fn fn, void *ud)
{
    w->note_fn = fn;
    w->note_ud = ud;
}

int gh_job_watch_start(struct gh_job_watch *w, struct gh_err *err)
{
    (void)err;
    for (int i = 0; i < NKINDS; i++)
        if (!w->k[i].inf && !w->k[i].call && !w->k[i].timer)
            discover(&w->k[i]);
    return GH_OK;
}

void gh_job_watch_free(struct gh_job_watch *w)
{
    if (!w)
        return;
    for (int i = 0; i < NKINDS; i++) {
        if (w->k[i].call)
            gh_kube_cancel(w->c, w->k[i].call);
        if (w->k[i].timer)
            gh_kube_timer_cancel(w->c, w->k[i].timer);
        gh_kube_informer_free(w->k[i].inf);
    }
    free(w->ns);
    free(w);
}

static const struct kind *find(const struct gh_job_watch *w, const struct gh_kube_res *res)
{
    for (int i = 0; w && i < NKINDS; i++)
        if (w->k[i].res == res)
            return &w->k[i];
    return NULL;
}

bool gh_job_watch_listed(const struct gh_job_watch *w)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (w->k[i].listing != L_LISTED && w->k[i].listing != L_NOT_SERVED)
            return false;
    return true;
}

const struct gh_kube_store *gh_job_watch_jobs(const struct gh_job_watch *w)
{
    const struct kind *k = find(w, &gh_kube_res_jobs);
    return k && k->inf ? gh_kube_informer_store(k->inf) : NULL;
}

struct gh_job_caches gh_job_watch_caches(const struct gh_job_watch *w)
{
    const struct kind *j = find(w, &gh_kube_res_jobs), *js = find(w, &gh_job_res_jobsets);
    struct gh_job_caches c = {j && j->inf ? gh_kube_informer_store(j->inf) : NULL,
                              js && js->inf ? gh_kube_informer_store(js->inf) : NULL};
    return c;
}

const struct gh_kube_store *gh_job_watch_store(const struct gh_job_watch *w, const char *kind)
{
    const struct gh_kube_res *res = kind ? gh_job_res_of_kind(kind) : NULL;
    const struct kind *k = res ? find(w, res) : NULL;
    return k && k->inf ? gh_kube_informer_store(k->inf) : NULL;
}
