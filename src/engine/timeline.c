/* timeline.c - dedup, skew bound, reorder buffer and per-entity rings of signals. */
#include "engine/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "engine/strmap.h"

#define MAX_GPUS_PER_NODE 1024

/* ---- entries ---------------------------------------------------------- */

/* The timeline keeps a global byte counter in the entry's owner; entries are
 * freed by whoever drops the last reference, so the counter lives in a small
 * shared header the entry points to. */
struct owner {
    size_t bytes;
    uint64_t live;
    uint32_t refs; /* the timeline itself + live entries */
};

struct entry {
    struct gh_tl_entry pub;
    struct owner *owner;
};

static void owner_unref(struct owner *o)
{
    if (o && --o->refs == 0)
        free(o);
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
    en->owner->bytes -= e->bytes;
    en->owner->live--;
    gh_signal_clear(&e->sig);
    owner_unref(en->owner);
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
    /* reorder buffer: binary min-heap on (ts, seq), keys inline so that
     * sifting does not touch the entries */
    struct hnode *heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    const struct gh_tl_entry *last_released; /* held until the next release */
    /* dedup: two generations of open-addressed 64-bit keys (0 = empty) */
    uint64_t *gen[2];
    size_t gen_count[2], gen_slots;
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
        {GH_KIND_XID, 256, 64, 0},          {GH_KIND_SXID, 128, 0, 0},
        {GH_KIND_ECC, 64, 32, 0},           {GH_KIND_ROW_REMAP, 32, 16, 0},
        {GH_KIND_GPU_LOST, 16, 8, 0},       {GH_KIND_NVLINK, 64, 64, 0},
        {GH_KIND_PCIE, 64, 32, 0},          {GH_KIND_NIC, 16, 0, 0},
        {GH_KIND_THERMAL, 4, 4, 0},         {GH_KIND_POWER, 4, 4, 0},
        {GH_KIND_STEP, 0, 2, 0},            {GH_KIND_CHECKPOINT, 0, 0, 64},
        {GH_KIND_REPLICA_CHECKSUM, 0, 4, 64}, {GH_KIND_POD_FAILED, 256, 0, 512},
        {GH_KIND_POD_STARTED, 128, 0, 128}, {GH_KIND_NODE_NOT_READY, 32, 0, 0},
        {GH_KIND_NODE_READY, 32, 0, 0},     {GH_KIND_PROBE_RESULT, 64, 16, 0},
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
    tl->gen[0] = calloc(slots, sizeof(uint64_t));
    tl->gen[1] = calloc(slots, sizeof(uint64_t));
    tl->nodes = gh_strmap_new(tl->cfg.max_entities);
    tl->jobs = gh_strmap_new(tl->cfg.max_entities);
    if (!tl->owner || !tl->gen[0] || !tl->gen[1] || !tl->nodes || !tl->jobs) {
        gh_timeline_free(tl);
        return NULL;
    }
    tl->owner->refs = 1;
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
    gh_tl_unref(tl->last_released);
    if (tl->nodes)
        for (size_t i = 0; i < gh_strmap_count(tl->nodes); i++)
            entity_free(gh_strmap_value(tl->nodes, i));
    if (tl->jobs)
        for (size_t i = 0; i < gh_strmap_count(tl->jobs); i++)
            entity_free(gh_strmap_value(tl->jobs, i));
    gh_strmap_free(tl->nodes);
    gh_strmap_free(tl->jobs);
    free(tl->gen[0]);
    free(tl->gen[1]);
    free(tl->scratch);
    owner_unref(tl->owner);
    free(tl);
}

/* ---- dedup ------------------------------------------------------------ */

static uint64_t hash_double(uint64_t h, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return gh_hash_u64(h, u);
}

/* The dedup key: the emitter's id when given, else the signal's content. */
static uint64_t dedup_key(const struct gh_signal *s)
{
    uint64_t h = GH_HASH_INIT;
    if (s->id && *s->id) {
        h = gh_hash_str(h ^ 0x1d, s->id);
    } else {
        h = gh_hash_u64(h, (uint64_t)s->ts_ns);
        h = gh_hash_u64(h, ((uint64_t)s->kind << 8) | (uint64_t)s->source);
        h = gh_hash_u64(h, (uint64_t)(int64_t)s->gpu);
        h = gh_hash_str(h, s->node);
        h = gh_hash_str(h, s->pci);
        h = gh_hash_str(h, s->msg);
        h = gh_hash_u64(h, (uint64_t)(int64_t)s->code);
        h = gh_hash_u64(h, (uint64_t)s->count);
        h = gh_hash_str(h, s->counter);
        h = gh_hash_str(h, s->device);
        h = gh_hash_u64(h, ((uint64_t)(uint32_t)s->port << 32) | (uint32_t)s->link);
        h = gh_hash_u64(h, ((uint64_t)s->state << 8) | ((uint64_t)s->bits << 4) |
                               ((uint64_t)s->throttled << 3) | ((uint64_t)s->pending << 2) |
                               ((uint64_t)s->failure << 1) | (uint64_t)s->passed);
        h = hash_double(h, s->celsius);
        h = hash_double(h, s->watts);
        h = gh_hash_str(h, s->job);
        h = gh_hash_u64(h, ((uint64_t)(uint32_t)s->rank << 32) | (uint32_t)s->replica);
        h = gh_hash_u64(h, (uint64_t)s->step);
        h = hash_double(h, s->step_ms);
        h = hash_double(h, s->has_loss ? s->loss : -0.0);
        h = gh_hash_str(h, s->value);
        h = gh_hash_str(h, s->path);
        h = gh_hash_str(h, s->pod);
        h = gh_hash_str(h, s->reason);
        h = gh_hash_str(h, s->check);
        h = gh_hash_u64(h, (uint64_t)(int64_t)s->exit_code);
    }
    return h ? h : 1;
}

static bool gen_has(const struct gh_timeline *tl, int g, uint64_t key)
{
    size_t mask = tl->gen_slots - 1, i = (size_t)key & mask;
    for (;;) {
        uint64_t v = tl->gen[g][i];
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
        uint64_t *t = tl->gen[1];
        tl->gen[1] = tl->gen[0];
        tl->gen_count[1] = tl->gen_count[0];
        memset(t, 0, tl->gen_slots * sizeof *t);
        tl->gen[0] = t;
        tl->gen_count[0] = 0;
    }
    size_t mask = tl->gen_slots - 1, i = (size_t)key & mask;
    while (tl->gen[0][i])
        i = (i + 1) & mask;
    tl->gen[0][i] = key;
    tl->gen_count[0]++;
    return false;
}

/* ---- reorder heap ----------------------------------------------------- */

static bool before(const struct hnode *a, const struct hnode *b)
{
    return a->ts < b->ts || (a->ts == b->ts && a->seq < b->seq);
}

static int heap_push(struct gh_timeline *tl, struct gh_tl_entry *e)
{
    if (tl->heap_len == tl->heap_cap) {
        size_t ncap = tl->heap_cap ? tl->heap_cap * 2 : 64;
        struct hnode *nh = realloc(tl->heap, ncap * sizeof *nh);
        if (!nh)
            return GH_ENOMEM;
        tl->heap = nh;
        tl->heap_cap = ncap;
    }
    struct hnode x = {e->ts_ns, e->seq, e};
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

static struct gh_tl_entry *heap_pop(struct gh_timeline *tl)
{
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
 * usually there (an estimate for the memory figures, not an exact count). */
static uint32_t signal_bytes(const struct gh_signal *s)
{
    size_t b = sizeof(struct entry) + strbytes(s->node) + strbytes(s->job) + strbytes(s->msg) +
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
    struct entry *en = calloc(1, sizeof *en);
    if (!en)
        return gh_err_set(err, GH_ENOMEM, "timeline: out of memory");
    if (steal) {
        en->pub.sig = *s;
        gh_signal_init(s);
    } else if (gh_signal_copy(&en->pub.sig, s, err) != GH_OK) {
        free(en);
        return GH_ENOMEM;
    }
    struct gh_tl_entry *e = &en->pub;
    e->arrival_ns = arrival_ns;
    e->ts_ns = e->sig.ts_ns;
    if (arrival_ns != INT64_MIN && e->ts_ns > arrival_ns + tl->cfg.max_ahead_ns) {
        e->ts_ns = arrival_ns; /* the source clock runs ahead: trust arrival */
        tl->st.ahead_clamped++;
    }
    e->seq = tl->seq++;
    e->refs = 1; /* the reorder buffer's */
    e->bytes = signal_bytes(&e->sig);
    en->owner = tl->owner;
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
    return tl->heap_len ? tl->heap[0].ts : INT64_MAX;
}

size_t gh_timeline_pending(const struct gh_timeline *tl) { return tl->heap_len; }

/* ---- retain ----------------------------------------------------------- */

static struct entity *entity_get(struct gh_timeline *tl, struct gh_strmap *m, const char *name)
{
    /* Signals come in runs from one node or job: remember the last one. */
    const char **last = m == tl->nodes ? &tl->last_node : &tl->last_job;
    struct entity **last_en = m == tl->nodes ? &tl->last_node_en : &tl->last_job_en;
    if (*last && strcmp(*last, name) == 0)
        return *last_en;
    long i = gh_strmap_intern(m, name, NULL, NULL);
    if (i < 0)
        return NULL;
    struct entity *en = gh_strmap_value(m, (size_t)i);
    if (!en) {
        en = calloc(1, sizeof *en);
        if (!en)
            return NULL;
        en->newest = INT64_MIN;
        gh_strmap_set_value(m, (size_t)i, en);
    }
    *last = gh_strmap_key(m, (size_t)i);
    *last_en = en;
    return en;
}

static struct entity *gpu_get(struct entity *node, int gpu)
{
    if (gpu < 0 || gpu >= MAX_GPUS_PER_NODE)
        return NULL;
    if ((uint32_t)gpu >= node->n_gpus) {
        uint32_t n = node->n_gpus ? node->n_gpus : 8;
        while (n <= (uint32_t)gpu)
            n *= 2;
        struct entity **g = realloc(node->gpus, n * sizeof *g);
        if (!g)
            return NULL;
        memset(g + node->n_gpus, 0, (n - node->n_gpus) * sizeof *g);
        node->gpus = g;
        node->n_gpus = n;
    }
    if (!node->gpus[gpu])
        node->gpus[gpu] = calloc(1, sizeof **node->gpus);
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
                struct entity *g = gpu_get(n, s->gpu);
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
    if (!tl->heap_len)
        return NULL;
    bool over = tl->heap_len > tl->cfg.max_pending;
    bool ready = now != INT64_MIN && tl->heap[0].ts <= now - tl->cfg.window_ns;
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

static int cmp_entries(const void *a, const void *b)
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
    size_t total = 0;
    for (int k = 0; k < GH_KIND__COUNT; k++)
        if (kinds & GH_KIND_BIT(k))
            total += en->rings[k].len;
    if (total == 0)
        return 0;
    if (total > tl->scratch_cap) {
        const struct gh_tl_entry **ns = realloc(tl->scratch, total * sizeof *ns);
        if (!ns)
            return 0;
        tl->scratch = ns;
        tl->scratch_cap = total;
    }
    size_t n = 0;
    for (int k = 0; k < GH_KIND__COUNT; k++) {
        if (!(kinds & GH_KIND_BIT(k)))
            continue;
        const struct ring *r = &en->rings[k];
        for (uint32_t j = 0; j < r->len; j++) {
            const struct gh_tl_entry *e = r->v[(r->head + j) % r->cap];
            if (e->ts_ns >= since && e->ts_ns <= until)
                tl->scratch[n++] = e;
        }
    }
    qsort(tl->scratch, n, sizeof *tl->scratch, cmp_entries);
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
    out->nodes = gh_strmap_live(tl->nodes);
    out->jobs = gh_strmap_live(tl->jobs);
    size_t b = sizeof *tl + tl->owner->bytes + tl->heap_cap * sizeof(struct hnode) +
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
