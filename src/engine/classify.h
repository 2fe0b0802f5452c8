/* classify.h - small verdicts several detectors share: what a pod failure
 * looks like, where a signal sits, how to name it in a sentence. */
#ifndef GH_ENGINE_CLASSIFY_H
#define GH_ENGINE_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "signal/signal.h"
#include "signal/taxonomy.h"

enum gh_podfail {
    GH_PF_IGNORE,     /* not a fault: evicted, preempted, completed */
    GH_PF_OOM,        /* OOMKilled: the application's memory */
    GH_PF_APP,        /* non-zero exit, error: the application unless hardware says otherwise */
    GH_PF_COLLECTIVE, /* a collective timed out or hung (NCCL watchdog, ...) */
};

/* Classifies a pod_failed signal from its reason, exit code and message. */
enum gh_podfail gh_classify_pod_failure(const struct gh_signal *s);

/* True when a pod_failed signal shows the node's host failing the pod
 * rather than the application failing: the container runtime could not
 * create, start or track it (CreateContainerError, RunContainerError,
 * StartError, ContainerCannotRun, ContainerStatusUnknown, exit code 128,
 * "OCI runtime", "failed to create containerd task", "context deadline
 * exceeded" from the runtime), the kubelet refused it
 * (UnexpectedAdmissionError), the node lost it (NodeLost), or a write hit
 * a read-only filesystem ("read-only file system"). A Node condition
 * (KernelDeadlock, FrequentKubeletRestart, ...) explains these, never an
 * application's own exit or OOM. */
bool gh_classify_host_failure(const struct gh_signal *s);

/* True when a pod_failed signal shows the node refusing to run the pod at
 * all (docs/engine.md, "A Ready node that fails every pod"): the kubelet's
 * admission failed (UnexpectedAdmissionError: a device plugin's Allocate
 * failed, "requested number of devices unavailable", "GPU is lost"), or
 * the runtime could not create or start its container (CreateContainerError,
 * RunContainerError, StartError, ContainerCannotRun, "failed to create
 * containerd task", "OCI runtime create failed", "nvidia-container-cli",
 * "CDI device injection failed"). Not when the message shows the pod's
 * own image or spec at fault (runc's `exec: "..."`, "executable file not
 * found", "exec format error", "no command specified") with nothing of the
 * GPU stack in it: the pod's own failure, judged as an application's (a
 * runtime that fails every container with those words,
 * opencontainers/runc#4713, is left to the flapping detector). */
bool gh_classify_pod_rejected(const struct gh_signal *s);
/* True when the kubelet refused the pod at admission
 * (UnexpectedAdmissionError): never the application's doing, it never ran. */
bool gh_classify_pod_admission(const struct gh_signal *s);

/* True when text mentions a collective timeout or hang. */
bool gh_classify_collective_text(const char *text);

/* What a driver line says of its own severity (spec section 1, "The
 * source's own words are evidence"): the NVSwitch SXid lines and the
 * NVLink5 XIDs (144-150) say "Fatal", "Non-fatal" or "Nonfatal". */
enum gh_stated { GH_STATED_NONE, GH_STATED_NONFATAL, GH_STATED_FATAL };
enum gh_stated gh_classify_stated(const char *msg);
/* An XID's or SXid's severity once the line's own word is heard: a stated
 * "Non-fatal" lowers it to low (never below info: an ignored code stays
 * ignored), a stated "Fatal" raises it to at least high. It takes
 * precedence over the catalog's default for the code, both ways. */
enum gh_severity gh_classify_stated_severity(enum gh_severity code_sev, enum gh_stated st);
/* An SXid's weight from its code (the Fabric Manager guide's classes as
 * NVSentinel and gpud map them, shared/data/gpu-signals.md 1.5) and the
 * line's own "Fatal"/"Non-fatal". INFO: ignore; LOW: only when it keeps
 * coming; HIGH: may take the fabric down; CRITICAL: always fatal. */
enum gh_severity gh_classify_sxid(int code, const char *msg);

/* snprintf for sentences and keys that are capped on purpose: truncation is
 * the intended behaviour, so the compiler's truncation warning is not wanted. */
int gh_sfmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "gpu-17 GPU 3" / "gpu-17" / "an unknown node" into buf. */
const char *gh_where(const char *node, int gpu, char *buf, size_t cap);

#endif
