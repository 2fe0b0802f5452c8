/* taxonomy.c - wire names of fault classes, severities and actions. */
#include "signal/taxonomy.h"

#include <string.h>

static const char *const class_names[GH_CLASS__COUNT] = {
    "gpu_hardware", "gpu_memory",    "interconnect", "thermal_power", "straggler",
    "silent_data_corruption", "flapping_node", "application", "network", "unknown",
};
static const char *const severity_names[GH_SEV__COUNT] = {
    "info", "low", "medium", "high", "critical",
};
static const char *const action_names[GH_ACT__COUNT] = {
    "none",       "retry_in_place", "restart_from_checkpoint", "isolate_node", "drain_node",
    "reset_gpu",  "reboot_node",    "replace_node",            "run_diagnostics",
};

static const char *const impact_names[GH_IMPACT__COUNT] = {"none", "slower", "wrong", "died"};

static int find(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

const char *gh_class_name(enum gh_class c)
{
    return (unsigned)c < GH_CLASS__COUNT ? class_names[c] : "unknown";
}
const char *gh_severity_name(enum gh_severity s)
{
    return (unsigned)s < GH_SEV__COUNT ? severity_names[s] : "?";
}
const char *gh_action_name(enum gh_action a)
{
    return (unsigned)a < GH_ACT__COUNT ? action_names[a] : "?";
}
int gh_class_from_name(const char *name) { return find(class_names, GH_CLASS__COUNT, name); }
int gh_severity_from_name(const char *name) { return find(severity_names, GH_SEV__COUNT, name); }
int gh_action_from_name(const char *name) { return find(action_names, GH_ACT__COUNT, name); }
static const char *const scope_names[GH_SCOPE__COUNT] = {
    "", "gpu", "node", "rack", "switch", "nvlink_domain", "fleet",
};

const char *gh_scope_name(enum gh_scope s)
{
    return (unsigned)s < GH_SCOPE__COUNT ? scope_names[s] : "?";
}
int gh_scope_from_name(const char *name)
{
    int s = find(scope_names, GH_SCOPE__COUNT, name);
    return s == GH_SCOPE_UNSAID ? -1 : s;
}

const char *gh_impact_name(enum gh_impact i)
{
    return (unsigned)i < GH_IMPACT__COUNT ? impact_names[i] : "?";
}
int gh_impact_from_name(const char *name) { return find(impact_names, GH_IMPACT__COUNT, name); }
