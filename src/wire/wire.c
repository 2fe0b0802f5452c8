/* wire.c - the ingest protocol: a request body of signal lines parsed with
 * per-line errors, and the reply summary encoded and decoded. */
#include "wire/wire.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal/signal_json.h"

#define DEFAULT_MAX_LINES 10000

size_t gh_ingest_count_lines(const char *body, size_t len)
{
    size_t n = 0;
    const char *p = body, *end = body + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

void gh_ingest_result_add_error(struct gh_ingest_result *res, long line, const char *msg)
{
    res->rejected++;
    if (res->n_errors == GH_INGEST_ERRORS_MAX) {
        res->errors_truncated = true;
        return;
    }
    struct gh_ingest_line_error *e = &res->errors[res->n_errors++];
    e->line = line;
    /* Keep the message one printable line. */
    size_t i = 0;
    for (; msg[i] && i + 1 < sizeof e->error; i++) {
        unsigned char c = (unsigned char)msg[i];
        e->error[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    e->error[i] = '\0';
}

static bool is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

int gh_ingest_parse(const char *body, size_t len, const struct gh_ingest_limits *lim,
                    gh_ingest_take_fn take, void *ctx, struct gh_ingest_result *res,
                    struct gh_err *err)
{
    size_t line_max = lim && lim->line_max ? lim->line_max : GH_SIGNAL_LINE_MAX;
    size_t max_lines = lim && lim->max_lines ? lim->max_lines : DEFAULT_MAX_LINES;
    if (line_max > GH_SIGNAL_LINE_MAX)
        line_max = GH_SIGNAL_LINE_MAX;
    memset(res, 0, sizeof *res);
    size_t nlines = gh_ingest_count_lines(body, len);
    if (nlines > max_lines)
        return gh_err_set(err, GH_ELIMIT, "%zu lines in one request, at most %zu", nlines,
                          max_lines);

    const char *p = body, *end = body + len;
    long line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        const char *text = p;
        p = nl ? nl + 1 : end;
        if (line == 1 && n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
            text += 3; /* a UTF-8 byte order mark */
            n -= 3;
        }
        if (is_blank(text, n))
            continue;
        if (n > line_max) {
            char msg[96];
            snprintf(msg, sizeof msg, "line longer than %zu bytes", line_max);
            gh_ingest_result_add_error(res, line, msg);
            continue;
        }
        struct gh_signal sig;
        struct gh_err lerr;
        int rc = gh_signal_decode_for_node(text, n, 0, lim ? lim->default_node : NULL, &sig, &lerr);
        if (rc == GH_ENOMEM)
            return gh_err_set(err, GH_ENOMEM, "line %ld: out of memory", line);
        if (rc) {
            gh_ingest_result_add_error(res, line, lerr.msg);
            continue;
        }
        switch (take(ctx, line, &sig)) {
        case GH_INGEST_TAKEN: res->accepted++; break;
        case GH_INGEST_DUPLICATE:
            res->duplicates++;
            gh_signal_clear(&sig);
            break;
        case GH_INGEST_REFUSED: gh_signal_clear(&sig); break;
        default:
            gh_signal_clear(&sig);
            return gh_err_set(err, GH_EAGAIN, "line %ld: the receiver is full", line);
        }
    }
    return GH_OK;
}

char *gh_ingest_reply_encode(const struct gh_ingest_result *res)
{
    json_t *errors = json_array();
    json_t *o = json_object();
    char *text = NULL, *out = NULL;
    if (!errors || !o)
        goto out;
    for (size_t i = 0; i < res->n_errors; i++) {
        json_t *e = json_pack("{s:I,s:s}", "line", (json_int_t)res->errors[i].line, "error",
                              res->errors[i].error);
        if (!e || json_array_append_new(errors, e))
            goto out;
    }
    if (json_object_set_new(o, "accepted", json_integer((json_int_t)res->accepted)) ||
        json_object_set_new(o, "duplicates", json_integer((json_int_t)res->duplicates)) ||
        json_object_set_new(o, "rejected", json_integer((json_int_t)res->rejected)) ||
        json_object_set(o, "errors", errors) ||
        json_object_set_new(o, "errors_truncated", json_boolean(res->errors_truncated)))
        goto out;
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (!text)
        goto out;
    size_t n = strlen(text);
    out = malloc(n + 2);
    if (out) {
        memcpy(out, text, n);
        out[n] = '\n';
        out[n + 1] = '\0';
    }
out:
    free(text);
    json_decref(errors);
    json_decref(o);
    return out;
}

static int get_count(json_t *o, const char *key, uint64_t *v, struct gh_err *err)
{
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
        return gh_err_set(err, GH_EINVAL, "reply: \"%s\" is not a count", key);
    *v = (uint64_t)json_integer_value(x);
    return GH_OK;
}

int gh_ingest_reply_decode(const char *text, size_t len, struct gh_ingest_result *out,
                           struct gh_err *err)
{
    json_error_t jerr;
    int rc = GH_OK;
    memset(out, 0, sizeof *out);
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return gh_err_set(err, GH_EINVAL, "reply: invalid JSON: %s", jerr.text);
    if (!json_is_object(o)) {
        rc = gh_err_set(err, GH_EINVAL, "reply: not a JSON object");
        goto out;
    }
    if ((rc = get_count(o, "accepted", &out->accepted, err)) ||
        (rc = get_count(o, "duplicates", &out->duplicates, err)) ||
        (rc = get_count(o, "rejected", &out->rejected, err)))
        goto out;
    json_t *errors = json_object_get(o, "errors");
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        json_t *l = json_object_get(e, "line"), *m = json_object_get(e, "error");
        if (!json_is_integer(l) || !json_is_string(m))
            continue;
        if (out->n_errors == GH_INGEST_ERRORS_MAX) {
            out->errors_truncated = true;
            break;
        }
        struct gh_ingest_line_error *le = &out->errors[out->n_errors++];
        le->line = (long)json_integer_value(l);
        snprintf(le->error, sizeof le->error, "%s", json_string_value(m));
    }
    if (json_is_true(json_object_get(o, "errors_truncated")))
        out->errors_truncated = true;
out:
    json_decref(o);
    return rc;
}

int gh_ingest_url(const char *base, char *out, size_t cap, struct gh_err *err)
{
    const char *rest;
    if (strncmp(base, "http://", 7) == 0)
        rest = base + 7;
    else if (strncmp(base, "https://", 8) == 0)
        rest = base + 8;
    else
        return gh_err_set(err, GH_EINVAL, "controller URL \"%s\": expected http:// or https://",
                          base);
    if (*rest == '\0' || *rest == '/')
        return gh_err_set(err, GH_EINVAL, "controller URL \"%s\": no host", base);
    const char *slash = strchr(rest, '/');
    size_t blen = strlen(base);
    int n;
    if (!slash || strcmp(slash, "/") == 0) {
        if (slash)
            blen--; /* drop the lone trailing '/' */
        n = snprintf(out, cap, "%.*s%s", (int)blen, base, GH_INGEST_PATH);
    } else {
        n = snprintf(out, cap, "%s", base);
    }
    if (n < 0 || (size_t)n >= cap)
        return gh_err_set(err, GH_ELIMIT, "controller URL too long");
    return GH_OK;
}
