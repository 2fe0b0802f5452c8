/* sigqueue.c - the bounded thread-safe signal FIFO with an eventfd that is
 * readable exactly while the queue is non-empty. */
#include "signal/sigqueue.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct gh_sigqueue {
    pthread_mutex_t mu;
    int efd;
    size_t cap, head, len; /* ring: items[head .. head+len) mod cap */
    uint64_t pushed, refused;
    struct gh_signal *items;
};

struct gh_sigqueue *gh_sigqueue_new(size_t capacity)
{
    if (capacity < 1)
        return NULL;
    struct gh_sigqueue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->items = calloc(capacity, sizeof *q->items);
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!q->items || q->efd < 0) {
        if (q->efd >= 0)
            close(q->efd);
        free(q->items);
        free(q);
        return NULL;
    }
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    return q;
}

void gh_sigqueue_free(struct gh_sigqueue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->len; i++)
        gh_signal_clear(&q->items[(q->head + i) % q->cap]);
    close(q->efd);
    pthread_mutex_destroy(&q->mu);
    free(q->items);
    free(q);
}

int gh_sigqueue_fd(const struct gh_sigqueue *q) { return q->efd; }

/* Called with the lock held after items were added to an empty queue. */
static void raise_fd(struct gh_sigqueue *q)
{
    uint64_t one = 1;
    ssize_t w;
    do
        w = write(q->efd, &one, sizeof one);
    while (w < 0 && errno == EINTR);
    /* EAGAIN means the counter is already huge: it is readable anyway. */
}

int gh_sigqueue_push(struct gh_sigqueue *q, struct gh_signal *sigs, size_t n)
{
    if (n == 0)
        return GH_OK;
    pthread_mutex_lock(&q->mu);
    if (q->cap - q->len < n) {
        q->refused += n;
        pthread_mutex_unlock(&q->mu);
        return GH_EAGAIN;
    }
    bool was_empty = q->len == 0;
    for (size_t i = 0; i < n; i++) {
        q->items[(q->head + q->len) % q->cap] = sigs[i];
        q->len++;
        gh_signal_init(&sigs[i]);
    }
    q->pushed += n;
    if (was_empty)
        raise_fd(q);
    pthread_mutex_unlock(&q->mu);
    return GH_OK;
}

int gh_sigqueue_push_copy(struct gh_sigqueue *q, const struct gh_signal *sig)
{
    struct gh_signal copy;
    if (gh_signal_copy(&copy, sig, NULL) != GH_OK)
        return GH_ENOMEM;
    int rc = gh_sigqueue_push(q, &copy, 1);
    if (rc)
        gh_signal_clear(&copy);
    return rc;
}

size_t gh_sigqueue_pop(struct gh_sigqueue *q, struct gh_signal *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&q->mu);
    while (n < max && q->len > 0) {
        out[n++] = q->items[q->head];
        gh_signal_init(&q->items[q->head]);
        q->head = (q->head + 1) % q->cap;
        q->len--;
    }
    if (q->len == 0) {
        uint64_t v;
        ssize_t r;
        do
            r = read(q->efd, &v, sizeof v);
        while (r < 0 && errno == EINTR);
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

void gh_sigqueue_stats(struct gh_sigqueue *q, struct gh_sigqueue_stats *out)
{
    pthread_mutex_lock(&q->mu);
    out->depth = q->len;
    out->capacity = q->cap;
    out->pushed = q->pushed;
    out->refused = q->refused;
    pthread_mutex_unlock(&q->mu);
}
