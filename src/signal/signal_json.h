/* signal_json.h - the JSON Lines codec for signals (spec section 1), on jansson.
 *
 * Decoding is strict about the fields it knows (type, range, RFC 3339) and
 * ignores fields it does not, including fields that belong to other kinds.
 * Errors name the line and the field; the forms are
 *   line 12: field "ts": not RFC 3339          (also: out of range)
 *   line 3: field "kind": unknown kind "foo"   (likewise "source")
 *   line 7: field "code": missing              (also: empty, not a string,
 *                                               not an integer, out of range,
 *                                               not a number, not a boolean,
 *                                               must be "single" or "double")
 *   line 2: not a JSON object
 *   line 5: invalid JSON at column 17: <jansson's text>
 * and without the "line N: " prefix when the line is unknown (0).
 *
 * Rules (decoder and encoder agree; anything decoded encodes, and anything
 * encoded decodes to the same signal, times to the microsecond):
 * - Common: ts, source, kind required. node required (non-empty) when the
 *   source is node-scoped (kmsg, nvml, dcgm, host, probe) or the kind is
 *   node_ready/node_not_ready/node_condition; optional for telemetry and kube
 *   otherwise.
 *   gpu, pci, msg, id, injected optional. The source/kind pairing of the
 *   spec's "emitted by" column is not enforced.
 * - Per kind, every extra field the spec table does not mark "opt" is
 *   required, except probe_result's detail (optional), pod_failed's msg
 *   (the common optional msg), and these, which the kernel log and per-GPU
 *   totals cannot give: nvlink link (absent = all links), the count of
 *   nvlink/pcie/nic (absent = one event seen in a log, not a counter
 *   reading), nic device and port (absent = the NIC is named by pci).
 *   The common field "uuid" (a GPU UUID,
 *   optional) is an addition to the spec. Per kind ([..] = optional):
 *     xid: code [pid process]          sxid: code [switch]
 *     ecc: bits count volatile         row_remap: pending failure correctable uncorrectable
 *     nvlink: [link] counter [count]   pcie: counter [count]
 *     nic: [device port] counter [count state]
 *     thermal: celsius throttled       power: watts throttled
 *     step: job rank step step_ms [comm_ms loss tokens_per_s]
 *     checkpoint: job step path state  replica_checksum: job step rank replica value
 *     pod_failed: namespace pod reason [job exit_code]
 *     pod_started: namespace pod [job] probe_result: check passed [detail]
 *     pod_succeeded: namespace pod [job]
 *     job_finished: job state (enum: complete/failed)
 *     node_condition: condition status [reason] (status: True/False/Unknown)
 *     gpu_lost, node_not_ready, node_ready: none
 * - A JSON null is the same as an absent field (loss: null = not reported).
 * - Required strings must be non-empty; replica_checksum's value must be hex
 *   digits. Strings with NUL bytes are refused.
 * - Integers: a JSON integer, or a JSON real that is integral and at most
 *   2^53 in magnitude (1200.0 is step 1200; 1.5 is "not an integer"); always
 *   re-encoded as an integer. Ranges: gpu, code, link, port, rank, replica
 *   0..INT_MAX; pid, count, step, correctable, uncorrectable 0..INT64_MAX;
 *   exit_code any int.
 * - Numbers (celsius, watts, step_ms, comm_ms, tokens_per_s): integer or
 *   real, finite; all but celsius must be >= 0.
 * - loss: a number, null, or "nan"/"inf"/"-inf" (any case).
 * - Enums are exact, lowercase: bits single/double, nic state up/down,
 *   checkpoint state saved/failed; but node_condition's status is spelled as
 *   Kubernetes spells it, True/False/Unknown.
 * - ts: RFC 3339 with any offset (normalised to UTC), fraction optional (up
 *   to 9 digits kept), years 1678..2261 (int64 nanoseconds); else
 *   "out of range".
 * - Duplicate keys in one object are invalid JSON.
 *
 * Encoding: compact, field order ts, node, gpu, pci, source, kind, the kind's
 * fields in spec-table order, msg, id, injected (only when true); absent
 * fields omitted; times as RFC 3339 UTC with microseconds (truncated);
 * numbers with the fewest digits that read back exactly (1432.5, 2.31);
 * non-finite loss as "nan"/"inf"/"-inf". */
#ifndef GH_SIGNAL_SIGNAL_JSON_H
#define GH_SIGNAL_SIGNAL_JSON_H

#include <jansson.h>
#include <stdio.h>

#include "common/utf8.h" /* gh_utf8_valid, gh_utf8_seq: the codec's string rule */
#include "signal/signal.h"

/* True when s[0..n) is a checksum value as replica_checksum carries it: one
 * or more hex digits, optionally after "0x"/"0X". Both decoders use it. */
bool gh_hex_valid(const char *s, size_t n);

/* Hard cap on one JSON line (bytes, without the newline). */
#define GH_SIGNAL_LINE_MAX (64 * 1024)

/* Decodes one JSON object from text[0..len) (borrowed; no NUL needed; len
 * at most GH_SIGNAL_LINE_MAX). line_no (1-based, 0 = unknown) prefixes error
 * details. *out is overwritten, not freed first. On success it is filled
 * (caller clears it with gh_signal_clear); on error it is left cleared.
 * Returns GH_OK, GH_EINVAL or GH_ENOMEM. A scenario header (an object with
 * "scenario" and no "kind") is GH_EINVAL "a scenario header, not a signal". */
int gh_signal_decode(const char *text, size_t len, long line_no, struct gh_signal *out,
                     struct gh_err *err);

/* gh_signal_decode, but an object without "node" takes node (borrowed;
 * NULL: none) before it is checked: a line from a node's own sender need
 * not name the node. */
int gh_signal_decode_for_node(const char *text, size_t len, long line_no, const char *node,
                              struct gh_signal *out, struct gh_err *err);

/* The same from an already-parsed jansson object (borrowed). */
int gh_signal_decode_json(const json_t *obj, long line_no, struct gh_signal *out,
                          struct gh_err *err);

/* Builds a new jansson object for s (borrowed) in the encoding's field
 * order, without validating it (caller owns: json_decref). NULL on OOM or
 * when s cannot be represented (a non-finite number other than loss, a
 * string that is not UTF-8, an enum out of range); gh_signal_encode says
 * which. */
json_t *gh_signal_encode_json(const struct gh_signal *s);

/* Encodes s as one compact JSON object without a newline. s is first
 * checked by the decoder's rules (GH_EINVAL "field \"code\": missing", ...),
 * so that whatever is written reads back. *out is malloc'd (caller frees
 * with free()), NULL on error. GH_ELIMIT when the result would be longer
 * than GH_SIGNAL_LINE_MAX. */
int gh_signal_encode(const struct gh_signal *s, char **out, struct gh_err *err);

/* Writes s as one line (object + '\n') to f (borrowed). Errors as
 * gh_signal_encode, and GH_EIO when the write fails. */
int gh_signal_write(FILE *f, const struct gh_signal *s, struct gh_err *err);

/* A JSON Lines reader over a FILE* (borrowed). Blank lines are skipped; a line
 * longer than GH_SIGNAL_LINE_MAX is an error for that line only, and the
 * reader resynchronises at the next newline: a bad line never costs the good
 * lines before or after it. */
struct gh_signal_reader;

/* NULL on OOM. The reader holds a GH_SIGNAL_LINE_MAX buffer. */
struct gh_signal_reader *gh_signal_reader_new(FILE *f);
/* Accepts NULL. Does not close the FILE. */
void gh_signal_reader_free(struct gh_signal_reader *r);

/* Reads the next signal into *out. Returns GH_OK, GH_ENOTFOUND at end of
 * input, GH_EINVAL for a bad line (err says "line N: ..."; call again to go
 * on), GH_ENOMEM, GH_EIO on a read error. On GH_OK with *header NULL, *out
 * is filled as by gh_signal_decode (overwritten, not freed first; caller
 * clears); on an error it is left cleared. When the line is a JSON object
 * with the key "scenario" and no "kind", it is returned through *header
 * (caller owns, json_decref) with rc GH_OK and out untouched; this is done
 * on any line, the caller decides whether only the first may be one. Pass
 * header == NULL to treat such a line as an error. Lines are split on '\n'
 * only (a '\r' before it is JSON whitespace); lines of spaces, tabs and
 * '\r' are blank; a UTF-8 byte order mark on line 1 is skipped. Line numbers
 * count every physical line, blank and bad ones included. */
int gh_signal_reader_next(struct gh_signal_reader *r, struct gh_signal *out, json_t **header,
                          struct gh_err *err);

/* 1-based number of the line last returned. */
long gh_signal_reader_line(const struct gh_signal_reader *r);

#endif
