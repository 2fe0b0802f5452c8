/* test_job_kinds.c - which job a pod belongs to (controller
 * ownerReferences first, a JobSet's child Job resolved to the JobSet
 * through the Job cache, the labels as the fallback and in which order),
 * and where each restartable kind keeps its pod templates. */
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
    enum gh_kube_change chg;
    char buf[200];
    const char *kind = NULL;
    /* a pod with only what the Job controller sets */
    json_t *p = obj("js-driver-0-abcde");
    label(p, "batch.kubernetes.io/job-name", "js-driver-0");
    owner(p, "batch/v1", "Job", "js-driver-0", 1);
    /* Job not cached (yet): the Job */
    assert_string_equal(gh_job_of_pod(p, jobs, buf, sizeof buf, &kind), "ml/js-driver-0");
    assert_string_equal(kind, "Job");
    /* ... or the JobSet its label names */
    label(p, "jobset.sigs.k8s.io/jobset-name", "js");
    assert_string_equal(gh_job_of_pod(p, jobs, buf, sizeof buf, &kind), "ml/js");
    json_object_del(json_object_get(json_object_get(p, "metadata"), "labels"),
                    "jobset.sigs.k8s.io/jobset-name");
    /* the cached Job is controlled by a JobSet: the JobSet */
    json_t *j = obj("js-driver-0");
    owner(j, "jobset.x-k8s.io/v1alpha2", "JobSet", "js", 1);
    assert_int_equal(gh_kube_store_upsert(jobs, j, &chg, NULL, NULL, NULL), GH_OK);
    assert_string_equal(gh_job_of_pod(p, jobs, buf, sizeof buf, &kind), "ml/js");
    assert_string_equal(kind, "JobSet");
    /* a plain cached Job: the Job, whatever a stale label says */
    json_t *plain = obj("solo");
    assert_int_equal(gh_kube_store_upsert(jobs, plain, &chg, NULL, NULL, NULL), GH_OK);
    json_t *q = obj("solo-xyz");
    owner(q, "batch/v1", "Job", "solo", 1);
    label(q, "jobset.sigs.k8s.io/jobset-name", "stale");
    assert_string_equal(gh_job_of_pod(q, jobs, buf, sizeof buf, &kind), "ml/solo");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_order),
        cmocka_unit_test(test_owners),
        cmocka_unit_test(test_child_job_through_cache),
        cmocka_unit_test(test_pod_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
