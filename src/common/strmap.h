/* strmap.h - a bounded string-keyed map with index-ordered iteration, used
 * for the engine's node, job and key tables and the guards' and the
 * controller's tables. Entries are numbered in order of insertion; a removed
 * entry leaves a free index that a later insertion reuses (so memory
 * follows the live entries, not every key ever seen). Iteration is by
 * index, so everything built on it is deterministic. Keys are copied and
 * owned by the map; values are borrowed pointers (or small integers cast by
 * the caller) that the map never frees. */
#ifndef GH_COMMON_STRMAP_H
#define GH_COMMON_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gh_strmap;

/* A map that holds at most max_entries live keys. NULL on OOM. */
struct gh_strmap *gh_strmap_new(size_t max_entries);
/* Frees the map and its keys, not the values. Accepts NULL. */
void gh_strmap_free(struct gh_strmap *m);

/* Index (0..count-1, stable) of key, or -1 when absent. */
long gh_strmap_find(const struct gh_strmap *m, const char *key);
/* Index of key, inserting it (value NULL) when absent. *created says whether
 * it was inserted (may be NULL). Returns -1 when the map is full (GH_ELIMIT)
 * or on OOM (GH_ENOMEM), with *rc set when rc is non-NULL. */
long gh_strmap_intern(struct gh_strmap *m, const char *key, bool *created, int *rc);

/* The index range: indices 0..count-1, some of which may be free after
 * removals (their key and value are NULL). */
size_t gh_strmap_count(const struct gh_strmap *m);
/* The number of live keys. */
size_t gh_strmap_live(const struct gh_strmap *m);
/* True when it holds max_entries live keys (an insertion fails GH_ELIMIT). */
bool gh_strmap_full(const struct gh_strmap *m);
/* The map-owned key at index i (valid until the entry is removed), NULL
 * for a free index. */
const char *gh_strmap_key(const struct gh_strmap *m, size_t i);
void *gh_strmap_value(const struct gh_strmap *m, size_t i);
void gh_strmap_set_value(struct gh_strmap *m, size_t i, void *value);
/* The value for key, interning the key and allocating a zeroed value of size
 * bytes when it has none (the map's owner frees values). *idx (optional) gets
 * the entry's index, *created (optional) whether the value is new. NULL when
 * the map is full or out of memory (a key it inserted is removed again). */
void *gh_strmap_get_or_alloc(struct gh_strmap *m, const char *key, size_t size, long *idx,
                             bool *created);
/* Removes the entry at index i (its key is freed; the value is the
 * caller's to free first). The index becomes free and may be reused by the
 * next insertion: whoever kept it must forget it. No-op for a free index. */
void gh_strmap_remove(struct gh_strmap *m, size_t i);
/* Removes every live entry for which drop(key, value, ctx) returns true;
 * drop frees the value when it says true. Returns how many were removed. */
size_t gh_strmap_remove_if(struct gh_strmap *m,
                           bool (*drop)(const char *key, void *value, void *ctx), void *ctx);
/* Approximate bytes held by the map itself (not values). */
size_t gh_strmap_memory(const struct gh_strmap *m);

/* Writes the key "<prefix><sep><n>" into buf (prefix NULL = ""), cut at
 * cap - 1 bytes and NUL-terminated (cap > 0) exactly as snprintf(buf, cap,
 * "%s/%d", ...) would with sep '/': a per-signal key without printf.
 * Returns buf. */
static inline char *gh_strmap_key_int(char *buf, size_t cap, const char *prefix, char sep, int n)
{
    char digits[12];
    size_t nd = 0, o = 0;
    unsigned u = n < 0 ? 0u - (unsigned)n : (unsigned)n;
    do {
        digits[nd++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (n < 0)
        digits[nd++] = '-';
    if (prefix)
        for (; *prefix && o + 1 < cap; prefix++)
            buf[o++] = *prefix;
    if (o + 1 < cap)
        buf[o++] = sep;
    while (nd && o + 1 < cap)
        buf[o++] = digits[--nd];
    buf[o] = '\0';
    return buf;
}

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
