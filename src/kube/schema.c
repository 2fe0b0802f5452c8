/* schema.c - a CRD's OpenAPI v3 schema applied to a JSON value, as the API
 * server's structural validation does (see schema.h for what is covered). */
#include "kube/schema.h"

#include "common/closest.h"

#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32

struct walk {
    gh_schema_report_fn report;
    void *ctx;
    size_t n;
    bool stop;
};

static void problem(struct walk *w, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct walk *w, const char *path, const char *fmt, ...)
{
    if (w->stop)
        return;
    struct gh_schema_problem p;
    snprintf(p.path, sizeof p.path, "%s", path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p.msg, sizeof p.msg, fmt, ap);
    va_end(ap);
    w->n++;
    if (w->report && w->report(w->ctx, &p))
        w->stop = true;
}

static const char *type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "a mapping";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Whether v has the schema's type; want gets the type in words. */
static bool type_ok(const json_t *schema, const json_t *v, const char **want)
{
    if (json_is_true(json_object_get(schema, "x-kubernetes-int-or-string"))) {
        *want = "an integer or a string";
        return json_is_integer(v) || json_is_string(v);
    }
    const char *t = json_string_value(json_object_get(schema, "type"));
    if (!t)
        return true;
    if (!strcmp(t, "object"))
        return *want = "a mapping", json_is_object(v);
    if (!strcmp(t, "array"))
        return *want = "a list", json_is_array(v);
    if (!strcmp(t, "string"))
        return *want = "a string", json_is_string(v);
    if (!strcmp(t, "integer"))
        return *want = "an integer", json_is_integer(v);
    if (!strcmp(t, "number"))
        return *want = "a number", json_is_number(v);
    if (!strcmp(t, "boolean"))
        return *want = "a boolean (true or false)", json_is_boolean(v);
    return true;
}

/* v in words for a message: a string quoted, others as JSON, shortened. */
static void shown(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v)) {
        snprintf(buf, cap, "\"%.60s\"", json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, cap, "%.60s", s ? s : "?");
    free(s);
}

static void check(struct walk *w, const json_t *schema, const json_t *v, const char *path,
                  int depth);

static void check_object(struct walk *w, const json_t *schema, const json_t *v, const char *path,
                         int depth)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    bool keep = json_is_true(json_object_get(schema, "x-kubernetes-preserve-unknown-fields"));
    const json_t *req = json_object_get(schema, "required");
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r)
    {
        const char *k = json_string_value(r);
        if (k && !json_object_get(v, k)) {
            char p[200];
            snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", k);
            problem(w, p, "required, missing");
        }
    }
    const char *names[128];
    size_t nn = 0;
    const char *pk;
    const json_t *pv;
    json_object_foreach((json_t *)props, pk, pv)
    {
        if (nn < 127)
            names[nn++] = pk;
    }
    names[nn] = NULL;
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        char p[200];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", k);
        const json_t *sub = json_object_get(props, k);
        if (sub) {
            check(w, sub, x, p, depth + 1);
        } else if (json_is_object(extra)) {
            check(w, extra, x, p, depth + 1);
        } else if (props && !keep && !json_is_true(extra)) {
            const char *near = gh_closest_word(k, names);
            if (near)
                problem(w, p, "unknown field \"%.60s\" (did you mean \"%s\"?)", k, near);
            else
                problem(w, p, "unknown field \"%.60s\"", k);
        }
    }
}

static void check(struct walk *w, const json_t *schema, const json_t *v, const char *path,
                  int depth)
{
    if (w->stop || !json_is_object(schema) || depth > MAX_DEPTH)
        return;
    const char *want = NULL;
    char val[80];
    if (json_is_null(v) && json_is_true(json_object_get(schema, "nullable")))
        return;
    if (!type_ok(schema, v, &want)) {
        shown(v, val, sizeof val);
        problem(w, path, "%s is needed, not %s %s", want, type_of(v), val);
        return;
    }
    const json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en)) {
        bool found = false;
        const char *cands[64];
        size_t nc = 0, i;
        const json_t *e;
        json_array_foreach(en, i, e)
        {
            found = found || json_equal(e, v);
            if (json_is_string(e) && nc < 63)
                cands[nc++] = json_string_value(e);
        }
        cands[nc] = NULL;
        if (!found) {
            shown(v, val, sizeof val);
            const char *near = json_is_string(v) ? gh_closest_word(json_string_value(v), cands)
                                                 : NULL;
            if (near)
                problem(w, path, "%s is not one of the allowed values (did you mean \"%s\"?)", val,
                        near);
            else
                problem(w, path, "%s is not one of the allowed values", val);
        }
    }
    const json_t *mn = json_object_get(schema, "minimum"), *mx = json_object_get(schema, "maximum");
    if (json_is_number(v) && json_is_number(mn) && json_number_value(v) < json_number_value(mn))
        problem(w, path, "%g is below the minimum %g", json_number_value(v), json_number_value(mn));
    if (json_is_number(v) && json_is_number(mx) && json_number_value(v) > json_number_value(mx))
        problem(w, path, "%g is above the maximum %g", json_number_value(v), json_number_value(mx));
    if (json_is_string(v)) {
        size_t len = json_string_length(v);
        json_int_t lo = json_integer_value(json_object_get(schema, "minLength"));
        const json_t *hi = json_object_get(schema, "maxLength");
        if ((json_int_t)len < lo && lo == 1)
            problem(w, path, "empty (at least 1 character)");
        else if ((json_int_t)len < lo)
            problem(w, path, "shorter than %lld characters", (long long)lo);
        if (json_is_integer(hi) && (json_int_t)len > json_integer_value(hi))
            problem(w, path, "longer than %lld characters", (long long)json_integer_value(hi));
        const char *pat = json_string_value(json_object_get(schema, "pattern"));
        regex_t re;
        if (pat && regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) == 0) {
            if (regexec(&re, json_string_value(v), 0, NULL, 0) != 0) {
                shown(v, val, sizeof val);
                problem(w, path, "%s does not match %.80s", val, pat);
            }
            regfree(&re);
        }
    }
    if (json_is_array(v)) {
        json_int_t lo = json_integer_value(json_object_get(schema, "minItems"));
        const json_t *hi = json_object_get(schema, "maxItems");
        if ((json_int_t)json_array_size(v) < lo)
            problem(w, path, "at least %lld item%s needed", (long long)lo, lo == 1 ? "" : "s");
        if (json_is_integer(hi) && (json_int_t)json_array_size(v) > json_integer_value(hi))
            problem(w, path, "more than %lld items", (long long)json_integer_value(hi));
        const json_t *items = json_object_get(schema, "items");
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x)
        {
            char p[200];
            snprintf(p, sizeof p, "%s[%zu]", path, i);
            check(w, items, x, p, depth + 1);
        }
    }
    if (json_is_object(v))
        check_object(w, schema, v, path, depth);
}

size_t gh_schema_check(const json_t *schema, const json_t *value, const char *at,
                       gh_schema_report_fn report, void *ctx)
{
    struct walk w = {report, ctx, 0, false};
    check(&w, schema, value, at ? at : "", 0);
    return w.n;
}
