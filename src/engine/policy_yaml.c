/* policy_yaml.c - reads a policy from YAML (libyaml) and lints it, reporting
 * every problem with its line number. The walk is schema-driven (fixed depth)
 * and counts visited nodes, so aliases cannot blow it up. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/closest.h"
#include "engine/policy.h"

#define MAX_VISITS 200000
/* Deepest nesting of mappings and sequences accepted. A policy needs 6;
 * libyaml's scanner costs O(depth) per token, so a deeply nested flow list
 * ([[[[...) would take O(n^2) time before the walk could refuse it. */
#define MAX_DEPTH 64

struct ctx {
    yaml_document_t *doc;
    struct gh_policy_diags *diags;
    long visits;
    int errors;
    /* rules with an error of their own: left out of the warnings about
     * other rules (a misspelt key leaves a rule matching everything, and
     * "can never match" after it would blame the rules that follow) */
    bool rule_bad[GH_POLICY_MAX_RULES];
};

static void diag(struct ctx *c, const yaml_node_t *n, bool error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void diag_at(struct gh_policy_diags *d, int line, bool error, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void diag_at(struct gh_policy_diags *d, int line, bool error, const char *fmt, va_list ap)
{
    if (!d)
        return;
    if (error)
        d->errors++;
    else
        d->warnings++;
    if (d->n >= GH_POLICY_MAX_DIAGS)
        return;
    struct gh_policy_diag *x = &d->d[d->n++];
    x->line = line;
    x->error = error;
    vsnprintf(x->msg, sizeof x->msg, fmt, ap);
}

static void diag(struct ctx *c, const yaml_node_t *n, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (error)
        c->errors++;
    diag_at(c->diags, n ? (int)n->start_mark.line + 1 : 0, error, fmt, ap);
    va_end(ap);
}

static void diag_line(struct ctx *c, int line, bool error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "where: unknown key "clas" (did you mean "class"?)" */
static void unknown_key(struct ctx *c, const yaml_node_t *k, const char *where, const char *key,
                        const char *const *known)
{
    const char *near = gh_closest_word(key, known);
    if (near)
        diag(c, k, true, "%s: unknown key \"%s\" (did you mean \"%s\"?)", where, key, near);
    else
        diag(c, k, true, "%s: unknown key \"%s\"", where, key);
}
static void diag_line(struct ctx *c, int line, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (error)
        c->errors++;
    diag_at(c->diags, line, error, fmt, ap);
    va_end(ap);
}

static yaml_node_t *node(struct ctx *c, int id)
{
    if (++c->visits > MAX_VISITS)
        return NULL;
    return yaml_document_get_node(c->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool want_scalar(struct ctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    *out = scalar(n);
    if (!*out) {
        diag(c, n, true, "%s: expected a single value", what);
        return false;
    }
    return true;
}

static bool get_int(struct ctx *c, const yaml_node_t *n, const char *what, long lo, long hi, long *out)
{
    const char *s;
    if (!want_scalar(c, n, what, &s))
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        diag(c, n, true, "%s: \"%s\" is not an integer in %ld..%ld", what, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

static bool get_num(struct ctx *c, const yaml_node_t *n, const char *what, double lo, double hi,
                    double *out)
{
    const char *s;
    if (!want_scalar(c, n, what, &s))
        return false;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < lo || v > hi) {
        diag(c, n, true, "%s: \"%s\" is not a number in %g..%g", what, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

static bool get_dur(struct ctx *c, const yaml_node_t *n, const char *what, int64_t *out)
{
    const char *s;
    if (!want_scalar(c, n, what, &s))
        return false;
    if (!gh_policy_parse_duration(s, out)) {
        diag(c, n, true, "%s: \"%s\" is not a duration (e.g. 500ms, 30s, 10m, 1h, 7d)", what, s);
        return false;
    }
    return true;
}

/* Calls fn for each key/value of a mapping node; diagnoses a non-mapping. */
typedef void (*pair_fn)(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg);

static void each_pair(struct ctx *c, yaml_node_t *m, const char *what, pair_fn fn, void *arg)
{
    if (!m || m->type != YAML_MAPPING_NODE) {
        diag(c, m, true, "%s: expected a mapping (key: value)", what);
        return;
    }
    if (m->data.mapping.pairs.top - m->data.mapping.pairs.start > 256) {
        diag(c, m, true, "%s: more than 256 keys", what);
        return;
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (!k || !v) {
            diag(c, m, true, "%s: document too large or too deeply aliased", what);
            return;
        }
        const char *key = scalar(k);
        if (!key) {
            diag(c, k, true, "%s: keys must be plain strings", what);
            continue;
        }
        for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
            const char *prev = scalar(yaml_document_get_node(c->doc, q->key));
            if (prev && strcmp(prev, key) == 0) {
                diag(c, k, true, "%s: key \"%s\" appears twice", what, key);
                break;
            }
        }
        fn(c, key, k, v, arg);
    }
}

/* A scalar or a sequence of scalars: calls fn for each item. */
typedef bool (*item_fn)(struct ctx *c, yaml_node_t *item, const char *s, void *arg);

static void each_item(struct ctx *c, yaml_node_t *v, const char *what, item_fn fn, void *arg)
{
    if (v->type == YAML_SCALAR_NODE) {
        fn(c, v, scalar(v), arg);
        return;
    }
    if (v->type != YAML_SEQUENCE_NODE) {
        diag(c, v, true, "%s: expected a value or a list of values", what);
        return;
    }
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
        yaml_node_t *it = node(c, *i);
        if (!it) {
            diag(c, v, true, "%s: document too large", what);
            return;
        }
        const char *s = scalar(it);
        if (!s) {
            diag(c, it, true, "%s: list items must be single values", what);
            continue;
        }
        if (!fn(c, it, s, arg))
            return;
    }
}

/* ---- settings --------------------------------------------------------- */

struct setting {
    const char *section, *key;
    enum { T_DUR, T_NUM, T_INT } type;
    size_t off;
    double lo, hi;
};

#define OFF(f) offsetof(struct gh_policy_settings, f)
static const struct setting settings_table[] = {
    {NULL, "reorder_window", T_DUR, OFF(reorder_window_ns), 0, 0},
    {NULL, "hold", T_DUR, OFF(hold_ns), 0, 0},
    {NULL, "episode", T_DUR, OFF(episode_ns), 0, 0},
    {NULL, "hardware_lookback", T_DUR, OFF(hardware_lookback_ns), 0, 0},
    {NULL, "counter_window", T_DUR, OFF(counter_window_ns), 0, 0},
    {NULL, "node_down", T_DUR, OFF(node_down_ns), 0, 0},
    {NULL, "not_ready_toleration", T_DUR, OFF(not_ready_toleration_ns), 0, 0},
    {NULL, "job_idle", T_DUR, OFF(job_idle_ns), 0, 0},
    {"straggler", "threshold", T_NUM, OFF(straggler_threshold), 0.001, 10},
    {"straggler", "k", T_INT, OFF(straggler_k), 1, 64},
    {"straggler", "n", T_INT, OFF(straggler_n), 1, 64},
    {"straggler", "z", T_NUM, OFF(straggler_z), 0, 100},
    {"straggler", "restart_cost", T_DUR, OFF(restart_cost_ns), 0, 0},
    {"straggler", "assume_remaining", T_DUR, OFF(assume_remaining_ns), 0, 0},
    {"sdc", "loss_spike", T_NUM, OFF(loss_spike), 1.01, 1e9},
    {"sdc", "min_history", T_INT, OFF(loss_history), 1, 1024},
    {"sdc", "suspect", T_DUR, OFF(sdc_suspect_ns), 0, 0},
    {"flapping", "alpha", T_NUM, OFF(flap_alpha), 1e-300, 0.5},
    {"flapping", "min_failures", T_INT, OFF(flap_min_failures), 1, 1000},
    {"flapping", "min_jobs", T_INT, OFF(flap_min_jobs), 1, 1000},
    {"flapping", "lookback", T_DUR, OFF(flap_lookback_ns), 0, 0},
    {"flapping", "base_rate_per_node_hour", T_NUM, OFF(flap_base_rate), 1e-12, 1e6},
    {"flapping", "same_failure", T_DUR, OFF(flap_same_failure_ns), 0, 0},
    {"network", "dead_after", T_DUR, OFF(link_dead_ns), 0, 0},
    {"network", "window", T_DUR, OFF(nic_window_ns), 0, 0},
    {"network", "error_burst", T_INT, OFF(nic_error_burst), 1, 1e15},
    {"application", "same_gpu_lookback", T_DUR, OFF(same_gpu_lookback_ns), 0, 0},
    {"application", "same_gpu_jobs", T_INT, OFF(same_gpu_jobs), 2, 1000},
    {"pod_host", "window", T_DUR, OFF(pod_host_window_ns), 0, 0},
    {"pod_host", "min_jobs", T_INT, OFF(pod_host_min_jobs), 2, 1000},
    {"pod_host", "min_pods", T_INT, OFF(pod_host_min_pods), 2, 100000},
    {"fleet", "window", T_DUR, OFF(fleet_window_ns), 0, 0},
    {"fleet", "link_window", T_DUR, OFF(fleet_link_window_ns), 0, 0},
    {"fleet", "min_nodes", T_INT, OFF(fleet_min_nodes), 2, 100000},
    {"fleet", "hold", T_DUR, OFF(fleet_hold_ns), 0, 0},
    {"fleet", "breaker", T_INT, OFF(fleet_breaker), 1, 100000},
};
#undef OFF

struct settings_arg {
    struct gh_policy_settings *s;
    const char *section;
};

static void setting_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg);

static void setting_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
    struct settings_arg *a = arg;
    if (!a->section && v->type == YAML_MAPPING_NODE) {
        bool known = false;
        for (size_t i = 0; i < sizeof settings_table / sizeof settings_table[0]; i++)
            known |= settings_table[i].section && strcmp(settings_table[i].section, key) == 0;
        if (!known) {
            diag(c, k, true, "settings: unknown section \"%s\"", key);
            return;
        }
        struct settings_arg sub = {a->s, key};
        char what[64];
        snprintf(what, sizeof what, "settings.%s", key);
        each_pair(c, v, what, setting_pair, &sub);
        return;
    }
    for (size_t i = 0; i < sizeof settings_table / sizeof settings_table[0]; i++) {
        const struct setting *st = &settings_table[i];
        bool same_section = (!st->section && !a->section) ||
                            (st->section && a->section && strcmp(st->section, a->section) == 0);
        if (!same_section || strcmp(st->key, key) != 0)
            continue;
        char what[96];
        snprintf(what, sizeof what, "settings.%s%s%s", a->section ? a->section : "",
                 a->section ? "." : "", key);
        char *base = (char *)a->s + st->off;
        if (st->type == T_DUR) {
            int64_t d;
            if (get_dur(c, v, what, &d))
                memcpy(base, &d, sizeof d);
        } else if (st->type == T_NUM) {
            double d;
            if (get_num(c, v, what, st->lo, st->hi, &d))
                memcpy(base, &d, sizeof d);
        } else {
            long l;
            if (get_int(c, v, what, (long)st->lo, (long)st->hi, &l)) {
                if (st->off == offsetof(struct gh_policy_settings, nic_error_burst)) {
                    int64_t x = l;
                    memcpy(base, &x, sizeof x);
                } else {
                    int x = (int)l;
                    memcpy(base, &x, sizeof x);
                }
            }
        }
        return;
    }
    diag(c, k, true, "settings%s%s: unknown key \"%s\"", a->section ? "." : "",
         a->section ? a->section : "", key);
}

/* ---- rules ------------------------------------------------------------ */

struct actions_arg {
    enum gh_action *out;
    int *n;
    const char *what;
    bool *catalog; /* NULL where "catalog" is not allowed */
};

static bool action_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    struct actions_arg *a = arg;
    if (strcmp(s, "catalog") == 0) {
        if (!a->catalog)
            diag(c, it, true, "%s: \"catalog\" is only allowed as a rule's base actions", a->what);
        else if (*a->catalog || *a->n)
            diag(c, it, true, "%s: \"catalog\" stands alone", a->what);
        else
            *a->catalog = true;
        return true;
    }
    if (a->catalog && *a->catalog) {
        diag(c, it, true, "%s: \"catalog\" stands alone", a->what);
        return true;
    }
    int act = gh_action_from_name(s);
    if (act < 0) {
        diag(c, it, true,
             "%s: unknown action \"%s\" (none, retry_in_place, restart_from_checkpoint, "
             "isolate_node, drain_node, reset_gpu, reboot_node, replace_node, run_diagnostics; "
             "or catalog alone)",
             a->what, s);
        return true;
    }
    if (*a->n >= GH_POLICY_MAX_ACTIONS) {
        diag(c, it, true, "%s: more than %d actions", a->what, GH_POLICY_MAX_ACTIONS);
        return false;
    }
    for (int i = 0; i < *a->n; i++)
        if (a->out[i] == (enum gh_action)act)
            diag(c, it, false, "%s: action \"%s\" is listed twice", a->what, s);
    a->out[(*a->n)++] = (enum gh_action)act;
    return true;
}

static bool class_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    int v = gh_class_from_name(s);
    if (v < 0)
        diag(c, it, true, "match.class: unknown class \"%s\"", s);
    else
        *(uint32_t *)arg |= 1u << v;
    return true;
}

static bool kind_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    int v = gh_kind_from_name(s);
    if (v < 0)
        diag(c, it, true, "match.kind: unknown signal kind \"%s\"", s);
    else
        *(uint32_t *)arg |= 1u << v;
    return true;
}

static bool impact_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    int v = gh_impact_from_name(s);
    if (v < 0)
        diag(c, it, true, "match.impact: unknown impact \"%s\" (none, slower, wrong, died)", s);
    else
        *(uint32_t *)arg |= 1u << v;
    return true;
}

static bool code_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    struct gh_rule *r = arg;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 0 || v > 1000000) {
        diag(c, it, true, "match.codes: \"%s\" is not a code (an integer 0..1000000)", s);
        return true;
    }
    if (r->n_codes >= GH_POLICY_MAX_CODES) {
        diag(c, it, true, "match.codes: more than %d codes", GH_POLICY_MAX_CODES);
        return false;
    }
    r->codes[r->n_codes++] = (int)v;
    return true;
}

/* A Node condition's type as the API server takes it: a qualified name
 * (an optional DNS-subdomain prefix and "/", then up to 63 of [A-Za-z0-9._-]
 * beginning and ending alphanumeric); capped here at what a rule keeps. */
static bool condition_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= GH_POLICY_CONDITION_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9');
        if (!alnum && ch != '.' && ch != '_' && ch != '-' && ch != '/')
            return false;
        if (!alnum && (i == 0 || i == n - 1))
            return false;
    }
    return true;
}

static bool condition_item(struct ctx *c, yaml_node_t *it, const char *s, void *arg)
{
    struct gh_rule *r = arg;
    if (!condition_name_ok(s)) {
        diag(
            c, it, true,
            "match.condition: \"%s\" is not a Node condition type (1 to %d of A-Z a-z 0-9 . _ - /, "
            "beginning and ending with a letter or digit)",
            s, GH_POLICY_CONDITION_MAX - 1);
        return true;
    }
    if (r->n_conditions >= GH_POLICY_MAX_CONDITIONS) {
        diag(c, it, true, "match.condition: more than %d conditions", GH_POLICY_MAX_CONDITIONS);
        return false;
    }
    for (int i = 0; i < r->n_conditions; i++)
        if (strcmp(r->conditions[i], s) == 0) {
            diag(c, it, false, "match.condition: \"%s\" is listed twice", s);
            return true;
        }
    snprintf(r->conditions[r->n_conditions++], GH_POLICY_CONDITION_MAX, "%s", s);
    return true;
}

static void match_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
    struct gh_rule *r = arg;
    long l;
    const char *s;
    if (strcmp(key, "class") == 0) {
        each_item(c, v, "match.class", class_item, &r->classes);
    } else if (strcmp(key, "kind") == 0) {
        each_item(c, v, "match.kind", kind_item, &r->kinds);
    } else if (strcmp(key, "codes") == 0) {
        each_item(c, v, "match.codes", code_item, r);
    } else if (strcmp(key, "condition") == 0) {
        each_item(c, v, "match.condition", condition_item, r);
    } else if (strcmp(key, "impact") == 0) {
        each_item(c, v, "match.impact", impact_item, &r->impacts);
    } else if (strcmp(key, "min_severity") == 0) {
        if (want_scalar(c, v, "match.min_severity", &s)) {
            int sv = gh_severity_from_name(s);
            if (sv < 0)
                diag(c, v, true, "match.min_severity: unknown severity \"%s\" (info, low, medium, high, critical)", s);
            else
                r->min_severity = (enum gh_severity)sv;
        }
    } else if (strcmp(key, "threshold") == 0) {
        if (get_num(c, v, "match.threshold", -1e300, 1e300, &r->threshold))
            r->has_threshold = true;
    } else if (strcmp(key, "repetitions") == 0) {
        if (get_int(c, v, "match.repetitions", 1, 1000, &l))
            r->repetitions = (int)l;
    } else if (strcmp(key, "window") == 0) {
        get_dur(c, v, "match.window", &r->window_ns);
    } else if (strcmp(key, "debounce") == 0) {
        get_dur(c, v, "match.debounce", &r->debounce_ns);
    } else if (strcmp(key, "boot_grace") == 0) {
        get_dur(c, v, "match.boot_grace", &r->boot_grace_ns);
    } else {
        static const char *const keys[] = {"class",  "kind",         "codes",      "condition",
                                           "impact", "min_severity", "threshold",  "repetitions",
                                           "window", "debounce",     "boot_grace", NULL};
        unknown_key(c, k, "match", key, keys);
    }
}

struct esc_arg {
    struct gh_policy_escalation *e;
    bool has_after, has_actions;
};

static void esc_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
    struct esc_arg *a = arg;
    long l;
    if (strcmp(key, "after") == 0) {
        if (get_int(c, v, "escalate.after", 2, 1000, &l)) {
            a->e->after = (int)l;
            a->has_after = true;
        }
    } else if (strcmp(key, "within") == 0) {
        get_dur(c, v, "escalate.within", &a->e->within_ns);
    } else if (strcmp(key, "actions") == 0) {
        struct actions_arg aa = {a->e->actions, &a->e->n_actions, "escalate.actions", NULL};
        each_item(c, v, "escalate.actions", action_item, &aa);
        a->has_actions = true;
    } else {
        diag(c, k, true, "escalate: unknown key \"%s\"", key);
    }
}

struct rule_arg {
    struct gh_rule *r;
    bool has_name, has_actions;
};

static void rule_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
    struct rule_arg *a = arg;
    struct gh_rule *r = a->r;
    const char *s;
    if (strcmp(key, "name") == 0) {
        if (want_scalar(c, v, "rule name", &s)) {
            if (!*s || strlen(s) >= sizeof r->name)
                diag(c, v, true, "rule name: must be 1..%zu characters", sizeof r->name - 1);
            else
                snprintf(r->name, sizeof r->name, "%s", s);
            a->has_name = true;
        }
    } else if (strcmp(key, "match") == 0) {
        each_pair(c, v, "match", match_pair, r);
    } else if (strcmp(key, "actions") == 0) {
        struct actions_arg aa = {r->actions, &r->n_actions, "actions", &r->catalog_actions};
        each_item(c, v, "actions", action_item, &aa);
        a->has_actions = true;
    } else if (strcmp(key, "escalate") == 0) {
        if (v->type != YAML_SEQUENCE_NODE) {
            diag(c, v, true, "escalate: expected a list of {after, within, actions}");
            return;
        }
        for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
            yaml_node_t *it = node(c, *i);
            if (!it)
                return;
            if (r->n_escalations >= GH_POLICY_MAX_ESCALATIONS) {
                diag(c, it, true, "escalate: more than %d steps", GH_POLICY_MAX_ESCALATIONS);
                return;
            }
            struct esc_arg ea = {&r->escalations[r->n_escalations], false, false};
            each_pair(c, it, "escalate", esc_pair, &ea);
            if (!ea.has_after)
                diag(c, it, true, "escalate: each step needs \"after\" (the n-th incident, >= 2)");
            if (!ea.has_actions || ea.e->n_actions == 0)
                diag(c, it, true, "escalate: each step needs a non-empty \"actions\" list");
            r->n_escalations++;
        }
    } else {
        static const char *const keys[] = {"name", "match", "actions", "escalate", NULL};
        unknown_key(c, k, "rule", key, keys);
    }
}

static void parse_rules(struct ctx *c, yaml_node_t *v, struct gh_policy *p)
{
    if (v->type != YAML_SEQUENCE_NODE) {
        diag(c, v, true, "rules: expected a list of rules");
        return;
    }
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
        yaml_node_t *it = node(c, *i);
        if (!it) {
            diag(c, v, true, "rules: document too large");
            return;
        }
        if (p->n_rules >= GH_POLICY_MAX_RULES) {
            diag(c, it, true, "rules: more than %d rules", GH_POLICY_MAX_RULES);
            return;
        }
        struct gh_rule *r = &p->rules[p->n_rules++];
        memset(r, 0, sizeof *r);
        r->line = (int)it->start_mark.line + 1;
        r->repetitions = 1;
        struct rule_arg ra = {r, false, false};
        int errors_before = c->errors;
        each_pair(c, it, "rule", rule_pair, &ra);
        if (!ra.has_name)
            diag(c, it, true, "rule: needs a \"name\"");
        if (!ra.has_actions || (r->n_actions == 0 && !r->catalog_actions))
            diag(c, it, true, "rule \"%s\": needs a non-empty \"actions\" list", r->name);
        c->rule_bad[p->n_rules - 1] = c->errors > errors_before;
        if (r->n_conditions && r->kinds && !(r->kinds & (1u << GH_KIND_NODE_CONDITION)))
            diag(c, it, false,
                 "rule \"%s\": \"condition\" matches node_condition findings, and the rule's "
                 "kinds exclude them: it never matches",
                 r->name);
        if (r->catalog_actions && r->kinds && !(r->kinds & (1u << GH_KIND_XID)))
            diag(c, it, false,
                 "rule \"%s\": \"catalog\" actions need XID findings, and the rule matches none",
                 r->name);
    }
}

static void top_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
    struct gh_policy *p = arg;
    long l;
    if (strcmp(key, "version") == 0) {
        if (get_int(c, v, "version", 1, 1000, &l)) {
            p->version = (int)l;
            if (l != 1)
                diag(c, v, true, "version: only version 1 is understood");
        }
    } else if (strcmp(key, "settings") == 0) {
        struct settings_arg sa = {&p->settings, NULL};
        each_pair(c, v, "settings", setting_pair, &sa);
    } else if (strcmp(key, "rules") == 0) {
        parse_rules(c, v, p);
    } else {
        static const char *const keys[] = {"version", "settings", "rules", NULL};
        const char *near = gh_closest_word(key, keys);
        if (near)
            diag(c, k, true, "unknown top-level key \"%s\" (did you mean \"%s\"?)", key, near);
        else
            diag(c, k, true, "unknown top-level key \"%s\" (version, settings, rules)", key);
    }
}

/* ---- lint ------------------------------------------------------------- */

static bool targets_node(enum gh_action a)
{
    return a == GH_ACT_ISOLATE_NODE || a == GH_ACT_DRAIN_NODE || a == GH_ACT_RESET_GPU ||
           a == GH_ACT_REBOOT_NODE || a == GH_ACT_REPLACE_NODE;
}

static bool subset(uint32_t inner, uint32_t outer) { return outer == 0 || (inner && !(inner & ~outer)); }

static bool codes_subset(const struct gh_rule *inner, const struct gh_rule *outer)
{
    if (outer->n_codes == 0)
        return true;
    if (inner->n_codes == 0)
        return false;
    for (int i = 0; i < inner->n_codes; i++) {
        bool found = false;
        for (int j = 0; j < outer->n_codes && !found; j++)
            found = inner->codes[i] == outer->codes[j];
        if (!found)
            return false;
    }
    return true;
}

/* Whether every condition inner matches, outer matches too (outer's empty
 * list: any; inner's empty list: any, which a non-empty outer does not cover). */
static bool conditions_subset(const struct gh_rule *inner, const struct gh_rule *outer)
{
    if (outer->n_conditions == 0)
        return true;
    if (inner->n_conditions == 0)
        return false;
    for (int i = 0; i < inner->n_conditions; i++) {
        bool found = false;
        for (int j = 0; j < outer->n_conditions && !found; j++)
            found = strcmp(inner->conditions[i], outer->conditions[j]) == 0;
        if (!found)
            return false;
    }
    return true;
}

static void lint_actions(struct ctx *c, const struct gh_rule *r, const enum gh_action *a, int n,
                         const char *where)
{
    bool app_only = r->classes == (1u << GH_CLASS_APPLICATION);
    for (int i = 0; i < n; i++) {
        if (app_only && targets_node(a[i]))
            diag_line(c, r->line, true,
                      "rule \"%s\"%s: an application fault blames no node, so \"%s\" is not allowed",
                      r->name, where, gh_action_name(a[i]));
        if (a[i] == GH_ACT_NONE && n > 1)
            diag_line(c, r->line, false, "rule \"%s\"%s: \"none\" together with other actions",
                      r->name, where);
    }
}

static void lint(struct ctx *c, const struct gh_policy *p)
{
    if (p->n_rules == 0)
        diag_line(c, 1, false, "no rules: every finding will be dropped");
    const struct gh_policy_settings *s = &p->settings;
    if (s->straggler_k > s->straggler_n)
        diag_line(c, 1, true, "settings.straggler: k (%d) is larger than n (%d)", s->straggler_k,
                  s->straggler_n);
    for (int i = 0; i < p->n_rules; i++) {
        const struct gh_rule *r = &p->rules[i];
        for (int j = 0; j < i; j++)
            if (r->name[0] && strcmp(r->name, p->rules[j].name) == 0)
                diag_line(c, r->line, true, "rule \"%s\": the name is already used on line %d",
                          r->name, p->rules[j].line);
        lint_actions(c, r, r->actions, r->n_actions, "");
        int prev_after = 1;
        for (int e = 0; e < r->n_escalations; e++) {
            const struct gh_policy_escalation *x = &r->escalations[e];
            lint_actions(c, r, x->actions, x->n_actions, " (escalation)");
            if (x->after <= prev_after && x->after != 0)
                diag_line(c, r->line, true,
                          "rule \"%s\": escalation \"after\" values must increase (%d after %d)",
                          r->name, x->after, prev_after);
            if (x->after > prev_after)
                prev_after = x->after;
            if (x->within_ns == 0)
                diag_line(c, r->line, false,
                          "rule \"%s\": escalation without \"within\" counts incidents forever",
                          r->name);
        }
        if (r->repetitions > 1 && r->window_ns == 0)
            diag_line(c, r->line, false,
                      "rule \"%s\": repetitions without a \"window\" count occurrences forever",
                      r->name);
        for (int j = 0; j < i && !c->rule_bad[i]; j++) {
            const struct gh_rule *q = &p->rules[j];
            if (c->rule_bad[j])
                continue;
            bool always = q->repetitions <= 1 && q->boot_grace_ns == 0;
            bool thr = !q->has_threshold || (r->has_threshold && r->threshold >= q->threshold);
            if (always && thr && subset(r->classes, q->classes) && subset(r->kinds, q->kinds) &&
                subset(r->impacts, q->impacts) && codes_subset(r, q) && conditions_subset(r, q) &&
                q->min_severity <= r->min_severity) {
                diag_line(c, r->line, false,
                          "rule \"%s\" can never match: rule \"%s\" (line %d) comes first and "
                          "matches everything it does",
                          r->name, q->name, q->line);
                break;
            }
        }
    }
}

/* A pass over libyaml's events that stops at the first node nested deeper
 * than MAX_DEPTH: 0, or the line of that node (*syntax set when the YAML is
 * bad instead; yaml_parser_load reports it). Linear: it never goes deeper
 * than MAX_DEPTH. */
static int too_deep(const char *text, size_t len, bool *syntax)
{
    yaml_parser_t parser;
    int depth = 0, line = 0;
    *syntax = false;
    if (!yaml_parser_initialize(&parser))
        return 0;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            *syntax = true;
            break;
        }
        yaml_event_type_t t = ev.type;
        int at = (int)ev.start_mark.line + 1;
        yaml_event_delete(&ev);
        if (t == YAML_STREAM_END_EVENT)
            break;
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH) {
                line = at;
                break;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        }
    }
    yaml_parser_delete(&parser);
    return line;
}

int gh_policy_parse(const char *text, size_t len, struct gh_policy **out,
                    struct gh_policy_diags *diags)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct gh_policy_diags local;
    struct gh_policy *p = NULL;
    int rc = GH_OK;
    *out = NULL;
    if (!diags)
        diags = &local;
    memset(diags, 0, sizeof *diags);
    struct ctx c = {.doc = &doc, .diags = diags};
    if (len > GH_POLICY_MAX_BYTES) {
        diag_line(&c, 0, true, "policy larger than %d bytes", GH_POLICY_MAX_BYTES);
        return GH_EINVAL;
    }
    bool syntax;
    int deep = too_deep(text, len, &syntax);
    if (deep) {
        diag_line(&c, deep, true, "nested deeper than %d levels (a policy needs 6): refused",
                  MAX_DEPTH);
        return GH_EINVAL;
    }
    p = calloc(1, sizeof *p);
    if (!p || !yaml_parser_initialize(&parser)) {
        free(p);
        diag_line(&c, 0, true, "out of memory");
        return GH_ENOMEM;
    }
    p->version = 1;
    gh_policy_settings_default(&p->settings);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        diag_line(&c, (int)parser.problem_mark.line + 1, true, "YAML: %s%s%s",
                  parser.problem ? parser.problem : "syntax error",
                  parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        free(p);
        return GH_EINVAL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        diag_line(&c, 1, true, "empty policy: expected version, settings and rules");
    else
        each_pair(&c, root, "policy", top_pair, p);
    if (c.visits > MAX_VISITS)
        diag_line(&c, 0, true, "policy too large or too deeply aliased");
    if (root)
        lint(&c, p);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (c.errors) {
        free(p);
        rc = GH_EINVAL;
    } else {
        *out = p;
    }
    return rc;
}
