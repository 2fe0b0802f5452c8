/* job_kinds.h - the training-job kinds gpuheal restarts: batch/v1 Job,
 * JobSet (jobset.x-k8s.io/v1alpha2), PyTorchJob (kubeflow.org/v1), Kubeflow
 * Trainer's TrainJob (trainer.kubeflow.org/v1alpha1), LeaderWorkerSet
 * (leaderworkerset.x-k8s.io/v1), MPIJob (kubeflow.org/v2beta1) and
 * Volcano's Job (batch.volcano.sh/v1alpha1): their resource descriptors,
 * their names, where their pod templates are, which of them controls
 * another (a JobSet's child Job, a TrainJob's JobSet, an MPIJob's launcher
 * Job) and which job a pod belongs to (ownerReferences, resolved through
 * the informers' caches, with the controllers' labels as the fallback).
 * Pure functions, no I/O. */
#ifndef GH_CONTROL_JOB_KINDS_H
#define GH_CONTROL_JOB_KINDS_H

#include <jansson.h>
#include <stddef.h>

#include "kube/api.h"
#include "kube/store.h"

extern const struct gh_kube_res gh_job_res_jobsets, gh_job_res_pytorchjobs, gh_job_res_trainjobs,
    gh_job_res_lws, gh_job_res_mpijobs, gh_job_res_vcjobs;

/* Every kind, in the order a job's name is looked up (the batch/v1 Job
 * first); static. */
#define GH_JOB_NKINDS 7
extern const struct gh_kube_res *const gh_job_kinds[GH_JOB_NKINDS];

/* The name gpuheal gives a kind (static): its kind ("Job", "JobSet",
 * "PyTorchJob", "TrainJob", "LeaderWorkerSet", "MPIJob"), but
 * "Job.batch.volcano.sh" for Volcano's Job, whose kind is "Job" as well.
 * NULL for a resource that is not one of the kinds. */
const char *gh_job_kind_name(const struct gh_kube_res *res);
/* The resource of a kind name (as gh_job_kind_name gives it); NULL when
 * gpuheal does not restart that kind. */
const struct gh_kube_res *gh_job_res_of_kind(const char *name);
/* The kind of an object from its apiVersion and kind (group compared,
 * version not: an object of another version of the group is still that
 * kind); NULL when not one of the kinds. */
const struct gh_kube_res *gh_job_res_of(const char *api_version, const char *kind);

/* The manager gpuheal's runtimePatches entry of a TrainJob carries
 * (Trainer keys a TrainJob's patches by manager). */
#define GH_JOB_TRAINJOB_MANAGER "gpuheal.io/controller"

/* Writes the pod templates (borrowed from spec) of a workload of resource
 * res into out (at most max) and returns how many:
 *   Job: spec.template;
 *   JobSet: spec.replicatedJobs[*].template.spec.template;
 *   PyTorchJob: spec.pytorchReplicaSpecs.<type>.template for every type;
 *   MPIJob: spec.mpiReplicaSpecs.<type>.template for every type;
 *   LeaderWorkerSet: spec.leaderWorkerTemplate.leaderTemplate (when
 *     present) and spec.leaderWorkerTemplate.workerTemplate;
 *   Volcano Job: spec.tasks[*].template;
 *   TrainJob: its templates are its runtime's, which gpuheal does not
 *     change: the pod template patches of gpuheal's own runtimePatches
 *     entry (manager GH_JOB_TRAINJOB_MANAGER),
 *     spec.runtimePatches[gpuheal].trainingRuntimeSpec.template.spec
 *     .replicatedJobs[*].template.spec.template (PodTemplatePatch objects:
 *     metadata and a PodSpecPatch), none before gpuheal restarted it. */
size_t gh_job_pod_templates(const struct gh_kube_res *res, json_t *spec, json_t **out,
                            size_t max);

/* The controlling ownerReference of obj (borrowed) when its kind is kind
 * and its apiVersion's group is group ("" for the core group); else NULL. */
const json_t *gh_job_controller_ref(const json_t *obj, const char *group, const char *kind);

/* The kind that controls obj, an object of kind res, when that is one
 * gpuheal restarts instead of obj, and its name (*name, borrowed from obj):
 *   a Job -> its JobSet, or its MPIJob (the launcher);
 *   a JobSet -> its TrainJob;
 * else NULL. */
const struct gh_kube_res *gh_job_parent(const struct gh_kube_res *res, const json_t *obj,
                                        const char **name);

/* The informers' caches gh_job_of_pod climbs through (each borrowed,
 * keeping /metadata/ownerReferences; NULL: not running). */
struct gh_job_caches {
    const struct gh_kube_store *jobs;    /* batch/v1 Jobs */
    const struct gh_kube_store *jobsets; /* JobSets */
};

/* The job pod (borrowed) belongs to, "namespace/name" into buf, or NULL:
 *   controller owner one of the kinds -> that object, then up through
 *     gh_job_parent while the object is cached (a Job -> its JobSet or
 *     MPIJob; a JobSet -> its TrainJob); a Job not cached: the JobSet
 *     its label jobset.sigs.k8s.io/jobset-name names, or the MPIJob its
 *     label training.kubeflow.org/job-name names (kind ""), else the Job;
 *   controller owner an apps StatefulSet with the label
 *     leaderworkerset.sigs.k8s.io/name -> that LeaderWorkerSet;
 *   no owner -> the labels jobset.sigs.k8s.io/jobset-name,
 *     leaderworkerset.sigs.k8s.io/name, volcano.sh/job-name,
 *     training.kubeflow.org/job-name, batch.kubernetes.io/job-name,
 *     job-name, in that order.
 * A TrainJob's JobSet has the TrainJob's name: its pods are the same job
 * "namespace/name" either way; only *kind says which. caches may be NULL.
 * *kind (optional) receives the kind's name (gh_job_kind_name) or ""
 * (from a label whose kind is not certain). */
const char *gh_job_of_pod(const json_t *pod, const struct gh_job_caches *caches, char *buf,
                          size_t cap, const char **kind);

#endif
