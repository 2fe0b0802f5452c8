/* job_ops.c - the job actions: retry in place (delete failed pods for the
 * job's controller to recreate, unless a Volcano Job's own policy acts on
 * pod failures) and restart from checkpoint (a job of one of the kinds of
 * job_kinds.h recreated away from blamed nodes, told where to resume by
 * the ConfigMap <job>-gpuheal-resume; docs/resume-contract.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "control/actuator.h"
#include "control/job_inplace.h"
#include "control/job_kinds.h"
#include "control/tenancy.h"
#include "kube/api.h"

#define AVOID_MAX 64
#define TEMPLATES_MAX 32

static const char *nz(const char *s) { return s ? s : ""; }

/* ---- retry in place */

struct retry {
    const struct gh_act_ctx *x;
    const char *volcano; /* a Volcano Job whose policies act on pod failures: its pods are its */
    int deleted, gone, failed, left;
    char names[300];
    size_t used;
    struct gh_kube_status st;
    struct gh_err *err;
};

static void del_pod(struct retry *rt, const char *ns, const char *name, const char *uid)
{
    struct gh_kube_ref ref = {&gh_kube_res_pods, ns, name};
    struct gh_kube_delete_opts o = {.uid = uid, .grace_period_s = -1};
    int rc = gh_kube_delete(rt->x->c, &ref, &o, &rt->st, rt->err);
    if (rc == GH_OK) {
        rt->deleted++;
        if (rt->used < sizeof rt->names) {
            int w = snprintf(rt->names + rt->used, sizeof rt->names - rt->used, "%s%s",
                             rt->used ? ", " : "", name);
            rt->used += w > 0 ? (size_t)w : 0;
        }
    } else if (rc == GH_ENOTFOUND || rt->st.kind == GH_KUBE_R_CONFLICT) {
        rt->gone++; /* gone, or a new pod of the same name: not ours to delete */
    } else {
        rt->failed++;
    }
}

static int retry_item(void *ud, json_t *pod)
{
    struct retry *rt = ud;
    const char *phase = gh_kube_json_str(pod, "status", "phase");
    if (!phase || strcmp(phase, "Failed") != 0 ||
        json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
        return GH_OK;
    const char *vj = gh_json_str(pod, "metadata", "labels", "volcano.sh/job-name");
    if (rt->volcano && vj && !strcmp(vj, rt->volcano)) {
        rt->left++; /* Volcano's policy acts on it */
        return GH_OK;
    }
    del_pod(rt, gh_kube_meta_namespace(pod), gh_kube_meta_name(pod), gh_kube_meta_uid(pod));
    return GH_OK;
}

/* Whether one of a Volcano Job's lifecycle policies (policy: a
 * LifecyclePolicy, borrowed) acts on a failed pod: the events PodFailed,
 * TaskFailed or any ("*"), or an exit code. Into why: "PodFailed ->
 * RestartJob". */
static bool volcano_acts(const json_t *policy, char *why, size_t cap)
{
    static const char *const ev[] = {"PodFailed", "TaskFailed", "*"};
    const char *action = gh_json_str(policy, "action");
    const char *e = gh_json_str(policy, "event");
    bool acts = false;
    for (size_t i = 0; e && i < sizeof ev / sizeof ev[0]; i++)
        acts = acts || !strcmp(e, ev[i]);
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(policy, "events"), k, v)
    {
        for (size_t i = 0; json_is_string(v) && i < sizeof ev / sizeof ev[0]; i++)
            if (!strcmp(json_string_value(v), ev[i])) {
                acts = true;
                e = ev[i];
            }
    }
    if (json_is_integer(json_object_get(policy, "exitCode"))) {
        acts = true;
        e = "exitCode";
    }
    if (acts)
        snprintf(why, cap, "%s -> %s", e ? e : "?", action ? action : "?");
    return acts;
}

/* When ns/name is a Volcano Job with a policy (the job's or a task's) that
 * acts on failed pods: true, and which one into why. A Job of another
 * kind, or none: false. */
static bool volcano_policy(const struct gh_act_ctx *x, const char *ns, const char *name, char *why,
                           size_t cap)
{
    struct gh_kube_ref ref = {&gh_job_res_vcjobs, ns, name};
    json_t *vj = NULL;
    bool acts = false;
    if (gh_kube_get(x->c, &ref, &vj, NULL, NULL) != GH_OK)
        return false;
    size_t i, k;
    json_t *p, *t;
    json_t *spec = json_object_get(vj, "spec");
    json_array_foreach(json_object_get(spec, "policies"), i, p)
        acts = acts || volcano_acts(p, why, cap);
    json_array_foreach(json_object_get(spec, "tasks"), k, t)
        json_array_foreach(json_object_get(t, "policies"), i, p)
            acts = acts || volcano_acts(p, why, cap);
    json_decref(vj);
    return acts;
}

int gh_act_retry_in_place(const struct gh_act_ctx *x, const char *ns, const char *name,
                          const char *const *pods, int npods, struct gh_act_result *r,
                          struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    struct retry rt = {.x = x, .err = err};
    gh_kube_status_reset(&rt.st);
    int rc = GH_OK;
    /* a Volcano Job whose own policy acts on failed pods (RestartJob,
     * RestartTask, AbortJob, ...) has acted or will: its pods are left to
     * Volcano, whose policy and maxRetry are the job's */
    char vwhy[160] = "";
    if (ns && name && volcano_policy(x, ns, name, vwhy, sizeof vwhy))
        rt.volcano = name;
    /* the job's pods, by the label its controller sets: a Job's, a
     * JobSet's (a TrainJob's too), a Kubeflow training job's (PyTorchJob,
     * MPIJob), a LeaderWorkerSet's, a Volcano Job's */
    static const char *const keys[] = {"batch.kubernetes.io/job-name",
                                       "jobset.sigs.k8s.io/jobset-name",
                                       "training.kubeflow.org/job-name",
                                       "leaderworkerset.sigs.k8s.io/name", "volcano.sh/job-name"};
    for (size_t k = 0; ns && name && k < sizeof keys / sizeof keys[0]; k++) {
        char sel[320];
        snprintf(sel, sizeof sel, "%s=%s", keys[k], name);
        struct gh_kube_list_opts lo = {.label_selector = sel};
        struct gh_kube_ref ref = {&gh_kube_res_pods, ns, NULL};
        rc = gh_kube_list_all(x->c, &ref, &lo, retry_item, &rt, NULL, 0, &rt.st, err);
        if (rc) {
            gh_act_result_api_fail(r, &rt.st, err);
            gh_act_result_set(r, "failed", "could not list the pods of %s/%s", ns, name);
            return rc;
        }
    }
    /* the pods the evidence names, when they are still there and failed */
    for (int i = 0; i < npods; i++) {
        char pns[64], pname[254];
        const char *slash = strchr(pods[i], '/');
        if (!slash)
            continue;
        snprintf(pns, sizeof pns, "%.*s", (int)(slash - pods[i]), pods[i]);
        snprintf(pname, sizeof pname, "%s", slash + 1);
        struct gh_kube_ref ref = {&gh_kube_res_pods, pns, pname};
        json_t *p = NULL;
        if (gh_kube_get(x->c, &ref, &p, NULL, NULL) == GH_OK)
            retry_item(&rt, p);
        json_decref(p);
    }
    if (rt.failed) {
        gh_act_result_api_fail(r, &rt.st, err);
        gh_act_result_set(r, "failed", "deleted %d failed pods, %d could not be deleted",
                          rt.deleted, rt.failed);
        return GH_EIO;
    }
    gh_act_result_api_ok(r, 200);
    if (rt.deleted == 0 && rt.volcano)
        gh_act_result_set(r, "skipped",
                          "left to Volcano: Job.batch.volcano.sh %s/%s has its own "
                          "policy for failed pods (%s); %d failed pod%s not deleted",
                          ns, name, vwhy, rt.left, rt.left == 1 ? "" : "s");
    else if (rt.deleted == 0)
        gh_act_result_set(r, "noop", "no failed pod left%s%s%s (its controller already replaced "
                          "them)", ns && name ? " in " : "", ns && name ? ns : "",
                          ns && name ? "/..." : "");
    else
        gh_act_result_set(r, "succeeded", "deleted %d failed pod%s (%s) for the job's controller "
                          "to recreate", rt.deleted, rt.deleted == 1 ? "" : "s", rt.names);
    return GH_OK;
}

/* ---- restart from checkpoint */

/* Splits "a,b,c" into out (copies into buf), adding what is not there. */
static int add_avoid(const char **out, int n, const char *name)
{
    if (!name || !*name || n >= AVOID_MAX)
        return n;
    for (int i = 0; i < n; i++)
        if (strcmp(out[i], name) == 0)
            return n;
    out[n] = name;
    return n + 1;
}

/* Adds to every nodeSelectorTerm of the pod template a requirement that the
 * node's name is not in avoid (replacing the one an earlier restart added). */
static int avoid_nodes(json_t *tspec, json_t *avoid)
{
    json_t *aff = json_object_get(tspec, "affinity");
    if (!json_is_object(aff)) {
        aff = json_object();
        json_object_set_new(tspec, "affinity", aff);
    }
    json_t *na = json_object_get(aff, "nodeAffinity");
    if (!json_is_object(na)) {
        na = json_object();
        json_object_set_new(aff, "nodeAffinity", na);
    }
    json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!json_is_object(req)) {
        req = json_object();
        json_object_set_new(na, "requiredDuringSchedulingIgnoredDuringExecution", req);
    }
    json_t *terms = json_object_get(req, "nodeSelectorTerms");
    if (!json_is_array(terms) || json_array_size(terms) == 0) {
        terms = json_array();
        json_array_append_new(terms, json_object());
        json_object_set_new(req, "nodeSelectorTerms", terms);
    }
    size_t i;
    json_t *term;
    json_array_foreach(terms, i, term) {
        json_t *mf = json_object_get(term, "matchFields");
        if (!json_is_array(mf)) {
            mf = json_array();
            json_object_set_new(term, "matchFields", mf);
        }
        /* the API allows one value per metadata.name requirement: one
         * requirement per node (ANDed), replacing earlier restarts' */
        json_t *keep = json_array();
        if (!keep)
            return GH_ENOMEM;
        size_t k;
        json_t *e;
        json_array_foreach(mf, k, e) {
            const char *key = gh_json_str(e, "key");
            const char *op = gh_json_str(e, "operator");
            if (!(key && op && !strcmp(key, "metadata.name") && !strcmp(op, "NotIn")))
                json_array_append(keep, e);
        }
        json_array_foreach(avoid, k, e) {
            json_t *req1 = json_pack("{s:s, s:s, s:[O]}", "key", "metadata.name", "operator",
                                     "NotIn", "values", e);
            if (!req1 || json_array_append_new(keep, req1)) {
                json_decref(keep);
                return GH_ENOMEM;
            }
        }
        json_object_set_new(term, "matchFields", keep);
    }
    return GH_OK;
}

/* Finds what to restart under the job name ns/name: the first kind of
 * gh_job_kinds with an object of that name (a batch/v1 Job first), then
 * what controls it while that is one of the kinds (gh_job_parent: a
 * JobSet's or MPIJob's child Job -> the JobSet or MPIJob; a TrainJob's
 * JobSet -> the TrainJob, whose controller would recreate a JobSet deleted
 * under it). On GH_OK sets *res, *obj (new reference) and top (the
 * object's name). */
static int find_workload(const struct gh_act_ctx *x, const char *ns, const char *name,
                         const struct gh_kube_res **res, json_t **obj, char *top, size_t cap,
                         struct gh_kube_status *st, struct gh_err *err)
{
    *obj = NULL;
    snprintf(top, cap, "%s", name);
    for (size_t i = 0; i < GH_JOB_NKINDS; i++) {
        struct gh_kube_ref ref = {gh_job_kinds[i], ns, name};
        gh_kube_status_reset(st);
        /* a kind whose resource is not served answers 404 as well */
        int rc = gh_kube_get(x->c, &ref, obj, st, err);
        if (rc == GH_ENOTFOUND)
            continue;
        if (rc)
            return rc;
        *res = gh_job_kinds[i];
        for (int depth = 0; depth < 3; depth++) {
            const char *up = NULL;
            const struct gh_kube_res *pr = gh_job_parent(*res, *obj, &up);
            if (!pr || !up || !*up)
                return GH_OK;
            snprintf(top, cap, "%s", up);
            json_decref(*obj);
            *obj = NULL;
            struct gh_kube_ref pref = {pr, ns, top};
            gh_kube_status_reset(st);
            if ((rc = gh_kube_get(x->c, &pref, obj, st, err)))
                return rc;
            *res = pr;
        }
        return GH_OK;
    }
    return gh_err_set(err, GH_ENOTFOUND,
                      "no Job, JobSet, PyTorchJob, TrainJob, LeaderWorkerSet, MPIJob or Volcano "
                      "Job %s/%s",
                      ns, name);
}

/* ---- a TrainJob's pod templates: its runtime's, patched */

/* The pod templates a TrainJob's pods are made from, as [{name, template}]
 * per replicated job (a new reference), into *out: from its JobSet (named
 * as the TrainJob and controlled by it: the runtime with every patch
 * applied), else from its runtime (spec.runtimeRef: a
 * ClusterTrainingRuntime, or a TrainingRuntime of its namespace). */
static int trainjob_templates(const struct gh_act_ctx *x, const json_t *tj, json_t **out,
                              struct gh_kube_status *st, struct gh_err *err)
{
    static const struct gh_kube_res ctr = {"trainer.kubeflow.org", "v1alpha1",
                                           "clustertrainingruntimes", "ClusterTrainingRuntime",
                                           false};
    static const struct gh_kube_res tr = {"trainer.kubeflow.org", "v1alpha1", "trainingruntimes",
                                          "TrainingRuntime", true};
    const char *ns = gh_kube_meta_namespace(tj), *name = gh_kube_meta_name(tj);
    const char *uid = gh_kube_meta_uid(tj);
    *out = NULL;
    json_t *src = NULL, *rjobs = NULL;
    struct gh_kube_ref jr = {&gh_job_res_jobsets, ns, name};
    if (gh_kube_get(x->c, &jr, &src, NULL, NULL) == GH_OK) {
        const json_t *ref = gh_job_controller_ref(src, gh_job_res_trainjobs.group, "TrainJob");
        const char *ruid = ref ? gh_json_str(ref, "uid") : NULL;
        if (ruid && uid && !strcmp(ruid, uid))
            rjobs = json_object_get(json_object_get(src, "spec"), "replicatedJobs");
    }
    if (!rjobs) {
        json_decref(src);
        src = NULL;
        const json_t *rr = json_object_get(json_object_get(tj, "spec"), "runtimeRef");
        const char *rname = gh_json_str(rr, "name"), *rkind = gh_json_str(rr, "kind");
        bool cluster = !rkind || !strcmp(rkind, "ClusterTrainingRuntime");
        if (!rname || (!cluster && strcmp(rkind, "TrainingRuntime")))
            return gh_err_set(err, GH_EINVAL,
                              "TrainJob %s/%s: no JobSet of its own and no runtimeRef to read "
                              "its pod templates from",
                              ns, name);
        struct gh_kube_ref rref = {cluster ? &ctr : &tr, cluster ? NULL : ns, rname};
        gh_kube_status_reset(st);
        int rc = gh_kube_get(x->c, &rref, &src, st, err);
        if (rc)
            return rc;
        rjobs = json_object_get(
            json_object_get(json_object_get(json_object_get(src, "spec"), "template"), "spec"),
            "replicatedJobs");
    }
    json_t *res = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(rjobs, i, e)
    {
        const char *rn = gh_json_str(e, "name");
        json_t *t = json_object_get(json_object_get(json_object_get(e, "template"), "spec"),
                                    "template");
        if (rn && json_is_object(t) && res)
            json_array_append_new(res, json_pack("{s:s, s:O}", "name", rn, "template", t));
    }
    json_decref(src);
    if (!res)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    if (json_array_size(res) == 0) {
        json_decref(res);
        return gh_err_set(err, GH_EINVAL, "TrainJob %s/%s: its runtime has no replicated job", ns,
                          name);
    }
    *out = res;
    return GH_OK;
}

/* Returns obj[key] as an object, adding an empty one when absent (NULL:
 * out of memory, or obj[key] is not an object). */
static json_t *obj_at(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!v && json_object_set_new(obj, key, json_object()) == 0)
        v = json_object_get(obj, key);
    return json_is_object(v) ? v : NULL;
}

/* Gives spec (a TrainJob's, borrowed) gpuheal's runtimePatches entry
 * (manager GH_JOB_TRAINJOB_MANAGER) with a pod template patch per
 * replicated job of base (trainjob_templates) carrying that template's
 * node affinity and ServiceAccount, for prepare_template to extend: the
 * runtime and other managers' patches are left as they are. */
static int trainjob_patch(json_t *spec, const json_t *base)
{
    json_t *patches = json_object_get(spec, "runtimePatches");
    if (!json_is_array(patches)) {
        patches = json_array();
        if (!patches || json_object_set_new(spec, "runtimePatches", patches))
            return GH_ENOMEM;
    }
    json_t *mine = NULL, *p;
    size_t i;
    json_array_foreach(patches, i, p)
    {
        const char *m = gh_json_str(p, "manager");
        if (m && !strcmp(m, GH_JOB_TRAINJOB_MANAGER))
            mine = p;
    }
    if (!mine) {
        mine = json_pack("{s:s}", "manager", GH_JOB_TRAINJOB_MANAGER);
        if (!mine || json_array_append_new(patches, mine))
            return GH_ENOMEM;
    }
    json_object_del(mine, "time"); /* Trainer's webhook stamps it */
    json_t *tspec = obj_at(obj_at(obj_at(mine, "trainingRuntimeSpec"), "template"), "spec");
    json_t *rjobs = tspec ? json_object_get(tspec, "replicatedJobs") : NULL;
    if (!tspec)
        return GH_EINVAL;
    if (!json_is_array(rjobs)) {
        rjobs = json_array();
        if (!rjobs || json_object_set_new(tspec, "replicatedJobs", rjobs))
            return GH_ENOMEM;
    }
    json_t *b;
    json_array_foreach(base, i, b)
    {
        const char *rn = gh_json_str(b, "name");
        json_t *entry = NULL, *e;
        size_t k;
        json_array_foreach(rjobs, k, e)
        {
            const char *en = gh_json_str(e, "name");
            if (en && rn && !strcmp(en, rn))
                entry = e;
        }
        if (!entry) {
            entry = json_pack("{s:s}", "name", rn);
            if (!entry || json_array_append_new(rjobs, entry))
                return GH_ENOMEM;
        }
        json_t *pt = obj_at(obj_at(obj_at(entry, "template"), "spec"), "template");
        json_t *ps = pt ? obj_at(pt, "spec") : NULL;
        if (!ps || !obj_at(pt, "metadata"))
            return GH_ENOMEM;
        const json_t *bs = json_object_get(json_object_get(b, "template"), "spec");
        /* the affinity the pods have now (the runtime's, earlier patches'),
         * which prepare_template extends with the nodes to avoid */
        const json_t *aff = json_object_get(bs, "affinity");
        if (json_is_object(aff) && json_object_set_new(ps, "affinity", json_deep_copy(aff)))
            return GH_ENOMEM;
        /* who the pods run as, said where the admission policy sees it */
        const char *sa = gh_json_str(bs, "serviceAccountName");
        if (!sa || !*sa)
            sa = gh_json_str(bs, "serviceAccount");
        if (sa && *sa && !gh_json_str(ps, "serviceAccountName") &&
            json_object_set_new(ps, "serviceAccountName", json_string(sa)))
            return GH_ENOMEM;
    }
    return GH_OK;
}

/* The identity a pod template runs as, "system:serviceaccount:NS:NAME"
 * (serviceAccountName, else its deprecated alias, else "default"), into buf.
 * Written on the replacement's template (GH_ANN_SERVICE_ACCOUNT): the
 * admission policy deploy/rbac/controller-restart-policy.yaml refuses a
 * replacement whose template runs as another. */
static void runs_as(const json_t *tspec, const char *ns, char *buf, size_t cap)
{
    const char *sa = gh_json_str(tspec, "serviceAccountName");
    if (!sa || !*sa)
        sa = gh_json_str(tspec, "serviceAccount");
    snprintf(buf, cap, "system:serviceaccount:%s:%s", ns, sa && *sa ? sa : "default");
}

/* Sets the resume annotations, the ServiceAccount it runs as (namespace ns)
 * and the node affinity away from avoid on one pod template
 * (PodTemplateSpec, borrowed). */
static int prepare_template(json_t *tmpl, const char *ns, int64_t step, const char *path,
                            json_t *avoid)
{
    json_t *tspec = json_object_get(tmpl, "spec");
    if (!json_is_object(tspec))
        return GH_EINVAL;
    json_t *tmeta = json_object_get(tmpl, "metadata");
    if (!json_is_object(tmeta)) {
        tmeta = json_object();
        json_object_set_new(tmpl, "metadata", tmeta);
    }
    json_t *tann = json_object_get(tmeta, "annotations");
    if (!json_is_object(tann)) {
        tann = json_object();
        json_object_set_new(tmeta, "annotations", tann);
    }
    if (!tmeta || !tann)
        return GH_ENOMEM;
    char who[400];
    runs_as(tspec, ns, who, sizeof who);
    if (json_object_set_new(tann, GH_ANN_SERVICE_ACCOUNT, json_string(who)))
        return GH_ENOMEM;
    if (step >= 0) {
        char s[24];
        snprintf(s, sizeof s, "%lld", (long long)step);
        json_object_set_new(tann, "gpuheal.io/resume-step", json_string(s));
        if (path && *path)
            json_object_set_new(tann, "gpuheal.io/resume-path", json_string(path));
        else
            json_object_del(tann, "gpuheal.io/resume-path");
    } else {
        json_object_del(tann, "gpuheal.io/resume-step");
        json_object_del(tann, "gpuheal.io/resume-path");
    }
    return json_array_size(avoid) > 0 ? avoid_nodes(tspec, avoid) : GH_OK;
}

int gh_act_restart_prepare(const struct gh_act_ctx *x, const char *ns, const char *jname,
                           const char *const *avoid, int navoid, int64_t step, const char *path,
                           json_t **payload, struct gh_act_result *r, struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    *payload = NULL;
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    json_t *job = NULL;
    const struct gh_kube_res *res = &gh_kube_res_jobs;
    char name[254];
    int rc = find_workload(x, ns, jname, &res, &job, name, sizeof name, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed",
                          rc == GH_ENOTFOUND ? "no job of a kind gpuheal restarts %s/%s (Job, "
                                               "JobSet, PyTorchJob, TrainJob, LeaderWorkerSet, "
                                               "MPIJob, Volcano Job)"
                                             : "could not read the job %s/%s",
                          ns, name);
        return rc;
    }
    const char *kind = gh_job_kind_name(res);
    json_t *tj_base = NULL;
    json_t *meta = json_object_get(job, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    const char *uid = gh_kube_meta_uid(job);
    /* The resume carries a path only under the location the job itself
     * declares (its owner writes the annotation; a checkpoint signal is
     * only what some rank said): never one from anywhere else. */
    char withheld[400] = "";
    const char *prefix = gh_json_str(ann, GH_ANN_CHECKPOINT_PREFIX);
    if (step >= 0 && path && *path && !gh_tenancy_path_under(prefix, path)) {
        struct gh_err perr = {{0}};
        if (!prefix)
            snprintf(withheld, sizeof withheld, "the job declares no %s", GH_ANN_CHECKPOINT_PREFIX);
        else if (gh_tenancy_prefix_check(prefix, &perr))
            snprintf(withheld, sizeof withheld, "%.380s", perr.msg);
        else
            snprintf(withheld, sizeof withheld, "\"%.150s\" is not under %s \"%.150s\"", path,
                     GH_ANN_CHECKPOINT_PREFIX, prefix);
        path = NULL;
    }
    long count = 0;
    const char *cs = gh_json_str(ann, GH_ANN_RESTART_COUNT);
    if (cs)
        count = strtol(cs, NULL, 10);
    /* nodes to avoid: earlier restarts' and this one's */
    const char *list[AVOID_MAX];
    int n = 0;
    char prev[2048] = "";
    const char *pa = gh_json_str(ann, GH_ANN_AVOID_NODES);
    if (pa)
        snprintf(prev, sizeof prev, "%s", pa);
    char *save = NULL;
    for (char *t = strtok_r(prev, ",", &save); t; t = strtok_r(NULL, ",", &save))
        n = add_avoid(list, n, t);
    for (int i = 0; i < navoid; i++)
        n = add_avoid(list, n, avoid[i]);
    json_t *avoid_arr = json_array();
    char joined[2048] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        json_array_append_new(avoid_arr, json_string(list[i]));
        if (used < sizeof joined) {
            int w = snprintf(joined + used, sizeof joined - used, "%s%s", i ? "," : "", list[i]);
            used += w > 0 ? (size_t)w : 0;
        }
    }

    /* the replacement: same name, labels, annotations and spec, less what
     * the API server generated for the old one */
    json_t *spec = json_deep_copy(json_object_get(job, "spec"));
    json_t *nmeta = json_pack("{s:s, s:s}", "name", name, "namespace", ns);
    json_t *nann = json_is_object(ann) ? json_deep_copy(ann) : json_object();
    json_t *labels = json_object_get(meta, "labels");
    if (!spec || !nmeta || !nann || !avoid_arr) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto out;
    }
    if (json_is_object(labels))
        json_object_set_new(nmeta, "labels", json_deep_copy(labels));
    json_object_del(nann, "kubectl.kubernetes.io/last-applied-configuration");
    char cnt[24], cmname[300];
    snprintf(cnt, sizeof cnt, "%ld", count + 1);
    snprintf(cmname, sizeof cmname, "%s%s", name, GH_RESUME_SUFFIX);
    json_object_set_new(nann, GH_ANN_RESTARTED_FOR, json_string(x->incident));
    json_object_set_new(nann, GH_ANN_RESTART_COUNT, json_string(cnt));
    json_object_set_new(nann, GH_ANN_AVOID_NODES, json_string(joined));
    json_object_set_new(nann, "gpuheal.io/resume-configmap", json_string(cmname));
    json_object_set_new(nmeta, "annotations", nann);
    nann = NULL;
    if (res == &gh_kube_res_jobs) {
        /* what the Job controller generated for the old Job */
        if (!json_is_true(json_object_get(spec, "manualSelector")))
            json_object_del(spec, "selector");
        json_t *tlabels = json_object_get(
            json_object_get(json_object_get(spec, "template"), "metadata"), "labels");
        json_object_del(tlabels, "controller-uid");
        json_object_del(tlabels, "batch.kubernetes.io/controller-uid");
    }
    if (res == &gh_job_res_trainjobs) {
        /* its pod templates are its runtime's: gpuheal's own patch of them */
        if ((rc = trainjob_templates(x, job, &tj_base, &st, err)))
            goto out;
        if ((rc = trainjob_patch(spec, tj_base))) {
            gh_err_set(err, rc, "TrainJob %s/%s: could not patch its runtime", ns, name);
            goto out;
        }
    }
    json_t *tmpls[TEMPLATES_MAX];
    size_t nt = gh_job_pod_templates(res, spec, tmpls, TEMPLATES_MAX);
    if (nt == 0) {
        rc = gh_err_set(err, GH_EINVAL, "%s %s/%s has no pod template", kind, ns, name);
        goto out;
    }
    for (size_t i = 0; i < nt; i++) {
        if ((rc = prepare_template(tmpls[i], ns, step, path, avoid_arr))) {
            gh_err_set(err, rc, rc == GH_ENOMEM ? "out of memory"
                                                : "%s %s/%s: a pod template without spec",
                       kind, ns, name);
            goto out;
        }
    }
    char apiv[128];
    json_t *repl = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion",
                             gh_kube_api_version(res, apiv, sizeof apiv), "kind", res->kind,
                             "metadata", nmeta, "spec", spec);
    nmeta = spec = NULL;
    json_t *pl = repl ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:O}", "namespace", ns, "name",
                                  name, "kind", kind, "uid", uid ? uid : "", "incident",
                                  x->incident, "job", repl, "avoid", avoid_arr)
                      : NULL;
    if (!pl) {
        rc = gh_err_set(err, GH_ENOMEM, "out of memory");
        goto out;
    }
    if (step >= 0) {
        json_object_set_new(pl, "step", json_integer(step));
        if (path && *path)
            json_object_set_new(pl, "path", json_string(path));
        if (withheld[0])
            json_object_set_new(pl, "path_withheld", json_string(withheld));
    }
    json_object_set_new(pl, "restart_count", json_integer(count + 1));
    *payload = pl;
    gh_act_result_api_ok(r, 200);
    gh_act_result_set(r, "succeeded", "prepared the restart of %s %s/%s", kind, ns, name);
out:
    json_decref(job);
    json_decref(tj_base);
    json_decref(spec);
    json_decref(nmeta);
    json_decref(nann);
    json_decref(avoid_arr);
    if (rc && !r->result[0]) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not prepare the restart of %s %s/%s", kind, ns,
                          name);
    }
    return rc;
}

/* The path the plan resumes from (borrowed from pl), or NULL: none, or
 * one not under the checkpoint prefix the plan's job declares (a plan
 * prepared before paths were checked is checked here). */
static const char *resume_path(const json_t *pl)
{
    const char *p = gh_json_str(pl, "path");
    const char *prefix = gh_json_str(json_object_get(pl, "job"), "metadata", "annotations",
                                     GH_ANN_CHECKPOINT_PREFIX);
    if (!p || !*p || gh_json_str(pl, "path_withheld") || !gh_tenancy_path_under(prefix, p))
        return NULL;
    return p;
}

static int apply_resume(const struct gh_act_ctx *x, const json_t *pl, const char *ns,
                        const char *name, struct gh_kube_status *st, struct gh_err *err)
{
    char cm[300], step[24] = "", job[400], cnt[24];
    snprintf(cm, sizeof cm, "%s%s", name, GH_RESUME_SUFFIX);
    snprintf(job, sizeof job, "%s/%s", ns, name);
    snprintf(cnt, sizeof cnt, "%lld",
             (long long)json_integer_value(json_object_get(pl, "restart_count")));
    json_t *data = json_pack("{s:s, s:s, s:s}", "incident",
                             gh_json_str(pl, "incident"), "job", job,
                             "restart-count", cnt);
    if (!data)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    json_t *js = json_object_get(pl, "step");
    if (json_is_integer(js)) {
        snprintf(step, sizeof step, "%lld", (long long)json_integer_value(js));
        json_object_set_new(data, "step", json_string(step));
        const char *p = resume_path(pl);
        if (p)
            json_object_set_new(data, "path", json_string(p));
        else if (gh_json_str(pl, "path") && !gh_json_str(pl, "path_withheld"))
            json_object_set_new(data, "path-withheld",
                                json_string("not under the job's " GH_ANN_CHECKPOINT_PREFIX));
        const char *w = gh_json_str(pl, "path_withheld");
        if (w)
            json_object_set_new(data, "path-withheld", json_string(w));
    }
    json_t *cmo = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:o}", "apiVersion", "v1", "kind",
                            "ConfigMap", "metadata", "name", cm, "namespace", ns, "labels",
                            "gpuheal.io/job", name, "data", data);
    if (!cmo)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, ns, cm};
    int rc = gh_kube_patch(x->c, &ref, NULL, GH_KUBE_PATCH_APPLY, cmo, NULL, st, err);
    json_decref(cmo);
    return rc;
}

int gh_act_restart_execute(const struct gh_act_ctx *x, const json_t *pl, struct gh_act_result *r,
                           struct gh_err *err)
{
    memset(r, 0, sizeof *r);
    const char *ns = gh_json_str(pl, "namespace");
    const char *name = gh_json_str(pl, "name");
    const char *uid = gh_json_str(pl, "uid");
    const char *inc = gh_json_str(pl, "incident");
    json_t *repl = json_object_get(pl, "job");
    /* plans stored before JobSets and PyTorchJobs were supported: Jobs */
    const char *kind = gh_json_str(pl, "kind");
    if (!kind)
        kind = "Job";
    const struct gh_kube_res *res = gh_job_res_of_kind(kind);
    /* the replacement says what it is; a plan of another version of the
     * kind's group (PyTorchJob's kubeflow.org: MPIJob) must name it */
    if (res && res != gh_job_res_of(gh_json_str(repl, "apiVersion"), gh_json_str(repl, "kind")))
        res = NULL;
    if (!ns || !name || !uid || !inc || !json_is_object(repl) || !res) {
        gh_act_result_set(r, "failed", "restart intent without its prepared job");
        return gh_err_set(err, GH_EINVAL, "restart payload incomplete");
    }
    int rc = gh_act_resume_apply(x, pl, r, err);
    if (rc)
        return rc;
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    char where[600] = "";
    json_t *js = json_object_get(pl, "step");
    if (json_is_integer(js) && !resume_path(pl)) {
        const char *w = gh_json_str(pl, "path_withheld");
        snprintf(where, sizeof where, "resume from step %lld, no path: %.400s",
                 (long long)json_integer_value(js),
                 w                         ? w
                 : gh_json_str(pl, "path") ? "not under the job's " GH_ANN_CHECKPOINT_PREFIX
                                           : "none saved");
        /* a plan prepared before paths were checked named it in the pod
         * templates too */
        json_t *tmpls[TEMPLATES_MAX];
        size_t nt = gh_job_pod_templates(res, json_object_get(repl, "spec"), tmpls, TEMPLATES_MAX);
        for (size_t t = 0; t < nt; t++)
            json_object_del(json_object_get(json_object_get(tmpls[t], "metadata"), "annotations"),
                            "gpuheal.io/resume-path");
    } else if (json_is_integer(js))
        snprintf(where, sizeof where, "resume from step %lld at %s",
                 (long long)json_integer_value(js),
                 nz(gh_json_str(pl, "path")));
    else
        snprintf(where, sizeof where, "no checkpoint: start over");
    char avoid[400] = "";
    size_t used = 0, i;
    json_t *a;
    json_array_foreach(json_object_get(pl, "avoid"), i, a) {
        if (used < sizeof avoid) {
            int w = snprintf(avoid + used, sizeof avoid - used, "%s%s", i ? "," : "",
                             json_string_value(a));
            used += w > 0 ? (size_t)w : 0;
        }
    }

    struct gh_kube_ref ref = {res, ns, name};
    json_t *cur = NULL;
    rc = gh_kube_get(x->c, &ref, &cur, &st, err);
    if (rc && rc != GH_ENOTFOUND) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not read %s %s/%s", kind, ns, name);
        return rc;
    }
    if (rc == GH_OK) {
        const char *cuid = gh_kube_meta_uid(cur);
        const char *by = gh_json_str(cur, "metadata", "annotations", GH_ANN_RESTARTED_FOR);
        bool old = cuid && strcmp(cuid, uid) == 0;
        bool ours = !old && by && strcmp(by, inc) == 0;
        json_decref(cur);
        if (ours) {
            gh_act_result_api_ok(r, 200);
            gh_act_result_set(r, "noop", "%s %s/%s already restarted for this incident (%s)",
                              kind, ns, name, where);
            return GH_OK;
        }
        if (!old) {
            gh_act_result_api_ok(r, 200);
            gh_act_result_set(r, "skipped", "%s %s/%s was replaced by someone else since the "
                              "decision; left alone", kind, ns, name);
            return GH_OK;
        }
        /* the replacement must be admitted before the old one goes: an
         * admission policy (deploy/rbac/controller-restart-policy.yaml) or
         * a quota refusing it after the delete would lose the job. Admitted,
         * the dry run answers AlreadyExists (the old one is still there). */
        struct gh_kube_ref coll = {res, ns, NULL};
        rc = gh_kube_create_dry_run(x->c, &coll, repl, &st, err);
        if (rc && st.kind != GH_KUBE_R_ALREADY_EXISTS) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed",
                              "the replacement of %s %s/%s would be refused (a "
                              "dry run of its create); the old one is left running",
                              kind, ns, name);
            return rc;
        }
        if (err)
            err->msg[0] = '\0';
        gh_kube_status_reset(&st);
        struct gh_kube_delete_opts d = {.uid = uid, .grace_period_s = -1,
                                        .propagation = "Background"};
        rc = gh_kube_delete(x->c, &ref, &d, &st, err);
        if (rc && rc != GH_ENOTFOUND) {
            gh_act_result_api_fail(r, &st, err);
            gh_act_result_set(r, "failed", "could not delete the old %s %s/%s", kind, ns, name);
            return rc;
        }
    }
    /* create the replacement; the old object may take a moment to go */
    struct gh_kube_ref coll = {res, ns, NULL};
    const struct gh_clock *clk = x->clock ? x->clock : gh_clock_real();
    int64_t deadline = gh_clock_now(clk) + 60 * GH_NS_PER_S;
    for (;;) {
        rc = gh_kube_create(x->c, &coll, repl, NULL, &st, err);
        if (rc == GH_OK || st.kind != GH_KUBE_R_ALREADY_EXISTS || gh_clock_now(clk) > deadline)
            break;
        (void)gh_kube_client_run(x->c, 200, NULL);
    }
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "old %s %s/%s deleted but its replacement could not be "
                          "created", kind, ns, name);
        return rc;
    }
    gh_act_result_api_ok(r, 201);
    gh_act_result_set(r, "succeeded", "restarted %s %s/%s%s%s; %s (ConfigMap %s/%s%s)", kind, ns,
                      name, avoid[0] ? " away from " : "", avoid, where, ns, name,
                      GH_RESUME_SUFFIX);
    return GH_OK;
}

int gh_act_resume_apply(const struct gh_act_ctx *x, const json_t *pl, struct gh_act_result *r,
                        struct gh_err *err)
{
    const char *ns = gh_json_str(pl, "namespace"), *name = gh_json_str(pl, "name");
    if (!ns || !name || !gh_json_str(pl, "incident")) {
        gh_act_result_set(r, "failed", "restart plan without its job");
        return gh_err_set(err, GH_EINVAL, "restart payload incomplete");
    }
    struct gh_kube_status st;
    gh_kube_status_reset(&st);
    int rc = apply_resume(x, pl, ns, name, &st, err);
    if (rc) {
        gh_act_result_api_fail(r, &st, err);
        gh_act_result_set(r, "failed", "could not write ConfigMap %s/%s%s", ns, name,
                          GH_RESUME_SUFFIX);
    }
    return rc;
}
