/* strmap.c - open-addressing string map with insertion-ordered entries. */
#include "engine/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

struct entry {
    char *key;
    uint64_t hash;
    void *value;
};

struct gh_strmap {
    struct entry *entries; /* insertion order */
    size_t count, cap_entries, max_entries;
    uint32_t *slots;       /* entry index + 1; 0 = empty */
    size_t nslots;         /* power of two, >= 2 * count */
};

struct gh_strmap *gh_strmap_new(size_t max_entries)
{
    struct gh_strmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->max_entries = max_entries ? max_entries : 1;
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

static long lookup(const struct gh_strmap *m, const char *key, uint64_t h, size_t *slot_out)
{
    size_t mask = m->nslots - 1, s = (size_t)h & mask;
    for (;;) {
        uint32_t e = m->slots[s];
        if (e == 0) {
            if (slot_out)
                *slot_out = s;
            return -1;
        }
        const struct entry *en = &m->entries[e - 1];
        if (en->hash == h && strcmp(en->key, key) == 0)
            return (long)(e - 1);
        s = (s + 1) & mask;
    }
}

long gh_strmap_find(const struct gh_strmap *m, const char *key)
{
    if (!key)
        key = "";
    return lookup(m, key, gh_hash_str(GH_HASH_INIT, key), NULL);
}

static int rehash(struct gh_strmap *m, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return GH_ENOMEM;
    for (size_t i = 0; i < m->count; i++) {
        size_t s = (size_t)m->entries[i].hash & (nslots - 1);
        while (slots[s])
            s = (s + 1) & (nslots - 1);
        slots[s] = (uint32_t)(i + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
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
    if (m->count >= m->max_entries || m->count >= UINT32_MAX - 1) {
        if (rc)
            *rc = GH_ELIMIT;
        return -1;
    }
    if ((m->count + 1) * 2 > m->nslots) {
        /* Grow before inserting; a failed rehash is tolerated while at least
         * one slot stays empty (lookups must always find an empty slot). */
        if (rehash(m, m->nslots * 2) != GH_OK && m->count + 2 > m->nslots) {
            if (rc)
                *rc = GH_ENOMEM;
            return -1;
        }
        (void)lookup(m, key, h, &slot);
    }
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
    char *k = strdup(key);
    if (!k) {
        if (rc)
            *rc = GH_ENOMEM;
        return -1;
    }
    m->entries[m->count] = (struct entry){.key = k, .hash = h, .value = NULL};
    m->slots[slot] = (uint32_t)(m->count + 1);
    m->count++;
    if (created)
        *created = true;
    return (long)(m->count - 1);
}

size_t gh_strmap_count(const struct gh_strmap *m) { return m->count; }
const char *gh_strmap_key(const struct gh_strmap *m, size_t i) { return m->entries[i].key; }
void *gh_strmap_value(const struct gh_strmap *m, size_t i) { return m->entries[i].value; }
void gh_strmap_set_value(struct gh_strmap *m, size_t i, void *value) { m->entries[i].value = value; }

size_t gh_strmap_memory(const struct gh_strmap *m)
{
    size_t b = sizeof *m + m->cap_entries * sizeof(struct entry) + m->nslots * sizeof(uint32_t);
    for (size_t i = 0; i < m->count; i++)
        b += strlen(m->entries[i].key) + 1;
    return b;
}
