/* evq.c - a binary min-heap of simulator events keyed by (time, sequence). */
#include "sim/evq.h"

#include <stdlib.h>

#include "common/err.h"

struct gh_evq {
    struct gh_ev *v;
    size_t n, cap, max;
    uint64_t seq;
};

struct gh_evq *gh_evq_new(size_t max)
{
    struct gh_evq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->max = max ? max : 1;
    q->cap = q->max < 1024 ? q->max : 1024;
    q->v = malloc(q->cap * sizeof *q->v);
    if (!q->v) {
        free(q);
        return NULL;
    }
    return q;
}

void gh_evq_free(struct gh_evq *q)
{
    if (!q)
        return;
    free(q->v);
    free(q);
}

static bool before(const struct gh_ev *a, const struct gh_ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int gh_evq_push(struct gh_evq *q, const struct gh_ev *e)
{
    if (q->n == q->cap) {
        if (q->cap >= q->max)
            return GH_ELIMIT;
        size_t ncap = q->cap * 2 < q->max ? q->cap * 2 : q->max;
        struct gh_ev *nv = realloc(q->v, ncap * sizeof *nv);
        if (!nv)
            return GH_ENOMEM;
        q->v = nv;
        q->cap = ncap;
    }
    struct gh_ev x = *e;
    x.seq = q->seq++;
    size_t i = q->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&x, &q->v[p]))
            break;
        q->v[i] = q->v[p];
        i = p;
    }
    q->v[i] = x;
    return GH_OK;
}

bool gh_evq_pop(struct gh_evq *q, struct gh_ev *out)
{
    if (q->n == 0)
        return false;
    *out = q->v[0];
    struct gh_ev last = q->v[--q->n];
    size_t i = 0, n = q->n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct gh_ev *best = &last;
        if (l < n && before(&q->v[l], best)) {
            m = l;
            best = &q->v[l];
        }
        if (r < n && before(&q->v[r], best))
            m = r;
        if (m == i)
            break;
        q->v[i] = q->v[m];
        i = m;
    }
    if (n)
        q->v[i] = last;
    return true;
}

size_t gh_evq_len(const struct gh_evq *q) { return q->n; }
