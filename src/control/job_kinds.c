/* job_kinds.c - the restartable job kinds: resource descriptors, their
 * names and pod templates, who controls whom, and the job a pod belongs to
 * (see job_kinds.h). */
#include "control/job_kinds.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"

const struct gh_kube_res gh_job_res_jobsets = {"jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet",
                                               true};
const struct gh_kube_res gh_job_res_pytorchjobs = {"kubeflow.org", "v1", "pytorchjobs",
                                                   "PyTorchJob", true};
const struct gh_kube_res gh_job_res_trainjobs = {"trainer.kubeflow.org", "v1alpha1", "trainjobs",
                                                 "TrainJob", true};
const struct gh_kube_res gh_job_res_lws = {"leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                                           "LeaderWorkerSet", true};
const struct gh_kube_res gh_job_res_mpijobs = {"kubeflow.org", "v2beta1", "mpijobs", "MPIJob",
                                               true};
const struct gh_kube_res gh_job_res_vcjobs = {"batch.volcano.sh", "v1alpha1", "jobs", "Job", true};

const struct gh_kube_res *const gh_job_kinds[GH_JOB_NKINDS] = {
    &gh_kube_res_jobs, &gh_job_res_jobsets, &gh_job_res_pytorchjobs, &gh_job_res_trainjobs,
    &gh_job_res_lws,   &gh_job_res_mpijobs, &gh_job_res_vcjobs};

#define VOLCANO_NAME "Job.batch.volcano.sh"
#define LABEL_JOBSET "jobset.sigs.k8s.io/jobset-name"
#define LABEL_KUBEFLOW "training.kubeflow.org/job-name"
#define LABEL_LWS "leaderworkerset.sigs.k8s.io/name"
#define LABEL_VOLCANO "volcano.sh/job-name"

const char *gh_job_kind_name(const struct gh_kube_res *res)
{
    if (res == &gh_job_res_vcjobs)
        return VOLCANO_NAME;
    for (size_t i = 0; i < GH_JOB_NKINDS; i++)
        if (res && gh_job_kinds[i] == res)
            return res->kind;
    return NULL;
}

const struct gh_kube_res *gh_job_res_of_kind(const char *name)
{
    if (!name)
        return NULL;
    if (!strcmp(name, VOLCANO_NAME))
        return &gh_job_res_vcjobs;
    for (size_t i = 0; i < GH_JOB_NKINDS; i++)
        if (gh_job_kinds[i] != &gh_job_res_vcjobs && !strcmp(name, gh_job_kinds[i]->kind))
            return gh_job_kinds[i];
    return NULL;
}

static void put(json_t *t, json_t **out, size_t max, size_t *n)
{
    if (json_is_object(t) && *n < max)
        out[(*n)++] = t;
}

/* spec.runtimePatches[manager == gpuheal's] (borrowed), or NULL */
static json_t *gpuheal_patch(json_t *spec)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "runtimePatches"), i, p)
    {
        const char *m = gh_json_str(p, "manager");
        if (m && !strcmp(m, GH_JOB_TRAINJOB_MANAGER))
            return p;
    }
    return NULL;
}

size_t gh_job_pod_templates(const struct gh_kube_res *res, json_t *spec, json_t **out, size_t max)
{
    size_t n = 0, i;
    json_t *e;
    const char *k;
    if (res == &gh_kube_res_jobs) {
        put(json_object_get(spec, "template"), out, max, &n);
    } else if (res == &gh_job_res_jobsets) {
        json_array_foreach(json_object_get(spec, "replicatedJobs"), i, e)
            put(json_object_get(json_object_get(json_object_get(e, "template"), "spec"),
                                "template"),
                out, max, &n);
    } else if (res == &gh_job_res_pytorchjobs || res == &gh_job_res_mpijobs) {
        json_object_foreach(json_object_get(spec, res == &gh_job_res_mpijobs
                                                      ? "mpiReplicaSpecs"
                                                      : "pytorchReplicaSpecs"),
                            k, e) put(json_object_get(e, "template"), out, max, &n);
    } else if (res == &gh_job_res_lws) {
        json_t *lwt = json_object_get(spec, "leaderWorkerTemplate");
        put(json_object_get(lwt, "leaderTemplate"), out, max, &n);
        put(json_object_get(lwt, "workerTemplate"), out, max, &n);
    } else if (res == &gh_job_res_vcjobs) {
        json_array_foreach(json_object_get(spec, "tasks"), i, e)
            put(json_object_get(e, "template"), out, max, &n);
    } else if (res == &gh_job_res_trainjobs) {
        json_t *rj = json_object_get(
            json_object_get(
                json_object_get(json_object_get(gpuheal_patch(spec), "trainingRuntimeSpec"),
                                "template"),
                "spec"),
            "replicatedJobs");
        json_array_foreach(rj, i, e) put(
            json_object_get(json_object_get(json_object_get(e, "template"), "spec"), "template"),
            out, max, &n);
    }
    return n;
}

/* true when apiVersion "group/version" (or "version" for the core group)
 * is of group */
static bool in_group(const char *api_version, const char *group)
{
    if (!api_version)
        return false;
    const char *slash = strchr(api_version, '/');
    if (!*group)
        return slash == NULL;
    size_t gl = strlen(group);
    return slash && (size_t)(slash - api_version) == gl && !strncmp(api_version, group, gl);
}

const struct gh_kube_res *gh_job_res_of(const char *api_version, const char *kind)
{
    for (size_t i = 0; kind && i < GH_JOB_NKINDS; i++)
        if (!strcmp(kind, gh_job_kinds[i]->kind) && in_group(api_version, gh_job_kinds[i]->group))
            return gh_job_kinds[i];
    return NULL;
}

const json_t *gh_job_controller_ref(const json_t *obj, const char *group, const char *kind)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller")))
            continue;
        const char *k = gh_json_str(r, "kind");
        const char *av = gh_json_str(r, "apiVersion");
        const char *name = gh_json_str(r, "name");
        if (k && name && *name && !strcmp(k, kind) && in_group(av, group))
            return r;
    }
    return NULL;
}

/* The controlling ownerReference of obj when it is one of the kinds, and
 * that kind; else NULL. */
static const json_t *kind_owner(const json_t *obj, const struct gh_kube_res **res)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, r)
    {
        const char *name = gh_json_str(r, "name");
        if (!json_is_true(json_object_get(r, "controller")) || !name || !*name)
            continue;
        *res = gh_job_res_of(gh_json_str(r, "apiVersion"), gh_json_str(r, "kind"));
        if (*res)
            return r;
    }
    return NULL;
}

const struct gh_kube_res *gh_job_parent(const struct gh_kube_res *res, const json_t *obj,
                                        const char **name)
{
    const json_t *r = NULL;
    const struct gh_kube_res *up = NULL;
    if (res == &gh_kube_res_jobs) {
        if ((r = gh_job_controller_ref(obj, gh_job_res_jobsets.group, "JobSet")))
            up = &gh_job_res_jobsets;
        else if ((r = gh_job_controller_ref(obj, gh_job_res_mpijobs.group, "MPIJob")))
            up = &gh_job_res_mpijobs;
    } else if (res == &gh_job_res_jobsets) {
        if ((r = gh_job_controller_ref(obj, gh_job_res_trainjobs.group, "TrainJob")))
            up = &gh_job_res_trainjobs;
    }
    if (up)
        *name = gh_json_str(r, "name");
    return up;
}

static const char *label(const json_t *obj, const char *key)
{
    const char *v = gh_json_str(obj, "metadata", "labels", key);
    return v && *v ? v : NULL;
}

/* Climbs from (*res, name in cur) to what controls it, through the caches:
 * see gh_job_of_pod. *res NULL at the end: a kind that is not certain. */
static void climb(const json_t *pod, const char *ns, const struct gh_job_caches *caches,
                  const struct gh_kube_res **res, char *cur, size_t cap)
{
    for (int depth = 0; *res && depth < 3; depth++) {
        const struct gh_kube_store *st = !caches                       ? NULL
                                         : *res == &gh_kube_res_jobs   ? caches->jobs
                                         : *res == &gh_job_res_jobsets ? caches->jobsets
                                                                       : NULL;
        const struct gh_kube_obj *o = st ? gh_kube_store_get(st, ns, cur) : NULL;
        if (o) {
            json_t *j = gh_kube_obj_json(o);
            const char *up = NULL;
            const struct gh_kube_res *r = j ? gh_job_parent(*res, j, &up) : NULL;
            bool found = r && up && *up;
            if (found)
                snprintf(cur, cap, "%s", up);
            json_decref(j);
            if (!found)
                return;
            *res = r;
            continue;
        }
        if (*res != &gh_kube_res_jobs)
            return; /* a JobSet not cached: the JobSet (a TrainJob's has its name) */
        /* a Job not (yet) cached: the labels its parent's controller sets */
        const char *l;
        if ((l = label(pod, LABEL_JOBSET))) {
            snprintf(cur, cap, "%s", l);
            *res = &gh_job_res_jobsets;
        } else if ((l = label(pod, LABEL_KUBEFLOW))) {
            snprintf(cur, cap, "%s", l);
            *res = NULL; /* an MPIJob's launcher, most likely */
            return;
        } else {
            return;
        }
    }
}

const char *gh_job_of_pod(const json_t *pod, const struct gh_job_caches *caches, char *buf,
                          size_t cap, const char **kind)
{
    const char *ns = gh_kube_meta_namespace(pod);
    const struct gh_kube_res *res = NULL;
    const char *name = NULL;
    const json_t *ref;
    if (!ns)
        ns = "default";
    if ((ref = kind_owner(pod, &res))) {
        name = gh_json_str(ref, "name");
    } else if ((name = label(pod, LABEL_JOBSET))) {
        res = &gh_job_res_jobsets;
    } else if ((name = label(pod, LABEL_LWS))) {
        res = &gh_job_res_lws;
    } else if ((name = label(pod, LABEL_VOLCANO))) {
        res = &gh_job_res_vcjobs;
    } else if ((name = label(pod, LABEL_KUBEFLOW))) {
        res = NULL;
    } else if ((name = label(pod, "batch.kubernetes.io/job-name")) ||
               (name = label(pod, "job-name"))) {
        res = &gh_kube_res_jobs;
    }
    if (!name)
        return NULL;
    char cur[254];
    snprintf(cur, sizeof cur, "%s", name);
    if (res)
        climb(pod, ns, caches, &res, cur, sizeof cur);
    snprintf(buf, cap, "%s/%s", ns, cur);
    if (kind)
        *kind = res ? gh_job_kind_name(res) : "";
    return buf;
}
