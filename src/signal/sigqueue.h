/* sigqueue.h - a bounded, thread-safe FIFO of signals with an eventfd, which
 * carries signals from producer threads (the ingest server's HTTP thread,
 * an agent source's worker thread) to the one event loop that owns them.
 *
 * The eventfd is readable while the queue holds signals; the loop adds it
 * to its epoll set and, when it is readable, calls gh_sigqueue_pop until it
 * returns 0. Capacity is fixed at creation; a push that does not fit is
 * refused whole (the producer decides: reply 503, or count a drop). */
#ifndef GH_SIGNAL_SIGQUEUE_H
#define GH_SIGNAL_SIGQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

struct gh_sigqueue;

/* capacity >= 1. NULL on OOM or when no eventfd can be had. Caller frees
 * with gh_sigqueue_free(). */
struct gh_sigqueue *gh_sigqueue_new(size_t capacity);
/* Clears any signals still queued. Accepts NULL. */
void gh_sigqueue_free(struct gh_sigqueue *q);

/* The eventfd (owned by the queue; EFD_NONBLOCK | EFD_CLOEXEC). */
int gh_sigqueue_fd(const struct gh_sigqueue *q);

/* Appends sigs[0..n) in order, stealing them (each sigs[i] is re-inited),
 * or, when fewer than n slots are free, takes none: GH_EAGAIN. Any thread. */
int gh_sigqueue_push(struct gh_sigqueue *q, struct gh_signal *sigs, size_t n);
/* Appends a deep copy of *sig (borrowed). GH_EAGAIN when full (counted in
 * dropped), GH_ENOMEM. Any thread. */
int gh_sigqueue_push_copy(struct gh_sigqueue *q, const struct gh_signal *sig);

/* Moves up to max signals into out[] (overwritten, not freed first; the
 * caller owns them and clears each). Returns how many. Any thread, though
 * meant for the owner's loop. */
size_t gh_sigqueue_pop(struct gh_sigqueue *q, struct gh_signal *out, size_t max);

struct gh_sigqueue_stats {
    size_t depth, capacity;
    uint64_t pushed;  /* signals taken */
    uint64_t refused; /* signals of pushes refused because the queue was full */
};
void gh_sigqueue_stats(struct gh_sigqueue *q, struct gh_sigqueue_stats *out);

#endif
