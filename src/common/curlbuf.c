/* curlbuf.c - a reply body kept in memory up to a cap (see curlbuf.h). The
 * buffer starts at 16 KiB and doubles, never past max + 1 (the NUL). */
#include "common/curlbuf.h"

#include <stdlib.h>
#include <string.h>

size_t gh_curlbuf_append(struct gh_curlbuf *b, const char *data, size_t n)
{
    if (b->len + n > b->max) {
        b->over = true;
        return b->drop_excess ? n : 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 16384;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        if (ncap > b->max + 1)
            ncap = b->max + 1;
        char *nb = realloc(b->p, ncap);
        if (!nb) {
            b->nomem = true;
            return 0;
        }
        b->p = nb;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

size_t gh_curlbuf_write(char *data, size_t size, size_t nmemb, void *ud)
{
    return gh_curlbuf_append(ud, data, size * nmemb);
}
