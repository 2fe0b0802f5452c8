/* evq.h - the simulator's event queue: a binary min-heap ordered by (time,
 * insertion sequence), so that events at equal times run in the order they
 * were scheduled and a run is reproducible. Bounded by a capacity given at
 * creation. */
#ifndef GH_SIM_EVQ_H
#define GH_SIM_EVQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A small value; the meaning of type/sub/a/b/gen/x is the caller's. */
struct gh_ev {
    double t;
    uint64_t seq; /* set by push */
    uint32_t gen;
    int32_t a, b;
    uint8_t type, sub;
    float x;
};

struct gh_evq;

/* NULL on OOM. max: the most events held at once. Caller frees with gh_evq_free. */
struct gh_evq *gh_evq_new(size_t max);
void gh_evq_free(struct gh_evq *q);
/* GH_OK, GH_ELIMIT (full) or GH_ENOMEM. e is copied. */
int gh_evq_push(struct gh_evq *q, const struct gh_ev *e);
/* Removes the earliest event into *out; false when empty. */
bool gh_evq_pop(struct gh_evq *q, struct gh_ev *out);
size_t gh_evq_len(const struct gh_evq *q);

#endif
