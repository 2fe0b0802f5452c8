/* job_inplace.c - the fast rungs of the recovery ladder: a job's running
 * pods restarted in place through their node agents and the pods' own
 * RestartAllContainers restart rule, and the pods of an excluded node
 * replaced alone (see job_inplace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/timeutil.h"
#include "control/job_inplace.h"
#include "control/job_kinds.h"
#include "kube/api.h"

#define PODS_MAX 512
#define NODES_MAX 128
#define POLL_MS 200

int gh_inplace_exit_code(const json_t *pod_spec, char *why, size_t cap)
{
    const json_t *cs = json_object_get(pod_spec, "containers");
    size_t i, k;
    const json_t *c;
    json_array_foreach(cs, i, c)
    {
        const json_t *rule;
        json_array_foreach(json_object_get(c, "restartPolicyRules"), k, rule)
        {
            const char *act = gh_json_str(rule, "action");
            const char *op = gh_json_str(rule, "exitCodes", "operator");
            const json_t *vals = gh_json_get(rule, "exitCodes", "values");
            if (!act || strcmp(act, "RestartAllContainers") != 0 || !op)
                continue;
            if (strcmp(op, "In") == 0) {
                size_t v;
                const json_t *e;
                json_array_foreach(vals, v, e)
                {
                    json_int_t code = json_integer_value(e);
                    if (json_is_integer(e) && code >= 1 && code <= 255)
                        return (int)code;
                }
            } else if (strcmp(op, "NotIn") == 0) {
                for (int code = 1; code <= 255; code++) {
                    bool listed = false;
                    size_t v;
                    const json_t *e;
                    json_array_foreach(vals, v, e) listed |= json_integer_value(e) == code;
                    if (!listed)
                        return code;
                }
            }
        }
    }
    if (why)
        snprintf(why, cap,
                 "no container has a restartPolicyRules entry with action "
                 "RestartAllContainers and an exit code 1-255");
    return -1;
}

long gh_inplace_restarts(const json_t *pod)
{
    long n = 0;
    size_t i;
    const json_t *s;
    json_array_foreach(gh_json_get(pod, "status", "containerStatuses"), i, s)
        n += (long)json_integer_value(json_object_get(s, "restartCount"));
    return n;
}

bool gh_inplace_running(const json_t *pod)
{
    const char *phase = gh_json_str(pod, "status", "phase");
    return phase && strcmp(phase, "Running") == 0 &&
           !gh_json_get(pod, "metadata", "deletionTimestamp");
}

/* One pod of the job, as the plan records it. */
struct ipod {
    const char *ns, *name, *uid, *node; /* borrowed from the plan */
    long before;
    int code;
    bool lost, done;
};

struct collect {
    json_t *pods, *lost; /* arrays being filled */
    const struct gh_inplace_opts *o;
    char *why;
    size_t cap;
    int rc; /* GH_EUNSUPPORTED when a pod rules this rung out */
    int n;
};

static bool on_lost_node(const struct gh_inplace_opts *o, const char *node)
{
    for (int i = 0; node && i < o->n_lost; i++)
        if (o->lost_nodes[i] && strcmp(o->lost_nodes[i], node) == 0)
            return true;
    return false;
}

static int collect_pod(void *ud, json_t *pod)
{
    struct collect *c = ud;
    const char *phase = gh_json_str(pod, "status", "phase");
    const char *name = gh_kube_meta_name(pod), *uid = gh_kube_meta_uid(pod);
    const char *node = gh_json_str(pod, "spec", "nodeName");
    if (!name || !uid || gh_json_get(pod, "metadata", "deletionTimestamp"))
        return GH_OK;
    if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
        return GH_OK; /* over: its controller replaces a failed one */
    if (++c->n > PODS_MAX) {
        snprintf(c->why, c->cap, "more than %d pods", PODS_MAX);
        c->rc = GH_EUNSUPPORTED;
        return GH_ELIMIT;
    }
    json_t *e = json_pack("{s:s, s:s, s:s, s:s}", "ns", gh_kube_meta_namespace(pod), "name", name,
                          "uid", uid, "node", node ? node : "");
    if (!e)
        return GH_ENOMEM;
    if (on_lost_node(c->o, node))
        return json_array_append_new(c->lost, e) ? GH_ENOMEM : GH_OK;
    if (!gh_inplace_running(pod)) {
        snprintf(c->why, c->cap, "pod %s is %s, not running: nothing to restart in place", name,
                 phase ? phase : "without a phase");
        c->rc = GH_EUNSUPPORTED;
        json_decref(e);
        return GH_EUNSUPPORTED;
    }
    char why[200];
    int code = gh_inplace_exit_code(json_object_get(pod, "spec"), why, sizeof why);
    if (code < 0) {
        snprintf(c->why, c->cap, "pod %s: %s", name, why);
        c->rc = GH_EUNSUPPORTED;
        json_decref(e);
        return GH_EUNSUPPORTED;
    }
    json_object_set_new(e, "code", json_integer(code));
    json_object_set_new(e, "before", json_integer(gh_inplace_restarts(pod)));
    return json_array_append_new(c->pods, e) ? GH_ENOMEM : GH_OK;
}

/* The job's pods by the label its controller sets (a Job's, a JobSet's, a
 * Kubeflow training job's), into the plan's "inplace" member. */
static int collect_pods(const struct gh_act_ctx *x, const char *ns, const char *name, json_t *ip,
                        const struct gh_inplace_opts *o, char *why, size_t cap,
                        struct gh_kube_status *st, struct gh_err *err)
{
    static const char *const keys[] = {"batch.kubernetes.io/job-name",
                                       "jobset.sigs.k8s.io/jobset-name",
                                       "training.kubeflow.org/job-name"};
    struct collect c = {
        json_object_get(ip, "pods"), json_object_get(ip, "lost"), o, why, cap, GH_OK, 0};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char sel[320];
        snprintf(sel, sizeof sel, "%s=%s", keys[k], name);
        struct gh_kube_list_opts lo = {.label_selector = sel};
        struct gh_kube_ref ref = {&gh_kube_res_pods, ns, NULL};
        int rc = gh_kube_list_all(x->c, &ref, &lo, collect_pod, &c, NULL, 0, st, err);
        if (c.rc)
            return c.rc;
        if (rc)
            return rc;
        if (json_array_size(c.pods) + json_array_size(c.lost) > 0) {
            /* one kind's label is enough; the wait lists by it */
            json_object_set_new(ip, "selector", json_string(sel));
            break;
        }
    }
    if (json_array_size(c.pods) == 0) {
        if (json_array_size(c.lost) > 0)
            snprintf(why, cap,
                     "every pod of %s/%s is on the excluded node: none to restart in "
                     "place",
                     ns, name);
        else
            snprintf(why, cap, "no running pod of %s/%s to restart in place", ns, name);
        return GH_EUNSUPPORTED;
    }
    return GH_OK;
}

/* The distinct nodes of the plan's pods into nodes (borrowed strings). */
static int nodes_of(const json_t *pods, const char **nodes, int max)
{
    int n = 0;
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        const char *node = gh_json_str(p, "node");
        bool seen = !node || !*node;
        for (int k = 0; !seen && k < n; k++)
            seen = strcmp(nodes[k], node) == 0;
        if (!seen && n < max)
            nodes[n++] = node;
    }
    return n;
}

/* Writes (value JSON text) or removes (value NULL) the restart annotation
 * of every pod of pods on node's GPUNodeHealth. */
static int annotate(const struct gh_act_ctx *x, const char *node, const json_t *pods, bool set,
                    struct gh_kube_status *st, struct gh_err *err)
{
    json_t *ann = json_object();
    char now[40];
    gh_time_format_rfc3339(gh_clock_now(x->clock ? x->clock : gh_clock_real()), now, sizeof now);
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        const char *pn = gh_json_str(p, "node");
        if (!pn || strcmp(pn, node) != 0)
            continue;
        char key[128], pod[400];
        snprintf(key, sizeof key, "%s%s", GH_ANN_RESTART_PREFIX, gh_json_str(p, "uid"));
        if (!set) {
            json_object_set_new(ann, key, json_null());
            continue;
        }
        snprintf(pod, sizeof pod, "%s/%s", gh_json_str(p, "ns"), gh_json_str(p, "name"));
        json_t *v = json_pack(
            "{s:s, s:s, s:s, s:I, s:s}", "id", x->incident, "incident", x->incident, "pod", pod,
            "exit_code", (json_int_t)json_integer_value(json_object_get(p, "code")), "time", now);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        if (!text) {
            json_decref(ann);
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        }
        json_object_set_new(ann, key, json_string(text));
        free(text);
    }
    json_t *patch = json_pack("{s:{s:o}}", "metadata", "annotations", ann);
    struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, node};
    int rc = patch ? gh_kube_patch(x->c, &ref, NULL, GH_KUBE_PATCH_MERGE, patch, NULL, st, err)
                   : gh_err_set(err, GH_ENOMEM, "out of memory");
    json_decref(patch);
    return rc;
}

/* Marks pod p (a plan entry) DisruptionTarget (reason GH_DISRUPTION_REASON)
 * and deletes it (UID precondition): its Job's podFailurePolicy can then
 * ignore it instead of counting it against backoffLimit. */
static int replace_lost(const struct gh_act_ctx *x, const json_t *p, struct gh_kube_status *st,
                        struct gh_err *err)
{
    char now[40], msg[300];
    gh_time_format_rfc3339(gh_clock_now(x->clock ? x->clock : gh_clock_real()), now, sizeof now);
    snprintf(msg, sizeof msg,
             "gpuheal: node %s excluded (incident %s); the pod is replaced "
             "elsewhere, not the job's own failure",
             gh_json_str(p, "node"), x->incident);
    json_t *patch = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status", "conditions", "type",
                              "DisruptionTarget", "status", "True", "reason", GH_DISRUPTION_REASON,
                              "message", msg, "lastTransitionTime", now);
    struct gh_kube_ref ref = {&gh_kube_res_pods, gh_json_str(p, "ns"), gh_json_str(p, "name")};
    int rc = patch ? gh_kube_patch(x->c, &ref, "status", GH_KUBE_PATCH_STRATEGIC, patch, NULL, st,
                                   err)
                   : gh_err_set(err, GH_ENOMEM, "out of memory");
    json_decref(patch);
    if (rc == GH_ENOTFOUND)
        return GH_OK; /* gone already */
    if (rc)
        return rc;
    struct gh_kube_delete_opts d = {.uid = gh_json_str(p, "uid"), .grace_period_s = -1};
    rc = gh_kube_delete(x->c, &ref, &d, st, err);
    return rc == GH_ENOTFOUND || st->kind == GH_KUBE_R_CONFLICT ? GH_OK : rc;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* One round of the wait: the job's pods listed by the plan's selector. */
struct seen {
    json_t *byuid; /* uid -> plan entry (borrowed) */
    size_t found;
};

static int seen_pod(void *ud, json_t *pod)
{
    struct seen *sn = ud;
    const char *uid = gh_kube_meta_uid(pod);
    json_t *p = uid ? json_object_get(sn->byuid, uid) : NULL;
    if (!p)
        return GH_OK;
    sn->found++;
    if (gh_inplace_restarts(pod) > json_integer_value(json_object_get(p, "before")))
        json_object_set_new(p, "done", json_true());
    return GH_OK;
}

/* Polls the plan's pods (one list per round, by the plan's selector, so a
 * gang of thousands costs a few calls) until each one's restart count rose
 * (done), one was deleted or replaced (GH_EIO, why), or the deadline
 * (GH_ETIMEOUT). */
static int wait_restarted(const struct gh_act_ctx *x, const json_t *ip, int64_t deadline, char *why,
                          size_t cap, struct gh_kube_status *st, struct gh_err *err)
{
    const struct gh_clock *clk = x->clock ? x->clock : gh_clock_real();
    json_t *pods = json_object_get(ip, "pods");
    const char *sel = gh_json_str(ip, "selector");
    json_t *byuid = json_object();
    if (!byuid)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p) if (gh_json_str(p, "uid"))
        json_object_set(byuid, gh_json_str(p, "uid"), p);
    int rc;
    for (;;) {
        struct seen sn = {byuid, 0};
        struct gh_kube_list_opts lo = {.label_selector = sel};
        struct gh_kube_ref ref = {&gh_kube_res_pods, gh_json_str(json_array_get(pods, 0), "ns"),
                                  NULL};
        rc = gh_kube_list_all(x->c, &ref, &lo, seen_pod, &sn, NULL, 0, st, err);
        if (rc)
            break;
        size_t left = 0;
        const char *first = NULL;
        json_array_foreach(pods, i, p) if (!json_is_true(json_object_get(p, "done")))
        {
            left++;
            if (!first)
                first = gh_json_str(p, "name");
        }
        if (left == 0)
            break;
        if (sn.found < json_array_size(pods)) {
            snprintf(why, cap, "%zu pod%s deleted or replaced while restarting in place",
                     json_array_size(pods) - sn.found,
                     json_array_size(pods) - sn.found == 1 ? "" : "s");
            rc = GH_EIO;
            break;
        }
        if (gh_clock_now(clk) > deadline) {
            snprintf(why, cap,
                     "%zu pod%s not restarted in place in time (first: %s): is the "
                     "gpuheal reporter running in it, connected to the node agent?",
                     left, left == 1 ? "" : "s", first ? first : "?");
            rc = GH_ETIMEOUT;
            break;
        }
        sleep_ms(POLL_MS);
    }
    json_decref(byuid);
    return rc;
}

int gh_act_restart_in_place(const struct gh_act_ctx *x, json_t *plan,
                            const struct gh_inplace_opts *o, gh_inplace_sent_fn sent_cb, void *ud,
                            struct gh_act_result *r, char *why, size_t cap, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    why[0] = '\0';
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    const char *ns = gh_json_str(plan, "namespace"), *name = gh_json_str(plan, "name");
    const char *kind = gh_json_str(plan, "kind");
    if (!ns || !name) {
        gh_act_result_set(r, "failed", "restart plan without its job");
        return gh_err_set(err, GH_EINVAL, "restart plan incomplete");
    }
    if (o->n_lost > 0) {
        /* what is correct per kind: an Indexed Job's controller recreates a
         * deleted pod with the same completion index (its rank) on another
         * node; other kinds' controllers may restart the whole gang on a
         * pod's failure or give the pod another identity */
        const char *cm = gh_json_str(plan, "job", "spec", "completionMode");
        if (!kind || strcmp(kind, "Job") != 0 || !cm || strcmp(cm, "Indexed") != 0) {
            snprintf(why, cap, "replacing only the lost pods needs an Indexed Job, not a%s %s",
                     kind && strcmp(kind, "Job") == 0 ? " non-Indexed" : "",
                     kind ? kind : "job of another kind");
            return GH_EUNSUPPORTED;
        }
    }
    for (int i = 0; i < o->n_lost; i++) {
        /* the Job controller recreates the pod from its template, which
         * does not avoid the node: only the node's cordon or taint does */
        struct gh_kube_ref nr = {&gh_kube_res_nodes, NULL, o->lost_nodes[i]};
        json_t *nobj = NULL;
        int nrc = gh_kube_get(x->c, &nr, &nobj, &st, err);
        bool out = nrc == GH_OK && json_is_true(gh_json_get(nobj, "spec", "unschedulable"));
        size_t k;
        json_t *t;
        const char *key = x->taint_key ? x->taint_key : GH_TAINT_KEY;
        json_array_foreach(gh_json_get(nobj, "spec", "taints"), k, t)
        {
            const char *tk = gh_json_str(t, "key");
            out |= tk && strcmp(tk, key) == 0;
        }
        json_decref(nobj);
        if (!out) {
            snprintf(why, cap,
                     "node %s is neither cordoned nor tainted %s: a replacement pod "
                     "could land on it again",
                     o->lost_nodes[i], key);
            return GH_EUNSUPPORTED;
        }
    }
    int64_t timeout = o->timeout_ns > 0 ? o->timeout_ns : GH_INPLACE_TIMEOUT_DEFAULT_NS;
    const struct gh_clock *clk = x->clock ? x->clock : gh_clock_real();
    json_t *ip = json_object_get(plan, "inplace");
    bool resumed = json_is_object(ip);
    int rc = GH_OK;
    if (!resumed) {
        /* the object decided about, not a replacement made since */
        const struct gh_kube_res *res = gh_job_res_of_kind(kind ? kind : "Job");
        json_t *cur = NULL;
        struct gh_kube_ref jr = {res, ns, name};
        rc = res ? gh_kube_get(x->c, &jr, &cur, &st, err) : GH_ENOTFOUND;
        const char *cuid = cur ? gh_kube_meta_uid(cur) : NULL;
        bool same = cuid && gh_json_str(plan, "uid") && !strcmp(cuid, gh_json_str(plan, "uid"));
        json_decref(cur);
        if (rc && rc != GH_ENOTFOUND) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed", "could not read %s %s/%s", kind ? kind : "Job", ns,
                              name);
            return rc;
        }
        if (!same) {
            snprintf(why, cap, "%s %s/%s is not the object decided about (gone or replaced)",
                     kind ? kind : "Job", ns, name);
            return GH_EUNSUPPORTED;
        }
        ip = json_pack("{s:[], s:[]}", "pods", "lost");
        if (!ip)
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        rc = collect_pods(x, ns, name, ip, o, why, cap, &st, err);
        if (rc) {
            json_decref(ip);
            if (rc != GH_EUNSUPPORTED) {
                gh_act_result_api_fail(r, &st, err);
                gh_act_result_set(r, "failed", "could not list the pods of %s/%s", ns, name);
            }
            return rc;
        }
        /* every node must have an agent that reads the requests */
        const char *nodes[NODES_MAX];
        int nn = nodes_of(json_object_get(ip, "pods"), nodes, NODES_MAX);
        for (int i = 0; i < nn; i++) {
            struct gh_kube_ref ref = {&gh_kube_res_gpunodehealths, NULL, nodes[i]};
            rc = gh_kube_get(x->c, &ref, NULL, &st, err);
            if (rc == GH_ENOTFOUND) {
                snprintf(why, cap, "no gpuheal agent on node %s (no GPUNodeHealth)", nodes[i]);
                json_decref(ip);
                return GH_EUNSUPPORTED;
            }
            if (rc) {
                json_decref(ip);
                gh_act_result_api_fail(r, &st, err);
                gh_act_result_set(r, "failed", "could not read the GPUNodeHealth of %s", nodes[i]);
                return rc;
            }
        }
        json_object_set_new(plan, "inplace", ip);
        json_object_set_new(ip, "started", json_integer(gh_clock_now(clk)));
        if (sent_cb && (rc = sent_cb(ud, plan)) != GH_OK) {
            json_object_del(plan, "inplace");
            gh_act_result_set(r, "failed", "could not store the restart plan: %s", err->msg);
            return rc;
        }
    }
    json_t *pods = json_object_get(ip, "pods"), *lost = json_object_get(ip, "lost");
    if (resumed && wait_restarted(x, ip, 0, why, cap, &st, err) == GH_OK &&
        json_array_size(lost) == 0) {
        gh_act_result_api_ok(r, 200);
        gh_act_result_set(r, "noop", "mode %s: the pods of %s/%s already restarted in place",
                          GH_MODE_IN_PLACE, ns, name);
        return GH_OK;
    }
    why[0] = '\0';
    /* the resume first: the restarted processes read it (a retry with no
     * checkpoint known leaves the ConfigMap as it is) */
    if (!json_is_true(json_object_get(plan, "resume_kept")) &&
        (rc = gh_act_resume_apply(x, plan, r, err)) != GH_OK)
        return rc;
    const char *nodes[NODES_MAX];
    int nn = nodes_of(pods, nodes, NODES_MAX);
    for (int i = 0; i < nn; i++) {
        if ((rc = annotate(x, nodes[i], pods, true, &st, err)) != GH_OK) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed",
                              "could not ask the agent on %s to restart pods in "
                              "place",
                              nodes[i]);
            goto cleanup;
        }
    }
    /* replace only what is lost: once the others were told */
    size_t i;
    json_t *p;
    int nlost = 0;
    json_array_foreach(lost, i, p)
    {
        if ((rc = replace_lost(x, p, &st, err)) != GH_OK) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed", "could not delete pod %s/%s on the excluded node %s",
                              gh_json_str(p, "ns"), gh_json_str(p, "name"), gh_json_str(p, "node"));
            goto cleanup;
        }
        nlost++;
    }
    int64_t started = json_integer_value(json_object_get(ip, "started"));
    rc = wait_restarted(x, ip, (started ? started : gh_clock_now(clk)) + timeout, why, cap, &st,
                        err);
    if (rc == GH_OK) {
        gh_act_result_api_ok(r, 200);
        char names[300] = "";
        size_t used = 0;
        json_array_foreach(pods, i, p)
        {
            if (used < sizeof names) {
                int w = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                 gh_json_str(p, "name"));
                used += w > 0 ? (size_t)w : 0;
            }
        }
        if (nlost)
            gh_act_result_set(r, "succeeded",
                              "mode %s: %zu pod%s restarted in place (%s), %d "
                              "pod%s of the excluded node deleted for the Job to recreate "
                              "elsewhere (DisruptionTarget %s)",
                              GH_MODE_REPLACE_LOST, json_array_size(pods),
                              json_array_size(pods) == 1 ? "" : "s", names, nlost,
                              nlost == 1 ? "" : "s", GH_DISRUPTION_REASON);
        else
            gh_act_result_set(r, "succeeded",
                              "mode %s: %zu pod%s of %s/%s restarted in place "
                              "(RestartAllContainers: %s)",
                              GH_MODE_IN_PLACE, json_array_size(pods),
                              json_array_size(pods) == 1 ? "" : "s", ns, name, names);
    } else if (rc == GH_EIO) {
        rc = GH_ETIMEOUT; /* the rung failed: the caller goes down the ladder */
    } else if (rc != GH_ETIMEOUT) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not read the pods restarting in place");
    }
cleanup:
    for (int k = 0; k < nn; k++) {
        struct gh_kube_status st2;
        struct gh_err e2;
        gh_kube_status_reset(&st2);
        (void)annotate(x, nodes[k], pods, false, &st2, &e2);
    }
    return rc;
}
