/* kmsg_wrap.h - the wrapper decoding of the kernel-log parser: what comes
 * before the kernel message on a line (a /dev/kmsg record prefix
 * "prio,seq,usec,flags;", a syslog/RFC 5424 header, journald, dmesg and
 * forwarder stamps, host names, "kernel:" tags, level words), with the
 * stamps it carries. Reads s[0..n) only; no allocation. */
#ifndef GH_SIGNAL_KMSG_WRAP_H
#define GH_SIGNAL_KMSG_WRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "signal/kmsg_stamp.h"

/* What the wrapper of one line held. */
struct gh_kmsg_wrap {
    size_t msg_off; /* where the kernel message starts */
    bool has_wall, has_mono, has_seq;
    int64_t wall_ns, mono_ns; /* UTC ns; ns since boot */
    uint64_t seq;             /* /dev/kmsg record sequence number */
};

/* "prio,seq,usec,flags[,...];" at the start of a /dev/kmsg record: *seq,
 * *usec (since boot) and *off (where the text starts). */
bool gh_kmsg_wrap_record(const char *s, size_t n, uint64_t *seq, int64_t *usec, size_t *off);

/* Strips the wrappers in front of the kernel message of the line s[0..n)
 * into *w (overwritten); the first wall-clock and since-boot stamps win. */
void gh_kmsg_wrap_parse(const struct gh_kmsg_zone *z, const char *s, size_t n,
                        struct gh_kmsg_wrap *w);

#endif
