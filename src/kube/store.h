/* store.h - the informer's cache: for each object only the fields gpuheal
 * needs (a list of JSON Pointers), kept as compact JSON text, keyed by
 * "namespace/name" (or "name"), with up to GH_KUBE_MAX_INDEXES secondary
 * indexes (e.g. pods by node, pods by job). Pure data structure, no I/O.
 *
 * Pointers to struct gh_kube_obj are borrowed from the store and valid
 * until the next change to that object (upsert/remove/sweep) or free. */
#ifndef GH_KUBE_STORE_H
#define GH_KUBE_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "common/err.h"

#define GH_KUBE_MAX_INDEXES 4
#define GH_KUBE_INDEX_MAX_PATHS 8
#define GH_KUBE_MAX_KEEP 32

/* An index: the object's value is the first of pointers[] that names a
 * non-empty string in the full object (RFC 6901, e.g. "/spec/nodeName",
 * "/metadata/labels/batch.kubernetes.io~1job-name"). Objects with none are
 * not in the index. */
struct gh_kube_index_spec {
    const char *name;
    const char *pointers[GH_KUBE_INDEX_MAX_PATHS]; /* NULL-terminated early */
};

/* keep: JSON Pointers of the subtrees to keep (nkeep 0: keep everything);
 * metadata name, namespace, uid and resourceVersion are always kept.
 * Strings are copied. */
struct gh_kube_store_opts {
    const char *const *keep;
    size_t nkeep;
    const struct gh_kube_index_spec *indexes;
    size_t nindexes;
};

struct gh_kube_store;
struct gh_kube_obj;

enum gh_kube_change { GH_KUBE_UNCHANGED, GH_KUBE_ADDED, GH_KUBE_UPDATED };

int gh_kube_store_new(const struct gh_kube_store_opts *o, struct gh_kube_store **out,
                      struct gh_err *err);
void gh_kube_store_free(struct gh_kube_store *s);

/* Projects full (borrowed) to the kept fields and inserts or replaces it.
 * Same resourceVersion as cached: GH_KUBE_UNCHANGED (only re-marked).
 * *kept (optional): the projected object (new reference). *old (optional):
 * the previous kept object on update (new reference), else NULL. GH_EINVAL
 * when full has no metadata.name. */
int gh_kube_store_upsert(struct gh_kube_store *s, const json_t *full, enum gh_kube_change *chg,
                         json_t **kept, json_t **old, struct gh_err *err);

/* Removes the object named by obj's metadata. *old (optional): the cached
 * kept object (new reference) or NULL when it was not cached. */
int gh_kube_store_remove(struct gh_kube_store *s, const json_t *obj, json_t **old,
                         struct gh_err *err);

const struct gh_kube_obj *gh_kube_store_get(const struct gh_kube_store *s, const char *ns,
                                            const char *name);
size_t gh_kube_store_count(const struct gh_kube_store *s);

/* Iteration; the callback must not change the store. A non-zero return
 * stops and is returned. */
typedef int (*gh_kube_obj_fn)(void *ud, const struct gh_kube_obj *o);
int gh_kube_store_foreach(const struct gh_kube_store *s, gh_kube_obj_fn fn, void *ud);
/* Objects whose index `index` has value `value`. GH_ENOTFOUND for an unknown
 * index name. */
int gh_kube_store_index_foreach(const struct gh_kube_store *s, const char *index,
                                const char *value, gh_kube_obj_fn fn, void *ud);
size_t gh_kube_store_index_count(const struct gh_kube_store *s, const char *index,
                                 const char *value);

/* Relist support: begin() starts a generation; upserts mark objects seen;
 * sweep() removes the unseen, calling gone(ud, old kept object) first. */
void gh_kube_store_mark_begin(struct gh_kube_store *s);
typedef void (*gh_kube_gone_fn)(void *ud, json_t *old);
int gh_kube_store_sweep(struct gh_kube_store *s, gh_kube_gone_fn gone, void *ud,
                        struct gh_err *err);

/* Object accessors (borrowed strings). */
const char *gh_kube_obj_key(const struct gh_kube_obj *o);
const char *gh_kube_obj_rv(const struct gh_kube_obj *o);
const char *gh_kube_obj_text(const struct gh_kube_obj *o, size_t *len);
/* Parses the kept text (new reference; NULL on ENOMEM). */
json_t *gh_kube_obj_json(const struct gh_kube_obj *o);
/* The object's value in index i (0-based, in spec order) or NULL. */
const char *gh_kube_obj_index_value(const struct gh_kube_obj *o, size_t i);

struct gh_kube_store_stats {
    size_t objects;
    size_t text_bytes;  /* kept JSON text, summed */
    size_t heap_bytes;  /* everything the store holds (malloc_usable_size) */
    size_t index_buckets;
};
void gh_kube_store_stats(const struct gh_kube_store *s, struct gh_kube_store_stats *st);

/* Projection alone (used by the store; exposed for tests): a new object with
 * the subtrees at the given JSON Pointers (plus identity metadata). */
json_t *gh_kube_project(const json_t *full, const char *const *keep, size_t nkeep);

/* Resolves an RFC 6901 pointer through objects only; borrowed or NULL. */
const json_t *gh_kube_pointer_get(const json_t *root, const char *pointer);

#endif
