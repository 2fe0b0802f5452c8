/* health_publish.c - publishes node-local GPU health to the Kubernetes API
 * (Node condition GPUHealthy, GPUNodeHealth status) on change, rate-limited,
 * with retries, on the kube client's loop (see health_publish.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/health_publish.h"
#include "common/json.h"
#include "kube/api.h"
#include "signal/signal_json.h"

#define NEVER INT64_MIN
#define EVIDENCE_CRD_MAX 50

enum phase { PH_NEW, PH_READING, PH_RUNNING };

struct gh_health_publish {
    struct gh_kube_client *c; /* borrowed */
    struct gh_health *h;      /* borrowed */
    const struct gh_clock *clock;
    char node[254];
    char fm[128];
    int64_t min_interval, resync, retry_base, retry_max, boot_ns;
    int evidence_max;

    enum phase phase;
    struct gh_kube_call *node_get, *gnh_get; /* first reads */
    struct gh_kube_call *node_call, *gnh_call; /* writes in flight */
    bool gnh_created;         /* this round created the object */
    json_t *node_want;        /* condition being written (comparison form) */
    json_t *gnh_want;         /* status being written (comparison form) */
    json_t *node_acked;       /* as last written / found (NULL: unknown) */
    json_t *gnh_acked;
    char node_uid[128];
    bool have_prev;           /* the Node's condition found at start */
    char prev_status[16];
    int64_t prev_transition;
    bool have_cur;
    char cur_status[16];
    int64_t transition;

    int64_t last_write, last_ok, retry_at, backoff;
    bool want, bypass, round_failed;
    bool flush_failed;
    int flush_rc;
    struct gh_err flush_err;
    uint64_t timer;
    int64_t timer_due;
    struct gh_health_publish_stats st;
};

static const struct gh_kube_res *gnh_res = &gh_kube_res_gpunodehealths;

static void schedule(struct gh_health_publish *p);

/* ---- helpers ---- */

static int64_t now_ns(const struct gh_health_publish *p)
{
    return gh_clock_now(p->clock);
}

/* RFC 3339 with whole seconds, as Kubernetes writes condition times. */
static void time_s(int64_t ns, char *buf, size_t cap)
{
    gh_time_format_rfc3339(ns, buf, cap);
    char *dot = strchr(buf, '.');
    if (dot && cap - (size_t)(dot - buf) >= 2)
        memcpy(dot, "Z", 2);
}

static json_t *time_json(int64_t ns, bool whole_seconds)
{
    char t[GH_RFC3339_MAX];
    if (whole_seconds)
        time_s(ns, t, sizeof t);
    else
        gh_time_format_rfc3339(ns, t, sizeof t);
    return json_string(t);
}

/* Builds a request with our field manager. ref->name NULL: the collection. */
static int build(struct gh_health_publish *p, struct gh_kube_req *req, enum gh_kube_method m,
                 const struct gh_kube_ref *ref, const char *sub, const char *ctype, bool force,
                 const json_t *body, struct gh_err *err)
{
    memset(req, 0, sizeof *req);
    req->method = m;
    int rc = gh_kube_path(req->path, sizeof req->path, ref, sub, err);
    if (!rc)
        rc = gh_kube_query_add(req->path, sizeof req->path, "fieldManager", p->fm, err);
    if (!rc && force)
        rc = gh_kube_query_add(req->path, sizeof req->path, "force", "true", err);
    if (rc)
        return rc;
    req->body = json_dumps(body, JSON_COMPACT);
    if (!req->body)
        return gh_err_set(err, GH_ENOMEM, "serializing the request body");
    req->body_len = strlen(req->body);
    req->content_type = ctype;
    return GH_OK;
}

static void cancel_timer(struct gh_health_publish *p)
{
    gh_kube_timer_cancel(p->c, p->timer);
    p->timer = 0;
}

static void on_timer(void *ud)
{
    struct gh_health_publish *p = ud;
    p->timer = 0;
    p->want = true;
    schedule(p);
}

static void arm(struct gh_health_publish *p, int64_t due)
{
    if (p->timer && p->timer_due == due)
        return;
    cancel_timer(p);
    p->timer = gh_kube_timer_add(p->c, due - now_ns(p), on_timer, p);
    p->timer_due = due;
}

/* Nothing to write now: wake up for the next time-based change or resync. */
static void arm_idle(struct gh_health_publish *p)
{
    int64_t due = gh_health_next_change(p->h);
    if (p->resync > 0 && p->last_ok != NEVER && p->last_ok + p->resync < due)
        due = p->last_ok + p->resync;
    if (due == INT64_MAX)
        cancel_timer(p);
    else
        arm(p, due);
}

static void failed(struct gh_health_publish *p, int rc, const struct gh_kube_status *st,
                   const struct gh_err *err, const char *what)
{
    p->st.failures++;
    p->st.last_rc = rc;
    int w = snprintf(p->st.last_err, sizeof p->st.last_err, "%s: ", what);
    if (w > 0 && (size_t)w < sizeof p->st.last_err)
        snprintf(p->st.last_err + w, sizeof p->st.last_err - (size_t)w, "%.*s",
                 (int)(sizeof p->st.last_err - (size_t)w - 1), err ? err->msg : gh_rc_str(rc));
    p->round_failed = true;
    p->want = true;
    int64_t now = now_ns(p);
    int64_t wait = gh_kube_jitter(p->c, p->backoff, 0.2);
    if (st && st->retry_after_s > 0 && (int64_t)st->retry_after_s * GH_NS_PER_S > wait)
        wait = (int64_t)st->retry_after_s * GH_NS_PER_S;
    p->retry_at = now + wait;
    p->backoff = p->backoff * 2 > p->retry_max ? p->retry_max : p->backoff * 2;
    if (!p->flush_failed) {
        p->flush_failed = true;
        p->flush_rc = rc;
        snprintf(p->flush_err.msg, sizeof p->flush_err.msg, "%s", p->st.last_err);
    }
}

/* A write finished: when none is left the round is over. */
static void after_call(struct gh_health_publish *p)
{
    if (p->node_call || p->gnh_call)
        return;
    if (!p->round_failed) {
        p->backoff = p->retry_base;
        p->retry_at = NEVER;
        p->last_ok = now_ns(p);
    }
    schedule(p);
}

/* ---- rendering ---- */

static json_t *condition_core(const struct gh_health *h, const char **status_out)
{
    struct gh_health_summary sum;
    gh_health_summarize(h, &sum);
    const char *status, *reason;
    if (gh_health_count(h) == 0) {
        status = "Unknown";
        reason = "NoGPUsObserved";
    } else {
        status = sum.state >= GH_GPU_UNHEALTHY ? "False" : "True";
        reason = gh_health_reason_name(sum.reason);
    }
    *status_out = status;
    return json_pack("{s:s, s:s, s:s, s:s}", "type", GH_HEALTH_CONDITION, "status", status,
                     "reason", reason, "message", sum.message);
}

static const char *node_state(const struct gh_health *h)
{
    struct gh_health_summary sum;
    gh_health_summarize(h, &sum);
    if (gh_health_count(h) == 0)
        return "Unknown";
    switch (sum.state) {
    case GH_GPU_HEALTHY: return "Healthy";
    case GH_GPU_DEGRADED: return "Degraded";
    default: return "Unhealthy";
    }
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *gpu_json(const struct gh_health_gpu *g)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = set_new(o, "index", json_integer(g->index));
    if (g->uuid[0] && strlen(g->uuid) <= 64)
        bad |= set_new(o, "uuid", json_string(g->uuid));
    if (g->pci[0])
        bad |= set_new(o, "pciBusId", json_string(g->pci));
    bad |= set_new(o, "state", json_string(gh_gpu_state_crd(g->state)));
    if (g->has_last_xid && g->last_xid >= 0)
        bad |= set_new(o, "lastXid", json_integer(g->last_xid));
    if (g->has_ecc_double_bit && g->ecc_double_bit >= 0)
        bad |= set_new(o, "eccDoubleBit", json_integer(g->ecc_double_bit));
    bad |= set_new(o, "rowRemapPending", json_boolean(g->remap_pending));
    bad |= set_new(o, "rowRemapFailure", json_boolean(g->remap_failure));
    if (g->last_signal_ns > 0)
        bad |= set_new(o, "lastSignalTime", time_json(g->last_signal_ns, false));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int cmp_ts(const void *a, const void *b)
{
    const struct gh_signal *x = *(const struct gh_signal *const *)a;
    const struct gh_signal *y = *(const struct gh_signal *const *)b;
    if (x->ts_ns != y->ts_ns)
        return x->ts_ns < y->ts_ns ? -1 : 1;
    return x < y ? -1 : x > y; /* stable enough: ring order within a GPU */
}

/* The newest evidence_max signals of every GPU and the node, oldest first. */
static json_t *evidence_json(const struct gh_health_publish *p)
{
    int n = gh_health_count(p->h);
    size_t cap = (size_t)(n + 1) * GH_HEALTH_EVIDENCE_CAP, k = 0;
    const struct gh_signal **all = malloc(cap * sizeof *all);
    json_t *arr = json_array();
    if (!all || !arr) {
        free(all);
        json_decref(arr);
        return NULL;
    }
    for (int i = -1; i < n; i++)
        k += gh_health_evidence(p->h, i, all + k, cap - k);
    qsort(all, k, sizeof *all, cmp_ts);
    size_t from = k > (size_t)p->evidence_max ? k - (size_t)p->evidence_max : 0;
    for (size_t i = from; i < k; i++) {
        json_t *e = gh_signal_encode_json(all[i]);
        if (e && json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            arr = NULL;
            break;
        }
        /* a signal that cannot be encoded is left out */
    }
    free(all);
    return arr;
}

/* The GPUNodeHealth status in comparison form (no observedTime). */
static json_t *gnh_status(const struct gh_health_publish *p, const json_t *core)
{
    struct gh_health_summary sum;
    gh_health_summarize(p->h, &sum);
    json_t *st = json_object(), *gpus = json_array(), *cond = json_deep_copy(core);
    json_t *conds = json_array();
    int bad = !st || !gpus || !cond || !conds;
    if (!bad) {
        bad |= set_new(cond, "lastTransitionTime", time_json(p->transition, true));
        bad |= json_array_append(conds, cond);
    }
    int n = gh_health_count(p->h);
    for (int i = 0; i < n && !bad; i++) {
        struct gh_health_gpu g;
        if (gh_health_gpu_at(p->h, i, &g) != GH_OK || g.index < 0)
            continue;
        bad |= json_array_append_new(gpus, gpu_json(&g));
    }
    if (!bad) {
        bad |= set_new(st, "state", json_string(node_state(p->h)));
        bad |= set_new(st, "gpuCount", json_integer(sum.gpus));
        int healthy = 0;
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g) {
            if (strcmp(gh_json_str(g, "state"), "Healthy") == 0)
                healthy++;
        }
        bad |= set_new(st, "healthyGPUs", json_integer(healthy));
        bad |= json_object_set(st, "gpus", gpus);
        bad |= set_new(st, "evidence", evidence_json(p));
        bad |= json_object_set(st, "conditions", conds);
    }
    json_decref(gpus);
    json_decref(cond);
    json_decref(conds);
    if (bad) {
        json_decref(st);
        return NULL;
    }
    return st;
}

/* ---- writes ---- */

static void node_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_health_publish *p = ud;
    p->node_call = NULL;
    if (rc == GH_OK) {
        json_decref(p->node_acked);
        p->node_acked = p->node_want;
    } else {
        failed(p, rc, &resp->status, err, "patch node status");
        json_decref(p->node_want);
    }
    p->node_want = NULL;
    after_call(p);
}

static int send_node(struct gh_health_publish *p, int64_t now, struct gh_err *err)
{
    json_t *cond = json_deep_copy(p->node_want);
    if (!cond)
        return gh_err_set(err, GH_ENOMEM, "condition");
    int bad = set_new(cond, "lastTransitionTime", time_json(p->transition, true));
    bad |= set_new(cond, "lastHeartbeatTime", time_json(now, true));
    json_t *body = bad ? NULL : json_pack("{s:{s:[o]}}", "status", "conditions", cond);
    if (bad)
        json_decref(cond);
    if (!body)
        return gh_err_set(err, GH_ENOMEM, "node patch");
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, p->node};
    struct gh_kube_req req;
    int rc = build(p, &req, GH_KUBE_PATCH, &ref, "status",
                   "application/strategic-merge-patch+json", false, body, err);
    json_decref(body);
    if (!rc)
        rc = gh_kube_submit(p->c, &req, node_done, NULL, p, &p->node_call, err);
    gh_kube_req_clear(&req);
    if (!rc)
        p->st.node_patches++;
    return rc;
}

static int send_gnh(struct gh_health_publish *p, struct gh_err *err);
static void created_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err);

static void gnh_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_health_publish *p = ud;
    p->gnh_call = NULL;
    if (rc == GH_OK) {
        json_decref(p->gnh_acked);
        p->gnh_acked = p->gnh_want;
        p->gnh_want = NULL;
    } else if (rc == GH_ENOTFOUND && !p->gnh_created) {
        /* no object yet: create it, then apply the status again */
        json_t *owner = NULL;
        if (p->node_uid[0])
            owner = json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "v1", "kind", "Node",
                              "name", p->node, "uid", p->node_uid);
        json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion",
                                "gpuheal.io/v1alpha1", "kind", "GPUNodeHealth", "metadata",
                                "name", p->node, "spec", "nodeName", p->node);
        struct gh_err e2;
        int rc2 = GH_ENOMEM;
        if (obj && owner)
            json_object_set_new(json_object_get(obj, "metadata"), "ownerReferences", owner);
        else
            json_decref(owner);
        if (obj) {
            struct gh_kube_ref ref = {gnh_res, NULL, NULL};
            struct gh_kube_req req;
            rc2 = build(p, &req, GH_KUBE_POST, &ref, NULL, NULL, false, obj, &e2);
            if (!rc2)
                rc2 = gh_kube_submit(p->c, &req, created_done, NULL, p, &p->gnh_call, &e2);
            gh_kube_req_clear(&req);
        } else {
            gh_err_set(&e2, GH_ENOMEM, "GPUNodeHealth object");
        }
        json_decref(obj);
        p->gnh_created = true;
        if (rc2 == GH_OK)
            return;
        failed(p, rc2, NULL, &e2, "create GPUNodeHealth");
        json_decref(p->gnh_want);
        p->gnh_want = NULL;
    } else {
        failed(p, rc, &resp->status, err, "apply GPUNodeHealth status");
        json_decref(p->gnh_want);
        p->gnh_want = NULL;
    }
    after_call(p);
}

static void created_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_health_publish *p = ud;
    p->gnh_call = NULL;
    if (rc == GH_OK || resp->status.kind == GH_KUBE_R_ALREADY_EXISTS) {
        if (rc == GH_OK)
            p->st.gnh_creates++;
        struct gh_err e2;
        int rc2 = send_gnh(p, &e2);
        if (rc2 == GH_OK)
            return;
        failed(p, rc2, NULL, &e2, "apply GPUNodeHealth status");
    } else {
        failed(p, rc, &resp->status, err, "create GPUNodeHealth");
    }
    json_decref(p->gnh_want);
    p->gnh_want = NULL;
    after_call(p);
}

/* Applies p->gnh_want (plus observedTime). */
static int send_gnh(struct gh_health_publish *p, struct gh_err *err)
{
    json_t *st = json_deep_copy(p->gnh_want);
    if (!st || set_new(st, "observedTime", time_json(now_ns(p), false))) {
        json_decref(st);
        return gh_err_set(err, GH_ENOMEM, "GPUNodeHealth status");
    }
    json_t *body = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "gpuheal.io/v1alpha1",
                             "kind", "GPUNodeHealth", "metadata", "name", p->node, "status", st);
    if (!body)
        return gh_err_set(err, GH_ENOMEM, "GPUNodeHealth apply");
    struct gh_kube_ref ref = {gnh_res, NULL, p->node};
    struct gh_kube_req req;
    int rc = build(p, &req, GH_KUBE_PATCH, &ref, "status", "application/apply-patch+yaml", true,
                   body, err);
    json_decref(body);
    if (!rc)
        rc = gh_kube_submit(p->c, &req, gnh_done, NULL, p, &p->gnh_call, err);
    gh_kube_req_clear(&req);
    if (!rc)
        p->st.gnh_applies++;
    return rc;
}

/* Whether evidence entry e is a passing probe result: routine, and not a
 * reason to write on its own. */
static bool routine_evidence(const json_t *e)
{
    const char *kind = gh_json_str(e, "kind");
    return kind && strcmp(kind, "probe_result") == 0 && json_is_true(json_object_get(e, "passed"));
}

/* The part of a GPUNodeHealth status (comparison form) whose change is
 * worth a write: without the GPUs' lastSignalTime and the passing probe
 * results in evidence, which every probe pass renews. They are written
 * with the next real change or resync. New reference; NULL on ENOMEM. */
static json_t *material(const json_t *st)
{
    json_t *m = json_deep_copy(st);
    if (!m)
        return NULL;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(m, "gpus"), i, g)
        json_object_del(g, "lastSignalTime");
    json_t *ev = json_object_get(m, "evidence");
    for (i = json_array_size(ev); i-- > 0;)
        if (routine_evidence(json_array_get(ev, i)))
            json_array_remove(ev, i);
    return m;
}

/* Whether status a and b differ in what is worth a write. */
static bool gnh_differs(const json_t *a, const json_t *b)
{
    json_t *ma = material(a), *mb = material(b);
    bool d = !ma || !mb || !json_equal(ma, mb);
    json_decref(ma);
    json_decref(mb);
    return d;
}

/* Renders both payloads and writes what differs from what was written. */
static void check(struct gh_health_publish *p, int64_t now)
{
    p->want = false;
    p->round_failed = false;
    p->gnh_created = false;
    p->st.checks++;
    const char *status = "Unknown";
    json_t *core = condition_core(p->h, &status);
    if (core && (!p->have_cur || strcmp(p->cur_status, status) != 0)) {
        if (!p->have_cur && p->have_prev && strcmp(p->prev_status, status) == 0)
            p->transition = p->prev_transition;
        else
            p->transition = now;
        p->have_cur = true;
        snprintf(p->cur_status, sizeof p->cur_status, "%s", status);
    }
    json_t *gnh = core ? gnh_status(p, core) : NULL;
    if (!core || !gnh) {
        json_decref(core);
        json_decref(gnh);
        struct gh_err e;
        gh_err_set(&e, GH_ENOMEM, "rendering the health status");
        failed(p, GH_ENOMEM, NULL, &e, "render");
        schedule(p);
        return;
    }
    bool resync = p->resync > 0 && p->last_ok != NEVER && now - p->last_ok >= p->resync;
    bool node_diff = resync || !p->node_acked || !json_equal(core, p->node_acked);
    bool gnh_diff = resync || !p->gnh_acked || gnh_differs(gnh, p->gnh_acked);
    if (!node_diff && !gnh_diff) {
        p->st.unchanged++;
        json_decref(core);
        json_decref(gnh);
        arm_idle(p);
        return;
    }
    p->last_write = now;
    struct gh_err e;
    if (node_diff) {
        p->node_want = core;
        core = NULL;
        int rc = send_node(p, now, &e);
        if (rc) {
            failed(p, rc, NULL, &e, "patch node status");
            json_decref(p->node_want);
            p->node_want = NULL;
        }
    }
    if (gnh_diff) {
        p->gnh_want = gnh;
        gnh = NULL;
        int rc = send_gnh(p, &e);
        if (rc) {
            failed(p, rc, NULL, &e, "apply GPUNodeHealth status");
            json_decref(p->gnh_want);
            p->gnh_want = NULL;
        }
    }
    json_decref(core);
    json_decref(gnh);
    if (!p->node_call && !p->gnh_call)
        after_call(p); /* both failed to start */
}

/* ---- first reads ---- */

static void reads_done(struct gh_health_publish *p)
{
    if (p->node_get || p->gnh_get)
        return;
    p->phase = PH_RUNNING;
    p->want = true;
    schedule(p);
}

static const json_t *find_condition(const json_t *conds)
{
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) {
        const char *t = gh_json_str(c, "type");
        if (t && strcmp(t, GH_HEALTH_CONDITION) == 0)
            return c;
    }
    return NULL;
}

static void node_get_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)err;
    struct gh_health_publish *p = ud;
    p->node_get = NULL;
    if (rc == GH_OK && resp->body) {
        const char *uid = gh_kube_meta_uid(resp->body);
        if (uid)
            snprintf(p->node_uid, sizeof p->node_uid, "%s", uid);
        const json_t *c =
            find_condition(json_object_get(json_object_get(resp->body, "status"), "conditions"));
        const char *status = gh_json_str(c, "status");
        const char *reason = gh_json_str(c, "reason");
        const char *msg = gh_json_str(c, "message");
        const char *ltt = gh_json_str(c, "lastTransitionTime");
        int64_t t;
        if (status && ltt && gh_time_parse_rfc3339(ltt, strlen(ltt), &t)) {
            p->have_prev = true;
            p->prev_transition = t;
            snprintf(p->prev_status, sizeof p->prev_status, "%s", status);
        }
        if (status && reason && msg) {
            json_decref(p->node_acked);
            p->node_acked = json_pack("{s:s, s:s, s:s, s:s}", "type", GH_HEALTH_CONDITION,
                                      "status", status, "reason", reason, "message", msg);
        }
    }
    reads_done(p);
}

/* What the object's status holds of ours, in comparison form. */
static json_t *ours(const json_t *status)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    static const char *const keys[] = {"state", "gpuCount", "healthyGPUs", "gpus", "evidence"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(status, keys[i]);
        if (v)
            json_object_set(o, keys[i], v);
    }
    const json_t *c = find_condition(json_object_get(status, "conditions"));
    if (c)
        json_object_set_new(o, "conditions", json_pack("[O]", c));
    return o;
}

static void gnh_get_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)err;
    struct gh_health_publish *p = ud;
    p->gnh_get = NULL;
    json_t *status = rc == GH_OK && resp->body ? json_object_get(resp->body, "status") : NULL;
    if (status) {
        const char *ot = gh_json_str(status, "observedTime");
        int64_t t;
        if (p->boot_ns > 0 && ot && gh_time_parse_rfc3339(ot, strlen(ot), &t) && t >= p->boot_ns) {
            size_t i;
            json_t *ev;
            json_array_foreach(json_object_get(status, "evidence"), i, ev) {
                struct gh_signal s;
                if (gh_signal_decode_json(ev, 0, &s, NULL) != GH_OK)
                    continue;
                if (gh_health_feed(p->h, &s, NULL) == GH_OK)
                    p->st.restored++;
                gh_signal_clear(&s);
            }
        }
        json_decref(p->gnh_acked);
        p->gnh_acked = ours(status);
    }
    reads_done(p);
}

static void start_reads(struct gh_health_publish *p)
{
    p->phase = PH_READING;
    struct gh_kube_req req;
    struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, p->node};
    if (gh_kube_req_get(&req, &ref, NULL, NULL) == GH_OK)
        gh_kube_submit(p->c, &req, node_get_done, NULL, p, &p->node_get, NULL);
    gh_kube_req_clear(&req);
    if (p->boot_ns > 0) {
        struct gh_kube_ref g = {gnh_res, NULL, p->node};
        if (gh_kube_req_get(&req, &g, NULL, NULL) == GH_OK)
            gh_kube_submit(p->c, &req, gnh_get_done, NULL, p, &p->gnh_get, NULL);
        gh_kube_req_clear(&req);
    }
    reads_done(p);
}

/* ---- scheduling ---- */

static void schedule(struct gh_health_publish *p)
{
    if (p->phase == PH_NEW) {
        start_reads(p);
        return;
    }
    if (p->phase != PH_RUNNING || p->node_call || p->gnh_call)
        return; /* the reads' or writes' completion calls again */
    if (!p->want) {
        arm_idle(p);
        return;
    }
    int64_t now = now_ns(p), due = p->retry_at;
    if (!p->bypass && p->last_write != NEVER && p->last_write + p->min_interval > due)
        due = p->last_write + p->min_interval;
    if (now >= due)
        check(p, now);
    else
        arm(p, due);
}

/* ---- public ---- */

int gh_health_publish_new(struct gh_kube_client *c, struct gh_health *h,
                          const struct gh_health_publish_opts *opts,
                          struct gh_health_publish **out, struct gh_err *err)
{
    *out = NULL;
    if (!c || !h || !opts || !opts->node || !opts->node[0])
        return gh_err_set(err, GH_EINVAL, "health publisher: client, state and node required");
    if (strlen(opts->node) > 253)
        return gh_err_set(err, GH_EINVAL, "node name longer than 253 bytes");
    if (opts->evidence_max < 0 || opts->evidence_max > EVIDENCE_CRD_MAX ||
        opts->min_interval_ns < 0 || opts->retry_base_ns < 0 || opts->retry_max_ns < 0)
        return gh_err_set(err, GH_EINVAL, "health publisher: option out of range");
    const char *fm = opts->field_manager ? opts->field_manager : GH_HEALTH_FIELD_MANAGER;
    if (!fm[0] || strlen(fm) >= 128)
        return gh_err_set(err, GH_EINVAL, "field manager must be 1..127 bytes");
    struct gh_health_publish *p = calloc(1, sizeof *p);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "health publisher");
    p->c = c;
    p->h = h;
    p->clock = gh_kube_client_clock(c);
    snprintf(p->node, sizeof p->node, "%s", opts->node);
    snprintf(p->fm, sizeof p->fm, "%s", fm);
    p->min_interval = opts->min_interval_ns ? opts->min_interval_ns : 10 * GH_NS_PER_S;
    p->resync = opts->resync_ns ? opts->resync_ns : 5 * 60 * GH_NS_PER_S;
    p->retry_base = opts->retry_base_ns ? opts->retry_base_ns : GH_NS_PER_S;
    p->retry_max = opts->retry_max_ns ? opts->retry_max_ns : 120 * GH_NS_PER_S;
    if (p->retry_max < p->retry_base)
        p->retry_max = p->retry_base;
    p->boot_ns = opts->boot_ns;
    p->evidence_max = opts->evidence_max ? opts->evidence_max : EVIDENCE_CRD_MAX;
    p->backoff = p->retry_base;
    p->last_write = p->last_ok = p->retry_at = NEVER;
    *out = p;
    return GH_OK;
}

void gh_health_publish_free(struct gh_health_publish *p)
{
    if (!p)
        return;
    gh_kube_cancel(p->c, p->node_get);
    gh_kube_cancel(p->c, p->gnh_get);
    gh_kube_cancel(p->c, p->node_call);
    gh_kube_cancel(p->c, p->gnh_call);
    cancel_timer(p);
    json_decref(p->node_want);
    json_decref(p->gnh_want);
    json_decref(p->node_acked);
    json_decref(p->gnh_acked);
    free(p);
}

void gh_health_publish_update(struct gh_health_publish *p)
{
    p->st.updates++;
    p->want = true;
    schedule(p);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gh_health_publish_flush(struct gh_health_publish *p, int timeout_ms, struct gh_err *err)
{
    int64_t deadline = mono_ms() + timeout_ms;
    p->bypass = true;
    p->flush_failed = false;
    p->want = true;
    schedule(p);
    int rc;
    for (;;) {
        bool idle = p->phase == PH_RUNNING && !p->node_call && !p->gnh_call;
        if (idle && p->flush_failed) {
            rc = p->flush_rc;
            if (err)
                *err = p->flush_err;
            break;
        }
        if (idle && !p->want) {
            rc = GH_OK;
            break;
        }
        if (mono_ms() >= deadline) {
            rc = gh_err_set(err, GH_ETIMEOUT, "health publish: not done within %d ms", timeout_ms);
            break;
        }
        rc = gh_kube_client_run(p->c, 50, err);
        if (rc)
            break;
    }
    p->bypass = false;
    schedule(p);
    return rc;
}

void gh_health_publish_stats(const struct gh_health_publish *p,
                             struct gh_health_publish_stats *out)
{
    *out = p->st;
}
