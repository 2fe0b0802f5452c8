/* approve.c - `gpuheal approve ID [--kubeconfig PATH] [--by NAME]`: approves
 * an Incident that waits for approval (controller started with
 * --require-approval) by annotating the Incident object; the leading
 * controller sees it, checks its guards again and acts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/gpuheal/commands.h"
#include "common/timeutil.h"
#include "kube/api.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"

int gh_cmd_approve(int argc, char **argv)
{
    const char *id = NULL, *kubeconfig = NULL, *context = NULL, *by = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kubeconfig") && i + 1 < argc) {
            kubeconfig = argv[++i];
        } else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
            context = argv[++i];
        } else if (!strcmp(argv[i], "--by") && i + 1 < argc) {
            by = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: gpuheal approve ID [--kubeconfig PATH] [--context NAME] [--by NAME]\n"
                   "Approves Incident ID (kubectl get incidents shows the ids; phase\n"
                   "AwaitingApproval): the leading controller checks its guards again and\n"
                   "acts. The same as annotating the Incident gpuheal.io/approved=true.\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "gpuheal approve: unknown option \"%s\"\n", argv[i]);
            return 2;
        } else if (!id) {
            id = argv[i];
        } else {
            fprintf(stderr, "gpuheal approve: one incident at a time\n");
            return 2;
        }
    }
    if (!id) {
        fprintf(stderr, "usage: gpuheal approve ID [--kubeconfig PATH] [--by NAME]\n");
        return 2;
    }
    if (!strncmp(id, "incident/", 9))
        id += 9;
    if (!by)
        by = getenv("USER") ? getenv("USER") : "gpuheal-cli";
    struct gh_err err = {{0}};
    struct gh_kube_client *c = gh_cmd_kube_client("approve", kubeconfig, context);
    if (!c)
        return 1;
    int status = 1;
    struct gh_kube_ref ref = {&gh_kube_res_incidents, NULL, id};
    json_t *inc = NULL, *patch = NULL;
    if (gh_kube_get(c, &ref, &inc, NULL, &err)) {
        fprintf(stderr, "gpuheal approve: %s\n", err.msg);
        goto out;
    }
    const char *phase = json_string_value(
        json_object_get(json_object_get(inc, "status"), "phase"));
    if (phase && strcmp(phase, "AwaitingApproval") != 0) {
        fprintf(stderr, "gpuheal approve: %s is %s, not waiting for approval\n", id, phase);
        goto out;
    }
    char ts[GH_RFC3339_MAX];
    gh_time_format_rfc3339(gh_clock_now(gh_clock_real()), ts, sizeof ts);
    patch = json_pack("{s:{s:{s:s, s:s, s:s}}}", "metadata", "annotations", "gpuheal.io/approved",
                      "true", "gpuheal.io/approved-by", by, "gpuheal.io/approved-at", ts);
    if (!patch || gh_kube_patch(c, &ref, NULL, GH_KUBE_PATCH_MERGE, patch, NULL, NULL, &err)) {
        fprintf(stderr, "gpuheal approve: %s\n", patch ? err.msg : "out of memory");
        goto out;
    }
    printf("approved %s (by %s)\n", id, by);
    status = 0;
out:
    json_decref(inc);
    json_decref(patch);
    gh_kube_client_free(c);
    return status;
}
