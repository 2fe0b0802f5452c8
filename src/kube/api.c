/* api.c - Kubernetes verbs: paths, query strings and bodies for get, list,
 * watch, create, update, patch (four kinds), delete with preconditions,
 * eviction; synchronous helpers with pagination and conflict retry. */
#include "kube/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

const struct gh_kube_res gh_kube_res_namespaces = {"", "v1", "namespaces", "Namespace", false};
const struct gh_kube_res gh_kube_res_nodes = {"", "v1", "nodes", "Node", false};
const struct gh_kube_res gh_kube_res_pods = {"", "v1", "pods", "Pod", true};
const struct gh_kube_res gh_kube_res_configmaps = {"", "v1", "configmaps", "ConfigMap", true};
const struct gh_kube_res gh_kube_res_events = {"events.k8s.io", "v1", "events", "Event", true};
const struct gh_kube_res gh_kube_res_leases = {"coordination.k8s.io", "v1", "leases", "Lease",
                                               true};
const struct gh_kube_res gh_kube_res_pdbs = {"policy", "v1", "poddisruptionbudgets",
                                             "PodDisruptionBudget", true};
const struct gh_kube_res gh_kube_res_jobs = {"batch", "v1", "jobs", "Job", true};
const struct gh_kube_res gh_kube_res_crds = {"apiextensions.k8s.io", "v1",
                                             "customresourcedefinitions",
                                             "CustomResourceDefinition", false};
const struct gh_kube_res gh_kube_res_recoverypolicies = {"gpuheal.io", "v1alpha1",
                                                         "recoverypolicies", "RecoveryPolicy",
                                                         false};
const struct gh_kube_res gh_kube_res_gpunodehealths = {"gpuheal.io", "v1alpha1", "gpunodehealths",
                                                       "GPUNodeHealth", false};
const struct gh_kube_res gh_kube_res_incidents = {"gpuheal.io", "v1alpha1", "incidents",
                                                  "Incident", false};

const char *gh_kube_api_version(const struct gh_kube_res *res, char *buf, size_t cap)
{
    if (!res->group || !res->group[0])
        snprintf(buf, cap, "%s", res->version);
    else
        snprintf(buf, cap, "%s/%s", res->group, res->version);
    return buf;
}

const char *gh_kube_json_str(const json_t *obj, const char *section, const char *field)
{
    const json_t *s = json_is_object(obj) ? json_object_get(obj, section) : NULL;
    const json_t *v = json_is_object(s) ? json_object_get(s, field) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ------------------------------------------------------------------ paths */

/* Appends the strings a and b to buf. */
static int append(char *buf, size_t cap, struct gh_err *err, const char *a, const char *b)
{
    size_t len = strlen(buf);
    int n = snprintf(buf + len, cap - len, "%s%s", a, b);
    if (n < 0 || (size_t)n >= cap - len)
        return gh_err_set(err, GH_ELIMIT, "request path too long");
    return GH_OK;
}

static int append_seg(char *buf, size_t cap, const char *seg, const char *what, struct gh_err *err)
{
    if (!seg || !seg[0] || strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0 || strchr(seg, '/') ||
        strlen(seg) > 253)
        return gh_err_set(err, GH_EINVAL, "invalid %s \"%.80s\"", what, seg ? seg : "(null)");
    char *esc = curl_easy_escape(NULL, seg, 0);
    if (!esc)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    int rc = append(buf, cap, err, "/", esc);
    curl_free(esc);
    return rc;
}

int gh_kube_path(char *buf, size_t cap, const struct gh_kube_ref *ref, const char *sub,
                 struct gh_err *err)
{
    if (cap == 0)
        return gh_err_set(err, GH_ELIMIT, "no room for a path");
    buf[0] = '\0';
    const struct gh_kube_res *r = ref->res;
    if (!r || !r->version || !r->resource)
        return gh_err_set(err, GH_EINVAL, "no resource type");
    int rc;
    if (!r->group || !r->group[0])
        rc = append(buf, cap, err, "/api/", r->version);
    else if (!(rc = append(buf, cap, err, "/apis/", r->group)))
        rc = append(buf, cap, err, "/", r->version);
    if (rc)
        return rc;
    if (r->namespaced && ref->ns && ref->ns[0]) {
        if ((rc = append(buf, cap, err, "/namespaces", "")) ||
            (rc = append_seg(buf, cap, ref->ns, "namespace", err)))
            return rc;
    } else if (r->namespaced && ref->name) {
        return gh_err_set(err, GH_EINVAL, "%s/%s: a namespace is required", r->resource, ref->name);
    }
    if ((rc = append(buf, cap, err, "/", r->resource)))
        return rc;
    if (ref->name && (rc = append_seg(buf, cap, ref->name, "name", err)))
        return rc;
    if (sub) {
        if (!ref->name)
            return gh_err_set(err, GH_EINVAL, "subresource %s needs a name", sub);
        if ((rc = append_seg(buf, cap, sub, "subresource", err)))
            return rc;
    }
    return GH_OK;
}

int gh_kube_query_add(char *buf, size_t cap, const char *key, const char *value,
                      struct gh_err *err)
{
    if (!value || !value[0])
        return GH_OK;
    char *ev = curl_easy_escape(NULL, value, 0);
    if (!ev)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    size_t len = strlen(buf);
    int n = snprintf(buf + len, cap - len, "%c%s=%s", strchr(buf, '?') ? '&' : '?', key, ev);
    curl_free(ev);
    if (n < 0 || (size_t)n >= cap - len) {
        buf[len] = '\0';
        return gh_err_set(err, GH_ELIMIT, "request query too long");
    }
    return GH_OK;
}

static int query_int(char *buf, size_t cap, const char *key, long long v, struct gh_err *err)
{
    char s[32];
    snprintf(s, sizeof s, "%lld", v);
    return gh_kube_query_add(buf, cap, key, s, err);
}

/* ------------------------------------------------------------------ builders */

static void req_init(struct gh_kube_req *req, enum gh_kube_method m)
{
    memset(req, 0, sizeof *req);
    req->method = m;
}

static int set_body(struct gh_kube_req *req, const json_t *obj, const char *ctype,
                    struct gh_err *err)
{
    if (!obj)
        return gh_err_set(err, GH_EINVAL, "no request body");
    req->body = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!req->body)
        return gh_err_set(err, GH_ENOMEM, "cannot serialize the request body");
    req->body_len = strlen(req->body);
    req->content_type = ctype;
    return GH_OK;
}

int gh_kube_req_get(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                    struct gh_err *err)
{
    req_init(req, GH_KUBE_GET);
    if (!ref->name)
        return gh_err_set(err, GH_EINVAL, "get: no name");
    return gh_kube_path(req->path, sizeof req->path, ref, sub, err);
}

static int list_query(struct gh_kube_req *req, const struct gh_kube_list_opts *o,
                      struct gh_err *err)
{
    if (!o)
        return GH_OK;
    char *p = req->path;
    size_t cap = sizeof req->path;
    int rc;
    if ((rc = gh_kube_query_add(p, cap, "labelSelector", o->label_selector, err)) ||
        (rc = gh_kube_query_add(p, cap, "fieldSelector", o->field_selector, err)) ||
        (rc = gh_kube_query_add(p, cap, "resourceVersion", o->resource_version, err)) ||
        (rc = gh_kube_query_add(p, cap, "resourceVersionMatch", o->resource_version_match, err)))
        return rc;
    if (!req->watch) {
        if (o->limit > 0 && (rc = query_int(p, cap, "limit", o->limit, err)))
            return rc;
        if ((rc = gh_kube_query_add(p, cap, "continue", o->continue_token, err)))
            return rc;
    }
    return GH_OK;
}

int gh_kube_req_list(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                     const struct gh_kube_list_opts *o, struct gh_err *err)
{
    req_init(req, GH_KUBE_GET);
    struct gh_kube_ref coll = {ref->res, ref->ns, NULL};
    int rc = gh_kube_path(req->path, sizeof req->path, &coll, NULL, err);
    return rc ? rc : list_query(req, o, err);
}

int gh_kube_req_watch(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                      const struct gh_kube_list_opts *o, struct gh_err *err)
{
    req_init(req, GH_KUBE_GET);
    req->watch = true;
    struct gh_kube_ref coll = {ref->res, ref->ns, NULL};
    int rc = gh_kube_path(req->path, sizeof req->path, &coll, NULL, err);
    if (!rc)
        rc = gh_kube_query_add(req->path, sizeof req->path, "watch", "1", err);
    if (!rc && ref->name) { /* one object: metadata.name field selector */
        char fs[300];
        snprintf(fs, sizeof fs, "metadata.name=%s", ref->name);
        rc = gh_kube_query_add(req->path, sizeof req->path, "fieldSelector", fs, err);
    }
    if (!rc)
        rc = list_query(req, o, err);
    if (!rc && o && o->allow_bookmarks)
        rc = gh_kube_query_add(req->path, sizeof req->path, "allowWatchBookmarks", "true", err);
    if (!rc && o && o->timeout_s > 0) {
        rc = query_int(req->path, sizeof req->path, "timeoutSeconds", o->timeout_s, err);
        /* the client gives up a little after the server should have ended it */
        req->timeout_ms = (long)o->timeout_s * 1000 + 30000;
    }
    return rc;
}

int gh_kube_req_create(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                       const json_t *obj, struct gh_err *err)
{
    req_init(req, GH_KUBE_POST);
    int rc = gh_kube_path(req->path, sizeof req->path, ref, sub, err);
    if (!rc && !sub)
        rc = gh_kube_query_add(req->path, sizeof req->path, "fieldManager", GH_KUBE_FIELD_MANAGER,
                               err);
    return rc ? rc : set_body(req, obj, NULL, err);
}

int gh_kube_req_update(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                       const json_t *obj, struct gh_err *err)
{
    req_init(req, GH_KUBE_PUT);
    if (!ref->name)
        return gh_err_set(err, GH_EINVAL, "update: no name");
    int rc = gh_kube_path(req->path, sizeof req->path, ref, sub, err);
    if (!rc)
        rc = gh_kube_query_add(req->path, sizeof req->path, "fieldManager", GH_KUBE_FIELD_MANAGER,
                               err);
    return rc ? rc : set_body(req, obj, NULL, err);
}

int gh_kube_req_patch(struct gh_kube_req *req, const struct gh_kube_ref *ref, const char *sub,
                      enum gh_kube_patch_type type, const json_t *patch, struct gh_err *err)
{
    req_init(req, GH_KUBE_PATCH);
    if (!ref->name)
        return gh_err_set(err, GH_EINVAL, "patch: no name");
    const char *ct;
    switch (type) {
    case GH_KUBE_PATCH_MERGE: ct = "application/merge-patch+json"; break;
    case GH_KUBE_PATCH_STRATEGIC: ct = "application/strategic-merge-patch+json"; break;
    case GH_KUBE_PATCH_JSON: ct = "application/json-patch+json"; break;
    case GH_KUBE_PATCH_APPLY: ct = "application/apply-patch+yaml"; break;
    default: return gh_err_set(err, GH_EINVAL, "unknown patch type %d", (int)type);
    }
    if (type == GH_KUBE_PATCH_JSON ? !json_is_array(patch) : !json_is_object(patch))
        return gh_err_set(err, GH_EINVAL, "patch body must be a JSON %s",
                          type == GH_KUBE_PATCH_JSON ? "array" : "object");
    int rc = gh_kube_path(req->path, sizeof req->path, ref, sub, err);
    if (!rc)
        rc = gh_kube_query_add(req->path, sizeof req->path, "fieldManager", GH_KUBE_FIELD_MANAGER,
                               err);
    if (!rc && type == GH_KUBE_PATCH_APPLY)
        rc = gh_kube_query_add(req->path, sizeof req->path, "force", "true", err);
    return rc ? rc : set_body(req, patch, ct, err);
}

/* DeleteOptions as JSON (new reference), or NULL on ENOMEM. */
static json_t *delete_options(const struct gh_kube_delete_opts *o)
{
    json_t *d = json_pack("{s:s, s:s}", "apiVersion", "v1", "kind", "DeleteOptions");
    if (!d || !o)
        return d;
    if (o->uid || o->resource_version) {
        json_t *pre = json_object();
        if (!pre) {
            json_decref(d);
            return NULL;
        }
        if (o->uid)
            json_object_set_new(pre, "uid", json_string(o->uid));
        if (o->resource_version)
            json_object_set_new(pre, "resourceVersion", json_string(o->resource_version));
        json_object_set_new(d, "preconditions", pre);
    }
    if (o->grace_period_s >= 0)
        json_object_set_new(d, "gracePeriodSeconds", json_integer(o->grace_period_s));
    if (o->propagation)
        json_object_set_new(d, "propagationPolicy", json_string(o->propagation));
    if (o->dry_run)
        json_object_set_new(d, "dryRun", json_pack("[s]", "All"));
    return d;
}

int gh_kube_req_delete(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                       const struct gh_kube_delete_opts *o, struct gh_err *err)
{
    req_init(req, GH_KUBE_DELETE);
    if (!ref->name)
        return gh_err_set(err, GH_EINVAL, "delete: no name");
    int rc = gh_kube_path(req->path, sizeof req->path, ref, NULL, err);
    if (rc)
        return rc;
    static const struct gh_kube_delete_opts defaults = {.grace_period_s = -1};
    json_t *d = delete_options(o ? o : &defaults);
    if (!d)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    rc = set_body(req, d, NULL, err);
    json_decref(d);
    return rc;
}

int gh_kube_req_delete_collection(struct gh_kube_req *req, const struct gh_kube_ref *ref,
                                  const struct gh_kube_list_opts *o,
                                  const struct gh_kube_delete_opts *d, struct gh_err *err)
{
    struct gh_kube_list_opts lo = {0};
    if (o) {
        lo.label_selector = o->label_selector;
        lo.field_selector = o->field_selector;
    }
    int rc = gh_kube_req_list(req, ref, &lo, err);
    if (rc)
        return rc;
    req->method = GH_KUBE_DELETE;
    static const struct gh_kube_delete_opts defaults = {.grace_period_s = -1};
    json_t *body = delete_options(d ? d : &defaults);
    if (!body)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    rc = set_body(req, body, NULL, err);
    json_decref(body);
    return rc;
}

/* ------------------------------------------------------------------ sync helpers */

/* Runs req, copies the status out, hands back the body. */
static int run(struct gh_kube_client *c, struct gh_kube_req *req, json_t **out,
               struct gh_kube_status *st, struct gh_err *err)
{
    struct gh_kube_resp resp;
    int rc = gh_kube_call(c, req, &resp, err);
    if (st)
        *st = resp.status;
    if (out) {
        *out = resp.body;
        resp.body = NULL;
    }
    gh_kube_resp_clear(&resp);
    return rc;
}

static void reset_out(json_t **out, struct gh_kube_status *st)
{
    if (out)
        *out = NULL;
    if (st)
        gh_kube_status_reset(st);
}

int gh_kube_get(struct gh_kube_client *c, const struct gh_kube_ref *ref, json_t **out,
                struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(out, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_get(&req, ref, NULL, err);
    return rc ? rc : run(c, &req, out, st, err);
}

int gh_kube_list(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                 const struct gh_kube_list_opts *o, json_t **out, struct gh_kube_status *st,
                 struct gh_err *err)
{
    reset_out(out, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_list(&req, ref, o, err);
    return rc ? rc : run(c, &req, out, st, err);
}

int gh_kube_list_all(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                     const struct gh_kube_list_opts *o, gh_kube_item_fn item, void *ud, char *rv,
                     size_t rv_cap, struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(NULL, st);
    struct gh_kube_list_opts lo = {0};
    if (o)
        lo = *o;
    if (lo.limit <= 0)
        lo.limit = 500;
    char cont[4096] = "";
    bool restarted = false;
    if (rv && rv_cap)
        rv[0] = '\0';
    for (;;) {
        lo.continue_token = cont[0] ? cont : NULL;
        json_t *page = NULL;
        struct gh_kube_status pst;
        int rc = gh_kube_list(c, ref, &lo, &page, &pst, err);
        if (rc) {
            if (pst.kind == GH_KUBE_R_GONE && cont[0] && !restarted) {
                restarted = true; /* the continue token expired: start over */
                cont[0] = '\0';
                continue;
            }
            if (st)
                *st = pst;
            return rc;
        }
        const json_t *items = json_object_get(page, "items");
        const json_t *meta = json_object_get(page, "metadata");
        if (!json_is_array(items) || (meta && !json_is_object(meta))) {
            json_decref(page);
            return gh_err_set(err, GH_EINVAL, "list %s: reply is not a list", ref->res->resource);
        }
        const char *prv = gh_kube_json_str(page, "metadata", "resourceVersion");
        if (rv && rv_cap && prv)
            snprintf(rv, rv_cap, "%s", prv);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            if (!json_is_object(it))
                continue;
            int irc = item ? item(ud, it) : 0;
            if (irc) {
                json_decref(page);
                return irc;
            }
        }
        const char *next = gh_kube_json_str(page, "metadata", "continue");
        if (next && next[0]) {
            if (strlen(next) >= sizeof cont) {
                json_decref(page);
                return gh_err_set(err, GH_ELIMIT, "list: continue token too long");
            }
            snprintf(cont, sizeof cont, "%s", next);
        } else {
            cont[0] = '\0';
        }
        json_decref(page);
        if (!cont[0])
            return GH_OK;
    }
}

int gh_kube_create(struct gh_kube_client *c, const struct gh_kube_ref *ref, const json_t *obj,
                   json_t **out, struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(out, st);
    struct gh_kube_req req;
    struct gh_kube_ref coll = *ref;
    coll.name = NULL;
    if (!coll.ns && ref->res->namespaced)
        coll.ns = gh_kube_meta_namespace(obj);
    int rc = gh_kube_req_create(&req, &coll, NULL, obj, err);
    return rc ? rc : run(c, &req, out, st, err);
}

int gh_kube_create_dry_run(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                           const json_t *obj, struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(NULL, st);
    struct gh_kube_req req;
    struct gh_kube_ref coll = *ref;
    coll.name = NULL;
    if (!coll.ns && ref->res->namespaced)
        coll.ns = gh_kube_meta_namespace(obj);
    int rc = gh_kube_req_create(&req, &coll, NULL, obj, err);
    if (!rc)
        rc = gh_kube_query_add(req.path, sizeof req.path, "dryRun", "All", err);
    if (rc) {
        gh_kube_req_clear(&req);
        return rc;
    }
    return run(c, &req, NULL, st, err);
}

int gh_kube_update(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                   const json_t *obj, json_t **out, struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(out, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_update(&req, ref, sub, obj, err);
    return rc ? rc : run(c, &req, out, st, err);
}

int gh_kube_patch(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                  enum gh_kube_patch_type type, const json_t *patch, json_t **out,
                  struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(out, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_patch(&req, ref, sub, type, patch, err);
    return rc ? rc : run(c, &req, out, st, err);
}

int gh_kube_delete(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                   const struct gh_kube_delete_opts *opts, struct gh_kube_status *st,
                   struct gh_err *err)
{
    reset_out(NULL, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_delete(&req, ref, opts, err);
    return rc ? rc : run(c, &req, NULL, st, err);
}

int gh_kube_update_retry(struct gh_kube_client *c, const struct gh_kube_ref *ref, const char *sub,
                         gh_kube_mutate_fn mutate, void *ud, int max_tries, json_t **out,
                         int *tries, struct gh_kube_status *st, struct gh_err *err)
{
    reset_out(out, st);
    if (tries)
        *tries = 0;
    if (max_tries <= 0)
        max_tries = 5;
    int rc = GH_EIO;
    for (int i = 0; i < max_tries; i++) {
        json_t *obj = NULL;
        if ((rc = gh_kube_get(c, ref, &obj, st, err)))
            return rc;
        if ((rc = mutate(ud, obj))) {
            json_decref(obj);
            return rc;
        }
        if (tries)
            (*tries)++;
        struct gh_kube_status ust;
        rc = gh_kube_update(c, ref, sub, obj, out, &ust, err);
        json_decref(obj);
        if (st)
            *st = ust;
        if (rc == GH_OK || ust.kind != GH_KUBE_R_CONFLICT)
            return rc;
    }
    return rc;
}

int gh_kube_evict(struct gh_kube_client *c, const char *ns, const char *pod,
                  const struct gh_kube_delete_opts *opts, struct gh_kube_status *st,
                  struct gh_err *err)
{
    reset_out(NULL, st);
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                             "Eviction", "metadata", "name", pod ? pod : "", "namespace",
                             ns ? ns : "");
    if (!body)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    if (opts) {
        json_t *d = delete_options(opts);
        if (!d) {
            json_decref(body);
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        }
        json_object_set_new(body, "deleteOptions", d);
    }
    struct gh_kube_req req;
    struct gh_kube_ref ref = {&gh_kube_res_pods, ns, pod};
    int rc = gh_kube_req_create(&req, &ref, "eviction", body, err);
    json_decref(body);
    return rc ? rc : run(c, &req, NULL, st, err);
}

int gh_kube_delete_collection(struct gh_kube_client *c, const struct gh_kube_ref *ref,
                              const struct gh_kube_list_opts *o,
                              const struct gh_kube_delete_opts *d, struct gh_kube_status *st,
                              struct gh_err *err)
{
    reset_out(NULL, st);
    struct gh_kube_req req;
    int rc = gh_kube_req_delete_collection(&req, ref, o, d, err);
    return rc ? rc : run(c, &req, NULL, st, err);
}
