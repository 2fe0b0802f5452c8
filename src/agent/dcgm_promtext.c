/* dcgm_promtext.c - the Prometheus text exposition format (version 0.0.4)
 * parser that the dcgm-exporter scraper reads /metrics with (see
 * dcgm_promtext.h): bounded, no allocation per line, fuzzed by
 * test/fuzz/fuzz_promtext.c. */
#include "agent/dcgm_promtext.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_name_start(int c, bool colon)
{
    return isalpha(c) || c == '_' || (colon && c == ':');
}

static bool is_name_char(int c, bool colon)
{
    return isalnum(c) || c == '_' || (colon && c == ':');
}

static size_t skip_blanks(const char *p, size_t i, size_t n)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return i;
}

/* Parses one line (no '\n'); *is_sample false for blank/comment lines.
 * Returns NULL or why the line is malformed. Label values are unescaped
 * into scratch (at least n bytes). */
static const char *parse_line(const char *p, size_t n, char *scratch,
                              struct gh_dcgm_promtext_label *labels,
                              struct gh_dcgm_promtext_sample *s, bool *is_sample)
{
    size_t i = skip_blanks(p, 0, n), start, out = 0;
    char tok[64];

    *is_sample = false;
    if (i == n || p[i] == '#')
        return NULL;
    if (memchr(p, '\0', n))
        return "NUL byte in line";
    start = i;
    if (!is_name_start((unsigned char)p[i], true))
        return "bad metric name";
    while (i < n && is_name_char((unsigned char)p[i], true))
        i++;
    s->name = p + start;
    s->name_len = i - start;
    s->labels = labels;
    s->nlabels = 0;
    i = skip_blanks(p, i, n);
    if (i < n && p[i] == '{') {
        i++;
        for (;;) {
            struct gh_dcgm_promtext_label *l;
            i = skip_blanks(p, i, n);
            if (i < n && p[i] == '}') {
                i++;
                break;
            }
            if (s->nlabels == GH_DCGM_PROMTEXT_LABELS_MAX)
                return "too many labels";
            if (i == n || !is_name_start((unsigned char)p[i], false))
                return "bad label name";
            l = &labels[s->nlabels];
            start = i;
            while (i < n && is_name_char((unsigned char)p[i], false))
                i++;
            l->name = p + start;
            l->name_len = i - start;
            i = skip_blanks(p, i, n);
            if (i == n || p[i] != '=')
                return "'=' expected after label name";
            i = skip_blanks(p, i + 1, n);
            if (i == n || p[i] != '"')
                return "label value not quoted";
            i++;
            l->value = scratch + out;
            for (;;) {
                if (i == n)
                    return "unterminated label value";
                if (p[i] == '"')
                    break;
                if (p[i] == '\\') {
                    if (i + 1 == n)
                        return "unterminated label value";
                    switch (p[i + 1]) {
                    case '\\': scratch[out++] = '\\'; break;
                    case '"': scratch[out++] = '"'; break;
                    case 'n': scratch[out++] = '\n'; break;
                    default: return "bad escape in label value";
                    }
                    i += 2;
                } else {
                    scratch[out++] = p[i++];
                }
            }
            l->value_len = (size_t)(scratch + out - l->value);
            i++; /* closing quote */
            s->nlabels++;
            i = skip_blanks(p, i, n);
            if (i < n && p[i] == ',') {
                i++;
                continue;
            }
            if (i < n && p[i] == '}') {
                i++;
                break;
            }
            return "',' or '}' expected after label value";
        }
        i = skip_blanks(p, i, n);
    } else if (i == start + s->name_len) {
        return "space expected after metric name";
    }
    /* value */
    start = i;
    while (i < n && p[i] != ' ' && p[i] != '\t')
        i++;
    if (i == start)
        return "value missing";
    if (i - start >= sizeof tok)
        return "value too long";
    memcpy(tok, p + start, i - start);
    tok[i - start] = '\0';
    {
        char *end;
        errno = 0;
        s->value = strtod(tok, &end);
        if (end == tok || *end != '\0')
            return "bad value";
    }
    /* optional timestamp (ms) */
    s->has_timestamp = false;
    i = skip_blanks(p, i, n);
    if (i < n) {
        char *end;
        long long ts;
        start = i;
        while (i < n && p[i] != ' ' && p[i] != '\t')
            i++;
        if (i - start >= sizeof tok)
            return "timestamp too long";
        memcpy(tok, p + start, i - start);
        tok[i - start] = '\0';
        errno = 0;
        ts = strtoll(tok, &end, 10);
        if (errno || end == tok || *end != '\0')
            return "bad timestamp";
        s->has_timestamp = true;
        s->timestamp_ms = ts;
        if (skip_blanks(p, i, n) != n)
            return "trailing text after timestamp";
    }
    *is_sample = true;
    return NULL;
}

int gh_dcgm_promtext_parse(const char *text, size_t len, gh_dcgm_promtext_fn fn, void *ctx,
                           size_t *bad_lines, struct gh_err *err)
{
    struct gh_dcgm_promtext_label labels[GH_DCGM_PROMTEXT_LABELS_MAX];
    char *scratch = malloc(GH_DCGM_PROMTEXT_LINE_MAX);
    size_t pos = 0, bad = 0;
    long lineno = 0;
    int rc = GH_OK;

    if (!scratch)
        return gh_err_set(err, GH_ENOMEM, "out of memory");
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        struct gh_dcgm_promtext_sample s;
        const char *why;
        bool is_sample;

        pos += n + (nl ? 1 : 0);
        lineno++;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n > GH_DCGM_PROMTEXT_LINE_MAX) {
            why = "line too long";
        } else {
            memset(&s, 0, sizeof s);
            why = parse_line(line, n, scratch, labels, &s, &is_sample);
        }
        if (why) {
            if (bad++ == 0)
                gh_err_set(err, GH_EINVAL, "line %ld: %s", lineno, why);
            continue;
        }
        if (!is_sample)
            continue;
        s.line = lineno;
        rc = fn(ctx, &s);
        if (rc)
            break;
    }
    free(scratch);
    if (bad_lines)
        *bad_lines = bad;
    if (rc)
        return rc;
    return bad ? GH_EINVAL : GH_OK;
}
