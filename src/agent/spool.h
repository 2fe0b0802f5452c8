/* spool.h - the agent's bounded disk spool of signal lines: what the
 * sources saw is kept here until the controller has taken it, so nothing
 * is lost while the controller is down or restarting, or when the agent is
 * killed.
 *
 * Layout: a directory of append-only segment files "<first seq>.seg" and a
 * "cursor" file. A record is a 16-byte header (payload length u32 whose top
 * bit marks a telemetry record, CRC-32C u32 of seq + payload, seq u64; host
 * byte order: a spool never moves between machines) and the payload, one
 * compact JSON signal line without its newline. Records have consecutive
 * sequence numbers.
 *
 * Durability: appends are buffered in memory (up to 64 KiB) until
 * gh_spool_flush(), which the owner calls once per loop iteration; after it
 * the records survive kill -9 (they are in the kernel). gh_spool_sync()
 * adds fdatasync (the owner calls it on a timer: batched fsync), after which
 * they survive power loss. On open, a torn or corrupt last record (a crash
 * mid-write) is detected by its length and CRC and truncated away.
 *
 * Reading: gh_spool_read() returns the oldest records not yet acked, from
 * the persisted read cursor; gh_spool_ack() moves the cursor past a batch
 * the controller accepted, deleting segments that are wholly acked. The
 * cursor is written on every ack (no fsync: losing it to power loss only
 * re-sends records, which the controller drops as duplicates by id).
 *
 * Bounds: the segment files never total more than max_bytes. Telemetry
 * records (the training side's step lines, GH_SPOOL_TELEMETRY) have a share
 * of their own, telemetry_max_bytes: a telemetry line that does not fit in
 * it, or in the spool, is dropped and counted in stats.telemetry_dropped -
 * telemetry never makes room. When a hardware or node signal would exceed
 * max_bytes, the OLDEST segments are deleted first, acked or not: unacked
 * records lost that way are counted in stats.lost and the owner must log it
 * loudly. With telemetry held to its share, hardware signals always have
 * max_bytes - telemetry_max_bytes before any of them is dropped, so
 * telemetry never pushes a hardware signal out. Memory: the write buffer,
 * the read buffer of one batch, and a small table of segments.
 *
 * A full disk (ENOSPC) or another write error: the records stay in the
 * write buffer (up to 128 KiB, stats.held) and every later flush tries
 * again; meanwhile telemetry is dropped (counted) so that the buffer holds
 * hardware signals, a hardware signal that no longer fits the buffer is
 * lost (counted in stats.lost), rotation is put off, and gh_spool_read
 * keeps returning what is in the files, so shipping and acks go on and
 * free the space. stats.write_errors counts failed writes.
 *
 * Ids: a signal appended without an id gets "<node>/<boot_id>/<seq>" with
 * the record's seq. A new spool starts its seqs at the creation time in
 * microseconds since the epoch (about 1.8e15), so that a spool directory
 * that is lost and re-created within the same boot (a re-created pod)
 * never re-issues an id, and the ids never meet the kernel log's record
 * numbers that the kmsg source uses in the same form (a record count since
 * boot). An existing spool continues its seqs across restarts.
 *
 * Not thread-safe: one owner (the agent's event loop) calls everything. */
#ifndef GH_AGENT_SPOOL_H
#define GH_AGENT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_SPOOL_DEFAULT_MAX_BYTES (256ull * 1024 * 1024)

struct gh_spool_opts {
    const char *dir;           /* borrowed (copied); created (one level) if missing */
    const char *node;          /* borrowed (copied); for ids; required */
    const char *boot_id;       /* borrowed (copied); for ids; required */
    uint64_t max_bytes;        /* 0 = GH_SPOOL_DEFAULT_MAX_BYTES; at least 64 KiB */
    uint64_t segment_bytes;    /* 0 = max_bytes / 8, clamped to [16 KiB, 64 MiB];
                                  at most max_bytes / 4 */
    uint64_t telemetry_max_bytes; /* telemetry's share; 0 = max_bytes / 4; at most
                                     max_bytes / 2 */
    const struct gh_clock *clock; /* borrowed; NULL = real; for a new spool's first seq */
};

/* What a record is, for the bounds: telemetry (step lines) has its own
 * share and is dropped first; everything else is "hardware" (kernel log,
 * NVML, DCGM, NIC, probes, injected). */
enum gh_spool_class { GH_SPOOL_HARDWARE = 0, GH_SPOOL_TELEMETRY };

struct gh_spool;

/* Opens (or creates) the spool in opts->dir: lists the segments, truncates
 * a torn last record, restores the cursor (a missing or corrupt cursor
 * means "from the oldest record": duplicates, never loss). *out: caller
 * frees with gh_spool_close(). GH_EINVAL, GH_EIO (err names the file),
 * GH_ENOMEM. */
int gh_spool_open(const struct gh_spool_opts *opts, struct gh_spool **out, struct gh_err *err);

/* Appends sig (class telemetry when its source is GH_SRC_TELEMETRY): gives
 * it an id when it has none (sig->id is then set; sig stays the caller's),
 * encodes it (GH_EINVAL/GH_ELIMIT from the codec: nothing appended) and
 * buffers the record. *seq (may be NULL) receives its seq. GH_EIO when
 * writes fail and the memory hold is full (the record is not appended and
 * is counted in stats.lost), GH_ELIMIT when even an empty spool could not
 * hold it, or for telemetry when it is dropped (stats.telemetry_dropped). */
int gh_spool_append(struct gh_spool *sp, struct gh_signal *sig, uint64_t *seq,
                    struct gh_err *err);

/* Appends one already-encoded line (borrowed; no newline inside; at most
 * GH_SIGNAL_LINE_MAX bytes) as is, of class cls. Errors as gh_spool_append.
 * gh_spool_append_line is the hardware class. */
int gh_spool_append_line_as(struct gh_spool *sp, enum gh_spool_class cls, const char *line,
                            size_t len, uint64_t *seq, struct gh_err *err);
int gh_spool_append_line(struct gh_spool *sp, const char *line, size_t len, uint64_t *seq,
                         struct gh_err *err);

/* Writes buffered records to the segment file (kill -9 safe after). On a
 * write error (GH_EIO) nothing is half-written and the records stay
 * buffered for the next call. */
int gh_spool_flush(struct gh_spool *sp, struct gh_err *err);
/* Flushes and fdatasyncs the active segment, the cursor and the directory
 * when they changed (power-loss safe after). */
int gh_spool_sync(struct gh_spool *sp, struct gh_err *err);

/* A batch of records read from the cursor: body holds the payloads, each
 * followed by '\n' (an HTTP request body as it stands); seqs[i] is the seq
 * of line i + 1. Owned by the caller: gh_spool_batch_clear(). */
struct gh_spool_batch {
    char *body;
    size_t len;
    size_t n;
    uint64_t *seqs;
    /* where the batch ends (for gh_spool_ack) */
    uint64_t end_seq, end_seg, end_off;
};

/* Reads up to max_records records / about max_bytes of body (at least one
 * record whatever its size) starting at the cursor, into *b (overwritten;
 * empty when nothing is pending). Flushes first; when the flush fails it
 * reads what is in the files (the held records come later). Records that fail their
 * CRC in an older segment (disk corruption) are skipped and counted in
 * stats.corrupt. GH_OK, GH_EIO, GH_ENOMEM. */
int gh_spool_read(struct gh_spool *sp, size_t max_records, size_t max_bytes,
                  struct gh_spool_batch *b, struct gh_err *err);
/* Frees what b holds and empties it. Accepts an empty batch. */
void gh_spool_batch_clear(struct gh_spool_batch *b);

/* Moves the cursor past b (a batch from gh_spool_read; a batch behind the
 * cursor, e.g. one whose segment was dropped since, is ignored), writes the
 * cursor file and deletes segments wholly behind it. GH_OK, GH_EIO. */
int gh_spool_ack(struct gh_spool *sp, const struct gh_spool_batch *b, struct gh_err *err);

struct gh_spool_stats {
    uint64_t next_seq;          /* the seq the next append gets */
    uint64_t cursor_seq;        /* the oldest unacked seq */
    uint64_t pending;           /* records appended, not yet acked */
    uint64_t bytes;             /* segment bytes on disk (and buffered) */
    uint64_t segments;
    uint64_t appended, acked;   /* since open */
    uint64_t lost;              /* unacked records dropped (spool full, write error) */
    uint64_t telemetry_dropped; /* telemetry lines refused (share or spool full, writes failing) */
    uint64_t telemetry_bytes, telemetry_max_bytes;
    uint64_t write_errors;      /* failed flushes (ENOSPC...) */
    uint64_t held;              /* records held in memory while writes fail */
    bool write_failing;         /* the last flush failed */
    uint64_t corrupt;           /* records skipped on read (bad CRC in an old segment) */
    uint64_t torn_bytes;        /* bytes truncated on open (a torn last record) */
    uint64_t syncs;
};
void gh_spool_stats(const struct gh_spool *sp, struct gh_spool_stats *out);

/* What a spool directory holds, read without opening the spool (nothing
 * is written, created or truncated, so it is safe beside a running agent):
 * the segments, their bytes, the cursor's seq (the oldest unacked record)
 * and the seq after the newest complete record, found by walking the record
 * headers of the newest segment (at most 64 MiB of headers, no CRC check).
 * pending = next_seq - cursor_seq (records have consecutive seqs). */
struct gh_spool_peek {
    bool exists; /* the directory exists */
    uint64_t segments, bytes;
    bool have_cursor; /* a readable cursor file */
    uint64_t cursor_seq, next_seq, pending;
};
/* dir borrowed. GH_OK (a missing directory too: exists false), GH_EIO
 * (unreadable directory or segment: err names it). */
int gh_spool_peek(const char *dir, struct gh_spool_peek *out, struct gh_err *err);

/* Flushes, syncs, closes and frees. Accepts NULL. */
void gh_spool_close(struct gh_spool *sp);

#endif
