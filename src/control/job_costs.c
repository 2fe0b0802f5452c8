/* job_costs.c - reads a job's remaining run and restart cost from the
 * gpuheal.io/expected-end, gpuheal.io/remaining and gpuheal.io/restart-cost
 * annotations of a pod or job object (see job_costs.h). */
#include "control/job_costs.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/timeutil.h"
#include "control/policy_cr.h"

static const char *annotation(const json_t *obj, const char *key)
{
    return gh_json_str(obj, "metadata", "annotations", key);
}

/* Appends "; " and a formatted complaint to err (bounded). */
static void complain(struct gh_err *err, bool *first, const char *key, const char *val,
                     const char *why)
{
    if (!err)
        return;
    size_t used = *first ? 0 : strlen(err->msg);
    if (used >= sizeof err->msg - 1)
        return;
    snprintf(err->msg + used, sizeof err->msg - used, "%s%s \"%.120s\": %s", *first ? "" : "; ",
             key, val, why);
    *first = false;
}

int gh_job_costs_read(const json_t *obj, struct gh_job_costs *out, struct gh_err *err)
{
    out->end_ns = INT64_MIN;
    out->end_from = NULL;
    out->restart_cost_ns = -1;
    if (err)
        err->msg[0] = '\0';
    bool first = true;
    const char *end = annotation(obj, GH_ANN_EXPECTED_END);
    const char *rem = annotation(obj, GH_ANN_REMAINING);
    const char *cost = annotation(obj, GH_ANN_RESTART_COST);
    int64_t v;
    if (end) {
        if (gh_time_parse_rfc3339(end, strlen(end), &v)) {
            out->end_ns = v;
            out->end_from = GH_ANN_EXPECTED_END;
        } else {
            complain(err, &first, GH_ANN_EXPECTED_END, end, "not an RFC 3339 time");
        }
    }
    if (rem) {
        const json_t *status = json_object_get(obj, "status");
        const char *since = gh_json_str(status, "startTime");
        if (!since)
            since = gh_json_str(obj, "metadata", "creationTimestamp");
        int64_t t0;
        if (!gh_policy_cr_duration(rem, &v))
            complain(err, &first, GH_ANN_REMAINING, rem, "not a duration (e.g. 90m, 1h30m, 2d)");
        else if (!since || !gh_time_parse_rfc3339(since, strlen(since), &t0))
            ; /* not started yet: stated once the pod has a start time */
        else if (!out->end_from && t0 <= INT64_MAX - v) {
            out->end_ns = t0 + v;
            out->end_from = GH_ANN_REMAINING;
        }
    }
    if (cost) {
        if (gh_policy_cr_duration(cost, &v))
            out->restart_cost_ns = v;
        else
            complain(err, &first, GH_ANN_RESTART_COST, cost,
                     "not a duration (e.g. 10m, 1h30m)");
    }
    return first ? GH_OK : GH_EINVAL;
}

bool gh_job_costs_stated(const struct gh_job_costs *c)
{
    return c->end_from != NULL || c->restart_cost_ns >= 0;
}

double gh_job_costs_remaining_s(const struct gh_job_costs *c, int64_t now)
{
    if (!c->end_from)
        return -1;
    if (c->end_ns <= now)
        return 0;
    return (double)(c->end_ns - now) / 1e9;
}

double gh_job_costs_restart_s(const struct gh_job_costs *c)
{
    return c->restart_cost_ns >= 0 ? (double)c->restart_cost_ns / 1e9 : -1;
}

/* "45 s", "4.8 min", "48.0 h" */
static void span(double s, char *buf, size_t cap)
{
    if (s < 120)
        snprintf(buf, cap, "%.0f s", s);
    else if (s < 7200)
        snprintf(buf, cap, "%.1f min", s / 60);
    else
        snprintf(buf, cap, "%.1f h", s / 3600);
}

char *gh_job_costs_describe(const struct gh_job_costs *c, int64_t now, const char *end_on,
                            const char *cost_on, char *buf, size_t cap)
{
    char rem[32] = "", cost[32] = "", at[GH_RFC3339_MAX] = "";
    if (c->end_from) {
        span(gh_job_costs_remaining_s(c, now), rem, sizeof rem);
        gh_time_format_rfc3339(c->end_ns, at, sizeof at);
    }
    if (c->restart_cost_ns >= 0)
        span(gh_job_costs_restart_s(c), cost, sizeof cost);
    char r[512], k[448];
    if (c->end_from)
        snprintf(r, sizeof r, "remaining %s (annotation %s%s%.340s, end %s)", rem, c->end_from,
                 end_on ? " on " : "", end_on ? end_on : "", at);
    else
        snprintf(r, sizeof r, "remaining: the policy default");
    if (c->restart_cost_ns >= 0)
        snprintf(k, sizeof k, "restart cost %s (annotation %s%s%.340s)", cost, GH_ANN_RESTART_COST,
                 cost_on ? " on " : "", cost_on ? cost_on : "");
    else
        snprintf(k, sizeof k, "restart cost: the policy default");
    snprintf(buf, cap, "%s, %s", r, k);
    return buf;
}
