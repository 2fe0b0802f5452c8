/* kube_signals.h - what the informers see, as signals on the engine's
 * timeline (spec/signals.md section 1, source "kube"): a pod that failed
 * or whose container exited with an error (pod_failed), a pod that started
 * running (pod_started) or ran to completion (pod_succeeded), a training
 * job whose controller says it is over (job_finished), a node whose Ready condition went False/Unknown
 * (node_not_ready) or back to True (node_ready); and Kubernetes Events
 * (events.k8s.io/v1): a Node's NodeNotReady (node_not_ready), NodeReady or
 * Rebooted (node_ready), a Pod's Evicted (pod_failed); and the Node
 * conditions other agents set (node-problem-detector's KernelDeadlock, a GPU
 * check's own) that gpuheal was told to watch, as they change
 * (node_condition). Pure functions of the old and new object; ids make
 * repeats (resyncs, relists, a controller restart) duplicates. */
#ifndef GH_CONTROL_KUBE_SIGNALS_H
#define GH_CONTROL_KUBE_SIGNALS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "signal/signal.h"

#define GH_KUBE_SIGNALS_MAX 8

/* The job a pod belongs to, "namespace/name", from the labels of batch/v1
 * Jobs, JobSets and Kubeflow training jobs; NULL when none (buf unused). */
const char *gh_kube_pod_job(const json_t *pod, char *buf, size_t cap);

/* Signals for the change old -> pod (old NULL: first sight): pod_failed
 * when it failed (phase Failed: its failing container's exit code, reason
 * and message, or the pod's own reason, e.g. UnexpectedAdmissionError with
 * the kubelet's message), when a container restarted after an error, and
 * when a container began to wait in CreateContainerError or
 * RunContainerError (the runtime cannot create or start it; the pod stays
 * Pending: its waiting reason and message, once per reason and restart);
 * pod_started, pod_succeeded. Writes up to
 * max (<= GH_KUBE_SIGNALS_MAX) initialised signals to out (caller clears
 * each with gh_signal_clear) and returns how many. now: the time for
 * signals whose object carries none. */
size_t gh_kube_pod_signals(const json_t *old, const json_t *pod, int64_t now,
                           struct gh_signal *out, size_t max);
size_t gh_kube_node_signals(const json_t *old, const json_t *node, int64_t now,
                            struct gh_signal *out, size_t max);
/* The Node condition types turned into node_condition signals
 * (--node-conditions): names as the API server keeps them, exact. */
#define GH_NODE_CONDITIONS_MAX 32
#define GH_NODE_CONDITION_NAME_MAX 64 /* bytes, NUL included */
struct gh_node_conditions {
    int n;
    char names[GH_NODE_CONDITIONS_MAX][GH_NODE_CONDITION_NAME_MAX];
};
/* node-problem-detector's standard problem conditions (its kernel, docker
 * and systemd monitors): KernelDeadlock, ReadonlyFilesystem, XfsShutdown,
 * CorruptDockerOverlay2, FrequentKubeletRestart, FrequentDockerRestart,
 * FrequentContainerdRestart. */
#define GH_NODE_CONDITIONS_DEFAULT                                                                 \
    "KernelDeadlock,ReadonlyFilesystem,XfsShutdown,CorruptDockerOverlay2,"                         \
    "FrequentKubeletRestart,FrequentDockerRestart,FrequentContainerdRestart"
/* Parses a comma-separated list of condition types into out ("" or "none":
 * watch none). Refuses a malformed name, more than GH_NODE_CONDITIONS_MAX,
 * and the conditions that are not another agent's findings: the kubelet's
 * own (Ready, MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable;
 * Ready is already node_ready/node_not_ready) and gpuheal's own GPUHealthy
 * (fed back, it would raise its own incidents again). */
int gh_node_conditions_parse(const char *list, struct gh_node_conditions *out, struct gh_err *err);
/* Whether type is in c. */
bool gh_node_conditions_has(const struct gh_node_conditions *c, const char *type);

/* node_condition signals for the change old -> node (old NULL: first sight)
 * of the condition types in watch (borrowed): one per watched condition
 * whose status changed (first sight: those True; a condition that appears
 * False or Unknown is a check starting, not news; one that disappears while
 * True is reported False). ts and id come from its lastTransitionTime: id
 * "kube:node:<uid>:cond:<type>:<status>:<lastTransitionTime>", the same
 * after a restart of the controller, so a problem it already decided is
 * not raised again. reason and msg are the condition's. Writes up to max
 * (<= GH_KUBE_SIGNALS_MAX) signals; returns how many. */
size_t gh_kube_node_condition_signals(const json_t *old, const json_t *node,
                                      const struct gh_node_conditions *watch, int64_t now,
                                      struct gh_signal *out, size_t max);

/* Node labels the engine reads (gh_engine_label_wanted: the keys that name
 * a component several nodes share), mirrored from the Node informer. */
#define GH_KUBE_NODE_LABELS_MAX 64
/* The labels of node (borrowed) whose keys wanted accepts: at most cap
 * pairs keys[i] = values[i] (borrowed from node), returns how many. */
size_t gh_kube_node_labels(const json_t *node, bool (*wanted)(const char *key), const char **keys,
                           const char **values, size_t cap);
/* Whether the labels wanted accepts differ between old (NULL: none) and
 * node (NULL: none): only then is there anything to tell the engine. */
bool gh_kube_node_labels_changed(const json_t *old, const json_t *node,
                                 bool (*wanted)(const char *key));

/* job_finished for a job object obj (borrowed, job_kinds.h) whose
 * Complete/Succeeded/Completed or Failed condition became True (a Volcano
 * Job: status.state.phase Completed, Failed, Aborted or Terminated) in the change
 * old -> obj (old NULL: first sight); job names it ("namespace/name").
 * At most one signal; id "kube:job:<uid>:finished". */
size_t gh_kube_job_signals(const json_t *old, const json_t *obj, const char *job, int64_t now,
                           struct gh_signal *out, size_t max);

/* True when ev (an events.k8s.io/v1 Event, borrowed) was reported by
 * gpuheal itself (reportingController or deprecatedSource.component
 * starting with "gpuheal"): never fed back as a signal. */
bool gh_kube_event_is_own(const json_t *ev);

/* At most one signal (max >= 1) for the Event change old -> ev (old NULL:
 * first sight): only for a new occurrence (series.count / deprecatedCount
 * grew, or first sight), not gpuheal's own, no older than max_age_ns
 * before now (0: any age). pod: the Pod the Event regards when the
 * informers know it (borrowed, may be NULL; gives node and job). Ids:
 * "kube:event:<event uid>:<count>", and for Evicted the pod informer's
 * "kube:pod:<pod uid>:failed" (the same failure seen twice is one signal). */
size_t gh_kube_event_signals(const json_t *old, const json_t *ev, const json_t *pod, int64_t now,
                             int64_t max_age_ns, struct gh_signal *out, size_t max);

#endif
