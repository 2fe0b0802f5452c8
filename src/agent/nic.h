/* nic.h - the agent's InfiniBand/RoCE source: port state and error counters
 * read from sysfs (<root>/<device>/ports/<n>/state and .../counters/<name>,
 * root /sys/class/infiniband), emitted as nic signals (source "host").
 *
 * Each poll rescans devices and ports (adapters come and go with driver
 * resets). The first sight of a port sets its baselines silently. After
 * that:
 * - a watched error counter that moves up: one signal (counter = the file
 *   name, count = its cumulative value, state = the port's state); a
 *   counter that goes down (reset) is re-baselined silently;
 * - a state change (state "4: ACTIVE" is up, anything else - DOWN, INIT,
 *   ARMED - is down): one signal with counter "link_state", state = the new
 *   state, count = the number of up -> down transitions (flaps) this source
 *   has seen on the port; msg "mlx5_0 port 1: ACTIVE -> DOWN";
 * - a port that disappears while up: a link_state signal with state down.
 * The device's PCI address (from <root>/<device>/device, a symlink in real
 * sysfs) is set on signals when it can be read.
 *
 * Watched counters: opts.counters, or by default the error counters of
 * GH_NIC_DEFAULT_COUNTERS (traffic counters such as port_xmit_data move all
 * the time and are never watched).
 *
 * Driving: gh_nic_source_start() (a thread polling every poll_interval_ns)
 * or gh_nic_source_poll_once() from the caller's loop (sysfs reads are
 * quick, a few hundred microseconds per port). Not both. emit is called
 * from the polling thread, never concurrently with itself. */
#ifndef GH_AGENT_NIC_H
#define GH_AGENT_NIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/timeutil.h"
#include "signal/signal.h"

#define GH_NIC_DEFAULT_ROOT "/sys/class/infiniband"
#define GH_NIC_MAX_PORTS 64
#define GH_NIC_MAX_COUNTERS 32

/* Comma-separated default watch list. */
#define GH_NIC_DEFAULT_COUNTERS                                                         \
    "link_downed,link_error_recovery,symbol_error,port_rcv_errors,"                     \
    "port_rcv_remote_physical_errors,port_rcv_switch_relay_errors,port_xmit_discards,"  \
    "port_xmit_constraint_errors,port_rcv_constraint_errors,"                           \
    "local_link_integrity_errors,excessive_buffer_overrun_errors,VL15_dropped"

/* Receives each signal (borrowed for the call). */
typedef void (*gh_nic_emit_fn)(void *ctx, const struct gh_signal *s);

struct gh_nic_opts {
    const char *root;           /* copied; NULL = GH_NIC_DEFAULT_ROOT (tests: a temp tree) */
    const char *node;           /* copied; required */
    const char *counters;       /* copied; comma-separated names; NULL = default list */
    int64_t poll_interval_ns;   /* 0 = 5 s */
    const struct gh_clock *clock; /* borrowed; NULL = real; signal timestamps */
    gh_nic_emit_fn emit;        /* required */
    void *emit_ctx;
};

/* Zeroes *o (all defaults). */
void gh_nic_opts_init(struct gh_nic_opts *o);

struct gh_nic_source;

/* *out: caller frees with gh_nic_source_free(). A root that does not exist
 * is not an error (no adapters yet: polls find nothing). GH_EINVAL (no node,
 * too many counters), GH_ENOMEM. */
int gh_nic_source_new(const struct gh_nic_opts *opts, struct gh_nic_source **out,
                      struct gh_err *err);

/* One scan: emits what changed. GH_OK; GH_ELIMIT when more than
 * GH_NIC_MAX_PORTS ports exist (the first ones are watched). */
int gh_nic_source_poll_once(struct gh_nic_source *src, struct gh_err *err);

/* Starts / stops the polling thread (stop returns promptly, idempotent). */
int gh_nic_source_start(struct gh_nic_source *src, struct gh_err *err);
void gh_nic_source_stop(struct gh_nic_source *src);

/* One port as of the latest poll, for /metrics. */
struct gh_nic_port_info {
    char device[64];
    int port;
    bool present;              /* seen in the latest poll */
    bool up;
    char state[32];            /* as read, e.g. "4: ACTIVE" */
    uint64_t flaps;            /* up -> down transitions seen */
    uint64_t errors;           /* sum of the watched counters */
};
/* Copies up to cap ports; returns how many. Thread-safe. */
size_t gh_nic_source_ports(struct gh_nic_source *src, struct gh_nic_port_info *out, size_t cap);

struct gh_nic_stats {
    uint64_t polls, signals, read_errors;
};
void gh_nic_source_stats(struct gh_nic_source *src, struct gh_nic_stats *out);

/* Stops and frees. Accepts NULL. */
void gh_nic_source_free(struct gh_nic_source *src);

#endif
