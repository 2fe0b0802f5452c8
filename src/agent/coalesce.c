/* coalesce.c - per-key, per-window coalescing of event signals in a fixed
 * table: first sample passes, the rest are counted, the last is summarised. */
#include "agent/coalesce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    uint64_t h1, h2;
    int64_t start;        /* window start */
    uint64_t held;        /* samples held in this window */
    bool has_last;
    size_t act_pos;       /* index in act[] */
    struct gh_signal last;
};

struct gh_coalesce {
    size_t max_keys, msg_max;
    int64_t window_ns;
    struct entry *pool;
    uint32_t *freelist;   /* free pool indices (a stack) */
    size_t nfree;
    uint32_t *act;        /* pool indices with an open window */
    size_t nact;
    uint32_t *table;      /* pool index + 1; 0 = empty */
    size_t mask;
    struct gh_coalesce_stats st;
};

static bool coalesced_kind(enum gh_kind k)
{
    switch (k) {
    case GH_KIND_XID:
    case GH_KIND_SXID:
    case GH_KIND_GPU_LOST:
    case GH_KIND_PCIE:
    case GH_KIND_NVLINK:
    case GH_KIND_NIC:
        return true;
    default:
        return false;
    }
}

/* Two independent 64-bit hashes over the key's fields. */
struct hasher {
    uint64_t a, b;
};

static void h_bytes(struct hasher *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
        h->b = (h->b ^ p[i]) * 0x9e3779b97f4a7c15ull;
        h->b ^= h->b >> 29;
    }
}

static void h_str(struct hasher *h, const char *s)
{
    static const unsigned char absent = 0xff; /* distinct from "" */
    if (s)
        h_bytes(h, s, strlen(s) + 1);
    else
        h_bytes(h, &absent, 1);
}

static void h_int(struct hasher *h, int64_t v)
{
    h_bytes(h, &v, sizeof v);
}

static void key_of(const struct gh_signal *s, uint64_t *h1, uint64_t *h2)
{
    struct hasher h = {0xcbf29ce484222325ull, 0x243f6a8885a308d3ull};
    h_int(&h, s->kind);
    h_int(&h, s->gpu);
    h_str(&h, s->node);
    h_str(&h, s->pci);
    switch (s->kind) {
    case GH_KIND_XID:
        h_int(&h, s->code);
        break;
    case GH_KIND_SXID:
        h_int(&h, s->code);
        h_str(&h, s->switch_id);
        break;
    case GH_KIND_PCIE:
    case GH_KIND_NVLINK:
    case GH_KIND_NIC:
        h_str(&h, s->counter);
        h_int(&h, s->has_link ? s->link : -1);
        h_str(&h, s->device);
        h_int(&h, s->has_port ? s->port : -1);
        break;
    default:
        break;
    }
    /* Final mix so that the low bits index well. */
    h.a ^= h.a >> 33;
    h.a *= 0xff51afd7ed558ccdull;
    h.a ^= h.a >> 33;
    *h1 = h.a;
    *h2 = h.b;
}

struct gh_coalesce *gh_coalesce_new(const struct gh_coalesce_opts *opts)
{
    struct gh_coalesce *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_keys = opts && opts->max_keys ? opts->max_keys : 1024;
    c->window_ns = opts && opts->window_ns ? opts->window_ns : GH_NS_PER_S;
    c->msg_max = opts && opts->msg_max ? opts->msg_max : 1024;
    if (c->max_keys > (1u << 24)) {
        free(c);
        return NULL;
    }
    size_t tsize = 2;
    while (tsize < 2 * c->max_keys)
        tsize <<= 1;
    c->mask = tsize - 1;
    c->pool = calloc(c->max_keys, sizeof *c->pool);
    c->freelist = calloc(c->max_keys, sizeof *c->freelist);
    c->act = calloc(c->max_keys, sizeof *c->act);
    c->table = calloc(tsize, sizeof *c->table);
    if (!c->pool || !c->freelist || !c->act || !c->table) {
        gh_coalesce_free(c);
        return NULL;
    }
    for (size_t i = 0; i < c->max_keys; i++)
        c->freelist[i] = (uint32_t)(c->max_keys - 1 - i);
    c->nfree = c->max_keys;
    return c;
}

void gh_coalesce_free(struct gh_coalesce *c)
{
    if (!c)
        return;
    if (c->pool && c->act)
        for (size_t i = 0; i < c->nact; i++)
            gh_signal_clear(&c->pool[c->act[i]].last);
    free(c->pool);
    free(c->freelist);
    free(c->act);
    free(c->table);
    free(c);
}

static long find(const struct gh_coalesce *c, uint64_t h1, uint64_t h2)
{
    for (size_t i = (size_t)h1 & c->mask;; i = (i + 1) & c->mask) {
        uint32_t e = c->table[i];
        if (e == 0)
            return -1;
        const struct entry *en = &c->pool[e - 1];
        if (en->h1 == h1 && en->h2 == h2)
            return (long)i;
    }
}

static void table_delete(struct gh_coalesce *c, size_t i)
{
    size_t j = i;
    for (;;) {
        j = (j + 1) & c->mask;
        uint32_t e = c->table[j];
        if (e == 0)
            break;
        size_t h = (size_t)c->pool[e - 1].h1 & c->mask;
        bool in_between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (in_between)
            continue;
        c->table[i] = e;
        i = j;
    }
    c->table[i] = 0;
}

/* Emits e's summary if it held samples, then forgets e (table slot at). */
static void close_window(struct gh_coalesce *c, size_t at, gh_coalesce_emit_fn emit, void *ctx)
{
    uint32_t idx = c->table[at] - 1;
    struct entry *e = &c->pool[idx];
    if (e->held > 0 && e->has_last) {
        char note[48];
        struct gh_signal *s = &e->last;
        snprintf(note, sizeof note, "coalesced %llu", (unsigned long long)e->held);
        size_t ml = s->msg ? strlen(s->msg) : 0;
        char *m = malloc(ml + strlen(note) + 4);
        if (m) {
            if (ml)
                snprintf(m, ml + strlen(note) + 4, "%s [%s]", s->msg, note);
            else
                snprintf(m, strlen(note) + 1, "%s", note);
            free(s->msg);
            s->msg = m;
        }
        c->st.summaries++;
        emit(ctx, s);
    }
    gh_signal_clear(&e->last);
    e->has_last = false;
    table_delete(c, at);
    /* swap-remove from act[] */
    size_t pos = e->act_pos;
    uint32_t moved = c->act[--c->nact];
    c->act[pos] = moved;
    c->pool[moved].act_pos = pos;
    c->freelist[c->nfree++] = idx;
}

static void keep_copy(struct gh_coalesce *c, struct entry *e, const struct gh_signal *sig)
{
    struct gh_signal copy;
    if (gh_signal_copy(&copy, sig, NULL) != GH_OK)
        return;
    if (copy.msg && strlen(copy.msg) > c->msg_max &&
        gh_signal_set_str(&copy.msg, sig->msg, c->msg_max) != 0) {
        gh_signal_clear(&copy);
        return;
    }
    gh_signal_clear(&e->last);
    e->last = copy;
    e->has_last = true;
}

enum gh_coalesce_verdict gh_coalesce_offer(struct gh_coalesce *c, const struct gh_signal *sig,
                                           int64_t now_ns, gh_coalesce_emit_fn emit, void *ctx)
{
    c->st.offered++;
    if (!coalesced_kind(sig->kind)) {
        c->st.passed++;
        return GH_COALESCE_PASS;
    }
    uint64_t h1, h2;
    key_of(sig, &h1, &h2);
    long at = find(c, h1, h2);
    if (at >= 0) {
        struct entry *e = &c->pool[c->table[at] - 1];
        if (now_ns - e->start < c->window_ns) {
            e->held++;
            c->st.held++;
            keep_copy(c, e, sig);
            return GH_COALESCE_HELD;
        }
        close_window(c, (size_t)at, emit, ctx);
    }
    if (c->nfree == 0) {
        c->st.overflow++;
        return GH_COALESCE_OVERFLOW;
    }
    uint32_t idx = c->freelist[--c->nfree];
    struct entry *e = &c->pool[idx];
    e->h1 = h1;
    e->h2 = h2;
    e->start = now_ns;
    e->held = 0;
    e->has_last = false;
    gh_signal_init(&e->last);
    e->act_pos = c->nact;
    c->act[c->nact++] = idx;
    size_t i = (size_t)h1 & c->mask;
    while (c->table[i] != 0)
        i = (i + 1) & c->mask;
    c->table[i] = idx + 1;
    c->st.first++;
    return GH_COALESCE_FIRST;
}

void gh_coalesce_flush(struct gh_coalesce *c, int64_t now_ns, bool all, gh_coalesce_emit_fn emit,
                       void *ctx)
{
    size_t i = c->nact;
    while (i-- > 0) {
        struct entry *e = &c->pool[c->act[i]];
        if (!all && now_ns - e->start < c->window_ns)
            continue;
        long at = find(c, e->h1, e->h2);
        if (at >= 0)
            close_window(c, (size_t)at, emit, ctx);
    }
}

int64_t gh_coalesce_next_deadline(const struct gh_coalesce *c)
{
    int64_t best = INT64_MAX;
    for (size_t i = 0; i < c->nact; i++) {
        const struct entry *e = &c->pool[c->act[i]];
        if (e->start + c->window_ns < best)
            best = e->start + c->window_ns;
    }
    return best;
}

void gh_coalesce_stats(const struct gh_coalesce *c, struct gh_coalesce_stats *out)
{
    *out = c->st;
    out->keys = c->nact;
}
