/* informer.h - list+watch of one resource type into a gh_kube_store, with
 * add/update/delete handlers and periodic resync, on the client's loop.
 *
 * The reflector underneath lists in pages (limit/continue), then watches
 * from the list's resourceVersion with bookmarks, tracking the latest
 * resourceVersion seen. A watch that ends normally is re-opened at once; a
 * failed one after exponential backoff with jitter; a 410 Gone (stale
 * resourceVersion, e.g. after etcd compaction or an apiserver restart)
 * triggers a relist whose differences reach the handlers as adds, updates
 * and deletes, so no change is missed.
 *
 * Handlers run on the loop (never inside curl), receive the kept fields
 * only (borrowed json_t), and may use the client freely. */
#ifndef GH_KUBE_INFORMER_H
#define GH_KUBE_INFORMER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/status.h"
#include "kube/store.h"

struct gh_kube_informer;

/* Strings and arrays are copied at creation. */
struct gh_kube_informer_opts {
    const struct gh_kube_res *res; /* borrowed: must outlive the informer (use the constants) */
    const char *ns;                /* NULL: all namespaces */
    const char *label_selector;
    const char *field_selector;
    const char *const *keep;       /* JSON Pointers kept in the cache (see store.h) */
    size_t nkeep;
    const struct gh_kube_index_spec *indexes;
    size_t nindexes;
    int page_size;                 /* list limit; 0: 500 */
    int64_t resync_ns;             /* replay every cached object as an update; 0: never */
    int64_t backoff_min_ns;        /* retry base after a failure, doubled per failure up
                                      to backoff_max_ns; each delay is uniform in
                                      [base/2, base) (jitter); 0: 500 ms */
    int64_t backoff_max_ns;        /* 0: 30 s */
    int watch_timeout_s;           /* server timeoutSeconds, jittered up to x2; 0: 300 */
    size_t max_event;              /* largest watch event; 0: 16 MiB */
    size_t max_objects;            /* cache at most this many objects, the first added
                                      leaving first (no delete handler; a relist shows
                                      the ones still on the server as adds again);
                                      0: no bound */
};

struct gh_kube_handlers {
    void (*on_add)(void *ud, const json_t *obj);
    /* old == NULL on resync replays (obj unchanged). */
    void (*on_update)(void *ud, const json_t *old, const json_t *obj);
    /* obj: the last cached state. */
    void (*on_delete)(void *ud, const json_t *obj);
    /* After the first complete list. */
    void (*on_synced)(void *ud);
    /* Informational: a list or watch failed (the informer retries). */
    void (*on_error)(void *ud, int rc, const struct gh_kube_status *st, const char *msg);
};

/* client is borrowed and must outlive the informer. handlers copied. */
int gh_kube_informer_new(struct gh_kube_client *c, const struct gh_kube_informer_opts *o,
                         const struct gh_kube_handlers *h, void *ud,
                         struct gh_kube_informer **out, struct gh_err *err);
/* Starts listing (asynchronous; progress happens in gh_kube_client_run). */
int gh_kube_informer_start(struct gh_kube_informer *inf, struct gh_err *err);
/* Cancels requests and timers; the cache stays readable. */
void gh_kube_informer_stop(struct gh_kube_informer *inf);
/* Stops and frees. Accepts NULL. Not from inside its own handlers. */
void gh_kube_informer_free(struct gh_kube_informer *inf);

bool gh_kube_informer_synced(const struct gh_kube_informer *inf);
const struct gh_kube_store *gh_kube_informer_store(const struct gh_kube_informer *inf);
/* The latest resourceVersion seen (list, event or bookmark); "" before. */
const char *gh_kube_informer_rv(const struct gh_kube_informer *inf);

/* Forces a relist now (tests, or after a suspected gap). */
void gh_kube_informer_relist(struct gh_kube_informer *inf);

struct gh_kube_informer_stats {
    unsigned long lists;      /* complete lists */
    unsigned long pages;
    unsigned long relists_410;/* relists caused by 410 Gone */
    unsigned long watches;    /* watch requests started */
    unsigned long watch_errors;
    unsigned long events;     /* ADDED/MODIFIED/DELETED applied */
    unsigned long bookmarks;
    unsigned long resyncs;
    unsigned long evicted;    /* left the cache for max_objects */
    int64_t last_backoff_ns;
    unsigned long retries;    /* list/watch retries scheduled after a failure */
};
void gh_kube_informer_stats(const struct gh_kube_informer *inf, struct gh_kube_informer_stats *st);

#endif
