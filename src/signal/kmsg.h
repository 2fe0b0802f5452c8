/* kmsg.h - turns kernel-log text (/dev/kmsg records, dmesg, syslog, journald,
 * log forwarders) into gpuheal signals and per-line labels.
 *
 * A gh_kmsg_parser is an opaque, stateful, single-threaded object. Text goes
 * in through gh_kmsg_parser_feed() (any chunking: it splits lines itself and
 * keeps a partial last line for the next call) or gh_kmsg_parser_line() (one
 * complete line). Signals come out through the emit callback of the options;
 * the signal is borrowed for the duration of the call (gh_signal_copy() it to
 * keep it). Every line also gets a label in the vocabulary of
 * shared/data/kmsg-samples.txt: NOMATCH, MATCH xid=N, MATCH sxid=N,
 * MATCH other=NAME.
 *
 * What each label emits (source "kmsg", node from the options, gpu -1):
 *   xid=N                          kind xid: code, pid/process when printed,
 *                                  pci normalised to "dddd:bb:dd.f" (".0"
 *                                  added; absent when redacted). Xid 79 is an
 *                                  xid, never an extra gpu_lost.
 *   sxid=N                         kind sxid: code, switch ("nvidia-nvswitchN"),
 *                                  pci. "Data {..}" / "Severity .." / "data[i]"
 *                                  continuation lines of the same switch and
 *                                  code are folded into that event's msg
 *                                  (lines joined by '\n'); one with no open
 *                                  event is emitted on its own.
 *   other=gpu_fallen_off_bus       kind gpu_lost, pci.
 *   other=gpu_lost_probe           kind gpu_lost once per "The NVIDIA GPU <bdf>"
 *                                  ... "fallen off the bus and is not
 *                                  responding" group (one or several lines).
 *   other=pcie_aer                 kind pcie with pci = the reporting device:
 *                                  counter aer_uncorrectable / aer_fatal for
 *                                  "PCIe Bus Error: severity=..." lines,
 *                                  aer_recovery_failed for "can't recover" /
 *                                  "device recovery failed", link_reset for
 *                                  "link has been reset". Header and detail
 *                                  lines of the same report emit nothing.
 *   other=pcie_aer_correctable     kind pcie counter aer_correctable (the
 *                                  "PCIe Bus Error" line only).
 *   other=mlx5_pcie_insufficient_power  kind nic counter pcie_insufficient_power,
 *                                  pci of the adapter: the NIC is the faulty
 *                                  device, so it must count against the
 *                                  network, not the GPU's PCIe path.
 *   other=mlx5_port_module_error   kind nic counter port_module_error, pci.
 *   other=nvlink_post_rx_detect_failure kind nvlink counter
 *                                  post_rx_detect_failure (no link index).
 *   other=gpu_uuid_map             nothing; fills the PCI -> UUID map read by
 *                                  gh_kmsg_parser_uuid(). Every later signal
 *                                  whose pci is in the map carries "uuid".
 *   other=gpu_serial, probe_failed, peermem_invalid_context,
 *   mlx5_access_reg_err, nccl_segfault   nothing: label only (no kind in
 *                                  spec/signals.md fits, or benign).
 * A signal with a counter (pcie, nic, nvlink) carries count: the number of
 * such lines this parser has seen for that device (pci, or none) and counter,
 * this one included, i.e. a cumulative counter as spec section 1 has them
 * (the table of devices is bounded, GH_KMSG_OCC_MAX; an evicted one restarts
 * at 1, which reads as a counter reset).
 * msg is the kernel message without its wrapper (stamp, host, "kernel:"),
 * at most 4096 bytes. Every string of a signal is valid UTF-8: a byte of the
 * log that starts no valid sequence (and a NUL) becomes U+FFFD; gh_kmsg_parser_meta() adds the /dev/kmsg seq, the MIG
 * GPU-I/GPU-CI of an Xid and the "caused by previous Xid" root cause.
 *
 * Timestamps (ts_ns): a wall-clock stamp on the line wins (ISO/RFC 3339 with
 * or without zone, also after dmesg --decode's "kern  :warn  : ", ctime
 * "[Sun Feb 23 16:24:18 2025]", syslog "Nov 29 11:28:11", dmesg -H
 * "[Nov29 11:28]", journalctl short-full "Sun 2025-02-23 16:24:18 CET" and
 * short-unix "1740327858.123456 host kernel:"); stamps without a zone (or
 * with a zone name other than UTC/GMT) are local time at opts.tz_offset_s
 * (default UTC) and syslog stamps take opts.default_year.
 * Otherwise a seconds-since-boot stamp ("[1234.5]", /dev/kmsg usec) is added
 * to opts.boot_time_ns when known. Otherwise (no stamp, "[  +0.000844]"
 * relative stamps, "[...]", unknown boot time) the clock's now.
 *
 * A line that claims to be an Xid or SXid record ("NVRM: Xid", "SXid (",
 * "nvidia-nvswitchN: SXid") but does not parse is labelled NOMATCH, counted
 * in the stats and kept in a ring of recent rejects with the reason.
 *
 * Streaming note: an SXid event stays open for continuation lines until a new
 * event of the same switch, GH_KMSG_FOLD_LINES later lines, or
 * gh_kmsg_parser_flush(). A reader that is caught up (read() would block)
 * should call flush so that the last SXid is not held back. */
#ifndef GH_SIGNAL_KMSG_H
#define GH_SIGNAL_KMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/kmsg_label.h"
#include "signal/signal.h"

/* Lines are classified on their first GH_KMSG_LINE_MAX bytes; the rest of a
 * longer line is ignored (counted in stats.truncated). */
#define GH_KMSG_LINE_MAX 8192
/* An SXid event accepts continuation lines for this many lines. */
#define GH_KMSG_FOLD_LINES 16
/* Recent rejects kept by the parser. */
#define GH_KMSG_REJECTS_KEEP 16
/* Entries in the PCI -> UUID map (the oldest is replaced when full). */
#define GH_KMSG_UUID_MAX 64
/* devices x counters whose occurrences are counted (see count above) */
#define GH_KMSG_OCC_MAX 256
/* opts.boot_time_ns value meaning "boot time unknown". */
#define GH_KMSG_BOOT_UNKNOWN INT64_MIN

/* Which stamp gave a signal its ts_ns. */
enum gh_kmsg_stamp {
    GH_KMSG_STAMP_NONE = 0,   /* clock now */
    GH_KMSG_STAMP_WALL,       /* wall-clock stamp on the line */
    GH_KMSG_STAMP_BOOT,       /* since-boot stamp + boot_time_ns */
};

/* Facts about the signal being emitted that have no field in gh_signal.
 * Valid only during the emit callback (gh_kmsg_parser_meta()). */
struct gh_kmsg_meta {
    struct gh_kmsg_label label;   /* label of the event's first line */
    bool has_seq;                 /* from a /dev/kmsg record */
    uint64_t seq;                 /* its sequence number */
    uint64_t line_no;             /* 1-based line number of the first line */
    int gpu_instance;             /* MIG "GPU-I:NN", -1 when absent */
    int compute_instance;         /* MIG "GPU-CI:NN", -1 when absent */
    int caused_by_xid;            /* Xid 45 "caused by previous Xid N", -1 */
    int folded;                   /* continuation lines folded into msg */
    enum gh_kmsg_stamp stamp;
};

/* Receives each signal; s (and everything it points to) is borrowed for the
 * call. A non-zero return stops the parser: feed/flush/line return it. */
typedef int (*gh_kmsg_emit_fn)(void *ctx, const struct gh_signal *s);
/* Receives every line (without its newline or a trailing "\r", truncated to
 * GH_KMSG_LINE_MAX) and its label, after the line's signals, if any, were
 * emitted. Setting it makes feed visit every line, which is slower. */
typedef void (*gh_kmsg_line_fn)(void *ctx, const char *line, size_t len,
                                const struct gh_kmsg_label *label);

struct gh_kmsg_opts {
    const char *node;         /* copied; NULL = node absent on signals */
    int64_t boot_time_ns;     /* wall time of boot, UTC ns; GH_KMSG_BOOT_UNKNOWN */
    int default_year;         /* for syslog stamps; 0 = the clock's year */
    int32_t tz_offset_s;      /* zone of stamps without one, seconds east of UTC */
    const struct gh_clock *clock; /* borrowed, must outlive the parser; NULL = real */
    const char *boot_id;      /* copied; when set, records with a /dev/kmsg seq
                                 get id "<node>/<boot_id>/<seq>" */
    gh_kmsg_emit_fn emit;     /* NULL = signals are dropped (labels only) */
    void *emit_ctx;
    gh_kmsg_line_fn on_line;  /* optional */
    void *line_ctx;
};

/* Defaults: everything absent, boot time unknown, UTC, real clock. */
void gh_kmsg_opts_init(struct gh_kmsg_opts *o);

/* Counters since gh_kmsg_parser_new(). */
struct gh_kmsg_stats {
    uint64_t bytes;       /* bytes fed */
    uint64_t lines;       /* complete lines seen (flush counts a final partial one) */
    uint64_t matched;     /* lines with a MATCH label */
    uint64_t xid_lines, sxid_lines, other_lines;
    uint64_t signals;     /* signals emitted */
    uint64_t folded;      /* continuation lines folded into an earlier event */
    uint64_t rejected;    /* Xid/SXid look-alikes that did not parse */
    uint64_t truncated;   /* lines longer than GH_KMSG_LINE_MAX */
    uint64_t unplaced;    /* events with a since-boot stamp but no boot time: stamped now */
};

/* One rejected line. reason is a static string; line holds the start of the
 * line (NUL-terminated, cut at sizeof line - 1 bytes). */
struct gh_kmsg_reject {
    const char *reason;
    uint64_t line_no;
    char line[256];
};

struct gh_kmsg_parser;

/* Creates a parser. opts is copied (strings too); NULL opts = defaults.
 * Caller frees *out with gh_kmsg_parser_free(). */
int gh_kmsg_parser_new(struct gh_kmsg_parser **out, const struct gh_kmsg_opts *opts,
                       struct gh_err *err);
/* Frees p without flushing. Accepts NULL. */
void gh_kmsg_parser_free(struct gh_kmsg_parser *p);

/* Parses len bytes of log text (borrowed for the call). Complete lines end in
 * '\n' ("\r\n" accepted); a trailing partial line is kept (up to
 * GH_KMSG_LINE_MAX bytes) and completed by the next call. Returns GH_OK,
 * GH_ENOMEM, or the emit callback's non-zero value (the rest of buf is then
 * dropped, and so is any kept partial line). */
int gh_kmsg_parser_feed(struct gh_kmsg_parser *p, const char *buf, size_t len,
                        struct gh_err *err);
/* End of input, or "caught up": parses a kept partial line as a complete one
 * and emits every event still open for continuation lines. */
int gh_kmsg_parser_flush(struct gh_kmsg_parser *p, struct gh_err *err);
/* Parses one complete line (no newline needed; borrowed) and stores its label
 * in *label when non-NULL. Independent of a partial line kept by feed. */
int gh_kmsg_parser_line(struct gh_kmsg_parser *p, const char *line, size_t len,
                        struct gh_kmsg_label *label, struct gh_err *err);

/* Metadata of the signal being emitted; NULL outside the emit callback. */
const struct gh_kmsg_meta *gh_kmsg_parser_meta(const struct gh_kmsg_parser *p);
/* The UUID ("GPU-...") last announced for a PCI address in any accepted form
 * ("PCI:0000:3b:00", "0000:3b:00.0", "3b:00.0"), or NULL. The string belongs
 * to the parser and stays valid until the next call that parses text. */
const char *gh_kmsg_parser_uuid(const struct gh_kmsg_parser *p, const char *pci);
/* The sequence number of the last /dev/kmsg record seen; false when none.
 * Persist it to resume reading after a restart. */
bool gh_kmsg_parser_last_seq(const struct gh_kmsg_parser *p, uint64_t *seq);
/* Copies the counters. */
void gh_kmsg_parser_stats(const struct gh_kmsg_parser *p, struct gh_kmsg_stats *out);
/* Copies up to cap recent rejects into out, oldest first; returns how many. */
size_t gh_kmsg_parser_rejects(const struct gh_kmsg_parser *p, struct gh_kmsg_reject *out,
                              size_t cap);

#endif
