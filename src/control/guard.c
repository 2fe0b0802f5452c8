/* guard.c - budgets, rate limit, cooldown, storm breaker, dry run and
 * approval: the verdicts that stand between a decision and an action. */
#include "control/guard.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "common/strmap.h"

#define MAX_NODES 65536
#define RATE_MAX 100000 /* bound on the remembered dispatch times */
/* How long a dry run counts a node it would have taken out as out of
 * service: a real isolation lasts until the node is repaired and validated,
 * which a dry run never sees; an hour stands in for that. */
#define DRY_HOLD_NS (3600 * GH_NS_PER_S)

struct node_state {
    bool isolated;
    int64_t would_at;    /* dry run: when a verdict last said it would take the node
                       * out (INT64_MIN: never) */
    int64_t last_action; /* INT64_MIN: never */
    int64_t last_blame;  /* INT64_MIN: never */
};

struct gh_guard {
    struct gh_guard_config cfg;
    struct gh_strmap *names;
    struct node_state *nodes; /* indexed like names */
    size_t cap;
    size_t node_count, isolated;
    /* dry run: nodes its verdicts would have taken out (within DRY_HOLD_NS)
     * count against the budget as if they had been, else every verdict sees
     * the same free budget and the dry run under-reports what the budget
     * would hold; forgotten when the dry run ends */
    bool any_would;
    /* dispatch times of the last hour: a ring */
    int64_t *rate;
    size_t rate_cap, rate_head, rate_n;
    struct gh_guard_stats st;
};

void gh_guard_config_default(struct gh_guard_config *c)
{
    memset(c, 0, sizeof *c);
    c->max_isolated = 10;
    c->max_isolated_pct = 10.0;
    c->max_actions_per_hour = 30;
    c->node_cooldown_ns = 30 * 60 * GH_NS_PER_S;
    c->storm_nodes = 5;
    c->storm_window_ns = 5 * 60 * GH_NS_PER_S;
    c->storm_hold_ns = 15 * 60 * GH_NS_PER_S;
}

#define BUDGET_NODES_MAX 1000000

int gh_guard_parse_budget(const char *s, int *nodes, double *pct, struct gh_err *err)
{
    *nodes = -1;
    *pct = -1;
    if (!s || !*s)
        return gh_err_set(err, GH_EINVAL, "empty budget: a count (N) or a percentage (P%%)");
    size_t n = strlen(s);
    bool is_pct = s[n - 1] == '%';
    size_t digits = is_pct ? n - 1 : n;
    int dots = 0;
    for (size_t i = 0; i < digits; i++) {
        if (s[i] == '.' && is_pct && i > 0 && i + 1 < digits && !dots)
            dots++;
        else if (s[i] < '0' || s[i] > '9')
            return gh_err_set(err, GH_EINVAL,
                              "\"%.40s\": a budget is a count (N) or a percentage (P%%)", s);
    }
    if (digits == 0 || digits > 12)
        return gh_err_set(err, GH_EINVAL,
                          "\"%.40s\": a budget is a count (N) or a percentage (P%%)", s);
    double v = strtod(s, NULL);
    if (is_pct) {
        if (v > 100)
            return gh_err_set(err, GH_EINVAL, "\"%.40s\": a percentage is 0%% to 100%%", s);
        *pct = v;
    } else {
        if (v > BUDGET_NODES_MAX)
            return gh_err_set(err, GH_EINVAL, "\"%.40s\": a count is 0 to %d nodes", s,
                              BUDGET_NODES_MAX);
        *nodes = (int)v;
    }
    return GH_OK;
}

void gh_guard_tighten_budget(struct gh_guard_config *c, int nodes, double pct)
{
    if (nodes >= 0 && (c->max_isolated < 0 || nodes < c->max_isolated))
        c->max_isolated = nodes;
    if (pct >= 0 && (c->max_isolated_pct < 0 || pct < c->max_isolated_pct))
        c->max_isolated_pct = pct;
}

struct gh_guard *gh_guard_new(const struct gh_guard_config *cfg)
{
    struct gh_guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->names = gh_strmap_new(MAX_NODES);
    if (!g->names) {
        free(g);
        return NULL;
    }
    gh_guard_set_config(g, cfg);
    return g;
}

void gh_guard_free(struct gh_guard *g)
{
    if (!g)
        return;
    gh_strmap_free(g->names);
    free(g->nodes);
    free(g->rate);
    free(g);
}

void gh_guard_set_config(struct gh_guard *g, const struct gh_guard_config *cfg)
{
    if (cfg)
        g->cfg = *cfg;
    else
        gh_guard_config_default(&g->cfg);
    if (!g->cfg.dry_run && g->any_would) {
        size_t n = gh_strmap_count(g->names);
        for (size_t i = 0; i < n && i < g->cap; i++)
            g->nodes[i].would_at = INT64_MIN;
        g->any_would = false;
    }
}

const struct gh_guard_config *gh_guard_config(const struct gh_guard *g) { return &g->cfg; }

static struct node_state *find(const struct gh_guard *g, const char *node)
{
    long i = node ? gh_strmap_find(g->names, node) : -1;
    return i >= 0 && (size_t)i < g->cap ? &g->nodes[i] : NULL;
}

/* The node's state, made when absent; NULL when full or out of memory. The
 * array grows before the name is interned, so every interned name has a
 * slot. */
static struct node_state *get(struct gh_guard *g, const char *node)
{
    struct node_state *s = find(g, node);
    if (s)
        return s;
    size_t count = gh_strmap_count(g->names);
    if (count >= g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 64;
        struct node_state *nv = realloc(g->nodes, nc * sizeof *nv);
        if (!nv)
            return NULL;
        g->nodes = nv;
        g->cap = nc;
    }
    long i = gh_strmap_intern(g->names, node, NULL, NULL);
    if (i < 0 || (size_t)i >= g->cap)
        return NULL;
    s = &g->nodes[i];
    s->isolated = false;
    s->would_at = INT64_MIN;
    s->last_action = INT64_MIN;
    s->last_blame = INT64_MIN;
    return s;
}

void gh_guard_set_node_count(struct gh_guard *g, size_t n) { g->node_count = n; }

void gh_guard_set_isolated(struct gh_guard *g, const char *node, bool isolated)
{
    struct node_state *s = isolated ? get(g, node) : find(g, node);
    if (!s || s->isolated == isolated)
        return;
    s->isolated = isolated;
    if (isolated)
        g->isolated++;
    else if (g->isolated > 0)
        g->isolated--;
}

bool gh_guard_is_isolated(const struct gh_guard *g, const char *node)
{
    const struct node_state *s = find(g, node);
    return s && s->isolated;
}

size_t gh_guard_isolated_count(const struct gh_guard *g) { return g->isolated; }

size_t gh_guard_budget(const struct gh_guard *g)
{
    size_t b = SIZE_MAX;
    if (g->cfg.max_isolated >= 0)
        b = (size_t)g->cfg.max_isolated;
    if (g->cfg.max_isolated_pct >= 0) {
        double p = floor((double)g->node_count * g->cfg.max_isolated_pct / 100.0);
        size_t pb = g->cfg.max_isolated_pct == 0 ? 0 : p < 1 ? 1 : (size_t)p;
        if (pb < b)
            b = pb;
    }
    return b;
}

void gh_guard_note_blame(struct gh_guard *g, const char *node, int64_t t)
{
    struct node_state *s = node ? get(g, node) : NULL;
    if (s && (s->last_blame == INT64_MIN || t > s->last_blame))
        s->last_blame = t;
}

/* Distinct nodes blamed within the storm window ending at t, and the time
 * of the latest blame. */
static int blamed_within(const struct gh_guard *g, int64_t t, int64_t *latest)
{
    int n = 0;
    *latest = INT64_MIN;
    size_t count = gh_strmap_count(g->names);
    for (size_t i = 0; i < count && i < g->cap; i++) {
        int64_t b = g->nodes[i].last_blame;
        if (b != INT64_MIN && b <= t && b > t - g->cfg.storm_window_ns) {
            n++;
            if (b > *latest)
                *latest = b;
        }
    }
    return n;
}

bool gh_guard_storm_open(const struct gh_guard *g, int64_t now)
{
    if (g->cfg.storm_nodes <= 0)
        return false;
    /* open when, at the latest blame within the hold, the window held
     * storm_nodes distinct nodes */
    int64_t latest;
    if (blamed_within(g, now, &latest) >= g->cfg.storm_nodes)
        return true;
    size_t count = gh_strmap_count(g->names);
    for (size_t i = 0; i < count && i < g->cap; i++) {
        int64_t b = g->nodes[i].last_blame;
        if (b == INT64_MIN || b > now || b <= now - g->cfg.storm_hold_ns)
            continue;
        if (blamed_within(g, b, &latest) >= g->cfg.storm_nodes)
            return true;
    }
    return false;
}

bool gh_guard_action_removes_node(enum gh_action a)
{
    switch (a) {
    case GH_ACT_ISOLATE_NODE:
    case GH_ACT_DRAIN_NODE:
    case GH_ACT_RESET_GPU:
    case GH_ACT_REBOOT_NODE:
    case GH_ACT_REPLACE_NODE:
    case GH_ACT_RUN_DIAGNOSTICS: return true;
    default: return false;
    }
}

static size_t rate_used(const struct gh_guard *g, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < g->rate_n; i++) {
        int64_t t = g->rate[(g->rate_head + i) % g->rate_cap];
        if (t > now - 3600 * GH_NS_PER_S && t <= now)
            n++;
    }
    return n;
}

static void verdict(struct gh_guard_verdict *v, enum gh_action a, enum gh_guard_outcome o,
                    const char *guard, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void verdict(struct gh_guard_verdict *v, enum gh_action a, enum gh_guard_outcome o,
                    const char *guard, const char *fmt, ...)
{
    v->action = a;
    v->outcome = o;
    v->guard = guard;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
}

static bool would_hold(const struct node_state *s, int64_t now)
{
    return !s->isolated && s->would_at != INT64_MIN && s->would_at > now - DRY_HOLD_NS;
}

/* Nodes a dry run would hold out of service now (0 when not a dry run). */
static size_t would_count(const struct gh_guard *g, int64_t now)
{
    if (!g->cfg.dry_run || !g->any_would)
        return 0;
    size_t n = gh_strmap_count(g->names), k = 0;
    for (size_t i = 0; i < n && i < g->cap; i++)
        k += would_hold(&g->nodes[i], now);
    return k;
}

int gh_guard_check(const struct gh_guard *g, const enum gh_action *acts, int n, const char *node,
                   bool approved, int64_t now, struct gh_guard_verdict *out)
{
    const struct gh_guard_config *c = &g->cfg;
    const struct node_state *ns = find(g, node);
    bool held = ns && (ns->isolated || (c->dry_run && would_hold(ns, now)));
    size_t dry_held = would_count(g, now);
    size_t budget = gh_guard_budget(g), used = g->isolated + dry_held;
    char mine[80] = ""; /* the dry run's share of used, in words */
    if (dry_held)
        snprintf(mine, sizeof mine, ", %zu of them by this dry run's own verdicts of the last hour",
                 dry_held);
    size_t rate = rate_used(g, now);
    bool storm = gh_guard_storm_open(g, now);
    bool cooling = c->node_cooldown_ns > 0 && ns && ns->last_action != INT64_MIN &&
                   now - ns->last_action < c->node_cooldown_ns;
    bool reserve = false; /* an earlier action of this incident took the budget */
    int allowed = 0;
    for (int i = 0; i < n; i++) {
        enum gh_action a = acts[i];
        struct gh_guard_verdict *v = &out[i];
        bool removes = node && gh_guard_action_removes_node(a);
        if (a == GH_ACT_NONE) {
            verdict(v, a, GH_GUARD_ALLOW, "none", "nothing to do");
        } else if (!node && gh_guard_action_removes_node(a)) {
            /* a cause several nodes share (a switch, a rack, a rollout)
             * blames none of them: an action on "the node" has no target,
             * and must never fall on the nodes that merely showed it */
            verdict(v, a, GH_GUARD_DENY, "no_node",
                    "not acted: %s needs a blamed node and this incident blames none",
                    gh_action_name(a));
        } else if (removes && cooling) {
            verdict(v, a, GH_GUARD_DENY, "cooldown",
                    "not acted: cooldown (last action on %s %.0f s ago, cooldown %.0f s)", node,
                    (double)(now - ns->last_action) / 1e9, (double)c->node_cooldown_ns / 1e9);
        } else if (removes && !held && !reserve && storm) {
            verdict(v, a, GH_GUARD_DENY, "storm",
                    "not acted: storm breaker open (%d or more nodes blamed within %.0f s); "
                    "new isolations paused", c->storm_nodes, (double)c->storm_window_ns / 1e9);
        } else if (removes && !held && !reserve && used + 1 > budget) {
            verdict(v, a, GH_GUARD_DENY, "budget",
                    "not acted: budget (%zu of %zu nodes already out of service%s)", used, budget,
                    mine);
        } else if (c->max_actions_per_hour > 0 && rate >= (size_t)c->max_actions_per_hour) {
            verdict(v, a, GH_GUARD_DENY, "rate",
                    "not acted: rate (%zu actions in the last hour, limit %d)", rate,
                    c->max_actions_per_hour);
        } else {
            if (removes && !held && !reserve) {
                reserve = true;
                verdict(v, a, GH_GUARD_ALLOW, "budget",
                        "%zu of %zu nodes out of service after this%s", used + 1, budget, mine);
            } else {
                verdict(v, a, GH_GUARD_ALLOW, "none", "within budget and rate");
            }
            rate++;
        }
        /* dry run and approval act on the verdict the guards gave */
        if (c->dry_run && a != GH_ACT_NONE) {
            char was[200];
            snprintf(was, sizeof was, "%s", v->detail);
            bool would = v->outcome == GH_GUARD_ALLOW;
            v->outcome = GH_GUARD_DRY_RUN;
            snprintf(v->detail, sizeof v->detail, "dry run: would %s (%.150s)",
                     would ? "act" : "not act", was);
            if (would)
                v->guard = "dry_run";
        } else if (c->approval && !approved && a != GH_ACT_NONE && v->outcome == GH_GUARD_ALLOW) {
            v->outcome = GH_GUARD_AWAIT;
            v->guard = "approval";
            snprintf(v->detail, sizeof v->detail, "waiting for approval (gpuheal approve ID)");
        }
        if (v->outcome == GH_GUARD_ALLOW)
            allowed++;
    }
    return allowed;
}

/* Appends t to the ring of dispatch times: entries older than an hour are
 * dropped first, then the ring grows up to RATE_MAX, beyond which the
 * oldest is overwritten. */
static void rate_push(struct gh_guard *g, int64_t t)
{
    while (g->rate_n && g->rate[g->rate_head] <= t - 3600 * GH_NS_PER_S) {
        g->rate_head = (g->rate_head + 1) % g->rate_cap;
        g->rate_n--;
    }
    if (g->rate_n == g->rate_cap && g->rate_cap < RATE_MAX) {
        size_t nc = g->rate_cap ? g->rate_cap * 2 : 64;
        int64_t *nv = malloc(nc * sizeof *nv);
        if (nv) {
            for (size_t k = 0; k < g->rate_n; k++)
                nv[k] = g->rate[(g->rate_head + k) % g->rate_cap];
            free(g->rate);
            g->rate = nv;
            g->rate_cap = nc;
            g->rate_head = 0;
        }
    }
    if (g->rate_n < g->rate_cap) {
        g->rate[(g->rate_head + g->rate_n) % g->rate_cap] = t;
        g->rate_n++;
    } else if (g->rate_cap) {
        g->rate[g->rate_head] = t;
        g->rate_head = (g->rate_head + 1) % g->rate_cap;
    }
}

void gh_guard_commit(struct gh_guard *g, const struct gh_guard_verdict *v, int n,
                     const char *node, int64_t now)
{
    bool any = false, removes = false, would = false;
    for (int i = 0; i < n; i++) {
        if (v[i].outcome == GH_GUARD_DRY_RUN && v[i].guard && !strcmp(v[i].guard, "dry_run"))
            would = would || gh_guard_action_removes_node(v[i].action);
        if (v[i].outcome != GH_GUARD_ALLOW || v[i].action == GH_ACT_NONE)
            continue;
        any = true;
        removes = removes || gh_guard_action_removes_node(v[i].action);
        rate_push(g, now);
    }
    if (would && node && g->cfg.dry_run) {
        struct node_state *s = get(g, node);
        if (s && !would_hold(s, now)) {
            s->would_at = now;
            g->any_would = true;
        }
    }
    if (!any || !node || !removes)
        return;
    struct node_state *s = get(g, node);
    if (!s)
        return;
    s->last_action = now;
    gh_guard_set_isolated(g, node, true);
}

void gh_guard_restore(struct gh_guard *g, enum gh_action action, const char *node, int64_t t)
{
    if (action == GH_ACT_NONE)
        return;
    rate_push(g, t);
    if (!node || !gh_guard_action_removes_node(action))
        return;
    struct node_state *s = get(g, node);
    if (!s)
        return;
    if (s->last_action == INT64_MIN || t > s->last_action)
        s->last_action = t;
    gh_guard_note_blame(g, node, t);
}

bool gh_guard_may_release(const struct gh_guard *g, const char *node,
                          struct gh_guard_verdict *out)
{
    if (g->cfg.dry_run) {
        verdict(out, GH_ACT_NONE, GH_GUARD_DRY_RUN, "dry_run",
                "dry run: would return %s to service", node);
        return false;
    }
    verdict(out, GH_ACT_NONE, GH_GUARD_ALLOW, "none",
            "returning a healthy node to service is never blocked");
    return true;
}

void gh_guard_count(struct gh_guard *g, const struct gh_guard_verdict *v, int n)
{
    for (int i = 0; i < n; i++) {
        switch (v[i].outcome) {
        case GH_GUARD_ALLOW: g->st.allowed++; break;
        case GH_GUARD_DRY_RUN: g->st.dry_run++; break;
        case GH_GUARD_AWAIT: g->st.awaiting++; break;
        case GH_GUARD_DENY:
            if (strcmp(v[i].guard, "budget") == 0)
                g->st.denied_budget++;
            else if (strcmp(v[i].guard, "rate") == 0)
                g->st.denied_rate++;
            else if (strcmp(v[i].guard, "cooldown") == 0)
                g->st.denied_cooldown++;
            else if (strcmp(v[i].guard, "storm") == 0)
                g->st.denied_storm++;
            break;
        }
    }
}

void gh_guard_stats(const struct gh_guard *g, struct gh_guard_stats *out) { *out = g->st; }
