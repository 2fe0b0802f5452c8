/* telemetry.c - the audit store's telemetry table: merging step-time
 * aggregates (an upsert that adds counts and sums) and reading them back
 * for the report, on both backends. */
#include "audit/telemetry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_int.h"

static int64_t num(const char *s) { return s ? strtoll(s, NULL, 10) : 0; }

/* MIN/MAX of two values: CASE, which both backends spell the same. */
static const char merge_sql[] =
    "INSERT INTO telemetry (job, rank_no, bucket_ns, node, gpu, n, sum_us, min_us, max_us,"
    " last_step, last_ns) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)"
    " ON CONFLICT (job, rank_no, bucket_ns) DO UPDATE SET"
    " n = telemetry.n + excluded.n,"
    " sum_us = telemetry.sum_us + excluded.sum_us,"
    " min_us = CASE WHEN excluded.min_us < telemetry.min_us THEN excluded.min_us"
    "          ELSE telemetry.min_us END,"
    " max_us = CASE WHEN excluded.max_us > telemetry.max_us THEN excluded.max_us"
    "          ELSE telemetry.max_us END,"
    " node = COALESCE(excluded.node, telemetry.node),"
    " gpu = COALESCE(excluded.gpu, telemetry.gpu),"
    " last_step = CASE WHEN excluded.last_ns >= telemetry.last_ns THEN excluded.last_step"
    "             ELSE telemetry.last_step END,"
    " last_ns = CASE WHEN excluded.last_ns > telemetry.last_ns THEN excluded.last_ns"
    "           ELSE telemetry.last_ns END";

int gh_audit_steps_merge(struct gh_audit *a, const struct gh_audit_steps *v, size_t n,
                         int64_t drop_before_ns, struct gh_err *err)
{
    struct gh_db *db = gh_audit__db(a);
    int rc = gh_db_begin(db, err);
    if (rc)
        return rc;
    for (size_t i = 0; !rc && i < n; i++) {
        const struct gh_audit_steps *s = &v[i];
        if (!s->job[0] || s->n <= 0)
            continue;
        struct gh_db_val p[] = {
            gh_db_text(s->job),         gh_db_int(s->rank),
            gh_db_int(s->bucket_ns),    gh_db_text(s->node[0] ? s->node : NULL),
            s->gpu >= 0 ? gh_db_int(s->gpu) : gh_db_null(),
            gh_db_int(s->n),            gh_db_int(s->sum_us),
            gh_db_int(s->min_us),       gh_db_int(s->max_us),
            s->last_step >= 0 ? gh_db_int(s->last_step) : gh_db_null(),
            gh_db_int(s->last_ns)};
        rc = gh_db_exec(db, merge_sql, p, 11, NULL, err);
    }
    if (!rc && drop_before_ns > 0) {
        struct gh_db_val p[] = {gh_db_int(drop_before_ns)};
        rc = gh_db_exec(db, "DELETE FROM telemetry WHERE bucket_ns < $1", p, 1, NULL, err);
    }
    if (rc) {
        gh_db_rollback(db);
        return gh_err_prefix(err, rc, "audit store: telemetry");
    }
    rc = gh_db_commit(db, err);
    if (rc)
        gh_db_rollback(db);
    return rc;
}

struct steps_walk {
    gh_audit_steps_fn fn;
    void *ud;
};

/* Row: job rank_no bucket_ns node gpu n sum_us min_us max_us last_step last_ns */
static int steps_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct steps_walk *w = ud;
    struct gh_audit_steps s;
    memset(&s, 0, sizeof s);
    snprintf(s.job, sizeof s.job, "%s", v[0] ? v[0] : "");
    s.rank = (int)num(v[1]);
    s.bucket_ns = num(v[2]);
    snprintf(s.node, sizeof s.node, "%s", v[3] ? v[3] : "");
    s.gpu = v[4] ? (int)num(v[4]) : -1;
    s.n = num(v[5]);
    s.sum_us = num(v[6]);
    s.min_us = num(v[7]);
    s.max_us = num(v[8]);
    s.last_step = v[9] ? num(v[9]) : -1;
    s.last_ns = num(v[10]);
    return w->fn(w->ud, &s);
}

int gh_audit_steps_read(struct gh_audit *a, const char *job, int64_t since_ns, size_t max,
                        gh_audit_steps_fn fn, void *ud, struct gh_err *err)
{
    if (max == 0 || max > GH_AUDIT_STEPS_MAX)
        max = GH_AUDIT_STEPS_MAX;
    /* the newest max rows, handed out oldest first */
    static const char sql[] =
        "SELECT job, rank_no, bucket_ns, node, gpu, n, sum_us, min_us, max_us, last_step,"
        " last_ns FROM (SELECT * FROM telemetry WHERE bucket_ns >= $2"
        " AND (CAST($1 AS TEXT) IS NULL OR job = $1)"
        " ORDER BY bucket_ns DESC, job, rank_no LIMIT $3) AS t"
        " ORDER BY bucket_ns, job, rank_no";
    struct steps_walk w = {fn, ud};
    struct gh_db_val p[] = {gh_db_text(job), gh_db_int(since_ns), gh_db_int((int64_t)max)};
    return gh_db_query(gh_audit__db(a), sql, p, 3, steps_row, &w, err);
}
