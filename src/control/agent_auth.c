/* agent_auth.c - agents authenticated by TokenReview of their bound
 * ServiceAccount tokens, with the accepted tokens and the refused ones
 * remembered apart, by token digest. */
#include "control/agent_auth.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "kube/api.h"
#include "kube/client.h"

static const struct gh_kube_res tokenreviews = {"authentication.k8s.io", "v1", "tokenreviews",
                                                "TokenReview", false};

#define WAYS 8 /* an accepted token's slots: its set of WAYS consecutive ones */

/* An accepted token: kept past its verdict's end (stale: reviewed again
 * first, ahead of tokens never seen) until another accepted token needs
 * the slot. Only an accepted token takes a slot here. */
struct known {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    int64_t until; /* clock ns the verdict holds to; 0: empty */
    char node[GH_INGEST_NODE_MAX];
};

/* A refused token, for negative_cache_ns (one slot per digest, overwritten). */
struct refusal {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    int64_t until; /* 0: empty */
    char why[256];
};

struct gh_agent_auth {
    const struct gh_clock *clock;
    char user[320];                /* system:serviceaccount:NS:NAME */
    char audience[256];
    int64_t cache_ns, negative_ns;
    int max_per_s;

    pthread_mutex_t review_mu;     /* the client: one review at a time */
    struct gh_kube_client *c;
    int64_t window_start;          /* the rate's one-second window */
    int in_window;

    pthread_mutex_t mu;      /* the tables and the stats; never held across I/O */
    struct known *known;     /* GH_AGENT_AUTH_CACHE: accepted tokens */
    struct refusal *refused; /* GH_AGENT_AUTH_REFUSED: refused tokens */
    struct gh_agent_auth_stats st;
};

int gh_agent_auth_new(const struct gh_agent_auth_opts *o, struct gh_agent_auth **out,
                      struct gh_err *err)
{
    *out = NULL;
    const char *sa = o->service_account, *sl = sa ? strchr(sa, '/') : NULL;
    if (!sl || sl == sa || !sl[1] || strchr(sl + 1, '/') || strlen(sa) > 300)
        return gh_err_set(err, GH_EINVAL, "agent service account \"%.300s\" is not NAMESPACE/NAME",
                          sa ? sa : "");
    struct gh_agent_auth *a = calloc(1, sizeof *a);
    if (!a || !(a->known = calloc(GH_AGENT_AUTH_CACHE, sizeof *a->known)) ||
        !(a->refused = calloc(GH_AGENT_AUTH_REFUSED, sizeof *a->refused))) {
        if (a)
            free(a->known);
        free(a);
        return gh_err_set(err, GH_ENOMEM, "agent authentication: out of memory");
    }
    a->clock = o->clock ? o->clock : gh_clock_real();
    snprintf(a->user, sizeof a->user, "system:serviceaccount:%.*s:%s", (int)(sl - sa), sa, sl + 1);
    snprintf(a->audience, sizeof a->audience, "%s", o->audience ? o->audience : "gpuheal");
    a->cache_ns = o->cache_ns > 0 ? o->cache_ns : 60 * GH_NS_PER_S;
    a->negative_ns = o->negative_cache_ns > 0 ? o->negative_cache_ns : 5 * GH_NS_PER_S;
    a->max_per_s = o->max_per_s > 0 ? o->max_per_s : 50;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->review_mu, NULL);
    int64_t tmo = o->timeout_ns > 0 ? o->timeout_ns : 5 * GH_NS_PER_S;
    struct gh_kube_client_opts co = {.clock = a->clock,
                                     .qps = -1, /* max_per_s bounds it */
                                     .request_timeout_ms = (long)(tmo / GH_NS_PER_MS),
                                     .connect_timeout_ms = (long)(tmo / GH_NS_PER_MS),
                                     .user_agent = "gpuheal-controller/tokenreview"};
    int rc = gh_kube_client_new(o->kube, &co, &a->c, err);
    if (rc) {
        gh_agent_auth_free(a);
        return gh_err_prefix(err, rc, "agent authentication");
    }
    *out = a;
    return GH_OK;
}

void gh_agent_auth_free(struct gh_agent_auth *a)
{
    if (!a)
        return;
    gh_kube_client_free(a->c);
    if (a->known)
        OPENSSL_cleanse(a->known, GH_AGENT_AUTH_CACHE * sizeof *a->known);
    if (a->refused)
        OPENSSL_cleanse(a->refused, GH_AGENT_AUTH_REFUSED * sizeof *a->refused);
    free(a->known);
    free(a->refused);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->review_mu);
    free(a);
}

static uint32_t hash_of(const unsigned char *d)
{
    uint32_t h;
    memcpy(&h, d, sizeof h);
    return h;
}

/* The accepted token d's slot, or NULL (mu held). */
static struct known *known_find(struct gh_agent_auth *a, const unsigned char *d)
{
    uint32_t base = hash_of(d) % GH_AGENT_AUTH_CACHE;
    for (uint32_t i = 0; i < WAYS; i++) {
        struct known *k = &a->known[(base + i) % GH_AGENT_AUTH_CACHE];
        if (k->until && CRYPTO_memcmp(k->digest, d, SHA256_DIGEST_LENGTH) == 0)
            return k;
    }
    return NULL;
}

/* A verdict already known (mu taken here): 1 accepted (*out set), 0
 * refused (err says why), -1 not known (*stale: accepted before, its
 * verdict ended). */
static int cached(struct gh_agent_auth *a, const unsigned char *d, int64_t now,
                  struct gh_ingest_sender *out, bool *stale, struct gh_err *err)
{
    int r = -1;
    *stale = false;
    pthread_mutex_lock(&a->mu);
    struct known *k = known_find(a, d);
    if (k && k->until > now) {
        a->st.cache_hits++;
        out->kind = GH_SENDER_NODE;
        snprintf(out->node, sizeof out->node, "%s", k->node);
        r = 1;
    } else if (k) {
        *stale = true;
    } else {
        struct refusal *f = &a->refused[hash_of(d) % GH_AGENT_AUTH_REFUSED];
        if (f->until > now && CRYPTO_memcmp(f->digest, d, SHA256_DIGEST_LENGTH) == 0) {
            a->st.cache_hits++;
            a->st.refused_cached++;
            gh_err_set(err, GH_EINVAL, "%s", f->why);
            r = 0;
        }
    }
    pthread_mutex_unlock(&a->mu);
    return r;
}

/* Records a review's verdict. An accepted token takes its own slot, an
 * empty one, else the one of its set whose verdict ends first (only
 * accepted tokens live there: no number of refusals evicts an agent); a
 * refused one overwrites its slot of the refusal table, and forgets the
 * token's accepted verdict (a token once good, now refused). */
static void remember(struct gh_agent_auth *a, const unsigned char *d, int64_t until, bool ok,
                     const char *node, const char *why)
{
    pthread_mutex_lock(&a->mu);
    struct known *k = known_find(a, d);
    if (ok) {
        if (!k) {
            uint32_t base = hash_of(d) % GH_AGENT_AUTH_CACHE;
            for (uint32_t i = 0; i < WAYS; i++) {
                struct known *c = &a->known[(base + i) % GH_AGENT_AUTH_CACHE];
                if (!k || c->until < k->until)
                    k = c;
            }
            if (k->until)
                a->st.known_evicted++;
        }
        memcpy(k->digest, d, SHA256_DIGEST_LENGTH);
        k->until = until;
        snprintf(k->node, sizeof k->node, "%s", node);
        a->st.accepted++;
    } else {
        if (k)
            OPENSSL_cleanse(k, sizeof *k);
        struct refusal *f = &a->refused[hash_of(d) % GH_AGENT_AUTH_REFUSED];
        memcpy(f->digest, d, SHA256_DIGEST_LENGTH);
        f->until = until;
        snprintf(f->why, sizeof f->why, "%s", why);
        a->st.refused++;
    }
    pthread_mutex_unlock(&a->mu);
}

static void count(struct gh_agent_auth *a, uint64_t *c)
{
    pthread_mutex_lock(&a->mu);
    (*c)++;
    pthread_mutex_unlock(&a->mu);
}

/* Judges a TokenReview status: GH_OK with node[cap], else why[cap]. */
static int judge(struct gh_agent_auth *a, const json_t *status, char *node, size_t ncap,
                 char *why, size_t wcap)
{
    if (!json_is_true(json_object_get(status, "authenticated"))) {
        const char *e = gh_json_str(status, "error");
        snprintf(why, wcap, "not authenticated by the API server%s%.100s", e ? ": " : "",
                 e ? e : "");
        return GH_EINVAL;
    }
    const json_t *user = json_object_get(status, "user");
    const char *name = gh_json_str(user, "username");
    if (!name || strcmp(name, a->user) != 0) {
        snprintf(why, wcap, "a token of %.100s, not of the agents' service account %.100s",
                 name ? name : "(no user)", a->user);
        return GH_EINVAL;
    }
    const json_t *auds = json_object_get(status, "audiences");
    bool aud_ok = false;
    size_t i;
    const json_t *v;
    json_array_foreach(auds, i, v) {
        if (json_is_string(v) && !strcmp(json_string_value(v), a->audience))
            aud_ok = true;
    }
    if (!aud_ok) {
        snprintf(why, wcap, "the token is not for the audience \"%.100s\"", a->audience);
        return GH_EINVAL;
    }
    const json_t *nodes = json_object_get(json_object_get(user, "extra"), GH_AGENT_AUTH_NODE_KEY);
    const char *n = json_array_size(nodes) == 1 ? json_string_value(json_array_get(nodes, 0)) : NULL;
    if (!n || !*n || strlen(n) >= ncap) {
        snprintf(why, wcap, "the token is not bound to a pod on a node (no %s)",
                 GH_AGENT_AUTH_NODE_KEY);
        return GH_EINVAL;
    }
    snprintf(node, ncap, "%s", n);
    return GH_OK;
}

int gh_agent_auth_cached(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                         bool *urgent, struct gh_err *err)
{
    struct gh_agent_auth *a = ctx;
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)token, len, d);
    memset(out, 0, sizeof *out);
    int r = cached(a, d, gh_clock_now(a->clock), out, urgent, err);
    OPENSSL_cleanse(d, sizeof d);
    return r < 0 ? GH_ENOTFOUND : r ? GH_OK : GH_EINVAL;
}

int gh_agent_auth_check(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                        struct gh_err *err)
{
    struct gh_agent_auth *a = ctx;
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)token, len, d);
    int64_t t = gh_clock_now(a->clock);
    bool stale;
    memset(out, 0, sizeof *out);
    int r = cached(a, d, t, out, &stale, err);
    if (r >= 0)
        return r ? GH_OK : GH_EINVAL;

    pthread_mutex_lock(&a->review_mu);
    /* another thread may have reviewed the same token meanwhile */
    t = gh_clock_now(a->clock);
    if ((r = cached(a, d, t, out, &stale, err)) >= 0) {
        pthread_mutex_unlock(&a->review_mu);
        return r ? GH_OK : GH_EINVAL;
    }
    if (t - a->window_start >= GH_NS_PER_S) {
        a->window_start = t;
        a->in_window = 0;
    }
    /* the rate bounds what tokens never seen cost the API server; an
     * accepted token's renewal is not held back by them */
    if (!stale && a->in_window >= a->max_per_s) {
        pthread_mutex_unlock(&a->review_mu);
        count(a, &a->st.rate_limited);
        return gh_err_set(err, GH_ELIMIT, "more than %d token reviews a second", a->max_per_s);
    }
    if (!stale)
        a->in_window++;
    count(a, &a->st.reviews);
    json_t *tr = json_pack("{s:s, s:s, s:{s:s%, s:[s]}}", "apiVersion", "authentication.k8s.io/v1",
                           "kind", "TokenReview", "spec", "token", token, len, "audiences",
                           a->audience);
    json_t *resp = NULL;
    struct gh_kube_status st;
    struct gh_err kerr = {{0}};
    struct gh_kube_ref ref = {&tokenreviews, NULL, NULL};
    int rc = tr ? gh_kube_create(a->c, &ref, tr, &resp, &st, &kerr)
                : gh_err_set(&kerr, GH_ENOMEM, "out of memory");
    json_decref(tr); /* jansson keeps no copy beyond this */
    pthread_mutex_unlock(&a->review_mu);
    if (rc) {
        json_decref(resp);
        count(a, &a->st.unavailable);
        return gh_err_set(err, GH_EAGAIN, "TokenReview failed: %s", kerr.msg);
    }
    char node[GH_INGEST_NODE_MAX], why[256];
    rc = judge(a, json_object_get(resp, "status"), node, sizeof node, why, sizeof why);
    json_decref(resp);
    t = gh_clock_now(a->clock);
    if (rc == GH_OK) {
        remember(a, d, t + a->cache_ns, true, node, NULL);
        out->kind = GH_SENDER_NODE;
        snprintf(out->node, sizeof out->node, "%s", node);
        return GH_OK;
    }
    remember(a, d, t + a->negative_ns, false, NULL, why);
    return gh_err_set(err, GH_EINVAL, "%s", why);
}

void gh_agent_auth_stats(struct gh_agent_auth *a, struct gh_agent_auth_stats *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->st;
    pthread_mutex_unlock(&a->mu);
}
