/* leader.h - leader election on a coordination.k8s.io/v1 Lease, driven by
 * timers on the client's loop (client-go's algorithm):
 *   - a contender tries every retry period (jittered) to acquire the Lease
 *     when it is free, ours, or unrenewed for its leaseDurationSeconds as
 *     observed on the local clock (no clock sync between contenders needed);
 *   - updates carry the read resourceVersion, so two contenders cannot both
 *     win (the loser gets 409 Conflict);
 *   - the leader renews every retry period and gives up leadership when it
 *     could not renew within the renew deadline: a timer fires then, even
 *     while a request is still unanswered (each Lease request also times
 *     out after the renew deadline). */
#ifndef GH_KUBE_LEADER_H
#define GH_KUBE_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "kube/client.h"

struct gh_kube_leader;

/* Strings copied. Require lease > renew_deadline > retry. */
struct gh_kube_leader_opts {
    const char *ns;
    const char *name;
    const char *identity;       /* unique per contender (pod name + random) */
    int64_t lease_ns;           /* 0: 15 s */
    int64_t renew_deadline_ns;  /* 0: 10 s */
    int64_t retry_ns;           /* 0: 2 s */
};

struct gh_kube_leader_cbs {
    void (*started)(void *ud);  /* we lead */
    void (*stopped)(void *ud);  /* we lead no more (lost, or renew deadline passed) */
    void (*new_leader)(void *ud, const char *identity); /* observed holder changed */
};

/* client borrowed (outlives the elector). */
int gh_kube_leader_new(struct gh_kube_client *c, const struct gh_kube_leader_opts *o,
                       const struct gh_kube_leader_cbs *cbs, void *ud, struct gh_kube_leader **out,
                       struct gh_err *err);
int gh_kube_leader_start(struct gh_kube_leader *l, struct gh_err *err);
/* Stops trying/renewing without touching the Lease (a crash looks the same
 * to the others: they take over after the lease duration). */
void gh_kube_leader_stop(struct gh_kube_leader *l);
/* Synchronous clean hand-over: if leading, empties holderIdentity so another
 * contender can take over at once; then stops. */
int gh_kube_leader_release(struct gh_kube_leader *l, struct gh_err *err);
void gh_kube_leader_free(struct gh_kube_leader *l);

/* Fencing: the monotonic time (gh_mono_ns) until which this contender
 * surely leads: the send time of its last successful Lease write plus the
 * renew deadline, which is shorter than the lease duration that any other
 * contender waits from the write on. 0 when not leading. What a leader
 * does on others' behalf (accepting a signal) it does only before this. */
int64_t gh_kube_leader_fence(const struct gh_kube_leader *l);

/* hold true: neither acquire nor renew (the Lease is still read); a leader
 * stops leading now (stopped callback) and another contender takes over
 * once the lease lapses. false: contend again from the next retry. For a
 * leader that cannot do its work (the controller's store cannot record). */
void gh_kube_leader_hold(struct gh_kube_leader *l, bool hold);
bool gh_kube_leader_held(const struct gh_kube_leader *l);

bool gh_kube_leader_is_leader(const struct gh_kube_leader *l);
/* Last observed holder ("" when none). */
const char *gh_kube_leader_holder(const struct gh_kube_leader *l);

#endif
