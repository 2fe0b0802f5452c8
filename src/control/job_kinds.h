/* job_kinds.h - the training-job kinds gpuheal restarts (batch/v1 Job,
 * JobSet jobset.x-k8s.io/v1alpha2, PyTorchJob kubeflow.org/v1): their
 * resource descriptors, where their pod templates are, and which job a
 * pod belongs to (ownerReferences, resolved through the informers' caches,
 * with the controllers' labels as the fallback). Pure functions, no I/O. */
#ifndef GH_CONTROL_JOB_KINDS_H
#define GH_CONTROL_JOB_KINDS_H

#include <jansson.h>
#include <stddef.h>

#include "kube/api.h"
#include "kube/store.h"

extern const struct gh_kube_res gh_job_res_jobsets, gh_job_res_pytorchjobs;

/* The resource of a kind name ("Job", "JobSet", "PyTorchJob"); NULL when
 * gpuheal does not restart that kind. */
const struct gh_kube_res *gh_job_res_of_kind(const char *kind);

/* Writes the pod templates (PodTemplateSpec objects, borrowed from spec) of
 * a workload of resource res into out (at most max) and returns how many:
 * Job: spec.template; JobSet: spec.replicatedJobs[*].template.spec.template;
 * PyTorchJob: spec.pytorchReplicaSpecs.<type>.template for every type. */
size_t gh_job_pod_templates(const struct gh_kube_res *res, json_t *spec, json_t **out,
                            size_t max);

/* The controlling ownerReference of obj (borrowed) when its kind is kind
 * and its apiVersion's group is group ("" for the core group); else NULL. */
const json_t *gh_job_controller_ref(const json_t *obj, const char *group, const char *kind);

/* The job pod (borrowed) belongs to, "namespace/name" into buf, or NULL:
 *   controller owner PyTorchJob or JobSet -> that object;
 *   controller owner Job -> the Job's own controller owner when it is a
 *     JobSet (from the Job cache; the label jobset.sigs.k8s.io/jobset-name
 *     when the Job is not cached yet), else the Job;
 *   no owner -> the labels jobset.sigs.k8s.io/jobset-name,
 *     training.kubeflow.org/job-name, batch.kubernetes.io/job-name,
 *     job-name, in that order.
 * jobs: the batch/v1 Job informer's cache (borrowed, keeping
 * /metadata/ownerReferences), or NULL. *kind (optional) receives "JobSet", "PyTorchJob", "Job"
 * or "" (from a label whose kind is not certain). */
const char *gh_job_of_pod(const json_t *pod, const struct gh_kube_store *jobs, char *buf,
                          size_t cap, const char **kind);

#endif
