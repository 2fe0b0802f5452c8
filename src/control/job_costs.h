/* job_costs.h - a job's remaining run and restart cost as its owner states
 * them in annotations of the job object or of its pods (pods carry their
 * template's annotations), for the straggler detector's "worth a restart"
 * test:
 *
 *   gpuheal.io/expected-end: RFC 3339 time the run is expected to end
 *       (remaining = expected-end - now, so it shrinks as time passes);
 *   gpuheal.io/remaining:    a duration counted from the object's start
 *       (status.startTime, else metadata.creationTimestamp): the run ends
 *       that long after the pod (job object) started; expected-end wins
 *       when both are valid;
 *   gpuheal.io/restart-cost: a duration, rollback + restart.
 *
 * Durations are "90s", "10m", "1h30m", "2d" (a sum of number+unit terms:
 * ms, s, m, h, d). Pure functions, no I/O. */
#ifndef GH_CONTROL_JOB_COSTS_H
#define GH_CONTROL_JOB_COSTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GH_ANN_EXPECTED_END "gpuheal.io/expected-end"
#define GH_ANN_REMAINING "gpuheal.io/remaining"
#define GH_ANN_RESTART_COST "gpuheal.io/restart-cost"

/* What an object states. A value type; end_from points to one of the
 * GH_ANN_* constants (static storage). */
struct gh_job_costs {
    int64_t end_ns;          /* expected end (UTC ns); INT64_MIN: not stated */
    const char *end_from;    /* GH_ANN_EXPECTED_END or GH_ANN_REMAINING; NULL: not stated */
    int64_t restart_cost_ns; /* < 0: not stated */
};

/* Reads the annotations of obj (a pod or a job object, borrowed). Every valid figure is
 * filled even when another is invalid. Returns GH_OK when every gpuheal
 * cost annotation present is valid (none present: GH_OK, nothing stated);
 * GH_EINVAL when one is not, with err naming each bad annotation and its
 * value ("gpuheal.io/restart-cost \"soon\": not a duration"); that figure
 * is left unstated, so the policy default applies to it. */
int gh_job_costs_read(const json_t *obj, struct gh_job_costs *out, struct gh_err *err);

/* True when c states anything. */
bool gh_job_costs_stated(const struct gh_job_costs *c);

/* The remaining run at now in seconds (0 once the end has passed), or -1
 * when not stated; the restart cost in seconds, or -1. */
double gh_job_costs_remaining_s(const struct gh_job_costs *c, int64_t now);
double gh_job_costs_restart_s(const struct gh_job_costs *c);

/* Says where the figures come from, for an incident's reason, into buf
 * (cap bytes, truncated): "remaining 4.8 min (annotation
 * gpuheal.io/expected-end on pod ml/llm-0, end 2026-11-29T15:05:00.000000Z),
 * restart cost: the policy default". end_on, cost_on: the objects that
 * stated the end and the cost (borrowed; NULL: not named). Returns buf. */
char *gh_job_costs_describe(const struct gh_job_costs *c, int64_t now, const char *end_on,
                            const char *cost_on, char *buf, size_t cap);

#endif
