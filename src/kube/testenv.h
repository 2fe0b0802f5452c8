/* testenv.h - support for tests that run against the real control plane
 * (test/kube): a client from $GH_KUBECONFIG, uniquely named throw-away
 * namespaces, and running the loop until a condition holds. Used by the
 * integration tests, benchmarks and end-to-end scenarios. */
#ifndef GH_KUBE_TESTENV_H
#define GH_KUBE_TESTENV_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "kube/client.h"

/* Loads $GH_KUBECONFIG (else $KUBECONFIG) into a new client (caller frees).
 * GH_ENOTFOUND when neither is set. opts may be NULL. */
int gh_kube_testenv_client(const struct gh_kube_client_opts *opts, struct gh_kube_client **out,
                           struct gh_err *err);

/* Creates namespace "<prefix>-<random>" labelled gpuheal.io/test=true and
 * waits (up to 30 s) for its "default" ServiceAccount, so pods can be made
 * in it. name receives the name (cap >= 64). */
int gh_kube_testenv_namespace(struct gh_kube_client *c, const char *prefix, char *name, size_t cap,
                              struct gh_err *err);

/* Deletes a namespace (and everything in it), not waiting. */
int gh_kube_testenv_drop_namespace(struct gh_kube_client *c, const char *name, struct gh_err *err);

/* Creates or updates (server-side apply) ConfigMap ns/name with data.v = v. */
int gh_kube_testenv_put_configmap(struct gh_kube_client *c, const char *ns, const char *name,
                                  const char *v, struct gh_err *err);

/* Runs the client loop until done(ud) or timeout_ms of real time passed.
 * Returns true when done(ud) held. */
typedef bool (*gh_kube_cond_fn)(void *ud);
bool gh_kube_testenv_until(struct gh_kube_client *c, gh_kube_cond_fn done, void *ud,
                           int64_t timeout_ms);

/* Reads KEY from the test control plane's env file ($GH_KUBE_DIR/env):
 * GH_KUBE_API, GH_KUBE_ETCD, GH_KUBE_BIN ... into buf. */
int gh_kube_testenv_var(const char *key, char *buf, size_t cap, struct gh_err *err);

/* A private kube-apiserver started with the fixture's own arguments (same
 * etcd, certificates and flags) on another port, so a test can kill and
 * restart an apiserver without disturbing tests that share the fixture's.
 * The process dies with the test process (PR_SET_PDEATHSIG). */
struct gh_kube_testenv_apiserver {
    int pid;      /* 0 when not running */
    int port;
    char **argv;  /* owned, NULL-terminated */
    char log[512];
};

/* First call picks a free port and copies the fixture apiserver's argv;
 * later calls restart on the same port. Waits up to 120 s for readiness. */
int gh_kube_testenv_apiserver_start(struct gh_kube_testenv_apiserver *a, struct gh_err *err);
/* Sends sig (SIGKILL: a crash) and reaps the process. */
void gh_kube_testenv_apiserver_kill(struct gh_kube_testenv_apiserver *a, int sig);
/* Hangs the apiserver (SIGSTOP) and returns only once every one of its
 * threads has stopped (waitpid WUNTRACED: the kernel reports the stop when
 * the whole thread group is stopped), so no request can still be answered
 * after the call; on a loaded machine kill() alone returns before that.
 * GH_OK, or an error when it is not running or not stopped. */
int gh_kube_testenv_apiserver_pause(struct gh_kube_testenv_apiserver *a, struct gh_err *err);
/* SIGCONT and wait for the kernel to report it continued. */
int gh_kube_testenv_apiserver_resume(struct gh_kube_testenv_apiserver *a, struct gh_err *err);
/* Kills if running; frees. */
void gh_kube_testenv_apiserver_free(struct gh_kube_testenv_apiserver *a);
/* A client of the private apiserver (admin credentials of $GH_KUBECONFIG). */
int gh_kube_testenv_apiserver_client(const struct gh_kube_testenv_apiserver *a,
                                     const struct gh_kube_client_opts *opts,
                                     struct gh_kube_client **out, struct gh_err *err);

/* Compacts etcd (GH_KUBE_ETCD of the env file) at its current revision;
 * *rev (optional) receives it. */
int gh_kube_testenv_etcd_compact(int64_t *rev, struct gh_err *err);

#endif
