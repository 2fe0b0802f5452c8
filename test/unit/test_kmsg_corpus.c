/* test_kmsg_corpus.c - scores the kernel-log parser on whole labelled corpora
 * at the signal level, against an oracle written from the driver's formats
 * (gpu-signals.md 2.1-2.5) with POSIX regular expressions, independent of the
 * parser's own code: every MATCH xid/sxid line is exactly one signal of that
 * kind, code and PCI address (SXid continuation lines folded into the open
 * event of their switch and code instead), GPU-lost lines give gpu_lost, AER
 * lines give pcie with the right counter and device, NOMATCH gives nothing,
 * and each signal's time is the line's own wall clock when its wrapper has
 * one. Also: the same message in every wrapper of 2.6, and lines that are not
 * clean text (CRLF, NUL, invalid UTF-8, very long) still give valid signals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "signal/kmsg.h"
#include "signal/signal.h"
#include "signal/signal_json.h"
#include "kmsg_fixture.h"

/* 2026-11-29T08:00:00Z, a boot at 2026-11-01T00:00:00Z */
#define NOW_NS (1795939200LL * GH_NS_PER_S)
#define BOOT_NS (1793491200LL * GH_NS_PER_S)
#define MAX_LINES 4096
#define FOLD_WINDOW GH_KMSG_FOLD_LINES

static int64_t now_ns = NOW_NS;
static const struct gh_clock test_clock = {clock_fixed, &now_ns};

/* Signals collected from one run (owned). */
struct coll {
    struct gh_kmsg_parser *p;
    struct rec *v;
    size_t n, cap;
};

static int collect(void *ctx, const struct gh_signal *s)
{
    struct coll *c = ctx;
    rec_push(&c->v, &c->n, &c->cap, s, c->p);
    return 0;
}

static void coll_new(struct coll *c, int32_t tz)
{
    memset(c, 0, sizeof *c);
    struct gh_kmsg_opts o;
    gh_kmsg_opts_init(&o);
    o.node = "gpu-17";
    o.clock = &test_clock;
    o.boot_time_ns = BOOT_NS;
    o.default_year = 2025;
    o.tz_offset_s = tz;
    o.emit = collect;
    o.emit_ctx = c;
    struct gh_err err = {{0}};
    if (gh_kmsg_parser_new(&c->p, &o, &err))
        fail_msg("parser_new: %s", err.msg);
}

static void coll_free(struct coll *c)
{
    rec_free_all(c->v, c->n);
    gh_kmsg_parser_free(c->p);
    memset(c, 0, sizeof *c);
}

/* ---- the corpus --------------------------------------------------------------- */

/* Labelled lines of one file (owned): raw[i] is NUL-terminated. */
struct corpus {
    char *raw[MAX_LINES];
    struct gh_kmsg_label want[MAX_LINES];
    size_t n;
};

static void corpus_load(struct corpus *cp, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    memset(cp, 0, sizeof *cp);
    char line[GH_KMSG_LINE_MAX + 64];
    while (fgets(line, sizeof line, f)) {
        size_t ll = strcspn(line, "\n");
        line[ll] = '\0';
        if (ll == 0 || line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        if (!tab)
            fail_msg("%s: no tab in '%s'", path, line);
        assert_true(cp->n < MAX_LINES);
        if (gh_kmsg_label_parse(line, (size_t)(tab - line), &cp->want[cp->n]))
            fail_msg("%s: bad label in '%s'", path, line);
        size_t rl = strlen(tab + 1);
        cp->raw[cp->n] = malloc(rl + 1);
        assert_non_null(cp->raw[cp->n]);
        memcpy(cp->raw[cp->n], tab + 1, rl + 1);
        cp->n++;
    }
    fclose(f);
}

static void corpus_free(struct corpus *cp)
{
    for (size_t i = 0; i < cp->n; i++)
        free(cp->raw[i]);
}

/* ---- the oracle ---------------------------------------------------------------- */

/* Compiled patterns, each written from a printf format of the driver or the
 * kernel, never from the parser. */
struct oracle {
    regex_t xid, sxid, sw, sx_cont, lost_bus, probe_gpu, probe_end, aer_dev, ctime, syslog, iso,
        mono;
};

static void rx(regex_t *r, const char *pat)
{
    int rc = regcomp(r, pat, REG_EXTENDED);
    if (rc)
        fail_msg("regcomp %s: %d", pat, rc);
}

static void oracle_init(struct oracle *o)
{
    /* "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:..]): %d, " (the PCI: prefix is
     * missing on some old lines; "PCI:..." is a redaction: no address) */
    rx(&o->xid, "NVRM: Xid \\((PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})[ )]");
    /* "SXid (PCI:%s): %u, " with a full bus id */
    rx(&o->sxid, "SXid \\(PCI:([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\\.([0-7])\\)");
    rx(&o->sw, "(nvidia-nvswitch[0-9]+): SXid");
    rx(&o->sx_cont, "SXid \\([^)]*\\): [0-9]+, (Data \\{|Severity |.*data\\[[0-9])");
    /* NV_DEV_PRINTF: "NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus.";
     * older drivers: "NVRM: GPU at %04x:%02x:%02x.%x has fallen off the bus." */
    rx(&o->lost_bus, "NVRM: GPU (at )?(([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})\\.([0-7])"
                     "(: .*| has )fallen off the bus");
    /* "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x" ... "fallen off the bus and is
     * not responding to commands." */
    rx(&o->probe_gpu, "NVRM: The NVIDIA GPU ([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\\.([0-7])");
    rx(&o->probe_end, "fallen off the bus and is not responding");
    /* dev_printk: "<driver> <dddd:bb:dd.f>: " */
    rx(&o->aer_dev, "[a-z_0-9]+ ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]):");
    /* wall-clock wrappers at the start of the line */
    rx(&o->ctime, "^(<[0-9]+>)?\\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\\]");
    rx(&o->syslog, "^(<[0-9]+>)?([A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]+)? "
                   "|\\[[A-Z][a-z]{2}[ 0-9][0-9] [0-9]{2}:[0-9]{2}\\])");
    rx(&o->iso, "^(.{0,40}[^0-9])?([0-9]{4}-[0-9]{2}-[0-9]{2})[T ]([0-9]{2}:[0-9]{2}:[0-9]{2})"
                "([.,][0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})?");
    rx(&o->mono, "^(<[0-9]+>)?(\\[ *[0-9]+(\\.[0-9]+)?\\]|[0-9]+,[0-9]+,[0-9]+,)");
}

static void oracle_free(struct oracle *o)
{
    regex_t *all[] = {&o->xid,       &o->sxid,      &o->sw,      &o->sx_cont,
                      &o->lost_bus,  &o->probe_gpu, &o->probe_end, &o->aer_dev,
                      &o->ctime,     &o->syslog,    &o->iso,     &o->mono};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        regfree(all[i]);
}

static bool match(const regex_t *r, const char *s, regmatch_t *m, size_t nm)
{
    return regexec(r, s, nm, m, 0) == 0;
}

/* "dddd:bb:dd.f" from the matched groups (domain of 8 digits cut to 4). */
static void pci_from(const char *s, const regmatch_t *m, int g_dom, char fn, char *out, size_t cap)
{
    const char *d = s + m[g_dom].rm_so;
    size_t dl = (size_t)(m[g_dom].rm_eo - m[g_dom].rm_so);
    while (dl > 4 && *d == '0')   /* "00000000" -> "0000"; VMD domains keep 5 digits */
        d++, dl--;
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s:%.*s:%.*s.%c", (int)dl, d,
             (int)(m[g_dom + 1].rm_eo - m[g_dom + 1].rm_so), s + m[g_dom + 1].rm_so,
             (int)(m[g_dom + 2].rm_eo - m[g_dom + 2].rm_so), s + m[g_dom + 2].rm_so, fn);
    for (char *c = buf; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    snprintf(out, cap, "%s", buf);
}

/* What one line must produce. */
struct expect {
    enum gh_kind kind;          /* GH_KIND__COUNT = no signal of its own */
    int code;
    char pci[32];               /* "" = no pci */
    const char *counter;        /* NULL = none */
    bool folded;                /* an SXid continuation folded into an earlier line */
};

struct sx_state {
    char sw[32];
    char pci[32];
    int code;
    size_t line;
    bool open;
};

/* The time the line's wrapper gives, per its format. */
enum wall { W_NONE, W_WALL, W_BOOT };

static enum wall line_wall(const struct oracle *o, const char *s, int64_t *iso_ns)
{
    regmatch_t m[6];
    *iso_ns = INT64_MIN;
    if (match(&o->iso, s, m, 6) && !match(&o->mono, s, NULL, 0)) {
        char buf[64];
        char frac[16] = "", zone[8] = "Z";
        if (m[4].rm_so >= 0) {
            int fl = (int)(m[4].rm_eo - m[4].rm_so - 1);
            snprintf(frac, sizeof frac, ".%.*s", fl > 9 ? 9 : fl, s + m[4].rm_so + 1);
        }
        if (m[5].rm_so >= 0 && s[m[5].rm_so] != 'Z') {
            const char *z = s + m[5].rm_so;
            bool colon = z[3] == ':';
            snprintf(zone, sizeof zone, "%c%c%c:%c%c", z[0], z[1], z[2], z[colon ? 4 : 3],
                     z[colon ? 5 : 4]);
        }
        snprintf(buf, sizeof buf, "%.10sT%.8s%s%s", s + m[2].rm_so, s + m[3].rm_so, frac, zone);
        assert_true(gh_time_parse_rfc3339(buf, strlen(buf), iso_ns));
        return W_WALL;
    }
    if (match(&o->ctime, s, NULL, 0) || match(&o->syslog, s, NULL, 0))
        return W_WALL;
    if (match(&o->mono, s, NULL, 0))
        return W_BOOT;
    return W_NONE;
}

static void expect_line(const struct oracle *o, const struct corpus *cp, size_t i,
                        struct sx_state *sx, size_t nsx, struct expect *e)
{
    const char *s = cp->raw[i];
    const struct gh_kmsg_label *l = &cp->want[i];
    regmatch_t m[8];
    memset(e, 0, sizeof *e);
    e->kind = GH_KIND__COUNT;
    if (l->cls == GH_KMSG_XID) {
        e->kind = GH_KIND_XID, e->code = l->code;
        if (match(&o->xid, s, m, 8))
            pci_from(s, m, 2, '0', e->pci, sizeof e->pci);
        return;
    }
    if (l->cls == GH_KMSG_SXID) {
        char sw[32] = "";
        if (match(&o->sw, s, m, 2))
            snprintf(sw, sizeof sw, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), s + m[1].rm_so);
        e->kind = GH_KIND_SXID, e->code = l->code;
        if (match(&o->sxid, s, m, 8))
            pci_from(s, m, 1, s[m[4].rm_so], e->pci, sizeof e->pci);
        struct sx_state *st = NULL;
        for (size_t k = 0; k < nsx && !st; k++)
            if (sx[k].open && strcmp(sx[k].sw, sw) == 0)
                st = &sx[k];
        if (st && i - st->line > FOLD_WINDOW)
            st->open = false, st = NULL;
        if (match(&o->sx_cont, s, NULL, 0)) {
            if (sw[0] && st && st->code == l->code &&
                (!st->pci[0] || !e->pci[0] || strcmp(st->pci, e->pci) == 0)) {
                e->folded = true;
                e->kind = GH_KIND__COUNT;
            }
            return;
        }
        if (!st) {
            for (size_t k = 0; k < nsx && !st; k++)
                if (!sx[k].open)
                    st = &sx[k];
            assert_non_null(st);
        }
        snprintf(st->sw, sizeof st->sw, "%s", sw);
        snprintf(st->pci, sizeof st->pci, "%s", e->pci);
        st->code = l->code, st->line = i, st->open = sw[0] != '\0';
        return;
    }
    if (l->cls != GH_KMSG_OTHER)
        return;
    switch (l->other) {
    case GH_KMSG_O_GPU_FALLEN_OFF_BUS:
        e->kind = GH_KIND_GPU_LOST;
        if (match(&o->lost_bus, s, m, 8)) {
            if (m[3].rm_so < 0)      /* no domain printed: domain 0 */
                snprintf(e->pci, sizeof e->pci, "0000:%.2s:%.2s.%c", s + m[4].rm_so,
                         s + m[5].rm_so, s[m[6].rm_so]);
            else
                pci_from(s, m, 3, s[m[6].rm_so], e->pci, sizeof e->pci);
        }
        break;
    case GH_KMSG_O_GPU_LOST_PROBE:
        /* one event per group, dated and numbered by its first line */
        if (match(&o->probe_gpu, s, m, 8)) {
            for (size_t k = i; k < cp->n && k <= i + 3; k++)
                if (match(&o->probe_end, cp->raw[k], NULL, 0)) {
                    e->kind = GH_KIND_GPU_LOST;
                    pci_from(s, m, 1, s[m[4].rm_so], e->pci, sizeof e->pci);
                    break;
                }
        }
        break;
    case GH_KMSG_O_PCIE_AER:
    case GH_KMSG_O_PCIE_AER_CORRECTABLE: {
        const char *sev = strstr(s, "PCIe Bus Error: severity=");
        if (sev)
            e->counter = l->other == GH_KMSG_O_PCIE_AER_CORRECTABLE ? "aer_correctable"
                         : strstr(sev, "(Fatal)")                  ? "aer_fatal"
                                                                    : "aer_uncorrectable";
        else if (strstr(s, "AER: can't recover") || strstr(s, "AER: device recovery failed"))
            e->counter = "aer_recovery_failed";
        else if (strstr(s, "AER: Root Port link has been reset"))
            e->counter = "link_reset";
        if (e->counter) {
            e->kind = GH_KIND_PCIE;
            if (match(&o->aer_dev, s, m, 2))
                snprintf(e->pci, sizeof e->pci, "%.*s", (int)(m[1].rm_eo - m[1].rm_so),
                         s + m[1].rm_so);
        }
        break;
    }
    case GH_KMSG_O_MLX5_PCIE_INSUFFICIENT_POWER:
    case GH_KMSG_O_MLX5_PORT_MODULE_ERROR:
        e->kind = GH_KIND_NIC;
        e->counter = l->other == GH_KMSG_O_MLX5_PORT_MODULE_ERROR ? "port_module_error"
                                                                  : "pcie_insufficient_power";
        if (match(&o->aer_dev, s, m, 2))   /* the adapter's dev_printk prefix */
            snprintf(e->pci, sizeof e->pci, "%.*s", (int)(m[1].rm_eo - m[1].rm_so),
                     s + m[1].rm_so);
        break;
    case GH_KMSG_O_NVLINK_POST_RX_DETECT_FAILURE:
        e->kind = GH_KIND_NVLINK, e->counter = "post_rx_detect_failure";
        break;
    default:
        break;
    }
}

/* Scores one corpus; returns the number of lines checked. */
static size_t score(const char *path, size_t min_lines)
{
    static struct corpus cp;
    corpus_load(&cp, path);
    assert_true(cp.n >= min_lines);
    struct oracle o;
    oracle_init(&o);

    struct coll c;
    coll_new(&c, 0);
    for (size_t i = 0; i < cp.n; i++) {
        struct gh_err err = {{0}};
        if (gh_kmsg_parser_feed(c.p, cp.raw[i], strlen(cp.raw[i]), &err) ||
            gh_kmsg_parser_feed(c.p, "\n", 1, &err))
            fail_msg("%s: feed: %s", path, err.msg);
    }
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);

    struct sx_state sx[16];
    memset(sx, 0, sizeof sx);
    /* a counter signal's count: the lines so far for its device and counter */
    static struct tally {
        char key[64];
        int64_t n;
    } tally[256];
    size_t ntally = 0;
    size_t want_signals = 0, bad = 0, folded = 0;
    for (size_t i = 0; i < cp.n; i++) {
        struct expect e;
        expect_line(&o, &cp, i, sx, 16, &e);
        folded += e.folded;
        const struct rec *own = NULL;
        size_t nown = 0;
        for (size_t k = 0; k < c.n; k++)
            if (c.v[k].meta.line_no == i + 1)
                own = &c.v[k], nown++;
        char why[160] = "";
        if (e.kind == GH_KIND__COUNT) {
            if (nown)
                snprintf(why, sizeof why, "%s signal where none was due",
                         gh_kind_name(own->sig.kind));
        } else {
            want_signals++;
            int64_t want_count = 0;
            if (e.counter) {
                char key[64];
                snprintf(key, sizeof key, "%s/%s", e.pci, e.counter);
                size_t t = 0;
                while (t < ntally && strcmp(tally[t].key, key) != 0)
                    t++;
                if (t == ntally) {
                    assert_true(ntally < 256);
                    snprintf(tally[ntally].key, sizeof tally[ntally].key, "%s", key);
                    tally[ntally++].n = 0;
                }
                want_count = ++tally[t].n;
            }
            int64_t iso_ns;
            enum wall w = line_wall(&o, cp.raw[i], &iso_ns);
            if (nown != 1)
                snprintf(why, sizeof why, "%zu signals, want one %s", nown, gh_kind_name(e.kind));
            else if (own->sig.kind != e.kind)
                snprintf(why, sizeof why, "kind %s, want %s", gh_kind_name(own->sig.kind),
                         gh_kind_name(e.kind));
            else if ((e.kind == GH_KIND_XID || e.kind == GH_KIND_SXID) &&
                     own->sig.code != e.code)
                snprintf(why, sizeof why, "code %d, want %d", own->sig.code, e.code);
            else if (e.kind != GH_KIND_NIC && e.kind != GH_KIND_NVLINK &&
                     strcmp(own->sig.pci ? own->sig.pci : "", e.pci) != 0)
                snprintf(why, sizeof why, "pci %s, want %s", own->sig.pci ? own->sig.pci : "-",
                         e.pci[0] ? e.pci : "-");
            else if (e.counter && (!own->sig.counter || strcmp(own->sig.counter, e.counter)))
                snprintf(why, sizeof why, "counter %s, want %s",
                         own->sig.counter ? own->sig.counter : "-", e.counter);
            else if (e.counter && (!own->sig.has_count || own->sig.count != want_count))
                snprintf(why, sizeof why, "count %lld, want %lld (cumulative per device)",
                         own->sig.has_count ? (long long)own->sig.count : -1LL,
                         (long long)want_count);
            else if ((w == W_WALL && own->meta.stamp != GH_KMSG_STAMP_WALL) ||
                     (w == W_BOOT && own->meta.stamp != GH_KMSG_STAMP_BOOT) ||
                     (w == W_NONE && own->sig.ts_ns != NOW_NS))
                snprintf(why, sizeof why, "stamp kind %d for a line with wrapper kind %d",
                         own->meta.stamp, w);
            else if (iso_ns != INT64_MIN && own->sig.ts_ns != iso_ns)
                snprintf(why, sizeof why, "ts off by %lld ns from the line's own stamp",
                         (long long)(own->sig.ts_ns - iso_ns));
        }
        if (why[0]) {
            bad++;
            print_message("%s line %zu: %s\n  %s\n", path, i + 1, why, cp.raw[i]);
        }
    }
    /* signals numbered by a line the oracle did not expect one for */
    assert_int_equal(c.n, want_signals);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.folded, folded);
    /* every signal encodes (valid UTF-8 and all) */
    for (size_t k = 0; k < c.n; k++) {
        char *line = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&line, &len);
        assert_non_null(mem);
        struct gh_err err = {{0}};
        int rc = gh_signal_write(mem, &c.v[k].sig, &err);
        fclose(mem);
        free(line);
        if (rc)
            fail_msg("%s: signal of line %llu does not encode: %s", path,
                     (unsigned long long)c.v[k].meta.line_no, err.msg);
    }
    if (bad)
        fail_msg("%s: %zu of %zu lines wrong", path, bad, cp.n);
    size_t n = cp.n;
    coll_free(&c);
    oracle_free(&o);
    corpus_free(&cp);
    return n;
}

static void test_score_samples(void **state)
{
    (void)state;
    score(GH_SHARED_DIR "/data/kmsg-samples.txt", 61);
}

static void test_score_extra(void **state)
{
    (void)state;
    score(GH_SOURCE_DIR "/test/data/kmsg-extra.txt", 100);
}

static void test_score_real_corpus(void **state)
{
    (void)state;
    score(GH_SOURCE_DIR "/test/data/kmsg-corpus-extra.txt", 250);
}

/* A second real corpus, from sources the first one does not use (see
 * test/data/kmsg-corpus-extra2.sources). */
static void test_score_real_corpus2(void **state)
{
    (void)state;
    score(GH_SOURCE_DIR "/test/data/kmsg-corpus-extra2.txt", 100);
}

/* ---- every wrapper around the same message ------------------------------------ */

struct wrap_case {
    const char *prefix;
    const char *want;      /* RFC 3339; NULL = now; "boot+S.US" = boot + seconds */
};

#define MSGX "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s"

static void test_wrappers(void **state)
{
    (void)state;
    static const struct wrap_case cases[] = {
        {"4,2215,6781741548779,-;", "boot+6781741.548779"},
        {"4,2215,6781741548779,-,caller=T1946;", "boot+6781741.548779"},
        {"4,2215,1234567890,c,1,-;", "boot+1234.567890"},
        {"[ 1108.858286] ", "boot+1108.858286"},
        {"[6781741.548779] ", "boot+6781741.548779"},
        {"[  130.456250] [ T1946] ", "boot+130.456250"},
        {"[  130.456250] [    C3] ", "boot+130.456250"},
        {"[Sun Feb 23 16:24:18 2025] ", "2025-02-23T16:24:18Z"},
        {"[Sun Feb 23 16:24:18 2025] [ T1946] ", "2025-02-23T16:24:18Z"},
        {"[  +0.000844] ", NULL},
        {"Nov 29 11:28:11 zeus kernel: ", "2025-11-29T11:28:11Z"},
        {"Nov 29 11:28:11 zeus kernel: [ 1108.858286] ", "2025-11-29T11:28:11Z"},
        {"Feb  3 01:02:03 gpu-node-3 kernel: ", "2025-02-03T01:02:03Z"},
        {"2025-02-23T16:24:18.123456+0000 host kernel: ", "2025-02-23T16:24:18.123456Z"},
        {"2025-02-23T16:24:18.123456+0100 host kernel: ", "2025-02-23T15:24:18.123456Z"},
        {"2025-02-23T16:24:18+01:00 host kernel: ", "2025-02-23T15:24:18Z"},
        {"2025-02-23T16:24:18-0500 host kernel: ", "2025-02-23T21:24:18Z"},
        {"[ 1234.567890] host kernel: ", "boot+1234.567890"},
        {"192.168.11.119: kern: warning: [2026-04-22T21:30:51.870495804Z]: ",
         "2026-04-22T21:30:51.870495804Z"},
        {"kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ", "2025-01-21T04:41:44.283302Z"},
        {"kern  :err   : 2025-01-25T10:34:54,859532+01:00 ", "2025-01-25T09:34:54.859532Z"},
        {"kern  :warn  : [ 1108.858286] ", "boot+1108.858286"},
        {"2025-01-21T04:41:44,283302+00:00 ", "2025-01-21T04:41:44.283302Z"},
        {"<4>[ 1108.858286] ", "boot+1108.858286"},
        /* journalctl -o short-full / with-unit, short-unix, short-delta */
        {"Sun 2025-02-23 16:24:18 UTC host kernel: ", "2025-02-23T16:24:18Z"},
        {"Sun 2025-02-23 16:24:18.250 CET host kernel: ", "2025-02-23T16:24:18.25Z"},
        {"1740327858.123456 host kernel: ", "2025-02-23T16:24:18.123456Z"},
        {"[ 1234.567890 <    0.000123>] host kernel: ", "boot+1234.567890"},
        {"2025-02-23T16:24:18.123456789Z [ 1108.858286] ", "2025-02-23T16:24:18.123456789Z"},
        {"kernel: ", NULL},
        {"", NULL},
        /* not stamps: an epoch past 2100, a bare number, a weekday alone */
        {"99999999999.5 host kernel: ", NULL},
        {"1740327858 host kernel: ", NULL},
        {"Sun host kernel: ", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct coll c;
        coll_new(&c, 0);
        char line[512];
        snprintf(line, sizeof line, "%s%s\r\n", cases[i].prefix, MSGX);
        assert_int_equal(gh_kmsg_parser_feed(c.p, line, strlen(line), NULL), GH_OK);
        assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
        if (c.n != 1)
            fail_msg("'%s': %zu signals", cases[i].prefix, c.n);
        const struct gh_signal *s = &c.v[0].sig;
        assert_int_equal(s->kind, GH_KIND_XID);
        assert_int_equal(s->code, 119);
        assert_string_equal(s->pci, "0000:9b:00.0");
        assert_string_equal(s->process, "nvidia-smi");
        assert_true(strncmp(s->msg, "NVRM: Xid (PCI", 14) == 0);
        assert_true(s->msg[strlen(s->msg) - 1] == 's');       /* no \r kept */
        int64_t want = NOW_NS;
        const char *w = cases[i].want;
        if (w && strncmp(w, "boot+", 5) == 0) {
            char *end;
            long long sec = strtoll(w + 5, &end, 10);
            long long us = strtoll(end + 1, NULL, 10);
            want = BOOT_NS + sec * GH_NS_PER_S + us * 1000;
        } else if (w) {
            assert_true(gh_time_parse_rfc3339(w, strlen(w), &want));
        }
        if (s->ts_ns != want) {
            char got[GH_RFC3339_MAX], exp[GH_RFC3339_MAX];
            fail_msg("'%s': ts %s, want %s", cases[i].prefix,
                     gh_time_format_rfc3339(s->ts_ns, got, sizeof got),
                     gh_time_format_rfc3339(want, exp, sizeof exp));
        }
        coll_free(&c);
    }
}

/* /dev/kmsg continuation lines (" KEY=value") between an SXid event and its
 * Data line neither break the fold nor become events. */
static void test_kmsg_dict_lines(void **state)
{
    (void)state;
    struct coll c;
    coll_new(&c, 0);
    const char *log =
        "4,5123,131453740743,-;nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Fatal, Link 30 "
        "LTSSM Fault Up\n"
        " SUBSYSTEM=pci\n"
        " DEVICE=+pci:0000:a9:00.0\n"
        "4,5124,131453740758,-;nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Data "
        "{0x50610002, 0x10100030}\n";
    assert_int_equal(gh_kmsg_parser_feed(c.p, log, strlen(log), NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].meta.folded, 1);
    assert_true(strstr(c.v[0].sig.msg, "\nnvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Data"));
    assert_null(strstr(c.v[0].sig.msg, "SUBSYSTEM"));
    uint64_t seq;
    assert_true(gh_kmsg_parser_last_seq(c.p, &seq));
    assert_int_equal(seq, 5124);
    coll_free(&c);
}

/* Bytes that are not clean text: signals still carry valid UTF-8 (U+FFFD in
 * place of each bad byte), keep the rest of the line, and encode. */
static void test_unclean_bytes(void **state)
{
    (void)state;
    struct coll c;
    coll_new(&c, 0);
    static const char log[] =
        "NVRM: Xid (PCI:0000:01:00): 13, pid=7, name=a\xff\xfe" "b, Graphics Exception\n"
        "NVRM: Xid (PCI:0000:02:00): 43, pid=8, name=x\0y, Ch 00000008\n"
        "NVRM: Xid (PCI:0000:03:00): 31, pid=9, name=caf\xc3\xa9, Ch 1 \xc0\xaf\xed\xa0\x80\n"
        "nvidia-nvswitch0\xff: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 x\xf8\n"
        "NVRM: GPU at PCI:0000:06:00: GPU-\xff\xff\n"
        "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.\n";
    assert_int_equal(gh_kmsg_parser_feed(c.p, log, sizeof log - 1, NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 5);
    for (size_t i = 0; i < c.n; i++) {
        const struct gh_signal *s = &c.v[i].sig;
        const char *f[] = {s->msg, s->process, s->switch_id, s->uuid};
        for (size_t k = 0; k < 4; k++)
            if (f[k])
                assert_true(gh_utf8_valid(f[k], strlen(f[k])));
        char *line = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&line, &len);
        assert_non_null(mem);
        assert_int_equal(gh_signal_write(mem, s, NULL), GH_OK);
        fclose(mem);
        free(line);
    }
    assert_string_equal(c.v[0].sig.process, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
    assert_string_equal(c.v[1].sig.process, "x\xEF\xBF\xBDy");
    assert_non_null(strstr(c.v[1].sig.msg, "Ch 00000008"));   /* the NUL cut nothing */
    assert_string_equal(c.v[2].sig.process, "caf\xc3\xa9");   /* valid UTF-8 kept */
    /* the SXid event stays open for continuation lines until the flush */
    assert_int_equal(c.v[3].sig.code, 79);
    assert_string_equal(c.v[3].sig.uuid, "GPU-\xEF\xBF\xBD\xEF\xBF\xBD");
    assert_int_equal(c.v[4].sig.code, 12028);
    assert_string_equal(c.v[4].sig.switch_id, "nvidia-nvswitch0\xEF\xBF\xBD");
    coll_free(&c);
}

/* A line far longer than GH_KMSG_LINE_MAX is classified on its start, gives
 * one signal with a bounded msg, and the next line is parsed normally. */
static void test_very_long_line(void **state)
{
    (void)state;
    struct coll c;
    coll_new(&c, 0);
    size_t big = 3 * GH_KMSG_LINE_MAX;
    char *log = malloc(big + 256);
    assert_non_null(log);
    int k = snprintf(log, 256, "[ 1.5] NVRM: Xid (PCI:0000:01:00): 48, pid=1, name=a, ");
    memset(log + k, 'A', big);
    size_t n = (size_t)k + big;
    n += (size_t)snprintf(log + n, 256, "\n[ 2.5] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen "
                                        "off the bus.\n");
    assert_int_equal(gh_kmsg_parser_feed(c.p, log, n, NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.v[0].sig.code, 48);
    assert_true(strlen(c.v[0].sig.msg) <= 4096);
    assert_int_equal(c.v[1].sig.code, 79);
    assert_int_equal(c.v[1].sig.ts_ns, BOOT_NS + 2500000000LL);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.truncated, 1);
    assert_int_equal(st.lines, 2);
    free(log);
    coll_free(&c);
}

/* A message of multi-byte characters and bad bytes past the msg cap is cut
 * on a character boundary: still valid UTF-8, at most 4096 bytes. */
static void test_cut_on_character(void **state)
{
    (void)state;
    struct coll c;
    coll_new(&c, 0);
    char line[6000];
    int k = snprintf(line, sizeof line, "NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, ");
    size_t n = (size_t)k;
    while (n + 3 < sizeof line - 2) {
        memcpy(line + n, (n % 7) ? "\xc3\xa9" : "\xff\xe2\x82", (n % 7) ? 2 : 3);
        n += (n % 7) ? 2 : 3;
    }
    line[n++] = '\n';
    assert_int_equal(gh_kmsg_parser_feed(c.p, line, n, NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 1);
    size_t ml = strlen(c.v[0].sig.msg);
    assert_true(ml <= 4096 && ml > 4000);
    assert_true(gh_utf8_valid(c.v[0].sig.msg, ml));
    coll_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_samples),
        cmocka_unit_test(test_score_extra),
        cmocka_unit_test(test_score_real_corpus),
        cmocka_unit_test(test_score_real_corpus2),
        cmocka_unit_test(test_wrappers),
        cmocka_unit_test(test_kmsg_dict_lines),
        cmocka_unit_test(test_unclean_bytes),
        cmocka_unit_test(test_very_long_line),
        cmocka_unit_test(test_cut_on_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
