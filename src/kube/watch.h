/* watch.h - decoder of the Kubernetes watch stream: a chunked HTTP body of
 * concatenated JSON objects {"type": ..., "object": {...}}, split at
 * arbitrary byte boundaries. Pure (no I/O), bounded, fuzzed.
 *
 * Framing does not rely on newlines: a small scanner tracks string and
 * bracket state to find where each top-level object ends, then jansson
 * parses exactly that span. Bytes between objects must be whitespace. */
#ifndef GH_KUBE_WATCH_H
#define GH_KUBE_WATCH_H

#include <stddef.h>

#include <jansson.h>

#include "common/err.h"

enum gh_kube_ev_type {
    GH_KUBE_EV_ADDED,
    GH_KUBE_EV_MODIFIED,
    GH_KUBE_EV_DELETED,
    GH_KUBE_EV_BOOKMARK,
    GH_KUBE_EV_ERROR, /* object is a Status (e.g. 410 Expired) */
};

const char *gh_kube_ev_name(enum gh_kube_ev_type t);

#define GH_KUBE_WATCH_EVENT_MAX_DEFAULT (16u << 20)

struct gh_kube_watch_decoder;

/* Called once per decoded event. object is borrowed for the call (take a
 * reference with json_incref to keep it). Return GH_OK to go on, or an rc
 * (detail in err) that feed() then returns. */
typedef int (*gh_kube_event_fn)(void *ud, enum gh_kube_ev_type type, json_t *object,
                                struct gh_err *err);

/* max_event: largest single event in bytes (0: 16 MiB). */
int gh_kube_watch_decoder_new(size_t max_event, gh_kube_event_fn fn, void *ud,
                              struct gh_kube_watch_decoder **out, struct gh_err *err);
void gh_kube_watch_decoder_free(struct gh_kube_watch_decoder *d);

/* Consumes len bytes; emits every event completed by them. On any error the
 * decoder must be reset before reuse. Errors: GH_EINVAL (malformed: not an
 * object, bad JSON, missing/unknown type, object not an object), GH_ELIMIT
 * (event larger than max_event), GH_ENOMEM, or the callback's rc. */
int gh_kube_watch_decoder_feed(struct gh_kube_watch_decoder *d, const char *data, size_t len,
                               struct gh_err *err);

/* At end of stream: GH_EINVAL if a partial event is pending. */
int gh_kube_watch_decoder_finish(struct gh_kube_watch_decoder *d, struct gh_err *err);

/* Drops partial state (a new stream). */
void gh_kube_watch_decoder_reset(struct gh_kube_watch_decoder *d);

/* Events decoded since creation. */
unsigned long gh_kube_watch_decoder_count(const struct gh_kube_watch_decoder *d);

#endif
