/* test_kube_auth.c - the ways to reach and authenticate to the real control
 * plane: kubeconfig with inline certificates, with certificate files, with a
 * bearer token, with a token file re-read on rotation (plain rewrite and the
 * kubelet's ..data symlink swap; the next request carries the new token);
 * in-cluster configuration through path overrides and through
 * KUBERNETES_SERVICE_HOST/PORT; and refusal of an untrusted server
 * certificate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/api.h"
#include "kube/kubeconfig.h"
#include "kube/testenv.h"

struct env {
    struct gh_kube_client *c;
    struct gh_kube_config admin;
    char ns[64];
    char dir[64];
    char token[4096];
};

static const struct gh_kube_res sa_res = {"", "v1", "serviceaccounts", "ServiceAccount", true};
static const struct gh_kube_res rb_res = {"rbac.authorization.k8s.io", "v1", "rolebindings",
                                          "RoleBinding", true};

/* A fresh token of the namespace's "reader" ServiceAccount. */
static int request_token(struct env *e, char *out, size_t cap)
{
    json_t *tr = json_pack("{s:s, s:s, s:{s:i}}", "apiVersion", "authentication.k8s.io/v1",
                           "kind", "TokenRequest", "spec", "expirationSeconds", 3600);
    struct gh_kube_ref ref = {&sa_res, e->ns, "reader"};
    struct gh_kube_req req;
    struct gh_kube_resp resp;
    struct gh_err err;
    int rc = gh_kube_req_create(&req, &ref, "token", tr, &err);
    json_decref(tr);
    if (!rc)
        rc = gh_kube_call(e->c, &req, &resp, &err);
    if (rc) {
        fprintf(stderr, "token: %s\n", err.msg);
        return rc;
    }
    const char *t = gh_kube_json_str(resp.body, "status", "token");
    snprintf(out, cap, "%s", t ? t : "");
    gh_kube_resp_clear(&resp);
    return t ? GH_OK : GH_EINVAL;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    struct gh_err err = {{0}};
    const char *kc = getenv("GH_KUBECONFIG");
    if (!kc || gh_kubeconfig_load(kc, NULL, &e->admin, &err) ||
        gh_kube_testenv_client(NULL, &e->c, &err) ||
        gh_kube_testenv_namespace(e->c, "auth", e->ns, sizeof e->ns, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    snprintf(e->dir, sizeof e->dir, "/tmp/gh-auth-XXXXXX");
    if (!mkdtemp(e->dir))
        return -1;
    /* ServiceAccount "reader" with the "view" ClusterRole in the namespace */
    json_t *sa = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
                           "metadata", "name", "reader");
    json_t *rb = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}",
                           "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "RoleBinding",
                           "metadata", "name", "reader-view", "roleRef", "apiGroup",
                           "rbac.authorization.k8s.io", "kind", "ClusterRole", "name", "view",
                           "subjects", "kind", "ServiceAccount", "name", "reader", "namespace",
                           e->ns);
    struct gh_kube_ref r1 = {&sa_res, e->ns, NULL}, r2 = {&rb_res, e->ns, NULL};
    int rc = gh_kube_create(e->c, &r1, sa, NULL, NULL, &err);
    if (!rc)
        rc = gh_kube_create(e->c, &r2, rb, NULL, NULL, &err);
    json_decref(sa);
    json_decref(rb);
    if (rc || request_token(e, e->token, sizeof e->token)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "teardown: %s failed\n", cmd);
    gh_kube_testenv_drop_namespace(e->c, e->ns, NULL);
    gh_kube_client_free(e->c);
    gh_kube_config_clear(&e->admin);
    free(e);
    return 0;
}

static void write_bytes(const char *dir, const char *name, const void *data, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    write_bytes(dir, name, text, strlen(text));
}

/* Connects with cfg and lists ConfigMaps in ns; returns the rc. */
static int try_list(const struct gh_kube_config *cfg, const struct gh_kube_client_opts *o,
                    const char *ns, struct gh_kube_status *st)
{
    struct gh_kube_client *c = NULL;
    struct gh_err err;
    int rc = gh_kube_client_new(cfg, o, &c, &err);
    assert_int_equal(rc, GH_OK);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, ns, NULL};
    rc = gh_kube_list(c, &ref, NULL, NULL, st, &err);
    if (rc)
        fprintf(stderr, "# list: %s\n", err.msg);
    gh_kube_client_free(c);
    return rc;
}

static void test_kubeconfig_inline_certificates(void **state)
{
    struct env *e = *state;
    assert_non_null(e->admin.cert_pem.data); /* the fixture's kubeconfig is inline */
    assert_non_null(e->admin.key_pem.data);
    assert_non_null(e->admin.ca_pem.data);
    assert_null(e->admin.token);
    assert_int_equal(try_list(&e->admin, NULL, e->ns, NULL), GH_OK);
}

static void test_kubeconfig_certificate_files(void **state)
{
    struct env *e = *state;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/pki", e->dir);
    mkdir(sub, 0700);
    write_bytes(sub, "ca.crt", e->admin.ca_pem.data, e->admin.ca_pem.len);
    write_bytes(sub, "admin.crt", e->admin.cert_pem.data, e->admin.cert_pem.len);
    write_bytes(sub, "admin.key", e->admin.key_pem.data, e->admin.key_pem.len);
    char kc[2048];
    snprintf(kc, sizeof kc,
             "apiVersion: v1\nkind: Config\ncurrent-context: files\n"
             "clusters:\n- name: c\n  cluster:\n    server: %s\n"
             "    certificate-authority: pki/ca.crt\n"
             "users:\n- name: u\n  user:\n    client-certificate: pki/admin.crt\n"
             "    client-key: pki/admin.key\n"
             "contexts:\n- name: files\n  context: {cluster: c, user: u, namespace: %s}\n",
             e->admin.server, e->ns);
    write_text(e->dir, "files.kubeconfig", kc);
    char path[256];
    snprintf(path, sizeof path, "%s/files.kubeconfig", e->dir);
    struct gh_kube_config cfg;
    struct gh_err err;
    assert_int_equal(gh_kubeconfig_load(path, NULL, &cfg, &err), GH_OK);
    assert_string_equal(cfg.namespace_, e->ns);
    assert_int_equal(try_list(&cfg, NULL, e->ns, NULL), GH_OK);
    gh_kube_config_clear(&cfg);
}

static void test_kubeconfig_token(void **state)
{
    struct env *e = *state;
    char kc[8192];
    char capath[256];
    snprintf(capath, sizeof capath, "%s/token-ca.crt", e->dir);
    write_bytes(e->dir, "token-ca.crt", e->admin.ca_pem.data, e->admin.ca_pem.len);
    snprintf(kc, sizeof kc,
             "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
             "clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: %s\n"
             "users:\n- name: sa\n  user:\n    token: %s\n"
             "contexts:\n- name: t\n  context: {cluster: c, user: sa}\n",
             e->admin.server, capath, e->token);
    struct gh_kube_config cfg;
    struct gh_err err;
    assert_int_equal(gh_kubeconfig_parse(kc, strlen(kc), NULL, NULL, 0, &cfg, &err), GH_OK);
    assert_non_null(cfg.token);
    assert_null(cfg.cert_pem.data);
    struct gh_kube_status st;
    assert_int_equal(try_list(&cfg, NULL, e->ns, &st), GH_OK);
    /* the token is the ServiceAccount's: cluster-wide reads are forbidden */
    assert_int_not_equal(try_list(&cfg, NULL, "kube-system", &st), GH_OK);
    assert_int_equal(st.code, 403);
    assert_int_equal(st.kind, GH_KUBE_R_FORBIDDEN);
    assert_non_null(strstr(st.message, "reader"));
    gh_kube_config_clear(&cfg);
}

static void test_token_file_rotation(void **state)
{
    struct env *e = *state;
    write_bytes(e->dir, "token-ca2.crt", e->admin.ca_pem.data, e->admin.ca_pem.len);
    write_text(e->dir, "rotating-token", "not-a-valid-token\n");
    char kc[2048];
    snprintf(kc, sizeof kc,
             "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
             "clusters:\n- name: c\n  cluster:\n    server: %s\n"
             "    certificate-authority: token-ca2.crt\n"
             "users:\n- name: sa\n  user:\n    tokenFile: rotating-token\n"
             "contexts:\n- name: t\n  context: {cluster: c, user: sa}\n",
             e->admin.server);
    write_text(e->dir, "tokenfile.kubeconfig", kc);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenfile.kubeconfig", e->dir);
    struct gh_kube_config cfg;
    struct gh_err err;
    assert_int_equal(gh_kubeconfig_load(path, NULL, &cfg, &err), GH_OK);
    assert_non_null(cfg.token_file);

    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, NULL, &c, &err), GH_OK);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, NULL};
    struct gh_kube_status st;
    assert_int_not_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    assert_int_equal(st.code, 401);
    assert_int_equal(st.kind, GH_KUBE_R_UNAUTHORIZED);
    /* the projected token rotates: the client re-reads the file after the 401 */
    write_text(e->dir, "rotating-token", e->token);
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    struct gh_kube_client_stats cs;
    gh_kube_client_stats(c, &cs);
    assert_true(cs.token_reads >= 2);
    gh_kube_client_free(c);

    /* and periodically without a 401: a second valid token is picked up */
    struct gh_kube_client_opts o = {.token_reread_ns = 1}; /* re-read before each request */
    assert_int_equal(gh_kube_client_new(&cfg, &o, &c, &err), GH_OK);
    char t2[4096];
    assert_int_equal(request_token(e, t2, sizeof t2), GH_OK);
    write_text(e->dir, "rotating-token", t2);
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    gh_kube_client_stats(c, &cs);
    assert_true(cs.token_reads >= 2);
    /* the header really carries the file's current token: a token the
     * apiserver rejects is used on the next request (401, though the last
     * request succeeded), and a valid one again after that */
    write_text(e->dir, "rotating-token", "revoked.token.value\n");
    assert_int_not_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    assert_int_equal(st.code, 401);
    write_text(e->dir, "rotating-token", t2);
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    /* a rotation done the kubelet's way: ..data symlink swapped atomically */
    char p1[256], p2[256], link[256], tmp[256], tok[256];
    snprintf(p1, sizeof p1, "%s/..2026_a", e->dir);
    snprintf(p2, sizeof p2, "%s/..2026_b", e->dir);
    mkdir(p1, 0700);
    mkdir(p2, 0700);
    write_text(p1, "token", e->token);
    write_text(p2, "token", "not-a-valid-token");
    snprintf(link, sizeof link, "%s/..data", e->dir);
    snprintf(tmp, sizeof tmp, "%s/..data_tmp", e->dir);
    snprintf(tok, sizeof tok, "%s/rotating-token", e->dir);
    assert_int_equal(symlink("..2026_a", link), 0);
    assert_int_equal(unlink(tok), 0);
    assert_int_equal(symlink("..data/token", tok), 0);
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    assert_int_equal(symlink("..2026_b", tmp), 0);
    assert_int_equal(rename(tmp, link), 0);
    assert_int_not_equal(gh_kube_list(c, &ref, NULL, NULL, &st, &err), GH_OK);
    assert_int_equal(st.code, 401);
    gh_kube_client_free(c);
    gh_kube_config_clear(&cfg);
}

/* A service-account mount in e->dir/NAME (token, ca.crt, namespace) and the
 * fixture apiserver's address split into host and port, as a pod sees them. */
struct sa_mount {
    char api[256], host[64], port[16];
    char token[256], ca[256], ns[256];
};

static void sa_mount_make(const struct env *e, const char *name, struct sa_mount *m)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/%s", e->dir, name);
    mkdir(sub, 0700);
    write_text(sub, "token", e->token);
    write_bytes(sub, "ca.crt", e->admin.ca_pem.data, e->admin.ca_pem.len);
    write_text(sub, "namespace", e->ns);
    struct gh_err err;
    assert_int_equal(gh_kube_testenv_var("GH_KUBE_API", m->api, sizeof m->api, &err), GH_OK);
    const char *hostport = strstr(m->api, "://") + 3;
    const char *colon = strrchr(hostport, ':');
    snprintf(m->host, sizeof m->host, "%.*s", (int)(colon - hostport), hostport);
    snprintf(m->port, sizeof m->port, "%s", colon + 1);
    snprintf(m->token, sizeof m->token, "%s/token", sub);
    snprintf(m->ca, sizeof m->ca, "%s/ca.crt", sub);
    snprintf(m->ns, sizeof m->ns, "%s/namespace", sub);
}

static void test_incluster_path_overrides(void **state)
{
    struct env *e = *state;
    struct sa_mount m;
    sa_mount_make(e, "serviceaccount", &m);
    struct gh_kube_incluster_paths paths = {m.token, m.ca, m.ns, m.host, m.port};
    struct gh_kube_config cfg;
    struct gh_err err;
    assert_int_equal(gh_kube_incluster_load(&paths, &cfg, &err), GH_OK);
    assert_string_equal(cfg.server, m.api);
    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, NULL, &c, &err), GH_OK);
    assert_string_equal(gh_kube_client_namespace(c), e->ns);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, gh_kube_client_namespace(c), NULL};
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, NULL, &err), GH_OK);
    gh_kube_client_free(c);
    gh_kube_config_clear(&cfg);
}

/* The environment variables a pod is given (KUBERNETES_SERVICE_HOST/PORT), with
 * only the service-account files' paths overridden. */
static void test_incluster_environment(void **state)
{
    struct env *e = *state;
    struct sa_mount m;
    sa_mount_make(e, "sa-env", &m);
    struct gh_kube_incluster_paths paths = {m.token, m.ca, m.ns, NULL, NULL};
    struct gh_err err;
    struct gh_kube_config cfg;

    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(gh_kube_incluster_load(&paths, &cfg, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));

    setenv("KUBERNETES_SERVICE_HOST", m.host, 1);
    setenv("KUBERNETES_SERVICE_PORT", m.port, 1);
    int rc = gh_kube_incluster_load(&paths, &cfg, &err);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(rc, GH_OK);
    assert_string_equal(cfg.server, m.api);
    assert_string_equal(cfg.token_file, m.token);
    struct gh_kube_client *c = NULL;
    assert_int_equal(gh_kube_client_new(&cfg, NULL, &c, &err), GH_OK);
    assert_string_equal(gh_kube_client_namespace(c), e->ns);
    struct gh_kube_ref ref = {&gh_kube_res_configmaps, e->ns, NULL};
    assert_int_equal(gh_kube_list(c, &ref, NULL, NULL, NULL, &err), GH_OK);
    gh_kube_client_free(c);
    gh_kube_config_clear(&cfg);

    /* a missing token file is named in the error */
    snprintf(m.token, sizeof m.token, "%s/sa-env/absent-token", e->dir); /* paths.token */
    setenv("KUBERNETES_SERVICE_HOST", m.host, 1);
    setenv("KUBERNETES_SERVICE_PORT", m.port, 1);
    rc = gh_kube_incluster_load(&paths, &cfg, &err);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(rc, GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "absent-token"));
}

static void test_untrusted_server_refused(void **state)
{
    struct env *e = *state;
    struct gh_kube_config cfg;
    struct gh_err err;
    assert_int_equal(gh_kube_config_copy(&cfg, &e->admin, &err), GH_OK);
    /* trust only the client certificate: the server's chain does not verify */
    free(cfg.ca_pem.data);
    cfg.ca_pem.data = malloc(e->admin.cert_pem.len + 1);
    memcpy(cfg.ca_pem.data, e->admin.cert_pem.data, e->admin.cert_pem.len + 1);
    cfg.ca_pem.len = e->admin.cert_pem.len;
    struct gh_kube_status st;
    assert_int_equal(try_list(&cfg, NULL, e->ns, &st), GH_EAGAIN);
    assert_int_equal(st.kind, GH_KUBE_R_TRANSPORT);
    assert_int_equal(st.code, 0);
    /* a wrong server name also fails verification */
    gh_kube_config_clear(&cfg);
    assert_int_equal(gh_kube_config_copy(&cfg, &e->admin, &err), GH_OK);
    cfg.tls_server_name = strdup("not-the-apiserver.example");
    assert_int_equal(try_list(&cfg, NULL, e->ns, &st), GH_EAGAIN);
    free(cfg.tls_server_name);
    cfg.tls_server_name = strdup("kubernetes.default.svc"); /* a SAN of the serving cert */
    assert_int_equal(try_list(&cfg, NULL, e->ns, &st), GH_OK);
    gh_kube_config_clear(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig_inline_certificates),
        cmocka_unit_test(test_kubeconfig_certificate_files),
        cmocka_unit_test(test_kubeconfig_token),
        cmocka_unit_test(test_token_file_rotation),
        cmocka_unit_test(test_incluster_path_overrides),
        cmocka_unit_test(test_incluster_environment),
        cmocka_unit_test(test_untrusted_server_refused),
    };
    return cmocka_run_group_tests_name("kube_auth", tests, setup, teardown);
}
