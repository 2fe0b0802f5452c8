/* scale.c - benchmark: gpuheal-controller at cluster scale, against a local
 * control plane (test/kube/up). Runs the real controller binary as a child
 * process with the service account of deploy/rbac/controller.yaml and
 * reports, from the child's /proc and the API server's audit log:
 *   1. initial sync time and RSS with N fake GPU nodes and M pods (Indexed-
 *      Job-like groups of 8-64) in its informers, and the creation rate;
 *   2. the request rate it puts on the API server at steady state;
 *   3. decision latency for an XID 79 on F distinct nodes in one ingest
 *      burst (ingest -> cordon seen through a watch), p50/p99;
 *   4. drain throughput: D nodes x P pods drained after one SXid each;
 * with, per kind of request, the API server's own time for it (p50, p90).
 * Prints figures; never fails on time. Without GH_KUBECONFIG it prints how
 * to run it and exits 0. Usage: see usage() and BENCHMARKS.md. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "kube/kubeconfig.h"
#include "kube/testenv.h"

#define SA_NS "gpuheal-system"
#define SA_NAME "gpuheal-controller"
#define NNS 4      /* pod namespaces */
#define NCAT 64    /* request categories counted */

static const char audit_policy[] =
    "apiVersion: audit.k8s.io/v1\n"
    "kind: Policy\n"
    "omitStages: [RequestReceived]\n"
    "rules:\n"
    "- level: Metadata\n"
    "  users: [\"system:serviceaccount:" SA_NS ":" SA_NAME "\"]\n"
    "- level: None\n";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: scale [--nodes N] [--pods M] [--faults F] [--drain-nodes D] [--drain-pods P]\n"
            "             [--steady S] [--qps Q] [--drain-qps Q] [--controller PATH]\n"
            "             [--executor-workers W] [--drain-concurrency C]\n"
            "             [--drain-evictions-in-flight E] --audit-log FILE\n"
            "       scale --print-audit-policy\n"
            "Needs GH_KUBECONFIG (admin) of a control plane started with the audit policy and\n"
            "deploy/namespace.yaml + deploy/rbac/controller.yaml applied:\n"
            "  build/bench/scale --print-audit-policy > /tmp/scale-audit.yaml\n"
            "  GH_KUBE_DIR=/tmp/scale-kube GH_KUBE_APISERVER_ARGS=\"--audit-policy-file=/tmp/"
            "scale-audit.yaml --audit-log-path=/tmp/scale-kube/audit.log --audit-log-format=json\" \\\n"
            "    GH_KUBE_KCM_ARGS=\"--controllers=*,-node-lifecycle-controller,"
            "-taint-eviction-controller\" \\\n"
            "    test/kube/up > /tmp/scale-kube.env\n"
            "  . /tmp/scale-kube.env && $GH_KUBE_BIN/kubectl apply -f deploy/namespace.yaml "
            "-f deploy/rbac/controller.yaml\n"
            "  GH_KUBECONFIG=$KUBECONFIG build/bench/scale --audit-log /tmp/scale-kube/audit.log\n"
            "  test/kube/down /tmp/scale-kube\n"
            "Defaults: 10000 nodes, 80000 pods, 1000 faults, 750 drain nodes x 15 pods, 60 s "
            "steady state, controller --qps 50 (--drain-qps: the same; another value restarts\n"
            "the controller with it before the drain); --executor-workers, --drain-concurrency\n"
            "and --drain-evictions-in-flight are passed to the controller when given (else its\n"
            "defaults).\n");
}

static int64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

static int64_t wall(void) { return gh_clock_now(gh_clock_real()); }

static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* "VmRSS:" etc. of pid from /proc/PID/status, in KiB; -1 when unknown. */
static long proc_kib(int pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) {
            v = strtol(line + kl, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static void print_mem(const char *when, int pid)
{
    printf("  controller memory %s: VmRSS %.1f MiB, VmHWM %.1f MiB, RssAnon %.1f MiB\n", when,
           (double)proc_kib(pid, "VmRSS:") / 1024, (double)proc_kib(pid, "VmHWM:") / 1024,
           (double)proc_kib(pid, "RssAnon:") / 1024);
}

/* ---- the API server's audit log (only the controller's service account
 * is logged): read incrementally, one JSON event per line */

struct audit_ev {
    const char *stage, *verb, *resource, *sub;
    int64_t received; /* requestReceivedTimestamp, ns */
    int64_t stage_at; /* stageTimestamp, ns; 0: unknown */
};

struct audit {
    FILE *f;
    char *line; /* owned, GH_AUDIT_LINE bytes */
};
#define AUDIT_LINE (256 * 1024)

typedef void (*audit_fn)(void *ud, const struct audit_ev *ev);

/* Feeds every complete new line to fn; a partial last line is left for the
 * next call. */
static void audit_scan(struct audit *a, audit_fn fn, void *ud)
{
    for (;;) {
        long at = ftell(a->f);
        if (!fgets(a->line, AUDIT_LINE, a->f)) {
            clearerr(a->f);
            return;
        }
        size_t len = strlen(a->line);
        if (len == 0 || a->line[len - 1] != '\n') {
            fseek(a->f, at, SEEK_SET);
            return;
        }
        json_t *j = json_loadb(a->line, len, 0, NULL);
        if (!j)
            continue;
        json_t *ref = json_object_get(j, "objectRef");
        const char *rt = json_string_value(json_object_get(j, "requestReceivedTimestamp"));
        const char *st = json_string_value(json_object_get(j, "stageTimestamp"));
        struct audit_ev ev = {json_string_value(json_object_get(j, "stage")),
                              json_string_value(json_object_get(j, "verb")),
                              json_string_value(json_object_get(ref, "resource")),
                              json_string_value(json_object_get(ref, "subresource")), 0, 0};
        if (st && !gh_time_parse_rfc3339(st, strlen(st), &ev.stage_at))
            ev.stage_at = 0;
        if (ev.stage && ev.verb && rt && gh_time_parse_rfc3339(rt, strlen(rt), &ev.received)) {
            if (!ev.resource)
                ev.resource = "-";
            fn(ud, &ev);
        }
        json_decref(j);
    }
}

/* A request counts once: a watch when its response starts, anything else
 * when it completes. */
static bool audit_counts(const struct audit_ev *ev)
{
    if (!strcmp(ev->verb, "watch"))
        return !strcmp(ev->stage, "ResponseStarted");
    return !strcmp(ev->stage, "ResponseComplete");
}

/* The API server's time for a request (received -> response complete), in
 * buckets growing by 10% from 0.1 ms: percentiles within 10%. */
#define LAT_BUCKETS 150
#define LAT_MIN_NS 100000.0
#define LAT_GROWTH 1.1

struct tally {
    int64_t from, to; /* window on requestReceivedTimestamp */
    long total;
    int ncat;
    char cat[NCAT][80];
    long n[NCAT];
    long lat[NCAT][LAT_BUCKETS]; /* not for watches */
};

static int lat_bucket(int64_t ns)
{
    int b = 0;
    for (double up = LAT_MIN_NS; (double)ns > up && b < LAT_BUCKETS - 1; up *= LAT_GROWTH)
        b++;
    return b;
}

/* The upper bound (ms) of the bucket holding the p-th percentile of h. */
static double lat_pct(const long *h, long n, int p)
{
    long want = (n * p + 99) / 100, seen = 0;
    double up = LAT_MIN_NS;
    for (int b = 0; b < LAT_BUCKETS; b++, up *= LAT_GROWTH) {
        seen += h[b];
        if (seen >= want)
            return up / 1e6;
    }
    return up / 1e6;
}

static void tally_ev(void *ud, const struct audit_ev *ev)
{
    struct tally *t = ud;
    if (!audit_counts(ev) || ev->received < t->from || ev->received >= t->to)
        return;
    char key[80];
    snprintf(key, sizeof key, "%s %s%s%s", ev->verb, ev->resource, ev->sub ? "/" : "",
             ev->sub ? ev->sub : "");
    t->total++;
    int i = 0;
    while (i < t->ncat && strcmp(t->cat[i], key))
        i++;
    if (i == t->ncat) {
        if (t->ncat == NCAT)
            return;
        snprintf(t->cat[t->ncat++], sizeof t->cat[0], "%s", key);
    }
    t->n[i]++;
    if (strcmp(ev->verb, "watch") && ev->stage_at >= ev->received)
        t->lat[i][lat_bucket(ev->stage_at - ev->received)]++;
}

static void tally_print(const struct tally *t)
{
    double secs = (double)(t->to - t->from) / 1e9;
    printf("  controller requests: %ld in %.1f s = %.2f req/s\n", t->total, secs,
           (double)t->total / secs);
    for (int i = 0; i < t->ncat; i++) {
        printf("    %-40s %6ld  (%.2f/s)", t->cat[i], t->n[i], (double)t->n[i] / secs);
        long nl = 0;
        for (int b = 0; b < LAT_BUCKETS; b++)
            nl += t->lat[i][b];
        if (nl)
            printf("  server time p50 %.1f ms, p90 %.1f ms", lat_pct(t->lat[i], nl, 50),
                   lat_pct(t->lat[i], nl, 90));
        printf("\n");
    }
}

/* The controller's watches on nodes and pods start right after their
 * initial (paginated) lists are complete: that is the sync. */
struct syncwatch {
    int64_t nodes, pods, first_list;
};

static void sync_ev(void *ud, const struct audit_ev *ev)
{
    struct syncwatch *s = ud;
    if (!strcmp(ev->verb, "list") && !s->first_list)
        s->first_list = ev->received;
    if (strcmp(ev->verb, "watch") || strcmp(ev->stage, "ResponseStarted"))
        return;
    if (!strcmp(ev->resource, "nodes") && !s->nodes)
        s->nodes = ev->received;
    if (!strcmp(ev->resource, "pods") && !s->pods)
        s->pods = ev->received;
}

/* ---- object creation through src/kube, many requests in flight */

struct creator {
    int outstanding, done, failed;
    char first_err[256];
};

static void created(void *ud, int rc, struct gh_kube_resp *resp, const struct gh_err *err)
{
    (void)resp;
    struct creator *cr = ud;
    cr->outstanding--;
    cr->done++;
    if (rc != GH_OK) {
        if (!cr->failed && err)
            snprintf(cr->first_err, sizeof cr->first_err, "%.250s", err->msg);
        cr->failed++;
    }
}

/* Submits a create of obj (stolen); keeps at most 200 in flight. */
static int submit_create(struct gh_kube_client *c, struct creator *cr, const struct gh_kube_res *res,
                         const char *ns, json_t *obj)
{
    struct gh_kube_req req;
    struct gh_kube_ref ref = {res, ns, NULL};
    struct gh_err err;
    int rc = obj ? gh_kube_req_create(&req, &ref, NULL, obj, &err) : GH_ENOMEM;
    json_decref(obj);
    if (!rc)
        rc = gh_kube_submit(c, &req, created, NULL, cr, NULL, &err);
    if (rc) {
        fprintf(stderr, "scale: create: %s\n", rc == GH_ENOMEM ? "out of memory" : err.msg);
        return rc;
    }
    cr->outstanding++;
    while (cr->outstanding >= 200)
        gh_kube_client_run(c, 100, NULL);
    return GH_OK;
}

struct cfg {
    int nodes, pods, faults, drain_nodes, drain_pods, steady_s;
    int workers, drain_conc, drain_total; /* controller flags; 0: its default */
    double qps, drain_qps;
    const char *controller, *audit_log;
    char tag[16];
    char ns[NNS][64];
};

static void node_name(const struct cfg *g, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "scale-%s-n%05d", g->tag, i);
}

/* Index of a node from its name, or -1. */
static int node_index(const char *name)
{
    const char *p = name ? strrchr(name, '-') : NULL;
    if (!p || p[1] != 'n')
        return -1;
    char *end;
    long v = strtol(p + 2, &end, 10);
    return *end ? -1 : (int)v;
}

static json_t *node_obj(const struct cfg *g, int i, const char *now)
{
    char name[96], zone[32];
    node_name(g, i, name, sizeof name);
    snprintf(zone, sizeof zone, "zone-%d", i % 4);
    json_t *labels = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "gpuheal.io/scale", g->tag,
                               "kubernetes.io/hostname", name, "kubernetes.io/os", "linux",
                               "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3",
                               "nvidia.com/gpu.count", "8", "topology.kubernetes.io/zone", zone);
    bool kwok = i < g->drain_nodes;
    if (labels && kwok)
        json_object_set_new(labels, "gpuheal.io/fake", json_string("true"));
    json_t *cap = json_pack("{s:s, s:s, s:s, s:s}", "cpu", "192", "memory", "2Ti", "pods", "110",
                            "nvidia.com/gpu", "8");
    json_t *status = json_pack("{s:o, s:O}", "capacity", cap, "allocatable", cap);
    /* kwok initialises the nodes it manages; the others are created Ready
     * (no kubelet heartbeats them: the node lifecycle controller is off) */
    if (status && !kwok)
        json_object_set_new(status, "conditions",
                            json_pack("[{s:s, s:s, s:s, s:s, s:s}]", "type", "Ready", "status",
                                      "True", "reason", "KubeletReady", "lastHeartbeatTime", now,
                                      "lastTransitionTime", now));
    return json_pack("{s:s, s:s, s:{s:s, s:o}, s:{}, s:o}", "apiVersion", "v1", "kind", "Node",
                     "metadata", "name", name, "labels", labels, "spec", "status", status);
}

/* Pod i: the first drain_nodes*drain_pods fill the drain nodes, the rest
 * go round the other nodes, so a job's ranks sit on consecutive nodes. */
static json_t *pod_obj(const struct cfg *g, int i, int job, int rank, const char **ns)
{
    int ndrain = g->drain_nodes * g->drain_pods;
    int node = i < ndrain ? i / g->drain_pods
                          : g->drain_nodes + (i - ndrain) % (g->nodes - g->drain_nodes);
    char name[64], nname[96], jname[32], idx[16];
    node_name(g, node, nname, sizeof nname);
    snprintf(jname, sizeof jname, "train-%05d", job);
    snprintf(name, sizeof name, "%s-%d", jname, rank);
    snprintf(idx, sizeof idx, "%d", rank);
    *ns = g->ns[job % NNS];
    json_t *labels = json_pack("{s:s, s:s, s:s, s:s}", "gpuheal.io/scale", g->tag,
                               "batch.kubernetes.io/job-name", jname,
                               "batch.kubernetes.io/job-completion-index", idx, "job-name", jname);
    if (labels && i < ndrain)
        json_object_set_new(labels, "gpuheal.io/drain", json_string(g->tag));
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:s, s:I, s:[{s:s, s:s, s:[s, s], "
                     "s:{s:{s:s}}}], s:[{s:s}]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                     *ns, "labels", labels, "spec", "nodeName", nname,
                     "terminationGracePeriodSeconds", (json_int_t)(i < ndrain ? 0 : 30),
                     "containers", "name", "trainer", "image", "registry.example/llm-train:2026.11",
                     "command", "torchrun", "train.py", "resources", "limits", "nvidia.com/gpu",
                     "1", "tolerations", "operator", "Exists");
}

static int create_all(struct gh_kube_client *c, const struct cfg *g)
{
    struct creator cr = {0};
    char now[GH_RFC3339_MAX];
    int64_t t = wall();
    gh_time_format_rfc3339(t - t % GH_NS_PER_S, now, sizeof now);
    char *dot = strchr(now, '.');
    if (dot)
        memcpy(dot, "Z", 2);
    int64_t t0 = mono();
    for (int i = 0; i < g->nodes; i++)
        if (submit_create(c, &cr, &gh_kube_res_nodes, NULL, node_obj(g, i, now)))
            return 1;
    static const int sizes[] = {8, 16, 32, 64, 8, 16, 8, 32};
    int job = 0, rank = 0, nsz = 0, njobs = 0;
    for (int i = 0; i < g->pods; i++) {
        if (rank == sizes[nsz % 8]) {
            job++;
            rank = 0;
            nsz++;
        }
        const char *ns;
        json_t *p = pod_obj(g, i, job, rank++, &ns);
        if (submit_create(c, &cr, &gh_kube_res_pods, ns, p))
            return 1;
        njobs = job + 1;
    }
    while (cr.outstanding > 0)
        gh_kube_client_run(c, 100, NULL);
    double secs = (double)(mono() - t0) / 1e9;
    printf("setup: %d nodes (%d kwok-managed), %d pods in %d jobs of 8-64 over %d namespaces: "
           "%d created, %d failed in %.1f s = %.0f objects/s (64 requests in flight)%s%s\n",
           g->nodes, g->drain_nodes, g->pods, njobs, NNS, cr.done - cr.failed, cr.failed, secs,
           (double)cr.done / (secs > 0 ? secs : 1), cr.failed ? "; first error: " : "",
           cr.first_err);
    return 0;
}

/* ---- the controller child */

struct child {
    int pid, port;
    char dir[64];
    int64_t started; /* wall ns */
};

/* Gets a token for the controller's service account and writes dir/
 * controller.kubeconfig (token, server and CA of the admin config). */
static int write_kubeconfig(struct gh_kube_client *c, const struct gh_kube_config *kc,
                            const char *dir)
{
    static const struct gh_kube_res sa = {"", "v1", "serviceaccounts", "ServiceAccount", true};
    struct gh_kube_ref ref = {&sa, SA_NS, SA_NAME};
    json_t *body = json_pack("{s:s, s:s, s:{s:I}}", "apiVersion", "authentication.k8s.io/v1",
                             "kind", "TokenRequest", "spec", "expirationSeconds",
                             (json_int_t)7200);
    struct gh_kube_req req;
    struct gh_kube_resp resp;
    memset(&resp, 0, sizeof resp);
    struct gh_err err = {{0}};
    int rc = body ? gh_kube_req_create(&req, &ref, "token", body, &err) : GH_ENOMEM;
    json_decref(body);
    if (!rc)
        rc = gh_kube_call(c, &req, &resp, &err);
    const char *tok = rc ? NULL : gh_kube_json_str(resp.body, "status", "token");
    if (!tok) {
        fprintf(stderr, "scale: no token for %s/%s (%s); apply deploy/namespace.yaml and "
                        "deploy/rbac/controller.yaml first\n", SA_NS, SA_NAME, err.msg);
        gh_kube_resp_clear(&resp);
        return 1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/ca.crt", dir);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(kc->ca_pem.data, 1, kc->ca_pem.len, f) != kc->ca_pem.len) {
        if (f)
            fclose(f);
        gh_kube_resp_clear(&resp);
        return 1;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/controller.kubeconfig", dir);
    f = fopen(path, "w");
    if (!f) {
        gh_kube_resp_clear(&resp);
        return 1;
    }
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: scale\n  cluster:\n"
            "    server: %s\n    certificate-authority: %s/ca.crt\nusers:\n- name: sa\n  user:\n"
            "    token: %s\ncontexts:\n- name: scale\n  context: {cluster: scale, user: sa}\n"
            "current-context: scale\n",
            kc->server, dir, tok);
    fclose(f);
    gh_kube_resp_clear(&resp);
    return 0;
}

static int start_controller(struct child *ch, const struct cfg *g, double qps)
{
    double qpsv = qps;
    char kcfg[128], tok[128], db[128], sel[64], qps_s[32], out[128], log[128];
    snprintf(kcfg, sizeof kcfg, "%s/controller.kubeconfig", ch->dir);
    snprintf(tok, sizeof tok, "%s/token", ch->dir);
    snprintf(db, sizeof db, "sqlite:%s/audit.db", ch->dir);
    snprintf(sel, sizeof sel, "gpuheal.io/scale=%s", g->tag);
    snprintf(qps_s, sizeof qps_s, "%g", qpsv);
    snprintf(out, sizeof out, "%s/controller.out", ch->dir);
    snprintf(log, sizeof log, "%s/controller.log", ch->dir);
    FILE *tf = fopen(tok, "w");
    if (!tf)
        return 1;
    fputs("scale-bench-token\n", tf);
    fclose(tf);
    const char *argv[32] = {g->controller, "--kubeconfig", kcfg, "--listen", "127.0.0.1:0",
                            "--token-file", tok, "--db", db, "--node-selector", sel,
                            "--max-unavailable", "100%", "--max-actions-per-hour", "0",
                            "--node-cooldown", "0s", "--storm-nodes", "0", "--qps", qps_s,
                            "--identity", "scale-bench", "--log-level", "info", NULL};
    /* the drain's knobs, only when given (an older controller lacks some) */
    char wk[16], dc[16], de[16];
    int na = 25;
    _Static_assert(sizeof argv / sizeof argv[0] >= 25 + 6 + 1, "argv room");
    snprintf(wk, sizeof wk, "%d", g->workers);
    snprintf(dc, sizeof dc, "%d", g->drain_conc);
    snprintf(de, sizeof de, "%d", g->drain_total);
    if (g->workers > 0) {
        argv[na++] = "--executor-workers";
        argv[na++] = wk;
    }
    if (g->drain_conc > 0) {
        argv[na++] = "--drain-concurrency";
        argv[na++] = dc;
    }
    if (g->drain_total > 0) {
        argv[na++] = "--drain-evictions-in-flight";
        argv[na++] = de;
    }
    argv[na] = NULL;
    ch->started = wall();
    ch->port = 0;
    int pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int l = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (o < 0 || l < 0 || dup2(o, 1) < 0 || dup2(l, 2) < 0)
            _exit(127);
        execv(g->controller, (char *const *)argv);
        _exit(127);
    }
    ch->pid = pid;
    /* its port: the line "listening on port N" */
    for (int i = 0; i < 600 && !ch->port; i++) {
        usleep(100 * 1000);
        FILE *f = fopen(out, "r");
        char line[128];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "listening on port ", 18) && strchr(line, '\n'))
                ch->port = (int)strtol(line + 18, NULL, 10);
        if (f)
            fclose(f);
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fprintf(stderr, "scale: the controller exited; see %s\n", log);
            ch->pid = 0;
            return 1;
        }
    }
    return ch->port ? 0 : 1;
}

static void stop_controller(struct child *ch)
{
    if (ch->pid <= 0)
        return;
    kill(ch->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(ch->pid, NULL, WNOHANG) == ch->pid) {
            ch->pid = 0;
            return;
        }
        usleep(100 * 1000);
    }
    kill(ch->pid, SIGKILL);
    waitpid(ch->pid, NULL, 0);
    ch->pid = 0;
}

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* POSTs body (ndjson) to the controller's ingest endpoint. */
static long post_signals(const struct child *ch, const char *body, size_t len)
{
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/signals", ch->port);
    CURL *cu = curl_easy_init();
    if (!cu)
        return 0;
    struct curl_slist *hdr = curl_slist_append(NULL, "Authorization: Bearer scale-bench-token");
    hdr = curl_slist_append(hdr, "Content-Type: application/x-ndjson");
    curl_easy_setopt(cu, CURLOPT_URL, url);
    curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, sink);
    long code = 0;
    if (curl_easy_perform(cu) == CURLE_OK)
        curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(cu);
    return code;
}

/* One signal line per node in [first, first+n): kind "xid" (code 79) or
 * "sxid". Returns a malloc'd body. */
static char *signal_lines(const struct cfg *g, int first, int n, bool sxid, size_t *len)
{
    size_t cap = (size_t)n * 400 + 1, at = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    char ts[GH_RFC3339_MAX], name[96];
    gh_time_format_rfc3339(wall(), ts, sizeof ts);
    for (int i = first; i < first + n; i++) {
        node_name(g, i, name, sizeof name);
        int w = sxid ? snprintf(b + at, cap - at,
                                "{\"ts\":\"%s\",\"node\":\"%s\",\"source\":\"kmsg\",\"kind\":"
                                "\"sxid\",\"code\":12028,\"msg\":\"nvidia-nvswitch0: SXid "
                                "(PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted "
                                "PRIV error\",\"id\":\"scale-%s-sxid-%d\"}\n",
                                ts, name, g->tag, i)
                     : snprintf(b + at, cap - at,
                                "{\"ts\":\"%s\",\"node\":\"%s\",\"gpu\":0,\"source\":\"kmsg\","
                                "\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid "
                                "(PCI:0000:3b:00): 79, GPU has fallen off the bus.\",\"id\":"
                                "\"scale-%s-xid-%d\"}\n",
                                ts, name, g->tag, i);
        if (w < 0 || (size_t)w >= cap - at) {
            free(b);
            return NULL;
        }
        at += (size_t)w;
    }
    *len = at;
    return b;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pct(const int64_t *v, int n, int p)
{
    int i = (n * p) / 100;
    return v[i >= n ? n - 1 : i];
}

/* ---- watch-side state of the bench */

struct seen {
    const struct cfg *g;
    int64_t *cordoned; /* by node index; 0: not yet */
    int *pods_left;    /* drain pods per drain node */
    int64_t *drained;  /* drain node emptied at */
    int ncordoned, ndrained, pods_gone;
    int64_t first_gone, last_gone;
};

static void node_upd(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    struct seen *s = ud;
    if (!json_is_true(json_object_get(json_object_get(obj, "spec"), "unschedulable")))
        return;
    int i = node_index(gh_kube_meta_name(obj));
    if (i >= 0 && i < s->g->nodes && !s->cordoned[i]) {
        s->cordoned[i] = mono();
        s->ncordoned++;
    }
}
static void node_add(void *ud, const json_t *obj) { node_upd(ud, NULL, obj); }

static void pod_gone(void *ud, const json_t *obj)
{
    struct seen *s = ud;
    int i = node_index(gh_kube_json_str(obj, "spec", "nodeName"));
    if (i < 0 || i >= s->g->drain_nodes)
        return;
    int64_t t = mono();
    if (!s->first_gone)
        s->first_gone = t;
    s->last_gone = t;
    s->pods_gone++;
    if (--s->pods_left[i] == 0) {
        s->drained[i] = t;
        s->ndrained++;
    }
}

static bool synced(void *ud) { return gh_kube_informer_synced(ud); }

struct until_n {
    const int *have;
    int want;
};
static bool reached(void *ud)
{
    const struct until_n *u = ud;
    return *u->have >= u->want;
}

/* ---- phases */

static void phase_sync(struct audit *a, const struct child *ch, const char *label)
{
    struct syncwatch sw = {0};
    int64_t dl = mono() + 600 * GH_NS_PER_S;
    long hwm = 0;
    while ((!sw.nodes || !sw.pods) && mono() < dl) {
        audit_scan(a, sync_ev, &sw);
        long r = proc_kib(ch->pid, "VmRSS:");
        if (r > hwm)
            hwm = r;
        usleep(100 * 1000);
    }
    if (!sw.nodes || !sw.pods) {
        printf("%s initial sync: not seen within 600 s (no watch in the audit log)\n", label);
        return;
    }
    int64_t done = sw.nodes > sw.pods ? sw.nodes : sw.pods;
    printf("%s initial sync (process start -> watches of nodes and pods opened, i.e. every "
           "list page taken in): %.2f s (first list %.2f s after start; node informer %.2f s, "
           "pod informer %.2f s)\n",
           label, (double)(done - ch->started) / 1e9, (double)(sw.first_list - ch->started) / 1e9,
           (double)(sw.nodes - ch->started) / 1e9, (double)(sw.pods - ch->started) / 1e9);
    print_mem("at sync", ch->pid);
    usleep(5000 * 1000);
    print_mem("5 s after sync", ch->pid);
}

static void phase_steady(struct audit *a, const struct child *ch, const struct cfg *g)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    t.from = wall();
    usleep((useconds_t)g->steady_s * 1000 * 1000);
    t.to = wall();
    usleep(1000 * 1000); /* the audit log catches up */
    audit_scan(a, tally_ev, &t);
    printf("2. steady state, no faults, %d nodes / %d pods, %d s:\n", g->nodes, g->pods,
           g->steady_s);
    tally_print(&t);
    print_mem("after steady state", ch->pid);
}

static void phase_faults(struct audit *a, const struct child *ch, const struct cfg *g,
                         struct gh_kube_client *wc, struct seen *s)
{
    int first = g->drain_nodes, n = g->faults;
    if (first + n > g->nodes)
        n = g->nodes - first;
    size_t len = 0;
    char *body = signal_lines(g, first, n, false, &len);
    if (!body || n <= 0)
        return;
    struct tally t;
    memset(&t, 0, sizeof t);
    t.from = wall();
    int64_t sent = mono();
    long code = post_signals(ch, body, len);
    int64_t posted = mono();
    free(body);
    int want = s->ncordoned + n;
    struct until_n u = {&s->ncordoned, want};
    gh_kube_testenv_until(wc, reached, &u, (int64_t)n * 500 + 60000);
    t.to = wall();
    int64_t *lat = calloc((size_t)n, sizeof *lat);
    int got = 0;
    for (int i = first; lat && i < first + n; i++)
        if (s->cordoned[i])
            lat[got++] = s->cordoned[i] - sent;
    printf("3. %d XID 79 on %d distinct nodes in one POST (HTTP %ld, %.1f ms; default reorder "
           "window 2 s; guards: --max-unavailable 100%% --storm-nodes 0 --max-actions-per-hour "
           "0 --node-cooldown 0s; controller --qps %g):\n",
           n, n, code, (double)(posted - sent) / 1e6, g->qps);
    if (got) {
        qsort(lat, (size_t)got, sizeof *lat, cmp64);
        printf("  ingest -> cordon seen by a watch: %d/%d nodes, p50 %.2f s, p99 %.2f s, max "
               "%.2f s (target p99 <= 10 s: %s)\n",
               got, n, (double)pct(lat, got, 50) / 1e9, (double)pct(lat, got, 99) / 1e9,
               (double)lat[got - 1] / 1e9, got == n && pct(lat, got, 99) <= 10 * GH_NS_PER_S
                                               ? "met"
                                               : "NOT met");
    } else {
        printf("  no cordon seen within 600 s\n");
    }
    free(lat);
    usleep(1000 * 1000);
    audit_scan(a, tally_ev, &t);
    tally_print(&t);
    print_mem("after the burst", ch->pid);
}

static void phase_drain(struct audit *a, const struct child *ch, const struct cfg *g,
                        struct gh_kube_client *wc, struct seen *s)
{
    int n = g->drain_nodes;
    size_t len = 0;
    char *body = signal_lines(g, 0, n, true, &len);
    if (!body || n <= 0)
        return;
    struct tally t;
    memset(&t, 0, sizeof t);
    t.from = wall();
    int64_t sent = mono();
    long code = post_signals(ch, body, len);
    free(body);
    struct until_n u = {&s->ndrained, n};
    gh_kube_testenv_until(wc, reached, &u, (int64_t)n * 900 + 60000);
    t.to = wall();
    double secs = (double)((s->ndrained == n ? s->last_gone : mono()) - sent) / 1e9;
    char knobs[160];
    snprintf(knobs, sizeof knobs, "%s%.0d%s%.0d%s%.0d", g->workers ? " --executor-workers " : "",
             g->workers, g->drain_conc ? " --drain-concurrency " : "", g->drain_conc,
             g->drain_total ? " --drain-evictions-in-flight " : "", g->drain_total);
    printf("4. drain: one SXid on each of %d kwok nodes x %d pods in one POST (HTTP %ld; policy "
           "rule nvswitch-error: drain_node, run_diagnostics; controller --qps %g%s; load "
           "average %.2f):\n",
           n, g->drain_pods, code, g->drain_qps, knobs[0] ? knobs : " (drain defaults)", load1());
    printf("  %d/%d nodes drained, %d/%d pods gone (seen by a watch) in %.1f s: %.1f nodes/min, "
           "%.1f evictions/s (first to last pod gone: %.1f s)\n",
           s->ndrained, n, s->pods_gone, n * g->drain_pods, secs,
           (double)s->ndrained / (secs > 0 ? secs : 1) * 60,
           (double)s->pods_gone / (secs > 0 ? secs : 1),
           (double)(s->last_gone - s->first_gone) / 1e9);
    usleep(1000 * 1000);
    audit_scan(a, tally_ev, &t);
    tally_print(&t);
    print_mem("after the drain", ch->pid);
}

static int parse_args(int argc, char **argv, struct cfg *g)
{
    for (int i = 1; i < argc; i += 2) { /* "--flag value" pairs */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *ip = !strcmp(a, "--nodes")         ? &g->nodes
                  : !strcmp(a, "--pods")        ? &g->pods
                  : !strcmp(a, "--faults")      ? &g->faults
                  : !strcmp(a, "--drain-nodes") ? &g->drain_nodes
                  : !strcmp(a, "--drain-pods")  ? &g->drain_pods
                  : !strcmp(a, "--steady")      ? &g->steady_s
                  : !strcmp(a, "--executor-workers")          ? &g->workers
                  : !strcmp(a, "--drain-concurrency")         ? &g->drain_conc
                  : !strcmp(a, "--drain-evictions-in-flight") ? &g->drain_total
                                                              : NULL;
        if (!strcmp(a, "--print-audit-policy")) {
            fputs(audit_policy, stdout);
            return 0;
        }
        if (!v)
            return 2;
        if (ip)
            *ip = (int)strtol(v, NULL, 10);
        else if (!strcmp(a, "--qps"))
            g->qps = strtod(v, NULL);
        else if (!strcmp(a, "--drain-qps"))
            g->drain_qps = strtod(v, NULL);
        else if (!strcmp(a, "--controller"))
            g->controller = v;
        else if (!strcmp(a, "--audit-log"))
            g->audit_log = v;
        else
            return 2;
    }
    if (g->nodes < 1 || g->pods < 0 || g->faults < 0 || g->drain_nodes < 0 ||
        g->drain_pods < 1 || g->drain_nodes >= g->nodes ||
        g->drain_nodes * g->drain_pods > g->pods || g->steady_s < 1 || g->qps == 0 ||
        g->workers < 0 || g->drain_conc < 0 || g->drain_total < 0)
        return 2;
    if (g->drain_qps == 0)
        g->drain_qps = g->qps;
    return 1;
}

int main(int argc, char **argv)
{
    struct cfg g = {.nodes = 10000, .pods = 80000, .faults = 1000, .drain_nodes = 750,
                    .drain_pods = 15, .steady_s = 60, .qps = 50};
    char ctlpath[512];
    snprintf(ctlpath, sizeof ctlpath, "%.480s", argv[0]);
    char *slash = strrchr(ctlpath, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(ctlpath, sizeof ctlpath, ".");
    size_t cl = strlen(ctlpath);
    snprintf(ctlpath + cl, sizeof ctlpath - cl, "/../bin/gpuheal-controller");
    g.controller = ctlpath;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int pa = parse_args(argc, argv, &g);
    if (pa != 1) {
        if (pa == 2)
            usage(stderr);
        return pa;
    }
    const char *kpath = getenv("GH_KUBECONFIG");
    if (!kpath || !*kpath || !g.audit_log) {
        printf("scale: needs a control plane (GH_KUBECONFIG) and its audit log; not run.\n");
        usage(stdout);
        return 0;
    }
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    struct gh_err err = {{0}};
    struct gh_kube_client *c = NULL, *wc = NULL;
    struct gh_kube_client_opts fast = {.qps = -1, .max_inflight = 64, .request_timeout_ms = 120000};
    if (gh_kubeconfig_load(kpath, NULL, &kc, &err) || gh_kube_testenv_client(&fast, &c, &err) ||
        gh_kube_testenv_client(NULL, &wc, &err)) {
        fprintf(stderr, "scale: %s\n", err.msg);
        return 1;
    }
    struct audit a = {fopen(g.audit_log, "r"), malloc(AUDIT_LINE)};
    if (!a.f || !a.line) {
        fprintf(stderr, "scale: cannot read %s\n", g.audit_log);
        return 1;
    }
    fseek(a.f, 0, SEEK_END);
    struct child ch = {0};
    snprintf(ch.dir, sizeof ch.dir, "/tmp/gh-scale-XXXXXX");
    if (!mkdtemp(ch.dir) || write_kubeconfig(c, &kc, ch.dir))
        return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(g.tag, sizeof g.tag, "%06x", (unsigned)(gh_kube_client_rand(c) & 0xffffff));
    for (int i = 0; i < NNS; i++) {
        char pre[32];
        snprintf(pre, sizeof pre, "scale-%s", g.tag);
        if (gh_kube_testenv_namespace(c, pre, g.ns[i], sizeof g.ns[i], &err)) {
            fprintf(stderr, "scale: %s\n", err.msg);
            return 1;
        }
    }
    printf("scale: tag %s, controller %s, state %s, load average %.2f, %ld CPUs online\n", g.tag,
           g.controller, ch.dir, load1(), sysconf(_SC_NPROCESSORS_ONLN));
    if (create_all(c, &g))
        return 1;
    sleep(5); /* kwok settles the drain pods */
    printf("load average before the controller starts: %.2f\n", load1());
    int rc = start_controller(&ch, &g, g.qps);
    if (rc) {
        fprintf(stderr, "scale: controller did not start (%s/controller.log)\n", ch.dir);
    } else {
        phase_sync(&a, &ch, "1.");
        phase_steady(&a, &ch, &g);
        /* the bench's own watches: cordons on every node, drain pods */
        struct seen s = {.g = &g,
                         .cordoned = calloc((size_t)g.nodes, sizeof(int64_t)),
                         .pods_left = calloc((size_t)g.drain_nodes + 1, sizeof(int)),
                         .drained = calloc((size_t)g.drain_nodes + 1, sizeof(int64_t))};
        char nsel[64], psel[64];
        snprintf(nsel, sizeof nsel, "gpuheal.io/scale=%s", g.tag);
        snprintf(psel, sizeof psel, "gpuheal.io/drain=%s", g.tag);
        static const char *const nkeep[] = {"/spec/unschedulable"};
        static const char *const pkeep[] = {"/spec/nodeName"};
        struct gh_kube_informer_opts no = {.res = &gh_kube_res_nodes, .label_selector = nsel,
                                           .keep = nkeep, .nkeep = 1};
        struct gh_kube_informer_opts po = {.res = &gh_kube_res_pods, .label_selector = psel,
                                           .keep = pkeep, .nkeep = 1};
        struct gh_kube_handlers hn = {node_add, node_upd, NULL, NULL, NULL};
        struct gh_kube_handlers hp = {NULL, NULL, pod_gone, NULL, NULL};
        struct gh_kube_informer *ni = NULL, *pi = NULL;
        if (!s.cordoned || !s.pods_left || !s.drained ||
            gh_kube_informer_new(wc, &no, &hn, &s, &ni, &err) ||
            gh_kube_informer_new(wc, &po, &hp, &s, &pi, &err) ||
            gh_kube_informer_start(ni, &err) || gh_kube_informer_start(pi, &err)) {
            fprintf(stderr, "scale: watches: %s\n", err.msg);
            rc = 1;
        } else {
            gh_kube_testenv_until(wc, synced, ni, 300000);
            gh_kube_testenv_until(wc, synced, pi, 300000);
            for (int i = 0; i < g.drain_nodes; i++)
                s.pods_left[i] = g.drain_pods;
            if (g.faults > 0)
                phase_faults(&a, &ch, &g, wc, &s);
            if (g.drain_nodes > 0 && g.drain_qps != g.qps) {
                /* the drain under its own QPS budget: a new controller
                 * process (it remembers the incidents in its audit store) */
                stop_controller(&ch);
                printf("restarting the controller with --qps %g for the drain\n", g.drain_qps);
                if (start_controller(&ch, &g, g.drain_qps)) {
                    fprintf(stderr, "scale: controller did not restart\n");
                    rc = 1;
                } else {
                    phase_sync(&a, &ch, "  restart:");
                }
            }
            if (g.drain_nodes > 0 && !rc)
                phase_drain(&a, &ch, &g, wc, &s);
        }
        gh_kube_informer_free(pi);
        gh_kube_informer_free(ni);
        free(s.cordoned);
        free(s.pods_left);
        free(s.drained);
        print_mem("at the end", ch.pid);
        stop_controller(&ch);
    }
    /* cleanup: the nodes by label, the namespaces take their pods */
    struct gh_kube_ref nref = {&gh_kube_res_nodes, NULL, NULL};
    char sel[64];
    snprintf(sel, sizeof sel, "gpuheal.io/scale=%s", g.tag);
    struct gh_kube_list_opts lo = {.label_selector = sel};
    if (gh_kube_delete_collection(c, &nref, &lo, NULL, NULL, &err))
        fprintf(stderr, "scale: cleanup nodes: %s\n", err.msg);
    for (int i = 0; i < NNS; i++)
        gh_kube_testenv_drop_namespace(c, g.ns[i], NULL);
    printf("scale: done (controller files kept in %s)\n", ch.dir);
    fclose(a.f);
    free(a.line);
    gh_kube_client_free(wc);
    gh_kube_client_free(c);
    gh_kube_config_clear(&kc);
    curl_global_cleanup();
    return rc;
}
