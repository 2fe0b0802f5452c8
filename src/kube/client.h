/* client.h - the Kubernetes API transport: one opaque client per API server,
 * a libcurl multi handle (HTTP/2 multiplexing when offered, connection and
 * TLS-session reuse), TLS with CA verification, client certificates from
 * memory, bearer tokens re-read from file on rotation, client-side QPS/burst
 * rate limiting, a bound on in-flight requests, and a small timer wheel.
 *
 * Event loop: the client keeps curl's sockets, a timerfd (curl timeouts,
 * timers, rate-limit waits) and a wakeup eventfd in one epoll set, whose fd
 * (gh_kube_client_fd) the caller adds to its own loop; when it is readable,
 * or at the latest when the loop's timeout expires, call
 * gh_kube_client_run(c, 0, ...). Callers without a loop of their own call
 * gh_kube_client_run with a wait instead.
 *
 * Threading: one client belongs to one thread (the event loop). Nothing here
 * blocks except gh_kube_client_run() up to its max_wait_ms and the
 * synchronous gh_kube_call(), which is for simple callers (CLI, tests) and
 * runs the same loop until its reply arrives. Only gh_kube_client_wakeup()
 * may be called from another thread. */
#ifndef GH_KUBE_CLIENT_H
#define GH_KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "kube/kubeconfig.h"
#include "kube/status.h"

struct gh_kube_client;
struct gh_kube_call;
struct gh_kube_ratelimit; /* kube/ratelimit.h */

struct gh_kube_client_opts {
    const struct gh_clock *clock; /* borrowed, outlives the client; NULL: real clock */
    double qps;                   /* request starts per second; 0: 50; <0: unlimited */
    int burst;                    /* token bucket size; 0: 100 */
    struct gh_kube_ratelimit *shared_limit; /* borrowed, outlives the client; set: this
                                               bucket (shared with other clients)
                                               instead of qps/burst */
    int max_inflight;             /* non-watch requests on the wire; 0: 32 */
    int max_queued;               /* requests waiting for a token or slot; 0: 10000 */
    size_t max_body;              /* largest reply body kept; 0: 64 MiB */
    long connect_timeout_ms;      /* 0: 10 s */
    long request_timeout_ms;      /* non-watch default; 0: 60 s */
    int64_t token_reread_ns;      /* token file re-read period; 0: 60 s */
    const char *user_agent;       /* copied; NULL: "gpuheal/0.1" */
    bool http1_only;              /* never negotiate HTTP/2 */
    uint64_t seed;                /* jitter PRNG seed; 0: from clock and pid */
};

enum gh_kube_method { GH_KUBE_GET, GH_KUBE_POST, GH_KUBE_PUT, GH_KUBE_PATCH, GH_KUBE_DELETE };

#define GH_KUBE_PATH_MAX 4096

/* One request. A value type: path is inline, body is owned (malloc'd) and
 * stolen by gh_kube_submit()/gh_kube_call(); gh_kube_req_clear() frees it. */
struct gh_kube_req {
    enum gh_kube_method method;
    char path[GH_KUBE_PATH_MAX]; /* "/api/v1/..." with escaped query */
    char *body;                  /* owned or NULL */
    size_t body_len;
    const char *content_type;    /* static string; NULL: application/json with a body */
    bool watch;                  /* streamed; exempt from max_inflight and request timeout */
    long timeout_ms;             /* 0: client default (watch: none) */
};

void gh_kube_req_clear(struct gh_kube_req *req);

/* A reply. http == 0 means none arrived (status.kind TRANSPORT). body is the
 * parsed JSON of a 2xx reply (owned; NULL when empty); status is decoded for
 * every non-2xx reply. */
struct gh_kube_resp {
    long http;
    json_t *body;
    struct gh_kube_status status;
};

void gh_kube_resp_clear(struct gh_kube_resp *resp);

/* Completion: rc GH_OK for 2xx, else gh_kube_status_rc() of resp->status or
 * a local error (GH_ELIMIT body too large, GH_EINVAL malformed JSON, ...).
 * resp is borrowed for the call; the callee may steal resp->body (set it to
 * NULL). err holds the detail when rc != GH_OK. After this callback the call
 * handle is gone. */
typedef void (*gh_kube_done_fn)(void *ud, int rc, struct gh_kube_resp *resp,
                                const struct gh_err *err);

/* Streaming body of a 2xx watch reply, called from inside curl: return
 * GH_OK to continue, or an rc (detail in err) to abort the stream; that rc
 * and detail reach done. Must not submit, cancel or run the client. */
typedef int (*gh_kube_data_fn)(void *ud, const char *data, size_t len, struct gh_err *err);

typedef void (*gh_kube_timer_fn)(void *ud);

/* Creates a client for cfg (deep-copied). opts may be NULL. */
int gh_kube_client_new(const struct gh_kube_config *cfg, const struct gh_kube_client_opts *opts,
                       struct gh_kube_client **out, struct gh_err *err);

/* Cancels every call and timer without callbacks, frees. Accepts NULL. */
void gh_kube_client_free(struct gh_kube_client *c);

/* Queues req (its body is stolen, req is reset). done is required; data only
 * for watch requests. *call (optional) receives a handle valid until done
 * runs or the call is cancelled. GH_ELIMIT when the queue is full. */
int gh_kube_submit(struct gh_kube_client *c, struct gh_kube_req *req, gh_kube_done_fn done,
                   gh_kube_data_fn data, void *ud, struct gh_kube_call **call,
                   struct gh_err *err);

/* Drops a call that has not completed: no callback will run for it. */
void gh_kube_cancel(struct gh_kube_client *c, struct gh_kube_call *call);

/* One turn of the loop: fires due timers, starts queued requests the rate
 * limit allows, waits up to max_wait_ms for network activity, runs
 * completions. Returns GH_OK or GH_EIO on a curl failure. */
int gh_kube_client_run(struct gh_kube_client *c, int max_wait_ms, struct gh_err *err);

/* Interrupts a gh_kube_client_run() wait (thread-safe). */
void gh_kube_client_wakeup(struct gh_kube_client *c);

/* The epoll fd to watch (EPOLLIN) from the caller's loop. Borrowed. */
int gh_kube_client_fd(const struct gh_kube_client *c);

/* Synchronous request on the same transport: submits req, runs the loop
 * until its reply (other calls' callbacks and timers run meanwhile), fills
 * *resp (caller clears). Must not be called from a data callback. */
int gh_kube_call(struct gh_kube_client *c, struct gh_kube_req *req, struct gh_kube_resp *resp,
                 struct gh_err *err);

/* Runs fn(ud) on the loop after delay_ns (client clock). Returns an id > 0,
 * or 0 on ENOMEM. */
uint64_t gh_kube_timer_add(struct gh_kube_client *c, int64_t delay_ns, gh_kube_timer_fn fn,
                           void *ud);
/* Cancels a pending timer; unknown or fired ids are ignored. */
void gh_kube_timer_cancel(struct gh_kube_client *c, uint64_t id);

const struct gh_clock *gh_kube_client_clock(const struct gh_kube_client *c);
/* The default namespace of the configuration ("default" when unset). */
const char *gh_kube_client_namespace(const struct gh_kube_client *c);
/* Next value of the client's jitter PRNG (not for secrets). */
uint64_t gh_kube_client_rand(struct gh_kube_client *c);
/* Uniform duration in [base, base*(1+factor)). */
int64_t gh_kube_jitter(struct gh_kube_client *c, int64_t base, double factor);

struct gh_kube_client_stats {
    uint64_t started;    /* requests put on the wire */
    uint64_t completed;  /* replies or failures delivered */
    uint64_t throttled;  /* starts delayed by the rate limiter */
    uint64_t token_reads;
    int inflight;        /* non-watch on the wire */
    int watches;         /* watch streams open */
    int queued;
    long last_http_version; /* CURL_HTTP_VERSION_* of the last completed reply */
    uint64_t connects;      /* new connections opened (the rest reused one) */
};
void gh_kube_client_stats(const struct gh_kube_client *c, struct gh_kube_client_stats *st);

#endif
