/* kmsg_parse.c - `gpuheal kmsg-parse`: kernel-log text in, signals (spec
 * section 1) out as JSON lines; or each line's label; or a per-GPU summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/gpuheal/commands.h"
#include "signal/kmsg.h"
#include "signal/signal_json.h"
#include "signal/xid_catalog.h"

#define SUMMARY_DEVICES 256
#define SUMMARY_CODES 32

/* One device (GPU, switch, NIC, PCIe port) seen in the log. */
struct device_summary {
    char pci[32];
    char uuid[64];
    int n_codes;
    /* xid/sxid by code; other kinds by counter name (or none, e.g. gpu_lost) */
    struct code_count {
        enum gh_kind kind;
        int code;
        char counter[40];
        unsigned count;
    } codes[SUMMARY_CODES];
};

struct summary {
    int n;
    unsigned dropped; /* signals of devices beyond SUMMARY_DEVICES */
    struct device_summary dev[SUMMARY_DEVICES];
};

struct run {
    enum { MODE_SIGNALS, MODE_LABELS, MODE_SUMMARY } mode;
    struct gh_kmsg_parser *parser;
    struct summary *summary;
    FILE *out;
};

static int on_signal(void *ctx, const struct gh_signal *s)
{
    struct run *r = ctx;
    if (r->mode == MODE_SIGNALS) {
        struct gh_err err;
        if (gh_signal_write(r->out, s, &err)) {
            fprintf(stderr, "gpuheal kmsg-parse: writing a signal: %s\n", err.msg);
            return GH_EIO;
        }
        return GH_OK;
    }
    if (r->mode != MODE_SUMMARY)
        return GH_OK;
    struct summary *sum = r->summary;
    const char *pci = s->pci ? s->pci : "(no pci)";
    struct device_summary *d = NULL;
    for (int i = 0; i < sum->n && !d; i++)
        if (strcmp(sum->dev[i].pci, pci) == 0)
            d = &sum->dev[i];
    if (!d) {
        if (sum->n == SUMMARY_DEVICES) {
            sum->dropped++;
            return GH_OK;
        }
        d = &sum->dev[sum->n++];
        snprintf(d->pci, sizeof d->pci, "%s", pci);
    }
    const char *uuid = s->pci ? gh_kmsg_parser_uuid(r->parser, s->pci) : NULL;
    if (uuid)
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
    bool by_code = s->kind == GH_KIND_XID || s->kind == GH_KIND_SXID;
    int code = by_code ? s->code : -1;
    const char *counter = !by_code && s->counter ? s->counter : "";
    int i = 0;
    while (i < d->n_codes && !(d->codes[i].kind == s->kind && d->codes[i].code == code &&
                               strcmp(d->codes[i].counter, counter) == 0))
        i++;
    if (i == d->n_codes && d->n_codes < SUMMARY_CODES) {
        struct code_count *c = &d->codes[d->n_codes++];
        *c = (struct code_count){.kind = s->kind, .code = code};
        snprintf(c->counter, sizeof c->counter, "%s", counter);
    }
    if (i < d->n_codes)
        d->codes[i].count++;
    return GH_OK;
}

static void on_line(void *ctx, const char *line, size_t len, const struct gh_kmsg_label *label)
{
    struct run *r = ctx;
    char buf[GH_KMSG_LABEL_MAX];
    /* fwrite, not %.*s: the line is echoed byte for byte, NULs included */
    fprintf(r->out, "%s\t", gh_kmsg_label_format(label, buf, sizeof buf));
    fwrite(line, 1, len, r->out);
    fputc('\n', r->out);
}

static void print_summary(const struct summary *sum, const char *node, FILE *out)
{
    fprintf(out, "node %s: %d device(s) with signals\n", node ? node : "-", sum->n);
    for (int i = 0; i < sum->n; i++) {
        const struct device_summary *d = &sum->dev[i];
        fprintf(out, "  %s%s%s\n", d->pci, d->uuid[0] ? "  " : "", d->uuid);
        for (int c = 0; c < d->n_codes; c++) {
            if (d->codes[c].kind != GH_KIND_XID && d->codes[c].kind != GH_KIND_SXID) {
                fprintf(out, "    %-8s x%-4u %s\n", gh_kind_name(d->codes[c].kind),
                        d->codes[c].count, d->codes[c].counter);
                continue;
            }
            if (d->codes[c].kind == GH_KIND_SXID) {
                fprintf(out, "    sxid %-5d x%-4u NVSwitch error\n", d->codes[c].code,
                        d->codes[c].count);
                continue;
            }
            const struct gh_xid_info *x = gh_xid_lookup(d->codes[c].code);
            char actions[160] = "";
            size_t used = 0;
            for (int a = 0; a < x->n_actions && used < sizeof actions; a++)
                used += (size_t)snprintf(actions + used, sizeof actions - used, "%s%s",
                                         a ? "," : "", gh_action_name(x->actions[a]));
            fprintf(out, "    xid  %-5d x%-4u %-13s %-8s -> %s (%s)\n", d->codes[c].code,
                    d->codes[c].count, gh_class_name(x->cls), gh_severity_name(x->severity),
                    actions, x->summary);
        }
    }
    if (sum->dropped)
        fprintf(out, "  (%u signals of further devices not shown)\n", sum->dropped);
}

/* Wall-clock time of this host's boot: CLOCK_REALTIME - CLOCK_BOOTTIME. */
static int64_t this_host_boot_time(void)
{
    struct timespec real, boot;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    return ((int64_t)real.tv_sec - boot.tv_sec) * GH_NS_PER_S + (real.tv_nsec - boot.tv_nsec);
}

/* "Z", "+HH:MM", "-HHMM", "+HH" -> seconds east of UTC. */
static bool parse_offset(const char *s, int32_t *out)
{
    if (strcmp(s, "Z") == 0 || strcmp(s, "z") == 0) {
        *out = 0;
        return true;
    }
    int sign = s[0] == '-' ? -1 : s[0] == '+' ? 1 : 0;
    if (!sign)
        return false;
    const char *p = s + 1;
    int d[4], nd = 0;
    for (; *p && nd < 4; p++) {
        if (*p == ':' && nd == 2)
            continue;
        if (*p < '0' || *p > '9')
            return false;
        d[nd++] = *p - '0';
    }
    if (*p || (nd != 2 && nd != 4))
        return false;
    int h = d[0] * 10 + d[1], m = nd == 4 ? d[2] * 10 + d[3] : 0;
    if (h > 14 || m > 59)
        return false;
    *out = sign * (h * 3600 + m * 60);
    return true;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuheal kmsg-parse [--node NAME] [--labels | --summary] [--year YYYY]\n"
            "                          [--utc-offset Z] [--boot-time RFC3339|auto] [FILE|-]\n"
            "Reads kernel-log text (raw /dev/kmsg records, dmesg, dmesg -T, syslog,\n"
            "journald) and writes the NVIDIA GPU/NVSwitch/PCIe/NIC events in it as signals\n"
            "(JSON lines, spec section 1). Lines that look like an Xid/SXid but do not\n"
            "parse are reported on stderr with the reason.\n"
            "  --node NAME       node name on the signals (default: this host's name)\n"
            "  --labels          print each line's label (NOMATCH, MATCH xid=N, ...), a tab\n"
            "                    and the line, in the format of the labelled samples\n"
            "  --summary         a per-device table with the XID catalog's verdicts\n"
            "  --year YYYY       year of syslog stamps that carry none (default: now)\n"
            "  --utc-offset Z    zone of wall-clock stamps that carry none (syslog,\n"
            "                    dmesg -T): \"+01:00\", \"-0500\", \"Z\" (default: UTC)\n"
            "  --boot-time T     wall time of boot (RFC 3339), to place since-boot stamps\n"
            "                    ([1234.5], /dev/kmsg records) on the wall clock; \"auto\"\n"
            "                    means this host's boot (the default when FILE is\n"
            "                    /dev/kmsg); otherwise such lines get the time they are read\n");
}

int gh_cmd_kmsg_parse(int argc, char **argv)
{
    struct run r = {.mode = MODE_SIGNALS, .out = stdout};
    struct gh_kmsg_opts opts;
    gh_kmsg_opts_init(&opts);
    char host[256] = "";
    const char *path = "-";
    bool path_given = false;
    int status = 1;
    FILE *in = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--node") == 0 && i + 1 < argc) {
            opts.node = argv[++i];
        } else if (strcmp(a, "--labels") == 0) {
            r.mode = MODE_LABELS;
        } else if (strcmp(a, "--summary") == 0) {
            r.mode = MODE_SUMMARY;
        } else if (strcmp(a, "--year") == 0 && i + 1 < argc) {
            char *end;
            long y = strtol(argv[++i], &end, 10);
            if (*end || y < 1970 || y > 9999) {
                fprintf(stderr, "gpuheal kmsg-parse: --year: \"%s\" is not a year\n", argv[i]);
                return 2;
            }
            opts.default_year = (int)y;
        } else if (strcmp(a, "--utc-offset") == 0 && i + 1 < argc) {
            if (!parse_offset(argv[++i], &opts.tz_offset_s)) {
                fprintf(stderr, "gpuheal kmsg-parse: --utc-offset: \"%s\" is not +HH:MM\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--boot-time") == 0 && i + 1 < argc) {
            const char *t = argv[++i];
            if (strcmp(t, "auto") == 0) {
                opts.boot_time_ns = this_host_boot_time();
            } else if (!gh_time_parse_rfc3339(t, strlen(t), &opts.boot_time_ns)) {
                fprintf(stderr, "gpuheal kmsg-parse: --boot-time: \"%s\" is not RFC 3339\n", t);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "gpuheal kmsg-parse: unknown option \"%s\"\n", a);
            usage(stderr);
            return 2;
        } else if (path_given) {
            fprintf(stderr, "gpuheal kmsg-parse: one FILE only (got \"%s\" and \"%s\")\n", path,
                    a);
            return 2;
        } else {
            path = a;
            path_given = true;
        }
    }
    if (strcmp(path, "/dev/kmsg") == 0 && opts.boot_time_ns == GH_KMSG_BOOT_UNKNOWN)
        opts.boot_time_ns = this_host_boot_time();
    if (!opts.node) {
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "unknown");
        opts.node = host;
    }
    if (r.mode == MODE_SUMMARY && !(r.summary = calloc(1, sizeof *r.summary))) {
        fprintf(stderr, "gpuheal kmsg-parse: out of memory\n");
        return 1;
    }
    opts.emit = on_signal;
    opts.emit_ctx = &r;
    if (r.mode == MODE_LABELS) {
        opts.on_line = on_line;
        opts.line_ctx = &r;
    }

    struct gh_err err;
    if (gh_kmsg_parser_new(&r.parser, &opts, &err)) {
        fprintf(stderr, "gpuheal kmsg-parse: %s\n", err.msg);
        goto out;
    }
    in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!in) {
        fprintf(stderr, "gpuheal kmsg-parse: %s: %s\n", path, strerror(errno));
        goto out;
    }
    static char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (gh_kmsg_parser_feed(r.parser, buf, n, &err)) {
            fprintf(stderr, "gpuheal kmsg-parse: %s\n", err.msg);
            goto out;
        }
    }
    if (ferror(in)) {
        fprintf(stderr, "gpuheal kmsg-parse: %s: read error: %s\n", path, strerror(errno));
        goto out;
    }
    if (gh_kmsg_parser_flush(r.parser, &err)) {
        fprintf(stderr, "gpuheal kmsg-parse: %s\n", err.msg);
        goto out;
    }
    if (r.mode == MODE_SUMMARY)
        print_summary(r.summary, opts.node, stdout);

    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(r.parser, &st);
    if (st.rejected) {
        struct gh_kmsg_reject rej[GH_KMSG_REJECTS_KEEP];
        size_t k = gh_kmsg_parser_rejects(r.parser, rej, GH_KMSG_REJECTS_KEEP);
        fprintf(stderr,
                "gpuheal kmsg-parse: %llu line(s) looked like an Xid/SXid record but did not "
                "parse%s:\n",
                (unsigned long long)st.rejected, st.rejected > k ? " (latest shown)" : "");
        for (size_t i = 0; i < k; i++)
            fprintf(stderr, "  line %llu: %s: %s\n", (unsigned long long)rej[i].line_no,
                    rej[i].reason, rej[i].line);
    }
    if (st.unplaced)
        fprintf(stderr,
                "gpuheal kmsg-parse: warning: %llu event(s) carry only a since-boot stamp "
                "(\"[5123.001122]\") and no boot time is known, so each got the time it was "
                "read, not when it happened; pass --boot-time RFC3339 (the logging host's boot "
                "time; \"auto\" on that host itself)\n",
                (unsigned long long)st.unplaced);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "gpuheal kmsg-parse: writing output: %s\n", strerror(errno));
        goto out;
    }
    status = 0;
out:
    if (in && in != stdin)
        fclose(in);
    gh_kmsg_parser_free(r.parser);
    free(r.summary);
    return status;
}
