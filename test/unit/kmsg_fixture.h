/* kmsg_fixture.h - what the kernel-log parser's unit tests (test_kmsg.c,
 * test_kmsg_corpus.c) share: a clock fixed at *ctx, and a growing array of
 * the signals a parser emitted, each with the parser's metadata for it.
 * Header-only (static inline): each test binary includes it once, after
 * <cmocka.h>. */
#ifndef TEST_KMSG_FIXTURE_H
#define TEST_KMSG_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include "signal/kmsg.h"
#include "signal/signal.h"

static inline int64_t clock_fixed(void *ctx)
{
    return *(const int64_t *)ctx;
}

/* One emitted signal (owned copy) and the parser's metadata for it. */
struct rec {
    struct gh_signal sig;
    struct gh_kmsg_meta meta;
};

/* Appends a copy of s, with p's metadata, to *v (n used of cap; grown). */
static inline void rec_push(struct rec **v, size_t *n, size_t *cap, const struct gh_signal *s,
                            const struct gh_kmsg_parser *p)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct rec *nv = realloc(*v, c * sizeof *nv);
        assert_non_null(nv);
        *v = nv, *cap = c;
    }
    struct rec *r = &(*v)[(*n)++];
    gh_signal_init(&r->sig);
    assert_int_equal(gh_signal_copy(&r->sig, s, NULL), GH_OK);
    const struct gh_kmsg_meta *m = gh_kmsg_parser_meta(p);
    assert_non_null(m);
    r->meta = *m;
}

/* Frees the n records of v and v itself. */
static inline void rec_free_all(struct rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gh_signal_clear(&v[i].sig);
    free(v);
}

#endif
