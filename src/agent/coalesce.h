/* coalesce.h - coalescing of signal storms before they reach the spool: a
 * GPU in trouble can log the same XID 100,000 times a second, and the
 * controller needs to know that it happened, when, and how often - not
 * 100,000 lines.
 *
 * Per key (node, gpu, pci, kind, code, counter/link/device/port/switch:
 * whatever tells two event streams apart) and per window (default 1 s,
 * starting at the key's first sample): the first sample passes at once
 * (FIRST); later ones in the window are counted and the latest is kept
 * (HELD); when the window ends, the kept last sample is emitted once with
 * its msg ending " [coalesced N]" (N = samples held, the last included;
 * "coalesced N" alone when it had no msg) and the key is forgotten. A
 * steady storm of one key thus ships 2 signals per window.
 *
 * Only event kinds are coalesced (xid, sxid, gpu_lost, pcie, nvlink, nic);
 * others (state changes, telemetry, kube, probes) PASS untouched.
 *
 * Memory is fixed at creation: max_keys entries (default 1024, each holding
 * one kept sample whose msg is cut to msg_max bytes) and a hash index.
 * A new key when the table is full is dropped and counted (OVERFLOW): that
 * takes more than max_keys distinct fault streams in one window on one node.
 *
 * Keys are compared by two independent 64-bit hashes (128 bits) of their
 * fields, not by the strings themselves: a false merge needs a 128-bit
 * collision between two streams of one node's kernel log.
 *
 * Time is the caller's (now_ns from the injected clock). Not thread-safe:
 * the agent's loop owns it. */
#ifndef GH_AGENT_COALESCE_H
#define GH_AGENT_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

struct gh_coalesce_opts {
    size_t max_keys;      /* 0 = 1024 */
    int64_t window_ns;    /* 0 = 1 s */
    size_t msg_max;       /* 0 = 1024; a kept sample's msg is cut to this */
};

enum gh_coalesce_verdict {
    GH_COALESCE_PASS,     /* not a coalesced kind: ship it */
    GH_COALESCE_FIRST,    /* first of its window: ship it */
    GH_COALESCE_HELD,     /* counted and kept: do not ship it */
    GH_COALESCE_OVERFLOW, /* table full: dropped, counted */
};

/* Receives a summary signal; it is the callee's to modify (e.g. give it an
 * id) during the call; the coalescer clears it afterwards. */
typedef void (*gh_coalesce_emit_fn)(void *ctx, struct gh_signal *sig);

struct gh_coalesce;

/* NULL on OOM. Caller frees with gh_coalesce_free(). */
struct gh_coalesce *gh_coalesce_new(const struct gh_coalesce_opts *opts);
/* Frees without emitting (call gh_coalesce_flush(.., true, ..) first to
 * ship what is held). Accepts NULL. */
void gh_coalesce_free(struct gh_coalesce *c);

/* Offers sig (borrowed). If the key's previous window has ended, its
 * summary is emitted first, so summaries and samples of one key stay in
 * order. Returns the verdict; GH_COALESCE_HELD copies sig (when the copy
 * fails, the count still rises and the previous kept sample stays). */
enum gh_coalesce_verdict gh_coalesce_offer(struct gh_coalesce *c, const struct gh_signal *sig,
                                           int64_t now_ns, gh_coalesce_emit_fn emit, void *ctx);

/* Emits the summaries of windows that ended by now_ns (all of them when
 * all is true: shutdown) and forgets those keys. */
void gh_coalesce_flush(struct gh_coalesce *c, int64_t now_ns, bool all, gh_coalesce_emit_fn emit,
                       void *ctx);

/* The earliest time a window with held samples ends (INT64_MAX = none):
 * when the loop's timer should call gh_coalesce_flush. */
int64_t gh_coalesce_next_deadline(const struct gh_coalesce *c);

struct gh_coalesce_stats {
    uint64_t offered, passed, first, held, summaries, overflow;
    size_t keys;          /* keys with an open window now */
};
void gh_coalesce_stats(const struct gh_coalesce *c, struct gh_coalesce_stats *out);

#endif
