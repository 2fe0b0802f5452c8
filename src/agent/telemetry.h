/* telemetry.h - the agent's telemetry socket: a Unix stream socket where
 * training ranks write the spec's step, checkpoint and replica_checksum
 * signals as JSON lines (python/gpuheal_reporter writes them).
 *
 * Each line is decoded with the signal codec (signal/signal_json.h) and
 * must have source "telemetry" and one of those three kinds; node is set
 * to opts.node when the line has none. A bad line (invalid JSON, a failed
 * field check, a wrong source or kind, binary bytes) is counted, kept in a
 * ring of the last GH_TELEMETRY_REJECTS_KEEP rejects with its reason, and
 * never affects other lines or clients. A line longer than opts.line_max is
 * dropped (counted as oversized) and the stream resynchronises at the next
 * newline. A client's last line without a newline is processed when the
 * client closes.
 *
 * Many clients at once: one epoll set, non-blocking sockets, nothing that
 * blocks; each wake-up reads a bounded amount per client (fairness). Memory
 * is bounded: opts.max_clients connections (more are accepted and closed at
 * once, counted), a partial-line buffer per client of at most line_max, and
 * opts.max_ranks per-rank records.
 *
 * Per-rank records: for every (job, rank) the latest step, step_ms,
 * comm_ms, ts and node of its step lines - what the straggler detector and
 * /metrics read (gh_telemetry_rank(), gh_telemetry_ranks()). Emitting: every
 * accepted checkpoint and replica_checksum is emitted; step lines are
 * emitted at most once per (job, rank) per opts.step_emit_interval_ns
 * (0 = every one), the record being updated by all of them.
 *
 * Who may write (docs/agent.md): each connection's peer is identified
 * when it is accepted (agent/peer.h: SO_PEERCRED and the process's
 * cgroup). A process in a pod has the pod's UID stamped on every line it
 * writes as "pod_uid" (a value the line carried is overwritten), and the
 * controller takes a job's lines only from a pod of that job on this node.
 * A process in no pod is accepted only when it runs as root (a host
 * tool; no pod_uid); any other writer, or one whose pod cannot be told,
 * has every line rejected with the reason. The socket's mode (0666 by
 * default) is therefore no authority: any local process may connect,
 * and what it may say is decided by who the kernel says it is.
 *
 * Driving: the caller adds gh_telemetry_fd() (an epoll fd, readable when
 * there is work) to its own loop and calls gh_telemetry_run_once(t, 0).
 *
 * Threads: emit is called from the loop's thread, never concurrently with
 * itself; the signal is borrowed for the call; emit must not call back into
 * the source except the thread-safe readers (stats, rejects, rank). */
#ifndef GH_AGENT_TELEMETRY_H
#define GH_AGENT_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_TELEMETRY_DEFAULT_SOCKET "/run/gpuheal/telemetry.sock"
#define GH_TELEMETRY_LINE_MAX_DEFAULT 8192
#define GH_TELEMETRY_REJECTS_KEEP 32

/* Receives each accepted signal (borrowed for the call). */
typedef void (*gh_telemetry_emit_fn)(void *ctx, const struct gh_signal *s);

enum gh_telemetry_peers {
    GH_TELEMETRY_PEERS_IDENTIFY = 0, /* identify each peer (above); the default */
    GH_TELEMETRY_PEERS_TRUST,        /* take every line, stamp nothing (benchmarks only) */
};

struct gh_telemetry_opts {
    const char *socket_path;    /* copied; NULL = GH_TELEMETRY_DEFAULT_SOCKET */
    unsigned socket_mode;       /* 0 = 0666: ranks run as any user; connecting grants
                                   nothing, the peer's pod does (above) */
    enum gh_telemetry_peers identify_peers;
    const char *proc_root;      /* copied; NULL = "/proc" (tests: a directory of
                                   <pid>/cgroup files of their own) */
    const char *node;           /* copied; filled into lines without one; may be NULL */
    size_t line_max;            /* 0 = GH_TELEMETRY_LINE_MAX_DEFAULT; at most GH_SIGNAL_LINE_MAX */
    int max_clients;            /* 0 = 4096 */
    size_t max_ranks;           /* 0 = 65536 per-rank records */
    int64_t step_emit_interval_ns; /* 0 = emit every step line */
    const struct gh_clock *clock;  /* borrowed; NULL = real; for step_emit_interval_ns */
    gh_telemetry_emit_fn emit;  /* may be NULL (records and counters only) */
    void *emit_ctx;             /* borrowed; passed to emit */
};

/* Zeroes *o (all defaults). */
void gh_telemetry_opts_init(struct gh_telemetry_opts *o);

struct gh_telemetry;

/* Binds and listens on the socket path (a stale socket file left by a dead
 * agent is replaced; one a live process answers on is GH_EINVAL "in use").
 * The parent directory must exist. *out: caller frees with
 * gh_telemetry_free() (which also removes the socket file). GH_EIO,
 * GH_EINVAL (path too long for sun_path, ...), GH_ENOMEM. With
 * socket_path "" no socket is created: only gh_telemetry_ingest() feeds it
 * (fuzzing, benchmarks of the line handling). */
int gh_telemetry_new(const struct gh_telemetry_opts *opts, struct gh_telemetry **out,
                     struct gh_err *err);

/* An epoll fd for the caller's loop (EPOLLIN = call run_once). Borrowed. */
int gh_telemetry_fd(const struct gh_telemetry *t);

/* Waits up to timeout_ms (0 = not at all, -1 = forever) and handles what is
 * ready: accepts, reads, lines. GH_OK (also when nothing was ready), GH_EIO
 * when epoll itself fails. Per-client errors only close that client. */
int gh_telemetry_run_once(struct gh_telemetry *t, int timeout_ms, struct gh_err *err);

/* Feeds bytes as if from one extra, always-connected client (the same line
 * handling as sockets: partial lines kept, oversized lines dropped). With
 * end true a kept partial line is processed as complete (client close).
 * For fuzzing and benchmarks; not concurrently with the loop. */
void gh_telemetry_ingest(struct gh_telemetry *t, const char *buf, size_t len, bool end);

/* Counters. Thread-safe. */
struct gh_telemetry_stats {
    uint64_t bytes;
    uint64_t lines;            /* non-blank lines seen, oversized included */
    uint64_t accepted;         /* decoded and valid */
    uint64_t rejected;         /* bad lines, oversized included */
    uint64_t oversized;
    uint64_t emitted;
    uint64_t steps_coalesced;  /* step lines not emitted (step_emit_interval_ns) */
    uint64_t clients_total;    /* connections accepted */
    uint64_t clients_refused;  /* closed at once: max_clients reached */
    uint64_t clients_now;
    uint64_t ranks;            /* per-rank records held */
    uint64_t ranks_dropped;    /* step lines of new ranks beyond max_ranks */
    uint64_t restarts_delivered; /* restart requests written to a pod's connection(s) */
    uint64_t restarts_no_client; /* restart requests of a pod with no connection open */
};
void gh_telemetry_stats(struct gh_telemetry *t, struct gh_telemetry_stats *out);

/* A rejected line. reason is the codec's detail or ours ("line N: ..."
 * where N counts the client's lines); line holds its start (NUL-terminated,
 * non-printable bytes as '?'). */
struct gh_telemetry_reject {
    uint64_t client;           /* connection number, 1-based (0 = ingest) */
    char reason[160];
    char line[96];
};
/* Copies up to cap recent rejects, oldest first; returns how many. Thread-safe. */
size_t gh_telemetry_rejects(struct gh_telemetry *t, struct gh_telemetry_reject *out, size_t cap);

/* The latest step of one rank. */
struct gh_telemetry_rank {
    char job[128];             /* cut at 127 bytes */
    int rank;
    char node[64];             /* "" when unknown */
    int gpu;                   /* -1 when absent */
    int64_t step;
    double step_ms;
    bool has_comm_ms;
    double comm_ms;
    int64_t ts_ns;             /* the line's ts */
    uint64_t lines;            /* step lines seen for this rank */
};
/* Copies the record of (job, rank) (both borrowed). GH_ENOTFOUND. Thread-safe. */
int gh_telemetry_rank(struct gh_telemetry *t, const char *job, int rank,
                      struct gh_telemetry_rank *out);
/* Calls fn for each record (under the table's lock: fn must be quick and
 * must not call into t). Returns the number visited. */
size_t gh_telemetry_ranks(struct gh_telemetry *t,
                          void (*fn)(void *ctx, const struct gh_telemetry_rank *r), void *ctx);

/* A restart request for the processes of pod pod_uid (the controller's
 * annotation restart.gpuheal.io/<pod UID> on this node's GPUNodeHealth,
 * control/job_inplace.h; agent/requests.c reads it): written once, as the
 * line {"kind":"restart","id":ID,"incident":INC,"exit_code":N}, to every
 * connection of that pod that was open when the request was first seen
 * (a process that starts after it - the restarted one - never gets it);
 * the python reporter exits with exit_code, which the pod's restart rule
 * maps to RestartAllContainers. The same (pod, id) again is ignored (the
 * last GH_TELEMETRY_RESTARTS_KEEP are remembered). Thread-safe: queued
 * and handled by the loop. GH_EINVAL (empty uid or id, code outside
 * 1..255), GH_ELIMIT (queue full). */
#define GH_TELEMETRY_RESTARTS_KEEP 512
int gh_telemetry_restart(struct gh_telemetry *t, const char *pod_uid, const char *id,
                         const char *incident, int exit_code, struct gh_err *err);

/* Closes every client and the socket, unlinks the socket file,
 * frees. Accepts NULL. */
void gh_telemetry_free(struct gh_telemetry *t);

#endif
