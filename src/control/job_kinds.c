/* job_kinds.c - the restartable job kinds: resource descriptors, their pod
 * templates, and the job a pod belongs to (see job_kinds.h). */
#include "control/job_kinds.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"

const struct gh_kube_res gh_job_res_jobsets = {"jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet",
                                               true};
const struct gh_kube_res gh_job_res_pytorchjobs = {"kubeflow.org", "v1", "pytorchjobs",
                                                   "PyTorchJob", true};

#define LABEL_JOBSET "jobset.sigs.k8s.io/jobset-name"
#define LABEL_KUBEFLOW "training.kubeflow.org/job-name"

const struct gh_kube_res *gh_job_res_of_kind(const char *kind)
{
    if (!kind)
        return NULL;
    if (!strcmp(kind, "Job"))
        return &gh_kube_res_jobs;
    if (!strcmp(kind, "JobSet"))
        return &gh_job_res_jobsets;
    if (!strcmp(kind, "PyTorchJob"))
        return &gh_job_res_pytorchjobs;
    return NULL;
}

static void put(json_t *t, json_t **out, size_t max, size_t *n)
{
    if (json_is_object(t) && *n < max)
        out[(*n)++] = t;
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
    } else if (res == &gh_job_res_pytorchjobs) {
        json_object_foreach(json_object_get(spec, "pytorchReplicaSpecs"), k, e)
            put(json_object_get(e, "template"), out, max, &n);
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

static const char *label(const json_t *obj, const char *key)
{
    const char *v = gh_json_str(obj, "metadata", "labels", key);
    return v && *v ? v : NULL;
}

static const char *ref_name(const json_t *ref)
{
    return gh_json_str(ref, "name");
}

const char *gh_job_of_pod(const json_t *pod, const struct gh_kube_store *jobs, char *buf,
                          size_t cap, const char **kind)
{
    const char *ns = gh_kube_meta_namespace(pod);
    const char *name = NULL, *k = "";
    const json_t *ref;
    if (!ns)
        ns = "default";
    if ((ref = gh_job_controller_ref(pod, "kubeflow.org", "PyTorchJob"))) {
        name = ref_name(ref);
        k = "PyTorchJob";
    } else if ((ref = gh_job_controller_ref(pod, "jobset.x-k8s.io", "JobSet"))) {
        name = ref_name(ref);
        k = "JobSet";
    } else if ((ref = gh_job_controller_ref(pod, "batch", "Job"))) {
        name = ref_name(ref);
        k = "Job";
        const struct gh_kube_obj *jo = jobs ? gh_kube_store_get(jobs, ns, name) : NULL;
        json_t *job = jo ? gh_kube_obj_json(jo) : NULL;
        const json_t *up = job ? gh_job_controller_ref(job, "jobset.x-k8s.io", "JobSet") : NULL;
        const char *js = up ? ref_name(up) : jo ? NULL : label(pod, LABEL_JOBSET);
        if (js) {
            snprintf(buf, cap, "%s/%s", ns, js);
            name = buf;
            k = "JobSet";
        }
        json_decref(job);
        if (name == buf) {
            if (kind)
                *kind = k;
            return buf;
        }
    } else if ((name = label(pod, LABEL_JOBSET))) {
        k = "JobSet";
    } else if ((name = label(pod, LABEL_KUBEFLOW))) {
        k = "";
    } else if ((name = label(pod, "batch.kubernetes.io/job-name")) ||
               (name = label(pod, "job-name"))) {
        k = "Job";
    }
    if (!name)
        return NULL;
    snprintf(buf, cap, "%s/%s", ns, name);
    if (kind)
        *kind = k;
    return buf;
}
