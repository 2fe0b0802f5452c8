/* history.c - the reads behind `gpuheal advise checkpoint --job`: a job's
 * interruptions and the span of its evidence in the audit store. */
#include "audit/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_int.h"

static int64_t num(const char *s) { return s ? strtoll(s, NULL, 10) : 0; }

struct walk {
    gh_audit_interruption_fn fn;
    void *ud;
};

/* Row: id class mode first_ns decided_ns */
static int interruption_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    struct walk *w = ud;
    struct gh_audit_interruption it;
    memset(&it, 0, sizeof it);
    snprintf(it.id, sizeof it.id, "%s", v[0] ? v[0] : "");
    snprintf(it.cls, sizeof it.cls, "%s", v[1] ? v[1] : "");
    snprintf(it.mode, sizeof it.mode, "%s", v[2] ? v[2] : "");
    it.first_ns = num(v[3]);
    it.decided_ns = num(v[4]);
    return w->fn(w->ud, &it);
}

int gh_audit_interruptions(struct gh_audit *a, const char *job, int64_t from_ns, int64_t to_ns,
                           gh_audit_interruption_fn fn, void *ud, struct gh_err *err)
{
    if (!job || !*job)
        return gh_err_set(err, GH_EINVAL, "no job");
    /* actions is "a,b,c": match whole names */
    static const char sql[] =
        "SELECT id, class, mode, first_ns, decided_ns FROM incidents"
        " WHERE job = $1 AND first_ns >= $2"
        " AND (CAST($3 AS BIGINT) = 0 OR first_ns <= CAST($3 AS BIGINT))"
        " AND (',' || COALESCE(actions, '') || ',' LIKE '%,restart_from_checkpoint,%'"
        "   OR ',' || COALESCE(actions, '') || ',' LIKE '%,retry_in_place,%')"
        " ORDER BY first_ns, id";
    struct walk w = {fn, ud};
    struct gh_db_val p[] = {gh_db_text(job), gh_db_int(from_ns), gh_db_int(to_ns)};
    return gh_db_query(gh_audit__db(a), sql, p, 3, interruption_row, &w, err);
}

static int span_row(void *ud, int ncols, const char *const *v)
{
    (void)ncols;
    int64_t *out = ud;
    out[0] = num(v[0]);
    out[1] = num(v[1]);
    return GH_OK;
}

int gh_audit_job_span(struct gh_audit *a, const char *job, int64_t from_ns, int64_t *first_ns,
                      int64_t *last_ns, struct gh_err *err)
{
    static const char sql[] =
        "SELECT MIN(t), MAX(t) FROM ("
        " SELECT first_ns AS t FROM incidents WHERE job = $1"
        " UNION ALL SELECT decided_ns FROM incidents WHERE job = $1"
        " UNION ALL SELECT ts_ns FROM evidence WHERE job = $1 AND ts_ns > 0"
        " UNION ALL SELECT bucket_ns FROM telemetry WHERE job = $1"
        " UNION ALL SELECT last_ns FROM telemetry WHERE job = $1) AS s WHERE t >= $2";
    int64_t v[2] = {0, 0};
    struct gh_db_val p[] = {gh_db_text(job), gh_db_int(from_ns)};
    int rc = gh_db_query(gh_audit__db(a), sql, p, 2, span_row, v, err);
    *first_ns = rc ? 0 : v[0];
    *last_ns = rc ? 0 : v[1];
    return rc;
}
