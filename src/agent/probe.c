/* probe.c - the agent's health-check runner: spawns configured commands on a
 * worker thread (posix_spawn, own process group, bounded output capture,
 * pidfd or timed polling for exit, SIGKILL on timeout) on demand and on a
 * schedule, and emits each result as a probe_result signal. */
#include "agent/probe.h"
#include "agent/worker.h"
#include "common/mono.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define OUTPUT_MAX_CAP 16384
#define DEFAULT_TIMEOUT_NS (60 * GH_NS_PER_S)

/* ---- output: the last `cap` bytes ------------------------------------------ */

struct tail {
    char *buf;
    size_t cap, pos;     /* next write position (circular) */
    uint64_t total;      /* bytes seen */
};

static void tail_put(struct tail *t, const char *s, size_t n)
{
    t->total += n;
    if (n >= t->cap) {
        memcpy(t->buf, s + n - t->cap, t->cap);
        t->pos = 0;
        return;
    }
    size_t first = t->cap - t->pos < n ? t->cap - t->pos : n;
    memcpy(t->buf + t->pos, s, first);
    memcpy(t->buf, s + first, n - first);
    t->pos = (t->pos + n) % t->cap;
}

/* Copies the kept bytes in order into out (cap + 1 bytes), NUL-terminated;
 * returns the length. */
static size_t tail_linear(const struct tail *t, char *out)
{
    size_t n;
    if (t->total < t->cap) {
        n = (size_t)t->total;
        memcpy(out, t->buf, n);
    } else {
        n = t->cap;
        memcpy(out, t->buf + t->pos, t->cap - t->pos);
        memcpy(out + (t->cap - t->pos), t->buf, t->pos);
    }
    out[n] = '\0';
    return n;
}

/* Control bytes (but \n and \t) and invalid UTF-8 become '?', in place, so
 * that the detail always encodes as JSON. */
static void sanitize(char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                s[i] = '?';
            i++;
            continue;
        }
        size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
        if (ok && len == 3) { /* overlong and surrogates */
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
        }
        if (ok && len == 4) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (!ok) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

/* ---- one run ------------------------------------------------------------------ */

void gh_probe_outcome_clear(struct gh_probe_outcome *out)
{
    if (!out)
        return;
    free(out->detail);
    out->detail = NULL;
}

static int set_detail(struct gh_probe_outcome *out, const char *head, struct tail *t)
{
    char *kept = malloc(t->cap + 1);
    if (!kept)
        return GH_ENOMEM;
    size_t n = tail_linear(t, kept);
    sanitize(kept, n);
    while (n && (kept[n - 1] == '\n' || kept[n - 1] == ' ' || kept[n - 1] == '\t' ||
                 kept[n - 1] == '\r'))
        kept[--n] = '\0';
    size_t cap = strlen(head) + n + 8;
    out->detail = malloc(cap);
    if (!out->detail) {
        free(kept);
        return GH_ENOMEM;
    }
    if (n)
        snprintf(out->detail, cap, "%s: %s%s", head, t->total > t->cap ? "..." : "", kept);
    else
        snprintf(out->detail, cap, "%s", head);
    free(kept);
    return GH_OK;
}

static void drain(int fd, struct tail *t, char *buf, size_t bufsz, bool *open_)
{
    for (;;) {
        ssize_t n = read(fd, buf, bufsz);
        if (n > 0) {
            tail_put(t, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || (n < 0 && errno != EAGAIN))
            *open_ = false;
        return;
    }
}

int gh_probe_run_check(const struct gh_probe_check *c, size_t output_max, int stop_fd,
                       struct gh_probe_outcome *out, struct gh_err *err)
{
    int pfd[2] = {-1, -1};
    int pidfd = -1;
    pid_t pid = -1;
    int rc = GH_OK;
    char buf[4096];
    char head[128];
    struct tail t = {0};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_init = false, attr_init = false;

    memset(out, 0, sizeof *out);
    out->exit_code = -1;
    if (!output_max)
        output_max = GH_PROBE_OUTPUT_MAX_DEFAULT;
    if (output_max > OUTPUT_MAX_CAP)
        output_max = OUTPUT_MAX_CAP;
    t.cap = output_max;
    t.buf = malloc(t.cap);
    if (!t.buf)
        return gh_err_set(err, GH_ENOMEM, "probe: out of memory");
    int64_t timeout = c->timeout_ns > 0 ? c->timeout_ns : DEFAULT_TIMEOUT_NS;
    int64_t start = gh_mono_ns();

    if (pipe2(pfd, O_CLOEXEC)) {
        snprintf(head, sizeof head, "cannot start: pipe: %s", strerror(errno));
        rc = GH_EIO;
        goto done;
    }
    posix_spawn_file_actions_init(&fa);
    fa_init = true;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawnattr_init(&attr);
    attr_init = true;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    int e = posix_spawn(&pid, c->argv[0], &fa, &attr, (char *const *)c->argv,
                        c->envp ? (char *const *)c->envp : environ);
    close(pfd[1]);
    pfd[1] = -1;
    if (e) {
        pid = -1;
        snprintf(head, sizeof head, "cannot start %.60s: %s", c->argv[0], strerror(e));
        rc = GH_EIO;
        goto done;
    }
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

    bool pipe_open = true, exited = false, stopped = false;
    siginfo_t si;
    while (!exited) {
        int64_t left = start + timeout - gh_mono_ns();
        if (left <= 0) {
            out->timed_out = true;
            break;
        }
        struct pollfd pf[3];
        nfds_t n = 0;
        int ip = -1, is = -1;
        if (pipe_open) {
            pf[n] = (struct pollfd){.fd = pfd[0], .events = POLLIN};
            ip = (int)n++;
        }
        if (pidfd >= 0)
            pf[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        if (stop_fd >= 0) {
            pf[n] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
            is = (int)n++;
        }
        int64_t wait_ms = (left + GH_NS_PER_MS - 1) / GH_NS_PER_MS;
        if (pidfd < 0 && wait_ms > 20)
            wait_ms = 20; /* no pidfd: look for the exit now and then */
        poll(pf, n, (int)wait_ms);
        if (ip >= 0 && (pf[ip].revents & (POLLIN | POLLHUP | POLLERR)))
            drain(pfd[0], &t, buf, sizeof buf, &pipe_open);
        if (is >= 0 && (pf[is].revents & POLLIN)) {
            stopped = true;
            break;
        }
        /* Exited? (WNOWAIT: keep the zombie, so the process group id cannot
         * be reused before we kill what is left of the group.) */
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            exited = true;
    }
    kill(-pid, SIGKILL); /* the group: the command's leftovers, or all of it */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pipe_open) /* what was written before the end; the group is dead */
        drain(pfd[0], &t, buf, sizeof buf, &pipe_open);
    out->duration_ns = gh_mono_ns() - start;
    if (stopped) {
        snprintf(head, sizeof head, "stopped");
        rc = GH_EAGAIN;
    } else if (out->timed_out) {
        snprintf(head, sizeof head, "timed out after %.1f s", (double)timeout / 1e9);
    } else if (WIFEXITED(status)) {
        out->exit_code = WEXITSTATUS(status);
        out->passed = out->exit_code == 0;
        snprintf(head, sizeof head, "exit %d", out->exit_code);
    } else if (WIFSIGNALED(status)) {
        out->term_signal = WTERMSIG(status);
        snprintf(head, sizeof head, "killed by signal %d", out->term_signal);
    } else {
        snprintf(head, sizeof head, "ended with status %d", status);
    }
done:
    if (rc == GH_EIO)
        gh_err_set(err, GH_EIO, "probe %s: %s", c->name ? c->name : "?", head);
    if (set_detail(out, head, &t) != GH_OK)
        rc = gh_err_set(err, GH_ENOMEM, "probe: out of memory");
    if (fa_init)
        posix_spawn_file_actions_destroy(&fa);
    if (attr_init)
        posix_spawnattr_destroy(&attr);
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    if (pidfd >= 0)
        close(pidfd);
    free(t.buf);
    return rc;
}

/* ---- the runner ----------------------------------------------------------------- */

struct check_rt {
    struct gh_probe_check c;   /* name and argv owned */
    char **argv;
    int64_t next_due;          /* monotonic; 0 = not scheduled */
    bool queued;
    uint64_t queue_order;
    struct gh_probe_last last;
};

struct gh_probe {
    char *node;
    size_t output_max;
    const struct gh_clock *clock;
    gh_probe_emit_fn emit;
    void *emit_ctx;
    struct check_rt checks[GH_PROBE_MAX_CHECKS];
    size_t n;
    uint64_t next_order;

    pthread_mutex_t mu;        /* checks' queue/schedule/last */
    struct gh_worker *worker;  /* runs the checks (worker_run) */
};

void gh_probe_opts_init(struct gh_probe_opts *o)
{
    memset(o, 0, sizeof *o);
}

static void worker_run(void *arg, struct gh_worker *w);

int gh_probe_new(const struct gh_probe_opts *opts, struct gh_probe **out, struct gh_err *err)
{
    struct gh_probe *p;
    int rc;

    *out = NULL;
    if (!opts->node || !opts->node[0] || !opts->emit)
        return gh_err_set(err, GH_EINVAL, "probe: node and emit are required");
    if (opts->n_checks > GH_PROBE_MAX_CHECKS)
        return gh_err_set(err, GH_EINVAL, "probe: more than %d checks", GH_PROBE_MAX_CHECKS);
    if (opts->output_max > OUTPUT_MAX_CAP)
        return gh_err_set(err, GH_EINVAL, "probe: output_max over %d", OUTPUT_MAX_CAP);
    for (size_t i = 0; i < opts->n_checks; i++) {
        const struct gh_probe_check *c = &opts->checks[i];
        if (!c->name || !c->name[0])
            return gh_err_set(err, GH_EINVAL, "probe: check %zu has no name", i);
        if (!c->argv || !c->argv[0] || c->argv[0][0] != '/')
            return gh_err_set(err, GH_EINVAL, "probe %s: argv[0] must be an absolute path",
                              c->name);
        for (size_t k = 0; k < i; k++)
            if (strcmp(opts->checks[k].name, c->name) == 0)
                return gh_err_set(err, GH_EINVAL, "probe %s: name used twice", c->name);
        size_t na = 0;
        while (c->argv[na])
            if (++na > GH_PROBE_MAX_ARGS)
                return gh_err_set(err, GH_EINVAL, "probe %s: more than %d arguments", c->name,
                                  GH_PROBE_MAX_ARGS);
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "probe: out of memory");
    pthread_mutex_init(&p->mu, NULL);
    p->output_max = opts->output_max ? opts->output_max : GH_PROBE_OUTPUT_MAX_DEFAULT;
    p->clock = opts->clock ? opts->clock : gh_clock_real();
    p->emit = opts->emit;
    p->emit_ctx = opts->emit_ctx;
    p->node = strdup(opts->node);
    if (!p->node) {
        rc = gh_err_set(err, GH_ENOMEM, "probe: setup failed");
        goto out;
    }
    struct gh_worker_opts wo = {.name = "probe", .run = worker_run, .arg = p};
    if ((rc = gh_worker_new(&wo, &p->worker, err)))
        goto out;
    for (size_t i = 0; i < opts->n_checks; i++) {
        const struct gh_probe_check *c = &opts->checks[i];
        struct check_rt *r = &p->checks[i];
        size_t na = 0;
        while (c->argv[na])
            na++;
        p->n++;
        r->c = *c;
        r->c.envp = NULL; /* not copied: the agent's environment */
        r->c.name = strdup(c->name);
        r->argv = calloc(na + 1, sizeof *r->argv);
        if (!r->c.name || !r->argv) {
            rc = gh_err_set(err, GH_ENOMEM, "probe: out of memory");
            goto out;
        }
        for (size_t k = 0; k < na; k++)
            if (!(r->argv[k] = strdup(c->argv[k]))) {
                rc = gh_err_set(err, GH_ENOMEM, "probe: out of memory");
                goto out;
            }
        r->c.argv = (const char *const *)r->argv;
    }
    *out = p;
    return GH_OK;
out:
    gh_probe_free(p);
    return rc;
}

static struct check_rt *find_check(struct gh_probe *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->checks[i].c.name, name) == 0)
            return &p->checks[i];
    return NULL;
}

int gh_probe_request(struct gh_probe *p, const char *name, struct gh_err *err)
{
    pthread_mutex_lock(&p->mu);
    struct check_rt *r = find_check(p, name);
    if (r && !r->queued) {
        r->queued = true;
        r->queue_order = ++p->next_order;
    }
    pthread_mutex_unlock(&p->mu);
    if (r)
        gh_worker_kick(p->worker);
    if (!r)
        return gh_err_set(err, GH_ENOTFOUND, "probe: no check named \"%.100s\"", name);
    return GH_OK;
}

static void emit_result(struct gh_probe *p, const struct check_rt *r,
                        const struct gh_probe_outcome *o, int64_t ts)
{
    struct gh_signal s;
    gh_signal_init(&s);
    s.ts_ns = ts;
    s.source = GH_SRC_PROBE;
    s.kind = GH_KIND_PROBE_RESULT;
    s.gpu = r->c.gpu >= 0 ? r->c.gpu : -1;
    s.passed = o->passed;
    if (gh_signal_set_str(&s.node, p->node, strlen(p->node)) ||
        gh_signal_set_str(&s.check, r->c.name, strlen(r->c.name)) ||
        (o->detail && gh_signal_set_str(&s.detail, o->detail, strlen(o->detail)))) {
        gh_signal_clear(&s);
        return;
    }
    p->emit(p->emit_ctx, &s);
    gh_signal_clear(&s);
}

/* Picks the next check to run (mu held): a queued one (oldest request
 * first), else a scheduled one that is due. */
static struct check_rt *next_check(struct gh_probe *p, int64_t now, int64_t *earliest)
{
    struct check_rt *best = NULL;
    *earliest = INT64_MAX;
    for (size_t i = 0; i < p->n; i++) {
        struct check_rt *r = &p->checks[i];
        if (r->queued && (!best || !best->queued || r->queue_order < best->queue_order))
            best = r;
    }
    if (best)
        return best;
    for (size_t i = 0; i < p->n; i++) {
        struct check_rt *r = &p->checks[i];
        if (!r->next_due)
            continue;
        if (r->next_due <= now && (!best || r->next_due < best->next_due))
            best = r;
        if (r->next_due < *earliest)
            *earliest = r->next_due;
    }
    return best;
}

/* The worker's one run: until stopped, the next queued or due check, else
 * a wait for the earliest due one or a request (gh_worker_kick). */
static void worker_run(void *arg, struct gh_worker *w)
{
    struct gh_probe *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!gh_worker_stopping(w)) {
        int64_t now = gh_mono_ns(), earliest;
        struct check_rt *r = next_check(p, now, &earliest);
        if (!r) {
            pthread_mutex_unlock(&p->mu);
            gh_worker_wait_until(w, earliest);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        r->queued = false;
        if (r->c.interval_ns > 0)
            r->next_due = now + r->c.interval_ns;
        struct gh_probe_check c = r->c; /* immutable after new */
        pthread_mutex_unlock(&p->mu);

        struct gh_probe_outcome o;
        int rc = gh_probe_run_check(&c, p->output_max, gh_worker_stop_fd(w), &o, NULL);
        int64_t ts = gh_clock_now(p->clock);
        bool result = rc != GH_EAGAIN && rc != GH_ENOMEM; /* stopped: no result */

        /* the latest result first, so that whoever got the signal finds
         * gh_probe_last() saying at least as much */
        pthread_mutex_lock(&p->mu);
        if (result) {
            struct gh_probe_last *l = &r->last;
            l->has_run = true;
            l->passed = o.passed;
            l->timed_out = o.timed_out;
            l->ts_ns = ts;
            l->duration_ns = o.duration_ns;
            l->runs++;
            if (!o.passed)
                l->failures++;
            snprintf(l->detail, sizeof l->detail, "%s", o.detail ? o.detail : "");
        }
        pthread_mutex_unlock(&p->mu);
        if (result)
            emit_result(p, r, &o, ts);
        gh_probe_outcome_clear(&o);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
}

int gh_probe_start(struct gh_probe *p, struct gh_err *err)
{
    if (gh_worker_running(p->worker))
        return gh_err_set(err, GH_EINVAL, "probe: already started");
    int64_t now = gh_mono_ns();
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++)
        p->checks[i].next_due = p->checks[i].c.interval_ns > 0 ? now + p->checks[i].c.interval_ns
                                                               : 0;
    pthread_mutex_unlock(&p->mu);
    return gh_worker_start(p->worker, err);
}

void gh_probe_stop(struct gh_probe *p)
{
    if (p)
        gh_worker_stop(p->worker); /* its stop fd kills a running check */
}

int gh_probe_last(struct gh_probe *p, const char *name, struct gh_probe_last *out)
{
    int rc = GH_ENOTFOUND;
    pthread_mutex_lock(&p->mu);
    struct check_rt *r = find_check(p, name);
    if (r) {
        *out = r->last;
        rc = GH_OK;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void gh_probe_free(struct gh_probe *p)
{
    if (!p)
        return;
    gh_worker_free(p->worker); /* stops it first */
    for (size_t i = 0; i < p->n; i++) {
        struct check_rt *r = &p->checks[i];
        for (size_t k = 0; r->argv && r->argv[k]; k++)
            free(r->argv[k]);
        free(r->argv);
        free((char *)r->c.name);
    }
    pthread_mutex_destroy(&p->mu);
    free(p->node);
    free(p);
}
