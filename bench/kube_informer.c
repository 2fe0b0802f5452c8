/* kube_informer.c - benchmark: memory per cached Node and Pod in the
 * informer, and initial list+watch sync time, for N nodes and M pods created
 * in the local control plane (test/kube). Prints figures; never fails on
 * them. Usage: kube_informer [NODES [PODS]] (default 10000 80000), with
 * GH_KUBECONFIG (or KUBECONFIG) pointing at the control plane. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/api.h"
#include "kube/informer.h"
#include "kube/testenv.h"

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

struct creator {
    int outstanding, done, failed;
    char first_err[512];
};

static void created(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)resp;
    struct creator *cr = ud;
    cr->outstanding--;
    cr->done++;
    if (rc && rc != GH_OK) {
        if (!cr->failed && err)
            snprintf(cr->first_err, sizeof cr->first_err, "%s", err->msg);
        cr->failed++;
    }
}

static int submit_create(struct gh_kube_client *c, struct creator *cr, const struct gh_kube_res *res,
                         const char *ns, json_t *obj)
{
    struct gh_kube_req req;
    struct gh_kube_ref ref = {res, ns, NULL};
    struct gh_err err;
    int rc = gh_kube_req_create(&req, &ref, NULL, obj, &err);
    json_decref(obj);
    if (!rc)
        rc = gh_kube_submit(c, &req, created, NULL, cr, NULL, &err);
    if (rc) {
        fprintf(stderr, "submit: %s\n", err.msg);
        return rc;
    }
    cr->outstanding++;
    while (cr->outstanding >= 200)
        gh_kube_client_run(c, 100, NULL);
    return GH_OK;
}

static json_t *node_obj(const char *tag, int i)
{
    char name[128], zone[32];
    snprintf(name, sizeof name, "bench-%s-node-%05d", tag, i);
    snprintf(zone, sizeof zone, "zone-%d", i % 4);
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}}, s:{s:[{s:s, s:s}]}}",
                     "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
                     "gpuheal.io/bench", tag, "kubernetes.io/hostname", name,
                     "kubernetes.io/os", "linux", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3",
                     "nvidia.com/gpu.count", "8", "topology.kubernetes.io/zone", zone, "spec",
                     "taints", "key", "gpuheal.io/bench", "effect", "NoSchedule");
}

static json_t *pod_obj(const char *tag, const char *ns, int i, int nodes)
{
    char name[64], node[128], job[64], rank[16];
    snprintf(name, sizeof name, "job-%05d-worker-%d", i / 8, i % 8);
    snprintf(node, sizeof node, "bench-%s-node-%05d", tag, i % nodes);
    snprintf(job, sizeof job, "job-%05d", i / 8);
    snprintf(rank, sizeof rank, "%d", i % 8);
    return json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:{s:s, s:[{s:s, s:s, s:[s, s], s:{s:{s:s}}}],"
        " s:[{s:s}]}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns, "labels",
        "gpuheal.io/bench", tag, "batch.kubernetes.io/job-name", job,
        "batch.kubernetes.io/job-completion-index", rank, "spec", "nodeName", node, "containers",
        "name", "trainer", "image", "registry.example/llm-train:2026.11", "command", "torchrun",
        "train.py", "resources", "limits", "nvidia.com/gpu", "1", "tolerations", "operator",
        "Exists");
}

static bool synced(void *ud) { return gh_kube_informer_synced(ud); }

static void report(const char *what, struct gh_kube_informer *inf, double secs, long rss0)
{
    struct gh_kube_store_stats st;
    gh_kube_store_stats(gh_kube_informer_store(inf), &st);
    size_t n = st.objects ? st.objects : 1;
    printf("%-5s objects=%zu sync_s=%.2f kept_text_B/obj=%.0f heap_B/obj=%.0f "
           "overhead_beyond_text_B/obj=%.0f index_buckets=%zu rss_delta_KiB=%ld\n",
           what, st.objects, secs, (double)st.text_bytes / (double)n,
           (double)st.heap_bytes / (double)n, (double)(st.heap_bytes - st.text_bytes) / (double)n,
           st.index_buckets, rss_kib() - rss0);
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 10000;
    int pods = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 80000;
    if (nodes <= 0 || pods < 0) {
        fprintf(stderr, "usage: %s [NODES [PODS]]\n", argv[0]);
        return 2;
    }
    struct gh_err err = {{0}};
    struct gh_kube_client *c = NULL;
    struct gh_kube_client_opts fast = {.qps = -1, .max_inflight = 64, .request_timeout_ms = 120000};
    if (gh_kube_testenv_client(&fast, &c, &err)) {
        fprintf(stderr, "kube_informer: %s\n", err.msg);
        return 1;
    }
    char ns[64];
    if (gh_kube_testenv_namespace(c, "bench", ns, sizeof ns, &err)) {
        fprintf(stderr, "kube_informer: %s\n", err.msg);
        return 1;
    }
    const char *tag = ns + strlen("bench-");
    char sel[96];
    snprintf(sel, sizeof sel, "gpuheal.io/bench=%s", tag);

    struct creator cr = {0};
    double t0 = mono_s();
    for (int i = 0; i < nodes; i++)
        if (submit_create(c, &cr, &gh_kube_res_nodes, NULL, node_obj(tag, i)))
            break;
    for (int i = 0; i < pods; i++)
        if (submit_create(c, &cr, &gh_kube_res_pods, ns, pod_obj(tag, ns, i, nodes)))
            break;
    while (cr.outstanding > 0)
        gh_kube_client_run(c, 100, NULL);
    double tc = mono_s() - t0;
    printf("setup nodes=%d pods=%d created=%d failed=%d in %.1fs (%.0f/s)%s%s\n", nodes, pods,
           cr.done - cr.failed, cr.failed, tc, cr.done / (tc > 0 ? tc : 1),
           cr.failed ? " first error: " : "", cr.first_err);

    /* the informers a controller would run, keeping what gpuheal reads */
    static const char *const keep_node[] = {"/metadata/labels", "/spec/unschedulable",
                                            "/spec/taints", "/status/conditions",
                                            "/status/allocatable"};
    static const char *const keep_pod[] = {"/metadata/labels", "/metadata/ownerReferences",
                                           "/metadata/deletionTimestamp", "/spec/nodeName",
                                           "/status/phase", "/status/reason",
                                           "/status/containerStatuses"};
    static const struct gh_kube_index_spec pod_idx[] = {
        {"node", {"/spec/nodeName", NULL}},
        {"job", {"/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name",
                 "/metadata/labels/jobset.sigs.k8s.io~1jobset-name", NULL}},
    };
    struct gh_kube_client *ic = NULL;
    if (gh_kube_testenv_client(NULL, &ic, &err)) {
        fprintf(stderr, "kube_informer: %s\n", err.msg);
        return 1;
    }
    struct gh_kube_informer_opts no = {.res = &gh_kube_res_nodes, .label_selector = sel,
                                       .keep = keep_node, .nkeep = 5};
    struct gh_kube_informer_opts po = {.res = &gh_kube_res_pods, .label_selector = sel,
                                       .keep = keep_pod, .nkeep = 7, .indexes = pod_idx,
                                       .nindexes = 2};
    struct gh_kube_informer *ni = NULL, *pi = NULL;
    long rss0 = rss_kib();
    if (gh_kube_informer_new(ic, &no, NULL, NULL, &ni, &err) ||
        gh_kube_informer_start(ni, &err)) {
        fprintf(stderr, "kube_informer: %s\n", err.msg);
        return 1;
    }
    t0 = mono_s();
    gh_kube_testenv_until(ic, synced, ni, 600000);
    report("node", ni, mono_s() - t0, rss0);
    rss0 = rss_kib();
    if (gh_kube_informer_new(ic, &po, NULL, NULL, &pi, &err) ||
        gh_kube_informer_start(pi, &err)) {
        fprintf(stderr, "kube_informer: %s\n", err.msg);
        return 1;
    }
    t0 = mono_s();
    gh_kube_testenv_until(ic, synced, pi, 600000);
    report("pod", pi, mono_s() - t0, rss0);
    const struct gh_kube_store *ps = gh_kube_informer_store(pi);
    char node0[128];
    snprintf(node0, sizeof node0, "bench-%s-node-%05d", tag, 0);
    printf("index: pods on %s: %zu; pods of job-00000: %zu\n", node0,
           gh_kube_store_index_count(ps, "node", node0),
           gh_kube_store_index_count(ps, "job", "job-00000"));

    gh_kube_informer_free(pi);
    gh_kube_informer_free(ni);
    gh_kube_client_free(ic);
    /* cleanup: the namespace takes its pods; the nodes go by label */
    struct gh_kube_ref nref = {&gh_kube_res_nodes, NULL, NULL};
    struct gh_kube_list_opts lo = {.label_selector = sel};
    if (gh_kube_delete_collection(c, &nref, &lo, NULL, NULL, &err))
        fprintf(stderr, "cleanup nodes: %s\n", err.msg);
    gh_kube_testenv_drop_namespace(c, ns, NULL);
    gh_kube_client_free(c);
    return 0;
}
