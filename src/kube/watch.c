/* watch.c - frames and decodes the Kubernetes watch event stream with a
 * bounded buffer (see watch.h). */
#include "kube/watch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct gh_kube_watch_decoder {
    gh_kube_event_fn fn;
    void *ud;
    size_t max_event;
    char *buf;        /* bytes of the current object, from its '{' */
    size_t len, cap;
    long depth;       /* bracket depth inside the current object; 0 = between objects */
    bool in_string;
    bool escape;
    unsigned long count;
};

const char *gh_kube_ev_name(enum gh_kube_ev_type t)
{
    switch (t) {
    case GH_KUBE_EV_ADDED: return "ADDED";
    case GH_KUBE_EV_MODIFIED: return "MODIFIED";
    case GH_KUBE_EV_DELETED: return "DELETED";
    case GH_KUBE_EV_BOOKMARK: return "BOOKMARK";
    case GH_KUBE_EV_ERROR: return "ERROR";
    }
    return "?";
}

int gh_kube_watch_decoder_new(size_t max_event, gh_kube_event_fn fn, void *ud,
                              struct gh_kube_watch_decoder **out, struct gh_err *err)
{
    *out = NULL;
    struct gh_kube_watch_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    d->fn = fn;
    d->ud = ud;
    d->max_event = max_event ? max_event : GH_KUBE_WATCH_EVENT_MAX_DEFAULT;
    *out = d;
    return GH_OK;
}

void gh_kube_watch_decoder_free(struct gh_kube_watch_decoder *d)
{
    if (!d)
        return;
    free(d->buf);
    free(d);
}

void gh_kube_watch_decoder_reset(struct gh_kube_watch_decoder *d)
{
    d->len = 0;
    d->depth = 0;
    d->in_string = d->escape = false;
    /* give back a buffer grown by one huge event */
    if (d->cap > (1u << 20)) {
        free(d->buf);
        d->buf = NULL;
        d->cap = 0;
    }
}

unsigned long gh_kube_watch_decoder_count(const struct gh_kube_watch_decoder *d)
{
    return d->count;
}

static int buf_append(struct gh_kube_watch_decoder *d, const char *p, size_t n, struct gh_err *err)
{
    if (n == 0)
        return GH_OK;
    if (d->len + n > d->max_event)
        return gh_err_set(err, GH_ELIMIT, "watch event larger than %zu bytes", d->max_event);
    if (d->len + n > d->cap) {
        size_t ncap = d->cap ? d->cap : 4096;
        while (ncap < d->len + n)
            ncap *= 2;
        if (ncap > d->max_event)
            ncap = d->max_event;
        char *nb = realloc(d->buf, ncap);
        if (!nb)
            return gh_err_set(err, GH_ENOMEM, "out of memory for a watch event");
        d->buf = nb;
        d->cap = ncap;
    }
    memcpy(d->buf + d->len, p, n);
    d->len += n;
    return GH_OK;
}

static int emit(struct gh_kube_watch_decoder *d, struct gh_err *err)
{
    json_error_t je;
    json_t *ev = json_loadb(d->buf, d->len, 0, &je);
    d->len = 0;
    if (!ev)
        return gh_err_set(err, GH_EINVAL, "watch: malformed JSON at column %d: %s", je.column,
                          je.text);
    int rc = GH_OK;
    const json_t *type = json_object_get(ev, "type");
    json_t *obj = json_object_get(ev, "object");
    if (!json_is_object(ev) || !json_is_string(type) || !json_is_object(obj)) {
        rc = gh_err_set(err, GH_EINVAL, "watch: event without a type string and an object");
        goto out;
    }
    static const char *names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    int t = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(json_string_value(type), names[i]) == 0)
            t = i;
    if (t < 0) {
        rc = gh_err_set(err, GH_EINVAL, "watch: unknown event type \"%.40s\"",
                        json_string_value(type));
        goto out;
    }
    d->count++;
    rc = d->fn(d->ud, (enum gh_kube_ev_type)t, obj, err);
out:
    json_decref(ev);
    return rc;
}

int gh_kube_watch_decoder_feed(struct gh_kube_watch_decoder *d, const char *data, size_t len,
                               struct gh_err *err)
{
    size_t i = 0;
    int rc;
    while (i < len) {
        if (d->depth == 0) {
            /* between objects: whitespace, then '{' opens the next one */
            char ch = data[i];
            if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
                i++;
                continue;
            }
            if (ch != '{')
                return gh_err_set(err, GH_EINVAL, "watch: unexpected byte 0x%02x between events",
                                  (unsigned char)ch);
            d->depth = 1;
            d->in_string = d->escape = false;
            d->len = 0;
            if ((rc = buf_append(d, data + i, 1, err)))
                return rc;
            i++;
            continue;
        }
        /* inside an object: scan to its end or the end of the chunk */
        size_t start = i;
        bool closed = false;
        for (; i < len; i++) {
            char ch = data[i];
            if (d->in_string) {
                if (d->escape)
                    d->escape = false;
                else if (ch == '\\')
                    d->escape = true;
                else if (ch == '"')
                    d->in_string = false;
                continue;
            }
            if (ch == '"') {
                d->in_string = true;
            } else if (ch == '{' || ch == '[') {
                if (++d->depth > 4096)
                    return gh_err_set(err, GH_ELIMIT, "watch: event nested too deep");
            } else if (ch == '}' || ch == ']') {
                if (--d->depth == 0) {
                    i++;
                    closed = true;
                    break;
                }
            }
        }
        if ((rc = buf_append(d, data + start, i - start, err)))
            return rc;
        if (closed && (rc = emit(d, err)))
            return rc;
    }
    return GH_OK;
}

int gh_kube_watch_decoder_finish(struct gh_kube_watch_decoder *d, struct gh_err *err)
{
    if (d->depth != 0)
        return gh_err_set(err, GH_EINVAL, "watch: stream ended inside an event (%zu bytes)",
                          d->len);
    return GH_OK;
}
