/* drain_wait.c - holds drain decisions of checkpoint-mode namespaces until
 * the jobs' next saved checkpoint or a timeout (see drain_wait.h). */
#include "control/drain_wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "engine/policy.h"

struct wjob {
    char name[320];
    bool saved;
    int64_t step;
    char path[256];
};

struct hold {
    struct gh_task t;
    struct wjob jobs[GH_DRAIN_WAIT_JOBS];
    int n;
    int64_t since, deadline;
};

struct recent {
    char job[320];
    int64_t step, at;
    char path[256];
};

struct gh_drain_waits {
    struct hold *h[GH_DRAIN_WAITS_MAX];
    size_t n;
    struct recent recent[GH_DRAIN_RECENT_MAX]; /* latest checkpoint per job */
    size_t nrecent, next_evict;
};

/* The job's latest saved checkpoint remembered (NULL: none). */
static struct recent *recent_of(struct gh_drain_waits *w, const char *job)
{
    for (size_t i = 0; i < w->nrecent; i++)
        if (!strcmp(w->recent[i].job, job))
            return &w->recent[i];
    return NULL;
}

static void remember(struct gh_drain_waits *w, const char *job, int64_t step, const char *path,
                     int64_t at)
{
    struct recent *r = recent_of(w, job);
    if (r && r->at > at)
        return;
    if (!r && w->nrecent < GH_DRAIN_RECENT_MAX) {
        r = &w->recent[w->nrecent++];
    } else if (!r) { /* full: replace in turn */
        r = &w->recent[w->next_evict];
        w->next_evict = (w->next_evict + 1) % GH_DRAIN_RECENT_MAX;
    }
    snprintf(r->job, sizeof r->job, "%s", job);
    r->step = step;
    r->at = at;
    snprintf(r->path, sizeof r->path, "%s", path ? path : "");
}

int gh_drain_mode_of(const json_t *ns, struct gh_drain_mode *m, struct gh_err *err)
{
    m->checkpoint = false;
    m->timeout_ns = GH_DRAIN_CKPT_TIMEOUT_DEFAULT;
    const json_t *ann = json_object_get(json_object_get(ns, "metadata"), "annotations");
    const char *mode = gh_json_str(ann, GH_ANN_DRAIN_MODE);
    const char *to = gh_json_str(ann, GH_ANN_DRAIN_CKPT_TIMEOUT);
    if (!mode || !strcmp(mode, "immediate"))
        return GH_OK;
    if (strcmp(mode, "checkpoint") != 0)
        return gh_err_set(err, GH_EINVAL, "annotation %s: \"%.64s\" is neither immediate nor "
                          "checkpoint", GH_ANN_DRAIN_MODE, mode);
    int64_t t = GH_DRAIN_CKPT_TIMEOUT_DEFAULT;
    if (to && (!gh_policy_parse_duration(to, &t) || t <= 0))
        return gh_err_set(err, GH_EINVAL, "annotation %s: \"%.64s\" is not a duration (10m)",
                          GH_ANN_DRAIN_CKPT_TIMEOUT, to);
    m->checkpoint = true;
    m->timeout_ns = t;
    return GH_OK;
}

struct gh_drain_waits *gh_drain_waits_new(void) { return calloc(1, sizeof(struct gh_drain_waits)); }

void gh_drain_waits_clear(struct gh_drain_waits *w)
{
    for (size_t i = 0; i < w->n; i++) {
        json_decref(w->h[i]->t.incident);
        free(w->h[i]);
    }
    w->n = 0;
}

void gh_drain_waits_free(struct gh_drain_waits *w)
{
    if (!w)
        return;
    gh_drain_waits_clear(w);
    free(w);
}

bool gh_drain_waits_has(const struct gh_drain_waits *w, const char *id)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->h[i]->t.id, id))
            return true;
    return false;
}

int gh_drain_waits_hold(struct gh_drain_waits *w, struct gh_task *t, const char *const *jobs,
                        int n, int64_t now_ns, int64_t deadline_ns, struct gh_err *err)
{
    if (n < 1 || n > GH_DRAIN_WAIT_JOBS)
        return gh_err_set(err, GH_EINVAL, "drain wait: 1 to %d jobs", GH_DRAIN_WAIT_JOBS);
    if (w->n == GH_DRAIN_WAITS_MAX)
        return gh_err_set(err, GH_ELIMIT, "drain wait: %d decisions held already",
                          GH_DRAIN_WAITS_MAX);
    struct hold *h = calloc(1, sizeof *h);
    if (!h)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    h->t = *t;
    t->incident = NULL;
    for (int i = 0; i < n; i++) {
        struct wjob *j = &h->jobs[i];
        snprintf(j->name, sizeof j->name, "%s", jobs[i]);
        j->step = -1;
        const struct recent *r = recent_of(w, jobs[i]);
        if (r && r->at >= now_ns) { /* a resumed hold: saved before the restart */
            j->saved = true;
            j->step = r->step;
            snprintf(j->path, sizeof j->path, "%s", r->path);
        }
    }
    h->n = n;
    h->since = now_ns;
    h->deadline = deadline_ns;
    w->h[w->n++] = h;
    return GH_OK;
}

bool gh_drain_waits_checkpoint(struct gh_drain_waits *w, const char *job, int64_t step,
                               const char *path, int64_t now_ns)
{
    bool any = false;
    if (!job)
        return false;
    remember(w, job, step, path, now_ns);
    for (size_t i = 0; i < w->n; i++) {
        struct hold *h = w->h[i];
        if (now_ns < h->since)
            continue;
        for (int k = 0; k < h->n; k++) {
            struct wjob *j = &h->jobs[k];
            if (j->saved || strcmp(j->name, job) != 0)
                continue;
            j->saved = true;
            j->step = step;
            snprintf(j->path, sizeof j->path, "%s", path ? path : "");
            any = true;
        }
    }
    return any;
}

static bool done(const struct hold *h, int64_t now_ns)
{
    if (h->deadline <= now_ns)
        return true;
    for (int k = 0; k < h->n; k++)
        if (!h->jobs[k].saved)
            return false;
    return true;
}

/* The wait, into the incident: "drain_wait" and a sentence on its reason. */
static void tell(struct hold *h, int64_t now_ns)
{
    json_t *inc = h->t.incident;
    bool all = true;
    for (int k = 0; k < h->n; k++)
        all = all && h->jobs[k].saved;
    double waited = (double)(now_ns - h->since) / 1e9;
    json_t *jobs = json_array();
    char what[600] = "";
    size_t len = 0;
    for (int k = 0; k < h->n; k++) {
        const struct wjob *j = &h->jobs[k];
        json_t *o = json_pack("{s:s, s:b}", "job", j->name, "checkpoint_saved", j->saved);
        if (o && j->saved && j->step >= 0)
            json_object_set_new(o, "step", json_integer(j->step));
        if (o && j->saved && j->path[0])
            json_object_set_new(o, "path", json_string(j->path));
        json_array_append_new(jobs, o);
        int m;
        if (j->saved && j->step >= 0)
            m = snprintf(what + len, sizeof what - len, "%s%s checkpoint step %lld", k ? ", " : "",
                         j->name, (long long)j->step);
        else
            m = snprintf(what + len, sizeof what - len, "%s%s %s", k ? ", " : "", j->name,
                         j->saved ? "checkpoint saved" : "no checkpoint");
        if (m > 0 && (size_t)m < sizeof what - len)
            len += (size_t)m;
    }
    json_object_set_new(inc, "drain_wait",
                        json_pack("{s:s, s:s, s:f, s:f, s:o}", "mode", "checkpoint", "outcome",
                                  all ? "checkpoint" : "timeout", "waited_s", waited,
                                  "timeout_s", (double)(h->deadline - h->since) / 1e9, "jobs",
                                  jobs ? jobs : json_array()));
    const char *reason = gh_json_str(inc, "reason");
    size_t rl = reason ? strlen(reason) : 0;
    const char *sep = rl == 0 ? "" : reason[rl - 1] == '.' ? " " : "; ";
    char r[1400];
    if (all)
        snprintf(r, sizeof r, "%s%sdrain_node waited %.1f s for the next checkpoint (%s).",
                 reason ? reason : "", sep, waited, what);
    else
        snprintf(r, sizeof r,
                 "%s%sdrain_node waited for the next checkpoint and timed out after %.1f s (%s).",
                 reason ? reason : "", sep, waited, what);
    json_object_set_new(inc, "reason", json_string(r));
}

bool gh_drain_waits_take(struct gh_drain_waits *w, int64_t now_ns, struct gh_task *out)
{
    for (size_t i = 0; i < w->n; i++) {
        struct hold *h = w->h[i];
        if (!done(h, now_ns))
            continue;
        tell(h, now_ns);
        *out = h->t;
        free(h);
        memmove(&w->h[i], &w->h[i + 1], (w->n - i - 1) * sizeof w->h[0]);
        w->n--;
        return true;
    }
    return false;
}

int64_t gh_drain_waits_next_deadline(const struct gh_drain_waits *w)
{
    int64_t d = INT64_MAX;
    for (size_t i = 0; i < w->n; i++)
        if (w->h[i]->deadline < d)
            d = w->h[i]->deadline;
    return d;
}

size_t gh_drain_waits_count(const struct gh_drain_waits *w) { return w->n; }
