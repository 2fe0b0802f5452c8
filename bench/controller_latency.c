/* controller_latency.c - benchmark: decision latency of gpuheal-controller
 * from the ingest of one fault signal (XID 79) to the node's cordon seen
 * through a watch, p50/p99 over many faults, each on its own node, for a
 * few reorder windows, one fault at a time (0.7 s apart, so that each finds
 * the controller idle). Runs the controller in-process against the control
 * plane named by $GH_KUBECONFIG (test/kube/up).
 *
 *   GH_KUBECONFIG=... build/bench/controller_latency [FAULTS] [WINDOW_MS...]
 *
 * Prints figures; never fails on time. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "control/controller.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "kube/kubeconfig.h"
#include "kube/testenv.h"

#define MAXF 1000

struct bench {
    struct gh_kube_client *c;
    char ns[64];
    int n;
    int64_t sent[MAXF], seen[MAXF];
    char names[MAXF][96];
};

static int64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

static void on_node(void *ud, const json_t *old, const json_t *obj)
{
    (void)old;
    struct bench *b = ud;
    if (!json_is_true(json_object_get(json_object_get(obj, "spec"), "unschedulable")))
        return;
    const char *name = gh_kube_meta_name(obj);
    for (int i = 0; i < b->n; i++)
        if (name && !b->seen[i] && !strcmp(name, b->names[i]))
            b->seen[i] = mono();
}

static void on_add(void *ud, const json_t *obj) { on_node(ud, NULL, obj); }

struct run {
    struct gh_controller *ctl;
    int stop;
};

static void *run_controller(void *arg)
{
    struct run *r = arg;
    struct gh_err err;
    if (gh_controller_run(r->ctl, r->stop, &err))
        fprintf(stderr, "controller: %s\n", err.msg);
    return NULL;
}

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool seen_one(void *ud)
{
    int64_t *p = ud;
    return *p != 0;
}

static int bench_window(struct gh_kube_config *kc, int faults, int64_t window_ns,
                        const char *token_file)
{
    struct bench *b = calloc(1, sizeof *b);
    struct gh_err err = {{0}};
    if (!b || gh_kube_testenv_client(NULL, &b->c, &err) ||
        gh_kube_testenv_namespace(b->c, "bench-ctl", b->ns, sizeof b->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return 1;
    }
    b->n = faults;
    char sel[128], dbpath[128], db[160];
    snprintf(sel, sizeof sel, "gpuheal.io/pool=%s", b->ns);
    snprintf(dbpath, sizeof dbpath, "/tmp/%s.db", b->ns);
    snprintf(db, sizeof db, "sqlite:%s", dbpath);
    for (int i = 0; i < faults; i++) {
        snprintf(b->names[i], sizeof b->names[i], "%s-n%d", b->ns, i);
        json_t *n = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "apiVersion",
                              "v1", "kind", "Node", "metadata", "name", b->names[i], "labels",
                              "gpuheal.io/pool", b->ns, "spec", "taints", "key",
                              "gpuheal.io/test-only", "effect", "NoSchedule");
        struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, NULL};
        if (gh_kube_create(b->c, &ref, n, NULL, NULL, &err))
            fprintf(stderr, "node: %s\n", err.msg);
        json_decref(n);
    }
    /* the watch that sees the cordons */
    struct gh_kube_informer *inf = NULL;
    struct gh_kube_informer_opts io = {.res = &gh_kube_res_nodes, .label_selector = sel};
    struct gh_kube_handlers h = {on_add, on_node, NULL, NULL, NULL};
    gh_kube_informer_new(b->c, &io, &h, b, &inf, &err);
    gh_kube_informer_start(inf, &err);

    struct gh_controller_opts o;
    gh_controller_opts_default(&o);
    o.kube = kc;
    o.db_url = db;
    o.listen = "127.0.0.1:0";
    o.token_file = token_file;
    o.reorder_window_ns = window_ns;
    o.guards.max_isolated = 100000;
    o.guards.max_isolated_pct = 0;
    o.guards.max_actions_per_hour = 0;
    o.guards.node_cooldown_ns = 0;
    o.guards.storm_nodes = 0;
    o.no_leader_election = true;
    o.watch_namespace = b->ns;
    o.node_selector = sel;
    o.identity = "bench";
    struct run r = {NULL, eventfd(0, EFD_CLOEXEC)};
    if (gh_controller_new(&o, &r.ctl, &err)) {
        fprintf(stderr, "controller: %s\n", err.msg);
        return 1;
    }
    int port = gh_controller_port(r.ctl);
    pthread_t th;
    pthread_create(&th, NULL, run_controller, &r);
    usleep(1500 * 1000); /* informers synced */

    char token[256] = "", url[128], auth[300];
    FILE *tf = fopen(token_file, "r");
    if (tf && fgets(token, sizeof token, tf))
        token[strcspn(token, "\n")] = '\0';
    if (tf)
        fclose(tf);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/signals", port);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    CURL *cu = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, auth);
    hdr = curl_slist_append(hdr, "Content-Type: application/x-ndjson");
    curl_easy_setopt(cu, CURLOPT_URL, url);
    curl_easy_setopt(cu, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, sink);
    int64_t lat[MAXF];
    int got = 0;
    for (int i = 0; i < faults; i++) {
        char ts[GH_RFC3339_MAX], body[600];
        gh_time_format_rfc3339(gh_clock_now(gh_clock_real()), ts, sizeof ts);
        snprintf(body, sizeof body,
                 "{\"ts\":\"%s\",\"node\":\"%s\",\"gpu\":0,\"source\":\"kmsg\",\"kind\":\"xid\","
                 "\"code\":79,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the "
                 "bus.\",\"id\":\"bench-%s-%d\"}\n",
                 ts, b->names[i], b->ns, i);
        curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
        b->sent[i] = mono();
        if (getenv("GH_BENCH_LOG"))
            fprintf(stderr, "bench: post %s at %s\n", b->names[i], ts);
        CURLcode cc = curl_easy_perform(cu);
        if (cc != CURLE_OK) {
            fprintf(stderr, "post: %s\n", curl_easy_strerror(cc));
            continue;
        }
        if (gh_kube_testenv_until(b->c, seen_one, &b->seen[i], 10000)) {
            lat[got++] = b->seen[i] - b->sent[i];
        } else {
            fprintf(stderr, "fault %d: no cordon within 10 s\n", i);
        }
        /* one fault at a time: let the executor finish publishing this one
         * (Incident object, Events) and its client's rate limit refill */
        int64_t pause = mono() + 700 * GH_NS_PER_MS;
        while (mono() < pause)
            (void)gh_kube_client_run(b->c, 100, NULL);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(cu);
    uint64_t one = 1;
    ssize_t w = write(r.stop, &one, sizeof one);
    (void)w;
    pthread_join(th, NULL);
    gh_controller_free(r.ctl);
    close(r.stop);
    gh_kube_informer_free(inf);
    qsort(lat, (size_t)got, sizeof lat[0], cmp64);
    if (got)
        printf("reorder window %4.0f ms: %d faults, ingest -> cordon seen by a watch: "
               "p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
               (double)window_ns / 1e6, got, (double)lat[got / 2] / 1e6,
               (double)lat[(got * 99) / 100 >= got ? got - 1 : (got * 99) / 100] / 1e6,
               (double)lat[got - 1] / 1e6);
    for (int i = 0; i < faults; i++) {
        struct gh_kube_ref ref = {&gh_kube_res_nodes, NULL, b->names[i]};
        gh_kube_delete(b->c, &ref, NULL, NULL, NULL);
    }
    gh_kube_testenv_drop_namespace(b->c, b->ns, NULL);
    gh_kube_client_free(b->c);
    free(b);
    unlink(dbpath);
    char side[200];
    snprintf(side, sizeof side, "%s-wal", dbpath);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", dbpath);
    unlink(side);
    return 0;
}

int main(int argc, char **argv)
{
    int faults = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 50;
    if (faults < 1 || faults > MAXF)
        faults = 50;
    const char *lvl = getenv("GH_BENCH_LOG"); /* "info": the controller's log on stderr */
    gh_log_set_level(lvl && gh_log_parse_level(lvl) >= 0 ? (enum gh_log_level)gh_log_parse_level(lvl)
                                                         : GH_LOG_WARN);
    const char *path = getenv("GH_KUBECONFIG");
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    struct gh_err err = {{0}};
    if (!path || gh_kubeconfig_load(path, NULL, &kc, &err)) {
        fprintf(stderr, "controller_latency: set GH_KUBECONFIG to a test/kube/up control plane "
                        "(%s)\n", err.msg);
        return 2;
    }
    char token_file[] = "/tmp/gh-bench-token-XXXXXX";
    int fd = mkstemp(token_file);
    if (fd < 0 || write(fd, "bench-token\n", 12) != 12)
        return 2;
    close(fd);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int64_t windows[8] = {0, 200 * GH_NS_PER_MS};
    int nw = 2;
    if (argc > 2) {
        nw = 0;
        for (int i = 2; i < argc && nw < 8; i++)
            windows[nw++] = strtoll(argv[i], NULL, 10) * GH_NS_PER_MS;
    }
    printf("controller_latency: %d faults per window, one node each, SQLite audit store\n",
           faults);
    int rc = 0;
    for (int i = 0; i < nw && !rc; i++)
        rc = bench_window(&kc, faults, windows[i], token_file);
    unlink(token_file);
    gh_kube_config_clear(&kc);
    curl_global_cleanup();
    return rc;
}
