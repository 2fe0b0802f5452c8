/* tenancy.c - which job's pods run where, for the ingest's admission of
 * training telemetry, and the jobs' declared checkpoint prefixes
 * (tenancy.h). */
#include "control/tenancy.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

struct pod {
    char *key; /* its placement: "job\nnode" (owned) */
};

struct gh_tenancy {
    pthread_mutex_t mu;
    struct gh_strmap *pods;       /* uid -> struct pod * (owned) */
    struct gh_strmap *placements; /* "job\nnode" -> pods there (uintptr_t) */
    struct gh_strmap *prefixes;   /* job -> declared prefix (owned char *) */
    unsigned listed;              /* enum gh_tenancy_list bits */
    uint64_t admitted, refused, retried;
};

int gh_tenancy_new(size_t max_pods, struct gh_tenancy **out, struct gh_err *err)
{
    size_t cap = max_pods ? max_pods : (1u << 20);
    struct gh_tenancy *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return gh_err_set(err, GH_ENOMEM, "tenancy: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->pods = gh_strmap_new(cap);
    t->placements = gh_strmap_new(cap);
    t->prefixes = gh_strmap_new(cap);
    if (!t->pods || !t->placements || !t->prefixes) {
        gh_tenancy_free(t);
        return gh_err_set(err, GH_ENOMEM, "tenancy: out of memory");
    }
    *out = t;
    return GH_OK;
}

void gh_tenancy_free(struct gh_tenancy *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->pods && i < gh_strmap_count(t->pods); i++) {
        struct pod *p = gh_strmap_value(t->pods, i);
        if (p)
            free(p->key);
        free(p);
    }
    for (size_t i = 0; t->prefixes && i < gh_strmap_count(t->prefixes); i++)
        free(gh_strmap_value(t->prefixes, i));
    gh_strmap_free(t->pods);
    gh_strmap_free(t->placements);
    gh_strmap_free(t->prefixes);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* ---- placements (mu held) */

static void place_drop(struct gh_tenancy *t, const char *key)
{
    long k = gh_strmap_find(t->placements, key);
    if (k < 0)
        return;
    uintptr_t n = (uintptr_t)gh_strmap_value(t->placements, (size_t)k);
    if (n <= 1)
        gh_strmap_remove(t->placements, (size_t)k);
    else
        gh_strmap_set_value(t->placements, (size_t)k, (void *)(n - 1));
}

static int place_add(struct gh_tenancy *t, const char *key)
{
    int rc = GH_OK;
    long k = gh_strmap_intern(t->placements, key, NULL, &rc);
    if (k < 0)
        return rc ? rc : GH_ENOMEM;
    uintptr_t n = (uintptr_t)gh_strmap_value(t->placements, (size_t)k);
    gh_strmap_set_value(t->placements, (size_t)k, (void *)(n + 1));
    return GH_OK;
}

static char *place_key(const char *job, const char *node)
{
    size_t jl = strlen(job), nl = strlen(node);
    char *k = malloc(jl + nl + 2);
    if (!k)
        return NULL;
    memcpy(k, job, jl);
    k[jl] = '\n';
    memcpy(k + jl + 1, node, nl + 1);
    return k;
}

int gh_tenancy_pod(struct gh_tenancy *t, const char *uid, const char *job, const char *node)
{
    if (!uid || !*uid)
        return GH_OK;
    char *key = job && node ? place_key(job, node) : NULL;
    if (job && node && !key)
        return GH_ENOMEM;
    int rc = GH_OK;
    pthread_mutex_lock(&t->mu);
    long k = gh_strmap_find(t->pods, uid);
    struct pod *p = k >= 0 ? gh_strmap_value(t->pods, (size_t)k) : NULL;
    if (p && key && strcmp(p->key, key) == 0)
        goto out; /* nothing changed */
    if (p) {
        place_drop(t, p->key);
        free(p->key);
        free(p);
        gh_strmap_remove(t->pods, (size_t)k);
    }
    if (!key)
        goto out;
    p = calloc(1, sizeof *p);
    k = p ? gh_strmap_intern(t->pods, uid, NULL, &rc) : -1;
    if (k < 0 || (rc = place_add(t, key))) {
        if (k >= 0)
            gh_strmap_remove(t->pods, (size_t)k);
        free(p);
        rc = rc ? rc : GH_ENOMEM;
        goto out;
    }
    p->key = key;
    key = NULL;
    gh_strmap_set_value(t->pods, (size_t)k, p);
out:
    pthread_mutex_unlock(&t->mu);
    free(key);
    return rc;
}

void gh_tenancy_set_listed(struct gh_tenancy *t, enum gh_tenancy_list what, bool listed)
{
    pthread_mutex_lock(&t->mu);
    if (listed)
        t->listed |= (unsigned)what;
    else
        t->listed &= ~(unsigned)what;
    pthread_mutex_unlock(&t->mu);
}

#define LISTED_ALL ((unsigned)GH_TENANCY_PODS | (unsigned)GH_TENANCY_JOBS)

/* ---- checkpoint prefixes */

/* Whether s[0..n) has a "." or ".." segment, an escaped dot or slash, a
 * backslash or a control character. */
static bool unsafe(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            return true;
        if (c == '%' && i + 2 < n && s[i + 1] == '2' &&
            (s[i + 2] == 'e' || s[i + 2] == 'E' || s[i + 2] == 'f' || s[i + 2] == 'F'))
            return true;
        if (c == '.' && (i == 0 || s[i - 1] == '/')) {
            size_t d = 1;
            if (i + 1 < n && s[i + 1] == '.')
                d = 2;
            if (i + d == n || s[i + d] == '/')
                return true;
        }
    }
    return false;
}

bool gh_tenancy_path_under(const char *prefix, const char *path)
{
    if (!prefix || !*prefix || !path)
        return false;
    size_t pl = strlen(prefix), n = strlen(path);
    if (n < pl || memcmp(path, prefix, pl) != 0 || unsafe(path, n) || unsafe(prefix, pl))
        return false;
    /* at a boundary: the prefix ends in '/', or the path ends or goes on
     * with '/' right after it */
    return prefix[pl - 1] == '/' || n == pl || path[pl] == '/';
}

int gh_tenancy_prefix_check(const char *prefix, struct gh_err *err)
{
    size_t n = prefix ? strlen(prefix) : 0;
    if (n == 0)
        return gh_err_set(err, GH_EINVAL, "%s: empty", GH_ANN_CHECKPOINT_PREFIX);
    if (n > GH_TENANCY_PREFIX_MAX)
        return gh_err_set(err, GH_EINVAL, "%s: %zu bytes, at most %d", GH_ANN_CHECKPOINT_PREFIX, n,
                          GH_TENANCY_PREFIX_MAX);
    if (unsafe(prefix, n))
        return gh_err_set(err, GH_EINVAL,
                          "%s: \"%.200s\" has a \".\" or \"..\" segment, an escaped dot or "
                          "slash, a backslash or a control character",
                          GH_ANN_CHECKPOINT_PREFIX, prefix);
    return GH_OK;
}

int gh_tenancy_set_prefix(struct gh_tenancy *t, const char *job, const char *prefix,
                          struct gh_err *err)
{
    int rc = GH_OK;
    char *copy = NULL;
    if (prefix && *prefix) {
        rc = gh_tenancy_prefix_check(prefix, err);
        if (rc == GH_OK && !(copy = strdup(prefix)))
            rc = gh_err_set(err, GH_ENOMEM, "tenancy: out of memory");
    }
    pthread_mutex_lock(&t->mu);
    long k = gh_strmap_find(t->prefixes, job);
    if (k >= 0) {
        free(gh_strmap_value(t->prefixes, (size_t)k));
        gh_strmap_remove(t->prefixes, (size_t)k);
    }
    if (copy) {
        int irc = GH_OK;
        k = gh_strmap_intern(t->prefixes, job, NULL, &irc);
        if (k < 0) {
            free(copy);
            rc = gh_err_set(err, irc ? irc : GH_ENOMEM, "tenancy: the prefix table is full");
        } else {
            gh_strmap_set_value(t->prefixes, (size_t)k, copy);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- admission */

static bool training(enum gh_kind k)
{
    return k == GH_KIND_STEP || k == GH_KIND_CHECKPOINT || k == GH_KIND_REPLICA_CHECKSUM;
}

int gh_tenancy_admit(struct gh_tenancy *t, const char *node, const struct gh_signal *sig, char *why,
                     size_t cap)
{
    if (!training(sig->kind))
        return GH_OK;
    const char *job = sig->job ? sig->job : "";
    char *key = place_key(job, node ? node : "");
    if (!key) {
        snprintf(why, cap, "out of memory");
        return GH_EAGAIN;
    }
    int rc = GH_OK;
    pthread_mutex_lock(&t->mu);
    if (t->listed != LISTED_ALL) {
        /* a checkpoint path checked before its job's prefix is known, or a
         * pod placed under its Job before its JobSet is known, would be a
         * wrong answer either way */
        snprintf(why, cap, "the controller has not listed the %s yet; retry",
                 !(t->listed & GH_TENANCY_PODS)
                     ? (t->listed & GH_TENANCY_JOBS ? "pods" : "pods and training jobs")
                     : "training jobs");
        rc = GH_EAGAIN;
    } else if (sig->pod_uid) {
        long k = gh_strmap_find(t->pods, sig->pod_uid);
        const struct pod *p = k >= 0 ? gh_strmap_value(t->pods, (size_t)k) : NULL;
        if (!p) {
            snprintf(why, cap,
                     "the writer, pod %.40s, is no running pod of a training job the "
                     "controller knows; lines about job \"%.100s\" are taken only from its "
                     "own pods",
                     sig->pod_uid, job);
            rc = GH_EINVAL;
        } else if (strcmp(p->key, key) != 0) {
            const char *nl = strchr(p->key, '\n');
            snprintf(why, cap,
                     "the writer, pod %.40s, is a pod of job \"%.*s\" on node \"%.60s\"; it "
                     "may not report for job \"%.100s\" on node \"%.60s\"",
                     sig->pod_uid, nl ? (int)(nl - p->key) : 0, p->key, nl ? nl + 1 : "", job,
                     node ? node : "");
            rc = GH_EINVAL;
        }
    } else if (gh_strmap_find(t->placements, key) < 0) {
        snprintf(why, cap,
                 "job \"%.100s\" has no pod on node \"%.60s\": a node reports only for "
                 "the jobs that run on it",
                 job, node ? node : "");
        rc = GH_EINVAL;
    }
    if (rc == GH_OK && sig->kind == GH_KIND_CHECKPOINT && sig->path) {
        long k = gh_strmap_find(t->prefixes, job);
        const char *pre = k >= 0 ? gh_strmap_value(t->prefixes, (size_t)k) : NULL;
        if (pre && !gh_tenancy_path_under(pre, sig->path)) {
            snprintf(why, cap,
                     "field \"path\": \"%.120s\" is not under job \"%.100s\"'s "
                     "declared checkpoint prefix \"%.120s\" (%s)",
                     sig->path, job, pre, GH_ANN_CHECKPOINT_PREFIX);
            rc = GH_EINVAL;
        }
    }
    if (rc == GH_OK)
        t->admitted++;
    else if (rc == GH_EAGAIN)
        t->retried++;
    else
        t->refused++;
    pthread_mutex_unlock(&t->mu);
    free(key);
    return rc;
}

void gh_tenancy_stats(struct gh_tenancy *t, struct gh_tenancy_stats *out)
{
    pthread_mutex_lock(&t->mu);
    out->pods = gh_strmap_live(t->pods);
    out->placements = gh_strmap_live(t->placements);
    out->prefixes = gh_strmap_live(t->prefixes);
    out->admitted = t->admitted;
    out->refused = t->refused;
    out->retried = t->retried;
    pthread_mutex_unlock(&t->mu);
}
