/* history.h - a job's failure history from the audit store, for `gpuheal
 * advise checkpoint --job`: the interruptions (incidents recorded against
 * the job whose actions restart it: restart_from_checkpoint or
 * retry_in_place) and the span over which the store has evidence of the
 * job (its incidents, their evidence and its telemetry). */
#ifndef GH_AUDIT_HISTORY_H
#define GH_AUDIT_HISTORY_H

#include <stdint.h>

#include "audit/audit.h"

/* One interruption (a value type). */
struct gh_audit_interruption {
    char id[64];
    char cls[32];
    char mode[16];    /* "act", "dry_run", "approval" */
    int64_t first_ns; /* its first evidence: when the job was hit */
    int64_t decided_ns;
};

/* Calls fn for each interruption of job ("ns/name") whose first evidence
 * is in [from_ns, to_ns] (to_ns 0: no end), oldest first. it is borrowed
 * for the call. */
typedef int (*gh_audit_interruption_fn)(void *ud, const struct gh_audit_interruption *it);
int gh_audit_interruptions(struct gh_audit *a, const char *job, int64_t from_ns, int64_t to_ns,
                           gh_audit_interruption_fn fn, void *ud, struct gh_err *err);

/* The first and last time the store has evidence of job at or after
 * from_ns: incident first/decided times, evidence rows naming the job,
 * telemetry buckets. Both 0 when there is none. */
int gh_audit_job_span(struct gh_audit *a, const char *job, int64_t from_ns, int64_t *first_ns,
                      int64_t *last_ns, struct gh_err *err);

#endif
