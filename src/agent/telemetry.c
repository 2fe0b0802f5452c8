/* telemetry.c - the agent's telemetry socket: accepts training ranks' JSON
 * lines on a Unix stream socket (epoll, non-blocking), validates each with
 * the signal codec (its fast path for the telemetry kinds, signal_fast.h),
 * keeps per-rank latest steps and emits accepted signals.
 *
 * Line handling: bytes are read into one shared buffer and complete lines
 * are decoded in place; only a client's trailing partial line is copied
 * into its own buffer (grown on demand up to line_max), so an idle client
 * costs a few dozen bytes. */
#include "agent/telemetry.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/peer.h"
#include "signal/signal_fast.h"
#include "signal/signal_json.h"

#define RBUF_SIZE (64 * 1024)
#define READ_BUDGET (256 * 1024) /* bytes per client per wake-up */
#define MAX_EVENTS 64
#define RESTART_QUEUE 256
#define RESTART_ID_MAX 200

/* A restart request for a pod's processes (gh_telemetry_restart). */
struct restart_req {
    char pod_uid[GH_PEER_UID_MAX];
    char id[RESTART_ID_MAX];
    char incident[RESTART_ID_MAX];
    int code;
    int64_t seen_ns; /* when first seen: only connections older than this get it */
    bool delivered;
};

struct client {
    int fd;                 /* -1 for the ingest pseudo-client */
    uint64_t id;
    long line_no;           /* physical lines completed so far */
    char *part;             /* partial line (owned), part_cap <= line_max */
    size_t part_len, part_cap;
    bool discarding;        /* inside an oversized line: drop up to '\n' */
    /* Who writes (gh_peer_identify at accept): the pod stamped on every
     * line ("" = a host process: no pod_uid), or why its lines are refused. */
    char pod_uid[GH_PEER_UID_MAX];
    char *refused;              /* owned unless refused_oom; NULL = its lines are taken */
    int64_t accepted_ns;        /* when it connected (restart requests go to older ones) */
    struct client *prev, *next; /* the list of connected clients */
};

/* A client refused when the reason could not be allocated (not freed). */
static char refused_oom[] = "refused: the writer's pod cannot be told: out of memory";

struct rank_slot {
    bool used;
    uint64_t hash;
    int64_t last_emit_ns;
    bool emitted_once;
    struct gh_telemetry_rank r;
};

struct gh_telemetry {
    char *path;             /* socket path (owned), NULL when none */
    char *node;             /* owned, may be NULL */
    size_t line_max;
    int max_clients;
    size_t max_ranks;
    int64_t step_emit_interval_ns;
    char *proc_root;  /* owned; NULL = "/proc" */
    bool trust_peers; /* opts.identify_peers == GH_TELEMETRY_PEERS_TRUST */
    const struct gh_clock *clock;
    gh_telemetry_emit_fn emit;
    void *emit_ctx;

    int lfd, epfd, spare_fd;
    dev_t sock_dev;
    ino_t sock_ino;
    char tag_listen;        /* its address is the listening socket's epoll tag */
    char *rbuf;             /* RBUF_SIZE shared read buffer */
    struct client ingest;
    struct client *clients; /* connected (owned), doubly linked */
    uint64_t next_client_id;

    /* Guarded by mu: counters, rejects, the rank table. */
    pthread_mutex_t mu;
    struct gh_telemetry_stats st;
    struct gh_telemetry_reject rejects[GH_TELEMETRY_REJECTS_KEEP];
    size_t rej_next, rej_count;
    struct rank_slot *slots; /* open addressing, cap a power of two */
    size_t slot_cap, slot_used;
    struct restart_req rq[RESTART_QUEUE]; /* queued by gh_telemetry_restart */
    size_t rq_n;

    /* Restart requests: the loop's own. */
    int evfd; /* wakes the loop for queued requests */
    char tag_restart;
    struct restart_req seen[GH_TELEMETRY_RESTARTS_KEEP]; /* ring of the last ones */
    size_t seen_next;
};

void gh_telemetry_opts_init(struct gh_telemetry_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* ---- rejects -------------------------------------------------------------- */

static void copy_printable(char *dst, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (; k + 1 < cap && k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        dst[k] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    dst[k] = '\0';
}

/* Called with mu held. */
static void add_reject(struct gh_telemetry *t, const struct client *c, const char *line,
                       size_t n, const char *reason)
{
    struct gh_telemetry_reject *r = &t->rejects[t->rej_next];
    r->client = c->id;
    copy_printable(r->reason, sizeof r->reason, reason, strlen(reason));
    copy_printable(r->line, sizeof r->line, line, n);
    t->rej_next = (t->rej_next + 1) % GH_TELEMETRY_REJECTS_KEEP;
    if (t->rej_count < GH_TELEMETRY_REJECTS_KEEP)
        t->rej_count++;
    t->st.rejected++;
}

/* ---- the per-rank table ----------------------------------------------------- */

static uint64_t rank_hash(const char *job, size_t jlen, int rank)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < jlen; i++) {
        h ^= (unsigned char)job[i];
        h *= 1099511628211ULL;
    }
    h ^= (uint64_t)(unsigned)rank;
    h *= 1099511628211ULL;
    return h ? h : 1;
}

/* job as stored: cut at sizeof r.job - 1 bytes. */
static size_t job_len(const char *job)
{
    return strnlen(job, sizeof ((struct gh_telemetry_rank *)0)->job - 1);
}

static struct rank_slot *rank_find(struct gh_telemetry *t, const char *job, int rank,
                                   uint64_t h)
{
    if (!t->slot_cap)
        return NULL;
    size_t jl = job_len(job);
    for (size_t i = h & (t->slot_cap - 1);; i = (i + 1) & (t->slot_cap - 1)) {
        struct rank_slot *s = &t->slots[i];
        if (!s->used)
            return s; /* the empty slot where it would go */
        if (s->hash == h && s->r.rank == rank && strlen(s->r.job) == jl &&
            memcmp(s->r.job, job, jl) == 0)
            return s;
    }
}

static int rank_grow(struct gh_telemetry *t)
{
    size_t ncap = t->slot_cap ? t->slot_cap * 2 : 64;
    struct rank_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->slot_cap; i++) {
        if (!t->slots[i].used)
            continue;
        size_t j = t->slots[i].hash & (ncap - 1);
        while (ns[j].used)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->slot_cap = ncap;
    return 0;
}

/* Updates the record of a step signal; returns whether to emit it. mu held. */
static bool rank_update(struct gh_telemetry *t, const struct gh_signal *s, int64_t now)
{
    uint64_t h = rank_hash(s->job, job_len(s->job), s->rank);
    struct rank_slot *slot = rank_find(t, s->job, s->rank, h);
    if (!slot || !slot->used) {
        if (t->slot_used >= t->max_ranks) {
            t->st.ranks_dropped++;
            return true;
        }
        if ((t->slot_used + 1) * 2 > t->slot_cap) {
            if (rank_grow(t)) {
                t->st.ranks_dropped++;
                return true;
            }
            slot = rank_find(t, s->job, s->rank, h);
        }
        memset(slot, 0, sizeof *slot);
        slot->used = true;
        slot->hash = h;
        snprintf(slot->r.job, sizeof slot->r.job, "%s", s->job);
        slot->r.rank = s->rank;
        t->slot_used++;
        t->st.ranks = t->slot_used;
    }
    struct gh_telemetry_rank *r = &slot->r;
    if (s->node && strncmp(r->node, s->node, sizeof r->node - 1) != 0) {
        size_t nl = strnlen(s->node, sizeof r->node - 1);
        memcpy(r->node, s->node, nl);
        r->node[nl] = '\0';
    }
    r->gpu = s->gpu;
    r->step = s->step;
    r->step_ms = s->step_ms;
    r->has_comm_ms = s->has_comm_ms;
    r->comm_ms = s->has_comm_ms ? s->comm_ms : 0;
    r->ts_ns = s->ts_ns;
    r->lines++;
    if (t->step_emit_interval_ns <= 0)
        return true;
    if (slot->emitted_once && now - slot->last_emit_ns < t->step_emit_interval_ns) {
        t->st.steps_coalesced++;
        return false;
    }
    slot->emitted_once = true;
    slot->last_emit_ns = now;
    return true;
}

/* ---- line handling -------------------------------------------------------- */

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

static void reject_line(struct gh_telemetry *t, const struct client *c, const char *s,
                        size_t n, const char *reason)
{
    pthread_mutex_lock(&t->mu);
    t->st.lines++;
    add_reject(t, c, s, n, reason);
    pthread_mutex_unlock(&t->mu);
}

/* One complete line (without '\n') of client c. */
static void handle_line(struct gh_telemetry *t, struct client *c, const char *s, size_t n)
{
    struct gh_signal sig;
    struct gh_err err;
    char why[GH_ERR_MAX];

    c->line_no++;
    if (is_blank(s, n))
        return;
    if (c->refused) {
        snprintf(why, sizeof why, "line %ld: %s", c->line_no, c->refused);
        reject_line(t, c, s, n, why);
        return;
    }
    if (gh_signal_fast_decode(s, n, c->line_no, &sig, &err) != GH_OK) {
        reject_line(t, c, s, n, err.msg);
        return;
    }
    if (sig.source != GH_SRC_TELEMETRY) {
        snprintf(why, sizeof why, "line %ld: field \"source\": \"%s\", must be \"telemetry\"",
                 c->line_no, gh_source_name(sig.source));
        goto bad;
    }
    if (sig.kind != GH_KIND_STEP && sig.kind != GH_KIND_CHECKPOINT &&
        sig.kind != GH_KIND_REPLICA_CHECKSUM) {
        snprintf(why, sizeof why, "line %ld: field \"kind\": \"%s\" is not a telemetry kind",
                 c->line_no, gh_kind_name(sig.kind));
        goto bad;
    }
    if (sig.node && t->node && strcmp(sig.node, t->node) != 0) {
        /* a rank reports for the node it runs on: this agent's */
        snprintf(why, sizeof why,
                 "line %ld: field \"node\": \"%.60s\" is another node; this agent reports "
                 "only for \"%.60s\"", c->line_no, sig.node, t->node);
        goto bad;
    }
    if (!sig.node && t->node && gh_signal_set_str(&sig.node, t->node, strlen(t->node))) {
        snprintf(why, sizeof why, "line %ld: out of memory", c->line_no);
        goto bad;
    }
    /* the writer's pod, as the kernel says, never as the line says: the
     * controller takes a job's lines only from a pod of that job */
    if (!t->trust_peers &&
        gh_signal_set_str(&sig.pod_uid, c->pod_uid[0] ? c->pod_uid : NULL, strlen(c->pod_uid))) {
        snprintf(why, sizeof why, "line %ld: out of memory", c->line_no);
        goto bad;
    }

    bool emit = true;
    int64_t now = (sig.kind == GH_KIND_STEP && t->step_emit_interval_ns > 0)
                      ? gh_clock_now(t->clock) : 0;
    pthread_mutex_lock(&t->mu);
    t->st.lines++;
    t->st.accepted++;
    if (sig.kind == GH_KIND_STEP)
        emit = rank_update(t, &sig, now);
    if (emit && t->emit)
        t->st.emitted++;
    pthread_mutex_unlock(&t->mu);
    if (emit && t->emit)
        t->emit(t->emit_ctx, &sig);
    gh_signal_clear(&sig);
    return;
bad:
    gh_signal_clear(&sig);
    reject_line(t, c, s, n, why);
}

static void oversized(struct gh_telemetry *t, struct client *c, const char *s, size_t n)
{
    char why[96];
    c->line_no++;
    snprintf(why, sizeof why, "line %ld: longer than %zu bytes", c->line_no, t->line_max);
    pthread_mutex_lock(&t->mu);
    t->st.lines++;
    t->st.oversized++;
    add_reject(t, c, s, n, why);
    pthread_mutex_unlock(&t->mu);
}

/* Appends to the partial line; false (and the line is dropped as oversized)
 * when it would exceed line_max or memory runs out. */
static void append_partial(struct gh_telemetry *t, struct client *c, const char *s, size_t n)
{
    if (c->discarding)
        return;
    if (c->part_len + n > t->line_max) {
        oversized(t, c, c->part_len ? c->part : s, c->part_len ? c->part_len : n);
        c->part_len = 0;
        c->discarding = true;
        return;
    }
    if (c->part_len + n > c->part_cap) {
        size_t ncap = c->part_cap ? c->part_cap : 256;
        while (ncap < c->part_len + n)
            ncap *= 2;
        if (ncap > t->line_max)
            ncap = t->line_max;
        char *np = realloc(c->part, ncap);
        if (!np) {
            oversized(t, c, s, n);
            c->part_len = 0;
            c->discarding = true;
            return;
        }
        c->part = np;
        c->part_cap = ncap;
    }
    memcpy(c->part + c->part_len, s, n);
    c->part_len += n;
}

static void process_bytes(struct gh_telemetry *t, struct client *c, const char *buf, size_t n)
{
    const char *p = buf, *end = buf + n;

    pthread_mutex_lock(&t->mu);
    t->st.bytes += n;
    pthread_mutex_unlock(&t->mu);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            append_partial(t, c, p, (size_t)(end - p));
            return;
        }
        size_t seg = (size_t)(nl - p);
        if (c->discarding) {
            c->discarding = false;
        } else if (c->part_len) {
            if (c->part_len + seg > t->line_max) {
                oversized(t, c, c->part, c->part_len);
            } else {
                append_partial(t, c, p, seg);
                if (!c->discarding)
                    handle_line(t, c, c->part, c->part_len);
                c->discarding = false;
            }
            c->part_len = 0;
        } else if (seg > t->line_max) {
            oversized(t, c, p, seg);
        } else {
            handle_line(t, c, p, seg);
        }
        p = nl + 1;
    }
}

/* The client is gone: a kept partial line counts as complete. */
static void end_client(struct gh_telemetry *t, struct client *c)
{
    if (!c->discarding && c->part_len)
        handle_line(t, c, c->part, c->part_len);
    c->part_len = 0;
    c->discarding = false;
}

void gh_telemetry_ingest(struct gh_telemetry *t, const char *buf, size_t len, bool end)
{
    if (len)
        process_bytes(t, &t->ingest, buf, len);
    if (end)
        end_client(t, &t->ingest);
}

/* ---- sockets ----------------------------------------------------------------- */

/* finish: process a kept partial line (the client closed; not at free). */
static void close_client(struct gh_telemetry *t, struct client *c, bool finish)
{
    if (finish)
        end_client(t, c);
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        t->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c->part);
    if (c->refused != refused_oom)
        free(c->refused);
    free(c);
    pthread_mutex_lock(&t->mu);
    t->st.clients_now--;
    pthread_mutex_unlock(&t->mu);
}

/* Who the new client is (peer.h): a process in a pod writes for that pod;
 * a process in no pod only when it runs as root on the host (an operator's
 * tool, a host-level launcher; root there could read the node's
 * credentials anyway); anything else has its lines refused, each counted
 * with the reason. */
static void identify(struct gh_telemetry *t, struct client *c)
{
    struct gh_peer p;
    struct gh_err err = {{0}};
    char why[GH_ERR_MAX + 96];
    if (t->trust_peers)
        return;
    int rc = gh_peer_identify(c->fd, t->proc_root, &p, &err);
    if (rc == GH_OK && p.pod_uid[0]) {
        memcpy(c->pod_uid, p.pod_uid, sizeof c->pod_uid);
        return;
    }
    if (rc == GH_OK && p.uid == 0)
        return; /* root on the host: no pod to stamp */
    if (rc == GH_OK)
        snprintf(why, sizeof why,
                 "refused: the writer (pid %d, uid %u) runs in no pod and is "
                 "not root; only a pod's ranks (or root on the host) may write here",
                 (int)p.pid, (unsigned)p.uid);
    else
        snprintf(why, sizeof why, "refused: the writer's pod cannot be told: %s", err.msg);
    c->refused = strdup(why);
    if (!c->refused)
        c->refused = refused_oom;
}

static void accept_clients(struct gh_telemetry *t)
{
    for (;;) {
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if ((errno == EMFILE || errno == ENFILE) && t->spare_fd >= 0) {
                /* Out of descriptors: use the spare to take the connection
                 * off the queue and refuse it, so the listener does not spin. */
                close(t->spare_fd);
                fd = accept(t->lfd, NULL, NULL);
                if (fd >= 0)
                    close(fd);
                t->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                pthread_mutex_lock(&t->mu);
                t->st.clients_refused++;
                pthread_mutex_unlock(&t->mu);
                continue;
            }
            return; /* EAGAIN, or a transient error: epoll tells us again */
        }
        pthread_mutex_lock(&t->mu);
        bool full = t->st.clients_now >= (uint64_t)t->max_clients;
        if (full)
            t->st.clients_refused++;
        pthread_mutex_unlock(&t->mu);
        struct client *c = full ? NULL : calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = ++t->next_client_id;
        c->accepted_ns = gh_clock_now(t->clock);
        identify(t, c);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev)) {
            close(fd);
            free(c);
            continue;
        }
        c->next = t->clients;
        if (t->clients)
            t->clients->prev = c;
        t->clients = c;
        pthread_mutex_lock(&t->mu);
        t->st.clients_total++;
        t->st.clients_now++;
        pthread_mutex_unlock(&t->mu);
    }
}

static void client_readable(struct gh_telemetry *t, struct client *c)
{
    size_t budget = READ_BUDGET;
    for (;;) {
        ssize_t n = read(c->fd, t->rbuf, RBUF_SIZE);
        if (n > 0) {
            process_bytes(t, c, t->rbuf, (size_t)n);
            if ((size_t)n >= budget)
                return; /* level-triggered: the rest comes on the next wake-up */
            budget -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        close_client(t, c, true); /* EOF or a read error */
        return;
    }
}

/* ---- restart requests ------------------------------------------------------ */

/* Writes q to the connections of its pod open before it was first seen. */
static void restart_one(struct gh_telemetry *t, const struct restart_req *in)
{
    struct restart_req *q = NULL;
    for (size_t i = 0; i < GH_TELEMETRY_RESTARTS_KEEP; i++) {
        struct restart_req *s = &t->seen[i];
        if (s->id[0] && !strcmp(s->id, in->id) && !strcmp(s->pod_uid, in->pod_uid)) {
            q = s;
            break;
        }
    }
    if (q && q->delivered)
        return; /* once */
    if (!q) {
        q = &t->seen[t->seen_next];
        t->seen_next = (t->seen_next + 1) % GH_TELEMETRY_RESTARTS_KEEP;
        *q = *in;
        q->delivered = false;
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", "kind", "restart", "id", q->id, "incident",
                          q->incident, "exit_code", q->code);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line)
        return;
    size_t len = strlen(line);
    line[len] = '\n'; /* json_dumps' NUL: sent as the line's end */
    int n = 0;
    for (struct client *c = t->clients; c; c = c->next) {
        if (c->refused || strcmp(c->pod_uid, q->pod_uid) != 0 || c->accepted_ns > q->seen_ns)
            continue;
        if (send(c->fd, line, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)(len + 1))
            n++;
    }
    free(line);
    pthread_mutex_lock(&t->mu);
    if (n > 0)
        t->st.restarts_delivered++;
    else if (!q->delivered)
        t->st.restarts_no_client++;
    pthread_mutex_unlock(&t->mu);
    q->delivered = n > 0;
}

static void handle_restarts(struct gh_telemetry *t)
{
    uint64_t v;
    ssize_t r = read(t->evfd, &v, sizeof v);
    (void)r;
    struct restart_req batch[RESTART_QUEUE];
    pthread_mutex_lock(&t->mu);
    size_t n = t->rq_n;
    memcpy(batch, t->rq, n * sizeof batch[0]);
    t->rq_n = 0;
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++)
        restart_one(t, &batch[i]);
}

int gh_telemetry_restart(struct gh_telemetry *t, const char *pod_uid, const char *id,
                         const char *incident, int exit_code, struct gh_err *err)
{
    if (!pod_uid || !pod_uid[0] || strlen(pod_uid) >= GH_PEER_UID_MAX || !id || !id[0] ||
        strlen(id) >= RESTART_ID_MAX || (incident && strlen(incident) >= RESTART_ID_MAX) ||
        exit_code < 1 || exit_code > 255)
        return gh_err_set(err, GH_EINVAL,
                          "telemetry: restart request needs a pod UID, an id "
                          "(< %d bytes) and an exit code 1-255",
                          RESTART_ID_MAX);
    if (t->evfd < 0)
        return gh_err_set(err, GH_EIO, "telemetry: no socket");
    pthread_mutex_lock(&t->mu);
    if (t->rq_n >= RESTART_QUEUE) {
        pthread_mutex_unlock(&t->mu);
        return gh_err_set(err, GH_ELIMIT, "telemetry: %d restart requests queued", RESTART_QUEUE);
    }
    struct restart_req *q = &t->rq[t->rq_n++];
    memset(q, 0, sizeof *q);
    snprintf(q->pod_uid, sizeof q->pod_uid, "%s", pod_uid);
    snprintf(q->id, sizeof q->id, "%s", id);
    snprintf(q->incident, sizeof q->incident, "%s", incident ? incident : "");
    q->code = exit_code;
    q->seen_ns = gh_clock_now(t->clock);
    pthread_mutex_unlock(&t->mu);
    uint64_t one = 1;
    ssize_t w = write(t->evfd, &one, sizeof one);
    (void)w;
    return GH_OK;
}

int gh_telemetry_run_once(struct gh_telemetry *t, int timeout_ms, struct gh_err *err)
{
    struct epoll_event evs[MAX_EVENTS];
    int n = epoll_wait(t->epfd, evs, MAX_EVENTS, timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return GH_OK;
        return gh_err_set(err, GH_EIO, "telemetry: epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        void *tag = evs[i].data.ptr;
        if (tag == &t->tag_listen) {
            accept_clients(t);
            continue;
        }
        if (tag == &t->tag_restart) {
            handle_restarts(t);
            continue;
        }
        struct client *c = tag;
        if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            client_readable(t, c);
    }
    return GH_OK;
}

int gh_telemetry_fd(const struct gh_telemetry *t)
{
    return t->epfd;
}

/* Binds, replacing a stale socket left by a dead process. */
static int bind_socket(struct gh_telemetry *t, struct gh_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen = strlen(t->path);
    if (plen == 0 || plen >= sizeof sa.sun_path)
        return gh_err_set(err, GH_EINVAL, "telemetry: socket path \"%.100s\" too long or empty",
                          t->path);
    memcpy(sa.sun_path, t->path, plen + 1);

    t->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->lfd < 0)
        return gh_err_set(err, GH_EIO, "telemetry: socket: %s", strerror(errno));
    if (bind(t->lfd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EADDRINUSE)
            return gh_err_set(err, GH_EIO, "telemetry: bind %s: %s", t->path, strerror(errno));
        struct stat st;
        if (lstat(t->path, &st) != 0 || !S_ISSOCK(st.st_mode))
            return gh_err_set(err, GH_EINVAL, "telemetry: %s exists and is not a socket",
                              t->path);
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0)
            return gh_err_set(err, GH_EIO, "telemetry: socket: %s", strerror(errno));
        int live = connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(probe);
        if (live)
            return gh_err_set(err, GH_EINVAL, "telemetry: %s in use by another process",
                              t->path);
        if (unlink(t->path) != 0 || bind(t->lfd, (struct sockaddr *)&sa, sizeof sa) != 0)
            return gh_err_set(err, GH_EIO, "telemetry: rebind %s: %s", t->path,
                              strerror(errno));
    }
    struct stat st;
    if (stat(t->path, &st) == 0) {
        t->sock_dev = st.st_dev;
        t->sock_ino = st.st_ino;
    }
    if (listen(t->lfd, SOMAXCONN) != 0)
        return gh_err_set(err, GH_EIO, "telemetry: listen %s: %s", t->path, strerror(errno));
    return GH_OK;
}

int gh_telemetry_new(const struct gh_telemetry_opts *opts, struct gh_telemetry **out,
                     struct gh_err *err)
{
    struct gh_telemetry *t;
    int rc = GH_OK;

    *out = NULL;
    if (opts->line_max > GH_SIGNAL_LINE_MAX)
        return gh_err_set(err, GH_EINVAL, "telemetry: line_max %zu over %d", opts->line_max,
                          GH_SIGNAL_LINE_MAX);
    if (opts->max_clients < 0)
        return gh_err_set(err, GH_EINVAL, "telemetry: max_clients < 0");
    t = calloc(1, sizeof *t);
    if (!t)
        return gh_err_set(err, GH_ENOMEM, "telemetry: out of memory");
    t->lfd = t->epfd = t->spare_fd = t->evfd = -1;
    t->ingest.fd = -1;
    pthread_mutex_init(&t->mu, NULL);
    t->line_max = opts->line_max ? opts->line_max : GH_TELEMETRY_LINE_MAX_DEFAULT;
    t->max_clients = opts->max_clients ? opts->max_clients : 4096;
    t->max_ranks = opts->max_ranks ? opts->max_ranks : 65536;
    t->step_emit_interval_ns = opts->step_emit_interval_ns;
    t->trust_peers = opts->identify_peers == GH_TELEMETRY_PEERS_TRUST;
    t->clock = opts->clock ? opts->clock : gh_clock_real();
    t->emit = opts->emit;
    t->emit_ctx = opts->emit_ctx;
    const char *path = opts->socket_path ? opts->socket_path : GH_TELEMETRY_DEFAULT_SOCKET;
    t->rbuf = malloc(RBUF_SIZE);
    if (!t->rbuf || (opts->node && !(t->node = strdup(opts->node))) ||
        (opts->proc_root && !(t->proc_root = strdup(opts->proc_root)))) {
        rc = gh_err_set(err, GH_ENOMEM, "telemetry: out of memory");
        goto out;
    }
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->epfd < 0) {
        rc = gh_err_set(err, GH_EIO, "telemetry: epoll: %s", strerror(errno));
        goto out;
    }
    if (path[0]) {
        if (!(t->path = strdup(path))) {
            rc = gh_err_set(err, GH_ENOMEM, "telemetry: out of memory");
            goto out;
        }
        if ((rc = bind_socket(t, err))) {
            free(t->path); /* not ours: never unlink it */
            t->path = NULL;
            goto out;
        }
        unsigned mode = opts->socket_mode ? opts->socket_mode : 0666;
        if (chmod(t->path, (mode_t)mode) != 0) {
            rc = gh_err_set(err, GH_EIO, "telemetry: chmod %s: %s", t->path, strerror(errno));
            goto out;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->tag_listen};
        if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->lfd, &ev)) {
            rc = gh_err_set(err, GH_EIO, "telemetry: epoll_ctl: %s", strerror(errno));
            goto out;
        }
        t->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event rev = {.events = EPOLLIN, .data.ptr = &t->tag_restart};
        if (t->evfd < 0 || epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &rev)) {
            rc = gh_err_set(err, GH_EIO, "telemetry: eventfd: %s", strerror(errno));
            goto out;
        }
    }
    *out = t;
    return GH_OK;
out:
    gh_telemetry_free(t);
    return rc;
}

/* ---- readers ------------------------------------------------------------------ */

void gh_telemetry_stats(struct gh_telemetry *t, struct gh_telemetry_stats *out)
{
    pthread_mutex_lock(&t->mu);
    *out = t->st;
    pthread_mutex_unlock(&t->mu);
}

size_t gh_telemetry_rejects(struct gh_telemetry *t, struct gh_telemetry_reject *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    size_t first = (t->rej_next + GH_TELEMETRY_REJECTS_KEEP - t->rej_count) %
                   GH_TELEMETRY_REJECTS_KEEP;
    for (; n < cap && n < t->rej_count; n++)
        out[n] = t->rejects[(first + n) % GH_TELEMETRY_REJECTS_KEEP];
    pthread_mutex_unlock(&t->mu);
    return n;
}

int gh_telemetry_rank(struct gh_telemetry *t, const char *job, int rank,
                      struct gh_telemetry_rank *out)
{
    int rc = GH_ENOTFOUND;
    pthread_mutex_lock(&t->mu);
    struct rank_slot *s = rank_find(t, job, rank, rank_hash(job, job_len(job), rank));
    if (s && s->used) {
        *out = s->r;
        rc = GH_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

size_t gh_telemetry_ranks(struct gh_telemetry *t,
                          void (*fn)(void *ctx, const struct gh_telemetry_rank *r), void *ctx)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->slot_cap; i++)
        if (t->slots[i].used) {
            fn(ctx, &t->slots[i].r);
            n++;
        }
    pthread_mutex_unlock(&t->mu);
    return n;
}

void gh_telemetry_free(struct gh_telemetry *t)
{
    if (!t)
        return;
    while (t->clients)
        close_client(t, t->clients, false);
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->lfd >= 0)
        close(t->lfd);
    if (t->spare_fd >= 0)
        close(t->spare_fd);
    if (t->evfd >= 0)
        close(t->evfd);
    if (t->path) {
        struct stat st;
        if (stat(t->path, &st) == 0 && st.st_dev == t->sock_dev && st.st_ino == t->sock_ino)
            unlink(t->path);
        free(t->path);
    }
    free(t->ingest.part);
    free(t->rbuf);
    free(t->node);
    free(t->proc_root);
    free(t->slots);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
