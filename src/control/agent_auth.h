/* agent_auth.h - who an agent is: its bearer token, a ServiceAccount token
 * bound to its pod (a projected volume with an audience), checked with a
 * TokenReview against the Kubernetes API server. A token is accepted when
 * the review says it is authenticated, for the configured audience, as the
 * configured ServiceAccount (system:serviceaccount:NS:NAME), and its extra
 * info names the node the pod runs on (authentication.kubernetes.io/
 * node-name, set on tokens bound to a pod); the sender may then report
 * only for that node (ingest/server.h, "Senders").
 *
 * Verdicts are remembered by the token's SHA-256 (never the token), the
 * accepted and the refused apart, so that a flood of made-up tokens cannot
 * push a known agent out: an accepted token for opts.cache_ns in a table
 * of its own (GH_AGENT_AUTH_CACHE slots, sets of 8; only another accepted
 * token takes its slot, the one whose verdict ends first), kept past that
 * as "known" (its renewal is reviewed ahead of unknown tokens and is not
 * held by the rate below); a refused one for opts.negative_cache_ns in a
 * second table (GH_AGENT_AUTH_REFUSED slots, overwritten). A review runs
 * on the calling thread (the ingest server's review worker, never a
 * request thread), one at a time, each bounded by opts.timeout_ns;
 * reviews of tokens never accepted beyond opts.max_per_s in a second
 * answer GH_ELIMIT (503, the agent retries) so that a stream of made-up
 * tokens costs the API server a bounded rate.
 *
 * Thread-safe: gh_agent_auth_check may be called from several threads. */
#ifndef GH_CONTROL_AGENT_AUTH_H
#define GH_CONTROL_AGENT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "ingest/server.h"
#include "kube/kubeconfig.h"

#define GH_AGENT_AUTH_CACHE 4096
#define GH_AGENT_AUTH_REFUSED 4096
#define GH_AGENT_AUTH_NODE_KEY "authentication.kubernetes.io/node-name"

struct gh_agent_auth_opts {
    const struct gh_kube_config *kube; /* borrowed (copied by the client) */
    const struct gh_clock *clock;      /* borrowed; NULL: real */
    const char *service_account;       /* "NAMESPACE/NAME", required (copied) */
    const char *audience;              /* NULL: "gpuheal" (copied) */
    int64_t cache_ns;                  /* 0: 60 s */
    int64_t negative_cache_ns;         /* 0: 5 s */
    int64_t timeout_ns;                /* one review; 0: 5 s */
    int max_per_s;                     /* reviews a second; 0: 50 */
};

struct gh_agent_auth;

/* *out: caller frees with gh_agent_auth_free. GH_EINVAL (a service account
 * not NAMESPACE/NAME, a bad kube config), GH_ENOMEM. */
int gh_agent_auth_new(const struct gh_agent_auth_opts *opts, struct gh_agent_auth **out,
                      struct gh_err *err);
void gh_agent_auth_free(struct gh_agent_auth *a);

/* A gh_ingest_auth_fn (ctx: the gh_agent_auth): the remembered verdict,
 * else a TokenReview (blocks up to opts.timeout_ns). GH_OK, GH_EINVAL
 * (refused), GH_EAGAIN (the review failed), GH_ELIMIT (over the rate). */
int gh_agent_auth_check(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                        struct gh_err *err);

/* A gh_ingest_auth_cached_fn: the remembered verdict only, never blocks
 * on the API server. GH_OK, GH_EINVAL, or GH_ENOTFOUND (*urgent: an
 * accepted token whose verdict ended). */
int gh_agent_auth_cached(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                         bool *urgent, struct gh_err *err);

struct gh_agent_auth_stats {
    uint64_t reviews, cache_hits, accepted, refused, unavailable;
    uint64_t rate_limited;   /* reviews not sent: over max_per_s */
    uint64_t refused_cached; /* answered from the refusal table */
    uint64_t known_evicted;  /* accepted tokens pushed out by other accepted ones */
};
void gh_agent_auth_stats(struct gh_agent_auth *a, struct gh_agent_auth_stats *out);

#endif
