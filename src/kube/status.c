/* status.c - decodes Kubernetes Status bodies (and non-Status error bodies)
 * into struct gh_kube_status and maps them onto gpuheal result codes. */
#include "kube/status.h"

#include <stdio.h>
#include <string.h>

static void copy_bounded(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    /* keep the message printable: control bytes become spaces */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)dst[i] < 0x20)
            dst[i] = ' ';
}

void gh_kube_status_reset(struct gh_kube_status *st)
{
    memset(st, 0, sizeof *st);
    st->retry_after_s = -1;
}

static const struct {
    const char *name;
    enum gh_kube_reason kind;
} reasons[] = {
    {"BadRequest", GH_KUBE_R_BAD_REQUEST},
    {"Unauthorized", GH_KUBE_R_UNAUTHORIZED},
    {"Forbidden", GH_KUBE_R_FORBIDDEN},
    {"NotFound", GH_KUBE_R_NOT_FOUND},
    {"AlreadyExists", GH_KUBE_R_ALREADY_EXISTS},
    {"Conflict", GH_KUBE_R_CONFLICT},
    {"Gone", GH_KUBE_R_GONE},
    {"Expired", GH_KUBE_R_GONE},
    {"Invalid", GH_KUBE_R_INVALID},
    {"TooManyRequests", GH_KUBE_R_TOO_MANY_REQUESTS},
    {"Timeout", GH_KUBE_R_TIMEOUT},
    {"ServerTimeout", GH_KUBE_R_SERVER_TIMEOUT},
    {"InternalError", GH_KUBE_R_INTERNAL},
    {"ServiceUnavailable", GH_KUBE_R_UNAVAILABLE},
    {"MethodNotAllowed", GH_KUBE_R_METHOD_NOT_ALLOWED},
    {"UnsupportedMediaType", GH_KUBE_R_UNSUPPORTED_MEDIA_TYPE},
};

enum gh_kube_reason gh_kube_reason_classify(const char *reason, int code)
{
    if (reason && reason[0])
        for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
            if (strcmp(reason, reasons[i].name) == 0)
                return reasons[i].kind;
    switch (code) {
    case 400: return GH_KUBE_R_BAD_REQUEST;
    case 401: return GH_KUBE_R_UNAUTHORIZED;
    case 403: return GH_KUBE_R_FORBIDDEN;
    case 404: return GH_KUBE_R_NOT_FOUND;
    case 405: return GH_KUBE_R_METHOD_NOT_ALLOWED;
    case 409: return GH_KUBE_R_CONFLICT;
    case 410: return GH_KUBE_R_GONE;
    case 415: return GH_KUBE_R_UNSUPPORTED_MEDIA_TYPE;
    case 422: return GH_KUBE_R_INVALID;
    case 429: return GH_KUBE_R_TOO_MANY_REQUESTS;
    case 500: return GH_KUBE_R_INTERNAL;
    case 503: return GH_KUBE_R_UNAVAILABLE;
    case 504: return GH_KUBE_R_TIMEOUT;
    case 0: return GH_KUBE_R_TRANSPORT;
    default: return code >= 200 && code < 300 ? GH_KUBE_R_NONE : GH_KUBE_R_OTHER;
    }
}

static void fill_from_obj(struct gh_kube_status *st, const json_t *obj)
{
    const json_t *v;
    if ((v = json_object_get(obj, "code")) && json_is_integer(v) && json_integer_value(v) > 0 &&
        json_integer_value(v) < 1000)
        st->code = (int)json_integer_value(v);
    if ((v = json_object_get(obj, "reason")) && json_is_string(v))
        copy_bounded(st->reason, sizeof st->reason, json_string_value(v), json_string_length(v));
    if ((v = json_object_get(obj, "message")) && json_is_string(v))
        copy_bounded(st->message, sizeof st->message, json_string_value(v),
                     json_string_length(v));
    const json_t *det = json_object_get(obj, "details");
    if (json_is_object(det)) {
        v = json_object_get(det, "retryAfterSeconds");
        if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 86400)
            st->retry_after_s = (int)json_integer_value(v);
        const json_t *causes = json_object_get(det, "causes");
        const json_t *c0 = json_is_array(causes) ? json_array_get(causes, 0) : NULL;
        const json_t *m = json_is_object(c0) ? json_object_get(c0, "message") : NULL;
        if (json_is_string(m))
            copy_bounded(st->cause, sizeof st->cause, json_string_value(m), json_string_length(m));
    }
}

bool gh_kube_status_from_json(struct gh_kube_status *st, const json_t *obj)
{
    gh_kube_status_reset(st);
    const json_t *kind = json_is_object(obj) ? json_object_get(obj, "kind") : NULL;
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "Status") != 0) {
        st->kind = GH_KUBE_R_OTHER;
        snprintf(st->message, sizeof st->message, "malformed Status object");
        return false;
    }
    fill_from_obj(st, obj);
    st->kind = gh_kube_reason_classify(st->reason, st->code);
    if (st->kind == GH_KUBE_R_NONE) /* a "Failure" without a code */
        st->kind = GH_KUBE_R_OTHER;
    return true;
}

void gh_kube_status_from_reply(struct gh_kube_status *st, long http, const char *body, size_t len,
                               int retry_after)
{
    gh_kube_status_reset(st);
    st->code = http > 0 && http < 1000 ? (int)http : 0;
    bool decoded = false;
    if (body && len > 0) {
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        const json_t *kind = json_is_object(j) ? json_object_get(j, "kind") : NULL;
        if (json_is_string(kind) && strcmp(json_string_value(kind), "Status") == 0) {
            fill_from_obj(st, j);
            decoded = true;
        }
        json_decref(j);
        if (!decoded)
            copy_bounded(st->message, sizeof st->message, body, len);
    }
    /* The HTTP status of the reply wins over a Status.code that disagrees. */
    if (http > 0 && http < 1000)
        st->code = (int)http;
    if (st->retry_after_s < 0 && retry_after >= 0)
        st->retry_after_s = retry_after;
    st->kind = gh_kube_reason_classify(st->reason, st->code);
}

int gh_kube_status_rc(const struct gh_kube_status *st)
{
    switch (st->kind) {
    case GH_KUBE_R_NONE: return GH_OK;
    case GH_KUBE_R_NOT_FOUND: return GH_ENOTFOUND;
    case GH_KUBE_R_TOO_MANY_REQUESTS:
    case GH_KUBE_R_UNAVAILABLE:
    case GH_KUBE_R_TRANSPORT: return GH_EAGAIN;
    case GH_KUBE_R_TIMEOUT:
    case GH_KUBE_R_SERVER_TIMEOUT: return GH_ETIMEOUT;
    case GH_KUBE_R_INTERNAL: return st->retry_after_s >= 0 ? GH_EAGAIN : GH_EIO;
    default: return GH_EIO;
    }
}

int gh_kube_status_err(const struct gh_kube_status *st, const char *what, struct gh_err *err)
{
    int rc = gh_kube_status_rc(st);
    if (st->kind == GH_KUBE_R_TRANSPORT)
        return gh_err_set(err, rc, "%s: %s", what, st->message[0] ? st->message : "no reply");
    if (st->retry_after_s >= 0)
        return gh_err_set(err, rc, "%s: HTTP %d %s: %s (retry after %ds)", what, st->code,
                          st->reason[0] ? st->reason : "-", st->message, st->retry_after_s);
    return gh_err_set(err, rc, "%s: HTTP %d %s: %s", what, st->code,
                      st->reason[0] ? st->reason : "-", st->message);
}
