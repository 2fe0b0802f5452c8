/* bench/kmsg.c - measures the kernel-log parser on one core: builds a large
 * synthetic log in memory (default 1 GiB; ~1% Xid/SXid lines among realistic
 * kernel noise in dmesg, dmesg -T, syslog, journald-ISO and /dev/kmsg
 * wrappers, some noise deliberately holding trigger words), feeds it through
 * gh_kmsg_parser_feed() in chunks and prints MB/s, lines/s and what was
 * emitted.
 *
 *   kmsg [--size BYTES[K|M|G]] [--chunk BYTES[K|M|G]] [--xid-permille N]
 *        [--repeat N] [--seed N] [--write FILE]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timeutil.h"
#include "signal/kmsg.h"

struct rng {
    uint64_t s;
};

static uint32_t rnd(struct rng *r)
{
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(r->s >> 33);
}

static uint32_t pick(struct rng *r, uint32_t n)
{
    return rnd(r) % n;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30, end++;
    if (*end)
        return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const wdays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

/* The wrapper of one line; w selects the style, t is seconds since boot. */
static int wrap(char *buf, size_t cap, int w, double t, uint64_t seq, struct rng *r)
{
    int sec = (int)t % 86400;
    switch (w) {
    case 0:
        return snprintf(buf, cap, "[%12.6f] ", t);
    case 1:
        return snprintf(buf, cap, "[%s %s %2d %02d:%02d:%02d 2025] ", wdays[pick(r, 7)],
                        months[10], 1 + (int)(t / 86400) % 28, sec / 3600, sec / 60 % 60, sec % 60);
    case 2:
        return snprintf(buf, cap, "Nov %2d %02d:%02d:%02d gpu-node-%03u kernel: ",
                        1 + (int)(t / 86400) % 28, sec / 3600, sec / 60 % 60, sec % 60,
                        pick(r, 512));
    case 3:
        return snprintf(buf, cap, "2025-11-%02dT%02d:%02d:%02d.%06uZ gpu-node-%03u kernel: ",
                        1 + (int)(t / 86400) % 28, sec / 3600, sec / 60 % 60, sec % 60,
                        pick(r, 1000000), pick(r, 512));
    default:
        return snprintf(buf, cap, "%u,%llu,%llu,-;", 3 + pick(r, 4), (unsigned long long)seq,
                        (unsigned long long)(t * 1e6));
    }
}

static int noise(char *buf, size_t cap, struct rng *r)
{
    uint32_t a = rnd(r), b = rnd(r);
    switch (pick(r, 16)) {
    case 0:
        return snprintf(buf, cap, "eth0: renamed from veth%08x", a);
    case 1:
        return snprintf(buf, cap, "IPv6: ADDRCONF(NETDEV_CHANGE): cali%08x%03x: link becomes ready",
                        a, b % 4096);
    case 2:
        return snprintf(buf, cap,
                        "audit: type=1400 audit(1732867%03u.%03u:%u): apparmor=\"DENIED\" "
                        "operation=\"open\" profile=\"cri-containerd.apparmor.d\" "
                        "name=\"/proc/%u/status\" pid=%u comm=\"python3\" requested_mask=\"r\" "
                        "denied_mask=\"r\" fsuid=0 ouid=0",
                        a % 1000, b % 1000, a % 100000, b % 4000000, a % 4000000);
    case 3:
        return snprintf(buf, cap, "cni0: port %u(veth%08x) entered forwarding state", a % 64, b);
    case 4:
        return snprintf(buf, cap,
                        "systemd[1]: Started cri-containerd-%08x%08x.scope - libcontainer "
                        "container %08x%08x.",
                        a, b, b, a);
    case 5:
        return snprintf(buf, cap, "nvme nvme%u: I/O %u QID %u timeout, completion polled", a % 8,
                        b % 1024, a % 64);
    case 6:
        return snprintf(buf, cap, "kauditd_printk_skb: %u callbacks suppressed", a % 500);
    case 7:
        return snprintf(buf, cap,
                        "Memory cgroup out of memory: Killed process %u (python3) "
                        "total-vm:%ukB, anon-rss:%ukB, file-rss:0kB, shmem-rss:0kB, UID:0 "
                        "pgtables:%ukB oom_score_adj:%u",
                        a % 4000000, b % 90000000, a % 80000000, b % 200000, a % 1000);
    case 8:
        return snprintf(buf, cap, "bond0: (slave ens%uf%u): link status definitely up, 100000 Mbps full duplex",
                        a % 8, b % 2);
    case 9:
        return snprintf(buf, cap, "INFO: task kworker/%u:%u:%u blocked for more than 122 seconds.",
                        a % 128, b % 4, a % 100000);
    case 10:
        return snprintf(buf, cap, "EXT4-fs (nvme0n1p%u): mounted filesystem %08x-%04x with ordered data mode. Quota mode: none.",
                        a % 4, b, a % 65536);
    case 11:
        return snprintf(buf, cap, "TCP: request_sock_TCP: Possible SYN flooding on port %u. Sending cookies.  Check SNMP counters.",
                        a % 65536);
    /* noise that carries trigger words and reaches the slow path */
    case 12:
        if (a % 8)
            return snprintf(buf, cap, "xfs filesystem being mounted at /var/lib/kubelet/pods/%08x supports timestamps until 2038 (0x7fffffff)", b);
        return snprintf(buf, cap, "mlx5_core 0000:%02x:00.0 mlx5_%u: Port: 1 Link ACTIVE", b % 256, a % 8);
    case 13:
        if (a % 8)
            return snprintf(buf, cap, "device veth%08x entered promiscuous mode", b);
        return snprintf(buf, cap, "NVRM: GPU%u _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.", b % 8);
    case 14:
        if (a % 8)
            return snprintf(buf, cap, "hrtimer: interrupt took %u ns", b % 100000);
        return snprintf(buf, cap, "pcieport 0000:%02x:01.0: AER: enabled with IRQ %u", b % 256, a % 200);
    default:
        if (a % 8)
            return snprintf(buf, cap, "perf: interrupt took too long (%u > %u), lowering kernel.perf_event_max_sample_rate to %u",
                            a % 10000, b % 10000, a % 100000);
        return snprintf(buf, cap, "python3[%u]: segfault at 0 ip 0000%08x sp 00007ffd%08x error 4 in libc.so.6[7f%08x+195000]",
                        a % 4000000, b, a, b);
    }
}

static const char *const names[] = {"python3", "pt_main_thread", "ray::WorkerDict", "nvidia-smi",
                                    "<unknown>"};

static int interesting(char *buf, size_t cap, struct rng *r)
{
    uint32_t a = rnd(r), b = rnd(r);
    unsigned bus = (a >> 8) % 256, dom = (a % 4 == 0) ? 8 + b % 16 : 0;
    const char *name = names[b % 5];
    switch (pick(r, 8)) {
    case 0:
        return snprintf(buf, cap,
                        "NVRM: Xid (PCI:%04x:%02x:00): 31, pid=%u, name=%s, Ch 000000%02x, intr "
                        "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_%u faulted @ "
                        "0x7f%02x_%08x. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
                        dom, bus, a % 4000000, name, b % 256, a % 16, b % 256, a);
    case 1:
        return snprintf(buf, cap, "NVRM: Xid (PCI:%04x:%02x:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                        dom, bus);
    case 2:
        return snprintf(buf, cap, "NVRM: Xid (PCI:%04x:%02x:00 GPU-I:%02u GPU-CI:%02u): 43, pid=%u, name=%s, Ch 000000%02x",
                        dom, bus, a % 8, b % 4, a % 4000000, name, b % 256);
    case 3:
        return snprintf(buf, cap,
                        "NVRM: Xid (PCI:%04x:%02x:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link %02u "
                        "(0x%08x 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
                        8 + b % 16, 1, a % 18, b);
    case 4:
        return snprintf(buf, cap, "NVRM: Xid (PCI:%04x:%02x:00): 119, pid=%u, name=%s, Timeout after 6s of waiting for RPC response from GPU%u GSP! Expected function 76 (GSP_RM_CONTROL) (0x%x 0x%x).",
                        dom, bus, a % 4000000, name, b % 8, a, b % 4096);
    case 5:
        return snprintf(buf, cap, "nvidia-nvswitch%u: SXid (PCI:0000:%02x:00.0): 20034, Fatal, Link %u LTSSM Fault Up",
                        a % 4, 5 + b % 4, a % 64);
    case 6:
        return snprintf(buf, cap, "nvidia-nvswitch%u: SXid (PCI:0000:%02x:00.0): 20034, Data {0x%08x, 0x%08x, 0x00000000, 0x10000000}",
                        a % 4, 5 + b % 4, a, b);
    default:
        return snprintf(buf, cap, "nvidia-nvswitch%u: SXid (PCI:0000:%02x:00.0): 12028, Non-fatal, Link %u egress non-posted PRIV error (First)",
                        a % 4, 5 + b % 4, a % 64);
    }
}

struct counts {
    uint64_t by_kind[GH_KIND__COUNT];
    uint64_t total;
};

static int on_signal(void *ctx, const struct gh_signal *s)
{
    struct counts *c = ctx;
    c->by_kind[s->kind]++;
    c->total++;
    return 0;
}

static int64_t fixed_now(void *ctx)
{
    (void)ctx;
    return 1764403200LL * GH_NS_PER_S;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int usage(void)
{
    fprintf(stderr, "usage: kmsg [--size BYTES[K|M|G]] [--chunk BYTES[K|M|G]] "
                    "[--xid-permille N] [--repeat N] [--seed N] [--write FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t size = 1ULL << 30, chunk = 1ULL << 20, permille = 10, repeat = 3, seed = 42;
    const char *write_to = NULL;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = NULL;
        if (strcmp(argv[i], "--size") == 0)
            dst = &size;
        else if (strcmp(argv[i], "--chunk") == 0)
            dst = &chunk;
        else if (strcmp(argv[i], "--xid-permille") == 0)
            dst = &permille;
        else if (strcmp(argv[i], "--repeat") == 0)
            dst = &repeat;
        else if (strcmp(argv[i], "--seed") == 0)
            dst = &seed;
        else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) {
            write_to = argv[++i];
            continue;
        } else
            return usage();
        if (i + 1 >= argc || parse_size(argv[++i], dst))
            return usage();
    }
    if (!size || !chunk || !repeat || permille > 1000)
        return usage();

    char *log = malloc(size + 4096);
    if (!log) {
        fprintf(stderr, "kmsg bench: cannot allocate %llu bytes\n", (unsigned long long)size);
        return 1;
    }
    struct rng r = {seed};
    size_t len = 0;
    uint64_t lines = 0, hot = 0, seq = 1;
    double t = 1.0;
    int w = 0;
    double g0 = now_s();
    while (len < size) {
        if (lines % 4096 == 0)
            w = (int)pick(&r, 5);
        char *p = log + len;
        size_t cap = size + 4096 - len;
        if (cap < 1024)
            break;
        int k = wrap(p, cap, w, t, seq++, &r);
        int m;
        if (pick(&r, 1000) < permille) {
            m = interesting(p + k, cap - (size_t)k, &r);
            hot++;
        } else {
            m = noise(p + k, cap - (size_t)k, &r);
        }
        len += (size_t)(k + m);
        log[len++] = '\n';
        lines++;
        t += (double)pick(&r, 2000) / 1e6;
    }
    double gen_s = now_s() - g0;
    if (write_to) {
        FILE *f = fopen(write_to, "wb");
        if (!f || fwrite(log, 1, len, f) != len || fclose(f)) {
            fprintf(stderr, "kmsg bench: cannot write %s\n", write_to);
            return 1;
        }
    }
    printf("log: %zu bytes, %llu lines (%.2f%% Xid/SXid), avg line %.1f bytes, generated in %.2f s\n",
           len, (unsigned long long)lines, 100.0 * (double)hot / (double)lines,
           (double)len / (double)lines, gen_s);

    const struct gh_clock clock = {fixed_now, NULL};
    double best = 1e30;
    struct counts best_counts = {{0}, 0};
    struct gh_kmsg_stats st = {0};
    for (uint64_t rep = 0; rep < repeat; rep++) {
        struct counts c = {{0}, 0};
        struct gh_kmsg_opts o;
        gh_kmsg_opts_init(&o);
        o.node = "bench";
        o.clock = &clock;
        o.boot_time_ns = 1761955200LL * GH_NS_PER_S;
        o.emit = on_signal;
        o.emit_ctx = &c;
        struct gh_kmsg_parser *p;
        struct gh_err err = {{0}};
        if (gh_kmsg_parser_new(&p, &o, &err)) {
            fprintf(stderr, "kmsg bench: %s\n", err.msg);
            return 1;
        }
        double t0 = now_s();
        for (size_t off = 0; off < len; off += chunk) {
            size_t n = len - off < chunk ? len - off : chunk;
            if (gh_kmsg_parser_feed(p, log + off, n, &err)) {
                fprintf(stderr, "kmsg bench: %s\n", err.msg);
                return 1;
            }
        }
        if (gh_kmsg_parser_flush(p, &err)) {
            fprintf(stderr, "kmsg bench: %s\n", err.msg);
            return 1;
        }
        double dt = now_s() - t0;
        gh_kmsg_parser_stats(p, &st);
        gh_kmsg_parser_free(p);
        printf("run %llu: %.3f s, %.0f MB/s\n", (unsigned long long)rep + 1, dt,
               (double)len / dt / 1e6);
        if (dt < best) {
            best = dt;
            best_counts = c;
        }
    }
    printf("parse (best of %llu, chunk %llu bytes, one core): %.3f s, %.0f MB/s (%.2f GiB/s), "
           "%.1f M lines/s\n",
           (unsigned long long)repeat, (unsigned long long)chunk, best, (double)len / best / 1e6,
           (double)len / best / (double)(1ULL << 30), (double)st.lines / best / 1e6);
    printf("lines %llu, matched %llu (xid %llu, sxid %llu, other %llu), rejected %llu, "
           "folded %llu\n",
           (unsigned long long)st.lines, (unsigned long long)st.matched,
           (unsigned long long)st.xid_lines, (unsigned long long)st.sxid_lines,
           (unsigned long long)st.other_lines, (unsigned long long)st.rejected,
           (unsigned long long)st.folded);
    printf("signals %llu: xid %llu, sxid %llu, other %llu\n", (unsigned long long)best_counts.total,
           (unsigned long long)best_counts.by_kind[GH_KIND_XID],
           (unsigned long long)best_counts.by_kind[GH_KIND_SXID],
           (unsigned long long)(best_counts.total - best_counts.by_kind[GH_KIND_XID] -
                                best_counts.by_kind[GH_KIND_SXID]));
    free(log);
    return 0;
}
