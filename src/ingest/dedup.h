/* dedup.h - a bounded set of recently seen signal ids, so that a signal
 * delivered twice (an agent retrying a batch whose reply it never saw) is
 * dropped the second time.
 *
 * Each id is kept as the first 128 bits of its SHA-256 (16 bytes a slot
 * whatever the id's length; a false "seen" needs a 2^-64 birthday collision
 * among 2^32 ids). At most `capacity` ids are remembered; beyond that the
 * oldest inserted is forgotten first (a ring, not LRU: a duplicate arrives
 * within minutes of its original, and FIFO order costs no bookkeeping on a
 * hit). Memory: about 24 bytes x capacity, allocated once by _new.
 *
 * Not thread-safe: the owner serialises calls. */
#ifndef GH_INGEST_DEDUP_H
#define GH_INGEST_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "signal/signal.h"

struct gh_dedup;

/* capacity >= 1 and <= 2^28. NULL on OOM or a bad capacity. Caller frees
 * with gh_dedup_free(). */
struct gh_dedup *gh_dedup_new(size_t capacity);
/* Accepts NULL. */
void gh_dedup_free(struct gh_dedup *d);

/* The 16-byte key of id[0..len) (borrowed). */
struct gh_dedup_key {
    uint8_t b[16];
};
void gh_dedup_key(const char *id, size_t len, struct gh_dedup_key *out);
/* The key of a signal with an id (borrowed): its node, source, injected
 * flag and id together, so that the same id from another node, source or
 * an injection is another signal (issue 15 #1: step lines and injected
 * lines pre-sent with a kernel record's id made it a duplicate). */
void gh_dedup_signal_key(const struct gh_signal *s, struct gh_dedup_key *out);

/* True when key is in the set. */
bool gh_dedup_contains(const struct gh_dedup *d, const struct gh_dedup_key *key);
/* Inserts key (no-op when present), forgetting the oldest id when full.
 * Returns true when it was new. */
bool gh_dedup_insert(struct gh_dedup *d, const struct gh_dedup_key *key);
/* Removes key if present (undoing an insert whose batch was not taken).
 * Returns true when it was there. */
bool gh_dedup_remove(struct gh_dedup *d, const struct gh_dedup_key *key);

/* Ids remembered now, and how many were forgotten to make room. */
size_t gh_dedup_size(const struct gh_dedup *d);
uint64_t gh_dedup_evicted(const struct gh_dedup *d);

#endif
