/* kube_signals.h - what the informers see, as signals on the engine's
 * timeline (spec/signals.md section 1, source "kube"): a pod that failed
 * or whose container exited with an error (pod_failed), a pod that started
 * running (pod_started), a node whose Ready condition went False/Unknown
 * (node_not_ready) or back to True (node_ready). Pure functions of the old
 * and new object; ids make repeats (resyncs, relists) duplicates. */
#ifndef GH_CONTROL_KUBE_SIGNALS_H
#define GH_CONTROL_KUBE_SIGNALS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "signal/signal.h"

#define GH_KUBE_SIGNALS_MAX 8

/* The job a pod belongs to, "namespace/name", from the labels of batch/v1
 * Jobs, JobSets and Kubeflow training jobs; NULL when none (buf unused). */
const char *gh_kube_pod_job(const json_t *pod, char *buf, size_t cap);

/* Signals for the change old -> pod (old NULL: first sight). Writes up to
 * max (<= GH_KUBE_SIGNALS_MAX) initialised signals to out (caller clears
 * each with gh_signal_clear) and returns how many. now: the time for
 * signals whose object carries none. */
size_t gh_kube_pod_signals(const json_t *old, const json_t *pod, int64_t now,
                           struct gh_signal *out, size_t max);
size_t gh_kube_node_signals(const json_t *old, const json_t *node, int64_t now,
                            struct gh_signal *out, size_t max);

#endif
