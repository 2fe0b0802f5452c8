/* test_kube_kubeconfig.c - YAML->JSON conversion, kubeconfig parsing
 * (contexts, inline data, files, tokens) and in-cluster loading with path
 * overrides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/kubeconfig.h"
#include "kube/yaml_json.h"

static void test_yaml_scalars_and_structure(void **state)
{
    (void)state;
    const char *y = "a: 1\nb: -2.5\nc: true\nd: ~\ne: 'true'\nf: \"x\"\ng: [1, two]\n"
                    "h: {k: v}\ni: 0x10\nj: ''\n";
    json_t *j = NULL;
    struct gh_err err;
    assert_int_equal(gh_yaml_to_json(y, strlen(y), &j, &err), GH_OK);
    assert_true(json_is_integer(json_object_get(j, "a")));
    assert_int_equal(json_integer_value(json_object_get(j, "a")), 1);
    assert_true(json_is_real(json_object_get(j, "b")));
    assert_true(json_is_true(json_object_get(j, "c")));
    assert_true(json_is_null(json_object_get(j, "d")));
    assert_string_equal(json_string_value(json_object_get(j, "e")), "true");
    assert_string_equal(json_string_value(json_object_get(j, "f")), "x");
    assert_int_equal(json_array_size(json_object_get(j, "g")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "h"), "k")), "v");
    assert_string_equal(json_string_value(json_object_get(j, "i")), "0x10");
    assert_string_equal(json_string_value(json_object_get(j, "j")), "");
    json_decref(j);
}

static void test_yaml_refusals(void **state)
{
    (void)state;
    json_t *j = NULL;
    struct gh_err err;
    const char *alias = "a: &x [1,2]\nb: *x\n";
    assert_int_equal(gh_yaml_to_json(alias, strlen(alias), &j, &err), GH_EUNSUPPORTED);
    const char *dup = "a: 1\na: 2\n";
    assert_int_equal(gh_yaml_to_json(dup, strlen(dup), &j, &err), GH_EINVAL);
    const char *bad = "a: [1, 2\n";
    assert_int_equal(gh_yaml_to_json(bad, strlen(bad), &j, &err), GH_EINVAL);
    assert_non_null(strstr(err.msg, "line"));
    const char *cplx = "? [a]\n: 1\n";
    assert_int_equal(gh_yaml_to_json(cplx, strlen(cplx), &j, &err), GH_EUNSUPPORTED);
    char deep[400];
    memset(deep, '[', 100);
    deep[100] = '\0';
    assert_int_equal(gh_yaml_to_json(deep, 100, &j, &err), GH_ELIMIT);
    assert_null(j);
    /* empty document */
    assert_int_equal(gh_yaml_to_json("", 0, &j, &err), GH_OK);
    assert_true(json_is_null(j));
    json_decref(j);
}

/* base64 of "CA-PEM", "CERT-PEM", "KEY-PEM" */
#define B64_CA "Q0EtUEVN"
#define B64_CERT "Q0VSVC1QRU0="
#define B64_KEY "S0VZLVBFTQ=="

static const char *kc_inline =
    "apiVersion: v1\nkind: Config\ncurrent-context: one\n"
    "clusters:\n"
    "- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
    "    certificate-authority-data: " B64_CA "\n"
    "- name: c2\n  cluster:\n    server: https://example.test\n    insecure-skip-tls-verify: true\n"
    "    tls-server-name: api.example\n"
    "users:\n"
    "- name: u1\n  user:\n    client-certificate-data: " B64_CERT "\n"
    "    client-key-data: " B64_KEY "\n"
    "- name: u2\n  user:\n    token: \"  tok-123\\n\"\n"
    "- name: u3\n  user:\n    exec:\n      command: aws\n"
    "contexts:\n"
    "- name: one\n  context: {cluster: c1, user: u1, namespace: ml}\n"
    "- name: two\n  context: {cluster: c2, user: u2}\n"
    "- name: three\n  context: {cluster: c2, user: u3}\n"
    "- name: dangling\n  context: {cluster: nope, user: u1}\n";

static void test_kubeconfig_inline_current_context(void **state)
{
    (void)state;
    struct gh_kube_config c;
    struct gh_err err;
    assert_int_equal(gh_kubeconfig_parse(kc_inline, strlen(kc_inline), NULL, NULL, 0, &c, &err),
                     GH_OK);
    assert_string_equal(c.server, "https://10.0.0.1:6443");
    assert_string_equal((char *)c.ca_pem.data, "CA-PEM");
    assert_int_equal(c.ca_pem.len, 6);
    assert_string_equal((char *)c.cert_pem.data, "CERT-PEM");
    assert_string_equal((char *)c.key_pem.data, "KEY-PEM");
    assert_null(c.token);
    assert_string_equal(c.namespace_, "ml");
    assert_string_equal(c.context, "one");
    assert_false(c.insecure_skip_tls_verify);

    struct gh_kube_config copy;
    assert_int_equal(gh_kube_config_copy(&copy, &c, &err), GH_OK);
    assert_string_equal((char *)copy.key_pem.data, "KEY-PEM");
    gh_kube_config_clear(&copy);
    gh_kube_config_clear(&c);
    gh_kube_config_clear(NULL);
}

static void test_kubeconfig_named_context_token(void **state)
{
    (void)state;
    struct gh_kube_config c;
    struct gh_err err;
    assert_int_equal(gh_kubeconfig_parse(kc_inline, strlen(kc_inline), NULL, "two", 0, &c, &err),
                     GH_OK);
    assert_string_equal(c.token, "tok-123");
    assert_true(c.insecure_skip_tls_verify);
    assert_string_equal(c.tls_server_name, "api.example");
    assert_null(c.cert_pem.data);
    assert_null(c.namespace_);
    gh_kube_config_clear(&c);

    assert_int_equal(gh_kubeconfig_parse(kc_inline, strlen(kc_inline), NULL, "three", 0, &c, &err),
                     GH_EUNSUPPORTED);
    assert_int_equal(gh_kubeconfig_parse(kc_inline, strlen(kc_inline), NULL, "dangling", 0, &c,
                                         &err),
                     GH_ENOTFOUND);
    assert_int_equal(gh_kubeconfig_parse(kc_inline, strlen(kc_inline), NULL, "none", 0, &c, &err),
                     GH_ENOTFOUND);
    assert_null(c.server);
}

static void test_kubeconfig_malformed(void **state)
{
    (void)state;
    struct gh_kube_config c;
    struct gh_err err;
#define CTX "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
#define CL "clusters:\n- name: c\n  cluster: {server: https://x}\n"
#define USR "users:\n- name: u\n  user: {token: t}\n"
    /* each refusal, and the words its message must contain to say what is wrong */
    static const struct {
        const char *text, *want1, *want2;
    } cases[] = {
        {"- a list\n", "not a mapping", "kubeconfig"},
        {"kind: Config\n", "no current-context", "kubeconfig"},
        {"kind: Pod\ncurrent-context: x\n", "kind is \"Pod\"", "not Config"},
        {"current-context: y\n" CL, "context \"y\"", "not found"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n" CL, "context \"x\"",
         "names no cluster"},
        {CTX "clusters:\n- name: other\n  cluster: {server: https://x}\n", "cluster \"c\"",
         "not found"},
        {CTX CL "users:\n- name: someone-else\n  user: {token: t}\n", "user \"u\"", "not found"},
        {CTX USR "clusters:\n- name: c\n  cluster: {certificate-authority-data: QQ==}\n",
         "cluster \"c\"", "has no server"},
        {CTX USR "clusters:\n- name: c\n  cluster: {server: ftp://x}\n", "server \"ftp://x\"",
         "not an http(s) URL"},
        {CTX USR "clusters:\n- name: c\n  cluster: {server: https://x, "
             "certificate-authority-data: "
             "'!!!'}\n",
         "certificate-authority-data", "base64"},
        {CTX CL "users:\n- name: u\n  user: {client-key-data: S0VZ}\n", "user \"u\"",
         "client key without a certificate"},
        {CTX CL "users:\n- name: u\n  user: {exec: {command: aws}}\n", "user \"u\"",
         "exec"},
        {CTX CL "users:\n- name: u\n  user: {client-certificate: /nonexistent/gh-cert.pem, "
                "client-key: /nonexistent/gh-key.pem}\n",
         "client-certificate", "/nonexistent/gh-cert.pem"},
        {CTX CL "users:\n- name: u\n  user: {tokenFile: /nonexistent/gh-token}\n", "tokenFile",
         "/nonexistent/gh-token"},
    };
#undef CTX
#undef CL
#undef USR
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err.msg[0] = '\0';
        int rc = gh_kubeconfig_parse(cases[i].text, strlen(cases[i].text), NULL, NULL, 0, &c, &err);
        if (rc == GH_OK)
            fail_msg("case %zu parsed", i);
        assert_null(c.server);
        if (!strstr(err.msg, cases[i].want1) || !strstr(err.msg, cases[i].want2))
            fail_msg("case %zu: \"%s\" lacks \"%s\" / \"%s\"", i, err.msg, cases[i].want1,
                     cases[i].want2);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_kubeconfig_files_relative(void **state)
{
    (void)state;
    char dir[] = "/tmp/gh-kc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[512], sub[512];
    snprintf(sub, sizeof sub, "%s/pki", dir);
    mkdir(sub, 0700);
    snprintf(p, sizeof p, "%s/pki/ca.crt", dir);
    write_file(p, "CA-FILE");
    snprintf(p, sizeof p, "%s/pki/c.crt", dir);
    write_file(p, "CERT-FILE");
    snprintf(p, sizeof p, "%s/pki/c.key", dir);
    write_file(p, "KEY-FILE");
    snprintf(p, sizeof p, "%s/token", dir);
    write_file(p, "file-token\n");
    const char *kc = "current-context: x\n"
                     "clusters:\n- name: c\n  cluster:\n    server: https://h:1\n"
                     "    certificate-authority: pki/ca.crt\n"
                     "users:\n- name: u\n  user:\n    client-certificate: pki/c.crt\n"
                     "    client-key: pki/c.key\n    tokenFile: token\n"
                     "contexts:\n- name: x\n  context: {cluster: c, user: u}\n";
    snprintf(p, sizeof p, "%s/config", dir);
    write_file(p, kc);
    struct gh_kube_config c;
    struct gh_err err;
    int rc = gh_kubeconfig_load(p, NULL, &c, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_string_equal((char *)c.ca_pem.data, "CA-FILE");
    assert_string_equal((char *)c.cert_pem.data, "CERT-FILE");
    assert_string_equal((char *)c.key_pem.data, "KEY-FILE");
    assert_string_equal(c.token, "file-token");
    char want[512];
    snprintf(want, sizeof want, "%s/token", dir);
    assert_string_equal(c.token_file, want);
    gh_kube_config_clear(&c);

    /* the same text with file references refused */
    assert_int_equal(gh_kubeconfig_parse(kc, strlen(kc), dir, NULL, GH_KUBECONFIG_NO_FILES, &c,
                                         &err),
                     GH_EUNSUPPORTED);
    /* a missing file */
    snprintf(p, sizeof p, "%s/pki/c.key", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config", dir);
    assert_int_equal(gh_kubeconfig_load(p, NULL, &c, &err), GH_ENOTFOUND);
    assert_non_null(strstr(err.msg, "c.key"));

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_incluster_paths(void **state)
{
    (void)state;
    char dir[] = "/tmp/gh-ic-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tok[512], ca[512], ns[512];
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(ns, sizeof ns, "%s/namespace", dir);
    write_file(tok, "sa-token");
    write_file(ca, "SA-CA");
    write_file(ns, "gpuheal-system\n");
    struct gh_kube_incluster_paths paths = {tok, ca, ns, "fd00::1", "443"};
    struct gh_kube_config c;
    struct gh_err err;
    assert_int_equal(gh_kube_incluster_load(&paths, &c, &err), GH_OK);
    assert_string_equal(c.server, "https://[fd00::1]:443");
    assert_string_equal(c.token, "sa-token");
    assert_string_equal(c.token_file, tok);
    assert_string_equal((char *)c.ca_pem.data, "SA-CA");
    assert_string_equal(c.namespace_, "gpuheal-system");
    gh_kube_config_clear(&c);

    paths.host = "10.96.0.1";
    paths.port = "44x";
    assert_int_equal(gh_kube_incluster_load(&paths, &c, &err), GH_EINVAL);
    paths.port = "443";
    paths.token_path = "/nonexistent/token";
    assert_int_equal(gh_kube_incluster_load(&paths, &c, &err), GH_ENOTFOUND);
    struct gh_kube_incluster_paths nohost = {tok, ca, ns, "", ""};
    assert_int_equal(gh_kube_incluster_load(&nohost, &c, &err), GH_ENOTFOUND);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_base64(void **state)
{
    (void)state;
    struct gh_kube_blob b;
    struct gh_err err;
    assert_int_equal(gh_kube_base64_decode("aGVs\nbG8=", 9, &b, &err), GH_OK);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "hello", 5);
    free(b.data);
    assert_int_equal(gh_kube_base64_decode("a*b", 3, &b, &err), GH_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_scalars_and_structure),
        cmocka_unit_test(test_yaml_refusals),
        cmocka_unit_test(test_kubeconfig_inline_current_context),
        cmocka_unit_test(test_kubeconfig_named_context_token),
        cmocka_unit_test(test_kubeconfig_malformed),
        cmocka_unit_test(test_kubeconfig_files_relative),
        cmocka_unit_test(test_incluster_paths),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests_name("kube_kubeconfig", tests, NULL, NULL);
}
