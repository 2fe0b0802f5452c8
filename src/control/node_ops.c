/* node_ops.c - the node actions: isolate (cordon + taint, owned by
 * annotation), release (undo only what gpuheal set), drain (Eviction API,
 * PDB-aware, bounded concurrency), requests to the node agent on
 * GPUNodeHealth, the replace hand-off and the validation gate. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "control/actuator.h"
#include "kube/api.h"

#define NOOP 0x6e6f6f70 /* mutate's "nothing to change": not a gh_rc */
#define DRAIN_MAX_PODS 10000

static const struct gh_kube_res res_machines = {"cluster.x-k8s.io", "v1beta1", "machines",
                                                "Machine", true};

void gh_act_result_set(struct gh_act_result *r, const char *result, const char *fmt, ...)
{
    snprintf(r->result, sizeof r->result, "%s", result);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
}

void gh_act_result_api_ok(struct gh_act_result *r, long code)
{
    r->http = code;
    snprintf(r->api, sizeof r->api, "HTTP %ld", code);
}

void gh_act_result_api_fail(struct gh_act_result *r, const struct gh_kube_status *st,
                            const struct gh_err *err)
{
    r->http = st->code;
    if (st->code)
        snprintf(r->api, sizeof r->api, "HTTP %d %s: %.200s", st->code, st->reason, st->message);
    else
        snprintf(r->api, sizeof r->api, "%.250s", err ? err->msg : "no reply");
}

static json_t *obj_child(json_t *o, const char *k)
{
    json_t *c = json_object_get(o, k);
    if (!json_is_object(c)) {
        c = json_object();
        if (!c || json_object_set_new(o, k, c))
            return NULL;
    }
    return c;
}

static const char *taint_key(const struct gh_act_ctx *x)
{
    return x->taint_key && *x->taint_key ? x->taint_key : GH_TAINT_KEY;
}

static void now_str(const struct gh_act_ctx *x, char *buf)
{
    int64_t t = gh_clock_now(x->clock ? x->clock : gh_clock_real());
    /* Kubernetes times are whole seconds */
    gh_time_format_rfc3339(t - t % GH_NS_PER_S, buf, GH_RFC3339_MAX);
    char *dot = strchr(buf, '.');
    if (dot)
        memcpy(dot, "Z", 2);
}

/* ---- isolate */

struct iso {
    const struct gh_act_ctx *x;
    bool no_execute;
    bool cordoned, tainted, foreign_cordon, had_taint, oom;
};

static int iso_mutate(void *ud, json_t *node)
{
    struct iso *s = ud;
    s->cordoned = s->tainted = s->foreign_cordon = s->had_taint = false;
    json_t *meta = obj_child(node, "metadata");
    json_t *ann = meta ? obj_child(meta, "annotations") : NULL;
    json_t *spec = obj_child(node, "spec");
    if (!ann || !spec)
        return s->oom = true, GH_ENOMEM;
    const char *effect = s->no_execute ? "NoExecute" : "NoSchedule";
    if (!json_is_true(json_object_get(spec, "unschedulable"))) {
        json_object_set_new(spec, "unschedulable", json_true());
        json_object_set_new(ann, GH_ANN_CORDONED_BY, json_string(s->x->incident));
        s->cordoned = true;
    } else if (!json_object_get(ann, GH_ANN_CORDONED_BY)) {
        s->foreign_cordon = true; /* someone else's: not ours to claim, nor to undo */
    }
    json_t *taints = json_object_get(spec, "taints");
    if (!json_is_array(taints)) {
        taints = json_array();
        json_object_set_new(spec, "taints", taints);
    }
    size_t i;
    json_t *t;
    json_array_foreach(taints, i, t) {
        const char *k = gh_json_str(t, "key");
        const char *e = gh_json_str(t, "effect");
        if (k && e && strcmp(k, taint_key(s->x)) == 0 && strcmp(e, effect) == 0)
            s->had_taint = true;
    }
    if (!s->had_taint) {
        json_array_append_new(taints, json_pack("{s:s, s:s, s:s}", "key", taint_key(s->x), "value",
                                                "true", "effect", effect));
        if (!json_object_get(ann, GH_ANN_TAINTED_BY))
            json_object_set_new(ann, GH_ANN_TAINTED_BY, json_string(s->x->incident));
        s->tainted = true;
    }
    if (!s->cordoned && !s->tainted)
        return NOOP;
    if (!json_object_get(ann, GH_ANN_ISOLATED_AT)) {
        char ts[GH_RFC3339_MAX];
        now_str(s->x, ts);
        json_object_set_new(ann, GH_ANN_ISOLATED_AT, json_string(ts));
    }
    return GH_OK;
}

int gh_act_isolate_node(const struct gh_act_ctx *x, const char *node, bool no_execute,
                        struct gh_act_result *r, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    struct iso s = {.x = x, .no_execute = no_execute};
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, node};
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    int rc = gh_kube_update_retry(x->c, &ref, NULL, iso_mutate, &s, 5, NULL, NULL, &st, err);
    const char *effect = no_execute ? "NoExecute" : "NoSchedule";
    if (rc == NOOP) {
        gh_act_result_api_ok(r, 200);
        gh_act_result_set(r, "noop", "already isolated: cordoned%s, taint %s:%s present",
                          s.foreign_cordon ? " (by someone else)" : "", taint_key(x), effect);
        return GH_OK;
    }
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not isolate %s: %s", node, err ? err->msg : "");
        return rc;
    }
    gh_act_result_api_ok(r, 200);
    gh_act_result_set(r, "succeeded", "%s%s%s%s%s:%s", s.cordoned ? "cordoned" : "",
                      s.foreign_cordon ? "cordon already set by someone else (left as theirs)" : "",
                      (s.cordoned || s.foreign_cordon) && s.tainted ? "; " : "",
                      s.tainted ? "tainted " : "taint present ", taint_key(x), effect);
    return GH_OK;
}

/* ---- release */

struct rel {
    const struct gh_act_ctx *x;
    bool uncordoned, untainted;
};

static int rel_mutate(void *ud, json_t *node)
{
    struct rel *s = ud;
    s->uncordoned = s->untainted = false;
    json_t *meta = json_object_get(node, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    json_t *spec = json_object_get(node, "spec");
    if (json_object_get(ann, GH_ANN_CORDONED_BY)) {
        json_object_del(spec, "unschedulable");
        json_object_del(ann, GH_ANN_CORDONED_BY);
        s->uncordoned = true;
    }
    if (json_object_get(ann, GH_ANN_TAINTED_BY)) {
        json_t *taints = json_object_get(spec, "taints"), *keep = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(taints, i, t) {
            const char *k = gh_json_str(t, "key");
            if (!k || strcmp(k, taint_key(s->x)) != 0)
                json_array_append(keep, t);
        }
        json_object_set_new(spec, "taints", keep);
        json_object_del(ann, GH_ANN_TAINTED_BY);
        s->untainted = true;
    }
    if (!s->uncordoned && !s->untainted)
        return NOOP;
    json_object_del(ann, GH_ANN_ISOLATED_AT);
    return GH_OK;
}

int gh_act_release_node(const struct gh_act_ctx *x, const char *node, struct gh_act_result *r,
                        struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    struct rel s = {.x = x};
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, node};
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    int rc = gh_kube_update_retry(x->c, &ref, NULL, rel_mutate, &s, 5, NULL, NULL, &st, err);
    if (rc == NOOP) {
        gh_act_result_api_ok(r, 200);
        gh_act_result_set(r, "noop", "nothing of gpuheal's on %s (any other cordon or taint "
                                     "is left alone)", node);
        return GH_OK;
    }
    if (rc == GH_ENOTFOUND) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "skipped", "node %s is gone", node);
        return GH_OK;
    }
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not release %s: %s", node, err ? err->msg : "");
        return rc;
    }
    gh_act_result_api_ok(r, 200);
    gh_act_result_set(r, "succeeded", "returned %s to service: %s%s%s%s", node,
                      s.uncordoned ? "uncordoned" : "", s.uncordoned && s.untainted ? ", " : "",
                      s.untainted ? "removed taint " : "", s.untainted ? taint_key(x) : "");
    return GH_OK;
}

/* ---- drain */

enum pod_state { P_PENDING, P_INFLIGHT, P_EVICTED, P_GONE, P_FAILED };

struct drain;
struct dpod {
    struct drain *d;
    char ns[64];
    char name[254];
    enum pod_state state;
    int64_t retry_at;
    bool blocked;
    char msg[160];
};

struct drain {
    const struct gh_act_ctx *x;
    struct dpod *p;
    size_t n, cap;
    int inflight;
    atomic_int *shared; /* evictions in flight across drains (borrowed); NULL: none */
    int total;          /* their bound */
    bool too_many;
    long last_http;
};

/* A place for one more eviction under the bound across the drains that
 * run at once (one per executor worker); false: all taken, wait. */
static bool slot_take(struct drain *d)
{
    if (!d->shared)
        return true;
    int have = atomic_load(d->shared);
    while (have < d->total)
        if (atomic_compare_exchange_weak(d->shared, &have, have + 1))
            return true;
    return false;
}

static void slot_give(struct drain *d)
{
    if (d->shared)
        atomic_fetch_sub(d->shared, 1);
}

static int drain_item(void *ud, json_t *pod)
{
    struct drain *d = ud;
    const char *ns = gh_kube_meta_namespace(pod), *name = gh_kube_meta_name(pod);
    const char *phase = gh_kube_json_str(pod, "status", "phase");
    json_t *meta = json_object_get(pod, "metadata");
    if (!ns || !name || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return GH_OK;
    if (json_object_get(meta, "deletionTimestamp"))
        return GH_OK; /* already going */
    if (json_object_get(json_object_get(meta, "annotations"), "kubernetes.io/config.mirror"))
        return GH_OK; /* a static pod: the kubelet owns it */
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(meta, "ownerReferences"), i, o) {
        const char *kind = gh_json_str(o, "kind");
        if (kind && strcmp(kind, "DaemonSet") == 0)
            return GH_OK; /* would come straight back; tolerates the taint anyway */
    }
    if (d->n >= DRAIN_MAX_PODS) {
        d->too_many = true;
        return GH_OK;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 16;
        struct dpod *np = realloc(d->p, nc * sizeof *np);
        if (!np)
            return GH_ENOMEM;
        d->p = np;
        d->cap = nc;
    }
    struct dpod *p = &d->p[d->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->ns, sizeof p->ns, "%s", ns);
    snprintf(p->name, sizeof p->name, "%s", name);
    return GH_OK;
}

static void evicted(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct dpod *p = ud;
    struct drain *d = p->d;
    d->inflight--;
    slot_give(d);
    d->last_http = resp ? resp->http : 0;
    if (rc == GH_OK) {
        p->state = P_EVICTED;
    } else if (rc == GH_ENOTFOUND) {
        p->state = P_GONE;
    } else if (resp && resp->status.kind == GH_KUBE_R_TOO_MANY_REQUESTS) {
        /* a PodDisruptionBudget says not now */
        int64_t wait = resp->status.retry_after_s > 0 ? resp->status.retry_after_s : 1;
        if (wait > 10)
            wait = 10;
        p->state = P_PENDING;
        p->blocked = true;
        p->retry_at = gh_clock_now(d->x->clock ? d->x->clock : gh_clock_real()) +
                      wait * GH_NS_PER_S;
        snprintf(p->msg, sizeof p->msg, "%.150s", resp->status.message);
    } else {
        p->state = P_FAILED;
        snprintf(p->msg, sizeof p->msg, "%.150s", err ? err->msg : "eviction failed");
    }
}

int gh_act_drain_node(const struct gh_act_ctx *x, const char *node, const struct gh_drain_opts *o,
                      struct gh_act_result *r, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    const struct gh_clock *clk = x->clock ? x->clock : gh_clock_real();
    int k = o && o->concurrency > 0 ? o->concurrency : 8;
    int64_t timeout = o && o->timeout_ns > 0 ? o->timeout_ns : 60 * GH_NS_PER_S;
    int64_t grace = o ? o->grace_s : -1;
    struct drain d = {.x = x,
                      .shared = o ? o->inflight : NULL,
                      .total = o && o->total > 0 ? o->total : 64};
    char sel[300];
    snprintf(sel, sizeof sel, "spec.nodeName=%s", node);
    struct gh_kube_list_opts lo = {.field_selector = sel};
    struct gh_kube_ref all = {&gh_kube_res_pods, NULL, NULL};
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    int rc = gh_kube_list_all(x->c, &all, &lo, drain_item, &d, NULL, 0, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not list the pods on %s", node);
        free(d.p);
        return rc;
    }
    if (d.n == 0) {
        gh_act_result_api_ok(r, 200);
        gh_act_result_set(r, "noop", "no pod to evict on %s", node);
        free(d.p);
        return GH_OK;
    }
    for (size_t i = 0; i < d.n; i++)
        d.p[i].d = &d;
    int64_t deadline = gh_clock_now(clk) + timeout;
    for (;;) {
        int64_t now = gh_clock_now(clk);
        size_t open = 0;
        bool starved = false; /* a pod could go now but the bound across drains is full */
        for (size_t i = 0; i < d.n; i++) {
            struct dpod *p = &d.p[i];
            if (p->state == P_INFLIGHT)
                open++;
            if (p->state != P_PENDING)
                continue;
            open++;
            if (d.inflight >= k || p->retry_at > now || now >= deadline)
                continue;
            if (!slot_take(&d)) {
                starved = true;
                continue;
            }
            json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1",
                                     "kind", "Eviction", "metadata", "name", p->name,
                                     "namespace", p->ns);
            if (body && grace >= 0)
                json_object_set_new(body, "deleteOptions",
                                    json_pack("{s:I}", "gracePeriodSeconds", (json_int_t)grace));
            struct gh_kube_req req;
            memset(&req, 0, sizeof req);
            struct gh_kube_ref ref = {&gh_kube_res_pods, p->ns, p->name};
            rc = body ? gh_kube_req_create(&req, &ref, "eviction", body, err) : GH_ENOMEM;
            json_decref(body);
            if (!rc)
                rc = gh_kube_submit(x->c, &req, evicted, NULL, p, NULL, err);
            gh_kube_req_clear(&req);
            if (rc) {
                slot_give(&d);
                p->state = P_FAILED;
                snprintf(p->msg, sizeof p->msg, "%.150s", err ? err->msg : "submit failed");
                continue;
            }
            p->state = P_INFLIGHT;
            d.inflight++;
        }
        if (open == 0 || (now >= deadline && d.inflight == 0))
            break;
        /* a place freed by another drain is not an event of this client:
         * look again soon when none of ours is in flight */
        (void)gh_kube_client_run(x->c, starved && d.inflight == 0 ? 10 : 100, NULL);
    }
    size_t ev = 0, gone = 0, blocked = 0, unstarted = 0, failed = 0;
    const char *why = "";
    for (size_t i = 0; i < d.n; i++) {
        switch (d.p[i].state) {
        case P_EVICTED: ev++; break;
        case P_GONE: gone++; break;
        case P_PENDING:
            if (!d.p[i].blocked) {
                unstarted++; /* never had a place under the bounds on evictions in flight */
                break;
            }
            blocked++;
            why = d.p[i].msg;
            break;
        default:
            failed++;
            why = d.p[i].msg;
            break;
        }
    }
    gh_act_result_api_ok(r, d.last_http ? d.last_http : 201);
    if (blocked || unstarted || failed) {
        char waited[128] = "";
        if (unstarted)
            snprintf(waited, sizeof waited, ", %zu not started (the evictions in flight stayed "
                     "at their bound)", unstarted);
        gh_act_result_set(r, "failed",
                          "%zu of %zu pods evicted from %s, %zu gone already; %zu kept by a "
                          "PodDisruptionBudget after %.0f s%s, %zu failed%s%s",
                          ev, d.n, node, gone, blocked, (double)timeout / 1e9, waited, failed,
                          why[0] ? ": " : "", why);
        rc = GH_EAGAIN;
    } else {
        gh_act_result_set(r, "succeeded", "evicted %zu pods from %s (%zu gone already)%s", ev,
                          node, gone, d.too_many ? "; more pods than one drain handles" : "");
    }
    free(d.p);
    return rc == GH_EAGAIN ? gh_err_set(err, GH_EAGAIN, "%s", r->detail) : GH_OK;
}

/* ---- requests to the node agent */

static int ensure_gnh(const struct gh_act_ctx *x, const char *node, struct gh_kube_status *st,
                      struct gh_err *err)
{
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, node};
    int rc = gh_kube_get(x->c, &ref, NULL, st, err);
    if (rc != GH_ENOTFOUND)
        return rc;
    json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "gpuheal.io/v1alpha1",
                          "kind", "GPUNodeHealth", "metadata", "name", node, "spec", "nodeName",
                          node);
    if (!o)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    struct gh_kube_ref coll = {&gh_kube_res_gpunodehealths, NULL, NULL};
    rc = gh_kube_create(x->c, &coll, o, NULL, st, err);
    json_decref(o);
    if (rc && st->kind == GH_KUBE_R_ALREADY_EXISTS)
        rc = GH_OK;
    return rc;
}

int gh_act_request_node_op(const struct gh_act_ctx *x, const char *node, const char *action,
                           int gpu, const char *pci, struct gh_act_result *r, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    int rc = ensure_gnh(x, node, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "no GPUNodeHealth for %s", node);
        return rc;
    }
    char key[128], ts[GH_RFC3339_MAX], id[200];
    snprintf(key, sizeof key, "%s%s", GH_ANN_REQUEST_PREFIX, action);
    snprintf(id, sizeof id, "%s/%s", x->incident, action);
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, node};
    json_t *cur = NULL;
    rc = gh_kube_get(x->c, &ref, &cur, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not read GPUNodeHealth %s", node);
        return rc;
    }
    const char *have = gh_json_str(cur, "metadata", "annotations", key);
    bool same = false;
    if (have) {
        json_t *h = json_loads(have, 0, NULL);
        const char *hid = gh_json_str(h, "id");
        same = hid && strcmp(hid, id) == 0;
        json_decref(h);
    }
    json_decref(cur);
    if (same) {
        gh_act_result_api_ok(r, 200);
        gh_act_result_set(r, "requested", "%s already requested on GPUNodeHealth %s (request "
                          "%s); waiting for the agent's outcome", action, node, id);
        return GH_OK;
    }
    now_str(x, ts);
    json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "action", action, "incident",
                            x->incident, "time", ts);
    if (req && gpu >= 0)
        json_object_set_new(req, "gpu", json_integer(gpu));
    else if (req && pci && *pci)
        json_object_set_new(req, "pci", json_string(pci));
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    json_t *patch = text ? json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, text) : NULL;
    free(text);
    rc = patch ? gh_kube_patch(x->c, &ref, NULL, GH_KUBE_PATCH_MERGE, patch, NULL, &st, err)
               : gh_err_set(err, GH_ENOMEM, "out of memory");
    json_decref(patch);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not post the %s request", action);
        return rc;
    }
    json_t *sp = json_pack("{s:{s:{s:s, s:s, s:s, s:s}}}", "status", "lastAction", "action",
                           action, "time", ts, "incident", x->incident, "result", "Pending");
    rc = sp ? gh_kube_patch(x->c, &ref, "status", GH_KUBE_PATCH_MERGE, sp, NULL, &st, err)
            : gh_err_set(err, GH_ENOMEM, "out of memory");
    json_decref(sp);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "request posted, status.lastAction not set");
        return rc;
    }
    gh_act_result_api_ok(r, 200);
    if (gpu >= 0)
        gh_act_result_set(r, "requested", "requested %s of GPU %d from the agent on %s "
                          "(GPUNodeHealth %s, request %s); waiting for its outcome", action, gpu,
                          node, node, id);
    else
        gh_act_result_set(r, "requested", "requested %s from the agent on %s (GPUNodeHealth %s, "
                          "request %s); waiting for its outcome", action, node, node, id);
    return GH_OK;
}

bool gh_act_request_outcome(const json_t *gnh, const char *action, const char *id,
                            char *result, size_t rcap, char *detail, size_t cap)
{
    char type[64], prefix[240];
    snprintf(type, sizeof type, "Request-%s", action);
    int pn = snprintf(prefix, sizeof prefix, "request %s: ", id);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(gnh, "status"), "conditions"), i, c) {
        const char *t = gh_json_str(c, "type");
        const char *reason = gh_json_str(c, "reason");
        const char *msg = gh_json_str(c, "message");
        const char *status = gh_json_str(c, "status");
        if (!t || strcmp(t, type) != 0 || !reason || !msg || !status || pn <= 0 ||
            (size_t)pn >= sizeof prefix || strncmp(msg, prefix, (size_t)pn) != 0)
            continue;
        /* the agent's reasons (src/agent/requests.c): Succeeded (True);
         * Failed, TimedOut, NotConfigured, Interrupted (False); RebootPending
         * (Unknown) while a reboot is awaited */
        const char *res = NULL;
        if (!strcmp(status, "True"))
            res = "succeeded";
        else if (!strcmp(status, "False"))
            res = !strcmp(reason, "NotConfigured") ? "not_configured"
                  : !strcmp(reason, "Interrupted") ? "interrupted"
                                                   : "failed";
        if (!res)
            return false;
        snprintf(result, rcap, "%s", res);
        snprintf(detail, cap, "agent: %s: %s", reason, msg);
        return true;
    }
    return false;
}

/* ---- replace */

int gh_act_replace_node(const struct gh_act_ctx *x, const char *node, const char *reason,
                        struct gh_act_result *r, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, node};
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    json_t *n = NULL;
    int rc = gh_kube_get(x->c, &ref, &n, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, rc == GH_ENOTFOUND ? "skipped" : "failed", "node %s: %s", node,
                          rc == GH_ENOTFOUND ? "gone" : "cannot read");
        return rc == GH_ENOTFOUND ? GH_OK : rc;
    }
    json_t *meta = json_object_get(n, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    const char *lbl = gh_json_str(meta, "labels", GH_LABEL_REPLACE);
    const char *had = gh_json_str(ann, "gpuheal.io/replace-incident");
    char machine[254] = "", mns[64] = "";
    const char *m = gh_json_str(ann, "cluster.x-k8s.io/machine");
    const char *mn = gh_json_str(ann, "cluster.x-k8s.io/cluster-namespace");
    if (m && mn) {
        snprintf(machine, sizeof machine, "%s", m);
        snprintf(mns, sizeof mns, "%s", mn);
    }
    bool labelled = lbl && strcmp(lbl, "true") == 0 && had && strcmp(had, x->incident) == 0;
    json_decref(n);
    if (!labelled) {
        char why[256];
        snprintf(why, sizeof why, "%.250s", reason ? reason : "");
        json_t *patch = json_pack("{s:{s:{s:s}, s:{s:s, s:s}}}", "metadata", "labels",
                                  GH_LABEL_REPLACE, "true", "annotations",
                                  "gpuheal.io/replace-incident", x->incident,
                                  "gpuheal.io/replace-reason", why);
        rc = patch ? gh_kube_patch(x->c, &ref, NULL, GH_KUBE_PATCH_MERGE, patch, NULL, &st, err)
                   : gh_err_set(err, GH_ENOMEM, "out of memory");
        json_decref(patch);
        if (rc) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed", "could not label %s for replacement", node);
            return rc;
        }
    }
    char capi[400] = "";
    if (machine[0]) {
        struct gh_kube_ref mref = {&res_machines, mns, machine};
        json_t *mp = json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                               "cluster.x-k8s.io/delete-machine", x->incident);
        struct gh_kube_status mst;
        gh_kube_status_reset(&mst);
        int mrc = mp ? gh_kube_patch(x->c, &mref, NULL, GH_KUBE_PATCH_MERGE, mp, NULL, &mst, NULL)
                     : GH_ENOMEM;
        json_decref(mp);
        snprintf(capi, sizeof capi, "; Cluster API Machine %s/%s %s", mns, machine,
                 mrc == GH_OK ? "marked for deletion" : "could not be marked");
    }
    gh_act_result_api_ok(r, 200);
    gh_act_result_set(r, labelled ? "noop" : "succeeded",
                      "%s handed off for replacement (label %s=true)%s", node, GH_LABEL_REPLACE,
                      capi);
    return GH_OK;
}

bool gh_act_validation_passed(const json_t *gnh, int64_t since_ns)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(gnh, "status"), "conditions"), i, c) {
        const char *type = gh_json_str(c, "type");
        const char *status = gh_json_str(c, "status");
        const char *when = gh_json_str(c, "lastTransitionTime");
        int64_t t = 0;
        if (type && status && strcmp(type, "Validated") == 0 && strcmp(status, "True") == 0 &&
            when && gh_time_parse_rfc3339(when, strlen(when), &t))
            return t >= since_ns;
    }
    return false;
}
