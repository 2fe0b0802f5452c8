/* timeline.c - dedup, skew bound, reorder buffer and per-entity rings of signals. */
#include "engine/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

#define MAX_GPUS_PER_NODE 1024

/* ---- entries ---------------------------------------------------------- */

/* The timeline keeps a global byte counter in the entry's owner; entries are
 * freed by whoever drops the last reference, so the counter lives in a small
 * shared header the entry points to. The owner also keeps a bounded pool of
 * dead entries for the next pushes (an entry is ~440 bytes: one malloc and
 * one free per signal were about a seventh of the engine's instructions);
 * the pool exists only while the timeline does.
 *
 * The node and job names of entries are shared: sig.node and sig.job point
 * at keys of the owner's name table, counted per entry, instead of one heap
 * copy each per entry (64 bytes of an entry's ~500; a copy saves two
 * mallocs and two frees; a stolen signal's strings are freed at once
 * instead of when the entry dies). NAME_NONE: the entry owns that string
 * itself (the table could not take it). */
#define NAME_NONE UINT32_MAX
enum { NAME_NODE, NAME_JOB };

struct entry {
    struct gh_tl_entry pub;
    union {
        struct owner *owner;     /* live */
        struct entry *next_free; /* dead, in the owner's pool */
    } u;
    uint32_t name_ix[2]; /* NAME_NODE, NAME_JOB: index in owner->names */
};

struct owner {
    size_t bytes;
    uint64_t live;
    uint32_t refs;           /* the timeline itself + live entries */
    bool pooling;            /* false once the timeline is gone */
    struct entry *pool;      /* dead entries, owned */
    size_t n_pool;
    struct gh_strmap *names; /* the shared names */
    uint32_t *name_refs;     /* per names index: entries + hints using it */
    size_t name_cap;
    /* Names come in runs (one node's GPUs, one job's ranks): per field, the
     * last name used, which the hint keeps alive (one reference). */
    long hint[2];
    const char *hint_key[2];
};

/* Dead entries kept for reuse: at most an eighth of the live ones (at least
 * POOL_MIN), so the pool follows the stream's churn and stays small. */
#define POOL_MIN 256

static void pool_drain(struct owner *o)
{
    while (o->pool) {
        struct entry *n = o->pool->u.next_free;
        free(o->pool);
        o->pool = n;
    }
    o->n_pool = 0;
}

static void owner_unref(struct owner *o)
{
    if (o && --o->refs == 0) {
        pool_drain(o);
        gh_strmap_free(o->names);
        free(o->name_refs);
        free(o);
    }
}

static void name_put(struct owner *o, uint32_t i)
{
    if (--o->name_refs[i] == 0)
        gh_strmap_remove(o->names, i);
}

/* name_get's lookup when the hint does not match. */
static const char *name_get_slow(struct owner *o, int field, const char *name, uint32_t *ix)
{
    bool created;
    long i = gh_strmap_intern(o->names, name, &created, NULL);
    if (i < 0)
        return NULL;
    if ((size_t)i >= o->name_cap) {
        size_t ncap = o->name_cap ? o->name_cap * 2 : 64;
        while (ncap <= (size_t)i)
            ncap *= 2;
        uint32_t *nr = realloc(o->name_refs, ncap * sizeof *nr);
        if (!nr) {
            if (created)
                gh_strmap_remove(o->names, (size_t)i);
            return NULL;
        }
        memset(nr + o->name_cap, 0, (ncap - o->name_cap) * sizeof *nr);
        o->name_refs = nr;
        o->name_cap = ncap;
    }
    o->name_refs[i] += 2; /* the caller's and the hint's */
    if (o->hint_key[field])
        name_put(o, (uint32_t)o->hint[field]);
    o->hint[field] = i;
    o->hint_key[field] = gh_strmap_key(o->names, (size_t)i);
    *ix = (uint32_t)i;
    return o->hint_key[field];
}

/* The shared copy of name (borrowed) with one more user, its index in *ix;
 * NULL when the table cannot take it. */
static inline const char *name_get(struct owner *o, int field, const char *name, uint32_t *ix)
{
    if (o->hint_key[field] && strcmp(o->hint_key[field], name) == 0) {
        *ix = (uint32_t)o->hint[field];
        o->name_refs[*ix]++;
        return o->hint_key[field];
    }
    return name_get_slow(o, field, name, ix);
}

/* Frees the signal's owned strings (GH_SIGNAL_STRINGS, signal.h) without
 * re-initialising it: the entry is dead. */
static void sig_free_strings(struct gh_signal *s)
{
#define FREE_SET(f)                                                                      \
    if (s->f)                                                                            \
        free(s->f);
    GH_SIGNAL_STRINGS(FREE_SET)
#undef FREE_SET
}

const struct gh_tl_entry *gh_tl_ref(const struct gh_tl_entry *e)
{
    if (e)
        ((struct gh_tl_entry *)e)->refs++;
    return e;
}

void gh_tl_unref(const struct gh_tl_entry *ce)
{
    if (!ce)
        return;
    struct gh_tl_entry *e = (struct gh_tl_entry *)ce;
    if (--e->refs)
        return;
    struct entry *en = (struct entry *)e;
    struct owner *o = en->u.owner;
    o->bytes -= e->bytes;
    o->live--;
    if (en->name_ix[NAME_NODE] != NAME_NONE) {
        name_put(o, en->name_ix[NAME_NODE]);
        e->sig.node = NULL;
    }
    if (en->name_ix[NAME_JOB] != NAME_NONE) {
        name_put(o, en->name_ix[NAME_JOB]);
        e->sig.job = NULL;
    }
    sig_free_strings(&e->sig);
    if (o->pooling && (o->n_pool < POOL_MIN || o->n_pool < o->live / 8)) {
        en->u.next_free = o->pool;
        o->pool = en;
        o->n_pool++;
        o->refs--; /* the timeline still holds the owner */
        return;
    }
    owner_unref(o);
    free(en);
}

/* ---- rings ------------------------------------------------------------ */

struct ring {
    const struct gh_tl_entry **v;
    uint32_t cap, len, head; /* head = index of the oldest */
};

struct entity {
    struct ring rings[GH_KIND__COUNT];
    struct entity **gpus; /* nodes only: per GPU index */
    uint32_t n_gpus;
    int64_t newest;       /* ts of the newest entry retained here or in a GPU's rings */
};

struct hnode {
    int64_t ts;
    uint64_t seq;
    struct gh_tl_entry *e;
};

struct gh_timeline {
    struct gh_timeline_config cfg;
    struct owner *owner;
    /* reorder buffer: signals that arrive in order (ts not below the
     * previous one's) queue in a FIFO ring; the others go to a binary
     * min-heap on (ts, seq), keys inline so that sifting does not touch the
     * entries. Release takes the smaller head of the two: the same order as
     * one heap, at O(1) for the usual, mostly ordered stream. */
    struct hnode *fifo;
    size_t fifo_head, fifo_len, fifo_cap; /* cap: a power of two */
    struct hnode *heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    const struct gh_tl_entry *last_released; /* held until the next release */
    /* dedup: two generations of open-addressed 64-bit keys (0 = empty),
     * interleaved: slot i of generation g is gen[2 * i + (g ^ cur)], so that
     * the two probes of a key share a cache line (the table is 512 KiB and
     * the keys are random: one miss per signal instead of two) */
    uint64_t *gen;
    size_t gen_count[2], gen_slots;
    unsigned gen_cur; /* which lane is generation 0 (the current one) */
    /* entities */
    struct gh_strmap *nodes, *jobs; /* values: struct entity * */
    const char *last_node, *last_job; /* map-owned keys of the last lookups ... */
    struct entity *last_node_en, *last_job_en; /* ... and their entities */
    const struct gh_tl_entry **scratch;
    size_t scratch_cap;
    struct gh_timeline_stats st;
};

void gh_timeline_config_default(struct gh_timeline_config *c)
{
    memset(c, 0, sizeof *c);
    c->window_ns = 2 * 1000000000LL;
    c->max_ahead_ns = 2 * 1000000000LL;
    c->max_pending = 1 << 20;
    c->dedup_cap = 1 << 14; /* x2 generations: 512 KiB, hot in cache */
    c->max_age_ns = 7LL * 24 * 3600 * 1000000000LL;
    c->max_entities = 65536;
    static const struct {
        enum gh_kind k;
        uint16_t node, gpu, job;
    } keep[] = {
        {GH_KIND_XID, 256, 64, 0},
        {GH_KIND_SXID, 128, 0, 0},
        {GH_KIND_ECC, 64, 32, 0},
        {GH_KIND_ROW_REMAP, 32, 16, 0},
        {GH_KIND_GPU_LOST, 16, 8, 0},
        {GH_KIND_NVLINK, 64, 64, 0},
        {GH_KIND_PCIE, 64, 32, 0},
        {GH_KIND_NIC, 16, 0, 0},
        {GH_KIND_THERMAL, 4, 4, 0},
        {GH_KIND_POWER, 4, 4, 0},
        {GH_KIND_STEP, 0, 2, 0},
        {GH_KIND_CHECKPOINT, 0, 0, 64},
        {GH_KIND_REPLICA_CHECKSUM, 0, 4, 64},
        {GH_KIND_POD_FAILED, 256, 0, 512},
        {GH_KIND_POD_STARTED, 128, 0, 128},
        {GH_KIND_POD_SUCCEEDED, 128, 0, 0},
        {GH_KIND_NODE_NOT_READY, 32, 0, 0},
        {GH_KIND_NODE_READY, 32, 0, 0},
        {GH_KIND_PROBE_RESULT, 64, 16, 0},
        {GH_KIND_NODE_CONDITION, 64, 0, 0},
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        c->keep_node[keep[i].k] = keep[i].node;
        c->keep_gpu[keep[i].k] = keep[i].gpu;
        c->keep_job[keep[i].k] = keep[i].job;
    }
}

struct gh_timeline *gh_timeline_new(const struct gh_timeline_config *cfg)
{
    struct gh_timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    if (cfg)
        tl->cfg = *cfg;
    else
        gh_timeline_config_default(&tl->cfg);
    if (tl->cfg.max_pending == 0)
        tl->cfg.max_pending = 1;
    if (tl->cfg.dedup_cap < 16)
        tl->cfg.dedup_cap = 16;
    size_t slots = 16;
    while (slots < tl->cfg.dedup_cap * 2)
        slots *= 2;
    tl->gen_slots = slots;
    tl->owner = calloc(1, sizeof *tl->owner);
    if (tl->owner) {
        /* held from here, so that gh_timeline_free below frees it */
        tl->owner->refs = 1;
        tl->owner->names = gh_strmap_new((size_t)1 << 30);
    }
    tl->gen = calloc(2 * slots, sizeof(uint64_t));
    tl->nodes = gh_strmap_new(tl->cfg.max_entities);
    tl->jobs = gh_strmap_new(tl->cfg.max_entities);
    if (!tl->owner || !tl->owner->names || !tl->gen || !tl->nodes || !tl->jobs) {
        gh_timeline_free(tl);
        return NULL;
    }
    tl->owner->pooling = true;
    tl->st.watermark_ns = INT64_MIN;
    return tl;
}

static void ring_clear(struct ring *r)
{
    for (uint32_t i = 0; i < r->len; i++)
        gh_tl_unref(r->v[(r->head + i) % r->cap]);
    free(r->v);
    memset(r, 0, sizeof *r);
}

static void entity_free(struct entity *en)
{
    if (!en)
        return;
    for (int k = 0; k < GH_KIND__COUNT; k++)
        ring_clear(&en->rings[k]);
    for (uint32_t g = 0; g < en->n_gpus; g++)
        entity_free(en->gpus[g]);
    free(en->gpus);
    free(en);
}

void gh_timeline_free(struct gh_timeline *tl)
{
    if (!tl)
        return;
    for (size_t i = 0; i < tl->heap_len; i++)
        gh_tl_unref(tl->heap[i].e);
    free(tl->heap);
    for (size_t i = 0; i < tl->fifo_len; i++)
        gh_tl_unref(tl->fifo[(tl->fifo_head + i) & (tl->fifo_cap - 1)].e);
    free(tl->fifo);
    gh_tl_unref(tl->last_released);
    if (tl->nodes)
        for (size_t i = 0; i < gh_strmap_count(tl->nodes); i++)
            entity_free(gh_strmap_value(tl->nodes, i));
    if (tl->jobs)
        for (size_t i = 0; i < gh_strmap_count(tl->jobs); i++)
            entity_free(gh_strmap_value(tl->jobs, i));
    gh_strmap_free(tl->nodes);
    gh_strmap_free(tl->jobs);
    free(tl->gen);
    free(tl->scratch);
    if (tl->owner) {
        /* Entries still referenced elsewhere are freed, not pooled. */
        tl->owner->pooling = false;
        pool_drain(tl->owner);
    }
    owner_unref(tl->owner);
    free(tl);
}

/* ---- dedup ------------------------------------------------------------ */

/* One step of the content hash: xor, multiply by an odd constant, fold the
 * high half down. Each step is a bijection of h for a given v, so two
 * signals that differ in one number never collide; the finaliser below
 * spreads every bit into the low bits the table indexes by. Cheaper than
 * gh_hash_u64 per field (the hash is on the per-signal path). */
static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 32);
}

static uint64_t hash_double(uint64_t h, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return mix(h, u);
}

/* The dedup key: the emitter's id when given (with the node, source and
 * injected flag: the same id from another node, source or an injection is
 * another signal, issue 15 #1), else the signal's content. */
static uint64_t dedup_key(const struct gh_signal *s)
{
    uint64_t h = GH_HASH_INIT;
    if (s->id && *s->id) {
        h = gh_hash_str(h ^ 0x1d, s->id);
        h = gh_hash_str(h, s->node);
        h = mix(h, ((uint64_t)s->injected << 8) | (uint64_t)s->source);
    } else {
        h = mix(h, (uint64_t)s->ts_ns);
        h = mix(h, ((uint64_t)s->kind << 8) | (uint64_t)s->source);
        h = mix(h, (uint64_t)(int64_t)s->gpu);
        h = gh_hash_str(h, s->node);
        h = gh_hash_str(h, s->pci);
        h = gh_hash_str(h, s->msg);
        h = mix(h, (uint64_t)(int64_t)s->code);
        h = mix(h, (uint64_t)s->count);
        h = gh_hash_str(h, s->counter);
        h = gh_hash_str(h, s->device);
        h = mix(h, ((uint64_t)(uint32_t)s->port << 32) | (uint32_t)s->link);
        h = mix(h, ((uint64_t)s->state << 8) | ((uint64_t)s->bits << 4) |
                       ((uint64_t)s->throttled << 3) | ((uint64_t)s->pending << 2) |
                       ((uint64_t)s->failure << 1) | (uint64_t)s->passed);
        h = hash_double(h, s->celsius);
        h = hash_double(h, s->watts);
        h = gh_hash_str(h, s->job);
        h = mix(h, ((uint64_t)(uint32_t)s->rank << 32) | (uint32_t)s->replica);
        h = mix(h, (uint64_t)s->step);
        h = hash_double(h, s->step_ms);
        h = hash_double(h, s->has_loss ? s->loss : -0.0);
        h = gh_hash_str(h, s->value);
        h = gh_hash_str(h, s->path);
        h = gh_hash_str(h, s->pod);
        h = gh_hash_str(h, s->reason);
        h = gh_hash_str(h, s->check);
        h = mix(h, (uint64_t)(int64_t)s->exit_code);
    }
    h = gh_hash_u64(h, 0); /* finaliser */
    return h ? h : 1;
}

static bool gen_has(const struct gh_timeline *tl, unsigned g, uint64_t key)
{
    size_t mask = tl->gen_slots - 1, i = (size_t)key & mask;
    unsigned lane = g ^ tl->gen_cur;
    for (;;) {
        uint64_t v = tl->gen[2 * i + lane];
        if (v == 0)
            return false;
        if (v == key)
            return true;
        i = (i + 1) & mask;
    }
}

/* Records key; returns true when it was already present (a duplicate). When
 * the current generation is half full it becomes the old one and the old one
 * is cleared: memory stays bounded and the horizon is 1-2 generations. */
static bool dedup_seen(struct gh_timeline *tl, uint64_t key)
{
    if (gen_has(tl, 0, key) || gen_has(tl, 1, key))
        return true;
    if (tl->gen_count[0] >= tl->cfg.dedup_cap) {
        /* The old generation's lane becomes the current one, emptied. */
        tl->gen_cur ^= 1;
        tl->gen_count[1] = tl->gen_count[0];
        for (size_t i = 0; i < tl->gen_slots; i++)
            tl->gen[2 * i + tl->gen_cur] = 0;
        tl->gen_count[0] = 0;
    }
    size_t mask = tl->gen_slots - 1, i = (size_t)key & mask;
    while (tl->gen[2 * i + tl->gen_cur])
        i = (i + 1) & mask;
    tl->gen[2 * i + tl->gen_cur] = key;
    tl->gen_count[0]++;
    return false;
}

/* ---- reorder heap ----------------------------------------------------- */

static bool before(const struct hnode *a, const struct hnode *b)
{
    return a->ts < b->ts || (a->ts == b->ts && a->seq < b->seq);
}

/* Queues e in the FIFO when it sorts after the FIFO's tail (or the FIFO is
 * empty), else in the heap. */
static int heap_push(struct gh_timeline *tl, struct gh_tl_entry *e)
{
    struct hnode x = {e->ts_ns, e->seq, e};
    size_t fmask = tl->fifo_cap - 1;
    if (tl->fifo_len == 0 || !before(&x, &tl->fifo[(tl->fifo_head + tl->fifo_len - 1) & fmask])) {
        if (tl->fifo_len == tl->fifo_cap) {
            size_t ncap = tl->fifo_cap ? tl->fifo_cap * 2 : 64;
            struct hnode *nf = malloc(ncap * sizeof *nf);
            if (!nf)
                return GH_ENOMEM;
            for (size_t i = 0; i < tl->fifo_len; i++)
                nf[i] = tl->fifo[(tl->fifo_head + i) & fmask];
            free(tl->fifo);
            tl->fifo = nf;
            tl->fifo_cap = ncap;
            tl->fifo_head = 0;
            fmask = ncap - 1;
        }
        tl->fifo[(tl->fifo_head + tl->fifo_len++) & fmask] = x;
        return GH_OK;
    }
    if (tl->heap_len == tl->heap_cap) {
        size_t ncap = tl->heap_cap ? tl->heap_cap * 2 : 64;
        struct hnode *nh = realloc(tl->heap, ncap * sizeof *nh);
        if (!nh)
            return GH_ENOMEM;
        tl->heap = nh;
        tl->heap_cap = ncap;
    }
    size_t i = tl->heap_len++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&x, &tl->heap[p]))
            break;
        tl->heap[i] = tl->heap[p];
        i = p;
    }
    tl->heap[i] = x;
    return GH_OK;
}

/* The first waiting node in (ts, seq) order: the FIFO's head or the heap's
 * top; NULL when nothing waits. */
static const struct hnode *pending_first(const struct gh_timeline *tl)
{
    const struct hnode *f = tl->fifo_len ? &tl->fifo[tl->fifo_head] : NULL;
    if (!tl->heap_len)
        return f;
    return f && before(f, &tl->heap[0]) ? f : &tl->heap[0];
}

/* Removes and returns the first waiting entry (something must wait). */
static struct gh_tl_entry *heap_pop(struct gh_timeline *tl)
{
    if (tl->fifo_len && (!tl->heap_len || before(&tl->fifo[tl->fifo_head], &tl->heap[0]))) {
        struct gh_tl_entry *e = tl->fifo[tl->fifo_head].e;
        tl->fifo_head = (tl->fifo_head + 1) & (tl->fifo_cap - 1);
        tl->fifo_len--;
        return e;
    }
    struct gh_tl_entry *top = tl->heap[0].e;
    struct hnode last = tl->heap[--tl->heap_len];
    size_t i = 0, n = tl->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&tl->heap[c + 1], &tl->heap[c]))
            c++;
        if (!before(&tl->heap[c], &last))
            break;
        tl->heap[i] = tl->heap[c];
        i = c;
    }
    if (n)
        tl->heap[i] = last;
    return top;
}

/* ---- push ------------------------------------------------------------- */

static size_t strbytes(const char *s) { return s ? strlen(s) + 1 : 0; }

/* Approximate heap bytes of an entry: the struct and the strings that are
 * usually there (an estimate for the memory figures, not an exact count);
 * shared names count in the name table, not here. */
static uint32_t signal_bytes(const struct gh_signal *s, const struct entry *en)
{
    size_t b = sizeof(struct entry) +
               (en->name_ix[NAME_NODE] == NAME_NONE ? strbytes(s->node) : 0) +
               (en->name_ix[NAME_JOB] == NAME_NONE ? strbytes(s->job) : 0) + strbytes(s->msg) +
               (s->pod ? strbytes(s->pod) + strbytes(s->namespace_) + strbytes(s->reason) : 0) +
               (s->counter ? strbytes(s->counter) + strbytes(s->device) : 0) + strbytes(s->value) +
               strbytes(s->path) + strbytes(s->pci) + strbytes(s->id);
    return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

static int push_common(struct gh_timeline *tl, struct gh_signal *s, bool steal,
                       int64_t arrival_ns, struct gh_err *err)
{
    if ((unsigned)s->kind >= GH_KIND__COUNT)
        return gh_err_set(err, GH_EINVAL, "signal kind %d out of range", (int)s->kind);
    tl->st.pushed++;
    if (dedup_seen(tl, dedup_key(s))) {
        tl->st.duplicates++;
        return GH_EAGAIN;
    }
    struct owner *o = tl->owner;
    struct entry *en = o->pool;
    if (en) {
        o->pool = en->u.next_free;
        o->n_pool--;
    } else {
        en = malloc(sizeof *en);
        if (!en)
            return gh_err_set(err, GH_ENOMEM, "timeline: out of memory");
    }
    /* The names first: a copy then copies only the other strings. */
    const char *node = s->node ? name_get(o, NAME_NODE, s->node, &en->name_ix[NAME_NODE]) : NULL;
    const char *job = s->job ? name_get(o, NAME_JOB, s->job, &en->name_ix[NAME_JOB]) : NULL;
    if (!node)
        en->name_ix[NAME_NODE] = NAME_NONE;
    if (!job)
        en->name_ix[NAME_JOB] = NAME_NONE;
    if (steal) {
        en->pub.sig = *s;
        gh_signal_init(s);
        if (node) {
            free(en->pub.sig.node);
            en->pub.sig.node = (char *)node;
        }
        if (job) {
            free(en->pub.sig.job);
            en->pub.sig.job = (char *)job;
        }
    } else {
        struct gh_signal src = *s;
        if (node)
            src.node = NULL;
        if (job)
            src.job = NULL;
        if (gh_signal_copy(&en->pub.sig, &src, err) != GH_OK) {
            if (node)
                name_put(o, en->name_ix[NAME_NODE]);
            if (job)
                name_put(o, en->name_ix[NAME_JOB]);
            free(en);
            return GH_ENOMEM;
        }
        if (node)
            en->pub.sig.node = (char *)node;
        if (job)
            en->pub.sig.job = (char *)job;
    }
    struct gh_tl_entry *e = &en->pub;
    e->late = false;
    e->arrival_ns = arrival_ns;
    e->ts_ns = e->sig.ts_ns;
    if (arrival_ns != INT64_MIN && e->ts_ns > arrival_ns + tl->cfg.max_ahead_ns) {
        e->ts_ns = arrival_ns; /* the source clock runs ahead: trust arrival */
        tl->st.ahead_clamped++;
    }
    e->seq = tl->seq++;
    e->refs = 1; /* the reorder buffer's */
    e->bytes = signal_bytes(&e->sig, en);
    en->u.owner = tl->owner;
    tl->owner->refs++;
    tl->owner->bytes += e->bytes;
    tl->owner->live++;
    if (heap_push(tl, e) != GH_OK) {
        gh_tl_unref(e);
        return gh_err_set(err, GH_ENOMEM, "timeline: out of memory");
    }
    return GH_OK;
}

int gh_timeline_push(struct gh_timeline *tl, const struct gh_signal *s, int64_t arrival_ns,
                     struct gh_err *err)
{
    return push_common(tl, (struct gh_signal *)s, false, arrival_ns, err);
}

int gh_timeline_push_steal(struct gh_timeline *tl, struct gh_signal *s, int64_t arrival_ns,
                           struct gh_err *err)
{
    return push_common(tl, s, true, arrival_ns, err);
}

int64_t gh_timeline_pending_ts(const struct gh_timeline *tl)
{
    const struct hnode *f = pending_first(tl);
    return f ? f->ts : INT64_MAX;
}

size_t gh_timeline_pending(const struct gh_timeline *tl) { return tl->heap_len + tl->fifo_len; }

/* ---- retain ----------------------------------------------------------- */

static struct entity *entity_get(struct gh_timeline *tl, struct gh_strmap *m, const char *name)
{
    /* Signals come in runs from one node or job: remember the last one. */
    const char **last = m == tl->nodes ? &tl->last_node : &tl->last_job;
    struct entity **last_en = m == tl->nodes ? &tl->last_node_en : &tl->last_job_en;
    if (*last && strcmp(*last, name) == 0)
        return *last_en;
    long i = gh_strmap_intern(m, name, NULL, NULL);
    if (i < 0) {
        if (!gh_strmap_full(m)) /* else entities_full */
            tl->st.nomem++;
        return NULL;
    }
    struct entity *en = gh_strmap_value(m, (size_t)i);
    if (!en) {
        en = calloc(1, sizeof *en);
        if (!en) {
            tl->st.nomem++;
            return NULL;
        }
        en->newest = INT64_MIN;
        gh_strmap_set_value(m, (size_t)i, en);
    }
    *last = gh_strmap_key(m, (size_t)i);
    *last_en = en;
    return en;
}

static struct entity *gpu_get(struct gh_timeline *tl, struct entity *node, int gpu)
{
    if (gpu < 0 || gpu >= MAX_GPUS_PER_NODE)
        return NULL;
    if ((uint32_t)gpu >= node->n_gpus) {
        uint32_t n = node->n_gpus ? node->n_gpus : 8;
        while (n <= (uint32_t)gpu)
            n *= 2;
        struct entity **g = realloc(node->gpus, n * sizeof *g);
        if (!g) {
            tl->st.nomem++;
            return NULL;
        }
        memset(g + node->n_gpus, 0, (n - node->n_gpus) * sizeof *g);
        node->gpus = g;
        node->n_gpus = n;
    }
    if (!node->gpus[gpu] && !(node->gpus[gpu] = calloc(1, sizeof **node->gpus)))
        tl->st.nomem++;
    return node->gpus[gpu];
}

static void ring_push(struct gh_timeline *tl, struct ring *r, uint32_t keep,
                      const struct gh_tl_entry *e)
{
    if (keep == 0)
        return;
    /* Age first: entries older than max_age go regardless of count. */
    while (r->len && r->v[r->head]->ts_ns < e->ts_ns - tl->cfg.max_age_ns) {
        gh_tl_unref(r->v[r->head]);
        r->head = (r->head + 1) % r->cap;
        r->len--;
        tl->st.evicted[e->sig.kind]++;
    }
    if (r->len == r->cap && r->cap < keep) {
        uint32_t ncap = r->cap ? r->cap * 2 : 4;
        if (ncap > keep)
            ncap = keep;
        const struct gh_tl_entry **nv = malloc(ncap * sizeof *nv);
        if (!nv)
            tl->st.nomem++; /* the ring stays as it is: the oldest goes early */
        if (nv) {
            for (uint32_t i = 0; i < r->len; i++)
                nv[i] = r->v[(r->head + i) % r->cap];
            free(r->v);
            r->v = nv;
            r->cap = ncap;
            r->head = 0;
        }
    }
    if (r->cap == 0)
        return; /* could not allocate: not retained here */
    if (r->len == r->cap) {
        gh_tl_unref(r->v[r->head]);
        r->head = (r->head + 1) % r->cap;
        r->len--;
        tl->st.evicted[e->sig.kind]++;
    }
    r->v[(r->head + r->len) % r->cap] = gh_tl_ref(e);
    r->len++;
}

static void retain(struct gh_timeline *tl, const struct gh_tl_entry *e)
{
    const struct gh_signal *s = &e->sig;
    enum gh_kind k = s->kind;
    if (s->node && (tl->cfg.keep_node[k] || (s->gpu >= 0 && tl->cfg.keep_gpu[k]))) {
        struct entity *n = entity_get(tl, tl->nodes, s->node);
        if (!n) {
            tl->st.entities_full++;
        } else {
            if (e->ts_ns > n->newest)
                n->newest = e->ts_ns;
            ring_push(tl, &n->rings[k], tl->cfg.keep_node[k], e);
            if (s->gpu >= 0 && tl->cfg.keep_gpu[k]) {
                struct entity *g = gpu_get(tl, n, s->gpu);
                if (g)
                    ring_push(tl, &g->rings[k], tl->cfg.keep_gpu[k], e);
            }
        }
    }
    if (s->job && tl->cfg.keep_job[k]) {
        struct entity *j = entity_get(tl, tl->jobs, s->job);
        if (!j) {
            tl->st.entities_full++;
        } else {
            if (e->ts_ns > j->newest)
                j->newest = e->ts_ns;
            ring_push(tl, &j->rings[k], tl->cfg.keep_job[k], e);
        }
    }
}

const struct gh_tl_entry *gh_timeline_release(struct gh_timeline *tl, int64_t now, bool force)
{
    const struct hnode *first = pending_first(tl);
    if (!first)
        return NULL;
    bool over = tl->heap_len + tl->fifo_len > tl->cfg.max_pending;
    bool ready = now != INT64_MIN && first->ts <= now - tl->cfg.window_ns;
    if (!force && !over && !ready)
        return NULL;
    struct gh_tl_entry *e = heap_pop(tl);
    if (over && !ready && !force)
        tl->st.forced++;
    if (e->ts_ns < tl->st.watermark_ns) {
        e->late = true;
        tl->st.late++;
    } else {
        tl->st.watermark_ns = e->ts_ns;
    }
    tl->st.released++;
    retain(tl, e);
    /* The caller borrows e until the next release: keep the heap's reference
     * until then instead of dropping it now. */
    gh_tl_unref(tl->last_released);
    tl->last_released = e;
    return e;
}

/* ---- query ------------------------------------------------------------ */

int gh_tl_entry_cmp(const void *a, const void *b)
{
    const struct gh_tl_entry *x = *(const struct gh_tl_entry *const *)a;
    const struct gh_tl_entry *y = *(const struct gh_tl_entry *const *)b;
    if (x->ts_ns != y->ts_ns)
        return x->ts_ns < y->ts_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

size_t gh_timeline_query(struct gh_timeline *tl, enum gh_tl_scope scope, const char *name, int gpu,
                         uint32_t kinds, int64_t since, int64_t until, bool newest,
                         const struct gh_tl_entry **out, size_t cap)
{
    if (!name || cap == 0)
        return 0;
    struct gh_strmap *m = scope == GH_TL_JOB ? tl->jobs : tl->nodes;
    long i = gh_strmap_find(m, name);
    if (i < 0)
        return 0;
    struct entity *en = gh_strmap_value(m, (size_t)i);
    if (en && scope == GH_TL_GPU)
        en = gpu >= 0 && (uint32_t)gpu < en->n_gpus ? en->gpus[gpu] : NULL;
    if (!en)
        return 0;
    /* the node's own rings, and with NODE_GPUS its GPUs' too */
    uint32_t n_sub = scope == GH_TL_NODE_GPUS ? en->n_gpus : 0;
    size_t total = 0;
    for (uint32_t g = 0; g <= n_sub; g++) {
        const struct entity *x = g == 0 ? en : en->gpus[g - 1];
        for (int k = 0; x && k < GH_KIND__COUNT; k++)
            if (kinds & GH_KIND_BIT(k))
                total += x->rings[k].len;
    }
    if (total == 0)
        return 0;
    if (total > tl->scratch_cap) {
        const struct gh_tl_entry **ns = realloc(tl->scratch, total * sizeof *ns);
        if (!ns) {
            tl->st.nomem++; /* the asker sees nothing retained */
            return 0;
        }
        tl->scratch = ns;
        tl->scratch_cap = total;
    }
    size_t n = 0;
    for (uint32_t g = 0; g <= n_sub; g++) {
        const struct entity *x = g == 0 ? en : en->gpus[g - 1];
        for (int k = 0; x && k < GH_KIND__COUNT; k++) {
            if (!(kinds & GH_KIND_BIT(k)))
                continue;
            const struct ring *r = &x->rings[k];
            for (uint32_t j = 0; j < r->len; j++) {
                const struct gh_tl_entry *e = r->v[(r->head + j) % r->cap];
                if (e->ts_ns >= since && e->ts_ns <= until)
                    tl->scratch[n++] = e;
            }
        }
    }
    qsort(tl->scratch, n, sizeof *tl->scratch, gh_tl_entry_cmp);
    size_t first = n > cap && newest ? n - cap : 0, count = n - first > cap ? cap : n - first;
    memcpy(out, tl->scratch + first, count * sizeof *out);
    return count;
}

/* ---- forgetting -------------------------------------------------------- */

static void forget_at(struct gh_timeline *tl, struct gh_strmap *m, size_t i)
{
    const char *key = gh_strmap_key(m, i);
    if (key == tl->last_node) {
        tl->last_node = NULL;
        tl->last_node_en = NULL;
    }
    if (key == tl->last_job) {
        tl->last_job = NULL;
        tl->last_job_en = NULL;
    }
    entity_free(gh_strmap_value(m, i));
    gh_strmap_remove(m, i);
}

bool gh_timeline_forget(struct gh_timeline *tl, enum gh_tl_scope scope, const char *name)
{
    struct gh_strmap *m = scope == GH_TL_JOB ? tl->jobs : tl->nodes;
    long i = name ? gh_strmap_find(m, name) : -1;
    if (i < 0)
        return false;
    forget_at(tl, m, (size_t)i);
    return true;
}

size_t gh_timeline_expire(struct gh_timeline *tl, int64_t now)
{
    size_t n = 0;
    if (now == INT64_MIN || now < INT64_MIN + tl->cfg.max_age_ns)
        return 0;
    int64_t horizon = now - tl->cfg.max_age_ns;
    for (int pass = 0; pass < 2; pass++) {
        struct gh_strmap *m = pass ? tl->jobs : tl->nodes;
        for (size_t i = 0; i < gh_strmap_count(m); i++)
            if (gh_strmap_key(m, i) && (!gh_strmap_value(m, i) ||
                                        ((struct entity *)gh_strmap_value(m, i))->newest < horizon)) {
                forget_at(tl, m, i);
                n++;
            }
    }
    return n;
}

void gh_timeline_stats(const struct gh_timeline *tl, struct gh_timeline_stats *out)
{
    *out = tl->st;
    out->entries_live = tl->owner->live;
    out->pooled = tl->owner->n_pool;
    out->pooled_bytes = tl->owner->n_pool * sizeof(struct entry);
    out->names = gh_strmap_live(tl->owner->names);
    out->nodes = gh_strmap_live(tl->nodes);
    out->jobs = gh_strmap_live(tl->jobs);
    size_t b = sizeof *tl + tl->owner->bytes + (tl->heap_cap + tl->fifo_cap) * sizeof(struct hnode) +
               out->pooled_bytes + gh_strmap_memory(tl->owner->names) +
               tl->owner->name_cap * sizeof(uint32_t) +
               2 * tl->gen_slots * sizeof(uint64_t) + gh_strmap_memory(tl->nodes) +
               gh_strmap_memory(tl->jobs) + tl->scratch_cap * sizeof(void *);
    for (int pass = 0; pass < 2; pass++) {
        struct gh_strmap *m = pass ? tl->jobs : tl->nodes;
        for (size_t i = 0; i < gh_strmap_count(m); i++) {
            const struct entity *en = gh_strmap_value(m, i);
            if (!en)
                continue;
            b += sizeof *en + en->n_gpus * sizeof(void *);
            for (int k = 0; k < GH_KIND__COUNT; k++)
                b += en->rings[k].cap * sizeof(void *);
            for (uint32_t g = 0; g < en->n_gpus; g++)
                if (en->gpus[g]) {
                    b += sizeof *en->gpus[g];
                    for (int k = 0; k < GH_KIND__COUNT; k++)
                        b += en->gpus[g]->rings[k].cap * sizeof(void *);
                }
        }
    }
    out->bytes = b;
}
