/* kube_cli.c - the Kubernetes client of the CLI's cluster commands (approve,
 * release): the kubeconfig given (or the default one) loaded and a client
 * made from it, a failure printed once as "gpuheal CMD: message". */
#include "cmd/gpuheal/commands.h"

#include <stdio.h>
#include <string.h>

#include "kube/client.h"
#include "kube/kubeconfig.h"

struct gh_kube_client *gh_cmd_kube_client(const char *cmd, const char *kubeconfig,
                                          const char *context)
{
    struct gh_err err = {{0}};
    struct gh_kube_config kc;
    memset(&kc, 0, sizeof kc);
    int rc = kubeconfig ? gh_kubeconfig_load(kubeconfig, context, &kc, &err)
                        : gh_kubeconfig_load_default(&kc, &err);
    if (rc) {
        fprintf(stderr, "gpuheal %s: %s\n", cmd, err.msg);
        return NULL;
    }
    struct gh_kube_client *c = NULL;
    rc = gh_kube_client_new(&kc, NULL, &c, &err);
    gh_kube_config_clear(&kc);
    if (rc) {
        fprintf(stderr, "gpuheal %s: %s\n", cmd, err.msg);
        return NULL;
    }
    return c;
}
