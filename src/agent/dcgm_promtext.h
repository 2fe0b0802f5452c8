/* dcgm_promtext.h - a parser of the Prometheus text exposition format
 * (version 0.0.4), as dcgm-exporter serves /metrics: bounded (line length,
 * labels per sample), no allocation per line, pointers into the caller's
 * text. */
#ifndef GH_AGENT_DCGM_PROMTEXT_H
#define GH_AGENT_DCGM_PROMTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GH_DCGM_PROMTEXT_LINE_MAX (64 * 1024)
#define GH_DCGM_PROMTEXT_LABELS_MAX 64

/* Pointers are into the parser's buffers, valid during the callback only;
 * strings are not NUL-terminated (use the lengths); label values are
 * unescaped (\\ \" \n). */
struct gh_dcgm_promtext_label {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

struct gh_dcgm_promtext_sample {
    const char *name;
    size_t name_len;
    const struct gh_dcgm_promtext_label *labels;
    size_t nlabels;
    double value; /* may be NaN or +-Inf */
    bool has_timestamp;
    int64_t timestamp_ms;
    long line; /* 1-based */
};

/* Returns 0 to go on; anything else stops the parse and is returned. */
typedef int (*gh_dcgm_promtext_fn)(void *ctx, const struct gh_dcgm_promtext_sample *s);

/* Calls fn for each sample line of text[0..len) (borrowed; may contain NUL
 * bytes, which make a line malformed). Comments (# HELP, # TYPE, others)
 * and blank lines are skipped; a '\r' before '\n' is allowed. A malformed
 * line (bad syntax, longer than GH_DCGM_PROMTEXT_LINE_MAX, more than
 * GH_DCGM_PROMTEXT_LABELS_MAX labels) is skipped and counted in *bad_lines
 * (may be NULL); err gets the first ("line 12: label value not quoted").
 * Returns GH_OK when every line was good, GH_EINVAL when some were not,
 * GH_ENOMEM, or fn's non-zero result. */
int gh_dcgm_promtext_parse(const char *text, size_t len, gh_dcgm_promtext_fn fn, void *ctx,
                           size_t *bad_lines, struct gh_err *err);

#endif
