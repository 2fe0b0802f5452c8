/* classify.h - small verdicts several detectors share: what a pod failure
 * looks like, where a signal sits, how to name it in a sentence. */
#ifndef GH_ENGINE_CLASSIFY_H
#define GH_ENGINE_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "signal/signal.h"

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

/* True when text mentions a collective timeout or hang. */
bool gh_classify_collective_text(const char *text);

/* snprintf for sentences and keys that are capped on purpose: truncation is
 * the intended behaviour, so the compiler's truncation warning is not wanted. */
int gh_sfmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "gpu-17 GPU 3" / "gpu-17" / "an unknown node" into buf. */
const char *gh_where(const char *node, int gpu, char *buf, size_t cap);

#endif
