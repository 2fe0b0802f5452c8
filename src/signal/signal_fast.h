/* signal_fast.h - a fast decoder for the three telemetry kinds (step,
 * checkpoint, replica_checksum) of spec/signals.md section 1, on yajl's
 * event parser, that falls back to gh_signal_decode for everything else.
 *
 * It builds no JSON tree: yajl's callbacks fill a small table of the fields
 * these kinds use, and the table is checked by the rules of signal_json.h
 * (types, ranges, RFC 3339 "ts", strict UTF-8, no NUL, duplicate keys at any
 * depth are invalid JSON, unknown fields ignored at any depth). The fast
 * path only ever accepts: a line that fails any check, or that it does not
 * handle (another source or kind, a line over GH_SIGNAL_FAST_LINE_MAX, a
 * \u escape of a UTF-16 surrogate, control bytes, nesting deeper than 16,
 * an over-long number or key set), is decoded again by gh_signal_decode,
 * which writes the error. So the result, signal and error message alike, is
 * always the one gh_signal_decode gives; test/fuzz/fuzz_telemetry_decode.c
 * checks that. No state is kept between calls: yajl's few allocations come
 * from an arena on the caller's stack. */
#ifndef GH_SIGNAL_SIGNAL_FAST_H
#define GH_SIGNAL_SIGNAL_FAST_H

#include <stddef.h>

#include "signal/signal.h"

/* Lines longer than this (bytes) go to gh_signal_decode directly. */
#define GH_SIGNAL_FAST_LINE_MAX 4096

/* The same contract as gh_signal_decode (signal_json.h): text[0..len) is
 * borrowed, *out is overwritten (caller clears it on GH_OK), err gets
 * "line N: ..." on GH_EINVAL/GH_ENOMEM. Thread-safe. */
int gh_signal_fast_decode(const char *text, size_t len, long line_no, struct gh_signal *out,
                          struct gh_err *err);

/* The fast path alone: GH_OK with *out filled (caller clears), or GH_EAGAIN
 * with *out cleared when the line must go to gh_signal_decode (it is
 * invalid, or not one this decoder handles). For tests and the fuzzer. */
int gh_signal_fast_try(const char *text, size_t len, struct gh_signal *out);

#endif
