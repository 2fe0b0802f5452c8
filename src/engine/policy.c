/* policy.c - the policy model: default settings, rule matching, escalation, equality. */
#include "engine/policy.h"

#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"

bool gh_policy_parse_duration(const char *s, int64_t *ns)
{
    if (!s || !*s)
        return false;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0 || v != v)
        return false;
    double mul;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mul = 1e9;
    else if (strcmp(end, "ms") == 0)
        mul = 1e6;
    else if (strcmp(end, "m") == 0)
        mul = 60e9;
    else if (strcmp(end, "h") == 0)
        mul = 3600e9;
    else if (strcmp(end, "d") == 0)
        mul = 86400e9;
    else
        return false;
    double r = v * mul;
    if (r > 9.2e18)
        return false;
    *ns = (int64_t)r;
    return true;
}

void gh_policy_settings_default(struct gh_policy_settings *s)
{
    memset(s, 0, sizeof *s);
    s->reorder_window_ns = 2 * GH_NS_PER_S;
    s->hold_ns = 30 * GH_NS_PER_S;
    s->episode_ns = 1800 * GH_NS_PER_S;
    s->hardware_lookback_ns = 1800 * GH_NS_PER_S;
    s->counter_window_ns = 300 * GH_NS_PER_S;
    s->straggler_threshold = 0.10;
    s->straggler_k = 8;
    s->straggler_n = 20;
    s->straggler_z = 2.0;
    s->restart_cost_ns = 600 * GH_NS_PER_S;
    s->assume_remaining_ns = 24 * 3600 * GH_NS_PER_S;
    s->loss_spike = 5.0;
    s->loss_history = 8;
    s->sdc_suspect_ns = 24 * 3600 * GH_NS_PER_S;
    s->flap_alpha = 0.001;
    s->flap_min_failures = 3;
    s->flap_min_jobs = 2;
    s->flap_lookback_ns = 28LL * 86400 * GH_NS_PER_S;
    s->flap_base_rate = 0.00016;
    s->flap_same_failure_ns = 300 * GH_NS_PER_S;
    s->link_dead_ns = 60 * GH_NS_PER_S;
    s->nic_window_ns = 600 * GH_NS_PER_S;
    s->nic_error_burst = 1000;
    s->same_gpu_lookback_ns = 24 * 3600 * GH_NS_PER_S;
    s->same_gpu_jobs = 2;
    s->node_down_ns = 60 * GH_NS_PER_S;
    s->not_ready_toleration_ns = 300 * GH_NS_PER_S;
    s->job_idle_ns = 3600 * GH_NS_PER_S;
    s->pod_host_window_ns = 600 * GH_NS_PER_S;
    s->pod_host_min_jobs = 2;
    s->pod_host_min_pods = 3;
    s->fleet_window_ns = 600 * GH_NS_PER_S;
    s->fleet_link_window_ns = 10 * GH_NS_PER_S;
    s->fleet_min_nodes = 3;
    s->fleet_hold_ns = 15 * GH_NS_PER_S;
    s->fleet_breaker = 3;
}

void gh_policy_free(struct gh_policy *p) { free(p); }

struct gh_policy *gh_policy_new_default(void)
{
    const char *y = gh_policy_default_yaml();
    struct gh_policy *p = NULL;
    if (gh_policy_parse(y, strlen(y), &p, NULL) != GH_OK)
        return NULL; /* only on OOM: the built-in text is tested to parse */
    return p;
}

static bool rule_equal(const struct gh_rule *a, const struct gh_rule *b)
{
    if (strcmp(a->name, b->name) || a->classes != b->classes || a->kinds != b->kinds ||
        a->n_codes != b->n_codes || a->n_conditions != b->n_conditions ||
        a->min_severity != b->min_severity || a->impacts != b->impacts ||
        a->has_threshold != b->has_threshold ||
        (a->has_threshold && a->threshold != b->threshold) || a->repetitions != b->repetitions ||
        a->window_ns != b->window_ns || a->debounce_ns != b->debounce_ns ||
        a->boot_grace_ns != b->boot_grace_ns || a->n_actions != b->n_actions ||
        a->n_escalations != b->n_escalations || a->catalog_actions != b->catalog_actions)
        return false;
    if (memcmp(a->codes, b->codes, (size_t)a->n_codes * sizeof a->codes[0]) ||
        memcmp(a->actions, b->actions, (size_t)a->n_actions * sizeof a->actions[0]))
        return false;
    for (int i = 0; i < a->n_conditions; i++)
        if (strcmp(a->conditions[i], b->conditions[i]))
            return false;
    for (int i = 0; i < a->n_escalations; i++) {
        const struct gh_policy_escalation *x = &a->escalations[i], *y = &b->escalations[i];
        if (x->after != y->after || x->within_ns != y->within_ns || x->n_actions != y->n_actions ||
            memcmp(x->actions, y->actions, (size_t)x->n_actions * sizeof x->actions[0]))
            return false;
    }
    return true; /* line numbers are where, not what: not compared */
}

bool gh_policy_equal(const struct gh_policy *a, const struct gh_policy *b)
{
    if (a->version != b->version || a->n_rules != b->n_rules ||
        memcmp(&a->settings, &b->settings, sizeof a->settings))
        return false;
    for (int i = 0; i < a->n_rules; i++)
        if (!rule_equal(&a->rules[i], &b->rules[i]))
            return false;
    return true;
}

int gh_policy_match(const struct gh_policy *p, const struct gh_policy_query *q)
{
    return gh_policy_match_from(p, q, 0);
}

/* Whether r's condition list (empty: any) accepts q's condition. A rule
 * that names conditions matches only findings that carry one. */
static bool condition_match(const struct gh_rule *r, const struct gh_policy_query *q)
{
    if (r->n_conditions == 0)
        return true;
    for (int i = 0; q->condition && i < r->n_conditions; i++)
        if (strcmp(r->conditions[i], q->condition) == 0)
            return true;
    return false;
}

/* r's match but for impact. */
static bool static_match(const struct gh_rule *r, const struct gh_policy_query *q)
{
    if (!condition_match(r, q))
        return false;
    if (r->classes && !(r->classes & (1u << q->cls)))
        return false;
    if (r->kinds && !(r->kinds & (1u << q->kind)))
        return false;
    if (q->severity < r->min_severity)
        return false;
    if (r->has_threshold && (!q->has_metric || q->metric < r->threshold))
        return false;
    if (r->n_codes) {
        bool hit = false;
        for (int c = 0; c < r->n_codes && !hit; c++)
            hit = r->codes[c] == q->code;
        if (!hit)
            return false;
    }
    return true;
}

bool gh_policy_impact_matters(const struct gh_policy *p, const struct gh_policy_query *q, int upto)
{
    int n = upto < 0 || upto > p->n_rules ? p->n_rules : upto;
    for (int i = 0; i < n; i++)
        if (p->rules[i].impacts && static_match(&p->rules[i], q))
            return true;
    return false;
}

int gh_policy_match_from(const struct gh_policy *p, const struct gh_policy_query *q, int from)
{
    for (int i = from < 0 ? 0 : from; i < p->n_rules; i++) {
        const struct gh_rule *r = &p->rules[i];
        if (r->impacts && (!q->has_impact || !(r->impacts & (1u << q->impact))))
            continue;
        if (!condition_match(r, q))
            continue;
        if (r->classes && !(r->classes & (1u << q->cls)))
            continue;
        if (r->kinds && !(r->kinds & (1u << q->kind)))
            continue;
        if (q->severity < r->min_severity)
            continue;
        if (r->has_threshold && (!q->has_metric || q->metric < r->threshold))
            continue;
        if (r->n_codes) {
            bool hit = false;
            for (int c = 0; c < r->n_codes && !hit; c++)
                hit = r->codes[c] == q->code;
            if (!hit)
                continue;
        }
        return i;
    }
    return -1;
}

int gh_policy_actions(const struct gh_rule *r, const int *earlier_within, enum gh_action *out,
                      int *level)
{
    const enum gh_action *acts = r->actions;
    int n = r->n_actions, lv = 0;
    for (int i = 0; i < r->n_escalations; i++)
        if (earlier_within[i] + 1 >= r->escalations[i].after) {
            acts = r->escalations[i].actions;
            n = r->escalations[i].n_actions;
            lv = i + 1;
        }
    memcpy(out, acts, (size_t)n * sizeof *out);
    if (level)
        *level = lv;
    return n;
}
