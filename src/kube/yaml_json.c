/* yaml_json.c - converts one YAML document into a jansson tree with libyaml's
 * event parser and an explicit, depth-capped stack (no recursion). */
#include "kube/yaml_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

struct frame {
    json_t *c;   /* the container being filled (owned by the frame until attached) */
    char *key;   /* pending mapping key, owned; NULL when a key is expected */
    bool is_map;
};

struct conv {
    struct frame st[GH_YAML_MAX_DEPTH];
    int depth;
    json_t *root;
    size_t nodes;
    struct gh_err *err;
};

static bool is_plain_int(const char *s, size_t n)
{
    size_t i = 0;
    if (n && (s[0] == '-' || s[0] == '+'))
        i++;
    if (i == n)
        return false;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static bool is_plain_float(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (n && (s[0] == '-' || s[0] == '+'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (!digits)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t e = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, e++;
        if (!e)
            return false;
    }
    return i == n;
}

static bool eq_any(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return true;
    return false;
}

/* Resolves a scalar to a JSON value (new reference) or NULL on ENOMEM. */
static json_t *scalar_value(const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};

    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && ev->data.scalar.plain_implicit;
    if (plain && strlen(s) == n) {
        if (eq_any(s, nulls))
            return json_null();
        if (eq_any(s, trues))
            return json_true();
        if (eq_any(s, falses))
            return json_false();
        if (is_plain_int(s, n)) {
            errno = 0;
            char *end = NULL;
            long long v = strtoll(s, &end, 10);
            if (errno == 0 && end == s + n)
                return json_integer(v);
        } else if (is_plain_float(s, n)) {
            errno = 0;
            char *end = NULL;
            double d = strtod(s, &end);
            if (errno == 0 && end == s + n)
                return json_real(d);
        }
    }
    return json_stringn(s, n);
}

/* Takes ownership of v and puts it into the current container (or makes it
 * the root). */
static int attach(struct conv *cv, json_t *v, bool is_scalar_key_candidate, const yaml_event_t *ev)
{
    if (!v)
        return gh_err_set(cv->err, GH_ENOMEM, "yaml: out of memory");
    if (++cv->nodes > GH_YAML_MAX_NODES) {
        json_decref(v);
        return gh_err_set(cv->err, GH_ELIMIT, "yaml: more than %d nodes", GH_YAML_MAX_NODES);
    }
    if (cv->depth == 0) {
        if (cv->root) {
            json_decref(v);
            return gh_err_set(cv->err, GH_EINVAL, "yaml: more than one root node");
        }
        cv->root = v;
        return GH_OK;
    }
    struct frame *f = &cv->st[cv->depth - 1];
    if (!f->is_map) {
        if (json_array_append_new(f->c, v))
            return gh_err_set(cv->err, GH_ENOMEM, "yaml: out of memory");
        return GH_OK;
    }
    if (!f->key) {
        if (!is_scalar_key_candidate) {
            json_decref(v);
            return gh_err_set(cv->err, GH_EUNSUPPORTED, "yaml: non-scalar mapping key");
        }
        const char *k = (const char *)ev->data.scalar.value;
        size_t kn = ev->data.scalar.length;
        json_decref(v);
        if (strlen(k) != kn)
            return gh_err_set(cv->err, GH_EINVAL, "yaml: NUL byte in a mapping key");
        if (kn == 2 && memcmp(k, "<<", 2) == 0 && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            return gh_err_set(cv->err, GH_EUNSUPPORTED, "yaml: merge keys (<<) are not supported");
        f->key = strndup(k, kn);
        if (!f->key)
            return gh_err_set(cv->err, GH_ENOMEM, "yaml: out of memory");
        return GH_OK;
    }
    if (json_object_get(f->c, f->key)) {
        json_decref(v);
        int rc = gh_err_set(cv->err, GH_EINVAL, "yaml: duplicate key \"%.100s\" at line %zu",
                            f->key, ev->start_mark.line + 1);
        return rc;
    }
    int bad = json_object_set_new(f->c, f->key, v);
    free(f->key);
    f->key = NULL;
    if (bad)
        return gh_err_set(cv->err, GH_EINVAL, "yaml: invalid key (not UTF-8?)");
    return GH_OK;
}

static int push(struct conv *cv, bool is_map, const yaml_event_t *ev)
{
    if (cv->depth > 0) {
        struct frame *top = &cv->st[cv->depth - 1];
        if (top->is_map && !top->key)
            return gh_err_set(cv->err, GH_EUNSUPPORTED, "yaml: non-scalar mapping key at line %zu",
                              ev->start_mark.line + 1);
    }
    if (cv->depth >= GH_YAML_MAX_DEPTH)
        return gh_err_set(cv->err, GH_ELIMIT, "yaml: nesting deeper than %d", GH_YAML_MAX_DEPTH);
    json_t *c = is_map ? json_object() : json_array();
    if (!c)
        return gh_err_set(cv->err, GH_ENOMEM, "yaml: out of memory");
    cv->st[cv->depth++] = (struct frame){.c = c, .key = NULL, .is_map = is_map};
    return GH_OK;
}

static int pop(struct conv *cv, const yaml_event_t *ev)
{
    struct frame f = cv->st[--cv->depth];
    if (f.key) { /* a key without value cannot come from a valid parse */
        free(f.key);
        json_decref(f.c);
        return gh_err_set(cv->err, GH_EINVAL, "yaml: mapping key without value");
    }
    return attach(cv, f.c, false, ev);
}

int gh_yaml_to_json(const char *buf, size_t len, json_t **out, struct gh_err *err)
{
    *out = NULL;
    if (len > GH_YAML_MAX_INPUT)
        return gh_err_set(err, GH_ELIMIT, "yaml: input of %zu bytes exceeds %u", len,
                          GH_YAML_MAX_INPUT);
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return gh_err_set(err, GH_ENOMEM, "yaml: parser init failed");
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);

    struct conv cv = {.err = err};
    int rc = GH_OK;
    bool done = false, in_doc = false, had_doc = false;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = gh_err_set(err, p.error == YAML_MEMORY_ERROR ? GH_ENOMEM : GH_EINVAL,
                            "yaml: %s at line %zu column %zu", p.problem ? p.problem : "syntax error",
                            p.problem_mark.line + 1, p.problem_mark.column + 1);
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (had_doc) /* only the first document counts */
                done = true;
            in_doc = true;
            break;
        case YAML_DOCUMENT_END_EVENT:
            in_doc = false;
            had_doc = true;
            break;
        case YAML_ALIAS_EVENT:
            rc = gh_err_set(err, GH_EUNSUPPORTED, "yaml: aliases are not supported (line %zu)",
                            ev.start_mark.line + 1);
            break;
        case YAML_SCALAR_EVENT: {
            bool key_slot = cv.depth > 0 && cv.st[cv.depth - 1].is_map && !cv.st[cv.depth - 1].key;
            rc = attach(&cv, scalar_value(&ev), key_slot, &ev);
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
            rc = push(&cv, false, &ev);
            break;
        case YAML_MAPPING_START_EVENT:
            rc = push(&cv, true, &ev);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            rc = cv.depth > 0 ? pop(&cv, &ev) : gh_err_set(err, GH_EINVAL, "yaml: unbalanced end");
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (rc)
            break;
    }
    (void)in_doc;
    while (cv.depth > 0) {
        struct frame *f = &cv.st[--cv.depth];
        free(f->key);
        json_decref(f->c);
    }
    yaml_parser_delete(&p);
    if (rc) {
        json_decref(cv.root);
        return rc;
    }
    *out = cv.root ? cv.root : json_null();
    return GH_OK;
}
