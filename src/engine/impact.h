/* impact.h - what a finding did to the job running where it happened, read
 * from the evidence the timeline holds: the job's processes there died (a
 * pod of it failed, a fatal code killed or hung them), it computes wrong
 * (corruption, non-finite loss from its ranks there), it is measurably
 * slower (its ranks there against their peers, by how much), or no harm is
 * seen yet; and whether the hardware state is urgent (a fatal code) or can
 * wait for a safe moment. docs/engine.md, "Impact", states the rules. */
#ifndef GH_ENGINE_IMPACT_H
#define GH_ENGINE_IMPACT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/detector.h"
#include "engine/policy.h"
#include "engine/timeline.h"
#include "engine/topology.h"
#include "signal/taxonomy.h"

struct gh_impact_view {
    enum gh_impact impact;
    bool has_slowdown;
    double slowdown; /* the node's ranks against their peers: 0.12 = 12% slower */
    bool urgent;     /* a fatal code or corruption: it cannot wait */
    bool progressing; /* the job's steps kept coming after the evidence: it did not die */
    char why[200];   /* the evidence for impact, in words ("pod p failed (Error)") */
};

/* Whether job kept training after first (stream time now): synchronous
 * training advances only when every rank does, so steps newer than any it
 * reported up to first, reported from 10 s after first on (a step already
 * in flight may still complete; node clocks differ by seconds), show all
 * of its processes alive, whatever a link or node state suggests. Two such
 * steps are needed; *step gets the newest. (The engine keeps the job's
 * steps: gh_ctx_job_progressing.) */
typedef bool (*gh_progress_fn)(void *ctx, const char *job, int64_t first, int64_t now,
                               int64_t *step);

/* Assesses f (borrowed) for job (the job running on f's node, NULL when
 * none) at stream time now, progressing (NULL: unknown) telling whether a
 * job kept training. Reads the timeline, the topology (the job's
 * other nodes) and the settings (the straggler threshold that makes a
 * slowdown harm); keeps nothing. */
void gh_impact_assess(const struct gh_finding *f, const char *job, struct gh_timeline *tl,
                      struct gh_topology *topo, const struct gh_policy_settings *st, int64_t now,
                      gh_progress_fn progressing, void *pctx, struct gh_impact_view *out);

/* Measures how much slower job's ranks on node are than its ranks elsewhere
 * over their latest steps in [since, now]. false when there is nothing to
 * compare (no steps of it there, or no peers). */
bool gh_impact_slowdown(struct gh_timeline *tl, struct gh_topology *topo, const char *job,
                        const char *node, int64_t since, int64_t now, double *slowdown);

#endif
