/* kubeconfig.c - loads API endpoint and credentials from a kubeconfig (YAML
 * via gh_yaml_to_json) or from the in-cluster service-account mount. */
#include "kube/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/file.h"
#include "common/json.h"
#include "kube/yaml_json.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static void blob_clear(struct gh_kube_blob *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

void gh_kube_config_clear(struct gh_kube_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->server);
    free(cfg->tls_server_name);
    blob_clear(&cfg->ca_pem);
    blob_clear(&cfg->cert_pem);
    blob_clear(&cfg->key_pem);
    if (cfg->token)
        memset(cfg->token, 0, strlen(cfg->token));
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->namespace_);
    free(cfg->context);
    memset(cfg, 0, sizeof *cfg);
}

static int dup_str(char **dst, const char *src, struct gh_err *err)
{
    *dst = NULL;
    if (!src)
        return GH_OK;
    *dst = strdup(src);
    return *dst ? GH_OK : gh_err_set(err, GH_ENOMEM, "out of memory");
}

static int dup_blob(struct gh_kube_blob *dst, const struct gh_kube_blob *src, struct gh_err *err)
{
    dst->data = NULL;
    dst->len = 0;
    if (!src->data)
        return GH_OK;
    dst->data = malloc(src->len + 1);
    if (!dst->data)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    memcpy(dst->data, src->data, src->len);
    dst->data[src->len] = '\0';
    dst->len = src->len;
    return GH_OK;
}

int gh_kube_config_copy(struct gh_kube_config *dst, const struct gh_kube_config *src,
                        struct gh_err *err)
{
    memset(dst, 0, sizeof *dst);
    int rc;
    if ((rc = dup_str(&dst->server, src->server, err)) ||
        (rc = dup_str(&dst->tls_server_name, src->tls_server_name, err)) ||
        (rc = dup_blob(&dst->ca_pem, &src->ca_pem, err)) ||
        (rc = dup_blob(&dst->cert_pem, &src->cert_pem, err)) ||
        (rc = dup_blob(&dst->key_pem, &src->key_pem, err)) ||
        (rc = dup_str(&dst->token, src->token, err)) ||
        (rc = dup_str(&dst->token_file, src->token_file, err)) ||
        (rc = dup_str(&dst->namespace_, src->namespace_, err)) ||
        (rc = dup_str(&dst->context, src->context, err))) {
        gh_kube_config_clear(dst);
        return rc;
    }
    dst->insecure_skip_tls_verify = src->insecure_skip_tls_verify;
    return GH_OK;
}

int gh_kube_read_file(const char *path, size_t cap, struct gh_kube_blob *out, struct gh_err *err)
{
    char *data;
    int rc = gh_file_read(path, cap, &data, &out->len, err);
    out->data = (unsigned char *)data;
    return rc;
}

int gh_kube_base64_decode(const char *in, size_t len, struct gh_kube_blob *out, struct gh_err *err)
{
    out->data = NULL;
    out->len = 0;
    if (len > GH_KUBECONFIG_MAX_FILE * 2)
        return gh_err_set(err, GH_ELIMIT, "base64 value too long");
    if (len > (size_t)0x7fffffff)
        return gh_err_set(err, GH_ELIMIT, "base64 value too long");
    unsigned char *buf = malloc(len / 4 * 3 + 4);
    if (!buf)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    if (!ctx) {
        free(buf);
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    }
    int n1 = 0, n2 = 0;
    EVP_DecodeInit(ctx);
    int ok = EVP_DecodeUpdate(ctx, buf, &n1, (const unsigned char *)in, (int)len) >= 0 &&
             EVP_DecodeFinal(ctx, buf + n1, &n2) >= 0;
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return gh_err_set(err, GH_EINVAL, "invalid base64");
    }
    out->len = (size_t)n1 + (size_t)n2;
    buf[out->len] = '\0';
    out->data = buf;
    return GH_OK;
}

/* Joins base_dir and a relative path into buf. */
static int resolve_path(const char *base_dir, const char *p, char *buf, size_t cap,
                        struct gh_err *err)
{
    int n;
    if (p[0] == '/' || !base_dir || !base_dir[0])
        n = snprintf(buf, cap, "%s", p);
    else
        n = snprintf(buf, cap, "%s/%s", base_dir, p);
    if (n < 0 || (size_t)n >= cap)
        return gh_err_set(err, GH_ELIMIT, "path too long: %.80s", p);
    return GH_OK;
}

/* Finds the entry named name in a kubeconfig list ("clusters", ...) and
 * returns its inner object under field ("cluster", ...). */
static const json_t *named(const json_t *root, const char *list, const char *field,
                           const char *name)
{
    const json_t *arr = json_object_get(root, list);
    size_t i;
    const json_t *e;
    if (!json_is_array(arr))
        return NULL;
    json_array_foreach(arr, i, e) {
        const char *n = gh_json_str(e, "name");
        if (n && strcmp(n, name) == 0) {
            const json_t *inner = json_object_get(e, field);
            return json_is_object(inner) ? inner : NULL;
        }
    }
    return NULL;
}

/* Loads PEM material from "<key>-data" (base64) or "<key>" (a file). */
static int load_material(const json_t *o, const char *data_key, const char *file_key,
                         const char *base_dir, unsigned flags, struct gh_kube_blob *out,
                         struct gh_err *err)
{
    const char *data = gh_json_str(o, data_key), *file = gh_json_str(o, file_key);
    if (data && data[0]) {
        int rc = gh_kube_base64_decode(data, strlen(data), out, err);
        return rc ? gh_err_prefix(err, rc, "%s", data_key) : GH_OK;
    }
    if (file && file[0]) {
        if (flags & GH_KUBECONFIG_NO_FILES)
            return gh_err_set(err, GH_EUNSUPPORTED, "%s: file references are disabled", file_key);
        char path[4096];
        int rc = resolve_path(base_dir, file, path, sizeof path, err);
        if (!rc)
            rc = gh_kube_read_file(path, GH_KUBECONFIG_MAX_FILE, out, err);
        return rc ? gh_err_prefix(err, rc, "%s", file_key) : GH_OK;
    }
    return GH_OK;
}

static int trim_token(struct gh_kube_blob *b, char **out, struct gh_err *err)
{
    size_t s = 0, e = b->len;
    while (s < e && (b->data[s] == ' ' || b->data[s] == '\n' || b->data[s] == '\r' ||
                     b->data[s] == '\t'))
        s++;
    while (e > s && (b->data[e - 1] == ' ' || b->data[e - 1] == '\n' || b->data[e - 1] == '\r' ||
                     b->data[e - 1] == '\t'))
        e--;
    if (memchr(b->data + s, '\0', e - s) || memchr(b->data + s, '\n', e - s))
        return gh_err_set(err, GH_EINVAL, "token contains NUL or newline");
    *out = strndup((const char *)b->data + s, e - s);
    return *out ? GH_OK : gh_err_set(err, GH_ENOMEM, "out of memory");
}

static int parse_tree(const json_t *root, const char *base_dir, const char *ctx_name,
                      unsigned flags, struct gh_kube_config *out, struct gh_err *err)
{
    if (!json_is_object(root))
        return gh_err_set(err, GH_EINVAL, "kubeconfig: not a mapping");
    const char *kind = gh_json_str(root, "kind");
    if (kind && strcmp(kind, "Config") != 0)
        return gh_err_set(err, GH_EINVAL, "kubeconfig: kind is \"%.40s\", not Config", kind);
    if (!ctx_name || !ctx_name[0])
        ctx_name = gh_json_str(root, "current-context");
    if (!ctx_name || !ctx_name[0])
        return gh_err_set(err, GH_EINVAL, "kubeconfig: no current-context and none given");
    const json_t *ctx = named(root, "contexts", "context", ctx_name);
    if (!json_is_object(ctx))
        return gh_err_set(err, GH_ENOTFOUND, "kubeconfig: context \"%.100s\" not found", ctx_name);
    const char *cluster_name = gh_json_str(ctx, "cluster"), *user_name = gh_json_str(ctx, "user");
    if (!cluster_name)
        return gh_err_set(err, GH_EINVAL, "kubeconfig: context \"%.100s\" names no cluster",
                          ctx_name);
    const json_t *cl = named(root, "clusters", "cluster", cluster_name);
    if (!json_is_object(cl))
        return gh_err_set(err, GH_ENOTFOUND, "kubeconfig: cluster \"%.100s\" not found",
                          cluster_name);
    const json_t *user = NULL;
    if (user_name && user_name[0]) {
        user = named(root, "users", "user", user_name);
        if (!json_is_object(user))
            return gh_err_set(err, GH_ENOTFOUND, "kubeconfig: user \"%.100s\" not found",
                              user_name);
    }

    int rc;
    const char *server = gh_json_str(cl, "server");
    if (!server || !server[0])
        return gh_err_set(err, GH_EINVAL, "kubeconfig: cluster \"%.100s\" has no server",
                          cluster_name);
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return gh_err_set(err, GH_EINVAL, "kubeconfig: server \"%.100s\" is not an http(s) URL",
                          server);
    if ((rc = dup_str(&out->server, server, err)))
        return rc;
    size_t sl = strlen(out->server);
    while (sl > 0 && out->server[sl - 1] == '/')
        out->server[--sl] = '\0';
    if ((rc = dup_str(&out->tls_server_name, gh_json_str(cl, "tls-server-name"), err)))
        return rc;
    out->insecure_skip_tls_verify = json_is_true(json_object_get(cl, "insecure-skip-tls-verify"));
    if ((rc = load_material(cl, "certificate-authority-data", "certificate-authority", base_dir,
                            flags, &out->ca_pem, err)))
        return rc;
    if ((rc = dup_str(&out->namespace_, gh_json_str(ctx, "namespace"), err)) ||
        (rc = dup_str(&out->context, ctx_name, err)))
        return rc;
    if (!user)
        return GH_OK;

    if ((rc = load_material(user, "client-certificate-data", "client-certificate", base_dir, flags,
                            &out->cert_pem, err)) ||
        (rc = load_material(user, "client-key-data", "client-key", base_dir, flags, &out->key_pem,
                            err)))
        return rc;
    if (!out->cert_pem.data != !out->key_pem.data)
        return gh_err_set(err, GH_EINVAL, "kubeconfig: user \"%.100s\" has a client %s without a %s",
                          user_name, out->cert_pem.data ? "certificate" : "key",
                          out->cert_pem.data ? "key" : "certificate");
    const char *token = gh_json_str(user, "token"), *token_file = gh_json_str(user, "tokenFile");
    if (token && token[0]) {
        struct gh_kube_blob b = {(unsigned char *)(uintptr_t)token, strlen(token)};
        if ((rc = trim_token(&b, &out->token, err)))
            return gh_err_prefix(err, rc, "kubeconfig: token");
    } else if (token_file && token_file[0]) {
        if (flags & GH_KUBECONFIG_NO_FILES)
            return gh_err_set(err, GH_EUNSUPPORTED, "tokenFile: file references are disabled");
        char path[4096];
        struct gh_kube_blob b = {0};
        if ((rc = resolve_path(base_dir, token_file, path, sizeof path, err)) ||
            (rc = dup_str(&out->token_file, path, err)))
            return rc;
        rc = gh_kube_read_file(path, GH_KUBECONFIG_MAX_FILE, &b, err);
        if (!rc)
            rc = trim_token(&b, &out->token, err);
        blob_clear(&b);
        if (rc)
            return gh_err_prefix(err, rc, "kubeconfig: tokenFile");
    }
    if (!out->token && !out->cert_pem.data &&
        (json_object_get(user, "exec") || json_object_get(user, "auth-provider") ||
         json_object_get(user, "username")))
        return gh_err_set(err, GH_EUNSUPPORTED,
                          "kubeconfig: user \"%.100s\" uses exec, auth-provider or basic auth, "
                          "which gpuheal does not support",
                          user_name);
    return GH_OK;
}

int gh_kubeconfig_parse(const char *text, size_t len, const char *base_dir, const char *context,
                        unsigned flags, struct gh_kube_config *out, struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = NULL;
    int rc = gh_yaml_to_json(text, len, &root, err);
    if (rc)
        return gh_err_prefix(err, rc, "kubeconfig");
    rc = parse_tree(root, base_dir, context, flags, out, err);
    json_decref(root);
    if (rc)
        gh_kube_config_clear(out);
    return rc;
}

int gh_kubeconfig_load(const char *path, const char *context, struct gh_kube_config *out,
                       struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    struct gh_kube_blob b = {0};
    int rc = gh_kube_read_file(path, GH_KUBECONFIG_MAX_FILE, &b, err);
    if (rc)
        return rc;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir)
            n = sizeof dir - 1;
        memcpy(dir, path, n);
        dir[n] = '\0';
        if (n == 0)
            memcpy(dir, "/", 2);
    } else {
        dir[0] = '\0';
    }
    rc = gh_kubeconfig_parse((const char *)b.data, b.len, dir, context, 0, out, err);
    blob_clear(&b);
    return rc ? gh_err_prefix(err, rc, "%s", path) : GH_OK;
}

int gh_kube_incluster_load(const struct gh_kube_incluster_paths *paths, struct gh_kube_config *out,
                           struct gh_err *err)
{
    static const struct gh_kube_incluster_paths none;
    if (!paths)
        paths = &none;
    memset(out, 0, sizeof *out);
    const char *host = paths->host ? paths->host : getenv("KUBERNETES_SERVICE_HOST");
    const char *port = paths->port ? paths->port : getenv("KUBERNETES_SERVICE_PORT");
    const char *token_path = paths->token_path ? paths->token_path : SA_DIR "/token";
    const char *ca_path = paths->ca_path ? paths->ca_path : SA_DIR "/ca.crt";
    const char *ns_path = paths->namespace_path ? paths->namespace_path : SA_DIR "/namespace";
    if (!host || !host[0] || !port || !port[0])
        return gh_err_set(err, GH_ENOTFOUND,
                          "in-cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return gh_err_set(err, GH_EINVAL, "in-cluster: bad port \"%.20s\"", port);
    char url[512];
    bool v6 = strchr(host, ':') && host[0] != '[';
    int n = snprintf(url, sizeof url, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port);
    if (n < 0 || (size_t)n >= sizeof url)
        return gh_err_set(err, GH_ELIMIT, "in-cluster: host too long");
    int rc;
    struct gh_kube_blob tok = {0};
    if ((rc = dup_str(&out->server, url, err)) || (rc = dup_str(&out->token_file, token_path, err)))
        goto fail;
    if ((rc = gh_kube_read_file(token_path, GH_KUBECONFIG_MAX_FILE, &tok, err)))
        goto fail;
    rc = trim_token(&tok, &out->token, err);
    blob_clear(&tok);
    if (rc)
        goto fail;
    if ((rc = gh_kube_read_file(ca_path, GH_KUBECONFIG_MAX_FILE, &out->ca_pem, err)))
        goto fail;
    struct gh_kube_blob ns = {0};
    rc = gh_kube_read_file(ns_path, 256, &ns, err);
    if (rc == GH_OK) {
        rc = trim_token(&ns, &out->namespace_, err);
        blob_clear(&ns);
        if (rc)
            goto fail;
    } else if (rc != GH_ENOTFOUND) {
        goto fail;
    }
    return GH_OK;
fail:
    gh_kube_config_clear(out);
    return gh_err_prefix(err, rc, "in-cluster");
}

int gh_kubeconfig_load_default(struct gh_kube_config *out, struct gh_err *err)
{
    memset(out, 0, sizeof *out);
    const char *env = getenv("KUBECONFIG");
    char path[4096];
    if (env && env[0]) {
        const char *p = env;
        while (*p) {
            const char *colon = strchr(p, ':');
            size_t n = colon ? (size_t)(colon - p) : strlen(p);
            if (n > 0 && n < sizeof path) {
                memcpy(path, p, n);
                path[n] = '\0';
                if (access(path, R_OK) == 0)
                    return gh_kubeconfig_load(path, NULL, out, err);
            }
            if (!colon)
                break;
            p = colon + 1;
        }
    }
    const char *home = getenv("HOME");
    if (home && home[0]) {
        int n = snprintf(path, sizeof path, "%s/.kube/config", home);
        if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0)
            return gh_kubeconfig_load(path, NULL, out, err);
    }
    return gh_kube_incluster_load(NULL, out, err);
}
