/* strmap.h - a bounded string-keyed map with insertion-ordered iteration,
 * used for the engine's node, job and key tables. Iteration order is the
 * order of first insertion, so everything built on it is deterministic.
 * Keys are copied and owned by the map; values are borrowed pointers (or
 * small integers cast by the caller) that the map never frees. */
#ifndef GH_ENGINE_STRMAP_H
#define GH_ENGINE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gh_strmap;

/* A map that holds at most max_entries keys. NULL on OOM. */
struct gh_strmap *gh_strmap_new(size_t max_entries);
/* Frees the map and its keys, not the values. Accepts NULL. */
void gh_strmap_free(struct gh_strmap *m);

/* Index (0..count-1, stable) of key, or -1 when absent. */
long gh_strmap_find(const struct gh_strmap *m, const char *key);
/* Index of key, inserting it (value NULL) when absent. *created says whether
 * it was inserted (may be NULL). Returns -1 when the map is full (GH_ELIMIT)
 * or on OOM (GH_ENOMEM), with *rc set when rc is non-NULL. */
long gh_strmap_intern(struct gh_strmap *m, const char *key, bool *created, int *rc);

size_t gh_strmap_count(const struct gh_strmap *m);
/* The map-owned key at index i (valid for the map's life). */
const char *gh_strmap_key(const struct gh_strmap *m, size_t i);
void *gh_strmap_value(const struct gh_strmap *m, size_t i);
void gh_strmap_set_value(struct gh_strmap *m, size_t i, void *value);
/* Approximate bytes held by the map itself (not values). */
size_t gh_strmap_memory(const struct gh_strmap *m);

#define GH_HASH_INIT 1469598103934665603ULL

/* 64-bit FNV-1a of a NUL-terminated string (NULL hashes as ""). Inline:
 * it is on the per-signal path. */
static inline uint64_t gh_hash_str(uint64_t h, const char *s)
{
    if (s)
        for (; *s; s++) {
            h ^= (unsigned char)*s;
            h *= 1099511628211ULL;
        }
    h ^= 0xff; /* terminator, so "ab","c" and "a","bc" differ */
    h *= 1099511628211ULL;
    return h;
}

/* Mixes a 64-bit value into h. */
static inline uint64_t gh_hash_u64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

#endif
