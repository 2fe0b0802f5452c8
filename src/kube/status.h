/* status.h - the Kubernetes Status object of every non-2xx API reply (and
 * of watch ERROR events), decoded into a bounded value: HTTP code, reason,
 * message, retryAfterSeconds. */
#ifndef GH_KUBE_STATUS_H
#define GH_KUBE_STATUS_H

#include <stdbool.h>

#include <jansson.h>

#include "common/err.h"

/* metav1.StatusReason values gpuheal distinguishes; anything else is OTHER
 * (the text stays in .reason). */
enum gh_kube_reason {
    GH_KUBE_R_NONE = 0, /* a success, or nothing decoded yet */
    GH_KUBE_R_OTHER,
    GH_KUBE_R_BAD_REQUEST,
    GH_KUBE_R_UNAUTHORIZED,
    GH_KUBE_R_FORBIDDEN,
    GH_KUBE_R_NOT_FOUND,
    GH_KUBE_R_ALREADY_EXISTS,
    GH_KUBE_R_CONFLICT,
    GH_KUBE_R_GONE,    /* 410: "Gone" or "Expired" (stale resourceVersion / continue) */
    GH_KUBE_R_INVALID, /* 422 */
    GH_KUBE_R_TOO_MANY_REQUESTS, /* 429, incl. an eviction blocked by a PodDisruptionBudget */
    GH_KUBE_R_TIMEOUT,
    GH_KUBE_R_SERVER_TIMEOUT,
    GH_KUBE_R_INTERNAL,
    GH_KUBE_R_UNAVAILABLE,
    GH_KUBE_R_METHOD_NOT_ALLOWED,
    GH_KUBE_R_UNSUPPORTED_MEDIA_TYPE,
    GH_KUBE_R_TRANSPORT, /* no HTTP reply at all (connect, TLS, reset); code = 0 */
};

/* A decoded Status. Valid states: code == 0 with reason GH_KUBE_R_NONE (no
 * reply yet / success) or GH_KUBE_R_TRANSPORT; else code is the HTTP status.
 * Strings are always NUL-terminated (truncated to fit). */
struct gh_kube_status {
    int code;                 /* HTTP status (Status.code, else the reply's) */
    enum gh_kube_reason kind; /* classified reason */
    char reason[64];          /* Status.reason as sent ("" when absent) */
    char message[512];        /* Status.message, else the start of the body */
    int retry_after_s;        /* details.retryAfterSeconds or Retry-After; -1 when absent */
    char cause[128];          /* first details.causes[].message, if any */
};

/* Resets st to "nothing decoded". */
void gh_kube_status_reset(struct gh_kube_status *st);

/* Decodes an error reply: http is the HTTP status, body/len its body (may be
 * NULL/0, need not be JSON), retry_after the Retry-After header in seconds
 * (-1 absent). Always fills st; never fails. */
void gh_kube_status_from_reply(struct gh_kube_status *st, long http, const char *body, size_t len,
                               int retry_after);

/* Decodes a parsed Status object (kind "Status"), e.g. a watch ERROR event's
 * object. Returns false (st reset with reason OTHER, message "malformed")
 * when obj is not a Status. */
bool gh_kube_status_from_json(struct gh_kube_status *st, const json_t *obj);

/* Classifies a reason string, falling back on the HTTP code. */
enum gh_kube_reason gh_kube_reason_classify(const char *reason, int code);

/* Maps a decoded error onto gpuheal's result codes: NOT_FOUND -> GH_ENOTFOUND;
 * 429/503/500-with-retry/TRANSPORT -> GH_EAGAIN; 408/504/TIMEOUT ->
 * GH_ETIMEOUT; everything else -> GH_EIO (callers look at st->kind). */
int gh_kube_status_rc(const struct gh_kube_status *st);

/* Writes "HTTP <code> <reason>: <message>" into err and returns
 * gh_kube_status_rc(st). what names the operation ("get pods/x"). */
int gh_kube_status_err(const struct gh_kube_status *st, const char *what, struct gh_err *err);

#endif
