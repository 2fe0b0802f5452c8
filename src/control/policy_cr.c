/* policy_cr.c - converts RecoveryPolicy objects' rules into the engine's
 * policy rules and merges the objects in force into one policy. */
#include "control/policy_cr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "control/guard.h"
#include "signal/signal.h"
#include "signal/taxonomy.h"

#define CRSET_MAX 64

/* "90s", "1h30m", "500ms", "7d": a sum of number+unit terms. */
bool gh_policy_cr_duration(const char *s, int64_t *ns)
{
    double total = 0;
    if (!s || !*s)
        return false;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v >= 0)) /* NaN too */
            return false;
        static const struct {
            const char *unit;
            double ns;
        } units[] = {{"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}, {"d", 86400e9}};
        size_t u = 0;
        while (u < sizeof units / sizeof units[0] &&
               strncmp(end, units[u].unit, strlen(units[u].unit)) != 0)
            u++;
        if (u == sizeof units / sizeof units[0])
            return false;
        total += v * units[u].ns;
        s = end + strlen(units[u].unit);
    }
    if (total > 9.2e18)
        return false;
    *ns = (int64_t)total;
    return true;
}

/* The "engine: min_severity high, debounce 10m, boot_grace 5m, impact
 * died+wrong" note. */
static int engine_note(const char *desc, struct gh_rule *r, const char *field, struct gh_err *err)
{
    const char *p = desc ? strstr(desc, "engine:") : NULL;
    if (!p)
        return GH_OK;
    p += 7;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        char key[32], val[32];
        size_t k = strcspn(p, " ,;");
        if (k == 0 || k >= sizeof key)
            break;
        memcpy(key, p, k);
        key[k] = '\0';
        p += k;
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ,;");
        if (n >= sizeof val)
            break;
        memcpy(val, p, n);
        val[n] = '\0';
        p += n;
        if (!strcmp(key, "min_severity")) {
            int sv = gh_severity_from_name(val);
            if (sv < 0)
                return gh_err_set(err, GH_EINVAL, "%s.description: engine: unknown severity \"%s\"",
                                  field, val);
            r->min_severity = (enum gh_severity)sv;
        } else if (!strcmp(key, "impact")) {
            /* one or more of none, slower, wrong, died, joined by '+' */
            for (char *tok = val; tok && *tok;) {
                char *plus = strchr(tok, '+');
                if (plus)
                    *plus = '\0';
                int iv = gh_impact_from_name(tok);
                if (iv < 0)
                    return gh_err_set(err, GH_EINVAL,
                                      "%s.description: engine: unknown impact \"%s\" (none, "
                                      "slower, wrong, died)", field, tok);
                r->impacts |= 1u << iv;
                tok = plus ? plus + 1 : NULL;
            }
        } else if (!strcmp(key, "debounce") || !strcmp(key, "boot_grace")) {
            int64_t d;
            if (!gh_policy_cr_duration(val, &d))
                return gh_err_set(err, GH_EINVAL, "%s.description: engine: %s: \"%s\" is not a "
                                  "duration", field, key, val);
            if (key[0] == 'd')
                r->debounce_ns = d;
            else
                r->boot_grace_ns = d;
        } else {
            break; /* free text after the note */
        }
        if (*p == ';')
            break;
    }
    return GH_OK;
}

static int cr_action(const json_t *a, const char *field, size_t i, enum gh_action *out,
                     struct gh_err *err)
{
    const char *name = gh_json_str(a, "action");
    int x = name ? gh_action_from_name(name) : -1;
    if (x < 0)
        return gh_err_set(err, GH_EINVAL, "%s.actions[%zu].action: unknown action \"%s\"", field, i,
                          name ? name : "");
    *out = (enum gh_action)x;
    return GH_OK;
}

static int cr_actions(const json_t *acts, struct gh_rule *r, const char *field, struct gh_err *err)
{
    size_t n = json_array_size(acts);
    if (!json_is_array(acts) || n == 0)
        return gh_err_set(err, GH_EINVAL, "%s.actions: a non-empty list is needed", field);
    if (n > GH_POLICY_MAX_ACTIONS * 2)
        return gh_err_set(err, GH_EINVAL, "%s.actions: more than %d entries", field,
                          GH_POLICY_MAX_ACTIONS * 2);
    long esc_at = -1;
    int64_t within = 0;
    long retries = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(acts, i);
        enum gh_action x;
        int rc = cr_action(a, field, i, &x, err);
        if (rc)
            return rc;
        const json_t *ea = json_object_get(a, "escalateAfter");
        if (ea && esc_at < 0) {
            if (!gh_policy_cr_duration(json_string_value(ea), &within))
                return gh_err_set(err, GH_EINVAL, "%s.actions[%zu].escalateAfter: not a duration",
                                  field, i);
            const json_t *mr = json_object_get(a, "maxRetries");
            if (mr && (!json_is_integer(mr) || json_integer_value(mr) < 0 ||
                       json_integer_value(mr) > 100))
                return gh_err_set(err, GH_EINVAL, "%s.actions[%zu].maxRetries: 0 to 100", field, i);
            retries = mr ? (long)json_integer_value(mr) : 0;
            esc_at = (long)i;
        }
    }
    size_t n_base = esc_at >= 0 ? (size_t)esc_at + 1 : n;
    if (n_base > GH_POLICY_MAX_ACTIONS)
        return gh_err_set(err, GH_EINVAL, "%s.actions: more than %d base actions", field,
                          GH_POLICY_MAX_ACTIONS);
    for (size_t i = 0; i < n_base; i++)
        cr_action(json_array_get(acts, i), field, i, &r->actions[r->n_actions++], NULL);
    if (esc_at < 0 || n_base == n)
        return GH_OK; /* nothing to escalate to */
    struct gh_policy_escalation *e = &r->escalations[0];
    e->after = (int)retries + 2;
    e->within_ns = within;
    for (size_t i = 0; i + 1 < n_base; i++)
        e->actions[e->n_actions++] = r->actions[i];
    for (size_t i = n_base; i < n; i++) {
        if (e->n_actions >= GH_POLICY_MAX_ACTIONS)
            return gh_err_set(err, GH_EINVAL, "%s.actions: the escalation has more than %d actions",
                              field, GH_POLICY_MAX_ACTIONS);
        cr_action(json_array_get(acts, i), field, i, &e->actions[e->n_actions++], NULL);
    }
    r->n_escalations = 1;
    return GH_OK;
}

static int cr_match(const json_t *m, struct gh_rule *r, const char *field, struct gh_err *err)
{
    if (!json_is_object(m))
        return gh_err_set(err, GH_EINVAL, "%s.match: an object is needed", field);
    const char *cls = gh_json_str(m, "class");
    int c = cls ? gh_class_from_name(cls) : -1;
    if (c < 0)
        return gh_err_set(err, GH_EINVAL, "%s.match.class: unknown class \"%s\"", field,
                          cls ? cls : "");
    r->classes = 1u << c;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(m, "kinds"), i, v) {
        int k = json_string_value(v) ? gh_kind_from_name(json_string_value(v)) : -1;
        if (k < 0)
            return gh_err_set(err, GH_EINVAL, "%s.match.kinds[%zu]: unknown signal kind \"%s\"",
                              field, i, json_string_value(v) ? json_string_value(v) : "");
        r->kinds |= 1u << k;
    }
    const json_t *conds = json_object_get(m, "conditions");
    if (json_array_size(conds) > GH_POLICY_MAX_CONDITIONS)
        return gh_err_set(err, GH_EINVAL, "%s.match.conditions: more than %d conditions", field,
                          GH_POLICY_MAX_CONDITIONS);
    json_array_foreach(conds, i, v)
    {
        const char *cn = json_string_value(v);
        if (!cn || !*cn || strlen(cn) >= GH_POLICY_CONDITION_MAX)
            return gh_err_set(err, GH_EINVAL,
                              "%s.match.conditions[%zu]: a condition type of 1-%d "
                              "characters",
                              field, i, GH_POLICY_CONDITION_MAX - 1);
        snprintf(r->conditions[r->n_conditions++], GH_POLICY_CONDITION_MAX, "%s", cn);
    }
    const json_t *codes = json_object_get(m, "codes");
    if (json_array_size(codes) > GH_POLICY_MAX_CODES)
        return gh_err_set(err, GH_EINVAL, "%s.match.codes: more than %d codes", field,
                          GH_POLICY_MAX_CODES);
    json_array_foreach(codes, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535)
            return gh_err_set(err, GH_EINVAL, "%s.match.codes[%zu]: an integer 0-65535", field, i);
        r->codes[r->n_codes++] = (int)json_integer_value(v);
    }
    const json_t *th = json_object_get(m, "threshold");
    if (th) {
        if (!json_is_number(th) || json_number_value(th) < 0)
            return gh_err_set(err, GH_EINVAL, "%s.match.threshold: a number >= 0", field);
        r->has_threshold = true;
        r->threshold = json_number_value(th);
    }
    const json_t *rep = json_object_get(m, "repetitions");
    if (rep) {
        if (!json_is_integer(rep) || json_integer_value(rep) < 1 || json_integer_value(rep) > 1000)
            return gh_err_set(err, GH_EINVAL, "%s.match.repetitions: an integer 1-1000", field);
        r->repetitions = (int)json_integer_value(rep);
    }
    const json_t *w = json_object_get(m, "window");
    if (w && !gh_policy_cr_duration(json_string_value(w), &r->window_ns))
        return gh_err_set(err, GH_EINVAL, "%s.match.window: \"%s\" is not a duration", field,
                          json_string_value(w) ? json_string_value(w) : "");
    return GH_OK;
}

int gh_policy_cr_rules(const json_t *spec, struct gh_policy *out, struct gh_err *err)
{
    const json_t *rules = json_object_get(spec, "rules");
    if (!json_is_array(rules) || json_array_size(rules) == 0)
        return gh_err_set(err, GH_EINVAL, "spec.rules: a non-empty list is needed");
    if (out->n_rules + (int)json_array_size(rules) > GH_POLICY_MAX_RULES)
        return gh_err_set(err, GH_ELIMIT, "spec.rules: more than %d rules in all",
                          GH_POLICY_MAX_RULES);
    int first = out->n_rules;
    size_t i;
    json_t *jr;
    json_array_foreach(rules, i, jr) {
        char field[48];
        snprintf(field, sizeof field, "spec.rules[%zu]", i);
        struct gh_rule *r = &out->rules[out->n_rules];
        memset(r, 0, sizeof *r);
        r->repetitions = 1;
        r->line = (int)i + 1;
        const char *name = gh_json_str(jr, "name");
        int rc = GH_OK;
        if (!name || !*name || strlen(name) >= sizeof r->name)
            rc = gh_err_set(err, GH_EINVAL, "%s.name: 1 to %zu characters", field,
                            sizeof r->name - 1);
        else
            snprintf(r->name, sizeof r->name, "%s", name);
        if (!rc)
            rc = cr_match(json_object_get(jr, "match"), r, field, err);
        if (!rc)
            rc = engine_note(gh_json_str(jr, "description"), r, field, err);
        if (!rc)
            rc = cr_actions(json_object_get(jr, "actions"), r, field, err);
        if (rc) {
            out->n_rules = first;
            return rc;
        }
        out->n_rules++;
    }
    return GH_OK;
}

/* ---- spec.nodeSelector */

#define SELECTOR_MAX 64

/* A map of label name to string value, at most SELECTOR_MAX of them;
 * absent or empty: every node. */
int gh_policy_cr_budget(const json_t *budgets, int *nodes, double *pct, struct gh_err *err)
{
    *nodes = -1;
    *pct = -1;
    const json_t *mu = json_object_get(budgets, "maxUnavailableNodes");
    if (!mu || json_is_null(mu))
        return GH_OK;
    int rc;
    if (json_is_integer(mu)) {
        char num[32];
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(mu));
        rc = gh_guard_parse_budget(num, nodes, pct, err);
    } else if (json_is_string(mu)) {
        rc = gh_guard_parse_budget(json_string_value(mu), nodes, pct, err);
    } else {
        rc = gh_err_set(err, GH_EINVAL, "a count or a percentage such as \"10%%\"");
    }
    return rc ? gh_err_prefix(err, rc, "spec.budgets.maxUnavailableNodes") : GH_OK;
}

static int cr_selector(const json_t *sel, struct gh_err *err)
{
    if (!sel || json_is_null(sel))
        return GH_OK;
    if (!json_is_object(sel))
        return gh_err_set(err, GH_EINVAL, "spec.nodeSelector: a map of label name to value");
    if (json_object_size(sel) > SELECTOR_MAX)
        return gh_err_set(err, GH_EINVAL, "spec.nodeSelector: more than %d labels", SELECTOR_MAX);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sel, k, v) {
        if (!json_is_string(v))
            return gh_err_set(err, GH_EINVAL, "spec.nodeSelector.%.200s: a string value", k);
    }
    return GH_OK;
}

bool gh_policy_cr_selects(const json_t *selector, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)selector, k, v) {
        const char *have = gh_json_str(labels, k);
        if (!have || !json_string_value(v) || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    return true;
}

/* "k=v,k2=v2" into buf (truncated). */
static void selector_text(const json_t *sel, char *buf, size_t cap)
{
    size_t used = 0;
    const char *k;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)sel, k, v) {
        int w = snprintf(buf + used, cap - used, "%s%s=%s", used ? "," : "", k,
                         json_string_value(v) ? json_string_value(v) : "");
        if (w < 0 || (size_t)w >= cap - used)
            return;
        used += (size_t)w;
    }
}

/* ---- the set of objects */

struct crobj {
    char name[254];
    int64_t generation;
    int priority;
    bool seen;
    struct gh_policy *rules; /* the accepted version's rules (owned), NULL: none yet */
    json_t *selector;        /* the accepted version's spec.nodeSelector (owned), NULL: all */
    struct gh_policy_cr_verdict last;
};

/* Rules [first, first + n) of the merged policy are object o's. */
struct crrange {
    int first, n;
    size_t o;
};

struct gh_policy_crset {
    const struct gh_policy *base;
    struct crobj o[CRSET_MAX];
    size_t n;
    bool built;
    struct gh_policy *in_force; /* the last merged result (owned), for comparison */
    struct crrange range[CRSET_MAX]; /* whose rules are where, as of the last end */
    size_t n_range;
};

struct gh_policy_crset *gh_policy_crset_new(const struct gh_policy *base)
{
    struct gh_policy_crset *s = calloc(1, sizeof *s);
    if (s)
        s->base = base;
    return s;
}

void gh_policy_crset_free(struct gh_policy_crset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->o[i].rules);
        json_decref(s->o[i].selector);
    }
    free(s->in_force);
    free(s);
}

void gh_policy_crset_begin(struct gh_policy_crset *s)
{
    for (size_t i = 0; i < s->n; i++)
        s->o[i].seen = false;
}

void gh_policy_crset_offer(struct gh_policy_crset *s, const json_t *obj,
                           struct gh_policy_cr_verdict *v)
{
    memset(v, 0, sizeof *v);
    const json_t *meta = json_object_get(obj, "metadata");
    const char *name = gh_json_str(meta, "name");
    int64_t gen = json_integer_value(json_object_get(meta, "generation"));
    if (!name) {
        snprintf(v->reason, sizeof v->reason, "InvalidObject");
        snprintf(v->message, sizeof v->message, "metadata.name missing");
        return;
    }
    struct crobj *o = NULL;
    for (size_t i = 0; i < s->n && !o; i++)
        if (!strcmp(s->o[i].name, name))
            o = &s->o[i];
    if (!o) {
        if (s->n == CRSET_MAX) {
            snprintf(v->reason, sizeof v->reason, "TooManyPolicies");
            snprintf(v->message, sizeof v->message,
                     "more than %d RecoveryPolicy objects: this one is not read", CRSET_MAX);
            return;
        }
        o = &s->o[s->n++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", name);
        o->generation = -1;
    }
    o->seen = true;
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *prio = json_object_get(spec, "priority");
    if (o->generation == gen && gen > 0) {
        *v = o->last; /* already judged */
        v->changed = false;
        v->fresh = false;
        return;
    }
    struct gh_policy *p = calloc(1, sizeof *p);
    struct gh_err err = {{0}};
    const json_t *sel = json_object_get(spec, "nodeSelector");
    json_t *sel_copy = NULL;
    int rc = p ? gh_policy_cr_rules(spec, p, &err) : gh_err_set(&err, GH_ENOMEM, "out of memory");
    if (!rc)
        rc = cr_selector(sel, &err);
    int b_nodes;
    double b_pct;
    bool bad_budget = false;
    if (!rc && (rc = gh_policy_cr_budget(json_object_get(spec, "budgets"), &b_nodes, &b_pct, &err)))
        bad_budget = true;
    if (!rc && json_object_size(sel) > 0 && !(sel_copy = json_deep_copy(sel)))
        rc = gh_err_set(&err, GH_ENOMEM, "out of memory");
    o->generation = gen;
    v->fresh = true;
    if (rc) {
        free(p);
        const char *why = rc == GH_ELIMIT   ? "TooManyRules"
                          : rc == GH_ENOMEM ? "OutOfMemory"
                          : bad_budget      ? "InvalidBudget"
                                            : "InvalidRule";
        snprintf(v->reason, sizeof v->reason, "%s", why);
        snprintf(v->message, sizeof v->message, "%s%s", err.msg,
                 o->rules ? "; the previously accepted version stays in force"
                          : "; this policy's rules are not used");
        v->rules = o->rules ? o->rules->n_rules : 0;
    } else {
        v->accepted = true;
        v->changed = !o->rules || o->rules->n_rules != p->n_rules ||
                     memcmp(o->rules->rules, p->rules, (size_t)p->n_rules * sizeof p->rules[0]) ||
                     o->priority != (int)json_integer_value(prio) ||
                     !(o->selector == sel_copy || (o->selector && sel_copy &&
                                                   json_equal(o->selector, sel_copy)));
        free(o->rules);
        o->rules = p;
        json_decref(o->selector);
        o->selector = sel_copy;
        o->priority = (int)json_integer_value(prio);
        v->rules = p->n_rules;
        snprintf(v->reason, sizeof v->reason, "Accepted");
        snprintf(v->message, sizeof v->message, "%d rules in force", p->n_rules);
    }
    o->last = *v;
}

static int by_priority(const void *a, const void *b)
{
    const struct crobj *x = *(const struct crobj *const *)a, *y = *(const struct crobj *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return strcmp(x->name, y->name);
}

struct gh_policy *gh_policy_crset_end(struct gh_policy_crset *s, int *n_objects)
{
    size_t keep = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->o[i].seen) {
            s->o[keep++] = s->o[i];
        } else {
            free(s->o[i].rules);
            json_decref(s->o[i].selector);
        }
    }
    s->n = keep;
    struct crobj *order[CRSET_MAX];
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->o[i].rules)
            order[n++] = &s->o[i];
    /* cppcheck-suppress uninitvar ; qsort reads only order[0..n), all set just above */
    qsort(order, n, sizeof order[0], by_priority);
    struct gh_policy *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    *p = *s->base;
    if (n > 0)
        p->n_rules = 0;
    int used = 0;
    s->n_range = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gh_policy *r = order[i]->rules;
        if (p->n_rules + r->n_rules > GH_POLICY_MAX_RULES)
            break; /* lower priorities past the bound are left out */
        s->range[s->n_range++] =
            (struct crrange){p->n_rules, r->n_rules, (size_t)(order[i] - s->o)};
        memcpy(&p->rules[p->n_rules], r->rules, (size_t)r->n_rules * sizeof r->rules[0]);
        p->n_rules += r->n_rules;
        used++;
    }
    if (n_objects)
        *n_objects = used;
    if (s->built && s->in_force && gh_policy_equal(s->in_force, p)) {
        free(p);
        return NULL;
    }
    struct gh_policy *copy = malloc(sizeof *copy);
    if (!copy) {
        free(p);
        return NULL;
    }
    *copy = *p;
    free(s->in_force);
    s->in_force = copy;
    s->built = true;
    return p;
}

bool gh_policy_crset_governs(const struct gh_policy_crset *s, int rule, const json_t *labels,
                             char *why, size_t cap)
{
    for (size_t i = 0; i < s->n_range; i++) {
        const struct crrange *r = &s->range[i];
        if (rule < r->first || rule >= r->first + r->n || r->o >= s->n)
            continue;
        const struct crobj *o = &s->o[r->o];
        if (!o->selector || gh_policy_cr_selects(o->selector, labels))
            return true;
        char sel[256];
        selector_text(o->selector, sel, sizeof sel);
        if (why && cap)
            snprintf(why, cap, "RecoveryPolicy %s governs only nodes with the labels %s", o->name,
                     sel);
        return false;
    }
    return true; /* the base policy's rules, or no object's: every node */
}

bool gh_policy_crset_has_selectors(const struct gh_policy_crset *s)
{
    for (size_t i = 0; i < s->n_range; i++)
        if (s->range[i].o < s->n && s->o[s->range[i].o].selector)
            return true;
    return false;
}
