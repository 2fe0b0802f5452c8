/* ratelimit.h - a token bucket shared by several API clients on several
 * threads, so that one QPS budget covers them all (the executor's workers:
 * a lone incident may use the whole budget, a burst shares it). */
#ifndef GH_KUBE_RATELIMIT_H
#define GH_KUBE_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct gh_kube_ratelimit;

/* qps > 0 request starts per second, burst > 0 tokens; *out owned by the
 * caller (gh_kube_ratelimit_free), and must outlive every client using it. */
int gh_kube_ratelimit_new(double qps, int burst, struct gh_kube_ratelimit **out,
                          struct gh_err *err);
void gh_kube_ratelimit_free(struct gh_kube_ratelimit *rl);

/* Takes one token at time now (ns, the caller's clock); false: none yet,
 * *wait_ns until the next. Thread-safe. */
bool gh_kube_ratelimit_take(struct gh_kube_ratelimit *rl, int64_t now, int64_t *wait_ns);

#endif
