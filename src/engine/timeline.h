/* timeline.h - the engine's memory of signals: one time-ordered stream with
 * bounded history per node, per GPU and per job.
 *
 * A signal goes through three steps:
 *   push     dedup (by "id", else by content), then the source time is bounded
 *            by the arrival time (a source clock may not run ahead of arrival by
 *            more than max_ahead: such a signal is placed at its arrival), and
 *            the copy waits in a reorder buffer;
 *   release  signals leave the buffer in time order once the stream's
 *            watermark (now - window) passes them, so detectors see a sorted
 *            stream although sources arrive out of order within the window;
 *   retain   a released signal is appended to its node's, GPU's and job's ring
 *            for its kind; each ring keeps at most keep_*[kind] entries and
 *            none older than max_age, and counts what it evicted.
 *
 * Entries are reference counted and shared between rings; detectors and
 * incidents take a reference (gh_tl_ref) to keep evidence alive after the
 * rings have moved on, and drop it with gh_tl_unref. Nothing here does I/O or
 * reads a clock: every time is passed in. */
#ifndef GH_ENGINE_TIMELINE_H
#define GH_ENGINE_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

/* One retained signal. Read-only for everyone but the timeline. */
struct gh_tl_entry {
    struct gh_signal sig; /* owned deep copy */
    int64_t ts_ns;        /* stream time: source ts, bounded by arrival */
    int64_t arrival_ns;   /* when the engine received it */
    uint64_t seq;         /* arrival order: breaks ties between equal ts */
    uint32_t refs;
    uint32_t bytes;       /* approximate heap bytes of this entry */
    bool late;            /* released after younger signals (beyond the window) */
};

/* Keeps an entry alive; returns it. */
const struct gh_tl_entry *gh_tl_ref(const struct gh_tl_entry *e);
/* Drops a reference taken with gh_tl_ref (frees at zero). Accepts NULL. */
void gh_tl_unref(const struct gh_tl_entry *e);
/* The one order of entries, the timeline's own: by stream time, then arrival
 * (seq). A qsort comparator over an array of const struct gh_tl_entry *. */
int gh_tl_entry_cmp(const void *a, const void *b);

struct gh_timeline_config {
    int64_t window_ns;     /* out-of-order tolerance (default 2 s) */
    int64_t max_ahead_ns;  /* how far a source ts may be ahead of arrival (default 2 s) */
    size_t max_pending;    /* reorder buffer bound; beyond it the oldest is released early */
    size_t dedup_cap;      /* dedup keys per generation (two generations kept) */
    int64_t max_age_ns;    /* ring entries older than this (stream time) are dropped */
    size_t max_entities;   /* nodes and jobs each */
    uint16_t keep_node[GH_KIND__COUNT];
    uint16_t keep_gpu[GH_KIND__COUNT];
    uint16_t keep_job[GH_KIND__COUNT];
};

void gh_timeline_config_default(struct gh_timeline_config *c);

struct gh_timeline;

/* cfg is copied; NULL = defaults. Caller frees with gh_timeline_free. */
struct gh_timeline *gh_timeline_new(const struct gh_timeline_config *cfg);
void gh_timeline_free(struct gh_timeline *tl);

/* Admits a copy of s (borrowed). Returns GH_OK when queued, GH_EAGAIN when it
 * was a duplicate and was dropped, GH_EINVAL for a signal that cannot be
 * placed (kind out of range), GH_ENOMEM. */
int gh_timeline_push(struct gh_timeline *tl, const struct gh_signal *s, int64_t arrival_ns,
                     struct gh_err *err);
/* The same, taking ownership of *s's strings (s is left cleared). */
int gh_timeline_push_steal(struct gh_timeline *tl, struct gh_signal *s, int64_t arrival_ns,
                           struct gh_err *err);

/* Stream time of the oldest waiting signal, or INT64_MAX when none. */
int64_t gh_timeline_pending_ts(const struct gh_timeline *tl);
size_t gh_timeline_pending(const struct gh_timeline *tl);
/* Releases the oldest waiting signal when its ts <= now - window, when force,
 * or when the buffer is over max_pending; NULL otherwise. The entry is
 * retained in its rings and borrowed by the caller until the next release. */
const struct gh_tl_entry *gh_timeline_release(struct gh_timeline *tl, int64_t now, bool force);

enum gh_tl_scope { GH_TL_NODE, GH_TL_GPU, GH_TL_JOB, GH_TL_NODE_GPUS };

/* Retained entries of one node (scope NODE; NODE_GPUS: the node's and all
 * its GPUs'), one GPU of a node (GPU) or one job (JOB) whose kind is in the kinds bitmask (1u << kind) and whose ts lies
 * in [since, until]; written to out oldest first. When more than cap match,
 * the newest cap are kept if newest, else the oldest cap. Returns how many
 * were written. Entries are borrowed (gh_tl_ref to keep them). */
size_t gh_timeline_query(struct gh_timeline *tl, enum gh_tl_scope scope, const char *name, int gpu,
                         uint32_t kinds, int64_t since, int64_t until, bool newest,
                         const struct gh_tl_entry **out, size_t cap);

/* Drops what the timeline holds for one node (with its GPUs) or one job;
 * entries stay alive while someone else holds a reference. False when it
 * held nothing. */
bool gh_timeline_forget(struct gh_timeline *tl, enum gh_tl_scope scope, const char *name);
/* Drops the nodes and jobs whose newest entry is older than max_age at
 * stream time now (rings only age when pushed to: a node or job that went
 * quiet would otherwise be kept forever). Returns how many were dropped. */
size_t gh_timeline_expire(struct gh_timeline *tl, int64_t now);

struct gh_timeline_stats {
    uint64_t pushed, duplicates, released, late, forced, ahead_clamped, entries_live;
    uint64_t evicted[GH_KIND__COUNT];
    uint64_t entities_full; /* signals not retained for want of a node/job slot */
    uint64_t nomem;         /* allocations that failed while retaining released signals
                               (the signal, or an older one of its ring, is not kept) */
    uint64_t pooled;        /* dead entries kept for reuse ... */
    size_t pooled_bytes;    /* ... and their bytes (counted in bytes) */
    size_t names;           /* distinct node and job names the entries share */
    size_t nodes, jobs;     /* entities held now */
    int64_t watermark_ns;   /* ts of the last released signal */
    size_t bytes;           /* approximate memory held */
};
void gh_timeline_stats(const struct gh_timeline *tl, struct gh_timeline_stats *out);

#define GH_KIND_BIT(k) (1u << (k))

#endif
