/* curlbuf.h - the one capped reply-body buffer behind curl's write callback
 * (CURLOPT_WRITEFUNCTION gh_curlbuf_write, CURLOPT_WRITEDATA a struct
 * gh_curlbuf). Every HTTP reply gpuheal reads into memory is bounded here:
 * the Kubernetes client's, the agent publisher's, `gpuheal inject`'s.
 *
 * It does not include curl's header (the callback's signature is plain C),
 * so common/ builds and links where libcurl is not. */
#ifndef GH_COMMON_CURLBUF_H
#define GH_COMMON_CURLBUF_H

#include <stdbool.h>
#include <stddef.h>

/* A small value type: zero it, set max (and drop_excess), hand it to curl,
 * then take p or free it. */
struct gh_curlbuf {
    char *p;          /* owned; NUL-terminated (not counted in len) once non-NULL; caller frees */
    size_t len;       /* bytes kept */
    size_t cap;       /* bytes allocated (at most max + 1) */
    size_t max;       /* the most bytes kept */
    bool drop_excess; /* a chunk that does not fit is dropped and the transfer goes on
                         (true), or the transfer is aborted (false) */
    bool over;        /* a chunk did not fit under max */
    bool nomem;       /* an allocation failed (the transfer is aborted) */
};

/* Appends data[0..n) (borrowed). Returns n when kept or dropped under
 * drop_excess, 0 to abort the transfer (over max without drop_excess, or out
 * of memory; over or nomem says which). */
size_t gh_curlbuf_append(struct gh_curlbuf *b, const char *data, size_t n);

/* curl's write callback over gh_curlbuf_append (ud: the struct gh_curlbuf). */
size_t gh_curlbuf_write(char *data, size_t size, size_t nmemb, void *ud);

#endif
