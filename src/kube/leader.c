/* leader.c - Lease-based leader election state machine (see leader.h). */
#include "kube/leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/json.h"
#include "common/mono.h"
#include "kube/api.h"

struct gh_kube_leader {
    struct gh_kube_client *c;
    char *ns, *name, *identity;
    int64_t lease_ns, renew_deadline_ns, retry_ns;
    struct gh_kube_leader_cbs cbs;
    void *ud;
    struct gh_kube_call *call;
    uint64_t timer;
    uint64_t deadline_timer; /* while leading: fires at last_renew_ok + renew deadline */
    bool running, leader;
    bool held;               /* gh_kube_leader_hold: neither acquire nor renew */
    int64_t last_renew_ok;   /* local clock */
    int64_t write_sent_mono; /* when the Lease write in flight was sent (monotonic) */
    int64_t fence_mono;      /* leading surely until (monotonic); 0: not leading */
    char holder[254];
    char fingerprint[512];   /* holder|renewTime|transitions as last observed */
    int64_t observed_at;     /* local clock when fingerprint last changed */
    int64_t observed_dur_ns; /* the record's leaseDurationSeconds */
};

static void tick(void *ud);
static void schedule(struct gh_kube_leader *l);
static void arm_deadline(struct gh_kube_leader *l);

static int64_t now(const struct gh_kube_leader *l)
{
    return gh_clock_now(gh_kube_client_clock(l->c));
}

static void set_leader(struct gh_kube_leader *l, bool lead)
{
    if (!lead)
        l->fence_mono = 0;
    if (l->leader == lead)
        return;
    l->leader = lead;
    if (lead && l->cbs.started)
        l->cbs.started(l->ud);
    else if (!lead && l->cbs.stopped)
        l->cbs.stopped(l->ud);
}

static void observe_holder(struct gh_kube_leader *l, const char *holder)
{
    if (strcmp(l->holder, holder) == 0)
        return;
    snprintf(l->holder, sizeof l->holder, "%s", holder);
    if (l->cbs.new_leader)
        l->cbs.new_leader(l->ud, l->holder);
}

/* Lease object with us as holder; base (borrowed, may be NULL) supplies
 * metadata.resourceVersion, acquireTime and leaseTransitions. */
static json_t *lease_body(struct gh_kube_leader *l, const json_t *base, const char *holder,
                          int64_t dur_s)
{
    char ts[GH_RFC3339_MAX];
    gh_time_format_rfc3339(now(l), ts, sizeof ts);
    const json_t *spec = json_object_get(base, "spec");
    const char *prev = gh_json_str(spec, "holderIdentity");
    json_int_t trans = json_integer_value(json_object_get(spec, "leaseTransitions"));
    const char *acq = gh_json_str(spec, "acquireTime");
    bool same = prev && strcmp(prev, holder) == 0;
    if (base && !same && holder[0])
        trans++;
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:I, s:s, s:s, s:I}}", "apiVersion",
                          "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", l->name,
                          "namespace", l->ns, "spec", "holderIdentity", holder,
                          "leaseDurationSeconds", (json_int_t)dur_s, "acquireTime",
                          same && acq ? acq : ts, "renewTime", ts, "leaseTransitions", trans);
    const char *rv = gh_kube_meta_rv(base);
    if (o && rv)
        json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
    return o;
}

static void write_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_kube_leader *l = ud;
    (void)resp;
    (void)err;
    l->call = NULL;
    if (rc == GH_OK && l->held) {
        /* written before the hold: the Lease lapses, we do not lead */
        set_leader(l, false);
    } else if (rc == GH_OK) {
        l->last_renew_ok = now(l);
        /* the write reached the apiserver after it was sent: no other
         * contender can take the Lease before sent + lease duration, on
         * its own clock; the renew deadline is shorter */
        l->fence_mono = l->write_sent_mono + l->renew_deadline_ns;
        observe_holder(l, l->identity);
        set_leader(l, true);
        if (l->running && l->leader)
            arm_deadline(l);
    } else if (l->leader && now(l) - l->last_renew_ok > l->renew_deadline_ns) {
        set_leader(l, false);
    } else if (resp->status.kind == GH_KUBE_R_CONFLICT ||
               resp->status.kind == GH_KUBE_R_ALREADY_EXISTS) {
        /* another contender wrote first: we are not the leader */
        set_leader(l, false);
    }
    if (l->running)
        schedule(l);
}

static void submit_write(struct gh_kube_leader *l, const json_t *base, bool create)
{
    struct gh_kube_req req;
    struct gh_err e;
    struct gh_kube_ref ref = {&gh_kube_res_leases, l->ns, create ? NULL : l->name};
    json_t *body = lease_body(l, base, l->identity, (l->lease_ns + GH_NS_PER_S - 1) / GH_NS_PER_S);
    int rc = body ? GH_OK : GH_ENOMEM;
    if (!rc)
        rc = create ? gh_kube_req_create(&req, &ref, NULL, body, &e)
                    : gh_kube_req_update(&req, &ref, NULL, body, &e);
    json_decref(body);
    req.timeout_ms = (long)(l->renew_deadline_ns / GH_NS_PER_MS);
    l->write_sent_mono = gh_mono_ns();
    if (!rc)
        rc = gh_kube_submit(l->c, &req, write_done, NULL, l, &l->call, &e);
    if (rc)
        schedule(l);
}

static void get_done(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    struct gh_kube_leader *l = ud;
    (void)err;
    l->call = NULL;
    if (!l->running)
        return;
    if (rc == GH_ENOTFOUND) {
        submit_write(l, NULL, true);
        return;
    }
    if (rc) {
        if (l->leader && now(l) - l->last_renew_ok > l->renew_deadline_ns)
            set_leader(l, false);
        schedule(l);
        return;
    }
    const json_t *spec = json_object_get(resp->body, "spec");
    const char *holder = gh_json_str(spec, "holderIdentity");
    const char *renew = gh_json_str(spec, "renewTime");
    json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    json_int_t trans = json_integer_value(json_object_get(spec, "leaseTransitions"));
    if (!holder)
        holder = "";
    char fp[sizeof l->fingerprint];
    snprintf(fp, sizeof fp, "%.253s|%.64s|%lld|%lld", holder, renew ? renew : "", (long long)trans,
             (long long)dur);
    int64_t t = now(l);
    if (strcmp(fp, l->fingerprint) != 0) {
        snprintf(l->fingerprint, sizeof l->fingerprint, "%s", fp);
        l->observed_at = t;
        l->observed_dur_ns = (dur > 0 ? dur : 1) * GH_NS_PER_S;
    }
    observe_holder(l, holder);
    bool ours = strcmp(holder, l->identity) == 0;
    bool expired = t >= l->observed_at + l->observed_dur_ns;
    if (holder[0] && !ours && !expired) {
        set_leader(l, false);
        schedule(l);
        return;
    }
    if ((l->leader && now(l) - l->last_renew_ok > l->renew_deadline_ns) || l->held) {
        set_leader(l, false);
        schedule(l);
        return;
    }
    submit_write(l, resp->body, false);
}

static void tick(void *ud)
{
    struct gh_kube_leader *l = ud;
    l->timer = 0;
    if (!l->running || l->call)
        return;
    struct gh_kube_req req;
    struct gh_err e;
    struct gh_kube_ref ref = {&gh_kube_res_leases, l->ns, l->name};
    int rc = gh_kube_req_get(&req, &ref, NULL, &e);
    /* a hung apiserver must not hold the state machine past the deadline */
    req.timeout_ms = (long)(l->renew_deadline_ns / GH_NS_PER_MS);
    if (!rc)
        rc = gh_kube_submit(l->c, &req, get_done, NULL, l, &l->call, &e);
    if (rc)
        schedule(l);
}

/* The leader could not renew within the renew deadline: it stops leading
 * now, whatever request is still on the wire (a hung apiserver or a dead
 * connection answers nothing), so it never leads past the lease others see. */
static void deadline_fn(void *ud)
{
    struct gh_kube_leader *l = ud;
    l->deadline_timer = 0;
    if (!l->running || !l->leader)
        return;
    if (now(l) - l->last_renew_ok < l->renew_deadline_ns) {
        arm_deadline(l);
        return;
    }
    if (l->call) {
        gh_kube_cancel(l->c, l->call);
        l->call = NULL;
    }
    set_leader(l, false);
    schedule(l);
}

static void arm_deadline(struct gh_kube_leader *l)
{
    gh_kube_timer_cancel(l->c, l->deadline_timer);
    l->deadline_timer =
        gh_kube_timer_add(l->c, l->last_renew_ok + l->renew_deadline_ns - now(l), deadline_fn, l);
}

static void schedule(struct gh_kube_leader *l)
{
    if (!l->running)
        return;
    int64_t d = l->leader ? l->retry_ns : gh_kube_jitter(l->c, l->retry_ns, 1.2);
    gh_kube_timer_cancel(l->c, l->timer);
    l->timer = gh_kube_timer_add(l->c, d, tick, l);
}

int gh_kube_leader_new(struct gh_kube_client *c, const struct gh_kube_leader_opts *o,
                       const struct gh_kube_leader_cbs *cbs, void *ud, struct gh_kube_leader **out,
                       struct gh_err *err)
{
    *out = NULL;
    if (!o || !o->ns || !o->name || !o->identity || !o->identity[0] ||
        strlen(o->identity) >= 254)
        return gh_err_set(err, GH_EINVAL, "leader: namespace, name and identity are required");
    struct gh_kube_leader *l = calloc(1, sizeof *l);
    if (!l)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    l->c = c;
    l->ns = strdup(o->ns);
    l->name = strdup(o->name);
    l->identity = strdup(o->identity);
    l->lease_ns = o->lease_ns > 0 ? o->lease_ns : 15 * GH_NS_PER_S;
    l->renew_deadline_ns = o->renew_deadline_ns > 0 ? o->renew_deadline_ns : 10 * GH_NS_PER_S;
    l->retry_ns = o->retry_ns > 0 ? o->retry_ns : 2 * GH_NS_PER_S;
    if (cbs)
        l->cbs = *cbs;
    l->ud = ud;
    if (!l->ns || !l->name || !l->identity) {
        gh_kube_leader_free(l);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    if (!(l->lease_ns > l->renew_deadline_ns && l->renew_deadline_ns > l->retry_ns)) {
        gh_kube_leader_free(l);
        return gh_err_set(err, GH_EINVAL, "leader: need lease > renew deadline > retry period");
    }
    *out = l;
    return GH_OK;
}

int gh_kube_leader_start(struct gh_kube_leader *l, struct gh_err *err)
{
    if (l->running)
        return gh_err_set(err, GH_EINVAL, "leader: already running");
    l->running = true;
    l->timer = gh_kube_timer_add(l->c, 0, tick, l);
    return l->timer ? GH_OK : gh_err_set(err, GH_ENOMEM, "out of memory");
}

void gh_kube_leader_stop(struct gh_kube_leader *l)
{
    if (!l)
        return;
    l->running = false;
    gh_kube_timer_cancel(l->c, l->timer);
    gh_kube_timer_cancel(l->c, l->deadline_timer);
    l->timer = l->deadline_timer = 0;
    if (l->call)
        gh_kube_cancel(l->c, l->call);
    l->call = NULL;
    set_leader(l, false);
}

int gh_kube_leader_release(struct gh_kube_leader *l, struct gh_err *err)
{
    bool was = l->leader;
    gh_kube_leader_stop(l);
    if (!was)
        return GH_OK;
    struct gh_kube_ref ref = {&gh_kube_res_leases, l->ns, l->name};
    json_t *cur = NULL;
    int rc = gh_kube_get(l->c, &ref, &cur, NULL, err);
    if (rc)
        return rc;
    const char *holder =
        gh_json_str(cur, "spec", "holderIdentity");
    if (holder && strcmp(holder, l->identity) == 0) {
        json_t *body = lease_body(l, cur, "", 1);
        rc = body ? gh_kube_update(l->c, &ref, NULL, body, NULL, NULL, err)
                  : gh_err_set(err, GH_ENOMEM, "out of memory");
        json_decref(body);
    }
    json_decref(cur);
    return rc;
}

void gh_kube_leader_free(struct gh_kube_leader *l)
{
    if (!l)
        return;
    if (l->c)
        gh_kube_leader_stop(l);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l);
}

void gh_kube_leader_hold(struct gh_kube_leader *l, bool hold)
{
    if (l->held == hold)
        return;
    l->held = hold;
    if (hold && l->leader) {
        gh_kube_timer_cancel(l->c, l->deadline_timer);
        l->deadline_timer = 0;
        if (l->call) {
            gh_kube_cancel(l->c, l->call);
            l->call = NULL;
        }
        set_leader(l, false);
        schedule(l);
    }
}

bool gh_kube_leader_held(const struct gh_kube_leader *l) { return l->held; }

int64_t gh_kube_leader_fence(const struct gh_kube_leader *l)
{
    return l->leader ? l->fence_mono : 0;
}

bool gh_kube_leader_is_leader(const struct gh_kube_leader *l) { return l->leader; }
const char *gh_kube_leader_holder(const struct gh_kube_leader *l) { return l->holder; }
