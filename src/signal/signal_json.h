/* signal_json.h - the JSON Lines codec for signals (spec section 1), on jansson.
 *
 * Decoding is strict about the fields it knows (type, range, RFC 3339) and
 * ignores fields it does not. Errors name the line and the field:
 *   line 12: field "ts": not RFC 3339
 * Encoding writes times as RFC 3339 UTC with microseconds, omits absent
 * fields, and writes non-finite loss as "nan"/"inf"/"-inf". */
#ifndef GH_SIGNAL_SIGNAL_JSON_H
#define GH_SIGNAL_SIGNAL_JSON_H

#include <jansson.h>
#include <stdio.h>

#include "signal/signal.h"

/* Hard cap on one JSON line (bytes, without the newline). */
#define GH_SIGNAL_LINE_MAX (64 * 1024)

/* Decodes one JSON object from text[0..len). line_no (1-based, 0 = unknown)
 * prefixes error details. On success *out is filled (caller clears it with
 * gh_signal_clear); on error *out is left cleared. */
int gh_signal_decode(const char *text, size_t len, long line_no, struct gh_signal *out,
                     struct gh_err *err);

/* The same from an already-parsed jansson object (borrowed). */
int gh_signal_decode_json(const json_t *obj, long line_no, struct gh_signal *out,
                          struct gh_err *err);

/* Builds a new jansson object for s (caller owns: json_decref). NULL on OOM. */
json_t *gh_signal_encode_json(const struct gh_signal *s);

/* Encodes s as one compact JSON object without a newline. *out is malloc'd
 * (caller frees). */
int gh_signal_encode(const struct gh_signal *s, char **out, struct gh_err *err);

/* Writes s as one line (object + '\n') to f. */
int gh_signal_write(FILE *f, const struct gh_signal *s, struct gh_err *err);

/* A JSON Lines reader over a FILE* (borrowed). Blank lines are skipped; a line
 * longer than GH_SIGNAL_LINE_MAX is an error for that line only, and the
 * reader resynchronises at the next newline: a bad line never costs the good
 * lines before or after it. */
struct gh_signal_reader;

struct gh_signal_reader *gh_signal_reader_new(FILE *f);
void gh_signal_reader_free(struct gh_signal_reader *r);

/* Reads the next signal into *out. Returns GH_OK, GH_ENOTFOUND at end of
 * input, GH_EINVAL for a bad line (err says "line N: ..."; call again to go
 * on), GH_EIO on a read error. When the line is a JSON object that is not a
 * signal but carries the key "scenario", it is returned through
 * *header (caller owns, json_decref) with rc GH_OK and out untouched; pass
 * header == NULL to treat such a line as an error. */
int gh_signal_reader_next(struct gh_signal_reader *r, struct gh_signal *out, json_t **header,
                          struct gh_err *err);

/* 1-based number of the line last returned. */
long gh_signal_reader_line(const struct gh_signal_reader *r);

#endif
