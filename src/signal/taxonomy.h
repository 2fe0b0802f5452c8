/* taxonomy.h - the shared vocabulary of diagnosis: fault classes (spec
 * section 3 "class"), severities and recovery actions (spec "actions"), with
 * their wire names. Used by the XID catalog, the engine and the controller. */
#ifndef GH_SIGNAL_TAXONOMY_H
#define GH_SIGNAL_TAXONOMY_H

enum gh_class {
    GH_CLASS_GPU_HARDWARE,
    GH_CLASS_GPU_MEMORY,
    GH_CLASS_INTERCONNECT,
    GH_CLASS_THERMAL_POWER,
    GH_CLASS_STRAGGLER,
    GH_CLASS_SILENT_DATA_CORRUPTION,
    GH_CLASS_FLAPPING_NODE,
    GH_CLASS_APPLICATION,
    GH_CLASS_NETWORK,
    GH_CLASS_UNKNOWN,
    GH_CLASS__COUNT
};

/* Ordered: a higher value is more severe. */
enum gh_severity {
    GH_SEV_INFO,     /* informational, expected in normal operation */
    GH_SEV_LOW,      /* worth recording; act only on repetition */
    GH_SEV_MEDIUM,   /* degrades work; act per policy */
    GH_SEV_HIGH,     /* the job is broken on this GPU; act now */
    GH_SEV_CRITICAL, /* the GPU/node is unusable until reset/reboot/replace */
    GH_SEV__COUNT
};

enum gh_action {
    GH_ACT_NONE,
    GH_ACT_RETRY_IN_PLACE,
    GH_ACT_RESTART_FROM_CHECKPOINT,
    GH_ACT_ISOLATE_NODE,
    GH_ACT_DRAIN_NODE,
    GH_ACT_RESET_GPU,
    GH_ACT_REBOOT_NODE,
    GH_ACT_REPLACE_NODE,
    GH_ACT_RUN_DIAGNOSTICS,
    GH_ACT__COUNT
};

/* What a fault did to the job running where it happened, as the evidence
 * shows it (docs/engine.md, "Impact"). Ordered: a higher value is worse. */
enum gh_impact {
    GH_IMPACT_NONE,   /* no harm seen yet: the job runs on at its peers' pace */
    GH_IMPACT_SLOWER, /* the job is measurably slower (by how much: the incident says) */
    GH_IMPACT_WRONG,  /* the job computes wrong (corruption, non-finite loss) */
    GH_IMPACT_DIED,   /* the job's processes on the node died or hang */
    GH_IMPACT__COUNT
};

/* Where a cause lies (spec section 3, `scope`): a GPU, a node, or a
 * component several nodes share. GH_SCOPE_UNSAID: the incident says none
 * (a node's or GPU's own fault, as before the field existed). */
enum gh_scope {
    GH_SCOPE_UNSAID,
    GH_SCOPE_GPU,
    GH_SCOPE_NODE,
    GH_SCOPE_RACK,
    GH_SCOPE_SWITCH,        /* an InfiniBand/Ethernet switch or rail */
    GH_SCOPE_NVLINK_DOMAIN, /* an NVLink domain (nvidia.com/gpu.clique) */
    GH_SCOPE_FLEET,         /* a rollout, another agent's check, shared storage */
    GH_SCOPE__COUNT
};

const char *gh_scope_name(enum gh_scope s); /* "" for GH_SCOPE_UNSAID */
int gh_scope_from_name(const char *name);

const char *gh_class_name(enum gh_class c);
const char *gh_impact_name(enum gh_impact i);
int gh_impact_from_name(const char *name);
const char *gh_severity_name(enum gh_severity s);
const char *gh_action_name(enum gh_action a);
/* Lookup by wire name; -1 when unknown. */
int gh_class_from_name(const char *name);
int gh_severity_from_name(const char *name);
int gh_action_from_name(const char *name);

#endif
