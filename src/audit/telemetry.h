/* telemetry.h - training telemetry in the audit store, kept for the step-time
 * chart of `gpuheal report --db`: per (job, rank), one aggregate of step
 * times per time bucket (count, sum, min, max, last step), never the raw
 * samples. The table is bounded by time: a write drops the buckets older
 * than the caller's retention, so it holds at most ranks x (retention /
 * bucket width) rows. The controller writes it through the batching writer
 * of step_writer.h, not directly.
 *
 * Step times are kept in whole microseconds. Times are int64 ns, UTC. */
#ifndef GH_AUDIT_TELEMETRY_H
#define GH_AUDIT_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"

/* One bucket of one rank's steps (a value type). */
struct gh_audit_steps {
    char job[GH_AUDIT_ID_MAX];
    char node[128];        /* "" when unknown */
    int rank;
    int gpu;               /* -1 when unknown */
    int64_t bucket_ns;     /* start of the bucket */
    int64_t last_ns;       /* time of the newest sample in it */
    int64_t last_step;     /* its step number, -1 when unknown */
    int64_t n;             /* samples */
    int64_t sum_us, min_us, max_us;
};

/* Merges v[0..n) (borrowed) into the table in one transaction: a bucket
 * already stored adds the counts and sums and widens min/max. Then, when
 * drop_before_ns > 0, deletes the buckets that start before it. Must be
 * called outside gh_audit_begin. */
int gh_audit_steps_merge(struct gh_audit *a, const struct gh_audit_steps *v, size_t n,
                         int64_t drop_before_ns, struct gh_err *err);

/* Calls fn for the stored buckets of job (NULL: every job) starting at or
 * after since_ns, oldest first (then job, rank), at most max (0:
 * GH_AUDIT_STEPS_MAX; the newest are kept). s is borrowed for the call. */
#define GH_AUDIT_STEPS_MAX 200000
typedef int (*gh_audit_steps_fn)(void *ud, const struct gh_audit_steps *s);
int gh_audit_steps_read(struct gh_audit *a, const char *job, int64_t since_ns, size_t max,
                        gh_audit_steps_fn fn, void *ud, struct gh_err *err);

#endif
