/* kube_signals.c - turns Pod, Node and Event changes seen by the informers into
 * kube signals for the engine. */
#include "control/kube_signals.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/timeutil.h"
#include "signal/signal_json.h"

static json_t *jget2(const json_t *o, const char *a, const char *b)
{
    return json_object_get(json_object_get(o, a), b);
}

const char *gh_kube_pod_job(const json_t *pod, char *buf, size_t cap)
{
    static const char *const keys[] = {"batch.kubernetes.io/job-name", "job-name",
                                       "jobset.sigs.k8s.io/jobset-name",
                                       "training.kubeflow.org/job-name"};
    json_t *labels = jget2(pod, "metadata", "labels");
    const char *ns = json_string_value(jget2(pod, "metadata", "namespace"));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = gh_json_str(labels, keys[i]);
        if (v && *v) {
            snprintf(buf, cap, "%s/%s", ns ? ns : "default", v);
            return buf;
        }
    }
    return NULL;
}

static int64_t ts_of(const char *s, int64_t dflt)
{
    int64_t t;
    return s && gh_time_parse_rfc3339(s, strlen(s), &t) ? t : dflt;
}

static void set(char **field, const char *v)
{
    if (v)
        gh_signal_set_str(field, v, strlen(v));
}

static void common(struct gh_signal *s, const json_t *pod, enum gh_kind kind, int64_t ts,
                   const char *id)
{
    gh_signal_init(s);
    s->ts_ns = ts;
    s->source = GH_SRC_KUBE;
    s->kind = kind;
    char job[320];
    set(&s->node, json_string_value(jget2(pod, "spec", "nodeName")));
    set(&s->namespace_, json_string_value(jget2(pod, "metadata", "namespace")));
    set(&s->pod, json_string_value(jget2(pod, "metadata", "name")));
    set(&s->job, gh_kube_pod_job(pod, job, sizeof job));
    set(&s->id, id);
}

/* The container state that terminated: state.terminated, else
 * lastState.terminated. */
static const json_t *terminated(const json_t *cs, bool *last)
{
    const json_t *t = jget2(cs, "state", "terminated");
    *last = false;
    if (json_is_object(t))
        return t;
    t = jget2(cs, "lastState", "terminated");
    *last = json_is_object(t);
    return *last ? t : NULL;
}

static long restart_count(const json_t *pod, const char *container)
{
    size_t i;
    json_t *cs;
    json_array_foreach(jget2(pod, "status", "containerStatuses"), i, cs) {
        const char *n = gh_json_str(cs, "name");
        if (n && container && !strcmp(n, container))
            return (long)json_integer_value(json_object_get(cs, "restartCount"));
    }
    return -1;
}

size_t gh_kube_pod_signals(const json_t *old, const json_t *pod, int64_t now,
                           struct gh_signal *out, size_t max)
{
    size_t n = 0;
    if (max > GH_KUBE_SIGNALS_MAX)
        max = GH_KUBE_SIGNALS_MAX;
    const char *uid = json_string_value(jget2(pod, "metadata", "uid"));
    const char *phase = json_string_value(jget2(pod, "status", "phase"));
    const char *ophase = old ? json_string_value(jget2(old, "status", "phase")) : NULL;
    char id[300];
    if (!uid || !phase)
        return 0;
    /* A pod being deleted fails because it is deleted (a namespace going,
     * a drain, a job restarted, scale-down): no application fault. */
    bool deleting = json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") != NULL;
    bool failed_now = !strcmp(phase, "Failed") && !(ophase && !strcmp(ophase, "Failed"));
    /* a failed pod: one signal, from its failing container when known */
    if (failed_now && deleting)
        return 0;
    if (failed_now && n < max) {
        const json_t *term = NULL;
        size_t i;
        json_t *cs;
        json_array_foreach(jget2(pod, "status", "containerStatuses"), i, cs) {
            bool last;
            const json_t *t = terminated(cs, &last);
            if (t && json_integer_value(json_object_get(t, "exitCode")) != 0 && !term)
                term = t;
        }
        struct gh_signal *s = &out[n++];
        snprintf(id, sizeof id, "kube:pod:%s:failed", uid);
        common(s, pod, GH_KIND_POD_FAILED,
               ts_of(term ? gh_json_str(term, "finishedAt") : NULL, now), id);
        const char *reason = gh_json_str(json_object_get(pod, "status"), "reason");
        if (!reason && term)
            reason = gh_json_str(term, "reason");
        set(&s->reason, reason ? reason : "Error");
        if (term) {
            s->has_exit_code = true;
            s->exit_code = (int)json_integer_value(json_object_get(term, "exitCode"));
        }
        const char *msg = term ? gh_json_str(term, "message") : NULL;
        if (!msg)
            msg = gh_json_str(json_object_get(pod, "status"), "message");
        set(&s->msg, msg);
        return n;
    }
    /* a container restarted after an error (restartPolicy OnFailure/Always) */
    size_t i;
    json_t *cs;
    json_array_foreach(jget2(pod, "status", "containerStatuses"), i, cs) {
        if (n >= max)
            break;
        const char *cname = gh_json_str(cs, "name");
        long rc = (long)json_integer_value(json_object_get(cs, "restartCount"));
        long orc = old ? restart_count(old, cname) : -1;
        if (!old || rc <= orc || rc <= 0 || deleting)
            continue;
        const json_t *t = jget2(cs, "lastState", "terminated");
        if (!json_is_object(t) || json_integer_value(json_object_get(t, "exitCode")) == 0)
            continue;
        /* the kubelet restarting all the pod's containers in place (a
         * RestartAllContainers rule; gpuheal's in-place restart): no failure */
        const char *why = gh_json_str(t, "reason");
        if (why && strcmp(why, "RestartingAllContainers") == 0)
            continue;
        struct gh_signal *s = &out[n++];
        snprintf(id, sizeof id, "kube:pod:%s:%s:%ld", uid, cname ? cname : "?", rc);
        common(s, pod, GH_KIND_POD_FAILED, ts_of(gh_json_str(t, "finishedAt"), now), id);
        set(&s->reason, gh_json_str(t, "reason") ? gh_json_str(t, "reason") : "Error");
        s->has_exit_code = true;
        s->exit_code = (int)json_integer_value(json_object_get(t, "exitCode"));
        set(&s->msg, gh_json_str(t, "message"));
    }
    /* a container the runtime cannot create or start while the pod stays
     * Pending (CreateContainerError: no terminated state, no restart; the
     * kubelet retries with the same reason): one signal per container,
     * reason and restart count, from its waiting state's reason and
     * message. A restart signalled above already says it. */
    json_array_foreach(jget2(pod, "status", "containerStatuses"), i, cs)
    {
        if (n >= max || deleting)
            break;
        const char *wr = gh_json_str(jget2(cs, "state", "waiting"), "reason");
        if (!wr ||
            (strcmp(wr, "CreateContainerError") != 0 && strcmp(wr, "RunContainerError") != 0))
            continue;
        const char *cname = gh_json_str(cs, "name");
        long rc = (long)json_integer_value(json_object_get(cs, "restartCount"));
        const char *owr = NULL;
        if (old) {
            size_t k;
            json_t *ocs;
            json_array_foreach(jget2(old, "status", "containerStatuses"), k, ocs)
            {
                const char *on = gh_json_str(ocs, "name");
                if (on && cname && !strcmp(on, cname))
                    owr = gh_json_str(jget2(ocs, "state", "waiting"), "reason");
            }
            /* restarted after an error: signalled above */
            const json_t *t = jget2(cs, "lastState", "terminated");
            if (rc > 0 && rc > restart_count(old, cname) && json_is_object(t) &&
                json_integer_value(json_object_get(t, "exitCode")) != 0)
                continue;
        }
        if (owr && !strcmp(owr, wr))
            continue; /* still the same failure */
        struct gh_signal *s = &out[n++];
        snprintf(id, sizeof id, "kube:pod:%s:%s:waiting:%s:%ld", uid, cname ? cname : "?", wr, rc);
        common(s, pod, GH_KIND_POD_FAILED, now, id);
        set(&s->reason, wr);
        set(&s->msg, gh_json_str(jget2(cs, "state", "waiting"), "message"));
    }
    /* succeeded: phase became Succeeded (the pod ran to completion) */
    if (!strcmp(phase, "Succeeded") && !(ophase && !strcmp(ophase, "Succeeded")) && n < max) {
        const char *fin = NULL;
        json_array_foreach(jget2(pod, "status", "containerStatuses"), i, cs) {
            bool last;
            const json_t *t = terminated(cs, &last);
            const char *f = t ? gh_json_str(t, "finishedAt") : NULL;
            if (f && (!fin || strcmp(f, fin) > 0))
                fin = f; /* the last container to finish */
        }
        snprintf(id, sizeof id, "kube:pod:%s:succeeded", uid);
        common(&out[n++], pod, GH_KIND_POD_SUCCEEDED, ts_of(fin, now), id);
        return n;
    }
    /* started: phase became Running */
    if (!strcmp(phase, "Running") && !(ophase && !strcmp(ophase, "Running")) && n < max) {
        const char *st = gh_json_str(json_object_get(pod, "status"), "startTime");
        snprintf(id, sizeof id, "kube:pod:%s:started", uid);
        common(&out[n++], pod, GH_KIND_POD_STARTED, ts_of(st, now), id);
    }
    return n;
}

/* The condition of obj that says it is over ("Complete"/"Succeeded"/
 * "Completed" or "Failed", status "True"), NULL when none; *failed and *when
 * (its lastTransitionTime) set when found. */
static const json_t *finished_condition(const json_t *obj, bool *failed)
{
    size_t i;
    json_t *c;
    json_array_foreach(jget2(obj, "status", "conditions"), i, c) {
        const char *t = gh_json_str(c, "type"), *st = gh_json_str(c, "status");
        if (!t || !st || strcmp(st, "True") != 0)
            continue;
        if (!strcmp(t, "Complete") || !strcmp(t, "Succeeded") || !strcmp(t, "Completed")) {
            *failed = false;
            return c;
        }
        if (!strcmp(t, "Failed")) {
            *failed = true;
            return c;
        }
    }
    /* a Volcano Job says it in status.state.phase */
    const json_t *state = jget2(obj, "status", "state");
    const char *ph = gh_json_str(state, "phase");
    if (ph && (!strcmp(ph, "Completed") || !strcmp(ph, "Failed") || !strcmp(ph, "Aborted") ||
               !strcmp(ph, "Terminated"))) {
        *failed = strcmp(ph, "Completed") != 0;
        return state;
    }
    return NULL;
}

size_t gh_kube_job_signals(const json_t *old, const json_t *obj, const char *job, int64_t now,
                           struct gh_signal *out, size_t max)
{
    bool failed, ofailed;
    const json_t *c = obj ? finished_condition(obj, &failed) : NULL;
    if (max == 0 || !job || !c || (old && finished_condition(old, &ofailed)))
        return 0;
    const char *uid = json_string_value(jget2(obj, "metadata", "uid"));
    char id[400];
    snprintf(id, sizeof id, "kube:job:%s:finished", uid ? uid : job);
    struct gh_signal *s = &out[0];
    gh_signal_init(s);
    s->ts_ns = ts_of(gh_json_str(c, "lastTransitionTime"), now);
    s->source = GH_SRC_KUBE;
    s->kind = GH_KIND_JOB_FINISHED;
    s->job_state = failed ? GH_JOB_FAILED : GH_JOB_COMPLETE;
    set(&s->job, job);
    set(&s->id, id);
    char msg[300];
    const char *ph = gh_json_str(c, "phase");
    snprintf(msg, sizeof msg, "%s %s%s%s%s", ph ? "phase" : "condition",
             ph ? ph : gh_json_str(c, "type"), ph ? "" : "=True",
             gh_json_str(c, "reason") ? ": " : "",
             gh_json_str(c, "reason") ? gh_json_str(c, "reason") : "");
    set(&s->msg, msg);
    return 1;
}

/* The Ready condition: "True", "False", "Unknown" or NULL; *when its
 * lastTransitionTime. */
static const char *ready(const json_t *node, const char **when)
{
    size_t i;
    json_t *c;
    *when = NULL;
    json_array_foreach(jget2(node, "status", "conditions"), i, c) {
        const char *t = gh_json_str(c, "type");
        if (t && !strcmp(t, "Ready")) {
            *when = gh_json_str(c, "lastTransitionTime");
            return gh_json_str(c, "status");
        }
    }
    return NULL;
}

size_t gh_kube_node_signals(const json_t *old, const json_t *node, int64_t now,
                            struct gh_signal *out, size_t max)
{
    if (max == 0)
        return 0;
    const char *when, *owhen;
    const char *r = ready(node, &when);
    const char *o = old ? ready(old, &owhen) : NULL;
    const char *name = json_string_value(jget2(node, "metadata", "name"));
    const char *uid = json_string_value(jget2(node, "metadata", "uid"));
    if (!r || !name)
        return 0;
    bool up = !strcmp(r, "True");
    bool was_up = o && !strcmp(o, "True");
    enum gh_kind kind;
    if (!up && (was_up || !old))
        kind = GH_KIND_NODE_NOT_READY;
    else if (up && o && !was_up)
        kind = GH_KIND_NODE_READY;
    else
        return 0;
    char id[400];
    snprintf(id, sizeof id, "kube:node:%s:%s:%s", uid ? uid : name, up ? "ready" : "notready",
             when ? when : "");
    struct gh_signal *s = &out[0];
    gh_signal_init(s);
    s->ts_ns = ts_of(when, now);
    s->source = GH_SRC_KUBE;
    s->kind = kind;
    set(&s->node, name);
    set(&s->id, id);
    char msg[200];
    snprintf(msg, sizeof msg, "node condition Ready=%s", r);
    set(&s->msg, msg);
    return 1;
}

/* ---- Node conditions other agents set */

/* Not another agent's findings: the kubelet's own conditions and gpuheal's. */
static const char *const not_watchable[] = {
    "Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "GPUHealthy",
};

/* A condition type as Kubernetes validates it: a qualified name (an
 * optional DNS-subdomain prefix and '/', a name of [A-Za-z0-9._-] that
 * begins and ends alphanumeric), capped here at GH_NODE_CONDITION_NAME_MAX. */
static bool condition_type_ok(const char *s, size_t n)
{
    if (n == 0 || n >= GH_NODE_CONDITION_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '_' && c != '-' && c != '/')
            return false;
        if (!alnum && (i == 0 || i == n - 1))
            return false;
    }
    return true;
}

bool gh_node_conditions_has(const struct gh_node_conditions *c, const char *type)
{
    for (int i = 0; type && i < c->n; i++)
        if (!strcmp(c->names[i], type))
            return true;
    return false;
}

int gh_node_conditions_parse(const char *list, struct gh_node_conditions *out, struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    if (!list || !*list || !strcmp(list, "none"))
        return GH_OK;
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (!condition_type_ok(p, n))
            return gh_err_set(
                err, GH_EINVAL,
                "--node-conditions: \"%.*s\" is not a Node condition type (1 to %d "
                "of A-Z a-z 0-9 . _ - /, beginning and ending with a letter or digit)",
                (int)(n < 80 ? n : 80), p, GH_NODE_CONDITION_NAME_MAX - 1);
        char name[GH_NODE_CONDITION_NAME_MAX];
        memcpy(name, p, n);
        name[n] = '\0';
        for (size_t i = 0; i < sizeof not_watchable / sizeof not_watchable[0]; i++)
            if (!strcmp(name, not_watchable[i]))
                return gh_err_set(err, GH_EINVAL,
                                  "--node-conditions: \"%s\" is %s own condition, not another "
                                  "agent's finding",
                                  name, strcmp(name, "GPUHealthy") ? "the kubelet's" : "gpuheal's");
        if (!gh_node_conditions_has(out, name)) {
            if (out->n >= GH_NODE_CONDITIONS_MAX)
                return gh_err_set(err, GH_EINVAL, "--node-conditions: more than %d conditions",
                                  GH_NODE_CONDITIONS_MAX);
            memcpy(out->names[out->n++], name, n + 1);
        }
        if (!end)
            return GH_OK;
        p = end + 1;
    }
}

/* The condition of node with type t, NULL when none. */
static const json_t *condition_of(const json_t *node, const char *t)
{
    size_t i;
    json_t *c;
    json_array_foreach(jget2(node, "status", "conditions"), i, c)
    {
        const char *ct = gh_json_str(c, "type");
        if (ct && !strcmp(ct, t))
            return c;
    }
    return NULL;
}

static int cond_status_of(const char *st)
{
    if (!st)
        return -1;
    if (!strcmp(st, "True"))
        return GH_COND_TRUE;
    if (!strcmp(st, "False"))
        return GH_COND_FALSE;
    if (!strcmp(st, "Unknown"))
        return GH_COND_UNKNOWN;
    return -1;
}

size_t gh_kube_node_condition_signals(const json_t *old, const json_t *node,
                                      const struct gh_node_conditions *watch, int64_t now,
                                      struct gh_signal *out, size_t max)
{
    static const char *const st_names[] = {"True", "False", "Unknown"};
    const char *name = json_string_value(jget2(node, "metadata", "name"));
    const char *uid = json_string_value(jget2(node, "metadata", "uid"));
    size_t n = 0;
    if (max > GH_KUBE_SIGNALS_MAX)
        max = GH_KUBE_SIGNALS_MAX;
    if (!name || !watch)
        return 0;
    for (int w = 0; w < watch->n && n < max; w++) {
        const char *type = watch->names[w];
        const json_t *c = condition_of(node, type);
        const json_t *oc = old ? condition_of(old, type) : NULL;
        int st = c ? cond_status_of(gh_json_str(c, "status")) : -1;
        int ost = oc ? cond_status_of(gh_json_str(oc, "status")) : -1;
        const json_t *from = c;
        if (st < 0 && ost == GH_COND_TRUE) {
            st = GH_COND_FALSE; /* removed while True: the problem is no longer reported */
            from = oc;
        } else if (st < 0 || st == ost || (ost < 0 && st != GH_COND_TRUE)) {
            continue;
        }
        const char *when = gh_json_str(from, "lastTransitionTime");
        char id[400];
        snprintf(id, sizeof id, "kube:node:%s:cond:%s:%s:%s%s", uid ? uid : name, type,
                 st_names[st], when ? when : "", from == oc ? ":removed" : "");
        gh_utf8_trim(id); /* a bounded copy of the API server's text: cut at a whole
                             character, or the signal could not be encoded */
        struct gh_signal *s = &out[n++];
        gh_signal_init(s);
        s->ts_ns = ts_of(when, now);
        s->source = GH_SRC_KUBE;
        s->kind = GH_KIND_NODE_CONDITION;
        s->cond_status = (enum gh_cond_status)st;
        set(&s->node, name);
        set(&s->id, id);
        set(&s->condition, type);
        const char *reason = gh_json_str(from, "reason");
        reason = from == oc ? "ConditionRemoved" : reason && *reason ? reason : NULL;
        set(&s->reason, reason);
        /* the audit trail's line: what the Node said, as kubectl shows it */
        const char *msg = gh_json_str(from, "message");
        char line[1024];
        snprintf(line, sizeof line, "%s=%s%s%s%s%s%s", type, st_names[st], reason ? " (" : "",
                 reason ? reason : "", reason ? ")" : "", msg && *msg ? ": " : "",
                 msg && *msg ? msg : "");
        gh_utf8_trim(line);
        set(&s->msg, line);
    }
    return n;
}

/* ---- Events */

bool gh_kube_event_is_own(const json_t *ev)
{
    const char *rc = gh_json_str(ev, "reportingController");
    const char *comp = gh_json_str(json_object_get(ev, "deprecatedSource"), "component");
    return (rc && !strncmp(rc, "gpuheal", 7)) || (comp && !strncmp(comp, "gpuheal", 7));
}

/* How many times the Event was seen: series.count, else deprecatedCount,
 * else 1. */
static long event_count(const json_t *ev)
{
    json_t *c = jget2(ev, "series", "count");
    if (!json_is_integer(c))
        c = json_object_get(ev, "deprecatedCount");
    return json_is_integer(c) && json_integer_value(c) > 0 ? (long)json_integer_value(c) : 1;
}

/* When the Event was last observed: series.lastObservedTime, eventTime,
 * deprecatedLastTimestamp, else dflt. */
static int64_t event_time(const json_t *ev, int64_t dflt)
{
    const char *s = gh_json_str(json_object_get(ev, "series"), "lastObservedTime");
    if (!s)
        s = gh_json_str(ev, "deprecatedLastTimestamp");
    if (!s)
        s = gh_json_str(ev, "eventTime");
    return ts_of(s, dflt);
}

size_t gh_kube_event_signals(const json_t *old, const json_t *ev, const json_t *pod, int64_t now,
                             int64_t max_age_ns, struct gh_signal *out, size_t max)
{
    if (max == 0 || !ev || gh_kube_event_is_own(ev))
        return 0;
    long count = event_count(ev);
    if (old && event_count(old) >= count)
        return 0; /* a resync, or a change that is not a new occurrence */
    const json_t *reg = json_object_get(ev, "regarding");
    const char *kind = gh_json_str(reg, "kind"), *name = gh_json_str(reg, "name"), *reason = gh_json_str(ev, "reason");
    const char *uid = json_string_value(jget2(ev, "metadata", "uid"));
    if (!kind || !name || !reason || !uid)
        return 0;
    int64_t ts = event_time(ev, now);
    if (max_age_ns > 0 && ts < now - max_age_ns)
        return 0; /* history from before this controller looked */
    enum gh_kind k;
    bool on_pod = false;
    if (!strcmp(kind, "Node") && !strcmp(reason, "NodeNotReady"))
        k = GH_KIND_NODE_NOT_READY;
    else if (!strcmp(kind, "Node") && (!strcmp(reason, "NodeReady") || !strcmp(reason, "Rebooted")))
        k = GH_KIND_NODE_READY;
    else if ((on_pod = !strcmp(kind, "Pod") && !strcmp(reason, "Evicted")))
        k = GH_KIND_POD_FAILED;
    else
        return 0;
    struct gh_signal *s = &out[0];
    char id[400];
    const char *note = gh_json_str(ev, "note");
    char msg[600];
    snprintf(msg, sizeof msg, "Event %s: %s", reason, note ? note : "");
    if (on_pod) {
        /* the pod informer sees the same failure (phase Failed, reason
         * Evicted) under this id: one signal, whichever comes first */
        const char *puid = gh_json_str(reg, "uid");
        if (!puid && pod)
            puid = json_string_value(jget2(pod, "metadata", "uid"));
        if (puid)
            snprintf(id, sizeof id, "kube:pod:%s:failed", puid);
        else
            snprintf(id, sizeof id, "kube:event:%s:%ld", uid, count);
        if (pod) {
            common(s, pod, k, ts, id);
        } else {
            gh_signal_init(s);
            s->ts_ns = ts;
            s->source = GH_SRC_KUBE;
            s->kind = k;
            set(&s->namespace_, gh_json_str(reg, "namespace"));
            set(&s->pod, name);
            set(&s->id, id);
        }
        set(&s->reason, reason);
    } else {
        snprintf(id, sizeof id, "kube:event:%s:%ld", uid, count);
        gh_signal_init(s);
        s->ts_ns = ts;
        s->source = GH_SRC_KUBE;
        s->kind = k;
        set(&s->node, name);
        set(&s->id, id);
    }
    set(&s->msg, msg);
    return 1;
}

/* ---- Node labels (the components nodes share) */

size_t gh_kube_node_labels(const json_t *node, bool (*wanted)(const char *key), const char **keys,
                           const char **values, size_t cap)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(jget2(node, "metadata", "labels"), k, v)
    {
        if (n == cap)
            break;
        if (json_is_string(v) && wanted(k)) {
            keys[n] = k;
            values[n++] = json_string_value(v);
        }
    }
    return n;
}

bool gh_kube_node_labels_changed(const json_t *old, const json_t *node,
                                 bool (*wanted)(const char *key))
{
    const char *ka[GH_KUBE_NODE_LABELS_MAX], *va[GH_KUBE_NODE_LABELS_MAX];
    const char *kb[GH_KUBE_NODE_LABELS_MAX], *vb[GH_KUBE_NODE_LABELS_MAX];
    size_t na = old ? gh_kube_node_labels(old, wanted, ka, va, GH_KUBE_NODE_LABELS_MAX) : 0;
    size_t nb = node ? gh_kube_node_labels(node, wanted, kb, vb, GH_KUBE_NODE_LABELS_MAX) : 0;
    if (na != nb)
        return true;
    /* as many on both sides, keys unique on each: the same when each of
     * node's is old's with the same value */
    json_t *ol = jget2(old, "metadata", "labels");
    for (size_t i = 0; i < nb; i++) {
        const char *ov = json_string_value(json_object_get(ol, kb[i]));
        if (!ov || strcmp(ov, vb[i]) != 0)
            return true;
    }
    return false;
}
