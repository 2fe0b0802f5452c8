/* baseline.c - the policies the simulator compares: gpuheal's default, an
 * XID-only watcher and plain Kubernetes (no rules), as real policy files
 * parsed by the engine's own parser. */
#include <string.h>

#include "sim/sim.h"

/* Acts on hardware XIDs only: what a node-health daemon watching the kernel
 * log for GPU errors does. No lost-GPU (NVML), ECC-counter, link, straggler,
 * corruption, flapping-node or collective-timeout handling. */
static const char xid_only_yaml[] =
    "# xid-only: isolate and restart on hardware XIDs; nothing else.\n"
    "version: 1\n"
    "rules:\n"
    "  - name: gpu-fell-off-bus\n"
    "    match: {kind: xid, codes: [79]}\n"
    "    actions: [isolate_node, restart_from_checkpoint, reboot_node]\n"
    "    escalate:\n"
    "      - {after: 2, within: 7d, actions: [isolate_node, restart_from_checkpoint, replace_node]}\n"
    "  - name: xid-critical\n"
    "    match: {class: [gpu_hardware, gpu_memory, interconnect, thermal_power], kind: xid, "
    "min_severity: critical}\n"
    "    actions: [catalog]\n"
    "    escalate:\n"
    "      - {after: 2, within: 7d, actions: [isolate_node, restart_from_checkpoint, replace_node]}\n"
    "  - name: xid-high\n"
    "    match: {class: [gpu_hardware, gpu_memory, interconnect, thermal_power], kind: xid, "
    "min_severity: high}\n"
    "    actions: [catalog]\n";

/* No rules: every finding is dropped; Kubernetes restarts pods, collective
 * timeouts notice hangs, and people isolate nodes (the simulator's cluster
 * model does that under every policy). */
static const char k8s_default_yaml[] =
    "# k8s-default: no automatic recovery beyond Kubernetes itself.\n"
    "version: 1\n"
    "rules: []\n";

int gh_sim_policy_new(const char *name, struct gh_policy **out, struct gh_err *err)
{
    *out = NULL;
    const char *text = NULL;
    if (strcmp(name, "gpuheal") == 0) {
        *out = gh_policy_new_default();
        return *out ? GH_OK : gh_err_set(err, GH_ENOMEM, "policy: out of memory");
    }
    if (strcmp(name, "xid-only") == 0)
        text = xid_only_yaml;
    else if (strcmp(name, "k8s-default") == 0)
        text = k8s_default_yaml;
    else
        return gh_err_set(err, GH_ENOTFOUND,
                          "unknown policy \"%s\" (gpuheal, xid-only, k8s-default, or a policy file)",
                          name);
    struct gh_policy_diags d;
    int rc = gh_policy_parse(text, strlen(text), out, &d);
    if (rc != GH_OK)
        return gh_err_set(err, rc, "built-in policy %s: %s", name, d.n ? d.d[0].msg : "invalid");
    return GH_OK;
}
