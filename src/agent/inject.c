/* inject.c - the agent's injection source: reads spec signals (JSON lines)
 * from a file or FIFO without blocking, fills a missing node, marks each
 * signal injected and emits it; bad lines are reported with their numbers. */
#include "agent/inject.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "signal/signal_json.h"

#define RBUF_SIZE (64 * 1024)
#define POLL_BUDGET (4 * 1024 * 1024)

struct gh_inject {
    char *path, *node;
    bool follow, is_fifo;
    gh_inject_emit_fn emit;
    void *emit_ctx;
    gh_inject_reject_fn on_reject;
    void *reject_ctx;

    int fd;
    char *rbuf;
    char *line;             /* partial line, GH_SIGNAL_LINE_MAX bytes */
    size_t line_len;
    bool discarding;        /* inside an oversized line */
    long line_no;
    atomic_bool done;

    pthread_mutex_t mu;     /* stats and rejects */
    struct gh_inject_stats st;
    struct gh_inject_reject rejects[GH_INJECT_REJECTS_KEEP];
    size_t rej_next, rej_count;
};

void gh_inject_opts_init(struct gh_inject_opts *o)
{
    memset(o, 0, sizeof *o);
}

static void reject(struct gh_inject *in, const char *reason)
{
    pthread_mutex_lock(&in->mu);
    struct gh_inject_reject *r = &in->rejects[in->rej_next];
    r->line_no = in->line_no;
    snprintf(r->reason, sizeof r->reason, "%.*s", (int)sizeof r->reason - 1, reason);
    in->rej_next = (in->rej_next + 1) % GH_INJECT_REJECTS_KEEP;
    if (in->rej_count < GH_INJECT_REJECTS_KEEP)
        in->rej_count++;
    in->st.rejected++;
    pthread_mutex_unlock(&in->mu);
    if (in->on_reject)
        in->on_reject(in->reject_ctx, in->line_no, reason);
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

/* One complete line (no '\n'); line_no already counts it. */
static void handle_line(struct gh_inject *in, const char *s, size_t n)
{
    struct gh_err err;
    struct gh_signal sig;
    json_error_t je;

    if (in->line_no == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
        s += 3; /* UTF-8 byte order mark */
        n -= 3;
    }
    if (is_blank(s, n))
        return;
    json_t *root = json_loadb(s, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* The codec words the error (column, line number) as everywhere else. */
        if (gh_signal_decode(s, n, in->line_no, &sig, &err) == GH_OK) {
            gh_signal_clear(&sig); /* cannot happen: jansson refused it */
            snprintf(err.msg, sizeof err.msg, "line %ld: invalid JSON", in->line_no);
        }
        reject(in, err.msg);
        return;
    }
    if (json_is_object(root) && json_object_get(root, "scenario") &&
        !json_object_get(root, "kind")) {
        json_decref(root); /* a scenario header: not a signal, not an error */
        return;
    }
    json_t *node = json_is_object(root) ? json_object_get(root, "node") : NULL;
    if (json_is_object(root) && in->node && (!node || json_is_null(node)))
        json_object_set_new(root, "node", json_string(in->node));
    int rc = gh_signal_decode_json(root, in->line_no, &sig, &err);
    json_decref(root);
    if (rc) {
        reject(in, err.msg);
        return;
    }
    if (sig.source == GH_SRC_KUBE) {
        /* the controller takes those only from its own informers */
        snprintf(err.msg, sizeof err.msg,
                 "line %ld: field \"source\": \"kube\" signals come only from the "
                 "controller's informers", in->line_no);
        gh_signal_clear(&sig);
        reject(in, err.msg);
        return;
    }
    if (in->node && sig.node && strcmp(sig.node, in->node) != 0) {
        snprintf(err.msg, sizeof err.msg,
                 "line %ld: field \"node\": \"%.60s\" is another node; this agent reports "
                 "only for \"%.60s\"", in->line_no, sig.node, in->node);
        gh_signal_clear(&sig);
        reject(in, err.msg);
        return;
    }
    sig.injected = true;
    pthread_mutex_lock(&in->mu);
    in->st.signals++;
    pthread_mutex_unlock(&in->mu);
    in->emit(in->emit_ctx, &sig);
    gh_signal_clear(&sig);
}

static void oversized(struct gh_inject *in)
{
    char why[80];
    snprintf(why, sizeof why, "line %ld: longer than %d bytes", in->line_no, GH_SIGNAL_LINE_MAX);
    reject(in, why);
}

static void new_line(struct gh_inject *in)
{
    in->line_no++;
    pthread_mutex_lock(&in->mu);
    in->st.lines++;
    pthread_mutex_unlock(&in->mu);
}

static void take_bytes(struct gh_inject *in, const char *p, size_t n)
{
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!in->discarding) {
            if (in->line_len + seg > GH_SIGNAL_LINE_MAX) {
                new_line(in);
                oversized(in);
                in->line_len = 0;
                in->discarding = true;
            } else {
                memcpy(in->line + in->line_len, p, seg);
                in->line_len += seg;
            }
        }
        if (!nl)
            return;
        if (in->discarding) {
            in->discarding = false; /* already counted and reported */
        } else {
            new_line(in);
            handle_line(in, in->line, in->line_len);
        }
        in->line_len = 0;
        p = nl + 1;
    }
}

int gh_inject_new(const struct gh_inject_opts *opts, struct gh_inject **out, struct gh_err *err)
{
    struct gh_inject *in;
    struct stat st;
    int rc;

    *out = NULL;
    if (!opts->path || !opts->emit)
        return gh_err_set(err, GH_EINVAL, "inject: path and emit are required");
    if (stat(opts->path, &st) != 0)
        return gh_err_set(err, errno == ENOENT ? GH_ENOTFOUND : GH_EIO, "inject: %s: %s",
                          opts->path, strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        return gh_err_set(err, GH_EINVAL, "inject: %s is not a regular file or a FIFO",
                          opts->path);
    in = calloc(1, sizeof *in);
    if (!in)
        return gh_err_set(err, GH_ENOMEM, "inject: out of memory");
    in->fd = -1;
    pthread_mutex_init(&in->mu, NULL);
    atomic_init(&in->done, false);
    in->follow = opts->follow;
    in->is_fifo = S_ISFIFO(st.st_mode);
    in->emit = opts->emit;
    in->emit_ctx = opts->emit_ctx;
    in->on_reject = opts->on_reject;
    in->reject_ctx = opts->reject_ctx;
    in->path = strdup(opts->path);
    in->rbuf = malloc(RBUF_SIZE);
    in->line = malloc(GH_SIGNAL_LINE_MAX);
    if (!in->path || !in->rbuf || !in->line || (opts->node && !(in->node = strdup(opts->node)))) {
        rc = gh_err_set(err, GH_ENOMEM, "inject: out of memory");
        goto out;
    }
    /* A FIFO is opened read-write: we are then always one of its writers,
     * so writers coming and going never make it hit end of file. */
    in->fd = open(in->path, (in->is_fifo ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC);
    if (in->fd < 0) {
        rc = gh_err_set(err, GH_EIO, "inject: open %s: %s", in->path, strerror(errno));
        goto out;
    }
    *out = in;
    return GH_OK;
out:
    gh_inject_free(in);
    return rc;
}

int gh_inject_poll(struct gh_inject *in, struct gh_err *err)
{
    size_t total = 0;
    if (atomic_load(&in->done))
        return GH_ENOTFOUND;
    while (total < POLL_BUDGET) {
        ssize_t n = read(in->fd, in->rbuf, RBUF_SIZE);
        if (n > 0) {
            take_bytes(in, in->rbuf, (size_t)n);
            total += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return GH_OK;
        if (n < 0)
            return gh_err_set(err, GH_EIO, "inject: read %s: %s", in->path, strerror(errno));
        /* End of a regular file. */
        if (in->follow || in->is_fifo)
            return GH_OK;
        if (in->line_len && !in->discarding) {
            new_line(in);
            handle_line(in, in->line, in->line_len);
        }
        in->line_len = 0;
        atomic_store(&in->done, true);
        return GH_ENOTFOUND;
    }
    return GH_OK;
}

bool gh_inject_done(struct gh_inject *in)
{
    return atomic_load(&in->done);
}

void gh_inject_stats(struct gh_inject *in, struct gh_inject_stats *out)
{
    pthread_mutex_lock(&in->mu);
    *out = in->st;
    pthread_mutex_unlock(&in->mu);
}

size_t gh_inject_rejects(struct gh_inject *in, struct gh_inject_reject *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&in->mu);
    size_t first = (in->rej_next + GH_INJECT_REJECTS_KEEP - in->rej_count) % GH_INJECT_REJECTS_KEEP;
    for (; n < cap && n < in->rej_count; n++)
        out[n] = in->rejects[(first + n) % GH_INJECT_REJECTS_KEEP];
    pthread_mutex_unlock(&in->mu);
    return n;
}

void gh_inject_free(struct gh_inject *in)
{
    if (!in)
        return;
    if (in->fd >= 0)
        close(in->fd);
    pthread_mutex_destroy(&in->mu);
    free(in->path);
    free(in->node);
    free(in->rbuf);
    free(in->line);
    free(in);
}
