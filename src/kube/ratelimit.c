/* ratelimit.c - the shared token bucket of ratelimit.h: the same
 * arithmetic as a client's own bucket, under a mutex. */
#include "kube/ratelimit.h"

#include <pthread.h>
#include <stdlib.h>

struct gh_kube_ratelimit {
    pthread_mutex_t mu;
    double qps, burst, tokens;
    int64_t tokens_at; /* 0: not yet used (full) */
};

int gh_kube_ratelimit_new(double qps, int burst, struct gh_kube_ratelimit **out,
                          struct gh_err *err)
{
    *out = NULL;
    if (!(qps > 0) || burst <= 0)
        return gh_err_set(err, GH_EINVAL, "rate limit: qps and burst must be > 0 (%g, %d)", qps,
                          burst);
    struct gh_kube_ratelimit *rl = calloc(1, sizeof *rl);
    if (!rl)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    pthread_mutex_init(&rl->mu, NULL);
    rl->qps = qps;
    rl->burst = rl->tokens = burst;
    *out = rl;
    return GH_OK;
}

void gh_kube_ratelimit_free(struct gh_kube_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_mutex_destroy(&rl->mu);
    free(rl);
}

bool gh_kube_ratelimit_take(struct gh_kube_ratelimit *rl, int64_t now, int64_t *wait_ns)
{
    pthread_mutex_lock(&rl->mu);
    if (rl->tokens_at == 0)
        rl->tokens_at = now;
    int64_t dt = now - rl->tokens_at;
    if (dt > 0) {
        rl->tokens += (double)dt * rl->qps / 1e9;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        rl->tokens_at = now;
    }
    bool ok = rl->tokens >= 1.0;
    if (ok)
        rl->tokens -= 1.0;
    else
        *wait_ns = (int64_t)((1.0 - rl->tokens) / rl->qps * 1e9) + 1;
    pthread_mutex_unlock(&rl->mu);
    return ok;
}
