/* strmap.c - open-addressing string map with index-ordered entries and free-index reuse. */
#include "common/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define TOMB UINT32_MAX /* a slot whose entry was removed: probing goes on past it */
#define NO_FREE UINT64_MAX

struct entry {
    char *key;     /* NULL: a free index */
    uint64_t hash; /* for a free index: the next free index, NO_FREE at the end */
    void *value;
};

struct gh_strmap {
    struct entry *entries; /* by index */
    size_t count, live, cap_entries, max_entries;
    uint64_t free_head; /* first free index, NO_FREE when none */
    uint32_t *slots;    /* entry index + 1; 0 = empty; TOMB = removed */
    size_t nslots;      /* power of two, > 2 * (live + tombs) */
    size_t tombs;
};

struct gh_strmap *gh_strmap_new(size_t max_entries)
{
    struct gh_strmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->max_entries = max_entries ? max_entries : 1;
    m->free_head = NO_FREE;
    m->nslots = 16;
    m->slots = calloc(m->nslots, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

void gh_strmap_free(struct gh_strmap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->count; i++)
        free(m->entries[i].key);
    free(m->entries);
    free(m->slots);
    free(m);
}

/* Index of key, or -1 with *slot_out the slot an insertion should take (the
 * first tombstone on the probe path, else the empty slot that ended it). */
static long lookup(const struct gh_strmap *m, const char *key, uint64_t h, size_t *slot_out)
{
    size_t mask = m->nslots - 1, s = (size_t)h & mask, first_tomb = SIZE_MAX;
    for (;;) {
        uint32_t e = m->slots[s];
        if (e == 0) {
            if (slot_out)
                *slot_out = first_tomb != SIZE_MAX ? first_tomb : s;
            return -1;
        }
        if (e == TOMB) {
            if (first_tomb == SIZE_MAX)
                first_tomb = s;
        } else {
            const struct entry *en = &m->entries[e - 1];
            if (en->hash == h && strcmp(en->key, key) == 0)
                return (long)(e - 1);
        }
        s = (s + 1) & mask;
    }
}

long gh_strmap_find(const struct gh_strmap *m, const char *key)
{
    if (!key)
        key = "";
    return lookup(m, key, gh_hash_str(GH_HASH_INIT, key), NULL);
}

/* Rebuilds the slot table at nslots (dropping tombstones). */
static int rehash(struct gh_strmap *m, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return GH_ENOMEM;
    for (size_t i = 0; i < m->count; i++) {
        if (!m->entries[i].key)
            continue;
        size_t s = (size_t)m->entries[i].hash & (nslots - 1);
        while (slots[s])
            s = (s + 1) & (nslots - 1);
        slots[s] = (uint32_t)(i + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    m->tombs = 0;
    return GH_OK;
}

long gh_strmap_intern(struct gh_strmap *m, const char *key, bool *created, int *rc)
{
    if (!key)
        key = "";
    if (created)
        *created = false;
    uint64_t h = gh_hash_str(GH_HASH_INIT, key);
    size_t slot;
    long idx = lookup(m, key, h, &slot);
    if (idx >= 0)
        return idx;
    if (m->live >= m->max_entries || m->count >= UINT32_MAX - 2) {
        if (rc)
            *rc = GH_ELIMIT;
        return -1;
    }
    if ((m->live + m->tombs + 1) * 2 > m->nslots) {
        /* Grow (or just sweep tombstones) before inserting; a failed rehash
         * is tolerated while at least one slot stays empty (lookups must
         * always find an empty slot). */
        size_t ns = m->nslots;
        if ((m->live + 1) * 4 > ns)
            ns *= 2; /* else tombstones made it full: same size, swept */
        if (rehash(m, ns) != GH_OK && m->live + m->tombs + 2 > m->nslots) {
            if (rc)
                *rc = GH_ENOMEM;
            return -1;
        }
        (void)lookup(m, key, h, &slot);
    }
    size_t i;
    if (m->free_head != NO_FREE) {
        i = (size_t)m->free_head;
    } else {
        if (m->count == m->cap_entries) {
            size_t ncap = m->cap_entries ? m->cap_entries * 2 : 8;
            struct entry *ne = realloc(m->entries, ncap * sizeof *ne);
            if (!ne) {
                if (rc)
                    *rc = GH_ENOMEM;
                return -1;
            }
            m->entries = ne;
            m->cap_entries = ncap;
        }
        i = m->count;
    }
    char *k = strdup(key);
    if (!k) {
        if (rc)
            *rc = GH_ENOMEM;
        return -1;
    }
    if (i == m->count)
        m->count++;
    else
        m->free_head = m->entries[i].hash;
    m->entries[i] = (struct entry){.key = k, .hash = h, .value = NULL};
    if (m->slots[slot] == TOMB)
        m->tombs--;
    m->slots[slot] = (uint32_t)(i + 1);
    m->live++;
    if (created)
        *created = true;
    return (long)i;
}

void gh_strmap_remove(struct gh_strmap *m, size_t i)
{
    if (i >= m->count || !m->entries[i].key)
        return;
    size_t mask = m->nslots - 1, s = (size_t)m->entries[i].hash & mask;
    while (m->slots[s] != (uint32_t)(i + 1))
        s = (s + 1) & mask;
    /* A slot followed by an empty one can become empty itself. */
    if (m->slots[(s + 1) & mask] == 0) {
        m->slots[s] = 0;
    } else {
        m->slots[s] = TOMB;
        m->tombs++;
    }
    free(m->entries[i].key);
    m->entries[i] = (struct entry){.key = NULL, .hash = m->free_head, .value = NULL};
    m->free_head = i;
    m->live--;
}

size_t gh_strmap_remove_if(struct gh_strmap *m,
                           bool (*drop)(const char *key, void *value, void *ctx), void *ctx)
{
    size_t n = 0;
    for (size_t i = 0; i < m->count; i++)
        if (m->entries[i].key && drop(m->entries[i].key, m->entries[i].value, ctx)) {
            gh_strmap_remove(m, i);
            n++;
        }
    return n;
}

size_t gh_strmap_count(const struct gh_strmap *m) { return m->count; }
size_t gh_strmap_live(const struct gh_strmap *m) { return m->live; }
bool gh_strmap_full(const struct gh_strmap *m)
{
    return m->live >= m->max_entries || m->count >= UINT32_MAX - 2;
}
const char *gh_strmap_key(const struct gh_strmap *m, size_t i) { return m->entries[i].key; }
void *gh_strmap_value(const struct gh_strmap *m, size_t i) { return m->entries[i].value; }
void gh_strmap_set_value(struct gh_strmap *m, size_t i, void *value)
{
    m->entries[i].value = value;
}

size_t gh_strmap_memory(const struct gh_strmap *m)
{
    size_t b = sizeof *m + m->cap_entries * sizeof(struct entry) + m->nslots * sizeof(uint32_t);
    for (size_t i = 0; i < m->count; i++)
        if (m->entries[i].key)
            b += strlen(m->entries[i].key) + 1;
    return b;
}

void *gh_strmap_get_or_alloc(struct gh_strmap *m, const char *key, size_t size, long *idx,
                             bool *created)
{
    bool made;
    long i = gh_strmap_intern(m, key, &made, NULL);
    if (i < 0)
        return NULL;
    void *v = gh_strmap_value(m, (size_t)i);
    bool fresh = false;
    if (!v) {
        v = calloc(1, size);
        if (!v) {
            /* no key without a value: iterations over the map read every
             * value */
            if (made)
                gh_strmap_remove(m, (size_t)i);
            return NULL;
        }
        gh_strmap_set_value(m, (size_t)i, v);
        fresh = true;
    }
    if (idx)
        *idx = i;
    if (created)
        *created = fresh;
    return v;
}
