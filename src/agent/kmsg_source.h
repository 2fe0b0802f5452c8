/* kmsg_source.h - the agent's kernel-log source: follows /dev/kmsg (or a
 * stand-in "device" file or FIFO of records), or a plain log file with
 * rotation, through the kernel-log parser (signal/kmsg.h), and emits its
 * signals (source "kmsg").
 *
 * Two modes
 * - GH_KMSG_SRC_DEVICE (default, path /dev/kmsg): one read() per record;
 *   EPIPE (the ring overwrote records not yet read) is counted and reading
 *   goes on. A regular file or FIFO of records ("6,1234,5678901,-;text",
 *   one per line; dictionary lines starting with a space are skipped) may
 *   stand in for the device in tests. Reading starts at the oldest record
 *   the ring still holds, so faults from before the agent started are seen.
 *   Signals carry id "<node>/<boot_id>/<seq>" (the parser makes it) and
 *   the seq as a number (kmsg_seq, has_kmsg_seq: what to commit).
 * - GH_KMSG_SRC_FILE: a text log (kern.log, a dmesg dump) followed like
 *   `tail -F`: appends are read; a new inode at the path (rotation) is read
 *   from its start after the old file is drained; a file that shrinks
 *   (truncation, copytruncate) is re-read from its start, and so is one
 *   whose bytes before the read position changed (truncated and rewritten
 *   longer between two polls: a hash of the up to 4 KiB before the
 *   position, checked at every end of file). Reading starts at the end of
 *   the file unless opts.file_from_start - or, with opts.state_path, at the
 *   persisted position (below).
 *
 * Nothing lost across a restart (file mode): the caller tells the source,
 * with gh_kmsg_source_commit_read(), that every signal emitted so far has
 * been durably handed off; the source persists the position reached when
 * it was last caught up - the file (dev, inode), the offset just after a
 * complete line and a hash of the bytes before it - in opts.state_path
 * ("gpuheal-kmsg-file v1", same tmp + fsync + rename, same interval). On
 * start: the same inode with the same bytes before the offset is read from
 * there (what was written while the agent was down is read); the same inode
 * shorter or with other bytes there (copytruncate) is read from its start;
 * a new inode at the path (rotation while down) - the old inode is looked
 * for in the same directory (kern.log.1) and read from the offset to its
 * end, then the new file from its start. Lines read after the last commit
 * are read again after a crash: their signals can arrive twice (file-mode
 * signals carry no id of their own), at most one persist interval's worth.
 *
 * Never re-shipping (device mode): the caller tells the source which record
 * sequence number has been durably handed off (gh_kmsg_source_commit(),
 * e.g. once the spool has fsync'd the signal). The source persists
 * "<boot_id> <seq>" in opts.state_path (tmp file + fsync + rename, at most
 * every opts.persist_interval_ns and on free). After a restart, a
 * signal whose record seq is <= the persisted seq of the same boot_id is
 * not emitted (counted as skipped); every record is still parsed so that
 * the parser's PCI -> UUID map and SXid folding see the whole ring. A
 * different boot_id (the node rebooted) skips nothing. Between a commit and
 * its persistence a crash re-ships at most persist_interval_ns of signals,
 * which the controller drops as duplicates by id (at-least-once).
 *
 * Driving: the caller's own loop calls gh_kmsg_source_poll() (never
 * blocks: the fd is non-blocking; the agent polls on its loop's timer).
 * When caught up the parser is flushed (gh_kmsg_parser_flush) so that the
 * last SXid event is not held back.
 *
 * Threads: emit is called from the poll() caller, never concurrently with
 * itself; the signal is borrowed for the call; emit must not call back into
 * the source, except gh_kmsg_source_commit(), which (like stats) is safe
 * from any thread. */
#ifndef GH_AGENT_KMSG_SOURCE_H
#define GH_AGENT_KMSG_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/kmsg.h"
#include "signal/signal.h"

#define GH_KMSG_SRC_DEFAULT_DEVICE  "/dev/kmsg"
#define GH_KMSG_SRC_DEFAULT_BOOT_ID "/proc/sys/kernel/random/boot_id"

enum gh_kmsg_src_mode { GH_KMSG_SRC_DEVICE = 0, GH_KMSG_SRC_FILE };

/* Receives each signal (borrowed for the call). */
typedef void (*gh_kmsg_source_emit_fn)(void *ctx, const struct gh_signal *s);

struct gh_kmsg_source_opts {
    enum gh_kmsg_src_mode mode;
    const char *path;           /* copied; NULL = /dev/kmsg (device mode; required for file mode) */
    const char *node;           /* copied; Kubernetes node name, required */
    const char *state_path;     /* copied; device mode's persisted seq; NULL = no persistence */
    const char *boot_id_path;   /* copied; NULL = GH_KMSG_SRC_DEFAULT_BOOT_ID */
    const char *boot_id;        /* copied; when set, used instead of reading boot_id_path */
    int64_t boot_time_ns;       /* wall time of boot (UTC ns); 0 = now - CLOCK_BOOTTIME
                                   by opts.clock; GH_KMSG_BOOT_UNKNOWN = unknown */
    bool file_from_start;       /* file mode: read the existing content first */
    int64_t persist_interval_ns; /* 0 = 1 s; < 0 = persist on every commit */
    const struct gh_clock *clock; /* borrowed, must outlive the source; NULL = real */
    gh_kmsg_source_emit_fn emit;  /* required */
    void *emit_ctx;               /* borrowed; passed to emit */
};

/* Zeroes *o (all defaults). */
void gh_kmsg_source_opts_init(struct gh_kmsg_source_opts *o);

struct gh_kmsg_source;

/* Validates opts, reads the boot id and the persisted state (a missing state
 * file is fine; a corrupt one is ignored and counted in stats.state_errors)
 * and opens the path. *out: a new source, caller frees with
 * gh_kmsg_source_free(). GH_ENOTFOUND when the path does not exist (device
 * mode) - in file mode a missing file is waited for; GH_EIO when it cannot
 * be opened (e.g. no permission on /dev/kmsg); GH_EINVAL; GH_ENOMEM. */
int gh_kmsg_source_new(const struct gh_kmsg_source_opts *opts, struct gh_kmsg_source **out,
                       struct gh_err *err);

/* Reads everything available now (at most about 4 MiB per call, so a
 * caller's loop is never starved), emitting signals; checks rotation in
 * file mode; flushes the parser when caught up; persists the committed seq
 * when due. *caught_up (may be NULL) is set true when nothing more is
 * available. Never blocks. Returns GH_OK, or GH_EIO on a read error other
 * than EPIPE/EAGAIN (counted too; the next call retries, reopening a file). */
int gh_kmsg_source_poll(struct gh_kmsg_source *src, bool *caught_up, struct gh_err *err);

/* Marks every signal whose record seq is <= seq as durably handed off.
 * Lower values than an earlier commit are ignored. Thread-safe, cheap (the
 * file is written later by the reading side; see persist_interval_ns). */
void gh_kmsg_source_commit(struct gh_kmsg_source *src, uint64_t seq);
/* File mode: every signal emitted so far is durably handed off (e.g. the
 * spool was fsync'd after them): the position reached when the source was
 * last caught up becomes the one to persist. Thread-safe; cheap. */
void gh_kmsg_source_commit_read(struct gh_kmsg_source *src);
/* Writes the state file now (tmp + fsync + rename). GH_OK when there is
 * nothing to write or no state_path; GH_EIO. Thread-safe. */
int gh_kmsg_source_persist(struct gh_kmsg_source *src, struct gh_err *err);

/* Counters for /metrics. Thread-safe. */
struct gh_kmsg_source_stats {
    uint64_t records;      /* device records / file lines read */
    uint64_t bytes;
    uint64_t signals;      /* emitted */
    uint64_t skipped;      /* signals not emitted: shipped before a restart */
    uint64_t overruns;     /* EPIPE: records lost to ring overwrite */
    uint64_t rotations;    /* file mode: new inode at the path */
    uint64_t truncations;  /* file mode: file shrank or was rewritten (also found on start) */
    uint64_t copies_read;  /* file mode: of those, read on from copytruncate's copy */
    uint64_t read_errors;
    uint64_t state_errors; /* state file unreadable/corrupt, or a failed write */
    uint64_t committed;    /* last committed seq (file mode: offset; 0 = none) */
    uint64_t persisted;    /* last seq (offset) written to the state file (0 = none) */
};
void gh_kmsg_source_stats(struct gh_kmsg_source *src, struct gh_kmsg_source_stats *out);

/* The parser's counters and rejects (for /metrics and logs). Thread-safe. */
void gh_kmsg_source_parser_stats(struct gh_kmsg_source *src, struct gh_kmsg_stats *out);
size_t gh_kmsg_source_rejects(struct gh_kmsg_source *src, struct gh_kmsg_reject *out,
                              size_t cap);

/* The boot id in use ("" when unknown). Borrowed, valid until free. */
const char *gh_kmsg_source_boot_id(const struct gh_kmsg_source *src);

/* Persists, closes and frees. Accepts NULL. */
void gh_kmsg_source_free(struct gh_kmsg_source *src);

#endif
