/* dedup.c - the bounded set of recently seen signal ids: a FIFO ring of
 * 128-bit id digests indexed by a linear-probing hash table. */
#include "ingest/dedup.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

struct gh_dedup {
    size_t capacity;          /* ring slots */
    size_t next;              /* ring slot the next insert writes */
    size_t size;              /* live ids */
    uint64_t evicted;
    struct gh_dedup_key *ring;
    uint8_t *live;            /* per ring slot: 1 = in the table */
    uint32_t *table;          /* ring index + 1; 0 = empty */
    size_t mask;              /* table size - 1 (a power of two >= 2 x capacity) */
};

void gh_dedup_key(const char *id, size_t len, struct gh_dedup_key *out)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)id, len, md);
    memcpy(out->b, md, sizeof out->b);
}

void gh_dedup_signal_key(const struct gh_signal *s, struct gh_dedup_key *out)
{
    const char *node = s->node ? s->node : "";
    const char *src = gh_source_name(s->source);
    const char *id = s->id ? s->id : "";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    /* the NULs separate the parts */
    if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(c, node, strlen(node) + 1) || !EVP_DigestUpdate(c, src, strlen(src) + 1) ||
        !EVP_DigestUpdate(c, s->injected ? "i" : "r", 2) || !EVP_DigestUpdate(c, id, strlen(id)) ||
        !EVP_DigestFinal_ex(c, md, &mdlen) || mdlen < sizeof out->b) {
        /* no digest context (out of memory): a key from the parts' hashes */
        struct gh_dedup_key a, b;
        gh_dedup_key(id, strlen(id), &a);
        gh_dedup_key(node, strlen(node), &b);
        for (size_t i = 0; i < sizeof out->b; i++)
            out->b[i] = (uint8_t)(a.b[i] ^ (b.b[i] * 31u) ^ (uint8_t)(s->source + 7 * s->injected));
    } else {
        memcpy(out->b, md, sizeof out->b);
    }
    EVP_MD_CTX_free(c);
}

static size_t home(const struct gh_dedup *d, const struct gh_dedup_key *k)
{
    uint64_t h;
    memcpy(&h, k->b, sizeof h);
    return (size_t)h & d->mask;
}

struct gh_dedup *gh_dedup_new(size_t capacity)
{
    if (capacity < 1 || capacity > ((size_t)1 << 28))
        return NULL;
    struct gh_dedup *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    size_t tsize = 2;
    while (tsize < 2 * capacity)
        tsize <<= 1;
    d->capacity = capacity;
    d->mask = tsize - 1;
    d->ring = calloc(capacity, sizeof *d->ring);
    d->live = calloc(capacity, 1);
    d->table = calloc(tsize, sizeof *d->table);
    if (!d->ring || !d->live || !d->table) {
        gh_dedup_free(d);
        return NULL;
    }
    return d;
}

void gh_dedup_free(struct gh_dedup *d)
{
    if (!d)
        return;
    free(d->ring);
    free(d->live);
    free(d->table);
    free(d);
}

/* Table position of key, or -1. */
static long find(const struct gh_dedup *d, const struct gh_dedup_key *k)
{
    for (size_t i = home(d, k);; i = (i + 1) & d->mask) {
        uint32_t e = d->table[i];
        if (e == 0)
            return -1;
        if (memcmp(d->ring[e - 1].b, k->b, sizeof k->b) == 0)
            return (long)i;
    }
}

/* Empties table slot i, shifting later entries of the probe run back so
 * that every entry stays reachable from its home (no tombstones). */
static void table_delete(struct gh_dedup *d, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & d->mask;
        uint32_t e = d->table[j];
        if (e == 0)
            break;
        size_t h = home(d, &d->ring[e - 1]);
        /* Entry j may move to i only if its home is not in (i, j]. */
        bool in_between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (in_between)
            continue;
        d->table[i] = e;
        i = j;
    }
    d->table[i] = 0;
}

bool gh_dedup_contains(const struct gh_dedup *d, const struct gh_dedup_key *key)
{
    return find(d, key) >= 0;
}

bool gh_dedup_insert(struct gh_dedup *d, const struct gh_dedup_key *key)
{
    if (find(d, key) >= 0)
        return false;
    size_t slot = d->next;
    d->next = (d->next + 1) % d->capacity;
    if (d->live[slot]) {
        long at = find(d, &d->ring[slot]);
        if (at >= 0)
            table_delete(d, (size_t)at);
        d->live[slot] = 0;
        d->size--;
        d->evicted++;
    }
    d->ring[slot] = *key;
    d->live[slot] = 1;
    d->size++;
    size_t i = home(d, key);
    while (d->table[i] != 0)
        i = (i + 1) & d->mask;
    d->table[i] = (uint32_t)(slot + 1);
    return true;
}

bool gh_dedup_remove(struct gh_dedup *d, const struct gh_dedup_key *key)
{
    long at = find(d, key);
    if (at < 0)
        return false;
    size_t slot = d->table[at] - 1;
    table_delete(d, (size_t)at);
    d->live[slot] = 0;
    d->size--;
    return true;
}

size_t gh_dedup_size(const struct gh_dedup *d)
{
    return d->size;
}

uint64_t gh_dedup_evicted(const struct gh_dedup *d)
{
    return d->evicted;
}
