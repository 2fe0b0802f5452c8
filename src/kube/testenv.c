/* testenv.c - helpers for tests against the real control plane. */
#include "kube/testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/curlbuf.h"
#include "common/json.h"
#include "kube/api.h"
#include "kube/kubeconfig.h"

int gh_kube_testenv_client(const struct gh_kube_client_opts *opts, struct gh_kube_client **out,
                           struct gh_err *err)
{
    *out = NULL;
    const char *path = getenv("GH_KUBECONFIG");
    if (!path || !path[0])
        path = getenv("KUBECONFIG");
    if (!path || !path[0])
        return gh_err_set(err, GH_ENOTFOUND, "neither GH_KUBECONFIG nor KUBECONFIG is set");
    struct gh_kube_config cfg;
    int rc = gh_kubeconfig_load(path, NULL, &cfg, err);
    if (rc)
        return rc;
    rc = gh_kube_client_new(&cfg, opts, out, err);
    gh_kube_config_clear(&cfg);
    return rc;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool gh_kube_testenv_until(struct gh_kube_client *c, gh_kube_cond_fn done, void *ud,
                           int64_t timeout_ms)
{
    int64_t end = mono_ms() + timeout_ms;
    while (!done(ud)) {
        int64_t left = end - mono_ms();
        if (left <= 0)
            return false;
        if (gh_kube_client_run(c, left < 100 ? (int)left : 100, NULL))
            usleep(10000);
    }
    return true;
}

int gh_kube_testenv_namespace(struct gh_kube_client *c, const char *prefix, char *name, size_t cap,
                              struct gh_err *err)
{
    snprintf(name, cap, "%.40s-%d-%04x", prefix, (int)getpid() % 100000,
             (unsigned)(gh_kube_client_rand(c) & 0xffff));
    json_t *ns = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                           "metadata", "name", name, "labels", "gpuheal.io/test", "true");
    if (!ns)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, NULL};
    int rc = gh_kube_create(c, &ref, ns, NULL, NULL, err);
    json_decref(ns);
    if (rc)
        return rc;
    struct gh_kube_ref sa = {&(const struct gh_kube_res){"", "v1", "serviceaccounts",
                                                         "ServiceAccount", true},
                             name, "default"};
    for (int i = 0; i < 300; i++) {
        json_t *o = NULL;
        rc = gh_kube_get(c, &sa, &o, NULL, err);
        json_decref(o);
        if (rc != GH_ENOTFOUND)
            return rc;
        usleep(100000);
    }
    return gh_err_set(err, GH_ETIMEOUT, "namespace %s: no default ServiceAccount after 30 s", name);
}

int gh_kube_testenv_drop_namespace(struct gh_kube_client *c, const char *name, struct gh_err *err)
{
    struct gh_kube_ref ref = {&gh_kube_res_namespaces, NULL, name};
    int rc = gh_kube_delete(c, &ref, NULL, NULL, err);
    return rc == GH_ENOTFOUND ? GH_OK : rc;
}

int gh_kube_testenv_var(const char *key, char *buf, size_t cap, struct gh_err *err)
{
    const char *dir = getenv("GH_KUBE_DIR");
    char path[4096];
    if (!dir || !dir[0])
        return gh_err_set(err, GH_ENOTFOUND, "GH_KUBE_DIR is not set");
    snprintf(path, sizeof path, "%s/env", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return gh_err_set(err, GH_ENOTFOUND, "%s: cannot open", path);
    char line[4096];
    size_t kl = strlen(key);
    int rc = gh_err_set(err, GH_ENOTFOUND, "%s: no %s", path, key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, cap, "%s", line + kl + 1);
            rc = GH_OK;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------ apiserver */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* argv of the fixture's kube-apiserver from /proc, with --secure-port set. */
static int copy_argv(struct gh_kube_testenv_apiserver *a, struct gh_err *err)
{
    const char *dir = getenv("GH_KUBE_DIR");
    if (!dir || !dir[0])
        return gh_err_set(err, GH_ENOTFOUND, "GH_KUBE_DIR is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/pids/kube-apiserver.pid", dir);
    struct gh_kube_blob b = {0};
    int rc = gh_kube_read_file(path, 64, &b, err);
    if (rc)
        return rc;
    long pid = strtol((char *)b.data, NULL, 10);
    free(b.data);
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    if ((rc = gh_kube_read_file(path, 1 << 20, &b, err)))
        return rc;
    size_t n = 0;
    for (size_t i = 0; i < b.len; i++)
        n += b.data[i] == '\0';
    a->argv = calloc(n + 2, sizeof *a->argv);
    if (!a->argv) {
        free(b.data);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < b.len && k < n; k++) {
        const char *arg = (char *)b.data + i;
        size_t al = strlen(arg);
        if (strncmp(arg, "--secure-port=", 14) == 0) {
            char buf[64];
            snprintf(buf, sizeof buf, "--secure-port=%d", a->port);
            a->argv[k] = strdup(buf);
        } else {
            a->argv[k] = strdup(arg);
        }
        if (!a->argv[k]) {
            free(b.data);
            return gh_err_set(err, GH_ENOMEM, "out of memory");
        }
        i += al + 1;
    }
    free(b.data);
    snprintf(a->log, sizeof a->log, "%s/logs/kube-apiserver-test-%d.log", dir, a->port);
    return GH_OK;
}

int gh_kube_testenv_apiserver_client(const struct gh_kube_testenv_apiserver *a,
                                     const struct gh_kube_client_opts *opts,
                                     struct gh_kube_client **out, struct gh_err *err)
{
    *out = NULL;
    const char *path = getenv("GH_KUBECONFIG");
    if (!path || !path[0])
        path = getenv("KUBECONFIG");
    if (!path)
        return gh_err_set(err, GH_ENOTFOUND, "GH_KUBECONFIG is not set");
    struct gh_kube_config cfg;
    int rc = gh_kubeconfig_load(path, NULL, &cfg, err);
    if (rc)
        return rc;
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", a->port);
    free(cfg.server);
    cfg.server = strdup(url);
    rc = cfg.server ? gh_kube_client_new(&cfg, opts, out, err)
                    : gh_err_set(err, GH_ENOMEM, "out of memory");
    gh_kube_config_clear(&cfg);
    return rc;
}

int gh_kube_testenv_apiserver_start(struct gh_kube_testenv_apiserver *a, struct gh_err *err)
{
    int rc;
    if (a->pid)
        return gh_err_set(err, GH_EINVAL, "private apiserver already running");
    if (!a->argv) {
        if ((a->port = free_port()) <= 0)
            return gh_err_set(err, GH_EIO, "no free port");
        if ((rc = copy_argv(a, err)))
            return rc;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return gh_err_set(err, GH_EIO, "fork failed");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(a->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        execv(a->argv[0], a->argv);
        _exit(127);
    }
    a->pid = pid;
    struct gh_kube_client *c = NULL;
    struct gh_kube_client_opts o = {.request_timeout_ms = 2000, .connect_timeout_ms = 1000};
    if ((rc = gh_kube_testenv_apiserver_client(a, &o, &c, err)))
        return rc;
    int ok = 0;
    for (int i = 0; i < 600 && !ok; i++) {
        int status;
        if (waitpid(a->pid, &status, WNOHANG) == a->pid) {
            a->pid = 0;
            gh_kube_client_free(c);
            return gh_err_set(err, GH_EIO, "private apiserver exited; see %s", a->log);
        }
        struct gh_kube_ref ref = {&(const struct gh_kube_res){"", "v1", "namespaces", "Namespace",
                                                              false},
                                  NULL, "default"};
        /* ready = serves reads and knows the CRDs */
        if (gh_kube_get(c, &ref, NULL, NULL, NULL) == GH_OK) {
            struct gh_kube_ref crd = {
                &(const struct gh_kube_res){"gpuheal.io", "v1alpha1", "incidents", "Incident",
                                            false},
                NULL, NULL};
            struct gh_kube_list_opts lo = {.limit = 1};
            ok = gh_kube_list(c, &crd, &lo, NULL, NULL, NULL) == GH_OK;
        }
        if (!ok)
            usleep(200000);
    }
    gh_kube_client_free(c);
    if (!ok) {
        gh_kube_testenv_apiserver_kill(a, SIGKILL);
        return gh_err_set(err, GH_ETIMEOUT, "private apiserver not ready after 120 s; see %s",
                          a->log);
    }
    return GH_OK;
}

void gh_kube_testenv_apiserver_kill(struct gh_kube_testenv_apiserver *a, int sig)
{
    if (!a->pid)
        return;
    kill(a->pid, sig);
    int status;
    waitpid(a->pid, &status, 0);
    a->pid = 0;
}

int gh_kube_testenv_apiserver_pause(struct gh_kube_testenv_apiserver *a, struct gh_err *err)
{
    if (!a->pid)
        return gh_err_set(err, GH_EINVAL, "private apiserver is not running");
    if (kill(a->pid, SIGSTOP))
        return gh_err_set(err, GH_EIO, "SIGSTOP apiserver %d: %s", a->pid, strerror(errno));
    int status;
    pid_t r;
    do
        r = waitpid(a->pid, &status, WUNTRACED);
    while (r < 0 && errno == EINTR);
    if (r != a->pid || !WIFSTOPPED(status))
        return gh_err_set(err, GH_EIO, "apiserver %d did not stop (waitpid %d, status 0x%x)",
                          a->pid, (int)r, status);
    return GH_OK;
}

int gh_kube_testenv_apiserver_resume(struct gh_kube_testenv_apiserver *a, struct gh_err *err)
{
    if (!a->pid)
        return gh_err_set(err, GH_EINVAL, "private apiserver is not running");
    if (kill(a->pid, SIGCONT))
        return gh_err_set(err, GH_EIO, "SIGCONT apiserver %d: %s", a->pid, strerror(errno));
    int status;
    pid_t r;
    do
        r = waitpid(a->pid, &status, WCONTINUED);
    while (r < 0 && errno == EINTR);
    if (r != a->pid || !WIFCONTINUED(status))
        return gh_err_set(err, GH_EIO, "apiserver %d did not continue (waitpid %d, status 0x%x)",
                          a->pid, (int)r, status);
    return GH_OK;
}

void gh_kube_testenv_apiserver_free(struct gh_kube_testenv_apiserver *a)
{
    if (!a)
        return;
    gh_kube_testenv_apiserver_kill(a, SIGKILL);
    for (char **p = a->argv; p && *p; p++)
        free(*p);
    free(a->argv);
    a->argv = NULL;
}

/* ------------------------------------------------------------------ etcd */

static int etcd_post(const char *base, const char *path, const char *body, json_t **out,
                     struct gh_err *err)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *h = curl_easy_init();
    if (!h)
        return gh_err_set(err, GH_ENOMEM, "curl_easy_init");
    struct gh_curlbuf m = {.max = 4095}; /* an etcd reply of a few hundred bytes */
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, gh_curlbuf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK || code != 200) {
        int rc = gh_err_set(err, GH_EIO, "etcd %s: %s (HTTP %ld) %s", path, curl_easy_strerror(cc),
                            code, m.p ? m.p : "");
        free(m.p);
        return rc;
    }
    *out = m.p ? json_loadb(m.p, m.len, 0, NULL) : NULL;
    free(m.p);
    return *out ? GH_OK : gh_err_set(err, GH_EINVAL, "etcd %s: bad JSON", path);
}

int gh_kube_testenv_etcd_compact(int64_t *rev, struct gh_err *err)
{
    char base[256];
    int rc = gh_kube_testenv_var("GH_KUBE_ETCD", base, sizeof base, err);
    if (rc)
        return rc;
    json_t *r = NULL;
    /* range over "/" (base64 "Lw==") just to read the header's revision */
    if ((rc = etcd_post(base, "/v3/kv/range", "{\"key\":\"Lw==\",\"limit\":1}", &r, err)))
        return rc;
    const char *revs = gh_json_str(r, "header", "revision");
    long long v = revs ? strtoll(revs, NULL, 10) : 0;
    json_decref(r);
    if (v <= 0)
        return gh_err_set(err, GH_EINVAL, "etcd: no revision in the range reply");
    char body[128];
    snprintf(body, sizeof body, "{\"revision\":\"%lld\",\"physical\":true}", v);
    if ((rc = etcd_post(base, "/v3/kv/compaction", body, &r, err)))
        return rc;
    json_decref(r);
    if (rev)
        *rev = v;
    return GH_OK;
}

int gh_kube_testenv_put_configmap(struct gh_kube_client *c, const char *ns, const char *name,
                                  const char *v, struct gh_err *err)
{
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                           "ConfigMap", "metadata", "name", name, "namespace", ns, "data", "v", v);
    if (!cm)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, ns, name};
    int rc = gh_kube_patch(c, &ref, NULL, GH_KUBE_PATCH_APPLY, cm, NULL, NULL, err);
    json_decref(cm);
    return rc;
}
