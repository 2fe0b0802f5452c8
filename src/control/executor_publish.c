/* executor_publish.c - the Incident object and the Kubernetes Events the
 * executor's workers publish about an incident (executor_publish.h). */
#include "control/executor_publish.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "kube/api.h"
#include "kube/events.h"
#include "signal/taxonomy.h"

#define EVIDENCE_CR_MAX 100
/* affected nodes named on the object: a fleet-wide cause may span
 * thousands (253 bytes each at most); affectedNodesCount says how many
 * there were, the audit store keeps them all */
#define AFFECTED_CR_MAX 256

/* Splits "ns/name" (a job without a namespace is in "default"). */
void gh_exec_split_job(const char *job, char *ns, size_t nscap, char *name, size_t namecap)
{
    const char *slash = job ? strchr(job, '/') : NULL;
    if (slash) {
        snprintf(ns, nscap, "%.*s", (int)(slash - job), job);
        snprintf(name, namecap, "%s", slash + 1);
    } else {
        snprintf(ns, nscap, "default");
        snprintf(name, namecap, "%s", job ? job : "");
    }
}

const char *gh_exec_cr_result(const char *r)
{
    if (!r)
        return "Pending";
    if (!strcmp(r, "succeeded") || !strcmp(r, "noop"))
        return "Succeeded";
    if (!strcmp(r, "not_configured"))
        return "NotConfigured"; /* the node's agent has no command for it: nothing was tried */
    if (!strcmp(r, "failed") || !strcmp(r, "interrupted") || !strcmp(r, "timed_out"))
        return "Failed";
    if (!strcmp(r, "requested"))
        return "Running"; /* the node agent has it; its outcome is recorded when it answers */
    if (!strcmp(r, "denied"))
        return "Blocked";
    if (!strcmp(r, "awaiting_approval") || !strcmp(r, "pending"))
        return "Pending";
    return "Skipped";
}

/* A cause several nodes share (spec section 3, 2026-12-07): scope,
 * component, and the first AFFECTED_CR_MAX affected nodes with their
 * count. */
static void shared_cause_spec(json_t *spec, const json_t *inc)
{
    const char *scope = gh_json_str(inc, "scope"), *component = gh_json_str(inc, "component");
    if (!scope)
        return;
    json_object_set_new(spec, "scope", json_string(scope));
    if (component)
        json_object_set_new(spec, "component", json_string(component));
    json_t *an = json_object_get(inc, "affected_nodes");
    if (!json_is_array(an))
        return;
    json_t *names = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(an, i, n)
    {
        if (i >= AFFECTED_CR_MAX)
            break;
        if (json_is_string(n))
            json_array_append(names, n);
    }
    json_object_set_new(spec, "affectedNodes", names);
    json_object_set_new(spec, "affectedNodesCount", json_integer((json_int_t)json_array_size(an)));
}

/* What `kubectl get incidents` shows of the actions and the GPU: the
 * actions as one comma-separated string (a printer column of an array
 * prints its JSON), the GPU's index, else the PCI bus id of the first
 * evidence that names one (a kernel-log XID names only the bus). */
static void columns(json_t *spec, const json_t *inc)
{
    char text[512] = "";
    size_t used = 0, i;
    json_t *a;
    json_array_foreach(json_object_get(spec, "actions"), i, a)
    {
        const char *name = json_string_value(a);
        if (!name)
            continue;
        int w = snprintf(text + used, sizeof text - used, "%s%s", used ? "," : "", name);
        if (w < 0 || (size_t)w >= sizeof text - used)
            break;
        used += (size_t)w;
    }
    json_object_set_new(spec, "actionsSummary", json_string(text));
    json_t *gpu = json_object_get(inc, "gpu");
    if (json_is_integer(gpu)) {
        snprintf(text, sizeof text, "%lld", (long long)json_integer_value(gpu));
        json_object_set_new(spec, "device", json_string(text));
        return;
    }
    const char *pci = gh_exec_incident_pci(inc);
    if (pci)
        json_object_set_new(spec, "device", json_string(pci));
}

const char *gh_exec_incident_pci(const json_t *inc)
{
    const char *blamed = gh_json_str(inc, "node");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(inc, "evidence"), i, e)
    {
        const char *pci = gh_json_str(e, "pci");
        const char *node = gh_json_str(e, "node");
        if (pci && *pci && strlen(pci) < 32 && node && blamed && !strcmp(node, blamed))
            return pci;
    }
    return NULL;
}

static json_t *incident_spec(const json_t *inc, const char *mode)
{
    json_t *spec = json_object();
    if (!spec)
        return NULL;
    const char *keys[][2] = {{"id", "id"},
                             {"class", "class"},
                             {"node", "node"},
                             {"job", "job"},
                             {"rule", "rule"},
                             {"first_ts", "firstTime"},
                             {"decided_ts", "decidedTime"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = gh_json_str(inc, keys[i][0]);
        if (v)
            json_object_set_new(spec, keys[i][1], json_string(v));
    }
    char reason[2048];
    snprintf(reason, sizeof reason, "%s",
             gh_json_str(inc, "reason") ? gh_json_str(inc, "reason") : "");
    json_object_set_new(spec, "reason", json_string(reason));
    json_t *gpu = json_object_get(inc, "gpu");
    if (json_is_integer(gpu))
        json_object_set(spec, "gpu", gpu);
    json_t *acts = json_object_get(inc, "actions");
    json_object_set_new(spec, "actions",
                        json_is_array(acts) && json_array_size(acts) ? json_deep_copy(acts)
                                                                     : json_pack("[s]", "none"));
    columns(spec, inc);
    json_t *ck = json_object_get(inc, "checkpoint");
    if (json_is_object(ck))
        json_object_set_new(spec, "checkpoint", json_deep_copy(ck));
    json_t *impact = json_object_get(inc, "impact");
    if (json_is_object(impact))
        json_object_set_new(spec, "impact", json_deep_copy(impact));
    json_t *ev = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(inc, "evidence"), i, e)
    {
        if (i >= EVIDENCE_CR_MAX)
            break;
        json_t *c = json_deep_copy(e);
        const char *msg = gh_json_str(c, "msg");
        if (msg && strlen(msg) > 4000) {
            size_t cut = 4000; /* not inside a UTF-8 sequence */
            while (cut > 0 && ((unsigned char)msg[cut] & 0xC0) == 0x80)
                cut--;
            json_object_set_new(c, "msg", json_stringn(msg, cut));
        }
        json_array_append_new(ev, c);
    }
    json_object_set_new(spec, "evidence", ev);
    json_object_set_new(spec, "dryRun", json_boolean(mode && !strcmp(mode, "dry_run")));
    shared_cause_spec(spec, inc);
    return spec;
}

static void rfc_now(const struct gh_exec_pub *p, char *buf)
{
    int64_t t = gh_clock_now(p->clock);
    gh_time_format_rfc3339(t - t % GH_NS_PER_S, buf, GH_RFC3339_MAX);
    char *dot = strchr(buf, '.');
    if (dot)
        memcpy(dot, "Z", 2);
}

/* Creates or updates the Incident object (server-side apply) and its
 * status. Failures are reported in the audit trail's detail, never fatal:
 * the store is the record, the object its view. */
void gh_exec_publish_incident(const struct gh_exec_pub *p, const json_t *inc, const char *mode,
                              const char *phase, const json_t *status_actions, const char *message,
                              struct gh_exec_report *rep)
{
    const char *id = gh_json_str(inc, "id");
    if (!id)
        return;
    struct gh_err err = {{0}};
    int rc = GH_OK;
    json_t *labels = json_pack("{s:s}", "gpuheal.io/class",
                               gh_json_str(inc, "class") ? gh_json_str(inc, "class") : "unknown");
    const char *node = gh_json_str(inc, "node");
    if (labels && node && strlen(node) <= 63)
        json_object_set_new(labels, "gpuheal.io/node", json_string(node));
    const char *scope = gh_json_str(inc, "scope");
    if (labels && scope &&
        strlen(scope) <= 63) /* kubectl get incidents -l gpuheal.io/scope=switch */
        json_object_set_new(labels, "gpuheal.io/scope", json_string(scope));
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion", "gpuheal.io/v1alpha1",
                            "kind", "Incident", "metadata", "name", id, "labels", labels, "spec",
                            incident_spec(inc, mode));
    struct gh_kube_ref ref = {&gh_kube_res_incidents, NULL, id};
    rc = obj ? gh_kube_patch(p->c, &ref, NULL, GH_KUBE_PATCH_APPLY, obj, NULL, NULL, &err)
             : gh_err_set(&err, GH_ENOMEM, "out of memory");
    json_decref(obj);
    char ts[GH_RFC3339_MAX];
    rfc_now(p, ts);
    json_t *st = json_pack("{s:{s:s, s:s}}", "status", "phase", phase, "message",
                           message ? message : "");
    json_t *s = json_object_get(st, "status");
    if (status_actions)
        json_object_set(s, "actions", (json_t *)status_actions);
    if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed") || !strcmp(phase, "Skipped") ||
        !strcmp(phase, "NotConfigured"))
        json_object_set_new(s, "completionTime", json_string(ts));
    if (!rc)
        rc = st ? gh_kube_patch(p->c, &ref, "status", GH_KUBE_PATCH_MERGE, st, NULL, NULL, &err)
                : gh_err_set(&err, GH_ENOMEM, "out of memory");
    json_decref(st);
    if (rc && rep && !rep->warning[0])
        snprintf(rep->warning, sizeof rep->warning, "Incident %s: %.250s", id, err.msg);
}

/* An Event about the object of type res named ns/name (ns NULL for a
 * cluster-scoped one), with its uid so that `kubectl describe` shows it. */
void gh_exec_event(const struct gh_exec_pub *p, const struct gh_kube_res *res, const char *ns,
                   const char *name, const char *type, const char *reason, const char *action,
                   const char *note)
{
    struct gh_kube_event_spec s = {
        .regarding_name = name,
        .regarding_ns = ns,
        .type = type,
        .reason = reason,
        .action = action,
        .note = note,
        .reporting_instance = p->identity,
    };
    (void)gh_kube_event_post_about(p->c, res, &s, NULL, NULL, NULL);
}

/* The Warning Event reason of a decision's class: what the fault is, so
 * that `kubectl describe job` never reads "GPUFault" for an application's
 * own error or a host's kernel deadlock. The GPU's own classes (the chip,
 * its memory, its links, its thermals) keep "GPUFault". */
const char *gh_exec_event_reason(int cls)
{
    switch (cls) {
    case GH_CLASS_GPU_HARDWARE:
    case GH_CLASS_GPU_MEMORY:
    case GH_CLASS_INTERCONNECT:
    case GH_CLASS_THERMAL_POWER: return "GPUFault";
    case GH_CLASS_STRAGGLER: return "Straggler";
    case GH_CLASS_SILENT_DATA_CORRUPTION: return "DataCorruption";
    case GH_CLASS_FLAPPING_NODE: return "FlappingNode";
    case GH_CLASS_APPLICATION: return "ApplicationFault";
    case GH_CLASS_NETWORK: return "NetworkFault";
    default: return "NodeFault";
    }
}

void gh_exec_shared_cause_note(const struct gh_decision *d, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "%s: shared cause: scope %s, component %.400s, %zu nodes affected; none of them is "
             "cordoned, drained, reset or rebooted for it: look at what they share",
             d->id ? d->id : "?", gh_scope_name(d->scope),
             d->component ? d->component : "unknown (no Node label names it)", d->n_affected);
}

/* Events about a decision on the node, the job and the pods in the
 * evidence, and on the Incident object itself. A dry-run decision says so
 * first: nothing was done, whatever the reason sentence reads like. */
void gh_exec_decision_events(const struct gh_exec_pub *p, const struct gh_decision *d,
                             const char *mode, const char *summary)
{
    const char *id = d->id, *node = d->node, *job = d->job;
    bool dry = mode && !strcmp(mode, "dry_run");
    const char *reason = gh_exec_event_reason(d->cls);
    char note[1024], diagnosed[64];
    snprintf(diagnosed, sizeof diagnosed, "%sDiagnosed", reason);
    snprintf(note, sizeof note, "%s: %s%s", id ? id : "?", dry ? "dry run, no action taken: " : "",
             summary);
    if (id)
        gh_exec_event(p, &gh_kube_res_incidents, NULL, id, "Warning", "IncidentDecided", "Decide",
                      note);
    if (id && d->scope != GH_SCOPE_UNSAID && !node) {
        /* one Event for the whole group, on the Incident: never one per node */
        char shared[1024];
        gh_exec_shared_cause_note(d, shared, sizeof shared);
        gh_exec_event(p, &gh_kube_res_incidents, NULL, id, "Warning", "SharedCause", "Decide",
                      shared);
    }
    if (node)
        gh_exec_event(p, &gh_kube_res_nodes, NULL, node, "Warning", reason, "Decide", note);
    if (job) {
        char ns[64], name[254];
        gh_exec_split_job(job, ns, sizeof ns, name, sizeof name);
        gh_exec_event(p, &gh_kube_res_jobs, ns, name, "Warning", reason, "Decide", note);
    }
    for (int i = 0; i < d->n_pods; i++)
        gh_exec_event(p, &gh_kube_res_pods, d->pods[i].ns, d->pods[i].name, "Warning", diagnosed,
                      "Decide", note);
}
