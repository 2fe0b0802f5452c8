/* agent_auth.h - who an agent is: its bearer token, a ServiceAccount token
 * bound to its pod (a projected volume with an audience), checked with a
 * TokenReview against the Kubernetes API server. A token is accepted when
 * the review says it is authenticated, for the configured audience, as the
 * configured ServiceAccount (system:serviceaccount:NS:NAME), and its extra
 * info names the node the pod runs on (authentication.kubernetes.io/
 * node-name, set on tokens bound to a pod); the sender may then report
 * only for that node (ingest/server.h, "Senders").
 *
 * Results are cached by the token's SHA-256 (never the token): an accepted
 * token for opts.cache_ns, a refused one for opts.negative_cache_ns, in a
 * fixed table (GH_AGENT_AUTH_CACHE slots; a full slot is overwritten). A
 * review runs on the calling thread (an ingest server thread), one at a
 * time, each bounded by opts.timeout_ns; reviews beyond opts.max_per_s in
 * a second answer GH_EAGAIN (503, the agent retries) so that a stream of
 * made-up tokens costs the API server a bounded rate.
 *
 * Thread-safe: gh_agent_auth_check may be called from several threads. */
#ifndef GH_CONTROL_AGENT_AUTH_H
#define GH_CONTROL_AGENT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "ingest/server.h"
#include "kube/kubeconfig.h"

#define GH_AGENT_AUTH_CACHE 4096
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

/* A gh_ingest_auth_fn (ctx: the gh_agent_auth). */
int gh_agent_auth_check(void *ctx, const char *token, size_t len, struct gh_ingest_sender *out,
                        struct gh_err *err);

struct gh_agent_auth_stats {
    uint64_t reviews, cache_hits, accepted, refused, unavailable;
};
void gh_agent_auth_stats(struct gh_agent_auth *a, struct gh_agent_auth_stats *out);

#endif
