/* api.h - Kubernetes verbs on JSON objects, over the gh_kube_client
 * transport: request builders (no I/O; fill a struct gh_kube_req for
 * gh_kube_submit() or gh_kube_call()) and synchronous helpers for simple
 * callers. Every helper returns GH_OK or an rc with the API's Status in
 * *st (when st is non-NULL) and "HTTP code reason: message" in err. */
#ifndef GH_KUBE_API_H
#define GH_KUBE_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "kube/client.h"
#include "kube/status.h"

/* A resource type. Constant descriptors below; callers may define their own
 * (strings borrowed for the life of any request built from it). */
struct gh_kube_res {
    const char *group;    /* "" for the core group */
    const char *version;  /* "v1" */
    const char *resource; /* plural, lowercase: "pods" */
    const char *kind;     /* "Pod" */
    bool namespaced;
};

extern const struct gh_kube_res gh_kube_res_namespaces, gh_kube_res_nodes, gh_kube_res_pods,
    gh_kube_res_configmaps, gh_kube_res_events, gh_kube_res_leases, gh_kube_res_pdbs,
    gh_kube_res_jobs, gh_kube_res_crds, gh_kube_res_recoverypolicies, gh_kube_res_gpunodehealths,
    gh_kube_res_incidents;

/* What to act on. ns is ignored for cluster-scoped resources and may be NULL
 * for "all namespaces" in lists and watches; name is NULL for collections. */
struct gh_kube_ref {
    const struct gh_kube_res *res;
    const char *ns;
    const char *name;
};

/* Writes the path "/api/v1/namespaces/ns/pods/name[/sub]" (segments
 * URL-escaped) into buf. GH_EINVAL for a missing namespace or bad name,
 * GH_ELIMIT when it does not fit. */
int gh_kube_path(char *buf, size_t cap, const struct gh_kube_ref *ref, const char *subresource,
                 struct gh_err *err);

/* Appends "?key=value" or "&key=value" (value URL-escaped). NULL/"" values
 * are skipped. */
int gh_kube_query_add(char *buf, size_t cap, const char *key, const char *value,
                      struct gh_err *err);

/* Options for lists and watches. Strings borrowed. */
struct gh_kube_list_opts {
    const char *label_selector;
    const char *field_selector;
    int limit;                       /* page size; 0: none */
    const char *continue_token;
    const char *resource_version;    /* list: "0" = any (cache); watch: start point */
    const char *resource_version_match; /* "NotOlderThan" / "Exact" or NULL */
    int timeout_s;                   /* watch: server-side timeoutSeconds; 0: none */
    bool allow_bookmarks;            /* watch */
};

enum gh_kube_patch_type {
    GH_KUBE_PATCH_MERGE,     /* application/merge-patch+json (RFC 7386) */
    GH_KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json (built-in types only) */
    GH_KUBE_PATCH_JSON,      /* application/json-patch+json (RFC 6902): body is an array */
    GH_KUBE_PATCH_APPLY,     /* server-side apply, fieldManager=gpuheal, force */
};

#define GH_KUBE_FIELD_MANAGER "gpuheal"

/* Preconditions and options for delete. Strings borrowed; NULL = unset. */
struct gh_kube_delete_opts {
    const char *uid;               /* precondition */
    const char *resource_version;  /* precondition */
    int64_t grace_period_s;        /* -1: server default */
    const char *propagation;       /* "Background", "Foreground", "Orphan" or NULL */
    bool dry_run;
};

/* ---- request builders (no I/O). body arguments are borrowed (serialized). */
int gh_kube_req_get(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                    struct gh_err *err);
int gh_kube_req_list(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                     const struct gh_kube_list_opts *o, struct gh_err *err);
int gh_kube_req_watch(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                      const struct gh_kube_list_opts *o, struct gh_err *err);
/* POST to the collection (ref->name NULL) or to a subresource of a named
 * object (ref->name and sub set, e.g. "eviction"). */
int gh_kube_req_create(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                       const json_t *obj, struct gh_err *err);
/* PUT (replace). obj's metadata.resourceVersion makes it a compare-and-swap
 * (409 Conflict when stale). sub: NULL or "status". */
int gh_kube_req_update(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                       const json_t *obj, struct gh_err *err);
int gh_kube_req_patch(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                      enum gh_kube_patch_type type, const json_t *patch, struct gh_err *err);
int gh_kube_req_delete(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                       const struct gh_kube_delete_opts *o, struct gh_err *err);

/* DELETE on a collection (deletecollection), selected by o's selectors. */
int gh_kube_req_delete_collection(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                                  const struct gh_kube_list_opts *o,
                                  const struct gh_kube_delete_opts *d, struct gh_err *err);

/* ---- synchronous helpers. *out (when given) receives a new reference. */
int gh_kube_get(struct gh_kube_client *c, const struct gh_kube_ref *ref, json_t **out,
                struct gh_kube_status *st, struct gh_err *err);
/* One page. */
int gh_kube_list(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                 const struct gh_kube_list_opts *o, json_t **out, struct gh_kube_status *st,
                 struct gh_err *err);
/* Every page (limit = o->limit or 500), following continue tokens; calls
 * item(ud, obj) for each item (borrowed) and leaves the list's
 * resourceVersion in rv (cap bytes). A 410 on a continue token (compacted)
 * restarts the list once from the beginning. item may return non-zero to
 * stop (that rc is returned). */
typedef int (*gh_kube_item_fn)(void *ud, json_t *item);
int gh_kube_list_all(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                     const struct gh_kube_list_opts *o, gh_kube_item_fn item, void *ud, char *rv,
                     size_t rv_cap, struct gh_kube_status *st, struct gh_err *err);
int gh_kube_create(struct gh_kube_client *c, const struct gh_kube_ref *ref, const json_t *obj,
                   json_t **out, struct gh_kube_status *st, struct gh_err *err);
/* The create, validated and admitted but not stored (dryRun=All): GH_OK when
 * it would be created; an existing object of the name answers AlreadyExists
 * only after admission has passed it, so a refusal (403, 422) says the real
 * create would be refused too. */
int gh_kube_create_dry_run(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                           const json_t *obj, struct gh_kube_status *st, struct gh_err *err);
int gh_kube_update(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                   const json_t *obj, json_t **out, struct gh_kube_status *st, struct gh_err *err);
int gh_kube_patch(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                  enum gh_kube_patch_type type, const json_t *patch, json_t **out,
                  struct gh_kube_status *st, struct gh_err *err);
/* GH_ENOTFOUND when already gone. opts may be NULL. */
int gh_kube_delete(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                   const struct gh_kube_delete_opts *opts, struct gh_kube_status *st,
                   struct gh_err *err);

int gh_kube_delete_collection(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                              const struct gh_kube_list_opts *o,
                              const struct gh_kube_delete_opts *d, struct gh_kube_status *st,
                              struct gh_err *err);

/* Read-modify-write with optimistic concurrency: GET, mutate(ud, obj) (edit
 * obj in place; return non-zero to stop with that rc), PUT with the read
 * resourceVersion; on 409 Conflict start again, up to max_tries (0: 5).
 * *tries (optional) receives the number of PUTs made. */
typedef int (*gh_kube_mutate_fn)(void *ud, json_t *obj);
int gh_kube_update_retry(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                         gh_kube_mutate_fn mutate, void *ud, int max_tries, json_t **out,
                         int *tries, struct gh_kube_status *st, struct gh_err *err);

/* Eviction (policy/v1) of a pod. GH_OK: evicted. GH_EAGAIN with st->kind
 * GH_KUBE_R_TOO_MANY_REQUESTS: a PodDisruptionBudget forbids it now; a
 * normal answer, to retry later (st->retry_after_s when the server said). */
int gh_kube_evict(struct gh_kube_client *c, const char *ns, const char *pod,
                  const struct gh_kube_delete_opts *opts, struct gh_kube_status *st,
                  struct gh_err *err);

/* Reads metadata fields of an object (borrowed; NULL when absent). */
const char *gh_kube_json_str(const json_t *obj, const char *section, const char *field);
#define gh_kube_meta_name(o) gh_kube_json_str((o), "metadata", "name")
#define gh_kube_meta_namespace(o) gh_kube_json_str((o), "metadata", "namespace")
#define gh_kube_meta_rv(o) gh_kube_json_str((o), "metadata", "resourceVersion")
#define gh_kube_meta_uid(o) gh_kube_json_str((o), "metadata", "uid")

/* The apiVersion string of a resource ("v1", "apps/v1") into buf. */
const char *gh_kube_api_version(const struct gh_kube_res *res, char *buf, size_t cap);

#endif
