/* test_job_kinds.c - which job a pod belongs to (controller
 * ownerReferences first, a JobSet's child Job resolved to the JobSet
 * through the Job cache, a TrainJob's JobSet to the TrainJob through the
 * JobSet cache, an MPIJob's launcher Job to the MPIJob, a LeaderWorkerSet's
 * and a Volcano Job's pods, the labels as the fallback and in which
 * order), the kinds' names, and where each restartable kind keeps its pod
 * templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "control/job_kinds.h"

static json_t *obj(const char *name)
{
    return json_pack("{s:{s:s, s:s, s:{}}}", "metadata", "name", name, "namespace", "ml",
                     "labels");
}

static void label(json_t *o, const char *k, const char *v)
{
    json_object_set_new(json_object_get(json_object_get(o, "metadata"), "labels"), k,
                        json_string(v));
}

static void owner(json_t *o, const char *api, const char *kind, const char *name, int ctl)
{
    json_t *meta = json_object_get(o, "metadata");
    json_t *refs = json_object_get(meta, "ownerReferences");
    if (!refs) {
        refs = json_array();
        json_object_set_new(meta, "ownerReferences", refs);
    }
    json_array_append_new(refs, json_pack("{s:s, s:s, s:s, s:s, s:b}", "apiVersion", api, "kind",
                                          kind, "name", name, "uid", "u", "controller", ctl));
}

static void test_labels_order(void **st)
{
    (void)st;
    char buf[200];
    const char *kind = NULL;
    json_t *p = obj("w-0");
    assert_null(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind));
    label(p, "job-name", "old");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/old");
    label(p, "batch.kubernetes.io/job-name", "js-workers-0");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/js-workers-0");
    assert_string_equal(kind, "Job");
    label(p, "training.kubeflow.org/job-name", "tf");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/tf");
    assert_string_equal(kind, "");
    /* a JobSet's pod carries its child Job's label too: the JobSet wins */
    label(p, "jobset.sigs.k8s.io/jobset-name", "js");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/js");
    assert_string_equal(kind, "JobSet");
    json_decref(p);
}

static void test_owners(void **st)
{
    (void)st;
    char buf[200];
    const char *kind = NULL;
    json_t *p = obj("pt-worker-0");
    label(p, "batch.kubernetes.io/job-name", "decoy");
    owner(p, "kubeflow.org/v1", "PyTorchJob", "other", 0); /* not the controller */
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/decoy");
    owner(p, "example.com/v1", "PyTorchJob", "wrong-group", 1);
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/decoy");
    owner(p, "kubeflow.org/v1", "PyTorchJob", "pt", 1);
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/pt");
    assert_string_equal(kind, "PyTorchJob");
    json_decref(p);
}

static void test_child_job_through_cache(void **st)
{
    (void)st;
    static const char *const keep[] = {"/metadata/labels", "/metadata/ownerReferences"};
    struct gh_kube_store_opts so = {.keep = keep, .nkeep = 2};
    struct gh_kube_store *jobs = NULL;
    assert_int_equal(gh_kube_store_new(&so, &jobs, NULL), GH_OK);
    struct gh_job_caches jc = {jobs, NULL};
    enum gh_kube_change chg;
    char buf[200];
    const char *kind = NULL;
    /* a pod with only what the Job controller sets */
    json_t *p = obj("js-driver-0-abcde");
    label(p, "batch.kubernetes.io/job-name", "js-driver-0");
    owner(p, "batch/v1", "Job", "js-driver-0", 1);
    /* Job not cached (yet): the Job */
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/js-driver-0");
    assert_string_equal(kind, "Job");
    /* ... or the JobSet its label names */
    label(p, "jobset.sigs.k8s.io/jobset-name", "js");
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/js");
    json_object_del(json_object_get(json_object_get(p, "metadata"), "labels"),
                    "jobset.sigs.k8s.io/jobset-name");
    /* the cached Job is controlled by a JobSet: the JobSet */
    json_t *j = obj("js-driver-0");
    owner(j, "jobset.x-k8s.io/v1alpha2", "JobSet", "js", 1);
    assert_int_equal(gh_kube_store_upsert(jobs, j, &chg, NULL, NULL, NULL), GH_OK);
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/js");
    assert_string_equal(kind, "JobSet");
    /* a plain cached Job: the Job, whatever a stale label says */
    json_t *plain = obj("solo");
    assert_int_equal(gh_kube_store_upsert(jobs, plain, &chg, NULL, NULL, NULL), GH_OK);
    json_t *q = obj("solo-xyz");
    owner(q, "batch/v1", "Job", "solo", 1);
    label(q, "jobset.sigs.k8s.io/jobset-name", "stale");
    assert_string_equal(gh_job_of_pod(q, &jc, buf, sizeof buf, &kind), "ml/solo");
    assert_string_equal(kind, "Job");
    json_decref(p);
    json_decref(q);
    json_decref(j);
    json_decref(plain);
    gh_kube_store_free(jobs);
}

static void test_pod_templates(void **st)
{
    (void)st;
    json_t *out[8];
    json_t *job = json_pack("{s:{s:{}}}", "template", "spec");
    assert_int_equal(gh_job_pod_templates(&gh_kube_res_jobs, job, out, 8), 1);
    assert_ptr_equal(out[0], json_object_get(job, "template"));
    json_t *js = json_pack("{s:[{s:s, s:{s:{s:{s:{}}}}}, {s:s, s:{s:{s:{s:{}}}}}, {s:s}]}",
                           "replicatedJobs", "name", "workers", "template", "spec", "template",
                           "spec", "name", "driver", "template", "spec", "template", "spec",
                           "name", "broken");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_jobsets, js, out, 8), 2);
    assert_int_equal(gh_job_pod_templates(&gh_job_res_jobsets, js, out, 1), 1);
    json_t *pt = json_pack("{s:{s:{s:{}}, s:{s:{}}}}", "pytorchReplicaSpecs", "Master", "template",
                           "Worker", "template");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_pytorchjobs, pt, out, 8), 2);
    assert_int_equal(gh_job_pod_templates(&gh_job_res_pytorchjobs, job, out, 8), 0);
    assert_ptr_equal(gh_job_res_of_kind("JobSet"), &gh_job_res_jobsets);
    assert_ptr_equal(gh_job_res_of_kind("PyTorchJob"), &gh_job_res_pytorchjobs);
    assert_ptr_equal(gh_job_res_of_kind("Job"), &gh_kube_res_jobs);
    assert_null(gh_job_res_of_kind("TFJob"));
    json_decref(job);
    json_decref(js);
    json_decref(pt);
}

static struct gh_kube_store *store(void)
{
    static const char *const keep[] = {"/metadata/labels", "/metadata/ownerReferences"};
    struct gh_kube_store_opts so = {.keep = keep, .nkeep = 2};
    struct gh_kube_store *s = NULL;
    assert_int_equal(gh_kube_store_new(&so, &s, NULL), GH_OK);
    return s;
}

static void cache(struct gh_kube_store *s, json_t *o)
{
    enum gh_kube_change chg;
    assert_int_equal(gh_kube_store_upsert(s, o, &chg, NULL, NULL, NULL), GH_OK);
}

/* A TrainJob owns a JobSet of its name, which owns the Jobs, which own
 * the pods: the pod's job is the TrainJob (kind TrainJob) once the JobSet
 * is cached, the JobSet of the same name before. */
static void test_trainjob(void **st)
{
    (void)st;
    struct gh_kube_store *jobs = store(), *jobsets = store();
    struct gh_job_caches jc = {jobs, jobsets};
    char buf[200];
    const char *kind = NULL;
    json_t *p = obj("tj-node-0-0-abcde");
    label(p, "batch.kubernetes.io/job-name", "tj-node-0");
    label(p, "jobset.sigs.k8s.io/jobset-name", "tj");
    owner(p, "batch/v1", "Job", "tj-node-0", 1);
    /* nothing cached: the JobSet its label names */
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/tj");
    assert_string_equal(kind, "JobSet");
    /* the Job cached (owned by the JobSet), the JobSet not: the JobSet */
    json_t *j = obj("tj-node-0");
    owner(j, "jobset.x-k8s.io/v1alpha2", "JobSet", "tj", 1);
    cache(jobs, j);
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/tj");
    assert_string_equal(kind, "JobSet");
    /* the JobSet cached, controlled by a TrainJob: the TrainJob */
    json_t *js = obj("tj");
    owner(js, "trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", 1);
    cache(jobsets, js);
    assert_string_equal(gh_job_of_pod(p, &jc, buf, sizeof buf, &kind), "ml/tj");
    assert_string_equal(kind, "TrainJob");
    /* no owner at all, only the JobSet label: still climbs the JobSet cache */
    json_t *q = obj("tj-x");
    label(q, "jobset.sigs.k8s.io/jobset-name", "tj");
    assert_string_equal(gh_job_of_pod(q, &jc, buf, sizeof buf, &kind), "ml/tj");
    assert_string_equal(kind, "TrainJob");
    /* a JobSet owned by something else (not a controller TrainJob): the JobSet */
    json_t *js2 = obj("plain");
    owner(js2, "trainer.kubeflow.org/v1alpha1", "TrainJob", "plain", 0);
    cache(jobsets, js2);
    json_t *r = obj("plain-0");
    owner(r, "jobset.x-k8s.io/v1alpha2", "JobSet", "plain", 1);
    assert_string_equal(gh_job_of_pod(r, &jc, buf, sizeof buf, &kind), "ml/plain");
    assert_string_equal(kind, "JobSet");
    const char *up = NULL;
    assert_ptr_equal(gh_job_parent(&gh_job_res_jobsets, js, &up), &gh_job_res_trainjobs);
    assert_string_equal(up, "tj");
    assert_null(gh_job_parent(&gh_job_res_jobsets, js2, &up));
    assert_null(gh_job_parent(&gh_job_res_trainjobs, js, &up));
    json_decref(p);
    json_decref(q);
    json_decref(r);
    json_decref(j);
    json_decref(js);
    json_decref(js2);
    gh_kube_store_free(jobs);
    gh_kube_store_free(jobsets);
}

/* MPIJob v2beta1: workers owned by the MPIJob, the launcher a batch/v1 Job
 * it owns. */
static void test_mpijob(void **st)
{
    (void)st;
    struct gh_kube_store *jobs = store();
    struct gh_job_caches jc = {jobs, NULL};
    char buf[200];
    const char *kind = NULL;
    json_t *w = obj("mpi-worker-0");
    label(w, "training.kubeflow.org/job-name", "mpi");
    label(w, "training.kubeflow.org/job-role", "worker");
    owner(w, "kubeflow.org/v2beta1", "MPIJob", "mpi", 1);
    assert_string_equal(gh_job_of_pod(w, &jc, buf, sizeof buf, &kind), "ml/mpi");
    assert_string_equal(kind, "MPIJob");
    json_t *l = obj("mpi-launcher-xyz");
    label(l, "training.kubeflow.org/job-name", "mpi");
    label(l, "batch.kubernetes.io/job-name", "mpi-launcher");
    owner(l, "batch/v1", "Job", "mpi-launcher", 1);
    /* the launcher Job not cached: the MPIJob its label names, kind unsure */
    assert_string_equal(gh_job_of_pod(l, &jc, buf, sizeof buf, &kind), "ml/mpi");
    assert_string_equal(kind, "");
    json_t *lj = obj("mpi-launcher");
    owner(lj, "kubeflow.org/v2beta1", "MPIJob", "mpi", 1);
    cache(jobs, lj);
    assert_string_equal(gh_job_of_pod(l, &jc, buf, sizeof buf, &kind), "ml/mpi");
    assert_string_equal(kind, "MPIJob");
    const char *up = NULL;
    assert_ptr_equal(gh_job_parent(&gh_kube_res_jobs, lj, &up), &gh_job_res_mpijobs);
    assert_string_equal(up, "mpi");
    json_decref(w);
    json_decref(l);
    json_decref(lj);
    gh_kube_store_free(jobs);
}

/* LeaderWorkerSet: pods owned by StatefulSets, named by the label LWS sets. */
static void test_lws(void **st)
{
    (void)st;
    char buf[200];
    const char *kind = NULL;
    json_t *p = obj("lws-0-1");
    owner(p, "apps/v1", "StatefulSet", "lws-0", 1);
    label(p, "leaderworkerset.sigs.k8s.io/name", "lws");
    label(p, "leaderworkerset.sigs.k8s.io/group-index", "0");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/lws");
    assert_string_equal(kind, "LeaderWorkerSet");
    json_decref(p);
}

/* Volcano's Job has kind "Job" too: told apart by its group. */
static void test_volcano(void **st)
{
    (void)st;
    char buf[200];
    const char *kind = NULL;
    json_t *p = obj("vc-worker-0");
    owner(p, "batch.volcano.sh/v1alpha1", "Job", "vc", 1);
    label(p, "volcano.sh/job-name", "vc");
    assert_string_equal(gh_job_of_pod(p, NULL, buf, sizeof buf, &kind), "ml/vc");
    assert_string_equal(kind, "Job.batch.volcano.sh");
    /* the label alone */
    json_t *q = obj("vc-worker-1");
    label(q, "volcano.sh/job-name", "vc");
    assert_string_equal(gh_job_of_pod(q, NULL, buf, sizeof buf, &kind), "ml/vc");
    assert_string_equal(kind, "Job.batch.volcano.sh");
    assert_ptr_equal(gh_job_res_of("batch.volcano.sh/v1alpha1", "Job"), &gh_job_res_vcjobs);
    assert_ptr_equal(gh_job_res_of("batch/v1", "Job"), &gh_kube_res_jobs);
    assert_ptr_equal(gh_job_res_of("kubeflow.org/v2beta1", "MPIJob"), &gh_job_res_mpijobs);
    assert_null(gh_job_res_of("batch.volcano.sh.evil/v1", "Job"));
    assert_null(gh_job_res_of("v1", "Job"));
    json_decref(p);
    json_decref(q);
}

/* Every kind's name maps back to its resource, and the names are distinct. */
static void test_kind_names(void **st)
{
    (void)st;
    for (size_t i = 0; i < GH_JOB_NKINDS; i++) {
        const char *n = gh_job_kind_name(gh_job_kinds[i]);
        assert_non_null(n);
        assert_ptr_equal(gh_job_res_of_kind(n), gh_job_kinds[i]);
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(n, gh_job_kind_name(gh_job_kinds[k]));
    }
    assert_string_equal(gh_job_kind_name(&gh_job_res_vcjobs), "Job.batch.volcano.sh");
    assert_ptr_equal(gh_job_res_of_kind("Job"), &gh_kube_res_jobs);
    assert_null(gh_job_kind_name(&gh_kube_res_pods));
}

static void test_new_kinds_templates(void **st)
{
    (void)st;
    json_t *out[8];
    json_t *mpi = json_pack("{s:{s:{s:{}}, s:{s:{}}}}", "mpiReplicaSpecs", "Launcher", "template",
                            "Worker", "template");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_mpijobs, mpi, out, 8), 2);
    assert_ptr_equal(
        out[0],
        json_object_get(json_object_get(json_object_get(mpi, "mpiReplicaSpecs"), "Launcher"),
                        "template"));
    json_t *lws = json_pack("{s:{s:{s:{}}, s:{s:{}}}}", "leaderWorkerTemplate", "leaderTemplate",
                            "spec", "workerTemplate", "spec");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_lws, lws, out, 8), 2);
    json_object_del(json_object_get(lws, "leaderWorkerTemplate"), "leaderTemplate");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_lws, lws, out, 8), 1);
    assert_ptr_equal(
        out[0], json_object_get(json_object_get(lws, "leaderWorkerTemplate"), "workerTemplate"));
    json_t *vc = json_pack("{s:[{s:s, s:{s:{}}}, {s:s, s:{s:{}}}, {s:s}]}", "tasks", "name",
                           "master", "template", "spec", "name", "worker", "template", "spec",
                           "name", "broken");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_vcjobs, vc, out, 8), 2);
    /* a TrainJob: only gpuheal's runtime patch, none before it wrote one */
    json_t *tj = json_pack("{s:{s:s}, s:[{s:s, s:{s:{s:{s:[{s:s, s:{s:{s:{s:{}}}}}]}}}}]}",
                           "runtimeRef", "name", "torch", "runtimePatches", "manager",
                           "kueue.x-k8s.io/manager", "trainingRuntimeSpec", "template", "spec",
                           "replicatedJobs", "name", "node", "template", "spec", "template",
                           "spec");
    assert_int_equal(gh_job_pod_templates(&gh_job_res_trainjobs, tj, out, 8), 0);
    json_t *mine = json_deep_copy(json_array_get(json_object_get(tj, "runtimePatches"), 0));
    json_object_set_new(mine, "manager", json_string(GH_JOB_TRAINJOB_MANAGER));
    json_array_append_new(json_object_get(tj, "runtimePatches"), mine);
    assert_int_equal(gh_job_pod_templates(&gh_job_res_trainjobs, tj, out, 8), 1);
    assert_non_null(json_object_get(out[0], "spec"));
    json_decref(mpi);
    json_decref(lws);
    json_decref(vc);
    json_decref(tj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_order),
        cmocka_unit_test(test_owners),
        cmocka_unit_test(test_child_job_through_cache),
        cmocka_unit_test(test_pod_templates),
        cmocka_unit_test(test_trainjob),
        cmocka_unit_test(test_mpijob),
        cmocka_unit_test(test_lws),
        cmocka_unit_test(test_volcano),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_new_kinds_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
