/* health_publish.h - writes node-local GPU health (health.h) to the
 * Kubernetes API: the Node condition GPUHealthy and the node's GPUNodeHealth
 * status. On change only, rate-limited, asynchronous on the client's loop.
 * It never cordons, taints or evicts: acting on the facts is the
 * controller's decision.
 *
 * What is written
 * - PATCH nodes/NODE/status, strategic merge (conditions merge by type, so
 *   the kubelet's and others' conditions stay), fieldManager gpuheal-agent:
 *   {type: GPUHealthy, status, reason, message, lastTransitionTime,
 *   lastHeartbeatTime}. status False when a GPU is unhealthy or lost; True
 *   when all are healthy (reason AllGPUsHealthy) or the worst is degraded
 *   (reason names it, e.g. RowRemapPending: usable, the controller decides);
 *   Unknown (reason NoGPUsObserved) before any GPU is known. reason is the
 *   worst GPU's (gh_health_reason_name: XidCritical, GPULost, ...); message
 *   names every GPU that is not healthy with its cause ("GPU 3
 *   (0000:3b:00.0): XID 79 (GPU has fallen off the bus), critical").
 *   lastTransitionTime changes only when status does.
 * - server-side apply (force, fieldManager gpuheal-agent) of
 *   gpunodehealths/NODE/status: state (Healthy, Degraded, Unhealthy; Unknown
 *   before any GPU), gpuCount, healthyGPUs, observedTime, gpus[] (index,
 *   uuid, pciBusId, state Healthy/Degraded/Failed/Lost, lastXid,
 *   eccDoubleBit, rowRemapPending, rowRemapFailure, lastSignalTime),
 *   evidence[] (the newest opts.evidence_max spec signals of all GPUs and
 *   the node, oldest first) and the GPUHealthy entry of conditions[]. The
 *   agent owns these fields; lastAction and other conditions belong to the
 *   controller and are never written here. When the object does not exist
 *   it is created (POST: metadata.name = spec.nodeName = NODE, owned by the
 *   Node so it goes with it) and the status applied again.
 *
 * When
 * - gh_health_publish_update() after feeding the health state asks for a
 *   check. A check renders both payloads and writes only what differs from
 *   what was last written successfully (timestamps aside; also aside the
 *   GPUs' lastSignalTime and the passing probe results in evidence, which
 *   every passing probe run renews: they go out with the next real change
 *   or resync, so an unchanged state is not rewritten per probe pass).
 *   Checks start at most once per opts.min_interval_ns: changes in
 *   between are coalesced into the next write. Time-based changes (gh_health_next_change) and
 *   opts.resync_ns (a rewrite even without change, so a condition someone
 *   removed comes back) arm a timer of their own.
 * - A failed write is retried with exponential backoff (opts.retry_*,
 *   jittered, at least the server's Retry-After).
 * - First check: the publisher reads the Node (uid for the owner reference;
 *   an existing GPUHealthy condition keeps its lastTransitionTime and is not
 *   rewritten when equal) and, when opts.boot_ns > 0, the GPUNodeHealth:
 *   if its observedTime is at or after boot_ns (written during this boot),
 *   its evidence is replayed into the health state (gh_health_feed), so an
 *   agent restart does not forget a failed GPU while a reboot does.
 *
 * Threading: everything runs on the client's loop thread (callbacks and
 * timers of gh_kube_client); nothing blocks except gh_health_publish_flush.
 * The health state and the client must share one clock. */
#ifndef GH_AGENT_HEALTH_PUBLISH_H
#define GH_AGENT_HEALTH_PUBLISH_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/health.h"
#include "common/err.h"
#include "kube/client.h"

#define GH_HEALTH_CONDITION "GPUHealthy"
#define GH_HEALTH_FIELD_MANAGER "gpuheal-agent"

struct gh_health_publish;

struct gh_health_publish_opts {
    const char *node;          /* copied; required: the Node and GPUNodeHealth name */
    int64_t min_interval_ns;   /* 0 = 10 s between the starts of two writes */
    int64_t resync_ns;         /* 0 = 5 min; < 0 = never rewrite an unchanged state */
    int64_t retry_base_ns;     /* 0 = 1 s, doubling per failure ... */
    int64_t retry_max_ns;      /* ... up to this; 0 = 2 min */
    int64_t boot_ns;           /* this boot's start (clock ns); > 0 enables the replay */
    int evidence_max;          /* 1..50 (the CRD's maxItems); 0 = 50 */
    const char *field_manager; /* copied; NULL = GH_HEALTH_FIELD_MANAGER */
};

/* New publisher for client c and health state h (both borrowed: they must
 * outlive it). Starts no I/O. Caller frees with gh_health_publish_free().
 * GH_EINVAL (no node, option out of range), GH_ENOMEM. */
int gh_health_publish_new(struct gh_kube_client *c, struct gh_health *h,
                          const struct gh_health_publish_opts *opts,
                          struct gh_health_publish **out, struct gh_err *err);

/* Cancels its calls and timer (no callback runs afterwards) and frees.
 * Accepts NULL. */
void gh_health_publish_free(struct gh_health_publish *p);

/* The health state may have changed: schedules a check (immediately when
 * the rate limit allows, else coalesced into the next allowed one). Never
 * blocks; call it on the client's loop thread after feeding signals or
 * snapshots (calling it per signal is fine). */
void gh_health_publish_update(struct gh_health_publish *p);

/* Synchronous, for tests and shutdown: writes what differs now, ignoring
 * min_interval (not a pending retry backoff), and runs the client loop until
 * no write is in flight and nothing is left to write. GH_OK when the API
 * holds the current state; else the first failed write's rc (detail in err;
 * it is retried later as usual); GH_ETIMEOUT after timeout_ms of real time.
 * Other calls' callbacks and timers on the client run meanwhile. */
int gh_health_publish_flush(struct gh_health_publish *p, int timeout_ms, struct gh_err *err);

struct gh_health_publish_stats {
    uint64_t updates;      /* gh_health_publish_update calls */
    uint64_t checks;       /* renders compared with what was written */
    uint64_t unchanged;    /* checks that found nothing to write */
    uint64_t node_patches; /* requests to nodes/NODE/status */
    uint64_t gnh_applies;  /* requests to gpunodehealths/NODE/status */
    uint64_t gnh_creates;  /* GPUNodeHealth objects created */
    uint64_t failures;     /* failed requests */
    uint64_t restored;     /* evidence signals replayed at the first check */
    int last_rc;           /* of the latest failure, GH_OK when none */
    char last_err[GH_ERR_MAX];
};
void gh_health_publish_stats(const struct gh_health_publish *p,
                             struct gh_health_publish_stats *out);

#endif
