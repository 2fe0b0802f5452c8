/* kubeconfig.h - where the Kubernetes API is and how to authenticate to it:
 * a kubeconfig file (libyaml), or the in-cluster service-account mount.
 *
 * struct gh_kube_config is a public value type: every pointer in it is owned
 * by the struct (heap) or NULL when absent, and gh_kube_config_clear() frees
 * them. Certificates and keys are held as in-memory PEM blobs (files named by
 * a kubeconfig are read at load time), so no key file is needed later. */
#ifndef GH_KUBE_KUBECONFIG_H
#define GH_KUBE_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define GH_KUBECONFIG_MAX_FILE (4u << 20) /* kubeconfig, CA bundle, cert, key, token */

struct gh_kube_blob {
    unsigned char *data; /* owned; NUL-terminated for PEM convenience (not counted in len) */
    size_t len;
};

struct gh_kube_config {
    char *server;                  /* "https://host:port[/prefix]", no trailing '/' */
    char *tls_server_name;         /* SNI / verification name override, or NULL */
    bool insecure_skip_tls_verify; /* never set by in-cluster loading */
    struct gh_kube_blob ca_pem;    /* empty: the system trust store */
    struct gh_kube_blob cert_pem;  /* client certificate chain, or empty */
    struct gh_kube_blob key_pem;   /* client private key, or empty */
    char *token;                   /* bearer token read at load time, or NULL */
    char *token_file;              /* when set, the transport re-reads it (rotation) */
    char *namespace_;              /* default namespace ("default" if unset) */
    char *context;                 /* the context used (kubeconfig only) */
};

/* Flags for gh_kubeconfig_parse. */
enum {
    GH_KUBECONFIG_NO_FILES = 1u << 0, /* refuse file references (fuzzing, untrusted input) */
};

/* Parses kubeconfig text. context: the context to use, or NULL for
 * current-context. base_dir: directory against which relative file paths
 * resolve (NULL: the working directory). *out is cleared first and filled on
 * success; on error it is left empty. Unsupported auth (exec plugins,
 * auth-provider, basic auth) without another credential is GH_EUNSUPPORTED. */
int gh_kubeconfig_parse(const char *text, size_t len, const char *base_dir, const char *context,
                        unsigned flags, struct gh_kube_config *out, struct gh_err *err);

/* Reads and parses the kubeconfig file at path (relative references resolve
 * against its directory). */
int gh_kubeconfig_load(const char *path, const char *context, struct gh_kube_config *out,
                       struct gh_err *err);

/* Where in-cluster configuration comes from. Any NULL field takes the
 * default: the service-account mount under
 * /var/run/secrets/kubernetes.io/serviceaccount and the
 * KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT environment. */
struct gh_kube_incluster_paths {
    const char *token_path;
    const char *ca_path;
    const char *namespace_path;
    const char *host; /* IPv6 literals are bracketed here */
    const char *port;
};

/* Loads in-cluster configuration: token_file = token_path (re-read by the
 * transport when the projected token rotates), CA from ca_path, namespace
 * from namespace_path (optional). GH_ENOTFOUND when not running in a pod. */
int gh_kube_incluster_load(const struct gh_kube_incluster_paths *paths, struct gh_kube_config *out,
                           struct gh_err *err);

/* $KUBECONFIG (first existing entry of the colon list), else ~/.kube/config,
 * else in-cluster with default paths. */
int gh_kubeconfig_load_default(struct gh_kube_config *out, struct gh_err *err);

/* Deep copy; dst is cleared first. */
int gh_kube_config_copy(struct gh_kube_config *dst, const struct gh_kube_config *src,
                        struct gh_err *err);

/* Frees everything src owns and zeroes it. Accepts NULL. */
void gh_kube_config_clear(struct gh_kube_config *cfg);

/* Reads a whole file into a NUL-terminated blob of at most cap bytes
 * (gh_file_read). GH_ENOTFOUND when absent, GH_ELIMIT when larger than cap. */
int gh_kube_read_file(const char *path, size_t cap, struct gh_kube_blob *out, struct gh_err *err);

/* Decodes standard base64 (whitespace ignored) with OpenSSL into a new blob. */
int gh_kube_base64_decode(const char *in, size_t len, struct gh_kube_blob *out,
                          struct gh_err *err);

#endif
