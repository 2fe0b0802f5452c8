/* signal.h - the signal model of spec/signals.md section 1 as C values.
 *
 * A gh_signal is a small public value type: one flat struct for every kind,
 * where only the fields of its kind (and the common ones) are meaningful.
 * Every char * field is owned by the signal (heap, NUL-terminated) or NULL
 * when absent; gh_signal_clear() frees them, gh_signal_copy() deep-copies.
 * Optional numbers carry a has_* flag. */
#ifndef GH_SIGNAL_SIGNAL_H
#define GH_SIGNAL_SIGNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

enum gh_source {
    GH_SRC_KMSG,
    GH_SRC_NVML,
    GH_SRC_DCGM,
    GH_SRC_HOST,
    GH_SRC_TELEMETRY,
    GH_SRC_KUBE,
    GH_SRC_PROBE,
    GH_SRC__COUNT
};

enum gh_kind {
    GH_KIND_XID,
    GH_KIND_SXID,
    GH_KIND_ECC,
    GH_KIND_ROW_REMAP,
    GH_KIND_GPU_LOST,
    GH_KIND_NVLINK,
    GH_KIND_PCIE,
    GH_KIND_NIC,
    GH_KIND_THERMAL,
    GH_KIND_POWER,
    GH_KIND_STEP,
    GH_KIND_CHECKPOINT,
    GH_KIND_REPLICA_CHECKSUM,
    GH_KIND_POD_FAILED,
    GH_KIND_POD_STARTED,
    GH_KIND_NODE_NOT_READY,
    GH_KIND_NODE_READY,
    GH_KIND_PROBE_RESULT,
    GH_KIND_POD_SUCCEEDED,
    GH_KIND_JOB_FINISHED,
    GH_KIND_NODE_CONDITION,
    GH_KIND__COUNT
};

enum gh_ecc_bits { GH_ECC_SINGLE, GH_ECC_DOUBLE };
enum gh_link_state { GH_LINK_UNKNOWN, GH_LINK_UP, GH_LINK_DOWN };
enum gh_ckpt_state { GH_CKPT_SAVED, GH_CKPT_FAILED };
enum gh_job_state { GH_JOB_COMPLETE, GH_JOB_FAILED };
/* node_condition "status": Kubernetes' ConditionStatus values. */
enum gh_cond_status { GH_COND_TRUE, GH_COND_FALSE, GH_COND_UNKNOWN };

struct gh_signal {
    /* common */
    int64_t ts_ns;        /* when the source observed it, source clock, UTC ns */
    enum gh_source source;
    enum gh_kind kind;
    char *node;           /* Kubernetes node name */
    int gpu;              /* NVML index; -1 = absent (node-level) */
    char *pci;            /* PCI bus id as given, e.g. "0000:3b:00.0" */
    char *uuid;           /* GPU UUID ("GPU-..."), when the source knows it */
    char *msg;            /* raw line or message */
    char *id;             /* emitter's unique id (dedup key) */
    char *pod_uid;        /* telemetry: the UID of the pod whose process wrote the line,
                             stamped by the agent from the socket peer's cgroup
                             (docs/agent.md, "Who may write"); "pod_uid" on the wire */
    /* Not on the wire: the kernel record's sequence number (/dev/kmsg),
     * set by the kernel-log parser where it makes the id
     * "<node>/<boot_id>/<seq>"; the agent commits it once spooled. */
    uint64_t kmsg_seq;
    bool has_kmsg_seq;
    bool injected;        /* fed by a test/demo/operator, not observed */

    /* xid, sxid */
    bool has_pid; /* (before code: it fills the padding there) */
    int code;
    int64_t pid;
    char *process;        /* xid: process name */
    char *switch_id;      /* sxid: "switch" field (e.g. "nvidia-nvswitch1") */

    /* ecc, nvlink, pcie, nic: cumulative or delta counter value */
    bool has_count;
    int64_t count;
    enum gh_ecc_bits bits;  /* ecc */
    bool is_volatile;       /* ecc */

    /* row_remap */
    bool pending, failure;
    int64_t correctable, uncorrectable;

    /* nvlink, pcie, nic */
    char *counter;        /* e.g. "crc_flit", "replay", "aer_uncorrectable", "link_downed" */
    bool has_link;
    int link;             /* nvlink: link index */
    char *device;         /* nic: e.g. "mlx5_0" */
    bool has_port;
    int port;             /* nic */
    enum gh_link_state state; /* nic, optional */

    /* thermal, power */
    double celsius;
    double watts;
    bool throttled;
    enum gh_job_state job_state; /* job_finished: "state" on the wire (in a padding hole) */

    /* step, checkpoint, replica_checksum, pod_*, job_finished */
    char *job;            /* "namespace/name" or "name" */
    bool has_rank;
    int rank;
    bool has_step;
    int64_t step;
    double step_ms;
    bool has_comm_ms;
    double comm_ms;
    bool has_loss;
    double loss;          /* may be NaN or +-Inf ("nan"/"inf"/"-inf" on the wire) */
    bool has_tokens_per_s;
    double tokens_per_s;
    char *path;           /* checkpoint */
    enum gh_ckpt_state ckpt_state;
    int replica;          /* replica_checksum */
    char *value;          /* replica_checksum: hex string */

    /* pod_failed, pod_started, pod_succeeded */
    char *namespace_;     /* "namespace" on the wire */
    char *pod;
    char *reason;         /* pod_failed: OOMKilled, Error, Evicted, ... */
    bool has_exit_code;
    int exit_code;

    /* probe_result */
    char *check;
    bool passed;
    enum gh_cond_status cond_status; /* node_condition: "status" on the wire (in a padding hole) */
    char *detail;

    /* node_condition: a Node condition another agent (node-problem-detector,
     * a GPU operator's check) set; its "reason" goes in reason above */
    char *condition; /* the condition's type, e.g. "KernelDeadlock" */
};

/* The owned string fields of struct gh_signal, the one list that clear, copy
 * and the timeline's release walk: a new string field is added here too. */
#define GH_SIGNAL_STRINGS(X)                                                                       \
    X(node)                                                                                        \
    X(pci)                                                                                         \
    X(uuid)                                                                                        \
    X(msg)                                                                                         \
    X(id)                                                                                          \
    X(pod_uid)                                                                                     \
    X(process)                                                                                     \
    X(switch_id)                                                                                   \
    X(counter)                                                                                     \
    X(device)                                                                                      \
    X(job)                                                                                         \
    X(path)                                                                                        \
    X(value)                                                                                       \
    X(namespace_)                                                                                  \
    X(pod)                                                                                         \
    X(reason)                                                                                      \
    X(check)                                                                                       \
    X(detail)                                                                                      \
    X(condition)

/* Sets every field to its absent value (gpu = -1). Does not free. */
void gh_signal_init(struct gh_signal *s);
/* Frees owned strings and re-inits. Accepts NULL. */
void gh_signal_clear(struct gh_signal *s);
/* Deep copy into dst (which is overwritten, not freed first). */
int gh_signal_copy(struct gh_signal *dst, const struct gh_signal *src, struct gh_err *err);
/* Replaces *field (freeing the old value) with a copy of the n bytes at v
 * (NUL added); v == NULL sets NULL. */
int gh_signal_set_str(char **field, const char *v, size_t n);

/* Wire names ("kmsg", "xid", ...). */
const char *gh_source_name(enum gh_source src);
const char *gh_kind_name(enum gh_kind kind);
/* Lookup by wire name; returns -1 when unknown. */
int gh_source_from_name(const char *name);
int gh_kind_from_name(const char *name);

#endif
